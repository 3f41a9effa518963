"""The Python calls give the command-line tool's values, bit for bit, on the
CPU (same input .npy / HDF5 file, same options)."""

import numpy as np
import pytest

import tomors
from conftest import run_cli

N, ROWS, ANGLES = 48, 5, 60


@pytest.fixture(scope="module")
def scan(tmp_path_factory):
    """Noisy 3D phantom projections [angle][row][col] with off-centre axis."""
    d = tmp_path_factory.mktemp("scan")
    theta = tomors.angles(ANGLES)
    proj = tomors.shepp_logan_projections(theta, N, nz=ROWS)
    proj += np.random.default_rng(1).normal(0, 0.05, proj.shape).astype(np.float32)
    np.save(d / "proj.npy", proj)
    np.save(d / "theta.npy", theta)
    return d, proj, theta


def _cli_volume(cli, scan_dir, name, *opts):
    out = scan_dir / f"{name}.npy"
    run_cli(cli, "recon", scan_dir / "proj.npy", "--angles", scan_dir / "theta.npy",
            "--backend", "cpu", "--out", out, "--overwrite", *opts)
    return np.load(out)


@pytest.mark.parametrize(
    "opts, kwargs",
    [
        ((), {}),
        (("--center", "23.25", "--filter", "hann", "--cutoff", "0.8", "--padding", "edge",
          "--interp", "nearest"),
         dict(center=23.25, filter="hann", cutoff=0.8, padding="edge", interp="nearest")),
    ],
)
def test_fbp_equals_cli(cli, scan, opts, kwargs):
    d, proj, theta = scan
    want = _cli_volume(cli, d, "fbp", *opts)
    got = tomors.recon(proj, theta, backend="cpu", **kwargs)
    assert got.dtype == np.float32 and got.shape == want.shape == (ROWS, N, N)
    assert np.array_equal(got, want)
    # Sinogram order in place gives the same volume.
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    assert np.array_equal(tomors.recon(sino, theta, sinogram_order=True, backend="cpu", **kwargs), want)


@pytest.mark.parametrize(
    "opts, kwargs",
    [
        ((), {}),
        (("--center", "23.25", "--filter", "hann", "--cutoff", "0.8", "--padding", "edge"),
         dict(center=23.25, filter="hann", cutoff=0.8, padding="edge")),
    ],
)
def test_fourier_equals_cli(cli, scan, opts, kwargs):
    """method='fourier' is the CLI's --method fourier (gridding, CPU)."""
    d, proj, theta = scan
    want = _cli_volume(cli, d, "fourier", "--method", "fourier", *opts)
    got = tomors.recon(proj, theta, method="fourier", backend="cpu", **kwargs)
    assert got.dtype == np.float32 and got.shape == want.shape == (ROWS, N, N)
    assert np.array_equal(got, want)
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    got = tomors.recon(sino, theta, sinogram_order=True, method="fourier", backend="cpu", **kwargs)
    assert np.array_equal(got, want)
    # Not the direct method's volume: the interpolations differ (docs/fourier.md).
    direct = tomors.recon(proj, theta, backend="cpu", **kwargs)
    assert not np.array_equal(got, direct)
    assert np.linalg.norm(got - direct) < 0.2 * np.linalg.norm(direct)


def test_fourier_refuses_direct_options(scan):
    _, proj, theta = scan
    for kwargs, words in [
        (dict(interp="nearest"), "interp"),
        (dict(kernel="standard"), "kernel"),
        (dict(algorithm="sirt"), "algorithm"),
    ]:
        with pytest.raises(ValueError, match=words):
            tomors.recon(proj, theta, method="fourier", backend="cpu", **kwargs)
    with pytest.raises(ValueError, match="method"):
        tomors.recon(proj, theta, method="gridrec", backend="cpu")
    uneven = theta.copy()
    uneven[3] += 0.01
    with pytest.raises(ValueError, match="evenly spaced"):
        tomors.recon(proj, uneven, method="fourier", backend="cpu")


@pytest.mark.parametrize(
    "opts, kwargs",
    [
        (("--algorithm", "sirt", "--iterations", "8", "--min", "0"),
         dict(algorithm="sirt", iterations=8, min=0)),
        (("--algorithm", "sart", "--iterations", "2", "--projector", "line", "--block-size", "3"),
         dict(algorithm="sart", iterations=2, projector="line", block_size=3)),
        (("--algorithm", "art", "--iterations", "1", "--relaxation", "0.5", "--random-order"),
         dict(algorithm="art", iterations=1, relaxation=0.5, random_order=True)),
    ],
)
def test_iterative_equals_cli(cli, scan, opts, kwargs):
    d, proj, theta = scan
    want = _cli_volume(cli, d, "it", *opts)
    got = tomors.recon(proj, theta, backend="cpu", **kwargs)
    assert np.array_equal(got, want)


def test_cone_equals_cli(cli, tmp_path):
    theta = tomors.angles(40, 360)
    proj, _, _ = tomors.shepp_logan_cone(theta, 120.0, 60.0, 1.0, (12, 24))
    np.save(tmp_path / "proj.npy", proj)
    np.save(tmp_path / "theta.npy", theta)
    geo = ("--geometry", "cone", "--sod", "120", "--odd", "60", "--pixel-size", "1",
           "--angles", tmp_path / "theta.npy", "--backend", "cpu")
    run_cli(cli, "recon", tmp_path / "proj.npy", *geo, "--out", tmp_path / "fdk.npy")
    got = tomors.fdk(proj, theta, 120.0, 60.0, 1.0, backend="cpu")
    assert np.array_equal(got, np.load(tmp_path / "fdk.npy"))
    run_cli(cli, "recon", tmp_path / "proj.npy", *geo, "--algorithm", "sirt", "--iterations", "4",
            "--out", tmp_path / "sirt.npy")
    got = tomors.recon_cone(proj, theta, 120.0, 60.0, 1.0, iterations=4, backend="cpu")
    assert np.array_equal(got, np.load(tmp_path / "sirt.npy"))


def test_dxchange_read_normalize_equals_cli(cli, tmp_path):
    """A DXchange file: read → normalize → -log → centre → FBP equals `tomors
    recon scan.h5 --center auto`."""
    h5py = pytest.importorskip("h5py", reason="h5py writes the DXchange test file")
    theta = tomors.angles(90)
    lines = tomors.shepp_logan_projections(theta, 128, nz=4)
    # Shift the axis by 3 px so the centre search has something to find.
    lines = np.roll(lines, 3, axis=2)
    flat = np.full((3, 4, 128), 1000.0, np.float32) * np.linspace(0.9, 1.1, 128, dtype=np.float32)
    dark = np.full((2, 4, 128), 100.0, np.float32)
    raw = (dark[0] + (flat[0] - dark[0]) * np.exp(-lines * 0.05)).astype(np.float32)
    path = tmp_path / "scan.h5"
    with h5py.File(path, "w") as f:
        f["exchange/data"] = raw
        f["exchange/data_white"] = flat
        f["exchange/data_dark"] = dark
        f["exchange/theta"] = np.degrees(theta.astype(np.float64))
    proj, flats, darks, th = tomors.read(path)
    assert proj.shape == (90, 4, 128) and flats.shape == (3, 4, 128) and darks.shape == (2, 4, 128)
    assert np.allclose(th, theta, atol=1e-6)
    line = tomors.minus_log(tomors.normalize(proj, flats, darks))
    assert np.allclose(line, lines * 0.05, atol=1e-4)
    scan = tomors.read(path)
    assert np.array_equal(scan.normalized(), line)
    c = tomors.find_center(line, th)
    assert abs(c - (63.5 + 3)) <= 0.5
    run_cli(cli, "recon", path, "--center", "auto", "--backend", "cpu", "--out", tmp_path / "v.npy")
    want = np.load(tmp_path / "v.npy")
    got = tomors.recon(line, th, center=c, backend="cpu")
    assert np.array_equal(got, want)


def test_shepp_logan_512_equals_cli_and_readme_nrmse(cli, tmp_path):
    """The held-out-style exact 512² sinogram (720 angles over 180°): the CLI's
    result exactly, and the README's NRMSE (0.0153; ASTRA's CPU FBP 0.0152)."""
    run_cli(cli, "phantom", "--size", "512", "--angles", "720", "--out-dir", tmp_path)
    proj = np.load(tmp_path / "projections.npy")
    theta = np.load(tmp_path / "angles.npy")
    phantom = np.load(tmp_path / "phantom.npy")
    assert np.array_equal(proj[:, 0, :], tomors.shepp_logan_projections(theta, 512))
    assert np.array_equal(phantom[0], tomors.shepp_logan(512))
    run_cli(cli, "recon", tmp_path / "projections.npy", "--angles", tmp_path / "angles.npy",
            "--backend", "cpu", "--out", tmp_path / "fbp.npy")
    got = tomors.recon(proj, theta, backend="cpu")
    assert np.array_equal(got, np.load(tmp_path / "fbp.npy"))
    e = tomors.nrmse(got[0], phantom[0], mask=0.45)
    # Measured 0.015251 here (README: 0.0153); 1e-5 allows for the rounding of
    # other SIMD paths (the portable kernels, AVX-512 machines).
    assert abs(e - 0.015251) < 1e-5, e


def test_preprocessing_equals_cli(cli, scan, tmp_path):
    """Zinger and stripe removal as `recon --zinger T --stripe S` (.npy input:
    no flats, so no -log in between)."""
    d, proj, theta = scan
    noisy = proj.copy()
    noisy[7, 2, 20] += 5.0
    noisy[:, 1, 11] *= 1.3
    np.save(tmp_path / "p.npy", noisy)
    run_cli(cli, "recon", tmp_path / "p.npy", "--angles", d / "theta.npy", "--backend", "cpu",
            "--zinger", "0.5", "--stripe", "5", "--out", tmp_path / "v.npy")
    clean = tomors.remove_stripes(tomors.remove_zingers(noisy, 0.5), 5)
    assert not np.array_equal(clean, noisy)
    assert np.array_equal(tomors.recon(clean, theta, backend="cpu"), np.load(tmp_path / "v.npy"))


def test_stripe_methods_equal_cli(cli, scan, tmp_path):
    """`remove_stripes(method='fitting', order, sigma)` is `--stripe
    fitting:ORDER,SIGMA`; any other CLI specification passes as is."""
    d, proj, theta = scan
    striped = proj.copy()
    striped[:, :, 17] += 0.4
    striped[:, :, 30:33] *= 0.8
    np.save(tmp_path / "p.npy", striped)
    for spec, call in (
        ("fitting:2,10", lambda p: tomors.remove_stripes(p, method="fitting", order=2, sigma=10)),
        ("fitting:3,5", lambda p: tomors.remove_stripes(p, method="fit", order=3, sigma=5.0)),
        ("fitting", lambda p: tomors.remove_stripes(p, method="fitting")),
        ("filtering:3,11", lambda p: tomors.remove_stripes(p, method="filtering:3,11")),
        ("sorting:9", lambda p: tomors.remove_stripes(p, 9)),
    ):
        out = tmp_path / "v.npy"
        run_cli(cli, "recon", tmp_path / "p.npy", "--angles", d / "theta.npy", "--backend", "cpu",
                "--stripe", spec, "--out", out, "--overwrite")
        clean = call(striped)
        assert not np.array_equal(clean, striped), spec
        assert np.array_equal(tomors.recon(clean, theta, backend="cpu"), np.load(out)), spec
    # One sinogram [angle][bin] gives the same as its row of the stack.
    one = tomors.remove_stripes(striped[:, 2, :], method="fitting")
    assert np.array_equal(one, tomors.remove_stripes(striped, method="fitting")[:, 2, :])
    with pytest.raises(ValueError, match="order"):
        tomors.remove_stripes(striped, method="fitting", order=9)
    with pytest.raises(ValueError, match="unknown stripe method"):
        tomors.remove_stripes(striped, method="bogus")


def test_center_range_equals_cli(cli, tmp_path):
    """`find_center(range=(a, b))` is `--center auto --center-range a:b`."""
    theta = tomors.angles(90)
    proj = np.roll(tomors.shepp_logan_projections(theta, 64, nz=3), 5, axis=2)
    np.save(tmp_path / "p.npy", proj)
    np.save(tmp_path / "t.npy", theta)
    c = tomors.find_center(proj, theta, range=(30, 44))
    assert abs(c - (31.5 + 5)) <= 0.5, c
    run_cli(cli, "recon", tmp_path / "p.npy", "--angles", tmp_path / "t.npy", "--backend", "cpu",
            "--center", "auto", "--center-range", "30:44", "--out", tmp_path / "v.npy")
    assert np.array_equal(tomors.recon(proj, theta, center=c, backend="cpu"),
                          np.load(tmp_path / "v.npy"))
    # A range that excludes the axis finds something else, and bad ranges
    # are refused with the CLI's message.
    assert abs(tomors.find_center(proj, theta, range=(10, 25)) - 36.5) > 2
    with pytest.raises(ValueError, match="range"):
        tomors.find_center(proj, theta, range=(44, 30))
    with pytest.raises(ValueError, match="either range or smin/smax"):
        tomors.find_center(proj, theta, range=(30, 44), smin=-10)


@pytest.fixture(scope="module")
def half_scan(tmp_path_factory):
    """A 360° half-acquisition scan: 120 angles over a turn of a 64² phantom,
    the detector cut to columns 20..63 so that the axis (31.5) sits at column
    11.5 of 44."""
    d = tmp_path_factory.mktemp("half")
    theta = tomors.angles(120, 360)
    full = tomors.shepp_logan_projections(theta, 64, nz=3)
    proj = np.ascontiguousarray(full[:, :, 20:])
    np.save(d / "p.npy", proj)
    np.save(d / "t.npy", theta)
    return d, proj, theta


def test_half_acquisition_equals_cli(cli, half_scan):
    d, proj, theta = half_scan
    # The axis search, as `--half-acquisition` without --center.
    axis, q, rows = tomors.find_center(proj, theta, half_acquisition=True, return_quality=True)
    assert abs(axis - 11.5) <= 0.25, axis
    assert len(rows) == 3 and q > 0.5
    run_cli(cli, "recon", d / "p.npy", "--angles", d / "t.npy", "--backend", "cpu",
            "--half-acquisition", "--out", d / "found.npy")
    vol, info = tomors.recon(proj, theta, half_acquisition=True, backend="cpu", return_info=True)
    assert np.array_equal(vol, np.load(d / "found.npy"))
    h = info["half_acquisition"]
    assert h["found"] and h["axis"] == axis and vol.shape[1:] == (h["width"], h["width"])
    # A given axis, as `--half-acquisition --center 11.5`.
    run_cli(cli, "recon", d / "p.npy", "--angles", d / "t.npy", "--backend", "cpu",
            "--half-acquisition", "--center", "11.5", "--out", d / "given.npy")
    want = np.load(d / "given.npy")
    assert np.array_equal(tomors.recon(proj, theta, 11.5, half_acquisition=True, backend="cpu"),
                          want)
    # stitch_half then recon is the same, and the wide slices hold the
    # whole phantom (the 64² slice's values inside its disc).
    st, th, c = tomors.stitch_half(proj, theta, 11.5)
    assert st.shape == (60, 3, 64) and len(th) == 60 and c == 31.5
    assert np.array_equal(tomors.recon(st, th, c, backend="cpu"), want)
    ref = tomors.recon(tomors.shepp_logan_projections(tomors.angles(60), 64, nz=3),
                       tomors.angles(60), backend="cpu")
    disc = np.hypot(*np.meshgrid(np.arange(64) - 31.5, np.arange(64) - 31.5)) < 26
    e = np.linalg.norm((want - ref)[:, disc]) / np.linalg.norm(ref[:, disc])
    assert e < 0.05, e
    # Sinogram order and one sinogram give the same.
    sino = np.ascontiguousarray(proj.transpose(1, 0, 2))
    assert np.array_equal(tomors.recon(sino, theta, 11.5, half_acquisition=True,
                                       sinogram_order=True, backend="cpu"), want)
    one, _, _ = tomors.stitch_half(proj[:, 1, :], theta, 11.5)
    assert np.array_equal(one, st[:, 1, :])
    with pytest.raises(ValueError, match="360°"):
        tomors.stitch_half(proj[:60], theta[:60], 11.5)
    with pytest.raises(ValueError, match="on the detector"):
        tomors.stitch_half(proj, theta, 50.0)
    with pytest.raises(ValueError, match="one number"):
        tomors.recon(proj, theta, [11.5, 11.5], half_acquisition=True)
