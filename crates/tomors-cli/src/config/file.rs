//! Reading a recon configuration (TOML): the options, keyed by long flag
//! name, at the top level or under `[recon]`; `[tomors]` and `[[inputs]]`
//! (written by [`super::record`]) are read as provenance.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::identity::InputIdentity;

/// A configuration as read: the options (as the strings a flag would
/// take; `None` for a flag without value) and the recorded inputs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    /// Option name (long flag, or `input`) → value; a switch (`--no-flat-dark`)
    /// maps to `None` when true and is absent when false.
    pub options: BTreeMap<String, Option<String>>,
    /// Inputs recorded by the run that wrote this configuration.
    pub inputs: Vec<InputIdentity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolTable {
    version: String,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(default)]
    tomors: Option<ToolTable>,
    #[serde(default)]
    recon: Option<toml::Table>,
    #[serde(default)]
    inputs: Vec<InputIdentity>,
    #[serde(flatten)]
    top: toml::Table,
}

/// What the recon command accepts: option name → whether it takes a value.
pub type Known = BTreeMap<String, bool>;

/// Parses `text` (from `source`, named in errors) against the `known`
/// options.
pub fn parse(text: &str, source: &Path, known: &Known) -> Result<Config> {
    let name = source.display();
    let raw: Raw = toml::from_str(text)
        .map_err(|e| anyhow::anyhow!("{name}: not a valid configuration: {}", one_line(&e)))?;
    if let Some(t) = &raw.tomors {
        if t.version != env!("CARGO_PKG_VERSION") {
            tracing::warn!(
                "{name}: written by tomors {}, read by {}; defaults may differ",
                t.version,
                env!("CARGO_PKG_VERSION")
            );
        }
    }
    let mut options = BTreeMap::new();
    for (key, value) in raw.top.iter().chain(raw.recon.iter().flatten()) {
        let flag = key.replace('_', "-");
        let Some(&takes_value) = known.get(&flag) else {
            bail!("{name}: unknown key '{key}' (not a `tomors recon` option)");
        };
        if options.contains_key(&flag) {
            bail!("{name}: '{key}' given twice");
        }
        let v = match (value, takes_value) {
            (toml::Value::Boolean(true), false) => Some(None),
            (toml::Value::Boolean(false), false) => None,
            (_, false) => bail!("{name}: '{key}' is a switch; give true or false"),
            (v, true) => Some(Some(
                value_text(v).with_context(|| format!("{name}: '{key}'"))?,
            )),
        };
        if let Some(v) = v {
            options.insert(flag, v);
        }
    }
    Ok(Config {
        options,
        inputs: raw.inputs,
    })
}

/// Reads and parses the file `path`.
pub fn read(path: &Path, known: &Known) -> Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the configuration", path.display()))?;
    parse(&text, path, known)
}

/// A TOML value as the text a flag takes: strings as they are, numbers
/// printed, arrays joined with commas (`pixel-size = [0.2, 0.3]`).
fn value_text(v: &toml::Value) -> Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Array(a) => a
            .iter()
            .map(value_text)
            .collect::<Result<Vec<_>>>()?
            .join(","),
        other => bail!("a {} is not an option value", other.type_str()),
    })
}

fn one_line(e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_owned();
    match e.span() {
        Some(span) => format!("{msg} (at byte {})", span.start),
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Known {
        [
            ("input", true),
            ("filter", true),
            ("center", true),
            ("pixel-size", true),
            ("no-flat-dark", false),
            ("short-scan", false),
            ("iterations", true),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    #[test]
    fn options_and_errors() {
        let c = parse(
            "input = 'a.npy'\ncenter = 10.5\npixel_size = [0.2, 0.3]\nshort-scan = true\n[recon]\niterations = 7\n",
            Path::new("rec.toml"),
            &known(),
        )
        .unwrap();
        assert_eq!(c.options["input"], Some("a.npy".into()));
        assert_eq!(c.options["center"], Some("10.5".into()));
        assert_eq!(c.options["pixel-size"], Some("0.2,0.3".into()));
        assert_eq!(c.options["short-scan"], None);
        assert_eq!(c.options["iterations"], Some("7".into()));
        let c = parse("short-scan = false", Path::new("rec.toml"), &known()).unwrap();
        assert!(c.options.is_empty());

        let e = parse("fliter = 'hann'", Path::new("rec.toml"), &known()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "rec.toml: unknown key 'fliter' (not a `tomors recon` option)"
        );
        let e = parse("[recon]\nbogus = 1", Path::new("r.toml"), &known()).unwrap_err();
        assert!(e.to_string().contains("unknown key 'bogus'"), "{e}");
        let e = parse("short-scan = 3", Path::new("r.toml"), &known()).unwrap_err();
        assert!(e.to_string().contains("is a switch"), "{e}");
        let e = parse("center = ", Path::new("r.toml"), &known()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("r.toml: not a valid configuration"),
            "{e}"
        );
        assert!(!e.to_string().contains('\n'), "{e}");
        let e = parse(
            "center = 1\n[recon]\ncenter = 2",
            Path::new("r.toml"),
            &known(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let e = parse("[inputs]\nx = 1", Path::new("r.toml"), &known()).unwrap_err();
        assert!(e.to_string().starts_with("r.toml:"), "{e}");
    }
}
