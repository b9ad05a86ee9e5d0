//! Incremental node selection: per equivalence class of tasks, an index of every node's
//! fit and score, updated only for the nodes that changed since the last query.
//!
//! Two tasks are equivalent when they request the same resources and carry the same
//! scheduling constraints (container requests, node selector, affinity, tolerations,
//! topology spread constraints, namespace, host ports): for plugins
//! that declare their predicates and scores *shape-local* ([`crate::Plugin::shape_local`]),
//! such tasks get the same answer on every node. A class keeps, per node, whether the task
//! fits now (idle), fits only once releasing pods are gone (future idle), or why it does not
//! fit; the fitting nodes sit in ordered sets by (score desc, node order). Any change of a
//! node's accounting is appended to a change log, and a class re-evaluates the logged nodes
//! before answering. The answer is exactly the one of a full scan: same predicates in the
//! same order, same scores, ties to the first node by name.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use rayon::prelude::*;

use crate::model::{NodeId, TaskId};
use crate::resource::Resource;
use crate::session::Session;
use crate::status::FitErrors;

/// A score with a total order (higher first), then the node index (lower first).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key(f64, u32);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(self.1.cmp(&other.1))
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fit {
    /// Fits the idle resources now.
    Idle(f64),
    /// Fits only the future idle resources.
    Future(f64),
    /// Does not fit, with the interned reason.
    No(u32),
}

struct Class {
    representative: TaskId,
    cursor: usize,
    fits: Vec<Fit>,
    idle: BTreeSet<Key>,
    future: BTreeSet<Key>,
    reasons: Vec<String>,
    reason_ids: HashMap<String, u32>,
    reason_counts: Vec<u32>,
}

/// A node's answer for a task: (fits idle now, score), or why it does not fit.
type Evaluation = Result<(bool, f64), String>;

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
    by_request: HashMap<u64, Vec<usize>>,
    /// Class of each task (by task index), `u32::MAX` when not classified yet.
    task_class: Vec<u32>,
}

fn request_key(r: &Resource) -> u64 {
    // FNV-1a over names and value bits: stable and cheap; a collision only costs a
    // constraint comparison.
    let mut h: u64 = 0xcbf29ce484222325;
    let mut mix = |b: u8| {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    };
    for (n, v) in r.dims() {
        n.bytes().for_each(&mut mix);
        v.to_bits().to_le_bytes().into_iter().for_each(&mut mix);
    }
    h
}

impl NodeIndex {
    /// Records that a node's accounting changed.
    pub(crate) fn touch(&mut self, n: NodeId) {
        if !self.classes.is_empty() {
            self.log.push(n);
        }
    }
}

fn same_constraints(a: &crate::model::TaskInfo, b: &crate::model::TaskInfo) -> bool {
    use k8s_openapi::api::core::v1::Container;
    let (Some(x), Some(y)) = (a.pod.spec.as_ref(), b.pod.spec.as_ref()) else {
        return a.pod.spec.is_none() && b.pod.spec.is_none();
    };
    fn host_ports(c: &Container) -> impl Iterator<Item = &k8s_openapi::api::core::v1::ContainerPort> + '_ {
        c.ports.iter().flatten().filter(|p| p.host_port.is_some())
    }
    let same_containers = |l: &[Container], r: &[Container]| {
        l.len() == r.len()
            && l.iter().zip(r).all(|(c, d)| c.resources == d.resources && host_ports(c).eq(host_ports(d)))
    };
    x.node_selector == y.node_selector
        && x.affinity == y.affinity
        && x.tolerations == y.tolerations
        && x.topology_spread_constraints == y.topology_spread_constraints
        && a.namespace() == b.namespace()
        && same_containers(&x.containers, &y.containers)
        && same_containers(x.init_containers.as_deref().unwrap_or(&[]), y.init_containers.as_deref().unwrap_or(&[]))
}

impl Session<'_> {
    fn evaluate(&self, t: TaskId, n: NodeId) -> Evaluation {
        let task = self.snap.task(t);
        let node = self.snap.node(n);
        Session::fits_future_idle(task, node).map_err(|s| s.reason)?;
        self.predicate(t, n).map_err(|s| s.reason)?;
        let score: f64 = self.node_order_sum(t, n);
        let score = if score == 0.0 { 0.0 } else { score };
        Ok((Session::fits_idle(&task.resreq, node), score))
    }

    fn class_of(&mut self, t: TaskId) -> usize {
        if self.index.task_class.len() < self.snap.tasks.len() {
            self.index.task_class.resize(self.snap.tasks.len(), u32::MAX);
        }
        let known = self.index.task_class[t.idx()];
        if known != u32::MAX {
            return known as usize;
        }
        let key = request_key(&self.snap.task(t).resreq);
        let task = self.snap.task(t);
        let found = self.index.by_request.get(&key).and_then(|cands| {
            cands
                .iter()
                .copied()
                .find(|c| same_constraints(self.snap.task(self.index.classes[*c].representative), task))
        });
        let c = match found {
            Some(c) => c,
            None => {
                let c = self.build_class(t);
                self.index.by_request.entry(key).or_default().push(c);
                c
            }
        };
        self.index.task_class[t.idx()] = c as u32;
        c
    }

    fn build_class(&mut self, t: TaskId) -> usize {
        let nodes = self.snap.nodes.len();
        let results: Vec<Evaluation> = if self.parallel(nodes) {
            (0..nodes).into_par_iter().map(|i| self.evaluate(t, NodeId(i as u32))).collect()
        } else {
            (0..nodes).map(|i| self.evaluate(t, NodeId(i as u32))).collect()
        };
        let mut class = Class {
            representative: t,
            cursor: self.index.log.len(),
            fits: Vec::with_capacity(nodes),
            idle: BTreeSet::new(),
            future: BTreeSet::new(),
            reasons: Vec::new(),
            reason_ids: HashMap::new(),
            reason_counts: Vec::new(),
        };
        for (i, r) in results.into_iter().enumerate() {
            let fit = class.fit_of(r);
            class.fits.push(fit);
            class.insert(i as u32, fit);
        }
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
        // Re-evaluate the nodes that changed since this class last looked.
        let start = self.index.classes[c].cursor;
        let end = self.index.log.len();
        if start < end {
            let rep = self.index.classes[c].representative;
            let mut changed: Vec<NodeId> = self.index.log[start..end].to_vec();
            changed.sort_unstable();
            changed.dedup();
            let results: Vec<(NodeId, Evaluation)> = changed.into_iter().map(|n| (n, self.evaluate(rep, n))).collect();
            let class = &mut self.index.classes[c];
            for (n, r) in results {
                let fit = class.fit_of(r);
                let old = class.fits[n.idx()];
                if old != fit {
                    class.remove(n.0, old);
                    class.insert(n.0, fit);
                    class.fits[n.idx()] = fit;
                }
            }
            class.cursor = end;
        }
        let class = &self.index.classes[c];
        if let Some(k) = class.idle.first() {
            return Ok(NodeChoice::Idle(NodeId(k.1)));
        }
        if let Some(k) = class.future.first() {
            return Ok(NodeChoice::Future(NodeId(k.1)));
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

impl Session<'_> {
    /// Whether the index gives the same answer as a scan for this task: every plugin that
    /// filters or scores nodes is shape-local, and batch scores are uniform for the task.
    fn index_usable(&self, t: TaskId) -> bool {
        self.index_enabled
            && self.node_plugins().all(|p| p.shape_local(&self.snap, t))
            && self.batch_plugins().all(|p| p.batch_uniform(&self.snap, t))
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
    fn fit_of(&mut self, r: Evaluation) -> Fit {
        match r {
            Ok((true, s)) => Fit::Idle(s),
            Ok((false, s)) => Fit::Future(s),
            Err(reason) => {
                if let Some(id) = self.reason_ids.get(&reason) {
                    return Fit::No(*id);
                }
                let id = self.reasons.len() as u32;
                self.reasons.push(reason.clone());
                self.reason_ids.insert(reason, id);
                self.reason_counts.push(0);
                Fit::No(id)
            }
        }
    }

    fn insert(&mut self, n: u32, fit: Fit) {
        match fit {
            Fit::Idle(s) => {
                self.idle.insert(Key(s, n));
            }
            Fit::Future(s) => {
                self.future.insert(Key(s, n));
            }
            Fit::No(r) => self.reason_counts[r as usize] += 1,
        }
    }

    fn remove(&mut self, n: u32, fit: Fit) {
        match fit {
            Fit::Idle(s) => {
                self.idle.remove(&Key(s, n));
            }
            Fit::Future(s) => {
                self.future.remove(&Key(s, n));
            }
            Fit::No(r) => self.reason_counts[r as usize] -= 1,
        }
    }
}
