//! Where each output format keeps the run's recorded configuration (TOML
//! text: the effective options, the tomors version, the inputs' identity),
//! and reading it back (`tomors recon --config-from OUTPUT`).
//!
//! | output | place |
//! |---|---|
//! | HDF5 (`.h5`) | text attribute [`CONFIG_ATTR`] of `/volume` |
//! | NeXus (`.nxs`) | attribute [`CONFIG_ATTR`] of `/entry/data/volume`, and `/entry/reconstruction/configuration/data` (NXnote) |
//! | OME-Zarr (`.zarr`) | `.zattrs` of the root group: `tomors.config` |
//! | TIFF directory | `DIR/tomors.toml` |
//! | `.npy` | the sidecar `X.npy.tomors.toml` beside it (an `.npy` file has no room for metadata) |

use std::path::{Path, PathBuf};

use crate::error::{format_err, os_err, Result};
use crate::output::CONFIG_FILE;
use crate::writer::VolumeFormat;

/// Name of the attribute (HDF5, NeXus) or metadata entry holding the
/// recorded configuration.
pub const CONFIG_ATTR: &str = "tomors_config";

/// The first bytes of every recorded configuration (also what makes an
/// `.npy` sidecar replaceable with `--overwrite`).
pub const CONFIG_HEADER: &str = "# tomors recon configuration";

/// `tomors X.Y.Z`.
pub const TOOL: &str = concat!("tomors ", env!("CARGO_PKG_VERSION"));

/// The sidecar of an `.npy` output: `X.npy.tomors.toml`.
pub fn npy_sidecar(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tomors.toml");
    path.with_file_name(name)
}

/// Reads the configuration recorded in the output `path` (any format tomors
/// writes); the error names the file and what is missing.
pub fn read_config(path: &Path) -> Result<String> {
    if !path.exists() {
        return Err(os_err(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such output"),
        ));
    }
    let missing = || {
        format_err(
            path,
            "holds no recorded tomors configuration (written by an older tomors, or not by tomors)",
        )
    };
    let read_text = |p: &Path| -> Result<String> {
        if !p.is_file() {
            return Err(missing());
        }
        std::fs::read_to_string(p).map_err(|e| os_err(p, e))
    };
    match VolumeFormat::from_path(path)? {
        VolumeFormat::Npy => read_text(&npy_sidecar(path)),
        VolumeFormat::TiffStack(_) => read_text(&path.join(CONFIG_FILE)),
        VolumeFormat::OmeZarr => {
            let p = path.join(".zattrs");
            let text = read_text(&p)?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| format_err(&p, format!("not JSON: {e}")))?;
            json.pointer("/tomors/config")
                .and_then(|v| v.as_str())
                .map(str::to_owned)
                .ok_or_else(missing)
        }
        VolumeFormat::Hdf5 | VolumeFormat::Nexus => {
            let f = crate::hdf5io::open_file(path)?;
            for ds in ["volume", crate::nexus::VOLUME_PATH] {
                if let Ok(d) = f.dataset(ds) {
                    if let Ok(a) = d.attr(CONFIG_ATTR) {
                        let v: hdf5::types::VarLenUnicode = a.read_scalar().map_err(|e| {
                            format_err(path, format!("cannot read {ds}@{CONFIG_ATTR}: {e}"))
                        })?;
                        return Ok(v.as_str().to_owned());
                    }
                }
            }
            Err(missing())
        }
    }
}
