//! Algebraic iterative reconstruction for parallel beam on the CPU:
//! projectors (forward `A`, back `B = Aᵀ` or an approximation) and the
//! SIRT / SART / BLOCK-IT / ART family of methods over them.
//!
//! - [`Projector`]: the operator trait (single slices and stacks, any subset
//!   of projections, generic over [`Real`] = f32 / f64).
//! - [`JosephProjector`] (ray-driven, linear interpolation, virtual zero
//!   padding; matched transpose), [`LineProjector`] (Siddon line lengths;
//!   matched), [`VoxelDrivenProjector`] (Joseph forward with the voxel-driven
//!   back projector of FBP; unmatched, fast).
//! - [`Region`]: restriction of a projector to a block of the grid (domain
//!   decomposition).
//! - [`reconstruct`] with [`IterativeOptions`]: [`Algorithm::Sirt`]
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
//! Cone beam slots in as further [`Projector`] implementations acting on
//! whole volumes (one "slice" of `[1][z·y][x]`-shaped data is not needed:
//! the algorithms only use `forward`/`back` on stacks, `row_sums`,
//! `column_sums`, `row_norms_sq` and `trace_ray`).

mod algorithms;
mod joseph;
mod line;
mod operator;
mod real;
mod voxel;

pub use algorithms::{
    default_relaxation, reconstruct, spectral_radius, Algorithm, Constraint, IterationInfo,
    IterativeOptions, IterativeResult, RayOrder, StopReason, Weighting,
};
pub use joseph::JosephProjector;
pub use line::LineProjector;
pub use operator::{all_angles, Projector, Region};
pub use real::Real;
pub use voxel::VoxelDrivenProjector;

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
}

impl std::str::FromStr for ProjectorKind {
    type Err = CoreError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "joseph" => Ok(Self::Joseph),
            "line" | "siddon" | "line-length" => Ok(Self::Line),
            "voxel" | "voxel-driven" => Ok(Self::Voxel),
            _ => Err(CoreError::Parameter(format!(
                "unknown projector '{s}' (use joseph, line or voxel)"
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
    })
}
