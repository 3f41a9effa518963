//! Bad input through the CLI (issue 13, items 5–10, 13, 14, 16, 17): each
//! is one error line naming the file or flag and a non-zero exit with
//! nothing written — or, where the data may be legitimate, a warning.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ndarray::{Array1, Array3};
use ndarray_npy::write_npy;
use tomors_io::hdf5;

fn tomors() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tomors"));
    // Tests run in parallel threads: a child started while another thread
    // has an HDF5 file open inherits its descriptor and with it the file's
    // lock, which would make the next reader of that file fail to lock it.
    c.env("HDF5_USE_FILE_LOCKING", "FALSE");
    c
}

fn run(args: &[&str]) -> Output {
    tomors().args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One `error:` line containing every needle, non-zero exit, no panic.
fn fails_with(o: &Output, needles: &[&str]) {
    let err = stderr(o);
    assert!(!o.status.success(), "succeeded: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    for n in needles {
        assert!(errors[0].contains(n), "'{}' lacks '{n}'", errors[0]);
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `tomors recon INPUT --out OUT --backend cpu EXTRA…`.
fn cpu_recon(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["recon", s(input), "--out", s(out), "--backend", "cpu"];
    args.extend_from_slice(extra);
    run(&args)
}

/// A sinogram-like data set `[angle][row][col]` that reconstructs to a disc.
fn disc(na: usize, nr: usize, nc: usize) -> Array3<f32> {
    Array3::from_shape_fn((na, nr, nc), |(_, _, c)| {
        let x = (c as f32 - (nc as f32 - 1.0) / 2.0) / (nc as f32 / 3.0);
        2.0 * (1.0 - x * x).max(0.0).sqrt()
    })
}

fn recon_npy(dir: &Path, data: &Array3<f32>, extra: &[&str]) -> (Output, PathBuf) {
    let p = dir.join("p.npy");
    write_npy(&p, data).unwrap();
    let out = dir.join("v.npy");
    let args = [&["--quiet"], extra].concat();
    (cpu_recon(&p, &out, &args), out)
}

/// A DXchange file with projections `proj` (and optional flats, darks and
/// theta with an optional units attribute).
fn dxchange(
    path: &Path,
    proj: &Array3<f32>,
    flats: Option<&Array3<f32>>,
    darks: Option<&Array3<f32>>,
    theta: Option<(&Array1<f64>, Option<&str>)>,
) {
    let f = hdf5::File::create(path).unwrap();
    let g = f.create_group("exchange").unwrap();
    g.new_dataset_builder()
        .with_data(proj)
        .create("data")
        .unwrap();
    if let Some(fl) = flats {
        g.new_dataset_builder()
            .with_data(fl)
            .create("data_white")
            .unwrap();
    }
    if let Some(dk) = darks {
        g.new_dataset_builder()
            .with_data(dk)
            .create("data_dark")
            .unwrap();
    }
    if let Some((t, units)) = theta {
        let ds = g
            .new_dataset_builder()
            .with_data(t)
            .create("theta")
            .unwrap();
        if let Some(u) = units {
            let v: hdf5::types::VarLenUnicode = u.parse().unwrap();
            ds.new_attr::<hdf5::types::VarLenUnicode>()
                .create("units")
                .unwrap()
                .write_scalar(&v)
                .unwrap();
        }
    }
}

#[test]
fn non_finite_values_in_any_reader_and_in_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // HDF5 data with NaN (with flats: before, −log clamped it to a number).
    let mut proj = Array3::<f32>::from_elem((16, 2, 24), 500.0);
    proj[[3, 1, 7]] = f32::NAN;
    let h5 = d.join("nan.h5");
    let flats = Array3::<f32>::from_elem((2, 2, 24), 1000.0);
    dxchange(&h5, &proj, Some(&flats), None, None);
    let out = d.join("v.npy");
    let o = cpu_recon(&h5, &out, &["--quiet"]);
    fails_with(&o, &["nan.h5", "NaN", "projection 3", "row 1", "column 7"]);
    assert!(!out.exists());
    // NaN in the flats.
    let mut nan_flats = flats.clone();
    nan_flats[[1, 0, 2]] = f32::NAN;
    let h5f = d.join("nanflat.h5");
    dxchange(
        &h5f,
        &Array3::from_elem((16, 2, 24), 500.0),
        Some(&nan_flats),
        None,
        None,
    );
    let o = cpu_recon(&h5f, &out, &["--quiet"]);
    fails_with(&o, &["nanflat.h5", "flat frame 1"]);
    // .npy: the same rule.
    let mut p = disc(16, 2, 24);
    p[[0, 0, 0]] = f32::INFINITY;
    let (o, out) = recon_npy(d, &p, &[]);
    fails_with(&o, &["p.npy", "inf", "projection 0"]);
    assert!(!out.exists());
    // 3e38 in the input: finite, but the reconstruction overflows.
    let mut p = disc(16, 2, 24);
    p[[4, 1, 12]] = 3e38;
    p[[5, 1, 12]] = 3e38;
    let (o, out) = recon_npy(d, &p, &[]);
    fails_with(&o, &["v.npy", "non-finite", "nothing written"]);
    assert!(!out.exists());
}

#[test]
fn bad_flats_and_darks() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (na, nr, nc) = (60, 8, 64);
    // Transmission of a disc, as counts: flat 1000, dark 100.
    let line = disc(na, nr, nc);
    let counts = line.mapv(|l| 100.0 + 900.0 * (-l).exp());
    let good_flats = Array3::<f32>::from_elem((2, nr, nc), 1000.0);
    let darks = Array3::<f32>::from_elem((2, nr, nc), 100.0);
    let recon = |name: &str, flats: &Array3<f32>, darks: &Array3<f32>| {
        let h5 = d.join(format!("{name}.h5"));
        dxchange(&h5, &counts, Some(flats), Some(darks), None);
        let out = d.join(format!("{name}.npy"));
        (cpu_recon(&h5, &out, &[]), out)
    };
    let (o, good) = recon("good", &good_flats, &darks);
    assert!(o.status.success(), "{}", stderr(&o));
    let reference: Array3<f32> = ndarray_npy::read_npy(&good).unwrap();
    // Zero flats, flats equal to darks, darks above flats: errors.
    for (name, flats) in [
        ("zero", Array3::<f32>::zeros((2, nr, nc))),
        ("equal", darks.clone()),
        ("below", Array3::<f32>::from_elem((2, nr, nc), 50.0)),
    ] {
        let (o, out) = recon(name, &flats, &darks);
        fails_with(&o, &[&format!("{name}.h5"), "flat not above the dark"]);
        assert!(!out.exists());
    }
    // Two bad pixels (< 1 %): masked, interpolated, reported.
    let mut few = good_flats.clone();
    few.slice_mut(ndarray::s![.., 0, 20]).fill(90.0);
    few.slice_mut(ndarray::s![.., 5, 30]).fill(0.0);
    let (o, out) = recon("few", &few, &darks);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 pixels with flat ≤ dark"),
        "{}",
        stderr(&o)
    );
    let v: Array3<f32> = ndarray_npy::read_npy(&out).unwrap();
    let num: f32 = (&v - &reference).mapv(|x| x * x).sum();
    let den: f32 = reference.mapv(|x| x * x).sum();
    // Measured 8.1e-4 (interpolation error of two detector pixels); bound
    // with a 12× margin.
    eprintln!("NRMSE with two masked pixels: {}", (num / den).sqrt());
    assert!((num / den).sqrt() < 0.01, "NRMSE {}", (num / den).sqrt());
    // Negative counts: a warning.
    let mut neg = counts.clone();
    neg[[0, 0, 0]] = -5.0;
    let h5 = d.join("neg.h5");
    dxchange(&h5, &neg, Some(&good_flats), Some(&darks), None);
    let o = cpu_recon(&h5, &d.join("neg.npy"), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 negative detector values"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn angles_that_cannot_be_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("p.npy");
    write_npy(&p, &disc(90, 2, 32)).unwrap();
    let out = d.join("v.npy");
    let with_angles = |name: &str, a: Array1<f32>, extra: &[&str]| {
        let ap = d.join(name);
        write_npy(&ap, &a).unwrap();
        let args = [&["--quiet", "--angles", s(&ap)], extra].concat();
        cpu_recon(&p, &out, &args)
    };
    // Degrees given as radians.
    let deg = Array1::from_shape_fn(90, |i| i as f32 * 2.0);
    fails_with(
        &with_angles("deg.npy", deg.clone(), &[]),
        &["deg.npy", "--angles-unit deg"],
    );
    assert!(with_angles("deg.npy", deg, &["--angles-unit", "deg"])
        .status
        .success());
    std::fs::remove_file(&out).unwrap();
    // All equal, huge, non-scans.
    fails_with(
        &with_angles("eq.npy", Array1::from_elem(90, 0.5), &[]),
        &["eq.npy", "equal"],
    );
    let huge = Array1::from_shape_fn(90, |i| i as f32 * 1e30);
    fails_with(&with_angles("huge.npy", huge, &[]), &["huge.npy", "turns"]);
    // --angle-range beyond two turns (streaming and iterative paths).
    let o = cpu_recon(&p, &out, &["--angle-range", "1e9"]);
    fails_with(&o, &["more than two turns"]);
    let o = cpu_recon(&p, &out, &["--angle-range", "1e9", "--algorithm", "sirt"]);
    fails_with(&o, &["--angle-range"]);
    assert!(!out.exists());
    // HDF5 theta in radians without units: read as radians, with a warning.
    let h5 = d.join("rad.h5");
    let theta = Array1::from_shape_fn(90, |i| i as f64 * std::f64::consts::PI / 90.0);
    dxchange(&h5, &disc(90, 2, 32), None, None, Some((&theta, None)));
    let o = run(&["info", s(&h5)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("range 178.000°"), "{text}");
    assert!(stderr(&o).contains("--angles-unit deg"), "{}", stderr(&o));
    // With units = degrees it is degrees, without a warning.
    let h5d = d.join("deg.h5");
    let theta_deg = theta.mapv(f64::to_degrees);
    dxchange(
        &h5d,
        &disc(90, 2, 32),
        None,
        None,
        Some((&theta_deg, Some("degrees"))),
    );
    let o = run(&["info", s(&h5d)]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("range 178.000°"));
    assert!(!stderr(&o).contains("units"), "{}", stderr(&o));
    // phantom: no directory left by refused options.
    for bad in [["--angle-range", "0"], ["--angles", "1"], ["--angles", "0"]] {
        let pd = d.join("ph");
        let o = run(&[
            "phantom",
            "--size",
            "16",
            "--out-dir",
            s(&pd),
            bad[0],
            bad[1],
        ]);
        fails_with(&o, &[bad[0]]);
        assert!(!pd.exists(), "{bad:?} left a directory");
    }
}

#[test]
fn raw_input_sizes_must_match() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let raw = d.join("scan.raw");
    let data: Vec<u8> = disc(90, 4, 64)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&raw, &data).unwrap();
    let out = d.join("v.npy");
    let recon = |input: &Path, extra: &[&str]| {
        let args = [&["--quiet"], extra].concat();
        cpu_recon(input, &out, &args)
    };
    // Surplus bytes (2 of 90 angles given).
    fails_with(
        &recon(&raw, &["--raw-shape", "2,4,64"]),
        &["scan.raw", "too many"],
    );
    let o = recon(&raw, &["--raw-shape", "2,4,64", "--raw-allow-trailing"]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(&out).unwrap();
    assert!(recon(&raw, &["--raw-shape", "90,4,64"]).status.success());
    std::fs::remove_file(&out).unwrap();
    // An .npy read as raw.
    let npy = d.join("p.npy");
    write_npy(&npy, &disc(90, 4, 64)).unwrap();
    fails_with(
        &recon(&npy, &["--raw-shape", "90,4,64"]),
        &["p.npy", ".npy magic"],
    );
    // A directory as raw input, an offset beyond the end.
    fails_with(&recon(d, &["--raw-shape", "90,4,64"]), &["is a directory"]);
    fails_with(
        &recon(
            &raw,
            &[
                "--raw-shape",
                "90,4,64",
                "--raw-offset",
                "18446744073709551615",
            ],
        ),
        &["beyond the end of the file"],
    );
    assert!(!out.exists());
}

#[test]
fn centre_finding_on_bad_requests_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("p.npy");
    write_npy(&p, &disc(90, 2, 64)).unwrap();
    let png = d.join("c.png");
    let center = |input: &Path, extra: &[&str]| {
        let mut args = vec!["--quiet", "center", s(input), "--png", s(&png)];
        args.extend_from_slice(extra);
        run(&args)
    };
    // Was a panic (index out of bounds).
    fails_with(
        &center(&p, &["--smin", "100", "--smax", "-100"]),
        &["smin 100 must be below smax -100"],
    );
    fails_with(&center(&p, &["--strip-half", "100000"]), &["--strip-half"]);
    // No information: constant data, a 90° scan.
    let c = d.join("const.npy");
    write_npy(&c, &Array3::<f32>::from_elem((90, 2, 64), 1.0)).unwrap();
    fails_with(&center(&c, &[]), &["const.npy", "constant"]);
    fails_with(&center(&p, &["--angle-range", "90"]), &["p.npy", "180°"]);
    // NaN data: the file is named.
    let nan = d.join("nan.npy");
    let mut nd = disc(90, 2, 64);
    nd[[10, 1, 30]] = f32::NAN;
    write_npy(&nan, &nd).unwrap();
    fails_with(&center(&nan, &[]), &["nan.npy", "NaN"]);
    let out = d.join("v.npy");
    let o = cpu_recon(&c, &out, &["--quiet", "--center", "auto"]);
    fails_with(&o, &["const.npy", "constant"]);
    assert!(!out.exists());
    assert!(!png.exists());
}

#[test]
fn sizes_beyond_the_memory_fail_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wide = d.join("wide.npy");
    write_npy(&wide, &Array3::<f32>::from_elem((2, 1, 1_000_000), 1.0)).unwrap();
    let out = d.join("v.npy");
    let o = cpu_recon(&wide, &out, &["--quiet", "--memory", "100T"]);
    fails_with(&o, &["wide.npy", "memory is available"]);
    assert!(!out.exists());
    let pd = d.join("ph");
    let o = run(&[
        "phantom",
        "--size",
        "100000",
        "--rows",
        "100000",
        "--out-dir",
        s(&pd),
    ]);
    fails_with(&o, &["memory is available"]);
    assert!(!pd.exists());
    let o = run(&["bench", "--backend", "cpu", "--sizes", "1000000"]);
    fails_with(&o, &["size 1000000", "memory is available"]);
    // TOMORS_AVAILABLE_MEMORY stands for a smaller machine.
    let p = d.join("p.npy");
    write_npy(&p, &disc(90, 8, 256)).unwrap();
    let o = tomors()
        .args([
            "--quiet",
            "recon",
            s(&p),
            "--out",
            s(&out),
            "--backend",
            "cpu",
        ])
        .env("TOMORS_AVAILABLE_MEMORY", "1M")
        .output()
        .unwrap();
    fails_with(&o, &["p.npy", "only 1.0 MiB of memory is available"]);
}

/// A 1-bit (bilevel) TIFF of 8 × 2 pixels, written byte by byte.
fn one_bit_tiff(path: &Path) {
    let mut b: Vec<u8> = b"II*\0".to_vec();
    b.extend_from_slice(&8u32.to_le_bytes()); // IFD at 8
    let entries: [(u16, u16, u32, u32); 9] = [
        (256, 3, 1, 8), // width
        (257, 3, 1, 2), // height
        (258, 3, 1, 1), // bits per sample
        (259, 3, 1, 1), // no compression
        (262, 3, 1, 1), // black is zero
        (273, 4, 1, 0), // strip offset (patched)
        (277, 3, 1, 1), // samples per pixel
        (278, 3, 1, 2), // rows per strip
        (279, 4, 1, 2), // strip byte count
    ];
    let data_at = 8 + 2 + entries.len() as u32 * 12 + 4;
    b.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    for (tag, typ, count, value) in entries {
        let value = if tag == 273 { data_at } else { value };
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&typ.to_le_bytes());
        b.extend_from_slice(&count.to_le_bytes());
        if typ == 3 {
            b.extend_from_slice(&(value as u16).to_le_bytes());
            b.extend_from_slice(&[0, 0]);
        } else {
            b.extend_from_slice(&value.to_le_bytes());
        }
    }
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&[0b1010_1010, 0b0101_0101]);
    std::fs::write(path, b).unwrap();
}

#[test]
fn messages_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // An external link to a missing file names that file.
    let main = d.join("main.h5");
    {
        let f = hdf5::File::create(&main).unwrap();
        let g = f.create_group("entry").unwrap();
        g.create_group("instrument").unwrap();
        f.link_external("missing_frames.h5", "/data", "/entry/instrument/detector")
            .unwrap();
    }
    let o = run(&["info", s(&main)]);
    fails_with(&o, &["main.h5", "missing_frames.h5"]);
    let out = d.join("v.npy");
    let o = cpu_recon(&main, &out, &["--quiet"]);
    fails_with(&o, &["main.h5", "missing_frames.h5"]);
    // A 1-bit TIFF.
    let t = d.join("bits.tif");
    one_bit_tiff(&t);
    let o = cpu_recon(&t, &out, &["--quiet"]);
    fails_with(&o, &["bits.tif", "bit depth 1"]);
    // info fails on files it cannot read as a scan.
    let h = d.join("empty.h5");
    hdf5::File::create(&h)
        .unwrap()
        .create_group("nothing")
        .unwrap();
    let o = run(&["info", s(&h)]);
    fails_with(&o, &["empty.h5"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("datasets"));
    assert!(!out.exists());
}
