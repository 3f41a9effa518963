""":class:`Projector`: a linear operator for writing one's own algorithms
(as ASTRA's ``OpTomo``)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays as A
from . import _gpu
from . import _native


class Projector:
    """The projection operator ``A`` and its back projection ``B``.

    For the matched models (``'joseph'``, ``'line'``) ``B = Aᵀ`` exactly, so
    ``⟨A x, y⟩ = ⟨x, Aᵀ y⟩`` to float32 rounding; ``'voxel'`` pairs Joseph's
    forward projection with the voxel-driven back projection of FBP (fast,
    not the exact transpose).

    It wraps the library's linear-operator abstraction (tomors-core's
    ``LinearOperator``, the one every iterative method is written against):
    ``backend='cpu'`` (the default) any CPU projector, ``backend='cuda'`` the
    GPU operator (Joseph's pair in parallel beam; the Joseph or voxel pair in
    cone beam) on one GPU, with the same calls and shapes. A GPU operator
    takes NumPy arrays (uploaded, result downloaded) or GPU arrays
    (``__cuda_array_interface__`` or DLPack: CuPy, Numba, PyTorch;
    C-contiguous float32 on the operator's device), which it reads and
    answers on the device with no host round trip: a CuPy array for CuPy
    input, else a :class:`tomors.DeviceArray`. A CPU operator given a GPU
    array builds the same operator once on that array's GPU (the models the
    GPU has: ``'joseph'``; in cone beam ``'joseph'`` and ``'voxel'``) and
    answers there; ``'line'`` raises TypeError.

    Parallel beam (``Projector(theta, n_bins, ...)``):

    - volume ``x``: ``[y][x]`` (2D, the default) or ``[slice][y][x]`` with ``slices=k``;
    - projections ``y``: sinograms ``[angle][bin]`` or ``[slice][angle][bin]``
      (sinogram order: ``np.swapaxes(y, 0, 1)`` gives ``[angle][row][bin]``).

    Cone beam (``Projector.cone(...)``): volume ``[z][y][x]``, projections
    ``[angle][row][col]``.

    Parameters
    ----------
    theta : array_like
        Angles in radians.
    n_bins : int
        Detector bins per row (unit width).
    shape : int or (ny, nx), optional
        Slice size in pixels of the bin width (default ``n_bins × n_bins``).
    slices : int, optional
        Number of slices of a 3D stack (default: a 2D operator).
    center : float or array_like, optional
        Rotation-axis position (default ``(n_bins-1)/2``), or one per projection.
    projector : str
        ``'joseph'`` (default), ``'line'`` or ``'voxel'``.
    backend : str
        ``'cpu'`` (default), ``'cuda'`` (a ``RuntimeError`` saying why when no
        GPU is usable; ``ValueError`` for a model the GPU lacks) or ``'auto'``
        (the GPU when usable and it runs the model, else the CPU).
    device : int, optional
        The GPU of ``backend='cuda'`` (default 0).

    Examples
    --------
    >>> A = tomors.Projector(theta, 256)
    >>> y = A @ image                      # forward projection, [angle][bin]
    >>> x = A.T @ y                        # back projection, [y][x]
    >>> op = A.as_linear_operator()        # scipy.sparse.linalg.LinearOperator
    >>> x, *_ = scipy.sparse.linalg.lsqr(op, sino.ravel(), iter_lim=50)
    """

    def __init__(
        self,
        theta: Any,
        n_bins: int,
        shape: Union[None, int, Tuple[int, int]] = None,
        *,
        slices: Optional[int] = None,
        center: Union[None, float, Sequence[float]] = None,
        projector: str = "joseph",
        backend: str = "cpu",
        device: Optional[int] = None,
        _native_op: Any = None,
    ) -> None:
        self._twins: Dict[int, Any] = {}
        if _native_op is not None:
            self._op, self._make = _native_op
            self._flat = False
            return
        func = "Projector"
        if shape is None:
            ny = nx = int(n_bins)
        elif isinstance(shape, (int, np.integer)):
            ny = nx = int(shape)
        else:
            ny, nx = (int(v) for v in shape)
        c, cs = A.center(center, func)
        self._flat = slices is None
        th = A.angles(theta, func)
        args = (th, int(n_bins), 1 if slices is None else int(slices), ny, nx, c, cs,
                str(projector))
        self._op = _native.Operator.parallel(
            *args, str(backend), None if device is None else int(device),
        )
        self._make = lambda dev: _native.Operator.parallel(*args, "cuda", dev)

    @classmethod
    def cone(
        cls,
        theta: Any,
        sod: float,
        odd: float,
        pixel_size: Union[float, Tuple[float, float]],
        detector: Tuple[int, int],
        *,
        shape: Optional[Tuple[int, int, int]] = None,
        voxel_size: Optional[float] = None,
        principal_point: Optional[Tuple[float, float]] = None,
        projector: str = "joseph",
        backend: str = "cpu",
        device: Optional[int] = None,
    ) -> "Projector":
        """A cone-beam operator (parameters as :func:`tomors.fdk`;
        ``detector = (rows, cols)``, ``shape = (nz, ny, nx)`` default
        ``(rows, cols, cols)``; ``backend`` and ``device`` as for the
        parallel-beam operator; the GPU runs ``'joseph'`` and ``'voxel'``)."""
        func = "Projector.cone"
        pp = None if principal_point is None else A.pair(principal_point, "principal_point", func)
        rows, cols = (int(v) for v in detector)
        sh = None if shape is None else tuple(int(v) for v in shape)
        args = (
            A.angles(theta, func), float(sod), float(odd), A.pair(pixel_size, "pixel_size", func),
            (rows, cols), pp, sh, None if voxel_size is None else float(voxel_size),
            str(projector),
        )
        op = _native.Operator.cone(*args, str(backend), None if device is None else int(device))
        return cls(None, 0, _native_op=(op, lambda dev: _native.Operator.cone(*args, "cuda", dev)))

    @property
    def vol_shape(self) -> Tuple[int, ...]:
        """Shape of the volumes ``x``."""
        s = self._op.vol_shape
        return s[1:] if self._flat else s

    @property
    def proj_shape(self) -> Tuple[int, ...]:
        """Shape of the projections ``y``."""
        s = self._op.proj_shape
        return s[1:] if self._flat else s

    @property
    def shape(self) -> Tuple[int, int]:
        """``(len(y.ravel()), len(x.ravel()))``: the operator as a matrix."""
        return int(np.prod(self.proj_shape)), int(np.prod(self.vol_shape))

    @property
    def dtype(self) -> np.dtype:
        """float32."""
        return np.dtype(np.float32)

    @property
    def voxel_size(self) -> float:
        """Voxel side in world units (1 = one detector bin in parallel beam)."""
        return self._op.voxel_size

    @property
    def is_matched(self) -> bool:
        """Whether :meth:`backward` is the exact transpose of :meth:`forward`."""
        return self._op.is_matched

    @property
    def backend(self) -> str:
        """Where the operator runs: ``'cpu'`` or the GPU (``'cuda:0 NVIDIA ...'``)."""
        return self._op.backend

    @property
    def device(self) -> Optional[int]:
        """The GPU's index (None for a CPU operator)."""
        return self._op.device

    def _as(self, a: Any, shape: Tuple[int, ...], what: str) -> np.ndarray:
        arr = A.f32(a, what, "Projector", (1, 2, 3))
        if arr.size != int(np.prod(shape)):
            raise ValueError(
                f"tomors.Projector: {what} has shape {tuple(arr.shape)}, expected {shape}"
            )
        arr = arr.reshape(shape)
        return arr[None] if self._flat else arr

    def _device_op(self, ptr: int, what: str, func: str) -> Any:
        """The native operator that runs on the GPU holding ``ptr``: this
        one for a GPU operator, else (a CPU operator given a GPU array) the
        same operator built on that GPU, once (TypeError for the models the
        GPU lacks)."""
        if self._op.device is not None:
            return self._op
        dev = int(_native.device_of(ptr))
        twin = self._twins.get(dev)
        if twin is None:
            try:
                twin = self._make(dev)
            except ValueError as e:
                raise TypeError(
                    f"tomors.{func}: {what} is a GPU array, but this CPU operator's model has "
                    f"no GPU version ({e}); pass a NumPy array (cupy.asnumpy(x))"
                ) from None
            self._twins[dev] = twin
        return twin

    def _on_device(self, a: Any, shape: Tuple[int, ...], what: str, forward: bool) -> Any:
        """``forward``/``backward`` of a GPU array, on its device."""
        func = "Projector.forward" if forward else "Projector.backward"
        g = _gpu.cuda_array(a, what, func, (1, 2, 3))
        if int(np.prod(g.shape, dtype=np.int64)) != int(np.prod(shape)):
            raise ValueError(
                f"tomors.{func}: {what} has shape {g.shape}, expected {shape}"
            )
        op = self._device_op(g.ptr, what, func)
        out_shape = list(self.proj_shape if forward else self.vol_shape)
        run = op.forward_device if forward else op.backward_device
        return _gpu.wrap_result(run(g.ptr, g.stream, out_shape), a)

    def forward(self, x: Any) -> Any:
        """``A x``: projections of the volume ``x`` (shape :attr:`vol_shape`, or
        flattened). A GPU array (GPU operators) gives a GPU array on its
        device: CuPy for CuPy input, else a :class:`tomors.DeviceArray`."""
        if _gpu.is_gpu_array(x):
            return self._on_device(x, self.vol_shape, "x", True)
        y = self._op.forward(self._as(x, self.vol_shape, "x"))
        return y[0] if self._flat else y

    def backward(self, y: Any) -> Any:
        """``B y`` (``Aᵀ y`` for matched models): back projection of ``y``
        (shape :attr:`proj_shape`, or flattened); GPU arrays as :meth:`forward`."""
        if _gpu.is_gpu_array(y):
            return self._on_device(y, self.proj_shape, "y", False)
        x = self._op.backward(self._as(y, self.proj_shape, "y"))
        return x[0] if self._flat else x

    def __matmul__(self, x: Any) -> np.ndarray:
        return self.forward(x)

    @property
    def T(self) -> "_Transposed":
        """The back projection as an object: ``A.T @ y``."""
        return _Transposed(self)

    def as_linear_operator(self) -> Any:
        """The operator as a ``scipy.sparse.linalg.LinearOperator`` on flat
        float32 vectors (``matvec`` = forward, ``rmatvec`` = backward)."""
        from scipy.sparse.linalg import LinearOperator

        return LinearOperator(
            self.shape,
            matvec=lambda v: self.forward(v).ravel(),
            rmatvec=lambda v: self.backward(v).ravel(),
            dtype=np.float32,
        )

    def __repr__(self) -> str:
        return (
            f"tomors.Projector({self._op.name}, volume {self.vol_shape} -> projections "
            f"{self.proj_shape}, matched={self.is_matched}, backend={self.backend!r})"
        )


class _Transposed:
    def __init__(self, p: Projector) -> None:
        self._p = p

    def __matmul__(self, y: Any) -> np.ndarray:
        return self._p.backward(y)
