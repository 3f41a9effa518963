//! Parallel-beam filtered back projection: filtering with cuFFT ([`fft`]),
//! the back-projection kernel families and their configurations
//! ([`kernels`]), the per-device engine with its overlapped slab pipeline
//! (`engine`), the [`Backend`](tomors_core::Backend) implementations on one
//! device ([`CudaBackend`]) and on several ([`MultiCudaBackend`]), and the
//! tuned kernel choices that every backend reads ([`tuning`]).
//!
//! This layer depends on [`crate::runtime`] only; the cone-beam, iterative,
//! tuning and benchmark layers build on it (never the other way round).

mod backend;
pub mod device;
pub(crate) mod engine;
pub mod extensions;
pub mod fft;
pub mod kernels;
mod multi;
pub mod padding;
pub mod sweep;
pub mod tensor;
pub mod tuning;

pub use backend::{CudaBackend, CudaOptions};
pub use engine::{PipelineStats, TexStorage};
pub use multi::MultiCudaBackend;
