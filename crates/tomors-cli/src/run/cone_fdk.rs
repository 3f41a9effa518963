//! Cone-beam FDK on the GPUs of `--devices` (the whole FDK on each device,
//! the volume in z-slabs over several) or the CPU.

use std::time::Instant;

use anyhow::{Context, Result};
use ndarray::Array3;
use rayon::prelude::*;
use tomors_core::cone::{ConeBackend, ConeGeometry, ConeVolume, FdkOptions};

use crate::backend_select::make_cone_backend;
use crate::job::{cone, output, Job};

/// Runs a cone-beam FDK job. The backend is made and prepared (kernels,
/// device and pinned buffers, FFT plans) and the output volume allocated
/// and touched on a second thread while the projections are read, so the
/// reconstruction itself starts warm.
pub fn run(job: &Job) -> Result<()> {
    let format = job.output.check()?;
    let filter = job.method.fbp.filter()?;
    let opened = cone::open(&job.input, &job.pre, &job.geometry.cone)?;
    let options = FdkOptions {
        filter,
        scan: job.geometry.cone.scan(),
        slab: 0,
    };
    let (g, vol) = (opened.geometry.clone(), opened.volume);
    g.check_volume(&vol)
        .with_context(|| opened.scan.path().display().to_string())?;
    let (data, prepared) = std::thread::scope(|s| {
        let prep = s.spawn(|| prepare(job, &g, &vol, &options));
        let data = opened.read(job.memory, "FDK");
        (data, prep.join())
    });
    let data = data?;
    let (backend, mut volume, prep_s) =
        prepared.map_err(|_| anyhow::anyhow!("the FDK preparation panicked"))??;
    let path = data.scan.path().to_path_buf();
    let (n_angles, n_rows, n_cols) = data.projections.dim();
    tracing::info!(
        "FDK of {} ({n_angles} × {n_rows} × {n_cols}, cone angle {:.2}°) onto {}×{}×{} voxels of {}",
        path.display(),
        g.cone_angle().to_degrees(),
        vol.nx,
        vol.ny,
        vol.nz,
        vol.voxel_size
    );
    tracing::info!(
        "backend: {} (prepared in {prep_s:.2} s while reading)",
        backend.name()
    );
    let t = Instant::now();
    backend
        .fdk_into(
            data.projections.view(),
            &g,
            &vol,
            &options,
            volume.view_mut(),
        )
        .with_context(|| path.display().to_string())?;
    let seconds = t.elapsed().as_secs_f64();
    tracing::info!(
        "reconstructed in {seconds:.3} s ({:.3} GU/s including filtering)",
        (vol.len() * n_angles) as f64 / seconds / 1e9
    );
    let (g, vol) = (&g, &vol);
    let meta = output::base_meta(&data.scan, "FDK")
        .int("n_angles", n_angles as i64)
        .float("sod", g.sod())
        .float("odd", g.odd())
        .float("voxel_size", f64::from(vol.voxel_size))
        .text("filter", &format!("{:?}", options.filter))
        .text("scan", &format!("{:?}", options.scan));
    output::write_cone(&job.output, format, volume.view(), &meta, vol.voxel_size)
}

/// The backend, prepared for an FDK of `vol` from projections of `g`, and
/// the output volume with every page touched (first-touch page faults
/// would otherwise land in the reconstruction's copy-out); seconds taken.
fn prepare(
    job: &Job,
    g: &ConeGeometry,
    vol: &ConeVolume,
    options: &FdkOptions,
) -> Result<(Box<dyn ConeBackend>, Array3<f32>, f64)> {
    let t = Instant::now();
    let backend = make_cone_backend(&job.backend)?;
    backend
        .prepare_fdk(g, vol, options)
        .context("preparing the FDK")?;
    let mut volume = Array3::<f32>::zeros((vol.nz, vol.ny, vol.nx));
    if let Some(v) = volume.as_slice_mut() {
        v.par_chunks_mut(1 << 16).for_each(|c| {
            // One write per 4 KiB page.
            c.iter_mut().step_by(1024).for_each(|x| *x = 0.0);
        });
    }
    Ok((backend, volume, t.elapsed().as_secs_f64()))
}
