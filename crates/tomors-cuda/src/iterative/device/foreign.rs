//! Flat [`DeviceVec`]s to and from device memory owned by someone else (a
//! [`ForeignDevicePtr`]: a CuPy, Numba or PyTorch array), copied on the
//! device with no trip through host memory.

use super::*;
use crate::runtime::ForeignDevicePtr;

impl DeviceVec {
    /// A new flat vector of shape `dim` holding a copy of the C-contiguous
    /// float32 array at `src` (a device-to-device copy on `queue`'s
    /// stream; waits for it, so `src` is no longer read on return).
    ///
    /// Errors: `src` on another device than `queue`'s or of another size
    /// than `dim`, driver errors.
    pub fn flat_from_device(
        queue: &Arc<Queue>,
        src: &ForeignDevicePtr,
        dim: (usize, usize, usize),
        what: &str,
    ) -> Result<Self> {
        check_foreign(queue, src, dim.0 * dim.1 * dim.2, what)?;
        let v = Self::uninit(queue, Layout::Flat(dim), what)?;
        let n = v.layout.stored_len();
        if n > 0 {
            let args = [v.buf.ptr().into(), src.ptr().into(), (n as i64).into()];
            // SAFETY: the parameters of `dv_copy` (`kernels/linalg.cu`);
            // `v` holds n floats, `src` n floats (checked above).
            unsafe {
                queue.launch(
                    KernelKind::Elementwise,
                    &queue.f.copy,
                    "dv_copy",
                    Queue::grid(n),
                    (THREADS, 1, 1),
                    &args,
                )?;
            }
        }
        queue.stream.synchronize()?;
        Ok(v)
    }

    /// The buffer of a flat vector or a plane (C order of
    /// [`DeviceVec::dim`]), after the queue's work on it has completed.
    ///
    /// Errors: an interleaved stack (its operator de-interleaves it),
    /// driver errors.
    pub fn into_flat_buffer(self) -> Result<DeviceBuffer> {
        if matches!(self.layout, Layout::Stack { .. }) {
            return Err(CudaError::Parameter(
                "an interleaved stack is de-interleaved by its operator".into(),
            ));
        }
        self.queue.stream.synchronize()?;
        Ok(self.buf)
    }
}

/// Checks that `src` holds `len` floats on `queue`'s device.
pub(crate) fn check_foreign(
    queue: &Queue,
    src: &ForeignDevicePtr,
    len: usize,
    what: &str,
) -> Result<()> {
    if src.ordinal() != queue.ctx.ordinal {
        return Err(CudaError::Parameter(format!(
            "{what} lives on device {} but the operator runs on device {}",
            src.ordinal(),
            queue.ctx.ordinal
        )));
    }
    if src.bytes() != len * 4 {
        return Err(CoreError::Shape(format!(
            "{what}: {} bytes of device memory for {len} floats",
            src.bytes()
        ))
        .into());
    }
    Ok(())
}
