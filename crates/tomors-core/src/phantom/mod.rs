//! Phantoms with exact analytic projections, and simulated photon noise.
//!
//! - [`Phantom2d`]: a sum of [`Ellipse`]s (the modified Shepp–Logan phantom
//!   by [`Phantom2d::shepp_logan`]); pixel averages by supersampling and
//!   exact bin-averaged parallel-beam projections.
//! - [`Phantom3d`]: a sum of [`Ellipsoid`]s rotated about z (the 3D modified
//!   Shepp–Logan phantom by [`Phantom3d::shepp_logan`]); voxel averages,
//!   exact cuts ([`Phantom3d::cross_section`]) and exact pixel-averaged
//!   projections on a detector of rows × bins.
//! - [`add_poisson_noise`]: photon-counting noise on line integrals.
//!
//! Phantom coordinates are normalised to `[−1, 1]` (y up, as in world
//! coordinates, so image row 0 shows the top of the phantom) and placed on
//! the world with a `scale` in world units per normalised unit; a typical
//! choice is `scale = n_bins · bin_width / 2`. Projections follow the
//! geometry conventions of [`crate::geometry`]: a point (x, y) lands at
//! `s = x·cos θ + y·sin θ`, bin coordinate `u = center + s / bin_width`.
//! Projection values are line integrals in world units (value × length).

mod analytic;
mod noise;
mod phantom2d;
mod phantom3d;

pub use noise::add_poisson_noise;
pub use phantom2d::{Ellipse, Phantom2d};
pub use phantom3d::{Ellipsoid, Phantom3d};
