//! Outputs under abuse (issue 13, items 1–4 and 17): concurrent runs to one
//! output, `--overwrite` of things tomors did not write, outputs onto
//! inputs (by path, symbolic link or hard link), links as outputs, and
//! interrupts (SIGINT, SIGTERM, SIGHUP) mid-run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ndarray::{Array1, Array3};
use ndarray_npy::{read_npy, write_npy};

fn tomors() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tomors"))
}

/// Projections `[angle][row][col]` of a smooth object, scaled by `k`.
fn projections(na: usize, nr: usize, nc: usize, k: f32) -> Array3<f32> {
    Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        let x = (c as f32 - nc as f32 / 2.0) / nc as f32;
        let t = a as f32 / na as f32 * std::f32::consts::PI;
        k * (1.0 + 0.1 * r as f32) * (1.0 - (2.0 * x - 0.3 * t.cos()).powi(2)).max(0.0)
    })
}

fn recon(input: &Path, out: &Path, extra: &[&str]) -> Output {
    tomors()
        .args(["--quiet", "recon"])
        .arg(input)
        .arg("--out")
        .arg(out)
        .args(["--backend", "cpu"])
        .args(extra)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names in `dir` that look like temporaries.
fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".partial"))
        .collect()
}

fn one_error_line(o: &Output, needle: &str) {
    assert!(!o.status.success(), "succeeded: {}", stderr(o));
    let err = stderr(o);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line: {err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "'{}' lacks '{needle}'", lines[0]);
}

/// Reads an output of any of the three formats as one array.
fn read_output(p: &Path) -> Array3<f32> {
    match p.extension().and_then(|e| e.to_str()) {
        Some("npy") => read_npy(p).unwrap(),
        Some("h5") => tomors_io::writer::read_hdf5_volume(p).unwrap(),
        _ => {
            let mut names: Vec<PathBuf> = std::fs::read_dir(p)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|q| q.extension().is_some_and(|e| e == "tif"))
                .collect();
            names.sort();
            let slices: Vec<_> = names
                .iter()
                .map(|q| tomors_io::tiffio::read_image(q, 0).unwrap())
                .collect();
            let views: Vec<_> = slices.iter().map(|s| s.view()).collect();
            ndarray::stack(ndarray::Axis(0), &views).unwrap()
        }
    }
}

#[test]
fn concurrent_runs_to_one_output_each_win_whole_or_fail() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (a, b) = (d.join("a.npy"), d.join("b.npy"));
    write_npy(&a, &projections(90, 24, 64, 1.0)).unwrap();
    write_npy(&b, &projections(90, 24, 64, 2.0)).unwrap();
    for name in ["v.npy", "v.h5", "vdir"] {
        // References, one run each.
        let (ra, rb) = (d.join(format!("ra_{name}")), d.join(format!("rb_{name}")));
        assert!(recon(&a, &ra, &[]).status.success());
        assert!(recon(&b, &rb, &[]).status.success());
        let (va, vb) = (read_output(&ra), read_output(&rb));
        assert!((&va - &vb).iter().any(|x| x.abs() > 1e-3), "A and B differ");
        for overwrite in [false, true] {
            let out = d.join(name);
            let extra: Vec<&str> = if overwrite {
                vec!["--memory", "70M", "--overwrite"]
            } else {
                vec!["--memory", "70M"]
            };
            let spawn = |input: &Path| {
                tomors()
                    .args(["--quiet", "recon"])
                    .arg(input)
                    .arg("--out")
                    .arg(&out)
                    .args(["--backend", "cpu"])
                    .args(&extra)
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            };
            let (pa, pb) = (spawn(&a), spawn(&b));
            let (oa, ob) = (
                pa.wait_with_output().unwrap(),
                pb.wait_with_output().unwrap(),
            );
            let (sa, sb) = (oa.status.success(), ob.status.success());
            let got = read_output(&out);
            if overwrite {
                // Both may succeed; the output is one of them, whole.
                assert!(sa || sb, "{name}: {} / {}", stderr(&oa), stderr(&ob));
                assert!(got == va || got == vb, "{name}: a mix of two runs");
                if !(sa && sb) {
                    assert!(got == if sa { va.clone() } else { vb.clone() });
                }
            } else {
                assert!(
                    sa != sb,
                    "{name}: exactly one wins: {} / {}",
                    stderr(&oa),
                    stderr(&ob)
                );
                let (winner, loser) = if sa { (&va, &ob) } else { (&vb, &oa) };
                assert!(got == *winner, "{name}: the output is the winner's, whole");
                let e = stderr(loser);
                assert!(
                    e.contains("already exists") || e.contains("appeared while this run"),
                    "{name}: {e}"
                );
            }
            assert!(temporaries(d).is_empty(), "{name}: {:?}", temporaries(d));
            if !overwrite {
                // Leave it for the --overwrite round.
                continue;
            }
            let _ = std::fs::remove_file(&out);
            let _ = std::fs::remove_dir_all(&out);
        }
    }
}

#[test]
fn overwrite_replaces_only_what_tomors_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = d.join("data");
    std::fs::create_dir(&data).unwrap();
    let p = data.join("p.npy");
    write_npy(&p, &projections(30, 2, 32, 1.0)).unwrap();
    // A directory holding the input (issue: wiped it). Refused as holding
    // a file tomors did not write, or as containing the input.
    one_error_line(&recon(&p, &data, &["--overwrite"]), "p.npy");
    assert!(p.exists());
    // A directory with other content.
    let other = d.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "keep me").unwrap();
    one_error_line(&recon(&p, &other, &["--overwrite"]), "notes.txt");
    assert_eq!(
        std::fs::read_to_string(other.join("notes.txt")).unwrap(),
        "keep me"
    );
    // A directory of TIFF slices without the marker (not tomors's).
    let slices = d.join("slices");
    std::fs::create_dir(&slices).unwrap();
    std::fs::write(slices.join("slice_00000.tif"), "x").unwrap();
    one_error_line(&recon(&p, &slices, &["--overwrite"]), ".tomors-output");
    // A tomors TIFF stack is replaced, and carries the marker.
    let stack = d.join("stack");
    assert!(recon(&p, &stack, &[]).status.success());
    assert!(stack.join(".tomors-output").is_file());
    let o = recon(&p, &stack, &["--overwrite"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stack.join(".tomors-output").is_file());
    // A file of another kind under an output name.
    let fake = d.join("fake.npy");
    std::fs::write(&fake, "not a numpy file").unwrap();
    one_error_line(
        &recon(&p, &fake, &["--overwrite"]),
        "not in the output's format",
    );
    assert_eq!(std::fs::read_to_string(&fake).unwrap(), "not a numpy file");
    // A directory under a file output's name.
    let dir_npy = d.join("dir.npy");
    std::fs::create_dir(&dir_npy).unwrap();
    one_error_line(&recon(&p, &dir_npy, &["--overwrite"]), "is a directory");
    // An earlier .npy output is replaced.
    let v = d.join("v.npy");
    assert!(recon(&p, &v, &[]).status.success());
    one_error_line(&recon(&p, &v, &[]), "already exists");
    assert!(recon(&p, &v, &["--overwrite"]).status.success());
    assert!(temporaries(d).is_empty());
}

#[test]
fn outputs_onto_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("p.npy");
    let proj = projections(30, 2, 32, 1.0);
    write_npy(&p, &proj).unwrap();
    let angles = d.join("angles.npy");
    write_npy(&angles, &Array1::from_shape_fn(30, |i| i as f32 * 0.1)).unwrap();
    let before = std::fs::read(&p).unwrap();
    // The same path.
    one_error_line(&recon(&p, &p, &["--overwrite"]), "is an input");
    // A hard link to it.
    let hard = d.join("hard.npy");
    std::fs::hard_link(&p, &hard).unwrap();
    one_error_line(&recon(&p, &hard, &["--overwrite"]), "is an input");
    // The angles file.
    let a = angles.to_str().unwrap();
    one_error_line(
        &recon(&p, &angles, &["--angles", a, "--overwrite"]),
        "is an input",
    );
    // An HDF5 input.
    let h5 = d.join("t.h5");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tomors-io/tests/data/tooth.h5"),
        &h5,
    )
    .unwrap();
    let h5_before = std::fs::read(&h5).unwrap();
    one_error_line(
        &recon(&h5, &h5, &["--overwrite", "--slices", "0:1"]),
        "is an input",
    );
    assert_eq!(std::fs::read(&h5).unwrap(), h5_before);
    // Flats given as a separate file.
    let flats = d.join("flats.npy");
    write_npy(&flats, &Array3::<f32>::from_elem((2, 2, 32), 10.0)).unwrap();
    let f = flats.to_str().unwrap();
    one_error_line(
        &recon(&p, &flats, &["--flats", f, "--overwrite"]),
        "is an input",
    );
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert!(temporaries(d).is_empty());
}

#[cfg(unix)]
#[test]
fn symbolic_links_are_refused_as_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("p.npy");
    write_npy(&p, &projections(30, 2, 32, 1.0)).unwrap();
    // A link to the input.
    let link = d.join("link.npy");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    one_error_line(&recon(&p, &link, &["--overwrite"]), "symbolic link");
    // A link to an earlier output: neither replaced nor written through.
    let v = d.join("v.npy");
    assert!(recon(&p, &v, &[]).status.success());
    let v_before = std::fs::read(&v).unwrap();
    let vl = d.join("vl.npy");
    std::os::unix::fs::symlink(&v, &vl).unwrap();
    one_error_line(&recon(&p, &vl, &["--overwrite"]), "symbolic link");
    assert!(std::fs::symlink_metadata(&vl)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&v).unwrap(), v_before);
    // A dangling link.
    let dl = d.join("dangling.npy");
    std::os::unix::fs::symlink(d.join("nowhere.npy"), &dl).unwrap();
    one_error_line(&recon(&p, &dl, &[]), "symbolic link");
    assert!(!d.join("nowhere.npy").exists());
}

/// Starts a recon that streams many slabs, waits until its temporary
/// exists, sends `signal`, and checks the exit code and that nothing is left.
#[cfg(unix)]
fn interrupt(signal: &str, code: i32, out_name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let p = d.join("p.npy");
    write_npy(&p, &projections(360, 48, 256, 1.0)).unwrap();
    let out = d.join(out_name);
    let mut child = tomors()
        .args(["--quiet", "recon"])
        .arg(&p)
        .arg("--out")
        .arg(&out)
        .args(["--backend", "cpu", "--memory", "68M"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while temporaries(d).is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no temporary appeared"
        );
        if let Some(s) = child.try_wait().unwrap() {
            panic!("the run ended before it could be interrupted: {s}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let k = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    assert!(
        !out.exists(),
        "{signal}: the run finished before the signal arrived; make it longer"
    );
    assert_eq!(o.status.code(), Some(code), "{signal}: {}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(
        temporaries(d).is_empty(),
        "{signal}: {:?} left",
        temporaries(d)
    );
}

#[cfg(unix)]
#[test]
fn interrupts_remove_temporaries_and_exit_with_the_signal_code() {
    interrupt("-INT", 130, "v.npy");
    interrupt("-TERM", 143, "v.h5");
    interrupt("-HUP", 129, "vdir");
}
