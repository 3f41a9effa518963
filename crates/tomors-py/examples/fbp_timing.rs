//! Times the Rust side of `tomors.recon(proj, theta)` (FBP on the CPU) on a
//! `.npy` file, for the Python-overhead measurement of docs/python.md:
//! the same slab loop as `tomors._native.fbp` (rows transposed into
//! sinograms 32 at a time, `Backend::fbp` on each), without Python, after
//! the same untimed warm-up call.
//!
//! `cargo run --release -p tomors-py --example fbp_timing -- proj.npy theta.npy REPS [cpu|cuda]`
//! (backend as `tomors.recon(..., backend=...)`: `cuda` opens every GPU,
//! as the binding does) prints, per repetition, the wall-clock time and the process's CPU time
//! (user + system, all threads, from /proc/self/stat) in seconds.

use std::time::Instant;

use ndarray::{s, Array1, Array3};
use ndarray_npy::read_npy;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{check_finite, projections_to_sinograms};
use tomors_core::{Backend, FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !(4..=5).contains(&args.len()) {
        eprintln!("usage: fbp_timing PROJ.npy THETA.npy REPS [cpu|cuda]");
        std::process::exit(2);
    }
    let proj: Array3<f32> = read_npy(&args[1]).expect("projections [angle][row][col] float32");
    let theta: Array1<f32> = read_npy(&args[2]).expect("angles float32");
    let theta = theta.to_vec();
    let reps: usize = args[3].parse().expect("REPS");
    let backend: Box<dyn Backend> = match args.get(4).map(String::as_str) {
        None | Some("cpu") => Box::new(CpuBackend::new()),
        Some("cuda") => {
            let n = tomors_cuda::device_count().expect("a usable GPU");
            let list = tomors_cuda::parse_devices(None, n).expect("devices");
            Box::new(
                tomors_cuda::MultiCudaBackend::new(&list, tomors_cuda::CudaOptions::default())
                    .expect("the CUDA backend"),
            )
        }
        Some(other) => {
            eprintln!("unknown backend '{other}' (use cpu or cuda)");
            std::process::exit(2);
        }
    };
    // One untimed call on the same data, as scripts/python_overhead.py makes
    // before timing `tomors.recon` (thread pool, FFT plans, GPU buffers and
    // kernels).
    run(backend.as_ref(), &proj, &theta);
    for _ in 0..reps {
        let (t, cpu) = (Instant::now(), cpu_seconds());
        let out = run(backend.as_ref(), &proj, &theta);
        println!(
            "{:.4} {:.2}",
            t.elapsed().as_secs_f64(),
            cpu_seconds() - cpu
        );
        std::hint::black_box(&out);
    }
}

/// The slab loop of `tomors._native.fbp`: rows transposed into sinograms 32
/// at a time, `Backend::fbp` on each.
fn run(backend: &dyn Backend, proj: &Array3<f32>, theta: &[f32]) -> Array3<f32> {
    let (na, nr, nb) = proj.dim();
    check_finite(proj.view(), "the projections").expect("finite");
    let g = ParallelGeometry::new(theta.to_vec(), nb).expect("geometry");
    assert_eq!(g.n_angles(), na);
    let grid = SliceGrid::for_geometry(&g);
    let mut out = Array3::<f32>::zeros((nr, grid.ny, grid.nx));
    let mut start = 0;
    while start < nr {
        let end = (start + 32).min(nr);
        let sino = projections_to_sinograms(proj.view(), start..end).expect("sinograms");
        backend
            .fbp(
                sino.view(),
                &g,
                &grid,
                &FilterSpec::default(),
                Interpolation::Linear,
                out.slice_mut(s![start..end, .., ..]),
            )
            .expect("fbp");
        start = end;
    }
    out
}

/// User + system CPU time of this process (all threads) from /proc/self/stat,
/// in seconds (clock ticks of 1/100 s, the Linux default).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the
    // 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map(|r| r.1).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / 100.0
}
