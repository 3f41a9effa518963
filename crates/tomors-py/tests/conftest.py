"""Shared fixtures: the `tomors` command-line binary (built when absent) and
the GPU requirement switch (TOMORS_REQUIRE_GPU=1)."""

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


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)
