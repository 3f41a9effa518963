"""Shared fixtures: the `tomors` command-line binary (built when absent), the
GPU requirement switch (TOMORS_REQUIRE_GPU=1), the GPU fixture of the
GPU-array tests and the relative L2 error they compare with."""

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]


def _target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


@pytest.fixture(scope="session")
def cli() -> Path:
    """Path of the release `tomors` binary of this checkout, built if absent."""
    exe = _target_dir() / "release" / "tomors"
    if not exe.exists() and shutil.which("cargo") is None:
        # A machine that only runs the package (the GPU machine's pack).
        pytest.skip(f"no tomors CLI at {exe} and no cargo to build it")
    if not exe.exists():
        subprocess.run(
            ["cargo", "build", "--release", "--bin", "tomors"], cwd=REPO, check=True
        )
    assert exe.exists(), f"{exe} was not built"
    return exe


def run_cli(cli: Path, *args) -> subprocess.CompletedProcess:
    """Runs the CLI quietly; fails the test with its stderr when it fails."""
    p = subprocess.run(
        [str(cli), *map(str, args), "--quiet"], capture_output=True, text=True
    )
    assert p.returncode == 0, f"tomors {' '.join(map(str, args))} failed: {p.stderr}"
    return p


def require_gpu() -> bool:
    return os.environ.get("TOMORS_REQUIRE_GPU", "") not in ("", "0")


def usable_gpu(what: str, driver: bool) -> dict:
    """``tomors.devices()`` when a GPU is usable (and, with ``driver``, the
    CUDA driver through ctypes, tests/cuda_driver.py); otherwise skips the
    tests of ``what`` with the reason, or fails them under
    TOMORS_REQUIRE_GPU=1."""
    import tomors

    found = tomors.devices()
    why = None if found["usable"] else f"no usable GPU: {found['reason']}"
    if why is None and driver:
        try:
            import cuda_driver

            cuda_driver.driver()
        except (OSError, RuntimeError) as e:
            why = f"the CUDA driver cannot be used through ctypes: {e}"
    if why is not None:
        if require_gpu():
            pytest.fail(f"TOMORS_REQUIRE_GPU=1 but {why}")
        print(f"skipping {what}: {why}")
        pytest.skip(why)
    return found


@pytest.fixture(scope="module")
def gpu(request):
    """The GPU-array tests' device memory: the module tests/cuda_driver.py
    (standing in for CuPy), once a GPU and the driver are usable (see
    :func:`usable_gpu`)."""
    usable_gpu(f"the GPU tests of {request.module.__name__}", driver=True)
    import cuda_driver

    return cuda_driver


def rel_l2(a, b) -> float:
    """‖a − b‖ / ‖b‖ in float64."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)
