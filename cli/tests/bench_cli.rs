//! `volcano-rs bench --manifests` as a user runs it: the built binary on the examples,
//! checked against `simulate` on the same files, and on bad input.

mod common;

use common::{run, stderr};
use serde_json::Value;

#[test]
fn manifests_bench_times_each_cycle_and_binds_what_simulate_binds() {
    let files = ["--config", "examples/volcano-scheduler.conf", "examples/gpu-cluster.yaml"];
    let o = run(&["bench", "--runs", "1", "--json", "--cycles", "2", "--manifests", files[2], "--config", files[1]]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let reports = v.as_array().expect("an array of reports");
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    assert_eq!(r["case"], "examples/gpu-cluster.yaml");
    assert_eq!(r["checks_passed"], true, "{r}");
    assert_eq!(r["cycles_seconds"].as_array().map(Vec::len), Some(2));
    assert!(r["parse_seconds"].as_f64().is_some_and(|s| s > 0.0));
    assert_eq!(r["cycle_seconds"], r["cycles_seconds"][0]);

    // The first cycle binds what simulate's first cycle binds on the same input.
    let s = run(&["simulate", "--cycles", "1", "--output", "json", files[0], files[1], files[2]]);
    assert!(s.status.success(), "{}", stderr(&s));
    let sim: Value = serde_json::from_slice(&s.stdout).expect("JSON on stdout");
    let binds = sim["cycles"][0]["binds"].as_array().expect("the first cycle's binds").len();
    assert!(binds > 0, "the example binds pods in its first cycle");
    assert_eq!(r["pods_bound"].as_u64(), Some(binds as u64));
    let text = std::fs::read_to_string(common::root().join(files[2])).expect("the example");
    let nodes = text.lines().filter(|l| l.contains("kind: Node,")).count();
    assert!(nodes > 0);
    assert_eq!(r["nodes"].as_u64(), Some(nodes as u64));
    // Gangs: every bound pod's group counts once, and no pending group is counted twice.
    let whole = r["gangs_whole"].as_u64().expect("gangs_whole");
    assert!(whole > 0 && whole <= binds as u64, "{r}");

    // The table names the reading time and each cycle.
    let t = run(&["bench", "--runs", "1", "--cycles", "2", "--manifests", files[2], "--config", files[1]]);
    assert!(t.status.success(), "{}", stderr(&t));
    let text = String::from_utf8_lossy(&t.stdout);
    assert!(text.contains("each cycle") && text.contains("reading"), "{text}");
}

#[test]
fn manifests_bench_names_a_missing_file_and_refuses_cases_with_it() {
    let o = run(&["bench", "--manifests", "no/such/file.yaml"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("no/such/file.yaml"), "{}", stderr(&o));
    let o = run(&["bench", "--all", "--manifests", "examples/gpu-cluster.yaml"]);
    assert!(!o.status.success(), "--all and --manifests together");
    let o = run(&["bench", "fill-1k", "--cycles", "2"]);
    assert!(!o.status.success(), "--cycles needs --manifests");
    assert!(stderr(&o).contains("--manifests only"), "{}", stderr(&o));
}

#[test]
fn bench_help_and_the_unknown_case_error_name_every_case() {
    let o = run(&["bench", "--help"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let help = String::from_utf8_lossy(&o.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    let o = run(&["bench", "no-such-case"]);
    assert!(!o.status.success());
    let known = stderr(&o);
    for case in volcano_benches::cases::Case::ALL {
        assert!(help.contains(case.name()), "bench --help does not name {}: {help}", case.name());
        assert!(known.contains(case.name()), "the unknown-case error does not name {}: {known}", case.name());
    }
}
