"""GPU arrays in, GPU arrays out (``__cuda_array_interface__``), with no
host round trip of the data: device memory comes from the CUDA driver
through ctypes (tests/cuda_driver.py), standing in for CuPy.

The GPU tests skip with the reason without a usable GPU and fail instead
under TOMORS_REQUIRE_GPU=1; the argument checks at the end need no GPU."""

import numpy as np
import pytest

import tomors
from conftest import rel_l2
from tomors import _native


# The texture kernels' bound against the CPU (test_gpu.py, ARCHITECTURE.md:
# 8-bit interpolation weights, near 1e-3).
CPU_BOUND = 2e-3
# The device path runs the same filter and back-projection kernels as the
# host path on the same data: equal up to f32 rounding of a different slab
# split (1e-5 leaves two orders of margin over f32 rounding of the sums).
GPU_BOUND = 1e-5


def scan(nz=8, n=128, na=180):
    theta = tomors.angles(na)
    return theta, tomors.shepp_logan_projections(theta, n, nz=nz)


def test_fbp_device_projections(gpu):
    theta, proj = scan()
    host_gpu = tomors.recon(proj, theta, backend="cuda")
    cpu = tomors.recon(proj, theta, backend="cpu")
    d = gpu.DriverArray(proj)
    before = _native._debug_transfer_bytes()
    out, info = tomors.recon(d, theta, return_info=True)
    moved = _native._debug_transfer_bytes() - before
    assert isinstance(out, tomors.DeviceArray)
    assert not info["device"].startswith("cpu")
    assert out.shape == cpu.shape and out.dtype == "float32" and out.device == 0
    # No host round trip: only the filter's frequency response (a few KiB)
    # goes up; the host path moves the projections and the volume.
    data = proj.nbytes + cpu.nbytes
    assert moved <= 64 * 1024, f"{moved} bytes moved between host and device"
    before = _native._debug_transfer_bytes()
    tomors.recon(proj, theta, backend="cuda")
    assert _native._debug_transfer_bytes() - before >= data
    # The interface points at the result: read it as a third party would.
    cai = out.__cuda_array_interface__
    assert cai["version"] == 3 and cai["typestr"] == "<f4" and cai["shape"] == cpu.shape
    third = gpu.read_device(cai["data"][0], cai["shape"])
    got = out.get()
    assert np.array_equal(third, got)
    assert rel_l2(got, host_gpu) <= GPU_BOUND
    assert rel_l2(got, cpu) <= CPU_BOUND
    # The input is untouched.
    assert np.array_equal(d.get(), proj)


def test_fbp_device_sinograms_and_stream(gpu):
    theta, proj = scan(nz=4)
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    cpu = tomors.recon(sino, theta, sinogram_order=True, backend="cpu")
    # stream 1: the legacy default stream, waited on before reading.
    d = gpu.DriverArray(sino, stream=1)
    got = tomors.recon(d, theta, sinogram_order=True, center=63.0).get()
    assert rel_l2(got, tomors.recon(sino, theta, sinogram_order=True, center=63.0,
                                    backend="cpu")) <= CPU_BOUND
    got = tomors.recon(d, theta, sinogram_order=True, filter="shepp").get()
    assert rel_l2(got, tomors.recon(sino, theta, sinogram_order=True, filter="shepp",
                                    backend="cpu")) <= CPU_BOUND
    assert got.shape == cpu.shape


def test_fbp_device_one_sinogram(gpu):
    theta, proj = scan(nz=1)
    sino = np.ascontiguousarray(proj[:, 0, :])
    got = tomors.recon(gpu.DriverArray(sino), theta)
    assert got.shape == (128, 128)
    assert rel_l2(got.get(), tomors.recon(sino, theta, backend="cpu")) <= CPU_BOUND


def test_fbp_device_errors(gpu):
    theta, proj = scan(nz=2, n=32, na=20)
    d = gpu.DriverArray(proj)
    with pytest.raises(ValueError, match="angles"):
        tomors.recon(d, theta[:-1])
    # Host memory behind a CUDA array interface is refused by the driver check.
    host = np.ascontiguousarray(proj)

    class HostBehind:
        __cuda_array_interface__ = {"shape": host.shape, "typestr": "<f4",
                                    "data": (host.ctypes.data, False), "version": 3}

    with pytest.raises(ValueError, match="device memory"):
        tomors.recon(HostBehind(), theta)
    # A shape larger than the allocation.
    class TooLong:
        __cuda_array_interface__ = {"shape": (20, 4, 32), "typestr": "<f4",
                                    "data": (d.ptr, False), "version": 3}

    with pytest.raises(ValueError, match="past the end"):
        tomors.recon(TooLong(), theta)


def test_fbp_cupy_in_cupy_out(gpu):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (the ctypes tests cover the rest)")
    theta, proj = scan(nz=4)
    cpu = tomors.recon(proj, theta, backend="cpu")
    # Produced on a non-default stream: the interface names it, tomors waits.
    with cp.cuda.Stream(non_blocking=True):
        x = cp.asarray(proj) * cp.float32(1)
        before = _native._debug_transfer_bytes()
        out = tomors.recon(x, theta)
        moved = _native._debug_transfer_bytes() - before
    assert isinstance(out, cp.ndarray) and out.dtype == cp.float32
    assert out.device.id == x.device.id and out.shape == cpu.shape
    assert moved <= 64 * 1024, f"{moved} bytes moved between host and device"
    assert rel_l2(cp.asnumpy(out), cpu) <= CPU_BOUND


def test_fbp_torch_tensor(gpu):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    theta, proj = scan(nz=2)
    t = torch.from_numpy(proj).to("cuda:0")
    out = tomors.recon(t, theta)
    assert isinstance(out, tomors.DeviceArray)
    back = torch.as_tensor(out, device="cuda:0")
    assert tuple(back.shape) == out.shape
    cpu = tomors.recon(proj, theta, backend="cpu")
    assert rel_l2(back.cpu().numpy(), cpu) <= CPU_BOUND


class Fake:
    """An interface that never reaches the driver (checked before)."""

    def __init__(self, **kw):
        cai = {"shape": (20, 2, 32), "typestr": "<f4", "data": (1 << 40, False), "version": 3}
        cai.update(kw)
        self.__cuda_array_interface__ = cai


TH = np.linspace(0, np.pi, 20, endpoint=False).astype(np.float32)


@pytest.mark.parametrize("fake,err,match", [
    (Fake(typestr="<f8"), ValueError, "float32"),
    (Fake(strides=(4, 80, 160)), ValueError, "C-contiguous"),
    (Fake(shape=(20,)), ValueError, "2-D or 3-D"),
    (Fake(data=(0, False)), TypeError, "null"),
    (Fake(stream=0), TypeError, "stream 0"),
    (Fake(mask=object()), ValueError, "masked"),
])
def test_gpu_array_argument_checks(fake, err, match):
    with pytest.raises(err, match=match):
        tomors.recon(fake, TH)


def test_gpu_array_refused_where_unsupported():
    with pytest.raises(TypeError, match="GPU arrays are reconstructed on their GPU"):
        tomors.recon(Fake(), TH, algorithm="art")
    with pytest.raises(ValueError, match="backend='cuda' or 'auto'"):
        tomors.recon(Fake(), TH, backend="cpu")
    # The projection models the GPU lacks, and the CPU-only calls.
    with pytest.raises(TypeError, match="'joseph' and 'voxel'"):
        tomors.project(Fake(shape=(2, 32, 32)), TH, projector="line")
    with pytest.raises(TypeError, match="'joseph' and 'voxel'"):
        tomors.backproject(Fake(), TH, projector="line")
    with pytest.raises(TypeError, match="runs cone-beam|GPU arrays are reconstructed"):
        tomors.recon_cone(Fake(), TH, 100.0, 50.0, 1.0, algorithm="art")
    with pytest.raises(ValueError, match="backend='cuda' or 'auto'"):
        tomors.fdk(Fake(), TH, 100.0, 50.0, 1.0, backend="cpu")
    with pytest.raises(TypeError, match="runs on the CPU"):
        tomors.minus_log(Fake())
    with pytest.raises(TypeError, match="half_acquisition stitches on the CPU"):
        tomors.recon(Fake(), TH, half_acquisition=True)
