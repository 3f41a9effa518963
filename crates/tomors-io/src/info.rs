//! `tomors info`: what is in a file and how tomors would read it.

use std::fmt::Write;
use std::path::Path;

use crate::error::Result;
use crate::hdf5io::{exists, filter_name, open_file};
use crate::source::{input_kind, open, InputKind, OpenOptions};

/// Lists the datasets of an HDF5 file (path, shape, type, filters), at most
/// `limit` entries.
pub fn list_hdf5(path: &Path, limit: usize) -> Result<Vec<String>> {
    let f = open_file(path)?;
    let mut out = Vec::new();
    walk(&f, "/", 0, limit, &mut out);
    Ok(out)
}

fn walk(f: &hdf5::File, group: &str, depth: usize, limit: usize, out: &mut Vec<String>) {
    if depth > 8 || out.len() >= limit {
        return;
    }
    let Ok(g) = f.group(group) else { return };
    let mut names = g.member_names().unwrap_or_default();
    names.sort();
    for n in names {
        if out.len() >= limit {
            out.push("… (more entries not listed)".into());
            return;
        }
        let p = format!("{}/{}", group.trim_end_matches('/'), n);
        if !exists(f, &p) {
            out.push(format!("{p}  (broken link)"));
            continue;
        }
        if let Ok(ds) = f.dataset(&p) {
            let dtype = ds
                .dtype()
                .and_then(|t| t.to_descriptor())
                .map(|d| d.to_string())
                .unwrap_or_else(|_| "unknown type".into());
            let filters: Vec<String> = ds
                .filters()
                .iter()
                .map(|fl| {
                    let name = filter_name(fl.id());
                    if fl.is_available() {
                        name.to_string()
                    } else {
                        format!("{name} (id {}, NOT AVAILABLE)", fl.id())
                    }
                })
                .collect();
            let mut line = format!("{p}  {:?} {dtype}", ds.shape());
            if !filters.is_empty() {
                let _ = write!(line, "  filters: {}", filters.join(", "));
            }
            out.push(line);
        } else if f.group(&p).is_ok() {
            let class = f
                .group(&p)
                .ok()
                .and_then(|g| crate::hdf5io::attr_string(&g, "NX_class"))
                .map(|c| format!("  [{c}]"))
                .unwrap_or_default();
            out.push(format!("{p}/{class}"));
            walk(f, &p, depth + 1, limit, out);
        }
    }
}

/// A printable description of `path`: its format, its content (datasets of
/// HDF5 files) and, when tomors can read it as a scan, the reader used, the
/// shape, angle range, flat/dark counts; otherwise why it cannot.
pub fn describe(path: &Path, options: &OpenOptions) -> Result<String> {
    describe_checked(path, options).map(|(s, _)| s)
}

/// As [`describe`], and the error that keeps tomors from reading `path`
/// as a scan, if any (`tomors info` prints the description, then fails with
/// it).
pub fn describe_checked(
    path: &Path,
    options: &OpenOptions,
) -> Result<(String, Option<crate::IoError>)> {
    let kind = input_kind(path, options)?;
    let mut s = String::new();
    let _ = writeln!(s, "{}", path.display());
    let _ = writeln!(
        s,
        "  format: {}",
        match kind {
            InputKind::Hdf5 => "HDF5",
            InputKind::Tiff => "TIFF",
            InputKind::Npy => "NumPy .npy",
            InputKind::Raw => "raw binary",
        }
    );
    match kind {
        InputKind::Hdf5 => {
            let _ = writeln!(s, "  datasets:");
            for l in list_hdf5(path, 200)? {
                let _ = writeln!(s, "    {l}");
            }
        }
        InputKind::Npy => {
            let h = crate::npy::read_npy_header(path)?;
            let _ = writeln!(
                s,
                "  array: shape {:?}, dtype '{}', {} order",
                h.shape,
                h.descr,
                if h.fortran_order { "Fortran" } else { "C" }
            );
        }
        _ => {}
    }
    match open(path, options) {
        Ok(src) => {
            // The data must read too (a truncated or damaged dataset opens).
            let [_, nr, _] = src.shape();
            if let Err(e) = src.read_raw(0..nr.min(1)) {
                let _ = writeln!(s, "  tomors cannot read its data: {e}");
                return Ok((s, Some(e)));
            }
            let [na, nr, nc] = src.shape();
            let a = src.angles();
            let (lo, hi) = a
                .iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &x| {
                    (l.min(x), h.max(x))
                });
            let _ = writeln!(s, "  read by tomors as: {}", src.format());
            let _ = writeln!(s, "  projections: {na} angles × {nr} rows × {nc} columns");
            let step = if na > 1 {
                (hi - lo) / (na - 1) as f32
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "  angles: {:.3}° … {:.3}° (range {:.3}°, mean step {:.4}°){}",
                lo.to_degrees(),
                hi.to_degrees(),
                (hi - lo).to_degrees(),
                step.to_degrees(),
                if hi - lo > std::f32::consts::PI + 0.5 * step {
                    ", a 360° scan"
                } else {
                    ""
                }
            );
            let _ = writeln!(s, "  flats: {}, darks: {}", src.n_flats(), src.n_darks());
            let _ = writeln!(
                s,
                "  preprocessing by default: {}",
                if src.n_flats() > 0 {
                    "flat/dark normalisation, −log"
                } else if src.n_darks() > 0 {
                    "dark subtraction only (no flats), no −log"
                } else {
                    "none (data taken as line integrals)"
                }
            );
        }
        Err(e) => {
            let _ = writeln!(s, "  tomors cannot read it as a scan: {e}");
            return Ok((s, Some(e)));
        }
    }
    Ok((s, None))
}
