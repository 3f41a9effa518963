//! GPU benchmarks: back-projection GU/s (voxels × projections / s) of every
//! kernel × interpolation × slices-per-pass on GPU-resident data, a size
//! sweep, both FFT variants, and end-to-end FBP host to host.
//!
//! Timing: CUDA events on the compute stream around each launch, one
//! warm-up launch (module load and compilation stay outside), the median of
//! `reps` launches. Inputs are pseudo-random non-zero sinograms.

pub mod levers;

use ndarray::{Array3, ArrayView3, ArrayViewMut3};
use rayon::prelude::*;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

use crate::error::Result;
use crate::fbp::engine::{median, BpJob, PipelineStats, TexStorage};
use crate::fbp::fft::FftVariant;
use crate::fbp::kernels::{BpConfig, KernelChoice, KernelKind, SliceMode};
use crate::fbp::{CudaBackend, CudaOptions, MultiCudaBackend};

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Device ordinal.
    pub device: usize,
    /// Detector bins = angles = slice side of the main table (2048).
    pub size: usize,
    /// Slices back projected per launch in the main table.
    pub slices: usize,
    /// Sizes of the sweep (bins = angles = side).
    pub sweep: Vec<usize>,
    /// Timed repetitions per measurement (median reported).
    pub reps: usize,
    /// Slices of the end-to-end FBP (0 = skip).
    pub e2e_slices: usize,
    /// Side (= bins = angles) of the end-to-end FBP.
    pub e2e_size: usize,
    /// Devices for a second, multi-GPU end-to-end run (skipped unless 2 or more).
    pub devices: Vec<usize>,
}

impl BenchConfig {
    /// The full benchmark of the issue: 2048 bins × 2048 angles → 2048²
    /// slices (32 per launch, as the ASTRA comparison), sweep 256…4096,
    /// end-to-end FBP of 2048 slices.
    pub fn full(sweep: &[usize]) -> Self {
        Self {
            device: 0,
            size: 2048,
            slices: 32,
            sweep: if sweep.is_empty() {
                vec![256, 512, 1024, 2048, 4096]
            } else {
                sweep.to_vec()
            },
            reps: 5,
            e2e_slices: 2048,
            e2e_size: 2048,
            devices: Vec::new(),
        }
    }

    /// A small run (seconds): 512², sweep 256 and 512, FBP of 64 slices of 256².
    pub fn quick(sweep: &[usize]) -> Self {
        Self {
            device: 0,
            size: 512,
            slices: 8,
            sweep: if sweep.is_empty() {
                vec![256, 512]
            } else {
                sweep.to_vec()
            },
            reps: 3,
            e2e_slices: 64,
            e2e_size: 256,
            devices: Vec::new(),
        }
    }
}

/// One back-projection measurement.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// Kernel configuration.
    pub kernel: String,
    /// Interpolation.
    pub interp: Interpolation,
    /// Slice side (= bins).
    pub n: usize,
    /// Projections.
    pub angles: usize,
    /// Slices per launch.
    pub slices: usize,
    /// Median milliseconds per launch.
    pub ms: f64,
    /// Giga-updates per second: n² × slices × angles / time.
    pub gups: f64,
}

/// Everything measured.
#[derive(Clone, Debug, Default)]
pub struct BenchReport {
    /// Device name.
    pub device: String,
    /// Main table (all configurations at `size`).
    pub main: Vec<BenchRow>,
    /// Size sweep.
    pub sweep: Vec<BenchRow>,
    /// FFT variants: (name, rows, bins, ms).
    pub fft: Vec<(String, usize, usize, f64)>,
    /// End-to-end FBP: (slices, side, seconds, stage times).
    pub e2e: Option<(usize, usize, f64, PipelineStats)>,
    /// End-to-end FBP on several devices: (devices, seconds, stage times per device).
    pub e2e_multi: Option<(Vec<usize>, f64, Vec<PipelineStats>)>,
}

/// Deterministic pseudo-random values in [0.25, 1.25) (never zero).
pub(crate) fn fill_random(v: &mut [f32], seed: u64) {
    v.par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut s = seed ^ ((c as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            for x in chunk {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                *x = 0.25 + (s >> 40) as f32 / (1u64 << 24) as f32;
            }
        });
}

pub(crate) fn measure(
    be: &CudaBackend,
    cfg: BpConfig,
    interp: Interpolation,
    n: usize,
    slices: usize,
    reps: usize,
    data: &[f32],
) -> Result<BenchRow> {
    let geom = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let job = BpJob {
        geom: &geom,
        grid: &grid,
        interp,
        scale: 1.0,
        cfg,
    };
    let mut e = be.lock()?;
    let (key, texs) = e.stage_resident(&data[..slices * n * n], slices, &job)?;
    let (e0, e1) = (e.event()?, e.event()?);
    let mut times = Vec::with_capacity(reps);
    for r in 0..=reps {
        e0.record(&e.comp)?;
        e.launch_resident(key, texs, slices, 1.0, cfg)?;
        e1.record(&e.comp)?;
        e1.synchronize()?;
        if r > 0 {
            times.push(e0.elapsed_ms(&e1)? as f64);
        }
    }
    let ms = median(&mut times);
    Ok(BenchRow {
        kernel: cfg.to_string(),
        interp,
        n,
        angles: n,
        slices,
        ms,
        gups: (n * n * slices) as f64 * n as f64 / (ms * 1e-3) / 1e9,
    })
}

/// Times one configuration on device `device`: `n` bins × `n` angles → `n²`,
/// `slices` slices, GPU-resident data, the median of `reps` launches after a
/// warm-up (for profilers and one-off comparisons).
///
/// Errors: no usable device, compilation or launch errors.
pub fn time_kernel(
    device: usize,
    cfg: BpConfig,
    interp: Interpolation,
    n: usize,
    slices: usize,
    reps: usize,
) -> Result<BenchRow> {
    cfg.check(interp)?;
    let be = CudaBackend::new(device)?;
    let mut data = vec![0f32; slices * n * n];
    fill_random(&mut data, 3);
    measure(&be, cfg, interp, n, slices, reps, &data)
}

/// Runs the benchmark, printing progress lines to stderr.
pub fn run(cfg: &BenchConfig) -> Result<BenchReport> {
    let be = CudaBackend::new(cfg.device)?;
    let mut rep = BenchReport {
        device: format!("{} (texture storage {:?})", be.name(), be.options().storage),
        ..Default::default()
    };
    let interps = [Interpolation::Linear, Interpolation::Nearest];
    // Main table.
    let n = cfg.size;
    let mut data = vec![0f32; cfg.slices * n * n];
    fill_random(&mut data, 1);
    let alu = [SliceMode::F32, SliceMode::Float2, SliceMode::Half4].map(BpConfig::alu);
    // What an FBP uses: `Auto`'s exact choice here, and `fast`.
    let used = [
        be.kernel_for(cfg.slices, Interpolation::Linear),
        BpConfig::fast(),
    ];
    for c in BpConfig::ALL
        .into_iter()
        .chain(alu)
        .chain(used)
        .filter(|_| n > 0)
    {
        for interp in interps {
            if !c.supports(interp) {
                continue;
            }
            let row = measure(&be, c, interp, n, cfg.slices, cfg.reps, &data)?;
            eprintln!(
                "  {:<20} {:<8} {:>6} {:>8.3} ms {:>9.1} GU/s",
                row.kernel,
                interp.to_string(),
                n,
                row.ms,
                row.gups
            );
            rep.main.push(row);
        }
    }
    // The standard kernel's other thread orders (the default one is above).
    for map in [2u32 + 16, 16, 2 + 16 * 4, 2 + 16 * 8, 16 * 16] {
        be.lock()?.standard_map = map;
        for mode in [SliceMode::F32, SliceMode::Float2, SliceMode::Half4] {
            let c = BpConfig {
                kernel: KernelKind::Standard,
                mode,
            };
            let interp = if mode == SliceMode::Half4 {
                Interpolation::Nearest
            } else {
                Interpolation::Linear
            };
            if n == 0 {
                continue;
            }
            let mut row = measure(&be, c, interp, n, cfg.slices, cfg.reps, &data)?;
            row.kernel = format!("{}@map{map}", row.kernel);
            eprintln!(
                "  {:<20} {:<8} {:>6} {:>8.3} ms {:>9.1} GU/s",
                row.kernel,
                interp.to_string(),
                n,
                row.ms,
                row.gups
            );
            rep.main.push(row);
        }
    }
    be.lock()?.standard_map = crate::fbp::kernels::DEFAULT_STANDARD_MAP;
    // The other texture storage (pitch-linear memory instead of CUDA arrays).
    let default_storage = be.lock()?.tex_storage;
    let other = match default_storage {
        TexStorage::Array => TexStorage::Pitch,
        TexStorage::Pitch => TexStorage::Array,
    };
    be.lock()?.tex_storage = other;
    for c in BpConfig::ALL.into_iter().filter(|_| n > 0) {
        let interp = if c.mode == SliceMode::Half4 {
            Interpolation::Nearest
        } else {
            Interpolation::Linear
        };
        let mut row = measure(&be, c, interp, n, cfg.slices, cfg.reps, &data)?;
        row.kernel = format!("{}[{other:?}]", row.kernel);
        eprintln!(
            "  {:<20} {:<8} {:>6} {:>8.3} ms {:>9.1} GU/s",
            row.kernel,
            interp.to_string(),
            n,
            row.ms,
            row.gups
        );
        rep.main.push(row);
    }
    be.lock()?.tex_storage = default_storage;
    drop(data);
    // Size sweep with the headline configurations.
    let sweep_cfgs = [
        (
            BpConfig {
                kernel: KernelKind::Standard,
                mode: SliceMode::F32,
            },
            Interpolation::Linear,
        ),
        (
            BpConfig {
                kernel: KernelKind::TexOpt,
                mode: SliceMode::F32,
            },
            Interpolation::Linear,
        ),
        (
            BpConfig {
                kernel: KernelKind::TexOpt,
                mode: SliceMode::Float2,
            },
            Interpolation::Linear,
        ),
        (
            BpConfig {
                kernel: KernelKind::TexOpt,
                mode: SliceMode::Half4,
            },
            Interpolation::Nearest,
        ),
    ];
    for &s in &cfg.sweep {
        let cube = (s as f64).powi(3);
        let slices = ((2f64.powi(36) / cube) as usize).clamp(4, 64) / 4 * 4;
        let mut d = vec![0f32; slices * s * s];
        fill_random(&mut d, s as u64);
        for (c, interp) in sweep_cfgs {
            let row = measure(&be, c, interp, s, slices, cfg.reps, &d)?;
            eprintln!(
                "  sweep {:<14} {:<8} {:>6} {:>8.3} ms {:>9.1} GU/s",
                row.kernel,
                interp.to_string(),
                s,
                row.ms,
                row.gups
            );
            rep.sweep.push(row);
        }
    }
    // FFT variants.
    if be.gpu_filtering() && n > 0 {
        let rows = 8 * n;
        for v in [FftVariant::RealToComplex, FftVariant::ComplexPair] {
            let ms = be.lock()?.time_filter(rows, n, v, cfg.reps)?;
            eprintln!("  filter {v:<6} {rows} rows × {n} bins: {ms:.3} ms");
            rep.fft.push((v.to_string(), rows, n, ms));
        }
    }
    // End-to-end FBP, host to host.
    if cfg.e2e_slices > 0 {
        let (k, s) = (cfg.e2e_slices, cfg.e2e_size);
        let geom = ParallelGeometry::new(uniform_angles(s, std::f32::consts::PI), s)?;
        let grid = SliceGrid::for_geometry(&geom);
        let mut sino = Array3::<f32>::zeros((k, s, s));
        fill_random(sino.as_slice_mut().expect("contiguous"), 7);
        let mut out = Array3::<f32>::zeros((k, s, s));
        out.as_slice_mut()
            .expect("contiguous")
            .par_chunks_mut(1 << 16)
            .for_each(|c| c.fill(1.0));
        let mut b = CudaBackend::with_options(cfg.device, CudaOptions::default())?;
        // The warm-up must run the kernel the timed call runs: `Auto`'s
        // choice depends on the job's slice count, so it is resolved once
        // for the timed job and that kernel is fixed for both calls (a
        // smaller warm-up under `Auto` could compile another kernel and
        // leave the timed one's compilation in the time).
        let job = b.kernel_for_job(k, Interpolation::Linear, &geom, &grid);
        b.set_kernel(KernelChoice::Fixed(job));
        let secs = timed_fbp(&b, sino.view(), k.min(128), &geom, &grid, out.view_mut())?;
        let st = b.last_stats();
        eprintln!("  FBP {k} slices of {s}²: {secs:.2} s ({st})");
        rep.e2e = Some((k, s, secs, st));
        drop(b);
        if cfg.devices.len() > 1 {
            let options = CudaOptions {
                kernel: KernelChoice::Fixed(job),
                ..CudaOptions::default()
            };
            let multi = MultiCudaBackend::new(&cfg.devices, options)?;
            let warm = k.min(128 * cfg.devices.len());
            let secs_m = timed_fbp(&multi, sino.view(), warm, &geom, &grid, out.view_mut())?;
            let sts = multi.last_stats();
            eprintln!(
                "  FBP {k} slices of {s}² on devices {:?}: {secs_m:.2} s (speed-up {:.2}×)",
                cfg.devices,
                secs / secs_m
            );
            rep.e2e_multi = Some((cfg.devices.clone(), secs_m, sts));
        }
    }
    Ok(rep)
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "device: {}", self.device)?;
        writeln!(
            f,
            "{:<20} {:<8} {:>6} {:>7} {:>7} {:>10} {:>10}",
            "kernel", "interp", "n", "angles", "slices", "ms", "GU/s"
        )?;
        for r in self.main.iter().chain(self.sweep.iter()) {
            writeln!(
                f,
                "{:<20} {:<8} {:>6} {:>7} {:>7} {:>10.3} {:>10.1}",
                r.kernel,
                r.interp.to_string(),
                r.n,
                r.angles,
                r.slices,
                r.ms,
                r.gups
            )?;
        }
        for (v, rows, n, ms) in &self.fft {
            writeln!(f, "filter {v:<6}: {rows} rows × {n} bins in {ms:.3} ms")?;
        }
        if let Some((k, s, secs, st)) = &self.e2e {
            writeln!(
                f,
                "end-to-end FBP of {k} slices {s}² from {s} angles: {secs:.2} s"
            )?;
            writeln!(f, "  {st}")?;
            if let Some((d, secs_m, sts)) = &self.e2e_multi {
                writeln!(f, "end-to-end FBP on devices {d:?}: {secs_m:.2} s (speed-up {:.2}× over one device)", secs / secs_m)?;
                for st in sts {
                    writeln!(f, "  {st}")?;
                }
            }
        }
        Ok(())
    }
}

/// Wall time of one FBP of `sino` into `out` (Ram-Lak, linear), after a
/// warm-up FBP of its first `warm` slices (compilation, plans, device and
/// pinned buffers stay out of the time).
fn timed_fbp(
    backend: &dyn Backend,
    sino: ArrayView3<'_, f32>,
    warm: usize,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    out: ArrayViewMut3<'_, f32>,
) -> Result<f64> {
    let (filter, interp) = (FilterSpec::default(), Interpolation::Linear);
    let w = sino.slice(ndarray::s![..warm, .., ..]);
    let (_, ny, nx) = out.dim();
    let mut o = Array3::<f32>::zeros((w.shape()[0], ny, nx));
    backend.fbp(w, geom, grid, &filter, interp, o.view_mut())?;
    let t = std::time::Instant::now();
    backend.fbp(sino, geom, grid, &filter, interp, out)?;
    Ok(t.elapsed().as_secs_f64())
}
