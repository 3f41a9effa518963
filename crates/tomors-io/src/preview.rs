//! Grey PNG previews of slices.

use std::path::Path;

use ndarray::{Array2, ArrayView2};

use crate::error::{format_err, os_err, Result};

/// The `lo`/`hi` percentiles (0–100) of the finite values of an image.
pub fn percentiles(img: ArrayView2<'_, f32>, lo: f32, hi: f32) -> (f32, f32) {
    let mut v: Vec<f32> = img.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return (0.0, 1.0);
    }
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    let at = |p: f32| v[((p / 100.0) * (v.len() - 1) as f32).round() as usize];
    let (a, b) = (at(lo.clamp(0.0, 100.0)), at(hi.clamp(0.0, 100.0)));
    if b > a {
        (a, b)
    } else {
        (a, a + 1.0)
    }
}

/// Maps an image linearly to 8-bit grey: `lo` → 0, `hi` → 255.
pub fn to_gray8(img: ArrayView2<'_, f32>, lo: f32, hi: f32) -> Array2<u8> {
    img.mapv(|v| {
        let t = ((v - lo) / (hi - lo) * 255.0).round();
        if t.is_nan() {
            0
        } else {
            t.clamp(0.0, 255.0) as u8
        }
    })
}

/// Writes an 8-bit grey PNG (atomically: temporary name, then rename).
pub fn write_png(path: &Path, img: ArrayView2<'_, u8>) -> Result<()> {
    let (h, w) = img.dim();
    let data: Vec<u8> = img.iter().copied().collect();
    let buf = image::GrayImage::from_raw(w as u32, h as u32, data)
        .ok_or_else(|| format_err(path, "image buffer of the wrong size"))?;
    // Replaces an earlier PNG (never another kind of file), atomically.
    let png = crate::output::OutputKind::File {
        magic: b"\x89PNG\r\n\x1a\n",
    };
    let (stage, file) = crate::output::StagedFile::create(path, png, true)?;
    let mut w = std::io::BufWriter::new(file);
    buf.write_to(&mut w, image::ImageFormat::Png)
        .map_err(|e| format_err(path, format!("cannot write PNG: {e}")))?;
    let f = w
        .into_inner()
        .map_err(|e| os_err(stage.path(), e.into_error()))?;
    drop(f);
    stage.commit()
}

/// Places images side by side (same height; shorter ones padded with 0)
/// with `gap` black columns between them.
pub fn hstack(images: &[Array2<u8>], gap: usize) -> Array2<u8> {
    let h = images.iter().map(|i| i.nrows()).max().unwrap_or(0);
    let w: usize =
        images.iter().map(|i| i.ncols()).sum::<usize>() + gap * images.len().saturating_sub(1);
    let mut out = Array2::<u8>::zeros((h, w));
    let mut x = 0;
    for img in images {
        out.slice_mut(ndarray::s![..img.nrows(), x..x + img.ncols()])
            .assign(img);
        x += img.ncols() + gap;
    }
    out
}

/// Writes images `[y][x]` side by side (4 black columns apart) as one grey
/// PNG, mapping `range` (lo, hi) linearly to 0..255 (values outside clamp,
/// NaN is black).
pub fn write_gray_row(
    path: &Path,
    images: &[ArrayView2<'_, f32>],
    range: (f32, f32),
) -> Result<()> {
    let (lo, hi) = range;
    let hi = if hi > lo { hi } else { lo + 1.0 };
    let grey: Vec<Array2<u8>> = images.iter().map(|i| to_gray8(*i, lo, hi)).collect();
    write_png(path, hstack(&grey, 4).view())
}
