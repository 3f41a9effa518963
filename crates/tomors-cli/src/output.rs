//! Writing volumes so that an interrupted or failed run leaves nothing that
//! looks finished: everything is written under a temporary name in the
//! target's directory and renamed when complete.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use ndarray::{ArrayView3, Axis};

/// The format a volume is written in, chosen by the output path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeFormat {
    /// One `.npy` file `[z][y][x]` float32.
    Npy,
    /// A directory of float32 TIFF files, one per slice.
    TiffStack,
}

impl VolumeFormat {
    /// `.npy` → Npy; anything else is a directory for a TIFF stack.
    pub fn for_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("npy") => Self::Npy,
            _ => Self::TiffStack,
        }
    }
}

/// Checks, before any work, that `path` can be written: its directory
/// exists and it does not exist yet (unless `overwrite`).
pub fn check_target(path: &Path, overwrite: bool) -> Result<()> {
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

/// Writes `volume` (`[z][y][x]`) to `path` in the format its name implies.
pub fn write_volume(path: &Path, volume: ArrayView3<'_, f32>, overwrite: bool) -> Result<()> {
    check_target(path, overwrite)?;
    let tmp = partial_name(path);
    let written = match VolumeFormat::for_path(path) {
        VolumeFormat::Npy => write_npy(&tmp, volume),
        VolumeFormat::TiffStack => write_tiff_stack(&tmp, volume),
    };
    if let Err(err) = written {
        remove_any(&tmp);
        return Err(err.context(format!("{}: cannot write", path.display())));
    }
    if overwrite && path.exists() {
        remove_any(path);
    }
    fs::rename(&tmp, path).with_context(|| format!("{}: cannot move into place", path.display()))
}

fn remove_any(path: &Path) {
    let _ = if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
}

fn write_npy(path: &Path, volume: ArrayView3<'_, f32>) -> Result<()> {
    let file = fs::File::create(path)?;
    let mut writer = std::io::BufWriter::new(file);
    ndarray_npy::WriteNpyExt::write_npy(&volume.as_standard_layout(), &mut writer)?;
    std::io::Write::flush(&mut writer)?;
    Ok(())
}

fn write_tiff_stack(dir: &Path, volume: ArrayView3<'_, f32>) -> Result<()> {
    fs::create_dir(dir)?;
    let digits = (volume.len_of(Axis(0)).max(1) as f64).log10().floor() as usize + 1;
    let digits = digits.max(5);
    for (z, slice) in volume.axis_iter(Axis(0)).enumerate() {
        let file = fs::File::create(dir.join(format!("slice_{z:0digits$}.tif")))?;
        let mut encoder = tiff::encoder::TiffEncoder::new(std::io::BufWriter::new(file))?;
        let data: Vec<f32> = slice.iter().copied().collect();
        encoder.write_image::<tiff::encoder::colortype::Gray32Float>(
            slice.ncols() as u32,
            slice.nrows() as u32,
            &data,
        )?;
    }
    Ok(())
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
