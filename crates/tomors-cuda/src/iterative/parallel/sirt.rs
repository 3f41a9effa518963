//! SIRT resident on one or several devices (parallel beam).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tomors_core::iterative::{Algorithm, IterativeOptions, IterativeResult, StopReason, Weighting};
use tomors_core::linalg::Vector;

use super::*;
use crate::fbp::MultiCudaBackend;
use crate::iterative::early::{EarlyDownload, Staged};
use crate::iterative::run::{run_resident, with_relaxation, Prepared, Progress};
use crate::iterative::{
    check_finite, check_finite_on_device, check_options, prefault, GpuIteration, Phases, SirtStats,
};

/// Device options of [`sirt_cuda`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuSirtOptions {
    /// Slices per slab (0: as many as fit in device memory, shared evenly
    /// between the devices).
    pub slab: usize,
    /// Slices per forward-projection thread: 4, 8 or 16 (0: 8 for stacks of
    /// 8 slices or more, else 4).
    pub slice_group: usize,
    /// Projections per forward-projection thread, 1 to 4 (0: the default, 4).
    pub rays_per_thread: usize,
    /// Two threads per forward-projection ray (`None`: the default).
    pub paired: Option<bool>,
    /// Slices per back-projection thread, 4, 8 or 16 (0: the default).
    pub back_slice_group: usize,
    /// The line-length projector ([`CudaJoseph::set_line_model`]) instead
    /// of Joseph's (SIRT, SART and BLOCK-IT only).
    pub line: bool,
    /// The back projection with 2×2 pixels per thread
    /// ([`JosephTuning::back_quad`]; `None`: the default).
    pub back_quad: Option<bool>,
    /// The line-sweep forward projection
    /// ([`CudaJoseph::set_sweep_forward`]), Joseph's model only.
    pub sweep_forward: bool,
    /// The line-sweep back projection ([`CudaJoseph::set_sweep_back`];
    /// hats of at most one bin).
    pub sweep_back: bool,
    /// The voxel pair ([`CudaJoseph::set_voxel_back`]): Joseph's forward
    /// projection with FBP's voxel-driven back projection (`Some(kernel)`;
    /// unmatched, as ASTRA's `SIRT3D_CUDA`; SIRT only), or Joseph's exact
    /// transpose (`None`, the default).
    pub voxel: Option<VoxelKernel>,
}

/// Checks the inputs of [`sirt_cuda`] (no GPU needed): the algorithm is
/// SIRT or block-sequential (SART, BLOCK-IT), at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box, sinograms that
/// fit the geometry, an initial volume that fits the grid, finite data.
/// Returns the weighting.
pub fn check_sirt_inputs(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: &ArrayView3<'_, f32>,
    initial: Option<&ArrayView3<'_, f32>>,
    options: &IterativeOptions,
) -> Result<Weighting> {
    let weighting = check_sirt_shapes(geometry, grid, sinograms, initial, options)?;
    check_finite(sinograms, "the sinogram data", initial)?;
    Ok(weighting)
}

/// [`check_sirt_inputs`] without the scan for non-finite values (the runs
/// check their uploads on the device: [`check_finite_on_device`]).
fn check_sirt_shapes(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: &ArrayView3<'_, f32>,
    initial: Option<&ArrayView3<'_, f32>>,
    options: &IterativeOptions,
) -> Result<Weighting> {
    let weighting = check_options(options)?;
    let (ns, na, nb) = sinograms.dim();
    if na != geometry.n_angles() || nb != geometry.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the geometry {} × {}",
            geometry.n_angles(),
            geometry.n_bins()
        ))
        .into());
    }
    if ns == 0 {
        return Err(CoreError::Shape("no sinograms to reconstruct".into()).into());
    }
    if let Some(x0) = initial {
        if x0.dim() != (ns, grid.ny, grid.nx) {
            return Err(CoreError::Shape(format!(
                "initial volume is {:?}, expected {:?}",
                x0.dim(),
                (ns, grid.ny, grid.nx)
            ))
            .into());
        }
    }
    check_sizes(geometry, grid)?;
    Ok(weighting)
}

/// Per-slab outcome.
pub(super) struct SlabOut {
    /// `‖b − A·x‖²` of the slab after each iteration.
    sq: Vec<f64>,
    b_sq: f64,
    stop: StopReason,
    /// Iterations done.
    iterations: usize,
}

/// Runs the solver on one slab (host views of its sinograms, initial
/// volume and output), resident on the device: upload, solve, download.
#[allow(clippy::too_many_arguments)]
pub(super) fn solve_slab(
    op: &CudaJoseph,
    index: usize,
    b_host: ArrayView3<'_, f32>,
    x0: Option<ArrayView3<'_, f32>>,
    mut out: ArrayViewMut3<'_, f32>,
    options: &IterativeOptions,
    progress: &Progress<'_>,
    stats: &mut SirtStats,
) -> Result<SlabOut> {
    let t_setup = Instant::now();
    let mut ph = Phases::start("sirt slab");
    let ns = b_host.len_of(Axis(0));
    let lin = op.operator(ns)?;
    let prepared = Prepared::new(&lin, &options.algorithm)?;
    op.queue().stream().synchronize()?;
    ph.mark("weights");
    let mut b = op.alloc_sinograms(ns)?;
    let mut x = op.alloc_volume(ns)?;
    ph.mark("allocation");
    {
        // The sinograms' staging buffer, then the volume's (the gradient's
        // buffer later).
        let staging = op.alloc_sinograms(ns)?;
        op.upload_into(b_host, &mut b, &staging)?;
        drop(staging);
        check_finite_on_device(&b, &b_host, "the sinogram data")?;
        match x0 {
            Some(x0) => {
                let staging = op.alloc_volume(ns)?;
                op.upload_into(x0, &mut x, &staging)?;
                check_finite_on_device(&x, &x0, "the initial volume")?;
            }
            None => x.fill(0.0)?,
        }
        op.queue().stream().synchronize()?;
        ph.mark("upload");
    }
    // ‖b‖² of the slab (the padding slices are zero), for the residuals
    // of the whole stack.
    let b_sq = b.norm_sq()?;
    ph.mark("sum of squares");
    let slab = Progress {
        slab: (index, progress.slab.1),
        ..*progress
    };
    let (report, ()) = std::thread::scope(|sc| {
        // The output's pages are mapped while the device iterates.
        let touched = sc.spawn(move || {
            prefault(out.view_mut());
            out
        });
        // The final iterate goes down beside the last forward projection
        // (the final residual's) when the residuals are tracked.
        let early = EarlyDownload::new(
            op.queue(),
            // A flat copy (one more volume than the slab plan counts):
            // without the memory for it the download waits for the loop.
            Box::new(|x| match op.flat_copy(x) {
                Ok(v) => Ok(Staged::Copy(v)),
                Err(CudaError::OutOfMemory { .. }) => Ok(Staged::Skip),
                Err(e) => Err(e),
            }),
            Box::new(move || {
                touched
                    .join()
                    .map_err(|_| CudaError::Parameter("a host thread panicked".into()))
            }),
            |a: &mut ArrayViewMut3<'_, f32>| a.as_slice_mut(),
        );
        let prepared = prepared.with_final_hook(&options.algorithm, options.iterations, &early);
        let r = run_resident(
            &prepared,
            op.queue(),
            b,
            x,
            options,
            &slab,
            stats,
            t_setup,
            |x| {
                let (out, done) = early.take_host()?;
                if done && prepared.hook_saw_final() {
                    return Ok(());
                }
                op.download_from(&x, &op.alloc_volume(ns)?, out)
            },
        );
        let t_free = Instant::now();
        drop(prepared);
        stats.free_s += t_free.elapsed().as_secs_f64();
        r
    })?;
    ph.mark("iterations, download and free");
    stats.slabs += 1;
    let b_norm = b_sq.sqrt();
    let sq = report
        .residuals
        .iter()
        .map(|r| {
            if b_norm > 0.0 {
                (r * b_norm).powi(2)
            } else {
                r * r
            }
        })
        .collect();
    Ok(SlabOut {
        sq,
        b_sq,
        stop: report.stop,
        iterations: report.iterations,
    })
}

/// SIRT on one GPU: see [`sirt_cuda_multi`].
#[allow(clippy::too_many_arguments)]
pub fn sirt_cuda(
    backend: &CudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    sirt_on(
        &[backend],
        geometry,
        grid,
        sinograms,
        initial,
        options,
        gpu,
        progress,
    )
}

/// SIRT, or SART / BLOCK-IT (`options.algorithm` is
/// [`Algorithm::Sirt`](tomors_core::iterative::Algorithm::Sirt) or
/// [`Algorithm::BlockSequential`](tomors_core::iterative::Algorithm::BlockSequential)),
/// of `sinograms` (`[slice][angle][bin]`) on the devices of `backend`,
/// resident on each device: slabs of slices are handed round-robin to the
/// devices, each slab is uploaded once, iterated by tomors-core's
/// [`solve`](tomors_core::iterative::solve) on [`CudaJoseph::operator`]
/// `options.iterations` times (or until its relative residual reaches
/// `options.tolerance`, or `progress` returns `false`, which stops every
/// slab) and downloaded once. Per SIRT iteration the device runs one back
/// projection, one update (`dv_update_t`, writing the volume and its
/// transposed copy), one forward projection and one residual kernel with
/// the partial sums of `‖b − A·x‖²` (the one value read back).
///
/// The result matches tomors-core's
/// [`reconstruct`](tomors_core::iterative::reconstruct) with the
/// [`JosephProjector`](tomors_core::iterative::JosephProjector) in f32 up to
/// rounding; the relaxation defaults to tomors-core's
/// [`default_relaxation_of`](tomors_core::iterative::default_relaxation_of)
/// (1 for row/column sums, power iteration on the first device otherwise). The
/// residual history is the relative residual of the whole stack (slabs that
/// stopped early count with their last residual).
///
/// Errors: those of [`check_sirt_inputs`] (ART and the block-parallel
/// method are not supported on the GPU), device memory too small for one
/// group of slices, driver, compilation and launch errors, divergence.
#[allow(clippy::too_many_arguments)]
pub fn sirt_cuda_multi(
    backend: &MultiCudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let devs: Vec<&CudaBackend> = backend.devices().iter().collect();
    sirt_on(
        &devs, geometry, grid, sinograms, initial, options, gpu, progress,
    )
}

#[allow(clippy::too_many_arguments)]
pub(super) fn sirt_on(
    devices: &[&CudaBackend],
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let mut ph = Phases::start("sirt");
    // Non-finite values are found on the device after each upload.
    check_sirt_shapes(geometry, grid, &sinograms, initial.as_ref(), options)?;
    ph.mark("input checks");
    if gpu.line
        && matches!(
            options.algorithm,
            tomors_core::iterative::Algorithm::Art { .. }
                | tomors_core::iterative::Algorithm::BlockParallel { .. }
        )
    {
        return Err(CoreError::Unsupported {
            backend: "cuda".into(),
            operation: "ART and the block-parallel method with the line-length projector \
                        (the GPU runs them with Joseph's)"
                .into(),
        }
        .into());
    }
    if gpu.voxel.is_some() && !matches!(options.algorithm, Algorithm::Sirt(_)) {
        return Err(CoreError::Unsupported {
            backend: "cuda".into(),
            operation: "SART, BLOCK-IT, ART and the block-parallel method with the voxel-driven \
                        back projection on the parallel GPU (SIRT only; use --projector joseph)"
                .into(),
        }
        .into());
    }
    if gpu.voxel.is_some() && gpu.line {
        return Err(CudaError::Parameter(
            "the voxel pair and the line-length projector exclude each other".into(),
        ));
    }
    if devices.is_empty() {
        return Err(CudaError::Parameter("no CUDA device selected".into()));
    }
    let (ns, na, nb) = sinograms.dim();
    let (ny, nx) = (grid.ny, grid.nx);
    let sg = match gpu.slice_group {
        0 => {
            if ns >= 8 {
                8
            } else {
                4
            }
        }
        s => s,
    };
    let t0 = Instant::now();
    // One projector per device (in parallel).
    let runs: Vec<Result<CudaJoseph>> = std::thread::scope(|s| {
        let hs: Vec<_> = devices
            .iter()
            .map(|d| {
                s.spawn(move || -> Result<CudaJoseph> {
                    let ap = if gpu.rays_per_thread == 0 {
                        AP
                    } else {
                        gpu.rays_per_thread
                    };
                    let quad = gpu.back_quad.unwrap_or(DEFAULT_QUAD);
                    let bsg = match gpu.back_slice_group {
                        0 if quad => DEFAULT_QUAD_BACK_GROUP.min(if ns >= 8 { 8 } else { sg }),
                        0 => DEFAULT_BACK_GROUP.min(if ns >= 16 { 16 } else { sg }),
                        b => b,
                    };
                    let mut j = CudaJoseph::tuned(
                        d,
                        geometry,
                        grid,
                        &JosephTuning {
                            slice_group: sg,
                            back_slice_group: bsg,
                            rays_per_thread: ap,
                            paired: gpu.paired.unwrap_or(DEFAULT_PAIR),
                            back_quad: quad,
                        },
                    )?;
                    if gpu.line {
                        j.set_line_model(true)?;
                    } else {
                        if gpu.sweep_forward {
                            j.set_sweep_forward(true)?;
                        }
                        if gpu.sweep_back {
                            j.set_sweep_back(true)?;
                        }
                        j.set_voxel_back(gpu.voxel)?;
                    }
                    Ok(j)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CudaError::Parameter("a device thread panicked".into()))
                })
            })
            .collect()
    });
    let runs: Vec<CudaJoseph> = runs.into_iter().collect::<Result<_>>()?;
    ph.mark("projectors (module load)");
    // The relaxation from one slice on the first device (every slice has
    // the same operator).
    let (options, lambda) = with_relaxation(&runs[0].operator(1)?, options)?;
    ph.mark("relaxation");
    // Slab size: what fits beside 512 MiB spare on the smallest device,
    // shared evenly between the devices.
    let unit = runs.iter().map(|r| r.pad).max().unwrap_or(sg);
    // The line sweeps' re-laid copies (volumes and sinograms), rounded up
    // to a group of 128 slices.
    let (sweep_per, sweep_fixed) = super::sweep::sweep_bytes(
        runs.iter().any(|r| r.sweep_forward()),
        runs.iter().any(|r| r.sweep_back()),
        (na, nb),
        (ny, nx),
    );
    // The voxel back projection's scratch (flat sinograms, entries, flat
    // volume), rounded up to 128 slices.
    let (voxel_per, voxel_fixed) = runs
        .iter()
        .map(|r| r.voxel_bytes())
        .fold((0, 0), |a, b| (a.0.max(b.0), a.1.max(b.1)));
    let per_group = unit * (4 * (2 * na * nb + 3 * ny * nx) + sweep_per + voxel_per);
    let mut fit = usize::MAX;
    for r in &runs {
        let (free, _) = r.context().mem_info()?;
        fit = fit
            .min(free.saturating_sub((512 << 20) + sweep_fixed + voxel_fixed) / per_group.max(1));
    }
    if fit == 0 {
        return Err(CudaError::OutOfMemory {
            what: format!("holding {unit} slices of the SIRT state"),
            bytes: per_group,
        });
    }
    let even = ns.div_ceil(devices.len()).div_ceil(unit) * unit;
    let mut slab = (fit * unit).min(even).min(MAX_SLAB_SLICES).max(unit);
    if gpu.slab > 0 {
        slab = slab.min(gpu.slab.div_ceil(unit) * unit).max(unit);
    }
    let n_slabs = ns.div_ceil(slab);
    let setup_s = t0.elapsed().as_secs_f64();

    let mut x = Array3::<f32>::zeros((ns, ny, nx));
    let stop = AtomicBool::new(false);
    let sh = Progress {
        slab: (0, n_slabs),
        callback: progress,
        stop: &stop,
    };
    type Job<'v> = (
        usize,
        ArrayView3<'v, f32>,
        Option<ArrayView3<'v, f32>>,
        ArrayViewMut3<'v, f32>,
    );
    let mut per_dev: Vec<Vec<Job<'_>>> = (0..runs.len()).map(|_| Vec::new()).collect();
    let x0_chunks: Vec<Option<ArrayView3<'_, f32>>> = match &initial {
        Some(x0) => x0.axis_chunks_iter(Axis(0), slab).map(Some).collect(),
        None => vec![None; n_slabs],
    };
    for (i, ((b, x0), o)) in sinograms
        .axis_chunks_iter(Axis(0), slab)
        .zip(x0_chunks)
        .zip(x.axis_chunks_iter_mut(Axis(0), slab))
        .enumerate()
    {
        per_dev[i % runs.len()].push((i, b, x0, o));
    }
    ph.mark("slab plan");
    let outs: Mutex<Vec<(usize, SlabOut)>> = Mutex::new(Vec::new());
    let total = Mutex::new(SirtStats::default());
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let hs: Vec<_> = runs
            .iter()
            .zip(per_dev)
            .map(|(run, jobs)| {
                let (sh, outs, total, options) = (&sh, &outs, &total, &options);
                s.spawn(move || -> Result<()> {
                    let mut st = SirtStats::default();
                    for (i, b, x0, o) in jobs {
                        let r = solve_slab(run, i, b, x0, o, options, sh, &mut st);
                        match r {
                            Ok(out) => outs
                                .lock()
                                .map_err(|_| CudaError::Parameter("poisoned lock".into()))?
                                .push((i, out)),
                            Err(e) => {
                                sh.stop.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    total
                        .lock()
                        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?
                        .add(&st);
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CudaError::Parameter("a device thread panicked".into()))
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<Vec<()>>>()?;
    let mut outs = outs
        .into_inner()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    outs.sort_by_key(|o| o.0);
    let mut stats = total
        .into_inner()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    stats.setup_s += setup_s;
    ph.mark("slabs");
    let t_free = Instant::now();
    drop(runs);
    stats.free_s += t_free.elapsed().as_secs_f64();
    ph.mark("free projectors");
    stats.total_s = t0.elapsed().as_secs_f64();
    // Iterations done (residuals are recorded only when tracked).
    let done = outs.iter().map(|o| o.1.iterations).max().unwrap_or(0);
    let tracked = outs.iter().map(|o| o.1.sq.len()).max().unwrap_or(0);
    let b_sq: f64 = outs.iter().map(|o| o.1.b_sq).sum();
    let b_norm = b_sq.sqrt();
    let residuals: Vec<f64> = (0..tracked)
        .map(|it| {
            let r2: f64 = outs
                .iter()
                .map(|o| o.1.sq.get(it).or(o.1.sq.last()).copied().unwrap_or(b_sq))
                .sum();
            if b_norm > 0.0 {
                r2.sqrt() / b_norm
            } else {
                r2.sqrt()
            }
        })
        .collect();
    let stop = if outs.iter().any(|o| o.1.stop == StopReason::Callback) {
        StopReason::Callback
    } else if outs.iter().all(|o| o.1.stop == StopReason::Tolerance) {
        StopReason::Tolerance
    } else {
        StopReason::Iterations
    };
    Ok((
        IterativeResult {
            x,
            residuals,
            iterations: done,
            relaxation: lambda,
            stop,
        },
        stats,
    ))
}
