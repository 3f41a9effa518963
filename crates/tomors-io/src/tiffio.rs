//! TIFF stacks: a directory or glob of single-image TIFFs (one projection
//! per file, natural sort order of the names), or one multi-page TIFF (one
//! projection per page). Grey images of 8/16/32-bit unsigned or signed
//! integers and 32/64-bit floats are read. Images stored in strips (most
//! TIFF writers) decode only the strips holding the slab's rows; others
//! (tiled, or one strip per image) are decoded whole and cropped, so a slab
//! never holds more than one image beyond the slab itself.
//!
//! Also the TIFF image writers used by [`crate::writer`].

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::ops::Range;
use std::path::{Path, PathBuf};

use ndarray::{Array2, Array3, ArrayView2};
use tiff::decoder::{Decoder, DecodingResult, Limits};
use tiff::encoder::{colortype, TiffEncoder};
use tiff::tags::Tag;

use crate::error::{format_err, os_err, shape_err, unsupported, IoError, Result};
use crate::npy::{side_groups, SideStack};
use crate::source::{check_rows, OpenOptions, ProjectionSource, RawSlab};

/// Where the images of a stack are.
#[derive(Clone, Debug)]
enum Layout {
    /// One image per file.
    Files(Vec<PathBuf>),
    /// One multi-page file with this many pages.
    Pages(PathBuf, usize),
}

/// A stack of grey TIFF images `[frame][row][col]`.
#[derive(Clone, Debug)]
pub struct TiffStack {
    origin: PathBuf,
    layout: Layout,
    rows: usize,
    cols: usize,
}

/// The TIFF files a directory or a glob names (`globset` syntax in the
/// file name: `*`, `?`, `[a-z]`, `{a,b}`), in natural order (digit runs
/// by value, `natord`).
pub fn list_tiffs(path: &Path) -> Result<Vec<PathBuf>> {
    let s = path.to_string_lossy();
    let (dir, pattern) = if s.contains('*') || s.contains('?') {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let pat = path
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default();
        if dir.to_string_lossy().contains(['*', '?']) {
            return Err(unsupported(
                path,
                "wildcards are allowed in the file name only",
            ));
        }
        (dir.to_path_buf(), pat)
    } else {
        (path.to_path_buf(), String::new())
    };
    let matcher = if pattern.is_empty() {
        None
    } else {
        let glob = globset::Glob::new(&pattern)
            .map_err(|e| unsupported(path, format!("file name pattern: {e}")))?;
        Some(glob.compile_matcher())
    };
    let rd = std::fs::read_dir(&dir).map_err(|e| os_err(&dir, e))?;
    let mut files: Vec<PathBuf> = Vec::new();
    for e in rd {
        let e = e.map_err(|e| os_err(&dir, e))?;
        let p = e.path();
        if !p.is_file() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        let ok = match &matcher {
            None => {
                let l = name.to_ascii_lowercase();
                l.ends_with(".tif") || l.ends_with(".tiff")
            }
            Some(m) => m.is_match(&name),
        };
        if ok {
            files.push(p);
        }
    }
    files.sort_by(|a, b| {
        natord::compare(
            &a.file_name().unwrap_or_default().to_string_lossy(),
            &b.file_name().unwrap_or_default().to_string_lossy(),
        )
    });
    if files.is_empty() {
        return Err(format_err(path, "no TIFF files found"));
    }
    Ok(files)
}

fn tiff_err(path: &Path, e: tiff::TiffError) -> IoError {
    match e {
        tiff::TiffError::IoError(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => {
            os_err(path, e)
        }
        tiff::TiffError::IoError(_) => format_err(path, "truncated TIFF file"),
        tiff::TiffError::UnsupportedError(u) => unsupported(path, format!("TIFF: {u}")),
        e => format_err(path, format!("corrupt TIFF: {e}")),
    }
}

/// Runs a decoder operation, turning a panic inside the decoder (corrupt
/// input it does not guard against) into an error.
fn guarded<T>(path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(_) => Err(format_err(path, "corrupt TIFF (the decoder gave up)")),
    }
}

fn open_decoder(path: &Path) -> Result<Decoder<BufReader<File>>> {
    let f = File::open(path).map_err(|e| os_err(path, e))?;
    let mut limits = Limits::default();
    limits.decoding_buffer_size = 1 << 31;
    limits.intermediate_buffer_size = 1 << 31;
    Ok(Decoder::new(BufReader::new(f))
        .map_err(|e| tiff_err(path, e))?
        .with_limits(limits))
}

/// Converts decoded samples to f32.
fn samples_to_f32(path: &Path, img: DecodingResult) -> Result<Vec<f32>> {
    Ok(match img {
        DecodingResult::U8(v) => v.into_iter().map(f32::from).collect(),
        DecodingResult::U16(v) => v.into_iter().map(f32::from).collect(),
        DecodingResult::U32(v) => v.into_iter().map(|x| x as f32).collect(),
        DecodingResult::I8(v) => v.into_iter().map(f32::from).collect(),
        DecodingResult::I16(v) => v.into_iter().map(f32::from).collect(),
        DecodingResult::I32(v) => v.into_iter().map(|x| x as f32).collect(),
        DecodingResult::F32(v) => v,
        DecodingResult::F64(v) => v.into_iter().map(|x| x as f32).collect(),
        _ => {
            return Err(unsupported(
                path,
                "TIFF sample type (use 8/16/32-bit integers or 32/64-bit floats)",
            ))
        }
    })
}

/// Decodes rows `rows` of the current image, which must be `h × w`
/// (`[rows][cols]` f32). Images stored in strips decode only the strips
/// that hold those rows; others are decoded whole and cropped.
fn decode_rows(
    path: &Path,
    d: &mut Decoder<BufReader<File>>,
    rows: Range<usize>,
    (h, w): (usize, usize),
) -> Result<Array2<f32>> {
    let (iw, ih) = d.dimensions().map_err(|e| tiff_err(path, e))?;
    if (ih as usize, iw as usize) != (h, w) {
        return Err(shape_err(
            path,
            format!("image of {ih}×{iw} pixels in a stack of {h}×{w} images"),
        ));
    }
    let colour = d.colortype().map_err(|e| tiff_err(path, e))?;
    check_bit_depth(path, colour)?;
    if !matches!(colour, tiff::ColorType::Gray(_)) {
        // decode_current reports the colour type.
        return decode_current(path, d);
    }
    if d.get_chunk_type() == tiff::decoder::ChunkType::Strip {
        let (cw, rps) = d.chunk_dimensions();
        let rps = rps as usize;
        if rps > 0 && cw as usize == w {
            let mut out = Array2::<f32>::zeros((rows.len(), w));
            for strip in rows.start / rps..=(rows.end - 1) / rps {
                let v = samples_to_f32(
                    path,
                    d.read_chunk(strip as u32).map_err(|e| tiff_err(path, e))?,
                )?;
                let first = strip * rps;
                let n = rps.min(h - first);
                if v.len() < n * w {
                    return Err(format_err(
                        path,
                        format!(
                            "strip {strip} decoded to {} samples, {} expected",
                            v.len(),
                            n * w
                        ),
                    ));
                }
                for r in first.max(rows.start)..(first + n).min(rows.end) {
                    let src = &v[(r - first) * w..(r - first + 1) * w];
                    out.row_mut(r - rows.start)
                        .iter_mut()
                        .zip(src)
                        .for_each(|(o, &x)| *o = x);
                }
            }
            return Ok(out);
        }
    }
    let img = decode_current(path, d)?;
    Ok(img.slice(ndarray::s![rows, ..]).to_owned())
}

/// Refuses grey images whose samples are not 8, 16, 32 or 64 bits (1-bit
/// bilevel images, 4-bit, 12-bit packed, ...).
fn check_bit_depth(path: &Path, colour: tiff::ColorType) -> Result<()> {
    if let tiff::ColorType::Gray(bits) = colour {
        if ![8, 16, 32, 64].contains(&bits) {
            return Err(unsupported(
                path,
                format!(
                    "TIFF bit depth {bits} (grey images of 8, 16, 32 or 64 bits per sample only)"
                ),
            ));
        }
    }
    Ok(())
}

/// Decodes the current image of a decoder into `[rows][cols]` f32.
fn decode_current(path: &Path, d: &mut Decoder<BufReader<File>>) -> Result<Array2<f32>> {
    let (w, h) = d.dimensions().map_err(|e| tiff_err(path, e))?;
    let colour = d.colortype().map_err(|e| tiff_err(path, e))?;
    check_bit_depth(path, colour)?;
    match colour {
        tiff::ColorType::Gray(_) => {}
        c => {
            return Err(unsupported(
                path,
                format!("TIFF colour type {c:?} (grey images only)"),
            ))
        }
    }
    let img = d.read_image().map_err(|e| tiff_err(path, e))?;
    let v = samples_to_f32(path, img)?;
    let (w, h) = (w as usize, h as usize);
    if v.len() != w * h {
        return Err(format_err(
            path,
            format!("image of {w}×{h} decoded to {} samples", v.len()),
        ));
    }
    Array2::from_shape_vec((h, w), v).map_err(|e| format_err(path, e))
}

impl TiffStack {
    /// Opens a directory or glob of single-image TIFFs, or a (multi-page)
    /// TIFF file.
    pub fn open(path: &Path) -> Result<Self> {
        crate::output::register_input(path);
        let s = path.to_string_lossy();
        let layout = if path.is_dir() || s.contains('*') || s.contains('?') {
            Layout::Files(list_tiffs(path)?)
        } else {
            let pages = guarded(path, || {
                let mut d = open_decoder(path)?;
                let mut n = 1usize;
                while d.more_images() {
                    d.next_image().map_err(|e| tiff_err(path, e))?;
                    n += 1;
                }
                Ok(n)
            })?;
            Layout::Pages(path.to_path_buf(), pages)
        };
        let (first, page) = match &layout {
            Layout::Files(f) => (f[0].clone(), 0),
            Layout::Pages(p, _) => (p.clone(), 0),
        };
        let img = read_image(&first, page)?;
        Ok(Self {
            origin: path.to_path_buf(),
            layout,
            rows: img.nrows(),
            cols: img.ncols(),
        })
    }

    /// `[frames, rows, cols]`.
    pub fn shape(&self) -> [usize; 3] {
        let n = match &self.layout {
            Layout::Files(f) => f.len(),
            Layout::Pages(_, n) => *n,
        };
        [n, self.rows, self.cols]
    }

    /// The path the stack was opened from.
    pub fn path(&self) -> &Path {
        &self.origin
    }

    /// The first file of the stack.
    pub fn first_file(&self) -> &Path {
        match &self.layout {
            Layout::Files(f) => &f[0],
            Layout::Pages(p, _) => p,
        }
    }

    /// Reads rows `rows` of frames `frames`: `[frame][row][col]`.
    pub fn read_rows(&self, frames: Range<usize>, rows: Range<usize>) -> Result<Array3<f32>> {
        check_rows(&self.origin, &rows, self.rows)?;
        let n = self.shape()[0];
        if frames.end > n || frames.start > frames.end {
            return Err(IoError::Parameter(format!(
                "{}: frames {}..{} requested, the stack has {n}",
                self.origin.display(),
                frames.start,
                frames.end
            )));
        }
        let mut out = Array3::<f32>::zeros((frames.len(), rows.len(), self.cols));
        match &self.layout {
            Layout::Files(files) => {
                for (k, i) in frames.clone().enumerate() {
                    let f = &files[i];
                    let img = guarded(f, || {
                        let mut d = open_decoder(f)?;
                        decode_rows(f, &mut d, rows.clone(), (self.rows, self.cols))
                    })?;
                    out.index_axis_mut(ndarray::Axis(0), k).assign(&img);
                }
            }
            Layout::Pages(p, _) => {
                guarded(p, || {
                    let mut d = open_decoder(p)?;
                    for (k, i) in frames.clone().enumerate() {
                        d.seek_to_image(i).map_err(|e| tiff_err(p, e))?;
                        let img = decode_rows(p, &mut d, rows.clone(), (self.rows, self.cols))?;
                        out.index_axis_mut(ndarray::Axis(0), k).assign(&img);
                    }
                    Ok(())
                })?;
            }
        }
        Ok(out)
    }
}

/// Reads page `page` of a TIFF file as `[rows][cols]` f32.
pub fn read_image(path: &Path, page: usize) -> Result<Array2<f32>> {
    guarded(path, || {
        let mut d = open_decoder(path)?;
        if page > 0 {
            d.seek_to_image(page).map_err(|e| tiff_err(path, e))?;
        }
        decode_current(path, &mut d)
    })
}

/// Projections from a TIFF stack with optional separate flat and dark
/// stacks; angles from the options (default: evenly over 180°).
pub struct TiffSource {
    stack: TiffStack,
    angles: Vec<f32>,
    flats: Option<SideStack>,
    darks: Option<SideStack>,
}

impl TiffSource {
    /// Opens a TIFF stack of projections (see [`TiffStack::open`]).
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        let stack = TiffStack::open(path)?;
        let [n, r, c] = stack.shape();
        let angles = options.default_angles(path, n)?;
        let (flats, darks) = SideStack::open_both(options, [r, c])?;
        Ok(Self {
            stack,
            angles,
            flats,
            darks,
        })
    }
}

impl ProjectionSource for TiffSource {
    fn path(&self) -> &Path {
        self.stack.path()
    }
    fn format(&self) -> &'static str {
        match self.stack.layout {
            Layout::Files(_) => "TIFF stack (one file per projection)",
            Layout::Pages(..) => "multi-page TIFF",
        }
    }
    fn shape(&self) -> [usize; 3] {
        self.stack.shape()
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
        let projections = self
            .stack
            .read_rows(0..self.stack.shape()[0], rows.clone())?;
        Ok(RawSlab {
            rows: rows.clone(),
            projections,
            flats: side_groups(self.flats.as_ref(), rows.clone())?,
            darks: side_groups(self.darks.as_ref(), rows)?,
        })
    }
}

/// Sample type of a TIFF image written by tomors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TiffDepth {
    /// 32-bit float, values as they are.
    F32,
    /// 16-bit unsigned: `round((v − lo) / (hi − lo) · 65535)`, clamped.
    U16 {
        /// Value mapped to 0.
        lo: f32,
        /// Value mapped to 65535.
        hi: f32,
    },
    /// 8-bit unsigned: `round((v − lo) / (hi − lo) · 255)`, clamped.
    U8 {
        /// Value mapped to 0.
        lo: f32,
        /// Value mapped to 255.
        hi: f32,
    },
}

impl TiffDepth {
    /// The scaling as text (stored in each image's ImageDescription tag).
    pub fn description(&self) -> String {
        match *self {
            Self::F32 => "tomors: float32 values as reconstructed".into(),
            Self::U16 { lo, hi } => format!(
                "tomors: uint16 = round((value - lo) / (hi - lo) * 65535) clamped to [0, 65535]; lo={lo:e} hi={hi:e}"
            ),
            Self::U8 { lo, hi } => format!(
                "tomors: uint8 = round((value - lo) / (hi - lo) * 255) clamped to [0, 255]; lo={lo:e} hi={hi:e}"
            ),
        }
    }

    /// Checks the scaling range.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::F32 => Ok(()),
            Self::U16 { lo, hi } | Self::U8 { lo, hi } => {
                if lo.is_finite() && hi.is_finite() && hi > lo {
                    Ok(())
                } else {
                    Err(IoError::Parameter(format!(
                        "integer TIFF scaling needs finite lo < hi, got lo={lo} hi={hi}"
                    )))
                }
            }
        }
    }
}

fn scale_to(v: f32, lo: f32, hi: f32, max: f32) -> f32 {
    let t = ((v - lo) / (hi - lo) * max).round();
    if t.is_nan() {
        0.0
    } else {
        t.clamp(0.0, max)
    }
}

/// Writes one 2-D image as a single-page TIFF with the given sample type.
pub fn write_image(path: &Path, image: ArrayView2<'_, f32>, depth: TiffDepth) -> Result<()> {
    depth.validate()?;
    let (h, w) = image.dim();
    let f = File::create(path).map_err(|e| os_err(path, e))?;
    let mut bw = BufWriter::new(f);
    let desc = depth.description();
    let te = |e: tiff::TiffError| match e {
        tiff::TiffError::IoError(e) => os_err(path, e),
        e => format_err(path, format!("TIFF encoder: {e}")),
    };
    {
        let mut enc = TiffEncoder::new(&mut bw).map_err(te)?;
        let (w32, h32) = (w as u32, h as u32);
        match depth {
            TiffDepth::F32 => {
                let data: Vec<f32> = image.iter().copied().collect();
                let mut im = enc
                    .new_image::<colortype::Gray32Float>(w32, h32)
                    .map_err(te)?;
                im.encoder()
                    .write_tag(Tag::ImageDescription, desc.as_str())
                    .map_err(te)?;
                im.write_data(&data).map_err(te)?;
            }
            TiffDepth::U16 { lo, hi } => {
                let data: Vec<u16> = image
                    .iter()
                    .map(|&v| scale_to(v, lo, hi, 65535.0) as u16)
                    .collect();
                let mut im = enc.new_image::<colortype::Gray16>(w32, h32).map_err(te)?;
                im.encoder()
                    .write_tag(Tag::ImageDescription, desc.as_str())
                    .map_err(te)?;
                im.write_data(&data).map_err(te)?;
            }
            TiffDepth::U8 { lo, hi } => {
                let data: Vec<u8> = image
                    .iter()
                    .map(|&v| scale_to(v, lo, hi, 255.0) as u8)
                    .collect();
                let mut im = enc.new_image::<colortype::Gray8>(w32, h32).map_err(te)?;
                im.encoder()
                    .write_tag(Tag::ImageDescription, desc.as_str())
                    .map_err(te)?;
                im.write_data(&data).map_err(te)?;
            }
        }
    }
    use std::io::Write;
    bw.flush().map_err(|e| os_err(path, e))?;
    bw.into_inner()
        .map_err(|e| os_err(path, e.into_error()))?
        .sync_all()
        .map_err(|e| os_err(path, e))
}

/// Writes integer images exactly (for tests and for raw integer stacks):
/// 16-bit unsigned grey.
pub fn write_image_u16(path: &Path, image: ArrayView2<'_, u16>) -> Result<()> {
    let (h, w) = image.dim();
    let f = File::create(path).map_err(|e| os_err(path, e))?;
    let mut bw = BufWriter::new(f);
    let data: Vec<u16> = image.iter().copied().collect();
    TiffEncoder::new(&mut bw)
        .and_then(|mut e| e.write_image::<colortype::Gray16>(w as u32, h as u32, &data))
        .map_err(|e| format_err(path, format!("TIFF encoder: {e}")))?;
    use std::io::Write;
    bw.flush().map_err(|e| os_err(path, e))
}
