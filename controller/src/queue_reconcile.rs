//! The Queue controller's reconciler: one queue at a time, applying [`crate::queue`] to the
//! API.
//!
//! A reconcile of a queue:
//! 1. sets `spec.parent: root` on a queue that names no parent (as Volcano does);
//! 2. deletes the Commands targeting the queue (kind `Queue`), each before its action runs,
//!    so that each runs once; the actions wait in the queue's memory until handled;
//! 3. runs each action (a sync when there is none) through [`queue::decide`]: the queue's
//!    next state, the children to close or reopen (marked `volcano.sh/closed-by-parent`,
//!    then reconciled with that action), the event;
//! 4. writes the state and the PodGroup counts through the status subresource (a merge
//!    patch of these fields only: `status.allocated` is the scheduler's): a new state at
//!    once, counts that changed alone at most once per [`COUNTS_INTERVAL`] per queue.
//!
//! Every reconcile sets Volcano's `volcano_queue_pod_group_*_count{queue_name}` gauges to the
//! counts it computed, whether or not the status is written then.
//!
//! The queue is reconciled when it is created or its spec changes, when one of its
//! PodGroups is created, deleted or changes, when a Command targets it, and when its parent
//! or child asks for it. An API error requeues it with back-off.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use thiserror::Error;
use tokio::sync::watch;
use volcano_api::bus::{Action, Command};
use volcano_api::crd::{PodGroup, Queue, QueueState};
use volcano_metrics::{ControllerMetrics, POD_GROUP_PHASES};

use crate::queue::{self, Counts, QueueError, CLOSED_BY_PARENT_ANNOTATION, ROOT_QUEUE};

/// Counts that changed while the state did not are written at most this often per queue
/// (a PodGroup phase change would otherwise be a queue status write).
pub const COUNTS_INTERVAL: Duration = Duration::from_secs(5);

/// Why a queue reconcile failed (the queue is requeued with back-off).
#[derive(Debug, Error)]
pub enum QueueReconcileError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The action cannot run now.
    #[error(transparent)]
    Decision(#[from] QueueError),
    /// The queue changed since it was read; the reconcile runs again on the newer copy.
    #[error("queue {0} changed since it was read")]
    Conflict(String),
}

impl QueueReconcileError {
    /// A bounded label for logs: the API call (its [`volcano_kube::api_error_category`]),
    /// an action refused for now (`parent_closed`), or a queue changed under the reconcile
    /// (`conflict`).
    pub fn category(&self) -> &'static str {
        match self {
            QueueReconcileError::Api { source, .. } => volcano_kube::api_error_category(source),
            QueueReconcileError::Decision(QueueError::ParentClosed { .. }) => "parent_closed",
            QueueReconcileError::Conflict(_) => "conflict",
        }
    }
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> QueueReconcileError {
    let what = what.into();
    move |source| QueueReconcileError::Api { what, source }
}

#[derive(Default)]
struct Memory {
    /// Actions not handled yet.
    pending: VecDeque<Action>,
    /// Consecutive failed reconciles (for the back-off).
    failures: u32,
    /// When the counts were last written.
    counts_written: Option<Instant>,
}

/// What every queue reconcile shares.
pub struct QueueContext {
    /// The client.
    pub client: Client,
    /// The queues.
    pub queues: Store<Queue>,
    /// The PodGroups.
    pub pod_groups: Store<PodGroup>,
    /// The Commands.
    pub commands: Store<Command>,
    /// Whether this replica leads.
    pub leading: watch::Receiver<bool>,
    /// Whether the PodGroups and Commands are listed (see `reconcile::Context::with_synced`).
    pub synced: watch::Receiver<bool>,
    /// Reconciles another queue.
    pub trigger: UnboundedSender<ObjectRef<Queue>>,
    /// Records the queues' events.
    pub recorder: Recorder,
    metrics: ControllerMetrics,
    memory: Mutex<HashMap<String, Memory>>,
}

impl QueueContext {
    /// A context over the stores, with metrics of its own.
    pub fn new(
        client: Client,
        (queues, pod_groups, commands): (Store<Queue>, Store<PodGroup>, Store<Command>),
        leading: watch::Receiver<bool>,
        synced: watch::Receiver<bool>,
        trigger: UnboundedSender<ObjectRef<Queue>>,
        recorder: Recorder,
    ) -> Self {
        QueueContext {
            client,
            queues,
            pod_groups,
            commands,
            leading,
            synced,
            trigger,
            recorder,
            metrics: ControllerMetrics::new(),
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// Updates `metrics` (the ones [`crate::run`] serves).
    #[must_use]
    pub fn with_metrics(mut self, metrics: ControllerMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics the reconciles update.
    pub fn metrics(&self) -> &ControllerMetrics {
        &self.metrics
    }

    /// Forgets what the reconciles remember of queue `name`.
    pub fn forget(&self, name: &str) {
        self.memory.lock().expect("queue memory lock").remove(name);
    }

    /// Sets the queue's PodGroup gauges. A queue deleted meanwhile (gone from the store,
    /// whose deletion may have removed its series already) keeps none.
    fn set_pod_group_gauges(&self, name: &str, counts: &Counts) {
        self.metrics.set_queue_pod_groups(name, gauge_values(counts));
        if self.queues.get(&ObjectRef::new(name)).is_none() {
            self.metrics.forget_queue(name);
        }
    }

    fn with_memory<T>(&self, name: &str, f: impl FnOnce(&mut Memory) -> T) -> T {
        f(self.memory.lock().expect("queue memory lock").entry(name.to_string()).or_default())
    }

    /// Queues `action` for the queue `name` and reconciles it.
    fn ask(&self, name: &str, action: Action) {
        self.with_memory(name, |m| m.pending.push_back(action));
        let _ = self.trigger.unbounded_send(ObjectRef::new(name));
    }

    async fn record(&self, reference: &ObjectReference, event: &queue::QueueEvent) {
        let ev = Event {
            type_: if event.warning { EventType::Warning } else { EventType::Normal },
            reason: event.reason.clone(),
            note: Some(volcano_kube::event_note(&event.message)),
            action: event.reason.clone(),
            secondary: None,
        };
        match tokio::time::timeout(Duration::from_secs(5), self.recorder.publish(&ev, reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(queue = ?reference.name, "event not recorded: {e}"),
            Err(_) => tracing::debug!(queue = ?reference.name, "event not recorded: timed out"),
        }
    }
}

/// The trigger for the queues of a PodGroup event: the PodGroup's queue, and the queue it
/// left when its queue changed. `last` remembers each PodGroup's queue.
pub fn pod_group_triggers(
    last: &mut HashMap<(String, String), String>,
    event: &kube::runtime::watcher::Event<PodGroup>,
) -> Vec<ObjectRef<Queue>> {
    use kube::runtime::watcher::Event as W;
    let key = |pg: &PodGroup| (pg.namespace().unwrap_or_default(), pg.name_any());
    let mut out = Vec::new();
    match event {
        W::Apply(pg) | W::InitApply(pg) => {
            let q = queue::pod_group_queue(pg).to_string();
            if let Some(old) = last.insert(key(pg), q.clone()) {
                if old != q {
                    out.push(ObjectRef::new(&old));
                }
            }
            out.push(ObjectRef::new(&q));
        }
        W::Delete(pg) => {
            let q = last.remove(&key(pg)).unwrap_or_else(|| queue::pod_group_queue(pg).to_string());
            out.push(ObjectRef::new(&q));
        }
        W::Init | W::InitDone => {}
    }
    out
}

/// The PodGroup counts in the order of the gauges ([`POD_GROUP_PHASES`]).
pub fn gauge_values(c: &Counts) -> [i64; 5] {
    POD_GROUP_PHASES.map(|phase| {
        i64::from(c.of_phase(phase).unwrap_or_else(|| unreachable!("a PodGroup phase without a count: {phase}")))
    })
}

/// The queue a Command targets, if it targets one.
pub fn command_trigger(cmd: &Command) -> Option<ObjectRef<Queue>> {
    cmd.target.as_ref().filter(|t| t.kind == "Queue").map(|t| ObjectRef::new(&t.name))
}

/// Reconciles one queue.
pub async fn reconcile_queue(q: Arc<Queue>, ctx: Arc<QueueContext>) -> Result<Requeue, QueueReconcileError> {
    if !*ctx.leading.borrow() {
        return Ok(Requeue::await_change());
    }
    // The queue store is ready (kube-runtime starts no reconcile before); the others are
    // waited for on a watch channel, never on the stores themselves (several waiters on a
    // store lose wake-ups).
    let _ = ctx.synced.clone().wait_for(|s| *s).await;
    let name = q.name_any();
    if q.metadata.deletion_timestamp.is_some() {
        ctx.forget(&name);
        return Ok(Requeue::await_change());
    }
    let result = reconcile_with(&q, &ctx).await;
    let failures = ctx.with_memory(&name, |m| {
        if result.is_ok() {
            m.failures = 0;
        } else {
            m.failures += 1;
        }
        m.failures
    });
    if let Err(e) = &result {
        if matches!(e, QueueReconcileError::Conflict(_)) {
            tracing::debug!(queue = %name, failures, "{e}");
        } else {
            tracing::warn!(queue = %name, category = e.category(), failures, "queue reconcile failed: {e}");
        }
        if failures == 1 {
            if let QueueReconcileError::Decision(d) = e {
                let ev = queue::QueueEvent {
                    warning: true,
                    reason: Action::OpenQueue.as_str().to_string(),
                    message: d.to_string(),
                };
                ctx.record(&q.object_ref(&()), &ev).await;
            }
        }
    }
    result
}

/// The back-off after a failed queue reconcile: 200 ms doubling up to a minute, or
/// [`volcano_kube::outage_retry`] when the API server was away or throttling.
pub fn queue_error_policy(q: Arc<Queue>, e: &QueueReconcileError, ctx: Arc<QueueContext>) -> Requeue {
    if matches!(e, QueueReconcileError::Api { source, .. } if volcano_kube::is_transient(source)) {
        return Requeue::requeue(volcano_kube::outage_retry());
    }
    Requeue::requeue(volcano_kube::retry_backoff(ctx.with_memory(&q.name_any(), |m| m.failures)))
}

async fn reconcile_with(q: &Queue, ctx: &QueueContext) -> Result<Requeue, QueueReconcileError> {
    let name = q.name_any();
    let queues_api: Api<Queue> = Api::all(ctx.client.clone());

    // The freshest copy of the queue: the store's, then what our own writes return (the
    // status write carries its resourceVersion, so a stale copy is never written back).
    let mut me = q.clone();
    // A queue without a parent is root's child.
    if name != ROOT_QUEUE && q.spec.parent.as_deref().is_none_or(str::is_empty) {
        let patch = serde_json::json!({"spec": {"parent": ROOT_QUEUE}});
        me = queues_api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(api_err(format!("set the parent of queue {name}")))?;
    }

    // Commands: deleted first, exactly once.
    let mut cmds: Vec<Arc<Command>> =
        ctx.commands.state().into_iter().filter(|c| command_trigger(c).is_some_and(|r| r.name == name)).collect();
    cmds.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    for cmd in cmds {
        let api: Api<Command> =
            Api::namespaced(ctx.client.clone(), cmd.metadata.namespace.as_deref().unwrap_or("default"));
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: cmd.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&cmd.name_any(), &dp).await {
            Ok(_) => {
                // A Command without an action syncs the queue, as in Volcano.
                let action = cmd.action.clone().unwrap_or(Action::SyncQueue);
                tracing::info!(queue = %name, action = %action.as_str(), "command");
                ctx.with_memory(&name, |m| m.pending.push_back(action));
            }
            // Deleted by an earlier reconcile (a stale store), or not deletable: not ours to run.
            Err(e) => tracing::debug!(command = %cmd.name_any(), "command not run: {e}"),
        }
    }

    let groups = ctx.pod_groups.state();
    let counts = queue::counts(&name, groups.iter().map(|g| g.as_ref()));
    // As Volcano's syncQueue: the gauges follow every count, written to the status or not.
    ctx.set_pod_group_gauges(&name, &counts);
    let queues = ctx.queues.state();
    let reference = me.object_ref(&());
    let mut state = queue::state_of(&me);
    let mut failed = None;
    // The actions run on a copy: they leave the memory only once the status that results
    // is written, so a failed write (a conflict with a newer object) runs them again.
    // Each action with whether it came from the memory (a sync's follow-up does not).
    let mut pending: VecDeque<(Action, bool)> =
        ctx.with_memory(&name, |m| m.pending.iter().map(|a| (a.clone(), true)).collect());
    if pending.is_empty() {
        pending.push_back((Action::SyncQueue, false));
    }
    let mut done = 0;
    let mut events = Vec::new();
    while let Some((action, from_memory)) = pending.front().cloned() {
        match queue::decide(&me, state, &action, queues.iter().map(|q| q.as_ref()), counts.total) {
            Ok(d) => {
                for child in &d.close_children {
                    mark_closed_by_parent(&queues_api, child, true).await?;
                    ctx.ask(child, Action::CloseQueue);
                    tracing::info!(queue = %child, parent = %name, "closing: its parent is closing");
                }
                for child in &d.open_children {
                    ctx.ask(child, Action::OpenQueue);
                    tracing::info!(queue = %child, parent = %name, "opening: its parent opened");
                }
                if let Some(mark) = d.mark_closed_by_parent {
                    me = mark_closed_by_parent(&queues_api, &name, mark).await?;
                }
                pending.pop_front();
                if from_memory {
                    done += 1;
                }
                // A sync's follow-up (closing or opening with the parent) runs next.
                if let Some(f) = d.follow_up.clone() {
                    pending.push_front((f, false));
                }
                state = d.state;
                events.extend(d.event);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }

    let requeue = write_status(ctx, &queues_api, &me, state, counts).await?;
    // Written (or nothing to write): the actions handled leave the memory, and their events
    // are recorded.
    ctx.with_memory(&name, |m| {
        for _ in 0..done.min(m.pending.len()) {
            m.pending.pop_front();
        }
    });
    for ev in &events {
        ctx.record(&reference, ev).await;
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(requeue),
    }
}

async fn mark_closed_by_parent(api: &Api<Queue>, name: &str, mark: bool) -> Result<Queue, QueueReconcileError> {
    let patch = serde_json::json!({"metadata": {"annotations": {CLOSED_BY_PARENT_ANNOTATION: mark.to_string()}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(api_err(format!("annotate queue {name}")))
}

fn stored_counts(q: &Queue) -> Counts {
    let s = q.status.clone().unwrap_or_default();
    Counts {
        pending: s.pending,
        inqueue: s.inqueue,
        running: s.running,
        unknown: s.unknown,
        completed: s.completed,
        total: 0,
    }
}

/// Writes the state and counts when they changed (counts alone at most once per
/// [`COUNTS_INTERVAL`]); returns when to come back for counts held back.
async fn write_status(
    ctx: &QueueContext,
    api: &Api<Queue>,
    q: &Queue,
    state: QueueState,
    counts: Counts,
) -> Result<Requeue, QueueReconcileError> {
    let name = q.name_any();
    let stored_state = q.status.as_ref().and_then(|s| s.state);
    let counts_changed = Counts { total: 0, ..counts } != stored_counts(q);
    let state_changed = stored_state != Some(state);
    if !state_changed && !counts_changed {
        return Ok(Requeue::await_change());
    }
    if !state_changed {
        let wait = ctx.with_memory(&name, |m| {
            m.counts_written.map(|t| COUNTS_INTERVAL.saturating_sub(t.elapsed())).unwrap_or(Duration::ZERO)
        });
        if !wait.is_zero() {
            return Ok(Requeue::requeue(wait));
        }
    }
    let patch = serde_json::json!({"metadata": {"resourceVersion": q.metadata.resource_version}, "status": {
        "state": state,
        "pending": counts.pending,
        "inqueue": counts.inqueue,
        "running": counts.running,
        "unknown": counts.unknown,
        "completed": counts.completed,
    }});
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => {}
        // Deleted meanwhile.
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Requeue::await_change()),
        // Changed since it was read (the scheduler writes `status.allocated`): decided again
        // on the newer copy.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return Err(QueueReconcileError::Conflict(name));
        }
        Err(e) => return Err(api_err(format!("write the status of queue {name}"))(e)),
    }
    if state_changed {
        tracing::info!(queue = %name, from = ?stored_state, to = ?state, "queue state");
    }
    ctx.with_memory(&name, |m| m.counts_written = Some(Instant::now()));
    Ok(Requeue::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event as W;
    use volcano_api::crd::PodGroupSpec;

    fn pg(name: &str, queue: Option<&str>) -> PodGroup {
        let mut g = PodGroup::new(name, PodGroupSpec { queue: queue.map(str::to_string), ..Default::default() });
        g.metadata.namespace = Some("ns".into());
        g
    }

    #[test]
    fn gauges_take_each_count_in_their_order() {
        let c = Counts { pending: 1, inqueue: 2, running: 3, unknown: 4, completed: 5, total: 15 };
        let values = gauge_values(&c);
        let by_phase: std::collections::BTreeMap<&str, i64> = POD_GROUP_PHASES.into_iter().zip(values).collect();
        assert_eq!(
            by_phase,
            [("completed", 5), ("inqueue", 2), ("pending", 1), ("running", 3), ("unknown", 4)].into_iter().collect()
        );
    }

    #[test]
    fn pod_group_events_trigger_their_queues_old_and_new() {
        let mut last = HashMap::new();
        let names = |v: Vec<ObjectRef<Queue>>| v.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(pod_group_triggers(&mut last, &W::InitApply(pg("a", None)))), ["default"]);
        assert_eq!(names(pod_group_triggers(&mut last, &W::Apply(pg("a", Some("default"))))), ["default"]);
        assert_eq!(names(pod_group_triggers(&mut last, &W::Apply(pg("a", Some("q1"))))), ["default", "q1"]);
        assert_eq!(names(pod_group_triggers(&mut last, &W::Delete(pg("a", Some("q1"))))), ["q1"]);
        assert!(last.is_empty(), "a deleted PodGroup is forgotten");
        assert!(pod_group_triggers(&mut last, &W::InitDone).is_empty());
    }
}
