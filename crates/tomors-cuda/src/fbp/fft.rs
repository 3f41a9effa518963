//! Batched 1D cuFFT plans (loaded at run time through `cudarc`).

use cudarc::cufft::sys as fft;

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

fn check(r: fft::cufftResult, call: &str) -> Result<()> {
    if r == fft::cufftResult::CUFFT_SUCCESS {
        Ok(())
    } else {
        Err(CudaError::Fft {
            call: call.to_string(),
            message: format!("{r:?}"),
        })
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
        let mut handle = 0;
        // SAFETY: null embeds select the contiguous default layout.
        let r = unsafe {
            fft::cufftPlanMany(
                &mut handle,
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
        };
        if r == fft::cufftResult::CUFFT_ALLOC_FAILED {
            return Err(CudaError::OutOfMemory {
                what: format!("planning {batch} FFTs of length {len}"),
                bytes: 0,
            });
        }
        check(r, &format!("cufftPlanMany({kind:?}, {len}, batch {batch})"))?;
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
        check(
            fft::cufftSetStream(self.handle, stream.raw as fft::cudaStream_t),
            "cufftSetStream",
        )?;
        match self.kind {
            PlanKind::R2C => check(
                fft::cufftExecR2C(
                    self.handle,
                    input as *mut f32,
                    output as *mut fft::cufftComplex,
                ),
                "cufftExecR2C",
            ),
            PlanKind::C2R => check(
                fft::cufftExecC2R(
                    self.handle,
                    input as *mut fft::cufftComplex,
                    output as *mut f32,
                ),
                "cufftExecC2R",
            ),
            PlanKind::C2C => check(
                fft::cufftExecC2C(
                    self.handle,
                    input as *mut fft::cufftComplex,
                    output as *mut fft::cufftComplex,
                    if forward { -1 } else { 1 },
                ),
                "cufftExecC2C",
            ),
        }
    }
}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: created by cufftPlanMany.
        unsafe {
            let _ = fft::cufftDestroy(self.handle);
        }
    }
}
