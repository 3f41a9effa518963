//! A thin, checked, RAII layer over the CUDA driver API (through `cudarc`'s
//! dynamically loaded bindings).
//!
//! Every call's status is checked and turned into a [`CudaError`] that names
//! the call; nothing here panics on a driver error. The driver library is
//! probed with `is_culib_present` before the first call, because `cudarc`
//! panics when a library cannot be loaded.

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

/// A loaded module (cubin) with its functions.
pub struct Module {
    raw: sys::CUmodule,
    ctx: Arc<Context>,
}

// SAFETY: module handles may be used from any thread with the context current.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

/// A kernel of a loaded module.
#[derive(Clone, Copy)]
pub struct Function {
    raw: sys::CUfunction,
}

// SAFETY: function handles are immutable driver objects.
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Module {
    /// Loads a cubin image.
    pub fn load(ctx: &Arc<Context>, image: &[u8]) -> Result<Self> {
        ctx.bind()?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the image is a complete cubin (ELF) in memory.
        check(
            unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr() as *const c_void) },
            "cuModuleLoadData",
        )?;
        Ok(Self {
            raw,
            ctx: ctx.clone(),
        })
    }

    /// Looks a kernel up by its `extern "C"` name.
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = CString::new(name).map_err(|_| CudaError::Parameter(name.into()))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid module, NUL-terminated name.
        check(
            unsafe { sys::cuModuleGetFunction(&mut raw, self.raw, c.as_ptr()) },
            &format!("cuModuleGetFunction({name})"),
        )?;
        Ok(Function { raw })
    }

    /// Copies `data` into the `__constant__`/`__device__` symbol `name`.
    pub fn set_global<T: Copy>(&self, name: &str, data: &[T], stream: &Stream) -> Result<()> {
        let c = CString::new(name).map_err(|_| CudaError::Parameter(name.into()))?;
        let (mut ptr, mut size) = (0, 0usize);
        // SAFETY: valid module, out-parameters.
        check(
            unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut size, self.raw, c.as_ptr()) },
            &format!("cuModuleGetGlobal({name})"),
        )?;
        let bytes = std::mem::size_of_val(data);
        if bytes > size {
            return Err(CudaError::Parameter(format!(
                "{bytes} bytes for symbol {name} of {size} bytes"
            )));
        }
        // Synchronous copy from pageable memory, ordered after earlier work on `stream`.
        stream.synchronize()?;
        // SAFETY: `data` is valid for `bytes`; the symbol is at least that large.
        check(
            unsafe { sys::cuMemcpyHtoD_v2(ptr, data.as_ptr() as *const c_void, bytes) },
            &format!("cuMemcpyHtoD({name})"),
        )
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: loaded by cuModuleLoadData.
            unsafe {
                let _ = sys::cuModuleUnload(self.raw);
            }
        }
    }
}

/// Launches `f` and checks the launch status.
///
/// # Safety
/// `params` must point to values whose types and order match the kernel's
/// parameters, and every device pointer among them must be valid.
pub unsafe fn launch(
    f: Function,
    name: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared: u32,
    stream: &Stream,
    params: &mut [*mut c_void],
) -> Result<()> {
    let r = sys::cuLaunchKernel(
        f.raw,
        grid.0,
        grid.1,
        grid.2,
        block.0,
        block.1,
        block.2,
        shared,
        stream.raw,
        params.as_mut_ptr(),
        std::ptr::null_mut(),
    );
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(CudaError::Launch {
            kernel: name.to_string(),
            dims: format!("grid {grid:?}, block {block:?}, shared {shared} B"),
            message: error_text(r),
        });
    }
    Ok(())
}

/// How a texture reads between texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TexFilter {
    /// Nearest texel.
    Point,
    /// Hardware linear interpolation (8-bit fractional weights).
    Linear,
}

/// Texel format of a pitched texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TexFormat {
    /// One `float` per texel.
    Float1,
    /// `float2` texels (two slices).
    Float2,
    /// Two 32-bit unsigned integers per texel (four packed halfs), read as integers.
    Uint2,
}

/// A texture object over pitched device memory (destroyed on drop; the
/// memory must outlive it).
pub struct Texture {
    /// The handle passed to kernels.
    pub raw: sys::CUtexObject,
    ctx: Arc<Context>,
}

// SAFETY: texture handles are immutable driver objects.
unsafe impl Send for Texture {}
// SAFETY: as above.
unsafe impl Sync for Texture {}

impl Texture {
    /// A 2D texture of `width × height` texels at `ptr` with rows `pitch`
    /// bytes apart; border addressing (zeros outside), unnormalised coordinates.
    pub fn pitch2d(
        ctx: &Arc<Context>,
        ptr: sys::CUdeviceptr,
        width: usize,
        height: usize,
        pitch: usize,
        format: TexFormat,
        filter: TexFilter,
    ) -> Result<Self> {
        ctx.bind()?;
        let (fmt, channels, flags, _) = format_parts(format);
        // Every byte of the union is written through the plain-integer
        // variant first, then the pitch2D variant is set field by field.
        let mut res = sys::CUDA_RESOURCE_DESC {
            resType: sys::CUresourcetype::CU_RESOURCE_TYPE_PITCH2D,
            res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
                reserved: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_5 {
                    reserved: [0; 32],
                },
            },
            flags: 0,
        };
        res.res.pitch2D = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_4 {
            devPtr: ptr,
            format: fmt,
            numChannels: channels,
            width,
            height,
            pitchInBytes: pitch,
        };
        Self::create(
            ctx,
            &res,
            filter,
            flags,
            &format!("cuTexObjectCreate ({width}×{height} texels, pitch {pitch}, {format:?})"),
        )
    }

    /// Creates the texture object over `res`: border addressing (zeros
    /// outside), unnormalised coordinates, `filter`, and `flags`.
    fn create(
        ctx: &Arc<Context>,
        res: &sys::CUDA_RESOURCE_DESC,
        filter: TexFilter,
        flags: u32,
        what: &str,
    ) -> Result<Self> {
        let mode = sys::CUaddress_mode::CU_TR_ADDRESS_MODE_BORDER;
        let fm = match filter {
            TexFilter::Point => sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            TexFilter::Linear => sys::CUfilter_mode::CU_TR_FILTER_MODE_LINEAR,
        };
        let tex = sys::CUDA_TEXTURE_DESC {
            addressMode: [mode, mode, mode],
            filterMode: fm,
            flags,
            maxAnisotropy: 0,
            mipmapFilterMode: sys::CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            mipmapLevelBias: 0.0,
            minMipmapLevelClamp: 0.0,
            maxMipmapLevelClamp: 0.0,
            borderColor: [0.0; 4],
            reserved: [0; 12],
        };
        let mut raw = 0;
        // SAFETY: fully initialised descriptors; no resource view.
        check(
            unsafe { sys::cuTexObjectCreate(&mut raw, res, &tex, std::ptr::null()) },
            what,
        )?;
        Ok(Self {
            raw,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for Texture {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuTexObjectCreate.
            unsafe {
                let _ = sys::cuTexObjectDestroy(self.raw);
            }
        }
    }
}

/// A 2D CUDA array (block-linear texture storage; destroyed on drop).
pub struct Array2d {
    raw: sys::CUarray,
    /// Texels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
    /// Texel format.
    pub format: TexFormat,
    ctx: Arc<Context>,
}

// SAFETY: array handles may be used from any thread with the context current.
unsafe impl Send for Array2d {}
// SAFETY: as above.
unsafe impl Sync for Array2d {}

fn format_parts(format: TexFormat) -> (sys::CUarray_format, u32, u32, usize) {
    match format {
        TexFormat::Float1 => (sys::CUarray_format::CU_AD_FORMAT_FLOAT, 1, 0, 4),
        TexFormat::Float2 => (sys::CUarray_format::CU_AD_FORMAT_FLOAT, 2, 0, 8),
        TexFormat::Uint2 => (
            sys::CUarray_format::CU_AD_FORMAT_UNSIGNED_INT32,
            2,
            sys::CU_TRSF_READ_AS_INTEGER,
            8,
        ),
    }
}

impl Array2d {
    /// Allocates a `width × height` array of `format` texels.
    pub fn new(ctx: &Arc<Context>, width: usize, height: usize, format: TexFormat) -> Result<Self> {
        ctx.bind()?;
        let (fmt, channels, _, _) = format_parts(format);
        let desc = sys::CUDA_ARRAY_DESCRIPTOR {
            Width: width,
            Height: height,
            Format: fmt,
            NumChannels: channels,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: fully initialised descriptor, out-parameter.
        check(
            unsafe { sys::cuArrayCreate_v2(&mut raw, &desc) },
            &format!("cuArrayCreate ({width}×{height} {format:?})"),
        )?;
        Ok(Self {
            raw,
            width,
            height,
            format,
            ctx: ctx.clone(),
        })
    }

    /// Copies `height` rows of `width` texels from pitched device memory on `stream`.
    pub fn copy_from_device(
        &self,
        src: sys::CUdeviceptr,
        pitch_bytes: usize,
        stream: &Stream,
    ) -> Result<()> {
        let tb = format_parts(self.format).3;
        let m = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src,
            srcArray: std::ptr::null_mut(),
            srcPitch: pitch_bytes,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
            dstHost: std::ptr::null_mut(),
            dstDevice: 0,
            dstArray: self.raw,
            dstPitch: 0,
            WidthInBytes: self.width * tb,
            Height: self.height,
        };
        // SAFETY: every field written; the source holds height rows of pitch bytes.
        check(
            unsafe { sys::cuMemcpy2DAsync_v2(&m, stream.raw) },
            "cuMemcpy2DAsync (pitched → array)",
        )
    }
}

impl Drop for Array2d {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuArrayCreate.
            unsafe {
                let _ = sys::cuArrayDestroy(self.raw);
            }
        }
    }
}

impl Texture {
    /// A texture over a CUDA array; border addressing, unnormalised coordinates.
    pub fn array(ctx: &Arc<Context>, array: &Array2d, filter: TexFilter) -> Result<Self> {
        ctx.bind()?;
        let (_, _, flags, _) = format_parts(array.format);
        let mut res = sys::CUDA_RESOURCE_DESC {
            resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
            res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
                reserved: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_5 {
                    reserved: [0; 32],
                },
            },
            flags: 0,
        };
        res.res.array =
            sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array.raw };
        Self::create(
            ctx,
            &res,
            filter,
            flags,
            &format!("cuTexObjectCreate (array {}×{})", array.width, array.height),
        )
    }
}

/// A 3D CUDA array of `float` texels (block-linear texture storage;
/// destroyed on drop).
pub struct Array3d {
    raw: sys::CUarray,
    /// Texels along x.
    pub width: usize,
    /// Texels along y.
    pub height: usize,
    /// Texels along z.
    pub depth: usize,
    ctx: Arc<Context>,
}

// SAFETY: array handles may be used from any thread with the context current.
unsafe impl Send for Array3d {}
// SAFETY: as above.
unsafe impl Sync for Array3d {}

impl Array3d {
    /// Allocates a `width × height × depth` array of `float`s.
    pub fn new(ctx: &Arc<Context>, width: usize, height: usize, depth: usize) -> Result<Self> {
        ctx.bind()?;
        let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: width,
            Height: height,
            Depth: depth,
            Format: sys::CUarray_format::CU_AD_FORMAT_FLOAT,
            NumChannels: 1,
            Flags: 0,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: fully initialised descriptor, out-parameter.
        check(
            unsafe { sys::cuArray3DCreate_v2(&mut raw, &desc) },
            &format!("cuArray3DCreate ({width}×{height}×{depth} floats)"),
        )?;
        Ok(Self {
            raw,
            width,
            height,
            depth,
            ctx: ctx.clone(),
        })
    }

    /// Copies a dense `[depth][height][width]` float array at `src` into
    /// the array on `stream`.
    pub fn copy_from_device(&self, src: sys::CUdeviceptr, stream: &Stream) -> Result<()> {
        let m = sys::CUDA_MEMCPY3D {
            srcXInBytes: 0,
            srcY: 0,
            srcZ: 0,
            srcLOD: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src,
            srcArray: std::ptr::null_mut(),
            reserved0: std::ptr::null_mut(),
            srcPitch: self.width * 4,
            srcHeight: self.height,
            dstXInBytes: 0,
            dstY: 0,
            dstZ: 0,
            dstLOD: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
            dstHost: std::ptr::null_mut(),
            dstDevice: 0,
            dstArray: self.raw,
            reserved1: std::ptr::null_mut(),
            dstPitch: 0,
            dstHeight: 0,
            WidthInBytes: self.width * 4,
            Height: self.height,
            Depth: self.depth,
        };
        // SAFETY: every field written; the source holds depth × height rows
        // of width floats.
        check(
            unsafe { sys::cuMemcpy3DAsync_v2(&m, stream.raw) },
            "cuMemcpy3DAsync (device → 3D array)",
        )
    }
}

impl Drop for Array3d {
    fn drop(&mut self) {
        if self.ctx.bind().is_ok() {
            // SAFETY: created by cuArray3DCreate.
            unsafe {
                let _ = sys::cuArrayDestroy(self.raw);
            }
        }
    }
}

impl Texture {
    /// A texture over a 3D array; border addressing (zeros outside),
    /// unnormalised coordinates.
    pub fn array3d(ctx: &Arc<Context>, array: &Array3d, filter: TexFilter) -> Result<Self> {
        ctx.bind()?;
        let mut res = sys::CUDA_RESOURCE_DESC {
            resType: sys::CUresourcetype::CU_RESOURCE_TYPE_ARRAY,
            res: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1 {
                reserved: sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_5 {
                    reserved: [0; 32],
                },
            },
            flags: 0,
        };
        res.res.array =
            sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array.raw };
        Self::create(
            ctx,
            &res,
            filter,
            0,
            &format!(
                "cuTexObjectCreate (3D array {}×{}×{})",
                array.width, array.height, array.depth
            ),
        )
    }
}
