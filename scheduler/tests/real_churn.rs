//! Throttling and churn against a real API server (etcd + kube-apiserver from
//! `KUBEBUILDER_ASSETS`, skipped with a message when unset; docs/testing.md).
//!
//! The scheduler runs in process and talks to the API server through a small HTTP proxy on
//! 127.0.0.1 (plain HTTP in, the admin client out), which answers some requests itself with
//! `429 Too Many Requests` and `Retry-After`, as API Priority and Fairness does, and records
//! what it forwarded. Objects are deleted or changed while binds wait:
//!
//! - `throttled_writes`: binds and PodGroup status writes refused with 429 are sent again
//!   after the wait asked for, each pod bound once, nothing dropped, no node overcommitted;
//! - `pod_deleted_while_throttled`, `node_deleted_while_throttled`,
//!   `node_cordoned_while_throttled`: a bind is not sent again once the pod is gone or the
//!   node is gone or cordoned; the pod is bound elsewhere (or gone) and an event says why;
//! - `pod_group_deleted`, `queue_deleted`: the cache stays consistent (compared with a fresh
//!   list) and the scheduler goes on binding.

mod common;
use common::{create_node, quantities, start, Running};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use k8s_openapi::api::core::v1::{Container, Event as CoreEvent, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use volcano_api::crd::{PodGroup, PodGroupPhase, PodGroupSpec, Queue, QueueSpec, GROUP_NAME_ANNOTATION};
use volcano_scheduler::options::SchedulerOptions;
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};

const WAIT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------
// The throttling proxy.

/// Requests the proxy answers itself with 429.
#[derive(Clone, Debug)]
struct Rule {
    method: http::Method,
    /// The path contains this and ends with `suffix`.
    contains: String,
    suffix: String,
    /// How many more to refuse (`usize::MAX`: until removed).
    remaining: usize,
    /// `Retry-After` and `details.retryAfterSeconds`.
    retry_after: u32,
}

#[derive(Default)]
struct ProxyState {
    rules: Vec<Rule>,
    /// (method, path) of every request answered 429.
    throttled: Vec<(http::Method, String)>,
    /// (method, path) of every non-GET request forwarded.
    forwarded: Vec<(http::Method, String)>,
}

#[derive(Clone)]
struct Proxy {
    client: Client,
    state: Arc<Mutex<ProxyState>>,
}

impl Proxy {
    fn throttle(&self, method: http::Method, contains: &str, suffix: &str, count: usize, retry_after: u32) {
        self.state.lock().unwrap().rules.push(Rule {
            method,
            contains: contains.into(),
            suffix: suffix.into(),
            remaining: count,
            retry_after,
        });
    }

    fn clear(&self) {
        self.state.lock().unwrap().rules.clear();
    }

    fn throttled(&self, path_part: &str) -> usize {
        self.state.lock().unwrap().throttled.iter().filter(|(_, p)| p.contains(path_part)).count()
    }

    fn forwarded(&self, method: &http::Method, path_part: &str) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.forwarded.iter().filter(|(m, p)| m == method && p.contains(path_part)).map(|(_, p)| p.clone()).collect()
    }
}

async fn forward(State(proxy): State<Proxy>, request: axum::extract::Request) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let refused = {
        let mut st = proxy.state.lock().unwrap();
        let rule = st.rules.iter_mut().find(|r| {
            r.method == parts.method && r.remaining > 0 && path.contains(&r.contains) && path.ends_with(&r.suffix)
        });
        let refused = rule.map(|r| {
            r.remaining = r.remaining.saturating_sub(if r.remaining == usize::MAX { 0 } else { 1 });
            r.retry_after
        });
        match refused {
            Some(_) => st.throttled.push((parts.method.clone(), path.clone())),
            None if parts.method != http::Method::GET => st.forwarded.push((parts.method.clone(), path.clone())),
            None => {}
        }
        refused
    };
    if let Some(secs) = refused {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Too many requests, please try again later.", "reason": "TooManyRequests",
            "details": {"retryAfterSeconds": secs}, "code": 429
        });
        return axum::response::Response::builder()
            .status(429)
            .header("content-type", "application/json")
            .header("retry-after", secs.to_string())
            .body(axum::body::Body::from(status.to_string()))
            .unwrap();
    }
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let target = parts.uri.path_and_query().map_or("/".to_string(), |p| p.as_str().to_string());
    let mut out = http::Request::builder().method(parts.method).uri(target);
    for (k, v) in &parts.headers {
        if !matches!(k.as_str(), "host" | "authorization" | "content-length" | "connection" | "transfer-encoding") {
            out = out.header(k, v);
        }
    }
    match proxy.client.send(out.body(kube::client::Body::from(bytes.to_vec())).unwrap()).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            parts.headers.remove("transfer-encoding");
            parts.headers.remove("connection");
            axum::response::Response::from_parts(parts, axum::body::Body::new(body))
        }
        Err(e) => axum::response::Response::builder().status(502).body(axum::body::Body::from(e.to_string())).unwrap(),
    }
}

/// Starts the proxy in front of `server`; returns it and a kubeconfig file pointing at it.
async fn start_proxy(server: &ApiServer) -> (Proxy, std::path::PathBuf) {
    let proxy = Proxy { client: server.client().await, state: Arc::default() };
    let port = free_port();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("proxy port");
    let router = axum::Router::new().fallback(forward).with_state(proxy.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let kubeconfig = std::env::temp_dir().join(format!("volcano-rs-proxy-{}-{port}.kubeconfig", std::process::id()));
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: admin\n  user:\n    token: unused-the-proxy-authenticates\ncontexts:\n- name: proxy\n  \
             context:\n    cluster: proxy\n    user: admin\ncurrent-context: proxy\n"
        ),
    )
    .unwrap();
    (proxy, kubeconfig)
}

// ---------------------------------------------------------------------------------------
// Objects.

fn pod(ns: &str, name: &str, scheduler: &str, group: &str, gpus: u32) -> Pod {
    let gpu = gpus.to_string();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            annotations: Some([(GROUP_NAME_ANNOTATION.to_string(), group.to_string())].into_iter().collect()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            termination_grace_period_seconds: Some(0),
            containers: vec![Container {
                name: "train".into(),
                image: Some("busybox".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", &gpu)])),
                    limits: Some(quantities(&[("nvidia.com/gpu", &gpu)])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// A PodGroup `name` of `size` pods `name-0…`, each asking `gpus`.
async fn gang(client: &Client, ns: &str, sched: &str, name: &str, size: usize, gpus: u32, queue: &str) {
    let mut pg =
        PodGroup::new(name, PodGroupSpec { min_member: size as i32, queue: Some(queue.into()), ..Default::default() });
    pg.metadata.namespace = Some(ns.into());
    Api::<PodGroup>::namespaced(client.clone(), ns).create(&PostParams::default(), &pg).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for i in 0..size {
        pods.create(&PostParams::default(), &pod(ns, &format!("{name}-{i}"), sched, name, gpus)).await.unwrap();
    }
}

async fn node_of(client: &Client, ns: &str, name: &str) -> Option<String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.ok().flatten().and_then(|p| p.spec.and_then(|s| s.node_name))
}

async fn event_notes(client: &Client, ns: &str, reason: &str, object: &str) -> Vec<String> {
    let api: Api<CoreEvent> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some(reason) && e.involved_object.name.as_deref() == Some(object))
                .filter_map(|e| e.message)
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// The scheduler.

impl Running {
    /// Waits until the cache agrees with a fresh list of the namespace's pods (uid, node)
    /// and PodGroups, and assumes nothing of them.
    async fn agrees_with_a_fresh_list(&self, client: &Client, ns: &str) {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let pgs: Api<PodGroup> = Api::namespaced(client.clone(), ns);
        eventually(WAIT, "the cache agrees with a fresh list", || async {
            let listed: BTreeMap<String, (Option<String>, Option<String>)> = pods
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .map(|p| {
                    let node = p.spec.and_then(|s| s.node_name);
                    (format!("{ns}/{}", p.metadata.name.unwrap_or_default()), (p.metadata.uid, node))
                })
                .collect();
            let groups: Vec<String> = pgs
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .map(|g| format!("{ns}/{}", g.metadata.name.unwrap_or_default()))
                .collect();
            let cache = self.handle.cache.lock().unwrap();
            let prefix = format!("{ns}/");
            let cached: BTreeMap<String, (Option<String>, Option<String>)> = cache
                .pods
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, p)| (k.clone(), (p.metadata.uid.clone(), p.node_name().map(str::to_string))))
                .collect();
            let cached_groups: Vec<String> =
                cache.pod_groups.iter().filter(|(k, _)| k.starts_with(&prefix)).map(|(k, _)| k.clone()).collect();
            let assumed = cache.assumptions().keys().any(|k| k.starts_with(&prefix));
            (cached == listed && cached_groups == groups && !assumed).then_some(())
        })
        .await;
    }
}

fn options(kubeconfig: &std::path::Path, scheduler: &str, scenario: &str) -> SchedulerOptions {
    let mut o = SchedulerOptions::defaults();
    o.kubeconfig = Some(kubeconfig.to_path_buf());
    o.scheduler_names = vec![scheduler.to_string()];
    o.schedule_period = Duration::from_millis(200);
    o.leader_elect = false;
    o.listen_address = String::new();
    o.healthz_address = String::new();
    o.node_selector = vec![format!("envtest-scenario:{scenario}")];
    o.identity = Some(format!("{scheduler}-replica"));
    o
}

// ---------------------------------------------------------------------------------------
// Scenarios.

/// Half the binds and the first PodGroup status writes are refused with 429: every pod is
/// bound once, the refused binds are sent again after `Retry-After`, no FailedScheduling
/// event, the PodGroups reach Running, no node over its GPUs.
async fn throttled_writes(server: &ApiServer, proxy: &Proxy, kubeconfig: &std::path::Path) {
    let (ns, sched) = ("throttled", "volcano-rs-throttled");
    server.namespace(ns).await;
    let client = server.client().await;
    create_node(&client, "throttled-n1", ns, 8).await;
    create_node(&client, "throttled-n2", ns, 8).await;
    proxy.throttle(http::Method::POST, "/namespaces/throttled/", "/binding", 8, 1);
    proxy.throttle(http::Method::PATCH, "/namespaces/throttled/podgroups/", "", 4, 1);
    let running = start(options(kubeconfig, sched, ns)).await;
    for g in 0..4 {
        gang(&client, ns, sched, &format!("job-{g}"), 4, 1, "default").await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let listed = eventually(WAIT, "all 16 pods bound", || async {
        let items = pods.list(&ListParams::default()).await.ok()?.items;
        (items.len() == 16 && items.iter().all(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())))
            .then_some(items)
    })
    .await;
    let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
    for p in &listed {
        *per_node.entry(p.spec.as_ref().unwrap().node_name.clone().unwrap()).or_default() += 1;
    }
    assert!(per_node.values().all(|&n| n <= 8), "{per_node:?}");
    assert_eq!(proxy.throttled("/namespaces/throttled/pods/"), 8, "8 binds refused");
    let sent = proxy.forwarded(&http::Method::POST, "/namespaces/throttled/pods/");
    assert_eq!(sent.len(), 16, "each pod's bind reached the API server once: {sent:?}");
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), ns);
    eventually(WAIT, "every PodGroup Running despite the refused status writes", || async {
        let items = pgs.list(&ListParams::default()).await.ok()?.items;
        items.iter().all(|g| g.status.as_ref().and_then(|s| s.phase) == Some(PodGroupPhase::Running)).then_some(())
    })
    .await;
    assert!(proxy.throttled("/podgroups/") >= 1, "a status write was refused");
    // No bind failed (a gang seen before all its pods exist is reported unschedulable by
    // its cycle: that FailedScheduling is not a bind's).
    for p in &listed {
        let name = p.metadata.name.clone().unwrap();
        let notes = event_notes(&client, ns, "FailedScheduling", &name).await;
        assert!(!notes.iter().any(|n| n.contains("failed to bind")), "{name}: {notes:?}");
    }
    running.agrees_with_a_fresh_list(&client, ns).await;
    proxy.clear();
    running.stop().await;
}

/// Holds the binds of `pod` with 429s until `proxy.clear()`; returns once one was refused.
async fn hold_binds(proxy: &Proxy, ns: &str, pod: &str) {
    proxy.throttle(http::Method::POST, &format!("/namespaces/{ns}/pods/{pod}/"), "/binding", usize::MAX, 2);
}

async fn wait_refused(proxy: &Proxy, ns: &str, pod: &str) {
    let part = format!("/namespaces/{ns}/pods/{pod}/binding");
    eventually(WAIT, "a bind refused with 429", || async { (proxy.throttled(&part) > 0).then_some(()) }).await;
}

/// The pod is deleted while its bind waits: the bind is not sent again and the cache
/// forgets the pod.
async fn pod_deleted_while_throttled(server: &ApiServer, proxy: &Proxy, kubeconfig: &std::path::Path) {
    let (ns, sched) = ("pod-deleted", "volcano-rs-pod-deleted");
    server.namespace(ns).await;
    let client = server.client().await;
    create_node(&client, "pod-deleted-n1", ns, 8).await;
    let running = start(options(kubeconfig, sched, ns)).await;
    hold_binds(proxy, ns, "victim-0").await;
    gang(&client, ns, sched, "victim", 1, 1, "default").await;
    wait_refused(proxy, ns, "victim-0").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.delete("victim-0", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    proxy.clear();
    // Past the Retry-After: the bind is not sent.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(proxy.forwarded(&http::Method::POST, "/pods/victim-0/binding").is_empty(), "no bind of a deleted pod");
    running.agrees_with_a_fresh_list(&client, ns).await;
    // And the scheduler goes on.
    gang(&client, ns, sched, "next", 1, 1, "default").await;
    eventually(WAIT, "the next pod bound", || async { node_of(&client, ns, "next-0").await }).await;
    running.stop().await;
}

/// The node is deleted (`cordon` false) or cordoned (`cordon` true) while the bind to it
/// waits: not sent again, a FailedScheduling event says why, and the pod is bound to the
/// other node.
async fn node_changed_while_throttled(server: &ApiServer, proxy: &Proxy, kubeconfig: &std::path::Path, cordon: bool) {
    let (ns, sched) = if cordon {
        ("node-cordoned", "volcano-rs-node-cordoned")
    } else {
        ("node-deleted", "volcano-rs-node-deleted")
    };
    server.namespace(ns).await;
    let client = server.client().await;
    let first = format!("{ns}-n1");
    create_node(&client, &first, ns, 8).await;
    let running = start(options(kubeconfig, sched, ns)).await;
    hold_binds(proxy, ns, "moved-0").await;
    gang(&client, ns, sched, "moved", 1, 1, "default").await;
    wait_refused(proxy, ns, "moved-0").await;
    let nodes: Api<Node> = Api::all(client.clone());
    if cordon {
        nodes
            .patch(&first, &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})))
            .await
            .unwrap();
    } else {
        nodes.delete(&first, &DeleteParams::default()).await.unwrap();
    }
    let second = format!("{ns}-n2");
    create_node(&client, &second, ns, 8).await;
    // The cache must see the change before the Retry-After ends.
    eventually(WAIT, "the cache sees the node change", || async {
        let cache = running.handle.cache.lock().unwrap();
        let changed = match cache.nodes.get(&first) {
            None => true,
            Some(n) => n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
        };
        (changed && cache.nodes.get(&second).is_some()).then_some(())
    })
    .await;
    proxy.clear();
    let node = eventually(WAIT, "the pod bound", || async { node_of(&client, ns, "moved-0").await }).await;
    assert_eq!(node, second, "bound to the node that is still there and schedulable");
    let what = if cordon { "was cordoned" } else { "was deleted" };
    let notes = eventually(WAIT, "a FailedScheduling event saying why", || async {
        let notes = event_notes(&client, ns, "FailedScheduling", "moved-0").await;
        notes.iter().any(|n| n.contains(&format!("node {first} {what}"))).then_some(notes)
    })
    .await;
    eprintln!("{ns}: {notes:?}");
    running.agrees_with_a_fresh_list(&client, ns).await;
    running.stop().await;
}

/// A PodGroup deleted while its pods are bound: the cache drops it, keeps the pods as
/// listed, and the scheduler goes on binding.
async fn pod_group_deleted(server: &ApiServer, kubeconfig: &std::path::Path) {
    let (ns, sched) = ("pg-deleted", "volcano-rs-pg-deleted");
    server.namespace(ns).await;
    let client = server.client().await;
    create_node(&client, "pg-deleted-n1", ns, 8).await;
    let running = start(options(kubeconfig, sched, ns)).await;
    gang(&client, ns, sched, "gone", 2, 1, "default").await;
    eventually(WAIT, "the gang bound", || async {
        Some((node_of(&client, ns, "gone-0").await?, node_of(&client, ns, "gone-1").await?))
    })
    .await;
    Api::<PodGroup>::namespaced(client.clone(), ns).delete("gone", &DeleteParams::default()).await.unwrap();
    running.agrees_with_a_fresh_list(&client, ns).await;
    gang(&client, ns, sched, "after", 2, 1, "default").await;
    eventually(WAIT, "a later gang bound", || async {
        Some((node_of(&client, ns, "after-0").await?, node_of(&client, ns, "after-1").await?))
    })
    .await;
    running.agrees_with_a_fresh_list(&client, ns).await;
    running.stop().await;
}

/// A Queue deleted under a running job (no webhook here to refuse it): the job's pods stay
/// bound, a new job of that queue is not bound, a job of another queue is; both jobs of
/// the deleted queue get the condition `Unschedulable` `QueueNotFound` and one `Warning`
/// event, the waiting pod `PodScheduled=False` saying why; the cache agrees with a fresh
/// list.
async fn queue_deleted(server: &ApiServer, kubeconfig: &std::path::Path) {
    let (ns, sched) = ("queue-deleted", "volcano-rs-queue-deleted");
    server.namespace(ns).await;
    let client = server.client().await;
    create_node(&client, "queue-deleted-n1", ns, 8).await;
    let queues: Api<Queue> = Api::all(client.clone());
    let mut q = Queue::new("churn", QueueSpec { weight: Some(1), ..Default::default() });
    q.metadata.name = Some("churn".into());
    queues.create(&PostParams::default(), &q).await.unwrap();
    let running = start(options(kubeconfig, sched, ns)).await;
    gang(&client, ns, sched, "inside", 2, 1, "churn").await;
    eventually(WAIT, "the job in the queue bound", || async {
        Some((node_of(&client, ns, "inside-0").await?, node_of(&client, ns, "inside-1").await?))
    })
    .await;
    queues.delete("churn", &DeleteParams::default()).await.unwrap();
    eventually(WAIT, "the cache forgets the queue", || async {
        running.handle.cache.lock().unwrap().queues.get("churn").is_none().then_some(())
    })
    .await;
    gang(&client, ns, sched, "orphan", 1, 1, "churn").await;
    gang(&client, ns, sched, "elsewhere", 1, 1, "default").await;
    eventually(WAIT, "a job of another queue bound", || async { node_of(&client, ns, "elsewhere-0").await }).await;
    // Several cycles later the job of the deleted queue is still not bound.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(node_of(&client, ns, "orphan-0").await, None, "nothing is scheduled into a queue that does not exist");
    assert!(node_of(&client, ns, "inside-0").await.is_some(), "running pods are left alone");
    let pgs = Api::<PodGroup>::namespaced(client.clone(), ns);
    for job in ["inside", "orphan"] {
        let condition = eventually(WAIT, "the QueueNotFound condition", || async {
            let pg = pgs.get(job).await.ok()?;
            pg.status?.conditions.into_iter().find(|c| c.reason.as_deref() == Some("QueueNotFound"))
        })
        .await;
        assert_eq!((condition.type_.as_str(), condition.status.as_str()), ("Unschedulable", "True"));
        let message = condition.message.unwrap_or_default();
        assert!(message.starts_with("queue churn does not exist"), "{job}: {message}");
        let notes = eventually(WAIT, "the QueueNotFound event", || async {
            let notes = event_notes(&client, ns, "QueueNotFound", job).await;
            (!notes.is_empty()).then_some(notes)
        })
        .await;
        assert!(notes.iter().all(|n| n.starts_with("queue churn does not exist")), "{job}: {notes:?}");
    }
    let pod = Api::<Pod>::namespaced(client.clone(), ns).get("orphan-0").await.unwrap();
    let scheduled = pod.status.and_then(|s| s.conditions).into_iter().flatten().find(|c| c.type_ == "PodScheduled");
    let scheduled = scheduled.expect("the waiting pod says why");
    assert_eq!(scheduled.status, "False");
    assert!(scheduled.message.unwrap_or_default().starts_with("queue churn does not exist"));
    // Said once: a few cycles later there is still one event per PodGroup (not a series).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events: Api<CoreEvent> = Api::namespaced(client.clone(), ns);
    for e in events.list(&ListParams::default()).await.unwrap().items {
        if e.reason.as_deref() == Some("QueueNotFound") {
            assert_eq!(e.count.unwrap_or(1), 1, "{:?}: {:?}", e.involved_object.name, e.series);
            assert!(e.series.is_none(), "{:?}: {:?}", e.involved_object.name, e.series);
        }
    }
    running.agrees_with_a_fresh_list(&client, ns).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_churn_suite() {
    let Some(assets) = support::assets() else { return };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let only = std::env::var("ENVTEST_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|o| o == name);
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let (proxy, kubeconfig) = start_proxy(&server).await;
    if run("throttled_writes") {
        throttled_writes(&server, &proxy, &kubeconfig).await;
    }
    if run("pod_deleted_while_throttled") {
        pod_deleted_while_throttled(&server, &proxy, &kubeconfig).await;
    }
    if run("node_deleted_while_throttled") {
        node_changed_while_throttled(&server, &proxy, &kubeconfig, false).await;
    }
    if run("node_cordoned_while_throttled") {
        node_changed_while_throttled(&server, &proxy, &kubeconfig, true).await;
    }
    if run("pod_group_deleted") {
        pod_group_deleted(&server, &kubeconfig).await;
    }
    if run("queue_deleted") {
        queue_deleted(&server, &kubeconfig).await;
    }
    let _ = std::fs::remove_file(&kubeconfig);
}
