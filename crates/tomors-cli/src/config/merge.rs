//! The command line over a configuration: both become one argument list
//! that the recon command's own clap definition parses, so a file option
//! is checked exactly as the flag would be.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::Path;

use anyhow::{anyhow, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::file::{Config, Known};
use crate::cmd::recon::ReconArgs;

/// Options that select a configuration and are never part of one.
pub const NOT_IN_CONFIG: [&str; 2] = ["config", "config-from"];

/// The `recon` command alone (the same definition as the subcommand's).
pub fn recon_command() -> Command {
    ReconArgs::augment_args(Command::new("recon"))
}

/// The option name of an argument: its long flag, or its id (positional).
pub fn option_name(arg: &clap::Arg) -> String {
    arg.get_long()
        .map(str::to_owned)
        .unwrap_or_else(|| arg.get_id().as_str().to_owned())
}

fn skip(arg: &clap::Arg) -> bool {
    let name = option_name(arg);
    NOT_IN_CONFIG.contains(&name.as_str()) || matches!(name.as_str(), "help" | "version")
}

/// The options a configuration may hold, and whether each takes a value.
pub fn known() -> Known {
    recon_command()
        .get_arguments()
        .filter(|a| !skip(a))
        .map(|a| (option_name(a), a.get_action().takes_values()))
        .collect()
}

fn push_tokens(tokens: &mut Vec<OsString>, arg: &clap::Arg, value: Option<&std::ffi::OsStr>) {
    match (arg.get_long(), value) {
        (None, Some(v)) => tokens.push(v.to_owned()),
        (Some(long), Some(v)) => {
            let mut t = OsString::from(format!("--{long}="));
            t.push(v);
            tokens.push(t);
        }
        (Some(long), None) => tokens.push(format!("--{long}").into()),
        (None, None) => {}
    }
}

/// `matches` (the command line) over `config` (read from `source`): the
/// recon arguments and their matches. An option given on the command line
/// replaces the file's.
pub fn merge(
    matches: &ArgMatches,
    config: &Config,
    source: &Path,
) -> Result<(ReconArgs, ArgMatches)> {
    let cmd = recon_command();
    let mut tokens: Vec<OsString> = vec!["recon".into()];
    let mut given = BTreeSet::new();
    for arg in cmd.get_arguments().filter(|a| !skip(a)) {
        let id = arg.get_id().as_str();
        if matches.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        given.insert(option_name(arg));
        if arg.get_action().takes_values() {
            for v in matches.get_raw(id).into_iter().flatten() {
                push_tokens(&mut tokens, arg, Some(v));
            }
        } else if matches.get_flag(id) {
            push_tokens(&mut tokens, arg, None);
        }
    }
    for arg in cmd.get_arguments().filter(|a| !skip(a)) {
        let name = option_name(arg);
        if given.contains(&name) {
            continue;
        }
        if let Some(v) = config.options.get(&name) {
            push_tokens(&mut tokens, arg, v.as_deref().map(std::ffi::OsStr::new));
        }
    }
    let m = cmd.try_get_matches_from(tokens).map_err(|e| {
        anyhow!(
            "{} with the command line: {}",
            source.display(),
            one_line(&e)
        )
    })?;
    let args = ReconArgs::from_arg_matches(&m)
        .map_err(|e| anyhow!("{}: {}", source.display(), one_line(&e)))?;
    Ok((args, m))
}

/// A clap error in one line, without the usage block.
fn one_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() && !line.starts_with("tip:") {
            parts.push(line.trim_start_matches("error: "));
        }
    }
    parts.join(" ")
}
