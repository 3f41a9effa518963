//! The gather step: each Cartesian grid point sums the weighted polar
//! samples within the kernel's support. Written to be ported line by line
//! to `kernels/gridrec.cu` (same f32 arithmetic, same loop bounds).

use std::f32::consts::PI;

use realfft::num_complex::Complex;

use super::plan::FourierPlan;

/// The scalar constants of the gather (the CUDA kernel's arguments).
#[derive(Clone, Copy, Debug)]
pub struct GatherParams {
    /// Projections.
    pub n_angles: i32,
    /// Padded row length P (spectra are in FFT order, P values a row).
    pub padded: i32,
    /// Grid side G.
    pub grid: i32,
    /// Periodic images looked at on each side.
    pub images: i32,
    /// Radial sample spacing in cells.
    pub alpha: f32,
    /// Largest sample radius in cells.
    pub rmax: f32,
    /// Half the kernel width in cells.
    pub half_w: f32,
    /// Kernel shape β.
    pub beta: f32,
    /// The kernel's edge value e^{−β} (subtracted).
    pub edge: f32,
    /// First angle (rad).
    pub theta0: f32,
    /// Angular step (rad).
    pub dtheta: f32,
}

impl GatherParams {
    /// The gather constants of a plan.
    pub fn from_plan(p: &FourierPlan) -> Self {
        Self {
            n_angles: p.n_angles as i32,
            padded: p.padded as i32,
            grid: p.grid as i32,
            images: p.images(),
            alpha: p.alpha,
            rmax: p.rmax,
            half_w: p.kernel.width as f32 / 2.0,
            beta: p.kernel.beta,
            edge: p.kernel.edge(),
            theta0: p.theta0,
            dtheta: p.dtheta,
        }
    }
}

use super::kernel::es;

/// Adds the samples of projection `j` near point (px, py) (cells).
#[inline]
#[allow(clippy::too_many_arguments)]
fn sum_angle(
    q: &GatherParams,
    spectra: &[Complex<f32>],
    cs: f32,
    sn: f32,
    j: usize,
    px: f32,
    py: f32,
    acc: &mut Complex<f32>,
) {
    let hw = q.half_w;
    let (mut lo, mut hi) = (-1e30f32, 1e30f32);
    if cs.abs() > 1e-6 {
        let (a, b) = ((px - hw) / cs, (px + hw) / cs);
        lo = lo.max(a.min(b));
        hi = hi.min(a.max(b));
    } else if px.abs() >= hw {
        return;
    }
    if sn.abs() > 1e-6 {
        let (a, b) = ((py - hw) / sn, (py + hw) / sn);
        lo = lo.max(a.min(b));
        hi = hi.min(a.max(b));
    } else if py.abs() >= hw {
        return;
    }
    let kmax = (q.padded / 2 - 1) as f32;
    let k0 = (lo / q.alpha).ceil().max(-kmax) as i32;
    let k1 = (hi / q.alpha).floor().min(kmax) as i32;
    let inv = 1.0 / hw;
    let row = &spectra[j * q.padded as usize..(j + 1) * q.padded as usize];
    for k in k0..=k1 {
        let r = q.alpha * k as f32;
        let zx = (px - r * cs) * inv;
        let zy = (py - r * sn) * inv;
        let w = es(q.beta, q.edge, zx) * es(q.beta, q.edge, zy);
        if w != 0.0 {
            let idx = if k < 0 { k + q.padded } else { k } as usize;
            *acc += row[idx] * w;
        }
    }
}

/// The grid value at signed frequency (gx, gy) (cells, in `[−G/2, G/2)`)
/// from weighted spectra `[angle][P]` in FFT order.
pub fn gather_point(
    q: &GatherParams,
    cos: &[f32],
    sin: &[f32],
    spectra: &[Complex<f32>],
    gx: i32,
    gy: i32,
) -> Complex<f32> {
    let mut acc = Complex::new(0.0f32, 0.0);
    let wdiag = q.half_w * std::f32::consts::SQRT_2;
    let na = q.n_angles;
    let last = q.theta0 + (na - 1) as f32 * q.dtheta;
    for oy in -q.images..=q.images {
        for ox in -q.images..=q.images {
            let px = (gx + ox * q.grid) as f32;
            let py = (gy + oy * q.grid) as f32;
            let rho = (px * px + py * py).sqrt();
            if rho - wdiag > q.rmax {
                continue;
            }
            if rho <= wdiag {
                for j in 0..na as usize {
                    sum_angle(q, spectra, cos[j], sin[j], j, px, py, &mut acc);
                }
                continue;
            }
            let a = (wdiag / rho).asin();
            let phi = py.atan2(px);
            let m0 = ((q.theta0 - a - phi) / PI).floor() as i32;
            let m1 = ((last + a - phi) / PI).ceil() as i32;
            for m in m0..=m1 {
                let c = phi + m as f32 * PI;
                let j0 = ((c - a - q.theta0) / q.dtheta).ceil().max(0.0) as i32;
                let j1 = ((c + a - q.theta0) / q.dtheta)
                    .floor()
                    .min((na - 1) as f32) as i32;
                for j in j0..=j1 {
                    let j = j as usize;
                    sum_angle(q, spectra, cos[j], sin[j], j, px, py, &mut acc);
                }
            }
        }
    }
    acc
}
