//! Small hand-built placements: for every rule, a placement that keeps it and one that
//! breaks it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Namespace, Node, NodeSpec, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, PodStatus, Taint,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use volcano_framework::{ClusterObjects, Effect, ObjectRef};

use super::check;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";

/// Node `n{i}` in zone `z{i mod 2}`, with its hostname label.
fn node(i: usize) -> Node {
    let name = format!("n{i}");
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some([(ZONE.to_string(), format!("z{}", i % 2)), (HOST.to_string(), name)].into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    }
}

fn on(mut p: Pod, node: &str) -> Pod {
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    p.status.as_mut().unwrap().phase = Some("Running".into());
    p
}

fn term(key: &str, value: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some([(key.to_string(), value.to_string())].into()),
            ..Default::default()
        }),
        topology_key: topology_key.into(),
        ..Default::default()
    }
}

fn anti(mut p: Pod, t: PodAffinityTerm) -> Pod {
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![t]),
            ..Default::default()
        }),
        ..Default::default()
    });
    p
}

fn affinity(mut p: Pod, t: PodAffinityTerm) -> Pod {
    p.spec.as_mut().unwrap().affinity = Some(Affinity {
        pod_affinity: Some(PodAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![t]),
            ..Default::default()
        }),
        ..Default::default()
    });
    p
}

fn spread(mut p: Pod, key: &str, value: &str) -> Pod {
    p.spec.as_mut().unwrap().topology_spread_constraints = Some(vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: ZONE.into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([(key.to_string(), value.to_string())].into()),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    p
}

fn objects(nodes: usize, pods: Vec<Pod>) -> ClusterObjects {
    ClusterObjects {
        nodes: (0..nodes).map(|i| Arc::new(node(i))).collect(),
        pods: pods.into_iter().map(|p| Arc::new(p.into())).collect(),
        ..Default::default()
    }
}

fn bind(key: &str, node: &str) -> Effect {
    let (ns, name) = key.split_once('/').unwrap();
    Effect::Bind { pod: ObjectRef::namespaced(ns, name, ""), node: node.into(), annotations: Vec::new() }
}

fn binds(list: &[(&str, &str)]) -> Vec<Effect> {
    list.iter().map(|(p, n)| bind(p, n)).collect()
}

#[test]
fn anti_affinity_against_a_running_pod() {
    let o =
        objects(2, vec![on(pod("b", "web", &[("app", "a")]), "n0"), anti(pod("b", "p", &[]), term("app", "a", HOST))]);
    let v = check(&o, &binds(&[("b/p", "n0")]));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("required anti-affinity (kubernetes.io/hostname) broken by pod b/web"), "{v:?}");
    assert!(check(&o, &binds(&[("b/p", "n1")])).is_empty());
}

#[test]
fn anti_affinity_within_the_cycle() {
    let member = |name: &str| anti(pod("b", name, &[("job", "j")]), term("job", "j", HOST));
    let o = objects(2, vec![member("p0"), member("p1")]);
    let v = check(&o, &binds(&[("b/p0", "n1"), ("b/p1", "n1")]));
    // The later bind breaks both its own rule and, symmetrically, the earlier pod's.
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v.iter().all(|m| m.starts_with("pod b/p1 on node n1")), "{v:?}");
    assert!(check(&o, &binds(&[("b/p0", "n0"), ("b/p1", "n1")])).is_empty());
}

#[test]
fn anti_affinity_looks_only_in_its_namespaces() {
    // The term of a pod of namespace `b` selects pods of `b` only...
    let o = objects(
        1,
        vec![on(pod("other", "web", &[("app", "a")]), "n0"), anti(pod("b", "p", &[]), term("app", "a", HOST))],
    );
    assert!(check(&o, &binds(&[("b/p", "n0")])).is_empty());
    // ...unless its namespaceSelector selects others (`{}`: every namespace).
    let mut t = term("app", "a", HOST);
    t.namespace_selector = Some(LabelSelector::default());
    let mut o = objects(1, vec![on(pod("other", "web", &[("app", "a")]), "n0"), anti(pod("b", "p", &[]), t)]);
    o.namespaces.push(Arc::new(Namespace {
        metadata: ObjectMeta { name: Some("other".into()), ..Default::default() },
        ..Default::default()
    }));
    assert_eq!(check(&o, &binds(&[("b/p", "n0")])).len(), 1);
}

#[test]
fn symmetric_anti_affinity_of_a_running_pod() {
    let o = objects(
        2,
        vec![on(anti(pod("b", "guard", &[]), term("app", "a", HOST)), "n0"), pod("b", "p", &[("app", "a")])],
    );
    let v = check(&o, &binds(&[("b/p", "n0")]));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("required anti-affinity (kubernetes.io/hostname) of pod b/guard on node n0 broken"), "{v:?}");
    assert!(check(&o, &binds(&[("b/p", "n1")])).is_empty());
}

#[test]
fn symmetric_anti_affinity_by_zone() {
    // n0 and n2 share zone z0.
    let o = objects(
        3,
        vec![on(anti(pod("b", "guard", &[]), term("app", "a", ZONE)), "n0"), pod("b", "p", &[("app", "a")])],
    );
    assert_eq!(check(&o, &binds(&[("b/p", "n2")])).len(), 1);
    assert!(check(&o, &binds(&[("b/p", "n1")])).is_empty());
}

#[test]
fn an_evicted_pod_no_longer_counts() {
    let o =
        objects(1, vec![on(pod("b", "web", &[("app", "a")]), "n0"), anti(pod("b", "p", &[]), term("app", "a", HOST))]);
    let evict = Effect::Evict {
        pod: ObjectRef::namespaced("b", "web", ""),
        node: "n0".into(),
        action: "preempt",
        reason: String::new(),
    };
    assert!(check(&o, &[evict, bind("b/p", "n0")]).is_empty());
}

#[test]
fn affinity_needs_a_matching_pod_in_the_domain() {
    let o = objects(
        3,
        vec![on(pod("b", "db", &[("app", "db")]), "n0"), affinity(pod("b", "p", &[]), term("app", "db", ZONE))],
    );
    let v = check(&o, &binds(&[("b/p", "n1")]));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("required affinity: no matching pod"), "{v:?}");
    // n2 is in n0's zone.
    assert!(check(&o, &binds(&[("b/p", "n2")])).is_empty());
}

#[test]
fn affinity_first_pod_of_its_group() {
    // No pod matches anywhere: a pod that matches its own term may go anywhere...
    let o = objects(2, vec![affinity(pod("b", "p", &[("job", "j")]), term("job", "j", HOST))]);
    assert!(check(&o, &binds(&[("b/p", "n1")])).is_empty());
    // ...one that does not match it may not.
    let o = objects(2, vec![affinity(pod("b", "p", &[]), term("job", "j", HOST))]);
    assert_eq!(check(&o, &binds(&[("b/p", "n1")])).len(), 1);
    // Once the first is placed, the second must join it.
    let member = |name: &str| affinity(pod("b", name, &[("job", "j")]), term("job", "j", HOST));
    let o = objects(2, vec![member("p0"), member("p1")]);
    assert!(check(&o, &binds(&[("b/p0", "n1"), ("b/p1", "n1")])).is_empty());
    assert_eq!(check(&o, &binds(&[("b/p0", "n1"), ("b/p1", "n0")])).len(), 1);
}

#[test]
fn affinity_needs_the_topology_key_on_the_node() {
    let mut o = objects(1, vec![affinity(pod("b", "p", &[("job", "j")]), term("job", "j", "rack"))]);
    assert!(check(&o, &binds(&[("b/p", "n0")]))[0].contains("the node has no label rack"));
    let mut n = node(0);
    n.metadata.labels.as_mut().unwrap().insert("rack".into(), "r0".into());
    o.nodes[0] = Arc::new(n);
    assert!(check(&o, &binds(&[("b/p", "n0")])).is_empty());
}

#[test]
fn spread_is_checked_at_each_bind() {
    let member = |name: &str| spread(pod("b", name, &[("job", "j")]), "job", "j");
    let o = objects(4, vec![member("p0"), member("p1"), member("p2")]);
    // Zones z0 (n0, n2) and z1 (n1, n3): z0, z1, z0 keeps maxSkew 1 at every step.
    assert!(check(&o, &binds(&[("b/p0", "n0"), ("b/p1", "n1"), ("b/p2", "n2")])).is_empty());
    // z0, z0: the second bind makes the skew 2 (1 in z0 + itself − 0 in z1).
    let v = check(&o, &binds(&[("b/p0", "n0"), ("b/p1", "n2"), ("b/p2", "n1")]));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("pod b/p1 on node n2: topology spread (topology.kubernetes.io/zone): skew 2"), "{v:?}");
}

#[test]
fn spread_counts_running_pods_of_the_namespace_only() {
    let member = |name: &str| spread(pod("b", name, &[("job", "j")]), "job", "j");
    // A running member in z1 lets the first new one go to z0, but not to z1.
    let running = on(pod("b", "old", &[("job", "j")]), "n1");
    let o = objects(4, vec![running.clone(), member("p0")]);
    assert!(check(&o, &binds(&[("b/p0", "n0")])).is_empty());
    assert_eq!(check(&o, &binds(&[("b/p0", "n3")])).len(), 1);
    // The same pod in another namespace does not count.
    let o = objects(4, vec![on(pod("other", "old", &[("job", "j")]), "n1"), member("p0")]);
    assert!(check(&o, &binds(&[("b/p0", "n3")])).is_empty());
}

#[test]
fn spread_domains_come_from_the_eligible_nodes() {
    // With a nodeSelector for z1, only z1 is a domain: two pods there keep the skew at 1.
    let member = |name: &str| {
        let mut p = spread(pod("b", name, &[("job", "j")]), "job", "j");
        p.spec.as_mut().unwrap().node_selector = Some([(ZONE.to_string(), "z1".to_string())].into());
        p
    };
    let o = objects(4, vec![member("p0"), member("p1")]);
    assert!(check(&o, &binds(&[("b/p0", "n1"), ("b/p1", "n3")])).is_empty());
    // A tainted node is still a domain (nodeTaintsPolicy Ignore), so z0 counts.
    let mut o = objects(4, vec![spread(pod("b", "p0", &[("job", "j")]), "job", "j")]);
    o.pods.push(Arc::new(spread(pod("b", "p1", &[("job", "j")]), "job", "j").into()));
    for i in [0, 2] {
        let mut n = node(i);
        n.spec = Some(NodeSpec {
            taints: Some(vec![Taint { key: "k".into(), effect: "NoSchedule".into(), ..Default::default() }]),
            ..Default::default()
        });
        o.nodes[i] = Arc::new(n);
    }
    assert_eq!(check(&o, &binds(&[("b/p0", "n1"), ("b/p1", "n3")])).len(), 1);
}

#[test]
fn spread_needs_the_topology_key_on_the_node() {
    let mut o = objects(2, vec![spread(pod("b", "p", &[("job", "j")]), "job", "j")]);
    let mut bare = node(1);
    bare.metadata.labels.as_mut().unwrap().remove(ZONE);
    o.nodes[1] = Arc::new(bare);
    let v = check(&o, &binds(&[("b/p", "n1")]));
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("topology spread: the node has no label topology.kubernetes.io/zone"), "{v:?}");
    assert!(check(&o, &binds(&[("b/p", "n0")])).is_empty());
}

#[test]
fn node_selection_is_checked() {
    let mut p = pod("b", "p", &[]);
    p.spec.as_mut().unwrap().node_selector = Some([(ZONE.to_string(), "z1".to_string())].into());
    let o = objects(2, vec![p]);
    assert_eq!(check(&o, &binds(&[("b/p", "n0")])).len(), 1);
    assert!(check(&o, &binds(&[("b/p", "n1")])).is_empty());
}

#[test]
fn unknown_pods_and_nodes_are_reported() {
    let o = objects(1, vec![pod("b", "p", &[])]);
    assert_eq!(check(&o, &binds(&[("b/q", "n0")])).len(), 1);
    assert_eq!(check(&o, &binds(&[("b/p", "n9")])).len(), 1);
    assert_eq!(check(&o, &binds(&[("b/p", "n0"), ("b/p", "n0")])).len(), 1);
}
