//! Iterative reconstruction on the GPU: device vectors ([`device`]:
//! [`DeviceVec`], tomors-core's `Vector` on one device), Joseph's
//! projectors as device operators (tomors-core `LinearOperator`s),
//! parallel beam ([`parallel`]: [`CudaJoseph`], runs resident on one or
//! several devices) and cone beam ([`cone`]: [`CudaConeJoseph`], resident on
//! one device), and the one run of tomors-core's shared algorithms on them
//! (upload once, iterate on the device, download once), with the pinned
//! staging of large transfers, the option checks and the progress/timing
//! reports they share.

/// The projection methods of a device operator's `LinearOperator` impl:
/// `forward`, `backward` and `select_into` through its `forward_impl`,
/// `backward_impl` and `select_impl` (which return the backend's errors).
macro_rules! projections_through_impls {
    () => {
        fn forward(
            &self,
            x: &DeviceVec,
            angles: &[usize],
            y: &mut DeviceVec,
        ) -> tomors_core::Result<()> {
            Ok(self.forward_impl(x, angles, y)?)
        }

        fn backward(
            &self,
            y: &DeviceVec,
            angles: &[usize],
            x: &mut DeviceVec,
        ) -> tomors_core::Result<()> {
            Ok(self.backward_impl(y, angles, x)?)
        }

        fn select_into(
            &self,
            y_full: &DeviceVec,
            angles: &[usize],
            out: &mut DeviceVec,
        ) -> tomors_core::Result<()> {
            Ok(self.select_impl(y_full, angles, out)?)
        }
    };
}

mod blocks;
mod checks;
pub mod cone;
pub mod device;
mod early;
pub mod multi;
pub mod parallel;
mod report;
mod run;
mod staging;
mod trace;

pub(crate) use checks::{check_dim, check_finite, check_finite_on_device, check_options};
pub use cone::{ConeBackProjector, ConeDeviceArray, ConeOp, CudaConeJoseph};
pub use device::{DeviceVec, Layout, OnQueue, Queue};
pub use multi::{cone_sirt_cuda_multi, CudaConeSlabs, Exchange, ReplicaVec, SlabsVec};
pub use parallel::{
    check_sirt_inputs, sirt_cuda, sirt_cuda_multi, CudaJoseph, DeviceStack, GpuSirtOptions,
    JosephStackOp, JosephTuning, VoxelKernel, JOSEPH_CU, JOSEPH_SWEEP_CU,
};
pub use report::{GpuIteration, SirtStats};
pub(crate) use staging::{download_staged, host_zeros, prefault, upload_staged};
pub(crate) use trace::Phases;
