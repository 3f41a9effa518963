//! GPU arrays in and out, with no trip through host memory.
//!
//! - [`fbp_device`]: `tomors.recon(..., algorithm="fbp")` on an array that
//!   lives on a GPU (anything with `__cuda_array_interface__`: CuPy, Numba,
//!   PyTorch CUDA tensors). The Python layer reads the interface (pointer,
//!   shape, C-contiguous float32, stream); this side checks with the driver
//!   that the pointer is device memory of the right size, finds its device,
//!   waits for the producer's stream, and runs the FBP engine's filter and
//!   back-projection kernels on that memory in place
//!   ([`tomors_cuda::CudaBackend::fbp_device`]).
//! - [`DeviceArray`]: the result, owning its device buffer; it exposes
//!   `__cuda_array_interface__` (version 3) so CuPy & co. can wrap it
//!   without a copy, and `.get()` copies it to a NumPy array.
//! - [`debug_transfer_bytes`]: bytes copied host↔device so far (the tests
//!   check that the device path copies none of the data).

use std::sync::Arc;

use numpy::{PyArrayDyn, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tomors_core::Interpolation;
use tomors_cuda::{DeviceBuffer, DeviceOrder, ForeignDevicePtr, MultiCudaBackend};

use crate::args::{filter_spec, parallel_scan, parse_name};
use crate::boundary::{compute, value, Result};
use crate::gpu::{gpu_backend, open_gpus};

/// A float32 C-contiguous array in GPU memory owned by tomors (the result
/// of a call on GPU arrays). `__cuda_array_interface__` (version 3) lets
/// CuPy, Numba or PyTorch use it in place; `.get()` copies it to NumPy.
#[pyclass(module = "tomors._native", name = "DeviceArray", frozen)]
pub struct DeviceArray {
    buf: DeviceBuffer,
    shape: Vec<usize>,
    device: usize,
}

impl DeviceArray {
    /// The array of `shape` (C order) held in `buf` on GPU `device`.
    pub(crate) fn new(buf: DeviceBuffer, shape: Vec<usize>, device: usize) -> Self {
        Self { buf, shape, device }
    }

    fn len(&self) -> usize {
        self.shape.iter().product()
    }
}

#[pymethods]
impl DeviceArray {
    /// The CUDA Array Interface, version 3: the data is ready (no stream to
    /// wait on), C-contiguous float32, writable.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", pyo3::types::PyTuple::new(py, &self.shape)?)?;
        d.set_item("typestr", "<f4")?;
        d.set_item("data", (self.buf.ptr(), false))?;
        d.set_item("strides", py.None())?;
        d.set_item("stream", py.None())?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// DLPack export (`torch.from_dlpack(r)`, `jax.dlpack.from_dlpack`,
    /// `cupy.from_dlpack`): a `dltensor` capsule over this array's memory,
    /// no copy; it keeps the array alive until its consumer lets it go. The
    /// data are complete when the call that made them returned, so any
    /// consumer `stream` may read them without waiting.
    #[pyo3(signature = (stream=None, *, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<Py<PyAny>>,
        max_version: Option<Py<PyAny>>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = (stream, max_version);
        let me = slf.get();
        if copy == Some(true) {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "tomors.DeviceArray exports its memory without copying (copy=True)",
            ));
        }
        if let Some(d) = dl_device {
            if d != (crate::dlpack::KDL_CUDA, me.device as i32) {
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "tomors.DeviceArray lives on CUDA device {}, not DLPack device {d:?}",
                    me.device
                )));
            }
        }
        crate::dlpack::capsule(
            slf.py(),
            slf.clone().into_any().unbind(),
            me.buf.ptr(),
            &me.shape,
            me.device,
        )
    }

    /// `(kDLCUDA, device)`: where the DLPack export lives.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (crate::dlpack::KDL_CUDA, self.device as i32)
    }

    /// Shape of the array.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
        pyo3::types::PyTuple::new(py, &self.shape)
    }

    /// The element type (always `"float32"`).
    #[getter]
    fn dtype(&self) -> &'static str {
        "float32"
    }

    /// The CUDA device ordinal the memory lives on.
    #[getter]
    fn device(&self) -> usize {
        self.device
    }

    /// Size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.len() * 4
    }

    /// A NumPy copy of the array (one device → host copy).
    fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let host = compute(py, || {
            let mut v = vec![0f32; self.len()];
            self.buf.download(&mut v)?;
            Ok(
                ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&self.shape), v)
                    .expect("shape matches the length"),
            )
        })?;
        Ok(PyArrayDyn::from_owned_array(py, host))
    }

    fn __len__(&self) -> usize {
        self.shape.first().copied().unwrap_or(0)
    }

    fn __repr__(&self) -> String {
        format!(
            "tomors.DeviceArray(shape={:?}, dtype=float32, device={})",
            self.shape, self.device
        )
    }
}

/// `tomors.recon(..., algorithm="fbp")` on a GPU array: `ptr` is the
/// device address of C-contiguous float32 data of `shape` (projections
/// `[angle][row][col]`, or sinograms with `sinogram_order`), `stream` the
/// producer's stream of the interface (None: nothing to wait for);
/// `squeeze`: one slice is returned as a 2-D `[y][x]` array.
#[pyfunction]
#[pyo3(signature = (ptr, shape, squeeze, stream, theta, center, centers, sinogram_order, filter, cutoff, padding, interp, devices, kernel))]
#[allow(clippy::too_many_arguments)]
pub fn fbp_device(
    py: Python<'_>,
    ptr: u64,
    shape: (usize, usize, usize),
    squeeze: bool,
    stream: Option<u64>,
    theta: PyReadonlyArray1<'_, f32>,
    center: Option<f32>,
    centers: Option<Vec<f32>>,
    sinogram_order: bool,
    filter: &str,
    cutoff: f32,
    padding: &str,
    interp: &str,
    devices: Option<String>,
    kernel: Option<String>,
) -> PyResult<(DeviceArray, String)> {
    let theta = theta.as_array().to_vec();
    let (out, shape, device, name) = compute(py, || {
        let filter = filter_spec(filter, cutoff, padding)?;
        let interpolation = parse_name::<Interpolation>(interp)?;
        let (geometry, grid, n_rows) =
            parallel_scan(shape, sinogram_order, theta, center, centers)?;
        let bytes = shape.0 * shape.1 * shape.2 * 4;
        // SAFETY: the Python caller keeps the array alive for the whole
        // call (it holds a reference), and the call waits for its work.
        let input = unsafe { ForeignDevicePtr::new(ptr, bytes) }?;
        check_device(input.ordinal(), devices.as_deref())?;
        if let Some(s) = stream {
            // SAFETY: a stream handle of the array's interface (1 and 2 are
            // the default streams).
            unsafe { tomors_cuda::wait_foreign_stream(s) }?;
        }
        let kernel = match kernel.as_deref() {
            None => tomors_cuda::KernelChoice::Auto,
            Some(k) => parse_name(k)?,
        };
        // The backend opened once per process for this device and kernel
        // choice (as for host arrays), not a new context per call.
        let gpus = open_gpus(Some(&input.ordinal().to_string()), kernel)?;
        let backend = &gpus.devices()[0];
        let order = if sinogram_order {
            DeviceOrder::Sinograms
        } else {
            DeviceOrder::Projections
        };
        let buf = backend.fbp_device(
            &input,
            order,
            n_rows,
            &geometry,
            &grid,
            Some(&filter),
            interpolation,
        )?;
        Ok((
            buf,
            if squeeze && n_rows == 1 {
                vec![grid.ny, grid.nx]
            } else {
                vec![n_rows, grid.ny, grid.nx]
            },
            input.ordinal(),
            tomors_core::Backend::name(backend),
        ))
    })?;
    Ok((
        DeviceArray {
            buf: out,
            shape,
            device,
        },
        name,
    ))
}

/// A GPU array handed over by the Python layer: device pointer, shape and
/// the producer's stream.
pub(crate) type GpuIn = (u64, (usize, usize, usize), Option<u64>);

/// Borrows the array `a` of `floats` floats after its producer's stream.
pub(crate) fn borrow(a: GpuIn, floats: usize) -> Result<ForeignDevicePtr> {
    // SAFETY: the Python caller holds a reference to the array for the
    // whole call, and the call waits for its work on it.
    let p = unsafe { ForeignDevicePtr::new(a.0, floats * 4) }?;
    if let Some(s) = a.2 {
        // SAFETY: a stream handle of the array's interface (1 and 2 are
        // the default streams).
        unsafe { tomors_cuda::wait_foreign_stream(s) }?;
    }
    Ok(p)
}

/// Borrows the GPU array `a` of `floats` floats, checks that its device is
/// among `devices`, and opens the backend of that device (once per
/// process, [`gpu_backend`]): the array, the backend and the device's name.
pub(crate) fn open_on_device(
    a: GpuIn,
    floats: usize,
    devices: Option<&str>,
) -> Result<(ForeignDevicePtr, Arc<MultiCudaBackend>, String)> {
    let input = borrow(a, floats)?;
    check_device(input.ordinal(), devices)?;
    let (gpus, name) = gpu_backend(input.ordinal())?;
    Ok((input, gpus, name))
}

/// Borrows the GPU array `init` (if any) after checking that it has the
/// volume's shape `dims`.
pub(crate) fn borrow_init(
    init: Option<GpuIn>,
    dims: (usize, usize, usize),
) -> Result<Option<ForeignDevicePtr>> {
    let Some(i) = init else {
        return Ok(None);
    };
    if i.1 != dims {
        return Err(value(format!(
            "init has shape {:?}, the volume is {dims:?}",
            i.1
        )));
    }
    Ok(Some(borrow(i, dims.0 * dims.1 * dims.2)?))
}

/// `tomors._native.device_of(ptr)`: the CUDA device ordinal of the device
/// memory at `ptr` (ValueError for host memory or an unknown address).
#[pyfunction]
pub fn device_of(py: Python<'_>, ptr: u64) -> PyResult<usize> {
    compute(py, || {
        // SAFETY: only the first byte is named; nothing is read or queued.
        let p = unsafe { ForeignDevicePtr::new(ptr, 1) }?;
        Ok(p.ordinal())
    })
}

/// Checks that the array's device is among `devices` ("0,1"; None = any).
pub(crate) fn check_device(ordinal: usize, devices: Option<&str>) -> Result<()> {
    let Some(spec) = devices else {
        return Ok(());
    };
    let available = tomors_cuda::device_count()?;
    let list = tomors_cuda::parse_devices(Some(spec), available)?;
    if !list.contains(&ordinal) {
        return Err(value(format!(
            "the GPU array lives on device {ordinal}, not among devices={spec}"
        )));
    }
    Ok(())
}

/// `tomors._native._debug_transfer_bytes()`: bytes copied between host and
/// device memory by tomors' GPU code in this process so far.
#[pyfunction(name = "_debug_transfer_bytes")]
pub fn debug_transfer_bytes() -> u64 {
    tomors_cuda::transfer_bytes()
}
