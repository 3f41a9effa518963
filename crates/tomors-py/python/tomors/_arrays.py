"""Argument conversion shared by the public functions of :mod:`tomors`.

NumPy arrays that are C-contiguous float32 are handed to the library as they
are (read in place, no copy); any other dtype or memory order is converted
once to a C-contiguous float32 copy. GPU arrays are read in place by the
functions with a GPU backend (see :mod:`tomors._gpu`) and refused with a
clear message by the others (see ``docs/python.md``).
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from ._gpu import is_gpu_array


def reject_gpu_array(a: Any, func: str) -> None:
    """Raises TypeError for arrays that live on a GPU (CuPy and friends),
    where the function reads host arrays only."""
    if is_gpu_array(a):
        raise TypeError(
            f"tomors.{func}: runs on the CPU and takes NumPy arrays, got a GPU array (CuPy, "
            "__cuda_array_interface__, DLPack on a GPU); pass cupy.asnumpy(x). The functions "
            "with a GPU backend (recon, fdk, recon_cone, project, backproject, project_cone, "
            "Projector) take GPU arrays (docs/python.md, 'GPU arrays')"
        )


def f32(a: Any, name: str, func: str, ndims: Sequence[int]) -> np.ndarray:
    """``a`` as a C-contiguous float32 array with one of ``ndims`` dimensions.

    No copy when ``a`` already is one; one conversion otherwise.
    """
    reject_gpu_array(a, func)
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise TypeError(
            f"tomors.{func}: {name} must hold real numbers, got dtype {arr.dtype}"
        )
    if arr.ndim not in ndims:
        want = " or ".join(f"{d}-D" for d in ndims)
        raise ValueError(
            f"tomors.{func}: {name} must be {want}, got shape {tuple(arr.shape)}"
        )
    return np.ascontiguousarray(arr, dtype=np.float32)


def angles(theta: Any, func: str) -> np.ndarray:
    """Projection angles in radians as a 1-D float32 array."""
    if theta is None:
        raise ValueError(f"tomors.{func}: theta (the projection angles in radians) is required")
    if isinstance(theta, numbers.Real):
        raise ValueError(
            f"tomors.{func}: theta must be one angle per projection (radians), got a scalar"
        )
    return f32(theta, "theta", func, (1,))


def center(c: Any, func: str) -> Tuple[Optional[float], Optional[list]]:
    """``(center, centers)``: one axis position, or one per projection."""
    if c is None:
        return None, None
    if isinstance(c, numbers.Real):
        return float(c), None
    arr = np.asarray(c)
    if arr.ndim == 0:
        return float(arr), None
    if arr.ndim != 1 or arr.dtype.kind not in "fiu":
        raise ValueError(
            f"tomors.{func}: center must be a number or one number per projection, "
            f"got shape {tuple(arr.shape)}"
        )
    return None, [float(v) for v in arr]


def devices(d: Union[None, int, str, Sequence[int]]) -> Optional[str]:
    """A device list as the library's ``"0,1"`` string (None = all)."""
    if d is None:
        return None
    if isinstance(d, str):
        return d
    if isinstance(d, numbers.Integral):
        return str(int(d))
    return ",".join(str(int(v)) for v in d)


def pair(v: Any, name: str, func: str) -> Tuple[float, float]:
    """One number (used twice) or two numbers."""
    if isinstance(v, numbers.Real):
        return float(v), float(v)
    try:
        a, b = v
        return float(a), float(b)
    except (TypeError, ValueError):
        raise ValueError(
            f"tomors.{func}: {name} must be one number or two (width, height), got {v!r}"
        ) from None


def filter_name(name: str) -> str:
    """TomoPy's filter names accepted too ('shepp', 'ramlak')."""
    aliases = {"shepp": "shepp-logan", "ramlak": "ram-lak"}
    return aliases.get(str(name).lower(), str(name))
