//! Fast CPU back projection: several slices share each SIMD lane group.
//!
//! As the seeds recommend for CPUs, `LANES` slices are interleaved so that
//! one detector position serves all of them: the bin index and weight are
//! computed once per (pixel, projection) and applied to `LANES` values with
//! one vector operation. The image is cut into tiles whose accumulators stay
//! in the L1/L2 cache while every projection streams past, and rayon
//! distributes bands of tiles over the cores.
//!
//! Each interleaved sinogram row is padded with zero bins on both sides, wide
//! enough that every pixel of the grid lands inside for every projection, so
//! the inner loop needs no bounds logic and pixels whose rays miss the
//! detector read exact zeros (the same rule as the reference and as a texture
//! in border mode).

use ndarray::{s, ArrayView3, ArrayViewMut3, Axis};
use rayon::prelude::*;

use super::check_shapes;
use crate::backend::Interpolation;
use crate::error::Result;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Slices processed together in one SIMD lane group.
pub const LANES: usize = 8;

/// Tile width in pixels (accumulators: TILE_X·TILE_Y·LANES·4 bytes = 32 KiB).
const TILE_X: usize = 64;
/// Tile height in pixels (the unit of parallel work is a band of this height).
const TILE_Y: usize = 16;

/// Per-projection constants of the fast path, in padded-bin units.
#[derive(Clone, Copy)]
struct Projection {
    /// Padded bin coordinate of pixel (0, 0).
    u00: f64,
    /// Change of u per column.
    du_dx: f64,
    /// Change of u per row.
    du_dy: f64,
}

/// Back projects `sinograms` (`[slice][angle][bin]`) into `out`
/// (`[slice][y][x]`), overwriting it with `scale · Σ_θ p_θ(u)`.
pub fn backproject_slices(
    sinograms: ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    interpolation: Interpolation,
    scale: f32,
    mut out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    check_shapes(&sinograms, geometry, grid, &out)?;
    let (pad, padded_bins, projections) = plan(geometry, grid, interpolation);
    let ns = sinograms.len_of(Axis(0));
    let mut start = 0;
    while start < ns {
        let count = (ns - start).min(LANES);
        let sino = sinograms.slice(s![start..start + count, .., ..]);
        let group = out.slice_mut(s![start..start + count, .., ..]);
        if count == 1 {
            let data = interleave::<1>(sino, pad, padded_bins);
            run_group::<1>(
                &data,
                padded_bins,
                &projections,
                grid,
                interpolation,
                scale,
                group,
            );
        } else {
            let data = interleave::<LANES>(sino, pad, padded_bins);
            run_group::<LANES>(
                &data,
                padded_bins,
                &projections,
                grid,
                interpolation,
                scale,
                group,
            );
        }
        start += count;
    }
    Ok(())
}

/// Zero padding, padded row length and per-projection constants.
fn plan(
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    interpolation: Interpolation,
) -> (usize, usize, Vec<Projection>) {
    let bw = geometry.bin_width() as f64;
    let h = grid.pixel_size as f64;
    let x0 = grid.x(0) as f64;
    let y0 = grid.y(0) as f64;
    let x1 = grid.x(grid.nx - 1) as f64;
    let y1 = grid.y(grid.ny - 1) as f64;
    // Nearest reads bin floor(u + 0.5): shift by one half so that truncation
    // of the shifted coordinate is the nearest rule.
    let shift = match interpolation {
        Interpolation::Nearest => 0.5,
        Interpolation::Linear => 0.0,
    };
    let raw: Vec<(f64, f64, f64)> = geometry
        .projection_constants()
        .iter()
        .map(|p| {
            let (c, s) = (p.cos as f64, p.sin as f64);
            (
                p.center as f64 + (x0 * c + y0 * s) / bw + shift,
                h * c / bw,
                -h * s / bw,
            )
        })
        .collect();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for &(u00, dx, dy) in &raw {
        for (cx, cy) in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)] {
            let u = u00 + cx * (x1 - x0) / h * dx + cy * (y0 - y1) / h * dy;
            lo = lo.min(u);
            hi = hi.max(u);
        }
    }
    let n = geometry.n_bins();
    // Two spare bins on each side absorb f32 rounding of u.
    let pad = ((-lo).max(0.0).ceil() as usize) + 2;
    let right = ((hi - (n as f64 - 1.0)).max(0.0).ceil() as usize) + 3;
    let projections = raw
        .into_iter()
        .map(|(u00, du_dx, du_dy)| Projection {
            u00: u00 + pad as f64,
            du_dx,
            du_dy,
        })
        .collect();
    (pad, pad + n + right, projections)
}

/// Interleaves up to `L` sinograms into `[angle][padded bin][lane]`.
fn interleave<const L: usize>(
    sino: ArrayView3<'_, f32>,
    pad: usize,
    padded_bins: usize,
) -> Vec<[f32; L]> {
    let (count, na, nb) = sino.dim();
    let mut data = vec![[0.0f32; L]; na * padded_bins];
    data.par_chunks_mut(padded_bins)
        .enumerate()
        .for_each(|(a, row)| {
            for lane in 0..count {
                for (b, &v) in sino.slice(s![lane, a, ..]).iter().enumerate() {
                    row[pad + b][lane] = v;
                }
            }
            debug_assert!(nb + pad <= row.len());
        });
    data
}

/// Back projects one lane group into `out` (`[lane][y][x]`).
fn run_group<const L: usize>(
    data: &[[f32; L]],
    padded_bins: usize,
    projections: &[Projection],
    grid: &SliceGrid,
    interpolation: Interpolation,
    scale: f32,
    mut out: ArrayViewMut3<'_, f32>,
) {
    let nx = grid.nx;
    out.axis_chunks_iter_mut(Axis(1), TILE_Y)
        .into_par_iter()
        .enumerate()
        .for_each(|(band, mut rows)| {
            let y_start = band * TILE_Y;
            let height = rows.len_of(Axis(1));
            let mut acc = vec![[0.0f32; L]; TILE_X * TILE_Y];
            for x_start in (0..nx).step_by(TILE_X) {
                let width = (nx - x_start).min(TILE_X);
                acc.iter_mut().for_each(|a| *a = [0.0; L]);
                let tile = Tile {
                    x_start,
                    y_start,
                    width,
                    height,
                };
                accumulate(
                    data,
                    padded_bins,
                    projections,
                    &tile,
                    interpolation,
                    &mut acc,
                );
                for lane in 0..rows.len_of(Axis(0)) {
                    for ty in 0..height {
                        let mut dst = rows.slice_mut(s![lane, ty, x_start..x_start + width]);
                        for (tx, d) in dst.iter_mut().enumerate() {
                            *d = acc[ty * TILE_X + tx][lane] * scale;
                        }
                    }
                }
            }
        });
}

/// Pixel range of one tile.
struct Tile {
    x_start: usize,
    y_start: usize,
    width: usize,
    height: usize,
}

/// Adds every projection's contribution to the tile's accumulators, with the
/// widest SIMD the processor offers.
fn accumulate<const L: usize>(
    data: &[[f32; L]],
    padded_bins: usize,
    projections: &[Projection],
    tile: &Tile,
    interpolation: Interpolation,
    acc: &mut [[f32; L]],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the processor supports the enabled features.
            unsafe { accumulate_avx2(data, padded_bins, projections, tile, interpolation, acc) };
            return;
        }
    }
    accumulate_generic(data, padded_bins, projections, tile, interpolation, acc);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2<const L: usize>(
    data: &[[f32; L]],
    padded_bins: usize,
    projections: &[Projection],
    tile: &Tile,
    interpolation: Interpolation,
    acc: &mut [[f32; L]],
) {
    accumulate_generic(data, padded_bins, projections, tile, interpolation, acc);
}

#[inline(always)]
fn accumulate_generic<const L: usize>(
    data: &[[f32; L]],
    padded_bins: usize,
    projections: &[Projection],
    tile: &Tile,
    interpolation: Interpolation,
    acc: &mut [[f32; L]],
) {
    for (p, row) in projections.iter().zip(data.chunks_exact(padded_bins)) {
        let du_dx = p.du_dx as f32;
        let u_tile = p.u00 + tile.x_start as f64 * p.du_dx + tile.y_start as f64 * p.du_dy;
        for ty in 0..tile.height {
            // Row origin in f64, steps along the row in f32.
            let base = (u_tile + ty as f64 * p.du_dy) as f32;
            let acc_row = &mut acc[ty * TILE_X..ty * TILE_X + tile.width];
            match interpolation {
                Interpolation::Linear => {
                    for (k, a) in acc_row.iter_mut().enumerate() {
                        let u = base + k as f32 * du_dx;
                        let i = u as usize;
                        let w = u - i as f32;
                        let (v0, v1) = (&row[i], &row[i + 1]);
                        for l in 0..L {
                            a[l] += v0[l] + w * (v1[l] - v0[l]);
                        }
                    }
                }
                Interpolation::Nearest => {
                    for (k, a) in acc_row.iter_mut().enumerate() {
                        let u = base + k as f32 * du_dx;
                        let v = &row[u as usize];
                        for l in 0..L {
                            a[l] += v[l];
                        }
                    }
                }
            }
        }
    }
}
