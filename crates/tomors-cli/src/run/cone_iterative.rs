//! Cone-beam algebraic iterative reconstruction with the cone-beam Joseph,
//! line-length or voxel-driven projectors on the CPU; SIRT (row/column
//! sums, Landweber, Cimmino) with the Joseph or voxel-driven pair, and SART /
//! BLOCK-IT with the Joseph pair, also on the GPUs of `--devices`, resident
//! on the devices (several GPUs: one z-slab of the volume each).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{
    cone_projector, reconstruct_cone, Algorithm, IterativeOptions, ProjectorKind,
};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{
    cone_sirt_cuda_multi, cone_sirt_cuda_opts, ConeBackProjector, ConeGpuOptions, CudaBackend,
    Exchange,
};

use crate::backend_select::BackendChoice;
use crate::job::{cone, output, Job};
use crate::{iteration_report, progress};

/// Runs a cone-beam iterative job.
pub fn run(job: &Job) -> Result<()> {
    let name = job.method.algorithm.context("no --algorithm given")?;
    let options = job.method.iterative.options(name)?;
    let kind = job.method.iterative.projector();
    let on_gpu = wanted(job.backend.backend, &options, kind)?;
    let format = job.output.check()?;
    let data = cone::load(
        &job.input,
        &job.pre,
        &job.geometry.cone,
        job.memory,
        "--algorithm",
    )?;
    let (g, vol) = (&data.geometry, &data.volume);
    let path = data.scan.path().to_path_buf();
    let (n_angles, n_rows, n_cols) = data.projections.dim();
    tracing::info!(
        "{:?} with the {kind:?} projector, {} iterations: {} ({n_angles} × {n_rows} × {n_cols}, \
         cone angle {:.2}°) onto {}×{}×{} voxels of {}",
        options.algorithm,
        options.iterations,
        path.display(),
        g.cone_angle().to_degrees(),
        vol.nx,
        vol.ny,
        vol.nz,
        vol.voxel_size
    );
    let meta = output::base_meta(&data.scan, &format!("{name:?}"))
        .int("n_angles", n_angles as i64)
        .float("sod", g.sod())
        .float("odd", g.odd())
        .float("voxel_size", f64::from(vol.voxel_size))
        .text("projector", &format!("{kind:?}"))
        .text("iterative_options", &format!("{options:?}"));
    let volume = if on_gpu {
        run_gpu(job, g, vol, &data.projections, &options, kind, &path)?
    } else {
        run_cpu(g, vol, &data.projections, &options, kind, &path)?
    };
    output::write_cone(&job.output, format, volume.view(), &meta, vol.voxel_size)
}

/// Whether the method runs on the GPU.
fn capable(options: &IterativeOptions, projector: ProjectorKind) -> bool {
    match options.algorithm {
        Algorithm::Sirt(_) => matches!(projector, ProjectorKind::Joseph | ProjectorKind::Voxel),
        // Block views of the voxel pair's back projection are not built.
        Algorithm::BlockSequential { .. } => projector == ProjectorKind::Joseph,
        // Kaczmarz over Joseph's rays (the voxel pair's rows are Joseph's).
        Algorithm::Art { .. } | Algorithm::BlockParallel { .. } => {
            matches!(projector, ProjectorKind::Joseph | ProjectorKind::Voxel)
        }
    }
}

/// Whether the iteration runs on the GPU for `choice`: `cuda` insists (and
/// errors for methods the GPU does not run), `auto` takes a usable GPU for
/// the methods it runs.
fn wanted(
    choice: BackendChoice,
    options: &IterativeOptions,
    projector: ProjectorKind,
) -> Result<bool> {
    let ok = capable(options, projector);
    match choice {
        BackendChoice::Cpu => Ok(false),
        BackendChoice::Cuda if !ok => bail!(
            "--backend cuda runs cone-beam sirt, landweber, cimmino, art and block-parallel with the joseph or voxel \
             projector, sart and block-it with the joseph projector; \
             {:?} with the {projector:?} projector runs on the CPU (use --backend cpu or auto)",
            options.algorithm
        ),
        BackendChoice::Cuda => Ok(true),
        BackendChoice::Auto if !ok => {
            tracing::info!(
                "{:?} with the {projector:?} projector runs on the CPU",
                options.algorithm
            );
            Ok(false)
        }
        BackendChoice::Auto => match tomors_cuda::device_count() {
            Ok(n) if n > 0 => Ok(true),
            Ok(_) => {
                tracing::info!("no CUDA device; iterating on the CPU");
                Ok(false)
            }
            Err(err) => {
                tracing::info!("no usable GPU ({err:#}); iterating on the CPU");
                Ok(false)
            }
        },
    }
}

fn run_cpu(
    g: &ConeGeometry,
    vol: &ConeVolume,
    projections: &Array3<f32>,
    options: &IterativeOptions,
    kind: ProjectorKind,
    path: &std::path::Path,
) -> Result<Array3<f32>> {
    let p =
        cone_projector::<f32>(kind, g, vol, None).with_context(|| path.display().to_string())?;
    let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
    let t = Instant::now();
    let result = reconstruct_cone(
        p.as_ref(),
        projections.view(),
        None,
        options,
        &mut iteration_report::cpu_callback(&bar),
    )
    .with_context(|| path.display().to_string())?;
    iteration_report::finished(&bar, &result, "on the CPU", t.elapsed().as_secs_f64());
    Ok(result.x)
}

/// Runs the iteration on the GPUs of `--devices` (all when not given): one
/// GPU holds the whole volume; several split it into z-slabs, one per GPU,
/// the partial projections summed across the GPUs every forward projection
/// (peer-to-peer, staged by the driver where the devices have no peer access;
/// the library's host-staged exchange measured slower: docs/perf-notes.md).
fn run_gpu(
    job: &Job,
    g: &ConeGeometry,
    vol: &ConeVolume,
    projections: &Array3<f32>,
    options: &IterativeOptions,
    kind: ProjectorKind,
    path: &std::path::Path,
) -> Result<Array3<f32>> {
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(job.backend.devices.as_deref(), available)?;
    let list: Vec<usize> = if list.len() > vol.nz {
        tracing::info!(
            "{} GPUs for {} slices: using the first {}",
            list.len(),
            vol.nz,
            vol.nz
        );
        list[..vol.nz].to_vec()
    } else {
        list
    };
    let backends = list
        .iter()
        .map(|&d| CudaBackend::new(d).with_context(|| format!("opening CUDA device {d}")))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = backends.iter().map(tomors_core::Backend::name).collect();
    tracing::info!("{:?} on {}", options.algorithm, names.join(", "));
    let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
    let t = Instant::now();
    let back = match kind {
        ProjectorKind::Voxel => ConeBackProjector::Voxel,
        _ => ConeBackProjector::Joseph,
    };
    let report = |info: &GpuIteration| {
        iteration_report::step(&bar, info.iteration, Some(info.residual));
        true
    };
    // ART and block-parallel walk ray batches, and the deterministic back
    // projection is a single-device kernel: those run on the first device.
    let single = backends.len() == 1
        || job.backend.deterministic
        || matches!(
            options.algorithm,
            Algorithm::Art { .. } | Algorithm::BlockParallel { .. }
        );
    if single && backends.len() > 1 {
        tracing::warn!(
            "{:?}{} runs on one GPU: using {} only",
            options.algorithm,
            if job.backend.deterministic {
                " with --deterministic"
            } else {
                ""
            },
            names[0]
        );
    }
    let (result, stats) = if single {
        let gpu = ConeGpuOptions {
            back,
            deterministic: job.backend.deterministic,
            ..ConeGpuOptions::default()
        };
        cone_sirt_cuda_opts(
            &backends[0],
            g,
            vol,
            projections.view(),
            None,
            options,
            &gpu,
            &report,
        )
    } else {
        let refs: Vec<&CudaBackend> = backends.iter().collect();
        cone_sirt_cuda_multi(
            &refs,
            g,
            vol,
            projections.view(),
            None,
            options,
            back,
            Exchange::Peer,
            &report,
        )
    }
    .with_context(|| path.display().to_string())?;
    let where_ = format!(
        "on {} ({:.4} s per iteration in the device loop)",
        if single {
            "the GPU".to_string()
        } else {
            format!("{} GPUs (z-slabs)", backends.len())
        },
        stats.loop_s / stats.iterations.max(1) as f64
    );
    iteration_report::finished(&bar, &result, &where_, t.elapsed().as_secs_f64());
    Ok(result.x)
}
