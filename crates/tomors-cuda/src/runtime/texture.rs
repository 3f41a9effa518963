//! Texture objects over pitched device memory and over 2D/3D CUDA arrays:
//! raw driver calls, as cudarc has no wrapper for them.

use std::sync::Arc;

use cudarc::driver::sys;

use super::{check, Context, Stream};
use crate::error::Result;

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
    /// Two halfs per texel (`__half2`), read (and filtered) as `float2`.
    Half2,
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
        TexFormat::Half2 => (sys::CUarray_format::CU_AD_FORMAT_HALF, 2, 0, 4),
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
        self.copy_rows_from_device(src, pitch_bytes, 0..self.height, stream)
    }

    /// Copies rows `rows` of `width` texels from pitched device memory
    /// (`src`: its row 0) into the same rows of the array, on `stream`.
    pub fn copy_rows_from_device(
        &self,
        src: sys::CUdeviceptr,
        pitch_bytes: usize,
        rows: std::ops::Range<usize>,
        stream: &Stream,
    ) -> Result<()> {
        if rows.start > rows.end || rows.end > self.height {
            return Err(crate::error::CudaError::Parameter(format!(
                "rows {rows:?} of a {}-row array",
                self.height
            )));
        }
        if rows.is_empty() {
            return Ok(());
        }
        let tb = format_parts(self.format).3;
        let m = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: rows.start,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: std::ptr::null(),
            srcDevice: src,
            srcArray: std::ptr::null_mut(),
            srcPitch: pitch_bytes,
            dstXInBytes: 0,
            dstY: rows.start,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_ARRAY,
            dstHost: std::ptr::null_mut(),
            dstDevice: 0,
            dstArray: self.raw,
            dstPitch: 0,
            WidthInBytes: self.width * tb,
            Height: rows.len(),
        };
        // SAFETY: every field written; the source holds height rows of pitch bytes.
        check(
            unsafe { sys::cuMemcpy2DAsync_v2(&m, stream.raw()) },
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

/// A 3D CUDA array of `float` (or `float2`) texels (block-linear texture
/// storage; destroyed on drop).
pub struct Array3d {
    raw: sys::CUarray,
    /// Texels along x.
    pub width: usize,
    /// Texels along y.
    pub height: usize,
    /// Texels along z.
    pub depth: usize,
    /// Texel format.
    pub format: TexFormat,
    ctx: Arc<Context>,
}

// SAFETY: array handles may be used from any thread with the context current.
unsafe impl Send for Array3d {}
// SAFETY: as above.
unsafe impl Sync for Array3d {}

impl Array3d {
    /// Allocates a `width × height × depth` array of `float`s.
    pub fn new(ctx: &Arc<Context>, width: usize, height: usize, depth: usize) -> Result<Self> {
        Self::with_format(ctx, width, height, depth, TexFormat::Float1)
    }

    /// Allocates a `width × height × depth` array of `format` texels.
    pub fn with_format(
        ctx: &Arc<Context>,
        width: usize,
        height: usize,
        depth: usize,
        format: TexFormat,
    ) -> Result<Self> {
        ctx.bind()?;
        let (fmt, channels, _, _) = format_parts(format);
        let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: width,
            Height: height,
            Depth: depth,
            Format: fmt,
            NumChannels: channels,
            Flags: 0,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: fully initialised descriptor, out-parameter.
        check(
            unsafe { sys::cuArray3DCreate_v2(&mut raw, &desc) },
            &format!("cuArray3DCreate ({width}×{height}×{depth} {format:?})"),
        )?;
        Ok(Self {
            raw,
            width,
            height,
            depth,
            format,
            ctx: ctx.clone(),
        })
    }

    /// Copies a dense `[depth][height][width]` array of texels at `src`
    /// into the array on `stream`.
    pub fn copy_from_device(&self, src: sys::CUdeviceptr, stream: &Stream) -> Result<()> {
        let tb = format_parts(self.format).3;
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
            srcPitch: self.width * tb,
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
            WidthInBytes: self.width * tb,
            Height: self.height,
            Depth: self.depth,
        };
        // SAFETY: every field written; the source holds depth × height rows
        // of width floats.
        check(
            unsafe { sys::cuMemcpy3DAsync_v2(&m, stream.raw()) },
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
        let (_, _, flags, _) = format_parts(array.format);
        Self::create(
            ctx,
            &res,
            filter,
            flags,
            &format!(
                "cuTexObjectCreate (3D array {}×{}×{})",
                array.width, array.height, array.depth
            ),
        )
    }
}
