//! `tomors recon`: filtered back projection of projections from a file.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ndarray::{Array1, ArrayD, Axis};
use tomors_core::fbp::{check_finite, projections_to_sinograms};
use tomors_core::geometry::uniform_angles;
use tomors_core::{ParallelGeometry, SliceGrid};

use super::FilterArgs;
use crate::backend_select::{make_backend, BackendArgs};
use crate::output::check_target;
use crate::progress;

/// Unit of angles read from a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AngleUnit {
    /// Radians.
    Rad,
    /// Degrees.
    Deg,
}

/// Element type of a raw file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RawDtype {
    /// Unsigned 8-bit.
    U8,
    /// Unsigned 16-bit.
    U16,
    /// Unsigned 32-bit.
    U32,
    /// Signed 16-bit.
    I16,
    /// Signed 32-bit.
    I32,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

/// Byte order of a raw file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Endian {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

/// Arguments of `tomors recon`.
#[derive(clap::Args, Debug)]
pub struct ReconArgs {
    /// Projections: an HDF5 file (DXchange or NeXus NXtomo, with flats and
    /// darks), a TIFF stack (directory, glob such as 'proj_*.tif', or
    /// multi-page file), an .npy file [angle][row][col] (or [angle][col]),
    /// or raw with --raw-shape.
    pub input: PathBuf,
    /// Output: a .npy file, an .h5 file (dataset /volume with the geometry as
    /// attributes), or a directory that receives a TIFF per slice.
    #[arg(long)]
    pub out: PathBuf,
    /// Projection angles as a 1-D .npy file (radians unless --angles-unit deg).
    #[arg(long, conflicts_with = "angle_range")]
    pub angles: Option<PathBuf>,
    /// Unit of the values in --angles (default rad), or of the angles stored
    /// in an HDF5 input (default: its `units` attribute, else degrees).
    #[arg(long, value_enum)]
    pub angles_unit: Option<AngleUnit>,
    /// Without --angles: angles evenly spaced over this range in degrees, end excluded.
    #[arg(long)]
    pub angle_range: Option<f32>,
    /// Rotation-axis position in detector pixels from the left edge of a row
    /// (bin k centred at k; default: the detector centre (n−1)/2), or
    /// `auto` to find it (Vo et al. 2014 Fourier metric on a few rows).
    #[arg(long, allow_hyphen_values = true)]
    pub center: Option<CenterArg>,
    /// With --center auto: the detector row to search on (default: up to 3
    /// rows spread over the reconstructed ones, median taken).
    #[arg(long)]
    pub center_row: Option<usize>,
    /// Detector rows (slices) to reconstruct, as a:b (end excluded).
    #[arg(long)]
    pub slices: Option<String>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Slices per slab handed to the backend.
    #[arg(long, default_value_t = 32)]
    pub slab: usize,
    /// Shape of a raw input file: angles,rows,cols.
    #[arg(long)]
    pub raw_shape: Option<String>,
    /// Element type of a raw input file.
    #[arg(long, value_enum, default_value_t = RawDtype::F32)]
    pub raw_dtype: RawDtype,
    /// Byte order of a raw input file.
    #[arg(long, value_enum, default_value_t = Endian::Little)]
    pub raw_endian: Endian,
    /// Bytes to skip at the start of a raw input file.
    #[arg(long, default_value_t = 0)]
    pub raw_offset: u64,
    /// Replace an existing output.
    #[arg(long)]
    pub overwrite: bool,
    #[command(flatten)]
    pub io: super::info::InputArgs,
    #[command(flatten)]
    pub pre: super::info::PreprocessArgs,
    /// Memory budget for streaming slab by slab (read → reconstruct →
    /// write), e.g. 512M or 4G (default 2G). Real-data inputs (HDF5, TIFF)
    /// always stream; .npy/raw stream when this is given.
    #[arg(long)]
    pub memory: Option<String>,
    /// Sample type of a TIFF-stack output: 32 (float), 16 or 8 (unsigned,
    /// scaled linearly from --tiff-range).
    #[arg(long, default_value_t = 32)]
    pub tiff_bits: u32,
    /// Values mapped to 0 and to the largest integer of a 16/8-bit TIFF
    /// output, as lo:hi.
    #[arg(long, allow_hyphen_values = true)]
    pub tiff_range: Option<String>,
    #[command(flatten)]
    pub backend: BackendArgs,
    #[command(flatten)]
    pub cone: super::cone::ConeArgs,
    #[command(flatten)]
    pub iterative: super::iterative::IterativeArgs,
}

/// Runs `tomors recon`.
pub fn run(args: ReconArgs) -> Result<()> {
    #[cfg(feature = "mpi")]
    if tomors_mpi::is_distributed() {
        return crate::mpi_recon::run(&args);
    }
    if args.iterative.is_iterative() && args.cone.is_cone() {
        return super::cone_iterative::run_recon(&args);
    }
    if args.iterative.is_iterative() {
        return super::iterative::run_recon(&args);
    }
    if args.cone.is_cone() {
        return super::cone::run_recon(&args);
    }
    run_streaming(args)
}

/// Parses `a:b` (either side may be empty) into a row range.
pub(crate) fn parse_rows(spec: Option<&str>, n_rows: usize) -> Result<Range<usize>> {
    let Some(spec) = spec else {
        return Ok(0..n_rows);
    };
    let (a, b) = spec
        .split_once(':')
        .with_context(|| format!("--slices '{spec}': expected a:b"))?;
    let parse = |s: &str, default: usize| -> Result<usize> {
        if s.trim().is_empty() {
            Ok(default)
        } else {
            s.trim()
                .parse()
                .with_context(|| format!("--slices '{spec}': '{s}' is not a row index"))
        }
    };
    let (a, b) = (parse(a, 0)?, parse(b, n_rows)?);
    if a >= b || b > n_rows {
        bail!("--slices {a}:{b} is empty or outside the detector's {n_rows} rows");
    }
    Ok(a..b)
}

/// Reads a `.npy` file of any common numeric type as f32.
pub fn read_npy_f32(path: &Path) -> Result<ArrayD<f32>> {
    use ndarray_npy::ReadNpyExt;
    let open =
        || std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()));
    macro_rules! try_type {
        ($t:ty) => {
            if let Ok(a) = ArrayD::<$t>::read_npy(std::io::BufReader::new(open()?)) {
                return Ok(a.mapv(|v| v as f32));
            }
        };
    }
    // The common case first; its error is the one reported.
    let first = ArrayD::<f32>::read_npy(std::io::BufReader::new(open()?));
    let err = match first {
        Ok(a) => return Ok(a),
        Err(e) => e,
    };
    try_type!(f64);
    try_type!(u16);
    try_type!(u8);
    try_type!(i16);
    try_type!(i32);
    try_type!(u32);
    bail!("{}: not a readable .npy array ({err})", path.display())
}

/// The projection angles (radians) from `--angles` (a 1-D `.npy`, unit
/// `--angles-unit`) or, without it, evenly over `--angle-range` degrees.
pub(crate) fn load_angles(args: &ReconArgs, n_angles: usize) -> Result<Vec<f32>> {
    let Some(path) = &args.angles else {
        let range = args.angle_range.unwrap_or(180.0);
        if !(range.is_finite() && range > 0.0) {
            bail!("--angle-range {range} must be positive");
        }
        return Ok(uniform_angles(n_angles, range.to_radians()));
    };
    read_angles_file(path, n_angles, args.angles_unit.unwrap_or(AngleUnit::Rad))
}

/// Reads `n_angles` finite angles from a 1-D `.npy` file, in radians.
pub(crate) fn read_angles_file(path: &Path, n_angles: usize, unit: AngleUnit) -> Result<Vec<f32>> {
    let values = read_npy_f32(path)?;
    if values.ndim() != 1 {
        bail!(
            "{}: angles must be a 1-D array, found shape {:?}",
            path.display(),
            values.shape()
        );
    }
    let values: Array1<f32> = values.into_dimensionality()?;
    if values.len() != n_angles {
        bail!(
            "{}: {} angles for {} projections",
            path.display(),
            values.len(),
            n_angles
        );
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        bail!("{}: angle {v} is not finite", path.display());
    }
    Ok(match unit {
        AngleUnit::Rad => values.to_vec(),
        AngleUnit::Deg => values.iter().map(|d| d.to_radians()).collect(),
    })
}

/// `--center`: a position in detector pixels, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CenterArg {
    /// Find the centre (see [`super::center::auto_center`]).
    Auto,
    /// The rotation-axis position in bin-index units.
    At(f32),
}

impl std::str::FromStr for CenterArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        s.trim()
            .parse::<f32>()
            .ok()
            .filter(|c| c.is_finite())
            .map(Self::At)
            .ok_or_else(|| format!("'{s}' is neither a position in pixels nor 'auto'"))
    }
}

/// Default memory budget of the streaming pipeline.
pub(crate) const DEFAULT_MEMORY: &str = "2G";

pub(crate) fn raw_spec(args: &ReconArgs) -> Result<Option<tomors_io::source::RawSpec>> {
    use tomors_io::source::{Endian as E, RawDtype as D, RawSpec};
    let Some(shape) = &args.raw_shape else {
        return Ok(None);
    };
    let dims: Vec<usize> = shape
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--raw-shape '{shape}': expected angles,rows,cols"))?;
    let [a, r, c] = dims[..] else {
        bail!("--raw-shape '{shape}': expected three sizes angles,rows,cols");
    };
    Ok(Some(RawSpec {
        shape: [a, r, c],
        dtype: match args.raw_dtype {
            RawDtype::U8 => D::U8,
            RawDtype::U16 => D::U16,
            RawDtype::U32 => D::U32,
            RawDtype::I16 => D::I16,
            RawDtype::I32 => D::I32,
            RawDtype::F32 => D::F32,
            RawDtype::F64 => D::F64,
        },
        endian: match args.raw_endian {
            Endian::Little => E::Little,
            Endian::Big => E::Big,
        },
        offset: args.raw_offset,
    }))
}

pub(crate) fn output_format(args: &ReconArgs) -> Result<tomors_io::VolumeFormat> {
    use tomors_io::tiffio::TiffDepth;
    use tomors_io::VolumeFormat;
    let format = VolumeFormat::from_path(&args.out)?;
    let range = || -> Result<(f32, f32)> {
        let spec = args
            .tiff_range
            .as_deref()
            .with_context(|| format!("--tiff-bits {} needs --tiff-range lo:hi", args.tiff_bits))?;
        let (a, b) = spec
            .split_once(':')
            .with_context(|| format!("--tiff-range '{spec}': expected lo:hi"))?;
        let lo: f32 = a
            .trim()
            .parse()
            .with_context(|| format!("--tiff-range '{spec}'"))?;
        let hi: f32 = b
            .trim()
            .parse()
            .with_context(|| format!("--tiff-range '{spec}'"))?;
        Ok((lo, hi))
    };
    Ok(match (format, args.tiff_bits) {
        (VolumeFormat::TiffStack(_), 32) => VolumeFormat::TiffStack(TiffDepth::F32),
        (VolumeFormat::TiffStack(_), 16) => {
            let (lo, hi) = range()?;
            VolumeFormat::TiffStack(TiffDepth::U16 { lo, hi })
        }
        (VolumeFormat::TiffStack(_), 8) => {
            let (lo, hi) = range()?;
            VolumeFormat::TiffStack(TiffDepth::U8 { lo, hi })
        }
        (VolumeFormat::TiffStack(_), b) => bail!("--tiff-bits {b}: use 32, 16 or 8"),
        (f, 32) => f,
        (_, b) => bail!("--tiff-bits {b} applies to TIFF-stack outputs only"),
    })
}

/// The streaming pipeline: open with the right reader, preprocess, find the
/// centre if asked, and reconstruct slab by slab within the memory budget.
fn run_streaming(args: ReconArgs) -> Result<()> {
    use tomors_io::stream::{parse_bytes, stream_slabs, MemoryModel};
    use tomors_io::writer::create_writer_with;
    use tomors_io::{CenterOptions, VolumeMeta};

    let input = &args.input;
    check_target(&args.out, args.overwrite)?;
    let format = output_format(&args)?;
    let budget = parse_bytes(args.memory.as_deref().unwrap_or(DEFAULT_MEMORY))
        .map_err(|e| anyhow::anyhow!("--memory: {e}"))?;
    let pre = args.pre.preprocess()?;
    let mut opts = args.io.open_options();
    opts.raw = raw_spec(&args)?;
    opts.angles_unit = args
        .angles
        .is_none()
        .then_some(args.angles_unit)
        .flatten()
        .map(|u| match u {
            AngleUnit::Rad => tomors_io::AngleUnit::Radians,
            AngleUnit::Deg => tomors_io::AngleUnit::Degrees,
        });
    if let Some(r) = args.angle_range {
        if !(r.is_finite() && r > 0.0) {
            bail!("--angle-range {r} must be positive");
        }
        opts.angle_range = Some((r as f64).to_radians());
    }
    let source = tomors_io::open(input, &opts)?;
    let [n_angles, n_rows, n_bins] = source.shape();
    let angles = if args.angles.is_some() {
        load_angles(&args, n_angles)?
    } else {
        source.angles().to_vec()
    };
    let rows = parse_rows(args.slices.as_deref(), n_rows)?;
    let center = match args.center {
        None => None,
        Some(CenterArg::At(c)) => Some(c),
        Some(CenterArg::Auto) => {
            let search = super::center::search_rows(&rows, args.center_row);
            let found = super::center::auto_center(
                source.as_ref(),
                &angles,
                &pre,
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
    };
    let mut geometry =
        ParallelGeometry::new(angles, n_bins).with_context(|| input.display().to_string())?;
    if let Some(c) = center {
        geometry = geometry
            .with_center(c)
            .with_context(|| input.display().to_string())?;
    }
    let grid = SliceGrid::for_geometry(&geometry);
    let options = args.filter.fbp_options(args.slab);
    options.filter.validate()?;
    let per_slab = MemoryModel::for_source(source.as_ref(), grid.len())
        .rows_per_slab(budget)
        .map_err(|e| {
            let why = e.to_string();
            let why = why.trim_start_matches("invalid parameter: ");
            anyhow::anyhow!("{}: --memory: {why}", input.display())
        })?
        .min(rows.len());
    let per_slab = tomors_io::stream::align_to_chunks(per_slab, source.row_chunk());
    let backend = make_backend(&args.backend)?;
    let (lo, hi) = geometry
        .angles()
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &a| {
            (l.min(a), h.max(a))
        });
    let meta = VolumeMeta::default()
        .text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")))
        .text("input", &input.display().to_string())
        .text("reader", source.format())
        .int("first_detector_row", rows.start as i64)
        .int("n_angles", n_angles as i64)
        .float("angle_min_deg", f64::from(lo).to_degrees())
        .float("angle_max_deg", f64::from(hi).to_degrees())
        .float("center", f64::from(geometry.center(0)))
        .float("bin_width", f64::from(geometry.bin_width()))
        .float("pixel_size", f64::from(grid.pixel_size))
        .text("filter", &format!("{:?}", options.filter))
        .text("interpolation", &options.interpolation.to_string())
        .text("preprocess", &format!("{pre:?}"))
        .text("layout", "[z][y][x], z = detector row - first_detector_row");
    let writer = create_writer_with(
        &args.out,
        format,
        [rows.len(), grid.ny, grid.nx],
        &meta,
        args.overwrite,
    )?;
    let n_slabs = rows.len().div_ceil(per_slab);
    tracing::info!(
        "reconstructing rows {}..{} of {} ({}: {} angles × {} bins, centre {:.2}) on {} in {} slab(s) of ≤ {} rows (memory budget {} MiB)",
        rows.start,
        rows.end,
        input.display(),
        source.format(),
        n_angles,
        n_bins,
        geometry.center(0),
        backend.name(),
        n_slabs,
        per_slab,
        budget >> 20
    );
    let bar = progress::bar(n_slabs as u64, "reconstructing", "slabs");
    let t = Instant::now();
    stream_slabs(
        source.as_ref(),
        &pre,
        rows.clone(),
        per_slab,
        writer,
        |_, projections| {
            check_finite(projections.view(), "the preprocessed projections").map_err(|e| {
                tomors_io::IoError::Format {
                    path: input.clone(),
                    message: e.to_string(),
                }
            })?;
            let n = projections.len_of(Axis(1));
            let sinograms = projections_to_sinograms(projections.view(), 0..n)?;
            drop(projections);
            Ok(tomors_core::fbp::fbp_sinograms(
                backend.as_ref(),
                sinograms.view(),
                &geometry,
                &grid,
                &options,
            )?)
        },
        |done, _| bar.set_position(done as u64),
    )?;
    bar.finish_and_clear();
    let seconds = t.elapsed().as_secs_f64();
    let updates = (grid.len() * rows.len() * n_angles) as f64;
    tracing::info!(
        "reconstructed {} slices in {seconds:.2} s ({:.3} GU/s including reading and writing)",
        rows.len(),
        updates / seconds / 1e9
    );
    println!(
        "wrote {} ([z][y][x] = [{}, {}, {}], centre {:.2})",
        args.out.display(),
        rows.len(),
        grid.ny,
        grid.nx,
        geometry.center(0)
    );
    Ok(())
}
