//! The volume checks of `predicates`, as kube-scheduler's plugins make them (Volcano runs
//! those plugins): VolumeBinding (`predicate.VolumeBindingEnable`), VolumeZone
//! (`predicate.VolumeZoneEnable`) and the CSI part of NodeVolumeLimits
//! (`predicate.NodeVolumeLimitsEnable`). The sources of truth are kube-scheduler's
//! `pkg/scheduler/framework/plugins/volumebinding/{volume_binding.go,binder.go}`,
//! `volumezone/volume_zone.go` and `nodevolumelimits/csi.go`; the claims, volumes, classes
//! and CSINodes come from the snapshot's [`Extras`].
//!
//! A pod without PersistentVolumeClaim or generic ephemeral volumes pays one scan of its
//! volume list: no lookup, no allocation.
//!
//! What is not done: binding the claims of `WaitForFirstConsumer` classes (the pod is
//! refused with a reason that says so), storage capacity, in-tree volume plugins and their
//! CSI migration, and the attach limits of in-tree (non-CSI) volume types.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use volcano_framework::pod::SchedPod as Pod;
use volcano_framework::{Extras, NodeInfo, Snapshot, Status, TaskId, TaskInfo};

use super::{Enabled, NAME};
use crate::matching;

/// VolumeBinding: a bound PersistentVolume's node affinity does not match the node
/// (`UnschedulableAndUnresolvable`).
pub const REASON_VOLUME_NODE_AFFINITY: &str = "node(s) had volume node affinity conflict";
/// VolumeBinding: a claim is bound to a PersistentVolume that does not exist
/// (`UnschedulableAndUnresolvable`).
pub const REASON_PV_NOT_EXIST: &str = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
/// VolumeBinding: a claim of an `Immediate` class (or of no class) is not bound yet
/// (`UnschedulableAndUnresolvable`).
pub const REASON_UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// VolumeZone: a bound PersistentVolume's zone or region labels do not match the node's
/// (`UnschedulableAndUnresolvable`).
pub const REASON_VOLUME_ZONE: &str = "node(s) had no available volume zone";
/// NodeVolumeLimits: the node would attach more CSI volumes of a driver than its CSINode
/// allows (`Unschedulable`).
pub const REASON_MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";

/// The annotation that names a claim's class before `spec.storageClassName` (still read by
/// Kubernetes' `GetPersistentVolumeClaimClass`).
const BETA_STORAGE_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";
/// The binding mode that delays binding until a pod uses the claim.
const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
/// Node allocatable resources that give a CSI driver's attach limit (the CSINode's count
/// wins): `attachable-volumes-csi-<driver>`.
const CSI_ATTACH_LIMIT_PREFIX: &str = "attachable-volumes-csi-";
/// The volume handle prefix of a claim not bound yet, counted through its class's
/// provisioner (kube-scheduler uses a random prefix; a fixed one keeps runs reproducible).
const UNBOUND_HANDLE_PREFIX: &str = "volcano-rs-unbound";

/// The zone and region labels VolumeZone compares, deprecated ones included.
const TOPOLOGY_LABELS: [&str; 4] = [
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// `persistentvolumeclaim "<name>" not found` (`UnschedulableAndUnresolvable`).
pub fn pvc_not_found_reason(name: &str) -> String {
    format!("persistentvolumeclaim {name:?} not found")
}

/// The reason for a pod with an unbound claim of a `WaitForFirstConsumer` class, which
/// volcano-rs does not bind yet (`UnschedulableAndUnresolvable`).
pub fn wait_for_first_consumer_reason(name: &str) -> String {
    format!("volcano-rs does not bind WaitForFirstConsumer volumes yet: persistentvolumeclaim {name:?}")
}

/// One claim of a pod: the name of the PersistentVolumeClaim, and whether it is the claim
/// of a generic ephemeral volume (`<pod>-<volume>`).
struct Claim<'a> {
    name: Cow<'a, str>,
    ephemeral: bool,
}

/// Whether the pod has a PersistentVolumeClaim or generic ephemeral volume (the fast path).
pub(super) fn has_claims(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .is_some_and(|vs| vs.iter().any(|v| v.persistent_volume_claim.is_some() || v.ephemeral.is_some()))
}

/// The claims of a pod, in volume order.
fn claims<'a>(pod: &'a Pod, pod_name: &'a str) -> impl Iterator<Item = Claim<'a>> + 'a {
    pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).filter_map(move |v| {
        if let Some(c) = &v.persistent_volume_claim {
            Some(Claim { name: Cow::Borrowed(c.claim_name.as_str()), ephemeral: false })
        } else if v.ephemeral.is_some() {
            Some(Claim { name: Cow::Owned(format!("{pod_name}-{}", v.name)), ephemeral: true })
        } else {
            None
        }
    })
}

/// The claim's class: the beta annotation, else `spec.storageClassName` ("" for none).
fn claim_class(pvc: &PersistentVolumeClaim) -> &str {
    pvc.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
        .map(String::as_str)
        .or_else(|| pvc.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()))
        .unwrap_or("")
}

/// The PersistentVolume the claim is bound to (`spec.volumeName`), if any.
fn bound_volume(pvc: &PersistentVolumeClaim) -> Option<&str> {
    pvc.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty())
}

/// Whether binding the claim waits for a pod (its class is `WaitForFirstConsumer`). A
/// claim without a class, or whose class does not exist, binds immediately
/// (Kubernetes' `IsDelayBindingMode`).
fn delays_binding(extras: &Extras, pvc: &PersistentVolumeClaim) -> bool {
    let class = claim_class(pvc);
    !class.is_empty()
        && extras
            .storage_class(class)
            .is_some_and(|sc| sc.volume_binding_mode.as_deref() == Some(WAIT_FOR_FIRST_CONSUMER))
}

/// Kubernetes' `ephemeral.VolumeIsForPod`: the claim of a generic ephemeral volume must be
/// controlled by the pod.
fn ephemeral_owner_error(pvc: &PersistentVolumeClaim, task: &TaskInfo) -> Option<String> {
    let controller = pvc.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
    if controller.is_some_and(|o| o.uid == *task.pod_uid) {
        return None;
    }
    Some(format!(
        "PVC {}/{} was not created for pod {} (pod is not owner)",
        task.namespace(),
        pvc.metadata.name.as_deref().unwrap_or_default(),
        task.key
    ))
}

/// The volume checks of one task on one node, in this order: VolumeBinding, VolumeZone
/// (both `UnschedulableAndUnresolvable`), then NodeVolumeLimits (`Unschedulable`).
pub(super) fn check(enabled: Enabled, snap: &Snapshot, task: TaskId, node: &NodeInfo) -> Result<(), Status> {
    if !(enabled.volume_binding || enabled.volume_zone || enabled.node_volume_limits) {
        return Ok(());
    }
    let t = snap.task(task);
    if !has_claims(&t.pod) {
        return Ok(());
    }
    let extras = snap.extras();
    if enabled.volume_binding {
        volume_binding(extras, t, node)?;
    }
    if enabled.volume_zone {
        volume_zone(extras, t, node)?;
    }
    if enabled.node_volume_limits {
        node_volume_limits(snap, task, node)?;
    }
    Ok(())
}

/// VolumeBinding for claims that are bound: every claim exists and is usable, none of an
/// `Immediate` class is unbound, and every bound PersistentVolume exists and its required
/// node affinity matches the node. An unbound claim of a `WaitForFirstConsumer` class is
/// refused: volcano-rs does not bind claims yet.
fn volume_binding(extras: &Extras, t: &TaskInfo, node: &NodeInfo) -> Result<(), Status> {
    let ns = t.namespace();
    // kube-scheduler's PreFilter (`podHasPVCs`): the same answer on every node.
    let mut found: Vec<&Arc<PersistentVolumeClaim>> = Vec::new();
    for claim in claims(&t.pod, t.name()) {
        let Some(pvc) = extras.pvc(ns, &claim.name) else {
            let reason = if claim.ephemeral {
                format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {:?}", claim.name)
            } else {
                pvc_not_found_reason(&claim.name)
            };
            return Err(Status::unresolvable(NAME, reason));
        };
        if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            let reason = format!(
                "persistentvolumeclaim {:?} bound to non-existent persistentvolume {:?}",
                claim.name,
                bound_volume(pvc).unwrap_or_default()
            );
            return Err(Status::unresolvable(NAME, reason));
        }
        if pvc.metadata.deletion_timestamp.is_some() {
            return Err(Status::unresolvable(NAME, format!("persistentvolumeclaim {:?} is being deleted", claim.name)));
        }
        if claim.ephemeral {
            if let Some(reason) = ephemeral_owner_error(pvc, t) {
                return Err(Status::unresolvable(NAME, reason));
            }
        }
        found.push(pvc);
    }
    if found.iter().any(|pvc| bound_volume(pvc).is_none() && !delays_binding(extras, pvc)) {
        return Err(Status::unresolvable(NAME, REASON_UNBOUND_IMMEDIATE));
    }
    if let Some(pvc) = found.iter().find(|pvc| bound_volume(pvc).is_none()) {
        let name = pvc.metadata.name.as_deref().unwrap_or_default();
        return Err(Status::unresolvable(NAME, wait_for_first_consumer_reason(name)));
    }
    // Filter (`checkBoundClaims`): per node.
    for pvc in found {
        let Some(pv) = bound_volume(pvc).and_then(|name| extras.pv(name)) else {
            return Err(Status::unresolvable(NAME, REASON_PV_NOT_EXIST));
        };
        if !pv_node_affinity_matches(pv, node) {
            return Err(Status::unresolvable(NAME, REASON_VOLUME_NODE_AFFINITY));
        }
    }
    Ok(())
}

/// Whether a PersistentVolume's `spec.nodeAffinity.required` matches the node (no affinity
/// matches every node). Kubernetes' `CheckNodeAffinity` matches the terms against a node
/// made of the labels alone, so `matchFields` requirements are skipped: the node name is
/// left empty here for the same answer.
fn pv_node_affinity_matches(pv: &PersistentVolume, node: &NodeInfo) -> bool {
    let Some(required) = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref())
    else {
        return true;
    };
    let labels = node.labels();
    required.node_selector_terms.iter().any(|term| matching::term_matches(term, labels, ""))
}

/// VolumeZone: the zone and region labels of the PersistentVolumes bound to the pod's
/// claims (generic ephemeral volumes aside, as in kube-scheduler) must match the node's,
/// when the node has any such label. A label's value may list several zones separated by
/// `__`; a deprecated `failure-domain.beta.kubernetes.io` label also matches the node's
/// `topology.kubernetes.io` label.
fn volume_zone(extras: &Extras, t: &TaskInfo, node: &NodeInfo) -> Result<(), Status> {
    let ns = t.namespace();
    // PreFilter (`getPVbyPod`): the same answer on every node.
    let mut volumes: Vec<&Arc<PersistentVolume>> = Vec::new();
    for claim in claims(&t.pod, t.name()).filter(|c| !c.ephemeral) {
        let Some(pvc) = extras.pvc(ns, &claim.name) else {
            return Err(Status::unresolvable(NAME, pvc_not_found_reason(&claim.name)));
        };
        let Some(pv_name) = bound_volume(pvc) else {
            let class = claim_class(pvc);
            if class.is_empty() {
                return Err(Status::unresolvable(NAME, "PersistentVolumeClaim had no pv name and storageClass name"));
            }
            let Some(sc) = extras.storage_class(class) else {
                return Err(Status::unresolvable(NAME, format!("storageclass.storage.k8s.io {class:?} not found")));
            };
            if sc.volume_binding_mode.as_deref() == Some(WAIT_FOR_FIRST_CONSUMER) {
                continue;
            }
            return Err(Status::unresolvable(NAME, "PersistentVolume had no name"));
        };
        let Some(pv) = extras.pv(pv_name) else {
            return Err(Status::unresolvable(NAME, format!("persistentvolume {pv_name:?} not found")));
        };
        volumes.push(pv);
    }
    // Filter: per node.
    let labels = node.labels();
    if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
        // A node without zone labels (a single-zone cluster) takes any volume.
        return Ok(());
    }
    for pv in volumes {
        let Some(pv_labels) = pv.metadata.labels.as_ref() else { continue };
        for key in TOPOLOGY_LABELS {
            let Some(value) = pv_labels.get(key) else { continue };
            // kube-scheduler ignores a label whose list has an empty element.
            if value.split("__").any(|z| z.trim().is_empty()) {
                continue;
            }
            let node_value = labels.get(key).or_else(|| labels.get(ga_label(key)));
            if !node_value.is_some_and(|v| value.split("__").any(|z| z.trim() == v)) {
                return Err(Status::unresolvable(NAME, REASON_VOLUME_ZONE));
            }
        }
    }
    Ok(())
}

/// The `topology.kubernetes.io` label of a deprecated `failure-domain.beta.kubernetes.io`
/// one (the label itself otherwise).
fn ga_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        other => other,
    }
}

/// The CSI volumes a pod attaches, by unique name (`<driver>/<volume handle>`) → driver:
/// the PersistentVolumes with a `spec.csi` source bound to its claims, and its unbound
/// claims counted through their class's provisioner (kube-scheduler's
/// `filterAttachableVolumes`). Inline CSI volumes are not counted, as in kube-scheduler.
/// A claim that does not exist is an error for the pod being placed (`new_pod`), and not
/// counted for a pod already on the node.
fn attachable<'e>(
    extras: &'e Extras,
    pod: &Pod,
    key: &str,
    ns_len: usize,
    new_pod: bool,
    out: &mut HashMap<String, &'e str>,
) -> Result<(), Status> {
    let ns = &key[..ns_len];
    let name = &key[ns_len + 1..];
    for claim in claims(pod, name) {
        let Some(pvc) = extras.pvc(ns, &claim.name) else {
            if new_pod {
                let reason = format!("looking up PVC {ns}/{}: {}", claim.name, pvc_not_found_reason(&claim.name));
                return Err(Status::unresolvable(NAME, reason));
            }
            continue;
        };
        let csi = bound_volume(pvc).and_then(|pv| extras.pv(pv));
        match csi {
            Some(pv) => {
                // A bound volume that is not CSI is not counted here.
                let Some(src) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else { continue };
                if src.driver.is_empty() || src.volume_handle.is_empty() {
                    continue;
                }
                out.insert(format!("{}/{}", src.driver, src.volume_handle), src.driver.as_str());
            }
            None => {
                // Unbound, or bound to a volume not seen yet: the class's provisioner.
                let class = claim_class(pvc);
                let Some(sc) = (!class.is_empty()).then(|| extras.storage_class(class)).flatten() else { continue };
                let unique = format!("{}/{UNBOUND_HANDLE_PREFIX}-{ns}/{}", sc.provisioner, claim.name);
                out.insert(unique, sc.provisioner.as_str());
            }
        }
    }
    Ok(())
}

/// The CSI attach limit of each driver on the node: `attachable-volumes-csi-<driver>` in
/// the node's allocatable, overridden by the CSINode's `spec.drivers[].allocatable.count`.
fn volume_limits<'n>(extras: &'n Extras, node: &'n NodeInfo) -> BTreeMap<&'n str, i64> {
    let mut limits = BTreeMap::new();
    let allocatable = node.node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    for (name, q) in allocatable.into_iter().flatten() {
        if let Some(driver) = name.strip_prefix(CSI_ATTACH_LIMIT_PREFIX) {
            if let Ok(v) = volcano_api::quantity::parse(&q.0) {
                limits.insert(driver, v as i64);
            }
        }
    }
    if let Some(csi_node) = extras.csi_node(&node.name) {
        for d in &csi_node.spec.drivers {
            if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
                limits.insert(d.name.as_str(), i64::from(count));
            }
        }
    }
    limits
}

/// NodeVolumeLimits (CSI): per driver, the unique CSI volumes of the pods on the node plus
/// the pod's volumes not already attached there must not exceed the node's limit.
fn node_volume_limits(snap: &Snapshot, task: TaskId, node: &NodeInfo) -> Result<(), Status> {
    let extras = snap.extras();
    let t = snap.task(task);
    let mut new = HashMap::new();
    attachable(extras, &t.pod, &t.key, t.ns_len as usize, true, &mut new)?;
    if new.is_empty() {
        return Ok(());
    }
    let limits = volume_limits(extras, node);
    if limits.is_empty() {
        return Ok(());
    }
    let mut attached = HashMap::new();
    for &other in node.tasks.iter().filter(|&&o| o != task) {
        let o = snap.task(other);
        if has_claims(&o.pod) {
            // Errors of pods already placed are not the new pod's: they are ignored.
            let _ = attachable(extras, &o.pod, &o.key, o.ns_len as usize, false, &mut attached);
        }
    }
    let mut attached_count: BTreeMap<&str, i64> = BTreeMap::new();
    for (unique, driver) in &attached {
        new.remove(unique);
        *attached_count.entry(driver).or_default() += 1;
    }
    let mut new_count: BTreeMap<&str, i64> = BTreeMap::new();
    for driver in new.values() {
        *new_count.entry(driver).or_default() += 1;
    }
    for (driver, count) in new_count {
        if let Some(&max) = limits.get(driver) {
            if attached_count.get(driver).copied().unwrap_or(0) + count > max {
                return Err(Status::unschedulable(NAME, REASON_MAX_VOLUME_COUNT));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
