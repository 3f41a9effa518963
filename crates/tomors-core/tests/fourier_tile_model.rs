//! The tiled gather (tomors-core's CPU method, whose sample enumeration the
//! CUDA `gr_warp` uses too) against the per-point gather (the reference): the
//! tile's sample enumeration (angular window, dilated rectangle, periodic
//! images, clipping) must find every sample each point sums, so the grids
//! agree to f32 rounding.

use realfft::num_complex::Complex;
use tomors_core::fourier::gather::{gather_point, gather_tile, GatherParams};
use tomors_core::fourier::{FourierOptions, FourierPlan};
use tomors_core::geometry::uniform_angles;
use tomors_core::{ParallelGeometry, SliceGrid};

#[test]
fn tile_model_equals_point_gather() {
    let cases = [
        (
            ParallelGeometry::new(uniform_angles(60, std::f32::consts::PI), 64).unwrap(),
            None,
            6,
            16,
        ),
        (
            ParallelGeometry::new(uniform_angles(50, 2.0 * std::f32::consts::PI), 63)
                .unwrap()
                .with_center(30.2)
                .unwrap(),
            None,
            5,
            16,
        ),
        (
            ParallelGeometry::new(uniform_angles(60, std::f32::consts::PI), 64).unwrap(),
            Some(SliceGrid::with_pixel_size(50, 40, 1.3).unwrap()),
            4,
            12,
        ),
        (
            ParallelGeometry::new(uniform_angles(45, std::f32::consts::PI), 40).unwrap(),
            Some(SliceGrid::with_pixel_size(70, 70, 0.6).unwrap()),
            7,
            64,
        ),
    ];
    for (geom, grid, w, t) in cases {
        let grid = grid.unwrap_or(SliceGrid::for_geometry(&geom));
        let opts = FourierOptions {
            width: w,
            ..FourierOptions::default()
        };
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
                let mut acc = vec![Complex::new(0.0f32, 0.0); (t * t) as usize];
                gather_tile(&q, &plan.cos, &plan.sin, &spec, t, bx, by, &mut acc);
                for ly in 0..t {
                    for lx in 0..t {
                        let (gx, gy) = (-g / 2 + bx * t + lx, -g / 2 + by * t + ly);
                        if gx < g / 2 && gy < g / 2 {
                            tiled[(gy.rem_euclid(g) * g + gx.rem_euclid(g)) as usize] =
                                acc[(ly * t + lx) as usize];
                        }
                    }
                }
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
