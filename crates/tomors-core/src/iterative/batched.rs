//! ART and the block-parallel method on operators that offer rays in
//! batches with disjoint pixel sets ([`RayBatches`]) instead of host ray
//! access: the device operators. One Kaczmarz step per batch, written with
//! operator and vector calls only, so it runs where the vectors live.
//!
//! For a batch `β` of projection `a` the step is
//! `x ← P_C(x + λ·A_βᵀ·M_a·(b_a − A_β·x))`, `M = diag(1/‖a_i‖²)` (rays of
//! negligible norm get weight 0 and are skipped, as on the CPU): exactly
//! the Kaczmarz updates of the batch's rays one after the other, since they
//! touch disjoint pixels. A sweep visits the projections in order and the
//! batches of each in order (ART's sequential order: projection by
//! projection, and within a projection the bins in interleaved batches), or
//! all `(projection, batch)` pairs in a random order drawn anew every
//! sweep (ART's random order).

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::options::RayOrder;
use super::solver::WEIGHT_FLOOR;
use crate::error::Result;
use crate::linalg::{LinearOperator, RayBatches, Vector};

/// `(projection, batch)` pairs of a sweep.
pub(crate) type BatchList = Vec<(usize, usize)>;

/// The state of Kaczmarz sweeps over ray batches: the operator, its
/// batches, the inverse squared ray norms of all projections, and
/// one-projection scratch vectors.
pub(crate) struct BatchSweep<'o, O: LinearOperator + ?Sized> {
    op: &'o O,
    batches: &'o dyn RayBatches<O::Domain, O::Range>,
    /// `1/‖a_i‖²` (0 for negligible rays) per projection (weights of the
    /// one-projection blocks).
    m: Vec<O::Range>,
    /// `A_β·x`, then the weighted residual, of one projection.
    y: O::Range,
    /// The data of the current projection.
    b_a: O::Range,
    /// Projection whose `b_a` is loaded.
    current: Option<usize>,
}

impl<'o, O: LinearOperator + ?Sized> BatchSweep<'o, O> {
    /// The sweep state of `op` with its `batches` (the row norms of all
    /// projections computed once).
    pub(crate) fn new(op: &'o O, batches: &'o dyn RayBatches<O::Domain, O::Range>) -> Result<Self> {
        let all: Vec<usize> = (0..op.n_projections()).collect();
        // Floored relative to the largest norm of all projections, as on
        // the host.
        let mut m_all = op.row_norms_sq(&all)?;
        m_all.invert_floored(WEIGHT_FLOOR)?;
        let m = all
            .iter()
            .map(|&a| op.select(&m_all, &[a]))
            .collect::<Result<_>>()?;
        Ok(Self {
            op,
            batches,
            m,
            y: op.range_zeros(&[0])?,
            b_a: op.range_zeros(&[0])?,
            current: None,
        })
    }

    /// The `(projection, batch)` pairs of the projections `angles` in
    /// order.
    pub(crate) fn list(&self, angles: impl IntoIterator<Item = usize>) -> BatchList {
        angles
            .into_iter()
            .flat_map(|a| (0..self.batches.batches(a)).map(move |k| (a, k)))
            .collect()
    }

    /// The pairs of all projections in the order of sweep `it` (1-based).
    pub(crate) fn art_order(&self, order: RayOrder, it: usize) -> BatchList {
        let mut list = self.list(0..self.op.n_projections());
        if let RayOrder::Random { seed } = order {
            let mut rng = StdRng::seed_from_u64(seed.wrapping_add(it as u64));
            list.shuffle(&mut rng);
        }
        list
    }

    /// One Kaczmarz step per batch of `list`, in order, on `x` against the
    /// full data `b`.
    pub(crate) fn sweep(
        &mut self,
        x: &mut O::Domain,
        b: &O::Range,
        list: &[(usize, usize)],
        lambda: f64,
        lo: Option<f64>,
        hi: Option<f64>,
    ) -> Result<()> {
        for &(a, k) in list {
            if self.current != Some(a) {
                self.op.select_into(b, &[a], &mut self.b_a)?;
                self.current = Some(a);
            }
            self.batches.forward_batch(x, a, k, &mut self.y)?;
            self.y.residual_weighted(&self.b_a, Some(&self.m[a]))?;
            self.batches
                .update_batch(&self.y, a, k, lambda, lo, hi, x)?;
        }
        Ok(())
    }
}
