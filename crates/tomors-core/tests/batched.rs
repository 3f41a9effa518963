//! The solver's ART and block-parallel paths over ray batches
//! (`LinearOperator::ray_batches`, the device operators' form), run here on
//! a host operator whose batches are the rays `k ≡ β (mod s)` of a
//! projection with `s` the smallest stride that makes their pixel sets
//! disjoint (found by brute force): one Kaczmarz step per batch equals
//! Kaczmarz ray by ray in the same order (f64, to rounding), with and
//! without a constraint box, and the block-parallel method equals the
//! average of such sweeps.

use std::collections::HashSet;

use ndarray::Array3;
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{
    solve, Algorithm, Constraint, IterativeOptions, JosephProjector, Projector, RayOrder,
    StackOperator,
};
use tomors_core::linalg::{LinearOperator, RayAccess, RayBatches};
use tomors_core::{ParallelGeometry, SliceGrid};

type Op<'a> = StackOperator<'a, f64, JosephProjector>;

/// The host operator with ray batches (no host ray access, so the solver
/// takes the batched path).
struct Batched<'a> {
    op: Op<'a>,
    strides: Vec<usize>,
}

fn pixels(rays: &dyn RayAccess<Array3<f64>, Array3<f64>>, a: usize, k: usize) -> Vec<(usize, f64)> {
    let mut v = Vec::new();
    rays.trace_ray(a, k, &mut |i, w| {
        if w != 0.0 {
            v.push((i, w))
        }
    });
    v
}

/// Smallest stride whose batches of projection `a` are pairwise disjoint.
fn disjoint_stride(rays: &dyn RayAccess<Array3<f64>, Array3<f64>>, a: usize) -> usize {
    let nb = rays.n_bins();
    (1..=nb)
        .find(|&s| {
            (0..s).all(|b| {
                let mut seen = HashSet::new();
                (b..nb)
                    .step_by(s)
                    .all(|k| pixels(rays, a, k).iter().all(|&(i, _)| seen.insert(i)))
            })
        })
        .unwrap()
}

impl<'a> Batched<'a> {
    fn new(op: Op<'a>) -> Self {
        let rays = op.rays().unwrap();
        let strides = (0..op.n_projections())
            .map(|a| disjoint_stride(rays, a))
            .collect();
        Self { op, strides }
    }

    fn rays(&self) -> &dyn RayAccess<Array3<f64>, Array3<f64>> {
        self.op.rays().unwrap()
    }
}

impl LinearOperator for Batched<'_> {
    type Domain = Array3<f64>;
    type Range = Array3<f64>;
    fn n_projections(&self) -> usize {
        self.op.n_projections()
    }
    fn domain_zeros(&self) -> tomors_core::Result<Array3<f64>> {
        self.op.domain_zeros()
    }
    fn range_zeros(&self, angles: &[usize]) -> tomors_core::Result<Array3<f64>> {
        self.op.range_zeros(angles)
    }
    fn forward(
        &self,
        x: &Array3<f64>,
        a: &[usize],
        y: &mut Array3<f64>,
    ) -> tomors_core::Result<()> {
        self.op.forward(x, a, y)
    }
    fn backward(
        &self,
        y: &Array3<f64>,
        a: &[usize],
        x: &mut Array3<f64>,
    ) -> tomors_core::Result<()> {
        self.op.backward(y, a, x)
    }
    fn select_into(
        &self,
        y: &Array3<f64>,
        a: &[usize],
        out: &mut Array3<f64>,
    ) -> tomors_core::Result<()> {
        self.op.select_into(y, a, out)
    }
    fn select(&self, y: &Array3<f64>, angles: &[usize]) -> tomors_core::Result<Array3<f64>> {
        self.op.select(y, angles)
    }
    fn is_matched(&self) -> bool {
        true
    }
    fn row_norms_sq(&self, a: &[usize]) -> tomors_core::Result<Array3<f64>> {
        self.op.row_norms_sq(a)
    }
    fn ray_batches(&self) -> Option<&dyn RayBatches<Array3<f64>, Array3<f64>>> {
        Some(self)
    }
}

impl RayBatches<Array3<f64>, Array3<f64>> for Batched<'_> {
    fn batches(&self, angle: usize) -> usize {
        self.strides[angle]
    }
    fn forward_batch(
        &self,
        x: &Array3<f64>,
        a: usize,
        batch: usize,
        y: &mut Array3<f64>,
    ) -> tomors_core::Result<()> {
        let nx = x.dim().2;
        for (s, img) in x.outer_iter().enumerate() {
            for k in (batch..self.rays().n_bins()).step_by(self.strides[a]) {
                y[[s, 0, k]] = pixels(self.rays(), a, k)
                    .iter()
                    .map(|&(i, w)| w * img[[i / nx, i % nx]])
                    .sum();
            }
        }
        Ok(())
    }
    fn update_batch(
        &self,
        r: &Array3<f64>,
        a: usize,
        batch: usize,
        lambda: f64,
        min: Option<f64>,
        max: Option<f64>,
        x: &mut Array3<f64>,
    ) -> tomors_core::Result<()> {
        let nx = x.dim().2;
        for (s, mut img) in x.outer_iter_mut().enumerate() {
            for k in (batch..self.rays().n_bins()).step_by(self.strides[a]) {
                for (i, w) in pixels(self.rays(), a, k) {
                    let v = &mut img[[i / nx, i % nx]];
                    *v = (*v + lambda * r[[s, 0, k]] * w)
                        .max(min.unwrap_or(f64::NEG_INFINITY))
                        .min(max.unwrap_or(f64::INFINITY));
                }
            }
        }
        Ok(())
    }
}

fn norm(rays: &dyn RayAccess<Array3<f64>, Array3<f64>>, a: usize, k: usize) -> f64 {
    pixels(rays, a, k).iter().map(|p| p.1 * p.1).sum()
}

/// Kaczmarz ray by ray over `list` (`(projection, bin)`) on every slice;
/// rays with `‖a_i‖² ≤ 1e-6·max` (the largest of all rays) are skipped, as
/// the solver skips them.
#[allow(clippy::too_many_arguments)]
fn kaczmarz(
    rays: &dyn RayAccess<Array3<f64>, Array3<f64>>,
    x: &mut Array3<f64>,
    b: &Array3<f64>,
    list: &[(usize, usize)],
    max: f64,
    lambda: f64,
    c: &Constraint,
) {
    let nx = x.dim().2;
    for (s, mut img) in x.outer_iter_mut().enumerate() {
        for &(a, k) in list {
            let n2 = norm(rays, a, k);
            if n2 <= max * 1e-6 {
                continue;
            }
            let row = pixels(rays, a, k);
            let dot: f64 = row.iter().map(|&(i, w)| w * img[[i / nx, i % nx]]).sum();
            let f = lambda * (b[[s, a, k]] - dot) / n2;
            for (i, w) in row {
                let v = &mut img[[i / nx, i % nx]];
                *v = (*v + f * w)
                    .max(c.min.unwrap_or(f64::NEG_INFINITY))
                    .min(c.max.unwrap_or(f64::INFINITY));
            }
        }
    }
}

fn rel(a: &Array3<f64>, b: &Array3<f64>) -> f64 {
    let d: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
    let n: f64 = b.iter().map(|y| y * y).sum();
    (d / n).sqrt()
}

#[test]
fn batched_art_and_block_parallel_equal_kaczmarz_in_batch_order() {
    let (na, nb, ns) = (12usize, 24usize, 2usize);
    let geom = ParallelGeometry::new(uniform_angles(na, std::f32::consts::PI), nb).unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let p = JosephProjector::new(&geom, &grid).unwrap();
    let op = Batched::new(StackOperator::new(&p, ns));
    assert!(
        op.strides.iter().all(|&s| (1..=4).contains(&s)),
        "{:?}",
        op.strides
    );
    assert!(op.strides.iter().any(|&s| s > 1), "{:?}", op.strides);
    let truth = Array3::from_shape_fn((ns, nb, nb), |(s, y, x)| {
        ((x * 7 + y * 3 + s) % 11) as f64 / 10.0
    });
    let mut b = Array3::zeros((ns, na, nb));
    Projector::<f64>::forward(&p, truth.view(), &(0..na).collect::<Vec<_>>(), b.view_mut())
        .unwrap();
    let order: Vec<(usize, usize)> = (0..na)
        .flat_map(|a| {
            let s = op.strides[a];
            (0..s).flat_map(move |bt| (bt..nb).step_by(s).map(move |k| (a, k)))
        })
        .collect();
    let rays = op.rays();
    let max = order
        .iter()
        .map(|&(a, k)| norm(rays, a, k))
        .fold(0.0, f64::max);
    for (lambda, c) in [
        (1.0, Constraint::none()),
        (0.7, Constraint::bounded(0.0, 0.6)),
    ] {
        // ART, sequential order: 2 sweeps.
        let options = IterativeOptions {
            algorithm: Algorithm::Art {
                order: RayOrder::Sequential,
            },
            iterations: 2,
            relaxation: Some(lambda),
            constraint: c,
            tolerance: None,
            track_residual: false,
        };
        let mut x = Array3::zeros((ns, nb, nb));
        solve(&op, &b, &mut x, &options, &mut |_| true).unwrap();
        let mut want = Array3::zeros((ns, nb, nb));
        kaczmarz(rays, &mut want, &b, &order, max, lambda, &c);
        kaczmarz(rays, &mut want, &b, &order, max, lambda, &c);
        let e = rel(&x, &want);
        assert!(e <= 1e-12, "ART λ {lambda}: {e:.3e}");
        assert!(rel(&want, &Array3::zeros(want.dim())) > 0.5);
        // Block-parallel, blocks of 5 projections (3 blocks, the last of 2):
        // one sweep = the average of the blocks' sweeps from the same start,
        // projected on the box.
        let options = IterativeOptions {
            algorithm: Algorithm::BlockParallel {
                projections_per_block: 5,
            },
            iterations: 1,
            ..options
        };
        let mut x = Array3::zeros((ns, nb, nb));
        solve(&op, &b, &mut x, &options, &mut |_| true).unwrap();
        let mut sum = Array3::<f64>::zeros((ns, nb, nb));
        for blk in [0..5, 5..10, 10..12] {
            let list: Vec<_> = order
                .iter()
                .copied()
                .filter(|p| blk.contains(&p.0))
                .collect();
            let mut xl = Array3::zeros((ns, nb, nb));
            kaczmarz(rays, &mut xl, &b, &list, max, lambda, &c);
            sum += &xl;
        }
        let want = (sum / 3.0).mapv(|v| {
            v.max(c.min.unwrap_or(f64::NEG_INFINITY))
                .min(c.max.unwrap_or(f64::INFINITY))
        });
        let e = rel(&x, &want);
        assert!(e <= 1e-12, "block-parallel λ {lambda}: {e:.3e}");
    }
}
