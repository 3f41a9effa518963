//! Preprocessing of a slab of raw projections: flat/dark normalisation
//! (mean or median of each group; groups taken before and after the scan are
//! interpolated linearly over the projection index), clamping of
//! non-positive transmissions to a small epsilon, −log, zinger (outlier)
//! removal, rotation of the projections (a tilted detector, see
//! [`crate::correct`]), Paganin phase retrieval (before −log, see
//! [`crate::phase`]) and ring/stripe removal (see [`crate::stripe`]; the
//! sorting-based method of Vo, Atwood and Drakopoulos, Opt. Express 26,
//! 28396 (2018), algorithm 3, is here).
//!
//! Order: flat/dark → zingers → rotation → phase retrieval → −log →
//! stripes. Every step but the rotation and the phase retrieval works on one
//! detector row (one sinogram) at a time; those two need neighbouring rows,
//! so a slab is read with [`Preprocess::row_margin`] rows above and below
//! and cropped afterwards ([`Preprocess::apply_within`]): a slab then gives
//! the same values as the whole scan would (exactly for the rotation, to
//! about e⁻¹⁰ of the filter's tails for the phase retrieval).
//!
//! Bad flat/dark pixels: a pixel whose flat is not above its dark
//! (`flat − dark ≤ 0` for any flat group against the largest dark, or
//! `flat ≤ 0` without darks) has no gain to divide by. Such pixels are
//! masked and their normalised values interpolated linearly along the
//! detector row from the nearest good pixels, with a warning giving their
//! count; when more than [`MAX_BAD_FRACTION`] of a slab's pixels are bad,
//! or a whole row is, the slab is an error naming the file. Negative raw
//! values (offset-corrected detectors produce a few) are reported in a
//! warning; their transmissions are clamped to `epsilon` before −log, as
//! any non-positive transmission is.

use std::ops::Range;
use std::path::Path;

use ndarray::{Array2, Array3, ArrayView3, ArrayViewMut2, Axis, Zip};
use rayon::prelude::*;

use crate::correct::{rotate_projection, rotation_margin};
use crate::error::{shape_err, IoError, Result};
use crate::phase::Paganin;
use crate::source::{FrameGroup, RawSlab};
use crate::stripe::StripeMethod;

/// The largest fraction of a slab's pixels that may have a bad flat
/// (`flat − dark ≤ 0`) and be interpolated; above it the flats and darks
/// are an error.
pub const MAX_BAD_FRACTION: f64 = 0.01;

/// How the frames of a flat or dark group are combined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Average {
    /// Pixel-wise mean.
    #[default]
    Mean,
    /// Pixel-wise median (robust to zingers in the flats).
    Median,
}

impl std::str::FromStr for Average {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mean" => Ok(Self::Mean),
            "median" => Ok(Self::Median),
            _ => Err(format!("unknown average '{s}' (use mean or median)")),
        }
    }
}

/// When to take −log of the (normalised) data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogMode {
    /// −log when flats were applied (the data are transmissions).
    #[default]
    Auto,
    /// Always −log.
    Always,
    /// Never (the data are line integrals already).
    Never,
}

impl std::str::FromStr for LogMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "always" | "yes" | "on" | "true" => Ok(Self::Always),
            "never" | "no" | "off" | "false" => Ok(Self::Never),
            _ => Err(format!(
                "unknown log mode '{s}' (use auto, always or never)"
            )),
        }
    }
}

/// What to do to a raw slab (see the module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Preprocess {
    /// Apply flats and darks when the source has them.
    pub flat_dark: bool,
    /// How to combine the frames of a flat or dark group.
    pub average: Average,
    /// When to take −log.
    pub log: LogMode,
    /// Transmissions at or below this (and NaN) are set to it before −log.
    pub epsilon: f32,
    /// Zinger removal: a value is replaced by the median of its 3×3
    /// neighbourhood in the sinogram (angle × bin) when it differs from that
    /// median by more than this fraction of the median. `None`: off.
    pub zinger_threshold: Option<f32>,
    /// Rotation of every projection about the detector centre, in degrees
    /// (counter-clockwise as displayed; see
    /// [`crate::correct::rotate_projection`]). `None`: off.
    pub rotate_deg: Option<f64>,
    /// Paganin phase retrieval of the normalised projections before −log.
    /// `None`: off.
    pub phase: Option<Paganin>,
    /// Stripe removal after −log. `None`: off.
    pub stripe: Option<StripeMethod>,
}

impl Default for Preprocess {
    fn default() -> Self {
        Self {
            flat_dark: true,
            average: Average::Mean,
            log: LogMode::Auto,
            epsilon: 1e-6,
            zinger_threshold: None,
            rotate_deg: None,
            phase: None,
            stripe: None,
        }
    }
}

impl Preprocess {
    /// No processing at all: the raw projections as they are.
    pub fn raw() -> Self {
        Self {
            flat_dark: false,
            log: LogMode::Never,
            ..Self::default()
        }
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(self.epsilon.is_finite() && self.epsilon > 0.0) {
            return Err(IoError::Parameter(format!(
                "epsilon {} must be positive",
                self.epsilon
            )));
        }
        if let Some(t) = self.zinger_threshold {
            if !(t.is_finite() && t > 0.0) {
                return Err(IoError::Parameter(format!(
                    "zinger threshold {t} must be positive"
                )));
            }
        }
        if let Some(s) = &self.stripe {
            s.validate().map_err(IoError::Parameter)?;
        }
        if let Some(d) = self.rotate_deg {
            if !(d.is_finite() && d.abs() <= 45.0) {
                return Err(IoError::Parameter(format!(
                    "projection rotation {d}° must be within ±45°"
                )));
            }
        }
        if let Some(p) = &self.phase {
            p.validate()?;
        }
        Ok(())
    }

    /// Detector rows a slab needs above and below (read, processed, then
    /// cropped) on a detector of `n_rows × n_cols`: the rotation's margin
    /// plus the phase retrieval's.
    pub fn row_margin(&self, n_rows: usize, n_cols: usize) -> usize {
        let rot = self
            .rotate_deg
            .map_or(0, |d| rotation_margin(d, n_rows, n_cols));
        let phase = self.phase.map_or(0, |p| p.row_margin());
        rot + phase
    }

    /// What processing a slab holds besides the slab itself and its
    /// sinogram copy, for `n_angles` projections of a detector of `n_rows ×
    /// n_cols`: `(bytes per slab row, bytes per slab)`. With a row margin
    /// ([`Self::row_margin`]): the margin rows read above and below (per
    /// slab) and the cropped copy of the kept rows (per row). With phase
    /// retrieval: one padded complex FFT buffer per worker thread
    /// ([`Paganin::buffer_bytes`]) of the slab's rows plus margins. Zero when
    /// neither rotation nor phase retrieval is asked.
    pub fn working_bytes(&self, n_angles: usize, n_rows: usize, n_cols: usize) -> (usize, usize) {
        let m = self.row_margin(n_rows, n_cols);
        if m == 0 && self.phase.is_none() {
            return (0, 0);
        }
        let row = 4usize.saturating_mul(n_angles).saturating_mul(n_cols);
        let mut per_row = row;
        let mut fixed = row.saturating_mul(2 * m);
        if let Some(p) = &self.phase {
            let threads = rayon::current_num_threads().max(1);
            let (rows_a, rows_b) = p.buffer_rows_bound();
            let buf_row = 8usize
                .saturating_mul(p.padded_len(n_cols))
                .saturating_mul(threads);
            // Buffer rows ≤ rows_a · (slab rows + 2m) + rows_b.
            per_row = per_row.saturating_add(buf_row.saturating_mul(rows_a));
            fixed = fixed.saturating_add(
                buf_row.saturating_mul(rows_a.saturating_mul(2 * m).saturating_add(rows_b)),
            );
        }
        (per_row, fixed)
    }

    /// The rows to read for a slab `rows` of a detector of `n_rows × n_cols`:
    /// `rows` widened by [`Self::row_margin`] within the detector.
    pub fn read_range(&self, rows: &Range<usize>, n_rows: usize, n_cols: usize) -> Range<usize> {
        let m = self.row_margin(n_rows, n_cols);
        rows.start.saturating_sub(m)..(rows.end + m).min(n_rows)
    }

    /// Preprocesses a raw slab read from `path`, taking the slab as the
    /// whole detector: `[angle][row][col]`.
    pub fn apply(&self, raw: RawSlab, path: &Path) -> Result<Array3<f32>> {
        let n = raw.rows.len();
        let keep = raw.rows.clone();
        let origin = raw.rows.start;
        self.process(raw, path, origin, n, keep)
    }

    /// Preprocesses a raw slab (`raw.rows`, read with
    /// [`Self::read_range`]) of a detector of `n_rows` rows, and returns
    /// detector rows `keep` (within `raw.rows`): `[angle][row][col]`.
    pub fn apply_within(
        &self,
        raw: RawSlab,
        path: &Path,
        n_rows: usize,
        keep: Range<usize>,
    ) -> Result<Array3<f32>> {
        self.process(raw, path, 0, n_rows, keep)
    }

    /// [`Self::apply_within`] on a detector whose first row is `origin`
    /// (the rows of `raw` and `keep` are in the same numbering, kept for
    /// messages; the rotation works relative to `origin`).
    fn process(
        &self,
        raw: RawSlab,
        path: &Path,
        origin: usize,
        n_rows: usize,
        keep: Range<usize>,
    ) -> Result<Array3<f32>> {
        self.validate()?;
        let RawSlab {
            rows,
            mut projections,
            flats,
            darks,
        } = raw;
        if keep.start < rows.start || keep.end > rows.end || keep.start >= keep.end {
            return Err(IoError::Parameter(format!(
                "{}: rows {}..{} asked of a slab of rows {}..{}",
                path.display(),
                keep.start,
                keep.end,
                rows.start,
                rows.end
            )));
        }
        let (_, nr, nc) = projections.dim();
        for g in flats.iter().chain(darks.iter()) {
            let (_, r, c) = g.frames.dim();
            if (r, c) != (nr, nc) {
                return Err(shape_err(
                    path,
                    format!("flat/dark frames of {r}×{c}, projections of {nr}×{nc}"),
                ));
            }
        }
        let mut normalised = false;
        if self.flat_dark && (!flats.is_empty() || !darks.is_empty()) {
            let f = average_groups(&flats, self.average);
            let d = average_groups(&darks, self.average);
            let negative = count_negative(&projections)
                + flats
                    .iter()
                    .chain(&darks)
                    .map(|g| count_negative(&g.frames))
                    .sum::<usize>();
            if negative > 0 {
                tracing::warn!(
                    "{}: rows {}..{}: {negative} negative detector values (their transmissions are clamped before −log)",
                    path.display(),
                    rows.start,
                    rows.end
                );
            }
            let mask = bad_gain_mask(&f, &d);
            let bad = mask
                .as_ref()
                .map_or(0, |m| m.iter().filter(|&&b| b).count());
            if bad > 0 {
                let frac = bad as f64 / (nr * nc) as f64;
                if frac > MAX_BAD_FRACTION {
                    return Err(crate::error::format_err(
                        path,
                        format!(
                            "{bad} of {} pixels of detector rows {}..{} have a flat not above the dark \
                             ({:.1} %, more than {} %): check the flats and darks",
                            nr * nc,
                            rows.start,
                            rows.end,
                            100.0 * frac,
                            100.0 * MAX_BAD_FRACTION
                        ),
                    ));
                }
            }
            flat_dark_correct(&mut projections, &f, &d);
            if let (Some(mask), true) = (mask, bad > 0) {
                if let Some(r) = mask.outer_iter().position(|row| row.iter().all(|&b| b)) {
                    return Err(crate::error::format_err(
                        path,
                        format!(
                            "detector row {} has no pixel with a flat above the dark: check the flats and darks",
                            rows.start + r
                        ),
                    ));
                }
                interpolate_masked(&mut projections, &mask);
                tracing::warn!(
                    "{}: rows {}..{}: {bad} pixels with flat ≤ dark, interpolated along their rows",
                    path.display(),
                    rows.start,
                    rows.end
                );
            }
            normalised = !f.is_empty();
        }
        if let Some(t) = self.zinger_threshold {
            for_each_sinogram(&mut projections, |s| remove_zingers(s, t));
        }
        if let Some(deg) = self.rotate_deg {
            let first = rows.start - origin;
            projections
                .axis_iter_mut(Axis(0))
                .into_par_iter()
                .for_each(|mut p| {
                    let r = rotate_projection(p.view(), deg, first, n_rows);
                    p.assign(&r);
                });
        }
        if let Some(phase) = &self.phase {
            projections
                .axis_iter_mut(Axis(0))
                .into_par_iter()
                .for_each(|p| phase.apply(p));
        }
        if keep != rows {
            let (a, b) = (keep.start - rows.start, keep.end - rows.start);
            projections = projections.slice(ndarray::s![.., a..b, ..]).to_owned();
        }
        let log = match self.log {
            LogMode::Auto => normalised,
            LogMode::Always => true,
            LogMode::Never => false,
        };
        if log {
            let eps = self.epsilon;
            projections.par_mapv_inplace(|v| {
                // NaN and non-positive transmissions are clamped too.
                let v = if v > eps { v } else { eps };
                -v.ln()
            });
        }
        if let Some(method) = self.stripe {
            for_each_sinogram(&mut projections, |s| method.apply(s));
        }
        Ok(projections)
    }
}

fn count_negative(a: &Array3<f32>) -> usize {
    a.iter().filter(|&&v| v < 0.0).count()
}

/// Pixels `[row][col]` without gain: `flat − dark ≤ 0` for any flat group
/// against the largest dark of the groups (`flat ≤ 0` without darks).
/// `None` without flats.
pub fn bad_gain_mask(
    flats: &[(f64, Array2<f32>)],
    darks: &[(f64, Array2<f32>)],
) -> Option<Array2<bool>> {
    let first = flats.first()?;
    let mut dmax = Array2::<f32>::zeros(first.1.dim());
    if let Some((_, d0)) = darks.first() {
        dmax.assign(d0);
        for (_, d) in &darks[1..] {
            Zip::from(&mut dmax).and(d).for_each(|m, &v| *m = m.max(v));
        }
    }
    let mut mask = Array2::from_elem(first.1.dim(), false);
    for (_, f) in flats {
        Zip::from(&mut mask)
            .and(f)
            .and(&dmax)
            .for_each(|b, &f, &d| *b |= (f - d).is_nan() || f - d <= 0.0);
    }
    Some(mask)
}

/// A masked column and its nearest unmasked neighbours on the left and right.
type MaskedPixel = (usize, Option<usize>, Option<usize>);

/// Replaces the masked pixels `[row][col]` of every projection by linear
/// interpolation along the row between the nearest unmasked pixels (the
/// nearest one at the ends). Rows that are wholly masked are left as they
/// are.
pub fn interpolate_masked(projections: &mut Array3<f32>, mask: &Array2<bool>) {
    let (_, nr, nc) = projections.dim();
    // Per row: the masked columns and their good neighbours.
    let plan: Vec<Vec<MaskedPixel>> = (0..nr)
        .map(|r| {
            let row = mask.row(r);
            (0..nc)
                .filter(|&c| row[c])
                .map(|c| {
                    let left = (0..c).rev().find(|&k| !row[k]);
                    let right = (c + 1..nc).find(|&k| !row[k]);
                    (c, left, right)
                })
                .collect()
        })
        .collect();
    projections
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .for_each(|mut p| {
            for (r, cols) in plan.iter().enumerate() {
                for &(c, left, right) in cols {
                    let v = match (left, right) {
                        (Some(l), Some(h)) => {
                            let w = (c - l) as f32 / (h - l) as f32;
                            (1.0 - w) * p[[r, l]] + w * p[[r, h]]
                        }
                        (Some(l), None) => p[[r, l]],
                        (None, Some(h)) => p[[r, h]],
                        (None, None) => continue,
                    };
                    p[[r, c]] = v;
                }
            }
        });
}

/// Runs `f` on every sinogram `[angle][col]` of a slab `[angle][row][col]`,
/// rows in parallel.
fn for_each_sinogram(p: &mut Array3<f32>, f: impl Fn(ArrayViewMut2<'_, f32>) + Sync) {
    let mut sinos = p.view_mut().permuted_axes([1, 0, 2]);
    sinos.axis_iter_mut(Axis(0)).into_par_iter().for_each(&f);
}

/// Combines each group's frames into one frame; groups at the same position
/// are merged. Returns `(position, frame)` sorted by position.
pub fn average_groups(groups: &[FrameGroup], average: Average) -> Vec<(f64, Array2<f32>)> {
    let mut merged: Vec<(f64, Vec<ArrayView3<'_, f32>>)> = Vec::new();
    let mut sorted: Vec<&FrameGroup> = groups
        .iter()
        .filter(|g| g.frames.len_of(Axis(0)) > 0)
        .collect();
    sorted.sort_by(|a, b| a.position.total_cmp(&b.position));
    for g in sorted {
        match merged.last_mut() {
            Some((p, v)) if *p == g.position => v.push(g.frames.view()),
            _ => merged.push((g.position, vec![g.frames.view()])),
        }
    }
    merged
        .into_iter()
        .map(|(p, views)| {
            let refs: Vec<ArrayView3<'_, f32>> = views;
            let stacked = ndarray::concatenate(Axis(0), &refs).expect("frames of equal size");
            (p, average_frames(stacked.view(), average))
        })
        .collect()
}

/// Pixel-wise mean or median of `[frame][row][col]`.
pub fn average_frames(frames: ArrayView3<'_, f32>, average: Average) -> Array2<f32> {
    match average {
        Average::Mean => frames
            .mapv(f64::from)
            .mean_axis(Axis(0))
            .expect("at least one frame")
            .mapv(|v| v as f32),
        Average::Median => {
            let (n, r, c) = frames.dim();
            let mut out = Array2::<f32>::zeros((r, c));
            let mut buf = vec![0f32; n];
            for i in 0..r {
                for j in 0..c {
                    for (k, b) in buf.iter_mut().enumerate() {
                        *b = frames[[k, i, j]];
                    }
                    out[[i, j]] = median(&mut buf);
                }
            }
            out
        }
    }
}

/// Median of a slice (mean of the two middle values for even lengths);
/// reorders the slice. NaNs sort last.
pub fn median(v: &mut [f32]) -> f32 {
    let n = v.len();
    if n == 0 {
        return f32::NAN;
    }
    v.sort_unstable_by(|a, b| a.total_cmp(b));
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Weights of the groups at projection index `i`: linear interpolation
/// between the two groups around `i`, the nearest group outside them.
fn interp_weights(positions: &[f64], i: f64) -> Vec<(usize, f32)> {
    match positions.len() {
        0 => Vec::new(),
        1 => vec![(0, 1.0)],
        n => {
            if i <= positions[0] {
                return vec![(0, 1.0)];
            }
            if i >= positions[n - 1] {
                return vec![(n - 1, 1.0)];
            }
            let k = positions
                .windows(2)
                .position(|w| i >= w[0] && i <= w[1])
                .unwrap_or(0);
            let w = ((i - positions[k]) / (positions[k + 1] - positions[k])) as f32;
            vec![(k, 1.0 - w), (k + 1, w)]
        }
    }
}

/// Flat/dark correction in place: `(p − d) / (f − d)` with the flat and
/// dark of each projection interpolated over the projection index; a
/// denominator at or below 1e-6 is taken as 1e-6. Without flats only the
/// dark is subtracted.
pub fn flat_dark_correct(
    projections: &mut Array3<f32>,
    flats: &[(f64, Array2<f32>)],
    darks: &[(f64, Array2<f32>)],
) {
    let fpos: Vec<f64> = flats.iter().map(|g| g.0).collect();
    let dpos: Vec<f64> = darks.iter().map(|g| g.0).collect();
    let (_, nr, nc) = projections.dim();
    projections
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(i, mut p)| {
            let blend = |groups: &[(f64, Array2<f32>)], pos: &[f64]| -> Option<Array2<f32>> {
                let w = interp_weights(pos, i as f64);
                if w.is_empty() {
                    return None;
                }
                let mut out = Array2::<f32>::zeros((nr, nc));
                for (k, wk) in w {
                    out.scaled_add(wk, &groups[k].1);
                }
                Some(out)
            };
            let d = blend(darks, &dpos);
            let f = blend(flats, &fpos);
            match (f, d) {
                (Some(f), Some(d)) => Zip::from(&mut p).and(&f).and(&d).for_each(|v, &f, &d| {
                    *v = (*v - d) / (f - d).max(1e-6);
                }),
                (Some(f), None) => Zip::from(&mut p).and(&f).for_each(|v, &f| {
                    *v /= f.max(1e-6);
                }),
                (None, Some(d)) => Zip::from(&mut p).and(&d).for_each(|v, &d| *v -= d),
                (None, None) => {}
            }
        });
}

/// Zinger (outlier) removal on one sinogram `[angle][bin]`: a value that
/// differs from the median of its 3×3 neighbourhood by more than
/// `threshold · |median|` is replaced by that median.
pub fn remove_zingers(mut sino: ArrayViewMut2<'_, f32>, threshold: f32) {
    let (na, nb) = sino.dim();
    if na < 3 || nb < 3 {
        return;
    }
    let src = sino.to_owned();
    let mut buf = [0f32; 9];
    for a in 0..na {
        for b in 0..nb {
            let mut k = 0;
            for da in [-1i64, 0, 1] {
                for db in [-1i64, 0, 1] {
                    let aa = (a as i64 + da).clamp(0, na as i64 - 1) as usize;
                    let bb = (b as i64 + db).clamp(0, nb as i64 - 1) as usize;
                    buf[k] = src[[aa, bb]];
                    k += 1;
                }
            }
            let m = median(&mut buf);
            let v = src[[a, b]];
            let within = (v - m).abs() <= threshold * m.abs();
            if !within && m.is_finite() {
                sino[[a, b]] = m;
            }
        }
    }
}

/// Reflects an index into `0..n` as scipy's `mode='reflect'` (d c b a | a b c d | d c b a).
pub(crate) fn reflect(i: i64, n: i64) -> usize {
    let period = 2 * n;
    let mut k = i.rem_euclid(period);
    if k >= n {
        k = period - 1 - k;
    }
    k as usize
}

/// Sorting-based stripe (ring artefact) removal of Vo et al. 2018
/// (algorithm 3), in place on one sinogram `[angle][bin]`: each bin's column
/// is sorted over the angles, the sorted image is median-filtered across
/// bins with a window of `size` bins (made odd; reflecting edges), and the
/// values are put back in their original order. Full stripes (a detector
/// pixel that is off by a constant or a factor) become smooth across bins
/// after sorting and are removed; the object's features, which move across
/// bins with the angle, are kept.
pub fn remove_stripe_based_sorting(mut sino: ArrayViewMut2<'_, f32>, size: usize) {
    let (na, nb) = sino.dim();
    if na == 0 || nb < 2 {
        return;
    }
    let size = (size.max(1) | 1).min(2 * nb - 1);
    let h = (size / 2) as i64;
    // Sorted values T[rank][bin] and where each came from.
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
    let mut win = vec![0f32; size];
    for r in 0..na {
        let row = sorted.row(r).to_owned();
        for b in 0..nb {
            for (k, w) in win.iter_mut().enumerate() {
                *w = row[reflect(b as i64 + k as i64 - h, nb as i64)];
            }
            let m = median(&mut win);
            sino[[index[[r, b]] as usize, b]] = m;
        }
    }
}
