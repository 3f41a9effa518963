//! Checks and helpers shared by the GPU iterative runs.

use ndarray::ArrayView3;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, Weighting};
use tomors_core::CoreError;

use crate::error::{CudaError, Result};

pub(crate) fn check_constraint(c: &Constraint) -> Result<()> {
    for v in [c.min, c.max].into_iter().flatten() {
        if !v.is_finite() {
            return Err(CudaError::Parameter(format!(
                "constraint bound {v} is not finite"
            )));
        }
    }
    if let (Some(lo), Some(hi)) = (c.min, c.max) {
        if lo > hi {
            return Err(CudaError::Parameter(format!(
                "constraint minimum {lo} exceeds maximum {hi}"
            )));
        }
    }
    Ok(())
}

/// Checks that `what` has the dimensions `expected`.
pub(crate) fn check_dim(
    what: &str,
    got: (usize, usize, usize),
    expected: (usize, usize, usize),
) -> Result<()> {
    if got != expected {
        return Err(CoreError::Shape(format!(
            "{what} is {}×{}×{}, expected {}×{}×{}",
            got.0, got.1, got.2, expected.0, expected.1, expected.2
        ))
        .into());
    }
    Ok(())
}

/// Checks on the device that `dev`, the upload of `host` (`what`), is
/// finite (one reduction instead of a host pass before the upload); where
/// it is not, the host scan names the first bad element.
///
/// Errors: [`CoreError::Data`] naming the element, device errors.
pub(crate) fn check_finite_on_device(
    dev: &crate::iterative::DeviceVec,
    host: &ArrayView3<'_, f32>,
    what: &str,
) -> Result<()> {
    use tomors_core::linalg::Vector;
    if dev.all_finite()? {
        return Ok(());
    }
    find_non_finite(host, what)?;
    Err(CoreError::Data(format!("{what} has a non-finite value")).into())
}

/// Checks that the data (`what`) and the initial volume, if any, are
/// finite, naming the first bad element.
pub(crate) fn check_finite(
    data: &ArrayView3<'_, f32>,
    what: &str,
    initial: Option<&ArrayView3<'_, f32>>,
) -> Result<()> {
    find_non_finite(data, what)?;
    match initial {
        Some(x0) => find_non_finite(x0, "the initial volume"),
        None => Ok(()),
    }
}

fn find_non_finite(a: &ArrayView3<'_, f32>, what: &str) -> Result<()> {
    use rayon::prelude::*;
    let all_finite = a
        .outer_iter()
        .into_par_iter()
        .all(|s| s.iter().all(|v| v.is_finite()));
    if all_finite {
        return Ok(());
    }
    if let Some((pos, _)) = a.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(CoreError::Data(format!("{what} has a non-finite value at {pos:?}")).into());
    }
    Ok(())
}

/// Checks the options of the GPU runs (no GPU needed): SIRT, a
/// block-sequential method (SART, BLOCK-IT) or the block-parallel method
/// with at least one projection per block, or ART; at least one iteration,
/// a positive finite relaxation, a non-negative finite tolerance, a valid
/// constraint box. Returns the weighting (Landweber for ART and the
/// block-parallel method, which use the rays' own norms).
pub(crate) fn check_options(options: &IterativeOptions) -> Result<Weighting> {
    let weighting = match options.algorithm {
        Algorithm::Sirt(w) => w,
        Algorithm::BlockSequential {
            projections_per_block: 0,
            ..
        }
        | Algorithm::BlockParallel {
            projections_per_block: 0,
        } => {
            return Err(CudaError::Parameter(
                "a block needs at least one projection".into(),
            ))
        }
        Algorithm::BlockSequential { weighting, .. } => weighting,
        Algorithm::Art { .. } | Algorithm::BlockParallel { .. } => Weighting::Landweber,
    };
    if options.iterations == 0 {
        return Err(CudaError::Parameter(
            "the iteration count must be at least 1".into(),
        ));
    }
    if let Some(l) = options.relaxation {
        if !(l.is_finite() && l > 0.0) {
            return Err(CudaError::Parameter(format!(
                "relaxation {l} must be a positive finite number"
            )));
        }
    }
    if let Some(tol) = options.tolerance {
        if !(tol.is_finite() && tol >= 0.0) {
            return Err(CudaError::Parameter(format!(
                "tolerance {tol} must be a non-negative finite number"
            )));
        }
    }
    check_constraint(&options.constraint)?;
    Ok(weighting)
}
