//! Cone-beam FDK on the GPUs of `--devices` (the whole FDK on each device,
//! the volume in z-slabs over several) or the CPU.

use std::time::Instant;

use anyhow::{Context, Result};
use tomors_core::cone::{fdk, FdkOptions};

use crate::backend_select::make_cone_backend;
use crate::job::{cone, output, Job};

/// Runs a cone-beam FDK job.
pub fn run(job: &Job) -> Result<()> {
    let format = job.output.check()?;
    let filter = job.method.fbp.filter()?;
    let data = cone::load(&job.input, &job.pre, &job.geometry.cone, job.memory, "FDK")?;
    let (g, vol) = (&data.geometry, &data.volume);
    let path = data.scan.path().to_path_buf();
    let (n_angles, n_rows, n_cols) = data.projections.dim();
    let options = FdkOptions {
        filter,
        scan: job.geometry.cone.scan(),
        slab: 0,
    };
    tracing::info!(
        "FDK of {} ({n_angles} × {n_rows} × {n_cols}, cone angle {:.2}°) onto {}×{}×{} voxels of {}",
        path.display(),
        g.cone_angle().to_degrees(),
        vol.nx,
        vol.ny,
        vol.nz,
        vol.voxel_size
    );
    let backend = make_cone_backend(&job.backend)?;
    tracing::info!("backend: {}", backend.name());
    let t = Instant::now();
    let volume = fdk(backend.as_ref(), data.projections.view(), g, vol, &options)
        .with_context(|| path.display().to_string())?;
    let seconds = t.elapsed().as_secs_f64();
    tracing::info!(
        "reconstructed in {seconds:.2} s ({:.3} GU/s including filtering)",
        (vol.len() * n_angles) as f64 / seconds / 1e9
    );
    let meta = output::base_meta(&data.scan, "FDK")
        .int("n_angles", n_angles as i64)
        .float("sod", g.sod())
        .float("odd", g.odd())
        .float("voxel_size", f64::from(vol.voxel_size))
        .text("filter", &format!("{:?}", options.filter))
        .text("scan", &format!("{:?}", options.scan));
    output::write(&job.output, format, volume.view(), &meta)?;
    println!(
        "wrote {} ([z][y][x] = {:?}, voxel size {})",
        job.output.path.display(),
        volume.dim(),
        vol.voxel_size
    );
    Ok(())
}
