//! volcano-testkit: builders for the Kubernetes and Volcano objects that tests feed the
//! scheduling core (`node`, `pod`, `pod_group`, `queue`, `priority_class`), and
//! [`snapshot`] to turn them into a [`Snapshot`].
//!
//! The scenario runner (`tests/scenarios.rs`) and the property tests (`tests/invariants.rs`)
//! live beside this library.

#[cfg(feature = "apiserver")]
pub mod apiserver;
pub mod fixtures;
pub mod scenario;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements, Taint, Toleration,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, ResourceList};
use volcano_api::topology::{ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec};
use volcano_framework::{ClusterObjects, Snapshot};

/// The scheduler name tests use.
pub const SCHEDULER_NAME: &str = "volcano-rs";

/// A resource list from `(name, quantity)` pairs.
pub fn resources(items: &[(&str, &str)]) -> ResourceList {
    items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

fn time(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid time"))
}

/// Builds a Node.
#[derive(Clone, Debug)]
pub struct NodeBuilder(Node);

/// A node with cpu and memory allocatable and `pods: 110`.
pub fn node(name: &str, cpu: &str, memory: &str) -> NodeBuilder {
    let alloc = resources(&[("cpu", cpu), ("memory", memory), ("pods", "110")]);
    NodeBuilder(Node {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus { allocatable: Some(alloc.clone()), capacity: Some(alloc), ..Default::default() }),
    })
}

impl NodeBuilder {
    /// Sets an allocatable (and capacity) resource.
    pub fn res(mut self, name: &str, q: &str) -> Self {
        let st = self.0.status.as_mut().expect("status");
        for l in [st.allocatable.as_mut(), st.capacity.as_mut()].into_iter().flatten() {
            l.insert(name.into(), Quantity(q.into()));
        }
        self
    }
    /// `nvidia.com/gpu` allocatable.
    pub fn gpu(self, n: &str) -> Self {
        self.res("nvidia.com/gpu", n)
    }
    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.labels.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Adds a taint.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        let spec = self.0.spec.get_or_insert_with(Default::default);
        spec.taints.get_or_insert_with(Vec::new).push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            ..Default::default()
        });
        self
    }
    /// Adds an image the node has (`status.images`), under these names, of `size` bytes.
    pub fn image(mut self, names: &[&str], size: i64) -> Self {
        let st = self.0.status.get_or_insert_with(Default::default);
        st.images.get_or_insert_with(Vec::new).push(k8s_openapi::api::core::v1::ContainerImage {
            names: Some(names.iter().map(|n| n.to_string()).collect()),
            size_bytes: Some(size),
        });
        self
    }
    /// Marks the node unschedulable (cordoned).
    pub fn unschedulable(mut self) -> Self {
        self.0.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        self
    }
    /// The node.
    pub fn build(self) -> Node {
        self.0
    }
}

/// Builds a Pod.
#[derive(Clone, Debug)]
pub struct PodBuilder(Pod);

/// A pending pod of scheduler `volcano-rs` with one container and no requests.
pub fn pod(ns: &str, name: &str) -> PodBuilder {
    PodBuilder(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            uid: Some(format!("{ns}-{name}")),
            creation_timestamp: Some(time(1_700_000_000)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(SCHEDULER_NAME.into()),
            containers: vec![Container { name: "main".into(), ..Default::default() }],
            ..Default::default()
        }),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    })
}

impl PodBuilder {
    fn spec(&mut self) -> &mut PodSpec {
        self.0.spec.as_mut().expect("spec")
    }
    /// Puts the pod into a PodGroup (annotation `scheduling.k8s.io/group-name`).
    pub fn group(self, pg: &str) -> Self {
        self.annotation(crd::GROUP_NAME_ANNOTATION, pg)
    }
    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.labels.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Sets a request of the container; for an extended resource (`nvidia.com/gpu`) the limit
    /// too, as the API server requires (extended resources cannot be overcommitted).
    pub fn req(mut self, name: &str, q: &str) -> Self {
        let c = &mut self.spec().containers[0];
        let r = c.resources.get_or_insert_with(ResourceRequirements::default);
        r.requests.get_or_insert_with(BTreeMap::new).insert(name.into(), Quantity(q.into()));
        if volcano_api::validation::is_extended_resource(name) {
            r.limits.get_or_insert_with(BTreeMap::new).insert(name.into(), Quantity(q.into()));
        }
        self
    }
    /// cpu and memory requests.
    pub fn cpu_mem(self, cpu: &str, mem: &str) -> Self {
        self.req("cpu", cpu).req("memory", mem)
    }
    /// `nvidia.com/gpu` request.
    pub fn gpu(self, n: &str) -> Self {
        self.req("nvidia.com/gpu", n)
    }
    /// Runs the pod on a node (phase Running).
    pub fn running_on(mut self, node: &str) -> Self {
        self.spec().node_name = Some(node.into());
        self.phase("Running")
    }
    /// Sets the phase.
    pub fn phase(mut self, phase: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        self
    }
    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.spec().priority = Some(p);
        self
    }
    /// Sets the scheduler name.
    pub fn scheduler(mut self, name: &str) -> Self {
        self.spec().scheduler_name = Some(name.into());
        self
    }
    /// Adds a node selector entry.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.spec().node_selector.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Adds a toleration.
    pub fn toleration(mut self, key: &str, op: &str, value: &str, effect: &str) -> Self {
        self.spec().tolerations.get_or_insert_with(Vec::new).push(Toleration {
            key: (!key.is_empty()).then(|| key.into()),
            operator: Some(op.into()),
            value: (!value.is_empty()).then(|| value.into()),
            effect: (!effect.is_empty()).then(|| effect.into()),
            ..Default::default()
        });
        self
    }
    /// Sets the creation time (seconds since the epoch).
    pub fn created(mut self, secs: i64) -> Self {
        self.0.metadata.creation_timestamp = Some(time(secs));
        self
    }
    /// Edits the pod spec directly.
    pub fn with_spec(mut self, f: impl FnOnce(&mut PodSpec)) -> Self {
        f(self.spec());
        self
    }
    /// The pod.
    pub fn build(self) -> Pod {
        self.0
    }
}

/// Builds a PodGroup.
#[derive(Clone, Debug)]
pub struct PodGroupBuilder(PodGroup);

/// A HyperNode of a tier whose members are these nodes (`Node`) or HyperNodes
/// (`HyperNode`), by exact name.
pub fn hyper_node(name: &str, tier: i64, members: &[(&str, &str)]) -> HyperNode {
    let members = members
        .iter()
        .map(|(type_, m)| MemberSpec {
            type_: type_.to_string(),
            selector: MemberSelector { exact_match: Some(ExactMatch { name: m.to_string() }), ..Default::default() },
        })
        .collect();
    HyperNode::new(name, HyperNodeSpec { tier, tier_name: None, members })
}

/// A PodGroup in queue `default` with the given gang minimum, phase Inqueue.
pub fn pod_group(ns: &str, name: &str, min_member: i32) -> PodGroupBuilder {
    let mut pg = PodGroup::new(name, PodGroupSpec { min_member, ..Default::default() });
    pg.metadata.namespace = Some(ns.into());
    pg.metadata.uid = Some(format!("{ns}-{name}"));
    pg.metadata.creation_timestamp = Some(time(1_700_000_000));
    pg.status = Some(PodGroupStatus { phase: Some(PodGroupPhase::Inqueue), ..Default::default() });
    PodGroupBuilder(pg)
}

impl PodGroupBuilder {
    /// Sets the queue.
    pub fn queue(mut self, q: &str) -> Self {
        self.0.spec.queue = Some(q.into());
        self
    }
    /// Sets `minResources`.
    pub fn min_resources(mut self, items: &[(&str, &str)]) -> Self {
        self.0.spec.min_resources = Some(resources(items));
        self
    }
    /// Sets the phase.
    pub fn phase(mut self, phase: PodGroupPhase) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(phase);
        self
    }
    /// Sets the PriorityClass.
    pub fn priority_class(mut self, name: &str) -> Self {
        self.0.spec.priority_class_name = Some(name.into());
        self
    }
    /// Sets a per-role minimum.
    pub fn min_task_member(mut self, role: &str, n: i32) -> Self {
        self.0.spec.min_task_member.insert(role.into(), n);
        self
    }
    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(k.into(), v.into());
        self
    }
    /// Sets the creation time (seconds since the epoch).
    pub fn created(mut self, secs: i64) -> Self {
        self.0.metadata.creation_timestamp = Some(time(secs));
        self
    }
    /// Sets `spec.networkTopology`: `mode` (`hard` or `soft`) and the highest tier allowed.
    pub fn network_topology(mut self, mode: &str, highest_tier: Option<i32>) -> Self {
        self.0.spec.network_topology = Some(crd::NetworkTopologySpec {
            mode: Some(mode.into()),
            highest_tier_allowed: highest_tier,
            highest_tier_name: None,
        });
        self
    }
    /// Adds a `spec.subGroupPolicy` entry as the job controller makes one from a task's
    /// `partitionPolicy`: the pods labelled `volcano.sh/task-spec: <task>`, split by their
    /// `volcano.sh/partition-id` label, `size` pods a sub-group, `min` sub-groups needed.
    pub fn partition_policy(mut self, task: &str, size: i32, min: i32) -> Self {
        self.0.spec.sub_group_policy.get_or_insert_with(Vec::new).push(crd::SubGroupPolicySpec {
            name: task.into(),
            sub_group_size: Some(size),
            min_sub_groups: Some(min),
            label_selector: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some([(crd::TASK_SPEC_KEY.to_string(), task.to_string())].into()),
                ..Default::default()
            }),
            match_label_keys: Some(vec!["volcano.sh/partition-id".into()]),
            network_topology: None,
        });
        self
    }
    /// The PodGroup.
    pub fn build(self) -> PodGroup {
        self.0
    }
}

/// Builds a Queue.
#[derive(Clone, Debug)]
pub struct QueueBuilder(Queue);

/// An open queue of weight 1.
pub fn queue(name: &str) -> QueueBuilder {
    let mut q = Queue::new(name, QueueSpec { weight: Some(1), ..Default::default() });
    q.metadata.creation_timestamp = Some(time(1_600_000_000));
    QueueBuilder(q)
}

impl QueueBuilder {
    /// Sets the weight.
    pub fn weight(mut self, w: i32) -> Self {
        self.0.spec.weight = Some(w);
        self
    }
    /// Sets the capability.
    pub fn capability(mut self, items: &[(&str, &str)]) -> Self {
        self.0.spec.capability = Some(resources(items));
        self
    }
    /// Sets the guarantee.
    pub fn guarantee(mut self, items: &[(&str, &str)]) -> Self {
        self.0.spec.guarantee = Some(crd::Guarantee { resource: Some(resources(items)) });
        self
    }
    /// Sets `spec.deserved`.
    pub fn deserved(mut self, items: &[(&str, &str)]) -> Self {
        self.0.spec.deserved = Some(resources(items));
        self
    }
    /// Sets `spec.priority`.
    pub fn priority(mut self, p: i32) -> Self {
        self.0.spec.priority = Some(p);
        self
    }
    /// Sets `spec.reclaimable`.
    pub fn reclaimable(mut self, r: bool) -> Self {
        self.0.spec.reclaimable = Some(r);
        self
    }
    /// Sets the state.
    pub fn state(mut self, s: crd::QueueState) -> Self {
        self.0.status.get_or_insert_with(Default::default).state = Some(s);
        self
    }
    /// The queue.
    pub fn build(self) -> Queue {
        self.0
    }
}

/// A PriorityClass.
pub fn priority_class(name: &str, value: i32) -> PriorityClass {
    PriorityClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        value,
        ..Default::default()
    }
}

/// A bag of objects to build a snapshot from.
#[derive(Clone, Debug, Default)]
pub struct Objects(pub ClusterObjects);

impl Objects {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a node.
    pub fn node(mut self, n: NodeBuilder) -> Self {
        self.0.nodes.push(Arc::new(n.build()));
        self
    }
    /// Adds a pod.
    pub fn pod(mut self, p: PodBuilder) -> Self {
        self.0.pods.push(Arc::new(p.build().into()));
        self
    }
    /// Adds a PodGroup.
    pub fn pod_group(mut self, pg: PodGroupBuilder) -> Self {
        self.0.pod_groups.push(Arc::new(pg.build()));
        self
    }
    /// Adds a queue.
    pub fn queue(mut self, q: QueueBuilder) -> Self {
        self.0.queues.push(Arc::new(q.build()));
        self
    }
    /// Adds a PriorityClass.
    pub fn priority_class(mut self, name: &str, value: i32) -> Self {
        self.0.priority_classes.push(Arc::new(priority_class(name, value)));
        self
    }
    /// Adds a HyperNode.
    pub fn hyper_node(mut self, h: HyperNode) -> Self {
        self.0.hyper_nodes.push(Arc::new(h));
        self
    }
    /// Builds the snapshot (scheduler `volcano-rs`); a `default` queue is added if missing.
    pub fn snapshot(mut self) -> Snapshot {
        if !self.0.queues.iter().any(|q| q.metadata.name.as_deref() == Some("default")) {
            self.0.queues.push(Arc::new(queue("default").build()));
        }
        Snapshot::build(&self.0, &[SCHEDULER_NAME]).expect("test objects are valid")
    }
}
