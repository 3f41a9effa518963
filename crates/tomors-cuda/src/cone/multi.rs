//! Several devices of one host sharing a cone-beam volume:
//! [`ConeBackend`] for [`MultiCudaBackend`].
//!
//! The volume is cut into z-slabs, one per device, of nearly equal size
//! ([`split_slabs`]) with boundaries at multiples of the FDK's download slab
//! ([`fdk_slab_slices`]); each device receives only the detector rows its
//! slab's voxels project to ([`rows_for_slab`], widened to an even first
//! row and an even count so the filter pairs the same rows into one complex
//! FFT as on one device) and runs the whole FDK pipeline on them
//! ([`CudaBackend::fdk_slab_device`]: host copies, uploads, weighting,
//! filtering, back projection, downloads) in its own host thread, all
//! devices at once, each writing its slices of the host volume. The kernels
//! use the whole detector's texture coordinates, so every slab equals the
//! same slices of one device's FDK (see `docs/multi-gpu.md` for the
//! measured bound).

use std::ops::Range;

use ndarray::{s, ArrayView3, ArrayViewMut3, Axis};
use tomors_core::cone::{
    rows_for_slab, split_slabs, ConeBackend, ConeGeometry, ConeVolume, FdkOptions,
};
use tomors_core::CoreError;

use super::fdk::fdk_slab_slices;
use super::fdk_common::FdkStats;
use super::CONE_ZB;
use crate::error::CudaError;
use crate::fbp::{CudaBackend, MultiCudaBackend};

/// One device's part of a cone-beam volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlabPart {
    /// Index into [`MultiCudaBackend::devices`].
    pub device: usize,
    /// Slices of the volume.
    pub z: Range<usize>,
    /// Detector rows the slices need.
    pub rows: Range<usize>,
}

/// `rows` widened to an even first row and an even count (within `n`).
fn even_rows(rows: Range<usize>, n: usize) -> Range<usize> {
    let start = rows.start - rows.start % 2;
    let end = (rows.end + (rows.end - start) % 2).min(n);
    start..end
}

/// The parts of slices `z` of `volume` on `devices` devices: slabs of
/// nearly equal size starting at multiples of `align` from `z.start`, each
/// with the (even-aligned) detector rows it needs. Fewer parts than devices
/// when there are fewer blocks of `align` slices.
pub fn slab_parts(
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z: Range<usize>,
    devices: usize,
    align: usize,
) -> Vec<SlabPart> {
    split_slabs(z.len(), devices, align)
        .into_iter()
        .enumerate()
        .map(|(device, r)| {
            let zz = z.start + r.start..z.start + r.end;
            let rows = even_rows(rows_for_slab(geometry, volume, &zz), geometry.n_rows());
            SlabPart {
                device,
                z: zz,
                rows,
            }
        })
        .collect()
}

/// One device's work on its part and its slices of the output.
type PartWork<'a, T> =
    dyn Fn(&CudaBackend, &SlabPart, ArrayViewMut3<'_, f32>) -> tomors_core::Result<T> + Sync + 'a;

/// Runs `work` for every part on its device, one host thread per device,
/// each with its slices of `out` (`[z][y][x]` of the slices the parts
/// cover, from `z0`).
fn on_devices<T: Send>(
    devices: &[CudaBackend],
    parts: &[SlabPart],
    z0: usize,
    mut out: ArrayViewMut3<'_, f32>,
    work: &PartWork<'_, T>,
) -> tomors_core::Result<Vec<T>> {
    let mut views = Vec::with_capacity(parts.len());
    let mut at = z0;
    for p in parts {
        debug_assert_eq!(p.z.start, at);
        let (head, tail) = out.split_at(Axis(0), p.z.len());
        views.push(head);
        out = tail;
        at = p.z.end;
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .zip(views)
            .map(|(p, v)| {
                let dev = &devices[p.device];
                s.spawn(move || work(dev, p, v))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(CoreError::from(CudaError::Parameter(
                        "a device thread panicked".into(),
                    )))
                })
            })
            .collect()
    })
}

impl MultiCudaBackend {
    /// FDK of `projections` (`[angle][row][col]`) into `out` (`[z][y][x]`
    /// of `volume`) on every device at once (see the module
    /// documentation), returning each device's part and stage times.
    ///
    /// Errors: as [`CudaBackend::fdk_device`], from any device.
    pub fn fdk_multi(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<Vec<(SlabPart, FdkStats)>> {
        let expected = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
        if projections.dim() != expected {
            return Err(CoreError::Shape(format!(
                "projections are {:?}, the geometry expects {expected:?} ([angle][row][col])",
                projections.dim()
            )));
        }
        let want = (volume.nz, volume.ny, volume.nx);
        if out.dim() != want {
            return Err(CoreError::Shape(format!(
                "output is {:?}, expected {want:?} ([z][y][x])",
                out.dim()
            )));
        }
        let align = fdk_slab_slices(volume, options.slab);
        let parts = slab_parts(geometry, volume, 0..volume.nz, self.devices().len(), align);
        tracing::debug!("FDK on {} devices: {parts:?}", parts.len());
        let stats = on_devices(self.devices(), &parts, 0, out, &|dev, p, v| {
            let band = projections.slice(s![.., p.rows.clone(), ..]);
            dev.fdk_slab_device(
                band,
                geometry,
                p.rows.clone(),
                volume,
                p.z.clone(),
                options,
                v,
            )
        })?;
        Ok(parts.into_iter().zip(stats).collect())
    }
}

impl ConeBackend for MultiCudaBackend {
    fn cone_backproject(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_range: Range<usize>,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        if z_range.is_empty() || z_range.end > volume.nz {
            return Err(CoreError::Shape(format!(
                "slices {z_range:?} are not a non-empty part of the volume's {} slices",
                volume.nz
            )));
        }
        let z0 = z_range.start;
        let parts = slab_parts(geometry, volume, z_range, self.devices().len(), CONE_ZB);
        on_devices(self.devices(), &parts, z0, out, &|dev, p, v| {
            // The plain-load kernel reads the whole detector.
            let rows = match dev.cone_kernel() {
                super::ConeKernel::Loads => 0..geometry.n_rows(),
                super::ConeKernel::Texture => p.rows.clone(),
            };
            let band = projections.slice(s![.., rows.clone(), ..]);
            dev.cone_backproject_rows(band, geometry, rows, volume, p.z.clone(), v, 0)
                .map(|_| ())
                .map_err(CoreError::from)
        })
        .map(|_| ())
    }

    fn fdk_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        self.fdk_multi(projections, geometry, volume, options, out)
            .map(|_| ())
    }

    fn fdk_slab_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        rows: Range<usize>,
        volume: &ConeVolume,
        z: Range<usize>,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> tomors_core::Result<()> {
        // A slab given to this host (MPI): its first device alone.
        self.devices()[0]
            .fdk_slab_device(projections, geometry, rows, volume, z, options, out)
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_rows_widen_within_the_detector() {
        assert_eq!(even_rows(3..8, 10), 2..8);
        assert_eq!(even_rows(3..9, 10), 2..10);
        assert_eq!(even_rows(4..9, 9), 4..9);
        assert_eq!(even_rows(0..10, 10), 0..10);
        assert_eq!(even_rows(0..7, 7), 0..7);
    }

    #[test]
    fn parts_cover_the_volume_with_aligned_slabs() {
        let angles: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let g = ConeGeometry::new(angles, 300.0, 150.0, 100, 100, 1.0, 1.0).unwrap();
        let v = ConeVolume::new(64, 64, 64, 0.6).unwrap();
        let parts = slab_parts(&g, &v, 0..64, 2, 16);
        assert_eq!(parts.len(), 2);
        assert_eq!((parts[0].z.clone(), parts[1].z.clone()), (0..32, 32..64));
        for p in &parts {
            assert_eq!(p.rows.start % 2, 0);
            assert_eq!(p.rows.len() % 2, 0);
            assert!(p.rows.len() < 100, "{p:?}");
            let r = rows_for_slab(&g, &v, &p.z);
            assert!(p.rows.start <= r.start && r.end <= p.rows.end);
        }
        // Upper and lower halves need the upper and lower rows.
        assert!(parts[0].rows.start < parts[1].rows.start);
        let sub = slab_parts(&g, &v, 8..40, 3, 16);
        assert_eq!(
            sub.iter().map(|p| p.z.clone()).collect::<Vec<_>>(),
            vec![8..24, 24..40]
        );
    }
}
