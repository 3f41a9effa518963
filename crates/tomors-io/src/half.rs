//! 360° scans with an offset rotation axis ("half acquisition", extended
//! field of view): the axis sits near one edge of the detector, so each
//! projection sees a little more than half of the object, and the opposite
//! projection (θ + π, mirrored) sees the other half. Stitching the two
//! gives a 180° sinogram of almost twice the detector's width, which any
//! parallel-beam method reconstructs into the wider slice.
//!
//! As in algotom (`find_center_360`, `convert_sinogram_360_to_180`, Vo et
//! al., Opt. Express 29, 17849 (2021)), nabu and tomocupy:
//!
//! - **pairing**: each projection at θ ∈ [θ₀, θ₀ + π) is paired with the
//!   projection at θ + π (interpolated linearly between the two nearest
//!   angles, periodic over 2π, when no projection sits exactly there);
//! - **axis**: with the axis at column `c` of a detector of `W` columns,
//!   the mirrored opposite projection is the projection shifted by
//!   `d = W − 1 − 2c` columns, `flip(p(θ+π))[k] = p(θ)[k − d]`; `d` is
//!   found by comparing the overlapping columns of both (Gaussian-smoothed,
//!   the squared difference normalised by their variance, so overlaps of
//!   different widths compare fairly and empty air matches nothing) over
//!   every integer `d` the search range allows — both sides of the
//!   detector — then refined to 0.05 px of `d` with cubic interpolation
//!   and a parabola through the three best samples;
//! - **stitching**: detector position `x` of the wide row takes
//!   `p(θ)[x]` where the projection has it and `p(θ+π)[2c − x]` (cubic
//!   interpolation when `2c` is not whole) where the mirrored one has it,
//!   blended in the overlap with linear-ramp weights that fall to zero at
//!   each projection's own edge.
//!
//! [`HalfAcquisitionSource`] presents a stitched scan as an ordinary
//! [`ProjectionSource`] of `m` angles (those in [θ₀, θ₀ + π)) and
//! [`Stitch::width`] columns, axis at [`Stitch::center`]; it stitches the
//! preprocessed rows (flat/dark, −log, stripes on the 360° sinogram first).

use std::ops::Range;
use std::path::Path;

use ndarray::{Array2, Array3, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

use crate::error::{IoError, Result};
use crate::preprocess::Preprocess;
use crate::source::{check_rows, ProjectionSource, RawSlab};

/// The opposite projection of one projection: up to two projections and
/// their linear weights.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// The projection at θ (θ ∈ [θ₀, θ₀ + π)).
    pub index: usize,
    /// The projections around θ + π and their weights (summing to 1).
    pub opposite: [(usize, f32); 2],
}

/// Pairs every projection in the first half turn with its opposite
/// (θ + π): the half turn's projections in angle order. Errors unless the
/// angles cover a whole turn (within 1.5 angular steps) and hold at least 8
/// projections per half turn.
pub fn pair_opposite(angles: &[f32]) -> Result<Vec<Pair>> {
    let n = angles.len();
    if n < 16 {
        return Err(IoError::Parameter(format!(
            "half acquisition needs at least 16 projections over 360°, got {n}"
        )));
    }
    if angles.iter().any(|a| !a.is_finite()) {
        return Err(IoError::Parameter("non-finite angle".into()));
    }
    let two_pi = 2.0 * std::f64::consts::PI;
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| angles[a].total_cmp(&angles[b]));
    let a0 = f64::from(angles[order[0]]);
    let span = f64::from(angles[order[n - 1]]) - a0;
    let step = span / (n - 1) as f64;
    if span + 1.5 * step < two_pi || span > two_pi + 1.5 * step {
        return Err(IoError::Parameter(format!(
            "half acquisition needs a 360° scan; the angles cover {:.1}° (give --angle-range 360 \
             or the scan's angles)",
            (span + step).to_degrees()
        )));
    }
    // Angles relative to the first, reduced to one turn, sorted.
    let mut turn: Vec<(f64, usize)> = order
        .iter()
        .map(|&i| ((f64::from(angles[i]) - a0).rem_euclid(two_pi), i))
        .collect();
    turn.sort_by(|a, b| a.0.total_cmp(&b.0));
    let tol = 1e-3 * step;
    let mut pairs = Vec::new();
    for &i in &order {
        let rel = f64::from(angles[i]) - a0;
        if rel >= std::f64::consts::PI - tol {
            break;
        }
        let target = (rel + std::f64::consts::PI).rem_euclid(two_pi);
        // The last angle at or below the target, cyclically.
        let k = turn.partition_point(|t| t.0 <= target + tol);
        let (lo, hi) = if k == 0 {
            (turn[turn.len() - 1], turn[0])
        } else {
            (turn[k - 1], turn[k % turn.len()])
        };
        let opposite = if (target - lo.0).abs() <= tol {
            [(lo.1, 1.0), (lo.1, 0.0)]
        } else {
            let gap = (hi.0 - lo.0).rem_euclid(two_pi);
            let w = ((target - lo.0).rem_euclid(two_pi) / gap) as f32;
            [(lo.1, 1.0 - w), (hi.1, w)]
        };
        pairs.push(Pair { index: i, opposite });
    }
    if pairs.len() < 8 {
        return Err(IoError::Parameter(format!(
            "half acquisition needs at least 8 projections per half turn, got {}",
            pairs.len()
        )));
    }
    Ok(pairs)
}

/// The half-turn rows of a 360° sinogram `[angle][bin]` and their
/// opposites: `(top, opposite)`, both `[pair][bin]`.
pub fn split_opposite(sino: ArrayView2<'_, f32>, pairs: &[Pair]) -> (Array2<f32>, Array2<f32>) {
    let nb = sino.ncols();
    let mut top = Array2::<f32>::zeros((pairs.len(), nb));
    let mut opp = Array2::<f32>::zeros((pairs.len(), nb));
    for (k, p) in pairs.iter().enumerate() {
        top.row_mut(k).assign(&sino.row(p.index));
        let [(a, wa), (b, wb)] = p.opposite;
        let mut row = opp.row_mut(k);
        row.assign(&sino.row(a));
        row *= wa;
        if wb != 0.0 {
            row.scaled_add(wb, &sino.row(b));
        }
    }
    (top, opp)
}

/// Keys' cubic convolution weights (a = −½) of the four samples around a
/// fractional offset `t ∈ [0, 1)`.
fn cubic_weights(t: f64) -> [f64; 4] {
    let a = -0.5;
    let w = |x: f64| {
        let x = x.abs();
        if x <= 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        } else {
            0.0
        }
    };
    [w(1.0 + t), w(t), w(1.0 - t), w(2.0 - t)]
}

/// `row` at the fractional position `x` (cubic convolution, edges
/// clamped).
fn sample(row: ArrayView1<'_, f32>, x: f64) -> f32 {
    let n = row.len() as i64;
    let x0 = x.floor();
    let t = x - x0;
    if t < 1e-9 {
        return row[(x0 as i64).clamp(0, n - 1) as usize];
    }
    let w = cubic_weights(t);
    let mut s = 0.0;
    for (j, wj) in w.iter().enumerate() {
        let k = (x0 as i64 - 1 + j as i64).clamp(0, n - 1) as usize;
        s += wj * f64::from(row[k]);
    }
    s as f32
}

/// How a half-acquisition scan is stitched: the axis on a detector of
/// `n_cols` columns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stitch {
    /// The rotation axis on the detector (bin `k` centred at `k`).
    pub axis: f64,
    /// Detector columns.
    pub n_cols: usize,
}

impl Stitch {
    /// A stitch for the axis at `axis` of `n_cols` columns (`axis` within
    /// the detector).
    pub fn new(axis: f64, n_cols: usize) -> Result<Self> {
        if n_cols < 4 {
            return Err(IoError::Parameter(format!(
                "half acquisition needs at least 4 detector columns, got {n_cols}"
            )));
        }
        if !(axis.is_finite() && axis >= 0.0 && axis <= (n_cols - 1) as f64) {
            return Err(IoError::Parameter(format!(
                "half acquisition: the rotation axis {axis} must lie on the detector (columns 0 to {})",
                n_cols - 1
            )));
        }
        Ok(Self { axis, n_cols })
    }

    /// Whether the axis is in the left half of the detector (the mirrored
    /// projections extend the row to the left).
    pub fn axis_left(&self) -> bool {
        self.axis <= (self.n_cols - 1) as f64 / 2.0
    }

    /// Detector position of the wide row's first column (≤ 0).
    pub fn first(&self) -> i64 {
        let last = (self.n_cols - 1) as f64;
        ((2.0 * self.axis - last) - 1e-6).ceil().min(0.0) as i64
    }

    /// Columns of the stitched row.
    pub fn width(&self) -> usize {
        let last = (self.n_cols - 1) as f64;
        let end = ((2.0 * self.axis) + 1e-6).floor().max(last) as i64;
        (end - self.first() + 1) as usize
    }

    /// The axis in the stitched row's columns.
    pub fn center(&self) -> f64 {
        self.axis - self.first() as f64
    }

    /// Width of the overlap (pixels between its two ends).
    pub fn overlap(&self) -> f64 {
        let last = (self.n_cols - 1) as f64;
        let (lo, hi) = self.overlap_range();
        (hi - lo).clamp(0.0, last)
    }

    /// The overlap `[lo, hi]` in detector positions.
    fn overlap_range(&self) -> (f64, f64) {
        let last = (self.n_cols - 1) as f64;
        let two_c = 2.0 * self.axis;
        ((two_c - last).max(0.0), two_c.min(last))
    }

    /// Stitches one row: the projection `top` at θ and `opp` at θ + π,
    /// both `n_cols` long, into `out` ([`Self::width`] long).
    pub fn stitch_row(
        &self,
        top: ArrayView1<'_, f32>,
        opp: ArrayView1<'_, f32>,
        mut out: ndarray::ArrayViewMut1<'_, f32>,
    ) {
        let last = (self.n_cols - 1) as f64;
        let two_c = 2.0 * self.axis;
        let (lo, hi) = self.overlap_range();
        let left = self.axis_left();
        let first = self.first();
        for (j, o) in out.iter_mut().enumerate() {
            let x = (first + j as i64) as f64;
            let has_top = x >= -1e-9 && x <= last + 1e-9;
            let m = two_c - x;
            let has_opp = m >= -1e-6 && m <= last + 1e-6;
            let vt = || top[x.round().clamp(0.0, last) as usize];
            let vo = || sample(opp, m.clamp(0.0, last));
            *o = match (has_top, has_opp) {
                (true, true) => {
                    // Ramp over the overlap, zero at each projection's own
                    // edge: the top projection's edge is x = 0 (axis on the
                    // left) or x = last (axis on the right).
                    let t = if hi > lo {
                        ((x - lo + 0.5) / (hi - lo + 1.0)).clamp(0.0, 1.0)
                    } else {
                        0.5
                    };
                    let w_top = (if left { t } else { 1.0 - t }) as f32;
                    w_top * vt() + (1.0 - w_top) * vo()
                }
                (true, false) => vt(),
                (false, true) => vo(),
                (false, false) => 0.0,
            };
        }
    }

    /// Stitches a 360° sinogram `[angle][bin]` into the wide 180° one
    /// `[pair][width]` (rows in the order of `pairs`).
    pub fn stitch(&self, sino: ArrayView2<'_, f32>, pairs: &[Pair]) -> Array2<f32> {
        let (top, opp) = split_opposite(sino, pairs);
        let mut out = Array2::<f32>::zeros((pairs.len(), self.width()));
        for (k, o) in out.outer_iter_mut().enumerate() {
            self.stitch_row(top.row(k), opp.row(k), o);
        }
        out
    }
}

/// Options of [`find_axis_360`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AxisSearch {
    /// Search the axis within `[a, b]` (detector columns); `None`: the
    /// whole detector, both sides.
    pub range: Option<(f64, f64)>,
    /// The smallest overlap (columns) a candidate may have; `None`:
    /// `max(8, W/64)`.
    pub min_overlap: Option<usize>,
}

/// Where [`find_axis_360`] found the axis.
#[derive(Clone, Debug, PartialEq)]
pub struct AxisFound {
    /// The rotation axis (detector columns, bin `k` centred at `k`).
    pub axis: f64,
    /// How distinct the minimum is: `1 − min / median` of the integer
    /// search's metric, in [0, 1] (near 0: no clear minimum).
    pub quality: f64,
    /// The integer search: `(axis, metric)` per candidate.
    pub metric: Vec<(f64, f64)>,
}

/// The normalised mismatch of `fb[:, k]` and `top[:, k − d]` over the
/// columns `cols` of `fb` (fractional `d`: cubic interpolation of `top`):
/// `Σ(a − b)² / Σ((a − ā)² + (b − b̄)²)`; `None` when both are flat.
fn mismatch(
    top: ArrayView2<'_, f32>,
    fb: ArrayView2<'_, f32>,
    d: f64,
    cols: Range<usize>,
) -> Option<f64> {
    let (nr, _) = top.dim();
    let n = (nr * cols.len()) as f64;
    if n == 0.0 {
        return None;
    }
    let whole = (d - d.round()).abs() < 1e-9;
    let mut b_vals = Vec::with_capacity(cols.len());
    let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0f64, 0f64, 0f64, 0f64, 0f64);
    for r in 0..nr {
        let trow = top.row(r);
        b_vals.clear();
        for k in cols.clone() {
            let x = k as f64 - d;
            let b = if whole {
                f64::from(trow[(x.round() as i64).clamp(0, trow.len() as i64 - 1) as usize])
            } else {
                f64::from(sample(trow, x))
            };
            b_vals.push(b);
        }
        for (k, &b) in cols.clone().zip(&b_vals) {
            let a = f64::from(fb[[r, k]]);
            sa += a;
            sb += b;
            saa += a * a;
            sbb += b * b;
            sab += a * b;
        }
    }
    let var = (saa - sa * sa / n) + (sbb - sb * sb / n);
    let diff = saa + sbb - 2.0 * sab;
    let scale = (saa + sbb).max(1e-300);
    if var <= 1e-9 * scale || var <= 0.0 {
        return None;
    }
    Some(diff.max(0.0) / var)
}

/// Finds the rotation axis of a 360° half-acquisition sinogram
/// `[angle][bin]` (preprocessed) by matching each half-turn projection with
/// its mirrored opposite (see the module documentation).
pub fn find_axis_360(
    sinogram: ArrayView2<'_, f32>,
    angles: &[f32],
    options: &AxisSearch,
) -> Result<AxisFound> {
    let (na, w) = sinogram.dim();
    if angles.len() != na {
        return Err(IoError::Parameter(format!(
            "{} angles for a sinogram of {na} rows",
            angles.len()
        )));
    }
    if w < 16 {
        return Err(IoError::Parameter(format!(
            "the axis search needs at least 16 detector columns, got {w}"
        )));
    }
    if sinogram.iter().any(|v| !v.is_finite()) {
        return Err(IoError::Parameter(
            "the sinogram holds non-finite values (preprocess it first)".into(),
        ));
    }
    let pairs = pair_opposite(angles)?;
    let (top, opp) = split_opposite(sinogram, &pairs);
    let top = crate::center::gaussian_filter(top.view(), 2.0, 2.0);
    let fb = crate::center::gaussian_filter(opp.slice(ndarray::s![.., ..;-1]), 2.0, 2.0);
    let last = (w - 1) as f64;
    let min_overlap = options.min_overlap.unwrap_or((w / 64).max(8)).clamp(2, w);
    let (a, b) = options.range.unwrap_or((0.0, last));
    if !(a.is_finite() && b.is_finite() && a <= b) {
        return Err(IoError::Parameter(format!(
            "axis search range {a}:{b} must be finite with a ≤ b"
        )));
    }
    let (a, b) = (a.max(0.0), b.min(last));
    if a > b {
        return Err(IoError::Parameter(format!(
            "axis search range {:?} lies outside the detector's columns 0 to {last}",
            options.range.unwrap_or((a, b))
        )));
    }
    // d = W − 1 − 2c; the overlap is W − |d| columns.
    let d_max = (w - min_overlap) as i64;
    let d_lo = ((last - 2.0 * b).ceil() as i64).max(-d_max);
    let d_hi = ((last - 2.0 * a).floor() as i64).min(d_max);
    if d_lo > d_hi {
        return Err(IoError::Parameter(format!(
            "axis search range {a}:{b} leaves no overlap of at least {min_overlap} columns"
        )));
    }
    // The integer search on up to 256 rows.
    let stride = pairs.len().div_ceil(256).max(1);
    let rows: Vec<usize> = (0..pairs.len()).step_by(stride).collect();
    let top_c = top.select(Axis(0), &rows);
    let fb_c = fb.select(Axis(0), &rows);
    let cols = |d: i64| -> Range<usize> { (d.max(0) as usize)..((w as i64 + d.min(0)) as usize) };
    let coarse: Vec<(i64, Option<f64>)> = (d_lo..=d_hi)
        .into_par_iter()
        .map(|d| (d, mismatch(top_c.view(), fb_c.view(), d as f64, cols(d))))
        .collect();
    let valid: Vec<(i64, f64)> = coarse
        .iter()
        .filter_map(|&(d, m)| m.map(|m| (d, m)))
        .collect();
    let Some(&(d0, m0)) = valid.iter().min_by(|x, y| x.1.total_cmp(&y.1)) else {
        return Err(IoError::Parameter(
            "the sinogram is flat where the two half turns overlap: no axis can be found".into(),
        ));
    };
    let mut ms: Vec<f32> = valid.iter().map(|v| v.1 as f32).collect();
    let med = f64::from(crate::preprocess::median(&mut ms));
    let quality = if med > 0.0 {
        (1.0 - m0 / med).clamp(0.0, 1.0)
    } else {
        0.0
    };
    // Refinement: d0 ± 1 in steps of 0.05 on every row, the columns fixed.
    let inner = {
        let c = cols(d0);
        let lo = (c.start + 2).min(c.end);
        let hi = c.end.saturating_sub(2).max(lo);
        lo..hi
    };
    let fine: Vec<(f64, f64)> = (-20..=20)
        .into_par_iter()
        .filter_map(|k| {
            let d = d0 as f64 + 0.05 * k as f64;
            mismatch(top.view(), fb.view(), d, inner.clone()).map(|m| (d, m))
        })
        .collect();
    let d = refine(&fine).unwrap_or(d0 as f64);
    let axis = ((last - d) / 2.0).clamp(0.0, last);
    Ok(AxisFound {
        axis,
        quality,
        metric: valid
            .iter()
            .map(|&(d, m)| ((last - d as f64) / 2.0, m))
            .collect(),
    })
}

/// The minimum of sampled `(x, f)` (x increasing): a parabola through the
/// smallest sample and its two neighbours.
fn refine(samples: &[(f64, f64)]) -> Option<f64> {
    let k = (0..samples.len()).min_by(|&i, &j| samples[i].1.total_cmp(&samples[j].1))?;
    if k == 0 || k + 1 == samples.len() {
        return Some(samples[k].0);
    }
    let (x0, f0) = samples[k - 1];
    let (x1, f1) = samples[k];
    let (_, f2) = samples[k + 1];
    let h = x1 - x0;
    let den = f0 - 2.0 * f1 + f2;
    if den <= 0.0 {
        return Some(x1);
    }
    Some(x1 + 0.5 * h * (f0 - f2) / den)
}

/// A 360° half-acquisition scan seen as the stitched 180° scan: angles in
/// [θ₀, θ₀ + π), rows of [`Stitch::width`] columns with the axis at
/// [`Stitch::center`]. Rows are read through the inner source's
/// preprocessing, then stitched.
pub struct HalfAcquisitionSource {
    inner: Box<dyn ProjectionSource>,
    stitch: Stitch,
    pairs: Vec<Pair>,
    angles: Vec<f32>,
    shape: [usize; 3],
}

impl HalfAcquisitionSource {
    /// Wraps `inner`, whose projections have `angles` (radians, one per
    /// projection, covering 360°), with the axis at `axis` (the inner
    /// source's columns).
    pub fn new(inner: Box<dyn ProjectionSource>, angles: &[f32], axis: f64) -> Result<Self> {
        let [na, nr, nc] = inner.shape();
        let named = |e: IoError| {
            let m = e.to_string();
            IoError::Parameter(format!(
                "{}: {}",
                inner.path().display(),
                m.trim_start_matches("invalid parameter: ")
            ))
        };
        if angles.len() != na {
            return Err(named(IoError::Parameter(format!(
                "{} angles for {na} projections",
                angles.len()
            ))));
        }
        let stitch = Stitch::new(axis, nc).map_err(named)?;
        let pairs = pair_opposite(angles).map_err(named)?;
        let angles: Vec<f32> = pairs.iter().map(|p| angles[p.index]).collect();
        let shape = [pairs.len(), nr, stitch.width()];
        Ok(Self {
            inner,
            stitch,
            pairs,
            angles,
            shape,
        })
    }

    /// The stitch (axis, widths).
    pub fn stitch(&self) -> &Stitch {
        &self.stitch
    }
}

impl ProjectionSource for HalfAcquisitionSource {
    crate::source::wrapped_source_accessors!();

    fn row_chunk(&self) -> Option<usize> {
        self.inner.row_chunk()
    }

    fn reads_raw(&self) -> bool {
        false
    }

    /// The inner source's projections are stitched after preprocessing
    /// (flats and darks apply to the detector, not to the stitched row):
    /// only [`ProjectionSource::read_rows`] reads this source.
    fn read_raw(&self, _rows: Range<usize>) -> Result<RawSlab> {
        Err(IoError::Parameter(format!(
            "{}: a half-acquisition scan is stitched after preprocessing; read it with read_rows",
            self.path().display()
        )))
    }

    fn read_rows(&self, rows: Range<usize>, pre: &Preprocess) -> Result<Array3<f32>> {
        check_rows(self.path(), &rows, self.shape[1])?;
        let p = self.inner.read_rows(rows.clone(), pre)?;
        let mut out = Array3::<f32>::zeros((self.shape[0], rows.len(), self.shape[2]));
        let mut out_sinos = out.view_mut().permuted_axes([1, 0, 2]);
        let in_sinos = p.view().permuted_axes([1, 0, 2]);
        // (The inner source is Send, not Sync: the workers see the stitch
        // and the pairs only.)
        let (stitch, pairs) = (self.stitch, &self.pairs);
        out_sinos
            .axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(in_sinos.axis_iter(Axis(0)).into_par_iter())
            .for_each(|(mut o, s)| o.assign(&stitch.stitch(s, pairs)));
        Ok(out)
    }

    fn extra_bytes_per_row(&self) -> usize {
        // The 360° rows as read, before stitching.
        let [na, _, nc] = self.inner.shape();
        4usize.saturating_mul(na).saturating_mul(nc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (i as f64 * 2.0 * std::f64::consts::PI / n as f64) as f32)
            .collect()
    }

    #[test]
    fn pairs_are_half_a_turn_apart() {
        let p = pair_opposite(&uniform(40)).unwrap();
        assert_eq!(p.len(), 20);
        assert_eq!(p[3].index, 3);
        assert_eq!(p[3].opposite[0], (23, 1.0));
        // An odd count: opposites fall halfway between two projections,
        // the last one wrapping around the turn.
        let p = pair_opposite(&uniform(41)).unwrap();
        assert_eq!(p.len(), 21);
        let [(a, wa), (b, wb)] = p[20].opposite;
        assert_eq!((a, b), (40, 0));
        assert!((wa - 0.5).abs() < 1e-3 && (wb - 0.5).abs() < 1e-3);
        // 180° is refused.
        let half: Vec<f32> = uniform(40).iter().map(|a| a / 2.0).collect();
        assert!(pair_opposite(&half)
            .unwrap_err()
            .to_string()
            .contains("360°"));
    }

    #[test]
    fn stitch_geometry_left_and_right() {
        // Axis at column 2 of 10: the mirrored half covers 2·2 − 9 = −5 to
        // 4, adding columns −5..−1.
        let s = Stitch::new(2.0, 10).unwrap();
        assert!(s.axis_left());
        assert_eq!((s.first(), s.width(), s.center()), (-5, 15, 7.0));
        assert_eq!(s.overlap(), 4.0);
        let r = Stitch::new(7.0, 10).unwrap();
        assert!(!r.axis_left());
        assert_eq!((r.first(), r.width(), r.center()), (0, 15, 7.0));
        // A row and its mirror image about the axis stitch to the wide row.
        for st in [s, r, Stitch::new(2.5, 10).unwrap()] {
            // p(θ)[x] = f(x); p(θ+π, s) = p(θ, −s) about the axis, so
            // p(θ+π)[k] = f(2c − k).
            let f = |x: f64| (0.3 * (x - st.axis)).cos() as f32 + 0.1 * (x - st.axis) as f32;
            let top = ndarray::Array1::from_shape_fn(10, |k| f(k as f64));
            let opp = ndarray::Array1::from_shape_fn(10, |k| f(2.0 * st.axis - k as f64));
            let mut out = ndarray::Array1::<f32>::zeros(st.width());
            st.stitch_row(top.view(), opp.view(), out.view_mut());
            for (j, &v) in out.iter().enumerate() {
                let x = (st.first() + j as i64) as f64;
                assert!((v - f(x)).abs() < 2e-3, "{st:?} x {x}: {v} vs {}", f(x));
            }
        }
    }
}
