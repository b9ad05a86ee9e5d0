//! [`NodeDerived`]: values that plugins derive from the snapshot's nodes alone, kept from
//! one session to the next while the nodes do not change.
//!
//! A plugin's per-node verdicts of a node selector, a required node affinity term or a set
//! of tolerations read nothing but the nodes' labels, taints, names and `unschedulable`.
//! A scheduler keeps its snapshot between cycles and updates it in place, and most cycles
//! change pods only: computing such verdicts again in every session (10,000 nodes each) is
//! work whose answer is known. A snapshot carries one `NodeDerived`, shared by its clones
//! (a session works on a clone) and kept by [`crate::Snapshot::update`] unless some node
//! changed in what scheduling reads, which gives a new, empty one; a rebuilt snapshot
//! starts empty. A value must be a function of the nodes (and of the key, which names what
//! it is and any configuration it depends on): then a session that finds it reads exactly
//! what it would have computed, and the core stays a deterministic function of its input.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Values derived from a snapshot's nodes, by key (see the module documentation).
#[derive(Default)]
pub struct NodeDerived {
    values: Mutex<HashMap<String, Arc<dyn Any + Send + Sync>>>,
}

impl NodeDerived {
    /// The value under `key`, made by `make` if there is none yet (or if the one there is
    /// of another type). The value must depend only on the nodes and on what `key` names.
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, key: &str, make: impl FnOnce() -> T) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(found) = values.get(key).and_then(|v| v.clone().downcast::<T>().ok()) {
            return found;
        }
        let value = Arc::new(make());
        values.insert(key.to_string(), value.clone());
        value
    }
}

impl fmt::Debug for NodeDerived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut keys: Vec<&String> = values.keys().collect();
        keys.sort();
        f.debug_struct("NodeDerived").field("keys", &keys).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_made_once_per_key_and_type() {
        let d = NodeDerived::default();
        let mut made = 0;
        let a = d.get_or_insert_with("k", || {
            made += 1;
            7u32
        });
        let b = d.get_or_insert_with("k", || {
            made += 1;
            8u32
        });
        assert_eq!((*a, *b, made), (7, 7, 1));
        // Another type under the same key replaces it.
        let c = d.get_or_insert_with("k", || String::from("x"));
        assert_eq!(c.as_str(), "x");
        assert_eq!(*d.get_or_insert_with("other", || 1u8), 1);
    }
}
