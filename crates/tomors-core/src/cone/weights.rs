//! FDK weights: the cosine (distance) pre-weight, the angular quadrature
//! weight of full scans and the Parker weights of short scans.

use ndarray::Array2;

use super::geometry::ConeGeometry;
use crate::error::{CoreError, Result};

const TWO_PI: f64 = 2.0 * std::f64::consts::PI;

/// How the projections of a scan are weighted over the angles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ScanMode {
    /// A full scan when the angles cover whole turns, a short scan otherwise.
    #[default]
    Auto,
    /// A full scan: angles evenly spread over one or more whole turns; every
    /// projection gets the weight π/N (each ray is measured twice per turn).
    Full,
    /// A short scan over at least π plus the fan angle, weighted with
    /// Parker's weights.
    Short,
}

impl std::str::FromStr for ScanMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "full" => Ok(Self::Full),
            "short" | "parker" => Ok(Self::Short),
            _ => Err(format!("unknown scan mode '{s}' (use auto, full or short)")),
        }
    }
}

/// The scan mode [`ScanMode::Auto`] resolves to (never `Auto`).
pub fn resolve_scan_mode(geometry: &ConeGeometry, mode: ScanMode) -> ScanMode {
    match mode {
        ScanMode::Auto => {
            if full_turns(geometry).is_some() {
                ScanMode::Full
            } else {
                ScanMode::Short
            }
        }
        m => m,
    }
}

/// The number of whole turns the angles cover when they look like a full
/// scan: the span plus one mean step is within half a step of k·2π, k ≥ 1.
fn full_turns(geometry: &ConeGeometry) -> Option<f64> {
    let (lo, hi, step) = geometry.angle_span();
    let covered = hi - lo + step;
    let k = (covered / TWO_PI).round();
    (k >= 1.0 && (covered - k * TWO_PI).abs() <= 0.5 * step).then_some(k)
}

/// Parker's short-scan weight (Parker 1982, Med. Phys. 9:254) of the ray at
/// fan angle `gamma` in the projection at `beta` radians after the first
/// one, for a scan over `π + 2·delta`:
///
/// ```text
/// sin²(π/4 · β/(δ − γ))               0 ≤ β < 2δ − 2γ
/// 1                                   2δ − 2γ ≤ β ≤ π − 2γ
/// sin²(π/4 · (π + 2δ − β)/(δ + γ))    π − 2γ < β ≤ π + 2δ
/// ```
///
/// and 0 outside `[0, π + 2δ]`. In Parker's sign convention the conjugate
/// of ray `(β, γ)` is `(β + π + 2γ, −γ)` and the two weights add up to 1.
/// With `delta` larger than the detector's half fan angle this is the
/// generalised (over-scan) form of Wesarg et al. 2002.
pub fn parker_weight(beta: f64, gamma: f64, delta: f64) -> f64 {
    let pi = std::f64::consts::PI;
    if !(0.0..=pi + 2.0 * delta).contains(&beta) {
        return 0.0;
    }
    let w = if beta < 2.0 * delta - 2.0 * gamma {
        (pi / 4.0 * beta / (delta - gamma)).sin().powi(2)
    } else if beta <= pi - 2.0 * gamma {
        1.0
    } else {
        (pi / 4.0 * (pi + 2.0 * delta - beta) / (delta + gamma))
            .sin()
            .powi(2)
    };
    w.clamp(0.0, 1.0)
}

/// The fan angle of detector column `col` in Parker's sign convention:
/// `−atan(u/SDD)`. In this geometry the line measured at θ through column
/// fan angle `γ_det = atan(u/SDD)` is measured again at `θ + π − 2γ_det`
/// through `−γ_det` (tests/cone_weights.rs checks this), which is Parker's
/// `(β + π + 2γ, −γ)` with `γ = −γ_det`.
pub fn parker_gamma(geometry: &ConeGeometry, col: f64) -> f64 {
    -geometry.fan_angle(col)
}

/// Angular weights of every projection and detector column
/// (`[angle][col]`): the quadrature weight of the angle integral of FDK,
/// times Parker's weight for short scans.
///
/// - Full scan: `π/N` everywhere (angles must cover whole turns evenly).
/// - Short scan: `Δβ · w(β, γ)` with `Δβ = (max − min)/(N − 1)`, `β` the
///   angle after the first one and `w` [`parker_weight`] for
///   `δ = (span − π)/2`, where the span `max − min` must reach
///   `π + fan angle` ([`ConeGeometry::short_scan_range`]) up to one angular
///   step (so both `[0, π + 2δ]` with the end included and
///   [`crate::geometry::uniform_angles`]`(N, π + 2δ)` qualify). A span
///   larger than that is an over-scan, weighted with the generalised
///   Parker weights.
///
/// Errors ([`CoreError::Geometry`]): a full scan whose angles do not cover
/// whole turns; a short scan over too small a range; angles not increasing
/// (short scans).
pub fn angular_weights(geometry: &ConeGeometry, mode: ScanMode) -> Result<Array2<f32>> {
    let n = geometry.n_angles();
    let nc = geometry.n_cols();
    match resolve_scan_mode(geometry, mode) {
        ScanMode::Full => {
            if full_turns(geometry).is_none() {
                let (lo, hi, step) = geometry.angle_span();
                return Err(CoreError::Geometry(format!(
                    "a full scan needs angles evenly covering whole turns; these span \
                     {:.3}° (+ one step of {:.3}°); use a short scan (Parker weights) instead",
                    (hi - lo).to_degrees(),
                    step.to_degrees()
                )));
            }
            let w = (std::f64::consts::PI / n as f64) as f32;
            Ok(Array2::from_elem((n, nc), w))
        }
        _ => {
            let angles = geometry.angles();
            if angles.windows(2).any(|w| w[1] <= w[0]) {
                return Err(CoreError::Geometry(
                    "a short scan needs strictly increasing angles".into(),
                ));
            }
            let (lo, hi, step) = geometry.angle_span();
            let span = hi - lo;
            let needed = geometry.short_scan_range();
            if span + step < needed * (1.0 - 1e-9) {
                return Err(CoreError::Geometry(format!(
                    "a short scan needs π + the fan angle = {:.3}° of angles, these span only \
                     {:.3}° (+ one step of {:.3}°)",
                    needed.to_degrees(),
                    span.to_degrees(),
                    step.to_degrees()
                )));
            }
            let delta = 0.5 * (span - std::f64::consts::PI);
            let gammas: Vec<f64> = (0..nc).map(|j| parker_gamma(geometry, j as f64)).collect();
            Ok(Array2::from_shape_fn((n, nc), |(i, j)| {
                let beta = angles[i] as f64 - lo;
                (step * parker_weight(beta, gammas[j], delta)) as f32
            }))
        }
    }
}

/// Cosine (distance) pre-weights `[row][col]`: `SDD/√(SDD² + u² + v²)`, the
/// cosine of the angle between the ray to pixel (u, v) and the central ray.
pub fn cosine_weights(geometry: &ConeGeometry) -> Array2<f32> {
    let d = geometry.sdd();
    let (pu, pv) = (geometry.pixel_u(), geometry.pixel_v());
    let (cc, cr) = (geometry.center_col(), geometry.center_row());
    Array2::from_shape_fn((geometry.n_rows(), geometry.n_cols()), |(r, c)| {
        let u = (c as f64 - cc) * pu;
        let v = (r as f64 - cr) * pv;
        (d / (d * d + u * u + v * v).sqrt()) as f32
    })
}
