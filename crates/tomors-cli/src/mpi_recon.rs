//! `tomors recon` under `mpirun`/`srun` (feature `mpi`): turns the parsed
//! arguments into a [`tomors_mpi::ReconJob`] on every rank and hands it to
//! `tomors-mpi`, which splits the work (docs/distributed.md).

use anyhow::{bail, Context, Result};
use tomors_core::cpu::CpuBackend;
use tomors_io::stream::parse_bytes;
use tomors_io::CenterOptions;
use tomors_mpi::{Center, Method, ReconJob};

use crate::backend_select::{make_backend, make_cone_backend, BackendArgs, BackendChoice};
use crate::cmd::recon::{
    load_angles, output_format, parse_rows, raw_spec, AngleUnit, CenterArg, ReconArgs,
    DEFAULT_MEMORY,
};
use crate::output::check_target;

/// Runs `args` as one rank of the distributed job.
pub fn run(args: &ReconArgs) -> Result<()> {
    tomors_mpi::run_recon(|| job(args))
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
/// GPU (local rank modulo the GPUs), or the CPU where there is none.
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

fn job(args: &ReconArgs) -> Result<ReconJob> {
    let input = &args.input;
    check_target(&args.out, args.overwrite)?;
    let format = output_format(args)?;
    let memory = parse_bytes(args.memory.as_deref().unwrap_or(DEFAULT_MEMORY))
        .map_err(|e| anyhow::anyhow!("--memory: {e}"))?;
    let preprocess = args.pre.preprocess()?;
    let mut opts = args.io.open_options();
    opts.raw = raw_spec(args)?;
    let cone = args.cone.is_cone();
    if !cone {
        // As the single-process streaming path reads real data.
        opts.angles_unit = args
            .angles
            .is_none()
            .then_some(args.angles_unit)
            .flatten()
            .map(|u| match u {
                AngleUnit::Rad => tomors_io::AngleUnit::Radians,
                AngleUnit::Deg => tomors_io::AngleUnit::Degrees,
            });
        if let Some(r) = args.angle_range {
            if !(r.is_finite() && r > 0.0) {
                bail!("--angle-range {r} must be positive");
            }
            opts.angle_range = Some((r as f64).to_radians());
        }
    } else {
        let is_npy = input
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"));
        if !is_npy || args.raw_shape.is_some() {
            bail!(
                "{}: --geometry cone reads .npy projections [angle][row][col]",
                input.display()
            );
        }
        if args.slices.is_some() || args.center.is_some() {
            bail!("--slices and --center are for parallel geometry (cone beam: --principal-point)");
        }
    }
    let source = tomors_io::open(input, &opts)?;
    let [n_angles, n_rows, n_cols] = source.shape();
    let quiet = crate::progress::is_quiet();
    let backend_args = args.backend.clone();
    let (angles, method) = if cone {
        let angles = crate::cmd::cone::cone_angles(args, n_angles, n_rows, n_cols)?;
        let geometry = args
            .cone
            .geometry(angles.clone(), n_rows, n_cols)
            .with_context(|| input.display().to_string())?;
        let volume = args.cone.volume(&geometry)?;
        let method = if args.iterative.is_iterative() {
            if args.backend.backend == BackendChoice::Cuda {
                bail!(
                    "under MPI, cone-beam --algorithm runs on the CPU (use --backend cpu or auto)"
                );
            }
            Method::ConeIterative {
                geometry,
                volume,
                options: args.iterative.options()?,
                projector: args.iterative.projector,
            }
        } else {
            let filter = args.filter.fbp_options(args.slab).filter;
            Method::Fdk {
                geometry,
                volume,
                options: tomors_core::cone::FdkOptions {
                    filter,
                    scan: args.cone.scan(),
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
        (angles, method)
    } else {
        // The angles of the single-process paths: --angles or the source's
        // for FBP (streaming), --angles or --angle-range for --algorithm.
        let angles = if args.angles.is_some() || args.iterative.is_iterative() {
            load_angles(args, n_angles)?
        } else {
            source.angles().to_vec()
        };
        let rows = parse_rows(args.slices.as_deref(), n_rows)?;
        let center = match args.center {
            None => Center::Default,
            Some(CenterArg::At(c)) => Center::At(c),
            Some(CenterArg::Auto) => {
                let search = crate::cmd::center::search_rows(&rows, args.center_row);
                Center::Auto(Box::new(move |source, angles, pre| {
                    let found = crate::cmd::center::auto_center(
                        source,
                        angles,
                        pre,
                        &search,
                        &CenterOptions::default(),
                    )?;
                    Ok(found.center)
                }))
            }
        };
        let method = if args.iterative.is_iterative() {
            if args.backend.backend == BackendChoice::Cuda {
                bail!("under MPI, --algorithm runs on the CPU (use --backend cpu or auto)");
            }
            Method::Iterative {
                center,
                options: args.iterative.options()?,
                projector: args.iterative.projector,
            }
        } else {
            Method::Fbp {
                center,
                options: args.filter.fbp_options(args.slab),
                backend: Box::new(move |local_rank| {
                    match rank_backend(&backend_args, local_rank)? {
                        Some(b) => make_backend(&b),
                        None => Ok(Box::new(CpuBackend::new())),
                    }
                }),
            }
        };
        return Ok(ReconJob {
            source,
            angles,
            rows,
            preprocess,
            out: args.out.clone(),
            format,
            overwrite: args.overwrite,
            memory,
            quiet,
            method,
        });
    };
    Ok(ReconJob {
        source,
        angles,
        rows: 0..n_rows,
        preprocess,
        out: args.out.clone(),
        format,
        overwrite: args.overwrite,
        memory,
        quiet,
        method,
    })
}
