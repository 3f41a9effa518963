//! `--config`, the provenance every output records, `--config-from`, and the
//! NeXus / OME-Zarr / compressed HDF5 outputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ndarray::Array3;
use tomors_io::writer::{read_hdf5_volume, read_npy_volume};

fn tomors() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tomors"))
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The one-line error of a failed run.
fn err(out: Output) -> String {
    assert!(!out.status.success(), "the run should fail");
    let e = String::from_utf8_lossy(&out.stderr).trim().to_string();
    assert_eq!(e.lines().count(), 1, "one line: {e}");
    e
}

/// A small phantom scan in `dir` (parallel, or cone with `cone`).
fn phantom(dir: &Path, cone: bool) -> PathBuf {
    let mut c = tomors();
    c.args([
        "--quiet", "phantom", "--size", "32", "--rows", "4", "--angles", "48",
    ]);
    if cone {
        c.args([
            "--geometry",
            "cone",
            "--sod",
            "200",
            "--odd",
            "100",
            "--pixel-size",
            "2",
        ]);
    }
    ok(c.arg("--out-dir").arg(dir).output().unwrap());
    dir.join("projections.npy")
}

fn recon(args: &[&str], extra: &[&Path]) -> Output {
    let mut c = tomors();
    c.args(["--quiet", "recon"]).args(args);
    for p in extra {
        c.arg(p);
    }
    c.output().unwrap()
}

fn bits(a: &Array3<f32>) -> Vec<u32> {
    a.iter().map(|v| v.to_bits()).collect()
}

fn assert_rerun_identical(dir: &Path, input: &Path, flags: &[&str]) {
    let first = dir.join("first.h5");
    let again = dir.join("again.h5");
    let mut c = tomors();
    c.args(["--quiet", "recon"])
        .arg(input)
        .args(flags)
        .arg("--out")
        .arg(&first);
    ok(c.output().unwrap());
    let mut c = tomors();
    c.args(["--quiet", "recon", "--config-from"])
        .arg(&first)
        .arg("--out")
        .arg(&again);
    ok(c.output().unwrap());
    let (a, b) = (
        read_hdf5_volume(&first).unwrap(),
        read_hdf5_volume(&again).unwrap(),
    );
    assert_eq!(a.dim(), b.dim());
    assert_eq!(bits(&a), bits(&b), "{flags:?}: the re-run differs");
    // The record names the input absolutely and the method's options.
    let rec = tomors_io::provenance::read_config(&again).unwrap();
    let abs = std::path::absolute(input).unwrap();
    assert!(
        rec.contains(&format!("input = \"{}\"", abs.display())),
        "{rec}"
    );
    assert!(
        rec.contains("[[inputs]]") && rec.contains("blake3 = "),
        "{rec}"
    );
    for f in flags.iter().filter(|f| f.starts_with("--")) {
        assert!(
            rec.contains(&format!("{} = ", &f[2..])),
            "{f} not recorded: {rec}"
        );
    }
}

#[test]
fn config_from_repeats_fbp_sirt_and_cone_fdk_bit_for_bit() {
    let d = tempfile::tempdir().unwrap();
    let par = d.path().join("par");
    let cone = d.path().join("cone");
    std::fs::create_dir_all(&par).unwrap();
    std::fs::create_dir_all(&cone).unwrap();
    let p = phantom(&par, false);
    let c = phantom(&cone, true);
    let fbp = par.join("fbp");
    let sirt = par.join("sirt");
    let fdk = cone.join("fdk");
    for x in [&fbp, &sirt, &fdk] {
        std::fs::create_dir_all(x).unwrap();
    }
    assert_rerun_identical(
        &fbp,
        &p,
        &["--backend", "cpu", "--filter", "hann", "--center", "15.75"],
    );
    assert_rerun_identical(
        &sirt,
        &p,
        &[
            "--backend",
            "cpu",
            "--algorithm",
            "sirt",
            "--iterations",
            "5",
            "--min",
            "0",
        ],
    );
    assert_rerun_identical(
        &fdk,
        &c,
        &[
            "--backend",
            "cpu",
            "--geometry",
            "cone",
            "--sod",
            "200",
            "--odd",
            "100",
            "--pixel-size",
            "2",
            "--angle-range",
            "360",
        ],
    );
}

#[test]
fn config_file_flags_override_and_unknown_keys_fail() {
    let d = tempfile::tempdir().unwrap();
    let p = phantom(d.path(), false);
    let rec = d.path().join("rec.toml");
    std::fs::write(
        &rec,
        format!(
            "input = {:?}\nbackend = \"cpu\"\nfilter = \"hann\"\n[recon]\ncenter = 15.5\n",
            p.display().to_string()
        ),
    )
    .unwrap();
    // The same reconstruction from flags alone, with `filter`, into `out`.
    let by_flags = |filter: &str, out: &Path| {
        ok(recon(
            &[
                "--backend",
                "cpu",
                "--filter",
                filter,
                "--center",
                "15.5",
                "--out",
            ],
            &[out, &p],
        ));
    };
    let same_bits = |a: &Path, b: &Path| {
        assert_eq!(
            bits(&read_npy_volume(a).unwrap()),
            bits(&read_npy_volume(b).unwrap())
        );
    };
    // The file alone equals the same flags.
    let a = d.path().join("a.npy");
    let b = d.path().join("b.npy");
    ok(recon(&["--config"], &[&rec, Path::new("--out"), &a]));
    by_flags("hann", &b);
    same_bits(&a, &b);
    // A flag overrides the file; the record says so.
    let c = d.path().join("c.npy");
    let e = d.path().join("e.npy");
    ok(recon(
        &["--config"],
        &[&rec, Path::new("--filter=cosine"), Path::new("--out"), &c],
    ));
    by_flags("cosine", &e);
    same_bits(&c, &e);
    let side = std::fs::read_to_string(d.path().join("c.npy.tomors.toml")).unwrap();
    assert!(side.contains("filter = \"cosine\""), "{side}");
    assert!(side.contains("center = 15.5"), "{side}");
    // The recorded configuration is itself a --config file.
    let f = d.path().join("f.npy");
    ok(recon(
        &["--config"],
        &[&d.path().join("c.npy.tomors.toml"), Path::new("--out"), &f],
    ));
    same_bits(&c, &f);
    // A sidecar left without its volume is replaced; a foreign file at the
    // sidecar's name is not.
    std::fs::remove_file(&f).unwrap();
    ok(recon(
        &["--config"],
        &[&d.path().join("c.npy.tomors.toml"), Path::new("--out"), &f],
    ));
    let g = d.path().join("g.npy");
    std::fs::write(d.path().join("g.npy.tomors.toml"), "my notes\n").unwrap();
    let m = err(recon(&["--backend", "cpu", "--out"], &[&g, &p]));
    assert!(m.contains("g.npy.tomors.toml"), "{m}");
    assert!(!g.exists());
    // Unknown keys, bad values, missing files: one line naming the file.
    std::fs::write(&rec, "fliter = \"hann\"\n").unwrap();
    let m = err(recon(
        &["--config"],
        &[&rec, Path::new("--out"), &d.path().join("x.npy")],
    ));
    assert!(m.contains("rec.toml: unknown key 'fliter'"), "{m}");
    std::fs::write(
        &rec,
        format!("input = {:?}\nfilter = \"nope\"\n", p.display().to_string()),
    )
    .unwrap();
    let m = err(recon(
        &["--config"],
        &[&rec, Path::new("--out"), &d.path().join("x.npy")],
    ));
    assert!(m.contains("rec.toml") && m.contains("nope"), "{m}");
    let m = err(recon(
        &["--config"],
        &[
            &d.path().join("none.toml"),
            Path::new("--out"),
            &d.path().join("x.npy"),
        ],
    ));
    assert!(m.contains("none.toml"), "{m}");
    assert!(!d.path().join("x.npy").exists());
    // --config-from refuses an input that changed since.
    let mut bytes = std::fs::read(&p).unwrap();
    let n = bytes.len();
    bytes[n - 1] = bytes[n - 1].wrapping_add(1);
    std::fs::write(&p, &bytes).unwrap();
    let m = err(recon(
        &["--config-from"],
        &[&c, Path::new("--out"), &d.path().join("y.npy")],
    ));
    assert!(m.contains("changed since") && m.contains("c.npy"), "{m}");
    // An output without a record.
    let m = err(recon(
        &["--config-from"],
        &[&p, Path::new("--out"), &d.path().join("y.npy")],
    ));
    assert!(m.contains("no recorded tomors configuration"), "{m}");
}

#[test]
fn compressed_hdf5_reads_back_exactly_and_is_refused_elsewhere() {
    let d = tempfile::tempdir().unwrap();
    let p = phantom(d.path(), false);
    let plain = d.path().join("plain.h5");
    ok(recon(&["--backend", "cpu", "--out"], &[&plain, &p]));
    let want = bits(&read_hdf5_volume(&plain).unwrap());
    for (i, c) in ["deflate", "deflate:9", "lzf", "none"].iter().enumerate() {
        let out = d.path().join(format!("c{i}.h5"));
        ok(recon(
            &["--backend", "cpu", "--compression", c, "--out"],
            &[&out, &p],
        ));
        assert_eq!(bits(&read_hdf5_volume(&out).unwrap()), want, "{c}");
        let f = tomors_io::hdf5::File::open(&out).unwrap();
        let filters = f.dataset("volume").unwrap().filters();
        assert_eq!(filters.is_empty(), *c == "none", "{c}: {filters:?}");
    }
    let m = err(recon(
        &["--backend", "cpu", "--compression", "lzf", "--out"],
        &[&d.path().join("v.npy"), &p],
    ));
    assert!(
        m.contains("--compression lzf applies to HDF5 and NeXus"),
        "{m}"
    );
    let m = err(recon(
        &["--backend", "cpu", "--compression", "deflate:12", "--out"],
        &[&d.path().join("v.h5"), &p],
    ));
    assert!(m.contains("0–9"), "{m}");
}

/// Runs scripts/check_outputs.py; `false` (after printing why) when Python
/// or its packages are missing.
fn python_check(args: &[&str]) -> bool {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check_outputs.py");
    let out = match Command::new("python3").arg(&script).args(args).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("SKIP {args:?}: no python3 ({e})");
            return false;
        }
    };
    if out.status.code() == Some(77) {
        eprintln!(
            "SKIP {args:?}: {} (pip install zarr ome-zarr h5py)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return false;
    }
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

#[test]
fn nexus_and_ome_zarr_open_in_python_and_repeat() {
    let d = tempfile::tempdir().unwrap();
    // 130 pixels wide: a pyramid 130 → 65 → 33 (odd edges included).
    let mut c = tomors();
    c.args([
        "--quiet",
        "phantom",
        "--size",
        "130",
        "--rows",
        "5",
        "--angles",
        "40",
        "--out-dir",
    ]);
    ok(c.arg(d.path()).output().unwrap());
    let p = d.path().join("projections.npy");
    let nxs = d.path().join("v.nxs");
    let zarr = d.path().join("v.zarr");
    let h5 = d.path().join("v.h5");
    ok(recon(&["--backend", "cpu", "--out"], &[&h5, &p]));
    ok(recon(
        &["--backend", "cpu", "--compression", "deflate", "--out"],
        &[&nxs, &p],
    ));
    ok(recon(&["--backend", "cpu", "--out"], &[&zarr, &p]));
    let want = bits(&read_hdf5_volume(&h5).unwrap());
    // The NeXus signal holds the same volume.
    let f = tomors_io::hdf5::File::open(&nxs).unwrap();
    let v: Array3<f32> = f
        .dataset(tomors_io::nexus::VOLUME_PATH)
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(bits(&v), want);
    drop(f);
    // Both repeat from their records.
    let nxs2 = d.path().join("w.nxs");
    let zarr2 = d.path().join("w.zarr");
    ok(recon(
        &["--config-from"],
        &[&nxs, Path::new("--out"), &nxs2],
    ));
    ok(recon(
        &["--config-from"],
        &[&zarr, Path::new("--out"), &zarr2],
    ));
    let f = tomors_io::hdf5::File::open(&nxs2).unwrap();
    let v: Array3<f32> = f
        .dataset(tomors_io::nexus::VOLUME_PATH)
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(bits(&v), want);
    assert!(zarr.join(tomors_io::output::MARKER).is_file());
    assert!(tomors_io::writer::temporaries_of(&zarr).is_empty());
    // pixel_size of the FBP grid is 1 detector pixel here.
    let (n, s) = (nxs.to_str().unwrap(), zarr.to_str().unwrap());
    if python_check(&["nexus", n, "5", "130", "130"]) {
        python_check(&["zarr", s, "5", "130", "130", "1"]);
        let s2 = zarr2.to_str().unwrap();
        python_check(&["zarr", s2, "5", "130", "130", "1"]);
    }
    // An existing store is replaced only with --overwrite.
    let m = err(recon(&["--backend", "cpu", "--out"], &[&zarr, &p]));
    assert!(m.contains("already exists"), "{m}");
    ok(recon(
        &["--backend", "cpu", "--overwrite", "--out"],
        &[&zarr, &p],
    ));
}
