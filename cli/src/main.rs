//! `volcano-rs`: the volcano-rs command. This crate only wires subcommands to the libraries
//! that implement them, so that each shell stays a library with its own tests.
//!
//! Subcommands:
//! - `simulate`: schedule Kubernetes manifests on an in-memory cluster with the real
//!   scheduling core (see `docs/simulate.md` and the `volcano-sim` crate);
//! - `bench`: run the standard benchmark workloads (see `docs/performance.md` and the
//!   `volcano-benches` crate);
//! - `replay`: replay public traces through the scheduling core (see `docs/replay.md` and
//!   the `volcano-replay` crate).
//!
//! - `scheduler`: the kube backend (`volcano-scheduler`, see `docs/scheduler.md`);
//! - `webhook`: the admission webhook (`volcano-webhook`, see `docs/webhook.md`);
//! - `controller`, `job`, `queue`: the Job controller and vcctl's commands
//!   (`volcano-controller`, see `docs/jobs.md`).
//!
//! - `explain`: what one cycle sees of a job, on a cluster or on manifests;
//! - `bench-cluster`: a scheduler process timed against a real API server.
//!
//! `main` holds the command line and the exit codes; each offline subcommand's flags and the
//! glue to its library are a module of their own (`simulate`, `bench`, `explain`, `replay`), and
//! `bench_cluster` is the one subcommand with its own API client.
//!
//! Exit codes: 0 success, 1 invalid input (manifests, configuration, unreadable files),
//! 2 invalid command line, 3 the simulation caught the scheduler breaking an invariant,
//! 4 internal error (a panic: a bug in volcano-rs).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use tracing_subscriber::fmt::format::FmtSpan;
use tracing_subscriber::EnvFilter;
use volcano_framework::Profile;
use volcano_sim::SimError;

mod bench;
mod bench_cluster;
mod explain;
mod replay;
mod simulate;

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
#[command(
    name = "volcano-rs",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("VOLCANO_RS_GIT_COMMIT"), ")"),
    about = "volcano-rs: a batch and gang scheduler for Kubernetes")]
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
    Simulate(simulate::SimulateArgs),
    /// Run the standard benchmark workloads (docs/performance.md) and check their results.
    Bench(bench::BenchArgs),
    /// Replay public traces through the scheduling core: the GPU allocation ratio on
    /// Alibaba's openb trace under the FGD paper's protocol, job completion times on Philly,
    /// Muri and ITP on a virtual clock; summary, CSV files and charts (docs/replay.md).
    #[command(subcommand)]
    Replay(replay::ReplayCommand),
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
    Explain(explain::ExplainArgs),
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
        Command::Simulate(args) => simulate::simulate(args),
        Command::Bench(args) => bench::bench(args),
        Command::Replay(cmd) => replay::replay(cmd),
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
        Command::Explain(args) => explain::explain(args),
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
            let bug = err.downcast_ref::<SimError>().is_some_and(SimError::is_scheduler_bug)
                || err.downcast_ref::<volcano_replay::ReplayError>().is_some_and(|e| e.is_scheduler_bug());
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
