//! SIRT resident on one device (cone beam).

use super::*;

pub(super) fn check_dim(
    what: &str,
    got: (usize, usize, usize),
    expected: (usize, usize, usize),
) -> Result<()> {
    if got != expected {
        return Err(CoreError::Shape(format!(
            "{what} is {}×{}×{}, expected {}×{}×{}",
            got.0, got.1, got.2, expected.0, expected.1, expected.2
        ))
        .into());
    }
    Ok(())
}

/// Bytes of device memory [`cone_sirt_cuda`] holds for `geometry` and
/// `volume`: three volumes (iterate, gradient, column weights) and three
/// sets of projections (data, residual, row weights).
pub fn cone_sirt_bytes(geometry: &ConeGeometry, volume: &ConeVolume) -> usize {
    let nvox = volume.len();
    let nproj = geometry.n_angles() * geometry.n_rows() * geometry.n_cols();
    4 * 3 * (nvox + nproj)
}

/// Bytes of device memory [`cone_sirt_cuda_with`] holds with the back
/// projection `back`: [`cone_sirt_bytes`], and for
/// [`ConeBackProjector::Voxel`] the stacked projection textures (about one
/// more set of projections) and the per-pixel weights.
pub fn cone_sirt_bytes_with(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    back: ConeBackProjector,
) -> usize {
    cone_sirt_bytes(geometry, volume)
        + match back {
            ConeBackProjector::Joseph => 0,
            ConeBackProjector::Voxel => voxel_bytes(geometry, volume),
        }
}

/// Checks that the state of [`cone_sirt_cuda`] ([`cone_sirt_bytes`]) fits
/// in the free memory of `backend`'s device, with 256 MiB to spare.
///
/// Errors: [`CudaError::OutOfMemory`] naming the sizes, driver errors.
pub fn cone_sirt_fits(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
) -> Result<()> {
    let ctx = backend.lock()?.ctx.clone();
    fits_on(&ctx, geometry, volume)
}

/// Checks the free memory for the SIRT state (the projector's own state,
/// such as the voxel back projection's textures, is already allocated).
pub(super) fn fits_on(
    ctx: &Arc<Context>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
) -> Result<()> {
    let need = cone_sirt_bytes(geometry, volume);
    let (free, _) = ctx.mem_info()?;
    if need + SPARE_BYTES > free {
        return Err(CudaError::OutOfMemory {
            what: format!(
                "holding the cone SIRT state of a {}×{}×{} volume and {}×{}×{} projections \
                 ({} MiB free on the device)",
                volume.nz,
                volume.ny,
                volume.nx,
                geometry.n_angles(),
                geometry.n_rows(),
                geometry.n_cols(),
                free >> 20
            ),
            bytes: need,
        });
    }
    Ok(())
}

/// Checks the inputs of [`cone_sirt_cuda`] (no GPU needed): the algorithm
/// is SIRT, at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box, projections that
/// fit the geometry, an initial volume that fits the volume, finite data,
/// sizes within the kernels' limits. Returns the weighting.
pub fn check_cone_sirt_inputs(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: &ArrayView3<'_, f32>,
    initial: Option<&ArrayView3<'_, f32>>,
    options: &IterativeOptions,
) -> Result<Weighting> {
    let weighting = check_options(options)?;
    check_dim(
        "the projections",
        projections.dim(),
        (geometry.n_angles(), geometry.n_rows(), geometry.n_cols()),
    )?;
    if let Some(x0) = initial {
        check_dim(
            "the initial volume",
            x0.dim(),
            (volume.nz, volume.ny, volume.nx),
        )?;
    }
    check_sizes(geometry, volume)?;
    find_non_finite(projections, "the projection data")?;
    if let Some(x0) = initial {
        find_non_finite(x0, "the initial volume")?;
    }
    Ok(weighting)
}

/// Cone-beam SIRT (`options.algorithm` must be
/// [`Algorithm::Sirt`](tomors_core::iterative::Algorithm::Sirt)) of
/// `projections` (`[angle][row][col]`) with Joseph's projector, the whole
/// iteration resident on `backend`'s device: the projections are uploaded
/// once, the volume is iterated `options.iterations` times (or until the
/// relative residual `‖b − A·x‖/‖b‖` reaches `options.tolerance`, or
/// `progress` returns `false`) and downloaded once. `initial` is the
/// starting volume `[z][y][x]` (zeros if `None`; the constraint is applied
/// to it). The result's `x` is the `[z][y][x]` volume.
///
/// The result matches tomors-core's
/// [`reconstruct_cone`](tomors_core::iterative::reconstruct_cone) with the
/// [`ConeJosephProjector`] in f32 up to rounding; the relaxation defaults to
/// 1 for row/column sums and to `1/ρ(T·Aᵀ·M·A)` (power iteration)
/// otherwise. `progress` sees every iteration (`slab` is always `(0, 1)`).
///
/// Errors: those of [`check_cone_sirt_inputs`], the source orbit through
/// the volume, device memory too small for the state
/// ([`cone_sirt_bytes`]), driver, compilation and launch errors,
/// divergence.
pub fn cone_sirt_cuda(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    cone_sirt_cuda_with(
        backend,
        geometry,
        volume,
        projections,
        initial,
        options,
        ConeBackProjector::Joseph,
        progress,
    )
}

/// [`cone_sirt_cuda`] with the back projection `back`:
/// [`ConeBackProjector::Joseph`] (the matched pair, as
/// [`cone_sirt_cuda`]) or [`ConeBackProjector::Voxel`] (the unmatched
/// pair of tomors-core's
/// [`ConeVoxelProjector`](tomors_core::iterative::ConeVoxelProjector),
/// whose f32 [`reconstruct_cone`](tomors_core::iterative::reconstruct_cone)
/// it matches to the texture interpolation's rounding; the column sums of
/// row/column-sum SIRT are `B·1`). Device memory:
/// [`cone_sirt_bytes_with`].
///
/// Errors: those of [`cone_sirt_cuda`] and of
/// [`CudaConeJoseph::with_back`].
#[allow(clippy::too_many_arguments)]
pub fn cone_sirt_cuda_with(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    back: ConeBackProjector,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let weighting =
        check_cone_sirt_inputs(geometry, volume, &projections, initial.as_ref(), options)?;
    let t0 = Instant::now();
    let op = CudaConeJoseph::with_back(backend, geometry, volume, back)?;
    fits_on(&op.ctx, geometry, volume)?;
    let mut stats = SirtStats {
        slabs: 1,
        ..SirtStats::default()
    };
    let (m, t) = op.weights(weighting)?;
    let lambda = match options.relaxation {
        Some(l) => l,
        None if weighting == Weighting::RowColumnSums => 1.0,
        None => {
            let rho = op.power_iteration(m.as_ref(), t.as_ref(), POWER_ITERATIONS)?;
            if rho <= 0.0 {
                return Err(CoreError::Data(
                    "the projector is zero on this volume (no ray meets it)".into(),
                )
                .into());
            }
            1.0 / rho
        }
    };
    let b_sq: f64 = {
        use rayon::prelude::*;
        projections
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
    let b = op.upload_projections(projections)?;
    let mut r = op.alloc_projections()?;
    let x = match initial {
        Some(x0) => {
            let c = options.constraint;
            op.upload_volume(x0.mapv(|v| clamp(&c, v)).view())?
        }
        None => {
            let x = op.alloc_volume()?;
            op.fill(&x, clamp(&options.constraint, 0.0))?;
            x
        }
    };
    let g = op.alloc_volume()?;
    op.stream.synchronize()?;
    stats.setup_s = t0.elapsed().as_secs_f64();

    let ev: Vec<Event> = (0..5).map(|_| Event::new(&op.ctx)).collect::<Result<_>>()?;
    let t_loop = Instant::now();
    // r = A x, then r = M (b − A x).
    ev[0].record(&op.stream)?;
    op.forward_dev(&x, &mut r)?;
    ev[1].record(&op.stream)?;
    op.residual(&b, &r, m.as_ref())?;
    ev[1].synchronize()?;
    stats.forward_s += ev[0].elapsed_ms(&ev[1])? as f64 * 1e-3;
    stats.forward_count += 1;
    let lf = lambda as f32;
    let mut residuals = Vec::with_capacity(options.iterations);
    let mut stop = StopReason::Iterations;
    for it in 1..=options.iterations {
        ev[0].record(&op.stream)?;
        op.back_impl(&r, &g)?;
        ev[1].record(&op.stream)?;
        op.update(&x, &g, t.as_ref(), lf, &options.constraint)?;
        ev[2].record(&op.stream)?;
        op.forward_dev(&x, &mut r)?;
        ev[3].record(&op.stream)?;
        op.residual(&b, &r, m.as_ref())?;
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
        residuals.push(res);
        let info = GpuIteration {
            slab: (0, 1),
            iteration: it,
            residual: res,
        };
        if !progress(&info) {
            stop = StopReason::Callback;
            break;
        }
        if let Some(tol) = options.tolerance {
            if res <= tol {
                stop = StopReason::Tolerance;
                break;
            }
        }
    }
    stats.loop_s = t_loop.elapsed().as_secs_f64();
    let t_down = Instant::now();
    let xh = op.download(&x)?;
    stats.download_s = t_down.elapsed().as_secs_f64();
    let t_free = Instant::now();
    drop((b, r, x, g, ev, m, t, op));
    stats.free_s = t_free.elapsed().as_secs_f64();
    stats.total_s = t0.elapsed().as_secs_f64();
    Ok((
        IterativeResult {
            x: xh,
            iterations: residuals.len(),
            residuals,
            relaxation: lambda,
            stop,
        },
        stats,
    ))
}
