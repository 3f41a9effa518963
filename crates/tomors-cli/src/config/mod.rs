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
