//! The `network-topology-aware` plugin: packs HyperNodes (switches) instead of fragmenting
//! them.
//!
//! - **HyperNode order** (for jobs and sub-groups with a network topology constraint, read
//!   by `allocate`'s HyperNode search): a HyperNode scores `Σ w·(used + request) / allocatable
//!   / Σ w` over the resources of the job's (sub-group's) pending pods that have a weight (`hypernode.binpack.cpu`,
//!   `hypernode.binpack.memory`, and those listed in `hypernode.binpack.resources`), 0 when
//!   the request would overflow one of them, times 100 and `weight`: the fullest switch that
//!   still holds the job wins.
//! - **Node order, jobs with a constraint**: a node scores by how close it is to the job's
//!   pods already placed (for a pod of a sub-group whose policy has a constraint, to its
//!   sub-group's): 1 in their lowest common HyperNode, else
//!   `(top tier − tier of the common HyperNode) / (top tier − lowest tier)`, times 100 and
//!   `weight`; ties between the best nodes go to the HyperNode holding most of the job's pods.
//! - **Node order, other pods** (`hypernode.binpack.normal-pod.enable`, on by default): a node
//!   scores the binpack of the task on its HyperNode of each tier, tier `i` weighted
//!   `fading^(i−1)` (`hypernode.binpack.normal-pod.fading`, 0.8), a tier where the node is in
//!   no HyperNode counting 1, times 100 and `weight`: pods fill switches already in use.
//!
//! - **Eviction domains** (`hypernode.gradient.evict.max-hypernodes`): how many HyperNodes
//!   `gangpreempt` and `gangreclaim` try for a job with a hard constraint (Volcano's
//!   gradient for eviction, capped by the plugin).
//!
//! Usage per HyperNode is summed at session open and kept in step by the allocate and
//! deallocate events, as Volcano's plugin does.
//!
//! Both node scores read a node only through its lowest HyperNode: they are a batch
//! partition by lowest HyperNode for the node index, which then scores one node per leaf
//! switch, and within which a HyperNode's nodes are whole domains (allocate's search
//! within a HyperNode goes through the index). HyperNode binpack scores are cached per
//! request until the HyperNode's use changes.

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::resource::{ResourceName, MIN_RESOURCE};
use volcano_framework::topology::{HyperNodeId, Topology};
use volcano_framework::{
    parse_args, ArgsError, Hooks, Incremental, JobId, NodeDomains, NodeId, Plugin, PluginBuilder, Resource,
    SessionContext, Snapshot, TaskId, TaskStatus,
};

use crate::predicates::unknown_key;

/// Configuration name.
pub const NAME: &str = "network-topology-aware";

/// Prefix of the per-resource weight keys.
pub const RESOURCE_PREFIX: &str = "hypernode.binpack.resources.";

/// The fixed keys of [`Args`].
pub const KEYS: &[&str] = &[
    "weight",
    "hypernode.binpack.cpu",
    "hypernode.binpack.memory",
    "hypernode.binpack.resources",
    "hypernode.binpack.normal-pod.enable",
    "hypernode.binpack.normal-pod.fading",
    "hypernode.gradient.evict.max-hypernodes",
];

/// The plugin's arguments, with Volcano's keys and defaults.
#[derive(Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Args {
    /// `weight` (1): multiplies every score; negative → 1.
    #[serde(default, deserialize_with = "args::int")]
    pub weight: Option<i64>,
    /// `hypernode.binpack.cpu` (1); negative → 1.
    #[serde(rename = "hypernode.binpack.cpu", default, deserialize_with = "args::int")]
    pub cpu: Option<i64>,
    /// `hypernode.binpack.memory` (1); negative → 1.
    #[serde(rename = "hypernode.binpack.memory", default, deserialize_with = "args::int")]
    pub memory: Option<i64>,
    /// `hypernode.binpack.resources` (""): comma-separated extra resources.
    #[serde(rename = "hypernode.binpack.resources", default, deserialize_with = "args::string")]
    pub resources: Option<String>,
    /// `hypernode.binpack.normal-pod.enable` (true).
    #[serde(rename = "hypernode.binpack.normal-pod.enable", default, deserialize_with = "args::bool")]
    pub normal_pod_enable: Option<bool>,
    /// `hypernode.binpack.normal-pod.fading` (0.8); negative → 0.8.
    #[serde(rename = "hypernode.binpack.normal-pod.fading", default, deserialize_with = "args::float")]
    pub normal_pod_fading: Option<f64>,
    /// `hypernode.gradient.evict.max-hypernodes` (8): how many HyperNodes gang-aware eviction
    /// searches (read by `gangpreempt` and `gangreclaim`); not positive → 8.
    #[serde(rename = "hypernode.gradient.evict.max-hypernodes", default, deserialize_with = "args::int")]
    pub evict_max_hyper_nodes: Option<i64>,
    /// `hypernode.binpack.resources.<name>`: checked by [`Args::parse`].
    #[serde(flatten)]
    pub resource_weights: std::collections::BTreeMap<String, serde_json::Value>,
}

/// The resolved settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `weight`.
    pub weight: f64,
    /// Resource weights: cpu, memory, then the listed resources.
    pub resources: Vec<(ResourceName, i64)>,
    /// `hypernode.binpack.normal-pod.enable`.
    pub normal_pods: bool,
    /// `hypernode.binpack.normal-pod.fading`.
    pub fading: f64,
    /// `hypernode.gradient.evict.max-hypernodes`.
    pub evict_max_hyper_nodes: usize,
}

fn non_negative(w: i64) -> i64 {
    if w < 0 {
        1
    } else {
        w
    }
}

impl Args {
    /// Parses and checks raw arguments.
    pub fn parse(opt: &PluginOption) -> Result<Settings, ArgsError> {
        let a: Args = parse_args(&opt.arguments)?;
        for (key, value) in &a.resource_weights {
            if key.strip_prefix(RESOURCE_PREFIX).is_none_or(str::is_empty) {
                return Err(unknown_key(key, KEYS, "`hypernode.binpack.resources.<name>`"));
            }
            if value.as_i64().is_none() {
                return Err(ArgsError(format!("argument {key:?}: expected an integer, got {value}")));
            }
        }
        let mut resources = vec![
            (ResourceName::new("cpu"), non_negative(a.cpu.unwrap_or(1))),
            (ResourceName::new("memory"), non_negative(a.memory.unwrap_or(1))),
        ];
        for name in a.resources.as_deref().unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if resources.iter().any(|(n, _)| &**n == name) {
                continue;
            }
            let w = a
                .resource_weights
                .get(&format!("{RESOURCE_PREFIX}{name}"))
                .and_then(|v| v.as_i64())
                .map_or(1, non_negative);
            resources.push((ResourceName::new(name), w));
        }
        let fading = a.normal_pod_fading.filter(|f| *f >= 0.0).unwrap_or(0.8);
        Ok(Settings {
            weight: non_negative(a.weight.unwrap_or(1)) as f64,
            resources,
            normal_pods: a.normal_pod_enable.unwrap_or(true),
            fading,
            evict_max_hyper_nodes: a.evict_max_hyper_nodes.filter(|m| *m > 0).unwrap_or(8) as usize,
        })
    }
}

/// The plugin for one session.
#[derive(Clone, Debug)]
pub struct NetworkTopologyAware {
    settings: Arc<Settings>,
    topo: Arc<Topology>,
    /// Σ allocatable per HyperNode.
    allocatable: Vec<Resource>,
    /// Σ used per HyperNode (kept by the events).
    used: Vec<Resource>,
    /// Each node's lowest HyperNode ([`NodeDomains::NONE`] for the nodes in none).
    domains: Arc<NodeDomains>,
    /// Per HyperNode, its HyperNode of each tier (in [`Topology::tiers`] order), for the
    /// normal-pod score of the nodes whose lowest HyperNode it is.
    ancestry: Vec<Vec<Option<HyperNodeId>>>,
    /// Per HyperNode, a stamp changed whenever its use changes.
    stamps: Vec<u64>,
    /// The last stamp given.
    stamp: u64,
    /// HyperNode binpack scores of the last request scored (see [`BinpackCache`]).
    cache: BinpackCache,
}

/// The binpack scores of HyperNodes for one request, each valid while the HyperNode's
/// stamp is the one it was computed at: the normal-pod score of consecutive pods of one
/// shape reads the same HyperNodes again and again, and only those a placement touched
/// change between them.
#[derive(Default)]
struct BinpackCache(std::sync::Mutex<CachedScores>);

#[derive(Default)]
struct CachedScores {
    /// The request's weighted dimensions.
    request: Vec<f64>,
    /// Per HyperNode: (stamp, score); stamp 0 when not computed.
    scores: Vec<(u64, f64)>,
}

impl Clone for BinpackCache {
    fn clone(&self) -> Self {
        BinpackCache::default()
    }
}

impl std::fmt::Debug for BinpackCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BinpackCache")
    }
}

impl NetworkTopologyAware {
    /// The binpack score of `request` on a HyperNode, 0–1.
    fn binpack(&self, h: HyperNodeId, request: &Resource) -> f64 {
        let (alloc, used) = (&self.allocatable[h.idx()], &self.used[h.idx()]);
        let mut score = 0.0;
        let mut weights = 0i64;
        for (name, w) in &self.settings.resources {
            let req = request.get(name);
            if req < MIN_RESOURCE {
                continue;
            }
            let a = alloc.get(name);
            let after = used.get(name) + req;
            if after > a {
                return 0.0;
            }
            if a > 0.0 {
                score += *w as f64 * after / a;
            }
            weights += w;
        }
        if weights > 0 {
            score / weights as f64
        } else {
            0.0
        }
    }

    /// The nodes of the placed pods of the job, or of one of its groups (`Some(g)`: the
    /// pods with sub-group `g`).
    fn placed(snap: &Snapshot, j: JobId, group: Option<Option<u32>>) -> impl Iterator<Item = NodeId> + '_ {
        snap.job(j)
            .tasks
            .iter()
            .map(|t| snap.task(*t))
            .filter(move |t| group.is_none_or(|g| t.sub_group == g))
            .filter(|t| t.status.is_allocated() || t.status == TaskStatus::Pipelined)
            .filter_map(|t| t.node)
    }

    fn tier_score(&self, tier: u32) -> f64 {
        let tiers = self.topo.tiers();
        let (Some(&min), Some(&max)) = (tiers.first(), tiers.last()) else { return 1.0 };
        if min == max {
            return 1.0;
        }
        if (min..=max).contains(&tier) {
            (max - tier) as f64 / (max - min) as f64
        } else {
            0.0
        }
    }

    fn account(&mut self, snap: &Snapshot, t: TaskId, sign: f64) {
        let task = snap.task(t);
        // An undone placement has left its node already: its last placement says where.
        let node = if sign > 0.0 { task.node } else { task.node.or(snap.last_tx(t).map(|(_, n)| n)) };
        let Some(n) = node else { return };
        let top = self.topo.top();
        let hs: Vec<HyperNodeId> = self.topo.ancestors(self.topo.lowest_of(n)).filter(|h| *h != top).collect();
        for h in hs {
            self.stamp += 1;
            self.stamps[h.idx()] = self.stamp;
            if sign > 0.0 {
                self.used[h.idx()].add(&task.resreq);
            } else {
                self.used[h.idx()].sub_unchecked(&task.resreq);
            }
        }
    }
}

impl Plugin for NetworkTopologyAware {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::HYPER_NODE_ORDER | Hooks::BATCH_NODE_ORDER | Hooks::EVENT_HANDLER | Hooks::HYPER_NODE_GRADIENT
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        self.topo = snap.topology_shared();
        let top = self.topo.top();
        self.domains = Arc::new(NodeDomains {
            of_node: (0..snap.nodes.len() as u32)
                .map(|i| match self.topo.lowest_of(NodeId(i)) {
                    h if h == top => NodeDomains::NONE,
                    h => h.0,
                })
                .collect(),
            count: top.0,
        });
        let n = self.topo.hyper_nodes().len();
        self.allocatable = vec![Resource::empty(); n];
        self.used = vec![Resource::empty(); n];
        self.ancestry = (0..n as u32)
            .map(|h| {
                let ancestors: Vec<HyperNodeId> = self.topo.ancestors(HyperNodeId(h)).collect();
                let tier_of = |tier: u32| ancestors.iter().copied().find(|a| self.topo.get(*a).tier == tier);
                self.topo.tiers().iter().map(|tier| tier_of(*tier)).collect()
            })
            .collect();
        self.stamp = n as u64;
        self.stamps = (1..=n as u64).collect();
        self.cache = BinpackCache::default();
        for (i, h) in self.topo.hyper_nodes().iter().enumerate() {
            if HyperNodeId(i as u32) == top {
                continue;
            }
            for node in &h.nodes {
                let info = snap.node(*node);
                self.allocatable[i].add(&info.allocatable);
                self.used[i].add(&info.used);
                self.used[i].add(&info.pipelined);
            }
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {
        self.account(snap, task, 1.0);
    }

    fn on_deallocate(&mut self, snap: &Snapshot, task: TaskId) {
        self.account(snap, task, -1.0);
    }

    fn hyper_node_order(&self, snap: &Snapshot, job: JobId, sub_group: Option<u32>, hyper_node: HyperNodeId) -> f64 {
        if hyper_node == self.topo.top() {
            return 0.0;
        }
        let mut request = Resource::empty();
        for t in &snap.job(job).tasks {
            let task = snap.task(*t);
            if task.status == TaskStatus::Pending && (sub_group.is_none() || task.sub_group == sub_group) {
                request.add(&task.resreq);
            }
        }
        self.binpack(hyper_node, &request) * 100.0 * self.settings.weight
    }

    fn evict_hyper_nodes(&self) -> Option<usize> {
        Some(self.settings.evict_max_hyper_nodes)
    }

    fn batch_node_order(&self, snap: &Snapshot, task: TaskId, nodes: &[NodeId], scores: &mut [f64]) {
        self.scores(snap, task, nodes, None, scores);
    }
}

impl NetworkTopologyAware {
    /// The batch scores of `nodes`, `nodes[i]` standing for `counts[i]` nodes of its
    /// lowest HyperNode when given (one each otherwise).
    fn scores(&self, snap: &Snapshot, task: TaskId, nodes: &[NodeId], counts: Option<&[u32]>, scores: &mut [f64]) {
        if self.topo.is_empty() {
            return;
        }
        let t = snap.task(task);
        let Some(j) = t.job else { return };
        let scale = 100.0 * self.settings.weight;
        if let Some(sub_group) = Self::constraint_scope(snap, task) {
            // The job's placed pods, or its sub-group's.
            let group = sub_group.map(Some);
            let Some(at) = self.topo.common_ancestor_of_nodes(Self::placed(snap, j, group)) else { return };
            let mut best = f64::MIN;
            let mut raw = Vec::with_capacity(nodes.len());
            for n in nodes {
                let low = self.topo.lowest_of(*n);
                let s = if low == at {
                    1.0
                } else {
                    self.tier_score(self.topo.get(self.topo.common_ancestor(low, at)).tier)
                };
                best = best.max(s);
                raw.push(s);
            }
            // Ties at the best: the HyperNode holding most of the job's pods (counted once
            // per HyperNode above each placed pod).
            let at_best: u64 = raw
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == best)
                .map(|(i, _)| counts.map_or(1, |c| u64::from(c[i])))
                .sum();
            let tied = at_best > 1;
            let mut held: std::collections::HashMap<HyperNodeId, usize> = std::collections::HashMap::new();
            if tied {
                for p in Self::placed(snap, j, group) {
                    for h in self.topo.ancestors(self.topo.lowest_of(p)) {
                        *held.entry(h).or_default() += 1;
                    }
                }
            }
            let all = snap.job(j).tasks.len().max(1) as f64;
            for (i, n) in nodes.iter().enumerate() {
                let mut s = raw[i];
                if tied && s == best {
                    s += held.get(&self.topo.lowest_of(*n)).copied().unwrap_or(0) as f64 / all;
                }
                scores[i] += s * scale;
            }
            return;
        }
        if !self.settings.normal_pods {
            return;
        }
        let tiers = self.topo.tiers();
        let weights: Vec<f64> = tiers.iter().map(|tier| self.settings.fading.powi(*tier as i32 - 1)).collect();
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return;
        }
        let request: Vec<f64> = self.settings.resources.iter().map(|(name, _)| t.resreq.get(name)).collect();
        let mut cache = self.cache.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.request != request || cache.scores.len() != self.stamps.len() {
            cache.request = request;
            cache.scores.clear();
            cache.scores.resize(self.stamps.len(), (0, 0.0));
        }
        for (i, n) in nodes.iter().enumerate() {
            let mut s = 0.0;
            for (h, w) in self.ancestry[self.topo.lowest_of(*n).idx()].iter().zip(&weights) {
                let tier_score = match h {
                    Some(h) => {
                        let (stamp, score) = &mut cache.scores[h.idx()];
                        if *stamp != self.stamps[h.idx()] {
                            *stamp = self.stamps[h.idx()];
                            *score = self.binpack(*h, &t.resreq);
                        }
                        *score
                    }
                    None => 1.0,
                };
                s += w * tier_score;
            }
            scores[i] += s / total * scale;
        }
    }
}

impl NetworkTopologyAware {
    /// Whose placed pods a constrained task is scored near: `Some(Some(g))` for a task of a
    /// sub-group whose policy has a network topology (its sub-group's), else `Some(None)`
    /// for a task of a job with one (the job's); `None` for an unconstrained task.
    fn constraint_scope(snap: &Snapshot, task: TaskId) -> Option<Option<u32>> {
        let t = snap.task(task);
        let job = snap.job(t.job?);
        let sub_group = t
            .sub_group
            .zip(job.sub_groups.as_ref())
            .filter(|(g, sg)| sg.policies[sg.groups[*g as usize].policy as usize].network_topology.is_some());
        match sub_group {
            Some((g, _)) => Some(Some(g)),
            None => job.pod_group.spec.network_topology.is_some().then_some(None),
        }
    }

    /// Whether the task's job, or its sub-group, has a network topology constraint.
    fn constrained(snap: &Snapshot, task: TaskId) -> bool {
        Self::constraint_scope(snap, task).is_some()
    }
}

impl Incremental for NetworkTopologyAware {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // No predicate and no per-node score (the batch scores are asked at every query).
        true
    }

    fn batch_node_order_counted(
        &self,
        snap: &Snapshot,
        task: TaskId,
        nodes: &[NodeId],
        counts: &[u32],
        scores: &mut [f64],
    ) {
        // The closeness tie-break reads how many nodes are at the best score.
        self.scores(snap, task, nodes, Some(counts), scores);
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        // Reads no inter-pod rule.
        true
    }

    fn evaluation_key(&self, _snap: &Snapshot, _task: TaskId) -> Option<u64> {
        // No predicate, no per-node score.
        Some(0)
    }

    fn batch_uniform(&self, snap: &Snapshot, task: TaskId) -> bool {
        // Without HyperNodes, or with the normal-pod score off for a task without a
        // constraint, every node scores 0.
        self.topo.is_empty() || (!self.settings.normal_pods && !Self::constrained(snap, task))
    }

    fn batch_partition(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<NodeDomains>> {
        // A node's score reads only its HyperNodes (its lowest one and that one's
        // ancestors; for a constrained task, the lowest one's distance to the job's placed
        // pods): equal on the nodes of one lowest HyperNode, and on the nodes in none. A
        // HyperNode's nodes are then whole domains, which lets allocate's search within a
        // HyperNode go through the node index.
        if self.batch_uniform(snap, task) {
            return None;
        }
        Some(self.domains.clone())
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let settings = Arc::new(Args::parse(opt)?);
    Ok(Arc::new(move || {
        Box::new(NetworkTopologyAware {
            settings: settings.clone(),
            topo: Arc::new(Topology::default()),
            allocatable: Vec::new(),
            used: Vec::new(),
            domains: Arc::new(NodeDomains { of_node: Vec::new(), count: 0 }),
            ancestry: Vec::new(),
            stamps: Vec::new(),
            stamp: 0,
            cache: BinpackCache::default(),
        }) as Box<dyn Plugin>
    }))
}

#[cfg(test)]
mod tests;
