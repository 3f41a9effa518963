"""Reading, preprocessing, centre finding and writing: :func:`read`,
:func:`normalize`, :func:`minus_log`, :func:`remove_stripes`,
:func:`remove_zingers`, :func:`find_center`, :func:`write`."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays as A
from . import _native

PathLike = Union[str, "os.PathLike[str]"]


def _path(p: Any, func: str) -> str:
    try:
        return os.fspath(p)
    except TypeError:
        raise TypeError(f"tomors.{func}: a path must be a str or os.PathLike, got {p!r}") from None


def _stack(groups: List[Tuple[float, np.ndarray]], shape: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    if not groups:
        return np.zeros((0,) + shape, dtype=np.float32), np.zeros(0)
    frames = np.concatenate([g[1] for g in groups], axis=0)
    positions = np.concatenate([np.full(len(g[1]), g[0], dtype=np.float64) for g in groups])
    return frames, positions


class Scan:
    """What :func:`read` returns. Unpacks as TomoPy's readers do::

        proj, flat, dark, theta = tomors.read("scan.h5")

    Attributes
    ----------
    projections : ndarray
        Raw projections ``[angle][row][col]`` (float32).
    flats, darks : ndarray
        Flat and dark frames ``[frame][row][col]`` (possibly 0 frames).
    angles : ndarray
        Projection angles in radians.
    flat_positions, dark_positions : ndarray
        Where each flat/dark frame was taken, as a projection index (0 before
        the scan, ``n`` after it): :func:`normalize` interpolates between groups.
    format : str
        The reader ("DXchange HDF5", "NeXus NXtomo HDF5", "TIFF stack", ...).
    shape : tuple
        ``(angles, rows, cols)`` of the whole scan on disk.
    rows : tuple
        The detector rows read, ``(start, end)``.
    path : str
        The file read.
    """

    def __init__(self, d: Dict[str, Any], path: str) -> None:
        self.projections: np.ndarray = d["projections"]
        shape = self.projections.shape[1:]
        self.flats, self.flat_positions = _stack(d["flats"], shape)
        self.darks, self.dark_positions = _stack(d["darks"], shape)
        self.angles: np.ndarray = d["angles"]
        self.format: str = d["format"]
        self.shape: Tuple[int, int, int] = d["shape"]
        self.rows: Tuple[int, int] = d["rows"]
        self.path = path

    def __iter__(self) -> Iterator[np.ndarray]:
        return iter((self.projections, self.flats, self.darks, self.angles))

    def normalized(self, average: str = "mean", log: bool = True, epsilon: float = 1e-6) -> np.ndarray:
        """The projections flat/dark corrected (interpolating between flat
        groups taken before and after the scan) and, with ``log``, -log'ed:
        what ``tomors recon`` reconstructs."""
        p = normalize(
            self.projections, self.flats, self.darks, average=average,
            flat_positions=self.flat_positions, dark_positions=self.dark_positions,
        )
        return minus_log(p, epsilon) if log and len(self.flats) else p

    def __repr__(self) -> str:
        return (
            f"tomors.Scan({self.path!r}, {self.format}, projections {self.projections.shape}, "
            f"{len(self.flats)} flats, {len(self.darks)} darks)"
        )


def read(
    path: PathLike,
    rows: Optional[Tuple[int, int]] = None,
    *,
    data_path: Optional[str] = None,
    image_key_path: Optional[str] = None,
    angles_path: Optional[str] = None,
    angles_unit: Optional[str] = None,
    flats: Optional[PathLike] = None,
    darks: Optional[PathLike] = None,
    raw_shape: Optional[Tuple[int, int, int]] = None,
    raw_dtype: str = "f32",
    raw_endian: str = "little",
    raw_offset: int = 0,
    angle_range: Optional[float] = None,
    angles: Any = None,
) -> Scan:
    """Read a scan: DXchange or NeXus NXtomo HDF5 (with flats and darks), a
    TIFF stack (directory, glob such as ``'proj_*.tif'`` or multi-page file),
    ``.npy`` ``[angle][row][col]``, or raw binary (``raw_shape``), with the
    path options of ``tomors recon`` (docs/io.md).

    Parameters
    ----------
    path : str or PathLike
        The file, directory or glob.
    rows : (start, end), optional
        Detector rows to read (end excluded; default all).
    data_path, image_key_path, angles_path : str, optional
        HDF5 dataset paths overriding the defaults of the format.
    angles_unit : {'deg', 'rad'}, optional
        Unit of stored angles when the file does not say.
    flats, darks : str or PathLike, optional
        Flat/dark stacks (TIFF or .npy) for TIFF, .npy and raw input.
    raw_shape : (angles, rows, cols), optional
        Layout of a raw file, with ``raw_dtype`` (u8, u16, u32, i8, i16, i32,
        f32, f64), ``raw_endian`` ('little', 'big') and ``raw_offset`` (bytes).
    angle_range : float, optional
        Formats without angles: the scan covers this many degrees, end
        excluded (default 180).
    angles : array_like, optional
        Formats without angles: the angles in radians.

    Returns
    -------
    Scan
        Unpacks as ``proj, flat, dark, theta``; see :class:`Scan`.

    Raises
    ------
    FileNotFoundError, OSError
        A missing, unreadable, truncated or malformed file.
    ValueError
        Bad options.
    """
    func = "read"
    p = _path(path, func)
    r = None if rows is None else tuple(int(v) for v in rows)
    ang = None if angles is None else A.angles(angles, func)
    d = _native.read(
        p, r, data_path, image_key_path, angles_path, angles_unit,
        None if flats is None else _path(flats, func), None if darks is None else _path(darks, func),
        None if raw_shape is None else tuple(int(v) for v in raw_shape), str(raw_dtype),
        str(raw_endian), int(raw_offset), None if angle_range is None else float(angle_range), ang,
    )
    return Scan(d, p)


def _frames(a: Any, shape: Tuple[int, int], name: str, func: str) -> np.ndarray:
    if a is None:
        return np.zeros((0,) + shape, dtype=np.float32)
    arr = A.f32(a, name, func, (2, 3))
    return arr[None] if arr.ndim == 2 else arr


def normalize(
    proj: Any,
    flats: Any,
    darks: Any = None,
    *,
    average: str = "mean",
    flat_positions: Optional[Sequence[float]] = None,
    dark_positions: Optional[Sequence[float]] = None,
) -> np.ndarray:
    """Flat/dark correction ``(proj - dark) / (flat - dark)`` (denominators
    below 1e-6 taken as 1e-6), as ``tomors recon`` does.

    Parameters
    ----------
    proj : ndarray
        Raw projections ``[angle][row][col]``.
    flats, darks : ndarray
        Frames ``[frame][row][col]`` (or one ``[row][col]``); ``darks`` may be None.
    average : {'mean', 'median'}
        How the frames of a group are combined.
    flat_positions, dark_positions : sequence of float, optional
        Where each frame was taken as a projection index (see :class:`Scan`);
        frames with equal consecutive positions form a group, and groups are
        interpolated linearly over the projection index. Default: one group.

    Returns
    -------
    ndarray
        float32 transmissions ``[angle][row][col]`` (a new array).
    """
    func = "normalize"
    p = A.f32(proj, "proj", func, (3,))
    shape = p.shape[1:]
    f = _frames(flats, shape, "flats", func)
    d = _frames(darks, shape, "darks", func)
    fp = [0.0] * len(f) if flat_positions is None else [float(v) for v in flat_positions]
    dp = [0.0] * len(d) if dark_positions is None else [float(v) for v in dark_positions]
    return _native.normalize(p, f, fp, d, dp, str(average))


def minus_log(x: Any, epsilon: float = 1e-6) -> np.ndarray:
    """``-log(x)`` with values at or below ``epsilon`` (and NaN) set to
    ``epsilon`` first, as ``tomors recon`` does. Returns a new float32 array."""
    return _native.minus_log(A.f32(x, "x", "minus_log", (1, 2, 3, 4)), float(epsilon))


def _per_sinogram(fn: Any, tomo: Any, func: str, *args: Any) -> np.ndarray:
    arr = A.f32(tomo, "tomo", func, (2, 3))
    if arr.ndim == 2:
        return fn(arr[:, None, :], *args)[:, 0, :]
    return fn(arr, *args)


def remove_stripes(
    tomo: Any,
    size: int = 21,
    method: str = "sorting",
    *,
    order: int = 2,
    sigma: float = 10.0,
) -> np.ndarray:
    """Ring/stripe removal on every sinogram (Vo, Atwood & Drakopoulos 2018),
    as ``tomors recon --stripe METHOD``.

    Parameters
    ----------
    tomo : ndarray
        -log'ed projections ``[angle][row][col]`` or one sinogram ``[angle][bin]``.
    size : int
        Median window across bins of the sorting method (odd; Vo suggests
        11-31): ``--stripe SIZE``.
    method : str
        ``'sorting'`` (algorithm 3, the default; TomoPy's
        ``remove_stripe_based_sorting``), ``'fitting'`` (algorithm 1,
        algotom's ``remove_stripe_based_fitting``: a polynomial of ``order``
        fitted along the angles of every bin, its fit smoothed across bins by
        a Gaussian window of ``sigma`` frequency samples; good for wide, low
        frequency stripes): ``--stripe fitting:ORDER,SIGMA``; or any CLI
        ``--stripe`` specification with its parameters after ``':'``
        (``'filtering:3,21'``, ``'large:3,51'``, ``'dead:3,51'``,
        ``'all:3,51,21'``, ``'fw:4,2'``), given as is.
    order : int
        Polynomial order of ``'fitting'`` (1 to 8; 2 typical).
    sigma : float
        Gaussian window of ``'fitting'`` in frequency samples across bins (10
        typical; smaller removes more).

    Returns
    -------
    ndarray
        A new float32 array of the same shape.
    """
    name = str(method).strip().lower()
    if name in ("sorting", "sort"):
        spec = f"sorting:{int(size)}"
    elif name in ("fitting", "fit"):
        spec = f"fitting:{int(order)},{float(sigma)!r}"
    else:
        spec = name
    return _per_sinogram(_native.remove_stripes, tomo, "remove_stripes", spec)


def remove_zingers(tomo: Any, threshold: float) -> np.ndarray:
    """Zinger (outlier) removal: a value differing from the median of its 3×3
    neighbourhood (angle × bin) by more than ``threshold · |median|`` is
    replaced by that median, as ``tomors recon --zinger THRESHOLD``.

    Returns a new float32 array of the shape of ``tomo`` (``[angle][row][col]``
    or ``[angle][bin]``)."""
    return _per_sinogram(_native.remove_zingers, tomo, "remove_zingers", float(threshold))


def find_center(
    tomo: Any,
    theta: Any,
    rows: Union[None, int, Sequence[int]] = None,
    *,
    smin: float = -50.0,
    smax: float = 50.0,
    range: Optional[Tuple[float, float]] = None,
    half_acquisition: bool = False,
    return_quality: bool = False,
) -> Any:
    """Find the rotation centre with the Fourier metric of Vo, Atwood &
    Drakopoulos 2014 (TomoPy's ``find_center_vo``), as ``tomors recon
    --center auto``; or, with ``half_acquisition=True``, the offset axis of a
    360° half-acquisition scan (as ``--half-acquisition``).

    Parameters
    ----------
    tomo : ndarray
        -log'ed projections ``[angle][row][col]`` or one sinogram ``[angle][bin]``.
    theta : array_like
        Angles in radians (scans over more than 180° use their first 180°;
        ``half_acquisition`` needs a whole turn).
    rows : int or list of int, optional
        Detector rows to search (default: up to 3 spread over the detector;
        the median of their centres is returned).
    smin, smax : float
        Search range relative to the detector centre, pixels.
    range : (float, float), optional
        Search the centre between detector columns ``a`` and ``b`` instead
        (``--center-range a:b``; ``(0, n-1)``: the whole detector). With
        ``half_acquisition`` it limits the axis search (default: the whole
        detector, both sides).
    half_acquisition : bool
        A 360° scan whose axis sits near one edge (extended field of view):
        the axis is found by matching each projection with its mirrored
        opposite (Vo et al. 2021, algotom's ``find_center_360``; as the CLI).
        Pass it to :func:`stitch_half` or ``recon(..., half_acquisition=True)``.
    return_quality : bool
        Also return the quality (``1 - min/median`` of the metric; near 0: no
        clear minimum) and the per-row results ``[(row, centre, quality)]``.

    Returns
    -------
    float
        The centre in detector pixels (the ``center`` of :func:`recon`).
    """
    func = "find_center"
    arr = A.f32(tomo, "tomo", func, (2, 3))
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if rows is not None:
        rows = [int(rows)] if isinstance(rows, (int, np.integer)) else [int(r) for r in rows]
    rng = None
    if range is not None:
        if (smin, smax) != (-50.0, 50.0):
            raise ValueError(f"tomors.{func}: give either range or smin/smax, not both")
        try:
            a, b = range
            rng = (float(a), float(b))
        except (TypeError, ValueError):
            raise ValueError(f"tomors.{func}: range must be (a, b), got {range!r}") from None
    c, q, per_row = _native.find_center(
        arr, A.angles(theta, func), rows, float(smin), float(smax), rng, bool(half_acquisition)
    )
    return (c, q, per_row) if return_quality else c


def stitch_half(tomo: Any, theta: Any, center: float, *, return_info: bool = False) -> Any:
    """Stitch a 360° half-acquisition scan (rotation axis near one edge of
    the detector) into a 180° scan of about twice the width, as ``tomors
    recon --half-acquisition --center C`` does before reconstructing.

    Each projection at θ in the first half turn is paired with the one at
    θ + π (interpolated between the nearest angles when none sits exactly
    there), mirrored about the axis, and the two are blended with linear
    weights over their overlap.

    Parameters
    ----------
    tomo : ndarray
        -log'ed projections ``[angle][row][col]`` over a whole turn (or one
        sinogram ``[angle][bin]``), preprocessed (stripes removed on the 360°
        data first, as the CLI does).
    theta : array_like
        Angles in radians, covering 360°.
    center : float
        The rotation axis in detector pixels (:func:`find_center` with
        ``half_acquisition=True`` finds it).
    return_info : bool
        Also return ``{'overlap': pixels, 'axis': center}``.

    Returns
    -------
    (ndarray, ndarray, float)
        The stitched projections ``[angle][row][width]`` (``[angle][width]``
        for a sinogram), their angles (the first half turn's) and the axis
        in the stitched columns: ``recon(p, th, center=c)`` reconstructs the
        wide slice. With ``return_info``, a dict is appended.
    """
    func = "stitch_half"
    arr = A.f32(tomo, "tomo", func, (2, 3))
    flat = arr.ndim == 2
    if flat:
        arr = arr[:, None, :]
    if center is None:
        raise ValueError(
            f"tomors.{func}: center (the axis) is required; find it with "
            "tomors.find_center(tomo, theta, half_acquisition=True)"
        )
    out, th, c, overlap = _native.stitch_half(arr, A.angles(theta, func), float(center))
    if flat:
        out = out[:, 0, :]
    if return_info:
        return out, th, c, {"overlap": overlap, "axis": float(center)}
    return out, th, c


def write(
    path: PathLike,
    volume: Any,
    *,
    overwrite: bool = False,
    tiff_bits: int = 32,
    tiff_range: Optional[Tuple[float, float]] = None,
    attributes: Optional[Dict[str, Any]] = None,
) -> None:
    """Write a volume ``[z][y][x]`` (or one slice ``[y][x]``) atomically: under
    a temporary name, renamed when complete, so a failure leaves nothing that
    looks finished.

    Parameters
    ----------
    path : str or PathLike
        ``X.npy`` (float32), ``X.h5`` (dataset ``/volume`` with ``attributes``)
        or a directory name without extension (one TIFF per slice).
    volume : ndarray
        The volume.
    overwrite : bool
        Replace an existing output.
    tiff_bits : {32, 16, 8}
        TIFF sample type; 16 and 8 scale ``tiff_range = (lo, hi)`` linearly.
    attributes : dict, optional
        Text attributes stored with HDF5 and TIFF outputs.

    Raises
    ------
    FileExistsError
        ``path`` exists and ``overwrite`` is False.
    FileNotFoundError, OSError
        The directory does not exist or cannot be written.
    """
    func = "write"
    vol = A.f32(volume, "volume", func, (2, 3))
    if vol.ndim == 2:
        vol = vol[None]
    p = _path(path, func)
    if os.path.exists(p) and not overwrite:
        raise FileExistsError(f"{p}: already exists (pass overwrite=True to replace it)")
    tr = None if tiff_range is None else (float(tiff_range[0]), float(tiff_range[1]))
    attrs = None if attributes is None else [(str(k), str(v)) for k, v in attributes.items()]
    _native.write(p, vol, bool(overwrite), int(tiff_bits), tr, attrs)
