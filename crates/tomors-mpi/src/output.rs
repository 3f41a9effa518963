//! The volume output of a distributed job, written by all ranks at once
//! and appearing under its final name only when every rank has finished:
//!
//! - `.npy`: rank 0 creates `.NAME.partial` with the header and the full
//!   length; every rank writes its slices at their byte offsets;
//! - TIFF stack: rank 0 creates `NAME.partial/` with `tomors.txt`; every
//!   rank writes its slices' files;
//! - HDF5: rank 0 writes the file (the `tomors-io` writer, ordered slabs);
//!   the other ranks send it their slabs, in chunks, as they finish them.
//!
//! [`DistOutput::finish`] agrees on the outcome of every rank; rank 0 then
//! renames the temporary output to the final name, or removes it when any
//! rank failed. The bytes are those the single-process writers produce.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use ndarray::{ArrayView3, Axis};
use tomors_io::tiffio::{write_image, TiffDepth};
use tomors_io::writer::{create_writer_with, partial_dir_name, partial_file_name};
use tomors_io::{VolumeFormat, VolumeMeta, VolumeWriter};

use crate::comm::{f32_to_bytes, Comm};
use crate::status::{agree, Failure};

/// Slices per message from a rank to the HDF5 writer rank (a chunk is at
/// most this many slices and 64 MiB).
const FEED_BYTES: usize = 64 << 20;

enum Sink {
    Npy {
        file: File,
        data_offset: u64,
    },
    Tiff {
        dir: PathBuf,
        depth: TiffDepth,
        digits: usize,
    },
    Hdf5Writer(Box<dyn VolumeWriter>),
    Hdf5Feeder,
}

/// A volume `[z][y][x]` being written by every rank of a job.
pub struct DistOutput {
    path: PathBuf,
    format: VolumeFormat,
    shape: [usize; 3],
    overwrite: bool,
    sink: Option<Sink>,
}

/// The `.npy` header of the `tomors-io` writer (float32, C order), data
/// aligned to 64 bytes.
fn npy_header(shape: [usize; 3]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}, {}), }}",
        shape[0], shape[1], shape[2]
    );
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes
}

fn tiff_digits(nz: usize) -> usize {
    nz.saturating_sub(1).to_string().len().max(5)
}

fn remove_any(path: &Path) {
    let _ = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
}

impl DistOutput {
    /// Collective: creates the temporary output of a `shape` volume at
    /// `path` (rank 0 creates, the others open it). The target has been
    /// checked (writable directory, not existing unless `overwrite`).
    pub fn create(
        comm: &dyn Comm,
        path: &Path,
        format: VolumeFormat,
        shape: [usize; 3],
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self, Failure> {
        let root = comm.rank() == 0;
        let made = if root {
            Self::create_root(path, format, shape, meta, overwrite).map(Some)
        } else {
            Ok(None)
        };
        let made = agree(comm, made)?;
        let opened = if root {
            Ok(made)
        } else {
            Self::open_other(path, format, shape).map(Some)
        };
        let mut this = Self {
            path: path.to_path_buf(),
            format,
            shape,
            overwrite,
            sink: None,
        };
        match agree(comm, opened) {
            Ok(sink) => {
                this.sink = sink;
                Ok(this)
            }
            Err(f) => {
                // Rank 0's sink (dropped here) held the only handle.
                if root {
                    this.remove_partial();
                }
                Err(f)
            }
        }
    }

    fn create_root(
        path: &Path,
        format: VolumeFormat,
        shape: [usize; 3],
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Sink> {
        if shape.contains(&0) {
            bail!("{}: empty volume {shape:?}", path.display());
        }
        Ok(match format {
            VolumeFormat::Npy => {
                let tmp = partial_file_name(path);
                let mut f = File::create(&tmp)
                    .with_context(|| format!("{}: cannot create", tmp.display()))?;
                let header = npy_header(shape);
                let len = header.len() as u64 + 4 * (shape[0] * shape[1] * shape[2]) as u64;
                let r = f.write_all(&header).and_then(|_| f.set_len(len));
                if let Err(e) = r {
                    remove_any(&tmp);
                    return Err(anyhow!("{}: cannot write: {e}", tmp.display()));
                }
                Sink::Npy {
                    file: f,
                    data_offset: header.len() as u64,
                }
            }
            VolumeFormat::TiffStack(depth) => {
                depth.validate()?;
                let tmp = partial_dir_name(path);
                if tmp.exists() {
                    std::fs::remove_dir_all(&tmp)
                        .with_context(|| format!("{}: cannot remove", tmp.display()))?;
                }
                std::fs::create_dir(&tmp)
                    .with_context(|| format!("{}: cannot create", tmp.display()))?;
                let text = format!(
                    "# tomors volume as a TIFF stack: one image per z slice, [y][x]\nshape = [{}, {}, {}]\nscaling = {:?}\n{}",
                    shape[0],
                    shape[1],
                    shape[2],
                    depth.description(),
                    meta.to_text()
                );
                let mp = tmp.join("tomors.txt");
                if let Err(e) = std::fs::write(&mp, text) {
                    remove_any(&tmp);
                    return Err(anyhow!("{}: cannot write: {e}", mp.display()));
                }
                Sink::Tiff {
                    dir: tmp,
                    depth,
                    digits: tiff_digits(shape[0]),
                }
            }
            VolumeFormat::Hdf5 => {
                Sink::Hdf5Writer(create_writer_with(path, format, shape, meta, overwrite)?)
            }
        })
    }

    fn open_other(path: &Path, format: VolumeFormat, shape: [usize; 3]) -> Result<Sink> {
        Ok(match format {
            VolumeFormat::Npy => {
                let tmp = partial_file_name(path);
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&tmp)
                    .with_context(|| {
                        format!("{}: cannot open the output rank 0 created", tmp.display())
                    })?;
                Sink::Npy {
                    file,
                    data_offset: npy_header(shape).len() as u64,
                }
            }
            VolumeFormat::TiffStack(depth) => {
                let dir = partial_dir_name(path);
                if !dir.is_dir() {
                    bail!(
                        "{}: the directory rank 0 created is not visible here (outputs must be on a file system every rank shares)",
                        dir.display()
                    );
                }
                Sink::Tiff {
                    dir,
                    depth,
                    digits: tiff_digits(shape[0]),
                }
            }
            VolumeFormat::Hdf5 => Sink::Hdf5Feeder,
        })
    }

    /// The final path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes slices `z0 ..` of the volume (this rank's; any order for
    /// `.npy` and TIFF, ascending for HDF5).
    pub fn write(&mut self, comm: &dyn Comm, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        let (n, ny, nx) = slab.dim();
        if [ny, nx] != self.shape[1..] || z0 + n > self.shape[0] {
            bail!(
                "{}: slab of slices {z0}..{} of {ny}×{nx} for a volume of {:?}",
                self.path.display(),
                z0 + n,
                self.shape
            );
        }
        let sink = self
            .sink
            .as_mut()
            .ok_or_else(|| anyhow!("{}: output already closed", self.path.display()))?;
        match sink {
            Sink::Npy { file, data_offset } => {
                let std = slab.as_standard_layout();
                let bytes = f32_to_bytes(std.as_slice().expect("standard layout"));
                let at = *data_offset + 4 * (z0 * ny * nx) as u64;
                file.write_all_at(&bytes, at).with_context(|| {
                    format!("{}: cannot write", partial_file_name(&self.path).display())
                })
            }
            Sink::Tiff { dir, depth, digits } => {
                for (k, img) in slab.outer_iter().enumerate() {
                    let p = dir.join(format!("slice_{:0w$}.tif", z0 + k, w = *digits));
                    write_image(&p, img, *depth)?;
                }
                Ok(())
            }
            Sink::Hdf5Writer(w) => Ok(w.write_slab(z0, slab)?),
            Sink::Hdf5Feeder => {
                let per = (FEED_BYTES / (4 * ny * nx).max(1)).max(1);
                for (i, chunk) in slab.axis_chunks_iter(Axis(0), per).enumerate() {
                    let std = chunk.as_standard_layout();
                    let z = (z0 + i * per) as u64;
                    comm.send_bytes(0, &feed_header(FEED_DATA, z));
                    comm.send_f32(0, std.as_slice().expect("standard layout"));
                }
                Ok(())
            }
        }
    }

    /// Collective: ends the output given this rank's outcome `local`. When
    /// every rank succeeded, rank 0 moves the output to its final name
    /// (replacing an existing one only with `overwrite`); otherwise the
    /// temporary output is removed and every rank gets the first failure.
    pub fn finish(mut self, comm: &dyn Comm, local: Result<()>) -> Result<(), Failure> {
        let root = comm.rank() == 0;
        let mut local = local;
        let mut writer = None;
        match self.sink.take() {
            Some(Sink::Npy { file, .. }) => {
                if local.is_ok() {
                    local = file.sync_all().with_context(|| {
                        format!("{}: cannot write", partial_file_name(&self.path).display())
                    });
                }
            }
            Some(Sink::Hdf5Feeder) => {
                let kind = if local.is_ok() {
                    FEED_DONE
                } else {
                    FEED_FAILED
                };
                comm.send_bytes(0, &feed_header(kind, 0));
            }
            Some(Sink::Hdf5Writer(mut w)) => {
                // Write the other ranks' slabs in rank order (their rows
                // follow ours); after an error here or a rank's failure,
                // keep receiving (without writing) so that no rank waits
                // on a send forever.
                let mut writing = local.is_ok();
                for src in 1..comm.size() {
                    loop {
                        let h = comm.recv_bytes(src);
                        let (kind, z) = parse_feed_header(&h);
                        if kind == FEED_FAILED {
                            writing = false;
                        }
                        if kind != FEED_DATA {
                            break;
                        }
                        let data = comm.recv_f32(src);
                        if writing && local.is_ok() {
                            let n = data.len() / (self.shape[1] * self.shape[2]);
                            let view =
                                ArrayView3::from_shape((n, self.shape[1], self.shape[2]), &data)
                                    .expect("whole slices");
                            local = w.write_slab(z as usize, view).map_err(Into::into);
                        }
                    }
                }
                writer = Some(w);
            }
            Some(Sink::Tiff { .. }) | None => {}
        }
        let outcome = agree(comm, local);
        if !root {
            outcome?;
            return agree(comm, Ok(()));
        }
        let committed = match outcome {
            Err(f) => {
                drop(writer); // the tomors-io writer removes its file
                self.remove_partial();
                return Err(f);
            }
            Ok(()) => self.commit(writer),
        };
        if committed.is_err() {
            self.remove_partial();
        }
        agree(comm, committed)
    }

    fn remove_partial(&self) {
        match self.format {
            VolumeFormat::Npy => remove_any(&partial_file_name(&self.path)),
            VolumeFormat::TiffStack(_) => remove_any(&partial_dir_name(&self.path)),
            VolumeFormat::Hdf5 => {}
        }
    }

    fn commit(&self, writer: Option<Box<dyn VolumeWriter>>) -> Result<()> {
        let path = &self.path;
        match self.format {
            VolumeFormat::Hdf5 => {
                writer
                    .ok_or_else(|| anyhow!("{}: no writer", path.display()))?
                    .finish()?;
            }
            VolumeFormat::Npy => {
                if path.exists() && !self.overwrite {
                    bail!(
                        "{}: exists already; remove it or choose another output",
                        path.display()
                    );
                }
                std::fs::rename(partial_file_name(path), path)
                    .with_context(|| format!("{}: cannot move into place", path.display()))?;
            }
            VolumeFormat::TiffStack(_) => {
                if path.is_dir() {
                    let empty = std::fs::read_dir(path)
                        .map(|mut d| d.next().is_none())
                        .unwrap_or(false);
                    if self.overwrite {
                        std::fs::remove_dir_all(path)
                    } else if empty {
                        std::fs::remove_dir(path)
                    } else {
                        bail!(
                            "{}: exists already; remove it or choose another output",
                            path.display()
                        );
                    }
                    .with_context(|| format!("{}: cannot replace", path.display()))?;
                }
                std::fs::rename(partial_dir_name(path), path)
                    .with_context(|| format!("{}: cannot move into place", path.display()))?;
            }
        }
        Ok(())
    }
}

const FEED_DATA: u8 = 1;
const FEED_DONE: u8 = 2;
const FEED_FAILED: u8 = 3;

fn feed_header(kind: u8, z0: u64) -> Vec<u8> {
    let mut h = vec![kind];
    h.extend_from_slice(&z0.to_le_bytes());
    h
}

fn parse_feed_header(h: &[u8]) -> (u8, u64) {
    let z = h
        .get(1..9)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .unwrap_or(0);
    (h.first().copied().unwrap_or(FEED_FAILED), z)
}
