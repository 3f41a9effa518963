//! `tomors recon` on bad input: one clear error line, a non-zero exit, and
//! no output left behind. And the good path writes what it says.

use std::path::{Path, PathBuf};
use std::process::Command;

use ndarray::{Array1, Array3};
use ndarray_npy::write_npy;

fn tomors() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tomors"))
}

/// A small valid data set: 20 angles × 2 rows × 16 bins, and its angles.
fn dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let proj = Array3::from_shape_fn((20, 2, 16), |(a, r, c)| ((a + r + c) % 5) as f32);
    let angles = Array1::from_shape_fn(20, |i| i as f32 * std::f32::consts::PI / 20.0);
    let (p, a) = (dir.join("proj.npy"), dir.join("angles.npy"));
    write_npy(&p, &proj).unwrap();
    write_npy(&a, &angles).unwrap();
    (p, a)
}

/// Runs recon with `args`, expects failure with one error line containing
/// `needle`, and checks that nothing was written to the output directory.
fn expect_failure(dir: &Path, args: &[&str], needle: &str) {
    let out = dir.join("out");
    let before: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let result = tomors()
        .arg("--quiet")
        .arg("recon")
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("--backend")
        .arg("cpu")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "{args:?} succeeded");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: expected one line, got {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: '{}' lacks '{needle}'",
        lines[0]
    );
    let after: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before, after, "{args:?} left files behind");
    assert!(!out.exists());
}

#[test]
fn bad_inputs_fail_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (proj, angles) = dataset(dir);
    let p = proj.to_str().unwrap();

    // Angles that do not match the projections.
    let wrong = dir.join("wrong.npy");
    write_npy(&wrong, &Array1::<f32>::zeros(7)).unwrap();
    expect_failure(dir, &[p, "--angles", wrong.to_str().unwrap()], "wrong.npy");

    // Fewer than 2 angles.
    let one = dir.join("one.npy");
    write_npy(&one, &Array3::<f32>::ones((1, 1, 16))).unwrap();
    expect_failure(
        dir,
        &[one.to_str().unwrap()],
        "at least 2 projection angles",
    );

    // Empty and NaN-filled data.
    let empty = dir.join("empty.npy");
    write_npy(&empty, &Array3::<f32>::zeros((0, 1, 16))).unwrap();
    expect_failure(dir, &[empty.to_str().unwrap()], "empty");
    let nan = dir.join("nan.npy");
    write_npy(&nan, &Array3::<f32>::from_elem((10, 1, 16), f32::NAN)).unwrap();
    expect_failure(dir, &[nan.to_str().unwrap()], "non-finite");

    // A centre outside the detector.
    expect_failure(dir, &[p, "--center", "40"], "outside the detector");

    // A truncated .npy file, and one that is not .npy at all.
    let bytes = std::fs::read(&proj).unwrap();
    let truncated = dir.join("truncated.npy");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    expect_failure(dir, &[truncated.to_str().unwrap()], "truncated.npy");
    let garbage = dir.join("garbage.npy");
    std::fs::write(&garbage, b"this is not an npy file").unwrap();
    expect_failure(dir, &[garbage.to_str().unwrap()], "garbage.npy");

    // A missing file, a raw file of the wrong size, rows outside the detector.
    expect_failure(dir, &["missing.npy"], "missing.npy");
    expect_failure(dir, &[p, "--raw-shape", "20,2,17"], "proj.npy");
    expect_failure(dir, &[p, "--slices", "1:5"], "--slices");
    expect_failure(dir, &[p, "--cutoff", "1.5"], "cutoff");

    // The good path still works after all that.
    let out = dir.join("good.npy");
    let status = tomors()
        .args([
            "--quiet",
            "recon",
            p,
            "--angles",
            angles.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let volume: Array3<f32> = ndarray_npy::read_npy(&out).unwrap();
    assert_eq!(volume.dim(), (2, 16, 16));

    // An existing output is not replaced without --overwrite.
    let result = tomors()
        .args(["--quiet", "recon", p, "--backend", "cpu", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("already exists"));
}

#[test]
fn phantom_then_recon_writes_a_tiff_stack_that_matches_npy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ph = dir.join("ph");
    assert!(tomors()
        .args([
            "--quiet",
            "phantom",
            "--size",
            "32",
            "--angles",
            "48",
            "--rows",
            "3",
            "--out-dir"
        ])
        .arg(&ph)
        .status()
        .unwrap()
        .success());
    let proj = ph.join("projections.npy");
    let run = |out: &Path| {
        assert!(tomors()
            .args(["--quiet", "recon"])
            .arg(&proj)
            .args(["--angles"])
            .arg(ph.join("angles.npy"))
            .args(["--slices", "1:3", "--backend", "cpu", "--out"])
            .arg(out)
            .status()
            .unwrap()
            .success());
    };
    let (npy, tif) = (dir.join("v.npy"), dir.join("stack"));
    run(&npy);
    run(&tif);
    let volume: Array3<f32> = ndarray_npy::read_npy(&npy).unwrap();
    assert_eq!(volume.dim(), (2, 32, 32));
    let mut files: Vec<_> = std::fs::read_dir(&tif)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tif"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    for (z, f) in files.iter().enumerate() {
        let mut decoder = tiff::decoder::Decoder::new(std::fs::File::open(f).unwrap()).unwrap();
        assert_eq!(decoder.dimensions().unwrap(), (32, 32));
        let tiff::decoder::DecodingResult::F32(data) = decoder.read_image().unwrap() else {
            panic!("not float32");
        };
        let expected: Vec<f32> = volume
            .index_axis(ndarray::Axis(0), z)
            .iter()
            .copied()
            .collect();
        assert_eq!(data, expected);
    }
    // No temporary names remain.
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.contains("partial"), "{name}");
    }
}

/// `tomors tune`: bad sizes are one error line; an unreadable tuning file
/// (a directory) fails before any search and is left alone; without a GPU,
/// one error line and no tuning file; with one (and always under
/// `TOMORS_REQUIRE_GPU=1`), a tuning file.
#[test]
fn tune_fails_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let one_line = |args: &[&str], needle: &str| {
        let r = tomors().arg("tune").args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success(), "{args:?} succeeded");
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].contains(needle), "{args:?}: {stderr}");
    };
    one_line(&["--size", "10"], "--size must be at least 64");
    let dir = tmp.path().to_str().unwrap();
    one_line(&["--out", dir], "cannot read the tuning file");
    let file = tmp.path().join("tuning.tsv");
    let r = tomors()
        .arg("tune")
        .arg("--quick")
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    let gpu = match tomors_cuda::device_count() {
        Ok(n) if n > 0 => Ok(n),
        Ok(_) => Err("no CUDA device".to_string()),
        Err(e) => Err(e.to_string()),
    };
    match gpu {
        // A usable GPU: tuning must work and store its results.
        Ok(_) => {
            assert!(
                r.status.success(),
                "a GPU is usable but tune failed: {stderr}"
            );
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(!text.trim().is_empty(), "empty tuning file");
        }
        Err(why) => {
            if std::env::var("TOMORS_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("TOMORS_REQUIRE_GPU=1 but no GPU is usable: {why}");
            }
            assert!(!r.status.success(), "no GPU ({why}) but tune succeeded");
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{stderr}");
            assert!(lines[0].starts_with("error: "), "{stderr}");
            assert!(!file.exists());
        }
    }
}
