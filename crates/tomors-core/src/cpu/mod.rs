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

/// Which builds of the CPU back projectors' inner loops run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimdChoice {
    /// The SIMD intrinsics the processor offers (AVX2 + FMA, detected at
    /// run time), else the portable code (the default).
    #[default]
    Auto,
    /// The portable code (auto-vectorised where the compiler can) on every
    /// processor: for comparisons with the SIMD builds.
    Portable,
}

/// The multi-threaded CPU backend (rayon's global pool).
#[derive(Clone, Debug, Default)]
pub struct CpuBackend {
    simd: SimdChoice,
}

impl CpuBackend {
    /// A CPU backend using every core of rayon's pool and the best SIMD
    /// the processor offers.
    pub fn new() -> Self {
        Self::default()
    }

    /// A CPU backend whose back projection runs the builds `simd`
    /// ([`SimdChoice::Portable`]: the portable kernels).
    pub fn with_simd(simd: SimdChoice) -> Self {
        Self { simd }
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
        backproject_slices(
            sinograms,
            geometry,
            grid,
            interpolation,
            scale,
            out,
            self.simd,
        )
    }
}
