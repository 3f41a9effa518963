//! # tomors-cuda
//!
//! The CUDA backend of tomors: parallel-beam filtered back projection on
//! NVIDIA GPUs, built as the published work builds it.
//!
//! - CUDA libraries are loaded at run time (`cudarc` with dynamic loading):
//!   the crate builds and its CPU tests run on machines without CUDA;
//!   [`device_count`] says why no GPU can be used.
//! - Kernels (`kernels/*.cu`) are compiled at run time by NVRTC for the
//!   device's own architecture with their parameters baked in as `#define`s,
//!   and the cubins are cached on disk ([`compile`]).
//! - Filtering: batched cuFFT of padded rows, either real-to-complex or two
//!   real rows packed in one complex transform ([`FftVariant`]).
//! - Back projection through texture objects with hardware interpolation:
//!   `standard` (one thread per pixel, 16 independent partial sums) and
//!   `tex-opt` (Z-order 4×4 squares, 4 projections in parallel, 4 pixels per
//!   thread, shuffle reduction), each with one slice per texel (`f32`), two
//!   (`float2`) or four (`half`, nearest only) — see [`kernels::BpConfig`].
//!   Textures live in CUDA arrays (or pitched memory, [`TexStorage`]) with
//!   border addressing (zeros outside the detector).
//! - Accuracy: every kernel equals [`model::backproject_model`] (the texture
//!   unit's 8-bit interpolation weights) to f32 rounding, and the CPU
//!   reference within the weights' precision (see the GPU tests).
//! - [`CudaBackend::fbp`](tomors_core::Backend::fbp) streams slabs through
//!   upload → filter → back projection → download on three streams with
//!   double buffering and pinned host memory; [`MultiCudaBackend`] hands
//!   slabs round-robin to several GPUs.
//! - Cone beam: [`ConeBackend`](tomors_core::cone::ConeBackend) for
//!   [`CudaBackend`] (FDK back projection, texture or plain-load kernels,
//!   see [`cone`]).
//! - Iterative reconstruction: device vectors ([`DeviceVec`], tomors-core's
//!   `Vector`) and Joseph's projector pairs as tomors-core
//!   `LinearOperator`s ([`CudaJoseph::operator`],
//!   [`CudaConeJoseph::operator`]), so tomors-core's algorithms (SIRT,
//!   SART, BLOCK-IT), written once, run resident on the device
//!   ([`sirt_cuda`], [`sirt_cuda_multi`], [`cone_sirt_cuda`]); see
//!   [`iterative`].
//! - [`bench`](mod@bench) measures GU/s (voxels × projections / s) and end-to-end FBP.
//!
//! ## Layout
//!
//! The modules form layers; a module imports only from the layers below it:
//!
//! 1. [`runtime`]: the CUDA runtime (contexts, streams, events, memory,
//!    textures and CUDA arrays, modules and launches, NVRTC and its cache);
//! 2. [`fbp`] (parallel-beam FBP), [`cone`] (cone-beam FDK, built on
//!    `fbp`'s filtering and engine) and [`iterative`] (device operators and
//!    SIRT);
//! 3. [`tune`] (the autotuner and the CPU model of the texture kernels) and
//!    [`bench`](mod@bench) (benchmarks).

pub mod bench;
pub mod cone;
pub mod error;
pub mod fbp;
pub mod fourier;
pub mod iterative;
pub mod runtime;
pub mod tune;

pub use cone::{ConeKernel, ConeStats, FdkFold, FdkStats, FoldShape};
pub use error::{CudaError, Result};
pub use fbp::device::DeviceOrder;
pub use fbp::fft::FftVariant;
pub use fbp::kernels::{BpConfig, KernelChoice, KernelKind, SliceMode};
pub use fbp::{CudaBackend, CudaOptions, MultiCudaBackend, PipelineStats, TexStorage};
pub use fourier::{CudaFourier, FourierStats};
pub use iterative::cone::{
    cone_sirt_cuda, cone_sirt_cuda_opts, cone_sirt_cuda_with, ConeGpuOptions,
};
pub use iterative::multi::{cone_sirt_cuda_multi, CudaConeSlabs, Exchange};
pub use iterative::{
    sirt_cuda, sirt_cuda_multi, ConeBackProjector, ConeDeviceArray, ConeOp, CudaConeJoseph,
    CudaJoseph, DeviceVec, GpuSirtOptions, JosephStackOp, JosephTuning, OnQueue, SirtStats,
    VoxelKernel,
};

// The module paths of the flat layout, kept so that existing code compiles.
pub use fbp::{fft, kernels, tuning};
pub use iterative::cone as cone_iterative;
pub use runtime as driver;
pub use runtime::compile;
pub use runtime::transfer::transfer_bytes;
pub use runtime::{keep_current_context, wait_foreign_stream, DeviceBuffer, ForeignDevicePtr};
pub use tune::model;

/// Number of usable CUDA devices. Errors (one line, with the reason) when
/// the driver library is missing, fails to initialise, or finds no device.
pub fn device_count() -> Result<usize> {
    let n = runtime::raw_device_count()?;
    if n == 0 {
        return Err(CudaError::Unavailable(
            "the CUDA driver found no GPU".into(),
        ));
    }
    Ok(n)
}

/// Parses a device list such as `"0,1"` (None or `"all"` = every device).
pub fn parse_devices(spec: Option<&str>, available: usize) -> Result<Vec<usize>> {
    let s = match spec.map(str::trim) {
        None | Some("") | Some("all") => return Ok((0..available).collect()),
        Some(s) => s,
    };
    let mut v = Vec::new();
    for part in s.split(',') {
        let p = part.trim();
        let d: usize = p.parse().map_err(|_| {
            CudaError::Parameter(format!("'{p}' is not a device number (use e.g. 0,1)"))
        })?;
        if d >= available {
            return Err(CudaError::Parameter(format!(
                "device {d} requested but {available} CUDA device(s) found"
            )));
        }
        if v.contains(&d) {
            return Err(CudaError::Parameter(format!("device {d} listed twice")));
        }
        v.push(d);
    }
    if v.is_empty() {
        return Err(CudaError::Parameter("empty device list".into()));
    }
    Ok(v)
}
