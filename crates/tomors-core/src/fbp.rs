//! Filtered back projection of parallel-beam data over a stack of slices.

use std::ops::Range;

use ndarray::{s, Array3, ArrayView3, ArrayViewMut3};
use rayon::prelude::*;

use crate::backend::{Backend, Interpolation};
use crate::error::{CoreError, Result};
use crate::filter::FilterSpec;
use crate::fourier::{FourierOptions, Method};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Parameters of filtered back projection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FbpOptions {
    /// The ramp filter and its window.
    pub filter: FilterSpec,
    /// Detector interpolation of the back projection.
    pub interpolation: Interpolation,
    /// Slices handed to the backend at once.
    pub slab: usize,
    /// The exact back projection (default) or direct Fourier
    /// reconstruction (gridding, [`crate::fourier`]; `interpolation` unused).
    pub method: Method,
}

impl Default for FbpOptions {
    fn default() -> Self {
        Self {
            filter: FilterSpec::default(),
            interpolation: Interpolation::Linear,
            slab: 32,
            method: Method::Direct,
        }
    }
}

/// Reconstructs every sinogram of `sinograms` (`[slice][angle][bin]`) on
/// `grid`; returns slices `[slice][y][x]`.
pub fn fbp_sinograms(
    backend: &dyn Backend,
    sinograms: ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    options: &FbpOptions,
) -> Result<Array3<f32>> {
    fbp_sinograms_with_progress(backend, sinograms, geometry, grid, options, &mut |_, _| {
        true
    })
}

/// As [`fbp_sinograms`], calling `progress(done, total)` (slices) after each
/// slab; returning `false` from it stops the work with
/// [`CoreError::Cancelled`].
pub fn fbp_sinograms_with_progress(
    backend: &dyn Backend,
    sinograms: ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    options: &FbpOptions,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<Array3<f32>> {
    let (ns, na, nb) = sinograms.dim();
    if na != geometry.n_angles() || nb != geometry.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the geometry {} × {}",
            geometry.n_angles(),
            geometry.n_bins()
        )));
    }
    if ns == 0 {
        return Err(CoreError::Shape("no slices to reconstruct".into()));
    }
    options.filter.validate()?;
    let slab = options.slab.max(1);
    let mut out = Array3::<f32>::zeros((ns, grid.ny, grid.nx));
    let mut start = 0;
    while start < ns {
        let end = (start + slab).min(ns);
        let (slab_in, slab_out) = (
            sinograms.slice(s![start..end, .., ..]),
            out.slice_mut(s![start..end, .., ..]),
        );
        match options.method {
            Method::Direct => backend.fbp(
                slab_in,
                geometry,
                grid,
                &options.filter,
                options.interpolation,
                slab_out,
            )?,
            Method::Fourier => {
                let f = FourierOptions {
                    filter: options.filter,
                    ..FourierOptions::default()
                };
                backend.fourier(slab_in, geometry, grid, &f, slab_out)?
            }
        }
        start = end;
        if !progress(start, ns) {
            return Err(CoreError::Cancelled);
        }
    }
    Ok(out)
}

/// Re-arranges projections `[angle][row][col]` into sinograms
/// `[row][angle][col]` for the detector rows in `rows` (C order); the
/// detector lines are copied in parallel.
pub fn projections_to_sinograms(
    projections: ArrayView3<'_, f32>,
    rows: Range<usize>,
) -> Result<Array3<f32>> {
    let (na, n_rows, nb) = projections.dim();
    check_rows(&rows, n_rows)?;
    let mut out = Array3::<f32>::zeros((rows.len(), na, nb));
    projections_to_sinograms_into(projections, rows, out.view_mut())?;
    Ok(out)
}

fn check_rows(rows: &Range<usize>, n_rows: usize) -> Result<()> {
    if rows.start > rows.end || rows.end > n_rows {
        return Err(CoreError::Shape(format!(
            "rows {}..{} outside the detector's {n_rows} rows",
            rows.start, rows.end
        )));
    }
    Ok(())
}

/// [`projections_to_sinograms`] into `out` (`[rows.len()][angle][col]`),
/// reusing its memory: a loop over slabs of rows keeps one buffer instead
/// of allocating (and first touching, then freeing) one per slab.
pub fn projections_to_sinograms_into(
    projections: ArrayView3<'_, f32>,
    rows: Range<usize>,
    mut out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    let (na, n_rows, nb) = projections.dim();
    check_rows(&rows, n_rows)?;
    if out.dim() != (rows.len(), na, nb) {
        return Err(CoreError::Shape(format!(
            "sinograms of shape {:?} for rows {}..{} of {na} angles × {nb} bins",
            out.dim(),
            rows.start,
            rows.end
        )));
    }
    if out.is_empty() {
        return Ok(());
    }
    let copy = |i: usize, line: &mut [f32]| {
        let src = projections.slice(s![i % na, rows.start + i / na, ..]);
        match src.as_slice() {
            Some(v) => line.copy_from_slice(v),
            None => line.iter_mut().zip(src.iter()).for_each(|(d, v)| *d = *v),
        }
    };
    match out.as_slice_mut() {
        Some(dst) => dst
            .par_chunks_mut(nb)
            .enumerate()
            .for_each(|(i, line)| copy(i, line)),
        None => {
            for (r, mut sino) in out.outer_iter_mut().enumerate() {
                for (a, mut line) in sino.outer_iter_mut().enumerate() {
                    line.assign(&projections.slice(s![a, rows.start + r, ..]));
                }
            }
        }
    }
    Ok(())
}

/// Floats per parallel task of [`check_finite`].
const FINITE_CHUNK: usize = 1 << 16;

/// Checks that data contain at least one value and only finite values;
/// the error names the first non-finite value in C order. Contiguous data
/// are scanned in parallel.
pub fn check_finite(data: ArrayView3<'_, f32>, what: &str) -> Result<()> {
    if data.is_empty() {
        return Err(CoreError::Data(format!("{what} is empty")));
    }
    let found = match data.as_slice() {
        Some(v) => v
            .par_chunks(FINITE_CHUNK)
            // No early exit inside a chunk: the fold vectorises.
            .position_first(|c| !c.iter().fold(true, |ok, x| ok & x.is_finite()))
            .map(|k| {
                let start = k * FINITE_CHUNK;
                let i = start
                    + v[start..]
                        .iter()
                        .position(|x| !x.is_finite())
                        .expect("the chunk holds a non-finite value");
                let (_, d1, d2) = data.dim();
                ((i / (d1 * d2), (i / d2) % d1, i % d2), v[i])
            }),
        None => data
            .indexed_iter()
            .find(|(_, v)| !v.is_finite())
            .map(|(i, v)| (i, *v)),
    };
    if let Some((pos, v)) = found {
        return Err(CoreError::Data(format!(
            "{what} contains a non-finite value ({v}) at {pos:?}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinograms_are_the_rows_of_the_projections() {
        let p = Array3::from_shape_fn((5, 4, 3), |(a, r, c)| (100 * a + 10 * r + c) as f32);
        let s = projections_to_sinograms(p.view(), 1..3).unwrap();
        assert_eq!(s.dim(), (2, 5, 3));
        assert_eq!(
            s,
            p.slice(s![.., 1..3, ..])
                .permuted_axes([1, 0, 2])
                .to_owned()
        );
        // A strided view (every other column) gives the same as its copy.
        let v = p.slice(s![.., .., ..;2]);
        assert_eq!(
            projections_to_sinograms(v, 0..4).unwrap(),
            v.permuted_axes([1, 0, 2]).to_owned()
        );
        assert!(projections_to_sinograms(p.view(), 3..5).is_err());
        // Into a reused buffer: the same values, wrong shapes refused.
        let mut buf = Array3::<f32>::from_elem((2, 5, 3), -1.0);
        projections_to_sinograms_into(p.view(), 1..3, buf.view_mut()).unwrap();
        assert_eq!(buf, s);
        assert!(projections_to_sinograms_into(p.view(), 0..1, buf.view_mut()).is_err());
        assert_eq!(
            projections_to_sinograms(p.view(), 2..2).unwrap().dim(),
            (0, 5, 3)
        );
    }

    #[test]
    fn the_first_non_finite_value_is_named() {
        let mut a = Array3::<f32>::zeros((3, 300, 400));
        assert!(check_finite(a.view(), "x").is_ok());
        a[[2, 10, 7]] = f32::INFINITY;
        a[[1, 299, 398]] = f32::NAN;
        let e = check_finite(a.view(), "the data").unwrap_err().to_string();
        assert!(e.contains("NaN) at (1, 299, 398)"), "{e}");
        // The same through a strided (non-contiguous) view.
        let e = check_finite(a.slice(s![.., .., ..;2]), "v")
            .unwrap_err()
            .to_string();
        assert!(e.contains("NaN) at (1, 299, 199)"), "{e}");
        assert!(check_finite(Array3::<f32>::zeros((0, 2, 2)).view(), "e").is_err());
    }
}
