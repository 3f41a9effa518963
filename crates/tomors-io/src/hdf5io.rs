//! HDF5 readers: DXchange (`/exchange/data`, `data_white`, `data_dark`,
//! `theta` in degrees) and NeXus NXtomo (frames with `image_key`, found at
//! the standard paths or through `NX_class` attributes). External links and
//! virtual datasets are followed by the HDF5 library; datasets compressed
//! with filters that need a plugin that is not installed are reported by the
//! filter's name.

use std::ops::Range;
use std::path::{Path, PathBuf};

use hdf5::types::{TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Dataset, File};
use ndarray::{s, Array1, Array3, Axis};

use crate::error::{format_err, shape_err, unsupported, IoError, Result};
use crate::hdf5direct::DirectLayout;
use crate::source::{check_rows, AngleUnit, FrameGroup, OpenOptions, ProjectionSource, RawSlab};

/// Name of a registered HDF5 filter id (for error messages).
pub fn filter_name(id: i32) -> &'static str {
    match id {
        1 => "deflate (gzip)",
        2 => "shuffle",
        3 => "fletcher32",
        4 => "szip",
        5 => "nbit",
        6 => "scaleoffset",
        305 => "LZO",
        307 => "bzip2",
        32000 => "LZF",
        32001 => "Blosc",
        32004 => "LZ4",
        32008 => "bitshuffle",
        32013 => "ZFP",
        32015 => "Zstandard",
        32016 => "B3D",
        32017 => "SZ",
        32018 => "FCIDECOMP",
        32026 => "Blosc2",
        _ => "unknown",
    }
}

pub(crate) fn h5err(path: &Path, what: &str, e: hdf5::Error) -> IoError {
    format_err(path, format!("{what}: {e}"))
}

/// Opens an HDF5 file, with a one-line error on failure.
pub(crate) fn open_file(path: &Path) -> Result<File> {
    if !path.exists() {
        return Err(crate::error::os_err(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        ));
    }
    File::open(path).map_err(|e| h5err(path, "cannot open as HDF5 (truncated or corrupt?)", e))
}

/// Whether `path` (absolute in the file) names an object, checking each
/// link on the way (HDF5 refuses to test a path whose parents are missing).
pub(crate) fn exists(file: &File, path: &str) -> bool {
    let mut cur = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        cur.push('/');
        cur.push_str(part);
        if !file.link_exists(&cur) {
            return false;
        }
        // The link may be dangling (external file missing).
        if file.loc_type_by_name(&cur).is_err() {
            return false;
        }
    }
    !cur.is_empty()
}

/// Reads a string attribute (variable or fixed length, scalar or 1-element).
pub(crate) fn attr_string(obj: &hdf5::Location, name: &str) -> Option<String> {
    let a = obj.attr(name).ok()?;
    container_string(&a)
}

/// Reads a string dataset or attribute (variable or fixed length, scalar or
/// 1-element).
pub(crate) fn container_string(a: &hdf5::Container) -> Option<String> {
    let d = a.dtype().ok()?.to_descriptor().ok()?;
    let s = match d {
        TypeDescriptor::VarLenUnicode => a
            .read_raw::<VarLenUnicode>()
            .ok()?
            .first()
            .map(|s| s.as_str().to_string()),
        TypeDescriptor::VarLenAscii => a
            .read_raw::<VarLenAscii>()
            .ok()?
            .first()
            .map(|s| s.as_str().to_string()),
        TypeDescriptor::FixedAscii(_) => a
            .read_raw::<hdf5::types::FixedAscii<1024>>()
            .ok()?
            .first()
            .map(|s| s.as_str().trim().to_string()),
        TypeDescriptor::FixedUnicode(_) => a
            .read_raw::<hdf5::types::FixedUnicode<1024>>()
            .ok()?
            .first()
            .map(|s| s.as_str().trim().to_string()),
        _ => None,
    };
    s
}

/// Checks that a dataset's data can be read (filters available, numeric
/// type) and returns its shape.
pub(crate) fn check_dataset(path: &Path, name: &str, ds: &Dataset) -> Result<Vec<usize>> {
    for f in ds.filters() {
        if !f.is_available() {
            return Err(IoError::MissingFilter {
                path: path.to_path_buf(),
                dataset: name.to_string(),
                filter: filter_name(f.id()).to_string(),
                id: f.id(),
            });
        }
    }
    check_virtual_sources(path, name, ds)?;
    let d = ds
        .dtype()
        .and_then(|t| t.to_descriptor())
        .map_err(|e| unsupported(path, format!("dataset {name}: data type: {e}")))?;
    match d {
        TypeDescriptor::Integer(_)
        | TypeDescriptor::Unsigned(_)
        | TypeDescriptor::Float(_)
        | TypeDescriptor::Boolean => {}
        d => {
            return Err(unsupported(
                path,
                format!("dataset {name} holds {d}, not numbers"),
            ))
        }
    }
    Ok(ds.shape())
}

/// The source file names of a virtual dataset's mappings, read through the
/// C API (hdf5-metno's `virtual_map` also parses the selections and fails on
/// some valid ones).
fn virtual_source_files(dcpl: &hdf5::plist::DatasetCreate) -> Vec<String> {
    use hdf5_sys::h5p::{H5Pget_virtual_count, H5Pget_virtual_filename};
    let id = dcpl.id();
    hdf5::sync::sync(|| {
        let mut count: usize = 0;
        // SAFETY: `id` is a live dataset-creation property list and the
        // buffers passed below are as large as the sizes given.
        if unsafe { H5Pget_virtual_count(id, &mut count) } < 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for i in 0..count {
            let n = unsafe { H5Pget_virtual_filename(id, i, std::ptr::null_mut(), 0) };
            if n < 0 {
                continue;
            }
            let mut buf = vec![0u8; n as usize + 1];
            let m = unsafe { H5Pget_virtual_filename(id, i, buf.as_mut_ptr().cast(), buf.len()) };
            if m >= 0 {
                buf.truncate(m as usize);
                out.push(String::from_utf8_lossy(&buf).into_owned());
            }
        }
        out
    })
}

/// A virtual dataset whose source file is missing reads as fill values
/// without any error from HDF5; this makes it an error. Source names are
/// looked for as HDF5 does: as given (absolute, or relative to the working
/// directory) and relative to the directory of the virtual dataset's file.
fn check_virtual_sources(path: &Path, name: &str, ds: &Dataset) -> Result<()> {
    if ds.layout() != hdf5::dataset::Layout::Virtual {
        return Ok(());
    }
    let Ok(dcpl) = ds.dcpl() else { return Ok(()) };
    let dir = path.parent().unwrap_or(Path::new("."));
    for src in virtual_source_files(&dcpl) {
        let src = src.as_str();
        // "." is the virtual file itself; printf-style names (%b) are
        // resolved by HDF5 per block and not checked here.
        if src == "." || src.contains('%') {
            continue;
        }
        let p = Path::new(src);
        if !(p.exists() || dir.join(p).exists()) {
            return Err(format_err(
                path,
                format!("{name} is a virtual dataset whose source file {src} is missing"),
            ));
        }
    }
    Ok(())
}

/// The file an external link points to, when `link` (absolute in the file)
/// is one.
fn external_target(file: &File, link: &str) -> Option<String> {
    use hdf5_sys::h5l::{H5Lget_val, H5Lunpack_elink_val};
    use hdf5_sys::h5p::H5P_DEFAULT;
    let cname = std::ffi::CString::new(link).ok()?;
    let id = file.id();
    hdf5::sync::sync(|| {
        let mut buf = vec![0u8; 4096];
        // SAFETY: `id` is a live file, `cname` a NUL-terminated string and
        // `buf` as large as the size given; the unpacked pointers point into
        // `buf`, which outlives their use.
        unsafe {
            if H5Lget_val(
                id,
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                H5P_DEFAULT,
            ) < 0
            {
                return None;
            }
            let mut flags = 0u32;
            let mut fname: *const std::ffi::c_char = std::ptr::null();
            let mut obj: *const std::ffi::c_char = std::ptr::null();
            if H5Lunpack_elink_val(
                buf.as_ptr().cast(),
                buf.len(),
                &mut flags,
                &mut fname,
                &mut obj,
            ) < 0
                || fname.is_null()
            {
                return None;
            }
            Some(
                std::ffi::CStr::from_ptr(fname)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    })
}

/// The first link on the way to `name` that is an external link to a file
/// that cannot be opened: `(link, file)`.
fn broken_external_link(file: &File, name: &str) -> Option<(String, String)> {
    let mut cur = String::new();
    for part in name.split('/').filter(|p| !p.is_empty()) {
        cur.push('/');
        cur.push_str(part);
        if !file.link_exists(&cur) {
            return None;
        }
        if file.loc_type_by_name(&cur).is_err() {
            return external_target(file, &cur).map(|f| (cur.clone(), f));
        }
    }
    None
}

/// Every external link in the file (groups walked to depth 8) whose target
/// file is missing: `(link, file)`.
pub(crate) fn broken_external_links(file: &File) -> Vec<(String, String)> {
    fn walk(file: &File, group: &str, depth: usize, out: &mut Vec<(String, String)>) {
        if depth > 8 || out.len() > 16 {
            return;
        }
        let Ok(g) = file.group(group) else { return };
        for n in g.member_names().unwrap_or_default() {
            let p = format!("{}/{}", group.trim_end_matches('/'), n);
            if file.loc_type_by_name(&p).is_err() {
                if let Some(f) = external_target(file, &p) {
                    out.push((p, f));
                }
            } else if file.group(&p).is_ok() {
                walk(file, &p, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(file, "/", 0, &mut out);
    out
}

fn open_dataset(file: &File, path: &Path, name: &str) -> Result<Dataset> {
    if !exists(file, name) {
        if let Some((link, target)) = broken_external_link(file, name) {
            return Err(format_err(
                path,
                format!("{link} is an external link to {target}, which is missing or unreadable"),
            ));
        }
        return Err(format_err(path, format!("missing dataset {name}")));
    }
    file.dataset(name)
        .map_err(|e| h5err(path, &format!("cannot open dataset {name}"), e))
}

/// The size of a file now (0 when it cannot be read).
fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// HDF5 reads past the end of a file as zeros (the sec2 driver fills them
/// in): a file that shrank since it was opened — still being written, or
/// replaced — must stop the run instead.
fn check_not_shrunk(path: &Path, len_at_open: u64) -> Result<()> {
    let now = file_len(path);
    if now < len_at_open {
        return Err(format_err(
            path,
            format!(
                "the file shrank while it was read ({len_at_open} bytes at opening, {now} now): \
                 is it still being written?"
            ),
        ));
    }
    Ok(())
}

/// Reads a 1-D numeric dataset as f64.
fn read_1d(file: &File, path: &Path, name: &str) -> Result<Array1<f64>> {
    let ds = open_dataset(file, path, name)?;
    let shape = check_dataset(path, name, &ds)?;
    let n = shape.iter().product::<usize>();
    if shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err(shape_err(
            path,
            format!("{name} should be 1-D, has shape {shape:?}"),
        ));
    }
    let v = ds
        .read_raw::<f64>()
        .map_err(|e| h5err(path, &format!("cannot read {name}"), e))?;
    if v.len() != n {
        return Err(format_err(
            path,
            format!("{name}: read {} values of {n}", v.len()),
        ));
    }
    Ok(Array1::from(v))
}

/// The unit of an angle dataset: the override, else its `units` attribute,
/// else a guess from the values (see [`crate::angles::guess_unit`]), with a
/// warning that says how to set it where the guess is doubtful.
fn angle_unit(
    file: &File,
    path: &Path,
    name: &str,
    values: &Array1<f64>,
    over: Option<AngleUnit>,
) -> AngleUnit {
    if let Some(u) = over {
        return u;
    }
    if let Ok(ds) = file.dataset(name) {
        if let Some(u) = attr_string(&ds, "units").or_else(|| attr_string(&ds, "unit")) {
            if let Ok(u) = u.parse::<AngleUnit>() {
                return u;
            }
            tracing::warn!("{}: {name} has the unknown units '{u}'", path.display());
        }
    }
    let v = values
        .as_slice()
        .map(|s| s.to_vec())
        .unwrap_or_else(|| values.to_vec());
    let (unit, warning) = crate::angles::guess_unit(&v, name);
    match warning {
        Some(w) => tracing::warn!("{}: {w}", path.display()),
        None => tracing::debug!(
            "{}: {name} has no units attribute; read as degrees",
            path.display()
        ),
    }
    unit
}

/// The angles in radians, checked (see [`crate::angles::check_angles`]).
fn checked_radians(path: &Path, name: &str, a: &Array1<f64>, unit: AngleUnit) -> Result<Vec<f32>> {
    let rad = to_radians(a, unit);
    crate::angles::check_angles(&rad, unit)
        .map_err(|m| format_err(path, format!("{name}: {m}")))?;
    if let Some(w) = crate::angles::limited_angle_warning(&rad) {
        tracing::warn!("{}: {name}: {w}", path.display());
    }
    Ok(rad)
}

fn to_radians(a: &Array1<f64>, unit: AngleUnit) -> Vec<f32> {
    a.iter()
        .map(|&x| match unit {
            AngleUnit::Degrees => x.to_radians() as f32,
            AngleUnit::Radians => x as f32,
        })
        .collect()
}

fn read_slab3(
    ds: &Dataset,
    path: &Path,
    name: &str,
    frames: Range<usize>,
    rows: Range<usize>,
) -> Result<Array3<f32>> {
    ds.read_slice::<f32, _, ndarray::Ix3>(s![frames, rows, ..])
        .map_err(|e| h5err(path, &format!("cannot read {name}"), e))
}

/// The row extent of a 3-D dataset's chunks when it is smaller than the
/// number of rows.
fn row_chunk_of(ds: &Dataset, n_rows: usize) -> Option<usize> {
    let c = ds.chunk()?;
    let r = *c.get(1)?;
    (r > 0 && r < n_rows).then_some(r)
}

/// Bytes of one stored value of a dataset (4 when unknown).
fn value_bytes(ds: &Dataset) -> usize {
    ds.dtype().map(|t| t.size()).unwrap_or(4)
}

/// Bytes of the decompressed chunks that hold `rows` rows (a band of whole
/// chunk rows) of every frame of a 3-D dataset chunked along the rows and
/// compressed; `None` for contiguous or uncompressed storage (read
/// directly, never decompressed twice).
fn band_bytes(ds: &Dataset) -> Option<usize> {
    let c = ds.chunk()?;
    if ds.filters().is_empty() || c.len() != 3 {
        return None;
    }
    let shape = ds.shape();
    let frames = shape.first()?.div_ceil(c[0].max(1)) * c[0];
    let cols = shape.get(2)?.div_ceil(c[2].max(1)) * c[2];
    Some(frames * c[1] * cols * value_bytes(ds))
}

/// A prime at least `n` (hash slots of an HDF5 chunk cache).
fn prime_at_least(n: usize) -> usize {
    let is_prime = |k: usize| {
        k >= 2
            && (2..)
                .take_while(|d| d * d <= k)
                .all(|d| !k.is_multiple_of(d))
    };
    (n.max(2)..).find(|&k| is_prime(k)).unwrap_or(n)
}

/// Closes the dataset in `slot` and reopens it (`name` of `file`) with a
/// chunk cache of `bytes` (HDF5's default is 1 MiB, smaller than most
/// chunks of a detector, which are then decompressed again for every read
/// that touches them). The old handle must be the last one open: HDF5
/// shares an open dataset, and its cache, between handles. Fully read chunks
/// are evicted first (w0 = 1), so the chunks a slab shares with the next
/// one stay. On failure the slot is reopened without the cache.
fn reopen_with_cache(
    file: &File,
    path: &Path,
    name: &str,
    slot: &mut Option<Dataset>,
    bytes: usize,
) -> Result<()> {
    use hdf5_sys::h5d::H5Dopen2;
    let chunk = slot
        .as_ref()
        .and_then(|d| {
            d.chunk()
                .map(|c| c.iter().product::<usize>() * value_bytes(d))
        })
        .unwrap_or(1)
        .max(1);
    let slots = prime_at_least((bytes / chunk + 1).saturating_mul(100).min(1 << 24));
    let dapl = hdf5::plist::DatasetAccess::build()
        .chunk_cache(slots, bytes, 1.0)
        .finish()
        .map_err(|e| h5err(path, &format!("cannot set the chunk cache of {name}"), e))?;
    let cname = std::ffi::CString::new(name)
        .map_err(|_| format_err(path, format!("dataset name {name:?} holds a NUL byte")))?;
    *slot = None;
    let id = hdf5::sync::sync(|| {
        // SAFETY: `file` is open, `cname` NUL-terminated and `dapl` a live
        // dataset-access property list.
        unsafe { H5Dopen2(file.id(), cname.as_ptr(), dapl.id()) }
    });
    // SAFETY: a non-negative `id` is a dataset identifier we own.
    let reopened = (id >= 0)
        .then(|| unsafe { hdf5::from_id::<Dataset>(id) }.ok())
        .flatten();
    match reopened {
        Some(d) => {
            *slot = Some(d);
            Ok(())
        }
        None => {
            *slot = Some(open_dataset(file, path, name)?);
            Err(format_err(
                path,
                format!("cannot reopen dataset {name} with a chunk cache"),
            ))
        }
    }
}

/// The dataset of a slot that [`reopen_with_cache`] keeps.
fn slot<'a>(path: &Path, ds: &'a Option<Dataset>) -> Result<&'a Dataset> {
    ds.as_ref()
        .ok_or_else(|| format_err(path, "the dataset was closed (a failed reopening)"))
}

/// Reopens the frame dataset `name` kept in `data` with a chunk cache of
/// `bytes` (at most one band of its chunks); `false` when it is not chunked
/// in bands (nothing to cache).
fn cache_frames(
    file: &File,
    path: &Path,
    name: &str,
    data: &mut Option<Dataset>,
    bytes: usize,
) -> Result<bool> {
    let Some(band) = data.as_ref().and_then(band_bytes) else {
        return Ok(false);
    };
    reopen_with_cache(file, path, name, data, bytes.min(band))?;
    Ok(true)
}

/// Frames `frames`, rows `rows` of the frame dataset `name`: by direct
/// chunk reads where its layout allows ([`DirectLayout`]), else through
/// HDF5 from the dataset kept in `data`.
fn read_frames(
    path: &Path,
    name: &str,
    direct: &Option<DirectLayout>,
    data: &Option<Dataset>,
    frames: Range<usize>,
    rows: Range<usize>,
) -> Result<Array3<f32>> {
    match direct {
        Some(d) => d.read(path, name, frames, rows),
        None => read_slab3(slot(path, data)?, path, name, frames, rows),
    }
}

/// The accessors of [`ProjectionSource`] that every HDF5 source answers
/// from the same fields (`path`, `shape`, `angles`, `n_flats`, `n_darks`
/// and the frame dataset `data`).
macro_rules! hdf5_source_accessors {
    () => {
        fn path(&self) -> &Path {
            &self.path
        }
        fn shape(&self) -> [usize; 3] {
            self.shape
        }
        fn angles(&self) -> &[f32] {
            &self.angles
        }
        fn n_flats(&self) -> usize {
            self.n_flats
        }
        fn n_darks(&self) -> usize {
            self.n_darks
        }
        fn row_chunk(&self) -> Option<usize> {
            row_chunk_of(self.data.as_ref()?, self.shape[1])
        }
        fn stored_value_bytes(&self) -> usize {
            self.data.as_ref().map_or(4, value_bytes)
        }
    };
}

/// Opens an HDF5 scan as DXchange or NXtomo (see [`crate::source::open`]).
pub fn open_hdf5(path: &Path, options: &OpenOptions) -> Result<Box<dyn ProjectionSource>> {
    crate::output::register_input(path);
    let file = open_file(path)?;
    if options.image_key_path.is_some() {
        return Ok(Box::new(NxTomoSource::from_file(file, path, options)?));
    }
    let data_path = options.data_path.as_deref().unwrap_or("/exchange/data");
    if exists(&file, data_path)
        && (options.data_path.is_none() || !has_image_key_near(&file, data_path))
    {
        return Ok(Box::new(DxSource::from_file(file, path, options)?));
    }
    match NxTomoSource::from_file(file, path, options) {
        Ok(s) => Ok(Box::new(s)),
        Err(e) => Err(e),
    }
}

fn has_image_key_near(file: &File, data_path: &str) -> bool {
    let parent = data_path.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
    exists(file, &format!("{parent}/image_key"))
}

/// DXchange HDF5: projections `/exchange/data` `[angle][row][col]`, flats
/// `/exchange/data_white`, darks `/exchange/data_dark` (both optional) and
/// angles `/exchange/theta` in degrees (optional: evenly over 180° without).
pub struct DxSource {
    path: PathBuf,
    /// Always `Some` but while [`reopen_with_cache`] reopens it.
    data: Option<Dataset>,
    /// Where the projections lie when they can be read directly.
    direct: Option<DirectLayout>,
    data_name: String,
    flats: Option<Dataset>,
    darks: Option<Dataset>,
    shape: [usize; 3],
    n_flats: usize,
    n_darks: usize,
    angles: Vec<f32>,
    len_at_open: u64,
    _file: File,
}

fn shape3(path: &Path, name: &str, s: &[usize]) -> Result<[usize; 3]> {
    match *s {
        [a, r, c] if a > 0 && r > 0 && c > 0 => Ok([a, r, c]),
        _ => Err(shape_err(
            path,
            format!("{name} should be a non-empty 3-D [frame][row][col] array, has shape {s:?}"),
        )),
    }
}

impl DxSource {
    /// Whether the projections are read from the file directly (contiguous,
    /// unfiltered, of an exactly converted type; see `hdf5direct`) rather
    /// than through the HDF5 library.
    pub fn reads_directly(&self) -> bool {
        self.direct.is_some()
    }

    /// Opens a DXchange file.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        crate::output::register_input(path);
        Self::from_file(open_file(path)?, path, options)
    }

    fn from_file(file: File, path: &Path, options: &OpenOptions) -> Result<Self> {
        let data_name = options
            .data_path
            .clone()
            .unwrap_or_else(|| "/exchange/data".into());
        let data = open_dataset(&file, path, &data_name)?;
        let shape = shape3(path, &data_name, &check_dataset(path, &data_name, &data)?)?;
        let side = |name: &str| -> Result<(Option<Dataset>, usize)> {
            if !exists(&file, name) {
                return Ok((None, 0));
            }
            let ds = open_dataset(&file, path, name)?;
            let s = shape3(path, name, &check_dataset(path, name, &ds)?)?;
            if s[1..] != shape[1..] {
                return Err(shape_err(
                    path,
                    format!(
                        "{name} has frames of {}×{}, {data_name} has {}×{}",
                        s[1], s[2], shape[1], shape[2]
                    ),
                ));
            }
            Ok((Some(ds), s[0]))
        };
        let (flats, n_flats) = side("/exchange/data_white")?;
        let (darks, n_darks) = side("/exchange/data_dark")?;
        let theta = options
            .angles_path
            .clone()
            .unwrap_or_else(|| "/exchange/theta".into());
        let angles = if exists(&file, &theta) {
            let a = read_1d(&file, path, &theta)?;
            if a.len() != shape[0] {
                return Err(shape_err(
                    path,
                    format!(
                        "{theta} has {} angles, {data_name} has {} projections",
                        a.len(),
                        shape[0]
                    ),
                ));
            }
            if let Some(x) = a.iter().find(|x| !x.is_finite()) {
                return Err(format_err(
                    path,
                    format!("{theta} holds the non-finite angle {x}"),
                ));
            }
            let unit = angle_unit(&file, path, &theta, &a, options.angles_unit);
            checked_radians(path, &theta, &a, unit)?
        } else if options.angles_path.is_some() {
            return Err(format_err(path, format!("missing dataset {theta}")));
        } else {
            tracing::warn!(
                "{}: no {theta}; assuming angles evenly over 180°",
                path.display()
            );
            options.default_angles(path, shape[0])?
        };
        Ok(Self {
            path: path.to_path_buf(),
            direct: DirectLayout::of(&data),
            data: Some(data),
            data_name,
            flats,
            darks,
            shape,
            n_flats,
            n_darks,
            angles,
            len_at_open: file_len(path),
            _file: file,
        })
    }
}

impl ProjectionSource for DxSource {
    hdf5_source_accessors!();
    fn format(&self) -> &'static str {
        "DXchange HDF5"
    }
    fn row_band_cache_bytes(&self) -> Option<usize> {
        // Flats and darks are read with the projections: their bands too.
        let side = [&self.flats, &self.darks]
            .into_iter()
            .flatten()
            .map(|d| band_bytes(d).unwrap_or(0))
            .sum::<usize>();
        band_bytes(self.data.as_ref()?).map(|b| b + side)
    }
    fn set_chunk_cache(&mut self, bytes: usize) -> Result<bool> {
        let file = &self._file;
        if !cache_frames(file, &self.path, &self.data_name, &mut self.data, bytes)? {
            return Ok(false);
        }
        for (ds, name) in [
            (&mut self.flats, "/exchange/data_white"),
            (&mut self.darks, "/exchange/data_dark"),
        ] {
            if let Some(b) = ds.as_ref().and_then(band_bytes) {
                reopen_with_cache(file, &self.path, name, ds, b)?;
            }
        }
        Ok(true)
    }
    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
        check_rows(&self.path, &rows, self.shape[1])?;
        check_not_shrunk(&self.path, self.len_at_open)?;
        let projections = read_frames(
            &self.path,
            &self.data_name,
            &self.direct,
            &self.data,
            0..self.shape[0],
            rows.clone(),
        )?;
        let group = |ds: &Option<Dataset>, n: usize, name: &str| -> Result<Vec<FrameGroup>> {
            Ok(match ds {
                Some(ds) => vec![FrameGroup {
                    position: 0.0,
                    frames: read_slab3(ds, &self.path, name, 0..n, rows.clone())?,
                }],
                None => Vec::new(),
            })
        };
        let slab = RawSlab {
            flats: group(&self.flats, self.n_flats, "/exchange/data_white")?,
            darks: group(&self.darks, self.n_darks, "/exchange/data_dark")?,
            rows,
            projections,
        };
        check_not_shrunk(&self.path, self.len_at_open)?;
        Ok(slab)
    }
}

/// Where the parts of an NXtomo entry are.
#[derive(Clone, Debug, PartialEq)]
pub struct NxPaths {
    /// The frames `[frame][row][col]`.
    pub data: String,
    /// The image keys (absent: every frame is a projection).
    pub image_key: Option<String>,
    /// The rotation angles.
    pub angles: Option<String>,
}

fn nx_class(g: &hdf5::Location) -> Option<String> {
    attr_string(g, "NX_class")
}

fn child_groups_of_class(file: &File, parent: &str, class: &str) -> Vec<String> {
    let Ok(g) = file.group(parent) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in g.member_names().unwrap_or_default() {
        let p = format!("{}/{}", parent.trim_end_matches('/'), name);
        if let Ok(cg) = file.group(&p) {
            if nx_class(&cg).as_deref() == Some(class) {
                out.push(p);
            }
        }
    }
    out
}

/// Finds the NXtomo parts: the standard paths first, then through the
/// `NX_class` attributes (NXentry or NXsubentry with definition NXtomo →
/// NXinstrument → NXdetector with `data`; NXsample with `rotation_angle`).
pub fn find_nxtomo(file: &File) -> Option<NxPaths> {
    let std_data = "/entry/instrument/detector/data";
    if exists(file, std_data) {
        let key = "/entry/instrument/detector/image_key";
        let ang = "/entry/sample/rotation_angle";
        return Some(NxPaths {
            data: std_data.into(),
            image_key: exists(file, key).then(|| key.to_string()),
            angles: exists(file, ang).then(|| ang.to_string()),
        });
    }
    let mut entries = child_groups_of_class(file, "/", "NXentry");
    let subs: Vec<String> = entries
        .iter()
        .flat_map(|e| child_groups_of_class(file, e, "NXsubentry"))
        .collect();
    entries.extend(subs);
    // Entries that declare NXtomo first.
    entries.sort_by_key(|e| {
        let def = file
            .dataset(&format!("{e}/definition"))
            .ok()
            .and_then(|d| container_string(&d));
        def.as_deref().map(str::trim) != Some("NXtomo")
    });
    for e in entries {
        for inst in child_groups_of_class(file, &e, "NXinstrument") {
            for det in child_groups_of_class(file, &inst, "NXdetector") {
                let data = format!("{det}/data");
                if exists(file, &data) {
                    let key = format!("{det}/image_key");
                    let angles = child_groups_of_class(file, &e, "NXsample")
                        .into_iter()
                        .map(|s| format!("{s}/rotation_angle"))
                        .find(|p| exists(file, p));
                    return Some(NxPaths {
                        image_key: exists(file, &key).then_some(key),
                        angles,
                        data,
                    });
                }
            }
        }
        // An NXdata group with data and rotation_angle.
        for d in child_groups_of_class(file, &e, "NXdata") {
            let data = format!("{d}/data");
            if exists(file, &data) {
                let key = format!("{d}/image_key");
                let ang = format!("{d}/rotation_angle");
                return Some(NxPaths {
                    image_key: exists(file, &key).then_some(key),
                    angles: exists(file, &ang).then_some(ang),
                    data,
                });
            }
        }
    }
    None
}

/// A run of consecutive frames of one kind.
#[derive(Clone, Debug)]
struct Run {
    key: i32,
    frames: Range<usize>,
    /// Projections seen before the run.
    position: usize,
}

/// NeXus NXtomo HDF5: one frame dataset with an `image_key` per frame (0
/// projection, 1 flat, 2 dark, 3 invalid). Flats and darks keep their place
/// in the scan, so flats taken before and after are interpolated.
pub struct NxTomoSource {
    path: PathBuf,
    paths: NxPaths,
    /// Always `Some` but while [`reopen_with_cache`] reopens it.
    data: Option<Dataset>,
    /// Where the frames lie when they can be read directly.
    direct: Option<DirectLayout>,
    runs: Vec<Run>,
    shape: [usize; 3],
    n_flats: usize,
    n_darks: usize,
    angles: Vec<f32>,
    len_at_open: u64,
    _file: File,
}

impl NxTomoSource {
    /// Opens an NXtomo file.
    pub fn open(path: &Path, options: &OpenOptions) -> Result<Self> {
        crate::output::register_input(path);
        Self::from_file(open_file(path)?, path, options)
    }

    /// Where the data, keys and angles were found.
    pub fn paths(&self) -> &NxPaths {
        &self.paths
    }

    fn from_file(file: File, path: &Path, options: &OpenOptions) -> Result<Self> {
        let found = find_nxtomo(&file);
        let data_name = match (&options.data_path, &found) {
            (Some(d), _) => d.clone(),
            (None, Some(f)) => f.data.clone(),
            (None, None) => {
                if let Some((link, target)) = broken_external_links(&file).into_iter().next() {
                    return Err(format_err(
                            path,
                            format!(
                                "no detector data found; {link} is an external link to {target}, which is missing or unreadable"
                            ),
                        ));
                }
                return Err(format_err(
                    path,
                    "no /exchange/data (DXchange) and no NXtomo entry with detector data (NeXus); \
                     give the dataset with --data-path",
                ));
            }
        };
        let key_name = match &options.image_key_path {
            Some(k) => Some(k.clone()),
            None => found
                .as_ref()
                .and_then(|f| f.image_key.clone())
                .or_else(|| {
                    let p = data_name.rsplit_once('/').map(|(p, _)| p).unwrap_or("");
                    let k = format!("{p}/image_key");
                    exists(&file, &k).then_some(k)
                }),
        };
        let angles_name = match &options.angles_path {
            Some(a) => Some(a.clone()),
            None => found.as_ref().and_then(|f| f.angles.clone()),
        };
        let data = open_dataset(&file, path, &data_name)?;
        let dshape = shape3(path, &data_name, &check_dataset(path, &data_name, &data)?)?;
        let n_frames = dshape[0];
        let keys: Vec<i32> = match &key_name {
            Some(k) => {
                let v = read_1d(&file, path, k)?;
                if v.len() != n_frames {
                    return Err(shape_err(
                        path,
                        format!(
                            "{k} has {} keys, {data_name} has {n_frames} frames",
                            v.len()
                        ),
                    ));
                }
                let mut out = Vec::with_capacity(v.len());
                for &x in v.iter() {
                    if x != x.round() || !(0.0..=3.0).contains(&x) {
                        return Err(format_err(
                            path,
                            format!("{k} holds the key {x} (valid: 0 projection, 1 flat, 2 dark, 3 invalid)"),
                        ));
                    }
                    out.push(x as i32);
                }
                out
            }
            None => vec![0; n_frames],
        };
        let mut runs: Vec<Run> = Vec::new();
        let mut n_proj = 0usize;
        for (i, &k) in keys.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if r.key == k => r.frames.end = i + 1,
                _ => runs.push(Run {
                    key: k,
                    frames: i..i + 1,
                    position: n_proj,
                }),
            }
            if k == 0 {
                n_proj += 1;
            }
        }
        if n_proj == 0 {
            return Err(format_err(
                path,
                "no projections (no frame has image_key 0)",
            ));
        }
        let count = |key: i32| keys.iter().filter(|&&k| k == key).count();
        let (n_flats, n_darks) = (count(1), count(2));
        let angles = match &angles_name {
            Some(a) => {
                let v = read_1d(&file, path, a)?;
                if let Some(x) = v.iter().find(|x| !x.is_finite()) {
                    return Err(format_err(
                        path,
                        format!("{a} holds the non-finite angle {x}"),
                    ));
                }
                let v: Array1<f64> = if v.len() == n_frames && n_frames != n_proj {
                    keys.iter()
                        .zip(v.iter())
                        .filter(|(&k, _)| k == 0)
                        .map(|(_, &x)| x)
                        .collect()
                } else if v.len() == n_proj {
                    v
                } else {
                    return Err(shape_err(
                        path,
                        format!(
                            "{a} has {} angles for {n_frames} frames of which {n_proj} are projections",
                            v.len()
                        ),
                    ));
                };
                let unit = angle_unit(&file, path, a, &v, options.angles_unit);
                checked_radians(path, a, &v, unit)?
            }
            None => {
                tracing::warn!(
                    "{}: no rotation angles found; assuming evenly over 180°",
                    path.display()
                );
                options.default_angles(path, n_proj)?
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            paths: NxPaths {
                data: data_name,
                image_key: key_name,
                angles: angles_name,
            },
            direct: DirectLayout::of(&data),
            data: Some(data),
            runs,
            shape: [n_proj, dshape[1], dshape[2]],
            n_flats,
            n_darks,
            angles,
            len_at_open: file_len(path),
            _file: file,
        })
    }
}

impl ProjectionSource for NxTomoSource {
    hdf5_source_accessors!();
    fn format(&self) -> &'static str {
        "NeXus NXtomo HDF5"
    }
    fn row_band_cache_bytes(&self) -> Option<usize> {
        band_bytes(self.data.as_ref()?)
    }
    fn set_chunk_cache(&mut self, bytes: usize) -> Result<bool> {
        cache_frames(
            &self._file,
            &self.path,
            &self.paths.data,
            &mut self.data,
            bytes,
        )
    }
    fn read_raw(&self, rows: Range<usize>) -> Result<RawSlab> {
        check_rows(&self.path, &rows, self.shape[1])?;
        check_not_shrunk(&self.path, self.len_at_open)?;
        let mut projections = Array3::<f32>::zeros((self.shape[0], rows.len(), self.shape[2]));
        let (mut flats, mut darks) = (Vec::new(), Vec::new());
        let mut p = 0usize;
        for run in &self.runs {
            if run.key == 3 {
                continue;
            }
            let block = read_frames(
                &self.path,
                &self.paths.data,
                &self.direct,
                &self.data,
                run.frames.clone(),
                rows.clone(),
            )?;
            match run.key {
                0 => {
                    let n = block.len_of(Axis(0));
                    projections.slice_mut(s![p..p + n, .., ..]).assign(&block);
                    p += n;
                }
                1 => flats.push(FrameGroup {
                    position: run.position as f64,
                    frames: block,
                }),
                _ => darks.push(FrameGroup {
                    position: run.position as f64,
                    frames: block,
                }),
            }
        }
        check_not_shrunk(&self.path, self.len_at_open)?;
        Ok(RawSlab {
            rows,
            projections,
            flats,
            darks,
        })
    }
}
