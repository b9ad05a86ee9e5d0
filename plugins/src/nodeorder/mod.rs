//! The `nodeorder` plugin: kube-scheduler's score plugins with their integer arithmetic,
//! each scoring 0–100, multiplied by its weight and summed (spec §3.7).
//!
//! - NODE_ORDER (per node, no allocation): LeastAllocated and MostAllocated over cpu and
//!   memory with equal weights, and BalancedAllocation over cpu, memory and
//!   `nvidia.com/gpu`.
//! - BATCH_NODE_ORDER (over the feasible nodes, normalised as kube-scheduler does):
//!   NodeAffinity (preferred terms, scaled so the best node gets 100) and TaintToleration
//!   (untolerated `PreferNoSchedule` taints, reversed so the node with the most gets 0).
//! - EVENT_HANDLER: the per-node sums of requests that the resource scorers need (the
//!   "non-zero" requests with kube-scheduler's defaults for containers that request no cpu
//!   or memory, and the actual requests) are built once when the session opens and kept in
//!   step on every allocate, pipeline, evict and undo, like the Kubernetes node snapshot
//!   Volcano keeps.
//!
//! InterPodAffinity, ImageLocality and PodTopologySpread weights are accepted but those
//! scorers are not implemented yet (they score 0).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Pod};
use volcano_api::conf::PluginOption;
use volcano_api::quantity;
use volcano_framework::resource::NVIDIA_GPU;
use volcano_framework::{
    ArgsError, Hooks, NodeId, NodeInfo, Plugin, PluginBuilder, SessionContext, Snapshot, TaskId, TaskInfo,
};

use crate::predicates::matching;

mod args;
#[cfg(test)]
mod tests;

pub use args::{Args, Weights};

/// Configuration name.
pub const NAME: &str = "nodeorder";

/// kube-scheduler's highest node score.
pub const MAX_NODE_SCORE: i64 = 100;
/// cpu a container that requests none counts for, in millicores (`DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// memory a container that requests none counts for, in bytes (`DefaultMemoryRequest`, 200Mi).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// kube-scheduler's `leastRequestedScore`: the unused share of the capacity, 0–100.
pub fn least_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    ((capacity - requested) * MAX_NODE_SCORE) / capacity
}

/// kube-scheduler's `mostRequestedScore`: the used share of the capacity, 0–100 (a request
/// above the capacity counts as the capacity).
pub fn most_requested_score(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    (requested.min(capacity) * MAX_NODE_SCORE) / capacity
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

/// What the resource scorers need of one task, computed once per session.
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
    /// The request of a task.
    pub fn of(task: &TaskInfo) -> Self {
        // When every container sets both cpu and memory, no default applies and the
        // snapshot's request (same aggregation) is the non-zero request: no parsing needed.
        let (nonzero_cpu, nonzero_memory) = if sets_cpu_and_memory(&task.pod) {
            (task.resreq.milli_cpu as i64, task.resreq.memory as i64)
        } else {
            nonzero_request(&task.pod)
        };
        TaskRequest {
            nonzero_cpu,
            nonzero_memory,
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
    fn add(&mut self, r: &TaskRequest, sign: i64) {
        self.nonzero_cpu += sign * r.nonzero_cpu;
        self.nonzero_memory += sign * r.nonzero_memory;
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

fn sets(c: &Container, name: &str) -> bool {
    c.resources.as_ref().is_some_and(|r| {
        r.requests.as_ref().is_some_and(|m| m.contains_key(name))
            || r.limits.as_ref().is_some_and(|m| m.contains_key(name))
    })
}

/// Whether every container and init container of the pod requests (or limits) both cpu
/// and memory.
fn sets_cpu_and_memory(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    spec.containers
        .iter()
        .chain(spec.init_containers.as_deref().unwrap_or(&[]))
        .all(|c| sets(c, "cpu") && sets(c, "memory"))
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
            cpu += quantity::parse_milli(&q.0).unwrap_or(0.0) as i64;
        }
        if let Some(q) = overhead.get("memory") {
            mem += quantity::parse_value(&q.0).unwrap_or(0.0) as i64;
        }
    }
    (cpu, mem)
}

/// The three resource scores of a task on a node (before weights): LeastAllocated,
/// MostAllocated, BalancedAllocation.
pub fn resource_scores(task: &TaskRequest, node: &NodeInfo, requested: &NodeRequested) -> (i64, i64, i64) {
    let alloc_cpu = node.allocatable.milli_cpu as i64;
    let alloc_mem = node.allocatable.memory as i64;
    let nonzero = [
        (requested.nonzero_cpu + task.nonzero_cpu, alloc_cpu),
        (requested.nonzero_memory + task.nonzero_memory, alloc_mem),
    ];
    let least = equal_weight_score(nonzero, least_requested_score);
    let most = equal_weight_score(nonzero, most_requested_score);
    // BalancedAllocation skips best-effort pods, and extended resources the pod does not ask for.
    let balanced = if task.cpu == 0.0 && task.memory == 0.0 && task.gpu == 0.0 {
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

/// The plugin for one session: the weights and the request bookkeeping.
#[derive(Clone, Debug)]
pub struct NodeOrder {
    weights: Weights,
    /// Per task (by [`TaskId`]), computed when the session opens.
    tasks: Vec<TaskRequest>,
    /// Per node (by [`NodeId`]): Σ requests of the tasks counted on it.
    nodes: Vec<NodeRequested>,
    /// Per task: the node it is counted on.
    counted: Vec<Option<NodeId>>,
    /// Whether any node has a PreferNoSchedule taint (else the taint score is uniform).
    any_prefer_no_schedule: bool,
}

impl NodeOrder {
    /// A plugin with these weights (call `on_session_open` before scoring).
    pub fn new(weights: Weights) -> Self {
        NodeOrder { weights, tasks: Vec::new(), nodes: Vec::new(), counted: Vec::new(), any_prefer_no_schedule: false }
    }

    /// The weights.
    pub fn weights(&self) -> Weights {
        self.weights
    }

    /// Σ requests counted on a node (recomputed from the snapshot if the session was not
    /// opened through this plugin).
    pub fn node_requested(&self, snap: &Snapshot, node: NodeId) -> NodeRequested {
        if let Some(r) = self.nodes.get(node.idx()) {
            return *r;
        }
        let mut r = NodeRequested::default();
        for &t in &snap.node(node).tasks {
            r.add(&self.task_request(snap, t), 1);
        }
        r
    }

    fn task_request(&self, snap: &Snapshot, task: TaskId) -> TaskRequest {
        match self.tasks.get(task.idx()) {
            Some(r) => *r,
            None => TaskRequest::of(snap.task(task)),
        }
    }

    fn count(&mut self, task: TaskId, node: NodeId, sign: i64) {
        let r = self.tasks[task.idx()];
        self.nodes[node.idx()].add(&r, sign);
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
        self.any_prefer_no_schedule = snap.nodes.iter().any(|n| {
            n.node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .is_some_and(|ts| ts.iter().any(|t| t.effect == "PreferNoSchedule"))
        });
        self.tasks = snap.tasks.iter().map(TaskRequest::of).collect();
        self.nodes = vec![NodeRequested::default(); snap.nodes.len()];
        self.counted = vec![None; snap.tasks.len()];
        for (i, node) in snap.nodes.iter().enumerate() {
            for &t in &node.tasks {
                self.nodes[i].add(&self.tasks[t.idx()], 1);
                self.counted[t.idx()] = Some(NodeId(i as u32));
            }
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {
        let Some(node) = snap.task(task).node else { return };
        if task.idx() >= self.counted.len() || self.counted[task.idx()] == Some(node) {
            return;
        }
        if let Some(old) = self.counted[task.idx()] {
            self.count(task, old, -1);
        }
        self.count(task, node, 1);
        self.counted[task.idx()] = Some(node);
    }

    fn on_deallocate(&mut self, _snap: &Snapshot, task: TaskId) {
        if let Some(node) = self.counted.get_mut(task.idx()).and_then(Option::take) {
            self.count(task, node, -1);
        }
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let w = &self.weights;
        if w.least_requested == 0 && w.most_requested == 0 && w.balanced_resource == 0 {
            return 0.0;
        }
        let req = self.task_request(snap, task);
        let requested = self.node_requested(snap, node);
        let (least, most, balanced) = resource_scores(&req, snap.node(node), &requested);
        (least * w.least_requested + most * w.most_requested + balanced * w.balanced_resource) as f64
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // Scores read the task's container requests and preferred affinity, and the node's
        // labels, taints and requested resources (kept per node by the event handlers).
        true
    }

    fn batch_uniform(&self, snap: &Snapshot, task: TaskId) -> bool {
        let pod = &snap.task(task).pod;
        let affinity_uniform = self.weights.node_affinity == 0
            || pod.spec.as_ref().is_none_or(|s| matching::preferred_terms(s).is_empty());
        let taints_uniform = self.weights.taint_toleration == 0 || !self.any_prefer_no_schedule;
        affinity_uniform && taints_uniform
    }

    fn batch_node_order(&self, snap: &Snapshot, task: TaskId, nodes: &[NodeId], scores: &mut [f64]) {
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

        // TaintToleration: untolerated PreferNoSchedule taints, reversed so fewer is better.
        if w.taint_toleration != 0 {
            let tolerations = matching::pod_tolerations(pod);
            let raw = |n: NodeId| {
                let taints = snap.node(n).node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
                i64::from(matching::intolerable_prefer_no_schedule(taints, tolerations))
            };
            let max = nodes.iter().map(|&n| raw(n)).max().unwrap_or(0);
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
