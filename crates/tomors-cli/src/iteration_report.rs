//! What the iterative commands tell the user: the per-iteration progress
//! (bar position and a debug line with the residual) and the closing log
//! line, shared by the CPU and GPU paths of parallel and cone beam.

use indicatif::ProgressBar;
use tomors_core::iterative::{IterationInfo, IterativeResult};

/// Records iteration `iteration` with its relative residual, if known.
pub fn step(bar: &ProgressBar, iteration: usize, residual: Option<f64>) {
    bar.set_position(iteration as u64);
    if let Some(r) = residual {
        tracing::debug!("iteration {iteration}: relative residual {r:.3e}");
    }
}

/// The CPU methods' per-iteration callback (never stops them).
pub fn cpu_callback(bar: &ProgressBar) -> impl FnMut(&IterationInfo<'_, f32>) -> bool + '_ {
    move |info| {
        step(bar, info.iteration, info.residual);
        true
    }
}

/// Clears `bar` and logs how the iteration ended: `where_` ("on the CPU",
/// "on the GPU (…)"), the wall time and the final relative residual.
pub fn finished(bar: &ProgressBar, result: &IterativeResult<f32>, where_: &str, seconds: f64) {
    bar.finish_and_clear();
    tracing::info!(
        "{} iterations {where_} (λ = {:.4e}, stopped: {:?}) in {seconds:.2} s, final relative residual {}",
        result.iterations,
        result.relaxation,
        result.stop,
        result
            .residuals
            .last()
            .map_or("–".to_string(), |r| format!("{r:.3e}"))
    );
}
