//! Algebraic iterative reconstruction over a [`Projector`]: SIRT
//! (Landweber, Cimmino, row/column sums), block-sequential BLOCK-IT / SART,
//! block-parallel (averaged Kaczmarz strings) and ART (Kaczmarz).
//!
//! All methods solve `A·x ≈ b` slice by slice (the slices of a stack share
//! the operator and are processed in parallel) with the iterate projected on
//! the constraint set `C` after every update.

use std::ops::Range;

use ndarray::{s, Array2, Array3, ArrayView2, ArrayView3, Zip};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rayon::prelude::*;

use super::operator::Projector;
use super::real::Real;
use crate::error::{CoreError, Result};

/// The diagonal weights `T` (image side) and `M` (sinogram side) of the
/// general SIRT step `x ← P_C(x + λ·T·Aᵀ·M·(b − A·x))`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Weighting {
    /// `T = M = I`: Landweber.
    Landweber,
    /// `T = I`, `M = diag(1/‖a_i‖₂²)`: Cimmino (without the 1/m factor,
    /// which the relaxation absorbs); the thesis' BLOCK-IT choice.
    Cimmino,
    /// `T = diag(1/‖column_j‖₁)`, `M = diag(1/‖row_i‖₁)` (column sums of the
    /// back projector): what ASTRA calls SIRT and, applied per block,
    /// SART.
    #[default]
    RowColumnSums,
}

/// Order in which ART visits the rays of a sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RayOrder {
    /// Projection by projection, bin by bin.
    #[default]
    Sequential,
    /// A random permutation of all rays, drawn anew every sweep from
    /// `seed` and the sweep number (reproducible).
    Random {
        /// Seed of the permutations.
        seed: u64,
    },
}

/// The iterative method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// One SIRT step over all projections per iteration.
    Sirt(Weighting),
    /// BLOCK-IT / SART: the projections are cut into blocks of
    /// `projections_per_block` consecutive projections, and one SIRT step
    /// with the block's own weights is taken per block, in order; one
    /// iteration is a sweep over all blocks.
    BlockSequential {
        /// `T`, `M` of each block step.
        weighting: Weighting,
        /// Projections per block (≥ 1; a value above the number of
        /// projections makes one block, i.e. SIRT).
        projections_per_block: usize,
    },
    /// Block-parallel (string averaging): every block of
    /// `projections_per_block` consecutive projections runs a Kaczmarz sweep
    /// over its rays from the same iterate, in parallel; the results are
    /// averaged.
    BlockParallel {
        /// Projections per block (≥ 1).
        projections_per_block: usize,
    },
    /// ART (Kaczmarz): one update per ray, `x ← P_C(x + λ·(b_i − a_i·x)/‖a_i‖²·a_i)`;
    /// one iteration is a sweep over all rays.
    Art {
        /// Ray order.
        order: RayOrder,
    },
}

impl Default for Algorithm {
    fn default() -> Self {
        Self::Sirt(Weighting::RowColumnSums)
    }
}

/// The constraint set `C`: a box `[min, max]` (either side optional).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Constraint {
    /// Lower bound (e.g. 0 for non-negativity).
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
}

impl Constraint {
    /// No constraint.
    pub fn none() -> Self {
        Self::default()
    }

    /// Non-negativity.
    pub fn non_negative() -> Self {
        Self {
            min: Some(0.0),
            max: None,
        }
    }

    /// The box `[min, max]`.
    pub fn bounded(min: f64, max: f64) -> Self {
        Self {
            min: Some(min),
            max: Some(max),
        }
    }

    fn check(&self) -> Result<()> {
        for v in [self.min, self.max].into_iter().flatten() {
            if !v.is_finite() {
                return Err(CoreError::Parameter(format!(
                    "constraint bound {v} is not finite"
                )));
            }
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max) {
            if lo > hi {
                return Err(CoreError::Parameter(format!(
                    "constraint minimum {lo} exceeds maximum {hi}"
                )));
            }
        }
        Ok(())
    }
}

/// A constraint in the element type.
#[derive(Clone, Copy)]
struct Clamp<T> {
    min: Option<T>,
    max: Option<T>,
}

impl<T: Real> Clamp<T> {
    fn new(c: &Constraint) -> Self {
        Self {
            min: c.min.map(T::from_f64),
            max: c.max.map(T::from_f64),
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

/// Parameters of [`reconstruct`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterativeOptions {
    /// The method.
    pub algorithm: Algorithm,
    /// Most iterations (sweeps for ART and block methods); ≥ 1.
    pub iterations: usize,
    /// Relaxation λ > 0; `None` picks [`default_relaxation`].
    pub relaxation: Option<f64>,
    /// Constraint applied after every update.
    pub constraint: Constraint,
    /// Stop once the relative residual `‖b − A·x‖₂/‖b‖₂` is at most this.
    pub tolerance: Option<f64>,
    /// Record the relative residual after every iteration (costs one extra
    /// forward projection per iteration for ART and block methods; free for
    /// SIRT). Always on when `tolerance` is set.
    pub track_residual: bool,
}

impl Default for IterativeOptions {
    fn default() -> Self {
        Self {
            algorithm: Algorithm::default(),
            iterations: 100,
            relaxation: None,
            constraint: Constraint::none(),
            tolerance: None,
            track_residual: true,
        }
    }
}

/// What the per-iteration callback sees.
#[derive(Debug)]
pub struct IterationInfo<'a, T> {
    /// Iterations done (1 after the first).
    pub iteration: usize,
    /// Relative residual `‖b − A·x‖₂/‖b‖₂` of the current iterate (absolute
    /// when `b = 0`), if tracked.
    pub residual: Option<f64>,
    /// The current iterate `[slice][y][x]`.
    pub x: ArrayView3<'a, T>,
}

/// Why the iteration ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The iteration count was reached.
    Iterations,
    /// The relative residual reached the tolerance.
    Tolerance,
    /// The callback returned `false`.
    Callback,
}

/// The result of [`reconstruct`].
#[derive(Clone, Debug)]
pub struct IterativeResult<T> {
    /// The reconstruction `[slice][y][x]`.
    pub x: Array3<T>,
    /// Relative residual after each iteration (empty if not tracked).
    pub residuals: Vec<f64>,
    /// Iterations done.
    pub iterations: usize,
    /// The relaxation used.
    pub relaxation: f64,
    /// Why it stopped.
    pub stop: StopReason,
}

/// Weights below this fraction of the largest are treated as zero rows or
/// columns (rays that clip a pixel corner, pixels no ray sees), so their
/// inverse does not blow up.
const WEIGHT_FLOOR: f64 = 1e-6;

/// `1/v` for `v` above `floor`, else 0.
fn invert<T: Real>(a: &mut Array2<T>) {
    let max = a.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
    let floor = max * WEIGHT_FLOOR;
    a.mapv_inplace(|v| {
        let v = v.to_f64();
        T::from_f64(if v > floor && v > 0.0 { 1.0 / v } else { 0.0 })
    });
}

/// Cuts `0..n` into blocks of `per` consecutive projections.
fn blocks(n: usize, per: usize) -> Vec<Range<usize>> {
    let per = per.clamp(1, n.max(1));
    (0..n).step_by(per).map(|s| s..(s + per).min(n)).collect()
}

/// `M` of the rows of projections `angles` (`None` = identity).
fn m_weights<T: Real, P: Projector<T> + ?Sized>(
    p: &P,
    w: Weighting,
    angles: &[usize],
) -> Result<Option<Array2<T>>> {
    Ok(match w {
        Weighting::Landweber => None,
        Weighting::Cimmino => {
            let mut m = p.row_norms_sq(angles)?;
            invert(&mut m);
            Some(m)
        }
        Weighting::RowColumnSums => {
            let mut m = p.row_sums(angles)?;
            invert(&mut m);
            Some(m)
        }
    })
}

/// `T` of a block of projections (`None` = identity).
fn t_weights<T: Real, P: Projector<T> + ?Sized>(
    p: &P,
    w: Weighting,
    angles: &[usize],
) -> Result<Option<Array2<T>>> {
    Ok(match w {
        Weighting::RowColumnSums => {
            let mut t = p.column_sums(angles)?;
            invert(&mut t);
            Some(t)
        }
        _ => None,
    })
}

/// Estimates the spectral radius of `T·B·M·A` restricted to the projections
/// `angles` (for a matched projector with Landweber weights: `‖A‖₂²`) by
/// power iteration on one slice, from the all-ones image (the operator is
/// non-negative, so the ones vector is not orthogonal to its Perron
/// vector), stopping when the estimate changes by less than 1e-4
/// relatively or after `max_iterations`.
pub fn spectral_radius<T: Real, P: Projector<T> + ?Sized>(
    projector: &P,
    weighting: Weighting,
    angles: &[usize],
    max_iterations: usize,
) -> Result<f64> {
    let m = m_weights(projector, weighting, angles)?;
    let t = t_weights(projector, weighting, angles)?;
    power_iteration(projector, angles, m.as_ref(), t.as_ref(), max_iterations)
}

fn power_iteration<T: Real, P: Projector<T> + ?Sized>(
    p: &P,
    angles: &[usize],
    m: Option<&Array2<T>>,
    t: Option<&Array2<T>>,
    max_iterations: usize,
) -> Result<f64> {
    let dim = p.image_dim();
    let mut v = Array2::from_elem(dim, T::ONE);
    let mut norm_v = (v.len() as f64).sqrt();
    let mut sino = Array2::from_elem((angles.len(), p.n_bins()), T::ZERO);
    let mut w = Array2::from_elem(dim, T::ZERO);
    let mut rho = 0.0f64;
    for _ in 0..max_iterations.max(1) {
        p.forward_slice(v.view(), angles, sino.view_mut())?;
        if let Some(m) = m {
            sino *= m;
        }
        p.back_slice(sino.view(), angles, w.view_mut())?;
        if let Some(t) = t {
            w *= t;
        }
        let norm_w = w
            .iter()
            .map(|x| x.to_f64() * x.to_f64())
            .sum::<f64>()
            .sqrt();
        let new = norm_w / norm_v;
        if !new.is_finite() {
            return Err(CoreError::Data("power iteration diverged".into()));
        }
        if norm_w == 0.0 {
            return Ok(0.0);
        }
        let scale = T::from_f64(1.0 / norm_w);
        Zip::from(&mut v).and(&w).for_each(|a, &b| *a = b * scale);
        norm_v = 1.0;
        let done = (new - rho).abs() <= 1e-4 * new;
        rho = new;
        if done {
            break;
        }
    }
    Ok(rho)
}

/// Power iterations for the default relaxation.
const POWER_ITERATIONS: usize = 50;

/// The default relaxation of `algorithm` on `projector`: 1 for ART and the
/// block-parallel method (the middle of Kaczmarz' interval `(0, 2)`); for
/// SIRT steps `1/ρ`, the middle of the convergence interval `(0, 2/ρ)`,
/// with `ρ` the spectral radius of `T·B·M·A` of a step. `ρ = 1` for
/// row/column-sum weights (the row sums of the non-negative matrix
/// `T·B·M·A` are at most 1, and 1 where every ray through the pixel is
/// used), so their default is ASTRA's λ = 1; otherwise `ρ` is estimated by
/// power iteration (for block methods on up to three blocks spread over the
/// projections, taking the largest). Power iteration approaches `ρ` from
/// below; the factor-2 margin to the bound absorbs that.
///
/// Larger values (up to just below `2/ρ`) converge faster along most of the
/// spectrum but make the dominant component oscillate.
pub fn default_relaxation<T: Real, P: Projector<T> + ?Sized>(
    projector: &P,
    algorithm: &Algorithm,
) -> Result<f64> {
    let n = projector.n_angles();
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
        let angles: Vec<usize> = bl[i].clone().collect();
        rho = rho.max(spectral_radius(
            projector,
            weighting,
            &angles,
            POWER_ITERATIONS,
        )?);
    }
    if rho <= 0.0 {
        return Err(CoreError::Data(
            "the projector is zero on this grid (no ray meets the image)".into(),
        ));
    }
    Ok(1.0 / rho)
}

fn check_finite<T: Real>(a: ArrayView3<'_, T>, what: &str) -> Result<()> {
    if let Some(pos) = a
        .indexed_iter()
        .find(|(_, v)| !v.is_finite())
        .map(|(i, _)| i)
    {
        return Err(CoreError::Data(format!(
            "{what} has a non-finite value at {pos:?}"
        )));
    }
    Ok(())
}

fn sq_norm<T: Real>(a: ArrayView3<'_, T>) -> f64 {
    a.iter().map(|v| v.to_f64() * v.to_f64()).sum()
}

/// Reconstructs `sinograms` (`[slice][angle][bin]`) with `projector`,
/// starting from `initial` (`[slice][y][x]`, zeros if `None`), calling
/// `callback` after every iteration (returning `false` stops).
///
/// Errors: shapes that do not fit the projector, non-finite data or
/// initial values, zero iterations, a relaxation that is not a positive
/// finite number, a negative or non-finite tolerance, zero projections per
/// block, an empty or inverted constraint box, an iterate that becomes
/// non-finite (divergence: relaxation too large).
pub fn reconstruct<T: Real, P: Projector<T> + ?Sized>(
    projector: &P,
    sinograms: ArrayView3<'_, T>,
    initial: Option<ArrayView3<'_, T>>,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationInfo<'_, T>) -> bool,
) -> Result<IterativeResult<T>> {
    let (ns, na, nb) = sinograms.dim();
    let (ny, nx) = projector.image_dim();
    if na != projector.n_angles() || nb != projector.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the projector's geometry {} × {}",
            projector.n_angles(),
            projector.n_bins()
        )));
    }
    if ns == 0 {
        return Err(CoreError::Shape("no sinograms to reconstruct".into()));
    }
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
    options.constraint.check()?;
    check_finite(sinograms, "the sinogram data")?;
    let clamp = Clamp::<T>::new(&options.constraint);
    let mut x = match initial {
        Some(x0) => {
            if x0.dim() != (ns, ny, nx) {
                return Err(CoreError::Shape(format!(
                    "initial volume is {:?}, expected {:?}",
                    x0.dim(),
                    (ns, ny, nx)
                )));
            }
            check_finite(x0, "the initial volume")?;
            x0.mapv(|v| clamp.apply(v))
        }
        None => Array3::from_elem((ns, ny, nx), clamp.apply(T::ZERO)),
    };
    let lambda = match options.relaxation {
        Some(l) => l,
        None => default_relaxation(projector, &options.algorithm)?,
    };
    let b_norm = sq_norm(sinograms).sqrt();
    let rel = |r2: f64| {
        let r = r2.sqrt();
        if b_norm > 0.0 {
            r / b_norm
        } else {
            r
        }
    };
    let track = options.track_residual || options.tolerance.is_some();
    let all: Vec<usize> = (0..na).collect();
    let mut state = Driver {
        callback,
        residuals: Vec::new(),
        tolerance: options.tolerance,
        done: 0,
    };
    let mut ax = Array3::from_elem((ns, na, nb), T::ZERO);
    let residual_of = |x: &Array3<T>, ax: &mut Array3<T>| -> Result<f64> {
        projector.forward(x.view(), &all, ax.view_mut())?;
        let mut r2 = 0.0;
        Zip::from(&*ax).and(&sinograms).for_each(|&a, &b| {
            let d = (b - a).to_f64();
            r2 += d * d;
        });
        Ok(rel(r2))
    };

    // Bookkeeping after a sweep of the methods that do not need the residual
    // themselves: residual (when tracked), divergence check, callback, stop.
    let end_iteration = |it: usize,
                         x: &Array3<T>,
                         ax: &mut Array3<T>,
                         state: &mut Driver<'_, T>|
     -> Result<Option<StopReason>> {
        let res = if track {
            Some(residual_of(x, ax)?)
        } else {
            None
        };
        check_iterate(x, res)?;
        state.after(it, res, x)
    };

    let stop = match options.algorithm {
        Algorithm::Sirt(weighting) => {
            let m = m_weights(projector, weighting, &all)?;
            let t = t_weights(projector, weighting, &all)?;
            let mut g = Array3::from_elem((ns, ny, nx), T::ZERO);
            projector.forward(x.view(), &all, ax.view_mut())?;
            let mut stop = StopReason::Iterations;
            for it in 1..=options.iterations {
                // ax ← M (b − A x), in place.
                Zip::from(&mut ax)
                    .and(&sinograms)
                    .for_each(|a, &b| *a = b - *a);
                if let Some(m) = &m {
                    ax.outer_iter_mut().for_each(|mut s| s *= m);
                }
                projector.back(ax.view(), &all, g.view_mut())?;
                update(&mut x, &g, t.as_ref(), lambda, &clamp);
                let res = residual_of(&x, &mut ax)?;
                if let Some(s) = state.after(it, Some(res), &x)? {
                    stop = s;
                    break;
                }
            }
            stop
        }
        Algorithm::BlockSequential {
            weighting,
            projections_per_block,
        } => {
            let bl = blocks(na, projections_per_block);
            let angle_lists: Vec<Vec<usize>> = bl.iter().map(|r| r.clone().collect()).collect();
            let m = m_weights(projector, weighting, &all)?;
            // T per block: cached unless that would take more than 256 MiB.
            let cache = bl.len() * ny * nx * std::mem::size_of::<T>() <= 256 << 20;
            let t_cache: Vec<Option<Array2<T>>> = if cache {
                angle_lists
                    .iter()
                    .map(|a| t_weights(projector, weighting, a))
                    .collect::<Result<_>>()?
            } else {
                Vec::new()
            };
            let mut g = Array3::from_elem((ns, ny, nx), T::ZERO);
            let mut stop = StopReason::Iterations;
            for it in 1..=options.iterations {
                for (i, (range, angles)) in bl.iter().zip(&angle_lists).enumerate() {
                    let mut r = Array3::from_elem((ns, angles.len(), nb), T::ZERO);
                    projector.forward(x.view(), angles, r.view_mut())?;
                    let b = sinograms.slice(s![.., range.clone(), ..]);
                    Zip::from(&mut r).and(&b).for_each(|a, &b| *a = b - *a);
                    if let Some(m) = &m {
                        let mb = m.slice(s![range.clone(), ..]);
                        r.outer_iter_mut().for_each(|mut s| s *= &mb);
                    }
                    projector.back(r.view(), angles, g.view_mut())?;
                    let t_owned;
                    let t = if cache {
                        t_cache[i].as_ref()
                    } else {
                        t_owned = t_weights(projector, weighting, angles)?;
                        t_owned.as_ref()
                    };
                    update(&mut x, &g, t, lambda, &clamp);
                }
                if let Some(s) = end_iteration(it, &x, &mut ax, &mut state)? {
                    stop = s;
                    break;
                }
            }
            stop
        }
        Algorithm::Art { order } => {
            let norms = row_norms(projector, &all)?;
            let mut stop = StopReason::Iterations;
            for it in 1..=options.iterations {
                let mut rays: Vec<(usize, usize)> =
                    (0..na).flat_map(|a| (0..nb).map(move |k| (a, k))).collect();
                if let RayOrder::Random { seed } = order {
                    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(it as u64));
                    rays.shuffle(&mut rng);
                }
                x.outer_iter_mut()
                    .into_par_iter()
                    .zip(sinograms.outer_iter().into_par_iter())
                    .for_each(|(xs, b)| {
                        let mut xs = xs;
                        let buf = xs.as_slice_mut().expect("standard layout");
                        art_sweep(projector, buf, b, &rays, &norms, lambda, &clamp);
                    });
                if let Some(s) = end_iteration(it, &x, &mut ax, &mut state)? {
                    stop = s;
                    break;
                }
            }
            stop
        }
        Algorithm::BlockParallel {
            projections_per_block,
        } => {
            let bl = blocks(na, projections_per_block);
            let ray_lists: Vec<Vec<(usize, usize)>> = bl
                .iter()
                .map(|r| {
                    r.clone()
                        .flat_map(|a| (0..nb).map(move |k| (a, k)))
                        .collect()
                })
                .collect();
            let norms = row_norms(projector, &all)?;
            let inv_p = T::from_f64(1.0 / bl.len() as f64);
            let mut stop = StopReason::Iterations;
            for it in 1..=options.iterations {
                for (mut xs, b) in x.outer_iter_mut().zip(sinograms.outer_iter()) {
                    let start = xs.to_owned();
                    let start = start.as_slice().expect("standard layout");
                    let sum = ray_lists
                        .par_iter()
                        .map(|rays| {
                            let mut xl = start.to_vec();
                            art_sweep(projector, &mut xl, b, rays, &norms, lambda, &clamp);
                            xl
                        })
                        .reduce_with(|mut a, c| {
                            a.iter_mut().zip(&c).for_each(|(u, &v)| *u += v);
                            a
                        })
                        .expect("at least one block");
                    Zip::from(&mut xs)
                        .and(&ArrayView2::from_shape((ny, nx), &sum).expect("shape"))
                        .for_each(|o, &v| *o = clamp.apply(v * inv_p));
                }
                if let Some(s) = end_iteration(it, &x, &mut ax, &mut state)? {
                    stop = s;
                    break;
                }
            }
            stop
        }
    };
    Ok(IterativeResult {
        iterations: state.done,
        residuals: if track { state.residuals } else { Vec::new() },
        x,
        relaxation: lambda,
        stop,
    })
}

/// Per-iteration bookkeeping: history, callback, stopping rules.
struct Driver<'c, T> {
    callback: &'c mut dyn FnMut(&IterationInfo<'_, T>) -> bool,
    residuals: Vec<f64>,
    tolerance: Option<f64>,
    done: usize,
}

impl<T: Real> Driver<'_, T> {
    /// Records iteration `it`; returns why to stop, if so.
    fn after(
        &mut self,
        it: usize,
        residual: Option<f64>,
        x: &Array3<T>,
    ) -> Result<Option<StopReason>> {
        self.done = it;
        if let Some(r) = residual {
            if !r.is_finite() {
                return Err(CoreError::Data(format!(
                    "the iteration diverged at iteration {it} (relaxation too large?)"
                )));
            }
            self.residuals.push(r);
        }
        let info = IterationInfo {
            iteration: it,
            residual,
            x: x.view(),
        };
        if !(self.callback)(&info) {
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

/// Errors if the iterate became non-finite (only checked when no residual
/// is tracked; a tracked residual catches it).
fn check_iterate<T: Real>(x: &Array3<T>, residual: Option<f64>) -> Result<()> {
    if residual.is_none() && x.iter().any(|v| !v.is_finite()) {
        return Err(CoreError::Data(
            "the iteration diverged (relaxation too large?)".into(),
        ));
    }
    Ok(())
}

/// `x ← P_C(x + λ·T·g)` (`T` broadcast over slices).
fn update<T: Real>(
    x: &mut Array3<T>,
    g: &Array3<T>,
    t: Option<&Array2<T>>,
    lambda: f64,
    clamp: &Clamp<T>,
) {
    let l = T::from_f64(lambda);
    x.outer_iter_mut()
        .into_par_iter()
        .zip(g.outer_iter().into_par_iter())
        .for_each(|(mut xs, gs)| match t {
            Some(t) => Zip::from(&mut xs)
                .and(&gs)
                .and(t)
                .for_each(|x, &g, &t| *x = clamp.apply(*x + l * t * g)),
            None => Zip::from(&mut xs)
                .and(&gs)
                .for_each(|x, &g| *x = clamp.apply(*x + l * g)),
        });
}

/// `‖a_i‖²` of every ray, with negligible rows set to zero (skipped).
fn row_norms<T: Real, P: Projector<T> + ?Sized>(p: &P, angles: &[usize]) -> Result<Array2<T>> {
    let mut n = p.row_norms_sq(angles)?;
    let max = n.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
    n.mapv_inplace(|v| {
        if v.to_f64() > max * WEIGHT_FLOOR {
            v
        } else {
            T::ZERO
        }
    });
    Ok(n)
}

/// One Kaczmarz sweep over `rays` (`(angle, bin)`) of one slice `x`
/// (`[y][x]` flattened) against its sinogram `b` (`[angle][bin]`).
fn art_sweep<T: Real, P: Projector<T> + ?Sized>(
    p: &P,
    x: &mut [T],
    b: ArrayView2<'_, T>,
    rays: &[(usize, usize)],
    norms: &Array2<T>,
    lambda: f64,
    clamp: &Clamp<T>,
) {
    let l = T::from_f64(lambda);
    let mut row: Vec<(usize, T)> = Vec::new();
    let unconstrained = clamp.is_none();
    for &(a, k) in rays {
        let n2 = norms[[a, k]];
        if n2 == T::ZERO {
            continue;
        }
        row.clear();
        p.trace_ray(a, k, &mut |i, w| row.push((i, w)));
        let dot = row.iter().fold(T::ZERO, |acc, &(i, w)| acc + x[i] * w);
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
