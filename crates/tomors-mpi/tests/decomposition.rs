//! The distributed jobs with ranks as threads ([`ThreadComm`]), against the
//! single-process results: slab-decomposed FBP bit for bit (every output
//! format), the z-slab domain decomposition of cone-beam SIRT, Landweber
//! and BLOCK-IT within the summation-order bound, z-slab FDK.
//! (The same code under `mpirun -n 2`: tomors-cli/tests/mpi_cli.rs.)

mod common;

use std::path::Path;

use common::*;
use ndarray::{s, Array3, Axis};
use tomors_core::cone::{fdk, FdkOptions};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, projections_to_sinograms, FbpOptions};
use tomors_core::iterative::{
    cone_projector, reconstruct_cone, Algorithm, Constraint, IterativeOptions, ProjectorKind,
    Weighting,
};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_io::tiffio::TiffDepth;
use tomors_io::writer::{read_hdf5_volume, read_npy_volume};
use tomors_io::{Preprocess, VolumeFormat};
use tomors_mpi::cone::reconstruct_distributed;
use tomors_mpi::{run_job, Center, Method, ReconJob, ThreadComm};

fn fbp_job(input: &Path, out: &Path, format: VolumeFormat, center: Center) -> ReconJob {
    let source = tomors_io::open(input, &Default::default()).unwrap();
    let [na, nr, _] = source.shape();
    ReconJob {
        angles: source.angles().to_vec(),
        source,
        rows: 1..nr,
        preprocess: Preprocess::default(),
        out: out.to_path_buf(),
        format,
        overwrite: false,
        // Small budget: several slabs per rank.
        memory: (64 << 20) + 3 * 4 * 4 * na * 48,
        quiet: true,
        method: Method::Fbp {
            center,
            options: FbpOptions::default(),
            backend: Box::new(|_| Ok(Box::new(CpuBackend::new()))),
        },
        provenance: None,
    }
}

/// Single-process FBP of rows `1..` of `p`.
fn fbp_single(p: &Array3<f32>, center: Option<f32>) -> Array3<f32> {
    let (na, nr, nb) = p.dim();
    // The angles tomors-io gives an .npy file: [0, π) evenly, in f64.
    let angles: Vec<f32> = (0..na)
        .map(|i| (i as f64 * std::f64::consts::PI / na as f64) as f32)
        .collect();
    let mut g = ParallelGeometry::new(angles, nb).unwrap();
    if let Some(c) = center {
        g = g.with_center(c).unwrap();
    }
    let grid = SliceGrid::for_geometry(&g);
    let sino = projections_to_sinograms(p.view(), 1..nr).unwrap();
    fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &g,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap()
}

#[test]
fn slab_fbp_is_bit_identical_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = parallel_projections(60, 11, 48);
    let input = dir.path().join("proj.npy");
    write_npy(&input, &p);
    let single = fbp_single(&p, None);
    for ranks in [1, 2, 3] {
        let out = dir.path().join(format!("v{ranks}.npy"));
        let r = ThreadComm::run(ranks, |c| {
            run_job(c, || {
                Ok(fbp_job(&input, &out, VolumeFormat::Npy, Center::Default))
            })
        });
        assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
        let got = read_npy_volume(&out).unwrap();
        assert_eq!(got, single, "{ranks} ranks");
        // The bytes of the single-process writer.
        let reference = dir.path().join("ref.npy");
        if !reference.exists() {
            tomors_io::writer::write_volume(
                &reference,
                VolumeFormat::Npy,
                single.view(),
                &Default::default(),
            )
            .unwrap();
        }
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&reference).unwrap()
        );
    }
    let h5 = dir.path().join("v.h5");
    let r = ThreadComm::run(3, |c| {
        run_job(c, || {
            Ok(fbp_job(&input, &h5, VolumeFormat::Hdf5, Center::At(23.0)))
        })
    });
    assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
    assert_eq!(read_hdf5_volume(&h5).unwrap(), fbp_single(&p, Some(23.0)));
    let tif = dir.path().join("tif");
    let r = ThreadComm::run(2, |c| {
        run_job(c, || {
            Ok(fbp_job(
                &input,
                &tif,
                VolumeFormat::TiffStack(TiffDepth::F32),
                Center::Default,
            ))
        })
    });
    assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
    let stack = tomors_io::open(&tif, &Default::default()).unwrap();
    let got = stack
        .read_rows(0..single.dim().1, &Preprocess::raw())
        .unwrap();
    // The stack reads as [image][row][col] = [z][y][x].
    assert_eq!(got, single);
    assert!(tif.join("tomors.txt").exists());
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.contains("partial")),
        "temporary outputs left: {names:?}"
    );
}

#[test]
fn auto_center_is_found_once_and_broadcast() {
    let dir = tempfile::tempdir().unwrap();
    let p = parallel_projections(40, 5, 32);
    let input = dir.path().join("proj.npy");
    write_npy(&input, &p);
    let out = dir.path().join("v.npy");
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let r = ThreadComm::run(2, |c| {
        let finder: tomors_mpi::CenterFinder = Box::new(|_, _, _| {
            CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(15.25)
        });
        run_job(c, || {
            Ok(fbp_job(
                &input,
                &out,
                VolumeFormat::Npy,
                Center::Auto(finder),
            ))
        })
    });
    assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
    assert_eq!(CALLS.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(read_npy_volume(&out).unwrap(), fbp_single(&p, Some(15.25)));
}

/// Bound on the relative L2 distance between distributed and
/// single-process cone iterative results (6 iterations, 24³, 2 and 3
/// ranks): the slabs' partial projections are summed in another order,
/// nothing else differs. Measured ≤ 6e-8 for SIRT/Landweber/BLOCK-IT with
/// the Joseph and line pairs and ≤ 4.7e-7 for SART with the voxel pair;
/// bound 5e-6 (10× the worst).
const CONE_BOUND: f64 = 5e-6;

#[test]
fn cone_domain_decomposition_equals_single_process() {
    let pb = cone_problem(24, 16);
    let cases = [
        (
            "sirt",
            Algorithm::Sirt(Weighting::RowColumnSums),
            ProjectorKind::Joseph,
            Some(0.0),
        ),
        (
            "landweber (default λ by power iteration)",
            Algorithm::Sirt(Weighting::Landweber),
            ProjectorKind::Joseph,
            None,
        ),
        (
            "block-it",
            Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: 4,
            },
            ProjectorKind::Line,
            None,
        ),
        (
            "sart-voxel",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 2,
            },
            ProjectorKind::Voxel,
            Some(0.0),
        ),
    ];
    for (name, algorithm, kind, min) in cases {
        let options = IterativeOptions {
            algorithm,
            iterations: 6,
            constraint: Constraint { min, max: None },
            ..Default::default()
        };
        let p = cone_projector::<f32>(kind, &pb.g, &pb.v, None).unwrap();
        let single =
            reconstruct_cone(p.as_ref(), pb.proj.view(), None, &options, &mut |_| true).unwrap();
        for ranks in [2, 3] {
            let parts = ThreadComm::run(ranks, |c| {
                reconstruct_distributed(
                    c,
                    kind,
                    &pb.g,
                    &pb.v,
                    pb.proj.view(),
                    &options,
                    &mut |_| true,
                )
                .unwrap()
            });
            let mut whole = Array3::zeros(single.x.dim());
            for (z, r) in &parts {
                whole.slice_mut(s![z.clone(), .., ..]).assign(&r.x);
                assert!(
                    (r.relaxation - single.relaxation).abs() <= 1e-4 * single.relaxation,
                    "{name}: λ {} vs {}",
                    r.relaxation,
                    single.relaxation
                );
                assert_eq!(r.residuals, parts[0].1.residuals, "{name}: ranks disagree");
            }
            let (rel, max) = distance(&whole, &single.x);
            println!("{name}, {ranks} ranks: relative L2 {rel:.2e}, max |Δ| {max:.2e}");
            assert!(rel <= CONE_BOUND, "{name}, {ranks} ranks: {rel:e}");
            let res_d = parts[0].1.residuals.last().unwrap();
            let res_s = single.residuals.last().unwrap();
            assert!(
                (res_d - res_s).abs() <= 1e-5 * res_s,
                "{name}: {res_d} vs {res_s}"
            );
        }
    }
}

#[test]
fn zslab_fdk_equals_single_process() {
    let dir = tempfile::tempdir().unwrap();
    let pb = cone_problem(24, 36);
    let input = dir.path().join("cone.npy");
    write_npy(&input, &pb.proj);
    let single = fdk(
        &CpuBackend::new(),
        pb.proj.view(),
        &pb.g,
        &pb.v,
        &FdkOptions::default(),
    )
    .unwrap();
    for ranks in [2, 3] {
        let out = dir.path().join(format!("fdk{ranks}.npy"));
        let r = ThreadComm::run(ranks, |c| {
            run_job(c, || {
                let source = tomors_io::open(&input, &Default::default())?;
                Ok(ReconJob {
                    angles: pb.g.angles().to_vec(),
                    source,
                    rows: 0..pb.g.n_rows(),
                    preprocess: Preprocess::default(),
                    out: out.clone(),
                    format: VolumeFormat::Npy,
                    overwrite: false,
                    memory: 1 << 30,
                    quiet: true,
                    method: Method::Fdk {
                        geometry: pb.g.clone(),
                        volume: pb.v,
                        options: FdkOptions::default(),
                        backend: Box::new(|_| Ok(Box::new(CpuBackend::new()))),
                    },
                    provenance: None,
                })
            })
        });
        assert!(r.iter().all(|x| x.is_ok()), "{r:?}");
        let got = read_npy_volume(&out).unwrap();
        let (rel, max) = distance(&got, &single);
        println!("FDK {ranks} ranks: relative L2 {rel:.2e}, max |Δ| {max:.2e}");
        // Each slab's detector band is a sub-detector whose rows are
        // located from a shifted principal point: f32 rounding of the row
        // coordinate only. Measured ≤ 3.8e-7 (2 and 3 ranks); bound 1e-5.
        assert!(rel <= 1e-5, "{ranks} ranks: {rel:e}");
        assert!(got.index_axis(Axis(0), 0).iter().all(|v| v.is_finite()));
    }
}
