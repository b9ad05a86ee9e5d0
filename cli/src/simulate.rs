//! `volcano-rs simulate`: manifests scheduled on an in-memory cluster (`volcano-sim`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use volcano_sim::{normalise_for, FieldValidation, Manifest, SimError, Simulator};

use crate::load_profile;

#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
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
    /// Schedule the pods whose spec.schedulerName is this (repeatable), as the scheduler's
    /// --scheduler-name does; `--scheduler-name volcano` runs manifests written for Volcano.
    #[arg(long = "scheduler-name", value_name = "NAME", default_value = "volcano-rs")]
    scheduler_names: Vec<String>,
    /// Fields an object's type does not have: an error (strict, kubectl's default), a
    /// warning on stderr (warn), or dropped silently (ignore).
    #[arg(long, value_enum, default_value_t = Validate::Strict)]
    validate: Validate,
    /// Write Volcano's metrics (the Prometheus text exposition a scheduler serves on
    /// /metrics, after the last cycle) to FILE; - writes them to standard output after
    /// the report.
    #[arg(long, value_name = "FILE")]
    metrics: Option<PathBuf>,
    /// Manifest files: YAML (multi-document) or JSON, a List included; a directory reads its
    /// .yaml, .yml and .json files; - reads standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Validate {
    /// Unknown fields are errors.
    Strict,
    /// Unknown fields are reported and dropped.
    Warn,
    /// Unknown fields are dropped.
    Ignore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// A readable report.
    Table,
    /// JSON: cycles, pods, podGroups, queues, jobs.
    Json,
    /// YAML, the same structure as JSON.
    Yaml,
}

pub(crate) fn simulate(args: &SimulateArgs) -> anyhow::Result<String> {
    let profile = load_profile(args.config.as_deref())?;
    let start = Instant::now();
    let validation = match args.validate {
        Validate::Strict => FieldValidation::Strict,
        Validate::Warn => FieldValidation::Warn,
        Validate::Ignore => FieldValidation::Ignore,
    };
    let manifest = Manifest::from_paths_with(&args.files, validation).map_err(SimError::from)?;
    tracing::info!(objects = manifest.entries.len(), elapsed = ?start.elapsed(), "manifests read");
    for w in &manifest.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(line) = manifest.skipped_summary() {
        eprintln!("{line}");
    }
    let start = Instant::now();
    let normalised = normalise_for(manifest, &args.scheduler_names).map_err(SimError::from)?;
    let mut sim = Simulator::from_normalised(normalised, profile)?;
    if args.metrics.is_some() {
        sim.enable_metrics();
    }
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
    let mut text = text;
    if let (Some(path), Some(metrics)) = (&args.metrics, sim.metrics_text()) {
        if path.as_os_str() == "-" {
            text.push_str(&metrics);
        } else {
            std::fs::write(path, metrics).with_context(|| format!("cannot write the metrics to {}", path.display()))?;
        }
    }
    // The process ends next: freeing a large cluster object by object only costs time.
    std::mem::forget(sim);
    Ok(text)
}
