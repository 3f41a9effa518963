//! A line-by-line Rust model of the CUDA tiled gather (`gr_tile` in
//! tomors-cuda's `kernels/gridrec.cu`) against the per-point gather of
//! tomors-core (the CPU reference): the tile's sample enumeration (angular
//! window, dilated rectangle, periodic images, clipping) must find every
//! sample each point sums, so the grids agree to f32 rounding.

use realfft::num_complex::Complex;
use tomors_core::fourier::gather::{gather_point, GatherParams};
use tomors_core::fourier::{FourierOptions, FourierPlan};
use tomors_core::geometry::uniform_angles;
use tomors_core::{ParallelGeometry, SliceGrid};

use tomors_core::fourier::kernel::es;

/// The model of gr_tile for one tile (bx, by); adds into `grid` `[G][G]`.
fn tile(q: &GatherParams, cos: &[f32], sin: &[f32], spec: &[Complex<f32>], kw: i32, t: i32, bx: i32, by: i32, grid: &mut [Complex<f32>]) {
    let g = q.grid;
    let x0 = -g / 2 + bx * t;
    let y0 = -g / 2 + by * t;
    let x1 = (x0 + t).min(g / 2);
    let y1 = (y0 + t).min(g / 2);
    let mut acc = vec![Complex::new(0.0f32, 0.0); (t * t) as usize];
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
                    j0 = ((lo_a + m as f32 * pi - q.theta0) / q.dtheta).ceil().max(0.0) as i32;
                    j1 = ((hi_a + m as f32 * pi - q.theta0) / q.dtheta).floor().min((q.n_angles - 1) as f32) as i32;
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
                        let v = spec[(j * q.padded + if k < 0 { k + q.padded } else { k }) as usize];
                        let gxs = (x - sx - hw).floor() as i32 + 1;
                        let gys = (y - sy - hw).floor() as i32 + 1;
                        for ty in 0..kw {
                            let gy = gys + ty;
                            let wy = if gy >= y0 && gy < y1 { es(q.beta, q.edge, (gy as f32 + sy - y) * inv) } else { 0.0 };
                            if wy == 0.0 {
                                continue;
                            }
                            for tx in 0..kw {
                                let gx = gxs + tx;
                                let wx = if gx >= x0 && gx < x1 { es(q.beta, q.edge, (gx as f32 + sx - x) * inv) } else { 0.0 };
                                let w = wx * wy;
                                if w != 0.0 {
                                    acc[((gy - y0) * t + gx - x0) as usize] += v * w;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    for ly in 0..t {
        for lx in 0..t {
            let (gx, gy) = (x0 + lx, y0 + ly);
            if gx >= x1 || gy >= y1 {
                continue;
            }
            let ix = if gx < 0 { gx + g } else { gx };
            let iy = if gy < 0 { gy + g } else { gy };
            grid[(iy * g + ix) as usize] = acc[(ly * t + lx) as usize];
        }
    }
}

#[test]
fn tile_model_equals_point_gather() {
    let cases = [
        (ParallelGeometry::new(uniform_angles(60, std::f32::consts::PI), 64).unwrap(), None, 6, 16),
        (ParallelGeometry::new(uniform_angles(50, 2.0 * std::f32::consts::PI), 63).unwrap().with_center(30.2).unwrap(), None, 5, 16),
        (ParallelGeometry::new(uniform_angles(60, std::f32::consts::PI), 64).unwrap(), Some(SliceGrid::with_pixel_size(50, 40, 1.3).unwrap()), 4, 12),
        (ParallelGeometry::new(uniform_angles(45, std::f32::consts::PI), 40).unwrap(), Some(SliceGrid::with_pixel_size(70, 70, 0.6).unwrap()), 7, 64),
    ];
    for (geom, grid, w, t) in cases {
        let grid = grid.unwrap_or(SliceGrid::for_geometry(&geom));
        let opts = FourierOptions { width: w, ..FourierOptions::default() };
        let plan = FourierPlan::new(&geom, &grid, &opts).unwrap();
        let q = GatherParams::from_plan(&plan);
        let mut s = 12345u64;
        let spec: Vec<Complex<f32>> = (0..plan.n_angles * plan.padded)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let a = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                Complex::new(a, (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            })
            .collect();
        let g = plan.grid as i32;
        let mut tiled = vec![Complex::new(f32::NAN, 0.0); (g * g) as usize];
        let nt = (g + t - 1) / t;
        for by in 0..nt {
            for bx in 0..nt {
                tile(&q, &plan.cos, &plan.sin, &spec, w as i32, t, bx, by, &mut tiled);
            }
        }
        let (mut num, mut den) = (0f64, 0f64);
        for iy in 0..g {
            for ix in 0..g {
                let sgn = |i: i32| if i < g / 2 { i } else { i - g };
                let p = gather_point(&q, &plan.cos, &plan.sin, &spec, sgn(ix), sgn(iy));
                let d = tiled[(iy * g + ix) as usize] - p;
                num += d.norm_sqr() as f64;
                den += p.norm_sqr() as f64;
            }
        }
        let e = (num / den).sqrt();
        println!("G={g} W={w} tile {t}: tiled vs point gather {e:.3e}");
        assert!(e < 1e-6, "G={g} W={w} tile {t}: {e:.3e}");
    }
}
