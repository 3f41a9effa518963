//! The voxel-driven cone-beam back projector (FDK's, without the ramp
//! filter) paired with Joseph's forward projector: the fast unmatched pair.
//!
//! Scale: Joseph's transpose credits a voxel, per projection, with the sum
//! of the path lengths through it of the rays near it, about the voxel's
//! volume times the density of rays there. Rays through detector pixels of
//! `pu × pv` at source distance `SDD` are `pu·pv·(U/SDD)²·cos α` apart
//! (per unit area across the ray) at depth `U`, `α` the angle between the
//! ray and the detector normal, so the back projection here is
//! `Σ_θ h³·(SDD/U)²/(pu·pv·cos α) · p_θ(col, row)` with `p_θ` read at the
//! voxel's shadow by bilinear interpolation (zero outside the detector).

use ndarray::{Array3, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use super::cone_joseph::ConeJosephProjector;
use super::cone_rays::{ConeRays, ConeTracer, VolumeBox};
use super::operator::{floor_i64, Projector};
use super::real::Real;
use super::ConeOperator;
use crate::cone::{backproject_cone, ConeGeometry, ConeVolume};
use crate::error::Result;

/// Joseph forward projection with the voxel-driven back projection
/// (unmatched: `B ≈ Aᵀ`).
#[derive(Clone, Debug)]
pub struct ConeVoxelProjector {
    joseph: ConeJosephProjector,
}

impl ConeVoxelProjector {
    /// The pair for `geometry` on the whole of `volume`.
    ///
    /// Errors: the source orbit passes through the volume.
    pub fn new(geometry: &ConeGeometry, volume: &ConeVolume) -> Result<Self> {
        Self::with_box(geometry, volume, VolumeBox::full(volume))
    }

    /// The pair restricted to `region` of `volume`.
    ///
    /// Errors: an empty region or one outside the volume; the source orbit
    /// passes through the volume.
    pub fn with_box(
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        region: VolumeBox,
    ) -> Result<Self> {
        Ok(Self {
            joseph: ConeJosephProjector::with_box(geometry, volume, region)?,
        })
    }

    /// The box the pair acts on.
    pub fn region(&self) -> &VolumeBox {
        &self.rays().region
    }
}

/// Bilinear read of detector image `p` (`[row·col]` flattened, `nc`
/// columns) at `(col, row)`, zero outside.
#[inline(always)]
fn bilinear<T: Real>(p: &[T], nr: usize, nc: usize, col: f64, row: f64) -> f64 {
    let (c0, r0) = (floor_i64(col), floor_i64(row));
    let (fc, fr) = (col - c0 as f64, row - r0 as f64);
    let at = |r: i64, c: i64| -> f64 {
        if r < 0 || c < 0 || r >= nr as i64 || c >= nc as i64 {
            0.0
        } else {
            p[r as usize * nc + c as usize].to_f64()
        }
    };
    (1.0 - fr) * ((1.0 - fc) * at(r0, c0) + fc * at(r0, c0 + 1))
        + fr * ((1.0 - fc) * at(r0 + 1, c0) + fc * at(r0 + 1, c0 + 1))
}

impl<T: Real> Projector<T> for ConeVoxelProjector {
    fn name(&self) -> &'static str {
        "voxel"
    }
    fn n_angles(&self) -> usize {
        self.rays().n_angles()
    }
    fn n_bins(&self) -> usize {
        self.rays().n_bins()
    }
    fn image_dim(&self) -> (usize, usize) {
        self.rays().image_dim()
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
        let r = self.rays();
        r.check_shapes(out.dim(), sinogram.dim(), angles)?;
        let g = &r.geometry;
        let v = &r.volume;
        let (nr, nc) = (g.n_rows(), g.n_cols());
        let (pu, pv) = (g.pixel_u(), g.pixel_v());
        let sdd = g.sdd();
        let h = v.voxel_size as f64;
        let scale = h * h * h * sdd / (pu * pv);
        let region = &r.region;
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
            && angles.len() >= 2
            && region.x.len() == v.nx
            && region.y.len() == v.ny
        {
            return self.back_f32(sinogram, angles, out, scale);
        }
        // The detector weighted by 1/cos α (× SDD) per pixel, then read by
        // bilinear interpolation (as the f32 path does).
        let inv_cos = self.inv_cos();
        let mut sino = ndarray::Array2::<f64>::zeros(sinogram.dim());
        ndarray::Zip::from(sino.rows_mut())
            .and(sinogram.rows())
            .for_each(|mut o, s| {
                o.iter_mut()
                    .zip(s.iter())
                    .zip(&inv_cos)
                    .for_each(|((o, &v), &c)| *o = v.to_f64() * c);
            });
        let ny = region.y.len();
        out.axis_chunks_iter_mut(Axis(0), ny)
            .into_par_iter()
            .enumerate()
            .for_each(|(k, mut slab)| {
                let z = v.z(region.z.start + k);
                for (jy, mut line) in slab.outer_iter_mut().enumerate() {
                    let y = v.y(region.y.start + jy);
                    for (jx, o) in line.iter_mut().enumerate() {
                        let x = v.x(region.x.start + jx);
                        let mut sum = 0.0f64;
                        for (j, &a) in angles.iter().enumerate() {
                            let Some(p) = g.project_point(a, x, y, z) else {
                                continue;
                            };
                            let srow = sino.row(j);
                            let s = srow.as_slice().expect("standard layout");
                            sum += bilinear(s, nr, nc, p.col, p.row) / (p.depth * p.depth);
                        }
                        *o = T::from_f64(sum * scale);
                    }
                }
            });
        Ok(())
    }
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
        self.joseph.trace_ray(angle, bin, visit)
    }
}

impl ConeVoxelProjector {
    /// The rays (Joseph's, shared with the forward projection).
    fn rays(&self) -> &ConeRays {
        ConeTracer::rays(&self.joseph)
    }

    /// `SDD/cos α = √(SDD² + u² + v²)` of every detector pixel (`[row·col]`).
    fn inv_cos(&self) -> Vec<f64> {
        let g = &self.rays().geometry;
        let (nc, nr) = (g.n_cols(), g.n_rows());
        let (pu, pv, sdd) = (g.pixel_u(), g.pixel_v(), g.sdd());
        (0..nr * nc)
            .map(|k| {
                let u = ((k % nc) as f64 - g.center_col()) * pu;
                let w = ((k / nc) as f64 - g.center_row()) * pv;
                (sdd * sdd + u * u + w * w).sqrt()
            })
            .collect()
    }

    /// The f32 back projection through the fast FDK back projector
    /// [`backproject_cone`]: its sum is `Σ (SOD/U)²·p`, so the projections
    /// are first weighted by `1/cos α` per detector pixel (times `SDD`) and
    /// the result scaled by `h³/(pu·pv·SOD²)`.
    fn back_f32<T: Real>(
        &self,
        sinogram: ArrayView2<'_, T>,
        angles: &[usize],
        mut out: ArrayViewMut2<'_, T>,
        scale: f64,
    ) -> Result<()> {
        let r = self.rays();
        let g = &r.geometry;
        let (nr, nc) = (g.n_rows(), g.n_cols());
        let (pu, pv) = (g.pixel_u(), g.pixel_v());
        let inv_cos = self.inv_cos();
        let mut weighted = Array3::<f32>::zeros((angles.len(), nr, nc));
        weighted
            .outer_iter_mut()
            .into_par_iter()
            .zip(sinogram.outer_iter().into_par_iter())
            .for_each(|(mut o, s)| {
                o.iter_mut()
                    .zip(s.iter())
                    .zip(&inv_cos)
                    .for_each(|((o, &v), &c)| *o = (v.to_f64() * c) as f32);
            });
        let all = g.angles();
        let sub = ConeGeometry::new(
            angles.iter().map(|&a| all[a]).collect(),
            g.sod(),
            g.odd(),
            nr,
            nc,
            pu,
            pv,
        )?
        .with_principal_point(g.center_col(), g.center_row())?;
        let region = &r.region;
        let (nz, ny, nx) = region.dim();
        let mut vol = Array3::<f32>::zeros((nz, ny, nx));
        backproject_cone(
            weighted.view(),
            &sub,
            &r.volume,
            region.z.clone(),
            vol.view_mut(),
        )?;
        let k = scale / (g.sod() * g.sod());
        let flat = vol.into_shape_with_order((nz * ny, nx)).expect("shape");
        out.zip_mut_with(&flat, |o, &v| *o = T::from_f64(v as f64 * k));
        Ok(())
    }
}

impl<T: Real> ConeOperator<T> for ConeVoxelProjector {
    fn volume_dim(&self) -> (usize, usize, usize) {
        self.rays().region.dim()
    }
    fn detector_dim(&self) -> (usize, usize) {
        (self.rays().n_rows(), self.rays().n_cols())
    }
}
