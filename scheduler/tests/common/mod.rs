//! What the real-API-server suites of the scheduler share: nodes as the suites make them,
//! and the scheduler started in the test's runtime.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeSpec, NodeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::oneshot;
use volcano_scheduler::options::SchedulerOptions;
use volcano_scheduler::run::{run, Handle};

/// A resource list from (name, quantity) pairs.
pub(crate) fn quantities(list: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    list.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
}

/// Creates a Ready node of 32 cpus, 256Gi and `gpus` GPUs, labelled with its scenario.
pub(crate) async fn create_node(client: &Client, name: &str, scenario: &str, gpus: u32) {
    let api: Api<Node> = Api::all(client.clone());
    let gpu = gpus.to_string();
    let res = quantities(&[("cpu", "32"), ("memory", "256Gi"), ("pods", "110"), ("nvidia.com/gpu", &gpu)]);
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("envtest-scenario".to_string(), scenario.to_string())].into_iter().collect()),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus { allocatable: Some(res.clone()), capacity: Some(res), ..Default::default() }),
    };
    api.create(&PostParams::default(), &node).await.expect("node created");
    // No node controller: take the not-ready taint away ourselves, and make sure the status
    // (capacity, allocatable) is what we meant.
    api.patch(name, &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"taints": null}})))
        .await
        .expect("taints removed");
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(serde_json::json!({"status": node.status})))
        .await
        .expect("node status");
}

/// A scheduler running in the test's runtime.
pub(crate) struct Running {
    pub(crate) handle: Handle,
    pub(crate) stop: Option<oneshot::Sender<()>>,
    pub(crate) join: tokio::task::JoinHandle<Result<(), volcano_scheduler::run::RunError>>,
}

impl Running {
    /// Stops the scheduler and waits until it ended cleanly.
    pub(crate) async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        self.join.await.expect("the scheduler task ends").expect("the scheduler stops cleanly");
    }
}

/// Starts the scheduler and waits (2 minutes at most: the first lists of a loaded cluster
/// take seconds) until it says it started.
pub(crate) async fn start(o: SchedulerOptions) -> Running {
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (started_tx, started_rx) = oneshot::channel();
    let join = tokio::spawn(run(
        o,
        async move {
            let _ = stop_rx.await;
        },
        Some(started_tx),
    ));
    let handle = tokio::time::timeout(Duration::from_secs(120), started_rx)
        .await
        .expect("the scheduler starts")
        .expect("a handle");
    Running { handle, stop: Some(stop_tx), join }
}
