//! Writing outputs through the safe writers of `tomors-io`
//! ([`tomors_io::output`]): a temporary name unique to the run, renamed when
//! complete; never over an output that appeared meanwhile, an input, a
//! link, or anything tomors did not write.

use std::path::Path;

use anyhow::Result;
use ndarray::ArrayView3;
use tomors_io::output::OutputKind;
use tomors_io::writer::create_writer_with;
use tomors_io::{VolumeFormat, VolumeMeta};

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

/// Writes `volume` (`[z][y][x]`) to `path` in the format its name implies
/// (`.npy`, `.h5`, or a directory of float32 TIFF slices), through the
/// safe writers of `tomors-io`.
pub fn write_volume(path: &Path, volume: ArrayView3<'_, f32>, overwrite: bool) -> Result<()> {
    check_target(path, overwrite)?;
    let format = VolumeFormat::from_path(path)?;
    let (z, y, x) = volume.dim();
    let mut writer =
        create_writer_with(path, format, [z, y, x], &VolumeMeta::default(), overwrite)?;
    writer.write_slab(0, volume)?;
    writer.finish()?;
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
