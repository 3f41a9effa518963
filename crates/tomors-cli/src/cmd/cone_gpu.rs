//! The GPU side of `tomors recon --geometry cone --algorithm …`: SIRT
//! (row/column sums, Landweber, Cimmino) with the cone-beam Joseph pair or
//! the voxel-driven pair (texture forward, FDK back projection), resident
//! on one device.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{Algorithm, IterativeOptions, ProjectorKind};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{cone_sirt_cuda_with, ConeBackProjector, CudaBackend};

use super::recon::ReconArgs;
use crate::backend_select::BackendChoice;
use crate::{iteration_report, progress};

/// Whether the method runs on the GPU.
fn capable(options: &IterativeOptions, projector: ProjectorKind) -> bool {
    matches!(options.algorithm, Algorithm::Sirt(_))
        && matches!(projector, ProjectorKind::Joseph | ProjectorKind::Voxel)
}

/// Whether the iteration runs on the GPU for `choice`: `cuda` insists (and
/// errors for methods the GPU does not run), `auto` takes a usable GPU for
/// the methods it runs.
pub fn wanted(
    choice: BackendChoice,
    options: &IterativeOptions,
    projector: ProjectorKind,
) -> Result<bool> {
    let ok = capable(options, projector);
    match choice {
        BackendChoice::Cpu => Ok(false),
        BackendChoice::Cuda if !ok => bail!(
            "--backend cuda runs cone-beam sirt, landweber and cimmino with the joseph or voxel projector; \
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

/// Runs the iteration on the first GPU of `--devices`.
pub fn run(
    args: &ReconArgs,
    g: &ConeGeometry,
    vol: &ConeVolume,
    projections: Array3<f32>,
    options: &IterativeOptions,
) -> Result<Array3<f32>> {
    let input = &args.input;
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(args.backend.devices.as_deref(), available)?;
    if list.len() > 1 {
        tracing::info!("cone-beam SIRT runs on one GPU: device {}", list[0]);
    }
    let backend =
        CudaBackend::new(list[0]).with_context(|| format!("opening CUDA device {}", list[0]))?;
    tracing::info!(
        "{:?} on {}",
        options.algorithm,
        tomors_core::Backend::name(&backend)
    );
    let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
    let t = Instant::now();
    let back = match args.iterative.projector {
        ProjectorKind::Voxel => ConeBackProjector::Voxel,
        _ => ConeBackProjector::Joseph,
    };
    let (result, stats) = cone_sirt_cuda_with(
        &backend,
        g,
        vol,
        projections.view(),
        None,
        options,
        back,
        &|info: &GpuIteration| {
            iteration_report::step(&bar, info.iteration, Some(info.residual));
            true
        },
    )
    .with_context(|| input.display().to_string())?;
    let where_ = format!(
        "on the GPU ({:.4} s per iteration in the device loop)",
        stats.loop_s / stats.iterations.max(1) as f64
    );
    iteration_report::finished(&bar, &result, &where_, t.elapsed().as_secs_f64());
    Ok(result.x)
}
