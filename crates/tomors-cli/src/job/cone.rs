//! A cone-beam scan loaded for reconstruction: every detector row read
//! whole through the job's loader, with its geometry and volume.

use anyhow::{Context, Result};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};

use super::geometry::ConeSpec;
use super::input::{self, AnglesFrom, InputSpec, PreSpec, Scan};

/// The projections `[angle][row][col]`, their geometry and the volume.
pub struct ConeScan {
    /// The opened scan (for messages and output attributes).
    pub scan: Scan,
    /// Preprocessed projections, finite.
    pub projections: Array3<f32>,
    /// The cone-beam geometry.
    pub geometry: ConeGeometry,
    /// The reconstruction volume.
    pub volume: ConeVolume,
}

/// Bytes a cone-beam run holds: the projections three times (read,
/// weighted/filtered or residual, work) and the volume four times, plus
/// 64 MiB for the process.
fn bytes_needed(projection_values: usize, voxels: usize) -> usize {
    4 * (3 * projection_values + 4 * voxels) + (64 << 20)
}

/// A cone-beam scan opened (header, angles, geometry, volume), its
/// projections not read yet.
pub struct ConeOpened {
    /// The opened scan.
    pub scan: Scan,
    /// The cone-beam geometry.
    pub geometry: ConeGeometry,
    /// The reconstruction volume.
    pub volume: ConeVolume,
}

/// Opens a cone-beam scan without reading its projections. Angles:
/// `--angles`, the file's own, `--angle-range`, else 360° (end excluded)
/// or, with `--short-scan`, π + fan angle with both ends.
pub fn open(input: &InputSpec, pre: &PreSpec, cone: &ConeSpec) -> Result<ConeOpened> {
    let scan = input::open(input, pre, true)?;
    let path = scan.path().to_path_buf();
    let [n_angles, n_rows, n_cols] = scan.shape();
    let angles = match scan.angles_from {
        AnglesFrom::Default => cone.default_angles(n_angles, n_rows, n_cols)?,
        _ => scan.angles.clone(),
    };
    let geometry = cone
        .geometry(angles, n_rows, n_cols)
        .with_context(|| path.display().to_string())?;
    let volume = cone.volume(&geometry)?;
    Ok(ConeOpened {
        scan,
        geometry,
        volume,
    })
}

impl ConeOpened {
    /// Reads every detector row (within `memory`, for `method`'s messages).
    pub fn read(self, memory: Option<usize>, method: &str) -> Result<ConeScan> {
        let [n_angles, n_rows, n_cols] = self.scan.shape();
        let bytes = bytes_needed(n_angles * n_rows * n_cols, self.volume.len());
        let projections = self.scan.read_whole(0..n_rows, bytes, memory, method)?;
        Ok(ConeScan {
            scan: self.scan,
            projections,
            geometry: self.geometry,
            volume: self.volume,
        })
    }
}

/// Opens and reads a cone-beam scan (see [`open`]).
pub fn load(
    input: &InputSpec,
    pre: &PreSpec,
    cone: &ConeSpec,
    memory: Option<usize>,
    method: &str,
) -> Result<ConeScan> {
    open(input, pre, cone)?.read(memory, method)
}
