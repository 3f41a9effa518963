//! The autotuner behind `tomors tune`: times every candidate back-projection
//! configuration on the present device (GPU-resident data, CUDA events, the
//! median of a few launches after a warm-up, as [`crate::bench`]) and keeps
//! the fastest per (kernel family, interpolation, slice class) in the
//! tuning cache ([`crate::tuning`]).
//!
//! The search space: the texture kernels (`standard`, `tex-opt`) in their
//! texel modes, and the `alu` kernel over tile (32, 64), projections per
//! cache step (8, 16; 32 or 16 threads per cached row), advanced caching
//! (linear), float rounding and the occupancy target (`__launch_bounds__`
//! minimum blocks per multiprocessor), in f32, float2 and half4 texels.
//! Modules are compiled in parallel first (NVRTC, disk cache), then timed
//! one by one.

pub mod model;
pub mod perf;

use rayon::prelude::*;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Interpolation, ParallelGeometry, SliceGrid};

use crate::bench::{fill_random, measure, BenchRow};
use crate::error::Result;
use crate::fbp::engine::module_defines;
use crate::fbp::kernels::{
    AluParams, BpConfig, KernelChoice, KernelKind, SliceMode, DEFAULT_STANDARD_MAP,
};
use crate::fbp::tuning::{family, TuningEntry};
use crate::fbp::CudaBackend;
use crate::runtime::compile::cubin_cached;
use perf::{predict, prune, DeviceRates, Prediction};

/// What the tuner measures.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// Device ordinal.
    pub device: usize,
    /// Bins = angles = slice side of the timed problem.
    pub size: usize,
    /// Timed launches per candidate (median kept).
    pub reps: usize,
    /// A reduced `alu` grid (tile 32 and 64 with their default step and
    /// occupancy, both rounding modes).
    pub quick: bool,
    /// Skip candidates the performance model ([`perf`]) predicts more than
    /// this many times slower than the best prediction of their family and
    /// interpolation (0: time every candidate).
    pub prune: f64,
    /// Unit rates for the model (scaled to the device's multiprocessor
    /// count when they are the defaults).
    pub rates: Option<DeviceRates>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            device: 0,
            size: 2048,
            reps: 5,
            quick: false,
            prune: 1.5,
            rates: None,
        }
    }
}

/// Everything the tuner measured.
#[derive(Clone, Debug, Default)]
pub struct TuneReport {
    /// Device name.
    pub device: String,
    /// Driver version.
    pub driver: i32,
    /// Every timed candidate.
    pub rows: Vec<BenchRow>,
    /// Candidates the model pruned (not timed).
    pub pruned: Vec<(BpConfig, Interpolation)>,
    /// The best per (family, interpolation, slice class).
    pub entries: Vec<TuningEntry>,
    /// Per (interpolation, slice class): the default configuration (no
    /// tuning) and the tuned choice, timed again side by side:
    /// (interp, class, default, default GU/s, choice, choice GU/s).
    pub check: Vec<TuneCheck>,
}

/// Default vs tuned choice: (interpolation, slice class, default, its GU/s,
/// choice, its GU/s).
pub type TuneCheck = (Interpolation, usize, BpConfig, f64, BpConfig, f64);

/// The line-sweep candidates (`docs/perf-notes.md`, "The line-sweep kernel").
fn sweep_candidates() -> Vec<crate::fbp::kernels::SweepParams> {
    use crate::fbp::kernels::SweepParams;
    let d = SweepParams::default();
    vec![
        SweepParams::tuned(),
        d,
        SweepParams { stages: 3, ..d },
        SweepParams {
            tx: 8,
            ty: 4,
            spl: 2,
            wx: 2,
            wy: 4,
            axis: true,
            min_blocks: 2,
            stages: 3,
            swizzle: 0,
        },
        SweepParams { min_blocks: 2, ..d },
        SweepParams {
            tx: 4,
            ty: 4,
            wx: 2,
            wy: 4,
            axis: true,
            min_blocks: 2,
            ..d
        },
    ]
}

/// The tensor-core candidates (`docs/perf-notes.md`, "Tensor cores").
fn tensor_candidates() -> Vec<crate::fbp::kernels::TensorParams> {
    use crate::fbp::kernels::TensorParams;
    let d = TensorParams::default();
    let t = TensorParams::tuned();
    vec![
        t,
        TensorParams { bulk: 1, ..t },
        TensorParams { wy: 3, ..d },
        TensorParams { wx: 4, wy: 3, ..t },
    ]
}

/// The candidate configurations.
pub fn candidates(quick: bool) -> Vec<BpConfig> {
    let modes = [SliceMode::F32, SliceMode::Float2, SliceMode::Half4];
    let mut v = Vec::new();
    for kernel in [KernelKind::Standard, KernelKind::TexOpt] {
        for mode in modes {
            v.push(BpConfig { kernel, mode });
        }
    }
    let mut params = Vec::new();
    if quick {
        for (tile, min_blocks) in [(32u8, 2u8), (64, 1)] {
            for float_round in [false, true] {
                params.push(AluParams {
                    tile,
                    min_blocks,
                    float_round,
                    ..AluParams::default()
                });
            }
        }
    } else {
        for (tile, blocks) in [(32u8, [2u8, 4]), (64, [1, 2])] {
            for step in [8u8, 16] {
                for advanced in [false, true] {
                    for float_round in [false, true] {
                        for min_blocks in blocks {
                            params.push(AluParams {
                                tile,
                                step,
                                advanced,
                                float_round,
                                min_blocks,
                                oversample: false,
                                hybrid: 0,
                                loads: false,
                                ..AluParams::default()
                            });
                        }
                    }
                }
            }
        }
    }
    for mode in modes {
        for p in &params {
            v.push(BpConfig {
                kernel: KernelKind::Alu(*p),
                mode,
            });
        }
    }
    // Hybrid: 2, 3 or 4 of 8 blocks through the texture unit.
    for mode in modes {
        for hybrid in [2u8, 3, 4] {
            v.push(BpConfig {
                kernel: KernelKind::Alu(AluParams {
                    tile: 64,
                    hybrid,
                    ..AluParams::default()
                }),
                mode,
            });
        }
    }
    // Hybrid split by block index with the exact texture path (f32 weights),
    // 1 or 2 of 8 blocks.
    for mode in modes {
        for hybrid in [1u8, 2] {
            v.push(BpConfig {
                kernel: KernelKind::Alu(AluParams {
                    tile: 64,
                    hybrid,
                    by_block: true,
                    hybrid_exact: true,
                    ..AluParams::default()
                }),
                mode,
            });
        }
    }
    // Half arithmetic for the half cache (linear, advanced caching).
    for (tile, float_round) in [(32u8, false), (32, true), (64, true)] {
        for half_math in [1u8, 2] {
            v.push(BpConfig {
                kernel: KernelKind::Alu(AluParams {
                    tile,
                    float_round,
                    half_math,
                    ..AluParams::default()
                }),
                mode: SliceMode::Half4,
            });
        }
    }
    // Half4 texels, 8 slices per block (two groups): plain, half math.
    for (float_round, half_math) in [(false, 0u8), (true, 0), (true, 1), (false, 2), (true, 2)] {
        v.push(BpConfig {
            kernel: KernelKind::Alu(AluParams {
                float_round,
                half_math,
                wide: true,
                ..AluParams::default()
            }),
            mode: SliceMode::Half4,
        });
    }
    // The cache filled with plain loads instead of texture fetches.
    for mode in modes {
        for advanced in [true, false] {
            v.push(BpConfig {
                kernel: KernelKind::Alu(AluParams {
                    tile: 64,
                    advanced,
                    loads: true,
                    ..AluParams::default()
                }),
                mode,
            });
        }
    }
    // The line sweep (exact, linear; slabs of 32 × slices per lane).
    for p in sweep_candidates() {
        v.push(BpConfig {
            kernel: KernelKind::Sweep(p),
            mode: SliceMode::F32,
        });
    }
    // Tensor cores (exact, linear; slabs of 8 × slice tiles).
    for p in tensor_candidates() {
        v.push(BpConfig {
            kernel: KernelKind::Tensor(p),
            mode: SliceMode::F32,
        });
    }
    // Oversampling (linear requests, f32 and float2 texels).
    for mode in [SliceMode::F32, SliceMode::Float2] {
        for (tile, min_blocks) in [(32u8, 2u8), (64, 1)] {
            v.push(BpConfig {
                kernel: KernelKind::Alu(AluParams {
                    tile,
                    min_blocks,
                    advanced: false,
                    oversample: true,
                    ..AluParams::default()
                }),
                mode,
            });
        }
    }
    v
}

/// Slices a candidate is timed with: two texels' worth, or one block's
/// worth for the line-sweep kernel (32 lanes × slices per lane).
fn timed_slices(cfg: &BpConfig) -> usize {
    match cfg.kernel {
        KernelKind::Sweep(p) => p.slices_per_block(),
        KernelKind::Tensor(p) => p.slices_per_block(),
        _ => 2 * cfg.mode.slices(),
    }
}

/// Whether an advanced `alu` candidate has no plain twin in the grid (the
/// quick grid keeps only advanced ones, so they are timed for nearest too).
fn quick_twinless(quick: bool, p: AluParams) -> bool {
    quick && p.advanced && !p.oversample
}

/// Runs the search on `opts.device`, calling `progress` with one line per
/// timed candidate.
///
/// Errors: no usable device, compilation or launch errors.
pub fn tune(opts: &TuneOptions, progress: &mut dyn FnMut(&str)) -> Result<TuneReport> {
    let be = CudaBackend::new(opts.device)?;
    let n = opts.size;
    let geom = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let (name, cc, driver, sm_count) = {
        let e = be.lock()?;
        (e.ctx.name.clone(), e.ctx.cc, e.ctx.driver, e.ctx.sm_count)
    };
    let interps = [Interpolation::Linear, Interpolation::Nearest];
    let mut jobs: Vec<(BpConfig, Interpolation)> = Vec::new();
    for cfg in candidates(opts.quick) {
        for interp in interps {
            // advanced caching only changes linear modules: the nearest
            // module of an advanced alu candidate is its plain twin's.
            let redundant = matches!(cfg.kernel, KernelKind::Alu(p)
                if (p.advanced && p.hybrid == 0 && !p.wide && !quick_twinless(opts.quick, p))
                    || p.half_math > 0 || p.hybrid_exact)
                && interp == Interpolation::Nearest;
            if cfg.supports(interp) && !redundant {
                jobs.push((cfg, interp));
            }
        }
    }
    let rates = opts
        .rates
        .unwrap_or_else(|| DeviceRates::hopper().scaled(sm_count));
    let keep = prune(&jobs, |c, i| (family(c), i), &rates, opts.prune);
    let mut pruned = Vec::new();
    let mut kept = Vec::with_capacity(jobs.len());
    for (job, k) in jobs.into_iter().zip(keep) {
        if k {
            kept.push(job);
        } else {
            pruned.push(job);
        }
    }
    let jobs = kept;
    if !pruned.is_empty() {
        progress(&format!(
            "model: skipped {} of {} candidates predicted > {:.2}× the best of their family",
            pruned.len(),
            pruned.len() + jobs.len(),
            opts.prune
        ));
    }
    progress(&format!(
        "compiling {} candidate modules on {name} …",
        jobs.len()
    ));
    jobs.par_iter()
        .map(|&(cfg, interp)| {
            let (defines, _, _) =
                module_defines(cfg, &grid, &geom, interp, 4, DEFAULT_STANDARD_MAP)?;
            let (module, src) = crate::fbp::engine::module_source(cfg);
            cubin_cached(module, src, &defines, &name, cc, driver).map(|_| ())
        })
        .collect::<Result<Vec<()>>>()?;
    let most = jobs
        .iter()
        .map(|(c, _)| timed_slices(c))
        .max()
        .unwrap_or(8)
        .max(8);
    let mut data = vec![0f32; most * n * n];
    fill_random(&mut data, 11);
    let mut report = TuneReport {
        device: name.clone(),
        driver,
        pruned,
        ..TuneReport::default()
    };
    for &(cfg, interp) in &jobs {
        let slices = timed_slices(&cfg);
        let row = measure(&be, cfg, interp, n, slices, opts.reps, &data)?;
        progress(&format!(
            "  {:<36} {:<8} {:>9.1} GU/s",
            row.kernel,
            interp.to_string(),
            row.gups
        ));
        report.rows.push(row);
    }
    // The best per (family, interpolation, class).
    let timed: Vec<(BpConfig, Interpolation, f64)> = jobs
        .iter()
        .zip(&report.rows)
        .map(|(&(c, i), r)| (c, i, r.gups))
        .collect();
    for class in [1usize, 2, 4] {
        for interp in interps {
            let mut fams: Vec<String> = timed.iter().map(|t| family(&t.0)).collect();
            fams.sort();
            fams.dedup();
            for fam in fams {
                let best = timed
                    .iter()
                    .filter(|t| t.1 == interp && t.0.mode.slices() <= class && family(&t.0) == fam)
                    .max_by(|a, b| a.2.total_cmp(&b.2));
                if let Some(&(config, _, gups)) = best {
                    report.entries.push(TuningEntry {
                        device: name.clone(),
                        driver,
                        kernel: fam,
                        interp,
                        slices: class,
                        config,
                        gups,
                    });
                }
            }
        }
    }
    // Default vs choice, timed again side by side.
    let mut cache = crate::fbp::tuning::TuningCache::default();
    cache.merge(report.entries.clone());
    for class in [1usize, 2, 4] {
        for interp in interps {
            let default = KernelChoice::Auto.resolve(class);
            let Some(choice) = cache.best(&name, driver, interp, class).map(|e| e.config) else {
                continue;
            };
            let slices = 2 * class.max(2);
            let d = measure(&be, default, interp, n, slices, opts.reps, &data)?;
            let c = measure(&be, choice, interp, n, slices, opts.reps, &data)?;
            progress(&format!(
                "  check {interp:<8} {class} slice(s): default {default} {:.1} GU/s, tuned {choice} {:.1} GU/s",
                d.gups, c.gups
            ));
            report
                .check
                .push((interp, class, default, d.gups, choice, c.gups));
        }
    }
    Ok(report)
}

/// What `tomors model` measures.
#[derive(Clone, Debug)]
pub struct ModelOptions {
    /// Device ordinal.
    pub device: usize,
    /// Bins = angles = slice side.
    pub size: usize,
    /// Slices per launch.
    pub slices: usize,
    /// Timed launches per configuration (median kept).
    pub reps: usize,
    /// The reduced candidate grid.
    pub quick: bool,
    /// Rates to use as they are; `None`: the defaults scaled to the device,
    /// with the texture rate measured here.
    pub rates: Option<DeviceRates>,
}

/// One configuration: the model's prediction beside the measurement.
#[derive(Clone, Debug)]
pub struct ModelRow {
    /// Configuration.
    pub config: BpConfig,
    /// Interpolation.
    pub interp: Interpolation,
    /// The prediction.
    pub predicted: Prediction,
    /// The measurement.
    pub measured: BenchRow,
}

/// The model's rates and every configuration's prediction and measurement.
#[derive(Clone, Debug)]
pub struct ModelReport {
    /// Device name.
    pub device: String,
    /// The rates used.
    pub rates: DeviceRates,
    /// Whether the texture rate was measured here (`tex-opt` f32, linear,
    /// which runs at the fetch ceiling: `docs/perf-notes.md`).
    pub tex_measured: bool,
    /// One row per configuration.
    pub rows: Vec<ModelRow>,
}

/// Measures the texture fetch rate (unless `opts.rates` is given), then
/// predicts and times every candidate of the tuning grid, calling
/// `progress` with one line per configuration.
///
/// Errors: no usable device, compilation or launch errors.
pub fn model(opts: &ModelOptions, progress: &mut dyn FnMut(&str)) -> Result<ModelReport> {
    let be = CudaBackend::new(opts.device)?;
    let (name, sm_count) = {
        let e = be.lock()?;
        (e.ctx.name.clone(), e.ctx.sm_count)
    };
    let (n, slices) = (opts.size, opts.slices);
    let mut data = vec![0f32; slices * n * n];
    fill_random(&mut data, 5);
    let updates = (n * n * slices) as f64 * n as f64;
    let mut tex_measured = false;
    let rates = match opts.rates {
        Some(r) => r,
        None => {
            let probe = BpConfig {
                kernel: KernelKind::TexOpt,
                mode: SliceMode::F32,
            };
            let row = measure(
                &be,
                probe,
                Interpolation::Linear,
                n,
                slices,
                opts.reps,
                &data,
            )?;
            tex_measured = true;
            let tex = updates / (row.ms * 1e-3);
            progress(&format!(
                "texture fetch rate (tex-opt f32 linear): {:.0} Gfetch/s",
                tex / 1e9
            ));
            DeviceRates {
                tex,
                ..DeviceRates::hopper().scaled(sm_count)
            }
        }
    };
    let mut rows = Vec::new();
    for cfg in candidates(opts.quick) {
        for interp in [Interpolation::Linear, Interpolation::Nearest] {
            if !cfg.supports(interp) || slices % cfg.mode.slices() != 0 {
                continue;
            }
            let predicted = predict(cfg, interp, updates, &rates);
            let measured = measure(&be, cfg, interp, n, slices, opts.reps, &data)?;
            progress(&format!(
                "  {:<36} {:<8} predicted {:>9.3} ms ({:<10}) measured {:>9.3} ms  {:>5.2}×",
                cfg.to_string(),
                interp.to_string(),
                predicted.seconds * 1e3,
                predicted.limit.to_string(),
                measured.ms,
                measured.ms / (predicted.seconds * 1e3)
            ));
            rows.push(ModelRow {
                config: cfg,
                interp,
                predicted,
                measured,
            });
        }
    }
    Ok(ModelReport {
        device: name,
        rates,
        tex_measured,
        rows,
    })
}
