//! [`CudaConeSlabs`] as a tomors-core [`LinearOperator`] over
//! [`SlabsVec`] (domain) and [`ReplicaVec`] (range).

use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::Result as CoreResult;

use super::{CudaConeSlabs, ReplicaVec, SlabsVec};
use crate::iterative::cone::ConeBackProjector;

impl CudaConeSlabs {
    fn per_slab<T>(
        &self,
        f: impl Fn(&crate::iterative::cone::ConeOp<'_>) -> CoreResult<T>,
    ) -> CoreResult<Vec<T>> {
        self.slabs.iter().map(|p| f(&p.operator())).collect()
    }
}

impl LinearOperator for CudaConeSlabs {
    type Domain = SlabsVec;
    type Range = ReplicaVec;

    fn name(&self) -> &str {
        match self.slabs[0].back_projector() {
            ConeBackProjector::Joseph => "cuda cone joseph (z-slabs over devices)",
            ConeBackProjector::Voxel => "cuda cone voxel (z-slabs over devices)",
        }
    }

    fn n_projections(&self) -> usize {
        self.slabs[0].projections_dim().0
    }

    fn domain_zeros(&self) -> CoreResult<SlabsVec> {
        Ok(SlabsVec::from_parts(self.per_slab(|o| o.domain_zeros())?))
    }

    fn range_zeros(&self, angles: &[usize]) -> CoreResult<ReplicaVec> {
        Ok(ReplicaVec::from_parts(
            self.per_slab(|o| o.range_zeros(angles))?,
        ))
    }

    /// Each device projects its slab (queued on every device before any
    /// wait), then the partial projections are summed across the devices
    /// ([`Exchange`](super::Exchange)).
    fn forward(&self, x: &SlabsVec, angles: &[usize], y: &mut ReplicaVec) -> CoreResult<()> {
        self.check_parts(x.parts.len(), y.parts.len())?;
        for (s, p) in self.slabs.iter().enumerate() {
            p.operator().forward(&x.parts[s], angles, &mut y.parts[s])?;
        }
        Ok(self.sum_partials(&mut y.parts)?)
    }

    /// Each device back projects (its copy of) `y` into its slab: no
    /// exchange.
    fn backward(&self, y: &ReplicaVec, angles: &[usize], x: &mut SlabsVec) -> CoreResult<()> {
        self.check_parts(x.parts.len(), y.parts.len())?;
        for (s, p) in self.slabs.iter().enumerate() {
            p.operator()
                .backward(&y.parts[s], angles, &mut x.parts[s])?;
        }
        Ok(())
    }

    fn select_into(
        &self,
        y_full: &ReplicaVec,
        angles: &[usize],
        out: &mut ReplicaVec,
    ) -> CoreResult<()> {
        self.check_parts(y_full.parts.len(), out.parts.len())?;
        for (s, p) in self.slabs.iter().enumerate() {
            p.operator()
                .select_into(&y_full.parts[s], angles, &mut out.parts[s])?;
        }
        Ok(())
    }

    fn is_matched(&self) -> bool {
        self.slabs[0].operator().is_matched()
    }

    /// `Σ_j a_ij²` over the whole volume: each slab's sums, summed across
    /// the devices.
    fn row_norms_sq(&self, angles: &[usize]) -> CoreResult<ReplicaVec> {
        let mut parts = self.per_slab(|o| o.row_norms_sq(angles))?;
        self.sum_partials(&mut parts)?;
        Ok(ReplicaVec::from_parts(parts))
    }

    /// `A·1` of the whole volume (a forward projection, summed).
    fn row_sums(&self, angles: &[usize]) -> CoreResult<ReplicaVec> {
        let mut ones = self.domain_zeros()?;
        ones.fill(1.0)?;
        let mut out = self.range_zeros(angles)?;
        self.forward(&ones, angles, &mut out)?;
        Ok(out)
    }
}
