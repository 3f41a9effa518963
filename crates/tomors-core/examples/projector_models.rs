//! The five projection models of the thesis side by side (a measurement
//! program for docs/iterative.md, not a test):
//! `cargo run --release -p tomors-core --example projector_models`.
//!
//! 1. Cost: non-zeros per ray, and the CPU time of `forward_slice` /
//!    `back_slice` on one 256² slice from 180 projections of 256 bins (f32)
//!    and of `forward` / `back` on a stack of 8 such slices, all on one
//!    thread (best of 5 or 3 calls after a warm-up; thread CPU time, so a
//!    shared, loaded machine still gives usable figures).
//! 2. Quality: NRMSE of SIRT (row/column sums, x ≥ 0, f32) after 50 and
//!    150 iterations on the exact 64² modified Shepp–Logan from 60
//!    projections over π, beside FBP (the case of
//!    `tests/projectors_thesis.rs`).

use std::time::Instant;

use ndarray::{Array2, Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, projector, reconstruct, Algorithm, Constraint, IterativeOptions, ProjectorKind,
    Weighting,
};
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

/// CPU time of the calling thread in seconds, from the first field of
/// `/proc/thread-self/schedstat` (nanoseconds on the CPU): unlike wall time
/// it does not count the time other processes on a shared machine hold the
/// core (cache sharing still shows).
fn thread_cpu() -> f64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat")
        .expect("Linux /proc/thread-self/schedstat");
    let ns: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
    ns * 1e-9
}

/// Smallest CPU time of `runs` calls of `f` after one warm-up call, all on
/// the current thread.
fn best_of(runs: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..runs)
        .map(|_| {
            let t = thread_cpu();
            f();
            thread_cpu() - t
        })
        .fold(f64::INFINITY, f64::min)
}

fn cost() {
    let (n, n_angles, slices) = (256, 180, 8);
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let angles = all_angles(n_angles);
    let phantom = Phantom2d::shepp_logan();
    let image = phantom.rasterize(&grid, n as f64 / 2.0, 2);
    let sino = phantom.project(&geometry, n as f64 / 2.0);
    let vol = Array3::from_shape_fn((slices, n, n), |(_, y, x)| image[[y, x]]);
    let sinos = Array3::from_shape_fn((slices, n_angles, n), |(_, a, k)| sino[[a, k]]);
    // Everything on one thread of a one-thread pool (rayon's parallel loops
    // inside the projectors then run on it too).
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    println!("## Cost: {n}² pixels, {n_angles} projections of {n} bins, f32, one thread");
    println!();
    println!(
        "CPU time of one call (best of 5): one slice, and per slice of a stack of {slices} \
         (the ray projectors trace a ray once for all slices)."
    );
    println!();
    println!(
        "| projector | matched | non-zeros per ray | forward (ms) | back (ms) | \
         forward ns per non-zero | forward, stack (ms per slice) | back, stack (ms per slice) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for kind in ProjectorKind::ALL {
        let p = projector::<f32>(kind, &geometry, &grid, None).unwrap();
        let mut nnz = 0usize;
        for a in 0..n_angles {
            for k in 0..n {
                p.trace_ray(a, k, &mut |_, _| nnz += 1);
            }
        }
        let per_ray = nnz as f64 / (n_angles * n) as f64;
        let mut s1 = Array2::zeros((n_angles, n));
        let mut b1 = Array2::zeros((n, n));
        let mut s8 = Array3::zeros((slices, n_angles, n));
        let mut b8 = Array3::zeros((slices, n, n));
        let (tf, tb, tf8, tb8) = one.install(|| {
            (
                best_of(5, || {
                    p.forward_slice(image.view(), &angles, s1.view_mut())
                        .unwrap()
                }),
                best_of(5, || {
                    p.back_slice(sino.view(), &angles, b1.view_mut()).unwrap()
                }),
                best_of(3, || p.forward(vol.view(), &angles, s8.view_mut()).unwrap()),
                best_of(3, || p.back(sinos.view(), &angles, b8.view_mut()).unwrap()),
            )
        });
        println!(
            "| {kind} | {} | {per_ray:.1} | {:.1} | {:.1} | {:.2} | {:.1} | {:.1} |",
            if p.is_matched() { "yes" } else { "no" },
            tf * 1e3,
            tb * 1e3,
            tf * 1e9 / nnz as f64,
            tf8 * 1e3 / slices as f64,
            tb8 * 1e3 / slices as f64,
        );
        // The stack gives the single slice's answer (a guard against timing
        // a broken path).
        let d = (&s8.index_axis(Axis(0), 3) - &s1)
            .iter()
            .fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(d <= 1e-4 * s1.iter().fold(0.0f32, |m, v| m.max(v.abs())));
    }
}

fn quality() {
    let n = 64;
    let geometry = ParallelGeometry::new(uniform_angles(60, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let phantom = Phantom2d::shepp_logan();
    let scale = n as f64 / 2.0;
    let sino = phantom.project(&geometry, scale).insert_axis(Axis(0));
    let truth = phantom.rasterize(&grid, scale, 4);
    let mask = disc_mask(n, n, 0.45);
    let error = |x: ndarray::ArrayView2<'_, f32>| nrmse(x, truth.view(), Some(&mask)).unwrap();
    let fbp = fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &geometry,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    println!();
    println!("## Quality: SIRT on the exact {n}² Shepp–Logan, 60 projections");
    println!();
    println!("FBP NRMSE {:.4}", error(fbp.index_axis(Axis(0), 0)));
    println!();
    println!("| projector | SIRT 50 | SIRT 150 | wall time, 150 iterations, all threads (s) |");
    println!("|---|---|---|---|");
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 150,
        constraint: Constraint::non_negative(),
        ..IterativeOptions::default()
    };
    for kind in ProjectorKind::ALL {
        let p = projector::<f32>(kind, &geometry, &grid, None).unwrap();
        let mut errors = Vec::new();
        let t = Instant::now();
        reconstruct(p.as_ref(), sino.view(), None, &options, &mut |info| {
            errors.push(error(info.x.index_axis(Axis(0), 0)));
            true
        })
        .unwrap();
        let dt = t.elapsed().as_secs_f64();
        println!(
            "| {kind} | {:.4} | {:.4} | {dt:.2} |",
            errors[49], errors[149]
        );
    }
}

fn main() {
    println!(
        "rayon threads: {}, cpus: {}",
        rayon::current_num_threads(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    cost();
    quality();
}
