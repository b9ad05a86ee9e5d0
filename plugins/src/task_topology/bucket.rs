//! Buckets: per job, groups of tasks meant to share a node, built greedily from the role
//! relations (Volcano's `JobManager.ConstructBucket`).

use std::cmp::Ordering;
use std::collections::HashMap;

use volcano_framework::resource::{Resource, PODS};
use volcano_framework::{JobInfo, NodeId, Snapshot, TaskId, TaskStatus};

use super::relations::Relations;

/// A task outside every bucket.
pub(crate) const NO_BUCKET: u32 = u32::MAX;
/// A task without a role known to the job.
pub(crate) const NO_ROLE: u16 = u16::MAX;

/// What the plugin remembers about one task of a job with topology.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TaskSlot {
    /// Bucket index in the job's manager, or [`NO_BUCKET`].
    pub(crate) bucket: u32,
    /// Role id in the job's relations, or [`NO_ROLE`].
    pub(crate) role: u16,
    /// The node the plugin counts the task on.
    pub(crate) node: Option<NodeId>,
    /// Whether the task is among its bucket's pending tasks.
    pub(crate) pending: bool,
}

impl Default for TaskSlot {
    fn default() -> Self {
        TaskSlot { bucket: NO_BUCKET, role: NO_ROLE, node: None, pending: false }
    }
}

/// Tasks of one job meant to share a node.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bucket {
    /// Position in the job's bucket list (older buckets first).
    pub(crate) index: usize,
    /// The bucket's tasks that have no node yet, biggest request first.
    pub(crate) pending: Vec<TaskId>,
    /// Σ requests of the pending tasks.
    pub(crate) request: Resource,
    /// Σ request scores of the pending tasks (1 millicore = 1 MiB = 1 milli-unit).
    pub(crate) req_score: f64,
    /// Tasks per role that joined the bucket (pending or placed), by role id.
    pub(crate) role_counts: Vec<u32>,
    /// Tasks of the bucket that have a node.
    pub(crate) bound: u32,
    /// Tasks of the bucket per node.
    pub(crate) nodes: Vec<(NodeId, u32)>,
}

impl Bucket {
    /// Tasks of the bucket on a node.
    pub(crate) fn on_node(&self, n: NodeId) -> u32 {
        self.nodes.iter().find(|(x, _)| *x == n).map_or(0, |(_, c)| *c)
    }

    fn add_on_node(&mut self, n: NodeId) {
        match self.nodes.iter_mut().find(|(x, _)| *x == n) {
            Some((_, c)) => *c += 1,
            None => self.nodes.push((n, 1)),
        }
        self.bound += 1;
    }

    fn remove_from_node(&mut self, n: NodeId) {
        if let Some(p) = self.nodes.iter().position(|(x, _)| *x == n) {
            self.nodes[p].1 -= 1;
            if self.nodes[p].1 == 0 {
                self.nodes.swap_remove(p);
            }
            self.bound = self.bound.saturating_sub(1);
        }
    }
}

/// The size Volcano gives a request when balancing buckets: millicores + MiB of memory +
/// milli-units of other resources (`pods` aside, ephemeral storage in MiB).
pub(crate) fn req_score(r: &Resource) -> f64 {
    const MIB: f64 = 1024.0 * 1024.0;
    let mut s = r.milli_cpu + r.memory / MIB;
    for (name, v) in r.scalars() {
        match &**name {
            PODS => {}
            "ephemeral-storage" => s += v / 1000.0 / MIB,
            _ => s += v,
        }
    }
    s
}

/// Pending tasks of a bucket are kept biggest first, then by key.
fn pending_order(snap: &Snapshot, a: TaskId, b: TaskId) -> Ordering {
    let (x, y) = (snap.task(a), snap.task(b));
    req_score(&y.resreq).total_cmp(&req_score(&x.resreq)).then_with(|| x.key.cmp(&y.key))
}

/// The buckets and placement counters of one job with topology.
#[derive(Clone, Debug)]
pub(crate) struct JobManager {
    /// Role relations from the annotations.
    pub(crate) relations: Relations,
    /// Buckets, by index.
    pub(crate) buckets: Vec<Bucket>,
    /// The largest bucket at construction (pending + placed tasks).
    pub(crate) max_size: u32,
    /// Tasks of the job per node and role (role counts by role id).
    pub(crate) node_roles: HashMap<NodeId, Vec<u32>>,
}

impl JobManager {
    /// Builds the buckets of a job and fills the slots of its tasks.
    pub(crate) fn build(snap: &Snapshot, job: &JobInfo, relations: Relations, slots: &mut [TaskSlot]) -> JobManager {
        let roles = relations.roles.len();
        let mut jm = JobManager { relations, buckets: Vec::new(), max_size: 0, node_roles: HashMap::new() };

        // Every task with a role is counted on its node; tasks whose role has a relation
        // and that are pending or on a node go into buckets.
        let mut candidates: Vec<TaskId> = Vec::new();
        for &t in &job.tasks {
            let task = snap.task(t);
            let Some(r) = jm.relations.role_id(&task.role) else { continue };
            let slot = &mut slots[t.idx()];
            slot.role = r as u16;
            if let Some(n) = task.node {
                jm.node_roles.entry(n).or_insert_with(|| vec![0; roles])[r] += 1;
                slot.node = Some(n);
            }
            let placeable = task.node.is_some() || task.status == TaskStatus::Pending;
            if jm.relations.priority[r] > 0 && placeable {
                candidates.push(t);
            }
        }

        // Tasks on nodes first (by node name), then by user task order, relation
        // strength, and name (Volcano sorts the same way, then breaks ties at random).
        candidates.sort_by(|&a, &b| {
            let (x, y) = (snap.task(a), snap.task(b));
            match (x.node, y.node) {
                (Some(m), Some(n)) => snap.node(m).name.cmp(&snap.node(n).name),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => {
                    let (rx, ry) = (slots[a.idx()].role as usize, slots[b.idx()].role as usize);
                    jm.relations.role_order(rx, ry).then_with(|| x.name().cmp(y.name()))
                }
            }
            .then_with(|| x.key.cmp(&y.key))
        });

        let mut node_bucket: HashMap<NodeId, usize> = HashMap::new();
        for t in candidates {
            let task = snap.task(t);
            let r = slots[t.idx()].role as usize;
            let (selected, best) = match task.node {
                Some(n) => (node_bucket.get(&n).copied(), 0),
                None => {
                    let mut selected: Option<usize> = None;
                    let mut best = i64::MIN;
                    for b in &jm.buckets {
                        let aff = jm.relations.set_affinity(r, &b.role_counts, false);
                        if aff > best {
                            best = aff;
                            selected = Some(b.index);
                        } else if aff == best && selected.is_some_and(|s| b.req_score < jm.buckets[s].req_score) {
                            selected = Some(b.index);
                        }
                    }
                    (selected, best)
                }
            };
            let index = match selected {
                Some(i) if best >= 0 => i,
                _ => {
                    let i = jm.buckets.len();
                    jm.buckets.push(Bucket { index: i, role_counts: vec![0; roles], ..Default::default() });
                    if let Some(n) = task.node {
                        node_bucket.insert(n, i);
                    }
                    i
                }
            };
            let bucket = &mut jm.buckets[index];
            bucket.role_counts[r] += 1;
            match task.node {
                Some(n) => bucket.add_on_node(n),
                None => {
                    bucket.pending.push(t);
                    bucket.request.add(&task.resreq);
                    bucket.req_score += req_score(&task.resreq);
                    slots[t.idx()].pending = true;
                }
            }
            slots[t.idx()].bucket = index as u32;
            jm.max_size = jm.max_size.max(bucket.pending.len() as u32 + bucket.bound);
        }
        for b in &mut jm.buckets {
            b.pending.sort_by(|&x, &y| pending_order(snap, x, y));
        }
        jm
    }

    /// A task of the job got a node (allocated, pipelined, or its eviction undone).
    pub(crate) fn placed(&mut self, snap: &Snapshot, t: TaskId, n: NodeId, slot: &mut TaskSlot) {
        let roles = self.relations.roles.len();
        if slot.role != NO_ROLE {
            self.node_roles.entry(n).or_insert_with(|| vec![0; roles])[slot.role as usize] += 1;
        }
        if slot.bucket != NO_BUCKET {
            let bucket = &mut self.buckets[slot.bucket as usize];
            bucket.add_on_node(n);
            if slot.pending {
                if let Some(p) = bucket.pending.iter().position(|x| *x == t) {
                    bucket.pending.remove(p);
                }
                let req = &snap.task(t).resreq;
                bucket.request.sub_unchecked(req);
                bucket.req_score -= req_score(req);
                slot.pending = false;
            }
        }
        slot.node = Some(n);
    }

    /// A task of the job left node `n` (evicted, or its placement undone: then it is
    /// pending again and returns to its bucket's pending tasks).
    pub(crate) fn removed(&mut self, snap: &Snapshot, t: TaskId, n: NodeId, slot: &mut TaskSlot) {
        if slot.role != NO_ROLE {
            if let Some(counts) = self.node_roles.get_mut(&n) {
                let c = &mut counts[slot.role as usize];
                *c = c.saturating_sub(1);
            }
        }
        if slot.bucket != NO_BUCKET {
            let bucket = &mut self.buckets[slot.bucket as usize];
            bucket.remove_from_node(n);
            let task = snap.task(t);
            if task.status == TaskStatus::Pending && !slot.pending {
                let p = bucket.pending.partition_point(|&x| pending_order(snap, x, t) == Ordering::Less);
                bucket.pending.insert(p, t);
                bucket.request.add(&task.resreq);
                bucket.req_score += req_score(&task.resreq);
                slot.pending = true;
            }
        }
        slot.node = None;
    }
}
