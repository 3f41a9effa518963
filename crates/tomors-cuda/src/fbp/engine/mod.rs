//! The per-device engine: modules, buffers, filtering, packing, back
//! projection and the overlapped slab pipeline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ndarray::{ArrayView3, ArrayViewMut3, Axis};
use tomors_core::filter::{padded_len, RowFilter};
use tomors_core::{FilterSpec, Interpolation, Padding, ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::fft::{cufft_available, FftVariant, Plan, PlanKind};
use crate::fbp::kernels::{
    alu_defines, bp_defines_mapped, projection_coefficients, projection_coefficients_f64,
    AluParams, BpConfig, KernelKind, SliceMode, SweepParams, TensorParams, BACKPROJECT_CU,
    FILTER_CU, MAX_CMEM_PROJECTIONS,
};
use crate::fbp::sweep::{
    bp_launch as sweep_bp_launch, pack_launch as sweep_pack_launch, padded_bins,
    padded_bins_staged, row_slots, shared_bytes, sweep_defines, SWEEP_CU,
};
use crate::fbp::tensor::{tensor_defines, TENSOR_CU};
use crate::runtime::compile::{cubin_cached, fnv1a64};
use crate::runtime::{
    ensure, ensure_pinned, launch, Arg, Array2d, Context, DeviceBuffer, Event, Function, Module,
    PinnedBuffer, Stream, TexFilter, TexFormat, Texture,
};

mod bp;
mod device;
mod filter;
mod pack;
mod pipeline;
mod resident;
mod tensor;

pub(crate) use crate::runtime::{copy_in, copy_out};
pub(crate) use bp::{module_defines, module_source};
use bp::{BpKey, BpModule};
pub use device::DeviceOrder;
use pack::TexKey;
pub use pack::TexStorage;
pub use pipeline::PipelineStats;
pub(crate) use pipeline::NBUF;
pub(crate) use resident::median;

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

fn round_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
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
    /// The pipeline's filtering stream: a slab is filtered while the
    /// previous one is back projected on `comp`.
    filt: Stream,
    filters: Filters,
    bp: HashMap<BpKey, BpModule>,
    plans: HashMap<(PlanKind, usize, usize), Plan>,
    pub(crate) raw: [Option<DeviceBuffer>; NBUF],
    pub(crate) out: [Option<DeviceBuffer>; NBUF],
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
    pub(crate) pin_in: [Option<PinnedBuffer>; NBUF],
    pub(crate) pin_out: [Option<PinnedBuffer>; NBUF],
    pub fft_variant: FftVariant,
    pub gpu_fft: bool,
    pub stats: PipelineStats,
    pub min_blocks: u32,
    /// Tests only: compile the hybrid `alu` kernels with counters of the
    /// blocks that take each path (see [`Engine::path_counts`]).
    pub count_paths: bool,
    /// Slices per slab (0 = automatic).
    pub slab_override: usize,
    /// Filter on the compute stream, not overlapped with the back
    /// projection ([`crate::CudaOptions::serial_filter`]).
    pub serial_filter: bool,
    /// Thread order of the `standard` kernel (see [`crate::fbp::kernels::DEFAULT_STANDARD_MAP`]).
    pub standard_map: u32,
    /// Per-device state of the layers above (the cone-beam kernels, loaded
    /// on first use).
    pub(crate) ext: crate::fbp::extensions::Extensions,
    /// The stacked texture layout of FDK's filtered projections (kept here so
    /// that an out-of-memory retry frees it with the other buffers).
    pub(crate) stack_tex: Option<DeviceBuffer>,
    /// The packed texels of the last `pack`: (address, plane and pitch in
    /// texels), for the `alu` kernel's plain-load caching.
    packed: (u64, usize, usize),
    /// The line-sweep entries of the last slab and the module that packed them.
    sweep_buf: Option<DeviceBuffer>,
    sweep_key: Option<BpKey>,
    /// The tensor-core entries (per-slot maxima, then the entries) of the
    /// last two slabs (alternately, so that the pipeline packs a slab on the
    /// filtering stream while the previous one is back projected) and the
    /// module that packed them.
    tensor_buf: [Option<DeviceBuffer>; 2],
    /// The buffer of `tensor_buf` the next packing writes.
    tensor_next: usize,
    tensor_key: Option<BpKey>,
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
            filt: Stream::new(&ctx)?,
            ctx,
            filters,
            bp: HashMap::new(),
            plans: HashMap::new(),
            raw: Default::default(),
            out: Default::default(),
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
            pin_in: Default::default(),
            pin_out: Default::default(),
            fft_variant: FftVariant::default(),
            gpu_fft,
            stats: PipelineStats::default(),
            min_blocks: 4,
            count_paths: false,
            slab_override: 0,
            serial_filter: false,
            standard_map: crate::fbp::kernels::DEFAULT_STANDARD_MAP,
            ext: Default::default(),
            stack_tex: None,
            packed: (0, 0, 0),
            sweep_buf: None,
            sweep_key: None,
            tensor_buf: [None, None],
            tensor_next: 0,
            tensor_key: None,
        })
    }

    /// Releases every cached buffer (after an out-of-memory error).
    pub fn free_buffers(&mut self) {
        self.textures.clear();
        self.arrays.clear();
        self.tex_key = None;
        self.raw = Default::default();
        self.out = Default::default();
        self.fft_a = None;
        self.fft_b = None;
        self.tex = None;
        self.plans.clear();
        self.pin_in = Default::default();
        self.pin_out = Default::default();
        self.stack_tex = None;
        self.sweep_buf = None;
        self.tensor_buf = [None, None];
    }
}
