//! Filtered back projection of parallel-beam data over a stack of slices.

use std::ops::Range;

use ndarray::{s, Array3, ArrayView3, Axis};

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
/// `[row][angle][col]` for the detector rows in `rows` (C order).
pub fn projections_to_sinograms(
    projections: ArrayView3<'_, f32>,
    rows: Range<usize>,
) -> Result<Array3<f32>> {
    let n_rows = projections.len_of(Axis(1));
    if rows.start > rows.end || rows.end > n_rows {
        return Err(CoreError::Shape(format!(
            "rows {}..{} outside the detector's {n_rows} rows",
            rows.start, rows.end
        )));
    }
    let view = projections.slice(s![.., rows, ..]).permuted_axes([1, 0, 2]);
    Ok(view.as_standard_layout().into_owned())
}

/// Checks that data contain at least one value and only finite values.
pub fn check_finite(data: ArrayView3<'_, f32>, what: &str) -> Result<()> {
    if data.is_empty() {
        return Err(CoreError::Data(format!("{what} is empty")));
    }
    if let Some(pos) = data.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(CoreError::Data(format!(
            "{what} contains a non-finite value ({}) at {:?}",
            pos.1, pos.0
        )));
    }
    Ok(())
}
