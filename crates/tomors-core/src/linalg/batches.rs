//! The device-friendly ray capability of ART-type methods: batches of rays
//! of one projection whose pixel sets are pairwise disjoint, projected and
//! updated together.
//!
//! A Kaczmarz sweep over the rays of one batch equals one simultaneous step
//! `x ← P_C(x + λ·A_βᵀ·M_β·(b_β − A_β·x))` with `M = diag(1/‖a_i‖²)`: no
//! two rays of the batch share a pixel, so each ray's inner product `a_i·x`
//! does not change while the others are applied, and the constraint acts on
//! every pixel once (pixels no ray of the batch touches keep their value,
//! which is already inside the box). The solver runs ART and the
//! block-parallel method through this capability on operators without
//! host ray access ([`LinearOperator::ray_batches`](super::LinearOperator::ray_batches)).

use super::vector::Vector;
use crate::error::Result;

/// Rays of an operator in batches of rays with disjoint pixel sets.
///
/// The rays of projection `angle` are cut into
/// [`batches(angle)`](Self::batches) batches (every ray in exactly one);
/// range vectors here are range vectors of the one-projection block
/// `[angle]` (see [`LinearOperator::range_zeros`](super::LinearOperator::range_zeros)).
pub trait RayBatches<D: Vector, R: Vector<Elem = D::Elem>> {
    /// Number of batches of the rays of projection `angle` (at least 1).
    fn batches(&self, angle: usize) -> usize;

    /// `y ← A_β·x` on the rays of batch `batch` of projection `angle`
    /// (`y` a range vector of the block `[angle]`; its entries of rays
    /// outside the batch are unspecified).
    ///
    /// Errors: vectors of the wrong shape, an index out of range, a device
    /// failure.
    fn forward_batch(&self, x: &D, angle: usize, batch: usize, y: &mut R) -> Result<()>;

    /// `x ← P_C(x + λ·A_βᵀ·r)` on the pixels of the rays of batch `batch`
    /// of projection `angle` (`r` a range vector of the block `[angle]`,
    /// read at the batch's rays only; `P_C` the box `[min, max]`, each side
    /// optional). Pixels no ray of the batch touches are left unchanged.
    ///
    /// Errors: as [`forward_batch`](Self::forward_batch).
    #[allow(clippy::too_many_arguments)]
    fn update_batch(
        &self,
        r: &R,
        angle: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut D,
    ) -> Result<()>;
}
