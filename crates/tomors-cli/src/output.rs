//! Writing outputs through the safe writers of `tomors-io`
//! ([`tomors_io::output`]): a temporary name unique to the run, renamed when
//! complete; never over an output that appeared meanwhile, an input, a
//! link, or anything tomors did not write.

use std::path::Path;

use anyhow::Result;
use tomors_io::output::OutputKind;
use tomors_io::VolumeFormat;

/// Checks, before any work, that `path` can be written as a volume: its
/// directory exists, it is no link and no input, and it does not exist yet
/// (with `overwrite`: it is an output tomors wrote).
pub fn check_target(path: &Path, overwrite: bool) -> Result<()> {
    let format = VolumeFormat::from_path(path)?;
    tomors_io::output::check_target(path, format.output_kind(), overwrite)?;
    Ok(())
}

/// Checks, before any work, that the `.npy` file `path` can be written.
pub fn check_npy_target(path: &Path, overwrite: bool) -> Result<()> {
    tomors_io::output::check_target(path, OutputKind::NPY, overwrite)?;
    Ok(())
}

/// Writes any `.npy`-serialisable array safely (phantom outputs).
pub fn write_npy_atomic<A, D>(
    path: &Path,
    array: &ndarray::ArrayBase<A, D>,
    overwrite: bool,
) -> Result<()>
where
    A: ndarray::Data,
    A::Elem: ndarray_npy::WritableElement,
    D: ndarray::Dimension,
{
    tomors_io::output::write_npy_array(path, array, overwrite)?;
    Ok(())
}
