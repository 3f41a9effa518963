//! Iterative reconstruction on the GPU: device vectors ([`device`]:
//! [`DeviceVec`], tomors-core's `Vector` on one device), Joseph's
//! projectors as device operators (tomors-core `LinearOperator`s),
//! parallel beam ([`parallel`]: [`CudaJoseph`], runs resident on one or
//! several devices) and cone beam ([`cone`]: [`CudaConeJoseph`], resident on
//! one device), and the one run of tomors-core's shared algorithms on them
//! (upload once, iterate on the device, download once), with the pinned
//! staging of large transfers, the option checks and the progress/timing
//! reports they share.

mod blocks;
mod checks;
pub mod cone;
pub mod device;
pub mod parallel;
mod report;
mod run;
mod staging;

pub(crate) use checks::{check_options, find_non_finite};
pub use cone::{ConeBackProjector, ConeDeviceArray, ConeOp, CudaConeJoseph};
pub use device::{DeviceVec, Layout, OnQueue, Queue};
pub use parallel::{
    check_sirt_inputs, sirt_cuda, sirt_cuda_multi, CudaJoseph, DeviceStack, GpuSirtOptions,
    JosephStackOp, JosephTuning, JOSEPH_CU,
};
pub use report::{GpuIteration, SirtStats};
pub(crate) use staging::{download_staged, upload_staged};
