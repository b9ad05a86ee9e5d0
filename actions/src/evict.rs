//! What `preempt` and `reclaim` share: the victim order, freeing a node for a
//! preemptor inside a per-node statement, the preemptor's pending tasks, whether it may
//! evict at all, and the nodes to try (those that fit without eviction first).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use volcano_framework::pq::CmpHeap;
use volcano_framework::{JobId, NodeId, QueueId, Resource, Session, Statement, TaskId, TaskStatus};

/// The victim order of `l` and `r` when `preemptor` needs room (Volcano
/// `BuildVictimsPriorityQueue`), `Less` when `l` is evicted first: within a job, the
/// reverse of task order; a victim whose job is gone first; within a queue, the reverse of
/// job order (then of task order); across queues, the victim queue order (default: the
/// most over-served queue first). `Equal` when none of these tells them apart. Every order
/// it reads is antisymmetric (each plugin's compares keys, and the fallbacks end on names
/// and uids), so one call orders a pair both ways.
fn victim_order(ssn: &Session, preemptor: TaskId, l: TaskId, r: TaskId) -> Ordering {
    let (lt, rt) = (ssn.snap.task(l), ssn.snap.task(r));
    if lt.job == rt.job {
        return ssn.task_order(l, r).reverse();
    }
    let (lj, rj) = match (lt.job, rt.job) {
        (Some(lj), Some(rj)) => (lj, rj),
        (None, _) => return Ordering::Less,
        (_, None) => return Ordering::Greater,
    };
    let (lq, rq) = (ssn.snap.job(lj).queue, ssn.snap.job(rj).queue);
    match ssn.snap.task(preemptor).job.map(|j| ssn.snap.job(j).queue) {
        Some(pq) if lq != rq => ssn.victim_queue_order(lq, rq, pq),
        _ => ssn.job_order(lj, rj).then_with(|| ssn.task_order(l, r)).reverse(),
    }
}

/// Whether `l` is evicted before `r` when `preemptor` needs room ([`victim_order`]).
pub(crate) fn evicted_first(ssn: &Session, preemptor: TaskId, l: TaskId, r: TaskId) -> bool {
    victim_order(ssn, preemptor, l, r) == Ordering::Less
}

/// Sorts candidates in victim order (ties by task id), so that plugins that walk candidates
/// and stop (gang's "only above minMember", the queue plugins' running totals) pick the pods
/// that would be evicted first — an elastic job shrinks from its last pod.
pub(crate) fn sort_in_victim_order(ssn: &Session, preemptor: TaskId, candidates: &mut [TaskId]) {
    // A node lists its pods in the order they came (a job's pods usually in task order),
    // and the victim order is mostly its reverse: reversed first, they are nearly sorted,
    // and the insertion sort small lists get asks about n instead of n²/2 comparisons.
    // The comparison is a total order (ties by task id), so the result does not depend
    // on the order it starts from.
    candidates.reverse();
    candidates.sort_by(|a, b| victim_order(ssn, preemptor, *a, *b).then(a.cmp(b)));
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

/// Pending, non-gated tasks of a job in a task-order heap.
pub(crate) fn pending_tasks(ssn: &Session, j: JobId) -> CmpHeap<TaskId> {
    let mut heap = CmpHeap::new();
    for &t in &ssn.snap.job(j).tasks {
        let task = ssn.snap.task(t);
        if task.status == TaskStatus::Pending && !task.sch_gated {
            heap.push(t, |a, b| ssn.task_order(*a, *b).is_lt());
        }
    }
    heap
}

/// Whether a task may take part in an eviction at all: not `preemptionPolicy: Never`, and
/// not already served by its nominated node (it fits there now, or a lower-priority pod is
/// already terminating there for it).
pub(crate) fn may_evict_for(ssn: &Session, t: TaskId) -> bool {
    let task = ssn.snap.task(t);
    if task.preemption_never {
        return false;
    }
    if let Some(n) = task.nominated_node.as_deref().and_then(|name| ssn.snap.node_id(name)) {
        let node = ssn.snap.node(n);
        if node.fits_future(&task.resreq) && ssn.predicate(t, n).is_ok() {
            return false;
        }
        let terminating_lower = node.tasks.iter().any(|x| {
            let v = ssn.snap.task(*x);
            v.status == TaskStatus::Releasing && v.priority < task.priority
        });
        if terminating_lower {
            return false;
        }
    }
    true
}

/// Nodes that pass the eviction predicates, best score first (ties by node order).
pub(crate) fn candidate_nodes(ssn: &Session, t: TaskId, scored: bool) -> Vec<NodeId> {
    let nodes: Vec<NodeId> =
        (0..ssn.snap.nodes.len() as u32).map(NodeId).filter(|n| ssn.predicate_for_eviction(t, *n).is_ok()).collect();
    if !scored {
        return nodes;
    }
    by_score(ssn, t, nodes)
}

/// The nodes in score order, best first, ties by node order (the nodes given in node order).
fn by_score(ssn: &Session, t: TaskId, nodes: Vec<NodeId>) -> Vec<NodeId> {
    if nodes.len() < 2 {
        return nodes;
    }
    let scores = ssn.node_scores(t, &nodes);
    in_score_order(nodes, &scores)
}

/// The nodes (given in node order) by score, best first, ties by node order.
fn in_score_order(nodes: Vec<NodeId>, scores: &[f64]) -> Vec<NodeId> {
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    order.into_iter().map(|i| nodes[i]).collect()
}

/// The nodes `preempt` tries for victims of queue `q` for `t`, in the order of
/// [`candidate_nodes`] (scored): the candidates that hold a possible victim of the queue
/// (the others cannot give `preempt` one). When the task's batch scores are uniform, only
/// those nodes are checked and scored (a node's score does not depend on which others are
/// scored); otherwise every candidate is, and the others are dropped from the order.
pub(crate) fn preempt_candidate_nodes(ssn: &mut Session, t: TaskId, q: QueueId) -> ScoreOrder {
    if !ssn.victim_index_enabled() {
        return ScoreOrder::Sorted(candidate_nodes(ssn, t, true).into_iter());
    }
    let among = ssn.victim_nodes_of_queue(q);
    if among.is_empty() {
        return ScoreOrder::Sorted(among.into_iter());
    }
    if ssn.batch_scores_uniform(t) {
        // Most preemptors stop at one of the first nodes: a heap gives them in order
        // without sorting them all.
        let (nodes, scores) = ssn.eviction_candidates(t, &among);
        let heap = nodes.iter().zip(&scores).map(|(n, s)| (TotalOrder(*s), Reverse(n.0))).collect();
        return ScoreOrder::Heap(heap);
    }
    let mut nodes = candidate_nodes(ssn, t, true);
    nodes.retain(|n| among.binary_search(n).is_ok());
    ScoreOrder::Sorted(nodes.into_iter())
}

/// A score in `f64::total_cmp` order.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TotalOrder(f64);

impl PartialEq for TotalOrder {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for TotalOrder {}

impl PartialOrd for TotalOrder {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TotalOrder {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Nodes best score first, ties by node order ([`in_score_order`]): already sorted, or
/// taken one at a time from a max-heap of (score, reversed node index).
pub(crate) enum ScoreOrder {
    Sorted(std::vec::IntoIter<NodeId>),
    Heap(BinaryHeap<(TotalOrder, Reverse<u32>)>),
}

impl Iterator for ScoreOrder {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        match self {
            ScoreOrder::Sorted(nodes) => nodes.next(),
            ScoreOrder::Heap(heap) => heap.pop().map(|(_, Reverse(n))| NodeId(n)),
        }
    }
}

/// The nodes `reclaim` tries for victims for a task of queue `q`, one at a time in node
/// order: with the victim index on, only the nodes that hold a possible victim of another
/// reclaimable queue (the others cannot give `reclaim` one). The eviction predicates are
/// the caller's to check.
pub(crate) struct ReclaimWalk {
    q: QueueId,
    last: Option<NodeId>,
}

impl ReclaimWalk {
    pub(crate) fn new(q: QueueId) -> Self {
        ReclaimWalk { q, last: None }
    }

    pub(crate) fn next(&mut self, ssn: &mut Session) -> Option<NodeId> {
        let next = if ssn.victim_index_enabled() {
            ssn.next_node_with_reclaim_victims(self.q, self.last)
        } else {
            let i = self.last.map_or(0, |n| n.0 + 1);
            (i < ssn.snap.nodes.len() as u32).then_some(NodeId(i))
        };
        self.last = next;
        next
    }
}

/// Whether the task fits the node's future idle resources and passes every predicate.
pub(crate) fn fits_without_eviction(ssn: &Session, t: TaskId, n: NodeId) -> bool {
    ssn.snap.node(n).fits_future(&ssn.snap.task(t).resreq) && ssn.predicate(t, n).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_framework::{Profile, Registries, SessionContext, SessionOptions};
    use volcano_testkit::{node, pod, pod_group, queue, Objects};

    /// The victim order of every pair, both ways, in a session with two queues, jobs of
    /// several priorities and sizes, and a pod whose PodGroup is gone: one call orders a pair
    /// both ways (the sort relies on it, where it used to ask `evicted_first` twice).
    #[test]
    fn the_victim_order_is_antisymmetric() {
        let mut o = Objects::new().queue(queue("q1")).queue(queue("q2"));
        for n in 0..3 {
            o = o.node(node(&format!("n{n}"), "16", "64Gi"));
        }
        for (j, (q, priority, size)) in
            [("q1", 10, 3), ("q1", 5, 2), ("q2", 5, 3), ("q2", 1, 1)].into_iter().enumerate()
        {
            let job = format!("j{j}");
            o = o.pod_group(pod_group("ns", &job, 1).queue(q));
            for k in 0..size {
                let p = pod("ns", &format!("{job}-{k}")).group(&job).cpu_mem("1", "1Gi").priority(priority - k);
                o = o.pod(p.running_on(&format!("n{}", k % 3)).created(100 - k as i64));
            }
        }
        o = o.pod(pod("ns", "orphan").group("gone").cpu_mem("1", "1Gi").running_on("n0"));
        o = o
            .pod_group(pod_group("ns", "high", 1).queue("q1"))
            .pod(pod("ns", "high-0").group("high").cpu_mem("1", "1Gi"));
        let reg = Registries { plugins: volcano_plugins::in_tree(), actions: crate::in_tree() };
        let profile = Profile::builtin_default(&reg).unwrap();
        let ctx = SessionContext { now_ms: 0, cycle: 1, uid: "s".into(), enqueue_enabled: true };
        let ssn = Session::open(o.snapshot(), profile.instantiate(), ctx, SessionOptions::default());
        let preemptor = ssn.snap.task_id("ns/high-0").unwrap();
        let tasks: Vec<TaskId> = (0..ssn.snap.tasks.len() as u32).map(TaskId).filter(|t| *t != preemptor).collect();
        assert!(tasks.len() >= 10);
        let mut ordered = 0;
        for &a in &tasks {
            for &b in &tasks {
                let ab = victim_order(&ssn, preemptor, a, b);
                assert_eq!(ab, victim_order(&ssn, preemptor, b, a).reverse(), "{a:?} {b:?}");
                ordered += usize::from(ab != Ordering::Equal);
            }
        }
        // Every pair of distinct pods is ordered (the fallbacks end on uids).
        assert_eq!(ordered, tasks.len() * (tasks.len() - 1));
    }

    #[test]
    fn the_heap_gives_the_nodes_in_the_sorted_order() {
        let scores = [3.0, -0.0, 0.0, f64::NAN, 3.0, 7.5, -1.0, 0.0, 7.5, f64::INFINITY];
        let nodes: Vec<NodeId> = (0..scores.len() as u32).map(|i| NodeId(2 * i + 1)).collect();
        let sorted = in_score_order(nodes.clone(), &scores);
        let heap = nodes.iter().zip(&scores).map(|(n, s)| (TotalOrder(*s), Reverse(n.0))).collect();
        assert_eq!(ScoreOrder::Heap(heap).collect::<Vec<_>>(), sorted);
    }
}
