//! CUDA entry points of the CLI (owned by the CUDA backend work).

use anyhow::{bail, Result};

/// Creates a CUDA backend on the given devices ("0,1"; None = all).
pub fn make_backend(
    _devices: Option<&str>,
    _kernel: Option<&str>,
) -> Result<Box<dyn tomors_core::Backend>> {
    bail!("the CUDA backend is not available in this build yet")
}

/// Runs the GPU back-projection benchmark and prints a table.
pub fn bench(_sizes: &[usize], _quick: bool) -> Result<()> {
    bail!("the CUDA benchmark is not available in this build yet")
}
