//! Node selection: the session's questions to its node index ([`crate::index`]), and the
//! evaluation interface the index reads the plugins through.

pub use crate::index::NodeChoice;
use crate::index::{Evaluate, NodeIndex, Query};
use crate::model::{NodeId, TaskId};
use crate::plugin::{Hooks, Plugin};
use crate::session::Session;
use crate::status::{FitErrors, Status};

impl Session {
    /// Runs a question to the node index. The index is taken out of the session for the
    /// question's length, so that it may read the session's evaluations.
    fn query<R>(&mut self, f: impl FnOnce(&mut Query<'_, Session>) -> R) -> R {
        let mut index = self.index.take().expect("the node index answers one question at a time");
        let answer = f(&mut Query { index: &mut index, snap: &self.snap, ev: self });
        self.index = Some(index);
        answer
    }

    /// A position in the session's log of node changes, for a caller that keeps values
    /// derived from nodes' accounting (idle, releasing, pipelined) and brings them up to
    /// date with [`Session::nodes_changed_since`].
    pub fn node_change_cursor(&mut self) -> usize {
        self.index_mut().cursor()
    }

    /// Appends to `out` the nodes whose accounting may have changed since `cursor` (a node
    /// may come more than once), and returns the cursor for next time.
    pub fn nodes_changed_since(&self, cursor: usize, out: &mut Vec<NodeId>) -> usize {
        self.index.as_deref().expect("the node index answers one question at a time").changed_since(cursor, out)
    }

    /// The node index, between questions.
    pub(crate) fn index_mut(&mut self) -> &mut NodeIndex {
        self.index.as_deref_mut().expect("the node index answers one question at a time")
    }

    /// Finds the best node for a task: the best node where it fits now, else the best where
    /// it fits once releasing pods are gone; the fit errors of all nodes when none fits.
    /// Through the node index when every plugin that filters or scores nodes makes the
    /// promises it needs ([`crate::Incremental`]), by a scan otherwise; the same answer either
    /// way ([`Session::find_node_by_scan`]).
    pub fn find_node(&mut self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        self.query(|q| q.find_node(t))
    }

    /// Whether the task fits some node now or once releasing pods are gone (its request
    /// fits the node's future idle resources and every predicate passes there).
    pub fn fits_some_node(&mut self, t: TaskId) -> bool {
        self.query(|q| q.fits_some_node(t))
    }

    /// The nodes of `among` (in node order) where the eviction predicates pass for the
    /// task ([`Session::predicate_for_eviction`]), with their scores
    /// ([`Session::node_scores`] over them), for a task whose batch scores are uniform
    /// ([`Session::batch_scores_uniform`]); kept per class of the node index until a node
    /// changes.
    pub fn eviction_candidates(&mut self, t: TaskId, among: &[NodeId]) -> (Vec<NodeId>, Vec<f64>) {
        self.query(|q| q.eviction_candidates(t, among))
    }

    /// Whether the task's batch scores are the same on every node (every plugin with batch
    /// scores finds them [`crate::Incremental::batch_uniform`] for it), so that scoring a
    /// subset of the nodes gives each node the score a batch over all of them would, and
    /// with the node index on. `preempt` then scores only the nodes where it may find
    /// victims.
    pub fn batch_scores_uniform(&mut self, t: TaskId) -> bool {
        self.query(|q| q.batch_scores_uniform(t))
    }

    /// The best node for a task among `among` (distinct, in node order), as Volcano's
    /// allocate does within a HyperNode: its predicates on those nodes, then their scores
    /// with batch scores over those nodes only; fits now before fits once releasing pods
    /// are gone. Through the node index when `among` is a union of whole domains of the
    /// task's batch partition (a HyperNode's nodes, partitioned by lowest HyperNode), by a
    /// scan of `among` otherwise and for the fit errors; the same answer either way
    /// ([`Session::find_node_among_by_scan`]).
    pub fn find_node_among(&mut self, t: TaskId, among: &[NodeId]) -> Result<NodeChoice, FitErrors> {
        match self.query(|q| q.find_node_among(t, among)) {
            Some(Some(choice)) => Ok(choice),
            _ => self.find_node_among_by_scan(t, among),
        }
    }

    /// The same answer as [`Session::find_node_among`], by checking and scoring every node
    /// of `among`.
    pub fn find_node_among_by_scan(&self, t: TaskId, among: &[NodeId]) -> Result<NodeChoice, FitErrors> {
        let task = self.snap.task(t);
        // The feasible nodes first, without the reasons (only needed when none fits).
        let feasible: Vec<NodeId> = among
            .iter()
            .copied()
            .filter(|n| self.snap.node(*n).fits_future(&task.resreq) && self.predicate(t, *n).is_ok())
            .collect();
        if feasible.is_empty() {
            let mut errors = FitErrors { nodes: among.len(), ..Default::default() };
            for &n in among {
                if let Err(s) = self.snap.node(n).fits_future_idle(task).and_then(|()| self.predicate(t, n)) {
                    errors.add(&s.reason);
                }
            }
            return Err(errors);
        }
        let idle: Vec<NodeId> =
            feasible.iter().copied().filter(|n| self.snap.node(*n).fits_idle(&task.resreq)).collect();
        if idle.is_empty() {
            Ok(NodeChoice::Future(self.best_node(t, &feasible).expect("not empty")))
        } else {
            Ok(NodeChoice::Idle(self.best_node(t, &idle).expect("not empty")))
        }
    }

    /// The same answer as [`Session::find_node`], by checking and scoring every node.
    pub fn find_node_by_scan(&self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        let task = self.snap.task(t);
        let (feasible, errors) = self.predicate_nodes(t, |node| node.fits_future_idle(task));
        if feasible.is_empty() {
            return Err(errors);
        }
        let idle: Vec<NodeId> =
            feasible.iter().copied().filter(|n| self.snap.node(*n).fits_idle(&task.resreq)).collect();
        if idle.is_empty() {
            Ok(NodeChoice::Future(self.best_node(t, &feasible).expect("not empty")))
        } else {
            Ok(NodeChoice::Idle(self.best_node(t, &idle).expect("not empty")))
        }
    }
}

impl Evaluate for Session {
    fn predicate_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.active(Hooks::PREDICATE)
    }

    fn evaluating_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.with_any(Hooks::PREDICATE | Hooks::NODE_ORDER)
    }

    fn node_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.with_any(Hooks::PREDICATE | Hooks::NODE_ORDER | Hooks::BATCH_NODE_ORDER)
    }

    fn batch_plugins(&self) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.active(Hooks::BATCH_NODE_ORDER)
    }

    fn predicate(&self, t: TaskId, n: NodeId) -> Result<(), Status> {
        Session::predicate(self, t, n)
    }

    fn predicate_without_domain_rules(&self, t: TaskId, n: NodeId) -> Result<(), Status> {
        for p in self.active(Hooks::PREDICATE) {
            match p.incremental() {
                Some(h) => h.predicate_without_domain_rules(&self.snap, t, n)?,
                None => p.predicate(&self.snap, t, n)?,
            }
        }
        Ok(())
    }

    fn predicate_for_eviction(&self, t: TaskId, n: NodeId) -> Result<(), Status> {
        Session::predicate_for_eviction(self, t, n)
    }

    fn node_order_sum(&self, t: TaskId, n: NodeId) -> f64 {
        Session::node_order_sum(self, t, n)
    }

    fn parallel(&self, n: usize) -> bool {
        Session::parallel(self, n)
    }

    fn find_node_by_scan(&self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        Session::find_node_by_scan(self, t)
    }
}
