//! The sum of the slabs' partial projections across devices, so every
//! device holds the whole forward projection: host-staged (each device's
//! partial downloaded to pinned host memory, the others' uploaded and added
//! on each device) or peer-to-peer (each device copies the others' partials
//! straight from their memory, over NVLink or PCIe, and adds them).

use std::sync::Mutex;

use cudarc::driver::sys;

use crate::error::{CudaError, Result};
use crate::iterative::device::DeviceVec;
use crate::runtime::{check, PinnedBuffer};

use super::{CudaConeSlabs, Exchange};

/// Per-device buffers of the exchange, grown on demand: the receive
/// vectors (one per other device) and, host-staged, one pinned buffer per
/// device.
#[derive(Default)]
pub(super) struct Buffers {
    recv: Vec<Vec<DeviceVec>>,
    pinned: Vec<Option<PinnedBuffer>>,
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>> {
    m.lock()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))
}

/// Receive vectors shaped as `like` on every device (`P − 1` each), kept
/// in `recv` while the shapes stay.
fn recv_like<'b>(
    recv: &'b mut Vec<Vec<DeviceVec>>,
    like: &[DeviceVec],
) -> Result<&'b mut Vec<Vec<DeviceVec>>> {
    let p = like.len();
    let fits = recv.len() == p
        && recv
            .iter()
            .zip(like)
            .all(|(r, l)| r.len() == p - 1 && r.iter().all(|v| v.layout() == l.layout()));
    if !fits {
        recv.clear();
        for l in like {
            let mut r = Vec::with_capacity(p - 1);
            for _ in 1..p {
                r.push(DeviceVec::uninit(
                    l.queue(),
                    l.layout(),
                    "received projections",
                )?);
            }
            recv.push(r);
        }
    }
    Ok(recv)
}

impl CudaConeSlabs {
    /// `parts[s] ← Σ_t parts[t]` on every device `s` (each part holds its
    /// slab's partial projections on entry). On device `s` the others are
    /// added in the order `s+1, s+2, …` (mod P): for two devices the sums
    /// are equal bit for bit (addition commutes).
    pub(super) fn sum_partials(&self, parts: &mut [DeviceVec]) -> Result<()> {
        let p = parts.len();
        if p <= 1 {
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        // The partial projections are complete.
        for v in parts.iter() {
            v.queue().stream().synchronize()?;
        }
        let mut bufs = lock(&self.buffers)?;
        match self.exchange {
            Exchange::HostStaged => self.sum_host(&mut bufs, parts)?,
            Exchange::Peer => self.sum_peer(&mut bufs, parts)?,
        }
        let mut st = lock(&self.stats)?;
        st.0 += 1;
        st.1 += t0.elapsed().as_secs_f64();
        Ok(())
    }

    fn sum_host(&self, bufs: &mut Buffers, parts: &mut [DeviceVec]) -> Result<()> {
        let p = parts.len();
        let n = parts[0].layout().stored_len();
        bufs.pinned.resize_with(p, || None);
        // Every partial to its pinned buffer, the devices in parallel.
        for (s, v) in parts.iter().enumerate() {
            let ctx = v.queue().context();
            crate::runtime::ensure_pinned(&mut bufs.pinned[s], ctx, n)?;
            let pin = bufs.pinned[s].as_mut().expect("just allocated");
            ctx.bind()?;
            // SAFETY: the pinned buffer holds at least `n` floats and is
            // neither read nor written before the stream is synchronised
            // below.
            unsafe {
                v.buffer().download_async(
                    0,
                    pin.as_mut_slice().as_mut_ptr() as *mut u8,
                    n * 4,
                    v.queue().stream(),
                )?;
            }
        }
        for v in parts.iter() {
            v.queue().stream().synchronize()?;
        }
        // The others' partials up to every device, added there.
        let Buffers { recv, pinned } = bufs;
        let recv = recv_like(recv, parts)?;
        for (s, v) in parts.iter_mut().enumerate() {
            for k in 1..p {
                let t = (s + k) % p;
                let r = &recv[s][k - 1];
                let pin = pinned[t].as_ref().expect("allocated above");
                v.queue().context().bind()?;
                // SAFETY: the pinned buffer holds `n` floats and stays
                // untouched until every stream is synchronised below.
                unsafe {
                    r.buffer().upload_async(
                        0,
                        pin.as_slice().as_ptr() as *const u8,
                        n * 4,
                        v.queue().stream(),
                    )?;
                }
                tomors_core::linalg::Vector::axpy(v, 1.0, r)?;
            }
        }
        // The pinned buffers are written again by the next sum.
        for v in parts.iter() {
            v.queue().stream().synchronize()?;
        }
        Ok(())
    }

    fn sum_peer(&self, bufs: &mut Buffers, parts: &mut [DeviceVec]) -> Result<()> {
        let p = parts.len();
        let bytes = parts[0].layout().stored_len() * 4;
        let recv = recv_like(&mut bufs.recv, parts)?;
        // Every device copies the others' partials (before any is changed).
        for (s, v) in parts.iter().enumerate() {
            let dst_ctx = v.queue().context();
            dst_ctx.bind()?;
            for k in 1..p {
                let t = (s + k) % p;
                let src = &parts[t];
                // SAFETY: both buffers hold `bytes` bytes on their devices;
                // the source is not written before every stream is
                // synchronised below.
                let r = unsafe {
                    sys::cuMemcpyPeerAsync(
                        recv[s][k - 1].buffer().ptr(),
                        dst_ctx.cuda().cu_ctx(),
                        src.buffer().ptr(),
                        src.queue().context().cuda().cu_ctx(),
                        bytes,
                        v.queue().stream().raw(),
                    )
                };
                check(r, "cuMemcpyPeerAsync")?;
                crate::runtime::transfer::count(bytes);
            }
        }
        for v in parts.iter() {
            v.queue().stream().synchronize()?;
        }
        for (s, v) in parts.iter_mut().enumerate() {
            for r in &recv[s] {
                tomors_core::linalg::Vector::axpy(v, 1.0, r)?;
            }
        }
        Ok(())
    }
}

/// Lets every pair of the devices of `ctxs` access each other's memory
/// where the hardware allows (NVLink or PCIe peer-to-peer). Returns whether
/// every pair can.
pub(super) fn enable_peer_access(
    ctxs: &[&std::sync::Arc<crate::runtime::Context>],
) -> Result<bool> {
    let mut all = true;
    for a in ctxs {
        for b in ctxs {
            if a.ordinal == b.ordinal {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: a plain query of two device handles.
            let r = unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, a.cuda().cu_device(), b.cuda().cu_device())
            };
            check(r, "cuDeviceCanAccessPeer")?;
            if can == 0 {
                all = false;
                continue;
            }
            a.bind()?;
            // SAFETY: grants the current context (a's) access to b's memory.
            let r = unsafe { sys::cuCtxEnablePeerAccess(b.cuda().cu_ctx(), 0) };
            if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                check(r, "cuCtxEnablePeerAccess")?;
            }
        }
    }
    Ok(all)
}
