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

/// Parses the header of an `.npy` file.
pub fn read_npy_header(path: &Path) -> Result<NpyHeader> {
    let mut f = File::open(path).map_err(|e| os_err(path, e))?;
    let mut pre = [0u8; 10];
    read_exact_or(&mut f, &mut pre, path, "truncated .npy header")?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err(format_err(path, "not a .npy file (bad magic bytes)"));
    }
    let major = pre[6];
    let (len, start) = match major {
        1 => (u16::from_le_bytes([pre[8], pre[9]]) as usize, 10u64),
        2 | 3 => {
            let mut b = [0u8; 2];
            read_exact_or(&mut f, &mut b, path, "truncated .npy header")?;
            (
                u32::from_le_bytes([pre[8], pre[9], b[0], b[1]]) as usize,
                12u64,
            )
        }
        v => return Err(unsupported(path, format!(".npy format version {v}"))),
    };
    if len > 1 << 20 {
        return Err(format_err(
            path,
            format!(".npy header of {len} bytes is implausible"),
        ));
    }
    let mut h = vec![0u8; len];
    read_exact_or(&mut f, &mut h, path, "truncated .npy header")?;
    let h = String::from_utf8_lossy(&h).to_string();
    let descr = dict_value(&h, "descr")
        .map(|v| v.trim_matches(|c| c == '\'' || c == '"').to_string())
        .ok_or_else(|| format_err(path, ".npy header has no 'descr'"))?;
    let fortran_order = match dict_value(&h, "fortran_order").as_deref() {
        Some("True") => true,
        Some("False") => false,
        _ => return Err(format_err(path, ".npy header has no valid 'fortran_order'")),
    };
    let shape_s =
        dict_value(&h, "shape").ok_or_else(|| format_err(path, ".npy header has no 'shape'"))?;
    let inner = shape_s.trim().trim_start_matches('(').trim_end_matches(')');
    let mut shape = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        shape.push(
            part.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| format_err(path, format!(".npy shape '{shape_s}' is not valid")))?,
        );
    }
    Ok(NpyHeader {
        descr,
        fortran_order,
        shape,
        data_offset: start + len as u64,
    })
}

/// The value text of `key` in a Python dict literal (values without nested
/// dicts; tuples are kept whole).
fn dict_value(h: &str, key: &str) -> Option<String> {
    let k1 = format!("'{key}'");
    let k2 = format!("\"{key}\"");
    let pos = h
        .find(&k1)
        .map(|p| p + k1.len())
        .or_else(|| h.find(&k2).map(|p| p + k2.len()))?;
    let rest = h[pos..].trim_start().strip_prefix(':')?.trim_start();
    if rest.starts_with('(') {
        let end = rest.find(')')?;
        Some(rest[..=end].to_string())
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim().to_string())
    }
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

    /// A raw file with the given layout.
    pub fn open_raw(path: &Path, spec: &RawSpec) -> Result<Self> {
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
            .ok_or_else(|| format_err(path, format!("shape {shape:?} is too large")))?;
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

fn decode(buf: &[u8], dtype: RawDtype, endian: Endian, out: &mut [f32]) {
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
        let flats = options
            .flats
            .as_deref()
            .map(|p| SideStack::open(p, [nr, nc]))
            .transpose()?;
        let darks = options
            .darks
            .as_deref()
            .map(|p| SideStack::open(p, [nr, nc]))
            .transpose()?;
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
    /// Opens a flat/dark stack and checks its frame size `[rows, cols]`.
    pub(crate) fn open(path: &Path, frame: [usize; 2]) -> Result<Self> {
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
