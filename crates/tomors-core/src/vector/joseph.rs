//! Joseph's projector for any vector geometry, and its exact transpose.
//!
//! Each ray (cone beam: from the source through the centre of a detector
//! pixel; parallel beam: through the pixel centre along the ray
//! direction) is a whole line in voxel-index coordinates. The projector
//! steps along the axis on which the ray's index-space direction is
//! largest, one step per voxel plane; at each step it interpolates
//! bilinearly between the four voxel centres around the ray in the other
//! two axes and weights the value by the world length of one step,
//! `√(s_a² + (s_b·db)² + (s_c·dc)²)` (`s` the voxel sizes, `db`, `dc` the
//! ray's slopes per step). Voxels outside the projector's box read as zero
//! and receive nothing (virtual zero padding). The transpose visits the
//! same (voxel, weight) pairs and scatters, so it is exact to rounding.
//!
//! On a circular scan converted to vectors this is the arithmetic of
//! [`ConeJosephProjector`](crate::iterative::ConeJosephProjector) (cone
//! beam) and of [`JosephProjector`](crate::iterative::JosephProjector)
//! slice by slice (parallel beam), up to rounding.

use std::ops::Range;

use ndarray::{ArrayView2, ArrayViewMut2};

use super::error::VectorGeometryError;
use super::geometry::VecGeometry;
use super::rays::{vec_back, vec_forward, VecRays, VecTracer};
use super::volume::VolumeGeometry;
use crate::error::Result;
use crate::iterative::{ConeOperator, Projector, Real, VolumeBox};

/// Joseph's projector on a vector geometry (matched pair: the back
/// projection is the exact transpose).
#[derive(Clone, Debug)]
pub struct VecJosephProjector {
    rays: VecRays,
}

impl VecJosephProjector {
    /// The projector for `geometry` on the whole of `volume`.
    ///
    /// Errors: a cone-beam volume that reaches behind a source
    /// ([`VectorGeometryError::Row`] names the projection).
    pub fn new(
        geometry: &VecGeometry,
        volume: &VolumeGeometry,
    ) -> Result<Self, VectorGeometryError> {
        Self::with_box(geometry, volume, volume.full_box())
    }

    /// The projector restricted to `region` of `volume` (domain
    /// decomposition: the projections of the boxes of a partition sum to
    /// the projection of the whole).
    ///
    /// Errors: an empty box or one outside the volume, and those of
    /// [`Self::new`].
    pub fn with_box(
        geometry: &VecGeometry,
        volume: &VolumeGeometry,
        region: VolumeBox,
    ) -> Result<Self, VectorGeometryError> {
        Ok(Self {
            rays: VecRays::new(geometry, volume, region)?,
        })
    }

    /// The box the projector acts on.
    pub fn region(&self) -> &VolumeBox {
        &self.rays.region
    }

    /// The geometry.
    pub fn geometry(&self) -> &VecGeometry {
        &self.rays.geometry
    }

    /// The volume.
    pub fn volume(&self) -> &VolumeGeometry {
        &self.rays.volume
    }

    /// Detector rows and columns of projection `projection` whose rays can
    /// reach voxels of box `b` (a superset: the shadow of the box grown by
    /// one voxel, plus one pixel each side; the whole detector where a
    /// cone-beam box reaches the source's plane). For work split into
    /// slabs that each need a band of rows.
    pub fn pixels_reaching(
        &self,
        projection: usize,
        b: &VolumeBox,
    ) -> (Range<usize>, Range<usize>) {
        self.rays.pixels_reaching(projection, b)
    }

    pub(crate) fn vec_rays(&self) -> &VecRays {
        &self.rays
    }
}

/// `⌊v⌋` as an integer (exact for |v| < 2⁶³).
#[inline(always)]
pub(crate) fn floor_i64(v: f64) -> i64 {
    let i = v as i64;
    if (i as f64) > v {
        i - 1
    } else {
        i
    }
}

/// Steps `i` in `[first, end)` whose coordinate `c0 + i·dc` may lie in the
/// open interval `(below, above)`; loose by two steps each side (exact
/// tests follow).
#[inline]
fn step_range(
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

impl VecTracer for VecJosephProjector {
    fn rays(&self) -> &VecRays {
        &self.rays
    }

    #[inline]
    fn trace<F: FnMut(usize, f64)>(
        &self,
        a: usize,
        row: usize,
        col: usize,
        clip: &VolumeBox,
        mut visit: F,
    ) {
        let (o, d) = self.rays.frames.ray(a, row, col);
        // Dominant axis `ax` (ties to x, then y), the other two `bx`, `cx`.
        let ax = if d[0].abs() >= d[1].abs() {
            if d[0].abs() >= d[2].abs() {
                0
            } else {
                2
            }
        } else if d[1].abs() >= d[2].abs() {
            1
        } else {
            2
        };
        let (bx, cx) = match ax {
            0 => (1, 2),
            1 => (0, 2),
            _ => (0, 1),
        };
        if d[ax] == 0.0 {
            return;
        }
        let db = d[bx] / d[ax];
        let dc = d[cx] / d[ax];
        // Coordinates where the ray meets plane `i` of the dominant axis.
        let b_at0 = o[bx] - o[ax] * db;
        let c_at0 = o[cx] - o[ax] * dc;
        let s = self.rays.volume.voxel;
        let (sb, sc) = (s[bx] * db, s[cx] * dc);
        let len = (s[ax] * s[ax] + sb * sb + sc * sc).sqrt();
        let (lo, hi) = (clip.lo(), clip.hi());
        let (l1, h1) = step_range(
            b_at0,
            db,
            lo[bx] as f64 - 1.0,
            hi[bx] as f64,
            lo[ax],
            hi[ax],
        );
        let (l2, h2) = step_range(
            c_at0,
            dc,
            lo[cx] as f64 - 1.0,
            hi[cx] as f64,
            lo[ax],
            hi[ax],
        );
        let (first, end) = (l1.max(l2), h1.min(h2));
        let inb = |v: i64| v >= lo[bx] as i64 && v < hi[bx] as i64;
        let inc = |v: i64| v >= lo[cx] as i64 && v < hi[cx] as i64;
        // Flat index within the region: Σ (p_k − region_lo_k)·stride_k.
        let st = self.rays.strides();
        let rlo = self.rays.region.lo();
        let (sa, stb, stc) = (st[ax], st[bx], st[cx]);
        let base = -((rlo[0] * st[0] + rlo[1] * st[1] + rlo[2] * st[2]) as i64);
        for i in first..end {
            let pb = b_at0 + i as f64 * db;
            let pc = c_at0 + i as f64 * dc;
            let b0 = floor_i64(pb);
            let c0 = floor_i64(pc);
            let wb = pb - b0 as f64;
            let wc = pc - c0 as f64;
            let k = (base + (i * sa) as i64 + b0 * stb as i64 + c0 * stc as i64) as usize;
            if inb(b0) && inb(b0 + 1) && inc(c0) && inc(c0 + 1) {
                // Interior: all four neighbours inside (zero weights are
                // visited too; they add nothing).
                let (l0, l1) = (len * (1.0 - wb), len * wb);
                visit(k, l0 * (1.0 - wc));
                visit(k + stb, l1 * (1.0 - wc));
                visit(k + stc, l0 * wc);
                visit(k + stb + stc, l1 * wc);
                continue;
            }
            for (db_, wbb) in [(0i64, 1.0 - wb), (1, wb)] {
                if wbb <= 0.0 || !inb(b0 + db_) {
                    continue;
                }
                for (dc_, wcc) in [(0i64, 1.0 - wc), (1, wc)] {
                    if wcc <= 0.0 || !inc(c0 + dc_) {
                        continue;
                    }
                    let kk = k as i64 + db_ * stb as i64 + dc_ * stc as i64;
                    visit(kk as usize, len * wbb * wcc);
                }
            }
        }
    }
}

impl<T: Real> Projector<T> for VecJosephProjector {
    fn name(&self) -> &'static str {
        "joseph"
    }
    fn n_angles(&self) -> usize {
        self.rays.n_angles()
    }
    fn n_bins(&self) -> usize {
        self.rays.n_bins()
    }
    fn image_dim(&self) -> (usize, usize) {
        self.rays.image_dim()
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
        self.rays.check_shapes(image.dim(), out.dim(), angles)?;
        vec_forward(self, image, angles, out);
        Ok(())
    }
    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, T>,
        angles: &[usize],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        self.rays.check_shapes(out.dim(), sinogram.dim(), angles)?;
        vec_back(self, sinogram, angles, out);
        Ok(())
    }
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
        let nc = self.rays.n_cols();
        if angle < self.rays.n_angles() && bin < self.rays.n_bins() {
            VecTracer::trace(
                self,
                angle,
                bin / nc,
                bin % nc,
                &self.rays.region,
                |i, w| visit(i, T::from_f64(w)),
            );
        }
    }
}

impl<T: Real> ConeOperator<T> for VecJosephProjector {
    fn volume_dim(&self) -> (usize, usize, usize) {
        self.rays.region.dim()
    }
    fn detector_dim(&self) -> (usize, usize) {
        (self.rays.n_rows(), self.rays.n_cols())
    }
}
