//! Device memory and page-locked host memory, on cudarc's checked `result`
//! layer.
//!
//! Why not cudarc's safe `CudaSlice` and `PinnedHostSlice`:
//!
//! - `CudaSlice` is allocated with `cuMemAllocAsync` (stream-ordered, from
//!   a memory pool) on devices that support it and freed with
//!   `cuMemFreeAsync` on its allocating stream. With event tracking off
//!   (needed for the three-stream pipeline, see [`Context`]) that free is
//!   not ordered after work queued on the other streams, and the alignment
//!   of pool allocations (texture base addresses must be aligned) is not
//!   documented. [`DeviceBuffer`] keeps `cuMemAlloc`/`cuMemFree`, whose free
//!   waits for the device, so a buffer may be replaced while kernels that
//!   read it are still queued.
//! - `PinnedHostSlice` is allocated write-combined: fast to write, very
//!   slow to read on the host, but the pipeline reads every downloaded slab
//!   from pinned memory. [`PinnedBuffer`] keeps portable, cached pinned
//!   memory.

use std::sync::Arc;

use cudarc::driver::{result, sys};

use super::{driver_error, Context, Stream};
use crate::error::{CudaError, Result};

/// Device memory (freed on drop).
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<Context>,
}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 1) of device memory.
    pub fn new(ctx: &Arc<Context>, bytes: usize, what: &str) -> Result<Self> {
        ctx.bind()?;
        // SAFETY: a plain allocation; the pointer is freed in `drop`.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                CudaError::OutOfMemory {
                    what: format!("allocating {what}"),
                    bytes,
                }
            } else {
                driver_error(&format!("cuMemAlloc ({what}, {bytes} bytes)"))(e)
            }
        })?;
        Ok(Self {
            ptr,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// Raw device address.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn check_range(&self, what: &str, offset: usize, bytes: usize) -> Result<()> {
        if offset.checked_add(bytes).is_none_or(|end| end > self.bytes) {
            return Err(CudaError::Parameter(format!(
                "{what} of {bytes} bytes at {offset} with a buffer of {}",
                self.bytes
            )));
        }
        Ok(())
    }

    /// Asynchronous copy from host memory (pinned for true asynchrony).
    ///
    /// # Safety
    /// `src` must be valid for `bytes` and stay valid until the copy on
    /// `stream` has completed.
    pub unsafe fn upload_async(
        &self,
        offset: usize,
        src: *const u8,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_range("upload", offset, bytes)?;
        if bytes == 0 {
            return Ok(());
        }
        let src = std::slice::from_raw_parts(src, bytes);
        super::transfer::count(bytes);
        result::memcpy_htod_async(self.ptr + offset as u64, src, stream.raw())
            .map_err(driver_error("cuMemcpyHtoDAsync"))
    }

    /// Asynchronous copy to host memory.
    ///
    /// # Safety
    /// `dst` must be valid for `bytes` and stay valid and untouched until
    /// the copy has completed.
    pub unsafe fn download_async(
        &self,
        offset: usize,
        dst: *mut u8,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_range("download", offset, bytes)?;
        if bytes == 0 {
            return Ok(());
        }
        let dst = std::slice::from_raw_parts_mut(dst, bytes);
        super::transfer::count(bytes);
        result::memcpy_dtoh_async(dst, self.ptr + offset as u64, stream.raw())
            .map_err(driver_error("cuMemcpyDtoHAsync"))
    }

    /// Asynchronous device-to-device copy of `bytes` from the device
    /// address `src` (of this buffer's device) into the buffer at `offset`.
    ///
    /// # Safety
    /// `src .. src + bytes` must be device memory of this buffer's device,
    /// alive and unchanged until the copy on `stream` has completed.
    pub unsafe fn copy_from_device_async(
        &self,
        offset: usize,
        src: sys::CUdeviceptr,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check_range("device copy", offset, bytes)?;
        if bytes == 0 {
            return Ok(());
        }
        result::memcpy_dtod_async(self.ptr + offset as u64, src, bytes, stream.raw())
            .map_err(driver_error("cuMemcpyDtoDAsync"))
    }

    /// Synchronous upload of a slice.
    pub fn upload<T: Copy>(&self, src: &[T]) -> Result<()> {
        self.check_range("upload", 0, std::mem::size_of_val(src))?;
        self.ctx.bind()?;
        super::transfer::count(std::mem::size_of_val(src));
        // SAFETY: `src` is valid for its length, the buffer is large enough.
        unsafe { result::memcpy_htod_sync(self.ptr, src) }.map_err(driver_error("cuMemcpyHtoD"))
    }

    /// Synchronous download into a slice.
    pub fn download<T: Copy>(&self, dst: &mut [T]) -> Result<()> {
        self.check_range("download", 0, std::mem::size_of_val(dst))?;
        self.ctx.bind()?;
        super::transfer::count(std::mem::size_of_val(dst));
        // SAFETY: `dst` is valid for its length, the buffer is large enough.
        unsafe { result::memcpy_dtoh_sync(dst, self.ptr) }.map_err(driver_error("cuMemcpyDtoH"))
    }

    /// Fills the buffer with a byte value on `stream`.
    pub fn fill_bytes(&self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: the range lies inside the allocation.
        unsafe { result::memset_d8_async(self.ptr, value, self.bytes, stream.raw()) }
            .map_err(driver_error("cuMemsetD8Async"))
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: the pointer came from cuMemAlloc in this context.
            unsafe {
                let _ = result::free_sync(self.ptr);
            }
        }
    }
}

/// Page-locked host memory of `f32`s (freed on drop).
pub struct PinnedBuffer {
    ptr: *mut f32,
    len: usize,
    ctx: Arc<Context>,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for PinnedBuffer {}
// SAFETY: shared access only reads.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` page-locked floats.
    pub fn new(ctx: &Arc<Context>, len: usize) -> Result<Self> {
        ctx.bind()?;
        let bytes = (len * 4).max(4);
        // SAFETY: a plain allocation; freed in `drop`.
        let p = unsafe { result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver_error(&format!("cuMemHostAlloc ({bytes} bytes)")))?;
        Ok(Self {
            ptr: p as *mut f32,
            len,
            ctx: ctx.clone(),
        })
    }

    /// Number of floats.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no floats.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The contents.
    pub fn as_slice(&self) -> &[f32] {
        // SAFETY: allocated for `len` floats; pinned memory is initialised
        // before use by the pipeline (and any bit pattern is a valid f32).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The contents, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as above, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc.
            unsafe {
                let _ = result::free_host(self.ptr as *mut std::ffi::c_void);
            }
        }
    }
}

/// Grow-only device buffer slot.
pub(crate) fn ensure(
    slot: &mut Option<DeviceBuffer>,
    ctx: &Arc<Context>,
    bytes: usize,
    what: &str,
) -> Result<u64> {
    if !matches!(slot, Some(b) if b.bytes() >= bytes) {
        *slot = None;
        *slot = Some(DeviceBuffer::new(ctx, bytes, what)?);
    }
    Ok(slot.as_ref().expect("just allocated").ptr())
}

/// Grow-only pinned host buffer slot of at least `len` floats.
pub(crate) fn ensure_pinned(
    slot: &mut Option<PinnedBuffer>,
    ctx: &Arc<Context>,
    len: usize,
) -> Result<()> {
    if !matches!(slot, Some(b) if b.len() >= len) {
        *slot = None;
        *slot = Some(PinnedBuffer::new(ctx, len)?);
    }
    Ok(())
}
