//! Events from observations: what a change to a pod, a PodGroup, a Job or a Command means
//! for the job controller, as a [`Request`] for the job's work queue.
//!
//! Volcano's informer handlers (`job_controller_handler.go`) do this; here each handler is a
//! pure function of the objects it sees (and, for the task-level events, of the task's pods
//! as the controller's store holds them). A function returns `None` where Volcano drops the
//! notification: a pod no Job controls, a pod without the controller's annotations, an
//! update that changed nothing.

use volcano_api::bus::{Action, Command, Event};
use volcano_api::crd::{PodGroup, PodGroupPhase, TASK_SPEC_KEY};
use volcano_api::job::{Job, DEFAULT_MAX_RETRY};
use volcano_api::k8s_openapi::api::core::v1::Pod;
use volcano_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation naming a pod's job (Volcano's `batch.JobNameKey`).
pub const JOB_NAME_KEY: &str = "volcano.sh/job-name";
/// The annotation holding the `status.version` of the job when the pod was created.
pub const JOB_VERSION_KEY: &str = "volcano.sh/job-version";
/// The label holding a pod's partition (`index / partitionSize`).
pub const PARTITION_ID_KEY: &str = "volcano.sh/partition-id";
/// The annotation the controller puts on a pod before it deletes it: the pod's later
/// notifications are the controller's own doing (`OutOfSync`), not something that happened
/// to the job.
pub const OUT_OF_SYNC_KEY: &str = "volcano.sh/controller-out-of-sync";

/// The API version and kind of the owner reference that makes a pod a Job's.
const JOB_API_VERSION: &str = "batch.volcano.sh/v1alpha1";
const JOB_KIND: &str = "Job";

/// Something the job controller must look at: Volcano's `apis.Request`.
///
/// Optional fields are `None` where Volcano leaves the string empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Namespace of the job.
    pub namespace: String,
    /// Name of the job.
    pub job_name: String,
    /// UID of the job that controls the pod (pod events only).
    pub job_uid: Option<String>,
    /// The pod's task (its `volcano.sh/task-spec` annotation).
    pub task: Option<String>,
    /// Name of the pod.
    pub pod: Option<String>,
    /// UID of the pod.
    pub pod_uid: Option<String>,
    /// The pod's partition (its `volcano.sh/partition-id` label).
    pub partition: Option<String>,
    /// What happened.
    pub event: Event,
    /// The action asked for explicitly (by a Command); it wins over every policy.
    pub action: Option<Action>,
    /// Exit code of the first container of a failed pod.
    pub exit_code: Option<i32>,
    /// The job version the pod was created for (`volcano.sh/job-version`); 0 when not a pod
    /// event.
    pub job_version: i32,
}

impl Request {
    /// A request about the job `namespace/name` with `event` and nothing else.
    pub fn for_job(namespace: &str, job_name: &str, event: Event) -> Request {
        Request {
            namespace: namespace.to_string(),
            job_name: job_name.to_string(),
            job_uid: None,
            task: None,
            pod: None,
            pod_uid: None,
            partition: None,
            event,
            action: None,
            exit_code: None,
            job_version: 0,
        }
    }

    /// The job's key, `namespace/name`: requests with the same key go to the same worker.
    pub fn job_key(&self) -> String {
        job_key(&self.namespace, &self.job_name)
    }

    /// Whether this is one of the events that describe a pod's phase (Volcano's
    /// `isPodEvent`): the ones that cancel delayed actions.
    pub fn is_pod_event(&self) -> bool {
        matches!(self.event, Event::PodPending | Event::PodRunning | Event::PodFailed | Event::PodEvicted)
    }
}

/// A job's key, `namespace/name`.
pub fn job_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The job-related facts of a pod, when a Job controls it and the controller's annotations
/// are all there (Volcano skips the pod otherwise).
struct PodFacts {
    namespace: String,
    job_name: String,
    job_uid: String,
    task: String,
    job_version: i32,
}

fn pod_facts(pod: &Pod) -> Option<PodFacts> {
    let meta = &pod.metadata;
    let owner = meta.owner_references.as_ref()?.iter().find(|o| o.controller == Some(true))?;
    if owner.api_version != JOB_API_VERSION || owner.kind != JOB_KIND {
        return None;
    }
    let annotations = meta.annotations.as_ref()?;
    let task = annotations.get(TASK_SPEC_KEY)?;
    let job_name = annotations.get(JOB_NAME_KEY)?;
    // Go's `strconv.ParseInt(version, 10, 32)`: a sign is allowed, nothing else.
    let job_version = annotations.get(JOB_VERSION_KEY)?.parse::<i32>().ok()?;
    Some(PodFacts {
        namespace: meta.namespace.clone().unwrap_or_default(),
        job_name: job_name.clone(),
        job_uid: owner.uid.clone(),
        task: task.clone(),
        job_version,
    })
}

/// Whether the controller marked the pod as out of sync before deleting it.
pub fn is_out_of_sync(pod: &Pod) -> bool {
    annotation(&pod.metadata, OUT_OF_SYNC_KEY).is_some()
}

/// The pod's task (`volcano.sh/task-spec`), if annotated.
pub fn pod_task(pod: &Pod) -> Option<&str> {
    task_of(&pod.metadata)
}

/// The task a pod's metadata names (`volcano.sh/task-spec` annotation).
pub fn task_of(meta: &ObjectMeta) -> Option<&str> {
    annotation(meta, TASK_SPEC_KEY)
}

/// The pod's partition (`volcano.sh/partition-id` label), if labelled.
pub fn pod_partition(pod: &Pod) -> Option<&str> {
    pod.metadata.labels.as_ref()?.get(PARTITION_ID_KEY).map(String::as_str)
}

/// The pod's phase (`status.phase`), empty when unset.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default()
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn pod_request(pod: &Pod, facts: PodFacts, event: Event) -> Request {
    Request {
        namespace: facts.namespace,
        job_name: facts.job_name,
        job_uid: Some(facts.job_uid).filter(|u| !u.is_empty()),
        task: Some(facts.task),
        pod: pod.metadata.name.clone(),
        pod_uid: pod.metadata.uid.clone(),
        partition: pod_partition(pod).map(str::to_string),
        event,
        action: None,
        exit_code: None,
        job_version: facts.job_version,
    }
}

/// A pod of a job appeared: `PodPending`, or `OutOfSync` when the controller already marked
/// it for deletion.
pub fn pod_added(pod: &Pod) -> Option<Request> {
    let facts = pod_facts(pod)?;
    let event = if is_out_of_sync(pod) { Event::OutOfSync } else { Event::PodPending };
    Some(pod_request(pod, facts, event))
}

/// A pod of a job changed (Volcano's `updatePod`).
///
/// `task_pods` are the pods the controller's store holds for the job, `new` in place of
/// `old`; only those of `new`'s task are looked at. The event is:
/// - `PodFailed` when the pod just failed, with the exit code of its first container when
///   that container terminated;
/// - `TaskCompleted` when the pod just succeeded and every replica of its task has;
/// - `PodRunning` / `PodPending` when the pod just entered that phase;
/// - `TaskFailed` when it stays Running / Pending while the restarts of the containers (init
///   containers included) of the task's Running and Pending pods add up to the task's
///   `maxRetry` (0 read as 3, −1 never);
/// - `OutOfSync` otherwise, and always for a pod the controller marked out of sync.
pub fn pod_updated<'a>(
    old: &Pod,
    new: &Pod,
    job: &Job,
    task_pods: impl IntoIterator<Item = &'a Pod>,
) -> Option<Request> {
    let facts = pod_facts(new)?;
    if new.metadata.resource_version.is_some() && new.metadata.resource_version == old.metadata.resource_version {
        return None;
    }
    let task_pods: Vec<&Pod> = task_pods.into_iter().filter(|p| pod_task(p) == Some(facts.task.as_str())).collect();
    let (old_phase, new_phase) = (pod_phase(old), pod_phase(new));
    let mut event = Event::OutOfSync;
    let mut exit_code = None;
    match new_phase {
        "Failed" if old_phase != "Failed" => {
            event = Event::PodFailed;
            // Volcano reads the first container only (its "one container per pod" TODO).
            exit_code = Some(
                new.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|cs| cs.first())
                    .and_then(|c| c.state.as_ref())
                    .and_then(|st| st.terminated.as_ref())
                    .map_or(0, |t| t.exit_code),
            );
        }
        "Succeeded" if old_phase != "Succeeded" && task_completed(job, &facts.task, &task_pods) => {
            event = Event::TaskCompleted;
        }
        "Running" | "Pending" => {
            if task_failed(job, &facts.task, &task_pods) {
                event = Event::TaskFailed;
            }
            if old_phase != new_phase {
                event = if new_phase == "Running" { Event::PodRunning } else { Event::PodPending };
            }
        }
        _ => {}
    }
    if is_out_of_sync(new) {
        // The exit code read above stays, as in Volcano; an internal event matches nothing.
        event = Event::OutOfSync;
    }
    let mut req = pod_request(new, facts, event);
    // Volcano's request carries exit code 0 unless the pod just failed.
    req.exit_code = exit_code;
    Some(req)
}

/// A pod of a job went away: `PodEvicted`, or `OutOfSync` when the controller deleted it
/// (marked out of sync) or when the controller's store did not hold it (`in_store`).
pub fn pod_deleted(pod: &Pod, in_store: bool) -> Option<Request> {
    let facts = pod_facts(pod)?;
    let event = if is_out_of_sync(pod) || !in_store { Event::OutOfSync } else { Event::PodEvicted };
    Some(pod_request(pod, facts, event))
}

/// A PodGroup changed phase: a request for its job (the owner reference of kind `Job`, else
/// the PodGroup's own name), with the event `Unknown` when the new phase is Unknown.
///
/// Volcano leaves the event empty for the other phases; here it is `OutOfSync`. Both end in
/// `SyncJob` (an empty event matches no policy, an internal one is never matched).
pub fn pod_group_phase_changed(old: &PodGroup, new: &PodGroup) -> Option<Request> {
    let phase = |pg: &PodGroup| pg.status.as_ref().and_then(|s| s.phase);
    let new_phase = phase(new);
    if phase(old) == new_phase {
        return None;
    }
    let mut job_name = new.metadata.name.clone().unwrap_or_default();
    for owner in new.metadata.owner_references.iter().flatten() {
        if owner.kind == JOB_KIND {
            job_name = owner.name.clone();
        }
    }
    let event = if new_phase == Some(PodGroupPhase::Unknown) { Event::Unknown } else { Event::OutOfSync };
    Some(Request::for_job(new.metadata.namespace.as_deref().unwrap_or_default(), &job_name, event))
}

/// A Job changed: `OutOfSync` when its spec or its phase changed, nothing otherwise (a
/// status-only update is the controller's own write).
///
/// Volcano's controller never raises `JobUpdated` (the webhook accepts it in policies, and
/// nothing matches it); volcano-rs does the same.
pub fn job_updated(old: &Job, new: &Job) -> Option<Request> {
    if new.metadata.resource_version.is_some() && new.metadata.resource_version == old.metadata.resource_version {
        return None;
    }
    let phase = |j: &Job| j.status.as_ref().and_then(|s| s.state.phase.clone());
    if old.spec == new.spec && phase(old) == phase(new) {
        return None;
    }
    Some(Request::for_job(
        new.metadata.namespace.as_deref().unwrap_or_default(),
        new.metadata.name.as_deref().unwrap_or_default(),
        Event::OutOfSync,
    ))
}

/// A Command for a job was read (and deleted): `CommandIssued` with the command's action,
/// which wins over every policy. `None` for a command without a target.
pub fn command_issued(cmd: &Command) -> Option<Request> {
    let target = cmd.target.as_ref()?;
    let mut req =
        Request::for_job(cmd.metadata.namespace.as_deref().unwrap_or_default(), &target.name, Event::CommandIssued);
    req.action = cmd.action.clone();
    Some(req)
}

/// Every replica of the task succeeded (Volcano's `jobCache.TaskCompleted`).
fn task_completed(job: &Job, task: &str, task_pods: &[&Pod]) -> bool {
    let replicas = job.spec.tasks.iter().find(|t| t.name() == task).map_or(0, |t| t.replicas);
    if replicas <= 0 {
        return false;
    }
    let succeeded = task_pods.iter().filter(|p| pod_phase(p) == "Succeeded").count();
    i64::try_from(succeeded).unwrap_or(i64::MAX) >= i64::from(replicas)
}

/// The restarts of the task's Running and Pending pods reached its `maxRetry` (Volcano's
/// `jobCache.TaskFailed`: 0 means 3, −1 means no limit).
fn task_failed(job: &Job, task: &str, task_pods: &[&Pod]) -> bool {
    let Some(spec) = job.spec.tasks.iter().find(|t| t.name() == task) else {
        return false;
    };
    if spec.replicas == 0 || spec.max_retry == -1 {
        return false;
    }
    let max_retry = if spec.max_retry == 0 { DEFAULT_MAX_RETRY } else { spec.max_retry };
    let mut restarts: i64 = 0;
    for pod in task_pods {
        if !matches!(pod_phase(pod), "Running" | "Pending") {
            continue;
        }
        let Some(status) = pod.status.as_ref() else { continue };
        for c in status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten()) {
            restarts += i64::from(c.restart_count);
        }
    }
    restarts >= i64::from(max_retry)
}
