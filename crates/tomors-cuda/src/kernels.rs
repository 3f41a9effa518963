//! Kernel sources, configurations and the per-projection constants.

use tomors_core::{ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};

/// Source of the back-projection kernels (`bp_standard`, `bp_texopt`).
pub const BACKPROJECT_CU: &str = include_str!("../kernels/backproject.cu");
/// Source of the filtering and texture-packing kernels.
pub const FILTER_CU: &str = include_str!("../kernels/filter.cu");

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
}

impl KernelKind {
    /// Name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::TexOpt => "tex-opt",
        }
    }

    /// The `extern "C"` kernel name.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Standard => "bp_standard",
            Self::TexOpt => "bp_texopt",
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

    /// Whether this configuration can use `interp` (half mode is nearest only).
    pub fn supports(&self, interp: tomors_core::Interpolation) -> bool {
        self.mode != SliceMode::Half4 || interp == tomors_core::Interpolation::Nearest
    }

    /// Checks [`BpConfig::supports`] with a clear error.
    pub fn check(&self, interp: tomors_core::Interpolation) -> Result<()> {
        if self.supports(interp) {
            Ok(())
        } else {
            Err(CudaError::Parameter(format!(
                "kernel {self} supports nearest interpolation only (asked for {interp})"
            )))
        }
    }
}

impl std::fmt::Display for BpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.mode {
            SliceMode::F32 => f.write_str(self.kernel.name()),
            m => write!(f, "{}-{}", self.kernel.name(), m.name()),
        }
    }
}

/// Which kernel a backend uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum KernelChoice {
    /// The fastest exact configuration (`tex-opt` with `float2` texels when a
    /// slab has 2 or more slices, else `tex-opt`).
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
                kernel: KernelKind::TexOpt,
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
    /// Accepts `auto`, `standard`, `tex-opt`, `float2` (= `tex-opt-float2`),
    /// `half4` (= `tex-opt-half4`), and `standard-float2`, `standard-half4`,
    /// `tex-opt-float2`, `tex-opt-half4`.
    fn from_str(s: &str) -> Result<Self> {
        let k = s.to_ascii_lowercase().replace('_', "-");
        let (kernel, mode) = match k.as_str() {
            "auto" => return Ok(Self::Auto),
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
                    "unknown CUDA kernel '{s}' (use auto, standard, tex-opt, float2, half4, \
                     standard-float2, standard-half4)"
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
    let mut v = vec![0f32; 3 * n];
    let bw = geom.bin_width() as f64;
    let ps = grid.pixel_size as f64;
    let hx = (grid.nx as f64 - 1.0) * 0.5;
    let hy = (grid.ny as f64 - 1.0) * 0.5;
    for (p, &a) in geom.angles().iter().enumerate() {
        let (s, c) = (a as f64).sin_cos();
        let cx = ps * c / bw;
        let cy = -ps * s / bw;
        let c0 = geom.center(p) as f64 + 0.5 - hx * cx - hy * cy;
        v[p] = c0 as f32;
        v[n + p] = cx as f32;
        v[2 * n + p] = cy as f32;
    }
    v
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
