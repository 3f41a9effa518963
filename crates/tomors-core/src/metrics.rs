//! Image-quality metrics for reconstructions, all computed in f64.
//!
//! Images are `[y][x]` (row 0 at the top). Metrics that compare against a
//! reference normalise by the reference's range (max − min), taken over the
//! mask where one is given.

use ndarray::{Array2, ArrayView2};

use crate::error::{CoreError, Result};

/// A disc mask: `true` for pixels whose centre lies within
/// `radius_fraction · min(nx, ny)` pixels of the image centre
/// (`((nx − 1)/2, (ny − 1)/2)`). `radius_fraction = 0.5` gives the inscribed
/// disc. The mask of an empty shape is empty.
pub fn disc_mask(ny: usize, nx: usize, radius_fraction: f64) -> Array2<bool> {
    let r = radius_fraction * nx.min(ny) as f64;
    let (cx, cy) = ((nx as f64 - 1.0) * 0.5, (ny as f64 - 1.0) * 0.5);
    Array2::from_shape_fn((ny, nx), |(iy, ix)| {
        let (dx, dy) = (ix as f64 - cx, iy as f64 - cy);
        dx * dx + dy * dy <= r * r
    })
}

/// Checks that two images (and an optional mask) have one non-empty shape.
fn check_pair(
    recon: &ArrayView2<'_, f32>,
    reference: &ArrayView2<'_, f32>,
    mask: Option<&Array2<bool>>,
) -> Result<()> {
    if recon.dim() != reference.dim() {
        return Err(CoreError::Shape(format!(
            "image {:?} and reference {:?} differ in shape",
            recon.dim(),
            reference.dim()
        )));
    }
    if let Some(m) = mask {
        if m.dim() != reference.dim() {
            return Err(CoreError::Shape(format!(
                "mask {:?} and reference {:?} differ in shape",
                m.dim(),
                reference.dim()
            )));
        }
    }
    if reference.is_empty() {
        return Err(CoreError::Shape("empty image".into()));
    }
    Ok(())
}

/// Root-mean-square difference and reference range over the mask.
fn rms_and_range(
    recon: &ArrayView2<'_, f32>,
    reference: &ArrayView2<'_, f32>,
    mask: Option<&Array2<bool>>,
) -> Result<(f64, f64)> {
    check_pair(recon, reference, mask)?;
    let (mut sum2, mut count) = (0.0f64, 0usize);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for ((idx, &r), &f) in recon.indexed_iter().zip(reference.iter()) {
        if mask.is_some_and(|m| !m[idx]) {
            continue;
        }
        let (r, f) = (r as f64, f as f64);
        sum2 += (r - f) * (r - f);
        count += 1;
        lo = lo.min(f);
        hi = hi.max(f);
    }
    if count == 0 {
        return Err(CoreError::Data("the mask selects no pixel".into()));
    }
    let range = hi - lo;
    if !(range.is_finite() && range > 0.0) {
        return Err(CoreError::Data(format!(
            "the reference has no usable range (min {lo}, max {hi})"
        )));
    }
    Ok(((sum2 / count as f64).sqrt(), range))
}

/// Normalised root-mean-square error: the RMS of `recon − reference` over
/// the mask (all pixels without one) divided by the reference's range
/// (max − min) over the mask.
///
/// Errors: shapes differ ([`CoreError::Shape`], also for empty images), the
/// mask selects nothing or the reference is constant there
/// ([`CoreError::Data`]).
pub fn nrmse(
    recon: ArrayView2<'_, f32>,
    reference: ArrayView2<'_, f32>,
    mask: Option<&Array2<bool>>,
) -> Result<f64> {
    let (rms, range) = rms_and_range(&recon, &reference, mask)?;
    Ok(rms / range)
}

/// Peak signal-to-noise ratio in dB, `20·log10(range / RMS error)`, with the
/// reference's range over the mask as the peak. Identical images give
/// `+∞`. Errors as [`nrmse`].
pub fn psnr(
    recon: ArrayView2<'_, f32>,
    reference: ArrayView2<'_, f32>,
    mask: Option<&Array2<bool>>,
) -> Result<f64> {
    let (rms, range) = rms_and_range(&recon, &reference, mask)?;
    Ok(if rms == 0.0 {
        f64::INFINITY
    } else {
        20.0 * (range / rms).log10()
    })
}

/// Side of the SSIM window.
const SSIM_WINDOW: usize = 11;

/// Structural similarity index (Wang, Bovik, Sheikh & Simoncelli 2004):
/// local statistics under an 11×11 Gaussian window of σ = 1.5 (weights
/// normalised to 1, population (co)variances), `C1 = (0.01·L)²`,
/// `C2 = (0.03·L)²` with `L` the reference's range, averaged over every
/// window position that lies fully inside the image.
///
/// Errors: shapes differ or an image is smaller than 11×11
/// ([`CoreError::Shape`]), the reference is constant ([`CoreError::Data`]).
pub fn ssim(recon: ArrayView2<'_, f32>, reference: ArrayView2<'_, f32>) -> Result<f64> {
    check_pair(&recon, &reference, None)?;
    let (ny, nx) = reference.dim();
    if ny < SSIM_WINDOW || nx < SSIM_WINDOW {
        return Err(CoreError::Shape(format!(
            "SSIM needs images of at least {SSIM_WINDOW}×{SSIM_WINDOW} pixels, got {ny}×{nx}"
        )));
    }
    let (lo, hi) = reference
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v as f64), h.max(v as f64))
        });
    let range = hi - lo;
    if !(range.is_finite() && range > 0.0) {
        return Err(CoreError::Data(format!(
            "the reference has no usable range (min {lo}, max {hi})"
        )));
    }
    let c1 = (0.01 * range).powi(2);
    let c2 = (0.03 * range).powi(2);

    let sigma = 1.5f64;
    let half = (SSIM_WINDOW / 2) as f64;
    let mut w: Vec<f64> = (0..SSIM_WINDOW)
        .map(|i| (-(i as f64 - half).powi(2) / (2.0 * sigma * sigma)).exp())
        .collect();
    let total: f64 = w.iter().sum();
    w.iter_mut().for_each(|v| *v /= total);

    let x = recon.mapv(|v| v as f64);
    let y = reference.mapv(|v| v as f64);
    let mu_x = filter_valid(&x, &w);
    let mu_y = filter_valid(&y, &w);
    let xx = filter_valid(&(&x * &x), &w);
    let yy = filter_valid(&(&y * &y), &w);
    let xy = filter_valid(&(&x * &y), &w);

    let mut sum = 0.0;
    for ((((&mx, &my), &sxx), &syy), &sxy) in mu_x
        .iter()
        .zip(mu_y.iter())
        .zip(xx.iter())
        .zip(yy.iter())
        .zip(xy.iter())
    {
        let vx = sxx - mx * mx;
        let vy = syy - my * my;
        let cov = sxy - mx * my;
        sum +=
            ((2.0 * mx * my + c1) * (2.0 * cov + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2));
    }
    Ok(sum / mu_x.len() as f64)
}

/// Separable "valid" correlation of `img` with the kernel `w` ⊗ `w`.
fn filter_valid(img: &Array2<f64>, w: &[f64]) -> Array2<f64> {
    let (ny, nx) = img.dim();
    let k = w.len();
    let (oy, ox) = (ny + 1 - k, nx + 1 - k);
    let rows = Array2::from_shape_fn((ny, ox), |(iy, ix)| {
        w.iter()
            .enumerate()
            .map(|(t, &wt)| wt * img[(iy, ix + t)])
            .sum::<f64>()
    });
    Array2::from_shape_fn((oy, ox), |(iy, ix)| {
        w.iter()
            .enumerate()
            .map(|(t, &wt)| wt * rows[(iy + t, ix)])
            .sum::<f64>()
    })
}

/// `samples` bilinear samples of `image` along the segment from `from` to
/// `to` (inclusive), given in pixel coordinates `(x, y)` = (column, row),
/// pixel centres at integers. Outside the image the values are zero (a
/// sample exactly on the last row or column reads that row or column).
///
/// Errors: an empty image ([`CoreError::Shape`]), `samples = 0` or
/// non-finite end points ([`CoreError::Parameter`]).
pub fn line_profile(
    image: ArrayView2<'_, f32>,
    from: (f64, f64),
    to: (f64, f64),
    samples: usize,
) -> Result<Vec<f32>> {
    if image.is_empty() {
        return Err(CoreError::Shape("empty image".into()));
    }
    if samples == 0 {
        return Err(CoreError::Parameter(
            "a line profile needs at least one sample".into(),
        ));
    }
    if ![from.0, from.1, to.0, to.1].iter().all(|v| v.is_finite()) {
        return Err(CoreError::Parameter(format!(
            "line profile end points {from:?} → {to:?} must be finite"
        )));
    }
    let (ny, nx) = image.dim();
    let at = |ix: i64, iy: i64| -> f64 {
        if ix < 0 || iy < 0 || ix >= nx as i64 || iy >= ny as i64 {
            0.0
        } else {
            image[(iy as usize, ix as usize)] as f64
        }
    };
    let out = (0..samples)
        .map(|i| {
            let t = if samples == 1 {
                0.0
            } else {
                i as f64 / (samples - 1) as f64
            };
            let x = from.0 + t * (to.0 - from.0);
            let y = from.1 + t * (to.1 - from.1);
            let (x0, y0) = (x.floor(), y.floor());
            let (fx, fy) = (x - x0, y - y0);
            // Far outside: every neighbour is zero (also avoids i64 overflow).
            if x0 < -1.0 || y0 < -1.0 || x0 > nx as f64 || y0 > ny as f64 {
                return 0.0;
            }
            let (ix, iy) = (x0 as i64, y0 as i64);
            let top = at(ix, iy) * (1.0 - fx) + at(ix + 1, iy) * fx;
            let bottom = at(ix, iy + 1) * (1.0 - fx) + at(ix + 1, iy + 1) * fx;
            (top * (1.0 - fy) + bottom * fy) as f32
        })
        .collect();
    Ok(out)
}
