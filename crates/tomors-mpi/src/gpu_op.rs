//! The domain decomposition of cone-beam iterative methods with each
//! rank's slab on its GPU: as [`crate::dist_op`], with device vectors.
//!
//! - [`GpuSlabVector`], the domain: this rank's z-slab of the volume on its
//!   GPU, a vector of the whole volume ([`crate::decomp::Slab`] over a
//!   device vector);
//! - The operator, [`GpuDistConeOperator`]: the slab projector on the rank's GPU
//!   ([`CudaConeJoseph::slab`], Joseph or voxel pair); a forward projection
//!   projects the slab on the GPU, downloads the partial projections, sums
//!   them over the ranks on the host (`MPI_Allreduce`) and uploads the sum,
//!   so every rank's GPU then holds `A·x` of the whole volume; back
//!   projections are local.
//!
//! The core's solver runs on them unchanged (SIRT, Landweber, Cimmino,
//! SART and BLOCK-IT with the Joseph pair).

use std::ops::Range;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, Result};
use ndarray::{s, Array3, ArrayView3};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{solve, IterationState, IterativeOptions, IterativeResult};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::Result as CoreResult;
use tomors_cuda::{ConeBackProjector, CudaBackend, CudaConeJoseph, DeviceVec};

use crate::comm::Comm;
use crate::decomp::{log_sums, rank_slab, slab_result, Slab, SumStats};

/// This rank's slab of a volume split into z-slabs over the ranks of
/// `comm`, on the rank's GPU (`[z][y][x]`), as a vector of the whole volume.
pub type GpuSlabVector<'c> = Slab<'c, DeviceVec>;

/// One rank's part of a cone-beam operator whose volume is split into
/// z-slabs over the ranks of `comm`, its slab on the rank's GPU (see the
/// module documentation).
pub struct GpuDistConeOperator<'c> {
    local: CudaConeJoseph,
    comm: &'c dyn Comm,
    total: usize,
    /// Host buffer of the sums.
    host: Mutex<Vec<f32>>,
    /// The sums (their time: download, sum, upload).
    stats: SumStats,
}

impl<'c> GpuDistConeOperator<'c> {
    /// The operator of slab `z` of `volume` on `backend`'s GPU.
    ///
    /// Errors: those of [`CudaConeJoseph::slab`].
    pub fn new(
        comm: &'c dyn Comm,
        backend: &CudaBackend,
        back: ConeBackProjector,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z: Range<usize>,
    ) -> Result<Self> {
        let local = CudaConeJoseph::slab(backend, geometry, volume, z, back)?;
        Ok(Self {
            local,
            comm,
            total: volume.len(),
            host: Mutex::new(Vec::new()),
            stats: Default::default(),
        })
    }

    /// The slab projector.
    pub fn local(&self) -> &CudaConeJoseph {
        &self.local
    }

    /// Wraps a device slab as a domain vector.
    pub fn domain_vector(&self, x: DeviceVec) -> GpuSlabVector<'c> {
        Slab::new(x, self.comm, self.total)
    }

    /// Communication so far: `(sums, bytes summed per rank, seconds)`.
    pub fn comm_stats(&self) -> (u64, u64, f64) {
        self.stats.get()
    }

    /// Sums `y` over the ranks, in place (through host memory).
    fn sum(&self, y: &mut DeviceVec) -> CoreResult<()> {
        let t = Instant::now();
        let mut host = self
            .host
            .lock()
            .map_err(|_| tomors_core::CoreError::Unsupported {
                backend: "mpi".into(),
                operation: "a poisoned lock".into(),
            })?;
        host.resize(y.layout().stored_len(), 0.0);
        y.download_into(&mut host)?;
        self.comm.allreduce_sum_f32(&mut host);
        y.upload_from(&host)?;
        self.stats.record(host.len(), t);
        Ok(())
    }
}

impl<'c> LinearOperator for GpuDistConeOperator<'c> {
    type Domain = GpuSlabVector<'c>;
    type Range = DeviceVec;

    fn name(&self) -> &str {
        match self.local.back_projector() {
            ConeBackProjector::Joseph => "cuda cone joseph (z-slab per rank)",
            ConeBackProjector::Voxel => "cuda cone voxel (z-slab per rank)",
        }
    }
    fn n_projections(&self) -> usize {
        self.local.projections_dim().0
    }
    fn domain_zeros(&self) -> CoreResult<GpuSlabVector<'c>> {
        Ok(self.domain_vector(self.local.operator().domain_zeros()?))
    }
    fn range_zeros(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        self.local.operator().range_zeros(angles)
    }
    fn forward(
        &self,
        x: &GpuSlabVector<'c>,
        angles: &[usize],
        y: &mut DeviceVec,
    ) -> CoreResult<()> {
        self.local.operator().forward(&x.x, angles, y)?;
        self.sum(y)
    }
    fn backward(
        &self,
        y: &DeviceVec,
        angles: &[usize],
        x: &mut GpuSlabVector<'c>,
    ) -> CoreResult<()> {
        self.local.operator().backward(y, angles, &mut x.x)
    }
    fn select_into(
        &self,
        y_full: &DeviceVec,
        angles: &[usize],
        out: &mut DeviceVec,
    ) -> CoreResult<()> {
        self.local.operator().select_into(y_full, angles, out)
    }
    fn is_matched(&self) -> bool {
        self.local.operator().is_matched()
    }
    /// `Σ_j a_ij²` over the whole volume: each slab's sums, summed over the
    /// ranks.
    fn row_norms_sq(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        let mut v = self.local.operator().row_norms_sq(angles)?;
        self.sum(&mut v)?;
        Ok(v)
    }
    /// `A·1` of the whole volume (a forward projection, summed).
    fn row_sums(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        let mut ones = self.domain_zeros()?;
        ones.fill(1.0)?;
        let mut out = self.range_zeros(angles)?;
        self.forward(&ones, angles, &mut out)?;
        Ok(out)
    }
}

/// Cone-beam iterative reconstruction of `projections` (`[angle][row][col]`,
/// the same on every rank) with the volume split into z-slabs over the
/// ranks of `comm`, each rank's slab on its GPU `device` with the pair
/// `back`. Returns this rank's slab range and its part of the result.
/// Collective, as [`crate::cone::reconstruct_distributed`].
///
/// Errors: more ranks than slices, projections of another shape, device
/// errors (a device error inside an iteration leaves the other ranks in a
/// sum: the caller ends the job), divergence.
#[allow(clippy::too_many_arguments)]
pub fn reconstruct_distributed_gpu(
    comm: &dyn Comm,
    device: usize,
    back: ConeBackProjector,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    projections: ArrayView3<'_, f32>,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationState<'_, GpuSlabVector<'_>>) -> bool,
) -> Result<(Range<usize>, IterativeResult<f32>)> {
    let z = rank_slab(comm, volume.nz)?;
    let backend =
        CudaBackend::new(device).map_err(|e| anyhow!("opening CUDA device {device}: {e}"))?;
    let op = GpuDistConeOperator::new(comm, &backend, back, geometry, volume, z.clone())?;
    let b = op.local().upload_projections(projections)?;
    let mut x = op.domain_zeros()?;
    let t = Instant::now();
    let report = solve(&op, &b, &mut x, options, callback)?;
    let who = format!(" (GPU {device})");
    log_sums(comm, t, op.comm_stats(), &who, ", through host memory");
    let slab = op.local().download(&x.x)?;
    Ok((z, slab_result(report, slab)))
}

/// The whole volume from the ranks' slabs in rank order (for tests: each
/// rank's `(z, slab)`).
pub fn assemble(volume: &ConeVolume, parts: &[(Range<usize>, Array3<f32>)]) -> Array3<f32> {
    let mut out = Array3::<f32>::zeros((volume.nz, volume.ny, volume.nx));
    for (z, x) in parts {
        out.slice_mut(s![z.clone(), .., ..]).assign(x);
    }
    out
}
