//! GPU tests of the iterative reconstruction (`tomors_cuda::iterative`):
//! Joseph forward and back projection against tomors-core's f64
//! `JosephProjector`, adjointness in f32, SIRT against the CPU SIRT
//! (row/column sums, Landweber and Cimmino with their default relaxation),
//! slabs, stopping rules and bad input. GPU tests skip with a printed reason
//! when no GPU is usable (and fail under `TOMORS_REQUIRE_GPU=1`); the input
//! checks run everywhere.

mod common;

use common::joseph::{cases, cpu_back, cpu_forward, shepp};
use common::{
    assert_constraint, fixed_options, flat, gpu_or_skip, no_progress, rand3, rel_l2, run_gap,
};
use ndarray::{Array3, Axis};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    reconstruct, Algorithm, Constraint, IterativeOptions, JosephProjector, StopReason, Weighting,
};
use tomors_core::{ParallelGeometry, SliceGrid};
use tomors_cuda::iterative::{check_sirt_inputs, GpuIteration};
use tomors_cuda::{sirt_cuda, CudaJoseph, GpuSirtOptions, JosephTuning};

const PI: f32 = std::f32::consts::PI;

/// GPU forward and back projection equal the f64 CPU projector to f32
/// rounding (relative L2 ≤ 1e-5) on fresh random zero-mean data (the
/// hardest case for relative errors), 11 slices (a padded last group), the
/// slice groups (16 in the forward too) and the 2×2-pixel back projection
/// (used where the hats span one bin: the first and third geometries),
/// three geometries.
#[test]
fn forward_and_back_match_the_cpu_joseph() {
    let Some(be) = gpu_or_skip("forward_and_back_match_the_cpu_joseph") else {
        return;
    };
    let seed = common::test_seed();
    for (name, geom, grid) in cases(seed) {
        let cpu = JosephProjector::new(&geom, &grid).unwrap();
        let ns = 11;
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let x = rand3((ns, grid.ny, grid.nx), seed);
        let y = rand3((ns, na, nb), seed ^ 3);
        let want_f = cpu_forward(&cpu, &x);
        let want_b = cpu_back(&cpu, &y);
        for (sg, bsg, ap, paired, quad) in [
            (4, 4, 4, false, false),
            (8, 8, 4, false, false),
            (8, 16, 3, true, false),
            (4, 16, 1, true, false),
            (16, 8, 4, true, true),
            (16, 16, 2, true, true),
            (8, 4, 4, true, true),
        ] {
            let gpu = CudaJoseph::tuned(
                &be,
                &geom,
                &grid,
                &JosephTuning {
                    slice_group: sg,
                    back_slice_group: bsg,
                    rays_per_thread: ap,
                    paired,
                    back_quad: quad,
                },
            )
            .unwrap();
            let mut got_f = Array3::<f32>::from_elem((ns, na, nb), f32::NAN);
            gpu.forward(x.view(), got_f.view_mut()).unwrap();
            let ef = rel_l2(&flat(&got_f), &flat(&want_f));
            let mut got_b = Array3::<f32>::from_elem((ns, grid.ny, grid.nx), f32::NAN);
            gpu.back(y.view(), got_b.view_mut()).unwrap();
            let eb = rel_l2(&flat(&got_b), &flat(&want_b));
            eprintln!(
                "{name}, slice groups {sg}/{bsg}, {ap} rays per thread, paired {paired}, 2×2 back \
                 {quad}: forward rel L2 {ef:.2e}, back {eb:.2e}"
            );
            assert!(ef <= 1e-5, "{name} sg {sg}: forward rel L2 {ef:.3e}");
            assert!(eb <= 1e-5, "{name} sg {sg}: back rel L2 {eb:.3e}");
        }
    }
}

/// |⟨Ax, y⟩ − ⟨x, Aᵀy⟩| / (‖Ax‖‖y‖) ≤ 1e-4 with the GPU's f32 results.
#[test]
fn gpu_pair_is_adjoint() {
    let Some(be) = gpu_or_skip("gpu_pair_is_adjoint") else {
        return;
    };
    let seed = common::test_seed();
    for (name, geom, grid) in cases(seed) {
        let ns = 5;
        let (na, nb) = (geom.n_angles(), geom.n_bins());
        let x = rand3((ns, grid.ny, grid.nx), seed ^ 11);
        let y = rand3((ns, na, nb), seed ^ 13);
        let gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
        let mut ax = Array3::<f32>::zeros((ns, na, nb));
        gpu.forward(x.view(), ax.view_mut()).unwrap();
        let mut aty = Array3::<f32>::zeros((ns, grid.ny, grid.nx));
        gpu.back(y.view(), aty.view_mut()).unwrap();
        let dot = |a: &Array3<f32>, b: &Array3<f32>| -> f64 {
            a.iter().zip(b).map(|(&u, &v)| u as f64 * v as f64).sum()
        };
        let norm = |a: &Array3<f32>| dot(a, a).sqrt();
        let gap = (dot(&ax, &y) - dot(&x, &aty)).abs() / (norm(&ax) * norm(&y));
        eprintln!("{name}: adjointness gap {gap:.2e}");
        assert!(gap <= 1e-4, "{name}: gap {gap:.3e}");
    }
}

/// GPU SIRT equals CPU SIRT (tomors-core `reconstruct` with the f32
/// `JosephProjector`) after 10 iterations: volume and residual history to
/// relative 1e-4, for row/column sums with a box constraint, and Landweber
/// and Cimmino with their default relaxation (power iteration on the GPU
/// against the CPU's, 1e-3).
#[test]
fn sirt_matches_the_cpu() {
    let Some(be) = gpu_or_skip("sirt_matches_the_cpu") else {
        return;
    };
    let (geom, grid, sino) = shepp(64, 45);
    let cpu = JosephProjector::new(&geom, &grid).unwrap();
    for (w, relax, constraint) in [
        (
            Weighting::RowColumnSums,
            None,
            Constraint::bounded(0.0, 0.8),
        ),
        (Weighting::RowColumnSums, Some(1.5), Constraint::none()),
        (Weighting::Landweber, None, Constraint::non_negative()),
        (Weighting::Cimmino, None, Constraint::none()),
    ] {
        let options = fixed_options(Algorithm::Sirt(w), 10, relax, constraint);
        let want = reconstruct::<f32, _>(&cpu, sino.view(), None, &options, &mut |_| true).unwrap();
        let (got, stats) = sirt_cuda(
            &be,
            &geom,
            &grid,
            sino.view(),
            None,
            &options,
            &GpuSirtOptions::default(),
            &no_progress(),
        )
        .unwrap();
        let (ex, lam, er) = run_gap(&got, &want);
        eprintln!(
            "{w:?} λ {:.5} (cpu {:.5}): volume rel L2 {ex:.2e}, residuals {er:.2e}, \
             last residual {:.4e}; {stats:?}",
            got.relaxation,
            want.relaxation,
            got.residuals.last().unwrap()
        );
        assert_eq!(got.iterations, 10);
        assert_eq!(got.residuals.len(), 10);
        assert!(
            lam <= 1e-3,
            "{w:?}: λ {} vs {}",
            got.relaxation,
            want.relaxation
        );
        assert!(ex <= 1e-4, "{w:?}: volume rel L2 {ex:.3e}");
        assert!(er <= 1e-4, "{w:?}: residual history differs by {er:.3e}");
        assert_constraint(&got.x, constraint, &format!("{w:?}"));
    }
}

/// Slabs: 19 slices in slabs of 8 (and both slice groups) give the one-slab
/// result (slices are independent); an initial volume is used; the
/// tolerance and the callback stop the iteration.
#[test]
fn slabs_initial_volume_and_stopping() {
    let Some(be) = gpu_or_skip("slabs_initial_volume_and_stopping") else {
        return;
    };
    let (geom, grid, s3) = shepp(48, 30);
    let ns = 19;
    let mut sino = Array3::<f32>::zeros((ns, 30, 48));
    for (i, mut s) in sino.outer_iter_mut().enumerate() {
        s.assign(
            &s3.index_axis(Axis(0), i % 3)
                .mapv(|v| v * (1.0 + 0.05 * i as f32)),
        );
    }
    let options = fixed_options(
        Algorithm::Sirt(Weighting::RowColumnSums),
        6,
        None,
        Constraint::non_negative(),
    );
    let run_ap =
        |slab: usize, sg: usize, ap: usize, init: Option<&Array3<f32>>, opt: &IterativeOptions| {
            sirt_cuda(
                &be,
                &geom,
                &grid,
                sino.view(),
                init.map(|a| a.view()),
                opt,
                &GpuSirtOptions {
                    slab,
                    slice_group: sg,
                    rays_per_thread: ap,
                    paired: Some(ap == 2),
                    back_slice_group: if sg == 4 { 16 } else { 8 },
                    ..GpuSirtOptions::default()
                },
                &no_progress(),
            )
            .unwrap()
        };
    let run = |slab: usize, sg: usize, init: Option<&Array3<f32>>, opt: &IterativeOptions| {
        run_ap(slab, sg, 0, init, opt)
    };
    let (whole, _) = run(0, 8, None, &options);
    let (slabs, st) = run(8, 8, None, &options);
    assert_eq!(st.slabs, 3);
    let (slabs4, _) = run(8, 4, None, &options);
    let e1 = rel_l2(&flat(&slabs.x), &flat(&whole.x));
    let e2 = rel_l2(&flat(&slabs4.x), &flat(&whole.x));
    eprintln!("slabs vs whole {e1:.2e}, group 4 vs 8 {e2:.2e}");
    assert!(e1 <= 1e-6 && e2 <= 1e-6);
    for ap in [1, 2, 3] {
        let (r, _) = run_ap(0, 8, ap, None, &options);
        let e = rel_l2(&flat(&r.x), &flat(&whole.x));
        eprintln!("{ap} projections per thread vs 4: {e:.2e}");
        assert!(e <= 1e-6, "{ap} projections per thread: {e:.3e}");
    }
    for (a, b) in slabs.residuals.iter().zip(&whole.residuals) {
        assert!((a - b).abs() <= 1e-6 * b);
    }
    // 3 + 3 iterations from the 3-iteration result = 6 iterations.
    let three = IterativeOptions {
        iterations: 3,
        ..options
    };
    let (first, _) = run(0, 8, None, &three);
    let (second, _) = run(0, 8, Some(&first.x), &three);
    let e3 = rel_l2(&flat(&second.x), &flat(&whole.x));
    eprintln!("3 + 3 iterations vs 6: {e3:.2e}");
    assert!(e3 <= 1e-5);
    // Tolerance: stops once the residual is at most the 4th iteration's.
    let tol = IterativeOptions {
        tolerance: Some(whole.residuals[3] * (1.0 + 1e-9)),
        iterations: 50,
        ..options
    };
    let (t, _) = run(0, 8, None, &tol);
    assert_eq!(t.stop, StopReason::Tolerance);
    assert_eq!(t.iterations, 4);
    // Callback: stop after 2.
    let (c, _) = sirt_cuda(
        &be,
        &geom,
        &grid,
        sino.view(),
        None,
        &options,
        &GpuSirtOptions::default(),
        &|i: &GpuIteration| i.iteration < 2,
    )
    .unwrap();
    assert_eq!(c.stop, StopReason::Callback);
    assert_eq!(c.iterations, 2);
}

/// Bad input on the GPU path: errors, never panics.
#[test]
fn gpu_bad_input_is_an_error() {
    let Some(be) = gpu_or_skip("gpu_bad_input_is_an_error") else {
        return;
    };
    let (geom, grid, sino) = shepp(32, 20);
    let ok = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 3,
        ..IterativeOptions::default()
    };
    let run = |s: &Array3<f32>, o: &IterativeOptions| {
        sirt_cuda(
            &be,
            &geom,
            &grid,
            s.view(),
            None,
            o,
            &GpuSirtOptions::default(),
            &no_progress(),
        )
    };
    assert!(run(&sino, &ok).is_ok());
    let mut nan = sino.clone();
    nan[[1, 3, 4]] = f32::NAN;
    let e = run(&nan, &ok).unwrap_err().to_string();
    // Found on the device after the upload; the host scan names the element.
    assert!(e.contains("non-finite") && e.contains("(1, 3, 4)"), "{e}");
    let e = run(&Array3::zeros((3, 21, 32)), &ok)
        .unwrap_err()
        .to_string();
    assert!(e.contains("angles"), "{e}");
    let e = run(
        &sino,
        &IterativeOptions {
            relaxation: Some(0.0),
            ..ok
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("relaxation"), "{e}");
    // Divergence is reported, not returned as garbage.
    let e = run(
        &sino,
        &IterativeOptions {
            relaxation: Some(1e30),
            iterations: 20,
            ..ok
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("diverged"), "{e}");
    assert!(CudaJoseph::new(&be, &geom, &grid, 5).is_err());
    let gpu = CudaJoseph::new(&be, &geom, &grid, 4).unwrap();
    let mut out = Array3::<f32>::zeros((3, 20, 31));
    assert!(gpu
        .forward(Array3::zeros((3, 32, 32)).view(), out.view_mut())
        .is_err());
    let mut out = Array3::<f32>::zeros((2, 32, 32));
    assert!(gpu.back(sino.view(), out.view_mut()).is_err());
}

/// The input checks of the GPU SIRT (no GPU needed): λ ≤ 0 or NaN, zero
/// iterations, a negative tolerance, an inverted box, mismatched shapes,
/// NaN data, ART and the block-parallel method (SART and BLOCK-IT pass).
#[test]
fn sirt_inputs_are_checked_without_a_gpu() {
    let geom = ParallelGeometry::new(uniform_angles(10, PI), 16).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let sino = Array3::<f32>::ones((2, 10, 16));
    let ok = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::RowColumnSums),
        iterations: 3,
        ..IterativeOptions::default()
    };
    let check = |s: &Array3<f32>, x0: Option<&Array3<f32>>, o: &IterativeOptions| {
        let v = x0.map(|a| a.view());
        check_sirt_inputs(&geom, &grid, &s.view(), v.as_ref(), o).map_err(|e| e.to_string())
    };
    assert_eq!(check(&sino, None, &ok), Ok(Weighting::RowColumnSums));
    let bad = |o: IterativeOptions, what: &str| {
        let e = check(&sino, None, &o).unwrap_err();
        assert!(e.contains(what), "{e}");
    };
    bad(
        IterativeOptions {
            relaxation: Some(-1.0),
            ..ok
        },
        "relaxation",
    );
    bad(
        IterativeOptions {
            relaxation: Some(0.0),
            ..ok
        },
        "relaxation",
    );
    bad(
        IterativeOptions {
            relaxation: Some(f64::NAN),
            ..ok
        },
        "relaxation",
    );
    bad(
        IterativeOptions {
            iterations: 0,
            ..ok
        },
        "iteration",
    );
    bad(
        IterativeOptions {
            tolerance: Some(-1.0),
            ..ok
        },
        "tolerance",
    );
    bad(
        IterativeOptions {
            constraint: Constraint::bounded(1.0, 0.0),
            ..ok
        },
        "exceeds",
    );
    // ART and the block-parallel method run on the GPU too (ray batches;
    // tests/art_gpu.rs).
    for algorithm in [
        Algorithm::Art {
            order: Default::default(),
        },
        Algorithm::BlockParallel {
            projections_per_block: 4,
        },
    ] {
        let o = IterativeOptions { algorithm, ..ok };
        assert!(check(&sino, None, &o).is_ok(), "{:?}", o.algorithm);
    }
    // SART and BLOCK-IT run on the GPU (issue 12).
    let sart = IterativeOptions {
        algorithm: Algorithm::BlockSequential {
            weighting: Weighting::Cimmino,
            projections_per_block: 1,
        },
        ..ok
    };
    assert_eq!(check(&sino, None, &sart), Ok(Weighting::Cimmino));
    bad(
        IterativeOptions {
            algorithm: Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 0,
            },
            ..ok
        },
        "at least one projection",
    );
    let e = check(&Array3::ones((2, 10, 15)), None, &ok).unwrap_err();
    assert!(e.contains("bins"), "{e}");
    let e = check(&Array3::ones((0, 10, 16)), None, &ok).unwrap_err();
    assert!(e.contains("no sinograms"), "{e}");
    let e = check(&sino, Some(&Array3::zeros((2, 16, 15))), &ok).unwrap_err();
    assert!(e.contains("initial"), "{e}");
    let mut nan = sino.clone();
    nan[[1, 2, 3]] = f32::INFINITY;
    let e = check(&nan, None, &ok).unwrap_err();
    assert!(e.contains("non-finite"), "{e}");
    let mut x0 = Array3::zeros((2, 16, 16));
    x0[[0, 1, 1]] = f32::NAN;
    let e = check(&sino, Some(&x0), &ok).unwrap_err();
    assert!(e.contains("initial volume"), "{e}");
}
