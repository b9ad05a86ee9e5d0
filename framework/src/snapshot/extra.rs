//! Objects a session reads but does not schedule: Namespaces (for the namespace selectors
//! of inter-pod affinity terms), and the volume objects the `predicates` plugin's volume
//! checks read (PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes).
//! They are few and change rarely, so a snapshot holds them whole behind one shared
//! pointer, replaced as a unit when any of them changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
}

fn by_name<T>(objects: &[Arc<T>], meta: impl Fn(&T) -> &ObjectMeta) -> BTreeMap<String, Arc<T>> {
    objects.iter().filter_map(|o| meta(o).name.clone().map(|name| (name, o.clone()))).collect()
}

impl Extras {
    /// The extras of these objects (later duplicates win).
    pub fn from_objects(objects: &ClusterObjects) -> Extras {
        let mut pvcs: BTreeMap<String, BTreeMap<String, Arc<PersistentVolumeClaim>>> = BTreeMap::new();
        for c in &objects.pvcs {
            let Some(name) = c.metadata.name.clone() else { continue };
            let namespace = c.metadata.namespace.clone().unwrap_or_else(|| "default".into());
            pvcs.entry(namespace).or_default().insert(name, c.clone());
        }
        Extras {
            namespaces: by_name(&objects.namespaces, |o| &o.metadata),
            pvcs,
            pvs: by_name(&objects.pvs, |o| &o.metadata),
            storage_classes: by_name(&objects.storage_classes, |o| &o.metadata),
            csi_nodes: by_name(&objects.csi_nodes, |o| &o.metadata),
        }
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
    }
}
