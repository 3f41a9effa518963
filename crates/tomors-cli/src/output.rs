//! Writing volumes so that an interrupted or failed run leaves nothing that
//! looks finished: everything is written under a temporary name in the
//! target's directory and renamed when complete.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use tomors_io::VolumeFormat;

/// Checks, before any work, that `path` can be written: its directory
/// exists and it does not exist yet (unless `overwrite`).
pub fn check_target(path: &Path, overwrite: bool) -> Result<()> {
    VolumeFormat::from_path(path)?;
    let parent = parent_dir(path);
    if !parent.is_dir() {
        bail!(
            "{}: directory {} does not exist",
            path.display(),
            parent.display()
        );
    }
    if path.exists() && !overwrite {
        bail!(
            "{}: already exists (use --overwrite to replace it)",
            path.display()
        );
    }
    Ok(())
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The temporary sibling name under which `path` is written.
fn partial_name(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    parent_dir(path).join(format!(".{name}.partial-{}", std::process::id()))
}

fn remove_any(path: &Path) {
    let _ = if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
}

/// Writes any `.npy`-serialisable array atomically (phantom outputs).
pub fn write_npy_atomic<A, D>(path: &Path, array: &ndarray::ArrayBase<A, D>) -> Result<()>
where
    A: ndarray::Data,
    A::Elem: ndarray_npy::WritableElement,
    D: ndarray::Dimension,
{
    let tmp = partial_name(path);
    let result = (|| -> Result<()> {
        let file = fs::File::create(&tmp)?;
        let mut writer = std::io::BufWriter::new(file);
        ndarray_npy::WriteNpyExt::write_npy(array, &mut writer)?;
        std::io::Write::flush(&mut writer)?;
        Ok(())
    })();
    if let Err(err) = result {
        remove_any(&tmp);
        return Err(err.context(format!("{}: cannot write", path.display())));
    }
    fs::rename(&tmp, path).with_context(|| format!("{}: cannot move into place", path.display()))
}
