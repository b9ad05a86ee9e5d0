//! The queue controller and `volcano-rs queue` against a real API server (etcd +
//! kube-apiserver from `KUBEBUILDER_ASSETS`, skipped with a message when unset;
//! docs/testing.md). The controller runs in process with the token of
//! deploy/volcano-rs-controller.yaml's ServiceAccount; the queues are created, opened and
//! closed with the CLI's code (`volcano_controller::cli::queue`), as `volcano-rs queue`
//! does it. Volcano's queue metrics are read from the controller's `ControllerMetrics`.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use volcano_api::bus::Command;
use volcano_api::crd::{PodGroup, Queue, QueueState};
use volcano_controller::cli::{self, QueueCommand};
use volcano_controller::queue::CLOSED_BY_PARENT_ANNOTATION;
use volcano_controller::{run_with_metrics, ControllerMetrics, ControllerOptions};
use volcano_testkit::apiserver::{self as support, eventually, ApiServer};

const WAIT: Duration = Duration::from_secs(30);

fn options(kubeconfig: &std::path::Path) -> ControllerOptions {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: ControllerOptions,
    }
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    // No metrics listener: the test reads the metrics themselves.
    Cli::try_parse_from(["controller", "--kubeconfig", &kubeconfig, "--listen-address="]).unwrap().opts
}

/// The value of `volcano_queue_pod_group_<phase>_count` for `queue` (`None`: no series).
fn gauge(m: &ControllerMetrics, phase: &str, queue: &str) -> Option<f64> {
    let series = format!("volcano_queue_pod_group_{phase}_count{{queue_name=\"{queue}\"}} ");
    m.render().lines().find_map(|l| l.strip_prefix(&series)?.parse().ok())
}

/// Waits until the gauges of `queue` (inqueue, pending, running, unknown, completed) are
/// `want` (`None`: no series).
async fn gauges_where(m: &ControllerMetrics, queue: &str, want: Option<[f64; 5]>) {
    eventually(WAIT, &format!("the PodGroup gauges of queue {queue}: {want:?}"), || async move {
        let got: Vec<Option<f64>> = volcano_metrics::POD_GROUP_PHASES.iter().map(|p| gauge(m, p, queue)).collect();
        let want: Vec<Option<f64>> = match want {
            Some(w) => w.into_iter().map(Some).collect(),
            None => vec![None; 5],
        };
        (got == want).then_some(())
    })
    .await
}

async fn create_queue(client: &Client, name: &str, parent: Option<&str>) {
    let mut spec = json!({"weight": 1});
    if let Some(p) = parent {
        spec["parent"] = json!(p);
    }
    let q: Queue = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    Api::<Queue>::all(client.clone()).create(&PostParams::default(), &q).await.unwrap();
}

async fn queue_where(client: &Client, name: &str, what: &str, f: impl Fn(&Queue) -> bool) -> Queue {
    let api: Api<Queue> = Api::all(client.clone());
    eventually(WAIT, &format!("queue {name}: {what}"), || {
        let api = api.clone();
        let name = name.to_string();
        let f = &f;
        async move { api.get(&name).await.ok().filter(|q| f(q)) }
    })
    .await
}

fn state(q: &Queue) -> Option<QueueState> {
    q.status.as_ref().and_then(|s| s.state)
}

fn marked(q: &Queue) -> bool {
    q.annotations().get(CLOSED_BY_PARENT_ANNOTATION).map(String::as_str) == Some("true")
}

async fn queue_cli(client: &Client, cmd: QueueCommand) -> String {
    cli::queue(client.clone(), &cmd).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queues_open_and_close_through_commands() {
    let Some(assets) = support::assets() else { return };
    // RUST_LOG=volcano_controller=debug shows the controller's decisions.
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("volcano-rs-controller.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;
    server.namespace("ml").await;
    let client = server.client().await;
    for (name, parent) in [("root", None), ("eng", None), ("dev", Some("eng")), ("ops", Some("eng"))] {
        create_queue(&client, name, parent).await;
    }
    let metrics = ControllerMetrics::new();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run_with_metrics(options(&kubeconfig), metrics.clone(), async move {
        let _ = stopped.await;
    }));

    // A new queue (from the CLI) is opened, and made root's child.
    let out =
        queue_cli(&client, QueueCommand::Create { name: "research".into(), weight: 2, state: "Open".into() }).await;
    assert!(out.contains("research created"), "{out}");
    let research = queue_where(&client, "research", "Open", |q| state(q) == Some(QueueState::Open)).await;
    assert_eq!(research.spec.parent.as_deref(), Some("root"));
    queue_where(&client, "eng", "a child of root", |q| q.spec.parent.as_deref() == Some("root")).await;
    assert_eq!(queue_where(&client, "root", "Open", |q| state(q) == Some(QueueState::Open)).await.spec.parent, None);

    // PodGroups are counted by phase (PodGroups have no status subresource: created with it).
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), "ml");
    for (name, phase) in [("running", "Running"), ("waiting", "Inqueue")] {
        let pg: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"minMember": 1, "queue": "dev"}, "status": {"phase": phase}
        }))
        .unwrap();
        pgs.create(&PostParams::default(), &pg).await.unwrap();
    }
    queue_where(&client, "dev", "1 running and 1 inqueue PodGroup", |q| {
        q.status.as_ref().is_some_and(|s| s.running == 1 && s.inqueue == 1)
    })
    .await;
    // Volcano's gauges follow the counts (inqueue, pending, running, unknown, completed).
    gauges_where(&metrics, "dev", Some([1.0, 0.0, 1.0, 0.0, 0.0])).await;
    gauges_where(&metrics, "research", Some([0.0; 5])).await;

    // Closing eng closes its children: dev has PodGroups, so it is Closing.
    let out = queue_cli(&client, QueueCommand::Close { name: "eng".into() }).await;
    assert!(out.contains("CloseQueue queue eng"), "{out}");
    queue_where(&client, "eng", "Closed", |q| state(q) == Some(QueueState::Closed)).await;
    let dev = queue_where(&client, "dev", "Closing", |q| state(q) == Some(QueueState::Closing)).await;
    assert!(marked(&dev), "dev is marked closed by its parent");
    assert!(marked(&queue_where(&client, "ops", "Closed", |q| state(q) == Some(QueueState::Closed)).await));
    assert_eq!(state(&Api::<Queue>::all(client.clone()).get("research").await.unwrap()), Some(QueueState::Open));

    // dev is Closed once its PodGroups are gone.
    for name in ["running", "waiting"] {
        pgs.delete(name, &DeleteParams::default()).await.unwrap();
    }
    queue_where(&client, "dev", "Closed with no PodGroups", |q| {
        state(q) == Some(QueueState::Closed) && q.status.as_ref().is_some_and(|s| s.running == 0 && s.inqueue == 0)
    })
    .await;
    gauges_where(&metrics, "dev", Some([0.0; 5])).await;

    // dev cannot be opened while eng is closed; opening eng reopens both children.
    queue_cli(&client, QueueCommand::Open { name: "dev".into() }).await;
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "a Warning event: dev's parent is closed", || {
        let events = events.clone();
        async move {
            events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("dev")
                    && e.type_.as_deref() == Some("Warning")
                    && e.note.as_deref().is_some_and(|n| n.contains("open the parent queue first"))
            })
        }
    })
    .await;
    assert_eq!(state(&Api::<Queue>::all(client.clone()).get("dev").await.unwrap()), Some(QueueState::Closed));
    queue_cli(&client, QueueCommand::Open { name: "eng".into() }).await;
    for name in ["eng", "dev", "ops"] {
        let q = queue_where(&client, name, "Open", |q| state(q) == Some(QueueState::Open)).await;
        assert!(!marked(&q), "{name} is no longer marked closed by its parent");
    }
    let e = eventually(WAIT, "the CloseQueue event of eng", || {
        let events = events.clone();
        async move {
            events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("eng")
                    && e.reason.as_deref() == Some("CloseQueue")
            })
        }
    })
    .await;
    assert_eq!(e.note.as_deref(), Some("Close queue succeed"));
    assert_eq!(e.reporting_controller.as_deref(), Some("volcano-rs-controller"));

    // Every Command was consumed; the list shows the states.
    let commands: Api<Command> = Api::namespaced(client.clone(), "default");
    eventually(WAIT, "no Command left", || {
        let commands = commands.clone();
        async move { commands.list(&ListParams::default()).await.ok().filter(|l| l.items.is_empty()) }
    })
    .await;
    let table = queue_cli(&client, QueueCommand::List).await;
    let research_row = table.lines().find(|l| l.starts_with("research")).unwrap_or_default().to_string();
    assert!(research_row.contains("Open") && research_row.contains("root"), "{table}");

    // Closing with `queue create --state Closed`.
    queue_cli(&client, QueueCommand::Create { name: "frozen".into(), weight: 1, state: "Closed".into() }).await;
    queue_where(&client, "frozen", "Closed", |q| state(q) == Some(QueueState::Closed)).await;

    // The gauges follow a PodGroup through its phases (the counts alone reach the status at
    // most once per 5 s per queue; the gauges at every reconcile).
    let pg: PodGroup = serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "late", "namespace": "ml"},
        "spec": {"minMember": 1, "queue": "frozen"}, "status": {"phase": "Pending"}
    }))
    .unwrap();
    pgs.create(&PostParams::default(), &pg).await.unwrap();
    gauges_where(&metrics, "frozen", Some([0.0, 1.0, 0.0, 0.0, 0.0])).await;
    let pg = pgs.get("late").await.unwrap();
    let mut completed = pg.clone();
    completed.status.as_mut().unwrap().phase = Some(volcano_api::crd::PodGroupPhase::Completed);
    pgs.replace("late", &PostParams::default(), &completed).await.unwrap();
    gauges_where(&metrics, "frozen", Some([0.0, 0.0, 0.0, 0.0, 1.0])).await;
    queue_where(&client, "frozen", "1 completed PodGroup", |q| q.status.as_ref().is_some_and(|s| s.completed == 1))
        .await;

    // A deleted queue's series go.
    Api::<Queue>::all(client.clone()).delete("frozen", &DeleteParams::default()).await.unwrap();
    gauges_where(&metrics, "frozen", None).await;
    assert_eq!(gauge(&metrics, "running", "research"), Some(0.0), "the other queues keep theirs");

    let _ = stop.send(());
    controller.await.unwrap().unwrap();
    // Stopped, the controller no longer counts the queues' PodGroups.
    assert_eq!(gauge(&metrics, "running", "research"), None);
}
