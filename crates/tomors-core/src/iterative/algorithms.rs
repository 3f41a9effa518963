//! The host-array API of the iterative methods over a [`Projector`]:
//! [`reconstruct`], [`default_relaxation`], [`spectral_radius`]. Thin
//! wrappers over the generic [`solve`] through [`StackOperator`]; the
//! methods themselves are in [`super::solver`].

use ndarray::{Array3, ArrayView3};

use super::operator::Projector;
use super::options::{Algorithm, IterativeOptions, StopReason, Weighting};
use super::solver::{check_options, default_relaxation_of, solve, spectral_radius_of, SolveReport};
use super::stack::StackOperator;
use crate::error::{CoreError, Result};
use crate::linalg::Real;

/// What the per-iteration callback of [`reconstruct`] sees.
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

impl<T> IterativeResult<T> {
    /// The reconstruction `x` with the solver's `report`.
    pub fn from_report(x: Array3<T>, report: SolveReport) -> Self {
        Self {
            x,
            residuals: report.residuals,
            iterations: report.iterations,
            relaxation: report.relaxation,
            stop: report.stop,
        }
    }
}

/// Estimates the spectral radius of `T·B·M·A` restricted to the projections
/// `angles` (for a matched projector with Landweber weights: `‖A‖₂²`) by
/// power iteration on one slice ([`spectral_radius_of`]).
pub fn spectral_radius<T: Real, P: Projector<T> + ?Sized>(
    projector: &P,
    weighting: Weighting,
    angles: &[usize],
    max_iterations: usize,
) -> Result<f64> {
    spectral_radius_of(
        &StackOperator::new(projector, 1),
        weighting,
        angles,
        max_iterations,
    )
}

/// The default relaxation of `algorithm` on `projector`
/// ([`default_relaxation_of`] on one slice): 1 for ART, the block-parallel
/// method and row/column-sum weights, else `1/ρ` with `ρ` the spectral
/// radius of a step, the middle of the convergence interval `(0, 2/ρ)`.
///
/// Larger values (up to just below `2/ρ`) converge faster along most of the
/// spectrum but make the dominant component oscillate.
pub fn default_relaxation<T: Real, P: Projector<T> + ?Sized>(
    projector: &P,
    algorithm: &Algorithm,
) -> Result<f64> {
    default_relaxation_of(&StackOperator::new(projector, 1), algorithm)
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

/// Reconstructs `sinograms` (`[slice][angle][bin]`) with `projector`,
/// starting from `initial` (`[slice][y][x]`, zeros if `None`), calling
/// `callback` after every iteration (returning `false` stops): [`solve`]
/// on a [`StackOperator`] of the projector.
///
/// Errors: shapes that do not fit the projector, non-finite data or
/// initial values, zero iterations, a relaxation that is not a positive
/// finite number, a negative or non-finite tolerance, zero projections per
/// block, an empty or inverted constraint box, divergence (relaxation too
/// large: the residual grows by orders of magnitude or the iterate becomes
/// non-finite).
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
    check_options(options)?;
    check_finite(sinograms, "the sinogram data")?;
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
            x0.as_standard_layout().into_owned()
        }
        None => Array3::from_elem((ns, ny, nx), T::ZERO),
    };
    // The default relaxation from one slice (every slice has the same
    // operator).
    let options = IterativeOptions {
        relaxation: Some(match options.relaxation {
            Some(l) => l,
            None => default_relaxation(projector, &options.algorithm)?,
        }),
        ..*options
    };
    let b = sinograms.as_standard_layout().into_owned();
    let op = StackOperator::new(projector, ns);
    let report = solve(&op, &b, &mut x, &options, &mut |state| {
        callback(&IterationInfo {
            iteration: state.iteration,
            residual: state.residual,
            x: state.x.view(),
        })
    })?;
    Ok(IterativeResult::from_report(x, report))
}
