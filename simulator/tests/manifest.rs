//! Reading manifests: kinds, Lists, JSON and YAML, and errors that name the file, the
//! document, the object and the field.

mod common;

use common::{docs, manifest, node, pod, profile};
use volcano_sim::{InputError, Manifest, Object, ObjectKind, SimError, Simulator};

fn load_err(file: &str, text: &str) -> InputError {
    Manifest::new().load_str(file, text).expect_err("the manifest is invalid")
}

#[test]
fn unknown_kind_names_file_document_and_object() {
    let text = docs(&[
        node("n1", "4", "8Gi"),
        "apiVersion: apps.example.com/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n".into(),
    ]);
    let err = load_err("cluster.yaml", &text);
    assert_eq!(err.category(), "unknown_kind");
    let InputError::UnknownKind { origin, kind, api_version, object } = &err else { panic!("{err:?}") };
    assert_eq!((origin.file.as_str(), origin.document, origin.line), ("cluster.yaml", 2, Some(6)));
    assert_eq!(
        (kind.as_str(), api_version.as_str(), object.as_deref()),
        ("Deployment", "apps.example.com/v1", Some("web"))
    );
    let msg = err.to_string();
    assert!(msg.starts_with("cluster.yaml: document 2 (line 6): object web: unknown kind \"Deployment\""), "{msg}");
    assert!(msg.contains("scheduling.volcano.sh/v1beta1 PodGroup"), "{msg}");
}

#[test]
fn known_kind_with_another_api_version_is_unknown() {
    let err = load_err("a.yaml", "apiVersion: scheduling.volcano.sh/v1alpha1\nkind: PodGroup\nmetadata: {name: pg}\n");
    assert_eq!(err.category(), "unknown_kind");
}

#[test]
fn volcano_job_is_read_and_another_version_is_unknown() {
    let mut m = Manifest::new();
    m.load_str("job.yaml", "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: j}\nspec: {}\n")
        .unwrap();
    assert_eq!(m.entries[0].object.kind(), volcano_sim::ObjectKind::Job);
    let err = load_err("job.yaml", "apiVersion: batch.volcano.sh/v1beta1\nkind: Job\nmetadata: {name: j}\nspec: {}\n");
    assert_eq!(err.category(), "unknown_kind");
    assert!(err.to_string().contains("job.yaml: document 1"), "{err}");
}

#[test]
fn missing_kind_and_non_objects_are_errors() {
    let err = load_err("a.yaml", "apiVersion: v1\nmetadata: {name: x}\n");
    assert_eq!(err.category(), "missing_type");
    assert!(err.to_string().contains("field kind: expected a string, found nothing"), "{err}");
    let err = load_err("a.yaml", "- a\n- b\n");
    assert_eq!(err.category(), "not_an_object");
    assert!(err.to_string().contains("found a list"), "{err}");
}

#[test]
fn wrong_type_names_the_field_path() {
    let text = docs(&[
        node("n1", "4", "8Gi"),
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: pg, namespace: ml}\nspec: {minMember: three}\n"
            .into(),
    ]);
    let err = load_err("pg.yaml", &text);
    let InputError::Field { origin, kind, object, field, message } = &err else { panic!("{err:?}") };
    assert_eq!(origin.as_ref().map(|o| o.document), Some(2));
    assert_eq!((*kind, object.as_str(), field.as_str()), ("PodGroup", "ml/pg", "spec.minMember"));
    assert!(message.contains("invalid type"), "{message}");
    assert!(
        err.to_string().starts_with("pg.yaml: document 2 (line 6): PodGroup ml/pg: field spec.minMember: "),
        "{err}"
    );
}

#[test]
fn missing_name_and_containers_are_errors() {
    let err = load_err("a.yaml", "apiVersion: v1\nkind: Node\nmetadata: {}\n");
    let InputError::Field { field, object, .. } = &err else { panic!("{err:?}") };
    assert_eq!((field.as_str(), object.as_str()), ("metadata.name", "(unnamed)"));
    let err = load_err("a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n");
    let InputError::Field { field, object, .. } = &err else { panic!("{err:?}") };
    assert_eq!((field.as_str(), object.as_str()), ("spec.containers", "default/p"));
}

#[test]
fn bad_quantity_names_file_document_object_and_field() {
    let bad = pod("ml", "trainer", "lots", "1Gi");
    let text = docs(&[node("n1", "4", "8Gi"), bad]);
    let err = Simulator::new(manifest(&text), profile("bind-one")).expect_err("bad quantity");
    assert_eq!(err.category(), "invalid_field");
    let SimError::Input(InputError::Field { origin, kind, object, field, message }) = &err else { panic!("{err:?}") };
    let origin = origin.as_ref().expect("an input object");
    assert_eq!((origin.file.as_str(), origin.document), ("test.yaml", 2));
    assert_eq!((*kind, object.as_str()), ("Pod", "ml/trainer"));
    assert_eq!(field, "spec.containers[0].resources.requests[cpu]");
    assert!(message.contains("invalid quantity \"lots\""), "{message}");
    assert!(
        err.to_string().starts_with(
            "test.yaml: document 2 (line 6): Pod ml/trainer: field spec.containers[0].resources.requests[cpu]: "
        ),
        "{err}"
    );
}

#[test]
fn bad_quantity_of_a_node_and_a_queue() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {nvidia.com/gpu: 8GB}}\n";
    let err = Simulator::new(manifest(text), profile("bind-one")).expect_err("bad quantity");
    assert!(
        err.to_string().contains("Node n: field status.allocatable[nvidia.com/gpu]: invalid quantity \"8GB\""),
        "{err}"
    );
    let text = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: q}\nspec: {capability: {cpu: \"-1\"}}\n";
    let err = Simulator::new(manifest(text), profile("bind-one")).expect_err("negative quantity");
    assert!(err.to_string().contains("Queue q: field spec.capability[cpu]: \"-1\" is negative"), "{err}");
}

#[test]
fn numbers_are_quantities() {
    let text = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: 96, nvidia.com/gpu: 8, pods: 110}}\n";
    let m = manifest(text);
    let Object::Node(n) = &m.entries[0].object else { panic!() };
    let alloc = n.status.as_ref().unwrap().allocatable.as_ref().unwrap();
    assert_eq!(alloc["nvidia.com/gpu"].0, "8");
}

#[test]
fn duplicate_objects_are_an_error_naming_both_places() {
    let mut m = Manifest::new();
    m.load_str("a.yaml", &pod("ml", "p", "1", "1Gi")).unwrap();
    m.load_str("b.yaml", &docs(&[pod("other", "p", "1", "1Gi"), pod("ml", "p", "1", "1Gi")])).unwrap();
    let err = Simulator::new(m, profile("bind-one")).expect_err("duplicate");
    assert_eq!(err.category(), "duplicate");
    assert_eq!(
        err.to_string(),
        "Pod ml/p is defined twice: in a.yaml: document 1 (line 1) and in b.yaml: document 2 (line 11)"
    );
}

#[test]
fn same_name_in_another_namespace_or_kind_is_fine() {
    let text = docs(&[
        pod("a", "x", "1", "1Gi"),
        pod("b", "x", "1", "1Gi"),
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: x, namespace: a}\n".into(),
    ]);
    Simulator::new(manifest(&text), profile("bind-one")).unwrap();
}

#[test]
fn lists_typed_lists_and_empty_documents() {
    let text = r#"---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n1}}
- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}, spec: {weight: 2}}
---
---
apiVersion: v1
kind: PodList
items:
- metadata: {name: p}
  spec: {containers: [{name: c, image: i}]}
---
"#;
    let mut m = Manifest::new();
    m.load_str("list.yaml", text).unwrap();
    type Row = (ObjectKind, String, usize, Option<usize>, Option<usize>);
    let got: Vec<Row> = m
        .entries
        .iter()
        .map(|e| (e.object.kind(), e.object.key(), e.origin.document, e.origin.item, e.origin.line))
        .collect();
    assert_eq!(
        got,
        vec![
            (ObjectKind::Node, "n1".into(), 1, Some(1), Some(2)),
            (ObjectKind::Queue, "q".into(), 1, Some(2), Some(2)),
            (ObjectKind::Pod, "default/p".into(), 3, Some(1), Some(9)),
        ]
    );
}

#[test]
fn error_inside_a_list_names_the_item() {
    let text = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n- {apiVersion: v1, kind: Sekret, metadata: {name: s}}\n";
    let err = load_err("l.yaml", text);
    assert!(
        err.to_string().starts_with("l.yaml: document 1 (line 1), item 2: object s: unknown kind \"Sekret\""),
        "{err}"
    );
}

#[test]
fn json_and_yaml_give_the_same_objects() {
    let yaml = docs(&[node("n1", "4", "8Gi"), pod("ml", "p", "500m", "1Gi")]);
    let json = r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
{"apiVersion": "v1", "kind": "List", "items": [
  {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
   "spec": {"schedulerName": "volcano-rs",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}]}
"#;
    let mut from_yaml = Manifest::new();
    from_yaml.load_str("c.yaml", &yaml).unwrap();
    let mut from_json = Manifest::new();
    from_json.load_str("c.json", json).unwrap();
    assert_eq!(from_yaml.entries.len(), 2);
    assert_eq!(from_json.entries.len(), 2);
    for (y, j) in from_yaml.entries.iter().zip(&from_json.entries) {
        assert_eq!(format!("{:?}", y.object), format!("{:?}", j.object));
    }
    assert_eq!((from_json.entries[1].origin.document, from_json.entries[1].origin.line), (2, Some(3)));
}

#[test]
fn syntax_errors_name_the_file_and_position() {
    let err = load_err("bad.json", "{\"apiVersion\": \"v1\",\n \"kind\": }\n");
    assert_eq!(err.category(), "syntax");
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.starts_with("bad.json: invalid JSON: "), "{chain}");
    assert!(chain.contains("line 2"), "{chain}");

    let err = load_err("bad.yaml", "a: 1\n---\nb: [\n---\nc: 3\n");
    let InputError::Yaml { document, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*document, 2);
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.starts_with("bad.yaml: document 2 (line 3): invalid YAML: "), "{chain}");
    assert!(chain.contains("line 4"), "{chain}");
}

#[test]
fn duplicate_keys_are_errors_in_yaml_and_json() {
    let err =
        load_err("dup.yaml", "a: 1\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {x: a, x: b}}\n");
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.starts_with("dup.yaml: document 2 (line 3): invalid YAML: "), "{chain}");
    assert!(chain.contains("duplicate key \"x\" in metadata.labels"), "{chain}");
    let err = load_err("dup.json", "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"kind\": \"Pod\"}");
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.contains("duplicate key \"kind\""), "{chain}");
    let err = load_err("dup.yaml", "items:\n- {a: 1, a: 2}\n");
    let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
    assert!(chain.contains("duplicate key \"a\" in items[0]"), "{chain}");
}

#[test]
fn files_and_directories_are_read_in_order() {
    let dir = std::env::temp_dir().join(format!("volcano-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("b.yaml"), pod("ml", "b", "1", "1Gi")).unwrap();
    std::fs::write(dir.join("a.yaml"), pod("ml", "a", "1", "1Gi")).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a manifest").unwrap();
    let m = Manifest::from_paths(std::slice::from_ref(&dir)).unwrap();
    let keys: Vec<String> = m.entries.iter().map(|e| e.object.key()).collect();
    assert_eq!(keys, ["ml/a", "ml/b"]);
    let err = Manifest::from_paths(&[dir.join("missing.yaml")]).unwrap_err();
    assert_eq!(err.category(), "io");
    assert!(err.to_string().ends_with("missing.yaml"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A leaf switch over two nodes, as Volcano's docs write one.
const HYPER_NODE: &str = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata:\n  name: leaf-0\nspec:\n  tier: 1\n  tierName: leaf\n  members:\n  - type: Node\n    selector:\n      exactMatch:\n        name: n1\n  - type: Node\n    selector:\n      regexMatch:\n        pattern: ^gpu-[0-9]+$\n";

#[test]
fn hyper_nodes_are_read_strictly_on_both_paths() {
    let text = docs(&[node("n1", "4", "8Gi"), HYPER_NODE.into()]);
    for reference in [false, true] {
        let mut m = Manifest::new();
        if reference {
            m.load_str_reference("topology.yaml", &text).unwrap();
        } else {
            m.load_str("topology.yaml", &text).unwrap();
        }
        let Object::HyperNode(hn) = &m.entries[1].object else { panic!("{:?}", m.entries[1].object) };
        assert_eq!(m.entries[1].object.kind(), ObjectKind::HyperNode);
        assert_eq!((hn.spec.tier, hn.spec.tier_name.as_deref(), hn.spec.members.len()), (1, Some("leaf"), 2));
        assert_eq!(hn.spec.members[1].selector.regex_match.as_ref().unwrap().pattern, "^gpu-[0-9]+$");
        assert_eq!(m.entries[1].object.key(), "leaf-0", "cluster-scoped");
    }
    // An unknown field (Volcano's `members[].selector.exactMatch.names`, misspelt) is an
    // error naming the file, the document, its line and the field's path.
    let typo = docs(&[node("n1", "4", "8Gi"), HYPER_NODE.replace("        name: n1", "        names: n1")]);
    for reference in [false, true] {
        let mut m = Manifest::new();
        let err =
            if reference { m.load_str_reference("topology.yaml", &typo) } else { m.load_str("topology.yaml", &typo) }
                .expect_err("an unknown field");
        let InputError::Field { origin, kind, object, field, .. } = &err else { panic!("{err:?}") };
        assert_eq!(origin.as_ref().map(|o| (o.document, o.line)), Some((2, Some(6))));
        assert_eq!(
            (*kind, object.as_str(), field.as_str()),
            ("HyperNode", "leaf-0", "spec.members[0].selector.exactMatch.names")
        );
        assert!(err.to_string().starts_with("topology.yaml: document 2 (line 6): HyperNode leaf-0: field spec.members[0].selector.exactMatch.names: strict decoding error"), "{err}");
    }
    // Another version is an unknown kind.
    let err = load_err("t.yaml", &HYPER_NODE.replace("v1alpha1", "v1beta1"));
    assert_eq!(err.category(), "unknown_kind");
    assert!(err.to_string().contains("topology.volcano.sh/v1alpha1 HyperNode"), "{err}");
}
