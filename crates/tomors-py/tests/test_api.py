"""The Python layer: progress reporting, conversions of other dtypes and
orders, 2D and 3D shapes, reading and writing files."""

import numpy as np
import pytest

import tomors

TH = tomors.angles(40)
SINO = tomors.shepp_logan_projections(TH, 48)
PROJ = np.ascontiguousarray(np.repeat(SINO[:, None, :], 5, axis=1))


def test_version_and_all():
    assert isinstance(tomors.__version__, str) and tomors.__version__
    for name in tomors.__all__:
        assert hasattr(tomors, name), name
        assert getattr(tomors, name).__doc__ or name == "__version__", f"{name} has no docstring"


def test_progress_callback_fbp_and_iterative():
    calls = []
    tomors.recon(PROJ, TH, slab=2, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(2, 5), (4, 5), (5, 5)]
    calls.clear()
    tomors.recon(PROJ, TH, algorithm="sirt", iterations=4, progress=lambda d, t: calls.append((d, t)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_verbose_shows_a_bar(capsys):
    pytest.importorskip("tqdm")
    tomors.recon(PROJ, TH, slab=1, verbose=True)
    assert "FBP" in capsys.readouterr().err


def test_other_dtypes_and_orders_give_the_same_result():
    want = tomors.recon(PROJ, TH)
    assert np.array_equal(tomors.recon(PROJ.astype(np.float64), TH.astype(np.float64)), want)
    assert np.array_equal(tomors.recon(np.asfortranarray(PROJ), list(TH)), want)
    assert np.array_equal(tomors.recon(PROJ[:, ::1, :].copy(order="F"), TH), want)
    ints = np.round(PROJ * 100).astype(np.int16)
    assert np.array_equal(tomors.recon(ints, TH), tomors.recon(ints.astype(np.float32), TH))


def test_two_d_and_three_d_shapes():
    assert tomors.recon(SINO, TH).shape == (48, 48)
    assert tomors.recon(PROJ, TH).shape == (5, 48, 48)
    # One slice runs the CPU's single-slice kernel, a stack the interleaved
    # one: equal up to float32 rounding (measured max difference 3.6e-7).
    assert np.allclose(tomors.recon(SINO, TH), tomors.recon(PROJ, TH)[2], rtol=0, atol=2e-6)
    assert tomors.recon(SINO, TH, algorithm="sart", iterations=1).shape == (48, 48)
    img = tomors.shepp_logan(48)
    assert tomors.project(img, TH).shape == (40, 48)
    assert tomors.project(np.stack([img] * 3), TH).shape == (40, 3, 48)
    assert tomors.project(img, TH, n_bins=64).shape == (40, 64)
    assert tomors.backproject(SINO, TH, shape=(30, 40)).shape == (30, 40)
    vol, info = tomors.recon(PROJ, TH, algorithm="sirt", iterations=3, backend="cpu", return_info=True)
    assert info["iterations"] == 3 and len(info["residuals"]) == 3 and info["device"].startswith("cpu")
    assert info["residuals"][-1] < info["residuals"][0]
    _, info = tomors.recon(PROJ, TH, backend="cpu", return_info=True)
    assert info["slices"] == 5 and info["device"].startswith("cpu")


def test_center_per_projection_equals_scalar():
    a = tomors.recon(SINO, TH, center=23.0)
    b = tomors.recon(SINO, TH, center=np.full(len(TH), 23.0))
    assert np.array_equal(a, b)


def test_minus_log_and_normalize():
    x = np.array([[1.0, np.e, 0.0, -1.0, np.nan]], np.float32)
    got = tomors.minus_log(x, 1e-6)
    assert np.allclose(got, [[0.0, -1.0, -np.log(1e-6)] + [-np.log(1e-6)] * 2], atol=1e-6)
    proj = np.full((4, 2, 3), 60.0, np.float32)
    flats = np.full((2, 2, 3), 110.0, np.float32)
    darks = np.full((1, 2, 3), 10.0, np.float32)
    assert np.allclose(tomors.normalize(proj, flats, darks), 0.5)
    # Flat groups before (100) and after (200) the scan are interpolated.
    flats2 = np.concatenate([np.full((1, 2, 3), 100.0), np.full((1, 2, 3), 200.0)]).astype(np.float32)
    n = tomors.normalize(proj, flats2, flat_positions=[0, 4])
    assert np.allclose(n[:, 0, 0], [60 / 100, 60 / 125, 60 / 150, 60 / 175])


def test_write_formats(tmp_path):
    vol = np.random.default_rng(3).random((3, 4, 5), dtype=np.float32)
    tomors.write(tmp_path / "v.npy", vol)
    assert np.array_equal(np.load(tmp_path / "v.npy"), vol)
    h5py = pytest.importorskip("h5py")
    tomors.write(tmp_path / "v.h5", vol, attributes={"sample": "tooth"})
    with h5py.File(tmp_path / "v.h5") as f:
        assert np.array_equal(f["volume"][...], vol)
        assert f["volume"].attrs["sample"] in ("tooth", b"tooth")
    tomors.write(tmp_path / "slices", vol)
    back = tomors.read(tmp_path / "slices")
    assert np.array_equal(back.projections, vol)
    tomors.write(tmp_path / "slices8", vol, tiff_bits=8, tiff_range=(0, 1))
    assert len(list((tmp_path / "slices8").iterdir())) >= 3


def test_read_npy_and_raw(tmp_path):
    np.save(tmp_path / "p.npy", PROJ)
    s = tomors.read(tmp_path / "p.npy", angle_range=360)
    assert np.array_equal(s.projections, PROJ) and s.flats.shape == (0, 5, 48)
    assert np.allclose(s.angles, tomors.angles(40, 360))
    assert s.format and "p.npy" in repr(s)
    part = tomors.read(tmp_path / "p.npy", rows=(1, 3), angles=TH)
    assert np.array_equal(part.projections, PROJ[:, 1:3]) and np.array_equal(part.angles, TH)
    raw = (PROJ * 1000).astype(">u2")
    (tmp_path / "p.raw").write_bytes(b"HEADER" + raw.tobytes())
    r = tomors.read(tmp_path / "p.raw", raw_shape=PROJ.shape, raw_dtype="u16", raw_endian="big",
                    raw_offset=6)
    assert np.array_equal(r.projections, raw.astype(np.float32))


def test_type_stubs_match_the_functions():
    """__init__.pyi and py.typed ship with the package and list every public
    function with the runtime's parameters."""
    import ast
    import inspect
    from pathlib import Path

    here = Path(tomors.__file__).parent
    assert (here / "py.typed").exists()
    tree = ast.parse((here / "__init__.pyi").read_text())
    stubs = {
        n.name: [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs]
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
    }
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    for name in tomors.__all__:
        if name == "__version__":
            continue
        obj = getattr(tomors, name)
        if inspect.isclass(obj):
            assert name in classes, name
            continue
        assert name in stubs, f"{name} missing from __init__.pyi"
        assert list(inspect.signature(obj).parameters) == stubs[name], name


def test_release_gpus_empties_the_kept_backends():
    # Whatever earlier tests opened is dropped; nothing is left to drop after.
    assert tomors.release_gpus() >= 0
    assert tomors.release_gpus() == 0


def test_help_reads_like_tomopy():
    """help(tomors.recon) shows plain signatures (types live in the stubs) and
    numpydoc sections, as TomoPy's recon does."""
    import inspect

    sig = str(inspect.signature(tomors.recon))
    assert sig.startswith("(tomo, theta, center=None, algorithm='fbp', *, filter='ram-lak'"), sig
    doc = tomors.recon.__doc__
    for section in ("Parameters\n    ----------", "Returns\n    -------", "Raises\n", "Examples\n"):
        assert section in doc, section
    for part in ("tomo : ndarray", "theta : array_like", "radians", "center : float"):
        assert part in doc, part
    assert str(inspect.signature(tomors.Projector)).startswith("(theta, n_bins, shape=None")
