"""GPU arrays: objects with ``__cuda_array_interface__`` (CuPy, Numba,
PyTorch CUDA tensors) or any DLPack producer on a CUDA device
(``__dlpack__``/``__dlpack_device__``: PyTorch, JAX, CuPy, ...), handed to
the library by device pointer, with no trip through host memory (see
``docs/python.md``, "GPU arrays").

Accepted: C-contiguous float32, no mask. The CUDA array interface is used
when present (its producer ``stream``, interface version 3, is waited on
before the library reads the data); otherwise the DLPack capsule is read
(the producer is asked to make the data ready on the legacy default stream,
``__dlpack__(stream=1)``, which the library then waits on). The capsule is
kept alive for the call and released by its producer afterwards. The
result is complete when the call returns. Results are
``cupy.asarray(result)`` when the input was a CuPy array (CuPy imported only
then), else a :class:`tomors.DeviceArray` that owns its device memory,
exposes ``__cuda_array_interface__`` (version 3) and DLPack
(``__dlpack__``), and copies to NumPy with ``.get()``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

import ctypes

_DLPACK_CPU = 1  # kDLCPU
_DLPACK_CUDA = 2  # kDLCUDA
_DLPACK_FLOAT = 2  # kDLFloat


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    """DLPack's ``DLTensor`` (the first member of ``DLManagedTensor``)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class CudaArray(NamedTuple):
    """What the library needs of a GPU array."""

    ptr: int
    shape: Tuple[int, ...]
    stream: Optional[int]
    owner: Any


def is_gpu_array(a: Any) -> bool:
    """Whether ``a`` lives on a GPU (CUDA array interface or DLPack)."""
    if isinstance(a, np.ndarray):
        return False
    if hasattr(a, "__cuda_array_interface__"):
        return True
    if hasattr(a, "__dlpack_device__"):
        try:
            return int(a.__dlpack_device__()[0]) != _DLPACK_CPU
        except Exception:  # noqa: BLE001 - a broken protocol is not a GPU array
            return False
    return False


def cuda_array(a: Any, name: str, func: str, ndims: Tuple[int, ...]) -> CudaArray:
    """What the library needs of the GPU array ``a``: read from its CUDA
    array interface when it has one, else from its DLPack capsule.
    ValueError for arrays that are not C-contiguous float32 (or of another
    dimension than ``ndims``), TypeError for a malformed interface or a
    DLPack producer on another kind of device."""
    if not hasattr(a, "__cuda_array_interface__") and hasattr(a, "__dlpack__"):
        return _dlpack_array(a, name, func, ndims)
    try:
        cai = a.__cuda_array_interface__
    except AttributeError:
        raise TypeError(
            f"tomors.{func}: {name} is a GPU array without __cuda_array_interface__ "
            "or __dlpack__; pass a CuPy array or a NumPy array"
        ) from None
    if not isinstance(cai, dict):
        raise TypeError(f"tomors.{func}: {name}.__cuda_array_interface__ is not a dict")
    try:
        shape = tuple(int(v) for v in cai["shape"])
        typestr = str(cai["typestr"])
        ptr, _readonly = cai["data"]
        ptr = int(ptr) if ptr is not None else 0
    except (KeyError, TypeError, ValueError):
        raise TypeError(
            f"tomors.{func}: {name}.__cuda_array_interface__ lacks shape, typestr or data"
        ) from None
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if ptr == 0 and size > 0:
        raise TypeError(f"tomors.{func}: {name} is a GPU array with a null data pointer")
    if cai.get("mask") is not None:
        raise ValueError(f"tomors.{func}: masked GPU arrays are not supported ({name})")
    if typestr not in ("<f4", "=f4"):
        raise ValueError(
            f"tomors.{func}: GPU array {name} must be float32 (typestr '<f4'), got "
            f"'{typestr}'; convert it on the GPU first, e.g. x.astype('float32')"
        )
    _check_dims(shape, name, func, ndims)
    strides = cai.get("strides")
    if strides is not None:
        _check_contiguous(shape, tuple(int(s) for s in strides), 4, name, func)
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is not None:
        stream = int(stream)
        if stream == 0:
            raise TypeError(
                f"tomors.{func}: {name}.__cuda_array_interface__ has stream 0, which the "
                "interface disallows (use 1 for the legacy default stream)"
            )
    return CudaArray(ptr, shape, stream, a)


def _check_dims(shape: Tuple[int, ...], name: str, func: str, ndims: Tuple[int, ...]) -> None:
    if len(shape) not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"tomors.{func}: {name} must be {want}, got shape {shape}")


def _check_contiguous(
    shape: Tuple[int, ...], strides: Tuple[int, ...], unit: int, name: str, func: str
) -> None:
    """ValueError unless ``strides`` (in units of ``unit`` bytes per
    element: 4 for bytes of float32, 1 for elements) are C order's;
    dimensions of length 1 may have any stride."""
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size <= 1:
        return
    want, step = [], unit
    for n in reversed(shape):
        want.append(step)
        step *= n
    want = tuple(reversed(want))
    if tuple(s for s, n in zip(strides, shape) if n > 1) != tuple(
        w for w, n in zip(want, shape) if n > 1
    ):
        raise ValueError(
            f"tomors.{func}: GPU array {name} must be C-contiguous (strides {strides}"
            f" for shape {shape}); use cupy.ascontiguousarray(x) or x.contiguous()"
        )


def _capsule_pointer(capsule: Any) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return int(get(capsule, b"dltensor") or 0)


def _dlpack_array(a: Any, name: str, func: str, ndims: Tuple[int, ...]) -> CudaArray:
    """Reads a DLPack producer's tensor (a ``dltensor`` capsule, kept
    alive as the result's owner; its producer frees it with the capsule)."""
    try:
        dev_type, dev_id = (int(v) for v in a.__dlpack_device__())
    except Exception as e:  # noqa: BLE001 - a broken protocol
        raise TypeError(f"tomors.{func}: {name}.__dlpack_device__() failed: {e}") from None
    if dev_type != _DLPACK_CUDA:
        raise TypeError(
            f"tomors.{func}: {name} is a DLPack tensor on device type {dev_type}, not a CUDA "
            f"device ({_DLPACK_CUDA}); pass a NumPy array for host data"
        )
    try:
        # The producer makes the data ready on the legacy default stream,
        # which the library waits on (stream 1 below).
        capsule = a.__dlpack__(stream=1)
    except TypeError:
        capsule = a.__dlpack__()
    try:
        addr = _capsule_pointer(capsule)
    except (ValueError, TypeError) as e:
        raise TypeError(
            f"tomors.{func}: {name}.__dlpack__() did not give an unused 'dltensor' capsule ({e})"
        ) from None
    if addr == 0:
        raise TypeError(f"tomors.{func}: {name}.__dlpack__() gave an empty capsule")
    t = _DLTensor.from_address(addr)
    if t.device.device_type != _DLPACK_CUDA:
        raise TypeError(
            f"tomors.{func}: {name}'s DLPack tensor is on device type "
            f"{t.device.device_type}, not CUDA"
        )
    dt = t.dtype
    if (dt.code, dt.bits, dt.lanes) != (_DLPACK_FLOAT, 32, 1):
        raise ValueError(
            f"tomors.{func}: GPU array {name} must be float32, got DLPack type code "
            f"{dt.code} of {dt.bits} bits × {dt.lanes}; convert it on the GPU first"
        )
    ndim = int(t.ndim)
    shape = tuple(int(t.shape[i]) for i in range(ndim))
    _check_dims(shape, name, func, ndims)
    if t.strides:
        _check_contiguous(shape, tuple(int(t.strides[i]) for i in range(ndim)), 1, name, func)
    ptr = int(t.data or 0) + int(t.byte_offset)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if ptr == 0 and size > 0:
        raise TypeError(f"tomors.{func}: {name} is a GPU array with a null data pointer")
    return CudaArray(ptr, shape, 1, (a, capsule))


def refuse_backend(backend: str, func: str) -> None:
    """ValueError unless ``backend`` lets a GPU array stay on its GPU."""
    if str(backend).lower() not in ("auto", "cuda", "gpu"):
        raise ValueError(
            f"tomors.{func}: a GPU array needs backend='cuda' or 'auto', got '{backend}'; "
            "pass a NumPy array (cupy.asnumpy(x)) to compute on the CPU"
        )


def wrap_result(result: Any, like: Any) -> Any:
    """``cupy.asarray(result)`` for a CuPy input (no copy), else ``result``."""
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy  # noqa: PLC0415 - optional dependency, imported lazily

        return cupy.asarray(result)
    return result
