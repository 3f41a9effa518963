//! The line-length (Siddon) projector: each pixel is weighted by the exact
//! length of the ray's path through it.
//!
//! For each ray the parameter interval inside the grid (or region) box is
//! found, split at every crossing with an interior pixel edge, and each
//! piece is credited to the pixel containing its midpoint. Restricted to a
//! region, the region's box is used: its edges are grid lines, so the
//! pieces of a partition reproduce the whole.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::joseph::{matched_ray_projector, ray_projector};
use super::operator::{
    back_by_rays, back_stack_by_rays, check_angles, check_dim3, floor_i64, forward_by_rays,
    forward_stack_by_rays, Projector, RayGeometry, Region, Tracer,
};
use super::real::Real;
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

ray_projector!(
    /// The line-length projector (matched pair: forward and exact transpose).
    LineProjector
);

impl Tracer for LineProjector {
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, _: &mut Vec<f64>, mut visit: F) {
        let g = &self.g;
        let p = &g.projs[a];
        let sk = g.s(p, k);
        let h = g.pixel;
        let (r0, r1) = (g.region.rows.start, g.region.rows.end);
        let (c0, c1) = (g.region.cols.start, g.region.cols.end);
        let nxr = c1 - c0;
        // Ray: x(t) = s·cos − t·sin, y(t) = s·sin + t·cos (t = arc length).
        let (px, py) = (sk * p.cos, sk * p.sin);
        let (dx, dy) = (-p.sin, p.cos);
        // Vertical edge j (left edge of column j) and horizontal edge i (top
        // edge of row i), in world units.
        let xe = |j: usize| (j as f64 - 0.5 - g.cx) * h;
        let ye = |i: usize| (g.cy - i as f64 + 0.5) * h;
        let (mut tmin, mut tmax) = (f64::NEG_INFINITY, f64::INFINITY);
        let (xlo, xhi) = (xe(c0), xe(c1));
        if dx != 0.0 {
            let (ta, tb) = ((xlo - px) / dx, (xhi - px) / dx);
            tmin = tmin.max(ta.min(tb));
            tmax = tmax.min(ta.max(tb));
        } else if !(px >= xlo && px <= xhi) {
            return;
        }
        let (yhi, ylo) = (ye(r0), ye(r1));
        if dy != 0.0 {
            let (ta, tb) = ((ylo - py) / dy, (yhi - py) / dy);
            tmin = tmin.max(ta.min(tb));
            tmax = tmax.min(ta.max(tb));
        } else if !(py >= ylo && py <= yhi) {
            return;
        }
        if tmin.is_nan() || tmax.is_nan() || tmax <= tmin {
            return;
        }
        // Crossings with the interior vertical edges c0+1..c1 and horizontal
        // edges r0+1..r1, each visited in increasing t and merged on the fly.
        // Every crossing is computed from its edge alone, so a region sees
        // exactly the values the whole grid sees.
        let xt = |j: usize| (xe(j) - px) / dx;
        let yt = |i: usize| (ye(i) - py) / dy;
        // Edge index sequences in increasing t: (next index, step, remaining).
        let mut xs = EdgeWalk::new(c0 + 1, c1, dx > 0.0, dx != 0.0);
        let mut ys = EdgeWalk::new(r0 + 1, r1, dy < 0.0, dy != 0.0);
        let mut next_x = xs.peek().map_or(f64::INFINITY, xt);
        let mut next_y = ys.peek().map_or(f64::INFINITY, yt);
        let mut t0 = tmin;
        loop {
            let t1 = next_x.min(next_y).min(tmax);
            if t1 > t0 {
                let tm = 0.5 * (t0 + t1);
                let x = px + tm * dx;
                let y = py + tm * dy;
                let ix = floor_i64(g.cx + x / h + 0.5).clamp(c0 as i64, c1 as i64 - 1) as usize;
                let iy = floor_i64(g.cy - y / h + 0.5).clamp(r0 as i64, r1 as i64 - 1) as usize;
                visit((iy - r0) * nxr + (ix - c0), t1 - t0);
                t0 = t1;
            }
            if t1 >= tmax {
                break;
            }
            if next_x <= t1 {
                xs.advance();
                next_x = xs.peek().map_or(f64::INFINITY, xt);
            }
            if next_y <= t1 {
                ys.advance();
                next_y = ys.peek().map_or(f64::INFINITY, yt);
            }
        }
    }
}

/// The edges `first..end` visited forwards or backwards.
struct EdgeWalk {
    next: usize,
    left: usize,
    forward: bool,
}

impl EdgeWalk {
    fn new(first: usize, end: usize, forward: bool, active: bool) -> Self {
        let left = if active { end.saturating_sub(first) } else { 0 };
        Self {
            next: if forward {
                first
            } else {
                end.saturating_sub(1)
            },
            left,
            forward,
        }
    }

    #[inline(always)]
    fn peek(&self) -> Option<usize> {
        (self.left > 0).then_some(self.next)
    }

    #[inline(always)]
    fn advance(&mut self) {
        if self.left > 0 {
            self.left -= 1;
            if self.forward {
                self.next += 1;
            } else {
                self.next = self.next.wrapping_sub(1);
            }
        }
    }
}

matched_ray_projector!(LineProjector, "line");
