//! The webhook against a real API server (etcd + kube-apiserver from `KUBEBUILDER_ASSETS`,
//! skipped with a message when unset; docs/testing.md): `volcano-rs webhook` runs in
//! process on a loopback port with a generated certificate kept in a Secret, registers its
//! webhook configurations with the CA bundle, and the API server calls it over TLS for
//! every Job, Queue and PodGroup written.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use kube::Client;
use serde_json::json;
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::Job;
use volcano_api::topology::HyperNode;
use volcano_testkit::apiserver::{self as support, eventually, free_port, ApiServer};
use volcano_webhook::run::{run, WebhookOptions};

fn options(kubeconfig: &std::path::Path, port: u16) -> WebhookOptions {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: WebhookOptions,
    }
    let port_s = port.to_string();
    let url = format!("https://127.0.0.1:{port}");
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    let args = [
        "webhook",
        "--kubeconfig",
        &kubeconfig,
        "--listen-address",
        "127.0.0.1",
        "--port",
        &port_s,
        "--webhook-url",
        &url,
        "--webhook-namespace",
        "volcano-system",
    ];
    Cli::try_parse_from(args).unwrap().opts
}

fn job(name: &str, replicas: i64, min_available: Option<i64>, queue: Option<&str>) -> Job {
    let mut v = json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "plugins": {"pytorch": ["--master=master", "--worker=worker"]},
            "tasks": [
                {"name": "master", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "pytorch"}], "restartPolicy": "OnFailure"}}},
                {"name": "worker", "replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "pytorch"}], "restartPolicy": "OnFailure"}}}
            ]
        }
    });
    if let Some(m) = min_available {
        v["spec"]["minAvailable"] = m.into();
    }
    if let Some(q) = queue {
        v["spec"]["queue"] = q.into();
    }
    serde_json::from_value(v).unwrap()
}

fn message(e: kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message,
        e => e.to_string(),
    }
}

async fn create_queue(client: &Client, name: &str) {
    let q: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": {}
    }))
    .unwrap();
    Api::<Queue>::all(client.clone()).create(&PostParams::default(), &q).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_calls_the_webhook() {
    let Some(assets) = support::assets() else { return };
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    // deploy/webhook.yaml's ServiceAccount and RBAC: the webhook runs with that token only.
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("webhook.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-webhook").await;
    server.namespace("ml").await;
    let client = server.client().await;
    // Queues that exist before the webhook: the default queue, and one the test closes.
    create_queue(&client, "default").await;

    let port = free_port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let webhook = tokio::spawn(run(options(&kubeconfig, port), async move {
        let _ = stopped.await;
    }));

    // Registered, with the CA bundle of the certificate kept in the Secret. deploy/webhook.yaml
    // declares the configurations empty: registered means that they have webhooks.
    let configs: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let jobs_validate = eventually(Duration::from_secs(30), "the webhook configurations", || {
        let configs = configs.clone();
        async move {
            let c = configs.get_opt("volcano-admission-service-jobs-validate").await.ok().flatten()?;
            c.webhooks.as_ref().is_some_and(|w| !w.is_empty()).then_some(c)
        }
    })
    .await;
    let secret =
        Api::<Secret>::namespaced(client.clone(), "volcano-system").get("volcano-rs-webhook-certs").await.unwrap();
    let ca = &secret.data.as_ref().unwrap()["ca.crt"];
    let hook = &jobs_validate.webhooks.as_ref().unwrap()[0];
    assert_eq!(hook.client_config.ca_bundle.as_ref(), Some(ca));
    assert_eq!(hook.client_config.url.as_deref(), Some(format!("https://127.0.0.1:{port}/jobs/validate").as_str()));

    // An invalid job is refused by the webhook (the API server's webhook configuration
    // cache takes a moment to see the new configurations).
    let jobs: Api<Job> = Api::namespaced(client.clone(), "ml");
    let refused = eventually(Duration::from_secs(30), "the job webhook refusing a job", || {
        let jobs = jobs.clone();
        async move {
            match jobs.create(&PostParams::default(), &job("too-many", 2, Some(5), None)).await {
                Err(e) => Some(message(e)),
                Ok(_) => {
                    let _ = jobs.delete("too-many", &DeleteParams::default()).await;
                    None
                }
            }
        }
    })
    .await;
    assert!(refused.contains("job ml/too-many: spec.minAvailable"), "{refused}");

    // A job with defaults left out is stored with Volcano's defaults.
    let created = jobs.create(&PostParams::default(), &job("ddp", 2, None, None)).await.unwrap();
    let spec = serde_json::to_value(&created.spec).unwrap();
    assert_eq!(spec["queue"], "default");
    assert_eq!(spec["schedulerName"], "volcano-rs");
    assert_eq!(spec["maxRetry"], 3);
    assert_eq!(spec["minAvailable"], 3);
    assert_eq!(spec["tasks"][1]["minAvailable"], 2);
    assert!(spec["plugins"]["svc"].is_array(), "pytorch adds svc: {spec}");

    // A job in a queue that does not exist is refused.
    let e = message(jobs.create(&PostParams::default(), &job("lost", 1, None, Some("nowhere"))).await.unwrap_err());
    assert!(e.contains("spec.queue"), "{e}");

    // An update may scale a task but not rename one.
    let mut scaled = jobs.get("ddp").await.unwrap();
    scaled.spec.tasks[1].replicas = 4;
    jobs.replace("ddp", &PostParams::default(), &scaled).await.unwrap();
    let mut renamed = jobs.get("ddp").await.unwrap();
    renamed.spec.tasks[1].name = Some("workers".into());
    let e = message(jobs.replace("ddp", &PostParams::default(), &renamed).await.unwrap_err());
    assert!(e.contains("job ml/ddp"), "{e}");

    // Queues: defaults on create, the default queue is never deleted.
    let queues: Api<Queue> = Api::all(client.clone());
    create_queue(&client, "team-a").await;
    let team_a = queues.get("team-a").await.unwrap();
    assert_eq!((team_a.spec.weight, team_a.spec.reclaimable), (Some(1), Some(true)));
    let e = message(queues.delete("default", &DeleteParams::default()).await.unwrap_err());
    assert!(e.contains("the default queue can not be deleted"), "{e}");
    let e = message(queues.delete("team-a", &DeleteParams::default()).await.unwrap_err());
    assert!(e.contains("only queue with state `Closed` can be deleted"), "{e}");

    // PodGroups: the namespace's queue annotation fills in the queue; a missing queue is refused.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = namespaces.get("ml").await.unwrap();
    ns.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("scheduling.volcano.sh/queue-name".into(), "team-a".into());
    namespaces.replace("ml", &PostParams::default(), &ns).await.unwrap();
    let pod_groups: Api<PodGroup> = Api::namespaced(client.clone(), "ml");
    let pg = |name: &str, queue: Option<&str>| -> PodGroup {
        let mut v = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"}, "spec": {"minMember": 1}});
        if let Some(q) = queue {
            v["spec"]["queue"] = q.into();
        }
        serde_json::from_value(v).unwrap()
    };
    let created = pod_groups.create(&PostParams::default(), &pg("from-ns", None)).await.unwrap();
    assert_eq!(created.spec.queue.as_deref(), Some("team-a"));
    let e = message(pod_groups.create(&PostParams::default(), &pg("lost", Some("nowhere"))).await.unwrap_err());
    assert!(e.contains("queue nowhere does not exist"), "{e}");

    // HyperNodes: the CRD's rules (CEL on the selector) and the webhook's (the pattern compiles).
    let hyper_nodes: Api<HyperNode> = Api::all(client.clone());
    let hn = |name: &str, selector: serde_json::Value| -> HyperNode {
        serde_json::from_value(json!({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name}, "spec": {"tier": 1, "members": [{"type": "Node", "selector": selector}]}}))
        .unwrap()
    };
    let e = message(
        hyper_nodes
            .create(
                &PostParams::default(),
                &hn("two", json!({"exactMatch": {"name": "n0"}, "regexMatch": {"pattern": "n"}})),
            )
            .await
            .unwrap_err(),
    );
    assert!(e.contains("Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"), "{e}");
    let e = message(
        hyper_nodes
            .create(&PostParams::default(), &hn("bad-regex", json!({"regexMatch": {"pattern": "gpu-[0-9"}})))
            .await
            .unwrap_err(),
    );
    assert!(
        e.contains(
            "HyperNode bad-regex: spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid"
        ),
        "{e}"
    );
    let created = hyper_nodes
        .create(&PostParams::default(), &hn("leaf-0", json!({"regexMatch": {"pattern": "^gpu-"}})))
        .await
        .unwrap();
    let mut updated = created.clone();
    updated.spec.members[0].selector.regex_match.as_mut().unwrap().pattern = "(".into();
    let e = message(hyper_nodes.replace("leaf-0", &PostParams::default(), &updated).await.unwrap_err());
    assert!(e.contains("HyperNode leaf-0: spec.members[0].selector.regexMatch.pattern"), "{e}");

    // A second webhook process serves the certificate the first one stored.
    let port2 = free_port();
    let (stop2, stopped2) = tokio::sync::oneshot::channel::<()>();
    let mut opts2 = options(&kubeconfig, port2);
    opts2.register_webhooks = false;
    let second = tokio::spawn(run(opts2, async move {
        let _ = stopped2.await;
    }));
    let secret2 =
        Api::<Secret>::namespaced(client.clone(), "volcano-system").get("volcano-rs-webhook-certs").await.unwrap();
    assert_eq!(secret2.data, secret.data);

    let _ = stop.send(());
    let _ = stop2.send(());
    webhook.await.unwrap().unwrap();
    second.await.unwrap().unwrap();

    // The webhook is down (its configurations stay): what a user sees (docs/webhook.md,
    // When the webhook is down). Jobs fail closed, with the API server's message naming the
    // webhook and why it could not be called; PodGroups fail open, so the scheduler's
    // PodGroups for plain pods are still made.
    let e = message(jobs.create(&PostParams::default(), &job("while-down", 1, None, None)).await.unwrap_err());
    assert!(e.contains("failed calling webhook") && e.contains("connection refused"), "{e}");
    assert!(jobs.get_opt("while-down").await.unwrap().is_none(), "nothing stored");
    let e = message(queues.create(&PostParams::default(), &serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "while-down"}, "spec": {}
    })).unwrap()).await.unwrap_err());
    assert!(e.contains("failed calling webhook"), "{e}");
    let created = pod_groups.create(&PostParams::default(), &pg("while-down", Some("default"))).await.unwrap();
    assert_eq!(created.spec.queue.as_deref(), Some("default"), "admitted without the webhook's defaults");
}
