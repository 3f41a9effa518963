//! A CPU model of the texture back projectors, for tests: the same f32
//! texture coordinates as the kernels (see [`crate::fbp::kernels::projection_coefficients`])
//! and the texture unit's linear filtering with fractional weights quantised
//! to 1/256 (CUDA Programming Guide, "Linear Filtering": the weight is
//! stored in 9-bit fixed point with 8 fractional bits). Sums in f64.

use ndarray::{Array2, ArrayView2};
use tomors_core::{Interpolation, ParallelGeometry, SliceGrid};

use crate::fbp::kernels::projection_coefficients;

/// How the model rounds the linear-interpolation weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightModel {
    /// Exact f32 weight (no quantisation).
    Exact,
    /// Weight rounded to the nearest multiple of 1/256.
    Round256,
    /// Weight truncated to a multiple of 1/256.
    Trunc256,
}

/// Rounds `v` to the nearest `half` value and back (round to nearest even).
pub fn to_half(v: f32) -> f32 {
    // Exact f32 -> f16 -> f32 round trip for normal values (enough for tests).
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let e = v.abs().log2().floor() as i32;
    let e = e.max(-14);
    let q = 2f64.powi(e - 10);
    let r = (v as f64 / q).round_ties_even() * q;
    r as f32
}

/// Back projects one sinogram `[angle][bin]` as the GPU texture kernels do
/// (unscaled sum). `half` rounds the sinogram values to half precision first.
pub fn backproject_model(
    sino: ArrayView2<'_, f32>,
    geom: &ParallelGeometry,
    grid: &SliceGrid,
    interp: Interpolation,
    weights: WeightModel,
    half: bool,
) -> Array2<f32> {
    let na = geom.n_angles();
    let n = geom.n_bins() as i64;
    let coef = projection_coefficients(geom, grid);
    let (c0, rest) = coef.split_at(na);
    let (cx, cy) = rest.split_at(na);
    let val = |p: usize, k: i64| -> f64 {
        if k < 0 || k >= n {
            0.0
        } else {
            let v = sino[(p, k as usize)];
            (if half { to_half(v) } else { v }) as f64
        }
    };
    let mut out = Array2::<f32>::zeros((grid.ny, grid.nx));
    for iy in 0..grid.ny {
        for ix in 0..grid.nx {
            let mut s = 0f64;
            for p in 0..na {
                let t = (iy as f32).mul_add(cy[p], (ix as f32).mul_add(cx[p], c0[p]));
                match interp {
                    Interpolation::Nearest => s += val(p, t.floor() as i64),
                    Interpolation::Linear => {
                        let xb = t - 0.5;
                        let i = xb.floor();
                        let a = xb - i;
                        let a = match weights {
                            WeightModel::Exact => a as f64,
                            WeightModel::Round256 => (a as f64 * 256.0).round() / 256.0,
                            WeightModel::Trunc256 => (a as f64 * 256.0).floor() / 256.0,
                        };
                        let i = i as i64;
                        s += (1.0 - a) * val(p, i) + a * val(p, i + 1);
                    }
                }
            }
            out[(iy, ix)] = s as f32;
        }
    }
    out
}
