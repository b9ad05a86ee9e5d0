//! The names volcano-rs shares with Volcano and Kubernetes, each written once: the default
//! scheduler name, the default and root queues, condition types and reasons, and event
//! reasons. Annotation and label keys are in [`crate::crd`], beside the objects they annotate.
//!
//! Every crate uses these constants instead of string literals, so that the scheduler core,
//! the shells that apply its effects and the tests cannot drift apart.

/// The scheduler name pods ask for by default (`spec.schedulerName`).
pub const DEFAULT_SCHEDULER_NAME: &str = "volcano-rs";

/// The default queue: jobs without a queue go there, and it is created when missing.
pub const DEFAULT_QUEUE: &str = "default";

/// The root of the queue hierarchy.
pub const ROOT_QUEUE: &str = "root";

/// PodGroup condition types (`status.conditions[].type`), as Volcano writes them.
pub mod pod_group_condition {
    /// The gang cannot be scheduled now.
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// The gang's tasks are ready to be scheduled.
    pub const SCHEDULED: &str = "Scheduled";
}

/// PodGroup condition reasons, as Volcano writes them.
pub mod pod_group_reason {
    /// With [`super::pod_group_condition::UNSCHEDULABLE`]: the gang does not fit.
    pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
    /// With [`super::pod_group_condition::SCHEDULED`]: Volcano puts this sentence in the
    /// reason field (and leaves the message empty).
    pub const TASKS_READY: &str = "tasks in gang are ready to be scheduled";
    /// A job with fewer valid pods than `minMember`.
    pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
    /// A job with fewer valid pods of a role than its `minTaskMember`.
    pub const NOT_ENOUGH_PODS_OF_TASK: &str = "NotEnoughPodsOfTask";
    /// With [`super::pod_group_condition::UNSCHEDULABLE`]: the PodGroup's queue does not
    /// exist (volcano-rs's own; Volcano only logs it).
    pub const QUEUE_NOT_FOUND: &str = "QueueNotFound";
}

/// Condition and reason strings of `v1` Pods.
pub mod pod_condition {
    /// The pod condition type the scheduler writes.
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// `PodScheduled=False` reason: no node fits now.
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// `PodScheduled=False` reason Volcano uses for a pod that fitted but whose gang did not.
    pub const SCHEDULABLE: &str = "Schedulable";
    /// `PodScheduled=False` reason after a failed bind.
    pub const SCHEDULER_ERROR: &str = "SchedulerError";
    /// The condition the evicting scheduler sets before deleting a pod.
    pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
}

/// Event reasons, as Volcano and kube-scheduler record them.
pub mod event_reason {
    /// A pod was bound (on the pod).
    pub const SCHEDULED: &str = "Scheduled";
    /// A pod could not be scheduled (on the pod).
    pub const FAILED_SCHEDULING: &str = "FailedScheduling";
    /// A pod was evicted (on the pod).
    pub const EVICT: &str = "Evict";
    /// A PodGroup could not be scheduled or admitted (on the PodGroup).
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// A PodGroup's queue does not exist (a `Warning` on the PodGroup; volcano-rs's own).
    pub const QUEUE_NOT_FOUND: &str = "QueueNotFound";
}
