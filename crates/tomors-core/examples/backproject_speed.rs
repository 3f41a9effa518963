//! CPU back-projection speed without the CLI (for profiling the kernels):
//! `cargo run --release -p tomors-core --example backproject_speed -- N SLICES [linear|nearest]`.
//! Prints GU/s from wall time and from this process's CPU time.

use std::time::Instant;

use ndarray::Array3;
use tomors_core::cpu::CpuBackend;
use tomors_core::geometry::uniform_angles;
use tomors_core::{Backend, Interpolation, ParallelGeometry, SliceGrid};

fn cpu_seconds() -> f64 {
    // utime + stime of this process, from /proc (Linux only; 0 elsewhere).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(1024);
    let slices: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(16);
    let interp: Interpolation = args.get(3).and_then(|v| v.parse().ok()).unwrap_or_default();
    let geometry = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let sino = Array3::from_shape_fn((slices, n, n), |(s, a, b)| {
        ((s * 7 + a * 3 + b) % 17) as f32
    });
    let mut out = Array3::<f32>::zeros((slices, n, n));
    let backend = CpuBackend::new();
    let mut run = || {
        backend
            .backproject(sino.view(), &geometry, &grid, interp, 1.0, out.view_mut())
            .unwrap()
    };
    run();
    let (t, c) = (Instant::now(), cpu_seconds());
    run();
    let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
    let gu = (n * n * n * slices) as f64 / 1e9;
    println!(
        "n={n} slices={slices} {interp}: {:.2} GU/s wall, {:.2} GU per CPU-second ({} threads)",
        gu / wall,
        gu / cpu,
        rayon::current_num_threads()
    );
}
