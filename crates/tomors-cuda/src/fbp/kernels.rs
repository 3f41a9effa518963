//! Kernel sources, configurations and the per-projection constants.

use tomors_core::{ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
pub use crate::fbp::sweep::{sweep_defines, SweepParams, SWEEP_CU};
pub use crate::fbp::tensor::{tensor_defines, TensorParams, TENSOR_CU};

/// Source of the back-projection kernels (`bp_standard`, `bp_texopt`,
/// `bp_alu`, and `bp_alu_w2` appended from its own file).
pub const BACKPROJECT_CU: &str = concat!(
    include_str!("../../kernels/backproject.cu"),
    include_str!("../../kernels/backproject_wide.cu")
);
/// Source of the filtering and texture-packing kernels.
pub const FILTER_CU: &str = include_str!("../../kernels/filter.cu");

/// Projections whose constants fit in constant memory (3 floats each, under 64 KiB).
pub const MAX_CMEM_PROJECTIONS: usize = 5120;

/// Thread-to-pixel mapping of the back projector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// One thread per pixel, 16×16 blocks, every thread loops over all
    /// projections (the baseline). Threads are ordered in 4×4 Z-order squares
    /// and each thread keeps 16 independent partial sums so that 16 fetches
    /// are in flight (see `docs/perf-notes.md`).
    Standard,
    /// 4×4 Z-order squares, 4 projections in parallel per block, 4 pixels
    /// per thread, shuffle reduction (the seeds' Algorithm 1).
    TexOpt,
    /// Shared-memory cache of the bins a tile needs, interpolation in the
    /// ALUs in f32 (the seeds' Algorithm 2), with the given parameters.
    Alu(AluParams),
    /// Line sweep: the lanes of a warp are 32 slice slots of the same
    /// pixels, accumulators in registers, an entry loaded only when a
    /// pixel's bin changes along its line (exact f32 linear interpolation;
    /// see [`crate::fbp::sweep`]). Its own entry layout, not textures.
    Sweep(SweepParams),
    /// Tensor cores: hat-function weights × values as `mma.m16n8k16` per
    /// 4×4 pixel block, 8 slices and 2 projections, both operands split in
    /// two f16 parts (f32-class results; see [`crate::fbp::tensor`]). Its
    /// own entry layout, not textures.
    Tensor(TensorParams),
}

/// Parameters of the `alu` kernel (the autotuner's search space).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AluParams {
    /// Tile side in pixels per block of 256 threads: 32 (4 pixels per
    /// thread) or 64 (16 pixels per thread).
    pub tile: u8,
    /// Projections cached per step: 8 or 16.
    pub step: u8,
    /// Advanced caching (linear only): value and difference per bin, one
    /// shared load per update.
    pub advanced: bool,
    /// Rounding with float arithmetic (the 1.5·2²³ trick) instead of
    /// conversion instructions.
    pub float_round: bool,
    /// Minimum resident blocks per multiprocessor (`__launch_bounds__`).
    pub min_blocks: u8,
    /// Oversampling: 4 samples per bin (offsets 0, ¼, ½, ¾, linearly
    /// interpolated by the texture unit) cached, nearest lookup at
    /// reconstruction time: an approximation of linear interpolation at the
    /// cost of nearest (f32 and float2 texels, linear requests only).
    pub oversample: bool,
    /// Hybrid: of every 8 blocks on a multiprocessor, this many interpolate
    /// through the texture unit instead of the cache (0: pure `alu`), so
    /// the texture unit and the shared memory work at the same time.
    pub hybrid: u8,
    /// Fill the cache with plain loads from the packed texels instead of
    /// texture fetches (not with oversampling).
    pub loads: bool,
    /// Hybrid split by tile (tile index modulo 8 below `hybrid` takes the
    /// texture path, the same in every slice group) instead of by each
    /// block's rank on its multiprocessor.
    pub by_block: bool,
    /// Hybrid texture path with exact linear interpolation: both texels
    /// fetched at their centres and weighted in f32 (as the cache path),
    /// instead of the texture unit's 8-bit weights.
    pub hybrid_exact: bool,
    /// Half4 texels, linear interpolation with advanced caching: 1: `a +
    /// f·d` in half2 arithmetic (two slices per instruction), accumulation
    /// in f32; 2: as 1, with two projections' values summed in half2 before
    /// the f32 accumulation; 0: off. Not exact (one or two more half
    /// roundings per sample).
    pub half_math: u8,
    /// Half4 texels only: one block reconstructs 8 slices (two texture
    /// groups), so each position, weight and cache address serves 8 slices
    /// (`bp_alu_w2`; tile 32, advanced caching for linear; no hybrid,
    /// oversampling or plain loads).
    pub wide: bool,
}

impl Default for AluParams {
    fn default() -> Self {
        Self {
            tile: 32,
            step: 16,
            advanced: true,
            float_round: true,
            min_blocks: 2,
            oversample: false,
            hybrid: 0,
            loads: false,
            by_block: false,
            hybrid_exact: false,
            half_math: 0,
            wide: false,
        }
    }
}

impl AluParams {
    /// The configuration `Auto` uses without a tuning cache: 64×64 tiles,
    /// 16 projections per step, advanced caching, float rounding, 2 blocks
    /// per multiprocessor — the tuner's choice for linear interpolation on
    /// an H100 (`docs/perf-notes.md`), within 3 % of its choice for every
    /// other case measured there.
    pub fn untuned() -> Self {
        Self {
            tile: 64,
            ..Self::default()
        }
    }

    /// Checks the values the kernel supports.
    pub fn validate(&self) -> Result<()> {
        if !matches!(self.tile, 32 | 64) {
            return Err(CudaError::Parameter(format!(
                "alu tile {} (use 32 or 64)",
                self.tile
            )));
        }
        if !matches!(self.step, 8 | 16) {
            return Err(CudaError::Parameter(format!(
                "alu step {} (use 8 or 16 projections)",
                self.step
            )));
        }
        if self.loads && self.oversample {
            return Err(CudaError::Parameter(
                "alu: oversampling needs texture fetches (not plain loads)".into(),
            ));
        }
        if self.hybrid > 7 || (self.hybrid > 0 && self.oversample) {
            return Err(CudaError::Parameter(format!(
                "hybrid {} (use 0 to 7 of 8 blocks, not with oversampling)",
                self.hybrid
            )));
        }
        if self.wide
            && (self.tile != 32
                || !self.advanced
                || self.hybrid > 0
                || self.oversample
                || self.loads)
        {
            return Err(CudaError::Parameter(
                "alu wide (w1): tile 32 with advanced caching, no hybrid, oversampling or \
                 plain loads"
                    .into(),
            ));
        }
        if (self.by_block || self.hybrid_exact) && self.hybrid == 0 {
            return Err(CudaError::Parameter(
                "alu: g1 and x1 choose how hybrid blocks split and interpolate; give a \
                 hybrid ratio h1 to h7 with them"
                    .into(),
            ));
        }
        if self.half_math > 2 {
            return Err(CudaError::Parameter(format!(
                "alu half math {} (use 0, 1 or 2)",
                self.half_math
            )));
        }
        if !(1..=8).contains(&self.min_blocks) {
            return Err(CudaError::Parameter(format!(
                "alu min_blocks {} (use 1 to 8)",
                self.min_blocks
            )));
        }
        Ok(())
    }

    /// Compact text form, e.g. `t32,s16,a1,r1,b2` (`,o1` with
    /// oversampling; parsed back by [`AluParams::parse`]).
    pub fn spec(&self) -> String {
        let mut s = format!(
            "t{},s{},a{},r{},b{}",
            self.tile,
            self.step,
            u8::from(self.advanced),
            u8::from(self.float_round),
            self.min_blocks
        );
        if self.oversample {
            s.push_str(",o1");
        }
        if self.hybrid > 0 {
            s.push_str(&format!(",h{}", self.hybrid));
        }
        if self.loads {
            s.push_str(",l1");
        }
        if self.by_block {
            s.push_str(",g1");
        }
        if self.hybrid_exact {
            s.push_str(",x1");
        }
        if self.half_math > 0 {
            s.push_str(&format!(",m{}", self.half_math));
        }
        if self.wide {
            s.push_str(",w1");
        }
        s
    }

    /// Samples cached per bin: 4 with oversampling, else 1.
    pub fn samples_per_bin(&self) -> usize {
        if self.oversample {
            4
        } else {
            1
        }
    }

    /// Parses [`AluParams::spec`]'s form; keys may be given in any order
    /// and missing ones keep their defaults.
    pub fn parse(s: &str) -> Result<Self> {
        let mut p = Self::default();
        for part in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = part.split_at(1);
            let num: u8 = v.parse().map_err(|_| {
                CudaError::Parameter(format!("alu parameter '{part}' (e.g. t32,s16,a1,r1,b2)"))
            })?;
            match k {
                "t" => p.tile = num,
                "s" => p.step = num,
                "a" => p.advanced = num != 0,
                "r" => p.float_round = num != 0,
                "b" => p.min_blocks = num,
                "o" => p.oversample = num != 0,
                "h" => p.hybrid = num,
                "l" => p.loads = num != 0,
                "g" => p.by_block = num != 0,
                "x" => p.hybrid_exact = num != 0,
                "m" => p.half_math = num,
                "w" => p.wide = num != 0,
                _ => {
                    return Err(CudaError::Parameter(format!(
                        "alu parameter '{part}' (keys t, s, a, r, b, o, h, l, g, x, m, w)"
                    )))
                }
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Cached bins per projection for `geom` on `grid`: the largest span of
    /// a tile's bins over the projections, plus 4 (floor, the margin bin,
    /// the linear neighbour, rounding).
    pub fn cache_width(&self, geom: &ParallelGeometry, grid: &SliceGrid) -> usize {
        let c = projection_coefficients_f64(geom, grid);
        let n = geom.n_angles();
        let span = (0..n)
            .map(|p| (self.tile as f64 - 1.0) * (c[n + p].abs() + c[2 * n + p].abs()))
            .fold(0.0f64, f64::max);
        span.ceil() as usize + 4
    }
}

impl KernelKind {
    /// Name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::TexOpt => "tex-opt",
            Self::Alu(p) if p.hybrid > 0 => "hybrid",
            Self::Alu(_) => "alu",
            Self::Sweep(_) => "sweep",
            Self::Tensor(_) => "tensor",
        }
    }

    /// The `extern "C"` kernel name.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Standard => "bp_standard",
            Self::TexOpt => "bp_texopt",
            Self::Alu(p) if p.wide => "bp_alu_w2",
            Self::Alu(_) => "bp_alu",
            Self::Sweep(_) => "bp_sweep",
            Self::Tensor(_) => "bp_tensor",
        }
    }
}

/// How many slices one texel carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceMode {
    /// One `float` per texel: one slice per pass.
    F32,
    /// `float2` texels: two slices per pass at the full 8-byte texture rate.
    Float2,
    /// Four `half`s per texel, nearest interpolation only: four slices per
    /// pass, values converted to `float` right after the fetch.
    Half4,
}

impl SliceMode {
    /// Slices per texel.
    pub fn slices(self) -> usize {
        match self {
            Self::F32 => 1,
            Self::Float2 => 2,
            Self::Half4 => 4,
        }
    }

    /// Bytes per texel.
    pub fn texel_bytes(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::Float2 | Self::Half4 => 8,
        }
    }

    /// Name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::Float2 => "float2",
            Self::Half4 => "half4",
        }
    }
}

/// A back-projection kernel configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BpConfig {
    /// Thread mapping.
    pub kernel: KernelKind,
    /// Slices per texel.
    pub mode: SliceMode,
}

impl BpConfig {
    /// Every configuration, for benchmarks and tests.
    pub const ALL: [BpConfig; 6] = [
        BpConfig {
            kernel: KernelKind::Standard,
            mode: SliceMode::F32,
        },
        BpConfig {
            kernel: KernelKind::Standard,
            mode: SliceMode::Float2,
        },
        BpConfig {
            kernel: KernelKind::Standard,
            mode: SliceMode::Half4,
        },
        BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::F32,
        },
        BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::Float2,
        },
        BpConfig {
            kernel: KernelKind::TexOpt,
            mode: SliceMode::Half4,
        },
    ];

    /// Whether this configuration can use `interp` (the texture kernels'
    /// half mode is nearest only; `alu` interpolates half values itself;
    /// oversampling approximates linear interpolation, through a linearly
    /// filtered f32 or float2 texture).
    pub fn supports(&self, interp: tomors_core::Interpolation) -> bool {
        match self.kernel {
            KernelKind::Sweep(_) | KernelKind::Tensor(_) => {
                self.mode == SliceMode::F32 && interp == tomors_core::Interpolation::Linear
            }
            KernelKind::Alu(p) if p.wide => self.mode == SliceMode::Half4,
            KernelKind::Alu(p) if p.oversample => {
                self.mode != SliceMode::Half4 && interp == tomors_core::Interpolation::Linear
            }
            KernelKind::Alu(p) if p.hybrid > 0 => {
                self.mode != SliceMode::Half4
                    || interp == tomors_core::Interpolation::Nearest
                    || p.hybrid_exact
            }
            KernelKind::Alu(_) => true,
            _ => self.mode != SliceMode::Half4 || interp == tomors_core::Interpolation::Nearest,
        }
    }

    /// The fastest linear mode within a stated error (`--kernel fast`,
    /// `alu-half4@t32,s16,a1,r1,b3,m2,w1`): the half cache, 8 slices per
    /// block, half arithmetic for the interpolation and for pairs of
    /// projections, f32 accumulation. FBP of 2048² from 2048 angles within
    /// 4.7·10⁻⁴ relative L2 of the exact result, 6× closer than the texture
    /// unit's 8-bit interpolation; 6590 GU/s against 3622 exact on an H200
    /// (`docs/perf-notes.md`). Not `Auto`'s choice, which stays exact.
    pub fn fast() -> Self {
        Self {
            kernel: KernelKind::Alu(AluParams {
                min_blocks: 3,
                half_math: 2,
                wide: true,
                ..AluParams::default()
            }),
            mode: SliceMode::Half4,
        }
    }

    /// Slices one block of this configuration reconstructs: the texel's,
    /// twice that for the wide `alu` kernel.
    pub fn slices_per_block(&self) -> usize {
        match self.kernel {
            KernelKind::Alu(p) if p.wide => 2 * self.mode.slices(),
            KernelKind::Sweep(p) => p.slices_per_block(),
            KernelKind::Tensor(p) => p.slices_per_block(),
            _ => self.mode.slices(),
        }
    }

    /// The `alu` configurations with default parameters (f32, float2, half4).
    pub fn alu(mode: SliceMode) -> Self {
        Self {
            kernel: KernelKind::Alu(AluParams::default()),
            mode,
        }
    }

    /// Checks [`BpConfig::supports`] with a clear error.
    pub fn check(&self, interp: tomors_core::Interpolation) -> Result<()> {
        if self.supports(interp) {
            Ok(())
        } else {
            Err(CudaError::Parameter(format!(
                "kernel {self} does not support {interp} interpolation (half texels: nearest \
                 only; oversampling: linear with f32 or float2 texels; wide: half4 texels; \
                 sweep and tensor: linear only)"
            )))
        }
    }
}

impl std::fmt::Display for BpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            SliceMode::F32 => f.write_str(self.kernel.name())?,
            m => write!(f, "{}-{}", self.kernel.name(), m.name())?,
        }
        match self.kernel {
            KernelKind::Alu(p) if p != AluParams::default() => write!(f, "@{}", p.spec()),
            KernelKind::Sweep(p) if p != SweepParams::default() => write!(f, "@{}", p.spec()),
            KernelKind::Tensor(p) if p != TensorParams::default() => write!(f, "@{}", p.spec()),
            _ => Ok(()),
        }
    }
}

/// Which kernel a backend uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KernelChoice {
    /// The fastest exact configuration: the tuning cache's choice for the
    /// device when `tomors tune` has run there (see [`crate::tuning`]), else
    /// the untuned default [`AluParams::untuned`] with `float2` texels when
    /// a slab has 2 or more slices (f32 texels otherwise).
    #[default]
    Auto,
    /// A fixed configuration.
    Fixed(BpConfig),
}

impl KernelChoice {
    /// The configuration used for a slab of `slices` slices.
    pub fn resolve(self, slices: usize) -> BpConfig {
        match self {
            Self::Fixed(c) => c,
            Self::Auto => BpConfig {
                kernel: KernelKind::Alu(AluParams::untuned()),
                mode: if slices >= 2 {
                    SliceMode::Float2
                } else {
                    SliceMode::F32
                },
            },
        }
    }
}

impl std::str::FromStr for KernelChoice {
    type Err = CudaError;
    /// Accepts `auto`, `fast` ([`BpConfig::fast`]), `standard`, `tex-opt`, `float2` (= `tex-opt-float2`),
    /// `half4` (= `tex-opt-half4`), `standard-float2`, `standard-half4`,
    /// `tex-opt-float2`, `tex-opt-half4`, and `alu`, `alu-float2`,
    /// `alu-half4` (and `hybrid`, `hybrid-float2`, `hybrid-half4`: 4 of 8
    /// blocks through the texture unit unless `h` says otherwise),
    /// optionally with parameters after `@` (e.g.
    /// `alu-float2@t64,s8,a1,r1,b1`, see [`AluParams::parse`]), and `sweep`
    /// (the line sweep, [`SweepParams::tuned`]; parameters after `@` as in
    /// [`SweepParams::parse`], missing keys from [`SweepParams::default`]),
    /// and `tensor` (the tensor-core kernel, [`TensorParams::tuned`];
    /// parameters after `@` as in [`TensorParams::parse`]).
    fn from_str(s: &str) -> Result<Self> {
        let k = s.to_ascii_lowercase().replace('_', "-");
        let (k, params) = match k.split_once('@') {
            Some((a, b)) => (a.to_string(), Some(b.to_string())),
            None => (k, None),
        };
        let (base, hybrid) = match k.strip_prefix("hybrid") {
            Some(rest) => (format!("alu{rest}"), true),
            None => (k.clone(), false),
        };
        if let Some(mode) = match base.as_str() {
            "alu" => Some(SliceMode::F32),
            "alu-float2" => Some(SliceMode::Float2),
            "alu-half4" | "alu-half" => Some(SliceMode::Half4),
            _ => None,
        } {
            let mut p = match &params {
                Some(spec) => AluParams::parse(spec)?,
                None => AluParams::default(),
            };
            if hybrid && p.hybrid == 0 {
                p.hybrid = 4;
                p.validate()?;
            }
            if !hybrid && p.hybrid > 0 {
                return Err(CudaError::Parameter(format!(
                    "kernel '{s}': a hybrid ratio needs the name hybrid"
                )));
            }
            return Ok(Self::Fixed(BpConfig {
                kernel: KernelKind::Alu(p),
                mode,
            }));
        }
        if base == "sweep" {
            let p = match &params {
                Some(spec) => SweepParams::parse(spec)?,
                None => SweepParams::tuned(),
            };
            return Ok(Self::Fixed(BpConfig {
                kernel: KernelKind::Sweep(p),
                mode: SliceMode::F32,
            }));
        }
        if base == "tensor" {
            let p = match &params {
                Some(spec) => TensorParams::parse(spec)?,
                None => TensorParams::tuned(),
            };
            return Ok(Self::Fixed(BpConfig {
                kernel: KernelKind::Tensor(p),
                mode: SliceMode::F32,
            }));
        }
        if params.is_some() {
            return Err(CudaError::Parameter(format!(
                "kernel '{s}': only the alu, sweep and tensor kernels take parameters after @"
            )));
        }
        let (kernel, mode) = match k.as_str() {
            "auto" => return Ok(Self::Auto),
            "fast" => return Ok(Self::Fixed(BpConfig::fast())),
            "standard" => (KernelKind::Standard, SliceMode::F32),
            "tex-opt" | "texopt" => (KernelKind::TexOpt, SliceMode::F32),
            "float2" | "tex-opt-float2" | "texopt-float2" => {
                (KernelKind::TexOpt, SliceMode::Float2)
            }
            "half4" | "half" | "tex-opt-half4" | "texopt-half4" => {
                (KernelKind::TexOpt, SliceMode::Half4)
            }
            "standard-float2" => (KernelKind::Standard, SliceMode::Float2),
            "standard-half4" | "standard-half" => (KernelKind::Standard, SliceMode::Half4),
            _ => {
                return Err(CudaError::Parameter(format!(
                    "unknown CUDA kernel '{s}' (use auto, fast, standard, tex-opt, float2, half4, \
                     standard-float2, standard-half4, alu, alu-float2, alu-half4, hybrid, \
                     hybrid-float2, hybrid-half4, sweep)"
                )))
            }
        };
        Ok(Self::Fixed(BpConfig { kernel, mode }))
    }
}

/// Per-projection texture-coordinate coefficients: for projection `p` the
/// texture x coordinate of pixel `(ix, iy)` is
/// `fma(iy, cy[p], fma(ix, cx[p], c0[p]))` = `u + 0.5` (computed in f64,
/// rounded once to f32). Returned as `[c0..., cx..., cy...]`.
pub fn projection_coefficients(geom: &ParallelGeometry, grid: &SliceGrid) -> Vec<f32> {
    let n = geom.n_angles();
    let mut v = projection_coefficients_f64(geom, grid);
    // Texture coordinate = bin coordinate + 0.5 (texel k spans [k, k + 1)).
    v[..n].iter_mut().for_each(|c| *c += 0.5);
    v.into_iter().map(|c| c as f32).collect()
}

/// Per-projection detector coordinates in f64 for the `alu` kernel: the
/// bin coordinate (bin `k` centred at `k`) of pixel `(ix, iy)` is
/// `c0[p] + ix·cx[p] + iy·cy[p]`. Returned as `[c0..., cx..., cy...]`.
pub fn projection_coefficients_f64(geom: &ParallelGeometry, grid: &SliceGrid) -> Vec<f64> {
    let n = geom.n_angles();
    let mut v = vec![0f64; 3 * n];
    let bw = geom.bin_width() as f64;
    let ps = grid.pixel_size as f64;
    let hx = (grid.nx as f64 - 1.0) * 0.5;
    let hy = (grid.ny as f64 - 1.0) * 0.5;
    for (p, &a) in geom.angles().iter().enumerate() {
        let (s, c) = (a as f64).sin_cos();
        let cx = ps * c / bw;
        let cy = -ps * s / bw;
        v[p] = geom.center(p) as f64 - hx * cx - hy * cy;
        v[n + p] = cx;
        v[2 * n + p] = cy;
    }
    v
}

/// The extra `#define`s of an `alu` module: tile, step, cache width,
/// interpolation and the caching and rounding variants.
/// With oversampling the lookup is nearest (`LIN` 0) in `OVS` = 4 samples
/// per bin.
pub fn alu_defines(
    p: AluParams,
    linear: bool,
    cache_width: usize,
    n_bins: usize,
) -> Vec<(String, String)> {
    let linear = linear && !p.oversample;
    vec![
        ("NS".into(), p.tile.to_string()),
        ("SD".into(), p.step.to_string()),
        ("CW".into(), cache_width.to_string()),
        ("LIN".into(), u8::from(linear).to_string()),
        ("ADV".into(), u8::from(p.advanced && linear).to_string()),
        ("FROUND".into(), u8::from(p.float_round).to_string()),
        ("OVS".into(), p.samples_per_bin().to_string()),
        ("HYB".into(), p.hybrid.to_string()),
        ("LOADS".into(), u8::from(p.loads).to_string()),
        ("HYBG".into(), u8::from(p.by_block).to_string()),
        ("HYBX".into(), u8::from(p.hybrid_exact).to_string()),
        ("WIDE".into(), u8::from(p.wide).to_string()),
        (
            "HMATH".into(),
            if linear && p.advanced { p.half_math } else { 0 }.to_string(),
        ),
        ("NB".into(), n_bins.to_string()),
    ]
}

/// `#define`s of a back-projection module.
pub fn bp_defines(
    cfg: BpConfig,
    grid: &SliceGrid,
    n_angles: usize,
    min_blocks: u32,
) -> Vec<(String, String)> {
    bp_defines_mapped(cfg, grid, n_angles, min_blocks, DEFAULT_STANDARD_MAP)
}

/// Variant of the `standard` kernel: `order + 16 · ilp`, where `order` is the
/// thread order inside its 16×16 block (0 row-major, 1 2×2 quads, 2 4×4
/// Z-order squares) and `ilp` the number of independent partial sums
/// (fetches issued together; 1 = one accumulator). See `kernels/backproject.cu`.
pub const DEFAULT_STANDARD_MAP: u32 = 2 + 16 * 16;

/// `#define`s of a back-projection module with an explicit `standard` thread order.
pub fn bp_defines_mapped(
    cfg: BpConfig,
    grid: &SliceGrid,
    n_angles: usize,
    min_blocks: u32,
    standard_map: u32,
) -> Vec<(String, String)> {
    vec![
        ("SMAP".into(), (standard_map % 16).to_string()),
        ("STD_ILP".into(), (standard_map / 16).max(1).to_string()),
        ("NX".into(), grid.nx.to_string()),
        ("NY".into(), grid.ny.to_string()),
        ("NPROJ".into(), n_angles.to_string()),
        ("SPT".into(), cfg.mode.slices().to_string()),
        (
            "CMEM".into(),
            u8::from(n_angles <= MAX_CMEM_PROJECTIONS).to_string(),
        ),
        ("MINB".into(), min_blocks.to_string()),
    ]
}
