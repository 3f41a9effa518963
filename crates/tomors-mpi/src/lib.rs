//! # tomors-mpi
//!
//! Distributed `tomors recon` over MPI (the `mpi` crate, rsmpi), behind
//! the command line's `mpi` feature. Under `mpirun -n P` (or `srun`) every
//! rank runs the same command; this crate splits the work:
//!
//! - parallel beam (FBP and the iterative methods): the detector rows
//!   (slices) are split over the ranks ([`split::split_rows`]), each rank
//!   reads, preprocesses and reconstructs only its rows ([`slabs`]);
//! - cone beam: the volume is split into z-slabs; FDK reads the detector
//!   rows a slab needs; the iterative methods sum the slabs' partial
//!   projections over the ranks every forward projection
//!   ([`cone::DistConeOperator`], the thesis' domain decomposition);
//! - every rank writes its slices straight into the output
//!   ([`output::DistOutput`]), which appears under its final name only when
//!   every rank has finished; any rank's failure ends every rank with that
//!   rank's one-line error ([`status::agree`]) and leaves nothing behind.
//!
//! The logic is written against the [`comm::Comm`] trait: over MPI with
//! the `mpi` feature ([`run_recon`]), over threads in the tests
//! ([`comm::ThreadComm`]), so the crate builds and its tests run on
//! machines without MPI.

#![warn(missing_docs)]

pub mod comm;
pub mod cone;
pub mod decomp;
pub mod dist_op;
pub mod gpu_op;
pub mod job;
pub mod launch;
pub mod log;
#[cfg(feature = "mpi")]
pub mod mpi_comm;
pub mod output;
pub mod slabs;
pub mod split;
pub mod status;

pub use comm::{Comm, ThreadComm};
pub use job::{
    gpu_for_rank, run_job, BackendFactory, Center, CenterFinder, ConeBackendFactory, GpuChooser,
    Method, ReconJob,
};
pub use launch::is_distributed;
pub use status::Failure;

/// Runs a `tomors recon` job on this rank of the MPI job the launcher
/// started (see [`launch::is_distributed`]): initialises MPI, builds the
/// job with `build` and runs it ([`run_job`]).
///
/// Returns `Ok` on every rank when the job succeeded. On failure rank 0
/// returns the failing rank's error (`rank N: …`, for the caller to print
/// as its one line); the other ranks finalise MPI and exit with status 1
/// without printing, so the error appears once.
#[cfg(feature = "mpi")]
pub fn run_recon(build: impl FnOnce() -> anyhow::Result<ReconJob>) -> anyhow::Result<()> {
    let comm = mpi_comm::MpiComm::init()?;
    if let Some(n) = launch::launched_size().filter(|&n| n != comm.size()) {
        // Every process would do the whole job and race for the output.
        anyhow::bail!(
            "the launcher started {n} processes but MPI sees {}: mpirun belongs to another MPI than the one tomors was built with",
            comm.size()
        );
    }
    let outcome = run_job(&comm, build);
    let rank = comm.rank();
    drop(comm); // MPI_Finalize
    match outcome {
        Ok(()) => Ok(()),
        Err(f) if rank == 0 => Err(anyhow::Error::new(f)),
        Err(_) => std::process::exit(1),
    }
}
