//! Kubernetes Events on Jobs, with Volcano's reasons and messages (`recordJobEvent` and the
//! `recorder.Event` calls of `job_controller.go`, `job_controller_handler.go` and
//! `job_controller_actions.go`).
//!
//! The events are pure values ([`JobEvent`], made by the functions below); a [`Recorder`]
//! sends them to the `events.k8s.io/v1` API off the reconcile's path: [`Recorder::record`]
//! never waits, it queues the event on a bounded queue (dropped and counted when full or
//! when this replica does not lead), and a few workers, each with its own kube-runtime
//! event recorder, publish them. A job's events always go to the same worker, so that its
//! repeats (same reason, same `action`, within six minutes) fold into one event with a
//! series count; the event keeps the note of the first of them. `PodGroupPending`, which
//! Volcano records on every sync of a job whose PodGroup is not scheduled, is throttled: the
//! same message for the same job is sent at most once a minute.
//!
//! The reporting controller is `volcano-rs-controller` (Volcano's job controller reports
//! as `vc-controller-manager`); the reporting instance is the replica's identity.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::SignedDuration;
use kube::runtime::events::{Event, EventType, Recorder as KubeRecorder, Reporter};
use kube::{Client, Resource};
use tokio::sync::{mpsc, watch};
use volcano_api::bus::Action;
use volcano_api::crd::PodGroup;
use volcano_api::job::Job;

use crate::scale::ScaleEvent;
use crate::status::go_duration;

/// The reporting controller of the job controller's events.
pub const REPORTER: &str = "volcano-rs-controller";

/// Volcano's event reasons (`batch.volcano.sh/v1alpha1` `JobEvent`s, and the pod reasons
/// of `job_controller_const.go`).
pub mod reason {
    /// A Command was deleted and its action is about to run.
    pub const COMMAND_ISSUED: &str = "CommandIssued";
    /// An action runs now, later (a policy's timeout), or the retry limit was reached.
    pub const EXECUTE_ACTION: &str = "ExecuteAction";
    /// The PodGroup's latest true condition is not `Scheduled`.
    pub const POD_GROUP_PENDING: &str = "PodGroupPending";
    /// The job plugins' objects could not be made.
    pub const PLUGIN_ERROR: &str = "PluginError";
    /// A volume's PVC could not be created or does not exist.
    pub const PVC_ERROR: &str = "PVCError";
    /// The PodGroup could not be created or updated.
    pub const POD_GROUP_ERROR: &str = "PodGroupError";
    /// The job's first status could not be written.
    pub const JOB_STATUS_ERROR: &str = "JobStatusError";
    /// Pods could not be created.
    pub const FAILED_CREATE: &str = "FailedCreate";
    /// Pods could not be deleted.
    pub const FAILED_DELETE: &str = "FailedDelete";
}

/// An event on a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobEvent {
    /// Warning or not.
    pub warning: bool,
    /// Volcano's reason ([`reason`]).
    pub reason: &'static str,
    /// The events API's `action` (what the controller was doing). Repeats of one reason and
    /// action fold into a series, so events whose messages differ in kind (an action
    /// started, or delayed) have different actions.
    pub action: String,
    /// Volcano's message (the event's note).
    pub message: String,
    /// An event recorded on every sync rather than on a change (`PodGroupPending`): an
    /// identical one (same job, reason, action and message) is dropped when the same worker
    /// sent it less than [`RecorderConfig::throttle`] ago.
    pub throttle: bool,
}

/// An event of the TrainingJob controller ([`crate::training::TrainingEvent`]).
pub fn training_event(ev: &crate::training::TrainingEvent) -> JobEvent {
    JobEvent {
        warning: ev.warning,
        reason: ev.reason,
        action: ev.action.clone(),
        message: ev.message.clone(),
        throttle: false,
    }
}

fn normal(reason: &'static str, action: impl Into<String>, message: String) -> JobEvent {
    JobEvent { warning: false, reason, action: action.into(), message, throttle: false }
}

fn warning(reason: &'static str, action: &str, message: String) -> JobEvent {
    JobEvent { warning: true, reason, action: action.to_string(), message, throttle: false }
}

fn action_name(action: Option<&Action>) -> &str {
    action.map_or("", Action::as_str)
}

/// A step of a resize of task `task` ([`crate::scale`]; volcano-rs's own events: `ScaleOut`,
/// `ScaleIn`, and the warnings `ScaleOutRolledBack` and `ScaleRefused`).
pub fn scale_event(task: &str, event: &ScaleEvent, now_ms: i64) -> JobEvent {
    let message = event.message(&format!("task {task}"), now_ms);
    let action = format!("{}-{task}", event.kind());
    if event.warning() {
        warning(event.reason(), &action, message)
    } else {
        normal(event.reason(), action, message)
    }
}

/// A resize by the elastic autoscaler (volcano-rs's own events: `AutoscaleOut`,
/// `AutoscaleIn`, `AutoscaleReverted`).
pub fn autoscale_event(r: &crate::autoscale::Resize) -> JobEvent {
    normal(r.reason.event_reason(), format!("Autoscale-{}", r.task), r.message())
}

/// A Command was deleted: its action runs next (`processNextCommand`).
pub fn command_issued(action: Option<&Action>) -> JobEvent {
    let a = action_name(action);
    normal(
        reason::COMMAND_ISSUED,
        if a.is_empty() { "Command" } else { a },
        format!("Start to execute command {a}, and clean it up to make sure executed not more than once."),
    )
}

/// An action other than `SyncJob` runs now (`processNextReq`).
pub fn execute_action(action: &Action) -> JobEvent {
    normal(reason::EXECUTE_ACTION, action.as_str(), format!("Start to execute action {action} "))
}

/// A policy's timeout delays the action (`processNextReq`); the delay in Go's notation.
pub fn delayed_action(action: &Action, delay: Duration) -> JobEvent {
    let d = go_duration(SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX));
    normal(reason::EXECUTE_ACTION, format!("Delay{action}"), format!("Execute action {action} after {d}"))
}

/// The job failed `--max-requeue-num` times in a row: it is terminated (`handleJobError`).
pub fn retry_limit_reached(action: &Action) -> JobEvent {
    normal(
        reason::EXECUTE_ACTION,
        "RetryLimitReached",
        format!("Job failed on action {action} for retry limit reached"),
    )
}

/// The plugins' objects could not be made (`initiateJob`).
pub fn plugin_error(err: &dyn std::fmt::Display) -> JobEvent {
    warning(reason::PLUGIN_ERROR, "CreatePluginResources", format!("Execute plugin when job add failed, err: {err}"))
}

/// A volume's PVC could not be created, or the named one does not exist (`initiateJob`).
pub fn pvc_error(err: &dyn std::fmt::Display) -> JobEvent {
    warning(reason::PVC_ERROR, "CreatePVC", format!("Failed to create PVC, err: {err}"))
}

/// The PodGroup could not be created or updated (`initiateJob`, `initOnJobUpdate`).
pub fn pod_group_error(err: &dyn std::fmt::Display) -> JobEvent {
    warning(reason::POD_GROUP_ERROR, "CreatePodGroup", format!("Failed to create PodGroup, err: {err}"))
}

/// The job's first status could not be written (`initiateJob`).
pub fn job_status_error(err: &dyn std::fmt::Display) -> JobEvent {
    warning(reason::JOB_STATUS_ERROR, "UpdateStatus", format!("Failed to initialize job status, err: {err}"))
}

/// Pods could not be created (`syncJob`).
pub fn failed_create(errs: &[String]) -> JobEvent {
    warning(reason::FAILED_CREATE, "CreatePod", format!("Error creating pods: [{}]", errs.join(" ")))
}

/// Pods could not be deleted (`syncJob`, `killPods`).
pub fn failed_delete(errs: &[String]) -> JobEvent {
    warning(reason::FAILED_DELETE, "DeletePod", format!("Error deleting pods: [{}]", errs.join(" ")))
}

/// The Warning Volcano records on every sync of a job whose PodGroup's latest true
/// condition (by `lastTransitionTime`; the first of equals) is not `Scheduled`
/// (`recordPodGroupEvent`): `PodGroup <ns>:<job> <type, lower case>, reason: <message>`.
pub fn pod_group_pending(job: &Job, pg: &PodGroup) -> Option<JobEvent> {
    let mut latest: Option<&volcano_api::crd::PodGroupCondition> = None;
    for c in pg.status.iter().flat_map(|s| &s.conditions) {
        if c.status != "True" {
            continue;
        }
        let after = match (&latest, &c.last_transition_time) {
            (None, _) => true,
            (Some(l), Some(t)) => l.last_transition_time.as_ref().is_none_or(|lt| t.0 > lt.0),
            (Some(_), None) => false,
        };
        if after {
            latest = Some(c);
        }
    }
    let c = latest.filter(|c| c.type_ != "Scheduled")?;
    let mut ev = warning(
        reason::POD_GROUP_PENDING,
        "Sync",
        format!(
            "PodGroup {}:{} {}, reason: {}",
            job.metadata.namespace.as_deref().unwrap_or_default(),
            job.metadata.name.as_deref().unwrap_or_default(),
            c.type_.to_lowercase(),
            c.message.as_deref().unwrap_or_default()
        ),
    );
    ev.throttle = true;
    Some(ev)
}

/// The reference of a job's events: without `resourceVersion`, so that the repeats of an
/// event fold across the job's updates.
fn job_reference(job: &Job) -> ObjectReference {
    let mut r = job.object_ref(&());
    r.resource_version = None;
    r
}

/// Counts of what the recorder did.
#[derive(Debug, Default)]
pub struct RecorderStats {
    /// Events the API server accepted.
    pub sent: AtomicU64,
    /// Events dropped: queue full, not leading, refused or timed out.
    pub dropped: AtomicU64,
    /// Throttled events not sent again ([`JobEvent::throttle`]).
    pub throttled: AtomicU64,
}

/// How the recorder sends.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// `reportingInstance` (this replica).
    pub instance: String,
    /// Events waiting, at most (over all workers).
    pub queue: usize,
    /// Workers (events in flight).
    pub workers: usize,
    /// Longest wait for one event's API call.
    pub timeout: Duration,
    /// How long an identical throttled event ([`JobEvent::throttle`]) is not sent again.
    pub throttle: Duration,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            instance: REPORTER.to_string(),
            queue: 1024,
            workers: 4,
            timeout: Duration::from_secs(10),
            throttle: Duration::from_secs(60),
        }
    }
}

/// Sends job events without blocking the reconciles (cheap to clone).
#[derive(Clone, Default)]
pub struct Recorder {
    queues: Vec<mpsc::Sender<Queued>>,
    stats: Arc<RecorderStats>,
}

impl Recorder {
    /// A recorder that drops every event (for tests without an API server to write to).
    pub fn disabled() -> Self {
        Recorder::default()
    }

    /// A recorder writing through `client` while `leading` is true; starts its workers on
    /// the current tokio runtime.
    pub fn new(client: Client, config: RecorderConfig, leading: watch::Receiver<bool>) -> Self {
        let workers = config.workers.max(1);
        let stats = Arc::new(RecorderStats::default());
        let reporter = Reporter { controller: REPORTER.to_string(), instance: Some(config.instance.clone()) };
        let mut queues = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = mpsc::channel((config.queue / workers).max(1));
            queues.push(tx);
            let recorder = KubeRecorder::new(client.clone(), reporter.clone());
            tokio::spawn(worker(recorder, rx, leading.clone(), stats.clone(), config.clone()));
        }
        Recorder { queues, stats }
    }

    /// Queues an event on `job` (dropped and counted when the queue is full).
    pub fn record(&self, job: &Job, ev: JobEvent) {
        self.record_on(job_reference(job), ev);
    }

    /// Queues an event on the object `reference` names (a TrainingJob, a ScaleOut, ...);
    /// its `resourceVersion` is dropped, so that repeats fold across the object's updates.
    pub fn record_on(&self, mut reference: ObjectReference, ev: JobEvent) {
        reference.resource_version = None;
        tracing::debug!(
            object = %format!("{}/{}", reference.namespace.as_deref().unwrap_or_default(), reference.name.as_deref().unwrap_or_default()),
            reason = ev.reason,
            "event: {}",
            ev.message
        );
        if self.queues.is_empty() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut h = DefaultHasher::new();
        (&reference.namespace, &reference.name).hash(&mut h);
        let shard = (h.finish() % self.queues.len() as u64) as usize;
        let throttle = ev.throttle;
        let event = Event {
            type_: if ev.warning { EventType::Warning } else { EventType::Normal },
            reason: ev.reason.to_string(),
            note: Some(volcano_kube::event_note(&ev.message)),
            action: ev.action,
            secondary: None,
        };
        if self.queues[shard].try_send(Queued { event, reference, throttle }).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What the recorder did so far.
    pub fn stats(&self) -> &RecorderStats {
        &self.stats
    }
}

struct Queued {
    event: Event,
    reference: ObjectReference,
    throttle: bool,
}

/// What identifies a throttled event: namespace, name, reason, action, note.
type ThrottleKey = (Option<String>, Option<String>, String, String, Option<String>);

async fn worker(
    recorder: KubeRecorder,
    mut rx: mpsc::Receiver<Queued>,
    leading: watch::Receiver<bool>,
    stats: Arc<RecorderStats>,
    config: RecorderConfig,
) {
    let mut sent_at: HashMap<ThrottleKey, Instant> = HashMap::new();
    while let Some(Queued { event: ev, reference, throttle }) = rx.recv().await {
        if !*leading.borrow() {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if throttle {
            let now = Instant::now();
            if sent_at.len() > 4096 {
                sent_at.retain(|_, t| now.duration_since(*t) < config.throttle);
            }
            let key = (
                reference.namespace.clone(),
                reference.name.clone(),
                ev.reason.clone(),
                ev.action.clone(),
                ev.note.clone(),
            );
            if sent_at.get(&key).is_some_and(|t| now.duration_since(*t) < config.throttle) {
                stats.throttled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            sent_at.insert(key, now);
        }
        match tokio::time::timeout(config.timeout, recorder.publish(&ev, &reference)).await {
            Ok(Ok(())) => {
                stats.sent.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("event not recorded: {e}");
            }
            Err(_) => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("event not recorded: timed out");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use volcano_api::crd::{PodGroupCondition, PodGroupStatus};

    use super::*;

    #[test]
    fn volcano_messages() {
        let e = command_issued(Some(&Action::AbortJob));
        assert_eq!((e.warning, e.reason, e.action.as_str()), (false, "CommandIssued", "AbortJob"));
        assert_eq!(
            e.message,
            "Start to execute command AbortJob, and clean it up to make sure executed not more than once."
        );
        assert_eq!(command_issued(None).action, "Command");
        let e = execute_action(&Action::RestartJob);
        assert_eq!((e.reason, e.message.as_str()), ("ExecuteAction", "Start to execute action RestartJob "));
        let e = delayed_action(&Action::RestartJob, Duration::from_secs(300));
        assert_eq!(e.message, "Execute action RestartJob after 5m0s");
        assert_ne!(e.action, execute_action(&Action::RestartJob).action, "a delay and a start do not fold");
        assert_eq!(
            retry_limit_reached(&Action::SyncJob).message,
            "Job failed on action SyncJob for retry limit reached"
        );
        let e = pvc_error(&"pvc data is not found");
        assert_eq!((e.warning, e.reason), (true, "PVCError"));
        assert_eq!(e.message, "Failed to create PVC, err: pvc data is not found");
        assert_eq!(plugin_error(&"x").message, "Execute plugin when job add failed, err: x");
        assert_eq!(pod_group_error(&"x").message, "Failed to create PodGroup, err: x");
        assert_eq!(job_status_error(&"x").message, "Failed to initialize job status, err: x");
        let e = failed_create(&["a".into(), "b".into()]);
        assert_eq!((e.reason, e.message.as_str()), ("FailedCreate", "Error creating pods: [a b]"));
        assert_eq!(failed_delete(&["a".into()]).message, "Error deleting pods: [a]");
    }

    fn cond(type_: &str, status: &str, secs: i64, message: &str) -> PodGroupCondition {
        PodGroupCondition {
            type_: type_.into(),
            status: status.into(),
            last_transition_time: Some(Time(Timestamp::from_second(secs).unwrap())),
            message: Some(message.into()),
            ..Default::default()
        }
    }

    #[test]
    fn pod_group_pending_reads_the_latest_true_condition() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ml"}, "spec": {"tasks": []}
        }))
        .unwrap();
        let pg = |conds: Vec<PodGroupCondition>| PodGroup {
            metadata: Default::default(),
            spec: Default::default(),
            status: Some(PodGroupStatus { conditions: conds, ..Default::default() }),
        };
        assert_eq!(pod_group_pending(&job, &pg(vec![])), None);
        let unsched = cond("Unschedulable", "True", 20, "3/3 tasks in gang unschedulable");
        let e = pod_group_pending(&job, &pg(vec![cond("Scheduled", "True", 10, ""), unsched.clone()])).unwrap();
        assert!(e.warning);
        assert_eq!(e.reason, "PodGroupPending");
        assert_eq!(e.message, "PodGroup ml:j unschedulable, reason: 3/3 tasks in gang unschedulable");
        // Scheduled later: nothing.
        assert_eq!(pod_group_pending(&job, &pg(vec![unsched.clone(), cond("Scheduled", "True", 30, "")])), None);
        // Conditions not true do not count.
        assert_eq!(pod_group_pending(&job, &pg(vec![cond("Unschedulable", "False", 40, "")])), None);
        let e = pod_group_pending(&job, &pg(vec![unsched, cond("Scheduled", "False", 30, "")]));
        assert!(e.is_some());
    }

    #[tokio::test]
    async fn a_disabled_recorder_drops() {
        let job: Job = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "j", "namespace": "ml"}, "spec": {"tasks": []}
        }))
        .unwrap();
        let r = Recorder::disabled();
        r.record(&job, execute_action(&Action::AbortJob));
        assert_eq!(r.stats().dropped.load(Ordering::Relaxed), 1);
        assert_eq!(job_reference(&job).resource_version, None);
    }
}
