//! The applier against a mock API server (kube's `tower-test` style): every request the
//! applier sends is recorded and answered by a rule, and the tests check the requests in
//! order. The cycles are the real core's, run on the cache the applier writes to.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::client::Body;
use kube::runtime::watcher::Event;
use kube::Client;
use serde_json::Value;
use tokio::sync::watch;
use volcano_api::crd::{PodGroup, PodGroupSpec, GROUP_NAME_ANNOTATION};
use volcano_framework::{run_cycle, CycleContext, Effect, NoObserver, Profile, TaskStatus};
use volcano_scheduler::applier::{Applier, ApplierConfig};
use volcano_scheduler::cache::ClusterCache;

/// One request the mock API server received.
#[derive(Clone, Debug)]
struct Recorded {
    method: Method,
    path: String,
    body: Value,
}

impl Recorded {
    fn is_event(&self) -> bool {
        self.path.contains("/events")
    }
}

type Responder = Arc<dyn Fn(&Recorded) -> (StatusCode, Value) + Send + Sync>;

/// The requests the mock API server received, in order.
type RequestLog = Arc<Mutex<Vec<Recorded>>>;

/// Starts the mock API server; returns a client to it and the log of requests.
fn mock_api(respond: Responder) -> (Client, Arc<Mutex<Vec<Recorded>>>) {
    mock_api_losing(respond, Arc::new(|_: &Recorded| false))
}

/// [`mock_api`], except that the answers of the requests `lose` picks are lost: the request
/// is acted on (`respond` sees it), and the client gets a broken connection instead of the
/// answer, as when kube-apiserver is killed between the two.
fn mock_api_losing(
    respond: Responder,
    lose: Arc<dyn Fn(&Recorded) -> bool + Send + Sync>,
) -> (Client, Arc<Mutex<Vec<Recorded>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let rec = Recorded { method: parts.method.clone(), path: parts.uri.path().to_string(), body };
            let (status, reply) = respond(&rec);
            let lost = lose(&rec);
            log2.lock().unwrap().push(rec);
            if lost {
                send.send_error(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "connection closed before the answer",
                ));
                continue;
            }
            let response = Response::builder()
                .status(status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    (Client::new(service, "default"), log)
}

/// Answers like an API server that accepts everything: the binding's Status, the object
/// written (or a minimal one) for the rest.
fn accept_all() -> Responder {
    Arc::new(|r: &Recorded| {
        if r.path.ends_with("/binding") {
            return (
                StatusCode::CREATED,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            );
        }
        // The object as written, made whole enough to decode (a real server returns it all).
        let mut obj = if r.body.is_object() { r.body.clone() } else { serde_json::json!({}) };
        let segments: Vec<&str> = r.path.split('/').collect();
        let name = segments.iter().rev().find(|s| **s != "status").copied().unwrap_or("x");
        obj["metadata"]["name"] = Value::String(name.to_string());
        if obj.get("spec").is_none() {
            obj["spec"] = serde_json::json!({});
        }
        (StatusCode::OK, obj)
    })
}

fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

fn node(name: &str, gpus: &str) -> Node {
    let res = quantities(&[("cpu", "32"), ("memory", "256Gi"), ("pods", "110"), ("nvidia.com/gpu", gpus)]);
    Node {
        metadata: ObjectMeta { name: Some(name.into()), uid: Some(format!("uid-{name}")), ..Default::default() },
        status: Some(NodeStatus { allocatable: Some(res.clone()), capacity: Some(res), ..Default::default() }),
        ..Default::default()
    }
}

fn pod(name: &str, group: &str, gpus: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ml".into()),
            uid: Some(format!("uid-{name}")),
            annotations: Some([(GROUP_NAME_ANNOTATION.to_string(), group.to_string())].into_iter().collect()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some("volcano-rs".into()),
            containers: vec![Container {
                name: "c".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "1"), ("nvidia.com/gpu", gpus)])),
                    limits: Some(quantities(&[("nvidia.com/gpu", gpus)])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
    }
}

fn pod_group(name: &str, min_member: i32) -> PodGroup {
    let mut pg = PodGroup::new(name, PodGroupSpec { min_member, queue: Some("default".into()), ..Default::default() });
    pg.metadata.namespace = Some("ml".into());
    pg.metadata.uid = Some(format!("uid-pg-{name}"));
    pg
}

/// A synced cache holding these objects (and queues root and default).
fn cache(nodes: Vec<Node>, pods: Vec<Pod>, groups: Vec<PodGroup>) -> Arc<Mutex<ClusterCache>> {
    let mut c = ClusterCache::new(vec!["volcano-rs".into()], BTreeMap::new());
    c.apply_node(Event::Init);
    nodes.into_iter().for_each(|n| c.apply_node(Event::InitApply(n)));
    c.apply_node(Event::InitDone);
    c.apply_pod(Event::Init);
    pods.into_iter().for_each(|p| c.apply_pod(Event::InitApply(p)));
    c.apply_pod(Event::InitDone);
    c.apply_pod_group(Event::Init);
    groups.into_iter().for_each(|g| c.apply_pod_group(Event::InitApply(g)));
    c.apply_pod_group(Event::InitDone);
    c.apply_queue(Event::Init);
    for mut q in volcano_framework::implicit::default_queues() {
        q.metadata.uid = Some(format!("uid-q-{}", q.metadata.name.clone().unwrap()));
        c.apply_queue(Event::InitApply(q));
    }
    c.apply_queue(Event::InitDone);
    c.apply_priority_class(Event::Init);
    c.apply_priority_class(Event::InitDone);
    // Namespaces and volume objects: none.
    c.list_no_extras();
    assert!(c.synced());
    Arc::new(Mutex::new(c))
}

/// Runs one cycle of the built-in configuration on the cache's snapshot.
fn cycle(cache: &Arc<Mutex<ClusterCache>>, n: u64) -> Vec<Effect> {
    let snap = cache.lock().unwrap().snapshot().expect("a snapshot");
    let profile = Profile::builtin_default(&volcano_builtin::registries()).unwrap();
    let cx = CycleContext { cycle: n, now_ms: 1_780_000_000_000, options: Default::default() };
    run_cycle(snap, &profile, &cx, &mut NoObserver).effects
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_780_000_000).unwrap())
}

fn config() -> ApplierConfig {
    ApplierConfig {
        bind_concurrency: 1,
        status_concurrency: 1,
        event_concurrency: 1,
        request_timeout: Duration::from_secs(5),
        ..Default::default()
    }
}

fn binds(log: &Arc<Mutex<Vec<Recorded>>>) -> Vec<Recorded> {
    log.lock().unwrap().iter().filter(|r| r.path.ends_with("/binding")).cloned().collect()
}

fn status_of(cache: &Arc<Mutex<ClusterCache>>, key: &str) -> TaskStatus {
    let snap = cache.lock().unwrap().snapshot().unwrap();
    snap.tasks.iter().find(|t| &*t.key == key).expect("the task").status
}

#[tokio::test]
async fn binds_go_out_in_effect_order_with_the_pod_uid_as_precondition() {
    let (client, log) = mock_api(accept_all());
    let cache = cache(
        vec![node("n1", "4"), node("n2", "4")],
        vec![pod("train-0", "train", "4"), pod("train-1", "train", "4")],
        vec![pod_group("train", 2)],
    );
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    let effects = cycle(&cache, 1);
    let expected: Vec<(String, String)> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bind { pod, node, .. } => Some((pod.name().to_string(), node.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(expected.len(), 2, "{effects:?}");
    applier.apply(effects, now());
    assert!(applier.flush(Duration::from_secs(5)).await);

    let sent = binds(&log);
    assert_eq!(sent.len(), 2);
    for (r, (pod, node)) in sent.iter().zip(&expected) {
        assert_eq!(r.method, Method::POST);
        assert_eq!(r.path, format!("/api/v1/namespaces/ml/pods/{pod}/binding"));
        assert_eq!(r.body["metadata"]["uid"], format!("uid-{pod}"), "the uid is the precondition");
        assert_eq!(r.body["target"]["kind"], "Node");
        assert_eq!(r.body["target"]["name"], node.as_str());
    }
    assert_eq!(applier.stats().binds.load(std::sync::atomic::Ordering::Relaxed), 2);
    // Bound in the cache until the watch confirms: the next cycle binds nothing again.
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Bound);
    assert!(!cycle(&cache, 2).iter().any(|e| matches!(e, Effect::Bind { .. })), "no pod is bound twice");
}

#[tokio::test]
async fn a_failed_bind_is_not_retried_elsewhere_and_the_pod_is_pending_again() {
    let conflict: Responder = Arc::new(|r: &Recorded| {
        if r.path.ends_with("/binding") {
            return (
                StatusCode::CONFLICT,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                                   "reason": "Conflict", "message": "pod train-0 is already assigned to node n9"}),
            );
        }
        accept_all()(r)
    });
    let (client, log) = mock_api(conflict);
    let cache =
        cache(vec![node("n1", "4"), node("n2", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    assert!(applier.flush(Duration::from_secs(5)).await);
    let sent = binds(&log);
    assert_eq!(sent.len(), 1, "one attempt, not retried onto another node by the applier: {sent:?}");
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Pending, "pending again for the next cycle");
    assert!(cache.lock().unwrap().assumptions().is_empty());
    // A FailedScheduling event says why.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let events: Vec<Recorded> = log.lock().unwrap().iter().filter(|r| r.is_event()).cloned().collect();
    assert!(
        events.iter().any(|e| e.body["reason"] == "FailedScheduling"
            && e.body["note"].as_str().is_some_and(|n| n.contains("already assigned"))),
        "{events:?}"
    );
    // And, as Volcano does, the pod says PodScheduled=False with reason SchedulerError.
    assert!(applier.flush(Duration::from_secs(5)).await);
    let log = log.lock().unwrap();
    let condition = log
        .iter()
        .find(|r| r.method == Method::PATCH && r.path == "/api/v1/namespaces/ml/pods/train-0/status")
        .unwrap_or_else(|| panic!("no pod status write: {log:?}"));
    let c = &condition.body["status"]["conditions"][0];
    assert_eq!((c["type"].as_str(), c["status"].as_str()), (Some("PodScheduled"), Some("False")));
    assert_eq!(c["reason"], "SchedulerError");
    assert!(c["message"].as_str().is_some_and(|m| m.starts_with("failed to bind to node n")), "{c}");
}

#[tokio::test]
async fn statuses_are_written_once_and_not_again_when_nothing_changed() {
    let (client, log) = mock_api(accept_all());
    // A gang of 3 × 4 GPUs on one 4-GPU node: unschedulable.
    let cache = cache(
        vec![node("n1", "4")],
        (0..3).map(|i| pod(&format!("big-{i}"), "big", "4")).collect(),
        vec![pod_group("big", 3)],
    );
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    let first = cycle(&cache, 1);
    assert!(first.iter().any(|e| matches!(e, Effect::PodGroupStatus { .. })));
    assert!(first.iter().any(|e| matches!(e, Effect::PodUnschedulable { .. })));
    applier.apply(first, now());
    assert!(applier.flush(Duration::from_secs(5)).await);
    let writes = |log: &Arc<Mutex<Vec<Recorded>>>| {
        log.lock().unwrap().iter().filter(|r| r.method == Method::PATCH && !r.is_event()).cloned().collect::<Vec<_>>()
    };
    let w1 = writes(&log);
    // The PodGroup is patched as a whole object (no status subresource), pods and queues
    // through their status subresource.
    assert!(w1.iter().any(|r| r.path == "/apis/scheduling.volcano.sh/v1beta1/namespaces/ml/podgroups/big"), "{w1:?}");
    assert_eq!(
        w1.iter()
            .filter(|r| r.path.starts_with("/api/v1/namespaces/ml/pods/big-") && r.path.ends_with("/status"))
            .count(),
        3
    );
    let pg = w1.iter().find(|r| r.path.ends_with("/podgroups/big")).unwrap();
    assert_eq!(pg.body["metadata"]["uid"], "uid-pg-big");
    assert!(pg.body["status"]["conditions"].is_array());

    // Cycle 2 sees the job admitted (Inqueue) and tries to place it: a new condition.
    let c2 = cycle(&cache, 2);
    applier.apply(c2, now());
    assert!(applier.flush(Duration::from_secs(5)).await);
    let w2 = writes(&log);
    let third = cycle(&cache, 3);
    let statuses: Vec<&Effect> = third
        .iter()
        .filter(|e| {
            matches!(e, Effect::PodGroupStatus { .. } | Effect::PodUnschedulable { .. } | Effect::QueueStatus { .. })
        })
        .collect();
    assert!(statuses.is_empty(), "nothing changed, nothing to write: {statuses:?}");
    applier.apply(third, now());
    assert!(applier.flush(Duration::from_secs(5)).await);
    assert_eq!(writes(&log).len(), w2.len(), "no status write in the third cycle");
}

#[tokio::test]
async fn a_replica_that_is_not_leading_writes_nothing() {
    let (client, log) = mock_api(accept_all());
    let cache = cache(vec![node("n1", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    let (tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    let effects = cycle(&cache, 1);
    assert!(effects.iter().any(|e| matches!(e, Effect::Bind { .. })));
    // The lease is lost between the cycle and the writes.
    tx.send_replace(false);
    applier.apply(effects, now());
    assert!(applier.flush(Duration::from_secs(5)).await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(log.lock().unwrap().is_empty(), "no request at all: {:?}", log.lock().unwrap());
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Pending, "the unsent bind is forgotten");
}

/// A 429 with `Retry-After`, as API Priority and Fairness answers.
fn too_many_requests(retry_after: u32) -> (StatusCode, Value) {
    (
        StatusCode::TOO_MANY_REQUESTS,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                           "reason": "TooManyRequests", "message": "Too many requests, please try again later.",
                           "details": {"retryAfterSeconds": retry_after}}),
    )
}

/// Answers the first `n` requests whose path ends with `suffix` with 429, the rest as
/// [`accept_all`].
fn throttle_first(n: usize, suffix: &'static str) -> Responder {
    let seen = Arc::new(Mutex::new(0usize));
    Arc::new(move |r: &Recorded| {
        if r.path.ends_with(suffix) && !r.is_event() {
            let mut s = seen.lock().unwrap();
            *s += 1;
            if *s <= n {
                return too_many_requests(2);
            }
        }
        accept_all()(r)
    })
}

#[tokio::test(start_paused = true)]
async fn a_throttled_bind_is_sent_again_after_the_wait_asked_for() {
    let (client, log) = mock_api(throttle_first(2, "/binding"));
    let cache = cache(vec![node("n1", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    let start = tokio::time::Instant::now();
    applier.apply(cycle(&cache, 1), now());
    assert!(applier.flush(Duration::from_secs(30)).await);
    let sent = binds(&log);
    assert_eq!(sent.len(), 3, "refused twice, then bound: {sent:?}");
    assert!(sent.iter().all(|r| r.body["target"]["name"] == "n1"), "always to the node decided");
    assert!(start.elapsed() >= Duration::from_secs(4), "waited the 2 s asked for, twice: {:?}", start.elapsed());
    let stats = applier.stats();
    assert_eq!(stats.binds.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(stats.bind_failures.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(stats.retries.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Bound, "still assumed bound");
    let events: Vec<Recorded> = log.lock().unwrap().iter().filter(|r| r.is_event()).cloned().collect();
    assert!(!events.iter().any(|e| e.body["reason"] == "FailedScheduling"), "{events:?}");
}

#[tokio::test(start_paused = true)]
async fn a_bind_still_throttled_after_the_last_retry_leaves_the_pod_pending() {
    let (client, log) = mock_api(throttle_first(usize::MAX, "/binding"));
    let cache = cache(vec![node("n1", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    let (_tx, leading) = watch::channel(true);
    let mut cfg = config();
    cfg.max_retries = 3;
    let applier = Applier::new(client, cache.clone(), cfg, leading);
    applier.apply(cycle(&cache, 1), now());
    assert!(applier.flush(Duration::from_secs(60)).await);
    assert_eq!(binds(&log).len(), 4, "the first call and 3 retries");
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Pending, "pending again for the next cycle");
    assert_eq!(applier.stats().bind_failures.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn a_throttled_bind_of_a_pod_deleted_meanwhile_is_not_sent_again() {
    let (client, log) = mock_api(throttle_first(1, "/binding"));
    let victim = pod("train-0", "train", "4");
    let cache = cache(vec![node("n1", "4")], vec![victim.clone()], vec![pod_group("train", 1)]);
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    // The first bind is refused; the pod is deleted during the wait.
    while binds(&log).is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cache.lock().unwrap().apply_pod(Event::Delete(victim));
    assert!(applier.flush(Duration::from_secs(30)).await);
    assert_eq!(binds(&log).len(), 1, "not sent again");
    assert!(cache.lock().unwrap().assumptions().is_empty());
    // A pod that is gone gets no condition.
    assert!(!log.lock().unwrap().iter().any(|r| r.path.ends_with("/pods/train-0/status")));
}

#[tokio::test(start_paused = true)]
async fn a_throttled_bind_to_a_node_deleted_or_cordoned_meanwhile_is_not_sent_again() {
    for cordon in [false, true] {
        let (client, log) = mock_api(throttle_first(1, "/binding"));
        let cache = cache(vec![node("n1", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
        let (_tx, leading) = watch::channel(true);
        let applier = Applier::new(client, cache.clone(), config(), leading);
        applier.apply(cycle(&cache, 1), now());
        while binds(&log).is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut n1 = node("n1", "4");
        if cordon {
            n1.spec = Some(k8s_openapi::api::core::v1::NodeSpec { unschedulable: Some(true), ..Default::default() });
            cache.lock().unwrap().apply_node(Event::Apply(n1));
        } else {
            cache.lock().unwrap().apply_node(Event::Delete(n1));
        }
        assert!(applier.flush(Duration::from_secs(30)).await);
        assert_eq!(binds(&log).len(), 1, "not sent again (cordon {cordon})");
        assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Pending, "pending again for the next cycle");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let why = if cordon { "node n1 was cordoned" } else { "node n1 was deleted" };
        let events: Vec<Recorded> = log.lock().unwrap().iter().filter(|r| r.is_event()).cloned().collect();
        assert!(
            events
                .iter()
                .any(|e| e.body["reason"] == "FailedScheduling"
                    && e.body["note"].as_str().is_some_and(|n| n.contains(why))),
            "{events:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_throttled_status_write_is_sent_again_and_kept() {
    let (client, log) = mock_api(throttle_first(1, "/podgroups/big"));
    // A gang of 3 × 4 GPUs on one 4-GPU node: unschedulable, so its PodGroup status is written.
    let cache = cache(
        vec![node("n1", "4")],
        (0..3).map(|i| pod(&format!("big-{i}"), "big", "4")).collect(),
        vec![pod_group("big", 3)],
    );
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    assert!(applier.flush(Duration::from_secs(30)).await);
    let writes: Vec<Recorded> =
        log.lock().unwrap().iter().filter(|r| r.path.ends_with("/podgroups/big")).cloned().collect();
    assert_eq!(writes.len(), 2, "refused once, sent again: {writes:?}");
    assert_eq!(writes[0].body, writes[1].body, "the same status");
    assert_eq!(applier.stats().status_failures.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Kept in the cache, not reverted.
    let cached = cache.lock().unwrap().pod_groups.get("ml/big").cloned().expect("the PodGroup");
    let status = serde_json::to_value(&cached.status).unwrap();
    assert_eq!(status["conditions"], writes[1].body["status"]["conditions"], "the written status is kept");
}

/// An API server that binds pod `ml/train-0` for real (a later read of the pod shows its
/// node), except the first bind when `act_on_first` is false (the connection broke before
/// the call arrived); returns the node it is bound to.
fn binding_server(act_on_first: bool) -> (Responder, Arc<Mutex<Option<String>>>) {
    let bound: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let seen = Arc::new(Mutex::new(0usize));
    let state = bound.clone();
    let respond: Responder = Arc::new(move |r: &Recorded| {
        if r.path.ends_with("/binding") {
            let mut n = seen.lock().unwrap();
            *n += 1;
            if *n > 1 || act_on_first {
                *state.lock().unwrap() = r.body["target"]["name"].as_str().map(str::to_string);
            }
        } else if r.method == Method::GET && r.path == "/api/v1/namespaces/ml/pods/train-0" {
            let mut p = serde_json::to_value(pod("train-0", "train", "4")).unwrap();
            if let Some(n) = state.lock().unwrap().clone() {
                p["spec"]["nodeName"] = Value::String(n);
            }
            return (StatusCode::OK, p);
        }
        accept_all()(r)
    });
    (respond, bound)
}

fn first_bind(r: &Recorded) -> bool {
    r.path.ends_with("/binding")
}

/// A mock API server answering with `respond` that loses the answer to the first bind, and
/// a cache of two 4-cpu nodes with one pending 4-cpu pod in its gang of one.
fn first_answer_lost(respond: Responder) -> (Client, RequestLog, Arc<Mutex<ClusterCache>>) {
    let losing = Arc::new(Mutex::new(true));
    let lose = move |r: &Recorded| first_bind(r) && std::mem::replace(&mut *losing.lock().unwrap(), false);
    let (client, log) = mock_api_losing(respond, Arc::new(lose));
    let cache =
        cache(vec![node("n1", "4"), node("n2", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    (client, log, cache)
}

#[tokio::test(start_paused = true)]
async fn a_bind_whose_answer_was_lost_and_that_was_done_counts_as_bound_and_is_not_sent_again() {
    let (respond, bound) = binding_server(true);
    let (client, log, cache) = first_answer_lost(respond);
    let (tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    // The replica may stop leading meanwhile: reading the pod is not a write.
    while binds(&log).is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.send(false).unwrap();
    assert!(applier.flush(Duration::from_secs(30)).await);
    let sent = binds(&log);
    assert_eq!(sent.len(), 1, "the bind was done: not sent again: {sent:?}");
    let node = bound.lock().unwrap().clone().expect("bound by the first call");
    assert!(
        log.lock().unwrap().iter().any(|r| r.method == Method::GET && r.path.ends_with("/pods/train-0")),
        "the pod was read"
    );
    let stats = applier.stats();
    assert_eq!(stats.binds.load(std::sync::atomic::Ordering::Relaxed), 1, "counted as bound");
    assert_eq!(stats.bind_failures.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(stats.bind_checks.load(std::sync::atomic::Ordering::Relaxed), 1);
    // Still assumed on its node until the watch shows it there: no cycle places it again.
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Bound);
    assert!(matches!(
        cache.lock().unwrap().assumptions().get("ml/train-0"),
        Some(volcano_scheduler::cache::Assumption::Bound { node: n, .. }) if **n == *node
    ));
    assert!(!log.lock().unwrap().iter().any(|r| r.is_event() && r.body["reason"] == "FailedScheduling"));
}

#[tokio::test(start_paused = true)]
async fn a_bind_whose_answer_was_lost_and_that_was_not_done_is_sent_again_to_the_same_node() {
    let (respond, bound) = binding_server(false);
    let (client, log, cache) = first_answer_lost(respond);
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    assert!(applier.flush(Duration::from_secs(30)).await);
    let sent = binds(&log);
    assert_eq!(sent.len(), 2, "read, found unbound, sent again: {sent:?}");
    assert_eq!(sent[0].body["target"]["name"], sent[1].body["target"]["name"], "to the node decided");
    assert_eq!(bound.lock().unwrap().as_deref(), sent[1].body["target"]["name"].as_str());
    let stats = applier.stats();
    assert_eq!(stats.binds.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(stats.bind_failures.load(std::sync::atomic::Ordering::Relaxed), 0);
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Bound);
}

#[tokio::test(start_paused = true)]
async fn a_bind_whose_answer_was_lost_is_checked_until_the_api_server_answers() {
    // The bind is done and its answer lost; the next three reads of the pod get no answer
    // either (the API server is down), the fourth does.
    let (respond, _bound) = binding_server(true);
    let lost = Arc::new(Mutex::new(0usize));
    let lose = move |r: &Recorded| {
        let reads = r.method == Method::GET && r.path.ends_with("/pods/train-0");
        let mut n = lost.lock().unwrap();
        if (first_bind(r) && *n == 0) || (reads && *n < 4) {
            *n += 1;
            return true;
        }
        false
    };
    let (client, log) = mock_api_losing(respond, Arc::new(lose));
    let cache = cache(vec![node("n1", "4")], vec![pod("train-0", "train", "4")], vec![pod_group("train", 1)]);
    let (_tx, leading) = watch::channel(true);
    let applier = Applier::new(client, cache.clone(), config(), leading);
    applier.apply(cycle(&cache, 1), now());
    // Meanwhile the pod is pending in no cycle's eyes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(status_of(&cache, "ml/train-0"), TaskStatus::Bound, "assumed while unknown");
    assert!(!cycle(&cache, 2).iter().any(|e| matches!(e, Effect::Bind { .. })));
    assert!(applier.flush(Duration::from_secs(60)).await);
    let reads = log.lock().unwrap().iter().filter(|r| r.method == Method::GET).count();
    assert_eq!(reads, 4, "three reads without an answer, then one");
    assert_eq!(binds(&log).len(), 1);
    assert_eq!(applier.stats().binds.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(applier.stats().bind_failures.load(std::sync::atomic::Ordering::Relaxed), 0);
}
