//! OME-Zarr volume output (`.zarr`): NGFF 0.4 on Zarr v2 (the version that
//! napari, neuroglancer, Fiji/MoBIE and the `ome-zarr` package all read),
//! written with the `zarrs` crate.
//!
//! The store is a directory: level `0` is the volume `[z][y][x]`, each
//! further level halves every axis longer than one voxel by mean pooling
//! (2×2×2 windows, smaller at odd edges) until the largest in-plane size
//! is below [`MIN_LEVEL_SIZE`]. Arrays are float32, chunked
//! ([`CHUNK`] at most), gzip-compressed, with `/` chunk keys. The root
//! group's `.zattrs` holds `multiscales` (axes z, y, x of type space; per
//! level a `scale` transformation of voxel size × 2^level) and `tomors`
//! (the run's attributes and recorded configuration).
//!
//! Streaming: slabs go to level 0 as they come and are pooled on the fly
//! (each level holds at most one slice waiting for its partner), so memory
//! stays at a slab. The store is written under a temporary directory name
//! beside the target and moved into place when complete, with the
//! [`MARKER`](crate::output::MARKER) inside, like a TIFF stack.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ndarray::{Array2, Array3, ArrayView2, ArrayView3, Axis};
use serde_json::{json, Map, Value};
use zarrs::array::{Array, ArrayMetadata, ArrayMetadataV2, ArraySubset};
use zarrs::filesystem::FilesystemStore;
use zarrs::group::{Group, GroupMetadata};
use zarrs::metadata::v2::GroupMetadataV2;

use crate::error::{format_err, Result};
use crate::output::{OutputKind, StagedDir};
use crate::writer::{check_finite_slab, AttrValue, SlabCursor, VolumeMeta, VolumeWriter};

/// Pyramid levels are added while the last one's larger in-plane size is at
/// least this many voxels.
pub const MIN_LEVEL_SIZE: usize = 64;

/// Largest chunk `[z, y, x]` of every level.
pub const CHUNK: [usize; 3] = [16, 256, 256];

/// gzip level of the chunks.
pub const GZIP_LEVEL: u32 = 5;

type Store = FilesystemStore;

/// One pyramid level: its array, and a slice waiting for its partner.
struct Level {
    array: Array<Store>,
    shape: [usize; 3],
    next_z: usize,
    /// The factor (1 or 2) per axis from this level to the next.
    halve: [bool; 3],
    pending: Option<Array2<f32>>,
}

/// The OME-Zarr writer.
pub struct OmeZarrWriter {
    path: PathBuf,
    tmp: PathBuf,
    stage: Option<StagedDir>,
    levels: Vec<Level>,
    cursor: SlabCursor,
}

fn zerr(path: &Path, e: impl std::fmt::Display) -> crate::IoError {
    format_err(path, format!("Zarr write: {e}"))
}

/// The shapes of the pyramid of a `shape` volume, level 0 first.
pub fn level_shapes(shape: [usize; 3]) -> Vec<[usize; 3]> {
    let mut out = vec![shape];
    loop {
        let last = *out.last().expect("level 0");
        if last[1].max(last[2]) < MIN_LEVEL_SIZE {
            return out;
        }
        out.push(last.map(|n| if n > 1 { n.div_ceil(2) } else { n }));
    }
}

/// Mean of `a` (and `b`, the next slice, if any) over 2×2 windows of the
/// axes flagged in `halve[1..]`.
fn pool(a: ArrayView2<'_, f32>, b: Option<ArrayView2<'_, f32>>, halve: [bool; 3]) -> Array2<f32> {
    let (ny, nx) = a.dim();
    let (fy, fx) = (1 + halve[1] as usize, 1 + halve[2] as usize);
    let (oy, ox) = (ny.div_ceil(fy), nx.div_ceil(fx));
    Array2::from_shape_fn((oy, ox), |(j, i)| {
        let mut sum = 0f64;
        let mut n = 0usize;
        for y in j * fy..((j + 1) * fy).min(ny) {
            for x in i * fx..((i + 1) * fx).min(nx) {
                sum += f64::from(a[[y, x]]);
                n += 1;
                if let Some(b) = b {
                    sum += f64::from(b[[y, x]]);
                    n += 1;
                }
            }
        }
        (sum / n as f64) as f32
    })
}

impl OmeZarrWriter {
    /// Starts writing the store `path` (under its temporary name).
    pub fn create(
        path: &Path,
        shape: [usize; 3],
        meta: &VolumeMeta,
        overwrite: bool,
    ) -> Result<Self> {
        let stage = StagedDir::create_as(path, OutputKind::ZarrDir, overwrite)?;
        let tmp = stage.path().to_path_buf();
        let store = Arc::new(Store::new(&tmp).map_err(|e| zerr(&tmp, e))?);
        let shapes = level_shapes(shape);
        let (voxel, _unit) = meta.voxel();
        let mut levels = Vec::with_capacity(shapes.len());
        let mut datasets = Vec::new();
        let mut scale = [voxel; 3];
        for (k, &s) in shapes.iter().enumerate() {
            let chunks: Vec<u64> = (0..3).map(|a| s[a].min(CHUNK[a]) as u64).collect();
            let md: ArrayMetadataV2 = serde_json::from_value(json!({
                "zarr_format": 2,
                "shape": s,
                "chunks": chunks,
                "dtype": "<f4",
                "compressor": {"id": "gzip", "level": GZIP_LEVEL},
                "fill_value": 0.0,
                "order": "C",
                "filters": null,
                "dimension_separator": "/",
            }))
            .map_err(|e| zerr(&tmp, e))?;
            let array =
                Array::new_with_metadata(store.clone(), &format!("/{k}"), ArrayMetadata::V2(md))
                    .map_err(|e| zerr(&tmp, e))?;
            array.store_metadata().map_err(|e| zerr(&tmp, e))?;
            let halve = match shapes.get(k + 1) {
                Some(n) => [0, 1, 2].map(|a| n[a] < s[a]),
                None => [false; 3],
            };
            datasets.push(json!({
                "path": k.to_string(),
                "coordinateTransformations": [{"type": "scale", "scale": scale}],
            }));
            for a in 0..3 {
                if halve[a] {
                    scale[a] *= 2.0;
                }
            }
            levels.push(Level {
                array,
                shape: s,
                next_z: 0,
                halve,
                pending: None,
            });
        }
        let mut tomors = Map::new();
        for (k, v) in &meta.without_config().attrs {
            let v = match v {
                AttrValue::Float(x) => json!(x),
                AttrValue::Int(x) => json!(x),
                AttrValue::Text(t) => json!(t),
            };
            tomors.insert(k.clone(), v);
        }
        let mut tomors = json!({"software": crate::provenance::TOOL, "attributes": tomors});
        if let Some(config) = meta.config() {
            tomors["config"] = json!(config);
        }
        let axes = ["z", "y", "x"].map(|n| json!({"name": n, "type": "space"}));
        let attrs = json!({
            "multiscales": [{
                "version": "0.4",
                "name": "volume",
                "axes": axes,
                "datasets": datasets,
                "type": "mean",
                "metadata": {
                    "description": "mean over 2×2×2 windows (smaller at odd edges); axes of one voxel are not pooled",
                },
            }],
            "tomors": tomors,
        });
        let Value::Object(attrs) = attrs else {
            unreachable!("a JSON object")
        };
        let gm = GroupMetadataV2::new().with_attributes(attrs);
        let group = Group::new_with_metadata(store, "/", GroupMetadata::V2(gm))
            .map_err(|e| zerr(&tmp, e))?;
        group.store_metadata().map_err(|e| zerr(&tmp, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            stage: Some(stage),
            levels,
            cursor: SlabCursor::new(shape),
        })
    }

    /// Writes `slab` at the next slices of level `k` and pools it into
    /// level `k + 1`.
    fn push(&mut self, k: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        let n = slab.len_of(Axis(0));
        if n == 0 {
            return Ok(());
        }
        let tmp = self.tmp.clone();
        let last = k + 1 == self.levels.len();
        let level = &mut self.levels[k];
        let z0 = level.next_z;
        if z0 + n > level.shape[0] {
            return Err(format_err(&tmp, format!("level {k}: slices past the end")));
        }
        let std = slab.as_standard_layout();
        let data = std.as_slice().expect("standard layout");
        let subset = ArraySubset::new_with_ranges(&[
            z0 as u64..(z0 + n) as u64,
            0..level.shape[1] as u64,
            0..level.shape[2] as u64,
        ]);
        level
            .array
            .store_array_subset(&subset, data)
            .map_err(|e| zerr(&tmp, e))?;
        level.next_z += n;
        if last {
            return Ok(());
        }
        let halve = level.halve;
        let mut out = Vec::new();
        for img in slab.outer_iter() {
            if !halve[0] {
                out.push(pool(img, None, halve));
            } else if let Some(prev) = level.pending.take() {
                out.push(pool(prev.view(), Some(img), halve));
            } else {
                level.pending = Some(img.to_owned());
            }
        }
        self.push_pooled(k + 1, out)
    }

    fn push_pooled(&mut self, k: usize, slices: Vec<Array2<f32>>) -> Result<()> {
        if slices.is_empty() {
            return Ok(());
        }
        let views: Vec<_> = slices.iter().map(|s| s.view()).collect();
        let slab: Array3<f32> = ndarray::stack(Axis(0), &views).expect("slices of one level");
        self.push(k, slab.view())
    }
}

impl VolumeWriter for OmeZarrWriter {
    fn path(&self) -> &Path {
        &self.path
    }
    fn shape(&self) -> [usize; 3] {
        self.cursor.shape
    }
    fn write_slab(&mut self, z0: usize, slab: ArrayView3<'_, f32>) -> Result<()> {
        self.cursor.check(&self.path, z0, &slab)?;
        check_finite_slab(&self.path, z0, &slab)?;
        self.push(0, slab)
    }
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.cursor.complete(&self.path)?;
        // An odd last slice of a level is pooled alone.
        for k in 0..self.levels.len() {
            if let Some(last) = self.levels[k].pending.take() {
                let pooled = pool(last.view(), None, self.levels[k].halve);
                self.push_pooled(k + 1, vec![pooled])?;
            }
            let l = &self.levels[k];
            if l.next_z != l.shape[0] {
                return Err(format_err(
                    &self.tmp,
                    format!("level {k}: {} of {} slices written", l.next_z, l.shape[0]),
                ));
            }
        }
        self.levels.clear();
        let stage = self.stage.take().expect("a writer finishes once");
        stage.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pyramid_shapes() {
        assert_eq!(level_shapes([4, 40, 50]), vec![[4, 40, 50]]);
        assert_eq!(
            level_shapes([5, 130, 64]),
            vec![[5, 130, 64], [3, 65, 32], [2, 33, 16]]
        );
        assert_eq!(
            level_shapes([1, 128, 128]),
            vec![[1, 128, 128], [1, 64, 64], [1, 32, 32]]
        );
    }

    #[test]
    fn pooling_means() {
        let a = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
        let b = a.mapv(|v| v + 10.0);
        let p = pool(a.view(), Some(b.view()), [true, true, true]);
        // 2×2×2 blocks: (1+2+4+5+11+12+14+15)/8 = 8, the edge block
        // (3+6+13+16)/4 = 9.5.
        assert_eq!(p, ndarray::array![[8.0f32, 9.5]]);
        let p = pool(a.view(), None, [true, false, true]);
        assert_eq!(p, ndarray::array![[1.5f32, 3.0], [4.5, 6.0]]);
    }
}
