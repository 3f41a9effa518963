//! Circular cone-beam geometry and reconstruction volumes.
//!
//! Conventions (the parallel-beam ones of [`crate::geometry`], extended; the
//! same as ASTRA's `cone` geometry, see `docs/cone.md`):
//! - world x right, y up, z along the rotation axis; volume `[z][y][x]`,
//!   image row 0 at the top (largest y), slice `k` at
//!   `z = (k − (nz − 1)/2)·voxel`;
//! - at angle θ the detector's column axis `u` points along
//!   `(cos θ, sin θ, 0)` and its row axis `v` along `(0, 0, 1)` (row index
//!   grows with z); the central ray runs along `(−sin θ, cos θ, 0)`;
//! - the source sits at `SOD·(sin θ, −cos θ, 0)`, the detector plane at
//!   distance `ODD` beyond the rotation axis;
//! - the principal point (where the central ray meets the detector) has
//!   detector pixel coordinates `(center_col, center_row)`, default
//!   `((n_cols − 1)/2, (n_rows − 1)/2)`; pixel `(j, k)` is centred at
//!   pixel coordinate `(j, k)`.
//!
//! A point (x, y, z) therefore lands, at angle θ, on column
//! `center_col + s·M/pixel_u` and row `center_row + z·M/pixel_v` with
//! `s = x cos θ + y sin θ`, `t = −x sin θ + y cos θ` and magnification
//! `M = (SOD + ODD)/(SOD + t)`. For `SOD → ∞` this is the parallel-beam rule
//! `u = center + s/bin_width` with rays along `(−sin θ, cos θ)`.

use crate::error::{CoreError, Result};
use crate::geometry::SliceGrid;

/// Relative slack of the "detector covers the volume" check.
const COVER_TOL: f64 = 1e-6;

/// Circular-orbit cone-beam geometry with a flat detector.
#[derive(Clone, Debug, PartialEq)]
pub struct ConeGeometry {
    angles: Vec<f32>,
    sod: f64,
    odd: f64,
    n_rows: usize,
    n_cols: usize,
    pixel_u: f64,
    pixel_v: f64,
    center_col: f64,
    center_row: f64,
}

/// Per-projection constants of the cone-beam geometry, in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConeProjection {
    /// cos θ.
    pub cos: f64,
    /// sin θ.
    pub sin: f64,
}

/// Where a world point lands on the detector of one projection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorPoint {
    /// Column coordinate (pixel-index units; pixel `j` centred at `j`).
    pub col: f64,
    /// Row coordinate (pixel-index units).
    pub row: f64,
    /// Distance from the source to the point along the central ray
    /// (`SOD + t`), the `U` of the FDK weight `SOD²/U²`.
    pub depth: f64,
}

impl ConeGeometry {
    /// A circular cone-beam geometry: projection `angles` (radians), source
    /// to rotation axis distance `sod`, rotation axis to detector distance
    /// `odd` (world units), a detector of `n_rows × n_cols` pixels of
    /// `pixel_u` (column width) × `pixel_v` (row height) world units, the
    /// principal point at the detector centre.
    ///
    /// Errors ([`CoreError::Geometry`]): fewer than 2 angles, non-finite
    /// angles, an empty detector, non-positive or non-finite distances or
    /// pixel sizes.
    pub fn new(
        angles: Vec<f32>,
        sod: f64,
        odd: f64,
        n_rows: usize,
        n_cols: usize,
        pixel_u: f64,
        pixel_v: f64,
    ) -> Result<Self> {
        if angles.len() < 2 {
            return Err(CoreError::Geometry(format!(
                "at least 2 projection angles are needed, got {}",
                angles.len()
            )));
        }
        if let Some(a) = angles.iter().find(|a| !a.is_finite()) {
            return Err(CoreError::Geometry(format!("angle {a} is not finite")));
        }
        if n_rows == 0 || n_cols == 0 {
            return Err(CoreError::Geometry(format!(
                "empty detector {n_rows}×{n_cols}"
            )));
        }
        for (name, v) in [
            ("source-origin distance (SOD)", sod),
            ("origin-detector distance (ODD)", odd),
            ("detector pixel width", pixel_u),
            ("detector pixel height", pixel_v),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(CoreError::Geometry(format!("{name} {v} must be positive")));
            }
        }
        Ok(Self {
            angles,
            sod,
            odd,
            n_rows,
            n_cols,
            pixel_u,
            pixel_v,
            center_col: (n_cols as f64 - 1.0) * 0.5,
            center_row: (n_rows as f64 - 1.0) * 0.5,
        })
    }

    /// Moves the principal point (where the central ray meets the detector)
    /// to pixel coordinates `(center_col, center_row)`; it must lie on the
    /// detector (`−0.5 ..= n − 0.5`).
    pub fn with_principal_point(mut self, center_col: f64, center_row: f64) -> Result<Self> {
        for (name, c, n) in [
            ("column", center_col, self.n_cols),
            ("row", center_row, self.n_rows),
        ] {
            let hi = n as f64 - 0.5;
            if !(c.is_finite() && (-0.5..=hi).contains(&c)) {
                return Err(CoreError::Geometry(format!(
                    "principal point {name} {c} lies outside the detector (-0.5..={hi})"
                )));
            }
        }
        self.center_col = center_col;
        self.center_row = center_row;
        Ok(self)
    }

    /// The geometry of detector rows `rows` only: a detector of
    /// `rows.len()` rows whose row 0 is row `rows.start` of this one, with
    /// the same rays (the principal point keeps its place in space, so it
    /// may lie off the smaller detector). For work split into z-slabs that
    /// each need a band of rows (distributed FDK).
    ///
    /// Errors ([`CoreError::Geometry`]): an empty range or one beyond the
    /// detector.
    pub fn detector_rows(&self, rows: std::ops::Range<usize>) -> Result<Self> {
        if rows.is_empty() || rows.end > self.n_rows {
            return Err(CoreError::Geometry(format!(
                "detector rows {rows:?} are empty or outside the detector's {} rows",
                self.n_rows
            )));
        }
        let mut g = self.clone();
        g.n_rows = rows.len();
        g.center_row = self.center_row - rows.start as f64;
        Ok(g)
    }

    /// Projection angles in radians.
    pub fn angles(&self) -> &[f32] {
        &self.angles
    }
    /// Number of projections.
    pub fn n_angles(&self) -> usize {
        self.angles.len()
    }
    /// Source to rotation axis distance.
    pub fn sod(&self) -> f64 {
        self.sod
    }
    /// Rotation axis to detector distance.
    pub fn odd(&self) -> f64 {
        self.odd
    }
    /// Source to detector distance, `SOD + ODD`.
    pub fn sdd(&self) -> f64 {
        self.sod + self.odd
    }
    /// Magnification of the rotation axis onto the detector, `SDD/SOD`.
    pub fn magnification(&self) -> f64 {
        self.sdd() / self.sod
    }
    /// Detector rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }
    /// Detector columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }
    /// Detector pixel width (column pitch), world units.
    pub fn pixel_u(&self) -> f64 {
        self.pixel_u
    }
    /// Detector pixel height (row pitch), world units.
    pub fn pixel_v(&self) -> f64 {
        self.pixel_v
    }
    /// Principal point column (pixel-index units).
    pub fn center_col(&self) -> f64 {
        self.center_col
    }
    /// Principal point row (pixel-index units).
    pub fn center_row(&self) -> f64 {
        self.center_row
    }

    /// Column pitch scaled to the rotation axis, `pixel_u / magnification`:
    /// the bin width of the FDK ramp filter.
    pub fn pixel_u_at_axis(&self) -> f64 {
        self.pixel_u / self.magnification()
    }

    /// cos θ and sin θ of every projection, in f64.
    pub fn projections(&self) -> Vec<ConeProjection> {
        self.angles
            .iter()
            .map(|&a| {
                let a = a as f64;
                ConeProjection {
                    cos: a.cos(),
                    sin: a.sin(),
                }
            })
            .collect()
    }

    /// Source position at projection `i`: `SOD·(sin θ, −cos θ, 0)`.
    pub fn source(&self, i: usize) -> [f64; 3] {
        let a = self.angles[i] as f64;
        [self.sod * a.sin(), -self.sod * a.cos(), 0.0]
    }

    /// World position of detector pixel coordinate `(col, row)` at
    /// projection `i`.
    pub fn detector_point(&self, i: usize, col: f64, row: f64) -> [f64; 3] {
        let a = self.angles[i] as f64;
        let (c, s) = (a.cos(), a.sin());
        let u = (col - self.center_col) * self.pixel_u;
        let v = (row - self.center_row) * self.pixel_v;
        [-self.odd * s + u * c, self.odd * c + u * s, v]
    }

    /// Where world point (x, y, z) lands on the detector at projection `i`
    /// (`None` when the point is not in front of the source).
    pub fn project_point(&self, i: usize, x: f64, y: f64, z: f64) -> Option<DetectorPoint> {
        let a = self.angles[i] as f64;
        let (c, s) = (a.cos(), a.sin());
        let sx = x * c + y * s;
        let t = -x * s + y * c;
        let depth = self.sod + t;
        if depth.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let m = self.sdd() / depth;
        Some(DetectorPoint {
            col: self.center_col + sx * m / self.pixel_u,
            row: self.center_row + z * m / self.pixel_v,
            depth,
        })
    }

    /// Fan angle γ (radians) of detector column coordinate `col`:
    /// `atan(u / SDD)`, positive towards larger columns.
    pub fn fan_angle(&self, col: f64) -> f64 {
        ((col - self.center_col) * self.pixel_u / self.sdd()).atan()
    }

    /// Half the fan angle covered by the detector: the largest `|γ|` of the
    /// outer edges of the first and last columns.
    pub fn half_fan_angle(&self) -> f64 {
        self.fan_angle(-0.5)
            .abs()
            .max(self.fan_angle(self.n_cols as f64 - 0.5).abs())
    }

    /// Full cone angle (radians) subtended at the source by the detector's
    /// rows, from the outer edge of the first row to that of the last
    /// (through the principal point's column).
    pub fn cone_angle(&self) -> f64 {
        let lo = (-0.5 - self.center_row) * self.pixel_v;
        let hi = (self.n_rows as f64 - 0.5 - self.center_row) * self.pixel_v;
        (hi / self.sdd()).atan() - (lo / self.sdd()).atan()
    }

    /// Angular range a short scan needs: π plus the full fan angle.
    pub fn short_scan_range(&self) -> f64 {
        std::f64::consts::PI + 2.0 * self.half_fan_angle()
    }

    /// Smallest and largest angle, and the mean angular step
    /// `(max − min)/(N − 1)`.
    pub fn angle_span(&self) -> (f64, f64, f64) {
        let (lo, hi) = self
            .angles
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &a| {
                (l.min(a as f64), h.max(a as f64))
            });
        (lo, hi, (hi - lo) / (self.angles.len() - 1) as f64)
    }

    /// The largest volume of `nx × ny × nz` cubic voxels (centred on the
    /// rotation axis) that [`Self::check_volume`] accepts: its inscribed
    /// cylinder's shadow just fits on the detector.
    pub fn fitting_volume(&self, nx: usize, ny: usize, nz: usize) -> Result<ConeVolume> {
        let d = self.sdd();
        // Half widths available on each side of the principal point.
        let w =
            (self.center_col + 0.5).min(self.n_cols as f64 - 0.5 - self.center_col) * self.pixel_u;
        let h =
            (self.center_row + 0.5).min(self.n_rows as f64 - 0.5 - self.center_row) * self.pixel_v;
        // Inscribed cylinder radius r = n_xy·vs/2 with D·r/√(SOD² − r²) ≤ w,
        // i.e. r ≤ SOD·w/√(D² + w²); half height hz = nz·vs/2 with
        // D·hz/(SOD − r) ≤ h, i.e. vs ≤ 2·h·SOD/(nz·D + h·n_xy).
        let nxy = nx.min(ny).max(1) as f64;
        let r_max = self.sod * w / (d * d + w * w).sqrt();
        let by_width = 2.0 * r_max / nxy;
        let by_height = 2.0 * h * self.sod / (nz.max(1) as f64 * d + h * nxy);
        let voxel = by_width.min(by_height) * (1.0 - 1e-9);
        ConeVolume::new(nx, ny, nz, voxel as f32)
    }

    /// Checks that `volume` can be reconstructed from this geometry.
    ///
    /// Errors ([`CoreError::Geometry`]):
    /// - the source orbit passes through the volume: `SOD` must exceed the
    ///   radius of the cylinder circumscribing the volume's x–y box (so the
    ///   source is never inside the volume and every voxel lies in front of
    ///   it at every angle);
    /// - the detector is too small for the volume's cone: the shadow of the
    ///   volume's inscribed cylinder (radius `min(nx, ny)·voxel/2`, height
    ///   `nz·voxel`, the region every projection sees whole) must lie on the
    ///   detector, up to the outer pixel edges. Voxels outside that
    ///   cylinder (the corners of the box) are reconstructed from the rays
    ///   that reach them, with zeros outside the detector.
    pub fn check_volume(&self, volume: &ConeVolume) -> Result<()> {
        let vs = volume.voxel_size as f64;
        let hx = volume.nx as f64 * vs * 0.5;
        let hy = volume.ny as f64 * vs * 0.5;
        let outer = (hx * hx + hy * hy).sqrt();
        if self.sod <= outer {
            return Err(CoreError::Geometry(format!(
                "the source is inside the volume: the source-origin distance {} does not \
                 exceed the volume's circumscribed radius {outer:.4} ({}×{} voxels of {})",
                self.sod, volume.nx, volume.ny, volume.voxel_size
            )));
        }
        let d = self.sdd();
        let r = hx.min(hy);
        let hz = volume.nz as f64 * vs * 0.5;
        let u_half = d * r / (self.sod * self.sod - r * r).sqrt() / self.pixel_u;
        let v_half = d * hz / (self.sod - r) / self.pixel_v;
        let checks = [
            ("columns", self.center_col, u_half, self.n_cols),
            ("rows", self.center_row, v_half, self.n_rows),
        ];
        for (what, c, half, n) in checks {
            let lo = c - half;
            let hi = c + half;
            let tol = COVER_TOL * n as f64;
            if lo < -0.5 - tol || hi > n as f64 - 0.5 + tol {
                return Err(CoreError::Geometry(format!(
                    "the detector is too small for the volume's cone: the volume \
                     ({}×{}×{} voxels of {}) casts a shadow over {what} {lo:.2}..{hi:.2}, \
                     the detector has {what} -0.5..{:.1}",
                    volume.nx,
                    volume.ny,
                    volume.nz,
                    volume.voxel_size,
                    n as f64 - 0.5
                )));
            }
        }
        Ok(())
    }
}

/// `n` angles evenly spaced over `[0, range]`, both ends included (the
/// layout of a short scan: its first and last projections get Parker
/// weight 0).
pub fn uniform_angles_inclusive(n: usize, range: f64) -> Vec<f32> {
    let div = n.saturating_sub(1).max(1) as f64;
    (0..n).map(|i| (i as f64 * range / div) as f32).collect()
}

/// A reconstruction volume of `nx × ny × nz` cubic voxels centred on the
/// rotation axis (`[z][y][x]`, row 0 at the top, slice `k` at
/// `z = (k − (nz − 1)/2)·voxel_size`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConeVolume {
    /// Voxels along x (columns).
    pub nx: usize,
    /// Voxels along y (rows).
    pub ny: usize,
    /// Voxels along z (slices).
    pub nz: usize,
    /// Voxel side, world units.
    pub voxel_size: f32,
}

impl ConeVolume {
    /// A volume of `nx × ny × nz` voxels of side `voxel_size`.
    pub fn new(nx: usize, ny: usize, nz: usize, voxel_size: f32) -> Result<Self> {
        if nx == 0 || ny == 0 || nz == 0 {
            return Err(CoreError::Geometry(format!("empty volume {nx}×{ny}×{nz}")));
        }
        if !(voxel_size.is_finite() && voxel_size > 0.0) {
            return Err(CoreError::Geometry(format!(
                "voxel size {voxel_size} must be positive"
            )));
        }
        Ok(Self {
            nx,
            ny,
            nz,
            voxel_size,
        })
    }

    /// The x–y grid of one slice.
    pub fn slice_grid(&self) -> SliceGrid {
        SliceGrid {
            nx: self.nx,
            ny: self.ny,
            pixel_size: self.voxel_size,
        }
    }

    /// World x of the centre of column `ix`.
    pub fn x(&self, ix: usize) -> f64 {
        (ix as f64 - (self.nx as f64 - 1.0) * 0.5) * self.voxel_size as f64
    }

    /// World y of the centre of row `iy` (row 0 at the top).
    pub fn y(&self, iy: usize) -> f64 {
        ((self.ny as f64 - 1.0) * 0.5 - iy as f64) * self.voxel_size as f64
    }

    /// World z of the centre of slice `iz`.
    pub fn z(&self, iz: usize) -> f64 {
        (iz as f64 - (self.nz as f64 - 1.0) * 0.5) * self.voxel_size as f64
    }

    /// Number of voxels.
    pub fn len(&self) -> usize {
        self.nx * self.ny * self.nz
    }

    /// Whether the volume has no voxel (never for a constructed one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
