//! The arguments several entry points take alike, parsed and checked in one
//! place: names ([`parse_name`]), the parallel-beam and cone-beam
//! geometries ([`parallel_geometry`], [`cone_geometry`], [`cone_volume`]),
//! the iterative method ([`IterativeMethod`]) and the circular cone-beam scan
//! ([`ConeScan`]), each handed over by the Python layer as one dict; FDK's
//! filter and scan ([`FdkSpec`]); the order of projections or sinograms
//! ([`scan_dims`], [`device_order`]); the shape of a result ([`out_dims`]);
//! and what an iterative run reports ([`report_info`]).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::cone::{ConeGeometry, ConeVolume, FdkOptions, ScanMode};
use tomors_core::iterative::{
    Algorithm, Constraint, IterativeOptions, ProjectorKind, RayOrder, SolveReport, Weighting,
};
use tomors_core::{FilterKind, FilterSpec, Padding, ParallelGeometry, SliceGrid};
use tomors_cuda::DeviceOrder;

use crate::boundary::{check_size, value, Error, Result};
use crate::gpu::Choice;

/// Parses a name with the library's `FromStr` (whose error is a message).
pub fn parse_name<T: std::str::FromStr>(s: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    s.parse::<T>().map_err(|e| value(e.to_string()))
}

/// The geometry of `theta` (radians) on `n_bins` bins with the axis at
/// `center` (one for all projections) or `centers` (one per projection).
pub fn parallel_geometry(
    theta: Vec<f32>,
    n_angles: usize,
    n_bins: usize,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
) -> Result<ParallelGeometry> {
    if theta.len() != n_angles {
        return Err(value(format!(
            "theta has {} angles for {n_angles} projections",
            theta.len()
        )));
    }
    let mut g = ParallelGeometry::new(theta, n_bins)?;
    if let Some(c) = center {
        if !c.is_finite() {
            return Err(value(format!("center {c} is not finite")));
        }
        g = g.with_center(c)?;
    }
    if let Some(cs) = centers {
        g = g.with_centers(cs)?;
    }
    Ok(g)
}

/// The parallel-beam scan of projections (or sinograms, with
/// `sinogram_order`) of `shape`: the geometry of `theta`
/// ([`parallel_geometry`]), the default slice grid of the detector's width
/// and the number of slices (detector rows), the volume's size checked.
pub fn parallel_scan(
    shape: (usize, usize, usize),
    sinogram_order: bool,
    theta: Vec<f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
) -> Result<(ParallelGeometry, SliceGrid, usize)> {
    let (n_angles, n_rows, n_bins) = scan_dims(shape, sinogram_order);
    let geometry = parallel_geometry(theta, n_angles, n_bins, center, centers)?;
    let grid = SliceGrid::for_geometry(&geometry);
    check_size("the volume", &[n_rows, grid.ny, grid.nx])?;
    Ok((geometry, grid, n_rows))
}

/// The forward projection of a volume of `dim = (nz, ny, nx)` (unit
/// pixels) onto `n_bins` bins (default `nx`) at the angles `theta`: the
/// geometry ([`parallel_geometry`]) and the volume's slice grid, the
/// projections' size checked.
pub fn projection_scan(
    dim: (usize, usize, usize),
    theta: Vec<f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    n_bins: Option<usize>,
) -> Result<(ParallelGeometry, SliceGrid)> {
    let (nz, ny, nx) = dim;
    let n_bins = n_bins.unwrap_or(nx);
    let n_angles = theta.len();
    let geometry = parallel_geometry(theta, n_angles, n_bins, center, centers)?;
    let grid = SliceGrid::new(nx, ny)?;
    check_size("the projections", &[nz, n_angles, n_bins])?;
    Ok((geometry, grid))
}

/// The back projection of projections (or sinograms, with
/// `sinogram_order`) of `shape` onto slices of `out = (ny, nx)` (default
/// `n_bins × n_bins`, unit pixels): the geometry of `theta`
/// ([`parallel_geometry`]), the slice grid and the number of slices, the
/// volume's size checked.
pub fn backprojection_scan(
    shape: (usize, usize, usize),
    sinogram_order: bool,
    theta: Vec<f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    out: Option<(usize, usize)>,
) -> Result<(ParallelGeometry, SliceGrid, usize)> {
    let (n_angles, n_rows, n_bins) = scan_dims(shape, sinogram_order);
    let geometry = parallel_geometry(theta, n_angles, n_bins, center, centers)?;
    let (ny, nx) = out.unwrap_or((n_bins, n_bins));
    let grid = SliceGrid::new(nx, ny)?;
    check_size("the volume", &[n_rows, ny, nx])?;
    Ok((geometry, grid, n_rows))
}

/// A ramp-type filter from the names of its kind and padding and its
/// cutoff (a fraction of Nyquist), checked.
pub fn filter_spec(filter: &str, cutoff: f32, padding: &str) -> Result<FilterSpec> {
    let spec = FilterSpec {
        kind: parse_name::<FilterKind>(filter)?,
        cutoff,
        padding: parse_name::<Padding>(padding)?,
    };
    spec.validate()?;
    Ok(spec)
}

/// A circular cone-beam geometry (see `tomors.fdk` for the parameters).
#[allow(clippy::too_many_arguments)]
pub fn cone_geometry(
    theta: Vec<f32>,
    n_angles: usize,
    sod: f64,
    odd: f64,
    n_rows: usize,
    n_cols: usize,
    pixel_size: (f64, f64),
    principal_point: Option<(f64, f64)>,
) -> Result<ConeGeometry> {
    if theta.len() != n_angles {
        return Err(value(format!(
            "theta has {} angles for {n_angles} projections",
            theta.len()
        )));
    }
    let mut g = ConeGeometry::new(theta, sod, odd, n_rows, n_cols, pixel_size.0, pixel_size.1)?;
    if let Some((c, r)) = principal_point {
        g = g.with_principal_point(c, r)?;
    }
    Ok(g)
}

/// The volume `shape = (nz, ny, nx)` (default: `n_cols × n_cols × n_rows`
/// as the CLI) of voxels of `voxel_size` (default: the largest whose volume
/// the detector covers at every angle), checked against the geometry.
pub fn cone_volume(
    g: &ConeGeometry,
    shape: Option<(usize, usize, usize)>,
    voxel_size: Option<f32>,
) -> Result<ConeVolume> {
    let (nz, ny, nx) = shape.unwrap_or((g.n_rows(), g.n_cols(), g.n_cols()));
    check_size("the volume", &[nz, ny, nx])?;
    let v = match voxel_size {
        Some(s) => ConeVolume::new(nx, ny, nz, s)?,
        None => g.fitting_volume(nx, ny, nz)?,
    };
    g.check_volume(&v)?;
    Ok(v)
}

/// The iterative method of a call: `algorithm=` with its options and
/// `projector=` (the Python layer's dict of these keys, values converted).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct IterativeMethod {
    /// The CLI's `--algorithm` name (sirt, landweber, ..., art).
    pub algorithm: String,
    /// Iterations (at most, with a tolerance).
    pub iterations: usize,
    /// The relaxation (None: the method's default).
    pub relaxation: Option<f64>,
    /// The projection model's name.
    pub projector: String,
    /// Lower bound of the values.
    pub min: Option<f64>,
    /// Upper bound of the values.
    pub max: Option<f64>,
    /// Projections per block (sart, block-it, block-parallel).
    pub block_size: Option<usize>,
    /// Stop when the relative residual changes by less.
    pub tolerance: Option<f64>,
    /// ART's random ray order.
    pub random_order: bool,
}

/// The beam whose GPU methods a call may ask for.
#[derive(Clone, Copy)]
pub enum Beam {
    /// Parallel beam: the SIRT family and the block-sequential methods with
    /// Joseph's projector.
    Parallel,
    /// Cone beam: the SIRT family with the joseph or voxel pair, the
    /// block-sequential methods with Joseph's (the voxel pair has no block
    /// views).
    Cone,
}

impl Beam {
    /// Whether the GPU runs `options` with `kind` (as the CLI).
    fn gpu_runs(self, options: &IterativeOptions, kind: ProjectorKind) -> bool {
        match (self, &options.algorithm) {
            (Self::Parallel, Algorithm::Sirt(_) | Algorithm::BlockSequential { .. }) => {
                kind == ProjectorKind::Joseph
            }
            (Self::Cone, Algorithm::Sirt(_)) => {
                matches!(kind, ProjectorKind::Joseph | ProjectorKind::Voxel)
            }
            (Self::Cone, Algorithm::BlockSequential { .. }) => kind == ProjectorKind::Joseph,
            _ => false,
        }
    }

    /// What the GPU runs, for the messages.
    fn gpu_methods(self) -> &'static str {
        match self {
            Self::Parallel => {
                "sirt, landweber, cimmino, sart and block-it with the joseph projector"
            }
            Self::Cone => {
                "cone-beam sirt, landweber and cimmino with the joseph or voxel projector, sart \
                 and block-it with the joseph projector"
            }
        }
    }
}

impl IterativeMethod {
    /// The core's options for the CLI's `--algorithm` names and flags.
    pub fn options(&self) -> Result<IterativeOptions> {
        let name = self.algorithm.trim().to_ascii_lowercase().replace('_', "-");
        let block = |default: usize| self.block_size.unwrap_or(default);
        let algorithm = match name.as_str() {
            "sirt" => Algorithm::Sirt(Weighting::RowColumnSums),
            "landweber" => Algorithm::Sirt(Weighting::Landweber),
            "cimmino" => Algorithm::Sirt(Weighting::Cimmino),
            "sart" => Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: block(1),
            },
            "block-it" => Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: block(2),
            },
            "block-parallel" => Algorithm::BlockParallel {
                projections_per_block: block(6),
            },
            "art" => Algorithm::Art {
                order: if self.random_order {
                    RayOrder::Random { seed: 1 }
                } else {
                    RayOrder::Sequential
                },
            },
            other => {
                return Err(value(format!(
                    "unknown algorithm '{other}' (use fbp, sirt, landweber, cimmino, sart, block-it, block-parallel or art)"
                )))
            }
        };
        if self.block_size.is_some()
            && !matches!(name.as_str(), "sart" | "block-it" | "block-parallel")
        {
            return Err(value("block_size is for sart, block-it and block-parallel"));
        }
        if self.random_order && name != "art" {
            return Err(value("random_order is for art"));
        }
        Ok(IterativeOptions {
            algorithm,
            iterations: self.iterations,
            relaxation: self.relaxation,
            constraint: Constraint {
                min: self.min,
                max: self.max,
            },
            tolerance: self.tolerance,
            track_residual: true,
        })
    }

    /// The options, the projector, the backend and whether the GPU of
    /// `beam` runs the method: `backend` is the call's `backend=` (None for
    /// a GPU array, which runs on its GPU). Refused, naming what the GPU
    /// runs, when the GPU must run a method it does not.
    pub fn parse(
        &self,
        beam: Beam,
        backend: Option<&str>,
    ) -> Result<(IterativeOptions, ProjectorKind, Choice, bool)> {
        let options = self.options()?;
        let kind = parse_name::<ProjectorKind>(&self.projector)?;
        let choice = backend.map_or(Ok(Choice::Cuda), Choice::parse)?;
        let capable = beam.gpu_runs(&options, kind);
        if choice == Choice::Cuda && !capable {
            return Err(self.cpu_only(beam, backend.is_none()));
        }
        Ok((options, kind, choice, capable))
    }

    /// The refusal of a method the GPU does not run.
    fn cpu_only(&self, beam: Beam, gpu_array: bool) -> Error {
        let (algorithm, projector) = (&self.algorithm, &self.projector);
        let runs = beam.gpu_methods();
        value(if gpu_array {
            let fbp = match beam {
                Beam::Parallel => "fbp, and ",
                Beam::Cone => "",
            };
            format!(
                "a GPU array is reconstructed on its GPU, which runs {fbp}{runs}; {algorithm} \
                 with the {projector} projector runs on the CPU: pass a NumPy array \
                 (cupy.asnumpy(x))"
            )
        } else {
            format!(
                "backend 'cuda' runs {runs}; {algorithm} with the {projector} projector runs on \
                 the CPU (use backend 'cpu' or 'auto')"
            )
        })
    }
}

/// A circular cone-beam scan (see `tomors.fdk` for the parameters): the
/// Python layer's dict of these keys, values converted.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct ConeScan {
    /// Source to rotation axis.
    pub sod: f64,
    /// Rotation axis to detector.
    pub odd: f64,
    /// Detector pixel (width, height).
    pub pixel_size: (f64, f64),
    /// The principal point (column, row), default the detector's centre.
    pub principal_point: Option<(f64, f64)>,
    /// The voxel side (default: the largest the detector covers).
    pub voxel_size: Option<f32>,
}

impl ConeScan {
    /// The geometry of `theta` over projections `(angles, rows, cols)` and
    /// the volume of `shape` (see [`cone_volume`]).
    pub fn setup(
        &self,
        theta: Vec<f32>,
        (na, nr, nc): (usize, usize, usize),
        shape: Option<(usize, usize, usize)>,
    ) -> Result<(ConeGeometry, ConeVolume)> {
        let g = cone_geometry(
            theta,
            na,
            self.sod,
            self.odd,
            nr,
            nc,
            self.pixel_size,
            self.principal_point,
        )?;
        let vol = cone_volume(&g, shape, self.voxel_size)?;
        Ok((g, vol))
    }
}

/// FDK's filter and scan: the Python layer's dict of these keys, values
/// converted.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct FdkSpec {
    /// The filter's name.
    pub filter: String,
    /// Its cutoff (a fraction of Nyquist).
    pub cutoff: f32,
    /// The padding's name.
    pub padding: String,
    /// `None` finds out, `Some(true)` a short scan (Parker weights),
    /// `Some(false)` a full one.
    pub short_scan: Option<bool>,
}

impl FdkSpec {
    /// The core's FDK options, the filter checked.
    pub fn options(&self) -> Result<FdkOptions> {
        let filter = filter_spec(&self.filter, self.cutoff, &self.padding)?;
        let scan = match self.short_scan {
            None => ScanMode::Auto,
            Some(true) => ScanMode::Short,
            Some(false) => ScanMode::Full,
        };
        Ok(FdkOptions {
            filter,
            scan,
            slab: 0,
        })
    }
}

/// `(angles, rows, bins)` of projections of `shape`, or of sinograms with
/// `sinogram_order`.
pub fn scan_dims(shape: (usize, usize, usize), sinogram_order: bool) -> (usize, usize, usize) {
    let (a, b, c) = shape;
    if sinogram_order {
        (b, a, c)
    } else {
        (a, b, c)
    }
}

/// The device order of projections, or of sinograms with `sinogram_order`.
pub fn device_order(sinogram_order: bool) -> DeviceOrder {
    if sinogram_order {
        DeviceOrder::Sinograms
    } else {
        DeviceOrder::Projections
    }
}

/// The shape of `n` slices of `ny × nx`: one slice as a 2-D array with
/// `squeeze`.
pub fn out_dims(squeeze: bool, n: usize, ny: usize, nx: usize) -> Vec<usize> {
    if squeeze && n == 1 {
        vec![ny, nx]
    } else {
        vec![n, ny, nx]
    }
}

/// What `return_info=True` returns besides the volume: the run's report and
/// the device's name.
pub fn report_info<'py>(
    py: Python<'py>,
    r: &SolveReport,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("iterations", r.iterations)?;
    d.set_item("relaxation", r.relaxation)?;
    d.set_item("residuals", r.residuals.clone())?;
    d.set_item("stop", format!("{:?}", r.stop).to_ascii_lowercase())?;
    d.set_item("device", device)?;
    Ok(d)
}
