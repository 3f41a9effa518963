//! [`CudaConeJoseph`] as a tomors-core [`LinearOperator`] on flat device
//! arrays, with block views (per-block ray frames, cached) and row
//! selection on the device.

use tomors_core::iterative::{spectral_radius_of, Weighting};
use tomors_core::linalg::{LinearOperator, RayBatches, Vector};
use tomors_core::Result as CoreResult;

use super::*;

/// [`CudaConeJoseph`] as a linear operator: domain the `[z][y][x]` volume,
/// range the `[angle][row][col]` projections (block `ℓ`: those of the
/// projections `ℓ`), both flat [`DeviceVec`]s. The Joseph pair is matched
/// and supports any block; the voxel pair (`B ≈ Aᵀ`) back projects all
/// projections only. ART and the block-parallel method run through its
/// ray batches (`art.rs`, Joseph's rays for both pairs).
pub struct ConeOp<'p> {
    pub(super) proj: &'p CudaConeJoseph,
}

impl CudaConeJoseph {
    /// The projector as a linear operator on device arrays.
    pub fn operator(&self) -> ConeOp<'_> {
        ConeOp { proj: self }
    }

    /// The tables of the block of projections `angles` (those of all
    /// projections for `0..n` in order; others built on first use, then
    /// cached).
    ///
    /// Errors: an empty block, an index out of range, driver errors.
    pub(super) fn block_tables(&self, angles: &[usize]) -> Result<Arc<ConeBlock>> {
        self.blocks.get(angles, |a| {
            ConeBlock::new(&self.queue, a, &self.frames_host)
        })
    }

    /// Row sums `A·1` (`[angle][row][col]`), or the squared row norms
    /// `‖a_i‖²`.
    pub fn row_sums(&self, squared: bool) -> Result<Array3<f32>> {
        let all: Vec<usize> = (0..self.na).collect();
        let op = self.operator();
        let v = if squared {
            op.row_norms_sq(&all)?
        } else {
            LinearOperator::row_sums(&op, &all)?
        };
        self.download(&v)
    }

    /// Column sums `Aᵀ·1` (`[z][y][x]`; `B·1` with the voxel back
    /// projection).
    pub fn column_sums(&self) -> Result<Array3<f32>> {
        let all: Vec<usize> = (0..self.na).collect();
        let v = LinearOperator::column_sums(&self.operator(), &all)?;
        self.download(&v)
    }

    /// Spectral radius of `T·Aᵀ·M·A` by power iteration from the all-ones
    /// volume (tomors-core's
    /// [`spectral_radius_of`]),
    /// on the device.
    pub fn spectral_radius(&self, weighting: Weighting, max_iterations: usize) -> Result<f64> {
        let all: Vec<usize> = (0..self.na).collect();
        Ok(spectral_radius_of(
            &self.operator(),
            weighting,
            &all,
            max_iterations,
        )?)
    }
}

impl ConeOp<'_> {
    /// The projector.
    pub fn projector(&self) -> &CudaConeJoseph {
        self.proj
    }

    fn block_dim(&self, n: usize) -> (usize, usize, usize) {
        (n, self.proj.nr, self.proj.nc)
    }

    fn forward_impl(&self, x: &DeviceVec, angles: &[usize], y: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let block = p.block_tables(angles)?;
        p.check_flat(x, p.volume_dim(), "the volume")?;
        p.check_flat(y, self.block_dim(block.len), "the projections")?;
        y.touched();
        p.forward_block(x.buffer().ptr(), y.buffer().ptr(), &block, false)
    }

    fn backward_impl(&self, y: &DeviceVec, angles: &[usize], x: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let block = p.block_tables(angles)?;
        p.check_flat(y, self.block_dim(block.len), "the projections")?;
        p.check_flat(x, p.volume_dim(), "the volume")?;
        x.touched();
        p.back_block(y, x, &block)
    }

    fn row_sums_impl(&self, angles: &[usize]) -> Result<DeviceVec> {
        let p = self.proj;
        if let Some(s) = p.quarter_for(angles) {
            // The first quarter, copied to the other three (projection
            // k + j·s is projection k turned by j quarter turns, and the
            // all-ones square volume turns into itself).
            let first: Vec<usize> = (0..s).collect();
            let block = p.block_tables(&first)?;
            let out = p.alloc(self.block_dim(p.na), "row sums")?;
            p.row_sums_block(out.buffer().ptr(), &block)?;
            let bytes = s * p.nr * p.nc * 4;
            for j in 1..4 {
                // SAFETY: copies within `out` (live until the stream is
                // done with it), from the first quarter to quarter j.
                unsafe {
                    out.buffer().copy_from_device_async(
                        j * bytes,
                        out.buffer().ptr(),
                        bytes,
                        p.queue.stream(),
                    )?;
                }
            }
            return Ok(out);
        }
        let block = p.block_tables(angles)?;
        let out = p.alloc(self.block_dim(block.len), "row sums")?;
        p.row_sums_block(out.buffer().ptr(), &block)?;
        Ok(out)
    }

    fn row_norms_impl(&self, angles: &[usize]) -> Result<DeviceVec> {
        let p = self.proj;
        let block = p.block_tables(angles)?;
        let mut ones = p.alloc_volume()?;
        ones.fill(1.0)?;
        let out = p.alloc(self.block_dim(block.len), "row norms")?;
        p.forward_block(ones.buffer().ptr(), out.buffer().ptr(), &block, true)?;
        Ok(out)
    }

    fn select_impl(&self, y: &DeviceVec, angles: &[usize], out: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let block = p.block_tables(angles)?;
        p.check_flat(y, p.projections_dim(), "the full projections")?;
        p.check_flat(out, self.block_dim(block.len), "the block's projections")?;
        out.gather_rows(y, block.idx.ptr(), block.len, p.nr * p.nc, p.na, 1)
    }
}

impl LinearOperator for ConeOp<'_> {
    type Domain = DeviceVec;
    type Range = DeviceVec;

    fn name(&self) -> &str {
        match self.proj.back_projector() {
            ConeBackProjector::Joseph => "cuda cone joseph",
            ConeBackProjector::Voxel => "cuda cone voxel",
        }
    }

    fn n_projections(&self) -> usize {
        self.proj.na
    }

    fn domain_zeros(&self) -> CoreResult<DeviceVec> {
        let p = self.proj;
        Ok(DeviceVec::zeros(
            &p.queue,
            Layout::Flat(p.volume_dim()),
            "a device volume",
        )?)
    }

    fn range_zeros(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        if angles.is_empty() {
            return Err(CudaError::Parameter("an empty block of projections".into()).into());
        }
        Ok(DeviceVec::zeros(
            &self.proj.queue,
            Layout::Flat(self.block_dim(angles.len())),
            "device projections",
        )?)
    }

    projections_through_impls!();

    fn is_matched(&self) -> bool {
        self.proj.voxel.is_none()
    }

    fn row_norms_sq(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        Ok(self.row_norms_impl(angles)?)
    }

    /// `A·1` by arithmetic (`cj_forward_ones`): Joseph's weights, exactly
    /// the forward projection of ones with Joseph's loads (and, for the
    /// voxel pair, without the texture's 8-bit weights at the borders).
    fn row_sums(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        Ok(self.row_sums_impl(angles)?)
    }

    /// `B·1`; for the voxel pair on a geometry with a quarter-turn symmetry
    /// through it ([`CudaConeJoseph::set_rotation`]), else the back
    /// projection of ones.
    fn column_sums(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        let p = self.proj;
        if let Some(s) = p.quarter_for(angles) {
            if let Some(v) = p.column_sums_quarter(s)? {
                return Ok(v);
            }
        }
        let mut ones = self.range_zeros(angles)?;
        ones.fill(1.0)?;
        let mut out = self.domain_zeros()?;
        self.backward(&ones, angles, &mut out)?;
        Ok(out)
    }

    fn ray_batches(&self) -> Option<&dyn RayBatches<DeviceVec, DeviceVec>> {
        Some(self)
    }
}
