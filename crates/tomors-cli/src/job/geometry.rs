//! The geometry part of a job: parallel beam (centre, rows) or cone beam
//! (distances, detector pixels, volume), and the cone-beam defaults.

use std::ops::Range;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use tomors_core::cone::{uniform_angles_inclusive, ConeGeometry, ConeVolume, ScanMode};
use tomors_core::geometry::uniform_angles;

/// Beam geometry of `phantom` and `recon`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum GeometryKind {
    /// Parallel beam (FBP).
    #[default]
    Parallel,
    /// Circular cone beam with a flat detector (FDK).
    Cone,
}

/// `--center`: a position in detector pixels, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CenterArg {
    /// Find the centre (see [`super::center::auto_center`]).
    Auto,
    /// The rotation-axis position in bin-index units.
    At(f32),
    /// An axis drifting linearly with the detector row: at the first
    /// detector row, at the last.
    Drift(f32, f32),
}

impl std::str::FromStr for CenterArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        if let Some((a, b)) = s.split_once(':') {
            let num = |t: &str| t.trim().parse::<f32>().ok().filter(|c| c.is_finite());
            return match (num(a), num(b)) {
                (Some(a), Some(b)) => Ok(Self::Drift(a, b)),
                _ => Err(format!(
                    "'{s}': expected A:B, the centre at the first and the last detector row"
                )),
            };
        }
        s.trim()
            .parse::<f32>()
            .ok()
            .filter(|c| c.is_finite())
            .map(Self::At)
            .ok_or_else(|| format!("'{s}' is neither a position in pixels, A:B nor 'auto'"))
    }
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

/// A column position of the whole detector in the columns of a scan seen
/// through `--cols`/`--binning`, `columns = (offset, column bin)`:
/// `(c − offset − (bin − 1)/2) / bin`.
pub fn scan_column(columns: (usize, usize), c: f64) -> f64 {
    let (offset, bin) = (columns.0 as f64, columns.1 as f64);
    (c - offset - (bin - 1.0) / 2.0) / bin
}

/// Everything the user said about the geometry.
#[derive(Clone, Debug, Default)]
pub struct GeometrySpec {
    /// Parallel or cone beam.
    pub kind: GeometryKind,
    /// `--center`: parallel beam only.
    pub center: Option<CenterArg>,
    /// `--center-row`: with `--center auto` only.
    pub center_row: Option<usize>,
    /// `--center-range a:b` (detector pixels): where `--center auto`
    /// searches (default ±50 px around the middle; with
    /// `--half-acquisition` the whole detector).
    pub center_range: Option<(f32, f32)>,
    /// `--half-acquisition`: a 360° scan with the axis near one edge,
    /// stitched into a 180° scan of about twice the width (parallel beam).
    pub half_acquisition: bool,
    /// `--slices a:b` (either end may be open): parallel beam only.
    pub slices: Option<(Option<usize>, Option<usize>)>,
    /// The cone-beam options.
    pub cone: ConeSpec,
}

impl GeometrySpec {
    /// The detector rows to reconstruct (`--slices`, default all) of a
    /// detector of `n_rows` rows.
    pub fn rows(&self, n_rows: usize) -> Result<Range<usize>> {
        let Some((a, b)) = self.slices else {
            return Ok(0..n_rows);
        };
        let (a, b) = (a.unwrap_or(0), b.unwrap_or(n_rows));
        if a >= b || b > n_rows {
            bail!("--slices {a}:{b} is empty or outside the detector's {n_rows} rows");
        }
        Ok(a..b)
    }
}

/// The cone-beam options (`--sod`, `--odd`, `--pixel-size`, ...).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConeSpec {
    /// Source to rotation-axis distance.
    pub sod: Option<f64>,
    /// Rotation-axis to detector distance.
    pub odd: Option<f64>,
    /// Detector pixel (width, height).
    pub pixel_size: Option<(f64, f64)>,
    /// Principal point (column, row) in pixels.
    pub principal_point: Option<(f64, f64)>,
    /// Voxel size of the reconstruction.
    pub voxel_size: Option<f32>,
    /// A short scan with Parker weights.
    pub short_scan: bool,
}

impl ConeSpec {
    /// Each cone-beam flag given, by name (for the flags that parallel beam
    /// refuses).
    pub fn given(&self) -> [(bool, &'static str); 6] {
        [
            (self.sod.is_some(), "--sod"),
            (self.odd.is_some(), "--odd"),
            (self.pixel_size.is_some(), "--pixel-size"),
            (self.principal_point.is_some(), "--principal-point"),
            (self.voxel_size.is_some(), "--voxel-size"),
            (self.short_scan, "--short-scan"),
        ]
    }

    /// The geometry for `angles` and a detector of `n_rows × n_cols`.
    pub fn geometry(&self, angles: Vec<f32>, n_rows: usize, n_cols: usize) -> Result<ConeGeometry> {
        let sod = self.sod.context("--geometry cone needs --sod")?;
        let odd = self.odd.context("--geometry cone needs --odd")?;
        let (pu, pv) = self
            .pixel_size
            .context("--geometry cone needs --pixel-size")?;
        let mut g = ConeGeometry::new(angles, sod, odd, n_rows, n_cols, pu, pv)?;
        if let Some((c, r)) = self.principal_point {
            g = g.with_principal_point(c, r)?;
        }
        Ok(g)
    }

    /// The reconstruction volume: `nx = ny = n_cols`, `nz = n_rows` voxels of
    /// --voxel-size or the largest that fits.
    pub fn volume(&self, g: &ConeGeometry) -> Result<ConeVolume> {
        let (n, nz) = (g.n_cols(), g.n_rows());
        let v = match self.voxel_size {
            Some(s) => ConeVolume::new(n, n, nz, s)?,
            None => g.fitting_volume(n, n, nz)?,
        };
        g.check_volume(&v)?;
        Ok(v)
    }

    /// The scan mode: short with `--short-scan`, else decided from the angles.
    pub fn scan(&self) -> ScanMode {
        if self.short_scan {
            ScanMode::Short
        } else {
            ScanMode::Auto
        }
    }

    /// Angles of a cone-beam scan that does not say: 360° (end excluded)
    /// or, with `--short-scan`, π + the fan angle with both ends.
    pub fn default_angles(&self, n: usize, n_rows: usize, n_cols: usize) -> Result<Vec<f32>> {
        if self.short_scan {
            // The range needs the fan angle, which does not depend on angles.
            let probe = self.geometry(vec![0.0, 1.0], n_rows, n_cols)?;
            return Ok(uniform_angles_inclusive(n, probe.short_scan_range()));
        }
        Ok(uniform_angles(n, 2.0 * std::f32::consts::PI))
    }
}
