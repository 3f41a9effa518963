//! Large host↔device transfers through pinned chunks.

use std::sync::{Arc, Mutex};

use crate::error::{CudaError, Result};
use crate::runtime::{Context, DeviceBuffer, Event, PinnedBuffer, Stream};

/// Floats per pinned staging chunk of large transfers (32 MiB).
const PIN_CHUNK: usize = 8 << 20;

/// Two pinned staging buffers of [`PIN_CHUNK`] floats (allocated once).
fn pinned<'p>(
    ctx: &Arc<Context>,
    pins: &'p Mutex<Vec<PinnedBuffer>>,
) -> Result<std::sync::MutexGuard<'p, Vec<PinnedBuffer>>> {
    let mut p = pins
        .lock()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    while p.len() < 2 {
        p.push(PinnedBuffer::new(ctx, PIN_CHUNK)?);
    }
    Ok(p)
}

/// Uploads `data` to the start of `buf` through pinned chunks (host
/// copies in parallel, overlapped with the transfers), and waits.
pub(crate) fn upload_staged(
    ctx: &Arc<Context>,
    stream: &Stream,
    pins: &Mutex<Vec<PinnedBuffer>>,
    buf: &DeviceBuffer,
    data: &[f32],
) -> Result<()> {
    ctx.bind()?;
    if data.len() <= PIN_CHUNK {
        // SAFETY: `data` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.upload_async(
                0,
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
                stream,
            )?;
        }
        return stream.synchronize();
    }
    let mut pins = pinned(ctx, pins)?;
    let ev = [Event::new(ctx)?, Event::new(ctx)?];
    for (i, chunk) in data.chunks(PIN_CHUNK).enumerate() {
        if i >= 2 {
            ev[i % 2].synchronize()?;
        }
        let pin = &mut pins[i % 2].as_mut_slice()[..chunk.len()];
        par_copy(chunk, pin);
        // SAFETY: the pinned chunk is not written again before its event
        // (recorded right after the copy) has completed.
        unsafe {
            buf.upload_async(
                i * PIN_CHUNK * 4,
                pin.as_ptr() as *const u8,
                chunk.len() * 4,
                stream,
            )?;
        }
        ev[i % 2].record(stream)?;
    }
    stream.synchronize()
}

/// Downloads the start of `buf` into `out` through pinned chunks (after
/// the stream's work), and waits.
pub(crate) fn download_staged(
    ctx: &Arc<Context>,
    stream: &Stream,
    pins: &Mutex<Vec<PinnedBuffer>>,
    buf: &DeviceBuffer,
    out: &mut [f32],
) -> Result<()> {
    ctx.bind()?;
    if out.len() <= PIN_CHUNK {
        // SAFETY: `out` stays borrowed until the stream has been synchronised.
        unsafe {
            buf.download_async(
                0,
                out.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(out),
                stream,
            )?;
        }
        return stream.synchronize();
    }
    let mut pins = pinned(ctx, pins)?;
    let ev = [Event::new(ctx)?, Event::new(ctx)?];
    let chunks: Vec<&mut [f32]> = out.chunks_mut(PIN_CHUNK).collect();
    let n = chunks.len();
    let mut pending: Option<(usize, &mut [f32])> = None;
    let mut it = chunks.into_iter().enumerate();
    for step in 0..=n {
        let next = if step < n { it.next() } else { None };
        if let Some((i, dst)) = &next {
            let pin = &mut pins[i % 2];
            // SAFETY: the pinned buffer is read on the host only after
            // its event has completed, and not reused before that read.
            unsafe {
                buf.download_async(
                    i * PIN_CHUNK * 4,
                    pin.as_mut_slice().as_mut_ptr() as *mut u8,
                    dst.len() * 4,
                    stream,
                )?;
            }
            ev[i % 2].record(stream)?;
        }
        if let Some((j, dst)) = pending.take() {
            ev[j % 2].synchronize()?;
            par_copy(&pins[j % 2].as_slice()[..dst.len()], dst);
        }
        pending = next;
    }
    Ok(())
}

/// `dst.copy_from_slice(src)` on all cores.
pub(crate) fn par_copy(src: &[f32], dst: &mut [f32]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(1 << 18)
        .zip(src.par_chunks(1 << 18))
        .for_each(|(d, s)| d.copy_from_slice(s));
}
