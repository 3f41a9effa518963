//! Device memory owned by someone else (CuPy, Numba, PyTorch, another
//! library): [`ForeignDevicePtr`] names a range of it after checking with
//! the driver that the range is device memory inside one allocation, and
//! never frees it. [`wait_foreign_stream`] orders work after the stream
//! that produced the data.

use cudarc::driver::sys;

use super::{check, init};
use crate::error::{CudaError, Result};

/// A borrowed range of device memory (never freed by tomors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignDevicePtr {
    ptr: u64,
    bytes: usize,
    ordinal: usize,
}

impl ForeignDevicePtr {
    /// Borrows `bytes` bytes of device memory at `ptr`.
    ///
    /// Checks with the driver that `ptr` is device (or managed) memory and
    /// that `ptr .. ptr + bytes` lies inside one allocation; finds the
    /// device it lives on.
    ///
    /// Errors: a null pointer, host memory, an address the driver does not
    /// know, a range past the allocation's end.
    ///
    /// # Safety
    /// The allocation must stay alive, and must not be written by anyone
    /// else, for as long as work queued on it by tomors runs (tomors
    /// waits for its own work before returning from the calls that take
    /// this type).
    pub unsafe fn new(ptr: u64, bytes: usize) -> Result<Self> {
        init()?;
        if ptr == 0 {
            return Err(CudaError::Parameter("a null device pointer".into()));
        }
        let mut mem_type: u32 = 0;
        check(
            sys::cuPointerGetAttribute(
                (&mut mem_type as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                ptr,
            ),
            "cuPointerGetAttribute (memory type)",
        )
        .map_err(|e| CudaError::Parameter(format!("{ptr:#x} is not CUDA device memory ({e})")))?;
        if mem_type != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32 {
            return Err(CudaError::Parameter(format!(
                "{ptr:#x} is not device memory (CUDA memory type {mem_type})"
            )));
        }
        let mut ordinal: i32 = -1;
        check(
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            ),
            "cuPointerGetAttribute (device ordinal)",
        )?;
        let mut base: u64 = 0;
        let mut size: usize = 0;
        let ctx = super::Context::new(ordinal.max(0) as usize)?;
        ctx.bind()?;
        check(
            sys::cuMemGetAddressRange_v2(&mut base, &mut size, ptr),
            "cuMemGetAddressRange",
        )?;
        let end = ptr.checked_add(bytes as u64);
        if end.is_none_or(|e| e > base + size as u64) {
            return Err(CudaError::Parameter(format!(
                "{bytes} bytes at {ptr:#x} run past the end of their allocation ({size} bytes at {base:#x})"
            )));
        }
        Ok(Self {
            ptr,
            bytes,
            ordinal: ordinal.max(0) as usize,
        })
    }

    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The device the memory lives on.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// Waits until the work queued so far on the foreign stream `handle` has
/// completed (`1` is the legacy default stream, `2` the per-thread default
/// stream, as in `__cuda_array_interface__` version 3).
///
/// # Safety
/// `handle` must be a live stream of a context on this process's devices,
/// or 1 or 2.
pub unsafe fn wait_foreign_stream(handle: u64) -> Result<()> {
    init()?;
    check(
        sys::cuStreamSynchronize(handle as sys::CUstream),
        "cuStreamSynchronize (the producer's stream)",
    )
}

/// The calling thread's CUDA context when [`keep_current_context`] was
/// called, made current again when this guard drops.
pub struct CurrentContext(Option<sys::CUcontext>);

/// Remembers the calling thread's current CUDA context and makes it current
/// again when the returned guard drops: for callers that share their thread
/// with other CUDA users (CuPy, PyTorch, Numba), whose current device a
/// tomors call (which binds each device it uses) must not change. A no-op
/// where CUDA is unavailable.
pub fn keep_current_context() -> CurrentContext {
    if init().is_err() {
        return CurrentContext(None);
    }
    let mut c: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes one context handle (null when none is current).
    let ok = unsafe { sys::cuCtxGetCurrent(&mut c) } == sys::CUresult::CUDA_SUCCESS;
    CurrentContext(ok.then_some(c))
}

impl Drop for CurrentContext {
    fn drop(&mut self) {
        if let Some(c) = self.0 {
            // SAFETY: a handle that was current on this thread (or null:
            // none); an invalid one is refused by the driver with an error,
            // ignored here.
            let _ = unsafe { sys::cuCtxSetCurrent(c) };
        }
    }
}
