//! `volcano-rs replay`: public traces replayed through the real scheduling core
//! (`volcano-replay`, docs/replay.md): `openb` (the FGD protocol) and `jobs` (job traces).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use volcano_replay::jobs;
use volcano_replay::openb::{self, Trace};

use crate::load_profile;

#[derive(Subcommand, Debug)]
pub(crate) enum ReplayCommand {
    /// Alibaba's GPU trace (openb) under the FGD paper's protocol: the trace's pods, inflated
    /// to 1.3× the cluster's GPUs and shuffled, placed one by one; prints the GPU allocation
    /// ratio when the GPUs asked reach 100 % of the cluster's, and writes the whole curve
    /// (CSV) and a plot (SVG) (docs/replay.md).
    Openb(OpenbArgs),
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Output {
    /// A table.
    Table,
    /// One JSON object per trace and policy, one per line.
    Json,
}

#[derive(Args, Debug)]
pub(crate) struct OpenbArgs {
    /// The trace: default, cpu050, gpushare40, multigpu20, gpuspec10, … (the
    /// openb_pod_list_<NAME>.csv files), comma-separated, or `all`.
    #[arg(long, value_name = "NAME", default_value = "default")]
    trace: String,
    /// The placement policy: random, dotprod, gpu-packing, bestfit or fragmentation (the
    /// plugin names), comma-separated, or `all`.
    #[arg(long, value_name = "P", default_value = "fragmentation", conflicts_with = "config")]
    policy: String,
    /// Instead of a policy, a Volcano scheduler configuration to replay (its name in the
    /// output is the file's stem).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The seeds, one run each: a range `42..51` (inclusive) or a list `42,43`.
    #[arg(long, value_name = "SEEDS", default_value = "42..51")]
    seeds: String,
    /// The folder of the public traces (holding `openb/`).
    #[arg(long, value_name = "DIR", default_value = "../shared/traces")]
    traces_dir: PathBuf,
    /// Where the curves (CSV) and plots (SVG) go.
    #[arg(long, value_name = "DIR", default_value = "replay-out")]
    out: PathBuf,
    /// The output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// Parses `42..51` (inclusive) or `42,43,44`.
pub(crate) fn parse_seeds(text: &str) -> anyhow::Result<Vec<u64>> {
    let bad = || format!("--seeds {text:?}: expected a range like 42..51 or a list like 42,43");
    if let Some((a, b)) = text.split_once("..") {
        let a: u64 = a.trim().parse().with_context(bad)?;
        let b: u64 = b.trim().trim_start_matches('=').parse().with_context(bad)?;
        if b < a {
            bail!("{}", bad());
        }
        return Ok((a..=b).collect());
    }
    text.split(',').map(|s| s.trim().parse::<u64>().with_context(bad)).collect()
}

fn list(text: &str, all: &[String], what: &str) -> anyhow::Result<Vec<String>> {
    if text.trim() == "all" {
        return Ok(all.to_vec());
    }
    let wanted: Vec<String> = text.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    for w in &wanted {
        if !all.contains(w) {
            bail!("unknown {what} {w:?}: expected one of {}, or all", all.join(", "));
        }
    }
    Ok(wanted)
}

/// One trace × policy over the seeds.
struct Series {
    trace: String,
    policy: String,
    seeds: Vec<u64>,
    at_100: Vec<f64>,
    /// Mean over seeds of the curve, per arrived %.
    curve: Vec<Option<f64>>,
    seconds: f64,
}

pub(crate) fn replay(cmd: &ReplayCommand) -> anyhow::Result<String> {
    match cmd {
        ReplayCommand::Openb(args) => replay_openb(args),
        ReplayCommand::Jobs(args) => replay_jobs(args),
    }
}

fn replay_openb(args: &OpenbArgs) -> anyhow::Result<String> {
    let dir = args.traces_dir.join("openb");
    let names = openb::trace_names(&dir)?;
    if names.is_empty() {
        bail!("{}: no openb_pod_list_<NAME>.csv file", dir.display());
    }
    let traces = list(&args.trace, &names, "trace")?;
    let seeds = parse_seeds(&args.seeds)?;
    let policies: Vec<(String, Option<volcano_framework::Profile>)> = match &args.config {
        Some(path) => {
            let profile = load_profile(Some(path))?;
            let name = path.file_stem().map_or("config".into(), |s| s.to_string_lossy().into_owned());
            vec![(name, Some(profile))]
        }
        None => {
            let all: Vec<String> = openb::POLICIES.iter().map(|s| s.to_string()).collect();
            list(&args.policy, &all, "policy")?.into_iter().map(|p| (p, None)).collect()
        }
    };
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut out = String::new();
    if args.output == Output::Table {
        writeln!(out, "{:<12} {:<14} {:>16} {:>6} {:>9}", "TRACE", "POLICY", "ALLOC@100 %", "SEEDS", "SECONDS")?;
    }
    // One step per run (trace × policy × seed), drawn once the whole lasts more than a second.
    let mut progress =
        volcano_replay::progress::Progress::new((traces.len() * policies.len() * seeds.len()) as u64, "runs");
    let mut done = 0u64;
    for trace_name in &traces {
        let trace = Trace::read(&dir, trace_name)?;
        let mut all = Vec::new();
        for (policy, profile) in &policies {
            let started = Instant::now();
            let mut results = Vec::new();
            for &seed in &seeds {
                let owned;
                let profile = match profile {
                    Some(p) => p,
                    None => {
                        owned = openb::policy_profile(policy, seed)?;
                        &owned
                    }
                };
                let random_cards = args.config.is_none() && policy == "random";
                results.push(openb::run_with(&trace, profile, seed, random_cards)?);
                done += 1;
                progress.set(done, || format!("{trace_name} {policy} seed {seed}"));
            }
            let at_100: Vec<f64> = results.iter().filter_map(|r| r.alloc_at_100()).collect();
            let curve = (0..=openb::MAX_ARRIVED)
                .map(|x| {
                    let v: Vec<f64> = results.iter().filter_map(|r| r.curve[x]).collect();
                    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                })
                .collect();
            let series = Series {
                trace: trace_name.clone(),
                policy: policy.clone(),
                seeds: seeds.clone(),
                at_100,
                curve,
                seconds: started.elapsed().as_secs_f64(),
            };
            let (mean, sd) = openb::mean_sd(&series.at_100);
            match args.output {
                Output::Table => writeln!(
                    out,
                    "{:<12} {:<14} {:>16} {:>6} {:>9.2}",
                    series.trace,
                    series.policy,
                    format!("{mean:.2} ± {sd:.2}"),
                    series.seeds.len(),
                    series.seconds
                )?,
                Output::Json => writeln!(
                    out,
                    "{}",
                    serde_json::json!({
                        "trace": series.trace,
                        "policy": series.policy,
                        "seeds": series.seeds,
                        "alloc_at_100": {"mean": mean, "sd": sd},
                    })
                )?,
            }
            all.push(series);
        }
        write_curves(&args.out, trace_name, &all)?;
    }
    progress.finish();
    Ok(out)
}

/// `<out>/openb-<trace>.csv`: per arrived %, each policy's mean allocation and unallocated
/// GPU %; `<out>/openb-<trace>.svg`: unallocated GPU % against arrived %, a line per policy.
fn write_curves(out: &Path, trace: &str, series: &[Series]) -> anyhow::Result<()> {
    let path = out.join(format!("openb-{trace}.csv"));
    let mut text = String::from("arrived");
    for s in series {
        write!(text, ",{0}_alloc,{0}_unallocated", s.policy)?;
    }
    text.push('\n');
    for x in 0..=openb::MAX_ARRIVED {
        write!(text, "{x}")?;
        for s in series {
            match s.curve[x] {
                Some(v) => write!(text, ",{v:.4},{:.4}", 100.0 - v)?,
                None => text.push_str(",,"),
            }
        }
        text.push('\n');
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    let lines: Vec<volcano_replay::plot::Series> = series
        .iter()
        .map(|s| volcano_replay::plot::Series {
            name: s.policy.clone(),
            points: (0..=openb::MAX_ARRIVED).filter_map(|x| s.curve[x].map(|v| (x as f64, 100.0 - v))).collect(),
        })
        .collect();
    volcano_replay::plot::line_chart(
        &out.join(format!("openb-{trace}.svg")),
        &format!("openb {trace}: unallocated GPU as the cluster fills"),
        "arrived (% of the cluster's GPUs asked)",
        "unallocated GPU %",
        &lines,
    )?;
    Ok(())
}
