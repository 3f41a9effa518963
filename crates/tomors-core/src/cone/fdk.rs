//! Feldkamp–Davis–Kress (FDK) reconstruction over a [`ConeBackend`].

use std::ops::Range;

use ndarray::{s, Array3, ArrayView3, ArrayViewMut3, Axis, Zip};

use super::backproject::backproject_cone;
use super::geometry::{ConeGeometry, ConeVolume};
use super::weights::{angular_weights, cosine_weights, ScanMode};
use crate::backend::Backend;
use crate::cpu::CpuBackend;
use crate::error::{CoreError, Result};
use crate::fbp::check_finite;
use crate::filter::FilterSpec;

/// A backend that can back project cone-beam projections (besides the
/// parallel-beam operations of [`Backend`], whose `filter` FDK reuses for
/// the row-wise ramp filtering).
pub trait ConeBackend: Backend {
    /// Voxel-driven cone-beam back projection of `projections`
    /// (`[angle][row][col]`) into slices `z_range` of `volume`, overwriting
    /// `out` (`[slice][y][x]`) with `Σ_i (SOD/U_i)²·q_i(col_i, row_i)`,
    /// bilinear interpolation, zero outside the detector (see
    /// [`super::backproject_cone_reference`], the reference every backend
    /// is compared with).
    fn cone_backproject(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_range: Range<usize>,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()>;

    /// The whole FDK reconstruction of `projections` into `out`
    /// (`[z][y][x]` of `volume`, overwritten); `geometry` has been checked
    /// against `volume` ([`ConeGeometry::check_volume`]) by [`fdk`].
    ///
    /// The default runs [`fdk_filter`] through [`Backend::filter`] and then
    /// [`ConeBackend::cone_backproject`] slab by slab ([`fdk_by_steps`]); a
    /// backend overrides it to keep the filtered projections where it back
    /// projects (the CUDA backend weights, filters and back projects on the
    /// device with one upload of the projections).
    fn fdk_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        fdk_by_steps(self, projections, geometry, volume, options, out)
    }

    /// Prepares an FDK of `volume` from projections of `geometry` (their
    /// shape and angles) before the projections exist, so that a caller
    /// can overlap the preparation (device kernels, buffers, FFT plans)
    /// with reading them; [`ConeBackend::fdk_into`] then reuses it. The
    /// default does nothing.
    fn prepare_fdk(
        &self,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        options: &FdkOptions,
    ) -> Result<()> {
        let _ = (geometry, volume, options);
        Ok(())
    }

    /// FDK of slices `z` of `volume` into `out` (`[z.len()][y][x]`,
    /// overwritten) from detector rows `rows` of the projections of
    /// `geometry` only (`projections` is `[angle][rows.len()][col]`): one
    /// slab of a volume shared by several devices or ranks, with `rows`
    /// from [`rows_for_slab`](super::rows_for_slab).
    ///
    /// The default is [`fdk_slab_by_steps`](super::fdk_slab_by_steps); a
    /// backend overrides it to run its whole FDK on the rows (the CUDA
    /// backend keeps the texture coordinates of the whole detector, so a
    /// slab equals the same slices of its whole-volume FDK).
    #[allow(clippy::too_many_arguments)]
    fn fdk_slab_into(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        rows: Range<usize>,
        volume: &ConeVolume,
        z: Range<usize>,
        options: &FdkOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        super::slabs::fdk_slab_by_steps(self, projections, geometry, rows, volume, z, options, out)
    }
}

impl ConeBackend for CpuBackend {
    fn cone_backproject(
        &self,
        projections: ArrayView3<'_, f32>,
        geometry: &ConeGeometry,
        volume: &ConeVolume,
        z_range: Range<usize>,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        backproject_cone(projections, geometry, volume, z_range, out)
    }
}

/// Parameters of FDK.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FdkOptions {
    /// The ramp filter and its window (as FBP).
    pub filter: FilterSpec,
    /// Full scan, short scan (Parker weights) or decided from the angles.
    pub scan: ScanMode,
    /// Slices back projected per backend call (0: the whole volume at once).
    pub slab: usize,
}

impl Default for FdkOptions {
    fn default() -> Self {
        Self {
            filter: FilterSpec::default(),
            scan: ScanMode::Auto,
            slab: 0,
        }
    }
}

/// The FDK pre-processing of `projections` (`[angle][row][col]`): each
/// value multiplied by the cosine weight ([`cosine_weights`]) and the
/// angular weight of its projection and column ([`angular_weights`]: π/N
/// for full scans, `Δβ·` Parker's weight for short scans), then every
/// detector row ramp-filtered by `backend` with the filter's bin width set
/// to the column pitch at the rotation axis
/// ([`ConeGeometry::pixel_u_at_axis`]). Back projecting the result with
/// `(SOD/U)²` gives the FDK reconstruction.
pub fn fdk_filter<B: Backend + ?Sized>(
    backend: &B,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    options: &FdkOptions,
) -> Result<Array3<f32>> {
    let expected = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    if projections.dim() != expected {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, the geometry expects {:?} ([angle][row][col])",
            projections.dim(),
            expected
        )));
    }
    check_finite(projections, "the projections")?;
    options.filter.validate()?;
    let angular = angular_weights(geometry, options.scan)?;
    let cosine = cosine_weights(geometry);
    let mut q = projections.to_owned();
    Zip::from(q.outer_iter_mut())
        .and(angular.outer_iter())
        .par_for_each(|mut proj, ang| {
            Zip::from(&mut proj)
                .and(&cosine)
                .and_broadcast(&ang)
                .for_each(|v, &c, &a| *v *= c * a);
        });
    backend.filter(
        q.view_mut(),
        &options.filter,
        geometry.pixel_u_at_axis() as f32,
    )?;
    Ok(q)
}

/// FDK reconstruction of `projections` (`[angle][row][col]`, line integrals
/// in world units) on `volume`; returns `[z][y][x]` with the object's values
/// (attenuation per world unit).
///
/// Steps: [`ConeGeometry::check_volume`], then the backend's
/// [`ConeBackend::fdk_into`] (by default [`fdk_by_steps`]: [`fdk_filter`],
/// then [`ConeBackend::cone_backproject`] slab by slab of `options.slab`
/// slices).
///
/// Errors: geometry that cannot reconstruct the volume, shapes that do not
/// fit, non-finite data, a bad filter, the backend's errors.
pub fn fdk(
    backend: &dyn ConeBackend,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    options: &FdkOptions,
) -> Result<Array3<f32>> {
    geometry.check_volume(volume)?;
    let mut out = Array3::<f32>::zeros((volume.nz, volume.ny, volume.nx));
    backend.fdk_into(projections, geometry, volume, options, out.view_mut())?;
    Ok(out)
}

/// FDK in two steps over any [`ConeBackend`]: [`fdk_filter`] (weights on
/// the host, ramp filtering through [`Backend::filter`]), then
/// [`ConeBackend::cone_backproject`] slab by slab of `options.slab`
/// slices into `out` (`[z][y][x]` of `volume`). The default of
/// [`ConeBackend::fdk_into`].
///
/// Errors: shapes that do not fit, non-finite data, a bad filter, the
/// backend's errors.
pub fn fdk_by_steps<B: ConeBackend + ?Sized>(
    backend: &B,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    options: &FdkOptions,
    mut out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    let want = (volume.nz, volume.ny, volume.nx);
    if out.dim() != want {
        return Err(CoreError::Shape(format!(
            "output is {:?}, expected {want:?} ([z][y][x])",
            out.dim()
        )));
    }
    let q = fdk_filter(backend, projections, geometry, options)?;
    let slab = if options.slab == 0 {
        volume.nz
    } else {
        options.slab
    };
    let mut start = 0;
    while start < volume.nz {
        let end = (start + slab).min(volume.nz);
        backend.cone_backproject(
            q.view(),
            geometry,
            volume,
            start..end,
            out.slice_mut(s![start..end, .., ..]),
        )?;
        start = end;
    }
    debug_assert_eq!(out.len_of(Axis(0)), volume.nz);
    Ok(())
}
