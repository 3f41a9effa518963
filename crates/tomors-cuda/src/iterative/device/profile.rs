//! Kernel timing by kind with CUDA events, for the run statistics.

use std::sync::Arc;

use crate::error::Result;
use crate::runtime::{Context, Event, Stream};

/// What a timed kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// A forward projection.
    Forward,
    /// A back projection.
    Back,
    /// Element-wise operations, reductions, layout changes.
    Elementwise,
}

impl KernelKind {
    fn index(self) -> usize {
        match self {
            KernelKind::Forward => 0,
            KernelKind::Back => 1,
            KernelKind::Elementwise => 2,
        }
    }
}

/// Kernel seconds and launches by kind.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Times {
    /// Seconds per kind (forward, back, element-wise).
    pub seconds: [f64; 3],
    /// Timed launches per kind.
    pub counts: [usize; 3],
}

impl Times {
    pub(crate) fn get(&self, kind: KernelKind) -> (f64, usize) {
        (self.seconds[kind.index()], self.counts[kind.index()])
    }
}

/// Events recorded around timed work, resolved lazily (after the host has
/// waited for the stream anyway), and recycled.
#[derive(Default)]
pub(crate) struct Profile {
    pending: Vec<(KernelKind, Event, Event)>,
    pool: Vec<Event>,
    times: Times,
}

impl Profile {
    fn event(&mut self, ctx: &Arc<Context>) -> Result<Event> {
        match self.pool.pop() {
            Some(e) => Ok(e),
            None => Event::new(ctx),
        }
    }

    /// Records events around the work `queue_work` queues on `stream`.
    pub(crate) fn timed(
        &mut self,
        ctx: &Arc<Context>,
        stream: &Stream,
        kind: KernelKind,
        queue_work: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let (a, b) = (self.event(ctx)?, self.event(ctx)?);
        a.record(stream)?;
        queue_work()?;
        b.record(stream)?;
        self.pending.push((kind, a, b));
        Ok(())
    }

    /// Adds the pending intervals (waiting for them) and returns the totals.
    pub(crate) fn collect(&mut self) -> Result<Times> {
        for (kind, a, b) in std::mem::take(&mut self.pending) {
            let ms = a.elapsed_ms(&b)?;
            self.times.seconds[kind.index()] += ms as f64 * 1e-3;
            self.times.counts[kind.index()] += 1;
            self.pool.push(a);
            self.pool.push(b);
        }
        Ok(self.times)
    }
}
