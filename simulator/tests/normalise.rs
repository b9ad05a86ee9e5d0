//! What the cluster does to objects before the scheduler sees them.

mod common;

use common::{docs, manifest, node, pod};
use volcano_api::crd::{PodGroupPhase, GROUP_NAME_ANNOTATION};
use volcano_sim::{normalise, InputError, Normalised, SIM_EPOCH_MS};

fn norm(yaml: &str) -> Normalised {
    normalise(manifest(yaml)).unwrap()
}

fn pod_with(ns: &str, name: &str, extra_meta: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {ns}\n{extra_meta}spec:\n  schedulerName: volcano-rs\n{extra_spec}  containers:\n  - name: c\n    image: i\n    resources: {{requests: {{cpu: \"2\", memory: 4Gi, nvidia.com/gpu: \"1\"}}, limits: {{nvidia.com/gpu: \"1\"}}}}\n"
    )
}

#[test]
fn namespaces_default_and_cluster_scoped_objects_have_none() {
    let n = norm(&docs(&[
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}]}\n".into(),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, namespace: kube-system}\n".into(),
    ]));
    assert!(n.cluster.pods.contains_key("default/p"));
    assert_eq!(n.cluster.nodes["n"].metadata.namespace, None);
    let p = &n.cluster.pods["default/p"];
    assert_eq!(p.spec.as_ref().unwrap().scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));
}

#[test]
fn default_queues_are_created_when_missing() {
    let n = norm(&node("n", "1", "1Gi"));
    let root = &n.cluster.queues["root"];
    assert_eq!((root.spec.weight, root.spec.reclaimable), (Some(1), Some(false)));
    let default = &n.cluster.queues["default"];
    assert_eq!((default.spec.weight, default.spec.reclaimable), (Some(1), Some(true)));
    assert!(n.origins.get(volcano_sim::ObjectKind::Queue, "default").is_none());

    let n =
        norm("apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: default}\nspec: {weight: 5}\n");
    assert_eq!(n.cluster.queues["default"].spec.weight, Some(5));
    assert_eq!(n.cluster.queues.len(), 2);
}

#[test]
fn plain_pods_get_a_pod_group() {
    let n = norm(&docs(&[
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 100\n".into(),
        pod_with(
            "ml",
            "solo",
            "  uid: u-1234\n  annotations: {scheduling.volcano.sh/queue-name: research, volcano.sh/preemptable: \"true\"}\n",
            "  priorityClassName: high\n",
        ),
        pod_with("ml", "grouped", "  annotations: {scheduling.k8s.io/group-name: mine}\n", ""),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: other, namespace: ml}\nspec: {containers: [{name: c, image: i}]}\n".into(),
    ]));
    let pg = &n.cluster.pod_groups["ml/podgroup-u-1234"];
    assert_eq!(pg.spec.min_member, 1);
    assert_eq!(pg.spec.queue.as_deref(), Some("research"));
    assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
    let min: Vec<(&str, &str)> =
        pg.spec.min_resources.as_ref().unwrap().iter().map(|(k, v)| (k.as_str(), v.0.as_str())).collect();
    assert_eq!(min, [("cpu", "2"), ("memory", "4Gi"), ("nvidia.com/gpu", "1")]);
    assert_eq!(pg.status.as_ref().unwrap().phase, Some(PodGroupPhase::Pending));
    assert_eq!(pg.metadata.annotations.as_ref().unwrap()["volcano.sh/preemptable"], "true");
    assert_eq!(pg.metadata.creation_timestamp, n.cluster.pods["ml/solo"].metadata.creation_timestamp);
    let ann = n.cluster.pods["ml/solo"].metadata.annotations.clone().unwrap();
    assert_eq!(ann[GROUP_NAME_ANNOTATION], "podgroup-u-1234");
    // A pod that names its group and a pod of another scheduler get none.
    assert_eq!(n.cluster.pod_groups.len(), 1);
    assert!(n.cluster.pods["ml/other"].metadata.annotations.is_none());
}

#[test]
fn pods_of_one_owner_share_a_pod_group() {
    let owner = "  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-1, controller: true}]\n";
    let n = norm(&docs(&[pod_with("ml", "a", owner, ""), pod_with("ml", "b", owner, "")]));
    assert_eq!(n.cluster.pod_groups.keys().collect::<Vec<_>>(), ["ml/podgroup-rs-1"]);
    for p in ["ml/a", "ml/b"] {
        assert_eq!(n.cluster.pods[p].metadata.annotations.as_ref().unwrap()[GROUP_NAME_ANNOTATION], "podgroup-rs-1");
    }
}

#[test]
fn pod_priority_comes_from_its_class_or_the_global_default() {
    let classes = docs(&[
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 100\npreemptionPolicy: Never\n".into(),
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: normal}\nvalue: 10\nglobalDefault: true\n".into(),
    ]);
    let n = norm(&docs(&[
        classes.clone(),
        pod_with("ml", "a", "", "  priorityClassName: high\n"),
        pod_with("ml", "b", "", ""),
        pod_with("ml", "c", "", "  priority: 7\n  priorityClassName: high\n"),
        pod_with("ml", "d", "", "  priorityClassName: system-node-critical\n"),
    ]));
    let spec = |p: &str| n.cluster.pods[p].spec.clone().unwrap();
    assert_eq!((spec("ml/a").priority, spec("ml/a").preemption_policy.as_deref()), (Some(100), Some("Never")));
    assert_eq!((spec("ml/b").priority, spec("ml/b").priority_class_name.as_deref()), (Some(10), Some("normal")));
    assert_eq!(spec("ml/c").priority, Some(7));
    assert_eq!(spec("ml/d").priority, Some(2_000_001_000));

    let n = norm(&pod_with("ml", "a", "", ""));
    assert_eq!(n.cluster.pods["ml/a"].spec.as_ref().unwrap().priority, Some(0));
}

#[test]
fn unknown_priority_class_is_rejected_like_the_admission_plugin_does() {
    let err = normalise(manifest(&pod_with("ml", "a", "", "  priorityClassName: nope\n"))).unwrap_err();
    let InputError::Field { field, object, .. } = &err else { panic!("{err:?}") };
    assert_eq!((field.as_str(), object.as_str()), ("spec.priorityClassName", "ml/a"));
    assert!(
        err.to_string().starts_with(
            "test.yaml: document 1 (line 1): Pod ml/a: field spec.priorityClassName: no PriorityClass named \"nope\""
        ),
        "{err}"
    );
}

#[test]
fn two_global_defaults_are_rejected() {
    let pc = |name: &str| {
        format!("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: 1\nglobalDefault: true\n")
    };
    let err = normalise(manifest(&docs(&[pc("a"), pc("b")]))).unwrap_err();
    assert!(
        err.to_string().contains("PriorityClass b: field globalDefault: PriorityClass a is already the global default"),
        "{err}"
    );
}

#[test]
fn creation_times_follow_input_order_and_uids_are_deterministic() {
    let text = docs(&[pod("ml", "z", "1", "1Gi"), pod("ml", "a", "1", "1Gi"), node("n", "1", "1Gi")]);
    let n = norm(&text);
    let t = |p: &str| n.cluster.pods[p].metadata.creation_timestamp.clone().unwrap().0.as_millisecond();
    assert!(t("ml/z") < t("ml/a"), "input order, not name order");
    assert_eq!(t("ml/a") - t("ml/z"), 1000);
    let node_t = n.cluster.nodes["n"].metadata.creation_timestamp.clone().unwrap().0.as_millisecond();
    assert_eq!(node_t, SIM_EPOCH_MS - 1000, "the last object is one second before the epoch");
    assert_eq!(n.latest_creation_ms, SIM_EPOCH_MS - 1000);
    let again = norm(&text);
    assert_eq!(n.cluster.pods["ml/a"].metadata.uid, again.cluster.pods["ml/a"].metadata.uid);
    assert_ne!(n.cluster.pods["ml/a"].metadata.uid, n.cluster.pods["ml/z"].metadata.uid);
}

#[test]
fn explicit_times_and_uids_are_kept() {
    let n = norm(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n, uid: u-1, creationTimestamp: \"2027-03-01T10:00:00Z\"}\n",
    );
    let node = &n.cluster.nodes["n"];
    assert_eq!(node.metadata.uid.as_deref(), Some("u-1"));
    assert_eq!(node.metadata.creation_timestamp.clone().unwrap().0.to_string(), "2027-03-01T10:00:00Z");
    assert_eq!(n.latest_creation_ms, node.metadata.creation_timestamp.clone().unwrap().0.as_millisecond());
}

#[test]
fn namespaces_and_volume_objects_are_read_and_kept() {
    let n = norm(&docs(&[
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml, labels: {team: a}}\n".into(),
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}, volumeName: pv1}\n".into(),
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1, namespace: ignored}\nspec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, csi: {driver: d, volumeHandle: h}}\n".into(),
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\nprovisioner: d\nvolumeBindingMode: WaitForFirstConsumer\n".into(),
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\nspec: {drivers: [{name: d, nodeID: i-1, allocatable: {count: 2}}]}\n".into(),
        // A pod in a namespace without a Namespace object is accepted, as before.
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: other}\nspec: {containers: [{name: c, image: i}]}\n".into(),
    ]));
    let c = &n.cluster;
    assert_eq!(c.namespaces["ml"].metadata.labels.as_ref().unwrap()["team"], "a");
    assert!(!c.namespaces.contains_key("other"));
    assert_eq!(c.pvcs["default/data"].metadata.namespace.as_deref(), Some("default"));
    assert_eq!(c.pvs["pv1"].metadata.namespace, None);
    assert!(c.storage_classes.contains_key("fast") && c.csi_nodes.contains_key("n1"));
    let o = c.objects();
    assert_eq!(
        (o.namespaces.len(), o.pvcs.len(), o.pvs.len(), o.storage_classes.len(), o.csi_nodes.len()),
        (1, 1, 1, 1, 1)
    );
}

#[test]
fn services_and_workload_controllers_are_read_and_kept() {
    let n = norm(&docs(&[
        "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\nstatus: {loadBalancer: {}}\n".into(),
        "apiVersion: v1\nkind: Service\nmetadata: {name: headless, namespace: ml}\nspec: {clusterIP: None}\n".into(),
        // The API server defaults an RC's empty selector to its template's labels.
        "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: old, namespace: ml}\nspec: {replicas: 2, template: {metadata: {labels: {app: old}}, spec: {containers: [{name: c, image: i}]}}}\n".into(),
        "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web-7d9f, namespace: ml}\nspec: {selector: {matchLabels: {app: web}, matchExpressions: [{key: tier, operator: In, values: [a]}]}, template: {metadata: {labels: {app: web, tier: a}}, spec: {containers: [{name: c, image: i}]}}}\nstatus: {replicas: 0}\n".into(),
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {serviceName: db, selector: {matchLabels: {app: db}}, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: i}]}}}\n".into(),
    ]));
    let c = &n.cluster;
    assert_eq!(c.services["default/web"].metadata.namespace.as_deref(), Some("default"));
    assert!(c.services.contains_key("ml/headless"));
    let rc = &c.replication_controllers["ml/old"];
    assert_eq!(rc.spec.as_ref().unwrap().selector.as_ref().unwrap()["app"], "old");
    assert!(c.replica_sets.contains_key("ml/web-7d9f") && c.stateful_sets.contains_key("default/db"));
    assert!(n.origins.get(volcano_sim::ObjectKind::ReplicaSet, "ml/web-7d9f").is_some());
    let o = c.objects();
    assert_eq!(
        (o.services.len(), o.replication_controllers.len(), o.replica_sets.len(), o.stateful_sets.len()),
        (2, 1, 1, 1)
    );
    let extras = volcano_framework::Extras::from_objects(&o);
    let labels = [("app".to_string(), "web".to_string())].into_iter().collect();
    assert_eq!(extras.services_selecting("default", &labels), vec![&labels]);
    assert!(extras.replica_set("ml", "web-7d9f").is_some() && extras.stateful_set("default", "db").is_some());
    assert!(extras.replication_controller("ml", "old").is_some());
}

#[test]
fn invalid_volume_and_workload_objects_name_object_field_and_expectation() {
    let cases = [
        (
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: ml}\nspec: {resources: {requests: {storage: 1Gi}}}\n",
            ("PersistentVolumeClaim", "ml/data", "spec.accessModes"),
            "required: at least one access mode",
        ),
        (
            "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv1}\nspec: {accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, csi: {driver: d, volumeHandle: \"\"}}\n",
            ("PersistentVolume", "pv1", "spec.csi.volumeHandle"),
            "required",
        ),
        (
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: fast}\nprovisioner: d\nvolumeBindingMode: Later\n",
            ("StorageClass", "fast", "volumeBindingMode"),
            "unknown mode \"Later\"; expected one of Immediate, WaitForFirstConsumer",
        ),
        (
            "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\nspec: {drivers: [{name: d, nodeID: i, allocatable: {count: -1}}]}\n",
            ("CSINode", "n1", "spec.drivers[0].allocatable.count"),
            "-1 is negative",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ml}\nspec: {selector: {app: \"a b\"}}\n",
            ("Service", "ml/web", "spec.selector[app]"),
            "\"a b\" is not a valid label value",
        ),
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: web.v2}\nspec: {}\n",
            ("Service", "default/web.v2", "metadata.name"),
            "\"web.v2\" is not a DNS-1123 label",
        ),
        (
            "apiVersion: v1\nkind: ReplicationController\nmetadata: {name: old}\nspec: {template: {spec: {containers: [{name: c, image: i}]}}}\n",
            ("ReplicationController", "default/old", "spec.selector"),
            "required",
        ),
        (
            "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: web, namespace: ml}\nspec: {selector: {}, template: {}}\n",
            ("ReplicaSet", "ml/web", "spec.selector"),
            "empty selector is invalid for a ReplicaSet",
        ),
        (
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {selector: {matchExpressions: [{key: app, operator: In}]}, template: {}}\n",
            ("StatefulSet", "default/db", "spec.selector.matchExpressions[0].values"),
            "required: at least one value with operator In",
        ),
        (
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {selector: {matchExpressions: [{key: app, operator: Exists, values: [x]}]}, template: {}}\n",
            ("StatefulSet", "default/db", "spec.selector.matchExpressions[0].values"),
            "must be empty with operator Exists",
        ),
        (
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: Bad.Name}\n",
            ("Namespace", "Bad.Name", "metadata.name"),
            "",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: i}], volumes: [{name: data, persistentVolumeClaim: {claimName: \"\"}}]}\n",
            ("Pod", "default/p", "spec.volumes[0].persistentVolumeClaim.claimName"),
            "required",
        ),
    ];
    for (yaml, (kind, object, field), message) in cases {
        let err = normalise(manifest(yaml)).err().unwrap_or_else(|| panic!("{yaml}"));
        let InputError::Field { kind: k, object: o, field: f, message: m, .. } = &err else { panic!("{err:?}") };
        assert_eq!((*k, o.as_str(), f.as_str()), (kind, object, field), "{err}");
        assert!(m.starts_with(message), "{m}");
    }
}

const LEAF: &str = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: leaf-0, namespace: ignored}\nspec: {tier: 1, members: [{type: Node, selector: {exactMatch: {name: n1}}}, {type: Node, selector: {labelMatch: {matchLabels: {rack: r1}}}}]}\n";
const SPINE: &str = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: spine-0}\nspec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: leaf-0}}}]}\n";

#[test]
fn hyper_nodes_are_kept_and_reach_the_snapshot_extras() {
    use volcano_framework::snapshot::SnapshotSource;
    let n = norm(&docs(&[node("n1", "4", "8Gi"), LEAF.into(), SPINE.into()]));
    let c = &n.cluster;
    assert_eq!(c.hyper_nodes.keys().collect::<Vec<_>>(), ["leaf-0", "spine-0"]);
    assert_eq!(c.hyper_nodes["leaf-0"].metadata.namespace, None, "cluster-scoped");
    assert!(c.hyper_nodes["spine-0"].metadata.uid.is_some());
    assert!(n.origins.get(volcano_sim::ObjectKind::HyperNode, "spine-0").is_some());
    let extra = SnapshotSource::extra_objects(c);
    assert_eq!(extra.hyper_nodes.len(), 2);
    assert!(extra.nodes.is_empty() && extra.pods.is_empty());
    let extras = volcano_framework::Extras::from_objects(&c.objects());
    assert_eq!(extras.hyper_nodes.keys().collect::<Vec<_>>(), ["leaf-0", "spine-0"]);
}

#[test]
fn invalid_hyper_nodes_name_file_object_and_field() {
    let cases = [
        (
            LEAF.replace("{exactMatch: {name: n1}}", "{regexMatch: {pattern: \"n[0-9\"}}"),
            "spec.members[0].selector.regexMatch.pattern",
            "member regexMatch pattern is invalid: unclosed character class",
        ),
        (
            LEAF.replace("{exactMatch: {name: n1}}", "{exactMatch: {name: n1}, regexMatch: {pattern: n}}"),
            "spec.members[0].selector",
            "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
        ),
        (
            LEAF.replace("type: Node, selector: {labelMatch", "type: Rack, selector: {labelMatch"),
            "spec.members[1].type",
            "unsupported value \"Rack\"; expected one of Node, HyperNode",
        ),
        (LEAF.replace("tier: 1", "tier: -1"), "spec.tier", "-1 is negative"),
        (
            SPINE.replace(
                "spec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: leaf-0}}}]}",
                "spec: {tier: 2}",
            ),
            "spec.members",
            "required: member must have at least one member",
        ),
        (
            SPINE
                .replace("\nspec: {tier: 2, members: [{type: HyperNode, selector: {exactMatch: {name: leaf-0}}}]}", ""),
            "spec.members",
            "required: member must have at least one member",
        ),
        (SPINE.replace("tier: 2, ", ""), "spec.tier", "required: the HyperNode's tier"),
    ];
    for (yaml, field, message) in cases {
        let text = docs(&[node("n1", "4", "8Gi"), yaml.clone()]);
        // Reading refuses a spec without its tier; normalising, the others.
        let mut m = volcano_sim::Manifest::new();
        let err = match m.load_str("test.yaml", &text) {
            Err(e) => e,
            Ok(()) => normalise(m).err().unwrap_or_else(|| panic!("{yaml}")),
        };
        let InputError::Field { origin, kind, field: f, message: m, .. } = &err else { panic!("{err:?}") };
        assert_eq!((*kind, f.as_str()), ("HyperNode", field), "{err}");
        assert!(m.starts_with(message), "{m}");
        assert_eq!(origin.as_ref().map(|o| o.document), Some(2), "{err}");
    }
}
