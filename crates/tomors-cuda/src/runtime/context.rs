//! Device contexts, streams and events.

use super::*;

/// One device with its primary context. Cheap to share (`Arc`).
pub struct Context {
    /// Device ordinal.
    pub ordinal: usize,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
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
}

// SAFETY: a CUDA context handle may be used from any thread once made current.
unsafe impl Send for Context {}
// SAFETY: as above; the driver API is thread safe.
unsafe impl Sync for Context {}

impl Context {
    /// Retains the primary context of device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Arc<Self>> {
        let count = raw_device_count()?;
        if ordinal >= count {
            return Err(CudaError::Unavailable(format!(
                "device {ordinal} requested but {count} CUDA device(s) found"
            )));
        }
        let mut dev = 0;
        // SAFETY: plain out-parameter calls on a valid ordinal.
        unsafe {
            check(sys::cuDeviceGet(&mut dev, ordinal as i32), "cuDeviceGet")?;
            let mut ctx = std::ptr::null_mut();
            check(
                sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
                "cuDevicePrimaryCtxRetain",
            )?;
            let mut name = [0 as std::ffi::c_char; 256];
            check(
                sys::cuDeviceGetName(name.as_mut_ptr(), 255, dev),
                "cuDeviceGetName",
            )?;
            let name = CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned();
            let attr = |a: sys::CUdevice_attribute| -> Result<i32> {
                let mut v = 0;
                check(
                    sys::cuDeviceGetAttribute(&mut v, a, dev),
                    "cuDeviceGetAttribute",
                )?;
                Ok(v)
            };
            use sys::CUdevice_attribute as A;
            let c = Context {
                ordinal,
                dev,
                ctx,
                name,
                cc: (
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
                    attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
                ),
                sm_count: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
                pitch_align: attr(A::CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT)?.max(1) as usize,
                max_tex_height: attr(A::CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT)?
                    as usize,
                max_tex_width: attr(A::CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH)?
                    as usize,
                driver: driver_version()?,
            };
            c.bind()?;
            Ok(Arc::new(c))
        }
    }

    /// Makes this context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        // SAFETY: the context is retained for the life of `self`.
        check(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// Free and total device memory, bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        let (mut f, mut t) = (0usize, 0usize);
        // SAFETY: writes two sizes.
        check(
            unsafe { sys::cuMemGetInfo_v2(&mut f, &mut t) },
            "cuMemGetInfo",
        )?;
        Ok((f, t))
    }

    /// Waits for all work of this context.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: no arguments.
        check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `new`.
        unsafe {
            let _ = sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

/// A non-blocking CUDA stream.
pub struct Stream {
    pub(crate) raw: sys::CUstream,
    ctx: Arc<Context>,
}

// SAFETY: stream handles may be used from any thread with the context current.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    /// Creates a stream that does not synchronise with the legacy default stream.
    pub fn new(ctx: &Arc<Context>) -> Result<Self> {
        ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-parameter creation.
        check(
            unsafe {
                sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
            },
            "cuStreamCreate",
        )?;
        Ok(Self {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Blocks until all work queued on the stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: valid stream.
        check(
            unsafe { sys::cuStreamSynchronize(self.raw) },
            "cuStreamSynchronize",
        )
    }

    /// Makes future work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        // SAFETY: valid stream and event.
        check(
            unsafe { sys::cuStreamWaitEvent(self.raw, event.raw, 0) },
            "cuStreamWaitEvent",
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuStreamCreate.
            unsafe {
                let _ = sys::cuStreamSynchronize(self.raw);
                let _ = sys::cuStreamDestroy_v2(self.raw);
            }
        }
    }
}

/// A CUDA event with timing.
pub struct Event {
    raw: sys::CUevent,
    ctx: Arc<Context>,
}

// SAFETY: event handles may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    /// Creates a timing event.
    pub fn new(ctx: &Arc<Context>) -> Result<Self> {
        ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: out-parameter creation; flags 0 = default (timing enabled).
        check(unsafe { sys::cuEventCreate(&mut raw, 0) }, "cuEventCreate")?;
        Ok(Self {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Records the event on `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: valid handles.
        check(
            unsafe { sys::cuEventRecord(self.raw, stream.raw) },
            "cuEventRecord",
        )
    }

    /// Waits on the host for the event.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: valid handle.
        check(
            unsafe { sys::cuEventSynchronize(self.raw) },
            "cuEventSynchronize",
        )
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: valid handles, out-parameter.
        check(
            unsafe { sys::cuEventElapsedTime_v2(&mut ms, self.raw, end.raw) },
            "cuEventElapsedTime",
        )?;
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuEventCreate.
            unsafe {
                let _ = sys::cuEventDestroy_v2(self.raw);
            }
        }
    }
}
