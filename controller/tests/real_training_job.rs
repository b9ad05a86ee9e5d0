//! et-operator's TrainingJob, ScaleOut and ScaleIn against a real API server (etcd +
//! kube-apiserver from `KUBEBUILDER_ASSETS`, skipped with a message when unset;
//! docs/testing.md), applied from `examples/et-operator/` as a user would. There is no
//! scheduler and no kubelet: the test makes pods Running and ready itself. The controller
//! runs in process with the token of deploy/volcano-rs-controller.yaml's ServiceAccount.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use volcano_api::crd::PodGroup;
use volcano_api::et::{ScaleIn, ScaleOut, TrainingJob};
use volcano_controller::run;
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};

mod common;
use common::options;

const NS: &str = "train";
const WAIT: Duration = Duration::from_secs(30);
const JOB: &str = "hvd-elastic";

fn example<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/et-operator").join(file);
    serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The live (not terminating) worker pods, by name, once there are `n`.
async fn workers(client: &Client, n: usize) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("training-job-name={JOB},training-job-role=worker"));
    eventually(WAIT, &format!("{n} workers"), || {
        let (pods, lp) = (pods.clone(), lp.clone());
        async move {
            let mut names: Vec<String> = pods
                .list(&lp)
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| p.metadata.name.unwrap())
                .collect();
            names.sort();
            (names.len() == n).then_some(names)
        }
    })
    .await
}

/// What the kubelet would do: the pod Running, its container ready.
async fn set_ready(client: &Client, name: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "trainer", "image": "horovod", "imageID": "", "ready": true,
        "restartCount": 0, "state": {"running": {}}}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

async fn config(client: &Client) -> Option<std::collections::BTreeMap<String, String>> {
    Api::<ConfigMap>::namespaced(client.clone(), NS).get(&format!("{JOB}-config")).await.ok()?.data
}

/// The hostfile once it is `want`; the discovery script is checked with it.
async fn hostfile_is(client: &Client, want: &str) {
    eventually(WAIT, &format!("the hostfile {want:?}"), || async move {
        let data = config(client).await?;
        assert!(data["discover_hosts.sh"].contains("cat /etc/edl/hostfile"), "{}", data["discover_hosts.sh"]);
        let deepspeed: String = want.lines().map(|l| format!("{} slots=1\n", l.trim_end_matches(":1"))).collect();
        (data["hostfile"] == want && data["deepspeed-hostfile"] == deepspeed).then_some(())
    })
    .await
}

fn hosts(ids: &[i32]) -> String {
    ids.iter().map(|i| format!("{JOB}-worker-{i}:1\n")).collect()
}

async fn job_where(client: &Client, what: &str, f: impl Fn(&TrainingJob) -> bool) -> TrainingJob {
    let api: Api<TrainingJob> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, what, || {
        let api = api.clone();
        let f = &f;
        async move { api.get(JOB).await.ok().filter(|j| f(j)) }
    })
    .await
}

fn phase(j: &TrainingJob) -> &str {
    j.status.as_ref().and_then(|s| s.job.phase.as_deref()).unwrap_or_default()
}

async fn request_phase<K>(client: &Client, name: &str, want: &str, phase: impl Fn(&K) -> Option<String>) -> K
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, &format!("{name} {want}"), || {
        let api = api.clone();
        let phase = &phase;
        async move { api.get(name).await.ok().filter(|r| phase(r).as_deref() == Some(want)) }
    })
    .await
}

fn out_phase(r: &ScaleOut) -> Option<String> {
    r.status.as_ref()?.job.phase.clone()
}

fn in_phase(r: &ScaleIn) -> Option<String> {
    r.status.as_ref()?.job.phase.clone()
}

async fn live(client: &Client, name: &str) -> bool {
    Api::<Pod>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .unwrap()
        .is_some_and(|p| p.metadata.deletion_timestamp.is_none())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn et_operators_examples_grow_and_shrink_a_training_job_in_the_safe_order() {
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("volcano-rs-controller.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    server.namespace(NS).await;
    let client = server.client().await;
    let http = format!("127.0.0.1:{}", free_port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(options(&kubeconfig, &http), async move {
        let _ = stopped.await;
    }));

    // The example, with a 2 s grace period for the test.
    let mut job: TrainingJob = example("training_job.yaml");
    job.metadata.annotations = Some([("volcano.sh/scale-in-grace-seconds".to_string(), "2".to_string())].into());
    let jobs: Api<TrainingJob> = Api::namespaced(client.clone(), NS);
    let job = jobs.create(&PostParams::default(), &job).await.unwrap();
    let uid = job.metadata.uid.clone().unwrap();

    // The workers first, each with its headless Service, the PodGroup and the ssh Secret.
    let names = workers(&client, 2).await;
    assert_eq!(names, [format!("{JOB}-worker-0"), format!("{JOB}-worker-1")]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let w0 = pods.get(&names[0]).await.unwrap();
    assert_eq!(w0.spec.as_ref().unwrap().scheduler_name.as_deref(), Some("volcano-rs"));
    assert_eq!(w0.metadata.owner_references.as_ref().unwrap()[0].uid, uid);
    let svc = eventually(WAIT, "the worker Services", || async {
        Api::<Service>::namespaced(client.clone(), NS).get(&names[1]).await.ok()
    })
    .await;
    assert_eq!(svc.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    let pg = eventually(WAIT, "the PodGroup", || async {
        Api::<PodGroup>::namespaced(client.clone(), NS).get(JOB).await.ok()
    })
    .await;
    assert_eq!(pg.spec.min_member, 1, "the workers' minReplicas");
    let secret = eventually(WAIT, "the ssh Secret", || async {
        Api::<Secret>::namespaced(client.clone(), NS).get(JOB).await.ok()
    })
    .await;
    assert!(secret.data.unwrap().contains_key("id_rsa"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        pods.get_opt(&format!("{JOB}-launcher")).await.unwrap().is_none(),
        "no launcher before the workers are ready"
    );
    assert!(config(&client).await.is_none(), "no host list before the workers are ready");

    // Ready workers: the host list, then the launcher; the launcher runs, so does the job.
    for n in &names {
        set_ready(&client, n).await;
    }
    hostfile_is(&client, &hosts(&[0, 1])).await;
    let launcher =
        eventually(WAIT, "the launcher", || async { pods.get_opt(&format!("{JOB}-launcher")).await.ok().flatten() })
            .await;
    let mounts: Vec<String> =
        launcher.spec.unwrap().containers[0].volume_mounts.iter().flatten().map(|m| m.mount_path.clone()).collect();
    assert!(mounts.contains(&"/etc/edl".to_string()), "{mounts:?}");
    set_ready(&client, &format!("{JOB}-launcher")).await;
    job_where(&client, "the job Running", |j| phase(j) == "Running").await;

    // ScaleOut (by count, 2): the new workers join the host list once both are ready.
    let so: ScaleOut = example("scale_out.yaml");
    let so = Api::<ScaleOut>::namespaced(client.clone(), NS).create(&PostParams::default(), &so).await.unwrap();
    let so_name = so.metadata.name.clone().unwrap();
    let names = workers(&client, 4).await;
    assert!(names.contains(&format!("{JOB}-worker-3")));
    job_where(&client, "the job Scaling", |j| phase(j) == "Scaling").await;
    set_ready(&client, &format!("{JOB}-worker-2")).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    hostfile_is(&client, &hosts(&[0, 1])).await;
    set_ready(&client, &format!("{JOB}-worker-3")).await;
    hostfile_is(&client, &hosts(&[0, 1, 2, 3])).await;
    let so = request_phase(&client, &so_name, "ScaleSucceeded", out_phase).await;
    assert_eq!(so.status.unwrap().add_pods, [format!("{JOB}-worker-2"), format!("{JOB}-worker-3")]);
    assert_eq!(so.metadata.owner_references.unwrap()[0].uid, uid, "the request is owned by its job");
    let j = job_where(&client, "the job Running again", |j| phase(j) == "Running").await;
    assert_eq!(j.status.unwrap().current_workers.len(), 4);

    // ScaleIn by count (1): worker 3 leaves the host list, its pod goes after the grace period.
    let si: ScaleIn = example("scale_in_count.yaml");
    let si = Api::<ScaleIn>::namespaced(client.clone(), NS).create(&PostParams::default(), &si).await.unwrap();
    let si_name = si.metadata.name.clone().unwrap();
    hostfile_is(&client, &hosts(&[0, 1, 2])).await;
    assert!(live(&client, &format!("{JOB}-worker-3")).await, "the pod outlives its host by the grace period");
    workers(&client, 3).await;
    let si = request_phase(&client, &si_name, "ScaleSucceeded", in_phase).await;
    assert_eq!(si.status.unwrap().to_delete_pods, [format!("{JOB}-worker-3")]);

    // ScaleIn by pod name: exactly worker 1.
    let si: ScaleIn = example("scale_in_pod.yaml");
    let si = Api::<ScaleIn>::namespaced(client.clone(), NS).create(&PostParams::default(), &si).await.unwrap();
    let si_name = si.metadata.name.clone().unwrap();
    hostfile_is(&client, &hosts(&[0, 2])).await;
    let left = workers(&client, 2).await;
    assert_eq!(left, [format!("{JOB}-worker-0"), format!("{JOB}-worker-2")]);
    request_phase(&client, &si_name, "ScaleSucceeded", in_phase).await;
    let j = job_where(&client, "the job Running with 2 workers", |j| {
        phase(j) == "Running" && j.status.as_ref().is_some_and(|s| s.target_workers.len() == 2)
    })
    .await;
    assert_eq!(j.status.unwrap().current_workers, [format!("{JOB}-worker-0"), format!("{JOB}-worker-2")]);

    // Below minReplicas: refused in the ScaleIn's status and an event; the workers stay.
    let mut si: ScaleIn = example("scale_in_pod.yaml");
    si.spec.to_delete.as_mut().unwrap().pod_names = vec![format!("{JOB}-worker-0"), format!("{JOB}-worker-2")];
    let si = Api::<ScaleIn>::namespaced(client.clone(), NS).create(&PostParams::default(), &si).await.unwrap();
    let si_name = si.metadata.name.clone().unwrap();
    let si = request_phase(&client, &si_name, "ScaleFailed", in_phase).await;
    let msg = si.status.unwrap().job.conditions.last().unwrap().message.clone().unwrap();
    assert!(msg.contains("fewer than its minReplicas 1"), "{msg}");
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, "a ScalingInFailed event on the ScaleIn", || {
        let (events, si_name) = (events.clone(), si_name.clone());
        async move {
            events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ScalingInFailed")
                    && e.regarding
                        .as_ref()
                        .is_some_and(|r| r.kind.as_deref() == Some("ScaleIn") && r.name.as_deref() == Some(&si_name))
            })
        }
    })
    .await;
    hostfile_is(&client, &hosts(&[0, 2])).await;
    assert_eq!(workers(&client, 2).await.len(), 2);

    // The launcher succeeds: the job too, and its running workers go (cleanPodPolicy Running).
    pods.patch_status(
        &format!("{JOB}-launcher"),
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    job_where(&client, "the job Succeeded", |j| phase(j) == "Succeeded").await;
    workers(&client, 0).await;

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), controller).await.expect("the controller stops").unwrap().unwrap();
}

/// Without the kai.alibabacloud.com CRDs the controller says TrainingJobs are not served
/// and keeps running Volcano Jobs; once they are installed it serves TrainingJobs without a
/// restart (discovery is asked again every minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_et_operator_crds_volcano_jobs_still_run_and_crds_installed_later_are_served() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use volcano_api::crd::Queue;
    use volcano_api::job::Job;
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let client = server.client().await;
    // deploy/ first: applying it runs API discovery, which may trip over a group just removed.
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("volcano-rs-controller.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for plural in ["trainingjobs", "scaleouts", "scaleins"] {
        crds.delete(&format!("{plural}.kai.alibabacloud.com"), &Default::default()).await.unwrap();
    }
    eventually(WAIT, "TrainingJobs no longer served", || {
        let client = client.clone();
        async move { (!volcano_controller::training_reconcile::served(&client).await.ok()?).then_some(()) }
    })
    .await;
    server.namespace(NS).await;
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
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "plain", "namespace": NS},
        "spec": {"minAvailable": 1, "queue": "default", "schedulerName": "volcano-rs", "tasks": [
            {"name": "w", "replicas": 1, "minAvailable": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
        ]}
    }))
    .unwrap();
    Api::<Job>::namespaced(client.clone(), NS).create(&PostParams::default(), &job).await.unwrap();
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), NS);
    eventually(WAIT, "the Volcano Job's PodGroup", || {
        let pgs = pgs.clone();
        async move { pgs.list(&ListParams::default()).await.ok()?.items.into_iter().next() }
    })
    .await;
    assert!(!controller.is_finished(), "the controller runs on");

    // The CRDs installed now: the controller asks discovery again every minute and starts
    // serving TrainingJobs without a restart.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/crds");
    for plural in ["trainingjobs", "scaleouts", "scaleins"] {
        let path = dir.join(format!("kai.alibabacloud.com_{plural}.yaml"));
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    eventually(WAIT, "TrainingJobs served again", || {
        let client = client.clone();
        async move { volcano_controller::training_reconcile::served(&client).await.ok()?.then_some(()) }
    })
    .await;
    let tj: TrainingJob = example("training_job.yaml");
    eventually(WAIT, "the TrainingJob created", || {
        let (api, tj) = (Api::<TrainingJob>::namespaced(client.clone(), NS), tj.clone());
        async move { api.create(&PostParams::default(), &tj).await.ok() }
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let lp = ListParams::default().labels(&format!("training-job-name={JOB},training-job-role=worker"));
    eventually(Duration::from_secs(100), "the TrainingJob's workers, within a minute of the CRDs", || {
        let (pods, lp) = (pods.clone(), lp.clone());
        async move { (pods.list(&lp).await.ok()?.items.len() == 2).then_some(()) }
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(20), controller).await.expect("the controller stops").unwrap().unwrap();
}
