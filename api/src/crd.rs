//! Volcano custom resources: `scheduling.volcano.sh/v1beta1` PodGroup and Queue.
//!
//! Field names and JSON spellings follow Volcano's `staging/src/volcano.sh/apis`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A resource list (`name → quantity`), as in `v1.ResourceList`.
pub type ResourceList = BTreeMap<String, Quantity>;

/// The annotation that puts a pod into a PodGroup.
pub const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";
/// Queue of an auto-created PodGroup (pod or namespace annotation).
pub const QUEUE_NAME_ANNOTATION: &str = "scheduling.volcano.sh/queue-name";
/// Task role of a pod (annotation, then label).
pub const TASK_SPEC_KEY: &str = "volcano.sh/task-spec";
/// Task priority override (pod annotation).
pub const TASK_PRIORITY_ANNOTATION: &str = "volcano.sh/task-priority";
/// Preemptable flag (pod: default true; PodGroup/job: default false).
pub const PREEMPTABLE_KEY: &str = "volcano.sh/preemptable";
/// HDRF queue path, e.g. `root/eng/dev`.
pub const HIERARCHY_ANNOTATION: &str = "volcano.sh/hierarchy";
/// HDRF weights along the path, e.g. `1/2/8`.
pub const HIERARCHY_WEIGHTS_ANNOTATION: &str = "volcano.sh/hierarchy-weights";
/// SLA waiting time annotation on a PodGroup.
pub const SLA_WAITING_TIME_ANNOTATION: &str = "volcano.sh/sla-waiting-time";

/// Spec of a PodGroup: the gang of pods that must be scheduled together.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    plural = "podgroups",
    shortname = "pg",
    shortname = "podgroup-v1beta1",
    namespaced,
    status = "PodGroupStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupSpec {
    /// Minimal number of members that must run together (gang size).
    #[serde(default)]
    pub min_member: i32,
    /// Minimal number of members per task role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub min_task_member: BTreeMap<String, i32>,
    /// Queue the group belongs to (default `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// PriorityClass of the group (job priority).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Minimal resources needed to start the group (used for admission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<ResourceList>,
    /// Network topology constraints (HyperNodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Sub-group policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy: Option<Vec<SubGroupPolicySpec>>,
}

/// Network topology constraint of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft` (default hard).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Highest HyperNode tier the group may span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i32>,
    /// Highest HyperNode tier by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_name: Option<String>,
}

/// A sub-group policy of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicySpec {
    /// Name of the sub-group.
    #[serde(default)]
    pub name: String,
    /// Topology constraint of the sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,
    /// Pods per sub-group (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_size: Option<i32>,
    /// Minimal sub-groups (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sub_groups: Option<i32>,
    /// Label selector of the sub-group's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// Label keys whose values split pods into sub-groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,
}

/// Phase of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PodGroupPhase {
    /// Not admitted yet.
    #[default]
    Pending,
    /// At least minMember pods are scheduled.
    Running,
    /// Some pods run but the group is not schedulable as a whole.
    Unknown,
    /// Admitted by `enqueue`: resources reserved, pods may be created.
    Inqueue,
    /// All scheduled pods finished.
    Completed,
}

impl PodGroupPhase {
    /// The phase as written in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PodGroupPhase::Pending => "Pending",
            PodGroupPhase::Running => "Running",
            PodGroupPhase::Unknown => "Unknown",
            PodGroupPhase::Inqueue => "Inqueue",
            PodGroupPhase::Completed => "Completed",
        }
    }
}

/// Status of a PodGroup, written by the scheduler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Current phase (empty means Pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,
    /// Conditions (`Unschedulable`, `Scheduled`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PodGroupCondition>,
    /// Number of running pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub running: i32,
    /// Number of succeeded pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub succeeded: i32,
    /// Number of failed pods.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A PodGroup condition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// `Unschedulable` or `Scheduled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Session that set the condition.
    #[serde(default, rename = "transitionID", skip_serializing_if = "Option::is_none")]
    pub transition_id: Option<String>,
    /// Time of the last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Spec of a Queue: a share of the cluster for a team.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    plural = "queues",
    shortname = "q",
    shortname = "queue-v1beta1",
    status = "QueueStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct QueueSpec {
    /// Weight for proportional fair share (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Upper bound of the queue's resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<ResourceList>,
    /// Deserved resources (capacity plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deserved: Option<ResourceList>,
    /// Guaranteed resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,
    /// Whether other queues may reclaim from this one (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaimable: Option<bool>,
    /// Queue priority: higher is scheduled first and reclaimed last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Parent queue (hierarchical capacity; default `root`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Node-group affinity of the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<QueueAffinity>,
    /// Queue type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Multi-cluster extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_clusters: Option<Vec<ClusterSpec>>,
    /// `fifo` or `traverse`; not consulted by the scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dequeue_strategy: Option<String>,
}

/// Node groups a queue's pods prefer or must (not) run in (Volcano's `nodeGroupAffinity`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueAffinity {
    /// Node groups the queue's pods go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_affinity: Option<NodeGroupAffinity>,
    /// Node groups the queue's pods avoid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_anti_affinity: Option<NodeGroupAffinity>,
}

/// Required and preferred node groups, by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeGroupAffinity {
    /// Node groups required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<Vec<String>>,
    /// Node groups preferred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<String>>,
}

/// A cluster a queue's jobs may be dispatched to (Volcano's `extendClusters`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterSpec {
    /// Cluster name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
}

/// Resources reserved for a queue on locked nodes (Volcano's `reservation`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Reservation {
    /// Locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Idle resources on the locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// Guaranteed resources of a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Guarantee {
    /// The guaranteed resource list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceList>,
}

/// State of a Queue.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum QueueState {
    /// Accepts and schedules jobs.
    #[default]
    Open,
    /// Accepts nothing.
    Closed,
    /// Closing: waits for its PodGroups to go.
    Closing,
    /// Unknown.
    Unknown,
}

/// Status of a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// Queue state (empty means Open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<QueueState>,
    /// Pending PodGroups.
    #[serde(default)]
    pub pending: i32,
    /// Running PodGroups.
    #[serde(default)]
    pub running: i32,
    /// Unknown PodGroups.
    #[serde(default)]
    pub unknown: i32,
    /// Inqueue PodGroups.
    #[serde(default)]
    pub inqueue: i32,
    /// Completed PodGroups.
    #[serde(default)]
    pub completed: i32,
    /// Reservation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
    /// Resources allocated to the queue (written by the scheduler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<ResourceList>,
}
