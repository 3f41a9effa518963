//! GPU SART, ART and the block-parallel method, seconds per sweep (issue
//! 16): `cargo run --release -p tomors-cuda --example sart_bench [n]
//! [angles] [slices] [sweeps]` (needs a GPU; defaults 256 256 16 5).
//!
//! Geometry: `slices` slices of n² from `angles` projections of n bins
//! over π, random sinograms in [0, 1), x ≥ 0, λ 1. SART = one projection
//! per block with row/column-sum weights (ASTRA's SART_CUDA, which
//! `scripts/astra_sart.py` times on the same geometry slice by slice).
//! Prints per method the seconds per sweep host to host (the whole
//! `sirt_cuda` call, upload, weights and download included, / sweeps) and
//! of the device loop.

mod common;

use common::{bench_options, random01_serial as random01, usize_args};
use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, RayOrder, Weighting};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::{sirt_cuda, CudaBackend, GpuSirtOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("sart_bench: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = usize_args()?;
    let n = args.first().copied().unwrap_or(256);
    let na = args.get(1).copied().unwrap_or(256);
    let ns = args.get(2).copied().unwrap_or(16);
    let sweeps = args.get(3).copied().unwrap_or(5);
    let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), n)?;
    let grid = SliceGrid::for_geometry(&geom);
    let b = Array3::from_shape_vec((ns, na, n), random01(ns * na * n, 2))?;
    let be = CudaBackend::new(0)?;
    println!("geometry: {ns} slices of {n}², {na} projections of {n} bins over π, {sweeps} sweeps");
    for (name, algorithm) in [
        (
            "SART (1 projection per block, row/column sums)",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 1,
            },
        ),
        (
            "ART (ray batches)",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
        ),
        (
            "block-parallel (16 projections per block)",
            Algorithm::BlockParallel {
                projections_per_block: 16,
            },
        ),
    ] {
        let options = bench_options(algorithm, sweeps, false);
        // Warm-up (module compilation, cubin cache), then the timed call.
        let mut warm = options;
        warm.iterations = 1;
        sirt_cuda(
            &be,
            &geom,
            &grid,
            b.view(),
            None,
            &warm,
            &GpuSirtOptions::default(),
            &|_| true,
        )?;
        let t = std::time::Instant::now();
        let (r, st) = sirt_cuda(
            &be,
            &geom,
            &grid,
            b.view(),
            None,
            &options,
            &GpuSirtOptions::default(),
            &|_| true,
        )?;
        let wall = t.elapsed().as_secs_f64();
        let it = r.iterations.max(1) as f64;
        println!(
            "{name}: {:.4} s/sweep host to host ({wall:.3} s for {} sweeps), device loop {:.4} \
             s/sweep",
            wall / it,
            r.iterations,
            st.loop_s / it
        );
    }
    Ok(())
}
