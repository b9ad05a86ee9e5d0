//! The in-memory cluster: every object by key, [`Cluster::apply_effects`], the one place
//! where the effects of a cycle change the cluster the way a real cluster would, and the
//! other changes a cluster sees between cycles (pods that finish, the job controller's
//! pods and PodGroups). Every change after loading goes through a method that records the
//! object's key, so that the next snapshot is the kept one brought up to date with
//! [`volcano_framework::Snapshot::update`] ([`Cluster::snapshot`]), as the kube backend's
//! cache does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Namespace, Node,
    PersistentVolume, PersistentVolumeClaim, PodSpec, ReplicationController, Service,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use volcano_api::crd::{PodGroup, PodGroupCondition, PodGroupStatus, Queue};
use volcano_api::names::pod_condition;
use volcano_api::topology::HyperNode;
use volcano_framework::pod::{SchedPod as Pod, SpecInterner};
use volcano_framework::snapshot::{KeptSnapshot, SnapshotSource};
use volcano_framework::{ClusterObjects, Effect, ObjectRef, Snapshot, SnapshotError};

use crate::admit::PodAdmission;
use crate::error::EffectError;
use crate::job::SimJob;

/// Pod annotation: how long the pod runs once bound, in seconds of the virtual clock (a
/// whole or decimal number). When that time has passed the pod succeeds (phase
/// `Succeeded`, every container terminated with exit code 0) and frees its node. A pod
/// without it runs for ever, as before.
pub const RUN_SECONDS_ANNOTATION: &str = "volcano-rs.io/run-seconds";

/// The cluster state between cycles: objects by key (`namespace/name` for namespaced kinds,
/// `name` for the others), so each effect costs a lookup, not a scan.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Nodes by name.
    pub nodes: BTreeMap<String, Arc<Node>>,
    /// Pods by `namespace/name`.
    pub pods: BTreeMap<String, Arc<Pod>>,
    /// PodGroups by `namespace/name`.
    pub pod_groups: BTreeMap<String, Arc<PodGroup>>,
    /// Queues by name.
    pub queues: BTreeMap<String, Arc<Queue>>,
    /// PriorityClasses by name.
    pub priority_classes: BTreeMap<String, Arc<PriorityClass>>,
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Arc<Namespace>>,
    /// PersistentVolumeClaims by `namespace/name`.
    pub pvcs: BTreeMap<String, Arc<PersistentVolumeClaim>>,
    /// PersistentVolumes by name.
    pub pvs: BTreeMap<String, Arc<PersistentVolume>>,
    /// StorageClasses by name.
    pub storage_classes: BTreeMap<String, Arc<StorageClass>>,
    /// CSINodes by name.
    pub csi_nodes: BTreeMap<String, Arc<CSINode>>,
    /// Services by `namespace/name`.
    pub services: BTreeMap<String, Arc<Service>>,
    /// ReplicationControllers by `namespace/name`.
    pub replication_controllers: BTreeMap<String, Arc<ReplicationController>>,
    /// ReplicaSets by `namespace/name`.
    pub replica_sets: BTreeMap<String, Arc<ReplicaSet>>,
    /// StatefulSets by `namespace/name`.
    pub stateful_sets: BTreeMap<String, Arc<StatefulSet>>,
    /// HyperNodes by name.
    pub hyper_nodes: BTreeMap<String, Arc<HyperNode>>,
    /// Volcano Jobs of the input by `namespace/name`, with their status and what the job
    /// controller remembers of them (their PodGroups and pods are in `pod_groups` and
    /// `pods`; the scheduler does not see the jobs themselves).
    pub jobs: BTreeMap<String, SimJob>,
    /// Volcano Jobs applied during the run (`volcano-rs.io/apply-at-seconds`), in the order
    /// they are applied ([`crate::arrive`]).
    pub arrivals: Vec<crate::arrive::Arrival>,
    /// The API server's pod defaults and Priority admission, for the pods the job
    /// controller creates.
    pub admission: PodAdmission,
    /// Running pods with [`RUN_SECONDS_ANNOTATION`]: (when they finish, milliseconds since
    /// the Unix epoch; key).
    finishes: BTreeSet<(i64, String)>,
    /// The snapshot kept between cycles and the keys of what changed since.
    kept: KeptSnapshot,
    /// The pods' specs, shared among the pods whose specs are equal.
    pub(crate) specs: SpecInterner,
}

/// A pod placed on a node (bound or pipelined).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The node.
    pub node: String,
}

/// A pod evicted from a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eviction {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The node it ran on.
    pub node: String,
    /// The action that evicted it (`preempt`, `reclaim`, …).
    pub action: String,
    /// Why.
    pub reason: String,
}

/// A Kubernetes event a cycle recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventRecord {
    /// `Kind/namespace/name` of the object.
    pub object: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// What one cycle changed in the cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CycleRecord {
    /// Cycle number, from 1.
    pub cycle: u64,
    /// The cycle's virtual time, milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// Pods bound, in effect order.
    pub binds: Vec<Placement>,
    /// Pods evicted (deleted), in effect order.
    pub evictions: Vec<Eviction>,
    /// Pods given a nominated node, in effect order.
    pub pipelined: Vec<Placement>,
    /// Pods whose `PodScheduled` condition was set (`namespace/name`).
    pub pod_condition_updates: Vec<String>,
    /// PodGroups whose status changed.
    pub pod_group_updates: Vec<String>,
    /// Queues whose `status.allocated` changed.
    pub queue_updates: Vec<String>,
    /// Events, in effect order.
    pub events: Vec<EventRecord>,
    /// Pods of Volcano Jobs the job controller created after the cycle's effects (their
    /// task's `dependsOn` became met, or they replace deleted ones; `namespace/name`, in job
    /// and plan order).
    pub created: Vec<String>,
    /// Pods that finished before the cycle ([`RUN_SECONDS_ANNOTATION`]), in key order.
    pub finished: Vec<String>,
    /// Pods the job controller deleted after the cycle's effects.
    pub deleted: Vec<String>,
    /// Volcano Jobs whose phase the job controller changed after the cycle, with the phase.
    pub job_phases: Vec<(String, volcano_api::job::JobPhase)>,
    /// Volcano Jobs applied before the cycle (`volcano-rs.io/apply-at-seconds`), with what
    /// happened (`created`, `updated`).
    pub applied: Vec<(String, &'static str)>,
    /// Tasks the elastic autoscaler resized after the cycle.
    pub resizes: Vec<ResizeRecord>,
    /// Host lists the job controller changed (a resize's safe order at work).
    pub host_lists: Vec<HostListChange>,
}

/// A task the elastic autoscaler resized.
#[derive(Clone, Debug, PartialEq)]
pub struct ResizeRecord {
    /// `namespace/name` of the job.
    pub job: String,
    /// The task.
    pub task: String,
    /// Replicas before.
    pub from: i32,
    /// Replicas after.
    pub to: i32,
    /// The Event's reason (`AutoscaleOut`, `AutoscaleIn`, `AutoscaleReverted`).
    pub reason: &'static str,
    /// The Event's message.
    pub message: String,
}

/// A host list as the job controller published it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostListChange {
    /// `namespace/name` of the ConfigMap.
    pub config_map: String,
    /// The key in its data.
    pub key: String,
    /// The value now (lines).
    pub value: String,
}

impl CycleRecord {
    /// Whether the cycle changed anything but events: a bind, an eviction, a nominated node,
    /// a pod condition, a PodGroup or a Queue status, a pod created, finished or deleted, a
    /// job's phase, a Job applied or resized, a host list.
    pub fn changed(&self) -> bool {
        !(self.binds.is_empty()
            && self.created.is_empty()
            && self.finished.is_empty()
            && self.deleted.is_empty()
            && self.job_phases.is_empty()
            && self.evictions.is_empty()
            && self.pipelined.is_empty()
            && self.pod_condition_updates.is_empty()
            && self.pod_group_updates.is_empty()
            && self.queue_updates.is_empty()
            && self.applied.is_empty()
            && self.resizes.is_empty()
            && self.host_lists.is_empty())
    }
}

/// Conditions equal but for their transition time and session ID.
fn same_status(a: &PodGroupStatus, b: &PodGroupStatus) -> bool {
    let cond = |x: &PodGroupCondition, y: &PodGroupCondition| {
        x.type_ == y.type_ && x.status == y.status && x.reason == y.reason && x.message == y.message
    };
    a.phase.unwrap_or_default() == b.phase.unwrap_or_default()
        && a.running == b.running
        && a.succeeded == b.succeeded
        && a.failed == b.failed
        && a.conditions.len() == b.conditions.len()
        && a.conditions.iter().zip(&b.conditions).all(|(x, y)| cond(x, y))
}

/// Shares the pod's spec with the cluster's pods of equal spec (when the `Arc` holds the
/// pod alone: a pod also held elsewhere is left as it is).
fn share_spec(specs: &mut SpecInterner, pod: &mut Arc<Pod>) {
    if let Some(p) = Arc::get_mut(pod) {
        specs.share(p);
    }
}

fn fail(effect: String, message: impl Into<String>) -> EffectError {
    EffectError { effect, message: message.into() }
}

/// The pod an effect names, if it exists and has the effect's uid (when the effect has one):
/// an applier never acts on a pod that was deleted and created again under the same name.
fn pod_mut<'a>(
    pods: &'a mut BTreeMap<String, Arc<Pod>>,
    pod: &ObjectRef,
    what: impl Fn() -> String,
) -> Result<&'a mut Arc<Pod>, EffectError> {
    let p = pods.get_mut(pod.key()).ok_or_else(|| fail(what(), format!("pod {pod} does not exist")))?;
    if let Some(uid) = pod.uid() {
        if p.metadata.uid.as_deref() != Some(uid) {
            return Err(fail(what(), format!("pod {pod} was replaced: it no longer has uid {uid}")));
        }
    }
    Ok(p)
}

/// The container statuses of a pod the simulation starts at `now`: every container of the
/// spec running since `now`, started and ready. This is what makes a bound pod ready in the
/// sense of `dependsOn` (`volcano_controller::plan::task_readiness`: Running with every
/// container ready).
pub fn started_containers(spec: &PodSpec, now: &Time) -> Vec<ContainerStatus> {
    spec.containers
        .iter()
        .map(|c| ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            ready: true,
            started: Some(true),
            state: Some(ContainerState {
                running: Some(ContainerStateRunning { started_at: Some(now.clone()) }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .collect()
}

fn key(meta: &ObjectMeta) -> String {
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

impl Cluster {
    /// A cluster holding these objects (already valid: this is for objects built by code,
    /// such as benchmark workloads; manifests go through [`crate::normalise`]).
    pub fn from_objects(objects: ClusterObjects) -> Self {
        let mut cluster = Cluster::default();
        cluster.insert_objects(objects);
        cluster
    }

    /// Adds objects, replacing those with the same key.
    pub fn insert_objects(&mut self, objects: ClusterObjects) {
        let ClusterObjects {
            nodes,
            pods,
            pod_groups,
            queues,
            priority_classes,
            namespaces,
            pvcs,
            pvs,
            storage_classes,
            csi_nodes,
            services,
            replication_controllers,
            replica_sets,
            stateful_sets,
            hyper_nodes,
        } = objects;
        self.nodes.extend(nodes.into_iter().map(|o| (key(&o.metadata), o)));
        self.pods.extend(pods.into_iter().map(|mut o| {
            share_spec(&mut self.specs, &mut o);
            (key(&o.metadata), o)
        }));
        self.pod_groups.extend(pod_groups.into_iter().map(|o| (key(&o.metadata), o)));
        self.queues.extend(queues.into_iter().map(|o| (key(&o.metadata), o)));
        self.priority_classes.extend(priority_classes.into_iter().map(|o| (key(&o.metadata), o)));
        self.namespaces.extend(namespaces.into_iter().map(|o| (key(&o.metadata), o)));
        self.pvcs.extend(pvcs.into_iter().map(|o| (key(&o.metadata), o)));
        self.pvs.extend(pvs.into_iter().map(|o| (key(&o.metadata), o)));
        self.storage_classes.extend(storage_classes.into_iter().map(|o| (key(&o.metadata), o)));
        self.csi_nodes.extend(csi_nodes.into_iter().map(|o| (key(&o.metadata), o)));
        self.services.extend(services.into_iter().map(|o| (key(&o.metadata), o)));
        self.replication_controllers.extend(replication_controllers.into_iter().map(|o| (key(&o.metadata), o)));
        self.replica_sets.extend(replica_sets.into_iter().map(|o| (key(&o.metadata), o)));
        self.stateful_sets.extend(stateful_sets.into_iter().map(|o| (key(&o.metadata), o)));
        self.hyper_nodes.extend(hyper_nodes.into_iter().map(|o| (key(&o.metadata), o)));
    }

    /// The objects a snapshot is built from (shared, not copied).
    pub fn objects(&self) -> ClusterObjects {
        ClusterObjects {
            nodes: self.nodes.values().cloned().collect(),
            pods: self.pods.values().cloned().collect(),
            pod_groups: self.pod_groups.values().cloned().collect(),
            queues: self.queues.values().cloned().collect(),
            priority_classes: self.priority_classes.values().cloned().collect(),
            namespaces: self.namespaces.values().cloned().collect(),
            pvcs: self.pvcs.values().cloned().collect(),
            pvs: self.pvs.values().cloned().collect(),
            storage_classes: self.storage_classes.values().cloned().collect(),
            csi_nodes: self.csi_nodes.values().cloned().collect(),
            services: self.services.values().cloned().collect(),
            replication_controllers: self.replication_controllers.values().cloned().collect(),
            replica_sets: self.replica_sets.values().cloned().collect(),
            stateful_sets: self.stateful_sets.values().cloned().collect(),
            hyper_nodes: self.hyper_nodes.values().cloned().collect(),
        }
    }

    /// The snapshot for the next cycle, from the one kept since the last: brought up to
    /// date in place with the objects changed since (the scheduler's path,
    /// [`KeptSnapshot::snapshot`]), or built when nothing is kept or the changes need it.
    pub fn snapshot(&mut self, scheduler_names: &[&str]) -> Result<Snapshot, SnapshotError> {
        let mut kept = std::mem::take(&mut self.kept);
        let result = kept.snapshot(&*self, scheduler_names);
        self.kept = kept;
        result
    }

    /// Keeps `snapshot`, built from the cluster as it is now, for the next cycle.
    pub fn keep_snapshot(&mut self, snapshot: Snapshot) {
        self.kept.keep(snapshot);
    }

    /// The snapshot kept for the next cycle, if any, as of the last [`Cluster::snapshot`].
    pub fn kept_snapshot(&self) -> Option<&Snapshot> {
        self.kept.kept()
    }

    /// How many snapshots were built, and how many brought up to date in place.
    pub fn snapshot_counts(&self) -> (u64, u64) {
        (self.kept.rebuilds(), self.kept.updates())
    }

    /// Adds or replaces a pod.
    pub fn put_pod(&mut self, key: String, mut pod: Arc<Pod>) {
        share_spec(&mut self.specs, &mut pod);
        self.kept.pod_changed(&key);
        self.track_finish(&key, &pod);
        self.pods.insert(key, pod);
    }

    /// Deletes a pod.
    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<Pod>> {
        self.kept.pod_changed(key);
        let pod = self.pods.remove(key)?;
        if let Some(at) = finish_ms(&pod) {
            self.finishes.remove(&(at, key.to_string()));
        }
        Some(pod)
    }

    /// Adds or replaces a PodGroup.
    pub fn put_pod_group(&mut self, key: String, pod_group: Arc<PodGroup>) {
        self.kept.pod_group_changed(&key);
        self.pod_groups.insert(key, pod_group);
    }

    /// Deletes a PodGroup.
    pub fn remove_pod_group(&mut self, key: &str) -> Option<Arc<PodGroup>> {
        self.kept.pod_group_changed(key);
        self.pod_groups.remove(key)
    }

    /// PriorityClass name → value.
    pub fn priority_class_values(&self) -> BTreeMap<String, i32> {
        self.priority_classes.iter().map(|(n, pc)| (n.clone(), pc.value)).collect()
    }

    /// Indexes every Running pod with [`RUN_SECONDS_ANNOTATION`] by the time it finishes
    /// (once, after loading; then kept as pods change).
    pub fn index_finishes(&mut self) {
        self.finishes = self.pods.iter().filter_map(|(k, p)| Some((finish_ms(p)?, k.clone()))).collect();
    }

    fn track_finish(&mut self, key: &str, pod: &Pod) {
        if let Some(old) = self.pods.get(key).and_then(|p| finish_ms(p)) {
            self.finishes.remove(&(old, key.to_string()));
        }
        if let Some(at) = finish_ms(pod) {
            self.finishes.insert((at, key.to_string()));
        }
    }

    /// When the next running pod finishes, if one has a run time.
    pub fn next_finish_ms(&self) -> Option<i64> {
        self.finishes.first().map(|(at, _)| *at)
    }

    /// The pods whose run time ([`RUN_SECONDS_ANNOTATION`]) is over at `now_ms` succeed:
    /// phase `Succeeded`, every container terminated with exit code 0 at the time it
    /// finished, not ready. Returns their keys, in the order they finished.
    pub fn finish_due(&mut self, now_ms: i64) -> Vec<String> {
        let mut done = Vec::new();
        while let Some((at, key)) = self.finishes.first().cloned() {
            if at > now_ms {
                break;
            }
            self.finishes.pop_first();
            let Some(pod) = self.pods.get_mut(&key) else { continue };
            let pod = Arc::make_mut(pod);
            let end = Time(k8s_openapi::jiff::Timestamp::from_millisecond(at).unwrap_or_default());
            let status = pod.status.get_or_insert_with(Default::default);
            status.phase = Some("Succeeded".into());
            for c in status.container_statuses.iter_mut().flatten() {
                let started = c.state.as_ref().and_then(|s| s.running.as_ref()).and_then(|r| r.started_at.clone());
                c.ready = false;
                c.started = Some(false);
                c.state = Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 0,
                        reason: Some("Completed".into()),
                        started_at: started,
                        finished_at: Some(end.clone()),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
            self.kept.pod_changed(&key);
            done.push(key);
        }
        done
    }

    /// Applies a cycle's effects in order, as a cluster would, and records what changed:
    ///
    /// - `Bind`: the pod gets `spec.nodeName`, phase `Running`, a start time and a status for
    ///   each container, started, running and ready (no container runs: they start at once
    ///   and pass any readiness probe; see [`started_containers`]), and loses its nominated
    ///   node;
    /// - `Evict`: the pod is deleted;
    /// - `Pipeline`: the pod gets `status.nominatedNodeName`;
    /// - `PodUnschedulable`: the pod's `PodScheduled` condition becomes `False` with the
    ///   effect's reason and message, and a `FailedScheduling` event is recorded;
    /// - `PodGroupStatus`: the PodGroup's status is replaced;
    /// - `QueueStatus`: the Queue's `status.allocated` is replaced;
    /// - `Event`: recorded only.
    ///
    /// An effect naming an object that does not exist, or whose uid differs from the
    /// object's (it was replaced), or binding a pod that already has a node, is an error:
    /// the effects before it have been applied.
    pub fn apply_effects(&mut self, effects: &[Effect], cycle: u64, now_ms: i64) -> Result<CycleRecord, EffectError> {
        let now = Time(k8s_openapi::jiff::Timestamp::from_millisecond(now_ms).unwrap_or_default());
        let mut rec = CycleRecord { cycle, time_ms: now_ms, ..CycleRecord::default() };
        for effect in effects {
            match effect {
                Effect::Bind { pod, node, annotations } => {
                    let what = || format!("bind {pod} to {node}");
                    if !self.nodes.contains_key(&**node) {
                        return Err(fail(what(), format!("node {node} does not exist")));
                    }
                    let p = pod_mut(&mut self.pods, pod, what)?;
                    if let Some(bound) = p.node_name() {
                        return Err(fail(what(), format!("the pod is already bound to {bound}")));
                    }
                    let p = Arc::make_mut(p);
                    p.set_node_name(Some(node.to_string()));
                    if !annotations.is_empty() {
                        let map = p.metadata.annotations.get_or_insert_with(Default::default);
                        for (k, v) in annotations {
                            map.insert((*k).to_string(), v.clone());
                        }
                    }
                    let containers = p.spec.as_deref().map(|s| started_containers(s, &now)).unwrap_or_default();
                    let status = p.status.get_or_insert_with(Default::default);
                    status.phase = Some("Running".into());
                    status.nominated_node_name = None;
                    status.start_time = Some(now.clone());
                    status.container_statuses = Some(containers);
                    if let Some(cs) = status.conditions.as_mut() {
                        cs.retain(|c| c.type_ != pod_condition::POD_SCHEDULED);
                    }
                    if let Some(at) = finish_ms(p) {
                        self.finishes.insert((at, pod.key().to_string()));
                    }
                    self.kept.pod_changed(pod.key());
                    rec.binds.push(Placement { pod: pod.to_string(), node: node.to_string() });
                }
                Effect::Evict { pod, node, action, reason } => {
                    pod_mut(&mut self.pods, pod, || format!("evict {pod} from {node}"))?;
                    self.remove_pod(pod.key());
                    rec.evictions.push(Eviction {
                        pod: pod.to_string(),
                        node: node.to_string(),
                        action: action.to_string(),
                        reason: reason.clone(),
                    });
                }
                Effect::Pipeline { pod, node } => {
                    let what = || format!("nominate {node} for {pod}");
                    if !self.nodes.contains_key(&**node) {
                        return Err(fail(what(), format!("node {node} does not exist")));
                    }
                    let p = pod_mut(&mut self.pods, pod, what)?;
                    let current = p.status.as_ref().and_then(|s| s.nominated_node_name.as_deref());
                    if current != Some(&**node) {
                        let status = Arc::make_mut(p).status.get_or_insert_with(Default::default);
                        status.nominated_node_name = Some(node.to_string());
                        self.kept.pod_changed(pod.key());
                        rec.pipelined.push(Placement { pod: pod.to_string(), node: node.to_string() });
                    }
                }
                Effect::PodUnschedulable { pod, condition } => {
                    let p = pod_mut(&mut self.pods, pod, || format!("condition of pod {pod}"))?;
                    condition.set_on(Arc::make_mut(p), now.clone());
                    self.kept.pod_changed(pod.key());
                    rec.pod_condition_updates.push(pod.to_string());
                    // The event the kube backend records with the condition, as Volcano does.
                    rec.events.push(EventRecord {
                        object: format!("Pod/{pod}"),
                        type_: "Warning".into(),
                        reason: volcano_api::names::event_reason::FAILED_SCHEDULING.into(),
                        message: condition.message.to_string(),
                    });
                }
                Effect::PodGroupStatus { pod_group, status } => {
                    let missing = || {
                        fail(format!("status of PodGroup {pod_group}"), format!("PodGroup {pod_group} does not exist"))
                    };
                    let pg = self.pod_groups.get_mut(pod_group.key()).ok_or_else(missing)?;
                    if pod_group.uid().is_some_and(|u| pg.metadata.uid.as_deref() != Some(u)) {
                        return Err(fail(
                            format!("status of PodGroup {pod_group}"),
                            format!("PodGroup {pod_group} was replaced (uid {})", pod_group.uid().unwrap_or_default()),
                        ));
                    }
                    let changed = !same_status(&pg.status.clone().unwrap_or_default(), status);
                    Arc::make_mut(pg).status = Some(status.clone());
                    self.kept.pod_group_changed(pod_group.key());
                    if changed {
                        rec.pod_group_updates.push(pod_group.to_string());
                    }
                }
                Effect::QueueStatus { queue, allocated } => {
                    let q = self.queues.get_mut(queue.key()).ok_or_else(|| {
                        fail(format!("status of Queue {queue}"), format!("queue {queue} does not exist"))
                    })?;
                    let old = q.status.as_ref().and_then(|s| s.allocated.as_ref());
                    if old != Some(allocated) {
                        Arc::make_mut(q).status.get_or_insert_with(Default::default).allocated =
                            Some(allocated.clone());
                        self.kept.queue_changed(queue.key());
                        rec.queue_updates.push(queue.to_string());
                    }
                }
                Effect::Event(event) => {
                    let object = format!("{}/{}", event.kind.as_str(), event.object);
                    tracing::debug!(cycle, object = %object, type_ = event.type_.as_str(), reason = event.reason, "{}", event.message);
                    rec.events.push(EventRecord {
                        object,
                        type_: event.type_.as_str().to_string(),
                        reason: event.reason.to_string(),
                        message: event.message.clone(),
                    });
                }
            }
        }
        Ok(rec)
    }
}

/// When a pod with [`RUN_SECONDS_ANNOTATION`] finishes: its start time plus its run time,
/// for a Running pod; `None` for any other pod, or a run time that is not a non-negative
/// number of seconds.
pub fn finish_ms(pod: &Pod) -> Option<i64> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    let secs: f64 = pod.metadata.annotations.as_ref()?.get(RUN_SECONDS_ANNOTATION)?.trim().parse().ok()?;
    if !secs.is_finite() || secs < 0.0 {
        return None;
    }
    let start = status.start_time.as_ref()?.0.as_millisecond();
    Some(start.saturating_add((secs * 1000.0).round() as i64))
}

impl SnapshotSource for Cluster {
    fn objects(&self) -> ClusterObjects {
        Cluster::objects(self)
    }

    fn extra_objects(&self) -> ClusterObjects {
        ClusterObjects {
            nodes: Vec::new(),
            pods: Vec::new(),
            pod_groups: Vec::new(),
            queues: Vec::new(),
            ..self.objects()
        }
    }

    fn priority_classes(&self) -> Vec<Arc<PriorityClass>> {
        self.priority_classes.values().cloned().collect()
    }

    fn pod(&self, key: &str) -> Option<Arc<Pod>> {
        self.pods.get(key).cloned()
    }

    fn pod_group(&self, key: &str) -> Option<Arc<PodGroup>> {
        self.pod_groups.get(key).cloned()
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).cloned()
    }

    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.queues.get(name).cloned()
    }
}

/// What a watch would have reported between two listings of a cluster's scheduled kinds:
/// every pod, PodGroup, node and queue of `now` that is not the very object (the same
/// `Arc`) it was in `before`, and `None` for those `now` no longer has. A scheduler that
/// keeps its snapshot brings it up to date with these ([`volcano_framework::Snapshot::update`]).
pub fn changes(before: &ClusterObjects, now: &ClusterObjects) -> volcano_framework::Changes {
    fn key(m: &ObjectMeta) -> String {
        match &m.namespace {
            Some(ns) => format!("{ns}/{}", m.name.as_deref().unwrap_or_default()),
            None => m.name.clone().unwrap_or_default(),
        }
    }
    fn diff<K>(a: &[Arc<K>], b: &[Arc<K>], meta: fn(&K) -> &ObjectMeta) -> Vec<(String, Option<Arc<K>>)> {
        let old: BTreeMap<String, &Arc<K>> = a.iter().map(|o| (key(meta(o)), o)).collect();
        let new: BTreeMap<String, &Arc<K>> = b.iter().map(|o| (key(meta(o)), o)).collect();
        let mut out: Vec<(String, Option<Arc<K>>)> = new
            .iter()
            .filter(|(k, o)| old.get(*k).is_none_or(|p| !Arc::ptr_eq(p, o)))
            .map(|(k, o)| (k.clone(), Some((*o).clone())))
            .collect();
        out.extend(old.keys().filter(|k| !new.contains_key(*k)).map(|k| (k.clone(), None)));
        out
    }
    volcano_framework::Changes {
        pods: diff(&before.pods, &now.pods, |o| &o.metadata),
        pod_groups: diff(&before.pod_groups, &now.pod_groups, |o| &o.metadata),
        nodes: diff(&before.nodes, &now.nodes, |o| &o.metadata),
        queues: diff(&before.queues, &now.queues, |o| &o.metadata),
    }
}
