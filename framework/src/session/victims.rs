//! Where `preempt` and `reclaim` may find victims: per queue, the nodes that hold pods
//! those actions may evict, kept exact while evictions are made and undone.
//!
//! A pod is a possible victim when it is Running or Bound, preemptable, on a node and in a
//! job. The actions apply their own, narrower rules on top (same queue, other job, Running
//! only, reclaimable queue, best effort); this index only lets them skip the nodes where
//! no pod can pass those rules, which they would skip anyway. Within a session a pod
//! becomes a possible victim again only when its eviction is undone, and stops being one
//! only when it is evicted: the two places ([`Session::do_evict`], [`Session::undo_evict`])
//! keep the counts.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::model::{NodeId, QueueId, TaskId};
use crate::session::Session;

/// Per queue and over the reclaimable queues: node index → number of possible victims.
#[derive(Debug, Default)]
pub(crate) struct VictimNodes {
    by_queue: Vec<BTreeMap<u32, u32>>,
    reclaimable: BTreeMap<u32, u32>,
}

fn add(map: &mut BTreeMap<u32, u32>, node: u32) {
    *map.entry(node).or_default() += 1;
}

fn remove(map: &mut BTreeMap<u32, u32>, node: u32) {
    let count = map.get_mut(&node).expect("a counted victim's node is in the index");
    *count -= 1;
    if *count == 0 {
        map.remove(&node);
    }
}

impl Session {
    /// The queue and node of a task that is a possible victim now.
    fn victim_key(&self, t: TaskId) -> Option<(QueueId, u32)> {
        let task = self.snap.task(t);
        if !(task.status.is_preemptable() && task.preemptable) {
            return None;
        }
        let (job, node) = (task.job?, task.node?);
        Some((self.snap.job(job).queue, node.0))
    }

    fn victim_nodes(&mut self) -> &VictimNodes {
        if self.victims.is_none() {
            self.victims =
                Some(VictimNodes { by_queue: vec![BTreeMap::new(); self.snap.queues.len()], ..Default::default() });
            for i in 0..self.snap.tasks.len() {
                self.victims_join(TaskId(i as u32));
            }
        }
        self.victims.as_ref().expect("built above")
    }

    /// Takes a task out of the index before it stops being a possible victim.
    pub(crate) fn victims_leave(&mut self, t: TaskId) {
        self.victims_count(t, remove);
    }

    /// Puts a task back in the index once it may be a victim again.
    pub(crate) fn victims_join(&mut self, t: TaskId) {
        self.victims_count(t, add);
    }

    /// Applies `count` to the task's node in its queue's map (and in the reclaimable
    /// queues' map) when the index is built and the task is a possible victim now.
    fn victims_count(&mut self, t: TaskId, count: fn(&mut BTreeMap<u32, u32>, u32)) {
        if self.victims.is_none() {
            return;
        }
        if let Some((q, n)) = self.victim_key(t) {
            let reclaimable = self.snap.queue(q).reclaimable;
            let v = self.victims.as_mut().expect("checked");
            count(&mut v.by_queue[q.idx()], n);
            if reclaimable {
                count(&mut v.reclaimable, n);
            }
        }
    }

    /// Whether the actions should walk only the nodes of [`Session::victim_nodes_of_queue`]
    /// and [`Session::next_node_with_reclaim_victims`] (with the node index on), rather
    /// than every node.
    pub fn victim_index_enabled(&self) -> bool {
        self.index.as_ref().is_some_and(|i| i.enabled())
    }

    /// The nodes that hold a possible victim of queue `q` (Running or Bound, preemptable,
    /// in a job of the queue), in node order: the only nodes where `preempt` can find
    /// victims for a pod of the queue.
    pub fn victim_nodes_of_queue(&mut self, q: QueueId) -> Vec<NodeId> {
        self.victim_nodes().by_queue[q.idx()].keys().map(|n| NodeId(*n)).collect()
    }

    /// The first node after `after` (from the first node when `None`), in node order, that
    /// holds a possible victim of a reclaimable queue other than `q`: the nodes where
    /// `reclaim` can find victims for a pod of queue `q`.
    pub fn next_node_with_reclaim_victims(&mut self, q: QueueId, after: Option<NodeId>) -> Option<NodeId> {
        let own_counted = self.snap.queue(q).reclaimable;
        let v = self.victim_nodes();
        let from = after.map_or(Bound::Unbounded, |n| Bound::Excluded(n.0));
        v.reclaimable
            .range((from, Bound::Unbounded))
            .find(|(n, count)| !own_counted || v.by_queue[q.idx()].get(n).copied().unwrap_or(0) < **count)
            .map(|(n, _)| NodeId(*n))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{add, remove};

    #[test]
    fn counts_drop_their_node_at_zero() {
        let mut m = BTreeMap::new();
        add(&mut m, 3);
        add(&mut m, 3);
        remove(&mut m, 3);
        assert_eq!(m.get(&3), Some(&1));
        remove(&mut m, 3);
        assert!(m.is_empty());
    }
}
