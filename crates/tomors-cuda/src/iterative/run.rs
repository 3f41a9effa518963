//! Running tomors-core's [`solve`] on a device operator: the data and the
//! iterate stay on the device, the SIRT weights are computed in the setup
//! ([`Prepared`]), the kernels are timed by kind for [`SirtStats`], and the
//! progress callback sees every iteration ([`GpuIteration`]).
//!
//! This is the one GPU iteration loop: the parallel-beam
//! ([`sirt_cuda`](crate::sirt_cuda)) and cone-beam
//! ([`cone_sirt_cuda`](crate::cone_sirt_cuda)) runs only upload, call
//! [`solve_on_device`] and download.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use tomors_core::iterative::{
    default_relaxation_of, solve, Algorithm, IterativeOptions, SolveReport, Weighting,
};
use tomors_core::linalg::{LinearOperator, RayAccess, RayBatches};
use tomors_core::Result as CoreResult;

use crate::error::Result;
use crate::iterative::device::{DeviceVec, KernelKind, Queue};
use crate::iterative::{GpuIteration, SirtStats};

/// Work that a run does beside the forward projection of SIRT's last
/// iteration (the final iterate is complete when it is queued, and the
/// projection only reads it): the download of the iterate, say, while the
/// device computes the final residual.
pub(crate) trait FinalHook<D>: Sync {
    /// Called with the final iterate before its forward projection is
    /// queued (queue what must precede it on the operator's stream).
    fn before_forward(&self, x: &D) -> Result<()>;
    /// Called after the forward projection has been queued.
    fn after_forward(&self, x: &D) -> Result<()>;
}

/// An operator whose weights of the full set of projections were computed
/// ahead (in the setup of a run): the first request of each is answered
/// with the precomputed vector (moved out), later ones are computed again.
/// Everything else is the wrapped operator's. An optional [`FinalHook`]
/// runs around the forward projection of SIRT's last iteration.
pub(crate) struct Prepared<'o, O: LinearOperator + ?Sized> {
    op: &'o O,
    rows: Mutex<Option<(bool, O::Range)>>,
    columns: Mutex<Option<O::Domain>>,
    /// Back projections of all projections so far (SIRT: one per
    /// iteration, each followed by the update of the iterate).
    backs: AtomicUsize,
    /// The hook and the iteration count of SIRT whose last forward
    /// projection it surrounds.
    hook: Option<(usize, &'o dyn FinalHook<O::Domain>)>,
    /// `backs` when the hook ran (`usize::MAX`: not run).
    fired_at: AtomicUsize,
}

impl<'o, O: LinearOperator + ?Sized> Prepared<'o, O> {
    /// Computes the weights of `algorithm` over all projections that
    /// [`solve`] asks for (row sums or row norms, column sums of SIRT and
    /// the row weights of the block methods, which cut them per block).
    pub(crate) fn new(op: &'o O, algorithm: &Algorithm) -> CoreResult<Self> {
        let all: Vec<usize> = (0..op.n_projections()).collect();
        let (weighting, sirt) = match *algorithm {
            Algorithm::Sirt(w) => (w, true),
            Algorithm::BlockSequential { weighting, .. } => (weighting, false),
            _ => (Weighting::Landweber, false),
        };
        let rows = match weighting {
            Weighting::Landweber => None,
            Weighting::Cimmino => Some((true, op.row_norms_sq(&all)?)),
            Weighting::RowColumnSums => Some((false, op.row_sums(&all)?)),
        };
        let columns = match weighting {
            Weighting::RowColumnSums if sirt => Some(op.column_sums(&all)?),
            _ => None,
        };
        Ok(Self {
            op,
            rows: Mutex::new(rows),
            columns: Mutex::new(columns),
            backs: AtomicUsize::new(0),
            hook: None,
            fired_at: AtomicUsize::new(usize::MAX),
        })
    }

    /// Runs `hook` around the forward projection of all projections that
    /// follows the `iterations`-th back projection of all projections
    /// (SIRT's last iteration: its update is queued, the forward projection
    /// is the final residual's) — only for SIRT, whose iterate changes
    /// only right after a back projection.
    pub(crate) fn with_final_hook(
        mut self,
        algorithm: &Algorithm,
        iterations: usize,
        hook: &'o dyn FinalHook<O::Domain>,
    ) -> Self {
        if matches!(algorithm, Algorithm::Sirt(_)) && iterations > 0 {
            self.hook = Some((iterations, hook));
        }
        self
    }

    /// Whether the hook ran on the final iterate: it ran, and no back
    /// projection (hence no update of the iterate) followed.
    pub(crate) fn hook_saw_final(&self) -> bool {
        let at = self.fired_at.load(Ordering::Acquire);
        at != usize::MAX && at == self.backs.load(Ordering::Acquire)
    }

    fn is_all(&self, angles: &[usize]) -> bool {
        angles.len() == self.op.n_projections() && angles.iter().enumerate().all(|(i, &a)| i == a)
    }

    fn take_rows(&self, angles: &[usize], squared: bool) -> Option<O::Range> {
        if !self.is_all(angles) {
            return None;
        }
        let mut g = self.rows.lock().ok()?;
        match g.take() {
            Some((sq, v)) if sq == squared => Some(v),
            other => {
                *g = other;
                None
            }
        }
    }
}

impl<O: LinearOperator + ?Sized> LinearOperator for Prepared<'_, O> {
    type Domain = O::Domain;
    type Range = O::Range;

    fn name(&self) -> &str {
        self.op.name()
    }
    fn n_projections(&self) -> usize {
        self.op.n_projections()
    }
    fn domain_zeros(&self) -> CoreResult<O::Domain> {
        self.op.domain_zeros()
    }
    fn range_zeros(&self, angles: &[usize]) -> CoreResult<O::Range> {
        self.op.range_zeros(angles)
    }
    fn forward(&self, x: &O::Domain, angles: &[usize], y: &mut O::Range) -> CoreResult<()> {
        let backs = self.backs.load(Ordering::Acquire);
        let hook = match self.hook {
            Some((n, h))
                if n == backs
                    && self.fired_at.load(Ordering::Acquire) == usize::MAX
                    && self.is_all(angles) =>
            {
                Some(h)
            }
            _ => None,
        };
        if let Some(h) = hook {
            h.before_forward(x)?;
        }
        self.op.forward(x, angles, y)?;
        if let Some(h) = hook {
            h.after_forward(x)?;
            self.fired_at.store(backs, Ordering::Release);
        }
        Ok(())
    }
    fn backward(&self, y: &O::Range, angles: &[usize], x: &mut O::Domain) -> CoreResult<()> {
        if self.is_all(angles) {
            self.backs.fetch_add(1, Ordering::AcqRel);
        }
        self.op.backward(y, angles, x)
    }
    fn select_into(&self, y: &O::Range, angles: &[usize], out: &mut O::Range) -> CoreResult<()> {
        self.op.select_into(y, angles, out)
    }
    fn select(&self, y: &O::Range, angles: &[usize]) -> CoreResult<O::Range> {
        self.op.select(y, angles)
    }
    fn is_matched(&self) -> bool {
        self.op.is_matched()
    }
    fn row_sums(&self, angles: &[usize]) -> CoreResult<O::Range> {
        match self.take_rows(angles, false) {
            Some(v) => Ok(v),
            None => self.op.row_sums(angles),
        }
    }
    fn column_sums(&self, angles: &[usize]) -> CoreResult<O::Domain> {
        if self.is_all(angles) {
            if let Some(v) = self.columns.lock().ok().and_then(|mut g| g.take()) {
                return Ok(v);
            }
        }
        self.op.column_sums(angles)
    }
    fn row_norms_sq(&self, angles: &[usize]) -> CoreResult<O::Range> {
        match self.take_rows(angles, true) {
            Some(v) => Ok(v),
            None => self.op.row_norms_sq(angles),
        }
    }
    fn rays(&self) -> Option<&dyn RayAccess<O::Domain, O::Range>> {
        self.op.rays()
    }
    fn ray_batches(&self) -> Option<&dyn RayBatches<O::Domain, O::Range>> {
        self.op.ray_batches()
    }
}

/// `options` with the relaxation set, and the relaxation:
/// `options.relaxation`, else tomors-core's default for the algorithm on
/// `op` (power iteration where needed).
///
/// Errors: an operator that is zero, device errors.
pub(crate) fn with_relaxation<O: LinearOperator + ?Sized>(
    op: &O,
    options: &IterativeOptions,
) -> Result<(IterativeOptions, f64)> {
    let lambda = match options.relaxation {
        Some(l) => l,
        None => default_relaxation_of(op, &options.algorithm)?,
    };
    let options = IterativeOptions {
        relaxation: Some(lambda),
        ..*options
    };
    Ok((options, lambda))
}

/// Where a device run reports to.
pub(crate) struct Progress<'a> {
    /// This slab and the number of slabs.
    pub slab: (usize, usize),
    /// The caller's progress callback (`false` stops every slab).
    pub callback: &'a (dyn Fn(&GpuIteration) -> bool + Sync),
    /// Set when any slab is to stop.
    pub stop: &'a AtomicBool,
}

/// The device part of a run, after the uploads: waits for them (the setup
/// time counts from `t_setup`), runs [`solve_on_device`], frees the data
/// `b` and hands the iterate to `download` (timed as the download).
///
/// Errors: those of [`solve`] and of `download`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_resident<O, T>(
    op: &O,
    queue: &Queue,
    b: DeviceVec,
    mut x: DeviceVec,
    options: &IterativeOptions,
    progress: &Progress<'_>,
    stats: &mut SirtStats,
    t_setup: Instant,
    download: impl FnOnce(DeviceVec) -> Result<T>,
) -> Result<(SolveReport, T)>
where
    O: LinearOperator<Domain = DeviceVec, Range = DeviceVec> + ?Sized,
{
    queue.stream().synchronize()?;
    stats.setup_s += t_setup.elapsed().as_secs_f64();
    let mut ph = crate::iterative::Phases::start("resident run");
    let report = solve_on_device(op, queue, &b, &mut x, options, progress, stats)?;
    ph.mark("solve");
    drop(b);
    ph.mark("free the data");
    let t_down = Instant::now();
    let out = download(x)?;
    stats.download_s += t_down.elapsed().as_secs_f64();
    ph.mark("download");
    Ok((report, out))
}

/// Runs [`solve`] on `op` (whose vectors live on `queue`) from the device
/// data `b` and iterate `x` (updated in place) with `options` (relaxation
/// set), timing the kernels into `stats`.
///
/// Errors: those of [`solve`] (device errors among them).
pub(crate) fn solve_on_device<O>(
    op: &O,
    queue: &Queue,
    b: &DeviceVec,
    x: &mut DeviceVec,
    options: &IterativeOptions,
    progress: &Progress<'_>,
    stats: &mut SirtStats,
) -> Result<SolveReport>
where
    O: LinearOperator<Domain = DeviceVec, Range = DeviceVec> + ?Sized,
{
    queue.start_profile()?;
    let t_loop = Instant::now();
    let mut timing_error = None;
    let report = solve(op, b, x, options, &mut |state| {
        // Resolve the events of this iteration now (the host has just
        // waited for the stream), so few stay pending.
        if let Err(e) = queue.profile_times() {
            timing_error = Some(e);
            return false;
        }
        if progress.stop.load(Ordering::Relaxed) {
            return false;
        }
        let info = GpuIteration {
            slab: progress.slab,
            iteration: state.iteration,
            residual: state.residual.unwrap_or(f64::NAN),
        };
        let go = (progress.callback)(&info);
        if !go {
            progress.stop.store(true, Ordering::Relaxed);
        }
        go
    });
    stats.loop_s += t_loop.elapsed().as_secs_f64();
    let times = queue.profile_times()?;
    queue.stop_profile()?;
    if let Some(e) = timing_error {
        return Err(e);
    }
    let report = report?;
    let (fs, fc) = times.get(KernelKind::Forward);
    stats.forward_s += fs;
    stats.forward_count += fc;
    stats.back_s += times.get(KernelKind::Back).0;
    stats.elementwise_s += times.get(KernelKind::Elementwise).0;
    stats.iterations += report.iterations;
    Ok(report)
}
