//! [`Comm`] over MPI (rsmpi), feature `mpi`.

use std::sync::Mutex;

use mpi::collective::SystemOperation;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;

use crate::comm::Comm;

/// Largest element count of one MPI call (counts are C `int`s).
const MAX_COUNT: usize = 1 << 28;

/// The MPI world of this process. MPI is initialised with
/// `MPI_THREAD_SERIALIZED` and every call goes through one mutex, so the
/// communicator may be used from any thread (rayon workers included).
pub struct MpiComm {
    world: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
    local_rank: usize,
    // Finalises MPI when dropped (after `world`).
    _universe: Universe,
}

// SAFETY: MPI is initialised with at least MPI_THREAD_SERIALIZED (checked in
// `init`) and every use of the communicator holds the mutex, so calls from
// different threads never overlap.
unsafe impl Send for MpiComm {}
unsafe impl Sync for MpiComm {}

impl MpiComm {
    /// Initialises MPI (once per process). Errors when MPI cannot be
    /// initialised or does not provide serialized threading.
    pub fn init() -> anyhow::Result<Self> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
            .ok_or_else(|| anyhow::anyhow!("MPI: already initialised in this process"))?;
        if threading < Threading::Serialized {
            anyhow::bail!(
                "MPI: the library offers threading level {threading:?}, tomors needs Serialized"
            );
        }
        let world = universe.world();
        let rank = world.rank() as usize;
        let size = world.size() as usize;
        let local_rank = world.split_shared(rank as i32).rank() as usize;
        Ok(Self {
            world: Mutex::new(world),
            rank,
            size,
            local_rank,
            _universe: universe,
        })
    }

    fn with<R>(&self, f: impl FnOnce(&SimpleCommunicator) -> R) -> R {
        let w = self.world.lock().unwrap_or_else(|p| p.into_inner());
        f(&w)
    }
}

impl Comm for MpiComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    fn local_rank(&self) -> usize {
        self.local_rank
    }
    fn barrier(&self) {
        self.with(|w| w.barrier());
    }
    fn allreduce_sum_f32(&self, buf: &mut [f32]) {
        self.with(|w| {
            for chunk in buf.chunks_mut(MAX_COUNT) {
                let send = chunk.to_vec();
                w.all_reduce_into(&send[..], chunk, SystemOperation::sum());
            }
        });
    }
    fn allreduce_sum_f64(&self, buf: &mut [f64]) {
        self.with(|w| {
            for chunk in buf.chunks_mut(MAX_COUNT) {
                let send = chunk.to_vec();
                w.all_reduce_into(&send[..], chunk, SystemOperation::sum());
            }
        });
    }
    fn allreduce_min_u64(&self, value: u64) -> u64 {
        let mut out = 0u64;
        self.with(|w| w.all_reduce_into(&value, &mut out, SystemOperation::min()));
        out
    }
    fn allreduce_max_f64(&self, value: f64) -> f64 {
        let mut out = 0f64;
        self.with(|w| w.all_reduce_into(&value, &mut out, SystemOperation::max()));
        out
    }
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) {
        self.with(|w| {
            let p = w.process_at_rank(root as i32);
            let mut len = buf.len() as u64;
            p.broadcast_into(&mut len);
            buf.resize(len as usize, 0);
            for chunk in buf.chunks_mut(MAX_COUNT) {
                p.broadcast_into(chunk);
            }
        });
    }
    fn send_bytes(&self, dest: usize, data: &[u8]) {
        assert!(data.len() <= i32::MAX as usize, "message too large");
        self.with(|w| w.process_at_rank(dest as i32).send(data));
    }
    fn recv_bytes(&self, src: usize) -> Vec<u8> {
        self.with(|w| w.process_at_rank(src as i32).receive_vec::<u8>().0)
    }
    fn send_f32(&self, dest: usize, data: &[f32]) {
        assert!(data.len() <= i32::MAX as usize, "message too large");
        self.with(|w| w.process_at_rank(dest as i32).send(data));
    }
    fn recv_f32(&self, src: usize) -> Vec<f32> {
        self.with(|w| w.process_at_rank(src as i32).receive_vec::<f32>().0)
    }
    fn abort(&self, code: i32) -> ! {
        // No lock: another thread may hold it inside a blocked call.
        mpi::topology::SimpleCommunicator::world().abort(code)
    }
}
