//! Test helpers: a plain f64 reference back projector (the documented
//! convention of tomors-core), the analytic modified Shepp–Logan phantom,
//! random data, the comparisons of the iterative tests, and the
//! GPU-or-skip rule. `cone` holds the cone-beam fixtures, `exact` those of
//! the exact back projectors (`sweep`, `tensor`), `joseph` the parallel-beam
//! Joseph ones.
#![allow(dead_code)]

pub mod cone;
pub mod exact;
pub mod joseph;

use ndarray::{Array2, Array3, ArrayView2, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, IterativeResult, Weighting};
use tomors_core::phantom::Phantom2d;
use tomors_core::{Interpolation, ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::GpuIteration;

/// Whether `TOMORS_REQUIRE_GPU=1`: a missing GPU (or CUDA library) fails
/// the GPU tests instead of skipping them.
pub fn gpu_required() -> bool {
    std::env::var("TOMORS_REQUIRE_GPU")
        .map(|v| v == "1")
        .unwrap_or(false)
}

/// The CUDA backend on device 0, or `None` (with a printed reason) when no
/// GPU is usable. Panics instead when `TOMORS_REQUIRE_GPU=1`.
pub fn gpu_or_skip(test: &str) -> Option<tomors_cuda::CudaBackend> {
    let required = gpu_required();
    match tomors_cuda::device_count().and_then(|_| tomors_cuda::CudaBackend::new(0)) {
        Ok(b) => Some(b),
        Err(e) if required => panic!("{test}: TOMORS_REQUIRE_GPU=1 but no GPU is usable: {e}"),
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            None
        }
    }
}

/// Deterministic values in [-1, 1) from a seed (xorshift).
pub fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// The seed of the random test data: `TOMORS_TEST_SEED` when set (to
/// reproduce or vary a run), else a fixed value; printed either way.
pub fn test_seed() -> u64 {
    const DEFAULT: u64 = 0x5EED_2024_0001;
    let seed = match std::env::var("TOMORS_TEST_SEED") {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("TOMORS_TEST_SEED={v:?} is not an unsigned integer")),
        Err(_) => DEFAULT,
    };
    eprintln!("seed {seed} (set TOMORS_TEST_SEED to change it)");
    seed
}

/// The CPU reference back projector of tomors-core (f64, unscaled sum).
pub fn reference_bp(
    sino: ArrayView2<'_, f32>,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    interp: Interpolation,
) -> Array2<f32> {
    tomors_core::cpu::backproject_reference(sino, geom, grid, interp)
}

/// Pixels with at least one projection whose exact (f64) nearest-bin
/// position u + 0.5 lies within `eps` of an integer (a tie: f32 rounding may
/// pick either bin there).
pub fn tie_pixels(geom: &ParallelGeometry, grid: &SliceGrid, eps: f64) -> Array2<bool> {
    let consts = geom.projection_constants();
    let bw = geom.bin_width() as f64;
    Array2::from_shape_fn((grid.ny, grid.nx), |(iy, ix)| {
        let x = (ix as f64 - (grid.nx as f64 - 1.0) * 0.5) * grid.pixel_size as f64;
        let y = ((grid.ny as f64 - 1.0) * 0.5 - iy as f64) * grid.pixel_size as f64;
        consts.iter().any(|c| {
            let t = c.center as f64 + (x * c.cos as f64 + y * c.sin as f64) / bw + 0.5;
            (t - t.round()).abs() < eps
        })
    })
}

/// ‖a − b‖ / ‖b‖ over all elements.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        num += (x as f64 - y as f64).powi(2);
        den += (y as f64).powi(2);
    }
    (num / den.max(1e-300)).sqrt()
}

/// Stacks one 2D array `k` times.
pub fn stack(a: &Array2<f32>, k: usize) -> Array3<f32> {
    let (r, c) = a.dim();
    let mut s = Array3::zeros((k, r, c));
    for mut plane in s.outer_iter_mut() {
        plane.assign(a);
    }
    s
}

/// The elements of a 3D array in C order.
pub fn flat(a: &Array3<f32>) -> Vec<f32> {
    a.iter().copied().collect()
}

/// A 3D array of `random` values.
pub fn rand3(dim: (usize, usize, usize), seed: u64) -> Array3<f32> {
    Array3::from_shape_vec(dim, random(dim.0 * dim.1 * dim.2, seed)).unwrap()
}

/// ⟨a, b⟩ in f64.
pub fn dot(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    a.iter().zip(b).map(|(&u, &v)| u as f64 * v as f64).sum()
}

/// Relative difference of two scalars.
pub fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// The largest relative difference of two sequences (residual histories),
/// element by element.
pub fn max_rel(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&a, &b)| rel(a, b))
        .fold(0.0, f64::max)
}

/// How far a GPU run is from the CPU's: (the iterate's relative L2, the
/// relaxation's relative difference, the residual history's largest
/// relative difference).
pub fn run_gap(got: &IterativeResult<f32>, want: &IterativeResult<f32>) -> (f64, f64, f64) {
    (
        rel_l2(&flat(&got.x), &flat(&want.x)),
        rel(got.relaxation, want.relaxation),
        max_rel(&got.residuals, &want.residuals),
    )
}

/// Asserts that every value of `x` keeps the bounds of `constraint`.
pub fn assert_constraint(x: &Array3<f32>, constraint: Constraint, what: &str) {
    if let Some(lo) = constraint.min {
        assert!(x.iter().all(|&v| v >= lo as f32), "{what}: below min");
    }
    if let Some(hi) = constraint.max {
        assert!(x.iter().all(|&v| v <= hi as f32), "{what}: above max");
    }
}

/// Options of a fixed number of iterations with the residual history
/// tracked and no tolerance.
pub fn fixed_options(
    algorithm: Algorithm,
    iterations: usize,
    relaxation: Option<f64>,
    constraint: Constraint,
) -> IterativeOptions {
    IterativeOptions {
        algorithm,
        iterations,
        relaxation,
        constraint,
        tolerance: None,
        track_residual: true,
    }
}

/// A progress callback that never stops the iteration.
pub fn no_progress() -> impl Fn(&GpuIteration) -> bool + Sync {
    |_: &GpuIteration| true
}

/// The exact 60-angle Shepp–Logan on a 256² grid (two slices: the phantom
/// and half of it, so the stack has a padded slice group), and the phantom.
pub fn shepp_256() -> (ParallelGeometry, SliceGrid, Array3<f32>, Array2<f32>) {
    let n = 256;
    let geom = ParallelGeometry::new(uniform_angles(60, std::f32::consts::PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let p = Phantom2d::shepp_logan();
    let s = p.project(&geom, n as f64 / 2.0);
    let mut sino = Array3::<f32>::zeros((2, 60, n));
    sino.index_axis_mut(Axis(0), 0).assign(&s);
    sino.index_axis_mut(Axis(0), 1).assign(&s.mapv(|v| 0.5 * v));
    let truth = p.rasterize(&grid, n as f64 / 2.0, 4);
    (geom, grid, sino, truth)
}

/// The reconstruction disc of `truth` (radius 0.45 of the size) and the
/// NRMSE of a zero image inside it (what a method must beat).
pub fn disc_and_zero_error(truth: &Array2<f32>) -> (Array2<bool>, f64) {
    let (ny, nx) = truth.dim();
    let mask = tomors_core::metrics::disc_mask(ny, nx, 0.45);
    let zero = Array2::<f32>::zeros((ny, nx));
    let e_zero = tomors_core::metrics::nrmse(zero.view(), truth.view(), Some(&mask)).unwrap();
    (mask, e_zero)
}

/// SART and BLOCK-IT (Cimmino, blocks of 10) as the GPU tests run them:
/// (name, algorithm, relaxation, constraint).
pub fn sart_and_block_it() -> [(&'static str, Algorithm, Option<f64>, Constraint); 2] {
    [
        (
            "SART",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 1,
            },
            None,
            Constraint::non_negative(),
        ),
        (
            "BLOCK-IT (Cimmino, blocks of 10)",
            Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: 10,
            },
            None,
            Constraint::none(),
        ),
    ]
}
