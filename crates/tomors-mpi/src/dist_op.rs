//! The domain decomposition of cone-beam iterative methods as a
//! [`LinearOperator`] of the core's generic solver
//! ([`tomors_core::iterative::solve`]):
//!
//! - [`SlabVector`], the domain: this rank's z-slab of the volume, a vector
//!   of the *whole* volume ([`crate::decomp::Slab`] over a host array);
//! - [`DistConeOperator`]: forward projection of the slab plus the sum of
//!   the partial projections over the ranks (`MPI_Allreduce`), so the range
//!   (the whole projection set, a host array) is the same on every rank;
//!   back projection into the slab, local.
//!
//! The solver is written once; every algorithm it runs (SIRT, Landweber,
//! Cimmino, SART, BLOCK-IT, and the default relaxation's power iteration)
//! runs distributed through these two types. ART and the block-parallel
//! method need single rays over host memory and are refused (the operator
//! offers no ray access).

use std::ops::Range;
use std::time::Instant;

use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{
    cone_projector, ConeOperator, ProjectorKind, StackOperator, VolumeBox,
};
use tomors_core::linalg::LinearOperator;
use tomors_core::Result;

use crate::comm::Comm;
use crate::decomp::{Slab, SumStats};

/// This rank's slab `[1][z·y][x]` of a volume split into z-slabs over the
/// ranks of `comm`, as a vector of the whole volume.
pub type SlabVector<'c> = Slab<'c, Array3<f32>>;

/// One rank's part of a cone-beam operator whose volume is split into
/// z-slabs over the ranks of `comm` (see the module documentation).
pub struct DistConeOperator<'c> {
    local: Box<dyn ConeOperator<f32>>,
    comm: &'c dyn Comm,
    total: usize,
    stats: SumStats,
}

impl<'c> DistConeOperator<'c> {
    /// The operator of slab `z` of `volume` on this rank.
    ///
    /// Errors: those of [`cone_projector`] (an empty slab, a source orbit
    /// through the volume).
    pub fn new(
        comm: &'c dyn Comm,
        kind: ProjectorKind,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
    ) -> Result<Self> {
        let local =
            cone_projector::<f32>(kind, geometry, volume, Some(VolumeBox::slab(volume, z)))?;
        Ok(Self {
            local,
            comm,
            total: volume.len(),
            stats: Default::default(),
        })
    }

    /// The slab's values as a domain vector (`x`: `[1][z·y][x]`).
    pub fn domain_vector(&self, x: Array3<f32>) -> SlabVector<'c> {
        Slab::new(x, self.comm, self.total)
    }

    /// Communication so far: `(sums, bytes summed per rank, seconds)`.
    pub fn comm_stats(&self) -> (u64, u64, f64) {
        self.stats.get()
    }

    fn stack(&self) -> StackOperator<'_, f32, dyn ConeOperator<f32>> {
        StackOperator::new(self.local.as_ref(), 1)
    }

    /// Sums `y` over the ranks, in place.
    fn sum(&self, y: &mut Array3<f32>) {
        let t = Instant::now();
        match y.as_slice_mut() {
            Some(s) => self.comm.allreduce_sum_f32(s),
            None => unreachable!("range vectors are made in standard layout"),
        }
        self.stats.record(y.len(), t);
    }
}

impl<'c> LinearOperator for DistConeOperator<'c> {
    type Domain = SlabVector<'c>;
    type Range = Array3<f32>;

    fn name(&self) -> &str {
        self.local.name()
    }
    fn n_projections(&self) -> usize {
        self.local.n_angles()
    }
    fn domain_zeros(&self) -> Result<SlabVector<'c>> {
        Ok(self.domain_vector(self.stack().domain_zeros()?))
    }
    fn range_zeros(&self, angles: &[usize]) -> Result<Array3<f32>> {
        self.stack().range_zeros(angles)
    }
    fn forward(&self, x: &SlabVector<'c>, angles: &[usize], y: &mut Array3<f32>) -> Result<()> {
        self.stack().forward(&x.x, angles, y)?;
        self.sum(y);
        Ok(())
    }
    fn backward(&self, y: &Array3<f32>, angles: &[usize], x: &mut SlabVector<'c>) -> Result<()> {
        self.stack().backward(y, angles, &mut x.x)
    }
    fn select_into(
        &self,
        y_full: &Array3<f32>,
        angles: &[usize],
        out: &mut Array3<f32>,
    ) -> Result<()> {
        self.stack().select_into(y_full, angles, out)
    }
    fn select(&self, y_full: &Array3<f32>, angles: &[usize]) -> Result<Array3<f32>> {
        self.stack().select(y_full, angles)
    }
    fn is_matched(&self) -> bool {
        self.local.is_matched()
    }
    /// `Σ_j a_ij²` over the whole volume: each slab's sums, summed over the
    /// ranks (f64).
    fn row_norms_sq(&self, angles: &[usize]) -> Result<Array3<f32>> {
        let local = self.stack().row_norms_sq(angles)?;
        let mut v: Vec<f64> = local.iter().map(|&x| f64::from(x)).collect();
        self.comm.allreduce_sum_f64(&mut v);
        Ok(
            Array3::from_shape_vec(local.dim(), v.into_iter().map(|x| x as f32).collect())
                .expect("same shape"),
        )
    }
}
