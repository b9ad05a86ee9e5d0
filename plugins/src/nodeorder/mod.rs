//! The `nodeorder` plugin: kube-scheduler's score plugins with their integer arithmetic,
//! each scoring 0–100, multiplied by its weight and summed.
//!
//! - NODE_ORDER (per node, no allocation): LeastAllocated and MostAllocated over cpu and
//!   memory with equal weights, and BalancedAllocation over cpu, memory and
//!   `nvidia.com/gpu`.
//! - BATCH_NODE_ORDER (over the feasible nodes, normalised as kube-scheduler does):
//!   NodeAffinity (preferred terms, scaled so the best node gets 100) and TaintToleration
//!   (untolerated `PreferNoSchedule` taints, reversed so the node with the most gets 0).
//! - EVENT_HANDLER: the resource scorers need per-node sums of requests (the "non-zero"
//!   requests with kube-scheduler's defaults for containers that request no cpu or memory,
//!   and the actual requests) over the tasks the node holds, like the Kubernetes node
//!   snapshot Volcano keeps. The session's snapshot keeps these sums on every allocate,
//!   pipeline and undo; the event handlers record the tasks evicted in this session, which
//!   keep their node but no longer count.
//!
//! - ImageLocality (NODE_ORDER, `imagelocality.weight`): the sizes of the task's container
//!   images already on the node (`status.images`), each scaled by the share of nodes that
//!   have it, as kube-scheduler's ImageLocality plugin scores them ([`image_locality_score`]).
//!
//! - InterPodAffinity (BATCH_NODE_ORDER, `podaffinity.weight`) and PodTopologySpread
//!   (BATCH_NODE_ORDER, `podtopologyspread.weight`, `ScheduleAnyway` constraints), from the
//!   session's inter-pod counts ([`crate::interpod`]), normalised over the feasible nodes as
//!   kube-scheduler normalises them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Container;
use volcano_api::conf::PluginOption;
use volcano_api::quantity;
use volcano_framework::pod::SchedPod as Pod;
use volcano_framework::resource::NVIDIA_GPU;
use volcano_framework::{
    ArgsError, Hooks, Incremental, NodeDomains, NodeId, NodeInfo, Plugin, PluginBuilder, SessionContext, Snapshot,
    TaskId, TaskInfo,
};

use crate::interpod::{Mode, Topology};
use crate::matching;

mod args;
#[cfg(test)]
mod tests;

pub use args::{Args, Weights};

/// Configuration name.
pub const NAME: &str = "nodeorder";

/// kube-scheduler's highest node score.
pub const MAX_NODE_SCORE: i64 = 100;
pub use volcano_framework::snapshot::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};

/// kube-scheduler's `leastRequestedScore`: the unused share of the capacity, 0–100.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    let free = capacity - requested;
    match free.checked_mul(MAX_NODE_SCORE) {
        Some(scaled) => scaled / capacity,
        // In 128 bits: a capacity near i64::MAX times 100 must not overflow.
        None => ((free as i128 * MAX_NODE_SCORE as i128) / capacity as i128) as i64,
    }
}

/// kube-scheduler's `mostRequestedScore`: the used share of the capacity, 0–100 (a request
/// above the capacity counts as the capacity).
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    let used = requested.min(capacity);
    match used.checked_mul(MAX_NODE_SCORE) {
        Some(scaled) => scaled / capacity,
        None => ((used as i128 * MAX_NODE_SCORE as i128) / capacity as i128) as i64,
    }
}

/// Averages a per-resource score over the resources with a non-zero allocatable, all of
/// equal weight, in int64 arithmetic (kube-scheduler's `leastResourceScorer` /
/// `mostResourceScorer`).
fn equal_weight_score(pairs: [(i64, i64); 2], per_resource: fn(i64, i64) -> i64) -> i64 {
    let (mut sum, mut n) = (0, 0);
    for (requested, allocatable) in pairs {
        if allocatable == 0 {
            continue;
        }
        sum += per_resource(requested, allocatable);
        n += 1;
    }
    if n == 0 {
        0
    } else {
        sum / n
    }
}

/// kube-scheduler's `balancedResourceScorer` over `(requested, allocatable)` pairs (pairs
/// with allocatable 0 are skipped): `(1 − std) × 100` truncated, where std is the standard
/// deviation of the requested fractions (capped at 1).
pub fn balanced_resource_score(pairs: &[(f64, f64)]) -> i64 {
    let mut fractions = [0.0f64; 3];
    let mut n = 0;
    let mut total = 0.0;
    for &(requested, allocatable) in pairs {
        if allocatable == 0.0 || n == fractions.len() {
            continue;
        }
        let f = (requested / allocatable).min(1.0);
        total += f;
        fractions[n] = f;
        n += 1;
    }
    let std = match n {
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n if n > 2 => {
            let mean = total / n as f64;
            let sum: f64 = fractions[..n].iter().map(|f| (f - mean) * (f - mean)).sum();
            (sum / n as f64).sqrt()
        }
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// kube-scheduler's `DefaultNormalizeScore` for one node: `100 × raw / max`, reversed
/// (`100 − …`) when asked; with `max == 0` every node gets 0 (100 when reversed).
pub fn normalize_score(raw: i64, max: i64, reverse: bool) -> i64 {
    if max == 0 {
        return if reverse { MAX_NODE_SCORE } else { 0 };
    }
    let s = MAX_NODE_SCORE * raw / max;
    if reverse {
        MAX_NODE_SCORE - s
    } else {
        s
    }
}

/// kube-scheduler's ImageLocality thresholds: below 23 MiB of images in place a node scores
/// 0, at 1000 MiB per container it scores 100.
pub const IMAGE_MIN_THRESHOLD: i64 = 23 * 1024 * 1024;
/// The size of images per container at which ImageLocality gives the highest score.
pub const IMAGE_MAX_CONTAINER_THRESHOLD: i64 = 1000 * 1024 * 1024;

/// kube-scheduler's `normalizedImageName`: an image named without a tag (nor a digest) is
/// the `:latest` one.
pub fn normalized_image_name(name: &str) -> std::borrow::Cow<'_, str> {
    let colon = name.rfind(':');
    let slash = name.rfind('/');
    if colon.map(|c| c as i64).unwrap_or(-1) <= slash.map(|s| s as i64).unwrap_or(-1) {
        std::borrow::Cow::Owned(format!("{name}:latest"))
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

/// kube-scheduler's ImageLocality `calculatePriority`: the sum of the scaled sizes of the
/// pod's images on the node, clamped to [23 MiB, 1000 MiB × containers] and mapped to 0–100.
pub fn image_locality_score(sum_scores: i64, containers: usize) -> i64 {
    let max_threshold = IMAGE_MAX_CONTAINER_THRESHOLD.saturating_mul(containers.max(1) as i64);
    let sum = sum_scores.clamp(IMAGE_MIN_THRESHOLD, max_threshold.max(IMAGE_MIN_THRESHOLD));
    if max_threshold <= IMAGE_MIN_THRESHOLD {
        return 0;
    }
    MAX_NODE_SCORE * (sum - IMAGE_MIN_THRESHOLD) / (max_threshold - IMAGE_MIN_THRESHOLD)
}

/// kube-scheduler's `scaledImageScore`: an image's size times the share of nodes that have
/// it (so that an image on every node does not pull pods to one of them).
pub fn scaled_image_score(size: i64, nodes_with_image: i64, total_nodes: i64) -> i64 {
    if total_nodes == 0 {
        return 0;
    }
    let spread = nodes_with_image as f64 / total_nodes as f64;
    (size as f64 * spread) as i64
}

/// The images of a session for ImageLocality: how many nodes have each image name, and,
/// for the images of the tasks pending when the session opened, each node's copy (size).
#[derive(Clone, Debug, Default)]
pub struct ImageIndex {
    total_nodes: i64,
    /// Image name (as nodes report it) → nodes that have it.
    num_nodes: HashMap<String, i64>,
    /// Image name of a pending task's container (normalized) → its index in `per_node`.
    wanted: HashMap<String, u32>,
    /// Per node: (wanted image, size on that node).
    per_node: Vec<Vec<(u32, i64)>>,
}

impl ImageIndex {
    /// The index of `snap`'s nodes, with the images of its pending tasks at hand.
    pub fn new(snap: &Snapshot) -> Self {
        let mut idx = ImageIndex { total_nodes: snap.nodes.len() as i64, ..Default::default() };
        for t in snap.tasks.iter().filter(|t| t.status == volcano_framework::TaskStatus::Pending) {
            let Some(spec) = t.pod.spec.as_ref() else { continue };
            for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
                if let Some(image) = c.image.as_deref() {
                    let n = idx.wanted.len() as u32;
                    idx.wanted.entry(normalized_image_name(image).into_owned()).or_insert(n);
                }
            }
        }
        idx.per_node = Vec::with_capacity(snap.nodes.len());
        for node in snap.nodes.iter() {
            let mut mine = Vec::new();
            for image in node.node.status.as_ref().and_then(|s| s.images.as_deref()).unwrap_or(&[]) {
                for name in image.names.iter().flatten() {
                    *idx.num_nodes.entry(name.clone()).or_default() += 1;
                    if let Some(&w) = idx.wanted.get(name.as_str()) {
                        mine.push((w, image.size_bytes.unwrap_or(0)));
                    }
                }
            }
            idx.per_node.push(mine);
        }
        idx
    }

    /// Whether no node reports any image (every score is 0).
    pub fn is_empty(&self) -> bool {
        self.num_nodes.is_empty()
    }

    /// The size of `image` (normalized) on `node`, if the node has it.
    fn size_on(&self, snap: &Snapshot, node: NodeId, image: &str) -> Option<i64> {
        if let Some(&w) = self.wanted.get(image) {
            return self.per_node.get(node.idx())?.iter().find(|(i, _)| *i == w).map(|&(_, size)| size);
        }
        // An image of a task that was not pending when the session opened: read the node.
        let images = snap.node(node).node.status.as_ref().and_then(|s| s.images.as_deref()).unwrap_or(&[]);
        images.iter().find(|i| i.names.iter().flatten().any(|n| n == image)).map(|i| i.size_bytes.unwrap_or(0))
    }

    /// kube-scheduler's ImageLocality score (0–100) of `pod` on `node`.
    pub fn score(&self, snap: &Snapshot, pod: &Pod, node: NodeId) -> i64 {
        let Some(spec) = pod.spec.as_ref() else { return 0 };
        let mut sum = 0i64;
        let mut containers = 0;
        for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
            containers += 1;
            let Some(image) = c.image.as_deref() else { continue };
            let name = normalized_image_name(image);
            if let Some(size) = self.size_on(snap, node, &name) {
                let n = self.num_nodes.get(name.as_ref()).copied().unwrap_or(0);
                sum = sum.saturating_add(scaled_image_score(size, n, self.total_nodes));
            }
        }
        image_locality_score(sum, containers)
    }
}

/// What the resource scorers need of one task (read from its [`TaskInfo`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TaskRequest {
    /// cpu request with the 100m default per container that sets none, millicores.
    pub nonzero_cpu: i64,
    /// memory request with the 200Mi default per container that sets none, bytes.
    pub nonzero_memory: i64,
    /// Actual cpu request, millicores.
    pub cpu: f64,
    /// Actual memory request, bytes.
    pub memory: f64,
    /// Actual `nvidia.com/gpu` request, milli-GPUs.
    pub gpu: f64,
}

impl TaskRequest {
    /// The request of a task: the snapshot computed the non-zero requests with the
    /// resource request ([`nonzero_request`] gives the same numbers from the pod).
    pub fn of(task: &TaskInfo) -> Self {
        TaskRequest {
            nonzero_cpu: task.nonzero_cpu,
            nonzero_memory: task.nonzero_memory,
            cpu: task.resreq.milli_cpu,
            memory: task.resreq.memory,
            gpu: task.resreq.get(NVIDIA_GPU),
        }
    }
}

/// Σ [`TaskRequest`] of the tasks a node holds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeRequested {
    /// Σ non-zero cpu, millicores.
    pub nonzero_cpu: i64,
    /// Σ non-zero memory, bytes.
    pub nonzero_memory: i64,
    /// Σ actual cpu, millicores.
    pub cpu: f64,
    /// Σ actual memory, bytes.
    pub memory: f64,
    /// Σ actual `nvidia.com/gpu`, milli-GPUs.
    pub gpu: f64,
}

impl NodeRequested {
    /// Σ of the requests of every task on the node (pipelined ones included), from the
    /// snapshot's node accounting.
    pub fn of_node(node: &NodeInfo) -> Self {
        Self::of_node_with(node, true)
    }

    /// [`NodeRequested::of_node`], with `gpu` 0 unless asked for (looking it up costs two
    /// searches of the node's scalar resources).
    fn of_node_with(node: &NodeInfo, gpu: bool) -> Self {
        NodeRequested {
            nonzero_cpu: node.nonzero_cpu,
            nonzero_memory: node.nonzero_memory,
            cpu: node.used.milli_cpu + node.pipelined.milli_cpu,
            memory: node.used.memory + node.pipelined.memory,
            gpu: if gpu { node.used.get(NVIDIA_GPU) + node.pipelined.get(NVIDIA_GPU) } else { 0.0 },
        }
    }

    fn add(&mut self, r: &TaskRequest, sign: i64) {
        // Wrapping, as kube-scheduler's int64 arithmetic (see the snapshot's node sums).
        self.nonzero_cpu = self.nonzero_cpu.wrapping_add(sign.wrapping_mul(r.nonzero_cpu));
        self.nonzero_memory = self.nonzero_memory.wrapping_add(sign.wrapping_mul(r.nonzero_memory));
        let s = sign as f64;
        self.cpu += s * r.cpu;
        self.memory += s * r.memory;
        self.gpu += s * r.gpu;
    }
}

fn container_quantity(c: &Container, name: &str, milli: bool) -> Option<i64> {
    let res = c.resources.as_ref()?;
    // The API server defaults a missing request to the limit.
    let q =
        res.requests.as_ref().and_then(|r| r.get(name)).or_else(|| res.limits.as_ref().and_then(|l| l.get(name)))?;
    let v = if milli { quantity::parse_milli(&q.0) } else { quantity::parse_value(&q.0) };
    Some(v.unwrap_or(0.0) as i64)
}

fn nonzero_container(c: &Container) -> (i64, i64) {
    (
        container_quantity(c, "cpu", true).unwrap_or(DEFAULT_MILLI_CPU_REQUEST),
        container_quantity(c, "memory", false).unwrap_or(DEFAULT_MEMORY_REQUEST),
    )
}

/// A pod's cpu (millicores) and memory (bytes) requests where a container that requests no
/// cpu counts 100m and one that requests no memory counts 200Mi (kube-scheduler's
/// `NonMissingContainerRequests`): containers summed, max'ed with each init container
/// (restartable sidecars add up), plus the pod overhead.
pub fn nonzero_request(pod: &Pod) -> (i64, i64) {
    let Some(spec) = &pod.spec else { return (0, 0) };
    let (mut cpu, mut mem) = (0, 0);
    for c in &spec.containers {
        let (cc, cm) = nonzero_container(c);
        cpu += cc;
        mem += cm;
    }
    let (mut side_cpu, mut side_mem) = (0, 0);
    let (mut init_cpu, mut init_mem) = (0, 0);
    for c in spec.init_containers.as_deref().unwrap_or(&[]) {
        let (cc, cm) = nonzero_container(c);
        let (during_cpu, during_mem) = if c.restart_policy.as_deref() == Some("Always") {
            cpu += cc;
            mem += cm;
            side_cpu += cc;
            side_mem += cm;
            (side_cpu, side_mem)
        } else {
            (cc + side_cpu, cm + side_mem)
        };
        init_cpu = init_cpu.max(during_cpu);
        init_mem = init_mem.max(during_mem);
    }
    cpu = cpu.max(init_cpu);
    mem = mem.max(init_mem);
    if let Some(overhead) = &spec.overhead {
        if let Some(q) = overhead.get("cpu") {
            cpu = cpu.wrapping_add(quantity::parse_milli(&q.0).unwrap_or(0.0) as i64);
        }
        if let Some(q) = overhead.get("memory") {
            mem = mem.wrapping_add(quantity::parse_value(&q.0).unwrap_or(0.0) as i64);
        }
    }
    (cpu, mem)
}

/// The three resource scores of a task on a node (before weights): LeastAllocated,
/// MostAllocated, BalancedAllocation, each computed only when `wanted` (else 0).
pub fn resource_scores(
    task: &TaskRequest,
    node: &NodeInfo,
    requested: &NodeRequested,
    wanted: [bool; 3],
) -> (i64, i64, i64) {
    let alloc_cpu = node.allocatable.milli_cpu as i64;
    let alloc_mem = node.allocatable.memory as i64;
    let nonzero = [
        (requested.nonzero_cpu.wrapping_add(task.nonzero_cpu), alloc_cpu),
        (requested.nonzero_memory.wrapping_add(task.nonzero_memory), alloc_mem),
    ];
    let least = if wanted[0] { equal_weight_score(nonzero, least_requested_score) } else { 0 };
    let most = if wanted[1] { equal_weight_score(nonzero, most_requested_score) } else { 0 };
    // BalancedAllocation skips best-effort pods, and extended resources the pod does not ask for.
    let balanced = if !wanted[2] || (task.cpu == 0.0 && task.memory == 0.0 && task.gpu == 0.0) {
        0
    } else {
        let mut pairs = [(0.0, 0.0); 3];
        pairs[0] = (requested.cpu + task.cpu, node.allocatable.milli_cpu);
        pairs[1] = (requested.memory + task.memory, node.allocatable.memory);
        let mut n = 2;
        if task.gpu > 0.0 {
            if let Some(alloc) = node.allocatable.scalar(NVIDIA_GPU) {
                pairs[2] = (requested.gpu + task.gpu, alloc);
                n = 3;
            }
        }
        balanced_resource_score(&pairs[..n])
    };
    (least, most, balanced)
}

/// The plugin for one session: the weights, and the tasks that the resource scorers leave
/// out although they still hold their node.
///
/// The scorers count the requests of the tasks on a node, as the Kubernetes node snapshot
/// of Volcano's plugin does: the snapshot keeps those sums ([`NodeRequested::of_node`]),
/// and the event handlers only record the tasks evicted in this session (an eviction fires
/// `on_deallocate` while the task keeps its node until it is gone; undoing it fires
/// `on_allocate`). Opening the session reads no task and no node.
#[derive(Debug)]
pub struct NodeOrder {
    weights: Weights,
    /// Tasks on a node's task list that are not counted, with that node.
    evicted: HashMap<TaskId, NodeId>,
    /// Σ requests of the `evicted` tasks per node.
    evicted_sums: HashMap<NodeId, NodeRequested>,
    /// Whether any node has a PreferNoSchedule taint (else the taint score is uniform).
    any_prefer_no_schedule: bool,
    /// The nodes' images (when `imagelocality.weight` is set and some node reports images).
    images: Option<Arc<ImageIndex>>,
    /// The session's inter-pod counts (when a pod has preferred inter-pod terms, is matched
    /// by other pods' terms, or has `ScheduleAnyway` constraints).
    topology: Option<Topology>,
    /// The batch partitions met this session (see [`Incremental::batch_partition`]).
    partitions: Mutex<Partitions>,
    /// The evaluation keys of the container image lists met this session (see
    /// [`Incremental::evaluation_key`]), from 1.
    image_keys: Mutex<HashMap<Vec<Option<String>>, u64>>,
}

/// The most domains a batch partition may have: past it, a query would read about as many
/// tree ranges as a scan reads nodes (preferred terms on the hostname), and the task is
/// scanned.
pub const MAX_PARTITION_DOMAINS: u32 = 1024;

/// The batch partitions of a session, computed once per task shape and shared by the shapes
/// whose NodeAffinity and TaintToleration scores read the same preferred terms and
/// tolerations (one `Arc` for equal inputs, so the node index lays its trees out once).
#[derive(Debug, Default)]
struct Partitions {
    /// By (task shape, address of the spread partition or 0).
    by_shape: HashMap<(u32, usize), Option<Arc<NodeDomains>>>,
    /// With a spread partition (this session's): by (the preferred terms and tolerations
    /// as text, address of the spread partition).
    by_inputs: HashMap<(String, usize), Option<Arc<NodeDomains>>>,
    /// What reads the nodes only, kept with the snapshot from one session to the next while
    /// its nodes do not change ([`volcano_framework::snapshot::NodeDerived`]).
    nodes: Arc<Mutex<NodePartitions>>,
}

/// The partitions that read the nodes only.
#[derive(Debug, Default)]
struct NodePartitions {
    /// Without a spread partition: by the preferred terms and tolerations as text.
    by_inputs: HashMap<String, Option<Arc<NodeDomains>>>,
    /// The nodes by their NodeAffinity raw score, by the preferred terms as text.
    by_terms: HashMap<String, Arc<NodeDomains>>,
    /// The nodes by their number of untolerated `PreferNoSchedule` taints, by the
    /// tolerations as text.
    by_tolerations: HashMap<String, Arc<NodeDomains>>,
    /// The nodes' labels, for the preferred terms.
    labels: crate::node_labels::LabelIndex,
}

/// The most node partitions kept from one session to the next: beyond that the next
/// session starts afresh.
const KEPT_PARTITIONS: usize = 4096;

impl NodePartitions {
    fn len(&self) -> usize {
        self.by_inputs.len() + self.by_terms.len() + self.by_tolerations.len()
    }
}

/// The nodes by a value of each, the domains numbered in node order (first occurrence).
fn partition_by<T: Eq + std::hash::Hash>(values: impl Iterator<Item = T>) -> NodeDomains {
    let mut ids: HashMap<T, u32> = HashMap::new();
    let of_node = values
        .map(|v| {
            let next = ids.len() as u32;
            *ids.entry(v).or_insert(next)
        })
        .collect();
    NodeDomains { of_node, count: ids.len() as u32 }
}

/// The partition of the nodes by their domains in every one of `parts` (the nodes without
/// the label of a part form one more domain of it), numbered in node order: the partition
/// by the tuple of their domains, computed by pairs of small numbers.
fn product_of(parts: &[&NodeDomains], nodes: usize) -> NodeDomains {
    let slot = |d: &NodeDomains, i: usize| match d.of_node[i] {
        NodeDomains::NONE => d.count as usize,
        x => x as usize,
    };
    let mut acc = NodeDomains { of_node: vec![0; nodes], count: u32::from(nodes > 0) };
    for part in parts {
        let width = part.count as usize + 1;
        let cells = acc.count as usize * width;
        let of_node = if cells <= 1 << 16 {
            let mut ids = vec![u32::MAX; cells];
            let mut count = 0;
            let of_node = (0..nodes)
                .map(|i| {
                    let id = &mut ids[acc.of_node[i] as usize * width + slot(part, i)];
                    if *id == u32::MAX {
                        *id = count;
                        count += 1;
                    }
                    *id
                })
                .collect();
            acc.count = count;
            of_node
        } else {
            let next = partition_by((0..nodes).map(|i| (acc.of_node[i], slot(part, i))));
            acc.count = next.count;
            next.of_node
        };
        acc.of_node = of_node;
    }
    acc
}

impl NodeOrder {
    /// A plugin with these weights (call `on_session_open` before scoring).
    pub fn new(weights: Weights) -> Self {
        NodeOrder {
            weights,
            evicted: HashMap::new(),
            evicted_sums: HashMap::new(),
            any_prefer_no_schedule: false,
            images: None,
            topology: None,
            partitions: Mutex::new(Partitions::default()),
            image_keys: Mutex::new(HashMap::new()),
        }
    }

    /// The weights.
    pub fn weights(&self) -> Weights {
        self.weights
    }

    /// Σ requests counted on a node: the snapshot's sums without the tasks evicted in this
    /// session.
    pub fn node_requested(&self, snap: &Snapshot, node: NodeId) -> NodeRequested {
        self.node_requested_with(snap, node, true)
    }

    /// [`NodeOrder::node_requested`], with `gpu` 0 unless asked for.
    fn node_requested_with(&self, snap: &Snapshot, node: NodeId, gpu: bool) -> NodeRequested {
        let mut r = NodeRequested::of_node_with(snap.node(node), gpu);
        if let Some(evicted) = self.evicted_sums.get(&node) {
            r.nonzero_cpu = r.nonzero_cpu.wrapping_sub(evicted.nonzero_cpu);
            r.nonzero_memory = r.nonzero_memory.wrapping_sub(evicted.nonzero_memory);
            r.cpu -= evicted.cpu;
            r.memory -= evicted.memory;
            if gpu {
                r.gpu -= evicted.gpu;
            }
        }
        r
    }
}

impl Plugin for NodeOrder {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::NODE_ORDER | Hooks::BATCH_NODE_ORDER | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        self.images = None;
        let kept: Arc<Mutex<Arc<Mutex<NodePartitions>>>> =
            snap.node_derived().get_or_insert_with("nodeorder/partitions", || Mutex::new(Arc::default()));
        let nodes = {
            let mut current = kept.lock().unwrap_or_else(|e| e.into_inner());
            if current.lock().unwrap_or_else(|e| e.into_inner()).len() > KEPT_PARTITIONS {
                *current = Arc::default();
            }
            current.clone()
        };
        self.partitions = Mutex::new(Partitions { nodes, ..Partitions::default() });
        self.image_keys = Mutex::new(HashMap::new());
        if self.weights.image_locality != 0 && snap.any_node_reports_images() {
            let idx = ImageIndex::new(snap);
            if !idx.is_empty() {
                self.images = Some(Arc::new(idx));
            }
        }
        self.any_prefer_no_schedule = snap.any_node_tainted()
            && snap.nodes.iter().any(|n| {
                n.has_taints
                    && n.node
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_deref())
                        .is_some_and(|ts| ts.iter().any(|t| t.effect == "PreferNoSchedule"))
            });
        self.topology = None;
        if self.weights.pod_affinity != 0 || self.weights.pod_topology_spread != 0 {
            let topology = Topology::open_with(snap, Mode::Score, self.weights.pod_topology_spread != 0);
            if !topology.is_empty() {
                self.topology = Some(topology);
            }
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {
        if let Some(t) = self.topology.as_mut() {
            t.on_allocate(snap, task);
        }
        // An eviction undone: the task counts again.
        if let Some(node) = self.evicted.remove(&task) {
            let r = TaskRequest::of(snap.task(task));
            if let Some(sums) = self.evicted_sums.get_mut(&node) {
                sums.add(&r, -1);
            }
        }
    }

    fn on_deallocate(&mut self, snap: &Snapshot, task: TaskId) {
        if let Some(t) = self.topology.as_mut() {
            t.on_deallocate(snap, task);
        }
        // An undone placement has left its node already; an evicted task still holds it.
        let t = snap.task(task);
        let Some(node) = t.node else { return };
        if self.evicted.contains_key(&task) || !snap.node(node).tasks.contains(&task) {
            return;
        }
        self.evicted.insert(task, node);
        self.evicted_sums.entry(node).or_default().add(&TaskRequest::of(t), 1);
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let w = &self.weights;
        let image = match &self.images {
            Some(images) => images.score(snap, &snap.task(task).pod, node) * w.image_locality,
            None => 0,
        };
        if w.least_requested == 0 && w.most_requested == 0 && w.balanced_resource == 0 {
            return image as f64;
        }
        let req = TaskRequest::of(snap.task(task));
        // Only BalancedAllocation reads the node's GPUs, and only for a task that asks for some.
        let requested = self.node_requested_with(snap, node, w.balanced_resource != 0 && req.gpu > 0.0);
        let wanted = [w.least_requested != 0, w.most_requested != 0, w.balanced_resource != 0];
        let (least, most, balanced) = resource_scores(&req, snap.node(node), &requested, wanted);
        (least * w.least_requested + most * w.most_requested + balanced * w.balanced_resource + image) as f64
    }

    fn batch_node_order(&self, snap: &Snapshot, task: TaskId, nodes: &[NodeId], scores: &mut [f64]) {
        self.batch_scores(snap, task, nodes, None, scores)
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for NodeOrder {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        // Node scores read no inter-pod rule (batch scores are asked per task).
        true
    }

    fn drain_touched(&mut self, out: &mut Vec<NodeId>) {
        if let Some(t) = self.topology.as_mut() {
            t.drain_touched(out);
        }
    }

    fn evaluation_key(&self, snap: &Snapshot, task: TaskId) -> Option<u64> {
        // `node_order` reads the task's requests and, for ImageLocality, its images.
        if self.images.is_none() {
            return Some(0);
        }
        let spec = snap.task(task).pod.spec.as_ref();
        let images: Vec<Option<String>> = spec
            .map(|s| s.init_containers.iter().flatten().chain(&s.containers).map(|c| c.image.clone()).collect())
            .unwrap_or_default();
        let mut keys = self.image_keys.lock().unwrap_or_else(|e| e.into_inner());
        let next = keys.len() as u64 + 1;
        Some(*keys.entry(images).or_insert(next))
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // Scores read the task's container requests, images and preferred affinity, and the
        // node's labels, taints, images and requested resources (kept per node by the event
        // handlers); a task's images are part of its shape.
        true
    }

    fn batch_uniform(&self, snap: &Snapshot, task: TaskId) -> bool {
        let pod = &snap.task(task).pod;
        let affinity_uniform = self.weights.node_affinity == 0
            || pod.spec.as_ref().is_none_or(|s| matching::preferred_terms(s).is_empty());
        let taints_uniform = self.weights.taint_toleration == 0 || !self.any_prefer_no_schedule;
        let topology_uniform = self.topology.as_ref().is_none_or(|t| {
            (self.weights.pod_affinity == 0 || !t.has_affinity_scores(task))
                && (self.weights.pod_topology_spread == 0 || !t.has_spread_scores(task))
        });
        affinity_uniform && taints_uniform && topology_uniform
    }

    fn batch_sparse(&self, snap: &Snapshot, task: TaskId) -> bool {
        // Only InterPodAffinity and PodTopologySpread on the hostname are not uniform: the
        // first is 0 (before normalisation, which reads only the set of raw values) outside
        // the nodes that hold the pods its terms count, the second is equal outside them
        // given the number of scored nodes.
        let Some(t) = &self.topology else { return false };
        self.batch_uniform_but_topology(snap, task)
            && self.affinity_sparse(t, task)
            && (self.weights.pod_topology_spread == 0 || !t.has_spread_scores(task) || t.spread_scores_node_local(task))
    }

    fn batch_partition(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<NodeDomains>> {
        // NodeAffinity's raw score (Σ weights of the matching preferred terms) and
        // TaintToleration's (untolerated PreferNoSchedule taints) are node-local, and are
        // normalised from the set of raw values among the scored nodes only; PodTopologySpread
        // on the zone (the system defaults) is equal on the nodes of a zone outside the nodes
        // its hostname constraint counts pods on. The scores are then equal on the nodes
        // with the same raw values in the same zone: the product of these partitions.
        let spread = match &self.topology {
            Some(t) => {
                if !self.affinity_sparse(t, task) {
                    return None;
                }
                if self.weights.pod_topology_spread != 0 && t.has_spread_scores(task) {
                    Some(t.spread_partition(task)?)
                } else {
                    None
                }
            }
            None => None,
        };
        let (affinity, taints) = self.local_batch_scores(snap, task);
        if !affinity && !taints {
            return spread;
        }
        self.product_partition(snap, task, spread, affinity, taints)
    }

    fn batch_special_nodes(&self, _snap: &Snapshot, task: TaskId, out: &mut Vec<NodeId>) {
        if let Some(t) = &self.topology {
            if self.weights.pod_affinity != 0 {
                t.affinity_nodes(task, out);
            }
            if self.weights.pod_topology_spread != 0 {
                t.spread_special_nodes(task, out);
            }
        }
    }

    fn batch_node_order_counted(
        &self,
        snap: &Snapshot,
        task: TaskId,
        nodes: &[NodeId],
        counts: &[u32],
        scores: &mut [f64],
    ) {
        self.batch_scores(snap, task, nodes, Some(counts), scores)
    }
}

impl NodeOrder {
    /// Whether the batch scores other than InterPodAffinity's and PodTopologySpread's are
    /// uniform for the task.
    fn batch_uniform_but_topology(&self, snap: &Snapshot, task: TaskId) -> bool {
        self.local_batch_scores(snap, task) == (false, false)
    }

    /// Whether the task's NodeAffinity and TaintToleration scores may differ between nodes
    /// (they have preferred terms to match, a node has a PreferNoSchedule taint).
    fn local_batch_scores(&self, snap: &Snapshot, task: TaskId) -> (bool, bool) {
        let pod = &snap.task(task).pod;
        let affinity = self.weights.node_affinity != 0
            && pod.spec.as_ref().is_some_and(|s| !matching::preferred_terms(s).is_empty());
        let taints = self.weights.taint_toleration != 0 && self.any_prefer_no_schedule;
        (affinity, taints)
    }

    /// The nodes partitioned by (raw NodeAffinity score, raw TaintToleration score, spread
    /// domain), for the scores that may differ; `None` past [`MAX_PARTITION_DOMAINS`].
    /// Domains are numbered in node order, so the partition is a function of its inputs.
    fn product_partition(
        &self,
        snap: &Snapshot,
        task: TaskId,
        spread: Option<Arc<NodeDomains>>,
        affinity: bool,
        taints: bool,
    ) -> Option<Arc<NodeDomains>> {
        let spread_key = spread.as_ref().map_or(0, |s| Arc::as_ptr(s) as usize);
        let shape_key = (snap.shape_count() > 0).then(|| (snap.task(task).shape, spread_key));
        let mut cache = self.partitions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = shape_key.and_then(|k| cache.by_shape.get(&k)) {
            return found.clone();
        }
        let pod = &snap.task(task).pod;
        let spec = pod.spec.as_ref().filter(|_| affinity);
        let tolerations = matching::pod_tolerations(pod);
        let terms_text = format!("{:?}", spec.map(|s| matching::preferred_terms(s)));
        let tolerations_text = format!("{:?}", if taints { Some(tolerations) } else { None });
        let inputs_text = format!("{terms_text}|{tolerations_text}");
        let nodes = cache.nodes.clone();
        let mut kept = nodes.lock().unwrap_or_else(|e| e.into_inner());
        let known = match spread_key {
            0 => kept.by_inputs.get(&inputs_text).cloned(),
            _ => cache.by_inputs.get(&(inputs_text.clone(), spread_key)).cloned(),
        };
        let partition = match known {
            Some(found) => found,
            None => {
                // The product of the partitions by each raw score and by zone, each raw
                // score's computed once for its terms or tolerations (and kept while the
                // nodes do not change).
                let mut parts: Vec<Arc<NodeDomains>> = Vec::new();
                if let Some(spec) = spec {
                    let NodePartitions { by_terms, labels, .. } = &mut *kept;
                    let by_terms = by_terms.entry(terms_text).or_insert_with(|| {
                        // NodeAffinity's raw score: Σ weights of the matching terms.
                        let mut score = vec![0i64; snap.nodes.len()];
                        for p in matching::preferred_terms(spec).iter().filter(|p| p.weight != 0) {
                            for (s, m) in score.iter_mut().zip(labels.term_matches(snap, &p.preference)) {
                                *s += if m { i64::from(p.weight) } else { 0 };
                            }
                        }
                        Arc::new(partition_by(score.into_iter()))
                    });
                    parts.push(by_terms.clone());
                }
                if taints {
                    let by_tolerations = kept.by_tolerations.entry(tolerations_text).or_insert_with(|| {
                        Arc::new(partition_by(snap.nodes.iter().map(|node| {
                            let node_taints = node.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
                            matching::intolerable_prefer_no_schedule(node_taints, tolerations)
                        })))
                    });
                    parts.push(by_tolerations.clone());
                }
                parts.extend(spread);
                let parts: Vec<&NodeDomains> = parts.iter().map(|p| p.as_ref()).collect();
                let product = product_of(&parts, snap.nodes.len());
                let partition = (product.count <= MAX_PARTITION_DOMAINS).then(|| Arc::new(product));
                match spread_key {
                    0 => kept.by_inputs.insert(inputs_text, partition.clone()),
                    _ => cache.by_inputs.insert((inputs_text, spread_key), partition.clone()),
                };
                partition
            }
        };
        drop(kept);
        if let Some(k) = shape_key {
            cache.by_shape.insert(k, partition.clone());
        }
        partition
    }

    /// Whether the task's InterPodAffinity score is 0 outside the nodes
    /// [`Topology::affinity_nodes`] lists.
    fn affinity_sparse(&self, t: &Topology, task: TaskId) -> bool {
        self.weights.pod_affinity == 0 || !t.has_affinity_scores(task) || t.affinity_scores_node_local(task)
    }

    /// The batch scores of `nodes`, each standing for `counts[i]` scored nodes (see
    /// [`Incremental::batch_node_order_counted`]).
    fn batch_scores(
        &self,
        snap: &Snapshot,
        task: TaskId,
        nodes: &[NodeId],
        counts: Option<&[u32]>,
        scores: &mut [f64],
    ) {
        let pod = &snap.task(task).pod;
        let w = &self.weights;

        // NodeAffinity: Σ weights of matching preferred terms, scaled to 0–100 by the best node.
        if w.node_affinity != 0 {
            if let Some(spec) = pod.spec.as_ref().filter(|s| !matching::preferred_terms(s).is_empty()) {
                let raw = |n: NodeId| {
                    let node = snap.node(n);
                    matching::preferred_node_affinity_score(spec, node.labels(), &node.name)
                };
                let max = nodes.iter().map(|&n| raw(n)).max().unwrap_or(0);
                if max > 0 {
                    for (i, &n) in nodes.iter().enumerate() {
                        scores[i] += (normalize_score(raw(n), max, false) * w.node_affinity) as f64;
                    }
                }
            }
        }

        // InterPodAffinity and PodTopologySpread, from the session's inter-pod counts.
        if let Some(t) = &self.topology {
            if w.pod_affinity != 0 && t.has_affinity_scores(task) {
                for (i, s) in t.affinity_scores(task, nodes).into_iter().enumerate() {
                    scores[i] += (s * w.pod_affinity) as f64;
                }
            }
            if w.pod_topology_spread != 0 && t.has_spread_scores(task) {
                for (i, s) in t.spread_scores_counted(task, nodes, counts).into_iter().enumerate() {
                    scores[i] += (s * w.pod_topology_spread) as f64;
                }
            }
        }

        // TaintToleration: untolerated PreferNoSchedule taints, reversed so fewer is better.
        if w.taint_toleration != 0 {
            let tolerations = matching::pod_tolerations(pod);
            let raw = |n: NodeId| {
                let taints = snap.node(n).node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
                i64::from(matching::intolerable_prefer_no_schedule(taints, tolerations))
            };
            // Without PreferNoSchedule taints every node's raw count is 0: nothing to read.
            let max = if self.any_prefer_no_schedule { nodes.iter().map(|&n| raw(n)).max().unwrap_or(0) } else { 0 };
            for (i, &n) in nodes.iter().enumerate() {
                let raw = if max == 0 { 0 } else { raw(n) };
                scores[i] += (normalize_score(raw, max, true) * w.taint_toleration) as f64;
            }
        }
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let weights = Args::parse(&opt.arguments)?.resolve();
    Ok(Arc::new(move || Box::new(NodeOrder::new(weights)) as Box<dyn Plugin>))
}
