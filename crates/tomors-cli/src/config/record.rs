//! The effective configuration of a run, as TOML text kept in its outputs:
//! every option given (on the command line or in a configuration file) or
//! defaulted by clap, with paths made absolute; the tomors version; the
//! inputs' identity. Reading it back with [`super::file`] gives the same
//! options, so `--config-from OUTPUT` repeats the run.

use std::path::Path;

use anyhow::Result;
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Serialize;

use super::identity::InputIdentity;
use super::merge::{option_name, recon_command, NOT_IN_CONFIG};

/// Options whose values are paths (recorded absolute).
pub const PATH_OPTIONS: [&str; 5] = ["input", "out", "angles", "flats", "darks"];

/// Inputs whose identity is recorded (role = option name).
pub const INPUT_OPTIONS: [&str; 4] = ["input", "angles", "flats", "darks"];

/// Options not recorded: they choose what happens to an existing output,
/// not what is computed.
const NOT_RECORDED: [&str; 1] = ["overwrite"];

#[derive(Serialize)]
struct Tool {
    version: &'static str,
}

#[derive(Serialize)]
struct Record {
    tomors: Tool,
    recon: toml::Table,
    inputs: Vec<InputIdentity>,
}

/// An option value as TOML: an integer or a float when it prints back to
/// the same text, else the text itself (so reading it back is exact).
fn toml_value(s: &str) -> toml::Value {
    if let Ok(i) = s.parse::<i64>() {
        if i.to_string() == s {
            return toml::Value::Integer(i);
        }
    }
    if let Ok(f) = s.parse::<f64>() {
        if f.is_finite() && f.to_string() == s {
            return toml::Value::Float(f);
        }
    }
    toml::Value::String(s.to_owned())
}

fn absolute(p: &str) -> String {
    std::path::absolute(Path::new(p))
        .map(|a| a.display().to_string())
        .unwrap_or_else(|_| p.to_owned())
}

/// The recorded options of the recon matches `m`.
pub fn options(m: &ArgMatches) -> toml::Table {
    let mut table = toml::Table::new();
    for arg in recon_command().get_arguments() {
        let name = option_name(arg);
        let id = arg.get_id().as_str();
        if NOT_IN_CONFIG.contains(&name.as_str())
            || NOT_RECORDED.contains(&name.as_str())
            || matches!(name.as_str(), "help" | "version")
        {
            continue;
        }
        let source = m.value_source(id);
        if !matches!(
            source,
            Some(ValueSource::CommandLine | ValueSource::DefaultValue)
        ) {
            continue;
        }
        if !arg.get_action().takes_values() {
            if source == Some(ValueSource::CommandLine) && m.get_flag(id) {
                table.insert(name, toml::Value::Boolean(true));
            }
            continue;
        }
        let Some(raw) = m.get_raw(id).and_then(|mut v| v.next()) else {
            continue;
        };
        let raw = raw.to_string_lossy();
        let value = if PATH_OPTIONS.contains(&name.as_str()) {
            toml::Value::String(absolute(&raw))
        } else {
            toml_value(&raw)
        };
        table.insert(name, value);
    }
    table
}

/// The identities of the inputs named in `options`.
pub fn inputs(options: &toml::Table) -> Result<Vec<InputIdentity>> {
    let mut out = Vec::new();
    for role in INPUT_OPTIONS {
        if let Some(toml::Value::String(p)) = options.get(role) {
            if let Some(id) = InputIdentity::of(role, Path::new(p))? {
                out.push(id);
            }
        }
    }
    Ok(out)
}

/// The whole record as TOML text, starting with
/// [`tomors_io::provenance::CONFIG_HEADER`].
pub fn text(m: &ArgMatches) -> Result<String> {
    let recon = options(m);
    let record = Record {
        tomors: Tool {
            version: env!("CARGO_PKG_VERSION"),
        },
        inputs: inputs(&recon)?,
        recon,
    };
    let body = toml::to_string(&record)?;
    Ok(format!(
        "{}\n# Re-run: tomors recon --config-from OUTPUT --out NEW (or --config THIS_FILE).\n\n{body}",
        tomors_io::provenance::CONFIG_HEADER
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_exactly() {
        assert_eq!(toml_value("50"), toml::Value::Integer(50));
        assert_eq!(toml_value("1021.5"), toml::Value::Float(1021.5));
        assert_eq!(toml_value("-0.25"), toml::Value::Float(-0.25));
        for s in ["1e3", "2.0", "007", "10:20", "0.2,0.3", "hann", "1.10"] {
            assert_eq!(toml_value(s), toml::Value::String(s.into()), "{s}");
        }
    }
}
