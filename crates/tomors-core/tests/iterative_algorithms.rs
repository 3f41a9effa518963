//! Iterative methods on the Shepp–Logan phantom: every method lowers the
//! error, ART and BLOCK-IT converge in fewer sweeps than SIRT, iterative
//! beats FBP on sparse data; constraints, relaxation, stopping, callbacks
//! and bad input.

use ndarray::{Array2, Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::error::CoreError;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, default_relaxation, projector, reconstruct, spectral_radius, Algorithm, Constraint,
    IterativeOptions, Projector, ProjectorKind, RayOrder, StopReason, Weighting,
};
use tomors_core::metrics::{disc_mask, nrmse};
use tomors_core::phantom::{add_poisson_noise, Phantom2d};
use tomors_core::{ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

struct Problem {
    geometry: ParallelGeometry,
    grid: SliceGrid,
    sino: Array3<f32>,
    truth: Array2<f32>,
    mask: Array2<bool>,
}

/// The n² modified Shepp–Logan from `n_angles` exact projections over π,
/// optionally with Poisson noise (I₀ photons, 1 world unit = 1/n of the
/// object's optical depth scale).
fn problem(n: usize, n_angles: usize, photons: Option<f64>) -> Problem {
    let geometry = ParallelGeometry::new(uniform_angles(n_angles, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let phantom = Phantom2d::shepp_logan();
    let scale = n as f64 / 2.0;
    let mut sino = phantom.project(&geometry, scale).insert_axis(Axis(0));
    if let Some(i0) = photons {
        add_poisson_noise(sino.view_mut(), i0, 4.0 / n as f64, 42).unwrap();
    }
    Problem {
        truth: phantom.rasterize(&grid, scale, 4),
        mask: disc_mask(n, n, 0.45),
        geometry,
        grid,
        sino,
    }
}

impl Problem {
    fn error(&self, x: ndarray::ArrayView2<'_, f32>) -> f64 {
        nrmse(x, self.truth.view(), Some(&self.mask)).unwrap()
    }

    /// NRMSE after each iteration.
    fn errors(&self, kind: ProjectorKind, options: &IterativeOptions) -> Vec<f64> {
        let p = projector::<f32>(kind, &self.geometry, &self.grid, None).unwrap();
        let mut errors = Vec::new();
        reconstruct(p.as_ref(), self.sino.view(), None, options, &mut |info| {
            errors.push(self.error(info.x.index_axis(Axis(0), 0)));
            true
        })
        .unwrap();
        errors
    }

    fn fbp(&self) -> f64 {
        let recon = fbp_sinograms(
            &CpuBackend::new(),
            self.sino.view(),
            &self.geometry,
            &self.grid,
            &FbpOptions::default(),
        )
        .unwrap();
        self.error(recon.index_axis(Axis(0), 0))
    }
}

fn options(algorithm: Algorithm, iterations: usize) -> IterativeOptions {
    IterativeOptions {
        algorithm,
        iterations,
        constraint: Constraint::non_negative(),
        ..IterativeOptions::default()
    }
}

fn methods() -> Vec<(&'static str, Algorithm)> {
    vec![
        ("landweber", Algorithm::Sirt(Weighting::Landweber)),
        ("cimmino", Algorithm::Sirt(Weighting::Cimmino)),
        ("sirt", Algorithm::Sirt(Weighting::RowColumnSums)),
        (
            "block-it",
            Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: 2,
            },
        ),
        (
            "sart",
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 1,
            },
        ),
        (
            "block-parallel",
            Algorithm::BlockParallel {
                projections_per_block: 5,
            },
        ),
        (
            "art",
            Algorithm::Art {
                order: RayOrder::Sequential,
            },
        ),
        (
            "art-random",
            Algorithm::Art {
                order: RayOrder::Random { seed: 1 },
            },
        ),
    ]
}

/// First iteration (1-based) at which the error is at most `target`.
fn reach(errors: &[f64], target: f64) -> Option<usize> {
    errors.iter().position(|&e| e <= target).map(|i| i + 1)
}

fn find(name: &str) -> Algorithm {
    methods().into_iter().find(|(n, _)| *n == name).unwrap().1
}

#[test]
fn every_method_lowers_the_error_over_its_first_iterations() {
    for photons in [None, Some(2e4)] {
        let pr = problem(64, 20, photons);
        let zero = pr.error(Array2::zeros((64, 64)).view());
        for kind in [
            ProjectorKind::Joseph,
            ProjectorKind::Line,
            ProjectorKind::Voxel,
        ] {
            for (name, alg) in methods() {
                let e = pr.errors(kind, &options(alg, 4));
                println!("{photons:?} {kind:?} {name}: {e:.4?}");
                assert!(e[0] < zero, "{kind:?} {name}: {e:?}");
                for w in e.windows(2).take(2) {
                    assert!(w[1] < w[0], "{kind:?} {name} ({photons:?}): {e:?}");
                }
            }
        }
    }
}

#[test]
fn art_and_block_it_need_fewer_sweeps_than_sirt() {
    for photons in [None, Some(2e4)] {
        let pr = problem(64, 20, photons);
        let sirt = pr.errors(ProjectorKind::Joseph, &options(find("sirt"), 30));
        let target = sirt[29];
        for name in ["art", "block-it", "sart"] {
            let e = pr.errors(ProjectorKind::Joseph, &options(find(name), 6));
            let n = reach(&e, target);
            println!(
                "{photons:?}: {name} reaches SIRT's 30-iteration error {target:.4} after {n:?}"
            );
            assert!(matches!(n, Some(k) if k <= 6), "{name}: {e:?} vs {target}");
        }
    }
}

#[test]
fn iterative_beats_fbp_on_sparse_data() {
    for photons in [None, Some(2e4)] {
        let pr = problem(64, 20, photons);
        let fbp = pr.fbp();
        let sirt = pr.errors(ProjectorKind::Joseph, &options(find("sirt"), 100));
        let blockit = pr.errors(ProjectorKind::Voxel, &options(find("block-it"), 10));
        println!(
            "{photons:?}: FBP {fbp:.4}, SIRT(100) {:.4}, BLOCK-IT(10) {:.4}",
            sirt[99], blockit[9]
        );
        assert!(sirt[99] < fbp);
        assert!(blockit[9] < 0.7 * fbp);
    }
}

/// A dense copy of `A` (rows: projection-major rays) from `trace_ray`.
fn dense(p: &dyn Projector<f64>) -> Array2<f64> {
    let (ny, nx) = p.image_dim();
    let mut a = Array2::zeros((p.n_angles() * p.n_bins(), ny * nx));
    for ang in 0..p.n_angles() {
        for k in 0..p.n_bins() {
            p.trace_ray(ang, k, &mut |j, w| a[[ang * p.n_bins() + k, j]] += w);
        }
    }
    a
}

#[test]
fn power_iteration_finds_the_operator_norm() {
    let geometry = ParallelGeometry::new(uniform_angles(9, PI), 18).unwrap();
    let grid = SliceGrid::new(16, 14).unwrap();
    let angles = all_angles(9);
    for kind in [ProjectorKind::Joseph, ProjectorKind::Line] {
        let p = projector::<f64>(kind, &geometry, &grid, None).unwrap();
        let a = dense(p.as_ref());
        // The dense matrix reproduces the forward projection.
        let x = Array2::from_shape_fn((14, 16), |(i, j)| ((i * 7 + j * 3) % 5) as f64);
        let mut ax = Array2::zeros((9, 18));
        p.forward_slice(x.view(), &angles, ax.view_mut()).unwrap();
        let dense_ax = a.dot(&x.to_shape(14 * 16).unwrap());
        let d = (&dense_ax - &ax.to_shape(9 * 18).unwrap())
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        assert!(d < 1e-10);
        // Largest eigenvalue of AᵀA by plain dense power iteration.
        let ata = a.t().dot(&a);
        let mut v = ndarray::Array1::<f64>::ones(ata.nrows());
        let mut lambda = 0.0;
        for _ in 0..5000 {
            let w = ata.dot(&v);
            lambda = w.dot(&w).sqrt() / v.dot(&v).sqrt();
            v = &w / w.dot(&w).sqrt();
        }
        let rho = spectral_radius(p.as_ref(), Weighting::Landweber, &angles, 500).unwrap();
        println!("{kind:?}: ‖A‖² dense {lambda:.6}, power iteration {rho:.6}");
        assert!((rho - lambda).abs() < 1e-3 * lambda);
        // Row/column-sum weights: T·Aᵀ·M·A has spectral radius 1.
        let rho = spectral_radius(p.as_ref(), Weighting::RowColumnSums, &angles, 50).unwrap();
        assert!((rho - 1.0).abs() < 1e-3, "{rho}");
        // The default Landweber relaxation is below the convergence bound 2/‖A‖².
        let l = default_relaxation(p.as_ref(), &Algorithm::Sirt(Weighting::Landweber)).unwrap();
        assert!(l > 0.0 && l < 2.0 / lambda, "{l} vs {}", 2.0 / lambda);
    }
}

#[test]
fn landweber_residuals_never_increase_and_are_recorded() {
    let pr = problem(32, 12, None);
    let p = projector::<f32>(ProjectorKind::Joseph, &pr.geometry, &pr.grid, None).unwrap();
    let opts = IterativeOptions {
        algorithm: Algorithm::Sirt(Weighting::Landweber),
        iterations: 25,
        ..IterativeOptions::default()
    };
    let r = reconstruct(p.as_ref(), pr.sino.view(), None, &opts, &mut |_| true).unwrap();
    assert_eq!(r.residuals.len(), 25);
    assert_eq!(r.iterations, 25);
    assert_eq!(r.stop, StopReason::Iterations);
    for w in r.residuals.windows(2) {
        assert!(w[1] <= w[0] * (1.0 + 1e-6), "{:?}", r.residuals);
    }
    assert!(r.residuals[24] < 0.5 * r.residuals[0]);
}

/// SIRT without residual tracking (which skips the forward projection
/// after the last update) gives the same iterate, bit for bit, as with it,
/// for every weighting; the callback sees every iteration, the last one
/// without a residual.
#[test]
fn untracked_sirt_gives_the_same_iterate() {
    let pr = problem(32, 12, None);
    let p = projector::<f32>(ProjectorKind::Joseph, &pr.geometry, &pr.grid, None).unwrap();
    for w in [
        Weighting::Landweber,
        Weighting::Cimmino,
        Weighting::RowColumnSums,
    ] {
        let tracked = IterativeOptions {
            algorithm: Algorithm::Sirt(w),
            iterations: 7,
            constraint: Constraint::non_negative(),
            ..IterativeOptions::default()
        };
        let untracked = IterativeOptions {
            track_residual: false,
            ..tracked
        };
        let a = reconstruct(p.as_ref(), pr.sino.view(), None, &tracked, &mut |_| true).unwrap();
        let mut seen = Vec::new();
        let b = reconstruct(p.as_ref(), pr.sino.view(), None, &untracked, &mut |info| {
            seen.push((info.iteration, info.residual.is_some()));
            true
        })
        .unwrap();
        assert_eq!(a.x, b.x, "{w:?}");
        assert_eq!(a.residuals.len(), 7);
        assert!(b.residuals.is_empty());
        assert_eq!((a.iterations, b.iterations), (7, 7));
        assert_eq!(seen.len(), 7);
        assert_eq!(seen.last(), Some(&(7, false)), "{w:?}");
    }
}

#[test]
fn constraints_hold_after_every_iteration() {
    let pr = problem(32, 12, Some(5e3));
    for kind in [
        ProjectorKind::Joseph,
        ProjectorKind::Line,
        ProjectorKind::Voxel,
    ] {
        let p = projector::<f32>(kind, &pr.geometry, &pr.grid, None).unwrap();
        for (name, alg) in methods() {
            for c in [Constraint::non_negative(), Constraint::bounded(0.0, 0.25)] {
                let opts = IterativeOptions {
                    algorithm: alg,
                    iterations: 3,
                    constraint: c,
                    ..IterativeOptions::default()
                };
                let mut ok = true;
                let hi = c.max.unwrap_or(f64::INFINITY) as f32;
                reconstruct(p.as_ref(), pr.sino.view(), None, &opts, &mut |info| {
                    ok &= info.x.iter().all(|&v| (0.0..=hi).contains(&v));
                    true
                })
                .unwrap();
                assert!(ok, "{kind:?} {name} {c:?}");
            }
        }
        // Without a constraint, negative values appear (the constraint
        // really does something).
        let opts = IterativeOptions {
            algorithm: find("art"),
            iterations: 2,
            ..IterativeOptions::default()
        };
        let r = reconstruct(p.as_ref(), pr.sino.view(), None, &opts, &mut |_| true).unwrap();
        assert!(r.x.iter().any(|&v| v < 0.0));
    }
}

#[test]
fn tolerance_and_callback_stop_the_iteration() {
    let pr = problem(32, 12, None);
    let p = projector::<f32>(ProjectorKind::Joseph, &pr.geometry, &pr.grid, None).unwrap();
    let first = reconstruct(
        p.as_ref(),
        pr.sino.view(),
        None,
        &options(find("sirt"), 30),
        &mut |_| true,
    )
    .unwrap();
    assert_eq!(first.residuals.len(), 30);
    let mut opts = options(find("sirt"), 200);
    opts.tolerance = Some(first.residuals[19]);
    let r = reconstruct(p.as_ref(), pr.sino.view(), None, &opts, &mut |_| true).unwrap();
    assert_eq!(r.stop, StopReason::Tolerance);
    assert_eq!(r.iterations, 20);
    assert_eq!(r.residuals[..], first.residuals[..20]);

    let opts = options(find("block-it"), 10);
    let mut seen = Vec::new();
    let r = reconstruct(p.as_ref(), pr.sino.view(), None, &opts, &mut |info| {
        seen.push(info.iteration);
        info.iteration < 3
    })
    .unwrap();
    assert_eq!(seen, vec![1, 2, 3]);
    assert_eq!((r.iterations, r.stop), (3, StopReason::Callback));
    let three = reconstruct(
        p.as_ref(),
        pr.sino.view(),
        None,
        &options(find("block-it"), 3),
        &mut |_| true,
    )
    .unwrap();
    assert_eq!(r.x, three.x);
    // Continuing from an initial volume equals running longer.
    let more = reconstruct(
        p.as_ref(),
        pr.sino.view(),
        Some(three.x.view()),
        &options(find("block-it"), 2),
        &mut |_| true,
    )
    .unwrap();
    let five = reconstruct(
        p.as_ref(),
        pr.sino.view(),
        None,
        &options(find("block-it"), 5),
        &mut |_| true,
    )
    .unwrap();
    assert_eq!(more.x, five.x);
}

#[test]
fn stacks_are_reconstructed_like_single_slices() {
    let pr = problem(32, 12, None);
    let p = projector::<f32>(ProjectorKind::Joseph, &pr.geometry, &pr.grid, None).unwrap();
    let mut stack = Array3::zeros((2, 12, 32));
    stack
        .index_axis_mut(Axis(0), 0)
        .assign(&pr.sino.index_axis(Axis(0), 0));
    stack
        .index_axis_mut(Axis(0), 1)
        .assign(&pr.sino.index_axis(Axis(0), 0).mapv(|v| 0.5 * v));
    for name in ["sirt", "block-it", "block-parallel", "art-random"] {
        let opts = IterativeOptions {
            relaxation: Some(0.5),
            ..options(find(name), 3)
        };
        let both = reconstruct(p.as_ref(), stack.view(), None, &opts, &mut |_| true).unwrap();
        for z in 0..2 {
            let one = stack.index_axis(Axis(0), z).insert_axis(Axis(0));
            let single = reconstruct(p.as_ref(), one, None, &opts, &mut |_| true).unwrap();
            assert_eq!(
                single.x.index_axis(Axis(0), 0),
                both.x.index_axis(Axis(0), z),
                "{name} slice {z}"
            );
        }
    }
}

#[test]
fn f64_and_f32_agree() {
    let pr = problem(32, 12, None);
    let p32 = projector::<f32>(ProjectorKind::Line, &pr.geometry, &pr.grid, None).unwrap();
    let p64 = projector::<f64>(ProjectorKind::Line, &pr.geometry, &pr.grid, None).unwrap();
    for name in ["sirt", "cimmino", "block-it", "art"] {
        let opts = options(find(name), 5);
        let a = reconstruct(p32.as_ref(), pr.sino.view(), None, &opts, &mut |_| true).unwrap();
        let b = reconstruct(
            p64.as_ref(),
            pr.sino.mapv(|v| v as f64).view(),
            None,
            &opts,
            &mut |_| true,
        )
        .unwrap();
        let d = (&a.x.mapv(|v| v as f64) - &b.x)
            .mapv(|v| v * v)
            .sum()
            .sqrt()
            / b.x.mapv(|v| v * v).sum().sqrt();
        assert!(d < 1e-4, "{name}: {d}");
        assert!((a.relaxation - b.relaxation).abs() < 1e-4 * b.relaxation);
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let pr = problem(16, 6, None);
    let p = projector::<f32>(ProjectorKind::Joseph, &pr.geometry, &pr.grid, None).unwrap();
    let run = |sino: ndarray::ArrayView3<'_, f32>, opts: IterativeOptions| {
        reconstruct(p.as_ref(), sino, None, &opts, &mut |_| true).map(|_| ())
    };
    let base = options(find("sirt"), 2);
    let param = |r: Result<(), CoreError>| matches!(r, Err(CoreError::Parameter(_)));
    for l in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(
            param(run(
                pr.sino.view(),
                IterativeOptions {
                    relaxation: Some(l),
                    ..base
                }
            )),
            "λ = {l}"
        );
    }
    assert!(param(run(
        pr.sino.view(),
        IterativeOptions {
            iterations: 0,
            ..base
        }
    )));
    assert!(param(run(
        pr.sino.view(),
        IterativeOptions {
            tolerance: Some(-1.0),
            ..base
        }
    )));
    assert!(param(run(
        pr.sino.view(),
        IterativeOptions {
            constraint: Constraint::bounded(1.0, 0.0),
            ..base
        }
    )));
    assert!(param(run(
        pr.sino.view(),
        IterativeOptions {
            constraint: Constraint {
                min: Some(f64::NAN),
                max: None
            },
            ..base
        }
    )));
    for alg in [
        Algorithm::BlockSequential {
            weighting: Weighting::Cimmino,
            projections_per_block: 0,
        },
        Algorithm::BlockParallel {
            projections_per_block: 0,
        },
    ] {
        assert!(param(run(
            pr.sino.view(),
            IterativeOptions {
                algorithm: alg,
                ..base
            }
        )));
    }
    let mut nan = pr.sino.clone();
    nan[[0, 2, 3]] = f32::NAN;
    let e = run(nan.view(), base).unwrap_err();
    assert!(matches!(e, CoreError::Data(_)), "{e}");
    println!("{e}");
    let wrong = Array3::<f32>::zeros((1, 5, 16));
    assert!(matches!(run(wrong.view(), base), Err(CoreError::Shape(_))));
    let wrong = Array3::<f32>::zeros((1, 6, 17));
    assert!(matches!(run(wrong.view(), base), Err(CoreError::Shape(_))));
    let x0 = Array3::<f32>::zeros((1, 16, 15));
    let r = reconstruct(
        p.as_ref(),
        pr.sino.view(),
        Some(x0.view()),
        &base,
        &mut |_| true,
    );
    assert!(matches!(r, Err(CoreError::Shape(_))));
    // A relaxation far above the bound diverges: reported, not returned.
    let r = run(
        pr.sino.view(),
        IterativeOptions {
            algorithm: Algorithm::Sirt(Weighting::Landweber),
            relaxation: Some(1e6),
            iterations: 200,
            constraint: Constraint::none(),
            ..base
        },
    );
    assert!(matches!(r, Err(CoreError::Data(_))), "{r:?}");
}
