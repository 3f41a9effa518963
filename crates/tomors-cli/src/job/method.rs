//! The method part of a job: FBP/FDK filtering options, or an iterative
//! algorithm with its options; defaults applied here.

use anyhow::{bail, Result};
use clap::ValueEnum;
use tomors_core::fbp::FbpOptions;
use tomors_core::fourier::Method;
use tomors_core::iterative::{
    Algorithm, Constraint, IterativeOptions, ProjectorKind, RayOrder, Weighting,
};
use tomors_core::{FilterKind, FilterSpec, Interpolation, Padding};

/// The iterative methods by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AlgorithmName {
    /// SIRT with row/column-sum weights (ASTRA's SIRT), all projections per step.
    Sirt,
    /// SIRT with T = M = I.
    Landweber,
    /// SIRT with M = 1/‖a_i‖².
    Cimmino,
    /// Row/column-sum steps per block of --block-size projections (default 1).
    Sart,
    /// BLOCK-IT: Cimmino steps per block of --block-size projections (default 2).
    BlockIt,
    /// Averaged Kaczmarz sweeps over blocks of --block-size projections (default 6).
    BlockParallel,
    /// Kaczmarz, ray by ray.
    Art,
}

/// Slices per slab handed to the FBP backend unless `--slab` says.
pub const DEFAULT_SLAB: usize = 32;

/// FBP/FDK options as given (`None`: not given, default applies).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FbpSpec {
    /// `--filter`.
    pub filter: Option<FilterKind>,
    /// `--cutoff`.
    pub cutoff: Option<f32>,
    /// `--padding`.
    pub padding: Option<Padding>,
    /// `--interp`.
    pub interp: Option<Interpolation>,
    /// `--slab`.
    pub slab: Option<usize>,
    /// `--method`.
    pub method: Option<Method>,
}

impl FbpSpec {
    /// Each flag given, by name.
    pub fn given(&self) -> [(bool, &'static str); 6] {
        [
            (self.method.is_some(), "--method"),
            (self.filter.is_some(), "--filter"),
            (self.cutoff.is_some(), "--cutoff"),
            (self.padding.is_some(), "--padding"),
            (self.interp.is_some(), "--interp"),
            (self.slab.is_some(), "--slab"),
        ]
    }

    /// The filter (validated).
    pub fn filter(&self) -> Result<FilterSpec> {
        let f = FilterSpec {
            kind: self.filter.unwrap_or(FilterKind::RamLak),
            cutoff: self.cutoff.unwrap_or(1.0),
            padding: self.padding.unwrap_or_default(),
        };
        f.validate()?;
        Ok(f)
    }

    /// The core's FBP options (validated filter).
    pub fn options(&self) -> Result<FbpOptions> {
        Ok(FbpOptions {
            filter: self.filter()?,
            interpolation: self.interp.unwrap_or(Interpolation::Linear),
            slab: self.slab.unwrap_or(DEFAULT_SLAB),
            method: self.method.unwrap_or_default(),
        })
    }
}

/// Iterations unless `--iterations` says.
pub const DEFAULT_ITERATIONS: usize = 50;

/// Iterative options as given (`None`: not given, default applies).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterativeSpec {
    /// `--iterations`.
    pub iterations: Option<usize>,
    /// `--relaxation`.
    pub relaxation: Option<f64>,
    /// `--projector`.
    pub projector: Option<ProjectorKind>,
    /// `--min`.
    pub min: Option<f64>,
    /// `--max`.
    pub max: Option<f64>,
    /// `--block-size`.
    pub block_size: Option<usize>,
    /// `--tolerance`.
    pub tolerance: Option<f64>,
    /// `--random-order`.
    pub random_order: bool,
}

impl IterativeSpec {
    /// Each flag given, by name.
    pub fn given(&self) -> [(bool, &'static str); 8] {
        [
            (self.iterations.is_some(), "--iterations"),
            (self.relaxation.is_some(), "--relaxation"),
            (self.projector.is_some(), "--projector"),
            (self.min.is_some(), "--min"),
            (self.max.is_some(), "--max"),
            (self.block_size.is_some(), "--block-size"),
            (self.tolerance.is_some(), "--tolerance"),
            (self.random_order, "--random-order"),
        ]
    }

    /// The projector (default Joseph).
    pub fn projector(&self) -> ProjectorKind {
        self.projector.unwrap_or_default()
    }

    /// The core's options for `name` and these flags.
    pub fn options(&self, name: AlgorithmName) -> Result<IterativeOptions> {
        let block = |default: usize| self.block_size.unwrap_or(default);
        let algorithm = match name {
            AlgorithmName::Sirt => Algorithm::Sirt(Weighting::RowColumnSums),
            AlgorithmName::Landweber => Algorithm::Sirt(Weighting::Landweber),
            AlgorithmName::Cimmino => Algorithm::Sirt(Weighting::Cimmino),
            AlgorithmName::Sart => Algorithm::BlockSequential {
                weighting: Weighting::RowColumnSums,
                projections_per_block: block(1),
            },
            AlgorithmName::BlockIt => Algorithm::BlockSequential {
                weighting: Weighting::Cimmino,
                projections_per_block: block(2),
            },
            AlgorithmName::BlockParallel => Algorithm::BlockParallel {
                projections_per_block: block(6),
            },
            AlgorithmName::Art => Algorithm::Art {
                order: if self.random_order {
                    RayOrder::Random { seed: 1 }
                } else {
                    RayOrder::Sequential
                },
            },
        };
        if self.block_size.is_some()
            && !matches!(
                name,
                AlgorithmName::Sart | AlgorithmName::BlockIt | AlgorithmName::BlockParallel
            )
        {
            bail!("--block-size is for sart, block-it and block-parallel");
        }
        if self.random_order && name != AlgorithmName::Art {
            bail!("--random-order is for art");
        }
        Ok(IterativeOptions {
            algorithm,
            iterations: self.iterations.unwrap_or(DEFAULT_ITERATIONS),
            relaxation: self.relaxation,
            constraint: Constraint {
                min: self.min,
                max: self.max,
            },
            tolerance: self.tolerance,
            track_residual: true,
        })
    }
}

/// How the volume is computed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MethodSpec {
    /// `--algorithm`: an iterative method instead of FBP/FDK.
    pub algorithm: Option<AlgorithmName>,
    /// The filtering options of FBP and FDK.
    pub fbp: FbpSpec,
    /// The options of the iterative methods.
    pub iterative: IterativeSpec,
}
