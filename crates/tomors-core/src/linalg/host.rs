//! [`Vector`](super::Vector) for host arrays (`ndarray::Array3`).
