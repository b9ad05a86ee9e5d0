//! The pod as the scheduler keeps it: [`SchedPod`], a Kubernetes pod whose spec is shared
//! behind an `Arc`, and [`SpecInterner`], which makes pods with equal specs share one.
//!
//! A cluster's pods come from few templates: the pods of one task of a Job, of one
//! ReplicaSet, of one gang differ in their metadata and status, and (once the kube backend
//! has slimmed them to what scheduling reads, or as a benchmark generates them) not at all
//! in their spec until they are bound. A Kubernetes `Pod` holds its spec by value — with
//! its containers, resources and affinity, most of a pod's memory — so 100,000 pods of a
//! few thousand templates hold 100,000 copies. Here they hold a few thousand, and a pod
//! whose status or metadata changes (a condition written, a label added) is copied without
//! its spec. The field names are Kubernetes' (`metadata`, `spec`, `status`), so code reads a
//! `SchedPod` as it reads a `Pod`; writing the spec goes through [`SchedPod::spec_mut`],
//! which copies a shared spec first.
//!
//! `nodeName` stays in the spec: a bound pod's spec is shared with the pods of its template
//! bound to the same node, no more, and nothing can read a stale node name.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A pod whose spec is shared with the pods of equal spec (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SchedPod {
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The spec, shared; written through [`SchedPod::spec_mut`].
    pub spec: Option<Arc<PodSpec>>,
    /// The status.
    pub status: Option<PodStatus>,
}

impl From<Pod> for SchedPod {
    fn from(p: Pod) -> Self {
        SchedPod { metadata: p.metadata, spec: p.spec.map(Arc::new), status: p.status }
    }
}

impl SchedPod {
    /// The Kubernetes pod (a copy).
    pub fn to_pod(&self) -> Pod {
        Pod { metadata: self.metadata.clone(), spec: self.spec.as_deref().cloned(), status: self.status.clone() }
    }

    /// The spec, to change: a copy of it when it is shared.
    pub fn spec_mut(&mut self) -> &mut PodSpec {
        Arc::make_mut(self.spec.get_or_insert_with(Default::default))
    }

    /// The node the pod is bound to, if any (`spec.nodeName`, empty as absent).
    pub fn node_name(&self) -> Option<&str> {
        self.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
    }
}

/// Written as the Kubernetes pod it is (`apiVersion` and `kind` first).
impl Serialize for SchedPod {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_pod().serialize(s)
    }
}

/// Read as a Kubernetes pod.
impl<'de> Deserialize<'de> for SchedPod {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Pod::deserialize(d).map(SchedPod::from)
    }
}

/// Specs compared in full when a bucket holds more than this many: a spec whose
/// fingerprint matches this many others, none equal, is kept unshared (so a workload
/// whose pods differ only where the fingerprint does not look costs a bounded scan).
const BUCKET: usize = 8;

/// Makes equal specs one shared `Arc`. It holds them weakly: a spec no pod holds any more
/// is dropped with its last pod, and its entry is pruned once the entries have doubled
/// since the last pruning (amortised constant work per spec).
#[derive(Clone, Debug, Default)]
pub struct SpecInterner {
    buckets: HashMap<u64, Vec<Weak<PodSpec>>>,
    entries: usize,
    prune_at: usize,
}

impl SpecInterner {
    /// An empty interner.
    pub fn new() -> Self {
        Self::default()
    }

    /// The pod, its spec shared with an equal one seen before (and kept for the next).
    pub fn pod(&mut self, p: Pod) -> SchedPod {
        SchedPod { metadata: p.metadata, spec: p.spec.map(|s| self.spec(s)), status: p.status }
    }

    /// Shares the pod's spec with an equal one seen before, if any (a spec already shared
    /// by more pods is left as it is).
    pub fn share(&mut self, pod: &mut SchedPod) {
        if let Some(spec) = &pod.spec {
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
        let mut live = 0;
        for kept in bucket.iter() {
            if let Some(kept) = kept.upgrade() {
                if Arc::ptr_eq(&kept, spec) {
                    return None;
                }
                if *kept == **spec {
                    return Some(kept);
                }
                live += 1;
            }
        }
        if live >= BUCKET {
            return None;
        }
        bucket.retain(|w| w.strong_count() > 0);
        bucket.push(Arc::downgrade(spec));
        self.entries += 1;
        if self.entries >= self.prune_at {
            self.prune();
        }
        None
    }

    /// Drops the entries of specs no pod holds any more.
    fn prune(&mut self) {
        self.buckets.retain(|_, b| {
            b.retain(|w| w.strong_count() > 0);
            !b.is_empty()
        });
        self.entries = self.buckets.values().map(Vec::len).sum();
        self.prune_at = (2 * self.entries).max(1024);
    }

    /// Specs kept (live or not yet pruned).
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether no spec is kept.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}

/// Shares equal specs among the pods (those the `Arc`s hold alone; others are left).
pub fn share_specs(pods: &mut [Arc<SchedPod>]) {
    let mut interner = SpecInterner::new();
    for p in pods {
        if let Some(p) = Arc::get_mut(p) {
            interner.share(p);
        }
    }
}

/// A hash of the fields pods of different templates most often differ in: node, scheduler,
/// priority, selectors, and each container's name, image and resources. Equal specs have
/// equal fingerprints; specs equal in these fields only are told apart by comparing them.
fn fingerprint(s: &PodSpec) -> u64 {
    let mut h = DefaultHasher::new();
    s.node_name.hash(&mut h);
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
    fn a_crowded_bucket_keeps_new_specs_unshared_but_correct() {
        let mut i = SpecInterner::new();
        let kept: Vec<_> = (0..BUCKET as i64 + 3)
            .map(|g| {
                let mut x = spec("1", None);
                x.termination_grace_period_seconds = Some(g);
                i.spec(x)
            })
            .collect();
        let mut late = spec("1", None);
        late.termination_grace_period_seconds = Some(BUCKET as i64 + 2);
        let again = i.spec(late.clone());
        assert_eq!(*again, late);
        assert!(Arc::ptr_eq(
            &kept[0],
            &i.spec({
                let mut x = spec("1", None);
                x.termination_grace_period_seconds = Some(0);
                x
            })
        ));
    }

    #[test]
    fn dropped_specs_are_pruned() {
        let mut i = SpecInterner::new();
        for g in 0..5000 {
            let mut x = spec("1", None);
            x.termination_grace_period_seconds = Some(g);
            drop(i.spec(x));
        }
        assert!(i.len() < 2100, "{} entries kept for specs no pod holds", i.len());
    }

    #[test]
    fn spec_mut_copies_a_shared_spec() {
        let mut i = SpecInterner::new();
        let p = Pod { spec: Some(spec("1", None)), ..Default::default() };
        let a = i.pod(p.clone());
        let mut b = i.pod(p);
        b.spec_mut().node_name = Some("n1".into());
        assert_eq!(a.node_name(), None);
        assert_eq!(b.node_name(), Some("n1"));
        assert_eq!(b.to_pod().spec.unwrap().node_name.as_deref(), Some("n1"));
    }

    #[test]
    fn serializes_as_a_kubernetes_pod() {
        let p = Pod { spec: Some(spec("1", Some("n"))), ..Default::default() };
        let s = serde_json::to_value(SchedPod::from(p.clone())).unwrap();
        assert_eq!(s, serde_json::to_value(&p).unwrap());
        let back: SchedPod = serde_json::from_value(s).unwrap();
        assert_eq!(back.to_pod(), p);
    }
}
