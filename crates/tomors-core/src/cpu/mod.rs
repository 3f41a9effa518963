//! The CPU backend: the reference implementation of every backend operation,
//! and a fast multi-slice SIMD back projector.

mod backproject;
mod reference;

pub use backproject::{backproject_slices, LANES};
pub use reference::backproject_reference;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};

use crate::backend::{Backend, Interpolation};
use crate::error::{CoreError, Result};
use crate::filter::{FilterSpec, RowFilter};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// The multi-threaded CPU backend (rayon's global pool).
#[derive(Clone, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// A CPU backend using every core of rayon's pool.
    pub fn new() -> Self {
        Self
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!("cpu ({} threads)", rayon::current_num_threads())
    }

    fn filter(
        &self,
        mut sinograms: ArrayViewMut3<'_, f32>,
        filter: &FilterSpec,
        bin_width: f32,
    ) -> Result<()> {
        let n = sinograms.len_of(Axis(2));
        let plan = RowFilter::new(filter, n, bin_width)?;
        for sino in sinograms.axis_iter_mut(Axis(0)) {
            plan.apply(sino)?;
        }
        Ok(())
    }

    fn backproject(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        interpolation: Interpolation,
        scale: f32,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        backproject_slices(sinograms, geometry, grid, interpolation, scale, out)
    }
}

/// Checks that sinograms `[slice][angle][bin]` and slices `[slice][y][x]`
/// fit the geometry and grid.
pub(crate) fn check_shapes(
    sinograms: &ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    out: &ArrayViewMut3<'_, f32>,
) -> Result<()> {
    let (ns, na, nb) = sinograms.dim();
    if na != geometry.n_angles() || nb != geometry.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the geometry {} × {}",
            geometry.n_angles(),
            geometry.n_bins()
        )));
    }
    if out.dim() != (ns, grid.ny, grid.nx) {
        return Err(CoreError::Shape(format!(
            "output is {:?}, expected {:?}",
            out.dim(),
            (ns, grid.ny, grid.nx)
        )));
    }
    Ok(())
}
