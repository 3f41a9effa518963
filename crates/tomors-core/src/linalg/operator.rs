//! The linear-operator trait (a projector pair `A`, `B ≈ Aᵀ` over abstract
//! vectors) and the optional ray capability of ART-type methods.

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use super::batches::RayBatches;
use super::real::Real;
use super::vector::Vector;
use crate::error::{CoreError, Result};

/// A tomographic projector pair over abstract vectors: the forward
/// projection `A` from the domain (images, volumes) to the range
/// (sinograms, projections), and the back projection `B` (`Aᵀ` exactly
/// when [`is_matched`](Self::is_matched)) the other way.
///
/// **Blocks.** Every range-side method takes `angles`, a list of projection
/// indices (any subset, any order): it addresses the sub-operator `A_ℓ` of
/// that block of projections, and range vectors of a block have the rows of
/// those projections only ([`range_zeros`](Self::range_zeros)). A full
/// range vector is the block of all projections `0..n_projections()`, and
/// [`select`](Self::select) copies a block's rows out of it.
///
/// **Weights.** [`row_sums`](Self::row_sums), [`column_sums`](Self::column_sums)
/// and [`row_norms_sq`](Self::row_norms_sq) return vectors that are only
/// used as multipliers (see [`Vector`]); an implementation may make them
/// compact.
///
/// Implementations: every CPU [`Projector`](crate::iterative::Projector)
/// through [`StackOperator`](crate::iterative::StackOperator), the device
/// operators of `tomors-cuda`, the distributed operator of `tomors-mpi`,
/// the Python `Projector` object.
///
/// No `Send`/`Sync` bound (a device context or an MPI communicator need not
/// be thread-safe); the ray capability, which ART runs from several
/// threads, is `Sync`.
pub trait LinearOperator {
    /// Vectors of the domain (images / volume).
    type Domain: Vector;
    /// Vectors of the range (sinograms / projections).
    type Range: Vector<Elem = <Self::Domain as Vector>::Elem>;

    /// Short name for messages ("joseph", "cuda joseph", ...).
    fn name(&self) -> &str {
        "linear operator"
    }

    /// Number of projections of the geometry (the full range has this many
    /// blocks of one projection).
    fn n_projections(&self) -> usize;

    /// A zero domain vector.
    fn domain_zeros(&self) -> Result<Self::Domain>;

    /// A zero range vector of the block of projections `angles`.
    fn range_zeros(&self, angles: &[usize]) -> Result<Self::Range>;

    /// `y ← A_angles · x` (`y` a range vector of block `angles`,
    /// overwritten).
    ///
    /// Errors: vectors of the wrong shape, a projection index out of range,
    /// a device failure.
    fn forward(&self, x: &Self::Domain, angles: &[usize], y: &mut Self::Range) -> Result<()>;

    /// `x ← B_angles · y` (`y` a range vector of block `angles`; `x`
    /// overwritten).
    ///
    /// Errors: as [`forward`](Self::forward).
    fn backward(&self, y: &Self::Range, angles: &[usize], x: &mut Self::Domain) -> Result<()>;

    /// `out ←` the rows of projections `angles` of `y_full` (a full range
    /// vector), `out` a range vector of block `angles`.
    fn select_into(
        &self,
        y_full: &Self::Range,
        angles: &[usize],
        out: &mut Self::Range,
    ) -> Result<()>;

    /// A new vector holding the rows of projections `angles` of `y_full`
    /// (a full range vector or a full weight vector; the result has the
    /// same form, so selecting from a compact weight gives a compact
    /// weight).
    fn select(&self, y_full: &Self::Range, angles: &[usize]) -> Result<Self::Range> {
        let mut out = self.range_zeros(angles)?;
        self.select_into(y_full, angles, &mut out)?;
        Ok(out)
    }

    /// Whether `B = Aᵀ` exactly (up to rounding).
    fn is_matched(&self) -> bool;

    /// Row sums `A_angles · 1` (a weight of the range block `angles`).
    fn row_sums(&self, angles: &[usize]) -> Result<Self::Range> {
        let mut ones = self.domain_zeros()?;
        ones.fill(1.0)?;
        let mut out = self.range_zeros(angles)?;
        self.forward(&ones, angles, &mut out)?;
        Ok(out)
    }

    /// Column sums of the back projector `B_angles · 1` (a domain weight).
    fn column_sums(&self, angles: &[usize]) -> Result<Self::Domain> {
        let mut ones = self.range_zeros(angles)?;
        ones.fill(1.0)?;
        let mut out = self.domain_zeros()?;
        self.backward(&ones, angles, &mut out)?;
        Ok(out)
    }

    /// Squared 2-norms `‖a_i‖₂²` of the rows of `A` for the projections
    /// `angles` (a weight of the range block; accumulated in f64), for
    /// Cimmino weights.
    ///
    /// Errors: [`CoreError::Unsupported`] where the operator cannot compute
    /// them (the default).
    fn row_norms_sq(&self, angles: &[usize]) -> Result<Self::Range> {
        let _ = angles;
        Err(CoreError::Unsupported {
            backend: self.name().to_string(),
            operation: "row norms (Cimmino weights)".into(),
        })
    }

    /// The ray capability, for ART and the block-parallel method; `None`
    /// (the default) where the operator cannot enumerate the weights of a
    /// single ray, and the solver then reports those methods as
    /// unsupported.
    fn rays(&self) -> Option<&dyn RayAccess<Self::Domain, Self::Range>> {
        None
    }

    /// The ray capability in batches of rays with disjoint pixel sets
    /// ([`RayBatches`]), for ART and the block-parallel method on
    /// operators whose vectors are not in host memory (device operators);
    /// used where [`rays`](Self::rays) is `None`. `None` by default.
    fn ray_batches(&self) -> Option<&dyn RayBatches<Self::Domain, Self::Range>> {
        None
    }
}

/// One independent part of a problem as host memory: an image `x`
/// (flattened, `index = iy·nx + ix` as [`RayAccess::trace_ray`] counts) and
/// its full sinogram `b` (`[projection][bin]`). A stack of slices has one
/// part per slice.
pub struct RayPart<'a, T> {
    /// The image, updated in place.
    pub x: &'a mut [T],
    /// Its measured sinogram, all projections.
    pub b: ArrayView2<'a, T>,
}

/// Ray-by-ray access to an operator: the weights of single rows of `A`
/// and host access to the vectors, for ART (Kaczmarz) and the
/// block-parallel (string-averaging) method.
pub trait RayAccess<D: Vector, R: Vector<Elem = D::Elem>>: Sync {
    /// Detector bins (rays) per projection.
    fn n_bins(&self) -> usize;

    /// Calls `visit(index, weight)` for the non-zero entries of the row of
    /// `A` of bin `bin` of projection `angle` (`index` into a
    /// [`RayPart`]'s `x`). Does nothing for indices out of range.
    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, D::Elem));

    /// The independent parts of `x` (domain) and `b` (a full range vector)
    /// as host memory, paired.
    ///
    /// Errors: vectors of the wrong shape; [`CoreError::Unsupported`] where
    /// the vectors do not live in host memory.
    fn host_parts<'a>(&self, x: &'a mut D, b: &'a R) -> Result<Vec<RayPart<'a, D::Elem>>>;

    /// `‖a_i‖₂²` of the rays of the projections `angles`
    /// (`[angles.len()][n_bins]`), accumulated in f64 per ray.
    fn ray_norms_sq(&self, angles: &[usize]) -> Result<Array2<D::Elem>> {
        let nb = self.n_bins();
        let mut out = Array2::from_elem((angles.len(), nb), <D::Elem as Real>::ZERO);
        out.outer_iter_mut()
            .into_par_iter()
            .zip(angles.par_iter())
            .for_each(|(mut row, &a)| {
                for (k, o) in row.iter_mut().enumerate() {
                    let mut sum = 0.0f64;
                    self.trace_ray(a, k, &mut |_, w| sum += w.to_f64() * w.to_f64());
                    *o = <D::Elem as Real>::from_f64(sum);
                }
            });
        Ok(out)
    }
}
