"""GPU arrays in every call with a GPU backend: ``project``, ``backproject``,
``project_cone``, ``fdk``, ``recon_cone`` and a CPU ``Projector`` given a GPU
array read it in place on its device and return a GPU array there, with no
host round trip of the data (host↔device bytes counted by
``tomors._native._debug_transfer_bytes()``); each result is compared with the
CPU's values. DLPack producers (``__dlpack__`` without
``__cuda_array_interface__``) are read too.

Device memory comes from the CUDA driver through ctypes (tests/cuda_driver.py),
standing in for CuPy; CuPy tests run where CuPy is installed. Skips with the
reason without a usable GPU, fails instead under TOMORS_REQUIRE_GPU=1; the
argument checks at the end need no GPU.

Bounds (ARCHITECTURE.md; tomors-cuda's own tests): Joseph's GPU projectors
and the solvers on them interpolate with exact f32 arithmetic (ALU), so they
agree with the CPU to 1e-5 (the operator measured 1.6e-7 to 2.2e-7 through
Python: ×50 margin) and iterate to 1e-4 (tomors-cuda's SIRT bound); the
texture kernels (FBP's voxel-driven back projection, FDK) use 8-bit
interpolation weights: 2e-3 against the CPU. The device path against the
host-array GPU path runs the same kernels on the same values: 1e-5 (f32
rounding of a different order of atomics or slabs).
"""

import numpy as np
import pytest

import tomors
from conftest import rel_l2
from tomors import _native

ALU_BOUND = 1e-5
ITER_BOUND = 1e-4
TEX_BOUND = 2e-3
SAME_BOUND = 1e-5
# The host-array FDK may take the folded kernel (a slice and its mirror from
# one float2 fetch, the same 8-bit weights at mirrored positions), the device
# path the unfolded one: they differ by 2.5-3.5e-4 (docs/runs/
# 2026-11-27-h200-fdk-batch3.txt); about 3x that.
FOLD_BOUND = 1e-3
# A few KiB move between host and device on the device paths (angle tables,
# filter response, weights, partial sums of the finiteness checks); the
# data themselves are hundreds of KiB and more.
SMALL = 64 * 1024


class DLPackView:
    """The array ``a`` seen through DLPack only (``__dlpack__`` and
    ``__dlpack_device__`` passed on, no ``__cuda_array_interface__``)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def on_device(fn):
    """``fn()``'s result (a DeviceArray, checked) copied to NumPy, and the
    host↔device bytes the call moved."""
    before = _native._debug_transfer_bytes()
    out = fn()
    moved = _native._debug_transfer_bytes() - before
    assert isinstance(out, tomors.DeviceArray), type(out)
    return out.get(), moved


def check(name, got, want, bound, moved=None, data=None):
    e = rel_l2(got, want)
    extra = "" if moved is None else f", {moved} bytes host<->device (data {data})"
    print(f"{name}: rel L2 {e:.2e} (bound {bound:g}){extra}")
    assert got.shape == want.shape, (got.shape, want.shape)
    assert e <= bound, f"{name}: {e}"
    if moved is not None:
        assert moved <= SMALL, f"{name}: {moved} bytes moved between host and device"


def test_project_device(gpu):
    theta = tomors.angles(90)
    vol = tomors.shepp_logan(64, 6)
    d = gpu.DriverArray(vol)
    for kw in ({}, {"sinogram_order": True}, {"center": 30.5, "n_bins": 72},
               {"projector": "voxel"}):
        got, moved = on_device(lambda: tomors.project(d, theta, **kw))
        want = tomors.project(vol, theta, **kw)
        check(f"project {kw}", got, want, ALU_BOUND, moved, vol.nbytes + want.nbytes)
    # One slice [y][x] gives one sinogram [angle][bin].
    got, _ = on_device(lambda: tomors.project(gpu.DriverArray(vol[2]), theta))
    check("project 2-D", got, tomors.project(vol[2], theta), ALU_BOUND)
    assert np.array_equal(d.get(), vol)


def test_backproject_device(gpu):
    theta = tomors.angles(90)
    proj = tomors.shepp_logan_projections(theta, 64, nz=4)
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    dp, ds = gpu.DriverArray(proj), gpu.DriverArray(sino)
    got, moved = on_device(lambda: tomors.backproject(dp, theta))
    check("backproject joseph", got, tomors.backproject(proj, theta), ALU_BOUND, moved,
          proj.nbytes * 2)
    got, _ = on_device(lambda: tomors.backproject(ds, theta, sinogram_order=True, center=31.0,
                                                  shape=(60, 70)))
    want = tomors.backproject(sino, theta, sinogram_order=True, center=31.0, shape=(60, 70))
    check("backproject joseph, sinograms, 60×70", got, want, ALU_BOUND)
    got, moved = on_device(lambda: tomors.backproject(dp, theta, projector="voxel"))
    check("backproject voxel (texture)", got, tomors.backproject(proj, theta, projector="voxel"),
          TEX_BOUND, moved, proj.nbytes * 2)
    got, _ = on_device(lambda: tomors.backproject(gpu.DriverArray(proj[:, 1, :]), theta))
    check("backproject 2-D", got, tomors.backproject(proj[:, 1, :], theta), ALU_BOUND)


CONE = (120.0, 60.0, 1.0)


def test_project_cone_device(gpu):
    theta = tomors.angles(48, 360)
    _, phantom, voxel = tomors.shepp_logan_cone(theta, *CONE, (16, 32))
    vol = np.ascontiguousarray(phantom, np.float32)
    got, moved = on_device(lambda: tomors.project_cone(gpu.DriverArray(vol), theta, *CONE,
                                                       (16, 32), voxel_size=voxel))
    want = tomors.project_cone(vol, theta, *CONE, (16, 32), voxel_size=voxel)
    check("project_cone joseph", got, want, ALU_BOUND, moved, vol.nbytes + want.nbytes)


def test_fdk_device(gpu):
    theta = tomors.angles(90, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, *CONE, (24, 48))
    d = gpu.DriverArray(proj)
    got, moved = on_device(lambda: tomors.fdk(d, theta, *CONE))
    host_gpu = tomors.fdk(proj, theta, *CONE, backend="cuda")
    cpu = tomors.fdk(proj, theta, *CONE, backend="cpu")
    check("fdk device vs host GPU path", got, host_gpu, FOLD_BOUND, moved,
          proj.nbytes + cpu.nbytes)
    check("fdk device vs CPU", got, cpu, TEX_BOUND)
    # Options pass through: a short scan, another filter, a given volume.
    short = tomors.angles(60, 240)
    ps, _, _ = tomors.shepp_logan_cone(short, *CONE, (24, 48))
    kw = dict(shape=(16, 40, 40), voxel_size=0.7, filter="hann")
    got, _ = on_device(lambda: tomors.fdk(gpu.DriverArray(ps), short, *CONE, **kw))
    check("fdk short scan, hann, 16×40×40", got, tomors.fdk(ps, short, *CONE, backend="cpu", **kw),
          TEX_BOUND)
    out, info = tomors.fdk(d, theta, *CONE, return_info=True)
    assert info["voxel_size"] > 0 and out.shape == cpu.shape
    bad = proj.copy()
    bad[3, 4, 5] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        tomors.fdk(gpu.DriverArray(bad), theta, *CONE)


def test_recon_cone_device(gpu):
    # A detector large enough that the data (0.5 MB up, 0.5 MB down on the
    # host path) outweigh the solver's partial sums (about 20 KB an iteration).
    theta = tomors.angles(60, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, *CONE, (32, 64))
    d = gpu.DriverArray(proj)
    for kw in ({"algorithm": "sirt", "min": 0}, {"algorithm": "sirt", "projector": "voxel"},
               {"algorithm": "sart", "iterations": 2}, {"algorithm": "cimmino"}):
        kw = dict({"iterations": 5}, **kw)
        before = _native._debug_transfer_bytes()
        out, info = tomors.recon_cone(d, theta, *CONE, return_info=True, **kw)
        moved = _native._debug_transfer_bytes() - before
        got = out.get()
        host_gpu = tomors.recon_cone(proj, theta, *CONE, backend="cuda", **kw)
        cpu = tomors.recon_cone(proj, theta, *CONE, backend="cpu", **kw)
        assert not info["device"].startswith("cpu") and len(info["residuals"]) == kw["iterations"]
        print(f"recon_cone {kw}: {moved} bytes host<->device (data {proj.nbytes + cpu.nbytes})")
        # Only the reductions' partial sums come down (measured on an H200:
        # 19 KB an iteration of sirt, 4.7 KB a block of sart, plus the power
        # iteration of cimmino's default relaxation, 203 KB in all), never
        # the data: a host round trip would move at least the projections
        # up and the volume down.
        assert moved < proj.nbytes + cpu.nbytes, moved
        check(f"recon_cone {kw} device vs host GPU path", got, host_gpu, ITER_BOUND)
        # The voxel pair projects forward through a 3-D texture (8-bit
        # interpolation weights, tomors-cuda's default): the texture bound.
        check(f"recon_cone {kw} device vs CPU", got, cpu,
              TEX_BOUND if kw.get("projector") == "voxel" else ITER_BOUND)
    x0 = tomors.recon_cone(proj, theta, *CONE, iterations=2, backend="cpu")
    got = tomors.recon_cone(d, theta, *CONE, iterations=3, init=gpu.DriverArray(x0)).get()
    want = tomors.recon_cone(proj, theta, *CONE, iterations=3, init=x0, backend="cpu")
    check("recon_cone init on the device", got, want, ITER_BOUND)


def test_cpu_projector_with_gpu_array(gpu):
    theta = tomors.angles(60)
    A = tomors.Projector(theta, 48, slices=3)
    assert A.device is None
    vol = tomors.shepp_logan(48, 3)
    got, moved = on_device(lambda: A.forward(gpu.DriverArray(vol)))
    check("CPU Projector.forward of a GPU array", got, A.forward(vol), ALU_BOUND, moved)
    y = A.forward(vol)
    got, _ = on_device(lambda: A.backward(gpu.DriverArray(y)))
    check("CPU Projector.backward of a GPU array", got, A.backward(y), ALU_BOUND)
    C = tomors.Projector.cone(theta, *CONE, (12, 24), projector="voxel")
    x = np.ones(C.vol_shape, np.float32)
    got, _ = on_device(lambda: C.forward(gpu.DriverArray(x)))
    # The GPU's voxel pair projects forward through a 3-D texture (8-bit
    # weights; measured 1.2e-4 on an H200): the texture bound.
    check("CPU cone Projector (voxel) forward", got, C.forward(x), TEX_BOUND)
    with pytest.raises(TypeError, match="no GPU version"):
        tomors.Projector(theta, 48, projector="line").forward(gpu.DriverArray(vol[0]))


def test_dlpack_producer_ctypes(gpu):
    """An object with only ``__dlpack__``/``__dlpack_device__`` (a capsule
    built with ctypes over driver memory) is read in place."""
    theta = tomors.angles(90)
    proj = tomors.shepp_logan_projections(theta, 64, nz=3)
    d = gpu.DriverArray(proj)
    dl = gpu.DLPackOnly(d)
    assert not hasattr(dl, "__cuda_array_interface__")
    got, moved = on_device(lambda: tomors.recon(dl, theta))
    check("recon of a DLPack producer vs CAI", got, tomors.recon(d, theta).get(), 0.0, moved)
    # The producer was asked for the legacy default stream, which tomors waits on.
    assert dl.streams and all(s == 1 for s in dl.streams), dl.streams
    got, _ = on_device(lambda: tomors.backproject(dl, theta))
    check("backproject of a DLPack producer", got, tomors.backproject(proj, theta), ALU_BOUND)


def test_device_array_dlpack_export(gpu):
    """A result exports itself through DLPack (``torch.from_dlpack(r)``): the
    capsule names its memory, shape and device, and keeps it alive."""
    theta = tomors.angles(60)
    proj = tomors.shepp_logan_projections(theta, 48, nz=2)
    out = tomors.recon(gpu.DriverArray(proj), theta)
    assert out.__dlpack_device__() == (2, 0)

    from tomors import _gpu

    g = _gpu.cuda_array(DLPackView(out), "r", "test", (3,))
    assert g.ptr == out.__cuda_array_interface__["data"][0] and g.shape == out.shape
    want = out.get()
    # Read through DLPack by tomors itself, after the result's last name is gone.
    ref = DLPackView(out)
    del out
    got, _ = on_device(lambda: tomors.project(ref, theta))
    check("project of an exported result", got, tomors.project(want, theta), ALU_BOUND)
    with pytest.raises(BufferError, match="without copying"):
        ref.a.__dlpack__(copy=True)
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (tomors read the export above)")
    c = cp.from_dlpack(ref.a)
    del ref
    assert np.array_equal(cp.asnumpy(c), want)


def test_cupy_everywhere(gpu):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (the ctypes tests cover the rest)")
    theta = tomors.angles(60, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, *CONE, (16, 32))
    x = cp.asarray(proj)
    for name, fn, want in (
        ("fdk", lambda: tomors.fdk(x, theta, *CONE), tomors.fdk(proj, theta, *CONE, backend="cpu")),
        ("recon_cone", lambda: tomors.recon_cone(x, theta, *CONE, iterations=3),
         tomors.recon_cone(proj, theta, *CONE, iterations=3, backend="cpu")),
    ):
        before = _native._debug_transfer_bytes()
        out = fn()
        moved = _native._debug_transfer_bytes() - before
        assert isinstance(out, cp.ndarray) and out.device.id == x.device.id
        check(f"CuPy {name}", cp.asnumpy(out), want, TEX_BOUND if name == "fdk" else ITER_BOUND)
        print(f"CuPy {name}: {moved} bytes host<->device")
    vol = tomors.shepp_logan(32, 2)
    th = tomors.angles(40)
    out = tomors.project(cp.asarray(vol), th)
    assert isinstance(out, cp.ndarray)
    check("CuPy project", cp.asnumpy(out), tomors.project(vol, th), ALU_BOUND)

    sino = tomors.shepp_logan_projections(th, 32, nz=2)
    out = tomors.recon(DLPackView(cp.asarray(sino)), th)
    assert isinstance(out, tomors.DeviceArray)
    check("recon of CuPy through DLPack", out.get(), tomors.recon(sino, th, backend="cpu"),
          TEX_BOUND)


def test_torch_everywhere(gpu):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    vol = tomors.shepp_logan(32, 2)
    th = tomors.angles(40)
    out = tomors.project(torch.from_numpy(vol).to("cuda:0"), th)
    check("torch project", out.get(), tomors.project(vol, th), ALU_BOUND)


class FakeDL:
    """A DLPack producer whose capsule never reaches the driver (checked
    before): a CUDA tensor of the given dtype and strides."""

    def __init__(self, code=2, bits=32, shape=(20, 2, 32), strides=None):
        import cuda_driver

        self.t = cuda_driver.DLTensorHolder(1 << 40, shape, code, bits, strides)

    def __dlpack__(self, stream=None):
        return self.t.capsule()

    def __dlpack_device__(self):
        return (2, 0)


TH = np.linspace(0, np.pi, 20, endpoint=False).astype(np.float32)


@pytest.mark.parametrize("fake,err,match", [
    (FakeDL(bits=64), ValueError, "float32"),
    (FakeDL(code=0), ValueError, "float32"),
    (FakeDL(strides=(1, 20, 40)), ValueError, "C-contiguous"),
    (FakeDL(shape=(20,)), ValueError, "2-D or 3-D"),
])
def test_dlpack_argument_checks(fake, err, match):
    with pytest.raises(err, match=match):
        tomors.recon(fake, TH)


def test_dlpack_on_another_device_type():
    class HostDL:
        def __dlpack__(self, stream=None):
            raise AssertionError("not asked")

        def __dlpack_device__(self):
            return (3, 0)  # kDLCUDAHost: pinned host memory

    with pytest.raises(TypeError, match="not a CUDA device"):
        tomors.recon(HostDL(), TH)
