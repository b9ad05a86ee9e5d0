//! A case's cluster written as Kubernetes manifests (`volcano-rs bench CASE
//! --write-manifests FILE`), for `volcano-rs bench --manifests FILE` to read back: one YAML
//! stream of one document per object, as `kubectl get … -o yaml` prints an object.
//!
//! The file defines the loading figure of docs/performance.md ("Issue 12: loading 120,000
//! objects"): `hetero-10k` written this way is the file that figure is measured on.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rayon::prelude::*;
use serde::Serialize;
use volcano_framework::ClusterObjects;

/// A failure to write the manifests.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// An object could not be written as YAML.
    #[error("cannot write {kind} {name} as YAML: {source}")]
    Yaml {
        /// The object's kind.
        kind: &'static str,
        /// The object's `namespace/name` or name.
        name: String,
        /// The serializer's error.
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// The output could not be written.
    #[error("cannot write the manifests: {0}")]
    Io(#[from] std::io::Error),
}

/// How many objects of each kind [`write`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// `(kind, count)`, in the order written; kinds without objects are left out.
    pub kinds: Vec<(&'static str, usize)>,
}

impl Written {
    /// Every object written.
    pub fn total(&self) -> usize {
        self.kinds.iter().map(|(_, n)| n).sum()
    }
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let each: Vec<String> = self.kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        write!(f, "{} objects ({})", self.total(), each.join(", "))
    }
}

fn display(meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// Writes the objects as one multi-document YAML stream: PriorityClasses, Namespaces,
/// Queues, Nodes, HyperNodes, PodGroups, Pods, then the storage and workload kinds, each
/// kind in the order of `objects`. A namespace that an object names but `objects` holds no Namespace
/// for gets a Namespace object with its name only (as a dump of the cluster would hold;
/// the scheduler reads a namespace's labels only, and it has none).
///
/// Every object is written as its type serializes it (`apiVersion` and `kind` first), so
/// `volcano-rs bench --manifests` and `simulate` read it back, strictly, into the same
/// objects; the documents are serialized on all cores and written in order.
pub fn write(objects: &ClusterObjects, out: &mut impl Write) -> Result<Written, WriteError> {
    let mut namespaces: Vec<Arc<Namespace>> = objects.namespaces.clone();
    let known: BTreeSet<&str> = objects.namespaces.iter().filter_map(|n| n.metadata.name.as_deref()).collect();
    let named: BTreeSet<&str> = objects
        .pods
        .iter()
        .map(|o| &o.metadata)
        .chain(objects.pod_groups.iter().map(|o| &o.metadata))
        .chain(objects.pvcs.iter().map(|o| &o.metadata))
        .chain(objects.services.iter().map(|o| &o.metadata))
        .chain(objects.replication_controllers.iter().map(|o| &o.metadata))
        .chain(objects.replica_sets.iter().map(|o| &o.metadata))
        .chain(objects.stateful_sets.iter().map(|o| &o.metadata))
        .filter_map(|m| m.namespace.as_deref())
        .collect();
    for ns in named.difference(&known) {
        namespaces.push(Arc::new(Namespace {
            metadata: ObjectMeta { name: Some((*ns).to_string()), ..Default::default() },
            ..Default::default()
        }));
    }

    let mut written = Written::default();
    let mut kind = |kind: &'static str, docs: Vec<String>, out: &mut dyn Write| -> Result<(), WriteError> {
        if !docs.is_empty() {
            written.kinds.push((kind, docs.len()));
        }
        for d in docs {
            out.write_all(b"---\n")?;
            out.write_all(d.as_bytes())?;
        }
        Ok(())
    };
    kind("PriorityClass", documents("PriorityClass", &objects.priority_classes, |o| &o.metadata)?, out)?;
    kind("Namespace", documents("Namespace", &namespaces, |o| &o.metadata)?, out)?;
    kind("Queue", documents("Queue", &objects.queues, |o| &o.metadata)?, out)?;
    kind("Node", documents("Node", &objects.nodes, |o| &o.metadata)?, out)?;
    kind("HyperNode", documents("HyperNode", &objects.hyper_nodes, |o| &o.metadata)?, out)?;
    kind("PodGroup", documents("PodGroup", &objects.pod_groups, |o| &o.metadata)?, out)?;
    let pods: Vec<Box<Pod>> = objects.pods.iter().map(|p| Box::new(p.to_pod())).collect();
    kind("Pod", documents("Pod", &pods, |o| &o.metadata)?, out)?;
    kind("PersistentVolume", documents("PersistentVolume", &objects.pvs, |o| &o.metadata)?, out)?;
    kind("PersistentVolumeClaim", documents("PersistentVolumeClaim", &objects.pvcs, |o| &o.metadata)?, out)?;
    kind("StorageClass", documents("StorageClass", &objects.storage_classes, |o| &o.metadata)?, out)?;
    kind("CSINode", documents("CSINode", &objects.csi_nodes, |o| &o.metadata)?, out)?;
    kind("Service", documents("Service", &objects.services, |o| &o.metadata)?, out)?;
    kind(
        "ReplicationController",
        documents("ReplicationController", &objects.replication_controllers, |o| &o.metadata)?,
        out,
    )?;
    kind("ReplicaSet", documents("ReplicaSet", &objects.replica_sets, |o| &o.metadata)?, out)?;
    kind("StatefulSet", documents("StatefulSet", &objects.stateful_sets, |o| &o.metadata)?, out)?;
    out.flush()?;
    Ok(written)
}

/// Each object as one YAML document (without its `---` marker), serialized on all cores.
fn documents<T, O>(
    kind: &'static str,
    objects: &[O],
    meta: impl Fn(&T) -> &ObjectMeta + Sync,
) -> Result<Vec<String>, WriteError>
where
    T: Serialize,
    O: std::ops::Deref<Target = T> + Sync,
{
    objects
        .par_iter()
        .map(|o| {
            serde_yaml_ng::to_string(&**o).map_err(|source| WriteError::Yaml { kind, name: display(meta(o)), source })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use volcano_sim::{normalise_for, Cluster, FieldValidation, Manifest};

    use super::*;
    use crate::cases::Case;
    use crate::runner::{case_profile, timed_cycle_for};
    use crate::workloads::SCHEDULER_NAME;

    /// The cluster the written manifests read back into, strictly, as `bench --manifests`
    /// reads them.
    fn read_back(text: &str) -> Cluster {
        let mut manifest = Manifest::with_validation(FieldValidation::Strict);
        manifest.load_str("hetero.yaml", text).expect("the written manifests read back");
        assert!(manifest.warnings.is_empty() && manifest.skipped.is_empty());
        normalise_for(manifest, &[SCHEDULER_NAME.to_string()]).expect("the written manifests normalise").cluster
    }

    /// The paths (`metadata.uid`, `spec.containers[0].name`, …) of the fields `read` has and
    /// `written` does not; panics when a field `written` has is missing or different in `read`.
    fn added(path: &str, written: &serde_json::Value, read: &serde_json::Value, out: &mut BTreeSet<String>) {
        use serde_json::Value;
        match (written, read) {
            (Value::Object(w), Value::Object(r)) => {
                for (k, v) in r {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    match w.get(k) {
                        Some(wv) => added(&p, wv, v, out),
                        None => {
                            out.insert(p);
                        }
                    }
                }
                let lost: Vec<&String> = w.keys().filter(|k| !r.contains_key(*k)).collect();
                assert!(lost.is_empty(), "{path}: {lost:?} lost");
            }
            (Value::Array(w), Value::Array(r)) if w.len() == r.len() => {
                for (wv, rv) in w.iter().zip(r) {
                    added(&format!("{path}[]"), wv, rv, out);
                }
            }
            (w, r) => assert_eq!(w, r, "{path}"),
        }
    }

    /// Every written object is read back under its key, with every field it had (compared
    /// as JSON: the Volcano CRD types have no `PartialEq`); the fields normalising added.
    fn kept<T: Serialize>(written: &BTreeMap<String, Arc<T>>, read: &BTreeMap<String, Arc<T>>) -> BTreeSet<String> {
        let json = |o: &T| serde_json::to_value(o).expect("serializable");
        let mut out = BTreeSet::new();
        for (key, object) in written {
            let back = read.get(key).unwrap_or_else(|| panic!("{key} reads back"));
            added("", &json(object), &json(back), &mut out);
        }
        out
    }

    /// The cluster's pods as Kubernetes pods.
    fn k8s_pods(c: &Cluster) -> BTreeMap<String, Arc<Pod>> {
        c.pods.iter().map(|(k, p)| (k.clone(), Arc::new(p.to_pod()))).collect()
    }

    /// Both clusters hold the same objects, equal field for field.
    fn same<T: Serialize>(kind: &str, a: &BTreeMap<String, Arc<T>>, b: &BTreeMap<String, Arc<T>>) {
        let json = |o: &T| serde_json::to_value(o).expect("serializable");
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{kind}");
        for (key, object) in a {
            assert_eq!(json(&b[key]), json(object), "{kind} {key}");
        }
    }

    /// `hetero-N` at 40 nodes (the generator of `hetero-10k`): every object reads back with
    /// every field it had, normalising adding only what it adds to any manifest (uids,
    /// creation times), and the cluster only what a cluster has anyway (the Namespaces, the
    /// built-in PriorityClasses and queue `root`); the cluster read back, written and read
    /// again, is the same to the last field, and the first cycle over both gives the same
    /// effects. The fast path reads the file as the reference path does.
    #[test]
    fn written_manifests_read_back_into_the_same_cluster() {
        let mut objects = crate::hetero::objects(40);
        // A leaf switch per 8 nodes under one spine: by name, by pattern and by label.
        let names: Vec<String> = objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        let leaf = |i: usize, chunk: &[String]| -> volcano_api::topology::HyperNode {
            let members: Vec<serde_json::Value> = chunk
                .iter()
                .map(|n| serde_json::json!({"type": "Node", "selector": {"exactMatch": {"name": n}}}))
                .chain([serde_json::json!({"type": "Node", "selector": {"regexMatch": {"pattern": format!("^leaf-{i}-")}}})])
                .chain([serde_json::json!({"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": format!("r{i}")}}}})])
                .collect();
            serde_json::from_value(serde_json::json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                "metadata": {"name": format!("leaf-{i}")}, "spec": {"tier": 1, "tierName": "leaf", "members": members}}))
            .unwrap()
        };
        let leaves: Vec<_> = names.chunks(8).enumerate().map(|(i, c)| leaf(i, c)).collect();
        let spine: volcano_api::topology::HyperNode = serde_json::from_value(serde_json::json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "spine-0"},
            "spec": {"tier": 2, "members": leaves.iter().map(|l| serde_json::json!({"type": "HyperNode",
                "selector": {"exactMatch": {"name": l.metadata.name}}})).collect::<Vec<_>>()}}))
        .unwrap();
        objects.hyper_nodes = leaves.into_iter().chain([spine]).map(Arc::new).collect();
        let written = Cluster::from_objects(objects);
        let mut out = Vec::new();
        let counts = write(&written.objects(), &mut out).expect("written");
        let text = String::from_utf8(out).expect("YAML is text");
        let pods = written.pods.len();
        assert_eq!(counts.kinds.iter().find(|(k, _)| *k == "Pod"), Some(&("Pod", pods)));
        assert_eq!(counts.kinds.iter().find(|(k, _)| *k == "Namespace"), Some(&("Namespace", 8)));
        assert_eq!(counts.kinds.iter().find(|(k, _)| *k == "HyperNode"), Some(&("HyperNode", 6)));
        assert_eq!(text.matches("\n---\n").count() + 1, counts.total());

        let mut fast = Manifest::with_validation(FieldValidation::Strict);
        fast.load_str("hetero.yaml", &text).expect("read");
        let mut reference = Manifest::with_validation(FieldValidation::Strict);
        reference.load_str_reference("hetero.yaml", &text).expect("read");
        assert_eq!(format!("{:?}", fast.entries), format!("{:?}", reference.entries));

        let read = read_back(&text);
        let mut fields = BTreeSet::new();
        fields.extend(kept(&written.nodes, &read.nodes));
        fields.extend(kept(&k8s_pods(&written), &k8s_pods(&read)));
        fields.extend(kept(&written.pod_groups, &read.pod_groups));
        fields.extend(kept(&written.queues, &read.queues));
        fields.extend(kept(&written.priority_classes, &read.priority_classes));
        fields.extend(kept(&written.hyper_nodes, &read.hyper_nodes));
        assert_eq!(fields, BTreeSet::from(["metadata.creationTimestamp".to_string(), "metadata.uid".to_string()]));
        assert_eq!(read.pods.len(), written.pods.len());
        assert_eq!(read.nodes.len(), written.nodes.len());
        assert_eq!(read.pod_groups.len(), written.pod_groups.len());
        assert_eq!(read.namespaces.len(), 8);
        let added: Vec<&str> =
            read.queues.keys().filter(|k| !written.queues.contains_key(*k)).map(String::as_str).collect();
        assert_eq!(added, ["root"]);
        let classes = read.priority_classes.keys().filter(|k| !written.priority_classes.contains_key(*k)).count();
        assert_eq!(classes, 2, "system-node-critical and system-cluster-critical");

        // Once normalised, a round trip changes nothing.
        let mut again = Vec::new();
        write(&read.objects(), &mut again).expect("written");
        let twice = read_back(&String::from_utf8(again).expect("YAML is text"));
        same("Node", &read.nodes, &twice.nodes);
        same("Pod", &k8s_pods(&read), &k8s_pods(&twice));
        same("PodGroup", &read.pod_groups, &twice.pod_groups);
        same("Queue", &read.queues, &twice.queues);
        same("PriorityClass", &read.priority_classes, &twice.priority_classes);
        same("Namespace", &read.namespaces, &twice.namespaces);
        same("HyperNode", &read.hyper_nodes, &twice.hyper_nodes);
        assert_eq!(read.hyper_nodes.len(), 6);

        let profile = case_profile(Case::Hetero1k);
        let cycle = |c: &Cluster| timed_cycle_for(&c.objects(), &[SCHEDULER_NAME], &profile, 1).expect("valid").0;
        let (expected, got) = (cycle(&read), cycle(&twice));
        assert!(expected.iter().any(|e| matches!(e, volcano_framework::Effect::Bind { .. })), "the cycle binds pods");
        assert_eq!(got, expected, "the same cycle over the manifests read back");
    }
}
