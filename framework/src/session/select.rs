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
//! Inter-pod rules need two more things. Their answers depend on the pod's labels (through
//! the selectors of the pods around it), so a class is the pair (shape, key), where the key
//! combines the plugins' [`crate::Plugin::shape_key`]s (0 for most tasks). And placing a pod
//! changes their answers on other nodes than its own (every node of its zone, say), so the
//! plugins report those nodes ([`crate::Plugin::drain_touched`]) after each event, and they
//! join the change log like the node whose accounting changed. A new class whose shape
//! differs from a recent class's only in inter-pod rules copies that class's answers and
//! re-evaluates the nodes where either task's rules may fail ([`crate::Plugin::rule_exceptions`]);
//! batch scores uniform outside a few nodes ([`crate::Plugin::batch_sparse`]) are computed
//! on those nodes and the best other node only.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::model::{NodeId, NodeInfo, TaskId, TaskInfo};
use crate::resource::DimensionDefault;
use crate::session::Session;
use crate::status::FitErrors;

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

/// The node of a [`tree_key`].
fn key_node(key: u128) -> NodeId {
    NodeId(u32::MAX - key as u32)
}

/// The fit rank of a [`tree_key`].
fn key_rank(key: u128) -> u32 {
    (key >> 96) as u32
}

/// A max-tree over the nodes' [`tree_key`]s (a complete binary tree in an array, leaves at
/// the bottom): the root is the best node; an update walks up until nothing changes.
struct BestTree {
    leaves: usize,
    keys: Vec<u128>,
}

impl BestTree {
    fn new(fits: &[Fit]) -> BestTree {
        let leaves = fits.len().next_power_of_two().max(1);
        let mut keys = vec![0u128; 2 * leaves];
        for (i, fit) in fits.iter().enumerate() {
            keys[leaves + i] = tree_key(i as u32, *fit);
        }
        for i in (1..leaves).rev() {
            keys[i] = keys[2 * i].max(keys[2 * i + 1]);
        }
        BestTree { leaves, keys }
    }

    fn set(&mut self, node: u32, fit: Fit) {
        let mut i = self.leaves + node as usize;
        self.keys[i] = tree_key(node, fit);
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
}

struct Class {
    representative: TaskId,
    /// The batch scores are sparse ([`crate::Plugin::batch_sparse`]), not uniform.
    sparse: bool,
    cursor: usize,
    fits: Vec<Fit>,
    tree: BestTree,
    reasons: Vec<String>,
    reason_ids: HashMap<String, u32>,
    /// Reasons of failed resource checks, by the mask of insufficient dimensions.
    insufficient_ids: Vec<(u64, u32)>,
    reason_counts: Vec<u32>,
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

/// The per-session node index (see the module docs).
#[derive(Default)]
pub(crate) struct NodeIndex {
    log: Vec<NodeId>,
    classes: Vec<Class>,
    /// Class of each task shape with key 0 ([`crate::Plugin::shape_key`]), `u32::MAX` when
    /// not built yet.
    class_of_shape: Vec<u32>,
    /// Class of each (shape, key) with a non-zero key.
    class_of_keyed: HashMap<(u32, u64), u32>,
    /// Per task: 0 when not asked yet, 1 when the index may answer for it, 2 when not.
    usable: Vec<u8>,
    /// Per task: its plugins' combined [`crate::Plugin::shape_key`] (valid once `usable`
    /// is 1).
    keys: Vec<u64>,
    /// Per (shape, key): 1 when the batch scores are uniform, 2 when sparse
    /// ([`crate::Plugin::batch_sparse`]), 3 when neither.
    batch_modes: HashMap<(u32, u64), u8>,
    /// Reused buffer of special nodes.
    special: Vec<NodeId>,
    /// Reused buffer of rule exceptions.
    exceptions: Vec<NodeId>,
    /// Reused buffer of changed nodes.
    changed: Vec<NodeId>,
    /// Nodes the plugins reported through [`crate::Plugin::drain_touched`].
    pub(crate) touched: Vec<NodeId>,
}

impl NodeIndex {
    /// Records that a node's accounting changed.
    pub(crate) fn touch(&mut self, n: NodeId) {
        if !self.classes.is_empty() {
            self.log.push(n);
        }
    }

    /// Records the nodes the plugins reported.
    pub(crate) fn touch_drained(&mut self) {
        if !self.classes.is_empty() {
            self.log.append(&mut self.touched);
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
    fn evaluate(&self, t: TaskId, n: NodeId) -> Evaluation {
        let task = self.snap.task(t);
        let node = self.snap.node(n);
        let idle = match fit_check(task, node) {
            Ok(idle) => idle,
            Err(Some(mask)) => return Err(Reason::Insufficient(mask)),
            Err(None) => {
                return Err(Reason::Predicate(Session::fits_future_idle(task, node).expect_err("does not fit").reason))
            }
        };
        self.predicate(t, n).map_err(|s| Reason::Predicate(s.reason))?;
        let score: f64 = self.node_order_sum(t, n);
        let score = if score == 0.0 { 0.0 } else { score };
        Ok((idle, score))
    }

    fn class_of(&mut self, t: TaskId) -> usize {
        let key = self.index.keys[t.idx()];
        if key != 0 {
            let shape = self.snap.task(t).shape;
            if let Some(&c) = self.index.class_of_keyed.get(&(shape, key)) {
                return c as usize;
            }
            let c = self.build_class(t);
            self.index.class_of_keyed.insert((shape, key), c as u32);
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

    /// Re-evaluates the nodes that changed since the class last looked.
    fn refresh(&mut self, c: usize) {
        let start = self.index.classes[c].cursor;
        let end = self.index.log.len();
        if start < end {
            let mut changed = std::mem::take(&mut self.index.changed);
            changed.clear();
            changed.extend_from_slice(&self.index.log[start..end]);
            changed.sort_unstable();
            changed.dedup();
            self.reevaluate(c, &changed);
            self.index.changed = changed;
            self.index.classes[c].cursor = end;
        }
    }

    /// Re-evaluates these nodes (sorted, distinct) for a class.
    fn reevaluate(&mut self, c: usize, nodes: &[NodeId]) {
        let rep = self.index.classes[c].representative;
        for &n in nodes {
            let r = self.evaluate(rep, n);
            let class = &mut self.index.classes[c];
            let fit = class.fit_of(self.snap.task(rep), r);
            let old = class.fits[n.idx()];
            if old != fit {
                if let Fit::No(r) = old {
                    class.reason_counts[r as usize] -= 1;
                }
                if let Fit::No(r) = fit {
                    class.reason_counts[r as usize] += 1;
                }
                class.fits[n.idx()] = fit;
                class.tree.set(n.0, fit);
            }
        }
    }

    /// A class built from a recent class whose shape differs only in inter-pod rules: its
    /// answers, with the nodes where either task's rules may fail now re-evaluated (see
    /// [`crate::Plugin::rule_exceptions`]). `None` when there is no such class, or the nodes
    /// cannot be listed, or they are most of the cluster.
    fn derive_class(&mut self, t: TaskId) -> Option<usize> {
        const RECENT: usize = 16;
        let first = self.index.classes.len().saturating_sub(RECENT);
        let donor = (first..self.index.classes.len()).rev().find(|&d| {
            let rep = self.snap.task(self.index.classes[d].representative);
            crate::snapshot::build::same_base_shape(rep, self.snap.task(t))
        })?;
        self.refresh(donor);
        let rep = self.index.classes[donor].representative;
        let mut nodes = std::mem::take(&mut self.index.exceptions);
        nodes.clear();
        let listed = self
            .node_plugins()
            .all(|p| p.rule_exceptions(&self.snap, t, &mut nodes) && p.rule_exceptions(&self.snap, rep, &mut nodes));
        if !listed || nodes.len() > self.snap.nodes.len() / 2 {
            self.index.exceptions = nodes;
            return None;
        }
        nodes.sort_unstable();
        nodes.dedup();
        let d = &self.index.classes[donor];
        let class = Class {
            representative: t,
            sparse: self.index.batch_modes.get(&(self.snap.task(t).shape, self.index.keys[t.idx()])) == Some(&2),
            cursor: d.cursor,
            fits: d.fits.clone(),
            tree: BestTree { leaves: d.tree.leaves, keys: d.tree.keys.clone() },
            reasons: d.reasons.clone(),
            reason_ids: d.reason_ids.clone(),
            insufficient_ids: d.insufficient_ids.clone(),
            reason_counts: d.reason_counts.clone(),
        };
        self.index.classes.push(class);
        let c = self.index.classes.len() - 1;
        self.reevaluate(c, &nodes);
        self.index.exceptions = nodes;
        Some(c)
    }

    fn build_class(&mut self, t: TaskId) -> usize {
        if let Some(c) = self.derive_class(t) {
            return c;
        }
        let nodes = self.snap.nodes.len();
        let results: Vec<Evaluation> = if self.parallel(nodes) {
            (0..nodes).into_par_iter().map(|i| self.evaluate(t, NodeId(i as u32))).collect()
        } else {
            (0..nodes).map(|i| self.evaluate(t, NodeId(i as u32))).collect()
        };
        let sparse = self.index.batch_modes.get(&(self.snap.task(t).shape, self.index.keys[t.idx()])) == Some(&2);
        let mut class = Class {
            representative: t,
            sparse,
            cursor: self.index.log.len(),
            fits: Vec::with_capacity(nodes),
            tree: BestTree::new(&[]),
            reasons: Vec::new(),
            reason_ids: HashMap::new(),
            insufficient_ids: Vec::new(),
            reason_counts: Vec::new(),
        };
        let task = self.snap.task(t);
        for r in results {
            let fit = class.fit_of(task, r);
            if let Fit::No(r) = fit {
                class.reason_counts[r as usize] += 1;
            }
            class.fits.push(fit);
        }
        class.tree = BestTree::new(&class.fits);
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
        self.refresh(c);
        if self.index.classes[c].sparse {
            if let Some(choice) = self.sparse_choice(c, t) {
                return Ok(choice);
            }
        }
        let class = &self.index.classes[c];
        let best = class.tree.best();
        match key_rank(best) {
            2 => return Ok(NodeChoice::Idle(key_node(best))),
            1 => return Ok(NodeChoice::Future(key_node(best))),
            _ => {}
        }
        let mut errors = FitErrors { nodes: self.snap.nodes.len(), ..Default::default() };
        for (i, n) in class.reason_counts.iter().enumerate() {
            if *n > 0 {
                errors.reasons.insert(class.reasons[i].clone(), *n);
            }
        }
        Err(errors)
    }
}

impl Session {
    /// The choice of a class whose batch scores are uniform outside a few special nodes:
    /// the best of the special nodes and of the best other node (by the node-local scores),
    /// among those of the best fit rank, by their node-local and batch scores; ties to the
    /// first node, as a scan. `None` when no node fits.
    fn sparse_choice(&mut self, c: usize, t: TaskId) -> Option<NodeChoice> {
        let mut special = std::mem::take(&mut self.index.special);
        special.clear();
        for p in self.batch_plugins() {
            p.batch_special_nodes(&self.snap, t, &mut special);
        }
        special.sort_unstable();
        special.dedup();
        let class = &mut self.index.classes[c];
        // The best other node: the special ones masked for one query.
        for &n in &special {
            class.tree.set(n.0, Fit::No(0));
        }
        let other = class.tree.best();
        for &n in &special {
            class.tree.set(n.0, class.fits[n.idx()]);
        }
        let rank = |f: Fit| match f {
            Fit::Idle(_) => 2,
            Fit::Future(_) => 1,
            Fit::No(_) => 0,
        };
        let top = special.iter().map(|n| rank(class.fits[n.idx()])).max().unwrap_or(0).max(key_rank(other));
        if top == 0 {
            self.index.special = special;
            return None;
        }
        let mut candidates: Vec<NodeId> =
            special.iter().copied().filter(|n| rank(class.fits[n.idx()]) == top).collect();
        if key_rank(other) == top {
            candidates.push(key_node(other));
            candidates.sort_unstable();
        }
        let mut scores: Vec<f64> = candidates
            .iter()
            .map(|n| match class.fits[n.idx()] {
                Fit::Idle(s) | Fit::Future(s) => s,
                Fit::No(_) => unreachable!("candidates fit"),
            })
            .collect();
        if candidates.len() > 1 {
            for p in self.batch_plugins() {
                p.batch_node_order(&self.snap, t, &candidates, &mut scores);
            }
        }
        let mut best = 0;
        for i in 1..candidates.len() {
            if scores[i] > scores[best] {
                best = i;
            }
        }
        self.index.special = special;
        let n = candidates[best];
        Some(if top == 2 { NodeChoice::Idle(n) } else { NodeChoice::Future(n) })
    }

    /// Whether the index gives the same answer as a scan for this task: every plugin that
    /// filters or scores nodes is shape-local (asked once per task and session), and batch
    /// scores are uniform for the task's shape (asked once per shape).
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
            1 => true,
            2 => false,
            _ => {
                let mut usable = self.node_plugins().all(|p| p.shape_local(&self.snap, t));
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
                    self.index.keys[t.idx()] = key;
                    usable = self.batch_uniform(t, key);
                }
                self.index.usable[t.idx()] = if usable { 1 } else { 2 };
                usable
            }
        }
    }

    /// Whether the batch scores are uniform, or sparse, for a shape-local task: the answer
    /// depends on its shape and key only, so it is asked once per (shape, key).
    fn batch_uniform(&mut self, t: TaskId, key: u64) -> bool {
        let shape = self.snap.task(t).shape;
        if let Some(&mode) = self.index.batch_modes.get(&(shape, key)) {
            return mode != 3;
        }
        let mut mode = 1;
        for p in self.batch_plugins() {
            if !p.batch_uniform(&self.snap, t) {
                mode = if p.batch_sparse(&self.snap, t) { 2 } else { 3 };
                if mode == 3 {
                    break;
                }
            }
        }
        self.index.batch_modes.insert((shape, key), mode);
        mode != 3
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
    fn intern(&mut self, reason: String) -> u32 {
        if let Some(id) = self.reason_ids.get(&reason) {
            return *id;
        }
        let id = self.reasons.len() as u32;
        self.reasons.push(reason.clone());
        self.reason_ids.insert(reason, id);
        self.reason_counts.push(0);
        id
    }

    fn fit_of(&mut self, task: &TaskInfo, r: Evaluation) -> Fit {
        match r {
            Ok((true, s)) => Fit::Idle(s),
            Ok((false, s)) => Fit::Future(s),
            Err(Reason::Insufficient(mask)) => {
                if let Some(&(_, id)) = self.insufficient_ids.iter().find(|(m, _)| *m == mask) {
                    return Fit::No(id);
                }
                // The message of `Session::fits_future_idle`.
                let dims: Vec<&str> =
                    task.resreq.dims().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, (n, _))| n).collect();
                let id = self.intern(format!("Insufficient {}", dims.join(", ")));
                self.insufficient_ids.push((mask, id));
                Fit::No(id)
            }
            Err(Reason::Predicate(reason)) => Fit::No(self.intern(reason)),
        }
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
    }

    #[test]
    fn best_tree_follows_updates() {
        let mut fits = vec![Fit::No(0); 5];
        fits[3] = Fit::Future(1.0);
        let mut tree = BestTree::new(&fits);
        assert_eq!((key_rank(tree.best()), key_node(tree.best())), (1, NodeId(3)));
        tree.set(1, Fit::Idle(5.0));
        tree.set(4, Fit::Idle(5.0));
        assert_eq!((key_rank(tree.best()), key_node(tree.best())), (2, NodeId(1)));
        tree.set(1, Fit::No(0));
        assert_eq!(key_node(tree.best()), NodeId(4));
        tree.set(4, Fit::No(0));
        tree.set(3, Fit::No(0));
        assert_eq!(key_rank(tree.best()), 0);
        assert_eq!(key_rank(BestTree::new(&[]).best()), 0);
    }
}
