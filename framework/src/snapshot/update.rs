//! Bringing a built snapshot up to date in place, in time proportional to what changed.
//!
//! A scheduler that keeps its snapshot between cycles ([`Snapshot::build`] once, then
//! [`Snapshot::update`] with the objects that changed) pays for the changes, not for the
//! cluster. An update applies only changes that leave every id where a fresh build would
//! put it — objects that changed but neither appeared nor disappeared, pods that kept their
//! job and their shape, nodes that stayed Ready, PodGroups that kept their queue — and then
//! gives exactly the snapshot a fresh build of the same objects gives (same tasks, jobs,
//! nodes and queues, same ids and orders, same sums: quantities are whole numbers of
//! millicores, bytes or units, so adding and subtracting is exact). Anything else (an
//! object added or removed, a pod moved to another job or shape, a priority class
//! changed) answers "rebuild", and the caller builds from scratch.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use volcano_api::crd::{PodGroup, Queue};

use super::build::{
    job_info, job_priority, node_info, node_ready, queue_info, same_shape, GroupCache, PodContext, SnapshotError,
};
use super::Snapshot;
use crate::model::*;

/// The objects that changed since a snapshot was built or last updated, by key
/// (`namespace/name`, or the name of a cluster-scoped object): the object now, or `None`
/// when it is gone. Nodes that the scheduler does not consider (a node selector leaves
/// them out) count as gone.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    /// Pods.
    pub pods: Vec<(String, Option<Arc<Pod>>)>,
    /// PodGroups.
    pub pod_groups: Vec<(String, Option<Arc<PodGroup>>)>,
    /// Nodes.
    pub nodes: Vec<(String, Option<Arc<Node>>)>,
    /// Queues.
    pub queues: Vec<(String, Option<Arc<Queue>>)>,
}

impl Changes {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.pod_groups.is_empty() && self.nodes.is_empty() && self.queues.is_empty()
    }
}

impl Snapshot {
    /// The task of the pod with this key (tasks are in key order).
    pub fn task_id(&self, key: &str) -> Option<TaskId> {
        let (mut lo, mut hi) = (0usize, self.tasks.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match (*self.tasks[mid].key).cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(TaskId(mid as u32)),
            }
        }
        None
    }

    /// Applies `changes` in place when the result is exactly what [`Snapshot::build`] gives
    /// for the changed objects (see the module documentation); returns `Ok(false)`, with
    /// `self` in an unspecified state, when it is not, and the caller must build from
    /// scratch. `priority_classes` and `scheduler_names` must be those of the build.
    pub fn update(
        &mut self,
        changes: &Changes,
        priority_classes: &[Arc<PriorityClass>],
        scheduler_names: &[&str],
    ) -> Result<bool, SnapshotError> {
        let priority_of: HashMap<&str, i32> =
            priority_classes.iter().filter_map(|pc| pc.metadata.name.as_deref().map(|n| (n, pc.value))).collect();
        let global_default =
            priority_classes.iter().filter(|pc| pc.global_default == Some(true)).map(|pc| pc.value).max();

        for (name, queue) in &changes.queues {
            let (Some(id), Some(queue)) = (self.queue_id(name), queue) else { return Ok(false) };
            let info = queue_info(queue)?;
            if info.name != *name {
                return Ok(false);
            }
            self.queues[id.idx()] = info;
        }

        for (key, pg) in &changes.pod_groups {
            let Some(j) = self.job_id(key) else { return Ok(false) };
            let Some(pg) = pg else { return Ok(false) };
            let queue_name =
                pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(volcano_api::names::DEFAULT_QUEUE);
            let old = &self.jobs[j.idx()];
            if self.queue_id(queue_name) != Some(old.queue) {
                return Ok(false);
            }
            let mut job = job_info(pg, key.clone(), old.queue, job_priority(pg, &priority_of, global_default))?;
            let old = &mut self.jobs[j.idx()];
            job.tasks = std::mem::take(&mut old.tasks);
            job.status_counts = old.status_counts;
            job.pending_best_effort = old.pending_best_effort;
            job.gated_tasks = old.gated_tasks;
            job.allocated = old.allocated.clone();
            job.total_request = old.total_request.clone();
            *old = job;
        }

        let mut touched: BTreeSet<NodeId> = BTreeSet::new();
        for (name, node) in &changes.nodes {
            let ready = node.as_ref().filter(|n| node_ready(n));
            let Some(n) = self.node_id(name) else {
                if ready.is_none() {
                    continue; // not in the snapshot before, not now
                }
                return Ok(false);
            };
            let Some(node) = ready else { return Ok(false) };
            let info = node_info(node)?;
            let old = &mut self.nodes[n.idx()];
            let tasks = std::mem::take(&mut old.tasks);
            self.total_resource.sub_unchecked(&old.allocatable);
            self.total_resource.add(&info.allocatable);
            self.tainted_nodes = self.tainted_nodes - u32::from(old.has_taints) + u32::from(info.has_taints);
            *old = info;
            for &t in tasks.iter() {
                self.node_add_task(n, t);
            }
            touched.insert(n);
        }

        let cx = PodContext {
            scheduler_names,
            job_by_key: &self.job_by_key.clone(),
            node_by_name: &self.node_by_name.clone(),
            priority_of,
        };
        for (key, pod) in &changes.pods {
            let old = self.task_id(key);
            let new = match pod {
                Some(p) => cx.task(Arc::from(key.as_str()), p, &mut GroupCache::default())?,
                None => None,
            };
            let (t, (mut task, node)) = match (old, new) {
                (None, None) => continue,
                (Some(t), Some(new)) => (t, new),
                _ => return Ok(false),
            };
            let old = &self.tasks[t.idx()];
            if old.job != task.job || !same_shape(old, &task) {
                return Ok(false);
            }
            task.shape = old.shape;
            // Out with the old task…
            if let Some(n) = old.node {
                self.node_remove_task(n, t);
                touched.insert(n);
            }
            let old = &self.tasks[t.idx()];
            self.status_counts[old.status as usize] -= 1;
            if let Some(j) = old.job {
                let job = &mut self.jobs[j.idx()];
                Self::count_in(job, old, -1);
                job.gated_tasks -= u32::from(old.sch_gated);
            }
            // …in with the new, as the build attaches it.
            let status = task.status;
            self.status_counts[status as usize] += 1;
            self.tasks[t.idx()] = task;
            let task = &self.tasks[t.idx()];
            if let Some(j) = task.job {
                let job = &mut self.jobs[j.idx()];
                Self::count_in(job, task, 1);
                job.gated_tasks += u32::from(task.sch_gated);
            }
            if let Some(n) = node {
                if !status.is_completed() {
                    self.tasks[t.idx()].node = Some(n);
                    self.node_add_task(n, t);
                    touched.insert(n);
                }
            }
        }
        // A build lists a node's tasks in id order.
        for n in touched {
            Arc::make_mut(&mut self.nodes[n.idx()].tasks).sort_unstable();
        }
        self.share();
        Ok(true)
    }
}
