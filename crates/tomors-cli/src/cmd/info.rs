//! `tomors info FILE`: what is in a file and how tomors would read it; and
//! the input options shared by `info`, `center` and `recon` for real data.

use std::path::PathBuf;

use anyhow::Result;
use tomors_io::preprocess::{Average, LogMode, Preprocess};
use tomors_io::OpenOptions;

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
#[derive(clap::Args, Clone, Debug)]
pub struct PreprocessArgs {
    /// How flats and darks are combined: mean or median.
    #[arg(long, default_value = "mean")]
    pub flat_average: Average,
    /// −log of the normalised data: auto (when flats were applied), always, never.
    #[arg(long, default_value = "auto")]
    pub log: LogMode,
    /// Do not apply flats and darks even when the input has them.
    #[arg(long)]
    pub no_flat_dark: bool,
    /// Zinger removal: replace values that differ from their 3×3 sinogram
    /// median by more than this fraction of it (e.g. 0.3).
    #[arg(long)]
    pub zinger: Option<f32>,
    /// Ring removal (Vo et al. 2018 sorting-based stripe removal) with a
    /// median window of this many detector pixels (e.g. 21).
    #[arg(long)]
    pub stripe: Option<usize>,
}

impl PreprocessArgs {
    /// The preprocessing these flags ask for.
    pub fn preprocess(&self) -> Result<Preprocess> {
        let p = Preprocess {
            flat_dark: !self.no_flat_dark,
            average: self.flat_average,
            log: self.log,
            zinger_threshold: self.zinger,
            stripe_size: self.stripe,
            ..Default::default()
        };
        p.validate()?;
        Ok(p)
    }
}

/// Unit of stored angles (overrides what the file says).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UnitArg {
    /// Radians.
    Rad,
    /// Degrees.
    Deg,
}

impl UnitArg {
    /// The reader's unit.
    pub fn to_io(self) -> tomors_io::AngleUnit {
        match self {
            Self::Rad => tomors_io::AngleUnit::Radians,
            Self::Deg => tomors_io::AngleUnit::Degrees,
        }
    }
}

/// Arguments of `tomors info`.
#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// An HDF5 file (DXchange, NXtomo), a TIFF stack (directory, glob or
    /// multi-page file) or an .npy file.
    pub input: PathBuf,
    #[command(flatten)]
    pub io: InputArgs,
    /// Unit of the angles stored in an HDF5 file (default: its `units`
    /// attribute, else degrees).
    #[arg(long, value_enum)]
    pub angles_unit: Option<UnitArg>,
}

/// Runs `tomors info`.
pub fn run(args: InfoArgs) -> Result<()> {
    let mut opts = args.io.open_options();
    opts.angles_unit = args.angles_unit.map(UnitArg::to_io);
    // The library's errors name the file already.
    let (text, unreadable) = tomors_io::info::describe_checked(&args.input, &opts)?;
    print!("{text}");
    match unreadable {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
