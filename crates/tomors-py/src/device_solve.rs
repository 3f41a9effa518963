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
use tomors_core::iterative::{solve, IterativeOptions, SolveReport};
use tomors_core::linalg::LinearOperator;
use tomors_cuda::{CudaJoseph, DeviceOrder};

use crate::args::{
    device_order, out_dims, parallel_scan, report_info, scan_dims, Beam, IterativeMethod,
};
use crate::boundary::{compute, Progress, Result};
use crate::device::{borrow_init, open_on_device, DeviceArray, GpuIn};

/// `tomors.recon(x, theta, algorithm=...)` of a GPU array `tomo`
/// (projections `[angle][row][col]`, or sinograms with `sinogram_order`),
/// with an optional GPU array `init` (`[slice][y][x]`); `squeeze`: one
/// slice is returned as a 2-D `[y][x]` array.
#[pyfunction]
#[pyo3(signature = (tomo, squeeze, theta, center, centers, sinogram_order, iterative, init, devices, progress))]
#[allow(clippy::too_many_arguments)]
pub fn recon_iterative_device<'py>(
    py: Python<'py>,
    tomo: GpuIn,
    squeeze: bool,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    iterative: IterativeMethod,
    init: Option<GpuIn>,
    devices: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(DeviceArray, Bound<'py, PyDict>)> {
    let theta = theta.as_array().to_vec();
    let progress = Progress::new(progress);
    let (out, report, name) = compute(py, || {
        let (options, ..) = iterative.parse(Beam::Parallel, None)?;
        let (na, nr, nb) = scan_dims(tomo.1, sinogram_order);
        let (geometry, grid, _) = parallel_scan(tomo.1, sinogram_order, theta, center, centers)?;
        let (input, gpus, name) = open_on_device(tomo, nr * na * nb, devices.as_deref())?;
        let p = CudaJoseph::new(&gpus.devices()[0], &geometry, &grid, 8)?;
        let op = p.operator(nr)?;
        let order = device_order(sinogram_order);
        let b = p.stack_from_device(&input, (nr, na, nb), order)?;
        let dims = (nr, grid.ny, grid.nx);
        let mut x = match borrow_init(init, dims)? {
            None => op.domain_zeros()?,
            Some(x0) => p.stack_from_device(&x0, dims, DeviceOrder::Sinograms)?,
        };
        let report = solve_reported(&op, &b, &mut x, &options, &progress)?;
        drop(b);
        let out = p.stack_to_device(&x, DeviceOrder::Sinograms)?;
        let dims = out_dims(squeeze, nr, grid.ny, grid.nx);
        Ok((DeviceArray::new(out, dims, input.ordinal()), report, name))
    })?;
    Ok((out, report_info(py, &report, &name)?))
}

/// tomors-core's [`solve`] of `op·x = b` from `x`, each iteration reported
/// to `progress` (whose callback or a signal may stop it).
pub(crate) fn solve_reported<O: LinearOperator>(
    op: &O,
    b: &O::Range,
    x: &mut O::Domain,
    options: &IterativeOptions,
    progress: &Progress,
) -> Result<SolveReport> {
    let report = solve(op, b, x, options, &mut |state| {
        progress.report(state.iteration, options.iterations)
    })
    .map_err(Into::into);
    progress.finish(report)
}
