//! Device contexts, streams and events, over cudarc's `CudaContext`,
//! `CudaStream` and `CudaEvent`.
//!
//! cudarc can track the reads and writes of every `CudaSlice` with events
//! and make streams wait on them. The FBP pipeline overlaps upload, filter
//! and back projection on three streams and orders them with its own
//! events; slice tracking would add waits between those streams (and an
//! event record per launch argument). It is therefore switched off on every
//! context ([`Context::new`]) before any stream exists; tomors orders its
//! streams explicitly ([`Stream::wait`]) and frees memory synchronously
//! (see [`DeviceBuffer`](super::DeviceBuffer)).

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use super::{driver_error, driver_version, raw_device_count};
use crate::error::{CudaError, Result};

/// One device with its primary context. Cheap to share (`Arc`).
pub struct Context {
    inner: Arc<CudaContext>,
    /// Device ordinal.
    pub ordinal: usize,
    /// Device name ("NVIDIA H100 80GB HBM3").
    pub name: String,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// Multiprocessor count.
    pub sm_count: i32,
    /// Required alignment of a pitched texture row, bytes.
    pub pitch_align: usize,
    /// Maximum height of a pitch-linear 2D texture.
    pub max_tex_height: usize,
    /// Maximum width of a pitch-linear 2D texture.
    pub max_tex_width: usize,
    /// Driver version.
    pub driver: i32,
    /// Page-locked staging chunks of the iterative transfers, kept for
    /// reuse between runs (allocating them costs tens of milliseconds);
    /// freed with the context.
    pub(crate) staging: std::sync::Mutex<Vec<StagingChunk>>,
}

/// A page-locked host chunk of `f32`s owned by a [`Context`]'s staging
/// pool (freed by the context's drop).
pub(crate) struct StagingChunk {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: plain host memory owned by the pool; access goes through the
// pool's mutex.
unsafe impl Send for StagingChunk {}
// SAFETY: as above.
unsafe impl Sync for StagingChunk {}

impl StagingChunk {
    /// Allocates `len` page-locked floats on `ctx` (which must free them).
    pub(crate) fn new(ctx: &Context, len: usize) -> Result<Self> {
        ctx.bind()?;
        let bytes = (len * 4).max(4);
        // SAFETY: a plain allocation, freed by the owning context's drop.
        let p =
            unsafe { cudarc::driver::result::malloc_host(bytes, sys::CU_MEMHOSTALLOC_PORTABLE) }
                .map_err(driver_error(&format!("cuMemHostAlloc ({bytes} bytes)")))?;
        Ok(Self {
            ptr: p as *mut f32,
            len,
        })
    }

    /// The contents.
    pub(crate) fn as_slice(&self) -> &[f32] {
        // SAFETY: allocated for `len` floats; any bit pattern is an f32.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The contents, mutable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        // SAFETY: as above, exclusive through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let chunks = match self.staging.get_mut() {
            Ok(v) => std::mem::take(v),
            Err(p) => std::mem::take(p.into_inner()),
        };
        if !chunks.is_empty() && self.bind().is_ok() {
            for c in chunks {
                // SAFETY: allocated by cuMemHostAlloc in `StagingChunk::new`
                // on this context; no transfer is in flight (the context is
                // being dropped, so no queue holds it).
                unsafe {
                    let _ = cudarc::driver::result::free_host(c.ptr as *mut std::ffi::c_void);
                }
            }
        }
    }
}

impl Context {
    /// Retains the primary context of device `ordinal` and makes it current.
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        let count = raw_device_count()?;
        if ordinal >= count {
            return Err(CudaError::Unavailable(format!(
                "device {ordinal} requested but {count} CUDA device(s) found"
            )));
        }
        // `init` above has loaded the library, so cudarc cannot panic here.
        let inner = CudaContext::new(ordinal).map_err(driver_error("cuDevicePrimaryCtxRetain"))?;
        // SAFETY: no stream or slice of this context exists yet; tomors
        // orders its streams with explicit events (see the module docs).
        unsafe { inner.disable_event_tracking() };
        let attr = |a: sys::CUdevice_attribute| -> Result<i32> {
            inner
                .attribute(a)
                .map_err(driver_error("cuDeviceGetAttribute"))
        };
        use sys::CUdevice_attribute as A;
        let c = Context {
            ordinal,
            name: inner.name().map_err(driver_error("cuDeviceGetName"))?,
            cc: inner
                .compute_capability()
                .map_err(driver_error("cuDeviceGetAttribute"))?,
            sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            pitch_align: attr(A::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)?.max(1) as usize,
            max_tex_height: attr(A::CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT)? as usize,
            max_tex_width: attr(A::CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH)? as usize,
            driver: driver_version()?,
            staging: std::sync::Mutex::new(Vec::new()),
            inner,
        };
        c.bind()?;
        Ok(Arc::new(c))
    }

    /// cudarc's context.
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.inner
    }

    /// Makes this context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        self.inner
            .bind_to_thread()
            .map_err(driver_error("cuCtxSetCurrent"))
    }

    /// Free and total device memory, bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        cudarc::driver::result::mem_get_info().map_err(driver_error("cuMemGetInfo"))
    }

    /// The greatest (most urgent) stream priority of the device (a
    /// number ≤ 0; streams are created at 0, the least).
    pub fn greatest_stream_priority(&self) -> Result<i32> {
        self.bind()?;
        let (mut least, mut greatest) = (0, 0);
        // SAFETY: two out-parameters; the context is current.
        super::check(
            unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) },
            "cuCtxGetStreamPriorityRange",
        )?;
        Ok(greatest)
    }

    /// Waits for all work of this context.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(driver_error("cuCtxSynchronize"))
    }
}

/// A non-blocking CUDA stream.
pub struct Stream {
    inner: Arc<CudaStream>,
}

impl Stream {
    /// Creates a stream that does not synchronise with the legacy default stream.
    pub fn new(ctx: &Arc<Context>) -> Result<Self> {
        let inner = ctx
            .inner
            .new_stream()
            .map_err(driver_error("cuStreamCreate"))?;
        Ok(Self { inner })
    }

    /// cudarc's stream.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.inner
    }

    /// The raw handle (for the calls cudarc does not wrap).
    pub(crate) fn raw(&self) -> sys::CUstream {
        self.inner.cu_stream()
    }

    /// Sets the stream's scheduling priority (lower numbers first; see
    /// [`Context::greatest_stream_priority`]) for the work queued after
    /// the call; the priority read back must equal `priority`.
    pub fn set_priority(&self, priority: i32) -> Result<()> {
        // SAFETY: the union is written through its priority member; the
        // stream handle is alive.
        unsafe {
            let mut v: sys::CUstreamAttrValue = std::mem::zeroed();
            v.priority = priority;
            super::check(
                sys::cuStreamSetAttribute(
                    self.raw(),
                    sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PRIORITY,
                    &v,
                ),
                "cuStreamSetAttribute (priority)",
            )?;
            let mut got = 0;
            super::check(
                sys::cuStreamGetPriority(self.raw(), &mut got),
                "cuStreamGetPriority",
            )?;
            if got != priority {
                return Err(CudaError::Unavailable(format!(
                    "stream priority {priority} was not applied (reads {got})"
                )));
            }
        }
        Ok(())
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(driver_error("cuStreamSynchronize"))
    }

    /// Makes future work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.inner
            .wait(&event.inner)
            .map_err(driver_error("cuStreamWaitEvent"))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Work still queued may use buffers dropped right after the stream.
        let _ = self.inner.synchronize();
    }
}

/// A CUDA event with timing.
pub struct Event {
    inner: CudaEvent,
}

impl Event {
    /// Creates a timing event.
    pub fn new(ctx: &Arc<Context>) -> Result<Self> {
        let inner = ctx
            .inner
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_error("cuEventCreate"))?;
        Ok(Self { inner })
    }

    /// Records the event on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.inner
            .record(&stream.inner)
            .map_err(driver_error("cuEventRecord"))
    }

    /// Waits on the host for the event.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(driver_error("cuEventSynchronize"))
    }

    /// Milliseconds from `self` to `end` (waits for both).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        self.inner
            .elapsed_ms(&end.inner)
            .map_err(driver_error("cuEventElapsedTime"))
    }
}
