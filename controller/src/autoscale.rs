//! The elastic autoscaler: grows the tasks of elastic Volcano Jobs into capacity the
//! scheduler leaves idle, and shrinks them before a waiting gang would have to preempt or
//! reclaim them. A pure function of the scheduler's view, with time as an argument; the
//! controller (`crate::run`) and the simulator apply what it decides by changing the job's
//! `replicas`, as a user would, so every resize goes through the admission rules and the safe
//! order of [`crate::scale`] (new pods Ready before they join the host lists; hosts out of
//! the lists a grace period before their pods go).
//!
//! A job takes part when it has the annotation `volcano.sh/autoscale` (`worker=2..8`:
//! [`volcano_api::job::autoscale_bounds`]); its state is kept in `volcano.sh/autoscale-state`
//! on the job, written with each resize. The autoscaler never counts the cluster's nodes
//! itself; it reads what the scheduler wrote:
//!
//! - **a waiting gang** is a PodGroup in phase `Pending` or `Inqueue` whose `Unschedulable`
//!   condition is `True` (allocate tried it and it did not fit), or still `Pending` a few
//!   seconds after its creation (enqueue did not admit it);
//! - **idle capacity** is what the scheduler binds: a grow adds pods, and the scheduler binds
//!   them only where they fit and within the queue's share (proportion's and capacity's
//!   `allocatable`); pods it has not bound by the probe time are given back.
//!
//! One pass, per job in key order:
//! 1. a grow being probed ends: every added pod bound → done (the back-off resets); else the
//!    task goes back to the pods that are bound (never below its minimum), and the next grow
//!    waits twice as long as the last (up to [`Settings::max_backoff_ms`]);
//! 2. **shrink** for the waiting gangs that may take from the job: those of its own queue,
//!    and those of other queues when its queue is reclaimable. Each gang needs its
//!    `minResources`; pods already leaving (beyond the replicas, in their grace period) count
//!    as freed. The jobs give pods in order (lowest priority, then the most recently
//!    resized), each down to its minimum, until the gang's need is covered in the scarcest
//!    resource both request (the extended resources they share, else cpu and memory);
//! 3. **grow** a job with no such gang waiting, its PodGroup `Running`, every pod bound and
//!    none leaving, once its cooldown (or back-off) has passed: each task below its maximum
//!    doubles (at least one more pod), up to the maximum.
//!
//! Hysteresis: a job grows at most once per [`Settings::cooldown_ms`] after its last resize
//! and gives pods to waiting gangs at most once per cooldown (but a shrink after a grow does
//! not wait: the gang is waiting), and a failed grow backs off.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use volcano_api::crd::{PodGroup, PodGroupPhase, Queue};
use volcano_api::job::{autoscale_bounds, AutoscaleBounds, Job, AUTOSCALE_STATE_ANNOTATION};
use volcano_api::names::DEFAULT_QUEUE;

use crate::events::task_of;
use crate::plan::PodParts;

/// The default time between two resizes of one job.
pub const DEFAULT_COOLDOWN_SECONDS: i64 = 60;
/// The default time the scheduler has to bind a grow's pods.
pub const DEFAULT_PROBE_SECONDS: i64 = 60;
/// The default longest wait after failed grows.
pub const DEFAULT_MAX_BACKOFF_SECONDS: i64 = 1800;
/// The default age from which a PodGroup still `Pending` counts as waiting.
pub const DEFAULT_PENDING_SECONDS: i64 = 5;

/// The autoscaler's waits, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Least time between two resizes of one job (but for a shrink for a waiting gang).
    pub cooldown_ms: i64,
    /// Time the scheduler has to bind the pods a grow added.
    pub probe_ms: i64,
    /// Longest wait before the next grow after failed ones.
    pub max_backoff_ms: i64,
    /// Age from which a PodGroup still `Pending` (not admitted by the scheduler's `enqueue`)
    /// counts as waiting.
    pub pending_ms: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cooldown_ms: DEFAULT_COOLDOWN_SECONDS * 1000,
            probe_ms: DEFAULT_PROBE_SECONDS * 1000,
            max_backoff_ms: DEFAULT_MAX_BACKOFF_SECONDS * 1000,
            pending_ms: DEFAULT_PENDING_SECONDS * 1000,
        }
    }
}

/// What the autoscaler remembers of a job (the JSON of `volcano.sh/autoscale-state`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// When the job was last resized (ms since the epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_resize_ms: Option<i64>,
    /// A grow being probed: when it is judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_until_ms: Option<i64>,
    /// The wait after the last failed grow (0 after a grow that succeeded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backoff_ms: i64,
    /// No grow before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_grow_ms: Option<i64>,
    /// When the job last gave pods to a waiting gang: it gives again only a cooldown later
    /// (the pods it gave may still be leaving, or just gone while the gang's status still
    /// says it waits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_yield_ms: Option<i64>,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

impl State {
    /// The state written on `job` (default when absent or unreadable: a state the autoscaler
    /// cannot read is started again, never an error that stops the job).
    pub fn of(job: &Job) -> State {
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(AUTOSCALE_STATE_ANNOTATION))
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default()
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("the state serialises")
    }
}

/// Why a job is resized.
#[derive(Clone, Debug, PartialEq)]
pub enum Reason {
    /// Every pod bound, no gang waiting that may take from it: grow into idle capacity.
    Grow,
    /// The scheduler did not bind every pod of the last grow by the probe time.
    Revert {
        /// Pods of the task bound.
        bound: i32,
        /// Replicas the grow asked for.
        asked: i32,
        /// The wait before the next grow, in ms.
        backoff_ms: i64,
    },
    /// A gang waits that may take from this job.
    Yield {
        /// `namespace/name` of the waiting PodGroup.
        gang: String,
        /// Its queue.
        queue: String,
        /// What it needs that this resize frees, e.g. `nvidia.com/gpu 2`.
        frees: String,
    },
}

impl Reason {
    /// The Event reason.
    pub fn event_reason(&self) -> &'static str {
        match self {
            Reason::Grow => "AutoscaleOut",
            Reason::Revert { .. } => "AutoscaleReverted",
            Reason::Yield { .. } => "AutoscaleIn",
        }
    }
}

/// One task's resize.
#[derive(Clone, Debug, PartialEq)]
pub struct Resize {
    /// `namespace/name` of the job.
    pub job: String,
    /// The task.
    pub task: String,
    /// Its index in `spec.tasks`.
    pub task_index: usize,
    /// Replicas now.
    pub from: i32,
    /// Replicas to set.
    pub to: i32,
    /// Why.
    pub reason: Reason,
}

impl Resize {
    /// The Event message.
    pub fn message(&self) -> String {
        let (task, from, to) = (&self.task, self.from, self.to);
        match &self.reason {
            Reason::Grow => format!(
                "task {task}: {from} → {to} replicas: every pod is bound and no gang that may take from this job is waiting"
            ),
            Reason::Revert { bound, asked, backoff_ms } => format!(
                "task {task}: {from} → {to} replicas: the scheduler bound {bound} of the {asked} pods asked for; \
                 the next grow waits {}s",
                backoff_ms / 1000
            ),
            Reason::Yield { gang, queue, frees } => format!(
                "task {task}: {from} → {to} replicas, for the gang {gang} waiting in queue {queue} (frees {frees})"
            ),
        }
    }
}

/// What one pass decided for one job: its resizes and its next state.
#[derive(Clone, Debug, PartialEq)]
pub struct JobDecision {
    /// `namespace/name` of the job.
    pub job: String,
    /// The resizes, by task.
    pub resizes: Vec<Resize>,
    /// The state to write.
    pub state: State,
}

/// An autoscaled job as the autoscaler sees it.
struct Elastic<'a> {
    key: String,
    job: &'a Job,
    bounds: Vec<AutoscaleBounds>,
    state: State,
    queue: String,
    priority: i32,
    running: bool,
    /// Per task: (bound pods with an index below the replicas, pods with an index below
    /// the replicas, pods at or beyond the replicas (leaving)).
    pods: BTreeMap<String, TaskPods>,
    /// Per task, one pod's request (resource → value, cpu in cores, memory in bytes).
    request: BTreeMap<String, BTreeMap<String, f64>>,
}

impl Elastic<'_> {
    fn resize(&self, b: &AutoscaleBounds, from: i32, to: i32, reason: Reason) -> Resize {
        Resize { job: self.key.clone(), task: b.task.clone(), task_index: b.task_index, from, to, reason }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct TaskPods {
    bound: i32,
    existing: i32,
    leaving: i32,
}

/// The scheduler's view the autoscaler reads.
pub struct View<'a> {
    /// Every Volcano Job (only the ones with `volcano.sh/autoscale` are resized).
    pub jobs: Vec<&'a Job>,
    /// Every PodGroup.
    pub pod_groups: Vec<&'a PodGroup>,
    /// Every Queue.
    pub queues: Vec<&'a Queue>,
    /// The pods of the autoscaled jobs, by job key (`namespace/name`).
    pub pods: BTreeMap<String, Vec<PodParts<'a>>>,
    /// PriorityClass values by name.
    pub priority_classes: &'a BTreeMap<String, i32>,
}

/// The job key (`namespace/name`).
pub fn job_key(job: &Job) -> String {
    format!(
        "{}/{}",
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Whether the job asks for the autoscaler.
pub fn wants_autoscale(job: &Job) -> bool {
    job.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(volcano_api::job::AUTOSCALE_ANNOTATION))
}

/// A waiting gang.
struct Gang {
    key: String,
    queue: String,
    /// Its job, when a Volcano Job owns it.
    job: Option<String>,
    need: BTreeMap<String, f64>,
}

/// One pass of the autoscaler over `view` at `now_ms` (see the module documentation). Jobs
/// whose annotation cannot be read are skipped (the webhook refuses such annotations).
pub fn decide(view: &View<'_>, now_ms: i64, settings: Settings) -> Vec<JobDecision> {
    let reclaimable: BTreeMap<&str, bool> = view
        .queues
        .iter()
        .map(|q| (q.metadata.name.as_deref().unwrap_or_default(), q.spec.reclaimable != Some(false)))
        .collect();
    // PodGroups by the uid of the Job that owns them, built once (not a scan per job).
    let by_owner: std::collections::HashMap<&str, &PodGroup> = view
        .pod_groups
        .iter()
        .flat_map(|g| g.metadata.owner_references.iter().flatten().map(move |o| (o.uid.as_str(), *g)))
        .collect();
    let mut elastic: Vec<Elastic<'_>> = view.jobs.iter().filter_map(|j| elastic(j, view, &by_owner)).collect();
    elastic.sort_by(|a, b| a.key.cmp(&b.key));
    let gangs = waiting_gangs(&view.pod_groups, &view.queues, now_ms, settings.pending_ms);
    let may_take = |gang: &Gang, e: &Elastic<'_>| {
        gang.job.as_deref() != Some(e.key.as_str())
            && (gang.queue == e.queue || reclaimable.get(e.queue.as_str()).copied().unwrap_or(true))
    };

    let mut out: BTreeMap<String, JobDecision> = BTreeMap::new();
    let decision = |out: &BTreeMap<String, JobDecision>, e: &Elastic<'_>| {
        out.get(&e.key).cloned().unwrap_or_else(|| JobDecision {
            job: e.key.clone(),
            resizes: vec![],
            state: e.state.clone(),
        })
    };
    let mut replicas: BTreeMap<(String, usize), i32> = BTreeMap::new();
    for e in &elastic {
        for b in &e.bounds {
            replicas.insert((e.key.clone(), b.task_index), e.job.spec.tasks[b.task_index].replicas);
        }
    }

    // 1. Probes that end.
    for e in &elastic {
        let Some(until) = e.state.probe_until_ms else { continue };
        let all_bound = e.bounds.iter().all(|b| {
            let p = e.pods.get(&b.task).copied().unwrap_or_default();
            p.bound >= e.job.spec.tasks[b.task_index].replicas
        });
        let mut d = decision(&out, e);
        if all_bound {
            d.state.probe_until_ms = None;
            d.state.backoff_ms = 0;
        } else if now_ms >= until {
            let backoff = if e.state.backoff_ms == 0 { settings.cooldown_ms } else { e.state.backoff_ms * 2 }
                .clamp(1, settings.max_backoff_ms.max(1));
            d.state.probe_until_ms = None;
            d.state.backoff_ms = backoff;
            d.state.next_grow_ms = Some(now_ms + backoff);
            for b in &e.bounds {
                let now = e.job.spec.tasks[b.task_index].replicas;
                let bound = e.pods.get(&b.task).map_or(0, |p| p.bound);
                let to = bound.max(b.min).min(now);
                if to < now {
                    d.state.last_resize_ms = Some(now_ms);
                    replicas.insert((e.key.clone(), b.task_index), to);
                    d.resizes.push(e.resize(b, now, to, Reason::Revert { bound, asked: now, backoff_ms: backoff }));
                }
            }
        }
        out.insert(e.key.clone(), d);
    }

    // 2. Shrink for the waiting gangs.
    let mut yielded: BTreeSet<String> = BTreeSet::new();
    for gang in &gangs {
        if gang.need.is_empty() {
            continue;
        }
        let mut donors: Vec<&Elastic<'_>> = elastic
            .iter()
            .filter(|e| may_take(gang, e))
            .filter(|e| {
                let s = out.get(&e.key).map_or(&e.state, |d| &d.state);
                s.last_yield_ms.is_none_or(|t| now_ms >= t + settings.cooldown_ms) || yielded.contains(&e.key)
            })
            .collect();
        donors.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then_with(|| {
                    b.state.last_resize_ms.unwrap_or(i64::MIN).cmp(&a.state.last_resize_ms.unwrap_or(i64::MIN))
                })
                .then_with(|| a.key.cmp(&b.key))
        });
        // Pods already leaving (beyond the replicas) free their resources soon.
        let mut need = gang.need.clone();
        for e in &donors {
            for b in &e.bounds {
                let leaving = e.pods.get(&b.task).map_or(0, |p| p.leaving);
                if let Some(req) = e.request.get(&b.task) {
                    subtract(&mut need, req, leaving);
                }
            }
        }
        for e in donors {
            for b in &e.bounds {
                let Some(req) = e.request.get(&b.task) else { continue };
                let Some(pods) = pods_to_cover(&need, req) else { continue };
                let now = replicas[&(e.key.clone(), b.task_index)];
                let give = pods.min(now - b.min);
                if give <= 0 {
                    continue;
                }
                let frees = describe(&need, req, give);
                subtract(&mut need, req, give);
                replicas.insert((e.key.clone(), b.task_index), now - give);
                let mut d = decision(&out, e);
                d.state.last_resize_ms = Some(now_ms);
                d.state.last_yield_ms = Some(now_ms);
                d.state.probe_until_ms = None;
                d.state.next_grow_ms = Some(now_ms + settings.cooldown_ms);
                d.resizes.retain(|r| r.task_index != b.task_index);
                let from = e.job.spec.tasks[b.task_index].replicas;
                let reason = Reason::Yield { gang: gang.key.clone(), queue: gang.queue.clone(), frees };
                d.resizes.push(e.resize(b, from, now - give, reason));
                out.insert(e.key.clone(), d);
                yielded.insert(e.key.clone());
            }
            if !still_needed(&need) {
                break;
            }
        }
    }

    // 3. Grow.
    for e in &elastic {
        if yielded.contains(&e.key) || !e.running || gangs.iter().any(|g| may_take(g, e)) {
            continue;
        }
        let d0 = out.get(&e.key).cloned();
        let state = d0.as_ref().map_or(&e.state, |d| &d.state);
        if state.probe_until_ms.is_some() || d0.as_ref().is_some_and(|d| !d.resizes.is_empty()) {
            continue;
        }
        let after_cooldown = state.last_resize_ms.is_none_or(|t| now_ms >= t + settings.cooldown_ms);
        let after_backoff = state.next_grow_ms.is_none_or(|t| now_ms >= t);
        let settled = e.bounds.iter().all(|b| {
            let p = e.pods.get(&b.task).copied().unwrap_or_default();
            let r = e.job.spec.tasks[b.task_index].replicas;
            p.bound >= r && p.existing >= r && p.leaving == 0
        });
        if !(after_cooldown && after_backoff && settled) {
            continue;
        }
        let mut d = d0.unwrap_or_else(|| JobDecision { job: e.key.clone(), resizes: vec![], state: e.state.clone() });
        for b in &e.bounds {
            let now = e.job.spec.tasks[b.task_index].replicas;
            let to = (now * 2).max(now + 1).min(b.max);
            if to > now {
                d.resizes.push(e.resize(b, now, to, Reason::Grow));
            }
        }
        if !d.resizes.is_empty() {
            d.state.last_resize_ms = Some(now_ms);
            d.state.probe_until_ms = Some(now_ms + settings.probe_ms);
            d.state.next_grow_ms = None;
            out.insert(e.key.clone(), d);
        }
    }
    out.into_values().filter(|d| !d.resizes.is_empty() || d.state != State::of_key(&elastic, &d.job)).collect()
}

impl State {
    fn of_key(elastic: &[Elastic<'_>], key: &str) -> State {
        elastic.iter().find(|e| e.key == key).map(|e| e.state.clone()).unwrap_or_default()
    }
}

fn elastic<'a>(
    job: &'a Job,
    view: &View<'a>,
    by_owner: &std::collections::HashMap<&str, &PodGroup>,
) -> Option<Elastic<'a>> {
    if !wants_autoscale(job) || job.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let bounds = autoscale_bounds(job).ok()?;
    if bounds.is_empty() {
        return None;
    }
    let key = job_key(job);
    let phase = job.status.as_ref().and_then(|s| s.state.phase.clone());
    if !matches!(phase, Some(volcano_api::job::JobPhase::Running)) {
        // Only a running job is resized: a pending one is still a gang, a finished one is done.
        return None;
    }
    let ns = job.metadata.namespace.as_deref().unwrap_or_default();
    let group = job
        .metadata
        .uid
        .as_deref()
        .and_then(|uid| by_owner.get(uid))
        .filter(|g| g.metadata.namespace.as_deref() == Some(ns));
    let running = group.is_some_and(|g| g.status.as_ref().and_then(|s| s.phase) == Some(PodGroupPhase::Running));
    let mut pods: BTreeMap<String, TaskPods> = BTreeMap::new();
    for p in view.pods.get(&key).into_iter().flatten() {
        let Some(task) = task_of(p.metadata) else { continue };
        let Some(t) = job.spec.tasks.iter().find(|t| t.name() == task) else { continue };
        let index = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::plan::TASK_INDEX_KEY))
            .and_then(|i| i.parse::<i32>().ok());
        let Some(index) = index else { continue };
        let entry = pods.entry(task.to_string()).or_default();
        let phase = p.status.and_then(|s| s.phase.as_deref()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        if index >= t.replicas || p.metadata.deletion_timestamp.is_some() {
            entry.leaving += 1;
        } else {
            entry.existing += 1;
            if p.node_name.is_some() {
                entry.bound += 1;
            }
        }
    }
    let request = bounds.iter().map(|b| (b.task.clone(), template_request(&job.spec.tasks[b.task_index]))).collect();
    let priority =
        job.spec.priority_class_name.as_deref().and_then(|n| view.priority_classes.get(n).copied()).unwrap_or(0);
    Some(Elastic {
        key,
        job,
        bounds,
        state: State::of(job),
        queue: job.spec.queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.to_string()),
        priority,
        running,
        pods,
        request,
    })
}

/// The gangs the scheduler tried and could not place, in key order: `Pending` or `Inqueue`
/// with an `Unschedulable` condition (allocate failed them), or still `Pending` at least
/// `pending_ms` after their creation (enqueue has not admitted them; Volcano writes no
/// condition on a PodGroup without pods, and a Volcano Job's pods are made once it is
/// admitted). But not those of a queue that is not Open, nor those that wait for their own
/// queue (its `status.allocated` and the gang's `minResources` above its `spec.capability`):
/// freeing capacity elsewhere does not help them.
fn waiting_gangs(groups: &[&PodGroup], queues: &[&Queue], now_ms: i64, pending_ms: i64) -> Vec<Gang> {
    let mut out: Vec<Gang> = groups
        .iter()
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .filter_map(|g| {
            // A PodGroup the scheduler has not written yet is Pending.
            let phase = g.status.as_ref().and_then(|s| s.phase).unwrap_or(PodGroupPhase::Pending);
            if !matches!(phase, PodGroupPhase::Pending | PodGroupPhase::Inqueue) {
                return None;
            }
            let tried = g
                .status
                .iter()
                .flat_map(|s| &s.conditions)
                .any(|c| c.type_ == volcano_api::names::pod_group_condition::UNSCHEDULABLE && c.status == "True");
            let created = g.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond());
            let held = phase == PodGroupPhase::Pending && created.is_some_and(|c| now_ms - c >= pending_ms);
            if !(tried || held) {
                return None;
            }
            let ns = g.metadata.namespace.as_deref().unwrap_or_default();
            let job = g.metadata.owner_references.as_ref().and_then(|o| {
                o.iter()
                    .find(|o| o.kind == "Job" && o.api_version.starts_with("batch.volcano.sh/"))
                    .map(|o| format!("{ns}/{}", o.name))
            });
            let need = g
                .spec
                .min_resources
                .iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), quantity(&v.0)?)))
                .filter(|(k, v)| *v > 0.0 && k != "pods" && !k.starts_with("count/"))
                .map(|(k, v)| (k.strip_prefix("requests.").unwrap_or(&k).to_string(), v))
                .collect();
            let queue = g.spec.queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.to_string());
            let q = queues.iter().find(|q| q.metadata.name.as_deref() == Some(queue.as_str()));
            let open = |q: &Queue| {
                q.status.as_ref().and_then(|s| s.state).is_none_or(|s| s == volcano_api::crd::QueueState::Open)
            };
            if q.is_some_and(|q| !open(q) || at_capability(q, &need)) {
                return None;
            }
            Some(Gang { key: format!("{ns}/{}", g.metadata.name.as_deref().unwrap_or_default()), queue, job, need })
        })
        .collect();
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

fn quantity(v: &str) -> Option<f64> {
    volcano_api::quantity::parse(v).ok()
}

/// Whether the queue's allocated resources and `need` together go beyond its capability on
/// a resource the capability names.
fn at_capability(q: &Queue, need: &BTreeMap<String, f64>) -> bool {
    let Some(cap) = q.spec.capability.as_ref() else { return false };
    let allocated = q.status.as_ref().and_then(|s| s.allocated.as_ref());
    need.iter().any(|(k, v)| {
        let Some(c) = cap.get(k).and_then(|c| quantity(&c.0)) else { return false };
        let a = allocated.and_then(|a| a.get(k)).and_then(|a| quantity(&a.0)).unwrap_or(0.0);
        a + v > c + 1e-9
    })
}

/// One pod's request from a task's template: the containers' requests (limits where a
/// request is missing), init containers' largest, as the scheduler counts a pod.
fn template_request(task: &volcano_api::job::TaskSpec) -> BTreeMap<String, f64> {
    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
    let Some(spec) = task.template.spec.as_ref() else { return sum };
    let of = |c: &k8s_openapi::api::core::v1::Container| -> BTreeMap<String, f64> {
        let r = c.resources.as_ref();
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for list in [r.and_then(|r| r.limits.as_ref()), r.and_then(|r| r.requests.as_ref())].into_iter().flatten() {
            for (k, v) in list {
                if let Some(x) = quantity(&v.0) {
                    m.insert(k.clone(), x);
                }
            }
        }
        m
    };
    for c in &spec.containers {
        for (k, v) in of(c) {
            *sum.entry(k).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in of(c) {
            let e = sum.entry(k).or_default();
            *e = e.max(v);
        }
    }
    sum
}

/// The resources a gang's need is compared in: the extended resources both request, else
/// cpu and memory.
fn compared<'n>(need: &'n BTreeMap<String, f64>, req: &BTreeMap<String, f64>) -> Vec<(&'n String, f64, f64)> {
    let shared = |extended: bool| -> Vec<(&'n String, f64, f64)> {
        need.iter()
            .filter(|(k, v)| **v > 0.0 && (k.contains('/') || k.starts_with("hugepages-")) == extended)
            .filter(|(k, _)| extended || k.as_str() == "cpu" || k.as_str() == "memory")
            .filter_map(|(k, v)| req.get(k).filter(|r| **r > 0.0).map(|r| (k, *v, *r)))
            .collect()
    };
    let ext = shared(true);
    if ext.is_empty() {
        shared(false)
    } else {
        ext
    }
}

/// How many pods of request `req` cover `need` (None when they share nothing to cover).
fn pods_to_cover(need: &BTreeMap<String, f64>, req: &BTreeMap<String, f64>) -> Option<i32> {
    compared(need, req).into_iter().map(|(_, n, r)| ((n / r) - 1e-9).ceil().max(0.0) as i32).filter(|k| *k > 0).max()
}

/// Whether anything is still needed.
fn still_needed(need: &BTreeMap<String, f64>) -> bool {
    need.values().any(|v| *v > 1e-9)
}

fn subtract(need: &mut BTreeMap<String, f64>, req: &BTreeMap<String, f64>, pods: i32) {
    for (k, v) in need.iter_mut() {
        if let Some(r) = req.get(k) {
            *v = (*v - r * pods as f64).max(0.0);
        }
    }
}

fn describe(need: &BTreeMap<String, f64>, req: &BTreeMap<String, f64>, pods: i32) -> String {
    let parts: Vec<String> = compared(need, req)
        .into_iter()
        .map(|(k, _, r)| {
            let v = r * pods as f64;
            if k == "memory" {
                format!("memory {}", volcano_api::quantity::format_bytes(v))
            } else if k == "cpu" {
                format!("cpu {}", volcano_api::quantity::format_milli(v * 1000.0))
            } else {
                format!("{k} {}", trim(v))
            }
        })
        .collect();
    format!("{} pod(s): {}", pods, parts.join(", "))
}

fn trim(v: f64) -> String {
    if v.fract().abs() < 1e-9 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests;
