//! Cone-beam CT: circular geometry, exact phantom projections and FDK.
//!
//! - [`ConeGeometry`] / [`ConeVolume`]: circular orbit, flat detector with
//!   principal point, validation against a volume
//!   ([`ConeGeometry::check_volume`]). The orientation extends the
//!   parallel-beam convention of [`crate::geometry`] and is ASTRA's `cone`
//!   geometry (`docs/cone.md` gives the parameter mapping).
//! - [`project_cone`]: exact cone-beam projections of a [`Phantom3d`](crate::phantom::Phantom3d)
//!   (ray–ellipsoid chord lengths, averaged over a sub-pixel grid).
//! - [`fdk`]: Feldkamp–Davis–Kress over a [`ConeBackend`]: cosine
//!   weights, full-scan or Parker short-scan weights ([`weights`]), row-wise
//!   ramp filtering with the FBP filters, voxel-driven back projection with
//!   the `(SOD/U)²` weight and bilinear detector interpolation.
//! - [`split_slabs`], [`rows_for_slab`], [`ConeBackend::fdk_slab_into`]:
//!   the volume in z-slabs, each reconstructed from the detector rows its
//!   voxels reach (several GPUs, MPI ranks).
//! - [`backproject_cone`] (fast, multi-threaded, per-(x, y) terms reused
//!   along z) and [`backproject_cone_reference`] (plain f64).

mod backproject;
mod fdk;
mod geometry;
mod phantom;
mod slabs;
pub mod weights;

pub use backproject::{backproject_cone, backproject_cone_reference, backproject_cone_with};
pub use fdk::{fdk, fdk_by_steps, fdk_filter, ConeBackend, FdkOptions};
pub use geometry::{
    uniform_angles_inclusive, ConeGeometry, ConeProjection, ConeVolume, DetectorPoint,
};
pub use phantom::{project_cone, DEFAULT_SUBPIXELS};
pub use slabs::{check_slab, fdk_slab_by_steps, rows_for_slab, split_slabs};
pub use weights::ScanMode;
