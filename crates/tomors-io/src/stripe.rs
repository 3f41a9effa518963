//! Stripe (ring artefact) removal on sinograms `[angle][bin]`, after −log:
//! the methods of Vo, Atwood and Drakopoulos, Opt. Express 26, 28396
//! (2018) — sorting-based (algorithm 3, in [`crate::preprocess`]),
//! filtering-based (algorithm 2), fitting-based (algorithm 1, algotom's
//! `remove_stripe_based_fitting`), large stripes (algorithm 5), dead
//! (unresponsive) stripes (algorithm 6) and their combination
//! ("all stripes", algotom's `remove_all_stripe`) — and the combined
//! wavelet–Fourier filter of Münch et al., Opt. Express 17, 8567 (2009).
//!
//! [`StripeMethod`] parses `METHOD[:p1,p2,...]` (see its `FromStr`).

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis, Zip};
use rustfft::num_complex::Complex32;
use rustfft::FftPlanner;

use crate::preprocess::{median, reflect, remove_stripe_based_sorting};

/// A stripe-removal method and its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StripeMethod {
    /// Sorting-based (Vo algorithm 3): median window of `size` bins.
    Sorting {
        /// Median window across bins (odd; 11–31 typical).
        size: usize,
    },
    /// Filtering-based (Vo algorithm 2): the sinogram is split along the
    /// angle axis by a Gaussian low-pass in Fourier space (`sigma`
    /// frequency samples); the smooth part is cleaned by the sorting-based
    /// method with a window of `size` bins and the sharp part added back.
    Filtering {
        /// Standard deviation of the Gaussian window, in frequency samples.
        sigma: f32,
        /// Median window of the sorting step.
        size: usize,
    },
    /// Fitting-based (Vo algorithm 1; algotom `remove_stripe_based_fitting`):
    /// a polynomial of `order` is fitted along the angles of every bin; the
    /// fitted sinogram, which keeps the stripes (constant along the angles)
    /// and the slow trends, is smoothed across bins by a 2-D Gaussian window
    /// in Fourier space (`sigma` frequency samples across bins; smaller is
    /// stronger), and the difference replaces the fit: `sino − fit +
    /// smooth(fit)`. Good for low-frequency (wide, partial) stripes.
    Fitting {
        /// Polynomial order (2 typical).
        order: usize,
        /// Width of the Gaussian window across bins in frequency samples
        /// (10 typical; smaller removes more).
        sigma: f32,
    },
    /// Large stripes (Vo algorithm 5): columns whose sorted mean differs
    /// from its median-smoothed neighbours by `snr` times the noise level
    /// are normalised and replaced by the smoothed sorted values
    /// (window `size` bins).
    Large {
        /// Detection ratio (3 typical).
        snr: f32,
        /// Median window across bins (51 typical).
        size: usize,
    },
    /// Dead stripes (Vo algorithm 6): columns that do not respond
    /// (detected as `snr` outliers of their fluctuation) are interpolated
    /// linearly from their neighbours; then large stripes are removed.
    Dead {
        /// Detection ratio.
        snr: f32,
        /// Median window across bins.
        size: usize,
    },
    /// All stripes (algotom `remove_all_stripe`): dead, then large
    /// (window `large_size`), then sorting-based (window `small_size`).
    All {
        /// Detection ratio.
        snr: f32,
        /// Window of the dead/large steps (51 typical).
        large_size: usize,
        /// Window of the sorting step (21 typical).
        small_size: usize,
    },
    /// Wavelet–Fourier (Münch 2009): a `level`-level Daubechies-2 wavelet
    /// decomposition of the sinogram; the vertical detail coefficients
    /// (high-pass across bins) are damped along the angle axis by
    /// `1 − exp(−k²/(2σ²))` in Fourier space; then reconstruction.
    FourierWavelet {
        /// Decomposition levels.
        level: usize,
        /// Width of the Gaussian damping in frequency samples.
        sigma: f32,
    },
}

impl StripeMethod {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), String> {
        let size_ok = |s: usize, what: &str| {
            if s < 3 {
                Err(format!("stripe {what} window {s} must be at least 3"))
            } else {
                Ok(())
            }
        };
        let pos = |v: f32, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("stripe {what} {v} must be positive"))
            }
        };
        match *self {
            Self::Sorting { size } => size_ok(size, "median"),
            Self::Filtering { sigma, size } => {
                pos(sigma, "sigma")?;
                size_ok(size, "median")
            }
            Self::Fitting { order, sigma } => {
                pos(sigma, "sigma")?;
                if !(1..=8).contains(&order) {
                    return Err(format!("stripe fitting order {order} must be 1 to 8"));
                }
                Ok(())
            }
            Self::Large { snr, size } | Self::Dead { snr, size } => {
                pos(snr, "snr")?;
                size_ok(size, "median")
            }
            Self::All {
                snr,
                large_size,
                small_size,
            } => {
                pos(snr, "snr")?;
                size_ok(large_size, "large")?;
                size_ok(small_size, "small")
            }
            Self::FourierWavelet { level, sigma } => {
                pos(sigma, "sigma")?;
                if !(1..=12).contains(&level) {
                    return Err(format!("stripe wavelet level {level} must be 1 to 12"));
                }
                Ok(())
            }
        }
    }

    /// Removes stripes from one sinogram `[angle][bin]` in place.
    pub fn apply(&self, mut sino: ArrayViewMut2<'_, f32>) {
        match *self {
            Self::Sorting { size } => remove_stripe_based_sorting(sino, size),
            Self::Filtering { sigma, size } => remove_stripe_based_filtering(sino, sigma, size),
            Self::Fitting { order, sigma } => remove_stripe_based_fitting(sino, order, sigma),
            Self::Large { snr, size } => remove_large_stripe(sino, snr, size),
            Self::Dead { snr, size } => {
                remove_dead_stripe(sino.view_mut(), snr, size);
                remove_large_stripe(sino, snr, size);
            }
            Self::All {
                snr,
                large_size,
                small_size,
            } => {
                remove_dead_stripe(sino.view_mut(), snr, large_size);
                remove_large_stripe(sino.view_mut(), snr, large_size);
                remove_stripe_based_sorting(sino, small_size);
            }
            Self::FourierWavelet { level, sigma } => remove_stripe_fw(sino, level, sigma),
        }
    }
}

impl std::str::FromStr for StripeMethod {
    type Err = String;
    /// `N` (sorting with window N, as before), `sorting[:size]`,
    /// `filtering[:sigma,size]`, `fitting[:order,sigma]`,
    /// `large[:snr,size]`, `dead[:snr,size]`,
    /// `all[:snr,large_size,small_size]`, `fw[:level,sigma]` (also
    /// `fourier-wavelet`). Defaults: sorting 21; filtering 3,21; fitting
    /// 2,10; large and dead 3,51; all 3,51,21; fw 4,2.
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if let Ok(size) = t.parse::<usize>() {
            let m = Self::Sorting { size };
            m.validate()?;
            return Ok(m);
        }
        let (name, params) = match t.split_once(':') {
            Some((n, p)) => (n, p.split(',').map(str::trim).collect::<Vec<_>>()),
            None => (t.as_str(), Vec::new()),
        };
        let num = |i: usize, default: f32| -> Result<f32, String> {
            match params.get(i) {
                None => Ok(default),
                Some(p) => p
                    .parse::<f32>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| format!("stripe parameter '{p}' is not a number")),
            }
        };
        let int = |i: usize, default: usize| -> Result<usize, String> {
            match params.get(i) {
                None => Ok(default),
                Some(p) => p
                    .parse::<usize>()
                    .map_err(|_| format!("stripe parameter '{p}' is not a whole number")),
            }
        };
        let (m, n_params) = match name {
            "sorting" | "sort" => (Self::Sorting { size: int(0, 21)? }, 1),
            "filtering" | "filter" => (
                Self::Filtering {
                    sigma: num(0, 3.0)?,
                    size: int(1, 21)?,
                },
                2,
            ),
            "fitting" | "fit" => (
                Self::Fitting {
                    order: int(0, 2)?,
                    sigma: num(1, 10.0)?,
                },
                2,
            ),
            "large" => (
                Self::Large {
                    snr: num(0, 3.0)?,
                    size: int(1, 51)?,
                },
                2,
            ),
            "dead" => (
                Self::Dead {
                    snr: num(0, 3.0)?,
                    size: int(1, 51)?,
                },
                2,
            ),
            "all" => (
                Self::All {
                    snr: num(0, 3.0)?,
                    large_size: int(1, 51)?,
                    small_size: int(2, 21)?,
                },
                3,
            ),
            "fw" | "fourier-wavelet" | "wavelet" => (
                Self::FourierWavelet {
                    level: int(0, 4)?,
                    sigma: num(1, 2.0)?,
                },
                2,
            ),
            _ => {
                return Err(format!(
                "unknown stripe method '{s}' (use N, sorting, filtering, fitting, large, dead, all or fw, \
                     with parameters after ':')"
            ))
            }
        };
        if params.len() > n_params {
            return Err(format!(
                "stripe method '{name}' takes at most {n_params} parameter(s), got '{s}'"
            ));
        }
        m.validate()?;
        Ok(m)
    }
}

/// Median filter of every row of `a` across its columns (window `size`,
/// made odd; reflecting edges).
fn median_filter_cols(a: &Array2<f32>, size: usize) -> Array2<f32> {
    let (nr, nc) = a.dim();
    let size = (size.max(1) | 1).min(2 * nc - 1);
    let h = (size / 2) as i64;
    let mut out = Array2::<f32>::zeros((nr, nc));
    let mut win = vec![0f32; size];
    for r in 0..nr {
        for c in 0..nc {
            for (k, w) in win.iter_mut().enumerate() {
                *w = a[[r, reflect(c as i64 + k as i64 - h, nc as i64)]];
            }
            out[[r, c]] = median(&mut win);
        }
    }
    out
}

/// Median filter of a 1-D list (window `size`, reflecting edges).
fn median_filter_1d(v: &[f32], size: usize) -> Vec<f32> {
    let a = Array2::from_shape_vec((1, v.len()), v.to_vec()).expect("shape");
    median_filter_cols(&a, size).into_raw_vec_and_offset().0
}

/// Detects stripes in a list of per-column values (Vo 2018, algotom
/// `detect_stripe`): a line fitted to the middle half of the sorted values
/// gives the noise level; values beyond `snr/2` noise levels from its ends
/// are stripes (1), when the extremes exceed `snr` noise levels.
pub fn detect_stripe(list: &[f32], snr: f32) -> Vec<bool> {
    let n = list.len();
    let mut mask = vec![false; n];
    if n < 8 {
        return mask;
    }
    let mut sorted = list.to_vec();
    sorted.sort_by(f32::total_cmp);
    let drop = n / 4;
    let (lo, hi) = (drop, n - drop - 1);
    let m = (hi - lo) as f64;
    let (mut sx, mut sy, mut sxx, mut sxy) = (0f64, 0f64, 0f64, 0f64);
    for (i, &y) in sorted.iter().enumerate().take(hi).skip(lo) {
        let (x, y) = (i as f64, f64::from(y));
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
    }
    let den = m * sxx - sx * sx;
    let slope = if den.abs() > 0.0 {
        (m * sxy - sx * sy) / den
    } else {
        0.0
    };
    let intercept = (sy - slope * sx) / m;
    let y_end = intercept + slope * (n - 1) as f64;
    let noise = (y_end - intercept).abs().max(1e-6);
    let snr = f64::from(snr);
    let val1 = (f64::from(sorted[n - 1]) - y_end).abs() / noise;
    let val2 = (intercept - f64::from(sorted[0])).abs() / noise;
    if val1 >= snr {
        let upper = y_end + noise * snr * 0.5;
        for (k, &v) in list.iter().enumerate() {
            mask[k] |= f64::from(v) > upper;
        }
    }
    if val2 >= snr {
        let lower = intercept - noise * snr * 0.5;
        for (k, &v) in list.iter().enumerate() {
            mask[k] |= f64::from(v) <= lower;
        }
    }
    mask
}

/// Binary dilation by one sample.
fn dilate(mask: &[bool]) -> Vec<bool> {
    let n = mask.len();
    (0..n)
        .map(|i| mask[i.saturating_sub(1)..(i + 2).min(n)].iter().any(|&m| m))
        .collect()
}

/// Each column sorted over the angles: (sorted values, original angle of each).
fn sort_columns(sino: &ArrayViewMut2<'_, f32>) -> (Array2<f32>, Array2<u32>) {
    let (na, nb) = sino.dim();
    let mut sorted = Array2::<f32>::zeros((na, nb));
    let mut index = Array2::<u32>::zeros((na, nb));
    let mut col: Vec<(f32, u32)> = Vec::with_capacity(na);
    for b in 0..nb {
        col.clear();
        col.extend((0..na).map(|a| (sino[[a, b]], a as u32)));
        col.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (r, &(v, a)) in col.iter().enumerate() {
            sorted[[r, b]] = v;
            index[[r, b]] = a;
        }
    }
    (sorted, index)
}

/// Large-stripe removal (Vo 2018 algorithm 5; algotom `remove_large_stripe`
/// with `drop_ratio` 0.1, without its column normalisation), in place on
/// `[angle][bin]`: only the detected stripe columns change.
pub fn remove_large_stripe(mut sino: ArrayViewMut2<'_, f32>, snr: f32, size: usize) {
    let (na, nb) = sino.dim();
    if na < 3 || nb < 8 {
        return;
    }
    let drop = (0.05 * na as f64) as usize;
    let (sorted, _) = sort_columns(&sino);
    let smooth = median_filter_cols(&sorted, size);
    let rows = drop..na - drop;
    let m1 = sorted
        .slice(s![rows.clone(), ..])
        .mean_axis(Axis(0))
        .expect("rows");
    let m2 = smooth.slice(s![rows, ..]).mean_axis(Axis(0)).expect("rows");
    let fact: Vec<f32> = m1
        .iter()
        .zip(m2.iter())
        .map(|(&a, &b)| if b != 0.0 { a / b } else { 1.0 })
        .collect();
    let mut mask = dilate(&detect_stripe(&fact, snr));
    // The median across bins is biased within half a window of the edges
    // (reflected sloped profiles): no stripes are detected there.
    let edge = (size / 2).min(nb / 4);
    for m in mask.iter_mut().take(edge) {
        *m = false;
    }
    for m in mask.iter_mut().rev().take(edge) {
        *m = false;
    }
    // After −log a gain error is an offset: no column is rescaled (algotom's
    // `norm` step, made for transmissions); the stripe columns' sorted
    // values are replaced by the median-smoothed ones.
    if !mask.iter().any(|&m| m) {
        return;
    }
    let (sorted, index) = sort_columns(&sino);
    let smooth = median_filter_cols(&sorted, size);
    for (b, _) in mask.iter().enumerate().filter(|(_, &m)| m) {
        for r in 0..na {
            sino[[index[[r, b]] as usize, b]] = smooth[[r, b]];
        }
    }
}

/// Dead-stripe removal (Vo 2018 algorithm 6; algotom `remove_dead_stripe`
/// without its residual step): columns whose fluctuation stands out are
/// replaced by linear interpolation between the nearest good columns.
pub fn remove_dead_stripe(mut sino: ArrayViewMut2<'_, f32>, snr: f32, size: usize) {
    let (na, nb) = sino.dim();
    if na < 3 || nb < 8 {
        return;
    }
    // Uniform filter of 10 samples along the angles (reflecting edges).
    let w = 10usize.min(na);
    let mut smooth = Array2::<f32>::zeros((na, nb));
    for a in 0..na {
        for b in 0..nb {
            let mut acc = 0f32;
            for k in 0..w {
                acc += sino[[reflect(a as i64 + k as i64 - (w / 2) as i64, na as i64), b]];
            }
            smooth[[a, b]] = acc / w as f32;
        }
    }
    let med = median_filter_cols(&smooth, size);
    let diff: Vec<f32> = (0..nb)
        .map(|b| (0..na).map(|a| (smooth[[a, b]] - med[[a, b]]).abs()).sum())
        .collect();
    let back = median_filter_1d(&diff, size);
    let fact: Vec<f32> = diff
        .iter()
        .zip(&back)
        .map(|(&d, &b)| if b != 0.0 { d / b } else { 0.0 })
        .collect();
    let mut mask = dilate(&detect_stripe(&fact, snr));
    for m in mask.iter_mut().take(2) {
        *m = false;
    }
    for m in mask.iter_mut().rev().take(2) {
        *m = false;
    }
    let good: Vec<usize> = (0..nb).filter(|&b| !mask[b]).collect();
    for b in (0..nb).filter(|&b| mask[b]) {
        let right = good.partition_point(|&g| g < b);
        let (l, r) = (good[right - 1], good[right]);
        let f = (b - l) as f32 / (r - l) as f32;
        for a in 0..na {
            sino[[a, b]] = sino[[a, l]] * (1.0 - f) + sino[[a, r]] * f;
        }
    }
}

/// Filtering-based stripe removal (Vo 2018 algorithm 2), in place.
pub fn remove_stripe_based_filtering(mut sino: ArrayViewMut2<'_, f32>, sigma: f32, size: usize) {
    let (na, nb) = sino.dim();
    if na < 2 || nb < 2 {
        return;
    }
    // Reflect-pad along the angles, Gaussian low-pass in Fourier space.
    let pad = (na / 10).min(150);
    let m = na + 2 * pad;
    let mut planner = FftPlanner::<f32>::new();
    let fwd = planner.plan_fft_forward(m);
    let inv = planner.plan_fft_inverse(m);
    let window: Vec<f32> = (0..m)
        .map(|k| {
            let k = if k <= m / 2 {
                k as f32
            } else {
                k as f32 - m as f32
            };
            (-(k * k) / (2.0 * sigma * sigma)).exp() / m as f32
        })
        .collect();
    let mut smooth = Array2::<f32>::zeros((na, nb));
    let mut buf = vec![Complex32::new(0.0, 0.0); m];
    for b in 0..nb {
        for (i, v) in buf.iter_mut().enumerate() {
            let a = reflect(i as i64 - pad as i64, na as i64);
            *v = Complex32::new(sino[[a, b]], 0.0);
        }
        fwd.process(&mut buf);
        for (v, w) in buf.iter_mut().zip(&window) {
            *v *= *w;
        }
        inv.process(&mut buf);
        for a in 0..na {
            smooth[[a, b]] = buf[a + pad].re;
        }
    }
    let sharp = &sino.to_owned() - &smooth;
    remove_stripe_based_sorting(smooth.view_mut(), size);
    sino.assign(&(&smooth + &sharp));
}

/// Least-squares polynomial fit of `order` along the angles of every bin
/// of `sino` `[angle][bin]` (Legendre basis on [−1, 1], f64).
pub fn fit_columns(sino: ArrayView2<'_, f32>, order: usize) -> Array2<f32> {
    let (na, nb) = sino.dim();
    let k = order + 1;
    // Basis B[a][j] = P_j(x_a).
    let basis: Vec<Vec<f64>> = (0..na)
        .map(|a| {
            let x = if na > 1 {
                2.0 * a as f64 / (na - 1) as f64 - 1.0
            } else {
                0.0
            };
            let mut p = vec![1.0; k];
            if k > 1 {
                p[1] = x;
            }
            for j in 2..k {
                let jf = j as f64;
                p[j] = ((2.0 * jf - 1.0) * x * p[j - 1] - (jf - 1.0) * p[j - 2]) / jf;
            }
            p
        })
        .collect();
    // Normal equations G c = Bᵀ y, G = BᵀB (k × k), solved by Gaussian
    // elimination with partial pivoting once for all bins (k right-hand
    // sides of the identity give G⁻¹).
    let mut g = vec![vec![0f64; k]; k];
    for row in &basis {
        for i in 0..k {
            for j in 0..k {
                g[i][j] += row[i] * row[j];
            }
        }
    }
    let ginv = invert(g);
    let mut out = Array2::<f32>::zeros((na, nb));
    let mut rhs = vec![0f64; k];
    for b in 0..nb {
        rhs.iter_mut().for_each(|v| *v = 0.0);
        for (a, row) in basis.iter().enumerate() {
            let y = f64::from(sino[[a, b]]);
            for (r, p) in rhs.iter_mut().zip(row) {
                *r += p * y;
            }
        }
        let c: Vec<f64> = ginv
            .iter()
            .map(|gi| gi.iter().zip(&rhs).map(|(x, y)| x * y).sum())
            .collect();
        for (a, row) in basis.iter().enumerate() {
            out[[a, b]] = row.iter().zip(&c).map(|(p, c)| p * c).sum::<f64>() as f32;
        }
    }
    out
}

/// Inverse of a small symmetric positive-definite matrix (Gauss–Jordan with
/// partial pivoting); a singular matrix (fewer angles than coefficients)
/// gives its pseudo-solution with zero pivots skipped.
fn invert(mut a: Vec<Vec<f64>>) -> Vec<Vec<f64>> {
    let n = a.len();
    let mut inv: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| f64::from(u8::from(i == j))).collect())
        .collect();
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
            .unwrap_or(col);
        a.swap(col, piv);
        inv.swap(col, piv);
        let p = a[col][col];
        if p.abs() < 1e-300 {
            continue;
        }
        for j in 0..n {
            a[col][j] /= p;
            inv[col][j] /= p;
        }
        for r in 0..n {
            if r != col {
                let f = a[r][col];
                if f != 0.0 {
                    for j in 0..n {
                        a[r][j] -= f * a[col][j];
                        inv[r][j] -= f * inv[col][j];
                    }
                }
            }
        }
    }
    inv
}

/// Low-pass of `m` `[angle][bin]` by the 2-D Gaussian window
/// `exp(−k_b²/(2σ_b²) − k_a²/(2σ_a²))` in Fourier space (signed frequency
/// indices of the padded size), as algotom's `apply_gaussian_filter`: `pad`
/// samples added on each side, edge values across bins and each bin's mean
/// along the angles.
fn gaussian_lowpass_2d(m: &Array2<f32>, sigma_b: f32, sigma_a: f32, pad: usize) -> Array2<f32> {
    let (na, nb) = m.dim();
    let (ma, mb) = (na + 2 * pad, nb + 2 * pad);
    let means: Vec<f32> = (0..nb)
        .map(|b| m.column(b).iter().sum::<f32>() / na as f32)
        .collect();
    let mut buf = Array2::from_shape_fn((ma, mb), |(a, b)| {
        let bb = b.saturating_sub(pad).min(nb - 1);
        let v = if a < pad || a >= pad + na {
            means[bb]
        } else {
            m[[a - pad, bb]]
        };
        Complex32::new(v, 0.0)
    });
    let mut planner = FftPlanner::<f32>::new();
    let fb = planner.plan_fft_forward(mb);
    let ib = planner.plan_fft_inverse(mb);
    let fa = planner.plan_fft_forward(ma);
    let ia = planner.plan_fft_inverse(ma);
    let signed = |k: usize, n: usize| {
        if k <= n / 2 {
            k as f32
        } else {
            k as f32 - n as f32
        }
    };
    let wb: Vec<f32> = (0..mb)
        .map(|k| (-signed(k, mb).powi(2) / (2.0 * sigma_b * sigma_b)).exp())
        .collect();
    let wa: Vec<f32> = (0..ma)
        .map(|k| (-signed(k, ma).powi(2) / (2.0 * sigma_a * sigma_a)).exp())
        .collect();
    let norm = 1.0 / (ma * mb) as f32;
    for mut row in buf.rows_mut() {
        let mut v = row.to_vec();
        fb.process(&mut v);
        for (k, x) in v.iter_mut().enumerate() {
            *x *= wb[k];
        }
        row.iter_mut().zip(v).for_each(|(d, s)| *d = s);
    }
    let mut col = vec![Complex32::new(0.0, 0.0); ma];
    for mut lane in buf.columns_mut() {
        col.iter_mut().zip(lane.iter()).for_each(|(d, s)| *d = *s);
        fa.process(&mut col);
        for (k, x) in col.iter_mut().enumerate() {
            *x *= wa[k] * norm;
        }
        ia.process(&mut col);
        lane.iter_mut().zip(col.iter()).for_each(|(d, s)| *d = *s);
    }
    for mut row in buf.rows_mut() {
        let mut v = row.to_vec();
        ib.process(&mut v);
        row.iter_mut().zip(v).for_each(|(d, s)| *d = s);
    }
    Array2::from_shape_fn((na, nb), |(a, b)| buf[[a + pad, b + pad]].re)
}

/// Fitting-based stripe removal (Vo 2018 algorithm 1; algotom
/// `remove_stripe_based_fitting` with its defaults: padding `min(150,
/// na/10)`, the window along the angles `σ = clamp(min(60, nb/10), 10)`),
/// in place on `[angle][bin]`. After −log a stripe is an offset, so the
/// correction is additive, `sino − fit + smooth(fit)` (algotom's
/// `sino / fit · smooth(fit)` is the same in transmissions and would divide
/// by the near-zero air of a −log sinogram).
pub fn remove_stripe_based_fitting(mut sino: ArrayViewMut2<'_, f32>, order: usize, sigma: f32) {
    let (na, nb) = sino.dim();
    if na <= order + 1 || nb < 4 {
        return;
    }
    let fit = fit_columns(sino.view(), order);
    let pad = (na / 10).min(150);
    let sigma_a = ((nb / 10).min(60) as f32).max(10.0);
    let smooth = gaussian_lowpass_2d(&fit, sigma, sigma_a, pad);
    Zip::from(&mut sino)
        .and(&fit)
        .and(&smooth)
        .for_each(|v, &f, &s| *v += s - f);
}

/// Daubechies-2 analysis (low-pass) filter; the high-pass is its quadrature
/// mirror.
fn db2() -> ([f32; 4], [f32; 4]) {
    let (r3, n) = (3f64.sqrt(), 4.0 * 2f64.sqrt());
    let h = [
        ((1.0 + r3) / n) as f32,
        ((3.0 + r3) / n) as f32,
        ((3.0 - r3) / n) as f32,
        ((1.0 - r3) / n) as f32,
    ];
    let g = [h[3], -h[2], h[1], -h[0]];
    (h, g)
}

/// One level of the periodic DWT of `x` (even length): (approximation, detail).
fn dwt1(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let (h, g) = db2();
    let n = x.len();
    let half = n / 2;
    let mut a = vec![0f32; half];
    let mut d = vec![0f32; half];
    for i in 0..half {
        for k in 0..4 {
            let v = x[(2 * i + k) % n];
            a[i] += h[k] * v;
            d[i] += g[k] * v;
        }
    }
    (a, d)
}

/// Inverse of [`dwt1`].
fn idwt1(a: &[f32], d: &[f32]) -> Vec<f32> {
    let (h, g) = db2();
    let n = 2 * a.len();
    let mut x = vec![0f32; n];
    for i in 0..a.len() {
        for k in 0..4 {
            x[(2 * i + k) % n] += h[k] * a[i] + g[k] * d[i];
        }
    }
    x
}

/// Applies `f` to every lane of `m` along `axis`, replacing it.
fn map_lanes(m: &mut Array2<f32>, axis: Axis, f: impl Fn(&[f32]) -> Vec<f32>) {
    for mut lane in m.lanes_mut(axis) {
        let v: Vec<f32> = lane.iter().copied().collect();
        for (d, s) in lane.iter_mut().zip(f(&v)) {
            *d = s;
        }
    }
}

/// One 2-D DWT level of `m` (even sizes): `[[LL, V], [H, D]]` in place,
/// where the left/right halves are low/high-pass across bins (axis 1) and
/// the top/bottom halves low/high-pass along the angles (axis 0).
fn dwt2(m: &mut Array2<f32>) {
    let split = |v: &[f32]| {
        let (a, d) = dwt1(v);
        [a, d].concat()
    };
    map_lanes(m, Axis(1), split);
    map_lanes(m, Axis(0), split);
}

/// Inverse of [`dwt2`].
fn idwt2(m: &mut Array2<f32>) {
    let join = |v: &[f32]| {
        let h = v.len() / 2;
        idwt1(&v[..h], &v[h..])
    };
    map_lanes(m, Axis(0), join);
    map_lanes(m, Axis(1), join);
}

/// Wavelet–Fourier stripe removal (Münch et al. 2009), in place on
/// `[angle][bin]`: the sinogram is edge-padded (an eighth of its width on
/// each side, then to multiples of `2^level`), decomposed with a periodic
/// Daubechies-2 DWT; at every level the detail coefficients that are
/// high-pass across bins and low-pass along the angles (stripes) are
/// multiplied in Fourier space along the angles by `1 − exp(−k²/(2σ²))`;
/// then the inverse DWT.
pub fn remove_stripe_fw(mut sino: ArrayViewMut2<'_, f32>, level: usize, sigma: f32) {
    let (na, nb) = sino.dim();
    let step = 1usize << level;
    if na < step || nb < 2 {
        return;
    }
    let pb = nb / 8;
    let ma = na.div_ceil(step) * step;
    let mb = (nb + 2 * pb).div_ceil(step) * step;
    // Angles: reflect (the scan continues mirror-like); bins: edge values.
    let mut m = Array2::from_shape_fn((ma, mb), |(a, b)| {
        let aa = reflect(a as i64, na as i64);
        let bb = b.saturating_sub(pb).min(nb - 1);
        sino[[aa, bb]]
    });
    let mut planner = FftPlanner::<f32>::new();
    let (mut ra, mut rb) = (ma, mb);
    for _ in 0..level {
        let mut sub = m.slice(s![..ra, ..rb]).to_owned();
        dwt2(&mut sub);
        m.slice_mut(s![..ra, ..rb]).assign(&sub);
        // Vertical details: top half (low-pass along angles), right half.
        let (ha, hb) = (ra / 2, rb / 2);
        let fwd = planner.plan_fft_forward(ha);
        let inv = planner.plan_fft_inverse(ha);
        let damp: Vec<f32> = (0..ha)
            .map(|k| {
                let k = if k <= ha / 2 {
                    k as f32
                } else {
                    k as f32 - ha as f32
                };
                (1.0 - (-(k * k) / (2.0 * sigma * sigma)).exp()) / ha as f32
            })
            .collect();
        let mut buf = vec![Complex32::new(0.0, 0.0); ha];
        for b in hb..rb {
            for (a, v) in buf.iter_mut().enumerate() {
                *v = Complex32::new(m[[a, b]], 0.0);
            }
            fwd.process(&mut buf);
            for (v, d) in buf.iter_mut().zip(&damp) {
                *v *= *d;
            }
            inv.process(&mut buf);
            for (a, v) in buf.iter().enumerate() {
                m[[a, b]] = v.re;
            }
        }
        ra = ha;
        rb = hb;
    }
    for _ in 0..level {
        ra *= 2;
        rb *= 2;
        let mut sub = m.slice(s![..ra, ..rb]).to_owned();
        idwt2(&mut sub);
        m.slice_mut(s![..ra, ..rb]).assign(&sub);
    }
    sino.assign(&m.slice(s![..na, pb..pb + nb]));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_methods() {
        assert_eq!("21".parse(), Ok(StripeMethod::Sorting { size: 21 }));
        assert_eq!(
            "filtering:2,15".parse(),
            Ok(StripeMethod::Filtering {
                sigma: 2.0,
                size: 15
            })
        );
        assert_eq!(
            "all".parse(),
            Ok(StripeMethod::All {
                snr: 3.0,
                large_size: 51,
                small_size: 21
            })
        );
        assert_eq!(
            "fw:3".parse(),
            Ok(StripeMethod::FourierWavelet {
                level: 3,
                sigma: 2.0
            })
        );
        assert!("fw:3,2,1".parse::<StripeMethod>().is_err());
        assert_eq!(
            "fitting".parse(),
            Ok(StripeMethod::Fitting {
                order: 2,
                sigma: 10.0
            })
        );
        assert_eq!(
            "fitting:3,5".parse(),
            Ok(StripeMethod::Fitting {
                order: 3,
                sigma: 5.0
            })
        );
        assert!("fitting:0".parse::<StripeMethod>().is_err());
        assert!("fitting:2,10,1".parse::<StripeMethod>().is_err());
        assert!("sorting:1".parse::<StripeMethod>().is_err());
        assert!("bogus".parse::<StripeMethod>().is_err());
    }

    #[test]
    fn polynomial_fit_is_exact_on_polynomials() {
        // Every column a quadratic in the angle index: the fit gives it back.
        let m = Array2::from_shape_fn((50, 6), |(a, b)| {
            let x = a as f32;
            0.5 + b as f32 - 0.03 * x + 0.001 * x * x * (b as f32 + 1.0)
        });
        let f = fit_columns(m.view(), 2);
        let err = (&f - &m).mapv(f32::abs).fold(0f32, |a, &b| a.max(b));
        assert!(err < 1e-4, "{err}");
        // A column constant along the angles, with a smooth profile across
        // bins, passes the low-pass unchanged away from the edges.
        let flat = Array2::from_shape_fn((60, 64), |(_, b)| (b as f32 * 0.02).sin() + 2.0);
        let lp = gaussian_lowpass_2d(&flat, 10.0, 10.0, 6);
        let err = (&lp - &flat)
            .slice(s![.., 16..48])
            .mapv(f32::abs)
            .fold(0f32, |a, &b| a.max(b));
        assert!(err < 1e-3, "{err}");
    }

    #[test]
    fn dwt_reconstructs_exactly() {
        let mut m = Array2::from_shape_fn((16, 24), |(a, b)| ((a * 7 + b * 3) % 11) as f32);
        let orig = m.clone();
        dwt2(&mut m);
        idwt2(&mut m);
        let err = (&m - &orig).mapv(f32::abs).fold(0f32, |a, &b| a.max(b));
        assert!(err < 1e-4, "{err}");
    }

    #[test]
    fn detect_stripe_finds_outliers() {
        let mut v: Vec<f32> = (0..100)
            .map(|i| 1.0 + 0.001 * ((i * 37) % 13) as f32)
            .collect();
        v[40] = 1.5;
        let m = detect_stripe(&v, 3.0);
        assert!(m[40]);
        assert_eq!(m.iter().filter(|&&x| x).count(), 1);
    }
}
