//! The outputs of a job replay: the summary as a table or JSON, and in the output directory
//! `jobs.csv` (one row per job), `utilisation.csv` and `queue_share.csv` (over time), and
//! the charts `utilisation.svg` and `queue_share.svg`.
//!
//! The series over time are the allocated GPUs the scheduler counted at each cycle, held
//! until the next cycle, averaged over at most [`MAX_POINTS`] equal intervals of the
//! makespan (time-weighted), so a long trace gives a readable file and chart.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{Replayed, Summary};
use crate::error::ReplayError;
use crate::plot::{line_chart, Series};

/// The most rows of a series over time.
pub const MAX_POINTS: usize = 2000;

/// The summary as a table, for people.
pub fn table(s: &Summary) -> String {
    let mut t = String::new();
    let mut row = |k: &str, v: String| {
        let _ = writeln!(t, "{k:<24} {v}");
    };
    row("trace", format!("{}{}", s.trace, if s.elastic { " (elastic)" } else { "" }));
    row("cluster", format!("{} nodes, {} GPUs ({}), {} queue(s)", s.nodes, s.gpus, s.sizing, s.queues));
    row("jobs", format!("{} ({} finished, {} unfinished)", s.jobs, s.finished, s.unfinished));
    for (why, n) in &s.skipped {
        row("rows skipped", format!("{n}: {why}"));
    }
    let stats = |st: &super::Stats| format!("mean {:.0} s, p50 {:.0} s, p99 {:.0} s", st.mean, st.p50, st.p99);
    row("JCT", stats(&s.jct));
    row("queueing delay", stats(&s.queueing_delay));
    row("makespan", format!("{:.0} s ({:.2} days)", s.makespan, s.makespan / 86_400.0));
    row("mean GPU utilisation", format!("{:.1} %", s.mean_gpu_utilisation));
    row(
        "evictions",
        format!("{} (preempt {}, reclaim {}), gang restarts {}", s.evictions, s.preemptions, s.reclaims, s.restarts),
    );
    if s.elastic {
        row("elastic resizes", format!("{} grow(s), {} shrink(s)", s.grows, s.shrinks));
    }
    row("cycles", format!("{} in {:.1} s", s.cycles, s.wall_seconds));
    t
}

/// The summary as one JSON object.
pub fn json(s: &Summary) -> String {
    serde_json::to_string_pretty(s).expect("a summary serialises") + "\n"
}

fn write(path: &Path, text: &str) -> Result<(), ReplayError> {
    std::fs::write(path, text).map_err(|source| ReplayError::Write { path: path.to_path_buf(), source })
}

/// The time-weighted mean of the step series `samples` (each value held until the next
/// sample) over `points` equal intervals of `[0, end_ms)`: (interval start, means).
pub fn resample(samples: &[(i64, Vec<f64>)], end_ms: i64, points: usize) -> Vec<(i64, Vec<f64>)> {
    let Some(first) = samples.first() else { return Vec::new() };
    let width = first.1.len();
    let end_ms = end_ms.max(samples.last().map(|s| s.0).unwrap_or(0) + 1).max(1);
    let step = ((end_ms as f64 / points.max(1) as f64).ceil() as i64).max(1000);
    let n = ((end_ms + step - 1) / step) as usize;
    let mut out: Vec<(i64, Vec<f64>)> = (0..n).map(|b| (b as i64 * step, vec![0.0; width])).collect();
    for (i, (t, v)) in samples.iter().enumerate() {
        let until = samples.get(i + 1).map(|s| s.0).unwrap_or(end_ms).min(end_ms);
        let mut a = (*t).max(0);
        while a < until {
            let b = (a / step) as usize;
            let bucket_end = ((b as i64 + 1) * step).min(until);
            let w = (bucket_end - a) as f64 / step as f64;
            for (o, x) in out[b].1.iter_mut().zip(v) {
                *o += w * x;
            }
            a = bucket_end;
        }
    }
    out
}

/// Writes the CSV files and the charts into `dir` (created if needed); returns their paths.
pub fn write_files(r: &Replayed, dir: &Path) -> Result<Vec<PathBuf>, ReplayError> {
    std::fs::create_dir_all(dir).map_err(|source| ReplayError::Write { path: dir.to_path_buf(), source })?;
    let mut written = Vec::new();
    let secs = |ms: Option<i64>| ms.map(|v| format!("{:.3}", v as f64 / 1000.0)).unwrap_or_default();

    let mut jobs = String::from("id,queue,gpus,submit_s,start_s,end_s,jct_s,queueing_delay_s,restarts\n");
    for (j, o) in r.trace.jobs.iter().zip(&r.outcome.jobs) {
        let _ = writeln!(
            jobs,
            "{},{},{},{},{},{},{},{},{}",
            j.id,
            r.trace.queues[j.queue].name,
            j.gpus,
            secs(Some(j.submit_ms)),
            secs(o.start_ms),
            secs(o.end_ms),
            secs(o.end_ms.map(|e| e - j.submit_ms)),
            secs(o.start_ms.map(|s| s - j.submit_ms)),
            o.restarts
        );
    }
    let path = dir.join("jobs.csv");
    write(&path, &jobs)?;
    written.push(path);

    let total = f64::from(r.trace.total_gpus().max(1));
    let samples: Vec<(i64, Vec<f64>)> =
        r.outcome.samples.iter().map(|s| (s.t_ms, s.gpus.iter().map(|g| f64::from(*g)).collect())).collect();
    let end = (r.summary.makespan * 1000.0) as i64;
    let points = resample(&samples, end, MAX_POINTS);
    let days = |t: i64| t as f64 / 86_400_000.0;

    let mut util = String::from("time_s,gpus_allocated,utilisation_pct\n");
    let mut util_line = Vec::with_capacity(points.len());
    for (t, v) in &points {
        let used: f64 = v.iter().sum();
        let _ = writeln!(util, "{},{:.3},{:.3}", t / 1000, used, 100.0 * used / total);
        util_line.push((days(*t), 100.0 * used / total));
    }
    let path = dir.join("utilisation.csv");
    write(&path, &util)?;
    written.push(path);

    let names: Vec<&str> = r.trace.queues.iter().map(|q| q.name.as_str()).collect();
    let mut share = format!("time_s,{}\n", names.join(","));
    let mut lines: Vec<Series> =
        names.iter().map(|n| Series { name: n.to_string(), points: Vec::with_capacity(points.len()) }).collect();
    for (t, v) in &points {
        let _ = write!(share, "{}", t / 1000);
        for (q, x) in v.iter().enumerate() {
            let pct = 100.0 * x / total;
            let _ = write!(share, ",{pct:.3}");
            lines[q].points.push((days(*t), pct));
        }
        share.push('\n');
    }
    let path = dir.join("queue_share.csv");
    write(&path, &share)?;
    written.push(path);

    let title = format!("{}{}: GPU utilisation", r.trace.name, if r.summary.elastic { " (elastic)" } else { "" });
    let path = dir.join("utilisation.svg");
    line_chart(
        &path,
        &title,
        "days",
        "allocated GPUs (%)",
        &[Series { name: "utilisation".into(), points: util_line }],
    )?;
    written.push(path);
    let title = format!(
        "{}{}: share of the cluster's GPUs per queue",
        r.trace.name,
        if r.summary.elastic { " (elastic)" } else { "" }
    );
    let path = dir.join("queue_share.svg");
    line_chart(&path, &title, "days", "allocated GPUs (% of the cluster)", &lines)?;
    written.push(path);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_is_time_weighted() {
        // 0 GPUs for 1 s, then 4 for 3 s: two intervals of 2 s each.
        let s = vec![(0, vec![0.0]), (1000, vec![4.0])];
        let r = resample(&s, 4000, 2);
        assert_eq!(r, vec![(0, vec![2.0]), (2000, vec![4.0])]);
    }
}
