"""Device memory for the GPU-array tests without CuPy: the CUDA driver
(libcuda) through ctypes, wrapped in a class exposing
``__cuda_array_interface__`` (version 3), as CuPy, Numba or PyTorch would."""

import ctypes
from typing import Optional

import numpy as np
from tomors._gpu import _DLDataType, _DLDevice, _DLTensor

_lib = None


def driver() -> ctypes.CDLL:
    """libcuda with the primary context of device 0 current (the context
    CuPy and tomors use); OSError/RuntimeError when unusable."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        _check(lib.cuInit(0), "cuInit")
        ctx = ctypes.c_void_p()
        _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0), "cuDevicePrimaryCtxRetain")
        _check(lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        _lib = lib
    return _lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed with CUDA status {status}")


class DriverArray:
    """A C-contiguous float32 array in device memory (cuMemAlloc)."""

    def __init__(self, host: np.ndarray, stream: Optional[int] = None):
        host = np.ascontiguousarray(host, dtype=np.float32)
        self.lib = driver()
        self.shape = host.shape
        self.nbytes = host.nbytes
        self.stream = stream
        ptr = ctypes.c_uint64()
        _check(self.lib.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(self.nbytes, 4))),
               "cuMemAlloc")
        self.ptr = ptr.value
        _check(self.lib.cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr), host.ctypes.data_as(ctypes.c_void_p),
                                        ctypes.c_size_t(self.nbytes)), "cuMemcpyHtoD")

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": "<f4", "data": (self.ptr, False),
                "strides": None, "stream": self.stream, "version": 3}

    def get(self) -> np.ndarray:
        return read_device(self.ptr, self.shape)

    def __del__(self):
        if getattr(self, "ptr", 0):
            self.lib.cuMemFree_v2(ctypes.c_uint64(self.ptr))
            self.ptr = 0


def read_device(ptr: int, shape) -> np.ndarray:
    """Copies float32 device memory at ``ptr`` into a new NumPy array."""
    out = np.empty(shape, np.float32)
    _check(driver().cuMemcpyDtoH_v2(out.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(ptr),
                                    ctypes.c_size_t(out.nbytes)), "cuMemcpyDtoH")
    return out


class _DLManagedTensor(ctypes.Structure):
    """DLPack's ``DLManagedTensor``: the library's ``DLTensor`` (the layout
    it reads) and the manager's two pointers."""

    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


class DLTensorHolder:
    """A DLPack ``DLManagedTensor`` (CUDA device 0) over the device address
    ``ptr``, kept alive by this object; ``capsule()`` wraps it in a
    ``dltensor`` capsule without a destructor (nothing to free: the memory
    belongs to its owner). Needs no GPU to build."""

    def __init__(self, ptr, shape, code=2, bits=32, strides=None):
        n = len(shape)
        self.shape = (ctypes.c_int64 * max(n, 1))(*shape)
        self.strides = None if strides is None else (ctypes.c_int64 * n)(*strides)
        self.t = _DLManagedTensor(
            _DLTensor(
                ctypes.c_void_p(ptr), _DLDevice(2, 0), n, _DLDataType(code, bits, 1),
                ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)),
                None if self.strides is None else ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)),
                0,
            ),
            None, None,
        )

    def capsule(self):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.t), b"dltensor", None)


class DLPackOnly:
    """A DriverArray seen through DLPack only (``__dlpack__`` and
    ``__dlpack_device__``, no ``__cuda_array_interface__``), as JAX or
    another DLPack producer would hand it over."""

    def __init__(self, arr: DriverArray):
        self.arr = arr
        self.holder = DLTensorHolder(arr.ptr, arr.shape)
        self.streams = []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.holder.capsule()

    def __dlpack_device__(self):
        return (2, 0)
