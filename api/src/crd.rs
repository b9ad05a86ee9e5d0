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

/// The CRDs as Volcano ships them, generated from the types above: the same names, scope,
/// short names, subresources and printer columns, and a schema that accepts what Volcano's
/// accepts, so that installing them over a Volcano installation keeps every object valid.
pub mod crds {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceSubresources,
    };
    use kube::CustomResourceExt;
    use serde_json::Value;

    fn column(name: &str, type_: &str, json_path: &str, priority: Option<i32>) -> CustomResourceColumnDefinition {
        CustomResourceColumnDefinition {
            name: name.into(),
            type_: type_.into(),
            json_path: json_path.into(),
            priority,
            ..Default::default()
        }
    }

    /// Volcano's schemas type phases and states as plain strings: drop the `enum`s the Rust
    /// enums put in the generated schema (path from the version's `openAPIV3Schema`).
    fn drop_enum(crd: &mut CustomResourceDefinition, path: &[&str]) {
        let mut v = serde_json::to_value(&crd.spec.versions[0].schema).expect("a schema serializes");
        let mut node = &mut v["openAPIV3Schema"];
        for p in path {
            node = &mut node["properties"][*p];
        }
        if let Value::Object(m) = node {
            m.remove("enum");
        }
        crd.spec.versions[0].schema = serde_json::from_value(v).expect("the schema deserializes");
    }

    /// `podgroups.scheduling.volcano.sh`: no status subresource (Volcano's scheduler and
    /// controller write the status with the object), Volcano's printer columns, `phase` any
    /// string.
    pub fn pod_group() -> CustomResourceDefinition {
        let mut crd = super::PodGroup::crd();
        drop_enum(&mut crd, &["status", "phase"]);
        let v = &mut crd.spec.versions[0];
        v.subresources = Some(CustomResourceSubresources::default());
        v.additional_printer_columns = Some(vec![
            column("STATUS", "string", ".status.phase", None),
            column("minMember", "integer", ".spec.minMember", None),
            column("RUNNINGS", "integer", ".status.running", None),
            column("AGE", "date", ".metadata.creationTimestamp", None),
            column("QUEUE", "string", ".spec.queue", Some(1)),
        ]);
        crd
    }

    /// `queues.scheduling.volcano.sh`: the status subresource, the PARENT printer column,
    /// `state` any string.
    pub fn queue() -> CustomResourceDefinition {
        let mut crd = super::Queue::crd();
        drop_enum(&mut crd, &["status", "state"]);
        let v = &mut crd.spec.versions[0];
        v.additional_printer_columns = Some(vec![column("PARENT", "string", ".spec.parent", None)]);
        crd
    }

    /// The node of a schema at `path` from the version's `openAPIV3Schema`: a property name
    /// steps into `properties`, `[]` into `items`.
    fn node<'a>(schema: &'a mut Value, path: &[&str]) -> &'a mut Value {
        let mut node = schema;
        for p in path {
            node = if *p == "[]" { &mut node["items"] } else { &mut node["properties"][*p] };
        }
        node
    }

    /// Edit the version's `openAPIV3Schema` as JSON.
    fn edit_schema(crd: &mut CustomResourceDefinition, f: impl FnOnce(&mut Value)) {
        let mut v = serde_json::to_value(&crd.spec.versions[0].schema).expect("a schema serializes");
        f(&mut v["openAPIV3Schema"]);
        crd.spec.versions[0].schema = serde_json::from_value(v).expect("the schema deserializes");
    }

    /// The schema of a task's pod template in the Job CRD.
    ///
    /// `metadata` is typed as Volcano's CRD types it (controller-gen's embedded ObjectMeta:
    /// `annotations`, `finalizers`, `labels`, `name`, `namespace`); `spec` is an object
    /// with `x-kubernetes-preserve-unknown-fields`. Volcano's CRD spells the whole PodSpec
    /// out (about 200 KB with its descriptions stripped). We do not, because:
    /// - size: the full PodSpec schema, once per task template, brings the CRD close to the
    ///   256 KiB `kubectl apply` (client-side) annotation limit that made Volcano strip its
    ///   descriptions, and grows with every Kubernetes release; ours is a few KB;
    /// - pruning: a typed schema silently drops the fields it does not know. Ours would be
    ///   k8s-openapi's (Kubernetes 1.33), so a PodSpec field newer than that, which a newer
    ///   Volcano CRD keeps, would vanish from stored jobs; preserving keeps every field;
    /// - acceptance: every template Volcano's schema accepts, ours accepts. What the schema
    ///   no longer rejects (a wrongly typed PodSpec field, a template without containers) is
    ///   rejected by the job webhook: decoding into [`k8s_openapi`]'s PodSpec fails, and
    ///   [`crate::admission::validate_job_create`] checks the template as Volcano's
    ///   `ValidatePodTemplate` does.
    ///
    /// The cost: `kubectl explain vcjob.spec.tasks.template.spec` describes nothing,
    /// server-side apply treats the PodSpec as one atomic value, and the defaults Volcano's
    /// schema carries inside the PodSpec (a container port's `protocol: TCP`, a probe's
    /// `grpc.service: ""`, ...) are not written into the stored Job; the API server still
    /// applies them to the pods made from the template, so the pods are the same.
    ///
    /// Checked by hand against a real API server (Kubernetes 1.36): a TF ps/worker job created under
    /// Volcano's CRD reads back unchanged after this CRD replaces Volcano's; created under
    /// this CRD it is stored as under Volcano's but for the port's `protocol: TCP`.
    pub fn pod_template_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The pod template of the task's pods (its spec is validated by the job webhook).",
            "type": "object",
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {
                        "annotations": { "type": "object", "additionalProperties": { "type": "string" } },
                        "finalizers": { "type": "array", "items": { "type": "string" } },
                        "labels": { "type": "object", "additionalProperties": { "type": "string" } },
                        "name": { "type": "string" },
                        "namespace": { "type": "string" }
                    }
                },
                "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
            }
        })
    }

    /// `jobs.batch.volcano.sh`: short names `vcjob` and `vj`, the status subresource,
    /// Volcano's printer columns, and the `enum`s Volcano's schema has (policy events,
    /// `status.state.phase`, `topologyPolicy`, network topology `mode`); actions,
    /// `dependsOn.iteration` and the rest are any string, as in Volcano. The pod template
    /// is typed as [`pod_template_schema`] explains.
    pub fn job() -> CustomResourceDefinition {
        use crate::bus::Event;
        use crate::job::{numa_policy, JobPhase};
        let mut crd = crate::job::Job::crd();
        let events: Vec<&str> = [
            Event::Any,
            Event::PodPending,
            Event::PodRunning,
            Event::PodFailed,
            Event::PodEvicted,
            Event::Unknown,
            Event::TaskCompleted,
            Event::OutOfSync,
            Event::CommandIssued,
            Event::JobUpdated,
            Event::TaskFailed,
        ]
        .iter()
        .map(|e| e.as_str())
        .collect();
        let phases: Vec<&str> = JobPhase::KNOWN.iter().map(|p| p.as_str()).collect();
        edit_schema(&mut crd, |s| {
            for policies in [&["spec", "policies"][..], &["spec", "tasks", "[]", "policies"]] {
                let p = node(s, policies);
                node(p, &["[]", "event"])["enum"] = serde_json::json!(events);
                node(p, &["[]", "events", "[]"])["enum"] = serde_json::json!(events);
            }
            node(s, &["status", "state", "phase"])["enum"] = serde_json::json!(phases);
            // Volcano's Job may leave out its spec (the webhook then rejects it for having no
            // task); the derive makes it required.
            if let Value::Object(root) = s {
                root.remove("required");
            }
            node(s, &["spec", "tasks", "[]", "topologyPolicy"])["enum"] = serde_json::json!(numa_policy::ALL);
            for nt in [&["spec", "networkTopology"][..], &["spec", "tasks", "[]", "partitionPolicy", "networkTopology"]]
            {
                let mode = node(s, &[nt, &["mode"]].concat());
                mode["enum"] = serde_json::json!(["hard", "soft"]);
                mode["default"] = serde_json::json!("hard");
                node(s, &[nt, &["highestTierAllowed"]].concat())["minimum"] = serde_json::json!(0);
                node(s, &[nt, &["highestTierName"]].concat())["maxLength"] = serde_json::json!(253);
            }
        });
        crd.spec.names.list_kind = Some("JobList".into());
        let v = &mut crd.spec.versions[0];
        v.additional_printer_columns = Some(vec![
            column("STATUS", "string", ".status.state.phase", None),
            column("minAvailable", "integer", ".status.minAvailable", None),
            column("RUNNINGS", "integer", ".status.running", None),
            column("AGE", "date", ".metadata.creationTimestamp", None),
            column("QUEUE", "string", ".spec.queue", Some(1)),
        ]);
        crd
    }

    /// `commands.bus.volcano.sh`: `action`, `target`, `reason` and `message` at the top
    /// level (no spec, no status, no subresources), as Volcano's.
    pub fn command() -> CustomResourceDefinition {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
            CustomResourceDefinitionNames, CustomResourceDefinitionSpec, CustomResourceDefinitionVersion,
            CustomResourceValidation,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let generator = schemars::generate::SchemaSettings::openapi3()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .with_transform(schemars::transform::AddNullable::default())
            .with_transform(kube::core::schema::StructuralSchemaRewriter)
            .into_generator();
        let mut target = serde_json::to_value(generator.into_root_schema_for::<OwnerReference>()).expect("serializes");
        if let Value::Object(m) = &mut target {
            m.remove("title");
            m.insert("description".into(), "The job or queue the command acts on.".into());
            m.insert("x-kubernetes-map-type".into(), "atomic".into());
        }
        let string = |d: &str| serde_json::json!({ "type": "string", "description": d });
        let schema = serde_json::json!({
            "description": "A request to the job or queue controller (Volcano's Command: no spec, fields at the top level).",
            "type": "object",
            "properties": {
                "apiVersion": { "type": "string" },
                "kind": { "type": "string" },
                "metadata": { "type": "object" },
                "action": string("The action to take on the target."),
                "target": target,
                "reason": string("Unique, one-word, CamelCase reason for the command."),
                "message": string("Human-readable message of the command."),
            }
        });
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some("commands.bus.volcano.sh".into()),
                annotations: Some([("helm.sh/resource-policy".to_string(), "keep".to_string())].into()),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: crate::bus::GROUP.into(),
                names: CustomResourceDefinitionNames {
                    kind: "Command".into(),
                    list_kind: Some("CommandList".into()),
                    plural: "commands".into(),
                    singular: Some("command".into()),
                    ..Default::default()
                },
                scope: "Namespaced".into(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: crate::bus::VERSION.into(),
                    served: true,
                    storage: true,
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(serde_json::from_value(schema).expect("a valid schema")),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn schema(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> Value {
        serde_json::to_value(&crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema).unwrap()
    }

    /// Structural (as the API server requires of a CRD): every node has a type unless it
    /// preserves unknown fields or is int-or-string, and nothing is a `$ref` or an `anyOf`
    /// of types.
    fn assert_structural(node: &Value, path: &str) {
        let Value::Object(m) = node else { return };
        for bad in ["$ref", "anyOf", "oneOf", "allOf"] {
            assert!(!m.contains_key(bad), "{path}: {bad}");
        }
        let free =
            m.contains_key("x-kubernetes-preserve-unknown-fields") || m.contains_key("x-kubernetes-int-or-string");
        assert!(free || m.contains_key("type"), "{path} has no type");
        for (k, v) in m.get("properties").and_then(Value::as_object).into_iter().flatten() {
            assert_structural(v, &format!("{path}.{k}"));
        }
        for sub in ["items", "additionalProperties"] {
            if let Some(v) = m.get(sub).filter(|v| v.is_object()) {
                assert_structural(v, &format!("{path}.{sub}"));
            }
        }
    }

    #[test]
    fn the_job_crd_is_structural_small_and_constrains_what_volcano_does() {
        let crd = super::crds::job();
        let s = schema(&crd);
        assert_structural(&s, "");
        let size = serde_json::to_string(&crd).unwrap().len();
        assert!(size < 100_000, "{size} bytes: far from the 256 KiB client-side apply limit");
        let task = &s["properties"]["spec"]["properties"]["tasks"]["items"]["properties"];
        assert_eq!(task["template"]["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(task["template"]["properties"]["metadata"]["properties"]["labels"]["type"], "object");
        let policy = &s["properties"]["spec"]["properties"]["policies"]["items"]["properties"];
        assert_eq!(policy["event"]["enum"].as_array().unwrap().len(), 11);
        assert_eq!(policy["events"]["items"]["enum"][0], "*");
        assert!(policy["action"].get("enum").is_none(), "Volcano accepts any action");
        assert!(task["dependsOn"]["properties"]["iteration"].get("enum").is_none());
        assert_eq!(s["properties"]["status"]["properties"]["state"]["properties"]["phase"]["enum"][9], "Failed");
        assert!(s.get("required").is_none(), "Volcano's Job may leave out its spec");
        let v = &crd.spec.versions[0];
        assert!(v.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<&str> = v.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(columns, ["STATUS", "minAvailable", "RUNNINGS", "AGE", "QUEUE"]);
        assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["vcjob".to_string(), "vj".to_string()][..]));
    }

    #[test]
    fn the_command_crd_has_its_fields_at_the_top_level() {
        let crd = super::crds::command();
        let s = schema(&crd);
        assert_structural(&s, "");
        let props: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        assert_eq!(props, ["action", "apiVersion", "kind", "message", "metadata", "reason", "target"]);
        assert_eq!(s["properties"]["target"]["required"], serde_json::json!(["apiVersion", "kind", "name", "uid"]));
        assert!(crd.spec.versions[0].subresources.is_none());
        assert_eq!(crd.spec.scope, "Namespaced");
    }
}
