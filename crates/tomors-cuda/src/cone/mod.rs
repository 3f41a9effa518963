//! Cone-beam (FDK) back projection on the GPU:
//! [`ConeBackend`] for [`CudaBackend`].
//!
//! Two kernels (`kernels/cone_backproject.cu`, chosen by [`ConeKernel`]):
//! `cone_bp_tex` (the default) reads the projections through pitched 2D
//! textures with hardware bilinear interpolation (border = zero; a few
//! projections stacked per texture with zero rows between them), `cone_bp`
//! with plain loads and manual f32 interpolation. Both are voxel-driven, one
//! thread per voxel column (x, y) and run of [`CONE_ZB`] slices held in
//! registers; the per-(x, y) terms of each projection (depth, `(SOD/U)²`,
//! detector column and column weights, row and row step) are computed once
//! in f64 and reused along z, where only the row moves (f32). `cone_bp`
//! matches
//! [`backproject_cone_reference`](tomors_core::cone::backproject_cone_reference)
//! to f32 rounding (relative L2 ≤ 1e-5, the CPU back projector's bound);
//! `cone_bp_tex` within the texture unit's 8-bit weights (≤ 2e-3).
//! Per-projection cos θ, sin θ (f64) live in constant memory, at most
//! [`CONE_MAX_ANGLES`] per launch. Projections that do not fit in device
//! memory beside the slab are uploaded in chunks of angles, each chunk
//! accumulated into the device slab.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{ArrayView3, ArrayViewMut3};
use tomors_core::cone::{check_slab, ConeBackend, ConeGeometry, ConeVolume, FdkOptions};
use tomors_core::CoreError;

use crate::error::{CudaError, Result};
use crate::fbp::engine::Engine;
use crate::fbp::CudaBackend;
use crate::runtime::compile::cubin_cached;
use crate::runtime::{
    launch, Arg, Context, DeviceBuffer, Event, Function, Module, Stream, TexFilter, TexFormat,
    Texture,
};

mod backend;
pub(crate) mod fdk;
mod fdk_common;
pub(crate) mod fdk_fold;
pub(crate) mod fold;
mod fold_plan;
mod multi;

pub(crate) use backend::check_extents;
pub use fdk::fdk_slab_slices;
pub use fdk_common::FdkStats;
pub use fdk_fold::FdkFold;
pub use fold::FoldShape;
pub use multi::{slab_parts, SlabPart};

/// Source of the cone-beam back projector (`cone_bp`).
pub const CONE_BACKPROJECT_CU: &str = include_str!("../../kernels/cone_backproject.cu");

/// Angles per launch (the constant arrays hold 2 × 8 bytes per angle: 32 KiB).
pub const CONE_MAX_ANGLES: usize = 2048;

/// Slices accumulated in registers per thread.
pub const CONE_ZB: usize = 16;

/// Rows of one stacked projection texture at most (f32 row coordinates
/// below 8192 keep 10 fractional bits, finer than the 8-bit weights).
pub(crate) const TEX_ROWS: usize = 8192;

/// How the cone-beam kernel reads the projections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConeKernel {
    /// Plain loads and bilinear interpolation in f32 (`cone_bp`): equals the
    /// f64 reference to f32 rounding (relative L2 ≤ 1e-5; 9.4e-7 measured).
    Loads,
    /// Hardware bilinear interpolation through 2D textures (`cone_bp_tex`):
    /// one fetch per voxel and projection, 8-bit interpolation weights
    /// (relative L2 ≤ 2e-3 against the reference on smooth data; 4.9e-4
    /// measured). The default: 2.1× faster than [`ConeKernel::Loads`] on an
    /// H200 (see `docs/perf-notes.md`).
    #[default]
    Texture,
}

/// Times of one cone-beam back projection, host to host.
#[derive(Clone, Debug, Default)]
pub struct ConeStats {
    /// Angle chunks (uploads and launches).
    pub chunks: usize,
    /// Wall time of the projection uploads (s).
    pub upload_s: f64,
    /// Kernel time measured with events (s), all chunks.
    pub kernel_s: f64,
    /// Wall time of the slab download (s).
    pub download_s: f64,
    /// Wall time of the whole call (s).
    pub total_s: f64,
}

/// The cone-beam kernels of one device, compiled once per engine.
pub(crate) struct ConeModule {
    /// The module (for its constant arrays).
    pub module: Module,
    /// `cone_bp`: plain loads.
    pub bp: Function,
    /// `cone_bp_tex`: textures.
    pub bp_tex: Function,
    /// `cone_pack`: filtered rows into the stacked texture layout.
    pub pack: Function,
    /// `fdk_weight`: FDK pre-weighting in place.
    pub weight: Function,
}

impl ConeModule {
    pub(crate) fn load(ctx: &Arc<Context>) -> Result<Self> {
        ctx.bind()?;
        let defines = [
            ("MAXP".to_string(), CONE_MAX_ANGLES.to_string()),
            ("ZB".to_string(), CONE_ZB.to_string()),
        ];
        let module = load_module(ctx, "cone_backproject", CONE_BACKPROJECT_CU, &defines)?;
        Ok(Self {
            bp: module.function("cone_bp")?,
            bp_tex: module.function("cone_bp_tex")?,
            pack: module.function("cone_pack")?,
            weight: module.function("fdk_weight")?,
            module,
        })
    }

    /// The engine's cone-beam module, compiled or loaded on first use.
    pub(crate) fn of(engine: &mut Engine) -> Result<Arc<Self>> {
        if let Some(m) = engine.ext.get::<Arc<ConeModule>>() {
            return Ok(m.clone());
        }
        let m = Arc::new(Self::load(&engine.ctx)?);
        engine.ext.insert(m.clone());
        Ok(m)
    }

    /// Sets the per-projection cos θ, sin θ (f64) of `angles` (at most
    /// [`CONE_MAX_ANGLES`]) after the work queued on `stream`.
    pub(crate) fn set_angles(&self, angles: &[f32], stream: &Stream) -> Result<()> {
        let cos: Vec<f64> = angles.iter().map(|&a| (a as f64).cos()).collect();
        let sin: Vec<f64> = angles.iter().map(|&a| (a as f64).sin()).collect();
        self.module.set_global("c_cos", &cos, stream)?;
        self.module.set_global("c_sin", &sin, stream)
    }

    /// Packs `nang` projections of filtered rows (`src`: plain rows
    /// `row_stride` floats apart, or two rows per complex row when `pair`)
    /// into the stacked layout at `dst`, as global angles `a_first..`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pack(
        &self,
        stream: &Stream,
        src: u64,
        row_stride: usize,
        pair: bool,
        dst: u64,
        a_first: usize,
        nang: usize,
        nr: usize,
        nc: usize,
        layout: &StackLayout,
    ) -> Result<()> {
        let (src, dst) = (src, dst);
        let stride = row_stride as i64;
        let pair = i32::from(pair);
        let (a0, n, ir, ic) = (a_first as i32, nang as i32, nr as i32, nc as i32);
        let pitch = (layout.pitch_bytes / 4) as i32;
        let tpg = layout.tpg as i32;
        let gf = (layout.gbytes / 4) as i64;
        let params = [
            src.into(),
            stride.into(),
            pair.into(),
            dst.into(),
            a0.into(),
            n.into(),
            ir.into(),
            ic.into(),
            pitch.into(),
            tpg.into(),
            gf.into(),
        ];
        // SAFETY: the parameters match `cone_pack` in order and type; the
        // caller's buffers hold the rows and the stacked layout of every
        // angle up to a_first + nang.
        unsafe { launch_items(&self.pack, "cone_pack", nang * nr * nc, stream, &params) }
    }

    /// Multiplies `nang` projections at `q` (`[angle][row][col]`, global
    /// angles `a_first..`) by the FDK weights `cosw[row][col] ·
    /// angw[angle][col]`, keeping the flat index of the first non-finite
    /// value in `*bad`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn weight(
        &self,
        stream: &Stream,
        q: u64,
        cosw: u64,
        angw: u64,
        a_first: usize,
        nang: usize,
        nr: usize,
        nc: usize,
        bad: u64,
    ) -> Result<()> {
        let (q, cw, aw, bad) = (q, cosw, angw, bad);
        let (a0, n, ir, ic) = (a_first as i32, nang as i32, nr as i32, nc as i32);
        let params = [
            q.into(),
            cw.into(),
            aw.into(),
            a0.into(),
            n.into(),
            ir.into(),
            ic.into(),
            bad.into(),
        ];
        // SAFETY: the parameters match `fdk_weight`; `q` holds nang
        // projections, the weights cover every angle and column.
        unsafe { launch_items(&self.weight, "fdk_weight", nang * nr * nc, stream, &params) }
    }

    /// Back projects `nang` projections (the angles set by
    /// [`ConeModule::set_angles`]) into `nzs` slices from `z_first` (index
    /// into `volume`) at `vol`, overwriting or (`accumulate`) adding. The
    /// source: plain projections at `src` ([`ConeKernel::Loads`], the whole
    /// detector) or the textures already set in `c_tex` with `tpg`
    /// projections each, holding detector rows `rows` of `geometry` (see
    /// [`StackLayout::band`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backproject(
        &self,
        stream: &Stream,
        source: BpSource,
        rows: &Range<usize>,
        vol: u64,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_first: usize,
        nzs: usize,
        nang: usize,
        accumulate: bool,
    ) -> Result<()> {
        if rows.is_empty() || rows.end > geometry.n_rows() {
            return Err(CudaError::Parameter(format!(
                "detector rows {rows:?} are empty or outside the detector's {}",
                geometry.n_rows()
            )));
        }
        if matches!(source, BpSource::Loads(_)) && rows.len() != geometry.n_rows() {
            return Err(CudaError::Parameter(
                "the plain-load cone kernel reads the whole detector".into(),
            ));
        }
        let (row0, nrb) = (rows.start as i32, rows.len() as i32);
        let (nx, ny) = (volume.nx, volume.ny);
        let vp = vol;
        let (n, z, acc) = (nang as i32, nzs as i32, i32::from(accumulate));
        let (ix, iy) = (nx as i32, ny as i32);
        let (ic, ir) = (geometry.n_cols() as i32, geometry.n_rows() as i32);
        let sod = geometry.sod();
        let sdd = geometry.sdd();
        let pu = geometry.pixel_u();
        let pv = geometry.pixel_v();
        let cc = geometry.center_col();
        let cr = geometry.center_row();
        let vox = volume.voxel_size as f64;
        let zf = volume.z(z_first);
        let (pp, tg) = match source {
            BpSource::Loads(ptr) => (ptr, 0i32),
            BpSource::Textures(tpg) => (0u64, tpg as i32),
        };
        let (f, name, mut params): (_, _, Vec<Arg>) = match source {
            BpSource::Loads(_) => (&self.bp, "cone_bp", vec![pp.into(), vp.into()]),
            BpSource::Textures(_) => (&self.bp_tex, "cone_bp_tex", vec![vp.into()]),
        };
        params.extend_from_slice(&[n.into(), z.into(), acc.into()]);
        if let BpSource::Textures(_) = source {
            params.extend_from_slice(&[tg.into(), row0.into(), nrb.into()]);
        }
        params.extend_from_slice(&[
            ix.into(),
            iy.into(),
            ic.into(),
            ir.into(),
            sod.into(),
            sdd.into(),
            pu.into(),
            pv.into(),
            cc.into(),
            cr.into(),
            vox.into(),
            zf.into(),
        ]);
        let grid = (
            nx.div_ceil(16) as u32,
            ny.div_ceil(16) as u32,
            nzs.div_ceil(CONE_ZB) as u32,
        );
        // SAFETY: the parameters match `cone_bp` / `cone_bp_tex` in order
        // and type; the source holds `nang` projections of the geometry's
        // detector and `vol` holds nzs × ny × nx floats.
        unsafe { launch(f, name, grid, (256, 1, 1), 0, stream, &params) }.map_err(|e| match e {
            CudaError::Launch {
                kernel,
                dims,
                message,
            } => CudaError::Launch {
                kernel,
                dims: format!(
                    "{dims}; {nzs} slices of {nx}×{ny} from {nang} angles of {}×{}",
                    geometry.n_rows(),
                    geometry.n_cols()
                ),
                message,
            },
            e => e,
        })
    }
}

/// Where a cone-beam launch reads its projections.
#[derive(Clone, Copy, Debug)]
pub(crate) enum BpSource {
    /// Plain `[angle][row][col]` projections at this device address.
    Loads(u64),
    /// The textures in `c_tex`, this many projections each.
    Textures(usize),
}

/// Projections stacked in pitched 2D textures: `tpg` projections per
/// texture, each with a zero row above and one after the last, rows
/// `pitch_bytes` apart, textures `gbytes` apart. A band of detector rows
/// keeps the `tpg` of the whole detector (the kernel's texture coordinates
/// are the whole detector's, shifted by whole rows).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StackLayout {
    pub tpg: usize,
    pub pitch_bytes: usize,
    pub gbytes: usize,
    height: usize,
    nc: usize,
}

impl StackLayout {
    /// The layout for `nr` × `nc` projections on `ctx`'s device.
    ///
    /// Errors: a detector beyond the device's 2D texture limits.
    pub(crate) fn new(ctx: &Context, nr: usize, nc: usize) -> Result<Self> {
        Self::band(ctx, nr, nr, nc)
    }

    /// The layout of `nrb` rows of an `nr` × `nc` detector: the projections
    /// per texture of the whole detector, `nrb` rows each.
    ///
    /// Errors: a detector beyond the device's 2D texture limits.
    pub(crate) fn band(ctx: &Context, nr: usize, nrb: usize, nc: usize) -> Result<Self> {
        let tpg = ((TEX_ROWS - 1) / (nr + 1)).max(1);
        let align = ctx.pitch_align.max(32);
        let pitch_bytes = (nc * 4).div_ceil(align) * align;
        let height = tpg * (nrb.min(nr) + 1) + 1;
        if height > ctx.max_tex_height || nc > ctx.max_tex_width {
            return Err(CudaError::Parameter(format!(
                "a {nr}×{nc} detector exceeds the device's 2D texture limits ({}×{})",
                ctx.max_tex_height, ctx.max_tex_width
            )));
        }
        let gbytes = (height * pitch_bytes).div_ceil(512) * 512;
        Ok(Self {
            tpg,
            pitch_bytes,
            gbytes,
            height,
            nc,
        })
    }

    /// Bytes of the stacked layout of `nang` projections.
    pub(crate) fn bytes(&self, nang: usize) -> usize {
        nang.div_ceil(self.tpg) * self.gbytes
    }

    /// The texture objects (bilinear, border zero) over the stacked layout
    /// of `nang` projections at `base`, set into `c_tex` of `module`.
    pub(crate) fn bind(
        &self,
        ctx: &Arc<Context>,
        module: &ConeModule,
        base: u64,
        nang: usize,
        stream: &Stream,
    ) -> Result<Vec<Texture>> {
        let textures = stacked_textures(
            ctx,
            (base, nang.div_ceil(self.tpg), self.gbytes),
            (self.nc, self.height, self.pitch_bytes),
            TexFormat::Float1,
        )?;
        set_textures(&module.module, "c_tex", &textures, stream)?;
        Ok(textures)
    }
}

/// Launches the grid-stride kernel `f` over `items` in blocks of 256
/// threads (at most 65 535 × 8 blocks).
///
/// # Safety
/// As [`launch`]: `params` match the kernel's parameters in order and type,
/// and every buffer they name holds what the kernel reads and writes.
pub(crate) unsafe fn launch_items(
    f: &Function,
    name: &str,
    items: usize,
    stream: &Stream,
    params: &[Arg],
) -> Result<()> {
    let blocks = items.div_ceil(256).clamp(1, 65_535 * 8) as u32;
    // SAFETY: the caller's contract.
    unsafe { launch(f, name, (blocks, 1, 1), (256, 1, 1), 0, stream, params) }
}

/// Compiles (or loads from the kernel cache) the cone kernel file `name`
/// with `defines` for `ctx`'s device, and loads it.
pub(crate) fn load_module(
    ctx: &Arc<Context>,
    name: &str,
    source: &str,
    defines: &[(String, String)],
) -> Result<Module> {
    let (cubin, _) = cubin_cached(name, source, defines, &ctx.name, ctx.cc, ctx.driver)?;
    Module::load(ctx, &cubin)
}

/// Bilinear, border-zero texture objects over `groups` stacked pitched
/// textures of `width × height` texels (rows `pitch` bytes apart) at
/// `base`, `gbytes` apart.
pub(crate) fn stacked_textures(
    ctx: &Arc<Context>,
    (base, groups, gbytes): (u64, usize, usize),
    (width, height, pitch): (usize, usize, usize),
    format: TexFormat,
) -> Result<Vec<Texture>> {
    (0..groups)
        .map(|g| {
            Texture::pitch2d(
                ctx,
                base + (g * gbytes) as u64,
                width,
                height,
                pitch,
                format,
                TexFilter::Linear,
            )
        })
        .collect()
}

/// Sets the handles of `textures` into the constant array `name` of
/// `module`, after the work queued on `stream`.
pub(crate) fn set_textures(
    module: &Module,
    name: &str,
    textures: &[Texture],
    stream: &Stream,
) -> Result<()> {
    let handles: Vec<u64> = textures.iter().map(|t| t.raw).collect();
    module.set_global(name, &handles, stream)
}
