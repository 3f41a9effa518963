//! The options of the iterative methods: the method, its weights, the
//! constraint set, relaxation and stopping rules, and why a run stopped.

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

    /// Checks that the bounds are finite and `min ≤ max`.
    pub(crate) fn check(&self) -> Result<()> {
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

/// Parameters of the iterative methods ([`solve`](super::solve),
/// [`reconstruct`](super::reconstruct)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterativeOptions {
    /// The method.
    pub algorithm: Algorithm,
    /// Most iterations (sweeps for ART and block methods); ≥ 1.
    pub iterations: usize,
    /// Relaxation λ > 0; `None` picks [`default_relaxation`](super::default_relaxation).
    pub relaxation: Option<f64>,
    /// Constraint applied after every update.
    pub constraint: Constraint,
    /// Stop once the relative residual `‖b − A·x‖₂/‖b‖₂` is at most this.
    pub tolerance: Option<f64>,
    /// Record the relative residual after every iteration (costs one extra
    /// forward projection per iteration for ART and block methods; free for
    /// SIRT, except after the last iteration: untracked, SIRT skips that
    /// forward projection). Always on when `tolerance` is set.
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
