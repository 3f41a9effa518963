//! Photon-counting (Poisson) noise for simulated projections.

use ndarray::{ArrayViewMut, Dimension};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Poisson};
use rayon::prelude::*;

use crate::error::{CoreError, Result};

/// Values per independently seeded chunk. Fixed, so the noise for a seed
/// does not depend on the number of threads.
const CHUNK: usize = 1 << 14;

/// SplitMix64: decorrelates the per-chunk seeds derived from one seed.
fn split_mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Replaces line integrals `p` by noisy ones from simulated photon counts.
///
/// With `I₀ = incident_photons` photons per detector pixel and
/// `attenuation_scale` converting `p` to optical depth (e.g. the physical
/// size of one world unit times the attenuation unit), each value becomes
/// `−ln(max(n, ½)/I₀)/attenuation_scale` where `n ~ Poisson(I₀·e^{−p·scale})`
/// (a count of zero is replaced by ½ so the logarithm stays finite).
///
/// Deterministic for a given seed and array shape: the values are taken in
/// logical (row-major) order in chunks of a fixed size, each with its own
/// `StdRng` seeded from `seed` and the chunk index; chunks run in parallel.
///
/// Errors: a non-positive or non-finite `incident_photons` or
/// `attenuation_scale`, non-finite input values, or a value so negative that
/// the expected count overflows ([`CoreError::Parameter`] /
/// [`CoreError::Data`]). The array is untouched on error.
pub fn add_poisson_noise<D: Dimension>(
    mut sino: ArrayViewMut<'_, f32, D>,
    incident_photons: f64,
    attenuation_scale: f64,
    seed: u64,
) -> Result<()> {
    if !(incident_photons.is_finite() && incident_photons > 0.0) {
        return Err(CoreError::Parameter(format!(
            "incident photon count {incident_photons} must be positive"
        )));
    }
    if !(attenuation_scale.is_finite() && attenuation_scale > 0.0) {
        return Err(CoreError::Parameter(format!(
            "attenuation scale {attenuation_scale} must be positive"
        )));
    }
    let mut min = f32::INFINITY;
    for &v in sino.iter() {
        if !v.is_finite() {
            return Err(CoreError::Data(format!(
                "cannot add noise to a non-finite value ({v})"
            )));
        }
        min = min.min(v);
    }
    if min.is_finite() {
        let peak = incident_photons * (-(min as f64) * attenuation_scale).exp();
        if !peak.is_finite() || peak > 1e18 {
            return Err(CoreError::Data(format!(
                "value {min} gives an expected photon count {peak:e} beyond what can be sampled"
            )));
        }
    }
    let noisy = |chunk_index: usize, chunk: &mut [f32]| {
        let mut rng = StdRng::seed_from_u64(split_mix(seed ^ split_mix(chunk_index as u64)));
        for v in chunk.iter_mut() {
            let lambda = incident_photons * (-(*v as f64) * attenuation_scale).exp();
            let counts = match Poisson::new(lambda) {
                Ok(dist) => dist.sample(&mut rng),
                // λ = 0 (total absorption): no photon arrives.
                Err(_) => 0.0,
            };
            *v = (-(counts.max(0.5) / incident_photons).ln() / attenuation_scale) as f32;
        }
    };
    if let Some(data) = sino.as_slice_mut() {
        data.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, c)| noisy(i, c));
    } else {
        let mut buf: Vec<f32> = sino.iter().copied().collect();
        buf.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, c)| noisy(i, c));
        sino.iter_mut().zip(buf).for_each(|(o, v)| *o = v);
    }
    Ok(())
}
