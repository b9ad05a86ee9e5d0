//! The node index: per equivalence class of tasks, every node's fit and score, updated
//! only for the nodes that changed since the last query (incremental node selection).
//!
//! Two tasks are equivalent when they have the same shape ([`crate::TaskInfo::shape`]): the
//! same requests (the snapshot's parsed request and non-zero cpu and memory) and the same
//! scheduling constraints (node selector, affinity, tolerations, topology spread
//! constraints, namespace, host ports and the containers' restart policies, container
//! images, and the volumes scheduling reads: PersistentVolumeClaim claims, inline CSI
//! sources and generic ephemeral volumes). For plugins
//! that declare their predicates and scores *shape-local* ([`crate::Incremental::shape_local`]),
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
//! ([`crate::Incremental::fixed_failures`]), and a class never evaluates them: on such a node
//! the answer is "does not fit", with the resource check's failure when it fails (it comes
//! first) and the listed reason otherwise, found from the resource check alone and only
//! before the reasons are read. The resource check itself is kept once per distinct
//! request and brought up to date from the change log, shared by the classes of that
//! request. The evaluations of the other nodes are shared as well, by the classes of an
//! evaluation group: tasks with the same request whose plugins give equal
//! [`crate::Incremental::evaluation_key`]s get equal predicates and scores wherever the first
//! predicate plugin does not fail them for good, so the group keeps one tree, laid out by
//! the cells of nodes its classes do not tell apart, and each of its classes is a view of
//! it, answering from the best nodes of the cells it may use ([`view`]). A refresh that
//! re-evaluates many nodes sets the tree's leaves and then its inner nodes in one pass.
//!
//! Inter-pod rules need more. Their answers depend on the pod's labels (through the
//! selectors of the pods around it), so a task with a non-zero key (the plugins'
//! [`crate::Incremental::shape_key`]s combined, 0 for most tasks) belongs to the class of its
//! (base shape, key): the base shape leaves the inter-pod rules out, and the key stands for
//! the rules as the class keeps their answers, so the pods of many jobs share a class when
//! their rules read the same counters per node. Placing a pod changes their answers on
//! other nodes than its own (every node of its hostname's or rack's domain), so the plugins
//! report those nodes ([`crate::Incremental::drain_touched`]) after each event, and they join the
//! change log like the node whose accounting changed. Rules that depend on a node only
//! through its domain of a key with few values (zone spread, zone anti-affinity:
//! [`crate::Incremental::domain_rules`]) are left out of a class's answers instead and applied
//! per domain at each query, from the querying task's own verdicts
//! ([`crate::Incremental::domain_verdicts`]): the class's tree keeps each domain's nodes on
//! consecutive leaves, so the best node of the allowed domains is the best of a few
//! ranges, and a placement that closes a zone costs nothing per node of the zone. A new
//! class whose shape differs from a recent class's only in inter-pod rules copies that
//! class's answers and re-evaluates the nodes where either task's rules may fail
//! ([`crate::Incremental::rule_exceptions`]); batch scores uniform outside a few nodes
//! ([`crate::Incremental::batch_sparse`]) are computed on those nodes and the best other node
//! only, and batch scores uniform per domain outside a few nodes (the system-default
//! spread constraints, per zone: [`crate::Incremental::batch_partition`]) on those nodes and
//! the best other node of each domain, over a tree laid out by the partition; each other
//! node stands for the nodes of the best rank it was chosen from
//! ([`crate::Incremental::batch_node_order_counted`]), whose number scores may read. When no node fits a task with domain rules, each node gets the reason a scan
//! would give: its own failure, its domain's, or (when both fail) the full predicate's.
//!
//! The interface: a session owns one [`NodeIndex`], tells it which nodes changed
//! ([`NodeIndex::touch`], [`NodeIndex::touch_used`], [`NodeIndex::touched_buffer`] and
//! [`NodeIndex::touch_drained`] for the nodes plugins report), and asks it through a
//! [`Query`]: the best node for a task ([`Query::find_node`], whose error is the fit errors
//! of every node), whether any node fits ([`Query::fits_some_node`]), and the eviction
//! candidates of a task ([`Query::eviction_candidates`]). The index reads the plugins only
//! through [`Evaluate`], the session's evaluation interface, and their
//! [`crate::Incremental`] promises; a task some plugin makes no promise for is answered by a
//! full scan ([`Evaluate::find_node_by_scan`]).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use crate::model::{NodeId, NodeInfo, TaskId, TaskInfo};
use crate::plugin::{FixedFailures, NodeDomains, Plugin};
use crate::resource::DimensionDefault;
use crate::status::{FitErrors, Status};

mod query;
mod tree;

use query::view::{SharedEvaluations, View};
use tree::*;

/// What the index asks of the session: the plugins of each extension point and the
/// combined answers of Volcano's tier rules. Implemented by the session.
pub(crate) trait Evaluate: Sync {
    /// The plugins with an active predicate, in tier order.
    fn predicate_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_;
    /// The plugins with an active predicate or node score.
    fn evaluating_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_;
    /// The plugins with an active predicate, node score or batch score.
    fn node_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_;
    /// The plugins with an active batch score.
    fn batch_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_;
    /// Every predicate, in order, until one fails.
    fn predicate(&self, t: TaskId, n: NodeId) -> Result<(), Status>;
    /// [`Evaluate::predicate`] with the task's domain rules taken as passing.
    fn predicate_without_domain_rules(&self, t: TaskId, n: NodeId) -> Result<(), Status>;
    /// The predicates as preempt and reclaim use them.
    fn predicate_for_eviction(&self, t: TaskId, n: NodeId) -> Result<(), Status>;
    /// Σ of the per-node scores.
    fn node_order_sum(&self, t: TaskId, n: NodeId) -> f64;
    /// Whether work over `n` nodes runs on all cores.
    fn parallel(&self, n: usize) -> bool;
    /// The answer of [`Query::find_node`] by checking and scoring every node.
    fn find_node_by_scan(&self, t: TaskId) -> Result<NodeChoice, FitErrors>;
}

/// A question to the index on behalf of a session: the index, the snapshot it indexes, and
/// the session's evaluations.
pub(crate) struct Query<'a, E: Evaluate> {
    pub(crate) index: &'a mut NodeIndex,
    pub(crate) snap: &'a crate::snapshot::Snapshot,
    pub(crate) ev: &'a E,
}

struct Class {
    representative: TaskId,
    /// The partition the tree is laid out by: the task's domain rules, when a plugin has
    /// some, else the batch partition of a task that has one
    /// ([`crate::Incremental::batch_partition`]).
    split: Option<Split>,
    /// The answers are without the domain rules of `split`
    /// ([`crate::Incremental::predicate_without_domain_rules`]).
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
    /// session does, and why ([`crate::Incremental::fixed_failures`]): never evaluated, their
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
                // The message of `NodeInfo::fits_future_idle`.
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
/// ([`crate::Incremental::batch_sparse`]).
const SPARSE: u8 = 2;
/// [`NodeIndex::usable`]: the task is scanned.
const SCAN: u8 = 3;
/// [`NodeIndex::usable`]: the index answers, and the batch scores are uniform per domain
/// outside a few nodes ([`crate::Incremental::batch_partition`]).
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
    /// Whether the index answers at all (off: every task is scanned).
    enabled: bool,
    /// The nodes changed, in order: `2 × node + 1` when the node only took a task (see
    /// [`NodeIndex::touch_used`]), `2 × node` for any other change.
    log: Vec<u32>,
    classes: Vec<Class>,
    /// Class of each task shape with key 0 ([`crate::Incremental::shape_key`]), `u32::MAX` when
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
    /// Per task: its plugins' combined [`crate::Incremental::shape_key`], or [`NO_RULES_READ`]
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
    /// Reused buffer of the slots a query is restricted to.
    within: Vec<usize>,
    /// Whether some reader outside the index follows the change log.
    watched: bool,
    /// Reused buffer of rule exceptions.
    exceptions: Vec<NodeId>,
    /// Reused buffer of changed nodes (log entries).
    changed: Vec<u32>,
    /// Marks for finding the distinct nodes of a stretch of the log.
    changes: DistinctChanges,
    /// The leaf orders of the node partitions met so far (of domain rules and batch
    /// partitions; equal partitions of different plugins share one).
    layouts: Vec<(Arc<NodeDomains>, Arc<Layout>)>,
    /// The domain verdicts of the current query ([`crate::Incremental::domain_verdicts`]).
    verdicts: Vec<Option<Cow<'static, str>>>,
    /// Nodes the plugins reported through [`crate::Incremental::drain_touched`].
    touched: Vec<NodeId>,
    /// Per class (by index, grown on demand): the eviction checks and node scores asked
    /// for by [`Query::eviction_candidates`].
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
    /// An empty index; `enabled: false` makes every question a scan.
    pub(crate) fn new(enabled: bool) -> NodeIndex {
        NodeIndex { enabled, ..NodeIndex::default() }
    }

    /// Whether the index answers (the session's `node_index` option).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Where plugins report the nodes an event touched
    /// ([`crate::Incremental::drain_touched`]); [`NodeIndex::touch_drained`] logs them.
    pub(crate) fn touched_buffer(&mut self) -> &mut Vec<NodeId> {
        &mut self.touched
    }

    /// Whether changes are logged: once something reads the log (a class or the checks of
    /// a request).
    fn logging(&self) -> bool {
        self.watched || !self.classes.is_empty() || !self.requests.is_empty()
    }

    /// The position after the last change logged, with logging on from now (see
    /// [`crate::Session::node_change_cursor`]).
    pub(crate) fn cursor(&mut self) -> usize {
        self.watched = true;
        self.log.len()
    }

    /// The nodes changed since `cursor` (repeats possible), and the new cursor.
    pub(crate) fn changed_since(&self, cursor: usize, out: &mut Vec<NodeId>) -> usize {
        debug_assert!(self.watched, "a cursor was taken");
        out.extend(self.log[cursor.min(self.log.len())..].iter().map(|e| NodeId(e >> 1)));
        self.log.len()
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
    /// can, report the nodes they change through [`crate::Incremental::drain_touched`], logged
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

/// The allocate action's resource check (see [`NodeInfo::fits_future_idle`]) without a
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
        Ok(node.fits_idle(req))
    } else {
        Err(req.insufficient_mask(&future))
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
