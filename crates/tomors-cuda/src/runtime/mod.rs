//! The CUDA runtime layer: device contexts and streams, device and pinned
//! memory, events, texture objects over pitched memory and CUDA arrays,
//! module loading and kernel launches, and NVRTC compilation with its
//! on-disk cubin cache ([`compile`]).
//!
//! Every call's status is checked and turned into a [`CudaError`] that names
//! the call; nothing here panics on a driver error. The driver library is
//! probed with `is_culib_present` before the first call, because `cudarc`
//! panics when a library cannot be loaded.

pub mod compile;
mod context;
mod memory;
mod module;
mod texture;

pub use context::{Context, Event, Stream};
pub(crate) use memory::{ensure, ensure_pinned};
pub use memory::{DeviceBuffer, PinnedBuffer};
pub use module::{launch, Function, Module};
pub use texture::{Array2d, Array3d, TexFilter, TexFormat, Texture};

use std::ffi::{c_void, CStr, CString};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;

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
        // SAFETY: cuInit has no preconditions.
        let r = unsafe { sys::cuInit(0) };
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("cuInit failed: {}", error_text(r)))
        }
    })
    .clone()
    .map_err(CudaError::Unavailable)
}

/// Number of CUDA devices (0 is returned as an error by [`crate::device_count`]).
pub fn raw_device_count() -> Result<usize> {
    init()?;
    let mut n = 0i32;
    // SAFETY: writes one int.
    check(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

/// Version of the installed driver (e.g. 13000 for CUDA 13.0).
pub fn driver_version() -> Result<i32> {
    init()?;
    let mut v = 0i32;
    // SAFETY: writes one int.
    check(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok(v)
}
