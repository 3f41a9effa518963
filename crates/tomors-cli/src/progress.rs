//! Progress bars (indicatif), silenced by `--quiet`.

use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::{ProgressBar, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences every progress bar made afterwards.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress bars are silenced.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn is_quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A bar counting `total` items of `unit`; hidden when quiet (and by
/// indicatif itself when stderr is no terminal).
pub fn bar(total: u64, message: &str, unit: &str) -> ProgressBar {
    if QUIET.load(Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let template = format!(
        "{{msg:>14}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{elapsed_precise}} (ETA {{eta}})"
    );
    bar.set_style(
        ProgressStyle::with_template(&template)
            .expect("the template is valid")
            .progress_chars("=> "),
    );
    bar.set_message(message.to_string());
    bar
}

/// A spinner for work of unknown length; hidden when quiet.
pub fn spinner(message: &str) -> ProgressBar {
    if QUIET.load(Ordering::Relaxed) {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed_precise}")
            .expect("the template is valid"),
    );
    bar.set_message(message.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(100));
    bar
}
