//! The plugin trait: one typed method per extension point of Volcano's framework.
//!
//! A plugin says which extension points it registers through [`Plugin::hooks`]; the session
//! calls a hook only when it is registered *and* enabled by the plugin's configuration
//! entry, then combines the answers of all plugins with Volcano's tier rules
//! (see [`crate::Session`]). Every hook has a default that abstains.
//!
//! Hooks get the session's [`Snapshot`] read-only; event handlers (`on_allocate`,
//! `on_deallocate`) and `job_enqueued` get `&mut self` to update the plugin's own state.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use bitflags::bitflags;
use smallvec::SmallVec;

use crate::effect::EventType;
use crate::model::{JobId, NodeId, QueueId, TaskId};
use crate::snapshot::Snapshot;
pub use crate::stats::QueueReport;
use crate::status::Status;
use crate::topology::HyperNodeId;

bitflags! {
    /// The extension points a plugin registers.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Hooks: u32 {
        /// [`Plugin::job_order`].
        const JOB_ORDER = 1 << 0;
        /// [`Plugin::queue_order`].
        const QUEUE_ORDER = 1 << 1;
        /// [`Plugin::victim_queue_order`].
        const VICTIM_QUEUE_ORDER = 1 << 2;
        /// [`Plugin::task_order`].
        const TASK_ORDER = 1 << 3;
        /// [`Plugin::pre_predicate`].
        const PRE_PREDICATE = 1 << 4;
        /// [`Plugin::predicate`].
        const PREDICATE = 1 << 5;
        /// [`Plugin::node_order`].
        const NODE_ORDER = 1 << 6;
        /// [`Plugin::batch_node_order`].
        const BATCH_NODE_ORDER = 1 << 7;
        /// [`Plugin::preemptable`].
        const PREEMPTABLE = 1 << 8;
        /// [`Plugin::reclaimable`].
        const RECLAIMABLE = 1 << 9;
        /// [`Plugin::overused`].
        const OVERUSED = 1 << 10;
        /// [`Plugin::allocatable`].
        const ALLOCATABLE = 1 << 11;
        /// [`Plugin::preemptive`].
        const PREEMPTIVE = 1 << 12;
        /// [`Plugin::job_valid`].
        const JOB_VALID = 1 << 13;
        /// [`Plugin::job_ready`].
        const JOB_READY = 1 << 14;
        /// [`Plugin::job_pipelined`].
        const JOB_PIPELINED = 1 << 15;
        /// [`Plugin::job_enqueueable`].
        const JOB_ENQUEUEABLE = 1 << 16;
        /// [`Plugin::job_enqueued`].
        const JOB_ENQUEUED = 1 << 17;
        /// [`Plugin::job_starving`].
        const JOB_STARVING = 1 << 18;
        /// [`Plugin::on_allocate`] and [`Plugin::on_deallocate`].
        const EVENT_HANDLER = 1 << 19;
        /// [`Plugin::choose_devices`].
        const DEVICE_CHOICE = 1 << 20;
        /// [`Plugin::hyper_node_order`].
        const HYPER_NODE_ORDER = 1 << 21;
        /// [`Plugin::evictable`].
        const EVICTABLE = 1 << 22;
        /// [`Plugin::evict_hyper_nodes`] (`enabledHyperNodeGradient`).
        const HYPER_NODE_GRADIENT = 1 << 23;
    }
}

/// Which gang-aware eviction asks a plugin for victims ([`Plugin::evictable`]; Volcano's
/// `EvictionKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionKind {
    /// The `gangpreempt` action: victims in the preemptor's queue.
    GangPreempt,
    /// The `gangreclaim` action: victims in other, reclaimable queues.
    GangReclaim,
}

/// Who asks for victims in a gang-aware eviction, and where (Volcano's `EvictionContext`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvictionContext {
    /// The action.
    pub kind: EvictionKind,
    /// The starving job that needs room.
    pub job: JobId,
    /// Its first pending task in task order, for rules written per pod (Volcano passes no
    /// task to gang-aware eviction; the queue plugins' reclaim rules read one here).
    pub task: TaskId,
    /// The HyperNode the victims are searched in (the virtual top for the whole cluster).
    pub hyper_node: HyperNodeId,
}

/// A plugin's vote on a job (Volcano's Permit / Abstain / Reject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// Yes.
    Permit,
    /// No opinion: the next tier decides.
    Abstain,
    /// No: wins over any Permit.
    Reject,
}

/// A plugin's answer on admitting a job (`Inqueue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Yes.
    Permit,
    /// No opinion: the next tier decides.
    Abstain,
    /// No, and why, for people: the job's condition and the PodGroup event say it. Wins
    /// over any Permit.
    Reject(String),
}

impl Admission {
    /// Whether this is a rejection.
    pub fn is_reject(&self) -> bool {
        matches!(self, Admission::Reject(_))
    }
}

/// What the session tells plugins when it opens.
#[derive(Clone, Debug)]
pub struct SessionContext {
    /// The session's time, milliseconds since the epoch.
    pub now_ms: i64,
    /// Cycle number.
    pub cycle: u64,
    /// Session UID (the `transitionID` of conditions written in this session).
    pub uid: String,
    /// Whether the `enqueue` action is configured (allocate admits Pending jobs otherwise).
    pub enqueue_enabled: bool,
}

/// What plugins may write when the session closes.
#[derive(Debug, Default)]
pub struct CloseOutput {
    /// The gang verdict of each job the plugin judged: the close step derives the
    /// PodGroup's conditions and phase, and its pods' `PodScheduled` conditions, from it.
    pub job_verdicts: Vec<(JobId, JobVerdict)>,
    /// Events on PodGroups: (job, type, reason from [`volcano_api::names::event_reason`],
    /// message).
    pub job_events: Vec<(JobId, EventType, &'static str, String)>,
    /// Deserved resources and share per queue, from the queue policy plugin.
    pub queue_reports: Vec<(QueueId, QueueReport)>,
    /// Per-job facts for the metrics (`drf`'s shares, `gang`'s shortfalls).
    pub job_metrics: Vec<(JobId, JobMetric)>,
    /// Jobs found not ready (`gang`, `volcano_unschedule_job_count`).
    pub unschedulable_jobs: Option<u64>,
}

/// A plugin's per-job fact for the metrics (see [`crate::stats::JobMetrics`]).
#[derive(Clone, Debug, PartialEq)]
pub enum JobMetric {
    /// The job's dominant resource share (`volcano_job_share`).
    Share(f64),
    /// Tasks short of `minMember` (0 for a ready job), and whether the job was
    /// unschedulable in this session (`volcano_unschedule_task_count`,
    /// `volcano_job_retry_counts`).
    Unscheduled {
        /// Tasks short of `minMember`.
        tasks: i64,
        /// Unschedulable in this session.
        retried: bool,
    },
}

/// A plugin's verdict on a job at the end of a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobVerdict {
    /// The job's gang is ready (condition `Scheduled=True`).
    Ready,
    /// The job cannot be scheduled now (condition `Unschedulable=True`, and its pending
    /// pods get `PodScheduled=False`).
    Unschedulable {
        /// Condition reason, from [`volcano_api::names::pod_group_reason`].
        reason: &'static str,
        /// Why, for people.
        message: String,
    },
}

/// A job that fails [`Plugin::job_valid`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidJob {
    /// Machine-readable reason (`NotEnoughTasks`, `NotEnoughPodsOfTask`).
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

/// A scheduling plugin. Build a fresh value per session (see [`crate::PluginBuilder`]).
#[allow(unused_variables)]
pub trait Plugin: Send + Sync {
    /// The configuration name (`gang`, `drf`, …).
    fn name(&self) -> &'static str;

    /// The extension points this plugin registers.
    fn hooks(&self) -> Hooks;

    /// Called in tier order when the session opens.
    fn on_session_open(&mut self, snap: &Snapshot, ctx: &SessionContext) {}

    /// Called when the session closes, before statuses are computed.
    fn on_session_close(&mut self, snap: &Snapshot, ctx: &SessionContext, out: &mut CloseOutput) {}

    /// Job order: `Less` puts `l` first; `Equal` abstains.
    fn job_order(&self, snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        Ordering::Equal
    }

    /// Queue order: `Less` puts `l` first; `Equal` abstains.
    fn queue_order(&self, snap: &Snapshot, l: QueueId, r: QueueId) -> Ordering {
        Ordering::Equal
    }

    /// Order of victim queues: `Less` evicts from `l` first; `Equal` abstains.
    fn victim_queue_order(&self, snap: &Snapshot, l: QueueId, r: QueueId, preemptor: QueueId) -> Ordering {
        Ordering::Equal
    }

    /// Task order: `Less` puts `l` first; `Equal` abstains.
    fn task_order(&self, snap: &Snapshot, l: TaskId, r: TaskId) -> Ordering {
        Ordering::Equal
    }

    /// Checks a task before any node is tried.
    fn pre_predicate(&self, snap: &Snapshot, task: TaskId) -> Result<(), Status> {
        Ok(())
    }

    /// Checks a task against a node.
    fn predicate(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        Ok(())
    }

    /// Scores a node for a task (summed over plugins).
    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        0.0
    }

    /// Scores all feasible nodes at once (for normalised scores): adds into `scores`.
    fn batch_node_order(&self, snap: &Snapshot, task: TaskId, nodes: &[NodeId], scores: &mut [f64]) {}

    /// Victims among `candidates` for `preemptor`; `None` abstains.
    fn preemptable(&self, snap: &Snapshot, preemptor: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        None
    }

    /// Victims among `candidates` for a reclaim by `reclaimer`; `None` abstains.
    fn reclaimable(&self, snap: &Snapshot, reclaimer: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        None
    }

    /// Whether the queue already has its share (skipped by allocate and reclaim).
    fn overused(&self, snap: &Snapshot, queue: QueueId) -> bool {
        false
    }

    /// Whether the queue may take this task now.
    fn allocatable(&self, snap: &Snapshot, queue: QueueId, task: TaskId) -> bool {
        true
    }

    /// Why [`Plugin::allocatable`] refuses the task, for the job's condition (asked only
    /// after a refusal, off the hot path).
    fn allocatable_refusal(&self, snap: &Snapshot, queue: QueueId, task: TaskId) -> Option<String> {
        None
    }

    /// Whether the queue may reclaim for this task.
    fn preemptive(&self, snap: &Snapshot, queue: QueueId, task: TaskId) -> bool {
        true
    }

    /// `Some` when the job cannot be scheduled at all in this session.
    fn job_valid(&self, snap: &Snapshot, job: JobId) -> Option<InvalidJob> {
        None
    }

    /// Whether the job's placements so far may be committed.
    fn job_ready(&self, snap: &Snapshot, job: JobId) -> bool {
        true
    }

    /// Whether the job's placements (pipelined included) may be kept.
    fn job_pipelined(&self, snap: &Snapshot, job: JobId) -> Vote {
        Vote::Abstain
    }

    /// Whether a Pending job may be admitted (`Inqueue`).
    fn job_enqueueable(&self, snap: &Snapshot, job: JobId) -> Admission {
        Admission::Abstain
    }

    /// A job was admitted: reserve what it needs.
    fn job_enqueued(&mut self, snap: &Snapshot, job: JobId) {}

    /// Whether the job wants more resources (triggers preempt and reclaim).
    fn job_starving(&self, snap: &Snapshot, job: JobId) -> bool {
        false
    }

    /// The plugin's [`Incremental`] promises, if it makes any: `None` (the default) makes the
    /// session evaluate it exactly — every node for every task, no failed attempt
    /// remembered across cycles. A plugin that implements only semantic hooks is correct
    /// by construction; one that implements [`Incremental`] returns `Some(self)`.
    fn incremental(&self) -> Option<&dyn Incremental> {
        None
    }

    /// [`Plugin::incremental`], mutably (to drain [`Incremental::drain_touched`]).
    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        None
    }

    /// A task was allocated or pipelined (or an eviction was undone).
    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {}

    /// A task was evicted (or an allocation was undone).
    fn on_deallocate(&mut self, snap: &Snapshot, task: TaskId) {}

    /// Which cards of the node's GPUs the task takes when it is allocated there (it asks
    /// for GPUs and the node has cards of its kind, see [`crate::device`]), or `None` to
    /// leave the choice to the next plugin and in the end to the device layer (the
    /// fullest cards that fit). The first plugin with an answer decides; an answer whose
    /// cards cannot take the task is ignored. A plugin whose node order depends on the
    /// cards scores the node with the cards it answers here.
    fn choose_devices(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Option<SmallVec<[u16; 8]>> {
        None
    }

    /// A HyperNode's score for placing a job with a network topology constraint there, or
    /// with `sub_group` one of its sub-groups ([`crate::JobInfo::sub_groups`]) whose policy
    /// has one (Volcano's HyperNodeOrderFn): of the HyperNodes of the lowest tier where the
    /// whole job (sub-group) fits, `allocate` takes the one with the highest sum over the
    /// plugins (then the one holding most of its pods, then the first by name). Read on the
    /// session's state before the pods are placed.
    fn hyper_node_order(&self, snap: &Snapshot, job: JobId, sub_group: Option<u32>, hyper_node: HyperNodeId) -> f64 {
        0.0
    }

    /// Victims among `candidates` for a gang-aware eviction (Volcano's UnifiedEvictableFn);
    /// `None` abstains. The candidates come whole job by whole job, in the order the action
    /// would evict them, and the action keeps a job's bundle only when every pod of it is
    /// allowed: a plugin that keeps running totals walks them in order. The action asks on
    /// growing prefixes of its ordered list, so a plugin's answer on a pod should depend only
    /// on the pods before it (the in-tree plugins' do). Not switched by any `enable…` flag,
    /// as in Volcano.
    fn evictable(&self, snap: &Snapshot, ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        None
    }

    /// The most HyperNodes gang-aware eviction tries for a job with a hard network topology
    /// constraint (Volcano's HyperNode gradient for eviction, which the plugin caps); `None`
    /// says nothing. The first plugin in tier order with the hook enabled that answers
    /// decides, and the actions' own `maxDomains` caps it again.
    fn evict_hyper_nodes(&self) -> Option<usize> {
        None
    }
}

/// What a plugin promises so that the session may reuse work instead of asking it again:
/// across cycles (it reads no clock, [`Incremental::reads_clock`]), across the tasks of one
/// shape (the node index's classes: [`Incremental::shape_local`], [`Incremental::shape_key`],
/// [`Incremental::rule_exceptions`], [`Incremental::drain_touched`]), across nodes
/// ([`Incremental::fixed_failures`], [`Incremental::evaluation_key`]) and across the nodes of
/// one topology domain ([`Incremental::domain_rules`], [`Incremental::batch_partition`]).
///
/// Opt-in, apart from [`Plugin`]: a plugin exposes it through [`Plugin::incremental`], and a
/// plugin that does not gets exact evaluation (every default here is the answer that
/// promises nothing). A wrong promise silently changes placements, so each one a plugin
/// makes is tested against a full scan (`tests/tests/invariants.rs`).
#[allow(unused_variables)]
pub trait Incremental: Plugin {
    /// [`Plugin::batch_node_order`] over a set of scored nodes in which `nodes[i]` stands
    /// for `counts[i]` nodes with its raw scores (nodes of its domain that are not special,
    /// see [`Incremental::batch_partition`]): the scores `nodes` would get in a batch over the
    /// whole set. The default scores `nodes` alone, which is right for scores normalised
    /// from the set of raw values only; a plugin whose scores read the number of scored
    /// nodes (PodTopologySpread's topology sizes) must use `counts`.
    fn batch_node_order_counted(
        &self,
        snap: &Snapshot,
        task: TaskId,
        nodes: &[NodeId],
        counts: &[u32],
        scores: &mut [f64],
    ) {
        self.batch_node_order(snap, task, nodes, scores)
    }

    /// Whether, for this task, the plugin's predicates and node scores depend only on the
    /// node's state and on the task's requests ([`crate::TaskInfo::resreq`] and the non-zero
    /// cpu and memory), node selector, affinity, tolerations, topology spread constraints,
    /// namespace, host ports (with the restart policy of each container), container
    /// images and volumes (PersistentVolumeClaim claims, inline CSI sources, generic
    /// ephemeral volumes) — so equivalent
    /// tasks get equal answers and the session may use its incremental node index
    /// ([`crate::session::select`]). The default (false) makes the session scan every node for
    /// the task; a plugin whose answer depends on the task's job (say) returns false only for
    /// the tasks concerned. The session asks once per task: the answer must not change
    /// while the session runs.
    fn shape_local(&self, snap: &Snapshot, task: TaskId) -> bool {
        false
    }

    /// For this task, whether the plugin's predicate on a node depends only on that node's
    /// state and the task's shape, and never turns from failing to passing as pods join
    /// that node or any other: so the number of pods of the task's request a node can take
    /// only falls as nodes fill, which a room proof rests on ([`crate::session::retry`]).
    /// The default says no (a job with such a task is always tried again).
    fn fit_only_narrows(&self, snap: &Snapshot, task: TaskId) -> bool {
        false
    }

    /// Whether the plugin's [`Plugin::job_ready`] is false, and its
    /// [`Plugin::job_pipelined`] votes Reject, for every job whose ready, pipelined and
    /// pending best-effort tasks together are fewer than its `minAvailable` (the gang
    /// rule, which a room proof rests on: [`crate::session::retry`]). The default says no.
    fn needs_min_member(&self) -> bool {
        false
    }

    /// Whether this session's answers depend on the session's time
    /// ([`SessionContext::now_ms`]), not only on the snapshot: a session where some plugin
    /// says yes remembers no failed attempt for the next cycle, nor replays one
    /// ([`crate::session::retry`]). Asked once, after `on_session_open`. The default says
    /// yes: a plugin declares that it reads no clock.
    fn reads_clock(&self, snap: &Snapshot) -> bool {
        true
    }

    /// For a [`Incremental::shape_local`] task whose answers also depend on a few facts beyond
    /// its shape (inter-pod affinity reads the pod's labels through the selectors of the
    /// pods around it): a key such that tasks whose shapes are equal but for their
    /// inter-pod rules, and whose keys are equal, get equal predicates (domain rules aside,
    /// see [`Incremental::domain_rules`]) and node scores ([`Plugin::node_order`]; batch scores
    /// are asked per task). So a plugin's predicates and node scores read a task's
    /// inter-pod rules only through its key: 0 when they read none. Asked once per task
    /// and session; the keys of all plugins are combined.
    fn shape_key(&self, snap: &Snapshot, task: TaskId) -> u64 {
        0
    }

    /// Whether [`Plugin::batch_node_order`] gives every node the same score for this task,
    /// whichever nodes are scored together (so it cannot change which node wins, and a
    /// subset of the nodes may be scored alone). Asked only for tasks that every plugin finds
    /// [`Incremental::shape_local`], once per task and session.
    fn batch_uniform(&self, snap: &Snapshot, task: TaskId) -> bool {
        false
    }

    /// For a task whose batch scores are not uniform ([`Incremental::batch_uniform`]): whether
    /// they are uniform outside a few nodes that [`Incremental::batch_special_nodes`] lists, and
    /// normalised from the set of raw values only (so that scoring the listed nodes and one
    /// other node gives them the scores a batch over every feasible node would). The
    /// session then scores only those nodes and the best other node. Asked once per task
    /// and session.
    fn batch_sparse(&self, snap: &Snapshot, task: TaskId) -> bool {
        false
    }

    /// For a task whose batch scores are neither uniform nor sparse: the partition of the
    /// nodes into domains (the values of one node label, say the zone) such that, outside
    /// the nodes that [`Incremental::batch_special_nodes`] lists, the batch scores are equal on
    /// the nodes of each domain (the nodes without the label make one more domain), and
    /// normalised from the raw values and how many scored nodes have each
    /// ([`Incremental::batch_node_order_counted`]). The session then scores the listed nodes and
    /// the best other node of each domain only. `None` (the default) when the scores have
    /// no such partition; a plugin whose scores are uniform or sparse for the task returns
    /// `None` too. Asked once per task and session.
    fn batch_partition(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<NodeDomains>> {
        None
    }

    /// The nodes outside which the batch scores of a [`Incremental::batch_sparse`] task are
    /// uniform, or those of a [`Incremental::batch_partition`] task uniform per domain (now;
    /// asked at every query); a plugin whose scores are uniform adds none.
    fn batch_special_nodes(&self, snap: &Snapshot, task: TaskId, out: &mut Vec<NodeId>) {}

    /// For a [`Incremental::shape_local`] task: the nodes where its predicates and node scores
    /// may differ from those of a task whose shape differs only in inter-pod rules (pod
    /// affinity and anti-affinity, topology spread constraints) — the nodes its own rules
    /// and those of the other task may fail on, now. The node index then builds the task's
    /// class from the other's answers, re-evaluating only these nodes. Returns false when
    /// the nodes cannot be listed (the class is then built by evaluating every node), the
    /// default; a plugin that reads no inter-pod rule answers alike for both tasks, lists
    /// none and returns true.
    fn rule_exceptions(&self, snap: &Snapshot, task: TaskId, out: &mut Vec<NodeId>) -> bool {
        false
    }

    /// For a [`Incremental::shape_local`] task: the nodes where the plugin's predicate fails for
    /// the task whatever a session does, with the reason — it reads there only what a
    /// session does not change, such as the node's labels, taints and `unschedulable` flag
    /// and the task's shape, and that failure is the first one its `predicate` and
    /// `predicate_without_domain_rules` return there. The node index then does not
    /// re-evaluate these nodes for the task's class when they change, and, when the plugin
    /// is the first with an active predicate, finds their reasons from the resource check
    /// and these reasons alone. `None` (the default) when the plugin lists none. Asked once
    /// per class; must be the same for tasks of one shape.
    fn fixed_failures(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<FixedFailures>> {
        None
    }

    /// For a [`Incremental::shape_local`] task whose [`Incremental::shape_key`]s are all 0: a key
    /// such that tasks with equal requests ([`crate::TaskInfo::resreq`] and the non-zero
    /// cpu and memory) and equal keys get equal answers from the plugin's `predicate` and
    /// [`Plugin::node_order`] on every node its [`Incremental::fixed_failures`] lists for
    /// neither task (every node when it lists none). Most shapes of a cluster differ only
    /// in what fixed failures and batch scores read (node selectors, node affinity,
    /// tolerations), so the node index evaluates such a node once for all the classes of
    /// those tasks instead of once per class. `None` (the default) promises nothing, and
    /// the task's class then shares nothing. Asked once per class; the key must be the
    /// same for tasks of one shape, and different for tasks the plugin may answer
    /// differently.
    fn evaluation_key(&self, snap: &Snapshot, task: TaskId) -> Option<u64> {
        None
    }

    /// For a [`Incremental::shape_local`] task: the partition of the nodes into topology domains
    /// (the values of one node label, say the zone) when some of the plugin's predicates
    /// for the task depend on the node only through its domain — topology spread over
    /// zones, zone anti-affinity. The node index then keeps the task's answers without
    /// those rules ([`Incremental::predicate_without_domain_rules`]) and applies
    /// [`Incremental::domain_verdicts`] per domain at each query, so that placing a pod in a
    /// zone costs the index nothing per node of the zone. `None` (the default) when the
    /// plugin has no such rules for the task. Asked once per task and session; the answer
    /// must not change while the session runs, and must be the same for tasks whose
    /// [`Incremental::shape_key`]s are equal (and whose shapes differ only in inter-pod rules).
    /// At most one plugin may split a task (the session scans every node for a task two
    /// plugins split).
    fn domain_rules(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<NodeDomains>> {
        None
    }

    /// For a task of [`Incremental::domain_rules`]: the verdict of its domain rules now, per
    /// domain: `out[d]` for domain `d` and `out[count]` for the nodes without the label,
    /// each `None` (the session's initial value) when the rules allow it, else the reason
    /// the predicate would give on a node that passes its other checks.
    fn domain_verdicts(&self, snap: &Snapshot, task: TaskId, out: &mut [Option<Cow<'static, str>>]) {}

    /// [`Plugin::predicate`] with the task's [`Incremental::domain_rules`] taken as passing (so
    /// the same answer as `predicate` on a node whose domain they allow).
    fn predicate_without_domain_rules(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        self.predicate(snap, task, node)
    }

    /// Nodes whose predicates or scores may have changed for some task, beyond the node
    /// of the task an event handler was just told about (placing a pod in a zone changes
    /// the inter-pod affinity and topology spread answers of every node of the zone). The
    /// session calls it after each [`Plugin::on_allocate`] and [`Plugin::on_deallocate`] and
    /// re-evaluates these nodes in its node index; the plugin appends them to `out`.
    /// The node a task was placed on must be listed too when placing it may make a
    /// predicate pass there that failed before (a required pod affinity to it): the index
    /// assumes that a node that took a task still fails every task it failed, unless listed.
    fn drain_touched(&mut self, out: &mut Vec<NodeId>) {}
}

/// The nodes where a plugin's predicate fails for a task whatever a session does, and why
/// (see [`Incremental::fixed_failures`]).
#[derive(Debug, PartialEq, Eq)]
pub struct FixedFailures {
    /// Per node (by index): 0 when the predicate may pass there, else 1 + the index of its
    /// reason in `reasons`.
    pub of_node: Vec<u32>,
    /// The reasons.
    pub reasons: Vec<String>,
}

impl FixedFailures {
    /// Whether the predicate fails on the node for good.
    pub fn fails(&self, node: NodeId) -> bool {
        self.of_node[node.idx()] != 0
    }
}

/// A partition of the nodes into topology domains (see [`Incremental::domain_rules`] and
/// [`Incremental::batch_partition`]).
#[derive(Debug, PartialEq, Eq)]
pub struct NodeDomains {
    /// The domain of each node, by node index; [`NodeDomains::NONE`] for a node without
    /// the label.
    pub of_node: Vec<u32>,
    /// Number of domains.
    pub count: u32,
}

impl NodeDomains {
    /// The domain of a node without the label.
    pub const NONE: u32 = u32::MAX;
}
