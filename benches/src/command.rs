//! What `volcano-rs bench` runs, once the command has parsed its flags: the standard cases
//! (each run in a fresh process or in this one, the median run reported), a case's cluster
//! written as manifests, and the cycles over a user's manifests. Each returns the text to
//! print and the cases whose checks failed; the command prints and chooses the exit code.

use std::path::{Path, PathBuf};
use std::time::Instant;

use volcano_framework::{Profile, SnapshotError};
use volcano_sim::{normalise_for, FieldValidation, InputError, Manifest};

use crate::cases::Case;
use crate::manifests::WriteError;
use crate::runner::{case_profile, median_run, prepare, render_table, run_case_with, run_manifests, CaseReport};

/// Why `volcano-rs bench` could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A case name that is not a standard case.
    #[error("unknown bench case {name:?} (known: {known})")]
    UnknownCase {
        /// The name given.
        name: String,
        /// The standard cases, comma-separated.
        known: String,
    },
    /// `--write-manifests` names one case.
    #[error("bench --write-manifests: name exactly one case, not {0}")]
    NotOneCase(usize),
    /// The executable to run a case in a fresh process cannot be found or started.
    #[error("cannot run a bench child process: {0}")]
    Spawn(#[source] std::io::Error),
    /// A child process failed without a report.
    #[error("bench child for {case} failed: {stderr}")]
    Child {
        /// The case.
        case: String,
        /// What the child wrote on standard error.
        stderr: String,
    },
    /// A file cannot be created or written.
    #[error("cannot write {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The manifests of a case cannot be written.
    #[error("bench --write-manifests {}: {source}", path.display())]
    Manifests {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: WriteError,
    },
    /// The user's manifests cannot be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The user's objects do not make a snapshot.
    #[error("bench --manifests: {0}")]
    Snapshot(#[from] SnapshotError),
    /// The reports do not encode as JSON (a bug).
    #[error("cannot encode the reports: {0}")]
    Json(#[from] serde_json::Error),
}

impl BenchError {
    /// A bounded label, saying what the user fixes: the command line (`usage`), the input
    /// files (`input`), the output files (`io`), or nothing (`internal`: a child that failed,
    /// an encoding error).
    pub fn category(&self) -> &'static str {
        match self {
            BenchError::UnknownCase { .. } | BenchError::NotOneCase(_) => "usage",
            BenchError::Input(e) => e.category(),
            BenchError::Snapshot(e) => e.category(),
            BenchError::File { .. } | BenchError::Manifests { .. } => "io",
            BenchError::Spawn(_) | BenchError::Child { .. } | BenchError::Json(_) => "internal",
        }
    }
}

/// What a bench run prints, and the cases whose checks failed (the command then fails).
#[derive(Debug)]
pub struct Outcome {
    /// The table, or the reports as JSON.
    pub text: String,
    /// The cases (or the manifests' label) whose checks failed.
    pub failed: Vec<String>,
}

/// The standard cases named, in order; every case when `all`.
pub fn cases(names: &[String], all: bool) -> Result<Vec<Case>, BenchError> {
    if all {
        return Ok(Case::ALL.to_vec());
    }
    names.iter().map(|n| case(n)).collect()
}

fn case(name: &str) -> Result<Case, BenchError> {
    Case::from_name(name).ok_or_else(|| BenchError::UnknownCase {
        name: name.to_string(),
        known: Case::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", "),
    })
}

/// How to run the standard cases.
#[derive(Clone, Debug)]
pub struct CaseRuns {
    /// Runs per case; the median run is reported.
    pub runs: usize,
    /// Run in this process rather than a fresh child process per run.
    pub in_process: bool,
    /// Keep Volcano's metrics in the measured cycles.
    pub metrics: bool,
    /// Print JSON rather than a table.
    pub json: bool,
}

/// Runs the cases. A run out of process starts `exe` as `EXE bench --in-process --runs 1
/// --json [--metrics] CASE` (the `volcano-rs` command), so that peak memory is the case's own.
pub fn run_cases(cases: &[Case], how: &CaseRuns, exe: &Path) -> Result<Outcome, BenchError> {
    let runs = how.runs.max(1);
    let mut reports = Vec::new();
    let mut failed = Vec::new();
    for &case in cases {
        let mut results: Vec<CaseReport> = Vec::new();
        for _ in 0..runs {
            let report =
                if how.in_process { run_case_with(case, how.metrics) } else { child_run(case, how.metrics, exe)? };
            results.push(report);
        }
        let report = median_run(results).expect("at least one run");
        if !report.checks_passed {
            failed.push(report.case.clone());
        }
        reports.push(report);
    }
    Ok(Outcome { text: render(&reports, runs, how.json)?, failed })
}

fn child_run(case: Case, metrics: bool, exe: &Path) -> Result<CaseReport, BenchError> {
    let metrics = if metrics { Some("--metrics") } else { None };
    let out = std::process::Command::new(exe)
        .args(["bench", "--in-process", "--runs", "1", "--json"])
        .args(metrics)
        .arg(case.name())
        .output()
        .map_err(BenchError::Spawn)?;
    // A child whose checks failed prints its report and exits non-zero: the report (with
    // the failures) is kept, so its figures are shown too.
    let report = serde_json::from_slice::<Vec<CaseReport>>(&out.stdout).ok().and_then(|mut v| v.pop());
    match report {
        Some(r) if out.status.success() || !r.checks_passed => Ok(r),
        _ => Err(BenchError::Child {
            case: case.name().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
    }
}

fn render(reports: &[CaseReport], runs: usize, json: bool) -> Result<String, BenchError> {
    Ok(if json {
        let mut s = serde_json::to_string_pretty(reports)?;
        s.push('\n');
        s
    } else {
        render_table(reports, runs)
    })
}

/// `bench CASE --write-manifests FILE [--write-config CONF]`: the case's cluster, as it is at
/// the start of its measured cycle, written as manifests to `path`, and its scheduler
/// configuration to `config`. Returns what was written.
pub fn write_case_manifests(names: &[String], path: &Path, config: Option<&Path>) -> Result<String, BenchError> {
    let [name] = names else { return Err(BenchError::NotOneCase(names.len())) };
    let case = case(name)?;
    let cluster = prepare(case, &case_profile(case));
    let file_error = |path: &Path, source| BenchError::File { path: path.to_path_buf(), source };
    let file = std::fs::File::create(path).map_err(|e| file_error(path, e))?;
    let mut out = std::io::BufWriter::new(file);
    let written = crate::manifests::write(&cluster.objects(), &mut out)
        .map_err(|source| BenchError::Manifests { path: path.to_path_buf(), source })?;
    let mut text = format!("{}: wrote {written} to {}\n", case.name(), path.display());
    if let Some(conf) = config {
        std::fs::write(conf, case.conf()).map_err(|e| file_error(conf, e))?;
        text.push_str(&format!("{}: wrote its scheduler configuration to {}\n", case.name(), conf.display()));
    }
    // The process ends next: freeing the cluster object by object only costs time.
    std::mem::forget(cluster);
    Ok(text)
}

/// How to run the cycles over a user's manifests.
#[derive(Clone, Debug)]
pub struct ManifestRuns {
    /// The files or directories, as `simulate` reads them.
    pub files: Vec<PathBuf>,
    /// The scheduler names whose pods are scheduled.
    pub scheduler_names: Vec<String>,
    /// Cycles per run, each applied before the next.
    pub cycles: u32,
    /// Runs, in this process; the run with the median first cycle is reported.
    pub runs: usize,
    /// Print JSON rather than a table.
    pub json: bool,
}

/// `bench --manifests`: the cycles over a user's manifests with `profile`, `how.runs` times
/// in this process. `progress` is told how long each run's reading and normalising took.
pub fn run_manifest_files(
    how: &ManifestRuns,
    profile: &Profile,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, BenchError> {
    let label = how.files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ");
    let names: Vec<&str> = how.scheduler_names.iter().map(String::as_str).collect();
    let runs = how.runs.max(1);
    let mut results = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let manifest = Manifest::from_paths_with(&how.files, FieldValidation::Strict)?;
        let read = start.elapsed();
        let normalised = normalise_for(manifest, &how.scheduler_names)?;
        let parse_seconds = start.elapsed().as_secs_f64();
        progress(&format!(
            "bench --manifests: run {}: reading {:.3} s, normalising {:.3} s",
            results.len() + 1,
            read.as_secs_f64(),
            parse_seconds - read.as_secs_f64()
        ));
        results.push(run_manifests(&label, normalised.cluster, &names, profile, how.cycles, parse_seconds)?);
    }
    let report = median_run(results).expect("at least one run");
    let failed = if report.checks_passed { Vec::new() } else { vec![label] };
    Ok(Outcome { text: render(&[report], runs, how.json)?, failed })
}
