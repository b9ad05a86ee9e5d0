//! `volcano-rs`: the volcano-rs command.
//!
//! Subcommands:
//! - `simulate`: schedule Kubernetes manifests on an in-memory cluster with the real
//!   scheduling core (see `docs/simulate.md` and the `volcano-sim` crate).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tracing_subscriber::EnvFilter;
use volcano_framework::{Profile, Registries};
use volcano_sim::{Manifest, SimError, Simulator};

/// Exit code for invalid input: manifests, configuration, unreadable files.
const EXIT_INPUT: u8 = 1;
/// Exit code when the simulation caught the scheduler breaking an invariant.
const EXIT_SCHEDULER_BUG: u8 = 3;

#[derive(Parser, Debug)]
#[command(name = "volcano-rs", version, about = "volcano-rs: a batch and gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Schedule Kubernetes manifests on a simulated cluster, without a cluster.
    Simulate(SimulateArgs),
}

#[derive(Args, Debug)]
struct SimulateArgs {
    /// A Volcano scheduler configuration file (volcano-scheduler.conf); default: the built-in
    /// configuration.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run exactly N scheduling cycles; default: until a cycle changes nothing, at most 100.
    #[arg(long, value_name = "N")]
    cycles: Option<u32>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Manifest files: YAML (multi-document) or JSON, a List included; a directory reads its
    /// .yaml, .yml and .json files; - reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// A readable report.
    Table,
    /// JSON: cycles, pods, podGroups, queues.
    Json,
    /// YAML, the same structure as JSON.
    Yaml,
}

fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}

fn simulate(args: &SimulateArgs) -> anyhow::Result<String> {
    let registries = registries();
    let profile = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            Profile::from_yaml(&text, &registries).with_context(|| format!("{}", path.display()))?
        }
        None => Profile::builtin_default(&registries).context("the built-in scheduler configuration")?,
    };
    let start = Instant::now();
    let manifest = Manifest::from_paths(&args.files).map_err(SimError::from)?;
    tracing::info!(objects = manifest.entries.len(), elapsed = ?start.elapsed(), "manifests read");
    let start = Instant::now();
    let mut sim = Simulator::new(manifest, profile)?;
    tracing::info!(elapsed = ?start.elapsed(), "cluster normalised and validated");
    let start = Instant::now();
    sim.run(args.cycles)?;
    tracing::info!(cycles = sim.history().len(), elapsed = ?start.elapsed(), "simulation done");
    let start = Instant::now();
    let report = sim.report();
    let text = match args.output {
        Output::Table => report.to_table(),
        Output::Json => report.to_json(),
        Output::Yaml => report.to_yaml(),
    };
    tracing::info!(elapsed = ?start.elapsed(), "report written");
    // The process ends next: freeing a large cluster object by object only costs time.
    std::mem::forget(sim);
    Ok(text)
}

/// The message and its causes, `: `-separated, without repeating a cause whose text the
/// message already contains.
fn error_chain(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let s = cause.to_string();
        if text.contains(&s) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s);
    }
    text
}

fn main() -> ExitCode {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Simulate(args) => simulate(args),
    };
    match result {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                // `volcano-rs simulate … | head` closes the pipe early: not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write the output: {e}");
                    ExitCode::from(EXIT_INPUT)
                }
            }
        }
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            let bug = err.downcast_ref::<SimError>().is_some_and(SimError::is_scheduler_bug);
            ExitCode::from(if bug { EXIT_SCHEDULER_BUG } else { EXIT_INPUT })
        }
    }
}
