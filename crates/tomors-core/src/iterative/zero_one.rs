//! The 0–1 projector: each ray weights the pixels it passes through with
//! either nothing or one common weight.
//!
//! The thesis (document 004, §2.1.1, "0 – 1 model") sets `a_ij = 1` when
//! ray `i` intersects voxel `j` and 0 otherwise. Taken literally that
//! measures line integrals in pixel counts and, for an oblique ray, collects
//! two or three pixels per column, so a constant image would not project to
//! its chord length. Following the issue ("nearest pixel per step"), this
//! projector traces the ray as Joseph's does — one step per image column
//! when `|sin θ| ≥ |cos θ|`, one step per row otherwise — and at each step
//! takes the ONE pixel whose centre is nearest to the ray on that column
//! (row), the digital line of the ray, with the step's path length
//! `pixel / |sin θ|` (`pixel / |cos θ|`) as weight. Every row of `A` is thus
//! a 0–1 vector times one constant, the projection of a constant image is
//! its chord length to within a step, and projections are in world units
//! like the other projectors'.
//!
//! Ties: the ray's crossing at row coordinate `r` picks row `⌊r + ½⌋`
//! (column likewise), so each step has exactly one candidate pixel.
//! Pixels outside the grid or the [`Region`] are skipped; the back
//! projection visits the same (pixel, weight) pairs, so it is the exact
//! transpose.

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
    /// The 0–1 (nearest pixel per step) projector: matched pair, forward and
    /// exact transpose.
    ZeroOneProjector
);

impl Tracer for ZeroOneProjector {
    #[inline]
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, _: &mut Vec<f64>, mut visit: F) {
        let g = &self.g;
        let p = &g.projs[a];
        let s = g.s(p, k);
        let h = g.pixel;
        let (r0, r1) = (g.region.rows.start, g.region.rows.end);
        let (c0, c1) = (g.region.cols.start, g.region.cols.end);
        let nxr = c1 - c0;
        // The same crossings as Joseph's (see joseph.rs), rounded to the
        // nearest pixel centre instead of interpolated.
        if p.sin.abs() >= p.cos.abs() {
            let dr = p.cos / p.sin;
            let r_at0 = g.cy - s / (p.sin * h) - g.cx * dr;
            let len = h / p.sin.abs();
            let (lo, hi) = step_range(r_at0, dr, r0 as f64 - 1.0, r1 as f64, c0, c1);
            for ix in lo..hi {
                let i = floor_i64(r_at0 + ix as f64 * dr + 0.5);
                if i >= r0 as i64 && i < r1 as i64 {
                    visit((i as usize - r0) * nxr + (ix - c0), len);
                }
            }
        } else {
            let dq = p.sin / p.cos;
            let q_at0 = g.cx + s / (p.cos * h) - g.cy * dq;
            let len = h / p.cos.abs();
            let (lo, hi) = step_range(q_at0, dq, c0 as f64 - 1.0, c1 as f64, r0, r1);
            for iy in lo..hi {
                let j = floor_i64(q_at0 + iy as f64 * dq + 0.5);
                if j >= c0 as i64 && j < c1 as i64 {
                    visit((iy - r0) * nxr + (j as usize - c0), len);
                }
            }
        }
    }
}

matched_ray_projector!(ZeroOneProjector, "zero-one");
