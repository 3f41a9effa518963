//! `--half-acquisition`: a 360° scan with the rotation axis near one edge of
//! the detector, stitched as it is opened into a 180° scan of about twice
//! the width (`tomors_io::half`). The axis is `--center` or found on a few
//! rows; every method then reconstructs the stitched scan like any other.

use anyhow::{bail, Result};
use ndarray::Axis;
use tomors_io::half::{find_axis_360, pair_opposite, AxisSearch, HalfAcquisitionSource};
use tomors_io::{Preprocess, ProjectionSource};

use super::geometry::{scan_column, search_rows, GeometrySpec};

/// `--half-acquisition` and the flags that place its axis, as the loader
/// needs them ([`super::input::InputSpec::half`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HalfSpec {
    /// `--center` (whole-detector pixels); `None`: search.
    pub axis: Option<f32>,
    /// `--center-row`: the row to search on.
    pub center_row: Option<usize>,
    /// `--center-range a:b` (whole-detector pixels; default: the whole
    /// detector).
    pub range: Option<(f32, f32)>,
    /// `--slices`: the rows reconstructed (the search rows lie within).
    pub slices: Option<(Option<usize>, Option<usize>)>,
}

/// How a half-acquisition scan was stitched.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stitched {
    /// The axis on the detector (the scan's columns, after `--cols` and
    /// `--binning`).
    pub axis: f64,
    /// Whether the axis was found (else given).
    pub found: bool,
    /// Columns of the detector (the scan's).
    pub n_cols: usize,
    /// Columns of the stitched rows.
    pub width: usize,
    /// The axis in the stitched rows' columns.
    pub center: f64,
    /// Width of the overlap of opposite projections (pixels).
    pub overlap: f64,
}

/// An `IoError`'s message without its "invalid parameter: " prefix.
fn message(e: tomors_io::IoError) -> String {
    e.to_string()
        .trim_start_matches("invalid parameter: ")
        .to_string()
}

/// Stitches the 360° scan `source` (angles `angles`, preprocessing `pre`,
/// columns `(offset, bin)` of the whole detector, see [`scan_column`]) into
/// the wide 180° scan: the axis from `--center`, or found on the search rows
/// ([`find_axis_360`], median of the rows). Returns the stitched source,
/// its angles and how it was stitched.
pub fn stitch(
    source: Box<dyn ProjectionSource>,
    angles: &[f32],
    pre: &Preprocess,
    columns: (usize, usize),
    spec: &HalfSpec,
) -> Result<(Box<dyn ProjectionSource>, Vec<f32>, Stitched)> {
    let path = source.path().display().to_string();
    let [_, n_rows, n_cols] = source.shape();
    // The angles must cover a turn whether the axis is given or found.
    pair_opposite(angles)
        .map_err(|e| anyhow::anyhow!("{path}: --half-acquisition: {}", message(e)))?;
    let (axis, found) = match spec.axis {
        Some(c) => (scan_column(columns, f64::from(c)), false),
        None => {
            let geometry = GeometrySpec {
                slices: spec.slices,
                ..GeometrySpec::default()
            };
            let rows = geometry.rows(n_rows)?;
            let range = spec.range.map(|(a, b)| {
                (
                    scan_column(columns, f64::from(a)),
                    scan_column(columns, f64::from(b)),
                )
            });
            let options = AxisSearch {
                range,
                ..AxisSearch::default()
            };
            let mut axes = Vec::new();
            for r in search_rows(&rows, spec.center_row) {
                if r >= n_rows {
                    bail!("{path}: row {r} outside the detector's {n_rows} rows");
                }
                let p = source.read_rows(r..r + 1, pre)?;
                let res =
                    find_axis_360(p.index_axis(Axis(1), 0), angles, &options).map_err(|e| {
                        anyhow::anyhow!("{path}: row {r}: --half-acquisition: {}", message(e))
                    })?;
                if res.quality < f64::from(tomors_io::center::MIN_QUALITY) {
                    tracing::warn!(
                        "{path}: row {r}: the offset axis {:.2} has no clear minimum (quality {:.3}); \
                         check it and give --center",
                        res.axis,
                        res.quality
                    );
                }
                tracing::info!(
                    "row {r}: offset axis {:.2} (quality {:.3})",
                    res.axis,
                    res.quality
                );
                axes.push(res.axis as f32);
            }
            (f64::from(tomors_io::preprocess::median(&mut axes)), true)
        }
    };
    let stitched = HalfAcquisitionSource::new(source, angles, axis)
        .map_err(|e| anyhow::anyhow!("--half-acquisition: {}", message(e)))?;
    let st = *stitched.stitch();
    let half = Stitched {
        axis,
        found,
        n_cols,
        width: st.width(),
        center: st.center(),
        overlap: st.overlap(),
    };
    tracing::info!(
        "half acquisition: axis {axis:.2} of {n_cols} columns ({}), overlap {:.1} px: {} angles × {} columns, centre {:.2}",
        if found { "found" } else { "given" },
        half.overlap,
        stitched.shape()[0],
        half.width,
        half.center
    );
    let angles = stitched.angles().to_vec();
    Ok((Box::new(stitched), angles, half))
}
