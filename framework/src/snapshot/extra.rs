//! Objects a session reads but does not schedule: Namespaces (for the namespace selectors
//! of inter-pod affinity terms). They are few and change rarely, so a snapshot holds them
//! whole behind one shared pointer, replaced as a unit when any of them changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

/// The read-only cluster objects of a snapshot (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// Namespaces by name.
    pub namespaces: BTreeMap<String, Arc<Namespace>>,
}

impl Extras {
    /// The extras of these objects (later duplicates win).
    pub fn from_objects(namespaces: &[Arc<Namespace>]) -> Extras {
        Extras {
            namespaces: namespaces
                .iter()
                .filter_map(|n| n.metadata.name.clone().map(|name| (name, n.clone())))
                .collect(),
        }
    }

    /// The labels of a namespace; `None` when the namespace is not known.
    pub fn namespace_labels(&self, name: &str) -> Option<&BTreeMap<String, String>> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.namespaces.get(name).map(|n| n.metadata.labels.as_ref().unwrap_or(&EMPTY))
    }
}
