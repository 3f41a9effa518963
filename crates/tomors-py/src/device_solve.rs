//! The iterative methods that run on the GPU (sirt, landweber, cimmino,
//! sart, block-it with Joseph's projector), on a GPU array: tomors-core's
//! [`solve`] on tomors-cuda's [`JosephStackOp`](tomors_cuda::JosephStackOp)
//! of the array's device. The projections are reordered into sinograms and
//! interleaved on the device, the iterate stays there, and the volume is
//! written to new device memory: none of the data passes through host
//! memory (only the reductions' partial sums and the projector's angle
//! tables, a few KiB, do).

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::iterative::{solve, ProjectorKind};
use tomors_core::linalg::LinearOperator;
use tomors_core::SliceGrid;
use tomors_cuda::{CudaJoseph, DeviceOrder};

use crate::boundary::{check_size, compute, value, Progress};
use crate::device::{borrow, check_device, DeviceArray, GpuIn};
use crate::gpu::gpu_backend;
use crate::parallel::{gpu_capable, iterative_options, parallel_geometry, parse_name};

/// `tomors.recon(x, theta, algorithm=...)` of a GPU array `tomo`
/// (projections `[angle][row][col]`, or sinograms with `sinogram_order`),
/// with an optional GPU array `init` (`[slice][y][x]`); `squeeze`: one
/// slice is returned as a 2-D `[y][x]` array.
#[pyfunction]
#[pyo3(signature = (tomo, squeeze, theta, center, centers, sinogram_order, algorithm, iterations, relaxation, projector_name, min, max, block_size, tolerance, init, devices, progress))]
#[allow(clippy::too_many_arguments)]
pub fn recon_iterative_device<'py>(
    py: Python<'py>,
    tomo: GpuIn,
    squeeze: bool,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    algorithm: &str,
    iterations: usize,
    relaxation: Option<f64>,
    projector_name: &str,
    min: Option<f64>,
    max: Option<f64>,
    block_size: Option<usize>,
    tolerance: Option<f64>,
    init: Option<GpuIn>,
    devices: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(DeviceArray, Bound<'py, PyDict>)> {
    let theta = theta.as_array().to_vec();
    let progress = Progress::new(progress);
    let (out, report, name) = compute(py, || {
        let options = iterative_options(
            algorithm, iterations, relaxation, min, max, block_size, tolerance, false,
        )?;
        let kind = parse_name::<ProjectorKind>(projector_name)?;
        if !gpu_capable(&options, kind) {
            return Err(value(format!(
                "a GPU array is reconstructed on its GPU, which runs fbp, and sirt, landweber, \
                 cimmino, sart and block-it with the joseph projector; {algorithm} with the \
                 {projector_name} projector runs on the CPU: pass a NumPy array (cupy.asnumpy(x))"
            )));
        }
        let shape = tomo.1;
        let (na, nr, nb) = if sinogram_order {
            (shape.1, shape.0, shape.2)
        } else {
            shape
        };
        let geometry = parallel_geometry(theta, na, nb, center, centers)?;
        let grid = SliceGrid::for_geometry(&geometry);
        check_size("the volume", &[nr, grid.ny, grid.nx])?;
        let input = borrow(tomo, nr * na * nb)?;
        check_device(input.ordinal(), devices.as_deref())?;
        let (gpus, name) = gpu_backend(input.ordinal())?;
        let p = CudaJoseph::new(&gpus.devices()[0], &geometry, &grid, 8)?;
        let op = p.operator(nr)?;
        let order = if sinogram_order {
            DeviceOrder::Sinograms
        } else {
            DeviceOrder::Projections
        };
        let b = p.stack_from_device(&input, (nr, na, nb), order)?;
        let mut x = match init {
            None => op.domain_zeros()?,
            Some(i) => {
                if i.1 != (nr, grid.ny, grid.nx) {
                    return Err(value(format!(
                        "init has shape {:?}, the volume is {:?}",
                        i.1,
                        (nr, grid.ny, grid.nx)
                    )));
                }
                let x0 = borrow(i, nr * grid.ny * grid.nx)?;
                p.stack_from_device(&x0, i.1, DeviceOrder::Sinograms)?
            }
        };
        let report = solve(&op, &b, &mut x, &options, &mut |state| {
            progress.report(state.iteration, options.iterations)
        })
        .map_err(Into::into);
        let report = progress.finish(report)?;
        drop(b);
        let out = p.stack_to_device(&x, DeviceOrder::Sinograms)?;
        let dims = if squeeze && nr == 1 {
            vec![grid.ny, grid.nx]
        } else {
            vec![nr, grid.ny, grid.nx]
        };
        Ok((DeviceArray::new(out, dims, input.ordinal()), report, name))
    })?;
    let d = PyDict::new(py);
    d.set_item("iterations", report.iterations)?;
    d.set_item("relaxation", report.relaxation)?;
    d.set_item("residuals", report.residuals.clone())?;
    d.set_item("stop", format!("{:?}", report.stop).to_ascii_lowercase())?;
    d.set_item("device", name)?;
    Ok((out, d))
}
