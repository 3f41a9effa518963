//! The [`ProjectionSource`] abstraction and [`open`], which picks a reader
//! for a path.
//!
//! A source knows the shape of the scan (`angles × rows × cols`), the
//! projection angles (radians) and how many flats and darks it has, and reads
//! a *slab of detector rows* — projections, flats and darks restricted to
//! those rows — without loading the whole file. [`ProjectionSource::read_rows`]
//! returns the slab preprocessed (flat/dark normalised, −log, ...) as asked by
//! a [`Preprocess`].

use std::ops::Range;
use std::path::{Path, PathBuf};

use ndarray::Array3;

use crate::error::{format_err, IoError, Result};
use crate::preprocess::Preprocess;

/// A group of flat or dark frames taken together, restricted to a slab of
/// rows: `frames` is `[frame][row][col]`.
#[derive(Clone, Debug)]
pub struct FrameGroup {
    /// Where in the scan the group was taken, as a projection index: 0 for
    /// frames taken before the first projection, `n` for frames taken after
    /// projection `n − 1` (so after the scan when `n` is the number of
    /// projections). Flats of several groups are interpolated linearly over
    /// the projection index between their positions.
    pub position: f64,
    /// The frames of the group, `[frame][row][col]`.
    pub frames: Array3<f32>,
}

/// The raw content of a slab of detector rows.
#[derive(Clone, Debug)]
pub struct RawSlab {
    /// The detector rows of the slab.
    pub rows: Range<usize>,
    /// Projections `[angle][row][col]`, raw detector values.
    pub projections: Array3<f32>,
    /// Flat (white) field groups, in scan order (possibly empty).
    pub flats: Vec<FrameGroup>,
    /// Dark field groups, in scan order (possibly empty).
    pub darks: Vec<FrameGroup>,
}

/// The accessors of [`ProjectionSource`] for a source that wraps another
/// (`inner`) and has its own `shape` and `angles`: the path, the format and
/// the flat and dark counts are the inner source's.
macro_rules! wrapped_source_accessors {
    () => {
        fn path(&self) -> &Path {
            self.inner.path()
        }

        fn format(&self) -> &'static str {
            self.inner.format()
        }

        fn shape(&self) -> [usize; 3] {
            self.shape
        }

        fn angles(&self) -> &[f32] {
            &self.angles
        }

        fn n_flats(&self) -> usize {
            self.inner.n_flats()
        }

        fn n_darks(&self) -> usize {
            self.inner.n_darks()
        }
    };
}

pub(crate) use wrapped_source_accessors;

/// A scan on disk that can be read a slab of detector rows at a time.
pub trait ProjectionSource: Send {
    /// The file (or directory, or first file of a stack) read.
    fn path(&self) -> &Path;

    /// Name of the reader ("DXchange HDF5", "NeXus NXtomo HDF5", "TIFF stack", ...).
    fn format(&self) -> &'static str;

    /// `[angles, rows, cols]` of the projections.
    fn shape(&self) -> [usize; 3];

    /// Projection angles in radians, one per projection.
    fn angles(&self) -> &[f32];

    /// Number of flat (white) frames.
    fn n_flats(&self) -> usize;

    /// Number of dark frames.
    fn n_darks(&self) -> usize;

    /// Reads detector rows `rows` of every projection, flat and dark.
    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab>;

    /// Rows per storage chunk when the file stores the projections in
    /// chunks of fewer rows than the detector has (chunked HDF5): slabs that
    /// are multiples of it, aligned to it, decompress each chunk once.
    fn row_chunk(&self) -> Option<usize> {
        None
    }

    /// Bytes per detector row that [`Self::read_rows`] holds besides the
    /// slab it returns (a source that transforms the rows it reads, such as
    /// [`crate::half::HalfAcquisitionSource`], holds them as read too);
    /// counted by [`crate::stream::MemoryModel::for_source`].
    fn extra_bytes_per_row(&self) -> usize {
        0
    }

    /// Whether [`Self::read_raw`] gives this source's rows before
    /// preprocessing. A source that transforms its rows after preprocessing
    /// (the stitched half-acquisition source) says `false`, and streams read
    /// it with [`Self::read_rows`] in their reading stage instead.
    fn reads_raw(&self) -> bool {
        true
    }

    /// Bytes of one stored value of the projections (2 for uint16 data,
    /// 4 when unknown), for the read rate of [`crate::stream::StageTimes`].
    fn stored_value_bytes(&self) -> usize {
        4
    }

    /// Bytes of decompressed storage chunks that hold one band of
    /// [`Self::row_chunk`] rows of every frame (projections, flats and darks):
    /// what a chunk cache must hold so that slabs that share chunks
    /// decompress each chunk once. `None` when the storage is not chunked
    /// along the rows or not compressed (nothing is decompressed twice).
    fn row_band_cache_bytes(&self) -> Option<usize> {
        None
    }

    /// Gives the reader a cache of `bytes` for decompressed storage chunks
    /// (see [`Self::row_band_cache_bytes`]); sources without chunks ignore
    /// it. Returns whether a cache was set.
    fn set_chunk_cache(&mut self, bytes: usize) -> Result<bool> {
        let _ = bytes;
        Ok(false)
    }

    /// Reads detector rows `rows` and preprocesses them as `pre` says:
    /// `[angle][row][col]`. Steps that need neighbouring rows (rotation,
    /// phase retrieval) read [`Preprocess::read_range`] and crop. A
    /// non-finite raw value (margin rows included) is an error (see
    /// [`crate::checks`]).
    fn read_rows(&self, rows: Range<usize>, pre: &Preprocess) -> Result<Array3<f32>> {
        let [_, n_rows, n_cols] = self.shape();
        check_rows(self.path(), &rows, n_rows)?;
        let raw = self.read_raw(pre.read_range(&rows, n_rows, n_cols))?;
        crate::checks::check_slab_finite(self.path(), &raw)?;
        pre.apply_within(raw, self.path(), n_rows, rows)
    }
}

/// Checks a row range against the number of rows of a source.
pub(crate) fn check_rows(path: &Path, rows: &Range<usize>, n_rows: usize) -> Result<()> {
    if rows.start >= rows.end || rows.end > n_rows {
        return Err(IoError::Parameter(format!(
            "{}: detector rows {}..{} requested, the detector has rows 0..{}",
            path.display(),
            rows.start,
            rows.end,
            n_rows
        )));
    }
    Ok(())
}

/// Unit of angles stored in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AngleUnit {
    /// Degrees.
    Degrees,
    /// Radians.
    Radians,
}

impl std::str::FromStr for AngleUnit {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "deg" | "degree" | "degrees" | "°" => Ok(Self::Degrees),
            "rad" | "radian" | "radians" => Ok(Self::Radians),
            _ => Err(format!("unknown angle unit '{s}' (use deg or rad)")),
        }
    }
}

/// Element type of raw binary files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawDtype {
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
}

impl RawDtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::U8 | Self::I8 => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }
}

impl std::str::FromStr for RawDtype {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "u8" | "uint8" => Self::U8,
            "u16" | "uint16" => Self::U16,
            "u32" | "uint32" => Self::U32,
            "i8" | "int8" => Self::I8,
            "i16" | "int16" => Self::I16,
            "i32" | "int32" => Self::I32,
            "f32" | "float32" | "float" => Self::F32,
            "f64" | "float64" | "double" => Self::F64,
            _ => {
                return Err(format!(
                    "unknown data type '{s}' (use u8, u16, u32, i8, i16, i32, f32 or f64)"
                ))
            }
        })
    }
}

/// Byte order of raw binary files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Endian {
    /// Little endian (x86, ARM).
    #[default]
    Little,
    /// Big endian.
    Big,
}

impl std::str::FromStr for Endian {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "little" | "le" | "<" => Ok(Self::Little),
            "big" | "be" | ">" => Ok(Self::Big),
            _ => Err(format!("unknown byte order '{s}' (use little or big)")),
        }
    }
}

/// Layout of a raw binary file of projections `[angle][row][col]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RawSpec {
    /// `[angles, rows, cols]`.
    pub shape: [usize; 3],
    /// Element type.
    pub dtype: RawDtype,
    /// Byte order.
    pub endian: Endian,
    /// Bytes to skip at the start of the file (a header).
    pub offset: u64,
    /// Accept a file longer than `offset + shape · element size` (the
    /// surplus at the end is ignored). Off: the sizes must match exactly, so
    /// a wrong shape or data type is caught.
    pub allow_trailing: bool,
}

/// How to open a scan: overrides for HDF5 paths, separate flat/dark stacks,
/// layouts of raw files and angles of formats that store none.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    /// HDF5: dataset of the frames (NXtomo) or projections (DXchange).
    pub data_path: Option<String>,
    /// NXtomo: dataset of the image keys (0 projection, 1 flat, 2 dark).
    pub image_key_path: Option<String>,
    /// HDF5: dataset of the rotation angles.
    pub angles_path: Option<String>,
    /// Unit of the stored angles when the file does not say (or says wrong).
    pub angles_unit: Option<AngleUnit>,
    /// Flat fields for TIFF / npy / raw input: a TIFF stack (directory, glob
    /// or multi-page file) or an `.npy` file `[frame][row][col]`.
    pub flats: Option<PathBuf>,
    /// Dark fields, as `flats`.
    pub darks: Option<PathBuf>,
    /// Layout of a raw binary file (required for raw input).
    pub raw: Option<RawSpec>,
    /// Angles of formats that store none (TIFF, npy, raw): the scan covers
    /// `[0, range)` evenly, endpoint excluded. Default: 180° (π).
    pub angle_range: Option<f64>,
    /// Explicit angles (radians) for formats that store none; overrides
    /// `angle_range`.
    pub angles: Option<Vec<f32>>,
}

impl OpenOptions {
    /// Angles for a format that stores none, `n` projections.
    pub(crate) fn default_angles(&self, path: &Path, n: usize) -> Result<Vec<f32>> {
        if let Some(a) = &self.angles {
            if a.len() != n {
                return Err(crate::error::shape_err(
                    path,
                    format!("{} angles given for {} projections", a.len(), n),
                ));
            }
            crate::angles::check_angles(a, AngleUnit::Radians)
                .map_err(|m| crate::error::format_err(path, format!("angles: {m}")))?;
            return Ok(a.clone());
        }
        let range = self.angle_range.unwrap_or(std::f64::consts::PI);
        if !(range.is_finite() && range > 0.0) {
            return Err(IoError::Parameter(format!(
                "angle range {range} must be positive"
            )));
        }
        if range > 4.0 * std::f64::consts::PI + 1e-3 {
            return Err(IoError::Parameter(format!(
                "an angle range of {:.1}° is more than two turns (720°): not a scan",
                range.to_degrees()
            )));
        }
        let angles: Vec<f32> = (0..n)
            .map(|i| (i as f64 * range / n as f64) as f32)
            .collect();
        if let Some(w) = crate::angles::limited_angle_warning(&angles) {
            tracing::warn!("{}: {w}", path.display());
        }
        Ok(angles)
    }
}

/// The kind of input a path holds, decided from its name and first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// An HDF5 file (DXchange or NXtomo, decided from its content).
    Hdf5,
    /// A TIFF stack (directory, glob or multi-page file).
    Tiff,
    /// A NumPy `.npy` file.
    Npy,
    /// A raw binary file.
    Raw,
}

/// Decides what kind of input `path` is: directories and globs are TIFF
/// stacks; files by their magic bytes (HDF5, TIFF, NumPy), then by
/// extension; anything else is raw when `options.raw` is given.
pub fn input_kind(path: &Path, options: &OpenOptions) -> Result<InputKind> {
    if options.raw.is_some() {
        return Ok(InputKind::Raw);
    }
    let s = path.to_string_lossy();
    if s.contains('*') || s.contains('?') || path.is_dir() {
        return Ok(InputKind::Tiff);
    }
    let mut magic = [0u8; 8];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| crate::error::os_err(path, e))?;
        let mut n = 0;
        while n < magic.len() {
            match f.read(&mut magic[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return Err(crate::error::os_err(path, e)),
            }
        }
        n
    };
    let magic = &magic[..n];
    if magic.starts_with(b"\x89HDF\r\n\x1a\n") {
        return Ok(InputKind::Hdf5);
    }
    if magic.starts_with(b"\x93NUMPY") {
        return Ok(InputKind::Npy);
    }
    if magic.starts_with(b"II*\0")
        || magic.starts_with(b"MM\0*")
        || magic.starts_with(b"II+\0")
        || magic.starts_with(b"MM\0+")
    {
        return Ok(InputKind::Tiff);
    }
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let what =
        match ext.as_str() {
            "h5" | "hdf5" | "hdf" | "nxs" | "cxi" => "an HDF5 file",
            "npy" => "a NumPy .npy file",
            "tif" | "tiff" => "a TIFF file",
            _ => return Err(format_err(
                path,
                "unknown file format (not HDF5, TIFF or .npy; give the raw layout for raw files)",
            )),
        };
    Err(format_err(
        path,
        format!("named like {what} but its first bytes are not (truncated or corrupt?)"),
    ))
}

/// Opens a scan with the reader its format needs (see [`input_kind`]). HDF5
/// files are read as NXtomo when they have an NXtomo entry, image keys or an
/// explicit `image_key_path`, and as DXchange otherwise.
pub fn open(path: &Path, options: &OpenOptions) -> Result<Box<dyn ProjectionSource>> {
    crate::output::register_input(path);
    match input_kind(path, options)? {
        InputKind::Hdf5 => crate::hdf5io::open_hdf5(path, options),
        InputKind::Tiff => Ok(Box::new(crate::tiffio::TiffSource::open(path, options)?)),
        InputKind::Npy => Ok(Box::new(crate::npy::NpySource::open(path, options)?)),
        InputKind::Raw => Ok(Box::new(crate::npy::NpySource::open_raw(path, options)?)),
    }
}
