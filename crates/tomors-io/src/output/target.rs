//! Checks on an output path before anything is written, and what
//! `overwrite` may replace.

use std::path::Path;

use crate::error::{IoError, Result};

/// The marker file in every TIFF-stack directory that tomors writes; only
/// directories that carry it may be replaced with `overwrite`.
pub const MARKER: &str = ".tomors-output";

/// What an output is on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputKind {
    /// A file whose content starts with `magic` (empty: any content).
    File {
        /// The first bytes of a file of this format (`.npy`: `\x93NUMPY`).
        magic: &'static [u8],
    },
    /// A directory of TIFF slices with the [`MARKER`].
    TiffDir,
}

impl OutputKind {
    /// A `.npy` file.
    pub const NPY: Self = Self::File {
        magic: b"\x93NUMPY",
    };
    /// An HDF5 file.
    pub const HDF5: Self = Self::File {
        magic: b"\x89HDF\r\n\x1a\n",
    };
}

pub(crate) fn refused(path: &Path, message: impl std::fmt::Display) -> IoError {
    IoError::Output {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Checks that `path` may be written as an output of `kind`: its directory
/// exists; it is not a symbolic link; it is no input of this process (see
/// [`super::register_input`]) and contains none; and it does not exist,
/// unless `overwrite` is set and it is [replaceable](is_replaceable) (an
/// empty directory is fine for a TIFF stack without `overwrite`).
pub fn check_target(path: &Path, kind: OutputKind, overwrite: bool) -> Result<()> {
    if path.file_name().is_none() {
        return Err(IoError::Parameter(format!(
            "{}: not a file or directory name",
            path.display()
        )));
    }
    let parent = super::staged::parent_dir(path);
    if !parent.is_dir() {
        return Err(refused(
            path,
            format!("the output directory {} does not exist", parent.display()),
        ));
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(crate::error::os_err(path, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(refused(
            path,
            "is a symbolic link; tomors does not write through links (give the path it points to)",
        ));
    }
    if let Some(input) = super::inputs::input_hit(path) {
        let same = input == path.canonicalize().unwrap_or_default()
            || (meta.is_file() && super::inputs::file_id(path) == super::inputs::file_id(&input));
        return Err(if same {
            refused(
                path,
                format!(
                    "is an input of this run ({}); choose another output",
                    input.display()
                ),
            )
        } else {
            refused(
                path,
                format!(
                    "contains the input {} of this run; choose another output",
                    input.display()
                ),
            )
        });
    }
    if kind == OutputKind::TiffDir && meta.is_dir() && is_empty_dir(path) {
        return Ok(());
    }
    if !overwrite {
        return Err(refused(
            path,
            "already exists (use --overwrite to replace it)",
        ));
    }
    is_replaceable(path, kind)
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}

/// Whether an existing `path` is an output tomors may replace: for files, a
/// regular file that is empty or starts with the format's magic bytes; for
/// TIFF stacks, a directory with the [`MARKER`] holding only `slice_*.tif`,
/// `tomors.txt` and the marker. The error says what is in the way.
pub fn is_replaceable(path: &Path, kind: OutputKind) -> Result<()> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| crate::error::os_err(path, e))?;
    let what = if meta.file_type().is_symlink() {
        "a symbolic link"
    } else if meta.is_dir() {
        "a directory"
    } else if meta.is_file() {
        "a file"
    } else {
        "a special file"
    };
    match kind {
        OutputKind::File { magic } => {
            if !meta.is_file() {
                return Err(refused(
                    path,
                    format!("is {what}, not a file tomors wrote; --overwrite does not replace it"),
                ));
            }
            if meta.len() > 0 {
                let mut head = vec![0u8; magic.len()];
                let ok = std::fs::File::open(path)
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head))
                    .is_ok()
                    && head == magic;
                if !ok {
                    return Err(refused(
                        path,
                        "exists and is not in the output's format; --overwrite does not replace it",
                    ));
                }
            }
            Ok(())
        }
        OutputKind::TiffDir => {
            if !meta.is_dir() {
                return Err(refused(
                    path,
                    format!("is {what}, not a TIFF-stack directory tomors wrote; --overwrite does not replace it"),
                ));
            }
            let entries = std::fs::read_dir(path).map_err(|e| crate::error::os_err(path, e))?;
            let mut marker = false;
            for e in entries {
                let e = e.map_err(|e| crate::error::os_err(path, e))?;
                let name = e.file_name().to_string_lossy().into_owned();
                let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false);
                if is_file && name == MARKER {
                    marker = true;
                } else if !(is_file && (name == "tomors.txt" || is_slice_name(&name))) {
                    return Err(refused(
                        path,
                        format!("holds {name}, which tomors did not write; --overwrite replaces only a directory of tomors's TIFF slices"),
                    ));
                }
            }
            if !marker && !is_empty_dir(path) {
                return Err(refused(
                    path,
                    format!("has no {MARKER} marker, so tomors did not write it; --overwrite does not replace it"),
                ));
            }
            Ok(())
        }
    }
}

/// `slice_<digits>.tif`.
fn is_slice_name(name: &str) -> bool {
    name.strip_prefix("slice_")
        .and_then(|s| s.strip_suffix(".tif"))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_names() {
        assert!(is_slice_name("slice_00012.tif"));
        assert!(!is_slice_name("slice_.tif"));
        assert!(!is_slice_name("proj_0001.tif"));
        assert!(!is_slice_name("slice_0001.tiff"));
    }
}
