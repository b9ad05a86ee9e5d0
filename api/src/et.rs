//! Alibaba et-operator's custom resources, `kai.alibabacloud.com/v1alpha1`: the elastic
//! `TrainingJob` (a launcher and a resizable set of workers, Horovod elastic or DeepSpeed) and
//! the `ScaleOut` and `ScaleIn` requests that resize one.
//!
//! The field names, JSON spellings and status fields are et-operator's (`api/v1alpha1` and
//! `pkg/controllers/api/v1` of `AliyunContainerService/et-operator`), so that its manifests
//! apply unchanged; volcano-rs's controller serves them (`volcano_controller::training`). The
//! CRDs are [`crate::crds::training_job`], [`crate::crds::scale_in`] and
//! [`crate::crds::scale_out`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "kai.alibabacloud.com";
/// The API version.
pub const VERSION: &str = "v1alpha1";

/// The replica type of the launcher in `status.replicaStatuses`.
pub const LAUNCHER: &str = "Launcher";
/// The replica type of the workers in `status.replicaStatuses`.
pub const WORKER: &str = "Worker";

/// `spec.launcherAttachMode`: the launcher reaches the workers over ssh (the default).
pub const ATTACH_MODE_SSH: &str = "ssh";
/// `spec.launcherAttachMode`: the launcher reaches the workers with `kubectl exec`.
pub const ATTACH_MODE_KUBEXEC: &str = "kubexec";

/// The annotation naming an existing ssh Secret to mount instead of the job's own.
pub const SSH_SECRET_ANNOTATION: &str = "arena.kubeflow.org/ssh-secret";

/// The annotation that suspends a job (`"true"`): phase `Suspended`, every pod deleted.
pub const SUSPENDED_ANNOTATION: &str = "job-supervisor.kube-ai.io/job-suspended";

/// The default of a scale request's `timeout`, in seconds (et-operator's `GetTimeout`).
pub const DEFAULT_SCALE_TIMEOUT_SECONDS: i32 = 60;

/// Phases and condition types (et-operator's `JobConditionType`), shared by the three kinds.
pub mod condition {
    /// The job was accepted; its pods are being made.
    pub const CREATED: &str = "Created";
    /// The launcher runs.
    pub const RUNNING: &str = "Running";
    /// The job restarts after a failure (`restartPolicy: OnFailure`).
    pub const RESTARTING: &str = "Restarting";
    /// The launcher succeeded.
    pub const SUCCEEDED: &str = "Succeeded";
    /// The launcher (or the job's setup) failed.
    pub const FAILED: &str = "Failed";
    /// A ScaleOut or ScaleIn is being carried out.
    pub const SCALING: &str = "Scaling";
    /// A scale request failed or was refused.
    pub const SCALE_FAILED: &str = "ScaleFailed";
    /// A scale request is done.
    pub const SCALE_SUCCEEDED: &str = "ScaleSucceeded";
    /// The host list was changed for a scale request.
    pub const SCRIPT_EXECUTED: &str = "ScriptExecuted";
    /// The workers' pods were made.
    pub const WORKERS_CREATED: &str = "WorkersCreated";
    /// Every worker is ready.
    pub const WORKERS_READY: &str = "WorkersReady";
    /// The launcher's pod was made.
    pub const LAUNCHER_CREATED: &str = "LauncherCreated";
    /// The job waits for resources (annotation `job-supervisor.kube-ai.io/job-suspended`).
    pub const SUSPENDED: &str = "Suspended";
}

/// `cleanPodPolicy` values.
pub mod clean_pod_policy {
    /// Delete every worker pod when the job finishes.
    pub const ALL: &str = "All";
    /// Delete the worker pods still running or pending when the job finishes (the default).
    pub const RUNNING: &str = "Running";
    /// Keep the pods.
    pub const NONE: &str = "None";
}

/// `restartPolicy` values.
pub mod restart_policy {
    /// Always restart.
    pub const ALWAYS: &str = "Always";
    /// Restart after a failure.
    pub const ON_FAILURE: &str = "OnFailure";
    /// Never restart (the default).
    pub const NEVER: &str = "Never";
    /// Restart on a retryable exit code (129 to 254).
    pub const EXIT_CODE: &str = "ExitCode";
}

/// The spec of a TrainingJob.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "TrainingJob",
    plural = "trainingjobs",
    namespaced,
    status = "TrainingJobStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobSpec {
    /// Which pods go when the job finishes: `All`, `Running` (the default) or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<String>,
    /// The launcher and the workers.
    pub et_replica_specs: EtReplicaSpecs,
    /// How the launcher reaches the workers: `ssh` (the default) or `kubexec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher_attach_mode: Option<String>,
    /// Slots per worker in the host lists (default: the first container's `nvidia.com/gpu`
    /// limit, else 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots_per_worker: Option<i32>,
    /// `Never` (the default) or `OnFailure`: whether a failed job starts again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Never", "OnFailure"], "default" = "Never"))]
    pub restart_policy: Option<String>,
    /// Restarts of a failed job at most (default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 6))]
    pub backoff_limit: Option<i32>,
}

/// The launcher and the workers of a TrainingJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtReplicaSpecs {
    /// The launcher: one pod that runs `horovodrun` (or `deepspeed`) over the workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<ReplicaSpec>,
    /// The workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<EtReplicaSpec>,
}

/// The launcher's spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Always 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1))]
    pub replicas: Option<i32>,
    /// The launcher's pod template.
    #[serde(default)]
    #[schemars(schema_with = "crate::job::pod_template_schema")]
    pub template: PodTemplateSpec,
    /// What happens when the launcher's pod is gone: `Always` makes it again, otherwise the
    /// job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// The workers' spec.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtReplicaSpec {
    /// Workers at the start (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,
    /// Most workers a ScaleOut may reach (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_replicas: Option<i32>,
    /// Fewest workers a ScaleIn may leave (default: `replicas`); the PodGroup's `minMember`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_replicas: Option<i32>,
    /// The workers' pod template.
    #[serde(default)]
    #[schemars(schema_with = "crate::job::pod_template_schema")]
    pub template: PodTemplateSpec,
    /// What replaces a failed worker: `Never` (the default) drops it from the host list;
    /// `Always`, `OnFailure` and `ExitCode` make a new worker in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// A condition of a TrainingJob, ScaleOut or ScaleIn.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// One of [`condition`].
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in one CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// When its status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// The pods of one replica type by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Running.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub active: i32,
    /// Succeeded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub succeeded: i32,
    /// Failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// The status the three kinds share (et-operator's `JobStatus`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// The phase: one of [`condition`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The conditions, one per type.
    #[serde(default)]
    pub conditions: Vec<JobCondition>,
    /// `Launcher` and `Worker` → their pods by phase.
    #[serde(default)]
    pub replica_statuses: BTreeMap<String, ReplicaStatus>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// When the job was last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,
    /// The scale request being carried out, `ScaleOut:<namespace>/<name>` or
    /// `ScaleIn:<namespace>/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_scaler: Option<String>,
    /// Restarts of the job.
    #[serde(default)]
    pub restart_count: i32,
}

/// The status of a TrainingJob.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainingJobStatus {
    /// Phase, conditions, replica statuses, times.
    #[serde(flatten)]
    pub job: JobStatus,
    /// The workers the job should have (pod names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_workers: Vec<String>,
    /// The workers in the host list (pod names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub current_workers: Vec<String>,
}

/// An environment variable of a scale script.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EnvSpec {
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// Which TrainingJob a scale request is for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Selector {
    /// The TrainingJob's name, in the request's namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// The workers a ScaleOut adds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ToAddSpec {
    /// How many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}

/// The spec of a ScaleOut.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "ScaleOut",
    plural = "scaleouts",
    namespaced,
    status = "ScaleOutStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ScaleOutSpec {
    /// A script et-operator runs in the launcher with the new host list (volcano-rs does
    /// not run it: docs/et-operator.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// Seconds the new workers have to become ready (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i32>,
    /// The script's environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvSpec>,
    /// Retries of the script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// The workers to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_add: Option<ToAddSpec>,
    /// The TrainingJob.
    #[serde(default)]
    pub selector: Selector,
}

/// The status of a ScaleOut.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleOutStatus {
    /// Phase, conditions, times.
    #[serde(flatten)]
    pub job: JobStatus,
    /// The workers it adds (pod names), chosen when it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub add_pods: Vec<String>,
}

/// The workers a ScaleIn removes: a count (the highest indices) or pod names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToDeleteSpec {
    /// How many (the workers with the highest indices).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub count: i32,
    /// Which, by pod name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_names: Vec<String>,
}

/// The spec of a ScaleIn.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kai.alibabacloud.com",
    version = "v1alpha1",
    kind = "ScaleIn",
    plural = "scaleins",
    namespaced,
    status = "ScaleInStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ScaleInSpec {
    /// A script et-operator runs in the launcher with the new host list (volcano-rs does
    /// not run it: docs/et-operator.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    /// The script's timeout in seconds (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i32>,
    /// The script's environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvSpec>,
    /// Retries of the script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// The workers to remove.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_delete: Option<ToDeleteSpec>,
    /// The TrainingJob.
    #[serde(default)]
    pub selector: Selector,
}

/// The status of a ScaleIn.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleInStatus {
    /// Phase, conditions, times.
    #[serde(flatten)]
    pub job: JobStatus,
    /// The workers it removes (pod names), chosen when it starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to_delete_pods: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TrainingJob shaped as et-operator's example: a Horovod elastic launcher and GPU
    /// workers between 1 and 9.
    const TRAINING_JOB: &str = r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata: {name: hvd-elastic, namespace: default}
spec:
  cleanPodPolicy: Running
  etReplicaSpecs:
    launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: main
            image: horovod
            command: [sh, -c, "horovodrun -np 2 --min-np 1 --max-np 9 --host-discovery-script /etc/edl/discover_hosts.sh python train.py"]
    worker:
      replicas: 2
      minReplicas: 1
      maxReplicas: 9
      template:
        spec:
          containers:
          - name: main
            image: horovod
            resources: {limits: {nvidia.com/gpu: "1"}}
status:
  phase: Running
  conditions:
  - {type: Created, status: "True", reason: TrainingJobCreated, lastTransitionTime: "2026-01-01T00:00:00Z"}
  replicaStatuses: {Launcher: {active: 1}, Worker: {active: 2}}
  restartCount: 0
  currentScaler: ScaleOut:default/grow
  targetWorkers: [hvd-elastic-worker-0, hvd-elastic-worker-1]
  currentWorkers: [hvd-elastic-worker-0, hvd-elastic-worker-1]
"#;

    #[test]
    fn a_training_job_reads_and_writes_et_operators_fields() {
        let job: TrainingJob = serde_yaml_ng::from_str(TRAINING_JOB).unwrap();
        let w = job.spec.et_replica_specs.worker.as_ref().unwrap();
        assert_eq!((w.replicas, w.min_replicas, w.max_replicas), (Some(2), Some(1), Some(9)));
        let status = job.status.as_ref().unwrap();
        assert_eq!(status.job.phase.as_deref(), Some("Running"));
        assert_eq!(status.job.replica_statuses["Worker"].active, 2);
        assert_eq!(status.current_workers.len(), 2);
        let v = serde_json::to_value(&job).unwrap();
        assert_eq!(v["spec"]["etReplicaSpecs"]["worker"]["minReplicas"], 1);
        assert_eq!(v["status"]["currentScaler"], "ScaleOut:default/grow");
        assert_eq!(v["status"]["restartCount"], 0);
        assert_eq!(v["status"]["targetWorkers"][1], "hvd-elastic-worker-1");
        let back: TrainingJob = serde_json::from_value(v).unwrap();
        assert_eq!((back.spec, back.status), (job.spec, job.status));
    }

    #[test]
    fn scale_requests_read_et_operators_examples_shapes() {
        let out: ScaleOut = serde_yaml_ng::from_str(
            "apiVersion: kai.alibabacloud.com/v1alpha1\nkind: ScaleOut\nmetadata: {generateName: grow-}\n\
             spec: {selector: {name: hvd-elastic}, timeout: 300, toAdd: {count: 2}}",
        )
        .unwrap();
        assert_eq!(out.spec.to_add.unwrap().count, Some(2));
        assert_eq!(out.spec.timeout, Some(300));
        let by_name: ScaleIn = serde_yaml_ng::from_str(
            "apiVersion: kai.alibabacloud.com/v1alpha1\nkind: ScaleIn\nmetadata: {generateName: shrink-}\n\
             spec: {selector: {name: hvd-elastic}, toDelete: {podNames: [hvd-elastic-worker-1]}}",
        )
        .unwrap();
        assert_eq!(by_name.spec.to_delete.unwrap().pod_names, ["hvd-elastic-worker-1"]);
        let status: ScaleInStatus =
            serde_json::from_value(serde_json::json!({"phase": "ScaleSucceeded", "conditions": [], "replicaStatuses": {}, "restartCount": 0, "toDeletePods": ["a"]}))
                .unwrap();
        assert_eq!(status.to_delete_pods, ["a"]);
        assert_eq!(status.job.phase.as_deref(), Some("ScaleSucceeded"));
    }
}
