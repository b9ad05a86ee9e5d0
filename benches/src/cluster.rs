//! Loading a real API server with a bench cluster (feature `cluster`): what
//! `volcano-rs bench-cluster load` does (docs/performance.md, "Against an API server"), and
//! what the fault-injection suite preloads at scale (`scheduler/tests/real_faults.rs`).
//!
//! [`load`] creates cluster `gpu-N` as Node objects ([`gpu_node`]; no kubelet: the
//! not-ready taint is removed and the status written here), `running` pods already bound to
//! the nodes (28 per node for 140,000 on 5,000 nodes; `cpu: 1`, `memory: 1Gi` each, in
//! namespace `bench-running`, so they use resources but leave every GPU free), the queues
//! `q0`…`q3` and a `gang-P` workload pending in namespace `bench` for a given scheduler name.
//!
//! This is the only module of the harness that talks to an API server; without the feature
//! the harness links no Kubernetes client (tidy: `offline_commands_reach_no_kube_facing_crate`).

use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use volcano_api::crd::{PodGroup, Queue};

use crate::workloads::{self, gang, gpu_node, queues};

/// The namespace of the bound pods.
pub const RUNNING_NAMESPACE: &str = "bench-running";
/// The namespace of the pending workload.
pub const PENDING_NAMESPACE: &str = "bench";

/// What to create.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// Nodes of cluster `gpu-N`.
    pub nodes: usize,
    /// Pods already bound (spread evenly over the nodes).
    pub running: usize,
    /// Pending pods (`gang-P`).
    pub pending: usize,
    /// `schedulerName` of the pending pods.
    pub scheduler_name: String,
    /// Requests in flight at once.
    pub concurrency: usize,
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

async fn create_or_exists<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn namespace(client: &Client, name: &str) -> Result<(), kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() };
    create_or_exists(&api, &ns).await
}

/// Bound pod `i` of `nodes`: `running-{i:06}` on `node-{i % nodes:05}`.
fn running_pod(i: usize, nodes: usize) -> Pod {
    let request: std::collections::BTreeMap<String, Quantity> =
        [("cpu".to_string(), q("1")), ("memory".to_string(), q("1Gi"))].into_iter().collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("running-{i:06}")),
            namespace: Some(RUNNING_NAMESPACE.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(format!("node-{:05}", i % nodes)),
            containers: vec![Container { image: Some("busybox".into()), ..workloads::container(request) }],
            ..Default::default()
        }),
        status: None,
    }
}

/// Installs volcano-rs's CRDs (as in deploy/crds) when missing and waits until they serve.
pub async fn install_crds(client: &Client) -> Result<(), kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [volcano_api::crds::pod_group(), volcano_api::crds::queue()] {
        create_or_exists(&api, &crd).await?;
        let name = crd.name_any();
        for _ in 0..300 {
            let established = api
                .get(&name)
                .await?
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"));
            if established {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Creates the cluster, printing progress on stderr; returns the time it took. Objects
/// already there are kept (a second load adds only what is missing), except the pending
/// workload, which is replaced so that every run starts unbound.
pub async fn load(client: &Client, spec: &LoadSpec) -> Result<Duration, kube::Error> {
    let start = Instant::now();
    let c = spec.concurrency.max(1);
    install_crds(client).await?;
    namespace(client, PENDING_NAMESPACE).await?;
    namespace(client, RUNNING_NAMESPACE).await?;
    let qapi: Api<Queue> = Api::all(client.clone());
    for mut queue in queues() {
        queue.metadata.creation_timestamp = None;
        create_or_exists(&qapi, &queue).await?;
    }
    let napi: Api<Node> = Api::all(client.clone());
    let existing = napi.list_metadata(&Default::default()).await?.items.len();
    stream::iter(existing.min(spec.nodes)..spec.nodes)
        .map(|i| {
            let napi = napi.clone();
            async move {
                let node = gpu_node(i);
                let name = node.name_any();
                create_or_exists(&napi, &node).await?;
                let pp = PatchParams::default();
                napi.patch(&name, &pp, &Patch::Merge(serde_json::json!({"spec": {"taints": null}}))).await?;
                napi.patch_status(&name, &pp, &Patch::Merge(serde_json::json!({"status": node.status}))).await?;
                Ok::<_, kube::Error>(())
            }
        })
        .buffer_unordered(c)
        .collect_progress("nodes", spec.nodes)
        .await?;
    let papi: Api<Pod> = Api::namespaced(client.clone(), RUNNING_NAMESPACE);
    let existing = papi.list_metadata(&Default::default()).await?.items.len();
    stream::iter(existing.min(spec.running)..spec.running)
        .map(|i| {
            let papi = papi.clone();
            let nodes = spec.nodes.max(1);
            async move { create_or_exists(&papi, &running_pod(i, nodes)).await }
        })
        .buffer_unordered(c)
        .collect_progress("running pods", spec.running)
        .await?;
    // Pending pods from an earlier run are replaced, so that every run starts unbound.
    let dp = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    let bpods: Api<Pod> = Api::namespaced(client.clone(), PENDING_NAMESPACE);
    bpods.delete_collection(&dp, &Default::default()).await?;
    let bgroups: Api<PodGroup> = Api::namespaced(client.clone(), PENDING_NAMESPACE);
    bgroups.delete_collection(&dp, &Default::default()).await?;
    while !bpods.list_metadata(&Default::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let jobs = gang(0, spec.pending);
    let pending: usize = jobs.iter().map(|j| j.pods.len()).sum();
    let pgapi: Api<PodGroup> = Api::namespaced(client.clone(), PENDING_NAMESPACE);
    let bapi: Api<Pod> = Api::namespaced(client.clone(), PENDING_NAMESPACE);
    let objects: Vec<(PodGroup, Vec<Pod>)> = jobs
        .into_iter()
        .map(|j| {
            let mut pg = j.pod_group;
            pg.metadata.uid = None;
            pg.metadata.creation_timestamp = None;
            pg.status = None;
            let pods = j
                .pods
                .into_iter()
                .map(|mut p| {
                    p.metadata.uid = None;
                    p.metadata.creation_timestamp = None;
                    p.status = None;
                    let pod_spec = p.spec.as_mut().expect("spec");
                    pod_spec.scheduler_name = Some(spec.scheduler_name.clone());
                    for c in &mut pod_spec.containers {
                        c.image.get_or_insert_with(|| "busybox".to_string());
                    }
                    p
                })
                .collect();
            (pg, pods)
        })
        .collect();
    stream::iter(objects.iter().map(|(pg, _)| pg))
        .map(|pg| {
            let pgapi = pgapi.clone();
            async move { create_or_exists(&pgapi, pg).await }
        })
        .buffer_unordered(c)
        .collect_progress("PodGroups", objects.len())
        .await?;
    stream::iter(objects.iter().flat_map(|(_, pods)| pods))
        .map(|p| {
            let bapi = bapi.clone();
            async move { create_or_exists(&bapi, p).await }
        })
        .buffer_unordered(c)
        .collect_progress("pending pods", pending)
        .await?;
    Ok(start.elapsed())
}

/// Drains a stream of results, printing progress every 10 %.
trait CollectProgress {
    async fn collect_progress(self, what: &str, total: usize) -> Result<(), kube::Error>;
}

impl<S> CollectProgress for S
where
    S: futures::Stream<Item = Result<(), kube::Error>> + Send,
{
    async fn collect_progress(self, what: &str, total: usize) -> Result<(), kube::Error> {
        let start = Instant::now();
        let mut done = 0usize;
        let step = (total / 10).max(1);
        let mut stream = std::pin::pin!(self);
        while let Some(r) = stream.next().await {
            r?;
            done += 1;
            if done.is_multiple_of(step) || done == total {
                eprintln!("  {what}: {done}/{total} ({:.0}/s)", done as f64 / start.elapsed().as_secs_f64().max(1e-3));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound pods spread evenly: pod `i` on node `i % nodes`, 28 per node for 140,000
    /// on 5,000, each asking for one cpu and 1Gi, no GPU.
    #[test]
    fn running_pods_spread_over_the_nodes() {
        let p = running_pod(5_001, 5_000);
        assert_eq!(p.metadata.name.as_deref(), Some("running-005001"));
        let spec = p.spec.expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("node-00001"));
        let requests = spec.containers[0].resources.as_ref().and_then(|r| r.requests.clone()).expect("requests");
        assert_eq!(requests.keys().map(String::as_str).collect::<Vec<_>>(), ["cpu", "memory"]);
    }
}
