//! `batch.volcano.sh/v1alpha1` Job (`vcjob`): a set of tasks, each a pod template with
//! replicas, run as one gang with lifecycle policies and job plugins.
//!
//! Field names and JSON spellings follow Volcano's
//! `staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go`. Go's `omitempty`
//! integers are `i32` fields that are not written when zero; Go's optional pointers and
//! strings are `Option`s. Durations (`runningEstimate`, `timeout`, `runningDuration`) are
//! kept as Go duration strings (`90s`, `1h30m`). Admission (defaults and checks) is
//! [`crate::admission`]; the CRD is [`crate::crds::job`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::bus::{Action, Event};
use crate::crd::NetworkTopologySpec;
use crate::open_enum::open_enum;

/// The prefix of the names the mutating webhook gives unnamed tasks (`default0`, ...).
pub const DEFAULT_TASK_NAME_PREFIX: &str = "default";

/// The `maxRetry` of jobs and tasks that set none (or 0).
pub const DEFAULT_MAX_RETRY: i32 = 3;

/// The job plugins volcano-rs knows (`spec.plugins` keys): Volcano's (`env`, `svc`, `ssh`,
/// `tensorflow`, `pytorch`, `mpi`, `ray`, `hcclrank`) and `mxnet`, which volcano-rs adds.
pub const JOB_PLUGINS: [&str; 9] = ["env", "svc", "ssh", "tensorflow", "pytorch", "mpi", "mxnet", "ray", "hcclrank"];

/// The job plugins that need the `svc` plugin (the webhook adds it when missing).
pub const PLUGINS_NEEDING_SVC: [&str; 5] = ["tensorflow", "mpi", "pytorch", "mxnet", "ray"];

/// Job annotation (volcano-rs): seconds between removing a resized job's hosts from its
/// host lists and deleting their pods (an integer ≥ 0; default
/// [`DEFAULT_SCALE_IN_GRACE_SECONDS`]).
pub const SCALE_IN_GRACE_ANNOTATION: &str = "volcano.sh/scale-in-grace-seconds";
/// Job annotation (volcano-rs): seconds the pods a scale-out adds have to become Ready before
/// the scale-out is rolled back (an integer ≥ 1; default
/// [`DEFAULT_SCALE_OUT_TIMEOUT_SECONDS`]).
pub const SCALE_OUT_TIMEOUT_ANNOTATION: &str = "volcano.sh/scale-out-timeout-seconds";
/// The grace period of a scale-in when the job does not set one.
pub const DEFAULT_SCALE_IN_GRACE_SECONDS: i64 = 30;
/// The ready timeout of a scale-out when the job does not set one.
pub const DEFAULT_SCALE_OUT_TIMEOUT_SECONDS: i64 = 600;

/// A job's resize waits, in seconds: (scale-in grace period, scale-out ready timeout), from
/// its annotations or the defaults; a malformed value is `Err((field, message))`.
pub fn scale_seconds(job: &Job) -> Result<(i64, i64), (String, String)> {
    let annotations = job.metadata.annotations.as_ref();
    let read = |key: &str, default: i64, least: i64| -> Result<i64, (String, String)> {
        let Some(v) = annotations.and_then(|a| a.get(key)) else { return Ok(default) };
        match v.trim().parse::<i64>() {
            Ok(n) if (least..=7 * 24 * 3600).contains(&n) => Ok(n),
            _ => Err((
                format!("metadata.annotations[{key}]"),
                format!("{v:?} is not a whole number of seconds from {least} to 604800"),
            )),
        }
    };
    Ok((
        read(SCALE_IN_GRACE_ANNOTATION, DEFAULT_SCALE_IN_GRACE_SECONDS, 0)?,
        read(SCALE_OUT_TIMEOUT_ANNOTATION, DEFAULT_SCALE_OUT_TIMEOUT_SECONDS, 1)?,
    ))
}

/// Job annotation (volcano-rs): the tasks the elastic autoscaler may resize and their bounds,
/// `TASK=MIN..MAX` separated by commas (`worker=2..8`); `TASK=..MAX` takes the task's
/// `minAvailable` as the minimum. Without it the autoscaler leaves the job alone
/// (docs/jobs.md, "The elastic autoscaler").
pub const AUTOSCALE_ANNOTATION: &str = "volcano.sh/autoscale";
/// Job annotation written by the autoscaler: what it remembers of the job between its
/// passes (JSON), so that a restarted controller keeps the job's hysteresis.
pub const AUTOSCALE_STATE_ANNOTATION: &str = "volcano.sh/autoscale-state";
/// The most replicas the autoscaler gives one task.
pub const AUTOSCALE_MAX_REPLICAS: i32 = 100_000;

/// One task's bounds under the autoscaler ([`AUTOSCALE_ANNOTATION`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoscaleBounds {
    /// The task's name.
    pub task: String,
    /// The index of the task in `spec.tasks`.
    pub task_index: usize,
    /// The fewest replicas the autoscaler leaves the task.
    pub min: i32,
    /// The most replicas the autoscaler gives the task.
    pub max: i32,
}

/// The tasks the autoscaler may resize, from [`AUTOSCALE_ANNOTATION`] (empty without it); a
/// malformed value is `Err((field, message))`. The bounds keep the admission's resize rules:
/// a minimum is not below the task's `minAvailable`, and the minimums (with the other tasks'
/// replicas) are not below the job's `minAvailable`.
pub fn autoscale_bounds(job: &Job) -> Result<Vec<AutoscaleBounds>, (String, String)> {
    let Some(v) = job.metadata.annotations.as_ref().and_then(|a| a.get(AUTOSCALE_ANNOTATION)) else {
        return Ok(Vec::new());
    };
    let field = format!("metadata.annotations[{AUTOSCALE_ANNOTATION}]");
    let bad = |message: String| Err((field.clone(), message));
    let mut out: Vec<AutoscaleBounds> = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((task, range)) = part.split_once('=') else {
            return bad(format!("{part:?} is not TASK=MIN..MAX (for example worker=2..8)"));
        };
        let task = task.trim();
        let Some((task_index, spec)) = job.spec.tasks.iter().enumerate().find(|(_, t)| t.name() == task) else {
            return bad(format!("the job has no task {task:?}"));
        };
        if out.iter().any(|b| b.task == task) {
            return bad(format!("task {task:?} is named twice"));
        }
        let Some((lo, hi)) = range.split_once("..") else {
            return bad(format!("{range:?} (task {task}) is not MIN..MAX (for example 2..8)"));
        };
        let task_min = spec.min_available.unwrap_or(spec.replicas).max(0);
        let num = |s: &str, what: &str| -> Result<i32, (String, String)> {
            s.trim().parse::<i32>().ok().filter(|n| (0..=AUTOSCALE_MAX_REPLICAS).contains(n)).ok_or_else(|| {
                (
                    field.clone(),
                    format!(
                        "the {what} of task {task}, {s:?}, is not a whole number from 0 to {AUTOSCALE_MAX_REPLICAS}"
                    ),
                )
            })
        };
        let min = if lo.trim().is_empty() { task_min } else { num(lo, "minimum")? };
        let max = num(hi, "maximum")?;
        if min > max {
            return bad(format!("task {task}: the minimum {min} is above the maximum {max}"));
        }
        if max == 0 {
            return bad(format!("task {task}: the maximum is 0"));
        }
        if min < task_min {
            return bad(format!(
                "task {task}: the minimum {min} is below the task's minAvailable ({task_min}); a job is not scaled in below it"
            ));
        }
        out.push(AutoscaleBounds { task: task.to_string(), task_index, min, max });
    }
    if out.is_empty() {
        return bad(format!("{v:?} names no task (TASK=MIN..MAX, for example worker=2..8)"));
    }
    let floor: i64 = job
        .spec
        .tasks
        .iter()
        .map(|t| out.iter().find(|b| b.task == t.name()).map_or(t.replicas, |b| b.min) as i64)
        .sum();
    if floor < job.spec.min_available as i64 {
        return bad(format!(
            "the tasks' replicas at the autoscaler's minimums ({floor} in total) are below the job's minAvailable ({})",
            job.spec.min_available
        ));
    }
    Ok(out)
}

/// The pattern of a DNS-1123 subdomain, as Volcano's schema checks `queue` and
/// `priorityClassName`.
const DNS1123_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// The pattern of a DNS-1123 label, as Volcano's schema checks task names.
const DNS1123_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Spec of a Job.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "batch.volcano.sh",
    version = "v1alpha1",
    kind = "Job",
    plural = "jobs",
    shortname = "vcjob",
    shortname = "vj",
    namespaced,
    status = "JobStatus",
    annotation("helm.sh/resource-policy", "keep")
)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// Scheduler of the job's pods (the default of `tasks[].template.spec.schedulerName`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63))]
    pub scheduler_name: Option<String>,
    /// Pods that must run together (gang size); defaulted to the sum of the tasks'
    /// `minAvailable`.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub min_available: i32,
    /// Volumes (PVCs) mounted into every container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<VolumeSpec>,
    /// The tasks (at least one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub tasks: Vec<TaskSpec>,
    /// Job-level lifecycle policies (after the task-level ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,
    /// Job plugins by name (`svc`, `ssh`, `env`, `tensorflow`, ...), with their arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plugins: BTreeMap<String, Vec<String>>,
    /// The user's estimate of the running time (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_estimate: Option<String>,
    /// Queue of the job (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), pattern(DNS1123_SUBDOMAIN), extend("default" = "default"))]
    pub queue: Option<String>,
    /// Restarts before the job fails (0 means the default, 3).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = 3))]
    pub max_retry: i32,
    /// Seconds after the job finishes before it is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
    /// PriorityClass of the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), pattern(DNS1123_SUBDOMAIN))]
    pub priority_class_name: Option<String>,
    /// Succeeded pods that complete the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_success: Option<i32>,
    /// Network topology constraint of the job's PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
}

/// Parses a Go duration (`metav1.Duration`: `90s`, `1h30m`, `1.5h`, `-2m`, `0`) into
/// seconds, as Go's `time.ParseDuration` reads it: an optional sign, then one or more
/// numbers each with a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`).
pub fn parse_go_duration(s: &str) -> Result<f64, String> {
    let bad = || format!("{s:?} is not a duration: numbers with units such as 90s, 1h30m, 500ms");
    let (sign, mut rest) = match s.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let n = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(n);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(bad());
        }
        let value: f64 = num.parse().or_else(|_| format!("0{num}").parse()).map_err(|_| bad())?;
        let u = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = tail;
    }
    Ok(sign * total)
}

pub(crate) fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A PVC mounted into every container of the job.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    /// Where the volume is mounted; must not contain `:`.
    #[schemars(length(min = 1), pattern(r"^[^:]+$"))]
    pub mount_path: String,
    /// An existing PVC (or the name of the one to create from `volumeClaim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub volume_claim_name: Option<String>,
    /// The spec of a PVC the controller creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim: Option<PersistentVolumeClaimSpec>,
}

/// A task: `replicas` pods from one template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskSpec {
    /// Task name (a DNS-1123 label; defaulted to `default<index>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), pattern(DNS1123_LABEL))]
    pub name: Option<String>,
    /// Number of pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub replicas: i32,
    /// Pods of the task that must run together (defaulted to `replicas`, or
    /// `minPartitions × partitionSize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_available: Option<i32>,
    /// The pod template. See [`crate::crds::job`] for how the CRD schema types it.
    #[serde(default)]
    #[schemars(schema_with = "pod_template_schema", extend("default" = null))]
    pub template: PodTemplateSpec,
    /// Task-level lifecycle policies (checked before the job's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<LifecyclePolicy>,
    /// NUMA topology policy: one of [`numa_policy`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_policy: Option<String>,
    /// Restarts of the task's pods before the task fails (0 means the default, 3).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub max_retry: i32,
    /// Tasks whose pods must be ready before this task's pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<DependsOn>,
    /// Splits the task's pods into partitions (sub-gangs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_policy: Option<PartitionPolicySpec>,
}

impl TaskSpec {
    /// The task's name, empty when unset.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

/// The NUMA topology policies of a task (`topologyPolicy`).
pub mod numa_policy {
    /// No NUMA alignment.
    pub const NONE: &str = "none";
    /// Prefer aligned resources.
    pub const BEST_EFFORT: &str = "best-effort";
    /// Require aligned resources.
    pub const RESTRICTED: &str = "restricted";
    /// Require a single NUMA node.
    pub const SINGLE_NUMA_NODE: &str = "single-numa-node";
    /// All of them, in Volcano's order.
    pub const ALL: [&str; 4] = [NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE];
}

/// The values of `dependsOn.iteration`.
pub mod iteration {
    /// One depended-on task ready is enough.
    pub const ANY: &str = "any";
    /// Every depended-on task must be ready (the default).
    pub const ALL: &str = "all";
}

/// The tasks a task waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DependsOn {
    /// Names of the depended-on tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub name: Vec<String>,
    /// `any` or `all` (see [`iteration`]); Volcano's schema accepts any string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration: Option<String>,
}

/// How a task's pods split into partitions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartitionPolicySpec {
    /// Number of partitions; `totalPartitions × partitionSize` = replicas.
    #[schemars(range(min = 1))]
    pub total_partitions: i32,
    /// Pods per partition.
    #[schemars(range(min = 1))]
    pub partition_size: i32,
    /// Network topology constraint of each partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Partitions that must run together (0: the task's `minAvailable` decides).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = 0))]
    pub min_partitions: i32,
}

/// What to do on an event or exit code.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecyclePolicy {
    /// The action to take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// The event that triggers the action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<Event>,
    /// Events that trigger the action.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// The exit code that triggers the action (not with `event`/`events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Delay before the action (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

impl LifecyclePolicy {
    /// The policy's events, `events` then `event`, without repeats (Volcano's
    /// `getEventList`).
    pub fn event_list(&self) -> Vec<&Event> {
        let mut out: Vec<&Event> = Vec::new();
        for e in self.events.iter().chain(self.event.as_ref()) {
            if !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }
}

open_enum! {
    /// Phase of a Job (`status.state.phase`).
    pub enum JobPhase {
        /// Waiting in the queue for the scheduler.
        Pending = "Pending",
        /// Aborted, waiting for its pods to go.
        Aborting = "Aborting",
        /// Aborted by a user or a policy.
        Aborted = "Aborted",
        /// At least `minAvailable` pods run.
        Running = "Running",
        /// Restarted, waiting for its pods to be released and recreated.
        Restarting = "Restarting",
        /// Completed, cleaning up.
        Completing = "Completing",
        /// Every task completed.
        Completed = "Completed",
        /// Terminated, waiting for its pods to go.
        Terminating = "Terminating",
        /// Finished unexpectedly.
        Terminated = "Terminated",
        /// Failed after `maxRetry` restarts.
        Failed = "Failed",
    }
}

/// The job's current phase and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobState {
    /// The phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<JobPhase>,
    /// One-word CamelCase reason of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Time of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Pods of a task by phase.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TaskState {
    /// Pod phase (`Pending`, `Running`, ...) → number of pods.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub phase: BTreeMap<String, i32>,
}

/// A phase the job went through.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// The phase the job entered.
    pub status: JobPhase,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Status of a Job, written by the job controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Current state.
    #[serde(default, skip_serializing_if = "is_default")]
    pub state: JobState,
    /// The job's `minAvailable` when last synced.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub min_available: i32,
    /// Pods by task and phase.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub task_status_count: BTreeMap<String, TaskState>,
    /// Pending pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub pending: i32,
    /// Running pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub running: i32,
    /// Succeeded pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub succeeded: i32,
    /// Failed pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub failed: i32,
    /// Terminating pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub terminating: i32,
    /// Pods in phase Unknown.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub unknown: i32,
    /// Version of the job's pods, bumped on every restart.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub version: i32,
    /// Restarts so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schemars(range(min = 0), extend("default" = null))]
    pub retry_count: i32,
    /// Time from running to completion (a Go duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_duration: Option<String>,
    /// Objects the job's plugins created (`plugin-svc` → `svc`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub controlled_resources: BTreeMap<String, String>,
    /// The phases the job went through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// The schema of a task's pod template in the Job CRD.
///
/// `metadata` is typed as Volcano's CRD types it (controller-gen's embedded ObjectMeta:
/// `annotations`, `finalizers`, `labels`, `name`, `namespace`); `spec` is an object
/// with `x-kubernetes-preserve-unknown-fields`. Volcano's CRD spells the whole PodSpec
/// out (about 200 KB with its descriptions stripped). We do not, because:
/// - size: the full PodSpec schema, once per task template, brings the CRD close to the
///   256 KiB `kubectl apply` (client-side) annotation limit that made Volcano strip its
///   descriptions, and grows with every Kubernetes release; ours is a few KB;
/// - pruning: a typed schema silently drops the fields it does not know. Ours would be
///   k8s-openapi's (Kubernetes 1.33), so a PodSpec field newer than that, which a newer
///   Volcano CRD keeps, would vanish from stored jobs; preserving keeps every field;
/// - acceptance: every template Volcano's schema accepts, ours accepts. What the schema
///   no longer rejects (a wrongly typed PodSpec field, a template without containers) is
///   rejected by the job webhook: decoding into [`k8s_openapi`]'s PodSpec fails, and
///   [`crate::admission::validate_job_create`] checks the template as Volcano's
///   `ValidatePodTemplate` does.
///
/// The cost: `kubectl explain vcjob.spec.tasks.template.spec` describes nothing,
/// server-side apply treats the PodSpec as one atomic value, and the defaults Volcano's
/// schema carries inside the PodSpec (a container port's `protocol: TCP`, a probe's
/// `grpc.service: ""`, ...) are not written into the stored Job; the API server still
/// applies them to the pods made from the template, so the pods are the same.
///
/// Checked by hand against a real API server (Kubernetes 1.36): a TF ps/worker job created under
/// Volcano's CRD reads back unchanged after this CRD replaces Volcano's; created under
/// this CRD it is stored as under Volcano's but for the port's `protocol: TCP`.
pub fn pod_template_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "The pod template of the task's pods (its spec is validated by the job webhook).",
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {
                    "annotations": { "type": "object", "additionalProperties": { "type": "string" } },
                    "finalizers": { "type": "array", "items": { "type": "string" } },
                    "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                    "name": { "type": "string" },
                    "namespace": { "type": "string" }
                }
            },
            "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
        }
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A TensorFlow ps/worker job as Volcano's examples write it, with plugins, job- and
    /// task-level policies, volumes, a partition policy, and a status.
    pub(crate) const TF_JOB: &str = r#"
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: tensorflow-dist-mnist
  namespace: ml
spec:
  minAvailable: 3
  schedulerName: volcano
  queue: default
  maxRetry: 5
  ttlSecondsAfterFinished: 600
  priorityClassName: high
  minSuccess: 2
  runningEstimate: 2h
  networkTopology:
    mode: hard
    highestTierAllowed: 2
  plugins:
    env: []
    svc: ["--publish-not-ready-addresses=true"]
    tensorflow: ["--ps=ps", "--worker=worker", "--port=2222"]
  policies:
    - event: PodEvicted
      action: RestartJob
    - events: [PodFailed, Unknown]
      action: AbortJob
      timeout: 5m
    - exitCode: 137
      action: RestartPod
  volumes:
    - mountPath: /data
      volumeClaimName: mnist-data
    - mountPath: /ckpt
      volumeClaim:
        accessModes: [ReadWriteOnce]
        storageClassName: fast
        resources:
          requests:
            storage: 10Gi
  tasks:
    - replicas: 1
      name: ps
      maxRetry: 3
      template:
        metadata:
          labels:
            role: ps
        spec:
          restartPolicy: Never
          containers:
            - name: tensorflow
              image: volcanosh/dist-mnist-tf-example:0.0.1
              command: ["sh", "-c", "python /var/tf_dist_mnist/dist_mnist.py"]
              ports:
                - containerPort: 2222
                  name: tfjob-port
              resources:
                requests:
                  cpu: "1"
                  memory: 2Gi
    - replicas: 4
      name: worker
      minAvailable: 2
      topologyPolicy: best-effort
      dependsOn:
        name: [ps]
        iteration: any
      partitionPolicy:
        totalPartitions: 2
        partitionSize: 2
        minPartitions: 1
        networkTopology:
          mode: soft
          highestTierName: spine
      policies:
        - event: TaskCompleted
          action: CompleteJob
      template:
        spec:
          restartPolicy: OnFailure
          hostNetwork: true
          dnsPolicy: ClusterFirstWithHostNet
          containers:
            - name: tensorflow
              image: volcanosh/dist-mnist-tf-example:0.0.1
              resources:
                limits:
                  cpu: "2"
                  nvidia.com/gpu: "1"
status:
  state:
    phase: Running
    reason: PodsRunning
    lastTransitionTime: "2026-03-01T10:00:00Z"
  minAvailable: 3
  running: 3
  pending: 2
  version: 1
  retryCount: 1
  runningDuration: 1m30s
  taskStatusCount:
    ps:
      phase:
        Running: 1
    worker:
      phase:
        Running: 2
        Pending: 2
  controlledResources:
    plugin-svc: svc
    plugin-env: env
  conditions:
    - status: Pending
      lastTransitionTime: "2026-03-01T09:59:00Z"
    - status: Running
      lastTransitionTime: "2026-03-01T10:00:00Z"
"#;

    #[test]
    fn a_volcano_tf_job_round_trips_without_losing_fields() {
        let orig: serde_json::Value = serde_yaml_ng::from_str(TF_JOB).unwrap();
        let job: Job = serde_yaml_ng::from_str(TF_JOB).unwrap();
        assert_eq!(job.spec.tasks.len(), 2);
        assert_eq!(job.spec.tasks[1].min_available, Some(2));
        assert_eq!(job.spec.policies[1].events, vec![Event::PodFailed, Event::Unknown]);
        assert_eq!(job.spec.policies[2].exit_code, Some(137));
        assert_eq!(job.status.as_ref().unwrap().state.phase, Some(JobPhase::Running));
        let back = serde_json::to_value(&job).unwrap();
        assert_eq!(back, orig, "the job lost or changed fields on the way through the types");
    }

    #[test]
    fn go_durations() {
        for (s, secs) in
            [("90s", 90.0), ("1h30m", 5400.0), ("1.5h", 5400.0), ("-2m", -120.0), ("0", 0.0), ("500ms", 0.5)]
        {
            assert_eq!(parse_go_duration(s), Ok(secs), "{s}");
        }
        assert_eq!(parse_go_duration("2\u{b5}s"), Ok(2e-6));
        for bad in ["", "5", "1d", "h", "1..5s", "-", "5 m", "1h30"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn phases_keep_volcano_spellings() {
        assert_eq!(JobPhase::KNOWN.len(), 10);
        assert_eq!(serde_json::to_string(&JobPhase::Completing).unwrap(), "\"Completing\"");
        assert_eq!(JobPhase::parse("Suspended"), JobPhase::Other("Suspended".into()));
    }
}
