//! tomocupy's disc test on the CPU: a centred uniform disc of radius 0.4 n,
//! analytic point-sampled sinogram `p(s) = 2 μ √(r² − s²)` at `s = k − n/2`
//! (axis at bin n/2), n angles over π; RMS of value/μ − 1 inside 0.75 r, for
//! the fourier method (W given) and the direct FBP (f32, linear, ram-lak).
//!
//! `cargo run --release -p tomors-core --example fourier_disc -- N [W ...]`

use ndarray::{Array2, Array3, Axis};
use tomors_core::cpu::CpuBackend;
use tomors_core::fbp::{fbp_sinograms, FbpOptions};
use tomors_core::fourier::{fourier_sinograms, FourierOptions};
use tomors_core::geometry::uniform_angles;
use tomors_core::{ParallelGeometry, SliceGrid};

fn rms(rec: &Array2<f32>, mu: f64) -> (f64, f64) {
    let n = rec.nrows();
    let r = 0.4 * n as f64;
    let c = n as f64 / 2.0 - 0.5;
    let (mut s2, mut mx, mut cnt) = (0.0f64, 0.0f64, 0usize);
    for ((iy, ix), &v) in rec.indexed_iter() {
        let (dx, dy) = (ix as f64 - c, iy as f64 - c);
        if (dx * dx + dy * dy).sqrt() < 0.75 * r {
            let e = v as f64 / mu - 1.0;
            s2 += e * e;
            mx = mx.max(e.abs());
            cnt += 1;
        }
    }
    ((s2 / cnt as f64).sqrt(), mx)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = *args.first().unwrap_or(&512);
    let widths = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        vec![4, 6]
    };
    let r = 0.4 * n as f64;
    let mu = 1.0 / r;
    let geom = ParallelGeometry::new(uniform_angles(n, std::f32::consts::PI), n)
        .unwrap()
        .with_center(n as f32 / 2.0)
        .unwrap();
    let grid = SliceGrid::for_geometry(&geom);
    let row: Vec<f32> = (0..n)
        .map(|i| {
            let s = i as f64 - n as f64 / 2.0;
            (2.0 * mu * (r * r - s * s).max(0.0).sqrt()) as f32
        })
        .collect();
    let sino = Array3::from_shape_fn((1, n, n), |(_, _, b)| row[b]);
    for w in widths {
        let opts = FourierOptions {
            width: w,
            ..FourierOptions::default()
        };
        let t = std::time::Instant::now();
        let f = fourier_sinograms(sino.view(), &geom, &grid, &opts).unwrap();
        let (e, m) = rms(&f.index_axis(Axis(0), 0).to_owned(), mu);
        println!(
            "disc n={n} fourier W={w} (CPU): interior RMS {e:.3e}, max {m:.3e} ({:.2} s)",
            t.elapsed().as_secs_f64()
        );
    }
    if n <= 200 {
        // The same FBP with the filtered rows interpolated exactly
        // (trigonometric), summed directly in f64: the sum gridding approximates.
        use rustfft::num_complex::Complex;
        let p = tomors_core::filter::padded_len(n);
        let resp = tomors_core::FilterSpec::default().frequency_response(p, 1.0);
        let mut spec: Vec<Complex<f64>> = (0..p)
            .map(|m| Complex::new(if m < n { row[m] as f64 } else { 0.0 }, 0.0))
            .collect();
        rustfft::FftPlanner::<f64>::new()
            .plan_fft_forward(p)
            .process(&mut spec);
        let w = std::f64::consts::PI / n as f64;
        let ex = Array2::from_shape_fn((n, n), |(iy, ix)| {
            let (x, y) = (grid.x(ix) as f64, grid.y(iy) as f64);
            let mut acc = 0.0;
            for a in geom.angles() {
                let u = n as f64 / 2.0 + x * (*a as f64).cos() + y * (*a as f64).sin();
                acc += resp[0] as f64 * spec[0].re;
                for k in 1..p / 2 {
                    let ph = 2.0 * std::f64::consts::PI * k as f64 * u / p as f64;
                    acc += 2.0 * resp[k] as f64 * (spec[k] * Complex::new(ph.cos(), ph.sin())).re;
                }
            }
            (w * acc) as f32
        });
        let (e, m) = rms(&ex, mu);
        println!("disc n={n} exactly summed FBP (trigonometric interpolation, f64): interior RMS {e:.3e}, max {m:.3e}");
    }
    let d = fbp_sinograms(
        &CpuBackend::new(),
        sino.view(),
        &geom,
        &grid,
        &FbpOptions::default(),
    )
    .unwrap();
    let (e, m) = rms(&d.index_axis(Axis(0), 0).to_owned(), mu);
    println!("disc n={n} direct FBP (CPU f32, linear): interior RMS {e:.3e}, max {m:.3e}");
}
