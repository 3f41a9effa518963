//! # tomors-io
//!
//! Readers and writers of tomors, chunked: every reader reads a *slab of
//! detector rows* without loading the whole file, and every writer takes the
//! volume slab by slab.
//!
//! - [`source`]: the [`ProjectionSource`] abstraction and [`open`], which
//!   picks the reader: [`hdf5io::DxSource`] (DXchange HDF5),
//!   [`hdf5io::NxTomoSource`] (NeXus NXtomo HDF5, external links and
//!   virtual datasets followed), [`tiffio::TiffSource`] (TIFF stacks and
//!   multi-page TIFF), [`npy::NpySource`] (`.npy` and raw binary);
//! - [`preprocess`]: flat/dark normalisation (flats before and after the
//!   scan interpolated), −log, zinger removal, sorting-based stripe removal;
//! - [`phase`]: Paganin single-material phase retrieval;
//! - [`correct`]: projection rotation (detector tilt), row shifts;
//! - [`stripe`]: Vo's filtering, large, dead and all-stripe methods, and the
//!   wavelet–Fourier filter;
//! - [`subset`]: a source seen through a region of interest and binning;
//! - [`angles`]: what can be a scan (angle checks, unit guess);
//! - [`checks`]: the non-finite rule of every reader;
//! - [`center`]: rotation-centre finding (Vo et al. 2014 Fourier metric);
//! - [`half`]: 360° scans with an offset axis (half acquisition): the axis
//!   search, the stitching into a wide 180° sinogram, and a source that
//!   presents the stitched scan;
//! - [`writer`]: `.npy`, HDF5 and TIFF-stack volume writers;
//! - [`output`]: safe outputs (unique temporaries, no clobbering, never
//!   onto an input, interrupts clean up);
//! - [`stream`]: rows per slab for a memory budget and the slab driver;
//! - [`info`]: a printable description of a file;
//! - [`memory`]: checks of sizes against the memory available;
//! - [`preview`]: grey PNG previews.
//!
//! Errors are [`IoError`]s that print as one line naming the file.

#![warn(missing_docs)]

pub mod angles;
pub mod center;
pub mod checks;
pub mod compression;
pub mod correct;
pub mod error;
pub mod half;
mod hdf5direct;
pub mod hdf5io;
pub mod info;
pub mod memory;
pub mod nexus;
pub mod npy;
pub mod output;
pub mod phase;
pub mod preprocess;
pub mod preview;
pub mod provenance;
pub mod source;
pub mod stream;
pub mod stripe;
pub mod subset;
pub mod tiffio;
pub mod writer;
pub mod zarr;

/// The HDF5 bindings used by the readers and writers (`hdf5-metno`), for
/// callers that inspect files themselves.
pub use hdf5;

pub use center::{find_center, CenterOptions, CenterResult};
pub use compression::Compression;
pub use error::{IoError, Result};
pub use phase::Paganin;
pub use preprocess::{remove_stripe_based_sorting, Average, LogMode, Preprocess};
pub use source::{open, AngleUnit, FrameGroup, OpenOptions, ProjectionSource, RawSlab};
pub use stripe::StripeMethod;
pub use writer::{
    create_writer, create_writer_opts, VolumeFormat, VolumeMeta, VolumeWriter, WriteOptions,
};
