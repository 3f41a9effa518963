//! Helpers shared by the benchmark examples: deterministic random data,
//! the median, positional arguments, the 10° cone geometry of the cone
//! benchmarks, relative L2 distances and the SIRT options timed.
#![allow(dead_code)]

use ndarray::Array3;
use tomors_core::cone::{ConeGeometry, ConeVolume};
use tomors_core::geometry::uniform_angles;
use tomors_core::iterative::{Algorithm, Constraint, IterativeOptions, Weighting};

/// One xorshift step, mapped to [0, 1).
fn next01(s: &mut u64) -> f32 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    (*s >> 40) as f32 / (1u64 << 24) as f32
}

/// Deterministic values in [0, 1) from a seed (one xorshift sequence).
pub fn random01_serial(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len).map(|_| next01(&mut s)).collect()
}

/// Deterministic values in [-1, 1) from a seed (one xorshift sequence).
pub fn random_signed(len: usize, seed: u64) -> Vec<f32> {
    random01_serial(len, seed)
        .into_iter()
        .map(|v| v * 2.0 - 1.0)
        .collect()
}

/// Deterministic values in [0, 1) from a seed (xorshift), in parallel
/// chunks of 2²⁰ (another sequence than [`random01_serial`]).
pub fn random01(len: usize, seed: u64) -> Vec<f32> {
    use rayon::prelude::*;
    let mut v = vec![0f32; len];
    v.par_chunks_mut(1 << 20)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut s = (seed ^ (c as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                | 1;
            for x in chunk {
                *x = next01(&mut s);
            }
        });
    v
}

/// The median of `v` (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The command line's arguments as whole numbers.
pub fn usize_args() -> Result<Vec<usize>, std::num::ParseIntError> {
    std::env::args().skip(1).map(|a| a.parse()).collect()
}

/// The cone benchmarks' geometry: `na` projections over 2π on an n × n
/// detector of unit pixels, cone angle 10° (SDD = (n/2)/tan 5°,
/// SOD = SDD/1.463), and the fitted n³ volume; with the SOD and the SDD.
pub fn cone10(n: usize, na: usize) -> tomors_core::Result<(ConeGeometry, ConeVolume, f64, f64)> {
    let sdd = (n as f64 / 2.0) / (5.0f64.to_radians()).tan();
    let sod = sdd / 1.463;
    let g = ConeGeometry::new(
        uniform_angles(na, 2.0 * std::f32::consts::PI),
        sod,
        sdd - sod,
        n,
        n,
        1.0,
        1.0,
    )?;
    let v = g.fitting_volume(n, n, n)?;
    Ok((g, v, sod, sdd))
}

/// ‖a − b‖ / ‖b‖ over two volumes of one shape (in parallel).
pub fn rel_l2(a: &Array3<f32>, b: &Array3<f32>) -> f64 {
    use rayon::prelude::*;
    let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
    let (a, b) = (a.as_slice().unwrap(), b.as_slice().unwrap());
    let (num, den) = a
        .par_iter()
        .zip(b)
        .map(|(&x, &y)| ((x as f64 - y as f64).powi(2), (y as f64).powi(2)))
        .reduce(|| (0.0, 0.0), |p, q| (p.0 + q.0, p.1 + q.1));
    (num / den.max(1e-300)).sqrt()
}

/// The options of the timed runs: `algorithm` for `iterations`, λ = 1,
/// x ≥ 0, no tolerance; the residual history when `track_residual`.
pub fn bench_options(
    algorithm: Algorithm,
    iterations: usize,
    track_residual: bool,
) -> IterativeOptions {
    IterativeOptions {
        algorithm,
        iterations,
        relaxation: Some(1.0),
        constraint: Constraint::non_negative(),
        tolerance: None,
        track_residual,
    }
}

/// [`bench_options`] of SIRT with row/column-sum weights (ASTRA's SIRT).
pub fn sirt_options(iterations: usize, track_residual: bool) -> IterativeOptions {
    bench_options(
        Algorithm::Sirt(Weighting::RowColumnSums),
        iterations,
        track_residual,
    )
}
