//! Choosing the compute backend: `--backend auto|cpu|cuda`.

use anyhow::Result;
use clap::ValueEnum;
use tomors_core::cone::ConeBackend;
use tomors_core::cpu::CpuBackend;
use tomors_core::Backend;

use crate::cuda_cli;

/// Which backend computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Default)]
pub enum BackendChoice {
    /// The GPU if one is usable, else the CPU (with one log line saying why).
    #[default]
    Auto,
    /// Every CPU core.
    Cpu,
    /// NVIDIA GPUs through CUDA; fails if none is usable.
    Cuda,
}

/// Options shared by every command that computes.
#[derive(clap::Args, Clone, Debug)]
pub struct BackendArgs {
    /// Compute backend.
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// GPUs to use, e.g. "0,1" (default: all).
    #[arg(long)]
    pub devices: Option<String>,
    /// GPU back-projection kernel: auto (default: the fastest exact one
    /// known), fast, sweep, tensor, or a configuration such as
    /// alu-float2@t64,s16,a1,r1,b2.
    #[arg(long)]
    pub kernel: Option<String>,
    /// Reproducible bits: the GPU back projection of cone-beam iterative
    /// methods (joseph projector) adds in fixed point instead of with float
    /// atomics, so every run gives the same volume (slower); `--method
    /// fourier` is accepted (both its gathers add in a fixed order already).
    /// Every other path is deterministic already.
    #[arg(long)]
    pub deterministic: bool,
}

/// Makes the backend the user asked for.
pub fn make_backend(args: &BackendArgs) -> Result<Box<dyn Backend>> {
    match args.backend {
        BackendChoice::Cpu => Ok(Box::new(CpuBackend::new())),
        BackendChoice::Cuda => {
            cuda_cli::make_backend(args.devices.as_deref(), args.kernel.as_deref())
        }
        BackendChoice::Auto => {
            match cuda_cli::make_backend(args.devices.as_deref(), args.kernel.as_deref()) {
                Ok(backend) => Ok(backend),
                Err(err) => {
                    tracing::info!("no usable GPU ({err:#}); using the CPU");
                    Ok(Box::new(CpuBackend::new()))
                }
            }
        }
    }
}

/// Makes the cone-beam (FDK) backend the user asked for: the GPUs of
/// `--devices` (all by default; several share the volume in z-slabs), or
/// the CPU.
pub fn make_cone_backend(args: &BackendArgs) -> Result<Box<dyn ConeBackend>> {
    if args.kernel.is_some() {
        anyhow::bail!("--kernel chooses a parallel-beam kernel; cone beam has its own");
    }
    match args.backend {
        BackendChoice::Cpu => Ok(Box::new(CpuBackend::new())),
        BackendChoice::Cuda => cuda_cli::make_cone_backend(args.devices.as_deref()),
        BackendChoice::Auto => match cuda_cli::make_cone_backend(args.devices.as_deref()) {
            Ok(backend) => Ok(backend),
            Err(err) => {
                tracing::info!("no usable GPU ({err:#}); using the CPU");
                Ok(Box::new(CpuBackend::new()))
            }
        },
    }
}
