//! Running cycles: effects applied as a cluster would, the fixpoint, invariants, and the
//! output formats.

mod common;

use std::collections::BTreeSet;

use common::{docs, node, pod, simulator};
use serde_json::Value;
use volcano_framework::{Effect, Event, EventKind, EventType, ObjectRef, PodScheduledFalse};
use volcano_sim::{normalise, Cluster, SimError, Stop, MAX_CYCLES};

fn three_pods() -> String {
    docs(&[node("n1", "4", "8Gi"), pod("ml", "c", "1", "1Gi"), pod("ml", "a", "1", "1Gi"), pod("ml", "b", "1", "1Gi")])
}

#[test]
fn runs_until_a_cycle_changes_nothing() {
    let mut sim = simulator(&three_pods(), "bind-one");
    assert_eq!(sim.run(None).unwrap(), Stop::Fixpoint);
    let h = sim.history();
    let binds: Vec<&str> = h.iter().flat_map(|c| c.binds.iter().map(|b| b.pod.as_str())).collect();
    assert_eq!(binds, ["ml/a", "ml/b", "ml/c"]);
    assert!(h[..h.len() - 1].iter().all(|c| c.changed()));
    assert!(!h.last().unwrap().changed());
    // The last bind's PodGroup becomes Running one cycle later; the cycle after changes nothing.
    assert_eq!(h.len(), 5);
    assert_eq!(h.iter().map(|c| c.cycle).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    assert_eq!(h[1].time_ms - h[0].time_ms, 1000, "one second per cycle");
    // Running it again changes nothing at all.
    assert_eq!(sim.run(None).unwrap(), Stop::Fixpoint);
    assert_eq!(sim.history().len(), 6);
}

#[test]
fn cycles_n_runs_exactly_n() {
    let mut sim = simulator(&three_pods(), "bind-one");
    assert_eq!(sim.run(Some(2)).unwrap(), Stop::CyclesDone);
    assert_eq!(sim.history().len(), 2);
    let mut sim = simulator(&three_pods(), "bind-one");
    sim.run(Some(8)).unwrap();
    assert_eq!(sim.history().len(), 8);
    let mut sim = simulator(&three_pods(), "bind-one");
    sim.run(Some(0)).unwrap();
    assert!(sim.history().is_empty());
    assert_eq!(sim.report().pods.iter().filter(|p| p.pending_reason.as_deref() == Some("no cycle ran")).count(), 3);
}

#[test]
fn stops_at_the_cycle_limit() {
    let mut parts = vec![node("n1", "200", "200Gi")];
    parts.extend((0..=MAX_CYCLES).map(|i| pod("ml", &format!("p{i:03}"), "1", "1Gi")));
    let mut sim = simulator(&docs(&parts), "bind-one");
    assert_eq!(sim.run(None).unwrap(), Stop::Limit);
    assert_eq!(sim.history().len(), MAX_CYCLES as usize);
    assert!(sim.report().to_table().contains("Stopped after 100 cycles"));
}

#[test]
fn bound_pods_run_on_their_node_and_fill_it() {
    // Two 3-cpu pods on a 4-cpu node: only one fits.
    let text = docs(&[node("n1", "4", "8Gi"), pod("ml", "a", "3", "1Gi"), pod("ml", "b", "3", "1Gi")]);
    let mut sim = simulator(&text, "bind-one");
    sim.run(None).unwrap();
    let pod = &sim.cluster().pods["ml/a"];
    assert_eq!(pod.node_name(), Some("n1"));
    assert_eq!(pod.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let report = sim.report();
    let b = report.pods.iter().find(|p| p.pod == "ml/b").unwrap();
    assert_eq!((b.node.as_deref(), b.phase.as_str()), (None, "Pending"));
    assert!(b.pending_reason.is_some());
    let q = report.queues.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(q.allocated["cpu"].0, "3");
    assert_eq!(q.allocated["pods"].0, "1");
}

#[test]
fn pods_of_other_schedulers_keep_their_node_and_are_listed() {
    let foreign = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {requests: {cpu: \"3\"}}}]\nstatus: {phase: Running}\n";
    let idle = "apiVersion: v1\nkind: Pod\nmetadata: {name: idle}\nspec: {containers: [{name: c, image: i}]}\n";
    let text = docs(&[node("n1", "4", "8Gi"), foreign.into(), idle.into(), pod("ml", "a", "2", "1Gi")]);
    let mut sim = simulator(&text, "bind-one");
    sim.run(None).unwrap();
    let report = sim.report();
    let pods: Vec<(&str, Option<&str>, &str)> =
        report.pods.iter().map(|p| (p.pod.as_str(), p.node.as_deref(), p.phase.as_str())).collect();
    assert_eq!(
        pods,
        [("default/idle", None, "Pending"), ("default/web", Some("n1"), "Running"), ("ml/a", None, "Pending")]
    );
    let idle = &report.pods[0];
    assert!(idle.pending_reason.as_deref().unwrap().contains("schedulerName is \"default-scheduler\""));
}

#[test]
fn evicted_pods_are_deleted() {
    let running = "apiVersion: v1\nkind: Pod\nmetadata: {name: r, namespace: ml}\nspec:\n  schedulerName: volcano-rs\n  nodeName: n1\n  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}}}]\nstatus: {phase: Running}\n";
    let mut sim = simulator(&docs(&[node("n1", "4", "8Gi"), running.into()]), "evict-all");
    sim.step().unwrap();
    let rec = &sim.history()[0];
    assert_eq!(rec.evictions.len(), 1);
    let e = &rec.evictions[0];
    assert_eq!(
        (e.pod.as_str(), e.node.as_str(), e.action.as_str(), e.reason.as_str()),
        ("ml/r", "n1", "evict-all", "test eviction")
    );
    assert!(!sim.cluster().pods.contains_key("ml/r"));
    let json = sim.report().to_json_value();
    assert_eq!(
        json["cycles"][0]["evictions"][0],
        serde_json::json!({"pod": "ml/r", "node": "n1", "action": "evict-all"})
    );
}

#[test]
fn an_invariant_violation_is_an_error() {
    let text = docs(&[node("n1", "2", "8Gi"), pod("ml", "a", "2", "1Gi"), pod("ml", "b", "2", "1Gi")]);
    let mut sim = simulator(&text, "overcommit");
    let err = sim.run(None).unwrap_err();
    assert_eq!(err.category(), "invariant_violation");
    assert!(err.is_scheduler_bug());
    let SimError::Invariant { cycle, violations } = &err else { panic!("{err:?}") };
    assert_eq!(*cycle, 1);
    assert!(violations[0].contains("after overcommit: node n1 over allocatable"), "{violations:?}");
    assert!(sim.history().is_empty(), "nothing of the cycle is applied");
}

#[test]
fn effects_that_cannot_apply_are_errors() {
    let n = normalise(common::manifest(&docs(&[node("n1", "4", "8Gi"), pod("ml", "a", "1", "1Gi")]))).unwrap();
    let mut cluster: Cluster = n.cluster;
    let pod_ref = |key: &str| {
        let (ns, name) = key.split_once('/').unwrap();
        ObjectRef::namespaced(ns, name, "")
    };
    let bind = |pod: &str, node: &str| Effect::Bind { pod: pod_ref(pod), node: node.into(), annotations: Vec::new() };
    let err = cluster.apply_effects(&[bind("ml/nope", "n1")], 1, 0).unwrap_err();
    assert_eq!(err.to_string(), "cannot apply bind ml/nope to n1: pod ml/nope does not exist");
    let err = cluster.apply_effects(&[bind("ml/a", "n9")], 1, 0).unwrap_err();
    assert!(err.message.contains("node n9 does not exist"));
    let rec = cluster.apply_effects(&[bind("ml/a", "n1")], 1, 0).unwrap();
    assert_eq!(rec.binds.len(), 1);
    let err = cluster.apply_effects(&[bind("ml/a", "n1")], 2, 0).unwrap_err();
    assert!(err.message.contains("already bound to n1"), "{err}");
    let ev = Effect::Event(Event {
        kind: EventKind::PodGroup,
        object: ObjectRef::namespaced("ml", "x", ""),
        type_: EventType::Normal,
        reason: "R",
        message: "m".into(),
    });
    let rec = cluster.apply_effects(&[ev], 3, 0).unwrap();
    assert_eq!(rec.events.len(), 1);
    assert!(!rec.changed(), "events do not count as changes");
    let nominate = Effect::Pipeline { pod: pod_ref("ml/a"), node: "n1".into() };
    let rec = cluster.apply_effects(std::slice::from_ref(&nominate), 4, 0).unwrap();
    assert_eq!(rec.pipelined.len(), 1);
    let rec = cluster.apply_effects(&[nominate], 5, 0).unwrap();
    assert!(rec.pipelined.is_empty(), "the same nominated node again is no change");
}

#[test]
fn effects_carry_the_uid_and_never_touch_a_replaced_pod() {
    let n = normalise(common::manifest(&docs(&[node("n1", "4", "8Gi"), pod("ml", "a", "1", "1Gi")]))).unwrap();
    let mut cluster: Cluster = n.cluster;
    let uid = cluster.pods["ml/a"].metadata.uid.clone().expect("normalised pods have a uid");
    let stale = Effect::Bind {
        pod: ObjectRef::namespaced("ml", "a", "another-uid"),
        node: "n1".into(),
        annotations: Vec::new(),
    };
    let err = cluster.apply_effects(&[stale], 1, 0).unwrap_err();
    assert!(err.message.contains("was replaced"), "{err}");
    assert!(cluster.pods["ml/a"].node_name().is_none(), "nothing applied");

    let pod = ObjectRef::namespaced("ml", "a", &uid);
    let condition = PodScheduledFalse { reason: "Unschedulable", message: "0/1 nodes are unavailable".into() };
    let rec = cluster.apply_effects(&[Effect::PodUnschedulable { pod: pod.clone(), condition }], 1, 0).unwrap();
    assert_eq!(rec.pod_condition_updates, vec!["ml/a".to_string()]);
    assert!(rec.changed());
    let conditions = cluster.pods["ml/a"].status.as_ref().unwrap().conditions.clone().unwrap();
    assert_eq!(conditions.len(), 1);
    assert_eq!(
        (conditions[0].type_.as_str(), conditions[0].status.as_str(), conditions[0].reason.as_deref()),
        ("PodScheduled", "False", Some("Unschedulable"))
    );
    let rec = cluster.apply_effects(&[Effect::Bind { pod, node: "n1".into(), annotations: Vec::new() }], 2, 0).unwrap();
    assert_eq!(rec.binds.len(), 1);
    let conditions = cluster.pods["ml/a"].status.as_ref().unwrap().conditions.clone().unwrap_or_default();
    assert!(conditions.is_empty(), "a bound pod loses its PodScheduled=False condition: {conditions:?}");
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
    k.iter().copied().collect()
}

#[test]
fn json_output_has_exactly_the_specified_keys() {
    let mut sim = simulator(&three_pods(), "bind-one");
    sim.run(None).unwrap();
    let report = sim.report();
    let v: Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(keys(&v), set(&["cycles", "pods", "podGroups", "queues", "jobs"]));
    assert_eq!(v["jobs"], serde_json::json!([]), "no Job in the input");
    let c0 = &v["cycles"][0];
    assert_eq!(keys(c0), set(&["cycle", "binds", "evictions", "pipelined"]));
    assert_eq!(c0["cycle"], 1);
    assert_eq!(c0["binds"][0], serde_json::json!({"pod": "ml/a", "node": "n1"}));
    assert_eq!(keys(&v["pods"][0]), set(&["pod", "node", "phase"]));
    assert_eq!(v["pods"][0], serde_json::json!({"pod": "ml/a", "node": "n1", "phase": "Running"}));
    let pg = &v["podGroups"][0];
    assert_eq!(keys(pg), set(&["name", "phase", "conditions"]));
    assert_eq!(pg["phase"], "Running");
    assert!(pg["name"].as_str().unwrap().starts_with("ml/podgroup-"));
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.iter().map(|q| q["name"].as_str().unwrap()).collect::<Vec<_>>(), ["default", "root"]);
    for q in queues {
        assert_eq!(keys(q), set(&["name", "weight", "deserved", "allocated", "share"]));
        // No queue policy plugin ran: nothing computed deserved or share.
        assert!(q["deserved"].is_null() && q["share"].is_null());
    }
    assert_eq!(queues[0]["weight"], 1);
    assert_eq!(queues[0]["allocated"], serde_json::json!({"cpu": "3", "memory": "3Gi", "pods": "3"}));
    // YAML has the same structure.
    let y: Value = serde_yaml_ng::from_str(&report.to_yaml()).unwrap();
    assert_eq!(y, v);
}

#[test]
fn conditions_are_reported_with_four_keys() {
    let pg = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {minMember: 1}\nstatus:\n  phase: Pending\n  conditions: [{type: Unschedulable, status: \"True\", reason: NotEnoughResources, message: too big}]\n";
    let mut sim = simulator(&docs(&[node("n1", "1", "1Gi"), pg.into()]), "bind-one");
    sim.run(Some(0)).unwrap();
    let v = sim.report().to_json_value();
    assert_eq!(
        v["podGroups"][0]["conditions"][0],
        serde_json::json!({"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources", "message": "too big"})
    );
}

#[test]
fn pending_reason_falls_back_to_the_unschedulable_condition() {
    let pg = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec: {minMember: 2}\nstatus:\n  conditions: [{type: Unschedulable, status: \"True\", reason: NotEnoughResources, message: 2 pods need 4 cpu}]\n";
    let grouped = "apiVersion: v1\nkind: Pod\nmetadata: {name: w, namespace: ml, annotations: {scheduling.k8s.io/group-name: g}}\nspec: {schedulerName: volcano-rs, containers: [{name: c, image: i}]}\n";
    let lost = "apiVersion: v1\nkind: Pod\nmetadata: {name: lost, namespace: ml, annotations: {scheduling.k8s.io/group-name: nowhere}}\nspec: {schedulerName: volcano-rs, containers: [{name: c, image: i}]}\n";
    let mut sim = simulator(&docs(&[node("n1", "1", "1Gi"), pg.into(), grouped.into(), lost.into()]), "bind-one");
    sim.run(Some(0)).unwrap();
    let report = sim.report();
    let reason = |p: &str| report.pods.iter().find(|x| x.pod == p).unwrap().pending_reason.clone().unwrap();
    assert_eq!(reason("ml/w"), "2 pods need 4 cpu");
    assert_eq!(reason("ml/lost"), "PodGroup ml/nowhere does not exist");
}

#[test]
fn table_shows_binds_pending_pods_and_queues() {
    let text = docs(&[node("n1", "2", "8Gi"), pod("ml", "a", "2", "1Gi"), pod("ml", "b", "2", "1Gi")]);
    let mut sim = simulator(&text, "bind-one");
    sim.run(None).unwrap();
    let table = sim.report().to_table();
    assert!(table.contains("Cycle 1 (2026-01-01T00:00:00Z): 1 bound, 0 evicted, 0 pipelined"), "{table}");
    assert!(table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["bound", "ml/a", "n1"]), "{table}");
    assert!(table.contains("Steady state"), "{table}");
    assert!(table.contains("Pending pods, by PodGroup:"), "{table}");
    assert!(table.lines().any(|l| l.trim_start().starts_with("ml/podgroup-") && l.ends_with(": 1 pod (b)")), "{table}");
    assert!(table.contains("QUEUE") && table.contains("WEIGHT") && table.contains("SHARE"), "{table}");
    assert!(
        table.lines().any(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == ["default", "1", "cpu=2,"]),
        "{table}"
    );
}

#[test]
fn the_clock_starts_at_the_latest_creation_time() {
    let late = "apiVersion: v1\nkind: Node\nmetadata: {name: n1, creationTimestamp: \"2030-06-01T00:00:00Z\"}\nstatus: {allocatable: {cpu: \"4\", memory: 8Gi, pods: \"110\"}}\n";
    let mut sim = simulator(&docs(&[late.into(), pod("ml", "a", "1", "1Gi")]), "bind-one");
    sim.step().unwrap();
    let t = k8s_openapi::jiff::Timestamp::from_millisecond(sim.history()[0].time_ms).unwrap();
    assert_eq!(t.to_string(), "2030-06-01T00:00:00Z");
}

/// A cluster dump as `kubectl get … -o yaml` prints it (server-populated fields, Lists,
/// kinds that do not affect scheduling) simulates with `--scheduler-name volcano`.
#[test]
fn a_kubectl_dump_simulates() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubectl-get-all.yaml");
    let manifest = volcano_sim::Manifest::from_paths(&[&path]).unwrap();
    assert_eq!(
        manifest.skipped_summary().as_deref(),
        Some("skipped 2 object(s) that do not affect scheduling: 1 apps/v1 Deployment, 1 batch/v1 CronJob")
    );
    let registries =
        volcano_framework::Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() };
    let profile = volcano_framework::Profile::builtin_default(&registries).unwrap();
    let n = volcano_sim::normalise_for(manifest, &["volcano".to_string()]).unwrap();
    // The Service and the ReplicaSet are read (their selectors make system-default spread
    // constraints), the Deployment is not.
    assert!(n.cluster.services.contains_key("serving/inference"));
    assert!(n.cluster.replica_sets.contains_key("serving/inference-7d9f8c6b5"));
    let mut sim = volcano_sim::Simulator::from_normalised(n, profile).unwrap();
    sim.run(None).unwrap();
    let report = sim.report();
    let v: Value = serde_json::from_str(&report.to_json()).unwrap();
    // The inference pod of another scheduler holds 2 of gpu-0's 8 GPUs, so the gang of two
    // 8-GPU workers cannot be placed whole and stays pending.
    let pods = v["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 3);
    assert!(pods.iter().filter(|p| p["pod"].as_str().unwrap().starts_with("research/")).all(|p| p["node"].is_null()));
    let pg = &v["podGroups"].as_array().unwrap().iter().find(|p| p["name"] == "research/llm-ft").unwrap().clone();
    assert_eq!(pg["phase"], "Inqueue");
    assert!(pg["conditions"][0]["message"].as_str().unwrap().contains("Insufficient nvidia.com/gpu"), "{pg}");
}

/// HyperNodes in the input reach every cycle's snapshot (the framework builds the topology
/// from them), and a run over them schedules as any other.
#[test]
fn hyper_nodes_reach_the_cycles_and_the_run_goes_on() {
    let leaf = "apiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {name: leaf-0}\nspec: {tier: 1, members: [{type: Node, selector: {regexMatch: {pattern: \"^n[0-9]$\"}}}]}\n";
    let text = docs(&[node("n1", "4", "8Gi"), leaf.into(), pod("ml", "a", "1", "1Gi")]);
    let mut sim = simulator(&text, "bind-one");
    assert_eq!(sim.run(None).unwrap(), Stop::Fixpoint);
    let binds: Vec<&str> = sim.history().iter().flat_map(|c| c.binds.iter().map(|b| b.pod.as_str())).collect();
    assert_eq!(binds, ["ml/a"]);
    let snap = sim.cluster().clone().snapshot(&["volcano-rs"]).unwrap();
    assert_eq!(snap.extras().hyper_nodes.keys().collect::<Vec<_>>(), ["leaf-0"]);
}
