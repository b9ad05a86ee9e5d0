use volcano_api::conf::PluginOption;
use volcano_api::crd::PodGroupPhase;
use volcano_framework::{Admission, Snapshot};
use volcano_testkit::{node, pod, pod_group, queue, Objects};

use super::*;
use volcano_testkit::fixtures::{job_id as job, session_ctx as ctx};

fn open(snap: &Snapshot, factor: f64) -> Overcommit {
    let mut p = Overcommit::new(factor);
    p.on_session_open(snap, &ctx());
    p
}

fn pending(ns: &str, name: &str, cpu: &str) -> volcano_testkit::PodGroupBuilder {
    pod_group(ns, name, 1).queue("q1").phase(PodGroupPhase::Pending).min_resources(&[("cpu", cpu)])
}

/// One node of 10 cpu / 20Gi. Job r runs one 2-cpu pod (Running, minResources 3 cpu: 1 cpu
/// still reserved); job i is Inqueue with minResources 4 cpu.
fn cluster() -> Snapshot {
    Objects::new()
        .node(node("n1", "10", "20Gi"))
        .queue(queue("q1"))
        .pod_group(pod_group("ns", "r", 1).queue("q1").phase(PodGroupPhase::Running).min_resources(&[("cpu", "3")]))
        .pod(pod("ns", "r-0").group("r").cpu_mem("2", "2Gi").running_on("n1"))
        .pod_group(pod_group("ns", "i", 1).queue("q1").min_resources(&[("cpu", "4")]))
        .pod_group(pending("ns", "p5", "5"))
        .pod_group(pending("ns", "p1", "1"))
        .pod_group(pod_group("ns", "free", 1).queue("q1").phase(PodGroupPhase::Pending))
        .snapshot()
}

#[test]
fn idle_and_inqueue_at_open() {
    let snap = cluster();
    let p = open(&snap, 1.2);
    // 10 cpu × 1.2 − 2 used.
    assert_eq!(p.idle().milli_cpu, 10_000.0);
    assert_eq!(p.idle().get("pods"), 131.0);
    // 4 (Inqueue i) + 1 (Running r: 3 − 2 allocated).
    assert_eq!(p.inqueue().milli_cpu, 5_000.0);
}

#[test]
fn admission_until_the_overcommitted_cluster_is_full() {
    let snap = cluster();
    let mut p = open(&snap, 1.2);
    let (p5, p1, free) = (job(&snap, "ns/p5"), job(&snap, "ns/p1"), job(&snap, "ns/free"));
    // 5 + 5 = 10 ≤ 10.
    assert_eq!(p.job_enqueueable(&snap, p5), Admission::Permit);
    p.job_enqueued(&snap, p5);
    assert_eq!(p.inqueue().milli_cpu, 10_000.0);
    // 10 + 1 > 10.
    let Admission::Reject(why) = p.job_enqueueable(&snap, p1) else { panic!("p1 is rejected") };
    assert_eq!(
        why,
        "resource in cluster is overused: overused cpu; the cluster's room (allocatable × overcommit factor 1.2 \
         − used): cpu: the job needs 1, 0 of 10 left (10 reserved for admitted jobs)"
    );
    // No minResources: always admitted, nothing reserved.
    assert_eq!(p.job_enqueueable(&snap, free), Admission::Permit);
    p.job_enqueued(&snap, free);
    assert_eq!(p.inqueue().milli_cpu, 10_000.0);
}

#[test]
fn factor_one_admits_less() {
    let snap = cluster();
    let p = open(&snap, 1.0);
    assert_eq!(p.idle().milli_cpu, 8_000.0);
    // 5 reserved + 5 > 8.
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/p5")).is_reject());
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "ns/p1")), Admission::Permit);
}

#[test]
fn only_requested_dimensions_are_checked() {
    // Memory is overcommitted far beyond idle, but the job asks for cpu only.
    let snap = Objects::new()
        .node(node("n1", "10", "1Gi"))
        .queue(queue("q1"))
        .pod_group(pod_group("ns", "i", 1).queue("q1").min_resources(&[("memory", "100Gi")]))
        .pod_group(pending("ns", "p", "1"))
        .snapshot();
    let p = open(&snap, 1.2);
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "ns/p")), Admission::Permit);
}

fn opt(args: &[(&str, serde_json::Value)]) -> PluginOption {
    let mut o = PluginOption { name: NAME.into(), ..Default::default() };
    for (k, v) in args {
        o.arguments.insert(k.to_string(), v.clone());
    }
    o
}

#[test]
fn overcommit_factor_argument() {
    let parse = |args: &[(&str, serde_json::Value)]| -> Result<f64, ArgsError> {
        Ok(parse_args::<Args>(&opt(args).arguments)?.factor())
    };
    assert_eq!(parse(&[]).unwrap(), 1.2);
    assert_eq!(parse(&[("overcommit-factor", serde_json::json!(1.5))]).unwrap(), 1.5);
    assert_eq!(parse(&[("overcommit-factor", serde_json::json!(2))]).unwrap(), 2.0);
    assert_eq!(parse(&[("overcommit-factor", serde_json::json!(1))]).unwrap(), 1.0);
    // Below 1 falls back to the default.
    assert_eq!(parse(&[("overcommit-factor", serde_json::json!(0.5))]).unwrap(), 1.2);
    assert!(parse(&[("overcommit-factor", serde_json::json!("1.5"))]).is_err());
    let err = parse(&[("overcommit.factor", serde_json::json!(1.5))]).unwrap_err();
    assert!(err.0.contains("overcommit.factor"), "{err}");
}

#[test]
fn factory_builds_with_the_configured_factor() {
    let b = factory(&opt(&[("overcommit-factor", serde_json::json!(1.0))])).unwrap();
    let mut p = b.build();
    assert_eq!(p.name(), NAME);
    assert_eq!(p.hooks(), Hooks::JOB_ENQUEUEABLE | Hooks::JOB_ENQUEUED);
    let snap = cluster();
    p.on_session_open(&snap, &ctx());
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/p5")).is_reject());
    assert!(factory(&opt(&[("overcommit-factor", serde_json::json!(true))])).is_err());
}
