//! End to end against a real API server (etcd + kube-apiserver from `KUBEBUILDER_ASSETS`,
//! skipped with a message when unset; docs/testing.md): what a new user does with `deploy/`
//! and `examples/jobs/`.
//!
//! `deploy/`'s ServiceAccounts and RBAC are applied, and `volcano-rs webhook`,
//! `volcano-rs scheduler` and two replicas of `volcano-rs controller` (leader election on)
//! run in process, each with its ServiceAccount's token. Four GPU nodes are created; a
//! "kubelet" task of the test moves bound pods to Running (every container ready), finishes
//! deleted pods and, when asked, makes pods succeed. Every `examples/jobs/*.yaml` is submitted
//! with `volcano-rs job run`'s code; the test checks that each job's pods are bound, carry
//! their plugins' environment and objects, and that the job runs. Then the leading
//! controller stops, the other takes over, and the lifecycle goes on: a policy completes
//! the TensorFlow job, `job suspend` / `resume` abort and restart the PyTorch job, `job
//! delete` deletes one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::{oneshot, Mutex};
use volcano_api::crd::PodGroup;
use volcano_api::job::{Job, JobPhase};
use volcano_controller::cli::{self as vcctl, JobCommand};
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};

// An upper bound: generous, so that a machine busy with builds does not fail a test that
// passes in 20 s when idle.
const WAIT: Duration = Duration::from_secs(120);
const NS: &str = "default";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn create_node(client: &Client, name: &str, gpus: &str) {
    let api: Api<Node> = Api::all(client.clone());
    let res: BTreeMap<String, Quantity> =
        [("cpu", "64"), ("memory", "512Gi"), ("pods", "110"), ("nvidia.com/gpu", gpus)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"capacity": res, "allocatable": res}
    }))
    .unwrap();
    api.create(&PostParams::default(), &node).await.unwrap();
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"taints": null}}))).await.unwrap();
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": node.status}))).await.unwrap();
}

/// The test's kubelet: bound pods become Running with every container ready (unless they
/// are asked to succeed), deleted pods are finished.
async fn kubelet(client: Client, succeed: Arc<Mutex<Vec<String>>>, stop: oneshot::Receiver<()>) {
    let pods: Api<Pod> = Api::namespaced(client, NS);
    let work = async {
        loop {
            let list = pods.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            let succeed = succeed.lock().await.clone();
            for p in list {
                let name = p.name_any();
                if p.metadata.deletion_timestamp.is_some() {
                    let _ =
                        pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
                    continue;
                }
                let Some(spec) = p.spec.as_ref().filter(|s| s.node_name.is_some()) else { continue };
                let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let want = if succeed.contains(&name) { "Succeeded" } else { "Running" };
                if phase == want || phase == "Succeeded" || phase == "Failed" {
                    continue;
                }
                let running = want == "Running";
                let statuses: Vec<_> = spec
                    .containers
                    .iter()
                    .map(|c| {
                        let state = if running {
                            json!({"running": {"startedAt": "2026-11-25T00:00:00Z"}})
                        } else {
                            json!({"terminated": {"exitCode": 0, "reason": "Completed"}})
                        };
                        json!({"name": c.name, "image": c.image, "imageID": "", "ready": running,
                               "restartCount": 0, "started": running, "state": state})
                    })
                    .collect();
                let patch = json!({"status": {"phase": want, "containerStatuses": statuses}});
                let _ = pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        _ = work => {}
        _ = stop => {}
    }
}

async fn job_where(client: &Client, name: &str, what: &str, f: impl Fn(&Job) -> bool) -> Job {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, &format!("job {name}: {what}"), || {
        let jobs = jobs.clone();
        let f = &f;
        let name = name.to_string();
        async move { jobs.get(&name).await.ok().filter(|j| f(j)) }
    })
    .await
}

fn phase(j: &Job) -> Option<JobPhase> {
    j.status.as_ref().and_then(|s| s.state.phase.clone())
}

/// The pods of `job`, once there are `n`, all bound.
async fn bound_pods(client: &Client, job: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, &format!("{n} bound pods of job {job}"), || {
        let pods = pods.clone();
        let lp = ListParams::default().labels(&format!("volcano.sh/job-name={job}"));
        async move {
            let items: Vec<Pod> = pods
                .list(&lp)
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let bound = items.iter().all(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()));
            (items.len() == n && bound).then_some(items)
        }
    })
    .await
}

fn env(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
        .collect()
}

fn pod<'a>(pods: &'a [Pod], name: &str) -> &'a Pod {
    pods.iter().find(|p| p.name_any() == name).unwrap_or_else(|| panic!("pod {name}"))
}

/// `volcano-rs scheduler` in process: a 200 ms period, no leader election, no listeners.
struct Scheduler {
    stop: oneshot::Sender<()>,
    join: tokio::task::JoinHandle<()>,
}

fn scheduler(kubeconfig: PathBuf) -> Scheduler {
    let mut so = volcano_scheduler::options::SchedulerOptions::defaults();
    so.kubeconfig = Some(kubeconfig);
    so.schedule_period = Duration::from_millis(200);
    so.leader_elect = false;
    so.listen_address = String::new();
    so.healthz_address = String::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = volcano_scheduler::run::run(
        so,
        async move {
            let _ = stopped.await;
        },
        None,
    );
    let join = tokio::spawn(async move { run.await.expect("the scheduler runs") });
    Scheduler { stop, join }
}

impl Scheduler {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.join.await.unwrap();
    }
}

struct Replica {
    stop: oneshot::Sender<()>,
    join: tokio::task::JoinHandle<Result<(), volcano_controller::ControllerError>>,
}

fn controller(kubeconfig: &Path) -> Replica {
    controller_with(kubeconfig, &[])
}

fn controller_with(kubeconfig: &Path, flags: &[&str]) -> Replica {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: volcano_controller::ControllerOptions,
    }
    let kc = kubeconfig.to_str().unwrap().to_string();
    // Two replicas in one process: no metrics listener (`:8081` by default).
    let mut args = vec!["controller", "--kubeconfig", &kc, "--listen-address="];
    args.extend_from_slice(flags);
    let opts = Cli::try_parse_from(args).unwrap().opts;
    let (stop, stopped) = oneshot::channel::<()>();
    let join = tokio::spawn(volcano_controller::run(opts, async move {
        let _ = stopped.await;
    }));
    Replica { stop, join }
}

async fn vcctl_job(client: &Client, cmd: JobCommand) -> String {
    vcctl::job(client.clone(), &cmd).await.unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_examples_run_in_a_cluster() {
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let deploy = repo().join("deploy");
    server
        .apply_files(&[
            deploy.join("namespace.yaml"),
            deploy.join("rbac.yaml"),
            deploy.join("webhook.yaml"),
            deploy.join("volcano-rs-controller.yaml"),
        ])
        .await;
    let client = server.client().await;
    let scheduler_kc = server.service_account_kubeconfig("volcano-system", "volcano-rs-scheduler").await;
    let webhook_kc = server.service_account_kubeconfig("volcano-system", "volcano-rs-webhook").await;
    let controller_kc = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    for i in 0..4 {
        create_node(&client, &format!("gpu-{i}"), "8").await;
    }

    // The scheduler (it creates the default queue).
    let scheduler = scheduler(scheduler_kc);

    // The webhook, registered with the API server.
    let port = free_port();
    let wo = {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            opts: volcano_webhook::run::WebhookOptions,
        }
        let (kc, p, url) =
            (webhook_kc.to_str().unwrap().to_string(), port.to_string(), format!("https://127.0.0.1:{port}"));
        Cli::try_parse_from([
            "webhook",
            "--kubeconfig",
            &kc,
            "--listen-address",
            "127.0.0.1",
            "--port",
            &p,
            "--webhook-url",
            &url,
            "--webhook-namespace",
            "volcano-system",
        ])
        .unwrap()
        .opts
    };
    let (hook_stop, hook_stopped) = oneshot::channel::<()>();
    let webhook = tokio::spawn(volcano_webhook::run::run(wo, async move {
        let _ = hook_stopped.await;
    }));
    // Two controller replicas: the first takes the Lease, then the second starts and waits.
    let first_replica = controller(&controller_kc);
    let leases: Api<Lease> = Api::namespaced(client.clone(), "volcano-system");
    let first = eventually(WAIT, "the first controller holding the Lease", || {
        let leases = leases.clone();
        async move { leases.get("volcano-rs-controller").await.ok()?.spec?.holder_identity.filter(|h| !h.is_empty()) }
    })
    .await;
    let second_replica = controller(&controller_kc);

    // The webhook is in the API server's path once it refuses a bad job.
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let bad: Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "bad"},
        "spec": {"minAvailable": 5, "tasks": [{"name": "t", "replicas": 1,
            "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}]}
    }))
    .unwrap();
    eventually(WAIT, "the webhook refusing a job", || {
        let jobs = jobs.clone();
        let bad = bad.clone();
        async move {
            match jobs.create(&PostParams::default(), &bad).await {
                Err(kube::Error::Api(s)) if s.message.contains("minAvailable") => Some(()),
                Ok(_) => {
                    let _ = jobs.delete("bad", &DeleteParams::default()).await;
                    None
                }
                Err(_) => None,
            }
        }
    })
    .await;

    let succeed = Arc::new(Mutex::new(Vec::<String>::new()));
    let (kubelet_stop, kubelet_stopped) = oneshot::channel::<()>();
    let kubelet = tokio::spawn(kubelet(client.clone(), succeed.clone(), kubelet_stopped));

    // The scheduler creates the default queue once its caches are synced; the webhook
    // refuses jobs of a queue that does not exist.
    let queues: Api<volcano_api::crd::Queue> = Api::all(client.clone());
    eventually(WAIT, "the default queue", || {
        let queues = queues.clone();
        async move { queues.get_opt("default").await.ok().flatten() }
    })
    .await;

    // Every example, as `volcano-rs job run -f` submits it.
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo().join("examples/jobs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    examples.sort();
    assert_eq!(examples.len(), 5, "{examples:?}");
    for file in &examples {
        let out = vcctl_job(&client, JobCommand::Run { file: file.clone(), namespace: NS.into() }).await;
        assert!(out.contains("created"), "{out}");
    }
    let names: Vec<String> =
        jobs.list(&ListParams::default()).await.unwrap().items.iter().map(|j| j.name_any()).collect();
    assert_eq!(names.len(), 5, "{names:?}");

    // TensorFlow: TF_CONFIG for ps and workers, the svc plugin's Service (added by the webhook).
    let tf = bound_pods(&client, "tf-dist-mnist", 3).await;
    let tf_config: serde_json::Value =
        serde_json::from_str(&env(pod(&tf, "tf-dist-mnist-worker-1"))["TF_CONFIG"]).unwrap();
    assert_eq!(tf_config["task"], json!({"type": "worker", "index": 1}));
    assert_eq!(tf_config["cluster"]["ps"], json!(["tf-dist-mnist-ps-0.tf-dist-mnist:2222"]));
    Api::<Service>::namespaced(client.clone(), NS).get("tf-dist-mnist").await.unwrap();
    job_where(&client, "tf-dist-mnist", "Running", |j| phase(j) == Some(JobPhase::Running)).await;

    // Every other example runs too, with its plugins' environment and objects.
    for job in &names {
        job_where(&client, job, "Running", |j| phase(j) == Some(JobPhase::Running)).await;
        let pg = Api::<PodGroup>::namespaced(client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .find(|g| g.owner_references().iter().any(|o| o.name == *job))
            .unwrap_or_else(|| panic!("the PodGroup of {job}"));
        assert!(pg.name_any().starts_with(&format!("{job}-")), "{}", pg.name_any());
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let all = pods.list(&ListParams::default()).await.unwrap().items;
    let with = |key: &str| all.iter().filter(|p| env(p).contains_key(key)).count();
    assert!(with("MASTER_ADDR") >= 2 && with("PET_NNODES") >= 2, "PyTorch's env");
    assert!(with("DMLC_ROLE") >= 3, "MXNet's env");
    assert!(with("VC_TASK_INDEX") >= 1, "env plugin");
    let hostfiles = Api::<ConfigMap>::namespaced(client.clone(), NS).list(&ListParams::default()).await.unwrap().items;
    assert!(
        hostfiles.iter().any(|c| c.data.as_ref().is_some_and(|d| d.values().any(|v| v.contains("slots=")))),
        "the mpi plugin's hostfile"
    );

    // The leading controller stops (and releases the Lease); the other takes over.
    let _ = first_replica.stop.send(());
    first_replica.join.await.unwrap().unwrap();
    let second = eventually(WAIT, "the second controller holding the Lease", || {
        let leases = leases.clone();
        let first = first.clone();
        async move {
            let spec = leases.get("volcano-rs-controller").await.ok()?.spec?;
            spec.holder_identity.filter(|h| !h.is_empty() && *h != first)
        }
    })
    .await;

    // A policy after the failover: the TensorFlow workers finish, TaskCompleted → CompleteJob.
    succeed.lock().await.extend(["tf-dist-mnist-worker-0".to_string(), "tf-dist-mnist-worker-1".to_string()]);
    job_where(&client, "tf-dist-mnist", "Completed", |j| phase(j) == Some(JobPhase::Completed)).await;

    // vcctl's commands: suspend (AbortJob), resume, list, delete.
    let ddp = names.iter().find(|n| n.contains("pytorch") || n.contains("ddp")).expect("the PyTorch example").clone();
    let out = vcctl_job(&client, JobCommand::Suspend { name: ddp.clone(), namespace: NS.into() }).await;
    assert!(out.contains("AbortJob"), "{out}");
    job_where(&client, &ddp, "Aborted", |j| phase(j) == Some(JobPhase::Aborted)).await;
    vcctl_job(&client, JobCommand::Resume { name: ddp.clone(), namespace: NS.into() }).await;
    job_where(&client, &ddp, "Running again", |j| phase(j) == Some(JobPhase::Running)).await;
    let table = vcctl_job(&client, JobCommand::List { namespace: NS.into(), all_namespaces: false }).await;
    let tf_row = table.lines().find(|l| l.starts_with("tf-dist-mnist")).unwrap_or_default().to_string();
    assert!(tf_row.contains("Completed"), "{table}");
    let view = vcctl_job(&client, JobCommand::View { name: ddp.clone(), namespace: NS.into() }).await;
    assert!(view.contains("phase: Running"), "{view}");
    vcctl_job(&client, JobCommand::Delete { name: "tf-dist-mnist".into(), namespace: NS.into() }).await;
    eventually(WAIT, "tf-dist-mnist deleted", || {
        let jobs = jobs.clone();
        async move { jobs.get_opt("tf-dist-mnist").await.ok().filter(|j| j.is_none()) }
    })
    .await;

    let _ = kubelet_stop.send(());
    kubelet.await.unwrap();
    let _ = second_replica.stop.send(());
    second_replica.join.await.unwrap().unwrap();
    let _ = hook_stop.send(());
    webhook.await.unwrap().unwrap();
    scheduler.stop().await;
    eprintln!("controller failover: the Lease moved from {first} to {second}");
}

/// The elastic autoscaler with the real scheduler and controller: a job annotated
/// `volcano.sh/autoscale: worker=1..6` grows from 2 workers into the idle GPUs of two 4-GPU
/// nodes (2 → 4 → 6), its svc host list following once the new pods run; a gang of 4 GPUs
/// in another queue then waits, and the job gives back 4 workers (their hosts leave the
/// list first, the pods go after the 2 s grace period), after which the gang is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_grows_a_job_into_idle_gpus_and_shrinks_it_for_a_gang() {
    let Some(assets) = support::assets() else { return };
    // RUST_LOG=volcano_controller=info shows the autoscaler's passes.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let deploy = repo().join("deploy");
    server
        .apply_files(&[
            deploy.join("namespace.yaml"),
            deploy.join("rbac.yaml"),
            deploy.join("volcano-rs-controller.yaml"),
        ])
        .await;
    let client = server.client().await;
    let scheduler_kc = server.service_account_kubeconfig("volcano-system", "volcano-rs-scheduler").await;
    let controller_kc = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    for i in 0..2 {
        create_node(&client, &format!("gpu-{i}"), "4").await;
    }
    let queues: Api<volcano_api::crd::Queue> = Api::all(client.clone());
    for q in ["a", "b"] {
        let queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
            "spec": {"weight": 1, "reclaimable": true}
        }))
        .unwrap();
        queues.create(&PostParams::default(), &queue).await.unwrap();
    }
    let scheduler = scheduler(scheduler_kc);
    let replica = controller_with(
        &controller_kc,
        &[
            "--leader-elect=false",
            "--autoscale-period-seconds=1",
            "--autoscale-cooldown-seconds=2",
            "--autoscale-probe-seconds=20",
        ],
    );
    let (kubelet_stop, kubelet_stopped) = oneshot::channel::<()>();
    let kubelet = tokio::spawn(kubelet(client.clone(), Arc::new(Mutex::new(Vec::new())), kubelet_stopped));

    // Written as the webhook leaves a job (no webhook here): minAvailable and queue set.
    let job = |name: &str, queue: &str, replicas: i32, min: i32, annotations: serde_json::Value| -> Job {
        serde_json::from_value(json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "annotations": annotations},
            "spec": {
                "minAvailable": min, "queue": queue, "schedulerName": "volcano-rs", "maxRetry": 3,
                "plugins": {"svc": []},
                "tasks": [{"name": "worker", "replicas": replicas, "minAvailable": min,
                    "template": {"spec": {"containers": [{"name": "w", "image": "x",
                        "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}}}]
            }
        }))
        .unwrap()
    };
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    let annotations = json!({"volcano.sh/autoscale": "worker=1..6", "volcano.sh/scale-in-grace-seconds": "2"});
    jobs.create(&PostParams::default(), &job("elastic", "a", 2, 1, annotations)).await.unwrap();
    let hosts =
        |n: usize| -> String { (0..n).map(|i| format!("elastic-worker-{i}.elastic")).collect::<Vec<_>>().join("\n") };
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let host_list = |want: String, what: &'static str| {
        let config_maps = config_maps.clone();
        async move {
            eventually(WAIT, what, || {
                let (config_maps, want) = (config_maps.clone(), want.clone());
                async move {
                    let cm = config_maps.get("elastic-svc").await.ok()?;
                    (cm.data?.get("worker.host")? == &want).then_some(())
                }
            })
            .await
        }
    };
    let replicas = |j: &Job| j.spec.tasks[0].replicas;
    job_where(&client, "elastic", "grown to 6 workers", |j| replicas(j) == 6).await;
    bound_pods(&client, "elastic", 6).await;
    host_list(hosts(6), "the host list of 6 workers").await;

    // A gang in queue b that does not fit: the job yields the GPUs it needs.
    jobs.create(&PostParams::default(), &job("train", "b", 4, 4, json!({}))).await.unwrap();
    job_where(&client, "elastic", "shrunk to 2 workers", |j| replicas(j) == 2).await;
    host_list(hosts(2), "the host list of 2 workers").await;
    bound_pods(&client, "train", 4).await;
    bound_pods(&client, "elastic", 2).await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let reasons = eventually(WAIT, "the autoscaler's events", || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.ok()?.items;
            let reasons: Vec<String> = list
                .iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("elastic"))
                .filter_map(|e| e.reason.clone())
                .filter(|r| r.starts_with("Autoscale"))
                .collect();
            (reasons.iter().any(|r| r == "AutoscaleOut") && reasons.iter().any(|r| r == "AutoscaleIn"))
                .then_some(reasons)
        }
    })
    .await;
    eprintln!("autoscaler events: {reasons:?}");

    let _ = kubelet_stop.send(());
    kubelet.await.unwrap();
    let _ = replica.stop.send(());
    replica.join.await.unwrap().unwrap();
    scheduler.stop().await;
}
