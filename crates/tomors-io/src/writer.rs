//! Volume writers that take a volume `[z][y][x]` slab by slab: `.npy`,
//! HDF5 (dataset `/volume` with the geometry and parameters as attributes)
//! and TIFF stacks (one image per slice, float32 or 8/16-bit with a stated
//! linear scaling).
//!
//! Atomicity: everything is written under a temporary name next to the
//! target (`.NAME.partial` for files, `NAME.partial/` for TIFF directories)
//! and renamed to the final name by [`VolumeWriter::finish`] once every
//! slice is written. A writer dropped before `finish` (an error, an
//! interrupted run) removes its temporary output, so nothing that looks
//! finished is ever left behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ndarray::{s, Array3, ArrayView3};

use crate::error::{format_err, os_err, IoError, Result};
use crate::tiffio::{write_image, TiffDepth};

/// A value of a metadata attribute.
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// A number.
    Float(f64),
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
}

/// Metadata stored with a volume: attributes of the HDF5 dataset, lines of
/// `tomors.txt` in a TIFF stack (a `.npy` file has no place for it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumeMeta {
    /// `(name, value)` pairs, in order.
    pub attrs: Vec<(String, AttrValue)>,
}

impl VolumeMeta {
    /// Adds a number.
    pub fn float(mut self, name: &str, v: f64) -> Self {
        self.attrs.push((name.into(), AttrValue::Float(v)));
        self
    }
    /// Adds an integer.
    pub fn int(mut self, name: &str, v: i64) -> Self {
        self.attrs.push((name.into(), AttrValue::Int(v)));
        self
    }
    /// Adds text.
    pub fn text(mut self, name: &str, v: &str) -> Self {
        self.attrs.push((name.into(), AttrValue::Text(v.into())));
        self
    }

    /// One `name = value` per line.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.attrs {
            let v = match v {
                AttrValue::Float(x) => format!("{x}"),
                AttrValue::Int(x) => format!("{x}"),
                AttrValue::Text(t) => format!("{t:?}"),
            };
            s.push_str(&format!("{k} = {v}\n"));
        }
        s
    }
}

/// Output format of a volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VolumeFormat {
    /// NumPy `.npy`, float32, C order `[z][y][x]`.
    Npy,
    /// HDF5, dataset `/volume` float32 `[z][y][x]`, attributes from the meta.
    Hdf5,
    /// A directory of TIFF images `slice_00000.tif`, one per z.
    TiffStack(TiffDepth),
}

impl VolumeFormat {
    /// The format a path asks for: `.npy`, `.h5`/`.hdf5`/`.nxs`, and a
    /// directory (no extension, or `.tif`/`.tiff` directory name ending in
    /// `/`) for a float32 TIFF stack.
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "npy" => Ok(Self::Npy),
            "h5" | "hdf5" | "hdf" | "nxs" => Ok(Self::Hdf5),
            "" => Ok(Self::TiffStack(TiffDepth::F32)),
            "tif" | "tiff" => Err(IoError::Parameter(format!(
                "{}: a TIFF output is a directory of slices; name it without an extension",
                path.display()
            ))),
            e => Err(IoError::Parameter(format!(
                "{}: unknown output format '.{e}' (use .npy, .h5 or a directory for TIFF slices)",
                path.display()
            ))),
        }
    }
}

/// A volume being written slab by slab.
pub trait VolumeWriter: Send {
    /// The final path.
    fn path(&self) -> &Path;

    /// `[nz, ny, nx]` of the volume.
    fn shape(&self) -> [usize; 3];

    /// Writes slices `z0 .. z0 + slab.len_of(0)`; slabs must come in order
    /// without gaps.
    fn write_slab(&mut self, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()>;

    /// Completes the file and renames it to its final name. Fails (and
    /// removes the temporary output) when slices are missing.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Creates a writer for a volume of shape `[nz, ny, nx]` at `path` in
/// `format`.
pub fn create_writer(
    path: &Path,
    format: VolumeFormat,
    shape: [usize; 3],
    meta: &VolumeMeta,
) -> Result<Box<dyn VolumeWriter>> {
    create_writer_with(path, format, shape, meta, false)
}

/// As [`create_writer`]; with `overwrite`, an existing output (file or TIFF
/// directory) is replaced — only by [`VolumeWriter::finish`], so a failed run
/// keeps the old output.
pub fn create_writer_with(
    path: &Path,
    format: VolumeFormat,
    shape: [usize; 3],
    meta: &VolumeMeta,
    overwrite: bool,
) -> Result<Box<dyn VolumeWriter>> {
    if !overwrite && path.exists() && !matches!(format, VolumeFormat::TiffStack(_)) {
        return Err(format_err(
            path,
            "exists already; remove it or choose another output",
        ));
    }
    if shape.contains(&0) {
        return Err(IoError::Parameter(format!("empty volume {shape:?}")));
    }
    Ok(match format {
        VolumeFormat::Npy => Box::new(NpyWriter::create(path, shape, meta)?),
        VolumeFormat::Hdf5 => Box::new(Hdf5Writer::create(path, shape, meta)?),
        VolumeFormat::TiffStack(depth) => Box::new(TiffStackWriter::create_with(
            path, shape, depth, meta, overwrite,
        )?),
    })
}

/// Writes a whole volume at once (see [`create_writer`]).
pub fn write_volume(
    path: &Path,
    format: VolumeFormat,
    volume: ArrayView3<'_, f32>,
    meta: &VolumeMeta,
) -> Result<()> {
    let (z, y, x) = volume.dim();
    let mut w = create_writer(path, format, [z, y, x], meta)?;
    w.write_slab(0, volume)?;
    w.finish()
}

/// The temporary name of a file output: `.NAME.partial` beside it.
pub fn partial_file_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

/// The temporary name of a directory output: `NAME.partial`.
pub fn partial_dir_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    path.with_file_name(format!("{name}.partial"))
}

fn check_parent(path: &Path) -> Result<()> {
    if path.file_name().is_none() {
        return Err(IoError::Parameter(format!(
            "{}: not a file name",
            path.display()
        )));
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(os_err(
            path,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the output directory does not exist",
            ),
        ));
    }
    if path.is_dir() {
        return Err(format_err(path, "is a directory"));
    }
    Ok(())
}

struct SlabCursor {
    shape: [usize; 3],
    next: usize,
}

impl SlabCursor {
    fn check(&mut self, path: &Path, z0: usize, slab: &ArrayView3<'_, f32>) -> Result<()> {
        let (n, y, x) = slab.dim();
        if [y, x] != self.shape[1..] {
            return Err(IoError::Parameter(format!(
                "{}: slab of {y}×{x} slices for a volume of {}×{}",
                path.display(),
                self.shape[1],
                self.shape[2]
            )));
        }
        if z0 != self.next || z0 + n > self.shape[0] {
            return Err(IoError::Parameter(format!(
                "{}: slab of slices {z0}..{} written, expected slices from {} (volume of {})",
                path.display(),
                z0 + n,
                self.next,
                self.shape[0]
            )));
        }
        self.next += n;
        Ok(())
    }
    fn complete(&self, path: &Path) -> Result<()> {
        if self.next != self.shape[0] {
            return Err(IoError::Parameter(format!(
                "{}: only {} of {} slices were written",
                path.display(),
                self.next,
                self.shape[0]
            )));
        }
        Ok(())
    }
}

/// An output being written under its temporary name (a file or a
/// directory): [`Staged::commit`] moves it to the final name; dropped
/// uncommitted, it is removed, so a failed run leaves nothing behind.
struct Staged(PathBuf);

impl Staged {
    /// Renames the temporary output to `path`.
    fn commit(&mut self, path: &Path) -> Result<()> {
        std::fs::rename(&self.0, path).map_err(|e| os_err(path, e))?;
        self.0 = PathBuf::new();
        Ok(())
    }
}

impl std::ops::Deref for Staged {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.0.as_os_str().is_empty() {
            return;
        }
        let _ = if self.0.is_dir() {
            std::fs::remove_dir_all(&self.0)
        } else {
            std::fs::remove_file(&self.0)
        };
    }
}

/// `.npy` writer (float32, little endian, C order).
pub struct NpyWriter {
    path: PathBuf,
    tmp: Staged,
    file: Option<BufWriter<File>>,
    cursor: SlabCursor,
}

impl NpyWriter {
    /// Starts writing `path` (under its temporary name).
    pub fn create(path: &Path, shape: [usize; 3], _meta: &VolumeMeta) -> Result<Self> {
        check_parent(path)?;
        let tmp = partial_file_name(path);
        let f = File::create(&tmp).map_err(|e| os_err(&tmp, e))?;
        let mut w = BufWriter::new(f);
        let mut header = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}, {}), }}",
            shape[0], shape[1], shape[2]
        );
        // Pad so that the data start on a multiple of 64 bytes.
        let total = 10 + header.len() + 1;
        header.push_str(&" ".repeat((64 - total % 64) % 64));
        header.push('\n');
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        let mut this = Self {
            path: path.to_path_buf(),
            tmp: Staged(tmp.clone()),
            file: None,
            cursor: SlabCursor { shape, next: 0 },
        };
        w.write_all(&bytes).map_err(|e| os_err(&tmp, e))?;
        this.file = Some(w);
        Ok(this)
    }
}

impl VolumeWriter for NpyWriter {
    fn path(&self) -> &Path {
        &self.path
    }
    fn shape(&self) -> [usize; 3] {
        self.cursor.shape
    }
    fn write_slab(&mut self, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        self.cursor.check(&self.path, z0, &slab)?;
        let w = self
            .file
            .as_mut()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        let mut buf = Vec::with_capacity(slab.len() * 4);
        for &v in slab.iter() {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        w.write_all(&buf).map_err(|e| os_err(&self.tmp, e))
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        let w = self
            .file
            .take()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        let f = w
            .into_inner()
            .map_err(|e| os_err(&self.tmp, e.into_error()))?;
        f.sync_all().map_err(|e| os_err(&self.tmp, e))?;
        drop(f);
        self.tmp.commit(&self.path)
    }
}

impl Drop for NpyWriter {
    fn drop(&mut self) {
        // Close the file before `Staged` removes an unfinished one.
        self.file.take();
    }
}

/// HDF5 writer: dataset `/volume` (float32 `[z][y][x]`, chunked by slice)
/// with the metadata as attributes of the dataset.
pub struct Hdf5Writer {
    path: PathBuf,
    tmp: Staged,
    file: Option<hdf5::File>,
    ds: Option<hdf5::Dataset>,
    cursor: SlabCursor,
}

fn h5w(path: &Path, e: hdf5::Error) -> IoError {
    format_err(path, format!("HDF5 write: {e}"))
}

impl Hdf5Writer {
    /// Starts writing `path` (under its temporary name).
    pub fn create(path: &Path, shape: [usize; 3], meta: &VolumeMeta) -> Result<Self> {
        check_parent(path)?;
        let tmp = partial_file_name(path);
        let mut this = Self {
            path: path.to_path_buf(),
            tmp: Staged(tmp.clone()),
            file: None,
            ds: None,
            cursor: SlabCursor { shape, next: 0 },
        };
        // Probe writability with the OS first for a clear error.
        File::create(&tmp).map_err(|e| os_err(&tmp, e))?;
        let f = hdf5::File::create(&tmp).map_err(|e| h5w(&tmp, e))?;
        let ds = f
            .new_dataset::<f32>()
            .chunk((1, shape[1], shape[2]))
            .shape(shape)
            .create("volume")
            .map_err(|e| h5w(&tmp, e))?;
        for (k, v) in &meta.attrs {
            match v {
                AttrValue::Float(x) => ds
                    .new_attr::<f64>()
                    .create(k.as_str())
                    .and_then(|a| a.write_scalar(x)),
                AttrValue::Int(x) => ds
                    .new_attr::<i64>()
                    .create(k.as_str())
                    .and_then(|a| a.write_scalar(x)),
                AttrValue::Text(t) => {
                    let s: hdf5::types::VarLenUnicode = t.parse().map_err(|_| {
                        IoError::Parameter(format!("attribute {k}: text with a NUL"))
                    })?;
                    ds.new_attr::<hdf5::types::VarLenUnicode>()
                        .create(k.as_str())
                        .and_then(|a| a.write_scalar(&s))
                }
            }
            .map_err(|e| h5w(&tmp, e))?;
        }
        this.file = Some(f);
        this.ds = Some(ds);
        Ok(this)
    }
}

impl VolumeWriter for Hdf5Writer {
    fn path(&self) -> &Path {
        &self.path
    }
    fn shape(&self) -> [usize; 3] {
        self.cursor.shape
    }
    fn write_slab(&mut self, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        self.cursor.check(&self.path, z0, &slab)?;
        let n = slab.len_of(ndarray::Axis(0));
        let ds = self
            .ds
            .as_ref()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        // No copy when the slab is already in C order (the usual case).
        let std = slab.as_standard_layout();
        ds.write_slice(std.view(), s![z0..z0 + n, .., ..])
            .map_err(|e| h5w(&self.tmp, e))
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        self.ds.take();
        if let Some(f) = self.file.take() {
            f.flush().map_err(|e| h5w(&self.tmp, e))?;
            f.close().map_err(|e| h5w(&self.tmp, e))?;
        }
        self.tmp.commit(&self.path)
    }
}

impl Drop for Hdf5Writer {
    fn drop(&mut self) {
        // Close the file before `Staged` removes an unfinished one.
        self.ds.take();
        self.file.take();
    }
}

/// TIFF stack writer: `DIR/slice_00000.tif` …, written into `DIR.partial/`
/// and renamed to `DIR` when complete; `DIR/tomors.txt` holds the metadata
/// and the scaling.
pub struct TiffStackWriter {
    path: PathBuf,
    tmp: Staged,
    depth: TiffDepth,
    cursor: SlabCursor,
    digits: usize,
    replace: bool,
}

impl TiffStackWriter {
    /// Starts writing the directory `path` (which must not exist or be empty).
    pub fn create(
        path: &Path,
        shape: [usize; 3],
        depth: TiffDepth,
        meta: &VolumeMeta,
    ) -> Result<Self> {
        Self::create_with(path, shape, depth, meta, false)
    }

    /// As [`TiffStackWriter::create`]; with `overwrite` an existing
    /// directory is replaced when the stack is complete.
    pub fn create_with(
        path: &Path,
        shape: [usize; 3],
        depth: TiffDepth,
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self> {
        depth.validate()?;
        if path.file_name().is_none() {
            return Err(IoError::Parameter(format!(
                "{}: not a directory name",
                path.display()
            )));
        }
        if path.exists() && !(overwrite && path.is_dir()) {
            let empty = path.is_dir()
                && std::fs::read_dir(path)
                    .map(|mut d| d.next().is_none())
                    .unwrap_or(false);
            if !empty {
                return Err(format_err(
                    path,
                    "exists already; remove it or choose another output",
                ));
            }
        }
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(os_err(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the output directory does not exist",
                ),
            ));
        }
        let tmp = partial_dir_name(path);
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| os_err(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| os_err(&tmp, e))?;
        let this = Self {
            path: path.to_path_buf(),
            tmp: Staged(tmp.clone()),
            depth,
            cursor: SlabCursor { shape, next: 0 },
            digits: shape[0].saturating_sub(1).to_string().len().max(5),
            replace: overwrite,
        };
        let text = format!(
            "# tomors volume as a TIFF stack: one image per z slice, [y][x]\nshape = [{}, {}, {}]\nscaling = {:?}\n{}",
            shape[0],
            shape[1],
            shape[2],
            depth.description(),
            meta.to_text()
        );
        let mp = tmp.join("tomors.txt");
        std::fs::write(&mp, text).map_err(|e| os_err(&mp, e))?;
        Ok(this)
    }

    /// File name of slice `z`.
    pub fn slice_name(&self, z: usize) -> String {
        format!("slice_{z:0width$}.tif", width = self.digits)
    }
}

impl VolumeWriter for TiffStackWriter {
    fn path(&self) -> &Path {
        &self.path
    }
    fn shape(&self) -> [usize; 3] {
        self.cursor.shape
    }
    fn write_slab(&mut self, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        self.cursor.check(&self.path, z0, &slab)?;
        for (k, img) in slab.outer_iter().enumerate() {
            let p = self.tmp.join(self.slice_name(z0 + k));
            write_image(&p, img, self.depth)?;
        }
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        if self.path.is_dir() {
            // Checked empty at creation (or to be replaced).
            if self.replace {
                std::fs::remove_dir_all(&self.path).map_err(|e| os_err(&self.path, e))?;
            } else {
                std::fs::remove_dir(&self.path).map_err(|e| os_err(&self.path, e))?;
            }
        }
        self.tmp.commit(&self.path)
    }
}

/// Reads back a volume written as `.npy` (for tests and tools).
pub fn read_npy_volume(path: &Path) -> Result<Array3<f32>> {
    let b = crate::npy::BinArray::open_npy(path)?;
    let r = b.shape()[1];
    b.read_rows(0..r)
}

/// Reads back the `/volume` dataset of an HDF5 volume.
pub fn read_hdf5_volume(path: &Path) -> Result<Array3<f32>> {
    let f = crate::hdf5io::open_file(path)?;
    let ds = f
        .dataset("volume")
        .map_err(|e| format_err(path, format!("no /volume: {e}")))?;
    ds.read::<f32, ndarray::Ix3>()
        .map_err(|e| format_err(path, format!("cannot read /volume: {e}")))
}
