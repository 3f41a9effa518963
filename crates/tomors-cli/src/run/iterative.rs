//! Parallel-beam algebraic iterative reconstruction: the scan's rows read
//! whole through the job's loader, then SIRT/SART/ART/BLOCK-IT on the CPU,
//! or (every method with the joseph projector; the SIRT family, SART and
//! BLOCK-IT with the line projector) on NVIDIA GPUs
//! (see docs/iterative.md).

use std::ops::Range;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::Array3;
use tomors_core::fbp::projections_to_sinograms;
use tomors_core::iterative::{projector, reconstruct, Algorithm, IterativeOptions, ProjectorKind};
use tomors_core::{Backend, ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{sirt_cuda_multi, CudaOptions, GpuSirtOptions, MultiCudaBackend, VoxelKernel};
use tomors_io::VolumeMeta;

use crate::backend_select::{BackendArgs, BackendChoice};
use crate::job::{center, input, output, Job};
use crate::{iteration_report, progress};

/// Bytes an iterative run holds for `sino` sinogram values and `vol`
/// voxels: the projections as read and their sinograms, two sinogram-sized
/// and four volume-sized work arrays, plus 64 MiB for the process.
fn bytes_needed(sino: usize, vol: usize) -> usize {
    4 * (4 * sino + 4 * vol) + (64 << 20)
}

/// Runs a parallel-beam iterative job.
pub fn run(job: &Job) -> Result<()> {
    let name = job.method.algorithm.context("no --algorithm given")?;
    let options = job.method.iterative.options(name)?;
    let kind = job.method.iterative.projector();
    // Every method (SIRT family, SART / BLOCK-IT, block-parallel, ART) runs
    // on the GPU with the joseph projector; the SIRT family and the
    // block-sequential methods with the line projector too; the SIRT family
    // with the voxel pair (Joseph forward, FBP's voxel-driven back
    // projection).
    let gpu_capable = match options.algorithm {
        Algorithm::Sirt(_) => matches!(
            kind,
            ProjectorKind::Joseph | ProjectorKind::Line | ProjectorKind::Voxel
        ),
        Algorithm::BlockSequential { .. } => {
            matches!(kind, ProjectorKind::Joseph | ProjectorKind::Line)
        }
        Algorithm::BlockParallel { .. } | Algorithm::Art { .. } => kind == ProjectorKind::Joseph,
    };
    if job.backend.backend == BackendChoice::Cuda && !gpu_capable {
        bail!(
            "--backend cuda runs sirt, landweber, cimmino, sart, block-it, block-parallel and art with the joseph \
             projector, sirt, landweber, cimmino, sart and block-it with the line projector, and sirt, \
             landweber and cimmino with the voxel projector; {name:?} with the {kind:?} projector \
             runs on the CPU (use --backend cpu or auto)"
        );
    }
    let gpus = gpus_for(&job.backend, gpu_capable, &options, kind)?;
    let format = job.output.check()?;
    let scan = input::open(&job.input, &job.pre, false)?;
    let path = scan.path().to_path_buf();
    let [n_angles, n_rows, n_bins] = scan.shape();
    let rows = job.geometry.rows(n_rows)?;
    let centre = center::resolve(&scan, &job.geometry, &rows)?;
    let geometry = centre.geometry(&scan)?;
    let grid = SliceGrid::for_geometry(&geometry);
    let bytes = bytes_needed(n_angles * rows.len() * n_bins, rows.len() * grid.len());
    let mut projections = scan.read_whole(rows.clone(), bytes, job.memory, "--algorithm")?;
    if let Some(d) = &centre.drift {
        d.apply(&mut projections, &rows);
    }
    let sinograms = projections_to_sinograms(projections.view(), 0..rows.len())?;
    drop(projections);
    let meta = output::base_meta(&scan, &format!("{name:?}"))
        .int("first_detector_row", rows.start as i64)
        .int("n_angles", n_angles as i64)
        .float("center", f64::from(geometry.center(0)))
        .float("pixel_size", f64::from(grid.pixel_size))
        .text("projector", &format!("{kind:?}"))
        .text("iterative_options", &format!("{options:?}"))
        .text("layout", "[z][y][x], z = detector row - first_detector_row");
    let volume = match gpus {
        Some(gpus) => {
            let gpu = GpuSirtOptions {
                line: kind == ProjectorKind::Line,
                voxel: (kind == ProjectorKind::Voxel).then_some(VoxelKernel::default()),
                ..GpuSirtOptions::default()
            };
            run_gpu(
                &gpus, &geometry, &grid, sinograms, &options, &gpu, &rows, &path,
            )?
        }
        None => {
            let p = projector::<f32>(kind, &geometry, &grid, None)?;
            tracing::info!(
                "{:?} with the {} projector, {} iterations: rows {}..{} of {} ({} angles × {} bins)",
                options.algorithm,
                p.name(),
                options.iterations,
                rows.start,
                rows.end,
                path.display(),
                n_angles,
                n_bins
            );
            let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
            let t = Instant::now();
            let result = reconstruct(
                p.as_ref(),
                sinograms.view(),
                None,
                &options,
                &mut iteration_report::cpu_callback(&bar),
            )
            .with_context(|| path.display().to_string())?;
            iteration_report::finished(&bar, &result, "on the CPU", t.elapsed().as_secs_f64());
            result.x
        }
    };
    write(job, format, &volume, &meta)
}

fn write(
    job: &Job,
    format: tomors_io::VolumeFormat,
    volume: &Array3<f32>,
    meta: &VolumeMeta,
) -> Result<()> {
    output::write(&job.output, format, volume.view(), meta)?;
    println!(
        "wrote {} ([z][y][x] = {:?})",
        job.output.path.display(),
        volume.dim()
    );
    Ok(())
}

/// The GPUs when asked for (`cuda`), or (`auto`) when the method runs there
/// and a GPU is usable; `None` for the CPU.
fn gpus_for(
    backend: &BackendArgs,
    gpu_capable: bool,
    options: &IterativeOptions,
    kind: ProjectorKind,
) -> Result<Option<MultiCudaBackend>> {
    Ok(match backend.backend {
        BackendChoice::Cpu => None,
        BackendChoice::Cuda => Some(open_gpus(backend.devices.as_deref())?),
        BackendChoice::Auto if gpu_capable => match open_gpus(backend.devices.as_deref()) {
            Ok(g) => Some(g),
            Err(err) => {
                tracing::info!("no usable GPU ({err:#}); iterating on the CPU");
                None
            }
        },
        BackendChoice::Auto => {
            tracing::info!(
                "{:?} with the {kind:?} projector runs on the CPU",
                options.algorithm
            );
            None
        }
    })
}

/// Opens the CUDA devices of `--devices` (all when `None`).
fn open_gpus(devices: Option<&str>) -> Result<MultiCudaBackend> {
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(devices, available)?;
    MultiCudaBackend::new(&list, CudaOptions::default())
        .with_context(|| format!("opening CUDA devices {list:?}"))
}

/// SIRT on the GPUs, resident on each device (slabs of slices shared
/// between the devices).
#[allow(clippy::too_many_arguments)]
fn run_gpu(
    gpus: &MultiCudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: Array3<f32>,
    options: &IterativeOptions,
    gpu: &GpuSirtOptions,
    rows: &Range<usize>,
    path: &std::path::Path,
) -> Result<Array3<f32>> {
    let names: Vec<String> = gpus.devices().iter().map(|d| d.name()).collect();
    tracing::info!(
        "{:?} on {} ({} iterations): rows {}..{} of {} ({} angles × {} bins)",
        options.algorithm,
        names.join(" + "),
        options.iterations,
        rows.start,
        rows.end,
        path.display(),
        geometry.n_angles(),
        geometry.n_bins()
    );
    let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
    let t = Instant::now();
    let (result, stats) = sirt_cuda_multi(
        gpus,
        geometry,
        grid,
        sinograms.view(),
        None,
        options,
        gpu,
        &|info: &GpuIteration| {
            if info.slab.1 > 1 {
                bar.set_message(format!("slab {}/{}", info.slab.0 + 1, info.slab.1));
            }
            iteration_report::step(&bar, info.iteration, Some(info.residual));
            true
        },
    )
    .with_context(|| path.display().to_string())?;
    let where_ = format!(
        "on the GPU ({} slab(s), {:.4} s per iteration in the device loop)",
        stats.slabs,
        stats.loop_s / stats.iterations.max(1) as f64
    );
    iteration_report::finished(&bar, &result, &where_, t.elapsed().as_secs_f64());
    Ok(result.x)
}
