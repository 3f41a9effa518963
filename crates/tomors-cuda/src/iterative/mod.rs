//! Iterative reconstruction on the GPU: Joseph's projectors as device
//! operators, parallel beam ([`parallel`]: [`CudaJoseph`], SIRT resident on
//! one or several devices) and cone beam ([`cone`]: [`CudaConeJoseph`],
//! SIRT resident on one device), with the pinned staging of large
//! transfers, the option checks and the progress/timing reports they share.

mod checks;
pub mod cone;
pub mod parallel;
mod report;
mod staging;

pub(crate) use checks::{check_options, clamp, find_non_finite, invert};
pub use cone::{ConeBackProjector, ConeDeviceArray, CudaConeJoseph};
pub use parallel::{
    check_sirt_inputs, sirt_cuda, sirt_cuda_multi, CudaJoseph, DeviceStack, GpuSirtOptions,
    JosephTuning, JOSEPH_CU,
};
pub use report::{GpuIteration, SirtStats};
pub(crate) use staging::{download_staged, upload_staged};

/// Blocks of the reduction kernels (fixed, so the partial sums and thus the
/// residuals are deterministic).
pub(crate) const RED_BLOCKS: usize = 1024;

/// Most power iterations for the default relaxation (as tomors-core).
pub(crate) const POWER_ITERATIONS: usize = 50;
