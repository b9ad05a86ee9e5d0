use std::sync::Arc;

use volcano_api::conf::{PluginOption, SchedulerConfiguration};
use volcano_api::crd::{PodGroupPhase, SLA_WAITING_TIME_ANNOTATION};
use volcano_framework::{Admission, PluginEntry, Profile, Session, SessionOptions};
use volcano_testkit::fixtures::session_ctx_at as ctx;
use volcano_testkit::{node, pod_group, Objects};

use super::*;

/// PodGroup creation times used below (seconds since the epoch).
const T0: i64 = 1_700_000_000;

/// Jobs:
/// - `a`: created at T0, waits 1h (annotation), deadline T0 + 3600 s;
/// - `b`: created at T0 + 600 s, waits 30m (legacy annotation), deadline T0 + 2400 s;
/// - `c`: created at T0, no annotation;
/// - `d`: created at T0 − 600 s, no annotation.
fn snapshot() -> Snapshot {
    Objects::new()
        .node(node("n1", "8", "16Gi"))
        .pod_group(
            pod_group("ns", "a", 1)
                .phase(PodGroupPhase::Pending)
                .created(T0)
                .annotation(SLA_WAITING_TIME_ANNOTATION, "1h"),
        )
        .pod_group(
            pod_group("ns", "b", 1)
                .phase(PodGroupPhase::Pending)
                .created(T0 + 600)
                .annotation("sla-waiting-time", "30m"),
        )
        .pod_group(pod_group("ns", "c", 1).phase(PodGroupPhase::Pending).created(T0))
        .pod_group(pod_group("ns", "d", 1).phase(PodGroupPhase::Pending).created(T0 - 600))
        .snapshot()
}

fn open(snap: &Snapshot, global_ms: Option<i64>, now_ms: i64) -> Sla {
    let mut p = Sla::new(global_ms);
    p.on_session_open(snap, &ctx(now_ms));
    p
}

fn job(snap: &Snapshot, name: &str) -> JobId {
    snap.job_id(&format!("ns/{name}")).expect("job exists")
}

#[test]
fn waiting_time_and_deadline_come_from_the_annotation_then_the_argument() {
    let snap = snapshot();
    let p = open(&snap, None, 0);
    assert_eq!(p.waiting_time_ms(snap.job(job(&snap, "a"))), Some(3_600_000));
    assert_eq!(p.deadline_ms(snap.job(job(&snap, "a"))), Some((T0 + 3600) * 1000));
    assert_eq!(p.deadline_ms(snap.job(job(&snap, "b"))), Some((T0 + 2400) * 1000));
    assert_eq!(p.waiting_time_ms(snap.job(job(&snap, "c"))), None);
    let p = open(&snap, Some(7_200_000), 0);
    // The job's own waiting time wins over the global one.
    assert_eq!(p.waiting_time_ms(snap.job(job(&snap, "a"))), Some(3_600_000));
    assert_eq!(p.deadline_ms(snap.job(job(&snap, "c"))), Some((T0 + 7200) * 1000));
}

#[test]
fn job_order_puts_jobs_with_a_waiting_time_first_earliest_deadline_first() {
    let snap = snapshot();
    let p = open(&snap, None, 0);
    let (a, b, c, d) = (job(&snap, "a"), job(&snap, "b"), job(&snap, "c"), job(&snap, "d"));
    // b's deadline (T0 + 40m) is before a's (T0 + 1h), although b is younger.
    assert_eq!(p.job_order(&snap, b, a), Ordering::Less);
    assert_eq!(p.job_order(&snap, a, b), Ordering::Greater);
    assert_eq!(p.job_order(&snap, a, c), Ordering::Less);
    assert_eq!(p.job_order(&snap, c, a), Ordering::Greater);
    // Neither has a waiting time: the plugin abstains (the fallback orders by age).
    assert_eq!(p.job_order(&snap, c, d), Ordering::Equal);
    assert_eq!(p.job_order(&snap, a, a), Ordering::Equal);
    // With a global waiting time of 1h, d (created 10 min before c) is due first.
    let p = open(&snap, Some(3_600_000), 0);
    assert_eq!(p.job_order(&snap, d, c), Ordering::Less);
    assert_eq!(p.job_order(&snap, c, a), Ordering::Equal);
}

#[test]
fn enqueue_and_pipeline_are_forced_once_the_waiting_time_is_over() {
    let snap = snapshot();
    let a = job(&snap, "a");
    let c = job(&snap, "c");
    // 59 minutes 59 seconds after creation: still waiting.
    let p = open(&snap, None, (T0 + 3599) * 1000);
    assert_eq!(p.job_enqueueable(&snap, a), Admission::Abstain);
    assert_eq!(p.job_pipelined(&snap, a), Vote::Abstain);
    // Exactly one hour: due.
    let p = open(&snap, None, (T0 + 3600) * 1000);
    assert_eq!(p.job_enqueueable(&snap, a), Admission::Permit);
    assert_eq!(p.job_pipelined(&snap, a), Vote::Permit);
    // No waiting time: always abstain.
    let p = open(&snap, None, (T0 + 86_400) * 1000);
    assert_eq!(p.job_enqueueable(&snap, c), Admission::Abstain);
    assert_eq!(p.job_pipelined(&snap, c), Vote::Abstain);
    // A global waiting time applies to c.
    let p = open(&snap, Some(60_000), (T0 + 60) * 1000);
    assert_eq!(p.job_enqueueable(&snap, c), Admission::Permit);
}

#[test]
fn non_positive_annotations_are_ignored() {
    let snap = Objects::new()
        .node(node("n1", "8", "16Gi"))
        .pod_group(pod_group("ns", "z", 1).annotation(SLA_WAITING_TIME_ANNOTATION, "0s"))
        .pod_group(pod_group("ns", "bad", 1).annotation(SLA_WAITING_TIME_ANNOTATION, "soon"))
        .snapshot();
    let p = open(&snap, None, i64::MAX / 2);
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "z")), Admission::Abstain);
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "bad")), Admission::Abstain);
    let p = open(&snap, Some(1000), i64::MAX / 2);
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "z")), Admission::Permit);
}

fn option(value: serde_json::Value) -> PluginOption {
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert(WAITING_TIME_KEY.into(), value);
    opt
}

#[test]
fn factory_parses_the_global_waiting_time() {
    assert!(factory(&PluginOption { name: NAME.into(), ..Default::default() }).is_ok());
    let args: Args = parse_args(&option(serde_json::json!("1h30m")).arguments).unwrap();
    assert_eq!(args.waiting_time_ms(), Ok(Some(5_400_000)));
    assert!(factory(&option(serde_json::json!("1h2m3s4ms"))).is_ok());
    for bad in [serde_json::json!("90"), serde_json::json!("soon"), serde_json::json!("0s"), serde_json::json!(5)] {
        let err = factory(&option(bad.clone())).err().unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(err.0.contains(WAITING_TIME_KEY), "{err}");
    }
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("sla.waiting-time".into(), serde_json::json!("1h"));
    assert!(factory(&opt).is_err());
}

fn entry(name: &str, builder: Arc<dyn PluginBuilder>) -> PluginEntry {
    PluginEntry { name: name.into(), enabled: Hooks::all(), hierarchy: false, builder }
}

#[test]
fn a_due_job_is_pipelined_even_when_a_later_tier_rejects_it() {
    // Tier 1: sla (10 minutes). Tier 2: gang, which rejects a job with nothing placed.
    let sla = option(serde_json::json!("10m"));
    let gang = PluginOption { name: crate::gang::NAME.into(), ..Default::default() };
    let profile = Profile {
        actions: Vec::new(),
        tiers: vec![
            vec![entry(NAME, factory(&sla).unwrap())],
            vec![entry(crate::gang::NAME, crate::gang::factory(&gang).unwrap())],
        ],
        conf: SchedulerConfiguration::default(),
    };
    let snap = snapshot();
    let c = job(&snap, "c");
    // 9m59s after creation sla abstains and gang decides.
    let early = Session::open(snap.clone(), profile.instantiate(), ctx((T0 + 599) * 1000), SessionOptions::default());
    assert!(!early.job_pipelined(c));
    // 10 minutes: sla permits in the first tier, which decides.
    let late = Session::open(snap, profile.instantiate(), ctx((T0 + 600) * 1000), SessionOptions::default());
    assert!(late.job_pipelined(c));
    assert!(late.job_enqueueable(c));
}
