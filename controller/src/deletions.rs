//! The objects a watch deleted, for what the controller keeps per object outside the API
//! (the metric series of queues and jobs, the reconcilers' memory).
//!
//! A deleted object is reported by the watch's `Delete` event, or not at all when the watch
//! broke and listed again meanwhile: the object is then missing from the relist
//! (kube-runtime's store drops it at `InitDone`; client-go's informer would report it as
//! `DeletedFinalStateUnknown`). [`Deletions`] follows the events and reports both.

use std::collections::BTreeMap;

use kube::runtime::watcher::Event;

/// What a watch has shown, by key, with a value kept for each object (what removing its
/// series needs: a job's queue).
#[derive(Debug)]
pub struct Deletions<V> {
    seen: BTreeMap<String, V>,
    relist: Option<BTreeMap<String, V>>,
}

impl<V> Default for Deletions<V> {
    fn default() -> Self {
        Deletions { seen: BTreeMap::new(), relist: None }
    }
}

impl<V> Deletions<V> {
    /// Follows `event`, `key` giving an object's key and value, and returns the objects it
    /// deleted: the object of a `Delete` (with its own value), the objects a relist no longer
    /// has (with the value last seen).
    pub fn follow<K>(&mut self, event: &Event<K>, key: impl Fn(&K) -> (String, V)) -> Vec<(String, V)> {
        match event {
            Event::Apply(o) => {
                let (k, v) = key(o);
                self.seen.insert(k, v);
                Vec::new()
            }
            Event::Delete(o) => {
                let (k, v) = key(o);
                self.seen.remove(&k);
                vec![(k, v)]
            }
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                Vec::new()
            }
            Event::InitApply(o) => {
                let (k, v) = key(o);
                self.relist.get_or_insert_with(BTreeMap::new).insert(k, v);
                Vec::new()
            }
            Event::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                let before = std::mem::replace(&mut self.seen, listed);
                before.into_iter().filter(|(k, _)| !self.seen.contains_key(k)).collect()
            }
        }
    }

    /// How many objects the watch has now.
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether the watch has no object now.
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (name, queue)
    type Obj = (&'static str, &'static str);

    fn key(o: &Obj) -> (String, String) {
        (o.0.to_string(), o.1.to_string())
    }

    #[test]
    fn deletes_and_objects_a_relist_lost_are_reported() {
        let mut d = Deletions::default();
        let mut follow = |e: Event<Obj>| d.follow(&e, key);
        assert!(follow(Event::Init).is_empty());
        assert!(follow(Event::InitApply(("a", "q1"))).is_empty());
        assert!(follow(Event::InitApply(("b", "q2"))).is_empty());
        assert!(follow(Event::InitDone).is_empty(), "the first list deletes nothing");
        assert!(follow(Event::Apply(("c", "q1"))).is_empty());
        assert_eq!(follow(Event::Delete(("a", "q1"))), [("a".to_string(), "q1".to_string())]);
        // The watch breaks; b is deleted meanwhile; the relist has c and a new d.
        assert!(follow(Event::Init).is_empty());
        assert!(follow(Event::InitApply(("c", "q1"))).is_empty());
        assert!(follow(Event::InitApply(("d", "q3"))).is_empty());
        assert_eq!(follow(Event::InitDone), [("b".to_string(), "q2".to_string())]);
        assert_eq!(d.len(), 2);
    }

    #[test]
    fn a_delete_reports_the_deleted_objects_own_value() {
        let mut d = Deletions::default();
        d.follow(&Event::Apply(("a", "q1")), key);
        assert_eq!(d.follow(&Event::Delete(("a", "q2")), key), [("a".to_string(), "q2".to_string())]);
        // A Delete of an object never seen (before the first list) is still reported.
        assert_eq!(d.follow(&Event::Delete(("z", "q")), key).len(), 1);
        assert!(d.is_empty());
    }
}
