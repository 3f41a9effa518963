//! The rotation centre of a parallel-beam job: given, or found on a few
//! detector rows (Vo et al. 2014 Fourier metric, `tomors-io`).

use std::ops::Range;

use anyhow::{bail, Result};
use ndarray::Axis;
use tomors_io::{find_center, CenterOptions, Preprocess, ProjectionSource};

use super::geometry::{CenterArg, GeometrySpec};
use super::input::Scan;

/// The centre found on several rows.
#[derive(Clone, Debug)]
pub struct AutoCenter {
    /// The median of the rows' centres.
    pub center: f32,
    /// The mean quality of the rows.
    pub quality: f32,
    /// `(row, centre, quality)` of each row searched.
    pub rows: Vec<(usize, f32, f32)>,
}

/// Rows to search within `rows`: the given one, or up to 3 spread over them.
pub fn search_rows(rows: &Range<usize>, row: Option<usize>) -> Vec<usize> {
    if let Some(r) = row {
        return vec![r];
    }
    let n = rows.len();
    let mut v: Vec<usize> = [n / 4, n / 2, (3 * n) / 4]
        .iter()
        .map(|&k| rows.start + k.min(n - 1))
        .collect();
    v.dedup();
    v
}

/// Finds the rotation centre of `source` on the given detector rows.
pub fn auto_center(
    source: &dyn ProjectionSource,
    angles: &[f32],
    pre: &Preprocess,
    rows: &[usize],
    options: &CenterOptions,
) -> Result<AutoCenter> {
    let n_rows = source.shape()[1];
    let mut found = Vec::new();
    for &r in rows {
        if r >= n_rows {
            bail!(
                "{}: row {r} outside the detector's {n_rows} rows",
                source.path().display()
            );
        }
        let p = source.read_rows(r..r + 1, pre)?;
        let res = find_center(p.index_axis(Axis(1), 0), angles, options).map_err(|e| {
            let e = e.to_string();
            let e = e.trim_start_matches("invalid parameter: ");
            anyhow::anyhow!("{}: row {r}: {e}", source.path().display())
        })?;
        if let Some(w) = res.warning() {
            tracing::warn!("{}: row {r}: {w}", source.path().display());
        }
        tracing::info!(
            "row {r}: centre {:.2} (quality {:.3}){}",
            res.center,
            res.quality,
            if res.at_edge {
                " — at the edge of the search range"
            } else {
                ""
            }
        );
        found.push((r, res.center, res.quality));
    }
    let mut cs: Vec<f32> = found.iter().map(|f| f.1).collect();
    let center = tomors_io::preprocess::median(&mut cs);
    let quality = found.iter().map(|f| f.2).sum::<f32>() / found.len() as f32;
    Ok(AutoCenter {
        center,
        quality,
        rows: found,
    })
}

/// The centre of a parallel-beam job on `rows` of `scan`: `--center`'s
/// position, found with `--center auto` (on `--center-row` or rows spread
/// over `rows`), or `None` for the detector centre.
pub fn resolve(scan: &Scan, spec: &GeometrySpec, rows: &Range<usize>) -> Result<Option<f32>> {
    Ok(match spec.center {
        None => None,
        Some(CenterArg::At(c)) => Some(c),
        Some(CenterArg::Auto) => {
            let search = search_rows(rows, spec.center_row);
            let found = auto_center(
                scan.source.as_ref(),
                &scan.angles,
                &scan.pre,
                &search,
                &CenterOptions::default(),
            )?;
            tracing::info!(
                "rotation centre {:.2} (quality {:.3})",
                found.center,
                found.quality
            );
            Some(found.center)
        }
    })
}
