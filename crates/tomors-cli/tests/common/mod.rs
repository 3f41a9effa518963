//! Helpers of the CLI tests: the binary under test, running it, the
//! reconstruction error inside the central disc, the peak memory of one
//! run, and the Paganin options.
#![allow(dead_code)]

use std::process::{Command, Output};

use ndarray::Array3;

/// The binary under test: `TOMORS_BIN` when set (a copy run elsewhere,
/// e.g. on a GPU machine), else the one cargo built.
pub fn tomors() -> Command {
    Command::new(
        std::env::var("TOMORS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tomors").into()),
    )
}

/// `tomors --quiet ARGS…`, run to its end.
pub fn run(args: &[&str]) -> Output {
    tomors().arg("--quiet").args(args).output().unwrap()
}

/// Asserts that the command succeeded (its stderr if not).
pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// NRMSE of slice 0 inside the central disc (radius 0.45 of the size),
/// normalised by the truth's range there.
pub fn nrmse(recon: &Array3<f32>, truth: &Array3<f32>) -> f64 {
    let (_, ny, nx) = truth.dim();
    let (cy, cx) = ((ny as f64 - 1.0) / 2.0, (nx as f64 - 1.0) / 2.0);
    let r = 0.45 * ny.min(nx) as f64;
    let (mut se, mut count, mut lo, mut hi) = (0.0, 0usize, f64::INFINITY, f64::NEG_INFINITY);
    for ((_, y, x), &t) in truth.indexed_iter() {
        if (y as f64 - cy).powi(2) + (x as f64 - cx).powi(2) <= r * r {
            let d = recon[[0, y, x]] as f64 - t as f64;
            se += d * d;
            count += 1;
            lo = lo.min(t as f64);
            hi = hi.max(t as f64);
        }
    }
    (se / count as f64).sqrt() / (hi - lo)
}

/// The Paganin phase retrieval options of the tests (δ/β 100, 20 keV,
/// 100 mm, 1 µm pixels).
pub const PAGANIN: [&str; 10] = [
    "--retrieve-phase",
    "paganin",
    "--delta-beta",
    "100",
    "--energy",
    "20",
    "--distance",
    "100",
    "--detector-pixel",
    "1",
];

/// Runs `cmd` to its end and returns whether it succeeded, its standard
/// error and its own peak resident memory in bytes (`wait4` on this child
/// alone: `RUSAGE_CHILDREN` would also count whatever else the test process
/// forked and waited for).
#[cfg(target_os = "linux")]
pub fn run_measured(cmd: &mut Command) -> (bool, String, u64) {
    let err = tempfile::NamedTempFile::new().unwrap();
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(err.reopen().unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 reaps our own child and fills the zeroed rusage.
    let rss = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::wait4(pid, &mut status, 0, &mut u), pid);
        u.ru_maxrss as u64 * 1024
    };
    std::mem::forget(child);
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (
        ok,
        std::fs::read_to_string(err.path()).unwrap_or_default(),
        rss,
    )
}
