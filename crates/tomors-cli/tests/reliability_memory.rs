//! `--memory` holds with HDF5 input and output (issue 13, item 15): the peak
//! resident memory of `tomors recon` stays within the budget (measured with
//! `wait4` on that child alone).

mod common;

use std::process::Command;

#[cfg(target_os = "linux")]
use common::run_measured;
use ndarray::{Array1, Array3};
use tomors_io::hdf5;

#[cfg(target_os = "linux")]
#[test]
fn peak_memory_stays_within_the_budget_with_hdf5_in_and_out() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("scan.h5");
    let (na, nr, nc) = (360, 160, 512);
    {
        let f = hdf5::File::create(&input).unwrap();
        let g = f.create_group("exchange").unwrap();
        g.new_dataset_builder()
            .with_data(&Array3::from_shape_fn((na, nr, nc), |(a, r, c)| {
                ((a * 7 + r * 3 + c) % 50) as f32 + 100.0
            }))
            .create("data")
            .unwrap();
        let theta = g
            .new_dataset_builder()
            .with_data(&Array1::from_shape_fn(na, |i| i as f64))
            .create("theta")
            .unwrap();
        let u: hdf5::types::VarLenUnicode = "degrees".parse().unwrap();
        theta
            .new_attr::<hdf5::types::VarLenUnicode>()
            .create("units")
            .unwrap()
            .write_scalar(&u)
            .unwrap();
    }
    let out = dir.path().join("v.h5");
    let budget = 200u64 << 20;
    let (ok, stderr, peak) = run_measured(
        Command::new(env!("CARGO_BIN_EXE_tomors"))
            .args(["--quiet", "recon"])
            .arg(&input)
            .arg("--out")
            .arg(&out)
            .args(["--backend", "cpu", "--memory", "200M"]),
    );
    assert!(ok, "{stderr}");
    eprintln!(
        "peak resident memory {:.1} MiB for a budget of {} MiB",
        peak as f64 / (1u64 << 20) as f64,
        budget >> 20
    );
    assert!(peak <= budget, "peak {peak} bytes over the budget {budget}");
}
