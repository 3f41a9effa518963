//! The per-device engine: modules, buffers, filtering, packing, back
//! projection and the overlapped slab pipeline.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};
use rayon::prelude::*;
use tomors_core::filter::{padded_len, RowFilter};
use tomors_core::{FilterSpec, Interpolation, Padding, ParallelGeometry, SliceGrid};

use crate::compile::{cubin_cached, fnv1a64};
use crate::driver::{
    launch, Array2d, Context, DeviceBuffer, Event, Function, Module, PinnedBuffer, Stream,
    TexFilter, TexFormat, Texture,
};
use crate::error::{CudaError, Result};
use crate::fft::{cufft_available, FftVariant, Plan, PlanKind};
use crate::kernels::{
    alu_defines, bp_defines_mapped, projection_coefficients, projection_coefficients_f64, BpConfig,
    KernelKind, SliceMode, BACKPROJECT_CU, FILTER_CU, MAX_CMEM_PROJECTIONS,
};

/// Times of the pipeline stages of the last `fbp`/`backproject` call.
#[derive(Clone, Debug, Default)]
pub struct PipelineStats {
    /// Slabs processed.
    pub slabs: usize,
    /// Slices processed.
    pub slices: usize,
    /// Slices per slab.
    pub slab_size: usize,
    /// Kernel configuration used.
    pub kernel: String,
    /// Host-to-device copies, summed (GPU time, ms).
    pub upload_ms: f64,
    /// Filtering (pad, FFT, multiply, inverse FFT), summed (GPU ms).
    pub filter_ms: f64,
    /// Packing into textures and back projection, summed (GPU ms).
    pub backproject_ms: f64,
    /// Device-to-host copies, summed (GPU ms).
    pub download_ms: f64,
    /// Host copies into pinned staging memory (ms).
    pub host_in_ms: f64,
    /// Host copies out of pinned staging memory (ms).
    pub host_out_ms: f64,
    /// Wall time of the whole call (ms).
    pub wall_ms: f64,
}

impl std::fmt::Display for PipelineStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} slices in {} slabs of {} ({}): wall {:.1} ms; GPU upload {:.1}, filter {:.1}, \
             back projection {:.1}, download {:.1} ms; host copies in {:.1}, out {:.1} ms",
            self.slices,
            self.slabs,
            self.slab_size,
            self.kernel,
            self.wall_ms,
            self.upload_ms,
            self.filter_ms,
            self.backproject_ms,
            self.download_ms,
            self.host_in_ms,
            self.host_out_ms
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct BpKey {
    kernel: KernelKind,
    map: u32,
    spt: usize,
    nx: usize,
    ny: usize,
    nproj: usize,
    /// `alu` only (baked in): linear interpolation and the cache width.
    linear: bool,
    cache_width: usize,
}

struct BpModule {
    module: Module,
    func: Function,
    cmem: bool,
    consts_hash: Option<u64>,
    /// `alu` only: the f64 per-projection constants and their hash.
    dconst: Option<(DeviceBuffer, u64)>,
}

/// Where the texels live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TexStorage {
    /// Pitch-linear device memory (row-major), written directly by the packing kernel.
    Pitch,
    /// CUDA arrays (block-linear: 2D tiles share cache lines), filled by a
    /// device-to-array copy after packing.
    #[default]
    Array,
}

#[derive(Clone, Copy, PartialEq)]
struct TexKey {
    storage: TexStorage,
    ptr: u64,
    width: usize,
    height: usize,
    pitch: usize,
    plane: usize,
    mode: SliceMode,
    filter: TexFilter,
}

struct Filters {
    _module: Module,
    pad_real: Function,
    pad_pair: Function,
    mul_half: Function,
    mul_full: Function,
    pack1: Function,
    pack2: Function,
    pack4: Function,
}

/// `#define` names and values of a module.
pub(crate) type Defines = Vec<(String, String)>;

/// The `#define`s of the back-projection module of `cfg` for this geometry
/// and interpolation, with whether the module bakes in linear
/// interpolation and its cache width (`alu` only; `false, 0` otherwise).
///
/// Errors: invalid `alu` parameters.
pub(crate) fn module_defines(
    cfg: BpConfig,
    grid: &SliceGrid,
    geom: &ParallelGeometry,
    interp: Interpolation,
    min_blocks: u32,
    standard_map: u32,
) -> Result<(Defines, bool, usize)> {
    let mut defines = bp_defines_mapped(cfg, grid, geom.n_angles(), min_blocks, standard_map);
    match cfg.kernel {
        KernelKind::Alu(p) => {
            p.validate()?;
            let (linear, width) = (interp == Interpolation::Linear, p.cache_width(geom, grid));
            defines.retain(|(k, _)| k != "MINB");
            defines.push(("MINB".into(), p.min_blocks.to_string()));
            defines.extend(alu_defines(p, linear, width, geom.n_bins()));
            Ok((defines, linear, width))
        }
        _ => Ok((defines, false, 0)),
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

fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// Geometry of the texture buffer of one slab.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TexLayout {
    pub groups: usize,
    pub pitch: usize,
    pub plane: usize,
    pub bytes: usize,
}

/// What to do with a slab before back projection.
#[derive(Clone, Copy)]
pub(crate) struct FilterJob {
    pub spec: FilterSpec,
    pub bin_width: f32,
}

/// Parameters of a back projection.
#[derive(Clone, Copy)]
pub(crate) struct BpJob<'a> {
    pub geom: &'a ParallelGeometry,
    pub grid: &'a SliceGrid,
    pub interp: Interpolation,
    pub scale: f32,
    pub cfg: BpConfig,
}

/// One device's state. Not shared between threads without a lock.
pub(crate) struct Engine {
    pub ctx: Arc<Context>,
    pub(crate) up: Stream,
    pub comp: Stream,
    pub(crate) down: Stream,
    filters: Filters,
    bp: HashMap<BpKey, BpModule>,
    plans: HashMap<(PlanKind, usize, usize), Plan>,
    pub(crate) raw: [Option<DeviceBuffer>; 2],
    pub(crate) out: [Option<DeviceBuffer>; 2],
    fft_a: Option<DeviceBuffer>,
    fft_b: Option<DeviceBuffer>,
    tex: Option<DeviceBuffer>,
    texs_dev: Option<DeviceBuffer>,
    resp: Option<DeviceBuffer>,
    resp_key: Option<(u64, usize)>,
    gconst: Option<DeviceBuffer>,
    textures: Vec<Texture>,
    arrays: Vec<Array2d>,
    tex_key: Option<TexKey>,
    /// Texture storage (pitch-linear memory or CUDA arrays).
    pub tex_storage: TexStorage,
    pub(crate) pin_in: [Option<PinnedBuffer>; 2],
    pub(crate) pin_out: [Option<PinnedBuffer>; 2],
    pub fft_variant: FftVariant,
    pub gpu_fft: bool,
    pub stats: PipelineStats,
    pub min_blocks: u32,
    /// Slices per slab (0 = automatic).
    pub slab_override: usize,
    /// Thread order of the `standard` kernel (see [`crate::kernels::DEFAULT_STANDARD_MAP`]).
    pub standard_map: u32,
    /// The cone-beam kernels (loaded on first use).
    pub(crate) cone: Option<Arc<crate::cone::ConeModule>>,
    /// The stacked texture layout of FDK's filtered projections.
    pub(crate) cone_tex: Option<DeviceBuffer>,
    /// The packed texels of the last `pack`: (address, plane and pitch in
    /// texels), for the `alu` kernel's plain-load caching.
    packed: (u64, usize, usize),
}

// SAFETY: every handle inside is usable from any thread with the context bound,
// and the engine is only used behind a Mutex.
unsafe impl Send for Engine {}

impl Engine {
    pub fn new(ordinal: usize) -> Result<Self> {
        let ctx = Context::new(ordinal)?;
        let (cubin, _) = cubin_cached("filter", FILTER_CU, &[], &ctx.name, ctx.cc, ctx.driver)?;
        let module = Module::load(&ctx, &cubin)?;
        let filters = Filters {
            pad_real: module.function("pad_real")?,
            pad_pair: module.function("pad_pair")?,
            mul_half: module.function("mul_half_spectrum")?,
            mul_full: module.function("mul_full_spectrum")?,
            pack1: module.function("pack1")?,
            pack2: module.function("pack2")?,
            pack4: module.function("pack4h")?,
            _module: module,
        };
        let gpu_fft = cufft_available();
        if !gpu_fft {
            tracing::warn!("cuFFT could not be loaded: filtering runs on the CPU");
        }
        Ok(Self {
            up: Stream::new(&ctx)?,
            comp: Stream::new(&ctx)?,
            down: Stream::new(&ctx)?,
            ctx,
            filters,
            bp: HashMap::new(),
            plans: HashMap::new(),
            raw: [None, None],
            out: [None, None],
            fft_a: None,
            fft_b: None,
            tex: None,
            texs_dev: None,
            resp: None,
            resp_key: None,
            gconst: None,
            textures: Vec::new(),
            arrays: Vec::new(),
            tex_key: None,
            tex_storage: TexStorage::default(),
            pin_in: [None, None],
            pin_out: [None, None],
            fft_variant: FftVariant::default(),
            gpu_fft,
            stats: PipelineStats::default(),
            min_blocks: 4,
            slab_override: 0,
            standard_map: crate::kernels::DEFAULT_STANDARD_MAP,
            cone: None,
            cone_tex: None,
            packed: (0, 0, 0),
        })
    }

    /// Releases every cached buffer (after an out-of-memory error).
    pub fn free_buffers(&mut self) {
        self.textures.clear();
        self.arrays.clear();
        self.tex_key = None;
        self.raw = [None, None];
        self.out = [None, None];
        self.fft_a = None;
        self.fft_b = None;
        self.tex = None;
        self.plans.clear();
        self.pin_in = [None, None];
        self.pin_out = [None, None];
        self.cone_tex = None;
    }

    fn row_grid(len: usize, rows: usize) -> (u32, u32, u32) {
        let gy = rows.clamp(1, 65535);
        (
            len.div_ceil(256) as u32,
            gy as u32,
            rows.div_ceil(gy).max(1) as u32,
        )
    }

    // ---------------------------------------------------------------- filtering

    fn plan(&mut self, kind: PlanKind, len: usize, batch: usize) -> Result<&Plan> {
        let key = (kind, len, batch);
        if !self.plans.contains_key(&key) {
            self.ctx.bind()?;
            let p = Plan::new(kind, len, batch)?;
            self.plans.insert(key, p);
        }
        Ok(&self.plans[&key])
    }

    fn upload_response(&mut self, spec: &FilterSpec, n: usize, bw: f32) -> Result<(u64, usize)> {
        let l = padded_len(n);
        let resp = spec.frequency_response(l, bw);
        let bytes: Vec<u8> = resp.iter().flat_map(|v| v.to_le_bytes()).collect();
        let key = (fnv1a64(&bytes), l);
        let ptr = ensure(&mut self.resp, &self.ctx, bytes.len(), "filter response")?;
        if self.resp_key != Some(key) {
            self.comp.synchronize()?;
            self.resp.as_ref().expect("allocated").upload(&resp)?;
            self.resp_key = Some(key);
        }
        Ok((ptr, l))
    }

    /// Bytes of FFT work memory for `rows` rows of `n` bins.
    pub fn fft_bytes(variant: FftVariant, rows: usize, n: usize) -> (usize, usize) {
        let l = padded_len(n);
        match variant {
            FftVariant::RealToComplex => (rows * l * 4, rows * (l / 2 + 1) * 8),
            FftVariant::ComplexPair => (rows.div_ceil(2) * l * 8, 0),
        }
    }

    /// Filters `rows` rows of `n` bins at `src` (row stride `n`) on the
    /// compute stream. Returns where the filtered rows are: (pointer, row
    /// stride in floats, paired layout).
    pub(crate) fn filter_rows(
        &mut self,
        src: u64,
        rows: usize,
        n: usize,
        job: &FilterJob,
        variant: FftVariant,
    ) -> Result<(u64, i64, i32)> {
        let (resp, l) = self.upload_response(&job.spec, n, job.bin_width)?;
        let (a_bytes, b_bytes) = Self::fft_bytes(variant, rows, n);
        let a = ensure(&mut self.fft_a, &self.ctx, a_bytes, "FFT buffer")?;
        let edge = i32::from(job.spec.padding == Padding::Edge);
        // Both variants pad the rows into buffer `a` with the same kernel
        // signature: real rows (R2C) or two rows per complex row (pair).
        let (pad, pad_name, padded_rows) = match variant {
            FftVariant::RealToComplex => (self.filters.pad_real, "pad_real", rows),
            FftVariant::ComplexPair => (self.filters.pad_pair, "pad_pair", rows.div_ceil(2)),
        };
        let (mut src_v, mut stride, mut a_v) = (src, n as i64, a);
        let (mut n_i, mut l_i, mut rows_i, mut edge_v) = (n as i32, l as i32, rows as i64, edge);
        // SAFETY: parameter types match pad_real / pad_pair.
        unsafe {
            let mut p: [*mut c_void; 7] = [
                &mut src_v as *mut _ as _,
                &mut stride as *mut _ as _,
                &mut a_v as *mut _ as _,
                &mut n_i as *mut _ as _,
                &mut l_i as *mut _ as _,
                &mut rows_i as *mut _ as _,
                &mut edge_v as *mut _ as _,
            ];
            launch(
                pad,
                pad_name,
                Self::row_grid(l, padded_rows),
                (256, 1, 1),
                0,
                &self.comp,
                &mut p,
            )?;
        }
        let comp = &self.comp as *const Stream;
        match variant {
            FftVariant::RealToComplex => {
                let b = ensure(&mut self.fft_b, &self.ctx, b_bytes, "FFT spectrum buffer")?;
                let f = l / 2 + 1;
                // SAFETY: the buffers hold `rows` rows of the planned layout;
                // `comp` outlives the call (it is a field of self).
                unsafe {
                    self.plan(PlanKind::R2C, l, rows)?
                        .exec(a, b, true, &*comp)?;
                }
                let mul = self.filters.mul_half;
                self.multiply_spectrum(mul, "mul_half_spectrum", b, resp, f, rows)?;
                // SAFETY: as above.
                unsafe {
                    self.plan(PlanKind::C2R, l, rows)?
                        .exec(b, a, false, &*comp)?;
                }
                Ok((a, l as i64, 0))
            }
            FftVariant::ComplexPair => {
                let pairs = padded_rows;
                // SAFETY: in-place C2C over `pairs` rows of `l` complex values.
                unsafe {
                    self.plan(PlanKind::C2C, l, pairs)?
                        .exec(a, a, true, &*comp)?;
                }
                let mul = self.filters.mul_full;
                self.multiply_spectrum(mul, "mul_full_spectrum", a, resp, l, pairs)?;
                // SAFETY: as above.
                unsafe {
                    self.plan(PlanKind::C2C, l, pairs)?
                        .exec(a, a, false, &*comp)?;
                }
                Ok((a, 2 * l as i64, 1))
            }
        }
    }

    /// Multiplies `rows` spectra of `width` complex values at `spectrum` by
    /// the filter response at `resp` (mul_half_spectrum / mul_full_spectrum,
    /// which share their signature), on the compute stream.
    fn multiply_spectrum(
        &self,
        kernel: Function,
        name: &str,
        spectrum: u64,
        resp: u64,
        width: usize,
        rows: usize,
    ) -> Result<()> {
        let (mut spec_v, mut resp_v) = (spectrum, resp);
        let (mut width_i, mut rows_i) = (width as i32, rows as i64);
        // SAFETY: parameter types match mul_half_spectrum / mul_full_spectrum.
        unsafe {
            let mut p: [*mut c_void; 4] = [
                &mut spec_v as *mut _ as _,
                &mut resp_v as *mut _ as _,
                &mut width_i as *mut _ as _,
                &mut rows_i as *mut _ as _,
            ];
            launch(
                kernel,
                name,
                Self::row_grid(width, rows),
                (256, 1, 1),
                0,
                &self.comp,
                &mut p,
            )
        }
    }

    // ------------------------------------------------------------------ packing

    pub(crate) fn tex_layout(
        &self,
        mode: SliceMode,
        slices: usize,
        na: usize,
        n: usize,
    ) -> TexLayout {
        let tb = mode.texel_bytes();
        let pitch_bytes = round_up(n * tb, self.ctx.pitch_align.max(32));
        let plane_bytes = round_up(na * pitch_bytes, 512);
        let groups = slices.div_ceil(mode.slices());
        TexLayout {
            groups,
            pitch: pitch_bytes / tb,
            plane: plane_bytes / tb,
            bytes: groups * plane_bytes,
        }
    }

    /// Packs `slices` slices (rows at `src`, see [`Engine::filter_rows`]) into
    /// the texture buffer and makes sure texture objects exist for it.
    fn pack(
        &mut self,
        src: (u64, i64, i32),
        slices: usize,
        na: usize,
        n: usize,
        cfg: BpConfig,
        interp: Interpolation,
    ) -> Result<u64> {
        let mode = cfg.mode;
        if na > 65535 || na > self.ctx.max_tex_height || n > self.ctx.max_tex_width {
            return Err(CudaError::Parameter(format!(
                "{na} angles × {n} bins exceed the device's texture limits ({} × {})",
                self.ctx.max_tex_height.min(65535),
                self.ctx.max_tex_width
            )));
        }
        let lay = self.tex_layout(mode, slices, na, n);
        let tex = ensure(&mut self.tex, &self.ctx, lay.bytes, "texture buffer")?;
        self.packed = (tex, lay.plane, lay.pitch);
        let (f, name) = match mode {
            SliceMode::F32 => (self.filters.pack1, "pack1"),
            SliceMode::Float2 => (self.filters.pack2, "pack2"),
            SliceMode::Half4 => (self.filters.pack4, "pack4h"),
        };
        let (mut s, mut rs, mut pair) = src;
        let mut dst = tex;
        let mut plane = lay.plane as i64;
        let mut pitch = lay.pitch as i32;
        let (mut n_i, mut na_i, mut ns_i) = (n as i32, na as i32, slices as i32);
        // SAFETY: parameter types match pack1/pack2/pack4h.
        unsafe {
            let mut p: [*mut c_void; 9] = [
                &mut s as *mut _ as _,
                &mut rs as *mut _ as _,
                &mut pair as *mut _ as _,
                &mut dst as *mut _ as _,
                &mut plane as *mut _ as _,
                &mut pitch as *mut _ as _,
                &mut n_i as *mut _ as _,
                &mut na_i as *mut _ as _,
                &mut ns_i as *mut _ as _,
            ];
            launch(
                f,
                name,
                (n.div_ceil(256) as u32, na as u32, lay.groups as u32),
                (256, 1, 1),
                0,
                &self.comp,
                &mut p,
            )?;
        }
        // The alu kernel caches texels (point sampling) and interpolates
        // itself, except when it oversamples (linear sub-bin samples).
        let filter = match (interp, mode, cfg.kernel) {
            (_, SliceMode::F32 | SliceMode::Float2, KernelKind::Alu(p))
                if p.oversample || (p.hybrid > 0 && interp == Interpolation::Linear) =>
            {
                TexFilter::Linear
            }
            (_, SliceMode::Half4, _)
            | (Interpolation::Nearest, _, _)
            | (_, _, KernelKind::Alu(_)) => TexFilter::Point,
            (Interpolation::Linear, _, _) => TexFilter::Linear,
        };
        let key = TexKey {
            storage: self.tex_storage,
            ptr: tex,
            width: n,
            height: na,
            pitch: lay.pitch,
            plane: lay.plane,
            mode,
            filter,
        };
        let fmt = match mode {
            SliceMode::F32 => TexFormat::Float1,
            SliceMode::Float2 => TexFormat::Float2,
            SliceMode::Half4 => TexFormat::Uint2,
        };
        let tb = mode.texel_bytes();
        if self.tex_key != Some(key) || self.textures.len() < lay.groups {
            // Kernels queued earlier may still read the old textures.
            self.comp.synchronize()?;
            self.textures.clear();
            self.arrays.clear();
            for g in 0..lay.groups {
                let t = match self.tex_storage {
                    TexStorage::Pitch => Texture::pitch2d(
                        &self.ctx,
                        tex + (g * lay.plane * tb) as u64,
                        n,
                        na,
                        lay.pitch * tb,
                        fmt,
                        filter,
                    )?,
                    TexStorage::Array => {
                        let a = Array2d::new(&self.ctx, n, na, fmt)?;
                        let t = Texture::array(&self.ctx, &a, filter)?;
                        self.arrays.push(a);
                        t
                    }
                };
                self.textures.push(t);
            }
            let handles: Vec<u64> = self.textures.iter().map(|t| t.raw).collect();
            ensure(
                &mut self.texs_dev,
                &self.ctx,
                handles.len() * 8,
                "texture handles",
            )?;
            self.texs_dev
                .as_ref()
                .expect("allocated")
                .upload(&handles)?;
            self.tex_key = Some(key);
        }
        if self.tex_storage == TexStorage::Array {
            for (g, a) in self.arrays.iter().take(lay.groups).enumerate() {
                a.copy_from_device(
                    tex + (g * lay.plane * tb) as u64,
                    lay.pitch * tb,
                    &self.comp,
                )?;
            }
        }
        Ok(self.texs_dev.as_ref().expect("allocated").ptr())
    }

    // --------------------------------------------------------- back projection

    fn bp_module(
        &mut self,
        cfg: BpConfig,
        grid: &SliceGrid,
        geom: &ParallelGeometry,
        interp: Interpolation,
    ) -> Result<BpKey> {
        let (defines, linear, cache_width) =
            module_defines(cfg, grid, geom, interp, self.min_blocks, self.standard_map)?;
        let key = BpKey {
            kernel: cfg.kernel,
            map: self.standard_map,
            spt: cfg.mode.slices(),
            nx: grid.nx,
            ny: grid.ny,
            nproj: geom.n_angles(),
            linear,
            cache_width,
        };
        if !self.bp.contains_key(&key) {
            let (cubin, _) = cubin_cached(
                "backproject",
                BACKPROJECT_CU,
                &defines,
                &self.ctx.name,
                self.ctx.cc,
                self.ctx.driver,
            )?;
            let module = Module::load(&self.ctx, &cubin)?;
            let func = module.function(cfg.kernel.symbol())?;
            self.bp.insert(
                key,
                BpModule {
                    module,
                    func,
                    cmem: geom.n_angles() <= MAX_CMEM_PROJECTIONS,
                    consts_hash: None,
                    dconst: None,
                },
            );
        }
        if let KernelKind::Alu(_) = cfg.kernel {
            // The alu kernel reads its constants in f64 from a global buffer.
            let coef = projection_coefficients_f64(geom, grid);
            let bytes: Vec<u8> = coef.iter().flat_map(|v| v.to_le_bytes()).collect();
            let h = fnv1a64(&bytes);
            if !matches!(&self.bp[&key].dconst, Some((_, old)) if *old == h) {
                let buf = DeviceBuffer::new(&self.ctx, bytes.len(), "alu projection constants")?;
                self.comp.synchronize()?;
                buf.upload(&coef)?;
                self.bp.get_mut(&key).expect("present").dconst = Some((buf, h));
            }
            return Ok(key);
        }
        // Upload the per-projection constants when they changed.
        let coef = projection_coefficients(geom, grid);
        let bytes: Vec<u8> = coef.iter().flat_map(|v| v.to_le_bytes()).collect();
        let h = fnv1a64(&bytes);
        let cmem = self.bp[&key].cmem;
        let stale = self.bp[&key].consts_hash != Some(h);
        if cmem && stale {
            let n = geom.n_angles();
            let m = &self.bp[&key].module;
            m.set_global("c_c0", &coef[..n], &self.comp)?;
            m.set_global("c_cx", &coef[n..2 * n], &self.comp)?;
            m.set_global("c_cy", &coef[2 * n..], &self.comp)?;
            self.bp.get_mut(&key).expect("present").consts_hash = Some(h);
        } else if !cmem {
            ensure(
                &mut self.gconst,
                &self.ctx,
                bytes.len(),
                "projection constants",
            )?;
            self.comp.synchronize()?;
            self.gconst.as_ref().expect("allocated").upload(&coef)?;
        }
        Ok(key)
    }

    /// Launches the back projection of `slices` packed slices into `out` on the compute stream.
    fn launch_bp(
        &mut self,
        key: BpKey,
        texs: u64,
        out: u64,
        slices: usize,
        scale: f32,
        cfg: BpConfig,
    ) -> Result<()> {
        let m = &self.bp[&key];
        let groups = slices.div_ceil(cfg.mode.slices());
        let tile = match cfg.kernel {
            KernelKind::Alu(p) => p.tile as usize,
            _ => 16,
        };
        let grid = (
            key.nx.div_ceil(tile) as u32,
            key.ny.div_ceil(tile) as u32,
            groups as u32,
        );
        let block = (256, 1, 1);
        let (mut t, mut o, mut ns, mut sc) = (texs, out, slices as i32, scale);
        let mut g = self.gconst.as_ref().map_or(0, |b| b.ptr());
        let mut d = m.dconst.as_ref().map_or(0, |b| b.0.ptr());
        let (mut texels, plane, pitch) = self.packed;
        let (mut plane, mut pitch) = (plane as i64, pitch as i32);
        let mut p: Vec<*mut c_void> = vec![
            &mut t as *mut _ as _,
            &mut o as *mut _ as _,
            &mut ns as *mut _ as _,
            &mut sc as *mut _ as _,
        ];
        if let KernelKind::Alu(_) = cfg.kernel {
            p.push(&mut d as *mut _ as _);
            p.push(&mut texels as *mut _ as _);
            p.push(&mut plane as *mut _ as _);
            p.push(&mut pitch as *mut _ as _);
        } else if !m.cmem {
            p.push(&mut g as *mut _ as _);
        }
        // SAFETY: parameter types match bp_standard / bp_texopt / bp_alu.
        unsafe {
            launch(
                m.func,
                cfg.kernel.symbol(),
                grid,
                block,
                0,
                &self.comp,
                &mut p,
            )
        }
        .map_err(|e| match e {
            CudaError::Launch {
                kernel,
                dims,
                message,
            } => CudaError::Launch {
                kernel: format!("{kernel} ({cfg})"),
                dims: format!(
                    "{dims}; {} slices of {}×{} from {} angles",
                    slices, key.nx, key.ny, key.nproj
                ),
                message,
            },
            e => e,
        })
    }

    /// Filters (optionally), packs and back projects one slab already in
    /// device memory at `raw` (`slices × na × n` floats) into `out`.
    fn process_slab(
        &mut self,
        raw: u64,
        out: u64,
        slices: usize,
        filter: Option<&FilterJob>,
        job: &BpJob<'_>,
        marks: Option<(&Event, &Event)>,
    ) -> Result<()> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let rows = slices * na;
        if let Some((start, _)) = marks {
            start.record(&self.comp)?;
        }
        let src = match filter {
            Some(f) if self.gpu_fft => self.filter_rows(raw, rows, n, f, self.fft_variant)?,
            _ => (raw, n as i64, 0),
        };
        if let Some((_, mid)) = marks {
            mid.record(&self.comp)?;
        }
        let key = self.bp_module(job.cfg, job.grid, job.geom, job.interp)?;
        let texs = self.pack(src, slices, na, n, job.cfg, job.interp)?;
        self.launch_bp(key, texs, out, slices, job.scale, job.cfg)
    }

    /// Device bytes one slice needs in the pipeline.
    fn bytes_per_slice(&self, job: &BpJob<'_>, filtered: bool) -> usize {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = na * n * 4;
        let out = job.grid.nx * job.grid.ny * 4;
        let (a, b) = if filtered {
            Self::fft_bytes(self.fft_variant, na, n)
        } else {
            (0, 0)
        };
        let tex = self.tex_layout(SliceMode::F32, 1, na, n).bytes;
        2 * raw + 2 * out + a + b + tex
    }

    /// Slices per slab: `TOMORS_CUDA_SLAB` if set, else about 1.5 GB of device memory, a
    /// multiple of the slices per texel.
    pub fn slab_size(&self, job: &BpJob<'_>, filtered: bool, total: usize) -> usize {
        let spt = job.cfg.mode.slices();
        if self.slab_override > 0 {
            return self.slab_override.min(total.max(1));
        }
        if let Some(s) = std::env::var("TOMORS_CUDA_SLAB")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            return s.max(1).min(total.max(1));
        }
        let per = self.bytes_per_slice(job, filtered).max(1);
        let budget = 1_500_000_000usize;
        let mut s = (budget / per).clamp(1, 64);
        if s >= spt {
            s -= s % spt;
        }
        s.min(total.max(1))
    }

    fn ensure_pipeline(&mut self, ss: usize, job: &BpJob<'_>, filtered: bool) -> Result<()> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = ss * na * n;
        let out = ss * job.grid.nx * job.grid.ny;
        for b in 0..2 {
            ensure(&mut self.raw[b], &self.ctx, raw * 4, "slab sinograms")?;
            ensure(&mut self.out[b], &self.ctx, out * 4, "slab slices")?;
            ensure_pinned(&mut self.pin_in[b], &self.ctx, raw)?;
            ensure_pinned(&mut self.pin_out[b], &self.ctx, out)?;
        }
        if filtered && self.gpu_fft {
            let rows = ss * na;
            let (a, b) = Self::fft_bytes(self.fft_variant, rows, n);
            ensure(&mut self.fft_a, &self.ctx, a, "FFT buffer")?;
            if b > 0 {
                ensure(&mut self.fft_b, &self.ctx, b, "FFT spectrum buffer")?;
            }
            let l = padded_len(n);
            match self.fft_variant {
                FftVariant::RealToComplex => {
                    self.plan(PlanKind::R2C, l, rows)?;
                    self.plan(PlanKind::C2R, l, rows)?;
                }
                FftVariant::ComplexPair => {
                    self.plan(PlanKind::C2C, l, rows.div_ceil(2))?;
                }
            }
        }
        let lay = self.tex_layout(job.cfg.mode, ss, na, n);
        ensure(&mut self.tex, &self.ctx, lay.bytes, "texture buffer")?;
        Ok(())
    }

    /// Runs the overlapped pipeline over `chunks` (pairs of sinogram slabs
    /// `[slice][angle][bin]` and output slabs `[slice][y][x]`): slabs of
    /// `ss` slices stream through upload → filter → back projection →
    /// download on three streams with double-buffered device memory and
    /// pinned staging buffers. Retries with smaller slabs on out-of-memory.
    #[allow(clippy::needless_range_loop)]
    pub fn run_pipeline(
        &mut self,
        chunks: Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)>,
        filter: Option<FilterJob>,
        job: &BpJob<'_>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.ctx.bind()?;
        let total: usize = chunks.iter().map(|c| c.0.shape()[0]).sum();
        let mut ss = self.slab_size(job, filter.is_some(), total);
        loop {
            match self.ensure_pipeline(ss, job, filter.is_some()) {
                Ok(()) => break,
                Err(e) if e.is_out_of_memory() && ss > 1 => {
                    tracing::warn!("{e}; retrying with slabs of {} slices", ss / 2);
                    self.free_buffers();
                    ss /= 2;
                }
                Err(e) => return Err(e),
            }
        }
        // CPU filtering when cuFFT is missing.
        let cpu_filter = match (&filter, self.gpu_fft) {
            (Some(f), false) => Some(RowFilter::new(&f.spec, job.geom.n_bins(), f.bin_width)?),
            _ => None,
        };
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let plane_out = job.grid.nx * job.grid.ny;
        let mut stats = PipelineStats {
            slab_size: ss,
            slices: total,
            kernel: job.cfg.to_string(),
            ..Default::default()
        };
        let ev =
            |ctx: &Arc<Context>| -> Result<[Event; 2]> { Ok([Event::new(ctx)?, Event::new(ctx)?]) };
        let (up0, up1, c0, c1, c2, d0, d1) = (
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
            ev(&self.ctx)?,
        );
        // Split chunks into slabs.
        let mut slabs: Vec<(ArrayView3<'_, f32>, ArrayViewMut3<'_, f32>)> = Vec::new();
        for (mut i, mut o) in chunks {
            while i.shape()[0] > 0 {
                let k = ss.min(i.shape()[0]);
                let (a, ri) = i.split_at(Axis(0), k);
                let (b, ro) = o.split_at(Axis(0), k);
                slabs.push((a, b));
                i = ri;
                o = ro;
            }
        }
        let ns = slabs.len();
        stats.slabs = ns;
        let mut pending: Vec<Option<(ArrayViewMut3<'_, f32>, usize)>> =
            (0..ns).map(|_| None).collect();
        let mut inputs: Vec<Option<ArrayView3<'_, f32>>> = Vec::with_capacity(ns);
        for (a, b) in slabs.into_iter() {
            inputs.push(Some(a));
            let k = b.shape()[0];
            pending[inputs.len() - 1] = Some((b, k));
        }
        for i in 0..=ns {
            if i < ns {
                let b = i % 2;
                let input = inputs[i].take().expect("each slab once");
                let k = input.shape()[0];
                if i >= 2 {
                    up1[b].synchronize()?;
                }
                let th = Instant::now();
                {
                    let pin = self.pin_in[b].as_mut().expect("allocated");
                    let dst = &mut pin.as_mut_slice()[..k * na * n];
                    copy_in(&input, dst);
                    if let Some(f) = &cpu_filter {
                        let mut v = ndarray::ArrayViewMut2::from_shape((k * na, n), dst)
                            .map_err(|e| CudaError::Parameter(e.to_string()))?;
                        f.apply(v.view_mut())?;
                    }
                }
                stats.host_in_ms += th.elapsed().as_secs_f64() * 1e3;
                let raw = self.raw[b].as_ref().expect("allocated");
                if i >= 2 {
                    self.up.wait(&c2[b])?;
                }
                up0[b].record(&self.up)?;
                // SAFETY: the pinned buffer is not touched until up1[b] completes.
                unsafe {
                    raw.upload_async(
                        0,
                        self.pin_in[b]
                            .as_ref()
                            .expect("allocated")
                            .as_slice()
                            .as_ptr() as *const u8,
                        k * na * n * 4,
                        &self.up,
                    )?;
                }
                up1[b].record(&self.up)?;
                self.comp.wait(&up1[b])?;
                if i >= 2 {
                    self.comp.wait(&d1[b])?;
                }
                let (raw_ptr, out_ptr) =
                    (raw.ptr(), self.out[b].as_ref().expect("allocated").ptr());
                let fj = if self.gpu_fft { filter } else { None };
                self.process_slab(
                    raw_ptr,
                    out_ptr,
                    k,
                    fj.as_ref(),
                    job,
                    Some((&c0[b], &c1[b])),
                )?;
                c2[b].record(&self.comp)?;
                self.down.wait(&c2[b])?;
                d0[b].record(&self.down)?;
                // SAFETY: the pinned buffer is read by the host only after d1[b] completes.
                unsafe {
                    self.out[b].as_ref().expect("allocated").download_async(
                        0,
                        self.pin_out[b]
                            .as_mut()
                            .expect("allocated")
                            .as_mut_slice()
                            .as_mut_ptr() as *mut u8,
                        k * plane_out * 4,
                        &self.down,
                    )?;
                }
                d1[b].record(&self.down)?;
            }
            if i >= 1 {
                let j = i - 1;
                let b = j % 2;
                d1[b].synchronize()?;
                let (mut dst, k) = pending[j].take().expect("each slab once");
                let th = Instant::now();
                let src = &self.pin_out[b].as_ref().expect("allocated").as_slice()[..k * plane_out];
                copy_out(src, &mut dst);
                stats.host_out_ms += th.elapsed().as_secs_f64() * 1e3;
                stats.upload_ms += up0[b].elapsed_ms(&up1[b])? as f64;
                stats.filter_ms += c0[b].elapsed_ms(&c1[b])? as f64;
                stats.backproject_ms += c1[b].elapsed_ms(&c2[b])? as f64;
                stats.download_ms += d0[b].elapsed_ms(&d1[b])? as f64;
            }
        }
        stats.wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        self.stats = stats;
        Ok(())
    }

    /// Filters `rows` (each of `n` bins) in place on the GPU (synchronous).
    pub fn filter_host(
        &mut self,
        mut data: ndarray::ArrayViewMut2<'_, f32>,
        job: &FilterJob,
    ) -> Result<()> {
        let (rows, n) = data.dim();
        if rows == 0 {
            return Ok(());
        }
        if !self.gpu_fft {
            RowFilter::new(&job.spec, n, job.bin_width)?.apply(data)?;
            return Ok(());
        }
        self.ctx.bind()?;
        let l = padded_len(n);
        let per_row = n * 8 + l * 16;
        let chunk = (1_000_000_000 / per_row).clamp(2, 65535);
        for mut part in data.axis_chunks_iter_mut(Axis(0), chunk) {
            let r = part.nrows();
            let host: Vec<f32> = part.iter().copied().collect();
            let src = ensure(&mut self.raw[0], &self.ctx, r * n * 4, "filter rows")?;
            let dst = ensure(&mut self.out[0], &self.ctx, r * n * 4, "filtered rows")?;
            self.comp.synchronize()?;
            self.raw[0].as_ref().expect("allocated").upload(&host)?;
            let (mut s, mut rs, mut pair) = self.filter_rows(src, r, n, job, self.fft_variant)?;
            let mut d = dst;
            let mut plane = (r * n) as i64;
            let (mut pitch, mut n_i, mut na_i, mut ns_i) = (n as i32, n as i32, r as i32, 1i32);
            if r > 65535 {
                return Err(CudaError::Parameter("filter chunk too tall".into()));
            }
            // SAFETY: parameter types match pack1 (one "slice" of r rows).
            unsafe {
                let mut p: [*mut c_void; 9] = [
                    &mut s as *mut _ as _,
                    &mut rs as *mut _ as _,
                    &mut pair as *mut _ as _,
                    &mut d as *mut _ as _,
                    &mut plane as *mut _ as _,
                    &mut pitch as *mut _ as _,
                    &mut n_i as *mut _ as _,
                    &mut na_i as *mut _ as _,
                    &mut ns_i as *mut _ as _,
                ];
                launch(
                    self.filters.pack1,
                    "pack1",
                    (n.div_ceil(256) as u32, r as u32, 1),
                    (256, 1, 1),
                    0,
                    &self.comp,
                    &mut p,
                )?;
            }
            self.comp.synchronize()?;
            let mut res = vec![0f32; r * n];
            self.out[0]
                .as_ref()
                .expect("allocated")
                .download(&mut res)?;
            for (d, v) in part.iter_mut().zip(res) {
                *d = v;
            }
        }
        Ok(())
    }

    // --------------------------------------------------------- benchmark hooks

    /// Uploads `data` (`slices × na × n`, already filtered or raw) and packs it
    /// into textures for `cfg`; returns the texture-handle array pointer.
    pub(crate) fn stage_resident(
        &mut self,
        data: &[f32],
        slices: usize,
        job: &BpJob<'_>,
    ) -> Result<(BpKey2, u64)> {
        let na = job.geom.n_angles();
        let n = job.geom.n_bins();
        let raw = ensure(
            &mut self.raw[0],
            &self.ctx,
            slices * na * n * 4,
            "resident sinograms",
        )?;
        let out = ensure(
            &mut self.out[0],
            &self.ctx,
            slices * job.grid.nx * job.grid.ny * 4,
            "resident slices",
        )?;
        self.comp.synchronize()?;
        self.raw[0].as_ref().expect("allocated").upload(data)?;
        let key = self.bp_module(job.cfg, job.grid, job.geom, job.interp)?;
        let texs = self.pack((raw, n as i64, 0), slices, na, n, job.cfg, job.interp)?;
        self.comp.synchronize()?;
        let _ = out;
        Ok((BpKey2(key), texs))
    }

    /// Launches the resident back projection once (for timing).
    pub(crate) fn launch_resident(
        &mut self,
        key: BpKey2,
        texs: u64,
        slices: usize,
        scale: f32,
        cfg: BpConfig,
    ) -> Result<()> {
        let out = self.out[0].as_ref().expect("staged").ptr();
        self.launch_bp(key.0, texs, out, slices, scale, cfg)
    }

    /// Times one filtering of `slices × na` rows of `n` bins resident on the
    /// device with `variant` (ms, median of `reps` after a warm-up).
    pub(crate) fn time_filter(
        &mut self,
        rows: usize,
        n: usize,
        variant: FftVariant,
        reps: usize,
    ) -> Result<f64> {
        let data: Vec<f32> = (0..rows * n)
            .map(|i| ((i * 2_654_435_761usize) % 1000) as f32 * 1e-3)
            .collect();
        let raw = ensure(
            &mut self.raw[0],
            &self.ctx,
            rows * n * 4,
            "filter bench rows",
        )?;
        self.comp.synchronize()?;
        self.raw[0].as_ref().expect("allocated").upload(&data)?;
        let job = FilterJob {
            spec: FilterSpec::default(),
            bin_width: 1.0,
        };
        let (e0, e1) = (Event::new(&self.ctx)?, Event::new(&self.ctx)?);
        let mut times = Vec::new();
        for r in 0..=reps {
            e0.record(&self.comp)?;
            self.filter_rows(raw, rows, n, &job, variant)?;
            e1.record(&self.comp)?;
            e1.synchronize()?;
            if r > 0 {
                times.push(e0.elapsed_ms(&e1)? as f64);
            }
        }
        Ok(median(&mut times))
    }

    /// Records an event on the compute stream (for timing from outside).
    pub(crate) fn event(&self) -> Result<Event> {
        Event::new(&self.ctx)
    }
}

/// Opaque module key handed to the benchmark.
#[derive(Clone, Copy)]
pub(crate) struct BpKey2(BpKey);

/// Median of a list (sorted in place); 0 for an empty list.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

const COPY_CHUNK: usize = 1 << 18;

/// Copies a slab into contiguous staging memory (parallel when contiguous).
pub(crate) fn copy_in(src: &ArrayView3<'_, f32>, dst: &mut [f32]) {
    match src.as_slice() {
        Some(s) => dst
            .par_chunks_mut(COPY_CHUNK)
            .zip(s.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s)),
        None => {
            for (d, v) in dst.iter_mut().zip(src.iter()) {
                *d = *v;
            }
        }
    }
}

/// Copies contiguous staging memory into a slab (parallel when contiguous).
pub(crate) fn copy_out(src: &[f32], dst: &mut ArrayViewMut3<'_, f32>) {
    match dst.as_slice_mut() {
        Some(d) => d
            .par_chunks_mut(COPY_CHUNK)
            .zip(src.par_chunks(COPY_CHUNK))
            .for_each(|(d, s)| d.copy_from_slice(s)),
        None => {
            for (d, v) in dst.iter_mut().zip(src.iter()) {
                *d = *v;
            }
        }
    }
}
