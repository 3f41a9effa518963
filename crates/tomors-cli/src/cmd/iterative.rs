//! `tomors recon --algorithm …`: algebraic iterative reconstruction of
//! parallel-beam .npy projections on the CPU, or (sirt, landweber, cimmino
//! with the joseph projector) on NVIDIA GPUs (see docs/iterative.md).

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ndarray::{Axis, Ix3};
use tomors_core::fbp::{check_finite, projections_to_sinograms};
use tomors_core::iterative::{
    projector, reconstruct, Algorithm, Constraint, IterativeOptions, ProjectorKind, RayOrder,
    Weighting,
};
use tomors_core::{Backend, ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{sirt_cuda_multi, CudaOptions, GpuSirtOptions, MultiCudaBackend};

use super::recon::{load_angles, parse_rows, read_npy_f32, CenterArg, ReconArgs};
use crate::backend_select::BackendChoice;
use crate::output::{check_target, write_volume};
use crate::{iteration_report, progress};

/// The iterative methods by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmName {
    /// SIRT with row/column-sum weights (ASTRA's SIRT), all projections per step.
    Sirt,
    /// SIRT with T = M = I.
    Landweber,
    /// SIRT with M = 1/‖a_i‖².
    Cimmino,
    /// Row/column-sum steps per block of --block-size projections (default 1).
    Sart,
    /// BLOCK-IT: Cimmino steps per block of --block-size projections (default 2).
    BlockIt,
    /// Averaged Kaczmarz sweeps over blocks of --block-size projections (default 6).
    BlockParallel,
    /// Kaczmarz, ray by ray.
    Art,
}

/// Options of the iterative methods (`--algorithm` switches from FBP).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct IterativeArgs {
    /// Reconstruct iteratively instead of by FBP (parallel beam, .npy input; sirt,
    /// landweber and cimmino with the joseph projector also run on the GPU).
    #[arg(long, value_enum)]
    pub algorithm: Option<AlgorithmName>,
    /// Iterations of --algorithm (sweeps over all projections for art and the block methods).
    #[arg(long, default_value_t = 50)]
    pub iterations: usize,
    /// Relaxation λ of --algorithm (default: 1 for sirt, sart, art, block-parallel;
    /// 1/ρ from power iteration for landweber, cimmino, block-it).
    #[arg(long, allow_hyphen_values = true)]
    pub relaxation: Option<f64>,
    /// Projection model of --algorithm: zero-one (nearest pixel per step), line
    /// (Siddon), strip (pixel area in the bin's strip), joseph, or voxel (Joseph
    /// forward with the voxel-driven back projector of FBP); zero-one and strip
    /// are parallel beam only.
    #[arg(long, default_value = "joseph")]
    pub projector: ProjectorKind,
    /// Lower bound of the reconstructed values (e.g. 0), applied every update.
    #[arg(long, allow_hyphen_values = true)]
    pub min: Option<f64>,
    /// Upper bound of the reconstructed values.
    #[arg(long, allow_hyphen_values = true)]
    pub max: Option<f64>,
    /// Projections per block of sart, block-it and block-parallel.
    #[arg(long)]
    pub block_size: Option<usize>,
    /// Stop once the relative residual ‖b − Ax‖/‖b‖ is at most this.
    #[arg(long, allow_hyphen_values = true)]
    pub tolerance: Option<f64>,
    /// Random ray order for art (seeded, reproducible).
    #[arg(long)]
    pub random_order: bool,
}

impl IterativeArgs {
    /// Whether an iterative method was asked for.
    pub fn is_iterative(&self) -> bool {
        self.algorithm.is_some()
    }

    /// The core's options for these flags.
    pub fn options(&self) -> Result<IterativeOptions> {
        let name = self.algorithm.context("no --algorithm given")?;
        let block = |default: usize| self.block_size.unwrap_or(default);
        let algorithm = match name {
            AlgorithmName::Sirt => Algorithm::Sirt(Weighting::RowColumnSums),
            AlgorithmName::Landweber => Algorithm::Sirt(Weighting::Landweber),
            AlgorithmName::Cimmino => Algorithm::Sirt(Weighting::Cimmino),
            AlgorithmName::Sart => Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: block(1),
            },
            AlgorithmName::BlockIt => Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: block(2),
            },
            AlgorithmName::BlockParallel => Algorithm::BlockParallel {
                projections_per_block: block(6),
            },
            AlgorithmName::Art => Algorithm::Art {
                order: if self.random_order {
                    RayOrder::Random { seed: 1 }
                } else {
                    RayOrder::Sequential
                },
            },
        };
        if self.block_size.is_some()
            && !matches!(
                name,
                AlgorithmName::Sart | AlgorithmName::BlockIt | AlgorithmName::BlockParallel
            )
        {
            bail!("--block-size is for sart, block-it and block-parallel");
        }
        if self.random_order && name != AlgorithmName::Art {
            bail!("--random-order is for art");
        }
        Ok(IterativeOptions {
            algorithm,
            iterations: self.iterations,
            relaxation: self.relaxation,
            constraint: Constraint {
                min: self.min,
                max: self.max,
            },
            tolerance: self.tolerance,
            track_residual: true,
        })
    }
}

/// Runs `tomors recon --algorithm …`.
pub fn run_recon(args: &ReconArgs) -> Result<()> {
    let input = &args.input;
    let is_npy = input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if !is_npy || args.raw_shape.is_some() || args.memory.is_some() {
        bail!(
            "{}: --algorithm reads .npy projections [angle][row][col] (or [angle][col]) into memory",
            input.display()
        );
    }
    let options = args.iterative.options()?;
    let gpu_capable = matches!(options.algorithm, Algorithm::Sirt(_))
        && args.iterative.projector == ProjectorKind::Joseph;
    if args.backend.backend == BackendChoice::Cuda && !gpu_capable {
        bail!(
            "--backend cuda runs sirt, landweber and cimmino with the joseph projector; \
             {:?} with the {:?} projector runs on the CPU (use --backend cpu or auto)",
            args.iterative.algorithm.context("no --algorithm given")?,
            args.iterative.projector
        );
    }
    if args.backend.kernel.is_some() {
        tracing::warn!("--kernel selects the FBP back projector; --algorithm does not use it");
    }
    // The GPU when asked for, or (auto) when the method runs there and a GPU
    // is usable.
    let gpus = match args.backend.backend {
        BackendChoice::Cpu => None,
        BackendChoice::Cuda => Some(open_gpus(args.backend.devices.as_deref())?),
        BackendChoice::Auto if gpu_capable => match open_gpus(args.backend.devices.as_deref()) {
            Ok(g) => Some(g),
            Err(err) => {
                tracing::info!("no usable GPU ({err:#}); iterating on the CPU");
                None
            }
        },
        BackendChoice::Auto => {
            tracing::info!(
                "{:?} with the {:?} projector runs on the CPU",
                options.algorithm,
                args.iterative.projector
            );
            None
        }
    };
    check_target(&args.out, args.overwrite)?;
    let data = read_npy_f32(input)?;
    let projections = match data.ndim() {
        2 => data.insert_axis(Axis(1)).into_dimensionality::<Ix3>()?,
        3 => data.into_dimensionality::<Ix3>()?,
        _ => bail!(
            "{}: projections must be [angle][row][col] or [angle][col], found shape {:?}",
            input.display(),
            data.shape()
        ),
    };
    check_finite(projections.view(), "the projections")
        .with_context(|| input.display().to_string())?;
    let (n_angles, n_rows, n_bins) = projections.dim();
    let mut geometry = ParallelGeometry::new(load_angles(args, n_angles)?, n_bins)
        .with_context(|| input.display().to_string())?;
    match args.center {
        Some(CenterArg::At(c)) => {
            geometry = geometry
                .with_center(c)
                .with_context(|| input.display().to_string())?
        }
        Some(CenterArg::Auto) => {
            bail!("--center auto is not available with --algorithm yet; give the position")
        }
        None => {}
    }
    let rows = parse_rows(args.slices.as_deref(), n_rows)?;
    let grid = SliceGrid::for_geometry(&geometry);
    let sinograms = projections_to_sinograms(projections.view(), rows.clone())?;
    drop(projections);
    if let Some(gpus) = gpus {
        return run_gpu(args, &gpus, &geometry, &grid, sinograms, &options, rows);
    }
    let p = projector::<f32>(args.iterative.projector, &geometry, &grid, None)?;
    tracing::info!(
        "{:?} with the {} projector, {} iterations: rows {}..{} of {} ({} angles × {} bins)",
        options.algorithm,
        p.name(),
        options.iterations,
        rows.start,
        rows.end,
        input.display(),
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
    .with_context(|| input.display().to_string())?;
    iteration_report::finished(&bar, &result, "on the CPU", t.elapsed().as_secs_f64());
    write_volume(&args.out, result.x.view(), args.overwrite)?;
    println!(
        "wrote {} ([z][y][x] = {:?})",
        args.out.display(),
        result.x.dim()
    );
    Ok(())
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
fn run_gpu(
    args: &ReconArgs,
    gpus: &MultiCudaBackend,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    sinograms: ndarray::Array3<f32>,
    options: &IterativeOptions,
    rows: std::ops::Range<usize>,
) -> Result<()> {
    let input = &args.input;
    let names: Vec<String> = gpus.devices().iter().map(|d| d.name()).collect();
    tracing::info!(
        "{:?} on {} ({} iterations): rows {}..{} of {} ({} angles × {} bins)",
        options.algorithm,
        names.join(" + "),
        options.iterations,
        rows.start,
        rows.end,
        input.display(),
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
        &GpuSirtOptions::default(),
        &|info: &GpuIteration| {
            if info.slab.1 > 1 {
                bar.set_message(format!("slab {}/{}", info.slab.0 + 1, info.slab.1));
            }
            iteration_report::step(&bar, info.iteration, Some(info.residual));
            true
        },
    )
    .with_context(|| input.display().to_string())?;
    let where_ = format!(
        "on the GPU ({} slab(s), {:.4} s per iteration in the device loop)",
        stats.slabs,
        stats.loop_s / stats.iterations.max(1) as f64
    );
    iteration_report::finished(&bar, &result, &where_, t.elapsed().as_secs_f64());
    write_volume(&args.out, result.x.view(), args.overwrite)?;
    println!(
        "wrote {} ([z][y][x] = {:?})",
        args.out.display(),
        result.x.dim()
    );
    Ok(())
}
