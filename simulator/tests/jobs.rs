//! Volcano Jobs in the simulator: every example of `examples/jobs/` is admitted, planned
//! into its PodGroup and pods, scheduled as a gang on a small cluster, and its planned
//! environment is in the JSON report.

use std::path::{Path, PathBuf};

use serde_json::Value;
use volcano_framework::{Profile, Registries};
use volcano_sim::{Manifest, Simulator};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn profile() -> Profile {
    let reg = Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() };
    Profile::builtin_default(&reg).expect("the built-in profile")
}

/// Four nodes of 16 cpu, 64Gi and 4 GPUs.
const CLUSTER: &str = "apiVersion: v1\nkind: List\nitems:\n\
- {apiVersion: v1, kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: \"16\", memory: 64Gi, nvidia.com/gpu: \"4\", pods: \"110\"}}}\n\
- {apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: \"16\", memory: 64Gi, nvidia.com/gpu: \"4\", pods: \"110\"}}}\n\
- {apiVersion: v1, kind: Node, metadata: {name: n3}, status: {allocatable: {cpu: \"16\", memory: 64Gi, nvidia.com/gpu: \"4\", pods: \"110\"}}}\n\
- {apiVersion: v1, kind: Node, metadata: {name: n4}, status: {allocatable: {cpu: \"16\", memory: 64Gi, nvidia.com/gpu: \"4\", pods: \"110\"}}}\n";

fn run(example: &str) -> Value {
    let mut m = Manifest::new();
    m.load_str("cluster.yaml", CLUSTER).unwrap();
    m.load_path(&root().join("examples/jobs").join(example)).unwrap_or_else(|e| panic!("{example}: {e}"));
    let mut sim = Simulator::new(m, profile()).unwrap_or_else(|e| panic!("{example}: {e}"));
    sim.run(None).unwrap();
    let report = sim.report();
    let table = report.to_table();
    assert!(table.contains("Jobs ("), "{example}: the table lists the jobs:\n{table}");
    report.to_json_value()
}

/// The env var `name` of a container in the JSON report, as text.
fn env<'a>(container: &'a Value, name: &str) -> Option<&'a str> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name).and_then(|e| e["value"].as_str())
}

fn examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root().join("examples/jobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn every_example_job_runs_as_a_gang() {
    let names = examples();
    assert!(names.len() >= 5, "{names:?}");
    for name in names {
        let v = run(&name);
        let jobs = v["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{name}");
        let job = &jobs[0];
        let pods = job["pods"].as_array().unwrap();
        assert!(!pods.is_empty(), "{name}");
        // Every pod bound, all in one cycle: the gang went whole.
        let bound_cycles: Vec<u64> = pods
            .iter()
            .map(|p| {
                assert_eq!(p["phase"], "Running", "{name}: {p}");
                assert!(p["node"].is_string(), "{name}: {p}");
                let cycle = v["cycles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["binds"].as_array().unwrap().iter().any(|b| b["pod"] == p["pod"]))
                    .unwrap_or_else(|| panic!("{name}: {} never bound", p["pod"]));
                cycle["cycle"].as_u64().unwrap()
            })
            .collect();
        assert!(bound_cycles.windows(2).all(|w| w[0] == w[1]), "{name}: bound in cycles {bound_cycles:?}");
        // The job's PodGroup is the one the report lists, Running.
        let pg = v["podGroups"].as_array().unwrap().iter().find(|g| g["name"] == job["podGroup"]).unwrap();
        assert_eq!(pg["phase"], "Running", "{name}");
        assert_eq!(job["queue"], "default");
        // Job pods are ordinary pods of the report too.
        for p in pods {
            assert!(v["pods"].as_array().unwrap().iter().any(|q| q["pod"] == p["pod"]), "{name}");
        }
        // The env plugin: every container knows its index.
        let has_env = job["plugins"].as_array().unwrap().iter().any(|p| p == "env");
        for p in pods.iter().filter(|_| has_env) {
            for c in p["containers"].as_array().unwrap() {
                assert!(env(c, "VK_TASK_INDEX").is_some(), "{name}: {c}");
            }
        }
        // Never a Secret value in the report.
        let text = serde_json::to_string(&v).unwrap();
        assert!(!text.contains("PRIVATE KEY"), "{name}: a private key in the report");
    }
}

#[test]
fn tf_config_is_in_the_report() {
    let v = run("tf-ps.yaml");
    let job = &v["jobs"][0];
    assert_eq!(job["name"], "default/tf-dist-mnist");
    assert!(job["podGroup"].as_str().unwrap().starts_with("default/tf-dist-mnist-"));
    assert_eq!(job["plugins"], serde_json::json!(["env", "svc", "tensorflow"]));
    let pods = job["pods"].as_array().unwrap();
    let names: Vec<&str> = pods.iter().map(|p| p["pod"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["default/tf-dist-mnist-ps-0", "default/tf-dist-mnist-worker-0", "default/tf-dist-mnist-worker-1"]
    );
    let tf: Value = serde_json::from_str(env(&pods[1]["containers"][0], "TF_CONFIG").unwrap()).unwrap();
    assert_eq!(tf["task"], serde_json::json!({"type": "worker", "index": 0}));
    assert_eq!(tf["cluster"]["ps"], serde_json::json!(["tf-dist-mnist-ps-0.tf-dist-mnist:2222"]));
    assert_eq!(pods[1]["task"], "worker");
    assert_eq!(pods[1]["hostname"], "tf-dist-mnist-worker-0");
    assert_eq!(pods[1]["subdomain"], "tf-dist-mnist");
    // The svc plugin's objects.
    assert_eq!(job["services"], serde_json::json!([{"name": "default/tf-dist-mnist"}]));
    let cm = &job["configMaps"][0];
    assert_eq!(cm["name"], "default/tf-dist-mnist-svc");
    assert_eq!(cm["data"]["worker.host"], "tf-dist-mnist-worker-0.tf-dist-mnist\ntf-dist-mnist-worker-1.tf-dist-mnist");
}

#[test]
fn master_addr_and_hostfile_are_in_the_report() {
    let v = run("pytorch-ddp.yaml");
    let pods = v["jobs"][0]["pods"].as_array().unwrap();
    for p in pods {
        assert_eq!(env(&p["containers"][0], "MASTER_ADDR"), Some("pytorch-ddp-master-0.pytorch-ddp"), "{p}");
    }

    let v = run("mpi-horovod.yaml");
    let job = &v["jobs"][0];
    let hostfile = job["configMaps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "default/horovod-mpi-hostfile")
        .expect("the hostfile ConfigMap");
    assert_eq!(
        hostfile["data"]["hostfile"],
        "horovod-mpiworker-0.horovod slots=2\nhorovod-mpiworker-1.horovod slots=2\n"
    );
    let secret = &job["secrets"][0];
    assert_eq!(secret["name"], "default/horovod-ssh");
    assert_eq!(secret["keys"], serde_json::json!(["authorized_keys", "config", "id_rsa", "id_rsa.pub"]));
    let master = &job["pods"][0];
    assert_eq!(master["task"], "mpimaster");
    let mounts = master["containers"][0]["volumeMounts"].as_array().unwrap();
    assert!(mounts.iter().any(|m| m["mountPath"] == "/etc/mpi/hostfile"), "{mounts:?}");
    assert_eq!(master["initContainers"].as_array().unwrap().last().unwrap()["name"], "wait-for-workers");
}

#[test]
fn depends_on_tasks_are_created_at_once() {
    let v = run("depends-on.yaml");
    assert_eq!(v["jobs"][0]["pods"].as_array().unwrap().len(), 3);
}

fn load_err(job: &str) -> String {
    let mut m = Manifest::new();
    m.load_str("cluster.yaml", CLUSTER).unwrap();
    if let Err(e) = m.load_str("job.yaml", job) {
        return e.to_string();
    }
    match Simulator::new(m, profile()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("the job was accepted:\n{job}"),
    }
}

const TASK: &str = "  tasks:\n  - name: w\n    replicas: 2\n    template:\n      spec:\n        containers:\n        - {name: c, image: busybox, resources: {requests: {cpu: \"1\"}}}\n";

#[test]
fn an_invalid_job_is_an_input_error_naming_the_job() {
    let job = format!("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: big, namespace: ml}}\nspec:\n  minAvailable: 3\n{TASK}");
    let err = load_err(&job);
    assert!(err.contains("job.yaml: document 1"), "{err}");
    assert!(err.contains("Job ml/big"), "{err}");
    assert!(err.contains("field spec.minAvailable"), "{err}");

    let job = format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: lost}}\nspec:\n  queue: nowhere\n{TASK}"
    );
    let err = load_err(&job);
    assert!(err.contains("Job default/lost") && err.contains("nowhere"), "{err}");

    let job = format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: typo}}\nspec:\n  minAvailble: 1\n{TASK}"
    );
    let err = load_err(&job);
    assert!(err.contains("Job default/typo") && err.contains("spec.minAvailble"), "{err}");

    let huge = TASK.replace("replicas: 2", "replicas: 2000000000");
    let job = format!(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: huge}}\nspec:\n  minAvailable: 1\n{huge}"
    );
    let err = load_err(&job);
    assert!(err.contains("Job default/huge") && err.contains("at most 100000 pods"), "{err}");

    let job = format!("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: plug}}\nspec:\n  plugins: {{tensorflow: [\"--nope=1\"]}}\n{TASK}");
    let err = load_err(&job);
    assert!(err.contains("Job default/plug") && err.contains("spec.plugins"), "{err}");
}

#[test]
fn a_job_gets_the_simulation_scheduler_name_and_a_deterministic_uid() {
    let job = format!("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: j}}\nspec:\n{TASK}");
    let load = || {
        let mut m = Manifest::new();
        m.load_str("cluster.yaml", CLUSTER).unwrap();
        m.load_str("job.yaml", &job).unwrap();
        let mut sim = Simulator::new(m, profile()).unwrap();
        sim.run(None).unwrap();
        sim.report().to_json_value()
    };
    let v = load();
    assert_eq!(v, load(), "the same input gives the same report");
    let pods = v["jobs"][0]["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2);
    assert!(pods.iter().all(|p| p["phase"] == "Running"), "{pods:?}");
}
