//! `volcano-rs replay`: public traces replayed through the real scheduling core
//! (`volcano-replay`, docs/replay.md). `jobs` replays a job trace.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use volcano_replay::jobs;

use crate::load_profile;

#[derive(Subcommand, Debug)]
pub(crate) enum ReplayCommand {
    /// Replay a job trace (Muri, Philly, ITP): each job a gang of GPUs submitted at its time
    /// and running for its duration, scheduled cycle by cycle on a virtual clock.
    Jobs(JobsArgs),
}

#[derive(Args, Debug)]
pub(crate) struct JobsArgs {
    /// The trace: muri/trace1 … muri/trace4 (or muri/traceN_pr), philly, itp/cluster01 …
    /// itp/cluster10 (under --traces-dir), or the path of a CSV file in one of their schemas.
    #[arg(long, value_name = "TRACE")]
    trace: String,
    /// A Volcano scheduler configuration file (volcano-scheduler.conf); default: the built-in
    /// configuration.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Make every job of more than one GPU an elastic Volcano Job (between half and all of
    /// its GPUs), resized by the elastic autoscaler; its work progresses with the GPUs it holds.
    #[arg(long)]
    elastic: bool,
    /// Where to write jobs.csv, utilisation.csv, queue_share.csv and their charts.
    #[arg(long, value_name = "DIR", default_value = "replay-out")]
    out: PathBuf,
    /// Output format of the summary.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Table)]
    output: Output,
    /// The folder of the public traces.
    #[arg(long, value_name = "DIR", default_value = "../shared/traces")]
    traces_dir: PathBuf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// A readable summary.
    Table,
    /// One JSON object.
    Json,
}

pub(crate) fn replay(command: &ReplayCommand) -> anyhow::Result<String> {
    match command {
        ReplayCommand::Jobs(args) => replay_jobs(args),
    }
}

fn replay_jobs(args: &JobsArgs) -> anyhow::Result<String> {
    let profile = load_profile(args.config.as_deref())?;
    let options = jobs::Options { elastic: args.elastic, progress: true };
    let replayed = jobs::load_and_replay(&args.trace, &args.traces_dir, &profile, &options)?;
    let files = jobs::output::write_files(&replayed, &args.out)?;
    tracing::info!(files = files.len(), out = %args.out.display(), "replay files written");
    let text = match args.output {
        Output::Table => {
            let mut t = jobs::output::table(&replayed.summary);
            t.push_str(&format!("{:<24} {}\n", "files", args.out.display()));
            t
        }
        Output::Json => jobs::output::json(&replayed.summary),
    };
    // The process ends next: freeing the replayed cluster object by object only costs time.
    std::mem::forget(replayed);
    Ok(text)
}
