//! The reconciler against a mock API server (kube's `tower-test` style): a reconcile that
//! fails half-way and is retried creates nothing twice.

use std::collections::BTreeSet;
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

#[derive(Clone, Debug)]
struct Recorded {
    method: Method,
    path: String,
    name: String,
    status: u16,
}

/// A fake API server: POSTs store the object by path and name (409 when it exists; 500 for
/// the names in `fail_once`, the first time); everything else echoes the body.
fn mock_api(fail_once: &[&str]) -> (Client, Arc<Mutex<Vec<Recorded>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    let mut fail: BTreeSet<String> = fail_once.iter().map(|s| s.to_string()).collect();
    tokio::spawn(async move {
        let mut stored: BTreeSet<(String, String)> = BTreeSet::new();
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let mut obj: Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
            let path = parts.uri.path().to_string();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let (status, reply) = if parts.method == Method::GET && path.ends_with("/priorityclasses") {
                (200, json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": []}))
            } else if parts.method == Method::POST && fail.remove(&name) {
                (
                    500,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "message": "boom", "reason": "InternalError"}),
                )
            } else if parts.method == Method::POST && !stored.insert((path.clone(), name.clone())) {
                (
                    409,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "message": "exists", "reason": "AlreadyExists"}),
                )
            } else {
                obj["metadata"]["uid"] = json!(format!("uid-{name}"));
                obj["metadata"]["resourceVersion"] = json!("2");
                (if parts.method == Method::POST { 201 } else { 200 }, obj)
            };
            log2.lock().unwrap().push(Recorded { method: parts.method.clone(), path, name, status });
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
        "metadata": {"name": "j", "namespace": "ml", "uid": "job-uid", "resourceVersion": "1"},
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
}
