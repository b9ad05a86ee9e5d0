//! Closing a session: the plugins' close hooks, then the PodGroup statuses (phase,
//! conditions and counts, from the plugins' [`JobVerdict`]s), the `PodScheduled=False`
//! conditions of the pods of unschedulable jobs, nominated nodes, queue allocations rolled
//! up the hierarchy, and events — each written only when it changed.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volcano_api::crd::{PodGroupCondition, PodGroupPhase, PodGroupStatus};
use volcano_api::names::{event_reason, pod_condition, pod_group_condition, pod_group_reason};

use crate::effect::{Effect, Event, EventKind, EventType, ObjectRef, PodScheduledFalse};
use crate::model::*;
use crate::plugin::{CloseOutput, JobMetric, JobVerdict, QueueReport};
use crate::resource::{DimensionDefault, Resource};
use crate::retry::RetryMemo;
use crate::session::observer::{Observer, PluginStage};
use crate::session::Session;
use crate::snapshot::Snapshot;
use crate::stats::{CycleMetrics, JobMetrics};
use std::sync::Arc;

/// The result of one cycle.
#[derive(Clone, Debug, Default)]
pub struct CycleOutcome {
    /// Effects in order: those of the actions, then those of closing the session.
    pub effects: Vec<Effect>,
    /// Queue reports by queue name.
    pub queues: BTreeMap<String, QueueReport>,
    /// Why each job that is not ready is waiting (`namespace/name` → message).
    pub pending_reasons: BTreeMap<String, String>,
    /// The facts behind the scheduler's metrics.
    pub metrics: CycleMetrics,
    /// The jobs `allocate` tried and could not place while the session was at its opening
    /// state, for the next cycle over the same snapshot ([`crate::Snapshot::keep_retries`],
    /// [`crate::session::retry`]); `None` when some plugin read the clock.
    pub retries: Option<Arc<RetryMemo>>,
}

/// A condition a verdict sets (always with status `True`), kept borrowed-cheap until it
/// has to be written: a settled cluster's ready jobs compare theirs every cycle.
struct NewCondition {
    type_: &'static str,
    reason: &'static str,
    message: String,
}

impl NewCondition {
    fn same_as(&self, x: &PodGroupCondition) -> bool {
        x.type_ == self.type_
            && x.status == "True"
            && x.reason.as_deref() == Some(self.reason)
            && x.message.as_deref() == Some(self.message.as_str())
    }

    fn into_condition(self, transition_id: &str, now: &Time) -> PodGroupCondition {
        PodGroupCondition {
            type_: self.type_.into(),
            status: "True".into(),
            reason: Some(self.reason.into()),
            message: Some(self.message),
            transition_id: Some(transition_id.into()),
            last_transition_time: Some(now.clone()),
        }
    }
}

/// Whether merging `new` into `old` (a condition replaces the first one of its type, or is
/// appended) changes the type, status, reason or message of any condition.
fn conditions_change(old: &[PodGroupCondition], new: &[NewCondition]) -> bool {
    new.iter().enumerate().any(|(i, c)| {
        // Only the last new condition of a type stays.
        if new[i + 1..].iter().any(|d| d.type_ == c.type_) {
            return false;
        }
        match old.iter().find(|x| x.type_ == c.type_) {
            Some(x) => !c.same_as(x),
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
        let parent =
            snap.queue(*chain.last().expect("not empty")).parent.as_deref().unwrap_or(volcano_api::names::ROOT_QUEUE);
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

/// Closes a session and returns the cycle's outcome.
pub(crate) fn close(mut ssn: Session, observer: &mut dyn Observer) -> CycleOutcome {
    let mut out = CloseOutput::default();
    for slot in ssn.tiers.iter_mut().flatten() {
        observer.plugin_started(slot.plugin.name(), PluginStage::Close);
        slot.plugin.on_session_close(&ssn.snap, &ssn.ctx, &mut out);
        observer.plugin_ended(slot.plugin.name(), PluginStage::Close);
    }
    let metrics = cycle_metrics(&ssn, std::mem::take(&mut out.job_metrics), out.unschedulable_jobs);
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
    // The short facts the Unschedulable condition adds to the plugin's message (see
    // [`condition_facts`]); the pods keep the plugin's message.
    let mut unschedulable_jobs: Vec<JobId> =
        verdicts.iter().filter(|(_, v)| matches!(v, JobVerdict::Unschedulable { .. })).map(|(j, _)| *j).collect();
    unschedulable_jobs.dedup();
    let facts = condition_facts(&ssn, &unschedulable_jobs);
    let mut facts = unschedulable_jobs.into_iter().zip(facts).peekable();
    let mut verdicts = verdicts.into_iter().peekable();
    let mut mine: Vec<NewCondition> = Vec::new();
    let mut pending_reasons = BTreeMap::new();
    static NO_STATUS: PodGroupStatus =
        PodGroupStatus { phase: None, conditions: Vec::new(), running: 0, succeeded: 0, failed: 0 };
    for (i, job) in snap.jobs.iter().enumerate() {
        let j = JobId(i as u32);
        mine.clear();
        let mut unschedulable: Option<String> = None;
        while let Some((_, verdict)) = verdicts.next_if(|(x, _)| *x == j) {
            match verdict {
                JobVerdict::Ready => mine.push(NewCondition {
                    type_: pod_group_condition::SCHEDULED,
                    reason: pod_group_reason::TASKS_READY,
                    message: String::new(),
                }),
                JobVerdict::Unschedulable { reason, message } => {
                    mine.push(NewCondition {
                        type_: pod_group_condition::UNSCHEDULABLE,
                        reason,
                        message: message.clone(),
                    });
                    unschedulable = Some(message);
                }
            }
        }
        let mut condition_message = None;
        if let Some((_, extra)) = facts.next_if(|(x, _)| *x == j) {
            if let (Some(message), false) = (&unschedulable, extra.is_empty()) {
                let sep = if message.ends_with('.') { " " } else { ". " };
                let full = format!("{message}{sep}{extra}.");
                if let Some(c) = mine.iter_mut().rev().find(|c| c.type_ == pod_group_condition::UNSCHEDULABLE) {
                    c.message = full.clone();
                }
                condition_message = Some(full);
            }
        }
        let old = job.pod_group.status.as_ref().unwrap_or(&NO_STATUS);
        let unschedulable_now = unschedulable.is_some();
        if let Some(message) = unschedulable {
            pod_conditions(snap, j, &message, &mut effects);
            pending_reasons.insert(job.key.to_string(), condition_message.unwrap_or(message));
        }
        let phase = job_phase(job, snap, unschedulable_now);
        let running = job.count(TaskStatus::Running);
        let succeeded = job.count(TaskStatus::Succeeded);
        let failed = job.count(TaskStatus::Failed);
        // A job whose queue exists again loses the condition that said it did not.
        let queue_found = !unschedulable_now
            && old.conditions.iter().any(|c| c.reason.as_deref() == Some(pod_group_reason::QUEUE_NOT_FOUND));
        let changed = phase != old.phase.unwrap_or_default()
            || running != old.running
            || succeeded != old.succeeded
            || failed != old.failed
            || queue_found
            || conditions_change(&old.conditions, &mine);
        if changed {
            let mut status = old.clone();
            if queue_found {
                status.conditions.retain(|c| c.reason.as_deref() != Some(pod_group_reason::QUEUE_NOT_FOUND));
            }
            for c in mine.drain(..) {
                let c = c.into_condition(&ssn.ctx.uid, &now);
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

    queueless(snap, &ssn.ctx.uid, &now, &mut effects, &mut pending_reasons);

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
            // The allocation rolled up the hierarchy above is the close step's own.
            *r = QueueReport { allocated: std::mem::take(&mut r.allocated), ..report };
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

    // Admission rejections: one event per job, with the last reason of the session.
    let mut rejected = std::mem::take(&mut ssn.admission_rejections);
    rejected.reverse();
    rejected.sort_by_key(|(j, _)| *j);
    rejected.dedup_by_key(|(j, _)| *j);
    let rejected = rejected.into_iter().map(|(j, why)| (j, EventType::Normal, event_reason::UNSCHEDULABLE, why));
    for (j, type_, reason, message) in out.job_events.into_iter().chain(rejected) {
        let object = snap.job(j).object_ref();
        effects.push(Effect::Event(Event { kind: EventKind::PodGroup, object, type_, reason, message }));
    }
    let outcome = CycleOutcome { effects, queues: reports, pending_reasons, metrics, retries: None };
    // Freeing the session (its copy of the snapshot: a reference per task, the chunks it
    // wrote, the plugins' state) is a third of closing a large session; nothing reads
    // it any more, so it is freed on another thread while the caller goes on with the
    // outcome (the binds). Dropping has no effect anyone observes, so the cycle stays a
    // function of its snapshot.
    rayon::spawn(move || drop(ssn));
    outcome
}

/// The cycle's metric facts: the plugins' per-job facts merged per job, and what the
/// actions counted.
fn cycle_metrics(ssn: &Session, mut facts: Vec<(JobId, JobMetric)>, unschedulable_jobs: Option<u64>) -> CycleMetrics {
    let snap = &ssn.snap;
    let stats = &ssn.stats;
    facts.sort_by_key(|(j, _)| *j);
    let mut facts = facts.into_iter().peekable();
    let mut jobs = Vec::with_capacity(snap.jobs.len());
    for (i, job) in snap.jobs.iter().enumerate() {
        let j = JobId(i as u32);
        let mut m = JobMetrics {
            key: job.key.clone(),
            queue: job.queue.idx(),
            creation_ms: job.creation_ms,
            scheduled: stats.scheduled.get(i).copied().unwrap_or(false),
            ..Default::default()
        };
        while let Some((_, fact)) = facts.next_if(|(x, _)| *x == j) {
            match fact {
                JobMetric::Share(s) => m.share = Some(s),
                JobMetric::Unscheduled { tasks, retried } => {
                    m.unscheduled_tasks = Some(tasks);
                    m.retried = retried;
                }
            }
        }
        jobs.push(m);
    }
    CycleMetrics {
        queue_names: snap.queues.iter().map(|q| q.name.clone()).collect(),
        jobs,
        unschedulable_jobs,
        preemption_attempts: stats.preemption_attempts,
        preemption_victims: stats.preemption_victims,
        eviction_transactions: stats.eviction_transactions.clone(),
        skipped_tries: ssn.retries.skipped,
        hyper_nodes: hyper_node_use(snap),
        topology_waiting: topology_waiting(snap),
    }
}

/// The use of every real HyperNode.
fn hyper_node_use(snap: &crate::Snapshot) -> Vec<crate::stats::HyperNodeUse> {
    let topo = snap.topology();
    let top = topo.top();
    topo.hyper_nodes()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != top.idx())
        .map(|(_, h)| {
            let mut u = crate::stats::HyperNodeUse { name: h.name.clone(), tier: h.tier, ..Default::default() };
            for n in &h.nodes {
                let node = snap.node(*n);
                u.allocatable.add(&node.allocatable);
                u.used.add(&node.used);
            }
            u
        })
        .collect()
}

/// Admitted jobs with a network topology constraint that are not ready, by (mode, tier).
fn topology_waiting(snap: &crate::Snapshot) -> std::collections::BTreeMap<(&'static str, u32), u64> {
    let mut out = std::collections::BTreeMap::new();
    for job in snap.jobs.iter() {
        let Some(nt) = job.pod_group.spec.network_topology.as_ref() else { continue };
        if job.is_pending() || job.is_ready() {
            continue;
        }
        let hard = nt.mode.as_deref().is_none_or(|m| m == "hard");
        let tier = match (nt.highest_tier_allowed, nt.highest_tier_name.as_deref()) {
            (Some(t), _) => u32::try_from(t).unwrap_or(0),
            (None, Some(name)) => snap.topology().tier_named(name).unwrap_or(0),
            (None, None) => 0,
        };
        let key = if hard && tier > 0 { ("hard", tier) } else { ("soft", 0) };
        *out.entry(key).or_default() += 1;
    }
    out
}

/// What closing says about the PodGroups whose queue does not exist (a queue deleted under
/// its jobs, a PodGroup naming a queue never created): nothing of theirs is scheduled, so
/// each one that has not finished gets the `Unschedulable` condition `QueueNotFound` and,
/// when that condition is new, a `Warning` event; their waiting pods get `PodScheduled=False`
/// with the same message. Written once: the condition, once on the PodGroup, stops both.
fn queueless(
    snap: &Snapshot,
    transition_id: &str,
    now: &Time,
    effects: &mut Vec<Effect>,
    pending_reasons: &mut BTreeMap<String, String>,
) {
    let groups = snap.queueless_pod_groups();
    if groups.is_empty() {
        return;
    }
    let mut messages: BTreeMap<&str, Arc<str>> = BTreeMap::new();
    for (key, group) in groups {
        let pg = &group.pod_group;
        let old = pg.status.as_ref();
        if old.and_then(|s| s.phase) == Some(PodGroupPhase::Completed) {
            continue;
        }
        let message = group.message();
        pending_reasons.insert(key.to_string(), message.clone());
        messages.insert(key, message.as_str().into());
        let condition = NewCondition {
            type_: pod_group_condition::UNSCHEDULABLE,
            reason: pod_group_reason::QUEUE_NOT_FOUND,
            message,
        };
        let conditions = old.map(|s| s.conditions.as_slice()).unwrap_or_default();
        if !conditions_change(conditions, std::slice::from_ref(&condition)) {
            continue;
        }
        let object = ObjectRef::of(&pg.metadata);
        let event = Event {
            kind: EventKind::PodGroup,
            object: object.clone(),
            type_: EventType::Warning,
            reason: event_reason::QUEUE_NOT_FOUND,
            message: condition.message.clone(),
        };
        let mut status = old.cloned().unwrap_or_default();
        let c = condition.into_condition(transition_id, now);
        match status.conditions.iter_mut().find(|x| x.type_ == c.type_) {
            Some(x) => *x = c,
            None => status.conditions.push(c),
        }
        effects.push(Effect::PodGroupStatus { pod_group: object, status });
        effects.push(Effect::Event(event));
    }
    // Their pods that wait for a node (a pod on a node runs on).
    for pod in snap.pods_awaiting_group().values() {
        if pod.node_name().is_some() {
            continue;
        }
        let Some(message) = crate::snapshot::group_key(pod).and_then(|g| messages.get(g.as_str())) else { continue };
        let condition = PodScheduledFalse { reason: pod_condition::UNSCHEDULABLE, message: message.clone() };
        if !condition.is_on(pod) {
            effects.push(Effect::PodUnschedulable { pod: ObjectRef::of(&pod.metadata), condition });
        }
    }
}

/// The `PodScheduled=False` conditions of the waiting pods
/// of a job that cannot be scheduled now, as Volcano's `TaskSchedulingReason` words them;
/// only for pods whose current condition differs.
fn pod_conditions(snap: &Snapshot, j: JobId, job_message: &str, effects: &mut Vec<Effect>) {
    let job = snap.job(j);
    let fit_errors = snap.fit_errors(j);
    // One shared text for the pods that wait for the job's reason.
    let mut shared: Option<Arc<str>> = None;
    for t in &job.tasks {
        let task = snap.task(*t);
        if !matches!(task.status, TaskStatus::Pending | TaskStatus::Allocated | TaskStatus::Pipelined) {
            continue;
        }
        let last = match task.status {
            TaskStatus::Pending => snap.last_tx(*t),
            status => task.node.map(|n| (status, n)),
        };
        let (reason, message): (&'static str, Arc<str>) = match last {
            Some((TaskStatus::Allocated, n)) => (
                pod_condition::SCHEDULABLE,
                format!(
                    "Pod {} can possibly be assigned to {}, once minAvailable is satisfied",
                    task.key,
                    snap.node(n).name
                )
                .into(),
            ),
            Some((TaskStatus::Pipelined, n)) => (
                pod_condition::UNSCHEDULABLE,
                format!(
                    "Pod {} can possibly be assigned to {}, once resource is released and minAvailable is satisfied",
                    task.key,
                    snap.node(n).name
                )
                .into(),
            ),
            _ => match fit_errors.get(t) {
                Some(fit) => (pod_condition::UNSCHEDULABLE, fit.to_string().into()),
                None => (pod_condition::UNSCHEDULABLE, shared.get_or_insert_with(|| job_message.into()).clone()),
            },
        };
        let condition = PodScheduledFalse { reason, message };
        if !condition.is_on(&task.pod) {
            effects.push(Effect::PodUnschedulable { pod: task.object_ref(), condition });
        }
    }
}

fn same_resource(a: &Resource, b: &Resource) -> bool {
    a.less_equal(b, DimensionDefault::Zero) && b.less_equal(a, DimensionDefault::Zero)
}

fn jiff_from_ms(ms: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// The short facts the PodGroup `Unschedulable` condition message carries after Volcano's
/// text, for each of `jobs` (in that order; an empty string when there is nothing to add):
///
/// - how many jobs of a higher priority, ordered before it in its queue, still wait there
///   (only when the job order puts them first; jobs of one priority add nothing);
/// - what `preempt` and `reclaim` concluded for it in this cycle, when either is configured:
///   pods evicted for it, no victims that make room, its queue overused, or not starving.
///
/// Every fact depends on the job, its queue's waiting jobs and this cycle's evictions, not
/// on counts that move every cycle, so the condition (and its status write) changes only when
/// the answer does. Cost: one sort of each queue's waiting jobs when priorities differ, and
/// one pass over the recorded tries.
fn condition_facts(ssn: &Session, jobs: &[JobId]) -> Vec<String> {
    let snap = &ssn.snap;
    let waiting = |j: JobId| {
        let job = snap.job(j);
        !job.is_ready() && job.count(TaskStatus::Pending) > 0
    };
    // Higher-priority waiting jobs ahead, per job asked about.
    let mut ahead: BTreeMap<JobId, u32> = BTreeMap::new();
    let mut by_queue: BTreeMap<usize, Vec<JobId>> = BTreeMap::new();
    for i in 0..snap.jobs.len() as u32 {
        let j = JobId(i);
        if waiting(j) {
            by_queue.entry(snap.job(j).queue.idx()).or_default().push(j);
        }
    }
    let asked: std::collections::BTreeSet<JobId> = jobs.iter().copied().collect();
    for queue_jobs in by_queue.values_mut() {
        let first = snap.job(queue_jobs[0]).priority;
        if queue_jobs.iter().all(|j| snap.job(*j).priority == first) || !queue_jobs.iter().any(|j| asked.contains(j)) {
            continue;
        }
        queue_jobs.sort_by(|a, b| ssn.job_order(*a, *b));
        // Priorities seen so far (before in job order), with counts.
        let mut seen: BTreeMap<i32, u32> = BTreeMap::new();
        for &j in queue_jobs.iter() {
            let p = snap.job(j).priority;
            if asked.contains(&j) {
                let n: u32 = seen.range(p.saturating_add(1)..).map(|(_, n)| *n).sum();
                if n > 0 {
                    ahead.insert(j, n);
                }
            }
            *seen.entry(p).or_default() += 1;
        }
    }
    // The evicting actions' last word on each job.
    let evicting: Vec<&str> = ssn
        .stats
        .actions
        .iter()
        .copied()
        .filter(|a| matches!(*a, "preempt" | "reclaim" | "gangpreempt" | "gangreclaim"))
        .collect();
    let mut tries: BTreeMap<JobId, Vec<(&str, crate::session::EvictionTry)>> = BTreeMap::new();
    for (action, j, outcome) in &ssn.stats.eviction_tries {
        if asked.contains(j) {
            tries.entry(*j).or_default().push((action, *outcome));
        }
    }
    jobs.iter()
        .map(|&j| {
            let job = snap.job(j);
            let mut facts: Vec<String> = Vec::new();
            if let Some(n) = ahead.get(&j) {
                let s = if *n == 1 { "" } else { "s" };
                facts.push(format!(
                    "{n} waiting job{s} of higher priority ahead in queue {}",
                    snap.queue(job.queue).name
                ));
            }
            if !evicting.is_empty() && !job.is_pending() && job.count(TaskStatus::Pending) > 0 {
                use crate::session::EvictionTry::*;
                let never = job.tasks.iter().all(|t| {
                    let task = snap.task(*t);
                    task.status != TaskStatus::Pending || task.preemption_never
                });
                match tries.get(&j) {
                    Some(_) if never => facts.push("its pods' preemptionPolicy is Never, so they evict nothing".into()),
                    Some(list) => {
                        for (action, outcome) in list {
                            facts.push(match outcome {
                                Committed => format!("{action}: room made for it, pipelined"),
                                NoCandidates if matches!(*action, "preempt" | "gangpreempt") => {
                                    format!("{action}: no running preemptable pod in its queue to evict")
                                }
                                NoCandidates => {
                                    format!("{action}: no running preemptable pod in other reclaimable queues to evict")
                                }
                                NoRoom => format!("{action}: no room from the victims the plugins allow"),
                                QueueLimit => format!(
                                    "{action}: queue {} may reclaim no more (its deserved share or capability)",
                                    snap.queue(job.queue).name
                                ),
                                QueueOverused => format!("{action}: queue {} is overused", snap.queue(job.queue).name),
                            });
                        }
                    }
                    None if !ssn.job_starving(j) => {
                        facts.push(format!("not starving, so no {}", evicting.join(" or ")));
                    }
                    None => {}
                }
            }
            facts.join(". ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str, message: &str) -> PodGroupCondition {
        PodGroupCondition {
            type_: type_.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            transition_id: Some("an earlier session".into()),
            ..Default::default()
        }
    }

    fn new(type_: &'static str, reason: &'static str, message: &str) -> NewCondition {
        NewCondition { type_, reason, message: message.into() }
    }

    #[test]
    fn conditions_change_like_a_merge() {
        let old = vec![cond("Scheduled", "True", "tasks ready", ""), cond("Unschedulable", "True", "not enough", "a")];
        // The same values (transition fields aside) change nothing.
        assert!(!conditions_change(&old, &[new("Scheduled", "tasks ready", "")]));
        assert!(!conditions_change(&old, &[]));
        // A new message, reason or type does, and so does a status that was not True.
        assert!(conditions_change(&old, &[new("Scheduled", "tasks ready", "x")]));
        assert!(conditions_change(&old, &[new("Scheduled", "other", "")]));
        assert!(conditions_change(&old, &[new("Ready", "tasks ready", "")]));
        let was_false = vec![cond("Scheduled", "False", "tasks ready", "")];
        assert!(conditions_change(&was_false, &[new("Scheduled", "tasks ready", "")]));
        // Only the last condition of a type counts.
        assert!(!conditions_change(
            &old,
            &[new("Unschedulable", "other", "b"), new("Unschedulable", "not enough", "a")]
        ));
        assert!(conditions_change(
            &old,
            &[new("Unschedulable", "not enough", "a"), new("Unschedulable", "other", "b")]
        ));
    }

    #[test]
    fn a_new_condition_is_written_whole() {
        let now = Time(jiff_from_ms(1_000));
        let c = new("Unschedulable", "not enough", "why").into_condition("session-1", &now);
        assert_eq!(c.type_, "Unschedulable");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("not enough"));
        assert_eq!(c.message.as_deref(), Some("why"));
        assert_eq!(c.transition_id.as_deref(), Some("session-1"));
        assert_eq!(c.last_transition_time, Some(now));
    }
}
