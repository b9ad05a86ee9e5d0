//! The session snapshot: the model's state (tasks, jobs, nodes and queues indexed by dense
//! ids, in copy-on-write storage) and the bookkeeping that keeps job counters and node
//! accounting consistent when a task changes status or node. [`build`] converts Kubernetes
//! objects into it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use volcano_api::crd::PodGroup;

use crate::cow::CowVec;
use crate::model::*;
use crate::resource::Resource;
use crate::retry::RetryMemo;
use crate::status::FitErrors;
use crate::topology::Topology;

pub mod build;
pub mod derived;
pub mod extra;
pub mod keep;
pub mod update;

pub use build::{
    parse_duration_ms, pod_request, pod_requests, ClusterObjects, PodRequests, SnapshotError, DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
};
pub use derived::NodeDerived;
pub use extra::Extras;
pub use keep::{KeptSnapshot, SnapshotSource};
pub use update::Changes;

/// The state a session works on: every task, job, node and queue, by index.
///
/// Tasks, jobs and nodes live in copy-on-write chunks ([`CowVec`]) and the name indexes
/// are shared: a clone of a built snapshot (what a scheduler does at the start of every
/// cycle with the snapshot it keeps) copies no task, job or node, and a session copies only
/// the chunks it changes. Call [`Snapshot::share`] after changing a kept snapshot so that
/// its next clones are cheap again ([`Snapshot::build`] returns a shared snapshot).
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Tasks (pods that are pending for this scheduler or occupy a node).
    pub tasks: CowVec<TaskInfo>,
    /// Jobs (PodGroups whose queue exists).
    pub jobs: CowVec<JobInfo>,
    /// Ready nodes, sorted by name.
    pub nodes: CowVec<NodeInfo>,
    /// Queues, sorted by name.
    pub queues: Vec<QueueInfo>,
    /// Σ allocatable of the snapshot's nodes.
    pub total_resource: Resource,
    /// Number of distinct [`TaskInfo::shape`]s.
    shapes: u32,
    /// Number of tasks per status (kept by [`Snapshot::set_task_status`]).
    status_counts: [u32; TaskStatus::COUNT],
    /// Number of nodes with taints.
    tainted_nodes: u32,
    /// Number of nodes whose object reports container images (`status.images`).
    imaged_nodes: u32,
    node_by_name: Arc<HashMap<String, NodeId>>,
    queue_by_name: Arc<HashMap<String, QueueId>>,
    job_by_key: Arc<HashMap<Arc<str>, JobId>>,
    /// The task of each pod.
    task_by_key: Arc<HashMap<Arc<str>, TaskId>>,
    /// A task of each shape, for the tasks that [`Snapshot::update`] adds.
    shape_index: Arc<build::ShapeIndex>,
    /// The pods of this scheduler that name a PodGroup the snapshot lacks, by key.
    awaiting_group: Arc<BTreeMap<Arc<str>, Arc<Pod>>>,
    /// The PodGroups whose queue does not exist, by key (not jobs of the snapshot).
    queueless: Arc<BTreeMap<Arc<str>, QueuelessGroup>>,
    /// Objects read but not scheduled (namespaces).
    extras: Arc<Extras>,
    /// The HyperNode tree over the nodes, from [`Extras::hyper_nodes`].
    topology: Arc<Topology>,
    /// Changes with anything scheduling reads ([`Snapshot::revision`]).
    revision: u64,
    /// Changes with any change at all, read by scheduling or not ([`Snapshot::state`]).
    state: u64,
    /// Changes with any change that could give a task room it did not have
    /// ([`Snapshot::growth`]).
    growth: u64,
    /// The failed attempts of the last session over this revision.
    retries: Option<Arc<RetryMemo>>,
    /// [`crate::SessionOptions::card_seed`] of the session working on it.
    pub(crate) card_seed: Option<u64>,
    /// What plugins derived from the nodes alone ([`Snapshot::node_derived`]).
    node_derived: Arc<NodeDerived>,
    /// What a session's attempts left on its jobs and tasks.
    traces: Traces,
}

/// What a session's attempts left on its jobs and tasks (fit errors, job-level reasons, the
/// last placement undone), beside them rather than in them: a session writes it for every
/// job it tries or skips, and a write here copies no shared chunk of jobs or tasks. Empty
/// outside sessions (a kept snapshot is never written; [`Snapshot::update`] clears it), and
/// sized on the first write.
#[derive(Clone, Debug, Default)]
struct Traces {
    /// By job; `None` for nothing recorded.
    jobs: Vec<Option<Arc<JobTrace>>>,
    /// The last placement of the session that was undone (status and node), by task, for
    /// "could be assigned to … once minAvailable is satisfied" reasons.
    last_tx: Vec<Option<(TaskStatus, NodeId)>>,
}

/// A PodGroup whose queue does not exist ([`Snapshot::queueless_pod_groups`]).
#[derive(Clone, Debug)]
pub struct QueuelessGroup {
    /// The PodGroup.
    pub pod_group: Arc<PodGroup>,
    /// Its priority, as a job's would be.
    pub priority: i32,
}

impl QueuelessGroup {
    /// The queue it names (`spec.queue`, the default queue when empty).
    pub fn queue(&self) -> &str {
        self.pod_group.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(volcano_api::names::DEFAULT_QUEUE)
    }

    /// Why nothing of it is scheduled: the message of its condition, event and pods.
    pub fn message(&self) -> String {
        format!(
            "queue {} does not exist: no pod of this PodGroup is scheduled until the queue is created again \
             or spec.queue names a queue that exists",
            self.queue()
        )
    }

    /// Whether `pod` is one of its pods (names it in its group annotation, same namespace).
    pub fn has_pod(&self, pod: &Pod) -> bool {
        let group = pod.metadata.annotations.as_ref().and_then(|a| a.get(volcano_api::crd::GROUP_NAME_ANNOTATION));
        group.is_some_and(|g| Some(g) == self.pod_group.metadata.name.as_ref())
            && pod.metadata.namespace == self.pod_group.metadata.namespace
    }
}

/// The `namespace/name` of the PodGroup a pod names in its group annotation.
pub fn group_key(pod: &Pod) -> Option<String> {
    let group = pod.metadata.annotations.as_ref()?.get(volcano_api::crd::GROUP_NAME_ANNOTATION)?;
    Some(format!("{}/{group}", pod.metadata.namespace.as_deref().unwrap_or_default()))
}

/// The next snapshot revision: unique in the process, so that a revision names one state
/// of one kept snapshot.
pub(crate) fn next_revision() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Snapshot {
    /// Marks the tasks, jobs and nodes shared so that clones copy none of them (see
    /// [`CowVec::share`]); [`Snapshot::build`] returns a shared snapshot.
    pub fn share(&mut self) {
        self.tasks.share();
        self.jobs.share();
        self.nodes.share();
    }

    /// Number of tasks with this status.
    pub fn status_count(&self, status: TaskStatus) -> u32 {
        self.status_counts[status as usize]
    }

    /// Whether any node has a taint.
    pub fn any_node_tainted(&self) -> bool {
        self.tainted_nodes > 0
    }

    /// Whether any node reports container images (`status.images`), so that image
    /// locality can skip its index on clusters whose nodes report none.
    pub fn any_node_reports_images(&self) -> bool {
        self.imaged_nodes > 0
    }

    /// Whether a pod of the snapshot may have inter-pod rules (pod affinity or
    /// anti-affinity, topology spread constraints): false only when no shape ever had them,
    /// so plugins can skip their inter-pod work without looking at every pod.
    pub fn may_have_pod_rules(&self) -> bool {
        self.shapes == 0 || self.shape_index.pod_rules
    }

    /// What the session's attempts recorded on job `j` (`None`: nothing).
    pub fn job_trace(&self, j: JobId) -> Option<&Arc<JobTrace>> {
        self.traces.jobs.get(j.idx()).and_then(Option::as_ref)
    }

    /// The fit errors recorded on job `j`'s tasks in this session.
    pub fn fit_errors(&self, j: JobId) -> &BTreeMap<TaskId, FitErrors> {
        static EMPTY: BTreeMap<TaskId, FitErrors> = BTreeMap::new();
        self.job_trace(j).map_or(&EMPTY, |t| &t.fit_errors)
    }

    /// The job-level reason recorded on job `j` in this session.
    pub fn job_fit_error(&self, j: JobId) -> Option<&str> {
        self.job_trace(j).and_then(|t| t.job_fit_error.as_deref())
    }

    /// What job `j`'s trace holds, to change (a copy when shared).
    pub fn job_trace_mut(&mut self, j: JobId) -> &mut JobTrace {
        if self.traces.jobs.len() <= j.idx() {
            self.traces.jobs.resize(self.jobs.len().max(j.idx() + 1), None);
        }
        Arc::make_mut(self.traces.jobs[j.idx()].get_or_insert_with(Default::default))
    }

    /// Replaces job `j`'s trace.
    pub fn set_job_trace(&mut self, j: JobId, trace: Option<Arc<JobTrace>>) {
        if trace.is_none() && self.job_trace(j).is_none() {
            return;
        }
        if self.traces.jobs.len() <= j.idx() {
            self.traces.jobs.resize(self.jobs.len().max(j.idx() + 1), None);
        }
        self.traces.jobs[j.idx()] = trace;
    }

    /// Task `t`'s last placement of this session that was undone (status and node).
    pub fn last_tx(&self, t: TaskId) -> Option<(TaskStatus, NodeId)> {
        self.traces.last_tx.get(t.idx()).copied().flatten()
    }

    /// Sets task `t`'s last undone placement.
    pub fn set_last_tx(&mut self, t: TaskId, last: Option<(TaskStatus, NodeId)>) {
        if last.is_none() && self.last_tx(t).is_none() {
            return;
        }
        if self.traces.last_tx.len() <= t.idx() {
            self.traces.last_tx.resize(self.tasks.len().max(t.idx() + 1), None);
        }
        self.traces.last_tx[t.idx()] = last;
    }

    /// The PodGroups whose queue does not exist, by `namespace/name`: they are not jobs of
    /// the snapshot, so nothing of theirs is scheduled; closing a session says why on them
    /// and on their waiting pods.
    pub fn queueless_pod_groups(&self) -> &BTreeMap<Arc<str>, QueuelessGroup> {
        &self.queueless
    }

    /// The pods of this scheduler that name a PodGroup that is not a job of the snapshot
    /// (missing, or its queue missing), by `namespace/name`.
    pub fn pods_awaiting_group(&self) -> &BTreeMap<Arc<str>, Arc<Pod>> {
        &self.awaiting_group
    }

    /// The objects the snapshot reads but does not schedule (namespaces).
    pub fn extras(&self) -> &Extras {
        &self.extras
    }

    /// Replaces the read-only objects (what a cache does when a namespace changes).
    pub fn set_extras(&mut self, extras: Arc<Extras>) {
        let same_hyper_nodes = self.extras.hyper_nodes.len() == extras.hyper_nodes.len()
            && self
                .extras
                .hyper_nodes
                .iter()
                .zip(extras.hyper_nodes.iter())
                .all(|((ka, a), (kb, b))| ka == kb && (Arc::ptr_eq(a, b) || a.spec == b.spec));
        self.extras = extras;
        if !same_hyper_nodes {
            self.refresh_topology();
        }
        self.changed();
    }

    /// The HyperNode tree over the snapshot's nodes ([`crate::topology`]).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The HyperNode tree, shared (to read it while changing the snapshot).
    pub fn topology_shared(&self) -> Arc<Topology> {
        self.topology.clone()
    }

    /// Builds the HyperNode tree again from the extras' HyperNodes and the nodes.
    pub(crate) fn refresh_topology(&mut self) {
        let nodes: Vec<&NodeInfo> = self.nodes.iter().collect();
        let topology = Topology::build(&self.extras.hyper_nodes, &nodes);
        for e in topology.errors() {
            tracing::warn!(error = %e, "HyperNode left out of the topology");
        }
        self.topology = Arc::new(topology);
    }

    /// Names the state of the snapshot in everything scheduling reads: a build gets a new
    /// revision, and so does an [`Snapshot::update`] or [`Snapshot::set_extras`] that changes
    /// what a session could read (unique in the process; a clone has its original's).
    /// Changing the snapshot's public fields directly does not: a shell that keeps a
    /// snapshot changes it through those methods only.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Names the state of the snapshot in every object it holds: like
    /// [`Snapshot::revision`], but an update that changes only what scheduling does not
    /// read (statuses, conditions, resource versions) gives a new one too. A cycle over an
    /// unchanged state may answer as the last one did ([`crate::RetryMemo`]'s settled
    /// outcome).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// Names the snapshot's nodes as far as room goes: a build gets a new growth, and so
    /// does an [`Snapshot::update`] or [`Snapshot::set_extras`] with any change that could
    /// let a task fit where it did not — a pod that left its node, finished or started
    /// releasing, a node that changed in anything scheduling reads, new read-only objects.
    /// Pods that joined nodes (binds), pending pods, PodGroups, queues and writes that
    /// scheduling does not read keep it. While it holds, every node has at most the room
    /// it had, and a remembered failure whose proof rests on room alone still holds
    /// ([`crate::session::retry`]).
    pub fn growth(&self) -> u64 {
        self.growth
    }

    /// What plugins derived from the snapshot's nodes alone (labels, taints, names), kept
    /// with it, its clones and its updates while no node changes in what scheduling reads
    /// ([`NodeDerived`]).
    pub fn node_derived(&self) -> &NodeDerived {
        &self.node_derived
    }

    /// Forgets what was derived from the nodes (a node changed).
    pub(crate) fn nodes_changed(&mut self) {
        self.node_derived = Arc::default();
    }

    /// Gives the snapshot a new revision and growth, and forgets its remembered failures.
    pub(crate) fn changed(&mut self) {
        self.revision = next_revision();
        self.state = self.revision;
        self.growth = self.revision;
        self.retries = None;
    }

    /// Gives the snapshot a new revision, keeping its growth and the remembered failures
    /// that rest on room alone: what changed only took room or did not touch nodes.
    pub(crate) fn changed_without_growth(&mut self) {
        self.revision = next_revision();
        self.state = self.revision;
    }

    /// Gives the snapshot a new state (not a new revision): something scheduling does not
    /// read changed.
    pub(crate) fn touched(&mut self) {
        self.state = next_revision();
    }

    /// Keeps the failed attempts a session over this snapshot remembered
    /// ([`crate::CycleOutcome::retries`]), so that the next session over it skips them
    /// ([`crate::session::retry`]); ignored unless the session opened with this very
    /// revision. An [`Snapshot::update`] that gives no new growth keeps them (for the
    /// failures proven by room alone).
    pub fn keep_retries(&mut self, memo: Option<Arc<RetryMemo>>) {
        if let Some(memo) = memo.filter(|m| m.revision() == self.revision) {
            self.retries = Some(memo);
        }
    }

    /// The remembered failed attempts, if any ([`Snapshot::keep_retries`]).
    pub fn retries(&self) -> Option<&Arc<RetryMemo>> {
        self.retries.as_ref()
    }

    /// Takes the remembered failed attempts out (a session does, when it opens).
    pub(crate) fn take_retries(&mut self) -> Option<Arc<RetryMemo>> {
        self.retries.take()
    }

    /// Number of distinct task shapes (every [`TaskInfo::shape`] is below it).
    pub fn shape_count(&self) -> u32 {
        self.shapes
    }

    /// The node with this name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// The queue with this name.
    pub fn queue_id(&self, name: &str) -> Option<QueueId> {
        self.queue_by_name.get(name).copied()
    }

    /// The job with this `namespace/name`.
    pub fn job_id(&self, key: &str) -> Option<JobId> {
        self.job_by_key.get(key).copied()
    }

    /// The task.
    #[inline]
    pub fn task(&self, t: TaskId) -> &TaskInfo {
        &self.tasks[t.idx()]
    }

    /// The job.
    #[inline]
    pub fn job(&self, j: JobId) -> &JobInfo {
        &self.jobs[j.idx()]
    }

    /// The node.
    #[inline]
    pub fn node(&self, n: NodeId) -> &NodeInfo {
        &self.nodes[n.idx()]
    }

    /// The queue.
    #[inline]
    pub fn queue(&self, q: QueueId) -> &QueueInfo {
        &self.queues[q.idx()]
    }

    /// The queue of a job.
    pub fn job_queue(&self, j: JobId) -> &QueueInfo {
        &self.queues[self.jobs[j.idx()].queue.idx()]
    }

    fn job_attach_task(&mut self, j: JobId, t: TaskId) {
        let job = &mut self.jobs[j.idx()];
        if let Some(sg) = job.sub_groups.as_deref_mut() {
            self.tasks[t.idx()].sub_group = sg.join(self.tasks[t.idx()].pod.metadata.labels.as_ref());
        }
        let task = &self.tasks[t.idx()];
        job.tasks.push(t);
        job.gated_tasks += u32::from(task.sch_gated);
        job.total_request.add(&task.resreq);
        Self::count_in(job, task, 1);
    }

    fn count_in(job: &mut JobInfo, task: &TaskInfo, sign: i32) {
        let c = &mut job.status_counts[task.status as usize];
        *c = (*c as i32 + sign) as u32;
        if task.status.is_allocated() {
            if sign > 0 {
                job.allocated.add(&task.resreq);
            } else {
                job.allocated.sub_unchecked(&task.resreq);
            }
        }
        if task.status == TaskStatus::Pending && task.best_effort {
            job.pending_best_effort = (job.pending_best_effort as i32 + sign) as u32;
        }
        if let Some(sg) = job.sub_groups.as_deref_mut() {
            sg.counts_mut(task.sub_group).count(task, sign);
        }
    }

    /// Gives every task of the job its sub-group again (after its PodGroup's policies
    /// changed), counting their statuses in.
    fn regroup_job(&mut self, j: JobId) {
        for i in 0..self.jobs[j.idx()].tasks.len() {
            let t = self.jobs[j.idx()].tasks[i];
            let task = &self.tasks[t.idx()];
            let g = match self.jobs[j.idx()].sub_groups.as_deref_mut() {
                Some(sg) => {
                    let g = sg.join(task.pod.metadata.labels.as_ref());
                    sg.counts_mut(g).count(task, 1);
                    g
                }
                None => None,
            };
            self.tasks[t.idx()].sub_group = g;
        }
    }

    /// Changes a task's status, keeping its job's counters and allocated resources in step.
    pub fn set_task_status(&mut self, t: TaskId, status: TaskStatus) {
        let task = &mut self.tasks[t.idx()];
        if task.status == status {
            return;
        }
        self.status_counts[task.status as usize] -= 1;
        self.status_counts[status as usize] += 1;
        if let Some(j) = task.job {
            let job = &mut self.jobs[j.idx()];
            Self::count_in(job, task, -1);
            task.status = status;
            Self::count_in(job, task, 1);
        } else {
            task.status = status;
        }
    }

    /// Accounts a task on a node according to its current status (Volcano `AddTask`).
    pub fn node_add_task(&mut self, n: NodeId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let node = &mut self.nodes[n.idx()];
        match task.status {
            TaskStatus::Releasing => {
                node.idle.sub_unchecked(&task.resreq);
                node.used.add(&task.resreq);
                node.releasing.add(&task.resreq);
            }
            TaskStatus::Pipelined => {
                node.pipelined.add(&task.resreq);
            }
            _ => {
                node.idle.sub_unchecked(&task.resreq);
                node.used.add(&task.resreq);
            }
        }
        // Wrapping, as kube-scheduler's int64 sums: only absurd quantities get near the
        // limit, and an add followed by a subtract still gives the value back.
        node.nonzero_cpu = node.nonzero_cpu.wrapping_add(task.nonzero_cpu);
        node.nonzero_memory = node.nonzero_memory.wrapping_add(task.nonzero_memory);
        Arc::make_mut(&mut node.tasks).push(t);
        if task.status != TaskStatus::Pipelined {
            self.take_devices(n, t);
        }
    }

    /// Gives the task cards of the node's GPUs (see [`crate::device`]): the cards it held
    /// when they still fit, the cards its pod's annotation names for a pod on its node,
    /// else the cards [`crate::device::NodeGpus::choose`] picks. A task whose ask does not
    /// fit (a node without cards of its kind, or `deviceshare` not checking) holds none.
    fn take_devices(&mut self, n: NodeId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let (Some(ask), Some(gpus)) = (task.gpu, self.nodes[n.idx()].gpus.as_ref()) else { return };
        let kept = task.devices.as_ref().filter(|c| gpus.fits_on(&ask, c)).cloned();
        let from_pod = || {
            let on_node = task.pod.node_name() == Some(&*self.nodes[n.idx()].name);
            on_node.then(|| gpus.cards_of(&task.pod)).flatten()
        };
        let cards = kept.or_else(from_pod).or_else(|| match self.card_seed {
            None => gpus.choose(&ask),
            Some(seed) => gpus.choose_at_random(&ask, seed, task.uid()),
        });
        let Some(cards) = cards else {
            self.tasks[t.idx()].devices = None;
            return;
        };
        let node = &mut self.nodes[n.idx()];
        Arc::make_mut(node.gpus.as_mut().expect("checked above")).take(&ask, &cards);
        self.tasks[t.idx()].devices = Some(cards);
    }

    /// Reverses [`Snapshot::node_add_task`] for the task's current status.
    pub fn node_remove_task(&mut self, n: NodeId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let node = &mut self.nodes[n.idx()];
        match task.status {
            TaskStatus::Releasing => {
                node.idle.add(&task.resreq);
                node.used.sub_unchecked(&task.resreq);
                node.releasing.sub_unchecked(&task.resreq);
            }
            TaskStatus::Pipelined => {
                node.pipelined.sub_unchecked(&task.resreq);
            }
            _ => {
                node.idle.add(&task.resreq);
                node.used.sub_unchecked(&task.resreq);
            }
        }
        node.nonzero_cpu = node.nonzero_cpu.wrapping_sub(task.nonzero_cpu);
        node.nonzero_memory = node.nonzero_memory.wrapping_sub(task.nonzero_memory);
        if let Some(pos) = node.tasks.iter().rposition(|x| *x == t) {
            Arc::make_mut(&mut node.tasks).swap_remove(pos);
        }
        if let (Some(ask), Some(cards), Some(gpus)) = (task.gpu, task.devices.as_ref(), node.gpus.as_mut()) {
            if task.status != TaskStatus::Pipelined {
                Arc::make_mut(gpus).give_back(&ask, cards);
            }
        }
    }
}
