use serde_json::json;
use volcano_framework::{Hooks, NodeId, Plugin};
use volcano_testkit::{node, pod, Objects, PodBuilder};

use super::*;
use volcano_testkit::fixtures::{plugin_option, task_named};

fn plugin(args: serde_json::Value) -> Box<dyn Plugin> {
    factory(&plugin_option(NAME, args)).expect("valid arguments").build()
}

/// Node n1 (8 cpu, 16Gi, 8 GPUs) running 2 cpu / 4Gi / 2 GPUs; the score of `p` on it.
fn score(args: serde_json::Value, p: PodBuilder) -> f64 {
    let snap = Objects::new()
        .node(node("n1", "8", "16Gi").gpu("8"))
        .pod(pod("ns", "r").cpu_mem("2", "4Gi").gpu("2").running_on("n1"))
        .pod(p)
        .snapshot();
    plugin(args).node_order(&snap, task_named(&snap, "p"), NodeId(0))
}

fn p() -> PodBuilder {
    pod("ns", "p").cpu_mem("1", "1Gi")
}

fn assert_close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}

#[test]
fn default_packs_cpu_and_memory() {
    // (3/8 + 5/16) / 2 × 100.
    assert_eq!(score(json!({}), p()), 34.375);
    // GPUs are packed only when listed.
    assert_eq!(score(json!({}), p().gpu("1")), 34.375);
}

#[test]
fn listed_resources_are_packed_with_their_weight() {
    let args = json!({"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 2});
    // (3/8 + 5/16 + 2 × 3/8) / 4 × 100.
    assert_eq!(score(args.clone(), p().gpu("1")), 35.9375);
    // A listed resource the task does not request is not part of the score.
    assert_eq!(score(args, p()), 34.375);
    let default_weight = json!({"binpack.resources": " nvidia.com/gpu , "});
    assert_eq!(score(default_weight, p().gpu("1")), (0.375 + 0.3125 + 0.375) / 3.0 * 100.0);
}

#[test]
fn weights_scale_the_score() {
    assert_eq!(score(json!({"binpack.weight": 10}), p()), 343.75);
    assert_close(score(json!({"binpack.cpu": 5}), p()), (5.0 * 0.375 + 0.3125) / 6.0 * 100.0);
    // Weight 0 for a resource: no contribution and no share of the sum.
    assert_eq!(score(json!({"binpack.memory": 0}), p()), 37.5);
    // Negative resource weights fall back to 1; a negative plugin weight is kept.
    assert_eq!(score(json!({"binpack.cpu": -3, "binpack.memory": -1}), p()), 34.375);
    assert_eq!(score(json!({"binpack.weight": -1}), p()), -34.375);
}

#[test]
fn overflow_scores_zero() {
    // 2 + 7 cpu > 8.
    assert_eq!(score(json!({}), pod("ns", "p").cpu_mem("7", "1Gi")), 0.0);
    // Exactly full is fine: (8/8 + 5/16) / 2 × 100.
    assert_eq!(score(json!({}), pod("ns", "p").cpu_mem("6", "1Gi")), 65.625);
}

#[test]
fn missing_allocatable_contributes_zero_but_keeps_its_weight() {
    let args = json!({"binpack.resources": "example.com/foo"});
    // cpu (2+1)/8 = 0.375, memory 0.3125, foo 0 (none on the node): sum / 3.
    assert_close(score(args, p().req("example.com/foo", "1")), (0.375 + 0.3125) / 3.0 * 100.0);
}

#[test]
fn unrequested_dimensions_are_skipped() {
    // cpu only: 3/8 × 100.
    assert_eq!(score(json!({}), pod("ns", "p").req("cpu", "1")), 37.5);
    // Nothing requested: 0.
    assert_eq!(score(json!({}), pod("ns", "p")), 0.0);
}

#[test]
fn pods_count_only_when_listed() {
    let args = json!({"binpack.resources": "pods"});
    // pods: (1 running + 1) / 110.
    assert_close(score(args, p()), (0.375 + 0.3125 + 2.0 / 110.0) / 3.0 * 100.0);
}

#[test]
fn weight_zero_registers_nothing() {
    assert_eq!(plugin(json!({"binpack.weight": 0})).hooks(), Hooks::empty());
    assert_eq!(plugin(json!({})).hooks(), Hooks::NODE_ORDER);
    assert_eq!(plugin(json!({})).name(), "binpack");
}

#[test]
fn resolve_applies_volcano_defaults() {
    let w = Args::parse(&Default::default()).unwrap().resolve();
    assert_eq!(w, Weights { weight: 1, cpu: 1, memory: 1, resources: vec![] });
    let a = Args::parse(
        &plugin_option(
            NAME,
            json!({
                "binpack.weight": 10,
                "binpack.cpu": 5,
                "binpack.resources": "nvidia.com/gpu, example.com/foo,nvidia.com/gpu, cpu",
                "binpack.resources.nvidia.com/gpu": 2,
                "binpack.resources.example.com/foo": -4,
                "binpack.resources.cpu": 7,
                "binpack.resources.example.com/unlisted": 3,
            }),
        )
        .arguments,
    )
    .unwrap();
    let w = a.resolve();
    assert_eq!(w.weight, 10);
    assert_eq!((w.cpu, w.memory), (5, 1));
    assert_eq!(w.resources, vec![("nvidia.com/gpu".to_string(), 2), ("example.com/foo".to_string(), 1)]);
    assert_eq!(w.of("cpu"), Some(5));
    assert_eq!(w.of("example.com/unlisted"), None);
    assert_eq!(a.unlisted_weights().collect::<Vec<_>>(), ["cpu", "example.com/unlisted"]);
}

#[test]
fn integer_arguments_reject_floats_and_strings() {
    let err = factory(&plugin_option(NAME, json!({"binpack.weight": 1.5}))).err().unwrap();
    assert_eq!(err.0, "argument \"binpack.weight\": expected an integer, got 1.5");
    let err = factory(&plugin_option(NAME, json!({"binpack.cpu": "2"}))).err().unwrap();
    assert_eq!(err.0, "argument \"binpack.cpu\": expected an integer, got \"2\"");
    let err = factory(&plugin_option(
        NAME,
        json!({"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": 2.5}),
    ))
    .err()
    .unwrap();
    assert_eq!(err.0, "argument \"binpack.resources.nvidia.com/gpu\": expected an integer, got 2.5");
    let err = factory(&plugin_option(NAME, json!({"binpack.resources": 3}))).err().unwrap();
    assert_eq!(err.0, "argument \"binpack.resources\": expected a string, got 3");
}

#[test]
fn unknown_keys_are_rejected_by_name() {
    let err = factory(&plugin_option(NAME, json!({"binpack.wieght": 1}))).err().unwrap();
    assert_eq!(
        err.0,
        "unknown field `binpack.wieght`, expected one of `binpack.weight`, `binpack.cpu`, `binpack.memory`, \
         `binpack.resources`, or `binpack.resources.<name>`"
    );
    let err = factory(&plugin_option(NAME, json!({"binpack.resources.": 1}))).err().unwrap();
    assert!(err.0.starts_with("unknown field `binpack.resources.`"), "{}", err.0);
}
