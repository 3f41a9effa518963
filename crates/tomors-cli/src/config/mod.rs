//! Configuration files and provenance of `tomors recon`.
//!
//! - [`file`]: a TOML file of recon options (`--config rec.toml`, or the
//!   configuration recorded in an output, `--config-from OUTPUT`); its keys
//!   are the long flag names (`filter = "hann"`, `center = 1021.5`,
//!   `no-flat-dark = true`, `input = "scan.h5"`); unknown keys are errors.
//! - [`merge`]: the file's options under the command line's (a flag given
//!   on the command line wins), parsed by the same clap definitions as the
//!   flags, so a file can say exactly what the flags can.
//! - [`record`]: the effective configuration of a run as TOML (every option
//!   given or defaulted, paths made absolute, the tomors version, the
//!   inputs' identity), which every output keeps (see
//!   [`tomors_io::provenance`]).
//! - [`identity`]: an input file's identity (path, size, modification
//!   time, BLAKE3 of its first and last MiB), checked by `--config-from`.

pub mod file;
pub mod identity;
pub mod merge;
pub mod record;

use anyhow::Result;
use clap::ArgMatches;

use crate::cmd::recon::ReconArgs;

/// Runs `tomors recon`: the flags (over `--config` or `--config-from`'s
/// options) → job → run; `matches` are the recon subcommand's, for which
/// options the command line gave.
pub fn run_recon(args: ReconArgs, matches: &ArgMatches) -> Result<()> {
    let (args, matches) = match (&args.config, &args.config_from) {
        (Some(path), _) => {
            let config = file::read(path, &merge::known())?;
            merge::merge(matches, &config, path)?
        }
        (None, Some(output)) => {
            let text = tomors_io::provenance::read_config(output)?;
            let config = file::parse(&text, output, &merge::known())?;
            let (args, m) = merge::merge(matches, &config, output)?;
            // The recorded inputs this run reads again must be unchanged.
            let now = record::options(&m);
            for id in &config.inputs {
                if now.get(&id.role).and_then(|v| v.as_str()) == Some(id.path.as_str()) {
                    id.verify(output)?;
                }
            }
            (args, m)
        }
        (None, None) => (args, matches.clone()),
    };
    let provenance = record::text(&matches)?;
    let mut job = args.job()?;
    job.output.provenance = Some(provenance);
    crate::run::run(&job)
}
