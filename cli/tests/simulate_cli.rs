//! `volcano-rs simulate` as a user runs it: the built binary on the examples and on bad
//! input, checking exit codes, stderr and the output formats.

mod common;

use std::path::PathBuf;

use common::{run, stderr};
use serde_json::Value;

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("volcano-rs-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn the_gpu_example_simulates_with_its_configuration() {
    let o = run(&[
        "simulate",
        "--config",
        "examples/volcano-scheduler.conf",
        "--output",
        "json",
        "examples/gpu-cluster.yaml",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["cycles", "jobs", "podGroups", "pods", "queues"], "(sorted by serde_json)");
    assert_eq!(v["jobs"], serde_json::json!([]), "no Volcano Job in the input");
    // The text keeps the order of docs/simulate.md.
    let text = String::from_utf8_lossy(&o.stdout);
    let at = |k: &str| text.find(&format!("\n  \"{k}\":")).unwrap_or_else(|| panic!("top-level key {k}"));
    assert!(at("cycles") < at("pods") && at("pods") < at("podGroups") && at("podGroups") < at("queues"));
    assert!(at("queues") < at("jobs"));
    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 14, "every pod of the input is listed");
    let inference = pods.iter().find(|p| p["pod"] == "prod/inference-0").unwrap();
    assert_eq!((inference["node"].as_str(), inference["phase"].as_str()), (Some("gpu-a1"), Some("Running")));
    let weights: Vec<(&str, i64)> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| (q["name"].as_str().unwrap(), q["weight"].as_i64().unwrap()))
        .collect();
    assert_eq!(weights, [("default", 1), ("prod", 1), ("research", 3), ("root", 1)]);
    assert!(v["cycles"].as_array().unwrap().len() <= 100);
}

#[test]
fn a_volcano_job_runs_on_the_gpu_example_and_shows_its_tf_config() {
    let o = run(&["simulate", "-o", "json", "examples/gpu-cluster.yaml", "examples/jobs/tf-ps.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let job = &v["jobs"][0];
    assert_eq!(job["name"], "default/tf-dist-mnist");
    for p in job["pods"].as_array().unwrap() {
        assert_eq!(p["phase"], "Running", "{p}");
        let env = p["containers"][0]["env"].as_array().unwrap();
        assert!(env.iter().any(|e| e["name"] == "TF_CONFIG"), "{p}");
    }
    // The table has a Jobs section.
    let o = run(&["simulate", "examples/gpu-cluster.yaml", "examples/jobs/tf-ps.yaml"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("default/tf-dist-mnist"));

    // An invalid job: exit 1, the job and the field named.
    let bad = temp_file(
        "bad-job.yaml",
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: big, namespace: ml}\nspec:\n  minAvailable: 3\n  tasks:\n  - name: w\n    replicas: 2\n    template:\n      spec:\n        containers:\n        - {name: c, image: busybox}\n",
    );
    let o = run(&["simulate", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("Job ml/big: field spec.minAvailable"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn the_depends_on_example_creates_the_workers_once_ps_runs() {
    let o = run(&["simulate", "-o", "json", "examples/gpu-cluster.yaml", "examples/jobs/depends-on.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let bound_in = |pod: &str| {
        v["cycles"].as_array().unwrap().iter().find_map(|c| {
            c["binds"].as_array().unwrap().iter().any(|b| b["pod"] == pod).then(|| c["cycle"].as_u64().unwrap())
        })
    };
    assert_eq!(bound_in("default/ps-then-workers-ps-0"), Some(1));
    assert_eq!(bound_in("default/ps-then-workers-worker-0"), Some(2), "created after cycle 1, bound in cycle 2");
    assert_eq!(bound_in("default/ps-then-workers-worker-1"), Some(2));
    let job = v["jobs"].as_array().unwrap().iter().find(|j| j["name"] == "default/ps-then-workers").unwrap();
    assert_eq!(job["pods"].as_array().unwrap().len(), 3);
    assert_eq!(job["notCreated"], serde_json::json!([]));

    let o = run(&["simulate", "examples/gpu-cluster.yaml", "examples/jobs/depends-on.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains(", 2 created (dependsOn met)"), "{table}");
    assert!(table.contains("created  default/ps-then-workers-worker-1"), "{table}");
}

#[test]
fn default_configuration_table_and_yaml() {
    let o = run(&["simulate", "examples/gpu-cluster.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = String::from_utf8(o.stdout).unwrap();
    assert!(table.contains("Queues:"), "{table}");
    assert!(table.starts_with("Cycle 1 (2026-01-01T00:00:00Z)"), "{table}");

    let o = run(&["simulate", "-o", "yaml", "--cycles", "2", "examples/gpu-cluster.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_yaml_ng::from_slice(&o.stdout).expect("YAML on stdout");
    assert_eq!(v["cycles"].as_array().unwrap().len(), 2);
}

#[test]
fn unknown_kind_fails_naming_file_and_document() {
    let f = temp_file(
        "unknown.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
    );
    // A built-in kind that does not affect scheduling is skipped with a count.
    let o = run(&["simulate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("skipped 1 object(s) that do not affect scheduling: 1 apps/v1 Deployment"));
    // A kind nobody knows is an error.
    let f = temp_file(
        "unknown2.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata: {name: web}\n",
    );
    let o = run(&["simulate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("unknown2.yaml: document 2 (line 5): object web: unknown kind \"Widget\""), "{err}");
}

#[test]
fn scheduler_names_and_field_validation_follow_the_flags() {
    let f = temp_file(
        "volcano.yaml",
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"10\"}}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  schedulerName: volcano\n  containers: [{name: c, image: i, resoures: {}}]\n",
    );
    let o = run(&["simulate", "-o", "json", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("field spec.containers[0].resoures: strict decoding error: unknown field"),
        "{}",
        stderr(&o)
    );
    let o = run(&["simulate", "-o", "json", "--validate", "warn", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: ") && stderr(&o).contains("unknown field \"spec.containers[0].resoures\""));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pods"][0]["node"], serde_json::Value::Null, "pods of schedulerName volcano are not ours by default");
    let o =
        run(&["simulate", "-o", "json", "--validate", "ignore", "--scheduler-name", "volcano", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pods"][0]["node"], "n");
}

#[test]
fn invalid_configuration_is_rejected_before_the_first_cycle() {
    let conf = temp_file("bad.conf", "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: no-such-plugin\n");
    let o = run(&["simulate", "--config", conf.to_str().unwrap(), "examples/gpu-cluster.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("bad.conf: invalid scheduler configuration: tiers[0].plugins[0].name: unknown plugin"),
        "{err}"
    );
    assert!(o.stdout.is_empty());

    let o = run(&["simulate", "--config", "no/such.conf", "examples/gpu-cluster.yaml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("error: cannot read the scheduler configuration no/such.conf: "), "{}", stderr(&o));
}

#[test]
fn bad_quantity_names_file_document_object_and_field() {
    let f = temp_file(
        "quantity.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml}\nspec:\n  schedulerName: volcano-rs\n  containers: [{name: c, image: i, resources: {requests: {nvidia.com/gpu: two}}}]\n",
    );
    let o = run(&["simulate", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("quantity.yaml: document 1 (line 1): Pod ml/p: field spec.containers[0].resources.requests[nvidia.com/gpu]: invalid quantity \"two\""),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let o = run(&["simulate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["simulate", "--output", "xml", "examples/gpu-cluster.yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn explain_on_manifests_names_the_refusal_and_writes_json() {
    let o = run(&["explain", "--manifests", "examples/", "research/giant-moe"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("research/giant-moe: waiting"), "{text}");
    assert!(text.contains("not admitted: ") && text.contains("nvidia.com/gpu"), "{text}");
    let o = run(&["explain", "-o", "json", "--manifests", "examples/", "research/giant-moe"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["job"], "research/giant-moe");
    assert_eq!(v["ready"], false);
    assert_eq!(v["tasks"]["Pending"], 4);
    assert!(v["notAdmitted"].as_str().is_some_and(|s| s.contains("overcommit factor")));
    // A name that is no job, and a name that is not NAMESPACE/NAME.
    let o = run(&["explain", "--manifests", "examples/", "research/nope"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no PodGroup and no Volcano Job research/nope"), "{}", stderr(&o));
    let o = run(&["explain", "--manifests", "examples/", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not NAMESPACE/NAME"), "{}", stderr(&o));
}

#[test]
fn simulate_writes_volcanos_metrics() {
    let path = std::env::temp_dir().join(format!("volcano-rs-cli-metrics-{}.txt", std::process::id()));
    let o = run(&["simulate", "--metrics", path.to_str().unwrap(), "examples/"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&path).expect("the metrics file");
    for line in [
        "volcano_queue_weight{queue_name=\"research\"} 3",
        "volcano_unschedule_task_count{job_id=\"giant-moe\"} 4",
        "volcano_unschedule_job_count 1",
        "volcano_queue_pod_group_pending_count{queue_name=\"research\"} 1",
        // examples/gpu-cluster-topology.yaml: 50 of the spine's 64 GPUs in use.
        "volcano_rs_hypernode_utilization{hypernode=\"spine\",resource=\"nvidia.com/gpu\",tier=\"2\"} 0.78125",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    assert!(text.contains("# TYPE volcano_e2e_scheduling_latency_milliseconds histogram"));
    let _ = std::fs::remove_file(&path);
}
