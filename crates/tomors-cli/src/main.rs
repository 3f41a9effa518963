//! `tomors`: tomographic reconstruction from the command line.

mod backend_select;
mod cmd;
mod config;
mod cuda_cli;
mod iteration_report;
mod job;
#[cfg(feature = "mpi")]
mod mpi_recon;
mod output;
mod plot;
mod progress;
mod run;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Fast tomographic reconstruction (FBP) on NVIDIA GPUs and multi-core CPUs.
#[derive(Parser)]
#[command(name = "tomors", version, about, propagate_version = true)]
struct Cli {
    /// Print only warnings and errors (no progress bars).
    #[arg(short, long, global = true)]
    quiet: bool,
    /// More log output (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// 3D Shepp-Logan phantom → exact projections → FBP → PNG previews, quality and speed.
    Demo(cmd::demo::DemoArgs),
    /// Write exact projections of a Shepp-Logan phantom (and its angles) as .npy.
    Phantom(cmd::phantom::PhantomArgs),
    /// Reconstruct projections [angle][row][col]: FBP, cone-beam FDK or an iterative method.
    Recon(Box<cmd::recon::ReconArgs>),
    /// Back-projection speed (GU/s) on synthetic data, several sizes.
    Bench(cmd::bench::BenchArgs),
    /// Time the GPU kernels and their parameters here; store the fastest for recon.
    Tune(cmd::tune::TuneArgs),
    /// Predict each GPU back-projection kernel's time from the device's unit rates; print it beside the measurement.
    Model(cmd::model::ModelArgs),
    /// What is in a data file (datasets, shapes, angles, flats/darks) and how tomors reads it.
    Info(cmd::info::InfoArgs),
    /// Find the rotation centre; print it with a quality figure and write a PNG strip of trials.
    Center(cmd::center::CenterArgs),
}

fn main() -> ExitCode {
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        // Help and version go to stdout as clap writes them.
        Err(err) if !err.use_stderr() => err.exit(),
        Err(err) => {
            eprintln!("error: {}", usage_error_line(&err));
            return ExitCode::from(2);
        }
    };
    // Under mpirun, ranks other than 0 log warnings only, prefixed with
    // their rank, and show no progress bar.
    #[cfg(feature = "mpi")]
    let other_rank = tomors_mpi::log::init_rank_logging();
    #[cfg(not(feature = "mpi"))]
    let other_rank = false;
    if !other_rank {
        init_logging(cli.quiet, cli.verbose);
    }
    // Ctrl-C, SIGTERM, SIGHUP: remove unfinished outputs, exit 130/143/129.
    if let Err(e) = tomors_io::output::install_interrupt_cleanup() {
        tracing::warn!("cannot handle interrupts ({e}): an interrupted run may leave a temporary");
    }
    progress::set_quiet(cli.quiet || other_rank);
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Phantom(args) => cmd::phantom::run(args),
        Command::Recon(args) => {
            let recon = matches
                .subcommand_matches("recon")
                .expect("the recon subcommand's matches");
            config::run_recon(*args, recon)
        }
        Command::Bench(args) => cmd::bench::run(args),
        Command::Tune(args) => cmd::tune::run(&args),
        Command::Model(args) => cmd::model::run(&args),
        Command::Info(args) => cmd::info::run(args),
        Command::Center(args) => cmd::center::run(args),
    };
    // INFO: shown at the default verbosity, hidden by --quiet.
    if let Some(line) = tomors_cuda::compile::cache_summary() {
        tracing::info!("{line}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One line: the context chain joined by ": ".
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// A command-line usage error in one line: clap's message without the
/// usage block and the pointer to `--help`.
fn usage_error_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut parts = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if !line.is_empty() && !line.starts_with("tip:") {
            parts.push(line.trim_start_matches("error: "));
        }
    }
    parts.join(" ")
}

fn init_logging(quiet: bool, verbose: u8) {
    let default = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOMORS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .without_time()
        .with_writer(std::io::stderr)
        .init();
}
