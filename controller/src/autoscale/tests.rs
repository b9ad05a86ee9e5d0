use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use volcano_api::crd::{
    PodGroup, PodGroupCondition, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec, QueueStatus,
};
use volcano_api::job::{
    Job, JobPhase, JobSpec, JobState, JobStatus, TaskSpec, AUTOSCALE_ANNOTATION, AUTOSCALE_STATE_ANNOTATION,
};

use super::*;

const S: i64 = 1000;
const NOW: i64 = 1_000_000 * S;

fn gpus(n: &str) -> BTreeMap<String, Quantity> {
    [("cpu".to_string(), Quantity("1".into())), ("nvidia.com/gpu".to_string(), Quantity(n.into()))].into()
}

fn job(name: &str, queue: &str, replicas: i32, bounds: &str, state: Option<&State>) -> Job {
    let mut annotations: BTreeMap<String, String> = [(AUTOSCALE_ANNOTATION.to_string(), bounds.to_string())].into();
    if let Some(s) = state {
        annotations.insert(AUTOSCALE_STATE_ANNOTATION.to_string(), s.to_annotation());
    }
    let task = TaskSpec {
        name: Some("worker".into()),
        replicas,
        min_available: Some(1),
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements { requests: Some(gpus("1")), ..Default::default() }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        },
        ..Default::default()
    };
    let mut j = Job::new(
        name,
        JobSpec { min_available: 1, queue: Some(queue.into()), tasks: vec![task], ..Default::default() },
    );
    j.metadata.namespace = Some("ml".into());
    j.metadata.uid = Some(format!("uid-{name}"));
    j.metadata.annotations = Some(annotations);
    j.status = Some(JobStatus {
        state: JobState { phase: Some(JobPhase::Running), ..Default::default() },
        ..Default::default()
    });
    j
}

fn group(
    name: &str,
    queue: &str,
    owner: Option<&Job>,
    phase: PodGroupPhase,
    unschedulable: bool,
    need: &str,
) -> PodGroup {
    let mut g = PodGroup::new(
        name,
        PodGroupSpec {
            min_member: 1,
            queue: Some(queue.into()),
            min_resources: Some(gpus(need)),
            ..Default::default()
        },
    );
    g.metadata.namespace = Some("ml".into());
    g.metadata.owner_references = owner.map(|j| {
        vec![OwnerReference {
            api_version: "batch.volcano.sh/v1alpha1".into(),
            kind: "Job".into(),
            name: j.metadata.name.clone().unwrap(),
            uid: j.metadata.uid.clone().unwrap(),
            ..Default::default()
        }]
    });
    let conditions = if unschedulable {
        vec![PodGroupCondition { type_: "Unschedulable".into(), status: "True".into(), ..Default::default() }]
    } else {
        vec![]
    };
    g.status = Some(PodGroupStatus { phase: Some(phase), conditions, ..Default::default() });
    g
}

fn pod(job: &Job, index: i32, bound: bool) -> Pod {
    let name = job.metadata.name.clone().unwrap();
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("{name}-worker-{index}")),
            namespace: Some("ml".into()),
            annotations: Some(
                [
                    ("volcano.sh/task-spec".to_string(), "worker".to_string()),
                    ("volcano.sh/task-index".to_string(), index.to_string()),
                ]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(PodSpec { node_name: bound.then(|| format!("n{index}")), ..Default::default() }),
        status: Some(PodStatus { phase: Some(if bound { "Running" } else { "Pending" }.into()), ..Default::default() }),
    }
}

fn queue(name: &str, reclaimable: bool) -> Queue {
    let mut q = Queue::new(name, QueueSpec { reclaimable: Some(reclaimable), ..Default::default() });
    q.status = Some(QueueStatus::default());
    q
}

struct World {
    jobs: Vec<Job>,
    groups: Vec<PodGroup>,
    queues: Vec<Queue>,
    pods: BTreeMap<String, Vec<Pod>>,
}

impl World {
    fn new(queues: Vec<Queue>) -> World {
        World { jobs: vec![], groups: vec![], queues, pods: BTreeMap::new() }
    }

    /// An autoscaled job, running, with `bound` of its pods bound (indexes 0..pods).
    fn elastic(&mut self, j: Job, pods: i32, bound: i32) -> &mut Self {
        self.groups.push(group(
            &format!("{}-pg", j.metadata.name.clone().unwrap()),
            j.spec.queue.as_deref().unwrap(),
            Some(&j),
            PodGroupPhase::Running,
            false,
            "1",
        ));
        self.pods.insert(job_key(&j), (0..pods).map(|i| pod(&j, i, i < bound)).collect());
        self.jobs.push(j);
        self
    }

    fn decide(&self, now: i64) -> Vec<JobDecision> {
        let classes = BTreeMap::new();
        let view = View {
            jobs: self.jobs.iter().collect(),
            pod_groups: self.groups.iter().collect(),
            queues: self.queues.iter().collect(),
            pods: self.pods.iter().map(|(k, v)| (k.clone(), v.iter().map(PodParts::from).collect())).collect(),
            priority_classes: &classes,
        };
        decide(&view, now, Settings::default())
    }
}

fn one(d: &[JobDecision]) -> (&JobDecision, (i32, i32)) {
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].resizes.len(), 1, "{d:#?}");
    (&d[0], (d[0].resizes[0].from, d[0].resizes[0].to))
}

#[test]
fn a_settled_job_with_no_gang_waiting_doubles_up_to_its_maximum_and_is_probed() {
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 3, "worker=1..5", None), 3, 3);
    let d = w.decide(NOW);
    let (d, (from, to)) = one(&d);
    assert_eq!((from, to), (3, 5), "doubling stops at the maximum");
    assert_eq!(d.resizes[0].reason, Reason::Grow);
    assert_eq!(d.resizes[0].reason.event_reason(), "AutoscaleOut");
    assert_eq!(d.state, State { last_resize_ms: Some(NOW), probe_until_ms: Some(NOW + 60 * S), ..Default::default() });
    assert!(d.resizes[0].message().contains("task worker: 3 → 5 replicas"), "{}", d.resizes[0].message());

    // At its maximum: nothing to do.
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 5, "worker=1..5", None), 5, 5);
    assert!(w.decide(NOW).is_empty());
}

#[test]
fn a_job_not_settled_or_in_its_cooldown_does_not_grow() {
    // A pod not bound yet.
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 2, 1);
    assert!(w.decide(NOW).is_empty());
    // Resized 10 s ago.
    let recent = State { last_resize_ms: Some(NOW - 10 * S), ..Default::default() };
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", Some(&recent)), 2, 2);
    assert!(w.decide(NOW).is_empty());
    assert_eq!(one(&w.decide(NOW + 50 * S)).1, (2, 4), "after the 60 s cooldown");
    // Its PodGroup not Running (the gang is being placed).
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 2, 2);
    w.groups[0].status.as_mut().unwrap().phase = Some(PodGroupPhase::Inqueue);
    assert!(w.decide(NOW).is_empty());
    // Pods leaving (a scale-in in its grace period).
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 3, 3);
    assert!(w.decide(NOW).is_empty());
}

#[test]
fn a_probe_that_binds_everything_resets_the_backoff_and_one_that_does_not_gives_the_pods_back() {
    let probing = State {
        last_resize_ms: Some(NOW - 30 * S),
        probe_until_ms: Some(NOW + 30 * S),
        backoff_ms: 120 * S,
        ..Default::default()
    };
    // All 4 bound before the probe time: the probe ends, the back-off resets.
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 4, "worker=1..8", Some(&probing)), 4, 4);
    let d = w.decide(NOW);
    assert_eq!(d.len(), 1);
    assert!(d[0].resizes.is_empty());
    assert_eq!(d[0].state, State { last_resize_ms: Some(NOW - 30 * S), ..Default::default() });

    // 3 of 4 bound, before the probe time: wait.
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 4, "worker=1..8", Some(&probing)), 4, 3);
    assert!(w.decide(NOW).is_empty());
    // At the probe time: back to the 3 bound, and the back-off doubles (120 → 240 s).
    let d = w.decide(NOW + 30 * S);
    let (d, (from, to)) = one(&d);
    assert_eq!((from, to), (4, 3));
    assert_eq!(d.resizes[0].reason, Reason::Revert { bound: 3, asked: 4, backoff_ms: 240 * S });
    assert_eq!(d.resizes[0].reason.event_reason(), "AutoscaleReverted");
    assert_eq!(d.state.next_grow_ms, Some(NOW + 30 * S + 240 * S));
    assert_eq!(d.state.probe_until_ms, None);

    // A first failure waits the cooldown; never below the minimum.
    let first = State { probe_until_ms: Some(NOW), ..Default::default() };
    let mut w = World::new(vec![queue("a", true)]);
    w.elastic(job("hvd", "a", 4, "worker=2..8", Some(&first)), 4, 0);
    let d = w.decide(NOW);
    let (d, (_, to)) = one(&d);
    assert_eq!(to, 2, "the task's minimum");
    assert_eq!(d.state.backoff_ms, 60 * S);
}

#[test]
fn a_waiting_gang_of_a_queue_that_may_reclaim_shrinks_the_job_by_what_it_needs() {
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    w.elastic(job("hvd", "a", 6, "worker=1..8", None), 6, 6);
    w.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "3"));
    let d = w.decide(NOW);
    let (d, (from, to)) = one(&d);
    assert_eq!((from, to), (6, 3));
    match &d.resizes[0].reason {
        Reason::Yield { gang, queue, frees } => {
            assert_eq!((gang.as_str(), queue.as_str()), ("ml/big", "b"));
            assert_eq!(frees, "3 pod(s): nvidia.com/gpu 3");
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(d.resizes[0].reason.event_reason(), "AutoscaleIn");
    assert_eq!(d.state.next_grow_ms, Some(NOW + 60 * S));
    assert_eq!(d.state.last_yield_ms, Some(NOW));

    // The same gang once the 3 pods are gone, its status not updated yet: within the
    // cooldown, the job does not give again.
    let mut w3 = World::new(vec![queue("a", true), queue("b", true)]);
    w3.elastic(job("hvd", "a", 3, "worker=1..8", Some(&d.state)), 3, 3);
    w3.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "3"));
    assert!(w3.decide(NOW + 10 * S).is_empty());
    assert_eq!(one(&w3.decide(NOW + 60 * S)).1, (3, 1), "a cooldown later, it gives again");

    // The same gang while the 3 pods are leaving: nothing more.
    let mut w2 = World::new(vec![queue("a", true), queue("b", true)]);
    w2.elastic(job("hvd", "a", 3, "worker=1..8", Some(&d.state)), 6, 6);
    w2.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "3"));
    assert!(w2.decide(NOW + S).is_empty(), "{:#?}", w2.decide(NOW + S));

    // Not below the minimum, whatever the gang needs.
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    w.elastic(job("hvd", "a", 6, "worker=4..8", None), 6, 6);
    w.groups.push(group("big", "b", None, PodGroupPhase::Pending, true, "16"));
    assert_eq!(one(&w.decide(NOW)).1, (6, 4));
}

#[test]
fn gangs_that_may_not_take_from_the_job_neither_shrink_it_nor_stop_it_growing() {
    // The job's queue is not reclaimable: a gang of another queue cannot take from it.
    let mut w = World::new(vec![queue("a", false), queue("b", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 2, 2);
    w.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "3"));
    assert_eq!(one(&w.decide(NOW)).1, (2, 4));
    // ... but one of its own queue can.
    w.groups.push(group("mine", "a", None, PodGroupPhase::Inqueue, true, "1"));
    assert_eq!(one(&w.decide(NOW)).1, (2, 1));

    // A gang waiting for its own queue's capability is not helped by freeing GPUs elsewhere.
    let mut capped = queue("b", true);
    capped.spec.capability = Some([("nvidia.com/gpu".to_string(), Quantity("4".into()))].into());
    capped.status = Some(QueueStatus {
        allocated: Some([("nvidia.com/gpu".to_string(), Quantity("2".into()))].into()),
        ..Default::default()
    });
    let mut w = World::new(vec![queue("a", true), capped]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 2, 2);
    w.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "3"));
    assert_eq!(one(&w.decide(NOW)).1, (2, 4));

    // A PodGroup the scheduler has not tried yet (no Unschedulable condition) is not waiting.
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    w.elastic(job("hvd", "a", 2, "worker=1..8", None), 2, 2);
    w.groups.push(group("new", "b", None, PodGroupPhase::Pending, false, "3"));
    assert_eq!(one(&w.decide(NOW)).1, (2, 4));
}

#[test]
fn donors_give_lowest_priority_then_most_recently_resized_first() {
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    let old = State { last_resize_ms: Some(NOW - 600 * S), ..Default::default() };
    let recent = State { last_resize_ms: Some(NOW - 100 * S), ..Default::default() };
    w.elastic(job("early", "a", 4, "worker=1..4", Some(&old)), 4, 4);
    w.elastic(job("late", "a", 4, "worker=2..4", Some(&recent)), 4, 4);
    w.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "4"));
    let d = w.decide(NOW);
    let got: Vec<(&str, i32, i32)> =
        d.iter().flat_map(|d| d.resizes.iter().map(|r| (r.job.as_str(), r.from, r.to))).collect();
    assert_eq!(got, vec![("ml/early", 4, 2), ("ml/late", 4, 2)], "late gives 2 (its minimum), early the rest");

    // A higher priority keeps its pods while a lower one can give.
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    let mut high = job("high", "a", 4, "worker=1..4", None);
    high.spec.priority_class_name = Some("high".into());
    w.elastic(high, 4, 4);
    w.elastic(job("low", "a", 4, "worker=1..4", None), 4, 4);
    w.groups.push(group("big", "b", None, PodGroupPhase::Inqueue, true, "2"));
    let classes: BTreeMap<String, i32> = [("high".to_string(), 1000)].into();
    let view = View {
        jobs: w.jobs.iter().collect(),
        pod_groups: w.groups.iter().collect(),
        queues: w.queues.iter().collect(),
        pods: w.pods.iter().map(|(k, v)| (k.clone(), v.iter().map(PodParts::from).collect())).collect(),
        priority_classes: &classes,
    };
    let d = decide(&view, NOW, Settings::default());
    let got: Vec<(&str, i32, i32)> =
        d.iter().flat_map(|d| d.resizes.iter().map(|r| (r.job.as_str(), r.from, r.to))).collect();
    assert_eq!(got, vec![("ml/low", 4, 2)]);
}

#[test]
fn jobs_without_the_annotation_or_not_running_are_left_alone() {
    let mut w = World::new(vec![queue("a", true)]);
    let mut j = job("plain", "a", 2, "worker=1..8", None);
    j.metadata.annotations = None;
    w.elastic(j, 2, 2);
    let mut pending = job("pending", "a", 2, "worker=1..8", None);
    pending.status = None;
    w.elastic(pending, 2, 2);
    let mut bad = job("bad", "a", 2, "worker=9..8", None);
    bad.metadata.uid = Some("uid-bad".into());
    w.elastic(bad, 2, 2);
    assert!(w.decide(NOW).is_empty());
}

#[test]
fn the_state_reads_back_and_an_unreadable_one_starts_again() {
    let s = State { last_resize_ms: Some(5), backoff_ms: 7, next_grow_ms: Some(9), ..Default::default() };
    assert_eq!(s.to_annotation(), r#"{"lastResizeMs":5,"backoffMs":7,"nextGrowMs":9}"#);
    let mut j = job("hvd", "a", 2, "worker=1..8", Some(&s));
    assert_eq!(State::of(&j), s);
    j.metadata.annotations.as_mut().unwrap().insert(AUTOSCALE_STATE_ANNOTATION.into(), "{oops".into());
    assert_eq!(State::of(&j), State::default());
}

#[test]
fn a_gang_enqueue_has_not_admitted_waits_once_it_is_a_few_seconds_old_unless_its_queue_is_closed() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let at = |ms: i64| Some(Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap()));
    // No status yet (a Volcano Job's PodGroup before enqueue admits it: no pods, no condition).
    let mut fresh = group("train", "b", None, PodGroupPhase::Pending, false, "2");
    fresh.status = None;
    fresh.metadata.creation_timestamp = at(NOW - S);
    let mut w = World::new(vec![queue("a", true), queue("b", true)]);
    w.elastic(job("hvd", "a", 4, "worker=1..4", None), 4, 4);
    w.groups.push(fresh.clone());
    assert!(w.decide(NOW).is_empty(), "1 s old: the scheduler may not have seen it yet");
    w.groups.last_mut().unwrap().metadata.creation_timestamp = at(NOW - 5 * S);
    assert_eq!(one(&w.decide(NOW)).1, (4, 2), "5 s old and still Pending: it waits");

    // Its queue is closed: it waits for the queue, not for GPUs.
    let mut closed = queue("b", true);
    closed.status = Some(QueueStatus { state: Some(volcano_api::crd::QueueState::Closed), ..Default::default() });
    let mut w = World::new(vec![queue("a", true), closed]);
    w.elastic(job("hvd", "a", 4, "worker=1..4", None), 4, 4);
    fresh.metadata.creation_timestamp = at(NOW - 60 * S);
    w.groups.push(fresh);
    assert!(w.decide(NOW).is_empty());
}
