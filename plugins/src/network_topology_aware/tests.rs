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
    let names = |s: &Settings| s.resources.iter().map(|(n, w)| (n.to_string(), *w)).collect::<Vec<_>>();
    assert_eq!(names(&s), vec![("cpu".to_string(), 1), ("memory".to_string(), 1)]);
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
        names(&s),
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

/// A job of two partitions of two pods (`j-0`, `j-1` in sub-group `w-0`; `j-2`, `j-3` in
/// `w-1`) whose policy asks for one leaf each, and no job-level constraint; `j-0` runs on
/// b0 and `j-2` on a1.
fn partitioned() -> Objects {
    let mut pg = pod_group("ns", "j", 4).partition_policy("w", 2, 2).build();
    pg.spec.sub_group_policy.as_mut().unwrap()[0].network_topology = Some(volcano_api::crd::NetworkTopologySpec {
        mode: Some("hard".into()),
        highest_tier_allowed: Some(1),
        highest_tier_name: None,
    });
    let mut o = objects();
    o.0.pod_groups.push(std::sync::Arc::new(pg));
    let running = [Some("b0"), None, Some("a1"), None];
    for (i, on) in running.iter().enumerate() {
        let mut p = pod("ns", &format!("j-{i}"))
            .group("j")
            .label("volcano.sh/task-spec", "w")
            .label("volcano.sh/partition-id", &(i / 2).to_string())
            .cpu_mem("1", "1Gi")
            .gpu("1");
        if let Some(n) = on {
            p = p.running_on(n);
        }
        o = o.pod(p);
    }
    o
}

#[test]
fn a_pod_of_a_constrained_sub_group_prefers_nodes_near_its_sub_groups_pods() {
    let snap = partitioned().snapshot();
    let nodes: Vec<NodeId> = ["a1", "b1"].iter().map(|n| node_id(&snap, n)).collect();
    let (t1, t3) = (task_named(&snap, "j-1"), task_named(&snap, "j-3"));
    let ssn = plugin_session(snap, plugin(json!({})));
    // j-1's sub-group runs on b0 (leaf l1), j-3's on a1 (leaf l0): each is drawn to its own.
    assert_eq!(ssn.node_scores(t1, &nodes), vec![0.0, 100.0]);
    assert_eq!(ssn.node_scores(t3, &nodes), vec![100.0, 0.0]);
}

#[test]
fn a_sub_group_is_scored_on_its_own_pending_pods() {
    // Sub-group w-1 asks for 1 GPU more; the whole job's pending pods for 2.
    let snap = partitioned().snapshot();
    let j = job_id(&snap, "ns/j");
    let w1 = snap.task(task_named(&snap, "j-3")).sub_group;
    assert!(w1.is_some());
    let l0 = snap.topology().by_name("l0").unwrap();
    let ssn = plugin_session(
        snap,
        plugin(
            json!({"hypernode.binpack.resources": "nvidia.com/gpu", "hypernode.binpack.cpu": 0, "hypernode.binpack.memory": 0}),
        ),
    );
    // l0: 16 GPUs, 7 used (busy's 6 and j-2's 1): 8/16 for the sub-group, 9/16 for the job.
    assert_eq!(ssn.hyper_node_score(j, w1, l0), 50.0);
    assert_eq!(ssn.hyper_node_score(j, None, l0), 56.25);
}
