//! The volume output of a distributed job, written by all ranks at once
//! and appearing under its final name only when every rank has finished:
//!
//! - `.npy`: rank 0 creates the temporary file (a
//!   [`StagedFile`] of `tomors_io::output`) with the header and the full
//!   length and broadcasts its name; every rank writes its slices at their
//!   byte offsets;
//! - TIFF stack: rank 0 creates the temporary directory (a [`StagedDir`],
//!   with the marker) and `tomors.txt` and broadcasts its name; every rank
//!   writes its slices' files;
//! - HDF5: rank 0 writes the file (the `tomors-io` writer, ordered slabs);
//!   the other ranks send it their slabs, in chunks, as they finish them.
//!
//! [`DistOutput::finish`] agrees on the outcome of every rank; rank 0 then
//! commits the stage (the output layer's no-clobber move, or replacement of
//! a tomors output with `overwrite`), or drops it (removed) when any rank
//! failed. The bytes are those the single-process writers produce.

use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use ndarray::{ArrayView3, Axis};
use tomors_io::output::{OutputKind, StagedDir, StagedFile};
use tomors_io::tiffio::{write_image, TiffDepth};
use tomors_io::writer::create_writer_with;
use tomors_io::{VolumeFormat, VolumeMeta, VolumeWriter};

use crate::comm::{f32_to_bytes, Comm};
use crate::status::{agree, Failure};

/// Slices per message from a rank to the HDF5 writer rank (a chunk is at
/// most this many slices and 64 MiB).
const FEED_BYTES: usize = 64 << 20;

enum Sink {
    Npy {
        file: File,
        /// The temporary file (rank 0's stage, or the name it broadcast).
        tmp: PathBuf,
        data_offset: u64,
        /// Rank 0 only: commits or (dropped) removes the temporary.
        stage: Option<StagedFile>,
        /// Rank 0 only: the provenance sidecar `X.npy.tomors.toml` (see
        /// [`tomors_io::provenance::npy_sidecar`]), committed with the volume.
        sidecar: Option<StagedFile>,
    },
    Tiff {
        /// The temporary directory.
        dir: PathBuf,
        depth: TiffDepth,
        digits: usize,
        /// Rank 0 only: commits or (dropped) removes the temporary.
        stage: Option<StagedDir>,
    },
    Hdf5Writer(Box<dyn VolumeWriter>),
    Hdf5Feeder,
}

/// A volume `[z][y][x]` being written by every rank of a job.
pub struct DistOutput {
    path: PathBuf,
    shape: [usize; 3],
    sink: Option<Sink>,
}

/// The `.npy` header of the `tomors-io` writer (float32, C order), written
/// as it writes it (`ndarray-npy`).
fn npy_header(shape: [usize; 3]) -> Vec<u8> {
    use ndarray_npy::npy::header::{Header, Layout};
    use ndarray_npy::WritableElement;
    let mut bytes = Vec::new();
    Header {
        type_descriptor: <f32 as WritableElement>::type_descriptor(),
        layout: Layout::Standard,
        shape: shape.to_vec(),
    }
    .write(&mut bytes)
    .expect("writing into memory");
    bytes
}

fn tiff_digits(nz: usize) -> usize {
    nz.saturating_sub(1).to_string().len().max(5)
}

impl Sink {
    /// The temporary output every rank writes into (none for HDF5).
    fn temporary(&self) -> Option<&Path> {
        match self {
            Sink::Npy { tmp, .. } => Some(tmp),
            Sink::Tiff { dir, .. } => Some(dir),
            Sink::Hdf5Writer(_) | Sink::Hdf5Feeder => None,
        }
    }
}

impl DistOutput {
    /// Collective: creates the temporary output of a `shape` volume at
    /// `path`: rank 0 creates it (checking the target, see
    /// [`tomors_io::output::check_target`]) and broadcasts its name; the
    /// others open it.
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
        let mut name = made
            .as_ref()
            .and_then(Sink::temporary)
            .map(|p| p.as_os_str().as_bytes().to_vec())
            .unwrap_or_default();
        comm.broadcast_bytes(0, &mut name);
        let tmp = PathBuf::from(std::ffi::OsString::from_vec(name));
        let opened = if root {
            Ok(made)
        } else {
            Self::open_other(&tmp, format, shape).map(Some)
        };
        // On a failure, rank 0's sink is dropped here with its stage, which
        // removes the temporary.
        let sink = agree(comm, opened)?;
        Ok(Self {
            path: path.to_path_buf(),
            shape,
            sink,
        })
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
                let (stage, mut f) = StagedFile::create(path, OutputKind::NPY, overwrite)?;
                let tmp = stage.path().to_path_buf();
                let header = npy_header(shape);
                let len = header.len() as u64 + 4 * (shape[0] * shape[1] * shape[2]) as u64;
                f.write_all(&header)
                    .and_then(|_| f.set_len(len))
                    .with_context(|| format!("{}: cannot write", tmp.display()))?;
                Sink::Npy {
                    file: f,
                    tmp,
                    data_offset: header.len() as u64,
                    stage: Some(stage),
                    sidecar: npy_sidecar(path, meta, overwrite)?,
                }
            }
            VolumeFormat::TiffStack(depth) => {
                depth.validate()?;
                let stage = StagedDir::create(path, overwrite)?;
                let tmp = stage.path().to_path_buf();
                let text = format!(
                    "# tomors volume as a TIFF stack: one image per z slice, [y][x]\nshape = [{}, {}, {}]\nscaling = {:?}\n{}",
                    shape[0],
                    shape[1],
                    shape[2],
                    depth.description(),
                    meta.without_config().to_text()
                );
                let mp = tmp.join("tomors.txt");
                std::fs::write(&mp, text)
                    .with_context(|| format!("{}: cannot write", mp.display()))?;
                // The run's configuration, as the single-process writer keeps it.
                if let Some(config) = meta.config() {
                    let cp = tmp.join(tomors_io::output::CONFIG_FILE);
                    std::fs::write(&cp, config)
                        .with_context(|| format!("{}: cannot write", cp.display()))?;
                }
                Sink::Tiff {
                    dir: tmp,
                    depth,
                    digits: tiff_digits(shape[0]),
                    stage: Some(stage),
                }
            }
            // HDF5, NeXus and OME-Zarr: rank 0 writes through the tomors-io
            // writer, the other ranks feed it their slabs in order.
            VolumeFormat::Hdf5 | VolumeFormat::Nexus | VolumeFormat::OmeZarr => {
                Sink::Hdf5Writer(create_writer_with(path, format, shape, meta, overwrite)?)
            }
        })
    }

    /// Opens the temporary `tmp` that rank 0 created.
    fn open_other(tmp: &Path, format: VolumeFormat, shape: [usize; 3]) -> Result<Sink> {
        Ok(match format {
            VolumeFormat::Npy => {
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(tmp)
                    .with_context(|| {
                        format!("{}: cannot open the output rank 0 created", tmp.display())
                    })?;
                Sink::Npy {
                    file,
                    tmp: tmp.to_path_buf(),
                    data_offset: npy_header(shape).len() as u64,
                    stage: None,
                    sidecar: None,
                }
            }
            VolumeFormat::TiffStack(depth) => {
                let dir = tmp.to_path_buf();
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
                    stage: None,
                }
            }
            VolumeFormat::Hdf5 | VolumeFormat::Nexus | VolumeFormat::OmeZarr => Sink::Hdf5Feeder,
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
            Sink::Npy {
                file,
                tmp,
                data_offset,
                ..
            } => {
                let std = slab.as_standard_layout();
                let bytes = f32_to_bytes(std.as_slice().expect("standard layout"));
                let at = *data_offset + 4 * (z0 * ny * nx) as u64;
                file.write_all_at(&bytes, at)
                    .with_context(|| format!("{}: cannot write", tmp.display()))
            }
            Sink::Tiff {
                dir, depth, digits, ..
            } => {
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
    /// every rank succeeded, rank 0 commits the output to its final name
    /// (replacing an existing one only with `overwrite`); otherwise the
    /// temporary output is removed and every rank gets the first failure.
    pub fn finish(mut self, comm: &dyn Comm, local: Result<()>) -> Result<(), Failure> {
        let root = comm.rank() == 0;
        let mut local = local;
        // Rank 0's way to the final name: a stage, or the HDF5 writer.
        let mut commit = Commit::Nothing;
        match self.sink.take() {
            Some(Sink::Npy {
                file,
                tmp,
                stage,
                sidecar,
                ..
            }) => {
                if local.is_ok() {
                    local = file
                        .sync_all()
                        .with_context(|| format!("{}: cannot write", tmp.display()));
                }
                drop(file);
                if let Some(s) = stage {
                    commit = Commit::File(s, sidecar);
                }
            }
            Some(Sink::Tiff { stage: Some(s), .. }) => commit = Commit::Dir(s),
            Some(Sink::Tiff { stage: None, .. }) => {}
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
                commit = Commit::Writer(w);
            }
            None => {}
        }
        let outcome = agree(comm, local);
        if !root {
            outcome?;
            return agree(comm, Ok(()));
        }
        // On a failure, dropping the stage or the writer removes the
        // temporary; a failed commit removes it too.
        outcome?;
        let committed = match commit {
            Commit::File(s, sidecar) => {
                // The sidecar first, as the single-process writer does; no
                // provenance is left without its volume.
                let side_path = sidecar.as_ref().map(|x| x.target().to_path_buf());
                match sidecar.map(StagedFile::commit).transpose() {
                    Err(e) => Err(e.into()),
                    Ok(_) => s.commit().map_err(|e| {
                        if let Some(p) = side_path {
                            let _ = std::fs::remove_file(p);
                        }
                        e.into()
                    }),
                }
            }
            Commit::Dir(s) => s.commit().map_err(Into::into),
            Commit::Writer(w) => w.finish().map_err(Into::into),
            Commit::Nothing => Err(anyhow!("{}: output already closed", self.path.display())),
        };
        agree(comm, committed)
    }
}

/// Rank 0's staged provenance sidecar of an `.npy` output at `path`, when
/// `meta` carries the run's configuration: written as the single-process
/// `.npy` writer writes it (a tomors sidecar left without its volume is
/// replaced; anything else at its name is refused).
fn npy_sidecar(path: &Path, meta: &VolumeMeta, overwrite: bool) -> Result<Option<StagedFile>> {
    let Some(config) = meta.config() else {
        return Ok(None);
    };
    let side = tomors_io::provenance::npy_sidecar(path);
    let kind = OutputKind::File {
        magic: tomors_io::provenance::CONFIG_HEADER.as_bytes(),
    };
    let orphan = side.exists() && tomors_io::output::is_replaceable(&side, kind).is_ok();
    let (stage, mut f) = StagedFile::create(&side, kind, overwrite || orphan)?;
    f.write_all(config.as_bytes())
        .and_then(|()| f.sync_all())
        .with_context(|| format!("{}: cannot write", stage.path().display()))?;
    Ok(Some(stage))
}

/// What rank 0 does to move a complete output to its final name.
enum Commit {
    Nothing,
    File(StagedFile, Option<StagedFile>),
    Dir(StagedDir),
    Writer(Box<dyn VolumeWriter>),
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
