//! Cone beam (circular orbit, flat detector): `tomors.fdk`,
//! `tomors.recon_cone` (the iterative methods) and `tomors.project_cone`.
//!
//! Projections `[angle][row][col]` (line integrals in world units),
//! volumes `[z][y][x]`, angles in radians, distances and sizes in world
//! units (e.g. mm).

use ndarray::Array3;
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray1, PyReadonlyArray3};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::cone::fdk as run_fdk;
use tomors_core::fbp::check_finite;
use tomors_core::iterative::{all_angles, cone_projector, reconstruct_cone, ProjectorKind};

use crate::args::{parse_name, Beam, ConeScan, FdkSpec, IterativeMethod};
use crate::boundary::{check_size, compute, value, Progress};
use crate::gpu::{cone_backend, open_gpu, Choice};
use crate::parallel::result_info;

/// `tomors.fdk`.
#[pyfunction]
#[pyo3(signature = (proj, theta, scan, shape, fdk, backend, devices))]
#[allow(clippy::too_many_arguments)]
pub fn fdk<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    scan: ConeScan,
    shape: Option<(usize, usize, usize)>,
    fdk: FdkSpec,
    backend: &str,
    devices: Option<String>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, f32)> {
    let proj = proj.as_array();
    let theta = theta.as_array().to_vec();
    let (out, voxel) = compute(py, || {
        let options = fdk.options()?;
        let choice = Choice::parse(backend)?;
        check_finite(proj.view(), "the projections")?;
        let (g, vol) = scan.setup(theta, proj.dim(), shape)?;
        let backend = cone_backend(choice, devices.as_deref())?;
        Ok((
            run_fdk(backend.as_ref(), proj.view(), &g, &vol, &options)?,
            vol.voxel_size,
        ))
    })?;
    Ok((out.into_pyarray(py), voxel))
}

/// `tomors.recon_cone`: the iterative methods in cone beam.
#[pyfunction]
#[pyo3(signature = (proj, theta, scan, shape, iterative, init, backend, devices, progress))]
#[allow(clippy::too_many_arguments)]
pub fn recon_cone<'py>(
    py: Python<'py>,
    proj: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    scan: ConeScan,
    shape: Option<(usize, usize, usize)>,
    iterative: IterativeMethod,
    init: Option<PyReadonlyArray3<'py, f32>>,
    backend: &str,
    devices: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, Bound<'py, PyDict>)> {
    let proj = proj.as_array();
    let theta = theta.as_array().to_vec();
    let init = init.as_ref().map(|a| a.as_array());
    let progress = Progress::new(progress);
    let (result, device, voxel) = compute(py, || {
        let (options, kind, choice, capable) = iterative.parse(Beam::Cone, Some(backend))?;
        check_finite(proj.view(), "the projections")?;
        let (g, vol) = scan.setup(theta, proj.dim(), shape)?;
        if choice.on_gpu(capable) {
            let gpu = open_gpu(devices.as_deref())?;
            let name = tomors_core::Backend::name(&gpu);
            let result = tomors_cuda::cone_sirt_cuda_with(
                &gpu,
                &g,
                &vol,
                proj.view(),
                init,
                &options,
                cone_back(kind),
                &|info: &tomors_cuda::iterative::GpuIteration| {
                    progress.report(info.iteration, options.iterations)
                },
            )
            .map(|(r, _)| r)
            .map_err(Into::into);
            return Ok((progress.finish(result)?, name, vol.voxel_size));
        }
        let p = cone_projector::<f32>(kind, &g, &vol, None)?;
        let result = reconstruct_cone(p.as_ref(), proj.view(), init, &options, &mut |info| {
            progress.report(info.iteration, options.iterations)
        })
        .map_err(Into::into);
        Ok((
            progress.finish(result)?,
            tomors_core::Backend::name(&tomors_core::cpu::CpuBackend::new()),
            vol.voxel_size,
        ))
    })?;
    let info = result_info(py, &result, &device)?;
    info.set_item("voxel_size", voxel)?;
    Ok((result.x.into_pyarray(py), info))
}

/// The GPU's back projector of the cone-beam pair `kind` (voxel-driven for
/// `voxel`, else Joseph's transpose).
pub fn cone_back(kind: ProjectorKind) -> tomors_cuda::ConeBackProjector {
    match kind {
        ProjectorKind::Voxel => tomors_cuda::ConeBackProjector::Voxel,
        _ => tomors_cuda::ConeBackProjector::Joseph,
    }
}

/// `tomors.project_cone`: cone-beam forward projection of a volume.
#[pyfunction]
#[pyo3(signature = (volume, theta, scan, detector, projector_name))]
pub fn project_cone<'py>(
    py: Python<'py>,
    volume: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    scan: ConeScan,
    detector: (usize, usize),
    projector_name: &str,
) -> PyResult<Bound<'py, PyArray3<f32>>> {
    let volume = volume.as_array();
    let theta = theta.as_array().to_vec();
    let out = compute(py, || {
        let kind = parse_name::<ProjectorKind>(projector_name)?;
        check_finite(volume.view(), "the volume")?;
        let (nz, ny, nx) = volume.dim();
        let na = theta.len();
        let (nr, nc) = detector;
        check_size("the projections", &[na, nr, nc])?;
        let (g, vol) = scan.setup(theta, (na, nr, nc), Some((nz, ny, nx)))?;
        let p = cone_projector::<f32>(kind, &g, &vol, None)?;
        let x = volume.as_standard_layout();
        let x = x
            .view()
            .into_shape_with_order((1, nz * ny, nx))
            .map_err(|e| value(e.to_string()))?;
        let mut out = Array3::<f32>::zeros((1, na, nr * nc));
        p.forward(x, &all_angles(na), out.view_mut())?;
        out.into_shape_with_order((na, nr, nc))
            .map_err(|e| value(e.to_string()))
    })?;
    Ok(out.into_pyarray(py))
}
