//! Direct Fourier reconstruction by gridding (`tomors.recon(...,
//! method="fourier")`, the CLI's `--method fourier`): the FBP of the default
//! method computed in O(n² log n) per slice (docs/fourier.md), on the GPU or
//! the CPU, slab by slab as the CLI does.

use ndarray::{s, Array3};
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray1, PyReadonlyArray3};
use pyo3::prelude::*;
use tomors_core::fbp::check_finite;
use tomors_core::fourier::FourierOptions;
use tomors_core::CoreError;

use crate::args::{filter_spec, parallel_scan};
use crate::boundary::{compute, Progress};
use crate::gpu::{fbp_backend, Choice};
use crate::parallel::for_each_slab;

/// `tomors.recon(..., algorithm="fbp", method="fourier")`.
#[pyfunction]
#[pyo3(signature = (tomo, theta, center, centers, sinogram_order, filter, cutoff, padding, backend, devices, slab, progress))]
#[allow(clippy::too_many_arguments)]
pub fn fourier<'py>(
    py: Python<'py>,
    tomo: PyReadonlyArray3<'py, f32>,
    theta: PyReadonlyArray1<'py, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    filter: &str,
    cutoff: f32,
    padding: &str,
    backend: &str,
    devices: Option<String>,
    slab: usize,
    progress: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, String)> {
    let tomo = tomo.as_array();
    let theta = theta.as_array().to_vec();
    let progress = Progress::new(progress);
    let (out, device) = compute(py, || {
        let options = FourierOptions {
            filter: filter_spec(filter, cutoff, padding)?,
            ..FourierOptions::default()
        };
        let choice = Choice::parse(backend)?;
        check_finite(tomo.view(), "the projections")?;
        let (geometry, grid, n_rows) =
            parallel_scan(tomo.dim(), sinogram_order, theta, center, centers)?;
        let (backend, _) = fbp_backend(choice, devices.as_deref(), None)?;
        let mut out = Array3::<f32>::zeros((n_rows, grid.ny, grid.nx));
        let finished = for_each_slab(tomo, sinogram_order, slab, &progress, |rows, sino| {
            backend.fourier(
                sino,
                &geometry,
                &grid,
                &options,
                out.slice_mut(s![rows, .., ..]),
            )?;
            Ok(())
        })?;
        if !finished {
            return progress.finish(Err(CoreError::Cancelled.into()));
        }
        Ok((out, backend.name()))
    })?;
    Ok((out.into_pyarray(py), device))
}
