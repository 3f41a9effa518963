"""Phantoms with exact projections, metrics and angle helpers."""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _arrays as A
from . import _native


def angles(n: int, degrees: float = 180.0) -> np.ndarray:
    """``n`` angles in radians, evenly spaced over ``[0, degrees)`` (end
    excluded), float32 — what ``tomors recon --angle-range`` uses."""
    if int(n) < 1:
        raise ValueError(f"tomors.angles: n = {n} must be at least 1")
    return _native.uniform_angles(int(n), math.radians(float(degrees)))


def shepp_logan(n: int, nz: Optional[int] = None) -> np.ndarray:
    """The modified Shepp–Logan phantom filling an ``n × n`` slice.

    Returns ``[n][n]`` (2D, pixel averages with 8×8 samples), or ``[nz][n][n]``
    (the 3D phantom on cubic voxels) when ``nz`` is given. Values are
    attenuation per pixel; :func:`shepp_logan_projections` gives its exact
    projections."""
    return _native.shepp_logan(int(n), None if nz is None else int(nz))


def shepp_logan_projections(theta: Any, n: int, nz: Optional[int] = None) -> np.ndarray:
    """Exact parallel-beam projections of :func:`shepp_logan` ``(n, nz)``:
    analytic line integrals averaged over each detector pixel (``n`` bins of
    the pixel size, axis at the centre).

    Returns ``[angle][bin]`` (2D) or ``[angle][row][bin]`` (3D), float32."""
    return _native.shepp_logan_projections(
        A.angles(theta, "shepp_logan_projections"), int(n), None if nz is None else int(nz)
    )


def shepp_logan_cone(
    theta: Any,
    sod: float,
    odd: float,
    pixel_size: Union[float, Tuple[float, float]],
    detector: Tuple[int, int],
    principal_point: Optional[Tuple[float, float]] = None,
) -> Tuple[np.ndarray, np.ndarray, float]:
    """Exact cone-beam projections of the 3D Shepp–Logan phantom filling the
    default volume of :func:`fdk` (as ``tomors phantom --geometry cone``).

    Returns ``(projections [angle][row][col], phantom [z][y][x], voxel_size)``."""
    func = "shepp_logan_cone"
    pp = None if principal_point is None else A.pair(principal_point, "principal_point", func)
    rows, cols = (int(v) for v in detector)
    return _native.shepp_logan_cone(
        A.angles(theta, func), float(sod), float(odd), A.pair(pixel_size, "pixel_size", func),
        (rows, cols), pp,
    )


def _mask(mask: Any, shape: Tuple[int, ...]) -> Optional[np.ndarray]:
    if mask is None:
        return None
    if isinstance(mask, (float, int)) and not isinstance(mask, bool):
        return _native.disc_mask(shape[0], shape[1], float(mask))
    m = np.ascontiguousarray(mask, dtype=bool)
    return m


def _pair(x: Any, reference: Any, func: str):
    return A.f32(x, "x", func, (2,)), A.f32(reference, "reference", func, (2,))


def nrmse(x: Any, reference: Any, mask: Any = None) -> float:
    """Normalised RMS error: RMS of ``x - reference`` over the mask divided
    by the reference's range (max - min) there.

    ``mask``: a boolean ``[y][x]`` array, or a number ``r`` for the disc of
    radius ``r · min(ny, nx)`` around the centre (0.45 in the README's figures)."""
    a, b = _pair(x, reference, "nrmse")
    return _native.nrmse(a, b, _mask(mask, b.shape))


def psnr(x: Any, reference: Any, mask: Any = None) -> float:
    """Peak signal-to-noise ratio in dB with the reference's range as the
    peak (``mask`` as :func:`nrmse`)."""
    a, b = _pair(x, reference, "psnr")
    return _native.psnr(a, b, _mask(mask, b.shape))


def ssim(x: Any, reference: Any) -> float:
    """Structural similarity (Wang et al. 2004; 11×11 Gaussian window,
    σ = 1.5, ``L`` = the reference's range)."""
    a, b = _pair(x, reference, "ssim")
    return _native.ssim(a, b)
