//! Direct reads of contiguous HDF5 projections: a slab of detector rows of
//! a `[frame][row][col]` dataset stored contiguously and unfiltered is one
//! block of `rows × cols` values per frame at a known place in the file.
//! Reading those blocks through the HDF5 library issues them one after the
//! other under its global lock (and converts the values there), which a
//! disk serves at a few hundred MB/s when the rows of a slab are small
//! pieces of each frame. Here the blocks are read with `pread` on all cores
//! (the disk sees many requests at once) and converted to f32 outside the
//! lock. Only exact conversions are taken (8/16-bit integers, float32); the
//! values are those HDF5 gives (tested in `tests/stream_pipeline.rs`).
//! `TOMORS_HDF5_DIRECT=0` turns it off.

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use hdf5::types::{FloatSize, IntSize, TypeDescriptor};
use hdf5::Dataset;
use ndarray::Array3;
use rayon::prelude::*;

use crate::error::{format_err, Result};
use crate::source::{Endian, RawDtype};

/// Where and how a contiguous dataset's values lie in its file.
pub(crate) struct DirectLayout {
    file: std::fs::File,
    file_name: PathBuf,
    offset: u64,
    shape: [usize; 3],
    dtype: RawDtype,
    endian: Endian,
}

impl DirectLayout {
    /// The layout of `ds` when it can be read directly: 3-D, contiguous,
    /// allocated in its file, no filters, no external raw storage, and of
    /// a type whose conversion to f32 is exact (8/16-bit integers, float32)
    /// in a plain byte order; `None` otherwise (or when
    /// `TOMORS_HDF5_DIRECT=0`).
    pub(crate) fn of(ds: &Dataset) -> Option<Self> {
        if std::env::var("TOMORS_HDF5_DIRECT").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        if ds.layout() != hdf5::dataset::Layout::Contiguous || !ds.filters().is_empty() {
            return None;
        }
        if !ds.dcpl().ok()?.external().is_empty() {
            return None;
        }
        let shape: [usize; 3] = ds.shape().try_into().ok()?;
        let t = ds.dtype().ok()?;
        let dtype = match t.to_descriptor().ok()? {
            TypeDescriptor::Unsigned(IntSize::U1) => RawDtype::U8,
            TypeDescriptor::Unsigned(IntSize::U2) => RawDtype::U16,
            TypeDescriptor::Integer(IntSize::U1) => RawDtype::I8,
            TypeDescriptor::Integer(IntSize::U2) => RawDtype::I16,
            TypeDescriptor::Float(FloatSize::U4) => RawDtype::F32,
            _ => return None,
        };
        let endian = match t.byte_order() {
            hdf5::datatype::ByteOrder::LittleEndian => Endian::Little,
            hdf5::datatype::ByteOrder::BigEndian => Endian::Big,
            _ => return None,
        };
        // The dataset's place in the file that holds it (another file
        // through an external link); HDF5 counts its user block in.
        let offset = ds.offset()?;
        let file_name = PathBuf::from(ds.filename());
        let file = std::fs::File::open(&file_name).ok()?;
        let bytes = shape
            .iter()
            .try_fold(dtype.size() as u64, |a, &n| a.checked_mul(n as u64))?;
        if offset.checked_add(bytes)? > file.metadata().ok()?.len() {
            return None;
        }
        Some(Self {
            file,
            file_name,
            offset,
            shape,
            dtype,
            endian,
        })
    }

    /// Reads `frames × rows` (every column) as f32 `[frame][row][col]`, one
    /// frame's block per task; `path` names the scan in errors.
    pub(crate) fn read(
        &self,
        path: &Path,
        name: &str,
        frames: Range<usize>,
        rows: Range<usize>,
    ) -> Result<Array3<f32>> {
        let [nf, nr, nc] = self.shape;
        if frames.end > nf || rows.end > nr || frames.start > frames.end || rows.start > rows.end {
            return Err(format_err(
                path,
                format!("{name}: frames {frames:?}, rows {rows:?} outside [{nf}, {nr}, {nc}]"),
            ));
        }
        let es = self.dtype.size();
        let block = rows.len() * nc;
        let mut out = Array3::<f32>::zeros((frames.len(), rows.len(), nc));
        if block == 0 || frames.is_empty() {
            return Ok(out);
        }
        let Some(dst) = out.as_slice_mut() else {
            return Err(format_err(path, "internal: a new array is not contiguous"));
        };
        dst.par_chunks_mut(block).enumerate().try_for_each_init(
            || vec![0u8; block * es],
            |buf, (k, dst)| -> Result<()> {
                let f = (frames.start + k) as u64;
                let at =
                    self.offset + ((f * nr as u64 + rows.start as u64) * nc as u64) * es as u64;
                self.file.read_exact_at(buf, at).map_err(|e| {
                    format_err(
                        path,
                        format!(
                            "cannot read {name} from {}: {e} (truncated?)",
                            self.file_name.display()
                        ),
                    )
                })?;
                crate::npy::decode(buf, self.dtype, self.endian, dst);
                Ok(())
            },
        )?;
        Ok(out)
    }
}

/// Where each slice chunk of a float32 volume dataset lies in its file
/// (chunks of one slice, unfiltered, allocated when the dataset was created
/// and never filled): the writer puts a slab's slices there with `pwrite`
/// on all cores, where the HDF5 library would copy each slice through its
/// chunk cache and write them one after the other under its global lock.
/// `TOMORS_HDF5_DIRECT=0` turns it off.
pub(crate) struct DirectChunks {
    file: std::fs::File,
    /// File offset of the chunk of each slice.
    addrs: Vec<u64>,
    /// Values per slice.
    plane: usize,
}

impl DirectChunks {
    /// The chunks of `ds` (a `[z][y][x]` float32 dataset of `shape`, in the
    /// file `file_path`) when they can be written directly.
    pub(crate) fn of(ds: &Dataset, file_path: &Path, shape: [usize; 3]) -> Option<Self> {
        if std::env::var("TOMORS_HDF5_DIRECT").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let plane = shape[1].checked_mul(shape[2])?;
        let t = ds.dtype().ok()?;
        let native = cfg!(target_endian = "little")
            && t.byte_order() == hdf5::datatype::ByteOrder::LittleEndian;
        if !native
            || t.to_descriptor().ok()? != TypeDescriptor::Float(FloatSize::U4)
            || !ds.filters().is_empty()
            || ds.chunk()? != [1, shape[1], shape[2]]
            || ds.num_chunks()? != shape[0]
        {
            return None;
        }
        // Our own files have no user block (chunk addresses would be
        // relative to its end in some HDF5 versions).
        if ds.file().ok()?.userblock() != 0 {
            return None;
        }
        let mut addrs = vec![u64::MAX; shape[0]];
        for i in 0..shape[0] {
            let c = ds.chunk_info(i)?;
            let z = usize::try_from(*c.offset.first()?).ok()?;
            if c.size != (plane * 4) as u64 || z >= shape[0] || c.addr == u64::MAX {
                return None;
            }
            addrs[z] = c.addr;
        }
        if addrs.contains(&u64::MAX) {
            return None;
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(file_path)
            .ok()?;
        Some(Self { file, addrs, plane })
    }

    /// Writes the slices `z0..` of `slab` (C order, whole slices); `path`
    /// names the output in errors.
    pub(crate) fn write(&self, path: &Path, z0: usize, slab: &[f32]) -> Result<()> {
        slab.par_chunks(self.plane)
            .enumerate()
            .try_for_each(|(k, s)| -> Result<()> {
                let at = *self.addrs.get(z0 + k).ok_or_else(|| {
                    format_err(path, format!("slice {} beyond the volume", z0 + k))
                })?;
                // SAFETY: any f32 is 4 initialised bytes and u8 has no
                // alignment; the byte view lives as long as `s`.
                let bytes =
                    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), s.len() * 4) };
                self.file
                    .write_all_at(bytes, at)
                    .map_err(|e| crate::error::os_err(path, e))
            })
    }
}
