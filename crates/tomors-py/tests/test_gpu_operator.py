"""The GPU linear operator (``Projector(..., backend='cuda')``: tomors-cuda's
operators behind the same Python API) and the GPU's iterative methods on GPU
arrays: values against the CPU, the adjoint pair through Python, and no host
round trip of GPU arrays (host↔device bytes counted by
``tomors._native._debug_transfer_bytes()``).

Device memory comes from the CUDA driver through ctypes
(tests/cuda_driver.py), standing in for CuPy; a CuPy test runs where CuPy is
installed. Skips with the reason without a usable GPU, fails instead under
TOMORS_REQUIRE_GPU=1; the argument checks at the end need no GPU."""

import numpy as np
import pytest

import tomors
from conftest import rel_l2
from tomors import _native


def gap(ax, y, x, aty):
    """|⟨Ax, y⟩ − ⟨x, Aᵀy⟩| / (‖Ax‖‖y‖), in float64."""
    f = lambda a: np.asarray(a, np.float64).ravel()  # noqa: E731
    return abs(f(ax) @ f(y) - f(x) @ f(aty)) / (np.linalg.norm(f(ax)) * np.linalg.norm(f(y)))


# tomors-cuda's own bounds (tests/iterative_gpu.rs, cone_iterative_gpu.rs):
# Joseph's GPU pair against the CPU's to 1e-5 (exact interpolation weights,
# f32 sums in another order), adjointness gap of the f32 results 1e-4.
OP_BOUND = 1e-5
GAP_BOUND = 1e-4
# A GPU array and a NumPy array through the same GPU operator: the same
# kernels on the same values (the cone back projection adds with atomics,
# in any order: f32 rounding).
SAME_BOUND = 1e-6
# SIRT on the GPU against the CPU (tomors-cuda's iterative_gpu.rs bound).
SIRT_CPU_BOUND = 1e-4


def test_parallel_operator_matches_cpu_and_is_adjoint(gpu, rng):
    theta = tomors.angles(50) + 0.05
    cpu = tomors.Projector(theta, 48, (40, 44), slices=5, center=23.3)
    dev = tomors.Projector(theta, 48, (40, 44), slices=5, center=23.3, backend="cuda")
    assert dev.backend.startswith("cuda:0") and dev.device == 0 and cpu.device is None
    assert dev.is_matched and dev.vol_shape == cpu.vol_shape and dev.proj_shape == cpu.proj_shape
    x = rng.random(cpu.vol_shape, dtype=np.float32)
    y = rng.random(cpu.proj_shape, dtype=np.float32)
    ax, aty = dev.forward(x), dev.backward(y)
    assert ax.dtype == np.float32 and ax.shape == cpu.proj_shape and aty.shape == cpu.vol_shape
    e_f, e_b = rel_l2(ax, cpu.forward(x)), rel_l2(aty, cpu.backward(y))
    g = gap(ax, y, x, aty)
    print(f"parallel: forward {e_f:.2e}, back {e_b:.2e} against the CPU, adjoint gap {g:.2e}")
    assert e_f <= OP_BOUND and e_b <= OP_BOUND and g <= GAP_BOUND
    # 2D operator (one slice), and scipy on the GPU operator.
    d2 = tomors.Projector(theta, 48, backend="cuda")
    img = tomors.shepp_logan(48)
    assert rel_l2(d2 @ img, tomors.project(img, theta)) <= OP_BOUND
    sla = pytest.importorskip("scipy.sparse.linalg")
    op = d2.as_linear_operator()
    assert op.shape == d2.shape
    v = sla.lsqr(op, (d2 @ img).ravel(), iter_lim=5)[0]
    assert v.shape == (48 * 48,) and np.isfinite(v).all()


def test_cone_operator_matches_cpu_and_is_adjoint(gpu, rng):
    theta = tomors.angles(24, 360)
    args = (theta, 80.0, 40.0, 1.0, (10, 20))
    cpu = tomors.Projector.cone(*args)
    dev = tomors.Projector.cone(*args, backend="cuda")
    assert dev.is_matched and dev.vol_shape == cpu.vol_shape and dev.device == 0
    x = rng.random(cpu.vol_shape, dtype=np.float32)
    y = rng.random(cpu.proj_shape, dtype=np.float32)
    ax, aty = dev.forward(x), dev.backward(y)
    e_f, e_b = rel_l2(ax, cpu.forward(x)), rel_l2(aty, cpu.backward(y))
    g = gap(ax, y, x, aty)
    print(f"cone: forward {e_f:.2e}, back {e_b:.2e} against the CPU, adjoint gap {g:.2e}")
    assert e_f <= OP_BOUND and e_b <= OP_BOUND and g <= GAP_BOUND


def test_operator_on_gpu_arrays_stays_on_device(gpu, rng):
    theta = tomors.angles(120)
    dev = tomors.Projector(theta, 128, slices=8, backend="cuda")
    x = rng.random(dev.vol_shape, dtype=np.float32)
    y = rng.random(dev.proj_shape, dtype=np.float32)
    host_ax, host_aty = dev.forward(x), dev.backward(y)
    dx, dy = gpu.DriverArray(x), gpu.DriverArray(y)
    before = _native._debug_transfer_bytes()
    ax = dev.forward(dx)
    aty = dev.T @ dy
    moved = _native._debug_transfer_bytes() - before
    print(f"parallel operator on GPU arrays: {moved} bytes host<->device "
          f"(data {x.nbytes + y.nbytes + host_ax.nbytes + host_aty.nbytes})")
    assert isinstance(ax, tomors.DeviceArray) and ax.shape == dev.proj_shape and ax.device == 0
    assert aty.shape == dev.vol_shape
    # Nothing of the data (1 MB each way) crosses: only the partial sums of
    # the finiteness check of each input (8 KiB each); the angle tables
    # were uploaded with the operator.
    assert moved <= 64 * 1024, f"{moved} bytes moved between host and device"
    assert rel_l2(ax.get(), host_ax) <= SAME_BOUND
    assert rel_l2(aty.get(), host_aty) <= SAME_BOUND
    # A 2D operator answers a 2D GPU array with a 2D one.
    d2 = tomors.Projector(theta, 128, backend="cuda")
    img = np.ascontiguousarray(x[0])
    s = d2.forward(gpu.DriverArray(img))
    assert s.shape == (120, 128) and rel_l2(s.get(), d2.forward(img)) <= SAME_BOUND
    # Cone beam.
    ct = tomors.angles(20, 360)
    cd = tomors.Projector.cone(ct, 80.0, 40.0, 1.0, (8, 16), backend="cuda")
    v = rng.random(cd.vol_shape, dtype=np.float32)
    p = rng.random(cd.proj_shape, dtype=np.float32)
    dv, dp = gpu.DriverArray(v), gpu.DriverArray(p)
    before = _native._debug_transfer_bytes()
    cv, cp_ = cd.forward(dv), cd.backward(dp)
    moved = _native._debug_transfer_bytes() - before
    print(f"cone operator on GPU arrays: {moved} bytes host<->device")
    assert moved <= 64 * 1024, f"{moved} bytes moved between host and device"
    assert cv.shape == cd.proj_shape and cp_.shape == cd.vol_shape
    assert rel_l2(cv.get(), cd.forward(v)) <= SAME_BOUND
    assert rel_l2(cp_.get(), cd.backward(p)) <= SAME_BOUND
    # The input is untouched.
    assert np.array_equal(dx.get(), x)


def _scan(nz, n, na):
    theta = tomors.angles(na)
    return theta, tomors.shepp_logan_projections(theta, n, nz=nz)


@pytest.mark.parametrize("algorithm,kw", [
    ("sirt", {"min": 0.0}),
    ("sart", {}),
    ("cimmino", {}),
])
def test_iterative_on_gpu_arrays(gpu, algorithm, kw):
    theta, proj = _scan(16, 192, 120)
    its = 10 if algorithm != "sart" else 2
    before = _native._debug_transfer_bytes()
    host_gpu, hinfo = tomors.recon(proj, theta, algorithm=algorithm, iterations=its,
                                   backend="cuda", return_info=True, **kw)
    hinfo_moved = [_native._debug_transfer_bytes() - before]
    before = _native._debug_transfer_bytes()
    out, info = tomors.recon(gpu.DriverArray(proj), theta, algorithm=algorithm, iterations=its,
                             return_info=True, **kw)
    moved = _native._debug_transfer_bytes() - before
    data = proj.nbytes + host_gpu.nbytes
    print(f"{algorithm} on a GPU array: {moved} bytes host<->device, host path "
          f"{hinfo_moved[0]} (data {data}); "
          f"residuals {info['residuals'][-1]:.4g} vs host path {hinfo['residuals'][-1]:.4g}")
    assert isinstance(out, tomors.DeviceArray) and out.shape == host_gpu.shape
    assert not info["device"].startswith("cpu") and info["iterations"] == its
    # What crosses is the reductions' partial sums (8 KiB each: residual
    # norms, finiteness checks, the floors of the SART/BLOCK-IT weights per
    # block, Cimmino's power iteration) and the angle tables: the same as
    # on the host GPU path, which moves the data besides; less than one
    # copy of the data in all.
    assert moved + data <= hinfo_moved[0], f"{moved} vs {hinfo_moved[0]} bytes"
    assert moved < data, f"{moved} bytes moved between host and device"
    got = out.get()
    e = rel_l2(got, host_gpu)
    print(f"{algorithm}: device path vs host GPU path rel L2 {e:.2e}")
    # The same operator and solver on the same data; the host path may use
    # other kernel parameters (another f32 summation order).
    assert e <= 1e-5
    if "min" in kw:
        assert got.min() >= 0.0


def test_sirt_gpu_array_sinograms_init_and_cpu(gpu):
    theta, proj = _scan(4, 96, 90)
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    cpu = tomors.recon(sino, theta, algorithm="sirt", iterations=8, sinogram_order=True,
                       backend="cpu")
    out = tomors.recon(gpu.DriverArray(sino, stream=1), theta, algorithm="sirt", iterations=8,
                       sinogram_order=True)
    e = rel_l2(out.get(), cpu)
    print(f"sirt on GPU sinograms vs CPU: {e:.2e}")
    assert e <= SIRT_CPU_BOUND
    # Continuing from a GPU initial volume: 4 + 4 iterations = 8 (SIRT's
    # update does not depend on the iteration count).
    half = tomors.recon(gpu.DriverArray(sino), theta, algorithm="sirt", iterations=4,
                        sinogram_order=True)
    x0 = gpu.DriverArray(half.get())
    rest = tomors.recon(gpu.DriverArray(sino), theta, algorithm="sirt", iterations=4,
                        sinogram_order=True, init=x0)
    assert rel_l2(rest.get(), out.get()) <= 1e-5
    # One 2D sinogram in, one 2D slice out.
    one = tomors.recon(gpu.DriverArray(sino[1]), theta, algorithm="sirt", iterations=8)
    assert one.shape == (96, 96) and rel_l2(one.get(), cpu[1]) <= SIRT_CPU_BOUND


def test_gpu_array_iterative_errors(gpu):
    theta, proj = _scan(2, 32, 20)
    d = gpu.DriverArray(proj)
    with pytest.raises(ValueError, match="angles"):
        tomors.recon(d, theta[:-1], algorithm="sirt")
    with pytest.raises(ValueError, match="joseph"):
        tomors.recon(d, theta, algorithm="sirt", projector="line")
    with pytest.raises(ValueError, match="init has shape"):
        tomors.recon(d, theta, algorithm="sirt", init=gpu.DriverArray(np.zeros((2, 8, 8))))
    bad = proj.copy()
    bad[3, 1, 5] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        tomors.recon(gpu.DriverArray(bad), theta, algorithm="sirt", iterations=2)
    dev = tomors.Projector(theta, 32, slices=2, backend="cuda")
    with pytest.raises(ValueError, match="shape"):
        dev.forward(gpu.DriverArray(np.zeros((2, 31, 32), np.float32)))
    with pytest.raises(ValueError, match="non-finite"):
        dev.forward(gpu.DriverArray(np.full((2, 32, 32), np.inf, np.float32)))


def test_cupy_through_operator_and_sirt(gpu):
    cp = pytest.importorskip("cupy", reason="CuPy is not installed (the ctypes tests cover the rest)")
    theta, proj = _scan(8, 128, 90)
    dev = tomors.Projector(theta, 128, slices=8, backend="cuda")
    dev0 = cp.cuda.runtime.getDevice()
    host = tomors.recon(proj, theta, algorithm="sirt", iterations=5, backend="cuda")
    # tomors binds every GPU it uses, then gives the caller's current
    # device back (CuPy allocates on it).
    assert cp.cuda.runtime.getDevice() == dev0
    with cp.cuda.Stream(non_blocking=True):
        x = cp.asarray(tomors.shepp_logan(128, 8)) * cp.float32(1)
        before = _native._debug_transfer_bytes()
        y = dev @ x
        moved_op = _native._debug_transfer_bytes() - before
        rec = tomors.recon(cp.asarray(proj), theta, algorithm="sirt", iterations=5)
        moved = _native._debug_transfer_bytes() - before - moved_op
    print(f"CuPy: operator {moved_op} bytes, sirt {moved} bytes host<->device "
          f"(data {proj.nbytes} + {host.nbytes})")
    assert isinstance(y, cp.ndarray) and y.device.id == x.device.id
    assert isinstance(rec, cp.ndarray) and rec.shape == (8, 128, 128)
    assert moved_op <= 64 * 1024, f"{moved_op} bytes moved between host and device"
    assert moved < proj.nbytes + host.nbytes, f"{moved} bytes moved between host and device"
    assert rel_l2(cp.asnumpy(y), dev.forward(cp.asnumpy(x))) <= SAME_BOUND
    assert rel_l2(cp.asnumpy(rec), host) <= 1e-5


def test_operator_argument_checks_without_gpu():
    theta = tomors.angles(10)
    with pytest.raises(ValueError, match="joseph"):
        tomors.Projector(theta, 16, projector="line", backend="cuda")
    with pytest.raises(ValueError, match="unknown backend"):
        tomors.Projector(theta, 16, backend="tpu")
    A = tomors.Projector(theta, 16)
    assert A.backend == "cpu" and A.device is None

    class Fake:
        __cuda_array_interface__ = {"shape": (16, 16), "typestr": "<f4",
                                    "data": (1 << 40, False), "version": 3}

    # A CPU operator given a GPU array builds its twin on the array's GPU:
    # without a GPU that fails naming why; with one, the fake pointer is
    # refused by the driver check.
    if tomors.devices()["usable"]:
        with pytest.raises(ValueError, match="device memory"):
            A.forward(Fake())
    else:
        with pytest.raises(RuntimeError, match="CUDA"):
            A.forward(Fake())
    with pytest.raises(TypeError, match="GPU arrays are reconstructed"):
        tomors.recon(Fake(), theta, algorithm="art")
    with pytest.raises(ValueError, match="random_order"):
        tomors.recon(Fake(), theta, algorithm="sirt", random_order=True)
