//! The vectors of [`CudaConeSlabs`](super::CudaConeSlabs): the volume as
//! z-slabs over devices ([`SlabsVec`]) and the projections replicated on
//! every device ([`ReplicaVec`]).

use tomors_core::linalg::Vector;
use tomors_core::Result as CoreResult;

use crate::iterative::device::DeviceVec;

/// A volume split into z-slabs over devices: part `s` is slab `s` (on
/// device `s`), a vector of the whole volume. Element-wise operations act
/// on every slab; reductions (dot products, norms, the maximum that floors
/// the weights, finiteness) are taken over all slabs.
pub struct SlabsVec {
    pub(super) parts: Vec<DeviceVec>,
}

impl SlabsVec {
    /// The slabs, in z order (one per device).
    pub fn parts(&self) -> &[DeviceVec] {
        &self.parts
    }

    /// The slabs, mutable.
    pub fn parts_mut(&mut self) -> &mut [DeviceVec] {
        &mut self.parts
    }

    /// Makes a slab vector of `parts` (in z order, one per device of the
    /// operator that uses it).
    pub fn from_parts(parts: Vec<DeviceVec>) -> Self {
        Self { parts }
    }

    fn each(&mut self, f: impl Fn(&mut DeviceVec) -> CoreResult<()>) -> CoreResult<()> {
        self.parts.iter_mut().try_for_each(f)
    }

    fn each2(
        &mut self,
        o: &Self,
        f: impl Fn(&mut DeviceVec, &DeviceVec) -> CoreResult<()>,
    ) -> CoreResult<()> {
        check_parts(self.parts.len(), o.parts.len())?;
        self.parts
            .iter_mut()
            .zip(&o.parts)
            .try_for_each(|(a, b)| f(a, b))
    }
}

fn check_parts(a: usize, b: usize) -> CoreResult<()> {
    if a != b {
        return Err(tomors_core::CoreError::Shape(format!(
            "a vector over {a} devices with one over {b}"
        )));
    }
    Ok(())
}

impl Vector for SlabsVec {
    type Elem = f32;

    fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }
    fn zeros_like(&self) -> CoreResult<Self> {
        let parts = self
            .parts
            .iter()
            .map(|p| p.zeros_like())
            .collect::<CoreResult<_>>()?;
        Ok(Self { parts })
    }
    fn fill(&mut self, v: f64) -> CoreResult<()> {
        self.each(|p| p.fill(v))
    }
    fn copy_from(&mut self, x: &Self) -> CoreResult<()> {
        self.each2(x, |a, b| a.copy_from(b))
    }
    fn scale(&mut self, a: f64) -> CoreResult<()> {
        self.each(|p| p.scale(a))
    }
    fn axpy(&mut self, a: f64, x: &Self) -> CoreResult<()> {
        self.each2(x, |p, q| p.axpy(a, q))
    }
    fn mul_assign(&mut self, x: &Self) -> CoreResult<()> {
        self.each2(x, |p, q| p.mul_assign(q))
    }
    /// The floor from the maximum over every slab, so the slabs are
    /// floored as the whole volume is.
    fn invert_floored(&mut self, rel_floor: f64) -> CoreResult<()> {
        let mut m = 0.0f64;
        for p in &self.parts {
            m = m.max(p.max_value()?);
        }
        let floor = m * rel_floor;
        self.each(|p| Ok(p.invert_above(floor)?))
    }
    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> CoreResult<()> {
        self.each(|p| p.clip(min, max))
    }
    fn dot(&self, x: &Self) -> CoreResult<f64> {
        check_parts(self.parts.len(), x.parts.len())?;
        let mut s = 0.0;
        for (a, b) in self.parts.iter().zip(&x.parts) {
            s += a.dot(b)?;
        }
        Ok(s)
    }
    fn norm_sq(&self) -> CoreResult<f64> {
        let mut s = 0.0;
        for p in &self.parts {
            s += p.norm_sq()?;
        }
        Ok(s)
    }
    fn all_finite(&self) -> CoreResult<bool> {
        for p in &self.parts {
            if !p.all_finite()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<()> {
        check_parts(self.parts.len(), b.parts.len())?;
        for (s, p) in self.parts.iter_mut().enumerate() {
            p.residual_weighted(&b.parts[s], w.map(|w| &w.parts[s]))?;
        }
        Ok(())
    }
    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> CoreResult<()> {
        check_parts(self.parts.len(), g.parts.len())?;
        for (s, p) in self.parts.iter_mut().enumerate() {
            p.update_clipped(lambda, &g.parts[s], t.map(|t| &t.parts[s]), min, max)?;
        }
        Ok(())
    }
}

/// Projections replicated on every device: part `s` (on device `s`) holds
/// the whole vector, the same on every device. Element-wise operations act
/// on every copy (so the copies stay equal); reductions read the first.
pub struct ReplicaVec {
    pub(super) parts: Vec<DeviceVec>,
}

impl ReplicaVec {
    /// The copies (one per device).
    pub fn parts(&self) -> &[DeviceVec] {
        &self.parts
    }

    /// Makes a replicated vector of `parts` (equal copies, one per device of
    /// the operator that uses it).
    pub fn from_parts(parts: Vec<DeviceVec>) -> Self {
        Self { parts }
    }

    fn each(&mut self, f: impl Fn(&mut DeviceVec) -> CoreResult<()>) -> CoreResult<()> {
        self.parts.iter_mut().try_for_each(f)
    }

    fn each2(
        &mut self,
        o: &Self,
        f: impl Fn(&mut DeviceVec, &DeviceVec) -> CoreResult<()>,
    ) -> CoreResult<()> {
        check_parts(self.parts.len(), o.parts.len())?;
        self.parts
            .iter_mut()
            .zip(&o.parts)
            .try_for_each(|(a, b)| f(a, b))
    }
}

impl Vector for ReplicaVec {
    type Elem = f32;

    fn len(&self) -> usize {
        self.parts[0].len()
    }
    fn zeros_like(&self) -> CoreResult<Self> {
        let parts = self
            .parts
            .iter()
            .map(|p| p.zeros_like())
            .collect::<CoreResult<_>>()?;
        Ok(Self { parts })
    }
    fn fill(&mut self, v: f64) -> CoreResult<()> {
        self.each(|p| p.fill(v))
    }
    fn copy_from(&mut self, x: &Self) -> CoreResult<()> {
        self.each2(x, |a, b| a.copy_from(b))
    }
    fn scale(&mut self, a: f64) -> CoreResult<()> {
        self.each(|p| p.scale(a))
    }
    fn axpy(&mut self, a: f64, x: &Self) -> CoreResult<()> {
        self.each2(x, |p, q| p.axpy(a, q))
    }
    fn mul_assign(&mut self, x: &Self) -> CoreResult<()> {
        self.each2(x, |p, q| p.mul_assign(q))
    }
    fn invert_floored(&mut self, rel_floor: f64) -> CoreResult<()> {
        // Equal copies have equal maxima: each is floored alike.
        self.each(|p| p.invert_floored(rel_floor))
    }
    fn clip(&mut self, min: Option<f64>, max: Option<f64>) -> CoreResult<()> {
        self.each(|p| p.clip(min, max))
    }
    fn dot(&self, x: &Self) -> CoreResult<f64> {
        check_parts(self.parts.len(), x.parts.len())?;
        self.parts[0].dot(&x.parts[0])
    }
    fn norm_sq(&self) -> CoreResult<f64> {
        self.parts[0].norm_sq()
    }
    fn all_finite(&self) -> CoreResult<bool> {
        self.parts[0].all_finite()
    }
    fn residual_weighted(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<()> {
        check_parts(self.parts.len(), b.parts.len())?;
        for (s, p) in self.parts.iter_mut().enumerate() {
            p.residual_weighted(&b.parts[s], w.map(|w| &w.parts[s]))?;
        }
        Ok(())
    }
    fn residual_weighted_norm_sq(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<f64> {
        check_parts(self.parts.len(), b.parts.len())?;
        // The other copies first (queued, no wait), then the first copy
        // with its norm (waits for its device only).
        for s in 1..self.parts.len() {
            self.parts[s].residual_weighted(&b.parts[s], w.map(|w| &w.parts[s]))?;
        }
        self.parts[0].residual_weighted_norm_sq(&b.parts[0], w.map(|w| &w.parts[0]))
    }
    fn update_clipped(
        &mut self,
        lambda: f64,
        g: &Self,
        t: Option<&Self>,
        min: Option<f64>,
        max: Option<f64>,
    ) -> CoreResult<()> {
        check_parts(self.parts.len(), g.parts.len())?;
        for (s, p) in self.parts.iter_mut().enumerate() {
            p.update_clipped(lambda, &g.parts[s], t.map(|t| &t.parts[s]), min, max)?;
        }
        Ok(())
    }
}
