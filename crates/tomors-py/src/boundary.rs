//! The boundary between Python and the library: errors become Python
//! exceptions with the library's one-line messages, panics are caught, the
//! GIL is released while the library computes, and progress callbacks are
//! called back with the GIL held.
//!
//! Exception classes: `ValueError` for bad shapes, data, parameters and
//! names; `FileNotFoundError` / `PermissionError` / `OSError` for files;
//! `RuntimeError` for GPU and backend failures and for caught panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use tomors_core::CoreError;
use tomors_cuda::CudaError;
use tomors_io::IoError;

/// An error of any layer of the library, kept typed until it reaches Python.
#[derive(Debug)]
pub enum Error {
    /// From `tomors-core`.
    Core(CoreError),
    /// From `tomors-io`.
    Io(IoError),
    /// From `tomors-cuda`.
    Cuda(CudaError),
    /// A bad argument found by the bindings themselves.
    Value(String),
    /// A failure found by the bindings themselves (GPU selection, ...).
    Runtime(String),
    /// A Python exception raised by a callback (re-raised as it is).
    Python(PyErr),
}

impl From<CoreError> for Error {
    fn from(e: CoreError) -> Self {
        Self::Core(e)
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        match e {
            IoError::Core(c) => Self::Core(c),
            other => Self::Io(other),
        }
    }
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        match e {
            CudaError::Core(c) => Self::Core(c),
            other => Self::Cuda(other),
        }
    }
}

impl From<PyErr> for Error {
    fn from(e: PyErr) -> Self {
        Self::Python(e)
    }
}

/// Result alias of the bindings' Rust side.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A `ValueError`-class error with `msg`.
pub fn value(msg: impl Into<String>) -> Error {
    Error::Value(msg.into())
}

fn core_to_py(e: CoreError) -> PyErr {
    let msg = e.to_string();
    match e {
        CoreError::Backend { .. } => PyRuntimeError::new_err(msg),
        CoreError::Cancelled => PyRuntimeError::new_err("cancelled"),
        _ => PyValueError::new_err(msg),
    }
}

fn io_to_py(e: IoError) -> PyErr {
    let msg = e.to_string();
    match e {
        IoError::Os { error, .. } => match error.kind() {
            std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
            _ => PyOSError::new_err(msg),
        },
        IoError::Parameter(_) => PyValueError::new_err(msg),
        IoError::Core(c) => core_to_py(c),
        // Format, Shape, Unsupported, MissingFilter: the file is not what it
        // should be.
        _ => PyOSError::new_err(msg),
    }
}

fn cuda_to_py(e: CudaError) -> PyErr {
    let msg = e.to_string();
    match e {
        CudaError::Parameter(_) => PyValueError::new_err(msg),
        CudaError::Core(c) => core_to_py(c),
        _ => PyRuntimeError::new_err(msg),
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> Self {
        match e {
            Error::Core(c) => core_to_py(c),
            Error::Io(i) => io_to_py(i),
            Error::Cuda(c) => cuda_to_py(c),
            Error::Value(m) => PyValueError::new_err(m),
            Error::Runtime(m) => PyRuntimeError::new_err(m),
            Error::Python(p) => p,
        }
    }
}

/// Runs `work` without the GIL, catching panics (a `RuntimeError` naming
/// the panic instead of an aborted interpreter), and converts its error.
pub fn compute<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    // The caller's current CUDA context (CuPy's or PyTorch's device) is
    // current again when the call returns, whichever devices it used.
    let _current = tomors_cuda::keep_current_context();
    let outcome = py.detach(|| catch_unwind(AssertUnwindSafe(work)));
    match outcome {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.into()),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            Err(PyRuntimeError::new_err(format!(
                "internal error in tomors (please report): {what}"
            )))
        }
    }
}

/// Progress reporting from code that runs without the GIL: calls the
/// Python callback `(done, total)` with the GIL held and checks for signals
/// (Ctrl-C), so long calls stay interruptible. An exception raised by the
/// callback or a signal handler stops the work and is re-raised by
/// [`Progress::finish`].
pub struct Progress {
    callback: Option<Py<PyAny>>,
    error: Mutex<Option<PyErr>>,
}

impl Progress {
    /// Progress reporting to `callback` (signals are checked even without one).
    pub fn new(callback: Option<Py<PyAny>>) -> Self {
        Self {
            callback,
            error: Mutex::new(None),
        }
    }

    /// Reports `done` of `total`; `false` when the work must stop.
    pub fn report(&self, done: usize, total: usize) -> bool {
        if self.error.lock().map(|e| e.is_some()).unwrap_or(true) {
            return false;
        }
        let result = Python::attach(|py| -> PyResult<()> {
            py.check_signals()?;
            if let Some(cb) = &self.callback {
                cb.call1(py, (done, total))?;
            }
            Ok(())
        });
        match result {
            Ok(()) => true,
            Err(e) => {
                if let Ok(mut slot) = self.error.lock() {
                    slot.get_or_insert(e);
                }
                false
            }
        }
    }

    /// The outcome of the work: the callback's exception if one stopped it,
    /// else `result` unchanged.
    pub fn finish<T>(&self, result: Result<T>) -> Result<T> {
        if let Some(e) = self.error.lock().ok().and_then(|mut e| e.take()) {
            return Err(Error::Python(e));
        }
        result
    }
}

/// Total physical memory in bytes (Linux: `/proc/meminfo`), if known.
fn physical_memory() -> Option<u128> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses an array of `dims` float32 values that could never be allocated
/// (more bytes than the machine has memory, or an overflowing size): an
/// allocation failure would abort the interpreter, a `ValueError` does not.
pub fn check_size(what: &str, dims: &[usize]) -> Result<()> {
    let bytes = dims
        .iter()
        .try_fold(4u128, |acc, &d| acc.checked_mul(d as u128));
    let limit = physical_memory().unwrap_or(isize::MAX as u128);
    match bytes {
        Some(b) if b <= limit && b <= isize::MAX as u128 => Ok(()),
        _ => {
            Err(value(format!(
            "{what} of shape {dims:?} would need {} GiB, more than this machine's {} GiB of memory",
            bytes.map_or("too many".to_string(), |b| format!("{:.1}", b as f64 / 1073741824.0)),
            limit / 1073741824
        )))
        }
    }
}
