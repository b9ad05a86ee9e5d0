use volcano_api::conf::{PluginOption, SchedulerConfiguration};
use volcano_framework::resource::NVIDIA_GPU;
use volcano_framework::{
    Hooks, JobId, PluginEntry, Profile, Session, SessionContext, SessionOptions, Snapshot, Statement, TaskId,
    TaskStatus,
};
use volcano_testkit::{node, pod, pod_group, queue, Objects};

use super::*;

fn ctx() -> SessionContext {
    SessionContext { now_ms: 0, cycle: 1, uid: "session-1".into(), enqueue_enabled: true }
}

fn open(snap: &Snapshot) -> Drf {
    let mut p = Drf::new(Args {});
    p.on_session_open(snap, &ctx());
    p
}

fn job(snap: &Snapshot, key: &str) -> JobId {
    snap.job_id(key).expect("job exists")
}

fn task(snap: &Snapshot, key: &str) -> TaskId {
    TaskId(snap.tasks.iter().position(|t| t.key == key).expect("task exists") as u32)
}

/// One node of 16 cpu / 64Gi / 110 pods.
/// Job a: two running 4cpu/1Gi tasks (cpu share 8/16 = 0.5).
/// Job b: one running 1cpu/16Gi task (memory share 16/64 = 0.25), one pending 2cpu/24Gi.
/// Job c: one pending 1cpu/1Gi task (share 0).
/// Job d: one running 2cpu/1Gi task, one pending 2cpu/1Gi (share 2/16 = 0.125).
fn cluster() -> Snapshot {
    Objects::new()
        .node(node("n1", "16", "64Gi"))
        .queue(queue("q1"))
        .pod_group(pod_group("ns", "a", 1).queue("q1"))
        .pod(pod("ns", "a-0").group("a").cpu_mem("4", "1Gi").running_on("n1"))
        .pod(pod("ns", "a-1").group("a").cpu_mem("4", "1Gi").running_on("n1"))
        .pod_group(pod_group("ns", "b", 1).queue("q1"))
        .pod(pod("ns", "b-0").group("b").cpu_mem("1", "16Gi").running_on("n1"))
        .pod(pod("ns", "b-1").group("b").cpu_mem("2", "24Gi"))
        .pod_group(pod_group("ns", "c", 1).queue("q1"))
        .pod(pod("ns", "c-0").group("c").cpu_mem("1", "1Gi"))
        .pod_group(pod_group("ns", "d", 1).queue("q1"))
        .pod(pod("ns", "d-0").group("d").cpu_mem("2", "1Gi").running_on("n1"))
        .pod(pod("ns", "d-1").group("d").cpu_mem("2", "1Gi"))
        .pod(pod("ns", "lonely").cpu_mem("1", "1Gi"))
        .snapshot()
}

#[test]
fn initial_shares_are_dominant_shares() {
    let snap = cluster();
    let p = open(&snap);
    assert_eq!(p.job_share(job(&snap, "ns/a")), 0.5);
    assert_eq!(p.job_share(job(&snap, "ns/b")), 0.25);
    assert_eq!(p.job_share(job(&snap, "ns/c")), 0.0);
    assert_eq!(p.job_share(job(&snap, "ns/d")), 0.125);
}

#[test]
fn job_order_prefers_lower_share_and_follows_events() {
    let mut snap = cluster();
    let mut p = open(&snap);
    let (a, b, c) = (job(&snap, "ns/a"), job(&snap, "ns/b"), job(&snap, "ns/c"));
    assert_eq!(p.job_order(&snap, c, b), Ordering::Less);
    assert_eq!(p.job_order(&snap, b, a), Ordering::Less);
    assert_eq!(p.job_order(&snap, a, b), Ordering::Greater);
    assert_eq!(p.job_order(&snap, a, a), Ordering::Equal);

    // b gets its 2cpu/24Gi task: memory 40/64 = 0.625 > a's 0.5.
    let t = task(&snap, "ns/b-1");
    snap.set_task_status(t, TaskStatus::Allocated);
    p.on_allocate(&snap, t);
    assert_eq!(p.job_share(b), 0.625);
    assert_eq!(p.job_order(&snap, a, b), Ordering::Less);

    // Evicted again: back to 0.25.
    snap.set_task_status(t, TaskStatus::Releasing);
    p.on_deallocate(&snap, t);
    assert_eq!(p.job_share(b), 0.25);
    assert_eq!(p.job_order(&snap, b, a), Ordering::Less);
}

#[test]
fn tasks_without_a_job_are_ignored() {
    let snap = cluster();
    let mut p = open(&snap);
    let before = p.shares.clone();
    p.on_allocate(&snap, task(&snap, "ns/lonely"));
    assert_eq!(p.shares, before);
    assert_eq!(p.preemptable(&snap, task(&snap, "ns/lonely"), &[task(&snap, "ns/a-0")]), Some(vec![]));
}

#[test]
fn preemptable_keeps_victims_whose_job_stays_at_least_as_served() {
    let snap = cluster();
    let p = open(&snap);
    // c + 1cpu: 1/16 = 0.0625. a − 4cpu: 0.25 → victim; a − 8cpu: 0 → not; b − all: 0 → not.
    let candidates = [task(&snap, "ns/a-0"), task(&snap, "ns/a-1"), task(&snap, "ns/b-0")];
    let victims = p.preemptable(&snap, task(&snap, "ns/c-0"), &candidates);
    assert_eq!(victims, Some(vec![task(&snap, "ns/a-0")]));
}

#[test]
fn preemptable_accepts_equal_shares() {
    let snap = cluster();
    let p = open(&snap);
    // d + 2cpu: 4/16 = 0.25; a − 4cpu: 4/16 = 0.25 → equal within 1e-6 → victim.
    let victims = p.preemptable(&snap, task(&snap, "ns/d-1"), &[task(&snap, "ns/a-0")]);
    assert_eq!(victims, Some(vec![task(&snap, "ns/a-0")]));
    // b + 2cpu/24Gi: 40/64 = 0.625 > a − 4cpu = 0.25 → no victim (an empty vote).
    let victims = p.preemptable(&snap, task(&snap, "ns/b-1"), &[task(&snap, "ns/a-0")]);
    assert_eq!(victims, Some(vec![]));
}

#[test]
fn gpus_and_pods_are_dimensions_of_the_share() {
    let mut o = Objects::new()
        .node(node("n1", "64", "256Gi").gpu("8"))
        .node(node("n2", "64", "256Gi").gpu("8"))
        .queue(queue("q1"))
        .pod_group(pod_group("ns", "g", 1).queue("q1"))
        .pod(pod("ns", "g-0").group("g").cpu_mem("1", "1Gi").gpu("8").running_on("n1"))
        .pod_group(pod_group("ns", "many", 1).queue("q1"));
    // 55 best-effort pods use a quarter of the 220 pod slots.
    for i in 0..55 {
        o = o.pod(pod("ns", &format!("many-x-{i}")).group("many").running_on("n2"));
    }
    let snap = o.snapshot();
    let p = open(&snap);
    assert_eq!(snap.total_resource.get(NVIDIA_GPU), 16_000.0);
    assert_eq!(p.job_share(job(&snap, "ns/g")), 0.5);
    assert_eq!(p.job_share(job(&snap, "ns/many")), 0.25);
}

#[test]
fn factory_rejects_hierarchy_and_unknown_arguments() {
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    assert!(factory(&opt).is_ok());
    opt.enabled_hierarchy = Some(false);
    assert!(factory(&opt).is_ok());
    opt.enabled_hierarchy = Some(true);
    let err = factory(&opt).err().expect("hierarchy rejected");
    assert_eq!(err.0, "drf enableHierarchy (hierarchical DRF) is not implemented yet in volcano-rs");
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("drf.weight".into(), serde_json::json!(2));
    let err = factory(&opt).err().expect("unknown key rejected");
    assert!(err.0.contains("drf.weight"), "{err}");
}

#[test]
fn session_statement_events_reorder_jobs() {
    let opt = PluginOption { name: NAME.into(), ..Default::default() };
    let profile = Profile {
        actions: Vec::new(),
        tiers: vec![vec![PluginEntry {
            name: NAME.into(),
            enabled: Hooks::all(),
            hierarchy: false,
            builder: factory(&opt).unwrap(),
        }]],
        conf: SchedulerConfiguration::default(),
    };
    let mut ssn = Session::open(cluster(), &profile, ctx(), SessionOptions::default());
    let (a, b) = (job(&ssn.snap, "ns/a"), job(&ssn.snap, "ns/b"));
    assert_eq!(ssn.job_order(b, a), Ordering::Less);
    let n1 = ssn.snap.node_id("n1").unwrap();
    let mut stmt = Statement::new();
    let t = task(&ssn.snap, "ns/b-1");
    stmt.allocate(&mut ssn, t, n1);
    assert_eq!(ssn.job_order(a, b), Ordering::Less);
    stmt.discard(&mut ssn);
    assert_eq!(ssn.job_order(b, a), Ordering::Less);
    // Preemptable through the session: one voter, its list decides.
    let victims = ssn.preemptable(task(&ssn.snap, "ns/c-0"), &[task(&ssn.snap, "ns/a-0"), task(&ssn.snap, "ns/a-1")]);
    assert_eq!(victims, vec![task(&ssn.snap, "ns/a-0")]);
}
