//! Batched cuFFT plans for the gridding method: 1D over projections and 2D
//! over grids (cudarc's checked `result` layer; it has no safe cuFFT API).

use cudarc::cufft::{result as cufft, sys as fft};

use crate::error::{CudaError, Result};
use crate::runtime::Stream;

fn fft_error(call: String) -> impl FnOnce(cufft::CufftError) -> CudaError {
    move |e| {
        if e.0 == fft::cufftResult::CUFFT_ALLOC_FAILED {
            CudaError::OutOfMemory {
                what: call,
                bytes: 0,
            }
        } else {
            CudaError::Fft {
                call,
                message: format!("{:?}", e.0),
            }
        }
    }
}

/// A batched complex-to-complex plan of rank 1 or 2 (destroyed on drop).
pub(crate) struct C2cPlan {
    handle: fft::cufftHandle,
}

// SAFETY: a plan handle is an integer owned by this value.
unsafe impl Send for C2cPlan {}

impl C2cPlan {
    /// `batch` contiguous transforms of shape `dims` (1 or 2 sizes, C order).
    pub fn new(dims: &[usize], batch: usize) -> Result<Self> {
        // SAFETY: only tries to open the library.
        if !unsafe { fft::is_culib_present() } {
            return Err(CudaError::MissingLibrary("cuFFT (libcufft.so)"));
        }
        let mut n: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
        // SAFETY: null embeds select the contiguous default layout.
        let handle = unsafe {
            cufft::plan_many(
                n.len() as i32,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                0,
                std::ptr::null_mut(),
                1,
                0,
                fft::cufftType::CUFFT_C2C,
                batch as i32,
            )
        }
        .map_err(fft_error(format!(
            "planning {batch} C2C FFTs of shape {dims:?} (cufftPlanMany)"
        )))?;
        Ok(Self { handle })
    }

    /// In-place transform of the batch at `data` on `stream`.
    ///
    /// # Safety
    /// `data` must hold the planned batch of complex values.
    pub unsafe fn exec(&self, data: u64, forward: bool, stream: &Stream) -> Result<()> {
        cufft::set_stream(self.handle, stream.raw() as fft::cudaStream_t)
            .map_err(fft_error("cufftSetStream".into()))?;
        cufft::exec_c2c(
            self.handle,
            data as *mut fft::cufftComplex,
            data as *mut fft::cufftComplex,
            if forward { -1 } else { 1 },
        )
        .map_err(fft_error("cufftExecC2C".into()))
    }
}

impl Drop for C2cPlan {
    fn drop(&mut self) {
        // SAFETY: created by cufftPlanMany.
        unsafe {
            let _ = cufft::destroy(self.handle);
        }
    }
}
