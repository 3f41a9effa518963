//! Typed errors of `tomors-io`.
//!
//! Every error that concerns a file names the file first and then says what
//! is wrong, on one line (`path: what is wrong`), so that the command-line
//! tool can print it as it is.

use std::path::{Path, PathBuf};

use thiserror::Error;
use tomors_core::CoreError;

/// Everything that can go wrong while reading, preprocessing or writing.
#[derive(Debug, Error)]
pub enum IoError {
    /// The operating system refused an operation on a file.
    #[error("{}: {error}", path.display())]
    Os {
        /// The file.
        path: PathBuf,
        /// The operating-system error (not chained as a `source`, so that
        /// error reporters that print chains do not repeat it).
        error: std::io::Error,
    },
    /// The file is not in the format it claims to be in (truncated, corrupt,
    /// missing datasets, ...).
    #[error("{}: {message}", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong, one line.
        message: String,
    },
    /// Arrays of one data set whose shapes do not fit together (projections,
    /// flats, darks, angles).
    #[error("{}: shape mismatch: {message}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What does not fit, one line.
        message: String,
    },
    /// Valid data that tomors cannot handle (data type, layout, ...).
    #[error("{}: unsupported: {message}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported, one line.
        message: String,
    },
    /// An HDF5 dataset is compressed with a filter the HDF5 library cannot
    /// load (LZ4, bitshuffle, Blosc, ... need plugins found through
    /// `HDF5_PLUGIN_PATH`).
    #[error(
        "{}: dataset {dataset} needs the HDF5 filter '{filter}' (id {id}), which is not available; \
         install its plugin and point HDF5_PLUGIN_PATH to it",
        path.display()
    )]
    MissingFilter {
        /// The file.
        path: PathBuf,
        /// The dataset path inside the file.
        dataset: String,
        /// The filter's name.
        filter: String,
        /// The registered HDF5 filter id.
        id: i32,
    },
    /// An output that may not be written (it exists, it is an input, it is
    /// a link, it appeared meanwhile, ...).
    #[error("{}: {message}", path.display())]
    Output {
        /// The output.
        path: PathBuf,
        /// Why it is refused, one line.
        message: String,
    },
    /// A parameter outside its allowed range.
    #[error("invalid parameter: {0}")]
    Parameter(String),
    /// An error of the core library (geometry, reconstruction).
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Result alias of `tomors-io`.
pub type Result<T, E = IoError> = std::result::Result<T, E>;

/// Makes a message one line (HDF5 and decoders sometimes return several).
pub(crate) fn one_line(s: impl std::fmt::Display) -> String {
    let s = s.to_string();
    let mut out = String::with_capacity(s.len());
    for (i, part) in s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .enumerate()
    {
        if i > 0 {
            out.push_str("; ");
        }
        out.push_str(part);
    }
    out
}

pub(crate) fn os_err(path: &Path, error: std::io::Error) -> IoError {
    IoError::Os {
        path: path.to_path_buf(),
        error,
    }
}

pub(crate) fn format_err(path: &Path, message: impl std::fmt::Display) -> IoError {
    IoError::Format {
        path: path.to_path_buf(),
        message: one_line(message),
    }
}

pub(crate) fn shape_err(path: &Path, message: impl std::fmt::Display) -> IoError {
    IoError::Shape {
        path: path.to_path_buf(),
        message: one_line(message),
    }
}

pub(crate) fn unsupported(path: &Path, message: impl std::fmt::Display) -> IoError {
    IoError::Unsupported {
        path: path.to_path_buf(),
        message: one_line(message),
    }
}
