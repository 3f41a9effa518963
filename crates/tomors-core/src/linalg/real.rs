//! The floating-point element types the iterative methods work in.

use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// An element type of images and sinograms: `f32` (production) or `f64`
/// (reference computations and adjointness tests).
///
/// Geometry (ray positions, interpolation weights) is always computed in
/// f64 and converted with [`Real::from_f64`]; sums of images run in `Self`.
pub trait Real:
    Copy
    + Send
    + Sync
    + Default
    + PartialOrd
    + Debug
    + Sum
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Conversion from f64 (rounding for f32).
    fn from_f64(v: f64) -> Self;
    /// Conversion to f64 (exact).
    fn to_f64(self) -> f64;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}
