//! The download of SIRT's final iterate beside the forward projection of
//! its last iteration (a [`FinalHook`]): with the residual history tracked,
//! the last forward projection only serves the final residual, and the
//! iterate is final before it is queued, so the copy engine brings the
//! iterate to the host while the device projects it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::error::{CudaError, Result};
use crate::iterative::device::{DeviceVec, Queue};
use crate::iterative::download_staged;
use crate::iterative::run::FinalHook;
use crate::runtime::{Event, Stream};

/// What the hook downloads from.
pub(crate) enum Staged {
    /// The iterate itself (a flat array).
    Direct,
    /// A flat copy of the iterate, queued on the operator's stream.
    Copy(DeviceVec),
    /// Nothing: the download waits until after the loop (no device memory
    /// for a copy, say).
    Skip,
}

/// Queues (on the operator's stream) what the iterate is downloaded from.
pub(crate) type Stage<'a> = Box<dyn Fn(&DeviceVec) -> Result<Staged> + Send + Sync + 'a>;

/// Produces the host destination (joins the thread that maps its pages).
pub(crate) type Fetch<'a, T> = Box<dyn FnOnce() -> Result<T> + Send + 'a>;

enum Dest<'a, T> {
    Fetch(Fetch<'a, T>),
    Host(T),
    Empty,
}

/// A [`FinalHook`] that downloads the final iterate on a side stream while
/// the forward projection runs; the host destination `T` comes from a
/// [`Fetch`] and is seen as a flat slice through `slice` (`None`: not
/// one slice, left to the download after the loop).
pub(crate) struct EarlyDownload<'a, T: Send> {
    queue: &'a Queue,
    stage: Stage<'a>,
    slice: fn(&mut T) -> Option<&mut [f32]>,
    dest: Mutex<Dest<'a, T>>,
    /// The event after the final update, and the staged copy.
    pending: Mutex<Option<(Event, Option<DeviceVec>)>>,
    done: AtomicBool,
}

fn poisoned() -> CudaError {
    CudaError::Parameter("poisoned lock".into())
}

impl<'a, T: Send> EarlyDownload<'a, T> {
    /// A hook on `queue` (the operator's) that downloads into the
    /// destination `fetch` produces.
    pub(crate) fn new(
        queue: &'a Queue,
        stage: Stage<'a>,
        fetch: Fetch<'a, T>,
        slice: fn(&mut T) -> Option<&mut [f32]>,
    ) -> Self {
        Self {
            queue,
            stage,
            slice,
            dest: Mutex::new(Dest::Fetch(fetch)),
            pending: Mutex::new(None),
            done: AtomicBool::new(false),
        }
    }

    /// The host destination, and whether the hook has downloaded an iterate
    /// into it (the caller knows whether that iterate was the final one:
    /// [`Prepared::hook_saw_final`](crate::iterative::run::Prepared)).
    ///
    /// Errors: a destination already taken, the fetch's errors.
    pub(crate) fn take_host(&self) -> Result<(T, bool)> {
        let mut d = self.dest.lock().map_err(|_| poisoned())?;
        let host = match std::mem::replace(&mut *d, Dest::Empty) {
            Dest::Fetch(f) => f()?,
            Dest::Host(h) => h,
            Dest::Empty => {
                return Err(CudaError::Parameter(
                    "the host output was taken twice".into(),
                ))
            }
        };
        Ok((host, self.done.load(Ordering::Acquire)))
    }
}

impl<T: Send> FinalHook<DeviceVec> for EarlyDownload<'_, T> {
    fn before_forward(&self, x: &DeviceVec) -> Result<()> {
        let staged = match (self.stage)(x)? {
            Staged::Skip => return Ok(()),
            Staged::Direct => None,
            Staged::Copy(v) => Some(v),
        };
        let ctx = self.queue.context();
        ctx.bind()?;
        let ev = Event::new(ctx)?;
        ev.record(self.queue.stream())?;
        *self.pending.lock().map_err(|_| poisoned())? = Some((ev, staged));
        Ok(())
    }

    fn after_forward(&self, x: &DeviceVec) -> Result<()> {
        let Some((ev, staged)) = self.pending.lock().map_err(|_| poisoned())?.take() else {
            return Ok(());
        };
        let (mut host, _) = self.take_host()?;
        let src = staged.as_ref().unwrap_or(x);
        let ctx = self.queue.context();
        // A destination that is not one flat slice is left to the
        // download after the loop.
        let res = match (self.slice)(&mut host) {
            Some(dst) => (|| -> Result<bool> {
                let side = Stream::new(ctx)?;
                side.wait(&ev)?;
                download_staged(ctx, &side, src.buffer(), dst)?;
                Ok(true)
            })(),
            None => Ok(false),
        };
        *self.dest.lock().map_err(|_| poisoned())? = Dest::Host(host);
        if res? {
            self.done.store(true, Ordering::Release);
        }
        Ok(())
    }
}
