//! `tomors info FILE`: what is in a file and how tomors would read it.

use std::path::PathBuf;

use anyhow::Result;

use super::args::InputArgs;
use crate::job::input::AngleUnit;

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
    pub angles_unit: Option<AngleUnit>,
}

/// Runs `tomors info`.
pub fn run(args: InfoArgs) -> Result<()> {
    let mut opts = args.io.open_options();
    opts.angles_unit = args.angles_unit.map(AngleUnit::to_io);
    // The library's errors name the file already.
    let (text, unreadable) = tomors_io::info::describe_checked(&args.input, &opts)?;
    print!("{text}");
    match unreadable {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
