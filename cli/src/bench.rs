//! `volcano-rs bench`: its flags; what it runs is `volcano_benches::command`.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::load_profile;

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Cases to run: fill-1k, fill-5k, fill-10k, backlog-5k, steady-5k, spread-5k, hetero-1k,
    /// hetero-5k, hetero-10k, hetero-10k-idle, preempt-1k, preempt-5k, preempt-10k, topo-10k,
    /// gang-preempt-10k, preempt-shared-5k, preempt-shared-10k, hetero-rollback-10k.
    #[arg(value_name = "CASE", required_unless_present_any = ["all", "manifests"])]
    cases: Vec<String>,
    /// Run every case.
    #[arg(long, conflicts_with = "manifests")]
    all: bool,
    /// Instead of a standard case, time the cycles over these manifests (files or
    /// directories, as `simulate` reads them: a dump of your own cluster, say); reading
    /// them is timed apart.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "cases")]
    manifests: Vec<PathBuf>,
    /// With --manifests: a Volcano scheduler configuration file; default: the built-in
    /// configuration.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// With --manifests: the number of cycles, each applied before the next (default 1).
    #[arg(long, value_name = "N")]
    cycles: Option<u32>,
    /// With --manifests: schedule the pods whose spec.schedulerName is this (repeatable;
    /// default volcano-rs).
    #[arg(long = "scheduler-name", value_name = "NAME")]
    scheduler_names: Vec<String>,
    /// Print one JSON array, an object per case.
    #[arg(long)]
    json: bool,
    /// Runs per case; the run with the median cycle time is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Run the case in this process instead of a fresh child process per run (peak memory
    /// is then the process's, not the case's).
    #[arg(long)]
    in_process: bool,
    /// Keep Volcano's metrics in the measured cycles, as `volcano-rs scheduler` does (each
    /// cycle's steps timed, its outcome recorded), to see what they cost.
    #[arg(long)]
    metrics: bool,
    /// Instead of running the case, write its cluster (priority classes, namespaces,
    /// queues, nodes, PodGroups, pods) to FILE as multi-document YAML, which `bench
    /// --manifests FILE` reads back into the same cluster; `hetero-10k` gives the loading
    /// figure of docs/performance.md.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["manifests", "all"])]
    write_manifests: Option<PathBuf>,
    /// With --write-manifests: also write the case's scheduler configuration to FILE, for
    /// `bench --manifests … --config FILE`.
    #[arg(long, value_name = "FILE", requires = "write_manifests")]
    write_config: Option<PathBuf>,
}

pub(crate) fn bench(args: &BenchArgs) -> anyhow::Result<String> {
    use volcano_benches::command;
    let outcome = if !args.manifests.is_empty() {
        let profile = load_profile(args.config.as_deref())?;
        let scheduler_names =
            if args.scheduler_names.is_empty() { vec!["volcano-rs".to_string()] } else { args.scheduler_names.clone() };
        let how = command::ManifestRuns {
            files: args.manifests.clone(),
            scheduler_names,
            cycles: args.cycles.unwrap_or(1),
            runs: args.runs,
            json: args.json,
        };
        command::run_manifest_files(&how, &profile, &mut |line| eprintln!("{line}"))?
    } else if let Some(path) = &args.write_manifests {
        return Ok(command::write_case_manifests(&args.cases, path, args.write_config.as_deref())?);
    } else {
        if args.config.is_some() || args.cycles.is_some() || !args.scheduler_names.is_empty() {
            anyhow::bail!("bench: --config, --cycles and --scheduler-name apply to --manifests only");
        }
        let cases = command::cases(&args.cases, args.all)?;
        let how =
            command::CaseRuns { runs: args.runs, in_process: args.in_process, metrics: args.metrics, json: args.json };
        let exe = std::env::current_exe().context("cannot find the volcano-rs executable")?;
        command::run_cases(&cases, &how, &exe)?
    };
    if !outcome.failed.is_empty() {
        print!("{}", outcome.text);
        anyhow::bail!("bench result checks failed for: {}", outcome.failed.join(", "));
    }
    Ok(outcome.text)
}
