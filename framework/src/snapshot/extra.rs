//! Objects a session reads but does not schedule: HyperNodes (the network topology), Namespaces (for the namespace selectors
//! of inter-pod affinity terms), the volume objects the `predicates` plugin's volume
//! checks read (PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes),
//! and the Services, ReplicationControllers, ReplicaSets and StatefulSets whose selectors
//! make the system-default topology spread constraints of a pod (kube-scheduler's
//! `helper.DefaultSelector`). They change rarely, so a snapshot holds them whole behind one
//! shared pointer, replaced as a unit when any of them changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, ReplicationController};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use volcano_api::topology::HyperNode;

use super::ClusterObjects;

/// The read-only cluster objects of a snapshot (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Arc<Namespace>>,
    /// PersistentVolumeClaims by namespace, then name.
    pub pvcs: BTreeMap<String, BTreeMap<String, Arc<PersistentVolumeClaim>>>,
    /// PersistentVolumes by name.
    pub pvs: BTreeMap<String, Arc<PersistentVolume>>,
    /// StorageClasses by name.
    pub storage_classes: BTreeMap<String, Arc<StorageClass>>,
    /// CSINodes by name (the name of their node).
    pub csi_nodes: BTreeMap<String, Arc<CSINode>>,
    /// The selectors of the Services, by namespace.
    pub services: BTreeMap<String, ServiceSelectors>,
    /// ReplicationControllers by namespace, then name.
    pub replication_controllers: BTreeMap<String, BTreeMap<String, Arc<ReplicationController>>>,
    /// ReplicaSets by namespace, then name.
    pub replica_sets: BTreeMap<String, BTreeMap<String, Arc<ReplicaSet>>>,
    /// StatefulSets by namespace, then name.
    pub stateful_sets: BTreeMap<String, BTreeMap<String, Arc<StatefulSet>>>,
    /// HyperNodes by name (the snapshot's [`crate::topology::Topology`] is built from them
    /// and the nodes).
    pub hyper_nodes: BTreeMap<String, Arc<HyperNode>>,
}

/// The selectors of a namespace's Services, indexed so that the Services selecting a pod
/// are found from the pod's labels without a pass over every Service.
#[derive(Clone, Debug, Default)]
pub struct ServiceSelectors {
    /// Each Service's selector (Services without one select nothing and are left out).
    selectors: Vec<BTreeMap<String, String>>,
    /// Selectors by their first (key, value): every pod a selector selects has it.
    by_pair: HashMap<String, HashMap<String, Vec<u32>>>,
    /// Empty selectors (they select every pod of the namespace).
    everything: Vec<u32>,
}

impl ServiceSelectors {
    fn push(&mut self, selector: BTreeMap<String, String>) {
        let id = self.selectors.len() as u32;
        match selector.iter().next() {
            Some((k, v)) => self.by_pair.entry(k.clone()).or_default().entry(v.clone()).or_default().push(id),
            None => self.everything.push(id),
        }
        self.selectors.push(selector);
    }

    /// The selectors of the Services that select a pod with these labels, in the order the
    /// Services were given.
    pub fn selecting<'a>(&'a self, labels: &BTreeMap<String, String>) -> Vec<&'a BTreeMap<String, String>> {
        let mut ids: Vec<u32> = self.everything.clone();
        for (k, v) in labels {
            if let Some(list) = self.by_pair.get(k).and_then(|values| values.get(v)) {
                ids.extend(
                    list.iter()
                        .copied()
                        .filter(|&i| self.selectors[i as usize].iter().all(|(k, v)| labels.get(k) == Some(v))),
                );
            }
        }
        ids.sort_unstable();
        ids.iter().map(|&i| &self.selectors[i as usize]).collect()
    }

    /// Number of Services with a selector.
    pub fn len(&self) -> usize {
        self.selectors.len()
    }

    /// Whether no Service has a selector.
    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }
}

fn by_namespace<T>(objects: &[Arc<T>], meta: impl Fn(&T) -> &ObjectMeta) -> BTreeMap<String, BTreeMap<String, Arc<T>>> {
    let mut map: BTreeMap<String, BTreeMap<String, Arc<T>>> = BTreeMap::new();
    for o in objects {
        let m = meta(o);
        let Some(name) = m.name.clone() else { continue };
        let namespace = m.namespace.clone().unwrap_or_else(|| "default".into());
        map.entry(namespace).or_default().insert(name, o.clone());
    }
    map
}

fn by_name<T>(objects: &[Arc<T>], meta: impl Fn(&T) -> &ObjectMeta) -> BTreeMap<String, Arc<T>> {
    objects.iter().filter_map(|o| meta(o).name.clone().map(|name| (name, o.clone()))).collect()
}

impl Extras {
    /// The extras of these objects (later duplicates win).
    pub fn from_objects(objects: &ClusterObjects) -> Extras {
        // Services by namespace, then name (later duplicates win), then indexed.
        let mut services: BTreeMap<String, ServiceSelectors> = BTreeMap::new();
        for (namespace, list) in by_namespace(&objects.services, |o| &o.metadata) {
            let index = services.entry(namespace).or_default();
            for s in list.values() {
                // A Service without a selector selects nothing, not everything.
                if let Some(selector) = s.spec.as_ref().and_then(|s| s.selector.clone()) {
                    index.push(selector);
                }
            }
        }
        Extras {
            namespaces: by_name(&objects.namespaces, |o| &o.metadata),
            pvcs: by_namespace(&objects.pvcs, |o| &o.metadata),
            pvs: by_name(&objects.pvs, |o| &o.metadata),
            storage_classes: by_name(&objects.storage_classes, |o| &o.metadata),
            csi_nodes: by_name(&objects.csi_nodes, |o| &o.metadata),
            services,
            replication_controllers: by_namespace(&objects.replication_controllers, |o| &o.metadata),
            replica_sets: by_namespace(&objects.replica_sets, |o| &o.metadata),
            stateful_sets: by_namespace(&objects.stateful_sets, |o| &o.metadata),
            hyper_nodes: by_name(&objects.hyper_nodes, |o| &o.metadata),
        }
    }

    /// Whether any Service, ReplicationController, ReplicaSet or StatefulSet is known: only
    /// then can a pod have system-default spread constraints.
    pub fn has_workload_selectors(&self) -> bool {
        self.services.values().any(|s| !s.is_empty())
            || !self.replication_controllers.is_empty()
            || !self.replica_sets.is_empty()
            || !self.stateful_sets.is_empty()
    }

    /// The selectors of the Services of `namespace` that select a pod with these labels.
    pub fn services_selecting<'a>(
        &'a self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Vec<&'a BTreeMap<String, String>> {
        self.services.get(namespace).map(|s| s.selecting(labels)).unwrap_or_default()
    }

    /// The ReplicationController `namespace/name`, if known.
    pub fn replication_controller(&self, namespace: &str, name: &str) -> Option<&Arc<ReplicationController>> {
        self.replication_controllers.get(namespace).and_then(|m| m.get(name))
    }

    /// The ReplicaSet `namespace/name`, if known.
    pub fn replica_set(&self, namespace: &str, name: &str) -> Option<&Arc<ReplicaSet>> {
        self.replica_sets.get(namespace).and_then(|m| m.get(name))
    }

    /// The StatefulSet `namespace/name`, if known.
    pub fn stateful_set(&self, namespace: &str, name: &str) -> Option<&Arc<StatefulSet>> {
        self.stateful_sets.get(namespace).and_then(|m| m.get(name))
    }

    /// The labels of a namespace; `None` when the namespace is not known.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.namespaces.get(name).map(|n| n.metadata.labels.as_ref().unwrap_or(&EMPTY))
    }

    /// The PersistentVolumeClaim `namespace/name`, if known.
    pub fn pvc(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.pvcs.get(namespace).and_then(|m| m.get(name))
    }

    /// The PersistentVolume of this name, if known.
    pub fn pv(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.pvs.get(name)
    }

    /// The StorageClass of this name, if known.
    pub fn storage_class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.storage_classes.get(name)
    }

    /// The CSINode of this node, if known.
    pub fn csi_node(&self, node: &str) -> Option<&Arc<CSINode>> {
        self.csi_nodes.get(node)
    }

    /// Number of PersistentVolumeClaims.
    pub fn pvc_count(&self) -> usize {
        self.pvcs.values().map(BTreeMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..Default::default() }
    }

    #[test]
    fn objects_are_found_by_key() {
        let objects = ClusterObjects {
            pvcs: vec![
                Arc::new(PersistentVolumeClaim { metadata: meta(Some("a"), "data"), ..Default::default() }),
                Arc::new(PersistentVolumeClaim { metadata: meta(Some("b"), "data"), ..Default::default() }),
            ],
            pvs: vec![Arc::new(PersistentVolume { metadata: meta(None, "pv-1"), ..Default::default() })],
            storage_classes: vec![Arc::new(StorageClass {
                metadata: meta(None, "fast"),
                provisioner: "csi.example.com".into(),
                ..Default::default()
            })],
            csi_nodes: vec![Arc::new(CSINode { metadata: meta(None, "n1"), ..Default::default() })],
            ..Default::default()
        };
        let e = Extras::from_objects(&objects);
        assert!(e.pvc("a", "data").is_some() && e.pvc("b", "data").is_some());
        assert!(e.pvc("c", "data").is_none());
        assert_eq!(e.pvc_count(), 2);
        assert!(e.pv("pv-1").is_some() && e.pv("pv-2").is_none());
        assert_eq!(e.storage_class("fast").unwrap().provisioner, "csi.example.com");
        assert!(e.csi_node("n1").is_some() && e.csi_node("n2").is_none());
        assert!(!e.has_workload_selectors());
    }

    #[test]
    fn services_selecting_a_pod_are_found_by_its_labels() {
        use k8s_openapi::api::core::v1::{Service, ServiceSpec};
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let service = |ns: &str, name: &str, selector: Option<&[(&str, &str)]>| {
            Arc::new(Service {
                metadata: meta(Some(ns), name),
                spec: Some(ServiceSpec { selector: selector.map(labels), ..Default::default() }),
                ..Default::default()
            })
        };
        let objects = ClusterObjects {
            services: vec![
                service("a", "job", Some(&[("job", "j1"), ("ns", "a")])),
                service("a", "app", Some(&[("app", "web")])),
                service("a", "all", Some(&[])),
                service("a", "headless", None),
                service("b", "job", Some(&[("job", "j1")])),
            ],
            ..Default::default()
        };
        let e = Extras::from_objects(&objects);
        assert!(e.has_workload_selectors());
        let pod = labels(&[("job", "j1"), ("ns", "a"), ("app", "web"), ("x", "y")]);
        // In the order of the Services' names; `{}` selects every pod, no selector none.
        assert_eq!(
            e.services_selecting("a", &pod),
            vec![&labels(&[]), &labels(&[("app", "web")]), &labels(&[("job", "j1"), ("ns", "a")])]
        );
        assert_eq!(e.services_selecting("a", &labels(&[("job", "j1")])), vec![&labels(&[])]);
        assert_eq!(e.services_selecting("b", &pod), vec![&labels(&[("job", "j1")])]);
        assert!(e.services_selecting("c", &pod).is_empty());
    }
}
