//! Volcano's job admission webhooks (`pkg/webhooks/admission/jobs`) as pure functions: the
//! webhook shell decodes the AdmissionReview, calls these, and diffs or reports the result.
//!
//! - [`mutate_job`]: the defaults of Volcano's mutating webhook on CREATE;
//! - [`validate_job_create`]: the checks of Volcano's validating webhook on CREATE, plus the
//!   checks of Volcano's CRD schema (so that the simulator, which has no API server, rejects
//!   what a cluster would);
//! - [`validate_job_update`]: the checks on UPDATE.
//!
//! Every problem is a [`JobError`]: the [`JobRule`] broken, the field path as `kubectl`
//! prints it (`spec.tasks[1].policies[0].exitCode`) and a message saying what was expected.
//! The checks collect every problem, as Volcano's webhook does, into [`JobErrors`], which
//! names the job.
//!
//! Where volcano-rs differs from Volcano it says so on the rule ([`JobRule`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;

use crate::bus::{Action, Event};
use crate::crd::{NetworkTopologySpec, Queue, QueueState};
use crate::job::{
    numa_policy, Job, LifecyclePolicy, TaskSpec, DEFAULT_MAX_RETRY, DEFAULT_TASK_NAME_PREFIX, JOB_PLUGINS,
    PLUGINS_NEEDING_SVC,
};
use crate::names::ROOT_QUEUE;
use crate::{job_plugins, quantity, validation};

/// The rules of job admission, one per check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobRule {
    /// A value outside what Volcano's CRD schema admits (a negative count, `minSuccess` < 1,
    /// an unknown `topologyPolicy`, a task name that is not a DNS-1123 label, ...).
    Schema,
    /// `runningEstimate` and policy `timeout`s are Go durations (Volcano's webhook fails to
    /// decode the job otherwise).
    Duration,
    /// A job has at least one task.
    NoTask,
    /// With the `mpi` plugin, its master task (`--master`, default `master`) exists.
    MpiMasterMissing,
    /// A task's `minAvailable` is at most its `replicas`.
    TaskMinAvailable,
    /// Task names are unique.
    DuplicateTaskName,
    /// A policy has `event`/`events` or `exitCode`, not both.
    PolicyEventAndExitCode,
    /// A policy has `event`/`events` or `exitCode`.
    PolicyTrigger,
    /// A policy's events are ones a user may set (no internal event).
    PolicyEvent,
    /// An event policy's action is one a user may set (no internal action). Like Volcano,
    /// the action of an `exitCode` policy is not checked.
    PolicyAction,
    /// An event appears once in a policy list (job-level, or one task's).
    PolicyDuplicateEvent,
    /// `exitCode` is not 0.
    PolicyZeroExitCode,
    /// An exit code appears once in a policy list.
    PolicyDuplicateExitCode,
    /// `*` is the only event of its policy list.
    PolicyAnyNotAlone,
    /// Pod names `<job>-<task>-<index>` are qualified names (at most 63 characters).
    /// volcano-rs checks the largest index a task's pods get (`replicas - 1`); Volcano
    /// checks the task's index among the tasks, which lets through pods whose names are
    /// too long when a task has more replicas than the job has tasks.
    PodName,
    /// The job's name is a qualified name (at most 63 characters).
    JobName,
    /// A task's pod template is a valid pod (as [`validation::pod`] checks pods).
    PodTemplate,
    /// With a NUMA `topologyPolicy` other than `none`, every container asks for whole CPUs.
    NumaCpu,
    /// A partition policy has `totalPartitions × partitionSize = replicas` and, when
    /// `minPartitions` is set, `minPartitions × partitionSize = minAvailable`.
    PartitionPolicy,
    /// The job's `minAvailable` is at most the sum of the tasks' replicas (and ≥ 0).
    JobMinAvailable,
    /// Job plugins are known ([`JOB_PLUGINS`]).
    UnknownPlugin,
    /// The job plugins' arguments and role tasks are what the job controller accepts
    /// ([`job_plugins::check`]: known flags, values of their type, role tasks that exist,
    /// flags that go together; `ray` and `hcclrank` are not implemented). Volcano logs a bad
    /// argument and goes on with the default; volcano-rs refuses the job at admission, as
    /// its controller would refuse to plan it.
    PluginArguments,
    /// The resize annotations (`volcano.sh/scale-in-grace-seconds`,
    /// `volcano.sh/scale-out-timeout-seconds`) are whole seconds in range
    /// ([`crate::job::scale_seconds`]; volcano-rs's own), and the autoscaler's bounds
    /// (`volcano.sh/autoscale`, [`crate::job::autoscale_bounds`]) name tasks of the job
    /// and keep its `minAvailable`s.
    ScaleAnnotation,
    /// An update does not lower a task's `replicas` below its `minAvailable`, nor the tasks'
    /// replicas in total below the job's `minAvailable` (a resize never goes below them).
    ScaleBelowMinAvailable,
    /// Volumes: a mount path, unique; a claim name or a claim spec, not both; a valid claim
    /// name.
    Volume,
    /// The job's queue exists.
    QueueNotFound,
    /// The job's queue is Open. A queue without a state counts as Open (the queue
    /// controller has not written its status yet); Volcano rejects it.
    QueueNotOpen,
    /// The job's queue is not `root`.
    RootQueue,
    /// The job's queue is a leaf (no queue names it as parent).
    QueueNotLeaf,
    /// `dependsOn` names existing tasks and forms no cycle.
    DependsOn,
    /// A network topology sets `highestTierAllowed` or `highestTierName`, not both.
    NetworkTopology,
    /// An update keeps the number of tasks.
    UpdateTaskCount,
    /// An update changes only `minAvailable`, `priorityClassName`, and the tasks'
    /// `replicas` and `minAvailable` (Volcano also lets the tasks' `minAvailable` change).
    UpdateImmutable,
}

/// One problem with a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    /// The rule broken.
    pub rule: JobRule,
    /// The field path (`spec.tasks[0].replicas`).
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} ({:?})", self.field, self.message, self.rule)
    }
}

/// Every problem found with a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobErrors {
    /// The job, `namespace/name`.
    pub object: String,
    /// The problems, in the order the checks ran.
    pub errors: Vec<JobError>,
}

impl JobErrors {
    /// Whether some problem broke `rule`.
    pub fn broke(&self, rule: JobRule) -> bool {
        self.errors.iter().any(|e| e.rule == rule)
    }
}

impl fmt::Display for JobErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}: ", self.object)?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for JobErrors {}

/// What the job webhook needs to know of a queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFacts {
    /// `status.state` (none: not written yet).
    pub state: Option<QueueState>,
    /// Number of queues whose `spec.parent` is this queue.
    pub children: usize,
}

/// Looks queues up by name for [`validate_job_create`]: a closure, or a slice of queues.
pub trait QueueLookup {
    /// The queue named `name`, if it exists.
    fn lookup(&self, name: &str) -> Option<QueueFacts>;
}

impl<F: Fn(&str) -> Option<QueueFacts>> QueueLookup for F {
    fn lookup(&self, name: &str) -> Option<QueueFacts> {
        self(name)
    }
}

impl QueueLookup for [Queue] {
    fn lookup(&self, name: &str) -> Option<QueueFacts> {
        let q = self.iter().find(|q| q.metadata.name.as_deref() == Some(name))?;
        Some(QueueFacts {
            state: q.status.as_ref().and_then(|s| s.state),
            children: self.iter().filter(|c| c.spec.parent.as_deref() == Some(name)).count(),
        })
    }
}

fn unset(s: &Option<String>) -> bool {
    s.as_deref().unwrap_or_default().is_empty()
}

/// The job with the defaults of Volcano's mutating webhook (CREATE):
/// - `queue` ← `default_queue`, `schedulerName` ← `default_scheduler_name` when empty;
/// - `maxRetry` ← 3 when 0;
/// - per task: name ← `default<index>` when empty; `dnsPolicy` ← `ClusterFirstWithHostNet`
///   for a `hostNetwork` template without one; `minAvailable` ← `minPartitions ×
///   partitionSize` when `minPartitions` > 0, else `replicas`, when unset; `maxRetry` ← 3
///   when 0;
/// - `minAvailable` ← the sum of the tasks' `minAvailable` when 0;
/// - plugins: `tensorflow`, `mpi`, `pytorch`, `mxnet` or `ray` add `svc`; `mpi` adds `ssh`
///   (with no arguments, when missing).
pub fn mutate_job(job: &Job, default_queue: &str, default_scheduler_name: &str) -> Job {
    let mut job = job.clone();
    let spec = &mut job.spec;
    if unset(&spec.queue) {
        spec.queue = Some(default_queue.to_string());
    }
    if unset(&spec.scheduler_name) {
        spec.scheduler_name = Some(default_scheduler_name.to_string());
    }
    if spec.max_retry == 0 {
        spec.max_retry = DEFAULT_MAX_RETRY;
    }
    for (i, task) in spec.tasks.iter_mut().enumerate() {
        if unset(&task.name) {
            task.name = Some(format!("{DEFAULT_TASK_NAME_PREFIX}{i}"));
        }
        if let Some(pod) = task.template.spec.as_mut() {
            if pod.host_network == Some(true) && unset(&pod.dns_policy) {
                pod.dns_policy = Some("ClusterFirstWithHostNet".to_string());
            }
        }
        if task.min_available.is_none() {
            task.min_available = Some(match &task.partition_policy {
                Some(p) if p.min_partitions > 0 => p.min_partitions * p.partition_size,
                _ => task.replicas,
            });
        }
        if task.max_retry == 0 {
            task.max_retry = DEFAULT_MAX_RETRY;
        }
    }
    if spec.min_available == 0 {
        spec.min_available = spec.tasks.iter().map(|t| t.min_available.unwrap_or(t.replicas)).sum();
    }
    if PLUGINS_NEEDING_SVC.iter().any(|p| spec.plugins.contains_key(*p)) {
        spec.plugins.entry("svc".to_string()).or_default();
    }
    if spec.plugins.contains_key("mpi") {
        spec.plugins.entry("ssh".to_string()).or_default();
    }
    job
}

/// Collects errors.
struct Errors(Vec<JobError>);

impl Errors {
    fn add(&mut self, rule: JobRule, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(JobError { rule, field: field.into(), message: message.into() });
    }

    fn finish(self, job: &Job) -> Result<(), JobErrors> {
        if self.0.is_empty() {
            return Ok(());
        }
        let m = &job.metadata;
        let object =
            format!("{}/{}", m.namespace.as_deref().unwrap_or_default(), m.name.as_deref().unwrap_or_default());
        Err(JobErrors { object, errors: self.0 })
    }
}

/// The value of a `--name=value` / `--name value` flag among a job plugin's arguments (Go
/// `flag` syntax, one or two dashes); the last one wins.
fn plugin_flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let mut found = None;
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        let Some(flag) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else { continue };
        match flag.split_once('=') {
            Some((n, v)) if n == name => found = Some(v),
            None if flag == name => found = it.next().map(String::as_str),
            _ => {}
        }
    }
    found
}

/// A job on CREATE, as Volcano's validating webhook and CRD schema check it. `queues`
/// tells whether the job's queue exists, is Open, and is a leaf.
pub fn validate_job_create(job: &Job, queues: &(impl QueueLookup + ?Sized)) -> Result<(), JobErrors> {
    let mut errs = Errors(Vec::new());
    let spec = &job.spec;
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    if spec.tasks.is_empty() {
        errs.add(JobRule::NoTask, "spec.tasks", "required: a job has at least one task");
        return errs.finish(job);
    }
    schema(job, &mut errs);
    if let Some(args) = spec.plugins.get("mpi") {
        let master = plugin_flag(args, "master").unwrap_or("master");
        if !spec.tasks.iter().any(|t| t.name() == master) {
            errs.add(
                JobRule::MpiMasterMissing,
                "spec.plugins[mpi]",
                format!("the mpi plugin's master task {master:?} is not a task of the job"),
            );
        }
    }
    network_topology("spec.networkTopology", spec.network_topology.as_ref(), &mut errs);
    let mut names = BTreeSet::new();
    let mut total_replicas = 0;
    for (i, task) in spec.tasks.iter().enumerate() {
        let path = format!("spec.tasks[{i}]");
        if let Some(min) = task.min_available.filter(|m| *m > task.replicas) {
            errs.add(
                JobRule::TaskMinAvailable,
                format!("{path}.minAvailable"),
                format!("{min} is greater than the task's replicas ({})", task.replicas),
            );
        }
        total_replicas += task.replicas;
        if !names.insert(task.name()) {
            errs.add(
                JobRule::DuplicateTaskName,
                format!("{path}.name"),
                format!("duplicate task name {:?}: task names are unique", task.name()),
            );
        }
        policies(&format!("{path}.policies"), &task.policies, &mut errs);
        let pod_name = format!("{job_name}-{}-{}", task.name(), (task.replicas - 1).max(0));
        if let Err(e) = validation::qualified_name(&pod_name) {
            errs.add(JobRule::PodName, format!("{path}.name"), format!("the task's pod name {e}"));
        }
        pod_template(&path, job, task, &pod_name, &mut errs);
        numa(&path, task, &mut errs);
        partition_policy(&path, task, &mut errs);
    }
    if let Err(e) = validation::qualified_name(job_name) {
        errs.add(JobRule::JobName, "metadata.name", e);
    }
    if spec.min_available > total_replicas {
        errs.add(
            JobRule::JobMinAvailable,
            "spec.minAvailable",
            format!("{} is greater than the tasks' replicas in total ({total_replicas})", spec.min_available),
        );
    }
    policies("spec.policies", &spec.policies, &mut errs);
    for name in spec.plugins.keys() {
        if !JOB_PLUGINS.contains(&name.as_str()) {
            errs.add(
                JobRule::UnknownPlugin,
                format!("spec.plugins[{name}]"),
                format!("unknown job plugin {name:?}; expected one of {}", JOB_PLUGINS.join(", ")),
            );
        }
    }
    if spec.plugins.keys().all(|n| JOB_PLUGINS.contains(&n.as_str())) {
        if let Err(e) = job_plugins::check(job) {
            // A missing mpi master is Volcano's own rule, reported above.
            let reported = e.plugin() == "mpi"
                && e.detail().starts_with("no master task")
                && errs.0.iter().any(|x| x.rule == JobRule::MpiMasterMissing);
            if !reported {
                errs.add(JobRule::PluginArguments, format!("spec.plugins[{}]", e.plugin()), e.detail());
            }
        }
    }
    scale_annotations(job, &mut errs);
    volumes(job, &mut errs);
    queue(job, queues, &mut errs);
    depends_on(job, &mut errs);
    errs.finish(job)
}

/// The resize annotations ([`crate::job::scale_seconds`]).
fn scale_annotations(job: &Job, errs: &mut Errors) {
    if let Err((field, message)) = crate::job::scale_seconds(job) {
        errs.add(JobRule::ScaleAnnotation, field, message);
    }
    if let Err((field, message)) = crate::job::autoscale_bounds(job) {
        errs.add(JobRule::ScaleAnnotation, field, message);
    }
}

/// What Volcano's CRD schema checks and its webhook leaves to it.
fn schema(job: &Job, errs: &mut Errors) {
    let spec = &job.spec;
    let mut at_least = |field: String, v: Option<i32>, min: i32| {
        if let Some(v) = v.filter(|v| *v < min) {
            errs.add(JobRule::Schema, field, format!("{v} is below {min}"));
        }
    };
    at_least("spec.minAvailable".into(), Some(spec.min_available), 0);
    at_least("spec.maxRetry".into(), Some(spec.max_retry), 0);
    at_least("spec.ttlSecondsAfterFinished".into(), spec.ttl_seconds_after_finished, 0);
    at_least("spec.minSuccess".into(), spec.min_success, 1);
    for (i, t) in spec.tasks.iter().enumerate() {
        at_least(format!("spec.tasks[{i}].replicas"), Some(t.replicas), 0);
        at_least(format!("spec.tasks[{i}].minAvailable"), t.min_available, 0);
        at_least(format!("spec.tasks[{i}].maxRetry"), Some(t.max_retry), 0);
    }
    for (i, t) in spec.tasks.iter().enumerate() {
        if !t.name().is_empty() {
            if let Err(e) = validation::dns1123_label(t.name()) {
                errs.add(JobRule::Schema, format!("spec.tasks[{i}].name"), e);
            }
        }
        if let Some(p) = t.topology_policy.as_deref().filter(|p| !p.is_empty()) {
            if !numa_policy::ALL.contains(&p) {
                errs.add(
                    JobRule::Schema,
                    format!("spec.tasks[{i}].topologyPolicy"),
                    format!("unknown topology policy {p:?}; expected one of {}", numa_policy::ALL.join(", ")),
                );
            }
        }
    }
    let timeouts = spec.policies.iter().enumerate().map(|(j, p)| (format!("spec.policies[{j}].timeout"), &p.timeout));
    let task_timeouts = spec.tasks.iter().enumerate().flat_map(|(i, t)| {
        t.policies.iter().enumerate().map(move |(j, p)| (format!("spec.tasks[{i}].policies[{j}].timeout"), &p.timeout))
    });
    let durations =
        [("spec.runningEstimate".to_string(), &spec.running_estimate)].into_iter().chain(timeouts).chain(task_timeouts);
    for (field, d) in durations {
        if let Some(Err(e)) = d.as_deref().map(crate::job::parse_go_duration) {
            errs.add(JobRule::Duration, field, e);
        }
    }
    for (field, v) in [("spec.queue", &spec.queue), ("spec.priorityClassName", &spec.priority_class_name)] {
        if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
            if let Err(e) = validation::dns1123_subdomain(v) {
                errs.add(JobRule::Schema, field, e);
            }
        }
    }
}

fn network_topology(path: &str, nt: Option<&NetworkTopologySpec>, errs: &mut Errors) {
    let Some(nt) = nt else { return };
    if nt.highest_tier_allowed.is_some() && !unset(&nt.highest_tier_name) {
        errs.add(JobRule::NetworkTopology, path, "must not set both highestTierAllowed and highestTierName");
    }
}

/// A list of lifecycle policies (the job's, or one task's), as Volcano's
/// `validatePolicies`: the first problem ends the list's checks.
fn policies(path: &str, list: &[LifecyclePolicy], errs: &mut Errors) {
    let mut events: BTreeSet<&Event> = BTreeSet::new();
    let mut exit_codes = BTreeSet::new();
    'policies: for (j, p) in list.iter().enumerate() {
        let path = format!("{path}[{j}]");
        let has_event = p.event.as_ref().is_some_and(|e| !e.as_str().is_empty()) || !p.events.is_empty();
        match (has_event, p.exit_code) {
            (true, Some(_)) => {
                errs.add(JobRule::PolicyEventAndExitCode, path, "must not set both event(s) and exitCode");
                break;
            }
            (false, None) => {
                errs.add(JobRule::PolicyTrigger, path, "must set event(s) or exitCode");
                break;
            }
            (true, None) => {
                for e in p.event_list() {
                    if !Event::POLICY.contains(e) {
                        let allowed: Vec<&str> = Event::POLICY.iter().map(|e| e.as_str()).collect();
                        errs.add(
                            JobRule::PolicyEvent,
                            format!("{path}.events"),
                            format!("event {e:?} may not be used in a policy; expected one of {}", allowed.join(", ")),
                        );
                        break 'policies;
                    }
                    let action = p.action.clone().unwrap_or(Action::Other(String::new()));
                    if !Action::POLICY.contains(&action) {
                        let allowed: Vec<&str> = Action::POLICY.iter().map(|a| a.as_str()).collect();
                        errs.add(
                            JobRule::PolicyAction,
                            format!("{path}.action"),
                            format!(
                                "action {:?} may not be used in a policy; expected one of {}",
                                action.as_str(),
                                allowed.join(", ")
                            ),
                        );
                        break 'policies;
                    }
                    if !events.insert(e) {
                        errs.add(
                            JobRule::PolicyDuplicateEvent,
                            format!("{path}.events"),
                            format!("event {:?} appears in more than one policy", e.as_str()),
                        );
                        break 'policies;
                    }
                }
            }
            (false, Some(code)) => {
                if code == 0 {
                    errs.add(JobRule::PolicyZeroExitCode, format!("{path}.exitCode"), "0 is not a failure exit code");
                    break;
                }
                if !exit_codes.insert(code) {
                    errs.add(
                        JobRule::PolicyDuplicateExitCode,
                        format!("{path}.exitCode"),
                        format!("exit code {code} appears in more than one policy"),
                    );
                    break;
                }
            }
        }
    }
    if events.contains(&Event::Any) && events.len() > 1 {
        errs.add(JobRule::PolicyAnyNotAlone, path, "with the event \"*\", no other event may have a policy");
    }
}

/// A task's pod template, checked as the pod `<job>-<task>-<index>` it becomes.
fn pod_template(path: &str, job: &Job, task: &TaskSpec, pod_name: &str, errs: &mut Errors) {
    let t = &task.template;
    let mut metadata = t.metadata.clone().unwrap_or_default();
    metadata.name = Some(pod_name.to_string());
    metadata.namespace = job.metadata.namespace.clone();
    let pod = Pod { metadata, spec: t.spec.clone(), status: None };
    if let Err(e) = validation::pod(&pod) {
        // Name errors are the PodName rule's.
        if e.field != "metadata.name" {
            errs.add(JobRule::PodTemplate, format!("{path}.template.{}", e.field), e.message);
        }
    }
}

/// Whole CPUs for every container of a task with a NUMA topology policy (requests, else
/// limits, as Volcano's `guaranteedCPUs`).
fn numa(path: &str, task: &TaskSpec, errs: &mut Errors) {
    let policy = task.topology_policy.as_deref().unwrap_or_default();
    if policy.is_empty() || policy == numa_policy::NONE {
        return;
    }
    let Some(spec) = &task.template.spec else { return };
    let whole_cpus = |c: &Container| {
        let r = c.resources.as_ref();
        let requests = r.and_then(|r| r.requests.as_ref()).filter(|l| !l.is_empty());
        let list = requests.or_else(|| r.and_then(|r| r.limits.as_ref()));
        let cpu = list.and_then(|l| l.get("cpu")).map(|q| q.0.as_str()).unwrap_or("0");
        match (quantity::parse_value(cpu), quantity::parse_milli(cpu)) {
            (Ok(v), Ok(m)) => v >= 1.0 && v * 1000.0 == m,
            _ => false,
        }
    };
    let groups: [(&str, &[Container]); 2] =
        [("containers", &spec.containers), ("initContainers", spec.init_containers.as_deref().unwrap_or_default())];
    for (group, containers) in groups {
        for (k, c) in containers.iter().enumerate() {
            if !whole_cpus(c) {
                errs.add(
                    JobRule::NumaCpu,
                    format!("{path}.template.spec.{group}[{k}].resources.requests[cpu]"),
                    format!("topology policy {policy} needs a whole number of cpus (at least 1) for every container"),
                );
                return;
            }
        }
    }
}

fn partition_policy(path: &str, task: &TaskSpec, errs: &mut Errors) {
    let Some(p) = &task.partition_policy else { return };
    let path = format!("{path}.partitionPolicy");
    if p.total_partitions <= 0 {
        errs.add(JobRule::PartitionPolicy, format!("{path}.totalPartitions"), "must be greater than 0");
    } else if p.partition_size <= 0 {
        errs.add(JobRule::PartitionPolicy, format!("{path}.partitionSize"), "must be greater than 0");
    } else if task.replicas != p.total_partitions * p.partition_size {
        errs.add(
            JobRule::PartitionPolicy,
            path.clone(),
            format!(
                "totalPartitions × partitionSize = {} × {} is not the task's replicas ({})",
                p.total_partitions, p.partition_size, task.replicas
            ),
        );
    } else if let Some(min) =
        task.min_available.filter(|m| p.min_partitions > 0 && p.min_partitions * p.partition_size != *m)
    {
        errs.add(
            JobRule::PartitionPolicy,
            format!("{path}.minPartitions"),
            format!(
                "minPartitions × partitionSize = {} × {} is not the task's minAvailable ({min})",
                p.min_partitions, p.partition_size
            ),
        );
    }
    network_topology(&format!("{path}.networkTopology"), p.network_topology.as_ref(), errs);
}

fn volumes(job: &Job, errs: &mut Errors) {
    let mut paths = BTreeSet::new();
    for (i, v) in job.spec.volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        if v.mount_path.is_empty() {
            errs.add(JobRule::Volume, format!("{path}.mountPath"), "required");
        } else if !paths.insert(v.mount_path.as_str()) {
            errs.add(JobRule::Volume, format!("{path}.mountPath"), format!("duplicate mount path {:?}", v.mount_path));
        }
        match (v.volume_claim.is_some(), v.volume_claim_name.as_deref().filter(|n| !n.is_empty())) {
            (false, None) => errs.add(JobRule::Volume, path, "either volumeClaim or volumeClaimName is required"),
            (true, Some(_)) => errs.add(
                JobRule::Volume,
                path,
                "volumeClaimName (an existing PVC) and volumeClaim (a PVC to create) exclude each other",
            ),
            (false, Some(name)) => {
                if let Err(e) = validation::dns1123_subdomain(name) {
                    errs.add(JobRule::Volume, format!("{path}.volumeClaimName"), e);
                }
            }
            (true, None) => {}
        }
    }
}

fn queue(job: &Job, queues: &(impl QueueLookup + ?Sized), errs: &mut Errors) {
    let name = job.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(crate::names::DEFAULT_QUEUE);
    let Some(q) = queues.lookup(name) else {
        errs.add(JobRule::QueueNotFound, "spec.queue", format!("queue {name:?} does not exist"));
        return;
    };
    if let Some(state) = q.state.filter(|s| *s != QueueState::Open) {
        errs.add(
            JobRule::QueueNotOpen,
            "spec.queue",
            format!("queue {name:?} is {state:?}; jobs can only be submitted to Open queues"),
        );
    }
    if name == ROOT_QUEUE {
        errs.add(JobRule::RootQueue, "spec.queue", "jobs cannot be submitted to the root queue");
    } else if q.children > 0 {
        errs.add(
            JobRule::QueueNotLeaf,
            "spec.queue",
            format!("queue {name:?} has {} child queues; jobs can only be submitted to leaf queues", q.children),
        );
    }
}

/// `dependsOn`: every named task exists, and the dependencies form no cycle.
fn depends_on(job: &Job, errs: &mut Errors) {
    let tasks = &job.spec.tasks;
    if tasks.iter().all(|t| t.depends_on.is_none()) {
        return;
    }
    let names: BTreeSet<&str> = tasks.iter().map(|t| t.name()).collect();
    let mut deps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (i, t) in tasks.iter().enumerate() {
        for (k, d) in t.depends_on.iter().flat_map(|d| d.name.iter()).enumerate() {
            if !names.contains(d.as_str()) {
                errs.add(
                    JobRule::DependsOn,
                    format!("spec.tasks[{i}].dependsOn.name[{k}]"),
                    format!("task {d:?} is not a task of the job"),
                );
                return;
            }
            deps.entry(t.name()).or_default().push(d);
        }
    }
    // Kahn's algorithm: remove tasks whose dependencies are all removed.
    let mut done: BTreeSet<&str> = BTreeSet::new();
    loop {
        let ready: Vec<&str> = names
            .iter()
            .filter(|n| !done.contains(*n) && deps.get(*n).into_iter().flatten().all(|d| done.contains(d)))
            .copied()
            .collect();
        if ready.is_empty() {
            break;
        }
        done.extend(ready);
    }
    if done.len() < names.len() {
        let cycle: Vec<&str> = names.iter().filter(|n| !done.contains(*n)).copied().collect();
        errs.add(
            JobRule::DependsOn,
            "spec.tasks",
            format!("the tasks' dependsOn form a cycle (among {}); they must form a DAG", cycle.join(", ")),
        );
    }
}

/// A job on UPDATE, as Volcano's validating webhook checks it: counts stay consistent, no
/// task is added or removed, and nothing but `minAvailable`, `priorityClassName` and the
/// tasks' `replicas` and `minAvailable` changes. A volume's `volumeClaimName` may change
/// when it has a `volumeClaim` (the controller names the PVC it creates).
///
/// Fields are compared as JSON, so `1000m` and `1` cpu differ (Volcano compares
/// quantities semantically).
pub fn validate_job_update(old: &Job, new: &Job) -> Result<(), JobErrors> {
    let mut errs = Errors(Vec::new());
    let mut total = 0;
    // The first task whose replicas went down (a scale-in), for the job-level message.
    let mut shrunk: Option<usize> = None;
    for (i, t) in new.spec.tasks.iter().enumerate() {
        let path = format!("spec.tasks[{i}]");
        if t.replicas < 0 {
            errs.add(JobRule::Schema, format!("{path}.replicas"), format!("{} is below 0", t.replicas));
        }
        let was = old.spec.tasks.get(i).map(|o| o.replicas);
        if was.is_some_and(|w| t.replicas < w) {
            shrunk.get_or_insert(i);
        }
        match t.min_available {
            Some(m) if t.replicas >= 0 && m > t.replicas && was.is_some_and(|w| t.replicas < w) => errs.add(
                JobRule::ScaleBelowMinAvailable,
                format!("{path}.replicas"),
                format!(
                    "{} is below the task's minAvailable ({m}): a job is not scaled in below its minAvailable \
                     (lower {path}.minAvailable in the same update to allow it)",
                    t.replicas
                ),
            ),
            Some(m) if m < 0 => errs.add(JobRule::Schema, format!("{path}.minAvailable"), format!("{m} is below 0")),
            Some(m) if m > t.replicas => errs.add(
                JobRule::TaskMinAvailable,
                format!("{path}.minAvailable"),
                format!("{m} is greater than the task's replicas ({})", t.replicas),
            ),
            _ => {}
        }
        partition_policy(&path, t, &mut errs);
        total += t.replicas;
    }
    match shrunk {
        Some(i) if new.spec.min_available > total => errs.add(
            JobRule::ScaleBelowMinAvailable,
            format!("spec.tasks[{i}].replicas"),
            format!(
                "the tasks' replicas in total ({total}) would be below the job's minAvailable ({}): a job is not \
                 scaled in below its minAvailable (lower spec.minAvailable in the same update to allow it)",
                new.spec.min_available
            ),
        ),
        _ if new.spec.min_available > total => errs.add(
            JobRule::JobMinAvailable,
            "spec.minAvailable",
            format!("{} is greater than the tasks' replicas in total ({total})", new.spec.min_available),
        ),
        _ => {}
    }
    scale_annotations(new, &mut errs);
    if new.spec.min_available < 0 {
        errs.add(JobRule::Schema, "spec.minAvailable", format!("{} is below 0", new.spec.min_available));
    }
    network_topology("spec.networkTopology", new.spec.network_topology.as_ref(), &mut errs);
    if old.spec.tasks.len() != new.spec.tasks.len() {
        errs.add(
            JobRule::UpdateTaskCount,
            "spec.tasks",
            format!(
                "{} tasks, was {}: an update may not add or remove tasks",
                new.spec.tasks.len(),
                old.spec.tasks.len()
            ),
        );
        return errs.finish(new);
    }
    let (mut a, mut b) = (old.spec.clone(), new.spec.clone());
    b.min_available = a.min_available;
    b.priority_class_name = a.priority_class_name.clone();
    for (ta, tb) in a.tasks.iter().zip(b.tasks.iter_mut()) {
        tb.replicas = ta.replicas;
        tb.min_available = ta.min_available;
    }
    for v in a.volumes.iter_mut().chain(b.volumes.iter_mut()) {
        if v.volume_claim.is_some() {
            v.volume_claim_name = None;
        }
    }
    let (a, b) = (serde_json::to_value(&a).unwrap_or_default(), serde_json::to_value(&b).unwrap_or_default());
    if let Some(field) = first_difference(&a, &b, "spec") {
        errs.add(
            JobRule::UpdateImmutable,
            field,
            "may not change: an update changes only minAvailable, priorityClassName and the tasks' replicas and \
             minAvailable",
        );
    }
    errs.finish(new)
}

/// The path of the first place `a` and `b` differ.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                first_difference(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                )
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]")))
        }
        _ if a == b => None,
        _ => Some(path.to_string()),
    }
}

#[cfg(test)]
mod tests;
