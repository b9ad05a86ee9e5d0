use volcano_api::conf::{PluginOption, SchedulerConfiguration};
use volcano_api::crd::TASK_SPEC_KEY;
use volcano_framework::{PluginEntry, Profile, Session, SessionOptions, Statement};
use volcano_testkit::{node, pod, pod_group, Objects, PodBuilder};

use super::*;
use volcano_testkit::fixtures::session_ctx as ctx;

/// n1, n2: 8 cpu, 16Gi; n3: 2 cpu, 4Gi; n4: 1 cpu, 4Gi.
fn cluster() -> Objects {
    Objects::new()
        .node(node("n1", "8", "16Gi"))
        .node(node("n2", "8", "16Gi"))
        .node(node("n3", "2", "4Gi"))
        .node(node("n4", "1", "4Gi"))
}

/// A task `ns/<job>-<role>-<i>` of the role, pending.
fn role_pod(job: &str, role: &str, i: usize, cpu: &str) -> PodBuilder {
    pod("ns", &format!("{job}-{role}-{i}")).group(job).annotation(TASK_SPEC_KEY, role).cpu_mem(cpu, "1Gi")
}

/// Job `tf` with `ps` parameter servers (2 cpu) and `workers` workers (1 cpu), pending,
/// and the given PodGroup annotations.
fn tf(o: Objects, annotations: &[(&str, &str)], ps: usize, workers: usize) -> Objects {
    let mut pg = pod_group("ns", "tf", 1);
    for (k, v) in annotations {
        pg = pg.annotation(k, v);
    }
    let mut o = o.pod_group(pg);
    for i in 0..ps {
        o = o.pod(role_pod("tf", "ps", i, "2"));
    }
    for i in 0..workers {
        o = o.pod(role_pod("tf", "worker", i, "1"));
    }
    o
}

fn open(snap: &Snapshot) -> TaskTopology {
    open_weighted(snap, 1)
}

fn open_weighted(snap: &Snapshot, weight: i64) -> TaskTopology {
    let mut p = TaskTopology::new(weight);
    p.on_session_open(snap, &ctx());
    p
}

fn task(snap: &Snapshot, name: &str) -> TaskId {
    let key = format!("ns/{name}");
    TaskId(snap.tasks.iter().position(|t| *t.key == *key).expect("task exists") as u32)
}

fn tasks(snap: &Snapshot, names: &[&str]) -> Vec<TaskId> {
    names.iter().map(|n| task(snap, n)).collect()
}

fn job(snap: &Snapshot, name: &str) -> JobId {
    snap.job_id(&format!("ns/{name}")).expect("job exists")
}

fn node_id(snap: &Snapshot, name: &str) -> NodeId {
    snap.node_id(name).expect("node exists")
}

/// Places a pending task as the allocate action would, then fires the event.
fn allocate(snap: &mut Snapshot, p: &mut TaskTopology, t: TaskId, n: NodeId) {
    snap.set_task_status(t, TaskStatus::Allocated);
    snap.tasks[t.idx()].node = Some(n);
    snap.node_add_task(n, t);
    p.on_allocate(snap, t);
}

// ----- buckets -----

#[test]
fn ps_worker_affinity_puts_the_whole_job_in_one_bucket() {
    let snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker")], 2, 4).snapshot();
    let p = open(&snap);
    let j = job(&snap, "tf");
    assert!(p.has_topology(j));
    assert_eq!(p.bucket_count(j), 1);
    assert_eq!(p.bucket_max_size(j), 6);
    // Biggest requests first: the parameter servers.
    assert_eq!(
        p.bucket_pending(j, 0),
        tasks(&snap, &["tf-ps-0", "tf-ps-1", "tf-worker-0", "tf-worker-1", "tf-worker-2", "tf-worker-3"])
    );
}

#[test]
fn ps_self_anti_affinity_splits_the_job_and_balances_workers() {
    let snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker"), (ANTI_AFFINITY_ANNOTATION, "ps")], 2, 4).snapshot();
    let p = open(&snap);
    let j = job(&snap, "tf");
    assert_eq!(p.bucket_count(j), 2);
    // Each worker goes where it has a ps, the lighter bucket on ties.
    assert_eq!(p.bucket_pending(j, 0), tasks(&snap, &["tf-ps-0", "tf-worker-0", "tf-worker-2"]));
    assert_eq!(p.bucket_pending(j, 1), tasks(&snap, &["tf-ps-1", "tf-worker-1", "tf-worker-3"]));
    assert_eq!(p.bucket_max_size(j), 3);
    assert_eq!(p.bucket_of(task(&snap, "tf-worker-3")), Some(1));
}

#[test]
fn worker_self_anti_affinity_gives_each_worker_its_own_bucket() {
    let snap = tf(cluster(), &[(ANTI_AFFINITY_ANNOTATION, "worker")], 0, 3).snapshot();
    let p = open(&snap);
    let j = job(&snap, "tf");
    assert_eq!(p.bucket_count(j), 3);
    assert_eq!(p.bucket_max_size(j), 1);
}

#[test]
fn roles_without_relations_and_invalid_annotations_stay_out_of_buckets() {
    let snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker")], 1, 1)
        .pod(role_pod("tf", "chief", 0, "1"))
        .pod_group(pod_group("ns", "unknown", 1).annotation(AFFINITY_ANNOTATION, "ps,chief"))
        .pod(role_pod("unknown", "ps", 0, "1"))
        .pod_group(pod_group("ns", "dup", 1).annotation(ANTI_AFFINITY_ANNOTATION, "ps,ps"))
        .pod(role_pod("dup", "ps", 0, "1"))
        .pod_group(pod_group("ns", "order", 1).annotation(TASK_ORDER_ANNOTATION, "ps,worker"))
        .pod(role_pod("order", "ps", 0, "1"))
        .pod_group(pod_group("ns", "plain", 1))
        .pod(role_pod("plain", "ps", 0, "1"))
        .snapshot();
    let p = open(&snap);
    assert_eq!(p.bucket_of(task(&snap, "tf-chief-0")), None);
    assert_eq!(p.bucket_of(task(&snap, "tf-ps-0")), Some(0));
    for bad in ["unknown", "dup", "order", "plain"] {
        assert!(!p.has_topology(job(&snap, bad)), "{bad}");
    }
    // Only bucketed tasks have a job-dependent score.
    assert!(!p.shape_local(&snap, task(&snap, "tf-ps-0")));
    assert!(p.shape_local(&snap, task(&snap, "tf-chief-0")));
    assert!(p.shape_local(&snap, task(&snap, "plain-ps-0")));
    assert_eq!(p.node_order(&snap, task(&snap, "plain-ps-0"), node_id(&snap, "n1")), 0.0);
    assert_eq!(p.node_order(&snap, task(&snap, "tf-chief-0"), node_id(&snap, "n1")), 0.0);
}

#[test]
fn running_tasks_seed_buckets_by_node() {
    let snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker"), (ANTI_AFFINITY_ANNOTATION, "ps")], 0, 2)
        .pod(role_pod("tf", "ps", 0, "2").running_on("n2"))
        .pod(role_pod("tf", "ps", 1, "2").running_on("n1"))
        .snapshot();
    let p = open(&snap);
    let j = job(&snap, "tf");
    let (n1, n2) = (node_id(&snap, "n1"), node_id(&snap, "n2"));
    // Placed tasks first, by node name: ps-1 (n1) makes bucket 0, ps-0 (n2) bucket 1.
    assert_eq!(p.bucket_on_node(j, 0, n1), 1);
    assert_eq!(p.bucket_on_node(j, 1, n2), 1);
    assert_eq!(p.bucket_pending(j, 0), tasks(&snap, &["tf-worker-0"]));
    assert_eq!(p.bucket_pending(j, 1), tasks(&snap, &["tf-worker-1"]));
    // worker-0 is drawn to n1 where its bucket's ps runs: (1 + 1) × 100 / 2.
    let w0 = task(&snap, "tf-worker-0");
    assert_eq!(p.node_order(&snap, w0, n1), 100.0);
    assert_eq!(p.node_order(&snap, w0, n2), 50.0);
    assert_eq!(p.bucket_max_size(j), 2);
}

// ----- task order -----

#[test]
fn task_order_bucketed_first_bigger_buckets_then_index_then_roles() {
    let mut snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker"), (ANTI_AFFINITY_ANNOTATION, "ps")], 2, 4)
        .pod(role_pod("tf", "chief", 0, "1"))
        .pod_group(pod_group("ns", "plain", 1))
        .pod(role_pod("plain", "ps", 0, "1"))
        .snapshot();
    let mut p = open(&snap);
    let [ps0, ps1, w0, w1, chief, plain] =
        ["tf-ps-0", "tf-ps-1", "tf-worker-0", "tf-worker-1", "tf-chief-0", "plain-ps-0"].map(|n| task(&snap, n));
    // In a bucket before out of any bucket.
    assert_eq!(p.task_order(&snap, w1, chief), Ordering::Less);
    assert_eq!(p.task_order(&snap, chief, w1), Ordering::Greater);
    // Equal sizes: the older bucket first.
    assert_eq!(p.task_order(&snap, w0, ps1), Ordering::Less);
    // Same bucket: the stronger relation first (ps has self anti-affinity).
    assert_eq!(p.task_order(&snap, ps0, w0), Ordering::Less);
    assert_eq!(p.task_order(&snap, w0, ps0), Ordering::Greater);
    assert_eq!(p.task_order(&snap, w0, task(&snap, "tf-worker-2")), Ordering::Equal);
    // A job without topology: no opinion.
    assert_eq!(p.task_order(&snap, plain, ps0), Ordering::Equal);
    // Once bucket 0 has placed a task, bucket 1 is bigger and goes first.
    let n1 = node_id(&snap, "n1");
    allocate(&mut snap, &mut p, ps0, n1);
    assert_eq!(p.task_order(&snap, w1, w0), Ordering::Less);
}

#[test]
fn the_user_task_order_wins_over_relation_strength() {
    let snap = tf(
        cluster(),
        &[(AFFINITY_ANNOTATION, "ps,worker"), (ANTI_AFFINITY_ANNOTATION, "ps"), (TASK_ORDER_ANNOTATION, "worker,ps")],
        1,
        2,
    )
    .snapshot();
    let p = open(&snap);
    let j = job(&snap, "tf");
    // Workers are taken first when building, so they share the first bucket with the ps.
    assert_eq!(p.bucket_count(j), 1);
    let (ps0, w0) = (task(&snap, "tf-ps-0"), task(&snap, "tf-worker-0"));
    assert_eq!(p.task_order(&snap, w0, ps0), Ordering::Less);
}

// ----- node scores -----

#[test]
fn node_score_counts_the_bucket_and_what_fits_beside_the_task() {
    let mut snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker")], 2, 4).snapshot();
    let mut p = open(&snap);
    let [n1, n2, n3, n4] = ["n1", "n2", "n3", "n4"].map(|n| node_id(&snap, n));
    let (ps0, ps1) = (task(&snap, "tf-ps-0"), task(&snap, "tf-ps-1"));
    // The whole bucket (8 cpu, 6Gi) fits n1: 6 × 100 / 6.
    assert_eq!(p.node_order(&snap, ps0, n1), 100.0);
    // n3 (2 cpu) holds ps-0 alone: the 5 others are taken out.
    assert_eq!(p.node_order(&snap, ps0, n3), 100.0 / 6.0);
    // n4 (1 cpu) cannot hold ps-0 at all.
    assert_eq!(p.node_order(&snap, ps0, n4), 0.0);
    // After ps-0 lands on n1, the rest of the bucket is drawn there.
    allocate(&mut snap, &mut p, ps0, n1);
    assert_eq!(p.bucket_on_node(job(&snap, "tf"), 0, n1), 1);
    assert_eq!(p.node_order(&snap, ps1, n1), 100.0);
    assert_eq!(p.node_order(&snap, ps1, n2), 500.0 / 6.0);
    // The weight multiplies.
    let fresh = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker")], 2, 4).snapshot();
    let p3 = open_weighted(&fresh, 3);
    assert_eq!(p3.node_order(&fresh, task(&fresh, "tf-ps-0"), n2), 300.0);
}

#[test]
fn anti_affinity_spreads_tasks_over_nodes() {
    let mut snap = tf(cluster(), &[(ANTI_AFFINITY_ANNOTATION, "worker")], 0, 3).snapshot();
    let mut p = open(&snap);
    let (n1, n2) = (node_id(&snap, "n1"), node_id(&snap, "n2"));
    let [w0, w1] = ["tf-worker-0", "tf-worker-1"].map(|n| task(&snap, n));
    assert_eq!(p.node_order(&snap, w1, n1), 100.0);
    allocate(&mut snap, &mut p, w0, n1);
    // 0 placed + 1 pending − 1 worker on n1.
    assert_eq!(p.node_order(&snap, w1, n1), 0.0);
    assert_eq!(p.node_order(&snap, w1, n2), 100.0);
}

#[test]
fn events_follow_evictions_and_undone_placements() {
    let snap = tf(cluster(), &[(AFFINITY_ANNOTATION, "ps,worker")], 1, 2).snapshot();
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
    let mut ssn = Session::open(snap, profile.instantiate(), ctx(), SessionOptions::default());
    let (n1, n2) = (ssn.snap.node_id("n1").unwrap(), ssn.snap.node_id("n2").unwrap());
    let (ps0, w0) = (task(&ssn.snap, "tf-ps-0"), task(&ssn.snap, "tf-worker-0"));
    // Bucket of 3 (4 cpu): 3 × 100 / 3 everywhere it fits.
    assert_eq!(ssn.node_order_sum(w0, n1), 100.0);
    let mut stmt = Statement::new();
    stmt.allocate(&mut ssn, ps0, n1);
    // n1: 1 placed + 2 pending; n2: 2 pending.
    assert_eq!(ssn.node_order_sum(w0, n1), 100.0);
    assert_eq!(ssn.node_order_sum(w0, n2), 200.0 / 3.0);
    stmt.discard(&mut ssn);
    assert_eq!(ssn.node_order_sum(w0, n2), 100.0);
}

#[test]
fn an_evicted_task_no_longer_counts_on_its_node() {
    let mut snap = tf(cluster(), &[(ANTI_AFFINITY_ANNOTATION, "worker")], 0, 1)
        .pod(role_pod("tf", "worker", 9, "1").running_on("n1"))
        .snapshot();
    let mut p = open(&snap);
    let (n1, w0, w9) = (node_id(&snap, "n1"), task(&snap, "tf-worker-0"), task(&snap, "tf-worker-9"));
    // The running worker repels the pending one: 0 + 1 − 1.
    assert_eq!(p.node_order(&snap, w0, n1), 0.0);
    snap.node_remove_task(n1, w9);
    snap.set_task_status(w9, TaskStatus::Releasing);
    snap.node_add_task(n1, w9);
    p.on_deallocate(&snap, w9);
    assert_eq!(p.node_order(&snap, w0, n1), 100.0);
}

#[test]
fn factory_checks_the_weight() {
    assert!(factory(&PluginOption { name: NAME.into(), ..Default::default() }).is_ok());
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("task-topology.weight".into(), serde_json::json!(10));
    assert!(factory(&opt).is_ok());
    opt.arguments.insert("task-topology.weight".into(), serde_json::json!(1.5));
    let err = factory(&opt).err().expect("float rejected");
    assert!(err.0.contains("task-topology.weight"), "{err}");
    let mut opt = PluginOption { name: NAME.into(), ..Default::default() };
    opt.arguments.insert("weight".into(), serde_json::json!(1));
    assert!(factory(&opt).is_err());
    assert_eq!(Args::default().weight(), DEFAULT_WEIGHT);
}

// ----- annotations -----

fn relations(annotations: &[(&str, &str)]) -> Result<Option<Relations>, String> {
    let mut pg = pod_group("ns", "j", 1);
    for (k, v) in annotations {
        pg = pg.annotation(k, v);
    }
    let mut o = cluster().pod_group(pg);
    for role in ["ps", "worker", "chief", "evaluator"] {
        o = o.pod(role_pod("j", role, 0, "1"));
    }
    let snap = o.snapshot();
    let roles = ["chief", "evaluator", "ps", "worker"].map(String::from).to_vec();
    Relations::from_job(snap.job(job(&snap, "j")), roles)
}

#[test]
fn annotations_parse_into_role_relations() {
    let rel = relations(&[
        (AFFINITY_ANNOTATION, "ps,worker;ps,evaluator"),
        (ANTI_AFFINITY_ANNOTATION, "ps;worker, chief"),
        (TASK_ORDER_ANNOTATION, "ps,worker,chief,evaluator"),
    ])
    .unwrap()
    .unwrap();
    let [chief, evaluator, ps, worker] = ["chief", "evaluator", "ps", "worker"].map(|r| rel.role_id(r).unwrap());
    assert!(rel.affinity(ps, worker) && rel.affinity(worker, ps) && rel.affinity(evaluator, ps));
    assert!(!rel.affinity(worker, evaluator) && !rel.affinity(ps, ps));
    assert!(rel.anti_affinity(ps, ps) && rel.anti_affinity(chief, worker) && rel.anti_affinity(worker, chief));
    assert!(!rel.anti_affinity(worker, worker));
    // Self anti-affinity 4, inter affinity 3, inter anti-affinity 1.
    assert_eq!([rel.priority[ps], rel.priority[worker], rel.priority[evaluator], rel.priority[chief]], [4, 3, 3, 1]);
    assert_eq!([rel.order[ps], rel.order[worker], rel.order[chief], rel.order[evaluator]], [4, 3, 2, 1]);
    // A worker joining 2 ps and 1 chief: +2 − 1; the anti-affinity part alone: −1.
    let counts = [1, 0, 2, 0];
    assert_eq!(rel.set_affinity(worker, &counts, false), 1);
    assert_eq!(rel.set_affinity(worker, &counts, true), -1);
    assert_eq!(rel.role_order(ps, worker), Ordering::Less);
}

#[test]
fn annotation_edge_cases_follow_volcano() {
    // A trailing comma makes a two-name group: an inter relation, not a self one.
    let rel = relations(&[(AFFINITY_ANNOTATION, "ps,")]).unwrap().unwrap();
    let ps = rel.role_id("ps").unwrap();
    assert_eq!(rel.priority[ps], 3);
    assert!(!rel.affinity(ps, ps));
    let rel = relations(&[(AFFINITY_ANNOTATION, "ps")]).unwrap().unwrap();
    assert_eq!(rel.priority[ps], 2);
    assert!(rel.affinity(ps, ps));
    assert!(relations(&[]).unwrap().is_none());
    let err = relations(&[(ANTI_AFFINITY_ANNOTATION, "ps;launcher")]).unwrap_err();
    assert!(err.contains("\"launcher\" does not exist"), "{err}");
    let err = relations(&[(TASK_ORDER_ANNOTATION, "ps,worker,ps")]).unwrap_err();
    assert!(err.contains("duplicated"), "{err}");
}
