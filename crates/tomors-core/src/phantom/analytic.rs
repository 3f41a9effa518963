//! Closed-form integrals behind the exact phantom projections.
//!
//! Everything is in f64 and in units normalised to the shape: a unit disc for
//! ellipses, a unit ball for ellipsoids.

/// `∫₀^σ √(1 − t²) dt` for σ clamped to `[−1, 1]`:
/// `(σ√(1 − σ²) + asin σ) / 2`.
///
/// The chord length of the unit disc at signed distance `t` from its centre
/// is `2√(1 − t²)`, so `2·(disc_strip(σ₁) − disc_strip(σ₀))` is the area of
/// the unit disc between the lines `t = σ₀` and `t = σ₁`. An ellipse of
/// semi-axes `a`, `b` whose support half-width along a direction is `R`
/// maps to the unit disc with `t = s / R`; its projection integrated over
/// `[s₀, s₁]` is `2ab·(disc_strip(s₁/R) − disc_strip(s₀/R))` (in units of
/// value × area).
#[inline]
pub(crate) fn disc_strip(sigma: f64) -> f64 {
    let s = sigma.clamp(-1.0, 1.0);
    0.5 * (s * (1.0 - s * s).max(0.0).sqrt() + s.asin())
}

/// `∫₀^x ∫₀^y √(1 − u² − w²)₊ dw du` for x, y clamped to `[−1, 1]` (signed:
/// the integrand is even, so the result is odd in x and in y).
///
/// With `q = √(1 − x² − y²)₊` and `g(t) = t − t³/3` the closed form is
///
/// ```text
/// H(x, y) = x·y·q/3 + g(x)/2·atan2(y, q) + g(y)/2·atan2(x, q) − atan2(x·y, q)/3
/// ```
///
/// Derivation: the inner integral is the disc antiderivative
/// `(y√(b² − y²) + b²·asin(y/b))/2` with `b² = 1 − u²`; integrating its
/// second term by parts against `g′(u) = 1 − u²` leaves integrals of
/// `u²/√(c² − u²)`, `1/√(c² − u²)` and `1/((1 − u²)√(c² − u²))` (`c² = 1 − y²`),
/// all elementary. Outside the unit disc (`q = 0`) the formula becomes
/// `π/4·(g(x) + g(y)) − π/6`, which is the value of the integral there, so
/// one expression holds on the whole square (`H(1, 1) = π/6`, a quarter of
/// the half-ball volume `2π/3`).
///
/// A ball's line integrals over the detector plane `(s, z)` form the
/// hemisphere `2√(1 − s² − z²)`, so the integral of its projection over a
/// rectangle is `2·(H(s₁,z₁) − H(s₀,z₁) − H(s₁,z₀) + H(s₀,z₀))`.
#[inline]
pub(crate) fn ball_corner(x: f64, y: f64) -> f64 {
    let x = x.clamp(-1.0, 1.0);
    let y = y.clamp(-1.0, 1.0);
    let q = (1.0 - x * x - y * y).max(0.0).sqrt();
    let gx = x - x * x * x / 3.0;
    let gy = y - y * y * y / 3.0;
    x * y * q / 3.0 + 0.5 * gx * y.atan2(q) + 0.5 * gy * x.atan2(q) - (x * y).atan2(q) / 3.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Midpoint-rule integral of √(1 − u² − w²)₊ over a rectangle.
    fn numeric(x0: f64, x1: f64, y0: f64, y1: f64, n: usize) -> f64 {
        let (dx, dy) = ((x1 - x0) / n as f64, (y1 - y0) / n as f64);
        let mut sum = 0.0;
        for i in 0..n {
            let u = x0 + (i as f64 + 0.5) * dx;
            for j in 0..n {
                let w = y0 + (j as f64 + 0.5) * dy;
                sum += (1.0 - u * u - w * w).max(0.0).sqrt();
            }
        }
        sum * dx * dy
    }

    fn rect(x0: f64, x1: f64, y0: f64, y1: f64) -> f64 {
        ball_corner(x1, y1) - ball_corner(x0, y1) - ball_corner(x1, y0) + ball_corner(x0, y0)
    }

    #[test]
    fn ball_corner_matches_numeric_integration() {
        let whole = rect(-1.5, 1.5, -1.2, 1.1);
        assert!(
            (whole - 2.0 * std::f64::consts::PI / 3.0).abs() < 1e-14,
            "{whole}"
        );
        for &(x0, x1, y0, y1) in &[
            (0.3, 0.9, -0.5, 0.8),
            (-0.9, -0.2, 0.6, 1.0),
            (0.5, 0.55, 0.7, 0.75),
            (0.1, 0.2, -0.2, 0.1),
            (-0.8, 0.95, -0.05, 0.05),
        ] {
            let exact = rect(x0, x1, y0, y1);
            let num = numeric(x0, x1, y0, y1, 1200);
            assert!((exact - num).abs() <= 1e-6 * whole, "{exact} vs {num}");
        }
    }

    #[test]
    fn disc_strip_gives_the_disc_area() {
        let area = 2.0 * (disc_strip(3.0) - disc_strip(-2.0));
        assert!((area - std::f64::consts::PI).abs() < 1e-15);
        // A strip of width 0.02 at the centre is close to 0.02 · 2.
        let strip = 2.0 * (disc_strip(0.01) - disc_strip(-0.01));
        assert!((strip - 0.04).abs() < 1e-5);
    }
}
