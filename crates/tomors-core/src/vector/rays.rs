//! What the ray-driven vector-geometry projectors share: the rays of a
//! vector geometry on a box of a volume, a ray-model trait, and the
//! forward / exact-transpose drivers over it.
//!
//! As the circular cone-beam projectors, they are
//! [`Projector`](crate::iterative::Projector)s on "one slice" holding the
//! whole volume box: images are `[z·y][x]` (the `[z][y][x]` box viewed as
//! 2-D), sinograms `[projection][row·col]`, so bin `k` is detector pixel
//! `(k / n_cols, k % n_cols)`; every iterative algorithm runs on them
//! unchanged and [`reconstruct_cone`](crate::iterative::reconstruct_cone)
//! does the reshaping.

use std::ops::Range;

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::error::VectorGeometryError;
use super::frames::Frames;
use super::geometry::VecGeometry;
use super::volume::VolumeGeometry;
use crate::error::{CoreError, Result};
use crate::iterative::{Real, VolumeBox};

/// The rays of a vector geometry on a box of a volume.
#[derive(Clone, Debug)]
pub(crate) struct VecRays {
    pub geometry: VecGeometry,
    pub volume: VolumeGeometry,
    pub region: VolumeBox,
    pub frames: Frames,
}

impl VecRays {
    /// Errors: an empty box or one outside the volume; a cone-beam volume
    /// that reaches behind a source (the projection is named).
    pub fn new(
        geometry: &VecGeometry,
        volume: &VolumeGeometry,
        region: VolumeBox,
    ) -> Result<Self, VectorGeometryError> {
        volume.check_box(&region)?;
        let frames = Frames::new(geometry, volume);
        frames.check_in_front(volume)?;
        Ok(Self {
            geometry: geometry.clone(),
            volume: *volume,
            region,
            frames,
        })
    }

    pub fn n_rows(&self) -> usize {
        self.frames.n_rows
    }

    pub fn n_cols(&self) -> usize {
        self.frames.n_cols
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

    /// Strides of the region's flat index along `[x, y, z]`.
    #[inline(always)]
    pub fn strides(&self) -> [usize; 3] {
        let r = &self.region;
        [1, r.x.len(), r.x.len() * r.y.len()]
    }

    pub fn check_shapes(
        &self,
        image: (usize, usize),
        sino: (usize, usize),
        angles: &[usize],
    ) -> Result<()> {
        if let Some(a) = angles.iter().find(|&&a| a >= self.n_angles()) {
            return Err(CoreError::Parameter(format!(
                "projection index {a} out of range (the geometry has {})",
                self.n_angles()
            )));
        }
        let want_image = self.image_dim();
        if image != want_image {
            return Err(CoreError::Shape(format!(
                "image is {image:?}, expected {want_image:?} ([z·y][x] of the volume box)"
            )));
        }
        let want_sino = (angles.len(), self.n_bins());
        if sino != want_sino {
            return Err(CoreError::Shape(format!(
                "projections are {sino:?}, expected {want_sino:?} ([projection][row·col])"
            )));
        }
        Ok(())
    }

    /// Detector rows and columns that can reach box `b` at projection `a`.
    pub fn pixels_reaching(&self, a: usize, b: &VolumeBox) -> (Range<usize>, Range<usize>) {
        self.frames.pixels_reaching(a, b)
    }
}

/// A ray model: enumerates the weights of one row of `A`, restricted to
/// the voxels of a box.
pub(crate) trait VecTracer: Sync {
    /// The rays.
    fn rays(&self) -> &VecRays;

    /// Calls `visit(index, weight)` (`index` the voxel's flat index within
    /// the projector's region) for the voxels of `clip` (a box inside the
    /// region) on the ray of detector pixel (`row`, `col`) of projection
    /// `a`. The weights do not depend on `clip`: the pieces of a partition
    /// visit, between them, exactly the pairs of the whole.
    fn trace<F: FnMut(usize, f64)>(
        &self,
        a: usize,
        row: usize,
        col: usize,
        clip: &VolumeBox,
        visit: F,
    );
}

/// Forward projection `out[j][row·col] = Σ w·x` (detector rows of all
/// projections in parallel; rays that cannot reach the region are zero
/// without being traced).
pub(crate) fn vec_forward<T: Real, R: VecTracer>(
    tracer: &R,
    image: ArrayView2<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut2<'_, T>,
) {
    let rays = tracer.rays();
    let (nr, nc) = (rays.n_rows(), rays.n_cols());
    let img = image.as_standard_layout();
    let x = img.as_slice().expect("standard layout");
    let region = &rays.region;
    let reach: Vec<(Range<usize>, Range<usize>)> = angles
        .par_iter()
        .map(|&a| rays.pixels_reaching(a, region))
        .collect();
    let mut flat = vec![T::ZERO; angles.len() * nr * nc];
    flat.par_chunks_mut(nc)
        .enumerate()
        .for_each(|(i, out_row)| {
            let (j, r) = (i / nr, i % nr);
            let (rows, cols) = &reach[j];
            if !rows.contains(&r) {
                return;
            }
            let a = angles[j];
            for col in cols.clone() {
                let mut acc = T::ZERO;
                tracer.trace(a, r, col, region, |p, w| acc += x[p] * T::from_f64(w));
                out_row[col] = acc;
            }
        });
    let view = ArrayView2::from_shape((angles.len(), nr * nc), &flat).expect("shape");
    out.assign(&view);
}

/// Exact transpose of [`vec_forward`]: the region is cut into slabs of
/// slices, each slab scatters every ray that reaches it, clipped to
/// itself, into its own part of the result (no shared writes, no copies of
/// the volume, the same result for any number of threads).
pub(crate) fn vec_back<T: Real, R: VecTracer>(
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
                let (rows, cols) = rays.pixels_reaching(a, &b);
                for r in rows {
                    for col in cols.clone() {
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
