//! The job controller against a real API server (etcd + kube-apiserver from
//! `KUBEBUILDER_ASSETS`, skipped with a message when unset; docs/testing.md). There is no
//! scheduler and no kubelet: the test admits PodGroups (`status.phase: Inqueue`) and moves
//! pods through their phases itself. The controller runs in process with the token of
//! deploy/volcano-rs-controller.yaml's ServiceAccount, with leader election on, serving
//! `/metrics` and `/healthz` on one listener: the test reads Volcano's job metrics there.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use volcano_api::bus::{Action, Command};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::{Job, JobPhase};
use volcano_controller::run;
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};

mod common;
use common::options;

const NS: &str = "ml";
const WAIT: Duration = Duration::from_secs(30);

/// The response to `GET path` from `addr`, headers included.
async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// The value of `series` (a metric name with its labels, as exposed) in a scrape.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Scrapes `/metrics` at `addr` until `series` has a value `f` accepts (`None`: absent).
async fn metric_where(addr: &str, series: &str, f: impl Fn(Option<f64>) -> bool) -> Option<f64> {
    eventually(WAIT, &format!("{series} as expected"), || {
        let f = &f;
        async move {
            let v = sample(&http_get(addr, "/metrics").await, series);
            f(v).then_some(v)
        }
    })
    .await
}

fn completed_count(job: &str) -> String {
    format!("volcano_job_completed_phase_count{{job_name=\"{NS}/{job}\",queue_name=\"default\"}}")
}

fn failed_count(job: &str) -> String {
    format!("volcano_job_failed_phase_count{{job_name=\"{NS}/{job}\",queue_name=\"default\"}}")
}

const POD_LATENCY_COUNT: &str = "volcano_controller_job_to_pod_creation_latency_milliseconds_count";

fn task(name: &str, replicas: i64) -> serde_json::Value {
    json!({"name": name, "replicas": replicas, "template": {"spec": {
        "containers": [{"name": "c", "image": "pytorch"}], "restartPolicy": "OnFailure"}}})
}

async fn create_job(client: &Client, v: serde_json::Value) -> Job {
    let job: Job = serde_json::from_value(v).unwrap();
    Api::<Job>::namespaced(client.clone(), NS).create(&PostParams::default(), &job).await.unwrap()
}

async fn job_where(client: &Client, name: &str, what: &str, f: impl Fn(&Job) -> bool) -> Job {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, what, || {
        let jobs = jobs.clone();
        let f = &f;
        async move { jobs.get(name).await.ok().filter(|j| f(j)) }
    })
    .await
}

fn phase(j: &Job) -> Option<JobPhase> {
    j.status.as_ref().and_then(|s| s.state.phase.clone())
}

async fn pod_group_of(client: &Client, job: &Job) -> PodGroup {
    let uid = job.metadata.uid.clone().unwrap();
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, "the job's PodGroup", || {
        let (pgs, uid) = (pgs.clone(), uid.clone());
        async move {
            pgs.list(&ListParams::default()).await.ok()?.items.into_iter().find(|g| {
                g.metadata.owner_references.iter().flatten().any(|o| o.uid == uid && o.controller == Some(true))
            })
        }
    })
    .await
}

/// What the scheduler does at enqueue: the PodGroup leaves Pending.
async fn admit(client: &Client, pg: &PodGroup) {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    let name = pg.metadata.name.clone().unwrap();
    pgs.patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": {"phase": "Inqueue"}}))).await.unwrap();
}

async fn pods_of(client: &Client, job: &str, n: usize) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("volcano.sh/job-name={job}"));
    eventually(WAIT, &format!("{n} pods of job {job}"), || {
        let (pods, lp) = (pods.clone(), lp.clone());
        async move {
            let items = pods.list(&lp).await.ok()?.items;
            let live: Vec<Pod> = items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
            (live.len() == n).then_some(live)
        }
    })
    .await
}

/// What the kubelet would do: the pod's phase.
async fn set_phase(client: &Client, pod: &Pod, phase: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let name = pod.metadata.name.clone().unwrap();
    let mut status = json!({"phase": phase});
    if phase == "Failed" {
        status["containerStatuses"] = json!([{"name": "c", "image": "pytorch", "imageID": "", "ready": false,
            "restartCount": 0, "state": {"terminated": {"exitCode": 1}}}]);
    }
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await.unwrap();
}

/// An event of the controller on job `job` with `reason` whose note satisfies `f`.
async fn event_where(client: &Client, job: &str, reason: &str, f: impl Fn(&str) -> bool) -> Event {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, &format!("a {reason} event on job {job}"), || {
        let events = events.clone();
        let f = &f;
        async move {
            events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding
                        .as_ref()
                        .is_some_and(|r| r.kind.as_deref() == Some("Job") && r.name.as_deref() == Some(job))
                    && f(e.note.as_deref().unwrap_or_default())
            })
        }
    })
    .await
}

fn env_of(pod: &Pod) -> BTreeMap<String, String> {
    pod.spec.as_ref().unwrap().containers[0]
        .env
        .iter()
        .flatten()
        .filter_map(|e| Some((e.name.clone(), e.value.clone()?)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_runs_jobs() {
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    // deploy/volcano-rs-controller.yaml's ServiceAccount and RBAC: the controller runs with that token only.
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

    // A PyTorch job: 1 master + 2 workers.
    let ddp = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "ddp", "namespace": NS},
            "spec": {
                "minAvailable": 3, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "ttlSecondsAfterFinished": 1,
                "plugins": {"svc": [], "pytorch": ["--master=master", "--worker=worker"]},
                "tasks": [task("master", 1), task("worker", 2)]
            }
        }),
    )
    .await;
    let pg = pod_group_of(&client, &ddp).await;
    assert_eq!(pg.spec.min_member, 3);
    assert_eq!(pg.metadata.name.as_deref(), Some(format!("ddp-{}", ddp.metadata.uid.as_deref().unwrap()).as_str()));
    let owner = &pg.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Job", "ddp"));
    let pending = job_where(&client, "ddp", "ddp Pending", |j| phase(j) == Some(JobPhase::Pending)).await;
    assert_eq!(pending.status.as_ref().unwrap().min_available, 3);
    // No pods before the PodGroup is admitted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
    // Both endpoints on the one listener; no pod created, none observed.
    assert!(http_get(&http, "/healthz").await.ends_with("ok"));
    let scrape = http_get(&http, "/metrics").await;
    assert_eq!(sample(&scrape, POD_LATENCY_COUNT), Some(0.0), "{scrape}");
    assert!(!cfg!(target_os = "linux") || scrape.contains("process_cpu_seconds_total"), "{scrape}");

    // A changed gang reaches the PodGroup.
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.patch("ddp", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"minAvailable": 2}}))).await.unwrap();
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    let pg_name = pg.metadata.name.clone().unwrap();
    eventually(WAIT, "the PodGroup's minMember updated", || {
        let (pgs, pg_name) = (pgs.clone(), pg_name.clone());
        async move { pgs.get(&pg_name).await.ok().filter(|g| g.spec.min_member == 2) }
    })
    .await;
    // So do changed requests alone: minAvailable 2 < 1 + 2, the first two pods (the master
    // and one worker) count.
    let mut worker = task("worker", 2);
    worker["template"]["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "500m"}});
    jobs.patch("ddp", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"tasks": [task("master", 1), worker]}})))
        .await
        .unwrap();
    let updated = eventually(WAIT, "the PodGroup's minResources updated", || {
        let (pgs, pg_name) = (pgs.clone(), pg_name.clone());
        async move {
            pgs.get(&pg_name).await.ok().filter(|g| {
                g.spec.min_resources.as_ref().and_then(|r| r.get("cpu")).map(|q| q.0.as_str()) == Some("500m")
            })
        }
    })
    .await;
    // Read back equal: not patched again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(pgs.get(&pg_name).await.unwrap().metadata.resource_version, updated.metadata.resource_version);

    // What the scheduler says of a gang it cannot place: a PodGroupPending Warning on the job.
    let unschedulable = json!({"status": {"conditions": [{"type": "Unschedulable", "status": "True",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "NotEnoughResources",
        "message": "2/2 tasks in gang unschedulable"}]}});
    pgs.patch(&pg_name, &PatchParams::default(), &Patch::Merge(&unschedulable)).await.unwrap();
    let pending_event = event_where(&client, "ddp", "PodGroupPending", |n| {
        n == format!("PodGroup {NS}:ddp unschedulable, reason: 2/2 tasks in gang unschedulable")
    })
    .await;
    assert_eq!(pending_event.type_.as_deref(), Some("Warning"));
    assert_eq!(pending_event.reporting_controller.as_deref(), Some("volcano-rs-controller"));

    admit(&client, &pg).await;
    let created = pods_of(&client, "ddp", 3).await;
    // Each pod created is observed once: from the job's creation to the pod's.
    metric_where(&http, POD_LATENCY_COUNT, |v| v == Some(3.0)).await;
    let by_name: BTreeMap<String, Pod> =
        created.iter().map(|p| (p.metadata.name.clone().unwrap(), p.clone())).collect();
    let worker = env_of(&by_name["ddp-worker-1"]);
    assert_eq!(worker.get("MASTER_ADDR").map(String::as_str), Some("ddp-master-0.ddp"));
    assert_eq!(worker.get("RANK").map(String::as_str), Some("2"));
    assert_eq!(worker.get("WORLD_SIZE").map(String::as_str), Some("3"));
    assert_eq!(by_name["ddp-master-0"].spec.as_ref().unwrap().scheduler_name.as_deref(), Some("volcano-rs"));
    Api::<Service>::namespaced(client.clone(), NS).get("ddp").await.unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), NS).get("ddp-svc").await.unwrap();
    let counted =
        job_where(&client, "ddp", "ddp counts 3 pending pods", |j| j.status.as_ref().is_some_and(|s| s.pending == 3))
            .await;
    assert!(counted.status.unwrap().controlled_resources.contains_key("plugin-pytorch"));

    for p in &created {
        set_phase(&client, p, "Running").await;
    }
    job_where(&client, "ddp", "ddp Running", |j| phase(j) == Some(JobPhase::Running)).await;
    for p in &created {
        set_phase(&client, p, "Succeeded").await;
    }
    let done = job_where(&client, "ddp", "ddp Completed", |j| phase(j) == Some(JobPhase::Completed)).await;
    assert_eq!(done.status.as_ref().unwrap().succeeded, 3);
    // Volcano's counter: the job entered Completed once.
    metric_where(&http, &completed_count("ddp"), |v| v == Some(1.0)).await;
    // No pod was created twice, none more than the replicas.
    assert_eq!(pods.list(&ListParams::default().labels("volcano.sh/job-name=ddp")).await.unwrap().items.len(), 3);
    // ttlSecondsAfterFinished: deleted (in the foreground: with no garbage collector in this
    // test, the job stays with its deletionTimestamp).
    job_where(&client, "ddp", "ddp deleted after its TTL", |j| j.metadata.deletion_timestamp.is_some()).await;
    // The reconciles since (pods finished, the TTL, the deletion) left it Completed: still
    // counted once, and never as failed.
    let scrape = http_get(&http, "/metrics").await;
    assert_eq!(sample(&scrape, &completed_count("ddp")), Some(1.0), "{scrape}");
    assert_eq!(sample(&scrape, &failed_count("ddp")), None, "{scrape}");

    // A job restarted by its policy when a pod fails.
    let restart = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "restart", "namespace": NS},
            "spec": {
                "minAvailable": 1, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "policies": [{"event": "PodFailed", "action": "RestartJob"}],
                "tasks": [task("worker", 1)]
            }
        }),
    )
    .await;
    let pg = pod_group_of(&client, &restart).await;
    admit(&client, &pg).await;
    let first = pods_of(&client, "restart", 1).await;
    set_phase(&client, &first[0], "Running").await;
    job_where(&client, "restart", "restart Running", |j| phase(j) == Some(JobPhase::Running)).await;
    set_phase(&client, &first[0], "Failed").await;
    let restarted = job_where(&client, "restart", "restart retried once", |j| {
        j.status.as_ref().is_some_and(|s| s.retry_count == 1 && s.version == 1)
    })
    .await;
    assert!(matches!(phase(&restarted), Some(JobPhase::Restarting | JobPhase::Pending)), "{:?}", phase(&restarted));
    // The PodGroup was deleted with the kill and comes back; admitted, the pod is recreated
    // for the new version.
    let pg2 = eventually(WAIT, "a new PodGroup", || {
        let c = client.clone();
        let old = pg.metadata.uid.clone();
        let restart = restart.clone();
        async move {
            let g = Api::<PodGroup>::namespaced(c, NS)
                .get_opt(&format!("restart-{}", restart.metadata.uid.unwrap()))
                .await
                .ok()??;
            (g.metadata.uid != old).then_some(g)
        }
    })
    .await;
    admit(&client, &pg2).await;
    let second = pods_of(&client, "restart", 1).await;
    assert_eq!(second[0].metadata.annotations.as_ref().unwrap()["volcano.sh/job-version"], "1");
    job_where(&client, "restart", "restart Pending again", |j| phase(j) == Some(JobPhase::Pending)).await;

    // A Command: deleted, and its action run.
    let target = volcano_controller::plan::owner_reference(&restart);
    let mut cmd = Command::new("abort-restart", Action::AbortJob, target);
    cmd.metadata.namespace = Some(NS.into());
    let commands: Api<Command> = Api::namespaced(client.clone(), NS);
    commands.create(&PostParams::default(), &cmd).await.unwrap();
    job_where(&client, "restart", "restart Aborted", |j| phase(j) == Some(JobPhase::Aborted)).await;
    assert!(commands.get_opt("abort-restart").await.unwrap().is_none());
    // The Command's events, as Volcano records them.
    let issued = event_where(&client, "restart", "CommandIssued", |n| {
        n == "Start to execute command AbortJob, and clean it up to make sure executed not more than once."
    })
    .await;
    assert_eq!(issued.type_.as_deref(), Some("Normal"));
    event_where(&client, "restart", "ExecuteAction", |n| n == "Start to execute action AbortJob ").await;
    event_where(&client, "restart", "ExecuteAction", |n| n == "Start to execute action RestartJob ").await;

    // Volumes: a PVC made from a volumeClaim, owned by the job; a volumeClaimName that does
    // not exist yet holds the job back (PVCError) until it is created.
    let vol = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "vol", "namespace": NS},
            "spec": {
                "minAvailable": 1, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "volumes": [
                    {"mountPath": "/data", "volumeClaim": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}},
                    {"mountPath": "/shared", "volumeClaimName": "shared"}
                ],
                "tasks": [task("worker", 1)]
            }
        }),
    )
    .await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let made = eventually(WAIT, "the job's PVC", || {
        let pvcs = pvcs.clone();
        async move { pvcs.get_opt("vol-volume-0").await.ok().flatten() }
    })
    .await;
    let owner = &made.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("Job", "vol", Some(true)));
    assert_eq!(owner.uid.as_str(), vol.metadata.uid.as_deref().unwrap());
    let spec = made.spec.as_ref().unwrap();
    assert_eq!(spec.access_modes.as_deref(), Some(&["ReadWriteOnce".to_string()][..]));
    assert_eq!(spec.resources.as_ref().unwrap().requests.as_ref().unwrap()["storage"].0, "1Gi");
    let missing = event_where(&client, "vol", "PVCError", |n| {
        n == "Failed to create PVC, err: pvc shared is not found, the job will be in the Pending state until the PVC \
              is created"
    })
    .await;
    assert_eq!(missing.type_.as_deref(), Some("Warning"));
    let shared: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "shared", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &shared).await.unwrap();
    let pg = pod_group_of(&client, &vol).await;
    admit(&client, &pg).await;
    let pod = pods_of(&client, "vol", 1).await.remove(0);
    let spec = pod.spec.as_ref().unwrap();
    let claims: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str()))
        .collect();
    assert_eq!(claims, ["vol-volume-0", "shared"]);
    let mounts: Vec<&str> = spec.containers[0].volume_mounts.iter().flatten().map(|m| m.mount_path.as_str()).collect();
    assert_eq!(mounts, ["/data", "/shared"]);
    let recorded = job_where(&client, "vol", "vol lists its PVCs", |j| {
        j.status.as_ref().is_some_and(|s| s.controlled_resources.contains_key("volume-pvc-shared"))
    })
    .await;
    let controlled = recorded.status.unwrap().controlled_resources;
    assert_eq!(controlled.get("volume-pvc-vol-volume-0").map(String::as_str), Some("vol-volume-0"));
    assert_eq!(pvcs.list(&ListParams::default()).await.unwrap().items.len(), 2, "the PVC was made once");

    // ssh: a generated key pair kept in the job's Secret, mounted into the pods.
    let sshjob = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "sshjob", "namespace": NS},
            "spec": {
                "minAvailable": 1, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "plugins": {"ssh": [], "svc": []},
                "tasks": [task("worker", 1)]
            }
        }),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = eventually(WAIT, "the ssh Secret", || {
        let secrets = secrets.clone();
        async move { secrets.get_opt("sshjob-ssh").await.ok().flatten() }
    })
    .await;
    let data = secret.data.clone().unwrap();
    assert!(String::from_utf8_lossy(&data["id_rsa"].0).contains("BEGIN RSA PRIVATE KEY"));
    assert!(String::from_utf8_lossy(&data["authorized_keys"].0).starts_with("ssh-rsa "));
    let pg = pod_group_of(&client, &sshjob).await;
    admit(&client, &pg).await;
    let pod = pods_of(&client, "sshjob", 1).await.remove(0);
    let volumes = pod.spec.as_ref().unwrap().volumes.clone().unwrap_or_default();
    assert!(volumes.iter().any(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some("sshjob-ssh")));
    assert_eq!(secrets.get("sshjob-ssh").await.unwrap().data, secret.data, "the key is generated once");

    // A delayed policy: PodPending for 2 s aborts the job, unless the pods start first.
    let delayed = |name: &str| {
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "minAvailable": 2, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "policies": [{"event": "PodPending", "action": "AbortJob", "timeout": "2s"}],
                "tasks": [task("worker", 2)]
            }
        })
    };
    let stuck = create_job(&client, delayed("stuck")).await;
    let starts = create_job(&client, delayed("starts")).await;
    for j in [&stuck, &starts] {
        let pg = pod_group_of(&client, j).await;
        admit(&client, &pg).await;
    }
    let started = pods_of(&client, "starts", 2).await;
    for p in &started {
        set_phase(&client, p, "Running").await;
    }
    pods_of(&client, "stuck", 2).await;
    let created = std::time::Instant::now();
    assert_ne!(phase(&jobs.get("stuck").await.unwrap()), Some(JobPhase::Aborted), "not before the timeout");
    job_where(&client, "stuck", "Aborted by the delayed PodPending policy", |j| phase(j) == Some(JobPhase::Aborted))
        .await;
    assert!(created.elapsed() >= Duration::from_millis(1500), "aborted after {:?}", created.elapsed());
    job_where(&client, "starts", "Running", |j| phase(j) == Some(JobPhase::Running)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(phase(&jobs.get("starts").await.unwrap()), Some(JobPhase::Running), "the started pods cancelled it");

    // A job whose only pod fails, with no policy: Failed, counted once; its series goes
    // with the job.
    let doomed = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "doomed", "namespace": NS},
            "spec": {
                "minAvailable": 1, "queue": "default", "schedulerName": "volcano-rs", "maxRetry": 3,
                "tasks": [task("worker", 1)]
            }
        }),
    )
    .await;
    let pg = pod_group_of(&client, &doomed).await;
    admit(&client, &pg).await;
    let pod = pods_of(&client, "doomed", 1).await.remove(0);
    set_phase(&client, &pod, "Running").await;
    job_where(&client, "doomed", "doomed Running", |j| phase(j) == Some(JobPhase::Running)).await;
    set_phase(&client, &pod, "Failed").await;
    job_where(&client, "doomed", "doomed Failed", |j| phase(j) == Some(JobPhase::Failed)).await;
    metric_where(&http, &failed_count("doomed"), |v| v == Some(1.0)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let scrape = http_get(&http, "/metrics").await;
    assert_eq!(sample(&scrape, &failed_count("doomed")), Some(1.0), "{scrape}");
    assert_eq!(sample(&scrape, &completed_count("doomed")), None, "{scrape}");
    // Restarted, aborted: neither counts.
    assert_eq!(sample(&scrape, &failed_count("restart")), None, "{scrape}");
    assert_eq!(sample(&scrape, &completed_count("stuck")), None, "{scrape}");
    jobs.delete("doomed", &kube::api::DeleteParams::background()).await.unwrap();
    metric_where(&http, &failed_count("doomed"), |v| v.is_none()).await;

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), controller).await.expect("the controller stops").unwrap().unwrap();
}

/// What the kubelet would do: the pod Running with its container ready.
async fn set_ready(client: &Client, pod: &Pod) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let name = pod.metadata.name.clone().unwrap();
    let status = json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "image": "horovod",
        "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// The hostfile of job `job` once `f` accepts it.
async fn hostfile_where(client: &Client, job: &str, what: &str, f: impl Fn(&str) -> bool) -> String {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let name = format!("{job}-mpi-hostfile");
    eventually(WAIT, what, || {
        let (cms, name) = (cms.clone(), name.clone());
        let f = &f;
        async move {
            let text = cms.get(&name).await.ok()?.data?.get("hostfile")?.clone();
            f(&text).then_some(text)
        }
    })
    .await
}

fn mpi_tasks(workers: i64) -> serde_json::Value {
    let worker = json!({"name": "worker", "replicas": workers, "minAvailable": 1, "template": {"spec": {
        "containers": [{"name": "c", "image": "horovod"}], "restartPolicy": "OnFailure"}}});
    json!([task("master", 1), worker])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resized_mpi_job_gets_its_hostfile_in_the_safe_order() {
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
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

    // No webhook here: the job is written as the webhook leaves it (its minAvailable set).
    let job = create_job(
        &client,
        json!({
            "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "hvd", "namespace": NS, "annotations": {"volcano.sh/scale-in-grace-seconds": "3"}},
            "spec": {
                "minAvailable": 2, "queue": "default", "schedulerName": "volcano-rs",
                "plugins": {"mpi": []},
                "tasks": mpi_tasks(2)
            }
        }),
    )
    .await;
    let pg = pod_group_of(&client, &job).await;
    admit(&client, &pg).await;
    for p in &pods_of(&client, "hvd", 3).await {
        set_ready(&client, p).await;
    }
    job_where(&client, "hvd", "hvd Running", |j| phase(j) == Some(JobPhase::Running)).await;
    let two = "hvd-worker-0.hvd slots=1\nhvd-worker-1.hvd slots=1\n";
    hostfile_where(&client, "hvd", "the hostfile of 2 workers", |h| h == two).await;

    // 2 → 3: the pod first; the hostfile names it once it is ready.
    let jobs: Api<Job> = Api::namespaced(client.clone(), NS);
    jobs.patch("hvd", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"tasks": mpi_tasks(3)}}))).await.unwrap();
    let pods = pods_of(&client, "hvd", 4).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    hostfile_where(&client, "hvd", "the hostfile still of 2 workers", |h| h == two).await;
    let new = pods.iter().find(|p| p.metadata.name.as_deref() == Some("hvd-worker-2")).expect("hvd-worker-2");
    set_ready(&client, new).await;
    let three = format!("{two}hvd-worker-2.hvd slots=1\n");
    hostfile_where(&client, "hvd", "the hostfile of 3 workers", |h| h == three).await;
    event_where(&client, "hvd", "ScaleOut", |n| n.contains("scale-out done: members 2")).await;

    // 3 → 1: the hostfile first, the pods after the 3 s grace period.
    jobs.patch("hvd", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"tasks": mpi_tasks(1)}}))).await.unwrap();
    hostfile_where(&client, "hvd", "the hostfile of 1 worker", |h| h == "hvd-worker-0.hvd slots=1\n").await;
    let live = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels("volcano.sh/job-name=hvd"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .count();
    assert_eq!(live, 4, "the pods outlive their hosts by the grace period");
    pods_of(&client, "hvd", 2).await;
    event_where(&client, "hvd", "ScaleIn", |n| n.contains("grace period over")).await;

    // A hostfile deleted by hand comes back at the job's next sync.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    cms.delete("hvd-mpi-hostfile", &kube::api::DeleteParams::default()).await.unwrap();
    jobs.patch("hvd", &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": {"touched": "yes"}}})))
        .await
        .unwrap();
    hostfile_where(&client, "hvd", "the hostfile made again", |h| h == "hvd-worker-0.hvd slots=1\n").await;

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), controller).await.expect("the controller stops").unwrap().unwrap();
}
