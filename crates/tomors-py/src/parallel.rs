//! Parallel beam: FBP and the iterative methods (`tomors.recon`), forward
//! projection (`tomors.project`) and back projection (`tomors.backproject`).
//!
//! Arrays arrive as C-contiguous float32 (the Python layer converts other
//! dtypes and orders once) and are read in place. Projections are
//! `[angle][row][col]`, or sinograms `[row][angle][col]` with
//! `sinogram_order`; volumes `[z][y][x]`.

use ndarray::{s, Array3, ArrayView3};
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray1, PyReadonlyArray3};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{check_finite, projections_to_sinograms, projections_to_sinograms_into};
use tomors_core::iterative::{
    all_angles, projector, reconstruct, IterativeResult, ProjectorKind, SolveReport,
};
use tomors_core::{Backend, CoreError, Interpolation};

use crate::args::{
    backprojection_scan, filter_spec, parallel_scan, projection_scan, report_info, Beam,
    IterativeMethod,
};
// Where they were before `args` (modules written against the old paths,
// e.g. a branch merged after this one, keep compiling).
pub use crate::args::{parallel_geometry, parse_name};
use crate::boundary::{compute, Progress, Result};
use crate::gpu::{fbp_backend, open_gpus, Choice};
use crate::timing::Phases;

/// `(angles, rows, bins)` of projections or sinograms.
fn scan_dims(tomo: &ArrayView3<'_, f32>, sinogram_order: bool) -> (usize, usize, usize) {
    crate::args::scan_dims(tomo.dim(), sinogram_order)
}

/// Sinograms `[row][angle][bin]` of rows `rows`: a view of `tomo` when it
/// is in sinogram order, else a transposed copy of those rows.
fn sinograms<'a>(
    tomo: &ArrayView3<'a, f32>,
    sinogram_order: bool,
    rows: std::ops::Range<usize>,
) -> Result<ndarray::CowArray<'a, f32, ndarray::Ix3>> {
    if sinogram_order {
        Ok((*tomo).slice_move(s![rows, .., ..]).into())
    } else {
        Ok(projections_to_sinograms(*tomo, rows)?.into())
    }
}

/// Runs `each(rows, sinograms)` over slabs of `slab` rows of `tomo`:
/// sinograms are read in place, projections transposed into one buffer
/// that every slab reuses; progress is reported after each slab. `Ok(false)`
/// when the caller cancelled (the slabs after it are not run).
pub(crate) fn for_each_slab(
    tomo: ArrayView3<'_, f32>,
    sinogram_order: bool,
    slab: usize,
    progress: &Progress,
    mut each: impl FnMut(std::ops::Range<usize>, ArrayView3<'_, f32>) -> Result<()>,
) -> Result<bool> {
    let (n_angles, n_rows, n_bins) = scan_dims(&tomo, sinogram_order);
    let slab = slab.max(1);
    let mut buf = if sinogram_order {
        Array3::<f32>::zeros((0, 0, 0))
    } else {
        Array3::<f32>::zeros((slab.min(n_rows), n_angles, n_bins))
    };
    let mut start = 0;
    while start < n_rows {
        let end = (start + slab).min(n_rows);
        let sino = if sinogram_order {
            tomo.slice(s![start..end, .., ..])
        } else {
            projections_to_sinograms_into(
                tomo,
                start..end,
                buf.slice_mut(s![..end - start, .., ..]),
            )?;
            buf.slice(s![..end - start, .., ..])
        };
        each(start..end, sino)?;
        start = end;
        if !progress.report(start, n_rows) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `tomors.recon(..., algorithm="fbp")`.
#[pyfunction]
#[pyo3(signature = (tomo, theta, center, centers, sinogram_order, filter, cutoff, padding, interp, backend, devices, kernel, slab, progress))]
#[allow(clippy::too_many_arguments)]
pub fn fbp<'py>(
    py: Python<'py>,
    tomo: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    filter: &str,
    cutoff: f32,
    padding: &str,
    interp: &str,
    backend: &str,
    devices: Option<String>,
    kernel: Option<String>,
    slab: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, String)> {
    let tomo = tomo.as_array();
    let theta = theta.as_array().to_vec();
    let progress = Progress::new(progress);
    let (out, device) = compute(py, || {
        let mut phases = Phases::new("fbp");
        let filter = filter_spec(filter, cutoff, padding)?;
        let interpolation = parse_name::<Interpolation>(interp)?;
        let choice = Choice::parse(backend)?;
        check_finite(tomo.view(), "the projections")?;
        phases.lap("check_finite");
        let (geometry, grid, n_rows) =
            parallel_scan(tomo.dim(), sinogram_order, theta, center, centers)?;
        let (backend, gpus) = fbp_backend(choice, devices.as_deref(), kernel.as_deref())?;
        phases.lap("backend");
        let mut out = Array3::<f32>::zeros((n_rows, grid.ny, grid.nx));
        phases.lap("alloc");
        let mut stages = GpuStages::default();
        let finished = for_each_slab(tomo, sinogram_order, slab, &progress, |rows, sino| {
            phases.lap("sinograms");
            backend.fbp(
                sino,
                &geometry,
                &grid,
                &filter,
                interpolation,
                out.slice_mut(s![rows, .., ..]),
            )?;
            phases.lap("backend.fbp");
            if phases.on() {
                stages.add(gpus.as_deref());
            }
            Ok(())
        })?;
        if !finished {
            return progress.finish(Err(CoreError::Cancelled.into()));
        }
        phases.note(|| stages.to_string());
        phases.print();
        Ok((out, backend.name()))
    })?;
    Ok((out.into_pyarray(py), device))
}

/// The GPU pipeline's stage times summed over the slabs of a call (for
/// `TOMORS_TIMING`).
#[derive(Default)]
struct GpuStages {
    calls: usize,
    sums: [f64; 7],
}

impl GpuStages {
    /// Adds the stage times of the last call of each GPU of `gpus`.
    fn add(&mut self, gpus: Option<&tomors_cuda::MultiCudaBackend>) {
        let Some(gpus) = gpus else {
            return;
        };
        self.calls += 1;
        for s in gpus.last_stats() {
            for (acc, v) in self.sums.iter_mut().zip([
                s.wall_ms,
                s.host_in_ms,
                s.upload_ms,
                s.filter_ms,
                s.backproject_ms,
                s.download_ms,
                s.host_out_ms,
            ]) {
                *acc += v;
            }
        }
    }
}

impl std::fmt::Display for GpuStages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.calls == 0 {
            return write!(f, "no GPU stages");
        }
        let [wall, hin, up, filt, bp, down, hout] = self.sums;
        write!(
            f,
            "GPU pipeline over {} calls (ms, summed over devices): wall {wall:.1}, host in \
             {hin:.1}, upload {up:.1}, filter {filt:.1}, back projection {bp:.1}, download \
             {down:.1}, host out {hout:.1}",
            self.calls
        )
    }
}

/// The progress of a GPU run whose slabs iterate on several GPUs at once
/// (or one after another): reports the iterations done averaged over the
/// slabs, each count once, so `progress(done, total)` counts iterations
/// as on one slab.
struct SlabProgress<'a> {
    progress: &'a Progress,
    total: usize,
    /// Iterations per slab, the last count reported, whether to stop.
    state: std::sync::Mutex<(Vec<usize>, usize, bool)>,
}

impl<'a> SlabProgress<'a> {
    fn new(progress: &'a Progress, total: usize) -> Self {
        Self {
            progress,
            total,
            state: std::sync::Mutex::new((Vec::new(), 0, false)),
        }
    }

    /// Records `info`; `false` once the callback or a signal asked to stop.
    fn report(&self, info: &tomors_cuda::iterative::GpuIteration) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.2 {
            return false;
        }
        let (slab, n) = info.slab;
        let n = n.max(1);
        if s.0.len() < n {
            s.0.resize(n, 0);
        }
        if let Some(v) = s.0.get_mut(slab) {
            *v = (*v).max(info.iteration);
        }
        let done = s.0.iter().sum::<usize>() / n;
        if done > s.1 {
            s.1 = done;
            if !self.progress.report(done, self.total) {
                s.2 = true;
                return false;
            }
        }
        true
    }
}

/// What `recon(..., return_info=True)` returns besides the volume.
pub fn result_info<'py>(
    py: Python<'py>,
    r: &IterativeResult<f32>,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let report = SolveReport {
        residuals: r.residuals.clone(),
        iterations: r.iterations,
        relaxation: r.relaxation,
        stop: r.stop,
    };
    report_info(py, &report, device)
}

/// `tomors.recon` with an iterative algorithm.
#[pyfunction]
#[pyo3(signature = (tomo, theta, center, centers, sinogram_order, iterative, init, backend, devices, progress))]
#[allow(clippy::too_many_arguments)]
pub fn recon_iterative<'py>(
    py: Python<'py>,
    tomo: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    iterative: IterativeMethod,
    init: Option<PyReadonlyArray3<'py, f32>>,
    backend: &str,
    devices: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, Bound<'py, PyDict>)> {
    let tomo = tomo.as_array();
    let theta = theta.as_array().to_vec();
    let init = init.as_ref().map(|a| a.as_array());
    let progress = Progress::new(progress);
    let (result, device) = compute(py, || {
        let (options, kind, choice, capable) = iterative.parse(Beam::Parallel, Some(backend))?;
        check_finite(tomo.view(), "the projections")?;
        let (geometry, grid, n_rows) =
            parallel_scan(tomo.dim(), sinogram_order, theta, center, centers)?;
        let sino = sinograms(&tomo, sinogram_order, 0..n_rows)?;
        if choice.on_gpu(capable) {
            let gpus = open_gpus(devices.as_deref(), tomors_cuda::KernelChoice::Auto)?;
            let names: Vec<String> = gpus.devices().iter().map(|d| d.name()).collect();
            let slabs = SlabProgress::new(&progress, options.iterations);
            let result = tomors_cuda::sirt_cuda_multi(
                &gpus,
                &geometry,
                &grid,
                sino.view(),
                init,
                &options,
                &tomors_cuda::GpuSirtOptions::default(),
                &|info: &tomors_cuda::iterative::GpuIteration| slabs.report(info),
            )
            .map(|(r, _)| r)
            .map_err(Into::into);
            return Ok((progress.finish(result)?, names.join(" + ")));
        }
        let p = projector::<f32>(kind, &geometry, &grid, None)?;
        let result = reconstruct(p.as_ref(), sino.view(), init, &options, &mut |info| {
            progress.report(info.iteration, options.iterations)
        })
        .map_err(Into::into);
        Ok((progress.finish(result)?, CpuBackend::new().name()))
    })?;
    let info = result_info(py, &result, &device)?;
    Ok((result.x.into_pyarray(py), info))
}

/// `tomors.project`: forward projection of a volume `[z][y][x]` (unit
/// pixels, detector bins of the pixel size).
#[pyfunction]
#[pyo3(signature = (volume, theta, center, centers, n_bins, projector_name, sinogram_order))]
#[allow(clippy::too_many_arguments)]
pub fn project<'py>(
    py: Python<'py>,
    volume: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    n_bins: Option<usize>,
    projector_name: &str,
    sinogram_order: bool,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let volume = volume.as_array();
    let theta = theta.as_array().to_vec();
    let out = compute(py, || {
        let kind = parse_name::<ProjectorKind>(projector_name)?;
        check_finite(volume.view(), "the volume")?;
        let nz = volume.dim().0;
        let (geometry, grid) = projection_scan(volume.dim(), theta, center, centers, n_bins)?;
        let (n_angles, n_bins) = (geometry.n_angles(), geometry.n_bins());
        let p = projector::<f32>(kind, &geometry, &grid, None)?;
        let mut out = Array3::<f32>::zeros((nz, n_angles, n_bins));
        p.forward(volume.view(), &all_angles(n_angles), out.view_mut())?;
        Ok(if sinogram_order {
            out
        } else {
            out.permuted_axes([1, 0, 2])
                .as_standard_layout()
                .into_owned()
        })
    })?;
    Ok(out.into_pyarray(py))
}

/// `tomors.backproject`: the back projection of the projector `projector_name`
/// (the exact adjoint of `project` for joseph and line) onto `n × n` slices.
#[pyfunction]
#[pyo3(signature = (tomo, theta, center, centers, sinogram_order, shape, projector_name))]
#[allow(clippy::too_many_arguments)]
pub fn backproject<'py>(
    py: Python<'py>,
    tomo: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    shape: Option<(usize, usize)>,
    projector_name: &str,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let tomo = tomo.as_array();
    let theta = theta.as_array().to_vec();
    let out = compute(py, || {
        let kind = parse_name::<ProjectorKind>(projector_name)?;
        check_finite(tomo.view(), "the projections")?;
        let (geometry, grid, n_rows) =
            backprojection_scan(tomo.dim(), sinogram_order, theta, center, centers, shape)?;
        let (n_angles, ny, nx) = (geometry.n_angles(), grid.ny, grid.nx);
        let p = projector::<f32>(kind, &geometry, &grid, None)?;
        let sino = sinograms(&tomo, sinogram_order, 0..n_rows)?;
        let mut out = Array3::<f32>::zeros((n_rows, ny, nx));
        p.back(sino.view(), &all_angles(n_angles), out.view_mut())?;
        Ok(out)
    })?;
    Ok(out.into_pyarray(py))
}
