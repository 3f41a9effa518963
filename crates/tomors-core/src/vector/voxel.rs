//! The voxel-driven back projector of the vector geometries (ASTRA's
//! pairing: for each voxel, project its centre onto each detector with the
//! per-projection vectors and read the projection there by bilinear
//! interpolation, zero outside the detector), with a choice of distance
//! weight, and the fast unmatched pair it makes with Joseph's forward
//! projector.
//!
//! Weights ([`VoxelWeighting`]):
//! - `Adjoint` (the default of [`VecVoxelProjector`]): the scale of Joseph's
//!   transpose. That transpose credits a voxel, per projection, with the
//!   sum of the path lengths through it of the rays near it: about the
//!   voxel's volume `V` times the density of rays there. Cone beam: rays
//!   through pixels of area `A = |u × v|` have, at a point whose depth
//!   (distance from the source along the detector normal) is `D_v`, the
//!   density `(D_p/D_v)²/(A·cos α)` per unit area across the ray, `D_p` the
//!   source–detector distance, `α` the angle between the ray and the
//!   detector normal; with `cos α = D_p/L`, `L` the source–pixel distance,
//!   the weight is `V·D_p·L/(A·D_v²)` (`L` read at the voxel's shadow with
//!   the projection). On a circular scan this is exactly
//!   [`ConeVoxelProjector`](crate::iterative::ConeVoxelProjector)'s
//!   `h³·(SDD/U)²/(pu·pv·cos α)`. Parallel beam: `V/(A·cos α)`.
//! - `Fdk`: cone beam `(D_o/D_v)²` with `D_o` the depth of the world
//!   origin, as ASTRA's `FDK_CUDA` weights `cone_vec` (`cuda/3d/cone_bp.cu`:
//!   `det(u, v, s)/det(u, v, s − x)`); on a circular scan the `(SOD/U)²` of
//!   [`backproject_cone`](crate::cone::backproject_cone). Parallel beam: 1.
//! - `Plain`: no weight (the sum of the interpolated values).

use ndarray::{Array3, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3};
use rayon::prelude::*;

use super::error::VectorGeometryError;
use super::geometry::VecGeometry;
use super::joseph::{floor_i64, VecJosephProjector};
use super::vec3::{cross, dot, norm, scale, sub, Vec3};
use super::volume::VolumeGeometry;
use crate::error::{CoreError, Result};
use crate::iterative::{ConeOperator, Projector, Real, VolumeBox};

/// The distance weight of the voxel-driven back projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum VoxelWeighting {
    /// The scale of Joseph's transpose (the unmatched pair's back projector).
    #[default]
    Adjoint,
    /// FDK's `(D_o/D_v)²` (cone beam; 1 for parallel beam).
    Fdk,
    /// No weight.
    Plain,
}

/// Per-projection constants of the voxel-driven back projection in
/// voxel-index coordinates: the column and row numerators and the
/// denominator are affine in the voxel's index point `p`
/// (`col = nu(p)/den(p)`), and a constant factor.
#[derive(Clone, Copy, Debug)]
struct VoxelFrame {
    nu: [f64; 4],
    nv: [f64; 4],
    den: [f64; 4],
    /// Constant factor of the projection's contribution.
    factor: f64,
    /// Divide by `den²` (cone beam, weighted) or not.
    by_den_sq: bool,
}

/// An affine form `f·p + f0` as `[f_x, f_y, f_z, f0]`.
fn affine(f: Vec3, at: Vec3) -> [f64; 4] {
    [f[0], f[1], f[2], -dot(f, at)]
}

fn voxel_frames(
    geometry: &VecGeometry,
    volume: &VolumeGeometry,
    weighting: VoxelWeighting,
) -> Vec<VoxelFrame> {
    let vol = volume.voxel_volume();
    (0..geometry.n_projections())
        .map(|i| {
            let det = geometry.detector(i);
            let base = volume.to_index(det.pixel(geometry.n_rows(), geometry.n_cols(), 0.0, 0.0));
            let eu = volume.to_index_step(det.u);
            let ev = volume.to_index_step(det.v);
            let n = cross(eu, ev);
            let nn = dot(n, n);
            let us = scale(cross(ev, n), 1.0 / nn);
            let vs = scale(cross(n, eu), 1.0 / nn);
            match geometry {
                VecGeometry::Cone(g) => {
                    let pv = &g.projections()[i];
                    let src = volume.to_index(pv.source);
                    let s0 = sub(src, base);
                    let (s0n, s0u, s0v) = (dot(s0, n), dot(s0, us), dot(s0, vs));
                    // col = [(s0·u*)(w·n) − (s0·n)(w·u*)]/(w·n), w = p − src.
                    // Oriented so that den(p) > 0 in front of the source.
                    let sigma = if dot(sub(base, src), n) < 0.0 {
                        -1.0
                    } else {
                        1.0
                    };
                    let fu = scale(sub(scale(n, s0u), scale(us, s0n)), sigma);
                    let fv = scale(sub(scale(n, s0v), scale(vs, s0n)), sigma);
                    let n = scale(n, sigma);
                    // World depth D_v = κ·den(p) (both vanish on the
                    // source's plane); κ from the detector's depth.
                    let d_p = pv.source_detector_distance();
                    let kappa = d_p / dot(sub(base, src), n);
                    let factor = match weighting {
                        VoxelWeighting::Adjoint => vol * d_p / (det.pixel_area() * kappa * kappa),
                        VoxelWeighting::Fdk => {
                            let d_o = dot(scale(pv.source, -1.0), pv.normal_from_source());
                            d_o * d_o / (kappa * kappa)
                        }
                        VoxelWeighting::Plain => 1.0,
                    };
                    VoxelFrame {
                        nu: affine(fu, src),
                        nv: affine(fv, src),
                        den: affine(n, src),
                        factor,
                        by_den_sq: weighting != VoxelWeighting::Plain,
                    }
                }
                VecGeometry::Parallel(g) => {
                    let pv = &g.projections()[i];
                    let dir = volume.to_index_step(pv.ray);
                    let k = 1.0 / dot(dir, n);
                    let gu = sub(us, scale(n, dot(dir, us) * k));
                    let gv = sub(vs, scale(n, dot(dir, vs) * k));
                    let factor = match weighting {
                        VoxelWeighting::Adjoint => vol / (det.pixel_area() * pv.obliquity()),
                        _ => 1.0,
                    };
                    VoxelFrame {
                        nu: affine(gu, base),
                        nv: affine(gv, base),
                        den: [0.0, 0.0, 0.0, 1.0],
                        factor,
                        by_den_sq: false,
                    }
                }
            }
        })
        .collect()
}

/// Bilinear read of detector image `p` (`[row·col]`, `nc` columns) at
/// (`col`, `row`), zero outside.
#[inline(always)]
fn bilinear(p: &[f64], nr: usize, nc: usize, col: f64, row: f64) -> f64 {
    if !(col > -1.0 && row > -1.0 && col < nc as f64 && row < nr as f64) {
        return 0.0;
    }
    let (c0, r0) = (floor_i64(col), floor_i64(row));
    let (fc, fr) = (col - c0 as f64, row - r0 as f64);
    let at = |r: i64, c: i64| -> f64 {
        if r < 0 || c < 0 || r >= nr as i64 || c >= nc as i64 {
            0.0
        } else {
            p[r as usize * nc + c as usize]
        }
    };
    (1.0 - fr) * ((1.0 - fc) * at(r0, c0) + fc * at(r0, c0 + 1))
        + fr * ((1.0 - fc) * at(r0 + 1, c0) + fc * at(r0 + 1, c0 + 1))
}

/// Voxel-driven back projection of `projections` (`[angles.len()][row][col]`,
/// the projections `angles` of `geometry`) into `out` (`[z][y][x]` of
/// `region` of `volume`, overwritten):
/// `Σ_j w_j(p)·q_j(col_j(p), row_j(p))` with the weight of `weighting`,
/// `q_j` read by bilinear interpolation (zero outside the detector).
/// Cone beam: voxels not in front of a source get nothing from it.
/// Voxels (z, y lines) in parallel; geometry and sums in f64.
///
/// Errors: shapes that do not fit, a projection index out of range, a box
/// outside the volume.
pub fn backproject_voxels<T: Real>(
    geometry: &VecGeometry,
    volume: &VolumeGeometry,
    region: &VolumeBox,
    projections: ArrayView3<'_, T>,
    angles: &[usize],
    weighting: VoxelWeighting,
    out: ArrayViewMut3<'_, T>,
) -> Result<()> {
    volume.check_box(region)?;
    let (nr, nc) = (geometry.n_rows(), geometry.n_cols());
    if projections.dim() != (angles.len(), nr, nc) {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, expected {:?} ([projection][row][col])",
            projections.dim(),
            (angles.len(), nr, nc)
        )));
    }
    if out.dim() != region.dim() {
        return Err(CoreError::Shape(format!(
            "output is {:?}, expected {:?} ([z][y][x] of the box)",
            out.dim(),
            region.dim()
        )));
    }
    let frames = voxel_frames(geometry, volume, weighting);
    // The projections in f64, each times its constant factor (cone beam,
    // `Adjoint`: also times the source–pixel distance `L` of each pixel).
    let mut q = vec![0.0f64; angles.len() * nr * nc];
    q.par_chunks_mut(nr * nc)
        .zip(angles.par_iter())
        .enumerate()
        .for_each(|(j, (qj, &a))| {
            let f = frames[a].factor;
            let src = match (geometry, weighting) {
                (VecGeometry::Cone(g), VoxelWeighting::Adjoint) => Some(g.projections()[a].source),
                _ => None,
            };
            let det = geometry.detector(a);
            for (k, o) in qj.iter_mut().enumerate() {
                let v = projections[[j, k / nc, k % nc]].to_f64() * f;
                *o = match src {
                    Some(s) => {
                        let px = det.pixel(nr, nc, (k / nc) as f64, (k % nc) as f64);
                        v * norm(sub(px, s))
                    }
                    None => v,
                };
            }
        });
    let (nz, ny, nx) = region.dim();
    let mut total = vec![T::ZERO; nz * ny * nx];
    total.par_chunks_mut(nx).enumerate().for_each(|(line, o)| {
        let iz = (region.z.start + line / ny) as f64;
        let iy = (region.y.start + line % ny) as f64;
        let x0 = region.x.start as f64;
        let mut acc = vec![0.0f64; nx];
        for (j, &a) in angles.iter().enumerate() {
            let fr = &frames[a];
            let at = |f: &[f64; 4]| f[0] * x0 + f[1] * iy + f[2] * iz + f[3];
            let (mut u, mut v, mut d) = (at(&fr.nu), at(&fr.nv), at(&fr.den));
            let qj = &q[j * nr * nc..(j + 1) * nr * nc];
            for s in acc.iter_mut() {
                if d > 0.0 {
                    let r = 1.0 / d;
                    let val = bilinear(qj, nr, nc, u * r, v * r);
                    *s += if fr.by_den_sq { val * r * r } else { val };
                }
                u += fr.nu[0];
                v += fr.nv[0];
                d += fr.den[0];
            }
        }
        for (o, &s) in o.iter_mut().zip(&acc) {
            *o = T::from_f64(s);
        }
    });
    let view = ArrayView3::from_shape((nz, ny, nx), &total).expect("shape");
    let mut out = out;
    out.assign(&view);
    Ok(())
}

/// Joseph's forward projection with the voxel-driven back projection
/// ([`VoxelWeighting::Adjoint`]): the fast unmatched pair (`B ≈ Aᵀ`).
#[derive(Clone, Debug)]
pub struct VecVoxelProjector {
    joseph: VecJosephProjector,
}

impl VecVoxelProjector {
    /// The pair for `geometry` on the whole of `volume`.
    ///
    /// Errors: as [`VecJosephProjector::new`].
    pub fn new(
        geometry: &VecGeometry,
        volume: &VolumeGeometry,
    ) -> Result<Self, VectorGeometryError> {
        Self::with_box(geometry, volume, volume.full_box())
    }

    /// The pair restricted to `region` of `volume`.
    ///
    /// Errors: as [`VecJosephProjector::with_box`].
    pub fn with_box(
        geometry: &VecGeometry,
        volume: &VolumeGeometry,
        region: VolumeBox,
    ) -> Result<Self, VectorGeometryError> {
        Ok(Self {
            joseph: VecJosephProjector::with_box(geometry, volume, region)?,
        })
    }

    /// The box the pair acts on.
    pub fn region(&self) -> &VolumeBox {
        self.joseph.region()
    }
}

impl<T: Real> Projector<T> for VecVoxelProjector {
    fn name(&self) -> &'static str {
        "voxel"
    }
    fn n_angles(&self) -> usize {
        Projector::<T>::n_angles(&self.joseph)
    }
    fn n_bins(&self) -> usize {
        Projector::<T>::n_bins(&self.joseph)
    }
    fn image_dim(&self) -> (usize, usize) {
        Projector::<T>::image_dim(&self.joseph)
    }
    fn is_matched(&self) -> bool {
        false
    }
    fn forward_slice(
        &self,
        image: ArrayView2<'_, T>,
        angles: &[usize],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        self.joseph.forward_slice(image, angles, out)
    }
    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, T>,
        angles: &[usize],
        mut out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        let rays = self.joseph.vec_rays();
        rays.check_shapes(out.dim(), sinogram.dim(), angles)?;
        let (nr, nc) = (rays.n_rows(), rays.n_cols());
        let sino = sinogram.as_standard_layout();
        let p = sino
            .view()
            .into_shape_with_order((angles.len(), nr, nc))
            .map_err(|e| CoreError::Shape(e.to_string()))?;
        let mut vol = Array3::from_elem(rays.region.dim(), T::ZERO);
        backproject_voxels(
            &rays.geometry,
            &rays.volume,
            &rays.region,
            p,
            angles,
            VoxelWeighting::Adjoint,
            vol.view_mut(),
        )?;
        let (nz, ny, nx) = rays.region.dim();
        let flat = vol
            .into_shape_with_order((nz * ny, nx))
            .map_err(|e| CoreError::Shape(e.to_string()))?;
        out.assign(&flat);
        Ok(())
    }
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
        self.joseph.trace_ray(angle, bin, visit)
    }
}

impl<T: Real> ConeOperator<T> for VecVoxelProjector {
    fn volume_dim(&self) -> (usize, usize, usize) {
        self.joseph.region().dim()
    }
    fn detector_dim(&self) -> (usize, usize) {
        let r = self.joseph.vec_rays();
        (r.n_rows(), r.n_cols())
    }
}
