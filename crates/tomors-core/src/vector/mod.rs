//! Per-projection (vector) geometries — any scan: misaligned lab CT,
//! offset and tilted detectors, helical, laminography, tilted axes — and
//! their CPU projectors, the reference every GPU kernel is checked
//! against.
//!
//! - [`ConeVecGeometry`] / [`ParallelVecGeometry`] ([`VecGeometry`] for
//!   either): one set of vectors per projection with ASTRA's `cone_vec` /
//!   `parallel3d_vec` conventions ([`geometry`] states them), validated
//!   row by row ([`VectorGeometryError::Row`] names the projection);
//!   [`VolumeGeometry`]: a box of voxels anywhere in space.
//! - [`constructors`]: the circular scans as vectors (the same rays as
//!   [`crate::cone::ConeGeometry`] and [`crate::geometry::ParallelGeometry`]),
//!   the usual misalignments, helical and laminography scans.
//! - [`VecJosephProjector`]: Joseph's matched pair (forward and exact
//!   transpose) as a [`Projector`](crate::iterative::Projector) /
//!   [`ConeOperator`](crate::iterative::ConeOperator), so every iterative
//!   method runs on it unchanged;
//!   [`VecVoxelProjector`]: Joseph forward with the fast voxel-driven back
//!   projection ([`backproject_voxels`], ASTRA's pairing; its
//!   [`VoxelWeighting::Fdk`] is FDK's distance weight).
//! - [`analytic`]: exact line integrals of ellipsoid phantoms along every
//!   ray of a vector geometry, and the phantom rasterised on a
//!   [`VolumeGeometry`].
//! - [`fdk_vec`]: FDK for cone-beam vector geometries (per-projection
//!   cosine weights, ramp filtering along each projection's rows,
//!   `(D_o/D_v)²`-weighted voxel-driven back projection); on a circular
//!   scan it is [`crate::cone::fdk`].

pub mod analytic;
pub mod constructors;
mod error;
mod fdk;
mod frames;
pub mod geometry;
mod joseph;
mod rays;
pub mod vec3;
mod volume;
mod voxel;

pub use constructors::{ConeScan, ParallelScan, Turn};
pub use error::{RowDefect, VectorGeometryError};
pub use fdk::{fdk_vec, fdk_vec_filter, VecFdkOptions};
pub use frames::{index_frames, IndexFrame};
pub use geometry::{
    ConeVecGeometry, ConeVectors, Detector, DetectorHit, ParallelVecGeometry, ParallelVectors,
    VecGeometry,
};
pub use joseph::VecJosephProjector;
pub use volume::VolumeGeometry;
pub use voxel::{backproject_voxels, VecVoxelProjector, VoxelWeighting};
