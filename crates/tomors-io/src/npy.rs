//! NumPy `.npy` and raw binary projections, read a slab of rows at a time
//! with seeks (the file is never loaded whole).
//!
//! `.npy` files of version 1, 2 and 3 with element types `u1 u2 u4 i1 i2 i4
//! f4 f8` in either byte order, C or Fortran order, are read; 3-D arrays are
//! projections `[angle][row][col]`, 2-D arrays one sinogram `[angle][col]`
//! (a single detector row).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};

use ndarray::Array3;

use crate::error::{format_err, os_err, shape_err, unsupported, Result};
use crate::source::{
    check_rows, Endian, FrameGroup, OpenOptions, ProjectionSource, RawDtype, RawSlab, RawSpec,
};

/// A 3-D array `[frame][row][col]` stored uncompressed in a file.
#[derive(Clone, Debug)]
pub struct BinArray {
    path: PathBuf,
    offset: u64,
    shape: [usize; 3],
    dtype: RawDtype,
    endian: Endian,
    fortran: bool,
}

/// What the header of an `.npy` file says.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyHeader {
    /// The `descr` entry, e.g. `<f4`.
    pub descr: String,
    /// Whether the data are in Fortran (column-major) order.
    pub fortran_order: bool,
    /// The array shape.
    pub shape: Vec<usize>,
    /// Bytes before the data.
    pub data_offset: u64,
}

/// Parses the header of an `.npy` file with `ndarray-npy` (format versions
/// 1, 2 and 3); the declared header length is checked first (at most 1 MiB),
/// so a damaged file cannot make the parser allocate gigabytes.
pub fn read_npy_header(path: &Path) -> Result<NpyHeader> {
    use ndarray_npy::npy::header::{Header, ReadHeaderError};
    let mut f = File::open(path).map_err(|e| os_err(path, e))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(format_err(path, "is a directory, not a .npy file"));
    }
    let mut pre = [0u8; 12];
    let mut n = 0;
    while n < pre.len() {
        match f.read(&mut pre[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(os_err(path, e)),
        }
    }
    if n < 6 || &pre[..6] != b"\x93NUMPY" {
        return Err(format_err(path, "not a .npy file (bad magic bytes)"));
    }
    if n < 10 {
        return Err(format_err(path, "truncated .npy header"));
    }
    let len = match pre[6] {
        1 => u16::from_le_bytes([pre[8], pre[9]]) as usize,
        2 | 3 if n == 12 => u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize,
        2 | 3 => return Err(format_err(path, "truncated .npy header")),
        v => return Err(unsupported(path, format!(".npy format version {v}"))),
    };
    if len > 1 << 20 {
        return Err(format_err(
            path,
            format!(".npy header of {len} bytes is implausible"),
        ));
    }
    f.seek(SeekFrom::Start(0)).map_err(|e| os_err(path, e))?;
    let mut r = std::io::BufReader::new(&mut f);
    let header = Header::from_reader(&mut r).map_err(|e| match e {
        ReadHeaderError::Io(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            format_err(path, "truncated .npy header")
        }
        ReadHeaderError::Io(e) => os_err(path, e),
        ReadHeaderError::Parse(e) => format_err(path, format!("bad .npy header: {e}")),
    })?;
    let data_offset = r.stream_position().map_err(|e| os_err(path, e))?;
    let descr = header
        .type_descriptor
        .to_string()
        .trim_matches(|c| c == '\'' || c == '"')
        .to_string();
    Ok(NpyHeader {
        descr,
        fortran_order: header.layout.is_fortran(),
        shape: header.shape,
        data_offset,
    })
}

fn read_exact_or(f: &mut File, buf: &mut [u8], path: &Path, what: &str) -> Result<()> {
    f.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            format_err(path, what)
        } else {
            os_err(path, e)
        }
    })
}

fn parse_descr(path: &Path, descr: &str) -> Result<(RawDtype, Endian)> {
    let (order, code) = match descr.chars().next() {
        Some(c @ ('<' | '>' | '|' | '=')) => (c, &descr[1..]),
        _ => ('=', descr),
    };
    let endian = if order == '>' {
        Endian::Big
    } else {
        Endian::Little
    };
    let dtype = match code {
        "u1" | "B" => RawDtype::U8,
        "u2" => RawDtype::U16,
        "u4" => RawDtype::U32,
        "i1" | "b" => RawDtype::I8,
        "i2" => RawDtype::I16,
        "i4" => RawDtype::I32,
        "f4" => RawDtype::F32,
        "f8" => RawDtype::F64,
        _ => {
            return Err(unsupported(
                path,
                format!("element type '{descr}' (use u1, u2, u4, i1, i2, i4, f4 or f8)"),
            ))
        }
    };
    Ok((dtype, endian))
}

impl BinArray {
    /// Opens an `.npy` file holding a 3-D `[frame][row][col]` or 2-D
    /// `[frame][col]` array.
    pub fn open_npy(path: &Path) -> Result<Self> {
        crate::output::register_input(path);
        Self::open_npy_unregistered(path)
    }

    /// As [`BinArray::open_npy`], without registering the file as an input
    /// (reading back an output).
    pub(crate) fn open_npy_unregistered(path: &Path) -> Result<Self> {
        let h = read_npy_header(path)?;
        let (dtype, endian) = parse_descr(path, &h.descr)?;
        let shape = match h.shape.as_slice() {
            [a, r, c] => [*a, *r, *c],
            [a, c] => [*a, 1, *c],
            s => {
                return Err(shape_err(
                    path,
                    format!(
                    "expected a 3-D [angle][row][col] or 2-D [angle][col] array, got shape {s:?}"
                ),
                ))
            }
        };
        // A 2-D Fortran array [a][c] is the 3-D Fortran array [a][1][c].
        Self::new(path, shape, dtype, endian, h.data_offset, h.fortran_order)
    }

    /// A raw file with the given layout: the file's size must be
    /// `offset + shape · element size` exactly (unless
    /// [`RawSpec::allow_trailing`]), and a file that starts with the `.npy`
    /// magic bytes is refused (its header would be read as data).
    pub fn open_raw(path: &Path, spec: &RawSpec) -> Result<Self> {
        crate::output::register_input(path);
        let meta = std::fs::metadata(path).map_err(|e| os_err(path, e))?;
        if meta.is_dir() {
            return Err(format_err(
                path,
                "is a directory, not a raw file (a TIFF stack? drop --raw-shape)",
            ));
        }
        let len = meta.len();
        let mut magic = [0u8; 6];
        if len >= 6 {
            let mut f = File::open(path).map_err(|e| os_err(path, e))?;
            read_exact_or(&mut f, &mut magic, path, "truncated")?;
            if &magic == b"\x93NUMPY" {
                return Err(format_err(
                    path,
                    "is a .npy file (it starts with the .npy magic bytes); read it without --raw-shape",
                ));
            }
        }
        if spec.offset > len {
            return Err(format_err(
                path,
                format!(
                    "raw offset {} is beyond the end of the file ({len} bytes)",
                    spec.offset
                ),
            ));
        }
        let need = spec
            .shape
            .iter()
            .try_fold(spec.dtype.size() as u64, |acc, &n| {
                acc.checked_mul(n as u64)
            })
            .and_then(|b| b.checked_add(spec.offset));
        if let Some(need) = need {
            if len > need && !spec.allow_trailing {
                return Err(format_err(
                    path,
                    format!(
                        "holds {len} bytes, but shape {:?} of {} after {} header bytes needs {need} \
                         ({} bytes too many: check the shape and data type, or allow trailing bytes)",
                        spec.shape,
                        dtype_name(spec.dtype),
                        spec.offset,
                        len - need
                    ),
                ));
            }
        }
        Self::new(
            path,
            spec.shape,
            spec.dtype,
            spec.endian,
            spec.offset,
            false,
        )
    }

    fn new(
        path: &Path,
        shape: [usize; 3],
        dtype: RawDtype,
        endian: Endian,
        offset: u64,
        fortran: bool,
    ) -> Result<Self> {
        if shape.contains(&0) {
            return Err(shape_err(path, format!("empty array of shape {shape:?}")));
        }
        let len = std::fs::metadata(path).map_err(|e| os_err(path, e))?.len();
        let need = shape
            .iter()
            .try_fold(dtype.size() as u64, |acc, &n| acc.checked_mul(n as u64))
            .and_then(|b| b.checked_add(offset))
            .ok_or_else(|| {
                format_err(
                    path,
                    format!(
                        "shape {shape:?} of {} is too large (over 2^64 bytes)",
                        dtype_name(dtype)
                    ),
                )
            })?;
        if len < need {
            return Err(format_err(
                path,
                format!(
                    "truncated: shape {shape:?} of {} needs {need} bytes, the file has {len}",
                    dtype_name(dtype)
                ),
            ));
        }
        Ok(Self {
            path: path.to_path_buf(),
            offset,
            shape,
            dtype,
            endian,
            fortran,
        })
    }

    /// `[frames, rows, cols]`.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Element type.
    pub fn dtype(&self) -> RawDtype {
        self.dtype
    }

    /// Reads rows `rows` of every frame.
    pub fn read_rows(&self, rows: Range<usize>) -> Result<Array3<f32>> {
        check_rows(&self.path, &rows, self.shape[1])?;
        let [na, nr, nc] = self.shape;
        let nrs = rows.len();
        let es = self.dtype.size();
        let mut f = File::open(&self.path).map_err(|e| os_err(&self.path, e))?;
        let mut out = Array3::<f32>::zeros((na, nrs, nc));
        if !self.fortran {
            let mut buf = vec![0u8; nrs * nc * es];
            let dst = out.as_slice_mut().expect("fresh array is contiguous");
            for a in 0..na {
                let pos = self.offset + ((a * nr + rows.start) * nc * es) as u64;
                self.read_at(&mut f, pos, &mut buf)?;
                decode(
                    &buf,
                    self.dtype,
                    self.endian,
                    &mut dst[a * nrs * nc..(a + 1) * nrs * nc],
                );
            }
        } else {
            // Column-major: element (a, r, c) at a + na·(r + nr·c).
            let mut buf = vec![0u8; na * nrs * es];
            let mut vals = vec![0f32; na * nrs];
            for c in 0..nc {
                let pos = self.offset + ((na * (rows.start + nr * c)) * es) as u64;
                self.read_at(&mut f, pos, &mut buf)?;
                decode(&buf, self.dtype, self.endian, &mut vals);
                for r in 0..nrs {
                    for a in 0..na {
                        out[[a, r, c]] = vals[a + na * r];
                    }
                }
            }
        }
        Ok(out)
    }

    fn read_at(&self, f: &mut File, pos: u64, buf: &mut [u8]) -> Result<()> {
        f.seek(SeekFrom::Start(pos))
            .map_err(|e| os_err(&self.path, e))?;
        read_exact_or(
            f,
            buf,
            &self.path,
            "truncated while reading (the file shrank?)",
        )
    }
}

/// Reads a whole `.npy` array (any dimension, element types as
/// [`BinArray`], C or Fortran order) as f32: angles files and other small
/// arrays. The file is registered as an input (see
/// [`crate::output::register_input`]); a file shorter than its header says
/// is an error.
pub fn read_npy_f32(path: &Path) -> Result<ndarray::ArrayD<f32>> {
    crate::output::register_input(path);
    let h = read_npy_header(path)?;
    let (dtype, endian) = parse_descr(path, &h.descr)?;
    let n = h
        .shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format_err(path, format!("shape {:?} is too large", h.shape)))?;
    let bytes = n
        .checked_mul(dtype.size())
        .ok_or_else(|| format_err(path, format!("shape {:?} is too large", h.shape)))?;
    let len = std::fs::metadata(path).map_err(|e| os_err(path, e))?.len();
    if len < h.data_offset + bytes as u64 {
        return Err(format_err(
            path,
            format!(
                "truncated: shape {:?} of {} needs {} bytes of data, the file has {}",
                h.shape,
                dtype_name(dtype),
                bytes,
                len.saturating_sub(h.data_offset)
            ),
        ));
    }
    crate::memory::ensure_fits(path, bytes + 4 * n, "the array")?;
    let mut f = File::open(path).map_err(|e| os_err(path, e))?;
    f.seek(SeekFrom::Start(h.data_offset))
        .map_err(|e| os_err(path, e))?;
    let mut buf = vec![0u8; bytes];
    read_exact_or(&mut f, &mut buf, path, "truncated while reading")?;
    let mut vals = vec![0f32; n];
    decode(&buf, dtype, endian, &mut vals);
    let shape = ndarray::IxDyn(&h.shape);
    let a = if h.fortran_order {
        ndarray::ArrayD::from_shape_vec(ndarray::ShapeBuilder::f(shape), vals)
    } else {
        ndarray::ArrayD::from_shape_vec(shape, vals)
    };
    a.map_err(|e| format_err(path, format!("shape {:?}: {e}", h.shape)))
}

/// Short name of a raw element type.
pub fn dtype_name(d: RawDtype) -> &'static str {
    match d {
        RawDtype::U8 => "uint8",
        RawDtype::U16 => "uint16",
        RawDtype::U32 => "uint32",
        RawDtype::I8 => "int8",
        RawDtype::I16 => "int16",
        RawDtype::I32 => "int32",
        RawDtype::F32 => "float32",
        RawDtype::F64 => "float64",
    }
}

pub(crate) fn decode(buf: &[u8], dtype: RawDtype, endian: Endian, out: &mut [f32]) {
    macro_rules! conv {
        ($t:ty, $n:expr) => {
            for (o, ch) in out.iter_mut().zip(buf.chunks_exact($n)) {
                let b: [u8; $n] = ch.try_into().expect("chunk of exact size");
                *o = match endian {
                    Endian::Little => <$t>::from_le_bytes(b),
                    Endian::Big => <$t>::from_be_bytes(b),
                } as f32;
            }
        };
    }
    match dtype {
        RawDtype::U8 => conv!(u8, 1),
        RawDtype::I8 => conv!(i8, 1),
        RawDtype::U16 => conv!(u16, 2),
        RawDtype::I16 => conv!(i16, 2),
        RawDtype::U32 => conv!(u32, 4),
        RawDtype::I32 => conv!(i32, 4),
        RawDtype::F32 => conv!(f32, 4),
        RawDtype::F64 => conv!(f64, 8),
    }
}

/// Projections from an `.npy` or raw file, with optional separate flat and
/// dark stacks ([`OpenOptions::flats`], [`OpenOptions::darks`]) and angles
/// from the options (default: evenly over 180°).
pub struct NpySource {
    data: BinArray,
    angles: Vec<f32>,
    flats: Option<SideStack>,
    darks: Option<SideStack>,
    raw: bool,
}

impl NpySource {
    /// Opens an `.npy` file of projections.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        Self::with_data(BinArray::open_npy(path)?, options, false)
    }

    /// Opens a raw file of projections; `options.raw` gives its layout.
    pub fn open_raw(path: &Path, options: &OpenOptions) -> Result<Self> {
        let spec = options.raw.as_ref().ok_or_else(|| {
            crate::error::IoError::Parameter(format!(
                "{}: a raw file needs its shape, data type and byte order",
                path.display()
            ))
        })?;
        Self::with_data(BinArray::open_raw(path, spec)?, options, true)
    }

    fn with_data(data: BinArray, options: &OpenOptions, raw: bool) -> Result<Self> {
        let [na, nr, nc] = data.shape();
        let angles = options.default_angles(&data.path, na)?;
        let (flats, darks) = SideStack::open_both(options, [nr, nc])?;
        Ok(Self {
            data,
            angles,
            flats,
            darks,
            raw,
        })
    }
}

impl ProjectionSource for NpySource {
    fn path(&self) -> &Path {
        &self.data.path
    }
    fn format(&self) -> &'static str {
        if self.raw {
            "raw binary"
        } else {
            "NumPy .npy"
        }
    }
    fn shape(&self) -> [usize; 3] {
        self.data.shape()
    }
    fn angles(&self) -> &[f32] {
        &self.angles
    }
    fn n_flats(&self) -> usize {
        self.flats.as_ref().map_or(0, |s| s.n_frames())
    }
    fn n_darks(&self) -> usize {
        self.darks.as_ref().map_or(0, |s| s.n_frames())
    }
    fn stored_value_bytes(&self) -> usize {
        self.data.dtype().size()
    }
    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
        let projections = self.data.read_rows(rows.clone())?;
        let flats = side_groups(self.flats.as_ref(), rows.clone())?;
        let darks = side_groups(self.darks.as_ref(), rows.clone())?;
        Ok(RawSlab {
            rows,
            projections,
            flats,
            darks,
        })
    }
}

/// A separate stack of flats or darks (`.npy` or TIFF).
pub(crate) enum SideStack {
    Npy(BinArray),
    Tiff(crate::tiffio::TiffStack),
}

impl SideStack {
    /// The flat and the dark stacks that `options` names (either may be
    /// absent), opened and checked against the frame size `[rows, cols]`.
    pub(crate) fn open_both(
        options: &OpenOptions,
        frame: [usize; 2],
    ) -> Result<(Option<Self>, Option<Self>)> {
        let open = |p: &Option<PathBuf>| p.as_deref().map(|p| Self::open(p, frame)).transpose();
        Ok((open(&options.flats)?, open(&options.darks)?))
    }

    /// Opens a flat/dark stack and checks its frame size `[rows, cols]`.
    pub(crate) fn open(path: &Path, frame: [usize; 2]) -> Result<Self> {
        crate::output::register_input(path);
        let s = match crate::source::input_kind(path, &OpenOptions::default())? {
            crate::source::InputKind::Npy => Self::Npy(BinArray::open_npy(path)?),
            crate::source::InputKind::Tiff => Self::Tiff(crate::tiffio::TiffStack::open(path)?),
            _ => {
                return Err(unsupported(
                    path,
                    "flats and darks must be an .npy file or a TIFF stack",
                ))
            }
        };
        let [_, r, c] = s.shape();
        if [r, c] != frame {
            return Err(shape_err(
                path,
                format!(
                    "frames of {r}×{c} pixels, the projections have {}×{}",
                    frame[0], frame[1]
                ),
            ));
        }
        Ok(s)
    }

    pub(crate) fn shape(&self) -> [usize; 3] {
        match self {
            Self::Npy(b) => b.shape(),
            Self::Tiff(t) => t.shape(),
        }
    }

    pub(crate) fn n_frames(&self) -> usize {
        self.shape()[0]
    }

    pub(crate) fn read_rows(&self, rows: Range<usize>) -> Result<Array3<f32>> {
        match self {
            Self::Npy(b) => b.read_rows(rows),
            Self::Tiff(t) => t.read_rows(0..t.shape()[0], rows),
        }
    }
}

pub(crate) fn side_groups(s: Option<&SideStack>, rows: Range<usize>) -> Result<Vec<FrameGroup>> {
    Ok(match s {
        Some(s) => vec![FrameGroup {
            position: 0.0,
            frames: s.read_rows(rows)?,
        }],
        None => Vec::new(),
    })
}
