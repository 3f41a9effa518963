//! Per-projection (vector) geometries with ASTRA's conventions.
//!
//! Each projection is described by 12 numbers, exactly as in ASTRA's
//! `cone_vec` and `parallel3d_vec` projection geometries (checked against
//! ASTRA's sources: `include/astra/ConeVecProjectionGeometry3D.h`,
//! `src/ConeVecProjectionGeometry3D.cpp`, `src/GeometryUtil3D.cpp`):
//!
//! | kind | numbers |
//! |---|---|
//! | cone (`cone_vec`) | `srcX srcY srcZ  dX dY dZ  uX uY uZ  vX vY vZ` |
//! | parallel (`parallel3d_vec`) | `rayX rayY rayZ  dX dY dZ  uX uY uZ  vX vY vZ` |
//!
//! - `src`: the source; `ray`: the direction of the parallel rays (its
//!   length and sign do not matter);
//! - `d`: the centre of the detector;
//! - `u`: the vector from detector pixel (0, 0) to pixel (0, 1), one
//!   **column** step; `v`: from pixel (0, 0) to (1, 0), one **row** step.
//!
//! Detector pixel (row `r`, column `c`) is centred at
//! `d + (c − (n_cols − 1)/2)·u + (r − (n_rows − 1)/2)·v` (ASTRA stores the
//! corner `d − n_cols/2·u − n_rows/2·v` and projects points to
//! `corner coordinate − 0.5`: the same centres). Projections are stored
//! `[projection][row][col]` here, `[row][projection][col]` in ASTRA.
//!
//! World coordinates are ASTRA's: x, y, z right-handed, the circular scans
//! rotate about z. Volumes are `[z][y][x]` with row 0 at the **largest** y,
//! so for the same data a tomors volume equals ASTRA's `[:, ::-1, :]`
//! (see [`super::VolumeGeometry`]).

use super::error::{RowDefect, VectorGeometryError};
use super::vec3::{cross, dot, norm, scale, sub, Vec3};

/// Relative size below which a cross or dot product counts as zero in the
/// degeneracy checks.
const DEGENERATE: f64 = 1e-9;

/// ASTRA's names of the 12 numbers of a `cone_vec` row.
const CONE_NAMES: [&str; 12] = [
    "srcX", "srcY", "srcZ", "dX", "dY", "dZ", "uX", "uY", "uZ", "vX", "vY", "vZ",
];
/// ASTRA's names of the 12 numbers of a `parallel3d_vec` row.
const PARALLEL_NAMES: [&str; 12] = [
    "rayX", "rayY", "rayZ", "dX", "dY", "dZ", "uX", "uY", "uZ", "vX", "vY", "vZ",
];

/// Where a world point lands on one projection's detector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DetectorHit {
    /// Column coordinate (pixel `c` centred at `c`).
    pub col: f64,
    /// Row coordinate (pixel `r` centred at `r`).
    pub row: f64,
    /// Cone beam: the point's distance from the source along the detector
    /// normal (positive towards the detector). Parallel beam: its signed
    /// distance from the detector plane along the normal.
    pub depth: f64,
}

/// The detector of one projection: centre, column step `u`, row step `v`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detector {
    /// Centre of the detector (`d`).
    pub center: Vec3,
    /// One column step (`u`).
    pub u: Vec3,
    /// One row step (`v`).
    pub v: Vec3,
}

impl Detector {
    /// Centre of pixel (`row`, `col`) (fractional coordinates allowed).
    pub fn pixel(&self, n_rows: usize, n_cols: usize, row: f64, col: f64) -> Vec3 {
        let c = col - (n_cols as f64 - 1.0) * 0.5;
        let r = row - (n_rows as f64 - 1.0) * 0.5;
        [
            self.center[0] + c * self.u[0] + r * self.v[0],
            self.center[1] + c * self.u[1] + r * self.v[1],
            self.center[2] + c * self.u[2] + r * self.v[2],
        ]
    }

    /// The (non-unit) normal `u × v`.
    pub fn normal(&self) -> Vec3 {
        cross(self.u, self.v)
    }

    /// Area of one pixel, `|u × v|`.
    pub fn pixel_area(&self) -> f64 {
        norm(self.normal())
    }

    /// Pixel coordinates `(col, row)` of a point `q` of the detector plane.
    pub fn coordinates(&self, n_rows: usize, n_cols: usize, q: Vec3) -> (f64, f64) {
        let n = self.normal();
        let nn = dot(n, n);
        let us = scale(cross(self.v, n), 1.0 / nn);
        let vs = scale(cross(n, self.u), 1.0 / nn);
        let w = sub(q, self.center);
        (
            dot(w, us) + (n_cols as f64 - 1.0) * 0.5,
            dot(w, vs) + (n_rows as f64 - 1.0) * 0.5,
        )
    }

    fn check(&self) -> Result<(), RowDefect> {
        let (nu, nv) = (norm(self.u), norm(self.v));
        if nu == 0.0 {
            return Err(RowDefect::ZeroU);
        }
        if nv == 0.0 {
            return Err(RowDefect::ZeroV);
        }
        if !(nu.is_finite() && nv.is_finite() && norm(self.normal()) > DEGENERATE * nu * nv) {
            return Err(RowDefect::ParallelUV);
        }
        Ok(())
    }
}

fn check_finite(row: &[f64; 12], names: &[&'static str; 12]) -> Result<(), RowDefect> {
    match row.iter().zip(names).find(|(v, _)| !v.is_finite()) {
        Some((&value, &name)) => Err(RowDefect::NonFinite { name, value }),
        None => Ok(()),
    }
}

/// One cone-beam projection: the source and the detector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConeVectors {
    /// The source (`src`).
    pub source: Vec3,
    /// The detector.
    pub detector: Detector,
}

impl ConeVectors {
    /// The projection of an ASTRA `cone_vec` row.
    pub fn from_astra(row: &[f64; 12]) -> Self {
        Self {
            source: [row[0], row[1], row[2]],
            detector: Detector {
                center: [row[3], row[4], row[5]],
                u: [row[6], row[7], row[8]],
                v: [row[9], row[10], row[11]],
            },
        }
    }

    /// The ASTRA `cone_vec` row of this projection.
    pub fn to_astra(&self) -> [f64; 12] {
        let (s, d) = (self.source, &self.detector);
        [
            s[0],
            s[1],
            s[2],
            d.center[0],
            d.center[1],
            d.center[2],
            d.u[0],
            d.u[1],
            d.u[2],
            d.v[0],
            d.v[1],
            d.v[2],
        ]
    }

    /// Distance of the source from the detector plane (positive).
    pub fn source_detector_distance(&self) -> f64 {
        let n = self.detector.normal();
        (dot(sub(self.detector.center, self.source), n) / norm(n)).abs()
    }

    /// The unit detector normal pointing away from the source.
    pub fn normal_from_source(&self) -> Vec3 {
        let n = self.detector.normal();
        let k = if dot(sub(self.detector.center, self.source), n) < 0.0 {
            -1.0
        } else {
            1.0
        };
        scale(n, k / norm(n))
    }

    /// Where the line from the source through world point `p` meets the
    /// detector plane; `None` unless `p` lies in front of the source
    /// (`depth > 0`).
    pub fn project_point(&self, n_rows: usize, n_cols: usize, p: Vec3) -> Option<DetectorHit> {
        let n = self.normal_from_source();
        let w = sub(p, self.source);
        let depth = dot(w, n);
        if !(depth.is_finite() && depth > 0.0) {
            return None;
        }
        let sdd = dot(sub(self.detector.center, self.source), n);
        let q = super::vec3::axpy(self.source, sdd / depth, w);
        let (col, row) = self.detector.coordinates(n_rows, n_cols, q);
        Some(DetectorHit { col, row, depth })
    }

    fn check(&self) -> Result<(), RowDefect> {
        check_finite(&self.to_astra(), &CONE_NAMES)?;
        self.detector.check()?;
        let d = &self.detector;
        let n = d.normal();
        let off = sub(self.source, d.center);
        let distance = (dot(off, n) / norm(n)).abs();
        if !(distance.is_finite() && distance > DEGENERATE * (norm(off) + norm(d.u) + norm(d.v))) {
            return Err(RowDefect::SourceOnDetector { distance });
        }
        Ok(())
    }
}

/// One parallel-beam projection: the ray direction and the detector.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParallelVectors {
    /// The ray direction (`ray`; any length, either sign).
    pub ray: Vec3,
    /// The detector.
    pub detector: Detector,
}

impl ParallelVectors {
    /// The projection of an ASTRA `parallel3d_vec` row.
    pub fn from_astra(row: &[f64; 12]) -> Self {
        Self {
            ray: [row[0], row[1], row[2]],
            detector: Detector {
                center: [row[3], row[4], row[5]],
                u: [row[6], row[7], row[8]],
                v: [row[9], row[10], row[11]],
            },
        }
    }

    /// The ASTRA `parallel3d_vec` row of this projection.
    pub fn to_astra(&self) -> [f64; 12] {
        let (r, d) = (self.ray, &self.detector);
        [
            r[0],
            r[1],
            r[2],
            d.center[0],
            d.center[1],
            d.center[2],
            d.u[0],
            d.u[1],
            d.u[2],
            d.v[0],
            d.v[1],
            d.v[2],
        ]
    }

    /// Where the ray through world point `p` meets the detector plane
    /// (`depth`: the signed distance of `p` from the plane along `u × v`).
    pub fn project_point(&self, n_rows: usize, n_cols: usize, p: Vec3) -> Option<DetectorHit> {
        let d = &self.detector;
        let n = d.normal();
        let off = dot(sub(p, d.center), n);
        let q = super::vec3::axpy(p, -off / dot(self.ray, n), self.ray);
        let (col, row) = d.coordinates(n_rows, n_cols, q);
        Some(DetectorHit {
            col,
            row,
            depth: off / norm(n),
        })
    }

    /// `|cos|` of the angle between the rays and the detector normal.
    pub fn obliquity(&self) -> f64 {
        let n = self.detector.normal();
        (dot(self.ray, n) / (norm(self.ray) * norm(n))).abs()
    }

    fn check(&self) -> Result<(), RowDefect> {
        check_finite(&self.to_astra(), &PARALLEL_NAMES)?;
        if norm(self.ray) == 0.0 {
            return Err(RowDefect::ZeroRay);
        }
        self.detector.check()?;
        let cos = self.obliquity();
        if !(cos.is_finite() && cos > DEGENERATE) {
            return Err(RowDefect::RayInDetectorPlane);
        }
        Ok(())
    }
}

fn check_detector(n_rows: usize, n_cols: usize, n: usize) -> Result<(), VectorGeometryError> {
    if n_rows == 0 || n_cols == 0 {
        return Err(VectorGeometryError::EmptyDetector { n_rows, n_cols });
    }
    if n == 0 {
        return Err(VectorGeometryError::NoProjections);
    }
    Ok(())
}

fn rows_of(flat: &[f64]) -> Result<Vec<[f64; 12]>, VectorGeometryError> {
    if !flat.len().is_multiple_of(12) {
        return Err(VectorGeometryError::RowLength { len: flat.len() });
    }
    Ok(flat
        .chunks_exact(12)
        .map(|c| c.try_into().expect("12 numbers"))
        .collect())
}

macro_rules! vector_geometry {
    ($(#[$doc:meta])* $ty:ident, $proj:ident, $astra:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq)]
        pub struct $ty {
            n_rows: usize,
            n_cols: usize,
            projections: Vec<$proj>,
        }

        impl $ty {
            /// The geometry of `projections` on a detector of
            /// `n_rows × n_cols` pixels.
            ///
            /// Errors: an empty detector, no projection, and any degenerate
            /// projection ([`VectorGeometryError::Row`] names the first).
            pub fn new(
                n_rows: usize,
                n_cols: usize,
                projections: Vec<$proj>,
            ) -> Result<Self, VectorGeometryError> {
                check_detector(n_rows, n_cols, projections.len())?;
                for (row, p) in projections.iter().enumerate() {
                    p.check()
                        .map_err(|defect| VectorGeometryError::Row { row, defect })?;
                }
                Ok(Self {
                    n_rows,
                    n_cols,
                    projections,
                })
            }

            /// The geometry of ASTRA vector rows (one row of 12 numbers per
            /// projection, ASTRA's order), as they are.
            ///
            /// Errors: as [`Self::new`].
            pub fn from_astra(
                rows: &[[f64; 12]],
                n_rows: usize,
                n_cols: usize,
            ) -> Result<Self, VectorGeometryError> {
                Self::new(n_rows, n_cols, rows.iter().map($proj::from_astra).collect())
            }

            /// [`Self::from_astra`] of a flat array (row-major, 12 numbers
            /// per projection, as a `.npy` of shape `(n, 12)` holds them).
            ///
            /// Errors: a length that is not a multiple of 12, and those of
            /// [`Self::new`].
            pub fn from_astra_flat(
                values: &[f64],
                n_rows: usize,
                n_cols: usize,
            ) -> Result<Self, VectorGeometryError> {
                Self::from_astra(&rows_of(values)?, n_rows, n_cols)
            }

            /// The ASTRA vector rows, one per projection.
            pub fn to_astra(&self) -> Vec<[f64; 12]> {
                self.projections.iter().map(|p| p.to_astra()).collect()
            }

            /// ASTRA's name of this kind of geometry.
            pub fn astra_type(&self) -> &'static str {
                $astra
            }

            /// Number of projections.
            pub fn n_projections(&self) -> usize {
                self.projections.len()
            }

            /// Detector rows.
            pub fn n_rows(&self) -> usize {
                self.n_rows
            }

            /// Detector columns.
            pub fn n_cols(&self) -> usize {
                self.n_cols
            }

            /// The projections' vectors.
            pub fn projections(&self) -> &[$proj] {
                &self.projections
            }

            /// Centre of detector pixel (`row`, `col`) of projection `i`.
            pub fn pixel_center(&self, i: usize, row: f64, col: f64) -> Vec3 {
                self.projections[i]
                    .detector
                    .pixel(self.n_rows, self.n_cols, row, col)
            }

            /// Where world point `p` lands on the detector of projection `i`
            /// (cone beam: `None` unless `p` is in front of the source).
            pub fn project_point(&self, i: usize, p: Vec3) -> Option<DetectorHit> {
                self.projections[i].project_point(self.n_rows, self.n_cols, p)
            }

            /// The geometry of detector rows `rows` only (a detector of
            /// `rows.len()` rows whose row 0 is row `rows.start` of this
            /// one; the same rays), for work split into bands of rows.
            ///
            /// Errors: an empty range or one beyond the detector.
            pub fn detector_rows(
                &self,
                rows: std::ops::Range<usize>,
            ) -> Result<Self, VectorGeometryError> {
                if rows.is_empty() || rows.end > self.n_rows {
                    return Err(VectorGeometryError::Parameter(format!(
                        "detector rows {rows:?} are empty or outside the detector's {} rows",
                        self.n_rows
                    )));
                }
                let shift = (rows.start + rows.end) as f64 * 0.5 - self.n_rows as f64 * 0.5;
                let projections = self
                    .projections
                    .iter()
                    .map(|p| {
                        let mut q = *p;
                        q.detector.center = super::vec3::axpy(q.detector.center, shift, q.detector.v);
                        q
                    })
                    .collect();
                Ok(Self {
                    n_rows: rows.len(),
                    n_cols: self.n_cols,
                    projections,
                })
            }
        }
    };
}

vector_geometry!(
    /// A cone-beam geometry with one source and one flat detector per
    /// projection (ASTRA's `cone_vec`). Rays run from the source through
    /// the centre of each detector pixel.
    ConeVecGeometry,
    ConeVectors,
    "cone_vec"
);

vector_geometry!(
    /// A parallel-beam geometry with one ray direction and one flat
    /// detector per projection (ASTRA's `parallel3d_vec`). Rays run along
    /// the ray direction through the centre of each detector pixel.
    ParallelVecGeometry,
    ParallelVectors,
    "parallel3d_vec"
);

/// A parallel-beam or a cone-beam vector geometry.
#[derive(Clone, Debug, PartialEq)]
pub enum VecGeometry {
    /// Parallel beam (`parallel3d_vec`).
    Parallel(ParallelVecGeometry),
    /// Cone beam (`cone_vec`).
    Cone(ConeVecGeometry),
}

impl From<ParallelVecGeometry> for VecGeometry {
    fn from(g: ParallelVecGeometry) -> Self {
        Self::Parallel(g)
    }
}

impl From<ConeVecGeometry> for VecGeometry {
    fn from(g: ConeVecGeometry) -> Self {
        Self::Cone(g)
    }
}

impl VecGeometry {
    /// Number of projections.
    pub fn n_projections(&self) -> usize {
        match self {
            Self::Parallel(g) => g.n_projections(),
            Self::Cone(g) => g.n_projections(),
        }
    }

    /// Detector rows.
    pub fn n_rows(&self) -> usize {
        match self {
            Self::Parallel(g) => g.n_rows(),
            Self::Cone(g) => g.n_rows(),
        }
    }

    /// Detector columns.
    pub fn n_cols(&self) -> usize {
        match self {
            Self::Parallel(g) => g.n_cols(),
            Self::Cone(g) => g.n_cols(),
        }
    }

    /// The detector of projection `i`.
    pub fn detector(&self, i: usize) -> &Detector {
        match self {
            Self::Parallel(g) => &g.projections()[i].detector,
            Self::Cone(g) => &g.projections()[i].detector,
        }
    }

    /// The ray of detector pixel (`row`, `col`) of projection `i` in world
    /// coordinates: a point on it and its direction (cone beam: the source
    /// and the vector from the source to the pixel centre; parallel beam:
    /// the pixel centre and the ray direction).
    pub fn ray(&self, i: usize, row: f64, col: f64) -> (Vec3, Vec3) {
        match self {
            Self::Parallel(g) => (g.pixel_center(i, row, col), g.projections()[i].ray),
            Self::Cone(g) => {
                let s = g.projections()[i].source;
                (s, sub(g.pixel_center(i, row, col), s))
            }
        }
    }

    /// Where world point `p` lands on the detector of projection `i`.
    pub fn project_point(&self, i: usize, p: Vec3) -> Option<DetectorHit> {
        match self {
            Self::Parallel(g) => g.project_point(i, p),
            Self::Cone(g) => g.project_point(i, p),
        }
    }

    /// The ASTRA vector rows.
    pub fn to_astra(&self) -> Vec<[f64; 12]> {
        match self {
            Self::Parallel(g) => g.to_astra(),
            Self::Cone(g) => g.to_astra(),
        }
    }

    /// ASTRA's name of the geometry (`parallel3d_vec`, `cone_vec`).
    pub fn astra_type(&self) -> &'static str {
        match self {
            Self::Parallel(g) => g.astra_type(),
            Self::Cone(g) => g.astra_type(),
        }
    }

    /// Whether the geometry is cone beam.
    pub fn is_cone(&self) -> bool {
        matches!(self, Self::Cone(_))
    }
}
