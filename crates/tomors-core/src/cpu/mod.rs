//! The CPU backend: the reference implementation of every backend operation,
//! and a fast multi-slice SIMD back projector.

mod backproject;
mod reference;

pub use backproject::{backproject_slices, LANES};
pub use reference::backproject_reference;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};

use crate::backend::{Backend, Interpolation};
use crate::error::Result;
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
