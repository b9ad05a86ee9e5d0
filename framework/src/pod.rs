//! The pod as the scheduler keeps it: [`SchedPod`], a Kubernetes pod whose spec is shared
//! behind an `Arc`, and [`SpecInterner`], which makes pods with equal specs share one.
//!
//! A cluster's pods come from few templates: the pods of one task of a Job, of one
//! ReplicaSet, of one gang differ in their metadata and status, and (once the kube backend
//! has slimmed them to what scheduling reads, or as a benchmark generates them) not at all
//! in their spec but for the node they are bound to. A Kubernetes `Pod` holds its spec by
//! value — with its containers, resources and affinity, most of a pod's memory — so 100,000
//! pods of a few thousand templates hold 100,000 copies. Here they hold a few thousand: the
//! spec is shared and `spec.nodeName` is kept apart, so binding a pod, writing a condition
//! or adding a label copies neither the spec nor its containers.
//!
//! The field names are Kubernetes' (`metadata`, `spec`, `status`), so code reads a
//! `SchedPod` as it reads a `Pod` — but for the node, which is [`SchedPod::node_name`]
//! (the shared spec never holds one: [`SchedPod::from`] takes it out, [`SchedPod::to_pod`]
//! puts it back). Writing the spec goes through [`SchedPod::spec_mut`], which copies a
//! shared spec first.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A pod whose spec is shared with the pods of equal spec (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedPod {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The spec, shared; written through [`SchedPod::spec_mut`]. Its `nodeName` is always
    /// absent: the pod's node is [`SchedPod::node_name`].
    pub spec: Option<Arc<PodSpec>>,
    /// `spec.nodeName` (`None` for absent or empty).
    node_name: Option<String>,
    /// The status.
    pub status: Option<PodStatus>,
}

impl From<Pod> for SchedPod {
    fn from(p: Pod) -> Self {
        let (spec, node_name) = split(p.spec);
        SchedPod { metadata: p.metadata, spec: spec.map(Arc::new), node_name, status: p.status }
    }
}

/// The spec without its node, and the node (empty as absent).
fn split(spec: Option<PodSpec>) -> (Option<PodSpec>, Option<String>) {
    match spec {
        Some(mut s) => {
            let node = s.node_name.take().filter(|n| !n.is_empty());
            (Some(s), node)
        }
        None => (None, None),
    }
}

impl SchedPod {
    /// The Kubernetes pod (a copy), `spec.nodeName` in its spec.
    pub fn to_pod(&self) -> Pod {
        let spec = self.spec.as_deref().cloned().map(|mut s| {
            s.node_name = self.node_name.clone();
            s
        });
        Pod { metadata: self.metadata.clone(), spec, status: self.status.clone() }
    }

    /// The spec, to change: a copy of it when it is shared. Not for the node: that is
    /// [`SchedPod::set_node_name`].
    pub fn spec_mut(&mut self) -> &mut PodSpec {
        Arc::make_mut(self.spec.get_or_insert_with(Default::default))
    }

    /// The node the pod is bound to, if any (`spec.nodeName`, empty as absent).
    pub fn node_name(&self) -> Option<&str> {
        self.node_name.as_deref()
    }

    /// Binds the pod to a node, or unbinds it (`spec.nodeName`; empty as absent). The spec
    /// stays shared.
    pub fn set_node_name(&mut self, node: Option<String>) {
        let node = node.filter(|n| !n.is_empty());
        if node.is_some() && self.spec.is_none() {
            self.spec = Some(Arc::default());
        }
        self.node_name = node;
    }
}

/// Specs kept under one fingerprint before the next ones go by their whole content: a
/// workload whose pods differ where the fingerprint does not look (affinity terms, volumes)
/// costs at most this many comparisons, then one hash of the whole spec.
const BUCKET: usize = 8;

/// Makes equal specs one shared `Arc`. A spec is looked up by a fingerprint of the fields
/// templates most often differ in (cheap), and when more than [`BUCKET`] different specs
/// share that fingerprint, by a hash of its whole content. It holds specs weakly: a spec no
/// pod holds any more is dropped with its last pod, and its entry is pruned once the
/// entries have doubled since the last pruning (amortised constant work per spec).
#[derive(Clone, Debug, Default)]
pub struct SpecInterner {
    /// By fingerprint.
    buckets: HashMap<u64, Vec<Weak<PodSpec>>>,
    /// By content, for the specs whose fingerprint's bucket was full.
    deep: HashMap<u64, Vec<Weak<PodSpec>>>,
    entries: usize,
    prune_at: usize,
}

/// The spec among `kept` equal to `spec` (`Ok(None)` when it is `spec` itself), or
/// `Err(live)`: none is, and `live` specs are still held.
fn find(kept: &[Weak<PodSpec>], spec: &Arc<PodSpec>) -> Result<Option<Arc<PodSpec>>, usize> {
    let mut live = 0;
    for kept in kept {
        if let Some(kept) = kept.upgrade() {
            if Arc::ptr_eq(&kept, spec) {
                return Ok(None);
            }
            if *kept == **spec {
                return Ok(Some(kept));
            }
            live += 1;
        }
    }
    Err(live)
}

impl SpecInterner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The pod, its spec shared with an equal one seen before (and kept for the next).
    pub fn pod(&mut self, p: Pod) -> SchedPod {
        let (spec, node_name) = split(p.spec);
        SchedPod { metadata: p.metadata, spec: spec.map(|s| self.spec(s)), node_name, status: p.status }
    }

    /// Shares the pod's spec with an equal one seen before, if any (a spec already shared
    /// by more pods is left as it is).
    pub fn share(&mut self, pod: &mut SchedPod) {
        if let Some(spec) = &pod.spec {
            debug_assert!(spec.node_name.is_none(), "a pod's node is SchedPod::set_node_name, not its spec's");
            if let Some(same) = self.find_or_keep(spec) {
                pod.spec = Some(same);
            }
        }
    }

    /// An equal spec seen before, or this one, kept for the next.
    pub fn spec(&mut self, spec: PodSpec) -> Arc<PodSpec> {
        let spec = Arc::new(spec);
        self.find_or_keep(&spec).unwrap_or(spec)
    }

    /// An equal spec kept before (when it is not this very one), or `None` after keeping
    /// this one.
    fn find_or_keep(&mut self, spec: &Arc<PodSpec>) -> Option<Arc<PodSpec>> {
        let bucket = self.buckets.entry(fingerprint(spec)).or_default();
        let bucket = match find(bucket, spec) {
            Ok(found) => return found,
            Err(live) if live < BUCKET => bucket,
            Err(_) => {
                let deep = self.deep.entry(content_hash(spec)).or_default();
                match find(deep, spec) {
                    Ok(found) => return found,
                    Err(_) => deep,
                }
            }
        };
        let before = bucket.len();
        bucket.retain(|w| w.strong_count() > 0);
        let removed = before - bucket.len();
        bucket.push(Arc::downgrade(spec));
        self.entries = self.entries + 1 - removed;
        if self.entries >= self.prune_at {
            self.prune();
        }
        None
    }

    /// Drops the entries of specs no pod holds any more.
    fn prune(&mut self) {
        for map in [&mut self.buckets, &mut self.deep] {
            map.retain(|_, b| {
                b.retain(|w| w.strong_count() > 0);
                !b.is_empty()
            });
        }
        self.entries = self.buckets.values().chain(self.deep.values()).map(Vec::len).sum();
        self.prune_at = (2 * self.entries).max(1024);
    }

    /// Specs kept: the live ones, and those dropped since the last pruning.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no spec is kept.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}

/// A hash of the fields pods of different templates most often differ in: scheduler,
/// priority, selectors, and each container's name, image and resources. Equal specs have
/// equal fingerprints; specs equal in these fields only are told apart by comparing them.
fn fingerprint(s: &PodSpec) -> u64 {
    let mut h = DefaultHasher::new();
    s.scheduler_name.hash(&mut h);
    s.priority.hash(&mut h);
    s.priority_class_name.hash(&mut h);
    s.node_selector.hash(&mut h);
    s.hostname.hash(&mut h);
    s.tolerations.as_ref().map(Vec::len).hash(&mut h);
    s.affinity.is_some().hash(&mut h);
    let containers = |cs: &[Container], h: &mut DefaultHasher| {
        cs.len().hash(h);
        for c in cs {
            c.name.hash(h);
            c.image.hash(h);
            if let Some(r) = &c.resources {
                for m in [&r.requests, &r.limits].into_iter().flatten() {
                    for (k, v) in m {
                        k.hash(h);
                        v.0.hash(h);
                    }
                }
            }
        }
    };
    containers(&s.containers, &mut h);
    containers(s.init_containers.as_deref().unwrap_or_default(), &mut h);
    h.finish()
}

/// A hash of the whole spec: of its JSON encoding, written into the hasher as it is made
/// (maps are ordered, so equal specs write the same bytes).
fn content_hash(s: &PodSpec) -> u64 {
    struct Hashing<'a>(&'a mut DefaultHasher);
    impl std::io::Write for Hashing<'_> {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut h = DefaultHasher::new();
    // Serializing a PodSpec into a writer that cannot fail cannot fail either.
    let _ = serde_json::to_writer(Hashing(&mut h), s);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cpu: &str, node: Option<&str>) -> PodSpec {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        PodSpec {
            node_name: node.map(str::to_string),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn equal_specs_are_one_different_are_not() {
        let mut i = SpecInterner::new();
        let a = i.spec(spec("1", None));
        let b = i.spec(spec("1", None));
        let c = i.spec(spec("2", None));
        let d = i.spec(spec("1", Some("n1")));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c) && !Arc::ptr_eq(&a, &d));
        assert_eq!(*c, spec("2", None));
    }

    #[test]
    fn specs_equal_in_the_fingerprint_only_are_told_apart() {
        let mut i = SpecInterner::new();
        let mut x = spec("1", None);
        x.termination_grace_period_seconds = Some(5);
        let a = i.spec(x.clone());
        let b = i.spec(spec("1", None));
        assert!(!Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&a, &i.spec(x)));
    }

    #[test]
    fn specs_alike_in_their_fingerprint_beyond_a_bucket_are_shared_by_content() {
        let mut i = SpecInterner::new();
        let grace = |g: i64| {
            let mut x = spec("1", None);
            x.termination_grace_period_seconds = Some(g);
            x
        };
        let kept: Vec<_> = (0..3 * BUCKET as i64).map(|g| i.spec(grace(g))).collect();
        for (g, k) in kept.iter().enumerate() {
            let again = i.spec(grace(g as i64));
            assert!(Arc::ptr_eq(k, &again), "spec {g} is shared");
            assert_eq!(*again, grace(g as i64));
        }
        assert!(!Arc::ptr_eq(&kept[0], &kept[2 * BUCKET]));
    }

    #[test]
    fn dropped_specs_are_pruned() {
        let mut i = SpecInterner::new();
        for g in 0..5000 {
            let mut x = spec(&g.to_string(), None);
            x.termination_grace_period_seconds = Some(g);
            drop(i.spec(x));
            let mut y = spec("1", None);
            y.termination_grace_period_seconds = Some(g);
            drop(i.spec(y));
        }
        assert!(i.len() < 2100, "{} entries kept for specs no pod holds", i.len());
        assert_eq!(i.len(), i.buckets.values().chain(i.deep.values()).map(Vec::len).sum::<usize>());
    }

    #[test]
    fn spec_mut_copies_a_shared_spec_and_the_node_is_apart() {
        let mut i = SpecInterner::new();
        let p = Pod { spec: Some(spec("1", None)), ..Default::default() };
        let a = i.pod(p.clone());
        let mut b = i.pod(p.clone());
        assert!(Arc::ptr_eq(a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap()));
        b.set_node_name(Some("n1".into()));
        assert!(Arc::ptr_eq(a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap()), "binding copies no spec");
        assert_eq!((a.node_name(), b.node_name()), (None, Some("n1")));
        assert_eq!(b.to_pod().spec.unwrap().node_name.as_deref(), Some("n1"));
        let bound = i.pod(Pod { spec: Some(spec("1", Some("n2"))), ..Default::default() });
        assert!(Arc::ptr_eq(a.spec.as_ref().unwrap(), bound.spec.as_ref().unwrap()), "nor listing a bound pod");
        assert_eq!(bound.node_name(), Some("n2"));
        assert_eq!(bound.spec.as_ref().unwrap().node_name, None);
        b.spec_mut().priority = Some(5);
        assert!(!Arc::ptr_eq(a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap()));
        assert_eq!(a.spec.as_ref().unwrap().priority, None);
        let empty = SchedPod::from(Pod { spec: Some(spec("1", Some(""))), ..Default::default() });
        assert_eq!(empty.node_name(), None);
    }
}
