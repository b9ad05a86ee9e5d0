use smallvec::smallvec;

use super::*;

/// The `expected` mode's settings.
fn settings() -> Settings {
    Settings {
        weight: 1.0,
        popularity: DEFAULT_POPULARITY,
        mode: Mode::Expected,
        resolution: DEFAULT_RESOLUTION,
        tie_break: DEFAULT_TIE_BREAK,
        weighting: DEFAULT_WEIGHTING,
        card_choice: CardChoice::Fragmentation,
        cpu_pods: false,
    }
}

fn typical(cpu: f64, count: u32, milli: u32, p: f64) -> Typical {
    Typical { req: Request { cpu, count, milli }, p, rep: TaskId(0), constraints: None }
}

#[test]
fn fragmentation_counts_what_each_request_cannot_use() {
    // Half the workload wants 0.5 card, half wants 2 whole cards.
    let workload = [typical(1000.0, 1, 500, 0.5), typical(1000.0, 2, 1000, 0.5)];
    // Cards with 300 and 1000 free: the 0.5 request can use the idle card, so 300 is
    // fragmented for it; the 2-card request fits nowhere, so all 1300 are.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &free), 0.5 * 300.0 + 0.5 * 1300.0);
    // Not enough cpu for either: everything is fragmented.
    let starved = NodeFree { cpu: 500.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &starved), 1300.0);
    // A request the node's labels rule out sees all of it as fragmented.
    let idle = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 1000] };
    assert_eq!(frag_of(&workload, |i| i == 0, &idle), 0.5 * 2000.0);
    // Nothing free, nothing fragmented.
    assert_eq!(frag_of(&workload, |_| true, &NodeFree { cpu: 0.0, gpus: smallvec![0, 0] }), 0.0);
}

#[test]
fn a_fraction_goes_where_it_fragments_least() {
    let mut plugin = Fragmentation::new(settings());
    plugin.workload = vec![typical(1000.0, 1, 500, 0.5), typical(1000.0, 1, 1000, 0.5)];
    plugin.class_of = vec![0, 0];
    plugin.classes = vec![vec![true, true]];
    // A 0.5 pod: on node 0 it fills the card with 500 free (no new fragment); on node 1 it
    // would split an idle card, leaving 500 the whole-card request cannot use.
    let n0 = NodeFree { cpu: 8000.0, gpus: smallvec![500, 1000] };
    let n1 = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 1000] };
    let place = |n: NodeId, free: &NodeFree| {
        let cards = free.choose(1, 500).unwrap();
        plugin.fragmentation(n, free) - plugin.fragmentation(n, &free.after(1000.0, 500, &cards))
    };
    assert!(place(NodeId(0), &n0) > place(NodeId(1), &n1));
}

#[test]
fn a_fraction_takes_the_card_that_fragments_least() {
    let mut plugin = Fragmentation::new(settings());
    // The workload: pods of 0.6 card, and pods of 0.3.
    plugin.workload = vec![typical(1000.0, 1, 600, 0.5), typical(1000.0, 1, 300, 0.5)];
    plugin.class_of = vec![0];
    plugin.classes = vec![vec![true, true]];
    // A 0.3 pod on a node with 400 and 700 free: on the tightest card it leaves 100 and
    // 700 (the 100 is lost to both requests: 0.5 × 100 + 0.5 × 100 = 100); on the other,
    // 400 and 400 (lost to the 0.6 request: 0.5 × 800 = 400). The tightest card wins.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![400, 700] };
    let req = Request { cpu: 1000.0, count: 1, milli: 300 };
    let (cards, after, _) = plugin.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[0]);
    assert_eq!(after.gpus.as_slice(), &[100, 700]);
    // On 700 and 1000 free, the tightest card is not the best one:
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![700, 1000] };
    let req = Request { cpu: 1000.0, count: 1, milli: 300 };
    // On card 0: 400 and 1000 left: the 0.6 request cannot use 400 (0.5 × 400 = 200).
    // On card 1: 700 and 700 left: both requests use both cards (0).
    let (cards, _, frag) = plugin.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[1], "the card that keeps both cards usable");
    assert_eq!(frag, 0.0);
    // The tightest card, as the device layer would choose, in the paper's mode.
    let mut tight = plugin;
    tight.settings.card_choice = CardChoice::Tightest;
    let (cards, _, frag) = tight.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[0]);
    assert_eq!(frag, 200.0);
}

#[test]
fn nodes_are_matched_by_the_labels_the_constraints_read() {
    let spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(serde_json::json!({
        "containers": [],
        "nodeSelector": {"zone": "a"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["T4"]}]}
        ]}}}
    }))
    .unwrap();
    assert_eq!(read_labels(&[&spec]), Some(vec!["nvidia.com/gpu.product", "zone"]));
    // A term on node names: every node is matched on its own.
    let by_name: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(serde_json::json!({
        "containers": [],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]}}}
    }))
    .unwrap();
    assert_eq!(read_labels(&[&spec, &by_name]), None);
}

#[test]
fn a_request_for_one_gpu_model_sees_the_other_models_as_fragmented() {
    use volcano_framework::device::GPU_MODEL_LABEL;
    use volcano_testkit::fixtures::session_ctx;
    use volcano_testkit::{node, pod, Objects};
    let model = |n: volcano_testkit::NodeBuilder, m: &str| n.gpu("2").label(GPU_MODEL_LABEL, m);
    let t4_only = |name: &str| {
        pod("ns", name).cpu_mem("1", "1Gi").gpu("1").with_spec(|s| {
            s.node_selector = Some([(GPU_MODEL_LABEL.to_string(), "T4".to_string())].into_iter().collect())
        })
    };
    let snap = Objects::new()
        .node(model(node("t4-a", "16", "64Gi"), "T4"))
        .node(model(node("t4-b", "16", "64Gi"), "T4"))
        .node(model(node("v100", "16", "64Gi"), "V100"))
        .pod(t4_only("a"))
        .pod(t4_only("b"))
        .pod(pod("ns", "any").cpu_mem("1", "1Gi").gpu("2"))
        .snapshot();
    let mut plugin = Fragmentation::new(settings());
    plugin.on_session_open(&snap, &session_ctx());
    assert_eq!(plugin.workload().len(), 2, "{:?}", plugin.workload());
    // The two T4 nodes are alike; the V100 node is another class.
    assert_eq!(plugin.class_of[0], plugin.class_of[1]);
    assert_ne!(plugin.class_of[0], plugin.class_of[2]);
    // One card used of two: the 2-card request cannot land anywhere (1000 lost, weight
    // 1/3); the T4 request (weight 2/3) can on a T4 node but not on the V100 one.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![0, 1000] };
    assert!((plugin.fragmentation(NodeId(0), &free) - 1000.0 / 3.0).abs() < 1e-9);
    assert!((plugin.fragmentation(NodeId(2), &free) - 1000.0).abs() < 1e-9);
}

#[test]
fn a_request_without_gpus_can_use_none_of_the_free_gpu() {
    // FGD's typical pods include pods without GPUs: all of a node's free GPU is fragmented
    // for them, whether their cpu fits or not.
    let workload = [typical(1000.0, 0, 0, 0.25), typical(1000.0, 1, 500, 0.75)];
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &free), 0.25 * 1300.0 + 0.75 * 300.0);
    let starved = NodeFree { cpu: 500.0, gpus: smallvec![300, 1000] };
    assert_eq!(frag_of(&workload, |_| true, &starved), 1300.0);
}

#[test]
fn the_workload_has_pods_without_gpus_when_cpu_pods() {
    use volcano_testkit::{node, pod, Objects};
    let snap = Objects::new()
        .node(node("n", "16", "64Gi").gpu("2"))
        .pod(pod("ns", "cpu-a").cpu_mem("1", "1Gi"))
        .pod(pod("ns", "cpu-b").cpu_mem("1", "1Gi"))
        .pod(pod("ns", "gpu").cpu_mem("1", "1Gi").gpu("1"))
        .snapshot();
    let without = workload_of(&snap, 100.0, Weighting::Count, false);
    assert_eq!(without.len(), 1);
    let with = workload_of(&snap, 100.0, Weighting::Count, true);
    assert_eq!(with.len(), 2, "{with:?}");
    assert_eq!((with[0].req.count, with[0].p), (0, 2.0 / 3.0), "the most common first");
}

#[test]
fn the_score_card_choice_takes_the_lowest_card_of_the_best_rounded_score() {
    let mut plugin = Fragmentation::new(Settings {
        mode: Mode::Fgd,
        tie_break: TieBreak::None,
        card_choice: CardChoice::Score,
        ..settings()
    });
    // The workload: pods of 0.6 card, and pods of 0.3 (as above).
    plugin.workload = vec![typical(1000.0, 1, 600, 0.5), typical(1000.0, 1, 300, 0.5)];
    plugin.class_of = vec![0];
    plugin.classes = vec![vec![true, true]];
    let req = Request { cpu: 1000.0, count: 1, milli: 300 };
    // 700 and 1000 free: on card 1 nothing is lost (score 50), on card 0 the 0.6 request
    // loses 400 (200 more fragmented: 100 × sigmoid(-0.2) = 45.0): card 1.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![700, 1000] };
    let (cards, _, _) = plugin.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[1]);
    // 1000 and 400 free: card 0 leaves 700 and 400 (the 0.6 request still cannot use the
    // 400: no change, 50); card 1 leaves 1000 and 100 (100 lost to both instead of 400 to
    // one: 100 less, 100 × sigmoid(0.1) = 52.5 → 52): card 1.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 400] };
    let before = plugin.fragmentation(NodeId(0), &free);
    let on = |i: u16| before - plugin.fragmentation(NodeId(0), &free.after(1000.0, 300, &[i]));
    assert_eq!((plugin.rounded(on(0)), plugin.rounded(on(1))), (50.0, 52.0));
    let (cards, _, _) = plugin.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[1]);
    // Two cards of equal rounded score: the lowest index, not the fullest.
    let free = NodeFree { cpu: 8000.0, gpus: smallvec![1000, 990] };
    let (s0, s1) = {
        let before = plugin.fragmentation(NodeId(0), &free);
        let on = |i: u16| before - plugin.fragmentation(NodeId(0), &free.after(1000.0, 300, &[i]));
        (plugin.rounded(on(0)), plugin.rounded(on(1)))
    };
    assert_eq!(s0, s1);
    let (cards, _, _) = plugin.placement(NodeId(0), &free, &req).unwrap();
    assert_eq!(cards.as_slice(), &[0], "the lowest index, where the tightest card is 1");
    assert_eq!(free.choose(1, 300).unwrap().as_slice(), &[1]);
}
