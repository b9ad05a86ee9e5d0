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
        // dependsOn: the pods of a task that depends on others are created once those are
        // ready (bound, hence Running), and bound in a later cycle.
        let depends: Vec<bool> = pods
            .iter()
            .map(|p| {
                let job: volcano_api::job::Job = serde_yaml_ng::from_str(
                    &std::fs::read_to_string(root().join("examples/jobs").join(&name)).unwrap(),
                )
                .unwrap();
                let task = job.spec.tasks.iter().find(|t| t.name() == p["task"].as_str().unwrap()).unwrap();
                task.depends_on.as_ref().is_some_and(|d| !d.name.is_empty())
            })
            .collect();
        let first: Vec<u64> = bound_cycles.iter().zip(&depends).filter(|(_, d)| !**d).map(|(c, _)| *c).collect();
        let later: Vec<u64> = bound_cycles.iter().zip(&depends).filter(|(_, d)| **d).map(|(c, _)| *c).collect();
        assert!(first.windows(2).all(|w| w[0] == w[1]), "{name}: bound in cycles {bound_cycles:?}");
        assert!(later.iter().all(|c| *c > first[0]), "{name}: bound in cycles {bound_cycles:?}");
        assert_eq!(job["notCreated"], serde_json::json!([]), "{name}");
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
    assert!(mounts.iter().any(|m| m["mountPath"] == "/etc/mpi"), "{mounts:?}");
    assert_eq!(master["initContainers"].as_array().unwrap().last().unwrap()["name"], "wait-for-workers");
}

fn simulator_of(job: &str) -> Simulator {
    let mut m = Manifest::new();
    m.load_str("cluster.yaml", CLUSTER).unwrap();
    m.load_str("job.yaml", job).unwrap();
    Simulator::new(m, profile()).unwrap()
}

fn pod_keys(sim: &Simulator) -> Vec<&str> {
    sim.cluster().pods.keys().map(String::as_str).collect()
}

#[test]
fn depends_on_pods_are_created_once_the_tasks_they_wait_for_run() {
    let text = std::fs::read_to_string(root().join("examples/jobs/depends-on.yaml")).unwrap();
    let mut sim = simulator_of(&text);
    // Before the first cycle: only the ps task's pod exists; the workers wait for it.
    assert_eq!(pod_keys(&sim), ["default/ps-then-workers-ps-0"]);

    // Cycle 1 binds ps-0, which becomes Running with its container ready: the job
    // controller creates the workers at the cycle's time.
    let c1 = sim.step().unwrap().clone();
    assert_eq!(c1.binds.iter().map(|b| b.pod.as_str()).collect::<Vec<_>>(), ["default/ps-then-workers-ps-0"]);
    assert_eq!(c1.created, ["default/ps-then-workers-worker-0", "default/ps-then-workers-worker-1"]);
    let ps = &sim.cluster().pods["default/ps-then-workers-ps-0"];
    let statuses = ps.status.as_ref().unwrap().container_statuses.as_ref().unwrap();
    assert_eq!(statuses.len(), 1);
    assert!(statuses[0].ready && statuses[0].name == "ps", "{statuses:?}");
    let pods: Vec<_> = sim.cluster().pods.values().map(|p| p.to_pod()).collect();
    let readiness = volcano_controller::plan::task_readiness(&pods);
    assert_eq!(readiness["ps"].running_ready, 1, "the controller's own readiness counts it");
    let worker = &sim.cluster().pods["default/ps-then-workers-worker-0"];
    let created = worker.metadata.creation_timestamp.as_ref().unwrap().0.as_millisecond();
    assert_eq!(created, c1.time_ms, "created at the virtual time ps became ready");
    assert_eq!(worker.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
    assert!(worker.node_name().is_none());

    // Cycle 2 schedules them like any pod.
    let c2 = sim.step().unwrap().clone();
    let mut bound: Vec<&str> = c2.binds.iter().map(|b| b.pod.as_str()).collect();
    bound.sort();
    assert_eq!(bound, ["default/ps-then-workers-worker-0", "default/ps-then-workers-worker-1"]);
    assert!(c2.created.is_empty());

    sim.run(None).unwrap();
    let report = sim.report();
    let table = report.to_table();
    assert!(
        table.contains("Cycle 1 (2026-01-01T00:00:00Z): 1 bound, 0 evicted, 0 pipelined, 2 created (dependsOn met)"),
        "{table}"
    );
    assert!(table.contains("created  default/ps-then-workers-worker-0"), "{table}");
    assert!(!table.contains("Pods not created"), "{table}");
    let v = report.to_json_value();
    assert_eq!(v["jobs"][0]["pods"].as_array().unwrap().len(), 3);
    assert_eq!(v["jobs"][0]["notCreated"], serde_json::json!([]));
    assert_eq!(v["pods"].as_array().unwrap().len(), 3, "the workers are pods of the report like the others");
}

/// A job whose task `b` depends on `a` and `c` (`iteration` as given); `c` asks for more
/// GPUs than any node has, so it never runs.
fn any_or_all(iteration: &str) -> String {
    r#"apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  minAvailable: 1
  tasks:
  - name: a
    replicas: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
  - name: c
    replicas: 1
    template:
      spec:
        containers:
        - {name: c, image: x, resources: {requests: {nvidia.com/gpu: "8"}, limits: {nvidia.com/gpu: "8"}}}
  - name: b
    replicas: 2
    dependsOn: {name: [a, c], iteration: ITERATION}
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]}}
"#
    .replace("ITERATION", iteration)
}

#[test]
fn depends_on_any_needs_one_ready_task_and_all_needs_every_one() {
    let mut sim = simulator_of(&any_or_all("any"));
    sim.run(None).unwrap();
    let created: Vec<(u64, &str)> =
        sim.history().iter().flat_map(|c| c.created.iter().map(move |p| (c.cycle, p.as_str()))).collect();
    assert_eq!(created, [(1, "default/j-b-0"), (1, "default/j-b-1")], "any: a is ready after cycle 1");
    let report = sim.report();
    let running: Vec<&str> = report.pods.iter().filter(|p| p.phase == "Running").map(|p| p.pod.as_str()).collect();
    assert_eq!(running, ["default/j-a-0", "default/j-b-0", "default/j-b-1"]);

    let mut sim = simulator_of(&any_or_all("all"));
    sim.run(None).unwrap();
    assert!(sim.history().iter().all(|c| c.created.is_empty()), "all: c never becomes ready");
    assert_eq!(pod_keys(&sim), ["default/j-a-0", "default/j-c-0"]);
    let v = sim.report().to_json_value();
    let not_created = &v["jobs"][0]["notCreated"];
    assert_eq!(not_created[0]["task"], "b");
    assert_eq!(not_created[0]["pods"], serde_json::json!(["default/j-b-0", "default/j-b-1"]));
    assert_eq!(not_created[0]["dependsOn"], serde_json::json!(["a", "c"]));
    assert_eq!(not_created[0]["iteration"], "all");
    let reason = not_created[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("waits for dependsOn a, c (iteration all): task c has 0 of the 1 ready pods it needs"),
        "{reason}"
    );
    assert!(!reason.contains("task a"), "a is ready: {reason}");
}

#[test]
fn a_dependency_that_can_never_be_ready_leaves_the_pods_uncreated_and_says_why() {
    // Task a asks for 8 GPUs; no node has more than 4.
    let job = r#"apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: stuck, namespace: ml}
spec:
  minAvailable: 1
  tasks:
  - name: a
    replicas: 1
    template:
      spec:
        containers:
        - {name: c, image: x, resources: {requests: {nvidia.com/gpu: "8"}, limits: {nvidia.com/gpu: "8"}}}
  - name: b
    replicas: 2
    dependsOn: {name: [a]}
    template: {spec: {containers: [{name: c, image: x}]}}
"#;
    let mut sim = simulator_of(job);
    sim.run(None).unwrap();
    assert!(sim.history().iter().all(|c| c.created.is_empty()));
    assert_eq!(pod_keys(&sim), ["ml/stuck-a-0"], "b's pods are never created");
    let report = sim.report();
    let v = report.to_json_value();
    assert_eq!(v["pods"].as_array().unwrap().len(), 1);
    let n = &v["jobs"][0]["notCreated"];
    assert_eq!(n.as_array().unwrap().len(), 1);
    assert_eq!(n[0]["task"], "b");
    assert_eq!(n[0]["iteration"], "all", "the default");
    let reason = n[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("waits for dependsOn a (iteration all): task a has 0 of the 1 ready pods it needs"),
        "{reason}"
    );
    let table = report.to_table();
    assert!(
        table.contains(
            "Pods: 1 in total, 0 running, 1 pending, 0 other; 2 of Volcano Jobs not created (dependsOn not met)."
        ),
        "{table}"
    );
    assert!(table.contains("Pods not created, by job and task (the job controller waits for dependsOn):\n  ml/stuck task b: 2 pods (stuck-b-0, stuck-b-1)\n    waits for dependsOn a (iteration all): task a has 0 of the 1 ready pods it needs"), "{table}");
    assert!(table.contains("ml/stuck  stuck-"), "{table}");
    assert!(table.contains("0/3"), "running over the planned pods: {table}");
}

#[test]
fn a_dump_with_the_dependency_running_creates_the_pods_at_load() {
    // The job's PodGroup is Running and ps-0 runs with its container ready, as
    // `kubectl get -o yaml` shows them: the workers are created before the first cycle.
    let text = std::fs::read_to_string(root().join("examples/jobs/depends-on.yaml")).unwrap();
    let mut m = Manifest::new();
    m.load_str("cluster.yaml", CLUSTER).unwrap();
    m.load_str(
        "job.yaml",
        &text.replace("name: ps-then-workers", "name: ps-then-workers\n  uid: 00000000-0000-4000-8000-000000000001"),
    )
    .unwrap();
    let dump = r#"apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: ps-then-workers-00000000-0000-4000-8000-000000000001}
spec: {minMember: 1}
status: {phase: Running, running: 1}
---
apiVersion: v1
kind: Pod
metadata:
  name: ps-then-workers-ps-0
  annotations: {scheduling.k8s.io/group-name: ps-then-workers-00000000-0000-4000-8000-000000000001, volcano.sh/task-spec: ps}
spec: {schedulerName: volcano-rs, nodeName: n1, containers: [{name: ps, image: busybox}]}
status: {phase: Running, containerStatuses: [{name: ps, image: busybox, imageID: "", ready: true, restartCount: 0}]}
"#;
    m.load_str("dump.yaml", dump).unwrap();
    let sim = Simulator::new(m, profile()).unwrap();
    assert_eq!(
        pod_keys(&sim),
        ["default/ps-then-workers-ps-0", "default/ps-then-workers-worker-0", "default/ps-then-workers-worker-1"]
    );
    // Without a ready container, the same dump leaves them waiting.
    let mut m = Manifest::new();
    m.load_str("cluster.yaml", CLUSTER).unwrap();
    m.load_str(
        "job.yaml",
        &text.replace("name: ps-then-workers", "name: ps-then-workers\n  uid: 00000000-0000-4000-8000-000000000001"),
    )
    .unwrap();
    m.load_str("dump.yaml", &dump.replace("ready: true", "ready: false")).unwrap();
    let sim = Simulator::new(m, profile()).unwrap();
    assert_eq!(pod_keys(&sim), ["default/ps-then-workers-ps-0"]);
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

const RUNS_THREE_SECONDS: &str = "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j, namespace: ml}\nspec:\n  minAvailable: 2\n  tasks:\n  - name: w\n    replicas: 2\n    template:\n      metadata: {annotations: {volcano-rs.io/run-seconds: \"3\"}}\n      spec:\n        containers:\n        - {name: c, image: busybox, resources: {requests: {cpu: \"1\"}}}\n";

#[test]
fn a_job_goes_pending_running_completed_as_its_pods_run_for_their_time() {
    let mut sim = simulator_of(RUNS_THREE_SECONDS);
    let phase = |sim: &Simulator| sim.cluster().jobs["ml/j"].phase().as_str().to_string();
    assert_eq!(phase(&sim), "Pending", "the controller's first sync");
    let c1 = sim.step().unwrap().clone();
    assert_eq!(c1.binds.len(), 2);
    assert_eq!(c1.job_phases, [("ml/j".to_string(), volcano_api::job::JobPhase::Running)]);
    assert_eq!(phase(&sim), "Running");
    let status = sim.cluster().jobs["ml/j"].job.status.clone().unwrap();
    assert_eq!((status.running, status.pending), (2, 0));

    assert_eq!(sim.run(None).unwrap(), volcano_sim::Stop::Fixpoint);
    assert_eq!(phase(&sim), "Completed");
    let history = sim.history();
    let done = history.iter().find(|c| !c.finished.is_empty()).expect("the pods finished");
    assert_eq!(done.finished, ["ml/j-w-0", "ml/j-w-1"]);
    assert_eq!(done.time_ms - c1.time_ms, 3000, "3 s of virtual time after they were bound");
    assert!(done.job_phases.iter().any(|(j, p)| j == "ml/j" && *p == volcano_api::job::JobPhase::Completed));
    // Cycles that changed nothing while the pods ran do not stop the run.
    assert!(history.iter().take_while(|c| c.finished.is_empty()).any(|c| !c.changed()));
    let v = sim.report().to_json_value();
    assert_eq!(v["jobs"][0]["phase"], "Completed");
    for p in v["pods"].as_array().unwrap() {
        assert_eq!(p["phase"], "Succeeded", "{p}");
    }
    assert!(sim.report().to_table().contains("Completed"));
    let pod = &sim.cluster().pods["ml/j-w-0"];
    let c = &pod.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0];
    assert_eq!(c.state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code, 0);
    assert!(!c.ready);
    // The freed node takes other pods: the queue's allocation is back to nothing.
    let q = v["queues"].as_array().unwrap().iter().find(|q| q["name"] == "default").unwrap();
    assert_eq!(q["allocated"]["cpu"], "0", "{q}");
}

#[test]
fn without_a_run_time_a_job_runs_for_ever() {
    let job = RUNS_THREE_SECONDS.replace("      metadata: {annotations: {volcano-rs.io/run-seconds: \"3\"}}\n", "");
    let mut sim = simulator_of(&job);
    sim.run(None).unwrap();
    assert_eq!(sim.cluster().jobs["ml/j"].phase().as_str(), "Running");
    let history = sim.history();
    assert!(history.iter().all(|c| c.finished.is_empty()));
    // The job controller acts once, after the cycle that binds the pods, and never again.
    assert_eq!(history[0].job_phases.len(), 1);
    assert!(history[1..].iter().all(|c| c.job_phases.is_empty() && c.created.is_empty() && c.deleted.is_empty()));
    assert!(!history.last().unwrap().changed());
}

#[test]
fn the_simulation_and_the_controller_plan_the_same_pods() {
    // The pods the simulator creates are the controller's plan, with their task index.
    let text = std::fs::read_to_string(root().join("examples/jobs/depends-on.yaml")).unwrap();
    let sim = simulator_of(&text);
    let sj = sim.cluster().jobs.values().next().unwrap();
    let plugins = volcano_controller::plugins::JobPlugins::from_job(&sj.job).unwrap();
    let planned = volcano_controller::plan::pods(&sj.job, &plugins).unwrap();
    let ps = &sim.cluster().pods["default/ps-then-workers-ps-0"];
    let want = planned.iter().find(|p| p.metadata.name.as_deref() == Some("ps-then-workers-ps-0")).unwrap();
    assert_eq!(ps.metadata.labels, want.metadata.labels);
    assert_eq!(ps.metadata.annotations, want.metadata.annotations);
    assert_eq!(ps.spec.as_ref().unwrap().containers, want.spec.as_ref().unwrap().containers);
}

#[test]
fn jobs_applied_later_are_checked_at_load() {
    let job = |name: &str, annotations: &str, spec: &str| {
        format!("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: {name}, annotations: {{{annotations}}}}}\nspec:\n{spec}{TASK}")
    };
    let base = job("hvd", "", "  minAvailable: 1\n");
    // An update that scales the task below its minAvailable.
    let shrink = job("hvd", "volcano-rs.io/apply-at-seconds: \"5\"", "  minAvailable: 1\n")
        .replace("replicas: 2", "replicas: 1\n    minAvailable: 2");
    let err = load_err(&format!("{base}---\n{shrink}"));
    assert!(err.contains("job.yaml: document 2") && err.contains("Job default/hvd"), "{err}");
    assert!(err.contains("spec.tasks[0].replicas") && err.contains("ScaleBelowMinAvailable"), "{err}");
    // A later version that changes what an update may not change.
    let immutable = job("hvd", "volcano-rs.io/apply-at-seconds: \"5\"", "  minAvailable: 1\n  maxRetry: 7\n");
    let err = load_err(&format!("{base}---\n{immutable}"));
    assert!(err.contains("UpdateImmutable"), "{err}");
    // Not a number of seconds.
    let err = load_err(&job("late", "volcano-rs.io/apply-at-seconds: soon", "  minAvailable: 1\n"));
    assert!(err.contains("Job default/late") && err.contains("\"soon\" is not a number of seconds"), "{err}");
    // On another kind.
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {volcano-rs.io/apply-at-seconds: \"1\"}}\nspec: {containers: [{name: c, image: x}]}\n";
    let err = load_err(pod);
    assert!(err.contains("only Volcano Jobs"), "{err}");
    // A new job that arrives later: not there at the start, created at its time.
    let mut sim = simulator_of(&job("late", "volcano-rs.io/apply-at-seconds: \"3\"", "  minAvailable: 2\n"));
    assert!(sim.cluster().jobs.is_empty());
    sim.run(None).unwrap();
    let created = sim.history().iter().position(|c| !c.applied.is_empty()).expect("applied");
    // Nothing happens before: the clock skips to the cycle at 3 s.
    assert_eq!(sim.history()[created].time_ms - sim.history()[0].time_ms, 3000);
    assert_eq!(sim.history()[created].applied, vec![("default/late".to_string(), "created")]);
    assert_eq!(pod_keys(&sim), ["default/late-w-0", "default/late-w-1"]);
}
