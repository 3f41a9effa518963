"""Type stubs of tomors (see the docstrings for shapes and units)."""

import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Array = npt.ArrayLike
_F32 = npt.NDArray[np.float32]
_Path = Union[str, "os.PathLike[str]"]
_Center = Union[None, float, Sequence[float], npt.NDArray[Any]]
_Devices = Union[None, int, str, Sequence[int]]
_Progress = Optional[Callable[[int, int], object]]
_Pixel = Union[float, Tuple[float, float]]

__version__: str
__all__: List[str]

def recon(
    tomo: _Array,
    theta: _Array,
    center: _Center = ...,
    algorithm: str = ...,
    *,
    filter: str = ...,
    cutoff: float = ...,
    padding: str = ...,
    interp: str = ...,
    method: str = ...,
    iterations: int = ...,
    relaxation: Optional[float] = ...,
    projector: str = ...,
    min: Optional[float] = ...,
    max: Optional[float] = ...,
    block_size: Optional[int] = ...,
    tolerance: Optional[float] = ...,
    random_order: bool = ...,
    init: Optional[_Array] = ...,
    sinogram_order: bool = ...,
    backend: str = ...,
    devices: _Devices = ...,
    kernel: Optional[str] = ...,
    slab: int = ...,
    progress: _Progress = ...,
    verbose: bool = ...,
    return_info: bool = ...,
    half_acquisition: bool = ...,
) -> Any: ...
def fdk(
    proj: _Array,
    theta: _Array,
    sod: float,
    odd: float,
    pixel_size: _Pixel,
    voxel_size: Optional[float] = ...,
    shape: Optional[Tuple[int, int, int]] = ...,
    short_scan: Optional[bool] = ...,
    *,
    principal_point: Optional[Tuple[float, float]] = ...,
    filter: str = ...,
    cutoff: float = ...,
    padding: str = ...,
    backend: str = ...,
    devices: _Devices = ...,
    return_info: bool = ...,
) -> Any: ...
def recon_cone(
    proj: _Array,
    theta: _Array,
    sod: float,
    odd: float,
    pixel_size: _Pixel,
    algorithm: str = ...,
    *,
    iterations: int = ...,
    relaxation: Optional[float] = ...,
    projector: str = ...,
    min: Optional[float] = ...,
    max: Optional[float] = ...,
    block_size: Optional[int] = ...,
    tolerance: Optional[float] = ...,
    random_order: bool = ...,
    init: Optional[_Array] = ...,
    voxel_size: Optional[float] = ...,
    shape: Optional[Tuple[int, int, int]] = ...,
    principal_point: Optional[Tuple[float, float]] = ...,
    backend: str = ...,
    devices: _Devices = ...,
    progress: _Progress = ...,
    verbose: bool = ...,
    return_info: bool = ...,
) -> Any: ...
def project(
    volume: _Array,
    theta: _Array,
    center: _Center = ...,
    *,
    n_bins: Optional[int] = ...,
    projector: str = ...,
    sinogram_order: bool = ...,
    backend: str = ...,
    devices: _Devices = ...,
) -> Any: ...
def backproject(
    tomo: _Array,
    theta: _Array,
    center: _Center = ...,
    *,
    shape: Optional[Tuple[int, int]] = ...,
    projector: str = ...,
    sinogram_order: bool = ...,
    backend: str = ...,
    devices: _Devices = ...,
) -> Any: ...
def project_cone(
    volume: _Array,
    theta: _Array,
    sod: float,
    odd: float,
    pixel_size: _Pixel,
    detector: Tuple[int, int],
    *,
    voxel_size: Optional[float] = ...,
    principal_point: Optional[Tuple[float, float]] = ...,
    projector: str = ...,
    backend: str = ...,
    devices: _Devices = ...,
) -> Any: ...

class DeviceArray:
    """float32 C-contiguous GPU memory owned by tomors (results of calls on GPU arrays)."""

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def device(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    def get(self) -> np.ndarray: ...
    def __len__(self) -> int: ...
    def __dlpack__(
        self,
        stream: Any = ...,
        *,
        max_version: Any = ...,
        dl_device: Optional[Tuple[int, int]] = ...,
        copy: Optional[bool] = ...,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class Projector:
    def __init__(
        self,
        theta: _Array,
        n_bins: int,
        shape: Union[None, int, Tuple[int, int]] = ...,
        *,
        slices: Optional[int] = ...,
        center: _Center = ...,
        projector: str = ...,
        backend: str = ...,
        device: Optional[int] = ...,
    ) -> None: ...
    @classmethod
    def cone(
        cls,
        theta: _Array,
        sod: float,
        odd: float,
        pixel_size: _Pixel,
        detector: Tuple[int, int],
        *,
        shape: Optional[Tuple[int, int, int]] = ...,
        voxel_size: Optional[float] = ...,
        principal_point: Optional[Tuple[float, float]] = ...,
        projector: str = ...,
        backend: str = ...,
        device: Optional[int] = ...,
    ) -> Projector: ...
    @property
    def vol_shape(self) -> Tuple[int, ...]: ...
    @property
    def proj_shape(self) -> Tuple[int, ...]: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def voxel_size(self) -> float: ...
    @property
    def is_matched(self) -> bool: ...
    @property
    def backend(self) -> str: ...
    @property
    def device(self) -> Optional[int]: ...
    @property
    def T(self) -> Any: ...
    def forward(self, x: Any) -> Any: ...
    def backward(self, y: Any) -> Any: ...
    def __matmul__(self, x: Any) -> Any: ...
    def as_linear_operator(self) -> Any: ...

class Scan:
    projections: _F32
    flats: _F32
    darks: _F32
    angles: _F32
    flat_positions: npt.NDArray[np.float64]
    dark_positions: npt.NDArray[np.float64]
    format: str
    shape: Tuple[int, int, int]
    rows: Tuple[int, int]
    path: str
    def __iter__(self) -> Iterator[_F32]: ...
    def normalized(self, average: str = ..., log: bool = ..., epsilon: float = ...) -> _F32: ...

def read(
    path: _Path,
    rows: Optional[Tuple[int, int]] = ...,
    *,
    data_path: Optional[str] = ...,
    image_key_path: Optional[str] = ...,
    angles_path: Optional[str] = ...,
    angles_unit: Optional[str] = ...,
    flats: Optional[_Path] = ...,
    darks: Optional[_Path] = ...,
    raw_shape: Optional[Tuple[int, int, int]] = ...,
    raw_dtype: str = ...,
    raw_endian: str = ...,
    raw_offset: int = ...,
    angle_range: Optional[float] = ...,
    angles: Optional[_Array] = ...,
) -> Scan: ...
def normalize(
    proj: _Array,
    flats: _Array,
    darks: Optional[_Array] = ...,
    *,
    average: str = ...,
    flat_positions: Optional[Sequence[float]] = ...,
    dark_positions: Optional[Sequence[float]] = ...,
) -> _F32: ...
def minus_log(x: _Array, epsilon: float = ...) -> _F32: ...
def remove_stripes(
    tomo: _Array,
    size: int = ...,
    method: str = ...,
    *,
    order: int = ...,
    sigma: float = ...,
) -> _F32: ...
def remove_zingers(tomo: _Array, threshold: float) -> _F32: ...
def find_center(
    tomo: _Array,
    theta: _Array,
    rows: Union[None, int, Sequence[int]] = ...,
    *,
    smin: float = ...,
    smax: float = ...,
    range: Optional[Tuple[float, float]] = ...,
    half_acquisition: bool = ...,
    return_quality: bool = ...,
) -> Any: ...
def stitch_half(
    tomo: _Array,
    theta: _Array,
    center: float,
    *,
    return_info: bool = ...,
) -> Any: ...
def write(
    path: _Path,
    volume: _Array,
    *,
    overwrite: bool = ...,
    tiff_bits: int = ...,
    tiff_range: Optional[Tuple[float, float]] = ...,
    attributes: Optional[Dict[str, Any]] = ...,
) -> None: ...
def angles(n: int, degrees: float = ...) -> _F32: ...
def shepp_logan(n: int, nz: Optional[int] = ...) -> _F32: ...
def shepp_logan_projections(theta: _Array, n: int, nz: Optional[int] = ...) -> _F32: ...
def shepp_logan_cone(
    theta: _Array,
    sod: float,
    odd: float,
    pixel_size: _Pixel,
    detector: Tuple[int, int],
    principal_point: Optional[Tuple[float, float]] = ...,
) -> Tuple[_F32, _F32, float]: ...
def nrmse(x: _Array, reference: _Array, mask: Union[None, float, _Array] = ...) -> float: ...
def psnr(x: _Array, reference: _Array, mask: Union[None, float, _Array] = ...) -> float: ...
def ssim(x: _Array, reference: _Array) -> float: ...
def devices() -> Dict[str, Any]: ...
def release_gpus() -> int: ...
def tune(
    device: int = ...,
    size: int = ...,
    reps: int = ...,
    quick: bool = ...,
    out: Optional[str] = ...,
    dry_run: bool = ...,
) -> List[Dict[str, Any]]: ...
