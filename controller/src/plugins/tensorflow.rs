//! `tensorflow`: `TF_CONFIG` in every container, the JSON TensorFlow's distribution
//! strategies read: `{"cluster": {"ps": [...], "worker": [...], "chief": [...],
//! "evaluator": [...]}, "task": {"type": ..., "index": ...}}`, each host `<pod>.<job>:<port>`.
//! A job of one task with one replica gets none (a stand-alone run).
//!
//! Arguments: `--ps` (ps), `--worker` (worker), `--chief` (chief), `--evaluator`
//! (evaluator): the task names of the roles; `--port` (2222).

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::{add_env, domain_name, env_var, spec_mut, JobPlugin, PluginError, PodContext};

/// The env var.
pub const TF_CONFIG: &str = "TF_CONFIG";
/// The default port.
pub const DEFAULT_PORT: i32 = 2222;

/// The `tensorflow` plugin.
#[derive(Debug)]
pub struct TensorFlow {
    /// `--ps`.
    pub ps: String,
    /// `--worker`.
    pub worker: String,
    /// `--chief`.
    pub chief: String,
    /// `--evaluator`.
    pub evaluator: String,
    /// `--port`.
    pub port: i32,
}

/// `TF_CONFIG`'s shape; roles without a task are left out, as Go's `omitempty` does.
#[derive(Serialize, Debug, Default, PartialEq)]
pub struct TfConfig {
    /// Hosts by role.
    pub cluster: TfCluster,
    /// This pod's role and index.
    pub task: TfTask,
}

/// Hosts by role.
#[derive(Serialize, Debug, Default, PartialEq)]
pub struct TfCluster {
    /// Parameter servers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ps: Vec<String>,
    /// Workers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worker: Vec<String>,
    /// The chief.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chief: Vec<String>,
    /// Evaluators.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evaluator: Vec<String>,
}

/// This pod's role and index.
#[derive(Serialize, Debug, Default, PartialEq)]
pub struct TfTask {
    /// `ps`, `worker`, `chief`, `evaluator`, or the task's own name for another task.
    #[serde(rename = "type")]
    pub kind: String,
    /// The pod's index in its task.
    pub index: i32,
}

impl TensorFlow {
    /// The plugin with its arguments.
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        let a = job_plugins::parse(job, &job_plugins::TENSORFLOW, args)?;
        Ok(TensorFlow {
            ps: a.task("ps", "ps"),
            worker: a.task("worker", "worker"),
            chief: a.task("chief", "chief"),
            evaluator: a.task("evaluator", "evaluator"),
            port: a.port("port", DEFAULT_PORT)?,
        })
    }

    /// The `TF_CONFIG` of a pod.
    pub fn config(&self, ctx: &PodContext<'_>) -> TfConfig {
        let mut c = TfConfig::default();
        for t in &ctx.job.spec.tasks {
            let hosts: Vec<String> =
                (0..t.replicas).map(|i| format!("{}:{}", domain_name(ctx.job_name(), t, i), self.port)).collect();
            let name = t.name();
            if name == self.ps {
                c.cluster.ps = hosts;
            } else if name == self.worker {
                c.cluster.worker = hosts;
            } else if name == self.chief {
                c.cluster.chief = hosts;
            } else if name == self.evaluator {
                c.cluster.evaluator = hosts;
            }
        }
        let task = ctx.task_name();
        let kind = [(&self.chief, "chief"), (&self.worker, "worker"), (&self.ps, "ps"), (&self.evaluator, "evaluator")]
            .into_iter()
            .find(|(n, _)| n.as_str() == task)
            .map_or(task, |(_, k)| k);
        c.task = TfTask { kind: kind.to_string(), index: ctx.replica };
        c
    }
}

impl JobPlugin for TensorFlow {
    fn name(&self) -> &'static str {
        "tensorflow"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let tasks = &ctx.job.spec.tasks;
        if tasks.len() == 1 && tasks[0].replicas == 1 {
            return Ok(());
        }
        let json = serde_json::to_string(&self.config(ctx)).expect("TF_CONFIG serializes");
        add_env(spec_mut(pod), &[env_var(TF_CONFIG, json)], false);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{env_of, job, pod};

    const JOB: &str = r#"
metadata: {name: tf}
spec:
  plugins: {tensorflow: ["--port=3333", "--chief=boss"]}
  tasks:
    - {name: ps, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: worker, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: boss, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
"#;

    #[test]
    fn tf_config_lists_every_role_and_this_pod() {
        let j = job(JOB);
        let p = pod(&j, "worker", 1);
        let env = env_of(&p.spec.unwrap().containers[0]);
        let tf = env.iter().find_map(|e| e.strip_prefix("TF_CONFIG=")).unwrap();
        let v: serde_json::Value = serde_json::from_str(tf).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "cluster": {
                    "ps": ["tf-ps-0.tf:3333"],
                    "worker": ["tf-worker-0.tf:3333", "tf-worker-1.tf:3333"],
                    "chief": ["tf-boss-0.tf:3333"]
                },
                "task": {"type": "worker", "index": 1}
            })
        );
        assert!(tf.starts_with(r#"{"cluster":{"ps":"#), "Volcano's field order: {tf}");
        let chief = pod(&j, "boss", 0);
        assert!(env_of(&chief.spec.unwrap().containers[0])
            .iter()
            .any(|e| e.contains(r#""task":{"type":"chief","index":0}"#)));
    }

    #[test]
    fn a_single_pod_job_gets_no_tf_config() {
        let j = job(r#"
metadata: {name: tf}
spec:
  plugins: {tensorflow: []}
  tasks: [{name: worker, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]
"#);
        assert!(env_of(&pod(&j, "worker", 0).spec.unwrap().containers[0]).iter().all(|e| !e.starts_with("TF_CONFIG")));
    }
}
