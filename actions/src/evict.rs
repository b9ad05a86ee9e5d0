//! What `preempt` and `reclaim` share: the victim order and freeing a node for a
//! preemptor inside a per-node statement.

use std::cmp::Ordering;

use volcano_framework::pq::CmpHeap;
use volcano_framework::{NodeId, Resource, Session, Statement, TaskId, TaskStatus};

/// Whether `l` is evicted before `r` when `preemptor` needs room (Volcano
/// `BuildVictimsPriorityQueue`): within a job, the reverse of task order; a victim whose
/// job is gone first; within a queue, the reverse of job order (then of task order);
/// across queues, the victim queue order (default: the most over-served queue first).
pub(crate) fn evicted_first(ssn: &Session, preemptor: TaskId, l: TaskId, r: TaskId) -> bool {
    let (lt, rt) = (ssn.snap.task(l), ssn.snap.task(r));
    if lt.job == rt.job {
        return ssn.task_order(l, r) == Ordering::Greater;
    }
    let (Some(lj), Some(rj)) = (lt.job, rt.job) else {
        return lt.job.is_none();
    };
    let (lq, rq) = (ssn.snap.job(lj).queue, ssn.snap.job(rj).queue);
    let pq = ssn.snap.task(preemptor).job.map(|j| ssn.snap.job(j).queue);
    if lq == rq || pq.is_none() {
        return match ssn.job_order(lj, rj) {
            Ordering::Equal => ssn.task_order(l, r) == Ordering::Greater,
            o => o == Ordering::Greater,
        };
    }
    ssn.victim_queue_order(lq, rq, pq.expect("checked")) == Ordering::Less
}

/// Sorts candidates in victim order, so that plugins that walk candidates and stop (gang's
/// "only above minMember", the queue plugins' running totals) pick the pods that would be
/// evicted first — an elastic job shrinks from its last pod.
pub(crate) fn sort_in_victim_order(ssn: &Session, preemptor: TaskId, candidates: &mut [TaskId]) {
    candidates.sort_by(|a, b| {
        if evicted_first(ssn, preemptor, *a, *b) {
            Ordering::Less
        } else if evicted_first(ssn, preemptor, *b, *a) {
            Ordering::Greater
        } else {
            a.cmp(b)
        }
    });
}

/// Whether the node's future idle resources plus the victims' requests cover the
/// preemptor's request (Volcano `ValidateVictims`).
pub(crate) fn victims_suffice(ssn: &Session, preemptor: TaskId, n: NodeId, victims: &[TaskId]) -> bool {
    if victims.is_empty() {
        return false;
    }
    let mut future = ssn.snap.node(n).future_idle();
    for v in victims {
        future.add(&ssn.snap.task(*v).resreq);
    }
    ssn.snap.task(preemptor).resreq.less_equal(&future, volcano_framework::DimensionDefault::Zero)
}

/// Evicts victims on `n` in victim order until `fits` holds, then pipelines the preemptor
/// there. Returns the node's statement when the preemptor got the node; discards it
/// (nothing evicted) otherwise.
pub(crate) fn free_node_for(
    ssn: &mut Session,
    preemptor: TaskId,
    n: NodeId,
    victims: Vec<TaskId>,
    reason: &str,
    fits: impl Fn(&Session) -> bool,
) -> Option<Statement> {
    let mut heap = CmpHeap::new();
    for v in victims {
        heap.push(v, |a, b| evicted_first(ssn, preemptor, *a, *b));
    }
    let mut stmt = Statement::new();
    let mut evicted = Resource::empty();
    while !fits(ssn) {
        let Some(v) = heap.pop(|a, b| evicted_first(ssn, preemptor, *a, *b)) else { break };
        if !ssn.snap.task(v).status.is_preemptable() {
            continue;
        }
        evicted.add(&ssn.snap.task(v).resreq);
        stmt.evict(ssn, v, reason);
    }
    if fits(ssn) && ssn.snap.task(preemptor).status == TaskStatus::Pending {
        stmt.pipeline(ssn, preemptor, n);
        Some(stmt)
    } else {
        stmt.discard(ssn);
        None
    }
}
