//! Helpers of the projector tests: random images and the adjointness
//! error of a projector pair.
#![allow(dead_code)]

use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::iterative::{all_angles, projector, Projector, ProjectorKind, Real};
use tomors_core::{ParallelGeometry, SliceGrid};

/// Values uniform in [-1, 1).
pub fn random<T: Real>(dim: (usize, usize), rng: &mut StdRng) -> Array2<T> {
    Array2::from_shape_fn(dim, |_| T::from_f64(rng.gen_range(-1.0..1.0)))
}

/// ⟨a, b⟩ in f64.
pub fn dot<T: Real>(a: &Array2<T>, b: &Array2<T>) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.to_f64() * y.to_f64()).sum()
}

/// |⟨Ax, y⟩ − ⟨x, Aᵀy⟩| / (‖Ax‖‖y‖) for random x, y, over all projections
/// and over a subset (a projection of zero fails: it would prove nothing).
pub fn adjoint_error<T: Real>(p: &dyn Projector<T>, seed: u64) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let subset: Vec<usize> = (0..p.n_angles()).filter(|a| a % 3 != 1).collect();
    let mut worst = 0.0f64;
    for angles in [all_angles(p.n_angles()), subset] {
        let x = random::<T>(p.image_dim(), &mut rng);
        let y = random::<T>((angles.len(), p.n_bins()), &mut rng);
        let mut ax = Array2::from_elem((angles.len(), p.n_bins()), T::ZERO);
        let mut aty = Array2::from_elem(p.image_dim(), T::ZERO);
        p.forward_slice(x.view(), &angles, ax.view_mut()).unwrap();
        p.back_slice(y.view(), &angles, aty.view_mut()).unwrap();
        assert!(dot(&ax, &ax) > 0.0, "{}: zero projection", p.name());
        let e = (dot(&ax, &y) - dot(&x, &aty)).abs() / (dot(&ax, &ax).sqrt() * dot(&y, &y).sqrt());
        worst = worst.max(e);
    }
    worst
}

/// The orientation convention on a random 12² image: at θ = 0 bin k sees
/// column k (to `tol0`); at θ = π/2 bin k sees row n − 1 − k (to 1e-5: π/2
/// as an f32 is off by 4e-8 rad, which moves the rays by ~3e-7 pixels).
pub fn assert_orientation(kind: ProjectorKind, tol0: f64) {
    let n = 12;
    let geometry = ParallelGeometry::new(vec![0.0, std::f32::consts::PI / 2.0], n).unwrap();
    let grid = SliceGrid::for_geometry(&geometry);
    let mut rng = StdRng::seed_from_u64(1);
    let x = random::<f64>((n, n), &mut rng);
    let p = projector::<f64>(kind, &geometry, &grid, None).unwrap();
    let mut sino = Array2::zeros((2, n));
    p.forward_slice(x.view(), &[0, 1], sino.view_mut()).unwrap();
    for k in 0..n {
        let col = x.column(k).sum();
        let row = x.row(n - 1 - k).sum();
        assert!((sino[[0, k]] - col).abs() < tol0, "{kind:?} θ=0 bin {k}");
        assert!((sino[[1, k]] - row).abs() < 1e-5, "{kind:?} θ=π/2 bin {k}");
    }
}
