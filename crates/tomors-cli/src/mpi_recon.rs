//! `tomors recon` under `mpirun`/`srun` (feature `mpi`): turns the
//! validated [`Job`] into a [`tomors_mpi::ReconJob`] on every rank and
//! hands it to `tomors-mpi`, which splits the work (docs/distributed.md).

use anyhow::{bail, Context, Result};
use tomors_core::cone::FdkOptions;
use tomors_core::cpu::CpuBackend;
use tomors_core::iterative::{Algorithm, ProjectorKind};
use tomors_mpi::{Center, GpuChooser, Method, ReconJob};

use crate::backend_select::{make_backend, make_cone_backend, BackendArgs, BackendChoice};
use crate::job::geometry::CenterArg;
use crate::job::input::{self, AnglesFrom};
use crate::job::{center, Job, Route, DEFAULT_MEMORY};

/// Runs `job` (validated, taking `route`) as one rank of the distributed
/// job.
pub fn run(job: &Job, route: Route) -> Result<()> {
    tomors_mpi::run_recon(|| rank_job(job, route))
}

/// The GPU list of `--devices` (None: every GPU of the host).
fn device_list(b: &BackendArgs) -> Result<Option<Vec<usize>>> {
    match b.devices.as_deref() {
        None => Ok(None),
        Some(spec) => {
            let available = tomors_cuda::device_count()?;
            Ok(Some(tomors_cuda::parse_devices(Some(spec), available)?))
        }
    }
}

/// The backend arguments of one rank: `--devices` narrowed to the rank's
/// GPU (local rank modulo the GPUs), or `None` for the CPU.
fn rank_backend(b: &BackendArgs, local_rank: usize) -> Result<Option<BackendArgs>> {
    if b.backend == BackendChoice::Cpu {
        return Ok(None);
    }
    let list = match device_list(b) {
        Ok(l) => l,
        Err(e) if b.backend == BackendChoice::Auto => {
            tracing::info!("no usable GPU ({e:#}); using the CPU");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    match tomors_mpi::gpu_for_rank(local_rank, list.as_deref()) {
        Some(d) => Ok(Some(BackendArgs {
            devices: Some(d.to_string()),
            ..b.clone()
        })),
        None if b.backend == BackendChoice::Cuda => bail!("--backend cuda: no usable GPU"),
        None => Ok(None),
    }
}

/// The GPU of a rank for the iterative methods (`None`: the CPU), from
/// `--devices` as FBP chooses it (local rank modulo the GPUs).
fn rank_gpu(b: &BackendArgs, local_rank: usize) -> Result<Option<usize>> {
    match rank_backend(b, local_rank)? {
        Some(args) => {
            let d = args.devices.as_deref().unwrap_or("0");
            Ok(Some(d.parse().with_context(|| format!("GPU {d}"))?))
        }
        None => Ok(None),
    }
}

/// Whether the iterative method runs on the ranks' GPUs: parallel beam,
/// SIRT-type and block-sequential methods with the Joseph projector; cone
/// beam, SIRT-type methods with the Joseph or voxel pair and
/// block-sequential ones with the Joseph pair. `--backend cuda` insists
/// (an error for other methods), `auto` takes the GPUs where they run the
/// method; the rank's GPU is chosen on the rank.
fn iterative_gpu(job: &Job, cone: bool) -> Result<Option<GpuChooser>> {
    let Some(name) = job.method.algorithm else {
        return Ok(None);
    };
    let options = job.method.iterative.options(name)?;
    let kind = job.method.iterative.projector();
    let capable = match options.algorithm {
        Algorithm::Sirt(_) if cone => matches!(kind, ProjectorKind::Joseph | ProjectorKind::Voxel),
        Algorithm::Sirt(_) | Algorithm::BlockSequential { .. } => kind == ProjectorKind::Joseph,
        _ => false,
    };
    match job.backend.backend {
        BackendChoice::Cpu => Ok(None),
        BackendChoice::Cuda if !capable => bail!(
            "--backend cuda runs sirt, landweber, cimmino, sart and block-it with the joseph projector \
             (cone beam: sirt, landweber and cimmino also with the voxel projector); \
             {name:?} with the {kind:?} projector runs on the CPU (use --backend cpu or auto)"
        ),
        BackendChoice::Auto if !capable => Ok(None),
        _ => {
            let args = job.backend.clone();
            Ok(Some(Box::new(move |local_rank| rank_gpu(&args, local_rank))))
        }
    }
}

fn rank_job(job: &Job, route: Route) -> Result<ReconJob> {
    let format = job.output.check()?;
    let cone = matches!(route, Route::ConeFdk | Route::ConeIterative);
    let iterative = matches!(route, Route::Iterative | Route::ConeIterative);
    let gpu = if iterative {
        iterative_gpu(job, route == Route::ConeIterative)?
    } else {
        None
    };
    let scan = input::open(&job.input, &job.pre, cone)?;
    let path = scan.path().to_path_buf();
    let [n_angles, n_rows, n_cols] = scan.shape();
    let quiet = crate::progress::is_quiet();
    let backend_args = job.backend.clone();
    let (angles, rows, method) = if cone {
        let angles = match scan.angles_from {
            AnglesFrom::Default => job.geometry.cone.default_angles(n_angles, n_rows, n_cols)?,
            _ => scan.angles.clone(),
        };
        let geometry = job
            .geometry
            .cone
            .geometry(angles.clone(), n_rows, n_cols)
            .with_context(|| path.display().to_string())?;
        let volume = job.geometry.cone.volume(&geometry)?;
        let method = if let Some(name) = job.method.algorithm {
            Method::ConeIterative {
                geometry,
                volume,
                options: job.method.iterative.options(name)?,
                projector: job.method.iterative.projector(),
                gpu,
            }
        } else {
            Method::Fdk {
                geometry,
                volume,
                options: FdkOptions {
                    filter: job.method.fbp.filter()?,
                    scan: job.geometry.cone.scan(),
                    slab: 0,
                },
                backend: Box::new(move |local_rank| {
                    match rank_backend(&backend_args, local_rank)? {
                        Some(b) => make_cone_backend(&b),
                        None => Ok(Box::new(CpuBackend::new())),
                    }
                }),
            }
        };
        (angles, 0..n_rows, method)
    } else {
        let rows = job.geometry.rows(n_rows)?;
        let centre = match job.geometry.center {
            // Stitched when opened: the axis of the wide rows.
            _ if scan.half.is_some() => Center::At(scan.half.map_or(0.0, |h| h.center as f32)),
            None => Center::Default,
            Some(CenterArg::At(c)) => Center::At(c),
            Some(CenterArg::Drift(..)) => {
                anyhow::bail!("--center A:B (a drifting axis) is not supported under mpirun yet; give one centre")
            }
            Some(CenterArg::Auto) => {
                let search = center::search_rows(&rows, job.geometry.center_row);
                let options = center::search_options(&scan, &job.geometry)?;
                Center::Auto(Box::new(move |source, angles, pre| {
                    let found = center::auto_center(source, angles, pre, &search, &options)?;
                    tracing::info!(
                        "rotation centre {:.2} (quality {:.3})",
                        found.center,
                        found.quality
                    );
                    Ok(found.center)
                }))
            }
        };
        let method = if let Some(name) = job.method.algorithm {
            Method::Iterative {
                center: centre,
                options: job.method.iterative.options(name)?,
                projector: job.method.iterative.projector(),
                gpu,
            }
        } else {
            Method::Fbp {
                center: centre,
                options: job.method.fbp.options()?,
                backend: Box::new(move |local_rank| {
                    match rank_backend(&backend_args, local_rank)? {
                        Some(b) => make_backend(&b),
                        None => Ok(Box::new(CpuBackend::new())),
                    }
                }),
            }
        };
        (scan.angles.clone(), rows, method)
    };
    Ok(ReconJob {
        source: scan.source,
        angles,
        rows,
        preprocess: scan.pre,
        out: job.output.path.clone(),
        format,
        overwrite: job.output.overwrite,
        memory: job.memory.unwrap_or(DEFAULT_MEMORY),
        quiet,
        method,
        provenance: job.output.provenance.clone(),
    })
}
