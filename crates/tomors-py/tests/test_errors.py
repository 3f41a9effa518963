"""Bad input from Python: every case raises the right exception class with a
one-line message, and nothing crashes the interpreter (the whole list also
runs in a child interpreter, whose exit status would show an abort)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tomors

TH = tomors.angles(20)
SINO = tomors.shepp_logan_projections(TH, 32)  # [angle][bin]
PROJ = np.ascontiguousarray(np.repeat(SINO[:, None, :], 2, axis=1))  # [angle][row][bin]
NAN = SINO.copy()
NAN[3, 4] = np.nan
CONE_TH = tomors.angles(12, 360)
CONE = np.zeros((12, 8, 16), np.float32)


class FakeCupy:
    """Looks like a CuPy array (the protocol only)."""

    __cuda_array_interface__ = {"shape": (20, 32), "typestr": "<f4", "data": (0, False), "version": 3}


def _raise_in_progress(done, total):
    raise KeyError("stop from the callback")


# (name, call, exception class)
CASES = [
    ("1-D tomo", lambda: tomors.recon(SINO[0], TH), ValueError),
    ("4-D tomo", lambda: tomors.recon(PROJ[None], TH), ValueError),
    ("theta length", lambda: tomors.recon(SINO, TH[:-1]), ValueError),
    ("theta scalar", lambda: tomors.recon(SINO, 0.5), ValueError),
    ("theta missing", lambda: tomors.recon(SINO, None), ValueError),
    ("theta 2-D", lambda: tomors.recon(SINO, TH[None]), ValueError),
    ("theta non-finite", lambda: tomors.recon(SINO, np.where(TH > 1, np.inf, TH)), ValueError),
    ("NaN projections", lambda: tomors.recon(NAN, TH), ValueError),
    ("NaN iterative", lambda: tomors.recon(NAN, TH, algorithm="sirt", iterations=2), ValueError),
    ("one angle", lambda: tomors.recon(SINO[:1], TH[:1]), ValueError),
    ("no angles", lambda: tomors.recon(SINO[:0], TH[:0]), ValueError),
    ("no bins", lambda: tomors.recon(SINO[:, :0], TH), ValueError),
    ("centre off the detector", lambda: tomors.recon(SINO, TH, center=500), ValueError),
    ("centre negative", lambda: tomors.recon(SINO, TH, center=-3.0), ValueError),
    ("centre NaN", lambda: tomors.recon(SINO, TH, center=float("nan")), ValueError),
    ("centres per projection wrong count", lambda: tomors.recon(SINO, TH, center=[16.0] * 3), ValueError),
    ("unknown algorithm", lambda: tomors.recon(SINO, TH, algorithm="mlem"), ValueError),
    ("unknown filter", lambda: tomors.recon(SINO, TH, filter="butterworth"), ValueError),
    ("unknown padding", lambda: tomors.recon(SINO, TH, padding="mirror"), ValueError),
    ("unknown interp", lambda: tomors.recon(SINO, TH, interp="cubic"), ValueError),
    ("unknown backend", lambda: tomors.recon(SINO, TH, backend="tpu"), ValueError),
    ("unknown projector", lambda: tomors.recon(SINO, TH, algorithm="sirt", projector="siddon2"), ValueError),
    ("cutoff 0", lambda: tomors.recon(SINO, TH, cutoff=0.0), ValueError),
    ("cutoff 2", lambda: tomors.recon(SINO, TH, cutoff=2.0), ValueError),
    ("zero iterations", lambda: tomors.recon(SINO, TH, algorithm="sirt", iterations=0), ValueError),
    ("negative relaxation", lambda: tomors.recon(SINO, TH, algorithm="sirt", relaxation=-1), ValueError),
    ("empty box", lambda: tomors.recon(SINO, TH, algorithm="sirt", min=1, max=0), ValueError),
    ("block size for sirt", lambda: tomors.recon(SINO, TH, algorithm="sirt", block_size=2), ValueError),
    ("random order for sart", lambda: tomors.recon(SINO, TH, algorithm="sart", random_order=True), ValueError),
    ("zero block size", lambda: tomors.recon(SINO, TH, algorithm="sart", block_size=0), ValueError),
    ("init shape", lambda: tomors.recon(SINO, TH, algorithm="sirt", init=np.zeros((31, 32))), ValueError),
    ("art on cuda", lambda: tomors.recon(SINO, TH, algorithm="art", backend="cuda"), ValueError),
    ("fdk 2-D", lambda: tomors.fdk(SINO, TH, 100, 50, 1.0), ValueError),
    ("fdk negative sod", lambda: tomors.fdk(CONE, CONE_TH, -100, 50, 1.0), ValueError),
    ("fdk theta length", lambda: tomors.fdk(CONE, CONE_TH[:5], 100, 50, 1.0), ValueError),
    ("fdk pixel size 0", lambda: tomors.fdk(CONE, CONE_TH, 100, 50, 0.0), ValueError),
    ("fdk pixel size triple", lambda: tomors.fdk(CONE, CONE_TH, 100, 50, (1, 1, 1)), ValueError),
    ("fdk voxel size", lambda: tomors.fdk(CONE, CONE_TH, 100, 50, 1.0, voxel_size=-1), ValueError),
    ("fdk source inside volume", lambda: tomors.fdk(CONE, CONE_TH, 5, 50, 1.0, voxel_size=1.0), ValueError),
    ("fdk unknown filter", lambda: tomors.fdk(CONE, CONE_TH, 100, 50, 1.0, filter="x"), ValueError),
    ("recon_cone unknown algorithm", lambda: tomors.recon_cone(CONE, CONE_TH, 100, 50, 1.0, algorithm="x"), ValueError),
    ("project 1-D", lambda: tomors.project(np.zeros(5), TH), ValueError),
    ("project NaN", lambda: tomors.project(np.full((4, 4), np.nan), TH), ValueError),
    ("backproject theta", lambda: tomors.backproject(SINO, TH[:3]), ValueError),
    ("Projector shape", lambda: tomors.Projector(TH, 32).forward(np.zeros((3, 3))), ValueError),
    ("Projector slices 0", lambda: tomors.Projector(TH, 32, slices=0), ValueError),
    ("nrmse shapes", lambda: tomors.nrmse(np.zeros((4, 4)), np.ones((5, 4))), ValueError),
    ("nrmse constant reference", lambda: tomors.nrmse(np.zeros((4, 4)), np.ones((4, 4))), ValueError),
    ("ssim too small", lambda: tomors.ssim(np.zeros((5, 5)), np.eye(5)), ValueError),
    ("normalize flat shape", lambda: tomors.normalize(PROJ, np.ones((1, 3, 32))), ValueError),
    ("normalize positions", lambda: tomors.normalize(PROJ, np.ones((2, 2, 32)), flat_positions=[0.0]), ValueError),
    ("normalize unknown average", lambda: tomors.normalize(PROJ, np.ones((1, 2, 32)), average="mode"), ValueError),
    ("minus_log epsilon", lambda: tomors.minus_log(SINO, 0.0), ValueError),
    ("stripes window", lambda: tomors.remove_stripes(PROJ, 1), ValueError),
    ("zinger threshold", lambda: tomors.remove_zingers(PROJ, -1.0), ValueError),
    ("stripe method unknown", lambda: tomors.remove_stripes(PROJ, method="bogus"), ValueError),
    ("stripe fitting order", lambda: tomors.remove_stripes(PROJ, method="fitting", order=0), ValueError),
    ("stripe fitting sigma", lambda: tomors.remove_stripes(PROJ, method="fitting", sigma=-1), ValueError),
    ("find_center range reversed", lambda: tomors.find_center(PROJ, TH, range=(20, 10)), ValueError),
    ("find_center range off the detector", lambda: tomors.find_center(PROJ, TH, range=(40, 50)), ValueError),
    ("find_center range not a pair", lambda: tomors.find_center(PROJ, TH, range=3), ValueError),
    ("half-acquisition axis of a 180° scan", lambda: tomors.find_center(PROJ, TH, half_acquisition=True), ValueError),
    ("stitch_half of a 180° scan", lambda: tomors.stitch_half(PROJ, TH, 5.0), ValueError),
    ("stitch_half axis off the detector", lambda: tomors.stitch_half(CONE, CONE_TH, 40.0), ValueError),
    ("stitch_half no axis", lambda: tomors.stitch_half(CONE, CONE_TH, None), ValueError),
    ("half acquisition with centres", lambda: tomors.recon(PROJ, TH, [1.0, 2.0], half_acquisition=True), ValueError),
    ("find_center few bins", lambda: tomors.find_center(SINO[:, :8], TH), ValueError),
    ("find_center row", lambda: tomors.find_center(PROJ, TH, rows=[7]), ValueError),
    ("write extension", lambda: tomors.write("/tmp/tomors-test-out.xyz", np.zeros((2, 2, 2))), ValueError),
    ("write tiff bits", lambda: tomors.write("/tmp/tomors-test-out.npy", np.zeros((2, 2, 2)), tiff_bits=16), ValueError),
    ("read raw dtype", lambda: tomors.read("/tmp", raw_shape=(1, 1, 1), raw_dtype="f16"), ValueError),
    ("read angles unit", lambda: tomors.read("/tmp/x.npy", angles_unit="grad"), ValueError),
    ("angles n", lambda: tomors.angles(0), ValueError),
    ("huge phantom", lambda: tomors.shepp_logan(10**7), ValueError),
    ("overflowing phantom", lambda: tomors.shepp_logan(2**40, nz=2**40), ValueError),
    ("huge grid from a wide detector", lambda: tomors.recon(np.zeros((2, 1, 10**7), np.float32), TH[:2]), ValueError),
    ("huge iterative grid", lambda: tomors.recon(np.zeros((2, 1, 10**7), np.float32), TH[:2], algorithm="sirt"), ValueError),
    ("huge Projector", lambda: tomors.Projector(TH, 10**7), ValueError),
    ("huge projection", lambda: tomors.project(np.zeros((2, 2)), TH, n_bins=10**13), ValueError),
    ("huge cone volume", lambda: tomors.fdk(CONE, CONE_TH, 100, 50, 1.0, shape=(10**5, 10**5, 10**5)), ValueError),
    ("complex tomo", lambda: tomors.recon(SINO.astype(np.complex64), TH), TypeError),
    ("string tomo", lambda: tomors.recon(np.array([["a", "b"]] * 2), TH[:2]), TypeError),
    ("object tomo", lambda: tomors.recon(np.array([[None, 1]] * 2, dtype=object), TH[:2]), TypeError),
    ("GPU array", lambda: tomors.recon(FakeCupy(), TH), TypeError),
    ("Projector unknown backend", lambda: tomors.Projector(TH, 16, backend="tpu"), ValueError),
    ("Projector model the GPU lacks", lambda: tomors.Projector(TH, 16, projector="line", backend="cuda"), ValueError),
    ("CPU Projector given a GPU array", lambda: tomors.Projector(TH, 16).forward(FakeCupy()), TypeError),
    ("progress not callable", lambda: tomors.recon(SINO, TH, progress=3), TypeError),
    ("path not a path", lambda: tomors.read(3.5), TypeError),
    ("read missing file", lambda: tomors.read("/nonexistent/scan.h5"), FileNotFoundError),
    ("write into missing directory", lambda: tomors.write("/nonexistent/dir/v.npy", np.zeros((2, 2, 2))), FileNotFoundError),
    ("callback exception", lambda: tomors.recon(PROJ, TH, slab=1, progress=_raise_in_progress), KeyError),
    ("callback exception, iterative", lambda: tomors.recon(SINO, TH, algorithm="sirt", iterations=3, progress=_raise_in_progress), KeyError),
    ("panic inside the library", lambda: tomors._native.raise_panic(), RuntimeError),
]


@pytest.mark.parametrize("name, call, exc", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises(name, call, exc):
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert msg.strip(), f"{name}: empty message"
    assert "\n" not in msg.strip(), f"{name}: message is not one line: {msg!r}"


def test_bad_files_raise_oserror(tmp_path):
    trunc = tmp_path / "trunc.npy"
    np.save(trunc, np.zeros((4, 3, 8), np.float32))
    trunc.write_bytes(trunc.read_bytes()[:100])
    fake = tmp_path / "fake.h5"
    fake.write_bytes(b"not an HDF5 file at all")
    unknown = tmp_path / "data.bin"
    unknown.write_bytes(b"\0" * 16)
    short_raw = tmp_path / "short.raw"
    short_raw.write_bytes(b"\0" * 10)
    for path, kw in [(trunc, {}), (fake, {}), (unknown, {}), (short_raw, {"raw_shape": (2, 2, 2)})]:
        with pytest.raises(OSError) as info:
            tomors.read(path, **kw)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_write_refuses_to_overwrite(tmp_path):
    out = tmp_path / "v.npy"
    tomors.write(out, np.ones((2, 3, 4)))
    with pytest.raises(FileExistsError):
        tomors.write(out, np.zeros((2, 3, 4)))
    assert np.array_equal(np.load(out), np.ones((2, 3, 4), np.float32))
    tomors.write(out, np.zeros((2, 3, 4)), overwrite=True)
    assert np.array_equal(np.load(out), np.zeros((2, 3, 4), np.float32))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy"], "a temporary file was left"


def test_cuda_without_gpu_is_runtime_error():
    if tomors.devices()["usable"]:
        pytest.skip("a GPU is usable here")
    with pytest.raises(RuntimeError, match="CUDA|GPU|cuda"):
        tomors.recon(SINO, TH, backend="cuda")
    with pytest.raises(RuntimeError):
        tomors.fdk(CONE, CONE_TH, 100, 50, 1.0, backend="cuda")
    with pytest.raises(RuntimeError):
        tomors.tune(quick=True, dry_run=True)
    with pytest.raises(RuntimeError):
        tomors.Projector(TH, 32, backend="cuda")
    # 'auto' falls back to the CPU.
    assert tomors.Projector(TH, 32, backend="auto").backend == "cpu"


def test_bad_input_list_never_crashes_the_interpreter():
    """Every case in a child interpreter: an abort would show as a signal exit."""
    here = Path(__file__).resolve().parent
    code = (
        "import sys; sys.path.insert(0, %r)\n"
        "import test_errors as t\n"
        "n = 0\n"
        "for name, call, exc in t.CASES:\n"
        "    try:\n"
        "        call()\n"
        "    except exc:\n"
        "        n += 1\n"
        "print('raised', n, 'of', len(t.CASES))\n" % str(here)
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "RUST_BACKTRACE": "0"})
    assert p.returncode == 0, f"child interpreter died ({p.returncode}): {p.stderr[-2000:]}"
    assert f"raised {len(CASES)} of {len(CASES)}" in p.stdout
