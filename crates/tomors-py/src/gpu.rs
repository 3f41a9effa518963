//! Backend choice (`backend="auto" | "cpu" | "cuda"`, `devices="0,1"`),
//! `tomors.devices()` and `tomors.tune()`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tomors_core::cone::ConeBackend;
use tomors_core::cpu::CpuBackend;
use tomors_core::Backend;
use tomors_cuda::{CudaBackend, CudaOptions, KernelChoice, MultiCudaBackend};

use crate::boundary::{compute, value, Error, Result};

/// The backend a call asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// A usable GPU, else the CPU.
    Auto,
    /// Every CPU core.
    Cpu,
    /// NVIDIA GPUs; an error when none is usable.
    Cuda,
}

impl Choice {
    /// Parses `auto`, `cpu`, `cuda` (also `gpu`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "cpu" => Ok(Self::Cpu),
            "cuda" | "gpu" => Ok(Self::Cuda),
            _ => Err(value(format!(
                "unknown backend '{s}' (use auto, cpu or cuda)"
            ))),
        }
    }

    /// Whether a method runs on the GPU: always with `cuda`, never with
    /// `cpu`, with `auto` when the GPU runs it (`capable`) and a GPU is
    /// usable.
    pub fn on_gpu(self, capable: bool) -> bool {
        match self {
            Self::Cpu => false,
            Self::Cuda => true,
            Self::Auto => capable && gpu_usable(),
        }
    }
}

/// The GPU backends opened by earlier calls of this process, by device list
/// and kernel choice. Opening one creates a CUDA context per device and
/// loads the kernels (about 0.3 s on an H100), which a notebook calling
/// `tomors.recon` slice after slice should pay once, as a Rust program
/// holding its backend does; `tomors.release_gpus()` empties it.
type OpenedGpus = Vec<(Vec<usize>, KernelChoice, Arc<MultiCudaBackend>)>;
static OPENED: Mutex<OpenedGpus> = Mutex::new(Vec::new());

/// The devices of `spec` ("0,1"; `None` = all), opened as one multi-GPU
/// backend, or the one an earlier call opened for the same devices and
/// kernel choice.
pub fn open_gpus(devices: Option<&str>, kernel: KernelChoice) -> Result<Arc<MultiCudaBackend>> {
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(devices, available)?;
    // A panic while the lock was held cannot leave the list half-updated
    // (one push), so a poisoned lock is still usable.
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, gpus)) = opened.iter().find(|(l, k, _)| *l == list && *k == kernel) {
        return Ok(Arc::clone(gpus));
    }
    let options = CudaOptions {
        kernel,
        ..CudaOptions::default()
    };
    let gpus = Arc::new(MultiCudaBackend::new(&list, options)?);
    opened.push((list, kernel, Arc::clone(&gpus)));
    Ok(gpus)
}

/// `tomors.release_gpus()`: drops the GPU backends kept by earlier calls
/// (their contexts and device buffers are freed once no running call uses
/// them). Returns how many were kept.
#[pyfunction]
pub fn release_gpus() -> usize {
    let mut opened = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    let n = opened.len();
    opened.clear();
    n
}

/// The GPU `ordinal` (opened once per process, as by [`open_gpus`]) and
/// its name, for the operators and methods that run on one given device.
pub fn gpu_backend(ordinal: usize) -> Result<(Arc<MultiCudaBackend>, String)> {
    let gpus = open_gpus(Some(&ordinal.to_string()), KernelChoice::Auto)?;
    let name = gpus.devices()[0].name();
    Ok((gpus, name))
}

/// The first device of `devices`, for the methods that run on one GPU.
pub fn open_gpu(devices: Option<&str>) -> Result<CudaBackend> {
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(devices, available)?;
    Ok(CudaBackend::new(list[0])?)
}

fn parse_kernel(kernel: Option<&str>) -> Result<KernelChoice> {
    match kernel {
        None => Ok(KernelChoice::Auto),
        Some(k) => k.parse::<KernelChoice>().map_err(|e| value(e.to_string())),
    }
}

/// An FBP backend, and the GPUs when it is theirs (for their stage times).
pub type FbpBackend = (Arc<dyn Backend>, Option<Arc<MultiCudaBackend>>);

/// The FBP backend for `choice` (as the CLI's `--backend`).
pub fn fbp_backend(
    choice: Choice,
    devices: Option<&str>,
    kernel: Option<&str>,
) -> Result<FbpBackend> {
    let open = || -> Result<FbpBackend> {
        let kernel = parse_kernel(kernel)?;
        let gpus = open_gpus(devices, kernel)?;
        let backend: Arc<dyn Backend> = gpus.clone();
        Ok((backend, Some(gpus)))
    };
    let cpu = || -> FbpBackend { (Arc::new(CpuBackend::new()), None) };
    match choice {
        Choice::Cpu => Ok(cpu()),
        Choice::Cuda => open(),
        Choice::Auto => match open() {
            Ok(b) => Ok(b),
            Err(Error::Value(m)) => Err(Error::Value(m)),
            Err(_) => Ok(cpu()),
        },
    }
}

/// The cone-beam (FDK) backend for `choice`: one GPU, or the CPU.
pub fn cone_backend(choice: Choice, devices: Option<&str>) -> Result<Box<dyn ConeBackend>> {
    match choice {
        Choice::Cpu => Ok(Box::new(CpuBackend::new())),
        Choice::Cuda => Ok(Box::new(open_gpu(devices)?)),
        Choice::Auto => match open_gpu(devices) {
            Ok(b) => Ok(Box::new(b)),
            Err(_) => Ok(Box::new(CpuBackend::new())),
        },
    }
}

/// Whether a GPU is usable, for `auto` choices of methods that run there.
pub fn gpu_usable() -> bool {
    tomors_cuda::device_count().is_ok_and(|n| n > 0)
}

/// `tomors.devices()`: the usable CUDA devices, or why there are none.
#[pyfunction]
pub fn devices(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let found = compute(py, || {
        let n = match tomors_cuda::device_count() {
            Ok(n) => n,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let mut list = Vec::new();
        for i in 0..n {
            match tomors_cuda::driver::Context::new(i) {
                Ok(c) => list.push(Ok((i, c.name.clone(), c.cc, c.sm_count, c.mem_info().ok()))),
                Err(e) => list.push(Err((i, e.to_string()))),
            }
        }
        Ok(Ok(list))
    })?;
    let out = PyDict::new(py);
    let devs = PyList::empty(py);
    match found {
        Err(reason) => {
            out.set_item("usable", false)?;
            out.set_item("reason", reason)?;
        }
        Ok(list) => {
            let mut reasons = Vec::new();
            for d in list {
                match d {
                    Ok((i, name, cc, sms, mem)) => {
                        let e = PyDict::new(py);
                        e.set_item("index", i)?;
                        e.set_item("name", name)?;
                        e.set_item("compute_capability", cc)?;
                        e.set_item("multiprocessors", sms)?;
                        if let Some((free, total)) = mem {
                            e.set_item("memory_free", free)?;
                            e.set_item("memory_total", total)?;
                        }
                        devs.append(e)?;
                    }
                    Err((i, why)) => reasons.push(format!("device {i}: {why}")),
                }
            }
            out.set_item("usable", !devs.is_empty())?;
            out.set_item(
                "reason",
                if reasons.is_empty() {
                    None
                } else {
                    Some(reasons.join("; "))
                },
            )?;
        }
    }
    out.set_item("devices", devs)?;
    Ok(out)
}

/// `tomors.tune()`: times the GPU back-projection kernels on one device and
/// stores the fastest per configuration in the tuning cache (as `tomors
/// tune`); returns the entries found.
#[pyfunction]
#[pyo3(signature = (device=0, size=2048, reps=5, quick=false, out=None, dry_run=false))]
pub fn tune(
    py: Python<'_>,
    device: usize,
    size: usize,
    reps: usize,
    quick: bool,
    out: Option<PathBuf>,
    dry_run: bool,
) -> PyResult<Bound<'_, PyList>> {
    use tomors_cuda::tune::{tune as run_tune, TuneOptions};
    use tomors_cuda::tuning::TuningCache;
    if size < 64 || reps == 0 {
        return Err(value("size must be at least 64 and reps at least 1").into());
    }
    let entries = compute(py, || {
        let path = match out {
            Some(p) => p,
            None => TuningCache::default_path().ok_or_else(|| {
                Error::Runtime(
                    "no place for the tuning cache: set TOMORS_TUNING_FILE or HOME".into(),
                )
            })?,
        };
        let mut cache = TuningCache::load(&path)?;
        let opts = TuneOptions {
            device,
            size,
            reps,
            quick,
            ..TuneOptions::default()
        };
        let report = run_tune(&opts, &mut |_| {})?;
        let entries = report.entries.clone();
        if !dry_run {
            cache.merge(report.entries);
            cache.save(&path)?;
        }
        Ok(entries)
    })?;
    let list = PyList::empty(py);
    for e in entries {
        let d = PyDict::new(py);
        d.set_item("device", e.device)?;
        d.set_item("driver", e.driver)?;
        d.set_item("kernel", e.kernel)?;
        d.set_item("interp", e.interp.to_string())?;
        d.set_item("slices", e.slices)?;
        d.set_item("config", e.config.to_string())?;
        d.set_item("gups", e.gups)?;
        list.append(d)?;
    }
    Ok(list)
}
