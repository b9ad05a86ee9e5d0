//! The effects of a cycle: what the shells apply to a cluster (kube backend), to the
//! in-memory cluster (simulator) or compare with expectations (tests). In order.
//!
//! Effects name objects by [`ObjectRef`] (namespace, name and uid), so that an applier can
//! make every write conditional on the uid and never act on an object that was deleted
//! and created again under the same name. Events and conditions are typed values; their
//! reasons come from [`volcano_api::names`].

use std::fmt;
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::core::v1::PodCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volcano_api::crd::{PodGroupStatus, ResourceList};
use volcano_api::names::pod_condition;

/// A reference to one Kubernetes object: its namespace (none for cluster-scoped objects
/// such as Queues), name and uid. Cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// `namespace/name`, or `name` for a cluster-scoped object.
    key: Arc<str>,
    /// Length of the namespace part of `key`; `u32::MAX` for a cluster-scoped object.
    ns_len: u32,
    /// The object's `metadata.uid`; empty when the object has none (objects written by
    /// hand for the simulator), in which case appliers cannot check it.
    uid: Arc<str>,
}

impl ObjectRef {
    /// A namespaced object.
    pub fn namespaced(namespace: &str, name: &str, uid: &str) -> Self {
        ObjectRef { key: format!("{namespace}/{name}").into(), ns_len: namespace.len() as u32, uid: uid.into() }
    }

    /// A namespaced object, from its metadata.
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        ObjectRef::namespaced(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
            meta.uid.as_deref().unwrap_or_default(),
        )
    }

    /// A cluster-scoped object.
    pub fn cluster(name: &str, uid: &str) -> Self {
        ObjectRef { key: name.into(), ns_len: u32::MAX, uid: uid.into() }
    }

    /// A namespaced object from a shared `namespace/name` key whose namespace is
    /// `ns_len` bytes long (no copy of the key).
    pub fn from_key(key: Arc<str>, ns_len: u32, uid: Arc<str>) -> Self {
        debug_assert!(key.len() > ns_len as usize && key.as_bytes()[ns_len as usize] == b'/');
        ObjectRef { key, ns_len, uid }
    }

    /// The namespace, `None` for a cluster-scoped object.
    pub fn namespace(&self) -> Option<&str> {
        (self.ns_len != u32::MAX).then(|| &self.key[..self.ns_len as usize])
    }

    /// The name.
    pub fn name(&self) -> &str {
        if self.ns_len == u32::MAX {
            &self.key
        } else {
            &self.key[self.ns_len as usize + 1..]
        }
    }

    /// The uid, `None` when the object has none.
    pub fn uid(&self) -> Option<&str> {
        (!self.uid.is_empty()).then_some(&*self.uid)
    }

    /// `namespace/name`, or `name` for a cluster-scoped object.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
    }
}

impl fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.uid.is_empty() {
            write!(f, "{}", self.key)
        } else {
            write!(f, "{}({})", self.key, self.uid)
        }
    }
}

/// The kinds of object an event can be about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A `v1` Pod.
    Pod,
    /// A `scheduling.volcano.sh/v1beta1` PodGroup.
    PodGroup,
    /// A `scheduling.volcano.sh/v1beta1` Queue.
    Queue,
}

impl EventKind {
    /// The kind as Kubernetes writes it (`involvedObject.kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Pod => "Pod",
            EventKind::PodGroup => "PodGroup",
            EventKind::Queue => "Queue",
        }
    }
}

/// `Normal` or `Warning`, as Kubernetes events are typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// Nothing is wrong.
    Normal,
    /// Something needs attention.
    Warning,
}

impl EventType {
    /// The type as Kubernetes writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// A Kubernetes event the scheduler records.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The kind of the object the event is about.
    pub kind: EventKind,
    /// The object the event is about.
    pub object: ObjectRef,
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// Reason, one of [`volcano_api::names::event_reason`].
    pub reason: &'static str,
    /// Message for people.
    pub message: String,
}

/// The `PodScheduled=False` condition of a pod that could not be scheduled in this cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodScheduledFalse {
    /// Reason, one of [`volcano_api::names::pod_condition`] (`Unschedulable`, `Schedulable`).
    pub reason: &'static str,
    /// Message for people: why the pod waits (shared by the pods of a job that wait for
    /// the same reason).
    pub message: Arc<str>,
}

impl PodScheduledFalse {
    /// The pod condition (`PodScheduled=False`), stamped `now`.
    pub fn condition(&self, now: Time) -> PodCondition {
        PodCondition {
            type_: pod_condition::POD_SCHEDULED.into(),
            status: "False".into(),
            reason: Some(self.reason.into()),
            message: Some(self.message.to_string()),
            last_transition_time: Some(now),
            ..Default::default()
        }
    }

    /// Whether `pod`'s `PodScheduled` condition already says this (status, reason, message).
    pub fn is_on(&self, pod: &Pod) -> bool {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == pod_condition::POD_SCHEDULED))
            .is_some_and(|c| {
                c.status == "False"
                    && c.reason.as_deref() == Some(self.reason)
                    && c.message.as_deref() == Some(&*self.message)
            })
    }

    /// Writes the condition into the pod's status, replacing its `PodScheduled` condition:
    /// what every applier does with [`Effect::PodUnschedulable`].
    pub fn set_on(&self, pod: &mut Pod, now: Time) {
        let conditions = pod.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
        let new = self.condition(now);
        match conditions.iter_mut().find(|c| c.type_ == pod_condition::POD_SCHEDULED) {
            Some(c) => *c = new,
            None => conditions.push(new),
        }
    }
}

/// One effect of a cycle.
#[derive(Clone, Debug, PartialEq)]
pub enum Effect {
    /// Bind a pod to a node.
    Bind {
        /// The pod.
        pod: ObjectRef,
        /// Node name.
        node: Arc<str>,
        /// Annotations to write on the pod before it is bound: the GPU cards chosen for it
        /// ([`crate::device::NodeGpus::annotations`]); empty for most pods.
        annotations: Vec<(&'static str, String)>,
    },
    /// Evict a pod.
    Evict {
        /// The pod.
        pod: ObjectRef,
        /// Node the pod runs on.
        node: Arc<str>,
        /// The action that decided it (`preempt`, `reclaim`, …).
        action: &'static str,
        /// Why.
        reason: String,
    },
    /// A pod waits for resources being released on a node (`status.nominatedNodeName`).
    Pipeline {
        /// The pod.
        pod: ObjectRef,
        /// Nominated node.
        node: Arc<str>,
    },
    /// Set a pending pod's `PodScheduled` condition to `False` (only emitted when the pod's
    /// current condition differs in status, reason or message). The applier records the
    /// pod's `FailedScheduling` event with it, as Volcano does when it writes the condition.
    PodUnschedulable {
        /// The pod.
        pod: ObjectRef,
        /// The condition's reason and message.
        condition: PodScheduledFalse,
    },
    /// Write a PodGroup's status (only emitted when it changed).
    PodGroupStatus {
        /// The PodGroup.
        pod_group: ObjectRef,
        /// The new status.
        status: PodGroupStatus,
    },
    /// Write a Queue's `status.allocated` (only emitted when it changed).
    QueueStatus {
        /// The queue (cluster-scoped).
        queue: ObjectRef,
        /// Allocated resources.
        allocated: ResourceList,
    },
    /// Record a Kubernetes event.
    Event(Event),
}

impl Effect {
    /// The pod a bind, eviction, nomination or pod condition is about.
    pub fn pod(&self) -> Option<&ObjectRef> {
        match self {
            Effect::Bind { pod, .. }
            | Effect::Evict { pod, .. }
            | Effect::Pipeline { pod, .. }
            | Effect::PodUnschedulable { pod, .. } => Some(pod),
            Effect::PodGroupStatus { .. } | Effect::QueueStatus { .. } | Effect::Event(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_refs_split_namespace_and_name() {
        let pod = ObjectRef::namespaced("ml", "train-0", "u-1");
        assert_eq!(
            (pod.namespace(), pod.name(), pod.uid(), pod.key()),
            (Some("ml"), "train-0", Some("u-1"), "ml/train-0")
        );
        let shared = ObjectRef::from_key(Arc::from("ml/train-0"), 2, Arc::from("u-1"));
        assert_eq!(shared, pod);
        let q = ObjectRef::cluster("research", "");
        assert_eq!((q.namespace(), q.name(), q.uid(), q.to_string()), (None, "research", None, "research".into()));
    }
}
