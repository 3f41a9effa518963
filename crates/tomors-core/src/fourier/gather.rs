//! The gather step: each Cartesian grid point sums the weighted polar
//! samples within the kernel's support. Two formulations with the same f32
//! products, ported line by line to tomors-cuda's kernels: per point
//! ([`gather_point`], `gr_gather` in `kernels/gridrec.cu`: the reference) and
//! per tile ([`gather_tile`]: each sample's separable weights computed once
//! per tile; the CPU method). The GPU default, `gr_warp` in
//! `kernels/gridrec_warp.cu`, enumerates a tile's samples with the loops of
//! [`gather_tile`] and adds the same products (its weights from the SFU's
//! square root and exponential) in another fixed order: per-warp copies of
//! the tile, summed at the end.

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
                let j1 = ((c + a - q.theta0) / q.dtheta).floor().min((na - 1) as f32) as i32;
                for j in j0..=j1 {
                    let j = j as usize;
                    sum_angle(q, spectra, cos[j], sin[j], j, px, py, &mut acc);
                }
            }
        }
    }
    acc
}

/// The tiled gather (the CPU method; its sample enumeration is that of
/// `gr_warp` in tomors-cuda's `kernels/gridrec_warp.cu`): the values of the grid cells of
/// tile (bx, by) of side `t`, `[t][t]` (cells outside the grid left zero).
/// The tile enumerates every sample whose `W × W` footprint touches its
/// cells — the angles within its angular window, the radial samples within
/// its rectangle dilated by W/2, for each periodic image — and spreads each
/// into its own cells with separable weights.
#[allow(clippy::too_many_arguments)]
pub fn gather_tile(
    q: &GatherParams,
    cos: &[f32],
    sin: &[f32],
    spec: &[Complex<f32>],
    t: i32,
    bx: i32,
    by: i32,
    acc: &mut [Complex<f32>],
) {
    let kw = (2.0 * q.half_w).round() as i32;
    let g = q.grid;
    let x0 = -g / 2 + bx * t;
    let y0 = -g / 2 + by * t;
    let x1 = (x0 + t).min(g / 2);
    let y1 = (y0 + t).min(g / 2);
    acc.fill(Complex::new(0.0, 0.0));
    let (hw, inv) = (q.half_w, 1.0 / q.half_w);
    let pi = std::f32::consts::PI;
    let kmax = (q.padded / 2 - 1) as f32;
    let last = q.theta0 + (q.n_angles - 1) as f32 * q.dtheta;
    for oy in -q.images..=q.images {
        for ox in -q.images..=q.images {
            let (sx, sy) = ((ox * g) as f32, (oy * g) as f32);
            let (ax, bxx) = (x0 as f32 + sx - hw, (x1 - 1) as f32 + sx + hw);
            let (ay, byy) = (y0 as f32 + sy - hw, (y1 - 1) as f32 + sy + hw);
            let nx = ax.max(-bxx).max(0.0);
            let ny = ay.max(-byy).max(0.0);
            if (nx * nx + ny * ny).sqrt() > q.rmax {
                continue;
            }
            let all = ax <= 0.0 && bxx >= 0.0 && ay <= 0.0 && byy >= 0.0;
            let (mut lo_a, mut hi_a, mut m0, mut m1) = (0.0f32, 0.0f32, 0, 0);
            if !all {
                let pc = (0.5 * (ay + byy)).atan2(0.5 * (ax + bxx));
                let (mut dmin, mut dmax) = (0.0f32, 0.0f32);
                for (cx, cy) in [(ax, ay), (bxx, ay), (ax, byy), (bxx, byy)] {
                    let mut d = cy.atan2(cx) - pc;
                    if d > pi {
                        d -= 2.0 * pi;
                    }
                    if d < -pi {
                        d += 2.0 * pi;
                    }
                    dmin = dmin.min(d);
                    dmax = dmax.max(d);
                }
                lo_a = pc + dmin - 1e-5;
                hi_a = pc + dmax + 1e-5;
                m0 = ((q.theta0 - hi_a) / pi).floor() as i32;
                m1 = ((last - lo_a) / pi).ceil() as i32;
            }
            for m in m0..=m1 {
                let (mut j0, mut j1) = (0, q.n_angles - 1);
                if !all {
                    j0 = ((lo_a + m as f32 * pi - q.theta0) / q.dtheta)
                        .ceil()
                        .max(0.0) as i32;
                    j1 = ((hi_a + m as f32 * pi - q.theta0) / q.dtheta)
                        .floor()
                        .min((q.n_angles - 1) as f32) as i32;
                }
                for j in j0..=j1 {
                    let (cs, sn) = (cos[j as usize], sin[j as usize]);
                    let (mut lo, mut hi) = (-1e30f32, 1e30f32);
                    if cs.abs() > 1e-6 {
                        let (a, b) = (ax / cs, bxx / cs);
                        lo = lo.max(a.min(b));
                        hi = hi.min(a.max(b));
                    } else if ax > 0.0 || bxx < 0.0 {
                        continue;
                    }
                    if sn.abs() > 1e-6 {
                        let (a, b) = (ay / sn, byy / sn);
                        lo = lo.max(a.min(b));
                        hi = hi.min(a.max(b));
                    } else if ay > 0.0 || byy < 0.0 {
                        continue;
                    }
                    let k0 = (lo / q.alpha).ceil().max(-kmax) as i32;
                    let k1 = (hi / q.alpha).floor().min(kmax) as i32;
                    for k in k0..=k1 {
                        let r = q.alpha * k as f32;
                        let (x, y) = (r * cs, r * sn);
                        let v =
                            spec[(j * q.padded + if k < 0 { k + q.padded } else { k }) as usize];
                        let gxs = (x - sx - hw).floor() as i32 + 1;
                        let gys = (y - sy - hw).floor() as i32 + 1;
                        let (mut wx, mut wy) = ([0.0f32; 12], [0.0f32; 12]);
                        for t in 0..kw {
                            let (gx, gy) = (gxs + t, gys + t);
                            if gx >= x0 && gx < x1 {
                                wx[t as usize] = es(q.beta, q.edge, (gx as f32 + sx - x) * inv);
                            }
                            if gy >= y0 && gy < y1 {
                                wy[t as usize] = es(q.beta, q.edge, (gy as f32 + sy - y) * inv);
                            }
                        }
                        for ty in 0..kw {
                            if wy[ty as usize] == 0.0 {
                                continue;
                            }
                            let base = (gys + ty - y0) * t + gxs - x0;
                            for tx in 0..kw {
                                let w = wx[tx as usize] * wy[ty as usize];
                                if w != 0.0 {
                                    acc[(base + tx) as usize] += v * w;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
