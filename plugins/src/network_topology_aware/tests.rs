use serde_json::json;
use volcano_testkit::fixtures::*;
use volcano_testkit::*;

use super::*;

fn plugin(args: serde_json::Value) -> Box<dyn Plugin> {
    factory(&plugin_option(NAME, args)).unwrap().build()
}

/// Leaves l0 = {a0, a1}, l1 = {b0, b1} under spine s; 8 GPUs a node; a0 runs 6 GPUs.
fn objects() -> Objects {
    let mut o = Objects::new();
    for n in ["a0", "a1", "b0", "b1"] {
        o = o.node(node(n, "64", "256Gi").gpu("8"));
    }
    o.hyper_node(hyper_node("l0", 1, &[("Node", "a0"), ("Node", "a1")]))
        .hyper_node(hyper_node("l1", 1, &[("Node", "b0"), ("Node", "b1")]))
        .hyper_node(hyper_node("s", 2, &[("HyperNode", "l0"), ("HyperNode", "l1")]))
        .pod_group(pod_group("ns", "busy", 1))
        .pod(pod("ns", "busy-0").group("busy").cpu_mem("8", "32Gi").gpu("6").running_on("a0"))
}

fn with_job(o: Objects, pods: i32, topology: bool) -> Objects {
    let mut pg = pod_group("ns", "j", pods);
    if topology {
        pg = pg.network_topology("hard", Some(1));
    }
    let mut o = o.pod_group(pg);
    for i in 0..pods {
        o = o.pod(pod("ns", &format!("j-{i}")).group("j").cpu_mem("1", "1Gi").gpu("2"));
    }
    o
}

#[test]
fn arguments_take_volcanos_keys_and_defaults() {
    let s = Args::parse(&plugin_option(NAME, json!({}))).unwrap();
    assert_eq!(s.weight, 1.0);
    assert_eq!(s.resources, vec![("cpu".to_string(), 1), ("memory".to_string(), 1)]);
    assert!(s.normal_pods);
    assert_eq!((s.fading, s.evict_max_hyper_nodes), (0.8, 8));
    let s = Args::parse(&plugin_option(
        NAME,
        json!({
            "weight": 10, "hypernode.binpack.cpu": 5, "hypernode.binpack.memory": -1,
            "hypernode.binpack.resources": "nvidia.com/gpu, example.com/foo",
            "hypernode.binpack.resources.nvidia.com/gpu": 2,
            "hypernode.binpack.normal-pod.enable": false, "hypernode.binpack.normal-pod.fading": 0.5,
            "hypernode.gradient.evict.max-hypernodes": 0
        }),
    ))
    .unwrap();
    assert_eq!(s.weight, 10.0);
    assert_eq!(
        s.resources,
        vec![
            ("cpu".to_string(), 5),
            ("memory".to_string(), 1),
            ("nvidia.com/gpu".to_string(), 2),
            ("example.com/foo".to_string(), 1)
        ]
    );
    assert!(!s.normal_pods);
    assert_eq!((s.fading, s.evict_max_hyper_nodes), (0.5, 8));
    let e = Args::parse(&plugin_option(NAME, json!({"hypernode.binpak.cpu": 1}))).unwrap_err();
    assert!(e.to_string().contains("hypernode.binpak.cpu"), "{e}");
    let e = Args::parse(&plugin_option(NAME, json!({"hypernode.binpack.resources.x": "two"}))).unwrap_err();
    assert!(e.to_string().contains("expected an integer"), "{e}");
}

#[test]
fn the_fuller_hyper_node_that_still_holds_the_job_scores_higher() {
    let args = json!({"hypernode.binpack.resources": "nvidia.com/gpu"});
    let snap = with_job(objects(), 4, true).snapshot();
    let j = job_id(&snap, "ns/j");
    let topo = snap.topology_shared();
    let ssn = plugin_session(snap, plugin(args.clone()));
    let (l0, l1) = (topo.by_name("l0").unwrap(), topo.by_name("l1").unwrap());
    // 8 GPUs: l0 holds 10 free of 16, l1 16: l0 is fuller.
    assert!(ssn.hyper_node_score(j, None, l0) > ssn.hyper_node_score(j, None, l1));
    // 12 GPUs overflow l0 (6 + 12 > 16): 0 there.
    let snap = with_job(objects(), 6, true).snapshot();
    let j = job_id(&snap, "ns/j");
    let ssn = plugin_session(snap, plugin(args));
    assert_eq!(ssn.hyper_node_score(j, None, l0), 0.0);
    assert!(ssn.hyper_node_score(j, None, l1) > 0.0);
}

#[test]
fn a_pod_without_a_constraint_prefers_the_busier_switch() {
    let snap = with_job(objects(), 1, false).snapshot();
    let t = task_named(&snap, "j-0");
    let nodes: Vec<NodeId> = ["a1", "b0"].iter().map(|n| node_id(&snap, n)).collect();
    let ssn = plugin_session(snap, plugin(json!({"hypernode.binpack.resources": "nvidia.com/gpu"})));
    let scores = ssn.node_scores(t, &nodes);
    assert!(scores[0] > scores[1], "{scores:?}");
    let off = plugin_session(
        with_job(objects(), 1, false).snapshot(),
        plugin(json!({"hypernode.binpack.normal-pod.enable": false})),
    );
    assert_eq!(off.node_scores(t, &nodes), vec![0.0, 0.0]);
}

#[test]
fn a_constrained_pod_prefers_nodes_near_its_placed_pods() {
    // j-0 already runs on b0: for j-1, b1 (same leaf) beats a1 (only the spine in common).
    let o = objects()
        .pod_group(pod_group("ns", "j", 2).network_topology("hard", Some(2)))
        .pod(pod("ns", "j-0").group("j").cpu_mem("1", "1Gi").gpu("2").running_on("b0"))
        .pod(pod("ns", "j-1").group("j").cpu_mem("1", "1Gi").gpu("2"));
    let snap = o.snapshot();
    let t = task_named(&snap, "j-1");
    let nodes: Vec<NodeId> = ["a1", "b1"].iter().map(|n| node_id(&snap, n)).collect();
    let ssn = plugin_session(snap, plugin(json!({})));
    let scores = ssn.node_scores(t, &nodes);
    assert_eq!(scores, vec![0.0, 100.0]);
}

#[test]
fn a_placement_undone_gives_its_hyper_node_back() {
    // Another job's pod placed on a1 (leaf l0) and undone: j's score for l0 moves and
    // comes back.
    let o = with_job(objects(), 2, true)
        .pod_group(pod_group("ns", "k", 1))
        .pod(pod("ns", "k-0").group("k").cpu_mem("1", "1Gi").gpu("2"));
    let snap = o.snapshot();
    let j = job_id(&snap, "ns/j");
    let t = task_named(&snap, "k-0");
    let n = node_id(&snap, "a1");
    let l0 = snap.topology().by_name("l0").unwrap();
    let mut ssn = plugin_session(snap, plugin(json!({"hypernode.binpack.resources": "nvidia.com/gpu"})));
    let before = ssn.hyper_node_score(j, None, l0);
    let mut stmt = volcano_framework::Statement::new();
    stmt.allocate(&mut ssn, t, n);
    assert_ne!(ssn.hyper_node_score(j, None, l0), before, "the placement is counted");
    stmt.discard(&mut ssn);
    assert_eq!(ssn.hyper_node_score(j, None, l0), before, "and given back when undone");
}
