//! The `Backend` trait: the few heavy operations every algorithm needs.
//!
//! Algorithms (FBP, iterative methods) are written once over this trait; the
//! CPU backend in [`crate::cpu`] is the reference implementation of each
//! operation, and other backends (CUDA) are tested against it.

use ndarray::{ArrayView3, ArrayViewMut3};

use crate::error::{CoreError, Result};
use crate::filter::FilterSpec;
use crate::fourier::FourierOptions;
use crate::geometry::{ParallelGeometry, SliceGrid};

/// How a back projector reads a detector row at a non-integer position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Interpolation {
    /// The nearest bin: bin `floor(u + 0.5)` (the texture unit's rule).
    Nearest,
    /// Linear interpolation between the two neighbouring bins.
    #[default]
    Linear,
}

impl std::str::FromStr for Interpolation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "nearest" | "nn" => Ok(Self::Nearest),
            "linear" | "lin" => Ok(Self::Linear),
            _ => Err(format!(
                "unknown interpolation '{s}' (use nearest or linear)"
            )),
        }
    }
}

impl std::fmt::Display for Interpolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Nearest => "nearest",
            Self::Linear => "linear",
        })
    }
}

/// A compute backend for parallel-beam reconstruction.
///
/// Arrays are C-ordered `ndarray`s: sinograms `[slice][angle][bin]`, slices
/// `[slice][y][x]`. Detector values outside the detector are zero.
pub trait Backend: Send + Sync {
    /// Short name for logs and errors ("cpu", "cuda:0 NVIDIA H100", ...).
    fn name(&self) -> String;

    /// Filters every detector row of `sinograms` in place with the FBP
    /// filter `filter` for detector bins of width `bin_width`
    /// (see [`FilterSpec::frequency_response`]).
    fn filter(
        &self,
        sinograms: ArrayViewMut3<'_, f32>,
        filter: &FilterSpec,
        bin_width: f32,
    ) -> Result<()>;

    /// Back projects `sinograms` (`[slice][angle][bin]`) into `out`
    /// (`[slice][y][x]`), overwriting it with
    /// `scale · Σ_θ p_θ(x cos θ + y sin θ)`.
    fn backproject(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        interpolation: Interpolation,
        scale: f32,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()>;

    /// Filtered back projection of one slab: filters a copy of `sinograms`
    /// and back projects it with the FBP weight
    /// ([`ParallelGeometry::fbp_weight`]) into `out`. Backends that can keep
    /// data resident or overlap transfers with compute override this.
    fn fbp(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        filter: &FilterSpec,
        interpolation: Interpolation,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        let mut filtered = sinograms.to_owned();
        self.filter(filtered.view_mut(), filter, geometry.bin_width())?;
        self.backproject(
            filtered.view(),
            geometry,
            grid,
            interpolation,
            geometry.fbp_weight(),
            out,
        )
    }

    /// Filtered back projection of one slab by direct Fourier
    /// reconstruction (gridding, [`crate::fourier`]) into `out`
    /// (`[slice][y][x]`). The CPU method unless a backend has its own.
    fn fourier(
        &self,
        sinograms: ArrayView3<'_, f32>,
        geometry: &ParallelGeometry,
        grid: &SliceGrid,
        options: &FourierOptions,
        out: ArrayViewMut3<'_, f32>,
    ) -> Result<()> {
        crate::fourier::fourier_into(sinograms, geometry, grid, options, out)
    }
}

/// Checks that sinograms of shape `sinograms` (`[slice][angle][bin]`) fit
/// the geometry, and that an output of shape `out` (`[slice][y][x]`) fits
/// them and the grid: the shape contract of [`Backend::backproject`], for
/// every backend to check the same way.
pub fn check_backprojection_shapes(
    sinograms: (usize, usize, usize),
    out: (usize, usize, usize),
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
) -> Result<()> {
    let (ns, na, nb) = sinograms;
    if na != geometry.n_angles() || nb != geometry.n_bins() {
        return Err(CoreError::Shape(format!(
            "sinograms have {na} angles × {nb} bins, the geometry {} × {}",
            geometry.n_angles(),
            geometry.n_bins()
        )));
    }
    if out != (ns, grid.ny, grid.nx) {
        return Err(CoreError::Shape(format!(
            "output is {out:?}, expected {:?}",
            (ns, grid.ny, grid.nx)
        )));
    }
    Ok(())
}
