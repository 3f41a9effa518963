//! The communicator the distributed jobs use: the few collective and
//! point-to-point operations they need, over MPI ([`crate::mpi_comm`],
//! feature `mpi`) or over threads of one process ([`ThreadComm`], which the
//! tests use to run the decomposition logic without an MPI installation).
//!
//! Every operation is collective over all ranks unless it says otherwise;
//! ranks must call them in the same order.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Barrier, Mutex};

/// The operations of a communicator of `size` ranks.
pub trait Comm: Send + Sync {
    /// This rank, `0..size`.
    fn rank(&self) -> usize;

    /// Number of ranks.
    fn size(&self) -> usize;

    /// This rank's index among the ranks on its host (chooses its GPU).
    fn local_rank(&self) -> usize;

    /// Waits until every rank has reached the barrier.
    fn barrier(&self);

    /// Element-wise sum over the ranks, in place; every rank gets the same
    /// result.
    fn allreduce_sum_f32(&self, buf: &mut [f32]);

    /// Element-wise sum over the ranks (f64), in place.
    fn allreduce_sum_f64(&self, buf: &mut [f64]);

    /// The minimum over the ranks of `value`.
    fn allreduce_min_u64(&self, value: u64) -> u64;

    /// The maximum over the ranks of `value`.
    fn allreduce_max_f64(&self, value: f64) -> f64;

    /// Replaces `buf` on every rank with `root`'s `buf` (any length).
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>);

    /// Sends `data` to rank `dest` (point to point, blocking).
    fn send_bytes(&self, dest: usize, data: &[u8]);

    /// Receives the next message from rank `src` (point to point, blocking).
    fn recv_bytes(&self, src: usize) -> Vec<u8>;

    /// Sends f32 values to rank `dest` (point to point).
    fn send_f32(&self, dest: usize, data: &[f32]);

    /// Receives f32 values from rank `src` (point to point).
    fn recv_f32(&self, src: usize) -> Vec<f32>;

    /// Ends every rank of the job at once with exit code `code` (for errors
    /// a rank meets where the others may be waiting in a collective).
    fn abort(&self, code: i32) -> !;
}

/// Broadcasts one f32 from `root`.
pub fn broadcast_f32(comm: &dyn Comm, root: usize, value: f32) -> f32 {
    let mut b = value.to_le_bytes().to_vec();
    comm.broadcast_bytes(root, &mut b);
    f32::from_le_bytes(b[..4].try_into().expect("4 bytes"))
}

/// Ranks as threads of this process, for tests of the distributed logic:
/// the sums are taken in rank order, so every rank gets the same bits.
pub struct ThreadComm {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    size: usize,
    barrier: Barrier,
    f32_slots: Mutex<Vec<Vec<f32>>>,
    f64_slots: Mutex<Vec<Vec<f64>>>,
    byte_slots: Mutex<Vec<Vec<u8>>>,
    /// `links[src][dst]`.
    links: Vec<Vec<Link>>,
}

struct Link {
    tx: Sender<Vec<u8>>,
    rx: Mutex<Receiver<Vec<u8>>>,
}

impl ThreadComm {
    /// Runs `f` on `size` threads, each with its own rank, and returns their
    /// results in rank order. A panic on one thread (e.g. [`Comm::abort`])
    /// is re-raised here once all threads ended — so `abort` must only be
    /// used where the other ranks do not wait for the aborting one.
    pub fn run<R: Send>(size: usize, f: impl Fn(&dyn Comm) -> R + Sync) -> Vec<R> {
        assert!(size > 0, "at least one rank");
        let links = (0..size)
            .map(|_| {
                (0..size)
                    .map(|_| {
                        let (tx, rx) = channel();
                        Link {
                            tx,
                            rx: Mutex::new(rx),
                        }
                    })
                    .collect()
            })
            .collect();
        let shared = Arc::new(Shared {
            size,
            barrier: Barrier::new(size),
            f32_slots: Mutex::new(vec![Vec::new(); size]),
            f64_slots: Mutex::new(vec![Vec::new(); size]),
            byte_slots: Mutex::new(vec![Vec::new(); size]),
            links,
        });
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let comm = ThreadComm {
                        rank,
                        shared: shared.clone(),
                    };
                    let f = &f;
                    s.spawn(move || f(&comm))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    fn reduce<T: Copy + std::ops::Add<Output = T>>(
        &self,
        slots: &Mutex<Vec<Vec<T>>>,
        buf: &mut [T],
    ) {
        slots.lock().expect("slots")[self.rank] = buf.to_vec();
        self.shared.barrier.wait();
        {
            let s = slots.lock().expect("slots");
            for (i, v) in buf.iter_mut().enumerate() {
                let mut acc = s[0][i];
                for r in s.iter().skip(1) {
                    acc = acc + r[i];
                }
                *v = acc;
            }
        }
        self.shared.barrier.wait();
    }
}

impl Comm for ThreadComm {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.shared.size
    }
    fn local_rank(&self) -> usize {
        self.rank
    }
    fn barrier(&self) {
        self.shared.barrier.wait();
    }
    fn allreduce_sum_f32(&self, buf: &mut [f32]) {
        self.reduce(&self.shared.f32_slots, buf);
    }
    fn allreduce_sum_f64(&self, buf: &mut [f64]) {
        self.reduce(&self.shared.f64_slots, buf);
    }
    fn allreduce_min_u64(&self, value: u64) -> u64 {
        let mut b = [value as f64];
        // Values here are ranks and sizes: exact in f64. Min via the slots.
        self.shared.f64_slots.lock().expect("slots")[self.rank] = b.to_vec();
        self.shared.barrier.wait();
        {
            let s = self.shared.f64_slots.lock().expect("slots");
            b[0] = s.iter().map(|v| v[0]).fold(f64::INFINITY, f64::min);
        }
        self.shared.barrier.wait();
        b[0] as u64
    }
    fn allreduce_max_f64(&self, value: f64) -> f64 {
        self.shared.f64_slots.lock().expect("slots")[self.rank] = vec![value];
        self.shared.barrier.wait();
        let m = {
            let s = self.shared.f64_slots.lock().expect("slots");
            s.iter().map(|v| v[0]).fold(f64::NEG_INFINITY, f64::max)
        };
        self.shared.barrier.wait();
        m
    }
    fn broadcast_bytes(&self, root: usize, buf: &mut Vec<u8>) {
        if self.rank == root {
            self.shared.byte_slots.lock().expect("slots")[root] = buf.clone();
        }
        self.shared.barrier.wait();
        if self.rank != root {
            *buf = self.shared.byte_slots.lock().expect("slots")[root].clone();
        }
        self.shared.barrier.wait();
    }
    fn send_bytes(&self, dest: usize, data: &[u8]) {
        self.shared.links[self.rank][dest]
            .tx
            .send(data.to_vec())
            .expect("the receiving rank is alive");
    }
    fn recv_bytes(&self, src: usize) -> Vec<u8> {
        self.shared.links[src][self.rank]
            .rx
            .lock()
            .expect("link")
            .recv()
            .expect("the sending rank is alive")
    }
    fn send_f32(&self, dest: usize, data: &[f32]) {
        self.send_bytes(dest, &f32_to_bytes(data));
    }
    fn recv_f32(&self, src: usize) -> Vec<f32> {
        bytes_to_f32(&self.recv_bytes(src))
    }
    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted the job (exit code {code})", self.rank)
    }
}

/// f32 values as little-endian bytes.
pub fn f32_to_bytes(data: &[f32]) -> Vec<u8> {
    data.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Little-endian bytes as f32 values.
pub fn bytes_to_f32(data: &[u8]) -> Vec<f32> {
    data.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_comm_collectives() {
        let out = ThreadComm::run(3, |c| {
            let mut v = vec![c.rank() as f32 + 0.5; 4];
            c.allreduce_sum_f32(&mut v);
            let min = c.allreduce_min_u64(10 - c.rank() as u64);
            let mut b = if c.rank() == 1 {
                b"hello".to_vec()
            } else {
                Vec::new()
            };
            c.broadcast_bytes(1, &mut b);
            if c.rank() == 2 {
                c.send_f32(0, &[1.0, 2.0]);
            }
            let got = if c.rank() == 0 {
                c.recv_f32(2)
            } else {
                Vec::new()
            };
            (v, min, b, got)
        });
        for (r, (v, min, b, got)) in out.iter().enumerate() {
            assert_eq!(v, &vec![4.5; 4]);
            assert_eq!(*min, 8);
            assert_eq!(b, b"hello");
            if r == 0 {
                assert_eq!(got, &vec![1.0, 2.0]);
            }
        }
    }
}
