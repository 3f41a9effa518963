//! Algebraic iterative reconstruction for parallel beam on the CPU:
//! projectors (forward `A`, back `B = Aᵀ` or an approximation) and the
//! SIRT / SART / BLOCK-IT / ART family of methods over them.
//!
//! - [`Projector`]: the operator trait (single slices and stacks, any subset
//!   of projections, generic over [`Real`] = f32 / f64).
//! - The five projection models of the thesis (document 004, §2.1):
//!   [`ZeroOneProjector`] (nearest pixel per step; matched),
//!   [`LineProjector`] (Siddon line lengths; matched), [`StripProjector`]
//!   (exact pixel area inside the ray's strip of bin width; matched),
//!   [`JosephProjector`] (ray-driven, linear interpolation, virtual zero
//!   padding; matched transpose), [`VoxelDrivenProjector`] (Joseph forward
//!   with the voxel-driven back projector of FBP; unmatched, fast).
//! - [`Region`]: restriction of a projector to a block of the grid (domain
//!   decomposition).
//! - [`solve`]: every method written once over the operator and vector
//!   traits of [`crate::linalg`]; [`StackOperator`] makes any [`Projector`]
//!   such an operator on host stacks.
//! - [`reconstruct`] (host arrays, a wrapper over [`solve`]) with [`IterativeOptions`]: [`Algorithm::Sirt`]
//!   (Landweber, Cimmino, row/column sums = ASTRA's SIRT),
//!   [`Algorithm::BlockSequential`] (BLOCK-IT, SART),
//!   [`Algorithm::BlockParallel`], [`Algorithm::Art`]; constraints,
//!   relaxation with a default from the spectral radius (power iteration),
//!   stopping by count or relative residual, residual history, callback.
//!
//! Geometry conventions are those of [`crate::geometry`]; projections are
//! line integrals in world units, so a reconstruction has the object's
//! values (attenuation per world unit), as FBP's.
//!
//! Cone beam: [`ConeJosephProjector`], [`ConeLineProjector`] and
//! [`ConeVoxelProjector`] are [`Projector`]s (the 0–1 and strip-area models
//! are parallel-beam only) whose one "slice" is the whole
//! volume (`[z·y][x]`) and whose sinogram is the whole set of projections
//! (`[angle][row·col]`), so every algorithm above runs on them unchanged;
//! [`reconstruct_cone`] takes `[angle][row][col]` projections and returns
//! a `[z][y][x]` volume. [`VolumeBox`] restricts them to part of the volume.

mod algorithms;
mod batched;
mod cone_joseph;
mod cone_line;
pub(crate) mod cone_rays;
mod cone_voxel;
mod joseph;
mod line;
mod operator;
mod options;
mod real;
pub mod solver;
mod stack;
mod strip;
mod voxel;
mod zero_one;

pub use algorithms::{
    default_relaxation, reconstruct, spectral_radius, IterationInfo, IterativeResult,
};
pub use cone_joseph::ConeJosephProjector;
pub use cone_line::ConeLineProjector;
pub use cone_rays::{ray_frames, RayFrame, VolumeBox};
pub use cone_voxel::ConeVoxelProjector;
pub use joseph::JosephProjector;
pub use line::LineProjector;
pub use operator::{all_angles, Projector, Region};
pub use options::{Algorithm, Constraint, IterativeOptions, RayOrder, StopReason, Weighting};
pub use real::Real;
pub use solver::{default_relaxation_of, solve, spectral_radius_of, IterationState, SolveReport};
pub use stack::StackOperator;
pub use strip::StripProjector;
pub use voxel::VoxelDrivenProjector;
pub use zero_one::ZeroOneProjector;

use ndarray::{Array3, ArrayView3};

use crate::cone::{ConeGeometry, ConeVolume};
use crate::error::{CoreError, Result};
use crate::geometry::{ParallelGeometry, SliceGrid};

/// The projection models, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ProjectorKind {
    /// [`JosephProjector`].
    #[default]
    Joseph,
    /// [`LineProjector`].
    Line,
    /// [`VoxelDrivenProjector`].
    Voxel,
    /// [`ZeroOneProjector`] (parallel beam only).
    ZeroOne,
    /// [`StripProjector`] (parallel beam only).
    Strip,
}

impl ProjectorKind {
    /// Every kind, in the thesis' order (0–1, line, strip, Joseph, voxel).
    pub const ALL: [ProjectorKind; 5] = [
        Self::ZeroOne,
        Self::Line,
        Self::Strip,
        Self::Joseph,
        Self::Voxel,
    ];

    /// The name [`FromStr`](std::str::FromStr) accepts and
    /// [`Projector::name`] reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Joseph => "joseph",
            Self::Line => "line",
            Self::Voxel => "voxel",
            Self::ZeroOne => "zero-one",
            Self::Strip => "strip",
        }
    }

    /// Whether a cone-beam version exists ([`cone_projector`]).
    pub fn has_cone(self) -> bool {
        matches!(self, Self::Joseph | Self::Line | Self::Voxel)
    }
}

impl std::fmt::Display for ProjectorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ProjectorKind {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "joseph" => Ok(Self::Joseph),
            "line" | "siddon" | "line-length" => Ok(Self::Line),
            "voxel" | "voxel-driven" => Ok(Self::Voxel),
            "zero-one" | "0-1" | "zero_one" => Ok(Self::ZeroOne),
            "strip" | "strip-area" => Ok(Self::Strip),
            _ => Err(CoreError::Parameter(format!(
                "unknown projector '{s}' (use zero-one, line, strip, joseph or voxel)"
            ))),
        }
    }
}

/// Builds the projector of `kind` for `geometry` on `region` of `grid`
/// (the whole grid if `None`).
pub fn projector<T: Real>(
    kind: ProjectorKind,
    geometry: &ParallelGeometry,
    grid: &SliceGrid,
    region: Option<Region>,
) -> Result<Box<dyn Projector<T>>>
where
    VoxelDrivenProjector: Projector<T>,
{
    let region = region.unwrap_or_else(|| Region::full(grid));
    Ok(match kind {
        ProjectorKind::Joseph => Box::new(JosephProjector::with_region(geometry, grid, region)?),
        ProjectorKind::Line => Box::new(LineProjector::with_region(geometry, grid, region)?),
        ProjectorKind::Voxel => {
            Box::new(VoxelDrivenProjector::with_region(geometry, grid, region)?)
        }
        ProjectorKind::ZeroOne => Box::new(ZeroOneProjector::with_region(geometry, grid, region)?),
        ProjectorKind::Strip => Box::new(StripProjector::with_region(geometry, grid, region)?),
    })
}

/// A cone-beam [`Projector`]: its image is a `[z][y][x]` volume box viewed
/// as `[z·y][x]`, its sinogram the `[angle][row][col]` projections viewed
/// as `[angle][row·col]`.
pub trait ConeOperator<T: Real>: Projector<T> {
    /// `(nz, ny, nx)` of the volume (box) the operator acts on.
    fn volume_dim(&self) -> (usize, usize, usize);
    /// `(rows, cols)` of the detector.
    fn detector_dim(&self) -> (usize, usize);
}

/// Builds the cone-beam projector of `kind` for `geometry` on `region` of
/// `volume` (the whole volume if `None`).
///
/// Errors: a kind without a cone-beam version (zero-one, strip: parallel
/// beam only); an empty region or one outside the volume; the source orbit
/// passes through the volume.
pub fn cone_projector<T: Real>(
    kind: ProjectorKind,
    geometry: &ConeGeometry,
    volume: &ConeVolume,
    region: Option<VolumeBox>,
) -> Result<Box<dyn ConeOperator<T>>> {
    let region = region.unwrap_or_else(|| VolumeBox::full(volume));
    Ok(match kind {
        ProjectorKind::Joseph => Box::new(ConeJosephProjector::with_box(geometry, volume, region)?),
        ProjectorKind::Line => Box::new(ConeLineProjector::with_box(geometry, volume, region)?),
        ProjectorKind::Voxel => Box::new(ConeVoxelProjector::with_box(geometry, volume, region)?),
        ProjectorKind::ZeroOne | ProjectorKind::Strip => {
            return Err(CoreError::Parameter(format!(
                "the {kind} projector is parallel-beam only (cone beam: joseph, line or voxel)"
            )))
        }
    })
}

/// Iterative cone-beam reconstruction: [`reconstruct`] on `projections`
/// (`[angle][row][col]`) from `initial` (`[z][y][x]`, zeros if `None`).
/// The result's `x` is the `[z][y][x]` volume; the callback sees the
/// iterate as `[1][z·y][x]`.
///
/// Errors: those of [`reconstruct`], and projections or an initial volume
/// whose shape does not fit the projector.
pub fn reconstruct_cone<T: Real, P: ConeOperator<T> + ?Sized>(
    projector: &P,
    projections: ArrayView3<'_, T>,
    initial: Option<ArrayView3<'_, T>>,
    options: &IterativeOptions,
    callback: &mut dyn FnMut(&IterationInfo<'_, T>) -> bool,
) -> Result<IterativeResult<T>> {
    let (nz, ny, nx) = projector.volume_dim();
    let (nr, nc) = projector.detector_dim();
    let (na, r, c) = projections.dim();
    if (r, c) != (nr, nc) || na != projector.n_angles() {
        return Err(CoreError::Shape(format!(
            "projections are {na} × {r} × {c}, the geometry has {} angles of {nr} × {nc}",
            projector.n_angles()
        )));
    }
    let b = projections.as_standard_layout();
    let b = b
        .view()
        .into_shape_with_order((1, na, nr * nc))
        .map_err(|e| CoreError::Shape(e.to_string()))?;
    let x0 = match initial {
        Some(x) => {
            if x.dim() != (nz, ny, nx) {
                return Err(CoreError::Shape(format!(
                    "initial volume is {:?}, expected {:?}",
                    x.dim(),
                    (nz, ny, nx)
                )));
            }
            Some(x.as_standard_layout().into_owned())
        }
        None => None,
    };
    let x0 = match &x0 {
        Some(x) => Some(
            x.view()
                .into_shape_with_order((1, nz * ny, nx))
                .map_err(|e| CoreError::Shape(e.to_string()))?,
        ),
        None => None,
    };
    let mut result = reconstruct(projector, b, x0, options, callback)?;
    let x = std::mem::replace(&mut result.x, Array3::from_elem((0, 0, 0), T::ZERO));
    result.x = x
        .into_shape_with_order((nz, ny, nx))
        .map_err(|e| CoreError::Shape(e.to_string()))?;
    Ok(result)
}
