//! The output part of a job, and the one place where `recon` calls the
//! volume writers (today `crate::output` and `tomors_io::writer`): every
//! method writes through [`create`] or [`write`].

use std::path::PathBuf;

use anyhow::{bail, Result};
use ndarray::ArrayView3;
use tomors_io::tiffio::TiffDepth;
use tomors_io::{Compression, VolumeFormat, VolumeMeta, VolumeWriter, WriteOptions};

/// Where and how the volume is written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutputSpec {
    /// `--out`: `.npy`, `.h5`, or a directory of TIFF slices.
    pub path: PathBuf,
    /// `--overwrite`.
    pub overwrite: bool,
    /// `--tiff-bits` (TIFF-stack output only; default 32).
    pub tiff_bits: Option<u32>,
    /// `--tiff-range lo:hi` (16/8-bit TIFF output only).
    pub tiff_range: Option<(f32, f32)>,
    /// `--compression` (HDF5 and NeXus outputs only; default none).
    pub compression: Option<Compression>,
    /// The run's effective configuration as TOML, recorded in the output
    /// (see [`crate::config::record`]).
    pub provenance: Option<String>,
}

impl OutputSpec {
    /// The format `--out` and the TIFF flags ask for, refusing TIFF flags
    /// that would not be used.
    pub fn format(&self) -> Result<VolumeFormat> {
        let format = VolumeFormat::from_path(&self.path)?;
        if let Some(c) = self.compression {
            if !matches!(format, VolumeFormat::Hdf5 | VolumeFormat::Nexus) {
                bail!("--compression {c} applies to HDF5 and NeXus outputs (.h5, .nxs) only");
            }
        }
        let is_tiff = matches!(format, VolumeFormat::TiffStack(_));
        if let Some(b) = self.tiff_bits {
            if !is_tiff {
                bail!("--tiff-bits {b} applies to TIFF-stack outputs only");
            }
        }
        let bits = self.tiff_bits.unwrap_or(32);
        if self.tiff_range.is_some() && !(is_tiff && matches!(bits, 16 | 8)) {
            bail!("--tiff-range applies to 16- and 8-bit TIFF-stack outputs only (--tiff-bits 16 or 8)");
        }
        let range = || match self.tiff_range {
            Some(r) => Ok(r),
            None => bail!("--tiff-bits {bits} needs --tiff-range lo:hi"),
        };
        Ok(match (format, bits) {
            (VolumeFormat::TiffStack(_), 32) => VolumeFormat::TiffStack(TiffDepth::F32),
            (VolumeFormat::TiffStack(_), 16) => {
                let (lo, hi) = range()?;
                VolumeFormat::TiffStack(TiffDepth::U16 { lo, hi })
            }
            (VolumeFormat::TiffStack(_), 8) => {
                let (lo, hi) = range()?;
                VolumeFormat::TiffStack(TiffDepth::U8 { lo, hi })
            }
            (VolumeFormat::TiffStack(_), b) => bail!("--tiff-bits {b}: use 32, 16 or 8"),
            (f, _) => f,
        })
    }

    /// Checks, before any work, that the output can be written (directory
    /// exists, nothing there unless `--overwrite`), and returns its format.
    pub fn check(&self) -> Result<VolumeFormat> {
        crate::output::check_target(&self.path, self.overwrite)?;
        self.format()
    }
}

/// Opens the writer of a `[z, y, x]` volume, written slab by slab.
pub fn create(
    out: &OutputSpec,
    format: VolumeFormat,
    shape: [usize; 3],
    meta: &VolumeMeta,
) -> Result<Box<dyn VolumeWriter>> {
    crate::output::check_target(&out.path, out.overwrite)?;
    let mut meta = meta.clone();
    if let Some(p) = &out.provenance {
        meta = meta.text(tomors_io::provenance::CONFIG_ATTR, p);
    }
    let options = WriteOptions {
        overwrite: out.overwrite,
        compression: out.compression.unwrap_or_default(),
    };
    Ok(tomors_io::create_writer_opts(
        &out.path, format, shape, &meta, &options,
    )?)
}

/// Writes a whole volume `[z][y][x]`.
pub fn write(
    out: &OutputSpec,
    format: VolumeFormat,
    volume: ArrayView3<'_, f32>,
    meta: &VolumeMeta,
) -> Result<()> {
    let (z, y, x) = volume.dim();
    let mut writer = create(out, format, [z, y, x], meta)?;
    writer.write_slab(0, volume)?;
    writer.finish()?;
    Ok(())
}

/// Writes a whole cone-beam volume `[z][y][x]` of voxels of `voxel_size`
/// and says so on standard output.
pub fn write_cone(
    out: &OutputSpec,
    format: VolumeFormat,
    volume: ArrayView3<'_, f32>,
    meta: &VolumeMeta,
    voxel_size: f32,
) -> Result<()> {
    write(out, format, volume, meta)?;
    println!(
        "wrote {} ([z][y][x] = {:?}, voxel size {voxel_size})",
        out.path.display(),
        volume.dim(),
    );
    Ok(())
}

/// The attributes every output carries: the software, the input file and
/// its reader, and the method (`method`).
pub fn base_meta(scan: &super::input::Scan, method: &str) -> VolumeMeta {
    let meta = VolumeMeta::default()
        .text("software", concat!("tomors ", env!("CARGO_PKG_VERSION")))
        .text("input", &scan.path().display().to_string())
        .text("reader", scan.source.format())
        .text("method", method)
        .text("preprocess", &format!("{:?}", scan.pre));
    match &scan.half {
        None => meta,
        Some(h) => meta
            .float("half_acquisition_axis", h.axis)
            .text(
                "half_acquisition",
                &format!(
                    "360° scan, axis {:.3} ({}) of {} columns, overlap {:.1} px, stitched to {} columns",
                    h.axis,
                    if h.found { "found" } else { "given" },
                    h.n_cols,
                    h.overlap,
                    h.width
                ),
            ),
    }
}
