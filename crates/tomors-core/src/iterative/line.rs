//! The line-length (Siddon) projector: each pixel is weighted by the exact
//! length of the ray's path through it.
//!
//! For each ray the parameter interval inside the grid (or region) box is
//! found, split at every crossing with an interior pixel edge, and each
//! piece is credited to the pixel containing its midpoint. Restricted to a
//! region, the region's box is used: its edges are grid lines, so the
//! pieces of a partition reproduce the whole.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::joseph::matched_ray_projector;
use super::operator::{back_by_rays, forward_by_rays, Projector, RayGeometry, Region, Tracer};
use super::real::Real;
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// The line-length projector (matched pair: forward and exact transpose).
#[derive(Clone, Debug)]
pub struct LineProjector {
    g: RayGeometry,
}

impl LineProjector {
    /// The projector for `geometry` on the whole of `grid`.
    pub fn new(geometry: &ParallelGeometry, grid: &SliceGrid) -> Result<Self> {
        Self::with_region(geometry, grid, Region::full(grid))
    }

    /// The projector restricted to `region` of `grid`.
    pub fn with_region(
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        region: Region,
    ) -> Result<Self> {
        Ok(Self {
            g: RayGeometry::new(geometry, grid, region)?,
        })
    }

    /// The region the projector acts on.
    pub fn region(&self) -> &Region {
        &self.g.region
    }
}

impl Tracer for LineProjector {
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, ts: &mut Vec<f64>, mut visit: F) {
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
        if !(tmax > tmin) {
            return;
        }
        ts.clear();
        ts.push(tmin);
        if dx != 0.0 {
            for j in c0 + 1..c1 {
                let t = (xe(j) - px) / dx;
                if t > tmin && t < tmax {
                    ts.push(t);
                }
            }
        }
        if dy != 0.0 {
            for i in r0 + 1..r1 {
                let t = (ye(i) - py) / dy;
                if t > tmin && t < tmax {
                    ts.push(t);
                }
            }
        }
        ts.push(tmax);
        ts.sort_unstable_by(|a, b| a.total_cmp(b));
        for w in ts.windows(2) {
            let len = w[1] - w[0];
            if len <= 0.0 {
                continue;
            }
            let tm = 0.5 * (w[0] + w[1]);
            let x = px + tm * dx;
            let y = py + tm * dy;
            let ix = ((g.cx + x / h + 0.5).floor() as i64).clamp(c0 as i64, c1 as i64 - 1) as usize;
            let iy = ((g.cy - y / h + 0.5).floor() as i64).clamp(r0 as i64, r1 as i64 - 1) as usize;
            visit((iy - r0) * nxr + (ix - c0), len);
        }
    }
}

matched_ray_projector!(LineProjector, "line");
