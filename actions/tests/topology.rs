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
            "network topology hard: no HyperNode of tier 1 or below has room for the job; the roomiest, l1 (tier 1), has room for 8 of the 12 pods it needs"
        ),
        "{text}"
    );
}

#[test]
fn a_hard_job_whose_leaf_has_room_but_fails_predicates_there_says_where_it_came_closest() {
    // Room for 8 one-GPU pods in l1, l2 and l3, but the pods want nodes labelled `ib`: only
    // n2 (4 GPUs) and n6 (4 GPUs) are.
    let mut o = Objects::new();
    for i in 0..8 {
        let mut n = node(&format!("n{i}"), "32", "128Gi").gpu("4");
        if i == 2 || i == 6 {
            n = n.label("ib", "yes");
        }
        o = o.node(n);
    }
    for (l, a, b) in [("l0", "n0", "n1"), ("l1", "n2", "n3"), ("l2", "n4", "n5"), ("l3", "n6", "n7")] {
        o = o.hyper_node(hyper_node(l, 1, &[("Node", a), ("Node", b)]));
    }
    o = o.pod_group(pod_group("ns", "j", 8).network_topology("hard", Some(1)));
    for i in 0..8 {
        o = o.pod(pod("ns", &format!("j-{i}")).group("j").cpu_mem("1", "1Gi").gpu("1").node_selector("ib", "yes"));
    }
    let effects = run(o, CONF);
    assert!(binds(&effects).is_empty());
    let text = format!("{effects:?}");
    assert!(
        text.contains("network topology hard: the job fits no HyperNode of tier 1 or below (4 tried); the closest, l1 (tier 1), holds 4 of the 8 pods it needs"),
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

// ----- Exactness: the HyperNode search against an exhaustive one, and the node index
// against a full scan, on random small trees. -----

mod exhaustive {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;
    use volcano_framework::SessionOptions;

    use super::*;

    /// A random tree: `leaves` leaves of 1–3 nodes each (tier 1), grouped in twos under
    /// tier-2 HyperNodes, all under one tier-3 HyperNode when `three_tiers`.
    #[derive(Clone, Debug)]
    struct Case {
        /// GPUs free on each node of each leaf (each node has 4; the rest runs a pod).
        leaves: Vec<Vec<u32>>,
        three_tiers: bool,
        pods: u32,
        gpus_per_pod: u32,
        /// Hard limit tier, or soft.
        hard: Option<i32>,
        plugin: bool,
        /// Pods of one GPU of an unconstrained job created after the constrained one (the
        /// plugin's HyperNode binpack of other pods, through the node index).
        free_pods: u32,
    }

    fn arb_case() -> impl Strategy<Value = Case> {
        (
            prop::collection::vec(prop::collection::vec(0u32..=4, 1..=3), 1..=6),
            any::<bool>(),
            1u32..=8,
            1u32..=3,
            prop::option::of(1i32..=3),
            any::<bool>(),
            0u32..=6,
        )
            .prop_map(|(leaves, three_tiers, pods, gpus_per_pod, hard, plugin, free_pods)| Case {
                leaves,
                three_tiers,
                pods,
                gpus_per_pod,
                hard,
                plugin,
                free_pods,
            })
    }

    struct Built {
        objects: Objects,
        /// HyperNode name → (tier, its nodes).
        hyper: BTreeMap<String, (u32, BTreeSet<String>)>,
        /// Node name → free GPUs.
        free: BTreeMap<String, u32>,
    }

    fn build(c: &Case) -> Built {
        let mut o = Objects::new();
        let mut hyper: BTreeMap<String, (u32, BTreeSet<String>)> = BTreeMap::new();
        let mut free = BTreeMap::new();
        let mut all = BTreeSet::new();
        for (l, leaf) in c.leaves.iter().enumerate() {
            let mut members = Vec::new();
            let mut set = BTreeSet::new();
            for (i, f) in leaf.iter().enumerate() {
                let name = format!("n{l}-{i}");
                o = o.node(node(&name, "64", "256Gi").gpu("4"));
                if *f < 4 {
                    let p = format!("{name}-busy");
                    o = o.pod_group(pod_group("ns", &p, 1)).pod(
                        pod("ns", &format!("{p}-0"))
                            .group(&p)
                            .cpu_mem("1", "1Gi")
                            .gpu(&(4 - f).to_string())
                            .running_on(&name),
                    );
                }
                free.insert(name.clone(), *f);
                members.push(name.clone());
                set.insert(name.clone());
                all.insert(name);
            }
            let refs: Vec<(&str, &str)> = members.iter().map(|m| ("Node", m.as_str())).collect();
            let lname = format!("leaf{l}");
            o = o.hyper_node(hyper_node(&lname, 1, &refs));
            hyper.insert(lname, (1, set));
        }
        let spines: Vec<String> = (0..c.leaves.len().div_ceil(2)).map(|s| format!("spine{s}")).collect();
        for (s, sname) in spines.iter().enumerate() {
            let kids: Vec<String> = (2 * s..(2 * s + 2).min(c.leaves.len())).map(|l| format!("leaf{l}")).collect();
            let refs: Vec<(&str, &str)> = kids.iter().map(|k| ("HyperNode", k.as_str())).collect();
            o = o.hyper_node(hyper_node(sname, 2, &refs));
            let nodes: BTreeSet<String> = kids.iter().flat_map(|k| hyper[k].1.clone()).collect();
            hyper.insert(sname.clone(), (2, nodes));
        }
        let top_tier = if c.three_tiers {
            let refs: Vec<(&str, &str)> = spines.iter().map(|s| ("HyperNode", s.as_str())).collect();
            o = o.hyper_node(hyper_node("core", 3, &refs));
            hyper.insert("core".into(), (3, all.clone()));
            4
        } else {
            3
        };
        hyper.insert(volcano_framework::topology::CLUSTER_TOP_HYPER_NODE.into(), (top_tier, all));
        let mut pg = pod_group("ns", "j", c.pods as i32);
        pg = match c.hard {
            Some(t) => pg.network_topology("hard", Some(t)),
            None => pg.network_topology("soft", None),
        };
        o = o.pod_group(pg);
        for i in 0..c.pods {
            o = o.pod(pod("ns", &format!("j-{i}")).group("j").cpu_mem("1", "1Gi").gpu(&c.gpus_per_pod.to_string()));
        }
        if c.free_pods > 0 {
            o = o.pod_group(pod_group("ns", "z", 1).created(1_700_000_100));
            for i in 0..c.free_pods {
                o = o.pod(pod("ns", &format!("z-{i}")).group("z").cpu_mem("1", "1Gi").gpu("1").created(1_700_000_100));
            }
        }
        Built { objects: o, hyper, free }
    }

    /// The HyperNode the job must land in, by exhaustive search: of the lowest tier (within
    /// the limit) where some HyperNode has room for all its pods (identical pods, GPUs only:
    /// room is Σ ⌊free / per pod⌋), the best by the plugin's binpack of GPUs (when
    /// enabled), then by name.
    fn oracle(c: &Case, b: &Built) -> Option<String> {
        let limit = c.hard.map_or(u32::MAX, |t| t as u32);
        let fits = |nodes: &BTreeSet<String>| -> bool {
            nodes.iter().map(|n| b.free[n] / c.gpus_per_pod).sum::<u32>() >= c.pods
        };
        let mut by_tier: BTreeMap<u32, Vec<(&String, &BTreeSet<String>)>> = BTreeMap::new();
        for (name, (tier, nodes)) in &b.hyper {
            if *tier <= limit && fits(nodes) {
                by_tier.entry(*tier).or_default().push((name, nodes));
            }
        }
        let (_, cands) = by_tier.into_iter().next()?;
        let score = |nodes: &BTreeSet<String>| -> f64 {
            if !c.plugin {
                return 0.0;
            }
            let alloc = 4.0 * nodes.len() as f64;
            let used: f64 = nodes.iter().map(|n| 4.0 - b.free[n] as f64).sum();
            (used + (c.pods * c.gpus_per_pod) as f64) / alloc
        };
        cands
            .into_iter()
            .max_by(|x, y| score(x.1).partial_cmp(&score(y.1)).unwrap().then_with(|| y.0.cmp(x.0)))
            .map(|(n, _)| n.clone())
    }

    fn conf(plugin: bool) -> String {
        let extra = if plugin {
            "  - name: network-topology-aware\n    arguments:\n      hypernode.binpack.resources: nvidia.com/gpu\n      hypernode.binpack.cpu: 0\n      hypernode.binpack.memory: 0\n"
        } else {
            ""
        };
        format!("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n  - name: binpack\n{extra}")
    }

    fn run_with(objects: Objects, conf: &str, node_index: bool) -> Vec<Effect> {
        let reg = Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() };
        let profile = Profile::from_yaml(conf, &reg).unwrap();
        let mut checker = InvariantChecker::default();
        let options = SessionOptions { node_index, ..Default::default() };
        let cx = CycleContext { cycle: 1, now_ms: 1_800_000_000_000, options };
        let out = run_cycle(objects.snapshot(), &profile, &cx, &mut checker);
        assert!(checker.violations.is_empty(), "{:?}", checker.violations);
        out.effects
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn the_search_lands_where_an_exhaustive_search_does(c in arb_case()) {
            let b = build(&c);
            let conf = conf(c.plugin);
            let effects = run_with(build(&c).objects, &conf, true);
            let scan = run_with(build(&c).objects, &conf, false);
            prop_assert_eq!(format!("{effects:?}"), format!("{scan:?}"), "node index vs full scan");
            let mine: Vec<(String, String)> = binds(&effects).into_iter().filter(|(p, _)| p.starts_with("ns/j-")).collect();
            let placed: BTreeSet<String> = mine.iter().map(|(_, n)| n.clone()).collect();
            match oracle(&c, &b) {
                None => prop_assert!(placed.is_empty(), "no HyperNode holds the job, yet it went to {placed:?}"),
                Some(h) => {
                    prop_assert_eq!(mine.len(), c.pods as usize);
                    let (tier, nodes) = &b.hyper[&h];
                    prop_assert!(placed.is_subset(nodes), "expected within {h} (tier {tier}), got {placed:?}");
                    // Not within a lower tier's HyperNode by accident: the lowest HyperNode
                    // holding the placement is of the oracle's tier.
                    let lowest = b.hyper.values().filter(|(_, ns)| placed.is_subset(ns)).map(|(t, _)| *t).min();
                    prop_assert!(lowest <= Some(*tier));
                }
            }
        }
    }
}
