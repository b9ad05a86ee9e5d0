use std::sync::Arc;

use k8s_openapi::api::core::v1::PodSchedulingGate;
use volcano_api::conf::{PluginOption, SchedulerConfiguration};
use volcano_api::crd::{PodGroupPhase, QueueState};
use volcano_framework::{
    run_cycle, Admission, CloseOutput, CycleContext, Hooks, NoObserver, NodeId, Plugin, PluginEntry, Profile, Session,
    SessionOptions, Snapshot, Statement, TaskId, TaskStatus,
};
use volcano_testkit::{node, pod, pod_group, queue, Objects, QueueBuilder};

use super::*;
use volcano_testkit::fixtures::{gpus, job_id as job, queue_id as q, session_ctx as ctx, task_id as task};

const GI: f64 = 1024.0 * 1024.0 * 1024.0;

/// Two nodes of 32 cpu, 128Gi, 8 GPUs: 16 GPUs in all.
fn gpu_cluster() -> Objects {
    Objects::new().node(node("n1", "32", "128Gi").gpu("8")).node(node("n2", "32", "128Gi").gpu("8"))
}

/// A job `ns/<name>` in `queue` with `running` 1-GPU pods on `n1` and `pending` 1-GPU pods.
fn gpu_job(o: Objects, q: &str, name: &str, running: usize, pending: usize) -> Objects {
    gpu_job_on(o, q, name, "n1", running, pending)
}

/// Like [`gpu_job`], running on `node`.
fn gpu_job_on(o: Objects, q: &str, name: &str, node: &str, running: usize, pending: usize) -> Objects {
    let mut o = o.pod_group(pod_group("ns", name, 1).queue(q));
    for i in 0..running + pending {
        let p = pod("ns", &format!("{name}-t-{i}")).group(name).cpu_mem("1", "1Gi").gpu("1");
        o = o.pod(if i < running { p.running_on(node) } else { p });
    }
    o
}

fn open(snap: &Snapshot) -> Proportion {
    let mut p = Proportion::new(Args {});
    p.on_session_open(snap, &ctx());
    p
}

fn deserved_gpus(p: &Proportion, snap: &Snapshot, name: &str) -> f64 {
    gpus(&p.account(q(snap, name)).expect("active queue").deserved)
}

/// Places a pending task as the allocate action would, then fires the event.
fn allocate(snap: &mut Snapshot, p: &mut Proportion, t: TaskId, n: NodeId) {
    snap.set_task_status(t, TaskStatus::Allocated);
    snap.tasks[t.idx()].node = Some(n);
    snap.node_add_task(n, t);
    p.on_allocate(snap, t);
}

#[test]
fn deserved_follows_weights() {
    let snap = gpu_job(
        gpu_job(gpu_cluster().queue(queue("q1").weight(1)).queue(queue("q3").weight(3)), "q1", "a", 0, 16),
        "q3",
        "b",
        0,
        16,
    )
    .snapshot();
    let p = open(&snap);
    let a1 = p.account(q(&snap, "q1")).unwrap();
    let a3 = p.account(q(&snap, "q3")).unwrap();
    assert_eq!(gpus(&a1.deserved), 4.0);
    assert_eq!(gpus(&a3.deserved), 12.0);
    // cpu, memory and pods are capped by the request (16 pods of 1 cpu / 1Gi each).
    assert_eq!(a1.deserved.milli_cpu, 16_000.0);
    assert_eq!(a3.deserved.memory, 16.0 * GI);
    assert_eq!(a1.deserved.get("pods"), 16.0);
    assert_eq!(gpus(&a1.request), 16.0);
    assert_eq!(a1.share, 0.0);
    // The default queue has no job: no attributes.
    assert!(p.account(q(&snap, "default")).is_none());
}

#[test]
fn capability_caps_deserved_and_the_rest_goes_to_the_other_queue() {
    let snap = gpu_job(
        gpu_job(
            gpu_cluster().queue(queue("q1").capability(&[("nvidia.com/gpu", "2")])).queue(queue("q2")),
            "q1",
            "a",
            0,
            16,
        ),
        "q2",
        "b",
        0,
        16,
    )
    .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 2.0);
    assert_eq!(deserved_gpus(&p, &snap, "q2"), 14.0);
    let a1 = p.account(q(&snap, "q1")).unwrap();
    // cpu/memory absent from the capability are unlimited: the real capability keeps the cluster's.
    assert_eq!(gpus(&a1.real_capability), 2.0);
    assert_eq!(a1.real_capability.milli_cpu, 64_000.0);
    assert_eq!(p.attr(q(&snap, "q1")).unwrap().capability.as_ref().unwrap().milli_cpu, f64::MAX);
}

#[test]
fn guarantee_raises_deserved_and_shrinks_the_others_real_capability() {
    let snap = gpu_job(
        gpu_job(
            gpu_cluster()
                .queue(queue("q1").weight(1).guarantee(&[("nvidia.com/gpu", "6")]))
                .queue(queue("q2").weight(3)),
            "q1",
            "a",
            0,
            16,
        ),
        "q2",
        "b",
        0,
        16,
    )
    .snapshot();
    let p = open(&snap);
    // Weight alone would give 4 and 12.
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 6.0);
    assert_eq!(deserved_gpus(&p, &snap, "q2"), 10.0);
    assert_eq!(gpus(&p.account(q(&snap, "q1")).unwrap().real_capability), 16.0);
    assert_eq!(gpus(&p.account(q(&snap, "q2")).unwrap().real_capability), 10.0);
}

#[test]
fn request_caps_deserved_and_the_surplus_is_redistributed() {
    let snap = gpu_job(gpu_job(gpu_cluster().queue(queue("q1")).queue(queue("q2")), "q1", "a", 0, 2), "q2", "b", 0, 16)
        .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 2.0);
    assert_eq!(deserved_gpus(&p, &snap, "q2"), 14.0);
}

#[test]
fn deserved_ignores_spec_deserved_like_volcano() {
    // Volcano issue #5814: proportion derives deserved from weights only.
    let snap = gpu_job(
        gpu_job(
            gpu_cluster().queue(queue("q1").deserved(&[("nvidia.com/gpu", "12")])).queue(queue("q2")),
            "q1",
            "a",
            0,
            16,
        ),
        "q2",
        "b",
        0,
        16,
    )
    .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 8.0);
    assert_eq!(deserved_gpus(&p, &snap, "q2"), 8.0);
}

#[test]
fn zero_weight_queue_gets_nothing_beyond_its_guarantee() {
    let snap = gpu_job(
        gpu_job(
            gpu_cluster().queue(queue("q0").weight(0).guarantee(&[("nvidia.com/gpu", "1")])).queue(queue("q1")),
            "q0",
            "a",
            0,
            16,
        ),
        "q1",
        "b",
        0,
        16,
    )
    .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q0"), 1.0);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 15.0);
}

#[test]
fn water_fill_with_no_active_queue_is_a_no_op() {
    let mut attrs = vec![QueueAttr::default(); 3];
    water_fill(&Resource::new(1000.0, 1000.0), &mut attrs);
    assert!(attrs.iter().all(|a| a.account.deserved == Resource::empty()));
}

#[test]
fn queue_without_pending_work_is_overused() {
    let snap = gpu_job(gpu_job(gpu_cluster().queue(queue("q1")).queue(queue("q2")), "q1", "a", 4, 0), "q2", "b", 0, 4)
        .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 4.0);
    assert!(p.overused(&snap, q(&snap, "q1")));
    assert!(!p.overused(&snap, q(&snap, "q2")));
    assert_eq!(p.account(q(&snap, "q1")).unwrap().share, 1.0);
}

fn weights_1_3_with_running() -> Snapshot {
    gpu_job(
        gpu_job(gpu_cluster().queue(queue("q1").weight(1)).queue(queue("q3").weight(3)), "q1", "a", 4, 12),
        "q3",
        "b",
        0,
        16,
    )
    .snapshot()
}

#[test]
fn allocatable_refuses_past_deserved_and_follows_events() {
    let mut snap = weights_1_3_with_running();
    let mut p = open(&snap);
    let (q1, q3) = (q(&snap, "q1"), q(&snap, "q3"));
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 4.0);
    assert_eq!(deserved_gpus(&p, &snap, "q3"), 12.0);
    // q1 already holds its 4 GPUs.
    assert!(!p.allocatable(&snap, q1, task(&snap, "ns/a-t-4")));
    assert!(!p.preemptive(&snap, q1, task(&snap, "ns/a-t-4")));
    // q3 can take 12 one-GPU tasks, not a 13th.
    let n2 = snap.node_id("n2").unwrap();
    let n1 = snap.node_id("n1").unwrap();
    for i in 0..12 {
        let t = task(&snap, &format!("ns/b-t-{i}"));
        assert!(p.allocatable(&snap, q3, t), "task {i}");
        allocate(&mut snap, &mut p, t, if i < 8 { n2 } else { n1 });
    }
    let a3 = p.account(q3).unwrap();
    assert_eq!(gpus(&a3.allocated), 12.0);
    assert_eq!(a3.share, 1.0);
    assert!(!p.allocatable(&snap, q3, task(&snap, "ns/b-t-12")));
    // At deserved on GPUs but not on cpu: not overused (every deserved dimension counts).
    assert!(!p.overused(&snap, q3));
    // Evicting one gives room again.
    let t = task(&snap, "ns/b-t-0");
    snap.set_task_status(t, TaskStatus::Releasing);
    p.on_deallocate(&snap, t);
    assert_eq!(gpus(&p.account(q3).unwrap().allocated), 11.0);
    assert!(p.allocatable(&snap, q3, task(&snap, "ns/b-t-12")));
}

#[test]
fn allocatable_only_checks_requested_dimensions() {
    // A cpu-only task is not blocked by the queue's GPUs being at deserved.
    let snap = gpu_job(gpu_cluster().queue(queue("q1")), "q1", "a", 4, 0)
        .pod(pod("ns", "a-cpu-0").group("a").cpu_mem("1", "1Gi"))
        .snapshot();
    let p = open(&snap);
    let q1 = q(&snap, "q1");
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 4.0);
    assert!(p.allocatable(&snap, q1, task(&snap, "ns/a-cpu-0")));
}

#[test]
fn closed_queue_allocates_nothing() {
    let snap = gpu_job(gpu_cluster().queue(queue("q1").state(QueueState::Closed)), "q1", "a", 0, 2).snapshot();
    let p = open(&snap);
    assert!(!p.allocatable(&snap, q(&snap, "q1"), task(&snap, "ns/a-t-0")));
}

#[test]
fn queue_order_priority_then_share() {
    let mut snap = gpu_job(
        gpu_job(
            gpu_job(
                gpu_cluster().queue(queue("qa")).queue(queue("qb")).queue(queue("qc").priority(5)),
                "qa",
                "a",
                0,
                8,
            ),
            "qb",
            "b",
            0,
            8,
        ),
        "qc",
        "c",
        0,
        8,
    )
    .snapshot();
    let mut p = open(&snap);
    let (qa, qb, qc) = (q(&snap, "qa"), q(&snap, "qb"), q(&snap, "qc"));
    assert_eq!(p.queue_order(&snap, qa, qb), Ordering::Equal);
    let n1 = snap.node_id("n1").unwrap();
    let t = task(&snap, "ns/a-t-0");
    allocate(&mut snap, &mut p, t, n1);
    assert!(p.account(qa).unwrap().share > 0.0);
    assert_eq!(p.queue_order(&snap, qb, qa), Ordering::Less);
    assert_eq!(p.queue_order(&snap, qa, qb), Ordering::Greater);
    // Higher priority wins whatever the share.
    let t = task(&snap, "ns/c-t-0");
    allocate(&mut snap, &mut p, t, n1);
    let t = task(&snap, "ns/c-t-1");
    allocate(&mut snap, &mut p, t, n1);
    assert_eq!(p.queue_order(&snap, qc, qb), Ordering::Less);
    assert_eq!(p.queue_order(&snap, qb, qc), Ordering::Greater);
}

#[test]
fn reclaimable_takes_victims_while_the_queue_is_above_deserved() {
    // q1 (weight 1, deserved 4) runs 8 GPUs; q3 (weight 3) runs 2 and wants more.
    let snap = gpu_job_on(
        gpu_job(gpu_cluster().queue(queue("q1").weight(1)).queue(queue("q3").weight(3)), "q1", "a", 8, 8),
        "q3",
        "b",
        "n2",
        2,
        14,
    )
    .snapshot();
    let p = open(&snap);
    assert_eq!(deserved_gpus(&p, &snap, "q1"), 4.0);
    assert_eq!(deserved_gpus(&p, &snap, "q3"), 12.0);
    let mut candidates: Vec<TaskId> = (0..8).map(|i| task(&snap, &format!("ns/a-t-{i}"))).collect();
    candidates.insert(2, task(&snap, "ns/b-t-0"));
    let reclaimer = task(&snap, "ns/b-t-5");
    let victims = p.reclaimable(&snap, reclaimer, &candidates).unwrap();
    let expected: Vec<TaskId> = (0..4).map(|i| task(&snap, &format!("ns/a-t-{i}"))).collect();
    assert_eq!(victims, expected);
}

#[test]
fn reclaimable_returns_an_empty_list_when_every_queue_is_within_deserved() {
    let snap = gpu_job(gpu_job(gpu_cluster().queue(queue("q1")).queue(queue("q2")), "q1", "a", 2, 8), "q2", "b", 0, 8)
        .snapshot();
    let p = open(&snap);
    let candidates = [task(&snap, "ns/a-t-0"), task(&snap, "ns/a-t-1")];
    assert_eq!(p.reclaimable(&snap, task(&snap, "ns/b-t-0"), &candidates), Some(vec![]));
}

/// A queue of 4 GPUs capability on the 16-GPU cluster.
fn quota_queue() -> QueueBuilder {
    queue("q1").capability(&[("nvidia.com/gpu", "4")])
}

#[test]
fn admission_accounts_inqueue_and_rejects_beyond_real_capability() {
    let snap = gpu_cluster()
        .queue(quota_queue())
        .pod_group(
            pod_group("ns", "a", 1).queue("q1").phase(PodGroupPhase::Pending).min_resources(&[("nvidia.com/gpu", "3")]),
        )
        .pod_group(
            pod_group("ns", "b", 1).queue("q1").phase(PodGroupPhase::Pending).min_resources(&[("nvidia.com/gpu", "2")]),
        )
        .pod_group(
            pod_group("ns", "c", 1).queue("q1").phase(PodGroupPhase::Pending).min_resources(&[("nvidia.com/gpu", "1")]),
        )
        .pod_group(pod_group("ns", "free", 1).queue("q1").phase(PodGroupPhase::Pending))
        .snapshot();
    let mut p = open(&snap);
    let (a, b, c, free) = (job(&snap, "ns/a"), job(&snap, "ns/b"), job(&snap, "ns/c"), job(&snap, "ns/free"));
    assert_eq!(p.job_enqueueable(&snap, a), Admission::Permit);
    p.job_enqueued(&snap, a);
    assert_eq!(gpus(&p.account(q(&snap, "q1")).unwrap().inqueue), 3.0);
    // 3 reserved + 2 > 4.
    let Admission::Reject(why) = p.job_enqueueable(&snap, b) else { panic!("b is rejected") };
    assert_eq!(
        why,
        "queue resource quota insufficient: insufficient nvidia.com/gpu; queue q1: nvidia.com/gpu: the job needs 2, \
         1 of 4 left (0 allocated, 3 reserved for admitted jobs, 0 elastic give back)"
    );
    // 3 reserved + 1 = 4.
    assert_eq!(p.job_enqueueable(&snap, c), Admission::Permit);
    p.job_enqueued(&snap, c);
    // No minResources: always admitted.
    assert_eq!(p.job_enqueueable(&snap, free), Admission::Permit);
    p.job_enqueued(&snap, free);
    assert_eq!(gpus(&p.account(q(&snap, "q1")).unwrap().inqueue), 4.0);

    let mut out = CloseOutput::default();
    p.on_session_close(&snap, &ctx(), &mut out);
    assert!(out.job_events.is_empty(), "admission events are the session's");
    assert_eq!(out.queue_reports.len(), 1);
    assert_eq!(out.queue_reports[0].0, q(&snap, "q1"));
}

#[test]
fn admission_counts_inqueue_running_reservations_and_elastic() {
    let snap = gpu_cluster()
        .queue(queue("q1").capability(&[("nvidia.com/gpu", "8")]))
        // Running, 3 of minMember 2 allocated: 1 GPU elastic, nothing left to reserve.
        .pod_group(
            pod_group("ns", "r", 2).queue("q1").phase(PodGroupPhase::Running).min_resources(&[("nvidia.com/gpu", "2")]),
        )
        .pod(pod("ns", "r-t-0").group("r").gpu("1").running_on("n1"))
        .pod(pod("ns", "r-t-1").group("r").gpu("1").running_on("n1"))
        .pod(pod("ns", "r-t-2").group("r").gpu("1").running_on("n1"))
        // Running with minMember 2 reached, minResources 3: 1 GPU still reserved.
        .pod_group(
            pod_group("ns", "s", 2).queue("q1").phase(PodGroupPhase::Running).min_resources(&[("nvidia.com/gpu", "3")]),
        )
        .pod(pod("ns", "s-t-0").group("s").gpu("1").running_on("n2"))
        .pod(pod("ns", "s-t-1").group("s").gpu("1").running_on("n2"))
        // Inqueue, nothing allocated: its whole minimum is reserved.
        .pod_group(pod_group("ns", "i", 1).queue("q1").min_resources(&[("nvidia.com/gpu", "2")]))
        .pod_group(
            pod_group("ns", "p4", 1)
                .queue("q1")
                .phase(PodGroupPhase::Pending)
                .min_resources(&[("nvidia.com/gpu", "1")]),
        )
        .pod_group(
            pod_group("ns", "p5", 1)
                .queue("q1")
                .phase(PodGroupPhase::Pending)
                .min_resources(&[("nvidia.com/gpu", "2")]),
        )
        .snapshot();
    let p = open(&snap);
    let attr = p.account(q(&snap, "q1")).unwrap();
    assert_eq!(gpus(&attr.allocated), 5.0);
    assert_eq!(gpus(&attr.inqueue), 3.0);
    assert_eq!(gpus(&attr.elastic), 1.0);
    // 1 + 5 allocated + 3 inqueue − 1 elastic = 8 ≤ 8.
    assert_eq!(p.job_enqueueable(&snap, job(&snap, "ns/p4")), Admission::Permit);
    // 2 + 5 + 3 − 1 = 9 > 8.
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/p5")).is_reject());
}

#[test]
fn scheduling_gated_pods_do_not_reserve_except_behind_the_queue_gate() {
    fn gate(name: &str) -> impl FnOnce(&mut k8s_openapi::api::core::v1::PodSpec) + '_ {
        move |s| s.scheduling_gates = Some(vec![PodSchedulingGate { name: name.to_string() }])
    }
    let snap = gpu_cluster()
        .queue(queue("q1"))
        .pod_group(pod_group("ns", "g", 1).queue("q1").min_resources(&[("nvidia.com/gpu", "3")]))
        .pod(pod("ns", "g-t-0").group("g").gpu("1").with_spec(gate("example.com/wait")))
        .pod(pod("ns", "g-t-1").group("g").gpu("1").with_spec(gate(reserve::QUEUE_ALLOCATION_GATE)))
        .pod(pod("ns", "g-t-2").group("g").gpu("1"))
        .snapshot();
    let p = open(&snap);
    assert_eq!(gpus(&p.account(q(&snap, "q1")).unwrap().inqueue), 2.0);
}

#[test]
fn closed_queue_rejects_admission_without_event() {
    let snap = gpu_cluster()
        .queue(queue("q1").state(QueueState::Closed))
        .pod_group(pod_group("ns", "a", 1).queue("q1").phase(PodGroupPhase::Pending))
        .snapshot();
    let mut p = open(&snap);
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/a")).is_reject());
    let mut out = CloseOutput::default();
    p.on_session_close(&snap, &ctx(), &mut out);
    assert!(out.job_events.is_empty());
}

#[test]
fn admission_rejects_a_resource_the_cluster_lacks() {
    // No GPU anywhere: the real capability has no GPU dimension, which counts as 0.
    let snap = Objects::new()
        .node(node("n1", "8", "16Gi"))
        .queue(queue("q1"))
        .pod_group(
            pod_group("ns", "a", 1)
                .queue("q1")
                .phase(PodGroupPhase::Pending)
                .min_resources(&[("nvidia.com/gpu", "1"), ("cpu", "1")]),
        )
        .snapshot();
    let p = open(&snap);
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/a")).is_reject());
}

#[test]
fn rejections_name_every_short_resource() {
    let snap = gpu_cluster()
        .queue(quota_queue())
        .pod_group(
            pod_group("ns", "x", 1).queue("q1").phase(PodGroupPhase::Pending).min_resources(&[("nvidia.com/gpu", "5")]),
        )
        .pod_group(
            pod_group("ns", "y", 1)
                .queue("q1")
                .phase(PodGroupPhase::Pending)
                .min_resources(&[("nvidia.com/gpu", "6"), ("cpu", "100")]),
        )
        .snapshot();
    let p = open(&snap);
    let (x, y) = (job(&snap, "ns/x"), job(&snap, "ns/y"));
    let why = |j| match p.job_enqueueable(&snap, j) {
        Admission::Reject(why) => why,
        other => panic!("{other:?}"),
    };
    assert!(why(x).starts_with("queue resource quota insufficient: insufficient nvidia.com/gpu; queue q1: "));
    assert!(why(y).starts_with("queue resource quota insufficient: insufficient cpu, insufficient nvidia.com/gpu; "));
    assert!(why(y).contains("cpu: the job needs 100, "), "{}", why(y));
}

#[test]
fn factory_rejects_unknown_arguments() {
    assert!(factory(&PluginOption { name: NAME.into(), ..Default::default() }).is_ok());
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("proportion.weight".into(), serde_json::json!(1));
    let err = factory(&opt).err().expect("unknown key rejected");
    assert!(err.0.contains("proportion.weight"), "{err}");
}

fn profile() -> Profile {
    let opt = PluginOption { name: NAME.into(), ..Default::default() };
    Profile {
        actions: Vec::new(),
        tiers: vec![vec![PluginEntry {
            name: NAME.into(),
            enabled: Hooks::all(),
            hierarchy: false,
            builder: factory(&opt).unwrap(),
        }]],
        conf: SchedulerConfiguration::default(),
    }
}

#[test]
fn session_events_keep_allocatable_in_step_with_statements() {
    let snap = weights_1_3_with_running();
    let profile = profile();
    let mut ssn = Session::open(snap, profile.instantiate(), ctx(), SessionOptions::default());
    let q3 = ssn.snap.queue_id("q3").unwrap();
    let n2 = ssn.snap.node_id("n2").unwrap();
    let mut stmt = Statement::new();
    for i in 0..8 {
        let t = task(&ssn.snap, &format!("ns/b-t-{i}"));
        assert!(ssn.allocatable(q3, t));
        stmt.allocate(&mut ssn, t, n2);
    }
    let n1 = ssn.snap.node_id("n1").unwrap();
    for i in 8..12 {
        let t = task(&ssn.snap, &format!("ns/b-t-{i}"));
        assert!(ssn.allocatable(q3, t));
        stmt.allocate(&mut ssn, t, n1);
    }
    let next = task(&ssn.snap, "ns/b-t-12");
    assert!(!ssn.allocatable(q3, next));
    // Undoing the statement fires the deallocate events.
    stmt.discard(&mut ssn);
    assert!(ssn.allocatable(q3, next));
}

#[test]
fn cycle_reports_deserved_and_share_per_active_queue() {
    let snap = weights_1_3_with_running();
    let profile = profile();
    let cx = CycleContext { cycle: 1, now_ms: 0, options: SessionOptions::default() };
    let outcome = run_cycle(snap, &profile, &cx, &mut NoObserver);
    let q1 = &outcome.queues["q1"];
    assert_eq!(q1.deserved.as_ref().map(gpus), Some(4.0));
    assert_eq!(q1.share, Some(1.0));
    assert_eq!(gpus(&q1.allocated), 4.0);
    let q3 = &outcome.queues["q3"];
    assert_eq!(q3.deserved.as_ref().map(gpus), Some(12.0));
    assert_eq!(q3.share, Some(0.0));
    assert_eq!(outcome.queues["default"].deserved, None);
}

#[test]
fn builder_makes_fresh_state_per_session() {
    let opt = PluginOption { name: NAME.into(), ..Default::default() };
    let b: Arc<dyn volcano_framework::PluginBuilder> = factory(&opt).unwrap();
    let p = b.build();
    assert_eq!(p.name(), NAME);
    assert!(p.hooks().contains(Hooks::QUEUE_ORDER | Hooks::EVENT_HANDLER | Hooks::JOB_ENQUEUEABLE));
    assert!(!p.hooks().contains(Hooks::PRE_PREDICATE));
}
