//! Rotation-centre finding with the Fourier-domain metric of Vo, Atwood and
//! Drakopoulos, "Reliable method for calculating the center of rotation in
//! parallel-beam tomography", Opt. Express 22, 19078 (2014).
//!
//! A 180° sinogram and its mirror image (left–right flipped) together make
//! a 360° sinogram. When the mirror is shifted by twice the offset of the
//! true rotation axis from the detector centre, the combined sinogram is
//! consistent and its 2-D Fourier transform has (almost) no energy inside a
//! double-wedge region (|ω_angle| large for small |ω_bin|); any other shift
//! breaks the sinogram at the seam and puts energy there. The metric is the
//! mean magnitude of the spectrum inside that mask, minimised first over
//! integer shifts (half-pixel centres) of a smoothed sinogram, then over
//! quarter-pixel centres with cubic B-spline shifts. As in the reference
//! implementation (TomoPy's `find_center_vo`): smoothing with Gaussians of σ
//! = (3, 1) for the coarse and (2, 2) for the fine search, mask ratio 0.5,
//! 20 rows dropped around the zero angular frequency, search ±50 px around
//! the detector centre by default (any range, up to the whole detector,
//! with [`CenterOptions::for_range`]), and 4× down-sampling for the coarse
//! search of sinograms larger than 4 Mpixel.
//!
//! Scans over more than 180° (360° scans) use their first 180°; a 360° scan
//! whose axis is far off the detector's middle (half acquisition) is
//! [`crate::half::find_axis_360`]'s.

use std::sync::Arc;

use ndarray::{s, Array2, ArrayView2, Axis};
use rayon::prelude::*;
use rustfft::num_complex::Complex;
use rustfft::{Fft, FftPlanner};

use crate::error::{IoError, Result};

/// Parameters of [`find_center`].
#[derive(Clone, Debug, PartialEq)]
pub struct CenterOptions {
    /// Search from `detector centre + smin` (pixels).
    pub smin: f32,
    /// Search up to `detector centre + smax` (pixels).
    pub smax: f32,
    /// Half-width of the fine search around the coarse result (pixels).
    pub srad: f32,
    /// Step of the fine search (pixels).
    pub step: f32,
    /// Mask parameter (ratio of the object's size to the detector width).
    pub ratio: f32,
    /// Rows dropped around the zero angular frequency of the mask.
    pub drop: usize,
}

impl Default for CenterOptions {
    fn default() -> Self {
        Self {
            smin: -50.0,
            smax: 50.0,
            srad: 6.0,
            step: 0.25,
            ratio: 0.5,
            drop: 20,
        }
    }
}

impl CenterOptions {
    /// The default options searching centres `a` to `b` (detector columns,
    /// bin `k` centred at `k`) of a detector of `n_cols` columns instead of
    /// ±50 px around its middle; `0:n_cols − 1` searches the whole
    /// detector.
    pub fn for_range(a: f32, b: f32, n_cols: usize) -> Result<Self> {
        if !(a.is_finite() && b.is_finite() && a < b) {
            return Err(IoError::Parameter(format!(
                "centre search range {a}:{b} must be finite with a < b"
            )));
        }
        let last = n_cols.saturating_sub(1) as f32;
        if b < 0.0 || a > last {
            return Err(IoError::Parameter(format!(
                "centre search range {a}:{b} lies outside the detector's columns 0 to {last}"
            )));
        }
        let mid = (n_cols / 2) as f32;
        Ok(Self {
            smin: a.max(0.0) - mid,
            smax: b.min(last) - mid,
            ..Self::default()
        })
    }

    /// Checks the parameters: finite, `smin < smax`, positive `srad`,
    /// `step` and `ratio ≤ 1`.
    pub fn validate(&self) -> Result<()> {
        let all_finite = [self.smin, self.smax, self.srad, self.step, self.ratio]
            .iter()
            .all(|v| v.is_finite());
        if !all_finite {
            return Err(IoError::Parameter(format!(
                "centre search parameters must be finite: {self:?}"
            )));
        }
        if self.smin >= self.smax {
            return Err(IoError::Parameter(format!(
                "centre search range: smin {} must be below smax {}",
                self.smin, self.smax
            )));
        }
        if !(self.srad > 0.0 && self.step > 0.0) {
            return Err(IoError::Parameter(format!(
                "centre search: srad {} and step {} must be positive",
                self.srad, self.step
            )));
        }
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return Err(IoError::Parameter(format!(
                "centre search: mask ratio {} must be in (0, 1]",
                self.ratio
            )));
        }
        Ok(())
    }
}

/// Quality below which a centre is reported as unreliable.
pub const MIN_QUALITY: f32 = 0.05;

/// The result of a centre search.
#[derive(Clone, Debug, PartialEq)]
pub struct CenterResult {
    /// The rotation-axis position in bin-index units (bin k centred at k).
    pub center: f32,
    /// How distinct the minimum is: `1 − min / median` of the fine search's
    /// metric, in [0, 1]; near 0 means no clear minimum (centre unreliable),
    /// real scans typically give 0.1–0.6.
    pub quality: f32,
    /// Whether the coarse minimum lies on the edge of the search range (the
    /// true centre may lie outside; widen `smin`/`smax`).
    pub at_edge: bool,
    /// The fine search: `(centre, metric)` pairs.
    pub fine_metric: Vec<(f32, f32)>,
}

impl CenterResult {
    /// A warning when the centre is unreliable (no clear minimum, or the
    /// minimum at the edge of the search range); `None` when it is clear.
    pub fn warning(&self) -> Option<String> {
        if self.quality < MIN_QUALITY {
            Some(format!(
                "the centre metric has no clear minimum (quality {:.3} < {MIN_QUALITY}): centre {:.2} is unreliable; \
                 check it with `tomors center` and give --center",
                self.quality, self.center
            ))
        } else if self.at_edge {
            Some(format!(
                "the centre {:.2} lies at the edge of the search range: the true centre may lie outside; widen the search",
                self.center
            ))
        } else {
            None
        }
    }
}

/// The rows of a sinogram covering the first 180° of a scan, in angle
/// order: `[angle][bin]`.
pub fn half_turn(sinogram: ArrayView2<'_, f32>, angles: &[f32]) -> Result<Array2<f32>> {
    let n = sinogram.nrows();
    if angles.len() != n {
        return Err(IoError::Parameter(format!(
            "{} angles for a sinogram of {n} rows",
            angles.len()
        )));
    }
    if angles.iter().any(|a| !a.is_finite()) {
        return Err(IoError::Parameter("non-finite angle".into()));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| angles[a].total_cmp(&angles[b]));
    let a0 = angles[order[0]] as f64;
    let span = angles[order[n - 1]] as f64 - a0;
    let step = span / (n.max(2) - 1) as f64;
    let pi = std::f64::consts::PI;
    if span + step < 0.95 * pi {
        return Err(IoError::Parameter(format!(
            "centre finding needs a scan over 180°, the angles cover {:.1}°",
            (span + step).to_degrees()
        )));
    }
    let keep: Vec<usize> = order
        .into_iter()
        .filter(|&i| angles[i] as f64 - a0 < pi - 0.5 * step + 1e-9 || span < pi + 0.5 * step)
        .collect();
    if keep.len() < 8 {
        return Err(IoError::Parameter(format!(
            "centre finding needs at least 8 projections over 180°, got {}",
            keep.len()
        )));
    }
    Ok(sinogram.select(Axis(0), &keep))
}

/// Finds the rotation centre of a sinogram `[angle][bin]` (preprocessed:
/// flat/dark corrected and −log) with Vo's Fourier metric; see the module
/// documentation.
pub fn find_center(
    sinogram: ArrayView2<'_, f32>,
    angles: &[f32],
    options: &CenterOptions,
) -> Result<CenterResult> {
    options.validate()?;
    let sino = half_turn(sinogram, angles)?;
    let (nrow, ncol) = sino.dim();
    if ncol < 16 {
        return Err(IoError::Parameter(format!(
            "centre finding needs at least 16 detector bins, got {ncol}"
        )));
    }
    if sino.iter().any(|v| !v.is_finite()) {
        return Err(IoError::Parameter(
            "the sinogram holds non-finite values (preprocess it first)".into(),
        ));
    }
    let (lo, hi) = sino
        .iter()
        .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    if hi - lo <= 1e-6 * hi.abs().max(lo.abs()).max(1e-30) {
        return Err(IoError::Parameter(format!(
            "the sinogram is constant ({lo}): it holds no information on the rotation centre"
        )));
    }
    let cs = gaussian_filter(sino.view(), 3.0, 1.0);
    let fs = gaussian_filter(sino.view(), 2.0, 2.0);
    let (init, at_edge) = if (nrow * ncol) as f64 > 4e6 {
        let small = downsample(cs.view(), 4);
        let (c, e) = search_coarse(
            small.view(),
            options.smin / 4.0,
            options.smax / 4.0,
            options,
        );
        (c * 4.0, e)
    } else {
        search_coarse(cs.view(), options.smin, options.smax, options)
    };
    let fine = search_fine(fs.view(), init, options);
    let (mut best, mut bm) = (init, f32::INFINITY);
    for &(c, m) in &fine {
        if m < bm {
            best = c;
            bm = m;
        }
    }
    let mut ms: Vec<f32> = fine.iter().map(|x| x.1).collect();
    let med = crate::preprocess::median(&mut ms);
    let quality = if med > 0.0 {
        (1.0 - bm / med).clamp(0.0, 1.0)
    } else {
        0.0
    };
    Ok(CenterResult {
        center: best,
        quality,
        at_edge,
        fine_metric: fine,
    })
}

fn search_coarse(
    sino: ArrayView2<'_, f32>,
    smin: f32,
    smax: f32,
    o: &CenterOptions,
) -> (f32, bool) {
    let (nrow, ncol) = sino.dim();
    let cen_fliplr = (ncol as f32 - 1.0) / 2.0;
    let clip = |s: f32| ((s + cen_fliplr).clamp(0.0, ncol as f32 - 1.0) - cen_fliplr).trunc();
    let (smin, smax) = (clip(smin), clip(smax));
    let start = (ncol / 2) as f32 + smin;
    let stop = (ncol / 2) as f32 + smax;
    let mut cors = Vec::new();
    let mut c = start;
    while c <= stop + 1e-3 {
        cors.push(c);
        c += 0.5;
    }
    let flip = flip_lr(sino);
    let comp = flip_ud(sino);
    let mask = create_mask(2 * nrow, ncol, 0.5 * o.ratio * ncol as f32, o.drop);
    let fft = Fft2::new(2 * nrow, ncol);
    let mass = column_mass(sino);
    let metrics: Vec<f32> = cors
        .par_iter()
        .map(|&c| {
            let shift = (2.0 * (c - cen_fliplr)).round() as i64;
            if mirrored_fraction(&mass, shift) < MIN_MIRRORED {
                return f32::INFINITY;
            }
            let shifted = roll_fill(flip.view(), comp.view(), shift);
            metric(&fft, sino, shifted.view(), &mask)
        })
        .collect();
    if cors.is_empty() {
        return (cen_fliplr, true);
    }
    if metrics.iter().all(|m| m.is_infinite()) {
        return (cors[cors.len() / 2], true);
    }
    let k = argmin(&metrics);
    (cors[k], k == 0 || k + 1 == cors.len())
}

/// The smallest share of the object's signal a trial centre's mirror must
/// cover (see [`mirrored_fraction`]).
const MIN_MIRRORED: f32 = 0.3;

/// Each column's mean over the angles, above the smallest of them: where
/// the object is.
fn column_mass(sino: ArrayView2<'_, f32>) -> Vec<f32> {
    let m: Vec<f32> = sino
        .mean_axis(Axis(0))
        .map(|a| a.to_vec())
        .unwrap_or_default();
    let lo = m.iter().copied().fold(f32::INFINITY, f32::min);
    m.iter().map(|v| (v - lo).max(0.0)).collect()
}

/// The share of the object's signal (`mass`, per column) in the columns
/// where the mirror shifted by `shift` holds mirrored data rather than the
/// fill. Far from the true centre the mirror leaves the object and the
/// fill (the sinogram upside down) alone makes a consistent 360° sinogram,
/// so the metric is low for the wrong reason: searches over a wide range
/// (the whole detector) skip such trial centres.
fn mirrored_fraction(mass: &[f32], shift: i64) -> f32 {
    let n = mass.len() as i64;
    let total: f32 = mass.iter().sum();
    if total <= 0.0 {
        return 1.0;
    }
    let (a, b) = if shift >= 0 {
        (shift.min(n), n)
    } else {
        (0, (n + shift).max(0))
    };
    mass[a as usize..b as usize].iter().sum::<f32>() / total
}

fn search_fine(sino: ArrayView2<'_, f32>, init: f32, o: &CenterOptions) -> Vec<(f32, f32)> {
    let (nrow, ncol) = sino.dim();
    let cen_fliplr = (ncol as f32 - 1.0) / 2.0;
    let srad = o.srad.abs().clamp(1.0, ncol as f32 / 4.0);
    let step = o.step.abs().clamp(0.1, srad);
    let init = init.clamp(srad, ncol as f32 - srad - 1.0);
    let n = (2.0 * srad / step).round() as usize + 1;
    let cors: Vec<f32> = (0..n).map(|i| init - srad + i as f32 * step).collect();
    let flip = flip_lr(sino);
    let mask = create_mask(2 * nrow, ncol, 0.5 * o.ratio * ncol as f32, o.drop);
    let spline = bspline_coefficients(flip.view());
    let fft = Fft2::new(2 * nrow, ncol);
    cors.par_iter()
        .map(|&c| {
            let shift = 2.0 * (c - cen_fliplr);
            let shifted = bspline_shift(spline.view(), shift);
            (c, metric(&fft, sino, shifted.view(), &mask))
        })
        .collect()
}

fn argmin(v: &[f32]) -> usize {
    let mut k = 0;
    for (i, &x) in v.iter().enumerate() {
        if x < v[k] {
            k = i;
        }
    }
    k
}

fn flip_lr(a: ArrayView2<'_, f32>) -> Array2<f32> {
    a.slice(s![.., ..;-1]).to_owned()
}

fn flip_ud(a: ArrayView2<'_, f32>) -> Array2<f32> {
    a.slice(s![..;-1, ..]).to_owned()
}

/// `np.roll(flip, shift, axis=1)` with the wrapped-around columns taken from
/// `comp` instead.
fn roll_fill(flip: ArrayView2<'_, f32>, comp: ArrayView2<'_, f32>, shift: i64) -> Array2<f32> {
    let (nrow, ncol) = flip.dim();
    let n = ncol as i64;
    let mut out = Array2::<f32>::zeros((nrow, ncol));
    for j in 0..ncol {
        let src = (j as i64 - shift).rem_euclid(n) as usize;
        let from_comp = if shift >= 0 {
            (j as i64) < shift
        } else {
            j as i64 >= n + shift
        };
        for i in 0..nrow {
            out[[i, j]] = if from_comp {
                comp[[i, j]]
            } else {
                flip[[i, src]]
            };
        }
    }
    out
}

/// Vo's mask (TomoPy's `_create_mask`), in `fftshift`ed layout.
fn create_mask(nrow: usize, ncol: usize, radius: f32, drop: usize) -> Array2<f32> {
    let du = 1.0 / ncol as f64;
    let dv = (nrow as f64 - 1.0) / (nrow as f64 * 2.0 * std::f64::consts::PI);
    let cen_row = (nrow as f64 / 2.0).ceil() as i64 - 1;
    let cen_col = (ncol as f64 / 2.0).ceil() as i64 - 1;
    let drop = (drop as i64).min((0.05 * nrow as f64).ceil() as i64);
    let mut mask = Array2::<f32>::zeros((nrow, ncol));
    for i in 0..nrow as i64 {
        let pos = (((i - cen_row) as f64 * dv / radius as f64) / du).ceil() as i64;
        let (a, b) = (-pos + cen_col, pos + cen_col);
        let (p1, p2) = (
            a.min(b).clamp(0, ncol as i64 - 1),
            a.max(b).clamp(0, ncol as i64 - 1),
        );
        for j in p1..=p2 {
            mask[[i as usize, j as usize]] = 1.0;
        }
    }
    for i in (cen_row - drop).max(0)..=(cen_row + drop).min(nrow as i64 - 1) {
        mask.row_mut(i as usize).fill(0.0);
    }
    for j in (cen_col - 1).max(0)..=(cen_col + 1).min(ncol as i64 - 1) {
        mask.column_mut(j as usize).fill(0.0);
    }
    mask
}

/// The 2-D FFT of the metric: a row plan and a column plan made once per
/// search by rustfft's planner and shared by every trial centre.
struct Fft2 {
    rows: Arc<dyn Fft<f32>>,
    cols: Arc<dyn Fft<f32>>,
}

impl Fft2 {
    /// Plans for `nrow × ncol` arrays.
    fn new(nrow: usize, ncol: usize) -> Self {
        let mut planner = FftPlanner::<f32>::new();
        Self {
            rows: planner.plan_fft_forward(ncol),
            cols: planner.plan_fft_forward(nrow),
        }
    }
}

/// Mean of |FFT2([sino; shifted])| · mask (mask in fftshifted layout).
fn metric(
    fft: &Fft2,
    sino: ArrayView2<'_, f32>,
    shifted: ArrayView2<'_, f32>,
    mask: &Array2<f32>,
) -> f32 {
    let (nrow, ncol) = sino.dim();
    let nr2 = 2 * nrow;
    let mut data: Vec<Complex<f32>> = sino
        .iter()
        .chain(shifted.iter())
        .map(|&v| Complex::new(v, 0.0))
        .collect();
    // Every row in one batch.
    fft.rows.process(&mut data);
    // The columns where the mask is not empty, gathered and transformed in
    // one batch. `sj` is the shifted index of unshifted column `j`.
    let shifted_col = |j: usize| (j + ncol - ncol / 2) % ncol;
    let cols: Vec<usize> = (0..ncol)
        .filter(|&j| mask.column(shifted_col(j)).iter().any(|&m| m != 0.0))
        .collect();
    let mut buf = vec![Complex::new(0.0f32, 0.0); cols.len() * nr2];
    for (k, &j) in cols.iter().enumerate() {
        for i in 0..nr2 {
            buf[k * nr2 + i] = data[i * ncol + j];
        }
    }
    if !buf.is_empty() {
        fft.cols.process(&mut buf);
    }
    let mut sum = 0f64;
    for (k, &j) in cols.iter().enumerate() {
        let sj = shifted_col(j);
        for (i, c) in buf[k * nr2..(k + 1) * nr2].iter().enumerate() {
            let si = (i + nr2 - nr2 / 2) % nr2;
            let m = mask[[si, sj]];
            if m != 0.0 {
                sum += (c.norm() * m) as f64;
            }
        }
    }
    (sum / (nr2 * ncol) as f64) as f32
}

/// Gaussian filter with standard deviations `(sigma_rows, sigma_cols)`,
/// truncated at 4σ, reflecting edges (as `scipy.ndimage.gaussian_filter`).
pub fn gaussian_filter(a: ArrayView2<'_, f32>, sigma_rows: f32, sigma_cols: f32) -> Array2<f32> {
    let kernel = |sigma: f32| -> Vec<f32> {
        let r = (4.0 * sigma + 0.5) as i64;
        let mut k: Vec<f32> = (-r..=r)
            .map(|x| (-0.5 * (x as f32 / sigma).powi(2)).exp())
            .collect();
        let s: f32 = k.iter().sum();
        k.iter_mut().for_each(|v| *v /= s);
        k
    };
    let reflect = |i: i64, n: i64| -> usize {
        let p = 2 * n;
        let mut k = i.rem_euclid(p);
        if k >= n {
            k = p - 1 - k;
        }
        k as usize
    };
    let (nr, nc) = a.dim();
    let kr = kernel(sigma_rows);
    let kc = kernel(sigma_cols);
    let hr = (kr.len() / 2) as i64;
    let hc = (kc.len() / 2) as i64;
    let mut tmp = Array2::<f32>::zeros((nr, nc));
    for i in 0..nr {
        for j in 0..nc {
            let mut s = 0f32;
            for (k, w) in kc.iter().enumerate() {
                s += w * a[[i, reflect(j as i64 + k as i64 - hc, nc as i64)]];
            }
            tmp[[i, j]] = s;
        }
    }
    let mut out = Array2::<f32>::zeros((nr, nc));
    for i in 0..nr {
        for j in 0..nc {
            let mut s = 0f32;
            for (k, w) in kr.iter().enumerate() {
                s += w * tmp[[reflect(i as i64 + k as i64 - hr, nr as i64), j]];
            }
            out[[i, j]] = s;
        }
    }
    out
}

/// Block means of `f × f` pixels (partial blocks at the edges dropped).
fn downsample(a: ArrayView2<'_, f32>, f: usize) -> Array2<f32> {
    let (nr, nc) = (a.nrows() / f, a.ncols() / f);
    Array2::from_shape_fn((nr.max(1), nc.max(1)), |(i, j)| {
        let b = a.slice(s![
            i * f..((i + 1) * f).min(a.nrows()),
            j * f..((j + 1) * f).min(a.ncols())
        ]);
        b.mean().unwrap_or(0.0)
    })
}

/// Cubic B-spline coefficients of each row (mirror boundary).
fn bspline_coefficients(a: ArrayView2<'_, f32>) -> Array2<f64> {
    let z = 3f64.sqrt() - 2.0;
    let mut out = a.mapv(f64::from);
    for mut row in out.rows_mut() {
        let n = row.len();
        if n < 2 {
            continue;
        }
        let c: &mut Vec<f64> = &mut row.to_vec();
        // Causal initialisation (mirror), truncated sum.
        let horizon = n.min(30);
        let mut zn = z;
        let mut sum = c[0];
        for v in c.iter().take(horizon).skip(1) {
            sum += zn * v;
            zn *= z;
        }
        c[0] = sum;
        for k in 1..n {
            c[k] += z * c[k - 1];
        }
        c[n - 1] = (z / (z * z - 1.0)) * (z * c[n - 2] + c[n - 1]);
        for k in (0..n - 1).rev() {
            c[k] = z * (c[k + 1] - c[k]);
        }
        for (r, v) in row.iter_mut().zip(c.iter()) {
            *r = 6.0 * v;
        }
    }
    out
}

/// `out[x] = f(x − shift)` per row, evaluating the cubic B-spline with the
/// given coefficients; positions outside the row are clamped to its edge
/// (as `mode='nearest'`).
fn bspline_shift(coef: ArrayView2<'_, f64>, shift: f32) -> Array2<f32> {
    let (nr, nc) = coef.dim();
    let last = nc as f64 - 1.0;
    let mut out = Array2::<f32>::zeros((nr, nc));
    let beta = |t: f64| -> f64 {
        let t = t.abs();
        if t < 1.0 {
            2.0 / 3.0 - t * t + 0.5 * t * t * t
        } else if t < 2.0 {
            let u = 2.0 - t;
            u * u * u / 6.0
        } else {
            0.0
        }
    };
    let mirror = |k: i64| -> usize {
        let n = nc as i64;
        if n == 1 {
            return 0;
        }
        let p = 2 * (n - 1);
        let mut m = k.rem_euclid(p);
        if m >= n {
            m = p - m;
        }
        m as usize
    };
    for j in 0..nc {
        let x = (j as f64 - shift as f64).clamp(0.0, last);
        let x0 = x.floor() as i64;
        for i in 0..nr {
            let mut s = 0.0;
            for k in x0 - 1..=x0 + 2 {
                s += coef[[i, mirror(k)]] * beta(x - k as f64);
            }
            out[[i, j]] = s as f32;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bspline_shift_interpolates_exactly_at_integers_and_smoothly_between() {
        let a = Array2::from_shape_fn((2, 40), |(i, j)| ((j as f32) * 0.3 + i as f32).sin());
        let c = bspline_coefficients(a.view());
        let same = bspline_shift(c.view(), 0.0);
        for (x, y) in a.iter().zip(same.iter()) {
            assert!((x - y).abs() < 1e-4, "{x} vs {y}");
        }
        let half = bspline_shift(c.view(), 0.5);
        // f(j − 0.5) of a smooth function, away from the edges.
        for j in 5..35 {
            let want = ((j as f32 - 0.5) * 0.3).sin();
            assert!(
                (half[[0, j]] - want).abs() < 2e-3,
                "{j}: {} vs {want}",
                half[[0, j]]
            );
        }
    }

    #[test]
    fn roll_fill_matches_numpy() {
        let flip = Array2::from_shape_fn((1, 5), |(_, j)| j as f32);
        let comp = Array2::from_elem((1, 5), -1.0f32);
        let r = roll_fill(flip.view(), comp.view(), 2);
        assert_eq!(r.row(0).to_vec(), vec![-1.0, -1.0, 0.0, 1.0, 2.0]);
        let r = roll_fill(flip.view(), comp.view(), -2);
        assert_eq!(r.row(0).to_vec(), vec![2.0, 3.0, 4.0, -1.0, -1.0]);
    }
}
