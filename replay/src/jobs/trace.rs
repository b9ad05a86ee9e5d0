//! Reading job traces: Muri (`muri/traceN`), Philly (`philly`), ITP (`itp/clusterNN`, read
//! from the archive in memory) or a CSV file of one of those schemas, recognised by its
//! header. Every row becomes a [`TraceJob`]; a malformed row is an error naming the file, the
//! line, the column and what was expected.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::ReplayError;

/// GPUs per node of the Philly and ITP clusters (and of a trace without a cluster spec).
pub const GPUS_PER_NODE: u32 = 8;

/// One job of a trace: a gang of `gpus` GPUs, submitted at `submit_ms` (from the trace's
/// first submission) for `duration_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceJob {
    /// The job's id in the trace (or its line when the trace has none).
    pub id: String,
    /// The queue it is submitted to (an index into [`Trace::queues`]).
    pub queue: usize,
    /// GPUs, at least 1.
    pub gpus: u32,
    /// Submission, milliseconds after the trace's first one.
    pub submit_ms: i64,
    /// Run time at full size, milliseconds.
    pub duration_ms: i64,
}

/// A node shape: every node of a replayed cluster is one.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeShape {
    /// GPUs (`nvidia.com/gpu`).
    pub gpus: u32,
    /// CPUs.
    pub cpus: u32,
    /// Memory, GiB.
    pub memory_gib: u32,
}

/// A queue of a replay, with its `spec.weight`.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSpec {
    /// The Queue's name.
    pub name: String,
    /// Its weight.
    pub weight: i32,
}

/// A trace ready to replay: its jobs in submission order, and the cluster they run on.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The trace's name as given (`philly`, `muri/trace1`, a path).
    pub name: String,
    /// The jobs, sorted by submission (then by line).
    pub jobs: Vec<TraceJob>,
    /// The queues.
    pub queues: Vec<QueueSpec>,
    /// Number of nodes.
    pub nodes: u32,
    /// The shape of every node.
    pub node: NodeShape,
    /// How the cluster was sized, in words (for the summary and the docs).
    pub sizing: String,
    /// Rows left out, with why (e.g. a virtual cluster `philly_vc.csv` does not list).
    pub skipped: BTreeMap<String, usize>,
}

impl Trace {
    /// GPUs of the whole cluster.
    pub fn total_gpus(&self) -> u32 {
        self.nodes * self.node.gpus
    }
}

/// A CSV text with its header: rows are read column by column by name, and every error
/// names the file, the line and the column.
struct Csv<'a> {
    path: PathBuf,
    columns: Vec<&'a str>,
    rows: Vec<(usize, Vec<&'a str>)>,
}

impl<'a> Csv<'a> {
    /// Splits `text` into its header and rows (blank lines are skipped; fields are plain,
    /// comma-separated, without quotes, as in these traces).
    fn parse(path: &Path, text: &'a str) -> Result<Self, ReplayError> {
        let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
        let Some((_, header)) = lines.next() else {
            return Err(ReplayError::Trace(format!("{}: the file is empty (expected a CSV header)", path.display())));
        };
        let columns: Vec<&str> = header.split(',').map(str::trim).collect();
        let mut rows = Vec::new();
        for (i, line) in lines {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != columns.len() {
                return Err(ReplayError::Row {
                    path: path.to_path_buf(),
                    line: i + 1,
                    column: columns.get(fields.len().min(columns.len().saturating_sub(1))).unwrap_or(&"?").to_string(),
                    message: format!(
                        "expected {} comma-separated fields ({}), found {}",
                        columns.len(),
                        columns.join(","),
                        fields.len()
                    ),
                });
            }
            rows.push((i + 1, fields));
        }
        Ok(Csv { path: path.to_path_buf(), columns, rows })
    }

    /// The index of `column`, or an error naming the columns the header has.
    fn index(&self, column: &str) -> Result<usize, ReplayError> {
        self.columns.iter().position(|c| *c == column).ok_or_else(|| {
            ReplayError::Trace(format!(
                "{}: the header has no column {column:?} (it has: {})",
                self.path.display(),
                self.columns.join(", ")
            ))
        })
    }

    fn error(&self, line: usize, column: usize, message: String) -> ReplayError {
        ReplayError::Row { path: self.path.clone(), line, column: self.columns[column].to_string(), message }
    }

    /// Field `column` of a row as a number accepted by `ok` (`what` says what is expected).
    fn number(
        &self,
        (line, row): &(usize, Vec<&str>),
        column: usize,
        what: &str,
        ok: fn(f64) -> bool,
    ) -> Result<f64, ReplayError> {
        let text = row[column];
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() && ok(v) => Ok(v),
            _ => Err(self.error(*line, column, format!("expected {what}, found {text:?}"))),
        }
    }

    /// Field `column` as a whole number of GPUs ≥ 1.
    fn gpus(&self, row: &(usize, Vec<&str>), column: usize) -> Result<u32, ReplayError> {
        let v = self.number(row, column, "a whole number of GPUs from 1 to 100000", |v| {
            v.fract() == 0.0 && (1.0..=100_000.0).contains(&v)
        })?;
        Ok(v as u32)
    }

    /// Field `column` as a time ≥ 0 in `unit_ms` milliseconds per unit, in milliseconds.
    fn time_ms(&self, row: &(usize, Vec<&str>), column: usize, unit: &str, unit_ms: f64) -> Result<i64, ReplayError> {
        let what = format!("a number of {unit} ≥ 0");
        let v = self.number(row, column, &what, |v| (0.0..1e15).contains(&v))?;
        Ok((v * unit_ms).round() as i64)
    }
}

/// Reads a file, as text.
fn read_text(path: &Path) -> Result<String, ReplayError> {
    std::fs::read_to_string(path).map_err(|source| ReplayError::Read { path: path.to_path_buf(), source })
}

/// The trace named `name`: `muri/traceN` (or `muri/traceN_pr`), `philly`, `itp/clusterNN`
/// under `traces_dir`, or the path of a CSV file in one of their schemas.
pub fn load(name: &str, traces_dir: &Path) -> Result<Trace, ReplayError> {
    let as_path = Path::new(name);
    if name.ends_with(".csv") || as_path.is_file() {
        return load_file(name, as_path);
    }
    if name == "philly" {
        let dir = traces_dir.join("philly");
        let vcs = read_text(&dir.join("philly_vc.csv"))?;
        let queues = philly_queues(&dir.join("philly_vc.csv"), &vcs)?;
        let path = dir.join("philly.csv");
        return philly(name, &path, &read_text(&path)?, queues);
    }
    if let Some(t) = name.strip_prefix("muri/") {
        let dir = traces_dir.join("muri");
        let path = dir.join(format!("{t}.csv"));
        let spec = dir.join("n8g8.csv");
        return muri(name, &path, &read_text(&path)?, Some((&spec, &read_text(&spec)?)));
    }
    if let Some(c) = name.strip_prefix("itp/") {
        let archive = traces_dir.join("itp").join("raw-traces.tar.gz");
        let member = format!("{c}.csv");
        let text = read_archive_member(&archive, &member)?;
        let path = PathBuf::from(format!("{}:{member}", archive.display()));
        return itp(name, &path, &text);
    }
    Err(ReplayError::Trace(format!(
        "unknown trace {name:?}: expected muri/trace1 … muri/trace4 (or muri/traceN_pr), philly, itp/cluster01 … \
         itp/cluster10, or the path of a CSV file"
    )))
}

/// A CSV file of one of the schemas, recognised by its header; a Muri trace takes its
/// cluster from `n8g8.csv` beside it and a Philly trace its queues from `philly_vc.csv`
/// beside it, when there.
fn load_file(name: &str, path: &Path) -> Result<Trace, ReplayError> {
    let text = read_text(path)?;
    let header = text.lines().next().unwrap_or_default();
    let has = |c: &str| header.split(',').any(|h| h.trim() == c);
    let dir = path.parent().unwrap_or(Path::new("."));
    if has("submit_time") && has("num_gpu") && has("duration") {
        let spec = dir.join("n8g8.csv");
        let spec_text = spec.is_file().then(|| read_text(&spec)).transpose()?;
        return muri(name, path, &text, spec_text.as_deref().map(|t| (spec.as_path(), t)));
    }
    if has("timestamp") && has("num_gpus") && has("cluster") {
        let vc = dir.join("philly_vc.csv");
        let queues = if vc.is_file() { philly_queues(&vc, &read_text(&vc)?)? } else { Vec::new() };
        return philly(name, path, &text, queues);
    }
    if has("submission_time") && has("num_gpu") && has("duration") {
        return itp(name, path, &text);
    }
    Err(ReplayError::Trace(format!(
        "{}: the header {header:?} is not a known job trace schema: expected Muri's (job_id, num_gpu, submit_time, \
         duration, …), Philly's (timestamp, duration, num_gpus, gpu_time, cluster) or ITP's (job_id, \
         submission_time, duration, num_gpu)",
        path.display()
    )))
}

/// The text of `member` of a `.tar.gz` archive, read in memory.
fn read_archive_member(archive: &Path, member: &str) -> Result<String, ReplayError> {
    let file = std::fs::File::open(archive).map_err(|source| ReplayError::Read { path: archive.into(), source })?;
    let read_err = |source| ReplayError::Read { path: archive.into(), source };
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let mut names = Vec::new();
    for entry in tar.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let path = entry.path().map_err(read_err)?.to_string_lossy().to_string();
        if Path::new(&path).file_name().is_some_and(|f| f == member) {
            let mut text = String::new();
            entry.read_to_string(&mut text).map_err(read_err)?;
            return Ok(text);
        }
        if path.ends_with(".csv") {
            names.push(path);
        }
    }
    names.sort();
    Err(ReplayError::Trace(format!("{} has no {member} (it has: {})", archive.display(), names.join(", "))))
}

/// A Muri trace: times in milliseconds (Muri's own simulator divides `submit_time` and
/// `duration` by 1000 to get seconds, and `duration` is `iterations × iteration_time` with
/// `iteration_time` in ms); one queue; the cluster of `n8g8.csv` when given, else sized by
/// [`size_cluster`].
pub fn muri(name: &str, path: &Path, text: &str, spec: Option<(&Path, &str)>) -> Result<Trace, ReplayError> {
    let csv = Csv::parse(path, text)?;
    let (id, gpus, submit, duration) =
        (csv.index("job_id")?, csv.index("num_gpu")?, csv.index("submit_time")?, csv.index("duration")?);
    let mut jobs = Vec::with_capacity(csv.rows.len());
    for row in &csv.rows {
        jobs.push(TraceJob {
            id: row.1[id].to_string(),
            queue: 0,
            gpus: csv.gpus(row, gpus)?,
            submit_ms: csv.time_ms(row, submit, "milliseconds", 1.0)?,
            duration_ms: csv.time_ms(row, duration, "milliseconds", 1.0)?,
        });
    }
    let queues = vec![QueueSpec { name: "muri".into(), weight: 1 }];
    let mut trace = finish(name, jobs, queues)?;
    if let Some((spec_path, spec_text)) = spec {
        let spec = Csv::parse(spec_path, spec_text)?;
        let row = spec.rows.first().ok_or_else(|| {
            ReplayError::Trace(format!("{}: no row after the header (expected the cluster spec)", spec_path.display()))
        })?;
        let int = |c: &str| -> Result<u32, ReplayError> {
            let i = spec.index(c)?;
            Ok(spec.number(row, i, "a whole number ≥ 1", |v| v.fract() == 0.0 && (1.0..1e6).contains(&v))? as u32)
        };
        let switches = int("num_switch")?;
        let per_switch = int("num_node_p_switch")?;
        trace.nodes = switches * per_switch;
        trace.node =
            NodeShape { gpus: int("num_gpu_p_node")?, cpus: int("num_cpu_p_node")?, memory_gib: int("mem_p_node")? };
        trace.sizing = format!(
            "{} ({switches} switch(es) × {per_switch} nodes × {} GPUs)",
            spec_path.file_name().unwrap_or_default().to_string_lossy(),
            trace.node.gpus
        );
    }
    check_fits(&trace)?;
    Ok(trace)
}

/// The queues of `philly_vc.csv`: one per virtual cluster, weighted by its node count.
pub fn philly_queues(path: &Path, text: &str) -> Result<Vec<QueueSpec>, ReplayError> {
    let csv = Csv::parse(path, text)?;
    let (vc, nodes) = (csv.index("vc")?, csv.index("node num")?);
    let mut queues = Vec::new();
    for row in &csv.rows {
        let n =
            csv.number(row, nodes, "a whole number of nodes ≥ 1", |v| v.fract() == 0.0 && (1.0..1e6).contains(&v))?;
        queues.push(QueueSpec { name: row.1[vc].to_string(), weight: n as i32 });
    }
    Ok(queues)
}

/// The Philly trace: `timestamp` is a UTC date and time, `duration` in seconds; one queue per
/// virtual cluster of `queues` (rows of other virtual clusters are skipped and counted), and
/// one 8-GPU node per node of the virtual clusters. Without `queues`, one queue per cluster id
/// of the trace and a cluster sized by [`size_cluster`].
pub fn philly(name: &str, path: &Path, text: &str, queues: Vec<QueueSpec>) -> Result<Trace, ReplayError> {
    let csv = Csv::parse(path, text)?;
    let (ts, duration, gpus, cluster) =
        (csv.index("timestamp")?, csv.index("duration")?, csv.index("num_gpus")?, csv.index("cluster")?);
    let given = !queues.is_empty();
    let mut queues = queues;
    let mut skipped = BTreeMap::new();
    let mut jobs = Vec::with_capacity(csv.rows.len());
    for row in &csv.rows {
        let (line, fields) = row;
        let vc = fields[cluster];
        let queue = match queues.iter().position(|q| q.name == vc) {
            Some(q) => q,
            None if given => {
                *skipped.entry(format!("virtual cluster not in philly_vc.csv ({vc})")).or_insert(0) += 1;
                continue;
            }
            None => {
                queues.push(QueueSpec { name: vc.to_string(), weight: 1 });
                queues.len() - 1
            }
        };
        let submit = parse_utc(fields[ts]).ok_or_else(|| {
            csv.error(*line, ts, format!("expected a UTC time YYYY-MM-DD HH:MM:SS, found {:?}", fields[ts]))
        })?;
        jobs.push(TraceJob {
            id: format!("{line}"),
            queue,
            gpus: csv.gpus(row, gpus)?,
            submit_ms: submit * 1000,
            duration_ms: csv.time_ms(row, duration, "seconds", 1000.0)?,
        });
    }
    let nodes: u32 = if given { queues.iter().map(|q| q.weight as u32).sum() } else { 0 };
    let mut trace = finish(name, jobs, queues)?;
    trace.skipped = skipped;
    if given {
        trace.nodes = nodes;
        trace.sizing = format!("Σ node counts of philly_vc.csv: {nodes} × {GPUS_PER_NODE}-GPU nodes");
    }
    check_fits(&trace)?;
    Ok(trace)
}

/// An ITP cluster's trace: `submission_time` and `duration` in seconds; one queue; the
/// cluster sized by [`size_cluster`].
pub fn itp(name: &str, path: &Path, text: &str) -> Result<Trace, ReplayError> {
    let csv = Csv::parse(path, text)?;
    let (id, submit, duration, gpus) =
        (csv.index("job_id")?, csv.index("submission_time")?, csv.index("duration")?, csv.index("num_gpu")?);
    let mut jobs = Vec::with_capacity(csv.rows.len());
    for row in &csv.rows {
        jobs.push(TraceJob {
            id: row.1[id].to_string(),
            queue: 0,
            gpus: csv.gpus(row, gpus)?,
            submit_ms: csv.time_ms(row, submit, "seconds", 1000.0)?,
            duration_ms: csv.time_ms(row, duration, "seconds", 1000.0)?,
        });
    }
    let trace = finish(name, jobs, vec![QueueSpec { name: "itp".into(), weight: 1 }])?;
    check_fits(&trace)?;
    Ok(trace)
}

/// Sorts the jobs by submission, makes times relative to the first, and sizes the cluster
/// with [`size_cluster`] (a trace with a cluster spec replaces it).
fn finish(name: &str, mut jobs: Vec<TraceJob>, queues: Vec<QueueSpec>) -> Result<Trace, ReplayError> {
    if jobs.is_empty() {
        return Err(ReplayError::Trace(format!("trace {name}: no jobs")));
    }
    // Stable: jobs submitted at once keep their order in the file.
    jobs.sort_by_key(|j| j.submit_ms);
    let first = jobs[0].submit_ms;
    for j in &mut jobs {
        j.submit_ms -= first;
    }
    let (nodes, sizing) = size_cluster(&jobs);
    Ok(Trace {
        name: name.to_string(),
        jobs,
        queues,
        nodes,
        node: NodeShape { gpus: GPUS_PER_NODE, cpus: 64, memory_gib: 512 },
        sizing,
        skipped: BTreeMap::new(),
    })
}

/// The cluster of a trace without one (ITP): the peak GPU demand if every job ran from its
/// submission for its duration (no queueing), halved, in 8-GPU nodes (rounded up), and never
/// fewer than the largest job needs. Half the peak makes queues form at busy times while the
/// cluster keeps up over the trace.
pub fn size_cluster(jobs: &[TraceJob]) -> (u32, String) {
    let mut events: Vec<(i64, i64)> = Vec::with_capacity(jobs.len() * 2);
    for j in jobs {
        events.push((j.submit_ms, i64::from(j.gpus)));
        events.push((j.submit_ms + j.duration_ms, -i64::from(j.gpus)));
    }
    // Ends before starts at the same time.
    events.sort();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += d;
        peak = peak.max(now);
    }
    let largest = jobs.iter().map(|j| j.gpus).max().unwrap_or(1);
    let per = GPUS_PER_NODE as i64;
    let half = ((peak + 1) / 2 + per - 1) / per;
    let nodes = (half as u32).max(largest.div_ceil(GPUS_PER_NODE)).max(1);
    (nodes, format!("half the peak demand without queueing ({peak} GPUs) in {GPUS_PER_NODE}-GPU nodes: {nodes} nodes"))
}

/// Every job fits in the cluster (else it would wait for ever).
fn check_fits(trace: &Trace) -> Result<(), ReplayError> {
    if let Some(j) = trace.jobs.iter().find(|j| j.gpus > trace.total_gpus()) {
        return Err(ReplayError::Trace(format!(
            "trace {}: job {} needs {} GPUs, more than the cluster's {} ({})",
            trace.name,
            j.id,
            j.gpus,
            trace.total_gpus(),
            trace.sizing
        )));
    }
    Ok(())
}

/// Seconds since the Unix epoch of `YYYY-MM-DD HH:MM:SS` (UTC).
fn parse_utc(s: &str) -> Option<i64> {
    let (date, time) = s.trim().split_once(' ')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, min, sec) = (t.next()??, t.next()??, t.next()??);
    if d.next().is_some() || t.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    if !(0..24).contains(&h) || !(0..60).contains(&min) || !(0..=60).contains(&sec) {
        return None;
    }
    // Days from the civil date (proleptic Gregorian), as in Howard Hinnant's algorithm.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + min * 60 + sec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_are_read() {
        assert_eq!(parse_utc("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_utc("2017-10-09 07:01:55"), Some(1_507_532_515));
        assert_eq!(parse_utc("2000-02-29 12:00:00"), Some(951_825_600));
        assert_eq!(parse_utc("2017-13-09 07:01:55"), None);
        assert_eq!(parse_utc("2017-10-09"), None);
    }

    #[test]
    fn the_cluster_without_a_spec_is_half_the_peak() {
        let job =
            |s: i64, d: i64, g: u32| TraceJob { id: String::new(), queue: 0, gpus: g, submit_ms: s, duration_ms: d };
        // Peak 40 GPUs (t in 7..10): half is 20, three 8-GPU nodes; the job at 10 starts as
        // the first ends.
        let (nodes, _) = size_cluster(&[job(0, 10, 8), job(5, 10, 8), job(6, 10, 8), job(7, 10, 16), job(10, 5, 8)]);
        assert_eq!(nodes, 3);
        // A 64-GPU job alone: the largest job decides.
        assert_eq!(size_cluster(&[job(0, 10, 64)]).0, 8);
    }
}
