//! `volcano-rs replay jobs`: a job trace (Muri, Philly, ITP) replayed through the real
//! scheduling core on the simulator's in-memory cluster, on a virtual clock.
//!
//! Where to begin: [`trace::load`] reads a trace into [`trace::Trace`] (jobs in submission
//! order, queues, the cluster), [`run::replay`] runs it (the loop and its semantics are
//! documented there), and [`summarise`] and [`output`] turn the result into the summary, the
//! CSV files and the charts. docs/replay.md says how each trace is read and what was
//! measured.

pub mod objects;
pub mod output;
pub mod run;
pub mod trace;

use std::path::Path;

use serde::Serialize;
use volcano_framework::Profile;

use crate::error::ReplayError;
use crate::progress::Progress;
pub use run::{JobOutcome, RunOutcome, Sample};
pub use trace::{Trace, TraceJob};

/// The summary of a replay (the table, or the JSON object of `--output json`). Times are in
/// seconds of trace time; utilisation in percent of the cluster's GPUs.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The trace's name.
    pub trace: String,
    /// Whether multi-GPU jobs were elastic.
    pub elastic: bool,
    /// Nodes of the cluster.
    pub nodes: u32,
    /// GPUs of the cluster.
    pub gpus: u32,
    /// How the cluster was sized.
    pub sizing: String,
    /// Queues.
    pub queues: usize,
    /// Jobs of the trace (rows skipped not counted).
    pub jobs: usize,
    /// Rows left out, with why.
    pub skipped: std::collections::BTreeMap<String, usize>,
    /// Jobs that finished.
    pub finished: usize,
    /// Jobs that had not finished when nothing more could happen.
    pub unfinished: usize,
    /// Job completion time (end − submission) of the finished jobs: mean, p50, p99.
    pub jct: Stats,
    /// Queueing delay (first start − submission) of the jobs that started: mean, p50, p99.
    pub queueing_delay: Stats,
    /// Last end − first submission.
    pub makespan: f64,
    /// Mean allocated GPUs over the makespan, in percent of the cluster's.
    pub mean_gpu_utilisation: f64,
    /// Pods evicted by `preempt`.
    pub preemptions: u64,
    /// Pods evicted by `reclaim`.
    pub reclaims: u64,
    /// Every eviction, whatever the action.
    pub evictions: u64,
    /// Gang restarts after an eviction.
    pub restarts: u64,
    /// Resizes of elastic jobs: grows.
    pub grows: u64,
    /// Resizes of elastic jobs: shrinks.
    pub shrinks: u64,
    /// Scheduling cycles run.
    pub cycles: u64,
    /// Wall-clock time of the replay (reading the trace excluded), seconds.
    pub wall_seconds: f64,
}

/// Mean, median and 99th percentile (nearest rank) of a sample, in seconds; zeros when empty.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Stats {
    /// The statistics of `values` (milliseconds), in seconds.
    pub fn of_ms(mut values: Vec<i64>) -> Stats {
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |p: f64| values[((p * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1000.0;
        let mean = values.iter().map(|v| *v as f64).sum::<f64>() / n as f64 / 1000.0;
        Stats { mean, p50: rank(0.5), p99: rank(0.99) }
    }
}

/// The options of a job replay.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Multi-GPU jobs are elastic Volcano Jobs resized by the elastic autoscaler.
    pub elastic: bool,
    /// Show a progress bar on a terminal for runs longer than a second.
    pub progress: bool,
}

/// A finished replay: the trace, what happened, and its summary.
#[derive(Clone, Debug)]
pub struct Replayed {
    /// The trace replayed.
    pub trace: Trace,
    /// What happened.
    pub outcome: RunOutcome,
    /// The summary.
    pub summary: Summary,
}

/// Replays `trace` under `profile`.
pub fn replay(trace: Trace, profile: &Profile, options: &Options) -> Result<Replayed, ReplayError> {
    let start = std::time::Instant::now();
    let mut progress =
        if options.progress { Progress::new(trace.jobs.len() as u64, "jobs") } else { Progress::hidden() };
    let outcome = run::replay(&trace, profile, options.elastic, &mut progress)?;
    let summary = summarise(&trace, &outcome, options.elastic, start.elapsed().as_secs_f64());
    Ok(Replayed { trace, outcome, summary })
}

/// Reads the trace `name` (see [`trace::load`]) and replays it.
pub fn load_and_replay(
    name: &str,
    traces_dir: &Path,
    profile: &Profile,
    options: &Options,
) -> Result<Replayed, ReplayError> {
    replay(trace::load(name, traces_dir)?, profile, options)
}

/// The summary of a replay that took `wall_seconds`.
pub fn summarise(trace: &Trace, out: &RunOutcome, elastic: bool, wall_seconds: f64) -> Summary {
    let mut jct = Vec::new();
    let mut delay = Vec::new();
    let mut last_end = 0i64;
    for (job, o) in trace.jobs.iter().zip(&out.jobs) {
        if let Some(s) = o.start_ms {
            delay.push(s - job.submit_ms);
        }
        if let Some(e) = o.end_ms {
            jct.push(e - job.submit_ms);
            last_end = last_end.max(e);
        }
    }
    let finished = jct.len();
    let makespan_ms = last_end.max(out.last_ms);
    let total = f64::from(trace.total_gpus().max(1));
    let mut area = 0.0;
    for (i, s) in out.samples.iter().enumerate() {
        let until = out.samples.get(i + 1).map(|n| n.t_ms).unwrap_or(makespan_ms).min(makespan_ms);
        let used: f64 = s.gpus.iter().map(|g| f64::from(*g)).sum();
        area += used * (until - s.t_ms).max(0) as f64;
    }
    let utilisation = if makespan_ms > 0 { 100.0 * area / (total * makespan_ms as f64) } else { 0.0 };
    let count = |a: &str| out.evictions.get(a).copied().unwrap_or(0);
    Summary {
        trace: trace.name.clone(),
        elastic,
        nodes: trace.nodes,
        gpus: trace.total_gpus(),
        sizing: trace.sizing.clone(),
        queues: trace.queues.len(),
        jobs: trace.jobs.len(),
        skipped: trace.skipped.clone(),
        finished,
        unfinished: trace.jobs.len() - finished,
        jct: Stats::of_ms(jct),
        queueing_delay: Stats::of_ms(delay),
        makespan: makespan_ms as f64 / 1000.0,
        mean_gpu_utilisation: utilisation,
        preemptions: count("preempt"),
        reclaims: count("reclaim"),
        evictions: out.evictions.values().sum(),
        restarts: out.jobs.iter().map(|j| u64::from(j.restarts)).sum(),
        grows: out.resizes.0,
        shrinks: out.resizes.1,
        cycles: out.cycles,
        wall_seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = Stats::of_ms((1..=100).map(|v| v * 1000).collect());
        assert_eq!((s.mean, s.p50, s.p99), (50.5, 50.0, 99.0));
        assert_eq!(Stats::of_ms(vec![]), Stats::default());
        assert_eq!(Stats::of_ms(vec![3000]).p99, 3.0);
    }
}
