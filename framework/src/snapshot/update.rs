//! Bringing a built snapshot up to date in place, in time proportional to what changed.
//!
//! A scheduler that keeps its snapshot between cycles ([`Snapshot::build`] once, then
//! [`Snapshot::update`] with the objects that changed) pays for the changes, not for the
//! cluster. An update gives the snapshot a fresh build of the same objects gives, up to the
//! numbering: the same tasks, jobs, nodes and queues with the same contents and sums
//! (quantities are whole numbers of millicores, bytes or units, so adding and subtracting
//! is exact), the same partition of tasks into shapes, a job's tasks in key order, but
//! tasks and jobs that came or went renumbered: a new pod or PodGroup takes the next id, a
//! deleted one's id goes to the last task or job. Nothing in a session depends on the
//! numbering (every ordering ends on names or uids), which `tests/tests/invariants.rs`
//! checks by running the same cycle on both.
//!
//! Pods and PodGroups may appear, disappear, change job, shape, status or node; PodGroups
//! may change queue. Nodes and queues may change in place; a node or queue that appears or
//! disappears (or a node that stops or starts being Ready), a priority class change, or a
//! shape count grown past twice the build's answers "rebuild", and the caller builds from
//! scratch.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::core::v1::{ContainerImage, Node};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use volcano_api::crd::{PodGroup, Queue};

use super::build::{
    job_info, job_priority, node_info, node_ready, queue_info, reports_images, same_shape, GroupCache, PodContext,
    PodTask, SnapshotError,
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
    /// The task of the pod with this key.
    pub fn task_id(&self, key: &str) -> Option<TaskId> {
        self.task_by_key.get(key).copied()
    }

    /// Applies `changes` in place (see the module documentation); returns `Ok(false)`, with
    /// `self` in an unspecified state, when the changes need a rebuild, and the caller must
    /// build from scratch. `priority_classes` and `scheduler_names` must be those of the build.
    pub fn update(
        &mut self,
        changes: &Changes,
        priority_classes: &[Arc<PriorityClass>],
        scheduler_names: &[&str],
    ) -> Result<bool, SnapshotError> {
        // Traces are a session's (none on a kept snapshot); none outlive a renumbering.
        self.traces = Default::default();
        let priority_of: HashMap<&str, i32> =
            priority_classes.iter().filter_map(|pc| pc.metadata.name.as_deref().map(|n| (n, pc.value))).collect();
        let global_default =
            priority_classes.iter().filter(|pc| pc.global_default == Some(true)).map(|pc| pc.value).max();
        // Whether something a session reads changed (a new revision at the end), and
        // whether some task could have room it did not have (a new growth).
        let mut relevant = false;
        let mut grew = false;

        for (name, queue) in &changes.queues {
            let (Some(id), Some(queue)) = (self.queue_id(name), queue) else { return Ok(false) };
            let info = queue_info(queue)?;
            if info.name != *name {
                return Ok(false);
            }
            relevant |= !same_queue(&self.queues[id.idx()].queue, queue);
            self.queues[id.idx()] = info;
        }

        let mut touched: BTreeSet<NodeId> = BTreeSet::new();
        let mut labels_changed = false;
        let mut nodes_changed = false;
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
            let node_changed = !same_node(&old.node, node);
            relevant |= node_changed;
            grew |= node_changed;
            nodes_changed |= node_changed;
            let tasks = std::mem::take(&mut old.tasks);
            self.total_resource.sub_unchecked(&old.allocatable);
            self.total_resource.add(&info.allocatable);
            self.tainted_nodes = self.tainted_nodes - u32::from(old.has_taints) + u32::from(info.has_taints);
            self.imaged_nodes =
                self.imaged_nodes - u32::from(reports_images(&old.node)) + u32::from(reports_images(&info.node));
            labels_changed |= old.node.metadata.labels != info.node.metadata.labels;
            *old = info;
            for &t in tasks.iter() {
                self.node_add_task(n, t);
            }
            touched.insert(n);
        }
        if nodes_changed {
            self.nodes_changed();
        }
        // HyperNodes may choose nodes by their labels.
        if labels_changed && !self.extras.hyper_nodes.is_empty() {
            self.refresh_topology();
        }

        // PodGroups: changed in place, added at the end, or removed (after their tasks have
        // left them). The pods whose job may change as a result are looked at again below,
        // as they are; the pods that changed come after them and win.
        let mut pods: BTreeMap<Arc<str>, Option<Arc<Pod>>> = BTreeMap::new();
        let mut removed_jobs: Vec<JobId> = Vec::new();
        let mut added_jobs: Vec<Arc<str>> = Vec::new();
        for (key, pg) in &changes.pod_groups {
            let queue = pg.as_ref().and_then(|pg| {
                let name =
                    pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(volcano_api::names::DEFAULT_QUEUE);
                self.queue_id(name).map(|q| (pg, q))
            });
            match (pg, &queue) {
                (Some(pg), None) => {
                    let group = super::QueuelessGroup {
                        pod_group: Arc::clone(pg),
                        priority: job_priority(pg, &priority_of, global_default),
                    };
                    Arc::make_mut(&mut self.queueless).insert(key.as_str().into(), group);
                }
                _ if self.queueless.contains_key(key.as_str()) => {
                    Arc::make_mut(&mut self.queueless).remove(key.as_str());
                }
                _ => {}
            }
            let old = self.job_id(key);
            let same = match (old, pg) {
                (Some(j), Some(pg)) => same_pod_group(&self.jobs[j.idx()].pod_group, pg),
                (None, None) => true,
                _ => false,
            };
            relevant |= !same;
            // The job's version follows what its placement reads: its phase (enqueue's
            // Inqueue, close's Running) says whether it is tried, not how it fits.
            let same_spec = match (old, pg) {
                (Some(j), Some(pg)) => {
                    let old = &self.jobs[j.idx()].pod_group;
                    same_meta(&old.metadata, &pg.metadata) && old.spec == pg.spec
                }
                _ => same,
            };
            match (old, queue) {
                (None, None) => {}
                (Some(j), Some((pg, q))) if self.jobs[j.idx()].queue == q => {
                    // The job keeps its key (shared with what refers to it).
                    let key = self.jobs[j.idx()].key.clone();
                    let mut job = job_info(pg, key, q, job_priority(pg, &priority_of, global_default))?;
                    let old = &mut self.jobs[j.idx()];
                    if same_spec {
                        job.version = old.version;
                    }
                    job.tasks = std::mem::take(&mut old.tasks);
                    job.status_counts = old.status_counts;
                    job.pending_best_effort = old.pending_best_effort;
                    job.gated_tasks = old.gated_tasks;
                    job.allocated = old.allocated.clone();
                    job.total_request = old.total_request.clone();
                    let regroup = old.pod_group.spec.sub_group_policy != pg.spec.sub_group_policy;
                    if !regroup {
                        job.sub_groups = old.sub_groups.take();
                    }
                    *old = job;
                    if regroup {
                        self.regroup_job(j);
                    }
                }
                (old, new) => {
                    if let Some(j) = old {
                        Arc::make_mut(&mut self.job_by_key).remove(key.as_str());
                        removed_jobs.push(j);
                        for &t in &self.jobs[j.idx()].tasks {
                            let task = &self.tasks[t.idx()];
                            pods.insert(task.key.clone(), Some(task.pod.clone()));
                        }
                    }
                    if let Some((pg, q)) = new {
                        let id = JobId(self.jobs.len() as u32);
                        let key: Arc<str> = key.as_str().into();
                        self.jobs.push(job_info(pg, key.clone(), q, job_priority(pg, &priority_of, global_default))?);
                        Arc::make_mut(&mut self.job_by_key).insert(key.clone(), id);
                        added_jobs.push(key);
                    }
                }
            }
        }
        if !added_jobs.is_empty() && !self.awaiting_group.is_empty() {
            let added: BTreeSet<&str> = added_jobs.iter().map(|k| &**k).collect();
            for (key, pod) in self.awaiting_group.iter() {
                if super::group_key(pod).is_some_and(|g| added.contains(g.as_str())) {
                    pods.insert(key.clone(), Some(pod.clone()));
                }
            }
        }
        for (key, pod) in &changes.pods {
            pods.insert(Arc::from(key.as_str()), pod.clone());
        }

        let cx = PodContext {
            scheduler_names,
            job_by_key: &self.job_by_key.clone(),
            node_by_name: &self.node_by_name.clone(),
            priority_of,
        };
        let mut removed_tasks: Vec<TaskId> = Vec::new();
        for (key, pod) in pods {
            let old = self.task_id(&key);
            // A pod that keeps its task keeps its key (shared with what refers to it).
            let key = old.map_or(key, |t| self.tasks[t.idx()].key.clone());
            let changed = match (old, &pod) {
                (Some(t), Some(p)) => !same_pod(&self.tasks[t.idx()].pod, p),
                (Some(_), None) => true,
                // A pod the snapshot has no task for matters once it has one (below).
                (None, _) => false,
            };
            relevant |= changed;
            let new = match &pod {
                Some(p) => cx.task(key.clone(), p, &mut GroupCache::default())?,
                None => PodTask { task: None, awaiting: None },
            };
            if let Some(t) = old.filter(|_| changed) {
                let task = &self.tasks[t.idx()];
                grew |= frees_room(task, new.task.as_ref().map(|(task, node)| (task, *node)));
                if let Some(j) = task.job {
                    self.jobs[j.idx()].version = JobVersion(super::next_revision());
                }
            }
            if let Some(j) = new.task.as_ref().filter(|_| changed || old.is_none()).and_then(|(task, _)| task.job) {
                self.jobs[j.idx()].version = JobVersion(super::next_revision());
            }
            match new.awaiting {
                Some((key, pod)) => {
                    Arc::make_mut(&mut self.awaiting_group).insert(key, pod);
                }
                None if self.awaiting_group.contains_key(&key) => {
                    Arc::make_mut(&mut self.awaiting_group).remove(&key);
                }
                None => {}
            }
            match (old, new.task) {
                (None, None) => {}
                (Some(t), None) => {
                    self.detach_task(t, &mut touched, true);
                    removed_tasks.push(t);
                }
                (None, Some((task, node))) => {
                    relevant = true;
                    let t = TaskId(self.tasks.len() as u32);
                    Arc::make_mut(&mut self.task_by_key).insert(key, t);
                    self.tasks.push(task);
                    self.attach_task(t, node, &mut touched, true);
                }
                (Some(t), Some((mut task, node))) => {
                    // The common case (a bind, a status change): same job, same shape; the
                    // task keeps its place in its job and its shape.
                    let old = &self.tasks[t.idx()];
                    // A pod of a job with sub-groups whose labels changed may change
                    // sub-group: it joins its job again.
                    let same_group = old.job.is_none_or(|j| self.jobs[j.idx()].sub_groups.is_none())
                        || old.pod.metadata.labels == task.pod.metadata.labels;
                    let same = old.job == task.job && same_shape(old, &task) && same_group;
                    if same {
                        task.shape = old.shape;
                        task.sub_group = old.sub_group;
                    }
                    self.detach_task(t, &mut touched, !same);
                    self.tasks[t.idx()] = task;
                    self.attach_task(t, node, &mut touched, !same);
                }
            }
            if self.shapes > 2 * self.shape_index.built + 1024 {
                return Ok(false); // shapes of tasks long gone pile up: start afresh
            }
        }

        // Removed tasks and jobs give their ids to the last ones, highest id first (so that
        // the last one is never one still to remove).
        removed_tasks.sort_unstable();
        for &t in removed_tasks.iter().rev() {
            self.remove_task(t, &mut touched);
        }
        removed_jobs.sort_unstable();
        for &j in removed_jobs.iter().rev() {
            self.remove_job(j);
        }
        // A build lists a node's tasks in key order (its task ids are in key order).
        for n in touched {
            let tasks = &self.tasks;
            Arc::make_mut(&mut self.nodes[n.idx()].tasks)
                .sort_unstable_by(|a, b| tasks[a.idx()].key.cmp(&tasks[b.idx()].key));
        }
        self.share();
        if grew {
            self.changed();
        } else if relevant {
            self.changed_without_growth();
        } else if !changes.is_empty() {
            self.touched();
        }
        Ok(true)
    }

    /// Takes a task out of its node and the counts (it stays in `tasks`), and, with
    /// `membership`, out of its job's task list and total request.
    fn detach_task(&mut self, t: TaskId, touched: &mut BTreeSet<NodeId>, membership: bool) {
        let task = &self.tasks[t.idx()];
        if let Some(n) = task.node {
            self.node_remove_task(n, t);
            touched.insert(n);
        }
        let task = &self.tasks[t.idx()];
        self.status_counts[task.status as usize] -= 1;
        if let Some(j) = task.job {
            let job = &mut self.jobs[j.idx()];
            Self::count_in(job, task, -1);
            job.gated_tasks -= u32::from(task.sch_gated);
            if membership {
                job.total_request.sub_unchecked(&task.resreq);
                if let Some(pos) = job.tasks.iter().position(|&x| x == t) {
                    job.tasks.remove(pos);
                }
                if let Some(sg) = job.sub_groups.as_deref_mut() {
                    sg.leave(task.sub_group);
                }
            }
        }
        let task = &mut self.tasks[t.idx()];
        task.node = None;
        if membership {
            task.job = None;
            task.sub_group = None;
        }
    }

    /// Attaches the task at `t` to its node and the counts as a build does, and, with
    /// `membership`, gives it its shape and a place (in key order) in its job's task list
    /// and total request.
    fn attach_task(&mut self, t: TaskId, node: Option<NodeId>, touched: &mut BTreeSet<NodeId>, membership: bool) {
        if membership {
            let shape = Arc::make_mut(&mut self.shape_index).shape_of(&self.tasks[t.idx()], &mut self.shapes);
            self.tasks[t.idx()].shape = shape;
        }
        let task = &mut self.tasks[t.idx()];
        task.node = None;
        let (job, status) = (task.job, task.status);
        self.status_counts[status as usize] += 1;
        if let Some(j) = job {
            let task = &self.tasks[t.idx()];
            if membership {
                let tasks = &self.tasks;
                let pos = self.jobs[j.idx()].tasks.partition_point(|&x| tasks[x.idx()].key < task.key);
                let job = &mut self.jobs[j.idx()];
                job.tasks.insert(pos, t);
                job.total_request.add(&task.resreq);
                if let Some(sg) = job.sub_groups.as_deref_mut() {
                    let g = sg.join(task.pod.metadata.labels.as_ref());
                    self.tasks[t.idx()].sub_group = g;
                }
            }
            let task = &self.tasks[t.idx()];
            let job = &mut self.jobs[j.idx()];
            job.gated_tasks += u32::from(task.sch_gated);
            Self::count_in(job, task, 1);
        }
        if let Some(n) = node.filter(|_| !status.is_completed()) {
            self.tasks[t.idx()].node = Some(n);
            self.node_add_task(n, t);
            touched.insert(n);
        }
    }

    /// Removes a detached task; the last task takes its id.
    fn remove_task(&mut self, t: TaskId, touched: &mut BTreeSet<NodeId>) {
        let gone = self.tasks.swap_remove(t.idx());
        let by_key = Arc::make_mut(&mut self.task_by_key);
        by_key.remove(&gone.key);
        let last = TaskId(self.tasks.len() as u32);
        if t == last {
            return;
        }
        let moved = &self.tasks[t.idx()];
        by_key.insert(moved.key.clone(), t);
        if let Some(j) = moved.job {
            // Its job's remembered fit errors name the task by its old id.
            self.jobs[j.idx()].version = JobVersion(super::next_revision());
            for x in self.jobs[j.idx()].tasks.iter_mut().filter(|x| **x == last) {
                *x = t;
            }
        }
        if let Some(n) = moved.node {
            for x in Arc::make_mut(&mut self.nodes[n.idx()].tasks).iter_mut().filter(|x| **x == last) {
                *x = t;
            }
            touched.insert(n);
        }
    }

    /// Removes a job that has no task left; the last job takes its id.
    fn remove_job(&mut self, j: JobId) {
        debug_assert!(self.jobs[j.idx()].tasks.is_empty(), "a removed job's tasks left it first");
        self.jobs.swap_remove(j.idx());
        let last = JobId(self.jobs.len() as u32);
        if j == last {
            return;
        }
        let moved = &self.jobs[j.idx()];
        Arc::make_mut(&mut self.job_by_key).insert(moved.key.clone(), j);
        for &t in &moved.tasks.clone() {
            self.tasks[t.idx()].job = Some(j);
        }
    }
}

/// Whether a pod's task `old`, now `new` (with its node; `None` when the pod is gone or no
/// longer a task), could leave room on a node that it held: it held room (it has a node and
/// has not finished) and it no longer holds the same (it left or changed node, finished,
/// changed its request, or started releasing, which counts as room for pipelining).
fn frees_room(old: &TaskInfo, new: Option<(&TaskInfo, Option<NodeId>)>) -> bool {
    let Some(node) = old.node.filter(|_| !old.status.is_completed()) else { return false };
    let Some((new, new_node)) = new else { return true };
    let releasing = |s: TaskStatus| s == TaskStatus::Releasing;
    new_node != Some(node)
        || new.status.is_completed()
        || new.resreq != old.resreq
        || (releasing(new.status) && !releasing(old.status))
}

/// Whether two versions of an object's metadata are the same for scheduling: the same
/// object (name, namespace, uid, creation), labels, annotations, owners and deletion. The
/// resource version, managed fields and finalizers are not read.
fn same_meta(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.name == b.name
        && a.namespace == b.namespace
        && a.uid == b.uid
        && a.creation_timestamp == b.creation_timestamp
        && a.deletion_timestamp == b.deletion_timestamp
        && a.labels == b.labels
        && a.annotations == b.annotations
        && a.owner_references == b.owner_references
}

/// Whether a pod changed only in what scheduling does not read: of its status, a session
/// reads the phase and the nominated node (the conditions the scheduler writes, container
/// statuses, IPs and times are not read).
fn same_pod(a: &Pod, b: &Pod) -> bool {
    fn read(p: &Pod) -> (Option<&str>, Option<&str>) {
        let status = p.status.as_ref();
        (status.and_then(|s| s.phase.as_deref()), status.and_then(|s| s.nominated_node_name.as_deref()))
    }
    same_meta(&a.metadata, &b.metadata) && a.node_name() == b.node_name() && a.spec == b.spec && read(a) == read(b)
}

/// Whether a PodGroup changed only in what scheduling does not read: of its status, a
/// session reads the phase (not the conditions or the counts of pods).
fn same_pod_group(a: &PodGroup, b: &PodGroup) -> bool {
    let phase = |pg: &PodGroup| pg.status.as_ref().and_then(|s| s.phase);
    same_meta(&a.metadata, &b.metadata) && a.spec == b.spec && phase(a) == phase(b)
}

/// Whether a node changed only in what scheduling does not read: of its status, a session
/// reads the capacity, the allocatable resources and the images (not the heartbeats and
/// conditions: a node that stops being Ready leaves the snapshot, which is rebuilt).
fn same_node(a: &Node, b: &Node) -> bool {
    type Read<'a> = Option<(&'a Option<BTreeMap<String, Quantity>>, &'a Option<BTreeMap<String, Quantity>>)>;
    fn read(n: &Node) -> (Read<'_>, Option<&Vec<ContainerImage>>) {
        let status = n.status.as_ref();
        (status.map(|s| (&s.capacity, &s.allocatable)), status.and_then(|s| s.images.as_ref()))
    }
    same_meta(&a.metadata, &b.metadata) && a.spec == b.spec && read(a) == read(b)
}

/// Whether a queue changed only in what scheduling does not read: of its status, a session
/// reads the state (not the counts and allocations the scheduler writes).
fn same_queue(a: &Queue, b: &Queue) -> bool {
    let state = |q: &Queue| q.status.as_ref().and_then(|s| s.state);
    same_meta(&a.metadata, &b.metadata) && a.spec == b.spec && state(a) == state(b)
}
