//! Typed errors of the CUDA backend.

use thiserror::Error;
use tomors_core::CoreError;

/// Everything that can go wrong in the CUDA backend.
#[derive(Debug, Error)]
pub enum CudaError {
    /// No usable CUDA driver or device on this machine.
    #[error("no CUDA device available: {0}")]
    Unavailable(String),
    /// A CUDA library (driver, NVRTC, cuFFT) could not be loaded.
    #[error("the CUDA library {0} could not be loaded (is it installed and on the loader path?)")]
    MissingLibrary(&'static str),
    /// A driver call failed.
    #[error("CUDA call {call} failed: {message}")]
    Driver {
        /// The driver function (and what it was doing).
        call: String,
        /// The driver's error name and text.
        message: String,
    },
    /// The device ran out of memory.
    #[error("out of GPU memory while {what} ({bytes} bytes)")]
    OutOfMemory {
        /// What was being allocated.
        what: String,
        /// How many bytes were asked for.
        bytes: usize,
    },
    /// A kernel launch or its execution failed.
    #[error("kernel {kernel} failed ({dims}): {message}")]
    Launch {
        /// Kernel name.
        kernel: String,
        /// Grid, block and problem sizes.
        dims: String,
        /// The driver's error.
        message: String,
    },
    /// Run-time compilation of a kernel failed.
    #[error("NVRTC could not compile {kernel}: {log}")]
    Compile {
        /// Kernel source name.
        kernel: String,
        /// The compiler log.
        log: String,
    },
    /// A cuFFT call failed.
    #[error("cuFFT {call} failed: {message}")]
    Fft {
        /// The cuFFT function.
        call: String,
        /// The status code.
        message: String,
    },
    /// A parameter that the backend cannot handle.
    #[error("invalid parameter: {0}")]
    Parameter(String),
    /// An error of the core library (shapes, geometry).
    #[error(transparent)]
    Core(#[from] CoreError),
}

impl CudaError {
    /// Whether this error is an out-of-memory condition (a smaller slab may succeed).
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, CudaError::OutOfMemory { .. })
            || matches!(self, CudaError::Fft { message, .. } if message.contains("ALLOC_FAILED"))
    }
}

impl From<CudaError> for CoreError {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Core(c) => c,
            other => CoreError::Backend {
                backend: "cuda".into(),
                message: other.to_string(),
            },
        }
    }
}

/// Result alias of the CUDA backend.
pub type Result<T, E = CudaError> = std::result::Result<T, E>;
