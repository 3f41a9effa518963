//! The iterative methods written once over [`LinearOperator`] and
//! [`Vector`]: SIRT (Landweber, Cimmino, row/column sums), block-sequential
//! BLOCK-IT / SART, block-parallel (averaged Kaczmarz strings) and ART
//! (Kaczmarz); power iteration for the default relaxation; stopping by
//! count or tolerance; residual history; divergence detection; a progress
//! callback that sees the iterate in the operator's own vector type.
//!
//! All methods solve `A·x ≈ b` with the iterate projected on the constraint
//! box after every update. ART and the block-parallel method need the
//! operator's ray capability ([`LinearOperator::rays`], or on device
//! operators the ray batches of [`LinearOperator::ray_batches`], run by
//! `batched.rs`).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;

use super::batched::BatchSweep;
use super::options::{Algorithm, IterativeOptions, RayOrder, StopReason, Weighting};
use crate::error::{CoreError, Result};
use crate::linalg::{LinearOperator, RayAccess, RayBatches, Real, Vector};

/// Weights below this fraction of the largest are treated as zero rows or
/// columns (rays that clip a pixel corner, pixels no ray sees), so their
/// inverse does not blow up.
pub const WEIGHT_FLOOR: f64 = 1e-6;

/// Power iterations for the default relaxation.
pub const POWER_ITERATIONS: usize = 50;

/// The iteration is reported as diverging once the relative residual
/// exceeds this factor times its smallest value so far (the initial
/// iterate's included where residuals are tracked).
pub const DIVERGENCE_FACTOR: f64 = 1e3;

/// Residuals below this are treated as this in the divergence test (a
/// residual of exactly 0 followed by rounding noise is no divergence).
const DIVERGENCE_FLOOR: f64 = 1e-6;

/// Per-block `T` weights are cached up to this many bytes in all.
const T_CACHE_BYTES: usize = 256 << 20;

/// What the progress callback of [`solve`] sees after an iteration.
#[derive(Debug)]
pub struct IterationState<'a, V> {
    /// Iterations done (1 after the first).
    pub iteration: usize,
    /// Relative residual `‖b − A·x‖₂/‖b‖₂` of the current iterate (absolute
    /// when `b = 0`), if tracked.
    pub residual: Option<f64>,
    /// The current iterate, in the operator's domain (no host copy).
    pub x: &'a V,
}

/// What [`solve`] reports besides the iterate it updated in place.
#[derive(Clone, Debug, PartialEq)]
pub struct SolveReport {
    /// Relative residual after each iteration (empty if not tracked).
    pub residuals: Vec<f64>,
    /// Iterations done.
    pub iterations: usize,
    /// The relaxation used.
    pub relaxation: f64,
    /// Why it stopped.
    pub stop: StopReason,
}

/// Cuts the projections `0..n` into blocks of `per` consecutive ones (the
/// last may be shorter; `per` is clamped to `1..=n`).
pub fn blocks(n: usize, per: usize) -> Vec<Vec<usize>> {
    let per = per.clamp(1, n.max(1));
    (0..n)
        .step_by(per)
        .map(|s| (s..(s + per).min(n)).collect())
        .collect()
}

/// `M` of the rows of projections `angles` (`None` = identity).
fn m_weights<O: LinearOperator + ?Sized>(
    op: &O,
    w: Weighting,
    angles: &[usize],
) -> Result<Option<O::Range>> {
    let mut m = match w {
        Weighting::Landweber => return Ok(None),
        Weighting::Cimmino => op.row_norms_sq(angles)?,
        Weighting::RowColumnSums => op.row_sums(angles)?,
    };
    m.invert_floored(WEIGHT_FLOOR)?;
    Ok(Some(m))
}

/// `T` of a block of projections (`None` = identity).
fn t_weights<O: LinearOperator + ?Sized>(
    op: &O,
    w: Weighting,
    angles: &[usize],
) -> Result<Option<O::Domain>> {
    Ok(match w {
        Weighting::RowColumnSums => {
            let mut t = op.column_sums(angles)?;
            t.invert_floored(WEIGHT_FLOOR)?;
            Some(t)
        }
        _ => None,
    })
}

/// Estimates the spectral radius of `T·B·M·A` restricted to the projections
/// `angles` (for a matched operator with Landweber weights: `‖A‖₂²`) by
/// power iteration from the all-ones vector (the operator is non-negative,
/// so the ones vector is not orthogonal to its Perron vector), stopping
/// when the estimate changes by less than 1e-4 relatively or after
/// `max_iterations`.
///
/// Errors: those of the operator; a non-finite estimate.
pub fn spectral_radius_of<O: LinearOperator + ?Sized>(
    op: &O,
    weighting: Weighting,
    angles: &[usize],
    max_iterations: usize,
) -> Result<f64> {
    let m = m_weights(op, weighting, angles)?;
    let t = t_weights(op, weighting, angles)?;
    let mut v = op.domain_zeros()?;
    v.fill(1.0)?;
    let mut norm_v = v.norm_sq()?.sqrt();
    let mut sino = op.range_zeros(angles)?;
    let mut w = op.domain_zeros()?;
    let mut rho = 0.0f64;
    for _ in 0..max_iterations.max(1) {
        op.forward(&v, angles, &mut sino)?;
        if let Some(m) = &m {
            sino.mul_assign(m)?;
        }
        op.backward(&sino, angles, &mut w)?;
        if let Some(t) = &t {
            w.mul_assign(t)?;
        }
        let norm_w = w.norm_sq()?.sqrt();
        let new = norm_w / norm_v;
        if !new.is_finite() {
            return Err(CoreError::Data("power iteration diverged".into()));
        }
        if norm_w == 0.0 {
            return Ok(0.0);
        }
        v.copy_from(&w)?;
        v.scale(1.0 / norm_w)?;
        norm_v = 1.0;
        let done = (new - rho).abs() <= 1e-4 * new;
        rho = new;
        if done {
            break;
        }
    }
    Ok(rho)
}

/// The default relaxation of `algorithm` on `op`: 1 for ART and the
/// block-parallel method (the middle of Kaczmarz' interval `(0, 2)`); for
/// SIRT steps `1/ρ`, the middle of the convergence interval `(0, 2/ρ)`,
/// with `ρ` the spectral radius of `T·B·M·A` of a step. `ρ = 1` for
/// row/column-sum weights (the row sums of the non-negative matrix
/// `T·B·M·A` are at most 1, and 1 where every ray through the pixel is
/// used), so their default is ASTRA's λ = 1; otherwise `ρ` is estimated by
/// power iteration ([`spectral_radius_of`]; for block methods on up to three
/// blocks spread over the projections, taking the largest). Power iteration
/// approaches `ρ` from below; the factor-2 margin to the bound absorbs that.
///
/// Errors: those of the operator; an operator that is zero.
pub fn default_relaxation_of<O: LinearOperator + ?Sized>(
    op: &O,
    algorithm: &Algorithm,
) -> Result<f64> {
    let n = op.n_projections();
    let (weighting, per) = match *algorithm {
        Algorithm::Art { .. } | Algorithm::BlockParallel { .. } => return Ok(1.0),
        Algorithm::Sirt(w) => (w, n),
        Algorithm::BlockSequential {
            weighting,
            projections_per_block,
        } => (weighting, projections_per_block),
    };
    if weighting == Weighting::RowColumnSums {
        return Ok(1.0);
    }
    let bl = blocks(n, per);
    let mut picks: Vec<usize> = (0..3).map(|i| i * bl.len() / 3).collect();
    picks.dedup();
    let mut rho = 0.0f64;
    for i in picks {
        rho = rho.max(spectral_radius_of(op, weighting, &bl[i], POWER_ITERATIONS)?);
    }
    if rho <= 0.0 {
        return Err(CoreError::Data(
            "the projector is zero on this grid (no ray meets the image)".into(),
        ));
    }
    Ok(1.0 / rho)
}

/// Checks `options`: at least one iteration, a positive finite relaxation,
/// a non-negative finite tolerance, at least one projection per block, a
/// finite, non-inverted constraint box.
///
/// Errors: [`CoreError::Parameter`] naming the first problem.
pub fn check_options(options: &IterativeOptions) -> Result<()> {
    if options.iterations == 0 {
        return Err(CoreError::Parameter(
            "the iteration count must be at least 1".into(),
        ));
    }
    if let Some(l) = options.relaxation {
        if !(l.is_finite() && l > 0.0) {
            return Err(CoreError::Parameter(format!(
                "relaxation {l} must be a positive finite number"
            )));
        }
    }
    if let Some(tol) = options.tolerance {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(CoreError::Parameter(format!(
                "tolerance {tol} must be a non-negative finite number"
            )));
        }
    }
    match options.algorithm {
        Algorithm::BlockSequential {
            projections_per_block: 0,
            ..
        }
        | Algorithm::BlockParallel {
            projections_per_block: 0,
        } => {
            return Err(CoreError::Parameter(
                "a block needs at least one projection".into(),
            ))
        }
        _ => {}
    }
    options.constraint.check()
}

/// Reconstructs `b` (a full range vector) with `op`, updating `x` (the
/// initial iterate; clipped to the constraint first) in place, calling
/// `callback` after every iteration (returning `false` stops).
///
/// Errors: invalid options ([`check_options`]); non-finite data or initial
/// values; ART or block-parallel on an operator without
/// [`rays`](LinearOperator::rays) ([`CoreError::Unsupported`]); the
/// operator's and vectors' errors; divergence ([`CoreError::Data`] naming
/// the relaxation and `--relaxation`): the iterate or its residual becomes
/// non-finite, or the relative residual grows beyond
/// [`DIVERGENCE_FACTOR`] times its smallest value.
pub fn solve<O: LinearOperator + ?Sized>(
    op: &O,
    b: &O::Range,
    x: &mut O::Domain,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationState<'_, O::Domain>) -> bool,
) -> Result<SolveReport> {
    check_options(options)?;
    if !b.all_finite()? {
        return Err(CoreError::Data("the data have a non-finite value".into()));
    }
    if !x.all_finite()? {
        return Err(CoreError::Data(
            "the initial volume has a non-finite value".into(),
        ));
    }
    let (lo, hi) = (options.constraint.min, options.constraint.max);
    x.clip(lo, hi)?;
    let lambda = match options.relaxation {
        Some(l) => l,
        None => default_relaxation_of(op, &options.algorithm)?,
    };
    let b_norm = b.norm_sq()?.sqrt();
    let track = options.track_residual || options.tolerance.is_some();
    let na = op.n_projections();
    let all: Vec<usize> = (0..na).collect();
    let mut ctx = Run {
        op,
        b,
        all: &all,
        ax: op.range_zeros(&all)?,
        b_norm,
        track,
        lambda,
        driver: Driver {
            callback,
            residuals: Vec::new(),
            tolerance: options.tolerance,
            done: 0,
            lambda,
            min_residual: f64::INFINITY,
        },
    };
    let stop = match options.algorithm {
        Algorithm::Sirt(w) => ctx.sirt(x, w, options.iterations, lo, hi)?,
        Algorithm::BlockSequential {
            weighting,
            projections_per_block,
        } => ctx.block_sequential(
            x,
            weighting,
            projections_per_block,
            options.iterations,
            lo,
            hi,
        )?,
        Algorithm::Art { order } => ctx.art(x, order, options.iterations, lo, hi)?,
        Algorithm::BlockParallel {
            projections_per_block,
        } => ctx.block_parallel(x, projections_per_block, options.iterations, lo, hi)?,
    };
    Ok(SolveReport {
        iterations: ctx.driver.done,
        residuals: if track {
            ctx.driver.residuals
        } else {
            Vec::new()
        },
        relaxation: lambda,
        stop,
    })
}

/// The state of one [`solve`] call.
struct Run<'r, 'c, O: LinearOperator + ?Sized> {
    op: &'r O,
    b: &'r O::Range,
    all: &'r [usize],
    /// Scratch range vector of all projections.
    ax: O::Range,
    b_norm: f64,
    track: bool,
    lambda: f64,
    driver: Driver<'c, O::Domain>,
}

impl<O: LinearOperator + ?Sized> Run<'_, '_, O> {
    /// `‖b − A·x‖₂² → ` relative residual.
    fn relative(&self, r2: f64) -> f64 {
        let r = r2.sqrt();
        if self.b_norm > 0.0 {
            r / self.b_norm
        } else {
            r
        }
    }

    /// Relative residual of `x` (uses the scratch `ax`).
    fn residual(&mut self, x: &O::Domain) -> Result<f64> {
        self.op.forward(x, self.all, &mut self.ax)?;
        let r2 = self.ax.residual_weighted_norm_sq(self.b, None)?;
        Ok(self.relative(r2))
    }

    /// Records the initial residual (as the divergence test's first
    /// minimum) when residuals are tracked; costs one forward projection.
    fn seed_initial(&mut self, x: &O::Domain) -> Result<()> {
        if self.track {
            let r0 = self.residual(x)?;
            self.driver.seed(r0);
        }
        Ok(())
    }

    /// Bookkeeping after a sweep of the methods that do not need the
    /// residual themselves: residual (when tracked), divergence check,
    /// callback, stop.
    fn end_sweep(&mut self, it: usize, x: &O::Domain) -> Result<Option<StopReason>> {
        let res = if self.track {
            Some(self.residual(x)?)
        } else {
            None
        };
        if res.is_none() && !x.all_finite()? {
            return Err(diverged(it, self.lambda, None));
        }
        self.driver.after(it, res, x)
    }

    fn unsupported(&self, method: &str) -> CoreError {
        CoreError::Unsupported {
            backend: self.op.name().to_string(),
            operation: format!("{method} (it needs ray-by-ray access to the operator)"),
        }
    }

    fn sirt(
        &mut self,
        x: &mut O::Domain,
        weighting: Weighting,
        iterations: usize,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<StopReason> {
        let (op, all) = (self.op, self.all);
        let m = m_weights(op, weighting, all)?;
        let t = t_weights(op, weighting, all)?;
        let mut g = op.domain_zeros()?;
        // A zero iterate (the usual start) projects to zero: the forward
        // projection is skipped (one pass over `x` instead).
        if x.norm_sq()? == 0.0 {
            self.ax.fill(0.0)?;
        } else {
            op.forward(x, all, &mut self.ax)?;
        }
        // ax ← M (b − A x) throughout.
        let r2 = self.ax.residual_weighted_norm_sq(self.b, m.as_ref())?;
        self.driver.seed(self.relative(r2));
        for it in 1..=iterations {
            op.backward(&self.ax, all, &mut g)?;
            x.update_clipped(self.lambda, &g, t.as_ref(), lo, hi)?;
            if it == iterations && !self.track {
                // Nobody asks for the last iterate's residual: its forward
                // projection is skipped (a pass over `x` checks it instead).
                if !x.all_finite()? {
                    return Err(diverged(it, self.lambda, None));
                }
                if let Some(s) = self.driver.after(it, None, x)? {
                    return Ok(s);
                }
                break;
            }
            op.forward(x, all, &mut self.ax)?;
            let r2 = self.ax.residual_weighted_norm_sq(self.b, m.as_ref())?;
            let res = self.relative(r2);
            if let Some(s) = self.driver.after(it, Some(res), x)? {
                return Ok(s);
            }
        }
        Ok(StopReason::Iterations)
    }

    fn block_sequential(
        &mut self,
        x: &mut O::Domain,
        weighting: Weighting,
        per: usize,
        iterations: usize,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<StopReason> {
        let op = self.op;
        let bl = blocks(op.n_projections(), per);
        // M of all projections (floored relative to the largest of all),
        // cut per block.
        let m_all = m_weights(op, weighting, self.all)?;
        let m: Vec<Option<O::Range>> = bl
            .iter()
            .map(|a| m_all.as_ref().map(|m| op.select(m, a)).transpose())
            .collect::<Result<_>>()?;
        drop(m_all);
        // T per block: cached unless that would take more than
        // T_CACHE_BYTES.
        let t0 = t_weights(op, weighting, &bl[0])?;
        let t_bytes = t0.as_ref().map_or(0, |t| {
            t.len() * std::mem::size_of::<<O::Domain as Vector>::Elem>()
        });
        let cache = bl.len() * t_bytes <= T_CACHE_BYTES;
        let mut t_cache: Vec<Option<O::Domain>> = Vec::new();
        if cache {
            t_cache.push(t0);
            for a in &bl[1..] {
                t_cache.push(t_weights(op, weighting, a)?);
            }
        }
        // Residual and data buffers per block length (at most two lengths).
        let mut bufs: Vec<(usize, O::Range, O::Range)> = Vec::new();
        for a in &bl {
            if !bufs.iter().any(|(n, _, _)| *n == a.len()) {
                bufs.push((a.len(), op.range_zeros(a)?, op.range_zeros(a)?));
            }
        }
        let mut g = op.domain_zeros()?;
        self.seed_initial(x)?;
        for it in 1..=iterations {
            for (i, angles) in bl.iter().enumerate() {
                let (_, r, bb) = bufs
                    .iter_mut()
                    .find(|(n, _, _)| *n == angles.len())
                    .expect("a buffer per block length");
                op.forward(x, angles, r)?;
                op.select_into(self.b, angles, bb)?;
                r.residual_weighted(bb, m[i].as_ref())?;
                op.backward(r, angles, &mut g)?;
                let t_owned;
                let t = if cache {
                    t_cache[i].as_ref()
                } else {
                    t_owned = t_weights(op, weighting, angles)?;
                    t_owned.as_ref()
                };
                x.update_clipped(self.lambda, &g, t, lo, hi)?;
            }
            if let Some(s) = self.end_sweep(it, x)? {
                return Ok(s);
            }
        }
        Ok(StopReason::Iterations)
    }

    fn art(
        &mut self,
        x: &mut O::Domain,
        order: RayOrder,
        iterations: usize,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<StopReason> {
        let op = self.op;
        if let (None, Some(batches)) = (op.rays(), op.ray_batches()) {
            let mut sweep = BatchSweep::new(op, batches)?;
            self.seed_initial(x)?;
            for it in 1..=iterations {
                let list = sweep.art_order(order, it);
                sweep.sweep(x, self.b, &list, self.lambda, lo, hi)?;
                if let Some(s) = self.end_sweep(it, x)? {
                    return Ok(s);
                }
            }
            return Ok(StopReason::Iterations);
        }
        let rays = op.rays().ok_or_else(|| self.unsupported("ART"))?;
        let norms = floored_ray_norms(rays, self.all)?;
        let na = self.all.len();
        let nb = rays.n_bins();
        let clamp = Clamp::new(lo, hi);
        self.seed_initial(x)?;
        for it in 1..=iterations {
            let mut list: Vec<(usize, usize)> =
                (0..na).flat_map(|a| (0..nb).map(move |k| (a, k))).collect();
            if let RayOrder::Random { seed } = order {
                let mut rng = StdRng::seed_from_u64(seed.wrapping_add(it as u64));
                list.shuffle(&mut rng);
            }
            rays.host_parts(x, self.b)?
                .into_par_iter()
                .for_each(|p| art_sweep(rays, p.x, p.b, &list, &norms, self.lambda, &clamp));
            if let Some(s) = self.end_sweep(it, x)? {
                return Ok(s);
            }
        }
        Ok(StopReason::Iterations)
    }

    fn block_parallel(
        &mut self,
        x: &mut O::Domain,
        per: usize,
        iterations: usize,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<StopReason> {
        type E<O> = <<O as LinearOperator>::Domain as Vector>::Elem;
        let op = self.op;
        if let (None, Some(batches)) = (op.rays(), op.ray_batches()) {
            return self.block_parallel_batched(x, batches, per, iterations, lo, hi);
        }
        let rays = op
            .rays()
            .ok_or_else(|| self.unsupported("the block-parallel method"))?;
        let norms = floored_ray_norms(rays, self.all)?;
        let nb = rays.n_bins();
        let lists: Vec<Vec<(usize, usize)>> = blocks(self.all.len(), per)
            .into_iter()
            .map(|b| {
                b.into_iter()
                    .flat_map(|a| (0..nb).map(move |k| (a, k)))
                    .collect()
            })
            .collect();
        let inv_p = <E<O> as Real>::from_f64(1.0 / lists.len() as f64);
        let clamp = Clamp::new(lo, hi);
        let group = rayon::current_num_threads().max(1);
        self.seed_initial(x)?;
        for it in 1..=iterations {
            for part in rays.host_parts(x, self.b)? {
                let start = part.x.to_vec();
                let mut sum = vec![<E<O> as Real>::ZERO; start.len()];
                // Blocks run in parallel a group at a time; their results
                // are summed in block order (independent of the threads).
                for chunk in lists.chunks(group) {
                    let results: Vec<Vec<E<O>>> = chunk
                        .par_iter()
                        .map(|list| {
                            let mut xl = start.clone();
                            art_sweep(rays, &mut xl, part.b, list, &norms, self.lambda, &clamp);
                            xl
                        })
                        .collect();
                    for r in results {
                        sum.iter_mut().zip(&r).for_each(|(s, &v)| *s += v);
                    }
                }
                part.x
                    .iter_mut()
                    .zip(&sum)
                    .for_each(|(o, &v)| *o = clamp.apply(v * inv_p));
            }
            if let Some(s) = self.end_sweep(it, x)? {
                return Ok(s);
            }
        }
        Ok(StopReason::Iterations)
    }
}

impl<'r, O: LinearOperator + ?Sized> Run<'r, '_, O> {
    /// The block-parallel method over ray batches ([`BatchSweep`]): every
    /// block's Kaczmarz sweep starts from the same iterate, the results
    /// are summed in block order, averaged and projected on the box, as
    /// on the host.
    fn block_parallel_batched(
        &mut self,
        x: &mut O::Domain,
        batches: &'r dyn RayBatches<O::Domain, O::Range>,
        per: usize,
        iterations: usize,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<StopReason> {
        let op = self.op;
        let mut sweep = BatchSweep::new(op, batches)?;
        let lists: Vec<_> = blocks(self.all.len(), per)
            .into_iter()
            .map(|b| sweep.list(b))
            .collect();
        let inv_p = 1.0 / lists.len() as f64;
        let mut start = op.domain_zeros()?;
        let mut xl = op.domain_zeros()?;
        self.seed_initial(x)?;
        for it in 1..=iterations {
            start.copy_from(x)?;
            x.fill(0.0)?;
            for list in &lists {
                xl.copy_from(&start)?;
                sweep.sweep(&mut xl, self.b, list, self.lambda, lo, hi)?;
                x.axpy(1.0, &xl)?;
            }
            x.scale(inv_p)?;
            x.clip(lo, hi)?;
            if let Some(s) = self.end_sweep(it, x)? {
                return Ok(s);
            }
        }
        Ok(StopReason::Iterations)
    }
}

/// The divergence error, naming the relaxation and `--relaxation`.
fn diverged(it: usize, lambda: f64, growth: Option<(f64, f64)>) -> CoreError {
    let what = match growth {
        Some((min, r)) => format!("the relative residual grew from {min:.3e} to {r:.3e}"),
        None => "the iterate became non-finite".to_string(),
    };
    CoreError::Data(format!(
        "the iteration diverged at iteration {it} ({what}): the relaxation λ = {lambda:.4e} \
         is too large; lower it with --relaxation"
    ))
}

/// Per-iteration bookkeeping: history, divergence, callback, stopping rules.
struct Driver<'c, V> {
    callback: &'c mut dyn FnMut(&IterationState<'_, V>) -> bool,
    residuals: Vec<f64>,
    tolerance: Option<f64>,
    done: usize,
    lambda: f64,
    min_residual: f64,
}

impl<V> Driver<'_, V> {
    /// Takes the residual of the initial iterate into the divergence
    /// test's minimum (not into the history).
    fn seed(&mut self, r0: f64) {
        if r0.is_finite() {
            self.min_residual = self.min_residual.min(r0);
        }
    }

    /// Records iteration `it`; returns why to stop, if so.
    fn after(&mut self, it: usize, residual: Option<f64>, x: &V) -> Result<Option<StopReason>> {
        self.done = it;
        if let Some(r) = residual {
            if !r.is_finite() {
                return Err(diverged(it, self.lambda, None));
            }
            if r > DIVERGENCE_FACTOR * self.min_residual.max(DIVERGENCE_FLOOR) {
                return Err(diverged(it, self.lambda, Some((self.min_residual, r))));
            }
            self.min_residual = self.min_residual.min(r);
            self.residuals.push(r);
        }
        let state = IterationState {
            iteration: it,
            residual,
            x,
        };
        if !(self.callback)(&state) {
            return Ok(Some(StopReason::Callback));
        }
        if let (Some(tol), Some(r)) = (self.tolerance, residual) {
            if r <= tol {
                return Ok(Some(StopReason::Tolerance));
            }
        }
        Ok(None)
    }
}

/// A constraint box in the element type.
struct Clamp<T> {
    min: Option<T>,
    max: Option<T>,
}

impl<T: Real> Clamp<T> {
    fn new(min: Option<f64>, max: Option<f64>) -> Self {
        Self {
            min: min.map(T::from_f64),
            max: max.map(T::from_f64),
        }
    }

    #[inline(always)]
    fn apply(&self, mut v: T) -> T {
        if let Some(lo) = self.min {
            if v < lo {
                v = lo;
            }
        }
        if let Some(hi) = self.max {
            if v > hi {
                v = hi;
            }
        }
        v
    }

    fn is_none(&self) -> bool {
        self.min.is_none() && self.max.is_none()
    }
}

/// `‖a_i‖²` of every ray of the projections `angles`, with negligible rows
/// set to zero (skipped by ART).
fn floored_ray_norms<D: Vector, R: Vector<Elem = D::Elem>>(
    rays: &dyn RayAccess<D, R>,
    angles: &[usize],
) -> Result<ndarray::Array2<D::Elem>> {
    let mut n = rays.ray_norms_sq(angles)?;
    let max = n.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
    n.mapv_inplace(|v| {
        if v.to_f64() > max * WEIGHT_FLOOR {
            v
        } else {
            <D::Elem as Real>::ZERO
        }
    });
    Ok(n)
}

/// One Kaczmarz sweep over `list` (`(projection, bin)`) of one image `x`
/// (flattened) against its sinogram `b` (`[projection][bin]`).
fn art_sweep<D: Vector, R: Vector<Elem = D::Elem>>(
    rays: &dyn RayAccess<D, R>,
    x: &mut [D::Elem],
    b: ndarray::ArrayView2<'_, D::Elem>,
    list: &[(usize, usize)],
    norms: &ndarray::Array2<D::Elem>,
    lambda: f64,
    clamp: &Clamp<D::Elem>,
) {
    let l = <D::Elem as Real>::from_f64(lambda);
    let zero = <D::Elem as Real>::ZERO;
    let mut row: Vec<(usize, D::Elem)> = Vec::new();
    let unconstrained = clamp.is_none();
    for &(a, k) in list {
        let n2 = norms[[a, k]];
        if n2 == zero {
            continue;
        }
        row.clear();
        rays.trace_ray(a, k, &mut |i, w| row.push((i, w)));
        let dot = row.iter().fold(zero, |acc, &(i, w)| acc + x[i] * w);
        let c = l * (b[[a, k]] - dot) / n2;
        if unconstrained {
            for &(i, w) in &row {
                x[i] += c * w;
            }
        } else {
            for &(i, w) in &row {
                x[i] = clamp.apply(x[i] + c * w);
            }
        }
    }
}
