use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;
use volcano_api::conf::Arguments;
use volcano_framework::{
    Action, ActionRegistry, Hooks, NodeId, Plugin, Profile, Registries, Session, SessionOptions, Snapshot, Statement,
    TaskStatus,
};
use volcano_testkit::{node, pod, NodeBuilder, Objects, PodBuilder};

use super::*;
use volcano_testkit::fixtures::session_ctx as ctx;
use volcano_testkit::fixtures::{plugin_option, task_named};

/// A plugin opened on `snap`.
fn open(args: serde_json::Value, snap: &Snapshot) -> Box<dyn Plugin> {
    let mut p = factory(&plugin_option(NAME, args)).expect("valid arguments").build();
    p.on_session_open(snap, &ctx());
    p
}

fn node_id(snap: &Snapshot, name: &str) -> NodeId {
    snap.node_id(name).expect("node exists")
}

/// The NODE_ORDER score of pod `p` on node `n1`.
fn score(args: serde_json::Value, objs: Objects) -> f64 {
    let snap = objs.snapshot();
    open(args, &snap).node_order(&snap, task_named(&snap, "p"), node_id(&snap, "n1"))
}

fn n1() -> NodeBuilder {
    node("n1", "8", "16Gi")
}

const LEAST_ONLY: &str = r#"{"balancedresource.weight": 0}"#;
const BALANCED_ONLY: &str = r#"{"leastrequested.weight": 0}"#;

fn args(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

// ----- scoring functions -----

#[test]
fn kube_scheduler_integer_arithmetic() {
    assert_eq!(least_requested_score(1000, 8000), 87);
    assert_eq!(least_requested_score(9000, 8000), 0);
    assert_eq!(least_requested_score(0, 0), 0);
    assert_eq!(most_requested_score(1000, 8000), 12);
    assert_eq!(most_requested_score(9000, 8000), 100);
    assert_eq!(most_requested_score(5, 0), 0);
    assert_eq!(balanced_resource_score(&[(1.0, 8.0), (1.0, 16.0)]), 96);
    assert_eq!(balanced_resource_score(&[(1.0, 8.0)]), 100);
    assert_eq!(balanced_resource_score(&[(1.0, 8.0), (1.0, 0.0)]), 100);
    assert_eq!(balanced_resource_score(&[(1.0, 8.0), (1.0, 16.0), (4.0, 8.0)]), 80);
    // Fractions are capped at 1.
    assert_eq!(balanced_resource_score(&[(16.0, 8.0), (8.0, 16.0)]), 75);
    assert_eq!(normalize_score(10, 15, false), 66);
    assert_eq!(normalize_score(1, 2, true), 50);
    assert_eq!(normalize_score(0, 0, true), 100);
    assert_eq!(normalize_score(0, 0, false), 0);
}

#[test]
fn default_score_is_least_plus_balanced() {
    // cpu 1000/8000 → 87, memory 1Gi/16Gi → 93: least 90; fractions 0.125 / 0.0625: balanced 96.
    let objs = || Objects::new().node(n1()).pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    assert_eq!(score(json!({}), objs()), 186.0);
    assert_eq!(score(args(LEAST_ONLY), objs()), 90.0);
    assert_eq!(score(args(BALANCED_ONLY), objs()), 96.0);
}

#[test]
fn tasks_on_the_node_count() {
    // 2 cpu / 4Gi running + 1 cpu / 1Gi: cpu 3000/8000 → 62, memory 5Gi/16Gi → 68; balanced 96.
    let objs = Objects::new()
        .node(n1())
        .pod(pod("ns", "r").cpu_mem("2", "4Gi").running_on("n1"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    assert_eq!(score(json!({}), objs), 65.0 + 96.0);
}

#[test]
fn weights_multiply() {
    let objs = || Objects::new().node(n1()).pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    // MostAllocated: cpu 12, memory 6 → 9.
    let most = json!({"leastrequested.weight": 0, "balancedresource.weight": 0, "mostrequested.weight": 2});
    assert_eq!(score(most, objs()), 18.0);
    let all = json!({"leastrequested.weight": 3, "balancedresource.weight": 2, "mostrequested.weight": 1});
    assert_eq!(score(all, objs()), 90.0 * 3.0 + 96.0 * 2.0 + 9.0);
    let none = json!({"leastrequested.weight": 0, "balancedresource.weight": 0});
    assert_eq!(score(none, objs()), 0.0);
    let negative = json!({"leastrequested.weight": -1, "balancedresource.weight": 0});
    assert_eq!(score(negative, objs()), -90.0);
}

#[test]
fn containers_without_requests_count_kube_scheduler_defaults() {
    // 100m + 100m cpu, 200Mi + 200Mi memory: cpu 7800/8000 → 97, memory → 97.
    let objs = Objects::new().node(n1()).pod(pod("ns", "r").running_on("n1")).pod(pod("ns", "p"));
    assert_eq!(score(args(LEAST_ONLY), objs), 97.0);
    // A best-effort pod gets no BalancedAllocation score.
    let objs = Objects::new().node(n1()).pod(pod("ns", "p"));
    assert_eq!(score(args(BALANCED_ONLY), objs), 0.0);
}

#[test]
fn an_explicit_zero_request_is_not_defaulted() {
    // cpu 0 → 100; memory defaults to 200Mi → 98.
    let objs = Objects::new().node(n1()).pod(pod("ns", "p").req("cpu", "0"));
    assert_eq!(score(args(LEAST_ONLY), objs), 99.0);
}

#[test]
fn over_capacity_and_zero_allocatable() {
    // cpu 12000 > 8000 → 0; memory 1Gi/16Gi → 93.
    let objs = Objects::new().node(n1()).pod(pod("ns", "p").cpu_mem("12", "1Gi"));
    assert_eq!(score(args(LEAST_ONLY), objs), 46.0);
    // A node without cpu allocatable is scored on memory only.
    let objs = Objects::new().node(node("n1", "0", "16Gi")).pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    assert_eq!(score(args(LEAST_ONLY), objs), 93.0);
    let objs = Objects::new().node(node("n1", "0", "16Gi")).pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    assert_eq!(score(args(BALANCED_ONLY), objs), 100.0);
}

#[test]
fn balanced_allocation_includes_gpu_only_when_requested() {
    let gpu_node = || n1().gpu("8");
    // Fractions 0.125, 0.0625, 0.5: population std 0.1932 → 80.
    let objs = Objects::new().node(gpu_node()).pod(pod("ns", "p").cpu_mem("1", "1Gi").gpu("4"));
    assert_eq!(score(args(BALANCED_ONLY), objs), 80.0);
    let objs = Objects::new().node(gpu_node()).pod(pod("ns", "p").cpu_mem("1", "1Gi"));
    assert_eq!(score(args(BALANCED_ONLY), objs), 96.0);
    // A node without GPUs: cpu and memory only.
    let objs = Objects::new().node(n1()).pod(pod("ns", "p").cpu_mem("1", "1Gi").gpu("4"));
    assert_eq!(score(args(BALANCED_ONLY), objs), 96.0);
    // GPUs already used on the node count.
    let objs = Objects::new()
        .node(gpu_node())
        .pod(pod("ns", "r").gpu("4").running_on("n1"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi").gpu("4"));
    // Fractions 0.125, 0.0625, 1.0 → std 0.4282 → 57.
    assert_eq!(score(args(BALANCED_ONLY), objs), 57.0);
}

fn quantity(items: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

fn container(name: &str, requests: &[(&str, &str)], restart: Option<&str>) -> Container {
    Container {
        name: name.into(),
        restart_policy: restart.map(str::to_string),
        resources: Some(ResourceRequirements { requests: Some(quantity(requests)), ..Default::default() }),
        ..Default::default()
    }
}

#[test]
fn nonzero_request_follows_pod_requests() {
    let p = pod("ns", "p")
        .with_spec(|s| {
            s.containers = vec![container("main", &[("cpu", "500m")], None)];
            s.init_containers = Some(vec![
                container("side", &[("cpu", "200m")], Some("Always")),
                container("init", &[("cpu", "1"), ("memory", "1Gi")], None),
            ]);
            s.overhead = Some(quantity(&[("cpu", "100m"), ("memory", "10Mi")]));
        })
        .build();
    // Containers 500m + sidecar 200m = 700m; the init container runs with the sidecar:
    // 1000m + 200m = 1200m wins. Memory: 1Gi + 200Mi (sidecar default). Plus overhead.
    assert_eq!(nonzero_request(&p.into()), (1300, (1024 + 200 + 10) * 1024 * 1024));

    // A limit without a request counts as the request (API server defaulting).
    let limited = pod("ns", "p")
        .with_spec(|s| {
            s.containers[0].resources =
                Some(ResourceRequirements { limits: Some(quantity(&[("cpu", "2")])), ..Default::default() })
        })
        .build();
    assert_eq!(nonzero_request(&limited.into()), (2000, DEFAULT_MEMORY_REQUEST));
}

#[test]
fn fully_specified_pods_take_the_snapshot_request() {
    let snap = Objects::new()
        .node(n1())
        .pod(pod("ns", "p").cpu_mem("1500m", "3Gi").with_spec(|s| {
            s.init_containers = Some(vec![container("init", &[("cpu", "2"), ("memory", "1Gi")], None)]);
            s.overhead = Some(quantity(&[("cpu", "100m")]));
        }))
        .snapshot();
    let t = snap.task(task_named(&snap, "p"));
    let r = TaskRequest::of(t);
    // cpu max(1500, 2000) + 100; memory max(3Gi, 1Gi).
    assert_eq!((r.nonzero_cpu, r.nonzero_memory), (2100, 3 * 1024 * 1024 * 1024));
    assert_eq!((r.nonzero_cpu, r.nonzero_memory), nonzero_request(&t.pod));
}

// ----- event handlers -----

#[test]
fn requested_sums_follow_allocations() {
    let mut snap = Objects::new()
        .node(n1())
        .node(node("n2", "8", "16Gi"))
        .pod(pod("ns", "r").cpu_mem("2", "4Gi").running_on("n1"))
        .pod(pod("ns", "q").cpu_mem("1", "1Gi"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi"))
        .snapshot();
    let mut plugin = NodeOrder::new(Weights::default());
    plugin.on_session_open(&snap, &ctx());
    let (n1, q, p) = (node_id(&snap, "n1"), task_named(&snap, "q"), task_named(&snap, "p"));
    let before = plugin.node_requested(&snap, n1);
    assert_eq!(before.nonzero_cpu, 2000);
    assert_eq!(before.memory, 4.0 * 1024.0 * 1024.0 * 1024.0);
    assert_eq!(plugin.node_order(&snap, p, n1), 161.0);

    // Allocate q on n1: p now sees 4 cpu / 6Gi requested.
    snap.set_task_status(q, TaskStatus::Allocated);
    snap.tasks[q.idx()].node = Some(n1);
    snap.node_add_task(n1, q);
    plugin.on_allocate(&snap, q);
    let after = plugin.node_requested(&snap, n1);
    assert_eq!(after.nonzero_cpu, 3000);
    assert_eq!(after.nonzero_memory, 5 * 1024 * 1024 * 1024);
    // cpu 4000/8000 → 50, memory 6Gi/16Gi → 62: least 56; fractions .5/.375 → 93.
    assert_eq!(plugin.node_order(&snap, p, n1), 56.0 + 93.0);
    // A second allocate event for the same placement changes nothing.
    plugin.on_allocate(&snap, q);
    assert_eq!(plugin.node_requested(&snap, n1), after);

    // Undo: back to the first sums, even though the task no longer names its node.
    snap.node_remove_task(n1, q);
    snap.tasks[q.idx()].node = None;
    snap.set_task_status(q, TaskStatus::Pending);
    plugin.on_deallocate(&snap, q);
    assert_eq!(plugin.node_requested(&snap, n1), before);
    plugin.on_deallocate(&snap, q);
    assert_eq!(plugin.node_requested(&snap, n1), before);
}

#[test]
fn the_snapshot_non_zero_request_is_the_pod_s() {
    // Containers without requests, limits standing in, sidecars and init containers,
    // overhead: the snapshot's numbers are what `nonzero_request` reads from the pod.
    type Edit = Box<dyn Fn(&mut k8s_openapi::api::core::v1::PodSpec)>;
    let specs: Vec<Edit> = vec![
        Box::new(|s| s.containers = vec![container("a", &[], None), container("b", &[("memory", "1Gi")], None)]),
        Box::new(|s| {
            s.containers = vec![container("main", &[("cpu", "500m")], None)];
            s.init_containers = Some(vec![
                container("side", &[("cpu", "200m")], Some("Always")),
                container("init", &[("cpu", "1"), ("memory", "1Gi")], None),
                container("late-side", &[], Some("Always")),
            ]);
            s.overhead = Some(quantity(&[("cpu", "100m"), ("memory", "10Mi")]));
        }),
        Box::new(|s| {
            s.containers[0].resources =
                Some(ResourceRequirements { limits: Some(quantity(&[("cpu", "2")])), ..Default::default() })
        }),
        Box::new(|s| s.containers[0].resources = None),
    ];
    for (i, f) in specs.into_iter().enumerate() {
        let snap = Objects::new().node(n1()).pod(pod("ns", "p").with_spec(f)).snapshot();
        let t = snap.task(task_named(&snap, "p"));
        assert_eq!((t.nonzero_cpu, t.nonzero_memory), nonzero_request(&t.pod), "pod {i}");
    }
}

#[test]
fn evicted_tasks_stop_counting_until_the_eviction_is_undone() {
    let mut snap = Objects::new()
        .node(n1())
        .pod(pod("ns", "r").cpu_mem("2", "4Gi").running_on("n1"))
        .pod(pod("ns", "s").cpu_mem("1", "1Gi").running_on("n1"))
        .snapshot();
    let mut plugin = NodeOrder::new(Weights::default());
    plugin.on_session_open(&snap, &ctx());
    let (n1, r) = (node_id(&snap, "n1"), task_named(&snap, "r"));
    let before = plugin.node_requested(&snap, n1);
    assert_eq!(before.nonzero_cpu, 3000);
    // Evict r: it keeps its node (Releasing) but no longer counts.
    snap.node_remove_task(n1, r);
    snap.set_task_status(r, TaskStatus::Releasing);
    snap.node_add_task(n1, r);
    plugin.on_deallocate(&snap, r);
    plugin.on_deallocate(&snap, r);
    let evicted = plugin.node_requested(&snap, n1);
    assert_eq!((evicted.nonzero_cpu, evicted.cpu), (1000, 1000.0));
    assert_eq!(evicted.memory, 1024.0 * 1024.0 * 1024.0);
    // Undo the eviction.
    snap.node_remove_task(n1, r);
    snap.set_task_status(r, TaskStatus::Running);
    snap.node_add_task(n1, r);
    plugin.on_allocate(&snap, r);
    assert_eq!(plugin.node_requested(&snap, n1), before);
}

#[test]
fn scoring_without_session_open_reads_the_snapshot_sums() {
    let snap = Objects::new()
        .node(n1())
        .pod(pod("ns", "r").cpu_mem("2", "4Gi").running_on("n1"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi"))
        .snapshot();
    let plugin = NodeOrder::new(Weights::default());
    assert_eq!(plugin.node_order(&snap, task_named(&snap, "p"), node_id(&snap, "n1")), 161.0);
}

// ----- batch scores -----

fn preferred(terms: &[(i32, &str, &str)]) -> impl FnOnce(&mut k8s_openapi::api::core::v1::PodSpec) {
    let terms: Vec<PreferredSchedulingTerm> = terms
        .iter()
        .map(|(w, k, v)| PreferredSchedulingTerm {
            weight: *w,
            preference: NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: k.to_string(),
                    operator: "In".into(),
                    values: Some(vec![v.to_string()]),
                }]),
                match_fields: None,
            },
        })
        .collect();
    move |s| {
        s.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(terms),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}

/// BATCH_NODE_ORDER of pod `p` over every node, starting from `start`.
fn batch(args: serde_json::Value, objs: Objects, start: f64) -> Vec<f64> {
    let snap = objs.snapshot();
    let plugin = open(args, &snap);
    let nodes: Vec<NodeId> = (0..snap.nodes.len() as u32).map(NodeId).collect();
    let mut scores = vec![start; nodes.len()];
    plugin.batch_node_order(&snap, task_named(&snap, "p"), &nodes, &mut scores);
    scores
}

const AFFINITY_ONLY: &str = r#"{"tainttoleration.weight": 0}"#;
const TAINTS_ONLY: &str = r#"{"nodeaffinity.weight": 0}"#;

#[test]
fn preferred_node_affinity_is_normalised_to_the_best_node() {
    let p = || pod("ns", "p").with_spec(preferred(&[(10, "zone", "a"), (5, "disk", "ssd"), (0, "zone", "a")]));
    let objs = || {
        Objects::new()
            .node(node("n1", "8", "16Gi").label("zone", "a").label("disk", "ssd"))
            .node(node("n2", "8", "16Gi").label("zone", "a"))
            .node(node("n3", "8", "16Gi"))
            .pod(p())
    };
    // Raw 15, 10, 0 → 100, 66, 0, times the default weight 2.
    assert_eq!(batch(args(AFFINITY_ONLY), objs(), 0.0), vec![200.0, 132.0, 0.0]);
    assert_eq!(
        batch(json!({"tainttoleration.weight": 0, "nodeaffinity.weight": 1}), objs(), 1.0),
        vec![101.0, 67.0, 1.0]
    );
    // No node matches, or no preferred terms: nothing is added.
    let none = Objects::new().node(node("n1", "8", "16Gi")).pod(p());
    assert_eq!(batch(args(AFFINITY_ONLY), none, 5.0), vec![5.0]);
    let plain = Objects::new().node(node("n1", "8", "16Gi").label("zone", "a")).pod(pod("ns", "p"));
    assert_eq!(batch(args(AFFINITY_ONLY), plain, 0.0), vec![0.0]);
}

#[test]
fn prefer_no_schedule_taints_are_counted_and_reversed() {
    let objs = |p: PodBuilder| {
        Objects::new()
            .node(node("n1", "8", "16Gi"))
            .node(node("n2", "8", "16Gi").taint("a", "1", "PreferNoSchedule"))
            .node(node("n3", "8", "16Gi").taint("a", "1", "PreferNoSchedule").taint("b", "", "PreferNoSchedule"))
            .node(node("n4", "8", "16Gi").taint("c", "", "NoSchedule"))
            .pod(p)
    };
    // Counts 0, 1, 2, 0 → 100, 50, 0, 100, times the default weight 3.
    assert_eq!(batch(args(TAINTS_ONLY), objs(pod("ns", "p")), 0.0), vec![300.0, 150.0, 0.0, 300.0]);
    // Only tolerations with an empty or PreferNoSchedule effect count.
    let tolerates_a = pod("ns", "p").toleration("a", "Exists", "", "PreferNoSchedule");
    assert_eq!(batch(args(TAINTS_ONLY), objs(tolerates_a), 0.0), vec![300.0, 300.0, 0.0, 300.0]);
    let wrong_effect = pod("ns", "p").toleration("a", "Exists", "", "NoSchedule");
    assert_eq!(batch(args(TAINTS_ONLY), objs(wrong_effect), 0.0), vec![300.0, 150.0, 0.0, 300.0]);
    // Without such taints every node gets 100.
    let clean = Objects::new().node(node("n1", "8", "16Gi")).node(node("n2", "8", "16Gi")).pod(pod("ns", "p"));
    assert_eq!(batch(args(TAINTS_ONLY), clean, 1.0), vec![301.0, 301.0]);
    let off = json!({"nodeaffinity.weight": 0, "tainttoleration.weight": 0});
    assert_eq!(batch(off, objs(pod("ns", "p")), 0.0), vec![0.0; 4]);
}

// ----- through a session -----

struct Noop;

impl Action for Noop {
    fn name(&self) -> &'static str {
        "allocate"
    }
    fn execute(&self, _ssn: &mut Session) {}
}

fn noop(_: &Arguments) -> Result<Box<dyn Action>, volcano_framework::ArgsError> {
    Ok(Box::new(Noop))
}

fn profile(yaml: &str) -> Profile {
    let mut actions = ActionRegistry::default();
    actions.register("allocate", noop).unwrap();
    let mut plugins = volcano_framework::PluginRegistry::default();
    plugins.register(NAME, factory).unwrap();
    plugins.register(crate::predicates::NAME, crate::predicates::factory).unwrap();
    plugins.register(crate::binpack::NAME, crate::binpack::factory).unwrap();
    Profile::from_yaml(yaml, &Registries { plugins, actions }).expect("profile loads")
}

#[test]
fn session_sums_node_and_batch_scores_and_tracks_statements() {
    let profile = profile(
        r#"
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
"#,
    );
    let snap = Objects::new()
        .node(node("n1", "8", "16Gi").taint("soft", "", "PreferNoSchedule"))
        .node(node("n2", "8", "16Gi"))
        .node(node("n3", "8", "16Gi").taint("hard", "", "NoSchedule"))
        .pod(pod("ns", "q").cpu_mem("4", "8Gi"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi"))
        .snapshot();
    let mut ssn = Session::open(snap, profile.instantiate(), ctx(), SessionOptions::default());
    let (p, q) = (task_named(&ssn.snap, "p"), task_named(&ssn.snap, "q"));
    let (feasible, errors) = ssn.predicate_nodes(p, |_| Ok(()));
    let names: Vec<&str> = feasible.iter().map(|n| &*ssn.snap.node(*n).name).collect();
    assert_eq!(names, ["n1", "n2"]);
    assert_eq!(errors.to_string(), "0/3 nodes are unavailable: 1 node(s) had untolerated taint {hard: }.");
    // Both empty: 186 each; the PreferNoSchedule taint costs n1 the 300 of TaintToleration.
    assert_eq!(ssn.node_scores(p, &feasible), vec![186.0, 486.0]);

    // q on n2 (4 cpu / 8Gi): p there sees 5 cpu / 9Gi → least (37 + 43) / 2 = 40, balanced 96.
    let mut stmt = Statement::new();
    let n2 = ssn.snap.node_id("n2").unwrap();
    stmt.allocate(&mut ssn, q, n2);
    assert_eq!(ssn.node_scores(p, &feasible), vec![186.0, 40.0 + 96.0 + 300.0]);
    stmt.discard(&mut ssn);
    assert_eq!(ssn.node_scores(p, &feasible), vec![186.0, 486.0]);
}

// ----- arguments -----

#[test]
fn defaults_match_volcano() {
    let w = Args::parse(&Default::default()).unwrap().resolve();
    assert_eq!(w, Weights::default());
    assert_eq!(
        (w.least_requested, w.most_requested, w.balanced_resource, w.node_affinity, w.taint_toleration),
        (1, 0, 1, 2, 3)
    );
    assert_eq!((w.pod_affinity, w.image_locality, w.pod_topology_spread), (2, 1, 2));
}

#[test]
fn every_volcano_key_is_accepted() {
    let a = Args::parse(
        &plugin_option(
            NAME,
            json!({
                "leastrequested.weight": 2,
                "mostrequested.weight": 1,
                "balancedresource.weight": 3,
                "nodeaffinity.weight": 4,
                "tainttoleration.weight": 5,
                "podaffinity.weight": 6,
                "imagelocality.weight": 7,
                "podtopologyspread.weight": 8,
                "selectorspread.weight": 9,
            }),
        )
        .arguments,
    )
    .unwrap();
    let w = a.resolve();
    assert_eq!(
        [w.least_requested, w.most_requested, w.balanced_resource, w.node_affinity, w.taint_toleration],
        [2, 1, 3, 4, 5]
    );
    assert_eq!(a.selector_spread, Some(9));
}

#[test]
fn weights_must_be_integers() {
    let err = factory(&plugin_option(NAME, json!({"leastrequested.weight": 1.5}))).err().unwrap();
    assert_eq!(err.0, "argument \"leastrequested.weight\": expected an integer, got 1.5");
    let err = factory(&plugin_option(NAME, json!({"nodeaffinity.weight": "2"}))).err().unwrap();
    assert_eq!(err.0, "argument \"nodeaffinity.weight\": expected an integer, got \"2\"");
    assert!(factory(&plugin_option(NAME, json!({"nodeaffinity.weight": 2.0}))).is_err());
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = factory(&plugin_option(NAME, json!({"leastrequested.weigth": 1}))).err().unwrap();
    assert!(err.0.starts_with("unknown field `leastrequested.weigth`, expected one of"), "{}", err.0);
}

#[test]
fn plugin_hooks() {
    let snap = Objects::new().node(n1()).snapshot();
    let p = open(json!({}), &snap);
    assert_eq!(p.name(), "nodeorder");
    assert_eq!(p.hooks(), Hooks::NODE_ORDER | Hooks::BATCH_NODE_ORDER | Hooks::EVENT_HANDLER);
    fn assert_sync<T: Send + Sync>() {}
    assert_sync::<NodeOrder>();
    let _ = Arc::new(NodeOrder::new(Weights::default()));
}

// ----- ImageLocality -----

const MB: i64 = 1024 * 1024;

#[test]
fn image_locality_arithmetic_is_kube_schedulers() {
    assert_eq!(normalized_image_name("nginx"), "nginx:latest");
    assert_eq!(normalized_image_name("nginx:1.25"), "nginx:1.25");
    assert_eq!(normalized_image_name("registry:5000/team/trainer"), "registry:5000/team/trainer:latest");
    assert_eq!(normalized_image_name("repo/img@sha256:abc"), "repo/img@sha256:abc");
    // Below the 23 MiB threshold: 0; at 1000 MiB per container: 100.
    assert_eq!(image_locality_score(10 * MB, 1), 0);
    assert_eq!(image_locality_score(1000 * MB, 1), 100);
    assert_eq!(image_locality_score(5000 * MB, 1), 100);
    assert_eq!(image_locality_score(1000 * MB, 2), 49);
    // (500 − 23) / (1000 − 23) = 0.488…
    assert_eq!(image_locality_score(500 * MB, 1), 48);
    assert_eq!(scaled_image_score(1000 * MB, 1, 4), 250 * MB);
    assert_eq!(scaled_image_score(1000 * MB, 3, 0), 0);
}

#[test]
fn image_locality_prefers_nodes_with_the_images_scaled_by_spread() {
    let only = r#"{"leastrequested.weight": 0, "balancedresource.weight": 0, "imagelocality.weight": 1}"#;
    let objs = || {
        Objects::new()
            // n1 and n2 have the trainer (2000 MiB); n1 also has the sidecar's image.
            .node(
                n1().image(&["docker.io/team/trainer:v1", "team/trainer:v1"], 2000 * MB)
                    .image(&["sidecar:latest"], 600 * MB),
            )
            .node(node("n2", "8", "16Gi").image(&["team/trainer:v1"], 2000 * MB))
            .node(node("n3", "8", "16Gi"))
            .node(node("n4", "8", "16Gi"))
            .pod(pod("ns", "p").with_spec(|s| {
                s.containers[0].image = Some("team/trainer:v1".into());
                s.containers.push(Container {
                    name: "side".into(),
                    image: Some("sidecar".into()),
                    ..Default::default()
                });
            }))
    };
    let snap = objs().snapshot();
    let p = open(args(only), &snap);
    let t = task_named(&snap, "p");
    let at = |n: &str| p.node_order(&snap, t, node_id(&snap, n));
    // n1: trainer on 2 of 4 nodes → 1000 MiB, sidecar on 1 of 4 → 150 MiB; 1150 MiB over 2
    // containers: 100 × (1150 − 23) / (2000 − 23) = 57.
    assert_eq!(at("n1"), 57.0);
    // n2: 1000 MiB: 100 × 977 / 1977 = 49.
    assert_eq!(at("n2"), 49.0);
    assert_eq!(at("n3"), 0.0);
    // The weight multiplies; a weight of 0 turns it off.
    let snap = objs().snapshot();
    let three =
        open(args(r#"{"leastrequested.weight": 0, "balancedresource.weight": 0, "imagelocality.weight": 3}"#), &snap);
    assert_eq!(three.node_order(&snap, task_named(&snap, "p"), node_id(&snap, "n1")), 171.0);
    let off =
        open(args(r#"{"leastrequested.weight": 0, "balancedresource.weight": 0, "imagelocality.weight": 0}"#), &snap);
    assert_eq!(off.node_order(&snap, task_named(&snap, "p"), node_id(&snap, "n1")), 0.0);
}

#[test]
fn tasks_with_different_images_have_different_shapes() {
    let snap = Objects::new()
        .node(n1())
        .pod(pod("ns", "a").with_spec(|s| s.containers[0].image = Some("x:1".into())))
        .pod(pod("ns", "b").with_spec(|s| s.containers[0].image = Some("y:1".into())))
        .pod(pod("ns", "c").with_spec(|s| s.containers[0].image = Some("x:1".into())))
        .snapshot();
    let shape = |n: &str| snap.task(task_named(&snap, n)).shape;
    assert_ne!(shape("a"), shape("b"));
    assert_eq!(shape("a"), shape("c"));
}

// ----- system-default topology spread -----

const SPREAD_ONLY: &str = r#"{"nodeaffinity.weight": 0, "tainttoleration.weight": 0, "podaffinity.weight": 0}"#;

/// Nodes n1, n2 (zone a), n3 (zone b), n4 (no zone), with two `app: web` pods on n1 and one
/// on n3, the pending pod `p` (`app: web`), and a Service selecting `app: web` when
/// `service`.
fn spread_cluster(p: PodBuilder, service: bool) -> Objects {
    use k8s_openapi::api::core::v1::{Service, ServiceSpec};
    let n = |name: &str, zone: Option<&str>| {
        let b = node(name, "8", "16Gi").label("kubernetes.io/hostname", name);
        match zone {
            Some(z) => b.label("topology.kubernetes.io/zone", z),
            None => b,
        }
    };
    let web = |name: &str, on: &str| pod("ns", name).label("app", "web").running_on(on);
    let mut objs = Objects::new()
        .node(n("n1", Some("a")))
        .node(n("n2", Some("a")))
        .node(n("n3", Some("b")))
        .node(n("n4", None))
        .pod(web("r1", "n1"))
        .pod(web("r2", "n1"))
        .pod(web("r3", "n3"))
        .pod(pod("other", "r4").label("app", "web").running_on("n2"))
        .pod(p);
    if service {
        objs.0.services.push(Arc::new(Service {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("web".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                selector: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
                ..Default::default()
            }),
            ..Default::default()
        }));
    }
    objs
}

#[test]
fn pods_selected_by_a_service_get_the_system_default_spread() {
    // kube-scheduler's arithmetic, hostname maxSkew 3 (4 nodes: weight ln 6) and zone
    // maxSkew 5 (zones a, b and "" for n4: weight ln 5); n4 is scored on the hostname only.
    // Raw 2·1.79+2 + 2·1.61+4 = 13, 2 + 7.22 = 9, 1.79+2 + 1.61+4 = 9, 2 → 100·(15−s)/13,
    // times the default weight 2. The pod of namespace `other` is not counted.
    let p = || pod("ns", "p").label("app", "web");
    assert_eq!(batch(args(SPREAD_ONLY), spread_cluster(p(), true), 0.0), vec![30.0, 92.0, 92.0, 200.0]);
    // Nothing selects the pod: no constraint.
    assert_eq!(batch(args(SPREAD_ONLY), spread_cluster(p(), false), 0.0), vec![0.0; 4]);
    let other = pod("ns", "p").label("app", "db");
    assert_eq!(batch(args(SPREAD_ONLY), spread_cluster(other, true), 0.0), vec![0.0; 4]);
    // The weight 0 turns them off.
    let off = json!({"nodeaffinity.weight": 0, "tainttoleration.weight": 0, "podtopologyspread.weight": 0});
    assert_eq!(batch(off, spread_cluster(p(), true), 0.0), vec![0.0; 4]);
}

#[test]
fn a_pod_s_own_constraints_replace_the_system_defaults() {
    use k8s_openapi::api::core::v1::TopologySpreadConstraint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    let constraint = |key: &str, skew: i32, when: &str| TopologySpreadConstraint {
        topology_key: key.into(),
        max_skew: skew,
        when_unsatisfiable: when.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            ..Default::default()
        }),
        ..Default::default()
    };
    // The same constraints, given by the pod: a node without every key is not scored
    // (n4 gets 0), and the sizes count the 3 other nodes (ln 5) and zones a, b (ln 4):
    // raw 12, 9, 9 → 100·(21−s)/12.
    let own = pod("ns", "p").label("app", "web").with_spec(move |s| {
        s.topology_spread_constraints = Some(vec![
            constraint("kubernetes.io/hostname", 3, "ScheduleAnyway"),
            constraint("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
        ])
    });
    assert_eq!(batch(args(SPREAD_ONLY), spread_cluster(own, true), 0.0), vec![150.0, 200.0, 200.0, 0.0]);
    // Only DoNotSchedule constraints: no score, and no defaults either.
    let hard = pod("ns", "p")
        .label("app", "web")
        .with_spec(move |s| s.topology_spread_constraints = Some(vec![constraint("zone", 1, "DoNotSchedule")]));
    assert_eq!(batch(args(SPREAD_ONLY), spread_cluster(hard, true), 0.0), vec![0.0; 4]);
}

#[test]
fn system_default_spread_is_partitioned_by_zone_and_counted() {
    // n5 joins zone a and n6 zone b, neither holding a pod: outside the nodes holding the
    // pods (n1, n3) the score is equal per zone, so n2 may stand for n2 and n5.
    let objs = spread_cluster(pod("ns", "p").label("app", "web"), true)
        .node(node("n5", "8", "16Gi").label("kubernetes.io/hostname", "n5").label("topology.kubernetes.io/zone", "a"))
        .node(node("n6", "8", "16Gi").label("kubernetes.io/hostname", "n6").label("topology.kubernetes.io/zone", "b"));
    let snap = objs.snapshot();
    let plugin = open(args(SPREAD_ONLY), &snap);
    let p = task_named(&snap, "p");
    assert!(
        !plugin.incremental().expect("makes promises").batch_uniform(&snap, p)
            && !plugin.incremental().expect("makes promises").batch_sparse(&snap, p)
    );
    let zones = plugin.incremental().expect("makes promises").batch_partition(&snap, p).expect("partitioned by zone");
    assert_eq!(zones.count, 2);
    let mut special = Vec::new();
    plugin.incremental().expect("makes promises").batch_special_nodes(&snap, p, &mut special);
    special.sort();
    assert_eq!(special, vec![node_id(&snap, "n1"), node_id(&snap, "n3")]);
    let all: Vec<NodeId> = ["n1", "n2", "n3", "n4", "n5", "n6"].iter().map(|n| node_id(&snap, n)).collect();
    let mut full = vec![0.0; all.len()];
    plugin.batch_node_order(&snap, p, &all, &mut full);
    // n1, n2 (for n2 and n5), n3, n4, n6.
    let some: Vec<NodeId> = ["n1", "n2", "n3", "n4", "n6"].iter().map(|n| node_id(&snap, n)).collect();
    let mut counted = vec![0.0; some.len()];
    plugin.incremental().expect("makes promises").batch_node_order_counted(
        &snap,
        p,
        &some,
        &[1, 2, 1, 1, 1],
        &mut counted,
    );
    assert_eq!(counted, vec![full[0], full[1], full[2], full[3], full[5]]);
    assert_eq!(full[1], full[4], "n2 and n5 score alike");
    // The counts make the size of the hostname topology (ln(42+2) instead of ln(6+2)).
    let mut more = vec![0.0; some.len()];
    plugin.incremental().expect("makes promises").batch_node_order_counted(
        &snap,
        p,
        &some,
        &[1, 38, 1, 1, 1],
        &mut more,
    );
    assert_ne!(more, counted);
}

#[test]
fn eviction_candidates_are_rescored_once_a_node_changed() {
    // `preempt` keeps each node's score per class until the node changes: after a
    // placement, the scores are those a fresh batch gives.
    let snap = Objects::new()
        .node(node("n1", "8", "16Gi"))
        .node(node("n2", "8", "16Gi"))
        .pod(pod("ns", "filler").cpu_mem("4", "1Gi"))
        .pod(pod("ns", "p").cpu_mem("1", "1Gi"))
        .snapshot();
    let (filler, p, n1, n2) =
        (task_named(&snap, "filler"), task_named(&snap, "p"), node_id(&snap, "n1"), node_id(&snap, "n2"));
    let plugin = factory(&plugin_option(NAME, json!({}))).expect("valid arguments").build();
    let mut ssn = volcano_testkit::fixtures::plugin_session(snap, plugin);
    assert!(ssn.batch_scores_uniform(p));
    let (nodes, before) = ssn.eviction_candidates(p, &[n1, n2]);
    assert_eq!(nodes, vec![n1, n2]);
    assert_eq!(before, ssn.node_scores(p, &nodes));
    assert_eq!(before[0], before[1]);
    ssn.allocate(filler, n1);
    let (nodes, after) = ssn.eviction_candidates(p, &[n1, n2]);
    assert_eq!(after, ssn.node_scores(p, &nodes));
    assert!(after[0] < after[1], "n1 is fuller now: {after:?}");
}

#[test]
fn product_of_partitions_numbers_the_tuples_in_node_order() {
    // Three partitions of up to 2,000 nodes, each node's domain an arithmetic mix of its
    // index (the last value standing for nodes without the label); the product must be the
    // partition by the tuple of domains, numbered by first occurrence, whichever path
    // (small table or hash map) computes it.
    for (counts, nodes) in [([3u32, 2, 4], 50usize), ([400, 400, 2], 2000), ([1, 1, 1], 7), ([2, 2, 2], 0)] {
        let parts: Vec<NodeDomains> = (0..3)
            .map(|p| {
                let count = counts[p];
                let of_node = (0..nodes)
                    .map(|i| match ((i * (2 * p + 3) + i / (p + 2)) % (count as usize + 1)) as u32 {
                        d if d == count => NodeDomains::NONE,
                        d => d,
                    })
                    .collect();
                NodeDomains { of_node, count }
            })
            .collect();
        let refs: Vec<&NodeDomains> = parts.iter().collect();
        let product = product_of(&refs, nodes);
        let expected = partition_by((0..nodes).map(|i| parts.iter().map(|p| p.of_node[i]).collect::<Vec<u32>>()));
        assert_eq!(product, expected, "{counts:?} over {nodes} nodes");
        assert_eq!(product_of(&[], nodes).count, u32::from(nodes > 0));
    }
}

#[test]
fn evaluation_keys_tell_image_lists_apart_only_when_images_are_scored() {
    let with_image = |name: &str, image: &str| {
        let image = image.to_string();
        pod("ns", name).with_spec(move |s| s.containers[0].image = Some(image))
    };
    let objs = |n: NodeBuilder| {
        Objects::new()
            .node(n)
            .node(node("n2", "8", "16Gi"))
            .pod(with_image("a", "trainer:v1"))
            .pod(with_image("b", "trainer:v1").node_selector("zone", "a"))
            .pod(with_image("c", "trainer:v2"))
    };
    // n1 reports the trainer: ImageLocality scores differ between v1 and v2.
    let snap = objs(n1().image(&["trainer:v1"], 2000 * MB)).snapshot();
    let p = open(json!({}), &snap);
    let key = |name: &str| p.incremental().expect("makes promises").evaluation_key(&snap, task_named(&snap, name));
    assert!(key("a").is_some());
    assert_eq!(key("a"), key("b"), "equal images share a key");
    assert_ne!(key("a"), key("c"));
    let at = |name: &str| p.node_order(&snap, task_named(&snap, name), node_id(&snap, "n1"));
    assert_eq!(at("a"), at("b"));
    assert_ne!(at("a"), at("c"));
    // No node reports images: every task's scores read its request only.
    let snap = objs(n1()).snapshot();
    let p = open(json!({}), &snap);
    let key = |name: &str| p.incremental().expect("makes promises").evaluation_key(&snap, task_named(&snap, name));
    assert_eq!((key("a"), key("c")), (Some(0), Some(0)));
}
