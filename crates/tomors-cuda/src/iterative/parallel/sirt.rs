//! SIRT resident on one or several devices (parallel beam).

use super::*;

/// Device options of [`sirt_cuda`].
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuSirtOptions {
    /// Slices per slab (0: as many as fit in device memory, shared evenly
    /// between the devices).
    pub slab: usize,
    /// Slices per thread: 4 or 8 (0: 8 for stacks of 8 slices or more, else 4).
    pub slice_group: usize,
    /// Projections per forward-projection thread, 1 to 4 (0: the default, 4).
    pub rays_per_thread: usize,
    /// Two threads per forward-projection ray (`None`: the default).
    pub paired: Option<bool>,
    /// Slices per back-projection thread, 4, 8 or 16 (0: the default).
    pub back_slice_group: usize,
}

/// Checks the inputs of [`sirt_cuda`] (no GPU needed): the algorithm is
/// SIRT, at least one iteration, a positive finite relaxation, a
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
    find_non_finite(sinograms, "the sinogram data")?;
    if let Some(x0) = initial {
        find_non_finite(x0, "the initial volume")?;
    }
    Ok(weighting)
}

/// Per-slab outcome.
pub(super) struct SlabOut {
    sq: Vec<f64>,
    b_sq: f64,
    stop: StopReason,
}

pub(super) struct Shared<'a> {
    lambda: f64,
    options: &'a IterativeOptions,
    progress: &'a (dyn Fn(&GpuIteration) -> bool + Sync),
    stop: AtomicBool,
    slabs: usize,
}

/// One device's state for a run: projector and weights.
pub(super) struct DeviceRun {
    op: CudaJoseph,
    m: Option<DeviceBuffer>,
    t: Option<DeviceBuffer>,
}

/// Runs SIRT on one slab (host views of its sinograms, initial volume and
/// output), resident on the device.
pub(super) fn solve_slab(
    dev: &DeviceRun,
    index: usize,
    b_host: ArrayView3<'_, f32>,
    x0: Option<ArrayView3<'_, f32>>,
    out: ArrayViewMut3<'_, f32>,
    sh: &Shared<'_>,
    stats: &mut SirtStats,
) -> Result<SlabOut> {
    let op = &dev.op;
    let t_setup = Instant::now();
    let ns = b_host.len_of(Axis(0));
    let b_sq: f64 = {
        use rayon::prelude::*;
        b_host
            .outer_iter()
            .into_par_iter()
            .map(|s| s.iter().map(|&v| v as f64 * v as f64).sum::<f64>())
            .sum()
    };
    let b_norm = b_sq.sqrt();
    let rel = |r2: f64| {
        if b_norm > 0.0 {
            r2.sqrt() / b_norm
        } else {
            r2.sqrt()
        }
    };
    let b = op.alloc_sinograms(ns)?;
    let r = op.alloc_sinograms(ns)?;
    let x = op.alloc_volume(ns)?;
    let mut xt = op.alloc_volume(ns)?;
    let g = op.alloc_volume(ns)?;
    op.upload_into(b_host, &b, &r)?;
    match x0 {
        Some(x0) => {
            let c = sh.options.constraint;
            let clamped = x0.mapv(|v| clamp(&c, v));
            op.upload_into(clamped.view(), &x, &g)?;
        }
        None => op.fill(&x, clamp(&sh.options.constraint, 0.0))?,
    }
    op.transpose_dev(&x, &mut xt)?;
    op.stream.synchronize()?;
    stats.setup_s += t_setup.elapsed().as_secs_f64();

    let ctx = &op.ctx;
    let ev: Vec<Event> = (0..5).map(|_| Event::new(ctx)).collect::<Result<_>>()?;
    let t_loop = Instant::now();
    // r = A x, then r = M (b − A x).
    ev[0].record(&op.stream)?;
    op.forward_impl(&x, &xt, &r, false)?;
    ev[1].record(&op.stream)?;
    op.residual(&b, &r, dev.m.as_ref())?;
    ev[1].synchronize()?;
    stats.forward_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
    stats.forward_count += 1;
    let lambda = sh.lambda as f32;
    let mut sq = Vec::with_capacity(sh.options.iterations);
    let mut stop = StopReason::Iterations;
    for it in 1..=sh.options.iterations {
        if sh.stop.load(Ordering::Relaxed) {
            stop = StopReason::Callback;
            break;
        }
        ev[0].record(&op.stream)?;
        op.back_impl(&r, &g)?;
        ev[1].record(&op.stream)?;
        op.update(&x, &xt, &g, dev.t.as_ref(), lambda, &sh.options.constraint)?;
        ev[2].record(&op.stream)?;
        op.forward_impl(&x, &xt, &r, false)?;
        ev[3].record(&op.stream)?;
        op.residual(&b, &r, dev.m.as_ref())?;
        ev[4].record(&op.stream)?;
        let r2 = op.partial_sum()?;
        stats.back_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
        stats.elementwise_s +=
            (ev[1].elapsed_ms(&ev[2])? + ev[3].elapsed_ms(&ev[4])?) as f64 * 1e-3;
        stats.forward_s += ev[2].elapsed_ms(&ev[3])? as f64 * 1e-3;
        stats.forward_count += 1;
        stats.iterations += 1;
        let res = rel(r2);
        if !res.is_finite() {
            return Err(CoreError::Data(format!(
                "the iteration diverged at iteration {it} (relaxation too large?)"
            ))
            .into());
        }
        sq.push(r2);
        let info = GpuIteration {
            slab: (index, sh.slabs),
            iteration: it,
            residual: res,
        };
        if !(sh.progress)(&info) {
            sh.stop.store(true, Ordering::Relaxed);
            stop = StopReason::Callback;
            break;
        }
        if let Some(tol) = sh.options.tolerance {
            if res <= tol {
                stop = StopReason::Tolerance;
                break;
            }
        }
    }
    stats.loop_s += t_loop.elapsed().as_secs_f64();
    let t_down = Instant::now();
    op.download_from(&x, &g, out)?;
    stats.download_s += t_down.elapsed().as_secs_f64();
    let t_free = Instant::now();
    drop((b, r, x, xt, g, ev));
    stats.free_s += t_free.elapsed().as_secs_f64();
    stats.slabs += 1;
    Ok(SlabOut { sq, b_sq, stop })
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

/// SIRT (`options.algorithm` must be [`Algorithm::Sirt`](tomors_core::iterative::Algorithm::Sirt)) of `sinograms`
/// (`[slice][angle][bin]`) on the devices of `backend`, resident on each
/// device: slabs of slices are handed round-robin to the devices, each slab
/// is uploaded once, iterated `options.iterations` times (or until its
/// relative residual reaches `options.tolerance`, or `progress` returns
/// `false`, which stops every slab) and downloaded once.
///
/// The result matches tomors-core's
/// [`reconstruct`](tomors_core::iterative::reconstruct) with the
/// [`JosephProjector`](tomors_core::iterative::JosephProjector) in f32 up to
/// rounding; the relaxation defaults to 1 for row/column sums and to
/// `1/ρ(T·Aᵀ·M·A)` (power iteration on the first device) otherwise. The
/// residual history is the relative residual of the whole stack (slabs that
/// stopped early count with their last residual).
///
/// Errors: those of [`check_sirt_inputs`], device memory too small for one
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
    let weighting = check_sirt_inputs(geometry, grid, &sinograms, initial.as_ref(), options)?;
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
    // One projector and the weights per device (in parallel).
    let runs: Vec<Result<DeviceRun>> = std::thread::scope(|s| {
        let hs: Vec<_> = devices
            .iter()
            .map(|d| {
                s.spawn(move || -> Result<DeviceRun> {
                    let ap = if gpu.rays_per_thread == 0 {
                        AP
                    } else {
                        gpu.rays_per_thread
                    };
                    let bsg = match gpu.back_slice_group {
                        0 => DEFAULT_BACK_GROUP.min(if ns >= 16 { 16 } else { sg }),
                        b => b,
                    };
                    let op = CudaJoseph::tuned(
                        d,
                        geometry,
                        grid,
                        &JosephTuning {
                            slice_group: sg,
                            back_slice_group: bsg,
                            rays_per_thread: ap,
                            paired: gpu.paired.unwrap_or(DEFAULT_PAIR),
                        },
                    )?;
                    let (m, t) = op.weights(weighting)?;
                    Ok(DeviceRun { op, m, t })
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
    let runs: Vec<DeviceRun> = runs.into_iter().collect::<Result<_>>()?;
    let lambda = match options.relaxation {
        Some(l) => l,
        None if weighting == Weighting::RowColumnSums => 1.0,
        None => {
            let r = &runs[0];
            let rho =
                r.op.power_iteration(r.m.as_ref(), r.t.as_ref(), POWER_ITERATIONS)?;
            if rho <= 0.0 {
                return Err(CoreError::Data(
                    "the projector is zero on this grid (no ray meets the image)".into(),
                )
                .into());
            }
            1.0 / rho
        }
    };
    // Slab size: what fits beside 512 MiB spare on the smallest device,
    // shared evenly between the devices.
    let unit = runs.iter().map(|r| r.op.pad).max().unwrap_or(sg);
    let per_group = unit * 4 * (2 * na * nb + 3 * ny * nx);
    let mut fit = usize::MAX;
    for r in &runs {
        let (free, _) = r.op.ctx.mem_info()?;
        fit = fit.min(free.saturating_sub(512 << 20) / per_group.max(1));
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
    let sh = Shared {
        lambda,
        options,
        progress,
        stop: AtomicBool::new(false),
        slabs: n_slabs,
    };
    type Job<'v> = (
        usize,
        ArrayView3<'v, f32>,
        Option<ArrayView3<'v, f32>>,
        ArrayViewMut3<'v, f32>,
    );
    let mut per_dev: Vec<Vec<Job<'_>>> = (0..devices.len()).map(|_| Vec::new()).collect();
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
        per_dev[i % devices.len()].push((i, b, x0, o));
    }
    let outs: Mutex<Vec<(usize, SlabOut)>> = Mutex::new(Vec::new());
    let total = Mutex::new(SirtStats::default());
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let hs: Vec<_> = runs
            .iter()
            .zip(per_dev)
            .map(|(run, jobs)| {
                let (sh, outs, total) = (&sh, &outs, &total);
                s.spawn(move || -> Result<()> {
                    let mut st = SirtStats::default();
                    for (i, b, x0, o) in jobs {
                        let r = solve_slab(run, i, b, x0, o, sh, &mut st);
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
    let t_free = Instant::now();
    drop(runs);
    stats.free_s += t_free.elapsed().as_secs_f64();
    stats.total_s = t0.elapsed().as_secs_f64();
    let done = outs.iter().map(|o| o.1.sq.len()).max().unwrap_or(0);
    let b_sq: f64 = outs.iter().map(|o| o.1.b_sq).sum();
    let b_norm = b_sq.sqrt();
    let residuals: Vec<f64> = (0..done)
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
