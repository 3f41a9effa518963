//! Memory checks before large allocations: a request larger than the memory
//! available is a one-line error instead of an allocation failure (abort,
//! exit 134, backtrace).
//!
//! The memory available is `MemAvailable` of `/proc/meminfo`, lowered to the
//! room left under a cgroup (v2) limit when the process runs in one; the
//! environment variable `TOMORS_AVAILABLE_MEMORY` (a size such as `512M`)
//! overrides it (tests, batch systems that know better). Where none of these
//! can be read, no check is made.

use std::path::Path;

use crate::error::{IoError, Result};

/// Bytes of memory this process may still allocate, if known.
pub fn available_bytes() -> Option<u64> {
    if let Ok(v) = std::env::var("TOMORS_AVAILABLE_MEMORY") {
        if let Ok(b) = crate::stream::parse_bytes(&v) {
            return Some(b as u64);
        }
    }
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let avail = meminfo.as_deref().and_then(|m| {
        m.lines()
            .find(|l| l.starts_with("MemAvailable:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    let cgroup = cgroup_room();
    match (avail, cgroup) {
        (Some(a), Some(c)) => Some(a.min(c)),
        (a, c) => a.or(c),
    }
}

/// Room under the cgroup v2 memory limit of this process, if it has one.
fn cgroup_room() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim_start_matches('/'));
    let max = std::fs::read_to_string(dir.join("memory.max")).ok()?;
    let max: u64 = max.trim().parse().ok()?; // "max": no limit
    let current: u64 = std::fs::read_to_string(dir.join("memory.current"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(max.saturating_sub(current))
}

/// Gibibytes, for messages.
pub fn gib(bytes: u64) -> String {
    let g = bytes as f64 / (1u64 << 30) as f64;
    if g >= 10.0 {
        format!("{g:.0} GiB")
    } else if g >= 0.1 {
        format!("{g:.1} GiB")
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

/// An error when `bytes` (for `what`) exceed the memory available.
pub fn check_bytes(bytes: u64, what: &str) -> std::result::Result<(), String> {
    match available_bytes() {
        Some(avail) if bytes > avail => Err(format!(
            "{what} needs {}, but only {} of memory is available",
            gib(bytes),
            gib(avail)
        )),
        _ => Ok(()),
    }
}

/// As [`check_bytes`], the error naming `path`.
pub fn ensure_fits(path: &Path, bytes: usize, what: &str) -> Result<()> {
    check_bytes(bytes as u64, what).map_err(|message| IoError::Format {
        path: path.to_path_buf(),
        message,
    })
}

/// `n` f32 values as bytes, saturating (for sizes computed from user input).
pub fn f32_bytes(dims: &[usize]) -> u64 {
    dims.iter()
        .fold(4u64, |acc, &d| acc.saturating_mul(d as u64))
}

/// As [`check_bytes`] for a parameter error (sizes asked on the command
/// line, no file involved).
pub fn ensure_fits_param(bytes: u64, what: &str) -> Result<()> {
    check_bytes(bytes, what).map_err(IoError::Parameter)
}
