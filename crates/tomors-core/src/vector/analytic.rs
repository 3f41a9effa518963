//! Exact analytic projections of ellipsoid phantoms for any vector
//! geometry, and the phantoms rasterised on a [`VolumeGeometry`]: the truth
//! that reconstructions on vector geometries are compared with.
//!
//! A [`Phantom3d`] is given in normalised coordinates and placed on the
//! world with `scale` world units per normalised unit (centred on the world
//! origin), as [`Phantom3d::rasterize`] and [`Phantom3d::project`] do.
//! Projections are line integrals (value × length, world units) along the
//! ray through the **centre** of each detector pixel (cone beam: from the
//! source through the pixel centre; parallel beam: through the pixel
//! centre along the ray direction), in f64: no detector-pixel averaging.

use ndarray::{Array2, Array3};
use rayon::prelude::*;

use super::geometry::VecGeometry;
use super::vec3::{add, apply, dot, norm, scale, sub, Mat3, Vec3};
use super::volume::VolumeGeometry;
use crate::phantom::{Ellipsoid, Phantom3d};

/// An ellipsoid in world units, as the map to the unit ball:
/// `q = M·(p − c)`, inside where `|q| ≤ 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldEllipsoid {
    /// Centre (world).
    pub center: Vec3,
    /// `diag(1/a, 1/b, 1/c)·R_z(−angle)`.
    pub to_unit: Mat3,
    /// Semi-axes (world).
    pub axes: Vec3,
    /// Rotation about z (radians).
    pub angle: f64,
    /// The value inside.
    pub value: f64,
}

impl WorldEllipsoid {
    /// `e` placed on the world with `scale` world units per normalised
    /// unit; `None` for a degenerate or non-finite ellipsoid or scale.
    pub fn new(e: &Ellipsoid, scale_: f64) -> Option<Self> {
        let axes = scale(e.axes, scale_);
        let center = scale(e.center, scale_);
        let (s, c) = e.angle_rad.sin_cos();
        let to_unit = [
            [c / axes[0], s / axes[0], 0.0],
            [-s / axes[1], c / axes[1], 0.0],
            [0.0, 0.0, 1.0 / axes[2]],
        ];
        let ok = axes.iter().all(|&a| a.is_finite() && a > 0.0)
            && center.iter().all(|v| v.is_finite())
            && e.value.is_finite()
            && e.angle_rad.is_finite();
        ok.then_some(Self {
            center,
            to_unit,
            axes,
            angle: e.angle_rad,
            value: e.value,
        })
    }

    /// Length of the chord of the line `o + t·d` (any `d ≠ 0`) through the
    /// ellipsoid: `2·|d|·√((1 − |q⊥|²)/|M d|²)` with `q⊥` the part of
    /// `M(o − c)` perpendicular to `M d` (0 when the line misses).
    pub fn chord(&self, o: Vec3, d: Vec3) -> f64 {
        let q0 = apply(&self.to_unit, sub(o, self.center));
        let q1 = apply(&self.to_unit, d);
        let a = dot(q1, q1);
        if a.is_nan() || a <= 0.0 {
            return 0.0;
        }
        let perp = sub(q0, scale(q1, dot(q0, q1) / a));
        let h = 1.0 - dot(perp, perp);
        if h <= 0.0 {
            return 0.0;
        }
        2.0 * norm(d) * (h / a).sqrt()
    }

    /// Whether world point `p` is inside or on the ellipsoid.
    pub fn contains(&self, p: Vec3) -> bool {
        let q = apply(&self.to_unit, sub(p, self.center));
        dot(q, q) <= 1.0
    }

    /// Half-widths of the axis-aligned box around the ellipsoid.
    pub fn half_extent(&self) -> Vec3 {
        let (s, c) = self.angle.sin_cos();
        let [a, b, cz] = self.axes;
        [
            ((a * c).powi(2) + (b * s).powi(2)).sqrt(),
            ((a * s).powi(2) + (b * c).powi(2)).sqrt(),
            cz,
        ]
    }
}

fn world(phantom: &Phantom3d, scale_: f64) -> Vec<WorldEllipsoid> {
    phantom
        .ellipsoids
        .iter()
        .filter_map(|e| WorldEllipsoid::new(e, scale_))
        .collect()
}

/// Line integral of `phantom` (placed with `scale`) along the line
/// `o + t·d`.
pub fn line_integral(phantom: &Phantom3d, scale_: f64, o: Vec3, d: Vec3) -> f64 {
    world(phantom, scale_)
        .iter()
        .map(|e| e.value * e.chord(o, d))
        .sum()
}

/// Exact projections `[projection][row][col]` (f64) of `phantom` placed
/// with `scale`, along the ray through each pixel centre of `geometry`.
/// Projections in parallel. A non-positive or non-finite scale gives zeros.
pub fn project(phantom: &Phantom3d, scale_: f64, geometry: &VecGeometry) -> Array3<f64> {
    let (na, nr, nc) = (
        geometry.n_projections(),
        geometry.n_rows(),
        geometry.n_cols(),
    );
    let mut out = Array3::<f64>::zeros((na, nr, nc));
    if !(scale_.is_finite() && scale_ > 0.0) {
        return out;
    }
    let ellipsoids = world(phantom, scale_);
    out.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(i, mut p)| {
            for r in 0..nr {
                for c in 0..nc {
                    let (o, d) = geometry.ray(i, r as f64, c as f64);
                    p[[r, c]] = ellipsoids.iter().map(|e| e.value * e.chord(o, d)).sum();
                }
            }
        });
    out
}

/// Voxel averages `[z][y][x]` of `phantom` (placed with `scale`) on
/// `volume`, estimated with `supersample³` points per voxel (zero counts
/// as one) on a regular sub-grid. Slices in parallel. A non-positive or
/// non-finite scale gives zeros.
pub fn rasterize(
    phantom: &Phantom3d,
    scale_: f64,
    volume: &VolumeGeometry,
    supersample: usize,
) -> Array3<f32> {
    let (nz, ny, nx) = volume.dim();
    let mut out = Array3::<f32>::zeros((nz, ny, nx));
    if !(scale_.is_finite() && scale_ > 0.0) {
        return out;
    }
    let s = supersample.max(1);
    let offsets: Vec<f64> = (0..s).map(|k| (k as f64 + 0.5) / s as f64 - 0.5).collect();
    let weight = 1.0 / (s * s * s) as f64;
    let ellipsoids = world(phantom, scale_);
    // Index-space boxes of the ellipsoids (inclusive voxel ranges).
    let boxes: Vec<[(usize, usize); 3]> = ellipsoids
        .iter()
        .map(|e| {
            let h = e.half_extent();
            let a = volume.to_index(sub(e.center, h));
            let b = volume.to_index(add(e.center, h));
            let n = [nx, ny, nz];
            let mut r = [(0, 0); 3];
            for k in 0..3 {
                let (lo, hi) = (a[k].min(b[k]), a[k].max(b[k]));
                let lo = (lo - 0.5).floor().max(0.0);
                let hi = (hi + 0.5).ceil().min(n[k] as f64 - 1.0);
                r[k] = if hi < lo {
                    (1, 0)
                } else {
                    (lo as usize, hi as usize)
                };
            }
            r
        })
        .collect();
    out.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(iz, mut slice)| {
            let mut acc = Array2::<f64>::zeros((ny, nx));
            for (e, b) in ellipsoids.iter().zip(&boxes) {
                if iz < b[2].0 || iz > b[2].1 || b[0].0 > b[0].1 || b[1].0 > b[1].1 {
                    continue;
                }
                for iy in b[1].0..=b[1].1 {
                    for ix in b[0].0..=b[0].1 {
                        let mut inside = 0usize;
                        for &oz in &offsets {
                            for &oy in &offsets {
                                for &ox in &offsets {
                                    let p = volume.to_world([
                                        ix as f64 + ox,
                                        iy as f64 + oy,
                                        iz as f64 + oz,
                                    ]);
                                    inside += e.contains(p) as usize;
                                }
                            }
                        }
                        acc[[iy, ix]] += e.value * inside as f64 * weight;
                    }
                }
            }
            slice.zip_mut_with(&acc, |o, &a| *o = a as f32);
        });
    out
}
