//! Forward and back projection, FDK and the cone-beam iterative methods on
//! GPU arrays (`tomors.project`, `backproject`, `project_cone`, `fdk`,
//! `recon_cone` given a CuPy, Numba or PyTorch array or any DLPack
//! producer): the array is read in place on its device, the result is
//! written to new device memory on the same device ([`DeviceArray`]), and
//! neither passes through host memory (only angle tables, weights and
//! reductions' partial sums, a few KiB, do).
//!
//! Each runs on the GPU backend opened once per process for the array's
//! device ([`gpu_backend`]): Joseph's pair ([`CudaJoseph`],
//! [`CudaConeJoseph`]), the FBP engine's unfiltered back projection (the
//! `voxel` back projection) and [`CudaBackend::fdk_foreign`](tomors_cuda::CudaBackend::fdk_foreign).

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::iterative::{all_angles, ProjectorKind};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::Interpolation;
use tomors_cuda::{CudaConeJoseph, CudaJoseph, DeviceOrder, DeviceVec, OnQueue};

use crate::args::{
    backprojection_scan, device_order, out_dims, parse_name, projection_scan, report_info,
    scan_dims, Beam, ConeScan, FdkSpec, IterativeMethod,
};
use crate::boundary::{check_size, compute, value, Progress, Result};
use crate::cone::cone_back;
use crate::device::{borrow_init, open_on_device, DeviceArray, GpuIn};
use crate::device_solve::solve_reported;

/// Checks that a vector read from device memory is finite (the host
/// paths check their input too).
fn check_finite_vec<V: Vector>(v: &V, what: &str) -> Result<()> {
    if !v.all_finite()? {
        return Err(value(format!("{what} has a non-finite value")));
    }
    Ok(())
}

/// The parallel-beam projection model a GPU array can use: Joseph's
/// (the `voxel` model's forward projection is Joseph's too).
fn gpu_projector(name: &str, back: bool) -> Result<ProjectorKind> {
    let kind = parse_name::<ProjectorKind>(name)?;
    match kind {
        ProjectorKind::Joseph | ProjectorKind::Voxel => Ok(kind),
        _ => Err(value(format!(
            "the GPU {} the joseph and voxel models; the {name} projector runs on the CPU: \
             pass a NumPy array (cupy.asnumpy(x))",
            if back {
                "back-projects with"
            } else {
                "projects with"
            }
        ))),
    }
}

/// `tomors.project` of a GPU array `volume` (`[z][y][x]`): projections
/// `[angle][row][bin]`, or sinograms `[row][angle][bin]` with
/// `sinogram_order`, in new device memory.
#[pyfunction]
#[pyo3(signature = (volume, theta, center, centers, n_bins, projector_name, sinogram_order, squeeze, devices))]
#[allow(clippy::too_many_arguments)]
pub fn project_device(
    py: Python<'_>,
    volume: GpuIn,
    theta: PyReadonlyArray1<'_, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    n_bins: Option<usize>,
    projector_name: &str,
    sinogram_order: bool,
    squeeze: bool,
    devices: Option<String>,
) -> PyResult<DeviceArray> {
    let theta = theta.as_array().to_vec();
    compute(py, || {
        gpu_projector(projector_name, false)?;
        let (nz, ny, nx) = volume.1;
        let (geometry, grid) = projection_scan(volume.1, theta, center, centers, n_bins)?;
        let (na, nb) = (geometry.n_angles(), geometry.n_bins());
        let (input, gpus, _) = open_on_device(volume, nz * ny * nx, devices.as_deref())?;
        let p = CudaJoseph::new(&gpus.devices()[0], &geometry, &grid, 8)?;
        let op = p.operator(nz)?;
        let x = p.stack_from_device(&input, (nz, ny, nx), DeviceOrder::Sinograms)?;
        check_finite_vec(&x, "the volume")?;
        let all = all_angles(na);
        let mut y = op.range_zeros(&all)?;
        op.forward(&x, &all, &mut y)?;
        drop(x);
        let (order, dims) = if squeeze && nz == 1 {
            (DeviceOrder::Sinograms, vec![na, nb])
        } else if sinogram_order {
            (DeviceOrder::Sinograms, vec![nz, na, nb])
        } else {
            (DeviceOrder::Projections, vec![na, nz, nb])
        };
        let out = p.stack_to_device(&y, order)?;
        Ok(DeviceArray::new(out, dims, input.ordinal()))
    })
}

/// `tomors.backproject` of a GPU array `tomo` (projections
/// `[angle][row][bin]`, or sinograms with `sinogram_order`): Joseph's
/// transpose, or the FBP engine's unfiltered voxel-driven back projection
/// (`voxel`), into new device memory `[row][y][x]`.
#[pyfunction]
#[pyo3(signature = (tomo, theta, center, centers, sinogram_order, shape, projector_name, squeeze, devices))]
#[allow(clippy::too_many_arguments)]
pub fn backproject_device(
    py: Python<'_>,
    tomo: GpuIn,
    theta: PyReadonlyArray1<'_, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    shape: Option<(usize, usize)>,
    projector_name: &str,
    squeeze: bool,
    devices: Option<String>,
) -> PyResult<DeviceArray> {
    let theta = theta.as_array().to_vec();
    compute(py, || {
        let kind = gpu_projector(projector_name, true)?;
        let (na, nr, nb) = scan_dims(tomo.1, sinogram_order);
        let (geometry, grid, _) =
            backprojection_scan(tomo.1, sinogram_order, theta, center, centers, shape)?;
        let (ny, nx) = (grid.ny, grid.nx);
        let (input, gpus, _) = open_on_device(tomo, nr * na * nb, devices.as_deref())?;
        let order = device_order(sinogram_order);
        let dims = out_dims(squeeze, nr, ny, nx);
        if kind == ProjectorKind::Voxel {
            // The voxel-driven back projection is FBP's without the filter
            // (scale 1 with unit pixels and bins, as the CPU's).
            let out = gpus.devices()[0].fbp_device(
                &input,
                order,
                nr,
                &geometry,
                &grid,
                None,
                Interpolation::Linear,
            )?;
            return Ok(DeviceArray::new(out, dims, input.ordinal()));
        }
        let p = CudaJoseph::new(&gpus.devices()[0], &geometry, &grid, 8)?;
        let op = p.operator(nr)?;
        let y = p.stack_from_device(&input, (nr, na, nb), order)?;
        check_finite_vec(&y, "the projections")?;
        let mut x = op.domain_zeros()?;
        op.backward(&y, &all_angles(na), &mut x)?;
        drop(y);
        let out = p.stack_to_device(&x, DeviceOrder::Sinograms)?;
        Ok(DeviceArray::new(out, dims, input.ordinal()))
    })
}

/// `tomors.project_cone` of a GPU array `volume` (`[z][y][x]`): cone-beam
/// projections `[angle][row][col]` in new device memory (Joseph's
/// projector; the voxel model projects with it too).
#[pyfunction]
#[pyo3(signature = (volume, theta, scan, detector, projector_name, devices))]
pub fn project_cone_device(
    py: Python<'_>,
    volume: GpuIn,
    theta: PyReadonlyArray1<'_, f32>,
    scan: ConeScan,
    detector: (usize, usize),
    projector_name: &str,
    devices: Option<String>,
) -> PyResult<DeviceArray> {
    let theta = theta.as_array().to_vec();
    compute(py, || {
        gpu_projector(projector_name, false)?;
        let (nz, ny, nx) = volume.1;
        let na = theta.len();
        let (nr, nc) = detector;
        check_size("the projections", &[na, nr, nc])?;
        let (g, vol) = scan.setup(theta, (na, nr, nc), Some((nz, ny, nx)))?;
        let (input, gpus, _) = open_on_device(volume, nz * ny * nx, devices.as_deref())?;
        let p = CudaConeJoseph::new(&gpus.devices()[0], &g, &vol)?;
        let op = p.operator();
        let x = DeviceVec::flat_from_device(p.queue(), &input, (nz, ny, nx), "the volume")?;
        check_finite_vec(&x, "the volume")?;
        let all = all_angles(na);
        let mut y = op.range_zeros(&all)?;
        op.forward(&x, &all, &mut y)?;
        Ok(DeviceArray::new(
            y.into_flat_buffer()?,
            vec![na, nr, nc],
            input.ordinal(),
        ))
    })
}

/// `tomors.fdk` of a GPU array `proj` (`[angle][row][col]`): the volume
/// `[z][y][x]` in new device memory, and the voxel size.
#[pyfunction]
#[pyo3(signature = (proj, theta, scan, shape, fdk, devices))]
pub fn fdk_device(
    py: Python<'_>,
    proj: GpuIn,
    theta: PyReadonlyArray1<'_, f32>,
    scan: ConeScan,
    shape: Option<(usize, usize, usize)>,
    fdk: FdkSpec,
    devices: Option<String>,
) -> PyResult<(DeviceArray, f32)> {
    let theta = theta.as_array().to_vec();
    compute(py, || {
        let options = fdk.options()?;
        let (na, nr, nc) = proj.1;
        let (g, vol) = scan.setup(theta, proj.1, shape)?;
        let (input, gpus, _) = open_on_device(proj, na * nr * nc, devices.as_deref())?;
        let out = gpus.devices()[0].fdk_foreign(&input, &g, &vol, &options)?;
        Ok((
            DeviceArray::new(out, vec![vol.nz, vol.ny, vol.nx], input.ordinal()),
            vol.voxel_size,
        ))
    })
}

/// `tomors.recon_cone` of a GPU array `proj` (`[angle][row][col]`), with
/// an optional GPU array `init` (`[z][y][x]`): tomors-core's [`solve`] on
/// the GPU's cone-beam operator of the array's device (the SIRT family
/// with the joseph or voxel pair, sart and block-it with joseph's), the
/// iterate resident there; the volume in new device memory.
#[pyfunction]
#[pyo3(signature = (proj, theta, scan, shape, iterative, init, devices, progress))]
#[allow(clippy::too_many_arguments)]
pub fn recon_cone_device<'py>(
    py: Python<'py>,
    proj: GpuIn,
    theta: PyReadonlyArray1<'py, f32>,
    scan: ConeScan,
    shape: Option<(usize, usize, usize)>,
    iterative: IterativeMethod,
    init: Option<GpuIn>,
    devices: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(DeviceArray, Bound<'py, PyDict>)> {
    let theta = theta.as_array().to_vec();
    let progress = Progress::new(progress);
    let (out, report, name, voxel) = compute(py, || {
        let (options, kind, ..) = iterative.parse(Beam::Cone, None)?;
        let (na, nr, nc) = proj.1;
        let (g, vol) = scan.setup(theta, proj.1, shape)?;
        let dims = (vol.nz, vol.ny, vol.nx);
        let (input, gpus, name) = open_on_device(proj, na * nr * nc, devices.as_deref())?;
        let p = CudaConeJoseph::with_back(&gpus.devices()[0], &g, &vol, cone_back(kind))?;
        let op = p.operator();
        let b = DeviceVec::flat_from_device(p.queue(), &input, (na, nr, nc), "the projections")?;
        let mut x = match borrow_init(init, dims)? {
            None => op.domain_zeros()?,
            Some(x0) => DeviceVec::flat_from_device(p.queue(), &x0, dims, "init")?,
        };
        let report = solve_reported(&op, &b, &mut x, &options, &progress)?;
        drop(b);
        Ok((
            DeviceArray::new(
                x.into_flat_buffer()?,
                vec![dims.0, dims.1, dims.2],
                input.ordinal(),
            ),
            report,
            name,
            vol.voxel_size,
        ))
    })?;
    let d = report_info(py, &report, &name)?;
    d.set_item("voxel_size", voxel)?;
    Ok((out, d))
}
