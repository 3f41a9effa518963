//! Phantoms with exact projections (`tomors.shepp_logan`,
//! `tomors.shepp_logan_projections`, `tomors.shepp_logan_cone`) and image
//! metrics (`tomors.nrmse`, `tomors.psnr`, `tomors.ssim`).

use ndarray::Array1;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn, PyReadonlyArray1, PyReadonlyArray2,
};
use pyo3::prelude::*;
use tomors_core::cone::{project_cone, DEFAULT_SUBPIXELS};
use tomors_core::metrics;
use tomors_core::phantom::{Phantom2d, Phantom3d};
use tomors_core::{ParallelGeometry, SliceGrid};

use crate::args::{cone_geometry, cone_volume};
use crate::boundary::{check_size, compute, value, Result};

fn check_n(n: usize) -> Result<()> {
    if n < 2 {
        return Err(value(format!("size {n} must be at least 2")));
    }
    Ok(())
}

/// `tomors.shepp_logan`: the modified Shepp–Logan phantom, `[n][n]` (2D) or
/// `[nz][n][n]` (3D), filling the slice (as `tomors phantom`).
#[pyfunction]
#[pyo3(signature = (n, nz))]
pub fn shepp_logan(
    py: Python<'_>,
    n: usize,
    nz: Option<usize>,
) -> PyResult<Bound<'_, PyArrayDyn<f32>>> {
    let out = compute(py, || {
        check_n(n)?;
        check_size("the phantom", &[nz.unwrap_or(1), n, n])?;
        let grid = SliceGrid::new(n, n)?;
        let scale = n as f64 / 2.0;
        Ok(match nz {
            None => Phantom2d::shepp_logan()
                .rasterize(&grid, scale, 8)
                .into_dyn(),
            Some(0) => return Err(value("nz must be at least 1")),
            Some(nz) => Phantom3d::shepp_logan()
                .rasterize(&grid, nz, scale, 2)
                .into_dyn(),
        })
    })?;
    Ok(out.into_pyarray(py))
}

/// `tomors.shepp_logan_projections`: exact parallel-beam projections of
/// the phantom of `shepp_logan(n, nz)`: `[angle][bin]` or
/// `[angle][row][bin]`.
#[pyfunction]
#[pyo3(signature = (theta, n, nz))]
pub fn shepp_logan_projections<'py>(
    py: Python<'py>,
    theta: PyReadonlyArray1<'py, f32>,
    n: usize,
    nz: Option<usize>,
) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let theta = theta.as_array().to_vec();
    let out = compute(py, || {
        check_n(n)?;
        check_size("the projections", &[theta.len(), nz.unwrap_or(1), n])?;
        let g = ParallelGeometry::new(theta, n)?;
        let scale = n as f64 / 2.0;
        Ok(match nz {
            None => Phantom2d::shepp_logan().project(&g, scale).into_dyn(),
            Some(0) => return Err(value("nz must be at least 1")),
            Some(nz) => Phantom3d::shepp_logan()
                .project(&g, nz, 1.0, scale)
                .into_dyn(),
        })
    })?;
    Ok(out.into_pyarray(py))
}

/// `tomors.shepp_logan_cone`: exact cone-beam projections `[angle][row][col]`
/// of the 3D phantom filling the default volume, the phantom rasterised on
/// that volume `[z][y][x]`, and its voxel size (as `tomors phantom
/// --geometry cone`).
#[pyfunction]
#[pyo3(signature = (theta, sod, odd, pixel_size, detector, principal_point))]
#[allow(clippy::type_complexity)]
pub fn shepp_logan_cone<'py>(
    py: Python<'py>,
    theta: PyReadonlyArray1<'py, f32>,
    sod: f64,
    odd: f64,
    pixel_size: (f64, f64),
    detector: (usize, usize),
    principal_point: Option<(f64, f64)>,
) -> PyResult<(Bound<'py, PyArray3<f32>>, Bound<'py, PyArray3<f32>>, f32)> {
    let theta = theta.as_array().to_vec();
    let (p, v, s) = compute(py, || {
        let na = theta.len();
        let (nr, nc) = detector;
        check_size("the projections", &[na, nr, nc])?;
        let g = cone_geometry(theta, na, sod, odd, nr, nc, pixel_size, principal_point)?;
        let vol = cone_volume(&g, None, None)?;
        let phantom = Phantom3d::shepp_logan();
        let scale = vol.nx.min(vol.nz) as f64 * vol.voxel_size as f64 / 2.0;
        let proj = project_cone(&phantom, &g, scale, DEFAULT_SUBPIXELS)?;
        let volume = phantom.rasterize(&vol.slice_grid(), vol.nz, scale, 2);
        Ok((proj, volume, vol.voxel_size))
    })?;
    Ok((p.into_pyarray(py), v.into_pyarray(py), s))
}

/// `tomors.disc_mask`: pixels within `radius · min(ny, nx)` of the centre.
#[pyfunction]
pub fn disc_mask(py: Python<'_>, ny: usize, nx: usize, radius: f64) -> Bound<'_, PyArray2<bool>> {
    metrics::disc_mask(ny, nx, radius).into_pyarray(py)
}

/// A metric of `tomors_core::metrics` with a mask.
type MetricFn = fn(
    ndarray::ArrayView2<'_, f32>,
    ndarray::ArrayView2<'_, f32>,
    Option<&ndarray::Array2<bool>>,
) -> tomors_core::Result<f64>;

/// The metrics' common argument handling.
fn metric<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    reference: PyReadonlyArray2<'py, f32>,
    mask: Option<PyReadonlyArray2<'py, bool>>,
    f: MetricFn,
) -> PyResult<f64> {
    let (x, r) = (x.as_array(), reference.as_array());
    let mask = mask.map(|m| m.as_array().to_owned());
    compute(py, || Ok(f(x, r, mask.as_ref())?))
}

/// `tomors.nrmse`.
#[pyfunction]
#[pyo3(signature = (x, reference, mask))]
pub fn nrmse<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    reference: PyReadonlyArray2<'py, f32>,
    mask: Option<PyReadonlyArray2<'py, bool>>,
) -> PyResult<f64> {
    metric(py, x, reference, mask, metrics::nrmse)
}

/// `tomors.psnr`.
#[pyfunction]
#[pyo3(signature = (x, reference, mask))]
pub fn psnr<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    reference: PyReadonlyArray2<'py, f32>,
    mask: Option<PyReadonlyArray2<'py, bool>>,
) -> PyResult<f64> {
    metric(py, x, reference, mask, metrics::psnr)
}

/// `tomors.ssim`.
#[pyfunction]
pub fn ssim<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f32>,
    reference: PyReadonlyArray2<'py, f32>,
) -> PyResult<f64> {
    let (x, r) = (x.as_array(), reference.as_array());
    compute(py, || Ok(metrics::ssim(x, r)?))
}

/// `tomors.angles`: `n` angles evenly spaced over `[0, range)` radians.
#[pyfunction]
pub fn uniform_angles(py: Python<'_>, n: usize, range: f32) -> Bound<'_, PyArray1<f32>> {
    Array1::from(tomors_core::geometry::uniform_angles(n, range)).into_pyarray(py)
}
