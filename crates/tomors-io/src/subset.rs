//! A scan seen through a region of interest and binning: a subset of the
//! projections (`start..end` every `step`), a range of detector columns,
//! and averages of `angles × rows × cols` blocks of the result (remainders
//! that do not fill a block are dropped). Flats and darks are cropped and
//! binned the same way (their groups' positions follow the projection
//! indices), so the preprocessing of the subset sees a consistent scan.
//!
//! Rows of the subset are binned rows: row `i` averages detector rows
//! `i·R .. (i+1)·R`. Column `j` averages detector columns
//! `c0 + j·C .. c0 + (j+1)·C`, whose centre is at detector position
//! `c0 + j·C + (C − 1)/2` (see [`Subset::to_subset_column`]).

use std::ops::Range;
use std::path::Path;

use ndarray::{s, Array3, ArrayView3, Axis};

use crate::error::{IoError, Result};
use crate::source::{check_rows, FrameGroup, ProjectionSource, RawSlab};

/// What to keep of a scan and how to bin it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubsetSpec {
    /// Projections `start..end` of the scan.
    pub projections: Range<usize>,
    /// Every `step`-th projection of that range.
    pub step: usize,
    /// Detector columns kept.
    pub cols: Range<usize>,
    /// Bin factors `[angles, rows, cols]` (1: none).
    pub bin: [usize; 3],
}

/// A source restricted to a [`SubsetSpec`].
pub struct Subset {
    inner: Box<dyn ProjectionSource>,
    spec: SubsetSpec,
    shape: [usize; 3],
    angles: Vec<f32>,
}

impl Subset {
    /// Wraps `inner`, whose projections have the angles `angles` (one per
    /// projection, radians); the subset's angles are the means of the kept
    /// projections' angles in each bin.
    pub fn new(inner: Box<dyn ProjectionSource>, angles: &[f32], spec: SubsetSpec) -> Result<Self> {
        let [na, nr, nc] = inner.shape();
        let path = inner.path().display().to_string();
        let bad = |m: String| Err(IoError::Parameter(format!("{path}: {m}")));
        let SubsetSpec {
            projections: p,
            step,
            cols,
            bin,
        } = &spec;
        if angles.len() != na {
            return bad(format!("{} angles for {na} projections", angles.len()));
        }
        if p.start >= p.end || p.end > na || *step == 0 {
            return bad(format!(
                "projections {}..{} step {step} outside the scan's {na}",
                p.start, p.end
            ));
        }
        if cols.start >= cols.end || cols.end > nc {
            return bad(format!(
                "columns {}..{} outside the detector's {nc}",
                cols.start, cols.end
            ));
        }
        if bin.contains(&0) {
            return bad("bin factors must be at least 1".into());
        }
        let kept = p.len().div_ceil(*step);
        let shape = [kept / bin[0], nr / bin[1], cols.len() / bin[2]];
        if shape.contains(&0) {
            return bad(format!(
                "binning {}×{}×{} leaves nothing of {kept} projections × {nr} rows × {} columns",
                bin[0],
                bin[1],
                bin[2],
                cols.len()
            ));
        }
        let sel: Vec<usize> = (p.start..p.end).step_by(*step).collect();
        let angles = (0..shape[0])
            .map(|i| {
                let s: f64 = sel[i * bin[0]..(i + 1) * bin[0]]
                    .iter()
                    .map(|&k| f64::from(angles[k]))
                    .sum();
                (s / bin[0] as f64) as f32
            })
            .collect();
        Ok(Self {
            inner,
            spec,
            shape,
            angles,
        })
    }

    /// A detector column position (the original detector's pixel units,
    /// pixel `k` centred at `k`) in the subset's column units.
    pub fn to_subset_column(&self, c: f64) -> f64 {
        let b = self.spec.bin[2] as f64;
        (c - self.spec.cols.start as f64 - (b - 1.0) / 2.0) / b
    }

    /// The indices of the projections kept, before angle binning.
    fn selected(&self) -> Vec<usize> {
        let p = &self.spec.projections;
        (p.start..p.end)
            .step_by(self.spec.step)
            .take(self.shape[0] * self.spec.bin[0])
            .collect()
    }

    /// Crops the columns and bins rows and columns of `[frame][row][col]`
    /// (rows already restricted to whole bins).
    fn bin_frames(&self, frames: ArrayView3<'_, f32>) -> Array3<f32> {
        let [_, br, bc] = self.spec.bin;
        let c0 = self.spec.cols.start;
        let (nf, nr, _) = frames.dim();
        let (or, oc) = (nr / br, self.shape[2]);
        let norm = 1.0 / (br * bc) as f32;
        Array3::from_shape_fn((nf, or, oc), |(f, r, c)| {
            frames
                .slice(s![f, r * br..(r + 1) * br, c0 + c * bc..c0 + (c + 1) * bc])
                .sum()
                * norm
        })
    }
}

impl ProjectionSource for Subset {
    crate::source::wrapped_source_accessors!();

    fn stored_value_bytes(&self) -> usize {
        self.inner.stored_value_bytes()
    }

    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
        check_rows(self.path(), &rows, self.shape[1])?;
        let br = self.spec.bin[1];
        let raw = self.inner.read_raw(rows.start * br..rows.end * br)?;
        let sel = self.selected();
        let picked = raw.projections.select(Axis(0), &sel);
        let binned = self.bin_frames(picked.view());
        let ba = self.spec.bin[0];
        let (_, nr, nc) = binned.dim();
        let projections = Array3::from_shape_fn((self.shape[0], nr, nc), |(i, r, c)| {
            binned.slice(s![i * ba..(i + 1) * ba, r, c]).sum() / ba as f32
        });
        let p0 = self.spec.projections.start as f64;
        let scale = (self.spec.step * ba) as f64;
        let map = |groups: Vec<FrameGroup>| -> Vec<FrameGroup> {
            groups
                .into_iter()
                .map(|g| FrameGroup {
                    position: ((g.position - p0) / scale).max(0.0),
                    frames: self.bin_frames(g.frames.view()),
                })
                .collect()
        };
        Ok(RawSlab {
            rows,
            projections,
            flats: map(raw.flats),
            darks: map(raw.darks),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Mem {
        data: Array3<f32>,
        angles: Vec<f32>,
    }

    impl ProjectionSource for Mem {
        fn path(&self) -> &Path {
            Path::new("mem")
        }
        fn format(&self) -> &'static str {
            "memory"
        }
        fn shape(&self) -> [usize; 3] {
            let (a, b, c) = self.data.dim();
            [a, b, c]
        }
        fn angles(&self) -> &[f32] {
            &self.angles
        }
        fn n_flats(&self) -> usize {
            0
        }
        fn n_darks(&self) -> usize {
            0
        }
        fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
            Ok(RawSlab {
                projections: self.data.slice(s![.., rows.clone(), ..]).to_owned(),
                rows,
                flats: vec![],
                darks: vec![],
            })
        }
    }

    #[test]
    fn subset_crops_and_bins() {
        let data = Array3::from_shape_fn((10, 6, 8), |(a, r, c)| (a * 100 + r * 10 + c) as f32);
        let angles: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let mem = Mem {
            data: data.clone(),
            angles: angles.clone(),
        };
        let spec = SubsetSpec {
            projections: 1..9,
            step: 2,
            cols: 1..8,
            bin: [2, 2, 3],
        };
        let sub = Subset::new(Box::new(mem), &angles, spec).unwrap();
        // Projections 1, 3, 5, 7 → 2 bins; rows 6/2 = 3; columns 7/3 = 2.
        assert_eq!(sub.shape(), [2, 3, 2]);
        assert_eq!(sub.angles(), &[2.0, 6.0]);
        let raw = sub.read_raw(1..3).unwrap();
        // Bin (0, row 1, col 0): projections 1, 3; rows 2, 3; cols 1..4.
        let want = (100.0 + 300.0) / 2.0 + 25.0 + 2.0;
        assert_eq!(raw.projections[[0, 0, 0]], want);
        assert_eq!(raw.projections.dim(), (2, 2, 2));
        // Column 0 averages detector columns 1, 2, 3: centre 2.
        assert_eq!(sub.to_subset_column(2.0), 0.0);
    }
}
