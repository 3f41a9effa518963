//! `tomors.Projector`'s native half: a tomors-core
//! [`LinearOperator`] (the forward projection `A` and its back projection
//! `B`, `B = Aᵀ` for the matched models) held for repeated use, on the CPU
//! (every projector of tomors-core through
//! [`StackOperator`]) or on one GPU
//! (tomors-cuda's [`JosephStackOp`](tomors_cuda::JosephStackOp) and
//! [`ConeOp`](tomors_cuda::ConeOp)). Vectors come from NumPy arrays or
//! from GPU arrays (a device pointer), and go back the same way.
//!
//! Parallel beam: images `[slice][y][x]` ↔ sinograms `[slice][angle][bin]`.
//! Cone beam: volumes `[z][y][x]` ↔ projections `[angle][row][col]`.

use std::sync::Mutex;

use ndarray::{Array3, ArrayView3};
use numpy::{IntoPyArray, PyArray3, PyReadonlyArray1, PyReadonlyArray3};
use pyo3::prelude::*;
use tomors_core::fbp::check_finite;
use tomors_core::iterative::{
    all_angles, cone_projector, projector, ConeOperator, Projector, ProjectorKind, StackOperator,
};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::SliceGrid;
use tomors_cuda::{
    ConeBackProjector, CudaConeJoseph, CudaJoseph, DeviceBuffer, DeviceOrder, DeviceVec,
    ForeignDevicePtr, OnQueue,
};

use crate::args::{cone_geometry, cone_volume, parallel_geometry, parse_name};
use crate::boundary::{check_size, compute, value, Error, Result};
use crate::device::DeviceArray;
use crate::gpu::{gpu_backend, Choice};

/// The operator and where it runs.
enum Model {
    /// A CPU projector on `slices` slices.
    CpuParallel(Box<dyn Projector<f32>>),
    /// A CPU cone-beam projector (one "slice": the volume as `[z·y][x]`,
    /// the projections as `[angle][row·col]`).
    CpuCone(Box<dyn ConeOperator<f32>>),
    /// Joseph's pair on one GPU (a lock: one call at a time on its stream).
    CudaParallel(Box<Mutex<CudaJoseph>>),
    /// Joseph's cone-beam projector (and the chosen back projection) on one GPU.
    CudaCone(Box<Mutex<CudaConeJoseph>>),
}

/// Which side of the operator a vector is on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Volume,
    Projections,
}

impl Side {
    fn what(self) -> &'static str {
        match self {
            Side::Volume => "the volume",
            Side::Projections => "the projections",
        }
    }
}

/// A vector handed over by the caller.
enum Input<'a> {
    Host(ArrayView3<'a, f32>),
    Device(ForeignDevicePtr),
}

/// A result, where the caller wants it.
enum Output {
    Host(Array3<f32>),
    Device(DeviceBuffer),
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
    matched: bool,
    name: String,
    /// The GPU's ordinal and name, for GPU operators.
    device: Option<(usize, String)>,
}

/// `y ← A·x` (`forward`) or `x ← B·y` of any linear operator whose domain
/// and range are the same vector type.
fn apply<L, V>(op: &L, x: &V, forward: bool) -> Result<V>
where
    L: LinearOperator<Domain = V, Range = V> + ?Sized,
    V: Vector,
{
    let all = all_angles(op.n_projections());
    if forward {
        let mut y = op.range_zeros(&all)?;
        op.forward(x, &all, &mut y)?;
        Ok(y)
    } else {
        let mut y = op.domain_zeros()?;
        op.backward(x, &all, &mut y)?;
        Ok(y)
    }
}

/// Checks that a vector loaded from device memory is finite (host inputs
/// are checked before, naming the element).
fn check_finite_vec<V: Vector>(v: &V, side: Side) -> Result<()> {
    if !v.all_finite()? {
        return Err(value(format!("{} has a non-finite value", side.what())));
    }
    Ok(())
}

fn reshape(a: Array3<f32>, dim: (usize, usize, usize)) -> Result<Array3<f32>> {
    a.into_shape_with_order(dim)
        .map_err(|e| value(e.to_string()))
}

impl Operator {
    fn dims(&self, side: Side) -> (usize, usize, usize) {
        match side {
            Side::Volume => self.vol,
            Side::Projections => self.proj,
        }
    }

    /// The CPU cone projector's one-slice shape of `side`.
    fn cone_flat(&self, side: Side) -> (usize, usize, usize) {
        let d = self.dims(side);
        match side {
            Side::Volume => (1, d.0 * d.1, d.2),
            Side::Projections => (1, d.0, d.1 * d.2),
        }
    }

    /// `A·x` (`forward`) or `B·y` of the NumPy array `a`, a new NumPy array.
    fn run_host<'py>(
        &self,
        py: Python<'py>,
        a: PyReadonlyArray3<'py, f32>,
        forward: bool,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        let a = a.as_array();
        let out = compute(py, || match self.run(Input::Host(a), forward, false)? {
            Output::Host(out) => Ok(out),
            Output::Device(_) => unreachable!("asked for host output"),
        })?;
        Ok(out.into_pyarray(py))
    }

    /// `A·x` (`forward`) or `B·y` of `input` (on the side `forward` reads),
    /// returned on the host or the device (`to_device`).
    fn run(&self, input: Input<'_>, forward: bool, to_device: bool) -> Result<Output> {
        let (src, dst) = if forward {
            (Side::Volume, Side::Projections)
        } else {
            (Side::Projections, Side::Volume)
        };
        let want = self.dims(src);
        if let Input::Host(x) = &input {
            if x.dim() != want {
                return Err(value(format!(
                    "{} has shape {:?}, the operator expects {want:?}",
                    src.what(),
                    x.dim()
                )));
            }
            check_finite(x.view(), src.what())?;
        }
        match &self.model {
            Model::CpuParallel(p) => {
                let Input::Host(x) = input else {
                    return Err(cpu_device_input());
                };
                let op = StackOperator::new(p.as_ref(), want.0);
                let y = apply(&op, &x.as_standard_layout().into_owned(), forward)?;
                Ok(Output::Host(y))
            }
            Model::CpuCone(p) => {
                let Input::Host(x) = input else {
                    return Err(cpu_device_input());
                };
                let op = StackOperator::new(p.as_ref(), 1);
                let x = reshape(x.as_standard_layout().into_owned(), self.cone_flat(src))?;
                let y = apply(&op, &x, forward)?;
                Ok(Output::Host(reshape(y, self.dims(dst))?))
            }
            Model::CudaParallel(p) => {
                let p = p.lock().map_err(|_| poisoned())?;
                let op = p.operator(self.vol.0)?;
                let x = match input {
                    Input::Host(x) if src == Side::Volume => p.upload_domain(x)?,
                    Input::Host(x) => p.upload_sinograms(x)?,
                    Input::Device(ptr) => {
                        let v = p.stack_from_device(&ptr, want, DeviceOrder::Sinograms)?;
                        check_finite_vec(&v, src)?;
                        v
                    }
                };
                let y = apply(&op, &x, forward)?;
                Ok(if to_device {
                    Output::Device(p.stack_to_device(&y, DeviceOrder::Sinograms)?)
                } else {
                    Output::Host(p.download(&y)?)
                })
            }
            Model::CudaCone(p) => {
                let p = p.lock().map_err(|_| poisoned())?;
                let op = p.operator();
                let x = match input {
                    Input::Host(x) if src == Side::Volume => p.upload_volume(x)?,
                    Input::Host(x) => p.upload_projections(x)?,
                    Input::Device(ptr) => {
                        let v = DeviceVec::flat_from_device(p.queue(), &ptr, want, src.what())?;
                        check_finite_vec(&v, src)?;
                        v
                    }
                };
                let y = apply(&op, &x, forward)?;
                Ok(if to_device {
                    Output::Device(y.into_flat_buffer()?)
                } else {
                    Output::Host(p.download(&y)?)
                })
            }
        }
    }

    /// `run` on a GPU array at `ptr` (C-contiguous float32 of the input
    /// side's shape), after the producer's `stream`; the result has the
    /// output side's shape, or `out_shape` (as many elements).
    fn run_device(
        &self,
        ptr: u64,
        stream: Option<u64>,
        forward: bool,
        out_shape: Option<Vec<usize>>,
    ) -> Result<DeviceArray> {
        let Some((ordinal, _)) = &self.device else {
            return Err(cpu_device_input());
        };
        let (src, dst) = if forward {
            (self.vol, self.proj)
        } else {
            (self.proj, self.vol)
        };
        // SAFETY: the Python caller holds a reference to the array for the
        // whole call, and the call waits for its work on it.
        let input = unsafe { ForeignDevicePtr::new(ptr, src.0 * src.1 * src.2 * 4) }?;
        if input.ordinal() != *ordinal {
            return Err(value(format!(
                "the GPU array lives on device {}, the operator on device {ordinal}",
                input.ordinal()
            )));
        }
        if let Some(s) = stream {
            // SAFETY: a stream handle of the array's interface (1 and 2 are
            // the default streams).
            unsafe { tomors_cuda::wait_foreign_stream(s) }?;
        }
        let shape = out_shape.unwrap_or_else(|| vec![dst.0, dst.1, dst.2]);
        if shape.iter().product::<usize>() != dst.0 * dst.1 * dst.2 {
            return Err(value(format!(
                "out_shape {shape:?} does not hold the result of shape {dst:?}"
            )));
        }
        match self.run(Input::Device(input), forward, true)? {
            Output::Device(buf) => Ok(DeviceArray::new(buf, shape, *ordinal)),
            Output::Host(_) => unreachable!("asked for device output"),
        }
    }
}

fn cpu_device_input() -> Error {
    Error::Value(
        "a CPU operator takes NumPy arrays; build it with backend='cuda' for GPU arrays".into(),
    )
}

fn poisoned() -> Error {
    Error::Runtime("the GPU operator failed in another thread (poisoned lock)".into())
}

/// Whether the operator goes on the GPU, and which device.
fn gpu_device(
    backend: &str,
    device: Option<usize>,
    supported: bool,
    what: &str,
) -> Result<Option<usize>> {
    let choice = Choice::parse(backend)?;
    if choice == Choice::Cuda && !supported {
        return Err(value(what.to_string()));
    }
    Ok(choice.on_gpu(supported).then_some(device.unwrap_or(0)))
}

#[pymethods]
impl Operator {
    /// A parallel-beam operator on `slices` slices of `ny × nx` pixels.
    #[staticmethod]
    #[pyo3(signature = (theta, n_bins, slices, ny, nx, center, centers, projector_name, backend="cpu", device=None))]
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
        backend: &str,
        device: Option<usize>,
    ) -> PyResult<Self> {
        let theta = theta.as_array().to_vec();
        compute(py, || {
            if slices == 0 {
                return Err(value("slices must be at least 1"));
            }
            let kind = parse_name::<ProjectorKind>(projector_name)?;
            let na = theta.len();
            let g = parallel_geometry(theta, na, n_bins, center, centers)?;
            let grid = SliceGrid::new(nx, ny)?;
            check_size("the volume", &[slices, ny, nx])?;
            check_size("the projections", &[slices, na, n_bins])?;
            let gpu = gpu_device(
                backend,
                device,
                kind == ProjectorKind::Joseph,
                &format!(
                    "backend 'cuda' runs the joseph projector; the {projector_name} projector \
                     runs on the CPU (use backend 'cpu')"
                ),
            )?;
            let dims = ((slices, ny, nx), (slices, na, n_bins));
            if let Some(ordinal) = gpu {
                let (gpus, name) = gpu_backend(ordinal)?;
                let p = CudaJoseph::new(&gpus.devices()[0], &g, &grid, 8)?;
                // Checks the slice count against the device stack's limit.
                p.operator(slices)?;
                return Ok(Self {
                    model: Model::CudaParallel(Box::new(Mutex::new(p))),
                    vol: dims.0,
                    proj: dims.1,
                    voxel_size: 1.0,
                    matched: true,
                    name: "cuda joseph".into(),
                    device: Some((ordinal, name)),
                });
            }
            let p = projector::<f32>(kind, &g, &grid, None)?;
            Ok(Self {
                matched: p.is_matched(),
                name: p.name().to_string(),
                model: Model::CpuParallel(p),
                vol: dims.0,
                proj: dims.1,
                voxel_size: 1.0,
                device: None,
            })
        })
    }

    /// A cone-beam operator.
    #[staticmethod]
    #[pyo3(signature = (theta, sod, odd, pixel_size, detector, principal_point, shape, voxel_size, projector_name, backend="cpu", device=None))]
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
        backend: &str,
        device: Option<usize>,
    ) -> PyResult<Self> {
        let theta = theta.as_array().to_vec();
        compute(py, || {
            let kind = parse_name::<ProjectorKind>(projector_name)?;
            let na = theta.len();
            let (nr, nc) = detector;
            check_size("the projections", &[na, nr, nc])?;
            let g = cone_geometry(theta, na, sod, odd, nr, nc, pixel_size, principal_point)?;
            let vol = cone_volume(&g, shape, voxel_size)?;
            let gpu = gpu_device(
                backend,
                device,
                matches!(kind, ProjectorKind::Joseph | ProjectorKind::Voxel),
                &format!(
                    "backend 'cuda' runs the joseph and voxel cone-beam projectors; the \
                     {projector_name} projector runs on the CPU (use backend 'cpu')"
                ),
            )?;
            let dims = ((vol.nz, vol.ny, vol.nx), (na, nr, nc));
            if let Some(ordinal) = gpu {
                let (gpus, name) = gpu_backend(ordinal)?;
                let back = match kind {
                    ProjectorKind::Voxel => ConeBackProjector::Voxel,
                    _ => ConeBackProjector::Joseph,
                };
                let p = CudaConeJoseph::with_back(&gpus.devices()[0], &g, &vol, back)?;
                return Ok(Self {
                    model: Model::CudaCone(Box::new(Mutex::new(p))),
                    vol: dims.0,
                    proj: dims.1,
                    voxel_size: vol.voxel_size,
                    matched: back == ConeBackProjector::Joseph,
                    name: format!("cuda cone {}", projector_name.to_ascii_lowercase()),
                    device: Some((ordinal, name)),
                });
            }
            let p = cone_projector::<f32>(kind, &g, &vol, None)?;
            Ok(Self {
                matched: p.is_matched(),
                name: p.name().to_string(),
                model: Model::CpuCone(p),
                vol: dims.0,
                proj: dims.1,
                voxel_size: vol.voxel_size,
                device: None,
            })
        })
    }

    /// `A·x` of a NumPy array.
    fn forward<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray3<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        self.run_host(py, x, true)
    }

    /// `B·y` (`Aᵀ·y` for matched models) of a NumPy array.
    fn backward<'py>(
        &self,
        py: Python<'py>,
        y: PyReadonlyArray3<'py, f32>,
    ) -> PyResult<Bound<'py, PyArray3<f32>>> {
        self.run_host(py, y, false)
    }

    /// `A·x` of a GPU array (device pointer `ptr` of C-contiguous float32
    /// of the volume's shape; `stream`: the producer's stream to wait for),
    /// into new device memory on the same device.
    #[pyo3(signature = (ptr, stream=None, out_shape=None))]
    fn forward_device(
        &self,
        py: Python<'_>,
        ptr: u64,
        stream: Option<u64>,
        out_shape: Option<Vec<usize>>,
    ) -> PyResult<DeviceArray> {
        compute(py, || self.run_device(ptr, stream, true, out_shape))
    }

    /// `B·y` of a GPU array (as [`Operator::forward_device`]).
    #[pyo3(signature = (ptr, stream=None, out_shape=None))]
    fn backward_device(
        &self,
        py: Python<'_>,
        ptr: u64,
        stream: Option<u64>,
        out_shape: Option<Vec<usize>>,
    ) -> PyResult<DeviceArray> {
        compute(py, || self.run_device(ptr, stream, false, out_shape))
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
        self.matched
    }

    /// The projection model's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// `"cpu"` or the GPU (`"cuda:0 NVIDIA H100 ..."`).
    #[getter]
    fn backend(&self) -> String {
        match &self.device {
            None => "cpu".into(),
            Some((_, name)) => name.clone(),
        }
    }

    /// The GPU's ordinal (None on the CPU).
    #[getter]
    fn device(&self) -> Option<usize> {
        self.device.as_ref().map(|d| d.0)
    }
}
