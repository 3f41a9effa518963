//! Helpers of the projector tests: random images and the adjointness
//! error of a projector pair.
#![allow(dead_code)]

use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tomors_core::iterative::{all_angles, Projector, Real};

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
