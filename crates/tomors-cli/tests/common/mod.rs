//! Helpers of the CLI tests: the binary under test, running it, the
//! reconstruction error inside the central disc, the peak memory of one
//! run, and the Paganin options.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

use ndarray::{Array3, Ix3};
use ndarray_npy::read_npy;

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

/// `dir/name` as a string argument.
pub fn arg(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// The sparse problem of the iterative tests in `dir`: a 96² phantom from
/// 24 projections (`phantom.npy`, `projections.npy`, `angles.npy`).
pub fn sparse_phantom(dir: &Path) {
    ok(&run(&[
        "phantom",
        "--size",
        "96",
        "--angles",
        "24",
        "--out-dir",
        dir.to_str().unwrap(),
    ]));
}

/// The NRMSE against `truth` of the CPU FBP of the sparse problem in `dir`
/// (written to `fbp.npy`).
pub fn fbp_nrmse(dir: &Path, truth: &Array3<f32>) -> f64 {
    let d = |name: &str| arg(dir, name);
    ok(&run(&[
        "recon",
        &d("projections.npy"),
        "--angles",
        &d("angles.npy"),
        "--out",
        &d("fbp.npy"),
        "--backend",
        "cpu",
    ]));
    nrmse(&read_npy::<_, Array3<f32>>(d("fbp.npy")).unwrap(), truth)
}

/// The NRMSE against `truth` of `algorithm` with `projector` for
/// `iterations` (x ≥ 0, then the flags `extra`) on the sparse problem in
/// `dir`, written to `dir/name`; the volume must be one 96² slice,
/// non-negative.
pub fn iterative_nrmse(
    dir: &Path,
    name: &str,
    (algorithm, projector, iterations): (&str, &str, &str),
    extra: &[&str],
    truth: &Array3<f32>,
) -> f64 {
    let d = |name: &str| arg(dir, name);
    let out = d(name);
    let (projections, angles) = (d("projections.npy"), d("angles.npy"));
    let mut args = vec![
        "recon",
        &projections,
        "--angles",
        &angles,
        "--out",
        &out,
        "--algorithm",
        algorithm,
        "--projector",
        projector,
        "--iterations",
        iterations,
        "--min",
        "0",
    ];
    args.extend_from_slice(extra);
    let r = run(&args);
    assert!(
        r.status.success(),
        "{algorithm} {projector} {extra:?}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let x: ndarray::ArrayD<f32> = read_npy(&out).unwrap();
    let x = x.into_dimensionality::<Ix3>().unwrap();
    assert_eq!(x.dim(), (1, 96, 96));
    assert!(x.iter().all(|&v| v >= 0.0));
    nrmse(&x, truth)
}

/// Whether a GPU is usable; without one `false` after printing why `test`
/// is skipped (a failure under `TOMORS_REQUIRE_GPU=1`).
pub fn gpu_or_skip(test: &str) -> bool {
    match tomors_cuda::device_count() {
        Ok(_) => true,
        Err(e) if std::env::var("TOMORS_REQUIRE_GPU").is_ok_and(|v| v == "1") => {
            panic!("TOMORS_REQUIRE_GPU=1 but no GPU is usable: {e}")
        }
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            false
        }
    }
}
