//! Statement: an ordered log of evict / pipeline / allocate operations over the session
//! that is either committed (effects emitted) or discarded (undone in reverse order, with
//! the plugins' event handlers fired so their state stays consistent).

use crate::effect::Effect;
use crate::model::{NodeId, TaskId, TaskStatus};
use crate::session::Session;

#[derive(Clone, Copy, Debug)]
enum Op {
    Evict { task: TaskId, prev: TaskStatus, reason_idx: usize },
    Pipeline { task: TaskId },
    Allocate { task: TaskId },
}

/// A transaction over a session.
#[derive(Debug, Default)]
#[must_use = "a statement must be committed or discarded"]
pub struct Statement {
    ops: Vec<Op>,
    reasons: Vec<String>,
}

impl Statement {
    /// An empty statement.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether no operation was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Number of operations recorded.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Marks a running task Releasing (nothing is sent until commit).
    pub fn evict(&mut self, ssn: &mut Session, task: TaskId, reason: impl Into<String>) {
        let prev = ssn.do_evict(task);
        self.reasons.push(reason.into());
        self.ops.push(Op::Evict { task, prev, reason_idx: self.reasons.len() - 1 });
    }

    /// Reserves a pending task on the node's future idle resources.
    pub fn pipeline(&mut self, ssn: &mut Session, task: TaskId, node: NodeId) {
        ssn.do_pipeline(task, node);
        self.ops.push(Op::Pipeline { task });
    }

    /// Places a pending task on a node.
    pub fn allocate(&mut self, ssn: &mut Session, task: TaskId, node: NodeId) {
        ssn.do_allocate(task, node);
        self.ops.push(Op::Allocate { task });
    }

    /// Appends another statement's operations (it is consumed, not undone).
    pub fn merge(&mut self, mut other: Statement) {
        let base = self.reasons.len();
        self.reasons.append(&mut other.reasons);
        self.ops.extend(other.ops.into_iter().map(|op| match op {
            Op::Evict { task, prev, reason_idx } => Op::Evict { task, prev, reason_idx: reason_idx + base },
            op => op,
        }));
    }

    /// Applies the operations in order: evictions become evict effects, allocations go to
    /// the binder (status Binding, bind effect), pipelined tasks stay reserved.
    pub fn commit(self, ssn: &mut Session) {
        if !self.ops.is_empty() {
            let pipelined = self.ops.iter().any(|op| matches!(op, Op::Pipeline { .. }));
            let evicted = self.ops.iter().any(|op| matches!(op, Op::Evict { .. }));
            ssn.note_change(pipelined, evicted);
        }
        if self.ops.iter().any(|op| matches!(op, Op::Evict { .. })) {
            ssn.record_eviction_transaction();
        }
        for op in self.ops {
            match op {
                Op::Evict { task, reason_idx, .. } => {
                    let t = ssn.snap.task(task);
                    let node = t.node.map(|n| ssn.snap.node(n).name.clone()).unwrap_or_else(|| "".into());
                    let effect = Effect::Evict {
                        pod: t.object_ref(),
                        node,
                        action: ssn.current_action(),
                        reason: self.reasons[reason_idx].clone(),
                    };
                    ssn.push_effect(effect);
                }
                Op::Pipeline { task } => ssn.record_scheduled(task),
                Op::Allocate { task } => {
                    if ssn.snap.task(task).status == TaskStatus::Allocated {
                        ssn.dispatch(task);
                    }
                }
            }
        }
    }

    /// Leaves the operations in the session, neither committed nor discarded: a pipelined
    /// gang keeps its reservations until the session ends, so lower-ranked jobs cannot take
    /// them in this cycle, and nothing is bound (Volcano's allocate does the same).
    pub fn keep(self, ssn: &mut Session) {
        if !self.ops.is_empty() {
            let evicted = self.ops.iter().any(|op| matches!(op, Op::Evict { .. }));
            ssn.note_change(true, evicted);
        }
    }

    /// Undoes the operations in reverse order.
    pub fn discard(self, ssn: &mut Session) {
        for op in self.ops.into_iter().rev() {
            match op {
                Op::Evict { task, prev, .. } => ssn.undo_evict(task, prev),
                Op::Pipeline { task } | Op::Allocate { task } => ssn.undo_place(task),
            }
        }
    }
}
