//! The voxel-driven (pixel-driven) back projector of FBP paired with
//! Joseph's forward projector: the fast unmatched pair the thesis
//! recommends (the back projection reads the detector with linear
//! interpolation at each pixel centre instead of scattering along rays).
//!
//! Scale: Joseph's transpose credits each pixel, per projection, with about
//! `pixel² / bin_width` times the interpolated detector value (the rays are
//! `bin_width / (pixel·|cos|)` pixel units apart along the stepping axis and
//! each step weighs `pixel / |cos|`), so the back projection here is
//! `pixel² / bin_width · Σ_θ p_θ(u)` — with the default unit pixels and bins
//! exactly [`crate::cpu::CpuBackend`]'s back projection with scale 1.

use ndarray::{ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, Zip};
use rayon::prelude::*;

use super::joseph::JosephProjector;
use super::operator::{check_angles, check_dim3, Projector, RayGeometry, Region};
use super::real::Real;
use crate::backend::Interpolation;
use crate::cpu::{backproject_slices, SimdChoice};
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Joseph forward projection with the voxel-driven back projection
/// (unmatched: `B ≈ Aᵀ`, not equal).
#[derive(Clone, Debug)]
pub struct VoxelDrivenProjector {
    joseph: JosephProjector,
    g: RayGeometry,
    geometry: ParallelGeometry,
    grid: SliceGrid,
    full: bool,
}

impl VoxelDrivenProjector {
    /// The pair for `geometry` on the whole of `grid`.
    pub fn new(geometry: &ParallelGeometry, grid: &SliceGrid) -> Result<Self> {
        Self::with_region(geometry, grid, Region::full(grid))
    }

    /// The pair restricted to `region` of `grid`.
    pub fn with_region(
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        region: Region,
    ) -> Result<Self> {
        let full = region == Region::full(grid);
        Ok(Self {
            joseph: JosephProjector::with_region(geometry, grid, region.clone())?,
            g: RayGeometry::new(geometry, grid, region)?,
            geometry: geometry.clone(),
            grid: *grid,
            full,
        })
    }

    /// The scale `pixel² / bin_width` applied to the back projection.
    pub fn scale(&self) -> f64 {
        self.g.pixel * self.g.pixel / self.g.bin_width
    }

    /// The geometry of the projections `angles` alone, for the fast
    /// multi-slice back projector (`None` for fewer than 2 projections, which
    /// [`ParallelGeometry`] does not represent).
    fn sub_geometry(&self, angles: &[usize]) -> Option<ParallelGeometry> {
        if angles.len() < 2 {
            return None;
        }
        let all = self.geometry.angles();
        ParallelGeometry::new(angles.iter().map(|&a| all[a]).collect(), self.g.n_bins)
            .and_then(|g| g.with_bin_width(self.geometry.bin_width()))
            .and_then(|g| g.with_centers(angles.iter().map(|&a| self.geometry.center(a)).collect()))
            .ok()
    }

    /// Plain pixel-driven back projection (f64 geometry, linear
    /// interpolation, zero outside the detector), any region and any number
    /// of projections; overwrites `out`.
    fn back_generic<T: Real>(
        &self,
        sino: ArrayView2<'_, T>,
        angles: &[usize],
        mut out: ArrayViewMut2<'_, T>,
    ) {
        let g = &self.g;
        let (r0, c0) = (g.region.rows.start, g.region.cols.start);
        let n = g.n_bins as i64;
        let scale = self.scale();
        let h = g.pixel;
        out.outer_iter_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(iy, mut row)| {
                let y = (g.cy - (iy + r0) as f64) * h;
                for (ix, o) in row.iter_mut().enumerate() {
                    let x = ((ix + c0) as f64 - g.cx) * h;
                    let mut acc = T::ZERO;
                    for (j, &a) in angles.iter().enumerate() {
                        let p = &g.projs[a];
                        let u = p.center + (x * p.cos + y * p.sin) / g.bin_width;
                        let f = u.floor();
                        let w = u - f;
                        let i = f as i64;
                        if i >= 0 && i < n {
                            acc += sino[[j, i as usize]] * T::from_f64(1.0 - w);
                        }
                        if i + 1 >= 0 && i + 1 < n {
                            acc += sino[[j, (i + 1) as usize]] * T::from_f64(w);
                        }
                    }
                    *o = acc * T::from_f64(scale);
                }
            });
    }
}

macro_rules! voxel_common {
    ($t:ty) => {
        fn name(&self) -> &'static str {
            "voxel"
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
            false
        }
        fn forward_slice(
            &self,
            image: ArrayView2<'_, $t>,
            angles: &[usize],
            out: ArrayViewMut2<'_, $t>,
        ) -> Result<()> {
            Projector::<$t>::forward_slice(&self.joseph, image, angles, out)
        }
        fn forward(
            &self,
            volume: ArrayView3<'_, $t>,
            angles: &[usize],
            out: ArrayViewMut3<'_, $t>,
        ) -> Result<()> {
            Projector::<$t>::forward(&self.joseph, volume, angles, out)
        }
        fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, $t)) {
            Projector::<$t>::trace_ray(&self.joseph, angle, bin, visit)
        }
    };
}

impl Projector<f64> for VoxelDrivenProjector {
    voxel_common!(f64);

    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, f64>,
        angles: &[usize],
        out: ArrayViewMut2<'_, f64>,
    ) -> Result<()> {
        self.g
            .check_slice_shapes(out.dim(), sinogram.dim(), angles)?;
        self.back_generic(sinogram, angles, out);
        Ok(())
    }
}

impl Projector<f32> for VoxelDrivenProjector {
    voxel_common!(f32);

    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, f32>,
        angles: &[usize],
        mut out: ArrayViewMut2<'_, f32>,
    ) -> Result<()> {
        self.g
            .check_slice_shapes(out.dim(), sinogram.dim(), angles)?;
        match (self.full, self.sub_geometry(angles)) {
            (true, Some(geometry)) => backproject_slices(
                sinogram.insert_axis(Axis(0)),
                &geometry,
                &self.grid,
                Interpolation::Linear,
                self.scale() as f32,
                out.view_mut().insert_axis(Axis(0)),
                SimdChoice::Auto,
            ),
            _ => {
                self.back_generic(sinogram, angles, out);
                Ok(())
            }
        }
    }

    /// Stacks go to the multi-slice SIMD back projector in one call.
    fn back(
        &self,
        sinograms: ArrayView3<'_, f32>,
        angles: &[usize],
        mut out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        let ns = sinograms.len_of(Axis(0));
        let (ny, nx) = self.g.region.dim();
        check_dim3(
            "sinograms",
            sinograms.dim(),
            (ns, angles.len(), self.g.n_bins),
        )?;
        check_dim3("volume", out.dim(), (ns, ny, nx))?;
        check_angles(angles, self.g.projs.len())?;
        match (self.full, self.sub_geometry(angles)) {
            (true, Some(geometry)) => backproject_slices(
                sinograms,
                &geometry,
                &self.grid,
                Interpolation::Linear,
                self.scale() as f32,
                out,
                SimdChoice::Auto,
            ),
            _ => {
                Zip::from(out.outer_iter_mut())
                    .and(sinograms.outer_iter())
                    .for_each(|o, s| self.back_generic(s, angles, o));
                Ok(())
            }
        }
    }
}
