//! Whether this process was started by an MPI launcher (`mpirun`,
//! `mpiexec`, Slurm's `srun`), read from the environment the launchers set,
//! without initialising MPI: a `tomors` started without one never touches
//! MPI and behaves exactly as the single-process build.

/// Environment variables that carry the rank, by launcher: MPICH/Intel MPI
/// (Hydra, PMI), Open MPI, PMIx, Slurm `srun` job steps.
const RANK_VARS: [&str; 4] = [
    "PMI_RANK",
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];
/// Variables that carry the number of ranks. `SLURM_STEP_NUM_TASKS` (set in
/// `srun` steps only), not `SLURM_NTASKS`, which a batch script has too.
const SIZE_VARS: [&str; 3] = ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"];

fn first_number(vars: &[&str]) -> Option<usize> {
    vars.iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// The number of ranks the launcher started, if any. `TOMORS_MPI=0` hides a
/// launcher (run every rank as an independent single process).
pub fn launched_size() -> Option<usize> {
    if std::env::var("TOMORS_MPI").is_ok_and(|v| v.trim() == "0") {
        return None;
    }
    first_number(&SIZE_VARS)
}

/// This process's rank as the launcher says, if launched by one.
pub fn launched_rank() -> Option<usize> {
    launched_size()?;
    first_number(&RANK_VARS)
}

/// Whether this is one rank of a job of several (a launcher started more
/// than one process). With one rank the single-process code runs.
pub fn is_distributed() -> bool {
    launched_size().is_some_and(|n| n > 1)
}
