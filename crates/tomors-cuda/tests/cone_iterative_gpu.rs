//! GPU tests of the cone-beam iterative reconstruction
//! (`tomors_cuda::cone_iterative`): Joseph forward and back projection
//! against tomors-core's `ConeJosephProjector` (f64 and f32), adjointness
//! in f32 on the GPU, SIRT against the CPU's `reconstruct_cone`
//! (row/column sums with a box, Landweber and Cimmino with their default
//! relaxation), stopping rules, an initial volume and bad input. GPU tests
//! skip with a printed reason when no GPU is usable (and fail under
//! `TOMORS_REQUIRE_GPU=1`); the input checks run everywhere.

mod common;

use std::f64::consts::PI;

use common::cone::{cases, cpu_back, cpu_forward, smooth_projections, two_balls};
use common::{
    assert_constraint, dot, fixed_options, flat, gpu_or_skip, no_progress, rand3, rel_l2, run_gap,
};
use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct_cone, Algorithm, ConeJosephProjector, ConeVoxelProjector, Constraint,
    IterativeOptions, StopReason, Weighting,
};
use tomors_cuda::cone_iterative::{check_cone_sirt_inputs, cone_sirt_fits};
use tomors_cuda::iterative::GpuIteration;
use tomors_cuda::{cone_sirt_cuda, cone_sirt_cuda_with, ConeBackProjector, CudaConeJoseph};

/// GPU forward and back projection equal the CPU projector (f64 and f32)
/// to f32 rounding (relative L2 ≤ 1e-5) on random zero-mean data.
#[test]
fn cone_forward_and_back_match_the_cpu_joseph() {
    let Some(be) = gpu_or_skip("cone_forward_and_back_match_the_cpu_joseph") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v) in cases() {
        let cpu = ConeJosephProjector::new(&g, &v).unwrap();
        let mut gpu = CudaConeJoseph::new(&be, &g, &v).unwrap();
        let x = rand3((v.nz, v.ny, v.nx), seed);
        let y = rand3((g.n_angles(), g.n_rows(), g.n_cols()), seed ^ 3);
        let got_f = gpu.forward(x.view()).unwrap();
        let got_b = gpu.back(y.view()).unwrap();
        // The plain scatter gives the same sums (up to the order of the
        // additions) as the default merged one.
        let merged = gpu.merged_back();
        gpu.set_merged_back(!merged);
        let other_b = gpu.back(y.view()).unwrap();
        gpu.set_merged_back(merged);
        let em = rel_l2(&flat(&other_b), &flat(&got_b));
        eprintln!("{name}: merged {merged} vs not: back rel L2 {em:.2e}");
        assert!(em <= 1e-6, "{name}: merged vs plain back rel L2 {em:.3e}");
        for (prec, want_f, want_b) in [
            (
                "f64",
                cpu_forward::<f64>(&cpu, &g, &x),
                cpu_back::<f64>(&cpu, &v, &y),
            ),
            (
                "f32",
                cpu_forward::<f32>(&cpu, &g, &x),
                cpu_back::<f32>(&cpu, &v, &y),
            ),
        ] {
            let ef = rel_l2(&flat(&got_f), &flat(&want_f));
            let eb = rel_l2(&flat(&got_b), &flat(&want_b));
            eprintln!("{name}: vs CPU {prec}: forward rel L2 {ef:.2e}, back {eb:.2e}");
            assert!(ef <= 1e-5, "{name} ({prec}): forward rel L2 {ef:.3e}");
            assert!(eb <= 1e-5, "{name} ({prec}): back rel L2 {eb:.3e}");
        }
        // Device-resident variants give the host ones.
        let xd = gpu.upload_volume(x.view()).unwrap();
        let mut pd = gpu.alloc_projections().unwrap();
        gpu.forward_dev(&xd, &mut pd).unwrap();
        assert_eq!(flat(&gpu.download(&pd).unwrap()), flat(&got_f));
    }
}

/// |⟨Ax, y⟩ − ⟨x, Aᵀy⟩| / (‖Ax‖‖y‖) ≤ 1e-4 with the GPU's f32 results.
#[test]
fn gpu_cone_pair_is_adjoint() {
    let Some(be) = gpu_or_skip("gpu_cone_pair_is_adjoint") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v) in cases() {
        let mut gpu = CudaConeJoseph::new(&be, &g, &v).unwrap();
        let x = rand3((v.nz, v.ny, v.nx), seed ^ 11);
        let y = rand3((g.n_angles(), g.n_rows(), g.n_cols()), seed ^ 13);
        let ax = gpu.forward(x.view()).unwrap();
        let norm = |a: &Array3<f32>| dot(a, a).sqrt();
        for merged in [true, false] {
            gpu.set_merged_back(merged);
            let aty = gpu.back(y.view()).unwrap();
            let gap = (dot(&ax, &y) - dot(&x, &aty)).abs() / (norm(&ax) * norm(&y));
            eprintln!("{name}, merged back {merged}: adjointness gap {gap:.2e}");
            assert!(gap <= 1e-4, "{name}: gap {gap:.3e}");
        }
    }
}

/// A smooth non-negative test volume (two overlapping balls) and its exact
/// Joseph projections (CPU, f64).
fn phantom(g: &ConeGeometry, v: &ConeVolume) -> (Array3<f32>, Array3<f32>) {
    let x = two_balls(v, 0.0);
    let cpu = ConeJosephProjector::new(g, v).unwrap();
    let b = cpu_forward::<f64>(&cpu, g, &x);
    (x, b)
}

/// GPU SIRT equals the CPU's `reconstruct_cone` (f32 `ConeJosephProjector`)
/// after 8 iterations: volume and residual history to relative 1e-4 for
/// row/column sums with a box constraint and with λ = 1.5, Landweber
/// (non-negative) and Cimmino with their default relaxation (power
/// iteration on the GPU against the CPU's, 1e-3).
#[test]
fn cone_sirt_matches_the_cpu() {
    let Some(be) = gpu_or_skip("cone_sirt_matches_the_cpu") else {
        return;
    };
    for (name, g, v) in cases() {
        let (_, b) = phantom(&g, &v);
        let cpu = ConeJosephProjector::new(&g, &v).unwrap();
        for (w, relax, constraint) in [
            (
                Weighting::RowColumnSums,
                None,
                Constraint::bounded(0.0, 1.2),
            ),
            (Weighting::RowColumnSums, Some(1.5), Constraint::none()),
            (Weighting::Landweber, None, Constraint::non_negative()),
            (Weighting::Cimmino, None, Constraint::none()),
        ] {
            let options = fixed_options(Algorithm::Sirt(w), 8, relax, constraint);
            let want =
                reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
            let (got, stats) =
                cone_sirt_cuda(&be, &g, &v, b.view(), None, &options, &no_progress()).unwrap();
            assert_eq!(got.x.dim(), (v.nz, v.ny, v.nx));
            let (ex, lam, er) = run_gap(&got, &want);
            eprintln!(
                "{name}, {w:?}: λ {:.5} (cpu {:.5}): volume rel L2 {ex:.2e}, residuals {er:.2e}, \
                 last residual {:.4e}; {stats:?}",
                got.relaxation,
                want.relaxation,
                got.residuals.last().unwrap()
            );
            assert_eq!(got.iterations, 8);
            assert_eq!(got.residuals.len(), 8);
            assert!(
                lam <= 1e-3,
                "{w:?}: λ {} vs {}",
                got.relaxation,
                want.relaxation
            );
            assert!(ex <= 1e-4, "{name} {w:?}: volume rel L2 {ex:.3e}");
            assert!(
                er <= 1e-4,
                "{name} {w:?}: residual history differs by {er:.3e}"
            );
            assert_constraint(&got.x, constraint, &format!("{name} {w:?}"));
        }
    }
}

/// The GPU voxel-driven back projection (`ConeBackProjector::Voxel`, FDK's
/// texture kernel) equals the CPU's f32 `ConeVoxelProjector` back
/// projection within the texture unit's 8-bit interpolation weights
/// (relative L2 ≤ 2e-3 on smooth projections and on the phantom's
/// projections); its texture forward projection equals the CPU's Joseph
/// forward within the same weights (≤ 2e-3 on the phantom, ≤ 1e-2 on
/// random volumes), and with Joseph's loads it is Joseph's forward;
/// the row sums of both pairs (by arithmetic) are the CPU's to 1e-5.
#[test]
fn cone_voxel_back_matches_the_cpu() {
    let Some(be) = gpu_or_skip("cone_voxel_back_matches_the_cpu") else {
        return;
    };
    let seed = common::test_seed();
    for (name, g, v) in cases() {
        let cpu = ConeVoxelProjector::new(&g, &v).unwrap();
        let mut gpu = CudaConeJoseph::with_back(&be, &g, &v, ConeBackProjector::Voxel).unwrap();
        assert_eq!(gpu.back_projector(), ConeBackProjector::Voxel);
        let (_, pb) = phantom(&g, &v);
        for (what, y) in [("smooth", smooth_projections(&g)), ("phantom", pb)] {
            let got = gpu.back(y.view()).unwrap();
            let want = cpu_back::<f32>(&cpu, &v, &y);
            let e = rel_l2(&flat(&got), &flat(&want));
            eprintln!("{name}, {what}: voxel back vs CPU f32 rel L2 {e:.2e}");
            assert!(e <= 2e-3, "{name}, {what}: voxel back rel L2 {e:.3e}");
        }
        // The texture forward (the default) against the CPU's Joseph
        // forward; with Joseph's loads it is the Joseph pair's forward.
        assert!(gpu.texture_forward());
        let jcpu = ConeJosephProjector::new(&g, &v).unwrap();
        let (xp, _) = phantom(&g, &v);
        let x = rand3((v.nz, v.ny, v.nx), seed);
        for (what, x, bound) in [("phantom", &xp, 2e-3), ("random", &x, 1e-2)] {
            let got = gpu.forward(x.view()).unwrap();
            let want = cpu_forward::<f32>(&jcpu, &g, x);
            let e = rel_l2(&flat(&got), &flat(&want));
            eprintln!("{name}, {what}: texture forward vs CPU Joseph f32 rel L2 {e:.2e}");
            assert!(e <= bound, "{name}, {what}: texture forward rel L2 {e:.3e}");
        }
        // Row sums A·1 by arithmetic (`cj_forward_ones`), for the voxel pair
        // (whose forward is Joseph's) and the Joseph pair: the CPU f64
        // Joseph forward of ones to f32 rounding.
        let ones = Array3::<f32>::ones((v.nz, v.ny, v.nx));
        let want_rs = cpu_forward::<f64>(&jcpu, &g, &ones);
        let jos_pair = CudaConeJoseph::new(&be, &g, &v).unwrap();
        for (pair, got) in [
            ("voxel", gpu.row_sums(false).unwrap()),
            ("joseph", jos_pair.row_sums(false).unwrap()),
        ] {
            let e = rel_l2(&flat(&got), &flat(&want_rs));
            eprintln!("{name}: {pair} pair row sums vs CPU f64 rel L2 {e:.2e}");
            assert!(e <= 1e-5, "{name}: {pair} pair row sums rel L2 {e:.3e}");
        }
        gpu.set_texture_forward(false).unwrap();
        assert!(!gpu.texture_forward());
        let jos = CudaConeJoseph::new(&be, &g, &v).unwrap();
        assert_eq!(
            flat(&gpu.forward(x.view()).unwrap()),
            flat(&jos.forward(x.view()).unwrap())
        );
    }
}

/// GPU SIRT with the voxel pair equals the CPU's `reconstruct_cone` with
/// the f32 `ConeVoxelProjector` after 8 iterations (volume and residual
/// history to 2e-3: the texture interpolation) for row/column sums (column
/// sums `B·1`) with a box and for Landweber with its default relaxation
/// (power iteration); with the Joseph pair it is a different
/// reconstruction.
#[test]
fn cone_sirt_voxel_matches_the_cpu() {
    let Some(be) = gpu_or_skip("cone_sirt_voxel_matches_the_cpu") else {
        return;
    };
    for (name, g, v) in cases() {
        let (_, b) = phantom(&g, &v);
        let cpu = ConeVoxelProjector::new(&g, &v).unwrap();
        for (w, constraint) in [
            (Weighting::RowColumnSums, Constraint::bounded(0.0, 1.2)),
            (Weighting::Landweber, Constraint::non_negative()),
        ] {
            let options = fixed_options(Algorithm::Sirt(w), 8, None, constraint);
            let want =
                reconstruct_cone::<f32, _>(&cpu, b.view(), None, &options, &mut |_| true).unwrap();
            let (got, stats) = cone_sirt_cuda_with(
                &be,
                &g,
                &v,
                b.view(),
                None,
                &options,
                ConeBackProjector::Voxel,
                &no_progress(),
            )
            .unwrap();
            let (ex, lam, er) = run_gap(&got, &want);
            eprintln!(
                "{name}, {w:?} voxel: λ {:.5} (cpu {:.5}): volume rel L2 {ex:.2e}, residuals \
                 {er:.2e}, last residual {:.4e}; {stats:?}",
                got.relaxation,
                want.relaxation,
                got.residuals.last().unwrap()
            );
            assert_eq!(got.iterations, 8);
            assert!(
                lam <= 2e-3,
                "{name} {w:?}: λ {} vs {}",
                got.relaxation,
                want.relaxation
            );
            assert!(ex <= 2e-3, "{name} {w:?}: volume rel L2 {ex:.3e}");
            assert!(er <= 2e-3, "{name} {w:?}: residuals differ by {er:.3e}");
            assert_constraint(&got.x, constraint, &format!("{name} {w:?} voxel"));
        }
    }
}

/// SIRT with the voxel pair lowers the error against the phantom: after 5
/// and 30 iterations (row/column sums, non-negative) the relative L2 error
/// falls, as does the residual, and ends within 1.2× of the matched
/// Joseph pair's.
#[test]
fn cone_sirt_voxel_lowers_the_error() {
    let Some(be) = gpu_or_skip("cone_sirt_voxel_lowers_the_error") else {
        return;
    };
    let (name, g, v) = cases().pop().unwrap();
    let (x_true, b) = phantom(&g, &v);
    let truth = flat(&x_true);
    let run = |iterations: usize, back: ConeBackProjector| {
        let options = fixed_options(
            Algorithm::Sirt(Weighting::RowColumnSums),
            iterations,
            None,
            Constraint::non_negative(),
        );
        let (r, _) =
            cone_sirt_cuda_with(&be, &g, &v, b.view(), None, &options, back, &no_progress())
                .unwrap();
        (rel_l2(&flat(&r.x), &truth), *r.residuals.last().unwrap())
    };
    let (e5, r5) = run(5, ConeBackProjector::Voxel);
    let (e30, r30) = run(30, ConeBackProjector::Voxel);
    let (j30, _) = run(30, ConeBackProjector::Joseph);
    eprintln!(
        "{name}: voxel pair error {e5:.4} after 5, {e30:.4} after 30 (residual {r5:.3e} → \
         {r30:.3e}); Joseph pair {j30:.4} after 30"
    );
    assert!(e30 < e5 && e5 < 1.0, "errors {e5} {e30}");
    assert!(r30 < r5, "residuals {r5} {r30}");
    assert!(e30 <= 1.2 * j30, "voxel {e30} vs Joseph {j30}");
}

/// An initial volume is used (as on the CPU); the tolerance and the
/// callback stop the iteration.
#[test]
fn cone_sirt_initial_volume_and_stopping() {
    let Some(be) = gpu_or_skip("cone_sirt_initial_volume_and_stopping") else {
        return;
    };
    let (name, g, v) = cases().pop().unwrap();
    let (x_true, b) = phantom(&g, &v);
    let cpu = ConeJosephProjector::new(&g, &v).unwrap();
    let options = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 4,
        ..IterativeOptions::default()
    };
    let x0 = x_true.mapv(|v| 0.5 * v + 0.1);
    let want = reconstruct_cone::<f32, _>(&cpu, b.view(), Some(x0.view()), &options, &mut |_| true)
        .unwrap();
    let (got, _) = cone_sirt_cuda(
        &be,
        &g,
        &v,
        b.view(),
        Some(x0.view()),
        &options,
        &no_progress(),
    )
    .unwrap();
    let ex = rel_l2(&flat(&got.x), &flat(&want.x));
    eprintln!("{name}: initial volume: rel L2 {ex:.2e}");
    assert!(ex <= 1e-4, "initial volume: rel L2 {ex:.3e}");

    let long = IterativeOptions {
        iterations: 200,
        tolerance: Some(0.05),
        ..options
    };
    let (got, _) = cone_sirt_cuda(&be, &g, &v, b.view(), None, &long, &no_progress()).unwrap();
    assert_eq!(got.stop, StopReason::Tolerance);
    assert!(*got.residuals.last().unwrap() <= 0.05);
    assert!(got.iterations < 200);
    eprintln!("tolerance 0.05 reached after {} iterations", got.iterations);

    let stop_at_3 = |i: &GpuIteration| i.iteration < 3;
    let (got, _) = cone_sirt_cuda(&be, &g, &v, b.view(), None, &long, &stop_at_3).unwrap();
    assert_eq!(got.stop, StopReason::Callback);
    assert_eq!(got.iterations, 3);
}

/// Bad input on the GPU: NaN data, shapes that do not fit, λ ≤ 0, zero
/// iterations, methods other than SIRT, divergence, a source inside the
/// volume, a problem too large for the device memory.
#[test]
fn cone_gpu_bad_input_is_an_error() {
    let Some(be) = gpu_or_skip("cone_gpu_bad_input_is_an_error") else {
        return;
    };
    let (_, g, v) = cases().pop().unwrap();
    let (_, b) = phantom(&g, &v);
    let ok = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 3,
        ..IterativeOptions::default()
    };
    let run = |s: &Array3<f32>, o: &IterativeOptions| {
        cone_sirt_cuda(&be, &g, &v, s.view(), None, o, &no_progress()).map_err(|e| e.to_string())
    };
    assert!(run(&b, &ok).is_ok());
    let mut nan = b.clone();
    nan[[1, 3, 4]] = f32::NAN;
    let e = run(&nan, &ok).unwrap_err();
    // Found on the device after the upload; the host scan names the element.
    assert!(e.contains("non-finite") && e.contains("(1, 3, 4)"), "{e}");
    let e = run(
        &Array3::zeros((g.n_angles(), g.n_rows() + 1, g.n_cols())),
        &ok,
    )
    .unwrap_err();
    assert!(e.contains("projections"), "{e}");
    for (o, what) in [
        (
            IterativeOptions {
                relaxation: Some(0.0),
                ..ok
            },
            "relaxation",
        ),
        (
            IterativeOptions {
                iterations: 0,
                ..ok
            },
            "iteration",
        ),
        (
            IterativeOptions {
                relaxation: Some(1e30),
                iterations: 20,
                ..ok
            },
            "diverged",
        ),
    ] {
        let e = run(&b, &o).unwrap_err();
        eprintln!("{what}: {e}");
        assert!(e.contains(what), "{e}");
    }
    // The source inside the volume.
    let near = ConeGeometry::new(
        uniform_angles(8, 2.0 * PI as f32),
        5.0,
        5.0,
        16,
        16,
        1.0,
        1.0,
    )
    .unwrap();
    let e = CudaConeJoseph::new(&be, &near, &ConeVolume::new(20, 20, 4, 1.0).unwrap())
        .err()
        .unwrap()
        .to_string();
    eprintln!("source inside: {e}");
    assert!(e.contains("source"), "{e}");
    // Shapes of the host calls.
    let gpu = CudaConeJoseph::new(&be, &g, &v).unwrap();
    assert!(gpu
        .forward(Array3::zeros((v.nz, v.ny, v.nx + 1)).view())
        .is_err());
    assert!(gpu.back(Array3::zeros((1, 2, 3)).view()).is_err());
    // Too large for the device: 4096 projections of 2048² and a 1024³ volume.
    let huge_g = ConeGeometry::new(
        uniform_angles(4096, 2.0 * PI as f32),
        5000.0,
        500.0,
        2048,
        2048,
        1.0,
        1.0,
    )
    .unwrap();
    let huge_v = ConeVolume::new(1024, 1024, 1024, 1.0).unwrap();
    let e = cone_sirt_fits(&be, &huge_g, &huge_v).unwrap_err();
    eprintln!("too large: {e}");
    assert!(e.is_out_of_memory(), "{e}");
    assert!(cone_sirt_fits(&be, &g, &v).is_ok());
}

/// The input checks of the cone GPU SIRT (no GPU needed).
#[test]
fn cone_sirt_inputs_are_checked_without_a_gpu() {
    let (_, g, v) = cases().pop().unwrap();
    let proj = Array3::<f32>::ones((g.n_angles(), g.n_rows(), g.n_cols()));
    let ok = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::Cimmino),
        iterations: 3,
        ..IterativeOptions::default()
    };
    let check = |s: &Array3<f32>, x0: Option<&Array3<f32>>, o: &IterativeOptions| {
        let x = x0.map(|a| a.view());
        check_cone_sirt_inputs(&g, &v, &s.view(), x.as_ref(), o).map_err(|e| e.to_string())
    };
    assert_eq!(check(&proj, None, &ok), Ok(Weighting::Cimmino));
    let bad = |s: &Array3<f32>, x0: Option<&Array3<f32>>, o: IterativeOptions, what: &str| {
        let e = check(s, x0, &o).unwrap_err();
        assert!(e.contains(what), "{e}");
        assert!(!e.contains('\n'), "one line: {e}");
    };
    bad(
        &proj,
        None,
        IterativeOptions {
            relaxation: Some(-1.0),
            ..ok
        },
        "relaxation",
    );
    bad(
        &proj,
        None,
        IterativeOptions {
            relaxation: Some(0.0),
            ..ok
        },
        "relaxation",
    );
    bad(
        &proj,
        None,
        IterativeOptions {
            iterations: 0,
            ..ok
        },
        "iteration",
    );
    bad(
        &proj,
        None,
        IterativeOptions {
            tolerance: Some(-1.0),
            ..ok
        },
        "tolerance",
    );
    bad(
        &proj,
        None,
        IterativeOptions {
            constraint: Constraint::bounded(1.0, 0.0),
            ..ok
        },
        "exceeds",
    );
    // Block-sequential methods pass (the Joseph pair runs them), and so do
    // ART and the block-parallel method (ray batches; tests/art_gpu.rs).
    let sart = IterativeOptions {
        algorithm: Algorithm::BlockSequential {
            weighting: Weighting::RowColumnSums,
            projections_per_block: 1,
        },
        ..ok
    };
    assert_eq!(check(&proj, None, &sart), Ok(Weighting::RowColumnSums));
    for algorithm in [
        Algorithm::BlockParallel {
            projections_per_block: 2,
        },
        Algorithm::Art {
            order: Default::default(),
        },
    ] {
        let o = IterativeOptions { algorithm, ..ok };
        assert!(check(&proj, None, &o).is_ok(), "{:?}", o.algorithm);
    }
    let wrong = Array3::<f32>::ones((g.n_angles() - 1, g.n_rows(), g.n_cols()));
    bad(&wrong, None, ok, "projections");
    let x0 = Array3::<f32>::zeros((v.nz, v.ny + 1, v.nx));
    bad(&proj, Some(&x0), ok, "initial volume");
    let mut nan = proj.clone();
    nan[[2, 1, 0]] = f32::NAN;
    bad(&nan, None, ok, "non-finite");
    let mut x0 = Array3::<f32>::zeros((v.nz, v.ny, v.nx));
    x0[[0, 0, 0]] = f32::INFINITY;
    bad(&proj, Some(&x0), ok, "non-finite");
}
