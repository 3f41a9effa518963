//! Cone beam over ranks: the volume split into z-slabs.
//!
//! - Iterative methods (the thesis' domain decomposition): the core's
//!   generic solver on [`DistConeOperator`] and its [`SlabVector`]s
//!   ([`crate::dist_op`]): forward projections summed over the ranks,
//!   back projections local, reductions over the whole volume.
//! - FDK: each rank reads the detector rows its slab's voxels project to,
//!   filters them and back-projects into its slab.

use std::ops::Range;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use ndarray::{Array3, ArrayView3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::fbp::check_finite;
use tomors_core::iterative::{
    solve, Algorithm, IterationState, IterativeOptions, IterativeResult, ProjectorKind,
};
use tomors_core::linalg::LinearOperator;
use tomors_io::VolumeMeta;

use tomors_cuda::ConeBackProjector;

use crate::comm::Comm;
use crate::decomp::{log_sums, rank_slab, slab_result};
pub use crate::dist_op::{DistConeOperator, SlabVector};
pub use crate::gpu_op::{reconstruct_distributed_gpu, GpuDistConeOperator, GpuSlabVector};
use crate::job::{bar, Method, ReconJob};
use crate::output::DistOutput;
use crate::split::split_rows;
use crate::status::{agree, injected_failure, Failure};

/// Cone-beam iterative reconstruction of `projections` (`[angle][row][col]`,
/// the same on every rank) with the volume split into z-slabs over the
/// ranks of `comm`. Returns this rank's slab range and its part of the
/// result (`x` is the slab `[z][y][x]`). Collective. Ranks with no slice
/// (more ranks than slices) are an error.
///
/// The result equals the single-process one up to the order of summation
/// of each ray's slab contributions (see `docs/distributed.md`).
pub fn reconstruct_distributed(
    comm: &dyn Comm,
    kind: ProjectorKind,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationState<'_, SlabVector<'_>>) -> bool,
) -> Result<(Range<usize>, IterativeResult<f32>)> {
    let z = rank_slab(comm, volume.nz)?;
    let op = DistConeOperator::new(comm, kind, geometry, volume, z.clone())?;
    let (na, nr, nc) = projections.dim();
    if (na, nr, nc) != (geometry.n_angles(), geometry.n_rows(), geometry.n_cols()) {
        bail!(
            "projections are {na} × {nr} × {nc}, the geometry has {} angles of {} × {}",
            geometry.n_angles(),
            geometry.n_rows(),
            geometry.n_cols()
        );
    }
    let b = projections
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((1, na, nr * nc))?;
    let mut x = op.domain_zeros()?;
    let t = Instant::now();
    let report = solve(&op, &b, &mut x, options, callback)?;
    log_sums(comm, t, op.comm_stats(), "", "");
    let slab = x.x.into_shape_with_order((z.len(), volume.ny, volume.nx))?;
    Ok((z, slab_result(report, slab)))
}

/// The sanity of a distributed cone iterative method, before any work.
fn check_method(options: &IterativeOptions) -> Result<()> {
    if matches!(
        options.algorithm,
        Algorithm::Art { .. } | Algorithm::BlockParallel { .. }
    ) {
        bail!("art and block-parallel update ray by ray and do not decompose over ranks; use sirt, landweber, cimmino, sart or block-it");
    }
    Ok(())
}

fn cone_meta(job: &ReconJob, g: &ConeGeometry, v: &ConeVolume, what: &str) -> VolumeMeta {
    job.with_provenance(
        VolumeMeta::default()
            .text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")))
            .text("input", &job.source.path().display().to_string())
            .text("geometry", "cone")
            .float("sod", g.sod())
            .float("odd", g.odd())
            .int("n_angles", g.n_angles() as i64)
            .float("voxel_size", f64::from(v.voxel_size))
            .text("method", what)
            .text("layout", "[z][y][x]"),
    )
}

fn say_wrote(comm: &dyn Comm, job: &ReconJob, v: &ConeVolume, t: Instant) {
    if comm.rank() == 0 {
        tracing::info!(
            "reconstructed on {} ranks in {:.2} s",
            comm.size(),
            t.elapsed().as_secs_f64()
        );
        println!(
            "wrote {} ([z][y][x] = {:?}, voxel size {})",
            job.out.display(),
            (v.nz, v.ny, v.nx),
            v.voxel_size
        );
    }
}

/// Distributed cone-beam iterative reconstruction ([`Method::ConeIterative`]).
pub(crate) fn run_iterative(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::ConeIterative {
        geometry,
        volume,
        options,
        projector,
        gpu,
    } = &job.method
    else {
        unreachable!("cone iterative jobs only")
    };
    let rank = comm.rank();
    let input = job.source.path().display().to_string();
    let setup = (|| -> Result<(Array3<f32>, Option<usize>)> {
        check_method(options)?;
        let device = match gpu {
            Some(choose) => choose(comm.local_rank())?,
            None => None,
        };
        if volume.nz < comm.size() {
            bail!(
                "{} ranks for {} slices: at most one rank per slice",
                comm.size(),
                volume.nz
            );
        }
        let n_rows = job.source.shape()[1];
        let p = job.source.read_rows(0..n_rows, &job.preprocess)?;
        check_finite(p.view(), "the projections").context(input.clone())?;
        injected_failure(rank)?;
        Ok((p, device))
    })();
    let (projections, device) = agree(comm, setup)?;
    if rank == 0 {
        tracing::info!(
            "{:?} with the {:?} projector, {} iterations on {} ranks: {} onto {}×{}×{} voxels, z-slabs of {} slices (±1), {}",
            options.algorithm,
            projector,
            options.iterations,
            comm.size(),
            input,
            volume.nx,
            volume.ny,
            volume.nz,
            volume.nz / comm.size(),
            match device {
                Some(d) => format!("rank 0 on GPU {d}"),
                None => "on the CPU".to_string(),
            }
        );
    }
    let bar = bar(
        comm,
        job.quiet,
        options.iterations as u64,
        "iterating",
        "iterations",
    );
    let t = Instant::now();
    let step = |iteration: usize, residual: Option<f64>| {
        bar.set_position(iteration as u64);
        if let Some(r) = residual {
            tracing::debug!("iteration {iteration}: relative residual {r:.3e}");
        }
        true
    };
    let run = match device {
        Some(d) => reconstruct_distributed_gpu(
            comm,
            d,
            match projector {
                ProjectorKind::Voxel => ConeBackProjector::Voxel,
                _ => ConeBackProjector::Joseph,
            },
            geometry,
            volume,
            projections.view(),
            options,
            &mut |info| step(info.iteration, info.residual),
        ),
        None => reconstruct_distributed(
            comm,
            *projector,
            geometry,
            volume,
            projections.view(),
            options,
            &mut |info| step(info.iteration, info.residual),
        ),
    };
    // The ranks run the same collectives in the same order; an error inside
    // one rank's iteration (after the checks above) may leave the others
    // waiting in a sum, so it ends the whole job at once. No output exists
    // yet, so nothing is left behind.
    let (z, result) = match run {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: rank {rank}: {input}: {e:#}");
            comm.abort(1)
        }
    };
    bar.finish_and_clear();
    if rank == 0 {
        tracing::info!(
            "{} iterations (λ = {:.4e}, stopped: {:?}), final relative residual {}",
            result.iterations,
            result.relaxation,
            result.stop,
            result
                .residuals
                .last()
                .map_or("–".to_string(), |r| format!("{r:.3e}"))
        );
    }
    let what = format!(
        "{:?}, {:?} projector, {} ranks{}",
        options.algorithm,
        projector,
        comm.size(),
        if device.is_some() { " (GPUs)" } else { "" }
    );
    let meta = cone_meta(&job, geometry, volume, &what);
    let shape = [volume.nz, volume.ny, volume.nx];
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    let local = out.write(comm, z.start, result.x.view());
    out.finish(comm, local)?;
    say_wrote(comm, &job, volume, t);
    Ok(())
}

/// Detector rows the voxels of slices `z` need (moved to
/// [`tomors_core::cone::rows_for_slab`], which several GPUs of one host use
/// too).
pub use tomors_core::cone::rows_for_slab;

/// Distributed FDK ([`Method::Fdk`]).
pub(crate) fn run_fdk(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::Fdk {
        geometry,
        volume,
        options,
        backend,
    } = &job.method
    else {
        unreachable!("FDK jobs only")
    };
    let rank = comm.rank();
    let input = job.source.path().display().to_string();
    let z = split_rows(&(0..volume.nz), comm.size(), rank);
    let setup = (|| -> Result<_> {
        if volume.nz < comm.size() {
            bail!(
                "{} ranks for {} slices: at most one rank per slice",
                comm.size(),
                volume.nz
            );
        }
        let backend = backend(comm.local_rank())?;
        Ok(backend)
    })();
    let backend = agree(comm, setup)?;
    let rows = rows_for_slab(geometry, volume, &z);
    if rank == 0 {
        tracing::info!(
            "FDK of {} onto {}×{}×{} voxels on {} ranks (z-slabs of {} slices ±1; rank 0 reads detector rows {}..{} of {}) on {}",
            input,
            volume.nx,
            volume.ny,
            volume.nz,
            comm.size(),
            volume.nz / comm.size(),
            rows.start,
            rows.end,
            geometry.n_rows(),
            backend.name()
        );
    }
    // Every rank says where it runs (ranks other than 0 log it under
    // TOMORS_LOG=info).
    tracing::info!(
        "rank {rank}: slices {z:?} from detector rows {rows:?} on {}",
        backend.name()
    );
    let what = format!("FDK {:?}, {} ranks", options.filter, comm.size());
    let meta = cone_meta(&job, geometry, volume, &what);
    let shape = [volume.nz, volume.ny, volume.nx];
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    let bar = bar(comm, job.quiet, 1, "FDK", "slabs of rank 0");
    let t = Instant::now();
    let local = (|| -> Result<()> {
        let p = job.source.read_rows(rows.clone(), &job.preprocess)?;
        check_finite(p.view(), "the projections").map_err(|e| anyhow!("{input}: {e}"))?;
        injected_failure(rank)?;
        // The rank's slab from its rows: the whole FDK of the backend on
        // them (on a GPU, weighting, filtering and back projection on the
        // device with the texture coordinates of the whole detector).
        let mut slab = Array3::<f32>::zeros((z.len(), volume.ny, volume.nx));
        backend
            .fdk_slab_into(
                p.view(),
                geometry,
                rows.clone(),
                volume,
                z.clone(),
                options,
                slab.view_mut(),
            )
            .map_err(|e| anyhow!("{input}: {e}"))?;
        drop(p);
        out.write(comm, z.start, slab.view())?;
        bar.inc(1);
        Ok(())
    })();
    out.finish(comm, local)?;
    bar.finish_and_clear();
    say_wrote(comm, &job, volume, t);
    Ok(())
}
