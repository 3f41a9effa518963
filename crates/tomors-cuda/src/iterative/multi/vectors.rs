//! The vectors of [`CudaConeSlabs`](super::CudaConeSlabs): one
//! [`DeviceVec`] per device ([`PartsVec`]), either the volume as z-slabs
//! over the devices ([`SlabsVec`]) or the projections replicated on every
//! device ([`ReplicaVec`]).

use std::marker::PhantomData;

use tomors_core::linalg::Vector;
use tomors_core::Result as CoreResult;

use crate::iterative::device::DeviceVec;

/// How the parts of a [`PartsVec`] make up the whole vector.
pub trait Spread {
    /// `true`: each part holds the whole vector, the same on every device,
    /// and reductions read the first part; `false`: the parts are disjoint
    /// pieces of the vector, and reductions are taken over all of them.
    const COPIES: bool;
}

/// The parts are z-slabs of the volume: part `s` is slab `s`.
pub struct Slabs;

impl Spread for Slabs {
    const COPIES: bool = false;
}

/// The parts are equal copies of the whole vector.
pub struct Copies;

impl Spread for Copies {
    const COPIES: bool = true;
}

/// A vector held as one part per device (part `s` on device `s`), the
/// parts making up the whole vector as `S` says. Element-wise operations
/// act on every part (so copies stay equal); reductions (dot products,
/// norms, the maximum that floors the weights, finiteness) are taken over
/// the slabs, or read the first copy.
pub struct PartsVec<S> {
    pub(super) parts: Vec<DeviceVec>,
    spread: PhantomData<S>,
}

/// A volume split into z-slabs over devices: part `s` is slab `s` (on
/// device `s`), a vector of the whole volume.
pub type SlabsVec = PartsVec<Slabs>;

/// Projections replicated on every device: part `s` (on device `s`) holds
/// the whole vector, the same on every device.
pub type ReplicaVec = PartsVec<Copies>;

impl<S: Spread> PartsVec<S> {
    /// Makes a vector of `parts` (slabs in z order, or equal copies; one
    /// per device of the operator that uses it).
    pub fn from_parts(parts: Vec<DeviceVec>) -> Self {
        Self {
            parts,
            spread: PhantomData,
        }
    }

    /// The parts (one per device).
    pub fn parts(&self) -> &[DeviceVec] {
        &self.parts
    }

    /// The parts, mutable.
    pub fn parts_mut(&mut self) -> &mut [DeviceVec] {
        &mut self.parts
    }

    /// The parts reductions read: every slab, or the first copy.
    fn reduced(&self) -> &[DeviceVec] {
        let n = if S::COPIES { 1 } else { self.parts.len() };
        &self.parts[..n.min(self.parts.len())]
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

impl<S: Spread> Vector for PartsVec<S> {
    type Elem = f32;

    fn len(&self) -> usize {
        self.reduced().iter().map(|p| p.len()).sum()
    }
    fn zeros_like(&self) -> CoreResult<Self> {
        let parts = self
            .parts
            .iter()
            .map(|p| p.zeros_like())
            .collect::<CoreResult<_>>()?;
        Ok(Self::from_parts(parts))
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
    /// The floor from the maximum over every slab (equal copies have equal
    /// maxima), so each part is floored as the whole vector is.
    fn invert_floored(&mut self, rel_floor: f64) -> CoreResult<()> {
        let mut m = 0.0f64;
        for p in self.reduced() {
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
        for (a, b) in self.reduced().iter().zip(x.reduced()) {
            s += a.dot(b)?;
        }
        Ok(s)
    }
    fn norm_sq(&self) -> CoreResult<f64> {
        let mut s = 0.0;
        for p in self.reduced() {
            s += p.norm_sq()?;
        }
        Ok(s)
    }
    fn all_finite(&self) -> CoreResult<bool> {
        for p in self.reduced() {
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
    /// The parts reductions skip first (queued, no wait: the other copies),
    /// then the others, each fused with its norm (waits for its device).
    fn residual_weighted_norm_sq(&mut self, b: &Self, w: Option<&Self>) -> CoreResult<f64> {
        check_parts(self.parts.len(), b.parts.len())?;
        let n = self.reduced().len();
        for s in n..self.parts.len() {
            self.parts[s].residual_weighted(&b.parts[s], w.map(|w| &w.parts[s]))?;
        }
        let mut r2 = 0.0;
        for s in 0..n {
            r2 += self.parts[s].residual_weighted_norm_sq(&b.parts[s], w.map(|w| &w.parts[s]))?;
        }
        Ok(r2)
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
