//! The vector-operations trait: what an iterative algorithm does to images
//! and sinograms besides projecting them.

use super::real::Real;
use crate::error::Result;

/// An element of the domain (images, volumes) or range (sinograms,
/// projections) of a [`LinearOperator`](super::LinearOperator), with the
/// operations the iterative algorithms need.
///
/// Implementations: host arrays (`ndarray::Array3`, see
/// [`host`](super::host)), device buffers (`tomors-cuda`), distributed
/// slabs (`tomors-mpi`). Every operation that touches data returns a
/// [`Result`] so that device and distributed implementations can report
/// failures; scalars are passed as `f64` and converted to the element type
/// by the implementation (`Real::from_f64`).
///
/// **Weights.** The diagonal weights of the algorithms (`M`, `T`, row norms)
/// are vectors made by the operator ([`LinearOperator::row_sums`](super::LinearOperator::row_sums) and
/// friends). An implementation may store them in a compact form (the host
/// implementation keeps one slice and broadcasts it over the slices of a
/// stack); such a weight vector is only ever used as the `w`/`t`/`x`
/// argument of [`mul_assign`](Self::mul_assign),
/// [`residual_weighted`](Self::residual_weighted),
/// [`update_clipped`](Self::update_clipped), and as `self` of
/// [`invert_floored`](Self::invert_floored) and
/// [`LinearOperator::select`](super::LinearOperator::select).
///
/// **Reductions** (`dot`, `norm_sq`) accumulate in f64, in an order that
/// does not depend on the number of threads, so results are reproducible.
///
/// The fused operations have default implementations built from the basic
/// ones; a device implementation overrides them with one kernel each.
///
/// No `Send`/`Sync` bound: device buffers and distributed vectors need not
/// be shareable between threads (the solver never does).
pub trait Vector: Sized {
    /// The element type (`f32` or `f64`).
    type Elem: Real;

    /// Number of elements (of the whole vector, across devices or ranks).
    fn len(&self) -> usize;

    /// Whether the vector has no element.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new vector of the same shape (and placement), all zeros.
    fn zeros_like(&self) -> Result<Self>;

    /// `self ← v` everywhere.
    fn fill(&mut self, v: f64) -> Result<()>;

    /// `self ← x` (same shape).
    fn copy_from(&mut self, x: &Self) -> Result<()>;

    /// `self ← a·self`.
    fn scale(&mut self, a: f64) -> Result<()>;

    /// `self ← self + a·x`.
    fn axpy(&mut self, a: f64, x: &Self) -> Result<()>;

    /// `self ← self ⊙ x` (element-wise; `x` may be a weight vector).
    fn mul_assign(&mut self, x: &Self) -> Result<()>;

    /// `self ← 1/self` where `self > rel_floor · max(self)` (and `> 0`),
    /// else 0: the inverse of row/column sums or row norms, with rows or
    /// columns that are (almost) empty treated as absent. The inverse is
    /// computed in f64 and rounded once.
    fn invert_floored(&mut self, rel_floor: f64) -> Result<()>;

    /// `self ← min(max(self, min), max)`, each bound optional (NaN stays
    /// NaN).
    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> Result<()>;

    /// `⟨self, x⟩`, accumulated in f64.
    fn dot(&self, x: &Self) -> Result<f64>;

    /// `‖self‖₂²`, accumulated in f64.
    fn norm_sq(&self) -> Result<f64>;

    /// Whether no element is infinite or NaN.
    fn all_finite(&self) -> Result<bool>;

    /// Fused: `self ← w ⊙ (b − self)` (`w = None`: identity), i.e. the
    /// weighted residual when `self` holds `A·x`.
    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> Result<()> {
        self.scale(-1.0)?;
        self.axpy(1.0, b)?;
        if let Some(w) = w {
            self.mul_assign(w)?;
        }
        Ok(())
    }

    /// Fused: `self ← w ⊙ (b − self)` as [`residual_weighted`](Self::residual_weighted),
    /// returning `‖b − self‖₂²` of the unweighted residual (accumulated in
    /// f64): the residual norm and the next SIRT step's input in one pass.
    fn residual_weighted_norm_sq(&mut self, b: &Self, w: Option<&Self>) -> Result<f64> {
        self.residual_weighted(b, None)?;
        let r2 = self.norm_sq()?;
        if let Some(w) = w {
            self.mul_assign(w)?;
        }
        Ok(r2)
    }

    /// Fused: `self ← clip(self + λ·t ⊙ g, min, max)` (`t = None`:
    /// identity): the update of a SIRT-type step. Element-wise it computes
    /// `self + (λ·t)·g` in the element type.
    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Result<()> {
        match t {
            Some(t) => {
                let mut tg = g.zeros_like()?;
                tg.fill(lambda)?;
                tg.mul_assign(t)?;
                tg.mul_assign(g)?;
                self.axpy(1.0, &tg)?;
            }
            None => self.axpy(lambda, g)?,
        }
        if min.is_some() || max.is_some() {
            self.clip(min, max)?;
        }
        Ok(())
    }
}
