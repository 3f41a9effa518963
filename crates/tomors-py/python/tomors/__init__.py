"""tomors: tomographic reconstruction in Rust, fast on NVIDIA GPUs and
multi-core CPUs, from Python.

Conventions (TomoPy's and ASTRA's): projections ``[angle][row][col]``,
sinograms ``[row][angle][col]``, volumes ``[z][y][x]``, angles in radians,
the rotation axis ``center`` in detector pixels from the left edge of a row.
Parallel-beam geometry is ASTRA's ``parallel3d``; cone beam ASTRA's ``cone``.

Main calls
----------
recon              FBP and the iterative methods, parallel beam (CPU or GPU)
fdk, recon_cone    cone beam: FDK and the iterative methods
project, project_cone, backproject
Projector          a linear operator (forward/backward, scipy LinearOperator)
read, normalize, minus_log, remove_stripes, remove_zingers, find_center, stitch_half, write
shepp_logan, shepp_logan_projections, shepp_logan_cone, angles
nrmse, psnr, ssim
devices, tune

Arrays: C-contiguous float32 input is read in place; other dtypes and orders
are converted once. Results are new float32 NumPy arrays. GPU arrays
(``__cuda_array_interface__`` or DLPack: CuPy, Numba, PyTorch, JAX) are
read in place on their GPU by every call with a GPU backend (recon, fdk,
recon_cone, project, backproject, project_cone, Projector); the result stays
there: a CuPy array for CuPy input, else a ``DeviceArray``
(``__cuda_array_interface__``, ``.get()``). Long calls release the GIL. Errors: ValueError (shapes, NaN, names, centre), OSError and
FileNotFoundError (files), RuntimeError (GPU). See docs/python.md.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import _native
from ._io import (
    Scan,
    find_center,
    minus_log,
    normalize,
    read,
    remove_stripes,
    remove_zingers,
    stitch_half,
    write,
)
from ._phantom import angles, nrmse, psnr, shepp_logan, shepp_logan_cone, shepp_logan_projections, ssim
from ._native import DeviceArray
from ._projector import Projector
from ._recon import backproject, fdk, project, project_cone, recon, recon_cone

__version__: str = _native.__version__

__all__ = [
    "__version__",
    "recon",
    "fdk",
    "recon_cone",
    "project",
    "project_cone",
    "backproject",
    "Projector",
    "DeviceArray",
    "read",
    "Scan",
    "normalize",
    "minus_log",
    "remove_stripes",
    "remove_zingers",
    "find_center",
    "stitch_half",
    "write",
    "shepp_logan",
    "shepp_logan_projections",
    "shepp_logan_cone",
    "angles",
    "nrmse",
    "psnr",
    "ssim",
    "devices",
    "tune",
    "release_gpus",
]


def devices() -> Dict[str, Any]:
    """The CUDA GPUs tomors can use, and why not when there are none.

    Returns
    -------
    dict
        ``{'usable': bool, 'reason': str or None, 'devices': [{'index', 'name',
        'compute_capability', 'multiprocessors', 'memory_free', 'memory_total'}]}``.
        ``reason`` says why no GPU is usable (no driver library, no device,
        ...). CUDA is loaded at run time, so the same package serves machines
        with and without a GPU (set ``LD_LIBRARY_PATH`` so NVRTC and cuFFT
        are found).
    """
    return _native.devices()


def release_gpus() -> int:
    """Free the GPU contexts and device buffers kept between calls.

    The first GPU call of a process opens its devices (a CUDA context each,
    kernels loaded: about 0.3 s on an H100); later calls with the same
    ``devices`` reuse them. This drops them (a call running in another
    thread keeps its own until it returns). Returns how many backends were
    kept.
    """
    return _native.release_gpus()


def tune(
    device: int = 0,
    size: int = 2048,
    reps: int = 5,
    quick: bool = False,
    out: Optional[str] = None,
    dry_run: bool = False,
) -> List[Dict[str, Any]]:
    """Time the GPU back-projection kernels on one device and store the
    fastest configurations in the tuning cache that :func:`recon` reads
    (``~/.cache/tomors/tuning.tsv`` or ``$TOMORS_TUNING_FILE``), as ``tomors tune``.

    Parameters
    ----------
    device : int
        The GPU.
    size : int
        Timed problem: ``size`` bins × ``size`` angles → ``size²`` slices.
    reps : int
        Timed launches per candidate (median kept).
    quick : bool
        A reduced search (seconds instead of about a minute).
    out : str, optional
        Where to store the results.
    dry_run : bool
        Measure only; leave the cache alone.

    Returns
    -------
    list of dict
        The best configuration per kernel family, interpolation and slice
        class, with its speed in GU/s.

    Raises
    ------
    RuntimeError
        No usable GPU.
    """
    return _native.tune(int(device), int(size), int(reps), bool(quick), out, bool(dry_run))


def _plain_signatures() -> None:
    """``help(tomors.recon)`` shows ``recon(tomo, theta, center=None, ...)``, as
    TomoPy's does: the public callables drop their runtime annotations (the
    types are in ``__init__.pyi``, which type checkers read instead)."""
    import inspect

    for name in __all__:
        obj = globals().get(name)
        targets = []
        if inspect.isfunction(obj):
            targets.append(obj)
        elif inspect.isclass(obj) and obj.__module__.startswith("tomors."):
            for member in vars(obj).values():
                f = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if inspect.isfunction(f):
                    targets.append(f)
        for f in targets:
            f.__annotations__ = {}


_plain_signatures()

