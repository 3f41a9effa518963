//! Exact cone-beam projections of ellipsoid phantoms.

use ndarray::{Array2, Array3};
use rayon::prelude::*;

use super::geometry::ConeGeometry;
use crate::error::{CoreError, Result};
use crate::phantom::{Ellipsoid, Phantom3d};

/// Default sub-pixel grid of [`project_cone`]: 3 × 3 rays per pixel.
pub const DEFAULT_SUBPIXELS: usize = 3;

/// One ellipsoid in world units, as a map of world points onto the unit
/// ball: `p ↦ N·Rᵀ·(p − c)` (R the rotation about z, N = diag(1/a, 1/b, 1/c)).
struct UnitBallMap {
    center: [f64; 3],
    cos: f64,
    sin: f64,
    inv_axes: [f64; 3],
    half_extent: [f64; 3],
    value: f64,
}

impl UnitBallMap {
    fn new(e: &Ellipsoid, scale: f64) -> Option<Self> {
        let axes = [e.axes[0] * scale, e.axes[1] * scale, e.axes[2] * scale];
        let center = [
            e.center[0] * scale,
            e.center[1] * scale,
            e.center[2] * scale,
        ];
        let (cos, sin) = (e.angle_rad.cos(), e.angle_rad.sin());
        let ok = axes.iter().chain(&center).all(|v| v.is_finite())
            && axes.iter().all(|&a| a > 0.0)
            && e.value.is_finite()
            && cos.is_finite();
        if !ok {
            return None;
        }
        let hx = ((axes[0] * cos).powi(2) + (axes[1] * sin).powi(2)).sqrt();
        let hy = ((axes[0] * sin).powi(2) + (axes[1] * cos).powi(2)).sqrt();
        Some(Self {
            center,
            cos,
            sin,
            inv_axes: [1.0 / axes[0], 1.0 / axes[1], 1.0 / axes[2]],
            half_extent: [hx, hy, axes[2]],
            value: e.value,
        })
    }

    /// The linear part `N·Rᵀ·d` of the map (for directions).
    #[inline]
    fn dir(&self, d: [f64; 3]) -> [f64; 3] {
        [
            (d[0] * self.cos + d[1] * self.sin) * self.inv_axes[0],
            (-d[0] * self.sin + d[1] * self.cos) * self.inv_axes[1],
            d[2] * self.inv_axes[2],
        ]
    }

    /// The map of a point.
    #[inline]
    fn point(&self, p: [f64; 3]) -> [f64; 3] {
        self.dir([
            p[0] - self.center[0],
            p[1] - self.center[1],
            p[2] - self.center[2],
        ])
    }
}

#[inline]
fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[inline]
fn add_scaled(a: [f64; 3], b: [f64; 3], t: f64) -> [f64; 3] {
    [a[0] + t * b[0], a[1] + t * b[1], a[2] + t * b[2]]
}

/// Exact cone-beam projections (`[angle][row][col]`) of `phantom` placed
/// with `scale` (world units per normalised unit, as
/// [`Phantom3d::project`]).
///
/// Each ray runs from the source to a point of the detector pixel; its line
/// integral is computed exactly (for every ellipsoid, the chord length of
/// the ray through it — a quadratic in the unit-ball frame — times its
/// value, in f64). Each pixel value is the mean over a `subpixels ×
/// subpixels` grid of rays through the points
/// `(j + (a + ½)/n − ½, k + (b + ½)/n − ½)`, `a, b < n`, of pixel `(j, k)`
/// (the midpoint rule; [`DEFAULT_SUBPIXELS`] = 3). Only the pixels inside
/// the shadow of each ellipsoid's bounding box are visited. Angles run in
/// parallel (rayon).
///
/// Errors ([`CoreError::Parameter`]): `subpixels` not in 1..=16, a
/// non-positive or non-finite scale; ([`CoreError::Geometry`]) the source
/// inside or level with an ellipsoid's bounding box at some angle (its
/// shadow would be unbounded).
pub fn project_cone(
    phantom: &Phantom3d,
    geometry: &ConeGeometry,
    scale: f64,
    subpixels: usize,
) -> Result<Array3<f32>> {
    if !(1..=16).contains(&subpixels) {
        return Err(CoreError::Parameter(format!(
            "{subpixels} sub-pixels per side: use 1 to 16"
        )));
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(CoreError::Parameter(format!(
            "phantom scale {scale} must be positive"
        )));
    }
    let maps: Vec<UnitBallMap> = phantom
        .ellipsoids
        .iter()
        .filter_map(|e| UnitBallMap::new(e, scale))
        .collect();
    for m in &maps {
        let r = (m.center[0].abs() + m.half_extent[0]).hypot(m.center[1].abs() + m.half_extent[1]);
        if r >= geometry.sod() {
            return Err(CoreError::Geometry(format!(
                "the source orbit (radius {}) passes through the phantom (an ellipsoid \
                 reaches radius {r:.3}); place it with a smaller scale",
                geometry.sod()
            )));
        }
    }
    let (nr, nc) = (geometry.n_rows(), geometry.n_cols());
    let mut out = Array3::<f32>::zeros((geometry.n_angles(), nr, nc));
    let n = subpixels;
    let offsets: Vec<f64> = (0..n).map(|a| (a as f64 + 0.5) / n as f64 - 0.5).collect();
    let inv = 1.0 / (n * n) as f64;
    out.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(i, mut proj)| {
            let src = geometry.source(i);
            // Detector point of pixel coordinate (0, 0) and its steps.
            let p00 = geometry.detector_point(i, 0.0, 0.0);
            let p10 = geometry.detector_point(i, 1.0, 0.0);
            let p01 = geometry.detector_point(i, 0.0, 1.0);
            let dcol = [p10[0] - p00[0], p10[1] - p00[1], p10[2] - p00[2]];
            let drow = [p01[0] - p00[0], p01[1] - p00[1], p01[2] - p00[2]];
            let d00 = [p00[0] - src[0], p00[1] - src[1], p00[2] - src[2]];
            let mut acc = Array2::<f64>::zeros((nr, nc));
            for m in &maps {
                let Some((c_lo, c_hi, r_lo, r_hi)) = shadow(geometry, i, m) else {
                    continue;
                };
                let o = m.point(src);
                let oo = dot(o, o) - 1.0;
                let (e00, ec, er) = (m.dir(d00), m.dir(dcol), m.dir(drow));
                for r in r_lo..=r_hi {
                    for c in c_lo..=c_hi {
                        let mut sum = 0.0;
                        for &fr in &offsets {
                            let rr = r as f64 + fr;
                            for &fc in &offsets {
                                let cc = c as f64 + fc;
                                // World direction (unnormalised) and its image.
                                let dw = add_scaled(add_scaled(d00, dcol, cc), drow, rr);
                                let d = add_scaled(add_scaled(e00, ec, cc), er, rr);
                                let a = dot(d, d);
                                let b = dot(o, d);
                                let disc = b * b - a * oo;
                                if disc > 0.0 {
                                    // Chord in the ray parameter, times |dw|.
                                    sum += 2.0 * disc.sqrt() / a * dot(dw, dw).sqrt();
                                }
                            }
                        }
                        acc[[r, c]] += m.value * sum * inv;
                    }
                }
            }
            proj.zip_mut_with(&acc, |o, &a| *o = a as f32);
        });
    Ok(out)
}

/// The detector pixels (column and row ranges, inclusive) inside the
/// shadow of an ellipsoid's bounding box at projection `i`, or `None` when
/// it misses the detector.
fn shadow(
    geometry: &ConeGeometry,
    i: usize,
    m: &UnitBallMap,
) -> Option<(usize, usize, usize, usize)> {
    let (mut c_lo, mut c_hi, mut r_lo, mut r_hi) = (
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
    );
    for corner in 0..8 {
        let sx = if corner & 1 == 0 { -1.0 } else { 1.0 };
        let sy = if corner & 2 == 0 { -1.0 } else { 1.0 };
        let sz = if corner & 4 == 0 { -1.0 } else { 1.0 };
        let p = geometry.project_point(
            i,
            m.center[0] + sx * m.half_extent[0],
            m.center[1] + sy * m.half_extent[1],
            m.center[2] + sz * m.half_extent[2],
        )?;
        c_lo = c_lo.min(p.col);
        c_hi = c_hi.max(p.col);
        r_lo = r_lo.min(p.row);
        r_hi = r_hi.max(p.row);
    }
    let range = |lo: f64, hi: f64, n: usize| -> Option<(usize, usize)> {
        let last = n as f64 - 1.0;
        let (a, b) = ((lo - 1.0).floor(), (hi + 1.0).ceil());
        if b < 0.0 || a > last {
            return None;
        }
        Some((a.max(0.0) as usize, b.min(last) as usize))
    };
    let (c0, c1) = range(c_lo, c_hi, geometry.n_cols())?;
    let (r0, r1) = range(r_lo, r_hi, geometry.n_rows())?;
    Some((c0, c1, r0, r1))
}
