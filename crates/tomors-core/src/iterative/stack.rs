//! Every CPU [`Projector`] as a [`LinearOperator`] on host stacks.

use std::marker::PhantomData;

use ndarray::{Array3, Axis};

use super::operator::{check_angles, check_dim3, Projector};
use crate::error::{CoreError, Result};
use crate::linalg::{LinearOperator, RayAccess, RayPart, Real};

/// A [`Projector`] applied to a stack of `slices` slices: domain
/// `Array3<T>` `[slice][y][x]`, range `Array3<T>` `[slice][angle][bin]`
/// (a block of projections has `angles.len()` rows per slice).
///
/// Its weights (row sums, column sums, row norms) are one slice
/// (`[1][…][…]`) that the host [`Vector`](crate::linalg::Vector) broadcasts
/// over the stack, as parallel beam is slice-independent. Cone-beam
/// projectors are `Projector`s with one "slice" (the volume as
/// `[z·y][x]`), so they work through this adapter with `slices = 1`.
///
/// The ray capability ([`LinearOperator::rays`]) is always present: every
/// `Projector` traces single rays.
pub struct StackOperator<'p, T, P: ?Sized> {
    projector: &'p P,
    slices: usize,
    _t: PhantomData<fn() -> T>,
}

impl<'p, T: Real, P: Projector<T> + ?Sized> StackOperator<'p, T, P> {
    /// The operator of `projector` on stacks of `slices` slices.
    pub fn new(projector: &'p P, slices: usize) -> Self {
        Self {
            projector,
            slices,
            _t: PhantomData,
        }
    }

    /// The projector.
    pub fn projector(&self) -> &'p P {
        self.projector
    }

    /// Slices per stack.
    pub fn slices(&self) -> usize {
        self.slices
    }

    /// Checks that `y` is a range vector of `rows` projections.
    fn check_range(&self, y: &Array3<T>, rows: usize, what: &str) -> Result<()> {
        check_dim3(what, y.dim(), (self.slices, rows, self.projector.n_bins()))
    }
}

fn one_slice<T: Real>(a: ndarray::Array2<T>) -> Array3<T> {
    a.insert_axis(Axis(0))
}

impl<T: Real, P: Projector<T> + ?Sized> LinearOperator for StackOperator<'_, T, P> {
    type Domain = Array3<T>;
    type Range = Array3<T>;

    fn name(&self) -> &str {
        self.projector.name()
    }

    fn n_projections(&self) -> usize {
        self.projector.n_angles()
    }

    fn domain_zeros(&self) -> Result<Array3<T>> {
        let (ny, nx) = self.projector.image_dim();
        Ok(Array3::from_elem((self.slices, ny, nx), T::ZERO))
    }

    fn range_zeros(&self, angles: &[usize]) -> Result<Array3<T>> {
        Ok(Array3::from_elem(
            (self.slices, angles.len(), self.projector.n_bins()),
            T::ZERO,
        ))
    }

    fn forward(&self, x: &Array3<T>, angles: &[usize], y: &mut Array3<T>) -> Result<()> {
        self.projector.forward(x.view(), angles, y.view_mut())
    }

    fn backward(&self, y: &Array3<T>, angles: &[usize], x: &mut Array3<T>) -> Result<()> {
        self.projector.back(y.view(), angles, x.view_mut())
    }

    fn select_into(&self, y_full: &Array3<T>, angles: &[usize], out: &mut Array3<T>) -> Result<()> {
        let all = self.n_projections();
        check_angles(angles, all)?;
        self.check_range(y_full, all, "full sinograms")?;
        self.check_range(out, angles.len(), "block sinograms")?;
        for (j, &a) in angles.iter().enumerate() {
            out.index_axis_mut(Axis(1), j)
                .assign(&y_full.index_axis(Axis(1), a));
        }
        Ok(())
    }

    fn select(&self, y_full: &Array3<T>, angles: &[usize]) -> Result<Array3<T>> {
        let all = self.n_projections();
        check_angles(angles, all)?;
        let (_, na, nb) = y_full.dim();
        if na != all || nb != self.projector.n_bins() {
            return Err(CoreError::Shape(format!(
                "select: the vector has {na} × {nb} rows × bins, the operator {all} × {}",
                self.projector.n_bins()
            )));
        }
        Ok(y_full.select(Axis(1), angles))
    }

    fn is_matched(&self) -> bool {
        self.projector.is_matched()
    }

    fn row_sums(&self, angles: &[usize]) -> Result<Array3<T>> {
        self.projector.row_sums(angles).map(one_slice)
    }

    fn column_sums(&self, angles: &[usize]) -> Result<Array3<T>> {
        self.projector.column_sums(angles).map(one_slice)
    }

    fn row_norms_sq(&self, angles: &[usize]) -> Result<Array3<T>> {
        self.projector.row_norms_sq(angles).map(one_slice)
    }

    fn rays(&self) -> Option<&dyn RayAccess<Array3<T>, Array3<T>>> {
        Some(self)
    }
}

impl<T: Real, P: Projector<T> + ?Sized> RayAccess<Array3<T>, Array3<T>>
    for StackOperator<'_, T, P>
{
    fn n_bins(&self) -> usize {
        self.projector.n_bins()
    }

    fn trace_ray(&self, angle: usize, bin: usize, visit: &mut dyn FnMut(usize, T)) {
        self.projector.trace_ray(angle, bin, visit)
    }

    fn host_parts<'a>(
        &self,
        x: &'a mut Array3<T>,
        b: &'a Array3<T>,
    ) -> Result<Vec<RayPart<'a, T>>> {
        let (ny, nx) = self.projector.image_dim();
        check_dim3("volume", x.dim(), (self.slices, ny, nx))?;
        self.check_range(b, self.n_projections(), "sinograms")?;
        if !x.is_standard_layout() {
            *x = x.as_standard_layout().into_owned();
        }
        let xs = x.as_slice_mut().expect("standard layout");
        Ok(xs
            .chunks_mut((ny * nx).max(1))
            .zip(b.outer_iter())
            .map(|(x, b)| RayPart { x, b })
            .collect())
    }
}
