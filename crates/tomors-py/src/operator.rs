//! `tomors.Projector`'s native half: a projector of `tomors-core` (the
//! forward projection `A` and its back projection `B`, `B = Aᵀ` for the
//! matched joseph and line models) held for repeated use.
//!
//! Parallel beam: images `[slice][y][x]` ↔ sinograms `[slice][angle][bin]`.
//! Cone beam: volumes `[z][y][x]` ↔ projections `[angle][row][col]`.

use ndarray::Array3;
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray1, PyReadonlyArray3};
use pyo3::prelude::*;
use tomors_core::fbp::check_finite;
use tomors_core::iterative::{all_angles, cone_projector, projector, ConeOperator, Projector};
use tomors_core::SliceGrid;

use crate::boundary::{check_size, compute, value, Result};
use crate::cone::{cone_geometry, cone_volume};
use crate::parallel::{parallel_geometry, parse_name};

enum Model {
    Parallel(Box<dyn Projector<f32>>),
    Cone(Box<dyn ConeOperator<f32>>),
}

/// A linear operator from volumes to projections (see the module docs).
#[pyclass(module = "tomors._native", name = "Operator", frozen)]
pub struct Operator {
    model: Model,
    /// `(slices, ny, nx)` or `(nz, ny, nx)`.
    vol: (usize, usize, usize),
    /// `(slices, angles, bins)` or `(angles, rows, cols)`.
    proj: (usize, usize, usize),
    voxel_size: f32,
}

fn check3(what: &str, got: (usize, usize, usize), want: (usize, usize, usize)) -> Result<()> {
    if got != want {
        return Err(value(format!(
            "{what} has shape {got:?}, the operator expects {want:?}"
        )));
    }
    Ok(())
}

/// `A·x` (`forward`) or `B·y` (`!forward`) of any projector model.
fn apply<P: Projector<f32> + ?Sized>(
    p: &P,
    input: ndarray::ArrayView3<'_, f32>,
    out: (usize, usize, usize),
    forward: bool,
) -> Result<Array3<f32>> {
    let mut y = Array3::<f32>::zeros(out);
    let angles = all_angles(p.n_angles());
    if forward {
        p.forward(input, &angles, y.view_mut())?;
    } else {
        p.back(input, &angles, y.view_mut())?;
    }
    Ok(y)
}

impl Operator {
    fn run(&self, x: ndarray::ArrayView3<'_, f32>, forward: bool) -> Result<Array3<f32>> {
        let (src, dst, what) = if forward {
            (self.vol, self.proj, "the volume")
        } else {
            (self.proj, self.vol, "the projections")
        };
        check3(what, x.dim(), src)?;
        check_finite(x, what)?;
        match &self.model {
            Model::Parallel(p) => apply(p.as_ref(), x, dst, forward),
            Model::Cone(p) => {
                // One "slice": the volume as [1][z·y][x], the projections
                // as [1][angle][row·col].
                let flat = |d: (usize, usize, usize), fwd_side: bool| {
                    if fwd_side {
                        (1, d.0 * d.1, d.2)
                    } else {
                        (1, d.0, d.1 * d.2)
                    }
                };
                let x = x.as_standard_layout();
                let xv = x
                    .view()
                    .into_shape_with_order(flat(src, forward))
                    .map_err(|e| value(e.to_string()))?;
                let y = apply(p.as_ref(), xv, flat(dst, !forward), forward)?;
                y.into_shape_with_order(dst)
                    .map_err(|e| value(e.to_string()))
            }
        }
    }
}

#[pymethods]
impl Operator {
    /// A parallel-beam operator on `slices` slices of `ny × nx` pixels.
    #[staticmethod]
    #[pyo3(signature = (theta, n_bins, slices, ny, nx, center, centers, projector_name))]
    #[allow(clippy::too_many_arguments)]
    fn parallel(
        py: Python<'_>,
        theta: PyReadonlyArray1<'_, f32>,
        n_bins: usize,
        slices: usize,
        ny: usize,
        nx: usize,
        center: Option<f32>,
        centers: Option<Vec<f32>>,
        projector_name: &str,
    ) -> PyResult<Self> {
        let theta = theta.as_array().to_vec();
        compute(py, || {
            if slices == 0 {
                return Err(value("slices must be at least 1"));
            }
            let kind = parse_name(projector_name)?;
            let na = theta.len();
            let g = parallel_geometry(theta, na, n_bins, center, centers)?;
            let grid = SliceGrid::new(nx, ny)?;
            check_size("the volume", &[slices, ny, nx])?;
            check_size("the projections", &[slices, na, n_bins])?;
            let p = projector::<f32>(kind, &g, &grid, None)?;
            Ok(Self {
                model: Model::Parallel(p),
                vol: (slices, ny, nx),
                proj: (slices, na, n_bins),
                voxel_size: 1.0,
            })
        })
    }

    /// A cone-beam operator.
    #[staticmethod]
    #[pyo3(signature = (theta, sod, odd, pixel_size, detector, principal_point, shape, voxel_size, projector_name))]
    #[allow(clippy::too_many_arguments)]
    fn cone(
        py: Python<'_>,
        theta: PyReadonlyArray1<'_, f32>,
        sod: f64,
        odd: f64,
        pixel_size: (f64, f64),
        detector: (usize, usize),
        principal_point: Option<(f64, f64)>,
        shape: Option<(usize, usize, usize)>,
        voxel_size: Option<f32>,
        projector_name: &str,
    ) -> PyResult<Self> {
        let theta = theta.as_array().to_vec();
        compute(py, || {
            let kind = parse_name(projector_name)?;
            let na = theta.len();
            let (nr, nc) = detector;
            check_size("the projections", &[na, nr, nc])?;
            let g = cone_geometry(theta, na, sod, odd, nr, nc, pixel_size, principal_point)?;
            let vol = cone_volume(&g, shape, voxel_size)?;
            let p = cone_projector::<f32>(kind, &g, &vol, None)?;
            Ok(Self {
                model: Model::Cone(p),
                vol: (vol.nz, vol.ny, vol.nx),
                proj: (na, nr, nc),
                voxel_size: vol.voxel_size,
            })
        })
    }

    /// `A·x`.
    fn forward<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray3<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        let x = x.as_array();
        let y = compute(py, || self.run(x, true))?;
        Ok(y.into_pyarray(py))
    }

    /// `B·y` (`Aᵀ·y` for matched models).
    fn backward<'py>(
        &self,
        py: Python<'py>,
        y: PyReadonlyArray3<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        let y = y.as_array();
        let x = compute(py, || self.run(y, false))?;
        Ok(x.into_pyarray(py))
    }

    /// The volume's shape.
    #[getter]
    fn vol_shape(&self) -> (usize, usize, usize) {
        self.vol
    }

    /// The projections' shape.
    #[getter]
    fn proj_shape(&self) -> (usize, usize, usize) {
        self.proj
    }

    /// The voxel side in world units (1 = a detector bin in parallel beam).
    #[getter]
    fn voxel_size(&self) -> f32 {
        self.voxel_size
    }

    /// Whether the back projection is the exact transpose of the forward one.
    #[getter]
    fn is_matched(&self) -> bool {
        match &self.model {
            Model::Parallel(p) => p.is_matched(),
            Model::Cone(p) => p.is_matched(),
        }
    }

    /// The projection model's name.
    #[getter]
    fn name(&self) -> &'static str {
        match &self.model {
            Model::Parallel(p) => p.name(),
            Model::Cone(p) => p.name(),
        }
    }
}
