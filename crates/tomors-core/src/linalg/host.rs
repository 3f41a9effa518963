//! [`Vector`] for host arrays: `ndarray::Array3<T>` stacks (`[slice][y][x]`
//! images, `[slice][angle][bin]` sinograms), parallel with rayon.
//!
//! - Element-wise operations run over chunks of at most [`CHUNK`] elements
//!   of one slice, in parallel; their results do not depend on the split.
//! - Reductions (`dot`, `norm_sq`) sum each chunk sequentially in f64 and
//!   then the chunk sums in order, so they give the same value for any
//!   number of threads.
//! - **Broadcast weights**: an array of one slice (`[1][m][n]`) used as the
//!   multiplier of [`Vector::mul_assign`], [`Vector::residual_weighted`] or
//!   [`Vector::update_clipped`] on a stack `[s][m][n]` applies to every
//!   slice. This is how [`StackOperator`](crate::iterative::StackOperator)
//!   keeps the SIRT weights at the size of one slice.
//!
//! Arrays not in standard (C) layout are made standard on first mutable use.

use std::borrow::Cow;

use ndarray::Array3;
use rayon::prelude::*;

use super::real::Real;
use super::vector::Vector;
use crate::error::{CoreError, Result};

/// Elements per parallel work item (and per sequential partial sum).
pub const CHUNK: usize = 1 << 14;

/// Makes `a` standard layout and returns its elements.
fn flat_mut<T: Real>(a: &mut Array3<T>) -> &mut [T] {
    if !a.is_standard_layout() {
        *a = a.as_standard_layout().into_owned();
    }
    a.as_slice_mut().expect("standard layout")
}

/// The elements of `a` in logical (C) order, borrowed when possible.
fn flat<T: Real>(a: &Array3<T>) -> Cow<'_, [T]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

/// How an operand lines up with the vector it acts on.
#[derive(Clone, Copy)]
enum Fit {
    /// Same shape: element `i` with element `i`.
    Same,
    /// One slice broadcast over the stack: element `i` with `i mod slice`.
    Broadcast,
}

fn fit<T>(x: &Array3<T>, o: &Array3<T>, what: &str) -> Result<Fit> {
    let (xd, od) = (x.dim(), o.dim());
    if xd == od {
        Ok(Fit::Same)
    } else if od.0 == 1 && (od.1, od.2) == (xd.1, xd.2) {
        Ok(Fit::Broadcast)
    } else {
        Err(CoreError::Shape(format!(
            "{what}: vector is {xd:?}, operand {od:?}"
        )))
    }
}

/// The part of operand `o` (flattened) that lines up with the chunk at
/// `offset` (within slice `s` of length `plen`) of the vector.
#[inline]
fn piece<T>(o: &[T], fit: Fit, s: usize, plen: usize, off: usize, n: usize) -> &[T] {
    match fit {
        Fit::Same => &o[s * plen + off..s * plen + off + n],
        Fit::Broadcast => &o[off..off + n],
    }
}

/// Runs `f(chunk, s, offset)` over the chunks of the slices of `x`
/// (`plen` elements per slice), in parallel.
fn chunks_mut<T: Real, F>(x: &mut [T], plen: usize, f: F)
where
    F: Fn(&mut [T], usize, usize) + Sync + Send,
{
    if plen == 0 {
        return;
    }
    x.par_chunks_mut(plen).enumerate().for_each(|(s, xs)| {
        xs.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(c, xc)| f(xc, s, c * CHUNK))
    });
}

/// Sums `f(chunk, s, offset)` over the chunks of the slices of `x`,
/// reproducibly.
fn chunks_sum<T: Real, F>(x: &[T], plen: usize, f: F) -> f64
where
    F: Fn(&[T], usize, usize) -> f64 + Sync + Send,
{
    if plen == 0 {
        return 0.0;
    }
    let parts: Vec<f64> = x
        .par_chunks(plen)
        .enumerate()
        .flat_map_iter(|(s, xs)| {
            xs.chunks(CHUNK)
                .enumerate()
                .map(move |(c, xc)| (xc, s, c * CHUNK))
        })
        .map(|(xc, s, off)| f(xc, s, off))
        .collect();
    parts.iter().sum()
}

fn slice_len<T>(a: &Array3<T>) -> usize {
    a.dim().1 * a.dim().2
}

/// An error unless `x` has the shape of the vector `a`: "`op`: vector is
/// …, `what` …".
fn same_dim<T>(a: &Array3<T>, x: &Array3<T>, op: &str, what: &str) -> Result<()> {
    if a.dim() != x.dim() {
        return Err(CoreError::Shape(format!(
            "{op}: vector is {:?}, {what} {:?}",
            a.dim(),
            x.dim()
        )));
    }
    Ok(())
}

/// One chunk of the weighted residual: `x ← (b − x)·w` (`w` absent: 1);
/// returns ‖b − x‖² of the chunk (dead code where the caller drops it).
#[inline(always)]
fn residual_chunk<T: Real>(xc: &mut [T], bc: &[T], wc: Option<&[T]>) -> f64 {
    let mut r2 = 0.0f64;
    match wc {
        Some(wc) => {
            for ((v, &b), &w) in xc.iter_mut().zip(bc).zip(wc) {
                let d = b - *v;
                r2 += d.to_f64() * d.to_f64();
                *v = d * w;
            }
        }
        None => {
            for (v, &b) in xc.iter_mut().zip(bc) {
                let d = b - *v;
                r2 += d.to_f64() * d.to_f64();
                *v = d;
            }
        }
    }
    r2
}

#[inline(always)]
fn clamp<T: Real>(mut v: T, lo: Option<T>, hi: Option<T>) -> T {
    if let Some(lo) = lo {
        if v < lo {
            v = lo;
        }
    }
    if let Some(hi) = hi {
        if v > hi {
            v = hi;
        }
    }
    v
}

impl<T: Real> Vector for Array3<T> {
    type Elem = T;

    fn len(&self) -> usize {
        ndarray::ArrayBase::len(self)
    }

    fn zeros_like(&self) -> Result<Self> {
        Ok(Array3::from_elem(self.dim(), T::ZERO))
    }

    fn fill(&mut self, v: f64) -> Result<()> {
        let v = T::from_f64(v);
        let plen = slice_len(self);
        chunks_mut(flat_mut(self), plen, |xc, _, _| xc.fill(v));
        Ok(())
    }

    fn copy_from(&mut self, x: &Self) -> Result<()> {
        same_dim(self, x, "copy", "source")?;
        let plen = slice_len(self);
        let o = flat(x);
        chunks_mut(flat_mut(self), plen, |xc, s, off| {
            xc.copy_from_slice(piece(&o, Fit::Same, s, plen, off, xc.len()))
        });
        Ok(())
    }

    fn scale(&mut self, a: f64) -> Result<()> {
        let a = T::from_f64(a);
        let plen = slice_len(self);
        chunks_mut(flat_mut(self), plen, |xc, _, _| {
            xc.iter_mut().for_each(|v| *v = a * *v)
        });
        Ok(())
    }

    fn axpy(&mut self, a: f64, x: &Self) -> Result<()> {
        let f = fit(self, x, "axpy")?;
        let a = T::from_f64(a);
        let plen = slice_len(self);
        let o = flat(x);
        chunks_mut(flat_mut(self), plen, |xc, s, off| {
            let oc = piece(&o, f, s, plen, off, xc.len());
            xc.iter_mut().zip(oc).for_each(|(v, &w)| *v += a * w)
        });
        Ok(())
    }

    fn mul_assign(&mut self, x: &Self) -> Result<()> {
        let f = fit(self, x, "element-wise product")?;
        let plen = slice_len(self);
        let o = flat(x);
        chunks_mut(flat_mut(self), plen, |xc, s, off| {
            let oc = piece(&o, f, s, plen, off, xc.len());
            xc.iter_mut().zip(oc).for_each(|(v, &w)| *v *= w)
        });
        Ok(())
    }

    fn invert_floored(&mut self, rel_floor: f64) -> Result<()> {
        let max = self.iter().fold(0.0f64, |m, v| m.max(v.to_f64()));
        let floor = max * rel_floor;
        let plen = slice_len(self);
        chunks_mut(flat_mut(self), plen, |xc, _, _| {
            xc.iter_mut().for_each(|v| {
                let d = v.to_f64();
                *v = T::from_f64(if d > floor && d > 0.0 { 1.0 / d } else { 0.0 });
            })
        });
        Ok(())
    }

    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> Result<()> {
        if min.is_none() && max.is_none() {
            return Ok(());
        }
        let (lo, hi) = (min.map(T::from_f64), max.map(T::from_f64));
        let plen = slice_len(self);
        chunks_mut(flat_mut(self), plen, |xc, _, _| {
            xc.iter_mut().for_each(|v| *v = clamp(*v, lo, hi))
        });
        Ok(())
    }

    fn dot(&self, x: &Self) -> Result<f64> {
        same_dim(self, x, "dot", "other")?;
        let plen = slice_len(self);
        let (a, o) = (flat(self), flat(x));
        Ok(chunks_sum(&a, plen, |xc, s, off| {
            let oc = piece(&o, Fit::Same, s, plen, off, xc.len());
            xc.iter()
                .zip(oc)
                .map(|(&u, &v)| u.to_f64() * v.to_f64())
                .sum()
        }))
    }

    fn norm_sq(&self) -> Result<f64> {
        let plen = slice_len(self);
        Ok(chunks_sum(&flat(self), plen, |xc, _, _| {
            xc.iter().map(|&u| u.to_f64() * u.to_f64()).sum()
        }))
    }

    fn all_finite(&self) -> Result<bool> {
        Ok(flat(self).par_iter().all(|v| v.is_finite()))
    }

    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> Result<()> {
        same_dim(self, b, "residual", "data")?;
        let fw = w.map(|w| fit(self, w, "residual weights")).transpose()?;
        let plen = slice_len(self);
        let bo = flat(b);
        let wo = w.map(flat);
        chunks_mut(flat_mut(self), plen, |xc, s, off| {
            let bc = piece(&bo, Fit::Same, s, plen, off, xc.len());
            let wc = match (&wo, fw) {
                (Some(wo), Some(f)) => Some(piece(wo, f, s, plen, off, xc.len())),
                _ => None,
            };
            residual_chunk(xc, bc, wc);
        });
        Ok(())
    }

    fn residual_weighted_norm_sq(&mut self, b: &Self, w: Option<&Self>) -> Result<f64> {
        same_dim(self, b, "residual", "data")?;
        let fw = w.map(|w| fit(self, w, "residual weights")).transpose()?;
        let plen = slice_len(self);
        let bo = flat(b);
        let wo = w.map(flat);
        let xs = flat_mut(self);
        if plen == 0 {
            return Ok(0.0);
        }
        // Chunk partial sums in a fixed order, as in `norm_sq`.
        let parts: Vec<f64> = xs
            .par_chunks_mut(plen)
            .enumerate()
            .flat_map(|(s, xs)| {
                xs.par_chunks_mut(CHUNK)
                    .enumerate()
                    .map(move |(c, xc)| (xc, s, c * CHUNK))
            })
            .map(|(xc, s, off)| {
                let bc = piece(&bo, Fit::Same, s, plen, off, xc.len());
                let wc = match (&wo, fw) {
                    (Some(wo), Some(f)) => Some(piece(wo, f, s, plen, off, xc.len())),
                    _ => None,
                };
                residual_chunk(xc, bc, wc)
            })
            .collect();
        Ok(parts.iter().sum())
    }

    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Result<()> {
        same_dim(self, g, "update", "step")?;
        let ft = t.map(|t| fit(self, t, "update weights")).transpose()?;
        let l = T::from_f64(lambda);
        let (lo, hi) = (min.map(T::from_f64), max.map(T::from_f64));
        let plen = slice_len(self);
        let go = flat(g);
        let to = t.map(flat);
        chunks_mut(flat_mut(self), plen, |xc, s, off| {
            let gc = piece(&go, Fit::Same, s, plen, off, xc.len());
            match (&to, ft) {
                (Some(to), Some(f)) => {
                    let tc = piece(to, f, s, plen, off, xc.len());
                    for ((x, &g), &t) in xc.iter_mut().zip(gc).zip(tc) {
                        *x = clamp(*x + l * t * g, lo, hi);
                    }
                }
                _ => xc
                    .iter_mut()
                    .zip(gc)
                    .for_each(|(x, &g)| *x = clamp(*x + l * g, lo, hi)),
            }
        });
        Ok(())
    }
}
