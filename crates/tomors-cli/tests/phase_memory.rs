//! `--memory` counts the Paganin phase retrieval's working set (issue 17):
//! smaller slabs under the same budget, and the peak resident memory of
//! `tomors recon` within it (measured with `wait4` on that child alone, in a
//! test binary of its own: a child spawned while another test of the same
//! process holds memory would count it).

mod common;

use std::process::Command;

#[cfg(target_os = "linux")]
use common::{run_measured, PAGANIN};
use ndarray::Array3;

/// The rows per slab the run chose, from its log line "… slab(s) of ≤ N
/// rows …".
fn slab_rows(stderr: &str) -> usize {
    let tail = stderr
        .split("slab(s) of ≤ ")
        .nth(1)
        .unwrap_or_else(|| panic!("no slab line in {stderr}"));
    tail.split_whitespace().next().unwrap().parse().unwrap()
}

/// `--memory` counts the Paganin phase retrieval's padded FFT buffers and
/// margin rows: under the same budget the run chooses smaller slabs with
/// `--retrieve-phase paganin` than without, and its peak resident memory
/// stays within the budget.
#[cfg(target_os = "linux")]
#[test]
fn phase_retrieval_chooses_smaller_slabs_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let (na, nr, nc) = (90, 64, 256);
    let input = dir.path().join("p.npy");
    ndarray_npy::write_npy(
        &input,
        &Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
            let x = (c as f32 - 127.5 + 20.0 * (a as f32 * 0.07).sin()) / 90.0;
            let t = (1.0 - x * x).max(0.0).sqrt() * (1.0 + 0.002 * r as f32);
            1000.0 * (-0.5 * t).exp()
        }),
    )
    .unwrap();
    let flats = dir.path().join("f.npy");
    ndarray_npy::write_npy(&flats, &Array3::<f32>::from_elem((2, nr, nc), 1000.0)).unwrap();
    let budget = 100u64 << 20;
    let run = |phase: bool, out: &str| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tomors"));
        c.arg("recon")
            .arg(&input)
            .arg("--flats")
            .arg(&flats)
            .arg("--out")
            .arg(dir.path().join(out))
            .args(["--backend", "cpu", "--memory", "100M"]);
        if phase {
            c.args(PAGANIN);
        }
        run_measured(&mut c)
    };
    let (ok, plain_err, plain_peak) = run(false, "a.npy");
    assert!(ok, "{plain_err}");
    eprintln!(
        "peak without phase retrieval {:.1} MiB",
        plain_peak as f64 / (1u64 << 20) as f64
    );
    let (ok, phase_err, peak) = run(true, "b.npy");
    assert!(ok, "{phase_err}");
    let (plain, phase) = (slab_rows(&plain_err), slab_rows(&phase_err));
    eprintln!(
        "rows per slab: {plain} without, {phase} with phase retrieval; peak {:.1} MiB of {} MiB",
        peak as f64 / (1u64 << 20) as f64,
        budget >> 20
    );
    assert!(
        phase < plain,
        "{phase} rows with phase retrieval, {plain} without"
    );
    assert!(peak <= budget, "peak {peak} bytes over the budget {budget}");
}
