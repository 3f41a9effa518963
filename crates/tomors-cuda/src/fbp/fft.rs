//! Batched 1D cuFFT plans (loaded at run time through `cudarc`; cudarc 0.18
//! has no safe cuFFT wrapper, so this uses its checked `result` layer).

use cudarc::cufft::{result as cufft, sys as fft};

use crate::error::{CudaError, Result};
use crate::runtime::Stream;

/// How detector rows are transformed for filtering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FftVariant {
    /// Batched real-to-complex / complex-to-real transforms of single rows.
    RealToComplex,
    /// Two real rows packed into one complex row (real and imaginary parts),
    /// complex-to-complex transforms; the filter response is real and even,
    /// so the two rows stay separated (the seeds' trick).
    #[default]
    ComplexPair,
}

impl std::str::FromStr for FftVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "r2c" | "real" => Ok(Self::RealToComplex),
            "pair" | "c2c" | "complex-pair" => Ok(Self::ComplexPair),
            _ => Err(format!("unknown FFT variant '{s}' (use r2c or pair)")),
        }
    }
}

impl std::fmt::Display for FftVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::RealToComplex => "r2c",
            Self::ComplexPair => "pair",
        })
    }
}

/// Whether the cuFFT library can be loaded.
pub fn cufft_available() -> bool {
    // SAFETY: only tries to open the library.
    unsafe { fft::is_culib_present() }
}

/// Turns an error of cudarc's cuFFT layer into a [`CudaError`] naming `call`.
fn fft_error(call: &str) -> impl FnOnce(cufft::CufftError) -> CudaError + '_ {
    move |e| {
        if e.0 == fft::cufftResult::CUFFT_ALLOC_FAILED {
            CudaError::OutOfMemory {
                what: call.to_string(),
                bytes: 0,
            }
        } else {
            CudaError::Fft {
                call: call.to_string(),
                message: format!("{:?}", e.0),
            }
        }
    }
}

/// Kind of a planned transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PlanKind {
    /// Real to half-complex, forward.
    R2C,
    /// Half-complex to real, inverse.
    C2R,
    /// Complex to complex (either direction).
    C2C,
}

/// A batched 1D plan (destroyed on drop; the context must be current).
pub struct Plan {
    handle: fft::cufftHandle,
    kind: PlanKind,
}

// SAFETY: a plan handle is an integer owned by this value.
unsafe impl Send for Plan {}

impl Plan {
    /// Plans `batch` contiguous transforms of length `len`.
    pub fn new(kind: PlanKind, len: usize, batch: usize) -> Result<Self> {
        if !cufft_available() {
            return Err(CudaError::MissingLibrary("cuFFT (libcufft.so)"));
        }
        let ty = match kind {
            PlanKind::R2C => fft::cufftType::CUFFT_R2C,
            PlanKind::C2R => fft::cufftType::CUFFT_C2R,
            PlanKind::C2C => fft::cufftType::CUFFT_C2C,
        };
        let mut n = [len as i32];
        // SAFETY: null embeds select the contiguous default layout.
        let handle = unsafe {
            cufft::plan_many(
                1,
                n.as_mut_ptr(),
                std::ptr::null_mut(),
                1,
                0,
                std::ptr::null_mut(),
                1,
                0,
                ty,
                batch as i32,
            )
        }
        .map_err(fft_error(&format!(
            "planning {batch} FFTs of length {len} (cufftPlanMany {kind:?})"
        )))?;
        Ok(Self { handle, kind })
    }

    /// Executes the plan on `stream` (in place when `input == output`).
    ///
    /// # Safety
    /// The device pointers must hold the planned batch in the planned layout.
    pub unsafe fn exec(
        &self,
        input: u64,
        output: u64,
        forward: bool,
        stream: &Stream,
    ) -> Result<()> {
        cufft::set_stream(self.handle, stream.raw() as fft::cudaStream_t)
            .map_err(fft_error("cufftSetStream"))?;
        match self.kind {
            PlanKind::R2C => cufft::exec_r2c(
                self.handle,
                input as *mut f32,
                output as *mut fft::cufftComplex,
            )
            .map_err(fft_error("cufftExecR2C")),
            PlanKind::C2R => cufft::exec_c2r(
                self.handle,
                input as *mut fft::cufftComplex,
                output as *mut f32,
            )
            .map_err(fft_error("cufftExecC2R")),
            PlanKind::C2C => cufft::exec_c2c(
                self.handle,
                input as *mut fft::cufftComplex,
                output as *mut fft::cufftComplex,
                if forward { -1 } else { 1 },
            )
            .map_err(fft_error("cufftExecC2C")),
        }
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by cufftPlanMany.
        unsafe {
            let _ = cufft::destroy(self.handle);
        }
    }
}
