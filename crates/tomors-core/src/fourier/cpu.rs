//! The CPU implementation: rustfft for the 1D and 2D transforms, rayon
//! over projections and grid rows.

use ndarray::{ArrayView2, ArrayViewMut2};
use rayon::prelude::*;
use realfft::num_complex::Complex;
use rustfft::FftPlanner;

use super::gather::{gather_tile, GatherParams};
use super::plan::FourierPlan;
use crate::filter::Padding;

/// Reconstructs one or two slices: `a` (and `b`, into the imaginary part)
/// `[angle][bin]` into `out_a` (and `out_b`) `[y][x]`.
pub fn reconstruct_pair(
    plan: &FourierPlan,
    padding: Padding,
    a: ArrayView2<'_, f32>,
    b: Option<ArrayView2<'_, f32>>,
    mut out_a: ArrayViewMut2<'_, f32>,
    out_b: Option<ArrayViewMut2<'_, f32>>,
) {
    let spectra = weighted_spectra(plan, padding, a, b);
    let grid = gather_grid(plan, &spectra);
    drop(spectra);
    let image = inverse_2d(plan, grid);
    // Crop with deapodization: output (iy, ix) is grid image
    // (m_y mod G, m_x mod G), m_x = ix − nx/2, m_y = ny/2 − iy.
    let g = plan.grid as i64;
    let (nx, ny) = (plan.nx as i64, plan.ny as i64);
    let at = |iy: usize, ix: usize| -> Complex<f32> {
        let mx = (ix as i64 - nx / 2).rem_euclid(g) as usize;
        let my = (ny / 2 - iy as i64).rem_euclid(g) as usize;
        // `image` is transposed: [x][y].
        image[mx * plan.grid + my] * (plan.deapod_x[ix] * plan.deapod_y[iy])
    };
    for ((iy, ix), v) in out_a.indexed_iter_mut() {
        *v = at(iy, ix).re;
    }
    if let Some(mut ob) = out_b {
        for ((iy, ix), v) in ob.indexed_iter_mut() {
            *v = at(iy, ix).im;
        }
    }
}

/// Padded 1D FFT of every projection of the pair times the plan's filter
/// factor: `[angle][P]` in FFT order.
fn weighted_spectra(
    plan: &FourierPlan,
    padding: Padding,
    a: ArrayView2<'_, f32>,
    b: Option<ArrayView2<'_, f32>>,
) -> Vec<Complex<f32>> {
    let (p, n) = (plan.padded, plan.n_bins);
    let fft = FftPlanner::<f32>::new().plan_fft_forward(p);
    let mut spectra = vec![Complex::new(0.0f32, 0.0); plan.n_angles * p];
    spectra.par_chunks_mut(p).enumerate().for_each_init(
        || vec![Complex::new(0.0f32, 0.0); fft.get_inplace_scratch_len()],
        |scratch, (j, row)| {
            let ra = a.row(j);
            let rb = b.as_ref().map(|b| b.row(j));
            let value = |r: &ndarray::ArrayView1<'_, f32>, k: usize| -> f32 {
                padded_value(r, k, n, p, padding)
            };
            for (k, v) in row.iter_mut().enumerate() {
                let re = value(&ra, k);
                let im = rb.as_ref().map_or(0.0, |r| value(r, k));
                *v = Complex::new(re, im);
            }
            fft.process_with_scratch(row, scratch);
            for (f, v) in row.iter_mut().enumerate() {
                let (c, s) = plan.factor(j, f);
                *v *= Complex::new(c, s);
            }
        },
    );
    spectra
}

/// Value `k` of the padded copy of a row of `n` bins in a buffer of `p`
/// (the FBP filter's rule: zeros, or the circular edge extension).
fn padded_value(
    r: &ndarray::ArrayView1<'_, f32>,
    k: usize,
    n: usize,
    p: usize,
    padding: Padding,
) -> f32 {
    if k < n {
        return r[k];
    }
    match padding {
        Padding::Zero => 0.0,
        Padding::Edge => {
            if k < n + (p - n) / 2 {
                r[n - 1]
            } else {
                r[0]
            }
        }
    }
}

/// Side of a tile of the gather (as the CUDA kernel's).
const TILE: i32 = 64;

/// The Cartesian grid `[gy][gx]` (FFT order) gathered from the spectra,
/// tile by tile ([`gather_tile`]), tiles in parallel.
fn gather_grid(plan: &FourierPlan, spectra: &[Complex<f32>]) -> Vec<Complex<f32>> {
    let g = plan.grid as i32;
    let q = GatherParams::from_plan(plan);
    let nt = (g + TILE - 1) / TILE;
    let tiles: Vec<(i32, i32, Vec<Complex<f32>>)> = (0..nt * nt)
        .into_par_iter()
        .map(|i| {
            let (bx, by) = (i % nt, i / nt);
            let mut acc = vec![Complex::new(0.0f32, 0.0); (TILE * TILE) as usize];
            gather_tile(&q, &plan.cos, &plan.sin, spectra, TILE, bx, by, &mut acc);
            (bx, by, acc)
        })
        .collect();
    let mut grid = vec![Complex::new(0.0f32, 0.0); (g * g) as usize];
    for (bx, by, acc) in tiles {
        let (x0, y0) = (-g / 2 + bx * TILE, -g / 2 + by * TILE);
        for ly in 0..TILE {
            for lx in 0..TILE {
                let (gx, gy) = (x0 + lx, y0 + ly);
                if gx >= g / 2 || gy >= g / 2 {
                    continue;
                }
                let (ix, iy) = (gx.rem_euclid(g), gy.rem_euclid(g));
                grid[(iy * g + ix) as usize] = acc[(ly * TILE + lx) as usize];
            }
        }
    }
    grid
}

/// Unnormalised inverse 2D FFT of `grid` `[y][x]`; returns the image
/// transposed, `[x][y]`.
fn inverse_2d(plan: &FourierPlan, mut grid: Vec<Complex<f32>>) -> Vec<Complex<f32>> {
    let g = plan.grid;
    let fft = FftPlanner::<f32>::new().plan_fft_inverse(g);
    let pass = |data: &mut [Complex<f32>]| {
        data.par_chunks_mut(g).for_each_init(
            || vec![Complex::new(0.0f32, 0.0); fft.get_inplace_scratch_len()],
            |scratch, row| fft.process_with_scratch(row, scratch),
        );
    };
    pass(&mut grid);
    let mut t = vec![Complex::new(0.0f32, 0.0); g * g];
    t.par_chunks_mut(g).enumerate().for_each(|(x, col)| {
        for (y, v) in col.iter_mut().enumerate() {
            *v = grid[y * g + x];
        }
    });
    drop(grid);
    pass(&mut t);
    t
}
