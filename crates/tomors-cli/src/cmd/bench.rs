//! `tomors bench`: back-projection speed on synthetic data.

use std::time::Instant;

use anyhow::{bail, Result};
use clap::ValueEnum;
use ndarray::Array3;
use rand::{rngs::StdRng, Rng, SeedableRng};
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, Interpolation, ParallelGeometry, SliceGrid};

use crate::backend_select::{make_backend, BackendArgs, BackendChoice};
use crate::cuda_cli;

/// Interpolations to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum InterpChoice {
    /// Linear only.
    Linear,
    /// Nearest only.
    Nearest,
    /// Both.
    Both,
}

/// Arguments of `tomors bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Sizes n: n bins × n angles → n × n slices.
    #[arg(long, value_delimiter = ',', default_values_t = vec![256, 512, 1024, 2048])]
    pub sizes: Vec<usize>,
    /// Slices per measurement (CPU: multiples of 16 fill the SIMD lane groups).
    #[arg(long, default_value_t = 16)]
    pub slices: usize,
    /// Interpolation modes to measure.
    #[arg(long, value_enum, default_value_t = InterpChoice::Both)]
    pub interp: InterpChoice,
    /// Timed repetitions per case (median reported; one when a run is long).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// GPU only: a shorter run of fewer cases.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// Runs `tomors bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    if args.sizes.is_empty() || args.sizes.iter().any(|&n| n < 2) {
        bail!("--sizes needs sizes of at least 2");
    }
    if args.slices == 0 || args.reps == 0 {
        bail!("--slices and --reps must be at least 1");
    }
    if args.backend.backend == BackendChoice::Cuda {
        return cuda_cli::bench(&args.sizes, args.quick);
    }
    let backend = make_backend(&args.backend)?;
    let interps = match args.interp {
        InterpChoice::Linear => vec![Interpolation::Linear],
        InterpChoice::Nearest => vec![Interpolation::Nearest],
        InterpChoice::Both => vec![Interpolation::Linear, Interpolation::Nearest],
    };
    println!("back projection on {}", backend.name());
    println!(
        "{:>6} {:>7} {:>7} {:>8} {:>10} {:>8}",
        "size", "angles", "slices", "interp", "time [s]", "GU/s"
    );
    for &n in &args.sizes {
        let geometry = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)?;
        let grid = SliceGrid::for_geometry(&geometry);
        let mut rng = StdRng::seed_from_u64(n as u64);
        let bytes = 2 * tomors_io::memory::f32_bytes(&[args.slices, n, n]);
        tomors_io::memory::ensure_fits_param(bytes, &format!("size {n}"))?;
        let sino = Array3::from_shape_fn((args.slices, n, n), |_| rng.gen_range(-1.0f32..1.0));
        let mut out = Array3::<f32>::zeros((args.slices, n, n));
        for &interp in &interps {
            let seconds = time_backprojection(
                backend.as_ref(),
                &sino,
                &geometry,
                &grid,
                interp,
                &mut out,
                args.reps,
            )?;
            let updates = (n * n * n * args.slices) as f64;
            println!(
                "{:>6} {:>7} {:>7} {:>8} {:>10.4} {:>8.2}",
                n,
                n,
                args.slices,
                interp.to_string(),
                seconds,
                updates / seconds / 1e9
            );
        }
    }
    Ok(())
}

/// Median time of `reps` runs after one warm-up run (a single timed run
/// when the warm-up took over 3 s).
fn time_backprojection(
    backend: &dyn Backend,
    sino: &Array3<f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    interp: Interpolation,
    out: &mut Array3<f32>,
    reps: usize,
) -> Result<f64> {
    let mut once = || -> Result<f64> {
        let t = Instant::now();
        backend.backproject(sino.view(), geometry, grid, interp, 1.0, out.view_mut())?;
        Ok(t.elapsed().as_secs_f64())
    };
    let warm = once()?;
    let reps = if warm > 3.0 { 1 } else { reps };
    let mut times: Vec<f64> = (0..reps).map(|_| once()).collect::<Result<_>>()?;
    times.sort_by(|a, b| a.total_cmp(b));
    Ok(times[times.len() / 2])
}
