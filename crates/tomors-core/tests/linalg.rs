//! The operator and vector traits (`tomors_core::linalg`) and the solver
//! written once over them: host vector operations against naive loops and
//! against the traits' default (fused) implementations, reproducible
//! reductions, adjointness and block views through the traits, the
//! generic solver against a copy of the pre-trait loops, unsupported
//! methods, divergence.

use ndarray::{s, Array2, Array3, Axis, Zip};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::error::{CoreError, Result};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    all_angles, default_relaxation, reconstruct, solve, Algorithm, ConeJosephProjector, Constraint,
    IterativeOptions, JosephProjector, LineProjector, Projector, StackOperator, Weighting,
};
use tomors_core::linalg::{LinearOperator, Vector};
use tomors_core::phantom::Phantom2d;
use tomors_core::{ParallelGeometry, SliceGrid};

const PI: f32 = std::f32::consts::PI;

fn random3(dim: (usize, usize, usize), rng: &mut StdRng) -> Array3<f64> {
    Array3::from_shape_fn(dim, |_| rng.gen_range(-1.0..1.0))
}

// ---------------------------------------------------------------- vectors

#[test]
fn host_vector_ops_match_naive_loops() {
    let mut rng = StdRng::seed_from_u64(1);
    // 3 slices of 150 × 130 = 19 500 elements: more than one chunk per slice.
    let dim = (3, 150, 130);
    let a = random3(dim, &mut rng);
    let b = random3(dim, &mut rng);
    let w1 = random3((1, 150, 130), &mut rng); // one slice, broadcast
    let w1b = w1.broadcast(dim).unwrap().to_owned();

    let mut v = a.clone();
    v.fill(2.5).unwrap();
    assert!(v.iter().all(|&x| x == 2.5));
    v.copy_from(&b).unwrap();
    assert_eq!(v, b);
    let mut v = a.clone();
    v.scale(-0.75).unwrap();
    assert_eq!(v, a.mapv(|x| -0.75 * x));
    let mut v = a.clone();
    v.axpy(0.3, &b).unwrap();
    assert_eq!(v, Zip::from(&a).and(&b).map_collect(|&x, &y| x + 0.3 * y));
    let mut v = a.clone();
    v.mul_assign(&b).unwrap();
    assert_eq!(v, &a * &b);
    let mut v = a.clone();
    v.mul_assign(&w1).unwrap();
    assert_eq!(v, &a * &w1b, "a one-slice multiplier broadcasts");
    let mut v = a.clone();
    v.clip(Some(-0.5), Some(0.25)).unwrap();
    assert_eq!(v, a.mapv(|x| x.clamp(-0.5, 0.25)));
    let mut v = a.clone();
    v.clip(None, Some(0.0)).unwrap();
    assert_eq!(v, a.mapv(|x| x.min(0.0)));

    // Floored inverse: entries at or below 1e-3 · max become 0.
    let mut c = a.mapv(f64::abs);
    c[[0, 0, 0]] = 0.0;
    c[[1, 2, 3]] = 5.0; // the maximum
    c[[2, 4, 5]] = 4e-3; // below 5e-3 = 1e-3 · 5: dropped
    c[[2, 4, 6]] = 6e-3; // kept
    let mut v = c.clone();
    v.invert_floored(1e-3).unwrap();
    assert_eq!(v, c.mapv(|x| if x > 5e-3 { 1.0 / x } else { 0.0 }));
    assert_eq!(v[[2, 4, 5]], 0.0);
    assert_eq!(v[[2, 4, 6]], 1.0 / 6e-3);

    // Reductions in f64 against a sequential sum (different order: rounding).
    let naive_dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let naive_n2: f64 = a.iter().map(|x| x * x).sum();
    assert!((a.dot(&b).unwrap() - naive_dot).abs() <= 1e-12 * naive_n2);
    assert!((a.norm_sq().unwrap() - naive_n2).abs() <= 1e-12 * naive_n2);
    assert!(a.all_finite().unwrap());
    let mut nan = a.clone();
    nan[[2, 149, 129]] = f64::NAN;
    assert!(!nan.all_finite().unwrap());
    nan[[2, 149, 129]] = f64::NEG_INFINITY;
    assert!(!nan.all_finite().unwrap());

    // Fused operations.
    let mut v = a.clone();
    v.residual_weighted(&b, Some(&w1)).unwrap();
    assert_eq!(v, (&b - &a) * &w1b);
    let mut v = a.clone();
    let r2 = v.residual_weighted_norm_sq(&b, Some(&w1)).unwrap();
    assert_eq!(v, (&b - &a) * &w1b);
    let d = &b - &a;
    let naive_r2: f64 = d.iter().map(|x| x * x).sum();
    assert!((r2 - naive_r2).abs() <= 1e-12 * naive_r2);
    let mut v = a.clone();
    v.update_clipped(0.7, &b, Some(&w1), Some(-0.2), None)
        .unwrap();
    let want = Zip::from(&a)
        .and(&b)
        .and(&w1b)
        .map_collect(|&x, &g, &t| (x + 0.7 * t * g).max(-0.2));
    assert_eq!(v, want);

    // Shapes that do not fit are errors.
    let wrong = Array3::<f64>::zeros((2, 150, 130));
    let mut v = a.clone();
    assert!(matches!(v.axpy(1.0, &wrong), Err(CoreError::Shape(_))));
    assert!(matches!(v.copy_from(&w1), Err(CoreError::Shape(_))));
    assert!(matches!(v.dot(&wrong), Err(CoreError::Shape(_))));
    assert!(matches!(
        v.residual_weighted(&w1, None),
        Err(CoreError::Shape(_))
    ));
}

#[test]
fn reductions_do_not_depend_on_the_thread_count() {
    let mut rng = StdRng::seed_from_u64(2);
    let a = random3((2, 300, 257), &mut rng).mapv(|v| v as f32);
    let b = random3((2, 300, 257), &mut rng).mapv(|v| v as f32);
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut r = a.clone();
            let r2 = r.residual_weighted_norm_sq(&b, None).unwrap();
            (a.dot(&b).unwrap(), a.norm_sq().unwrap(), r2)
        })
    };
    let one = run(1);
    for threads in [2, 3, 7] {
        assert_eq!(run(threads), one, "{threads} threads");
    }
}

/// A vector that implements only the required operations, so that the
/// traits' default fused operations run (delegating to the host arrays).
#[derive(Clone, Debug, PartialEq)]
struct Plain(Array3<f64>);

impl Vector for Plain {
    type Elem = f64;
    fn len(&self) -> usize {
        self.0.len()
    }
    fn zeros_like(&self) -> Result<Self> {
        Ok(Plain(self.0.zeros_like()?))
    }
    fn fill(&mut self, v: f64) -> Result<()> {
        self.0.fill(v)
    }
    fn copy_from(&mut self, x: &Self) -> Result<()> {
        self.0.copy_from(&x.0)
    }
    fn scale(&mut self, a: f64) -> Result<()> {
        Vector::scale(&mut self.0, a)
    }
    fn axpy(&mut self, a: f64, x: &Self) -> Result<()> {
        self.0.axpy(a, &x.0)
    }
    fn mul_assign(&mut self, x: &Self) -> Result<()> {
        Vector::mul_assign(&mut self.0, &x.0)
    }
    fn invert_floored(&mut self, rel_floor: f64) -> Result<()> {
        self.0.invert_floored(rel_floor)
    }
    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> Result<()> {
        self.0.clip(min, max)
    }
    fn dot(&self, x: &Self) -> Result<f64> {
        Vector::dot(&self.0, &x.0)
    }
    fn norm_sq(&self) -> Result<f64> {
        self.0.norm_sq()
    }
    fn all_finite(&self) -> Result<bool> {
        self.0.all_finite()
    }
}

#[test]
fn default_fused_operations_equal_the_host_overrides() {
    let mut rng = StdRng::seed_from_u64(3);
    let dim = (2, 40, 33);
    let a = random3(dim, &mut rng);
    let b = random3(dim, &mut rng);
    let w = random3((1, 40, 33), &mut rng);
    for weight in [None, Some(&w)] {
        let pw = weight.map(|w| Plain(w.clone()));
        let (mut h, mut p) = (a.clone(), Plain(a.clone()));
        h.residual_weighted(&b, weight).unwrap();
        p.residual_weighted(&Plain(b.clone()), pw.as_ref()).unwrap();
        assert_eq!(p.0, h);
        let (mut h, mut p) = (a.clone(), Plain(a.clone()));
        let hr = h.residual_weighted_norm_sq(&b, weight).unwrap();
        let pr = p
            .residual_weighted_norm_sq(&Plain(b.clone()), pw.as_ref())
            .unwrap();
        assert_eq!((p.0, pr), (h, hr));
        for (lo, hi) in [(None, None), (Some(-0.1), Some(0.4))] {
            let (mut h, mut p) = (a.clone(), Plain(a.clone()));
            h.update_clipped(1.3, &b, weight, lo, hi).unwrap();
            p.update_clipped(1.3, &Plain(b.clone()), pw.as_ref(), lo, hi)
                .unwrap();
            assert_eq!(p.0, h);
        }
    }
}

// -------------------------------------------------------------- operators

/// A parallel problem: the 48² Shepp–Logan, 3 slices (scaled copies), 16
/// angles.
struct Problem {
    geometry: ParallelGeometry,
    grid: SliceGrid,
    sino: Array3<f64>,
}

fn problem() -> Problem {
    let n = 48;
    let geometry = ParallelGeometry::new(uniform_angles(16, PI), n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let one = Phantom2d::shepp_logan()
        .project(&geometry, n as f64 / 2.0)
        .mapv(|v| v as f64);
    let mut sino = Array3::zeros((3, 16, n));
    for s in 0..3 {
        sino.index_axis_mut(Axis(0), s)
            .assign(&one.mapv(|v| v * (1.0 + 0.25 * s as f64)));
    }
    Problem {
        geometry,
        grid,
        sino,
    }
}

#[test]
fn adjointness_through_the_traits() {
    let pr = problem();
    let joseph = JosephProjector::new(&pr.geometry, &pr.grid).unwrap();
    let line = LineProjector::new(&pr.geometry, &pr.grid).unwrap();
    let g = ConeGeometry::new(uniform_angles(7, 2.0 * PI), 60.0, 40.0, 14, 15, 1.5, 1.5).unwrap();
    let v = ConeVolume::new(10, 9, 8, 1.0).unwrap();
    let cone = ConeJosephProjector::new(&g, &v).unwrap();
    let projectors: [(&dyn Projector<f64>, usize); 3] = [(&joseph, 3), (&line, 2), (&cone, 1)];
    let mut rng = StdRng::seed_from_u64(4);
    for (p, slices) in projectors {
        let op = StackOperator::new(p, slices);
        assert!(op.is_matched());
        let n = op.n_projections();
        let subset: Vec<usize> = (0..n).rev().filter(|a| a % 3 != 1).collect();
        for angles in [all_angles(n), subset] {
            let mut x = op.domain_zeros().unwrap();
            x.iter_mut().for_each(|v| *v = rng.gen_range(-1.0..1.0));
            let mut y = op.range_zeros(&angles).unwrap();
            y.iter_mut().for_each(|v| *v = rng.gen_range(-1.0..1.0));
            let mut ax = op.range_zeros(&angles).unwrap();
            let mut aty = op.domain_zeros().unwrap();
            op.forward(&x, &angles, &mut ax).unwrap();
            op.backward(&y, &angles, &mut aty).unwrap();
            let lhs = ax.dot(&y).unwrap();
            let rhs = x.dot(&aty).unwrap();
            let e = (lhs - rhs).abs() / (ax.norm_sq().unwrap() * y.norm_sq().unwrap()).sqrt();
            println!("{} × {slices}, {} angles: {e:.2e}", op.name(), angles.len());
            assert!(e < 1e-12, "{}: {e}", op.name());
        }
    }
}

#[test]
fn block_views_and_weights_through_select() {
    let pr = problem();
    let p = JosephProjector::new(&pr.geometry, &pr.grid).unwrap();
    let op = StackOperator::<f64, _>::new(&p, 3);
    let n = op.n_projections();
    let all = all_angles(n);
    let mut rng = StdRng::seed_from_u64(5);
    let mut x = op.domain_zeros().unwrap();
    x.iter_mut().for_each(|v| *v = rng.gen_range(0.0..1.0));
    let mut full = op.range_zeros(&all).unwrap();
    op.forward(&x, &all, &mut full).unwrap();
    let block = vec![11, 3, 4, 15];
    let mut direct = op.range_zeros(&block).unwrap();
    op.forward(&x, &block, &mut direct).unwrap();
    // The block's rows of A·x, two ways.
    assert_eq!(op.select(&full, &block).unwrap(), direct);
    let mut into = op.range_zeros(&block).unwrap();
    op.select_into(&full, &block, &mut into).unwrap();
    assert_eq!(into, direct);
    // Weights are one slice and select per block like data.
    let sums = op.row_sums(&all).unwrap();
    assert_eq!(sums.dim(), (1, n, pr.geometry.n_bins()));
    assert_eq!(
        op.select(&sums, &block).unwrap(),
        op.row_sums(&block).unwrap()
    );
    let norms = op.row_norms_sq(&block).unwrap();
    let rays = op.rays().expect("CPU projectors offer rays");
    let host = rays.ray_norms_sq(&block).unwrap();
    assert_eq!(norms.index_axis(Axis(0), 0), host);
    // Column sums of a block: B_block · 1, one slice.
    let cs = op.column_sums(&block).unwrap();
    let mut ones = op.range_zeros(&block).unwrap();
    ones.fill(1.0).unwrap();
    let mut bt = op.domain_zeros().unwrap();
    op.backward(&ones, &block, &mut bt).unwrap();
    // (the stack back projection sums in another order than one slice's)
    let diff = (&cs.index_axis(Axis(0), 0) - &bt.index_axis(Axis(0), 1))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let max = cs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(diff <= 1e-13 * max, "{diff} vs {max}");
    // Bad block shapes and indices are errors.
    let mut wrong = op.range_zeros(&block[..2]).unwrap();
    assert!(matches!(
        op.select_into(&full, &block, &mut wrong),
        Err(CoreError::Shape(_))
    ));
    assert!(matches!(
        op.select(&full, &[16]),
        Err(CoreError::Parameter(_))
    ));
}

// ---------------------------------------------------------------- solver

/// The iteration as `reconstruct` ran it before the traits (a copy of the
/// old loop, on the `Projector` API and ndarray directly): SIRT with
/// weights, or block-sequential steps, with a box constraint.
fn old_style(
    p: &dyn Projector<f64>,
    b: &Array3<f64>,
    weighting: Weighting,
    per: usize,
    lambda: f64,
    iterations: usize,
    lo: f64,
) -> Array3<f64> {
    let invert = |a: &mut Array2<f64>| {
        let max = a.iter().fold(0.0f64, |m, &v| m.max(v));
        let floor = max * 1e-6;
        a.mapv_inplace(|v| if v > floor && v > 0.0 { 1.0 / v } else { 0.0 });
    };
    let (ns, na, _) = b.dim();
    let (ny, nx) = p.image_dim();
    let all = all_angles(na);
    let m = match weighting {
        Weighting::Landweber => None,
        Weighting::Cimmino => Some(p.row_norms_sq(&all).unwrap()),
        Weighting::RowColumnSums => Some(p.row_sums(&all).unwrap()),
    };
    let m = m.map(|mut m| {
        invert(&mut m);
        m
    });
    let mut x = Array3::<f64>::zeros((ns, ny, nx));
    let mut g = x.clone();
    for _ in 0..iterations {
        for start in (0..na).step_by(per) {
            let angles: Vec<usize> = (start..(start + per).min(na)).collect();
            let range = start..start + angles.len();
            let mut r = Array3::zeros((ns, angles.len(), b.dim().2));
            p.forward(x.view(), &angles, r.view_mut()).unwrap();
            Zip::from(&mut r)
                .and(&b.slice(s![.., range.clone(), ..]))
                .for_each(|a, &b| *a = b - *a);
            if let Some(m) = &m {
                let mb = m.slice(s![range, ..]);
                r.outer_iter_mut().for_each(|mut s| s *= &mb);
            }
            p.back(r.view(), &angles, g.view_mut()).unwrap();
            let t = (weighting == Weighting::RowColumnSums).then(|| {
                let mut t = p.column_sums(&angles).unwrap();
                invert(&mut t);
                t
            });
            for (mut xs, gs) in x.outer_iter_mut().zip(g.outer_iter()) {
                match &t {
                    Some(t) => Zip::from(&mut xs)
                        .and(&gs)
                        .and(t)
                        .for_each(|x, &g, &t| *x = (*x + lambda * t * g).max(lo)),
                    None => Zip::from(&mut xs)
                        .and(&gs)
                        .for_each(|x, &g| *x = (*x + lambda * g).max(lo)),
                }
            }
        }
    }
    x
}

/// The operator of a `StackOperator`, on [`Plain`] vectors and without
/// rays: the solver then runs the traits' default fused operations and
/// has no ray access.
struct PlainOp<'a>(StackOperator<'a, f64, dyn Projector<f64> + 'a>);

impl LinearOperator for PlainOp<'_> {
    type Domain = Plain;
    type Range = Plain;
    fn n_projections(&self) -> usize {
        self.0.n_projections()
    }
    fn domain_zeros(&self) -> Result<Plain> {
        self.0.domain_zeros().map(Plain)
    }
    fn range_zeros(&self, angles: &[usize]) -> Result<Plain> {
        self.0.range_zeros(angles).map(Plain)
    }
    fn forward(&self, x: &Plain, angles: &[usize], y: &mut Plain) -> Result<()> {
        self.0.forward(&x.0, angles, &mut y.0)
    }
    fn backward(&self, y: &Plain, angles: &[usize], x: &mut Plain) -> Result<()> {
        self.0.backward(&y.0, angles, &mut x.0)
    }
    fn select_into(&self, y: &Plain, angles: &[usize], out: &mut Plain) -> Result<()> {
        self.0.select_into(&y.0, angles, &mut out.0)
    }
    fn select(&self, y: &Plain, angles: &[usize]) -> Result<Plain> {
        self.0.select(&y.0, angles).map(Plain)
    }
    fn is_matched(&self) -> bool {
        self.0.is_matched()
    }
    fn row_sums(&self, angles: &[usize]) -> Result<Plain> {
        self.0.row_sums(angles).map(Plain)
    }
    fn column_sums(&self, angles: &[usize]) -> Result<Plain> {
        self.0.column_sums(angles).map(Plain)
    }
}

fn opts(algorithm: Algorithm, lambda: f64, iterations: usize) -> IterativeOptions {
    IterativeOptions {
        algorithm,
        iterations,
        relaxation: Some(lambda),
        constraint: Constraint::non_negative(),
        ..IterativeOptions::default()
    }
}

#[test]
fn generic_solver_reproduces_the_old_loops_exactly() {
    let pr = problem();
    let joseph = JosephProjector::new(&pr.geometry, &pr.grid).unwrap();
    let p: &dyn Projector<f64> = &joseph;
    // (weighting, projections per block, relaxation factor × default)
    let cases = [
        (Weighting::Landweber, 16, 1.5),
        (Weighting::Cimmino, 16, 1.5),
        (Weighting::RowColumnSums, 16, 1.0),
        (Weighting::RowColumnSums, 1, 1.0), // SART
        (Weighting::Cimmino, 3, 0.8),       // BLOCK-IT, short last block
        (Weighting::RowColumnSums, 5, 1.2), // short last block
    ];
    for (weighting, per, factor) in cases {
        let algorithm = if per >= 16 {
            Algorithm::Sirt(weighting)
        } else {
            Algorithm::BlockSequential {
                weighting,
                projections_per_block: per,
            }
        };
        let lambda = factor * default_relaxation(p, &algorithm).unwrap();
        let want = old_style(p, &pr.sino, weighting, per, lambda, 4, 0.0);
        let got = reconstruct(
            p,
            pr.sino.view(),
            None,
            &opts(algorithm, lambda, 4),
            &mut |_| true,
        )
        .unwrap();
        assert_eq!(got.x, want, "{algorithm:?}: reconstruct");
        // The same through solve() on a StackOperator directly.
        let op = StackOperator::new(p, 3);
        let mut x = op.domain_zeros().unwrap();
        solve(
            &op,
            &pr.sino,
            &mut x,
            &opts(algorithm, lambda, 4),
            &mut |_| true,
        )
        .unwrap();
        assert_eq!(x, want, "{algorithm:?}: solve");
        // And through the default fused operations of the vector trait
        // (what a new vector type gets before it overrides them); Cimmino
        // needs row norms, which the plain operator does not offer.
        if weighting != Weighting::Cimmino {
            let pop = PlainOp(StackOperator::new(p, 3));
            let mut x = pop.domain_zeros().unwrap();
            let mut seen = 0;
            let report = solve(
                &pop,
                &Plain(pr.sino.clone()),
                &mut x,
                &opts(algorithm, lambda, 4),
                &mut |state| {
                    seen = state.iteration;
                    state.x.0.iter().all(|&v| v >= 0.0)
                },
            )
            .unwrap();
            assert_eq!(seen, 4);
            assert_eq!(report.iterations, 4);
            assert_eq!(report.residuals.len(), 4);
            assert_eq!(x.0, want, "{algorithm:?}: default fused ops");
        }
    }
}

#[test]
fn methods_the_operator_cannot_run_are_unsupported() {
    let pr = problem();
    let joseph = JosephProjector::new(&pr.geometry, &pr.grid).unwrap();
    let pop = PlainOp(StackOperator::new(&joseph as &dyn Projector<f64>, 3));
    let b = Plain(pr.sino.clone());
    for algorithm in [
        Algorithm::Art {
            order: Default::default(),
        },
        Algorithm::BlockParallel {
            projections_per_block: 4,
        },
        Algorithm::Sirt(Weighting::Cimmino),
    ] {
        let mut x = pop.domain_zeros().unwrap();
        let e = solve(&pop, &b, &mut x, &opts(algorithm, 1.0, 2), &mut |_| true).unwrap_err();
        println!("{algorithm:?}: {e}");
        assert!(matches!(e, CoreError::Unsupported { .. }), "{e}");
    }
}

#[test]
fn divergence_stops_with_an_error_naming_the_relaxation() {
    let pr = problem();
    let joseph = JosephProjector::new(&pr.geometry, &pr.grid).unwrap();
    // Issue 13 item 11: `--algorithm sirt --relaxation 5` (twice and a half
    // the convergence bound 2 of row/column-sum SIRT).
    for (algorithm, lambda) in [
        (Algorithm::Sirt(Weighting::RowColumnSums), 5.0),
        (
            Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: 4,
            },
            5.0,
        ),
    ] {
        let mut residuals = Vec::new();
        let options = IterativeOptions {
            algorithm,
            iterations: 500,
            relaxation: Some(lambda),
            constraint: Constraint::none(),
            ..IterativeOptions::default()
        };
        let e = reconstruct(
            &joseph as &dyn Projector<f64>,
            pr.sino.view(),
            None,
            &options,
            &mut |info| {
                residuals.push(info.residual.unwrap());
                true
            },
        )
        .unwrap_err();
        let msg = e.to_string();
        println!("{algorithm:?}: {msg} after {residuals:.3?}");
        assert!(matches!(e, CoreError::Data(_)));
        assert!(
            msg.contains("--relaxation") && msg.contains("diverged"),
            "{msg}"
        );
        assert!(msg.contains("5.0000e0"), "names λ: {msg}");
        // Stopped at the first residual beyond 1000× the smallest (the
        // initial one, 1, included), long before overflow.
        let min = residuals.iter().copied().fold(1.0, f64::min);
        assert!(residuals.iter().all(|&r| r <= 1e3 * min), "{residuals:?}");
        assert!(residuals.len() < 100, "{} iterations", residuals.len());
    }
    // A convergent run with the same data is not flagged.
    let r = reconstruct(
        &joseph as &dyn Projector<f64>,
        pr.sino.view(),
        None,
        &IterativeOptions {
            iterations: 50,
            ..IterativeOptions::default()
        },
        &mut |_| true,
    )
    .unwrap();
    assert_eq!(r.iterations, 50);
}
