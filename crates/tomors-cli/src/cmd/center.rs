//! `tomors center FILE`: finds the rotation centre (Vo et al. 2014 Fourier
//! metric on a few detector rows), prints it with a quality figure, and
//! writes a PNG strip of trial reconstructions around it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use ndarray::Axis;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::CenterOptions;

use super::args::{InputArgs, PreprocessArgs};
use crate::job::center::{auto_center, search_rows};
use crate::job::input::AngleUnit;

/// Arguments of `tomors center`.
#[derive(clap::Args, Debug)]
pub struct CenterArgs {
    /// An HDF5 file (DXchange, NXtomo), a TIFF stack or an .npy file.
    pub input: PathBuf,
    #[command(flatten)]
    pub io: InputArgs,
    #[command(flatten)]
    pub pre: PreprocessArgs,
    /// Unit of the angles stored in an HDF5 file (default: its `units`
    /// attribute, else degrees).
    #[arg(long, value_enum)]
    pub angles_unit: Option<AngleUnit>,
    /// Without stored angles: the scan covers this range in degrees, end excluded.
    #[arg(long, default_value_t = 180.0)]
    pub angle_range: f64,
    /// Detector row to search on (default: up to 3 rows spread over the detector; the median is taken).
    #[arg(long)]
    pub row: Option<usize>,
    /// Search from the detector centre + SMIN pixels.
    #[arg(long, default_value_t = -50.0, allow_hyphen_values = true)]
    pub smin: f32,
    /// Search up to the detector centre + SMAX pixels.
    #[arg(long, default_value_t = 50.0, allow_hyphen_values = true)]
    pub smax: f32,
    /// PNG strip of trial reconstructions (default: <input stem>.center.png).
    #[arg(long)]
    pub png: Option<PathBuf>,
    /// Spacing of the trial centres in the strip, pixels.
    #[arg(long, default_value_t = 1.0)]
    pub strip_step: f32,
    /// Trial reconstructions on each side of the found centre.
    #[arg(long, default_value_t = 3)]
    pub strip_half: usize,
}

/// The largest `--strip-half` (41 trial reconstructions in the strip).
pub const MAX_STRIP_HALF: usize = 20;

/// Runs `tomors center`.
pub fn run(args: CenterArgs) -> Result<()> {
    if args.strip_half > MAX_STRIP_HALF {
        bail!(
            "--strip-half {}: at most {MAX_STRIP_HALF} trial reconstructions on each side",
            args.strip_half
        );
    }
    if !(args.strip_step.is_finite() && args.strip_step > 0.0) {
        bail!("--strip-step {} must be positive", args.strip_step);
    }
    let mut opts = args.io.open_options();
    opts.angles_unit = args.angles_unit.map(AngleUnit::to_io);
    opts.angle_range = Some(args.angle_range.to_radians());
    let pre = args.pre.spec().preprocess()?;
    let source = tomors_io::open(&args.input, &opts)?;
    let [_, n_rows, n_bins] = source.shape();
    let angles = source.angles().to_vec();
    let rows = search_rows(&(0..n_rows), args.row);
    let options = CenterOptions {
        smin: args.smin,
        smax: args.smax,
        ..Default::default()
    };
    let found = auto_center(source.as_ref(), &angles, &pre, &rows, &options)?;
    println!(
        "centre {:.2} (quality {:.3}; rows {})",
        found.center,
        found.quality,
        found
            .rows
            .iter()
            .map(|(r, c, q)| format!("{r}: {c:.2} q {q:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if found.quality < 0.05 {
        tracing::warn!("the metric has no clear minimum: check the strip by eye");
    }
    // The strip: trial reconstructions of the middle searched row.
    let png = args.png.clone().unwrap_or_else(|| default_png(&args.input));
    let row = rows[rows.len() / 2];
    let p = source.read_rows(row..row + 1, &pre)?;
    let sino = projections_to_sinograms(p.view(), 0..1)?;
    let backend = CpuBackend::new();
    let mut images = Vec::new();
    let mut labels = Vec::new();
    let h = args.strip_half as i64;
    for k in -h..=h {
        let c = found.center + k as f32 * args.strip_step;
        if c < 0.0 || c > n_bins as f32 - 1.0 {
            continue;
        }
        let g = ParallelGeometry::new(angles.clone(), n_bins)?.with_center(c)?;
        let grid = SliceGrid::for_geometry(&g);
        let rec = fbp_sinograms(&backend, sino.view(), &g, &grid, &FbpOptions::default())?;
        images.push(rec.index_axis(Axis(0), 0).to_owned());
        labels.push(format!("{c:.2}"));
    }
    let mid = &images[images.len() / 2];
    let range = tomors_io::preview::percentiles(mid.view(), 1.0, 99.5);
    let views: Vec<_> = images.iter().map(|i| i.view()).collect();
    tomors_io::preview::write_gray_row(&png, &views, range)?;
    println!(
        "wrote {} (row {row}; left to right: centres {})",
        png.display(),
        labels.join(", ")
    );
    Ok(())
}

fn default_png(input: &Path) -> PathBuf {
    let stem = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.contains(['*', '?']))
        .unwrap_or_else(|| "tomors".into());
    PathBuf::from(format!("{stem}.center.png"))
}
