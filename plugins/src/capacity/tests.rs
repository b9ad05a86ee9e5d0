use std::sync::Arc;

use volcano_api::conf::{PluginOption, SchedulerConfiguration};
use volcano_api::crd::{PodGroupPhase, QueueState};
use volcano_framework::{
    run_cycle, CycleContext, NoObserver, NodeId, PluginEntry, Profile, Session, SessionOptions, Statement,
};
use volcano_testkit::{node, pod, pod_group, queue, Objects, QueueBuilder};

use super::*;
use volcano_testkit::fixtures::{gpus, job_id as job, queue_id as q, session_ctx as ctx, task_id as task};

const GI: f64 = 1024.0 * 1024.0 * 1024.0;

/// Two nodes of 32 cpu, 128Gi, 8 GPUs: 16 GPUs in all.
fn gpu_cluster() -> Objects {
    Objects::new().node(node("n1", "32", "128Gi").gpu("8")).node(node("n2", "32", "128Gi").gpu("8"))
}

/// A job `ns/<name>` in `queue` with `running` 1-GPU pods on `node` and `pending` 1-GPU pods.
fn gpu_job_on(o: Objects, q: &str, name: &str, node: &str, running: usize, pending: usize) -> Objects {
    let mut o = o.pod_group(pod_group("ns", name, 1).queue(q));
    for i in 0..running + pending {
        let p = pod("ns", &format!("{name}-t-{i}")).group(name).cpu_mem("1", "1Gi").gpu("1");
        o = o.pod(if i < running { p.running_on(node) } else { p });
    }
    o
}

fn gpu_job(o: Objects, q: &str, name: &str, running: usize, pending: usize) -> Objects {
    gpu_job_on(o, q, name, "n1", running, pending)
}

/// Adds a queue with `spec.parent`.
fn child(mut o: Objects, q: QueueBuilder, parent: &str) -> Objects {
    let mut q = q.build();
    q.spec.parent = Some(parent.to_string());
    o.0.queues.push(Arc::new(q));
    o
}

fn open(snap: &Snapshot) -> Capacity {
    open_with(snap, 0, false)
}

fn open_with(snap: &Snapshot, level: usize, hierarchy: bool) -> Capacity {
    let mut p = Capacity::new(level, hierarchy);
    p.on_session_open(snap, &ctx());
    p
}

fn attr<'a>(p: &'a Capacity, snap: &Snapshot, name: &str) -> &'a QueueAttr {
    p.attr(q(snap, name)).expect("active queue")
}

/// Places a pending task as the allocate action would, then fires the event.
fn allocate(snap: &mut Snapshot, p: &mut Capacity, t: TaskId, n: NodeId) {
    snap.set_task_status(t, TaskStatus::Allocated);
    snap.tasks[t.idx()].node = Some(n);
    snap.node_add_task(n, t);
    p.on_allocate(snap, t);
}

fn tasks(snap: &Snapshot, job: &str, range: std::ops::Range<usize>) -> Vec<TaskId> {
    range.map(|i| task(snap, &format!("ns/{job}-t-{i}"))).collect()
}

// ----- attributes -----

#[test]
fn deserved_is_capped_by_real_capability_and_raised_to_guarantee() {
    let snap = gpu_job(
        gpu_job(
            gpu_job(
                gpu_cluster()
                    .queue(queue("q1").deserved(&[("nvidia.com/gpu", "12")]).capability(&[("nvidia.com/gpu", "8")]))
                    .queue(queue("q2").deserved(&[("nvidia.com/gpu", "2")]).guarantee(&[("nvidia.com/gpu", "4")]))
                    .queue(queue("q3")),
                "q1",
                "a",
                0,
                1,
            ),
            "q2",
            "b",
            0,
            1,
        ),
        "q3",
        "c",
        0,
        1,
    )
    .snapshot();
    let p = open(&snap);
    let (a1, a2, a3) = (attr(&p, &snap, "q1"), attr(&p, &snap, "q2"), attr(&p, &snap, "q3"));
    // Real capability: (16 − 4 guaranteed to q2) + own guarantee, capped by capability.
    assert_eq!(gpus(&a1.account.real_capability), 8.0);
    assert_eq!(gpus(&a2.account.real_capability), 16.0);
    assert_eq!(gpus(&a3.account.real_capability), 12.0);
    // cpu is not in the capability: unlimited there, so the cluster's 64 cpu remain.
    assert_eq!(a1.account.real_capability.milli_cpu, 64_000.0);
    assert_eq!(a1.capability.milli_cpu, f64::MAX);
    assert_eq!(gpus(&a1.account.deserved), 8.0);
    assert_eq!(gpus(&a2.account.deserved), 4.0);
    // No deserved: a best-effort queue with share 1.
    assert!(a3.account.deserved.is_empty());
    assert_eq!(a3.account.share, 1.0);
    assert_eq!(a1.account.share, 0.0);
    assert_eq!(gpus(&a1.account.request), 1.0);
    // The default queue has no job: no attributes in flat mode.
    assert!(p.attr(q(&snap, "default")).is_none());
}

#[test]
fn share_is_allocated_over_deserved_on_deserved_dimensions() {
    let snap =
        gpu_job(gpu_cluster().queue(queue("q1").deserved(&[("nvidia.com/gpu", "4"), ("cpu", "16")])), "q1", "a", 3, 0)
            .snapshot();
    let p = open(&snap);
    let a = attr(&p, &snap, "q1");
    assert_eq!(gpus(&a.account.allocated), 3.0);
    // max(3/4 GPUs, 3/16 cpu).
    assert_eq!(a.account.share, 0.75);
}

// ----- allocatable -----

fn borrowing_snapshot() -> Snapshot {
    // q1 deserves 4 GPUs and may use up to 10; q2 deserves 12 and is idle.
    gpu_job(
        gpu_cluster()
            .queue(queue("q1").deserved(&[("nvidia.com/gpu", "4")]).capability(&[("nvidia.com/gpu", "10")]))
            .queue(queue("q2").deserved(&[("nvidia.com/gpu", "12")])),
        "q1",
        "a",
        0,
        16,
    )
    .pod_group(pod_group("ns", "idle", 1).queue("q2"))
    .snapshot()
}

#[test]
fn a_queue_borrows_idle_resources_up_to_its_capability() {
    let mut snap = borrowing_snapshot();
    let mut p = open(&snap);
    let q1 = q(&snap, "q1");
    let (n1, n2) = (snap.node_id("n1").unwrap(), snap.node_id("n2").unwrap());
    for (i, t) in tasks(&snap, "a", 0..10).into_iter().enumerate() {
        assert!(p.allocatable(&snap, q1, t), "task {i}");
        allocate(&mut snap, &mut p, t, if i < 8 { n1 } else { n2 });
    }
    let a = attr(&p, &snap, "q1");
    assert_eq!(gpus(&a.account.allocated), 10.0);
    // 10 of 4 deserved.
    assert_eq!(a.account.share, 2.5);
    // The 11th GPU would pass the capability.
    assert!(!p.allocatable(&snap, q1, task(&snap, "ns/a-t-10")));
    // Releasing one makes room again.
    let t = task(&snap, "ns/a-t-0");
    snap.set_task_status(t, TaskStatus::Releasing);
    p.on_deallocate(&snap, t);
    assert_eq!(gpus(&attr(&p, &snap, "q1").account.allocated), 9.0);
    assert!(p.allocatable(&snap, q1, task(&snap, "ns/a-t-10")));
}

#[test]
fn without_capability_a_queue_borrows_up_to_the_cluster_minus_others_guarantees() {
    let snap = gpu_job(
        gpu_cluster()
            .queue(queue("q1").deserved(&[("nvidia.com/gpu", "2")]))
            .queue(queue("q2").guarantee(&[("nvidia.com/gpu", "6")])),
        "q1",
        "a",
        10,
        1,
    )
    .pod_group(pod_group("ns", "idle", 1).queue("q2"))
    .snapshot();
    let p = open(&snap);
    assert_eq!(gpus(&attr(&p, &snap, "q1").account.real_capability), 10.0);
    assert!(!p.allocatable(&snap, q(&snap, "q1"), task(&snap, "ns/a-t-10")));
}

#[test]
fn allocatable_only_checks_requested_dimensions_and_open_queues() {
    let snap = gpu_job(gpu_cluster().queue(queue("q1").capability(&[("nvidia.com/gpu", "2")])), "q1", "a", 2, 0)
        .pod(pod("ns", "a-cpu-0").group("a").cpu_mem("1", "1Gi"))
        .queue(queue("closed").state(QueueState::Closed))
        .pod_group(pod_group("ns", "c", 1).queue("closed"))
        .pod(pod("ns", "c-t-0").group("c").cpu_mem("1", "1Gi"))
        .snapshot();
    let p = open(&snap);
    // GPUs at capability, but the task asks for cpu and memory only.
    assert!(p.allocatable(&snap, q(&snap, "q1"), task(&snap, "ns/a-cpu-0")));
    assert!(!p.allocatable(&snap, q(&snap, "closed"), task(&snap, "ns/c-t-0")));
}

// ----- queue order -----

#[test]
fn queue_order_priority_then_share_then_deserved_before_best_effort() {
    let mut snap = gpu_job(
        gpu_job(
            gpu_job(
                gpu_job(
                    gpu_cluster()
                        .queue(queue("qa").deserved(&[("nvidia.com/gpu", "4")]))
                        .queue(queue("qb").deserved(&[("nvidia.com/gpu", "4")]))
                        .queue(queue("qe"))
                        .queue(queue("qp").priority(5)),
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
            "qe",
            "e",
            0,
            8,
        ),
        "qp",
        "p",
        0,
        8,
    )
    .snapshot();
    let mut p = open(&snap);
    let (qa, qb, qe, qp) = (q(&snap, "qa"), q(&snap, "qb"), q(&snap, "qe"), q(&snap, "qp"));
    assert_eq!(p.queue_order(&snap, qa, qb), Ordering::Equal);
    // Best-effort queues have share 1 and go after queues below their deserved share.
    assert_eq!(p.queue_order(&snap, qa, qe), Ordering::Less);
    assert_eq!(p.queue_order(&snap, qe, qa), Ordering::Greater);
    // Priority first, whatever the share.
    assert_eq!(p.queue_order(&snap, qp, qa), Ordering::Less);
    let n1 = snap.node_id("n1").unwrap();
    let t = task(&snap, "ns/a-t-0");
    allocate(&mut snap, &mut p, t, n1);
    assert_eq!(attr(&p, &snap, "qa").account.share, 0.25);
    assert_eq!(p.queue_order(&snap, qb, qa), Ordering::Less);
    // At share 1, a queue with deserved still goes before a best-effort queue.
    for t in tasks(&snap, "a", 1..4) {
        allocate(&mut snap, &mut p, t, n1);
    }
    assert_eq!(attr(&p, &snap, "qa").account.share, 1.0);
    assert_eq!(p.queue_order(&snap, qa, qe), Ordering::Less);
    assert_eq!(p.queue_order(&snap, qe, qa), Ordering::Greater);
}

// ----- preemptive and reclaimable -----

/// q1 deserves 4 GPUs and runs 8 (borrowed); q2 deserves 12 and runs 2, with 14 pending.
fn reclaim_snapshot(q1: QueueBuilder) -> Snapshot {
    gpu_job_on(
        gpu_job(gpu_cluster().queue(q1).queue(queue("q2").deserved(&[("nvidia.com/gpu", "12")])), "q1", "a", 8, 8),
        "q2",
        "b",
        "n2",
        2,
        14,
    )
    .snapshot()
}

#[test]
fn preemptive_below_deserved_on_a_requested_dimension_and_within_capability() {
    let snap = reclaim_snapshot(queue("q1").deserved(&[("nvidia.com/gpu", "4")]));
    let p = open(&snap);
    // q2: 2 + 1 ≤ 12 GPUs.
    assert!(p.preemptive(&snap, q(&snap, "q2"), task(&snap, "ns/b-t-2")));
    // q1: 8 + 1 > 4 GPUs, and cpu/memory are not deserved at all (0).
    assert!(!p.preemptive(&snap, q(&snap, "q1"), task(&snap, "ns/a-t-8")));
    // Future use beyond the real capability never reclaims.
    let capped =
        reclaim_snapshot(queue("q1").deserved(&[("nvidia.com/gpu", "12")]).capability(&[("nvidia.com/gpu", "8")]));
    let p = open(&capped);
    assert!(!p.preemptive(&capped, q(&capped, "q1"), task(&capped, "ns/a-t-8")));
}

#[test]
fn reclaimable_takes_victims_only_while_their_queue_is_over_deserved() {
    let snap = reclaim_snapshot(queue("q1").deserved(&[("nvidia.com/gpu", "4")]));
    let p = open(&snap);
    let mut candidates = tasks(&snap, "a", 0..8);
    // A task of a queue within its deserved share is never a victim.
    candidates.insert(2, task(&snap, "ns/b-t-0"));
    let victims = p.reclaimable(&snap, task(&snap, "ns/b-t-5"), &candidates).unwrap();
    assert_eq!(victims, tasks(&snap, "a", 0..4));
}

#[test]
fn reclaimable_never_takes_a_queue_below_its_guarantee() {
    // Memory guarantee of 6Gi (deserved is raised to it): after 2 victims q1 holds 6Gi.
    let snap = reclaim_snapshot(queue("q1").deserved(&[("nvidia.com/gpu", "4")]).guarantee(&[("memory", "6Gi")]));
    let p = open(&snap);
    let a = attr(&p, &snap, "q1");
    assert_eq!(a.account.deserved.memory, 6.0 * GI);
    assert_eq!(gpus(&a.account.deserved), 4.0);
    let victims = p.reclaimable(&snap, task(&snap, "ns/b-t-5"), &tasks(&snap, "a", 0..8)).unwrap();
    assert_eq!(victims, tasks(&snap, "a", 0..2));
}

#[test]
fn reclaimable_skips_tasks_sharing_no_resource_with_the_reclaimer_and_takes_immediate_victims() {
    let snap = gpu_cluster()
        .queue(queue("q1").deserved(&[("cpu", "64")]))
        .queue(queue("q2").deserved(&[("nvidia.com/gpu", "8"), ("cpu", "8")]))
        .pod_group(pod_group("ns", "a", 1).queue("q1"))
        // GPU only: q1 deserves no GPU, so it is an immediate victim.
        .pod(pod("ns", "a-g-0").group("a").gpu("1").running_on("n1"))
        // cpu only: within q1's deserved cpu, not a victim.
        .pod(pod("ns", "a-c-0").group("a").cpu_mem("1", "0").running_on("n1"))
        .pod_group(pod_group("ns", "b", 1).queue("q2"))
        .pod(pod("ns", "b-g-0").group("b").gpu("1"))
        .pod(pod("ns", "b-c-0").group("b").cpu_mem("1", "0"))
        .snapshot();
    let p = open(&snap);
    let candidates = [task(&snap, "ns/a-g-0"), task(&snap, "ns/a-c-0")];
    assert_eq!(p.reclaimable(&snap, task(&snap, "ns/b-g-0"), &candidates), Some(vec![task(&snap, "ns/a-g-0")]));
    // A cpu-only reclaimer shares nothing with the GPU-only task.
    assert_eq!(p.reclaimable(&snap, task(&snap, "ns/b-c-0"), &candidates), Some(vec![]));
}

// ----- admission -----

#[test]
fn admission_checks_real_capability_and_reports_rejections() {
    let snap = gpu_cluster()
        .queue(queue("q1").deserved(&[("nvidia.com/gpu", "2")]).capability(&[("nvidia.com/gpu", "4")]))
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
    // Admission is bounded by capability (4), not by deserved (2).
    assert_eq!(p.job_enqueueable(&snap, a), Admission::Permit);
    p.job_enqueued(&snap, a);
    assert_eq!(gpus(&attr(&p, &snap, "q1").account.inqueue), 3.0);
    let Admission::Reject(why) = p.job_enqueueable(&snap, b) else { panic!("b is rejected") };
    assert_eq!(
        why,
        "queue resource quota insufficient: insufficient nvidia.com/gpu; queue q1: nvidia.com/gpu: the job needs 2, \
         1 of 4 left (0 allocated, 3 reserved for admitted jobs, 0 elastic give back)"
    );
    assert_eq!(p.job_enqueueable(&snap, c), Admission::Permit);
    p.job_enqueued(&snap, c);
    assert_eq!(p.job_enqueueable(&snap, free), Admission::Permit);
    let mut out = CloseOutput::default();
    p.on_session_close(&snap, &ctx(), &mut out);
    assert!(out.job_events.is_empty(), "admission events are the session's: {:?}", out.job_events);
    assert_eq!(out.queue_reports.len(), 1);
    let (qid, report) = &out.queue_reports[0];
    assert_eq!(*qid, q(&snap, "q1"));
    assert_eq!(report.deserved.as_ref().map(gpus), Some(2.0));
    assert_eq!(report.share, Some(0.0));
}

#[test]
fn closed_queue_rejects_admission() {
    let snap = gpu_cluster()
        .queue(queue("q1").state(QueueState::Closed))
        .pod_group(pod_group("ns", "a", 1).queue("q1").phase(PodGroupPhase::Pending))
        .snapshot();
    let p = open(&snap);
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/a")).is_reject());
}

// ----- hierarchy -----

/// root (virtual) ─┬─ eng (capability 8 GPUs, deserved 8) ─┬─ dev (deserved 6)
///                 │                                        └─ test (deserved 2)
///                 └─ sci (deserved 8)
fn tree(o: Objects) -> Objects {
    let o = o
        .queue(queue("eng").deserved(&[("nvidia.com/gpu", "8")]).capability(&[("nvidia.com/gpu", "8")]))
        .queue(queue("sci").deserved(&[("nvidia.com/gpu", "8")]));
    let o = child(o, queue("dev").deserved(&[("nvidia.com/gpu", "6")]), "eng");
    child(o, queue("test").deserved(&[("nvidia.com/gpu", "2")]), "eng")
}

#[test]
fn hierarchy_sums_allocations_up_the_tree_and_inherits_capability() {
    let snap = gpu_job_on(gpu_job(tree(gpu_cluster()), "dev", "d", 2, 6), "test", "t", "n2", 3, 0).snapshot();
    let p = open_with(&snap, 0, true);
    let (dev, test, eng) = (attr(&p, &snap, "dev"), attr(&p, &snap, "test"), attr(&p, &snap, "eng"));
    assert_eq!(gpus(&dev.account.allocated), 2.0);
    assert_eq!(gpus(&eng.account.allocated), 5.0);
    assert_eq!(gpus(&eng.account.request), 11.0);
    // dev inherits eng's GPU capability.
    assert_eq!(gpus(&dev.capability), 8.0);
    assert_eq!(gpus(&dev.account.real_capability), 8.0);
    assert_eq!(dev.depth(), 2);
    assert!(dev.is_leaf() && !eng.is_leaf());
    assert_eq!(test.account.share, 1.5);
    // The virtual root deserves the sum of its children and holds everything.
    let root = p.root_attr().unwrap();
    assert_eq!(gpus(&root.account.deserved), 16.0);
    assert_eq!(gpus(&root.account.allocated), 5.0);
    assert_eq!(root.account.real_capability.milli_cpu, f64::MAX);
}

#[test]
fn hierarchy_checks_every_ancestor_capability() {
    let mut snap = gpu_job_on(gpu_job(tree(gpu_cluster()), "dev", "d", 0, 8), "test", "t", "n2", 3, 0).snapshot();
    let mut p = open_with(&snap, 0, true);
    let dev = q(&snap, "dev");
    let n1 = snap.node_id("n1").unwrap();
    // dev alone could take 8, but eng (capability 8) already holds test's 3.
    for t in tasks(&snap, "d", 0..5) {
        assert!(p.allocatable(&snap, dev, t));
        allocate(&mut snap, &mut p, t, n1);
    }
    assert_eq!(gpus(&attr(&p, &snap, "eng").account.allocated), 8.0);
    assert!(!p.allocatable(&snap, dev, task(&snap, "ns/d-t-5")));
}

#[test]
fn hierarchy_runs_jobs_only_in_leaf_queues() {
    let snap = gpu_job(tree(gpu_cluster()), "eng", "e", 0, 2)
        .pod_group(pod_group("ns", "p", 1).queue("eng").phase(PodGroupPhase::Pending))
        .snapshot();
    let mut p = open_with(&snap, 0, true);
    let eng = q(&snap, "eng");
    assert!(!p.allocatable(&snap, eng, task(&snap, "ns/e-t-0")));
    assert!(!p.preemptive(&snap, eng, task(&snap, "ns/e-t-0")));
    let pj = job(&snap, "ns/p");
    assert!(p.job_enqueueable(&snap, pj).is_reject());
    let mut out = CloseOutput::default();
    p.on_session_close(&snap, &ctx(), &mut out);
    // The admitted job e waits in a non-leaf queue: the plugin says why on its PodGroup (the
    // rejected job p gets its event from the session).
    let messages: Vec<&str> = out.job_events.iter().map(|(_, _, _, m)| m.as_str()).collect();
    assert_eq!(messages, vec!["queue eng is not a leaf queue: jobs may only run in leaf queues"]);
    // Every queue is reported in hierarchical mode (the virtual root is not a queue).
    assert_eq!(out.queue_reports.len(), snap.queues.len());
}

#[test]
fn hierarchy_scales_children_deserved_down_to_the_parent() {
    let o =
        gpu_cluster().queue(queue("eng").deserved(&[("nvidia.com/gpu", "8")]).capability(&[("nvidia.com/gpu", "16")]));
    let o = child(o, queue("dev").deserved(&[("nvidia.com/gpu", "6")]), "eng");
    let o = child(o, queue("ops").deserved(&[("nvidia.com/gpu", "6")]), "eng");
    let o = child(o, queue("test").deserved(&[("nvidia.com/gpu", "4")]).guarantee(&[("nvidia.com/gpu", "3")]), "eng");
    let snap = o.snapshot();
    let p = open_with(&snap, 0, true);
    // 6 + 6 + 4 = 16 > 8: each child gets half, then test is raised to its guarantee.
    assert_eq!(gpus(&attr(&p, &snap, "dev").account.deserved), 3.0);
    assert_eq!(gpus(&attr(&p, &snap, "ops").account.deserved), 3.0);
    assert_eq!(gpus(&attr(&p, &snap, "test").account.deserved), 3.0);
    // test's guarantee is set aside from its siblings' real capability (eng's 16 − 3).
    assert_eq!(gpus(&attr(&p, &snap, "dev").account.real_capability), 13.0);
    assert_eq!(gpus(&attr(&p, &snap, "test").account.real_capability), 16.0);
}

#[test]
fn hierarchy_leaves_out_queues_with_a_missing_parent_or_a_cycle() {
    let o = gpu_cluster().queue(queue("ok"));
    let o = child(o, queue("orphan"), "nowhere");
    let o = child(o, queue("x"), "y");
    let o = child(o, queue("y"), "x");
    let snap = gpu_job(gpu_job(gpu_job(o, "orphan", "o", 0, 1), "x", "x", 0, 1), "ok", "k", 0, 1).snapshot();
    let p = open_with(&snap, 0, true);
    assert!(attr(&p, &snap, "orphan").broken().unwrap().contains("\"nowhere\""));
    assert!(attr(&p, &snap, "x").broken().unwrap().contains("cycle"));
    assert!(!p.allocatable(&snap, q(&snap, "orphan"), task(&snap, "ns/o-t-0")));
    assert!(!p.allocatable(&snap, q(&snap, "x"), task(&snap, "ns/x-t-0")));
    assert!(p.job_enqueueable(&snap, job(&snap, "ns/x")).is_reject());
    // The rest of the tree works.
    assert!(p.allocatable(&snap, q(&snap, "ok"), task(&snap, "ns/k-t-0")));
}

#[test]
fn hierarchy_with_a_root_queue_uses_its_capability() {
    let snap = gpu_job(
        gpu_cluster().queue(queue("root").capability(&[("nvidia.com/gpu", "3")])).queue(queue("q1")),
        "q1",
        "a",
        3,
        1,
    )
    .snapshot();
    let p = open_with(&snap, 0, true);
    assert_eq!(gpus(&attr(&p, &snap, "root").account.real_capability), 3.0);
    // cpu absent from root's capability is unlimited.
    assert_eq!(attr(&p, &snap, "root").account.real_capability.milli_cpu, f64::MAX);
    assert!(!p.allocatable(&snap, q(&snap, "q1"), task(&snap, "ns/a-t-3")));
}

#[test]
fn hierarchy_queue_order_prefers_leaves_and_compares_branches() {
    let mut snap =
        gpu_job(gpu_job(gpu_job(tree(gpu_cluster()), "dev", "d", 0, 8), "test", "t", 0, 8), "sci", "s", 0, 8)
            .snapshot();
    let mut p = open_with(&snap, 0, true);
    let (dev, test, sci, eng) = (q(&snap, "dev"), q(&snap, "test"), q(&snap, "sci"), q(&snap, "eng"));
    assert_eq!(p.queue_order(&snap, dev, eng), Ordering::Less);
    assert_eq!(p.queue_order(&snap, eng, sci), Ordering::Greater);
    let n1 = snap.node_id("n1").unwrap();
    // test gets 2 GPUs (share 1), which makes eng's share 2/8.
    for t in tasks(&snap, "t", 0..2) {
        allocate(&mut snap, &mut p, t, n1);
    }
    assert_eq!(attr(&p, &snap, "eng").account.share, 0.25);
    // Siblings compare their own shares: dev (0) before test (1).
    assert_eq!(p.queue_order(&snap, dev, test), Ordering::Less);
    // Across branches the branches compare: eng (0.25) after sci (0), so dev after sci.
    assert_eq!(p.queue_order(&snap, dev, sci), Ordering::Greater);
    assert_eq!(p.queue_order(&snap, sci, dev), Ordering::Less);
}

#[test]
fn hierarchy_victim_queue_order_prefers_the_closest_relatives() {
    let snap = gpu_job(gpu_job(gpu_job(tree(gpu_cluster()), "dev", "d", 0, 1), "test", "t", 1, 0), "sci", "s", 1, 0)
        .snapshot();
    let p = open_with(&snap, 0, true);
    let (dev, test, sci) = (q(&snap, "dev"), q(&snap, "test"), q(&snap, "sci"));
    assert_eq!(p.victim_queue_order(&snap, test, sci, dev), Ordering::Less);
    assert_eq!(p.victim_queue_order(&snap, sci, test, dev), Ordering::Greater);
    assert!(p.hooks().contains(Hooks::VICTIM_QUEUE_ORDER));
    assert!(!open(&snap).hooks().contains(Hooks::VICTIM_QUEUE_ORDER));
}

#[test]
fn ancestor_reclaim_level_lets_a_queue_reclaim_for_its_parents_share() {
    // dev is at its deserved 6; eng (deserved 8) holds 6 and may reclaim through level 1.
    let snap = gpu_job(tree(gpu_cluster()), "dev", "d", 6, 2).snapshot();
    let dev = q(&snap, "dev");
    let t = task(&snap, "ns/d-t-6");
    assert!(!open_with(&snap, 0, true).preemptive(&snap, dev, t));
    assert!(open_with(&snap, 1, true).preemptive(&snap, dev, t));
}

#[test]
fn ancestor_reclaim_level_keeps_victims_whose_ancestor_is_within_deserved() {
    // test (deserved 2) runs 4; its parent eng (deserved 8) holds 4. A reclaimer from sci
    // sees test over its deserved, but with level 1 eng is within its own.
    let snap = gpu_job_on(gpu_job(tree(gpu_cluster()), "test", "t", 4, 0), "sci", "s", "n2", 0, 4).snapshot();
    let candidates = tasks(&snap, "t", 0..4);
    let reclaimer = task(&snap, "ns/s-t-0");
    let flat = open_with(&snap, 0, true).reclaimable(&snap, reclaimer, &candidates).unwrap();
    assert_eq!(flat, tasks(&snap, "t", 0..2));
    let leveled = open_with(&snap, 1, true).reclaimable(&snap, reclaimer, &candidates).unwrap();
    assert_eq!(leveled, vec![]);
}

// ----- configuration and sessions -----

#[test]
fn factory_checks_arguments() {
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    assert!(factory(&opt).is_ok());
    opt.arguments.insert("ancestorReclaimLevel".into(), serde_json::json!(2));
    opt.arguments.insert("capacity.DynamicResourceAllocationEnable".into(), serde_json::json!(true));
    opt.arguments.insert("capacity.DRAConsumableCapacityEnable".into(), serde_json::json!("false"));
    assert!(factory(&opt).is_ok());
    opt.arguments.insert("ancestorReclaimLevel".into(), serde_json::json!("two"));
    let err = factory(&opt).err().expect("bad type rejected");
    assert!(err.0.contains("ancestorReclaimLevel"), "{err}");
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("capacity.weight".into(), serde_json::json!(1));
    let err = factory(&opt).err().expect("unknown key rejected");
    assert!(err.0.contains("capacity.weight"), "{err}");
    let negative: Args = serde_json::from_value(serde_json::json!({"ancestorReclaimLevel": -1})).unwrap();
    assert_eq!(negative.ancestor_reclaim_level(), 0);
}

#[test]
fn factory_reads_enable_hierarchy() {
    let opt = PluginOption { name: NAME.into(), enabled_hierarchy: Some(true), ..Default::default() };
    let p = factory(&opt).unwrap().build();
    assert!(p.hooks().contains(Hooks::VICTIM_QUEUE_ORDER));
    let opt = PluginOption { name: NAME.into(), ..Default::default() };
    assert!(!factory(&opt).unwrap().build().hooks().contains(Hooks::VICTIM_QUEUE_ORDER));
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
    let snap = borrowing_snapshot();
    let profile = profile();
    let mut ssn = Session::open(snap, profile.instantiate(), ctx(), SessionOptions::default());
    let q1 = ssn.snap.queue_id("q1").unwrap();
    let n1 = ssn.snap.node_id("n1").unwrap();
    let n2 = ssn.snap.node_id("n2").unwrap();
    let mut stmt = Statement::new();
    for i in 0..10 {
        let t = task(&ssn.snap, &format!("ns/a-t-{i}"));
        assert!(ssn.allocatable(q1, t));
        stmt.allocate(&mut ssn, t, if i < 8 { n1 } else { n2 });
    }
    let next = task(&ssn.snap, "ns/a-t-10");
    assert!(!ssn.allocatable(q1, next));
    stmt.discard(&mut ssn);
    assert!(ssn.allocatable(q1, next));
}

#[test]
fn cycle_reports_deserved_and_share() {
    let snap = reclaim_snapshot(queue("q1").deserved(&[("nvidia.com/gpu", "4")]));
    let cx = CycleContext { cycle: 1, now_ms: 0, options: SessionOptions::default() };
    let outcome = run_cycle(snap, &profile(), &cx, &mut NoObserver);
    let q1 = &outcome.queues["q1"];
    assert_eq!(q1.deserved.as_ref().map(gpus), Some(4.0));
    assert_eq!(q1.share, Some(2.0));
    assert_eq!(outcome.queues["q2"].share.map(|s| (s * 1e6).round() / 1e6), Some(0.166667));
    assert_eq!(outcome.queues["default"].deserved, None);
}
