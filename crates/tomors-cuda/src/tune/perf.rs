//! A performance model of the back-projection kernels (the seeds' model,
//! document 001, "Modeling"): count the operations one update (pixel ×
//! projection × slice) needs on each unit — texture fetches, shared-memory
//! bytes, FP32 instructions (an FMA is one), conversion/rounding
//! instructions and issued instructions — divide each by the unit's rate, and
//! take the slowest unit as the kernel's time. A rough estimate (the seeds
//! report ±10 % on the counts, more on the times): it ranks configurations
//! and says which unit bounds each, and `tune` uses it to skip candidates
//! predicted far slower than the best of their family.
//!
//! Counts per update for the `alu` kernel with a tile of T×T pixels, 256
//! threads (q = T²/256 pixels per thread) and s slices per pass:
//!
//! - per block and projection (÷ T²·s): the bin offset (4 B shared, 4 FP,
//!   1 conversion) and the cache fill: 1.5·T bins fetched (×4 with
//!   oversampling), each stored to shared memory (value, plus difference with
//!   advanced caching) with 3 FP (4 advanced) and 1 conversion;
//! - per thread and projection (÷ q·s): offsets from shared memory (2 B),
//!   2.5 conversions (loop and position);
//! - per pixel and projection (÷ s): position and weight, 2 FP + 1 integer
//!   (1 + 1 nearest), 2 conversions (1 nearest);
//! - per update: the cached value(s) from shared memory and 2 FP (3 without
//!   advanced caching, 1 nearest); one more conversion per half value.
//!
//! With float rounding every 3 conversions become 5 FP instructions. The
//! texture kernels need one fetch per pixel and projection (carrying s
//! slices), 2 FMA per pixel and projection and 1 add per update. A hybrid
//! kernel with h of 8 blocks on the texture path counts h/8 of a texture
//! kernel plus (8 − h)/8 of an `alu` one: the units work at once, so its
//! ceiling is about the sum of the two rates.

use tomors_core::Interpolation;

use crate::fbp::kernels::{AluParams, BpConfig, KernelKind, SliceMode};

/// Rates of the device's units, per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeviceRates {
    /// Texture fetches (filtered texels) per second.
    pub tex: f64,
    /// Shared-memory bandwidth, bytes per second.
    pub smem: f64,
    /// FP32 instructions per second (an FMA counts once).
    pub fp: f64,
    /// Conversion and rounding instructions (F2I, I2F, F2F) per second.
    pub conv: f64,
    /// Instructions issued per second (all kinds, thread instructions).
    pub issue: f64,
}

/// Multiprocessors of the H100/H200 SXM parts the defaults were taken on.
pub const DEFAULT_SM_COUNT: i32 = 132;

impl DeviceRates {
    /// The defaults, for an H100/H200 SXM (132 multiprocessors at 1.98 GHz):
    /// the texture rate measured in `docs/perf-notes.md` (≈1030 Gfetch/s,
    /// `tex-opt` f32 at its ceiling) and the per-multiprocessor throughputs of
    /// compute capability 9.0 (CUDA Programming Guide, "Arithmetic
    /// Instructions"; shared memory 32 banks × 4 B per clock): 128 FP32, 16
    /// conversions, 128 issued thread instructions and 128 shared bytes per
    /// clock.
    pub fn hopper() -> Self {
        let clocks = DEFAULT_SM_COUNT as f64 * 1.98e9;
        Self {
            tex: 1.03e12,
            smem: 128.0 * clocks,
            fp: 128.0 * clocks,
            conv: 16.0 * clocks,
            issue: 128.0 * clocks,
        }
    }

    /// These rates scaled to a device with `sm_count` multiprocessors (same
    /// clock and per-multiprocessor throughput).
    pub fn scaled(self, sm_count: i32) -> Self {
        let f = sm_count.max(1) as f64 / DEFAULT_SM_COUNT as f64;
        Self {
            tex: self.tex * f,
            smem: self.smem * f,
            fp: self.fp * f,
            conv: self.conv * f,
            issue: self.issue * f,
        }
    }
}

/// Operations per update on each unit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpCounts {
    /// Texture fetches.
    pub tex: f64,
    /// Shared-memory bytes (loads and stores).
    pub smem: f64,
    /// Shared-memory instructions (loads and stores).
    pub smem_inst: f64,
    /// FP32 instructions.
    pub fp: f64,
    /// Integer instructions (index arithmetic; issue only).
    pub int: f64,
    /// Conversion/rounding instructions.
    pub conv: f64,
}

impl OpCounts {
    fn scaled(self, f: f64) -> Self {
        Self {
            tex: self.tex * f,
            smem: self.smem * f,
            smem_inst: self.smem_inst * f,
            fp: self.fp * f,
            int: self.int * f,
            conv: self.conv * f,
        }
    }

    fn plus(self, o: Self) -> Self {
        Self {
            tex: self.tex + o.tex,
            smem: self.smem + o.smem,
            smem_inst: self.smem_inst + o.smem_inst,
            fp: self.fp + o.fp,
            int: self.int + o.int,
            conv: self.conv + o.conv,
        }
    }

    /// Instructions issued per update.
    pub fn instructions(&self) -> f64 {
        self.tex + self.smem_inst + self.fp + self.int + self.conv
    }
}

/// The unit that bounds a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Texture fetches.
    Texture,
    /// Shared-memory bandwidth.
    SharedMemory,
    /// FP32 instructions.
    Fp32,
    /// Conversion/rounding instructions.
    Conversion,
    /// Instruction issue.
    Issue,
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unit::Texture => "texture",
            Unit::SharedMemory => "shared-mem",
            Unit::Fp32 => "fp32",
            Unit::Conversion => "conversion",
            Unit::Issue => "issue",
        })
    }
}

/// A predicted time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// Seconds for the work asked.
    pub seconds: f64,
    /// Giga-updates per second.
    pub gups: f64,
    /// The slowest unit.
    pub limit: Unit,
    /// Seconds per unit: texture, shared memory, FP32, conversion, issue.
    pub per_unit: [(Unit, f64); 5],
}

/// Operations per update of a texture kernel (`standard`, `tex-opt`) with
/// `s` slices per fetch.
fn texture_counts(mode: SliceMode) -> OpCounts {
    let s = mode.slices() as f64;
    OpCounts {
        tex: 1.0 / s,
        fp: 2.0 / s + 1.0,
        int: 1.0 / s,
        conv: if mode == SliceMode::Half4 { 1.0 } else { 0.0 },
        ..OpCounts::default()
    }
}

/// Operations per update of the `alu` kernel (no hybrid part).
fn alu_counts(p: AluParams, mode: SliceMode, interp: Interpolation) -> OpCounts {
    // wide: two texel groups per block, so the per-pixel work serves 2·s slices.
    let s = mode.slices() as f64 * if p.wide { 2.0 } else { 1.0 };
    let t = p.tile as f64;
    let q = t * t / 256.0;
    let linear = interp == Interpolation::Linear && !p.oversample;
    let advanced = p.advanced && linear;
    // Bytes of one cached value for all s slices.
    let value_bytes = mode.texel_bytes() as f64 * if p.wide { 2.0 } else { 1.0 };
    let entry_bytes = if advanced {
        2.0 * value_bytes
    } else {
        value_bytes
    };
    let samples = if p.oversample { 4.0 } else { 1.0 };
    let bins = 1.5 * t * samples;
    let block = OpCounts {
        tex: bins,
        smem: 4.0 + bins * entry_bytes,
        smem_inst: 1.0 + bins,
        fp: 4.0 + bins * if advanced { 4.0 } else { 3.0 },
        int: 2.0 + 2.0 * bins,
        conv: 1.0 + bins,
    };
    let thread = OpCounts {
        smem: 2.0,
        smem_inst: 0.5,
        conv: 2.5,
        int: 2.0,
        ..OpCounts::default()
    };
    let pixel = OpCounts {
        fp: if linear { 2.0 } else { 1.0 },
        int: 1.0,
        conv: if linear { 2.0 } else { 1.0 },
        ..OpCounts::default()
    };
    // Per update: the cached values (one entry, two without advanced
    // caching in linear mode) shared by the s slices of a pixel.
    let reads = if linear && !advanced { 2.0 } else { 1.0 };
    // Half arithmetic (half cache, advanced linear): one HFMA2 per 2
    // slices and the f32 add; with 2, a pair of projections shares one
    // conversion and one add (3 half2 operations per pair and 2 slices).
    let half_math = if advanced && mode == SliceMode::Half4 {
        p.half_math
    } else {
        0
    };
    let update = OpCounts {
        smem: reads * entry_bytes / s,
        smem_inst: reads / s,
        fp: match half_math {
            1 => 1.5,
            2 => 1.25,
            _ if advanced => 2.0,
            _ if linear => 3.0,
            _ => 1.0,
        },
        conv: match (mode, half_math) {
            (SliceMode::Half4, 2) => 0.5,
            (SliceMode::Half4, _) => 1.0,
            _ => 0.0,
        },
        ..OpCounts::default()
    };
    let mut c = block
        .scaled(1.0 / (t * t * s))
        .plus(thread.scaled(1.0 / (q * s)))
        .plus(pixel.scaled(1.0 / s))
        .plus(update);
    if p.loads {
        // The fill reads global memory (through L1) instead of the texture unit.
        c.tex = 0.0;
    }
    if p.float_round {
        // 3 rounding conversions become 5 FP instructions (the seeds' trick);
        // the half conversions stay.
        let half = if mode == SliceMode::Half4 { 1.0 } else { 0.0 };
        let rounding = (c.conv - half).max(0.0);
        c.fp += rounding * 5.0 / 3.0;
        c.conv = half;
    }
    c
}

/// Operations per update of `cfg` at `interp`.
pub fn op_counts(cfg: BpConfig, interp: Interpolation) -> OpCounts {
    match cfg.kernel {
        KernelKind::Standard | KernelKind::TexOpt => texture_counts(cfg.mode),
        KernelKind::Alu(p) if p.hybrid > 0 => {
            let h = (p.hybrid.min(8) as f64) / 8.0;
            let alu = alu_counts(AluParams { hybrid: 0, ..p }, cfg.mode, interp);
            let mut tex = texture_counts(cfg.mode);
            if p.hybrid_exact && interp == Interpolation::Linear {
                // Two texel-centre fetches and the interpolation in f32.
                tex.tex *= 2.0;
                tex.fp += 2.0;
                tex.int += 1.0 / cfg.mode.slices() as f64;
            }
            tex.scaled(h).plus(alu.scaled(1.0 - h))
        }
        KernelKind::Alu(p) => alu_counts(p, cfg.mode, interp),
        KernelKind::Sweep(p) => sweep_counts(p),
        KernelKind::Tensor(p) => tensor_counts(p),
    }
}

/// Operations per update of the tensor-core kernel (thread instructions:
/// a warp instruction over 32 lanes counts 32). Per 4×4 block, 8 slices and
/// projection pair (256 updates) a warp issues 3 MMAs, 2 shared loads of 8
/// bytes per lane and, with `flush` 1, 4 FADDs (per `pair_group` pairs;
/// 8 per G pairs with `flush` G ≥ 2);
/// per block and pair, shared by
/// its slice tiles, ≈ 46 FP instructions for the coordinates and weights
/// and 16 conversions for the f16 split; per tile the SASS adds ≈ 7
/// register moves (assembling the B operands) and 2 `NOP`s between the
/// dependent MMAs, counted as integer instructions (ncu: 32 warp
/// instructions per 256 updates in all). The MMAs are counted with the FP
/// instructions for issue; the tensor pipe and the MMA chains' latency (what
/// binds the kernel, `docs/perf-notes.md`) are not modelled.
fn tensor_counts(p: crate::fbp::kernels::TensorParams) -> OpCounts {
    let per = |warp: f64| warp * 32.0 / 256.0;
    let nt = p.nt as f64;
    // Lean weights (`w1`): no clamps and no conversions back (8 FP and 8
    // conversions fewer per block and pair), 8 masks (integer) instead.
    let (wfp, wconv, wint) = if p.weights == 1 {
        (38.0, 8.0, 10.0)
    } else {
        (46.0, 16.0, 2.0)
    };
    OpCounts {
        smem: per(2.0 * 8.0),
        smem_inst: per(2.0),
        fp: per(3.0
            + match p.flush {
                0 => 0.0,
                1 => 4.0 / p.pair_group.max(1) as f64,
                g => 8.0 / g as f64,
            }
            + wfp / nt),
        conv: per(wconv / nt),
        int: per(9.0 + wint / nt),
        ..OpCounts::default()
    }
}

/// Operations per update of the line-sweep kernel (unit pixels and bins,
/// angles uniform over a half turn): per pixel and projection the lane
/// computes the coordinate, rounding and weight (4 FP), compares the bin
/// with the previous pixel's (1 FP) and forms the entry address (2 integer,
/// predicated, so always issued), for its `spl` slices; per slice it
/// interpolates and accumulates (2 FP). An entry (8 bytes per slice, through
/// L1, counted with the shared-memory pipe that serves both) is loaded when
/// the bin changes: on average |step| + 1/line per pixel — 2/π + 1/tx along
/// x; about 0.373 + 1/tile with the axis choice.
fn sweep_counts(p: crate::fbp::kernels::SweepParams) -> OpCounts {
    let s = p.spl as f64;
    let changes = if p.axis {
        0.373 + 0.5 * (1.0 / p.tx as f64 + 1.0 / p.ty as f64)
    } else {
        std::f64::consts::FRAC_2_PI + 1.0 / p.tx as f64
    };
    let loads_per_entry = if p.spl == 4 { 2.0 } else { 1.0 };
    OpCounts {
        smem: 8.0 * changes,
        smem_inst: changes * loads_per_entry / s,
        fp: 2.0 + 5.0 / s,
        int: 2.0 / s,
        ..OpCounts::default()
    }
}

/// Predicted time of `updates` updates (pixels × projections × slices) of
/// `cfg` at `interp` on a device with `rates`: the slowest unit's time.
pub fn predict(
    cfg: BpConfig,
    interp: Interpolation,
    updates: f64,
    rates: &DeviceRates,
) -> Prediction {
    let c = op_counts(cfg, interp);
    let per_unit = [
        (Unit::Texture, c.tex * updates / rates.tex),
        (Unit::SharedMemory, c.smem * updates / rates.smem),
        (Unit::Fp32, c.fp * updates / rates.fp),
        (Unit::Conversion, c.conv * updates / rates.conv),
        (Unit::Issue, c.instructions() * updates / rates.issue),
    ];
    let (limit, seconds) = per_unit
        .iter()
        .copied()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("five units");
    Prediction {
        seconds,
        gups: updates / seconds / 1e9,
        limit,
        per_unit,
    }
}

/// Which of `jobs` to keep: those predicted at most `factor` times slower
/// than the best prediction among the jobs of the same `group` (e.g. the
/// same tuning family and interpolation), so that pruning never empties a
/// group. `factor` ≤ 0 or not finite keeps everything.
pub fn prune<G: PartialEq>(
    jobs: &[(BpConfig, Interpolation)],
    group: impl Fn(&BpConfig, Interpolation) -> G,
    rates: &DeviceRates,
    factor: f64,
) -> Vec<bool> {
    if !(factor.is_finite() && factor > 0.0) {
        return vec![true; jobs.len()];
    }
    let t: Vec<f64> = jobs
        .iter()
        .map(|&(c, i)| predict(c, i, 1.0, rates).seconds)
        .collect();
    let g: Vec<G> = jobs.iter().map(|(c, i)| group(c, *i)).collect();
    (0..jobs.len())
        .map(|k| {
            let best = (0..jobs.len())
                .filter(|&j| g[j] == g[k])
                .map(|j| t[j])
                .fold(f64::INFINITY, f64::min);
            t[k] <= factor * best
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tex(kernel: KernelKind, mode: SliceMode) -> BpConfig {
        BpConfig { kernel, mode }
    }

    fn alu(p: AluParams, mode: SliceMode) -> BpConfig {
        BpConfig {
            kernel: KernelKind::Alu(p),
            mode,
        }
    }

    const N32: f64 = 2048.0 * 2048.0 * 2048.0 * 32.0;

    #[test]
    fn texture_kernels_are_texture_bound_at_the_measured_floor() {
        let r = DeviceRates::hopper();
        // perf-notes: tex-opt f32 267 ms, float2 134 ms, half4 67 ms at 32 slices.
        for (mode, ms) in [
            (SliceMode::F32, 267.0),
            (SliceMode::Float2, 134.0),
            (SliceMode::Half4, 67.0),
        ] {
            let interp = if mode == SliceMode::Half4 {
                Interpolation::Nearest
            } else {
                Interpolation::Linear
            };
            let p = predict(tex(KernelKind::TexOpt, mode), interp, N32, &r);
            assert_eq!(p.limit, Unit::Texture, "{mode:?}");
            assert!((p.seconds * 1e3 - ms).abs() < 0.01 * ms, "{mode:?}: {p:?}");
            assert_eq!(p, predict(tex(KernelKind::Standard, mode), interp, N32, &r));
        }
    }

    #[test]
    fn alu_counts_follow_the_seeds_arithmetic() {
        // Tile 32, float2, advanced linear, conversions (no float rounding).
        let p = AluParams {
            float_round: false,
            ..AluParams::default()
        };
        let c = op_counts(alu(p, SliceMode::Float2), Interpolation::Linear);
        let (t, s, q) = (32.0, 2.0, 4.0);
        let bins = 1.5 * t;
        let block_smem = 4.0 + bins * 16.0;
        let want_smem = block_smem / (t * t * s) + 2.0 / (q * s) + 16.0 / s;
        assert!((c.smem - want_smem).abs() < 1e-12, "{c:?}");
        let want_fp = (4.0 + 4.0 * bins) / (t * t * s) + 2.0 / s + 2.0;
        assert!((c.fp - want_fp).abs() < 1e-12);
        let want_conv = (1.0 + bins) / (t * t * s) + 2.5 / (q * s) + 2.0 / s;
        assert!((c.conv - want_conv).abs() < 1e-12);
        assert!((c.tex - bins / (t * t * s)).abs() < 1e-12);
        // Float rounding moves every conversion to 5/3 FP.
        let f = op_counts(
            alu(AluParams::default(), SliceMode::Float2),
            Interpolation::Linear,
        );
        assert_eq!(f.conv, 0.0);
        assert!((f.fp - (c.fp + c.conv * 5.0 / 3.0)).abs() < 1e-12);
        // Without advanced caching: two reads of one value, one more FP.
        let plain = op_counts(
            alu(
                AluParams {
                    advanced: false,
                    ..p
                },
                SliceMode::Float2,
            ),
            Interpolation::Linear,
        );
        assert!((plain.fp - c.fp - (1.0 - bins / (t * t * s))).abs() < 1e-12);
        assert!(plain.smem_inst > c.smem_inst);
        // Nearest reads half the bytes per update of advanced linear.
        let near = op_counts(alu(p, SliceMode::Float2), Interpolation::Nearest);
        assert!(near.smem < c.smem && near.fp < c.fp && near.conv < c.conv);
    }

    #[test]
    fn prediction_is_the_slowest_unit_and_scales_linearly() {
        let r = DeviceRates::hopper();
        let cfg = alu(AluParams::default(), SliceMode::Float2);
        let a = predict(cfg, Interpolation::Linear, 1e11, &r);
        let b = predict(cfg, Interpolation::Linear, 2e11, &r);
        assert!((b.seconds / a.seconds - 2.0).abs() < 1e-12);
        let max = a.per_unit.iter().map(|u| u.1).fold(0.0, f64::max);
        assert_eq!(a.seconds, max);
        assert!((a.gups - 1e11 / a.seconds / 1e9).abs() < 1e-9);
        // Halving every rate doubles the time; half the SMs too.
        let half = r.scaled(DEFAULT_SM_COUNT / 2);
        let c = predict(cfg, Interpolation::Linear, 1e11, &half);
        assert!((c.seconds / a.seconds - 2.0).abs() < 1e-12);
        // The alu float2 linear kernel is predicted faster than the texture
        // float2 kernel, as measured (2942 vs 2053 GU/s on an H200), and the
        // shared memory or FP pipe bounds it, not the texture unit.
        let t = predict(
            tex(KernelKind::TexOpt, SliceMode::Float2),
            Interpolation::Linear,
            1e11,
            &r,
        );
        assert!(a.seconds < t.seconds);
        assert_ne!(a.limit, Unit::Texture);
    }

    #[test]
    fn hybrid_mixes_the_two_kernels() {
        let p = AluParams {
            tile: 64,
            hybrid: 4,
            ..AluParams::default()
        };
        let h = op_counts(alu(p, SliceMode::Float2), Interpolation::Linear);
        let a = op_counts(
            alu(AluParams { hybrid: 0, ..p }, SliceMode::Float2),
            Interpolation::Linear,
        );
        let t = texture_counts(SliceMode::Float2);
        assert!((h.tex - 0.5 * (a.tex + t.tex)).abs() < 1e-12);
        assert!((h.smem - 0.5 * a.smem).abs() < 1e-12);
        assert!((h.fp - 0.5 * (a.fp + t.fp)).abs() < 1e-12);
    }

    #[test]
    fn pruning_keeps_the_best_of_every_group() {
        let r = DeviceRates::hopper();
        let slow = alu(
            AluParams {
                oversample: true,
                ..AluParams::default()
            },
            SliceMode::F32,
        );
        let jobs = vec![
            (
                tex(KernelKind::TexOpt, SliceMode::F32),
                Interpolation::Linear,
            ),
            (
                tex(KernelKind::TexOpt, SliceMode::Half4),
                Interpolation::Nearest,
            ),
            (
                alu(AluParams::default(), SliceMode::Float2),
                Interpolation::Linear,
            ),
            (slow, Interpolation::Linear),
        ];
        // One group: only configs within 1.5× of the fastest survive.
        let keep = prune(&jobs, |_, _| 0, &r, 1.5);
        let t: Vec<f64> = jobs
            .iter()
            .map(|&(c, i)| predict(c, i, 1.0, &r).seconds)
            .collect();
        let best = t.iter().copied().fold(f64::INFINITY, f64::min);
        for k in 0..jobs.len() {
            assert_eq!(keep[k], t[k] <= 1.5 * best, "job {k}");
        }
        assert!(keep.iter().any(|&k| k));
        assert!(!keep[0], "tex-opt f32 is 4× the half4 prediction");
        // One group per job: nothing is pruned.
        let keep = prune(&jobs, |c, i| (c.to_string(), i), &r, 1.5);
        assert!(keep.iter().all(|&k| k));
        // factor 0 disables pruning.
        assert!(prune(&jobs, |_, _| 0, &r, 0.0).iter().all(|&k| k));
    }
}
