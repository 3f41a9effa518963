//! The subcommands of `tomors`.

pub mod bench;
pub mod center;
pub mod cone;
pub mod cone_gpu;
pub mod cone_iterative;
pub mod demo;
pub mod info;
pub mod iterative;
pub mod phantom;
pub mod recon;
pub mod tune;

use tomors_core::{FilterKind, Interpolation, Padding};

/// FBP filter options shared by `demo` and `recon`.
#[derive(clap::Args, Clone, Debug)]
pub struct FilterArgs {
    /// Ramp filter window: ram-lak, shepp-logan, cosine, hamming, hann.
    #[arg(long, default_value = "ram-lak")]
    pub filter: FilterKind,
    /// Frequency cutoff of the filter as a fraction of Nyquist, in (0, 1].
    #[arg(long, default_value_t = 1.0)]
    pub cutoff: f32,
    /// Row padding before the FFT: zero or edge.
    #[arg(long, default_value = "zero")]
    pub padding: Padding,
    /// Detector interpolation of the back projection: linear or nearest.
    #[arg(long, default_value = "linear")]
    pub interp: Interpolation,
}

impl FilterArgs {
    /// The core's FBP options for these flags.
    pub fn fbp_options(&self, slab: usize) -> tomors_core::fbp::FbpOptions {
        tomors_core::fbp::FbpOptions {
            filter: tomors_core::FilterSpec {
                kind: self.filter,
                cutoff: self.cutoff,
                padding: self.padding,
            },
            interpolation: self.interp,
            slab,
        }
    }
}
