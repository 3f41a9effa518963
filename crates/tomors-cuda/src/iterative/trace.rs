//! Opt-in wall-clock trace of the phases of a GPU run (`TOMORS_TRACE=1`):
//! one line per phase on standard error, for the benchmarks' breakdowns.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `TOMORS_TRACE=1` is set (read once).
fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("TOMORS_TRACE").is_ok_and(|v| v == "1"))
}

/// A phase clock: [`Phases::mark`] prints the seconds since the previous
/// mark (or the start) under a label, when tracing is on.
pub(crate) struct Phases {
    what: &'static str,
    last: Instant,
}

impl Phases {
    /// Starts the clock of the run `what`.
    pub(crate) fn start(what: &'static str) -> Self {
        Self {
            what,
            last: Instant::now(),
        }
    }

    /// Prints `[trace] what: label S s` (since the last mark) and restarts.
    pub(crate) fn mark(&mut self, label: &str) {
        if enabled() {
            let now = Instant::now();
            eprintln!(
                "[trace] {}: {label} {:.4} s",
                self.what,
                (now - self.last).as_secs_f64()
            );
            self.last = now;
        }
    }
}
