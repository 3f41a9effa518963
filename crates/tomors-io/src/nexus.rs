//! NeXus volume output (`.nxs`): an HDF5 file that NeXus readers (h5py,
//! silx, NeXpy, DAWN) open as a plottable volume.
//!
//! ```text
//! /                      default = "entry"
//! /entry                 NX_class = NXentry, default = "data"
//! /entry/data            NX_class = NXdata, signal = "volume",
//!                        axes = ["z", "y", "x"], z_indices = 0, …
//! /entry/data/volume     float32 [z][y][x], chunked by slice, optional
//!                        compression; the run's attributes
//! /entry/data/z, y, x    voxel centres (index × voxel size), `units`
//! /entry/reconstruction  NX_class = NXprocess: program, version, and
//!                        configuration (NXnote, TOML text) when recorded
//! ```

use std::path::Path;

use ndarray::Array1;

use crate::error::{format_err, Result};
use crate::output::{OutputKind, StagedFile};
use crate::writer::{
    h5w, limit_hdf5_free_lists, volume_dataset, write_attrs, AttrValue, Hdf5Writer, VolumeMeta,
    WriteOptions,
};

/// Path of the volume dataset inside a NeXus output.
pub const VOLUME_PATH: &str = "entry/data/volume";

/// NeXus writer: lays out the NeXus groups, then the volume is written slab
/// by slab into [`VOLUME_PATH`] by the HDF5 volume writer; the file appears
/// under its name when complete.
pub struct NexusWriter;

fn text(v: &str) -> AttrValue {
    AttrValue::Text(v.into())
}

fn str_array_attr(loc: &hdf5::Location, name: &str, values: &[&str]) -> hdf5::Result<()> {
    let v: Vec<hdf5::types::VarLenUnicode> = values
        .iter()
        .map(|s| s.parse().expect("axis names hold no NUL"))
        .collect();
    loc.new_attr::<hdf5::types::VarLenUnicode>()
        .shape(v.len())
        .create(name)?
        .write(&v)
}

fn string_dataset(group: &hdf5::Group, name: &str, value: &str, tmp: &Path) -> Result<()> {
    let v: hdf5::types::VarLenUnicode = value
        .parse()
        .map_err(|_| format_err(tmp, format!("{name}: text with a NUL")))?;
    group
        .new_dataset::<hdf5::types::VarLenUnicode>()
        .create(name)
        .and_then(|d| d.write_scalar(&v))
        .map_err(|e| h5w(tmp, e))
}

impl NexusWriter {
    /// Starts writing `path` (under its temporary name).
    pub fn create(
        path: &Path,
        shape: [usize; 3],
        meta: &VolumeMeta,
        options: &WriteOptions,
    ) -> Result<Hdf5Writer> {
        let (stage, file) = StagedFile::create(path, OutputKind::HDF5, options.overwrite)?;
        drop(file);
        let tmp = stage.path().to_path_buf();
        limit_hdf5_free_lists();
        let h5 = |e| h5w(&tmp, e);
        let f = hdf5::File::create(&tmp).map_err(h5)?;
        write_attrs(
            &f,
            &[
                ("default".into(), text("entry")),
                ("creator".into(), text(crate::provenance::TOOL)),
            ],
            &tmp,
        )?;
        let entry = f.create_group("entry").map_err(h5)?;
        write_attrs(
            &entry,
            &[
                ("NX_class".into(), text("NXentry")),
                ("default".into(), text("data")),
            ],
            &tmp,
        )?;
        let data = entry.create_group("data").map_err(h5)?;
        write_attrs(
            &data,
            &[
                ("NX_class".into(), text("NXdata")),
                ("signal".into(), text("volume")),
                ("z_indices".into(), AttrValue::Int(0)),
                ("y_indices".into(), AttrValue::Int(1)),
                ("x_indices".into(), AttrValue::Int(2)),
            ],
            &tmp,
        )?;
        str_array_attr(&data, "axes", &["z", "y", "x"]).map_err(h5)?;
        let (voxel, unit) = meta.voxel();
        for (axis, n) in ["z", "y", "x"].into_iter().zip(shape) {
            let coords = Array1::from_shape_fn(n, |i| i as f64 * voxel);
            let d = data
                .new_dataset_builder()
                .with_data(coords.view())
                .create(axis)
                .map_err(h5)?;
            let mut attrs = vec![("long_name".into(), text(&format!("{axis} (voxel centres)")))];
            if let Some(u) = unit {
                attrs.push(("units".into(), text(u)));
            }
            write_attrs(&d, &attrs, &tmp)?;
        }
        let ds = volume_dataset(&data, "volume", shape, options.compression).map_err(h5)?;
        write_attrs(&ds, &meta.attrs, &tmp)?;
        if let Some(u) = unit {
            write_attrs(&ds, &[("voxel_units".into(), text(u))], &tmp)?;
        }
        let process = entry.create_group("reconstruction").map_err(h5)?;
        write_attrs(&process, &[("NX_class".into(), text("NXprocess"))], &tmp)?;
        string_dataset(&process, "program", "tomors", &tmp)?;
        string_dataset(&process, "version", env!("CARGO_PKG_VERSION"), &tmp)?;
        if let Some(config) = meta.config() {
            let note = process.create_group("configuration").map_err(h5)?;
            write_attrs(&note, &[("NX_class".into(), text("NXnote"))], &tmp)?;
            string_dataset(&note, "type", "application/toml", &tmp)?;
            string_dataset(&note, "data", config, &tmp)?;
        }
        Ok(Hdf5Writer::from_parts(path, stage, f, ds, shape))
    }
}
