//! The GPU side of `tomors recon --geometry cone --algorithm …`.

use anyhow::{bail, Result};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::iterative::{IterativeOptions, ProjectorKind};

use super::recon::ReconArgs;
use crate::backend_select::BackendChoice;

/// Whether the iteration runs on the GPU for `choice` (errors when the GPU
/// was asked for and cannot run it).
pub fn wanted(
    choice: BackendChoice,
    _options: &IterativeOptions,
    _projector: ProjectorKind,
) -> Result<bool> {
    if choice == BackendChoice::Cuda {
        bail!("--geometry cone --algorithm runs on the CPU (use --backend cpu or auto)");
    }
    Ok(false)
}

/// Runs the iteration on the GPU.
pub fn run(
    _args: &ReconArgs,
    _g: &ConeGeometry,
    _vol: &ConeVolume,
    _projections: Array3<f32>,
    _options: &IterativeOptions,
) -> Result<Array3<f32>> {
    bail!("cone-beam iterative reconstruction on the GPU is not available")
}
