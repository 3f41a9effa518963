//! The strip-area projector: each pixel is weighted by the exact area it
//! shares with the ray's strip (thesis, document 004, §2.1.3).
//!
//! The ray of bin `k` is widened to the strip `|x cos θ + y sin θ − s_k| ≤
//! w/2` between the two parallel rays through the bin's edges (`w` the bin
//! width). The weight of pixel `j` is `area(pixel_j ∩ strip) / w`: divided
//! by the bin width so that projections stay line integrals in world units
//! (the projection of a constant image is the chord length averaged over
//! the bin, as the other projectors give it sampled at the bin centre).
//!
//! The area is computed in closed form instead of by the thesis' triangle
//! subtraction (Nguyen and Lee): seen along the normal `n = (cos θ, sin θ)`,
//! a square pixel of side `h` projects to a trapezoid `P(v)` (the
//! convolution of two boxes of widths `a = h·max(|cos|, |sin|)` and
//! `b = h·min(|cos|, |sin|)`, of area `h²`), and the area between `u₁` and
//! `u₂` is `h²·(G(u₂) − G(u₁))` with `G` the trapezoid's cumulative
//! distribution, a piecewise quadratic (see [`Trapezoid`]), which stays exact as
//! `b → 0` (rays along an axis).
//!
//! Rays are traced along the dominant axis as Joseph's are: per image
//! column (row), the few rows (columns) whose pixels reach into the strip.
//! Weights depend only on the pixel and the ray, so a [`Region`] just
//! filters indices and the pieces of a partition sum to the whole; the back
//! projection visits the same (pixel, weight) pairs, so it is the exact
//! transpose. Parallel beam only (a strip needs parallel neighbour rays).

use ndarray::{ArrayView2, ArrayViewMut2};

use super::joseph::{matched_ray_projector, ray_projector, step_range};
use super::operator::{
    back_by_rays, back_stack_by_rays, check_angles, check_dim3, floor_i64, forward_by_rays,
    forward_stack_by_rays, Projector, RayGeometry, Region, Tracer,
};
use super::real::Real;
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

ray_projector!(
    /// The strip-area projector (matched pair: forward and exact transpose).
    StripProjector
);

/// The unit-area trapezoid that is the convolution of boxes of widths
/// `a ≥ b ≥ 0` (`a > 0`), centred on 0, with constants for its tails.
#[derive(Clone, Copy)]
pub(crate) struct Trapezoid {
    /// Half the support, `(a + b)/2`.
    outer: f64,
    /// Half the flat top, `(a − b)/2`.
    inner: f64,
    /// `1/a`, the flat top's height.
    inv_a: f64,
    /// `1/(2ab)` (infinite for `b = 0`, then never used).
    inv_2ab: f64,
}

impl Trapezoid {
    pub(crate) fn new(a: f64, b: f64) -> Self {
        Self {
            outer: 0.5 * (a + b),
            inner: 0.5 * (a - b),
            inv_a: 1.0 / a,
            inv_2ab: 1.0 / (2.0 * a * b),
        }
    }

    /// The mass beyond `t ≥ 0`: 0 past the support, the quadratic tail
    /// `(outer − t)²/(2ab)` on the slope (where `outer − t ≤ b`, so it stays
    /// accurate as `b → 0`), `1/2 − t/a` on the flat top.
    #[inline(always)]
    fn tail(&self, t: f64) -> f64 {
        if t >= self.outer {
            0.0
        } else if t > self.inner {
            let e = self.outer - t;
            e * e * self.inv_2ab
        } else {
            0.5 - t * self.inv_a
        }
    }

    /// The cumulative distribution `G(v)`: exactly 0 below the support
    /// and 1 above it; `G(v) + G(−v) = 1`.
    #[inline(always)]
    pub(crate) fn cdf(&self, v: f64) -> f64 {
        if v < 0.0 {
            self.tail(-v)
        } else {
            1.0 - self.tail(v)
        }
    }
}

impl Tracer for StripProjector {
    #[inline]
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, _: &mut Vec<f64>, mut visit: F) {
        let g = &self.g;
        let p = &g.projs[a];
        let s = g.s(p, k);
        let h = g.pixel;
        let w = g.bin_width;
        let (r0, r1) = (g.region.rows.start, g.region.rows.end);
        let (c0, c1) = (g.region.cols.start, g.region.cols.end);
        let nxr = c1 - c0;
        let (ac, as_) = (p.cos.abs(), p.sin.abs());
        let (big, small) = (h * ac.max(as_), h * ac.min(as_));
        // Pixel j overlaps the strip iff its centre's offset d = u_j − s
        // from the ray satisfies |d| < w/2 + (big + small)/2.
        let reach = 0.5 * (w + big + small);
        let scale = h * h / w;
        let trap = Trapezoid::new(big, small);
        let weight = |d: f64| scale * (trap.cdf(0.5 * w - d) - trap.cdf(-0.5 * w - d));
        if as_ >= ac {
            // Per column ix: the ray crosses the column's centre line at row
            // coordinate mid = r_at0 + ix·dr; the pixels within `reach`
            // (world units along n) lie within reach/(h|sin|) rows of it.
            let dr = p.cos / p.sin;
            let r_at0 = g.cy - s / (p.sin * h) - g.cx * dr;
            let span = reach / (h * as_);
            let (lo, hi) = step_range(r_at0, dr, r0 as f64 - 1.0 - span, r1 as f64 + span, c0, c1);
            for ix in lo..hi {
                let mid = r_at0 + ix as f64 * dr;
                let first = floor_i64(mid - span).max(r0 as i64);
                let end = (floor_i64(mid + span) + 1).min(r1 as i64);
                let col_term = (ix as f64 - g.cx) * h * p.cos - s;
                for iy in first..end {
                    let d = col_term + (g.cy - iy as f64) * h * p.sin;
                    let wgt = weight(d);
                    if wgt > 0.0 {
                        visit((iy as usize - r0) * nxr + (ix - c0), wgt);
                    }
                }
            }
        } else {
            // Per row iy: the ray crosses the row's centre line at column
            // coordinate mid = q_at0 + iy·dq.
            let dq = p.sin / p.cos;
            let q_at0 = g.cx + s / (p.cos * h) - g.cy * dq;
            let span = reach / (h * ac);
            let (lo, hi) = step_range(q_at0, dq, c0 as f64 - 1.0 - span, c1 as f64 + span, r0, r1);
            for iy in lo..hi {
                let mid = q_at0 + iy as f64 * dq;
                let first = floor_i64(mid - span).max(c0 as i64);
                let end = (floor_i64(mid + span) + 1).min(c1 as i64);
                let row_term = (g.cy - iy as f64) * h * p.sin - s;
                let row = (iy - r0) * nxr;
                for ix in first..end {
                    let d = row_term + (ix as f64 - g.cx) * h * p.cos;
                    let wgt = weight(d);
                    if wgt > 0.0 {
                        visit(row + (ix as usize - c0), wgt);
                    }
                }
            }
        }
    }
}

matched_ray_projector!(StripProjector, "strip");

#[cfg(test)]
mod tests {
    use super::Trapezoid;

    #[test]
    fn trapezoid_cdf_is_a_distribution() {
        for (a, b) in [(1.0, 0.0), (1.0, 0.3), (1.0, 1.0), (0.8, 1e-12)] {
            let t = Trapezoid::new(a, b);
            let half = 0.5 * (a + b);
            assert_eq!(t.cdf(-half), 0.0);
            assert_eq!(t.cdf(half), 1.0);
            assert!((t.cdf(0.0) - 0.5).abs() < 1e-15);
            // Symmetric, non-decreasing, and its slope on the flat top is
            // the height 1/a.
            let mut prev = 0.0;
            for i in 0..=200 {
                let v = -half + (2.0 * half) * i as f64 / 200.0;
                let g = t.cdf(v);
                assert!(g >= prev - 1e-15 && (g + t.cdf(-v) - 1.0).abs() < 1e-14);
                prev = g;
            }
            let q = 0.25 * (a - b);
            assert!((t.cdf(q) - t.cdf(-q) - 2.0 * q / a).abs() < 1e-14);
        }
    }
}
