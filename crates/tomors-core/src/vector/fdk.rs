//! FDK for cone-beam vector geometries on the CPU: per-projection cosine
//! weighting, ramp filtering along each projection's detector rows (its
//! `u`), and the distance-weighted voxel-driven back projection — the
//! steps of ASTRA's `FDK_CUDA` (`cuda/3d/fdk.cu`), with every constant
//! taken from each projection's own vectors instead of projection 0's.
//!
//! For projection `i` with source `s`, detector normal `n̂` (pointing away
//! from the source) and source–detector distance `D_p = (d − s)·n̂`:
//!
//! - cosine weight of pixel `q`: `D_p/|q − s|` (the cosine of the angle
//!   between the ray and the detector normal);
//! - angular weight: `π/N` (a full scan of `N` evenly spaced projections
//!   over whole turns), or the weights given in [`VecFdkOptions`];
//! - ramp filter along the rows with the bin width of a column at the
//!   rotation axis, `|u|·D_o/D_p`, `D_o = (0 − s)·n̂` the depth of the world
//!   origin (on the z axis the orbits turn about; the source–axis distance
//!   of a circular scan);
//! - back projection with `(D_o/D_v)²`, `D_v` the voxel's depth
//!   ([`VoxelWeighting::Fdk`](super::VoxelWeighting::Fdk)).
//!
//! On a circular scan these are exactly the steps of [`crate::cone::fdk`]
//! (cosine weight `SDD/√(SDD² + u² + v²)`, bin width `pixel_u·SOD/SDD`,
//! `(SOD/U)²`). Short scans (Parker weights), offset-detector (half-fan)
//! weights and helical FDK are not done here: weigh such data through
//! [`VecFdkOptions::angular_weights`] or use an iterative method.

use ndarray::{s, Array3, ArrayView3, Axis, Zip};
use rayon::prelude::*;

use super::geometry::{ConeVecGeometry, VecGeometry};
use super::vec3::{dot, norm, scale, sub};
use super::volume::VolumeGeometry;
use super::voxel::{backproject_voxels, VoxelWeighting};
use crate::backend::Backend;
use crate::error::{CoreError, Result};
use crate::fbp::check_finite;
use crate::filter::FilterSpec;

/// Parameters of FDK on a vector geometry.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct VecFdkOptions {
    /// The ramp filter and its window (as FBP).
    pub filter: FilterSpec,
    /// The quadrature weight of each projection in the angle integral;
    /// `None`: `π/N` (a full scan over whole turns, evenly spaced).
    pub angular_weights: Option<Vec<f64>>,
}

/// The per-projection constants of FDK.
struct FdkFrame {
    /// Ramp-filter bin width (a column at the rotation axis).
    bin_width: f64,
}

fn frames(geometry: &ConeVecGeometry) -> Vec<FdkFrame> {
    geometry
        .projections()
        .iter()
        .map(|p| {
            let n = p.normal_from_source();
            let d_p = p.source_detector_distance();
            let d_o = dot(scale(p.source, -1.0), n);
            FdkFrame {
                bin_width: norm(p.detector.u) * d_o / d_p,
            }
        })
        .collect()
}

/// The FDK pre-processing of `projections` (`[projection][row][col]`, line
/// integrals): cosine and angular weights, then every detector row
/// ramp-filtered by `backend` with its projection's bin width at the axis.
/// Back projecting the result with
/// [`VoxelWeighting::Fdk`](super::VoxelWeighting::Fdk) gives the FDK
/// reconstruction.
///
/// Errors: shapes that do not fit, non-finite data, a bad filter, angular
/// weights of the wrong count or not finite, an origin not in front of a
/// source (the volume must lie between source and detector), the backend's
/// errors.
pub fn fdk_vec_filter<B: Backend + ?Sized>(
    backend: &B,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeVecGeometry,
    options: &VecFdkOptions,
) -> Result<Array3<f32>> {
    let (na, nr, nc) = (
        geometry.n_projections(),
        geometry.n_rows(),
        geometry.n_cols(),
    );
    if projections.dim() != (na, nr, nc) {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, the geometry expects {:?} ([projection][row][col])",
            projections.dim(),
            (na, nr, nc)
        )));
    }
    check_finite(projections, "the projections")?;
    options.filter.validate()?;
    let angular = match &options.angular_weights {
        None => vec![std::f64::consts::PI / na as f64; na],
        Some(w) if w.len() == na && w.iter().all(|v| v.is_finite()) => w.clone(),
        Some(w) => {
            return Err(CoreError::Parameter(format!(
                "{} angular weights for {na} projections (or not all finite)",
                w.len()
            )))
        }
    };
    let fr = frames(geometry);
    if let Some(i) = fr
        .iter()
        .position(|f| !(f.bin_width.is_finite() && f.bin_width > 0.0))
    {
        return Err(CoreError::Geometry(format!(
            "vector row {i}: the world origin (on the rotation axis) is not between the \
             source and the detector, FDK needs it there"
        )));
    }
    let mut q = projections.to_owned();
    Zip::from(q.outer_iter_mut())
        .and(&angular)
        .and(geometry.projections())
        .into_par_iter()
        .for_each(|(mut proj, &a, p)| {
            let d_p = p.source_detector_distance();
            for ((r, c), v) in proj.indexed_iter_mut() {
                let px = p.detector.pixel(nr, nc, r as f64, c as f64);
                let cosine = d_p / norm(sub(px, p.source));
                *v = (*v as f64 * cosine * a) as f32;
            }
        });
    let w0 = fr[0].bin_width;
    if fr.iter().all(|f| (f.bin_width - w0).abs() <= 1e-12 * w0) {
        backend.filter(q.view_mut(), &options.filter, w0 as f32)?;
    } else {
        for (i, f) in fr.iter().enumerate() {
            backend.filter(
                q.slice_mut(s![i..i + 1, .., ..]),
                &options.filter,
                f.bin_width as f32,
            )?;
        }
    }
    debug_assert_eq!(q.len_of(Axis(0)), na);
    Ok(q)
}

/// FDK reconstruction of `projections` (`[projection][row][col]`, line
/// integrals in world units) of a cone-beam vector geometry on `volume`;
/// returns `[z][y][x]` with the object's values: [`fdk_vec_filter`], then
/// the voxel-driven back projection with FDK's distance weight.
///
/// Errors: those of [`fdk_vec_filter`]; a volume that reaches behind a
/// source.
pub fn fdk_vec<B: Backend + ?Sized>(
    backend: &B,
    projections: ArrayView3<'_, f32>,
    geometry: &ConeVecGeometry,
    volume: &VolumeGeometry,
    options: &VecFdkOptions,
) -> Result<Array3<f32>> {
    let g: VecGeometry = geometry.clone().into();
    super::frames::Frames::new(&g, volume).check_in_front(volume)?;
    let q = fdk_vec_filter(backend, projections, geometry, options)?;
    let mut out = Array3::<f32>::zeros(volume.dim());
    let all: Vec<usize> = (0..geometry.n_projections()).collect();
    backproject_voxels(
        &g,
        volume,
        &volume.full_box(),
        q.view(),
        &all,
        VoxelWeighting::Fdk,
        out.view_mut(),
    )?;
    Ok(out)
}
