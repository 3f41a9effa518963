//! Joseph's ray-driven projector and its exact transpose.
//!
//! For each ray (projection θ, bin k) the projector steps along the
//! dominant axis of the ray direction `(−sin θ, cos θ)`: one step per image
//! column when `|sin θ| ≥ |cos θ|`, one step per row otherwise. At each step
//! it interpolates linearly between the two pixel centres next to the ray in
//! the perpendicular direction, and weights the value by the path length of
//! one step (`pixel / |sin θ|` or `pixel / |cos θ|`). Pixels outside the grid
//! (or outside the region, see [`Region`]) read as zero and receive nothing
//! (virtual zero padding: no padded copy of the image is made).
//!
//! The back projection visits exactly the same (pixel, weight) pairs and
//! scatters instead of gathering, so it is the exact transpose.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::operator::{
    back_by_rays, back_stack_by_rays, check_angles, check_dim3, floor_i64, forward_by_rays,
    forward_stack_by_rays, Projector, RayGeometry, Region, Tracer,
};
use super::real::Real;
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Defines a ray-driven projector of a parallel-beam geometry: the struct
/// (its ray geometry only) and its constructors `new`, `with_region` and
/// the accessor `region`.
macro_rules! ray_projector {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $ty {
            g: RayGeometry,
        }

        impl $ty {
            /// The projector for `geometry` on the whole of `grid`.
            pub fn new(geometry: &ParallelGeometry, grid: &SliceGrid) -> Result<Self> {
                Self::with_region(geometry, grid, Region::full(grid))
            }

            /// The projector restricted to `region` of `grid` (errors if the
            /// region is empty or leaves the grid).
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
    };
}

pub(crate) use ray_projector;

ray_projector!(
    /// Joseph's projector (matched pair: forward and exact transpose).
    JosephProjector
);

/// Index range `[lo, hi)` (clipped to `[first, end)`) of the steps `i` whose
/// perpendicular coordinate `c0 + i·dc` may lie in the open interval
/// `(below, above)`; loose by one step on each side, exact tests follow.
#[inline]
pub(crate) fn step_range(
    c0: f64,
    dc: f64,
    below: f64,
    above: f64,
    first: usize,
    end: usize,
) -> (usize, usize) {
    if dc == 0.0 {
        return if c0 > below && c0 < above {
            (first, end)
        } else {
            (first, first)
        };
    }
    let t1 = (below - c0) / dc;
    let t2 = (above - c0) / dc;
    let (a, b) = if t1 < t2 { (t1, t2) } else { (t2, t1) };
    let lo = (a - 2.0).max(first as f64).min(end as f64) as usize;
    let hi = (b + 2.0).max(first as f64).min(end as f64) as usize;
    (lo, hi.max(lo))
}

impl Tracer for JosephProjector {
    #[inline]
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, _: &mut Vec<f64>, mut visit: F) {
        let g = &self.g;
        let p = &g.projs[a];
        let s = g.s(p, k);
        let h = g.pixel;
        let (r0, r1) = (g.region.rows.start, g.region.rows.end);
        let (c0, c1) = (g.region.cols.start, g.region.cols.end);
        let nxr = c1 - c0;
        if p.sin.abs() >= p.cos.abs() {
            // One step per column x = (ix − cx)·h; the ray meets it at
            // y = (s − x cos θ)/sin θ, row coordinate r = cy − y/h.
            let dr = p.cos / p.sin;
            let r_at0 = g.cy - s / (p.sin * h) - g.cx * dr;
            let len = h / p.sin.abs();
            let (lo, hi) = step_range(r_at0, dr, r0 as f64 - 1.0, r1 as f64, c0, c1);
            for ix in lo..hi {
                let r = r_at0 + ix as f64 * dr;
                let i0 = floor_i64(r);
                let w1 = r - i0 as f64;
                let col = ix - c0;
                if i0 >= r0 as i64 && i0 < r1 as i64 && w1 < 1.0 {
                    visit((i0 as usize - r0) * nxr + col, len * (1.0 - w1));
                }
                let i1 = i0 + 1;
                if i1 >= r0 as i64 && i1 < r1 as i64 && w1 > 0.0 {
                    visit((i1 as usize - r0) * nxr + col, len * w1);
                }
            }
        } else {
            // One step per row y = (cy − iy)·h; the ray meets it at
            // x = (s − y sin θ)/cos θ, column coordinate q = cx + x/h.
            let dq = p.sin / p.cos;
            let q_at0 = g.cx + s / (p.cos * h) - g.cy * dq;
            let len = h / p.cos.abs();
            let (lo, hi) = step_range(q_at0, dq, c0 as f64 - 1.0, c1 as f64, r0, r1);
            for iy in lo..hi {
                let q = q_at0 + iy as f64 * dq;
                let j0 = floor_i64(q);
                let w1 = q - j0 as f64;
                let row = (iy - r0) * nxr;
                if j0 >= c0 as i64 && j0 < c1 as i64 && w1 < 1.0 {
                    visit(row + (j0 as usize - c0), len * (1.0 - w1));
                }
                let j1 = j0 + 1;
                if j1 >= c0 as i64 && j1 < c1 as i64 && w1 > 0.0 {
                    visit(row + (j1 as usize - c0), len * w1);
                }
            }
        }
    }
}

/// Implements [`Projector`] for a matched ray-driven projector.
macro_rules! matched_ray_projector {
    ($ty:ty, $name:expr) => {
        impl<T: Real> Projector<T> for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn n_angles(&self) -> usize {
                self.g.projs.len()
            }
            fn n_bins(&self) -> usize {
                self.g.n_bins
            }
            fn image_dim(&self) -> (usize, usize) {
                self.g.region.dim()
            }
            fn is_matched(&self) -> bool {
                true
            }
            fn forward_slice(
                &self,
                image: ArrayView2<'_, T>,
                angles: &[usize],
                out: ArrayViewMut2<'_, T>,
            ) -> Result<()> {
                self.g.check_slice_shapes(image.dim(), out.dim(), angles)?;
                forward_by_rays(image, angles, out, self);
                Ok(())
            }
            fn back_slice(
                &self,
                sinogram: ArrayView2<'_, T>,
                angles: &[usize],
                out: ArrayViewMut2<'_, T>,
            ) -> Result<()> {
                self.g
                    .check_slice_shapes(out.dim(), sinogram.dim(), angles)?;
                back_by_rays(sinogram, angles, out, self);
                Ok(())
            }
            fn forward(
                &self,
                volume: ndarray::ArrayView3<'_, T>,
                angles: &[usize],
                out: ndarray::ArrayViewMut3<'_, T>,
            ) -> Result<()> {
                let (ny, nx) = self.g.region.dim();
                let ns = volume.len_of(ndarray::Axis(0));
                check_dim3("volume", volume.dim(), (ns, ny, nx))?;
                check_dim3("sinograms", out.dim(), (ns, angles.len(), self.g.n_bins))?;
                check_angles(angles, self.g.projs.len())?;
                forward_stack_by_rays(volume, angles, out, self);
                Ok(())
            }
            fn back(
                &self,
                sinograms: ndarray::ArrayView3<'_, T>,
                angles: &[usize],
                out: ndarray::ArrayViewMut3<'_, T>,
            ) -> Result<()> {
                let (ny, nx) = self.g.region.dim();
                let ns = sinograms.len_of(ndarray::Axis(0));
                check_dim3(
                    "sinograms",
                    sinograms.dim(),
                    (ns, angles.len(), self.g.n_bins),
                )?;
                check_dim3("volume", out.dim(), (ns, ny, nx))?;
                check_angles(angles, self.g.projs.len())?;
                back_stack_by_rays(sinograms, angles, out, self);
                Ok(())
            }
            fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
                if angle < self.g.projs.len() && bin < self.g.n_bins {
                    let mut scratch = Vec::new();
                    Tracer::trace(self, angle, bin, &mut scratch, |i, w| {
                        visit(i, T::from_f64(w))
                    });
                }
            }
        }
    };
}

pub(crate) use matched_ray_projector;

matched_ray_projector!(JosephProjector, "joseph");
