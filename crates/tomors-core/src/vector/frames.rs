//! Per-projection constants of a vector geometry in the voxel-index
//! coordinates of a volume, computed once per projection: the rays of
//! every projector and the projection of points onto the detector.

use std::ops::Range;

use super::error::{RowDefect, VectorGeometryError};
use super::geometry::VecGeometry;
use super::vec3::{cross, dot, scale, sub, Vec3};
use super::volume::VolumeGeometry;
use crate::iterative::VolumeBox;

/// One projection in voxel-index coordinates `[X, Y, Z]` (voxel
/// `(ix, iy, iz)` centred at `(ix, iy, iz)`, see
/// [`VolumeGeometry::to_index`]). `repr(C)`: device kernels can read it as
/// it is.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IndexFrame {
    /// Cone beam: the source. Parallel beam: the ray direction.
    pub src_or_ray: Vec3,
    /// Centre of detector pixel (0, 0).
    pub base: Vec3,
    /// One column step.
    pub eu: Vec3,
    /// One row step.
    pub ev: Vec3,
}

/// The index frames of every projection, with what projecting points onto
/// the detectors needs.
#[derive(Clone, Debug)]
pub(crate) struct Frames {
    pub cone: bool,
    pub n_rows: usize,
    pub n_cols: usize,
    pub frames: Vec<IndexFrame>,
    /// `eu × ev` per projection.
    normals: Vec<Vec3>,
    /// Dual vectors of `eu`, `ev` in the detector plane: for a point `q`
    /// of the plane, `(q − base)·eu_dual` is its column coordinate.
    duals: Vec<(Vec3, Vec3)>,
}

impl Frames {
    pub fn new(geometry: &VecGeometry, volume: &VolumeGeometry) -> Self {
        let n = geometry.n_projections();
        let mut frames = Vec::with_capacity(n);
        for i in 0..n {
            let d = geometry.detector(i);
            let base = volume.to_index(geometry_pixel(geometry, i));
            let eu = volume.to_index_step(d.u);
            let ev = volume.to_index_step(d.v);
            let src_or_ray = match geometry {
                VecGeometry::Cone(g) => volume.to_index(g.projections()[i].source),
                VecGeometry::Parallel(g) => volume.to_index_step(g.projections()[i].ray),
            };
            frames.push(IndexFrame {
                src_or_ray,
                base,
                eu,
                ev,
            });
        }
        let normals: Vec<Vec3> = frames.iter().map(|f| cross(f.eu, f.ev)).collect();
        let duals = frames
            .iter()
            .zip(&normals)
            .map(|(f, &n)| {
                let nn = dot(n, n);
                (
                    scale(cross(f.ev, n), 1.0 / nn),
                    scale(cross(n, f.eu), 1.0 / nn),
                )
            })
            .collect();
        Self {
            cone: geometry.is_cone(),
            n_rows: geometry.n_rows(),
            n_cols: geometry.n_cols(),
            frames,
            normals,
            duals,
        }
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// A point on the ray of detector pixel (`row`, `col`) of projection
    /// `a` and its direction, in index coordinates (cone beam: the source
    /// and source → pixel centre; parallel beam: the pixel centre and the
    /// ray direction).
    #[inline(always)]
    pub fn ray(&self, a: usize, row: usize, col: usize) -> (Vec3, Vec3) {
        let f = &self.frames[a];
        let (c, r) = (col as f64, row as f64);
        if self.cone {
            let s = f.src_or_ray;
            let d = [
                f.base[0] + c * f.eu[0] + r * f.ev[0] - s[0],
                f.base[1] + c * f.eu[1] + r * f.ev[1] - s[1],
                f.base[2] + c * f.eu[2] + r * f.ev[2] - s[2],
            ];
            (s, d)
        } else {
            let o = [
                f.base[0] + c * f.eu[0] + r * f.ev[0],
                f.base[1] + c * f.eu[1] + r * f.ev[1],
                f.base[2] + c * f.eu[2] + r * f.ev[2],
            ];
            (o, f.src_or_ray)
        }
    }

    /// Signed depth of index point `p` in front of the source of cone
    /// projection `a`, in units of `|eu × ev|` (positive on the detector's
    /// side). Parallel beam: 1.
    fn depth_sign(&self, a: usize, p: Vec3) -> f64 {
        if !self.cone {
            return 1.0;
        }
        let f = &self.frames[a];
        let n = self.normals[a];
        let side = dot(sub(f.base, f.src_or_ray), n);
        dot(sub(p, f.src_or_ray), n) * side.signum()
    }

    /// Pixel coordinates `(col, row)` where the ray through index point `p`
    /// meets the detector of projection `a` (`None` for a cone-beam point
    /// in the source's plane).
    pub fn project(&self, a: usize, p: Vec3) -> Option<(f64, f64)> {
        let f = &self.frames[a];
        let n = self.normals[a];
        let (us, vs) = self.duals[a];
        let q = if self.cone {
            let w = sub(p, f.src_or_ray);
            let den = dot(w, n);
            if den == 0.0 || !den.is_finite() {
                return None;
            }
            let t = dot(sub(f.base, f.src_or_ray), n) / den;
            sub(super::vec3::axpy(f.src_or_ray, t, w), f.base)
        } else {
            let w = sub(p, f.base);
            let t = dot(w, n) / dot(f.src_or_ray, n);
            super::vec3::axpy(w, -t, f.src_or_ray)
        };
        let (c, r) = (dot(q, us), dot(q, vs));
        (c.is_finite() && r.is_finite()).then_some((c, r))
    }

    /// Detector rows and columns whose rays can reach voxels of box `b` at
    /// projection `a`: the shadow of `b` grown by one voxel (Joseph's
    /// interpolation reaches one voxel beyond the ray), plus one pixel each
    /// side. The whole detector where a cone-beam box reaches the source's
    /// plane.
    pub fn pixels_reaching(&self, a: usize, b: &VolumeBox) -> (Range<usize>, Range<usize>) {
        let (nr, nc) = (self.n_rows, self.n_cols);
        let all = (0..nr, 0..nc);
        let xs = [b.x.start as f64 - 1.5, b.x.end as f64 + 0.5];
        let ys = [b.y.start as f64 - 1.5, b.y.end as f64 + 0.5];
        let zs = [b.z.start as f64 - 1.5, b.z.end as f64 + 0.5];
        let (mut c_lo, mut c_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut r_lo, mut r_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut side = 0.0f64;
        for &z in &zs {
            for &y in &ys {
                for &x in &xs {
                    let p = [x, y, z];
                    let s = self.depth_sign(a, p);
                    if s == 0.0 || (side != 0.0 && s.signum() != side.signum()) {
                        return all;
                    }
                    side = s;
                    let Some((c, r)) = self.project(a, p) else {
                        return all;
                    };
                    c_lo = c_lo.min(c);
                    c_hi = c_hi.max(c);
                    r_lo = r_lo.min(r);
                    r_hi = r_hi.max(r);
                }
            }
        }
        let clip = |lo: f64, hi: f64, n: usize| {
            let n = n as f64;
            let first = (lo.floor() - 1.0).clamp(0.0, n) as usize;
            let end = (hi.ceil() + 2.0).clamp(0.0, n) as usize;
            first..end.max(first)
        };
        (clip(r_lo, r_hi, nr), clip(c_lo, c_hi, nc))
    }

    /// Cone beam: checks that the whole volume (up to its outer voxel
    /// faces) lies strictly in front of every source, on the detector's
    /// side of the plane through the source parallel to the detector. The
    /// projectors treat rays as whole lines, so a voxel behind a source
    /// would wrongly be counted. Parallel beam: nothing to check.
    ///
    /// Errors: [`VectorGeometryError::Row`] naming the first projection
    /// whose source is inside or beside the volume.
    pub fn check_in_front(&self, volume: &VolumeGeometry) -> Result<(), VectorGeometryError> {
        if !self.cone {
            return Ok(());
        }
        let xs = [-0.5, volume.nx as f64 - 0.5];
        let ys = [-0.5, volume.ny as f64 - 0.5];
        let zs = [-0.5, volume.nz as f64 - 0.5];
        for a in 0..self.len() {
            let mut worst = f64::INFINITY;
            for &z in &zs {
                for &y in &ys {
                    for &x in &xs {
                        worst = worst.min(self.depth_sign(a, [x, y, z]));
                    }
                }
            }
            if !(worst.is_finite() && worst > 0.0) {
                let f = &self.frames[a];
                let s = volume.to_world(f.src_or_ray);
                return Err(VectorGeometryError::Row {
                    row: a,
                    defect: RowDefect::SourceNearVolume { position: s },
                });
            }
        }
        Ok(())
    }
}

/// The index frames of every projection of `geometry` in the voxel-index
/// coordinates of `volume` (what device kernels read): cone beam, the ray
/// of pixel (`r`, `c`) runs from `src_or_ray` to `base + c·eu + r·ev`;
/// parallel beam, through that point along `src_or_ray`.
pub fn index_frames(geometry: &VecGeometry, volume: &VolumeGeometry) -> Vec<IndexFrame> {
    Frames::new(geometry, volume).frames
}

/// Centre of detector pixel (0, 0) of projection `i`, world coordinates.
fn geometry_pixel(geometry: &VecGeometry, i: usize) -> Vec3 {
    geometry
        .detector(i)
        .pixel(geometry.n_rows(), geometry.n_cols(), 0.0, 0.0)
}
