//! Device memory and page-locked host memory.

use super::*;

/// Device memory (freed on drop).
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<Context>,
}

// SAFETY: device pointers are plain integers usable from any thread.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 1) of device memory.
    pub fn new(ctx: &Arc<Context>, bytes: usize, what: &str) -> Result<Self> {
        ctx.bind()?;
        let mut ptr = 0;
        // SAFETY: out-parameter allocation.
        let r = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes.max(1)) };
        if r == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(CudaError::OutOfMemory {
                what: format!("allocating {what}"),
                bytes,
            });
        }
        check(r, &format!("cuMemAlloc ({what}, {bytes} bytes)"))?;
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

    /// Asynchronous copy from host memory (pinned for true asynchrony).
    ///
    /// # Safety
    /// `src` must stay valid until the copy on `stream` has completed.
    pub unsafe fn upload_async(
        &self,
        offset: usize,
        src: *const u8,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        if offset + bytes > self.bytes {
            return Err(CudaError::Parameter(format!(
                "upload of {bytes} bytes at {offset} into a buffer of {}",
                self.bytes
            )));
        }
        check(
            sys::cuMemcpyHtoDAsync_v2(
                self.ptr + offset as u64,
                src as *const c_void,
                bytes,
                stream.raw,
            ),
            "cuMemcpyHtoDAsync",
        )
    }

    /// Asynchronous copy to host memory.
    ///
    /// # Safety
    /// `dst` must stay valid and untouched until the copy has completed.
    pub unsafe fn download_async(
        &self,
        offset: usize,
        dst: *mut u8,
        bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        if offset + bytes > self.bytes {
            return Err(CudaError::Parameter(format!(
                "download of {bytes} bytes at {offset} from a buffer of {}",
                self.bytes
            )));
        }
        check(
            sys::cuMemcpyDtoHAsync_v2(
                dst as *mut c_void,
                self.ptr + offset as u64,
                bytes,
                stream.raw,
            ),
            "cuMemcpyDtoHAsync",
        )
    }

    /// Synchronous upload of a slice.
    pub fn upload<T: Copy>(&self, src: &[T]) -> Result<()> {
        let bytes = std::mem::size_of_val(src);
        if bytes > self.bytes {
            return Err(CudaError::Parameter(format!(
                "upload of {bytes} bytes into a buffer of {}",
                self.bytes
            )));
        }
        self.ctx.bind()?;
        // SAFETY: `src` is valid for `bytes`, the buffer is large enough.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(self.ptr, src.as_ptr() as *const c_void, bytes) },
            "cuMemcpyHtoD",
        )
    }

    /// Synchronous download into a slice.
    pub fn download<T: Copy>(&self, dst: &mut [T]) -> Result<()> {
        let bytes = std::mem::size_of_val(dst);
        if bytes > self.bytes {
            return Err(CudaError::Parameter(format!(
                "download of {bytes} bytes from a buffer of {}",
                self.bytes
            )));
        }
        self.ctx.bind()?;
        // SAFETY: `dst` is valid for `bytes`, the buffer is large enough.
        check(
            unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr() as *mut c_void, self.ptr, bytes) },
            "cuMemcpyDtoH",
        )
    }

    /// Fills the buffer with a byte value on `stream`.
    pub fn fill_bytes(&self, value: u8, stream: &Stream) -> Result<()> {
        // SAFETY: the range lies inside the allocation.
        check(
            unsafe { sys::cuMemsetD8Async(self.ptr, value, self.bytes, stream.raw) },
            "cuMemsetD8Async",
        )
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: the pointer came from cuMemAlloc in this context.
            unsafe {
                let _ = sys::cuMemFree_v2(self.ptr);
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
        let mut p: *mut c_void = std::ptr::null_mut();
        let bytes = (len * 4).max(4);
        // SAFETY: out-parameter allocation.
        check(
            unsafe { sys::cuMemHostAlloc(&mut p, bytes, sys::CU_MEMHOSTALLOC_PORTABLE) },
            &format!("cuMemHostAlloc ({bytes} bytes)"),
        )?;
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
                let _ = sys::cuMemFreeHost(self.ptr as *mut c_void);
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
