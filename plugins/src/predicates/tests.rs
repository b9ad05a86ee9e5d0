use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::json;
use volcano_framework::{Code, NodeId, Plugin, SessionContext, Snapshot, Status, TaskId};
use volcano_testkit::{node, pod, NodeBuilder, Objects, PodBuilder};

use super::*;
use volcano_testkit::fixtures::{plugin_option, task_named};

pub(super) fn plugin(args: serde_json::Value) -> Box<dyn Plugin> {
    factory(&plugin_option(NAME, args)).expect("valid arguments").build()
}

fn node_id(snap: &Snapshot, name: &str) -> NodeId {
    snap.node_id(name).expect("node exists")
}

fn ctx() -> SessionContext {
    SessionContext { now_ms: 0, cycle: 1, uid: "s".into(), enqueue_enabled: true }
}

/// Runs the predicate of pod `p` (pending) on node `n1` with the given arguments.
fn check_with(args: serde_json::Value, n: NodeBuilder, others: Vec<PodBuilder>, p: PodBuilder) -> Result<(), Status> {
    let mut objs = Objects::new().node(n).pod(p);
    for o in others {
        objs = objs.pod(o);
    }
    let snap = objs.snapshot();
    let mut plugin = plugin(args);
    plugin.on_session_open(&snap, &ctx());
    plugin.predicate(&snap, task_named(&snap, "p"), node_id(&snap, "n1"))
}

/// The answers of the predicate for pod `p` on every node, by node name.
fn answers(nodes: Vec<NodeBuilder>, others: Vec<PodBuilder>, p: PodBuilder) -> Vec<(String, Result<(), Status>)> {
    let mut objs = Objects::new().pod(p);
    for n in nodes {
        objs = objs.node(n);
    }
    for o in others {
        objs = objs.pod(o);
    }
    let snap = objs.snapshot();
    let mut plugin = plugin(json!({}));
    plugin.on_session_open(&snap, &ctx());
    let t = task_named(&snap, "p");
    snap.nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.to_string(), plugin.predicate(&snap, t, NodeId(i as u32))))
        .collect()
}

fn check(n: NodeBuilder, p: PodBuilder) -> Result<(), Status> {
    check_with(json!({}), n, vec![], p)
}

pub(super) fn n1() -> NodeBuilder {
    node("n1", "8", "16Gi")
}

pub(super) fn p() -> PodBuilder {
    pod("ns", "p").cpu_mem("1", "1Gi")
}

pub(super) fn unresolvable(reason: &str) -> Result<(), Status> {
    Err(Status { code: Code::UnschedulableAndUnresolvable, reason: reason.into(), plugin: NAME })
}

pub(super) fn unschedulable(reason: &str) -> Result<(), Status> {
    Err(Status { code: Code::Unschedulable, reason: reason.into(), plugin: NAME })
}

fn expr(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(exprs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm { match_expressions: Some(exprs), match_fields: None }
}

fn fields(fs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm { match_expressions: None, match_fields: Some(fs) }
}

fn required(terms: Vec<NodeSelectorTerm>) -> impl FnOnce(&mut PodSpec) {
    move |s: &mut PodSpec| {
        s.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector { node_selector_terms: terms }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
}

fn affinity_fits(n: NodeBuilder, terms: Vec<NodeSelectorTerm>) -> bool {
    check(n, p().with_spec(required(terms))).is_ok()
}

// ----- NodeUnschedulable -----

#[test]
fn cordoned_node_is_unresolvable() {
    assert_eq!(check(n1().unschedulable(), p()), unresolvable(REASON_UNSCHEDULABLE));
}

#[test]
fn cordoned_node_takes_pods_tolerating_unschedulable() {
    let tolerating = p().toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule");
    assert_eq!(check(n1().unschedulable(), tolerating), Ok(()));
    let everything = p().toleration("", "Exists", "", "");
    assert_eq!(check(n1().unschedulable(), everything), Ok(()));
    let equal_empty = p().toleration("node.kubernetes.io/unschedulable", "Equal", "", "");
    assert_eq!(check(n1().unschedulable(), equal_empty), Ok(()));
    let wrong_effect = p().toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoExecute");
    assert_eq!(check(n1().unschedulable(), wrong_effect), unresolvable(REASON_UNSCHEDULABLE));
}

#[test]
fn cordon_check_is_always_on() {
    let off = json!({"predicate.NodeAffinityEnable": false, "predicate.TaintTolerationEnable": false});
    assert_eq!(check_with(off, n1().unschedulable(), vec![], p()), unresolvable(REASON_UNSCHEDULABLE));
}

// ----- NodeAffinity -----

#[test]
fn node_selector_needs_every_label() {
    let labelled = || n1().label("zone", "a").label("disk", "ssd");
    assert_eq!(check(labelled(), p().node_selector("zone", "a")), Ok(()));
    assert_eq!(check(labelled(), p().node_selector("zone", "a").node_selector("disk", "ssd")), Ok(()));
    assert_eq!(check(labelled(), p().node_selector("zone", "b")), unresolvable(REASON_NODE_AFFINITY));
    assert_eq!(check(labelled(), p().node_selector("gpu", "true")), unresolvable(REASON_NODE_AFFINITY));
}

#[test]
fn node_affinity_operators() {
    let n = || n1().label("zone", "a").label("cores", "16");
    assert!(affinity_fits(n(), vec![term(vec![expr("zone", "In", &["a", "b"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "In", &["b"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "NotIn", &["a"])])]));
    assert!(affinity_fits(n(), vec![term(vec![expr("missing", "NotIn", &["a"])])]));
    assert!(affinity_fits(n(), vec![term(vec![expr("zone", "Exists", &[])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("missing", "Exists", &[])])]));
    assert!(affinity_fits(n(), vec![term(vec![expr("missing", "DoesNotExist", &[])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "DoesNotExist", &[])])]));
    assert!(affinity_fits(n(), vec![term(vec![expr("cores", "Gt", &["8"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("cores", "Gt", &["16"])])]));
    assert!(affinity_fits(n(), vec![term(vec![expr("cores", "Lt", &["17"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("cores", "Lt", &["16"])])]));
    // A label that is not an integer never satisfies Gt/Lt; neither does a missing one.
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "Gt", &["1"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("missing", "Lt", &["1"])])]));
}

#[test]
fn node_affinity_terms_are_ored_and_expressions_anded() {
    let n = || n1().label("zone", "a").label("disk", "ssd");
    let both = term(vec![expr("zone", "In", &["a"]), expr("disk", "In", &["ssd"])]);
    let one_wrong = term(vec![expr("zone", "In", &["a"]), expr("disk", "In", &["hdd"])]);
    assert!(affinity_fits(n(), vec![both]));
    assert!(!affinity_fits(n(), vec![one_wrong.clone()]));
    assert!(affinity_fits(n(), vec![one_wrong, term(vec![expr("zone", "In", &["a"])])]));
    // nodeSelector and affinity must both match.
    let terms = vec![term(vec![expr("zone", "In", &["a"])])];
    assert_eq!(
        check(n(), p().node_selector("disk", "hdd").with_spec(required(terms))),
        unresolvable(REASON_NODE_AFFINITY)
    );
}

#[test]
fn node_affinity_invalid_or_empty_terms_match_nothing() {
    let n = || n1().label("zone", "a");
    assert!(!affinity_fits(n(), vec![]));
    assert!(!affinity_fits(n(), vec![term(vec![])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "Like", &["a"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "In", &[])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("zone", "Exists", &["a"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("cores", "Gt", &["1", "2"])])]));
    assert!(!affinity_fits(n(), vec![term(vec![expr("cores", "Gt", &["x"])])]));
    // An invalid requirement fails its own term only.
    let invalid = term(vec![expr("zone", "Like", &["a"])]);
    assert!(affinity_fits(n(), vec![invalid, term(vec![expr("zone", "In", &["a"])])]));
}

#[test]
fn node_affinity_match_fields_on_node_name() {
    assert!(affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "In", &["n1"])])]));
    assert!(!affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "In", &["n2"])])]));
    assert!(affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "NotIn", &["n2"])])]));
    assert!(!affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "NotIn", &["n1"])])]));
    // Only In/NotIn with exactly one value are valid field requirements.
    assert!(!affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "In", &["n1", "n2"])])]));
    assert!(!affinity_fits(n1(), vec![fields(vec![expr("metadata.name", "Exists", &[])])]));
    // Fields and expressions of one term are ANDed.
    let mixed = NodeSelectorTerm {
        match_expressions: Some(vec![expr("zone", "In", &["a"])]),
        match_fields: Some(vec![expr("metadata.name", "In", &["n1"])]),
    };
    assert!(affinity_fits(n1().label("zone", "a"), vec![mixed.clone()]));
    assert!(!affinity_fits(n1().label("zone", "b"), vec![mixed]));
}

#[test]
fn node_affinity_can_be_disabled() {
    let off = json!({"predicate.NodeAffinityEnable": false});
    assert_eq!(check_with(off, n1(), vec![], p().node_selector("zone", "b")), Ok(()));
}

// ----- TaintToleration -----

#[test]
fn untolerated_taints_name_the_taint() {
    assert_eq!(
        check(n1().taint("dedicated", "gpu", "NoSchedule"), p()),
        unresolvable("node(s) had untolerated taint {dedicated: gpu}")
    );
    assert_eq!(
        check(n1().taint("node.kubernetes.io/not-ready", "", "NoExecute"), p()),
        unresolvable("node(s) had untolerated taint {node.kubernetes.io/not-ready: }")
    );
    assert_eq!(check(n1().taint("soft", "x", "PreferNoSchedule"), p()), Ok(()));
}

#[test]
fn tolerations_follow_kubernetes_rules() {
    let tainted = || n1().taint("dedicated", "gpu", "NoSchedule");
    let fits = |pb: PodBuilder| check(tainted(), pb).is_ok();
    assert!(fits(p().toleration("dedicated", "Equal", "gpu", "NoSchedule")));
    assert!(fits(p().toleration("dedicated", "", "gpu", "")));
    assert!(!fits(p().toleration("dedicated", "Equal", "cpu", "NoSchedule")));
    assert!(fits(p().toleration("dedicated", "Exists", "", "NoSchedule")));
    assert!(!fits(p().toleration("dedicated", "Exists", "", "NoExecute")));
    assert!(!fits(p().toleration("other", "Exists", "", "")));
    assert!(fits(p().toleration("", "Exists", "", "")));
    assert!(!fits(p().toleration("dedicated", "Gt", "gpu", "")));
}

#[test]
fn the_first_untolerated_taint_is_reported() {
    let n = n1().taint("a", "1", "NoSchedule").taint("b", "2", "NoSchedule");
    assert_eq!(check(n, p().toleration("a", "Exists", "", "")), unresolvable("node(s) had untolerated taint {b: 2}"));
}

#[test]
fn taint_check_can_be_disabled() {
    let off = json!({"predicate.TaintTolerationEnable": false});
    assert_eq!(check_with(off, n1().taint("dedicated", "gpu", "NoSchedule"), vec![], p()), Ok(()));
}

// ----- pod count -----

#[test]
fn pod_count_is_checked_against_allocatable_pods() {
    let small = || n1().res("pods", "2");
    let running = |name: &str| pod("ns", name).cpu_mem("1", "1Gi").running_on("n1");
    assert_eq!(check_with(json!({}), small(), vec![running("r1")], p()), Ok(()));
    assert_eq!(
        check_with(json!({}), small(), vec![running("r1"), running("r2")], p()),
        unschedulable(REASON_POD_NUMBER)
    );
}

#[test]
fn unresolvable_failures_win_over_pod_count() {
    let full = n1().res("pods", "1").taint("dedicated", "gpu", "NoSchedule");
    let running = pod("ns", "r1").running_on("n1");
    assert_eq!(
        check_with(json!({}), full, vec![running], p()),
        unresolvable("node(s) had untolerated taint {dedicated: gpu}")
    );
}

// ----- NodePorts -----

fn port(host_port: i32, protocol: &str, host_ip: &str) -> ContainerPort {
    ContainerPort {
        container_port: 80,
        host_port: (host_port != 0).then_some(host_port),
        protocol: (!protocol.is_empty()).then(|| protocol.into()),
        host_ip: (!host_ip.is_empty()).then(|| host_ip.into()),
        ..Default::default()
    }
}

fn with_port(pb: PodBuilder, pt: ContainerPort) -> PodBuilder {
    pb.with_spec(move |s| s.containers[0].ports.get_or_insert_with(Vec::new).push(pt))
}

fn ports_fit(used: ContainerPort, wanted: ContainerPort) -> bool {
    let running = with_port(pod("ns", "r1").running_on("n1"), used);
    check_with(json!({}), n1(), vec![running], with_port(p(), wanted)).is_ok()
}

#[test]
fn host_port_conflicts() {
    assert!(!ports_fit(port(8080, "TCP", ""), port(8080, "TCP", "")));
    // Protocol defaults to TCP, host IP to 0.0.0.0.
    assert!(!ports_fit(port(8080, "", ""), port(8080, "TCP", "0.0.0.0")));
    assert!(ports_fit(port(8080, "TCP", ""), port(8080, "UDP", "")));
    assert!(ports_fit(port(8080, "TCP", ""), port(8081, "TCP", "")));
    assert!(ports_fit(port(8080, "TCP", "10.0.0.1"), port(8080, "TCP", "10.0.0.2")));
    assert!(!ports_fit(port(8080, "TCP", "10.0.0.1"), port(8080, "TCP", "10.0.0.1")));
    assert!(!ports_fit(port(8080, "TCP", "10.0.0.1"), port(8080, "TCP", "")));
    assert!(!ports_fit(port(8080, "TCP", ""), port(8080, "TCP", "10.0.0.2")));
    // Container ports without a host port never conflict.
    assert!(ports_fit(port(0, "TCP", ""), port(0, "TCP", "")));
}

#[test]
fn host_port_conflict_is_unschedulable() {
    let running = with_port(pod("ns", "r1").running_on("n1"), port(8080, "TCP", ""));
    assert_eq!(
        check_with(json!({}), n1(), vec![running.clone()], with_port(p(), port(8080, "TCP", ""))),
        unschedulable(REASON_NODE_PORTS)
    );
    let off = json!({"predicate.NodePortsEnable": false});
    assert_eq!(check_with(off, n1(), vec![running], with_port(p(), port(8080, "TCP", ""))), Ok(()));
}

#[test]
fn sidecar_init_container_ports_count() {
    let sidecar = |restart: Option<&str>| {
        let restart = restart.map(str::to_string);
        pod("ns", "r1").running_on("n1").with_spec(move |s| {
            s.init_containers = Some(vec![Container {
                name: "side".into(),
                restart_policy: restart,
                ports: Some(vec![port(9000, "TCP", "")]),
                ..Default::default()
            }])
        })
    };
    let wanted = || with_port(p(), port(9000, "TCP", ""));
    assert_eq!(check_with(json!({}), n1(), vec![sidecar(Some("Always"))], wanted()), unschedulable(REASON_NODE_PORTS));
    assert_eq!(check_with(json!({}), n1(), vec![sidecar(None)], wanted()), Ok(()));
}

// ----- inter-pod affinity, topology spread -----

fn selecting(key: &str, value: &str, topology: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: topology.into(),
        label_selector: Some(LabelSelector {
            match_labels: Some([(key.to_string(), value.to_string())].into_iter().collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn affine(b: PodBuilder, terms: Vec<PodAffinityTerm>) -> PodBuilder {
    b.with_spec(|s| {
        s.affinity = Some(Affinity {
            pod_affinity: Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(terms),
                ..Default::default()
            }),
            ..Default::default()
        })
    })
}

fn anti(b: PodBuilder, terms: Vec<PodAffinityTerm>) -> PodBuilder {
    b.with_spec(|s| {
        s.affinity = Some(Affinity {
            pod_anti_affinity: Some(PodAntiAffinity {
                required_during_scheduling_ignored_during_execution: Some(terms),
                ..Default::default()
            }),
            ..Default::default()
        })
    })
}

fn zoned(name: &str, zone: &str) -> NodeBuilder {
    node(name, "8", "16Gi").label("kubernetes.io/hostname", name).label("zone", zone)
}

fn running(name: &str, node: &str) -> PodBuilder {
    pod("ns", name).cpu_mem("1", "1Gi").running_on(node)
}

fn names(answers: &[(String, Result<(), Status>)]) -> Vec<&str> {
    answers.iter().filter(|(_, r)| r.is_ok()).map(|(n, _)| n.as_str()).collect()
}

#[test]
fn required_anti_affinity_keeps_away_from_matching_pods() {
    let nodes = || vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")];
    let web = || running("web", "n1").label("app", "web");
    let by_host = answers(nodes(), vec![web()], anti(p(), vec![selecting("app", "web", "kubernetes.io/hostname")]));
    assert_eq!(by_host[0].1, unschedulable(crate::interpod::REASON_ANTI_AFFINITY));
    assert_eq!(names(&by_host), ["n2", "n3"]);
    let by_zone = answers(nodes(), vec![web()], anti(p(), vec![selecting("app", "web", "zone")]));
    assert_eq!(names(&by_zone), ["n3"]);
    // Another namespace is not looked at unless the term names it.
    let elsewhere = || pod("other", "web").cpu_mem("1", "1Gi").running_on("n1").label("app", "web");
    let own_ns = answers(nodes(), vec![elsewhere()], anti(p(), vec![selecting("app", "web", "zone")]));
    assert_eq!(names(&own_ns), ["n1", "n2", "n3"]);
    let mut all_ns = selecting("app", "web", "zone");
    all_ns.namespace_selector = Some(LabelSelector::default());
    assert_eq!(names(&answers(nodes(), vec![elsewhere()], anti(p(), vec![all_ns]))), ["n3"]);
    let off = json!({"predicate.PodAffinityEnable": false});
    assert_eq!(
        check_with(off, zoned("n1", "a"), vec![web()], anti(p(), vec![selecting("app", "web", "zone")])),
        Ok(())
    );
}

#[test]
fn anti_affinity_of_running_pods_repels_matching_pods() {
    // A pod of another scheduler, with anti-affinity against app=batch on its zone.
    let guard = anti(running("guard", "n1").scheduler("default-scheduler"), vec![selecting("app", "batch", "zone")]);
    let nodes = vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b")];
    let r = answers(nodes.clone(), vec![guard.clone()], p().label("app", "batch"));
    assert_eq!(r[1].1, unschedulable(crate::interpod::REASON_EXISTING_ANTI_AFFINITY));
    assert_eq!(names(&r), ["n3"]);
    assert_eq!(names(&answers(nodes, vec![guard], p().label("app", "web"))), ["n1", "n2", "n3"]);
}

#[test]
fn required_affinity_needs_a_matching_pod_in_the_domain() {
    let nodes = || vec![zoned("n1", "a"), zoned("n2", "a"), zoned("n3", "b"), node("bare", "8", "16Gi")];
    let term = || vec![selecting("app", "db", "zone")];
    let db = running("db", "n2").label("app", "db");
    let r = answers(nodes(), vec![db], affine(p(), term()));
    assert_eq!(names(&r), ["n1", "n2"]);
    assert_eq!(r[0].0, "bare");
    assert_eq!(r[0].1, unresolvable(crate::interpod::REASON_AFFINITY));
    // Nothing matches anywhere: refused, unless the pod matches its own terms (the first
    // pod of a self-affine group may start on any node with the topology key).
    assert!(names(&answers(nodes(), vec![], affine(p(), term()))).is_empty());
    let first = answers(nodes(), vec![], affine(p().label("app", "db"), term()));
    assert_eq!(names(&first), ["n1", "n2", "n3"]);
}

fn spread(b: PodBuilder, when: &str, max_skew: i32, min_domains: Option<i32>) -> PodBuilder {
    let when = when.to_string();
    b.with_spec(move |s| {
        s.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
            max_skew,
            topology_key: "zone".into(),
            when_unsatisfiable: when,
            min_domains,
            label_selector: Some(LabelSelector {
                match_labels: Some([("app".to_string(), "s".to_string())].into_iter().collect()),
                ..Default::default()
            }),
            ..Default::default()
        }])
    })
}

#[test]
fn do_not_schedule_spread_bounds_the_skew() {
    let nodes = || vec![zoned("n1", "a"), zoned("n2", "b"), node("bare", "8", "16Gi")];
    let one_in_a = || vec![running("s0", "n1").label("app", "s")];
    let r = answers(nodes(), one_in_a(), spread(p().label("app", "s"), "DoNotSchedule", 1, None));
    assert_eq!(r[0].1, unresolvable(crate::interpod::REASON_SPREAD_MISSING_LABEL));
    assert_eq!(r[1].1, unschedulable(crate::interpod::REASON_SPREAD));
    assert_eq!(names(&r), ["n2"]);
    // A pod that does not match its own selector does not count itself.
    assert_eq!(names(&answers(nodes(), one_in_a(), spread(p(), "DoNotSchedule", 1, None))), ["n1", "n2"]);
    // minDomains above the number of domains: the smallest domain counts as 0.
    let both = || vec![running("s0", "n1").label("app", "s"), running("s1", "n2").label("app", "s")];
    assert_eq!(names(&answers(nodes(), both(), spread(p().label("app", "s"), "DoNotSchedule", 1, None))), ["n1", "n2"]);
    assert!(names(&answers(nodes(), both(), spread(p().label("app", "s"), "DoNotSchedule", 1, Some(3)))).is_empty());
    // ScheduleAnyway is a score, not a filter.
    assert_eq!(
        names(&answers(nodes(), one_in_a(), spread(p().label("app", "s"), "ScheduleAnyway", 1, None))),
        ["bare", "n1", "n2"]
    );
    let off = json!({"predicate.PodTopologySpreadEnable": false});
    assert_eq!(
        check_with(off, zoned("n1", "a"), one_in_a(), spread(p().label("app", "s"), "DoNotSchedule", 1, None)),
        Ok(())
    );
}

// ----- arguments -----

#[test]
fn defaults_match_volcano() {
    assert_eq!(Args::parse(&Default::default()).unwrap().resolve(), Enabled::default());
    let e = Enabled::default();
    assert!(e.node_affinity && e.node_ports && e.taint_toleration && e.pod_affinity && e.pod_topology_spread);
}

#[test]
fn bools_accept_strings() {
    let a = Args::parse(
        &plugin_option(NAME, json!({"predicate.NodePortsEnable": "false", "predicate.CacheEnable": "TRUE"})).arguments,
    )
    .unwrap();
    assert_eq!(a.node_ports_enable, Some(false));
    assert_eq!(a.cache_enable, Some(true));
    assert!(!a.resolve().node_ports);
}

#[test]
fn wrong_types_name_the_key() {
    let err = factory(&plugin_option(NAME, json!({"predicate.NodeAffinityEnable": 1}))).err().unwrap();
    assert_eq!(err.0, "argument \"predicate.NodeAffinityEnable\": expected true or false, got 1");
    let err = factory(&plugin_option(NAME, json!({"volumebinding.weight": 1.5}))).err().unwrap();
    assert_eq!(err.0, "argument \"volumebinding.weight\": expected an integer, got 1.5");
    let err = factory(&plugin_option(NAME, json!({"predicate.resources.nvidia.com/gpu.cpu": "4"}))).err().unwrap();
    assert_eq!(err.0, "argument \"predicate.resources.nvidia.com/gpu.cpu\": expected a number, got \"4\"");
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = factory(&plugin_option(NAME, json!({"predicate.NodeAffinityEnabled": true}))).err().unwrap();
    assert!(err.0.starts_with("unknown field `predicate.NodeAffinityEnabled`, expected one of"), "{}", err.0);
    let err = factory(&plugin_option(NAME, json!({"predicate.resources.nvidia.com/gpu.disk": 1}))).err().unwrap();
    assert!(err.0.starts_with("unknown field `predicate.resources.nvidia.com/gpu.disk`"), "{}", err.0);
}

#[test]
fn accepted_volcano_keys_parse() {
    let a = Args::parse(
        &plugin_option(
            NAME,
            json!({
                "predicate.NodeVolumeLimitsEnable": false,
                "predicate.VolumeZoneEnable": true,
                "predicate.VolumeBindingEnable": "true",
                "predicate.DynamicResourceAllocationEnable": false,
                "predicate.GPUSharingEnable": true,
                "predicate.GPUNumberEnable": true,
                "predicate.ProportionalEnable": true,
                "predicate.resources": "nvidia.com/gpu",
                "predicate.resources.nvidia.com/gpu.cpu": 4,
                "predicate.resources.nvidia.com/gpu.memory": 8.5,
                "volumebinding.bindTimeoutSeconds": 600,
                "volumebinding.weight": 1,
                "volumebinding.shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
                "dynamicresources.filterTimeoutSeconds": 15,
            }),
        )
        .arguments,
    )
    .unwrap();
    assert_eq!(a.volume_binding_shape.as_ref().map(Vec::len), Some(2));
    assert_eq!(a.resources.as_deref(), Some("nvidia.com/gpu"));
    // The volume switches take effect; the others are accepted without one.
    assert_eq!(a.resolve(), Enabled { node_volume_limits: false, ..Enabled::default() });
}

#[test]
fn plugin_registers_the_predicate_and_its_event_handlers() {
    let p = plugin(json!({}));
    assert_eq!(p.name(), "predicates");
    // The event handlers keep the inter-pod counts of the session.
    assert_eq!(p.hooks(), volcano_framework::Hooks::PREDICATE | volcano_framework::Hooks::EVENT_HANDLER);
}

#[test]
fn predicates_are_sync() {
    fn assert_sync<T: Send + Sync>() {}
    assert_sync::<Predicates>();
}

#[test]
fn node_index_sees_a_required_affinity_satisfied_by_a_placement() {
    // `b` needs a pod `app: db` on its node (hostname); none runs yet, so no node fits
    // it. Placing `db` on n2 in the session must make n2 fit `b`, although n2 only took
    // a task (the index keeps a node that did not fit and only took tasks as not fitting,
    // unless a plugin reports it).
    let snap = Objects::new()
        .node(zoned("n1", "a"))
        .node(zoned("n2", "a"))
        .pod(pod("ns", "db").cpu_mem("1", "1Gi").label("app", "db"))
        .pod(affine(pod("ns", "b").cpu_mem("1", "1Gi"), vec![selecting("app", "db", "kubernetes.io/hostname")]))
        .snapshot();
    let (db, b, n2) = (task_named(&snap, "db"), task_named(&snap, "b"), node_id(&snap, "n2"));
    let mut ssn = volcano_testkit::fixtures::plugin_session(snap, plugin(json!({})));
    let errors = ssn.find_node(b).expect_err("no pod app=db anywhere yet");
    assert_eq!(errors.reasons.get(crate::interpod::REASON_AFFINITY), Some(&2), "{errors:?}");
    ssn.allocate(db, n2);
    assert_eq!(ssn.find_node(b).map(|c| c.node()), Ok(n2));
    assert_eq!(ssn.find_node(b), ssn.find_node_by_scan(b));
}

/// Two nodes of 8 cpus in zones `a` and `b`; `filler` (5 cpus) fits them, `big` (6 cpus)
/// selects zone `c`, so it fails both for good. The session, `filler`, `big` and n1.
fn filler_and_big() -> (volcano_framework::Session, TaskId, TaskId, NodeId) {
    let snap = Objects::new()
        .node(zoned("n1", "a"))
        .node(zoned("n2", "b"))
        .pod(pod("ns", "filler").cpu_mem("5", "1Gi"))
        .pod(pod("ns", "big").cpu_mem("6", "1Gi").node_selector("zone", "c"))
        .snapshot();
    let (filler, big, n1) = (task_named(&snap, "filler"), task_named(&snap, "big"), node_id(&snap, "n1"));
    let ssn = volcano_testkit::fixtures::plugin_session(snap, plugin(json!({})));
    (ssn, filler, big, n1)
}

#[test]
fn node_index_reasons_follow_placements_on_nodes_that_did_not_fit() {
    // `big` fails n1 by its selector; once `filler` takes half of n1, the first failure a
    // scan reports there is the resource check, which comes first.
    let (mut ssn, filler, big, n1) = filler_and_big();
    let before = ssn.find_node(big).expect_err("no node in zone c");
    assert_eq!(before.reasons.get(REASON_NODE_AFFINITY), Some(&2), "{before:?}");
    ssn.allocate(filler, n1);
    let after = ssn.find_node(big).expect_err("no node in zone c");
    assert_eq!(after.reasons.get(REASON_NODE_AFFINITY), Some(&1), "{after:?}");
    assert_eq!(after.reasons.get("Insufficient cpu"), Some(&1), "{after:?}");
    assert_eq!(Err(after), ssn.find_node_by_scan(big));
}

#[test]
fn node_index_reasons_follow_undone_placements_on_nodes_that_never_fit() {
    // `big` fails both nodes by its selector, for good. A placement on n1 that is undone
    // gives n1 its room back: the first failure a scan reports there goes from the
    // resource check back to the selector.
    let (mut ssn, filler, big, n1) = filler_and_big();
    let mut stmt = volcano_framework::Statement::new();
    stmt.allocate(&mut ssn, filler, n1);
    let during = ssn.find_node(big).expect_err("no node in zone c");
    assert_eq!(during.reasons.get("Insufficient cpu"), Some(&1), "{during:?}");
    stmt.discard(&mut ssn);
    let after = ssn.find_node(big).expect_err("no node in zone c");
    assert_eq!(after.reasons.get(REASON_NODE_AFFINITY), Some(&2), "{after:?}");
    assert_eq!(Err(after), ssn.find_node_by_scan(big));
}

// ----- evaluation keys -----

#[test]
fn evaluation_keys_join_only_tasks_whose_answers_agree_past_the_fixed_failures() {
    // n1 is full (pod count), n2 tainted, n1 and n3 labelled gpu: "a" selects gpu, "b"
    // tolerates the taint; "ports" asks for a host port, "batch" is repelled by a running
    // pod.
    let guard = anti(running("guard", "n1").scheduler("default-scheduler"), vec![selecting("app", "batch", "zone")]);
    let objs = Objects::new()
        .node(zoned("n1", "a").res("pods", "1").label("gpu", "yes"))
        .node(zoned("n2", "a").taint("dedicated", "infer", "NoSchedule"))
        .node(zoned("n3", "b").label("gpu", "yes"))
        .pod(guard)
        .pod(pod("ns", "a").cpu_mem("1", "1Gi").node_selector("gpu", "yes"))
        .pod(pod("ns", "b").cpu_mem("1", "1Gi").toleration("dedicated", "Exists", "", "NoSchedule"))
        .pod(with_port(pod("ns", "ports").cpu_mem("1", "1Gi"), port(8080, "TCP", "")))
        .pod(pod("ns", "batch").cpu_mem("1", "1Gi").label("app", "batch"));
    let snap = objs.snapshot();
    let mut plugin = plugin(json!({}));
    plugin.on_session_open(&snap, &ctx());
    let key = |name: &str| plugin.incremental().expect("makes promises").evaluation_key(&snap, task_named(&snap, name));
    assert_eq!(key("a"), Some(0));
    assert_eq!(key("b"), Some(0));
    assert_eq!(key("ports"), None, "host ports read the task itself");
    assert_eq!(key("batch"), None, "inter-pod rules read the task's labels");
    // The contract: where neither task fails for good, the answers are equal.
    let (a, b) = (task_named(&snap, "a"), task_named(&snap, "b"));
    let fixed = |t| plugin.incremental().expect("makes promises").fixed_failures(&snap, t);
    let (fa, fb) = (fixed(a), fixed(b));
    let mut compared = 0;
    for i in 0..snap.nodes.len() {
        let n = NodeId(i as u32);
        if fa.as_ref().is_some_and(|f| f.fails(n)) || fb.as_ref().is_some_and(|f| f.fails(n)) {
            continue;
        }
        assert_eq!(plugin.predicate(&snap, a, n), plugin.predicate(&snap, b, n), "node {}", snap.node(n).name);
        compared += 1;
    }
    assert_eq!(compared, 2, "n1 (full for both) and n3");
}

#[test]
fn inter_pod_failures_name_this_plugin() {
    assert_eq!(crate::interpod::PLUGIN, super::NAME);
}
