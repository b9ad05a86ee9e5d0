//! Job replays on tiny hand-made traces with known answers, the malformed-row error, the
//! elastic mode, and (when `../shared/traces` is there) the public traces' readers.

use std::path::{Path, PathBuf};

use volcano_replay::jobs::{self, Options, Replayed};
use volcano_replay::ReplayError;

/// A fresh directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("volcano-replay-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const MURI_HEADER: &str = "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,iteration_time,resource_time_0,resource_time_1,resource_time_2,priority";

/// A Muri-schema trace (times in ms) of `(id, gpus, submit_ms, duration_ms)` on `nodes`
/// nodes of 8 GPUs (an `n8g8.csv` beside it).
fn muri_trace(dir: &Path, nodes: u32, jobs: &[(u32, u32, i64, i64)]) -> PathBuf {
    std::fs::write(
        dir.join("n8g8.csv"),
        format!("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,{nodes},8,92,520\n"),
    )
    .unwrap();
    let mut text = format!("{MURI_HEADER}\n");
    for (id, gpus, submit, duration) in jobs {
        text.push_str(&format!("{id},{gpus},{submit},1,dqn,128,{duration},0,1,1,1,0,0\n"));
    }
    let path = dir.join("trace.csv");
    std::fs::write(&path, text).unwrap();
    path
}

fn replay(path: &Path, config: Option<&str>, elastic: bool) -> Replayed {
    let profile = match config {
        Some(text) => volcano_builtin::profile_from_text(text).unwrap(),
        None => volcano_builtin::default_profile().unwrap(),
    };
    let options = Options { elastic, progress: false };
    jobs::load_and_replay(path.to_str().unwrap(), Path::new("/nonexistent"), &profile, &options).unwrap()
}

/// (start, end) of each job, in seconds.
fn times(r: &Replayed) -> Vec<(Option<f64>, Option<f64>)> {
    r.outcome.jobs.iter().map(|o| (o.start_ms.map(|v| v as f64 / 1e3), o.end_ms.map(|v| v as f64 / 1e3))).collect()
}

/// Two nodes of 8 GPUs, three gangs: a 16-GPU job takes the cluster for 10 s; two 8-GPU jobs
/// submitted at 1 s and 2 s wait for it, then run side by side for 5 s.
#[test]
fn three_gangs_on_two_nodes_queue_behind_the_first() {
    let dir = temp_dir("three-gangs");
    let path = muri_trace(&dir, 2, &[(0, 16, 0, 10_000), (1, 8, 1000, 5000), (2, 8, 2000, 5000)]);
    let r = replay(&path, None, false);
    assert_eq!(times(&r), vec![(Some(0.0), Some(10.0)), (Some(10.0), Some(15.0)), (Some(10.0), Some(15.0))]);
    let s = &r.summary;
    assert_eq!((s.finished, s.unfinished, s.gpus, s.nodes), (3, 0, 16, 2));
    // JCTs 10, 14, 13; queueing delays 0, 9, 8.
    assert!((s.jct.mean - 37.0 / 3.0).abs() < 1e-9, "{:?}", s.jct);
    assert_eq!((s.jct.p50, s.jct.p99), (13.0, 14.0));
    assert!((s.queueing_delay.mean - 17.0 / 3.0).abs() < 1e-9, "{:?}", s.queueing_delay);
    assert_eq!((s.queueing_delay.p50, s.queueing_delay.p99), (8.0, 9.0));
    assert_eq!(s.makespan, 15.0);
    assert!((s.mean_gpu_utilisation - 100.0).abs() < 1e-9, "{}", s.mean_gpu_utilisation);
    assert_eq!((s.evictions, s.restarts), (0, 0));

    // The files: a row per job, and the charts.
    let out = dir.join("out");
    let files = jobs::output::write_files(&r, &out).unwrap();
    assert_eq!(files.len(), 5);
    let csv = std::fs::read_to_string(out.join("jobs.csv")).unwrap();
    assert_eq!(
        csv.lines().collect::<Vec<_>>(),
        vec![
            "id,queue,gpus,submit_s,start_s,end_s,jct_s,queueing_delay_s,restarts",
            "0,muri,16,0.000,0.000,10.000,10.000,0.000,0",
            "1,muri,8,1.000,10.000,15.000,14.000,9.000,0",
            "2,muri,8,2.000,10.000,15.000,13.000,8.000,0",
        ]
    );
    assert!(std::fs::read_to_string(out.join("queue_share.svg")).unwrap().contains("muri"));
    std::fs::remove_dir_all(&dir).ok();
}

/// Arrivals between two periods are coalesced: jobs submitted at 1.2 s and 1.8 s are both
/// seen by the cycle at 2 s, and the second runs once the first is done.
#[test]
fn arrivals_are_coalesced_into_the_next_period() {
    let dir = temp_dir("coalesced");
    let path = muri_trace(&dir, 1, &[(0, 8, 1200, 3000), (1, 8, 1800, 3000)]);
    let r = replay(&path, None, false);
    // The trace's clock starts at its first submission: 1.2 s is 0.
    assert_eq!(times(&r), vec![(Some(0.0), Some(3.0)), (Some(3.0), Some(6.0))]);
    let o: Vec<f64> = r.trace.jobs.iter().map(|j| j.submit_ms as f64 / 1e3).collect();
    assert_eq!(o, vec![0.0, 0.6]);
    assert!((r.summary.queueing_delay.mean - 1.2).abs() < 1e-9);
    std::fs::remove_dir_all(&dir).ok();
}

/// A configuration of its own (`--config`): binpack on GPUs places the two small gangs on one
/// node, leaving the other whole for the 8-GPU job that comes next; the default spreads them.
#[test]
fn another_configuration_changes_the_answer() {
    let binpack = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 10
"#;
    let dir = temp_dir("binpack");
    // Two 4-GPU jobs for 10 s, then an 8-GPU job at 1 s.
    let path = muri_trace(&dir, 2, &[(0, 4, 0, 10_000), (1, 4, 0, 10_000), (2, 8, 1000, 10_000)]);
    let packed = replay(&path, Some(binpack), false);
    assert_eq!(times(&packed)[2], (Some(1.0), Some(11.0)), "binpack leaves a node free for the 8-GPU job");
    // Volcano's default configuration spreads them (nodeorder's least-requested score): the
    // 8-GPU job waits for one of them to end.
    let spread = replay(&path, None, false);
    assert_eq!(times(&spread)[2], (Some(10.0), Some(20.0)), "the default configuration spreads the small gangs");
    std::fs::remove_dir_all(&dir).ok();
}

/// A malformed row is reported with the file, its line, the column and what was expected.
#[test]
fn a_malformed_row_names_file_line_and_column() {
    let dir = temp_dir("malformed");
    let path = dir.join("trace.csv");
    std::fs::write(
        &path,
        format!("{MURI_HEADER}\n0,1,0,1,dqn,128,1000,0,1,1,1,0,0\n1,x,0,1,dqn,128,1000,0,1,1,1,0,0\n"),
    )
    .unwrap();
    let profile = volcano_builtin::default_profile().unwrap();
    let err = jobs::load_and_replay(path.to_str().unwrap(), &dir, &profile, &Options::default()).unwrap_err();
    match &err {
        ReplayError::Row { path: p, line, column, message } => {
            assert_eq!((p.as_path(), *line, column.as_str()), (path.as_path(), 3, "num_gpu"));
            assert!(message.contains("expected a whole number of GPUs") && message.contains("\"x\""), "{message}");
        }
        other => panic!("expected a row error, got {other:?}"),
    }
    assert!(err.to_string().starts_with(&format!("{}:3: column num_gpu: expected", path.display())), "{err}");
    assert_eq!(err.category(), "row");

    // A row with a field missing: the line and the count of fields.
    std::fs::write(&path, format!("{MURI_HEADER}\n0,1,0\n")).unwrap();
    let err = jobs::load_and_replay(path.to_str().unwrap(), &dir, &profile, &Options::default()).unwrap_err();
    assert!(err.to_string().contains("trace.csv:2: column") && err.to_string().contains("found 3"), "{err}");

    // A negative duration in a Philly-schema file.
    std::fs::write(&path, "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,-5,1,0,vc\n").unwrap();
    let err = jobs::load_and_replay(path.to_str().unwrap(), &dir, &profile, &Options::default()).unwrap_err();
    assert!(err.to_string().contains("trace.csv:2: column duration: expected a number of seconds ≥ 0"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// Elastic mode, one node of 8 GPUs: an 8-GPU job (two pods of 4, at least one) runs alone;
/// a 1-GPU gang arrives at 20 s and cannot fit, so the autoscaler shrinks the big job to one
/// pod, the gang runs, and the big job grows back after its cooldown. Its work (800
/// GPU-seconds) progresses at the GPUs it holds, so it ends later than its 100 s; the small
/// job waits seconds, not the 80 s it waits without elasticity.
#[test]
fn elastic_jobs_shrink_for_a_waiting_gang_and_grow_back() {
    let dir = temp_dir("elastic");
    let path = muri_trace(&dir, 1, &[(0, 8, 0, 100_000), (1, 1, 20_000, 10_000)]);

    let rigid = replay(&path, None, false);
    assert_eq!(times(&rigid), vec![(Some(0.0), Some(100.0)), (Some(100.0), Some(110.0))]);

    let r = replay(&path, None, true);
    let s = &r.summary;
    assert_eq!((s.finished, s.unfinished), (2, 0), "{s:#?}");
    assert!(s.shrinks >= 1 && s.grows >= 1, "a shrink for the gang, a grow back: {s:#?}");
    let t = times(&r);
    let (small_start, small_end) = (t[1].0.unwrap(), t[1].1.unwrap());
    assert!(small_start < 40.0, "the small job waits less than without elasticity: {t:?}");
    assert_eq!(small_end - small_start, 10.0);
    let big_end = t[0].1.unwrap();
    assert!(big_end > 100.0 && big_end < 200.0, "the big job ran shrunk for a while: {t:?}");
    // Work is conserved: 800 GPU-seconds at 8 GPUs, less what it did at 4 while shrunk.
    let shrunk_for = 2.0 * (big_end - 100.0);
    assert!(shrunk_for > 0.0 && shrunk_for < 200.0, "{t:?}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The public traces' readers, on the real files (skipped when `../shared/traces` is absent).
#[test]
fn the_public_traces_load() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces");
    if !dir.join("README.md").exists() {
        eprintln!("skipped: {} is absent", dir.display());
        return;
    }
    let t = jobs::trace::load("muri/trace1", &dir).unwrap();
    assert_eq!((t.jobs.len(), t.nodes, t.total_gpus()), (1494, 8, 64));
    let t = jobs::trace::load("philly", &dir).unwrap();
    assert_eq!((t.queues.len(), t.nodes, t.total_gpus()), (11, 352, 2816));
    let skipped: usize = t.skipped.values().sum();
    assert_eq!(t.jobs.len() + skipped, 82_247, "{:?}", t.skipped);
    let t = jobs::trace::load("itp/cluster10", &dir).unwrap();
    assert!(!t.jobs.is_empty() && t.nodes >= 1);
    let err = jobs::trace::load("itp/cluster99", &dir).unwrap_err();
    assert!(err.to_string().contains("has no cluster99.csv"), "{err}");
}
