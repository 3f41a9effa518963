//! No flag of `tomors recon` is dropped silently: every flag × method
//! (FBP, SIRT, cone FDK, cone SIRT) either runs (exit 0, a volume written)
//! or fails with one error line naming the flag and writes nothing; and
//! every method reads every input kind (.npy, HDF5, TIFF stack, raw)
//! through the same readers and preprocessing.

mod common;

use std::path::{Path, PathBuf};

use common::{tomors, PAGANIN};
use ndarray::{Array1, Array3};

/// 24 projections of 8 rows × 16 columns: counts of a smooth object under
/// flats of 1000 and darks of 10, so −log of the normalised data is a
/// plausible sinogram for every method.
const SHAPE: (usize, usize, usize) = (24, 8, 16);

fn counts() -> Array3<f32> {
    Array3::from_shape_fn(SHAPE, |(a, r, c)| {
        let x = (c as f32 - 7.5 + (a as f32 * 0.26).sin()) / 6.0;
        let t = (1.0 - x * x).max(0.0).sqrt() * (1.0 + 0.05 * r as f32);
        // Whole counts, as a detector gives them (and 16-bit TIFF stores).
        (10.0 + 990.0 * (-0.8 * t).exp()).round()
    })
}

struct Data {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    npy: PathBuf,
    h5: PathBuf,
    tiff: PathBuf,
    raw: PathBuf,
    flats: PathBuf,
    darks: PathBuf,
    angles: PathBuf,
}

fn data() -> Data {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let p = counts();
    let (na, nr, nc) = SHAPE;
    let npy = dir.join("proj.npy");
    ndarray_npy::write_npy(&npy, &p).unwrap();
    let flats = dir.join("flats.npy");
    ndarray_npy::write_npy(&flats, &Array3::<f32>::from_elem((2, nr, nc), 1000.0)).unwrap();
    let darks = dir.join("darks.npy");
    ndarray_npy::write_npy(&darks, &Array3::<f32>::from_elem((2, nr, nc), 10.0)).unwrap();
    let angles = dir.join("angles.npy");
    let a = Array1::from_shape_fn(na, |i| i as f32 * 2.0 * std::f32::consts::PI / na as f32);
    ndarray_npy::write_npy(&angles, &a).unwrap();
    // DXchange HDF5 with its own flats, darks and angles (degrees, 360°).
    let h5 = dir.join("scan.h5");
    {
        let f = tomors_io::hdf5::File::create(&h5).unwrap();
        let g = f.create_group("exchange").unwrap();
        g.new_dataset_builder()
            .with_data(&p)
            .create("data")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<f32>::from_elem((2, nr, nc), 1000.0))
            .create("data_white")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::<f32>::from_elem((2, nr, nc), 10.0))
            .create("data_dark")
            .unwrap();
        g.new_dataset_builder()
            .with_data(&Array1::from_shape_fn(na, |i| i as f64 * 360.0 / na as f64))
            .create("theta")
            .unwrap();
    }
    let tiff = dir.join("tiffs");
    std::fs::create_dir(&tiff).unwrap();
    for (i, img) in p.outer_iter().enumerate() {
        let img = img.mapv(|v| v.round() as u16);
        tomors_io::tiffio::write_image_u16(&tiff.join(format!("p_{i}.tif")), img.view()).unwrap();
    }
    let raw = dir.join("proj.raw");
    let bytes: Vec<u8> = p.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&raw, bytes).unwrap();
    Data {
        _dir: tmp,
        dir,
        npy,
        h5,
        tiff,
        raw,
        flats,
        darks,
        angles,
    }
}

/// The four methods: their flags.
const CONE: [&str; 8] = [
    "--geometry",
    "cone",
    "--sod",
    "200",
    "--odd",
    "200",
    "--pixel-size",
    "2",
];
const SIRT: [&str; 2] = ["--algorithm", "sirt"];

const FOURIER: [&str; 2] = ["--method", "fourier"];

fn routes() -> [(&'static str, Vec<&'static str>); 5] {
    [
        ("fbp", vec![]),
        ("sirt", SIRT.to_vec()),
        ("fdk", CONE.to_vec()),
        ("cone-sirt", [&CONE[..], &SIRT[..]].concat()),
        ("fourier", FOURIER.to_vec()),
    ]
}

/// Runs recon on `input` with `args`; `Ok(())` when it wrote `out`, or
/// `Err(the one error line)`; panics on anything else (several lines, an
/// output left by a failed run, success without an output).
fn recon(input: &Path, args: &[String], out: &Path) -> Result<(), String> {
    let o = tomors()
        .arg("--quiet")
        .arg("recon")
        .arg(input)
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if o.status.success() {
        assert!(out.exists(), "{args:?}: exit 0 without {}", out.display());
        remove(out);
        Ok(())
    } else {
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(
            lines.len(),
            1,
            "{args:?}: expected one error line, got {err}"
        );
        assert!(lines[0].starts_with("error: "), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}: failed but left {}", out.display());
        Err(lines[0].to_string())
    }
}

fn remove(p: &Path) {
    if p.is_dir() {
        std::fs::remove_dir_all(p).unwrap();
    } else {
        std::fs::remove_file(p).unwrap();
    }
}

/// What a flag does on each route (fbp, sirt, fdk, cone-sirt, fourier): `true`
/// runs, `false` is refused with an error naming `needle`.
struct Case {
    flags: Vec<String>,
    needle: String,
    ok: [bool; 5],
}

fn case(flags: &[&str], ok: [bool; 5]) -> Case {
    Case {
        flags: flags.iter().map(|s| s.to_string()).collect(),
        needle: flags[0].to_string(),
        ok,
    }
}

const ALL: [bool; 5] = [true; 5];
const NONE: [bool; 5] = [false; 5];
const PARALLEL: [bool; 5] = [true, true, false, false, true];
const FILTERED: [bool; 5] = [true, false, true, false, true];
/// Back-projection flags: FBP and FDK, not the fourier method.
const BACKPROJECTED: [bool; 5] = [true, false, true, false, false];
const ITERATIVE: [bool; 5] = [false, true, false, true, false];
const FBP: [bool; 5] = [true, false, false, false, true];
const DIRECT: [bool; 5] = [true, false, false, false, false];

#[test]
fn every_flag_on_every_method_runs_or_names_the_flag() {
    let d = data();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (angles, flats, darks) = (s(&d.angles), s(&d.flats), s(&d.darks));
    let cases = vec![
        case(&["--angles", &angles], ALL),
        case(&["--angles", &angles, "--angles-unit", "rad"], ALL),
        case(&["--angles-unit", "deg"], NONE), // .npy stores no angles
        case(&["--angle-range", "360"], ALL),
        case(&["--angle-range", "0"], NONE),
        case(&["--center", "7.5"], PARALLEL),
        case(&["--center", "auto"], PARALLEL),
        case(&["--center", "auto", "--center-row", "3"], PARALLEL),
        case(&["--center-row", "3"], NONE),
        case(&["--center-range", "2:14", "--center", "auto"], PARALLEL),
        case(&["--center-range", "2:14"], NONE), // needs --center auto
        case(
            &[
                "--half-acquisition",
                "--angle-range",
                "360",
                "--center",
                "3",
            ],
            PARALLEL,
        ),
        case(&["--half-acquisition", "--angle-range", "360"], PARALLEL),
        case(&["--half-acquisition"], NONE), // 180°: not a 360° scan
        case(&["--half-acquisition", "--center", "3:4"], NONE),
        case(&["--slices", "2:4"], PARALLEL),
        case(&["--slices", "2:"], PARALLEL),
        case(&["--filter", "hann"], FILTERED),
        case(&["--cutoff", "0.8"], FILTERED),
        case(&["--padding", "edge"], FILTERED),
        case(&["--interp", "linear"], BACKPROJECTED),
        case(&["--interp", "nearest"], DIRECT),
        case(&["--method", "fourier"], FBP),
        case(&["--method", "direct"], DIRECT),
        case(&["--method", "gridding-typo"], NONE),
        case(&["--slab", "4"], FBP),
        case(&["--raw-dtype", "f32"], NONE),
        case(&["--raw-endian", "little"], NONE),
        case(&["--raw-offset", "0"], NONE),
        case(&["--overwrite"], ALL),
        case(&["--data-path", "/exchange/data"], NONE),
        case(&["--image-key-path", "/keys"], NONE),
        case(&["--angles-path", "/exchange/theta"], NONE),
        case(&["--flats", &flats], ALL),
        case(&["--darks", &darks], ALL),
        case(&["--flats", &flats, "--flat-average", "median"], ALL),
        case(&["--flat-average", "median"], NONE), // no flats to average
        case(&["--no-flat-dark"], NONE),
        case(&["--flats", &flats, "--no-flat-dark"], ALL),
        case(&["--log", "always"], ALL),
        case(&["--zinger", "0.3"], ALL),
        case(&["--stripe", "5"], ALL),
        case(&["--stripe", "filtering:3,5"], ALL),
        case(&["--stripe", "large:3,5"], ALL),
        case(&["--stripe", "dead:3,5"], ALL),
        case(&["--stripe", "all:3,5,5"], ALL),
        case(&["--stripe", "fw:2,2"], ALL),
        case(&["--stripe", "fitting:2,10"], ALL),
        case(&["--stripe", "fitting:2,10,1"], NONE),
        case(&["--stripe", "fw:2,2,2"], NONE),
        case(&["--rotate-proj", "1.5"], ALL),
        case(&["--rotate-proj", "60"], NONE),
        case(
            &[&PAGANIN[..], &["--phase-pad", "4", "--flats", &flats]].concat(),
            ALL,
        ),
        // The .npy input has no flats to normalise by.
        case(&PAGANIN, NONE),
        case(&["--retrieve-phase", "paganin", "--flats", &flats], NONE),
        case(&["--delta-beta", "100"], NONE),
        case(&["--energy", "20"], NONE),
        case(&["--distance", "100"], NONE),
        case(&["--detector-pixel", "1"], NONE),
        case(&["--phase-pad", "4"], NONE),
        case(&["--center", "7:8"], PARALLEL),
        case(&["--cols", "2:14"], PARALLEL),
        case(&["--projections", "0:24:2"], PARALLEL),
        case(&["--projections", "0:40"], NONE),
        case(&["--binning", "2,2"], PARALLEL),
        case(&["--bin-angles", "2"], PARALLEL),
        case(&["--memory", "1G"], ALL),
        case(&["--memory", "1M"], NONE),
        case(&["--tiff-bits", "16"], NONE), // .npy output
        case(&["--tiff-range", "0:1"], NONE),
        case(&["--devices", "0"], NONE), // --backend cpu
        case(&["--kernel", "standard"], NONE),
        case(&["--sod", "200"], NONE),
        case(&["--odd", "200"], NONE),
        case(&["--pixel-size", "2"], NONE),
        case(
            &["--principal-point", "8,4"],
            [false, false, true, true, false],
        ),
        case(&["--voxel-size", "0.5"], [false, false, true, true, false]),
        case(&["--short-scan"], [false, false, true, true, false]),
        case(&["--iterations", "3"], ITERATIVE),
        case(&["--relaxation", "0.5"], ITERATIVE),
        case(&["--projector", "line"], ITERATIVE),
        case(&["--min", "0"], ITERATIVE),
        case(&["--max", "10"], ITERATIVE),
        case(&["--tolerance", "1e-3"], ITERATIVE),
        case(&["--block-size", "2"], NONE), // sirt takes no blocks
        case(&["--random-order"], NONE),    // art only
        case(&["--deterministic"], NONE),   // GPU only (cone iterative, fourier)
    ];
    let out = d.dir.join("v.npy");
    let mut failures = Vec::new();
    let mut runs = 0;
    for c in &cases {
        for ((name, route), ok) in routes().iter().zip(c.ok) {
            if route.contains(&c.needle.as_str()) {
                continue; // the route gives this flag itself
            }
            let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
            args.extend(c.flags.iter().cloned());
            args.extend(["--backend".into(), "cpu".into()]);
            runs += 1;
            match (recon(&d.npy, &args, &out), ok) {
                (Ok(()), true) => {}
                (Err(line), false) if line.contains(&c.needle) => {}
                (got, _) => failures.push(format!(
                    "{name} {:?}: expected {}, got {got:?}",
                    c.flags,
                    if ok { "a run" } else { "a refusal" }
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} runs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every method reads every input kind, and the flags that belong to
/// another kind of input are refused with their name.
#[test]
fn every_method_reads_every_input_kind() {
    let d = data();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let raw_shape = format!("{},{},{}", SHAPE.0, SHAPE.1, SHAPE.2);
    let flats_darks = vec![
        "--flats".to_string(),
        s(&d.flats),
        "--darks".into(),
        s(&d.darks),
    ];
    let inputs: Vec<(&str, PathBuf, Vec<String>)> = vec![
        ("npy", d.npy.clone(), flats_darks.clone()),
        ("hdf5", d.h5.clone(), vec![]),
        ("tiff", d.tiff.clone(), flats_darks.clone()),
        (
            "raw",
            d.raw.clone(),
            [
                vec![
                    "--raw-shape".to_string(),
                    raw_shape.clone(),
                    "--raw-dtype".into(),
                    "f32".into(),
                ],
                flats_darks.clone(),
            ]
            .concat(),
        ),
    ];
    let out = d.dir.join("v.npy");
    let mut volumes = Vec::new();
    for (name, route) in routes() {
        for (kind, input, extra) in &inputs {
            let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
            args.extend(extra.iter().cloned());
            args.extend(["--backend".into(), "cpu".into(), "--overwrite".into()]);
            let o = tomors()
                .arg("--quiet")
                .arg("recon")
                .arg(input)
                .args(&args)
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{name} on {kind}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let v: Array3<f32> = ndarray_npy::read_npy(&out).unwrap();
            assert!(v.iter().all(|x| x.is_finite()), "{name} on {kind}");
            volumes.push((name, *kind, v));
        }
    }
    remove(&out);
    // The same counts, flats and darks through three readers give the
    // same volume, bit for bit.
    for (name, _) in routes() {
        let of = |k: &str| {
            &volumes
                .iter()
                .find(|(n, kk, _)| *n == name && *kk == k)
                .unwrap()
                .2
        };
        assert_eq!(of("raw"), of("npy"), "{name}: raw vs npy");
        assert_eq!(of("tiff"), of("npy"), "{name}: TIFF vs npy");
    }

    // Flags of another kind of input name themselves.
    let refused: Vec<(PathBuf, Vec<String>, &str)> = vec![
        (d.h5.clone(), flats_darks[..2].to_vec(), "--flats"),
        (d.h5.clone(), flats_darks[2..].to_vec(), "--darks"),
        (
            d.h5.clone(),
            vec!["--angle-range".into(), "180".into()],
            "--angle-range",
        ),
        (
            d.tiff.clone(),
            vec!["--data-path".into(), "/x".into()],
            "--data-path",
        ),
        (
            d.npy.clone(),
            vec!["--angles-path".into(), "/x".into()],
            "--angles-path",
        ),
        (
            d.tiff.clone(),
            vec!["--angles-unit".into(), "deg".into()],
            "--angles-unit",
        ),
    ];
    for (input, flags, needle) in refused {
        for (name, route) in routes() {
            let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
            args.extend(flags.iter().cloned());
            args.extend(["--backend".into(), "cpu".into()]);
            let e = recon(&input, &args, &out).expect_err(&format!("{name} {flags:?} ran"));
            assert!(e.contains(needle), "{name} {flags:?}: {e}");
        }
    }
    // Accepted on HDF5: its dataset paths and the unit of its angles.
    for flags in [
        vec![
            "--data-path",
            "/exchange/data",
            "--angles-path",
            "/exchange/theta",
        ],
        vec![
            "--angles-unit",
            "deg",
            "--flat-average",
            "median",
            "--no-flat-dark",
        ],
    ] {
        for (name, route) in routes() {
            let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
            args.extend(flags.iter().map(|s| s.to_string()));
            args.extend(["--backend".into(), "cpu".into()]);
            assert_eq!(recon(&d.h5, &args, &out), Ok(()), "{name} {flags:?}");
        }
    }
}

/// Flags given to the TIFF-stack output, and GPU flags under `auto`.
#[test]
fn output_and_backend_flags() {
    let d = data();
    let stack = d.dir.join("stack");
    for (name, route) in routes() {
        let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
        args.extend(
            [
                "--tiff-bits",
                "16",
                "--tiff-range",
                "0:1",
                "--backend",
                "cpu",
            ]
            .map(String::from),
        );
        assert_eq!(recon(&d.npy, &args, &stack), Ok(()), "{name}");
        // --kernel: FBP only; under auto it is used when a GPU is, and the
        // CPU runs otherwise (with a log line saying why).
        let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
        args.extend(["--kernel", "standard", "--backend", "auto"].map(String::from));
        let r = recon(&d.npy, &args, &d.dir.join("k.npy"));
        if name == "fbp" {
            assert_eq!(r, Ok(()), "{name}");
        } else {
            assert!(r.unwrap_err().contains("--kernel"), "{name}");
        }
        // --devices: every route takes it under auto (FBP and FDK share the
        // listed GPUs, the iterative methods use them as they can; no GPU:
        // the CPU, with a log line saying why).
        let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
        args.extend(["--devices", "0", "--backend", "auto"].map(String::from));
        let r = recon(&d.npy, &args, &d.dir.join("dev.npy"));
        assert_eq!(r, Ok(()), "{name} --devices 0");
        // --deterministic: cone-beam iterative methods and the fourier
        // method on the GPU only (under auto without a GPU the CPU runs,
        // deterministic anyway); refused on the other routes and with the
        // voxel projector.
        let mut args: Vec<String> = route.iter().map(|s| s.to_string()).collect();
        args.extend(["--deterministic", "--backend", "auto"].map(String::from));
        let r = recon(&d.npy, &args, &d.dir.join("det.npy"));
        if name == "fourier" {
            assert_eq!(r, Ok(()), "{name}");
        } else if name == "cone-sirt" {
            assert_eq!(r, Ok(()), "{name}");
            args.extend(["--projector", "voxel"].map(String::from));
            let r = recon(&d.npy, &args, &d.dir.join("det.npy"));
            assert!(r.unwrap_err().contains("--deterministic"), "{name} voxel");
        } else {
            assert!(r.unwrap_err().contains("--deterministic"), "{name}");
        }
    }
}
