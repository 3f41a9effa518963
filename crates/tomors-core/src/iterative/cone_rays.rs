//! What the cone-beam ray-driven projectors share: the rays of a circular
//! cone-beam geometry in voxel-index coordinates, a box of the volume the
//! operator acts on, and forward / exact-transpose drivers over a tracer.
//!
//! Cone-beam operators implement [`Projector`](super::Projector) on "one
//! slice" holding the whole volume: images are `[z·y][x]` (a `[z][y][x]`
//! volume viewed as 2-D) and sinograms are `[angle][row·col]` (the
//! `[angle][row][col]` projections viewed as 2-D), so bin `k` is detector
//! pixel `(k / n_cols, k % n_cols)`. Every algorithm of this module runs on
//! them unchanged; [`reconstruct_cone`](super::reconstruct_cone) does the
//! reshaping.

use std::ops::Range;

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::operator::check_angles;
use super::real::Real;
use crate::cone::{ConeGeometry, ConeVolume};
use crate::error::{CoreError, Result};

/// A box of voxels `[z][y][x]` of a [`ConeVolume`]: the part of the volume a
/// cone-beam projector acts on (domain decomposition: the projections of
/// the pieces of a partition sum to the projection of the whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeBox {
    /// Slices.
    pub z: Range<usize>,
    /// Rows (y, row 0 at the top).
    pub y: Range<usize>,
    /// Columns (x).
    pub x: Range<usize>,
}

impl VolumeBox {
    /// The whole volume.
    pub fn full(volume: &ConeVolume) -> Self {
        Self {
            z: 0..volume.nz,
            y: 0..volume.ny,
            x: 0..volume.nx,
        }
    }

    /// Slices `z` of the whole volume (a slab).
    pub fn slab(volume: &ConeVolume, z: Range<usize>) -> Self {
        Self {
            z,
            y: 0..volume.ny,
            x: 0..volume.nx,
        }
    }

    /// `(nz, ny, nx)` of the box.
    pub fn dim(&self) -> (usize, usize, usize) {
        (self.z.len(), self.y.len(), self.x.len())
    }

    /// Checks that the box is non-empty and inside `volume`.
    pub fn check(&self, volume: &ConeVolume) -> Result<()> {
        if self.z.is_empty()
            || self.y.is_empty()
            || self.x.is_empty()
            || self.z.end > volume.nz
            || self.y.end > volume.ny
            || self.x.end > volume.nx
        {
            return Err(CoreError::Geometry(format!(
                "volume box z {:?} × y {:?} × x {:?} is empty or outside the {}×{}×{} volume",
                self.z, self.y, self.x, volume.nz, volume.ny, volume.nx
            )));
        }
        Ok(())
    }

    /// Lower bounds in index order `[x, y, z]`.
    pub(crate) fn lo(&self) -> [usize; 3] {
        [self.x.start, self.y.start, self.z.start]
    }

    /// Upper bounds (exclusive) in index order `[x, y, z]`.
    pub(crate) fn hi(&self) -> [usize; 3] {
        [self.x.end, self.y.end, self.z.end]
    }
}

/// One projection's source and detector in voxel-index coordinates
/// `[X, Y, Z]` (`X = cx + x/h`, `Y = cy − y/h`, `Z = cz + z/h`: voxel
/// `(ix, iy, iz)` is centred at `(ix, iy, iz)`). `repr(C)`: GPU kernels
/// read these as they are.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RayFrame {
    /// The source.
    pub src: [f64; 3],
    /// Detector pixel coordinate (0, 0).
    pub base: [f64; 3],
    /// Step of one detector column.
    pub eu: [f64; 3],
    /// Step of one detector row.
    pub ev: [f64; 3],
}

/// The source and detector frames of every projection of `geometry` in the
/// voxel-index coordinates of `volume`: the rays of the cone-beam projectors
/// (CPU and GPU alike) are `src → base + col·eu + row·ev`.
pub fn ray_frames(geometry: &ConeGeometry, volume: &ConeVolume) -> Vec<RayFrame> {
    let h = volume.voxel_size as f64;
    let c = [
        (volume.nx as f64 - 1.0) * 0.5,
        (volume.ny as f64 - 1.0) * 0.5,
        (volume.nz as f64 - 1.0) * 0.5,
    ];
    let to_index = |p: [f64; 3]| [c[0] + p[0] / h, c[1] - p[1] / h, c[2] + p[2] / h];
    let to_step = |d: [f64; 3]| [d[0] / h, -d[1] / h, d[2] / h];
    (0..geometry.n_angles())
        .map(|i| {
            let base = geometry.detector_point(i, 0.0, 0.0);
            let pu = geometry.detector_point(i, 1.0, 0.0);
            let pv = geometry.detector_point(i, 0.0, 1.0);
            RayFrame {
                src: to_index(geometry.source(i)),
                base: to_index(base),
                eu: to_step([pu[0] - base[0], pu[1] - base[1], pu[2] - base[2]]),
                ev: to_step([pv[0] - base[0], pv[1] - base[1], pv[2] - base[2]]),
            }
        })
        .collect()
}

/// The rays of a cone-beam geometry on a volume box.
#[derive(Clone, Debug)]
pub(crate) struct ConeRays {
    pub geometry: ConeGeometry,
    pub volume: ConeVolume,
    pub region: VolumeBox,
    pub frames: Vec<RayFrame>,
}

impl ConeRays {
    pub fn new(geometry: &ConeGeometry, volume: &ConeVolume, region: VolumeBox) -> Result<Self> {
        region.check(volume)?;
        let frames = ray_frames(geometry, volume);
        let rays = Self {
            geometry: geometry.clone(),
            volume: *volume,
            region,
            frames,
        };
        rays.check_source_outside()?;
        Ok(rays)
    }

    /// The ray models treat rays as lines: the source must stay outside the
    /// volume (as [`ConeGeometry::check_volume`] demands).
    fn check_source_outside(&self) -> Result<()> {
        let v = &self.volume;
        let inside = |p: &[f64; 3]| {
            p[0] > -0.5
                && p[0] < v.nx as f64 - 0.5
                && p[1] > -0.5
                && p[1] < v.ny as f64 - 0.5
                && p[2] > -0.5
                && p[2] < v.nz as f64 - 0.5
        };
        if self.frames.iter().any(|f| inside(&f.src)) {
            return Err(CoreError::Geometry(format!(
                "the source orbit (radius {}) passes through the {}×{}×{} volume of voxel {}",
                self.geometry.sod(),
                v.nx,
                v.ny,
                v.nz,
                v.voxel_size
            )));
        }
        Ok(())
    }

    pub fn n_rows(&self) -> usize {
        self.geometry.n_rows()
    }

    pub fn n_cols(&self) -> usize {
        self.geometry.n_cols()
    }

    pub fn n_bins(&self) -> usize {
        self.n_rows() * self.n_cols()
    }

    pub fn n_angles(&self) -> usize {
        self.frames.len()
    }

    /// Image shape of the operator: `(nz·ny, nx)` of the region.
    pub fn image_dim(&self) -> (usize, usize) {
        let (nz, ny, nx) = self.region.dim();
        (nz * ny, nx)
    }

    /// Source and direction (source → centre of detector pixel
    /// `(row, col)`) in index coordinates.
    #[inline(always)]
    pub fn ray(&self, a: usize, row: usize, col: usize) -> ([f64; 3], [f64; 3]) {
        let f = &self.frames[a];
        let (c, r) = (col as f64, row as f64);
        let d = [
            f.base[0] + c * f.eu[0] + r * f.ev[0] - f.src[0],
            f.base[1] + c * f.eu[1] + r * f.ev[1] - f.src[1],
            f.base[2] + c * f.eu[2] + r * f.ev[2] - f.src[2],
        ];
        (f.src, d)
    }

    /// Detector rows whose rays can reach voxels of `b` at projection `a`:
    /// the rows of the shadow of `b` grown by one voxel (Joseph's
    /// interpolation reaches one voxel beyond the ray), plus one row each
    /// side. All rows if a corner is not in front of the source.
    pub fn rows_reaching(&self, a: usize, b: &VolumeBox) -> Range<usize> {
        let v = &self.volume;
        let h = v.voxel_size as f64;
        let world = |ix: f64, iy: f64, iz: f64| {
            (
                (ix - (v.nx as f64 - 1.0) * 0.5) * h,
                ((v.ny as f64 - 1.0) * 0.5 - iy) * h,
                (iz - (v.nz as f64 - 1.0) * 0.5) * h,
            )
        };
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for &iz in &[b.z.start as f64 - 1.5, b.z.end as f64 + 0.5] {
            for &iy in &[b.y.start as f64 - 1.5, b.y.end as f64 + 0.5] {
                for &ix in &[b.x.start as f64 - 1.5, b.x.end as f64 + 0.5] {
                    let (x, y, z) = world(ix, iy, iz);
                    match self.geometry.project_point(a, x, y, z) {
                        Some(p) if p.row.is_finite() => {
                            lo = lo.min(p.row);
                            hi = hi.max(p.row);
                        }
                        _ => return 0..self.n_rows(),
                    }
                }
            }
        }
        let n = self.n_rows() as f64;
        let first = (lo.floor() - 1.0).clamp(0.0, n) as usize;
        let end = (hi.ceil() + 2.0).clamp(0.0, n) as usize;
        first..end.max(first)
    }

    /// Strides of the region's flat index along `[x, y, z]`.
    #[inline(always)]
    pub fn strides(&self) -> [usize; 3] {
        let r = &self.region;
        [1, r.x.len(), r.x.len() * r.y.len()]
    }

    /// Flat index of voxel `p = [x, y, z]` within the region.
    #[inline(always)]
    pub fn flat(&self, p: [usize; 3]) -> usize {
        let r = &self.region;
        ((p[2] - r.z.start) * r.y.len() + (p[1] - r.y.start)) * r.x.len() + (p[0] - r.x.start)
    }

    pub fn check_shapes(
        &self,
        image: (usize, usize),
        sino: (usize, usize),
        angles: &[usize],
    ) -> Result<()> {
        check_angles(angles, self.n_angles())?;
        super::operator::check_dim2("image", image, self.image_dim())?;
        super::operator::check_dim2("sinogram", sino, (angles.len(), self.n_bins()))
    }
}

/// A cone-beam ray model: enumerates the weights of one row of `A`,
/// restricted to the voxels of a box.
pub(crate) trait ConeTracer: Sync {
    /// The rays.
    fn rays(&self) -> &ConeRays;

    /// Calls `visit(index, weight)` (`index` the voxel's flat index within
    /// the projector's region, see [`ConeRays::flat`]) for the voxels of
    /// `clip` (a box inside the region) on the ray
    /// of detector pixel `(row, col)` of projection `a`. The weights do not
    /// depend on `clip`: a partition of boxes visits, between its pieces,
    /// exactly the pairs of the whole.
    fn trace<F: FnMut(usize, f64)>(
        &self,
        a: usize,
        row: usize,
        col: usize,
        clip: &VolumeBox,
        visit: F,
    );
}

/// Forward projection `out[j][row·col] = Σ w·x` over a tracer (rays in
/// parallel).
pub(crate) fn cone_forward<T: Real, R: ConeTracer>(
    tracer: &R,
    image: ArrayView2<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut2<'_, T>,
) {
    let rays = tracer.rays();
    let nc = rays.n_cols();
    let img = image.as_standard_layout();
    let x = img.as_slice().expect("standard layout");
    let nr = rays.n_rows();
    let region = &rays.region;
    let reach: Vec<Range<usize>> = angles
        .par_iter()
        .map(|&a| rays.rows_reaching(a, region))
        .collect();
    let mut flat = vec![T::ZERO; angles.len() * nr * nc];
    flat.par_chunks_mut(nc)
        .enumerate()
        .for_each(|(i, out_row)| {
            let (j, r) = (i / nr, i % nr);
            if !reach[j].contains(&r) {
                return;
            }
            let a = angles[j];
            for (col, o) in out_row.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                tracer.trace(a, r, col, region, |p, w| acc += x[p] * T::from_f64(w));
                *o = acc;
            }
        });
    let view = ArrayView2::from_shape((angles.len(), nr * nc), &flat).expect("shape");
    out.assign(&view);
}

/// Exact transpose of [`cone_forward`]: the region is cut into slabs of
/// slices, each slab scatters every ray clipped to itself into its part of
/// the result (no shared writes, no per-thread copies of the volume, the
/// same result for any number of threads).
pub(crate) fn cone_back<T: Real, R: ConeTracer>(
    tracer: &R,
    sino: ArrayView2<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut2<'_, T>,
) {
    let rays = tracer.rays();
    let nc = rays.n_cols();
    let region = &rays.region;
    let (nz, ny, nx) = region.dim();
    let plane = ny * nx;
    let per = nz.div_ceil(2 * rayon::current_num_threads()).max(1);
    let sino = sino.as_standard_layout();
    let mut total = vec![T::ZERO; nz * plane];
    total
        .par_chunks_mut(per * plane)
        .enumerate()
        .for_each(|(i, acc)| {
            let z0 = region.z.start + i * per;
            let b = VolumeBox {
                z: z0..z0 + acc.len() / plane,
                y: region.y.clone(),
                x: region.x.clone(),
            };
            let offset = i * per * plane;
            for (j, &a) in angles.iter().enumerate() {
                let srow = sino.row(j);
                let s = srow.as_slice().expect("standard layout");
                for r in rays.rows_reaching(a, &b) {
                    for col in 0..nc {
                        let y = s[r * nc + col];
                        if y == T::ZERO {
                            continue;
                        }
                        tracer.trace(a, r, col, &b, |k, w| {
                            acc[k - offset] += y * T::from_f64(w);
                        });
                    }
                }
            }
        });
    let view = ArrayView2::from_shape((nz * ny, nx), &total).expect("shape");
    out.assign(&view);
}

/// Defines a ray-driven cone-beam projector: the struct (its rays only)
/// and its constructors `new`, `with_box` and the accessor `region`.
macro_rules! cone_ray_projector {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $ty {
            rays: ConeRays,
        }

        impl $ty {
            /// The projector for `geometry` on the whole of `volume`.
            ///
            /// Errors: the source orbit passes through the volume.
            pub fn new(geometry: &ConeGeometry, volume: &ConeVolume) -> Result<Self> {
                Self::with_box(geometry, volume, VolumeBox::full(volume))
            }

            /// The projector restricted to `region` of `volume`.
            ///
            /// Errors: an empty region or one outside the volume; the source
            /// orbit passes through the volume.
            pub fn with_box(
                geometry: &ConeGeometry,
                volume: &ConeVolume,
                region: VolumeBox,
            ) -> Result<Self> {
                Ok(Self {
                    rays: ConeRays::new(geometry, volume, region)?,
                })
            }

            /// The box the projector acts on.
            pub fn region(&self) -> &VolumeBox {
                &self.rays.region
            }
        }
    };
}

pub(crate) use cone_ray_projector;

/// Implements [`Projector`](super::Projector) and
/// [`ConeOperator`](super::ConeOperator) for a matched cone-beam tracer.
macro_rules! matched_cone_projector {
    ($ty:ty, $name:expr) => {
        impl<T: Real> $crate::iterative::Projector<T> for $ty {
            fn name(&self) -> &'static str {
                $name
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
                image: ndarray::ArrayView2<'_, T>,
                angles: &[usize],
                out: ndarray::ArrayViewMut2<'_, T>,
            ) -> $crate::error::Result<()> {
                self.rays.check_shapes(image.dim(), out.dim(), angles)?;
                $crate::iterative::cone_rays::cone_forward(self, image, angles, out);
                Ok(())
            }
            fn back_slice(
                &self,
                sinogram: ndarray::ArrayView2<'_, T>,
                angles: &[usize],
                out: ndarray::ArrayViewMut2<'_, T>,
            ) -> $crate::error::Result<()> {
                self.rays.check_shapes(out.dim(), sinogram.dim(), angles)?;
                $crate::iterative::cone_rays::cone_back(self, sinogram, angles, out);
                Ok(())
            }
            fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
                let nc = self.rays.n_cols();
                if angle < self.rays.n_angles() && bin < self.rays.n_bins() {
                    let rays = &self.rays;
                    $crate::iterative::cone_rays::ConeTracer::trace(
                        self,
                        angle,
                        bin / nc,
                        bin % nc,
                        &rays.region,
                        |i, w| visit(i, T::from_f64(w)),
                    );
                }
            }
        }

        impl<T: Real> $crate::iterative::ConeOperator<T> for $ty {
            fn volume_dim(&self) -> (usize, usize, usize) {
                self.rays.region.dim()
            }
            fn detector_dim(&self) -> (usize, usize) {
                (self.rays.n_rows(), self.rays.n_cols())
            }
        }
    };
}

pub(crate) use matched_cone_projector;
