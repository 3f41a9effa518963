//! SIRT resident on one device (cone beam).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use tomors_core::iterative::{IterativeOptions, IterativeResult, Weighting};
use tomors_core::linalg::Vector;

use super::*;
use crate::iterative::early::{EarlyDownload, Staged};
use crate::iterative::run::{run_resident, with_relaxation, Prepared, Progress};
use crate::iterative::{
    check_finite, check_finite_on_device, check_options, host_zeros, GpuIteration, Phases,
    SirtStats,
};

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
/// is SIRT or block-sequential, at least one iteration, a positive finite relaxation, a
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
    let weighting = check_cone_sirt_shapes(geometry, volume, projections, initial, options)?;
    check_finite(projections, "the projection data", initial)?;
    Ok(weighting)
}

/// [`check_cone_sirt_inputs`] without the scan for non-finite values (the
/// run checks its uploads on the device: [`check_finite_on_device`]).
fn check_cone_sirt_shapes(
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
    Ok(weighting)
}

/// Cone-beam SIRT (`options.algorithm` is
/// [`Algorithm::Sirt`](tomors_core::iterative::Algorithm::Sirt), or
/// block-sequential with the Joseph pair) of
/// `projections` (`[angle][row][col]`) with Joseph's projector, the whole
/// iteration resident on `backend`'s device: the projections are uploaded
/// once, tomors-core's [`solve`](tomors_core::iterative::solve) iterates
/// on [`CudaConeJoseph::operator`] `options.iterations` times (or until the
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
    let gpu = ConeGpuOptions {
        back,
        ..ConeGpuOptions::default()
    };
    cone_sirt_cuda_opts(
        backend,
        geometry,
        volume,
        projections,
        initial,
        options,
        &gpu,
        progress,
    )
}

/// Device options of [`cone_sirt_cuda_opts`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ConeGpuOptions {
    /// The back projection ([`ConeBackProjector`]).
    pub back: ConeBackProjector,
    /// The deterministic back projection of the Joseph pair
    /// ([`CudaConeJoseph::set_deterministic`]: the same bits on every run;
    /// slower). The default is the faster float atomics.
    pub deterministic: bool,
    /// Keeps the unfolded kernels and the direct weights where the geometry
    /// would allow the folded kernels ([`CudaConeJoseph::set_fold`]) and
    /// the quarter-turn weights ([`CudaConeJoseph::set_rotation`]): for
    /// comparisons with the z-slabs of several devices, which use neither.
    /// The default (`false`) uses both where it can.
    pub unfolded: bool,
    /// Half-precision texels in the voxel pair's folded back projection
    /// ([`CudaConeJoseph::set_half`]); off by default.
    pub half: bool,
}

/// [`cone_sirt_cuda_with`] with the device options `gpu` (back
/// projection, deterministic mode).
///
/// Errors: those of [`cone_sirt_cuda_with`], and of
/// [`CudaConeJoseph::set_deterministic`].
#[allow(clippy::too_many_arguments)]
pub fn cone_sirt_cuda_opts(
    backend: &CudaBackend,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    initial: Option<ArrayView3<'_, f32>>,
    options: &IterativeOptions,
    gpu: &ConeGpuOptions,
    progress: &(dyn Fn(&GpuIteration) -> bool + Sync),
) -> Result<(IterativeResult<f32>, SirtStats)> {
    let mut ph = Phases::start("cone sirt");
    // The output's pages are mapped by a thread of its own (plain writes,
    // not the rayon pool the uploads use) from the start.
    let dim = (volume.nz, volume.ny, volume.nx);
    let map_pages = move || {
        std::thread::spawn(move || {
            let mut host = host_zeros(dim);
            host.iter_mut().for_each(|v| *v = 0.0);
            host
        })
    };
    let touched = map_pages();
    // Non-finite values are found on the device after the uploads.
    check_cone_sirt_shapes(geometry, volume, &projections, initial.as_ref(), options)?;
    ph.mark("input checks");
    let t0 = Instant::now();
    let mut op = CudaConeJoseph::with_back(backend, geometry, volume, gpu.back)?;
    if gpu.deterministic {
        op.set_deterministic(true)?;
    }
    if gpu.unfolded {
        op.set_fold(false)?;
        op.set_rotation(false);
    }
    if gpu.half {
        op.set_half(true)?;
    }
    ph.mark("projector (module load, textures)");
    fits_on(op.context(), geometry, volume)?;
    let mut stats = SirtStats {
        slabs: 1,
        ..SirtStats::default()
    };
    let lin = op.operator();
    let (options, _) = with_relaxation(&lin, options)?;
    ph.mark("relaxation");
    // The data go up on a helper thread (and a stream of their own) while
    // this thread computes the weights.
    let (b, prepared) = op.upload_projections_during(projections, || {
        let mut w = Phases::start("cone sirt weights");
        let p = Prepared::new(&lin, &options.algorithm);
        w.mark("queued");
        let s = op.stream().synchronize();
        w.mark("done on the device");
        s.map(|()| p)
    })?;
    let prepared = prepared??;
    op.stream().synchronize()?;
    op.release_deferred()?;
    ph.mark("weights and upload");
    // The final iterate goes down beside the last forward projection (the
    // final residual's) when the residuals are tracked.
    let early = EarlyDownload::new(
        op.queue(),
        Box::new(|_| Ok(Staged::Direct)),
        Box::new(move || {
            touched
                .join()
                .map_err(|_| CudaError::Parameter("a host thread panicked".into()))
        }),
        |a: &mut Array3<f32>| a.as_slice_mut(),
    );
    let prepared = prepared.with_final_hook(&options.algorithm, options.iterations, &early);
    check_finite_on_device(&b, &projections, "the projection data")?;
    let x = match initial {
        Some(x0) => {
            let x = op.upload_volume(x0)?;
            check_finite_on_device(&x, &x0, "the initial volume")?;
            x
        }
        None => {
            let mut x = op.alloc_volume()?;
            x.fill(0.0)?;
            x
        }
    };
    let stop = AtomicBool::new(false);
    let progress = Progress {
        slab: (0, 1),
        callback: progress,
        stop: &stop,
    };
    let (report, xh) = run_resident(
        &prepared,
        op.queue(),
        b,
        x,
        &options,
        &progress,
        &mut stats,
        t0,
        |x| {
            let (mut host, done) = early.take_host()?;
            if !(done && prepared.hook_saw_final()) {
                x.download_flat_into(&mut host)?;
            }
            Ok(host)
        },
    )?;
    ph.mark("iterations and download");
    let t_free = Instant::now();
    drop(prepared);
    drop(early);
    drop(op);
    stats.free_s = t_free.elapsed().as_secs_f64();
    ph.mark("free");
    stats.total_s = t0.elapsed().as_secs_f64();
    Ok((IterativeResult::from_report(xh, report), stats))
}
