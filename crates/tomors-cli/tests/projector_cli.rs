//! `--projector zero-one|strip` from the command line: parallel-beam
//! iterative reconstructions with the thesis' 0–1 and strip-area models
//! beat FBP on sparse data; cone beam rejects them with one error line and
//! writes nothing.

mod common;

use std::path::Path;

use common::{arg as path, fbp_nrmse, iterative_nrmse, ok, run, sparse_phantom};
use ndarray::Array3;
use ndarray_npy::read_npy;

#[test]
fn zero_one_and_strip_reconstruct_parallel_beam() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| path(dir.path(), name);
    sparse_phantom(dir.path());
    let truth: Array3<f32> = read_npy(d("phantom.npy")).unwrap();
    let fbp = fbp_nrmse(dir.path(), &truth);
    for projector in ["zero-one", "strip"] {
        let e = iterative_nrmse(
            dir.path(),
            &format!("{projector}.npy"),
            ("sart", projector, "4"),
            &[],
            &truth,
        );
        println!("sart ({projector}, 4 sweeps): NRMSE {e:.4}, FBP {fbp:.4}");
        assert!(e < fbp, "{projector}: {e} vs FBP {fbp}");
    }
}

#[test]
fn cone_beam_rejects_the_parallel_only_projectors() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| path(dir.path(), name);
    let geometry = [
        "--geometry",
        "cone",
        "--sod",
        "200",
        "--odd",
        "200",
        "--pixel-size",
        "2",
    ];
    let mut args = vec!["phantom", "--size", "16", "--angles", "8"];
    args.extend(geometry);
    let out_dir = d("");
    args.extend(["--out-dir", &out_dir]);
    ok(&run(&args));
    let target = d("bad.npy");
    for projector in ["zero-one", "strip"] {
        for backend in ["cpu", "auto", "cuda"] {
            let projections = d("projections.npy");
            let angles = d("angles.npy");
            let mut args = vec!["recon", &projections, "--angles", &angles];
            args.extend(geometry);
            args.extend([
                "--algorithm",
                "sirt",
                "--projector",
                projector,
                "--backend",
                backend,
                "--out",
                &target,
            ]);
            let result = run(&args);
            let stderr = String::from_utf8_lossy(&result.stderr);
            assert!(!result.status.success(), "{projector} {backend} succeeded");
            let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{projector} {backend}: {stderr}");
            assert!(
                lines[0].starts_with("error: ")
                    && lines[0].contains(projector)
                    && lines[0].contains("parallel beam only"),
                "{projector} {backend}: {stderr}"
            );
            assert!(!Path::new(&target).exists(), "{projector} left an output");
        }
    }
}
