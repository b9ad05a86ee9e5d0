//! The applier: a cycle's [`Effect`]s turned into API calls, beside the core and off the
//! cycle's path.
//!
//! [`Applier::apply`] runs right after a cycle and never waits for the API server: it records
//! in the [`ClusterCache`] what the effects will do (binds assumed, evictions Releasing,
//! statuses written into the cached objects, so the next cycle starts from them) and queues
//! the calls:
//!
//! - **binds** go to the `pods/binding` subresource with the pod's uid as a precondition,
//!   at most `bind_concurrency` in flight. A bind the API server refuses (conflict, pod or
//!   node gone) is forgotten in the cache, so the pod is pending again for the next cycle,
//!   and a `FailedScheduling` event says why. A failed bind is never retried onto another
//!   node by the applier; the next cycle decides again. The API server refuses to bind a pod
//!   that already has a node and the cache counts a pod on one node only, so a pod is never
//!   bound twice. A bind whose answer was lost (the connection broke after it was sent, as
//!   when kube-apiserver is killed, or no answer within `request_timeout`) may have been
//!   done: the pod stays assumed on the node, so no cycle counts that room as free or places
//!   the pod again, and the pod is read (from the cache once the watch shows it, else from
//!   the API server, every 1–2 s while it does not answer, leading or not, for at most
//!   `check_timeout`). Bound there, the bind counts as done; not bound, it is sent again as
//!   one the API server did not act on;
//! - **evictions** as Volcano does them: a `DisruptionTarget=True` condition (reason
//!   `PreemptionByScheduler`) on the pod's status, an `Evict` event, then a delete with the
//!   pod's grace period and its uid as a precondition;
//! - **status writes** (PodGroup status, Queue `status.allocated`, pods' `PodScheduled=False`
//!   condition and `status.nominatedNodeName`) go through a coalescing queue: a newer status
//!   for the same object replaces one not sent yet, and `status_concurrency` workers send
//!   them. The core only emits a status that differs from the snapshot's, so nothing is
//!   written when nothing changed. Queue and pod statuses use the status subresource;
//!   PodGroups are patched as a whole object, since Volcano's PodGroup CRD has no status
//!   subresource;
//! - **events** (`Scheduled`, `FailedScheduling`, `Evict`, PodGroup events) go through
//!   bounded queues to `event_concurrency` workers, each with its own `kube-runtime` event
//!   recorder (which folds repeats into series); an object's events always go to the same
//!   worker, so its repeats still fold. One recorder would send one event at a time and scan
//!   its whole cache (every event of the last six minutes) on each, which at 30,000 binds is
//!   quadratic; sharded, each scans a sixteenth. When a queue is full, events are dropped and
//!   counted rather than slowing a cycle.
//!
//! Every call waits for a token of the `--kube-api-qps` / `--kube-api-burst` limiter, and
//! none is sent unless this replica holds the lease at that moment: a replica that loses the
//! lease stops writing, and the binds it had not sent are forgotten.
//!
//! A call the API server did not act on is retried, at most `max_retries` times: one it
//! throttled (429, API Priority and Fairness, or a 5xx with `Retry-After`) after the wait it
//! asked for, one whose connection was refused (it never left) after a short back-off
//! ([`volcano_kube::retry_backoff`], at most 2 s). The client's own retries are off
//! ([`volcano_kube::config`]), so that before each retry the applier checks what the cache
//! says now: a bind is retried only while the pod is still pending, with the same uid, and
//! assumed on that node, and the node is still there and not cordoned; otherwise the pod is
//! pending again and a `FailedScheduling` event says why. A status write is retried ahead of
//! the queue, unless a newer status of the same object is queued, which is then sent
//! instead. A throttled bind keeps its place among the `bind_concurrency` in flight, so the
//! binds of a cycle go out in order; the cycle itself never waits.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::events::{Event as KubeEvent, EventType as KubeEventType, Recorder, Reporter};
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch, Notify, Semaphore};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::names::{event_reason, pod_condition};
use volcano_framework::pod::SchedPod;
use volcano_framework::{Effect, Event, EventKind, EventType, ObjectRef, PodScheduledFalse};
use volcano_metrics::{SchedulerMetrics, TaskStage};

use crate::cache::{Assumption, ClusterCache, PodStatusChange};

/// How the applier talks to the API server.
#[derive(Clone, Debug)]
pub struct ApplierConfig {
    /// Binds and evictions in flight at once.
    pub bind_concurrency: usize,
    /// Status writes in flight at once.
    pub status_concurrency: usize,
    /// Sustained API writes per second.
    pub qps: f64,
    /// Burst of API writes.
    pub burst: u32,
    /// Longest wait for one API call.
    pub request_timeout: Duration,
    /// `reportingController` of events (the scheduler name).
    pub reporter: String,
    /// `reportingInstance` of events (this replica).
    pub instance: String,
    /// Events waiting to be sent, at most (over all event workers).
    pub event_queue: usize,
    /// Event workers (events in flight).
    pub event_concurrency: usize,
    /// Retries of a call the API server did not act on (throttled, or the connection
    /// refused), at most.
    pub max_retries: u32,
    /// How long a bind whose answer was lost is checked (the pod read until the API server
    /// answers) before the pod is pending again.
    pub check_timeout: Duration,
}

impl Default for ApplierConfig {
    fn default() -> Self {
        ApplierConfig {
            bind_concurrency: 64,
            status_concurrency: 16,
            qps: 2000.0,
            burst: 2000,
            request_timeout: Duration::from_secs(30),
            reporter: volcano_api::names::DEFAULT_SCHEDULER_NAME.to_string(),
            instance: "volcano-rs".to_string(),
            event_queue: 10_000,
            event_concurrency: 16,
            max_retries: 8,
            check_timeout: Duration::from_secs(300),
        }
    }
}

/// Counters of what the applier did (for metrics and tests).
#[derive(Debug, Default)]
pub struct ApplierStats {
    /// Binds the API server accepted.
    pub binds: AtomicU64,
    /// Binds that failed.
    pub bind_failures: AtomicU64,
    /// Pods deleted for eviction.
    pub evictions: AtomicU64,
    /// Evictions that failed.
    pub eviction_failures: AtomicU64,
    /// Status writes sent.
    pub status_writes: AtomicU64,
    /// Status writes that failed.
    pub status_failures: AtomicU64,
    /// Events sent.
    pub events: AtomicU64,
    /// Events dropped (queue full, not leading, or refused).
    pub events_dropped: AtomicU64,
    /// Writes not sent because this replica did not hold the lease.
    pub not_leading: AtomicU64,
    /// Calls sent again after the API server throttled them or refused the connection.
    pub retries: AtomicU64,
    /// Binds whose answer was lost (the connection broke after the call was sent, or no
    /// answer in time), then checked by reading the pod.
    pub bind_checks: AtomicU64,
}

/// What the status queue coalesces by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum StatusKey {
    PodGroup(String),
    Queue(String),
    PodCondition(String),
    PodNomination(String),
}

/// The previous and written cached object of a status write, to put back on failure.
#[derive(Clone, Debug)]
enum Revert {
    PodGroup(Arc<PodGroup>, Arc<PodGroup>),
    Queue(Arc<Queue>, Arc<Queue>),
    Pod(Arc<SchedPod>, Arc<SchedPod>),
}

#[derive(Clone, Debug)]
struct StatusWrite {
    object: ObjectRef,
    body: Value,
    revert: Revert,
    /// Times it was sent and not acted on.
    attempts: u32,
}

/// The revert of two writes of one object, the `older` sent first: back to what the API
/// server had before the older one, forward to what the newer one wrote.
fn merge_reverts(older: &Revert, newer: Revert) -> Revert {
    match (older, newer) {
        (Revert::PodGroup(prev, _), Revert::PodGroup(_, new)) => Revert::PodGroup(prev.clone(), new),
        (Revert::Queue(prev, _), Revert::Queue(_, new)) => Revert::Queue(prev.clone(), new),
        (Revert::Pod(prev, _), Revert::Pod(_, new)) => Revert::Pod(prev.clone(), new),
        (_, r) => r,
    }
}

#[derive(Default)]
struct StatusQueue {
    state: Mutex<(VecDeque<StatusKey>, HashMap<StatusKey, StatusWrite>)>,
    notify: Notify,
}

impl StatusQueue {
    fn push(&self, key: StatusKey, mut write: StatusWrite) {
        let mut st = self.state.lock().expect("status queue lock");
        match st.1.get(&key) {
            Some(pending) => {
                // Coalesce: send the newest status; on failure, go back to what the API
                // server had before the first of them.
                write.revert = merge_reverts(&pending.revert, write.revert);
                st.1.insert(key, write);
            }
            None => {
                st.0.push_back(key.clone());
                st.1.insert(key, write);
            }
        }
        drop(st);
        self.notify.notify_one();
    }

    /// Queues again a write the API server did not act on: first in line, or, when a newer
    /// status of the same object is queued, folded into it (the newer one is sent, and a
    /// failure goes back to what the API server had before both).
    fn retry(&self, key: StatusKey, write: StatusWrite) {
        let mut st = self.state.lock().expect("status queue lock");
        match st.1.get_mut(&key) {
            Some(newer) => newer.revert = merge_reverts(&write.revert, newer.revert.clone()),
            None => {
                st.0.push_front(key.clone());
                st.1.insert(key, write);
            }
        }
        drop(st);
        self.notify.notify_one();
    }

    fn pop(&self) -> Option<(StatusKey, StatusWrite)> {
        let mut st = self.state.lock().expect("status queue lock");
        let key = st.0.pop_front()?;
        let write = st.1.remove(&key).expect("queued keys have a write");
        Some((key, write))
    }

    fn len(&self) -> usize {
        self.state.lock().expect("status queue lock").0.len()
    }
}

struct Inner {
    client: Client,
    cache: Arc<Mutex<ClusterCache>>,
    config: ApplierConfig,
    binds: Arc<Semaphore>,
    limiter: DefaultDirectRateLimiter,
    leading: watch::Receiver<bool>,
    status: StatusQueue,
    /// One queue per event worker; an object's events go to `events[hash(object) % len]`.
    events: Vec<mpsc::Sender<(KubeEvent, ObjectReference)>>,
    in_flight: AtomicU64,
    idle: Notify,
    stats: ApplierStats,
    /// Where the binds' stages and durations go, once set.
    metrics: std::sync::OnceLock<SchedulerMetrics>,
}

/// Applies effects to the API server. Cheap to clone.
#[derive(Clone)]
pub struct Applier {
    inner: Arc<Inner>,
}

/// A JSON merge patch that makes the target equal to `new` where the target equals `old`:
/// every field of `new`, and `null` for fields only `old` has (recursively in objects), so
/// that a resource dimension or a status field that disappeared is removed.
pub fn replacing_merge_patch(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in n {
                let patched = match o.get(k) {
                    Some(ov) => replacing_merge_patch(ov, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), patched);
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

fn object_reference(kind: EventKind, r: &ObjectRef) -> ObjectReference {
    let api_version = match kind {
        EventKind::Pod => "v1",
        EventKind::PodGroup | EventKind::Queue => "scheduling.volcano.sh/v1beta1",
    };
    ObjectReference {
        api_version: Some(api_version.to_string()),
        kind: Some(kind.as_str().to_string()),
        name: Some(r.name().to_string()),
        namespace: r.namespace().map(str::to_string),
        uid: r.uid().map(str::to_string),
        ..Default::default()
    }
}

fn kube_event_type(t: EventType) -> KubeEventType {
    match t {
        EventType::Normal => KubeEventType::Normal,
        EventType::Warning => KubeEventType::Warning,
    }
}

/// Whether an API error means the object is gone (so an eviction is done).
fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Applier {
    /// An applier writing through `client`, recording in `cache`, sending only while
    /// `leading` is true. Starts its status and event workers on the current tokio runtime.
    pub fn new(
        client: Client,
        cache: Arc<Mutex<ClusterCache>>,
        config: ApplierConfig,
        leading: watch::Receiver<bool>,
    ) -> Self {
        let per_second = NonZeroU32::new(config.qps.ceil().clamp(1.0, f64::from(u32::MAX)) as u32).expect("≥ 1");
        let burst = NonZeroU32::new(config.burst.max(1)).expect("≥ 1");
        let period = Duration::from_secs_f64(1.0 / config.qps.max(1e-3));
        let quota = Quota::with_period(period).unwrap_or_else(|| Quota::per_second(per_second)).allow_burst(burst);
        let shards = config.event_concurrency.max(1);
        let (txs, rxs): (Vec<_>, Vec<_>) =
            (0..shards).map(|_| mpsc::channel((config.event_queue / shards).max(1))).unzip();
        let reporter = Reporter { controller: config.reporter.clone(), instance: Some(config.instance.clone()) };
        let inner = Arc::new(Inner {
            client,
            cache,
            binds: Arc::new(Semaphore::new(config.bind_concurrency.max(1))),
            limiter: RateLimiter::direct(quota),
            leading,
            status: StatusQueue::default(),
            events: txs,
            in_flight: AtomicU64::new(0),
            idle: Notify::new(),
            stats: ApplierStats::default(),
            metrics: std::sync::OnceLock::new(),
            config,
        });
        for _ in 0..inner.config.status_concurrency.max(1) {
            tokio::spawn(status_worker(inner.clone()));
        }
        for rx in rxs {
            let recorder = Recorder::new(inner.client.clone(), reporter.clone());
            tokio::spawn(event_worker(inner.clone(), recorder, rx));
        }
        Applier { inner }
    }

    /// Records the binds' stages (`volcano_task_scheduling_latency_milliseconds`: Assumed,
    /// PreBound, Bound), the bind calls' durations (`volcano_scheduling_stage_duration_milliseconds{stage="Bind"}`)
    /// and the binds in flight (`volcano_goroutines{operation="binding"}`) from now on.
    pub fn set_metrics(&self, metrics: SchedulerMetrics) {
        let _ = self.inner.metrics.set(metrics);
    }

    /// What the applier did so far.
    pub fn stats(&self) -> &ApplierStats {
        &self.inner.stats
    }

    /// Binds, evictions and status writes not finished yet.
    pub fn in_flight(&self) -> u64 {
        self.inner.in_flight.load(Ordering::SeqCst) + self.inner.status.len() as u64
    }

    /// Waits until every queued call finished, or `timeout` passed; returns whether all did.
    pub async fn flush(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.in_flight() == 0 {
                return true;
            }
            let notified = self.inner.idle.notified();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }

    /// Records the effects of a cycle in the cache and queues their API calls; returns at
    /// once. `now` stamps the conditions written.
    pub fn apply(&self, effects: Vec<Effect>, now: Time) {
        let inner = &self.inner;
        let now_ms = now.0.as_millisecond();
        let span = tracing::debug_span!("apply", effects = effects.len(), binds = tracing::field::Empty);
        let _enter = span.enter();
        let mut binds = 0usize;
        let mut cache = inner.cache.lock().expect("cache lock");
        for effect in effects {
            match effect {
                Effect::Bind { pod, node, annotations } => {
                    let created_ms = created_ms(cache.pod(pod.key()).map(|p| &**p));
                    if let (Some(m), Some(c)) = (inner.metrics.get(), created_ms) {
                        m.observe_task_stage(TaskStage::Assumed, (now_ms - c) as f64);
                    }
                    cache.assume_bound(&pod, node.clone(), annotations.clone());
                    binds += 1;
                    self.spawn(bind(inner.clone(), pod, node, annotations, created_ms));
                }
                Effect::Evict { pod, node, action, reason } => {
                    let grace = cache
                        .pod(pod.key())
                        .and_then(|p| p.spec.as_ref().and_then(|s| s.termination_grace_period_seconds))
                        .unwrap_or(30);
                    cache.assume_evicting(&pod);
                    self.spawn(evict(inner.clone(), pod, node, action, reason, grace));
                }
                Effect::Pipeline { pod, node } => {
                    if let Some((old, new)) = cache.set_pod_status(&pod, PodStatusChange::Nominated(&node)) {
                        let body = json!({"metadata": {"uid": pod.uid()}, "status": {"nominatedNodeName": &*node}});
                        inner.status.push(
                            StatusKey::PodNomination(pod.key().to_string()),
                            StatusWrite { object: pod, body, revert: Revert::Pod(old, new), attempts: 0 },
                        );
                    }
                }
                Effect::PodUnschedulable { pod, condition } => {
                    if push_pod_condition(inner, &mut cache, &pod, &condition, now.clone()) {
                        self.event(Event {
                            kind: EventKind::Pod,
                            object: pod,
                            type_: EventType::Warning,
                            reason: event_reason::FAILED_SCHEDULING,
                            message: condition.message.to_string(),
                        });
                    }
                }
                Effect::PodGroupStatus { pod_group, status } => {
                    if let Some((old, new)) = cache.set_pod_group_status(&pod_group, &status) {
                        let old_status = serde_json::to_value(&old.status).unwrap_or(Value::Null);
                        let new_status = serde_json::to_value(&new.status).unwrap_or(Value::Null);
                        let body = json!({
                            "metadata": {"uid": pod_group.uid()},
                            "status": replacing_merge_patch(&old_status, &new_status),
                        });
                        inner.status.push(
                            StatusKey::PodGroup(pod_group.key().to_string()),
                            StatusWrite { object: pod_group, body, revert: Revert::PodGroup(old, new), attempts: 0 },
                        );
                    }
                }
                Effect::QueueStatus { queue, allocated } => {
                    if let Some((old, new)) = cache.set_queue_allocated(&queue, &allocated) {
                        let old_alloc = serde_json::to_value(old.status.as_ref().and_then(|s| s.allocated.as_ref()))
                            .unwrap_or(Value::Null);
                        let new_alloc = serde_json::to_value(&allocated).unwrap_or(Value::Null);
                        let body = json!({
                            "metadata": {"uid": queue.uid()},
                            "status": {"allocated": replacing_merge_patch(&old_alloc, &new_alloc)},
                        });
                        inner.status.push(
                            StatusKey::Queue(queue.key().to_string()),
                            StatusWrite { object: queue, body, revert: Revert::Queue(old, new), attempts: 0 },
                        );
                    }
                }
                Effect::Event(e) => self.event(e),
            }
        }
        span.record("binds", binds);
    }

    fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        let inner = self.inner.clone();
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            fut.await;
            if inner.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
                inner.idle.notify_waiters();
            }
        });
    }

    /// Queues one event (dropped and counted when the queue is full).
    pub fn event(&self, e: Event) {
        queue_event(&self.inner, e.kind, &e.object, e.type_, e.reason, &e.message);
    }
}

fn queue_event(inner: &Inner, kind: EventKind, object: &ObjectRef, type_: EventType, reason: &str, message: &str) {
    let ev = KubeEvent {
        type_: kube_event_type(type_),
        reason: reason.to_string(),
        note: Some(volcano_kube::event_note(message)),
        action: "Scheduling".to_string(),
        secondary: None,
    };
    if inner.events[event_shard(object, inner.events.len())].try_send((ev, object_reference(kind, object))).is_err() {
        inner.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// The event worker of an object: always the same one (`DefaultHasher::new()` has fixed
/// keys), so that one recorder sees all of an object's events and folds its repeats.
fn event_shard(object: &ObjectRef, shards: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    object.key().hash(&mut h);
    (h.finish() % shards.max(1) as u64) as usize
}

fn leading(inner: &Inner) -> bool {
    let l = *inner.leading.borrow();
    if !l {
        inner.stats.not_leading.fetch_add(1, Ordering::Relaxed);
    }
    l
}

/// Writes `PodScheduled=False` into the cached pod and queues the status write, unless the
/// cached pod already says the same; returns whether a write was queued.
fn push_pod_condition(
    inner: &Inner,
    cache: &mut ClusterCache,
    pod: &ObjectRef,
    condition: &PodScheduledFalse,
    now: Time,
) -> bool {
    let Some((old, new)) = cache.set_pod_status(pod, PodStatusChange::Unschedulable(condition, now.clone())) else {
        return false;
    };
    let body = json!({
        "metadata": {"uid": pod.uid()},
        "status": {"conditions": [condition.condition(now)]}
    });
    inner.status.push(
        StatusKey::PodCondition(pod.key().to_string()),
        StatusWrite { object: pod.clone(), body, revert: Revert::Pod(old, new), attempts: 0 },
    );
    true
}

/// The pod's creation time, milliseconds since the epoch.
fn created_ms(pod: Option<&SchedPod>) -> Option<i64> {
    pod?.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond())
}

fn since_ms(created_ms: i64) -> f64 {
    (k8s_openapi::jiff::Timestamp::now().as_millisecond() - created_ms) as f64
}

async fn bind(
    inner: Arc<Inner>,
    pod: ObjectRef,
    node: Arc<str>,
    annotations: Vec<(&'static str, String)>,
    created_ms: Option<i64>,
) {
    let Ok(_permit) = inner.binds.clone().acquire_owned().await else { return };
    if !leading(&inner) {
        inner.cache.lock().expect("cache lock").forget(&pod);
        return;
    }
    inner.limiter.until_ready().await;
    let metrics = inner.metrics.get();
    let binding_gauge = metrics.map(|m| m.goroutines.with_label_values(&["binding"]));
    if let Some(g) = &binding_gauge {
        g.inc();
    }
    // volcano-rs runs no PreBind plugin: a pod is pre-bound when its bind call starts.
    if let (Some(m), Some(c)) = (metrics, created_ms) {
        m.observe_task_stage(TaskStage::PreBound, since_ms(c));
    }
    let started = std::time::Instant::now();
    let ns = pod.namespace().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(inner.client.clone(), ns);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.name().to_string()),
            namespace: Some(ns.to_string()),
            uid: pod.uid().map(str::to_string),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    // The GPU cards chosen go on the pod before the bind (Volcano's device Allocate), with
    // the pod's uid as a precondition; a pod whose patch fails is not bound. A call the API
    // server did not act on is sent again while the decision still holds. A bind whose
    // answer was lost may have been done: the pod is read to know, and it stays assumed on
    // the node meanwhile.
    let mut annotated = annotations.is_empty();
    let mut attempts = 0u32;
    let result = loop {
        let call = if annotated {
            bind_call(&inner, &api, &pod, &binding, attempts).await
        } else {
            annotate_call(&inner, &api, &pod, &annotations, attempts).await
        };
        let mut failure = match call {
            Ok(()) if annotated => break Ok(()),
            Ok(()) => {
                annotated = true;
                continue;
            }
            Err(f) => f,
        };
        if annotated && failure.unknown {
            inner.stats.bind_checks.fetch_add(1, Ordering::Relaxed);
            tracing::info!(pod = %pod, node = %node, "no answer to the bind ({}): reading the pod to know whether it was done", failure.message);
            match check_bind(&inner, &api, &pod, &node).await {
                Checked::Bound => break Ok(()),
                Checked::Failed(message, gone) => break Err((message, gone)),
                // Not done: sent again below, as a call the API server did not act on.
                Checked::NotBound => failure.retry = Some(Duration::ZERO),
            }
        }
        let wait = failure.retry.filter(|_| attempts < inner.config.max_retries);
        let Some(wait) = wait else { break Err((failure.message, failure.gone)) };
        attempts += 1;
        inner.stats.retries.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(pod = %pod, node = %node, attempts, ?wait, "bind not acted on ({}): retrying", failure.message);
        tokio::time::sleep(wait).await;
        if !*inner.leading.borrow() {
            inner.stats.not_leading.fetch_add(1, Ordering::Relaxed);
            break Err(("this replica stopped leading before the bind could be sent again".into(), true));
        }
        if let Err(why) = still_wanted(&inner, &pod, &node) {
            break Err((format!("{} (not sent again: {why})", failure.message), why.gone));
        }
        inner.limiter.until_ready().await;
    };
    if let Some(g) = &binding_gauge {
        g.dec();
    }
    if let Some(m) = metrics {
        m.stage_duration.with_label_values(&["Bind"]).observe(started.elapsed().as_secs_f64() * 1000.0);
    }
    match result {
        Ok(()) => {
            if let (Some(m), Some(c)) = (metrics, created_ms) {
                m.observe_task_stage(TaskStage::Bound, since_ms(c));
            }
            inner.stats.binds.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(pod = %pod, node = %node, "bound");
            let message = format!("Successfully assigned {} to {node}", pod.key());
            queue_event(&inner, EventKind::Pod, &pod, EventType::Normal, event_reason::SCHEDULED, &message);
        }
        Err((e, gone)) => {
            inner.stats.bind_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(pod = %pod, node = %node, "bind failed: {e}");
            let message = format!("failed to bind to node {node}: {e}");
            {
                let mut cache = inner.cache.lock().expect("cache lock");
                cache.forget(&pod);
                // Volcano marks the pod PodScheduled=False/SchedulerError (a pod that is
                // gone has nothing to mark).
                if !gone {
                    let condition =
                        PodScheduledFalse { reason: pod_condition::SCHEDULER_ERROR, message: message.as_str().into() };
                    let now = Time(k8s_openapi::jiff::Timestamp::now());
                    push_pod_condition(&inner, &mut cache, &pod, &condition, now);
                }
            }
            queue_event(&inner, EventKind::Pod, &pod, EventType::Warning, event_reason::FAILED_SCHEDULING, &message);
        }
    }
}

/// A call that failed: what to say, whether the pod is gone, when to send it again if
/// the API server did not act on it, and whether it may have acted on it without the answer
/// arriving.
struct CallFailure {
    message: String,
    gone: bool,
    retry: Option<Duration>,
    unknown: bool,
}

/// Whether a failed call may have been acted on although no answer said so: the API server
/// answered nothing (the connection broke after the call was sent, as when kube-apiserver
/// is killed under it) rather than refusing it or refusing the connection.
fn outcome_unknown(e: &kube::Error) -> bool {
    !matches!(e, kube::Error::Api(_)) && !volcano_kube::is_connection_refused(e)
}

/// What reading the pod said of a bind whose answer was lost.
enum Checked {
    /// The pod is bound to the node asked for: the bind was done.
    Bound,
    /// The pod is there, with the same uid, and bound to no node: the bind was not done.
    NotBound,
    /// Anything else: what to say, and whether the pod is gone.
    Failed(String, bool),
}

/// Finds out whether a bind whose answer was lost was done: from the cache if the watch
/// already shows the pod, else by reading the pod, again and again (1–2 s apart) while the
/// API server does not answer, for at most `check_timeout`. The pod stays assumed on the
/// node meanwhile, so no cycle places it again or counts its room as free; this is a read,
/// so it goes on while the replica does not lead.
async fn check_bind(inner: &Inner, api: &Api<Pod>, pod: &ObjectRef, node: &str) -> Checked {
    let start = tokio::time::Instant::now();
    let uid = pod.uid();
    let mut failures = 0u32;
    loop {
        let (in_cache, assumed) = {
            let cache = inner.cache.lock().expect("cache lock");
            let p = cache.pod(pod.key()).cloned();
            (p, cache.assumptions().contains_key(pod.key()))
        };
        let Some(cached) = in_cache else { return Checked::Failed("the pod was deleted".into(), true) };
        if uid.is_some_and(|u| cached.metadata.uid.as_deref() != Some(u)) {
            return Checked::Failed("the pod was deleted and created again".into(), true);
        }
        if !assumed {
            // The watch settled it: it shows the pod bound (or the scheduler gave it up).
            return match cached.node_name() {
                Some(n) if n == node => Checked::Bound,
                Some(n) => Checked::Failed(format!("the pod is bound to {n}"), true),
                None => Checked::NotBound,
            };
        }
        let read = tokio::time::timeout(inner.config.request_timeout, api.get(pod.name())).await;
        match read {
            Ok(Ok(p)) if uid.is_some_and(|u| p.metadata.uid.as_deref() != Some(u)) => {
                return Checked::Failed("the pod was deleted and created again".into(), true)
            }
            Ok(Ok(p)) => {
                return match p.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty()) {
                    Some(n) if n == node => Checked::Bound,
                    Some(n) => Checked::Failed(format!("the pod is bound to {n}"), true),
                    None => Checked::NotBound,
                }
            }
            Ok(Err(e)) if is_not_found(&e) => return Checked::Failed("the pod was deleted".into(), true),
            Ok(Err(e)) => tracing::debug!(pod = %pod, "reading the pod to check its bind: {e}"),
            Err(_) => tracing::debug!(pod = %pod, "reading the pod to check its bind: no answer"),
        }
        failures += 1;
        if start.elapsed() >= inner.config.check_timeout {
            return Checked::Failed(
                format!("no answer to the bind, and none to reading the pod within {:?}", inner.config.check_timeout),
                false,
            );
        }
        tokio::time::sleep(volcano_kube::retry_backoff(failures).min(volcano_kube::WATCH_BACKOFF_MAX)).await;
    }
}

/// When to send again a call the API server did not act on: the wait it asked for when it
/// throttled (429, or a 5xx with `Retry-After`), a short back-off when the connection was
/// refused (the call never left); `None` for any other failure (it may have been acted on,
/// or it will fail again alike).
fn retry_wait(e: &kube::Error, attempts: u32) -> Option<Duration> {
    volcano_kube::retry_after(e).or_else(|| {
        volcano_kube::is_connection_refused(e)
            .then(|| volcano_kube::retry_backoff(attempts + 1).min(volcano_kube::WATCH_BACKOFF_MAX))
    })
}

async fn annotate_call(
    inner: &Inner,
    api: &Api<Pod>,
    pod: &ObjectRef,
    annotations: &[(&'static str, String)],
    attempts: u32,
) -> Result<(), CallFailure> {
    let map: serde_json::Map<String, Value> =
        annotations.iter().map(|(k, v)| ((*k).to_string(), Value::String(v.clone()))).collect();
    let body = json!({"metadata": {"uid": pod.uid(), "annotations": map}});
    let (params, patch) = (PatchParams::default(), Patch::Merge(&body));
    let call = api.patch(pod.name(), &params, &patch);
    // The same patch twice writes the same annotations: one whose answer was lost is sent
    // again like one the API server did not act on.
    let resend = || volcano_kube::retry_backoff(attempts + 1).min(volcano_kube::WATCH_BACKOFF_MAX);
    match tokio::time::timeout(inner.config.request_timeout, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(CallFailure {
            message: format!("writing the GPU cards chosen: {}", volcano_kube::error_message(&e)),
            gone: is_not_found(&e),
            retry: retry_wait(&e, attempts).or_else(|| outcome_unknown(&e).then(resend)),
            unknown: false,
        }),
        Err(_) => Err(CallFailure {
            message: format!("writing the GPU cards chosen: no answer within {:?}", inner.config.request_timeout),
            gone: false,
            retry: Some(resend()),
            unknown: false,
        }),
    }
}

async fn bind_call(
    inner: &Inner,
    api: &Api<Pod>,
    pod: &ObjectRef,
    binding: &Binding,
    attempts: u32,
) -> Result<(), CallFailure> {
    let pp = PostParams::default();
    let call = api.create_subresource::<Binding, Value>("binding", pod.name(), &pp, binding);
    match tokio::time::timeout(inner.config.request_timeout, call).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(CallFailure {
            message: volcano_kube::error_message(&e),
            gone: is_not_found(&e),
            retry: retry_wait(&e, attempts),
            unknown: outcome_unknown(&e),
        }),
        Err(_) => Err(CallFailure {
            message: format!("no answer within {:?}", inner.config.request_timeout),
            gone: false,
            retry: None,
            unknown: true,
        }),
    }
}

/// Why a bind that waited must not be sent again.
struct Stale {
    why: String,
    /// The pod is gone (nothing to mark on it).
    gone: bool,
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// Whether the cache still wants `pod` bound to `node`: the pod is there with the same uid,
/// not bound and not being deleted, still assumed on that node, and the node is there and
/// not cordoned.
fn still_wanted(inner: &Inner, pod: &ObjectRef, node: &str) -> Result<(), Stale> {
    let cache = inner.cache.lock().expect("cache lock");
    let stale = |why: String, gone: bool| Err(Stale { why, gone });
    let Some(p) = cache.pod(pod.key()) else { return stale("the pod was deleted".into(), true) };
    if pod.uid().is_some_and(|u| p.metadata.uid.as_deref() != Some(u)) {
        return stale("the pod was deleted and created again".into(), true);
    }
    if p.metadata.deletion_timestamp.is_some() {
        return stale("the pod is being deleted".into(), true);
    }
    if let Some(n) = p.node_name() {
        return stale(format!("the pod is bound to {n} already"), true);
    }
    match cache.nodes.get(node) {
        None => return stale(format!("node {node} was deleted"), false),
        Some(n) if n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) => {
            return stale(format!("node {node} was cordoned"), false)
        }
        Some(_) => {}
    }
    match cache.assumptions().get(pod.key()) {
        Some(Assumption::Bound { node: n, .. }) if &**n == node => Ok(()),
        _ => stale(format!("the scheduler no longer places the pod on {node}"), false),
    }
}

async fn evict(inner: Arc<Inner>, pod: ObjectRef, node: Arc<str>, action: &'static str, reason: String, grace: i64) {
    let Ok(_permit) = inner.binds.clone().acquire_owned().await else { return };
    if !leading(&inner) {
        inner.cache.lock().expect("cache lock").forget(&pod);
        return;
    }
    let ns = pod.namespace().unwrap_or("default");
    let api: Api<Pod> = Api::namespaced(inner.client.clone(), ns);
    let timeout = inner.config.request_timeout;
    // The DisruptionTarget condition first, as Volcano and kube-scheduler do.
    inner.limiter.until_ready().await;
    let condition = json!({
        "metadata": {"uid": pod.uid()},
        "status": {"conditions": [{
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": format!("{}: preempting to accommodate a higher priority pod ({action})", inner.config.reporter),
        }]}
    });
    let patched = tokio::time::timeout(
        timeout,
        api.patch_status(pod.name(), &PatchParams::default(), &Patch::Strategic(&condition)),
    )
    .await;
    match patched {
        Ok(Err(e)) if is_not_found(&e) => {
            inner.cache.lock().expect("cache lock").forget(&pod);
            return;
        }
        Ok(Err(e)) => tracing::warn!(pod = %pod, "cannot set DisruptionTarget before eviction: {e}"),
        Err(_) => tracing::warn!(pod = %pod, "cannot set DisruptionTarget before eviction: timed out"),
        Ok(Ok(_)) => {}
    }
    queue_event(&inner, EventKind::Pod, &pod, EventType::Warning, event_reason::EVICT, &reason);
    inner.limiter.until_ready().await;
    let dp = DeleteParams {
        grace_period_seconds: Some(grace.max(0) as u32),
        preconditions: Some(Preconditions { uid: pod.uid().map(str::to_string), resource_version: None }),
        ..Default::default()
    };
    let deleted = tokio::time::timeout(timeout, api.delete(pod.name(), &dp)).await;
    match deleted {
        Ok(Ok(_)) => {
            inner.stats.evictions.fetch_add(1, Ordering::Relaxed);
            tracing::info!(pod = %pod, node = %node, action, "evicted: {reason}");
        }
        Ok(Err(e)) if is_not_found(&e) => {
            inner.cache.lock().expect("cache lock").forget(&pod);
        }
        Ok(Err(e)) => {
            inner.stats.eviction_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(pod = %pod, "eviction failed: {e}");
            inner.cache.lock().expect("cache lock").forget(&pod);
        }
        Err(_) => {
            inner.stats.eviction_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(pod = %pod, "eviction timed out");
            inner.cache.lock().expect("cache lock").forget(&pod);
        }
    }
}

async fn status_worker(inner: Arc<Inner>) {
    loop {
        let Some((key, write)) = inner.status.pop() else {
            if inner.in_flight.load(Ordering::SeqCst) == 0 {
                inner.idle.notify_waiters();
            }
            inner.status.notify.notified().await;
            continue;
        };
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        send_status(&inner, &key, write).await;
        if inner.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 && inner.status.len() == 0 {
            inner.idle.notify_waiters();
        }
    }
}

async fn send_status(inner: &Inner, key: &StatusKey, write: StatusWrite) {
    if !leading(inner) {
        revert(inner, &write);
        return;
    }
    inner.limiter.until_ready().await;
    let pp = PatchParams::default();
    let name = write.object.name().to_string();
    let ns = write.object.namespace().unwrap_or("default").to_string();
    let call = async {
        match key {
            StatusKey::PodGroup(_) => {
                let api: Api<PodGroup> = Api::namespaced(inner.client.clone(), &ns);
                api.patch(&name, &pp, &Patch::Merge(&write.body)).await.map(|_| ())
            }
            StatusKey::Queue(_) => {
                let api: Api<Queue> = Api::all(inner.client.clone());
                api.patch_status(&name, &pp, &Patch::Merge(&write.body)).await.map(|_| ())
            }
            StatusKey::PodCondition(_) => {
                let api: Api<Pod> = Api::namespaced(inner.client.clone(), &ns);
                api.patch_status(&name, &pp, &Patch::Strategic(&write.body)).await.map(|_| ())
            }
            StatusKey::PodNomination(_) => {
                let api: Api<Pod> = Api::namespaced(inner.client.clone(), &ns);
                api.patch_status(&name, &pp, &Patch::Merge(&write.body)).await.map(|_| ())
            }
        }
    };
    match tokio::time::timeout(inner.config.request_timeout, call).await {
        // The server took the write even if its answer does not decode.
        Ok(Ok(())) | Ok(Err(kube::Error::SerdeError(_))) => {
            inner.stats.status_writes.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Err(e)) => {
            if let Some(wait) = retry_wait(&e, write.attempts).filter(|_| write.attempts < inner.config.max_retries) {
                inner.stats.retries.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(object = %write.object, attempts = write.attempts + 1, ?wait, "status write not acted on ({e}): retrying");
                // The worker waits too: a throttling API server slows every status write.
                tokio::time::sleep(wait).await;
                let mut write = write;
                write.attempts += 1;
                inner.status.retry(key.clone(), write);
                return;
            }
            inner.stats.status_failures.fetch_add(1, Ordering::Relaxed);
            if !is_not_found(&e) {
                tracing::warn!(object = %write.object, "status write failed: {e}");
            }
            revert(inner, &write);
        }
        Err(_) => {
            inner.stats.status_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(object = %write.object, "status write timed out");
            revert(inner, &write);
        }
    }
}

fn revert(inner: &Inner, write: &StatusWrite) {
    let mut cache = inner.cache.lock().expect("cache lock");
    let key = write.object.key();
    match &write.revert {
        Revert::PodGroup(prev, new) => cache.revert_pod_group(key, new, prev.clone()),
        Revert::Queue(prev, new) => cache.revert_queue(key, new, prev.clone()),
        Revert::Pod(prev, new) => cache.revert_pod(key, new, prev.clone()),
    }
}

async fn event_worker(inner: Arc<Inner>, recorder: Recorder, mut rx: mpsc::Receiver<(KubeEvent, ObjectReference)>) {
    while let Some((ev, reference)) = rx.recv().await {
        if !leading(&inner) {
            inner.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        inner.limiter.until_ready().await;
        match tokio::time::timeout(inner.config.request_timeout, recorder.publish(&ev, &reference)).await {
            Ok(Ok(())) => {
                inner.stats.events.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Err(e)) => {
                inner.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("event not recorded: {e}");
            }
            Err(_) => {
                inner.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_objects_events_always_go_to_the_same_worker_and_objects_spread() {
        let pod = |i: usize| ObjectRef::namespaced("ml", &format!("job-{i}"), &format!("uid-{i}"));
        let mut used = [0usize; 16];
        for i in 0..1600 {
            let shard = event_shard(&pod(i), 16);
            assert_eq!(shard, event_shard(&pod(i), 16), "the same object, the same worker");
            // A replaced pod (same name, new uid) keeps its worker: series are per name.
            assert_eq!(shard, event_shard(&ObjectRef::namespaced("ml", &format!("job-{i}"), "other"), 16));
            used[shard] += 1;
        }
        assert!(used.iter().all(|&n| n > 50), "every worker gets a share: {used:?}");
        assert_eq!(event_shard(&pod(1), 1), 0);
    }

    #[test]
    fn merge_patches_remove_what_disappeared() {
        let old = json!({"phase": "Inqueue", "running": 1, "conditions": [{"type": "Unschedulable"}]});
        let new = json!({"phase": "Running", "running": 2});
        assert_eq!(replacing_merge_patch(&old, &new), json!({"phase": "Running", "running": 2, "conditions": null}));
        let old = json!({"cpu": "4", "nvidia.com/gpu": "2"});
        let new = json!({"cpu": "8"});
        assert_eq!(replacing_merge_patch(&old, &new), json!({"cpu": "8", "nvidia.com/gpu": null}));
        assert_eq!(replacing_merge_patch(&Value::Null, &new), new);
    }
}
