//! Jobs with a network topology constraint, through the real cycle driver and plugins.

use volcano_framework::{run_cycle, CycleContext, Effect, InvariantChecker, Profile, Registries};
use volcano_testkit::*;

fn run(objects: Objects, conf: &str) -> Vec<Effect> {
    let reg = Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() };
    let profile = Profile::from_yaml(conf, &reg).unwrap();
    let mut checker = InvariantChecker::default();
    let cx = CycleContext { cycle: 1, now_ms: 1_800_000_000_000, options: Default::default() };
    let out = run_cycle(objects.snapshot(), &profile, &cx, &mut checker);
    assert!(checker.violations.is_empty(), "{:?}", checker.violations);
    out.effects
}

fn binds(effects: &[Effect]) -> Vec<(String, String)> {
    let mut b: Vec<(String, String)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bind { pod, node, .. } => Some((pod.to_string(), node.to_string())),
            _ => None,
        })
        .collect();
    b.sort();
    b
}

const CONF: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: nodeorder
"#;

/// n0..n7 with 4 GPUs each; leaves l0 = {n0, n1}, l1 = {n2, n3}, l2 = {n4, n5},
/// l3 = {n6, n7}; spines s0 = {l0, l1}, s1 = {l2, l3}. n0 runs a 3-GPU pod.
fn cluster() -> Objects {
    let mut o = Objects::new();
    for i in 0..8 {
        o = o.node(node(&format!("n{i}"), "32", "128Gi").gpu("4"));
    }
    for (l, a, b) in [("l0", "n0", "n1"), ("l1", "n2", "n3"), ("l2", "n4", "n5"), ("l3", "n6", "n7")] {
        o = o.hyper_node(hyper_node(l, 1, &[("Node", a), ("Node", b)]));
    }
    o = o.hyper_node(hyper_node("s0", 2, &[("HyperNode", "l0"), ("HyperNode", "l1")]));
    o = o.hyper_node(hyper_node("s1", 2, &[("HyperNode", "l2"), ("HyperNode", "l3")]));
    o.pod_group(pod_group("ns", "busy", 1))
        .pod(pod("ns", "busy-0").group("busy").cpu_mem("1", "1Gi").gpu("3").running_on("n0"))
}

fn job(o: Objects, name: &str, pods: i32, pg: impl FnOnce(PodGroupBuilder) -> PodGroupBuilder) -> Objects {
    let mut o = o.pod_group(pg(pod_group("ns", name, pods)));
    for i in 0..pods {
        o = o.pod(pod("ns", &format!("{name}-{i}")).group(name).cpu_mem("1", "1Gi").gpu("1"));
    }
    o
}

fn nodes_of(binds: &[(String, String)], job: &str) -> std::collections::BTreeSet<String> {
    binds.iter().filter(|(p, _)| p.starts_with(&format!("ns/{job}-"))).map(|(_, n)| n.clone()).collect()
}

#[test]
fn a_hard_tier_1_job_goes_whole_into_one_leaf() {
    // 8 GPUs: l0 has 5 free, every other leaf 8; the first by name of those is l1.
    let b = binds(&run(job(cluster(), "j", 8, |p| p.network_topology("hard", Some(1))), CONF));
    assert_eq!(b.len(), 8, "{b:?}");
    assert_eq!(nodes_of(&b, "j"), ["n2", "n3"].map(String::from).into());
}

#[test]
fn without_a_constraint_the_same_job_spreads_as_before() {
    let b = binds(&run(job(cluster(), "j", 8, |p| p), CONF));
    assert_eq!(b.len(), 8, "{b:?}");
    assert!(nodes_of(&b, "j").len() > 2, "{b:?}");
}

#[test]
fn a_hard_job_larger_than_every_leaf_waits_and_says_why() {
    let effects = run(job(cluster(), "j", 12, |p| p.network_topology("hard", Some(1))), CONF);
    assert!(binds(&effects).is_empty());
    let text = format!("{effects:?}");
    assert!(
        text.contains(
            "network topology hard: the job fits no HyperNode of tier 1 or below (4 tried); the closest, l1 (tier 1), holds 8 of the 12 pods it needs"
        ),
        "{text}"
    );
}

#[test]
fn a_soft_job_larger_than_every_leaf_takes_the_lowest_tier_that_holds_it() {
    // 12 GPUs: no leaf holds them; both spines do (s0 13 free, s1 16): s0, first by name.
    let b = binds(&run(job(cluster(), "j", 12, |p| p.network_topology("soft", None)), CONF));
    assert_eq!(b.len(), 12, "{b:?}");
    let nodes = nodes_of(&b, "j");
    assert!(nodes.iter().all(|n| ["n0", "n1", "n2", "n3"].contains(&n.as_str())), "{b:?}");
}

#[test]
fn a_hard_tier_2_job_fits_a_spine() {
    let b = binds(&run(job(cluster(), "j", 16, |p| p.network_topology("hard", Some(2))), CONF));
    assert_eq!(nodes_of(&b, "j"), ["n4", "n5", "n6", "n7"].map(String::from).into(), "{b:?}");
}
