//! Carrying out a [`Job`]: one module per method, each taking the job and
//! none importing another.

mod cone_fdk;
mod cone_iterative;
mod fbp;
mod iterative;

use anyhow::Result;

use crate::job::{Job, Route};

/// Validates `job` and runs the method it describes.
pub fn run(job: &Job) -> Result<()> {
    let route = job.validate()?;
    // Under mpirun/srun: the ranks share the job (tomors-mpi).
    #[cfg(feature = "mpi")]
    if tomors_mpi::is_distributed() {
        return crate::mpi_recon::run(job, route);
    }
    match route {
        Route::Fbp => fbp::run(job),
        Route::Iterative => iterative::run(job),
        Route::ConeFdk => cone_fdk::run(job),
        Route::ConeIterative => cone_iterative::run(job),
    }
}
