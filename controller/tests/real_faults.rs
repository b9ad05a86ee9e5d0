//! The controller's fault-injection test against a real API server (etcd + kube-apiserver
//! from `KUBEBUILDER_ASSETS`, skipped with a message when unset; docs/testing.md): the
//! controller runs in process with deploy/volcano-rs-controller.yaml's token and leader
//! election on; kube-apiserver is killed and started again on the same port 12 s later,
//! then stopped with SIGSTOP for 12 s. After each, a job that was running before goes on
//! through its phases and a job created after the API server is ready gets its PodGroup
//! and pods: no job stuck in a phase. The times from "ready again" are printed
//! (`CONTROLLER FAULT …`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::{Job, JobPhase};
use volcano_controller::run;
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};

mod common;
use common::options;

const NS: &str = "ml";
const WAIT: Duration = Duration::from_secs(60);
const OUTAGE: Duration = Duration::from_secs(12);

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "minAvailable": 2, "queue": "default", "schedulerName": "volcano-rs",
            "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "pytorch"}], "restartPolicy": "OnFailure"}}}]
        }
    }))
    .unwrap()
}

fn phase(j: &Job) -> Option<JobPhase> {
    j.status.as_ref().and_then(|s| s.state.phase.clone())
}

/// Polls (each call at most 2 s, so a paused API server does not hang the test).
async fn poll<T, Fut: std::future::Future<Output = Option<T>>>(what: &str, f: impl Fn() -> Fut) -> T {
    eventually(WAIT, what, || async { tokio::time::timeout(Duration::from_secs(2), f()).await.ok().flatten() }).await
}

async fn job_phase(client: &Client, name: &str, want: JobPhase) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    poll(&format!("job {name} {want:?}"), || async {
        jobs.get(name).await.ok().filter(|j| phase(j) == Some(want.clone()))
    })
    .await;
}

/// What the scheduler does at enqueue: the job's PodGroup leaves Pending.
async fn admit(client: &Client, name: &str) {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    let pg = poll(&format!("the PodGroup of {name}"), || async {
        pgs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|g| g.metadata.owner_references.iter().flatten().any(|o| o.kind == "Job" && o.name == name))
    })
    .await;
    let pg_name = pg.metadata.name.unwrap();
    pgs.patch(&pg_name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"phase": "Inqueue"}})))
        .await
        .unwrap();
}

async fn pods_of(client: &Client, job: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("volcano.sh/job-name={job}"));
    poll(&format!("{n} pods of job {job}"), || async {
        let items = pods.list(&lp).await.ok()?.items;
        (items.len() == n).then_some(items)
    })
    .await
}

async fn set_phase(client: &Client, pods: &[Pod], phase: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    for p in pods {
        let name = p.metadata.name.clone().unwrap();
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"phase": phase}})))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_resumes_after_the_api_server_comes_back() {
    let Some(assets) = support::assets() else { return };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("volcano-rs-controller.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    server.namespace(NS).await;
    let client = server.client().await;
    let q: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}, "spec": {}
    }))
    .unwrap();
    Api::<Queue>::all(client.clone()).create(&PostParams::default(), &q).await.unwrap();
    let http = format!("127.0.0.1:{}", free_port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(options(&kubeconfig, &http), async move {
        let _ = stopped.await;
    }));
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);

    for (round, kill) in [(1, true), (2, false)] {
        let before = format!("before-{round}");
        jobs.create(&PostParams::default(), &job(&before)).await.unwrap();
        admit(&client, &before).await;
        let pods = pods_of(&client, &before, 2).await;
        job_phase(&client, &before, JobPhase::Pending).await;

        if kill {
            server.kill_apiserver();
            tokio::time::sleep(OUTAGE).await;
            server.restart_apiserver();
        } else {
            server.pause_apiserver(true);
            tokio::time::sleep(OUTAGE).await;
            server.pause_apiserver(false);
        }
        server.wait_ready(WAIT).await;
        let ready = Instant::now();
        let client = server.client().await;
        let jobs: Api<Job> = Api::namespaced(client.clone(), NS);

        // The job that was there before goes on: its pods run, it runs.
        set_phase(&client, &pods, "Running").await;
        job_phase(&client, &before, JobPhase::Running).await;
        let running = ready.elapsed();
        // A job created now gets its PodGroup and, once admitted, its pods.
        let after = format!("after-{round}");
        jobs.create(&PostParams::default(), &job(&after)).await.unwrap();
        admit(&client, &after).await;
        let admitted = ready.elapsed();
        pods_of(&client, &after, 2).await;
        let created = ready.elapsed();
        eprintln!(
            "CONTROLLER FAULT {}: after the API server was ready: the earlier job Running {:.2} s, the new job's PodGroup {:.2} s, its pods {:.2} s",
            if kill { "kill" } else { "pause" },
            running.as_secs_f64(),
            admitted.as_secs_f64(),
            created.as_secs_f64()
        );
        // No pod made twice.
        let all = Api::<Pod>::namespaced(client.clone(), NS).list(&ListParams::default()).await.unwrap();
        assert_eq!(all.items.len(), 4 * round);
    }
    let _ = stop.send(());
    controller.await.unwrap().unwrap();
}
