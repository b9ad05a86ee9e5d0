//! Objects a Volcano cluster makes on its own, as pure functions, so that every shell makes
//! them the same way: the simulator on manifests, the kube backend on start, and the job
//! controller.
//!
//! - [`default_queues`]: the scheduler's cache creates queue `root` and queue `default` when
//!   they are missing.
//! - [`pod_group_for_pod`]: Volcano's PodGroup controller gives a pod of a Volcano scheduler
//!   that has no `scheduling.k8s.io/group-name` a PodGroup of its own (one per controlling
//!   owner), so that it is scheduled as a gang of one.

use std::collections::BTreeMap;

use crate::pod::SchedPod as Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, ResourceList};
use volcano_api::names::{DEFAULT_QUEUE, ROOT_QUEUE};

use crate::resource::PODS;
use crate::snapshot::{pod_request, SnapshotError};

/// Pod annotations Volcano's PodGroup controller copies to the PodGroup it makes.
pub const COPIED_ANNOTATIONS: [&str; 5] = [
    crd::PREEMPTABLE_KEY,
    "volcano.sh/cooldown-time",
    "volcano.sh/revocable-zone",
    "volcano.sh/jdb-min-available",
    "volcano.sh/jdb-max-unavailable",
];

/// Queue `root` (weight 1, not reclaimable) and queue `default` (weight 1, reclaimable), as
/// Volcano's scheduler creates them when they are missing.
pub fn default_queues() -> [Queue; 2] {
    let queue = |name: &str, reclaimable: bool| Queue {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: QueueSpec { weight: Some(1), reclaimable: Some(reclaimable), ..Default::default() },
        status: None,
    };
    [queue(ROOT_QUEUE, false), queue(DEFAULT_QUEUE, true)]
}

/// The pod's controlling owner (a ReplicaSet, StatefulSet, Job…), if it has one.
pub fn controlling_owner(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// The name of the PodGroup Volcano's controller makes for a pod without one:
/// `podgroup-<uid>`, with the uid of the pod's controlling owner (so that the pods of one
/// Deployment or StatefulSet share it), or the pod's own.
pub fn pod_group_name(pod: &Pod) -> String {
    let owner = controlling_owner(pod).map(|r| r.uid.as_str()).filter(|u| !u.is_empty());
    format!("podgroup-{}", owner.or(pod.metadata.uid.as_deref()).unwrap_or_default())
}

/// The PodGroup Volcano's controller makes for a pod without one: [`pod_group_name`], in the
/// pod's namespace, `minMember: 1`, the queue of the pod's `scheduling.volcano.sh/queue-name`
/// annotation (else `default`), the pod's priority class, `minResources` equal to the pod's
/// requests, phase `Pending`, the pod's creation time and the [`COPIED_ANNOTATIONS`]. The
/// caller gives it a uid. An invalid quantity in the pod is an error.
pub fn pod_group_for_pod(pod: &Pod) -> Result<PodGroup, SnapshotError> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let queue = annotations.get(crd::QUEUE_NAME_ANNOTATION).cloned().unwrap_or_else(|| DEFAULT_QUEUE.into());
    let copied: BTreeMap<String, String> =
        COPIED_ANNOTATIONS.iter().filter_map(|k| annotations.get(*k).map(|v| (k.to_string(), v.clone()))).collect();
    let request = pod_request(pod)?;
    let min_resources: ResourceList = request.to_list().into_iter().filter(|(k, q)| k != PODS && q.0 != "0").collect();
    Ok(PodGroup {
        metadata: ObjectMeta {
            name: Some(pod_group_name(pod)),
            namespace: pod.metadata.namespace.clone(),
            creation_timestamp: pod.metadata.creation_timestamp.clone(),
            annotations: (!copied.is_empty()).then_some(copied),
            ..Default::default()
        },
        spec: PodGroupSpec {
            min_member: 1,
            queue: Some(queue),
            priority_class_name: pod.spec.as_ref().and_then(|s| s.priority_class_name.clone()),
            min_resources: Some(min_resources),
            ..Default::default()
        },
        status: Some(PodGroupStatus { phase: Some(PodGroupPhase::Pending), ..Default::default() }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(owner: Option<&str>) -> Pod {
        k8s_openapi::api::core::v1::Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("ml".into()),
                uid: Some("pod-uid".into()),
                annotations: Some(
                    [
                        (crd::QUEUE_NAME_ANNOTATION.to_string(), "research".to_string()),
                        (crd::PREEMPTABLE_KEY.to_string(), "false".to_string()),
                        ("other".to_string(), "x".to_string()),
                    ]
                    .into_iter()
                    .collect(),
                ),
                owner_references: owner
                    .map(|o| vec![OwnerReference { uid: o.into(), controller: Some(true), ..Default::default() }]),
                ..Default::default()
            },
            spec: Some(PodSpec {
                priority_class_name: Some("high".into()),
                containers: vec![Container {
                    resources: Some(ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity("2".into()))].into_iter().collect()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
        .into()
    }

    #[test]
    fn a_plain_pod_gets_a_gang_of_one() {
        let pg = pod_group_for_pod(&pod(None)).unwrap();
        assert_eq!(pg.metadata.name.as_deref(), Some("podgroup-pod-uid"));
        assert_eq!(pg.metadata.namespace.as_deref(), Some("ml"));
        assert_eq!(pg.spec.min_member, 1);
        assert_eq!(pg.spec.queue.as_deref(), Some("research"));
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(pg.spec.min_resources.unwrap()["cpu"].0, "2");
        let annotations = pg.metadata.annotations.unwrap();
        assert_eq!(annotations.len(), 1, "only the copied annotations: {annotations:?}");
        assert_eq!(pod_group_name(&pod(Some("rs-uid"))), "podgroup-rs-uid", "pods of one owner share it");
    }

    #[test]
    fn default_queues_are_root_and_default() {
        let [root, default] = default_queues();
        assert_eq!((root.metadata.name.as_deref(), root.spec.reclaimable), (Some("root"), Some(false)));
        assert_eq!((default.metadata.name.as_deref(), default.spec.reclaimable), (Some("default"), Some(true)));
    }
}
