//! Golden files: every example job in `examples/jobs/` is admitted (`mutate_job`, and
//! `validate_job_create` must accept it), then planned; the PodGroup, the pods, the plugin
//! objects and the `dependsOn` gating are compared with `tests/golden/<example>.yaml`.
//!
//! `BLESS=1 cargo test -p volcano-controller --test golden` rewrites the golden files with
//! the current plan (review the diff!). The ssh key pair is the fixed test key in
//! `tests/fixtures`; the golden files show the Secret's `config` and leave the keys out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rsa::pkcs1::DecodeRsaPrivateKey;
use serde_json::{json, Value};
use volcano_api::admission::{mutate_job, validate_job_create, QueueFacts};
use volcano_api::crd::QueueState;
use volcano_api::job::Job;
use volcano_controller::plan::{self, TaskReadiness};
use volcano_controller::plugins::{ssh, JobPlugins};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn test_key() -> ssh::SshKeyPair {
    let pem = std::fs::read_to_string(root().join("tests/fixtures/test_id_rsa")).expect("test key");
    ssh::key_pair(&rsa::RsaPrivateKey::from_pkcs1_pem(&pem).expect("test key parses")).expect("key pair")
}

/// Secrets as text, the keys left out.
fn redact_secrets(resources: &mut Value) {
    use base64::Engine as _;
    for s in resources["secrets"].as_array_mut().into_iter().flatten() {
        let Some(data) = s.get_mut("data").and_then(Value::as_object_mut) else { continue };
        for (k, v) in data.iter_mut() {
            *v = match k.as_str() {
                ssh::PRIVATE_KEY => json!("<the test private key>"),
                ssh::PUBLIC_KEY | ssh::AUTHORIZED_KEYS => json!("<the test public key>"),
                _ => {
                    let b = base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap_or_default()).unwrap();
                    json!(String::from_utf8(b).unwrap())
                }
            };
        }
    }
}

/// The plan of one example, as YAML.
fn plan_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("readable example");
    let mut job: Job = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    job.metadata.namespace.get_or_insert_with(|| "default".into());
    job.metadata.uid = Some("00000000-0000-4000-8000-000000000001".into());
    let job = mutate_job(&job, "default", "volcano-rs");
    let open = |_: &str| Some(QueueFacts { state: Some(QueueState::Open), children: 0 });
    validate_job_create(&job, &open)
        .unwrap_or_else(|e| panic!("{}: the example is not a valid job: {e}", path.display()));
    let plugins = JobPlugins::from_job(&job).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let key = test_key();
    let key = plugins.needs_ssh_key(&job).then_some(&key);
    let pg = plan::pod_group(&job, &BTreeMap::new()).unwrap();
    let pods = plan::pods(&job, &plugins).unwrap();
    let mut resources = serde_json::to_value(plan::job_resources(&job, &plugins, key).unwrap()).unwrap();
    redact_secrets(&mut resources);
    // dependsOn: which tasks may start with no pod observed, and with every task ready.
    let nothing = BTreeMap::new();
    let all_ready: BTreeMap<String, TaskReadiness> = job
        .spec
        .tasks
        .iter()
        .map(|t| (t.name().to_string(), TaskReadiness { succeeded: 0, running_ready: t.replicas }))
        .collect();
    let gate = |r: &BTreeMap<String, TaskReadiness>| -> BTreeMap<String, bool> {
        job.spec.tasks.iter().map(|t| (t.name().to_string(), plan::ready_to_create(&job, t.name(), r))).collect()
    };
    let out = json!({
        "plugins": plugins.names(),
        "readyToCreate": {"nothingObserved": gate(&nothing), "everyTaskReady": gate(&all_ready)},
        "podGroup": pg,
        "pods": pods,
        "resources": resources,
    });
    format!(
        "# Planned by controller/tests/golden.rs from examples/jobs/{}; BLESS=1 rewrites it.\n{}",
        path.file_name().unwrap().to_string_lossy(),
        serde_yaml_ng::to_string(&out).unwrap()
    )
}

#[test]
fn examples_plan_as_the_golden_files_say() {
    let examples = root().join("../examples/jobs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&examples)
        .expect("examples/jobs exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "expected the five example jobs, found {paths:?}");
    let bless = std::env::var("BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for path in &paths {
        let actual = plan_of(path);
        let golden = root().join("tests/golden").join(path.file_name().unwrap());
        if bless {
            std::fs::write(&golden, &actual).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        if expected != actual {
            let diff = similar::TextDiff::from_lines(&expected, &actual);
            let shown = diff.unified_diff().context_radius(3).header("golden", "planned").to_string();
            failures.push(format!("{}:\n{shown}", golden.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "plans differ from the golden files (BLESS=1 rewrites them):\n{}",
        failures.join("\n")
    );
}
