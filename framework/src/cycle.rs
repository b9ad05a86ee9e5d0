//! The cycle driver: open a session over a snapshot, run the profile's actions in order,
//! close the session (PodGroup and Queue statuses), and return the ordered effects.
//!
//! `run_cycle` is a pure function of (snapshot, profile, cycle context): it reads no clock,
//! does no IO and draws no random numbers. Observers see the session after every action;
//! [`InvariantChecker`] is the one tests and the simulator use.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volcano_api::crd::{PodGroupCondition, PodGroupPhase, PodGroupStatus};

use volcano_api::names::{event_reason, pod_condition, pod_group_condition, pod_group_reason};

use crate::effect::{Effect, Event, EventKind, EventType, PodScheduledFalse};
use crate::model::*;
use crate::plugin::{CloseOutput, JobVerdict, SessionContext};
use crate::profile::Profile;
use crate::resource::{DimensionDefault, Resource, MIN_RESOURCE};
use crate::session::{Session, SessionOptions};
use crate::snapshot::Snapshot;

/// What a cycle needs besides the snapshot and profile.
#[derive(Clone, Debug)]
pub struct CycleContext {
    /// Cycle number (from 1).
    pub cycle: u64,
    /// The cycle's time, milliseconds since the epoch.
    pub now_ms: i64,
    /// Session tunables.
    pub options: SessionOptions,
}

/// Sees the session around every action.
#[allow(unused_variables)]
pub trait Observer {
    /// Before an action runs.
    fn before_action(&mut self, action: &str, ssn: &Session<'_>) {}
    /// After an action ran.
    fn after_action(&mut self, action: &str, ssn: &Session<'_>) {}
}

/// An observer that does nothing.
pub struct NoObserver;
impl Observer for NoObserver {}

/// What a queue looked like at the end of the session (for status, metrics and reports).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueReport {
    /// Σ requests of the queue's tasks in allocated statuses.
    pub allocated: Resource,
    /// Deserved resources computed by the queue policy plugin, if any.
    pub deserved: Option<Resource>,
    /// Share (max over dims of allocated/deserved), if a policy plugin computed one.
    pub share: Option<f64>,
}

/// The result of one cycle.
#[derive(Clone, Debug, Default)]
pub struct CycleOutcome {
    /// Effects in order: those of the actions, then those of closing the session.
    pub effects: Vec<Effect>,
    /// Queue reports by queue name.
    pub queues: BTreeMap<String, QueueReport>,
    /// Why each job that is not ready is waiting (`namespace/name` → message).
    pub pending_reasons: BTreeMap<String, String>,
}

/// Runs one scheduling cycle.
pub fn run_cycle(snap: Snapshot, profile: &Profile, cx: &CycleContext, observer: &mut dyn Observer) -> CycleOutcome {
    let span = tracing::info_span!("cycle", cycle = cx.cycle);
    let _enter = span.enter();
    let ctx = SessionContext {
        now_ms: cx.now_ms,
        cycle: cx.cycle,
        uid: format!("session-{}", cx.cycle),
        enqueue_enabled: profile.has_action("enqueue"),
    };
    let mut ssn = Session::open(snap, profile, ctx, cx.options.clone());
    for action in &profile.actions {
        let span = tracing::debug_span!("action", action = action.name());
        let _a = span.enter();
        observer.before_action(action.name(), &ssn);
        ssn.current_action = action.name();
        action.execute(&mut ssn);
        ssn.current_action = "";
        observer.after_action(action.name(), &ssn);
    }
    close(ssn)
}

fn same_condition(x: &PodGroupCondition, y: &PodGroupCondition) -> bool {
    x.type_ == y.type_ && x.status == y.status && x.reason == y.reason && x.message == y.message
}

/// Whether merging `new` into `old` (a condition replaces the first one of its type, or is
/// appended) changes the type, status, reason or message of any condition.
fn conditions_change(old: &[PodGroupCondition], new: &[PodGroupCondition]) -> bool {
    new.iter().enumerate().any(|(i, c)| {
        // Only the last new condition of a type stays.
        if new[i + 1..].iter().any(|d| d.type_ == c.type_) {
            return false;
        }
        match old.iter().find(|x| x.type_ == c.type_) {
            Some(x) => !same_condition(x, c),
            None => true,
        }
    })
}

/// A queue followed by its ancestors that are in the snapshot (a queue without
/// `spec.parent` hangs under `root`); stops at a self-parent or after 64 levels.
fn queue_chain(snap: &Snapshot, q: QueueId) -> Vec<QueueId> {
    let mut chain = vec![q];
    let mut name = snap.queue(q).name.as_str();
    while chain.len() < 64 {
        let parent = snap.queue(*chain.last().expect("not empty")).parent.as_deref().unwrap_or("root");
        if parent == name {
            break;
        }
        let Some(p) = snap.queue_id(parent) else { break };
        chain.push(p);
        name = parent;
    }
    chain
}

fn job_phase(job: &JobInfo, snap: &Snapshot, unschedulable_now: bool) -> PodGroupPhase {
    if job.count(TaskStatus::Running) > 0 && unschedulable_now {
        return PodGroupPhase::Unknown;
    }
    let releasing_on_node = if job.count(TaskStatus::Releasing) == 0 {
        0
    } else {
        job.tasks
            .iter()
            .filter(|t| {
                let t = snap.task(**t);
                t.status == TaskStatus::Releasing && t.node.is_some()
            })
            .count() as i32
    };
    let finished = job.count(TaskStatus::Succeeded) + job.count(TaskStatus::Failed);
    let scheduled = job.count(TaskStatus::Running) + job.count(TaskStatus::Bound) + finished + releasing_on_node;
    if scheduled >= job.min_available && scheduled > 0 {
        if finished == scheduled {
            PodGroupPhase::Completed
        } else {
            PodGroupPhase::Running
        }
    } else if job.phase == PodGroupPhase::Inqueue {
        PodGroupPhase::Inqueue
    } else {
        PodGroupPhase::Pending
    }
}

fn close(mut ssn: Session<'_>) -> CycleOutcome {
    let mut out = CloseOutput::default();
    for slot in ssn.tiers.iter_mut().flatten() {
        slot.plugin.on_session_close(&ssn.snap, &ssn.ctx, &mut out);
    }
    let snap = &ssn.snap;
    let now = Time(jiff_from_ms(ssn.ctx.now_ms));
    let mut effects = std::mem::take(&mut ssn.effects);

    // Pipelined tasks keep a nominated node.
    if snap.status_count(TaskStatus::Pipelined) > 0 {
        for t in snap.tasks.iter().filter(|t| t.status == TaskStatus::Pipelined) {
            if let Some(n) = t.node {
                let node: &str = &snap.node(n).name;
                if t.nominated_node.as_deref() != Some(node) {
                    effects.push(Effect::Pipeline { pod: t.object_ref(), node: snap.node(n).name.clone() });
                }
            }
        }
    }

    // PodGroup statuses, written only when they changed. The verdicts on each job, in the
    // order the plugins gave them, become its conditions.
    let mut verdicts = out.job_verdicts;
    verdicts.sort_by_key(|(j, _)| *j);
    let mut verdicts = verdicts.into_iter().peekable();
    let mut mine: Vec<PodGroupCondition> = Vec::new();
    let mut pending_reasons = BTreeMap::new();
    static NO_STATUS: PodGroupStatus =
        PodGroupStatus { phase: None, conditions: Vec::new(), running: 0, succeeded: 0, failed: 0 };
    for (i, job) in snap.jobs.iter().enumerate() {
        let j = JobId(i as u32);
        mine.clear();
        let mut unschedulable: Option<String> = None;
        while let Some((_, verdict)) = verdicts.next_if(|(x, _)| *x == j) {
            match verdict {
                JobVerdict::Ready => mine.push(PodGroupCondition {
                    type_: pod_group_condition::SCHEDULED.into(),
                    status: "True".into(),
                    reason: Some(pod_group_reason::TASKS_READY.into()),
                    message: Some(String::new()),
                    ..Default::default()
                }),
                JobVerdict::Unschedulable { reason, message } => {
                    mine.push(PodGroupCondition {
                        type_: pod_group_condition::UNSCHEDULABLE.into(),
                        status: "True".into(),
                        reason: Some(reason.into()),
                        message: Some(message.clone()),
                        ..Default::default()
                    });
                    unschedulable = Some(message);
                }
            }
        }
        let old = job.pod_group.status.as_ref().unwrap_or(&NO_STATUS);
        let unschedulable_now = unschedulable.is_some();
        if let Some(message) = unschedulable {
            pod_conditions(snap, job, &message, &mut effects);
            pending_reasons.insert(job.key.clone(), message);
        }
        let phase = job_phase(job, snap, unschedulable_now);
        let running = job.count(TaskStatus::Running);
        let succeeded = job.count(TaskStatus::Succeeded);
        let failed = job.count(TaskStatus::Failed);
        let changed = phase != old.phase.unwrap_or_default()
            || running != old.running
            || succeeded != old.succeeded
            || failed != old.failed
            || conditions_change(&old.conditions, &mine);
        if changed {
            let mut status = old.clone();
            for mut c in mine.drain(..) {
                c.transition_id = Some(ssn.ctx.uid.clone());
                c.last_transition_time = Some(now.clone());
                match status.conditions.iter_mut().find(|x| x.type_ == c.type_) {
                    Some(x) => *x = c,
                    None => status.conditions.push(c),
                }
            }
            status.phase = Some(phase);
            status.running = running;
            status.succeeded = succeeded;
            status.failed = failed;
            effects.push(Effect::PodGroupStatus { pod_group: job.object_ref(), status });
        }
    }

    // Queue allocation, rolled up to parents: each job's allocation is added to its queue
    // and to the queue's ancestors (a queue without `spec.parent` hangs under `root`, as in
    // Volcano).
    let chains: Vec<Vec<QueueId>> = (0..snap.queues.len()).map(|q| queue_chain(snap, QueueId(q as u32))).collect();
    let mut allocated = vec![Resource::empty(); snap.queues.len()];
    for job in &snap.jobs {
        for q in &chains[job.queue.idx()] {
            allocated[q.idx()].add(&job.allocated);
        }
    }
    let mut by_queue: Vec<QueueReport> =
        allocated.into_iter().map(|allocated| QueueReport { allocated, ..Default::default() }).collect();
    for (q, report) in out.queue_reports {
        if let Some(r) = by_queue.get_mut(q.idx()) {
            r.deserved = report.deserved;
            r.share = report.share;
        }
    }
    for (q, report) in snap.queues.iter().zip(&by_queue) {
        let old = q
            .queue
            .status
            .as_ref()
            .and_then(|s| s.allocated.as_ref())
            .and_then(|l| Resource::from_list(l).ok())
            .unwrap_or_default();
        if !same_resource(&old, &report.allocated) {
            effects.push(Effect::QueueStatus { queue: q.object_ref(), allocated: report.allocated.to_list() });
        }
    }
    let mut reports: BTreeMap<String, QueueReport> = BTreeMap::new();
    for (q, report) in snap.queues.iter().zip(by_queue) {
        reports.insert(q.name.clone(), report);
    }

    for (j, type_, reason, message) in out.job_events {
        let object = snap.job(j).object_ref();
        effects.push(Effect::Event(Event { kind: EventKind::PodGroup, object, type_, reason, message }));
    }
    CycleOutcome { effects, queues: reports, pending_reasons }
}

/// The `PodScheduled=False` conditions (and `FailedScheduling` events) of the waiting pods
/// of a job that cannot be scheduled now, as Volcano's `TaskSchedulingReason` words them;
/// only for pods whose current condition differs.
fn pod_conditions(snap: &Snapshot, job: &JobInfo, job_message: &str, effects: &mut Vec<Effect>) {
    for t in &job.tasks {
        let task = snap.task(*t);
        if !matches!(task.status, TaskStatus::Pending | TaskStatus::Allocated | TaskStatus::Pipelined) {
            continue;
        }
        let last = match task.status {
            TaskStatus::Pending => task.last_tx,
            status => task.node.map(|n| (status, n)),
        };
        let (reason, message) = match last {
            Some((TaskStatus::Allocated, n)) => (
                pod_condition::SCHEDULABLE,
                format!(
                    "Pod {} can possibly be assigned to {}, once minAvailable is satisfied",
                    task.key,
                    snap.node(n).name
                ),
            ),
            Some((TaskStatus::Pipelined, n)) => (
                pod_condition::UNSCHEDULABLE,
                format!(
                    "Pod {} can possibly be assigned to {}, once resource is released and minAvailable is satisfied",
                    task.key,
                    snap.node(n).name
                ),
            ),
            _ => match job.fit_errors.get(t) {
                Some(fit) => (pod_condition::UNSCHEDULABLE, fit.to_string()),
                None => (pod_condition::UNSCHEDULABLE, job_message.to_string()),
            },
        };
        let current = task
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == pod_condition::POD_SCHEDULED));
        let unchanged = current.is_some_and(|c| {
            c.status == "False" && c.reason.as_deref() == Some(reason) && c.message.as_deref() == Some(message.as_str())
        });
        if unchanged {
            continue;
        }
        let pod = task.object_ref();
        effects.push(Effect::Event(Event {
            kind: EventKind::Pod,
            object: pod.clone(),
            type_: EventType::Warning,
            reason: event_reason::FAILED_SCHEDULING,
            message: message.clone(),
        }));
        effects.push(Effect::PodUnschedulable { pod, condition: PodScheduledFalse { reason, message } });
    }
}

fn same_resource(a: &Resource, b: &Resource) -> bool {
    a.less_equal(b, DimensionDefault::Zero) && b.less_equal(a, DimensionDefault::Zero)
}

fn jiff_from_ms(ms: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// Checks the scheduling invariants after every action and collects violations:
/// no node beyond its allocatable on any resource, every gang committed whole, no queue
/// beyond its capability. Pre-existing overuse (from the input state) is tolerated as
/// long as an action does not make it grow.
#[derive(Default)]
pub struct InvariantChecker {
    baseline_nodes: Vec<Resource>,
    baseline_queues: Vec<Resource>,
    /// Violations found so far, with the action that caused them.
    pub violations: Vec<String>,
}

fn queue_allocated(snap: &Snapshot) -> Vec<Resource> {
    let mut v = vec![Resource::empty(); snap.queues.len()];
    for job in &snap.jobs {
        v[job.queue.idx()].add(&job.allocated);
    }
    v
}

fn node_commitment(n: &NodeInfo) -> Resource {
    // What the node must eventually hold: used − releasing + pipelined.
    let mut r = n.used.clone();
    r.sub_unchecked(&n.releasing).add(&n.pipelined);
    r.set_max(&n.used);
    r
}

fn grew_beyond(now: &Resource, limit: &Resource, before: &Resource) -> Option<String> {
    for (name, v) in now.dims() {
        let lim = limit.get(name);
        if v > lim + MIN_RESOURCE && v > before.get(name) + MIN_RESOURCE {
            return Some(format!("{name}: {v} > {lim}"));
        }
    }
    None
}

impl InvariantChecker {
    fn ensure_baseline(&mut self, snap: &Snapshot) {
        if self.baseline_nodes.len() != snap.nodes.len() {
            self.baseline_nodes = snap.nodes.iter().map(node_commitment).collect();
            self.baseline_queues = queue_allocated(snap);
        }
    }

    /// Checks a session (call after every action).
    pub fn check(&mut self, action: &str, ssn: &Session<'_>) {
        let snap = &ssn.snap;
        self.ensure_baseline(snap);
        for (i, n) in snap.nodes.iter().enumerate() {
            if let Some(d) = grew_beyond(&node_commitment(n), &n.allocatable, &self.baseline_nodes[i]) {
                self.violations.push(format!("after {action}: node {} over allocatable ({d})", n.name));
            }
        }
        for job in &snap.jobs {
            // Placement, not eviction, is checked here: pods evicted in this cycle
            // (Releasing) still count, since whether a gang may lose pods is the victim
            // rules' decision (the gang plugin's preemptable/reclaimable votes).
            let committed = job.count(TaskStatus::Binding);
            let placed = job.ready_task_num() + job.count(TaskStatus::Releasing) + job.pending_best_effort as i32;
            if committed > 0 && placed < job.min_available {
                self.violations.push(format!(
                    "after {action}: job {} committed {committed} pods but only {} of minMember {} are placed",
                    job.key,
                    job.ready_task_num(),
                    job.min_available
                ));
            }
        }
        let now = queue_allocated(snap);
        for (i, q) in snap.queues.iter().enumerate() {
            let Some(cap) = &q.capability else { continue };
            let mut limit = now[i].clone();
            limit.min_dimension(cap, DimensionDefault::Infinity);
            // Only dims present in the capability are limited.
            let mut bounded = Resource::empty();
            for (name, v) in now[i].dims() {
                let has = match name {
                    "cpu" => cap.milli_cpu > 0.0,
                    "memory" => cap.memory > 0.0,
                    n => cap.has_scalar(n),
                };
                if has {
                    bounded.set(name, v);
                }
            }
            if let Some(d) = grew_beyond(&bounded, cap, &self.baseline_queues[i]) {
                self.violations.push(format!("after {action}: queue {} over capability ({d})", q.name));
            }
        }
    }
}

impl Observer for InvariantChecker {
    fn before_action(&mut self, _action: &str, ssn: &Session<'_>) {
        self.ensure_baseline(&ssn.snap);
    }
    fn after_action(&mut self, action: &str, ssn: &Session<'_>) {
        self.check(action, ssn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, message: &str) -> PodGroupCondition {
        PodGroupCondition {
            type_: type_.into(),
            status: status.into(),
            message: Some(message.into()),
            transition_id: Some("an earlier session".into()),
            ..Default::default()
        }
    }

    #[test]
    fn conditions_change_like_a_merge() {
        let old = vec![cond("Scheduled", "True", ""), cond("Unschedulable", "False", "")];
        // The same values (transition fields aside) change nothing.
        assert!(!conditions_change(
            &old,
            &[PodGroupCondition { transition_id: None, ..cond("Scheduled", "True", "") }]
        ));
        assert!(!conditions_change(&old, &[]));
        // A new value, or a new type, does.
        assert!(conditions_change(&old, &[cond("Scheduled", "True", "x")]));
        assert!(conditions_change(&old, &[cond("Ready", "True", "")]));
        // Only the last condition of a type counts.
        assert!(!conditions_change(&old, &[cond("Unschedulable", "True", "a"), cond("Unschedulable", "False", "")]));
        assert!(conditions_change(&old, &[cond("Unschedulable", "False", ""), cond("Unschedulable", "True", "a")]));
    }
}
