//! The projector trait: a linear operator `A` from images to sinograms and
//! a back projector `B` (`Aᵀ` for matched pairs) the other way.

use std::ops::Range;

use ndarray::{Array2, ArrayView2, ArrayView3, ArrayViewMut2, ArrayViewMut3, Axis, Zip};
use rayon::prelude::*;

use super::real::Real;
use crate::error::{CoreError, Result};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// A rectangular part of a slice grid: rows `rows` (y, row 0 at the top) and
/// columns `cols` (x). Projectors restricted to a region act on images of
/// the region's size as if the rest of the grid were zero (domain
/// decomposition: the sum over a partition of the grid of the pieces'
/// projections equals the projection of the whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Region {
    /// Rows of the grid covered by the region.
    pub rows: Range<usize>,
    /// Columns of the grid covered by the region.
    pub cols: Range<usize>,
}

impl Region {
    /// The whole grid.
    pub fn full(grid: &SliceGrid) -> Self {
        Self {
            rows: 0..grid.ny,
            cols: 0..grid.nx,
        }
    }

    /// Rows × columns of the region.
    pub fn dim(&self) -> (usize, usize) {
        (self.rows.len(), self.cols.len())
    }

    /// Checks that the region is non-empty and lies inside `grid`.
    pub fn check(&self, grid: &SliceGrid) -> Result<()> {
        if self.rows.is_empty()
            || self.cols.is_empty()
            || self.rows.end > grid.ny
            || self.cols.end > grid.nx
        {
            return Err(CoreError::Geometry(format!(
                "region rows {:?} × columns {:?} is empty or outside the {}×{} grid",
                self.rows, self.cols, grid.ny, grid.nx
            )));
        }
        Ok(())
    }
}

/// A parallel-beam projector acting on single slices (`[y][x]` images and
/// `[angle][bin]` sinograms) and, through the provided methods, on stacks of
/// slices (`[slice][y][x]` and `[slice][angle][bin]`; parallel beam is
/// slice-independent, so slices are processed in parallel).
///
/// The forward projection `A` maps an image to line integrals (world units,
/// value × length); the back projection `B` maps a sinogram to an image.
/// For a matched projector (`is_matched`) `B = Aᵀ` exactly (up to rounding).
/// Every method takes the list of projection indices `angles` it works on,
/// so block methods can address a block of projections `A_ℓ`; sinogram
/// arguments then have one row per listed projection.
pub trait Projector<T: Real>: Send + Sync {
    /// Short name ("joseph", "line", "voxel").
    fn name(&self) -> &'static str;

    /// Number of projections of the geometry.
    fn n_angles(&self) -> usize;

    /// Detector bins per row.
    fn n_bins(&self) -> usize;

    /// `(ny, nx)`: the shape of the images (the region) the operator acts on.
    fn image_dim(&self) -> (usize, usize);

    /// Whether the back projection is the exact transpose of the forward
    /// projection.
    fn is_matched(&self) -> bool;

    /// Forward projection of `image` for the projections `angles`,
    /// overwriting `out` (`[angles.len()][n_bins]`).
    ///
    /// Errors: shapes that do not fit, a projection index out of range.
    fn forward_slice(
        &self,
        image: ArrayView2<'_, T>,
        angles: &[usize],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()>;

    /// Back projection of `sinogram` (`[angles.len()][n_bins]`, the rows of
    /// projections `angles`), overwriting `out` (`image_dim`).
    ///
    /// Errors: shapes that do not fit, a projection index out of range.
    fn back_slice(
        &self,
        sinogram: ArrayView2<'_, T>,
        angles: &[usize],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()>;

    /// Calls `visit(index, weight)` for the non-zero entries of the row of
    /// the forward operator `A` that belongs to detector bin `bin` of
    /// projection `angle`; `index = iy·nx + ix` within the region. Used by
    /// ART and for row norms. Does nothing for indices out of range.
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T));

    /// Forward projection of a stack: `volume` `[slice][y][x]` into `out`
    /// `[slice][angles.len()][n_bins]` (overwritten).
    fn forward(
        &self,
        volume: ArrayView3<'_, T>,
        angles: &[usize],
        mut out: ArrayViewMut3<'_, T>,
    ) -> Result<()> {
        let (ny, nx) = self.image_dim();
        let ns = volume.len_of(Axis(0));
        check_dim3("volume", volume.dim(), (ns, ny, nx))?;
        check_dim3("sinograms", out.dim(), (ns, angles.len(), self.n_bins()))?;
        check_angles(angles, self.n_angles())?;
        out.outer_iter_mut()
            .into_par_iter()
            .zip(volume.outer_iter().into_par_iter())
            .try_for_each(|(o, v)| self.forward_slice(v, angles, o))
    }

    /// Back projection of a stack: `sinograms` `[slice][angles.len()][n_bins]`
    /// into `out` `[slice][y][x]` (overwritten).
    fn back(
        &self,
        sinograms: ArrayView3<'_, T>,
        angles: &[usize],
        mut out: ArrayViewMut3<'_, T>,
    ) -> Result<()> {
        let (ny, nx) = self.image_dim();
        let ns = sinograms.len_of(Axis(0));
        check_dim3(
            "sinograms",
            sinograms.dim(),
            (ns, angles.len(), self.n_bins()),
        )?;
        check_dim3("volume", out.dim(), (ns, ny, nx))?;
        check_angles(angles, self.n_angles())?;
        out.outer_iter_mut()
            .into_par_iter()
            .zip(sinograms.outer_iter().into_par_iter())
            .try_for_each(|(o, s)| self.back_slice(s, angles, o))
    }

    /// Row sums `A·1` for the projections `angles` (`[angles.len()][n_bins]`).
    fn row_sums(&self, angles: &[usize]) -> Result<Array2<T>> {
        let ones = Array2::from_elem(self.image_dim(), T::ONE);
        let mut out = Array2::from_elem((angles.len(), self.n_bins()), T::ZERO);
        self.forward_slice(ones.view(), angles, out.view_mut())?;
        Ok(out)
    }

    /// Column sums of the back projector, `B·1` over the projections
    /// `angles` (`image_dim`).
    fn column_sums(&self, angles: &[usize]) -> Result<Array2<T>> {
        let ones = Array2::from_elem((angles.len(), self.n_bins()), T::ONE);
        let mut out = Array2::from_elem(self.image_dim(), T::ZERO);
        self.back_slice(ones.view(), angles, out.view_mut())?;
        Ok(out)
    }

    /// Squared 2-norms `‖a_i‖²` of the rows of `A` for the projections
    /// `angles` (`[angles.len()][n_bins]`), accumulated in f64.
    fn row_norms_sq(&self, angles: &[usize]) -> Result<Array2<T>> {
        check_angles(angles, self.n_angles())?;
        let nb = self.n_bins();
        let mut out = Array2::from_elem((angles.len(), nb), T::ZERO);
        out.outer_iter_mut()
            .into_par_iter()
            .zip(angles.par_iter())
            .for_each(|(mut row, &a)| {
                for (k, o) in row.iter_mut().enumerate() {
                    let mut sum = 0.0f64;
                    self.trace_ray(a, k, &mut |_, w| sum += w.to_f64() * w.to_f64());
                    *o = T::from_f64(sum);
                }
            });
        Ok(out)
    }
}

/// `0..n` as a list of projection indices.
pub fn all_angles(n: usize) -> Vec<usize> {
    (0..n).collect()
}

pub(crate) fn check_dim3(
    what: &str,
    got: (usize, usize, usize),
    want: (usize, usize, usize),
) -> Result<()> {
    if got != want {
        return Err(CoreError::Shape(format!(
            "{what} are {got:?}, expected {want:?}"
        )));
    }
    Ok(())
}

pub(crate) fn check_dim2(what: &str, got: (usize, usize), want: (usize, usize)) -> Result<()> {
    if got != want {
        return Err(CoreError::Shape(format!(
            "{what} is {got:?}, expected {want:?}"
        )));
    }
    Ok(())
}

pub(crate) fn check_angles(angles: &[usize], n: usize) -> Result<()> {
    if let Some(a) = angles.iter().find(|&&a| a >= n) {
        return Err(CoreError::Parameter(format!(
            "projection index {a} out of range (the geometry has {n})"
        )));
    }
    Ok(())
}

/// `⌊v⌋` as an integer without a libm call (`f64::floor` is a function call
/// on targets without SSE4.1); exact for |v| < 2⁶³.
#[inline(always)]
pub(crate) fn floor_i64(v: f64) -> i64 {
    let i = v as i64;
    if (i as f64) > v {
        i - 1
    } else {
        i
    }
}

/// Per-projection constants in f64.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Proj {
    pub cos: f64,
    pub sin: f64,
    pub center: f64,
}

/// The geometry shared by the ray-driven projectors, in f64.
#[derive(Clone, Debug)]
pub(crate) struct RayGeometry {
    pub projs: Vec<Proj>,
    pub n_bins: usize,
    pub bin_width: f64,
    pub pixel: f64,
    /// Column coordinate of the grid centre, `(nx − 1)/2`.
    pub cx: f64,
    /// Row coordinate of the grid centre, `(ny − 1)/2`.
    pub cy: f64,
    pub region: Region,
}

impl RayGeometry {
    pub fn new(geometry: &ParallelGeometry, grid: &SliceGrid, region: Region) -> Result<Self> {
        region.check(grid)?;
        let projs = geometry
            .angles()
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let a = a as f64;
                Proj {
                    cos: a.cos(),
                    sin: a.sin(),
                    center: geometry.center(i) as f64,
                }
            })
            .collect();
        Ok(Self {
            projs,
            n_bins: geometry.n_bins(),
            bin_width: geometry.bin_width() as f64,
            pixel: grid.pixel_size as f64,
            cx: (grid.nx as f64 - 1.0) * 0.5,
            cy: (grid.ny as f64 - 1.0) * 0.5,
            region,
        })
    }

    /// Detector position `s` (world units) of the centre of bin `k`.
    #[inline(always)]
    pub fn s(&self, p: &Proj, k: usize) -> f64 {
        (k as f64 - p.center) * self.bin_width
    }

    pub fn check_slice_shapes(
        &self,
        image: (usize, usize),
        sino: (usize, usize),
        angles: &[usize],
    ) -> Result<()> {
        check_angles(angles, self.projs.len())?;
        check_dim2("image", image, self.region.dim())?;
        check_dim2("sinogram", sino, (angles.len(), self.n_bins))
    }
}

/// A ray-driven projection model: enumerates the weights of one row of `A`.
pub(crate) trait Tracer: Sync {
    /// Calls `visit(index, weight)` for the entries of the row of bin `k` of
    /// projection `a` (`index` within the region); `scratch` is reusable
    /// working memory.
    fn trace<F: FnMut(usize, f64)>(&self, a: usize, k: usize, scratch: &mut Vec<f64>, visit: F);
}

/// Generic forward projection over a ray tracer: `out[a][k] = Σ w·x`.
pub(crate) fn forward_by_rays<T: Real, R: Tracer>(
    image: ArrayView2<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut2<'_, T>,
    tracer: &R,
) {
    let img = image.as_standard_layout();
    let x = img.as_slice().expect("standard layout");
    out.outer_iter_mut()
        .into_par_iter()
        .zip(angles.par_iter())
        .for_each(|(mut row, &a)| {
            let mut scratch = Vec::new();
            for (k, o) in row.iter_mut().enumerate() {
                let mut acc = T::ZERO;
                tracer.trace(a, k, &mut scratch, |i, w| acc += x[i] * T::from_f64(w));
                *o = acc;
            }
        });
}

/// Generic exact transpose over a ray tracer: `out[j] = Σ_rays w·y`.
/// Angles are split in chunks, each accumulated in its own image, and the
/// images summed.
pub(crate) fn back_by_rays<T: Real, R: Tracer>(
    sino: ArrayView2<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut2<'_, T>,
    tracer: &R,
) {
    let dim = out.dim();
    let n = angles.len();
    let chunks = (rayon::current_num_threads() * 2).clamp(1, n.max(1));
    let per = n.div_ceil(chunks).max(1);
    let total = (0..n)
        .step_by(per)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|start| {
            let mut acc = vec![T::ZERO; dim.0 * dim.1];
            let mut scratch = Vec::new();
            let end = (start + per).min(n);
            for (j, &a) in angles.iter().enumerate().take(end).skip(start) {
                for (k, &y) in sino.row(j).iter().enumerate() {
                    if y == T::ZERO {
                        continue;
                    }
                    tracer.trace(a, k, &mut scratch, |i, w| acc[i] += y * T::from_f64(w));
                }
            }
            acc
        })
        .reduce_with(|mut a, b| {
            a.iter_mut().zip(&b).for_each(|(x, &y)| *x += y);
            a
        })
        .unwrap_or_else(|| vec![T::ZERO; dim.0 * dim.1]);
    Zip::from(&mut out)
        .and(&ndarray::ArrayView2::from_shape(dim, &total).expect("shape"))
        .for_each(|o, &v| *o = v);
}

/// Forward projection of a stack (`[slice][y][x]` → `[slice][angle][bin]`)
/// sharing each ray's weights between all slices: the ray is traced once
/// into a list of (index, weight) pairs that every slice then reads.
pub(crate) fn forward_stack_by_rays<T: Real, R: Tracer>(
    volume: ArrayView3<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut3<'_, T>,
    tracer: &R,
) {
    let (ns, ny, nx) = volume.dim();
    if ns == 1 {
        forward_by_rays(
            volume.index_axis(Axis(0), 0),
            angles,
            out.index_axis_mut(Axis(0), 0),
            tracer,
        );
        return;
    }
    let npix = ny * nx;
    let vol = volume.as_standard_layout();
    let v = vol.as_slice().expect("standard layout");
    out.axis_iter_mut(Axis(1))
        .into_par_iter()
        .zip(angles.par_iter())
        .for_each(|(mut sino, &a)| {
            let mut scratch = Vec::new();
            let mut row: Vec<(usize, T)> = Vec::new();
            for k in 0..sino.len_of(Axis(1)) {
                row.clear();
                tracer.trace(a, k, &mut scratch, |i, w| row.push((i, T::from_f64(w))));
                for s in 0..ns {
                    let img = &v[s * npix..(s + 1) * npix];
                    sino[[s, k]] = row.iter().fold(T::ZERO, |acc, &(i, w)| acc + img[i] * w);
                }
            }
        });
}

/// Exact transpose of [`forward_stack_by_rays`]: slices in groups, angles in
/// chunks with one accumulator per chunk (bounded to about 256 MiB in all).
pub(crate) fn back_stack_by_rays<T: Real, R: Tracer>(
    sinograms: ArrayView3<'_, T>,
    angles: &[usize],
    mut out: ArrayViewMut3<'_, T>,
    tracer: &R,
) {
    const GROUP: usize = 8;
    let (ns, ny, nx) = out.dim();
    let npix = ny * nx;
    let n = angles.len();
    for g0 in (0..ns).step_by(GROUP) {
        let g = (ns - g0).min(GROUP);
        let budget = (256usize << 20) / (g * npix * std::mem::size_of::<T>()).max(1);
        let chunks = rayon::current_num_threads().min(budget).clamp(1, n.max(1));
        let per = n.div_ceil(chunks).max(1);
        let total = (0..n)
            .step_by(per)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|start| {
                let mut acc = vec![T::ZERO; g * npix];
                let mut scratch = Vec::new();
                let mut row: Vec<(usize, T)> = Vec::new();
                let end = (start + per).min(n);
                for (j, &a) in angles.iter().enumerate().take(end).skip(start) {
                    for k in 0..sinograms.len_of(Axis(2)) {
                        row.clear();
                        let mut traced = false;
                        for s in 0..g {
                            let y = sinograms[[g0 + s, j, k]];
                            if y == T::ZERO {
                                continue;
                            }
                            if !traced {
                                tracer.trace(a, k, &mut scratch, |i, w| {
                                    row.push((i, T::from_f64(w)))
                                });
                                traced = true;
                            }
                            let img = &mut acc[s * npix..(s + 1) * npix];
                            for &(i, w) in &row {
                                img[i] += y * w;
                            }
                        }
                    }
                }
                acc
            })
            .reduce_with(|mut a, b| {
                a.iter_mut().zip(&b).for_each(|(x, &y)| *x += y);
                a
            })
            .unwrap_or_else(|| vec![T::ZERO; g * npix]);
        let view = ndarray::ArrayView3::from_shape((g, ny, nx), &total).expect("shape");
        out.slice_mut(ndarray::s![g0..g0 + g, .., ..]).assign(&view);
    }
}
