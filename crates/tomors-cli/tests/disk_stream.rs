//! `tomors recon` file to file with the pipelined stream (issue 17, part 8):
//! the volume is bit-identical to the sequential stream's
//! (`TOMORS_STREAM=sequential`) with `--memory` forcing several slabs, on the
//! tooth scan and on a compressed, chunked DXchange file; the log states
//! the stage times; an error in a later slab leaves no output.

use std::path::{Path, PathBuf};
use std::process::Command;

use ndarray::{Array1, Array3};
use tomors_io::hdf5;

/// The tomors binary. Tests run in parallel threads: a child started while
/// another thread has an HDF5 file open inherits its descriptor and with it
/// the file's lock, which would make the next reader of that file fail to
/// lock it (as in `reliability_input.rs`).
fn tomors() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tomors"));
    c.env("HDF5_USE_FILE_LOCKING", "FALSE");
    c
}

fn tooth() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tomors-io/tests/data/tooth.h5")
}

/// Runs `tomors recon INPUT --out OUT --backend cpu ARGS` (sequential when
/// asked) and returns its standard error; panics when it fails.
fn recon(input: &Path, out: &Path, args: &[&str], sequential: bool) -> String {
    let mut c = tomors();
    c.arg("recon")
        .arg(input)
        .arg("--out")
        .arg(out)
        .args(["--backend", "cpu"])
        .args(args)
        .env_remove("TOMORS_STREAM");
    if sequential {
        c.env("TOMORS_STREAM", "sequential");
    }
    let o = c.output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "recon failed: {err}");
    err
}

fn same_bits(a: &Array3<f32>, b: &Array3<f32>) -> bool {
    a.shape() == b.shape() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Compares the pipelined and the sequential volume of `input` and checks
/// the log says `slabs` slabs and the stages.
fn compare(input: &Path, args: &[&str], slabs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("seq.npy"), dir.path().join("pipe.npy"));
    let log_a = recon(input, &a, args, true);
    let log_b = recon(input, &b, args, false);
    assert!(log_a.contains("sequential stream"), "{log_a}");
    assert!(log_b.contains("pipelined stream"), "{log_b}");
    for log in [&log_a, &log_b] {
        assert!(log.contains(&format!("in {slabs} slab(s)")), "{log}");
        for stage in ["read", "preprocess", "reconstruct", "write", "overlap"] {
            assert!(log.contains(stage), "no {stage} in {log}");
        }
    }
    let va: Array3<f32> = ndarray_npy::read_npy(&a).unwrap();
    let vb: Array3<f32> = ndarray_npy::read_npy(&b).unwrap();
    assert!(va.iter().any(|&v| v != 0.0));
    assert!(
        same_bits(&va, &vb),
        "{}: the volumes differ",
        input.display()
    );
}

#[test]
fn tooth_in_two_slabs_is_bit_identical_pipelined_and_sequential() {
    // 73 MiB: 64 MiB of overhead and one detector row (8.4 MB) per slab.
    compare(&tooth(), &["--memory", "73M"], 2);
}

/// A DXchange file of `nr` rows: uint16 projections in chunks of 8
/// projections × 4 rows, deflate; or, with `nan_row`, float32 projections
/// (contiguous) with a NaN in that row.
fn write_scan(path: &Path, nr: usize, nan_row: Option<usize>) {
    let (na, nc) = (90, 48);
    let p = Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
        let x = (c as f32 - 23.5) / 20.0;
        let y = (r as f32 - nr as f32 / 2.0) / nr as f32;
        let l = (1.0 - x * x - y * y).max(0.0) * (1.0 + 0.2 * ((a as f32) * 0.07 + x).sin());
        (3000.0 * (-l).exp() + 40.0).round()
    });
    let f = hdf5::File::create(path).unwrap();
    let g = f.create_group("exchange").unwrap();
    match nan_row {
        None => {
            g.new_dataset_builder()
                .with_data(&p.mapv(|v| v as u16))
                .chunk([8, 4, nc])
                .shuffle()
                .deflate(2)
                .create("data")
                .unwrap();
        }
        Some(r) => {
            let mut p = p;
            p[[na / 2, r, nc / 2]] = f32::NAN;
            g.new_dataset_builder()
                .with_data(&p)
                .create("data")
                .unwrap();
        }
    }
    g.new_dataset_builder()
        .with_data(&Array3::<u16>::from_elem((2, nr, nc), 3040))
        .create("data_white")
        .unwrap();
    g.new_dataset_builder()
        .with_data(&Array3::<u16>::from_elem((2, nr, nc), 40))
        .create("data_dark")
        .unwrap();
    g.new_dataset_builder()
        .with_data(&Array1::from_shape_fn(na, |i| i as f64 * 2.0))
        .create("theta")
        .unwrap();
}

#[test]
fn compressed_chunked_scan_in_several_slabs_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let scan = dir.path().join("scan.h5");
    write_scan(&scan, 30, None);
    // One row: 4·(4·90·48 + 90·padded + 2·4·48 + 3·48²) bytes, a few hundred
    // kB; 65 MiB leaves 1 MiB: a few rows per slab, cut at the chunks' 4 rows.
    let dir2 = tempfile::tempdir().unwrap();
    let out = dir2.path().join("v.npy");
    let log = recon(&scan, &out, &["--memory", "65M"], false);
    let slabs: usize = log
        .split(" slab(s)")
        .next()
        .and_then(|t| t.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no slab count in {log}"));
    assert!(slabs >= 3, "{log}");
    compare(&scan, &["--memory", "65M"], slabs);
    compare(&scan, &["--memory", "65M", "--slices", "3:27"], {
        // Rows 3..27 cut at multiples of the chunk rows: one more slab at most.
        let l = recon(
            &scan,
            &dir2.path().join("w.npy"),
            &["--memory", "65M", "--slices", "3:27"],
            true,
        );
        l.split(" slab(s)")
            .next()
            .and_then(|t| t.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap()
    });
}

#[test]
fn an_error_in_a_later_slab_stops_the_pipelined_run_without_output() {
    let dir = tempfile::tempdir().unwrap();
    let scan = dir.path().join("nan.h5");
    write_scan(&scan, 30, Some(25));
    let out = dir.path().join("v.h5");
    let o = tomors()
        .args(["-q", "recon"])
        .arg(&scan)
        .arg("--out")
        .arg(&out)
        .args(["--backend", "cpu", "--memory", "65M"])
        .env_remove("TOMORS_STREAM")
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("nan.h5") && lines[0].to_lowercase().contains("nan"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "nan.h5")
        .collect();
    assert!(left.is_empty(), "left {left:?}");
}
