//! Slab decomposition of parallel-beam jobs: the detector rows (slices)
//! are split over the ranks ([`split_rows`]); each rank reads only its
//! rows, preprocesses and reconstructs them and writes its slices into the
//! shared output. Parallel-beam slices are independent, so the ranks do
//! not talk while they compute, and every slice is the single-process
//! slice bit for bit.

use std::ops::Range;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use ndarray::Axis;
use tomors_core::fbp::{check_finite, fbp_sinograms, projections_to_sinograms};
use tomors_core::iterative::{projector, reconstruct};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::stream::{slab_plan, MemoryModel};
use tomors_io::VolumeMeta;

use crate::comm::{broadcast_f32, Comm};
use crate::job::{bar, Center, Method, ReconJob};
use crate::output::DistOutput;
use crate::split::split_rows;
use crate::status::{agree, injected_failure, Failure};

/// The centre: given, the detector's, or found by rank 0 and broadcast.
fn resolve_center(
    comm: &dyn Comm,
    job: &ReconJob,
    center: &Center,
) -> Result<Option<f32>, Failure> {
    Ok(match center {
        Center::Default => None,
        Center::At(c) => Some(*c),
        Center::Auto(find) => {
            let found = if comm.rank() == 0 {
                find(job.source.as_ref(), &job.angles, &job.preprocess)
            } else {
                Ok(0.0)
            };
            let c = agree(comm, found)?;
            let c = broadcast_f32(comm, 0, c);
            if comm.rank() == 0 {
                tracing::info!("rotation centre {c:.2} (found on rank 0, sent to every rank)");
            }
            Some(c)
        }
    })
}

fn geometry(job: &ReconJob, center: Option<f32>) -> Result<ParallelGeometry> {
    let input = job.source.path().display().to_string();
    let n_bins = job.source.shape()[2];
    let mut g = ParallelGeometry::new(job.angles.clone(), n_bins).context(input.clone())?;
    if let Some(c) = center {
        g = g.with_center(c).context(input)?;
    }
    Ok(g)
}

fn meta(job: &ReconJob, geometry: &ParallelGeometry, grid: &SliceGrid, what: &str) -> VolumeMeta {
    let (lo, hi) = geometry
        .angles()
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &a| {
            (l.min(a), h.max(a))
        });
    job.with_provenance(
        VolumeMeta::default()
            .text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")))
            .text("input", &job.source.path().display().to_string())
            .text("reader", job.source.format())
            .int("first_detector_row", job.rows.start as i64)
            .int("n_angles", geometry.n_angles() as i64)
            .float("angle_min_deg", f64::from(lo).to_degrees())
            .float("angle_max_deg", f64::from(hi).to_degrees())
            .float("center", f64::from(geometry.center(0)))
            .float("bin_width", f64::from(geometry.bin_width()))
            .float("pixel_size", f64::from(grid.pixel_size))
            .text("method", what)
            .text("preprocess", &format!("{:?}", job.preprocess))
            .text("layout", "[z][y][x], z = detector row - first_detector_row"),
    )
}

fn io_err(job: &ReconJob, e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("{}: {e}", job.source.path().display())
}

/// Distributed FBP ([`Method::Fbp`]).
pub(crate) fn run_fbp(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::Fbp {
        center,
        options,
        backend,
    } = &job.method
    else {
        unreachable!("run_fbp takes FBP jobs")
    };
    let (rank, size) = (comm.rank(), comm.size());
    let center = resolve_center(comm, &job, center)?;
    let mine = split_rows(&job.rows, size, rank);
    let setup = (|| -> Result<_> {
        let geometry = geometry(&job, center)?;
        options.filter.validate()?;
        let grid = SliceGrid::for_geometry(&geometry);
        let per_slab = MemoryModel::for_source(job.source.as_ref(), grid.len())
            .with_preprocess(&job.preprocess, job.source.shape()[1])
            .rows_per_slab(job.memory)
            .map_err(|e| io_err(&job, format!("--memory: {e}")))?
            .min(mine.len().max(1));
        let backend = backend(comm.local_rank())?;
        Ok((geometry, grid, per_slab, backend))
    })();
    let (geometry, grid, per_slab, backend) = agree(comm, setup)?;
    let what = format!("FBP {:?}, {}", options.filter, options.interpolation);
    let meta = meta(&job, &geometry, &grid, &what);
    let shape = [job.rows.len(), grid.ny, grid.nx];
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    // Slab boundaries on the storage chunks' rows (counted from row 0, so
    // also where a rank's rows start inside a chunk), as the single process.
    let plan = slab_plan(mine.clone(), per_slab, job.source.row_chunk());
    let n_slabs = plan.len();
    if rank != 0 {
        // Shown under TOMORS_LOG=info (rank 0 says it below).
        tracing::info!("rank {rank}: rows {mine:?} on {}", backend.name());
    }
    if rank == 0 {
        tracing::info!(
            "reconstructing rows {}..{} of {} ({}: {} angles × {} bins, centre {:.2}) on {} ranks, \
             {} rows each (±1); rank 0 on {} in {} slab(s) of ≤ {} rows",
            job.rows.start,
            job.rows.end,
            job.source.path().display(),
            job.source.format(),
            geometry.n_angles(),
            geometry.n_bins(),
            geometry.center(0),
            size,
            job.rows.len() / size,
            backend.name(),
            n_slabs,
            per_slab
        );
    }
    let bar = bar(
        comm,
        job.quiet,
        n_slabs as u64,
        "reconstructing",
        "slabs of rank 0",
    );
    let t = Instant::now();
    let local = (|| -> Result<()> {
        for r in plan {
            let projections = job.source.read_rows(r.clone(), &job.preprocess)?;
            check_finite(projections.view(), "the preprocessed projections")
                .map_err(|e| io_err(&job, e))?;
            injected_failure(rank)?;
            let n = projections.len_of(Axis(1));
            let sinograms = projections_to_sinograms(projections.view(), 0..n)?;
            drop(projections);
            let vol = fbp_sinograms(
                backend.as_ref(),
                sinograms.view(),
                &geometry,
                &grid,
                options,
            )
            .map_err(|e| io_err(&job, e))?;
            out.write(comm, r.start - job.rows.start, vol.view())?;
            bar.inc(1);
        }
        Ok(())
    })();
    out.finish(comm, local)?;
    bar.finish_and_clear();
    report(comm, &job, shape, &geometry, t, geometry.n_angles());
    Ok(())
}

fn report(
    comm: &dyn Comm,
    job: &ReconJob,
    shape: [usize; 3],
    geometry: &ParallelGeometry,
    t: Instant,
    n_angles: usize,
) {
    if comm.rank() != 0 {
        return;
    }
    let seconds = t.elapsed().as_secs_f64();
    let updates = (shape[0] * shape[1] * shape[2] * n_angles) as f64;
    tracing::info!(
        "reconstructed {} slices on {} ranks in {seconds:.2} s ({:.3} GU/s including reading and writing)",
        shape[0],
        comm.size(),
        updates / seconds / 1e9
    );
    println!(
        "wrote {} ([z][y][x] = [{}, {}, {}], centre {:.2})",
        job.out.display(),
        shape[0],
        shape[1],
        shape[2],
        geometry.center(0)
    );
}

/// Distributed parallel-beam iterative reconstruction
/// ([`Method::Iterative`]): each rank iterates on its own slices.
pub(crate) fn run_iterative(comm: &dyn Comm, job: ReconJob) -> Result<(), Failure> {
    let Method::Iterative {
        center,
        options,
        projector: kind,
        gpu,
    } = &job.method
    else {
        unreachable!("run_iterative takes parallel iterative jobs")
    };
    let (rank, size) = (comm.rank(), comm.size());
    let checked = (|| -> Result<()> {
        if options.tolerance.is_some() {
            bail!("--tolerance is not available under MPI for parallel beam (the ranks' slices would stop at different iterations); give --iterations");
        }
        if matches!(center, Center::Auto(_)) {
            bail!("--center auto is not available with --algorithm yet; give the position");
        }
        Ok(())
    })();
    agree(comm, checked)?;
    let center = resolve_center(comm, &job, center)?;
    let mine: Range<usize> = split_rows(&job.rows, size, rank);
    let setup = (|| -> Result<_> {
        let geometry = geometry(&job, center)?;
        let grid = SliceGrid::for_geometry(&geometry);
        let sinograms = if mine.is_empty() {
            None
        } else {
            let p = job.source.read_rows(mine.clone(), &job.preprocess)?;
            check_finite(p.view(), "the projections").map_err(|e| io_err(&job, e))?;
            let n = p.len_of(Axis(1));
            Some(projections_to_sinograms(p.view(), 0..n)?)
        };
        injected_failure(rank)?;
        let p = projector::<f32>(*kind, &geometry, &grid, None)?;
        let device = match gpu {
            Some(choose) => choose(comm.local_rank())?,
            None => None,
        };
        Ok((geometry, grid, sinograms, p, device))
    })();
    let (geometry, grid, sinograms, p, device) = agree(comm, setup)?;
    if rank == 0 {
        tracing::info!(
            "{:?} with the {} projector, {} iterations{}: rows {}..{} of {} on {} ranks ({} angles × {} bins)",
            options.algorithm,
            p.name(),
            options.iterations,
            match device {
                Some(d) => format!(" (rank 0 on GPU {d})"),
                None => String::new(),
            },
            job.rows.start,
            job.rows.end,
            job.source.path().display(),
            size,
            geometry.n_angles(),
            geometry.n_bins()
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
    let result = match (&sinograms, device) {
        (Some(s), Some(d)) => gpu_iterate(d, &geometry, &grid, s.view(), options, &bar)
            .map(Some)
            .map_err(|e| anyhow!("{}: {e:#}", job.source.path().display())),
        (Some(s), None) => reconstruct(p.as_ref(), s.view(), None, options, &mut |info| {
            bar.set_position(info.iteration as u64);
            true
        })
        .map(Some)
        .map_err(|e| io_err(&job, e)),
        (None, _) => Ok(None),
    };
    let what = format!("{:?}, {} projector", options.algorithm, p.name());
    let meta = meta(&job, &geometry, &grid, &what);
    let shape = [job.rows.len(), grid.ny, grid.nx];
    // The iteration is over before the output exists: no failure leaves one.
    let result = agree(comm, result)?;
    let mut out = DistOutput::create(comm, &job.out, job.format, shape, &meta, job.overwrite)?;
    let local = match &result {
        Some(r) => out.write(comm, mine.start - job.rows.start, r.x.view()),
        None => Ok(()),
    };
    out.finish(comm, local)?;
    bar.finish_and_clear();
    if let (Some(r), 0) = (&result, rank) {
        tracing::info!(
            "{} iterations on rank 0 (λ = {:.4e}, stopped: {:?}), rank 0's final relative residual {}",
            r.iterations,
            r.relaxation,
            r.stop,
            r.residuals
                .last()
                .map_or("–".to_string(), |v| format!("{v:.3e}"))
        );
    }
    report(comm, &job, shape, &geometry, t, geometry.n_angles());
    Ok(())
}

/// The rank's slices iterated on its GPU `device` (`sirt_cuda`: resident,
/// slabs of slices as memory allows).
fn gpu_iterate(
    device: usize,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ndarray::ArrayView3<'_, f32>,
    options: &tomors_core::iterative::IterativeOptions,
    bar: &indicatif::ProgressBar,
) -> Result<tomors_core::iterative::IterativeResult<f32>> {
    let backend = tomors_cuda::CudaBackend::new(device)
        .with_context(|| format!("opening CUDA device {device}"))?;
    let (result, _) = tomors_cuda::sirt_cuda(
        &backend,
        geometry,
        grid,
        sinograms,
        None,
        options,
        &tomors_cuda::GpuSirtOptions::default(),
        &|info: &tomors_cuda::iterative::GpuIteration| {
            bar.set_position(info.iteration as u64);
            true
        },
    )?;
    Ok(result)
}
