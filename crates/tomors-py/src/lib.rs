//! # tomors-py
//!
//! The compiled half (`tomors._native`) of the Python package `tomors`:
//! thin functions over `tomors-core`, `tomors-io` and `tomors-cuda` that
//! read numpy arrays in place, compute without the GIL and return new numpy
//! arrays. The Python half (`python/tomors/__init__.py`) holds the public
//! API: argument defaults and conversions, docstrings, progress bars.
//!
//! - [`args`]: the arguments several entry points share (the iterative
//!   method, the cone-beam scan, the filter, orders and shapes), parsed once;
//! - [`boundary`]: errors → Python exceptions, panics caught, GIL released,
//!   progress callbacks;
//! - [`parallel`]: FBP, iterative methods, forward and back projection;
//! - [`cone`]: FDK, cone-beam iterative methods and forward projection;
//! - [`operator`]: the projector object behind `tomors.Projector`;
//! - [`io`]: reading, preprocessing, centre finding, writing;
//! - [`phantom`]: phantoms with exact projections, metrics;
//! - [`gpu`]: backend choice, `devices()`, `tune()`;
//! - [`device`]: GPU arrays in and out (`__cuda_array_interface__`);
//! - [`device_ops`]: projection, back projection, FDK and the cone-beam
//!   iterative methods on GPU arrays;
//! - [`dlpack`]: DLPack export of GPU results;
//! - [`device_solve`]: the GPU's iterative methods on GPU arrays;
//! - [`timing`]: per-phase times of a call (`TOMORS_TIMING=1`).

pub mod args;
pub mod boundary;
pub mod cone;
pub mod device;
pub mod device_ops;
pub mod device_solve;
pub mod dlpack;
pub mod fourier;
pub mod gpu;
pub mod io;
pub mod operator;
pub mod parallel;
pub mod phantom;
pub mod timing;

use pyo3::prelude::*;

/// The module `tomors._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(parallel::fbp, m)?)?;
    m.add_function(wrap_pyfunction!(fourier::fourier, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::recon_iterative, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::project, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::backproject, m)?)?;
    m.add_function(wrap_pyfunction!(cone::fdk, m)?)?;
    m.add_function(wrap_pyfunction!(cone::recon_cone, m)?)?;
    m.add_function(wrap_pyfunction!(cone::project_cone, m)?)?;
    m.add_class::<operator::Operator>()?;
    m.add_function(wrap_pyfunction!(io::read, m)?)?;
    m.add_function(wrap_pyfunction!(io::normalize, m)?)?;
    m.add_function(wrap_pyfunction!(io::minus_log, m)?)?;
    m.add_function(wrap_pyfunction!(io::remove_stripes, m)?)?;
    m.add_function(wrap_pyfunction!(io::remove_zingers, m)?)?;
    m.add_function(wrap_pyfunction!(io::find_center, m)?)?;
    m.add_function(wrap_pyfunction!(io::stitch_half, m)?)?;
    m.add_function(wrap_pyfunction!(io::write, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::shepp_logan, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::shepp_logan_projections, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::shepp_logan_cone, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::disc_mask, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::nrmse, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::psnr, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::ssim, m)?)?;
    m.add_function(wrap_pyfunction!(phantom::uniform_angles, m)?)?;
    m.add_class::<device::DeviceArray>()?;
    m.add_function(wrap_pyfunction!(device::fbp_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_solve::recon_iterative_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_ops::project_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_ops::backproject_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_ops::project_cone_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_ops::fdk_device, m)?)?;
    m.add_function(wrap_pyfunction!(device_ops::recon_cone_device, m)?)?;
    m.add_function(wrap_pyfunction!(device::device_of, m)?)?;
    m.add_function(wrap_pyfunction!(device::debug_transfer_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::devices, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::tune, m)?)?;
    m.add_function(wrap_pyfunction!(gpu::release_gpus, m)?)?;
    m.add_function(wrap_pyfunction!(raise_panic, m)?)?;
    Ok(())
}

/// Panics inside the library on purpose (without the GIL, as a real
/// computation would): the tests check that this raises `RuntimeError`
/// instead of aborting the interpreter.
#[pyfunction]
fn raise_panic(py: Python<'_>) -> PyResult<()> {
    boundary::compute(py, || -> boundary::Result<()> {
        panic!("deliberate panic for the tests")
    })
}
