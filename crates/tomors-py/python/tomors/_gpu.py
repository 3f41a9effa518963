"""GPU arrays: objects with ``__cuda_array_interface__`` (CuPy, Numba,
PyTorch CUDA tensors) handed to the library by device pointer, with no trip
through host memory (see ``docs/python.md``, "GPU arrays").

Accepted: C-contiguous float32 (typestr ``'<f4'``), no mask. The producer's
``stream`` (interface version 3) is waited on before the library reads the
data; the result is complete when the call returns. Results are
``cupy.asarray(result)`` when the input was a CuPy array (CuPy imported only
then), else a :class:`tomors.DeviceArray` that owns its device memory,
exposes ``__cuda_array_interface__`` (version 3) and copies to NumPy with
``.get()``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

_DLPACK_CPU = 1  # kDLCPU


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
    """Reads ``a.__cuda_array_interface__``; ValueError for arrays that are
    not C-contiguous float32, TypeError for a malformed interface."""
    try:
        cai = a.__cuda_array_interface__
    except AttributeError:
        raise TypeError(
            f"tomors.{func}: {name} is a GPU array without __cuda_array_interface__ "
            "(DLPack only); wrap it with cupy.from_dlpack(x) or pass a NumPy array"
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
    if len(shape) not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(f"tomors.{func}: {name} must be {want}, got shape {shape}")
    strides = cai.get("strides")
    if strides is not None and size > 1:
        want, step = [], 4
        for n in reversed(shape):
            want.append(step)
            step *= n
        want = tuple(reversed(want))
        if tuple(int(s) for s, n in zip(strides, shape) if n > 1) != tuple(
            w for w, n in zip(want, shape) if n > 1
        ):
            raise ValueError(
                f"tomors.{func}: GPU array {name} must be C-contiguous (strides {tuple(strides)}"
                f" for shape {shape}); use cupy.ascontiguousarray(x)"
            )
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    if stream is not None:
        stream = int(stream)
        if stream == 0:
            raise TypeError(
                f"tomors.{func}: {name}.__cuda_array_interface__ has stream 0, which the "
                "interface disallows (use 1 for the legacy default stream)"
            )
    return CudaArray(ptr, shape, stream, a)


def wrap_result(result: Any, like: Any) -> Any:
    """``cupy.asarray(result)`` for a CuPy input (no copy), else ``result``."""
    if type(like).__module__.split(".")[0] == "cupy":
        import cupy  # noqa: PLC0415 - optional dependency, imported lazily

        return cupy.asarray(result)
    return result
