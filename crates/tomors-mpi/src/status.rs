//! Agreeing on success: every rank contributes its own outcome and all get
//! the same answer — success, or the first failing rank's one-line error.

use crate::comm::Comm;

/// A failure of a distributed job: which rank failed, and its error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The failing rank (the lowest, when several failed).
    pub rank: usize,
    /// Its error, one line (the context chain joined by ": ").
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {}: {}", self.rank, self.message)
    }
}

impl std::error::Error for Failure {}

/// Collective: `Ok` on every rank when every rank's `local` is `Ok`, else
/// the same [`Failure`] (the lowest failing rank's error) on every rank.
pub fn agree<T>(comm: &dyn Comm, local: anyhow::Result<T>) -> Result<T, Failure> {
    let size = comm.size() as u64;
    let code = if local.is_err() {
        comm.rank() as u64
    } else {
        size
    };
    let first = comm.allreduce_min_u64(code);
    if first == size {
        return Ok(local.unwrap_or_else(|_| unreachable!("every rank succeeded")));
    }
    let mut msg = match &local {
        Err(e) if comm.rank() as u64 == first => format!("{e:#}").into_bytes(),
        _ => Vec::new(),
    };
    comm.broadcast_bytes(first as usize, &mut msg);
    Err(Failure {
        rank: first as usize,
        message: String::from_utf8_lossy(&msg).into_owned(),
    })
}

/// The failure an environment variable injects for the tests:
/// `TOMORS_MPI_FAIL_RANK=r` makes rank `r` fail where it computes (as a
/// GPU or read error would).
pub fn injected_failure(rank: usize) -> anyhow::Result<()> {
    match std::env::var("TOMORS_MPI_FAIL_RANK") {
        Ok(v) if v.trim().parse::<usize>() == Ok(rank) => Err(anyhow::anyhow!(
            "failure injected by TOMORS_MPI_FAIL_RANK={rank}"
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::ThreadComm;

    #[test]
    fn lowest_failing_rank_wins_everywhere() {
        let out = ThreadComm::run(4, |c| {
            let local = if c.rank() >= 2 {
                Err(anyhow::anyhow!("disk full on {}", c.rank()))
            } else {
                Ok(c.rank())
            };
            agree(c, local)
        });
        for o in out {
            assert_eq!(
                o,
                Err(Failure {
                    rank: 2,
                    message: "disk full on 2".into()
                })
            );
        }
        let ok = ThreadComm::run(3, |c| agree(c, Ok(c.rank())));
        assert_eq!(ok, vec![Ok(0), Ok(1), Ok(2)]);
    }
}
