"""The GPU backend from Python: runs where a GPU is usable and compares with
the CPU's values; skips with the reason otherwise, and fails instead under
TOMORS_REQUIRE_GPU=1."""

import numpy as np
import pytest

import tomors
from conftest import rel_l2, usable_gpu


@pytest.fixture(scope="module")
def gpu():
    return usable_gpu("the GPU tests", driver=False)["devices"]


def test_devices_report(gpu):
    assert gpu and all(d["name"] for d in gpu)


def test_fbp_gpu_matches_cpu(gpu):
    theta = tomors.angles(360)
    proj = tomors.shepp_logan_projections(theta, 256, nz=8)
    cpu = tomors.recon(proj, theta, backend="cpu")
    got = tomors.recon(proj, theta, backend="cuda")
    # Texture kernels interpolate with 8-bit weights (ARCHITECTURE.md: a
    # bound near 1e-3); the exact ALU kernels agree to ~1e-5.
    assert rel_l2(got, cpu) <= 2e-3


def test_fourier_gpu_matches_cpu(gpu):
    theta = tomors.angles(200)
    proj = tomors.shepp_logan_projections(theta, 128, nz=5)
    cpu = tomors.recon(proj, theta, method="fourier", backend="cpu")
    got, info = tomors.recon(proj, theta, method="fourier", backend="cuda", return_info=True)
    assert not info["device"].startswith("cpu")
    # tomors-cuda's bound for the GPU gridding against the CPU (fourier_gpu.rs).
    assert rel_l2(got, cpu) <= 2e-5
    # Fixed summation order on the GPU: a second call repeats bit for bit.
    assert np.array_equal(tomors.recon(proj, theta, method="fourier", backend="cuda"), got)


def test_sirt_gpu_matches_cpu(gpu):
    theta = tomors.angles(120)
    proj = tomors.shepp_logan_projections(theta, 96, nz=4)
    cpu = tomors.recon(proj, theta, algorithm="sirt", iterations=10, min=0, backend="cpu")
    got, info = tomors.recon(proj, theta, algorithm="sirt", iterations=10, min=0,
                             backend="cuda", return_info=True)
    assert not info["device"].startswith("cpu")
    # tomors-cuda's own test bound for SIRT against the CPU (iterative_gpu.rs).
    assert rel_l2(got, cpu) <= 1e-4


def test_fdk_gpu_matches_cpu(gpu):
    theta = tomors.angles(90, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, 120.0, 60.0, 1.0, (24, 48))
    cpu = tomors.fdk(proj, theta, 120.0, 60.0, 1.0, backend="cpu")
    got = tomors.fdk(proj, theta, 120.0, 60.0, 1.0, backend="cuda")
    # The texture cone kernel's bound in tomors-cuda's cone tests.
    assert rel_l2(got, cpu) <= 2e-3


def test_cone_sirt_gpu_matches_cpu(gpu):
    theta = tomors.angles(60, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, 120.0, 60.0, 1.0, (16, 32))
    cpu = tomors.recon_cone(proj, theta, 120.0, 60.0, 1.0, iterations=5, backend="cpu")
    got = tomors.recon_cone(proj, theta, 120.0, 60.0, 1.0, iterations=5, backend="cuda")
    assert rel_l2(got, cpu) <= 1e-4


def test_auto_uses_the_gpu(gpu):
    theta = tomors.angles(64)
    proj = tomors.shepp_logan_projections(theta, 64, nz=2)
    _, info = tomors.recon(proj, theta, algorithm="sirt", iterations=2, return_info=True)
    assert not info["device"].startswith("cpu")
    _, info = tomors.recon(proj, theta, return_info=True)
    assert not info["device"].startswith("cpu")
