//! The reconciler against a mock API server (kube's `tower-test` style): a reconcile that
//! fails half-way and is retried creates nothing twice; a job's PVCs come before its pods;
//! a job that keeps failing is terminated at `--max-requeue-num`; the events are posted;
//! Volcano's job metrics count what the reconciles did.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::client::Body;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::watch;
use volcano_api::bus::Command;
use volcano_api::crd::PodGroup;
use volcano_api::job::Job;
use volcano_controller::reconcile::{reconcile, Context};
use volcano_controller::recorder::{Recorder, RecorderConfig};

#[derive(Clone, Debug)]
struct Recorded {
    method: Method,
    path: String,
    name: String,
    status: u16,
    body: Value,
}

/// A fake API server: POSTs store the object by path and name (409 when it exists; 500 for
/// the names in `fail_once`, the first time) and stamp it created at 00:00:01 (the jobs are
/// created at 00:00:00); a PUT with another resourceVersion than the last PUT of that path
/// left is a 409; a GET returns the stored object, 404 when there is none; a DELETE
/// succeeds; everything else echoes the body (resourceVersion 2).
fn mock_api(fail_once: &[&str]) -> (Client, Arc<Mutex<Vec<Recorded>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    let mut fail: BTreeSet<String> = fail_once.iter().map(|s| s.to_string()).collect();
    tokio::spawn(async move {
        let mut stored: BTreeMap<(String, String), Value> = BTreeMap::new();
        // The resourceVersion each PUT path has, once written.
        let mut versions: BTreeMap<String, Value> = BTreeMap::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let mut obj: Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
            let body = obj.clone();
            let path = parts.uri.path().to_string();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let item = path.rsplit_once('/').map(|(dir, n)| (dir.to_string(), n.to_string())).unwrap_or_default();
            let (status, reply) = if parts.method == Method::GET {
                match stored.get(&item) {
                    Some(o) => (200, o.clone()),
                    None => (
                        404,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "message": "not found", "reason": "NotFound"}),
                    ),
                }
            } else if parts.method == Method::POST && fail.remove(&name) {
                (
                    500,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "message": "boom", "reason": "InternalError"}),
                )
            } else if parts.method == Method::POST && stored.contains_key(&(path.clone(), name.clone())) {
                (
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "message": "exists", "reason": "AlreadyExists"}),
                )
            } else if parts.method == Method::PUT
                && versions.get(&path).is_some_and(|v| *v != obj["metadata"]["resourceVersion"])
            {
                (
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "message": "the object has been modified", "reason": "Conflict"}),
                )
            } else if parts.method == Method::DELETE {
                (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
            } else {
                obj["metadata"]["uid"] = json!(format!("uid-{name}"));
                obj["metadata"]["resourceVersion"] = json!("2");
                if parts.method == Method::POST {
                    obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:01Z");
                }
                if parts.method == Method::PUT {
                    versions.insert(path.clone(), json!("2"));
                }
                if parts.method == Method::POST {
                    stored.insert((path.clone(), name.clone()), obj.clone());
                }
                (if parts.method == Method::POST { 201 } else { 200 }, obj)
            };
            log2.lock().unwrap().push(Recorded { method: parts.method.clone(), path, name, status, body });
            let response = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    (Client::new(service, "default"), log)
}

fn job() -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "j", "namespace": "ml", "uid": "job-uid", "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "minAvailable": 3, "queue": "default", "schedulerName": "volcano-rs",
            "plugins": {"svc": []},
            "tasks": [{"name": "w", "replicas": 3, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn a_retried_reconcile_creates_nothing_twice() {
    let (client, log) = mock_api(&["j-w-1"]);
    let (pods, mut pods_w) = reflector::store::<Pod>();
    let (groups, mut groups_w) = reflector::store::<PodGroup>();
    let (commands, mut commands_w) = reflector::store::<Command>();
    let (pcs, mut pcs_w) = reflector::store::<PriorityClass>();
    // The first lists are done (empty); later objects come as watch events.
    pods_w.apply_watcher_event(&Event::InitDone);
    groups_w.apply_watcher_event(&Event::InitDone);
    commands_w.apply_watcher_event(&Event::InitDone);
    pcs_w.apply_watcher_event(&Event::InitDone);
    // The PodGroup exists and is admitted.
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "j-job-uid", "namespace": "ml", "uid": "pg-uid"},
        "spec": {"minMember": 3, "minTaskMember": {"w": 3}}, "status": {"phase": "Inqueue"}
    }))
    .unwrap();
    groups_w.apply_watcher_event(&Event::Apply(pg));
    let (_leading_tx, leading) = watch::channel(true);
    let ctx = Arc::new(Context::new(client, pods, groups, commands, pcs, "volcano-rs".into(), leading));
    let job = Arc::new(job());

    // The second pod's create fails: the reconcile fails after the first and third.
    let r = reconcile(job.clone(), ctx.clone()).await;
    assert!(r.is_err(), "{r:?}");
    let created = |log: &Vec<Recorded>| -> Vec<String> {
        log.iter()
            .filter(|r| r.method == Method::POST && r.path.ends_with("/pods") && r.status == 201)
            .map(|r| r.name.clone())
            .collect()
    };
    let mut first = created(&log.lock().unwrap());
    first.sort();
    assert_eq!(first, ["j-w-0", "j-w-2"]);

    // The watch delivers the two pods; the retry creates only the missing one.
    for name in ["j-w-0", "j-w-2"] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "2",
                "labels": {"volcano.sh/job-name": "j"},
                "annotations": {"volcano.sh/task-spec": "w", "volcano.sh/job-name": "j", "volcano.sh/job-version": "0"},
                "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        pods_w.apply_watcher_event(&Event::Apply(pod));
    }
    let before = log.lock().unwrap().len();
    reconcile(job.clone(), ctx.clone()).await.unwrap();
    let log = log.lock().unwrap();
    let retry: Vec<Recorded> = log[before..].to_vec();
    let pod_posts: Vec<&str> = retry
        .iter()
        .filter(|r| r.method == Method::POST && r.path.ends_with("/pods"))
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(pod_posts, ["j-w-1"]);
    // Every pod was created exactly once over both reconciles.
    let mut all = created(&log);
    all.sort();
    assert_eq!(all, ["j-w-0", "j-w-1", "j-w-2"]);
    // The plugin objects created by the failed reconcile are asked for again (the status
    // that lists them was not written) and their 409 counts as success.
    assert!(retry.iter().any(|r| r.path.ends_with("/services") && r.status == 409));
    // The status is written once, by the reconcile that succeeded.
    assert_eq!(log.iter().filter(|r| r.path.ends_with("/status")).count(), 1);
    // Each pod created was observed once, a second after the job.
    let text = ctx.metrics().render();
    assert!(text.contains("volcano_controller_job_to_pod_creation_latency_milliseconds_count 3"), "{text}");
    assert!(text.contains("volcano_controller_job_to_pod_creation_latency_milliseconds_sum 3000"), "{text}");
}

/// A context over empty stores, with the job's PodGroup admitted, recording events through
/// `client`.
fn admitted_context(client: Client, max_requeue_num: i32) -> Arc<Context> {
    admitted_context_with(client, max_requeue_num, Vec::new())
}

/// [`admitted_context`] with `pods` in the store.
fn admitted_context_with(client: Client, max_requeue_num: i32, listed: Vec<Pod>) -> Arc<Context> {
    let (pods, mut pods_w) = reflector::store::<Pod>();
    let (groups, mut groups_w) = reflector::store::<PodGroup>();
    let (commands, mut commands_w) = reflector::store::<Command>();
    let (pcs, mut pcs_w) = reflector::store::<PriorityClass>();
    pods_w.apply_watcher_event(&Event::InitDone);
    groups_w.apply_watcher_event(&Event::InitDone);
    commands_w.apply_watcher_event(&Event::InitDone);
    pcs_w.apply_watcher_event(&Event::InitDone);
    for p in listed {
        pods_w.apply_watcher_event(&Event::Apply(p));
    }
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "j-job-uid", "namespace": "ml", "uid": "pg-uid"},
        "spec": {"minMember": 3, "minTaskMember": {"w": 3}}, "status": {"phase": "Inqueue"}
    }))
    .unwrap();
    groups_w.apply_watcher_event(&Event::Apply(pg));
    // The writers go out of scope: the stores keep what they hold, the receiver the value.
    let (_, leading) = watch::channel(true);
    let recorder = Recorder::new(client.clone(), RecorderConfig::default(), leading.clone());
    Arc::new(
        Context::new(client, pods, groups, commands, pcs, "volcano-rs".into(), leading)
            .with_recorder(recorder)
            .with_max_requeue_num(max_requeue_num),
    )
}

fn with_volume(volume: Value) -> Job {
    let mut j = serde_json::to_value(job()).unwrap();
    j["spec"]["volumes"] = json!([volume]);
    serde_json::from_value(j).unwrap()
}

/// The events posted so far (reason, note), waiting up to 5 s for `want` of them.
async fn events(log: &Arc<Mutex<Vec<Recorded>>>, want: usize) -> Vec<(String, String)> {
    let get = || -> Vec<(String, String)> {
        log.lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == Method::POST && r.path.ends_with("/events"))
            .map(|r| {
                (
                    r.body["reason"].as_str().unwrap_or_default().to_string(),
                    r.body["note"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    for _ in 0..50 {
        if get().len() >= want {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    get()
}

#[tokio::test]
async fn a_volume_claim_is_created_before_the_pods_and_once() {
    let (client, log) = mock_api(&["j-volume-0"]);
    let ctx = admitted_context(client, 15);
    let job = Arc::new(with_volume(json!({"mountPath": "/data", "volumeClaim": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})));

    // The PVC's create fails: nothing else is created, and a PVCError is recorded.
    assert!(reconcile(job.clone(), ctx.clone()).await.is_err());
    {
        let log = log.lock().unwrap();
        let posts: Vec<&Recorded> =
            log.iter().filter(|r| r.method == Method::POST && !r.path.ends_with("/events")).collect();
        assert!(posts.iter().all(|r| !r.path.ends_with("/pods") && !r.path.ends_with("/podgroups")), "{posts:?}");
    }
    let evs = events(&log, 1).await;
    assert!(evs.iter().any(|(r, n)| r == "PVCError" && n.starts_with("Failed to create PVC, err: ")), "{evs:?}");

    // The retry creates it, owned by the job, with the claim's spec, then the pods.
    reconcile(job.clone(), ctx.clone()).await.unwrap();
    let log = log.lock().unwrap();
    let pvc = log
        .iter()
        .find(|r| r.method == Method::POST && r.path.ends_with("/persistentvolumeclaims") && r.status == 201)
        .expect("the PVC created");
    assert_eq!(pvc.name, "j-volume-0");
    assert_eq!(pvc.path, "/api/v1/namespaces/ml/persistentvolumeclaims");
    assert_eq!(pvc.body["metadata"]["ownerReferences"][0]["uid"], "job-uid");
    assert_eq!(pvc.body["metadata"]["ownerReferences"][0]["controller"], true);
    assert_eq!(pvc.body["spec"]["resources"]["requests"]["storage"], "1Gi");
    let first_pod = log.iter().position(|r| r.method == Method::POST && r.path.ends_with("/pods")).unwrap();
    let pvc_at = log.iter().position(|r| r.path.ends_with("/persistentvolumeclaims") && r.status == 201).unwrap();
    assert!(pvc_at < first_pod, "the PVC before the pods");
    let pod = log.iter().find(|r| r.method == Method::POST && r.path.ends_with("/pods")).unwrap();
    assert_eq!(pod.body["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "j-volume-0");
    assert_eq!(pod.body["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/data");
    // Recorded as Volcano does, in the one status write.
    let status: Vec<&Recorded> = log.iter().filter(|r| r.path.ends_with("/status")).collect();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].body["status"]["controlledResources"]["volume-pvc-j-volume-0"], "j-volume-0");
    // Each PVC create was asked once per reconcile, never after it was recorded.
    let pvc_posts =
        log.iter().filter(|r| r.method == Method::POST && r.path.ends_with("/persistentvolumeclaims")).count();
    assert_eq!(pvc_posts, 2);
}

#[tokio::test]
async fn a_missing_claim_fails_the_job_until_the_retry_limit_terminates_it() {
    let (client, log) = mock_api(&[]);
    let ctx = admitted_context(client, 1);
    let job = Arc::new(with_volume(json!({"mountPath": "/data", "volumeClaimName": "missing"})));

    // --max-requeue-num 1: the first failure is requeued.
    let e = reconcile(job.clone(), ctx.clone()).await.unwrap_err();
    assert!(e.to_string().contains("pvc missing is not found"), "{e}");
    // The second is the last: the job is terminated instead.
    reconcile(job.clone(), ctx.clone()).await.unwrap();
    {
        let log = log.lock().unwrap();
        assert!(log.iter().all(|r| !(r.method == Method::POST && r.path.ends_with("/pods"))));
        let status: Vec<&Recorded> = log.iter().filter(|r| r.path.ends_with("/status")).collect();
        assert_eq!(status.len(), 1, "only the termination writes the status");
        assert_eq!(status[0].body["status"]["state"]["phase"], "Terminating");
    }
    let evs = events(&log, 2).await;
    assert_eq!(evs[0].0, "PVCError");
    assert!(evs[0].1.contains("pvc missing is not found, the job will be in the Pending state"), "{evs:?}");
    assert!(
        evs.iter().any(|(r, n)| r == "ExecuteAction" && n == "Job failed on action SyncJob for retry limit reached"),
        "{evs:?}"
    );
}

/// An API server that is away or failing (500 here) is no fault of the job: with
/// `--max-requeue-num 0` a failure of the job's own would terminate it at once, but this
/// one is retried and the job goes on.
#[tokio::test]
async fn a_failing_api_server_does_not_count_towards_the_retry_limit() {
    let (client, log) = mock_api(&["j-w-0", "j-w-1", "j-w-2"]);
    let ctx = admitted_context(client, 0);
    let job = Arc::new(job());
    let e = reconcile(job.clone(), ctx.clone()).await.unwrap_err();
    assert!(e.is_transient(), "{e}");
    assert!(
        !log.lock().unwrap().iter().any(|r| r.path.ends_with("/status")),
        "not terminated: no status written by the failed reconcile"
    );
    reconcile(job.clone(), ctx.clone()).await.unwrap();
    let log = log.lock().unwrap();
    let created =
        log.iter().filter(|r| r.method == Method::POST && r.path.ends_with("/pods") && r.status == 201).count();
    assert_eq!(created, 3, "the pods are created by the retry");
    let status: Vec<&Recorded> = log.iter().filter(|r| r.path.ends_with("/status")).collect();
    assert!(status.iter().all(|r| r.body["status"]["state"]["phase"] != "Terminating"), "{status:?}");
}

/// Pod `j-w-<i>` of job `j` in `phase`.
fn job_pod(i: usize, phase: &str) -> Pod {
    let name = format!("j-w-{i}");
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "2",
            "labels": {"volcano.sh/job-name": "j"},
            "annotations": {"volcano.sh/task-spec": "w", "volcano.sh/job-name": "j", "volcano.sh/job-version": "0"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": phase}
    }))
    .unwrap()
}

/// The job as the last status write left it (what the watch delivers next).
fn as_written(log: &Arc<Mutex<Vec<Recorded>>>) -> Job {
    let log = log.lock().unwrap();
    let w = log.iter().rev().find(|r| r.method == Method::PUT && r.path.ends_with("/status")).expect("a status write");
    let mut job = w.body.clone();
    job["metadata"]["resourceVersion"] = json!("2");
    serde_json::from_value(job).unwrap()
}

#[tokio::test]
async fn a_job_entering_completed_is_counted_once() {
    let (client, log) = mock_api(&[]);
    let ctx = admitted_context_with(client, 15, (0..3).map(|i| job_pod(i, "Succeeded")).collect());
    let mut running = job();
    running.status =
        serde_json::from_value(json!({"state": {"phase": "Running"}, "minAvailable": 3, "running": 3})).unwrap();
    let running = Arc::new(running);
    let completed = "volcano_job_completed_phase_count{job_name=\"ml/j\",queue_name=\"default\"}";

    // Every pod succeeded: Completed, counted when the status is written.
    reconcile(running.clone(), ctx.clone()).await.unwrap();
    let job = as_written(&log);
    assert_eq!(job.status.as_ref().unwrap().state.phase, Some(volcano_api::job::JobPhase::Completed));
    let text = ctx.metrics().render();
    assert!(text.contains(&format!("{completed} 1")), "{text}");
    assert!(!text.contains("volcano_job_failed_phase_count{"), "{text}");

    // A reconcile of the stale copy (still Running) decides Completed again, but its write
    // is refused: not counted.
    assert!(reconcile(running, ctx.clone()).await.is_err(), "a stale write is a conflict");
    assert!(ctx.metrics().render().contains(&format!("{completed} 1")));

    // The reconciles of the Completed job that follow leave it Completed: no more counts.
    let writes =
        |log: &Arc<Mutex<Vec<Recorded>>>| log.lock().unwrap().iter().filter(|r| r.path.ends_with("/status")).count();
    let before = writes(&log);
    reconcile(Arc::new(job), ctx.clone()).await.unwrap();
    let job = as_written(&log);
    reconcile(Arc::new(job), ctx.clone()).await.unwrap();
    assert!(writes(&log) > before, "the later reconciles wrote the status too");
    let text = ctx.metrics().render();
    assert!(text.contains(&format!("{completed} 1")), "{text}");
    // No pod was created: nothing observed.
    assert!(text.contains("volcano_controller_job_to_pod_creation_latency_milliseconds_count 0"), "{text}");
}

/// A fake API server that keeps what it is sent: a POST stores the object under its
/// collection and name (409 when it exists), a GET returns it (404 when absent), a merge
/// PATCH applies to it (an object not kept echoes the patch), a DELETE removes it, a PUT
/// echoes; events are accepted. Every request is logged.
type Kept = Arc<Mutex<BTreeMap<(String, String), Value>>>;

fn stateful_api() -> (Client, Arc<Mutex<Vec<Recorded>>>, Kept) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept: Kept = Arc::new(Mutex::new(BTreeMap::new()));
    let (log2, kept2) = (log.clone(), kept.clone());
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let obj: Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
            let path = parts.uri.path().to_string();
            let not_found = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "message": "not found", "reason": "NotFound"});
            let (dir, last) = path.rsplit_once('/').map(|(d, n)| (d.to_string(), n.to_string())).unwrap_or_default();
            let mut kept = kept2.lock().unwrap();
            let method = parts.method.clone();
            let key = (dir.clone(), last.clone());
            let (status, reply, name) = if method == Method::POST && path.ends_with("/events") {
                (201, obj.clone(), String::new())
            } else if method == Method::POST {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let key = (path.clone(), name.clone());
                match kept.entry(key) {
                    std::collections::btree_map::Entry::Occupied(_) => {
                        let exists = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "message": "exists", "reason": "AlreadyExists"});
                        (409, exists, name)
                    }
                    std::collections::btree_map::Entry::Vacant(slot) => {
                        let mut o = obj.clone();
                        o["metadata"]["uid"] = json!(format!("uid-{name}"));
                        o["metadata"]["resourceVersion"] = json!("2");
                        o["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:01Z");
                        slot.insert(o.clone());
                        (201, o, name)
                    }
                }
            } else if method == Method::GET {
                match kept.get(&key) {
                    Some(o) => (200, o.clone(), last.clone()),
                    None => (404, not_found, last.clone()),
                }
            } else if method == Method::PATCH {
                match kept.get_mut(&key) {
                    Some(o) => {
                        merge(o, &obj);
                        (200, o.clone(), last.clone())
                    }
                    None => {
                        let mut o = obj.clone();
                        o["metadata"]["name"] = json!(last.clone());
                        (200, o, last.clone())
                    }
                }
            } else if method == Method::DELETE {
                kept.remove(&key);
                (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}), last.clone())
            } else {
                let mut o = obj.clone();
                o["metadata"]["resourceVersion"] = json!("2");
                (200, o, last.clone())
            };
            drop(kept);
            log2.lock().unwrap().push(Recorded { method: parts.method.clone(), path, name, status, body: obj });
            let response = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap();
            send.send_response(response);
        }
    });
    (Client::new(service, "default"), log, kept)
}

/// A JSON merge patch (RFC 7386).
fn merge(target: &mut Value, patch: &Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().unwrap();
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge(t.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

const CONFIGMAPS: &str = "/api/v1/namespaces/ml/configmaps";

/// The MPI job `m` with `workers` workers, Running, its plugin objects recorded; the scale-in
/// grace period `grace` seconds.
fn mpi_job(workers: i32, grace: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "m", "namespace": "ml", "uid": "job-uid", "resourceVersion": "1",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"volcano.sh/scale-in-grace-seconds": grace}},
        "spec": {
            "minAvailable": 2, "queue": "default", "schedulerName": "volcano-rs",
            "plugins": {"mpi": [], "svc": [], "ssh": []},
            "tasks": [
                {"name": "master", "replicas": 1, "minAvailable": 1,
                 "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
                {"name": "worker", "replicas": workers, "minAvailable": 1,
                 "template": {"spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}
            ]
        },
        "status": {"state": {"phase": "Running"}, "minAvailable": 2, "running": 3,
            "controlledResources": {"plugin-mpi": "mpi", "plugin-ssh": "ssh", "plugin-svc": "svc"}}
    }))
    .unwrap()
}

/// Pod `<task>-<i>` of job `m`, Running with its container ready (or Pending).
fn mpi_pod(task: &str, i: usize, ready: bool) -> Pod {
    let name = format!("m-{task}-{i}");
    let status = if ready {
        json!({"phase": "Running", "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "x", "imageID": ""}]})
    } else {
        json!({"phase": "Pending"})
    };
    let index = i.to_string();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "2",
            "labels": {"volcano.sh/job-name": "m"},
            "annotations": {"volcano.sh/task-spec": task, "volcano.sh/task-index": index,
                "volcano.sh/job-name": "m", "volcano.sh/job-version": "0"},
            "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "m", "uid": "job-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": status
    }))
    .unwrap()
}

/// A leading controller's context over a running MPI job `ml/m` (a master and two Ready
/// workers, its PodGroup Running); the pod store's writer, to change the pods later.
fn running_mpi_job_context(client: Client) -> (Arc<Context>, reflector::store::Writer<Pod>, watch::Sender<bool>) {
    let (pods, mut pods_w) = reflector::store::<Pod>();
    let (groups, mut groups_w) = reflector::store::<PodGroup>();
    let (commands, mut commands_w) = reflector::store::<Command>();
    let (pcs, mut pcs_w) = reflector::store::<PriorityClass>();
    pods_w.apply_watcher_event(&Event::InitDone);
    groups_w.apply_watcher_event(&Event::InitDone);
    commands_w.apply_watcher_event(&Event::InitDone);
    pcs_w.apply_watcher_event(&Event::InitDone);
    for p in [mpi_pod("master", 0, true), mpi_pod("worker", 0, true), mpi_pod("worker", 1, true)] {
        pods_w.apply_watcher_event(&Event::Apply(p));
    }
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "m-job-uid", "namespace": "ml", "uid": "pg-uid"},
        "spec": {"minMember": 2, "minTaskMember": {"master": 1, "worker": 1}}, "status": {"phase": "Running"}
    }))
    .unwrap();
    groups_w.apply_watcher_event(&Event::Apply(pg));
    let (leading_tx, leading) = watch::channel(true);
    let ctx = Arc::new(Context::new(client, pods, groups, commands, pcs, "volcano-rs".into(), leading));
    (ctx, pods_w, leading_tx)
}

/// The data of a kept ConfigMap.
fn kept_data(kept: &Kept, name: &str) -> Option<Value> {
    kept.lock().unwrap().get(&(CONFIGMAPS.to_string(), name.to_string())).map(|c| c["data"].clone())
}

#[tokio::test]
async fn a_resized_mpi_job_refreshes_its_hostfile_and_svc_hosts_in_the_safe_order() {
    let (client, log, kept) = stateful_api();
    let (ctx, mut pods_w, _leading_tx) = running_mpi_job_context(client);
    let hostfile = |kept: &Kept| kept_data(kept, "m-mpi-hostfile").map(|d| d["hostfile"].as_str().unwrap().to_string());

    // The host lists do not exist (deleted, or never made): they are made.
    reconcile(Arc::new(mpi_job(2, "0")), ctx.clone()).await.unwrap();
    assert_eq!(hostfile(&kept).as_deref(), Some("m-worker-0.m slots=2\nm-worker-1.m slots=2\n"));
    assert_eq!(kept_data(&kept, "m-svc").unwrap()["VC_WORKER_NUM"], "2");

    // 2 → 3: the pod is made; the lists wait for it.
    let three = Arc::new(mpi_job(3, "0"));
    let before = log.lock().unwrap().len();
    reconcile(three.clone(), ctx.clone()).await.unwrap();
    {
        let log = log.lock().unwrap();
        let posts: Vec<&str> = log[before..]
            .iter()
            .filter(|r| r.method == Method::POST && r.path.ends_with("/pods"))
            .map(|r| r.name.as_str())
            .collect();
        assert_eq!(posts, ["m-worker-2"]);
        assert!(!log[before..].iter().any(|r| r.method == Method::PATCH && r.path.starts_with(CONFIGMAPS)));
    }
    assert_eq!(hostfile(&kept).unwrap().lines().count(), 2);
    // Ready: published in both lists.
    pods_w.apply_watcher_event(&Event::Apply(mpi_pod("worker", 2, true)));
    reconcile(three.clone(), ctx.clone()).await.unwrap();
    assert_eq!(hostfile(&kept).as_deref(), Some("m-worker-0.m slots=2\nm-worker-1.m slots=2\nm-worker-2.m slots=2\n"));
    let svc = kept_data(&kept, "m-svc").unwrap();
    assert_eq!(
        (svc["VC_WORKER_NUM"].as_str(), svc["worker.host"].as_str()),
        (Some("3"), Some("m-worker-0.m\nm-worker-1.m\nm-worker-2.m"))
    );

    // A host list deleted by hand comes back at the next sync.
    kept.lock().unwrap().remove(&(CONFIGMAPS.to_string(), "m-svc".to_string()));
    reconcile(three.clone(), ctx.clone()).await.unwrap();
    assert_eq!(kept_data(&kept, "m-svc").unwrap()["VC_WORKER_NUM"], "3");

    // 3 → 1 without a grace period: the lists change before the pods go, highest first.
    let before = log.lock().unwrap().len();
    reconcile(Arc::new(mpi_job(1, "0")), ctx.clone()).await.unwrap();
    assert_eq!(hostfile(&kept).as_deref(), Some("m-worker-0.m slots=2\n"));
    assert_eq!(kept_data(&kept, "m-svc").unwrap()["VC_WORKER_HOSTS"], "m-worker-0.m");
    let log = log.lock().unwrap();
    let calls = &log[before..];
    let patched =
        calls.iter().position(|r| r.method == Method::PATCH && r.name == "m-mpi-hostfile").expect("hostfile patched");
    let deleted: Vec<(usize, &str)> = calls
        .iter()
        .enumerate()
        .filter(|(_, r)| r.method == Method::DELETE && r.path.contains("/pods/"))
        .map(|(i, r)| (i, r.name.as_str()))
        .collect();
    assert_eq!(deleted.iter().map(|(_, n)| *n).collect::<Vec<_>>(), ["m-worker-2", "m-worker-1"]);
    assert!(deleted.iter().all(|(i, _)| *i > patched), "the hostfile changes before any pod goes: {calls:?}");
}

#[tokio::test]
async fn a_scale_in_waits_its_grace_period_before_deleting_pods() {
    let (client, log, kept) = stateful_api();
    let (ctx, _pods_w, _leading_tx) = running_mpi_job_context(client);
    reconcile(Arc::new(mpi_job(2, "600")), ctx.clone()).await.unwrap();
    // 2 → 1 with a ten-minute grace period: the worker leaves the lists, its pod stays, and
    // the job is requeued for the end of the grace period.
    let requeue = reconcile(Arc::new(mpi_job(1, "600")), ctx.clone()).await.unwrap();
    assert_eq!(kept_data(&kept, "m-mpi-hostfile").unwrap()["hostfile"], "m-worker-0.m slots=2\n");
    assert!(!log.lock().unwrap().iter().any(|r| r.method == Method::DELETE && r.path.contains("/pods/")));
    let text = format!("{requeue:?}");
    assert!(text.contains("requeue_after: Some(") && !text.contains("requeue_after: None"), "{text}");
}

#[tokio::test]
async fn a_restarted_controller_resumes_a_scale_out_from_the_published_host_list() {
    let (client, _log, kept) = stateful_api();
    let (ctx, _pods_w, _leading_tx) = running_mpi_job_context(client.clone());
    reconcile(Arc::new(mpi_job(2, "0")), ctx.clone()).await.unwrap();
    // 2 → 3: worker 2 is made, not Ready yet; then the controller restarts (no memory).
    let three = Arc::new(mpi_job(3, "0"));
    reconcile(three.clone(), ctx).await.unwrap();
    let (ctx, mut pods_w, _leading_tx) = running_mpi_job_context(client);
    pods_w.apply_watcher_event(&Event::Apply(mpi_pod("worker", 2, false)));
    reconcile(three.clone(), ctx.clone()).await.unwrap();
    let hostfile = |kept: &Kept| kept_data(kept, "m-mpi-hostfile").unwrap()["hostfile"].as_str().unwrap().to_string();
    assert_eq!(hostfile(&kept), "m-worker-0.m slots=2\nm-worker-1.m slots=2\n", "the unready worker is not published");
    assert_eq!(kept_data(&kept, "m-svc").unwrap()["VC_WORKER_NUM"], "2");
    // Once Ready it is.
    pods_w.apply_watcher_event(&Event::Apply(mpi_pod("worker", 2, true)));
    reconcile(three, ctx).await.unwrap();
    assert_eq!(hostfile(&kept).lines().count(), 3);
}
