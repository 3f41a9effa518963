//! # tomors-core
//!
//! Geometry, phantoms, filters, CPU projectors and reconstruction algorithms
//! of tomors. The core knows no file format and no GPU: algorithms ask a
//! [`Backend`] for the heavy operations, and [`cpu::CpuBackend`] is the
//! reference implementation of each. The iterative methods are written once
//! over the operator and vector traits of [`linalg`], so they run on host
//! arrays, device buffers and distributed operators alike.
//!
//! Conventions: projections `[angle][row][col]`, sinograms
//! `[slice][angle][bin]`, volumes `[z][y][x]`, angles in radians, geometry as
//! ASTRA's `parallel` (see [`geometry`]).

pub mod backend;
pub mod cone;
pub mod cpu;
pub mod error;
pub mod fbp;
pub mod filter;
pub mod fourier;
pub mod geometry;
pub mod iterative;
pub mod linalg;
pub mod metrics;
pub mod phantom;
pub mod vector;

pub use backend::{Backend, Interpolation};
pub use error::{CoreError, Result};
pub use filter::{FilterKind, FilterSpec, Padding};
pub use geometry::{ParallelGeometry, SliceGrid};
