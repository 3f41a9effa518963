//! Volume writers that take a volume `[z][y][x]` slab by slab: `.npy`,
//! HDF5 (dataset `/volume` with the geometry and parameters as attributes)
//! and TIFF stacks (one image per slice, float32 or 8/16-bit with a stated
//! linear scaling).
//!
//! Safety: every writer writes through [`crate::output`]: under a temporary
//! name unique to the run next to the target (`.NAME.XXXXXX.partial`, a
//! file or a directory), moved to the final name by [`VolumeWriter::finish`]
//! once every slice is written, never over an output that appeared meanwhile
//! (unless `overwrite`, and then only over an output tomors wrote), never
//! onto an input. A writer dropped before `finish` (an error, an
//! interrupted run) removes its temporary output, so nothing that looks
//! finished is ever left behind. Slices with a non-finite value (NaN, ±inf)
//! are refused: a volume that holds them is an error, not an output.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use ndarray::{s, Array3, ArrayView3};

pub use crate::compression::Compression;
use crate::error::{format_err, os_err, IoError, Result};
use crate::hdf5direct::DirectChunks;
use crate::output::{OutputKind, StagedDir, StagedFile};
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

    /// The last value named `name`.
    pub fn get(&self, name: &str) -> Option<&AttrValue> {
        self.attrs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The run's recorded configuration ([`crate::provenance::CONFIG_ATTR`]).
    pub fn config(&self) -> Option<&str> {
        match self.get(crate::provenance::CONFIG_ATTR) {
            Some(AttrValue::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// The attributes without the recorded configuration.
    pub fn without_config(&self) -> Self {
        Self {
            attrs: self
                .attrs
                .iter()
                .filter(|(k, _)| k != crate::provenance::CONFIG_ATTR)
                .cloned()
                .collect(),
        }
    }

    /// The voxel size and its unit: `voxel_size` (cone beam, world units,
    /// unit unknown) or `pixel_size` (parallel beam, in detector pixels);
    /// `(1, pixel)` when neither is given.
    pub fn voxel(&self) -> (f64, Option<&'static str>) {
        let num = |k: &str| match self.get(k) {
            Some(AttrValue::Float(v)) if v.is_finite() && *v > 0.0 => Some(*v),
            _ => None,
        };
        if let Some(v) = num("voxel_size") {
            (v, None)
        } else {
            (num("pixel_size").unwrap_or(1.0), Some("pixel"))
        }
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
    /// NeXus (HDF5): `/entry` (NXentry) with `/entry/data` (NXdata) whose
    /// signal is the volume, with axes z, y, x.
    Nexus,
    /// OME-Zarr (NGFF 0.4, Zarr v2): a directory with a mean-pooled
    /// multiscale pyramid.
    OmeZarr,
    /// A directory of TIFF images `slice_00000.tif`, one per z.
    TiffStack(TiffDepth),
}

impl VolumeFormat {
    /// The format a path asks for: `.npy`, `.h5`/`.hdf5`/`.hdf`, `.nxs`
    /// (NeXus), `.zarr` (OME-Zarr), and a directory (no extension) for a
    /// float32 TIFF stack.
    pub fn from_path(path: &Path) -> Result<Self> {
        let ext = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "npy" => Ok(Self::Npy),
            "h5" | "hdf5" | "hdf" => Ok(Self::Hdf5),
            "nxs" | "nx5" => Ok(Self::Nexus),
            "zarr" => Ok(Self::OmeZarr),
            "" => Ok(Self::TiffStack(TiffDepth::F32)),
            "tif" | "tiff" => Err(IoError::Parameter(format!(
                "{}: a TIFF output is a directory of slices; name it without an extension",
                path.display()
            ))),
            e => Err(IoError::Parameter(format!(
                "{}: unknown output format '.{e}' (use .npy, .h5, .nxs, .zarr or a directory for TIFF slices)",
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

/// As [`create_writer`]; with `overwrite`, an existing output that tomors
/// wrote (see [`crate::output::is_replaceable`]) is replaced — only by
/// [`VolumeWriter::finish`], so a failed run keeps the old output.
pub fn create_writer_with(
    path: &Path,
    format: VolumeFormat,
    shape: [usize; 3],
    meta: &VolumeMeta,
    overwrite: bool,
) -> Result<Box<dyn VolumeWriter>> {
    let options = WriteOptions {
        overwrite,
        ..Default::default()
    };
    create_writer_opts(path, format, shape, meta, &options)
}

/// Options of a volume output beyond its format.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WriteOptions {
    /// Replace an existing output that tomors wrote.
    pub overwrite: bool,
    /// Chunk compression of HDF5 and NeXus outputs (refused for the other
    /// formats unless `None`).
    pub compression: Compression,
}

/// Creates a writer of a `[nz, ny, nx]` volume with `options`. The
/// recorded configuration in `meta` ([`VolumeMeta::config`]) goes where
/// the format keeps it (see [`crate::provenance`]).
pub fn create_writer_opts(
    path: &Path,
    format: VolumeFormat,
    shape: [usize; 3],
    meta: &VolumeMeta,
    options: &WriteOptions,
) -> Result<Box<dyn VolumeWriter>> {
    if shape.contains(&0) {
        return Err(IoError::Parameter(format!("empty volume {shape:?}")));
    }
    let overwrite = options.overwrite;
    let compression = options.compression;
    if compression != Compression::None
        && !matches!(format, VolumeFormat::Hdf5 | VolumeFormat::Nexus)
    {
        return Err(IoError::Parameter(format!(
            "{}: --compression applies to HDF5 and NeXus outputs (.h5, .nxs); OME-Zarr is always compressed",
            path.display()
        )));
    }
    Ok(match format {
        VolumeFormat::Npy => Box::new(NpyWriter::create_with(path, shape, meta, overwrite)?),
        VolumeFormat::Hdf5 => Box::new(Hdf5Writer::create_opts(path, shape, meta, options)?),
        VolumeFormat::Nexus => Box::new(crate::nexus::NexusWriter::create(
            path, shape, meta, options,
        )?),
        VolumeFormat::OmeZarr => Box::new(crate::zarr::OmeZarrWriter::create(
            path, shape, meta, overwrite,
        )?),
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

impl VolumeFormat {
    /// What an output of this format is on disk.
    pub fn output_kind(self) -> OutputKind {
        match self {
            Self::Npy => OutputKind::NPY,
            Self::Hdf5 | Self::Nexus => OutputKind::HDF5,
            Self::OmeZarr => OutputKind::ZarrDir,
            Self::TiffStack(_) => OutputKind::TiffDir,
        }
    }
}

/// The temporaries of `path` that exist now (`.NAME.XXXXXX.partial` beside
/// it): for tests and tools that check that nothing was left behind.
pub fn temporaries_of(path: &Path) -> Vec<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with(&prefix) && n.ends_with(".partial")
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Refuses a slab with a non-finite value: the volume would hold NaN or
/// ±inf (inputs near the float range, a diverging method).
pub(crate) fn check_finite_slab(path: &Path, z0: usize, slab: &ArrayView3<'_, f32>) -> Result<()> {
    if slab.iter().all(|v| v.is_finite()) {
        return Ok(());
    }
    let ((z, y, x), v) = slab
        .indexed_iter()
        .find(|(_, v)| !v.is_finite())
        .map(|(i, &v)| (i, v))
        .expect("a non-finite value exists");
    Err(IoError::Output {
        path: path.to_path_buf(),
        message: format!(
            "the reconstructed volume holds the non-finite value {v} at slice {}, y {y}, x {x} \
             (input values too large, or a diverging method); nothing written",
            z0 + z
        ),
    })
}

pub(crate) struct SlabCursor {
    pub(crate) shape: [usize; 3],
    pub(crate) next: usize,
}

impl SlabCursor {
    /// A cursor at slice 0 of a `shape` volume.
    pub(crate) fn new(shape: [usize; 3]) -> Self {
        Self { shape, next: 0 }
    }

    /// Checks that `slab` comes next and fits, and moves past it.
    pub(crate) fn check(
        &mut self,
        path: &Path,
        z0: usize,
        slab: &ArrayView3<'_, f32>,
    ) -> Result<()> {
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
    /// Fails unless every slice was written.
    pub(crate) fn complete(&self, path: &Path) -> Result<()> {
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

/// `.npy` writer (float32, little endian, C order): the header through
/// `ndarray-npy`, then the slices as they come.
pub struct NpyWriter {
    path: PathBuf,
    file: Option<BufWriter<File>>,
    stage: Option<StagedFile>,
    /// The provenance sidecar (see [`crate::provenance::npy_sidecar`]),
    /// written already, moved into place just before the volume.
    sidecar: Option<StagedFile>,
    cursor: SlabCursor,
}

impl NpyWriter {
    /// Starts writing `path` (under its temporary name); `path` must not
    /// exist.
    pub fn create(path: &Path, shape: [usize; 3], meta: &VolumeMeta) -> Result<Self> {
        Self::create_with(path, shape, meta, false)
    }

    /// As [`NpyWriter::create`]; with `overwrite` an existing `.npy` output
    /// is replaced when the volume is complete.
    pub fn create_with(
        path: &Path,
        shape: [usize; 3],
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self> {
        use ndarray_npy::npy::header::{Header, Layout};
        use ndarray_npy::WritableElement;
        let (stage, file) = StagedFile::create(path, OutputKind::NPY, overwrite)?;
        let sidecar = match meta.config() {
            Some(config) => {
                let side = crate::provenance::npy_sidecar(path);
                let kind = OutputKind::File {
                    magic: crate::provenance::CONFIG_HEADER.as_bytes(),
                };
                // The sidecar follows its volume: a tomors sidecar left
                // without its `.npy` (the volume was deleted) is replaced;
                // anything else at its name is refused.
                let orphan = side.exists() && crate::output::is_replaceable(&side, kind).is_ok();
                let (st, mut f) = StagedFile::create(&side, kind, overwrite || orphan)?;
                f.write_all(config.as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(|e| os_err(st.path(), e))?;
                Some(st)
            }
            None => None,
        };
        let tmp = stage.path().to_path_buf();
        let mut w = BufWriter::new(file);
        Header {
            type_descriptor: <f32 as WritableElement>::type_descriptor(),
            layout: Layout::Standard,
            shape: shape.to_vec(),
        }
        .write(&mut w)
        .map_err(|e| format_err(&tmp, format!("cannot write the .npy header: {e}")))?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Some(w),
            stage: Some(stage),
            sidecar,
            cursor: SlabCursor { shape, next: 0 },
        })
    }

    fn tmp(&self) -> PathBuf {
        self.stage
            .as_ref()
            .map_or_else(|| self.path.clone(), |s| s.path().to_path_buf())
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
        check_finite_slab(&self.path, z0, &slab)?;
        let tmp = self.tmp();
        let w = self
            .file
            .as_mut()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        let mut buf = Vec::with_capacity(slab.len() * 4);
        for &v in slab.iter() {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        w.write_all(&buf).map_err(|e| os_err(&tmp, e))
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        let tmp = self.tmp();
        let w = self
            .file
            .take()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        let f = w.into_inner().map_err(|e| os_err(&tmp, e.into_error()))?;
        f.sync_all().map_err(|e| os_err(&tmp, e))?;
        drop(f);
        let stage = self.stage.take().expect("a writer finishes once");
        let sidecar = self.sidecar.take();
        let side_path = sidecar.as_ref().map(|s| s.target().to_path_buf());
        if let Some(side) = sidecar {
            side.commit()?;
        }
        stage.commit().inspect_err(|_| {
            // No provenance without its volume.
            if let Some(p) = side_path {
                let _ = std::fs::remove_file(p);
            }
        })
    }
}

impl Drop for NpyWriter {
    fn drop(&mut self) {
        // Close the file before the stage removes an unfinished one.
        self.file.take();
        self.stage.take();
        self.sidecar.take();
    }
}

/// HDF5 writer: dataset `/volume` (float32 `[z][y][x]`, chunked by slice)
/// with the metadata as attributes of the dataset.
pub struct Hdf5Writer {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<hdf5::File>,
    ds: Option<hdf5::Dataset>,
    /// The chunks' places in the file when slabs are written directly.
    direct: Option<DirectChunks>,
    stage: Option<StagedFile>,
    cursor: SlabCursor,
}

pub(crate) fn h5w(path: &Path, e: hdf5::Error) -> IoError {
    format_err(path, format!("HDF5 write: {e}"))
}

/// Bytes of the HDF5 chunk cache of a written volume: one slice chunk (the
/// library's default would be 1 MiB per dataset whatever the chunk size).
pub fn hdf5_write_cache_bytes(shape: [usize; 3]) -> usize {
    shape[1] * shape[2] * 4
}

/// Caps the HDF5 library's free lists (memory it keeps for reuse instead of
/// returning it) at 1 MiB per list and 4 MiB in all per kind, so that the
/// writer's buffers stay within the memory budget.
pub(crate) fn limit_hdf5_free_lists() {
    hdf5::sync::sync(|| {
        // SAFETY: a plain library call with integer limits.
        unsafe {
            hdf5_sys::h5::H5set_free_list_limits(
                4 << 20,
                1 << 20,
                4 << 20,
                1 << 20,
                4 << 20,
                1 << 20,
            );
        }
    });
}

impl Hdf5Writer {
    /// Whether slabs go straight to the chunks' places in the file (an
    /// uncompressed volume; see `hdf5direct`) rather than through the HDF5
    /// library.
    pub fn writes_directly(&self) -> bool {
        self.direct.is_some()
    }

    /// Starts writing `path` (under its temporary name); `path` must not
    /// exist.
    pub fn create(path: &Path, shape: [usize; 3], meta: &VolumeMeta) -> Result<Self> {
        Self::create_with(path, shape, meta, false)
    }

    /// As [`Hdf5Writer::create`]; with `overwrite` an existing HDF5 output
    /// is replaced when the volume is complete.
    pub fn create_with(
        path: &Path,
        shape: [usize; 3],
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self> {
        let options = WriteOptions {
            overwrite,
            ..Default::default()
        };
        Self::create_opts(path, shape, meta, &options)
    }

    /// As [`Hdf5Writer::create`] with `options` (overwrite, compression).
    pub fn create_opts(
        path: &Path,
        shape: [usize; 3],
        meta: &VolumeMeta,
        options: &WriteOptions,
    ) -> Result<Self> {
        let (stage, file) = StagedFile::create(path, OutputKind::HDF5, options.overwrite)?;
        drop(file);
        let tmp = stage.path().to_path_buf();
        let mut this = Self {
            path: path.to_path_buf(),
            tmp: tmp.clone(),
            file: None,
            ds: None,
            direct: None,
            stage: Some(stage),
            cursor: SlabCursor { shape, next: 0 },
        };
        limit_hdf5_free_lists();
        let f = hdf5::File::create(&tmp).map_err(|e| h5w(&tmp, e))?;
        let ds =
            volume_dataset(&f, "volume", shape, options.compression).map_err(|e| h5w(&tmp, e))?;
        write_attrs(&ds, &meta.attrs, &tmp)?;
        this.direct = DirectChunks::of(&ds, &tmp, shape);
        this.file = Some(f);
        this.ds = Some(ds);
        Ok(this)
    }
}

/// Creates the chunked (one slice per chunk), optionally compressed
/// float32 volume dataset `name` in `group`.
pub(crate) fn volume_dataset(
    group: &hdf5::Group,
    name: &str,
    shape: [usize; 3],
    compression: Compression,
) -> hdf5::Result<hdf5::Dataset> {
    let mut b = group
        .new_dataset::<f32>()
        .chunk((1, shape[1], shape[2]))
        .chunk_cache(521, hdf5_write_cache_bytes(shape), 1.0);
    if compression == Compression::None {
        // Every chunk gets its place in the file now and is never filled:
        // the slabs are written there directly (`crate::hdf5direct`).
        b = b
            .alloc_time(Some(hdf5::plist::dataset_create::AllocTime::Early))
            .fill_time(hdf5::plist::dataset_create::FillTime::Never);
    }
    compression.apply(b).shape(shape).create(name)
}

/// Writes `attrs` as HDF5 attributes of `loc` (errors name `tmp`).
pub(crate) fn write_attrs(
    loc: &hdf5::Location,
    attrs: &[(String, AttrValue)],
    tmp: &Path,
) -> Result<()> {
    for (k, v) in attrs {
        if loc.attr(k).is_ok() {
            loc.delete_attr(k).map_err(|e| h5w(tmp, e))?;
        }
        write_attr(loc, k, v).map_err(|e| match e {
            AttrError::H5(e) => h5w(tmp, e),
            AttrError::Nul => IoError::Parameter(format!("attribute {k}: text with a NUL")),
        })?;
    }
    Ok(())
}

enum AttrError {
    H5(hdf5::Error),
    Nul,
}

fn write_attr(loc: &hdf5::Location, k: &str, v: &AttrValue) -> std::result::Result<(), AttrError> {
    match v {
        AttrValue::Float(x) => loc
            .new_attr::<f64>()
            .create(k)
            .and_then(|a| a.write_scalar(x)),
        AttrValue::Int(x) => loc
            .new_attr::<i64>()
            .create(k)
            .and_then(|a| a.write_scalar(x)),
        AttrValue::Text(t) => {
            let s: hdf5::types::VarLenUnicode = t.parse().map_err(|_| AttrError::Nul)?;
            loc.new_attr::<hdf5::types::VarLenUnicode>()
                .create(k)
                .and_then(|a| a.write_scalar(&s))
        }
    }
    .map_err(AttrError::H5)
}

impl Hdf5Writer {
    /// A writer of the open dataset `ds` of `file`, the staged temporary of
    /// `path` (the NeXus writer lays out its groups, then writes slabs,
    /// finishes and cleans up exactly as a plain HDF5 volume does).
    pub(crate) fn from_parts(
        path: &Path,
        stage: StagedFile,
        file: hdf5::File,
        ds: hdf5::Dataset,
        shape: [usize; 3],
    ) -> Self {
        let tmp = stage.path().to_path_buf();
        Self {
            path: path.to_path_buf(),
            direct: DirectChunks::of(&ds, &tmp, shape),
            tmp,
            file: Some(file),
            ds: Some(ds),
            stage: Some(stage),
            cursor: SlabCursor::new(shape),
        }
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
        check_finite_slab(&self.path, z0, &slab)?;
        let n = slab.len_of(ndarray::Axis(0));
        let ds = self
            .ds
            .as_ref()
            .ok_or_else(|| format_err(&self.path, "writer already closed"))?;
        // No copy when the slab is already in C order (the usual case).
        let std = slab.as_standard_layout();
        if let (Some(d), Some(values)) = (&self.direct, std.as_slice()) {
            return d.write(&self.tmp, z0, values);
        }
        ds.write_slice(std.view(), s![z0..z0 + n, .., ..])
            .map_err(|e| h5w(&self.tmp, e))
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        self.direct.take();
        self.ds.take();
        if let Some(f) = self.file.take() {
            f.flush().map_err(|e| h5w(&self.tmp, e))?;
            f.close().map_err(|e| h5w(&self.tmp, e))?;
        }
        let stage = self.stage.take().expect("a writer finishes once");
        stage.commit()
    }
}

impl Drop for Hdf5Writer {
    fn drop(&mut self) {
        // Close the file before the stage removes an unfinished one.
        self.direct.take();
        self.ds.take();
        self.file.take();
        self.stage.take();
    }
}

/// TIFF stack writer: `DIR/slice_00000.tif` …, written into a temporary
/// directory beside `DIR` and moved to `DIR` when complete;
/// `DIR/tomors.txt` holds the metadata and the scaling, and
/// `DIR/.tomors-output` marks the directory as tomors's (see
/// [`crate::output::MARKER`]).
pub struct TiffStackWriter {
    path: PathBuf,
    stage: Option<StagedDir>,
    tmp: PathBuf,
    depth: TiffDepth,
    cursor: SlabCursor,
    digits: usize,
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
    /// directory that tomors wrote is replaced when the stack is complete.
    pub fn create_with(
        path: &Path,
        shape: [usize; 3],
        depth: TiffDepth,
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self> {
        depth.validate()?;
        let stage = StagedDir::create(path, overwrite)?;
        let tmp = stage.path().to_path_buf();
        let this = Self {
            path: path.to_path_buf(),
            stage: Some(stage),
            tmp: tmp.clone(),
            depth,
            cursor: SlabCursor { shape, next: 0 },
            digits: shape[0].saturating_sub(1).to_string().len().max(5),
        };
        let text = format!(
            "# tomors volume as a TIFF stack: one image per z slice, [y][x]\nshape = [{}, {}, {}]\nscaling = {:?}\n{}",
            shape[0],
            shape[1],
            shape[2],
            depth.description(),
            meta.without_config().to_text()
        );
        let mp = tmp.join("tomors.txt");
        std::fs::write(&mp, text).map_err(|e| os_err(&mp, e))?;
        if let Some(config) = meta.config() {
            let cp = tmp.join(crate::output::CONFIG_FILE);
            std::fs::write(&cp, config).map_err(|e| os_err(&cp, e))?;
        }
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
        check_finite_slab(&self.path, z0, &slab)?;
        for (k, img) in slab.outer_iter().enumerate() {
            let p = self.tmp.join(self.slice_name(z0 + k));
            write_image(&p, img, self.depth)?;
        }
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        let stage = self.stage.take().expect("a writer finishes once");
        stage.commit()
    }
}

/// Reads back a volume written as `.npy` (for tests and tools).
pub fn read_npy_volume(path: &Path) -> Result<Array3<f32>> {
    let b = crate::npy::BinArray::open_npy_unregistered(path)?;
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
