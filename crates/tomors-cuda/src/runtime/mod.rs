//! The CUDA runtime layer: device contexts and streams, events, device and
//! pinned memory, texture objects over pitched memory and CUDA arrays,
//! module loading and kernel launches, and NVRTC compilation with its
//! on-disk cubin cache ([`compile`]).
//!
//! Built on `cudarc` (libraries loaded at run time):
//!
//! - its safe layer where it has one: [`Context`] wraps `CudaContext`,
//!   [`Stream`] `CudaStream`, [`Event`] `CudaEvent`, [`Module`] and
//!   [`Function`] `CudaModule`/`CudaFunction`, and [`launch`] goes through
//!   the `launch_builder` with typed arguments ([`Arg`]);
//! - its checked `result` layer where the safe types do not fit (see
//!   [`memory`](self::DeviceBuffer) for why device and pinned memory are
//!   not `CudaSlice`/`PinnedHostSlice`; cuFFT and NVRTC's cubin output have
//!   no safe wrapper in cudarc 0.18);
//! - raw `sys` calls only for what cudarc lacks: texture objects, 2D/3D CUDA
//!   arrays and their copies, NVRTC's cubin, error names.
//!
//! Every call's status is turned into a [`CudaError`] that names the call;
//! nothing here panics on a driver error. The driver library is probed with
//! `is_culib_present` before the first call, because `cudarc` panics when a
//! library cannot be loaded.

pub mod compile;
mod context;
mod foreign;
mod memory;
mod module;
mod staging;
mod texture;
pub mod transfer;

pub(crate) use context::StagingChunk;
pub use context::{Context, Event, Stream};
pub use foreign::{keep_current_context, wait_foreign_stream, CurrentContext, ForeignDevicePtr};
pub(crate) use memory::{ensure, ensure_pinned};
pub use memory::{DeviceBuffer, PinnedBuffer};
pub use module::{launch, Arg, Function, LaunchSpec, Module};
pub(crate) use staging::{copy_in, copy_out, is_pinned};
pub use texture::{Array2d, Array3d, TexFilter, TexFormat, Texture};

use std::ffi::CStr;
use std::sync::OnceLock;

use cudarc::driver::{result::DriverError, sys};

use crate::error::{CudaError, Result};

/// Turns a driver status into a `Result`, naming the call.
pub(crate) fn check(r: sys::CUresult, call: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let message = error_text(r);
    if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        return Err(CudaError::OutOfMemory {
            what: call.to_string(),
            bytes: 0,
        });
    }
    Err(CudaError::Driver {
        call: call.to_string(),
        message,
    })
}

/// Turns an error of cudarc's driver layer into a [`CudaError`] naming `call`.
pub(crate) fn driver_error(call: &str) -> impl FnOnce(DriverError) -> CudaError + '_ {
    move |e| match check(e.0, call) {
        Err(err) => err,
        Ok(()) => CudaError::Driver {
            call: call.to_string(),
            message: "CUDA_SUCCESS reported as an error".into(),
        },
    }
}

/// The driver's name and description of a status code.
pub(crate) fn error_text(r: sys::CUresult) -> String {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver writes pointers to static strings or leaves them null.
    unsafe {
        let _ = sys::cuGetErrorName(r, &mut name);
        let _ = sys::cuGetErrorString(r, &mut text);
        let n = if name.is_null() {
            format!("{r:?}")
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        };
        if text.is_null() {
            n
        } else {
            format!("{n} ({})", CStr::from_ptr(text).to_string_lossy())
        }
    }
}

static INIT: OnceLock<std::result::Result<(), String>> = OnceLock::new();

/// Loads the driver library and calls `cuInit` once per process.
pub fn init() -> Result<()> {
    INIT.get_or_init(|| {
        // SAFETY: probing the library only tries to open it.
        if !unsafe { sys::is_culib_present() } {
            return Err("the CUDA driver library (libcuda.so) is not installed".to_string());
        }
        cudarc::driver::result::init().map_err(|e| format!("cuInit failed: {}", error_text(e.0)))
    })
    .clone()
    .map_err(CudaError::Unavailable)
}

/// Number of CUDA devices (0 is returned as an error by [`crate::device_count`]).
pub fn raw_device_count() -> Result<usize> {
    init()?;
    let n =
        cudarc::driver::result::device::get_count().map_err(driver_error("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// Version of the installed driver (e.g. 13000 for CUDA 13.0).
pub fn driver_version() -> Result<i32> {
    init()?;
    let mut v = 0i32;
    // SAFETY: writes one int (cudarc has no wrapper for this call).
    check(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok(v)
}
