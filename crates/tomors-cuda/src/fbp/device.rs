//! FBP of data that already lives on the device (CuPy, Numba, PyTorch
//! arrays handed over by pointer): [`CudaBackend::fbp_device`] reads the
//! caller's device memory in place and returns the volume in a new
//! [`DeviceBuffer`], with no host staging of either.

use tomors_core::{FilterSpec, Interpolation, ParallelGeometry, SliceGrid};

use crate::error::{CudaError, Result};
use crate::fbp::backend::CudaBackend;
use crate::fbp::engine::{BpJob, FilterJob};
use crate::runtime::{DeviceBuffer, ForeignDevicePtr};

pub use crate::fbp::engine::DeviceOrder;

impl CudaBackend {
    /// Filtered back projection of `slices` slices held in device memory
    /// `input` (laid out as `order`: sinograms `[slice][angle][bin]` or
    /// projections `[angle][slice][bin]`) into a new device buffer of
    /// `slices × grid.ny × grid.nx` floats (`[slice][y][x]`), equal to
    /// [`Backend::fbp`](tomors_core::Backend::fbp) on the same data.
    /// `filter = None` back-projects without filtering (scale 1).
    ///
    /// Work runs on this backend's streams and has completed when the call
    /// returns; the caller orders it after the producer of `input` (e.g.
    /// with [`wait_foreign_stream`](crate::runtime::wait_foreign_stream)).
    ///
    /// Errors: `input` on another device or of the wrong size, bad shapes
    /// or filter, cuFFT missing, driver errors.
    #[allow(clippy::too_many_arguments)]
    pub fn fbp_device(
        &self,
        input: &ForeignDevicePtr,
        order: DeviceOrder,
        slices: usize,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        filter: Option<&FilterSpec>,
        interpolation: Interpolation,
    ) -> Result<DeviceBuffer> {
        let na = geometry.n_angles();
        let n = geometry.n_bins();
        let want = slices * na * n * 4;
        if input.bytes() != want {
            return Err(CudaError::Parameter(format!(
                "device input of {} bytes for {slices} slices of {na} angles × {n} bins ({want} bytes)",
                input.bytes()
            )));
        }
        if let Some(f) = filter {
            f.validate()?;
        }
        tomors_core::backend::check_backprojection_shapes(
            (slices, na, n),
            (slices, grid.ny, grid.nx),
            geometry,
            grid,
        )?;
        let cfg = self.kernel_for_job(slices, interpolation, geometry, grid);
        cfg.check(interpolation)?;
        let mut engine = self.lock()?;
        if input.ordinal() != engine.ctx.ordinal {
            return Err(CudaError::Parameter(format!(
                "the input lives on device {} but this backend runs on device {}",
                input.ordinal(),
                engine.ctx.ordinal
            )));
        }
        let out = DeviceBuffer::new(
            &engine.ctx,
            slices * grid.ny * grid.nx * 4,
            "the reconstructed volume",
        )?;
        if slices == 0 {
            return Ok(out);
        }
        let job = BpJob {
            geom: geometry,
            grid,
            interp: interpolation,
            scale: if filter.is_some() {
                geometry.fbp_weight()
            } else {
                1.0
            },
            cfg,
        };
        let fj = filter.map(|f| FilterJob {
            spec: *f,
            bin_width: geometry.bin_width(),
        });
        // SAFETY: `input` holds slices × na × n floats on this device
        // (checked above; alive by `ForeignDevicePtr`'s contract), `out`
        // slices × ny × nx.
        unsafe { engine.run_device(input.ptr(), order, slices, out.ptr(), fj, &job)? };
        Ok(out)
    }
}
