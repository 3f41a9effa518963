//! Constructors of vector geometries: the circular scans (the same rays as
//! [`ConeGeometry`] and [`ParallelGeometry`]), the usual misalignments,
//! helical and laminography scans.
//!
//! A [`ConeScan`] / [`ParallelScan`] is the scanner at angle 0 in the
//! frame of the sample (z = the rotation axis): the ideal one has the
//! source at `(0, −SOD, 0)` (parallel beam: rays along `(0, 1, 0)`), the
//! detector centred at `(0, ODD, 0)` (parallel: at the origin), a column
//! step `u = (pixel_u, 0, 0)` and a row step `v = (0, 0, pixel_v)` — ASTRA's
//! `cone` / `parallel3d` at angle 0 (`src/GeometryUtil3D.cpp`,
//! `genConeProjections`, `genPar3DProjections`). Misalignments change this
//! frame, each a small method applied in call order; [`ConeScan::orbit`]
//! then turns the frame about z by each angle (counter-clockwise, x towards
//! y, as the circular geometries), [`ConeScan::helical`] also moves it
//! along z.

use super::error::VectorGeometryError;
use super::geometry::{
    ConeVecGeometry, ConeVectors, Detector, ParallelVecGeometry, ParallelVectors,
};
use super::vec3::{add, apply, axpy, cross, rotation, rotation_z, unit, Mat3, Vec3};
use super::volume::VolumeGeometry;
use crate::cone::ConeGeometry;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// The direction of rotation of a helical scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Turn {
    /// Angles grow: x turns towards y (the circular scans' direction).
    #[default]
    CounterClockwise,
    /// Angles fall.
    Clockwise,
}

impl Turn {
    fn sign(self) -> f64 {
        match self {
            Self::CounterClockwise => 1.0,
            Self::Clockwise => -1.0,
        }
    }
}

impl Detector {
    /// The detector with its centre moved by `du` columns and `dv` rows
    /// (pixels, along its own `u` and `v`).
    pub fn shifted(self, du: f64, dv: f64) -> Self {
        Self {
            center: axpy(axpy(self.center, du, self.u), dv, self.v),
            ..self
        }
    }

    /// The detector turned by `angle` (radians, right-handed) about
    /// `axis` through its centre (`u` and `v` turn, the centre stays).
    pub fn turned(self, axis: Vec3, angle: f64) -> Self {
        let r = rotation(axis, angle);
        Self {
            center: self.center,
            u: apply(&r, self.u),
            v: apply(&r, self.v),
        }
    }

    fn transformed(self, r: &Mat3, t: Vec3) -> Self {
        Self {
            center: add(apply(r, self.center), t),
            u: apply(r, self.u),
            v: apply(r, self.v),
        }
    }
}

impl ConeVectors {
    /// The projection turned by `r` about the origin, then moved by `t`.
    pub fn transformed(&self, r: &Mat3, t: Vec3) -> Self {
        Self {
            source: add(apply(r, self.source), t),
            detector: self.detector.transformed(r, t),
        }
    }
}

impl ParallelVectors {
    /// The projection turned by `r` about the origin, then moved by `t`.
    pub fn transformed(&self, r: &Mat3, t: Vec3) -> Self {
        Self {
            ray: apply(r, self.ray),
            detector: self.detector.transformed(r, t),
        }
    }
}

/// The misalignments every scanner shares (the detector's and the axis').
macro_rules! scanner_methods {
    () => {
        /// The detector moved by `du` columns and `dv` rows (pixels along
        /// its `u` and `v`): an off-centre detector (ASTRA's
        /// `translateDetectorVectorsU/V`; a principal point at column
        /// `c` is `du = (n_cols − 1)/2 − c`).
        pub fn detector_offset(mut self, du: f64, dv: f64) -> Self {
            self.frame.detector = self.frame.detector.shifted(du, dv);
            self
        }

        /// The detector rolled by `angle` (radians) in its own plane,
        /// about its normal `u × v` through its centre (u turns towards v).
        pub fn detector_roll(mut self, angle: f64) -> Self {
            let d = self.frame.detector;
            self.frame.detector = d.turned(cross(d.u, d.v), angle);
            self
        }

        /// The detector pitched (tilted) by `angle` about its own `u`
        /// axis (the direction of a row) through its centre: `v` turns
        /// out of the ideal plane (towards `u × v` for positive angles).
        pub fn detector_pitch(mut self, angle: f64) -> Self {
            let d = self.frame.detector;
            self.frame.detector = d.turned(d.u, angle);
            self
        }

        /// The detector yawed (slanted) by `angle` about its own `v` axis
        /// (the direction of a column) through its centre: `u` turns out
        /// of the ideal plane (towards `−(u × v)` for positive angles).
        pub fn detector_yaw(mut self, angle: f64) -> Self {
            let d = self.frame.detector;
            self.frame.detector = d.turned(d.v, angle);
            self
        }

        /// A tilted rotation axis: relative to the scanner, the top of the
        /// axis leans by `sideways` (radians) towards `+u` (a tilt within
        /// the detector plane, about the beam) and by `towards_source`
        /// towards the source (about the `u` direction). In the sample's
        /// frame (z = the axis) the whole scanner turns the other way: by
        /// `−sideways` about the y axis, then by `−towards_source` about x.
        pub fn axis_tilt(mut self, sideways: f64, towards_source: f64) -> Self {
            let r1 = rotation([0.0, 1.0, 0.0], -sideways);
            let r2 = rotation([1.0, 0.0, 0.0], -towards_source);
            self.frame = self.frame.transformed(&r1, [0.0; 3]);
            self.frame = self.frame.transformed(&r2, [0.0; 3]);
            self
        }

        /// A laminography scan: the rotation axis (the normal of a flat
        /// sample lying in the x–y plane) leans towards the source by
        /// `tilt` radians from its CT position perpendicular to the beam,
        /// so the angle between the axis and the beam is `π/2 − tilt`
        /// (`tilt = 0` is ordinary CT). Same as
        /// `axis_tilt(0.0, tilt)`.
        pub fn laminography(self, tilt: f64) -> Self {
            self.axis_tilt(0.0, tilt)
        }
    };
}

fn check_turns(n: usize, turns: f64, pitch: f64) -> Result<(), VectorGeometryError> {
    if n == 0 {
        return Err(VectorGeometryError::NoProjections);
    }
    if !(turns.is_finite() && turns > 0.0) {
        return Err(VectorGeometryError::Parameter(format!(
            "helical scan: {turns} turns, the number of turns must be positive"
        )));
    }
    if !pitch.is_finite() {
        return Err(VectorGeometryError::Parameter(format!(
            "helical scan: pitch {pitch} is not finite"
        )));
    }
    Ok(())
}

/// Angle and z shift of projection `i` of `n` of a helical scan of `turns`
/// turns and `pitch` world units along z per turn, centred on z = 0.
fn helix(i: usize, n: usize, turns: f64, pitch: f64, turn: Turn) -> (f64, f64) {
    let f = i as f64 / n as f64;
    let angle = turn.sign() * 2.0 * std::f64::consts::PI * turns * f;
    let z = pitch * turns * (f - 0.5);
    (angle, z)
}

/// A cone-beam scanner at angle 0 (see the [module](self) docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConeScan {
    n_rows: usize,
    n_cols: usize,
    frame: ConeVectors,
}

impl ConeScan {
    /// The ideal scanner: source at `(0, −sod, 0)`, a detector of
    /// `n_rows × n_cols` pixels of `pixel_u × pixel_v` centred at
    /// `(0, odd, 0)`, `u = (pixel_u, 0, 0)`, `v = (0, 0, pixel_v)`.
    /// Checked when the geometry is made ([`Self::orbit`]).
    pub fn new(
        sod: f64,
        odd: f64,
        n_rows: usize,
        n_cols: usize,
        pixel_u: f64,
        pixel_v: f64,
    ) -> Self {
        Self {
            n_rows,
            n_cols,
            frame: ConeVectors {
                source: [0.0, -sod, 0.0],
                detector: Detector {
                    center: [0.0, odd, 0.0],
                    u: [pixel_u, 0.0, 0.0],
                    v: [0.0, 0.0, pixel_v],
                },
            },
        }
    }

    /// The scanner of a circular cone-beam geometry (its principal point
    /// as a detector offset).
    pub fn from_cone_geometry(g: &ConeGeometry) -> Self {
        Self::new(
            g.sod(),
            g.odd(),
            g.n_rows(),
            g.n_cols(),
            g.pixel_u(),
            g.pixel_v(),
        )
        .detector_offset(
            (g.n_cols() as f64 - 1.0) * 0.5 - g.center_col(),
            (g.n_rows() as f64 - 1.0) * 0.5 - g.center_row(),
        )
    }

    scanner_methods!();

    /// The scanner at angle 0 (after the misalignments).
    pub fn frame(&self) -> &ConeVectors {
        &self.frame
    }

    /// The source moved by `du` along the detector's column direction and
    /// `dv` along its row direction (world units, along the unit vectors
    /// of `u` and `v`): a source off the central ray.
    pub fn source_offset(mut self, du: f64, dv: f64) -> Self {
        let d = self.frame.detector;
        self.frame.source = axpy(axpy(self.frame.source, du, unit(d.u)), dv, unit(d.v));
        self
    }

    /// A circular scan: the scanner turned about z by each of `angles`
    /// (radians).
    ///
    /// Errors: no angle, non-finite angles or a degenerate scanner
    /// ([`VectorGeometryError::Row`] names the projection).
    pub fn orbit(&self, angles: &[f64]) -> Result<ConeVecGeometry, VectorGeometryError> {
        let p = angles
            .iter()
            .map(|&a| self.frame.transformed(&rotation_z(a), [0.0; 3]))
            .collect();
        ConeVecGeometry::new(self.n_rows, self.n_cols, p)
    }

    /// A helical scan of `n` projections over `turns` turns in direction
    /// `turn`, the scanner moving `pitch` world units along +z per turn
    /// (negative: along −z), centred on z = 0: projection `i` at angle
    /// `±2π·turns·i/n` and height `pitch·turns·(i/n − 1/2)`.
    ///
    /// Errors: `n = 0`, non-positive or non-finite turns, a non-finite
    /// pitch, and those of [`Self::orbit`].
    pub fn helical(
        &self,
        n: usize,
        turns: f64,
        pitch: f64,
        turn: Turn,
    ) -> Result<ConeVecGeometry, VectorGeometryError> {
        check_turns(n, turns, pitch)?;
        let p = (0..n)
            .map(|i| {
                let (a, z) = helix(i, n, turns, pitch, turn);
                self.frame.transformed(&rotation_z(a), [0.0, 0.0, z])
            })
            .collect();
        ConeVecGeometry::new(self.n_rows, self.n_cols, p)
    }
}

/// A parallel-beam scanner at angle 0 (see the [module](self) docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParallelScan {
    n_rows: usize,
    n_cols: usize,
    frame: ParallelVectors,
}

impl ParallelScan {
    /// The ideal scanner: rays along `(0, 1, 0)`, a detector of
    /// `n_rows × n_cols` pixels of `pixel_u × pixel_v` centred at the
    /// origin, `u = (pixel_u, 0, 0)`, `v = (0, 0, pixel_v)`. Checked when
    /// the geometry is made ([`Self::orbit`]).
    pub fn new(n_rows: usize, n_cols: usize, pixel_u: f64, pixel_v: f64) -> Self {
        Self {
            n_rows,
            n_cols,
            frame: ParallelVectors {
                ray: [0.0, 1.0, 0.0],
                detector: Detector {
                    center: [0.0; 3],
                    u: [pixel_u, 0.0, 0.0],
                    v: [0.0, 0.0, pixel_v],
                },
            },
        }
    }

    scanner_methods!();

    /// The scanner at angle 0 (after the misalignments).
    pub fn frame(&self) -> &ParallelVectors {
        &self.frame
    }

    /// The rays turned by `angle` (radians) about the detector's `v`
    /// axis, then by `elevation` about its `u` axis: a beam that is not
    /// perpendicular to the detector (the detector stays).
    pub fn ray_tilt(mut self, angle: f64, elevation: f64) -> Self {
        let d = self.frame.detector;
        let r = apply(&rotation(d.v, angle), self.frame.ray);
        self.frame.ray = apply(&rotation(d.u, elevation), r);
        self
    }

    /// A circular scan: the scanner turned about z by each of `angles`
    /// (radians).
    ///
    /// Errors: no angle, non-finite angles or a degenerate scanner
    /// ([`VectorGeometryError::Row`] names the projection).
    pub fn orbit(&self, angles: &[f64]) -> Result<ParallelVecGeometry, VectorGeometryError> {
        let p = angles
            .iter()
            .map(|&a| self.frame.transformed(&rotation_z(a), [0.0; 3]))
            .collect();
        ParallelVecGeometry::new(self.n_rows, self.n_cols, p)
    }

    /// A helical parallel-beam scan (as [`ConeScan::helical`]).
    ///
    /// Errors: as [`ConeScan::helical`].
    pub fn helical(
        &self,
        n: usize,
        turns: f64,
        pitch: f64,
        turn: Turn,
    ) -> Result<ParallelVecGeometry, VectorGeometryError> {
        check_turns(n, turns, pitch)?;
        let p = (0..n)
            .map(|i| {
                let (a, z) = helix(i, n, turns, pitch, turn);
                self.frame.transformed(&rotation_z(a), [0.0, 0.0, z])
            })
            .collect();
        ParallelVecGeometry::new(self.n_rows, self.n_cols, p)
    }
}

impl ConeVecGeometry {
    /// The vectors of a circular cone-beam geometry: the same source,
    /// detector pixels and rays as `g` (`ConeGeometry::source`,
    /// `ConeGeometry::detector_point`) at every angle.
    pub fn from_circular(g: &ConeGeometry) -> Self {
        let angles: Vec<f64> = g.angles().iter().map(|&a| a as f64).collect();
        ConeScan::from_cone_geometry(g)
            .orbit(&angles)
            .expect("a valid circular cone-beam geometry has valid vectors")
    }
}

impl ParallelVecGeometry {
    /// The vectors of a circular parallel-beam geometry on a detector of
    /// `n_rows` rows of height `row_pitch` (world units): row `r` is slice
    /// `r` of a volume of `n_rows` slices of thickness `row_pitch`
    /// ([`VolumeGeometry::from_slices`]), rays along `(−sin θ, cos θ, 0)`,
    /// bin `k` at `s = (k − center_i)·bin_width` from the axis, with each
    /// projection's own axis position.
    ///
    /// Errors: `n_rows = 0`, a non-positive or non-finite `row_pitch`.
    pub fn from_circular(
        g: &ParallelGeometry,
        n_rows: usize,
        row_pitch: f64,
    ) -> Result<Self, VectorGeometryError> {
        if !(row_pitch.is_finite() && row_pitch > 0.0) {
            return Err(VectorGeometryError::Parameter(format!(
                "row pitch {row_pitch} must be positive"
            )));
        }
        let w = g.bin_width() as f64;
        let n = g.n_bins();
        let p = g
            .angles()
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let scan = ParallelScan::new(n_rows, n, w, row_pitch)
                    .detector_offset((n as f64 - 1.0) * 0.5 - g.center(i) as f64, 0.0);
                scan.frame.transformed(&rotation_z(a as f64), [0.0; 3])
            })
            .collect();
        Self::new(n_rows, n, p)
    }
}

impl VolumeGeometry {
    /// The volume of a stack of `nz` slices of `grid` (square pixels,
    /// centred on the rotation axis) of thickness `slice_thickness`, slice
    /// `k` at `z = (k − (nz − 1)/2)·slice_thickness`.
    ///
    /// Errors: as [`VolumeGeometry::with_voxels`].
    pub fn from_slices(
        grid: &SliceGrid,
        nz: usize,
        slice_thickness: f64,
    ) -> Result<Self, VectorGeometryError> {
        let p = grid.pixel_size as f64;
        Self::with_voxels(grid.nx, grid.ny, nz, [p, p, slice_thickness], [0.0; 3])
    }
}
