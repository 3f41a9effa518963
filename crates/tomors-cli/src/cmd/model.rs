//! `tomors model`: the back-projection performance model (the seeds' model,
//! `tomors_cuda::tune::perf`): measures the texture fetch rate, predicts every
//! kernel configuration's time from the unit rates and prints the
//! prediction beside the measurement.

use anyhow::{bail, Context, Result};
use tomors_cuda::tune::perf::DeviceRates;
use tomors_cuda::tune::{model, ModelOptions};

/// Arguments of `tomors model`.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// The GPU to model.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Timed problem: n bins × n angles → n² slices.
    #[arg(long, default_value_t = 2048)]
    pub size: usize,
    /// Slices per launch (a multiple of 4).
    #[arg(long, default_value_t = 8)]
    pub slices: usize,
    /// Timed launches per configuration (median kept).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// The reduced candidate grid of `tune --quick`.
    #[arg(long)]
    pub quick: bool,
    /// Texture fetch rate in Gfetch/s (default: measured with tex-opt f32).
    #[arg(long)]
    pub tex_rate: Option<f64>,
    /// Shared-memory bandwidth in GB/s (default: 128 B/clock/SM at 1.98 GHz).
    #[arg(long)]
    pub smem_bw: Option<f64>,
    /// FP32 instruction rate in G/s, an FMA counted once (default: 128/clock/SM).
    #[arg(long)]
    pub fp_rate: Option<f64>,
}

/// Runs `tomors model`.
pub fn run(args: &ModelArgs) -> Result<()> {
    if args.size < 64 || args.reps == 0 || args.slices == 0 || !args.slices.is_multiple_of(4) {
        bail!("--size must be at least 64, --reps at least 1, --slices a multiple of 4");
    }
    let overrides = [args.tex_rate, args.smem_bw, args.fp_rate];
    if overrides
        .iter()
        .flatten()
        .any(|&r| !(r.is_finite() && r > 0.0))
    {
        bail!("--tex-rate, --smem-bw and --fp-rate must be positive");
    }
    // Any rate given: all others from the defaults, nothing measured.
    let rates = overrides.iter().any(Option::is_some).then(|| {
        let d = DeviceRates::hopper();
        DeviceRates {
            tex: args.tex_rate.map_or(d.tex, |r| r * 1e9),
            smem: args.smem_bw.map_or(d.smem, |r| r * 1e9),
            fp: args.fp_rate.map_or(d.fp, |r| r * 1e9),
            ..d
        }
    });
    let opts = ModelOptions {
        device: args.device,
        size: args.size,
        slices: args.slices,
        reps: args.reps,
        quick: args.quick,
        rates,
    };
    let rep = model(&opts, &mut |line| eprintln!("{line}"))
        .with_context(|| format!("modelling CUDA device {}", args.device))?;
    let r = rep.rates;
    println!(
        "device {}; rates: texture {:.0} Gfetch/s ({}), shared memory {:.0} GB/s, FP32 {:.0} G/s, conversions {:.0} G/s, issue {:.0} G/s",
        rep.device,
        r.tex / 1e9,
        if rep.tex_measured { "measured" } else { "given/default" },
        r.smem / 1e9,
        r.fp / 1e9,
        r.conv / 1e9,
        r.issue / 1e9
    );
    println!(
        "{n} bins × {n} angles → {s} slices of {n}²",
        n = args.size,
        s = args.slices
    );
    println!(
        "{:<36} {:<8} {:>12} {:>10} {:<11} {:>12} {:>10} {:>9}",
        "kernel", "interp", "pred ms", "pred GU/s", "limit", "meas ms", "meas GU/s", "meas/pred"
    );
    for row in &rep.rows {
        println!(
            "{:<36} {:<8} {:>12.3} {:>10.1} {:<11} {:>12.3} {:>10.1} {:>9.2}",
            row.config.to_string(),
            row.interp.to_string(),
            row.predicted.seconds * 1e3,
            row.predicted.gups,
            row.predicted.limit.to_string(),
            row.measured.ms,
            row.measured.gups,
            row.measured.ms / (row.predicted.seconds * 1e3)
        );
    }
    Ok(())
}
