//! Large host↔device transfers through pinned chunks (the context's
//! staging pool: allocated on the first large transfer, reused by later
//! runs on the same context, one transfer at a time).

use std::sync::Arc;

use ndarray::Array3;

use crate::error::{CudaError, Result};
use crate::runtime::{Context, DeviceBuffer, Event, StagingChunk, Stream};

/// Floats per pinned staging chunk of large transfers (32 MiB).
const PIN_CHUNK: usize = 8 << 20;

/// The context's two pinned staging chunks of [`PIN_CHUNK`] floats
/// (allocated once per context), held for the caller's transfer.
fn pinned(ctx: &Context) -> Result<std::sync::MutexGuard<'_, Vec<StagingChunk>>> {
    let mut p = ctx
        .staging
        .lock()
        .map_err(|_| CudaError::Parameter("poisoned lock".into()))?;
    while p.len() < 2 {
        let c = StagingChunk::new(ctx, PIN_CHUNK)?;
        p.push(c);
    }
    Ok(p)
}

/// Uploads `data` to the start of `buf` through pinned chunks (host
/// copies in parallel, overlapped with the transfers), and waits.
pub(crate) fn upload_staged(
    ctx: &Arc<Context>,
    stream: &Stream,
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
    let mut pins = pinned(ctx)?;
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
    let mut pins = pinned(ctx)?;
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

/// Writes zeros over `out` on all cores, so that its pages are mapped
/// (first-touch page faults of a fresh host array otherwise slow the
/// download into it); run on a helper thread while the device iterates.
pub(crate) fn prefault(mut out: ndarray::ArrayViewMut3<'_, f32>) {
    use ndarray::parallel::prelude::*;
    out.axis_iter_mut(ndarray::Axis(0))
        .into_par_iter()
        .for_each(|mut s| s.fill(0.0));
}

/// A zeroed host array of `dim` whose pages are not mapped yet (a fresh
/// zeroed allocation), advised to use transparent huge pages where the
/// system allows them: mapping a 2 MiB page costs one fault instead of 512,
/// so [`prefault`] (or the download into it) runs many times faster.
pub(crate) fn host_zeros(dim: (usize, usize, usize)) -> Array3<f32> {
    let mut v = vec![0f32; dim.0 * dim.1 * dim.2];
    advise_huge(&mut v);
    Array3::from_shape_vec(dim, v).unwrap_or_else(|_| Array3::zeros(dim))
}

/// `madvise(MADV_HUGEPAGE)` over the whole 2 MiB pages inside `v` (advice
/// only: errors, or a system without transparent huge pages, change
/// nothing).
#[cfg(target_os = "linux")]
fn advise_huge(v: &mut [f32]) {
    const HUGE: usize = 2 << 20;
    let p = v.as_mut_ptr() as usize;
    let start = p.div_ceil(HUGE) * HUGE;
    let end = (p + std::mem::size_of_val(v)) / HUGE * HUGE;
    if end > start {
        // SAFETY: the range lies inside `v`'s allocation, which stays
        // alive; the advice changes how its pages are mapped, not their
        // contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge(_v: &mut [f32]) {}

/// `dst.copy_from_slice(src)` on all cores.
pub(crate) fn par_copy(src: &[f32], dst: &mut [f32]) {
    use rayon::prelude::*;
    dst.par_chunks_mut(1 << 18)
        .zip(src.par_chunks(1 << 18))
        .for_each(|(d, s)| d.copy_from_slice(s));
}
