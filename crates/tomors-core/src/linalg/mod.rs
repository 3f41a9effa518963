//! Operators and vectors: the abstraction every iterative algorithm is
//! written against, once, so that it runs on host arrays, device buffers,
//! a distributed (MPI) operator or a Python-facing operator alike.
//!
//! - [`Vector`]: the vector operations (fill, scale, axpy, element-wise
//!   multiply, floored inverse, clip, dot/norm in f64, finiteness) plus
//!   fused operations with default implementations that a device overrides
//!   with one kernel each ([`Vector::residual_weighted`],
//!   [`Vector::residual_weighted_norm_sq`], [`Vector::update_clipped`]).
//! - [`LinearOperator`]: forward `A` and back projection `B ≈ Aᵀ` between
//!   its `Domain` (images/volumes) and `Range` (sinograms/projections)
//!   vector types; the sub-operator of any block of projections through the
//!   `angles` argument and [`LinearOperator::select`]; the weights of the
//!   SIRT family (row sums, column sums, row norms); and an optional ray
//!   capability ([`RayAccess`]) for ART and the block-parallel method.
//! - [`host`]: [`Vector`] for `ndarray::Array3` host arrays (stacks
//!   `[slice][angle][bin]` and `[slice][y][x]`), parallel with rayon and
//!   reproducible for any thread count.
//!
//! The algorithms themselves are in [`crate::iterative`]
//! ([`solve`](crate::iterative::solve)); the CPU projectors become
//! operators through [`StackOperator`](crate::iterative::StackOperator).
//!
//! # One SIRT iteration through the traits
//!
//! `x ← clip(x + λ·T ⊙ Bᵀ(M ⊙ (b − A·x)))`, with `M = 1/row sums`,
//! `T = 1/column sums` computed once by the operator and
//! [`Vector::invert_floored`]:
//!
//! ```text
//!            solver (iterative::solve, written once)
//!                 │
//!   x: Domain ────┼──► op.forward(x, all, ax)           LinearOperator
//!                 │        ax: Range = A·x              (CPU projector /
//!                 │                                      GPU kernels / MPI
//!                 │                                      partial A·x + allreduce)
//!                 ├──► ax.residual_weighted_norm_sq(b, M)   Vector (fused)
//!                 │        ax ← M ⊙ (b − ax), returns ‖b − A·x‖²
//!                 │        → residual history, tolerance, divergence check,
//!                 │          callback(iteration, residual, &x)
//!                 ├──► op.backward(ax, all, g)          LinearOperator
//!                 │        g: Domain = Bᵀ·ax
//!                 └──► x.update_clipped(λ, g, T, min, max)  Vector (fused)
//!                          x ← clip(x + λ·T ⊙ g)
//! ```
//!
//! A block method (SART, BLOCK-IT) runs the same four calls per block `ℓ`
//! with `angles = ℓ`, the block's data `op.select(b, ℓ)`, `M_ℓ = op.select(M, ℓ)`
//! and its own `T_ℓ = 1/op.column_sums(ℓ)`. ART and the block-parallel
//! method need [`LinearOperator::rays`]: they walk single rays
//! ([`RayAccess::trace_ray`]) over host memory ([`RayAccess::host_parts`]).

mod batches;
pub mod host;
mod operator;
mod real;
mod vector;

pub use batches::RayBatches;
pub use operator::{LinearOperator, RayAccess, RayPart};
pub use real::Real;
pub use vector::Vector;
