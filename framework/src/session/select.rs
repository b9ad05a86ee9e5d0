//! Incremental node selection: per equivalence class of tasks, an index of every node's
//! fit and score, updated only for the nodes that changed since the last query.
//!
//! Two tasks are equivalent when they have the same shape ([`crate::TaskInfo::shape`]): the
//! same requests (the snapshot's parsed request and non-zero cpu and memory) and the same
//! scheduling constraints (node selector, affinity, tolerations, topology spread
//! constraints, namespace, host ports and the containers' restart policies, container
//! images, and the volumes scheduling reads: PersistentVolumeClaim claims, inline CSI
//! sources and generic ephemeral volumes). For plugins
//! that declare their predicates and scores *shape-local* ([`crate::Plugin::shape_local`]),
//! such tasks get the same answer on every node. A class keeps, per node, whether the task
//! fits now (idle), fits only once releasing pods are gone (future idle), or why it does not
//! fit; the nodes sit in a max-tree ordered by (fits now, fits later, does not fit), then
//! score (higher first), then node order, so the best node is the root. Any change of a
//! node's accounting is appended to a change log, and a class re-evaluates the logged nodes
//! before answering. The answer is exactly the one of a full scan: same predicates in the
//! same order, same scores, ties to the first node by name.
//!
//! Most of a class's nodes usually fail it for good: a node selector, a required node
//! affinity or an untolerated taint rules them out whatever the session does. The first
//! plugin with a predicate lists those nodes with their reasons
//! ([`crate::Plugin::fixed_failures`]), and a class never evaluates them: on such a node
//! the answer is "does not fit", with the resource check's failure when it fails (it comes
//! first) and the listed reason otherwise, found from the resource check alone and only
//! before the reasons are read. The resource check itself is kept once per distinct
//! request and brought up to date from the change log, shared by the classes of that
//! request. The evaluations of the other nodes are shared as well, by the classes of an
//! evaluation group: tasks with the same request whose plugins give equal
//! [`crate::Plugin::evaluation_key`]s get equal predicates and scores wherever the first
//! predicate plugin does not fail them for good, so the group keeps one tree, laid out by
//! the cells of nodes its classes do not tell apart, and each of its classes is a view of
//! it, answering from the best nodes of the cells it may use ([`view`]). A refresh that
//! re-evaluates many nodes sets the tree's leaves and then its inner nodes in one pass.
//!
//! Inter-pod rules need more. Their answers depend on the pod's labels (through the
//! selectors of the pods around it), so a task with a non-zero key (the plugins'
//! [`crate::Plugin::shape_key`]s combined, 0 for most tasks) belongs to the class of its
//! (base shape, key): the base shape leaves the inter-pod rules out, and the key stands for
//! the rules as the class keeps their answers, so the pods of many jobs share a class when
//! their rules read the same counters per node. Placing a pod changes their answers on
//! other nodes than its own (every node of its hostname's or rack's domain), so the plugins
//! report those nodes ([`crate::Plugin::drain_touched`]) after each event, and they join the
//! change log like the node whose accounting changed. Rules that depend on a node only
//! through its domain of a key with few values (zone spread, zone anti-affinity:
//! [`crate::Plugin::domain_rules`]) are left out of a class's answers instead and applied
//! per domain at each query, from the querying task's own verdicts
//! ([`crate::Plugin::domain_verdicts`]): the class's tree keeps each domain's nodes on
//! consecutive leaves, so the best node of the allowed domains is the best of a few
//! ranges, and a placement that closes a zone costs nothing per node of the zone. A new
//! class whose shape differs from a recent class's only in inter-pod rules copies that
//! class's answers and re-evaluates the nodes where either task's rules may fail
//! ([`crate::Plugin::rule_exceptions`]); batch scores uniform outside a few nodes
//! ([`crate::Plugin::batch_sparse`]) are computed on those nodes and the best other node
//! only, and batch scores uniform per domain outside a few nodes (the system-default
//! spread constraints, per zone: [`crate::Plugin::batch_partition`]) on those nodes and
//! the best other node of each domain, over a tree laid out by the partition; each other
//! node stands for the nodes of the best rank it was chosen from
//! ([`crate::Plugin::batch_node_order_counted`]), whose number scores may read. When no node fits a task with domain rules, each node gets the reason a scan
//! would give: its own failure, its domain's, or (when both fail) the full predicate's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use crate::model::{NodeId, NodeInfo, TaskId, TaskInfo};
use crate::plugin::{FixedFailures, Hooks, NodeDomains};
use crate::resource::DimensionDefault;
use crate::session::Session;
use crate::status::FitErrors;

mod view;
use view::{SharedEvaluations, View};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fit {
    /// Fits the idle resources now.
    Idle(f64),
    /// Fits only the future idle resources.
    Future(f64),
    /// Does not fit, with the interned reason.
    No(u32),
}

/// The order key of a node in a [`BestTree`]: higher is better. From the top bits down:
/// the fit (2: fits now, 1: fits once releasing pods are gone, 0: does not fit), the score
/// in `f64::total_cmp` order, and the node index reversed (lower index wins ties).
fn tree_key(node: u32, fit: Fit) -> u128 {
    let (rank, score) = match fit {
        Fit::Idle(score) => (2u128, score),
        Fit::Future(score) => (1u128, score),
        Fit::No(_) => return u128::from(u32::MAX - node),
    };
    // The bits of `total_cmp` as an unsigned number.
    let bits = score.to_bits() as i64;
    let ordered = ((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64) ^ (1 << 63);
    (rank << 96) | (u128::from(ordered) << 32) | u128::from(u32::MAX - node)
}

/// The fit a [`tree_key`] stands for, with `reason` for a node that does not fit (the key
/// leaves the reason out).
fn key_fit(key: u128, reason: u32) -> Fit {
    // The inverse of the `total_cmp` bits of `tree_key`.
    let ordered = ((key >> 32) as u64) ^ (1 << 63);
    let score = f64::from_bits(ordered ^ ((((ordered as i64) >> 63) as u64) >> 1));
    match key_rank(key) {
        2 => Fit::Idle(score),
        1 => Fit::Future(score),
        _ => Fit::No(reason),
    }
}

/// The node of a [`tree_key`].
fn key_node(key: u128) -> NodeId {
    NodeId(u32::MAX - key as u32)
}

/// The fit rank of a [`tree_key`].
fn key_rank(key: u128) -> u32 {
    (key >> 96) as u32
}

/// A max-tree over the nodes' [`tree_key`]s: an array of `2 × leaves` keys, the leaves at
/// `leaves..2 × leaves` and node `i` the max of `2i` and `2i + 1` (any number of leaves:
/// every leaf has exactly one path to node 1, so node 1 is the best node, and a range query
/// walks up from both ends). Not padded to a power of two: a class's tree is about 16 bytes
/// per node, not up to 32. An update walks up until nothing changes.
struct BestTree {
    leaves: usize,
    keys: Vec<u128>,
    /// Updates set their leaf only, until [`BestTree::end_batch`] recomputes every inner
    /// node (see [`BestTree::begin_batch`]).
    batch: bool,
}

impl BestTree {
    /// The tree of these fits (by node index), node `i` at leaf `i`, or at its leaf of the
    /// layout.
    fn new(fits: &[Fit], layout: Option<&Layout>) -> BestTree {
        let leaves = fits.len().max(1);
        let mut keys = vec![0u128; 2 * leaves];
        for (i, fit) in fits.iter().enumerate() {
            let leaf = layout.map_or(i, |l| l.leaf[i] as usize);
            keys[leaves + leaf] = tree_key(i as u32, *fit);
        }
        let mut tree = BestTree { leaves, keys, batch: false };
        tree.fill_inner();
        tree
    }

    /// Sets every inner node from its children.
    fn fill_inner(&mut self) {
        let keys = &mut self.keys;
        for i in (1..self.leaves).rev() {
            keys[i] = keys[2 * i].max(keys[2 * i + 1]);
        }
    }

    /// Starts a batch of updates of many leaves: until [`BestTree::end_batch`], an update
    /// sets its leaf only (the inner nodes are out of date; only leaves may be read). Past
    /// about an eighth of the leaves, one pass over the inner nodes costs less than walking
    /// up from each leaf.
    fn begin_batch(&mut self, updates: usize) {
        self.batch = updates * 8 >= self.leaves;
    }

    /// Ends a batch of updates: the inner nodes are set again.
    fn end_batch(&mut self) {
        if std::mem::take(&mut self.batch) {
            self.fill_inner();
        }
    }

    fn set(&mut self, leaf: usize, node: u32, fit: Fit) {
        self.set_key(leaf, tree_key(node, fit));
    }

    /// The key at a leaf.
    fn key_at(&self, leaf: usize) -> u128 {
        self.keys[self.leaves + leaf]
    }

    fn set_key(&mut self, leaf: usize, key: u128) {
        let mut i = self.leaves + leaf;
        self.keys[i] = key;
        if self.batch {
            return;
        }
        while i > 1 {
            i /= 2;
            let best = self.keys[2 * i].max(self.keys[2 * i + 1]);
            if self.keys[i] == best {
                break;
            }
            self.keys[i] = best;
        }
    }

    /// The key of the best node (0 for an empty tree).
    fn best(&self) -> u128 {
        self.keys.get(1).copied().unwrap_or(0)
    }

    /// The key of the best node of the leaves `start..end` (0 when none).
    fn best_in(&self, start: usize, end: usize) -> u128 {
        let (mut l, mut r) = (start + self.leaves, end + self.leaves);
        let mut best = 0;
        while l < r {
            if l & 1 == 1 {
                best = best.max(self.keys[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.max(self.keys[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// The leaf order of the tree of a class with domain rules ([`crate::Plugin::domain_rules`]):
/// the nodes of each domain on consecutive leaves, so that the best node of the domains
/// the rules allow is the best of a few ranges.
struct Layout {
    /// The leaf of each node.
    leaf: Vec<u32>,
    /// The leaves `start..end` of each domain, then of the nodes without the label.
    ranges: Vec<(u32, u32)>,
}

impl Layout {
    fn new(domains: &NodeDomains) -> Layout {
        let slot = |d: u32| if d == NodeDomains::NONE { domains.count as usize } else { d as usize };
        let mut ranges = vec![(0u32, 0u32); domains.count as usize + 1];
        for &d in &domains.of_node {
            ranges[slot(d)].1 += 1;
        }
        let mut start = 0;
        for r in &mut ranges {
            let len = r.1;
            *r = (start, start);
            start += len;
        }
        let leaf = domains
            .of_node
            .iter()
            .map(|&d| {
                let r = &mut ranges[slot(d)];
                r.1 += 1;
                r.1 - 1
            })
            .collect();
        Layout { leaf, ranges }
    }
}

/// A partition of the nodes a class's tree is laid out by (its domain rules', or the
/// batch partition of its tasks): the nodes' domains and the tree's leaf order.
#[derive(Clone)]
struct Split {
    domains: Arc<NodeDomains>,
    layout: Arc<Layout>,
}

impl Split {
    /// The slot of a node: its domain, or `count` without the label.
    fn slot(&self, n: NodeId) -> usize {
        match self.domains.of_node[n.idx()] {
            NodeDomains::NONE => self.domains.count as usize,
            d => d as usize,
        }
    }
}

struct Class {
    representative: TaskId,
    /// The partition the tree is laid out by: the task's domain rules, when a plugin has
    /// some, else the batch partition of a task that has one
    /// ([`crate::Plugin::batch_partition`]).
    split: Option<Split>,
    /// The answers are without the domain rules of `split`
    /// ([`crate::Plugin::predicate_without_domain_rules`]).
    domain_rules: bool,
    cursor: usize,
    /// Per node, the reason it does not fit, [`FITS`] for a node that fits. With the
    /// tree's leaf keys, which hold the rest of each node's [`Fit`], these are the class's
    /// answers ([`Class::fit`]): 4 bytes per node besides the tree, not another 16, and
    /// whether a node fits is read from here, not from the tree (see [`Class::fails`]).
    no_reasons: Vec<u32>,
    /// Per slot of `split` (one slot without): how many nodes fit in the future only, and
    /// now.
    slot_counts: Vec<[u32; 2]>,
    tree: BestTree,
    reasons: ReasonTable,
    reason_counts: Vec<u32>,
    /// Nodes whose `Fit::No` reason may be out of date: they did not fit, and since then
    /// only took more tasks, which cannot make them fit but may change the first failure
    /// (see [`NodeIndex::touch_used`]), or they fail for good (`fixed`); re-evaluated
    /// before the reasons are read. Each node once (see `stale_marks`).
    stale: Vec<NodeId>,
    /// The nodes in `stale`, a bit per node.
    stale_marks: Vec<u64>,
    /// The nodes where the first predicate fails for the class's tasks whatever the
    /// session does, and why ([`crate::Plugin::fixed_failures`]): never evaluated, their
    /// reasons found from the resource check and these reasons before they are read.
    fixed: Option<Arc<FixedFailures>>,
    /// The class's reason id of each reason of `fixed` (`u32::MAX` until met).
    fixed_ids: Vec<u32>,
    /// The [`RequestChecks`] of the class's request (in `NodeIndex::requests`).
    request: u32,
    /// The class is a view of its evaluation group's tree (see [`view`]): its own tree,
    /// answers and stale nodes are empty.
    view: Option<View>,
}

/// The reasons a class or a group met, each with an id.
#[derive(Clone, Default)]
struct ReasonTable {
    reasons: Vec<String>,
    ids: HashMap<String, u32>,
    /// Reasons of failed resource checks, by the mask of insufficient dimensions.
    insufficient: Vec<(u64, u32)>,
}

impl ReasonTable {
    fn intern(&mut self, reason: String) -> u32 {
        // A class meets a few reasons: comparing them (most differ in length or in their
        // first bytes) is cheaper than hashing.
        if self.reasons.len() <= 16 {
            if let Some(id) = self.reasons.iter().position(|r| *r == reason) {
                return id as u32;
            }
        } else if let Some(id) = self.ids.get(&reason) {
            return *id;
        }
        let id = self.reasons.len() as u32;
        self.reasons.push(reason.clone());
        self.ids.insert(reason, id);
        id
    }

    /// The fit of an evaluation, its reason interned.
    fn fit_of(&mut self, task: &TaskInfo, r: Evaluation) -> Fit {
        match r {
            Ok((true, s)) => Fit::Idle(s),
            Ok((false, s)) => Fit::Future(s),
            Err(Reason::Insufficient(mask)) => {
                if let Some(&(_, id)) = self.insufficient.iter().find(|(m, _)| *m == mask) {
                    return Fit::No(id);
                }
                // The message of `Session::fits_future_idle`.
                let dims: Vec<&str> =
                    task.resreq.dims().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, (n, _))| n).collect();
                let id = self.intern(format!("Insufficient {}", dims.join(", ")));
                self.insufficient.push((mask, id));
                Fit::No(id)
            }
            Err(Reason::Predicate(reason)) => Fit::No(self.intern(reason)),
        }
    }
}

/// [`Class::no_reasons`] of a node that fits.
const FITS: u32 = u32::MAX;

/// Pushes a node onto a list once, with a bit per node (of `nodes`) in `marks` saying which
/// are on it.
fn push_once(list: &mut Vec<NodeId>, marks: &mut Vec<u64>, nodes: usize, n: NodeId) {
    let (word, bit) = (n.idx() / 64, 1u64 << (n.idx() % 64));
    if marks.len() <= word {
        marks.resize(nodes.div_ceil(64).max(word + 1), 0);
    }
    if marks[word] & bit == 0 {
        marks[word] |= bit;
        list.push(n);
    }
}

/// Why a node does not fit a task.
enum Reason {
    /// The request exceeds the node's future idle resources on these dimensions (bit `i`
    /// is the `i`-th dimension of the request, in [`crate::Resource::dims`] order).
    Insufficient(u64),
    /// A predicate failed.
    Predicate(String),
}

/// A node's answer for a task: (fits idle now, score), or why it does not fit.
type Evaluation = Result<(bool, f64), Reason>;

/// Where a task can go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeChoice {
    /// The best node where the task fits now.
    Idle(NodeId),
    /// The best node where it fits once releasing pods are gone (pipeline).
    Future(NodeId),
}

impl NodeChoice {
    /// The chosen node.
    pub fn node(self) -> NodeId {
        match self {
            NodeChoice::Idle(n) | NodeChoice::Future(n) => n,
        }
    }
}

/// [`NodeIndex::usable`]: the index answers, and the batch scores are uniform.
const UNIFORM: u8 = 1;
/// [`NodeIndex::usable`]: the index answers, and the batch scores are sparse
/// ([`crate::Plugin::batch_sparse`]).
const SPARSE: u8 = 2;
/// [`NodeIndex::usable`]: the task is scanned.
const SCAN: u8 = 3;
/// [`NodeIndex::usable`]: the index answers, and the batch scores are uniform per domain
/// outside a few nodes ([`crate::Plugin::batch_partition`]).
const PARTITIONED: u8 = 4;

/// The rank of a fit: 2 fits now, 1 fits later, 0 does not fit.
fn rank(fit: Fit) -> u32 {
    match fit {
        Fit::Idle(_) => 2,
        Fit::Future(_) => 1,
        Fit::No(_) => 0,
    }
}

/// The per-slot counts of a class's fits (see [`Class::slot_counts`]).
fn count_slots(fits: &[Fit], split: Option<&Split>) -> Vec<[u32; 2]> {
    let mut counts = vec![[0u32; 2]; split.map_or(1, |s| s.domains.count as usize + 1)];
    for (i, &fit) in fits.iter().enumerate() {
        let r = rank(fit);
        if r > 0 {
            counts[split.map_or(0, |s| s.slot(NodeId(i as u32)))][r as usize - 1] += 1;
        }
    }
    counts
}
/// The key of a task with inter-pod rules that no plugin reads per node (preferred pod
/// affinity, whose scores are batch scores): even, so no combined key equals it.
const NO_RULES_READ: u64 = 2;

/// The per-session node index (see the module docs).
#[derive(Default)]
pub(crate) struct NodeIndex {
    /// The nodes changed, in order: `2 × node + 1` when the node only took a task (see
    /// [`NodeIndex::touch_used`]), `2 × node` for any other change.
    log: Vec<u32>,
    classes: Vec<Class>,
    /// Class of each task shape with key 0 ([`crate::Plugin::shape_key`]), `u32::MAX` when
    /// not built yet.
    class_of_shape: Vec<u32>,
    /// Class of each (base shape, key) with a non-zero key: the key stands for the
    /// inter-pod rules, so tasks of different shapes share a class when their shapes
    /// differ only in inter-pod rules and their keys are equal (the pods of many jobs, each
    /// spread over the zones by its own label; [`NO_RULES_READ`] for tasks whose rules no
    /// plugin reads per node).
    class_of_keyed: HashMap<(u32, u64), u32>,
    /// Base shape of each task shape (`u32::MAX` when not known yet): shapes equal but for
    /// their inter-pod rules have the same base shape.
    base_of_shape: Vec<u32>,
    /// A task of each base shape.
    base_reps: Vec<TaskId>,
    /// Per task: 0 when not asked yet, [`UNIFORM`] or [`SPARSE`] when the index may answer
    /// for it (its batch scores are uniform, or sparse), [`SCAN`] when not.
    usable: Vec<u8>,
    /// Per task: its plugins' combined [`crate::Plugin::shape_key`], or [`NO_RULES_READ`]
    /// (valid once `usable` is [`UNIFORM`] or [`SPARSE`]).
    keys: Vec<u64>,
    /// Reused buffer of special nodes.
    special: Vec<NodeId>,
    /// Reused buffer of the special nodes' tree keys while they are masked.
    masked: Vec<u128>,
    /// Reused buffers of a query's best other nodes (tree key, slot), its scored
    /// candidates with the nodes each stands for, and their nodes, counts and scores.
    others: Vec<(u128, usize)>,
    candidates: Vec<(NodeId, u32)>,
    candidate_nodes: Vec<NodeId>,
    candidate_counts: Vec<u32>,
    candidate_scores: Vec<f64>,
    /// Reused buffer of rule exceptions.
    exceptions: Vec<NodeId>,
    /// Reused buffer of changed nodes (log entries).
    changed: Vec<u32>,
    /// Marks for finding the distinct nodes of a stretch of the log.
    changes: DistinctChanges,
    /// The leaf orders of the node partitions met so far (of domain rules and batch
    /// partitions; equal partitions of different plugins share one).
    layouts: Vec<(Arc<NodeDomains>, Arc<Layout>)>,
    /// The domain verdicts of the current query ([`crate::Plugin::domain_verdicts`]).
    verdicts: Vec<Option<Cow<'static, str>>>,
    /// Nodes the plugins reported through [`crate::Plugin::drain_touched`].
    pub(crate) touched: Vec<NodeId>,
    /// Per class (by index, grown on demand): the eviction checks and node scores asked
    /// for by [`Session::eviction_candidates`].
    evictions: Vec<Option<EvictionAnswers>>,
    /// The resource check of every node per distinct request, shared by the classes whose
    /// tasks ask for it.
    requests: Vec<RequestChecks>,
    /// The index in `requests` of each request met.
    request_ids: HashMap<RequestKey, u32>,
    /// Buffers of a class's build, kept for the next build.
    build_results: Vec<Option<Evaluation>>,
    build_fits: Vec<Fit>,
    /// The evaluations of every node per evaluation group, shared by the classes of the
    /// group.
    groups: Vec<SharedEvaluations>,
    /// The index in `groups` of each group met: (request, non-zero cpu and memory bits,
    /// the plugins' evaluation keys).
    group_ids: HashMap<(u32, i64, i64, Vec<u64>), u32>,
}

/// Finds the distinct nodes of a stretch of the change log in one pass over it (a mark per
/// node, valid for one stretch), rather than by sorting it.
#[derive(Default)]
struct DistinctChanges {
    /// Per node: `2 × stretch number`, `+ 1` while every entry of the node in the stretch
    /// says it only took a task.
    marks: Vec<u32>,
    stretch: u32,
}

impl DistinctChanges {
    /// The distinct nodes of `log` (of a cluster of `nodes` nodes) as log entries, in the
    /// order they first appear: `2 × node` when some entry of the node is any change
    /// (even), else `2 × node + 1` (it only took tasks).
    fn distinct(&mut self, log: &[u32], nodes: usize, out: &mut Vec<u32>) {
        out.clear();
        if self.marks.len() < nodes {
            self.marks.resize(nodes, 0);
        }
        if self.stretch >= u32::MAX / 2 - 1 {
            self.marks.iter_mut().for_each(|m| *m = 0);
            self.stretch = 0;
        }
        self.stretch += 1;
        let this = self.stretch << 1;
        for &e in log {
            let n = (e >> 1) as usize;
            let m = self.marks[n];
            if m & !1 != this {
                self.marks[n] = this | (e & 1);
                out.push(n as u32);
            } else if e & 1 == 0 {
                self.marks[n] = this;
            }
        }
        for n in out.iter_mut() {
            *n = (*n << 1) | (self.marks[*n as usize] & 1);
        }
    }
}

/// A request as a map key: its numbers by their bits, so that equal keys are equal requests.
#[derive(PartialEq, Eq, Hash)]
struct RequestKey(Vec<(Box<str>, u64)>);

impl RequestKey {
    fn of(task: &TaskInfo) -> RequestKey {
        RequestKey(task.resreq.dims().map(|(n, v)| (n.into(), v.to_bits())).collect())
    }
}

/// [`fit_check`] of one request on every node, current up to a position of the change log.
/// The check reads only the request and the node, so the classes of every task with that
/// request share it: a class is built from it, evaluating the predicates and scores only on
/// the nodes where the request fits.
struct RequestChecks {
    /// A task with the request.
    task: TaskId,
    cursor: usize,
    checks: Vec<Result<bool, Option<u64>>>,
}

/// A class's answers for `preempt` on the nodes asked so far, each valid until the node
/// changes (read from the change log, as the class's own answers).
struct EvictionAnswers {
    cursor: usize,
    /// Per node: `None` when not known, else whether the eviction predicates pass and the
    /// node's own score (Σ node order).
    answers: Vec<Option<(bool, f64)>>,
}

impl NodeIndex {
    /// Whether changes are logged: once something reads the log (a class or the checks of
    /// a request).
    fn logging(&self) -> bool {
        !self.classes.is_empty() || !self.requests.is_empty()
    }

    /// Records that a node's accounting changed.
    pub(crate) fn touch(&mut self, n: NodeId) {
        if self.logging() {
            self.log.push(2 * n.0);
        }
    }

    /// Records that a node took a task (allocated or pipelined): its idle and future idle
    /// resources shrank and it holds one more task. No check of the predicates or of the
    /// resources can go from failing to passing on it for that (the inter-pod rules, which
    /// can, report the nodes they change through [`crate::Plugin::drain_touched`], logged
    /// as any change), so a node that did not fit a class still does not, and only the
    /// first failure's reason may differ.
    pub(crate) fn touch_used(&mut self, n: NodeId) {
        if self.logging() {
            self.log.push(2 * n.0 + 1);
        }
    }

    /// Records the nodes the plugins reported.
    pub(crate) fn touch_drained(&mut self) {
        if self.logging() {
            self.log.extend(self.touched.drain(..).map(|n| 2 * n.0));
        } else {
            self.touched.clear();
        }
    }
}

/// The allocate action's resource check (see [`Session::fits_future_idle`]) without a
/// message: `Ok(fits idle now)`, or the insufficient dimensions (`Err(None)` when the mask
/// cannot hold them).
fn fit_check(task: &TaskInfo, node: &NodeInfo) -> Result<bool, Option<u64>> {
    let req = &task.resreq;
    if node.releasing.is_exact_zero() && node.pipelined.is_exact_zero() {
        // Future idle is idle: one comparison answers both questions.
        return if req.less_equal(&node.idle, DimensionDefault::Zero) {
            Ok(true)
        } else {
            Err(req.insufficient_mask(&node.idle))
        };
    }
    let future = node.future_idle();
    if req.less_equal(&future, DimensionDefault::Zero) {
        Ok(Session::fits_idle(req, node))
    } else {
        Err(req.insufficient_mask(&future))
    }
}

impl Session {
    /// A node's answer for a task; without the task's domain rules when `split` (see
    /// [`crate::Plugin::domain_rules`]).
    fn evaluate(&self, t: TaskId, n: NodeId, split: bool) -> Evaluation {
        self.evaluate_checked(t, n, split, fit_check(self.snap.task(t), self.snap.node(n)))
    }

    /// [`Session::evaluate`], given the node's [`fit_check`] of the task.
    fn evaluate_checked(&self, t: TaskId, n: NodeId, split: bool, check: Result<bool, Option<u64>>) -> Evaluation {
        let idle = match check {
            Ok(idle) => idle,
            Err(Some(mask)) => return Err(Reason::Insufficient(mask)),
            Err(None) => {
                let (task, node) = (self.snap.task(t), self.snap.node(n));
                return Err(Reason::Predicate(Session::fits_future_idle(task, node).expect_err("does not fit").reason));
            }
        };
        if split {
            self.predicate_without_domain_rules(t, n).map_err(|s| Reason::Predicate(s.reason))?;
        } else {
            self.predicate(t, n).map_err(|s| Reason::Predicate(s.reason))?;
        }
        let score: f64 = self.node_order_sum(t, n);
        let score = if score == 0.0 { 0.0 } else { score };
        Ok((idle, score))
    }

    fn class_of(&mut self, t: TaskId) -> usize {
        let key = self.index.keys[t.idx()];
        if key != 0 {
            let base = self.base_shape(t);
            if let Some(&c) = self.index.class_of_keyed.get(&(base, key)) {
                return c as usize;
            }
            let c = self.build_class(t);
            self.index.class_of_keyed.insert((base, key), c as u32);
            return c;
        }
        let shape = self.snap.task(t).shape as usize;
        if self.index.class_of_shape.len() <= shape {
            let len = (self.snap.shape_count() as usize).max(shape + 1);
            self.index.class_of_shape.resize(len, u32::MAX);
        }
        let known = self.index.class_of_shape[shape];
        if known != u32::MAX {
            return known as usize;
        }
        let c = self.build_class(t);
        self.index.class_of_shape[shape] = c as u32;
        c
    }

    /// The base shape of a task (see [`NodeIndex::base_of_shape`]).
    fn base_shape(&mut self, t: TaskId) -> u32 {
        let task = self.snap.task(t);
        let shape = task.shape as usize;
        if self.index.base_of_shape.len() <= shape {
            let len = (self.snap.shape_count() as usize).max(shape + 1);
            self.index.base_of_shape.resize(len, u32::MAX);
        }
        if self.index.base_of_shape[shape] == u32::MAX {
            let base = match (self.index.base_reps.iter())
                .position(|&r| crate::snapshot::build::same_base_shape(self.snap.task(r), task))
            {
                Some(b) => b as u32,
                None => {
                    self.index.base_reps.push(t);
                    self.index.base_reps.len() as u32 - 1
                }
            };
            self.index.base_of_shape[shape] = base;
        }
        self.index.base_of_shape[shape]
    }

    /// Re-evaluates the nodes that changed since the class last looked (for a view, since
    /// its group last looked).
    fn refresh(&mut self, c: usize) {
        if let Some(g) = self.view_group(c) {
            self.refresh_group(g);
            return;
        }
        let start = self.index.classes[c].cursor;
        let end = self.index.log.len();
        if start < end {
            self.refresh_request_checks(self.index.classes[c].request);
            let mut changed = std::mem::take(&mut self.index.changed);
            self.index.changes.distinct(&self.index.log[start..end], self.snap.nodes.len(), &mut changed);
            let fixed = self.index.classes[c].fixed.clone();
            self.index.classes[c].tree.begin_batch(changed.len());
            for &e in changed.iter() {
                let n = NodeId(e >> 1);
                let class = &mut self.index.classes[c];
                if fixed.as_ref().is_some_and(|f| f.fails(n)) || (e & 1 == 1 && class.fails(n)) {
                    class.mark_stale(n);
                } else {
                    self.reevaluate_node(c, n);
                }
            }
            self.index.classes[c].tree.end_batch();
            self.index.changed = changed;
            self.index.classes[c].cursor = end;
        }
    }

    /// Re-evaluates the class's nodes whose reasons may be out of date.
    fn flush_stale(&mut self, c: usize) {
        let mut stale = std::mem::take(&mut self.index.classes[c].stale);
        if stale.is_empty() {
            return;
        }
        stale.sort_unstable();
        let rep = self.index.classes[c].representative;
        let request = self.index.classes[c].request as usize;
        self.refresh_request_checks(request as u32);
        for &n in &stale {
            let class = &mut self.index.classes[c];
            let task = self.snap.task(rep);
            let checks = &self.index.requests[request].checks;
            match class.fixed_fit(task, n, || checks[n.idx()]) {
                Some(fit) => class.set_answer(n, fit),
                None => self.reevaluate_node(c, n),
            }
        }
        stale.clear();
        let class = &mut self.index.classes[c];
        class.stale = stale;
        class.stale_marks.iter_mut().for_each(|w| *w = 0);
    }

    /// Re-evaluates these nodes (sorted, distinct) for a class.
    fn reevaluate(&mut self, c: usize, nodes: &[NodeId]) {
        self.refresh_request_checks(self.index.classes[c].request);
        for &n in nodes {
            self.reevaluate_node(c, n);
        }
    }

    /// Re-evaluates a node for a class (not a view), whose [`RequestChecks`] are up to date.
    fn reevaluate_node(&mut self, c: usize, n: NodeId) {
        let class = &self.index.classes[c];
        let (rep, split) = (class.representative, class.domain_rules);
        let request = &self.index.requests[class.request as usize];
        debug_assert_eq!(request.cursor, self.index.log.len());
        let r = self.evaluate_checked(rep, n, split, request.checks[n.idx()]);
        let class = &mut self.index.classes[c];
        let fit = class.fit_of(self.snap.task(rep), r);
        class.set_answer(n, fit);
    }

    /// The domain rules of a task (see [`crate::Plugin::domain_rules`]; one plugin at
    /// most has some, see [`Session::index_usable`]), with the leaf order of their
    /// partition.
    fn split_of(&mut self, t: TaskId) -> Option<Split> {
        let domains = self.node_plugins().find_map(|p| p.domain_rules(&self.snap, t))?;
        Some(self.layout_of(domains))
    }

    /// The batch partition of a [`PARTITIONED`] task (see
    /// [`crate::Plugin::batch_partition`]), with its leaf order.
    fn batch_split_of(&mut self, t: TaskId) -> Option<Split> {
        let domains = self.batch_plugins().find_map(|p| p.batch_partition(&self.snap, t))?;
        Some(self.layout_of(domains))
    }

    /// A partition with its leaf order, shared by equal partitions (the predicates' and the
    /// scores' zones are one layout).
    fn layout_of(&mut self, domains: Arc<NodeDomains>) -> Split {
        if let Some((_, l)) = self.index.layouts.iter().find(|(d, _)| Arc::ptr_eq(d, &domains)) {
            return Split { domains, layout: l.clone() };
        }
        let layout = match self.index.layouts.iter().find(|(d, _)| **d == *domains) {
            Some((_, l)) => l.clone(),
            None => Arc::new(Layout::new(&domains)),
        };
        self.index.layouts.push((domains.clone(), layout.clone()));
        Split { domains, layout }
    }

    /// A class built from a recent class whose shape differs only in inter-pod rules: its
    /// answers, with the nodes where either task's rules may fail now re-evaluated (see
    /// [`crate::Plugin::rule_exceptions`]). `None` when there is no such class, or the nodes
    /// cannot be listed, or they are most of the cluster.
    fn derive_class(&mut self, t: TaskId, split: Option<Split>, domain_rules: bool) -> Result<usize, Option<Split>> {
        const RECENT: usize = 16;
        let first = self.index.classes.len().saturating_sub(RECENT);
        let Some(donor) = (first..self.index.classes.len()).rev().find(|&d| {
            let rep = self.snap.task(self.index.classes[d].representative);
            crate::snapshot::build::same_base_shape(rep, self.snap.task(t))
        }) else {
            return Err(split);
        };
        self.refresh(donor);
        let rep = self.index.classes[donor].representative;
        let mut nodes = std::mem::take(&mut self.index.exceptions);
        nodes.clear();
        let listed = self
            .node_plugins()
            .all(|p| p.rule_exceptions(&self.snap, t, &mut nodes) && p.rule_exceptions(&self.snap, rep, &mut nodes));
        if !listed || nodes.len() > self.snap.nodes.len() / 2 {
            self.index.exceptions = nodes;
            return Err(split);
        }
        nodes.sort_unstable();
        nodes.dedup();
        if self.index.classes[donor].view.is_some() {
            let class = self.class_from_view(donor, t, split, domain_rules);
            self.index.classes.push(class);
            let c = self.index.classes.len() - 1;
            self.reevaluate(c, &nodes);
            self.index.exceptions = nodes;
            return Ok(c);
        }
        let d = &self.index.classes[donor];
        let layout = split.as_ref().map(|s| &s.layout);
        let same_layout = layout.map(Arc::as_ptr) == d.split.as_ref().map(|s| Arc::as_ptr(&s.layout));
        let (tree, slot_counts) = if same_layout {
            (BestTree { leaves: d.tree.leaves, keys: d.tree.keys.clone(), batch: false }, d.slot_counts.clone())
        } else {
            let fits = d.fits();
            (BestTree::new(&fits, layout.map(|l| l.as_ref())), count_slots(&fits, split.as_ref()))
        };
        let class = Class {
            representative: t,
            split,
            domain_rules,
            cursor: d.cursor,
            no_reasons: d.no_reasons.clone(),
            slot_counts,
            tree,
            reasons: d.reasons.clone(),
            reason_counts: d.reason_counts.clone(),
            // The donor's answers come with its out-of-date reasons.
            stale: d.stale.clone(),
            stale_marks: d.stale_marks.clone(),
            // The same base shape: the same selector, node affinity and tolerations.
            fixed: d.fixed.clone(),
            fixed_ids: d.fixed_ids.clone(),
            // The same base shape: the same requests.
            request: d.request,
            // A task with a non-zero key is in no group.
            view: None,
        };
        self.index.classes.push(class);
        let c = self.index.classes.len() - 1;
        self.reevaluate(c, &nodes);
        self.index.exceptions = nodes;
        Ok(c)
    }

    /// The nodes where the first predicate fails for the task whatever the session does,
    /// and why (see [`crate::Plugin::fixed_failures`]). Only the first plugin with an active
    /// predicate is asked: its failure is the one a scan reports on a node where the
    /// resources fit.
    fn fixed_failures(&self, t: TaskId) -> Option<Arc<FixedFailures>> {
        self.active(Hooks::PREDICATE).next()?.fixed_failures(&self.snap, t)
    }

    /// The [`RequestChecks`] of a task's request, brought up to date with the change log
    /// (each logged node checked again: the check is cheap, and a node that only took a task
    /// may now lack more dimensions), computed on first use.
    fn request_checks_of(&mut self, t: TaskId) -> u32 {
        let key = RequestKey::of(self.snap.task(t));
        match self.index.request_ids.get(&key) {
            Some(&r) => {
                self.refresh_request_checks(r);
                r
            }
            None => {
                let task = self.snap.task(t);
                let nodes = self.snap.nodes.len();
                let checks = if self.parallel(nodes) {
                    (0..nodes).into_par_iter().map(|i| fit_check(task, &self.snap.nodes[i])).collect()
                } else {
                    (0..nodes).map(|i| fit_check(task, &self.snap.nodes[i])).collect()
                };
                let cursor = self.index.log.len();
                self.index.requests.push(RequestChecks { task: t, cursor, checks });
                let r = self.index.requests.len() as u32 - 1;
                self.index.request_ids.insert(key, r);
                r
            }
        }
    }

    /// Brings [`RequestChecks`] up to date with the change log.
    fn refresh_request_checks(&mut self, r: u32) {
        let end = self.index.log.len();
        let checks = &mut self.index.requests[r as usize];
        if checks.cursor == end {
            return;
        }
        let task = self.snap.task(checks.task);
        for &e in &self.index.log[checks.cursor..end] {
            let n = (e >> 1) as usize;
            checks.checks[n] = fit_check(task, &self.snap.nodes[n]);
        }
        checks.cursor = end;
    }

    /// The evaluation group of a task's class (see [`view`]), computed on first use: `None`
    /// when some plugin with a predicate or node score gives no
    /// [`crate::Plugin::evaluation_key`], or the task has inter-pod rules a plugin reads
    /// (its key is not 0) or domain rules, or a predicate plugin other than the first lists
    /// fixed failures (nodes where it fails for good may then pass the first, and their
    /// answers differ between the classes of the group), or there are no nodes.
    fn group_of(&mut self, t: TaskId, request: u32, domain_rules: bool) -> Option<u32> {
        if domain_rules || self.index.keys[t.idx()] != 0 || self.snap.nodes.is_empty() {
            return None;
        }
        let mut keys = Vec::new();
        let evaluating =
            self.tiers.iter().flatten().filter(|s| s.active.intersects(Hooks::PREDICATE | Hooks::NODE_ORDER));
        for s in evaluating {
            keys.push(s.plugin.evaluation_key(&self.snap, t)?);
        }
        if self.active(Hooks::PREDICATE).skip(1).any(|p| p.fixed_failures(&self.snap, t).is_some()) {
            return None;
        }
        let task = self.snap.task(t);
        let key = (request, task.nonzero_cpu, task.nonzero_memory, keys);
        if let Some(&g) = self.index.group_ids.get(&key) {
            return Some(g);
        }
        let g = self.index.groups.len() as u32;
        let group =
            SharedEvaluations::new(request, &self.index.requests[request as usize].checks, self.index.log.len());
        self.index.groups.push(group);
        self.index.group_ids.insert(key, g);
        Some(g)
    }

    fn build_class(&mut self, t: TaskId) -> usize {
        let mut split = self.split_of(t);
        let is_split = split.is_some();
        if split.is_none() && self.index.usable[t.idx()] == PARTITIONED {
            split = self.batch_split_of(t);
        }
        let split = match self.derive_class(t, split, is_split) {
            Ok(c) => return c,
            Err(split) => split,
        };
        let nodes = self.snap.nodes.len();
        let request = self.request_checks_of(t);
        let fixed = self.fixed_failures(t);
        let mut class = Class::new(t, split, is_split, self.index.log.len(), fixed, request);
        if let Some(g) = self.group_of(t, request, is_split) {
            class.view = Some(View::new(g));
            self.index.classes.push(class);
            let c = self.index.classes.len() - 1;
            if self.join_group(g, c) {
                return c;
            }
            // Too many cells: a tree of its own.
            class = self.index.classes.pop().expect("pushed above");
            class.view = None;
        }
        // Buffers reused from class to class: a class's build would otherwise fault in
        // about 0.5 MB of fresh pages at 10,000 nodes.
        let mut results = std::mem::take(&mut self.index.build_results);
        let mut fits = std::mem::take(&mut self.index.build_fits);
        let this = &*self;
        let checks = &this.index.requests[request as usize].checks;
        let fixed = &class.fixed;
        // A node that fails for good is not evaluated (see `Class::fixed_fit`).
        let eval = |i: usize| match fixed {
            Some(f) if f.of_node[i] != 0 => None,
            _ => Some(this.evaluate_checked(t, NodeId(i as u32), is_split, checks[i])),
        };
        if self.parallel(nodes) {
            (0..nodes).into_par_iter().map(eval).collect_into_vec(&mut results);
        } else {
            results.clear();
            results.extend((0..nodes).map(eval));
        }
        let task = self.snap.task(t);
        class.no_reasons.reserve(nodes);
        fits.clear();
        for (i, r) in results.drain(..).enumerate() {
            let n = NodeId(i as u32);
            let fit = match r {
                Some(r) => class.fit_of(task, r),
                None => match class.fixed_fit(task, n, || checks[i]) {
                    Some(fit) => fit,
                    None => class.fit_of(task, this.evaluate_checked(t, n, is_split, checks[i])),
                },
            };
            class.push_answer(fit);
            fits.push(fit);
        }
        class.tree = BestTree::new(&fits, class.split.as_ref().map(|s| s.layout.as_ref()));
        class.slot_counts = count_slots(&fits, class.split.as_ref());
        self.index.build_results = results;
        self.index.build_fits = fits;
        self.index.classes.push(class);
        self.index.classes.len() - 1
    }

    /// Finds the best node for a task through the node index: the best node where it fits
    /// now, else the best where it fits once releasing pods are gone; the fit errors of all
    /// nodes when none fits. Same answer as a full scan (`predicate_nodes` + `best_node`).
    pub fn find_node(&mut self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        if !self.index_usable(t) {
            return self.find_node_by_scan(t);
        }
        let c = self.class_of(t);
        let mode = self.index.usable[t.idx()];
        if mode == PARTITIONED && !self.lay_out_by_batch_partition(c, t) {
            return self.find_node_by_scan(t);
        }
        self.refresh(c);
        self.fill_verdicts(c, t);
        if mode == SPARSE || mode == PARTITIONED {
            if let Some(choice) = self.special_choice(c, t, mode == PARTITIONED) {
                return Ok(choice);
            }
        }
        let best = self.best_allowed(c);
        match key_rank(best) {
            2 => return Ok(NodeChoice::Idle(key_node(best))),
            1 => return Ok(NodeChoice::Future(key_node(best))),
            _ => {}
        }
        if self.index.classes[c].view.is_some() {
            return Err(self.view_errors(c));
        }
        self.flush_stale(c);
        Err(self.class_errors(c, t))
    }

    /// The domain verdicts of a class's task now, into `index.verdicts` (empty for a class
    /// without domain rules).
    fn fill_verdicts(&mut self, c: usize, t: TaskId) {
        let mut verdicts = std::mem::take(&mut self.index.verdicts);
        verdicts.clear();
        if let Some(split) = self.index.classes[c].split.as_ref().filter(|_| self.index.classes[c].domain_rules) {
            verdicts.resize(split.domains.count as usize + 1, None);
            for p in self.node_plugins() {
                p.domain_verdicts(&self.snap, t, &mut verdicts);
            }
        }
        self.index.verdicts = verdicts;
    }

    /// The key of the best node of a class among those its domain verdicts allow.
    fn best_allowed(&self, c: usize) -> u128 {
        let class = &self.index.classes[c];
        if class.view.is_some() {
            return self.view_best(c, None);
        }
        match class.split.as_ref().filter(|_| class.domain_rules) {
            None => class.tree.best(),
            Some(split) => (split.layout.ranges.iter().zip(&self.index.verdicts))
                .filter(|(_, v)| v.is_none())
                .map(|(&(start, end), _)| class.tree.best_in(start as usize, end as usize))
                .max()
                .unwrap_or(0),
        }
    }

    /// A node's key in a class's tree (in its group's, for a view).
    fn class_key(&self, c: usize, n: NodeId) -> u128 {
        let class = &self.index.classes[c];
        match class.view {
            Some(_) => self.view_key(c, n),
            None => class.tree.key_at(class.leaf(n)),
        }
    }

    /// Sets a node's key in a class's tree (in its group's, for a view).
    fn set_class_key(&mut self, c: usize, n: NodeId, key: u128) {
        if self.index.classes[c].view.is_some() {
            self.set_view_key(c, n, key);
        } else {
            let class = &mut self.index.classes[c];
            let leaf = class.leaf(n);
            class.tree.set_key(leaf, key);
        }
    }

    /// The reason of a node's domain verdict (`None` when it is allowed or the class has no
    /// domain rules).
    fn domain_refusal(&self, c: usize, n: NodeId) -> Option<&str> {
        let class = &self.index.classes[c];
        let split = class.split.as_ref().filter(|_| class.domain_rules)?;
        self.index.verdicts[split.slot(n)].as_deref()
    }

    /// Why no node fits a class's task: per node, the first failure a scan meets.
    fn class_errors(&self, c: usize, t: TaskId) -> FitErrors {
        let mut errors = FitErrors { nodes: self.snap.nodes.len(), ..Default::default() };
        let mut counts = self.index.classes[c].reason_counts.clone();
        if self.index.classes[c].domain_rules {
            // A node its domain refuses fails with the domain's reason when it passes the
            // other checks, with a failed resource check (the first check) when it has one,
            // and with what the full predicate says otherwise.
            let mut refused: HashMap<String, u32> = HashMap::new();
            for i in 0..self.snap.nodes.len() {
                let n = NodeId(i as u32);
                let Some(reason) = self.domain_refusal(c, n) else { continue };
                let class = &self.index.classes[c];
                let reason = match class.fit(n) {
                    Fit::Idle(_) | Fit::Future(_) => reason.to_string(),
                    Fit::No(id) => {
                        if class.reasons.insufficient.iter().any(|&(_, r)| r == id) {
                            continue;
                        }
                        counts[id as usize] -= 1;
                        // (Failing a predicate without the domain rules, it fails one
                        // with them.)
                        match self.evaluate(t, n, false) {
                            Err(Reason::Predicate(r)) => r,
                            _ => reason.to_string(),
                        }
                    }
                };
                *refused.entry(reason).or_default() += 1;
            }
            for (reason, n) in refused {
                *errors.reasons.entry(reason).or_default() += n;
            }
        }
        let class = &self.index.classes[c];
        for (i, n) in counts.iter().enumerate() {
            if *n > 0 {
                *errors.reasons.entry(class.reasons.reasons[i].clone()).or_default() += *n;
            }
        }
        errors
    }
}

impl Session {
    /// Lays a class's tree out by the batch partition of a [`PARTITIONED`] task, when the
    /// class has no layout yet (its tasks so far had none); false when it has another (the
    /// task is then scanned).
    fn lay_out_by_batch_partition(&mut self, c: usize, t: TaskId) -> bool {
        let Some(split) = self.batch_split_of(t) else { return false };
        let class = &mut self.index.classes[c];
        match &class.split {
            Some(s) => Arc::ptr_eq(&s.layout, &split.layout),
            None if class.view.is_some() => {
                // The group's cells split by the partition, when they may be.
                class.split = Some(split);
                let g = self.view_group(c).expect("a view");
                if self.join_group(g, c) {
                    return true;
                }
                self.index.classes[c].split = None;
                false
            }
            None => {
                let fits = class.fits();
                class.tree = BestTree::new(&fits, Some(&split.layout));
                class.slot_counts = count_slots(&fits, Some(&split));
                class.split = Some(split);
                true
            }
        }
    }

    /// The choice of a class whose batch scores are uniform outside a few special nodes
    /// ([`SPARSE`]), or uniform per domain of the class's partition outside them
    /// ([`PARTITIONED`], `by_domain`): the best of the special nodes and of the best other
    /// node (of each domain), by the node-local scores, among those of the best fit rank,
    /// by their node-local and batch scores, each other node standing for the nodes of its
    /// rank it was chosen from; ties to the first node, as a scan. `None` when no node
    /// fits.
    fn special_choice(&mut self, c: usize, t: TaskId, by_domain: bool) -> Option<NodeChoice> {
        let mut special = std::mem::take(&mut self.index.special);
        special.clear();
        for p in self.batch_plugins() {
            p.batch_special_nodes(&self.snap, t, &mut special);
        }
        special.sort_unstable();
        special.dedup();
        // The best other nodes: the special ones masked for the queries. Each with its
        // slot, or `usize::MAX` for the best of every allowed slot.
        let mut masked = std::mem::take(&mut self.index.masked);
        masked.clear();
        for &n in &special {
            masked.push(self.class_key(c, n));
            self.set_class_key(c, n, tree_key(n.0, Fit::No(0)));
        }
        let mut others = std::mem::take(&mut self.index.others);
        others.clear();
        {
            let class = &self.index.classes[c];
            let allowed = |slot: usize| !class.domain_rules || self.index.verdicts[slot].is_none();
            match class.split.as_ref().filter(|_| by_domain) {
                Some(split) => {
                    for (slot, &(start, end)) in split.layout.ranges.iter().enumerate() {
                        if allowed(slot) {
                            let best = match class.view {
                                Some(_) => self.view_best(c, Some(slot)),
                                None => class.tree.best_in(start as usize, end as usize),
                            };
                            others.push((best, slot));
                        }
                    }
                }
                None => others.push((self.best_allowed(c), usize::MAX)),
            }
        }
        for (&n, &key) in special.iter().zip(&masked) {
            self.set_class_key(c, n, key);
        }
        self.index.masked = masked;
        let mut candidates = std::mem::take(&mut self.index.candidates);
        let mut nodes = std::mem::take(&mut self.index.candidate_nodes);
        let mut counts = std::mem::take(&mut self.index.candidate_counts);
        let mut scores = std::mem::take(&mut self.index.candidate_scores);
        // The special nodes' fits, with their domain verdicts.
        let fit = |n: NodeId| {
            if self.domain_refusal(c, n).is_some() {
                Fit::No(0)
            } else if self.index.classes[c].view.is_some() {
                self.view_fit(c, n)
            } else {
                self.index.classes[c].fit(n)
            }
        };
        let top =
            special.iter().map(|&n| rank(fit(n))).chain(others.iter().map(|&(k, _)| key_rank(k))).max().unwrap_or(0);
        if top == 0 {
            self.index.special = special;
            self.index.others = others;
            self.index.candidates = candidates;
            self.index.candidate_nodes = nodes;
            self.index.candidate_counts = counts;
            self.index.candidate_scores = scores;
            return None;
        }
        let class = &self.index.classes[c];
        let slot_of = |n: NodeId| class.split.as_ref().map_or(0, |s| s.slot(n));
        let allowed = |s: usize| !class.domain_rules || self.index.verdicts[s].is_none();
        let at_top = |s: usize| match class.view {
            Some(_) => self.view_count(c, s, top),
            None => class.slot_counts[s][top as usize - 1],
        };
        let slots = match class.view {
            Some(_) => class.split.as_ref().map_or(1, |s| s.domains.count as usize + 1),
            None => class.slot_counts.len(),
        };
        candidates.clear();
        candidates.extend(special.iter().filter(|&&n| rank(fit(n)) == top).map(|&n| (n, 1)));
        for &(key, slot) in &others {
            if key_rank(key) != top {
                continue;
            }
            // The nodes of the top rank it stands for: those of its slot (of every allowed
            // slot), less the special ones.
            let all: u32 =
                if slot == usize::MAX { (0..slots).filter(|&s| allowed(s)).map(at_top).sum() } else { at_top(slot) };
            let listed =
                special.iter().filter(|&&n| rank(fit(n)) == top && (slot == usize::MAX || slot_of(n) == slot)).count()
                    as u32;
            debug_assert!(all > listed, "a node of the top rank stands for at least itself");
            candidates.push((key_node(key), all.saturating_sub(listed).max(1)));
        }
        candidates.sort_unstable();
        nodes.clear();
        counts.clear();
        scores.clear();
        for &(n, k) in &candidates {
            nodes.push(n);
            counts.push(k);
            scores.push(match fit(n) {
                Fit::Idle(s) | Fit::Future(s) => s,
                Fit::No(_) => unreachable!("candidates fit"),
            });
        }
        if nodes.len() > 1 {
            for p in self.batch_plugins() {
                p.batch_node_order_counted(&self.snap, t, &nodes, &counts, &mut scores);
            }
        }
        let mut best = 0;
        for i in 1..nodes.len() {
            if scores[i] > scores[best] {
                best = i;
            }
        }
        let n = nodes[best];
        self.index.special = special;
        self.index.others = others;
        self.index.candidates = candidates;
        self.index.candidate_nodes = nodes;
        self.index.candidate_counts = counts;
        self.index.candidate_scores = scores;
        Some(if top == 2 { NodeChoice::Idle(n) } else { NodeChoice::Future(n) })
    }

    /// Whether the index gives the same answer as a scan for this task: every plugin that
    /// filters or scores nodes is shape-local (asked once per task and session), batch
    /// scores are uniform for the task's shape (asked once per shape), and at most one
    /// plugin has domain rules for it.
    fn index_usable(&mut self, t: TaskId) -> bool {
        // Shapes come from `Snapshot::build`; without them, every task is scanned.
        if !self.index_enabled || self.snap.shape_count() == 0 {
            return false;
        }
        if self.index.usable.len() < self.snap.tasks.len() {
            self.index.usable.resize(self.snap.tasks.len(), 0);
            self.index.keys.resize(self.snap.tasks.len(), 0);
        }
        match self.index.usable[t.idx()] {
            UNIFORM | SPARSE | PARTITIONED => true,
            SCAN => false,
            _ => {
                let usable = self.node_plugins().all(|p| p.shape_local(&self.snap, t));
                if usable {
                    // Combined so that different keys of different plugins stay apart.
                    let key = self.node_plugins().fold(0u64, |acc, p| {
                        let k = p.shape_key(&self.snap, t);
                        if k == 0 {
                            acc
                        } else {
                            (acc ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) | 1
                        }
                    });
                    // A task whose inter-pod rules no plugin reads per node belongs to the
                    // class of its base shape too.
                    let key = if key == 0 && crate::snapshot::build::has_pod_rules(self.snap.task(t)) {
                        NO_RULES_READ
                    } else {
                        key
                    };
                    self.index.keys[t.idx()] = key;
                }
                let mode =
                    if usable && self.node_plugins().filter(|p| p.domain_rules(&self.snap, t).is_some()).count() <= 1 {
                        self.batch_mode(t)
                    } else {
                        SCAN
                    };
                self.index.usable[t.idx()] = mode;
                mode != SCAN
            }
        }
    }

    /// Whether the batch scores of a shape-local task are uniform ([`UNIFORM`]), sparse
    /// ([`SPARSE`]), uniform per domain of one partition outside a few nodes
    /// ([`PARTITIONED`]) or none of these ([`SCAN`]).
    fn batch_mode(&self, t: TaskId) -> u8 {
        let mut mode = UNIFORM;
        let mut partition: Option<Arc<NodeDomains>> = None;
        for p in self.batch_plugins() {
            if p.batch_uniform(&self.snap, t) {
                continue;
            }
            if p.batch_sparse(&self.snap, t) {
                mode = mode.max(SPARSE);
                continue;
            }
            match (p.batch_partition(&self.snap, t), &partition) {
                (Some(d), None) => partition = Some(d),
                // Two plugins partition alike.
                (Some(d), Some(e)) if Arc::ptr_eq(&d, e) || d == *e => {}
                _ => return SCAN,
            }
            mode = PARTITIONED;
        }
        mode
    }

    /// Whether the task fits some node now or once releasing pods are gone (its request
    /// fits the node's future idle resources and every predicate passes there): through
    /// the node index when it serves the task, by a scan otherwise.
    pub fn fits_some_node(&mut self, t: TaskId) -> bool {
        if self.index_usable(t) {
            return self.find_node(t).is_ok();
        }
        let req = &self.snap.task(t).resreq;
        (0..self.snap.nodes.len() as u32)
            .map(NodeId)
            .any(|n| Session::fits_future(req, self.snap.node(n)) && self.predicate(t, n).is_ok())
    }

    /// The nodes of `among` (in node order) where the eviction predicates pass for the
    /// task ([`Session::predicate_for_eviction`]), with their scores
    /// ([`Session::node_scores`] over them), for a task whose batch scores are uniform
    /// ([`Session::batch_scores_uniform`]). The predicates' answers and each node's own
    /// score are kept per class of the node index until the node changes, as the class's
    /// answers are (so not the predicates' answers of a class with domain rules, which
    /// change with the nodes of a domain: those are asked each time).
    pub fn eviction_candidates(&mut self, t: TaskId, among: &[NodeId]) -> (Vec<NodeId>, Vec<f64>) {
        debug_assert!(self.batch_scores_uniform(t));
        let c = self.class_of(t);
        if self.index.evictions.len() <= c {
            self.index.evictions.resize_with(c + 1, || None);
        }
        let mut cache = self.index.evictions[c].take().unwrap_or_else(|| EvictionAnswers {
            cursor: self.index.log.len(),
            answers: vec![None; self.snap.nodes.len()],
        });
        for &e in &self.index.log[cache.cursor..] {
            cache.answers[(e >> 1) as usize] = None;
        }
        cache.cursor = self.index.log.len();
        let keep_predicates = !self.index.classes[c].domain_rules;
        let (mut nodes, mut scores) = (Vec::new(), Vec::new());
        for &n in among {
            let (passes, score) = match cache.answers[n.idx()] {
                Some((passes, score)) if keep_predicates => (passes, score),
                Some((_, score)) => (self.predicate_for_eviction(t, n).is_ok(), score),
                None => {
                    let answer = (self.predicate_for_eviction(t, n).is_ok(), self.node_order_sum(t, n));
                    cache.answers[n.idx()] = Some(answer);
                    answer
                }
            };
            if passes {
                nodes.push(n);
                scores.push(score);
            }
        }
        self.index.evictions[c] = Some(cache);
        for p in self.batch_plugins() {
            p.batch_node_order(&self.snap, t, &nodes, &mut scores);
        }
        (nodes, scores)
    }

    /// Whether the task's batch scores are the same on every node (every plugin with batch
    /// scores finds them [`crate::Plugin::batch_uniform`] for it), so that scoring a subset
    /// of the nodes gives each node the score a batch over all of them would, and with the
    /// node index on. `preempt` then scores only the nodes where it may find victims.
    pub fn batch_scores_uniform(&mut self, t: TaskId) -> bool {
        self.index_usable(t) && self.index.usable[t.idx()] == UNIFORM
    }

    /// The same answer as [`Session::find_node`], by checking and scoring every node.
    pub fn find_node_by_scan(&self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        let task = self.snap.task(t);
        let (feasible, errors) = self.predicate_nodes(t, |node| Session::fits_future_idle(task, node));
        if feasible.is_empty() {
            return Err(errors);
        }
        let idle: Vec<NodeId> =
            feasible.iter().copied().filter(|n| Session::fits_idle(&task.resreq, self.snap.node(*n))).collect();
        if idle.is_empty() {
            Ok(NodeChoice::Future(self.best_node(t, &feasible).expect("not empty")))
        } else {
            Ok(NodeChoice::Idle(self.best_node(t, &idle).expect("not empty")))
        }
    }
}

impl Class {
    /// A class without answers yet (no tree, no view).
    fn new(
        representative: TaskId,
        split: Option<Split>,
        domain_rules: bool,
        cursor: usize,
        fixed: Option<Arc<FixedFailures>>,
        request: u32,
    ) -> Class {
        Class {
            representative,
            split,
            domain_rules,
            cursor,
            no_reasons: Vec::new(),
            slot_counts: Vec::new(),
            tree: BestTree::new(&[], None),
            reasons: ReasonTable::default(),
            reason_counts: Vec::new(),
            stale: Vec::new(),
            stale_marks: Vec::new(),
            fixed_ids: vec![u32::MAX; fixed.as_ref().map_or(0, |f| f.reasons.len())],
            fixed,
            request,
            view: None,
        }
    }

    /// Appends the answer of the next node (by index) while the class is built: its
    /// reason, counted. The tree is built from the answers after.
    fn push_answer(&mut self, fit: Fit) {
        self.no_reasons.push(match fit {
            Fit::No(r) => {
                self.reason_counts[r as usize] += 1;
                r
            }
            _ => FITS,
        });
    }

    /// Adds a node to `stale`, once.
    fn mark_stale(&mut self, n: NodeId) {
        push_once(&mut self.stale, &mut self.stale_marks, self.no_reasons.len(), n);
    }

    /// A node's answer.
    fn fit(&self, n: NodeId) -> Fit {
        key_fit(self.tree.key_at(self.leaf(n)), self.no_reasons[n.idx()])
    }

    /// Every node's answer, by node index.
    fn fits(&self) -> Vec<Fit> {
        (0..self.no_reasons.len()).map(|i| self.fit(NodeId(i as u32))).collect()
    }

    /// Whether a node does not fit (without reading the tree).
    fn fails(&self, n: NodeId) -> bool {
        self.no_reasons[n.idx()] != FITS
    }

    /// Sets a node's answer.
    fn set_fit(&mut self, n: NodeId, fit: Fit) {
        self.no_reasons[n.idx()] = match fit {
            Fit::No(r) => r,
            _ => FITS,
        };
        let leaf = self.leaf(n);
        self.tree.set(leaf, n.0, fit);
    }

    /// The leaf of a node in the class's tree.
    fn leaf(&self, n: NodeId) -> usize {
        match &self.split {
            Some(split) => split.layout.leaf[n.idx()] as usize,
            None => n.idx(),
        }
    }

    fn intern(&mut self, reason: String) -> u32 {
        let id = self.reasons.intern(reason);
        self.count_reasons();
        id
    }

    /// Makes room in `reason_counts` for every reason.
    fn count_reasons(&mut self) {
        if self.reason_counts.len() < self.reasons.reasons.len() {
            self.reason_counts.resize(self.reasons.reasons.len(), 0);
        }
    }

    fn fit_of(&mut self, task: &TaskInfo, r: Evaluation) -> Fit {
        let fit = self.reasons.fit_of(task, r);
        self.count_reasons();
        fit
    }

    /// The answer on a node of `fixed`, from its resource check: the check's failure, which
    /// comes first, else the reason of `fixed`, the first predicate's failure there. `None`
    /// for a node outside `fixed`, or when the check cannot say which dimensions fail.
    fn fixed_fit(
        &mut self,
        task: &TaskInfo,
        n: NodeId,
        check: impl FnOnce() -> Result<bool, Option<u64>>,
    ) -> Option<Fit> {
        let r = self.fixed.as_ref()?.of_node[n.idx()];
        if r == 0 {
            return None;
        }
        match check() {
            Err(None) => None,
            Err(Some(mask)) => Some(self.fit_of(task, Err(Reason::Insufficient(mask)))),
            Ok(_) => {
                let r = r as usize - 1;
                if self.fixed_ids[r] == u32::MAX {
                    let reason = self.fixed.as_ref().expect("checked above").reasons[r].clone();
                    self.fixed_ids[r] = self.intern(reason);
                }
                Some(Fit::No(self.fixed_ids[r]))
            }
        }
    }

    /// Sets a node's answer, with the counts of reasons and ranks.
    fn set_answer(&mut self, n: NodeId, fit: Fit) {
        let old = self.fit(n);
        if old == fit {
            return;
        }
        if let Fit::No(r) = old {
            self.reason_counts[r as usize] -= 1;
        }
        if let Fit::No(r) = fit {
            self.reason_counts[r as usize] += 1;
        }
        if rank(old) != rank(fit) {
            let slot = self.split.as_ref().map_or(0, |s| s.slot(n));
            if rank(old) > 0 {
                self.slot_counts[slot][rank(old) as usize - 1] -= 1;
            }
            if rank(fit) > 0 {
                self.slot_counts[slot][rank(fit) as usize - 1] += 1;
            }
        }
        self.set_fit(n, fit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_keys_order_like_a_scan() {
        // Fits now before fits later before no fit; then higher score; then lower index.
        let order = [
            tree_key(3, Fit::Idle(10.0)),
            tree_key(1, Fit::Idle(2.5)),
            tree_key(2, Fit::Idle(2.5)),
            tree_key(0, Fit::Idle(0.0)),
            tree_key(4, Fit::Idle(-1.0)),
            tree_key(0, Fit::Future(99.0)),
            tree_key(0, Fit::No(0)),
        ];
        assert!(order.windows(2).all(|w| w[0] > w[1]), "{order:?}");
        let scores = [-f64::INFINITY, -3.5, -0.0, 0.0, 1e-300, 7.25, f64::MAX];
        let keys: Vec<u128> = scores.iter().map(|s| tree_key(0, Fit::Idle(*s))).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(key_node(tree_key(42, Fit::Future(1.0))), NodeId(42));
        assert_eq!(key_rank(tree_key(42, Fit::Future(1.0))), 1);
        // A key gives its fit back, bit for bit (the reason of a node that does not fit is
        // kept beside the tree).
        for s in scores.iter().chain(&[f64::MIN_POSITIVE, -1e300, 123.456]) {
            for fit in [Fit::Idle(*s), Fit::Future(*s)] {
                match (key_fit(tree_key(7, fit), 0), fit) {
                    (Fit::Idle(a), Fit::Idle(b)) | (Fit::Future(a), Fit::Future(b)) => {
                        assert_eq!(a.to_bits(), b.to_bits())
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(key_fit(tree_key(7, Fit::No(3)), 9), Fit::No(9));
    }

    #[test]
    fn distinct_changes_keep_any_change_over_took_a_task() {
        let mut marks = DistinctChanges::default();
        let mut out = Vec::new();
        // Node 3 took a task, then changed otherwise; node 1 only took tasks; node 2
        // changed, then took a task.
        marks.distinct(&[7, 3, 6, 3, 4, 5], 4, &mut out);
        assert_eq!(out, vec![6, 3, 4]);
        // A new stretch starts afresh.
        marks.distinct(&[3, 7], 4, &mut out);
        assert_eq!(out, vec![3, 7]);
        marks.distinct(&[], 4, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn best_tree_follows_updates() {
        let mut fits = vec![Fit::No(0); 5];
        fits[3] = Fit::Future(1.0);
        let mut tree = BestTree::new(&fits, None);
        assert_eq!((key_rank(tree.best()), key_node(tree.best())), (1, NodeId(3)));
        tree.set(1, 1, Fit::Idle(5.0));
        tree.set(4, 4, Fit::Idle(5.0));
        assert_eq!((key_rank(tree.best()), key_node(tree.best())), (2, NodeId(1)));
        tree.set(1, 1, Fit::No(0));
        assert_eq!(key_node(tree.best()), NodeId(4));
        tree.set(4, 4, Fit::No(0));
        tree.set(3, 3, Fit::No(0));
        assert_eq!(key_rank(tree.best()), 0);
        assert_eq!(key_rank(BestTree::new(&[], None).best()), 0);
    }

    #[test]
    fn best_tree_batch_of_updates_ends_as_single_updates() {
        // 37 leaves: batches of every size, each compared with a tree updated one leaf at a
        // time and with a fresh tree of the same fits.
        let fit = |i: usize, round: usize| match (i * 7 + round * 3) % 5 {
            0 => Fit::No(0),
            1 => Fit::Future(((i + round) % 4) as f64),
            _ => Fit::Idle(((i * round) % 6) as f64),
        };
        let mut fits: Vec<Fit> = (0..37).map(|i| fit(i, 0)).collect();
        let mut batched = BestTree::new(&fits, None);
        let mut single = BestTree::new(&fits, None);
        for round in 1..30 {
            let updates: Vec<usize> = (0..37).filter(|i| (i * 11 + round) % 37 < round).collect();
            batched.begin_batch(updates.len());
            for &i in &updates {
                fits[i] = fit(i, round);
                batched.set(i, i as u32, fits[i]);
                single.set(i, i as u32, fits[i]);
            }
            batched.end_batch();
            assert_eq!(batched.keys, single.keys, "round {round}, {} updates", updates.len());
            assert_eq!(batched.keys, BestTree::new(&fits, None).keys, "round {round}");
        }
    }

    #[test]
    fn best_tree_of_any_size_answers_as_a_scan() {
        // Every size from 1 to 40 leaves (powers of two and not), fits from a fixed
        // pseudo-random sequence, a run of updates: the root and every range query give the
        // best key of a scan.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let fit = |r: u64, score: u64| match r {
            0 => Fit::No(0),
            1 => Fit::Future(score as f64),
            _ => Fit::Idle(score as f64),
        };
        for n in 1..=40usize {
            let mut fits: Vec<Fit> = (0..n).map(|_| fit(next(3), next(4))).collect();
            let mut tree = BestTree::new(&fits, None);
            for _ in 0..3 * n {
                let i = next(n as u64) as usize;
                fits[i] = fit(next(3), next(4));
                tree.set(i, i as u32, fits[i]);
                let key = |i: usize| tree_key(i as u32, fits[i]);
                assert_eq!(tree.best(), (0..n).map(key).max().unwrap(), "size {n}");
                let (a, b) = (next(n as u64 + 1) as usize, next(n as u64 + 1) as usize);
                let (start, end) = (a.min(b), a.max(b));
                assert_eq!(tree.best_in(start, end), (start..end).map(key).max().unwrap_or(0), "size {n}");
            }
        }
    }

    #[test]
    fn layout_ranges_hold_each_domain() {
        // Nodes 0..6 in domains 1, NONE, 0, 1, 0, 1 (2 domains).
        let none = NodeDomains::NONE;
        let domains = NodeDomains { of_node: vec![1, none, 0, 1, 0, 1], count: 2 };
        let layout = Layout::new(&domains);
        assert_eq!(layout.ranges, vec![(0, 2), (2, 5), (5, 6)]);
        assert_eq!(layout.leaf, vec![2, 5, 0, 3, 1, 4]);
        let mut fits = vec![Fit::No(0); 6];
        fits[0] = Fit::Idle(1.0);
        fits[4] = Fit::Idle(3.0);
        fits[1] = Fit::Idle(9.0);
        let mut tree = BestTree::new(&fits, Some(&layout));
        let best_of = |tree: &BestTree, d: usize| {
            let (start, end) = layout.ranges[d];
            tree.best_in(start as usize, end as usize)
        };
        assert_eq!(key_node(best_of(&tree, 0)), NodeId(4));
        assert_eq!(key_node(best_of(&tree, 1)), NodeId(0));
        assert_eq!(key_node(best_of(&tree, 2)), NodeId(1));
        assert_eq!(key_node(tree.best()), NodeId(1));
        tree.set(layout.leaf[4] as usize, 4, Fit::No(0));
        assert_eq!(key_rank(best_of(&tree, 0)), 0);
        tree.set(layout.leaf[3] as usize, 3, Fit::Idle(2.0));
        assert_eq!(key_node(best_of(&tree, 1)), NodeId(3));
        assert_eq!(tree.best_in(0, 0), 0);
    }
}
