//! The plain reference back projector: scalar, f64 arithmetic, no tricks.
//! Every fast back projector (CPU SIMD, GPU kernels) is compared with it.

use ndarray::{Array2, ArrayView2};

use crate::backend::Interpolation;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Unscaled back projection `Σ_θ p_θ(u)` of one sinogram `[angle][bin]` onto
/// `grid`, with `u = center + (x cos θ + y sin θ) / bin_width` evaluated and
/// interpolated in f64; bins outside the detector read as zero.
///
/// # Panics
/// If the sinogram's shape does not match the geometry (a programming error:
/// this function serves tests and comparisons).
pub fn backproject_reference(
    sinogram: ArrayView2<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    interpolation: Interpolation,
) -> Array2<f32> {
    assert_eq!(sinogram.dim(), (geometry.n_angles(), geometry.n_bins()));
    let n = geometry.n_bins() as i64;
    let bw = geometry.bin_width() as f64;
    let consts: Vec<(f64, f64, f64)> = geometry
        .angles()
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let a = a as f64;
            (a.cos(), a.sin(), geometry.center(i) as f64)
        })
        .collect();
    let bin = |a: usize, i: i64| -> f64 {
        if i < 0 || i >= n {
            0.0
        } else {
            sinogram[[a, i as usize]] as f64
        }
    };
    let h = grid.pixel_size as f64;
    let cx = (grid.nx as f64 - 1.0) * 0.5;
    let cy = (grid.ny as f64 - 1.0) * 0.5;
    Array2::from_shape_fn((grid.ny, grid.nx), |(iy, ix)| {
        let x = (ix as f64 - cx) * h;
        let y = (cy - iy as f64) * h;
        let mut sum = 0.0f64;
        for (a, &(c, s, center)) in consts.iter().enumerate() {
            let u = center + (x * c + y * s) / bw;
            sum += match interpolation {
                Interpolation::Nearest => bin(a, (u + 0.5).floor() as i64),
                Interpolation::Linear => {
                    let f = u.floor();
                    let w = u - f;
                    let i = f as i64;
                    bin(a, i) * (1.0 - w) + bin(a, i + 1) * w
                }
            };
        }
        sum as f32
    })
}
