//! Voxel-driven cone-beam back projection: a plain f64 reference and the
//! fast multi-threaded CPU back projector.
//!
//! Both compute, for every voxel (x, y, z) of the slices `z_range` of a
//! volume,
//!
//! ```text
//! Σ_i (SOD / U_i)² · q_i(col_i, row_i)
//! ```
//!
//! with `U_i = SOD + t` the voxel's depth along projection i's central ray,
//! `(col_i, row_i)` where the voxel lands on the detector
//! ([`ConeGeometry::project_point`]) and `q_i` read with bilinear
//! interpolation, zero outside the detector. FDK passes weighted, filtered
//! projections as `q`.

use std::ops::Range;

use ndarray::{s, Array3, ArrayView2, ArrayView3, ArrayViewMut3, Axis};
use rayon::prelude::*;

use super::geometry::{ConeGeometry, ConeVolume};
use crate::cpu::SimdChoice;
use crate::error::{CoreError, Result};

/// Checks projections `[angle][row][col]`, the slice range and the output
/// `[slice][y][x]` against the geometry and volume.
pub(crate) fn check_backprojection(
    projections: &ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z_range: &Range<usize>,
    out_dim: (usize, usize, usize),
) -> Result<()> {
    let expected = (geometry.n_angles(), geometry.n_rows(), geometry.n_cols());
    if projections.dim() != expected {
        return Err(CoreError::Shape(format!(
            "projections are {:?}, the geometry expects {:?} ([angle][row][col])",
            projections.dim(),
            expected
        )));
    }
    if z_range.start >= z_range.end || z_range.end > volume.nz {
        return Err(CoreError::Shape(format!(
            "slices {}..{} are not a non-empty part of the volume's {} slices",
            z_range.start, z_range.end, volume.nz
        )));
    }
    let want = (z_range.len(), volume.ny, volume.nx);
    if out_dim != want {
        return Err(CoreError::Shape(format!(
            "output is {out_dim:?}, expected {want:?} ([slice][y][x])"
        )));
    }
    Ok(())
}

/// Bilinear read of `p` (`[row][col]`) at (col, row), zero outside, in f64.
fn bilinear_f64(p: &ArrayView2<'_, f32>, col: f64, row: f64) -> f64 {
    let (nr, nc) = (p.nrows() as i64, p.ncols() as i64);
    let (c0, r0) = (col.floor(), row.floor());
    let (fc, fr) = (col - c0, row - r0);
    let (c0, r0) = (c0 as i64, r0 as i64);
    let at = |r: i64, c: i64| -> f64 {
        if r < 0 || c < 0 || r >= nr || c >= nc {
            0.0
        } else {
            p[[r as usize, c as usize]] as f64
        }
    };
    (1.0 - fr) * ((1.0 - fc) * at(r0, c0) + fc * at(r0, c0 + 1))
        + fr * ((1.0 - fc) * at(r0 + 1, c0) + fc * at(r0 + 1, c0 + 1))
}

/// The plain reference: every voxel, every projection, geometry and
/// interpolation in f64, accumulated in f64, single-threaded per slice
/// (slices in parallel). Returns slices `z_range` as `[slice][y][x]`.
///
/// Errors: shapes that do not fit ([`CoreError::Shape`]).
pub fn backproject_cone_reference(
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z_range: Range<usize>,
) -> Result<Array3<f32>> {
    let dim = (z_range.len(), volume.ny, volume.nx);
    check_backprojection(&projections, geometry, volume, &z_range, dim)?;
    let mut out = Array3::<f32>::zeros(dim);
    let sod = geometry.sod();
    out.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(k, mut slice)| {
            let z = volume.z(z_range.start + k);
            for iy in 0..volume.ny {
                let y = volume.y(iy);
                for ix in 0..volume.nx {
                    let x = volume.x(ix);
                    let mut sum = 0.0f64;
                    for i in 0..geometry.n_angles() {
                        if let Some(p) = geometry.project_point(i, x, y, z) {
                            let w = (sod / p.depth).powi(2);
                            sum +=
                                w * bilinear_f64(&projections.index_axis(Axis(0), i), p.col, p.row);
                        }
                    }
                    slice[[iy, ix]] = sum as f32;
                }
            }
        });
    Ok(out)
}

/// Side of the x–y tiles of the fast back projector.
const TILE: usize = 16;
/// Projections transposed and processed per pass over the volume.
const ANGLE_CHUNK: usize = 32;

/// Per-(x, y) constants of one projection: everything the loop along z
/// needs, computed once (in f64) and reused for every slice.
struct ColumnTerms {
    /// Padded column index of the left tap.
    c0: usize,
    /// `w·(1 − fc)` and `w·fc`: the FDK weight times the column weights.
    wa: f32,
    wb: f32,
    /// Padded row coordinate (row + 1) of slice 0 of the slab, and its step
    /// per slice.
    r0: f32,
    dr: f32,
    /// Slices (relative to the slab) whose padded row lies in
    /// `[0, n_rows + 1)`, i.e. whose row lies in `[−1, n_rows)`.
    k_lo: usize,
    k_hi: usize,
    /// The last valid left-tap index (`n_rows`): taps `ri` and `ri + 1`
    /// must lie in the padded column of `n_rows + 2` values.
    ri_max: usize,
}

/// Padded row coordinate of slice `k`: the one expression every kernel and
/// the range computation use.
#[inline(always)]
fn row_at(r0: f32, dr: f32, k: usize) -> f32 {
    r0 + dr * k as f32
}

/// Computes the per-(x, y) terms, or `None` when the column misses the
/// detector (column coordinate outside `[−1, n_cols)`) or no slice lands on
/// it.
#[allow(clippy::too_many_arguments)]
#[inline]
fn column_terms(
    geometry: &ConeGeometry,
    cos: f64,
    sin: f64,
    x: f64,
    y: f64,
    z_first: f64,
    voxel: f64,
    nzs: usize,
) -> Option<ColumnTerms> {
    let sod = geometry.sod();
    let depth = sod + (-x * sin + y * cos);
    if depth <= 0.0 {
        return None;
    }
    let m = geometry.sdd() / depth;
    let col = geometry.center_col() + (x * cos + y * sin) * m / geometry.pixel_u();
    let nc = geometry.n_cols() as f64;
    if !(col >= -1.0 && col < nc) {
        return None;
    }
    let cf = col.floor();
    let fc = col - cf;
    let w = (sod / depth) * (sod / depth);
    let r0 = (geometry.center_row() + 1.0 + z_first * m / geometry.pixel_v()) as f32;
    let dr = (voxel * m / geometry.pixel_v()) as f32;
    let top = (geometry.n_rows() + 1) as f32;
    // Slices with padded row in [0, nr + 1): a first guess in f64, then
    // exact in the f32 arithmetic of the loop (the row grows with k).
    let lo = (-(r0 as f64) / dr as f64).ceil().clamp(0.0, nzs as f64) as usize;
    let hi = ((top as f64 - r0 as f64) / dr as f64)
        .ceil()
        .clamp(0.0, nzs as f64) as usize;
    let (mut k_lo, mut k_hi) = (lo, hi.max(lo));
    while k_lo > 0 && row_at(r0, dr, k_lo - 1) >= 0.0 {
        k_lo -= 1;
    }
    while k_lo < nzs && row_at(r0, dr, k_lo) < 0.0 {
        k_lo += 1;
    }
    k_hi = k_hi.max(k_lo);
    while k_hi > k_lo && row_at(r0, dr, k_hi - 1) >= top {
        k_hi -= 1;
    }
    while k_hi < nzs && row_at(r0, dr, k_hi) < top {
        k_hi += 1;
    }
    if k_hi <= k_lo {
        return None;
    }
    Some(ColumnTerms {
        c0: (cf as i64 + 1) as usize,
        wa: (w * (1.0 - fc)) as f32,
        wb: (w * fc) as f32,
        r0,
        dr,
        k_lo,
        k_hi,
        ri_max: geometry.n_rows(),
    })
}

/// The loop along z, portable: bilinear reads from two padded detector
/// columns `a`, `b` (row `r` at index `r + 1`, `n_rows + 2` values each),
/// accumulated into `acc`.
#[inline(always)]
fn accumulate_body(acc: &mut [f32], a: &[f32], b: &[f32], t: &ColumnTerms, from: usize) {
    let (r0, dr, wa, wb) = (t.r0, t.dr, t.wa, t.wb);
    let a = &a[..t.ri_max + 2];
    let b = &b[..t.ri_max + 2];
    for (k, v) in acc.iter_mut().enumerate().take(t.k_hi).skip(from) {
        let r = row_at(r0, dr, k);
        // r ∈ [0, n_rows + 1) by the range of k: truncation is the floor;
        // the clamp only keeps the reads inside the column.
        let ri = (r as usize).min(t.ri_max);
        let fr = r - ri as f32;
        let (a0, a1) = (a[ri], a[ri + 1]);
        let (b0, b1) = (b[ri], b[ri + 1]);
        *v += wa * (a0 + fr * (a1 - a0)) + wb * (b0 + fr * (b1 - b0));
    }
}

/// The loop along z with AVX2: 8 slices at a time, four 8-lane gathers
/// (the two taps of both columns), then the portable loop for the rest.
///
/// # Safety
/// The CPU must support AVX2 and FMA; `a` and `b` must hold at least
/// `t.ri_max + 2` values and `acc` at least `t.k_hi`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn accumulate_avx2(acc: &mut [f32], a: &[f32], b: &[f32], t: &ColumnTerms) {
    use std::arch::x86_64::*;
    assert!(a.len() >= t.ri_max + 2 && b.len() >= t.ri_max + 2 && acc.len() >= t.k_hi);
    let n8 = (t.k_hi - t.k_lo) / 8 * 8;
    let r0 = _mm256_set1_ps(t.r0);
    let dr = _mm256_set1_ps(t.dr);
    let wa = _mm256_set1_ps(t.wa);
    let wb = _mm256_set1_ps(t.wb);
    let zero = _mm256_setzero_si256();
    let max = _mm256_set1_epi32(t.ri_max as i32);
    let lanes = _mm256_setr_ps(0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0);
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut k = t.k_lo;
    while k < t.k_lo + n8 {
        // Same rounding as `row_at`: k as f32, one multiply, one add.
        let kf = _mm256_add_ps(_mm256_set1_ps(k as f32), lanes);
        let r = _mm256_add_ps(r0, _mm256_mul_ps(dr, kf));
        // Truncation (r ≥ 0), clamped into [0, ri_max] so every gather
        // index i, i + 1 lies inside the columns.
        let ri = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvttps_epi32(r), max), zero);
        let fr = _mm256_sub_ps(r, _mm256_cvtepi32_ps(ri));
        // SAFETY: 0 ≤ ri ≤ ri_max and the columns hold ri_max + 2 values.
        let a0 = _mm256_i32gather_ps::<4>(pa, ri);
        let a1 = _mm256_i32gather_ps::<4>(pa.add(1), ri);
        let b0 = _mm256_i32gather_ps::<4>(pb, ri);
        let b1 = _mm256_i32gather_ps::<4>(pb.add(1), ri);
        let va = _mm256_fmadd_ps(fr, _mm256_sub_ps(a1, a0), a0);
        let vb = _mm256_fmadd_ps(fr, _mm256_sub_ps(b1, b0), b0);
        let v = _mm256_fmadd_ps(wb, vb, _mm256_mul_ps(wa, va));
        // SAFETY: k + 7 < k_hi ≤ acc.len().
        let dst = acc.as_mut_ptr().add(k);
        _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), v));
        k += 8;
    }
    accumulate_body(acc, a, b, t, k);
}

/// Which build of the z loop runs (decided once per call).
#[derive(Clone, Copy)]
enum Kernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    fn detect(choice: SimdChoice) -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let off = choice == SimdChoice::Portable;
            if !off
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Self::Avx2;
            }
        }
        Self::Portable
    }

    #[inline(always)]
    fn run(self, acc: &mut [f32], a: &[f32], b: &[f32], t: &ColumnTerms) {
        match self {
            Self::Portable => accumulate_body(acc, a, b, t, t.k_lo),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: chosen only when the CPU reports AVX2 and FMA.
            Self::Avx2 => unsafe { accumulate_avx2(acc, a, b, t) },
        }
    }
}

/// Fast CPU cone-beam back projection of slices `z_range` into `out`
/// (`[slice][y][x]`, overwritten), the same sum as
/// [`backproject_cone_reference`] in f32.
///
/// Projections are taken [`ANGLE_CHUNK`] at a time and transposed to
/// `[col][row]` with a zero border (so "zero outside the detector" costs no
/// test in the inner loop). The volume is accumulated as `[y][x][z]`:
/// rayon works on bands of 16 rows of y, each band on 16 × 16 x–y tiles; for
/// each projection and each (x, y) the column, depth weight and row
/// coordinate of the first slice are computed once (f64), then the loop
/// along z only steps the row coordinate (`row += Δrow`), reads the two
/// detector columns and accumulates, a loop the compiler vectorises (AVX2
/// gathers where the CPU has them; [`backproject_cone_with`] and
/// [`SimdChoice::Portable`] force the portable build).
///
/// Errors: shapes that do not fit ([`CoreError::Shape`]).
pub fn backproject_cone(
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z_range: Range<usize>,
    out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    backproject_cone_with(
        projections,
        geometry,
        volume,
        z_range,
        out,
        SimdChoice::Auto,
    )
}

/// [`backproject_cone`] with the builds of the z loop `choice`
/// ([`SimdChoice::Portable`]: the portable build on every processor).
///
/// Errors: as [`backproject_cone`].
pub fn backproject_cone_with(
    projections: ArrayView3<'_, f32>,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    z_range: Range<usize>,
    mut out: ArrayViewMut3<'_, f32>,
    choice: SimdChoice,
) -> Result<()> {
    check_backprojection(&projections, geometry, volume, &z_range, out.dim())?;
    let kernel = Kernel::detect(choice);
    let nzs = z_range.len();
    let (nr, nc) = (geometry.n_rows(), geometry.n_cols());
    let (nrp, ncp) = (nr + 2, nc + 2);
    let consts = geometry.projections();
    let z_first = volume.z(z_range.start);
    let voxel = volume.voxel_size as f64;
    let xs: Vec<f64> = (0..volume.nx).map(|i| volume.x(i)).collect();
    let ys: Vec<f64> = (0..volume.ny).map(|i| volume.y(i)).collect();

    let mut acc = Array3::<f32>::zeros((volume.ny, volume.nx, nzs));
    let mut padded = Array3::<f32>::zeros((ANGLE_CHUNK.min(consts.len()), ncp, nrp));
    let mut start = 0;
    while start < consts.len() {
        let end = (start + ANGLE_CHUNK).min(consts.len());
        let chunk = end - start;
        // Transpose this chunk to [angle][col + 1][row + 1] (zero border).
        padded
            .outer_iter_mut()
            .into_par_iter()
            .take(chunk)
            .enumerate()
            .for_each(|(a, mut t)| {
                let p = projections.index_axis(Axis(0), start + a);
                for ((r, c), &v) in p.indexed_iter() {
                    t[[c + 1, r + 1]] = v;
                }
            });
        let padded_ref = &padded;
        let consts = &consts[start..end];
        acc.axis_chunks_iter_mut(Axis(0), TILE)
            .into_par_iter()
            .enumerate()
            .for_each(|(band, mut rows)| {
                let y0 = band * TILE;
                let n_y = rows.len_of(Axis(0));
                for x0 in (0..volume.nx).step_by(TILE) {
                    let x1 = (x0 + TILE).min(volume.nx);
                    for (a, pc) in consts.iter().enumerate() {
                        let proj = padded_ref.index_axis(Axis(0), a);
                        let proj = proj.as_slice().expect("standard layout");
                        for dy in 0..n_y {
                            let y = ys[y0 + dy];
                            for (ix, &x) in xs.iter().enumerate().take(x1).skip(x0) {
                                let Some(t) = column_terms(
                                    geometry, pc.cos, pc.sin, x, y, z_first, voxel, nzs,
                                ) else {
                                    continue;
                                };
                                let a_col = &proj[t.c0 * nrp..(t.c0 + 1) * nrp];
                                let b_col = &proj[(t.c0 + 1) * nrp..(t.c0 + 2) * nrp];
                                let mut line = rows.slice_mut(s![dy, ix, ..]);
                                let line = line.as_slice_mut().expect("contiguous z");
                                kernel.run(line, a_col, b_col, &t);
                            }
                        }
                    }
                }
            });
        start = end;
    }
    // [y][x][z] → [z][y][x].
    out.outer_iter_mut()
        .into_par_iter()
        .enumerate()
        .for_each(|(k, mut slice)| {
            for ((iy, ix), v) in slice.indexed_iter_mut() {
                *v = acc[[iy, ix, k]];
            }
        });
    Ok(())
}
