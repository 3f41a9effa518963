//! Interrupts: SIGINT, SIGTERM and SIGHUP remove every live temporary and
//! end the process with 128 + the signal number (130, 143, 129).

use super::staged::live;

/// Removes every live temporary output of this process and refuses new ones
/// and commits from then on; returns how many were removed. Called by the
/// interrupt handler; callable by embedders with their own handlers.
pub fn remove_live_temporaries() -> usize {
    let mut l = live();
    l.closing = true;
    let entries = std::mem::take(&mut l.entries);
    let mut n = 0;
    for (_, p) in entries {
        // A writer may still add a file to a directory being removed: retry.
        for _ in 0..5 {
            let r = match std::fs::symlink_metadata(&p) {
                Err(_) => break,
                Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
                Ok(_) => std::fs::remove_file(&p),
            };
            if r.is_ok() {
                n += 1;
                break;
            }
        }
    }
    n
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP (a thread of
/// `signal-hook`): on the first, the live temporaries are removed (see
/// [`remove_live_temporaries`]), a line is printed to stderr and the
/// process exits at once with 128 + the signal number, without running
/// exit handlers (the HDF5 library's could touch files being written).
pub fn install_interrupt_cleanup() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("tomors-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let n = remove_live_temporaries();
                let name = match sig {
                    SIGINT => "SIGINT",
                    SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                };
                let msg =
                    format!("\nerror: interrupted by {name}; removed {n} unfinished output(s)\n");
                // SAFETY: writing a buffer to fd 2 and ending the process;
                // `_exit` skips exit handlers on purpose (see above).
                unsafe {
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                    libc::_exit(128 + sig);
                }
            }
        })?;
    Ok(())
}
