//! Remembered failures (`volcano_framework::session::retry`): a cycle over a kept snapshot
//! that skips the jobs the last cycle over the same revision could not place must say
//! exactly what trying them says, and anything that could change their answer must make
//! the next cycle try them again.

mod common;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{NodeCondition, PodCondition};
use volcano_framework::{
    run_cycle, Changes, ClusterObjects, CycleContext, CycleOutcome, NoObserver, Profile, SessionOptions, Snapshot,
};
use volcano_testkit::{node, pod, pod_group, queue, SCHEDULER_NAME};

fn cycle(snap: &Snapshot, profile: &Profile, now_ms: i64) -> CycleOutcome {
    let cx = CycleContext { cycle: 1, now_ms, options: SessionOptions::default() };
    run_cycle(snap.clone(), profile, &cx, &mut NoObserver)
}

/// Runs the cycle on `snap`, keeps what it remembered, runs it again: the second must say
/// the same. Returns how many jobs the second skipped.
fn replayed(snap: &mut Snapshot, profile: &Profile, now_ms: i64, what: &str) -> u64 {
    let first = cycle(snap, profile, now_ms);
    snap.keep_retries(first.retries.clone());
    let second = cycle(snap, profile, now_ms);
    assert_eq!(second.effects, first.effects, "{what}: the replayed cycle's effects");
    assert_eq!(second.pending_reasons, first.pending_reasons, "{what}: the replayed cycle's reasons");
    assert_eq!(second.queues, first.queues, "{what}: the replayed cycle's queue reports");
    let mut metrics = second.metrics.clone();
    metrics.skipped_tries = first.metrics.skipped_tries;
    assert_eq!(metrics, first.metrics, "{what}: the replayed cycle's metric facts");
    // A third cycle over the same state is answered like the second, to the metric facts
    // (without a session when the second changed and wrote nothing).
    snap.keep_retries(second.retries.clone());
    let third = cycle(snap, profile, now_ms);
    assert_eq!(third.effects, second.effects, "{what}: the third cycle's effects");
    assert_eq!(third.pending_reasons, second.pending_reasons, "{what}: the third cycle's reasons");
    assert_eq!(third.queues, second.queues, "{what}: the third cycle's queue reports");
    assert_eq!(third.metrics, second.metrics, "{what}: the third cycle's metric facts");
    if second.retries.as_ref().is_some_and(|m| m.is_settled()) {
        SETTLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    second.metrics.skipped_tries
}

/// Third cycles answered without a session (see [`replayed`]).
static SETTLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[test]
fn every_scenario_says_the_same_when_its_cycles_skip_what_failed_before() {
    let mut skipped = 0;
    let mut scenarios = 0;
    let mut paths = Vec::new();
    common::scenario_files(&common::scenarios_dir(), &mut paths);
    for path in paths {
        let Some((mut sim, cycles)) = common::load(&path) else { continue };
        scenarios += 1;
        let names: Vec<String> = sim.scheduler_names().to_vec();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for c in 1..=cycles.unwrap_or(3).min(5) {
            let Ok(mut snap) = Snapshot::build(&sim.cluster().objects(), &names) else { break };
            let profile = sim.profile();
            skipped +=
                replayed(&mut snap, profile, sim.cycle_time_ms(c as u64), &format!("{} cycle {c}", path.display()));
            if sim.step().is_err() {
                break;
            }
        }
    }
    assert!(scenarios > 100, "the scenarios load ({scenarios})");
    // Many scenarios leave a job waiting: the replays skip them.
    assert!(skipped > 50, "jobs skipped over all scenarios: {skipped}");
    let settled = SETTLED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(settled > 10, "cycles answered again without a session: {settled}");
}

fn profile(yaml: &str) -> Profile {
    let reg = volcano_builtin::registries();
    Profile::from_yaml(yaml, &reg).expect("a valid configuration")
}

/// Volcano's default configuration.
const CONF: &str = volcano_api::conf::DEFAULT_SCHEDULER_CONF;

/// Two 6-cpu nodes, each with 4 cpus used by a running pod, and a gang of two 3-cpu pods
/// that cannot be placed until a running pod is gone.
fn waiting_gang() -> ClusterObjects {
    let mut o = ClusterObjects::default();
    o.queues.push(Arc::new(queue("default").build()));
    for n in ["n1", "n2"] {
        o.nodes.push(Arc::new(node(n, "6", "8Gi").build()));
        o.pods.push(Arc::new(pod("ns", &format!("run-{n}")).cpu_mem("4", "1Gi").running_on(n).build().into()));
    }
    o.pod_groups.push(Arc::new(pod_group("ns", "gang", 2).phase(volcano_api::crd::PodGroupPhase::Inqueue).build()));
    for i in 0..2 {
        o.pods.push(Arc::new(pod("ns", &format!("gang-{i}")).group("gang").cpu_mem("3", "1Gi").build().into()));
    }
    o
}

fn binds(outcome: &CycleOutcome) -> usize {
    outcome.effects.iter().filter(|e| matches!(e, volcano_framework::Effect::Bind { .. })).count()
}

fn update(snap: &mut Snapshot, changes: Changes) {
    assert!(snap.update(&changes, &[], &[SCHEDULER_NAME]).expect("valid changes"), "applied in place");
}

/// The default configuration, [`waiting_gang`]'s objects, their kept snapshot and a first
/// cycle over it.
fn first_cycle() -> (Profile, ClusterObjects, Snapshot, CycleOutcome) {
    let conf = profile(CONF);
    let objects = waiting_gang();
    let snap = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
    let first = cycle(&snap, &conf, 0);
    (conf, objects, snap, first)
}

#[test]
fn a_failed_gang_is_skipped_until_a_node_frees_room() {
    let (conf, objects, mut snap, first) = first_cycle();
    assert_eq!(binds(&first), 0);
    assert_eq!(first.metrics.skipped_tries, 0);
    snap.keep_retries(first.retries.clone());
    assert_eq!(snap.retries().map(|m| m.len()), Some(1));
    let second = cycle(&snap, &conf, 0);
    assert_eq!(second.metrics.skipped_tries, 1, "the same state: skipped");
    assert_eq!(second.effects, first.effects);
    snap.keep_retries(second.retries.clone());

    // Writes that scheduling does not read keep the revision and the memory: a condition
    // on a waiting pod, a node's heartbeat.
    let revision = snap.revision();
    let mut waiting = (*objects.pods[2]).clone();
    waiting.status.get_or_insert_with(Default::default).conditions =
        Some(vec![PodCondition { type_: "PodScheduled".into(), status: "False".into(), ..Default::default() }]);
    let mut beat = (*objects.nodes[0]).clone();
    beat.status.get_or_insert_with(Default::default).conditions =
        Some(vec![NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() }]);
    update(
        &mut snap,
        Changes {
            pods: vec![("ns/gang-0".into(), Some(Arc::new(waiting)))],
            nodes: vec![("n1".into(), Some(Arc::new(beat)))],
            ..Default::default()
        },
    );
    assert_eq!(snap.revision(), revision, "nothing scheduling reads changed");
    assert_eq!(cycle(&snap, &conf, 0).metrics.skipped_tries, 1);

    // A running pod finishes: n1 has room for the gang, which is tried again and placed.
    let mut done = (*objects.pods[0]).clone();
    done.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
    update(&mut snap, Changes { pods: vec![("ns/run-n1".into(), Some(Arc::new(done)))], ..Default::default() });
    assert_ne!(snap.revision(), revision);
    assert!(snap.retries().is_none(), "the memory is forgotten with the change");
    let third = cycle(&snap, &conf, 0);
    assert_eq!(third.metrics.skipped_tries, 0);
    assert_eq!(binds(&third), 2, "the gang's two pods are bound");
}

#[test]
fn a_memory_is_only_kept_for_the_revision_it_was_made_at() {
    let (conf, objects, mut snap, first) = first_cycle();
    // The kept snapshot changed while the cycle ran (a node's allocatable grew).
    let bigger = node("n2", "10", "8Gi").build();
    update(&mut snap, Changes { nodes: vec![("n2".into(), Some(Arc::new(bigger)))], ..Default::default() });
    snap.keep_retries(first.retries);
    assert!(snap.retries().is_none(), "a memory of another revision is refused");
    assert_eq!(binds(&cycle(&snap, &conf, 0)), 2, "n2 now holds both pods of the gang");
    // A rebuilt snapshot of the same objects is a new revision too.
    let built = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
    assert_ne!(built.revision(), Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap().revision());
}

#[test]
fn another_configuration_or_a_clock_reading_plugin_replays_nothing() {
    let (conf, _, mut snap, first) = first_cycle();
    snap.keep_retries(first.retries);
    assert_eq!(cycle(&snap, &conf, 0).metrics.skipped_tries, 1, "the same configuration replays");
    let other = profile(&CONF.replace("  - name: nodeorder\n", "  - name: nodeorder\n  - name: binpack\n"));
    let outcome = cycle(&snap, &other, 0);
    assert_eq!(outcome.metrics.skipped_tries, 0, "the memory was made under another configuration");

    // sla with a waiting time permits jobs by the clock: nothing is remembered.
    let sla = profile(&format!("{CONF}  - name: sla\n    arguments:\n      sla-waiting-time: 1h\n"));
    let outcome = cycle(&snap, &sla, 0);
    assert!(outcome.retries.is_none());
    // Without a waiting time it does not read the clock.
    let plain = profile(&format!("{CONF}  - name: sla\n"));
    assert!(cycle(&snap, &plain, 0).retries.is_some());
}

/// The objects of `cluster` as changes of every pod and PodGroup (what a kept snapshot sees
/// when the cycle's writes come back through the watches).
fn all_as_changes(cluster: &volcano_sim::Cluster) -> Changes {
    let objects = cluster.objects();
    let key = |ns: &Option<String>, name: &Option<String>| {
        format!("{}/{}", ns.as_deref().unwrap_or(""), name.as_deref().unwrap_or(""))
    };
    Changes {
        pods: objects.pods.iter().map(|p| (key(&p.metadata.namespace, &p.metadata.name), Some(p.clone()))).collect(),
        pod_groups: (objects.pod_groups.iter())
            .map(|g| (key(&g.metadata.namespace, &g.metadata.name), Some(g.clone())))
            .collect(),
        ..Default::default()
    }
}

#[test]
fn a_cycle_that_changed_nothing_is_answered_again_until_any_object_changes() {
    let (conf, objects, mut snap, first) = first_cycle();
    assert!(!first.effects.is_empty(), "the first cycle writes the gang's status and conditions");
    assert!(!first.retries.as_ref().unwrap().is_settled(), "it tried the gang and wrote");
    // The writes come back: nothing scheduling reads changed, so the memory is kept.
    let mut cluster = volcano_sim::Cluster::from_objects(objects.clone());
    cluster.apply_effects(&first.effects, 1, 0).expect("the effects apply");
    let revision = snap.revision();
    update(&mut snap, all_as_changes(&cluster));
    assert_eq!(snap.revision(), revision);
    // Without the first cycle's memory, a cycle tries the gang again and writes nothing,
    // but is not settled: the next cycle skips the gang, which its metric facts say.
    let fresh = cycle(&snap, &conf, 0);
    assert_eq!((fresh.metrics.skipped_tries, fresh.effects.len()), (0, 0));
    assert!(!fresh.retries.as_ref().unwrap().is_settled(), "it tried the gang");
    snap.keep_retries(fresh.retries.clone());

    // The second cycle skips the gang and writes nothing: settled.
    let second = cycle(&snap, &conf, 0);
    assert_eq!((second.metrics.skipped_tries, second.effects.len()), (1, 0));
    assert!(second.retries.as_ref().unwrap().is_settled());
    snap.keep_retries(second.retries.clone());
    // The third is the second's outcome again, to the metric facts, without a session (an
    // observer would see none).
    let third = cycle(&snap, &conf, 0);
    assert_eq!(third.effects, second.effects);
    assert_eq!(third.pending_reasons, second.pending_reasons);
    assert_eq!(third.queues, second.queues);
    assert_eq!(third.metrics, second.metrics);
    assert!(Arc::ptr_eq(third.retries.as_ref().unwrap(), second.retries.as_ref().unwrap()));

    // Any object that changes, even in what scheduling does not read, makes the next cycle
    // a session again: here someone overwrites a waiting pod's condition, which the session
    // writes back.
    let objects_now = cluster.objects();
    let gang0 = objects_now.pods.iter().find(|p| p.metadata.name.as_deref() == Some("gang-0")).unwrap();
    let mut overwritten = (**gang0).clone();
    overwritten.status.get_or_insert_with(Default::default).conditions =
        Some(vec![PodCondition { type_: "PodScheduled".into(), status: "False".into(), ..Default::default() }]);
    let state = snap.state();
    update(&mut snap, Changes { pods: vec![("ns/gang-0".into(), Some(Arc::new(overwritten)))], ..Default::default() });
    assert_eq!(snap.revision(), revision, "nothing scheduling reads changed");
    assert_ne!(snap.state(), state);
    let fourth = cycle(&snap, &conf, 0);
    assert_eq!(fourth.metrics.skipped_tries, 1, "the gang is still skipped");
    assert_eq!(fourth.effects.len(), 1, "the pod's condition is written back: {:?}", fourth.effects);
    assert!(!fourth.retries.as_ref().unwrap().is_settled(), "it wrote");
}

/// Three 4-cpu nodes (1 cpu used on the first), a gang of four 3-cpu pods (three fit, one
/// per node: it is rolled back with three placed) and a one-pod job of 1 cpu that fits.
fn almost_fitting_gang() -> ClusterObjects {
    let mut o = ClusterObjects::default();
    o.queues.push(Arc::new(queue("default").build()));
    for n in ["n1", "n2", "n3"] {
        o.nodes.push(Arc::new(node(n, "4", "8Gi").build()));
    }
    o.pods.push(Arc::new(pod("ns", "run-n1").cpu_mem("1", "1Gi").running_on("n1").build().into()));
    let inqueue = volcano_api::crd::PodGroupPhase::Inqueue;
    o.pod_groups.push(Arc::new(pod_group("ns", "big", 4).phase(inqueue).build()));
    for i in 0..4 {
        o.pods.push(Arc::new(pod("ns", &format!("big-{i}")).group("big").cpu_mem("3", "1Gi").build().into()));
    }
    o.pod_groups.push(Arc::new(pod_group("ns", "small", 1).phase(inqueue).build()));
    o.pods.push(Arc::new(pod("ns", "small-0").group("small").cpu_mem("1", "1Gi").build().into()));
    o
}

/// The pods of `objects` that `outcome` binds, as bound and running on their nodes.
fn bound_pods(
    objects: &ClusterObjects,
    outcome: &CycleOutcome,
) -> Vec<(String, Option<Arc<volcano_framework::pod::SchedPod>>)> {
    let mut out = Vec::new();
    for e in &outcome.effects {
        if let volcano_framework::Effect::Bind { pod, node, .. } = e {
            let p = objects.pods.iter().find(|p| p.metadata.name.as_deref() == Some(pod.name())).expect("a bound pod");
            let mut p = (**p).clone();
            p.set_node_name(Some(node.to_string()));
            p.status.get_or_insert_with(Default::default).phase = Some("Running".into());
            out.push((pod.key().to_string(), Some(Arc::new(p))));
        }
    }
    out
}

#[test]
fn a_rolled_back_gang_is_skipped_while_no_node_gains_room() {
    let conf = profile(CONF);
    let objects = almost_fitting_gang();
    let mut snap = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
    let first = cycle(&snap, &conf, 0);
    assert_eq!(binds(&first), 1, "the small job is bound, the gang rolled back");
    snap.keep_retries(first.retries.clone());
    let growth = snap.growth();

    // A bind not seen yet: the snapshot has more room than the gang's attempt saw, so the
    // gang is tried again (and fails again).
    let mut unseen = snap.clone();
    let tried = cycle(&unseen, &conf, 0);
    assert_eq!(tried.metrics.skipped_tries, 1, "the same revision: the exact replay");
    let mut blocker = (*objects.pods[5]).clone();
    blocker.metadata.labels = Some([("x".to_string(), "y".to_string())].into_iter().collect());
    update(&mut unseen, Changes { pods: vec![("ns/small-0".into(), Some(Arc::new(blocker)))], ..Default::default() });
    assert_eq!(unseen.growth(), growth, "a pending pod's change gives no room");
    assert_eq!(cycle(&unseen, &conf, 0).metrics.skipped_tries, 0, "the session's bind is not in the snapshot");

    // The bind seen: a new revision, the same growth, and the gang is skipped by its proof;
    // a cycle over a fresh snapshot of the same objects places the same (nothing).
    update(&mut snap, Changes { pods: bound_pods(&objects, &first), ..Default::default() });
    assert_eq!(snap.growth(), growth, "a bind takes room");
    let second = cycle(&snap, &conf, 0);
    assert_eq!(second.metrics.skipped_tries, 1, "skipped by its room proof");
    assert_eq!(binds(&second), 0);
    let mut now = objects.clone();
    for (key, pod) in bound_pods(&objects, &first) {
        let i = now.pods.iter().position(|p| format!("ns/{}", p.metadata.name.as_deref().unwrap()) == key).unwrap();
        now.pods[i] = pod.unwrap();
    }
    let fresh = cycle(&Snapshot::build(&now, &[SCHEDULER_NAME]).unwrap(), &conf, 0);
    assert_eq!(fresh.metrics.skipped_tries, 0);
    assert_eq!(binds(&fresh), 0, "tried, the gang fails as the proof says");
    assert_eq!(fresh.pending_reasons.keys().collect::<Vec<_>>(), second.pending_reasons.keys().collect::<Vec<_>>());
    snap.keep_retries(second.retries.clone());

    // The pod that ran before finishes: its node gains room and the proof ends. The gang is
    // tried again (and fails again: a 4-cpu node still holds one 3-cpu pod).
    let mut done = (*objects.pods[0]).clone();
    done.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
    update(&mut snap, Changes { pods: vec![("ns/run-n1".into(), Some(Arc::new(done)))], ..Default::default() });
    assert_ne!(snap.growth(), growth, "a pod that finished frees room");
    assert_eq!(cycle(&snap, &conf, 0).metrics.skipped_tries, 0, "tried again");
}

/// The node each pod is bound to by `outcome`.
fn bound_nodes(outcome: &CycleOutcome) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = outcome
        .effects
        .iter()
        .filter_map(|e| match e {
            volcano_framework::Effect::Bind { pod, node, .. } => Some((pod.name().to_string(), node.to_string())),
            _ => None,
        })
        .collect();
    out.sort();
    out
}

/// What plugins derive from the nodes alone (node selector and toleration verdicts, score
/// partitions) is kept with the snapshot while its nodes do not change, and forgotten when
/// one does: a cycle over the kept snapshot places pods as a cycle over a fresh build.
#[test]
fn verdicts_kept_with_the_nodes_follow_a_node_change() {
    let conf = profile(CONF);
    let nodes = |a: (&str, bool), b: (&str, bool)| -> Vec<Arc<k8s_openapi::api::core::v1::Node>> {
        [("n1", a), ("n2", b)]
            .into_iter()
            .map(|(name, (zone, tainted))| {
                let mut n = node(name, "8", "8Gi").label("zone", zone);
                if tainted {
                    n = n.taint("maintenance", "planned", "PreferNoSchedule");
                }
                Arc::new(n.build())
            })
            .collect()
    };
    let mut objects = ClusterObjects::default();
    objects.queues.push(Arc::new(queue("default").build()));
    objects.nodes = nodes(("a", false), ("b", true));
    for (i, zone) in ["b", "a", "b"].into_iter().enumerate() {
        let group = format!("g{i}");
        objects
            .pod_groups
            .push(Arc::new(pod_group("ns", &group, 1).phase(volcano_api::crd::PodGroupPhase::Inqueue).build()));
        let p = pod("ns", &format!("p{i}")).group(&group).cpu_mem("1", "1Gi").node_selector("zone", zone);
        objects.pods.push(Arc::new(p.build().into()));
    }
    // A pod without a selector: its score partition reads the PreferNoSchedule taint.
    objects
        .pod_groups
        .push(Arc::new(pod_group("ns", "free", 1).phase(volcano_api::crd::PodGroupPhase::Inqueue).build()));
    objects.pods.push(Arc::new(pod("ns", "free").group("free").cpu_mem("1", "1Gi").build().into()));

    let mut kept = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
    let first = cycle(&kept, &conf, 0);
    assert_eq!(
        bound_nodes(&first),
        [("free", "n1"), ("p0", "n2"), ("p1", "n1"), ("p2", "n2")].map(|(p, n)| (p.to_string(), n.to_string()))
    );
    let derived = format!("{:?}", kept.node_derived());
    assert!(derived.contains("predicates/static-parts") && derived.contains("nodeorder/partitions"), "{derived}");

    // A change that is not a node's keeps them.
    let mut waiting = (*objects.pods[3]).clone();
    waiting.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    update(&mut kept, Changes { pods: vec![("ns/free".into(), Some(Arc::new(waiting)))], ..Default::default() });
    assert_eq!(format!("{:?}", kept.node_derived()), derived, "kept through a pod change");
    assert_eq!(bound_nodes(&cycle(&kept, &conf, 0)), bound_nodes(&first));

    // The zones swap and the taint moves: the kept snapshot forgets what it derived, and
    // places every pod where a fresh build does.
    let swapped = nodes(("b", true), ("a", false));
    update(
        &mut kept,
        Changes {
            nodes: swapped.iter().map(|n| (n.metadata.name.clone().unwrap(), Some(n.clone()))).collect(),
            ..Default::default()
        },
    );
    assert!(!format!("{:?}", kept.node_derived()).contains("predicates"), "forgotten with the node change");
    objects.nodes = swapped;
    let fresh = cycle(&Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap(), &conf, 0);
    let again = cycle(&kept, &conf, 0);
    assert_eq!(
        bound_nodes(&again),
        [("free", "n2"), ("p0", "n1"), ("p1", "n2"), ("p2", "n1")].map(|(p, n)| (p.to_string(), n.to_string()))
    );
    assert_eq!(again.effects, fresh.effects);
}
