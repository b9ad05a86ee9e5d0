//! applyPolicies: which action a [`Request`] asks for, and after how long; and the
//! bookkeeping of delayed actions ([`DelayedActions`]).
//!
//! Volcano: `applyPolicies` in `job_controller_util.go`, the delayed-action map and its
//! cancellation rules in `job_controller.go`.

use std::collections::BTreeMap;
use std::time::Duration;

use volcano_api::bus::{Action, Event};
use volcano_api::job::{parse_go_duration, Job, LifecyclePolicy};
use volcano_api::k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::events::Request;

/// The events the controller raises for itself: they never match a user's policy.
pub fn is_internal_event(event: &Event) -> bool {
    matches!(event, Event::OutOfSync | Event::CommandIssued | Event::PodRunning)
}

/// The actions the controller takes for itself: they cancel no delayed action.
pub fn is_internal_action(action: &Action) -> bool {
    matches!(action, Action::SyncJob | Action::EnqueueJob | Action::SyncQueue | Action::OpenQueue | Action::CloseQueue)
}

/// The action `req` asks for on `job`, and the delay before it (`None`: now).
///
/// In order: the request's explicit action (a Command) wins; an internal event, a request
/// for another job with the same name (UID) and a request from pods of an older job version
/// give `SyncJob`; then the policies of the request's task, then the job's, first match
/// wins. A policy matches when its events contain the request's event or `*`, or when its
/// `exitCode` equals the request's (0 when it has none). `PodPending` matches an event
/// policy only when that policy has a `timeout`. The matched policy's `timeout` is the
/// delay. Nothing matched: `SyncJob`, now.
pub fn apply(job: &Job, req: &Request) -> (Action, Option<Duration>) {
    let sync = (Action::SyncJob, None);
    if let Some(action) = &req.action {
        return (action.clone(), None);
    }
    if is_internal_event(&req.event) {
        return sync;
    }
    if let (Some(uid), Some(job_uid)) = (&req.job_uid, &job.metadata.uid) {
        if uid != job_uid {
            return sync;
        }
    }
    let version = job.status.as_ref().map_or(0, |s| s.version);
    if req.job_version < version {
        return sync;
    }
    if let Some(task) = req.task.as_deref().filter(|t| !t.is_empty()) {
        if let Some(spec) = job.spec.tasks.iter().find(|t| t.name() == task) {
            if let Some(found) = first_match(&spec.policies, req) {
                return found;
            }
        }
    }
    first_match(&job.spec.policies, req).unwrap_or(sync)
}

fn first_match(policies: &[LifecyclePolicy], req: &Request) -> Option<(Action, Option<Duration>)> {
    for policy in policies {
        let events = policy.event_list();
        let has_event = !req.event.as_str().is_empty();
        if !events.is_empty() && has_event && events.iter().any(|e| **e == req.event || **e == Event::Any) {
            let needs_timeout = req.event == Event::PodPending;
            if !needs_timeout || policy.timeout.is_some() {
                return Some(outcome(policy));
            }
        }
        // exitCode 0 is refused by the webhook; Volcano compares with the request's code,
        // 0 when it has none, and so does this.
        if policy.exit_code.is_some() && policy.exit_code == Some(req.exit_code.unwrap_or(0)) {
            return Some(outcome(policy));
        }
    }
    None
}

fn outcome(policy: &LifecyclePolicy) -> (Action, Option<Duration>) {
    // A policy without an action is refused by the webhook; Volcano would run the empty
    // action, which every state treats as a sync.
    let action = policy.action.clone().unwrap_or(Action::SyncJob);
    (action, policy.timeout.as_deref().and_then(timeout))
}

/// A policy's `timeout` as a delay: `None` for zero, negative or unreadable ones (the
/// webhook refuses unreadable ones; Volcano runs a zero or negative delay at once).
fn timeout(s: &str) -> Option<Duration> {
    let secs = parse_go_duration(s).ok()?;
    (secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// What an action applies to: delayed actions of the same scope cancel each other
/// (Volcano's `GetActionType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The whole job (and any action that is not a targeted restart).
    Job,
    /// One task (`RestartTask`).
    Task,
    /// One pod (`RestartPod`).
    Pod,
    /// One partition (`RestartPartition`).
    Partition,
}

impl Scope {
    /// The scope of an action.
    pub fn of(action: &Action) -> Scope {
        match action {
            Action::RestartTask => Scope::Task,
            Action::RestartPod => Scope::Pod,
            Action::RestartPartition => Scope::Partition,
            _ => Scope::Job,
        }
    }
}

/// An action waiting for its policy's timeout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayedAction {
    /// The request that matched the policy (its job, task, pod, partition and event).
    pub request: Request,
    /// The action to run when due.
    pub action: Action,
    /// When it is due.
    pub due: Timestamp,
}

/// The delayed actions of all jobs: at most one per (job, pod name), as in Volcano.
///
/// The shell [`schedule`](Self::schedule)s what [`apply`] returned with a delay, calls
/// [`cancel_on`](Self::cancel_on) for every request before handling it,
/// [`executed`](Self::executed) after it ran a non-internal action (a delayed one
/// included), and runs what [`due`](Self::due) returns. Nothing here reads a clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayedActions {
    jobs: BTreeMap<String, BTreeMap<String, DelayedAction>>,
}

impl DelayedActions {
    /// No delayed actions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Delays `action` for `req` by `delay` from `now`. A pod already waiting for the same
    /// action keeps its earlier timer (returns `false`); a different action replaces it.
    pub fn schedule(&mut self, req: &Request, action: Action, delay: Duration, now: Timestamp) -> bool {
        let pods = self.jobs.entry(req.job_key()).or_default();
        let pod = req.pod.clone().unwrap_or_default();
        if pods.get(&pod).is_some_and(|d| d.action == action) {
            return false;
        }
        let delay = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
        let due = now.checked_add(delay).unwrap_or(Timestamp::MAX);
        pods.insert(pod, DelayedAction { request: req.clone(), action, due });
        true
    }

    /// Cancels what a pod's new phase makes moot, before `req` is handled (Volcano's
    /// `CleanPodDelayActionsIfNeed`): any pod event but `PodPending` cancels the pod's
    /// delayed `PodPending` action when the pod UID is the same (a recreated pod's events
    /// may arrive before the old pod's), and `PodRunning` cancels its delayed `PodFailed`
    /// and `PodEvicted` actions. Returns what was cancelled.
    pub fn cancel_on(&mut self, req: &Request) -> Vec<DelayedAction> {
        if !req.is_pod_event() || req.event == Event::PodPending {
            return Vec::new();
        }
        let key = req.job_key();
        let Some(pods) = self.jobs.get_mut(&key) else {
            return Vec::new();
        };
        let pod = req.pod.clone().unwrap_or_default();
        let cancel = pods.get(&pod).is_some_and(|d| {
            let pending = d.request.event == Event::PodPending && d.request.pod_uid == req.pod_uid;
            let gone =
                matches!(d.request.event, Event::PodFailed | Event::PodEvicted) && req.event == Event::PodRunning;
            pending || gone
        });
        let out: Vec<DelayedAction> = if cancel { pods.remove(&pod).into_iter().collect() } else { Vec::new() };
        if pods.is_empty() {
            self.jobs.remove(&key);
        }
        out
    }

    /// Cancels, after `action` ran for `origin` (the request it came from), the job's delayed
    /// actions of the same [`Scope`]: every job-level one for a job-level action, only the
    /// same task's, pod's or partition's for a targeted restart (Volcano's
    /// `cleanupDelayActions`). Internal actions cancel nothing. Returns what was cancelled.
    pub fn executed(&mut self, origin: &Request, action: &Action) -> Vec<DelayedAction> {
        if is_internal_action(action) {
            return Vec::new();
        }
        let key = origin.job_key();
        let Some(pods) = self.jobs.get_mut(&key) else {
            return Vec::new();
        };
        let scope = Scope::of(action);
        let same = |d: &DelayedAction| {
            Scope::of(&d.action) == scope
                && match scope {
                    Scope::Job => true,
                    Scope::Task => d.request.task == origin.task,
                    Scope::Pod => d.request.pod == origin.pod,
                    Scope::Partition => d.request.partition == origin.partition,
                }
        };
        let gone: Vec<String> = pods.iter().filter(|(_, d)| same(d)).map(|(k, _)| k.clone()).collect();
        let out = gone.iter().filter_map(|k| pods.remove(k)).collect();
        if pods.is_empty() {
            self.jobs.remove(&key);
        }
        out
    }

    /// Removes and returns the actions due at `now`, earliest first (ties by job, then pod).
    pub fn due(&mut self, now: Timestamp) -> Vec<DelayedAction> {
        let mut out = Vec::new();
        for pods in self.jobs.values_mut() {
            let ready: Vec<String> = pods.iter().filter(|(_, d)| d.due <= now).map(|(k, _)| k.clone()).collect();
            out.extend(ready.iter().filter_map(|k| pods.remove(k)));
        }
        self.jobs.retain(|_, pods| !pods.is_empty());
        out.sort_by_key(|d| d.due);
        out
    }

    /// When the next action is due, if any (for the shell's timer).
    pub fn next_due(&self) -> Option<Timestamp> {
        self.jobs.values().flat_map(|pods| pods.values()).map(|d| d.due).min()
    }

    /// Forgets a deleted job's delayed actions.
    pub fn forget_job(&mut self, job_key: &str) -> Vec<DelayedAction> {
        self.jobs.remove(job_key).map(|pods| pods.into_values().collect()).unwrap_or_default()
    }

    /// The number of delayed actions.
    pub fn len(&self) -> usize {
        self.jobs.values().map(BTreeMap::len).sum()
    }

    /// Whether no action waits.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}
