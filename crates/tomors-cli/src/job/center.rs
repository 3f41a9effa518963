//! The rotation centre of a parallel-beam job: given, or found on a few
//! detector rows (Vo et al. 2014 Fourier metric, `tomors-io`); a
//! half-acquisition scan's comes from its stitching ([`super::half`]).

use std::ops::Range;

use anyhow::{bail, Context, Result};
use ndarray::Axis;
use tomors_core::ParallelGeometry;
use tomors_io::{find_center, CenterOptions, Preprocess, ProjectionSource};

pub use super::geometry::search_rows;
use super::geometry::{CenterArg, GeometrySpec};
use super::input::Scan;

/// The centre found on several rows.
#[derive(Clone, Debug)]
pub struct AutoCenter {
    /// The median of the rows' centres.
    pub center: f32,
    /// The mean quality of the rows.
    pub quality: f32,
    /// `(row, centre, quality)` of each row searched.
    pub rows: Vec<(usize, f32, f32)>,
}

/// Finds the rotation centre of `source` on the given detector rows.
pub fn auto_center(
    source: &dyn ProjectionSource,
    angles: &[f32],
    pre: &Preprocess,
    rows: &[usize],
    options: &CenterOptions,
) -> Result<AutoCenter> {
    let n_rows = source.shape()[1];
    let mut found = Vec::new();
    for &r in rows {
        if r >= n_rows {
            bail!(
                "{}: row {r} outside the detector's {n_rows} rows",
                source.path().display()
            );
        }
        let p = source.read_rows(r..r + 1, pre)?;
        let res = find_center(p.index_axis(Axis(1), 0), angles, options).map_err(|e| {
            let e = e.to_string();
            let e = e.trim_start_matches("invalid parameter: ");
            anyhow::anyhow!("{}: row {r}: {e}", source.path().display())
        })?;
        if let Some(w) = res.warning() {
            tracing::warn!("{}: row {r}: {w}", source.path().display());
        }
        tracing::info!(
            "row {r}: centre {:.2} (quality {:.3}){}",
            res.center,
            res.quality,
            if res.at_edge {
                " — at the edge of the search range"
            } else {
                ""
            }
        );
        found.push((r, res.center, res.quality));
    }
    let mut cs: Vec<f32> = found.iter().map(|f| f.1).collect();
    let center = tomors_io::preprocess::median(&mut cs);
    let quality = found.iter().map(|f| f.2).sum::<f32>() / found.len() as f32;
    Ok(AutoCenter {
        center,
        quality,
        rows: found,
    })
}

/// A rotation axis that drifts linearly with the detector row, in the
/// scan's column units: every row is shifted so that its axis lands on one
/// centre, the mean of the two ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Drift {
    /// The axis at the first detector row (scan columns).
    pub first: f64,
    /// The axis at the last detector row (scan columns).
    pub last: f64,
    /// Detector rows (before binning).
    pub detector_rows: usize,
    /// Detector rows per scan row.
    pub row_bin: usize,
}

impl Drift {
    /// The common centre every row is shifted to.
    pub fn target(&self) -> f64 {
        0.5 * (self.first + self.last)
    }

    /// The axis of the scan's row `i`.
    pub fn axis(&self, i: usize) -> f64 {
        let b = self.row_bin as f64;
        let r = i as f64 * b + (b - 1.0) / 2.0;
        let t = r / (self.detector_rows.max(2) - 1) as f64;
        self.first + (self.last - self.first) * t
    }

    /// Shifts each row of `projections` `[angle][row][col]` (the scan's rows
    /// `rows`) so that its axis is at [`Self::target`] (linear
    /// interpolation, edges extended).
    pub fn apply(&self, projections: &mut ndarray::Array3<f32>, rows: &Range<usize>) {
        use rayon::prelude::*;
        let target = self.target();
        projections
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .for_each(|mut p| {
                for (k, row) in p.axis_iter_mut(Axis(0)).enumerate() {
                    tomors_io::correct::shift_row(row, target - self.axis(rows.start + k));
                }
            });
    }
}

/// The centre of a job and an optional drift of it.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Centre {
    /// The centre of the geometry (`None`: the detector centre).
    pub center: Option<f32>,
    /// With `--center A:B`: the shifts that bring every row to `center`.
    pub drift: Option<Drift>,
}

impl Centre {
    /// The parallel-beam geometry of `scan` (its angles and bins) with this
    /// centre; errors name the scan's file.
    pub fn geometry(&self, scan: &Scan) -> Result<ParallelGeometry> {
        let path = || scan.path().display().to_string();
        let geometry =
            ParallelGeometry::new(scan.angles.clone(), scan.shape()[2]).with_context(path)?;
        Ok(match self.center {
            Some(c) => geometry.with_center(c).with_context(path)?,
            None => geometry,
        })
    }
}

/// The options of the centre search of `--center auto`: the default
/// (±50 px around the middle), or `--center-range` (whole-detector pixels,
/// converted to the scan's columns).
pub fn search_options(scan: &Scan, spec: &GeometrySpec) -> Result<CenterOptions> {
    let Some((a, b)) = spec.center_range else {
        return Ok(CenterOptions::default());
    };
    let (a, b) = (
        scan.to_scan_column(f64::from(a)),
        scan.to_scan_column(f64::from(b)),
    );
    CenterOptions::for_range(a as f32, b as f32, scan.shape()[2]).map_err(|e| {
        anyhow::anyhow!(
            "{}: --center-range: {}",
            scan.path().display(),
            e.to_string().trim_start_matches("invalid parameter: ")
        )
    })
}

/// The centre of a parallel-beam job on `rows` of `scan`: `--center`'s
/// position (whole-detector pixels, converted to the scan's columns after
/// `--cols`/`--binning`), a drift `A:B`, found with `--center auto` (on
/// `--center-row` or rows spread over `rows`), or `None` for the detector
/// centre.
pub fn resolve(scan: &Scan, spec: &GeometrySpec, rows: &Range<usize>) -> Result<Centre> {
    if let Some(h) = &scan.half {
        // Stitched as the scan was opened: the axis of the wide rows.
        return Ok(Centre {
            center: Some(h.center as f32),
            drift: None,
        });
    }
    let center = match spec.center {
        None => None,
        Some(CenterArg::At(c)) => Some(scan.to_scan_column(f64::from(c)) as f32),
        Some(CenterArg::Drift(a, b)) => {
            let drift = Drift {
                first: scan.to_scan_column(f64::from(a)),
                last: scan.to_scan_column(f64::from(b)),
                detector_rows: scan.row_bin.1,
                row_bin: scan.row_bin.0,
            };
            tracing::info!(
                "rotation axis drifting from {a} to {b}: rows shifted to a centre of {:.2}",
                drift.target()
            );
            return Ok(Centre {
                center: Some(drift.target() as f32),
                drift: Some(drift),
            });
        }
        Some(CenterArg::Auto) => {
            let search = search_rows(rows, spec.center_row);
            let options = search_options(scan, spec)?;
            let found = auto_center(
                scan.source.as_ref(),
                &scan.angles,
                &scan.pre,
                &search,
                &options,
            )?;
            tracing::info!(
                "rotation centre {:.2} (quality {:.3})",
                found.center,
                found.quality
            );
            Some(found.center)
        }
    };
    Ok(Centre {
        center,
        drift: None,
    })
}
