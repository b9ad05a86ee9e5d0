//! End-to-end checks of the actions through the real cycle driver and plugins.

use volcano_framework::{run_cycle, CycleContext, Effect, InvariantChecker, Profile, Registries};
use volcano_testkit::*;

fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}

fn run(objects: Objects, conf: Option<&str>) -> (Vec<Effect>, Vec<String>) {
    let reg = registries();
    let profile = match conf {
        Some(c) => Profile::from_yaml(c, &reg).unwrap(),
        None => Profile::builtin_default(&reg).unwrap(),
    };
    let snap = objects.snapshot();
    let mut checker = InvariantChecker::default();
    let cx = CycleContext { cycle: 1, now_ms: 1_800_000_000_000, options: Default::default() };
    let out = run_cycle(snap, &profile, &cx, &mut checker);
    (out.effects, checker.violations)
}

fn binds(effects: &[Effect]) -> Vec<(String, String)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bind { pod, node, .. } => Some((pod.to_string(), node.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn two_gangs_one_fits() {
    let mut o = Objects::new().node(node("n1", "8", "32Gi").gpu("4")).node(node("n2", "8", "32Gi").gpu("4"));
    for (job, n) in [("a", 6), ("b", 6)] {
        o = o.pod_group(pod_group("ns", job, n));
        for i in 0..n {
            o = o.pod(pod("ns", &format!("{job}-{i}")).group(job).cpu_mem("1", "1Gi").gpu("1"));
        }
    }
    let (effects, violations) = run(o, None);
    assert!(violations.is_empty(), "{violations:?}");
    let b = binds(&effects);
    assert_eq!(b.len(), 6, "{b:?}");
    assert!(b.iter().all(|(p, _)| p.starts_with("ns/a-")), "{b:?}");
}

fn evictions(effects: &[Effect]) -> Vec<(String, &'static str)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Evict { pod, action, .. } => Some((pod.to_string(), *action)),
            _ => None,
        })
        .collect()
}

const PREEMPT_CONF: &str = r#"
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

#[test]
fn high_priority_gang_preempts_low_priority_pods_of_its_queue() {
    let mut o = Objects::new()
        .priority_class("high", 1000)
        .priority_class("low", 1)
        .node(node("n1", "8", "32Gi").gpu("4"))
        .pod_group(pod_group("ns", "low", 1).priority_class("low"))
        .pod_group(pod_group("ns", "high", 2).priority_class("high"));
    for i in 0..4 {
        o = o
            .pod(pod("ns", &format!("low-{i}")).group("low").cpu_mem("1", "1Gi").gpu("1").priority(1).running_on("n1"));
    }
    for i in 0..2 {
        o = o.pod(pod("ns", &format!("high-{i}")).group("high").cpu_mem("1", "1Gi").gpu("1").priority(1000));
    }
    let (effects, violations) = run(o, Some(PREEMPT_CONF));
    assert!(violations.is_empty(), "{violations:?}");
    let ev = evictions(&effects);
    assert_eq!(ev.len(), 2, "{effects:#?}");
    assert!(ev.iter().all(|(p, a)| p.starts_with("ns/low-") && *a == "preempt"), "{ev:?}");
    let pipelined = effects.iter().filter(|e| matches!(e, Effect::Pipeline { .. })).count();
    assert_eq!(pipelined, 2);
}
