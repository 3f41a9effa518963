"""Reconstruction and projection: :func:`recon`, :func:`fdk`,
:func:`recon_cone`, :func:`project`, :func:`project_cone`,
:func:`backproject`."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays as A
from . import _gpu
from . import _native
from ._progress import reporter

# TOMORS_TIMING=1: phase times of recon's FBP on stderr (the native half
# prints its own; docs/python.md, "Measured here").
_TIMING = os.environ.get("TOMORS_TIMING", "") not in ("", "0")

ITERATIVE = ("sirt", "landweber", "cimmino", "sart", "block-it", "block-parallel", "art")
# The iterative methods the GPU runs (with the joseph projector), as the CLI.
GPU_ITERATIVE = ("sirt", "landweber", "cimmino", "sart", "block-it")


def recon(
    tomo: Any,
    theta: Any,
    center: Union[None, float, Sequence[float]] = None,
    algorithm: str = "fbp",
    *,
    filter: str = "ram-lak",
    cutoff: float = 1.0,
    padding: str = "zero",
    interp: str = "linear",
    method: str = "direct",
    iterations: int = 50,
    relaxation: Optional[float] = None,
    projector: str = "joseph",
    min: Optional[float] = None,
    max: Optional[float] = None,
    block_size: Optional[int] = None,
    tolerance: Optional[float] = None,
    random_order: bool = False,
    init: Any = None,
    sinogram_order: bool = False,
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
    kernel: Optional[str] = None,
    slab: int = 32,
    progress: Optional[Callable[[int, int], object]] = None,
    verbose: bool = False,
    return_info: bool = False,
    half_acquisition: bool = False,
) -> Any:
    """Reconstruct parallel-beam projections (FBP or an iterative method).

    Geometry: ASTRA's ``parallel``/``parallel3d`` (the same sinogram gives the
    same image in both); slice ``z`` is reconstructed from detector row ``z``
    on ``n × n`` pixels of the bin size (``n`` = bins per row), centred on the
    rotation axis. FBP output has the object's values (attenuation per pixel).

    Parameters
    ----------
    tomo : ndarray
        3D projections ``[angle][row][col]`` (or sinograms ``[row][angle][col]``
        with ``sinogram_order=True``), or one sinogram ``[angle][col]`` (2D).
        Line integrals: flat/dark corrected and -log'ed (see :func:`normalize`,
        :func:`minus_log`). C-contiguous float32 is read in place; other dtypes
        and orders are converted once. A GPU array (CuPy, Numba, PyTorch:
        ``__cuda_array_interface__`` or DLPack, C-contiguous float32) is reconstructed on
        its GPU with no host round trip (FBP and the GPU's iterative methods)
        and the result stays there: a CuPy array for CuPy input, else a
        :class:`DeviceArray`.
    theta : array_like
        Projection angles in radians, one per projection.
    center : float or array_like, optional
        Rotation-axis position in detector pixels from the left edge of a row
        (bin ``k`` centred at ``k``); default the detector centre ``(n-1)/2``.
        One value per projection is accepted too. See :func:`find_center`.
    algorithm : str
        ``'fbp'`` (default), or an iterative method: ``'sirt'`` (ASTRA's SIRT),
        ``'landweber'``, ``'cimmino'``, ``'sart'``, ``'block-it'``,
        ``'block-parallel'``, ``'art'`` (docs/iterative.md).
    filter : str
        FBP filter: ``'ram-lak'`` (TomoPy's ``'ramlak'``), ``'shepp-logan'``
        (``'shepp'``), ``'cosine'``, ``'hamming'``, ``'hann'``.
    cutoff : float
        FBP filter cutoff as a fraction of Nyquist, in (0, 1].
    padding : str
        FBP row padding before the FFT: ``'zero'`` or ``'edge'``.
    interp : str
        FBP detector interpolation: ``'linear'`` or ``'nearest'``.
    method : str
        How FBP is computed (the CLI's ``--method``): ``'direct'`` (default,
        the exact back projection) or ``'fourier'`` (direct Fourier
        reconstruction by gridding, TomoPy's ``gridrec``: the same filters
        and output, O(n² log n) per slice, the fastest for large jobs on the
        GPU; evenly spaced angles only; no ``interp`` or ``kernel``;
        docs/fourier.md). NumPy input only.
    iterations : int
        Iterations of an iterative method (sweeps for art and the block methods).
    relaxation : float, optional
        Relaxation; default 1 (sirt, sart, art, block-parallel) or 1/ρ from
        power iteration (landweber, cimmino, block-it).
    projector : str
        Projection model of an iterative method: ``'joseph'``, ``'line'``
        (Siddon) or ``'voxel'`` (Joseph forward, voxel-driven back projection).
    min, max : float, optional
        Bounds applied to the iterate after every update (e.g. ``min=0``).
    block_size : int, optional
        Projections per block of ``'sart'`` (1), ``'block-it'`` (2),
        ``'block-parallel'`` (6).
    tolerance : float, optional
        Stop once the relative residual ``‖b − Ax‖/‖b‖`` is at most this.
    random_order : bool
        Random (seeded, reproducible) ray order for ``'art'``.
    init : ndarray, optional
        Initial volume ``[z][y][x]`` of an iterative method (default zeros).
    sinogram_order : bool
        ``tomo`` is ``[row][angle][col]`` (read in place, no transposition).
    backend : str
        ``'auto'`` (a usable GPU, else the CPU), ``'cpu'`` or ``'cuda'``. The GPU
        runs FBP, and sirt/landweber/cimmino/sart/block-it with the joseph
        projector.
    devices : int, str or list of int, optional
        GPUs to use (default all), e.g. ``[0, 1]`` or ``"0,1"``.
    kernel : str, optional
        GPU back-projection kernel of FBP (default: the fastest known, see
        :func:`tune`).
    slab : int
        FBP: slices handed to the backend at once.
    progress : callable, optional
        ``progress(done, total)``: slices (FBP) or iterations done. An exception
        raised by it stops the reconstruction and is re-raised.
    verbose : bool
        Show a tqdm progress bar (when tqdm is installed).
    return_info : bool
        Also return a dict: the device that computed (``'cpu'`` or the GPUs'
        names) and, for iterative methods, iterations, relaxation, residuals
        and the stop reason.
    half_acquisition : bool
        ``tomo`` is a 360° scan with the rotation axis near one edge of the
        detector (``--half-acquisition``): it is stitched into a 180° scan
        of about twice the width (:func:`stitch_half`) and the wider slices
        are reconstructed. ``center`` is then the axis on the detector, or
        None to find it (:func:`find_center` with ``half_acquisition=True``).
        NumPy input only (the stitching runs on the CPU).

    Returns
    -------
    ndarray
        float32 volume ``[z][y][x]`` (``[y][x]`` for a 2D sinogram); with
        ``return_info``, ``(volume, info)``.

    Raises
    ------
    ValueError
        Bad shapes, non-finite values, unknown names, a centre off the detector.
    RuntimeError
        A GPU failure (or ``backend='cuda'`` without a usable GPU).

    See Also
    --------
    find_center, normalize, minus_log, fdk, recon_cone, Projector

    Examples
    --------
    >>> import tomors
    >>> theta = tomors.angles(180)                                # radians
    >>> proj = tomors.shepp_logan_projections(theta, 128, nz=4)  # [angle][row][col]
    >>> rec = tomors.recon(proj, theta)                           # FBP, ram-lak
    >>> rec.shape
    (4, 128, 128)
    >>> rec = tomors.recon(proj, theta, algorithm='sirt', iterations=50, min=0)
    """
    func = "recon"
    t_enter = time.perf_counter()
    if half_acquisition:
        return _recon_half(
            tomo, theta, center, sinogram_order, return_info,
            dict(algorithm=algorithm, method=method, filter=filter, cutoff=cutoff, padding=padding,
                 interp=interp, iterations=iterations, relaxation=relaxation,
                 projector=projector, min=min, max=max, block_size=block_size,
                 tolerance=tolerance, random_order=random_order, init=init, backend=backend,
                 devices=devices, kernel=kernel, slab=slab, progress=progress,
                 verbose=verbose),
        )
    meth = _fbp_method(method, algorithm, interp, kernel, func)
    if _gpu.is_gpu_array(tomo):
        if meth == "fourier":
            raise TypeError(
                f"tomors.{func}: method='fourier' reconstructs NumPy arrays; pass "
                "cupy.asnumpy(x), or use method='direct' for arrays on a GPU"
            )
        return _recon_gpu_array(
            tomo, theta, center, algorithm, filter=filter, cutoff=cutoff, padding=padding,
            interp=interp, sinogram_order=sinogram_order, backend=backend, devices=devices,
            kernel=kernel, progress=progress, verbose=verbose, return_info=return_info,
            iterative=dict(iterations=iterations, relaxation=relaxation, projector=projector,
                           min=min, max=max, block_size=block_size, tolerance=tolerance,
                           random_order=random_order, init=init),
        )
    arr = A.f32(tomo, "tomo", func, (2, 3))
    flat = arr.ndim == 2
    if flat:
        arr = arr[:, None, :] if not sinogram_order else arr[None, :, :]
    th = A.angles(theta, func)
    c, cs = A.center(center, func)
    devs = A.devices(devices)
    alg = str(algorithm).lower().replace("_", "-")
    info = {}
    if alg == "fbp":
        n_slices = arr.shape[0] if sinogram_order else arr.shape[1]
        with reporter(progress, verbose, "FBP", "slices") as cb:
            t_native = time.perf_counter()
            if meth == "fourier":
                out, device = _native.fourier(
                    arr, th, c, cs, bool(sinogram_order), A.filter_name(filter), float(cutoff),
                    str(padding), str(backend), devs, int(slab), cb,
                )
            else:
                out, device = _native.fbp(
                    arr, th, c, cs, bool(sinogram_order), A.filter_name(filter), float(cutoff),
                    str(padding), str(interp), str(backend), devs, kernel, int(slab), cb,
                )
            t_back = time.perf_counter()
        info = {"slices": n_slices, "device": device}
        if _TIMING:
            print(
                f"tomors timing recon (python): before the native call {t_native - t_enter:.4f} s,"
                f" native call {t_back - t_native:.4f} s, after {time.perf_counter() - t_back:.4f} s",
                file=sys.stderr,
            )
    else:
        x0 = None
        if init is not None:
            x0 = A.f32(init, "init", func, (2, 3))
            if x0.ndim == 2:
                x0 = x0[None]
        with reporter(progress, verbose, alg, "iterations") as cb:
            it_method = _iterative(
                alg, iterations, relaxation, projector, min, max, block_size, tolerance,
                random_order,
            )
            out, info = _native.recon_iterative(
                arr, th, c, cs, bool(sinogram_order), it_method, x0, str(backend), devs, cb,
            )
    if flat:
        out = out[0]
    return (out, info) if return_info else out


def _fbp_method(method: Any, algorithm: Any, interp: Any, kernel: Any, func: str) -> str:
    """The FBP method name (``'direct'`` or ``'fourier'``), checked against
    the options that only the direct method uses (as the CLI refuses them)."""
    meth = str(method).lower()
    if meth not in ("direct", "fourier"):
        raise ValueError(f"tomors.{func}: method must be 'direct' or 'fourier', got {method!r}")
    if meth == "fourier":
        if str(algorithm).lower() != "fbp":
            raise ValueError(
                f"tomors.{func}: method='fourier' is a way of computing FBP; "
                f"algorithm={algorithm!r} takes no method"
            )
        if str(interp).lower() != "linear":
            raise ValueError(
                f"tomors.{func}: interp is not used by method='fourier' "
                "(it interpolates in frequency space)"
            )
        if kernel is not None:
            raise ValueError(
                f"tomors.{func}: kernel selects the direct back projector; "
                "method='fourier' does not use it"
            )
    return meth


def _recon_half(
    tomo: Any, theta: Any, center: Any, sinogram_order: bool, return_info: bool,
    kwargs: Dict[str, Any],
) -> Any:
    """:func:`recon` of a 360° half-acquisition scan: the axis found (when
    ``center`` is None) and the scan stitched as the CLI's
    ``--half-acquisition`` does, then the stitched scan reconstructed."""
    from ._io import find_center, stitch_half  # noqa: PLC0415 - no import cycle at load

    func = "recon"
    if _gpu.is_gpu_array(tomo):
        raise TypeError(
            f"tomors.{func}: half_acquisition stitches on the CPU; pass a NumPy array "
            "(cupy.asnumpy(x)), or stitch with tomors.stitch_half first"
        )
    arr = A.f32(tomo, "tomo", func, (2, 3))
    if sinogram_order and arr.ndim == 3:
        arr = np.ascontiguousarray(arr.transpose(1, 0, 2))
    found = center is None
    if found:
        center = find_center(arr, theta, half_acquisition=True)
    elif not isinstance(center, (int, float, np.integer, np.floating)):
        raise ValueError(
            f"tomors.{func}: with half_acquisition, center is the axis on the detector "
            f"(one number) or None to find it, got {center!r}"
        )
    st, th, c, hinfo = stitch_half(arr, theta, float(center), return_info=True)
    out = recon(st, th, c, return_info=return_info, **kwargs)
    if not return_info:
        return out
    vol, info = out
    info = dict(info)
    info["half_acquisition"] = dict(hinfo, center=c, found=found, width=st.shape[-1])
    return vol, info


def _recon_gpu_array(
    tomo: Any, theta: Any, center: Any, algorithm: str, *, filter: str, cutoff: float,
    padding: str, interp: str, sinogram_order: bool, backend: str, devices: Any,
    kernel: Optional[str], progress: Any, verbose: bool, return_info: bool,
    iterative: Dict[str, Any],
) -> Any:
    """:func:`recon` of an array on a GPU, on that GPU: FBP reads the array in
    place; the GPU's iterative methods reorder it into sinograms on the device
    and iterate there. The result stays on the device."""
    func = "recon"
    g = _gpu.cuda_array(tomo, "tomo", func, (2, 3))
    alg = str(algorithm).lower().replace("_", "-")
    if alg not in ("fbp",) + GPU_ITERATIVE:
        raise TypeError(
            f"tomors.{func}: GPU arrays are reconstructed on their GPU, which runs "
            f"algorithm='fbp', {', '.join(repr(a) for a in GPU_ITERATIVE)}; for "
            f"'{alg}' pass a NumPy array (cupy.asnumpy(x)) (docs/python.md, 'GPU arrays')"
        )
    _gpu.refuse_backend(backend, func)
    shape = g.shape
    flat = len(shape) == 2
    if flat:
        shape = (shape[0], 1, shape[1]) if not sinogram_order else (1, shape[0], shape[1])
    th = A.angles(theta, func)
    c, cs = A.center(center, func)
    n_slices = shape[0] if sinogram_order else shape[1]
    if alg != "fbp":
        it = iterative
        if it["random_order"]:
            raise ValueError(f"tomors.{func}: random_order is for art")
        x0 = None
        if it["init"] is not None:
            if not _gpu.is_gpu_array(it["init"]):
                raise TypeError(
                    f"tomors.{func}: init must be a GPU array like tomo (cupy.asarray(init))"
                )
            gi = _gpu.cuda_array(it["init"], "init", func, (2, 3))
            ishape = gi.shape if len(gi.shape) == 3 else (1,) + gi.shape
            x0 = (gi.ptr, ishape, gi.stream)
        with reporter(progress, verbose, alg, "iterations") as cb:
            it_method = _iterative(
                alg, it["iterations"], it["relaxation"], it["projector"], it["min"], it["max"],
                it["block_size"], it["tolerance"], False,
            )
            out, info = _native.recon_iterative_device(
                (g.ptr, shape, g.stream), flat, th, c, cs, bool(sinogram_order), it_method, x0,
                A.devices(devices), cb,
            )
        out = _gpu.wrap_result(out, tomo)
        return (out, info) if return_info else out
    with reporter(progress, verbose, "FBP", "slices") as cb:
        out, device = _native.fbp_device(
            g.ptr, shape, flat, g.stream, th, c, cs, bool(sinogram_order),
            A.filter_name(filter), float(cutoff), str(padding), str(interp),
            A.devices(devices), kernel,
        )
        if cb is not None:
            cb(n_slices, n_slices)
    out = _gpu.wrap_result(out, tomo)
    info = {"slices": n_slices, "device": device}
    return (out, info) if return_info else out


# The cone-beam iterative methods the GPU runs (joseph; the SIRT family
# with voxel too), as the CLI.
CONE_GPU_ITERATIVE = ("sirt", "landweber", "cimmino", "sart", "block-it")


def _gpu_model(projector: str, func: str) -> None:
    """TypeError for the projection models the GPU lacks (``'line'``)."""
    if str(projector).lower() not in ("joseph", "voxel", "voxel-driven"):
        raise TypeError(
            f"tomors.{func}: GPU arrays are projected on their GPU, which has the 'joseph' and "
            f"'voxel' models; for '{projector}' pass a NumPy array (cupy.asnumpy(x))"
        )


def _gpu_slices(a: Any, name: str, func: str, backend: str, projector: str):
    """A 2-D or 3-D GPU array of a parallel-beam projection call, checked
    (backend, model): ``((ptr, 3-D shape, stream), flat)``."""
    _gpu.refuse_backend(backend, func)
    _gpu_model(projector, func)
    g = _gpu.cuda_array(a, name, func, (2, 3))
    flat = len(g.shape) == 2
    return (g.ptr, (1,) + g.shape if flat else g.shape, g.stream), flat


def _iterative(
    alg: str, iterations: Any, relaxation: Any, projector: Any, min: Any, max: Any,
    block_size: Any, tolerance: Any, random_order: Any,
) -> Dict[str, Any]:
    """The iterative method as the native calls take it (tomors-py's
    ``args::IterativeMethod``): one dict, values converted."""
    return {
        "algorithm": alg,
        "iterations": int(iterations),
        "relaxation": None if relaxation is None else float(relaxation),
        "projector": str(projector),
        "min": None if min is None else float(min),
        "max": None if max is None else float(max),
        "block_size": None if block_size is None else int(block_size),
        "tolerance": None if tolerance is None else float(tolerance),
        "random_order": bool(random_order),
    }


def _cone_scan(
    sod: Any, odd: Any, pixel_size: Any, principal_point: Any, voxel_size: Any, func: str,
) -> Dict[str, Any]:
    """The circular cone-beam scan as the native calls take it (tomors-py's
    ``args::ConeScan``): one dict, values converted and checked."""
    pp = None if principal_point is None else A.pair(principal_point, "principal_point", func)
    return {
        "sod": float(sod),
        "odd": float(odd),
        "pixel_size": A.pair(pixel_size, "pixel_size", func),
        "principal_point": pp,
        "voxel_size": None if voxel_size is None else float(voxel_size),
    }


def _shape3(shape: Any, func: str) -> Optional[Tuple[int, int, int]]:
    if shape is None:
        return None
    try:
        nz, ny, nx = (int(v) for v in shape)
    except (TypeError, ValueError):
        raise ValueError(f"tomors.{func}: shape must be (nz, ny, nx), got {shape!r}") from None
    return nz, ny, nx


def fdk(
    proj: Any,
    theta: Any,
    sod: float,
    odd: float,
    pixel_size: Union[float, Tuple[float, float]],
    voxel_size: Optional[float] = None,
    shape: Optional[Tuple[int, int, int]] = None,
    short_scan: Optional[bool] = None,
    *,
    principal_point: Optional[Tuple[float, float]] = None,
    filter: str = "ram-lak",
    cutoff: float = 1.0,
    padding: str = "zero",
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
    return_info: bool = False,
) -> Any:
    """Cone-beam FDK reconstruction (circular orbit, flat detector).

    Geometry: ASTRA's ``cone`` (docs/cone.md). The source orbits at distance
    ``sod`` from the rotation axis (z), the detector sits ``odd`` beyond it.

    Parameters
    ----------
    proj : ndarray
        Projections ``[angle][row][col]``, line integrals in world units. A
        GPU array (CuPy, PyTorch, ``__cuda_array_interface__`` or DLPack;
        C-contiguous float32) is reconstructed on its GPU with no host round
        trip; the volume stays there (CuPy for CuPy input, else a
        :class:`DeviceArray`).
    theta : array_like
        Source angles in radians, one per projection.
    sod, odd : float
        Source-to-axis and axis-to-detector distances (world units, e.g. mm).
    pixel_size : float or (float, float)
        Detector pixel size in world units (width, height).
    voxel_size : float, optional
        Voxel side in world units (default: the largest whose volume the
        detector covers at every angle).
    shape : (nz, ny, nx), optional
        Volume size in voxels (default ``(rows, cols, cols)``).
    short_scan : bool, optional
        True: Parker-weighted short scan; False: full scan; None: decided
        from the angles (whole turns = full scan).
    principal_point : (col, row), optional
        Where the central ray meets the detector, in pixels (default centre).
    filter, cutoff, padding
        As :func:`recon`.
    backend : str
        ``'auto'``, ``'cpu'`` or ``'cuda'`` (the whole FDK on one GPU).
    devices : optional
        The GPU (the first of the list is used).
    return_info : bool
        Also return ``{'voxel_size': ...}``.

    Returns
    -------
    ndarray
        float32 volume ``[z][y][x]``, attenuation per world unit.
    """
    func = "fdk"
    th = A.angles(theta, func)
    scan = _cone_scan(sod, odd, pixel_size, principal_point, voxel_size, func)
    sh = _shape3(shape, func)
    spec = {
        "filter": A.filter_name(filter),
        "cutoff": float(cutoff),
        "padding": str(padding),
        "short_scan": None if short_scan is None else bool(short_scan),
    }
    if _gpu.is_gpu_array(proj):
        _gpu.refuse_backend(backend, func)
        g = _gpu.cuda_array(proj, "proj", func, (3,))
        out, voxel = _native.fdk_device(
            (g.ptr, g.shape, g.stream), th, scan, sh, spec, A.devices(devices),
        )
        out = _gpu.wrap_result(out, proj)
        return (out, {"voxel_size": voxel}) if return_info else out
    arr = A.f32(proj, "proj", func, (3,))
    out, voxel = _native.fdk(arr, th, scan, sh, spec, str(backend), A.devices(devices))
    return (out, {"voxel_size": voxel}) if return_info else out


def recon_cone(
    proj: Any,
    theta: Any,
    sod: float,
    odd: float,
    pixel_size: Union[float, Tuple[float, float]],
    algorithm: str = "sirt",
    *,
    iterations: int = 50,
    relaxation: Optional[float] = None,
    projector: str = "joseph",
    min: Optional[float] = None,
    max: Optional[float] = None,
    block_size: Optional[int] = None,
    tolerance: Optional[float] = None,
    random_order: bool = False,
    init: Any = None,
    voxel_size: Optional[float] = None,
    shape: Optional[Tuple[int, int, int]] = None,
    principal_point: Optional[Tuple[float, float]] = None,
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
    progress: Optional[Callable[[int, int], object]] = None,
    verbose: bool = False,
    return_info: bool = False,
) -> Any:
    """Cone-beam iterative reconstruction (docs/iterative.md).

    ``algorithm`` and its options are those of :func:`recon`; the geometry
    parameters those of :func:`fdk`. The GPU (``backend='auto'`` or
    ``'cuda'``) runs sirt/landweber/cimmino with the joseph or voxel
    projector, sart/block-it with joseph's, on one device; everything else
    runs on the CPU. A GPU array ``proj`` (and ``init``) is reconstructed on
    its GPU, the iterate resident there, and the volume stays there.

    Returns
    -------
    ndarray
        float32 volume ``[z][y][x]``; with ``return_info``, ``(volume, info)``
        (iterations, relaxation, residuals, stop reason, device, voxel_size).
    """
    func = "recon_cone"
    th = A.angles(theta, func)
    scan = _cone_scan(sod, odd, pixel_size, principal_point, voxel_size, func)
    alg = str(algorithm).lower().replace("_", "-")
    it_method = _iterative(
        alg, iterations, relaxation, projector, min, max, block_size, tolerance, random_order,
    )
    if _gpu.is_gpu_array(proj):
        _gpu.refuse_backend(backend, func)
        if alg not in CONE_GPU_ITERATIVE:
            raise TypeError(
                f"tomors.{func}: GPU arrays are reconstructed on their GPU, which runs "
                f"{', '.join(repr(a) for a in CONE_GPU_ITERATIVE)}; for '{alg}' pass a NumPy "
                "array (cupy.asnumpy(x)) (docs/python.md, 'GPU arrays')"
            )
        if random_order:
            raise ValueError(f"tomors.{func}: random_order is for art")
        g = _gpu.cuda_array(proj, "proj", func, (3,))
        x0 = None
        if init is not None:
            if not _gpu.is_gpu_array(init):
                raise TypeError(
                    f"tomors.{func}: init must be a GPU array like proj (cupy.asarray(init))"
                )
            gi = _gpu.cuda_array(init, "init", func, (3,))
            x0 = (gi.ptr, gi.shape, gi.stream)
        with reporter(progress, verbose, alg, "iterations") as cb:
            out, info = _native.recon_cone_device(
                (g.ptr, g.shape, g.stream), th, scan, _shape3(shape, func), it_method, x0,
                A.devices(devices), cb,
            )
        out = _gpu.wrap_result(out, proj)
        return (out, info) if return_info else out
    arr = A.f32(proj, "proj", func, (3,))
    x0 = None if init is None else A.f32(init, "init", func, (3,))
    with reporter(progress, verbose, alg, "iterations") as cb:
        out, info = _native.recon_cone(
            arr, th, scan, _shape3(shape, func), it_method, x0, str(backend), A.devices(devices),
            cb,
        )
    return (out, info) if return_info else out


def project(
    volume: Any,
    theta: Any,
    center: Union[None, float, Sequence[float]] = None,
    *,
    n_bins: Optional[int] = None,
    projector: str = "joseph",
    sinogram_order: bool = False,
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
) -> Any:
    """Parallel-beam forward projection (line integrals) of a volume.

    Parameters
    ----------
    volume : ndarray
        ``[z][y][x]`` (or one slice ``[y][x]``), unit pixels.
    theta : array_like
        Angles in radians.
    center : float or array_like, optional
        Rotation-axis position on the detector (default ``(n_bins-1)/2``).
    n_bins : int, optional
        Detector bins per row (default ``nx``), of the pixel size.
    projector : str
        ``'joseph'``, ``'line'`` or ``'voxel'`` (the voxel model projects with Joseph).
    sinogram_order : bool
        Return sinograms ``[z][angle][bin]`` instead of ``[angle][z][bin]``
        (saves a transposition).
    backend, devices
        For GPU arrays only (NumPy input is projected on the CPU): ``'auto'``
        or ``'cuda'``; a GPU array is projected on its own device (Joseph's
        projector, also for ``'voxel'``), which ``devices`` must include.

    Returns
    -------
    ndarray
        float32 projections ``[angle][row][bin]`` (``[angle][bin]`` for a 2D
        slice); for a GPU array, a GPU array on its device (CuPy for CuPy
        input, else a :class:`DeviceArray`).
    """
    func = "project"
    if _gpu.is_gpu_array(volume):
        x, flat = _gpu_slices(volume, "volume", func, backend, projector)
        c, cs = A.center(center, func)
        out = _native.project_device(
            x, A.angles(theta, func), c, cs, None if n_bins is None else int(n_bins),
            str(projector), bool(sinogram_order), flat, A.devices(devices),
        )
        return _gpu.wrap_result(out, volume)
    vol = A.f32(volume, "volume", func, (2, 3))
    flat = vol.ndim == 2
    if flat:
        vol = vol[None]
    c, cs = A.center(center, func)
    out = _native.project(
        vol, A.angles(theta, func), c, cs, None if n_bins is None else int(n_bins),
        str(projector), bool(sinogram_order) or flat,
    )
    return out[0] if flat else out


def backproject(
    tomo: Any,
    theta: Any,
    center: Union[None, float, Sequence[float]] = None,
    *,
    shape: Optional[Tuple[int, int]] = None,
    projector: str = "joseph",
    sinogram_order: bool = False,
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
) -> Any:
    """Parallel-beam back projection (no filter): the transpose of
    :func:`project` for the matched ``'joseph'`` and ``'line'`` models, the
    voxel-driven back projection of FBP for ``'voxel'``.

    Parameters
    ----------
    tomo : ndarray
        Projections ``[angle][row][bin]`` (sinograms with ``sinogram_order``),
        or one sinogram ``[angle][bin]``.
    theta, center
        As :func:`recon`.
    shape : (ny, nx), optional
        Slice size in pixels (default ``n_bins × n_bins``).
    projector : str
        ``'joseph'``, ``'line'`` or ``'voxel'``.
    backend, devices
        For GPU arrays only: ``'auto'`` or ``'cuda'``; a GPU array is back
        projected on its own device (``'joseph'``: the exact transpose of
        :func:`project`'s; ``'voxel'``: FBP's back projection kernels).

    Returns
    -------
    ndarray
        float32 volume ``[z][y][x]`` (``[y][x]`` for one sinogram); for a GPU
        array, a GPU array on its device.
    """
    func = "backproject"
    if _gpu.is_gpu_array(tomo):
        x, flat = _gpu_slices(tomo, "tomo", func, backend, projector)
        c, cs = A.center(center, func)
        sh = None if shape is None else tuple(int(v) for v in shape)
        out = _native.backproject_device(
            x, A.angles(theta, func), c, cs, bool(sinogram_order) or flat, sh, str(projector),
            flat, A.devices(devices),
        )
        return _gpu.wrap_result(out, tomo)
    arr = A.f32(tomo, "tomo", func, (2, 3))
    flat = arr.ndim == 2
    if flat:
        arr = arr[None]
    c, cs = A.center(center, func)
    sh = None
    if shape is not None:
        ny, nx = (int(v) for v in shape)
        sh = (ny, nx)
    out = _native.backproject(
        arr, A.angles(theta, func), c, cs, bool(sinogram_order) or flat, sh, str(projector)
    )
    return out[0] if flat else out


def project_cone(
    volume: Any,
    theta: Any,
    sod: float,
    odd: float,
    pixel_size: Union[float, Tuple[float, float]],
    detector: Tuple[int, int],
    *,
    voxel_size: Optional[float] = None,
    principal_point: Optional[Tuple[float, float]] = None,
    projector: str = "joseph",
    backend: str = "auto",
    devices: Union[None, int, str, Sequence[int]] = None,
) -> Any:
    """Cone-beam forward projection of a volume ``[z][y][x]``.

    Parameters
    ----------
    volume : ndarray
        ``[z][y][x]``.
    theta, sod, odd, pixel_size, principal_point
        As :func:`fdk`.
    detector : (rows, cols)
        Detector size in pixels.
    voxel_size : float, optional
        Voxel side in world units (default: the largest the detector covers).
    projector : str
        ``'joseph'``, ``'line'`` or ``'voxel'``.
    backend, devices
        For GPU arrays only: ``'auto'`` or ``'cuda'``; a GPU array is projected
        on its own device (Joseph's projector, also for ``'voxel'``).

    Returns
    -------
    ndarray
        float32 projections ``[angle][row][col]``, line integrals in world
        units; for a GPU array, a GPU array on its device.
    """
    func = "project_cone"
    scan = _cone_scan(sod, odd, pixel_size, principal_point, voxel_size, func)
    rows, cols = (int(v) for v in detector)
    if _gpu.is_gpu_array(volume):
        _gpu.refuse_backend(backend, func)
        _gpu_model(projector, func)
        g = _gpu.cuda_array(volume, "volume", func, (3,))
        out = _native.project_cone_device(
            (g.ptr, g.shape, g.stream), A.angles(theta, func), scan, (rows, cols),
            str(projector), A.devices(devices),
        )
        return _gpu.wrap_result(out, volume)
    vol = A.f32(volume, "volume", func, (3,))
    return _native.project_cone(
        vol, A.angles(theta, func), scan, (rows, cols), str(projector),
    )
