//! The snapshot model: tasks (pods), jobs (PodGroups), nodes and queues, as Volcano's
//! `pkg/scheduler/api` defines them.
//!
//! Objects refer to each other by dense indices ([`TaskId`], [`JobId`], [`NodeId`],
//! [`QueueId`]) into the vectors of [`crate::Snapshot`], never by pointer or name, so a
//! session can mutate any of them without cloning the snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::core::v1::Node;
use volcano_api::crd::{PodGroup, PodGroupPhase, Queue, QueueState};

use smallvec::SmallVec;

use crate::device::{GpuAsk, NodeGpus};
use crate::resource::{DimensionDefault, Resource};
use crate::status::{Code, FitErrors, Status};

pub mod labels;
pub mod subgroup;

pub use subgroup::SubGroups;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);
        impl $name {
            /// The index into the snapshot's vector.
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(
    /// Index of a task in [`crate::Snapshot::tasks`].
    TaskId
);
id_type!(
    /// Index of a job in [`crate::Snapshot::jobs`].
    JobId
);
id_type!(
    /// Index of a node in [`crate::Snapshot::nodes`].
    NodeId
);
id_type!(
    /// Index of a queue in [`crate::Snapshot::queues`].
    QueueId
);

/// Status of a task inside a session (Volcano's bit-flag statuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Waiting for a node.
    Pending,
    /// Placed on a node in this session (not bound yet).
    Allocated,
    /// Reserved on a node's future idle resources (waiting for releasing pods).
    Pipelined,
    /// Sent to the binder.
    Binding,
    /// Bound to a node, not running yet.
    Bound,
    /// Running.
    Running,
    /// Being deleted or evicted: still holds its node's resources.
    Releasing,
    /// Finished successfully.
    Succeeded,
    /// Finished with an error.
    Failed,
    /// Unknown.
    Unknown,
}

impl TaskStatus {
    /// Number of statuses (size of per-status counters).
    pub const COUNT: usize = 10;

    /// All statuses, in declaration order.
    pub const ALL: [TaskStatus; Self::COUNT] = [
        TaskStatus::Pending,
        TaskStatus::Allocated,
        TaskStatus::Pipelined,
        TaskStatus::Binding,
        TaskStatus::Bound,
        TaskStatus::Running,
        TaskStatus::Releasing,
        TaskStatus::Succeeded,
        TaskStatus::Failed,
        TaskStatus::Unknown,
    ];

    /// Allocated, Binding, Bound or Running: the task holds node and queue resources.
    pub fn is_allocated(self) -> bool {
        matches!(self, TaskStatus::Allocated | TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running)
    }

    /// Running, Bound, Failed or Succeeded.
    pub fn is_scheduled(self) -> bool {
        matches!(self, TaskStatus::Running | TaskStatus::Bound | TaskStatus::Failed | TaskStatus::Succeeded)
    }

    /// Bound or Running: may be evicted.
    pub fn is_preemptable(self) -> bool {
        matches!(self, TaskStatus::Bound | TaskStatus::Running)
    }

    /// Succeeded or Failed.
    pub fn is_completed(self) -> bool {
        matches!(self, TaskStatus::Succeeded | TaskStatus::Failed)
    }

    /// The status as Volcano prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "Pending",
            TaskStatus::Allocated => "Allocated",
            TaskStatus::Pipelined => "Pipelined",
            TaskStatus::Binding => "Binding",
            TaskStatus::Bound => "Bound",
            TaskStatus::Running => "Running",
            TaskStatus::Releasing => "Releasing",
            TaskStatus::Succeeded => "Succeeded",
            TaskStatus::Failed => "Failed",
            TaskStatus::Unknown => "Unknown",
        }
    }
}

/// One pod.
#[derive(Clone, Debug)]
pub struct TaskInfo {
    /// `namespace/name` (see [`TaskInfo::name`] and [`TaskInfo::namespace`]).
    pub key: Arc<str>,
    /// The pod's `metadata.uid` (empty when it has none), shared with the effects that name
    /// the pod.
    pub pod_uid: Arc<str>,
    /// Length of the namespace part of `key`.
    pub ns_len: u32,
    /// The job (PodGroup) the pod belongs to; `None` for pods outside any PodGroup.
    pub job: Option<JobId>,
    /// What the pod asks of GPU cards (`volcano.sh/gpu-*`, `volcano.sh/vgpu-*`), see
    /// [`crate::device`]; part of the task's shape.
    pub gpu: Option<GpuAsk>,
    /// The cards of its node the task holds (indices into the node's
    /// [`NodeInfo::gpus`]), while it holds them; kept when it leaves the node so that an undone
    /// change gives it the same cards back.
    pub devices: Option<SmallVec<[u16; 8]>>,
    /// Task role (`volcano.sh/task-spec` annotation, then label).
    pub role: String,
    /// The task's sub-group in its job's [`JobInfo::sub_groups`] (`None`: in none, or the job
    /// has no sub-group policy); set when the task joins its job in the snapshot.
    pub sub_group: Option<u32>,
    /// Resource request: containers max'ed with init containers, plus overhead, plus `pods: 1`.
    pub resreq: Resource,
    /// cpu request in millicores, aggregated like `resreq`, where a container that requests
    /// no cpu counts [`crate::snapshot::DEFAULT_MILLI_CPU_REQUEST`] (kube-scheduler's
    /// "non-zero" request, what its resource scorers count).
    pub nonzero_cpu: i64,
    /// memory request in bytes, aggregated like `resreq`, where a container that requests no
    /// memory counts [`crate::snapshot::DEFAULT_MEMORY_REQUEST`].
    pub nonzero_memory: i64,
    /// Equivalence class of the task's requests and scheduling constraints, set by
    /// [`crate::Snapshot::build`]: tasks of a snapshot with the same shape have the same
    /// requests (`resreq`, non-zero cpu and memory), node selector, affinity, tolerations,
    /// topology spread constraints, namespace, host ports (and container restart
    /// policies), container images and volumes that scheduling reads (the claims of
    /// PersistentVolumeClaim volumes, inline CSI sources, and generic ephemeral volumes,
    /// which no other pod shares). The node index ([`crate::session::select`]) shares its
    /// answers within a shape.
    pub shape: u32,
    /// Task priority.
    pub priority: i32,
    /// Whether the pod may be evicted (default true).
    pub preemptable: bool,
    /// Whether the request is empty (`pods` aside): placed by backfill.
    pub best_effort: bool,
    /// Current status.
    pub status: TaskStatus,
    /// Node the task occupies or is placed on.
    pub node: Option<NodeId>,
    /// Node nominated by an earlier preemption (`status.nominatedNodeName`).
    pub nominated_node: Option<String>,
    /// `preemptionPolicy: Never`.
    pub preemption_never: bool,
    /// Has scheduling gates.
    pub sch_gated: bool,
    /// Creation time, milliseconds since the epoch.
    pub creation_ms: i64,
    /// Index parsed from the pod name's last `-` field (for task order), if any.
    pub name_index: Option<i64>,
    /// The pod object.
    pub pod: Arc<Pod>,
}

impl TaskInfo {
    /// Pod UID (the key when the object has none).
    pub fn uid(&self) -> &str {
        if self.pod_uid.is_empty() {
            &self.key
        } else {
            &self.pod_uid
        }
    }

    /// Pod name.
    pub fn name(&self) -> &str {
        &self.key[self.ns_len as usize + 1..]
    }

    /// The pod as effects name it (namespace, name, uid).
    pub fn object_ref(&self) -> crate::effect::ObjectRef {
        crate::effect::ObjectRef::from_key(self.key.clone(), self.ns_len, self.pod_uid.clone())
    }

    /// Pod namespace.
    pub fn namespace(&self) -> &str {
        &self.key[..self.ns_len as usize]
    }
}

/// A job's version ([`JobInfo`]): unique in the process. Its value says nothing about the
/// job's contents, so it prints as `_` (a build and an update of the same objects print
/// the same).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JobVersion(pub(crate) u64);

impl std::fmt::Debug for JobVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("_")
    }
}

/// What a session's attempts recorded on a job ([`crate::Snapshot::job_trace`]): why its
/// tasks found no node, and a job-level reason.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobTrace {
    /// Per-task fit errors recorded in this session.
    pub fit_errors: BTreeMap<TaskId, FitErrors>,
    /// A job-level reason recorded in this session (e.g. why it was not admitted).
    pub job_fit_error: Option<String>,
}

/// One PodGroup and its tasks.
#[derive(Clone, Debug)]
pub struct JobInfo {
    /// PodGroup UID (or key).
    pub uid: Arc<str>,
    /// PodGroup name.
    pub name: Arc<str>,
    /// Namespace.
    pub namespace: Arc<str>,
    /// `namespace/name`.
    pub key: Arc<str>,
    /// The queue.
    pub queue: QueueId,
    /// Job priority (PriorityClass of the PodGroup).
    pub priority: i32,
    /// Gang minimum (`spec.minMember`).
    pub min_available: i32,
    /// Per-role minimums (`spec.minTaskMember`).
    pub task_min_available: BTreeMap<String, i32>,
    /// Σ of per-role minimums.
    pub task_min_available_total: i32,
    /// `spec.minResources`, if set.
    pub min_resources: Option<Resource>,
    /// PodGroup preemptable annotation/label (default false).
    pub preemptable: bool,
    /// SLA waiting time in milliseconds (annotation), if any.
    pub waiting_time_ms: Option<i64>,
    /// PodGroup creation time, milliseconds since the epoch.
    pub creation_ms: i64,
    /// Phase inside the session (starts at the PodGroup's status phase).
    pub phase: PodGroupPhase,
    /// The phase in the PodGroup's status, as observed (unlike [`JobInfo::phase`], never
    /// changed by the session); kept here so that the plugins that read it for every job at
    /// every session open do not each go to the PodGroup object.
    pub status_phase: Option<PodGroupPhase>,
    /// The tasks of the job.
    pub tasks: Vec<TaskId>,
    /// Number of tasks per status.
    pub status_counts: [u32; TaskStatus::COUNT],
    /// Pending tasks with an empty request.
    pub pending_best_effort: u32,
    /// Tasks with scheduling gates ([`TaskInfo::sch_gated`]).
    pub gated_tasks: u32,
    /// Σ requests of tasks in allocated statuses.
    pub allocated: Resource,
    /// Σ requests of all tasks.
    pub total_request: Resource,
    /// Changes whenever a [`crate::Snapshot::update`] changes the job's PodGroup spec or
    /// one of its pods in anything scheduling reads (a session leaves it).
    pub(crate) version: JobVersion,
    /// The job's sub-groups (`spec.subGroupPolicy`, see [`subgroup`]); `None` without
    /// policies.
    pub sub_groups: Option<Box<SubGroups>>,
    /// The PodGroup object as observed.
    pub pod_group: Arc<PodGroup>,
}

impl JobInfo {
    /// The PodGroup as effects name it (namespace, name, uid).
    pub fn object_ref(&self) -> crate::effect::ObjectRef {
        crate::effect::ObjectRef::namespaced(
            &self.namespace,
            &self.name,
            self.pod_group.metadata.uid.as_deref().unwrap_or_default(),
        )
    }

    /// Tasks with the given status.
    pub fn count(&self, s: TaskStatus) -> i32 {
        self.status_counts[s as usize] as i32
    }

    /// Bound + Binding + Running + Allocated + Succeeded.
    pub fn ready_task_num(&self) -> i32 {
        self.count(TaskStatus::Bound)
            + self.count(TaskStatus::Binding)
            + self.count(TaskStatus::Running)
            + self.count(TaskStatus::Allocated)
            + self.count(TaskStatus::Succeeded)
    }

    /// Pipelined tasks.
    pub fn waiting_task_num(&self) -> i32 {
        self.count(TaskStatus::Pipelined)
    }

    /// Allocated states + Succeeded + Pipelined + Pending.
    pub fn valid_task_num(&self) -> i32 {
        self.count(TaskStatus::Allocated)
            + self.count(TaskStatus::Binding)
            + self.count(TaskStatus::Bound)
            + self.count(TaskStatus::Running)
            + self.count(TaskStatus::Succeeded)
            + self.count(TaskStatus::Pipelined)
            + self.count(TaskStatus::Pending)
    }

    /// Ready + pending best-effort ≥ minAvailable.
    pub fn is_ready(&self) -> bool {
        self.ready_task_num() + self.pending_best_effort as i32 >= self.min_available
    }

    /// Waiting + ready + pending best-effort ≥ minAvailable.
    pub fn is_pipelined(&self) -> bool {
        self.waiting_task_num() + self.ready_task_num() + self.pending_best_effort as i32 >= self.min_available
    }

    /// Waiting + ready < minAvailable.
    pub fn is_starving(&self) -> bool {
        self.waiting_task_num() + self.ready_task_num() < self.min_available
    }

    /// No PodGroup status yet, or phase Pending.
    pub fn is_pending(&self) -> bool {
        self.phase == PodGroupPhase::Pending
    }

    /// Number of tasks.
    pub fn task_num(&self) -> i32 {
        self.tasks.len() as i32
    }
}

/// One node.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// Node name.
    pub name: Arc<str>,
    /// Allocatable resources.
    pub allocatable: Resource,
    /// Capacity.
    pub capacity: Resource,
    /// Free now: allocatable − used.
    pub idle: Resource,
    /// Held by tasks on the node (releasing ones included).
    pub used: Resource,
    /// Held by tasks that are going away.
    pub releasing: Resource,
    /// Reserved by pipelined tasks.
    pub pipelined: Resource,
    /// Σ [`TaskInfo::nonzero_cpu`] of the tasks on the node (pipelined ones included).
    pub nonzero_cpu: i64,
    /// Σ [`TaskInfo::nonzero_memory`] of the tasks on the node (pipelined ones included).
    pub nonzero_memory: i64,
    /// Tasks on the node (pipelined ones included), in key order in a built or updated
    /// snapshot (so that the victims preempt and reclaim consider come in an order that
    /// does not depend on the numbering), then in the order a session adds them. Shared
    /// between clones until one of them changes it, so that copying a chunk of nodes (what
    /// a session does when it changes one node of the chunk) allocates nothing per node.
    pub tasks: Arc<Vec<TaskId>>,
    /// The node's GPU cards and their use, when a device plugin registers them (see
    /// [`crate::device`]).
    pub gpus: Option<Arc<NodeGpus>>,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Whether the node object has any taint (`spec.taints` not empty).
    pub has_taints: bool,
    /// The node object.
    pub node: Arc<Node>,
}

impl NodeInfo {
    /// Whether a request fits the node's idle resources now (allocate's check).
    pub fn fits_idle(&self, req: &Resource) -> bool {
        req.less_equal(&self.idle, DimensionDefault::Zero)
    }

    /// Whether a request fits the node's future idle resources (once releasing pods are
    /// gone; pipeline's check).
    pub fn fits_future(&self, req: &Resource) -> bool {
        if self.releasing.is_exact_zero() && self.pipelined.is_exact_zero() {
            return self.fits_idle(req);
        }
        req.less_equal(&self.future_idle(), DimensionDefault::Zero)
    }

    /// [`NodeInfo::fits_future`] for a task, with the allocate action's reason when it does
    /// not fit (`Insufficient cpu, memory`).
    pub fn fits_future_idle(&self, task: &TaskInfo) -> Result<(), Status> {
        let future = self.future_idle();
        if task.resreq.less_equal(&future, DimensionDefault::Zero) {
            return Ok(());
        }
        let dims: Vec<&str> = task.resreq.insufficient_dims(&future).collect();
        Err(Status {
            code: Code::Unschedulable,
            reason: format!("Insufficient {}", dims.join(", ")),
            plugin: "allocate",
        })
    }

    /// Idle + releasing − pipelined: what the node will have once releasing pods are gone.
    pub fn future_idle(&self) -> Resource {
        let mut r = self.idle.clone();
        r.add(&self.releasing).sub_unchecked(&self.pipelined);
        r
    }

    /// Node labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.node.metadata.labels.as_ref().unwrap_or(&EMPTY)
    }
}

/// One queue.
#[derive(Clone, Debug)]
pub struct QueueInfo {
    /// Queue name (also its UID in Volcano).
    pub name: String,
    /// `spec.weight` (default 1).
    pub weight: i32,
    /// `spec.capability`, if set.
    pub capability: Option<Resource>,
    /// `spec.deserved`, if set.
    pub deserved: Option<Resource>,
    /// `spec.guarantee.resource` (empty if unset).
    pub guarantee: Resource,
    /// `spec.reclaimable` (default true).
    pub reclaimable: bool,
    /// `spec.priority` (default 0).
    pub priority: i32,
    /// `status.state` (default Open).
    pub state: QueueState,
    /// `spec.parent` (hierarchical queues).
    pub parent: Option<String>,
    /// Creation time, milliseconds since the epoch.
    pub creation_ms: i64,
    /// The queue object.
    pub queue: Arc<Queue>,
}

impl QueueInfo {
    /// The Queue as effects name it (cluster-scoped, with its uid).
    pub fn object_ref(&self) -> crate::effect::ObjectRef {
        crate::effect::ObjectRef::cluster(&self.name, self.queue.metadata.uid.as_deref().unwrap_or_default())
    }

    /// Whether the queue accepts new allocations.
    pub fn is_open(&self) -> bool {
        self.state == QueueState::Open
    }
}
