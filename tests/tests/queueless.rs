//! A PodGroup whose queue does not exist (deleted under its jobs, or never created): nothing
//! of it is scheduled, its running pods keep their room, and the cycle says why once — the
//! `Unschedulable` condition `QueueNotFound`, a `Warning` event, `PodScheduled=False` on its
//! waiting pods — and `explain` says the same.

mod common;

use std::sync::Arc;

use common::scenarios_dir;
use volcano_framework::{run_cycle, CycleContext, Effect, NoObserver, SessionOptions, Snapshot};
use volcano_testkit::queue;

#[test]
fn a_pod_group_without_its_queue_is_told_once_and_explained() {
    let (mut sim, _) = common::load(&scenarios_dir().join("status/queue-not-found.yaml")).expect("the scenario loads");
    let first = sim.step().expect("cycle 1").clone();
    let warnings: Vec<_> = first.events.iter().filter(|e| e.reason == "QueueNotFound").collect();
    assert_eq!(warnings.len(), 1, "one event: {:?}", first.events);
    assert_eq!(warnings[0].object, "PodGroup/default/orphan");
    assert_eq!(warnings[0].type_, "Warning");
    assert!(warnings[0].message.starts_with("queue gone does not exist"), "{}", warnings[0].message);
    assert!(first.pod_group_updates.iter().any(|g| g == "default/orphan"), "{:?}", first.pod_group_updates);
    assert!(first.pod_condition_updates.iter().any(|p| p == "default/orphan-2"), "the waiting pod is told");
    assert!(
        !first.pod_condition_updates.iter().any(|p| p == "default/orphan-0" || p == "default/orphan-1"),
        "running pods are left alone: {:?}",
        first.pod_condition_updates
    );
    assert!(first.binds.is_empty(), "neither the orphan nor the other job fits: {:?}", first.binds);

    // Once written, nothing is said again.
    let second = sim.step().expect("cycle 2").clone();
    assert!(second.events.iter().all(|e| e.reason != "QueueNotFound"), "{:?}", second.events);
    assert!(!second.pod_group_updates.iter().any(|g| g == "default/orphan"), "{:?}", second.pod_group_updates);
    assert!(!second.pod_condition_updates.iter().any(|p| p.starts_with("default/orphan")));
    let waiting: Vec<(&String, &String)> = sim.waiting().collect();
    assert!(waiting.iter().any(|(k, why)| *k == "default/orphan" && why.contains("queue gone")), "{waiting:?}");

    let e = sim.explain("default/orphan").expect("explain runs").expect("the PodGroup is found");
    assert_eq!((e.queue.as_str(), e.ready, e.min_member), ("gone", false, 2));
    assert_eq!(e.tasks.get("Pending"), Some(&1));
    assert_eq!(e.tasks.get("Running"), Some(&2));
    assert!(e.not_admitted.as_deref().is_some_and(|m| m.contains("queue gone does not exist")), "{e}");
}

#[test]
fn a_pod_group_whose_queue_is_back_loses_the_condition() {
    let (mut sim, _) = common::load(&scenarios_dir().join("status/queue-not-found.yaml")).expect("the scenario loads");
    sim.step().expect("cycle 1");
    let mut objects = sim.cluster().objects();
    objects.queues.push(Arc::new(queue("gone").weight(1).build()));
    let names: Vec<&str> = sim.scheduler_names().iter().map(String::as_str).collect();
    let snap = Snapshot::build(&objects, &names).expect("the snapshot builds");
    assert!(snap.queueless_pod_groups().is_empty());
    let cx = CycleContext { cycle: 2, now_ms: sim.cycle_time_ms(2), options: SessionOptions::default() };
    let out = run_cycle(snap, sim.profile(), &cx, &mut NoObserver);
    let status = out
        .effects
        .iter()
        .find_map(|e| match e {
            Effect::PodGroupStatus { pod_group, status } if pod_group.key() == "default/orphan" => Some(status),
            _ => None,
        })
        .expect("the orphan's status is written");
    assert!(status.conditions.iter().all(|c| c.reason.as_deref() != Some("QueueNotFound")), "{:?}", status.conditions);
}
