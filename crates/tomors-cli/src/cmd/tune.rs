//! `tomors tune`: times the GPU back-projection kernels and their parameters
//! on this device and stores the fastest per (device, driver, kernel,
//! interpolation, slices) in the tuning cache that `recon` and `demo` read.

use anyhow::{Context, Result};
use tomors_cuda::tune::{tune, TuneOptions};
use tomors_cuda::tuning::TuningCache;

/// Arguments of `tomors tune`.
#[derive(clap::Args, Debug)]
pub struct TuneArgs {
    /// The GPU to tune.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Timed problem: n bins × n angles → n² slices.
    #[arg(long, default_value_t = 2048)]
    pub size: usize,
    /// Timed launches per candidate (median kept).
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// A reduced search (seconds instead of about a minute).
    #[arg(long)]
    pub quick: bool,
    /// Where to store the results (default: $TOMORS_TUNING_FILE, else
    /// tuning.tsv in the kernel cache directory).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Skip candidates the performance model predicts more than this many
    /// times slower than the best of their family (0: time all; see `tomors model`).
    #[arg(long, default_value_t = 1.5)]
    pub prune: f64,
    /// Measure and print only; leave the tuning cache alone.
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `tomors tune`.
pub fn run(args: &TuneArgs) -> Result<()> {
    if args.size < 64 || args.reps == 0 {
        anyhow::bail!("--size must be at least 64 and --reps at least 1");
    }
    if !(args.prune == 0.0 || (args.prune.is_finite() && args.prune >= 1.0)) {
        anyhow::bail!("--prune must be 0 (off) or a factor of at least 1");
    }
    let path = match &args.out {
        Some(p) => p.clone(),
        None => TuningCache::default_path()
            .context("no place for the tuning cache: set TOMORS_TUNING_FILE or HOME")?,
    };
    // Read the old cache first: a damaged file fails before the search.
    let mut cache = TuningCache::load(&path)?;
    let opts = TuneOptions {
        device: args.device,
        size: args.size,
        reps: args.reps,
        quick: args.quick,
        prune: args.prune,
        rates: None,
    };
    let report = tune(&opts, &mut |line| eprintln!("{line}"))
        .with_context(|| format!("tuning CUDA device {}", args.device))?;
    println!(
        "device {} (driver {}), {n} bins × {n} angles → {n}², GU/s per family:",
        report.device,
        report.driver,
        n = args.size
    );
    println!(
        "{:<8} {:>6}  {:<16} {:<40} {:>9}",
        "interp", "slices", "kernel", "best configuration", "GU/s"
    );
    for e in &report.entries {
        println!(
            "{:<8} {:>6}  {:<16} {:<40} {:>9.1}",
            e.interp.to_string(),
            e.slices,
            e.kernel,
            e.config.to_string(),
            e.gups
        );
    }
    if !report.pruned.is_empty() {
        println!(
            "{} candidates skipped (model predicts > {:.2}× the best of their family)",
            report.pruned.len(),
            args.prune
        );
    }
    println!("default vs tuned choice (exact kernels), timed again side by side:");
    for (interp, class, d, dg, c, cg) in &report.check {
        println!(
            "{:<8} {:>6}  default {:<28} {:>8.1} GU/s   tuned {:<36} {:>8.1} GU/s ({:.2}×)",
            interp.to_string(),
            class,
            d.to_string(),
            dg,
            c.to_string(),
            cg,
            cg / dg
        );
    }
    if args.dry_run {
        println!("--dry-run: {} left unchanged", path.display());
        return Ok(());
    }
    cache.merge(report.entries);
    cache.save(&path)?;
    println!("wrote {} ({} entries)", path.display(), cache.entries.len());
    Ok(())
}
