//! The TrainingJob reconciler against a mock API server (kube's `tower-test` style): the
//! exact calls of a ScaleIn by count, in their order: the request made the job's, the host
//! list changed before the removed worker's pod and Service are deleted, then the request's
//! status and the job's.

use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Pod;
use kube::client::Body;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use kube::Client;
use serde_json::{json, Value};
use tokio::sync::watch;
use volcano_api::et::{ScaleIn, ScaleOut, TrainingJob};
use volcano_controller::training_reconcile::{reconcile_training, TrainingContext};

/// A fake API server logging (method, path, body): GET is 404, DELETE succeeds, the rest
/// echoes the body (with an empty spec when it has none).
/// The calls made: method, path, body.
type Log = Arc<Mutex<Vec<(Method, String, Value)>>>;

fn mock_api() -> (Client, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let obj: Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
            let (status, reply) = match parts.method {
                Method::GET => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}),
                ),
                Method::DELETE => {
                    (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
                }
                Method::POST => (201, obj.clone()),
                // A patch answers with the whole object: here a request with an empty spec.
                _ => {
                    let mut reply = obj.clone();
                    for (k, v) in [("spec", json!({})), ("metadata", json!({}))] {
                        if reply.get(k).is_none() {
                            reply[k] = v;
                        }
                    }
                    (200, reply)
                }
            };
            log2.lock().unwrap().push((parts.method.clone(), parts.uri.path().to_string(), obj));
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

fn owned_pod(name: &str, role: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": {"training-job-name": "hvd", "training-job-role": role},
            "ownerReferences": [{"apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob", "name": "hvd",
                "uid": "job-uid", "controller": true}]},
        "spec": {"containers": [{"name": "main", "image": "horovod"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    }))
    .unwrap()
}

fn running_job() -> TrainingJob {
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    serde_json::from_value(json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": "hvd", "namespace": "ml", "uid": "job-uid", "resourceVersion": "7",
            "annotations": {"volcano.sh/scale-in-grace-seconds": "0"}},
        "spec": {"etReplicaSpecs": {
            "launcher": {"template": {"spec": {"containers": [{"name": "main", "image": "horovod"}]}}},
            "worker": {"replicas": 2, "minReplicas": 1, "template": {"spec": {"containers": [{"name": "main", "image": "horovod"}]}}}
        }},
        "status": {"phase": "Running", "restartCount": 0,
            "conditions": [cond("Created"), cond("WorkersCreated"), cond("WorkersReady"), cond("LauncherCreated"), cond("Running")],
            "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}},
            "startTime": "2026-01-01T00:00:00Z",
            "targetWorkers": ["hvd-worker-0", "hvd-worker-1"], "currentWorkers": ["hvd-worker-0", "hvd-worker-1"]}
    }))
    .unwrap()
}

#[tokio::test]
async fn a_scale_in_changes_the_host_list_before_deleting_the_worker() {
    let (client, log) = mock_api();
    let (pods, mut pods_w) = reflector::store::<Pod>();
    let (outs, mut outs_w) = reflector::store::<ScaleOut>();
    let (ins, mut ins_w) = reflector::store::<ScaleIn>();
    pods_w.apply_watcher_event(&Event::InitDone);
    outs_w.apply_watcher_event(&Event::InitDone);
    ins_w.apply_watcher_event(&Event::InitDone);
    for p in [
        owned_pod("hvd-worker-0", "worker"),
        owned_pod("hvd-worker-1", "worker"),
        owned_pod("hvd-launcher", "launcher"),
    ] {
        pods_w.apply_watcher_event(&Event::Apply(p));
    }
    let shrink: ScaleIn = serde_json::from_value(json!({
        "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "ScaleIn",
        "metadata": {"name": "shrink", "namespace": "ml", "creationTimestamp": "2026-01-01T00:01:00Z"},
        "spec": {"selector": {"name": "hvd"}, "toDelete": {"count": 1}}
    }))
    .unwrap();
    ins_w.apply_watcher_event(&Event::Apply(shrink));
    let (_, leading) = watch::channel(true);
    let ctx = Arc::new(TrainingContext::new(client, pods, outs, ins, "volcano-rs".into(), leading));

    reconcile_training(Arc::new(running_job()), ctx).await.unwrap();
    let calls: Vec<(Method, String)> = log.lock().unwrap().iter().map(|(m, p, _)| (m.clone(), p.clone())).collect();
    let want = [
        (Method::PATCH, "/apis/kai.alibabacloud.com/v1alpha1/namespaces/ml/scaleins/shrink"),
        (Method::GET, "/api/v1/namespaces/ml/configmaps/hvd-config"),
        (Method::POST, "/api/v1/namespaces/ml/configmaps"),
        (Method::DELETE, "/api/v1/namespaces/ml/pods/hvd-worker-1"),
        (Method::DELETE, "/api/v1/namespaces/ml/services/hvd-worker-1"),
        (Method::PATCH, "/apis/kai.alibabacloud.com/v1alpha1/namespaces/ml/scaleins/shrink/status"),
        (Method::PUT, "/apis/kai.alibabacloud.com/v1alpha1/namespaces/ml/trainingjobs/hvd/status"),
    ];
    let want: Vec<(Method, String)> = want.iter().map(|(m, p)| (m.clone(), p.to_string())).collect();
    assert_eq!(calls, want);
    let log = log.lock().unwrap();
    assert_eq!(log[0].2["metadata"]["ownerReferences"][0]["uid"], "job-uid");
    assert_eq!(log[2].2["data"]["hostfile"], "hvd-worker-0:1\n", "the host list without the removed worker");
    assert_eq!(log[5].2["status"]["phase"], "ScaleSucceeded");
    assert_eq!(log[5].2["status"]["toDeletePods"], json!(["hvd-worker-1"]));
    assert_eq!(log[6].2["status"]["currentWorkers"], json!(["hvd-worker-0"]));
    assert_eq!(log[6].2["status"]["targetWorkers"], json!(["hvd-worker-0"]));
    assert_eq!(log[6].2["metadata"]["resourceVersion"], "7", "a replace of the status read");
}
