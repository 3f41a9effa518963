//! CUDA entry points of the CLI (owned by the CUDA backend work).

use anyhow::{Context, Result};
use tomors_cuda::bench::BenchConfig;
use tomors_cuda::{CudaBackend, CudaOptions, KernelChoice, MultiCudaBackend};

/// Creates a CUDA backend on the given devices ("0,1"; None = all) with the
/// given kernel (`auto`, `standard`, `tex-opt`, `float2`, `half4`,
/// `standard-float2`, `standard-half4`; None = auto). Fails with one line
/// saying why when no GPU is usable.
pub fn make_backend(
    devices: Option<&str>,
    kernel: Option<&str>,
) -> Result<Box<dyn tomors_core::Backend>> {
    let kernel: KernelChoice = match kernel {
        Some(k) => k.parse()?,
        None => KernelChoice::Auto,
    };
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(devices, available)?;
    let options = CudaOptions {
        kernel,
        ..CudaOptions::default()
    };
    if list.len() == 1 {
        let b = CudaBackend::with_options(list[0], options)
            .with_context(|| format!("opening CUDA device {}", list[0]))?;
        Ok(Box::new(b))
    } else {
        let b = MultiCudaBackend::new(&list, options)
            .with_context(|| format!("opening CUDA devices {list:?}"))?;
        Ok(Box::new(b))
    }
}

/// Opens the cone-beam (FDK) backend on `devices` ("0,1"; None = all):
/// one device, or several sharing the volume in z-slabs (each device
/// reconstructs its slab from the detector rows it needs).
pub fn make_cone_backend(devices: Option<&str>) -> Result<Box<dyn tomors_core::cone::ConeBackend>> {
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(devices, available)?;
    if list.len() == 1 {
        let b = CudaBackend::new(list[0])
            .with_context(|| format!("opening CUDA device {}", list[0]))?;
        Ok(Box::new(b))
    } else {
        let b = MultiCudaBackend::new(&list, CudaOptions::default())
            .with_context(|| format!("opening CUDA devices {list:?}"))?;
        Ok(Box::new(b))
    }
}

/// Runs the GPU back-projection benchmark and prints a table: every kernel ×
/// interpolation × slices per pass at 2048 bins × 2048 angles → 2048²
/// (512² with `quick`), the size sweep `sizes` (default 256…4096), both FFT
/// variants and the end-to-end FBP of a 2048-slice stack host to host (64
/// slices of 256² with `quick`; `TOMORS_BENCH_E2E_SLICES` overrides the count,
/// 0 skips it), repeated on all devices when there are several.
pub fn bench(sizes: &[usize], quick: bool) -> Result<()> {
    let mut cfg = if quick {
        BenchConfig::quick(sizes)
    } else {
        BenchConfig::full(sizes)
    };
    if let Some(k) = std::env::var("TOMORS_BENCH_E2E_SLICES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.e2e_slices = k;
    }
    let available = tomors_cuda::device_count()?;
    if available > 1 {
        cfg.devices = (0..available).collect();
    }
    let report = tomors_cuda::bench::run(&cfg).context("CUDA benchmark")?;
    println!("{report}");
    Ok(())
}
