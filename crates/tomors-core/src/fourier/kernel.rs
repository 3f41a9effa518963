//! The gridding kernel: "exponential of semicircle" (ES, Barnett et al.,
//! FINUFFT), a close cousin of Kaiser–Bessel that costs one square root and
//! one exponential, lowered by its edge value `e^{−β}` so that it falls to
//! zero continuously (a sample at the edge of the support then weighs
//! nothing whichever side of it rounding puts it), and its Fourier transform
//! (by quadrature) for the deapodization.

use std::f64::consts::PI;

/// The ES kernel `φ(z) = exp(β(√(1 − z²) − 1)) − e^{−β}` for `|z| < 1`, 0 outside,
/// spread over `width` grid cells (`z = 2d / width` for a distance `d` in
/// cells).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EsKernel {
    /// Support in grid cells (the kernel touches `width` cells per axis).
    pub width: usize,
    /// Shape parameter β.
    pub beta: f32,
}

impl EsKernel {
    /// The kernel of `width` cells for a grid oversampled `sigma` times,
    /// with FINUFFT's shape `β = 0.97 π (1 − 1/(2σ)) W` (≈ 2.29 W at σ = 2).
    pub fn new(width: usize, sigma: f64) -> Self {
        let beta = 0.97 * PI * (1.0 - 0.5 / sigma) * width as f64;
        Self {
            width,
            beta: beta as f32,
        }
    }

    /// φ(z) in f32 (the same formula as the CUDA kernel).
    #[inline]
    pub fn eval(&self, z: f32) -> f32 {
        es(self.beta, self.edge(), z)
    }

    /// The edge value `e^{−β}` (in f32) that [`eval`](Self::eval) subtracts.
    pub fn edge(&self) -> f32 {
        (-self.beta).exp()
    }

    /// The kernel's continuous Fourier transform
    /// `φ̂(ξ) = ∫ φ(2t/W) e^{−2πitξ} dt` (t in cells, ξ in cycles per cell)
    /// for every ξ in `xi`, by composite Simpson quadrature in f64 of the
    /// f32 kernel values (so the deapodization divides out the kernel that
    /// is actually spread).
    pub fn fourier(&self, xi: &[f64]) -> Vec<f64> {
        const INTERVALS: usize = 1024; // over z in [0, 1], even
        let hz = 1.0 / INTERVALS as f64;
        let nodes: Vec<(f64, f64)> = (0..=INTERVALS)
            .map(|i| {
                let z = i as f64 * hz;
                let w = if i == 0 || i == INTERVALS {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                (z, w * self.eval(z as f32) as f64)
            })
            .collect();
        let half_w = self.width as f64 / 2.0;
        xi.iter()
            .map(|&x| {
                // t = z·W/2; the even integrand doubles the half range.
                let s: f64 = nodes
                    .iter()
                    .map(|&(z, w)| w * (2.0 * PI * z * half_w * x).cos())
                    .sum();
                2.0 * half_w * s * hz / 3.0
            })
            .collect()
    }
}

/// `exp(β(√(1 − z²) − 1)) − edge` for `|z| < 1`, else 0 (f32, the CUDA
/// kernel's formula).
#[inline]
pub fn es(beta: f32, edge: f32, z: f32) -> f32 {
    let t = 1.0 - z * z;
    if t <= 0.0 {
        0.0
    } else {
        (beta * (t.sqrt() - 1.0)).exp() - edge
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fourier_at_zero_is_the_integral() {
        let k = EsKernel::new(6, 2.0);
        // Plain trapezoid sum of the kernel over its support, fine steps.
        let steps = 200_000;
        let h = k.width as f64 / steps as f64;
        let direct: f64 = (0..=steps)
            .map(|i| {
                let t = -(k.width as f64) / 2.0 + i as f64 * h;
                let w = if i == 0 || i == steps { 0.5 } else { 1.0 };
                w * k.eval((2.0 * t / k.width as f64) as f32) as f64
            })
            .sum::<f64>()
            * h;
        let q = k.fourier(&[0.0, 0.25])[0];
        assert!((q - direct).abs() < 1e-6 * direct, "{q} vs {direct}");
    }

    #[test]
    fn kernel_is_one_at_centre_and_zero_outside() {
        let k = EsKernel::new(4, 2.0);
        assert_eq!(k.eval(0.0), 1.0 - k.edge());
        assert_eq!(k.eval(1.0), 0.0);
        assert_eq!(k.eval(-1.5), 0.0);
        assert!(k.eval(0.99) < 1e-3);
        assert!(k.eval(0.999_999) < 1e-5);
    }
}
