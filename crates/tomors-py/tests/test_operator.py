"""Projector: the adjoint identity ⟨Ax, y⟩ = ⟨x, Aᵀy⟩ through Python, the
scipy LinearOperator, and agreement with project/backproject."""

import numpy as np
import pytest

import tomors


def _adjoint_gap(A, rng):
    x = rng.random(A.vol_shape, dtype=np.float32)
    y = rng.random(A.proj_shape, dtype=np.float32)
    lhs = np.vdot(A.forward(x).astype(np.float64), y.astype(np.float64))
    rhs = np.vdot(x.astype(np.float64), A.backward(y).astype(np.float64))
    return abs(lhs - rhs) / abs(lhs)


@pytest.mark.parametrize("model", ["joseph", "line"])
def test_parallel_adjoint(model, rng):
    theta = tomors.angles(37, 180) + 0.1
    A = tomors.Projector(theta, 40, (32, 36), center=20.3, projector=model)
    assert A.is_matched and A.vol_shape == (32, 36) and A.proj_shape == (37, 40)
    # Products accumulated in float32: measured gaps 3e-9 to 1.3e-8; 1e-6
    # leaves a margin of ~100.
    assert _adjoint_gap(A, rng) < 1e-6
    A3 = tomors.Projector(theta, 40, 32, slices=3, projector=model)
    assert A3.vol_shape == (3, 32, 32) and A3.proj_shape == (3, 37, 40)
    assert _adjoint_gap(A3, rng) < 1e-6


@pytest.mark.parametrize("model", ["joseph", "line"])
def test_cone_adjoint(model, rng):
    theta = tomors.angles(24, 360)
    A = tomors.Projector.cone(theta, 80.0, 40.0, 1.0, (10, 20), projector=model)
    assert A.is_matched and A.vol_shape == (10, 20, 20) and A.proj_shape == (24, 10, 20)
    assert _adjoint_gap(A, rng) < 1e-6


def test_voxel_model_is_not_matched():
    A = tomors.Projector(tomors.angles(10), 16, projector="voxel")
    assert not A.is_matched


def test_projector_agrees_with_project_and_backproject(rng):
    theta = tomors.angles(30)
    A = tomors.Projector(theta, 24)
    x = rng.random((24, 24), dtype=np.float32)
    assert np.array_equal(A @ x, tomors.project(x, theta))
    y = A @ x
    assert np.array_equal(A.T @ y, tomors.backproject(y, theta))
    # Stacks: project returns [angle][row][bin], the operator sinograms.
    vol = rng.random((2, 24, 24), dtype=np.float32)
    A3 = tomors.Projector(theta, 24, slices=2)
    assert np.array_equal(np.swapaxes(A3 @ vol, 0, 1), tomors.project(vol, theta))
    cone = tomors.Projector.cone(tomors.angles(12, 360), 60.0, 30.0, 1.0, (8, 16))
    v = rng.random(cone.vol_shape, dtype=np.float32)
    assert np.array_equal(
        cone @ v,
        tomors.project_cone(v, tomors.angles(12, 360), 60.0, 30.0, 1.0, (8, 16),
                            voxel_size=cone.voxel_size),
    )


def test_scipy_linear_operator_lsqr():
    """A user-written solver (scipy's LSQR) through as_linear_operator."""
    sparse = pytest.importorskip("scipy.sparse.linalg")
    theta = tomors.angles(48)
    n = 32
    A = tomors.Projector(theta, n)
    phantom = tomors.shepp_logan(n)
    sino = A @ phantom
    op = A.as_linear_operator()
    assert op.shape == (48 * n, n * n)
    x = sparse.lsqr(op, sino.ravel(), iter_lim=60)[0].reshape(n, n)
    # LSQR on consistent data, 60 iterations: measured relative residual
    # 8e-4 and NRMSE 0.017 inside the disc; bounds with a margin of ~3-6.
    resid = np.linalg.norm(A @ x.astype(np.float32) - sino) / np.linalg.norm(sino)
    assert resid < 5e-3
    assert tomors.nrmse(x.astype(np.float32), phantom, 0.45) < 0.05


def test_operator_shape_errors():
    A = tomors.Projector(tomors.angles(10), 16)
    with pytest.raises(ValueError, match="shape"):
        A.forward(np.zeros((15, 16), np.float32))
    with pytest.raises(ValueError, match="non-finite"):
        A.backward(np.full((10, 16), np.nan, np.float32))
