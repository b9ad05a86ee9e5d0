use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, EphemeralVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
    PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Volume, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, StorageClass, VolumeNodeResources};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde_json::json;
use volcano_framework::{Snapshot, Status};
use volcano_testkit::{node, pod, NodeBuilder, Objects, PodBuilder};

use super::*;
use crate::predicates::tests::{n1, p, plugin, unresolvable, unschedulable};
use volcano_testkit::fixtures::task_named;

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: ns.map(Into::into), ..Default::default() }
}

fn pvc(name: &str, volume: Option<&str>, class: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta(Some("ns"), name),
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: volume.map(Into::into),
            storage_class_name: class.map(Into::into),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pv(name: &str) -> PersistentVolume {
    PersistentVolume { metadata: meta(None, name), spec: Some(PersistentVolumeSpec::default()), ..Default::default() }
}

fn csi_pv(name: &str, driver: &str) -> PersistentVolume {
    let mut v = pv(name);
    v.spec.as_mut().unwrap().csi = Some(CSIPersistentVolumeSource {
        driver: driver.into(),
        volume_handle: format!("handle-{name}"),
        ..Default::default()
    });
    v
}

fn class(name: &str, mode: &str, provisioner: &str) -> StorageClass {
    StorageClass {
        metadata: meta(None, name),
        provisioner: provisioner.into(),
        volume_binding_mode: Some(mode.into()),
        ..Default::default()
    }
}

fn csi_node(name: &str, driver: &str, count: i32) -> CSINode {
    CSINode {
        metadata: meta(None, name),
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: driver.into(),
                node_id: name.into(),
                allocatable: Some(VolumeNodeResources { count: Some(count) }),
                ..Default::default()
            }],
        },
    }
}

fn claim_volume(volume: &str, claim: &str) -> Volume {
    Volume {
        name: volume.into(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: claim.into(), read_only: None }),
        ..Default::default()
    }
}

fn with_claims(p: PodBuilder, claims: &[&str]) -> PodBuilder {
    let volumes: Vec<Volume> = claims.iter().enumerate().map(|(i, c)| claim_volume(&format!("v{i}"), c)).collect();
    p.with_spec(move |s| s.volumes = Some(volumes))
}

#[derive(Default)]
struct Volumes {
    pvcs: Vec<PersistentVolumeClaim>,
    pvs: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
    csi_nodes: Vec<CSINode>,
}

fn snapshot(nodes: Vec<NodeBuilder>, pods: Vec<PodBuilder>, v: Volumes) -> Snapshot {
    let mut objs = Objects::new();
    for n in nodes {
        objs = objs.node(n);
    }
    for p in pods {
        objs = objs.pod(p);
    }
    objs.0.pvcs = v.pvcs.into_iter().map(Arc::new).collect();
    objs.0.pvs = v.pvs.into_iter().map(Arc::new).collect();
    objs.0.storage_classes = v.classes.into_iter().map(Arc::new).collect();
    objs.0.csi_nodes = v.csi_nodes.into_iter().map(Arc::new).collect();
    objs.snapshot()
}

/// The predicate of pending pod `p` on node `n1`.
fn run(args: serde_json::Value, snap: &Snapshot) -> Result<(), Status> {
    plugin(args).predicate(snap, task_named(snap, "p"), snap.node_id("n1").unwrap())
}

fn affinity(pv: &mut PersistentVolume, key: &str, values: &[&str]) {
    pv.spec.as_mut().unwrap().node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(values.iter().map(|v| v.to_string()).collect()),
                }]),
                match_fields: None,
            }],
        }),
    });
}

// ----- fast path -----

#[test]
fn pods_without_claims_pass() {
    let snap = snapshot(vec![n1()], vec![p()], Volumes::default());
    assert_eq!(run(json!({}), &snap), Ok(()));
    let empty_dir = p().with_spec(|s| {
        s.volumes = Some(vec![Volume { name: "tmp".into(), empty_dir: Some(Default::default()), ..Default::default() }])
    });
    let snap = snapshot(vec![n1()], vec![empty_dir], Volumes::default());
    assert_eq!(run(json!({}), &snap), Ok(()));
}

// ----- VolumeBinding -----

#[test]
fn a_missing_claim_is_refused_with_its_name() {
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], Volumes::default());
    assert_eq!(run(json!({}), &snap), unresolvable("persistentvolumeclaim \"data\" not found"));
    // Switched off: VolumeZone and NodeVolumeLimits say it too, as in kube-scheduler.
    let off = json!({"predicate.VolumeBindingEnable": false});
    assert_eq!(run(off, &snap), unresolvable("persistentvolumeclaim \"data\" not found"));
    let all_off = json!({"predicate.VolumeBindingEnable": false, "predicate.VolumeZoneEnable": false,
        "predicate.NodeVolumeLimitsEnable": false});
    assert_eq!(run(all_off, &snap), Ok(()));
}

#[test]
fn a_claim_being_deleted_or_lost_is_refused() {
    let mut deleting = pvc("data", Some("pv1"), None);
    deleting.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let v = Volumes { pvcs: vec![deleting], pvs: vec![pv("pv1")], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(run(json!({}), &snap), unresolvable("persistentvolumeclaim \"data\" is being deleted"));

    let mut lost = pvc("data", Some("pv1"), None);
    lost.status = Some(PersistentVolumeClaimStatus { phase: Some("Lost".into()), ..Default::default() });
    let v = Volumes { pvcs: vec![lost], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(
        run(json!({}), &snap),
        unresolvable("persistentvolumeclaim \"data\" bound to non-existent persistentvolume \"pv1\"")
    );
}

#[test]
fn an_unbound_immediate_claim_is_refused() {
    for classes in [vec![], vec![class("fast", "Immediate", "csi.example.com")]] {
        for class_name in [None, Some("fast")] {
            let v =
                Volumes { pvcs: vec![pvc("data", None, class_name)], classes: classes.clone(), ..Default::default() };
            let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
            assert_eq!(run(json!({}), &snap), unresolvable(REASON_UNBOUND_IMMEDIATE), "{class_name:?}");
        }
    }
}

#[test]
fn an_unbound_wait_for_first_consumer_claim_is_refused_as_not_done() {
    let v = Volumes {
        pvcs: vec![pvc("data", None, Some("local"))],
        classes: vec![class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")],
        ..Default::default()
    };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(
        run(json!({}), &snap),
        unresolvable("volcano-rs does not bind WaitForFirstConsumer volumes yet: persistentvolumeclaim \"data\"")
    );
    // An immediate claim that is unbound wins, as kube-scheduler's PreFilter reports it.
    let v = Volumes {
        pvcs: vec![pvc("data", None, Some("local")), pvc("other", None, None)],
        classes: vec![class("local", "WaitForFirstConsumer", "kubernetes.io/no-provisioner")],
        ..Default::default()
    };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data", "other"])], v);
    assert_eq!(run(json!({}), &snap), unresolvable(REASON_UNBOUND_IMMEDIATE));
}

#[test]
fn a_bound_volume_must_exist_and_its_node_affinity_match() {
    let v = Volumes { pvcs: vec![pvc("data", Some("pv1"), None)], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(run(json!({}), &snap), unresolvable(REASON_PV_NOT_EXIST));

    let mut local = pv("pv1");
    affinity(&mut local, "kubernetes.io/hostname", &["n2"]);
    let v = Volumes { pvcs: vec![pvc("data", Some("pv1"), None)], pvs: vec![local], ..Default::default() };
    let nodes =
        vec![n1().label("kubernetes.io/hostname", "n1"), node("n2", "8", "16Gi").label("kubernetes.io/hostname", "n2")];
    let snap = snapshot(nodes, vec![with_claims(p(), &["data"])], v);
    assert_eq!(run(json!({}), &snap), unresolvable(REASON_VOLUME_NODE_AFFINITY));
    let on_n2 = plugin(json!({})).predicate(&snap, task_named(&snap, "p"), snap.node_id("n2").unwrap());
    assert_eq!(on_n2, Ok(()));
    assert_eq!(run(json!({"predicate.VolumeBindingEnable": false}), &snap), Ok(()));
}

#[test]
fn an_ephemeral_volume_needs_its_claim_owned_by_the_pod() {
    let ephemeral = p().with_spec(|s| {
        s.volumes = Some(vec![Volume {
            name: "scratch".into(),
            ephemeral: Some(EphemeralVolumeSource::default()),
            ..Default::default()
        }])
    });
    let snap = snapshot(vec![n1()], vec![ephemeral.clone()], Volumes::default());
    assert_eq!(
        run(json!({}), &snap),
        unresolvable("waiting for ephemeral volume controller to create the persistentvolumeclaim \"p-scratch\"")
    );
    let uid = snap.task(task_named(&snap, "p")).pod_uid.to_string();
    let mut claim = pvc("p-scratch", Some("pv1"), None);
    let v = Volumes { pvcs: vec![claim.clone()], pvs: vec![pv("pv1")], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![ephemeral.clone()], v);
    assert_eq!(run(json!({}), &snap), unresolvable("PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"));
    claim.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "p".into(),
        uid,
        controller: Some(true),
        ..Default::default()
    }]);
    let v = Volumes { pvcs: vec![claim], pvs: vec![pv("pv1")], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![ephemeral], v);
    assert_eq!(run(json!({}), &snap), Ok(()));
}

// ----- VolumeZone -----

fn zonal(zone_value: &str) -> Volumes {
    let mut v = pv("pv1");
    v.metadata.labels = Some([("topology.kubernetes.io/zone".to_string(), zone_value.to_string())].into());
    Volumes { pvcs: vec![pvc("data", Some("pv1"), None)], pvs: vec![v], ..Default::default() }
}

#[test]
fn a_zonal_volume_needs_a_node_of_its_zone() {
    let pod = || with_claims(p(), &["data"]);
    let in_zone = |z: &str| n1().label("topology.kubernetes.io/zone", z);
    let snap = snapshot(vec![in_zone("a")], vec![pod()], zonal("a"));
    assert_eq!(run(json!({}), &snap), Ok(()));
    let snap = snapshot(vec![in_zone("b")], vec![pod()], zonal("a"));
    assert_eq!(run(json!({}), &snap), unresolvable(REASON_VOLUME_ZONE));
    assert_eq!(run(json!({"predicate.VolumeZoneEnable": false}), &snap), Ok(()));
    // Several zones, separated by `__`.
    let snap = snapshot(vec![in_zone("b")], vec![pod()], zonal("a__b"));
    assert_eq!(run(json!({}), &snap), Ok(()));
    // A label with an empty zone is ignored.
    let snap = snapshot(vec![in_zone("b")], vec![pod()], zonal("a__"));
    assert_eq!(run(json!({}), &snap), Ok(()));
    // A node without any zone or region label takes the volume.
    let snap = snapshot(vec![n1()], vec![pod()], zonal("a"));
    assert_eq!(run(json!({}), &snap), Ok(()));
    // A node with a region label but no zone label does not.
    let snap = snapshot(vec![n1().label("topology.kubernetes.io/region", "r")], vec![pod()], zonal("a"));
    assert_eq!(run(json!({}), &snap), unresolvable(REASON_VOLUME_ZONE));
}

#[test]
fn a_deprecated_zone_label_matches_the_nodes_current_one() {
    let mut v = zonal("a");
    v.pvs[0].metadata.labels = Some([("failure-domain.beta.kubernetes.io/zone".to_string(), "a".to_string())].into());
    let snap = snapshot(vec![n1().label("topology.kubernetes.io/zone", "a")], vec![with_claims(p(), &["data"])], v);
    assert_eq!(run(json!({}), &snap), Ok(()));
}

#[test]
fn volume_zone_alone_reports_unbound_claims_as_kube_scheduler_does() {
    let zone_only = json!({"predicate.VolumeBindingEnable": false, "predicate.NodeVolumeLimitsEnable": false});
    let v = Volumes { pvcs: vec![pvc("data", None, None)], ..Default::default() };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(
        run(zone_only.clone(), &snap),
        unresolvable("PersistentVolumeClaim had no pv name and storageClass name")
    );
    let v = Volumes {
        pvcs: vec![pvc("data", None, Some("local"))],
        classes: vec![class("local", "WaitForFirstConsumer", "x")],
        ..Default::default()
    };
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["data"])], v);
    assert_eq!(run(zone_only, &snap), Ok(()), "skipped until bound");
}

// ----- NodeVolumeLimits -----

#[test]
fn csi_volumes_respect_the_attach_limit() {
    let limits_only = json!({"predicate.VolumeBindingEnable": false, "predicate.VolumeZoneEnable": false});
    let v = || Volumes {
        pvcs: vec![pvc("a", Some("pv-a"), None), pvc("b", Some("pv-b"), None)],
        pvs: vec![csi_pv("pv-a", "ebs.csi.aws.com"), csi_pv("pv-b", "ebs.csi.aws.com")],
        csi_nodes: vec![csi_node("n1", "ebs.csi.aws.com", 1)],
        ..Default::default()
    };
    let running = with_claims(pod("ns", "q").cpu_mem("1", "1Gi"), &["a"]).running_on("n1");
    // The node holds one volume of its limit of one: a different volume does not fit.
    let snap = snapshot(vec![n1()], vec![running.clone(), with_claims(p(), &["b"])], v());
    assert_eq!(run(json!({}), &snap), unschedulable(REASON_MAX_VOLUME_COUNT));
    assert_eq!(run(limits_only.clone(), &snap), unschedulable(REASON_MAX_VOLUME_COUNT));
    assert_eq!(run(json!({"predicate.NodeVolumeLimitsEnable": false}), &snap), Ok(()));
    // The same volume is attached once.
    let snap = snapshot(vec![n1()], vec![running.clone(), with_claims(p(), &["a"])], v());
    assert_eq!(run(json!({}), &snap), Ok(()));
    // An empty node takes one, not two.
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["a"])], v());
    assert_eq!(run(json!({}), &snap), Ok(()));
    let snap = snapshot(vec![n1()], vec![with_claims(p(), &["a", "b"])], v());
    assert_eq!(run(json!({}), &snap), unschedulable(REASON_MAX_VOLUME_COUNT));
    // Another driver's limit does not apply.
    let mut other = v();
    other.csi_nodes = vec![csi_node("n1", "pd.csi.storage.gke.io", 1)];
    let snap = snapshot(vec![n1()], vec![running.clone(), with_claims(p(), &["b"])], other);
    assert_eq!(run(json!({}), &snap), Ok(()));
    // No CSINode, no limit; the node's allocatable `attachable-volumes-csi-<driver>` is one.
    let mut none = v();
    none.csi_nodes.clear();
    let snap = snapshot(vec![n1()], vec![running.clone(), with_claims(p(), &["b"])], none);
    assert_eq!(run(json!({}), &snap), Ok(()));
    let mut none = v();
    none.csi_nodes.clear();
    let limited = n1().res("attachable-volumes-csi-ebs.csi.aws.com", "1");
    let snap = snapshot(vec![limited], vec![running, with_claims(p(), &["b"])], none);
    assert_eq!(run(json!({}), &snap), unschedulable(REASON_MAX_VOLUME_COUNT));
}

#[test]
fn unbound_claims_count_through_their_class_provisioner() {
    let limits_only = json!({"predicate.VolumeBindingEnable": false, "predicate.VolumeZoneEnable": false});
    let v = Volumes {
        pvcs: vec![pvc("a", Some("pv-a"), None), pvc("b", None, Some("ebs"))],
        pvs: vec![csi_pv("pv-a", "ebs.csi.aws.com")],
        classes: vec![class("ebs", "WaitForFirstConsumer", "ebs.csi.aws.com")],
        csi_nodes: vec![csi_node("n1", "ebs.csi.aws.com", 1)],
    };
    let running = with_claims(pod("ns", "q").cpu_mem("1", "1Gi"), &["a"]).running_on("n1");
    let snap = snapshot(vec![n1()], vec![running, with_claims(p(), &["b"])], v);
    assert_eq!(run(limits_only, &snap), unschedulable(REASON_MAX_VOLUME_COUNT));
}
