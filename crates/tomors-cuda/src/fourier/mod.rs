//! Direct Fourier reconstruction by gridding on the GPU (`--method
//! fourier`): the CUDA port of [`tomors_core::fourier`], which is its
//! reference (same plan, same f32 gather). Kernels in `kernels/gridrec.cu`:
//! `gr_pad` packs two slices as one complex sinogram, cuFFT transforms the
//! padded rows, `gr_weight` applies filter, FBP weight and axis phase,
//! `gr_gather` computes each Cartesian grid point from the polar samples
//! within the kernel's support (one thread and one write per point, no
//! atomics), cuFFT inverts the grids, `gr_crop` deapodizes, crops and
//! splits the pairs. Slabs stream through upload, compute and download on
//! three streams (as the FBP pipeline).
//!
//! This layer depends on [`crate::runtime`] only; the FBP backends
//! ([`crate::CudaBackend`], [`crate::MultiCudaBackend`]) reach it through
//! [`tomors_core::Backend::fourier`].

mod engine;
mod fft2;

use std::sync::Mutex;

use ndarray::{ArrayView3, ArrayViewMut3};
use tomors_core::fourier::{FourierOptions, FourierPlan};
use tomors_core::{ParallelGeometry, SliceGrid};

pub use engine::{GatherKind, GRIDREC_CU};

use crate::error::{CudaError, Result};
use engine::FourierEngine;

/// Times of the stages of the last reconstruction.
#[derive(Clone, Debug, Default)]
pub struct FourierStats {
    /// Slices reconstructed.
    pub slices: usize,
    /// Slabs.
    pub slabs: usize,
    /// Slices per slab.
    pub slab_size: usize,
    /// The gather variant (tile or point).
    pub gather: String,
    /// Host-to-device copies, summed (GPU ms).
    pub upload_ms: f64,
    /// Padding, 1D FFT and weighting, summed (GPU ms).
    pub fft_ms: f64,
    /// Gathering onto the grid, summed (GPU ms).
    pub gather_ms: f64,
    /// 2D inverse FFT and crop, summed (GPU ms).
    pub ifft_ms: f64,
    /// Device-to-host copies, summed (GPU ms).
    pub download_ms: f64,
    /// Host copies into pinned staging memory (ms).
    pub host_in_ms: f64,
    /// Host copies out of pinned staging memory (ms).
    pub host_out_ms: f64,
    /// Wall time of the whole call (ms).
    pub wall_ms: f64,
    /// Whether the input was page-locked and copied without staging.
    pub pinned_in: bool,
    /// Whether the output was page-locked and written without staging.
    pub pinned_out: bool,
}

impl std::fmt::Display for FourierStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slices in {} slabs of {} ({} gather): wall {:.1} ms; GPU upload {:.1}, 1D FFT+weight {:.1}, \
             gather {:.1}, 2D FFT+crop {:.1}, download {:.1} ms; host copies in {:.1}, out {:.1} ms \
             (input {}, output {})",
            self.slices,
            self.slabs,
            self.slab_size,
            self.gather,
            self.wall_ms,
            self.upload_ms,
            self.fft_ms,
            self.gather_ms,
            self.ifft_ms,
            self.download_ms,
            self.host_in_ms,
            self.host_out_ms,
            if self.pinned_in { "page-locked" } else { "pageable" },
            if self.pinned_out { "page-locked" } else { "pageable" }
        )
    }
}

/// The gridding reconstruction on one device.
pub struct CudaFourier {
    engine: Mutex<FourierEngine>,
    name: String,
}

impl CudaFourier {
    /// Opens device `ordinal` and compiles (or loads from the cache) the
    /// gridding kernels.
    pub fn new(ordinal: usize) -> Result<Self> {
        let engine = FourierEngine::new(ordinal)?;
        let name = format!("cuda:{} {}", ordinal, engine.ctx.name);
        Ok(Self {
            engine: Mutex::new(engine),
            name,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, FourierEngine>> {
        self.engine
            .lock()
            .map_err(|_| CudaError::Parameter("a previous call on this device panicked".into()))
    }

    /// Sets the gather variant (default: [`GatherKind::Warp`]).
    pub fn set_gather(&self, kind: GatherKind) -> Result<()> {
        self.lock()?.gather = kind;
        Ok(())
    }

    /// Sets the slices per slab (0 = automatic, about 4 GB of device memory).
    pub fn set_slab(&self, slices: usize) -> Result<()> {
        self.lock()?.slab_override = slices;
        Ok(())
    }

    /// `len` floats of page-locked host memory on this device's context:
    /// input and output arrays there are copied by DMA without staging.
    pub fn pinned(&self, len: usize) -> Result<crate::runtime::PinnedBuffer> {
        let ctx = self.lock()?.ctx.clone();
        crate::runtime::PinnedBuffer::new(&ctx, len)
    }

    /// Stage times of the last [`reconstruct`](Self::reconstruct).
    pub fn last_stats(&self) -> FourierStats {
        self.lock().map(|e| e.stats.clone()).unwrap_or_default()
    }

    /// Reconstructs `sinograms` (`[slice][angle][bin]`) into `out`
    /// (`[slice][y][x]`) with the gridding method.
    pub fn reconstruct(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        options: &FourierOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        tomors_core::backend::check_backprojection_shapes(
            sinograms.dim(),
            out.dim(),
            geometry,
            grid,
        )?;
        let plan = FourierPlan::new(geometry, grid, options)?;
        let mut e = self.lock()?;
        let r = e.run(&plan, options.filter.padding, sinograms, out);
        if r.as_ref().is_err_and(|e| e.is_out_of_memory()) {
            e.free_buffers();
        }
        r
    }
}
