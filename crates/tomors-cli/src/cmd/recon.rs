//! `tomors recon`: filtered back projection of projections from a file.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ndarray::{Array1, Array3, ArrayD, Axis, Ix3};
use tomors_core::fbp::{check_finite, fbp_sinograms_with_progress, projections_to_sinograms};
use tomors_core::geometry::uniform_angles;
use tomors_core::{ParallelGeometry, SliceGrid};

use super::FilterArgs;
use crate::backend_select::{make_backend, BackendArgs};
use crate::output::{check_target, write_volume};
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

impl RawDtype {
    fn size(self) -> usize {
        match self {
            Self::U8 => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }
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
    /// Projections [angle][row][col] (or [angle][col]) as .npy, or raw with --raw-shape.
    pub input: PathBuf,
    /// Output: a .npy file, or a directory that receives a float32 TIFF per slice.
    #[arg(long)]
    pub out: PathBuf,
    /// Projection angles as a 1-D .npy file (radians unless --angles-unit deg).
    #[arg(long, conflicts_with = "angle_range")]
    pub angles: Option<PathBuf>,
    /// Unit of the values in --angles.
    #[arg(long, value_enum, default_value_t = AngleUnit::Rad)]
    pub angles_unit: AngleUnit,
    /// Without --angles: angles evenly spaced over this range in degrees, end excluded.
    #[arg(long)]
    pub angle_range: Option<f32>,
    /// Rotation-axis position in detector pixels from the left edge of a row
    /// (bin k centred at k; default: the detector centre (n−1)/2).
    #[arg(long)]
    pub center: Option<f32>,
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
    pub backend: BackendArgs,
}

/// Runs `tomors recon`.
pub fn run(args: ReconArgs) -> Result<()> {
    let input = &args.input;
    // Everything is checked before any work, and before anything is written.
    check_target(&args.out, args.overwrite)?;
    let projections = load_projections(&args)?;
    check_finite(projections.view(), "the projections")
        .with_context(|| input.display().to_string())?;
    let (n_angles, n_rows, n_bins) = projections.dim();
    let angles = load_angles(&args, n_angles)?;
    let mut geometry =
        ParallelGeometry::new(angles, n_bins).with_context(|| input.display().to_string())?;
    if let Some(c) = args.center {
        geometry = geometry
            .with_center(c)
            .with_context(|| input.display().to_string())?;
    }
    let rows = parse_rows(args.slices.as_deref(), n_rows)?;
    let options = args.filter.fbp_options(args.slab);
    options.filter.validate()?;
    let grid = SliceGrid::for_geometry(&geometry);
    let backend = make_backend(&args.backend)?;
    tracing::info!(
        "reconstructing rows {}..{} of {} ({} angles × {} bins) on {}",
        rows.start,
        rows.end,
        input.display(),
        n_angles,
        n_bins,
        backend.name()
    );
    let sinograms = projections_to_sinograms(projections.view(), rows.clone())?;
    drop(projections);
    let bar = progress::bar(rows.len() as u64, "reconstructing", "slices");
    let t = Instant::now();
    let volume = fbp_sinograms_with_progress(
        backend.as_ref(),
        sinograms.view(),
        &geometry,
        &grid,
        &options,
        &mut |done, _| {
            bar.set_position(done as u64);
            true
        },
    )?;
    bar.finish_and_clear();
    let seconds = t.elapsed().as_secs_f64();
    let updates = (grid.len() * rows.len() * n_angles) as f64;
    tracing::info!(
        "reconstructed {} slices in {seconds:.2} s ({:.2} GU/s)",
        rows.len(),
        updates / seconds / 1e9
    );
    write_volume(&args.out, volume.view(), args.overwrite)?;
    println!(
        "wrote {} ([z][y][x] = {:?})",
        args.out.display(),
        volume.dim()
    );
    Ok(())
}

/// Parses `a:b` (either side may be empty) into a row range.
fn parse_rows(spec: Option<&str>, n_rows: usize) -> Result<Range<usize>> {
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

fn load_projections(args: &ReconArgs) -> Result<Array3<f32>> {
    let path = &args.input;
    let data = match &args.raw_shape {
        Some(shape) => read_raw(
            path,
            shape,
            args.raw_dtype,
            args.raw_endian,
            args.raw_offset,
        )?,
        None => read_npy_f32(path)?,
    };
    let data = match data.ndim() {
        2 => data.insert_axis(Axis(1)),
        3 => data,
        d => bail!(
            "{}: projections must be 2-D [angle][col] or 3-D [angle][row][col], not {d}-D",
            path.display()
        ),
    };
    let data = data
        .into_dimensionality::<Ix3>()
        .with_context(|| format!("{}: unexpected shape", path.display()))?;
    Ok(data)
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

fn read_raw(
    path: &Path,
    shape: &str,
    dtype: RawDtype,
    endian: Endian,
    offset: u64,
) -> Result<ArrayD<f32>> {
    let dims: Vec<usize> = shape
        .split(',')
        .map(|s| s.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--raw-shape '{shape}': expected angles,rows,cols"))?;
    if dims.len() != 3 || dims.contains(&0) {
        bail!("--raw-shape '{shape}': expected three positive sizes angles,rows,cols");
    }
    let count: usize = dims.iter().product();
    let bytes = std::fs::read(path).with_context(|| format!("{}: cannot read", path.display()))?;
    let need = offset as usize + count * dtype.size();
    if bytes.len() != need {
        bail!(
            "{}: holds {} bytes, but offset {offset} + shape {shape} of {dtype:?} needs {need}",
            path.display(),
            bytes.len()
        );
    }
    let body = &bytes[offset as usize..];
    let values: Vec<f32> = body
        .chunks_exact(dtype.size())
        .map(|c| decode(c, dtype, endian))
        .collect();
    Ok(ArrayD::from_shape_vec(dims, values)?)
}

fn decode(c: &[u8], dtype: RawDtype, endian: Endian) -> f32 {
    macro_rules! num {
        ($t:ty, $n:expr) => {{
            let mut b = [0u8; $n];
            b.copy_from_slice(c);
            match endian {
                Endian::Little => <$t>::from_le_bytes(b),
                Endian::Big => <$t>::from_be_bytes(b),
            }
        }};
    }
    match dtype {
        RawDtype::U8 => c[0] as f32,
        RawDtype::U16 => num!(u16, 2) as f32,
        RawDtype::U32 => num!(u32, 4) as f32,
        RawDtype::I16 => num!(i16, 2) as f32,
        RawDtype::I32 => num!(i32, 4) as f32,
        RawDtype::F32 => num!(f32, 4),
        RawDtype::F64 => num!(f64, 8) as f32,
    }
}

fn load_angles(args: &ReconArgs, n_angles: usize) -> Result<Vec<f32>> {
    let Some(path) = &args.angles else {
        let range = args.angle_range.unwrap_or(180.0);
        if !(range.is_finite() && range > 0.0) {
            bail!("--angle-range {range} must be positive");
        }
        return Ok(uniform_angles(n_angles, range.to_radians()));
    };
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
            "{}: {} angles for {} projections in {}",
            path.display(),
            values.len(),
            n_angles,
            args.input.display()
        );
    }
    if let Some(v) = values.iter().find(|v| !v.is_finite()) {
        bail!("{}: angle {v} is not finite", path.display());
    }
    Ok(match args.angles_unit {
        AngleUnit::Rad => values.to_vec(),
        AngleUnit::Deg => values.iter().map(|d| d.to_radians()).collect(),
    })
}
