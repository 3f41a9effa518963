//! A `tomors recon` job as the command line prepared it, and the driver
//! that runs it on every rank.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::Result;
use tomors_core::cone::{ConeBackend, ConeGeometry, ConeVolume, FdkOptions};
use tomors_core::fbp::FbpOptions;
use tomors_core::iterative::{IterativeOptions, ProjectorKind};
use tomors_core::Backend;
use tomors_io::{Preprocess, ProjectionSource, VolumeFormat};

use crate::comm::Comm;
use crate::status::{agree, Failure};

/// Makes a rank's parallel-beam backend; the argument is the rank's local
/// rank (its index among the ranks of its host), which chooses its GPU
/// (see [`gpu_for_rank`]).
pub type BackendFactory = Box<dyn Fn(usize) -> Result<Box<dyn Backend>>>;

/// Makes a rank's cone-beam (FDK) backend, as [`BackendFactory`].
pub type ConeBackendFactory = Box<dyn Fn(usize) -> Result<Box<dyn ConeBackend>>>;

/// Chooses a rank's GPU for the iterative methods from its local rank
/// (see [`gpu_for_rank`]): `Ok(Some(ordinal))`, or `Ok(None)` to iterate on
/// the CPU.
pub type GpuChooser = Box<dyn Fn(usize) -> Result<Option<usize>>>;

/// Finds the rotation centre of a source (angles in radians); run on rank
/// 0 only, its result broadcast.
pub type CenterFinder = Box<dyn Fn(&dyn ProjectionSource, &[f32], &Preprocess) -> Result<f32>>;

/// The rotation-axis position of a parallel-beam job.
pub enum Center {
    /// The detector centre, `(n − 1)/2`.
    Default,
    /// This position in detector pixels.
    At(f32),
    /// Found by rank 0 and broadcast.
    Auto(CenterFinder),
}

/// What to compute.
pub enum Method {
    /// Parallel-beam FBP, slab by slab of the rank's rows.
    Fbp {
        /// Rotation axis.
        center: Center,
        /// Filter, interpolation, slices per backend call.
        options: FbpOptions,
        /// The rank's backend.
        backend: BackendFactory,
    },
    /// Parallel-beam iterative reconstruction of the rank's rows (slices
    /// are independent, so no communication), on the rank's GPU or the CPU.
    Iterative {
        /// Rotation axis (`Auto` is not available).
        center: Center,
        /// The method and its parameters (no `tolerance`: ranks would stop
        /// at different iterations).
        options: IterativeOptions,
        /// Projection model.
        projector: ProjectorKind,
        /// The rank's GPU (`None`: the CPU projectors). The caller gives
        /// one only for what the GPU runs (SIRT-type and block-sequential
        /// methods with the Joseph projector).
        gpu: Option<GpuChooser>,
    },
    /// Cone-beam FDK, the volume split into z-slabs, each rank reading the
    /// detector rows its slab needs.
    Fdk {
        /// The whole scan's geometry.
        geometry: ConeGeometry,
        /// The whole volume.
        volume: ConeVolume,
        /// Filter and scan mode.
        options: FdkOptions,
        /// The rank's backend.
        backend: ConeBackendFactory,
    },
    /// Cone-beam iterative reconstruction with the volume split into
    /// z-slabs (domain decomposition): the partial projections of the
    /// slabs are summed over the ranks every forward projection.
    ConeIterative {
        /// The whole scan's geometry.
        geometry: ConeGeometry,
        /// The whole volume.
        volume: ConeVolume,
        /// SIRT / Landweber / Cimmino / SART / BLOCK-IT and parameters.
        options: IterativeOptions,
        /// Projection model.
        projector: ProjectorKind,
        /// The rank's GPU (`None`: the CPU projectors). The caller gives
        /// one only for what the GPU runs (SIRT-type methods with the
        /// Joseph or voxel pair, SART and BLOCK-IT with the Joseph pair).
        gpu: Option<GpuChooser>,
    },
}

/// A reconstruction job, built on every rank from the same arguments.
pub struct ReconJob {
    /// The input, opened on this rank (no data read yet).
    pub source: Box<dyn ProjectionSource>,
    /// Projection angles in radians, one per projection.
    pub angles: Vec<f32>,
    /// Detector rows (slices) of the whole job (parallel beam).
    pub rows: Range<usize>,
    /// Flat/dark normalisation and the rest.
    pub preprocess: Preprocess,
    /// Output path (checked writable, not existing unless `overwrite`).
    pub out: PathBuf,
    /// Output format.
    pub format: VolumeFormat,
    /// Replace an existing output.
    pub overwrite: bool,
    /// Memory budget of one rank, bytes.
    pub memory: usize,
    /// No progress bar.
    pub quiet: bool,
    /// The computation.
    pub method: Method,
    /// The run's effective configuration (`tomors recon`'s provenance
    /// record), stored in the output as the single-process run stores it
    /// (HDF5/NeXus/OME-Zarr attribute, `tomors.toml` of a TIFF directory).
    pub provenance: Option<String>,
}

impl ReconJob {
    /// `meta` with the run's configuration, when there is one.
    pub(crate) fn with_provenance(&self, meta: tomors_io::VolumeMeta) -> tomors_io::VolumeMeta {
        match &self.provenance {
            Some(p) => meta.text(tomors_io::provenance::CONFIG_ATTR, p),
            None => meta,
        }
    }
}

/// Runs a job on every rank of `comm`: `build` prepares it on each rank
/// (parsing, opening the input, checking the output); a failure anywhere
/// ends every rank with the first failing rank's error, leaving no output.
pub fn run_job(comm: &dyn Comm, build: impl FnOnce() -> Result<ReconJob>) -> Result<(), Failure> {
    let job = agree(comm, build())?;
    match job.method {
        Method::Fbp { .. } => crate::slabs::run_fbp(comm, job),
        Method::Iterative { .. } => crate::slabs::run_iterative(comm, job),
        Method::Fdk { .. } => crate::cone::run_fdk(comm, job),
        Method::ConeIterative { .. } => crate::cone::run_iterative(comm, job),
    }
}

/// The GPU of a rank: its local rank modulo the number of GPUs it may use
/// (`devices`, e.g. from `--devices`, or every GPU of its host); `None`
/// when the host has no usable GPU. Several ranks on a host with fewer
/// GPUs share them.
pub fn gpu_for_rank(local_rank: usize, devices: Option<&[usize]>) -> Option<usize> {
    match devices {
        Some(list) if !list.is_empty() => Some(list[local_rank % list.len()]),
        _ => match tomors_cuda::device_count() {
            Ok(n) if n > 0 => Some(local_rank % n),
            _ => None,
        },
    }
}

/// A progress bar on rank 0 (hidden elsewhere and when quiet).
pub(crate) fn bar(
    comm: &dyn Comm,
    quiet: bool,
    total: u64,
    msg: &str,
    unit: &str,
) -> indicatif::ProgressBar {
    if quiet || comm.rank() != 0 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    let template = format!(
        "{{msg:>14}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{elapsed_precise}} (ETA {{eta}})"
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(msg.to_string());
    bar
}
