//! DLPack export of [`DeviceArray`](crate::device::DeviceArray):
//! `__dlpack__` hands a `dltensor` capsule (DLPack's `DLManagedTensor`,
//! the legacy unversioned ABI every consumer reads) to PyTorch, JAX, CuPy
//! or Numba (`torch.from_dlpack(r)`), with no copy. The tensor keeps a
//! reference to the array, so the device memory lives until the consumer
//! calls the deleter (or, unconsumed, until the capsule is collected).

use std::ffi::{c_void, CStr};

use pyo3::ffi;
use pyo3::prelude::*;

/// DLPack's device type of CUDA device memory (`kDLCUDA`).
pub const KDL_CUDA: i32 = 2;

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// The managed tensor and what it points into: its shape and the array
/// owning the memory (`tensor` first: a pointer to the holder is a pointer
/// to the tensor).
#[repr(C)]
struct Holder {
    tensor: DLManagedTensor,
    shape: Vec<i64>,
    _owner: Py<PyAny>,
}

const NAME: &CStr = c"dltensor";

/// The deleter: frees the holder (and drops its reference to the array;
/// without the GIL PyO3 defers that decrement until the GIL is next held).
unsafe extern "C" fn deleter(t: *mut DLManagedTensor) {
    if !t.is_null() {
        // SAFETY: `t` is the first field of a `Holder` leaked by `capsule`
        // (its `manager_ctx`), freed here once.
        drop(Box::from_raw((*t).manager_ctx as *mut Holder));
    }
}

/// The capsule's destructor: an unconsumed capsule (still named
/// `dltensor`) frees its tensor; a consumer renames it `used_dltensor` and
/// calls the deleter itself.
unsafe extern "C" fn destructor(capsule: *mut ffi::PyObject) {
    if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
        let t = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DLManagedTensor;
        deleter(t);
    }
    // A renamed (consumed) capsule: its consumer calls the deleter.
}

/// A `dltensor` capsule of C-contiguous float32 device memory at `ptr` of
/// `shape` on CUDA device `device`, holding `owner` until it is deleted.
pub fn capsule<'py>(
    py: Python<'py>,
    owner: Py<PyAny>,
    ptr: u64,
    shape: &[usize],
    device: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let mut holder = Box::new(Holder {
        tensor: DLManagedTensor {
            dl_tensor: DLTensor {
                data: ptr as *mut c_void,
                device: DLDevice {
                    device_type: KDL_CUDA,
                    device_id: device as i32,
                },
                ndim: shape.len() as i32,
                dtype: DLDataType {
                    code: 2, // kDLFloat
                    bits: 32,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                // Null strides: compact row-major (C order).
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        },
        shape: shape.iter().map(|&n| n as i64).collect(),
        _owner: owner,
    });
    holder.tensor.dl_tensor.shape = holder.shape.as_mut_ptr();
    let raw = Box::into_raw(holder);
    // SAFETY: `raw` is a live, leaked holder; its address is its tensor's.
    unsafe {
        (*raw).tensor.manager_ctx = raw as *mut c_void;
        let cap = ffi::PyCapsule_New(raw as *mut c_void, NAME.as_ptr(), Some(destructor));
        if cap.is_null() {
            drop(Box::from_raw(raw));
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, cap))
    }
}
