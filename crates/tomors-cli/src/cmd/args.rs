//! Argument groups shared by several subcommands (clap structs only), and
//! the value parsers of `a:b` ranges, `a,b` lists and memory sizes.
//!
//! Options that a run may not use are `Option`s without a clap default, so
//! that the job knows what the user gave and can refuse what its method
//! would otherwise drop silently; the defaults are applied in [`crate::job`].

use std::path::PathBuf;

use tomors_core::iterative::ProjectorKind;
use tomors_core::{FilterKind, Interpolation, Padding};
use tomors_io::preprocess::{Average, LogMode};
use tomors_io::{OpenOptions, StripeMethod};

use crate::job::geometry::GeometryKind;
use crate::job::input::{PhaseMethod, PhaseSpec, PreSpec};
use crate::job::method::{AlgorithmName, FbpSpec};

/// FBP filter options shared by `demo` and `recon`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FilterArgs {
    /// Ramp filter window: ram-lak, shepp-logan, cosine, hamming, hann
    /// (default ram-lak).
    #[arg(long)]
    pub filter: Option<FilterKind>,
    /// Frequency cutoff of the filter as a fraction of Nyquist, in (0, 1]
    /// (default 1).
    #[arg(long)]
    pub cutoff: Option<f32>,
    /// Row padding before the FFT: zero or edge (default zero).
    #[arg(long)]
    pub padding: Option<Padding>,
    /// Detector interpolation of the back projection: linear or nearest
    /// (default linear).
    #[arg(long)]
    pub interp: Option<Interpolation>,
}

impl FilterArgs {
    /// These flags as the job's FBP options (`slab`: `--slab`, if any).
    pub fn spec(&self, slab: Option<usize>) -> FbpSpec {
        FbpSpec {
            filter: self.filter,
            cutoff: self.cutoff,
            padding: self.padding,
            interp: self.interp,
            slab,
            method: None,
        }
    }
}

/// Where the data are inside HDF5 files, and separate flat/dark stacks.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct InputArgs {
    /// HDF5: dataset of the frames (NXtomo) or projections (DXchange)
    /// (default: /exchange/data, or the NXtomo detector data).
    #[arg(long)]
    pub data_path: Option<String>,
    /// NXtomo: dataset of the image keys (0 projection, 1 flat, 2 dark).
    #[arg(long)]
    pub image_key_path: Option<String>,
    /// HDF5: dataset of the rotation angles (default: /exchange/theta or
    /// the NXtomo sample's rotation_angle).
    #[arg(long)]
    pub angles_path: Option<String>,
    /// Flat fields for TIFF/.npy/raw input: a directory or glob of TIFFs,
    /// a multi-page TIFF or an .npy file [frame][row][col].
    #[arg(long)]
    pub flats: Option<PathBuf>,
    /// Dark fields, as --flats.
    #[arg(long)]
    pub darks: Option<PathBuf>,
}

impl InputArgs {
    /// The reader options for these flags.
    pub fn open_options(&self) -> OpenOptions {
        OpenOptions {
            data_path: self.data_path.clone(),
            image_key_path: self.image_key_path.clone(),
            angles_path: self.angles_path.clone(),
            flats: self.flats.clone(),
            darks: self.darks.clone(),
            ..Default::default()
        }
    }
}

/// Preprocessing of real data.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct PreprocessArgs {
    /// How flats and darks are combined: mean or median (default mean).
    #[arg(long)]
    pub flat_average: Option<Average>,
    /// −log of the normalised data: auto (when flats were applied), always,
    /// never (default auto).
    #[arg(long)]
    pub log: Option<LogMode>,
    /// Do not apply flats and darks even when the input has them.
    #[arg(long)]
    pub no_flat_dark: bool,
    /// Zinger removal: replace values that differ from their 3×3 sinogram
    /// median by more than this fraction of it (e.g. 0.3).
    #[arg(long)]
    pub zinger: Option<f32>,
    /// Ring (stripe) removal after −log, as METHOD[:params]: N or
    /// sorting[:size] (Vo 2018 sorting-based, window N), filtering[:sigma,size],
    /// large[:snr,size], dead[:snr,size], all[:snr,large,small] (Vo's combined
    /// recipe), fw[:level,sigma] (Münch wavelet–Fourier). Defaults: sorting 21;
    /// filtering 3,21; large/dead 3,51; all 3,51,21; fw 4,2.
    #[arg(long, value_name = "METHOD[:PARAMS]")]
    pub stripe: Option<StripeMethod>,
    /// Rotate every projection by this many degrees about the detector
    /// centre (counter-clockwise as displayed, row 0 at the top; bilinear) to
    /// correct a tilted detector, after flat/dark correction.
    #[arg(long, value_name = "DEG", allow_hyphen_values = true)]
    pub rotate_proj: Option<f64>,
    /// Phase retrieval of the normalised projections before −log: paganin
    /// (single material; needs --delta-beta, --energy, --distance,
    /// --detector-pixel).
    #[arg(long, value_enum)]
    pub retrieve_phase: Option<PhaseMethod>,
    /// Phase retrieval: δ/β of the material.
    #[arg(long, value_name = "R")]
    pub delta_beta: Option<f64>,
    /// Phase retrieval: photon energy in keV.
    #[arg(long, value_name = "KEV")]
    pub energy: Option<f64>,
    /// Phase retrieval: sample-to-detector propagation distance in mm.
    #[arg(long, value_name = "MM")]
    pub distance: Option<f64>,
    /// Phase retrieval: physical (effective) detector pixel size in µm, as
    /// one value or width,height (before --binning, which scales it).
    #[arg(long, value_name = "UM[,UM]", value_parser = one_or_two_numbers)]
    pub detector_pixel: Option<(f64, f64)>,
    /// Phase retrieval: edge padding in pixels on each side of each
    /// projection (default: to the next power of two of twice its size).
    #[arg(long, value_name = "N")]
    pub phase_pad: Option<usize>,
}

impl PreprocessArgs {
    /// These flags as the job's preprocessing options.
    pub fn spec(&self) -> PreSpec {
        PreSpec {
            flat_average: self.flat_average,
            log: self.log,
            no_flat_dark: self.no_flat_dark,
            zinger: self.zinger,
            stripe: self.stripe,
            rotate: self.rotate_proj,
            phase: PhaseSpec {
                method: self.retrieve_phase,
                delta_beta: self.delta_beta,
                energy: self.energy,
                distance: self.distance,
                pixel: self.detector_pixel,
                pad: self.phase_pad,
            },
        }
    }
}

/// Cone-beam options shared by `phantom` and `recon`.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConeArgs {
    /// Beam geometry: parallel, or cone (circular orbit, flat detector; needs
    /// --sod, --odd, --pixel-size).
    #[arg(long, value_enum, default_value_t = GeometryKind::Parallel)]
    pub geometry: GeometryKind,
    /// Cone beam: source to rotation-axis distance (world units, e.g. mm).
    #[arg(long)]
    pub sod: Option<f64>,
    /// Cone beam: rotation-axis to detector distance (world units).
    #[arg(long)]
    pub odd: Option<f64>,
    /// Cone beam: detector pixel size in world units, as one value or
    /// width,height.
    #[arg(long, value_name = "W[,H]", value_parser = one_or_two_numbers)]
    pub pixel_size: Option<(f64, f64)>,
    /// Cone beam: the principal point (where the central ray meets the
    /// detector) as col,row in pixels (default: the detector centre).
    #[arg(long, value_name = "COL,ROW", allow_hyphen_values = true, value_parser = two_numbers)]
    pub principal_point: Option<(f64, f64)>,
    /// Cone beam: voxel size of the reconstruction (default: the largest
    /// whose volume the detector covers at every angle).
    #[arg(long)]
    pub voxel_size: Option<f32>,
    /// Cone beam: a short scan over π + the fan angle, weighted with Parker
    /// weights (phantom: angles over π + fan angle, both ends included).
    /// Without it, recon treats angles covering whole turns as a full scan
    /// and anything else as a short scan.
    #[arg(long)]
    pub short_scan: bool,
}

impl ConeArgs {
    /// These flags as the job's cone-beam options.
    pub fn spec(&self) -> crate::job::geometry::ConeSpec {
        crate::job::geometry::ConeSpec {
            sod: self.sod,
            odd: self.odd,
            pixel_size: self.pixel_size,
            principal_point: self.principal_point,
            voxel_size: self.voxel_size,
            short_scan: self.short_scan,
        }
    }
}

/// Options of the iterative methods (`--algorithm` switches from FBP).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct IterativeArgs {
    /// Reconstruct iteratively instead of by FBP/FDK (sirt, landweber and
    /// cimmino with the joseph projector also run on the GPU).
    #[arg(long, value_enum)]
    pub algorithm: Option<AlgorithmName>,
    /// Iterations of --algorithm (sweeps over all projections for art and
    /// the block methods; default 50).
    #[arg(long)]
    pub iterations: Option<usize>,
    /// Relaxation λ of --algorithm (default: 1 for sirt, sart, art, block-parallel;
    /// 1/ρ from power iteration for landweber, cimmino, block-it).
    #[arg(long, allow_hyphen_values = true)]
    pub relaxation: Option<f64>,
    /// Projection model of --algorithm: zero-one (nearest pixel per step), line
    /// (Siddon), strip (pixel area in the bin's strip), joseph, or voxel (Joseph
    /// forward with the voxel-driven back projector of FBP: the unmatched pair of
    /// ASTRA's SIRT3D_CUDA, with --backend cuda the fastest for sirt, landweber
    /// and cimmino); zero-one and strip are parallel beam only (default joseph).
    #[arg(long)]
    pub projector: Option<ProjectorKind>,
    /// Lower bound of the reconstructed values (e.g. 0), applied every update.
    #[arg(long, allow_hyphen_values = true)]
    pub min: Option<f64>,
    /// Upper bound of the reconstructed values.
    #[arg(long, allow_hyphen_values = true)]
    pub max: Option<f64>,
    /// Projections per block of sart, block-it and block-parallel.
    #[arg(long)]
    pub block_size: Option<usize>,
    /// Stop once the relative residual ‖b − Ax‖/‖b‖ is at most this.
    #[arg(long, allow_hyphen_values = true)]
    pub tolerance: Option<f64>,
    /// Random ray order for art (seeded, reproducible).
    #[arg(long)]
    pub random_order: bool,
}

impl IterativeArgs {
    /// These flags as the job's iterative options.
    pub fn spec(&self) -> crate::job::method::IterativeSpec {
        crate::job::method::IterativeSpec {
            iterations: self.iterations,
            relaxation: self.relaxation,
            projector: self.projector,
            min: self.min,
            max: self.max,
            block_size: self.block_size,
            tolerance: self.tolerance,
            random_order: self.random_order,
        }
    }
}

/// A finite number ("'x' is not a number" otherwise).
pub fn finite_f64(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("'{s}' is not a number"))
}

/// `a` (meaning `a,a`) or `a,b`: two finite numbers (`--pixel-size`).
pub fn one_or_two_numbers(s: &str) -> Result<(f64, f64), String> {
    match s.split(',').collect::<Vec<_>>()[..] {
        [a] => finite_f64(a).map(|a| (a, a)),
        [a, b] => Ok((finite_f64(a)?, finite_f64(b)?)),
        _ => Err(format!("'{s}': expected one value or two as a,b")),
    }
}

/// `a,b`: two finite numbers (`--principal-point`).
pub fn two_numbers(s: &str) -> Result<(f64, f64), String> {
    match s.split(',').collect::<Vec<_>>()[..] {
        [a, b] => Ok((finite_f64(a)?, finite_f64(b)?)),
        _ => Err(format!("'{s}': expected two values as a,b")),
    }
}

/// `a,b,c`: three sizes (`--raw-shape`).
pub fn three_sizes(s: &str) -> Result<[usize; 3], String> {
    let v = s
        .split(',')
        .map(|t| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{t}' is not a size"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    <[usize; 3]>::try_from(v).map_err(|_| format!("'{s}': expected three sizes angles,rows,cols"))
}

/// `a:b` with either side possibly empty (`--slices`): the two ends.
pub fn index_range(s: &str) -> Result<(Option<usize>, Option<usize>), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}': expected a:b"))?;
    let end = |t: &str| -> Result<Option<usize>, String> {
        let t = t.trim();
        if t.is_empty() {
            return Ok(None);
        }
        t.parse()
            .map(Some)
            .map_err(|_| format!("'{t}' is not a row index"))
    };
    Ok((end(a)?, end(b)?))
}

/// `a:b[:step]` as given: start, end, step (each optional).
pub type RangeStep = (Option<usize>, Option<usize>, Option<usize>);

/// `a:b[:step]` with either end possibly empty (`--projections`).
pub fn index_range_step(s: &str) -> Result<RangeStep, String> {
    let (ab, step) = match s.matches(':').count() {
        2 => {
            let (ab, st) = s.rsplit_once(':').expect("two colons");
            let st = st
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("'{st}' is not a step (a positive whole number)"))?;
            (ab, Some(st))
        }
        _ => (s, None),
    };
    let (a, b) = index_range(ab)?;
    Ok((a, b, step))
}

/// `r,c`: two positive bin factors (`--binning`).
pub fn bin_factors(s: &str) -> Result<(usize, usize), String> {
    let one = |t: &str| {
        t.trim()
            .parse::<usize>()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| format!("'{t}' is not a bin factor (a positive whole number)"))
    };
    match s.split(',').collect::<Vec<_>>()[..] {
        [a] => one(a).map(|a| (a, a)),
        [a, b] => Ok((one(a)?, one(b)?)),
        _ => Err(format!("'{s}': expected ROWS,COLS or one factor for both")),
    }
}

/// `lo:hi`, two finite numbers (`--tiff-range`).
pub fn value_range(s: &str) -> Result<(f32, f32), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}': expected lo:hi"))?;
    let num = |t: &str| -> Result<f32, String> {
        t.trim()
            .parse::<f32>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("'{t}' is not a number"))
    };
    Ok((num(a)?, num(b)?))
}

/// A memory size such as `512M`, `4G` or `1.5GiB` (binary units: K, M, G,
/// T are powers of 1024), greater than zero (`--memory`).
pub fn memory_size(s: &str) -> Result<usize, String> {
    let bytes = parse_size::Config::new()
        .with_binary()
        .parse_size(s.trim())
        .map_err(|e| format!("'{s}' is not a memory size such as 512M or 4G ({e})"))?;
    if bytes == 0 {
        return Err(format!("memory size '{s}' must be positive"));
    }
    usize::try_from(bytes).map_err(|_| format!("memory size '{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(index_range("1:3"), Ok((Some(1), Some(3))));
        assert_eq!(index_range(":3"), Ok((None, Some(3))));
        assert_eq!(index_range("2:"), Ok((Some(2), None)));
        assert!(index_range("2").is_err());
        assert!(index_range("a:3").is_err());
        assert_eq!(value_range("-1:2.5"), Ok((-1.0, 2.5)));
        assert!(value_range("1:x").is_err());
        assert_eq!(memory_size("512M"), Ok(512 << 20));
        assert_eq!(memory_size("69M"), Ok(69 << 20));
        assert_eq!(memory_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(memory_size("1000"), Ok(1000));
        assert!(memory_size("lots").is_err());
        assert!(memory_size("-1G").is_err());
        assert!(memory_size("0").is_err());
        assert!(finite_f64("inf").is_err());
        assert_eq!(one_or_two_numbers("2"), Ok((2.0, 2.0)));
        assert_eq!(one_or_two_numbers("2,3"), Ok((2.0, 3.0)));
        assert!(one_or_two_numbers("2,3,4").is_err());
        assert!(one_or_two_numbers("a")
            .unwrap_err()
            .contains("is not a number"));
        assert_eq!(two_numbers("-1,3"), Ok((-1.0, 3.0)));
        assert!(two_numbers("1").is_err());
        assert_eq!(three_sizes("20,2,17"), Ok([20, 2, 17]));
        assert!(three_sizes("20,2").is_err());
        assert!(three_sizes("20,x,2").is_err());
        assert_eq!(finite_f64(" 2 "), Ok(2.0));
        assert_eq!(index_range_step("1:9:2"), Ok((Some(1), Some(9), Some(2))));
        assert_eq!(index_range_step(":9"), Ok((None, Some(9), None)));
        assert!(index_range_step("1:9:0").is_err());
        assert_eq!(bin_factors("2"), Ok((2, 2)));
        assert_eq!(bin_factors("2,4"), Ok((2, 4)));
        assert!(bin_factors("0,1").is_err());
    }
}
