//! The effects of a cycle: what the shells apply to a cluster (kube backend), to the
//! in-memory cluster (simulator) or compare with expectations (tests). In order.

use volcano_api::crd::{PodGroupStatus, ResourceList};

/// One effect of a cycle.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Bind a pod to a node.
    Bind {
        /// `namespace/name` of the pod.
        pod: String,
        /// Node name.
        node: String,
    },
    /// Evict a pod.
    Evict {
        /// `namespace/name` of the pod.
        pod: String,
        /// Node the pod runs on.
        node: String,
        /// The action that decided it (`preempt`, `reclaim`, …).
        action: &'static str,
        /// Why.
        reason: String,
    },
    /// A pod waits for resources being released on a node (`status.nominatedNodeName`).
    Pipeline {
        /// `namespace/name` of the pod.
        pod: String,
        /// Nominated node.
        node: String,
    },
    /// Write a PodGroup's status (only emitted when it changed).
    PodGroupStatus {
        /// `namespace/name` of the PodGroup.
        pod_group: String,
        /// The new status.
        status: PodGroupStatus,
    },
    /// Write a Queue's `status.allocated` (only emitted when it changed).
    QueueStatus {
        /// Queue name.
        queue: String,
        /// Allocated resources.
        allocated: ResourceList,
    },
    /// A Kubernetes event.
    Event {
        /// `Kind/namespace/name` of the object.
        object: String,
        /// `Normal` or `Warning`.
        type_: &'static str,
        /// Reason.
        reason: String,
        /// Message.
        message: String,
    },
}
