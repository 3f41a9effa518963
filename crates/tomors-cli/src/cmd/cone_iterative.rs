//! `tomors recon --geometry cone --algorithm …`: algebraic iterative
//! reconstruction of cone-beam `.npy` projections `[angle][row][col]` with
//! the cone-beam Joseph, line-length or voxel-driven projectors on the CPU.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{cone_projector, reconstruct_cone, IterativeOptions};

use super::cone::load_projections;
use super::recon::ReconArgs;
use crate::backend_select::BackendChoice;
use crate::output::{check_target, write_volume};
use crate::{iteration_report, progress};

/// Runs `tomors recon --geometry cone --algorithm …`.
pub fn run_recon(args: &ReconArgs) -> Result<()> {
    let input = &args.input;
    let is_npy = input
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if !is_npy || args.raw_shape.is_some() || args.memory.is_some() {
        bail!(
            "{}: --geometry cone --algorithm reads .npy projections [angle][row][col] into memory",
            input.display()
        );
    }
    if args.slices.is_some() || args.center.is_some() {
        bail!("--slices and --center are for parallel geometry (cone beam: --principal-point)");
    }
    let options = args.iterative.options()?;
    if !args.iterative.projector.has_cone() {
        bail!(
            "--projector {} is parallel beam only (cone beam: joseph, line or voxel)",
            args.iterative.projector
        );
    }
    let on_gpu = match args.backend.backend {
        BackendChoice::Cpu => false,
        choice => super::cone_gpu::wanted(choice, &options, args.iterative.projector)?,
    };
    check_target(&args.out, args.overwrite)?;
    let (projections, g, vol) = load_projections(args)?;
    let (n_angles, n_rows, n_cols) = projections.dim();
    tracing::info!(
        "{:?} with the {:?} projector, {} iterations: {} ({n_angles} × {n_rows} × {n_cols}, \
         cone angle {:.2}°) onto {}×{}×{} voxels of {}",
        options.algorithm,
        args.iterative.projector,
        options.iterations,
        input.display(),
        g.cone_angle().to_degrees(),
        vol.nx,
        vol.ny,
        vol.nz,
        vol.voxel_size
    );
    let volume = if on_gpu {
        super::cone_gpu::run(args, &g, &vol, projections, &options)?
    } else {
        run_cpu(args, &g, &vol, projections, &options)?
    };
    write_volume(&args.out, volume.view(), args.overwrite)?;
    println!(
        "wrote {} ([z][y][x] = {:?}, voxel size {})",
        args.out.display(),
        volume.dim(),
        vol.voxel_size
    );
    Ok(())
}

fn run_cpu(
    args: &ReconArgs,
    g: &ConeGeometry,
    vol: &ConeVolume,
    projections: Array3<f32>,
    options: &IterativeOptions,
) -> Result<Array3<f32>> {
    let input = &args.input;
    let p = cone_projector::<f32>(args.iterative.projector, g, vol, None)
        .with_context(|| input.display().to_string())?;
    let bar = progress::bar(options.iterations as u64, "iterating", "iterations");
    let t = Instant::now();
    let result = reconstruct_cone(
        p.as_ref(),
        projections.view(),
        None,
        options,
        &mut iteration_report::cpu_callback(&bar),
    )
    .with_context(|| input.display().to_string())?;
    iteration_report::finished(&bar, &result, "on the CPU", t.elapsed().as_secs_f64());
    Ok(result.x)
}
