//! [`CudaJoseph`] as a tomors-core [`LinearOperator`] on device stacks,
//! with block views (per-block angle tables, cached), row selection on the
//! device and the weights of the SIRT family as broadcast planes.

use tomors_core::iterative::{spectral_radius_of, Weighting};
use tomors_core::linalg::{LinearOperator, RayBatches, Vector};
use tomors_core::Result as CoreResult;

use super::*;

/// [`CudaJoseph`] on stacks of `slices` slices, as tomors-core's
/// [`StackOperator`](tomors_core::iterative::StackOperator) is for the CPU
/// projectors: domain [`DeviceVec`] `[slice][y][x]`, range [`DeviceVec`]
/// `[slice][angle][bin]` (block `ℓ`: the rows of the projections `ℓ`),
/// both interleaved stacks of the projector; weights are single planes
/// ([`Layout::Plane`]) broadcast over the slices. Matched (`B = Aᵀ`),
/// except with the voxel-driven back projection
/// ([`CudaJoseph::set_voxel_back`]: all projections at once, no block
/// views, no ray batches); ART and the block-parallel method run through
/// its ray batches (`art.rs`).
pub struct JosephStackOp<'p> {
    pub(super) proj: &'p CudaJoseph,
    pub(super) slices: usize,
}

impl CudaJoseph {
    /// The projector as a linear operator on stacks of `slices` slices.
    ///
    /// Errors: no slices, more slices than one device stack holds.
    pub fn operator(&self, slices: usize) -> Result<JosephStackOp<'_>> {
        self.check_slices(slices, "the operator")?;
        Ok(JosephStackOp { proj: self, slices })
    }

    /// The kernel tables of the block of projections `angles` (those of
    /// all projections for `0..n` in order; others built and uploaded on
    /// first use, then cached).
    ///
    /// Errors: an empty block, an index out of range, driver errors.
    pub(super) fn tables(&self, angles: &[usize]) -> Result<Arc<BlockTables>> {
        self.blocks.get(angles, |a| {
            BlockTables::new(
                &self.queue,
                a,
                &self.fp_host,
                &self.bp_host,
                &self.keys,
                self.ap,
            )
        })
    }

    /// A one-slice stack of ones, the input of the weights.
    fn ones(&self, rows: usize, cols: usize) -> Result<DeviceStack> {
        let mut v = self.alloc(1, rows, cols, "a weight input")?;
        v.fill(1.0)?;
        Ok(v)
    }

    /// Slice 0 of a one-slice stack as a plane.
    fn first_plane(&self, s: &DeviceStack) -> Result<DeviceVec> {
        let (_, rows, cols) = s.dim();
        let p = DeviceVec::uninit(&self.queue, Layout::Plane { rows, cols }, "a weight")?;
        self.deinterleave(s.buffer().ptr(), p.buffer().ptr(), 1, rows * cols, 1)?;
        Ok(p)
    }

    /// Row sums `A_ℓ·1` (or the squared row norms `‖a_i‖²`) of the
    /// projections `angles`, as a plane `[angle][bin]` on the device.
    pub(super) fn row_weights(&self, angles: &[usize], squared: bool) -> Result<DeviceVec> {
        let tables = self.tables(angles)?;
        let ones = self.ones(self.ny, self.nx)?;
        let vt = ones.transposed(|s, d| self.transpose_raw(s, d, self.pad / 4))?;
        let s = self.alloc(1, tables.len, self.nb, "row sums")?;
        let ptrs = (ones.buffer().ptr(), vt, s.buffer().ptr());
        self.forward_raw(ptrs, 1, &tables, squared)?;
        self.first_plane(&s)
    }

    /// Column sums `A_ℓᵀ·1` of the projections `angles`, as a plane
    /// `[y][x]` on the device.
    pub(super) fn column_weights(&self, angles: &[usize]) -> Result<DeviceVec> {
        let tables = self.tables(angles)?;
        if let Some(v) = self.voxel_column_sums(&tables)? {
            return Ok(v);
        }
        let ones = self.ones(tables.len, self.nb)?;
        let v = self.alloc(1, self.ny, self.nx, "column sums")?;
        self.back_raw(ones.buffer().ptr(), v.buffer().ptr(), 1, &tables)?;
        self.first_plane(&v)
    }

    /// Row sums `A·1` (`[angle][bin]`), or the squared row norms `‖a_i‖²`.
    pub fn row_sums(&self, squared: bool) -> Result<ndarray::Array2<f32>> {
        let all: Vec<usize> = (0..self.na).collect();
        let p = self.row_weights(&all, squared)?;
        Ok(p.download_flat()?.index_axis_move(Axis(0), 0))
    }

    /// Column sums `Aᵀ·1` (`[y][x]`).
    pub fn column_sums(&self) -> Result<ndarray::Array2<f32>> {
        let all: Vec<usize> = (0..self.na).collect();
        let p = self.column_weights(&all)?;
        Ok(p.download_flat()?.index_axis_move(Axis(0), 0))
    }

    /// Spectral radius of `T·Aᵀ·M·A` by power iteration from the all-ones
    /// image (tomors-core's
    /// [`spectral_radius_of`]
    /// on one slice), on the device.
    pub fn spectral_radius(&self, weighting: Weighting, max_iterations: usize) -> Result<f64> {
        let all: Vec<usize> = (0..self.na).collect();
        Ok(spectral_radius_of(
            &self.operator(1)?,
            weighting,
            &all,
            max_iterations,
        )?)
    }
}

impl JosephStackOp<'_> {
    /// The projector.
    pub fn projector(&self) -> &CudaJoseph {
        self.proj
    }

    /// Slices per stack.
    pub fn slices(&self) -> usize {
        self.slices
    }

    pub(super) fn check_domain(&self, x: &DeviceVec, what: &str) -> Result<()> {
        let (ns, _) = self.proj.check_volume(x, what)?;
        if ns != self.slices {
            return Err(CoreError::Shape(format!(
                "{what} has {ns} slices, the operator {}",
                self.slices
            ))
            .into());
        }
        Ok(())
    }

    pub(super) fn check_range(&self, y: &DeviceVec, rows: usize, what: &str) -> Result<()> {
        let (ns, _) = self.proj.check_stack(y, rows, self.proj.nb, what)?;
        if ns != self.slices {
            return Err(CoreError::Shape(format!(
                "{what} has {ns} slices, the operator {}",
                self.slices
            ))
            .into());
        }
        Ok(())
    }

    fn forward_impl(&self, x: &DeviceVec, angles: &[usize], y: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let tables = p.tables(angles)?;
        self.check_domain(x, "the volume")?;
        self.check_range(y, tables.len, "the projections")?;
        let Layout::Stack { stored, .. } = x.layout() else {
            unreachable!("checked to be a stack")
        };
        // The line model and the line sweep read the volume itself.
        let vt = if p.is_line_model() || p.sweep_forward() {
            x.buffer().ptr()
        } else {
            x.transposed(|s, d| p.transpose_raw(s, d, stored / 4))?
        };
        y.touched();
        let ptrs = (x.buffer().ptr(), vt, y.buffer().ptr());
        p.forward_raw(ptrs, self.slices, &tables, false)
    }

    fn backward_impl(&self, y: &DeviceVec, angles: &[usize], x: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let tables = p.tables(angles)?;
        self.check_range(y, tables.len, "the projections")?;
        self.check_domain(x, "the volume")?;
        x.touched();
        p.back_raw(y.buffer().ptr(), x.buffer().ptr(), self.slices, &tables)
    }

    fn select_impl(&self, y: &DeviceVec, angles: &[usize], out: &mut DeviceVec) -> Result<()> {
        let p = self.proj;
        let tables = p.tables(angles)?;
        let (na, nb, n) = (p.na, p.nb, tables.len);
        match (y.layout(), out.layout()) {
            (Layout::Plane { rows, cols }, Layout::Plane { rows: r, cols: c })
                if (rows, cols) == (na, nb) && (r, c) == (n, nb) =>
            {
                out.gather_rows(y, tables.idx.ptr(), n, nb, na, 1)
            }
            (Layout::Stack { stored, .. }, Layout::Stack { stored: so, .. }) if stored == so => {
                self.check_range(y, na, "the full projections")?;
                self.check_range(out, n, "the block's projections")?;
                out.gather_rows(y, tables.idx.ptr(), n, nb * 4, na, stored / 4)
            }
            (a, b) => Err(CoreError::Shape(format!(
                "select of {n} projections from {a:?} into {b:?}"
            ))
            .into()),
        }
    }
}

impl LinearOperator for JosephStackOp<'_> {
    type Domain = DeviceVec;
    type Range = DeviceVec;

    fn name(&self) -> &str {
        if self.proj.is_line_model() {
            "cuda line"
        } else if self.proj.voxel.is_some() {
            "cuda voxel"
        } else {
            "cuda joseph"
        }
    }

    fn n_projections(&self) -> usize {
        self.proj.na
    }

    fn domain_zeros(&self) -> CoreResult<DeviceVec> {
        let p = self.proj;
        Ok(p.alloc_zeros(self.slices, p.ny, p.nx, "a device volume")?)
    }

    fn range_zeros(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        let p = self.proj;
        if angles.is_empty() {
            return Err(CudaError::Parameter("an empty block of projections".into()).into());
        }
        Ok(p.alloc_zeros(self.slices, angles.len(), p.nb, "device projections")?)
    }

    projections_through_impls!();

    fn select(&self, y_full: &DeviceVec, angles: &[usize]) -> CoreResult<DeviceVec> {
        let p = self.proj;
        let mut out = match y_full.layout() {
            Layout::Plane { cols, .. } => DeviceVec::uninit(
                &p.queue,
                Layout::Plane {
                    rows: angles.len(),
                    cols,
                },
                "a block weight",
            )?,
            _ => self.range_zeros(angles)?,
        };
        self.select_into(y_full, angles, &mut out)?;
        Ok(out)
    }

    fn is_matched(&self) -> bool {
        self.proj.voxel.is_none()
    }

    fn row_sums(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        Ok(self.proj.row_weights(angles, false)?)
    }

    fn column_sums(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        Ok(self.proj.column_weights(angles)?)
    }

    fn row_norms_sq(&self, angles: &[usize]) -> CoreResult<DeviceVec> {
        Ok(self.proj.row_weights(angles, true)?)
    }

    fn ray_batches(&self) -> Option<&dyn RayBatches<DeviceVec, DeviceVec>> {
        // Joseph's rays only (the batches' kernels are Joseph's).
        (!self.proj.is_line_model() && self.proj.voxel.is_none())
            .then_some(self as &dyn RayBatches<DeviceVec, DeviceVec>)
    }
}
