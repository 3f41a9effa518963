//! Direct Fourier reconstruction by gridding (`--method fourier`): the same
//! filtered back projection as [`crate::fbp`], computed in O(n² log n)
//! through the Fourier slice theorem, as TomoPy's gridrec (Dowd et al. 1999;
//! Marone & Stampanoni 2012).
//!
//! The direct FBP computes, for pixel (x, y),
//! `f = π/N · Σ_j q_j(c_j + (x cos θ_j + y sin θ_j)/b)` with
//! `q_j(u) = Σ_k H_k S_jk e^{2πi k u/P}` the filtered row (`S_jk` the
//! padded FFT of row j, `H_k` the filter response). Written out, this is a
//! sum of plane waves at the polar frequencies `k/(bP)·(cos θ_j, sin θ_j)`:
//! a type-1 non-uniform FFT, which the gridding method evaluates:
//!
//! 1. two real slices packed as one complex sinogram (real and imaginary
//!    parts; every step below is complex-linear, and the real response and
//!    symmetric sample set keep the two apart);
//! 2. each projection zero-padded to `P` (the FBP's [`padded_len`]), 1D FFT,
//!    multiplied by `π/N · H_k · e^{2πi k t_j/P}` (`t_j` the rotation axis in
//!    bins, plus the half-pixel shift of even grids): [`FourierPlan::factor`];
//!    the Nyquist bin `k = P/2`, which has no negative partner, is dropped;
//! 3. gathered onto a Cartesian grid of side `G ≥ σ·max(nx, ny)` (σ = 2) of
//!    spacing `1/(G h)`: each grid point sums the samples within the support
//!    of a separable "exponential of semicircle" kernel of width W cells
//!    ([`kernel::EsKernel`]), found by index (the angles within
//!    `asin(W/(√2 ρ))` of the point's direction, the radial samples within
//!    the square support), with periodic images so that every frequency
//!    wraps exactly as it does on the pixel lattice ([`gather`]);
//! 4. unnormalised inverse 2D FFT;
//! 5. divided by the kernel's Fourier transform `φ̂(m_x/G) φ̂(m_y/G)`
//!    (deapodization), cropped, real and imaginary parts split.
//!
//! Differences from the direct method, by construction: the filtered rows
//! are interpolated exactly (trigonometric) instead of linearly, the Nyquist
//! bin is dropped, and pixels whose rays leave the detector see the filtered
//! row's periodic continuation instead of zero (outside the reconstruction
//! circle only). Angles must be evenly spaced and increasing.

mod cpu;
pub mod gather;
pub mod kernel;
pub mod plan;

pub use plan::{even_spacing, FourierPlan};

use ndarray::{s, Array3, ArrayView3, ArrayViewMut3, Axis};

use crate::error::{CoreError, Result};
use crate::filter::{padded_len, FilterSpec};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// Which reconstruction method a parallel-beam FBP job uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Method {
    /// The exact back projection (the default).
    #[default]
    Direct,
    /// Direct Fourier reconstruction by gridding (this module).
    Fourier,
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "direct" | "bp" | "backprojection" => Ok(Self::Direct),
            "fourier" | "gridrec" | "gridding" => Ok(Self::Fourier),
            _ => Err(format!("unknown method '{s}' (use direct or fourier)")),
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Direct => "direct",
            Self::Fourier => "fourier",
        })
    }
}

/// Parameters of the gridding reconstruction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FourierOptions {
    /// The FBP filter (same family as the direct method's `--filter`).
    pub filter: FilterSpec,
    /// Kernel width W in grid cells (2..=12).
    pub width: usize,
    /// Oversampling σ of the Cartesian grid (1.5..=4).
    pub oversampling: f32,
}

impl Default for FourierOptions {
    fn default() -> Self {
        Self {
            filter: FilterSpec::default(),
            width: DEFAULT_WIDTH,
            oversampling: 2.0,
        }
    }
}

/// The default kernel width: 4, the fastest width whose gridding error
/// (≈ 5e-4 relative to the exactly summed FBP) stays well below the
/// difference between the fourier and the direct method and below tomocupy's
/// lprec on its disc test; 6 gives ≈ 6e-6 at about 1.6× the GPU time (see
/// `docs/fourier.md`).
pub const DEFAULT_WIDTH: usize = 4;

impl FourierOptions {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<()> {
        self.filter.validate()?;
        if !(2..=12).contains(&self.width) {
            return Err(CoreError::Parameter(format!(
                "fourier kernel width {} must lie in 2..=12",
                self.width
            )));
        }
        if !(self.oversampling >= 1.5 && self.oversampling <= 4.0) {
            return Err(CoreError::Parameter(format!(
                "fourier oversampling {} must lie in [1.5, 4]",
                self.oversampling
            )));
        }
        Ok(())
    }
}

/// Reconstructs every sinogram of `sinograms` (`[slice][angle][bin]`) on
/// `grid` with the gridding method on the CPU; returns `[slice][y][x]`.
pub fn fourier_sinograms(
    sinograms: ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    options: &FourierOptions,
) -> Result<Array3<f32>> {
    let mut out = Array3::<f32>::zeros((sinograms.len_of(Axis(0)), grid.ny, grid.nx));
    fourier_into(sinograms, geometry, grid, options, out.view_mut())?;
    Ok(out)
}

/// As [`fourier_sinograms`], into `out` (`[slice][y][x]`).
pub fn fourier_into(
    sinograms: ArrayView3<'_, f32>,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    options: &FourierOptions,
    mut out: ArrayViewMut3<'_, f32>,
) -> Result<()> {
    crate::backend::check_backprojection_shapes(sinograms.dim(), out.dim(), geometry, grid)?;
    let plan = FourierPlan::new(geometry, grid, options)?;
    let ns = sinograms.len_of(Axis(0));
    // Pairs run one after another (each is parallel inside), so memory
    // stays at one pair's spectra and grid.
    let mut start = 0;
    while start < ns {
        let two = start + 1 < ns;
        let a = sinograms.index_axis(Axis(0), start);
        let b = two.then(|| sinograms.index_axis(Axis(0), start + 1));
        let end = if two { start + 2 } else { start + 1 };
        let mut pair = out.slice_mut(s![start..end, .., ..]);
        let mut it = pair.outer_iter_mut();
        let oa = it.next().expect("one slice at least");
        let ob = it.next();
        cpu::reconstruct_pair(&plan, options.filter.padding, a, b, oa, ob);
        start = end;
    }
    Ok(())
}

/// Bytes of work memory one pair of slices needs (spectra and grid,
/// complex f32), for slab sizing.
pub fn pair_bytes(n_bins: usize, n_angles: usize, grid_side: usize) -> usize {
    8 * (n_angles * padded_len(n_bins) + grid_side * grid_side)
}
