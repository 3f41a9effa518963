//! The element types (moved to [`crate::linalg`], re-exported here).

pub use crate::linalg::Real;
