//! The system-default topology spread constraints: what PodTopologySpread scores a pod
//! without `topologySpreadConstraints` by, with `defaultingType: System` (Volcano's
//! nodeorder and predicates both build the plugin so, and kube-scheduler's default
//! configuration does too).
//!
//! - The constraints are kube-scheduler's `systemDefaultConstraints`: `maxSkew: 3` on
//!   `kubernetes.io/hostname` and `maxSkew: 5` on `topology.kubernetes.io/zone`, both
//!   `ScheduleAnyway` (so they are scores only: the filter has no default constraints).
//! - Their selector is `helper.DefaultSelector`'s: the merged selectors of the Services of
//!   the pod's namespace that select it (a Service without a selector selects nothing),
//!   plus the selector of its controlling owner when that is a ReplicationController
//!   (`v1`), a ReplicaSet or a StatefulSet (`apps/v1`) of its namespace. An empty selector
//!   means no constraint.
//! - A node without one of the keys is still scored by the other (`requireAllTopologies` is
//!   false for system defaults), which lets nodes without a zone label spread on the
//!   hostname.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use volcano_framework::pod::SchedPod as Pod;
use volcano_framework::Extras;

use super::selector::Selector;

/// `kubernetes.io/hostname`.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";

/// kube-scheduler's system-default constraints: (topology key, `maxSkew`), all
/// `ScheduleAnyway`, with the default node inclusion policies (node affinity honoured,
/// taints ignored).
pub const SYSTEM_DEFAULT_CONSTRAINTS: [(&str, i64); 2] = [(LABEL_HOSTNAME, 3), (LABEL_ZONE, 5)];

/// Whether a pod gets the system-default constraints (it has none of its own; an empty
/// list counts as none).
pub fn applies_to(pod: &Pod) -> bool {
    pod.spec.as_ref().is_none_or(|s| s.topology_spread_constraints.as_ref().is_none_or(|c| c.is_empty()))
}

/// The controlling owner of a pod (`metav1.GetControllerOf`).
pub fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true))
}

/// The selector of a pod's system-default constraints (see the module docs); `None` when
/// it is empty (nothing selects the pod), and the pod then has no default constraint.
pub fn default_selector(extras: &Extras, pod: &Pod) -> Option<Selector> {
    static EMPTY: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let labels = pod.metadata.labels.as_ref().unwrap_or(&EMPTY);
    let mut selector = Selector::everything();
    for s in extras.services_selecting(ns, labels) {
        for (k, v) in s {
            selector.require(k, v, true);
        }
    }
    if let Some(owner) = controller_of(pod) {
        match (owner.api_version.as_str(), owner.kind.as_str()) {
            ("v1", "ReplicationController") => {
                if let Some(rc) = extras.replication_controller(ns, &owner.name) {
                    for (k, v) in rc.spec.as_ref().and_then(|s| s.selector.as_ref()).into_iter().flatten() {
                        selector.require(k, v, true);
                    }
                }
            }
            ("apps/v1", "ReplicaSet") => {
                if let Some(rs) = extras.replica_set(ns, &owner.name) {
                    selector.add_all(&Selector::compile(rs.spec.as_ref().map(|s| &s.selector)));
                }
            }
            ("apps/v1", "StatefulSet") => {
                if let Some(ss) = extras.stateful_set(ns, &owner.name) {
                    selector.add_all(&Selector::compile(ss.spec.as_ref().map(|s| &s.selector)));
                }
            }
            _ => {}
        }
    }
    (!selector.is_everything()).then_some(selector)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
    use k8s_openapi::api::core::v1::{
        PodSpec, ReplicationController, ReplicationControllerSpec, Service, ServiceSpec, TopologySpreadConstraint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference,
    };
    use volcano_framework::ClusterObjects;

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn meta(ns: &str, name: &str) -> ObjectMeta {
        ObjectMeta { name: Some(name.into()), namespace: Some(ns.into()), ..Default::default() }
    }

    fn objects() -> Extras {
        let service = |ns: &str, name: &str, sel: &[(&str, &str)]| {
            Arc::new(Service {
                metadata: meta(ns, name),
                spec: Some(ServiceSpec { selector: Some(map(sel)), ..Default::default() }),
                ..Default::default()
            })
        };
        Extras::from_objects(&ClusterObjects {
            services: vec![
                service("a", "job", &[("job", "j1")]),
                service("a", "role", &[("role", "worker")]),
                service("b", "job", &[("job", "j1"), ("other", "x")]),
            ],
            replication_controllers: vec![Arc::new(ReplicationController {
                metadata: meta("a", "rc"),
                spec: Some(ReplicationControllerSpec { selector: Some(map(&[("rc", "1")])), ..Default::default() }),
                ..Default::default()
            })],
            replica_sets: vec![Arc::new(ReplicaSet {
                metadata: meta("a", "rs"),
                spec: Some(ReplicaSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(map(&[("rs", "1")])),
                        match_expressions: Some(vec![LabelSelectorRequirement {
                            key: "tier".into(),
                            operator: "In".into(),
                            values: Some(vec!["a".into(), "b".into()]),
                        }]),
                    },
                    ..Default::default()
                }),
                ..Default::default()
            })],
            stateful_sets: vec![Arc::new(StatefulSet {
                metadata: meta("a", "ss"),
                spec: Some(StatefulSetSpec {
                    selector: LabelSelector { match_labels: Some(map(&[("ss", "1")])), ..Default::default() },
                    ..Default::default()
                }),
                ..Default::default()
            })],
            ..Default::default()
        })
    }

    fn pod(ns: &str, labels: &[(&str, &str)], owner: Option<(&str, &str, &str, bool)>) -> Pod {
        let mut p = Pod::default();
        p.metadata = meta(ns, "p");
        p.metadata.labels = Some(map(labels));
        if let Some((api_version, kind, name, controller)) = owner {
            p.metadata.owner_references = Some(vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: name.into(),
                controller: Some(controller),
                ..Default::default()
            }]);
        }
        p
    }

    fn matches(s: &Selector, labels: &[(&str, &str)]) -> bool {
        s.matches(&map(labels))
    }

    #[test]
    fn services_of_the_pod_s_namespace_are_merged() {
        let e = objects();
        let s = default_selector(&e, &pod("a", &[("job", "j1"), ("role", "worker"), ("i", "0")], None)).unwrap();
        assert!(matches(&s, &[("job", "j1"), ("role", "worker")]));
        assert!(!matches(&s, &[("job", "j1")]), "both Services' selectors apply");
        // Only the Services that select the pod, in its namespace.
        let s = default_selector(&e, &pod("a", &[("job", "j1")], None)).unwrap();
        assert!(matches(&s, &[("job", "j1"), ("role", "ps")]));
        assert!(default_selector(&e, &pod("b", &[("job", "j1")], None)).is_none());
        assert!(default_selector(&e, &pod("c", &[("job", "j1")], None)).is_none());
    }

    #[test]
    fn controlling_owners_add_their_selectors() {
        let e = objects();
        let s = default_selector(&e, &pod("a", &[("rc", "1")], Some(("v1", "ReplicationController", "rc", true))));
        assert!(matches(&s.unwrap(), &[("rc", "1")]));
        let s = default_selector(&e, &pod("a", &[], Some(("apps/v1", "ReplicaSet", "rs", true)))).unwrap();
        assert!(matches(&s, &[("rs", "1"), ("tier", "b")]));
        assert!(!matches(&s, &[("rs", "1"), ("tier", "c")]));
        // With a Service too.
        let s =
            default_selector(&e, &pod("a", &[("job", "j1")], Some(("apps/v1", "StatefulSet", "ss", true)))).unwrap();
        assert!(matches(&s, &[("ss", "1"), ("job", "j1")]) && !matches(&s, &[("ss", "1")]));
        // Not the controller, another API version, another kind or an unknown name: nothing.
        for owner in [
            ("apps/v1", "ReplicaSet", "rs", false),
            ("apps/v1beta2", "ReplicaSet", "rs", true),
            ("batch.volcano.sh/v1alpha1", "Job", "rs", true),
            ("apps/v1", "ReplicaSet", "gone", true),
        ] {
            assert!(default_selector(&e, &pod("a", &[], Some(owner))).is_none(), "{owner:?}");
        }
    }

    #[test]
    fn own_constraints_replace_the_defaults() {
        let mut p = pod("a", &[], None);
        assert!(applies_to(&p));
        p.spec = Some(Arc::new(PodSpec { topology_spread_constraints: Some(vec![]), ..Default::default() }));
        assert!(applies_to(&p));
        p.spec_mut().topology_spread_constraints = Some(vec![TopologySpreadConstraint::default()]);
        assert!(!applies_to(&p));
    }
}
