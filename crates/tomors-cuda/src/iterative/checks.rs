//! Checks and helpers shared by the GPU SIRT runs.

use ndarray::ArrayView3;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, Weighting};
use tomors_core::CoreError;

use crate::error::{CudaError, Result};

/// Weights below this fraction of the largest are treated as zero rows or
/// columns (as tomors-core's `WEIGHT_FLOOR`).
const WEIGHT_FLOOR: f64 = 1e-6;

/// `1/v` for `v` above `WEIGHT_FLOOR` × the largest, else 0 (as tomors-core).
pub(crate) fn invert(a: &mut [f32]) {
    let max = a.iter().fold(0.0f64, |m, &v| m.max(v as f64));
    let floor = max * WEIGHT_FLOOR;
    a.iter_mut().for_each(|x| {
        let v = *x as f64;
        *x = if v > floor && v > 0.0 {
            (1.0 / v) as f32
        } else {
            0.0
        };
    });
}

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

pub(crate) fn clamp(c: &Constraint, v: f32) -> f32 {
    let mut v = v;
    if let Some(lo) = c.min {
        if v < lo as f32 {
            v = lo as f32;
        }
    }
    if let Some(hi) = c.max {
        if v > hi as f32 {
            v = hi as f32;
        }
    }
    v
}

pub(crate) fn find_non_finite(a: &ArrayView3<'_, f32>, what: &str) -> Result<()> {
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

/// Checks the options of the GPU SIRT runs (no GPU needed): the algorithm
/// is SIRT, at least one iteration, a positive finite relaxation, a
/// non-negative finite tolerance, a valid constraint box. Returns the
/// weighting.
pub(crate) fn check_options(options: &IterativeOptions) -> Result<Weighting> {
    let weighting = match options.algorithm {
        Algorithm::Sirt(w) => w,
        other => {
            return Err(CudaError::Parameter(format!(
                "the GPU runs SIRT (sirt, landweber, cimmino) only, not {other:?}; use the CPU"
            )))
        }
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
