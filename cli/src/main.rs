//! `volcano-rs`: the volcano-rs command. This crate only wires subcommands to the libraries
//! that implement them, so that each shell stays a library with its own tests.
//!
//! Subcommands:
//! - `simulate`: schedule Kubernetes manifests on an in-memory cluster with the real
//!   scheduling core (see `docs/simulate.md` and the `volcano-sim` crate);
//! - `bench`: run the standard benchmark workloads (see `docs/performance.md` and the
//!   `volcano-benches` crate).
//!
//! - `scheduler`: the kube backend (`volcano-scheduler`, see `docs/scheduler.md`);
//! - `webhook`: the admission webhook (`volcano-webhook`, see `docs/webhook.md`);
//! - `controller`, `job`, `queue`: the Job controller and vcctl's commands
//!   (`volcano-controller`, see `docs/jobs.md`).
//!
//! `replay` is wired here when it lands.
//!
//! Exit codes: 0 success, 1 invalid input (manifests, configuration, unreadable files),
//! 2 invalid command line, 3 the simulation caught the scheduler breaking an invariant,
//! 4 internal error (a panic: a bug in volcano-rs).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;
use volcano_framework::Profile;
use volcano_sim::{normalise_for, FieldValidation, Manifest, SimError, Simulator};

mod bench_cluster;

/// Exit code for invalid input: manifests, configuration, unreadable files.
const EXIT_INPUT: u8 = 1;
/// Exit code when the simulation caught the scheduler breaking an invariant.
const EXIT_SCHEDULER_BUG: u8 = 3;
/// Exit code when volcano-rs panicked (a bug).
const EXIT_INTERNAL: u8 = 4;

/// The memory allocator of every subcommand: mimalloc. With glibc's, threads other than the
/// main one grow their heaps a few pages at a time (an `mprotect` per growth), and reading
/// manifests, the snapshot build and the plugins allocate from those threads. It is built
/// with `no_thp`: it does not ask the kernel for transparent huge pages, whose zeroing at a
/// first touch slowed the cycles that build and drop large snapshots. The measurements are
/// in docs/dependencies.md and docs/performance-history.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "volcano-rs", version, about = "volcano-rs: a batch and gang scheduler for Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on standard error: `text` (readable) or `json` (one JSON object per
    /// line, for log collectors). The level comes from RUST_LOG (`info` for the services,
    /// `warn` for the one-shot commands); at `debug`, each cycle, action and bind batch
    /// span is logged when it ends, with its counts and duration.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Schedule Kubernetes manifests on a simulated cluster, without a cluster.
    Simulate(SimulateArgs),
    /// Run the standard benchmark workloads (docs/performance.md) and check their results.
    Bench(BenchArgs),
    /// Schedule the pods of a cluster: watch the API server, run a cycle every
    /// --schedule-period, bind through the API (docs/scheduler.md).
    Scheduler(Box<SchedulerArgs>),
    /// The Job controller: Volcano Jobs' PodGroups, pods, plugins, lifecycle policies and
    /// Commands, a drop-in for Volcano's controller manager (docs/jobs.md).
    Controller(Box<ControllerArgs>),
    /// Volcano Jobs: run, list, view, suspend, resume, delete (vcctl's commands; docs/jobs.md).
    Job(ClusterCommand<volcano_controller::cli::JobCommand>),
    /// Queues: create, list, open, close (vcctl's commands).
    Queue(ClusterCommand<volcano_controller::cli::QueueCommand>),
    /// Admission webhook for Volcano Jobs, Queues and PodGroups over HTTPS, a drop-in for
    /// Volcano's webhook-manager (docs/webhook.md).
    Webhook(Box<WebhookArgs>),
    /// Benchmark a scheduler process against a real API server: create a cluster, then time
    /// start → first bind, binds per second and idle cycles (docs/performance.md).
    #[command(subcommand)]
    BenchCluster(bench_cluster::BenchCluster),
    /// Why is this job pending: what one scheduling cycle sees of a PodGroup or Volcano Job
    /// (admission, placements, predicate failures per node, jobs ahead, preemption), on a
    /// cluster or on manifests (docs/observability.md).
    Explain(ExplainArgs),
}

#[derive(Args, Debug)]
struct SchedulerArgs {
    #[command(flatten)]
    options: volcano_scheduler::options::SchedulerOptions,
}

/// Exit code for an invalid command line.
const EXIT_USAGE: u8 = 2;

#[derive(Args, Debug)]
struct ControllerArgs {
    #[command(flatten)]
    options: volcano_controller::ControllerOptions,
}

fn controller(args: &ControllerArgs) -> ExitCode {
    let opts = args.options.clone();
    run_service(args.options.validate(), move || volcano_controller::run(opts, volcano_kube::termination()))
}

/// Runs a long-running service (`webhook`, `controller`) once its flags are valid: a bad
/// flag exits with the usage code, a failure to start or a fatal error with the input code.
fn run_service<F, Fut, E>(flags: Result<(), impl std::fmt::Display>, service: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    if let Err(e) = flags {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INTERNAL);
        }
    };
    match runtime.block_on(service()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_INPUT)
        }
    }
}

/// A command against a cluster.
#[derive(Args, Debug)]
struct ClusterCommand<C: clap::Subcommand> {
    /// kubeconfig file (in-cluster or the default configuration when absent).
    #[arg(long, value_name = "FILE", global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: C,
}

/// Runs `volcano-rs job …` or `volcano-rs queue …` against the cluster.
fn cluster_command<F>(kubeconfig: Option<&std::path::Path>, f: F) -> anyhow::Result<String>
where
    F: AsyncFnOnce(kube::Client) -> Result<String, volcano_controller::cli::CliError>,
{
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let client = volcano_kube::client(kubeconfig).await?;
        f(client).await.map_err(anyhow::Error::from)
    })
}

#[derive(Args, Debug)]
struct ExplainArgs {
    /// The job: `NAMESPACE/NAME` of a PodGroup or of a Volcano Job.
    #[arg(value_name = "NAMESPACE/NAME")]
    job: String,
    /// Explain on these manifests instead of a cluster (a file or a directory; repeat the
    /// flag for several): they are simulated as `simulate` does (until a cycle changes
    /// nothing, or --cycles), then the next cycle is explained.
    #[arg(long, value_name = "FILE")]
    manifests: Vec<PathBuf>,
    /// With --manifests: run exactly N cycles before the explained one.
    #[arg(long, value_name = "N", requires = "manifests")]
    cycles: Option<u32>,
    /// The scheduler configuration (Volcano's file or its ConfigMap); default: the built-in
    /// configuration.
    #[arg(long = "scheduler-conf", alias = "config", value_name = "FILE")]
    scheduler_conf: Option<PathBuf>,
    /// The scheduler names whose pods are scheduled (repeatable).
    #[arg(long = "scheduler-name", value_name = "NAME", default_value = "volcano-rs")]
    scheduler_names: Vec<String>,
    /// The kubeconfig (cluster mode); in-cluster configuration or ~/.kube/config when absent.
    #[arg(long, value_name = "FILE", conflicts_with = "manifests")]
    kubeconfig: Option<PathBuf>,
    /// Cluster mode: only the nodes with this label, as the scheduler's --node-selector
    /// (KEY:VALUE, repeatable).
    #[arg(long = "node-selector", value_name = "KEY:VALUE", conflicts_with = "manifests")]
    node_selector: Vec<String>,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = ExplainOutput::Text)]
    output: ExplainOutput,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum ExplainOutput {
    /// Readable text.
    Text,
    /// JSON, for tools.
    Json,
}

fn explain(args: &ExplainArgs) -> anyhow::Result<String> {
    use volcano_scheduler::explain::Explained;
    if args.job.split_once('/').is_none_or(|(ns, n)| ns.is_empty() || n.is_empty()) {
        anyhow::bail!("explain: {:?} is not NAMESPACE/NAME", args.job);
    }
    let profile = load_profile(args.scheduler_conf.as_deref())?;
    let found = if args.manifests.is_empty() {
        let selector = volcano_scheduler::options::parse_node_selector(&args.node_selector)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let profile = std::sync::Arc::new(profile);
        runtime.block_on(async {
            let client = volcano_kube::client(args.kubeconfig.as_deref()).await?;
            let explained = volcano_scheduler::explain::explain(
                &client,
                args.scheduler_names.clone(),
                selector,
                profile,
                &args.job,
                std::time::Duration::from_secs(120),
            )
            .await?;
            anyhow::Ok(match explained {
                Explained::Job(e) => Some(*e),
                Explained::NotFound => None,
            })
        })?
    } else {
        let manifest = Manifest::from_paths_with(&args.manifests, FieldValidation::Strict).map_err(SimError::from)?;
        let normalised = normalise_for(manifest, &args.scheduler_names).map_err(SimError::from)?;
        let mut sim = Simulator::from_normalised(normalised, profile)?;
        sim.run(args.cycles)?;
        sim.explain(&args.job)?
    };
    let Some(e) = found else {
        anyhow::bail!(
            "explain: no PodGroup and no Volcano Job {} is scheduled by {}",
            args.job,
            args.scheduler_names.join(", ")
        );
    };
    Ok(match args.output {
        ExplainOutput::Text => e.to_string(),
        ExplainOutput::Json => {
            let mut s = serde_json::to_string_pretty(&explanation_json(&e))?;
            s.push('\n');
            s
        }
    })
}

/// An explanation as JSON (docs/observability.md shows the fields).
fn explanation_json(e: &volcano_framework::Explanation) -> serde_json::Value {
    use serde_json::json;
    json!({
        "job": e.job,
        "queue": e.queue,
        "priority": e.priority,
        "minMember": e.min_member,
        "phase": e.phase,
        "ready": e.ready,
        "tasks": e.tasks,
        "notAdmitted": e.not_admitted,
        "refused": e.refused,
        "rolledBack": e.rolled_back.iter().map(|(t, n)| json!({"pod": t, "node": n})).collect::<Vec<_>>(),
        "placed": e.placed.iter().map(|(t, n, s)| json!({"pod": t, "node": n, "status": s})).collect::<Vec<_>>(),
        "blocked": e.blocked.iter().map(|b| json!({
            "count": b.count,
            "examples": b.examples,
            "error": b.error,
            "nodes": b.nodes,
            "reasons": b.reasons.iter().map(|(r, n)| json!({"reason": r, "nodes": n})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "notTried": e.not_tried,
        "ahead": e.ahead.iter().map(|a| json!({"job": a.job, "by": a.by, "placed": a.placed, "pending": a.pending})).collect::<Vec<_>>(),
        "moreAhead": e.more_ahead,
        "preemption": e.preemption,
        "condition": e.condition,
    })
}

#[derive(Args, Debug)]
struct WebhookArgs {
    #[command(flatten)]
    options: volcano_webhook::run::WebhookOptions,
}

fn webhook(args: &WebhookArgs) -> ExitCode {
    let opts = args.options.clone();
    run_service(args.options.validate(), move || volcano_webhook::run::run(opts, volcano_kube::termination()))
}

fn scheduler(args: &SchedulerArgs) -> ExitCode {
    use volcano_scheduler::run::{run, termination, RunError};
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_INTERNAL);
        }
    };
    match runtime.block_on(run(args.options.clone(), termination(), None)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e @ RunError::Options(_)) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_INPUT)
        }
    }
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Cases to run: fill-1k, fill-5k, fill-10k, backlog-5k, steady-5k, spread-5k, hetero-1k,
    /// hetero-5k, hetero-10k, hetero-10k-idle, preempt-1k, preempt-5k, preempt-10k.
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
enum Validate {
    /// Unknown fields are errors.
    Strict,
    /// Unknown fields are reported and dropped.
    Warn,
    /// Unknown fields are dropped.
    Ignore,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    /// A readable report.
    Table,
    /// JSON: cycles, pods, podGroups, queues, jobs.
    Json,
    /// YAML, the same structure as JSON.
    Yaml,
}

fn bench(args: &BenchArgs) -> anyhow::Result<String> {
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

fn simulate(args: &SimulateArgs) -> anyhow::Result<String> {
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

/// The scheduler configuration of an offline command: Volcano's file (or its ConfigMap) at
/// `path`, or the built-in default configuration without one.
fn load_profile(path: Option<&Path>) -> anyhow::Result<Profile> {
    match path {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the scheduler configuration {}", path.display()))?;
            volcano_builtin::profile_from_text(&text).with_context(|| path.display().to_string())
        }
        None => volcano_builtin::default_profile().context("the built-in scheduler configuration"),
    }
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
    let cli = Cli::parse();
    // A long-running service logs what it does; the one-shot commands only warnings.
    let service = matches!(cli.command, Command::Scheduler(_) | Command::Webhook(_) | Command::Controller(_));
    let default_level = if service { "info" } else { "warn" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // At debug, the spans (cycle, action, apply) are logged as they close, with their
    // fields (counts) and busy time.
    let spans = if filter.max_level_hint().is_some_and(|l| l >= tracing::level_filters::LevelFilter::DEBUG) {
        FmtSpan::CLOSE
    } else {
        FmtSpan::NONE
    };
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_span_events(spans);
    match cli.log_format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(false).init(),
    }

    std::panic::set_hook(Box::new(report_panic));
    guarded(move || run(&cli))
}

/// Runs a command; a panic becomes the internal-error exit code (its message was printed
/// by [`report_panic`]).
fn guarded(f: impl FnOnce() -> ExitCode + std::panic::UnwindSafe) -> ExitCode {
    std::panic::catch_unwind(f).unwrap_or(ExitCode::from(EXIT_INTERNAL))
}

/// The text of a panic's payload.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The panic hook: one paragraph that says a bug happened and where, and a backtrace only
/// when `RUST_BACKTRACE` asks for one.
fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let location = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
    eprintln!(
        "error: internal error: {}{location}\nThis is a bug in volcano-rs, not a problem with your input: please report it \
         with the command line and the files it read. (exit code {EXIT_INTERNAL})",
        panic_text(info.payload())
    );
    let backtrace = std::backtrace::Backtrace::capture();
    if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
        eprintln!("{backtrace}");
    }
}

fn run(cli: &Cli) -> ExitCode {
    let result = match &cli.command {
        Command::Simulate(args) => simulate(args),
        Command::Bench(args) => bench(args),
        Command::Scheduler(args) => return scheduler(args),
        Command::Webhook(args) => return webhook(args),
        Command::Controller(args) => return controller(args),
        Command::Job(c) => cluster_command(c.kubeconfig.as_deref(), async |client| {
            volcano_controller::cli::job(client, &c.command).await
        }),
        Command::Queue(c) => cluster_command(c.kubeconfig.as_deref(), async |client| {
            volcano_controller::cli::queue(client, &c.command).await
        }),
        Command::BenchCluster(cmd) => bench_cluster::run(cmd),
        Command::Explain(args) => explain(args),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_internal_error_exit_code() {
        assert_eq!(guarded(|| panic!("boom")), ExitCode::from(EXIT_INTERNAL));
        assert_eq!(guarded(|| ExitCode::SUCCESS), ExitCode::SUCCESS);
    }

    #[test]
    fn panic_payloads_are_read_as_text() {
        let p = std::panic::catch_unwind(|| panic!("static text")).unwrap_err();
        assert_eq!(panic_text(&*p), "static text");
        let p = std::panic::catch_unwind(|| panic!("formatted {}", 42)).unwrap_err();
        assert_eq!(panic_text(&*p), "formatted 42");
        let p = std::panic::catch_unwind(|| std::panic::panic_any(7_u8)).unwrap_err();
        assert_eq!(panic_text(&*p), "(no message)");
    }
}
