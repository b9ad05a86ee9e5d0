//! Kubernetes objects → the snapshot model: which nodes, pods, PodGroups and queues a
//! session sees, each pod's requests and shape, and the job and node accounting they start
//! with. Large inputs are converted on several threads with the same result.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, PersistentVolume, PersistentVolumeClaim, PodSpec, ReplicationController, Service,
    Volume,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rayon::prelude::*;
use thiserror::Error;
use volcano_api::crd::{self, PodGroup, PodGroupPhase, Queue, QueueState, ResourceList};
use volcano_api::quantity::QuantityError;
use volcano_api::topology::HyperNode;

use crate::cow::CowVec;
use crate::model::*;
use crate::resource::{Resource, PODS};

use super::Snapshot;

/// The Kubernetes objects a snapshot is built from (what the reflectors, the simulator or a
/// test fixture hold).
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods (all schedulers: bound pods of others still use their node).
    pub pods: Vec<Arc<Pod>>,
    /// PodGroups.
    pub pod_groups: Vec<Arc<PodGroup>>,
    /// Queues.
    pub queues: Vec<Arc<Queue>>,
    /// PriorityClasses.
    pub priority_classes: Vec<Arc<PriorityClass>>,
    /// Namespaces (their labels answer the namespace selectors of pod affinity terms).
    pub namespaces: Vec<Arc<Namespace>>,
    /// PersistentVolumeClaims (the `predicates` plugin's volume checks).
    pub pvcs: Vec<Arc<PersistentVolumeClaim>>,
    /// PersistentVolumes.
    pub pvs: Vec<Arc<PersistentVolume>>,
    /// StorageClasses.
    pub storage_classes: Vec<Arc<StorageClass>>,
    /// CSINodes (the volume attach limits of CSI drivers per node).
    pub csi_nodes: Vec<Arc<CSINode>>,
    /// Services (their selectors make the system-default topology spread constraints).
    pub services: Vec<Arc<Service>>,
    /// ReplicationControllers (likewise, for the pods they control).
    pub replication_controllers: Vec<Arc<ReplicationController>>,
    /// ReplicaSets (likewise).
    pub replica_sets: Vec<Arc<ReplicaSet>>,
    /// StatefulSets (likewise).
    pub stateful_sets: Vec<Arc<StatefulSet>>,
    /// HyperNodes (the network topology, `topology.volcano.sh`).
    pub hyper_nodes: Vec<Arc<HyperNode>>,
}

/// An object that cannot enter the snapshot.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{kind} {name}: field {field}: {source}")]
pub struct SnapshotError {
    /// Object kind.
    pub kind: &'static str,
    /// `namespace/name` or name.
    pub name: String,
    /// The offending field.
    pub field: String,
    /// What was wrong.
    #[source]
    pub source: QuantityError,
}

impl SnapshotError {
    /// A bounded label for metrics.
    pub fn category(&self) -> &'static str {
        "invalid_quantity"
    }
}

fn meta_key(m: &ObjectMeta) -> String {
    let name = m.name.as_deref().unwrap_or_default();
    match &m.namespace {
        Some(ns) => {
            let mut k = String::with_capacity(ns.len() + 1 + name.len());
            k.push_str(ns);
            k.push('/');
            k.push_str(name);
            k
        }
        None => name.to_string(),
    }
}

/// A pod in [`Snapshot::build`]: the first bytes of its key (see [`key_prefix`]), the key
/// (taken when the task is made) and the pod.
type PodEntry<'o> = (u128, Option<Arc<str>>, &'o Arc<Pod>);

/// The first 16 bytes of a key, big-endian, zero-padded: comparing prefixes orders keys as
/// comparing the keys does, except that equal prefixes leave the order open.
fn key_prefix(key: &str) -> u128 {
    let mut bytes = [0u8; 16];
    let n = key.len().min(16);
    bytes[..n].copy_from_slice(&key.as_bytes()[..n]);
    u128::from_be_bytes(bytes)
}

/// `namespace/name` as a shared string, built in `buf` (one allocation).
fn shared_key(m: &ObjectMeta, buf: &mut String) -> Arc<str> {
    buf.clear();
    if let Some(ns) = &m.namespace {
        buf.push_str(ns);
        buf.push('/');
    }
    buf.push_str(m.name.as_deref().unwrap_or_default());
    Arc::from(buf.as_str())
}

fn time_ms(t: &Option<Time>) -> i64 {
    t.as_ref().map(|t| t.0.as_millisecond()).unwrap_or(0)
}

fn annotation_or_label<'a>(m: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    m.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .or_else(|| m.labels.as_ref().and_then(|l| l.get(key)))
        .map(String::as_str)
}

fn parse_bool(v: Option<&str>, default: bool) -> bool {
    match v {
        Some(s) if s.eq_ignore_ascii_case("true") => true,
        Some(s) if s.eq_ignore_ascii_case("false") => false,
        _ => default,
    }
}

fn list_resource(kind: &'static str, name: &str, field: &str, list: &ResourceList) -> Result<Resource, SnapshotError> {
    Resource::from_list(list).map_err(|(res, source)| SnapshotError {
        kind,
        name: name.to_string(),
        field: format!("{field}.{res}"),
        source,
    })
}

/// cpu a container that requests none counts for in the non-zero request, in millicores
/// (kube-scheduler's `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// memory a container that requests none counts for in the non-zero request, in bytes
/// (kube-scheduler's `DefaultMemoryRequest`, 200Mi).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A container's request: requests, with limits standing in for missing requests (the API
/// server defaults a missing request to the limit), and its non-zero cpu and memory (the
/// defaults for a dimension set in neither). `Err` names the resource.
fn container_request(c: &Container) -> Result<(Resource, i64, i64), (String, QuantityError)> {
    let mut r = Resource::empty();
    let Some(res) = &c.resources else { return Ok((r, DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)) };
    let (mut has_cpu, mut has_memory) = (false, false);
    if let Some(req) = &res.requests {
        r.add_list(req, None)?;
        has_cpu = req.contains_key("cpu");
        has_memory = req.contains_key("memory");
    }
    if let Some(limits) = &res.limits {
        r.add_list(limits, res.requests.as_ref())?;
        has_cpu = has_cpu || limits.contains_key("cpu");
        has_memory = has_memory || limits.contains_key("memory");
    }
    let cpu = if has_cpu { r.milli_cpu as i64 } else { DEFAULT_MILLI_CPU_REQUEST };
    let memory = if has_memory { r.memory as i64 } else { DEFAULT_MEMORY_REQUEST };
    Ok((r, cpu, memory))
}

/// A pod's requests: the [`pod_request`] and the non-zero cpu (millicores) and memory
/// (bytes), aggregated the same way (kube-scheduler's `NonMissingContainerRequests`).
#[derive(Clone, Debug, PartialEq)]
pub struct PodRequests {
    /// See [`pod_request`].
    pub resreq: Resource,
    /// See [`TaskInfo::nonzero_cpu`].
    pub nonzero_cpu: i64,
    /// See [`TaskInfo::nonzero_memory`].
    pub nonzero_memory: i64,
}

/// The resource request of a pod, as Volcano computes it: the sum over containers, max'ed
/// with each init container (restartable "sidecar" init containers add up), plus overhead,
/// plus `pods: 1`.
pub fn pod_request(pod: &Pod) -> Result<Resource, SnapshotError> {
    pod_requests(pod).map(|r| r.resreq)
}

/// [`pod_request`] together with the non-zero cpu and memory requests, in one pass.
pub fn pod_requests(pod: &Pod) -> Result<PodRequests, SnapshotError> {
    let fail = |field: String| {
        let key = meta_key(&pod.metadata);
        move |(res, source): (String, QuantityError)| SnapshotError {
            kind: "Pod",
            name: key,
            field: format!("{field}.{res}"),
            source,
        }
    };
    let Some(spec) = &pod.spec else {
        let mut r = Resource::empty();
        r.add_scalar(PODS, 1.0);
        return Ok(PodRequests { resreq: r, nonzero_cpu: 0, nonzero_memory: 0 });
    };
    let mut total = Resource::empty();
    let (mut cpu, mut memory) = (0i64, 0i64);
    for (i, c) in spec.containers.iter().enumerate() {
        let (r, c_cpu, c_memory) =
            container_request(c).map_err(|e| fail(format!("spec.containers[{i}].resources"))(e))?;
        if i == 0 {
            total = r;
        } else {
            total.add(&r);
        }
        cpu += c_cpu;
        memory += c_memory;
    }
    if let Some(inits) = spec.init_containers.as_ref().filter(|v| !v.is_empty()) {
        let mut sidecars = Resource::empty();
        let mut init_max = Resource::empty();
        let (mut side_cpu, mut side_memory) = (0i64, 0i64);
        let (mut init_cpu, mut init_memory) = (0i64, 0i64);
        for (i, c) in inits.iter().enumerate() {
            let (r, c_cpu, c_memory) =
                container_request(c).map_err(|e| fail(format!("spec.initContainers[{i}].resources"))(e))?;
            if c.restart_policy.as_deref() == Some("Always") {
                sidecars.add(&r);
                init_max.set_max(&sidecars);
                cpu += c_cpu;
                memory += c_memory;
                side_cpu += c_cpu;
                side_memory += c_memory;
                init_cpu = init_cpu.max(side_cpu);
                init_memory = init_memory.max(side_memory);
            } else {
                let mut during = r;
                during.add(&sidecars);
                init_max.set_max(&during);
                init_cpu = init_cpu.max(c_cpu + side_cpu);
                init_memory = init_memory.max(c_memory + side_memory);
            }
        }
        total.add(&sidecars);
        total.set_max(&init_max);
        cpu = cpu.max(init_cpu);
        memory = memory.max(init_memory);
    }
    if let Some(overhead) = &spec.overhead {
        let mut r = Resource::empty();
        r.add_list(overhead, None).map_err(|e| fail("spec.overhead".into())(e))?;
        total.add(&r);
        cpu += r.milli_cpu as i64;
        memory += r.memory as i64;
    }
    total.add_scalar(PODS, 1.0);
    Ok(PodRequests { resreq: total, nonzero_cpu: cpu, nonzero_memory: memory })
}

fn task_status(pod: &Pod) -> TaskStatus {
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let has_node = pod.node_name().is_some();
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending") {
        "Running" if deleting => TaskStatus::Releasing,
        "Running" => TaskStatus::Running,
        "Pending" if has_node && deleting => TaskStatus::Releasing,
        "Pending" if has_node => TaskStatus::Bound,
        "Pending" => TaskStatus::Pending,
        "Succeeded" => TaskStatus::Succeeded,
        "Failed" => TaskStatus::Failed,
        _ => TaskStatus::Unknown,
    }
}

fn name_index(name: &str) -> Option<i64> {
    if name.matches('-').count() >= 2 {
        name.rsplit('-').next().and_then(|p| p.parse().ok())
    } else {
        None
    }
}

pub(super) fn node_ready(node: &Node) -> bool {
    // A node without a Ready condition (a manifest written by hand) counts as Ready.
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True")
}

/// What the per-pod part of [`Snapshot::build`] reads.
pub(super) struct PodContext<'a> {
    pub(super) scheduler_names: &'a [&'a str],
    pub(super) job_by_key: &'a HashMap<Arc<str>, JobId>,
    pub(super) node_by_name: &'a HashMap<String, NodeId>,
    pub(super) priority_of: HashMap<&'a str, i32>,
}

/// Below this many objects, the snapshot is built on the calling thread only.
const PARALLEL_MIN: usize = 4096;
/// Pods per unit of parallel work.
const POD_CHUNK: usize = 256;
/// Pods prepared before their tasks are numbered.
const POD_WAVE: usize = 32 * POD_CHUNK;

/// A node's entry, its resource lists parsed.
pub(super) fn node_info(n: &Arc<Node>) -> Result<NodeInfo, SnapshotError> {
    let name: Arc<str> = Arc::from(n.metadata.name.as_deref().unwrap_or_default());
    let status = n.status.as_ref();
    let capacity = match status.and_then(|s| s.capacity.as_ref()) {
        Some(c) => list_resource("Node", &name, "status.capacity", c)?,
        None => Resource::empty(),
    };
    let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(a) => list_resource("Node", &name, "status.allocatable", a)?,
        None => capacity.clone(),
    };
    Ok(NodeInfo {
        name,
        idle: allocatable.clone(),
        capacity,
        allocatable,
        used: Resource::empty(),
        releasing: Resource::empty(),
        pipelined: Resource::empty(),
        nonzero_cpu: 0,
        nonzero_memory: 0,
        tasks: Arc::default(),
        gpus: crate::device::NodeGpus::from_node(n).map(Arc::new),
        unschedulable: n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        has_taints: n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| !t.is_empty()),
        node: n.clone(),
    })
}

/// Whether the node object reports any container image (`status.images` not empty).
pub(super) fn reports_images(n: &Node) -> bool {
    n.status.as_ref().and_then(|s| s.images.as_ref()).is_some_and(|i| !i.is_empty())
}

/// What the snapshot makes of a pod: its task and the node the task occupies (`None` for a
/// pod the snapshot leaves out), and, for a pod of this scheduler that names a PodGroup the
/// snapshot lacks, its key and the pod (a PodGroup that appears later takes it in).
pub(super) struct PodTask {
    pub(super) task: Option<(TaskInfo, Option<NodeId>)>,
    pub(super) awaiting: Option<(Arc<str>, Arc<Pod>)>,
}

/// A pod's task before it is numbered.
struct Prepared {
    pod: PodTask,
    /// How the task compares with the previous pod in key order, when that is a task.
    previous: Previous,
    /// The task's [`request_key`], computed on all cores (not when `previous` is `Same`).
    request_key: Option<u64>,
}

/// How a task compares with the task of the previous pod in key order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Previous {
    /// The previous pod is not a task (or there is none in this run of pods).
    Unknown,
    /// The previous pod is a task of the same shape.
    Same,
    /// The previous pod is a task of another shape.
    Other,
}

/// The job of the last pod looked up: the pods of a job are neighbours in key order.
#[derive(Default)]
pub(super) struct GroupCache {
    namespace: String,
    group: String,
    job: Option<JobId>,
    key: String,
}

impl GroupCache {
    fn job(&mut self, namespace: &str, group: &str, jobs: &HashMap<Arc<str>, JobId>) -> Option<JobId> {
        if self.namespace != namespace || self.group != group || self.key.is_empty() {
            self.key.clear();
            self.key.push_str(namespace);
            self.key.push('/');
            self.key.push_str(group);
            self.job = jobs.get(self.key.as_str()).copied();
            self.namespace.clear();
            self.namespace.push_str(namespace);
            self.group.clear();
            self.group.push_str(group);
        }
        self.job
    }
}

impl PodContext<'_> {
    /// The tasks of a run of pods in key order (their keys are taken).
    fn prepare(&self, pods: &mut [PodEntry<'_>]) -> Vec<Result<Option<Prepared>, SnapshotError>> {
        let mut groups = GroupCache::default();
        let mut out: Vec<Result<Option<Prepared>, SnapshotError>> = Vec::with_capacity(pods.len());
        for (_, key, pod) in pods {
            let key = key.take().expect("each key is taken once");
            let r = self.task(key, pod, &mut groups).map(|pod| {
                let previous = match (out.last(), &pod.task) {
                    (Some(Ok(Some(Prepared { pod: PodTask { task: Some((p, _)), .. }, .. }))), Some((t, _))) => {
                        if same_shape(p, t) {
                            Previous::Same
                        } else {
                            Previous::Other
                        }
                    }
                    _ => Previous::Unknown,
                };
                let request_key = match &pod.task {
                    Some((t, _)) if previous != Previous::Same => Some(request_key(t)),
                    _ => None,
                };
                (pod.task.is_some() || pod.awaiting.is_some()).then_some(Prepared { pod, previous, request_key })
            });
            out.push(r);
        }
        out
    }

    /// What the snapshot makes of a pod (see [`PodTask`]). The task's shape is set by the
    /// caller.
    pub(super) fn task(
        &self,
        key: Arc<str>,
        pod: &Arc<Pod>,
        groups: &mut GroupCache,
    ) -> Result<PodTask, SnapshotError> {
        let spec = pod.spec.as_ref();
        let node_name = pod.node_name();
        let ours = spec.and_then(|s| s.scheduler_name.as_deref()).is_some_and(|n| self.scheduler_names.contains(&n));
        if node_name.is_none() && !ours {
            return Ok(PodTask { task: None, awaiting: None });
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let group =
            if ours { pod.metadata.annotations.as_ref().and_then(|a| a.get(crd::GROUP_NAME_ANNOTATION)) } else { None };
        let job = group.and_then(|g| groups.job(namespace, g, self.job_by_key));
        let awaiting = (group.is_some() && job.is_none()).then(|| (key.clone(), pod.clone()));
        let node = node_name.and_then(|n| self.node_by_name.get(n).copied());
        if node_name.is_some() && node.is_none() && job.is_none() {
            // A pod on a node outside the snapshot, in no job: irrelevant.
            return Ok(PodTask { task: None, awaiting });
        }
        let status = task_status(pod);
        let PodRequests { resreq, nonzero_cpu, nonzero_memory } = pod_requests(pod)?;
        let task_priority = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crd::TASK_PRIORITY_ANNOTATION))
            .and_then(|v| v.parse().ok())
            .or_else(|| spec.and_then(|s| s.priority))
            .or_else(|| {
                spec.and_then(|s| s.priority_class_name.as_deref()).and_then(|n| self.priority_of.get(n).copied())
            })
            .unwrap_or(1);
        let task = TaskInfo {
            ns_len: namespace.len() as u32,
            role: annotation_or_label(&pod.metadata, crd::TASK_SPEC_KEY).unwrap_or_default().to_string(),
            sub_group: None,
            gpu: crate::device::pod_ask(pod),
            devices: None,
            best_effort: resreq.is_empty(),
            resreq,
            nonzero_cpu,
            nonzero_memory,
            shape: 0,
            priority: task_priority,
            preemptable: parse_bool(annotation_or_label(&pod.metadata, crd::PREEMPTABLE_KEY), true),
            status,
            node: None,
            nominated_node: pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()),
            preemption_never: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
            sch_gated: spec.and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty()),
            creation_ms: time_ms(&pod.metadata.creation_timestamp),
            name_index: name_index(pod.metadata.name.as_deref().unwrap_or_default()),
            pod_uid: Arc::from(pod.metadata.uid.as_deref().unwrap_or_default()),
            key,
            job,
            pod: pod.clone(),
        };
        Ok(PodTask { task: Some((task, node)), awaiting })
    }
}

/// Hash of what makes a task's requests, namespace, node selector and tolerations: FNV-1a
/// over names and value bits (stable and cheap; a collision only costs a constraint
/// comparison).
fn request_key(t: &TaskInfo) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    let mut mix = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    };
    for (n, v) in t.resreq.dims() {
        n.bytes().for_each(&mut mix);
        v.to_bits().to_le_bytes().into_iter().for_each(&mut mix);
    }
    if let Some(g) = &t.gpu {
        for v in [g.kind as u32, g.count, g.memory_mib, g.memory_percent, g.cores] {
            v.to_le_bytes().into_iter().for_each(&mut mix);
        }
    }
    t.nonzero_cpu.to_le_bytes().into_iter().for_each(&mut mix);
    t.nonzero_memory.to_le_bytes().into_iter().for_each(&mut mix);
    // Fields `same_shape_with` compares for equality in both of its modes: hashing them
    // keeps the candidate lists of a cluster with many selector and toleration variants
    // of one request short.
    t.namespace().bytes().for_each(&mut mix);
    mix(0xff);
    if let Some(spec) = t.pod.spec.as_ref() {
        for (k, v) in spec.node_selector.iter().flatten() {
            k.bytes().chain([0xfe]).chain(v.bytes()).for_each(&mut mix);
            mix(0xff);
        }
        for tol in spec.tolerations.iter().flatten() {
            for part in [&tol.key, &tol.operator, &tol.value, &tol.effect] {
                part.as_deref().unwrap_or_default().bytes().for_each(&mut mix);
                mix(0xfe);
            }
            tol.toleration_seconds.unwrap_or(-1).to_le_bytes().into_iter().for_each(&mut mix);
            mix(0xff);
        }
        for v in scheduling_volumes(spec) {
            if let Some(c) = &v.persistent_volume_claim {
                c.claim_name.bytes().for_each(&mut mix);
            } else if v.ephemeral.is_some() {
                // The claim of a generic ephemeral volume is `<pod>-<volume>`.
                t.name().bytes().for_each(&mut mix);
                v.name.bytes().for_each(&mut mix);
            }
            mix(0xff);
        }
    }
    h
}

/// The volumes of a pod that scheduling reads (the `predicates` plugin's volume checks):
/// PersistentVolumeClaims, generic ephemeral volumes (whose claim is named after the pod)
/// and inline CSI volumes.
fn scheduling_volumes(spec: &PodSpec) -> impl Iterator<Item = &Volume> + '_ {
    spec.volumes
        .iter()
        .flatten()
        .filter(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some() || v.csi.is_some())
}

/// Whether two pods have the same [`scheduling_volumes`]: the same claims in the same
/// order, the same inline CSI sources, and generic ephemeral volumes only if they are the
/// same pod's (their claims are named after the pod).
fn same_volumes(a: &TaskInfo, x: &PodSpec, b: &TaskInfo, y: &PodSpec) -> bool {
    let (mut l, mut r) = (scheduling_volumes(x), scheduling_volumes(y));
    loop {
        match (l.next(), r.next()) {
            (None, None) => return true,
            (Some(v), Some(w)) => {
                let (cv, cw) = (&v.persistent_volume_claim, &w.persistent_volume_claim);
                if cv.as_ref().map(|c| &c.claim_name) != cw.as_ref().map(|c| &c.claim_name)
                    || v.csi != w.csi
                    || v.ephemeral.is_some() != w.ephemeral.is_some()
                {
                    return false;
                }
                if v.ephemeral.is_some() && (v.name != w.name || a.key != b.key) {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Whether two tasks have the same shape (see [`TaskInfo::shape`]).
pub(super) fn same_shape(a: &TaskInfo, b: &TaskInfo) -> bool {
    same_shape_with(a, b, true)
}

/// Whether two tasks have the same shape but for their inter-pod rules (pod affinity and
/// anti-affinity, topology spread constraints): what a plugin's
/// [`crate::Incremental::rule_exceptions`] compares with.
pub(crate) fn same_base_shape(a: &TaskInfo, b: &TaskInfo) -> bool {
    same_shape_with(a, b, false)
}

fn same_shape_with(a: &TaskInfo, b: &TaskInfo, pod_rules: bool) -> bool {
    use k8s_openapi::api::core::v1::ContainerPort;
    if a.resreq != b.resreq || a.nonzero_cpu != b.nonzero_cpu || a.nonzero_memory != b.nonzero_memory || a.gpu != b.gpu
    {
        return false;
    }
    let (Some(x), Some(y)) = (a.pod.spec.as_ref(), b.pod.spec.as_ref()) else {
        return a.pod.spec.is_none() && b.pod.spec.is_none();
    };
    fn host_ports(c: &Container) -> impl Iterator<Item = &ContainerPort> + '_ {
        c.ports.iter().flatten().filter(|p| p.host_port.is_some())
    }
    // Container requests are compared through the parsed requests above; images matter to
    // nodeorder's ImageLocality.
    let same_ports = |l: &[Container], r: &[Container]| {
        l.len() == r.len()
            && l.iter().zip(r).all(|(c, d)| {
                c.restart_policy == d.restart_policy && c.image == d.image && host_ports(c).eq(host_ports(d))
            })
    };
    let same_affinity = if pod_rules {
        x.affinity == y.affinity && x.topology_spread_constraints == y.topology_spread_constraints
    } else {
        x.affinity.as_ref().and_then(|a| a.node_affinity.as_ref())
            == y.affinity.as_ref().and_then(|a| a.node_affinity.as_ref())
    };
    x.node_selector == y.node_selector
        && same_affinity
        && x.tolerations == y.tolerations
        && a.namespace() == b.namespace()
        && same_ports(&x.containers, &y.containers)
        && same_ports(x.init_containers.as_deref().unwrap_or(&[]), y.init_containers.as_deref().unwrap_or(&[]))
        && same_volumes(a, x, b, y)
}

/// Assigns shapes in task order: a task compares with the last shape found first (the pods
/// of a job are neighbours and usually alike), then with the shapes of equal requests.
#[derive(Default)]
struct Shapes {
    by_request: HashMap<u64, Vec<(u32, TaskId)>>,
    last: Option<(u32, TaskId)>,
    count: u32,
}

/// The shapes of a snapshot, kept for [`Snapshot::update`]: a task of each shape (a copy,
/// so that tasks can come and go), by hash of its requests.
#[derive(Clone, Debug, Default)]
pub(super) struct ShapeIndex {
    by_request: HashMap<u64, Vec<(u32, TaskInfo)>>,
    /// Number of shapes when the snapshot was built.
    pub(super) built: u32,
    /// Whether a shape has inter-pod rules (pod affinity or anti-affinity, topology spread
    /// constraints); it stays true once a shape had them.
    pub(super) pod_rules: bool,
}

/// Whether the pod has inter-pod rules (part of its shape).
pub(crate) fn has_pod_rules(task: &TaskInfo) -> bool {
    task.pod.spec.as_ref().is_some_and(|s| {
        s.affinity.as_ref().is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
            || s.topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty())
    })
}

impl ShapeIndex {
    fn new(shapes: Shapes, tasks: &CowVec<TaskInfo>) -> Self {
        let by_request = shapes
            .by_request
            .into_iter()
            .map(|(h, reps)| (h, reps.into_iter().map(|(shape, t)| (shape, tasks[t.idx()].clone())).collect()))
            .collect::<HashMap<u64, Vec<(u32, TaskInfo)>>>();
        let pod_rules = by_request.values().flatten().any(|(_, rep)| has_pod_rules(rep));
        ShapeIndex { by_request, built: shapes.count, pod_rules }
    }

    /// The shape of `task`: an existing one, or `*count` (which is then counted).
    pub(super) fn shape_of(&mut self, task: &TaskInfo, count: &mut u32) -> u32 {
        let candidates = self.by_request.entry(request_key(task)).or_default();
        if let Some((shape, _)) = candidates.iter().find(|(_, rep)| same_shape(rep, task)) {
            return *shape;
        }
        let shape = *count;
        *count += 1;
        candidates.push((shape, task.clone()));
        self.pod_rules |= has_pod_rules(task);
        shape
    }
}

impl Shapes {
    /// The shape of `task` (whose [`request_key`] is `key`); `differs_from_last` says the
    /// task is known to differ from the last shape found.
    fn shape_of(
        &mut self,
        tasks: &CowVec<TaskInfo>,
        task: &TaskInfo,
        id: TaskId,
        key: u64,
        differs_from_last: bool,
    ) -> u32 {
        debug_assert_eq!(key, request_key(task));
        if let Some((shape, rep)) = self.last.filter(|_| !differs_from_last) {
            if same_shape(&tasks[rep.idx()], task) {
                return shape;
            }
        }
        let candidates = self.by_request.entry(key).or_default();
        let shape = match candidates.iter().find(|(_, rep)| same_shape(&tasks[rep.idx()], task)) {
            Some(&(shape, rep)) => {
                self.last = Some((shape, rep));
                return shape;
            }
            None => {
                let shape = self.count;
                self.count += 1;
                candidates.push((shape, id));
                shape
            }
        };
        self.last = Some((shape, id));
        shape
    }
}

/// A queue as its object describes it.
pub(super) fn queue_info(q: &Arc<Queue>) -> Result<QueueInfo, SnapshotError> {
    let name = q.metadata.name.clone().unwrap_or_default();
    let spec = &q.spec;
    let capability = match &spec.capability {
        Some(c) => Some(list_resource("Queue", &name, "spec.capability", c)?),
        None => None,
    };
    let deserved = match &spec.deserved {
        Some(c) => Some(list_resource("Queue", &name, "spec.deserved", c)?),
        None => None,
    };
    let guarantee = match spec.guarantee.as_ref().and_then(|g| g.resource.as_ref()) {
        Some(c) => list_resource("Queue", &name, "spec.guarantee.resource", c)?,
        None => Resource::empty(),
    };
    Ok(QueueInfo {
        weight: spec.weight.unwrap_or(1),
        capability,
        deserved,
        guarantee,
        reclaimable: spec.reclaimable.unwrap_or(true),
        priority: spec.priority.unwrap_or(0),
        state: q.status.as_ref().and_then(|st| st.state).unwrap_or(QueueState::Open),
        parent: spec.parent.clone(),
        creation_ms: time_ms(&q.metadata.creation_timestamp),
        name,
        queue: q.clone(),
    })
}

/// The priority of a PodGroup's job: its priority class's value, else the global default.
pub(super) fn job_priority(pg: &PodGroup, priority_of: &HashMap<&str, i32>, global_default: Option<i32>) -> i32 {
    pg.spec.priority_class_name.as_deref().and_then(|n| priority_of.get(n).copied()).or(global_default).unwrap_or(0)
}

/// A job as the PodGroup describes it, without tasks yet.
pub(super) fn job_info(
    pg: &Arc<PodGroup>,
    key: Arc<str>,
    queue: QueueId,
    priority: i32,
) -> Result<JobInfo, SnapshotError> {
    let min_resources = match &pg.spec.min_resources {
        Some(m) => Some(list_resource("PodGroup", &key, "spec.minResources", m)?),
        None => None,
    };
    let waiting_time_ms = annotation_or_label(&pg.metadata, crd::SLA_WAITING_TIME_ANNOTATION)
        .or_else(|| pg.metadata.annotations.as_ref().and_then(|a| a.get("sla-waiting-time")).map(String::as_str))
        .and_then(parse_duration_ms);
    let task_min_available = pg.spec.min_task_member.clone();
    Ok(JobInfo {
        uid: pg.metadata.uid.as_deref().map_or_else(|| key.clone(), Arc::from),
        name: pg.metadata.name.as_deref().unwrap_or_default().into(),
        namespace: pg.metadata.namespace.as_deref().unwrap_or_default().into(),
        queue,
        priority,
        min_available: pg.spec.min_member,
        task_min_available_total: task_min_available.values().sum(),
        task_min_available,
        min_resources,
        preemptable: parse_bool(annotation_or_label(&pg.metadata, crd::PREEMPTABLE_KEY), false),
        waiting_time_ms,
        creation_ms: time_ms(&pg.metadata.creation_timestamp),
        phase: pg.status.as_ref().and_then(|st| st.phase).unwrap_or(PodGroupPhase::Pending),
        status_phase: pg.status.as_ref().and_then(|st| st.phase),
        tasks: Vec::new(),
        status_counts: [0; TaskStatus::COUNT],
        pending_best_effort: 0,
        gated_tasks: 0,
        allocated: Resource::empty(),
        total_request: Resource::empty(),
        version: JobVersion(super::next_revision()),
        sub_groups: SubGroups::of(&pg.spec),
        pod_group: pg.clone(),
        key,
    })
}

impl Snapshot {
    /// Builds the snapshot: only Ready nodes, only PodGroups whose queue exists, the pods of
    /// `scheduler_names` that wait for a node, and every pod that holds a node's resources.
    ///
    /// Large snapshots are built on several threads (rayon); the result is the same.
    pub fn build(objects: &ClusterObjects, scheduler_names: &[&str]) -> Result<Snapshot, SnapshotError> {
        Self::build_with(objects, scheduler_names, PARALLEL_MIN)
    }

    /// [`Snapshot::build`], in parallel for lists of at least `parallel_min` objects.
    fn build_with<'o>(
        objects: &'o ClusterObjects,
        scheduler_names: &[&str],
        parallel_min: usize,
    ) -> Result<Snapshot, SnapshotError> {
        let revision = super::next_revision();
        let mut s = Snapshot { revision, state: revision, growth: revision, ..Snapshot::default() };
        let mut node_by_name = HashMap::with_capacity(objects.nodes.len());
        let mut queue_by_name = HashMap::with_capacity(objects.queues.len());
        let mut job_by_key = HashMap::with_capacity(objects.pod_groups.len());

        let mut nodes: Vec<&Arc<Node>> = objects.nodes.iter().filter(|n| node_ready(n)).collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        // Parsed in chunks of the snapshot's node storage, which take them as they are.
        let chunk = |c: &[&Arc<Node>]| c.iter().map(|n| node_info(n)).collect::<Result<Vec<NodeInfo>, SnapshotError>>();
        let chunks: Vec<Result<Vec<NodeInfo>, SnapshotError>> = if nodes.len() >= parallel_min {
            nodes.par_chunks(crate::cow::CHUNK).map(chunk).collect()
        } else {
            nodes.chunks(crate::cow::CHUNK).map(chunk).collect()
        };
        for infos in chunks {
            let infos = infos?;
            for (i, info) in infos.iter().enumerate() {
                node_by_name.insert(info.name.to_string(), NodeId((s.nodes.len() + i) as u32));
                s.total_resource.add(&info.allocatable);
                s.tainted_nodes += u32::from(info.has_taints);
                s.imaged_nodes += u32::from(reports_images(&info.node));
            }
            s.nodes.push_chunk(infos);
        }

        let mut queues: Vec<&Arc<Queue>> = objects.queues.iter().collect();
        queues.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for q in queues {
            let info = queue_info(q)?;
            queue_by_name.insert(info.name.clone(), QueueId(s.queues.len() as u32));
            s.queues.push(info);
        }

        let priority_of: HashMap<&str, i32> = objects
            .priority_classes
            .iter()
            .filter_map(|pc| pc.metadata.name.as_deref().map(|n| (n, pc.value)))
            .collect();
        let global_default =
            objects.priority_classes.iter().filter(|pc| pc.global_default == Some(true)).map(|pc| pc.value).max();

        let mut pgs: Vec<&Arc<PodGroup>> = objects.pod_groups.iter().collect();
        pgs.sort_by_cached_key(|pg| meta_key(&pg.metadata));
        let mut queueless = BTreeMap::new();
        for pg in pgs {
            let key: Arc<str> = meta_key(&pg.metadata).into();
            let queue_name =
                pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(volcano_api::names::DEFAULT_QUEUE);
            let Some(&queue) = queue_by_name.get(queue_name) else {
                tracing::debug!(job = %key, queue = queue_name, "queue not found: job skipped");
                let priority = job_priority(pg, &priority_of, global_default);
                queueless.insert(key, super::QueuelessGroup { pod_group: Arc::clone(pg), priority });
                continue;
            };
            let priority = job_priority(pg, &priority_of, global_default);
            let id = JobId(s.jobs.len() as u32);
            job_by_key.insert(key.clone(), id);
            s.jobs.push(job_info(pg, key, queue, priority)?);
        }

        let key = |buf: &mut String, p: &'o Arc<Pod>| {
            let key = shared_key(&p.metadata, buf);
            (key_prefix(&key), Some(key), p)
        };
        let mut pods: Vec<PodEntry<'o>> = if objects.pods.len() >= parallel_min {
            objects.pods.par_iter().map_init(String::new, key).collect()
        } else {
            let mut buf = String::new();
            objects.pods.iter().map(|p| key(&mut buf, p)).collect()
        };
        // Key order; the prefixes decide most comparisons without reading the keys.
        pods.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let cx = PodContext { scheduler_names, job_by_key: &job_by_key, node_by_name: &node_by_name, priority_of };
        // The per-pod work (parsing, lookups) runs in parallel on large snapshots, in chunks
        // of neighbouring pods; tasks are then numbered and attached in key order. Pods go in
        // waves, so that intermediate results stay small (their memory is reused) and, on
        // large snapshots, the tasks of one wave are attached while the next is prepared.
        let parallel = pods.len() >= parallel_min;
        let prepare_wave = |wave: &mut [PodEntry<'o>]| -> Vec<Vec<Result<Option<Prepared>, SnapshotError>>> {
            if parallel {
                wave.par_chunks_mut(POD_CHUNK).map(|c| cx.prepare(c)).collect()
            } else {
                wave.chunks_mut(POD_CHUNK).map(|c| cx.prepare(c)).collect()
            }
        };
        let mut shapes = Shapes::default();
        let mut awaiting = BTreeMap::new();
        let mut waves = pods.chunks_mut(POD_WAVE);
        let mut current = waves.next().map(prepare_wave);
        while let Some(prepared) = current {
            let wave = waves.next();
            if parallel {
                let (next, attached) =
                    rayon::join(|| wave.map(prepare_wave), || s.attach_tasks(&mut shapes, &mut awaiting, prepared));
                attached?;
                current = next;
            } else {
                s.attach_tasks(&mut shapes, &mut awaiting, prepared)?;
                current = wave.map(prepare_wave);
            }
        }
        s.shapes = shapes.count;
        s.shape_index = Arc::new(ShapeIndex::new(shapes, &s.tasks));
        s.awaiting_group = Arc::new(awaiting);
        s.queueless = Arc::new(queueless);
        s.task_by_key = Arc::new(s.tasks.iter().enumerate().map(|(i, t)| (t.key.clone(), TaskId(i as u32))).collect());
        s.node_by_name = Arc::new(node_by_name);
        s.queue_by_name = Arc::new(queue_by_name);
        s.job_by_key = Arc::new(job_by_key);
        s.extras = Arc::new(super::Extras::from_objects(objects));
        s.refresh_topology();
        s.share();
        Ok(s)
    }

    /// Numbers prepared tasks in order and attaches them to their jobs and nodes; stops at
    /// the first error.
    fn attach_tasks(
        &mut self,
        shapes: &mut Shapes,
        awaiting: &mut BTreeMap<Arc<str>, Arc<Pod>>,
        prepared: Vec<Vec<Result<Option<Prepared>, SnapshotError>>>,
    ) -> Result<(), SnapshotError> {
        for p in prepared.into_iter().flatten() {
            let Some(Prepared { pod, previous, request_key: key }) = p? else { continue };
            if let Some((key, pod)) = pod.awaiting {
                awaiting.insert(key, pod);
            }
            let Some((mut task, node)) = pod.task else { continue };
            let id = TaskId(self.tasks.len() as u32);
            // The previous task of the run was the last one given a shape: when it differs,
            // so does every task of its shape (the comparison is an equivalence).
            task.shape = match (previous, shapes.last) {
                (Previous::Same, Some((shape, _))) => shape,
                _ => {
                    let key = key.unwrap_or_else(|| request_key(&task));
                    shapes.shape_of(&self.tasks, &task, id, key, previous == Previous::Other)
                }
            };
            let (job, status) = (task.job, task.status);
            self.status_counts[status as usize] += 1;
            self.tasks.push(task);
            if let Some(j) = job {
                self.job_attach_task(j, id);
            }
            if let Some(n) = node {
                if !status.is_completed() {
                    self.tasks[id.idx()].node = Some(n);
                    self.node_add_task(n, id);
                }
            }
        }
        Ok(())
    }
}

/// Parses a Go duration (`1h30m`, `90s`, `500ms`) into milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return None,
        };
        total += n * factor;
        rest = &rest[unit_end..];
    }
    Some(total.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        NodeSpec, NodeStatus, PersistentVolumeClaimVolumeSource, PodSpec, PodStatus, ResourceRequirements, Toleration,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use volcano_api::crd::{PodGroupSpec, QueueSpec};

    fn list(items: &[(&str, &str)]) -> ResourceList {
        items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
    }

    fn test_node(name: &str) -> Arc<Node> {
        let alloc = list(&[("cpu", "16"), ("memory", "64Gi"), ("pods", "110"), ("nvidia.com/gpu", "8")]);
        Arc::new(Node {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus { allocatable: Some(alloc), ..Default::default() }),
        })
    }

    fn test_pod(ns: &str, name: &str, group: &str, requests: &[(&str, &str)], node: Option<&str>) -> Pod {
        k8s_openapi::api::core::v1::Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                annotations: Some([(crd::GROUP_NAME_ANNOTATION.to_string(), group.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                scheduler_name: Some("volcano-rs".into()),
                node_name: node.map(str::to_string),
                containers: vec![Container {
                    name: "main".into(),
                    resources: Some(ResourceRequirements { requests: Some(list(requests)), ..Default::default() }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some(if node.is_some() { "Running" } else { "Pending" }.into()),
                ..Default::default()
            }),
        }
        .into()
    }

    fn test_group(ns: &str, name: &str) -> Arc<PodGroup> {
        let mut pg = PodGroup::new(name, PodGroupSpec { min_member: 1, ..Default::default() });
        pg.metadata.namespace = Some(ns.into());
        Arc::new(pg)
    }

    fn objects() -> ClusterObjects {
        ClusterObjects {
            nodes: (0..3).map(|i| test_node(&format!("n{i}"))).collect(),
            queues: vec![Arc::new(Queue::new("default", QueueSpec::default()))],
            ..Default::default()
        }
    }

    #[test]
    fn sub_groups_follow_pods_and_policies_through_updates() {
        use volcano_api::crd::SubGroupPolicySpec;
        let group = |size: i32, key: &str| {
            let mut pg = (*test_group("ns", "g")).clone();
            pg.spec.sub_group_policy = Some(vec![SubGroupPolicySpec {
                name: "w".into(),
                sub_group_size: Some(size),
                match_label_keys: Some(vec![key.into()]),
                ..Default::default()
            }]);
            Arc::new(pg)
        };
        let labelled = |name: &str, labels: &[(&str, &str)], node: Option<&str>| {
            let mut p = test_pod("ns", name, "g", &[("cpu", "1")], node);
            p.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            Arc::new(p)
        };
        // Each task's sub-group by name, and the job's sub-groups as they print.
        let view = |s: &Snapshot| {
            let job = s.job(JobId(0));
            let tasks: Vec<(String, Option<String>)> = job
                .tasks
                .iter()
                .map(|t| {
                    let task = s.task(*t);
                    let group =
                        task.sub_group.map(|g| job.sub_groups.as_ref().unwrap().groups[g as usize].name.to_string());
                    (task.key.to_string(), group)
                })
                .collect();
            (tasks, format!("{:?}", job.sub_groups))
        };
        let mut o = objects();
        o.pod_groups.push(group(2, "part"));
        o.pods = vec![
            labelled("g-0", &[("part", "a"), ("rack", "r1")], Some("n0")),
            labelled("g-1", &[("part", "a"), ("rack", "r1")], None),
            labelled("g-2", &[("part", "b"), ("rack", "r2")], None),
            labelled("g-3", &[("rack", "r2")], None),
        ];
        let names = ["volcano-rs"];
        let mut snap = Snapshot::build(&o, &names).unwrap();
        let (tasks, _) = view(&snap);
        let groups: Vec<Option<&str>> = tasks.iter().map(|(_, g)| g.as_deref()).collect();
        assert_eq!(groups, [Some("w-a"), Some("w-a"), Some("w-b"), None]);
        let sg = snap.job(JobId(0)).sub_groups.as_ref().unwrap();
        assert_eq!(sg.counts(Some(0)).count_of(TaskStatus::Running), 1);
        assert_eq!((sg.counts(Some(0)).tasks, sg.rest.tasks), (2, 1));
        // A pod changes label (from the rest into w-b), another goes, another comes.
        let step = |snap: &mut Snapshot, o: &ClusterObjects, changes: super::super::update::Changes| {
            assert!(snap.update(&changes, &[], &names).unwrap(), "updated in place");
            assert_eq!(view(snap), view(&Snapshot::build(o, &names).unwrap()), "as a build gives");
        };
        o.pods[3] = labelled("g-3", &[("part", "b"), ("rack", "r2")], None);
        o.pods.remove(0);
        o.pods.push(labelled("g-4", &[("part", "c"), ("rack", "r1")], Some("n1")));
        let changes = super::super::update::Changes {
            pods: vec![
                ("ns/g-3".into(), Some(o.pods[2].clone())),
                ("ns/g-0".into(), None),
                ("ns/g-4".into(), Some(o.pods[3].clone())),
            ],
            ..Default::default()
        };
        step(&mut snap, &o, changes);
        let sg = snap.job(JobId(0)).sub_groups.as_ref().unwrap();
        assert_eq!(
            sg.live().map(|(_, g)| (&*g.name, g.counts.tasks)).collect::<Vec<_>>(),
            [("w-a", 1), ("w-b", 2), ("w-c", 1)]
        );
        let c = sg.live().find(|(_, g)| &*g.name == "w-c").map(|(i, _)| i);
        assert_eq!(sg.counts(c).count_of(TaskStatus::Running), 1);
        assert!(!sg.group_ready(c), "w-c's one pod runs, but its size is 2");
        // The policy changes: pods split by rack, one a sub-group.
        o.pod_groups[0] = group(1, "rack");
        let changes = super::super::update::Changes {
            pod_groups: vec![("ns/g".into(), Some(o.pod_groups[0].clone()))],
            ..Default::default()
        };
        step(&mut snap, &o, changes);
        let sg = snap.job(JobId(0)).sub_groups.as_ref().unwrap();
        let mut live: Vec<(&str, u32)> = sg.live().map(|(_, g)| (&*g.name, g.counts.tasks)).collect();
        live.sort();
        assert_eq!(live, [("w-r1", 2), ("w-r2", 2)]);
        assert!(sg.ready(), "minSubGroups 0");
        // No policy any more: no sub-groups.
        let mut plain = (*o.pod_groups[0]).clone();
        plain.spec.sub_group_policy = None;
        o.pod_groups[0] = Arc::new(plain);
        let changes = super::super::update::Changes {
            pod_groups: vec![("ns/g".into(), Some(o.pod_groups[0].clone()))],
            ..Default::default()
        };
        step(&mut snap, &o, changes);
        assert!(snap.job(JobId(0)).sub_groups.is_none());
        assert!(snap.tasks.iter().all(|t| t.sub_group.is_none()));
    }

    #[test]
    fn nodes_that_report_images_are_counted_through_updates() {
        let with_images = |name: &str| {
            let mut n = (*test_node(name)).clone();
            n.status.as_mut().unwrap().images = Some(vec![k8s_openapi::api::core::v1::ContainerImage {
                names: Some(vec!["registry.example/train:v1".into()]),
                size_bytes: Some(1 << 30),
            }]);
            Arc::new(n)
        };
        let mut snap = Snapshot::build(&objects(), &["volcano-rs"]).unwrap();
        assert!(!snap.any_node_reports_images());
        let update = |snap: &mut Snapshot, node: Arc<Node>| {
            let name = node.metadata.name.clone().unwrap();
            let changes = super::super::update::Changes { nodes: vec![(name, Some(node))], ..Default::default() };
            assert!(snap.update(&changes, &[], &["volcano-rs"]).unwrap(), "updated in place");
        };
        update(&mut snap, with_images("n1"));
        assert!(snap.any_node_reports_images());
        update(&mut snap, with_images("n2"));
        update(&mut snap, test_node("n1"));
        assert!(snap.any_node_reports_images(), "n2 still reports images");
        update(&mut snap, test_node("n2"));
        assert!(!snap.any_node_reports_images());
        let mut o = objects();
        o.nodes[0] = with_images("n0");
        assert!(Snapshot::build(&o, &["volcano-rs"]).unwrap().any_node_reports_images());
    }

    #[test]
    fn parallel_and_sequential_builds_agree() {
        let mut o = objects();
        // More pods than one wave.
        for j in 0..900 {
            let ns = if j % 7 == 0 { "other" } else { "ns" };
            o.pod_groups.push(test_group(ns, &format!("job-{j}")));
            for k in 0..(1 + j % 20) {
                let cpu = if j % 5 == 0 { "2" } else { "1" };
                let node = (j % 11 == 0).then(|| ["n0", "n1", "n2"][k % 3]);
                let p = test_pod(ns, &format!("job-{j}-{k}"), &format!("job-{j}"), &[("cpu", cpu)], node);
                o.pods.push(Arc::new(p));
            }
        }
        // The pods in an order unlike key order.
        o.pods.reverse();
        let seq = Snapshot::build_with(&o, &["volcano-rs"], usize::MAX).unwrap();
        let par = Snapshot::build_with(&o, &["volcano-rs"], 1).unwrap();
        assert!(o.pods.len() > POD_WAVE);
        assert_eq!(seq.tasks.len(), o.pods.len());
        let view = |s: &Snapshot| {
            let tasks: Vec<String> = s
                .tasks
                .iter()
                .map(|t| format!("{} {:?} {:?} {:?} {} {:?}", t.key, t.job, t.node, t.status, t.shape, t.resreq))
                .collect();
            let jobs: Vec<String> =
                s.jobs.iter().map(|j| format!("{:?} {:?} {:?}", j.tasks, j.status_counts, j.allocated)).collect();
            let nodes: Vec<String> =
                s.nodes.iter().map(|n| format!("{:?} {:?} {}", n.tasks, n.idle, n.nonzero_cpu)).collect();
            (tasks, jobs, nodes, s.shape_count(), s.status_count(TaskStatus::Running))
        };
        assert_eq!(view(&seq), view(&par));
        // Keys in order, shapes: (cpu 1 | cpu 2) × (ns | other).
        assert!(seq.tasks.iter().zip(seq.tasks.iter().skip(1)).all(|(a, b)| a.key < b.key));
        assert_eq!(seq.shape_count(), 4);
    }

    #[test]
    fn shapes_follow_requests_and_constraints() {
        let mut o = objects();
        o.pod_groups.push(test_group("ns", "g"));
        let mut add = |name: &str, requests: &[(&str, &str)], f: &dyn Fn(&mut PodSpec)| {
            let mut p = test_pod("ns", name, "g", requests, None);
            f(p.spec_mut());
            o.pods.push(Arc::new(p));
        };
        add("a", &[("cpu", "1")], &|_| {});
        add("b", &[("cpu", "1")], &|_| {});
        add("c", &[("cpu", "1"), ("memory", "200Mi")], &|_| {});
        add("d", &[("cpu", "1")], &|s| s.node_selector = Some([("zone".to_string(), "z1".to_string())].into()));
        add("e", &[("cpu", "1")], &|s| {
            s.tolerations = Some(vec![Toleration { key: Some("k".into()), ..Default::default() }])
        });
        add("f", &[("cpu", "1")], &|s| {
            // The same requests through limits: same parsed request, same shape.
            let r = s.containers[0].resources.as_mut().unwrap();
            r.limits = r.requests.take();
        });
        let claim = |name: &str| Volume {
            name: "data".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        add("g", &[("cpu", "1")], &|s| s.volumes = Some(vec![claim("data-0")]));
        add("h", &[("cpu", "1")], &|s| s.volumes = Some(vec![claim("data-1")]));
        add("i", &[("cpu", "1")], &|s| s.volumes = Some(vec![claim("data-0")]));
        // Volumes the volume checks do not read leave the shape alone.
        add("j", &[("cpu", "1")], &|s| {
            s.volumes =
                Some(vec![Volume { name: "tmp".into(), empty_dir: Some(Default::default()), ..Default::default() }])
        });
        let ephemeral = || Volume { name: "scratch".into(), ephemeral: Some(Default::default()), ..Default::default() };
        add("k", &[("cpu", "1")], &|s| s.volumes = Some(vec![ephemeral()]));
        add("l", &[("cpu", "1")], &|s| s.volumes = Some(vec![ephemeral()]));
        let snap = Snapshot::build(&o, &["volcano-rs"]).unwrap();
        let shape = |name: &str| snap.tasks.iter().find(|t| t.name() == name).unwrap().shape;
        assert_eq!(shape("a"), shape("b"));
        assert_eq!(shape("a"), shape("f"));
        // `c` asks for 200Mi of memory and `a` for none: the same non-zero memory, not the
        // same request.
        for other in ["c", "d", "e", "g", "h", "k"] {
            assert_ne!(shape("a"), shape(other), "{other}");
        }
        // Pods identical but for their claim differ; the same claim is the same shape.
        assert_ne!(shape("g"), shape("h"));
        assert_eq!(shape("g"), shape("i"));
        assert_eq!(shape("a"), shape("j"));
        // Generic ephemeral volumes: each pod has its own claim.
        assert_ne!(shape("k"), shape("l"));
        let a = snap.tasks.iter().find(|t| t.name() == "a").unwrap();
        assert_eq!((a.nonzero_cpu, a.nonzero_memory), (1000, DEFAULT_MEMORY_REQUEST));
    }

    #[test]
    fn clones_share_until_a_session_writes() {
        let mut o = objects();
        o.pod_groups.push(test_group("ns", "g"));
        for k in 0..300 {
            o.pods.push(Arc::new(test_pod("ns", &format!("g-{k}"), "g", &[("cpu", "1")], Some("n1"))));
        }
        o.pods.push(Arc::new(test_pod("ns", "g-pending", "g", &[("cpu", "1")], None)));
        let kept = Snapshot::build(&o, &["volcano-rs"]).unwrap();
        assert_eq!(kept.tasks.owned_chunks() + kept.jobs.owned_chunks() + kept.nodes.owned_chunks(), 0);
        let mut copy = kept.clone();
        let t = copy.tasks.iter().position(|t| t.name() == "g-pending").map(|i| TaskId(i as u32)).unwrap();
        copy.set_task_status(t, TaskStatus::Allocated);
        copy.tasks[t.idx()].node = Some(NodeId(0));
        copy.node_add_task(NodeId(0), t);
        // One chunk of tasks, of jobs and of nodes was copied; the kept snapshot is intact.
        assert_eq!((copy.tasks.owned_chunks(), copy.jobs.owned_chunks(), copy.nodes.owned_chunks()), (1, 1, 1));
        assert_eq!(kept.task(t).status, TaskStatus::Pending);
        assert_eq!(copy.status_count(TaskStatus::Allocated), 1);
        assert_eq!(kept.status_count(TaskStatus::Allocated), 0);
        assert_eq!(kept.node(NodeId(0)).nonzero_cpu, 0);
        assert_eq!(copy.node(NodeId(0)).nonzero_cpu, 1000);
        assert_eq!(kept.node(NodeId(1)).nonzero_cpu, 300 * 1000);
        assert_eq!(kept.node(NodeId(1)).nonzero_memory, 300 * DEFAULT_MEMORY_REQUEST);
        copy.node_remove_task(NodeId(0), t);
        assert_eq!((copy.node(NodeId(0)).nonzero_cpu, copy.node(NodeId(0)).nonzero_memory), (0, 0));
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("90s"), Some(90_000));
        assert_eq!(parse_duration_ms("500ms"), Some(500));
        assert_eq!(parse_duration_ms("10"), None);
        assert_eq!(parse_duration_ms("abc"), None);
    }

    #[test]
    fn name_index_needs_three_fields() {
        assert_eq!(name_index("job-a-3"), Some(3));
        assert_eq!(name_index("job-3"), None);
        assert_eq!(name_index("job-a-x"), None);
    }
}
