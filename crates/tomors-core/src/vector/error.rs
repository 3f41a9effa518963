//! Typed errors of the vector geometries: every defect of a projection's
//! vectors names the row (projection index) it was found in.

use thiserror::Error;

use crate::error::CoreError;

/// What is wrong with one row (one projection's 12 numbers).
#[derive(Clone, Debug, PartialEq, Error)]
pub enum RowDefect {
    /// A number is NaN or infinite.
    #[error("{name} = {value} is not finite")]
    NonFinite {
        /// ASTRA's name of the number (`srcX`, `rayY`, `dZ`, `uX`, ...).
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// `u` (one detector column step) is the zero vector.
    #[error("u (one detector column step) is zero")]
    ZeroU,
    /// `v` (one detector row step) is the zero vector.
    #[error("v (one detector row step) is zero")]
    ZeroV,
    /// `u` and `v` are parallel: the detector has no area.
    #[error("u and v are parallel (the detector pixels have no area)")]
    ParallelUV,
    /// The source lies in the detector plane (no ray crosses the detector).
    #[error("the source lies in the detector plane (distance {distance:e})")]
    SourceOnDetector {
        /// Distance of the source from the detector plane.
        distance: f64,
    },
    /// Part of the volume lies behind the source (beside it or around it):
    /// the projectors treat rays as whole lines, so the volume must lie
    /// wholly on the detector's side of the plane through the source
    /// parallel to the detector.
    #[error("the source at ({:.4}, {:.4}, {:.4}) is inside or beside the volume (part of the volume lies behind it)", position[0], position[1], position[2])]
    SourceNearVolume {
        /// The source (world coordinates).
        position: [f64; 3],
    },
    /// The parallel-beam ray direction is the zero vector.
    #[error("the ray direction is zero")]
    ZeroRay,
    /// The parallel-beam ray direction lies in the detector plane.
    #[error("the ray direction lies in the detector plane")]
    RayInDetectorPlane,
}

/// Everything that can be wrong with a vector geometry or a volume box.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum VectorGeometryError {
    /// One projection's vectors are unusable.
    #[error("vector row {row}: {defect}")]
    Row {
        /// The projection index (row of the vector array, from 0).
        row: usize,
        /// What is wrong.
        defect: RowDefect,
    },
    /// No projection at all.
    #[error("the geometry has no projection (no vector row)")]
    NoProjections,
    /// A detector without pixels.
    #[error("empty detector {n_rows}×{n_cols} (rows × columns)")]
    EmptyDetector {
        /// Rows.
        n_rows: usize,
        /// Columns.
        n_cols: usize,
    },
    /// A flat array of vectors whose length is not a multiple of 12.
    #[error(
        "the vector array has {len} numbers, not a multiple of 12 (one row of 12 per projection)"
    )]
    RowLength {
        /// Number of values given.
        len: usize,
    },
    /// A volume without voxels.
    #[error("empty volume {nx}×{ny}×{nz} (x × y × z)")]
    EmptyVolume {
        /// Columns.
        nx: usize,
        /// Rows.
        ny: usize,
        /// Slices.
        nz: usize,
    },
    /// A voxel size that is not positive and finite.
    #[error("voxel size along {axis} is {value}, it must be positive")]
    VoxelSize {
        /// `x`, `y` or `z`.
        axis: char,
        /// The value.
        value: f64,
    },
    /// A volume centre or window bound that is not finite, or a window
    /// whose maximum does not exceed its minimum.
    #[error("volume {what} is not usable: {value}")]
    VolumePlacement {
        /// Which number.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// A parameter of a constructor (pitch, turns, ...) out of range.
    #[error("{0}")]
    Parameter(String),
}

impl From<VectorGeometryError> for CoreError {
    fn from(e: VectorGeometryError) -> Self {
        match e {
            VectorGeometryError::Parameter(m) => CoreError::Parameter(m),
            other => CoreError::Geometry(other.to_string()),
        }
    }
}
