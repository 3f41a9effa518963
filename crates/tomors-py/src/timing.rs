//! `TOMORS_TIMING=1`: the wall time of each phase of a call, printed to
//! stderr in one line when the call ends, so that a run on the GPU machine
//! shows where the time of `tomors.recon` goes (the Rust example
//! `fbp_timing` prints the same phases for the same loop without Python).

use std::time::Instant;

/// Whether `TOMORS_TIMING` asks for the phase times (set and not `0`).
pub fn enabled() -> bool {
    std::env::var("TOMORS_TIMING").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Wall times of named phases (summed over repeats of a phase).
pub struct Phases {
    what: &'static str,
    on: bool,
    start: Instant,
    last: Instant,
    laps: Vec<(&'static str, f64)>,
    notes: Vec<String>,
}

impl Phases {
    /// Starts timing the call `what` (a no-op unless [`enabled`]).
    pub fn new(what: &'static str) -> Self {
        let now = Instant::now();
        Self {
            what,
            on: enabled(),
            start: now,
            last: now,
            laps: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Whether the phases are printed.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Adds the time since the previous lap to the phase `name`.
    pub fn lap(&mut self, name: &'static str) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        let dt = (now - self.last).as_secs_f64();
        self.last = now;
        match self.laps.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += dt,
            None => self.laps.push((name, dt)),
        }
    }

    /// Adds a free-form note to the printed line (built only when on).
    pub fn note(&mut self, f: impl FnOnce() -> String) {
        if self.on {
            self.notes.push(f());
        }
    }

    /// Prints `tomors timing WHAT: total T s; phase t s, ...; notes`.
    pub fn print(&self) {
        if !self.on {
            return;
        }
        let laps: Vec<String> = self
            .laps
            .iter()
            .map(|(n, t)| format!("{n} {t:.4}"))
            .collect();
        let mut line = format!(
            "tomors timing {}: total {:.4} s; {}",
            self.what,
            self.start.elapsed().as_secs_f64(),
            laps.join(", ")
        );
        for n in &self.notes {
            line.push_str("; ");
            line.push_str(n);
        }
        eprintln!("{line}");
    }
}
