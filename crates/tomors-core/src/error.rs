//! Typed errors of the core library.

use thiserror::Error;

/// Everything that can go wrong inside `tomors-core`.
#[derive(Debug, Error)]
pub enum CoreError {
    /// The acquisition or reconstruction geometry is not usable.
    #[error("invalid geometry: {0}")]
    Geometry(String),
    /// Arrays whose shapes do not fit together (or do not fit the geometry).
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// Data that cannot be reconstructed (empty, non-finite, ...).
    #[error("invalid data: {0}")]
    Data(String),
    /// A parameter outside its allowed range.
    #[error("invalid parameter: {0}")]
    Parameter(String),
    /// The backend does not implement this operation.
    #[error("{backend} backend does not support {operation}")]
    Unsupported {
        /// Name of the backend.
        backend: String,
        /// The operation that was asked for.
        operation: String,
    },
    /// A failure inside a backend (device error, out of memory, ...).
    #[error("{backend} backend: {message}")]
    Backend {
        /// Name of the backend.
        backend: String,
        /// What went wrong.
        message: String,
    },
    /// The caller asked the work to stop.
    #[error("cancelled")]
    Cancelled,
}

/// Result alias of the core library.
pub type Result<T, E = CoreError> = std::result::Result<T, E>;
