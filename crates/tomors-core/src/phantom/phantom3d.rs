//! 3D ellipsoid phantoms: rasterisation, cross-sections and exact
//! parallel-beam projections.

use ndarray::{Array2, Array3};
use rayon::prelude::*;

use super::analytic::ball_corner;
use super::phantom2d::{rasterize_row, store, Ellipse, Phantom2d, RayFrame, MODIFIED_INTENSITIES};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// One ellipsoid of a 3D phantom, in normalised phantom coordinates
/// (`[−1, 1]³`, x right, y up, z along the rotation axis).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ellipsoid {
    /// Centre (x, y, z).
    pub center: [f64; 3],
    /// Semi-axes along the ellipsoid's own x, y and z axes.
    pub axes: [f64; 3],
    /// Counter-clockwise rotation about the z axis (radians), x towards y.
    pub angle_rad: f64,
    /// The value added inside the ellipsoid (attenuation per world unit).
    pub value: f64,
}

impl Ellipsoid {
    /// Whether the normalised point (x, y, z) lies inside or on the ellipsoid.
    pub fn contains(&self, x: f64, y: f64, z: f64) -> bool {
        let (c, s) = (self.angle_rad.cos(), self.angle_rad.sin());
        let (dx, dy, dz) = (x - self.center[0], y - self.center[1], z - self.center[2]);
        let p = (dx * c + dy * s) / self.axes[0];
        let q = (-dx * s + dy * c) / self.axes[1];
        let r = dz / self.axes[2];
        p * p + q * q + r * r <= 1.0
    }

    /// The cut of the ellipsoid by the plane at normalised height `z`: an
    /// ellipse with the same centre (x, y) and angle and semi-axes scaled by
    /// `√(1 − ((z − z₀)/c)²)`, or `None` when the plane misses it (or only
    /// touches it).
    pub fn cross_section(&self, z: f64) -> Option<Ellipse> {
        let d = (z - self.center[2]) / self.axes[2];
        let t = 1.0 - d * d;
        if t.is_nan() || t <= 0.0 {
            return None;
        }
        let k = t.sqrt();
        Some(Ellipse {
            center: (self.center[0], self.center[1]),
            axes: (self.axes[0] * k, self.axes[1] * k),
            angle_rad: self.angle_rad,
            value: self.value,
        })
    }
}

/// A 3D phantom: a sum of constant-valued ellipsoids, each rotated about z
/// only (so every cut perpendicular to z is a 2D ellipse phantom).
///
/// Coordinates are normalised to `[−1, 1]³` and placed on the world with a
/// `scale` (world units per normalised unit) in all three directions; world
/// z is measured from the centre of the volume / detector.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Phantom3d {
    /// The ellipsoids; their values add up where they overlap.
    pub ellipsoids: Vec<Ellipsoid>,
}

/// (a, b, c, x0, y0, z0, angle in degrees) of the 3D Shepp–Logan
/// ellipsoids (the Kak–Slaney extension in the form used by ODL's
/// `shepp_logan` 3D phantom): the 2D ellipses at z = 0 with z semi-axes.
const SHEPP_LOGAN_3D: [(f64, f64, f64, f64, f64, f64, f64); 10] = [
    (0.6900, 0.9200, 0.810, 0.0, 0.0, 0.0, 0.0),
    (0.6624, 0.8740, 0.780, 0.0, -0.0184, 0.0, 0.0),
    (0.1100, 0.3100, 0.220, 0.22, 0.0, 0.0, -18.0),
    (0.1600, 0.4100, 0.280, -0.22, 0.0, 0.0, 18.0),
    (0.2100, 0.2500, 0.410, 0.0, 0.35, 0.0, 0.0),
    (0.0460, 0.0460, 0.050, 0.0, 0.1, 0.0, 0.0),
    (0.0460, 0.0460, 0.050, 0.0, -0.1, 0.0, 0.0),
    (0.0460, 0.0230, 0.050, -0.08, -0.605, 0.0, 0.0),
    (0.0230, 0.0230, 0.020, 0.0, -0.606, 0.0, 0.0),
    (0.0230, 0.0460, 0.020, 0.06, -0.605, 0.0, 0.0),
];

impl Phantom3d {
    /// A phantom made of the given ellipsoids.
    pub fn new(ellipsoids: Vec<Ellipsoid>) -> Self {
        Self { ellipsoids }
    }

    /// The modified 3D Shepp–Logan phantom: the ellipsoids of ODL's / TomoPy's
    /// 3D `shepp_logan` with Toft's contrasts (1, −0.8, −0.2, −0.2, 0.1 …).
    /// Its central cut (z = 0) is the 2D modified Shepp–Logan phantom.
    pub fn shepp_logan() -> Self {
        let ellipsoids = SHEPP_LOGAN_3D
            .iter()
            .zip(MODIFIED_INTENSITIES)
            .map(|(&(a, b, c, x0, y0, z0, deg), value)| Ellipsoid {
                center: [x0, y0, z0],
                axes: [a, b, c],
                angle_rad: deg.to_radians(),
                value,
            })
            .collect();
        Self { ellipsoids }
    }

    /// The phantom's value at a normalised point.
    pub fn value_at(&self, x: f64, y: f64, z: f64) -> f64 {
        self.ellipsoids
            .iter()
            .filter(|e| e.contains(x, y, z))
            .map(|e| e.value)
            .sum()
    }

    /// The exact 2D phantom cut at normalised height `z` (ellipsoids the
    /// plane misses are left out).
    pub fn cross_section(&self, z: f64) -> Phantom2d {
        Phantom2d::new(
            self.ellipsoids
                .iter()
                .filter_map(|e| e.cross_section(z))
                .collect(),
        )
    }

    /// Voxel averages (`[z][y][x]`) on `nz` slices of `grid`, estimated with
    /// `supersample³` points per voxel (`supersample = 0` counts as 1).
    ///
    /// Slice `k` is centred at world `z = (k − (nz − 1)/2) · pixel_size`
    /// (cubic voxels), normalised `z / scale`. With `supersample = 1` a slice
    /// is exactly the 2D rasterisation of [`Self::cross_section`] at its
    /// centre. A non-positive or non-finite scale gives zeros.
    pub fn rasterize(
        &self,
        grid: &SliceGrid,
        nz: usize,
        scale: f64,
        supersample: usize,
    ) -> Array3<f32> {
        let mut out = Array3::<f32>::zeros((nz, grid.ny, grid.nx));
        if !(scale.is_finite() && scale > 0.0) {
            return out;
        }
        let s = supersample.max(1);
        let ps = grid.pixel_size as f64;
        out.outer_iter_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(k, mut slice)| {
                let zc = (k as f64 - (nz as f64 - 1.0) * 0.5) * ps;
                let mut acc = Array2::<f64>::zeros((grid.ny, grid.nx));
                for r in 0..s {
                    let z = zc + ps * ((r as f64 + 0.5) / s as f64 - 0.5);
                    let world = self.cross_section(z / scale).world_ellipses(scale);
                    if world.is_empty() {
                        continue;
                    }
                    for (iy, mut row) in acc.outer_iter_mut().enumerate() {
                        if let Some(row) = row.as_slice_mut() {
                            rasterize_row(&world, grid, s, iy, 1.0 / s as f64, row);
                        }
                    }
                }
                for (mut o, a) in slice.outer_iter_mut().zip(acc.outer_iter()) {
                    if let Some(a) = a.as_slice() {
                        store(a, &mut o);
                    }
                }
            });
        out
    }

    /// Exact parallel-beam projections (`[angle][row][col]`) of the phantom
    /// placed with `scale`, on a detector of `n_rows` rows of height
    /// `row_height` (world units) and the bins of `geometry`.
    ///
    /// Rays are perpendicular to z: the ray of projection θ at height z runs
    /// along `(−sin θ, cos θ, 0)`. Row `j` covers world z in
    /// `(j − (n_rows − 1)/2) · row_height ± row_height/2`, bin `k` covers bin
    /// coordinate `[k − ½, k + ½]` (with the projection's axis position).
    /// Each value is the line integral (value × length) averaged over the
    /// detector pixel, computed **exactly in both directions**, in f64: the
    /// line integrals of an ellipsoid rotated about z form, over the detector
    /// plane, the half-ellipsoid `2ab/R·√(1 − (s/R)² − (z/c)²)` (s, z from the centre)
    /// (R the support half-width at θ, as in 2D), whose integral over a
    /// rectangle has the closed form documented on the private
    /// `ball_corner` helper (four corner evaluations of a sum of `atan2`s).
    /// This replaces a Gauss–Legendre rule across the row height: it has no
    /// quadrature error, even on rows that cut the top or bottom of an
    /// ellipsoid, and is cheaper (one evaluation per pixel corner).
    ///
    /// A non-positive or non-finite `scale` or `row_height` gives zeros.
    /// Angles run in parallel (rayon).
    pub fn project(
        &self,
        geometry: &ParallelGeometry,
        n_rows: usize,
        row_height: f64,
        scale: f64,
    ) -> Array3<f32> {
        let n = geometry.n_bins();
        let mut out = Array3::<f32>::zeros((geometry.n_angles(), n_rows, n));
        if !(scale.is_finite() && scale > 0.0 && row_height.is_finite() && row_height > 0.0) {
            return out;
        }
        let world: Vec<WorldEllipsoid> = self
            .ellipsoids
            .iter()
            .filter_map(|e| WorldEllipsoid::new(e, scale))
            .collect();
        let rows = RowFrame {
            n_rows,
            height: row_height,
        };
        out.outer_iter_mut()
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut proj)| {
                let ray = RayFrame::new(geometry, i);
                let mut acc = Array2::<f64>::zeros((n_rows, n));
                let mut scratch = Scratch::default();
                for e in &world {
                    e.project_into(&ray, &rows, &mut scratch, &mut acc);
                }
                proj.zip_mut_with(&acc, |o, &a| *o = a as f32);
            });
        out
    }
}

/// The detector rows of a 3D projection.
struct RowFrame {
    n_rows: usize,
    height: f64,
}

impl RowFrame {
    /// World z of the lower edge of row `j` (row edge `j`).
    #[inline]
    fn edge_z(&self, j: usize) -> f64 {
        (j as f64 - 0.5 - (self.n_rows as f64 - 1.0) * 0.5) * self.height
    }

    /// The rows touched by `[z_lo, z_hi]`, or `None`.
    fn row_range(&self, z_lo: f64, z_hi: f64) -> Option<(usize, usize)> {
        if self.n_rows == 0 {
            return None;
        }
        let mid = (self.n_rows as f64 - 1.0) * 0.5;
        let (w_lo, w_hi) = (z_lo / self.height + mid, z_hi / self.height + mid);
        let last = self.n_rows as f64 - 1.0;
        if !(w_hi >= -0.5 && w_lo <= last + 0.5) {
            return None;
        }
        Some((
            (w_lo + 0.5).floor().clamp(0.0, last) as usize,
            (w_hi + 0.5).floor().clamp(0.0, last) as usize,
        ))
    }
}

#[derive(Default)]
struct Scratch {
    sigma: Vec<f64>,
    zeta: Vec<f64>,
    corners: Vec<f64>,
}

/// An ellipsoid in world units.
struct WorldEllipsoid {
    cx: f64,
    cy: f64,
    cz: f64,
    a: f64,
    b: f64,
    c: f64,
    cos: f64,
    sin: f64,
    value: f64,
}

impl WorldEllipsoid {
    fn new(e: &Ellipsoid, scale: f64) -> Option<Self> {
        let w = Self {
            cx: e.center[0] * scale,
            cy: e.center[1] * scale,
            cz: e.center[2] * scale,
            a: e.axes[0] * scale,
            b: e.axes[1] * scale,
            c: e.axes[2] * scale,
            cos: e.angle_rad.cos(),
            sin: e.angle_rad.sin(),
            value: e.value,
        };
        let finite = [w.cx, w.cy, w.cz, w.a, w.b, w.c, w.cos, w.sin, w.value]
            .iter()
            .all(|v| v.is_finite());
        (finite && w.a > 0.0 && w.b > 0.0 && w.c > 0.0).then_some(w)
    }

    /// Adds the pixel-averaged projection of this ellipsoid for one angle.
    fn project_into(
        &self,
        ray: &RayFrame,
        rows: &RowFrame,
        sc: &mut Scratch,
        acc: &mut Array2<f64>,
    ) {
        let cp = ray.cos * self.cos + ray.sin * self.sin;
        let sp = ray.sin * self.cos - ray.cos * self.sin;
        let r = ((self.a * cp).powi(2) + (self.b * sp).powi(2)).sqrt();
        let s_c = self.cx * ray.cos + self.cy * ray.sin;
        let Some((k_lo, k_hi)) = ray.bin_range(s_c - r, s_c + r) else {
            return;
        };
        let Some((j_lo, j_hi)) = rows.row_range(self.cz - self.c, self.cz + self.c) else {
            return;
        };
        sc.sigma.clear();
        sc.sigma
            .extend((k_lo..=k_hi + 1).map(|e| (ray.edge_s(e) - s_c) / r));
        sc.zeta.clear();
        sc.zeta
            .extend((j_lo..=j_hi + 1).map(|e| (rows.edge_z(e) - self.cz) / self.c));
        let ns = sc.sigma.len();
        sc.corners.clear();
        for &z in &sc.zeta {
            sc.corners
                .extend(sc.sigma.iter().map(|&s| ball_corner(s, z)));
        }
        // ∫∫ p ds dz over a pixel = 2·value·a·b·c·(corner differences).
        let factor = 2.0 * self.value * self.a * self.b * self.c / (ray.bin_width * rows.height);
        for (jj, j) in (j_lo..=j_hi).enumerate() {
            let lower = &sc.corners[jj * ns..(jj + 1) * ns];
            let upper = &sc.corners[(jj + 1) * ns..(jj + 2) * ns];
            let mut row = acc.row_mut(j);
            for (kk, k) in (k_lo..=k_hi).enumerate() {
                let v = upper[kk + 1] - upper[kk] - lower[kk + 1] + lower[kk];
                row[k] += factor * v;
            }
        }
    }
}
