//! One description of a `tomors recon` run — input and its reader options,
//! preprocessing, geometry, method, backend, output — built from the
//! command line by `cmd::recon` and carried out by [`crate::run`].
//!
//! [`Job::validate`] decides which method runs ([`Route`]) and refuses,
//! with one line naming the flag, every option that route would not use:
//! no flag is dropped silently. Options that depend on the input file
//! (HDF5 dataset paths, separate flats/darks, stored angles) are checked
//! by [`input::open`] once the file's kind is known.

pub mod center;
pub mod cone;
pub mod geometry;
pub mod half;
pub mod input;
pub mod method;
pub mod output;

use anyhow::{bail, Result};

use self::geometry::{CenterArg, GeometryKind, GeometrySpec};
use self::input::{InputSpec, PreSpec};
use self::method::MethodSpec;
use self::output::OutputSpec;
use crate::backend_select::{BackendArgs, BackendChoice};

/// A whole `recon` run.
#[derive(Clone, Debug)]
pub struct Job {
    /// The projections and how to read them.
    pub input: InputSpec,
    /// Flat/dark correction, −log, zingers, stripes.
    pub pre: PreSpec,
    /// Parallel or cone beam and their parameters.
    pub geometry: GeometrySpec,
    /// FBP/FDK or an iterative method, with options.
    pub method: MethodSpec,
    /// CPU or GPU.
    pub backend: BackendArgs,
    /// The volume written.
    pub output: OutputSpec,
    /// `--memory`: bytes for the slabs (FBP) or the whole scan (the other
    /// methods); `None`: FBP streams within [`DEFAULT_MEMORY`], the other
    /// methods are not limited.
    pub memory: Option<usize>,
}

/// Memory budget of the streaming FBP when `--memory` is not given.
pub const DEFAULT_MEMORY: usize = 2 << 30;

/// Which run module reconstructs a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Parallel-beam FBP, streamed slab by slab.
    Fbp,
    /// Parallel-beam iterative method.
    Iterative,
    /// Cone-beam FDK.
    ConeFdk,
    /// Cone-beam iterative method.
    ConeIterative,
}

/// Fails with "`flag` `why`" for the first flag given.
fn refuse(flags: &[(bool, &str)], why: &str) -> Result<()> {
    match flags.iter().find(|(given, _)| *given) {
        Some((_, flag)) => bail!("{flag} {why}"),
        None => Ok(()),
    }
}

impl Job {
    /// The route the geometry and `--algorithm` choose.
    pub fn route(&self) -> Route {
        match (self.geometry.kind, self.method.algorithm.is_some()) {
            (GeometryKind::Parallel, false) => Route::Fbp,
            (GeometryKind::Parallel, true) => Route::Iterative,
            (GeometryKind::Cone, false) => Route::ConeFdk,
            (GeometryKind::Cone, true) => Route::ConeIterative,
        }
    }

    /// Checks everything that needs no file, and returns the route: each
    /// flag the route would not use is an error naming the flag.
    pub fn validate(&self) -> Result<Route> {
        let route = self.route();
        let g = &self.geometry;
        let m = &self.method;
        let b = &self.backend;
        let iterative = matches!(route, Route::Iterative | Route::ConeIterative);
        let cone = matches!(route, Route::ConeFdk | Route::ConeIterative);

        // Geometry.
        if cone {
            refuse(
                &[
                    (g.half_acquisition, "--half-acquisition"),
                    (g.center_range.is_some(), "--center-range"),
                    (g.center.is_some(), "--center"),
                ],
                "is for parallel geometry (cone beam: --principal-point)",
            )?;
            refuse(
                &[(g.slices.is_some(), "--slices")],
                "is for parallel geometry (cone beam reconstructs every detector row)",
            )?;
            refuse(
                &self.input.roi.given(),
                "is for parallel geometry (cone beam needs the whole detector and its own pixel size)",
            )?;
        } else {
            refuse(
                &g.cone.given(),
                "applies to cone beam only (--geometry cone)",
            )?;
        }
        // With --half-acquisition and no --center the axis is searched.
        let searched =
            g.center == Some(CenterArg::Auto) || (g.half_acquisition && g.center.is_none());
        if g.center_row.is_some() && !searched {
            bail!("--center-row needs --center auto");
        }
        if let Some((a, b)) = g.center_range {
            if !searched {
                bail!("--center-range needs --center auto");
            }
            if a >= b {
                bail!("--center-range {a}:{b}: the first column must be below the second");
            }
        }
        if g.half_acquisition && matches!(g.center, Some(CenterArg::Drift(..))) {
            bail!("--half-acquisition takes one axis position or auto as --center, not A:B");
        }

        // Method.
        if iterative {
            refuse(
                &m.fbp.given(),
                "is an FBP/FDK option; --algorithm does not filter",
            )?;
        } else {
            refuse(
                &m.iterative.given(),
                "needs --algorithm (an iterative method)",
            )?;
        }
        if route == Route::ConeIterative {
            if let Some(kind) = m.iterative.projector.filter(|k| !k.has_cone()) {
                bail!(
                    "--projector {kind} is parallel beam only (cone beam: joseph, line or voxel)"
                );
            }
        }
        if route == Route::ConeFdk {
            refuse(
                &[
                    (m.fbp.slab.is_some(), "--slab"),
                    (m.fbp.method.is_some(), "--method"),
                ],
                "is for parallel-beam FBP",
            )?;
            if m.fbp
                .interp
                .is_some_and(|i| i != tomors_core::Interpolation::Linear)
            {
                bail!("--geometry cone interpolates the detector bilinearly (--interp linear)");
            }
        }

        if route == Route::Fbp && m.fbp.method == Some(tomors_core::fourier::Method::Fourier) {
            refuse(
                &[(m.fbp.interp.is_some(), "--interp")],
                "is not used by --method fourier (it interpolates in frequency space)",
            )?;
            refuse(
                &[(b.kernel.is_some(), "--kernel")],
                "selects the direct back projector; --method fourier does not use it",
            )?;
        }

        // Backend.
        if b.backend == BackendChoice::Cpu {
            refuse(
                &[
                    (b.devices.is_some(), "--devices"),
                    (b.kernel.is_some(), "--kernel"),
                ],
                "chooses GPUs and their kernels; --backend cpu uses none",
            )?;
        }
        // The GPU's fourier method accepts --deterministic: both its gathers
        // (warp, the default, and per point) add in a fixed order.
        let fourier = m.fbp.method == Some(tomors_core::fourier::Method::Fourier);
        if b.deterministic {
            if route != Route::ConeIterative && !(route == Route::Fbp && fourier) {
                bail!(
                    "--deterministic is for cone-beam iterative methods on the GPU (the one back \
                     projection that adds with atomics); this method is deterministic already"
                );
            }
            if b.backend == BackendChoice::Cpu {
                bail!("--deterministic is for the GPU; --backend cpu is deterministic already");
            }
            if route == Route::ConeIterative
                && m.iterative.projector() == tomors_core::iterative::ProjectorKind::Voxel
            {
                bail!(
                    "--deterministic: the voxel projector's back projection is a gather, \
                     deterministic already"
                );
            }
        }
        if b.kernel.is_some() {
            if cone {
                bail!("--kernel chooses a parallel-beam kernel; cone beam has its own");
            }
            if iterative {
                bail!("--kernel selects the FBP back projector; --algorithm does not use it");
            }
        }

        // Input.
        let raw = &self.input.raw;
        if raw.shape.is_none() {
            refuse(
                &[
                    (raw.dtype.is_some(), "--raw-dtype"),
                    (raw.endian.is_some(), "--raw-endian"),
                    (raw.offset.is_some(), "--raw-offset"),
                    (raw.allow_trailing, "--raw-allow-trailing"),
                ],
                "describes raw input and needs --raw-shape",
            )?;
        }
        if let Some(r) = self.input.angle_range {
            if !(r.is_finite() && r > 0.0) {
                bail!("--angle-range {r} must be positive");
            }
            if r > 720.0 {
                bail!("--angle-range {r}: more than two turns (720°) is not a scan");
            }
        }
        Ok(route)
    }
}
