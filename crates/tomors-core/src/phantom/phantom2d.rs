//! 2D ellipse phantoms: rasterisation and exact parallel-beam projections.

use ndarray::{Array2, ArrayViewMut1};
use rayon::prelude::*;

use super::analytic::disc_strip;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// One ellipse of a 2D phantom, in normalised phantom coordinates
/// (the phantom lives in `[−1, 1]²`, x to the right, y up).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ellipse {
    /// Centre (x, y).
    pub center: (f64, f64),
    /// Semi-axes: along the ellipse's own x axis, then its y axis.
    pub axes: (f64, f64),
    /// Counter-clockwise rotation of the ellipse (radians), x towards y.
    pub angle_rad: f64,
    /// The value added inside the ellipse (attenuation per world unit).
    pub value: f64,
}

impl Ellipse {
    /// Whether the point (x, y) (normalised coordinates) lies inside or on
    /// the ellipse.
    pub fn contains(&self, x: f64, y: f64) -> bool {
        let (c, s) = (self.angle_rad.cos(), self.angle_rad.sin());
        let (dx, dy) = (x - self.center.0, y - self.center.1);
        let p = (dx * c + dy * s) / self.axes.0;
        let q = (-dx * s + dy * c) / self.axes.1;
        p * p + q * q <= 1.0
    }
}

/// A 2D phantom: a sum of constant-valued ellipses.
///
/// Phantom coordinates are normalised to `[−1, 1]²`, with y up as in world
/// coordinates (see [`crate::geometry`]). A phantom is placed on the world
/// with a `scale` in world units per normalised unit; `scale = n_bins ·
/// bin_width / 2` makes the unit square fill the detector.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Phantom2d {
    /// The ellipses; their values add up where they overlap.
    pub ellipses: Vec<Ellipse>,
}

/// Rows of (value, a, b, x0, y0, angle in degrees) of the Shepp–Logan
/// ellipses (Shepp & Logan 1974), as in MATLAB's `phantom`.
const SHEPP_LOGAN_GEOMETRY: [(f64, f64, f64, f64, f64); 10] = [
    (0.69, 0.92, 0.0, 0.0, 0.0),
    (0.6624, 0.8740, 0.0, -0.0184, 0.0),
    (0.1100, 0.3100, 0.22, 0.0, -18.0),
    (0.1600, 0.4100, -0.22, 0.0, 18.0),
    (0.2100, 0.2500, 0.0, 0.35, 0.0),
    (0.0460, 0.0460, 0.0, 0.1, 0.0),
    (0.0460, 0.0460, 0.0, -0.1, 0.0),
    (0.0460, 0.0230, -0.08, -0.605, 0.0),
    (0.0230, 0.0230, 0.0, -0.606, 0.0),
    (0.0230, 0.0460, 0.06, -0.605, 0.0),
];

/// Toft's modified intensities (better visual contrast).
pub(crate) const MODIFIED_INTENSITIES: [f64; 10] =
    [1.0, -0.8, -0.2, -0.2, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1];

/// The original Shepp–Logan intensities.
const ORIGINAL_INTENSITIES: [f64; 10] =
    [2.0, -0.98, -0.02, -0.02, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01];

impl Phantom2d {
    /// A phantom made of the given ellipses.
    pub fn new(ellipses: Vec<Ellipse>) -> Self {
        Self { ellipses }
    }

    /// The modified Shepp–Logan phantom (Toft's intensities: 1, −0.8, −0.2,
    /// −0.2, 0.1 …), as MATLAB's `phantom('Modified Shepp-Logan')` and
    /// scikit-image's `shepp_logan_phantom`: the three small ellipses at the
    /// bottom, the larger dark ellipse on the left. Values lie in `[0, 1]`.
    pub fn shepp_logan() -> Self {
        Self::from_table(&MODIFIED_INTENSITIES)
    }

    /// The original Shepp–Logan phantom (intensities 2, −0.98, −0.02, …):
    /// low contrast, values in `[0, 2]`.
    pub fn shepp_logan_original() -> Self {
        Self::from_table(&ORIGINAL_INTENSITIES)
    }

    fn from_table(values: &[f64; 10]) -> Self {
        let ellipses = SHEPP_LOGAN_GEOMETRY
            .iter()
            .zip(values)
            .map(|(&(a, b, x0, y0, deg), &value)| Ellipse {
                center: (x0, y0),
                axes: (a, b),
                angle_rad: deg.to_radians(),
                value,
            })
            .collect();
        Self { ellipses }
    }

    /// The phantom's value at normalised point (x, y) (sum over ellipses).
    pub fn value_at(&self, x: f64, y: f64) -> f64 {
        self.ellipses
            .iter()
            .filter(|e| e.contains(x, y))
            .map(|e| e.value)
            .sum()
    }

    /// The ellipses in world units for a given scale; degenerate ellipses
    /// (non-positive or non-finite axes, non-finite parameters) and an
    /// invalid scale contribute nothing.
    pub(crate) fn world_ellipses(&self, scale: f64) -> Vec<WorldEllipse> {
        if !(scale.is_finite() && scale > 0.0) {
            return Vec::new();
        }
        self.ellipses
            .iter()
            .filter_map(|e| WorldEllipse::new(e, scale))
            .collect()
    }

    /// Pixel averages of the phantom on `grid` (`[y][x]`, row 0 at the top),
    /// estimated with `supersample × supersample` points per pixel (at the
    /// centres of a regular sub-grid; `supersample = 0` counts as 1).
    ///
    /// `scale` is in world units per normalised unit; a non-positive or
    /// non-finite scale places no phantom (the image is zero).
    pub fn rasterize(&self, grid: &SliceGrid, scale: f64, supersample: usize) -> Array2<f32> {
        let world = self.world_ellipses(scale);
        let mut out = Array2::<f32>::zeros((grid.ny, grid.nx));
        let s = supersample.max(1);
        out.outer_iter_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(iy, mut row)| {
                let mut acc = vec![0.0f64; grid.nx];
                rasterize_row(&world, grid, s, iy, 1.0, &mut acc);
                store(&acc, &mut row);
            });
        out
    }

    /// Exact parallel-beam projections (`[angle][bin]`) of the phantom
    /// placed with `scale`: the line integrals (value × length, world units)
    /// averaged over each detector bin (bin `k` covers bin coordinate
    /// `[k − ½, k + ½]`), for every projection angle and axis position
    /// (including per-projection axis positions) of `geometry`.
    ///
    /// The projection of an ellipse with semi-axes `a`, `b` at angle θ is
    /// `p(s) = 2ab/R²·√(R² − (s − s_c)²)` with `R² = a²cos²(θ − φ) +
    /// b²sin²(θ − φ)` and `s_c` the projected centre; its bin average uses
    /// the closed-form antiderivative `∫√(R² − s²)ds = (s√(R² − s²) +
    /// R²·asin(s/R))/2`, evaluated in f64. A non-positive or non-finite
    /// scale gives zeros.
    pub fn project(&self, geometry: &ParallelGeometry, scale: f64) -> Array2<f32> {
        let world = self.world_ellipses(scale);
        let n = geometry.n_bins();
        let mut out = Array2::<f32>::zeros((geometry.n_angles(), n));
        out.outer_iter_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut row)| {
                let ray = RayFrame::new(geometry, i);
                let mut acc = vec![0.0f64; n];
                let mut edges = Vec::with_capacity(n + 1);
                for e in &world {
                    e.project_into(&ray, &mut edges, &mut acc);
                }
                store(&acc, &mut row);
            });
        out
    }
}

/// Writes an f64 accumulator into an f32 row.
pub(crate) fn store(acc: &[f64], row: &mut ArrayViewMut1<'_, f32>) {
    row.iter_mut().zip(acc).for_each(|(o, &a)| *o = a as f32);
}

/// The constants of one projection, in f64.
pub(crate) struct RayFrame {
    pub cos: f64,
    pub sin: f64,
    /// Axis position in bin coordinates.
    pub center: f64,
    pub bin_width: f64,
    pub n_bins: usize,
}

impl RayFrame {
    pub(crate) fn new(geometry: &ParallelGeometry, i: usize) -> Self {
        let theta = geometry.angles()[i] as f64;
        Self {
            cos: theta.cos(),
            sin: theta.sin(),
            center: geometry.center(i) as f64,
            bin_width: geometry.bin_width() as f64,
            n_bins: geometry.n_bins(),
        }
    }

    /// Detector position `s` (world units) of bin edge `e` (bin `e` starts
    /// at edge `e`, at bin coordinate `e − ½`).
    #[inline]
    pub(crate) fn edge_s(&self, e: usize) -> f64 {
        (e as f64 - 0.5 - self.center) * self.bin_width
    }

    /// The bins touched by detector interval `[s_lo, s_hi]`, or `None`.
    pub(crate) fn bin_range(&self, s_lo: f64, s_hi: f64) -> Option<(usize, usize)> {
        let u_lo = self.center + s_lo / self.bin_width;
        let u_hi = self.center + s_hi / self.bin_width;
        let last = self.n_bins as f64 - 1.0;
        if !(u_hi >= -0.5 && u_lo <= last + 0.5) {
            return None;
        }
        let k_lo = (u_lo + 0.5).floor().clamp(0.0, last) as usize;
        let k_hi = (u_hi + 0.5).floor().clamp(0.0, last) as usize;
        Some((k_lo, k_hi))
    }
}

/// An ellipse in world units with its precomputed constants.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WorldEllipse {
    pub cx: f64,
    pub cy: f64,
    pub a: f64,
    pub b: f64,
    pub cos: f64,
    pub sin: f64,
    pub value: f64,
}

impl WorldEllipse {
    pub(crate) fn new(e: &Ellipse, scale: f64) -> Option<Self> {
        let w = Self {
            cx: e.center.0 * scale,
            cy: e.center.1 * scale,
            a: e.axes.0 * scale,
            b: e.axes.1 * scale,
            cos: e.angle_rad.cos(),
            sin: e.angle_rad.sin(),
            value: e.value,
        };
        let finite = [w.cx, w.cy, w.a, w.b, w.cos, w.sin, w.value]
            .iter()
            .all(|v| v.is_finite());
        (finite && w.a > 0.0 && w.b > 0.0).then_some(w)
    }

    /// Half-width of the ellipse's support along direction (cos θ, sin θ).
    #[inline]
    pub(crate) fn support_radius(&self, cos_t: f64, sin_t: f64) -> f64 {
        // cos(θ − φ) and sin(θ − φ).
        let c = cos_t * self.cos + sin_t * self.sin;
        let s = sin_t * self.cos - cos_t * self.sin;
        ((self.a * c).powi(2) + (self.b * s).powi(2)).sqrt()
    }

    /// The x interval of the ellipse on the horizontal line at height y.
    #[inline]
    fn x_interval(&self, y: f64) -> Option<(f64, f64)> {
        let dy = y - self.cy;
        let (ia2, ib2) = (1.0 / (self.a * self.a), 1.0 / (self.b * self.b));
        let alpha = self.cos * self.cos * ia2 + self.sin * self.sin * ib2;
        let beta = self.cos * self.sin * (ia2 - ib2);
        // α·dx² + 2β·dx·dy + γ·dy² ≤ 1 with αγ − β² = 1/(a²b²).
        let disc = alpha - dy * dy * ia2 * ib2;
        if disc < 0.0 {
            return None;
        }
        let root = disc.sqrt();
        let mid = -beta * dy;
        Some((
            self.cx + (mid - root) / alpha,
            self.cx + (mid + root) / alpha,
        ))
    }

    /// Adds the bin-averaged projection of this ellipse for one projection
    /// to `acc`; `edges` is scratch space.
    fn project_into(&self, ray: &RayFrame, edges: &mut Vec<f64>, acc: &mut [f64]) {
        let r = self.support_radius(ray.cos, ray.sin);
        let sc = self.cx * ray.cos + self.cy * ray.sin;
        let Some((k_lo, k_hi)) = ray.bin_range(sc - r, sc + r) else {
            return;
        };
        edges.clear();
        edges.extend((k_lo..=k_hi + 1).map(|e| disc_strip((ray.edge_s(e) - sc) / r)));
        let factor = 2.0 * self.a * self.b * self.value / ray.bin_width;
        for (k, w) in (k_lo..=k_hi).zip(edges.windows(2)) {
            acc[k] += factor * (w[1] - w[0]);
        }
    }
}

/// Accumulates `weight ×` the supersampled pixel averages of row `iy` of
/// `grid` into `acc` (`s × s` sub-samples per pixel).
pub(crate) fn rasterize_row(
    ellipses: &[WorldEllipse],
    grid: &SliceGrid,
    s: usize,
    iy: usize,
    weight: f64,
    acc: &mut [f64],
) {
    let ps = grid.pixel_size as f64;
    let sub = ps / s as f64;
    let y_top = (grid.ny as f64 * 0.5 - iy as f64) * ps;
    let x_left = -(grid.nx as f64) * 0.5 * ps;
    let n_sub = grid.nx * s;
    let w = weight / (s * s) as f64;
    for r in 0..s {
        let y = y_top - (r as f64 + 0.5) * sub;
        for e in ellipses {
            let Some((x_lo, x_hi)) = e.x_interval(y) else {
                continue;
            };
            // Sub-column j sits at x_left + (j + ½)·sub.
            let j_lo = ((x_lo - x_left) / sub - 0.5).ceil();
            let j_hi = ((x_hi - x_left) / sub - 0.5).floor();
            if j_hi < 0.0 || j_lo > (n_sub - 1) as f64 || j_lo > j_hi {
                continue;
            }
            let j_lo = j_lo.max(0.0) as usize;
            let j_hi = (j_hi as usize).min(n_sub - 1);
            let add = w * e.value;
            for j in j_lo..=j_hi {
                acc[j / s] += add;
            }
        }
    }
}
