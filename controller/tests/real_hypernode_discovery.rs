//! HyperNode discovery against a real API server (etcd + kube-apiserver from
//! `KUBEBUILDER_ASSETS`, skipped with a message when unset; docs/testing.md). The controller
//! runs in process with the token of deploy/volcano-rs-controller.yaml's ServiceAccount, so
//! its RBAC is what is tested too. Nodes labelled with two tiers make HyperNodes with the
//! right members, tiers and counts; a relabelled node moves; a deleted node empties its
//! switch, which goes; a hand-written HyperNode is left alone; a source volcano-rs does not
//! run is a Warning event on the ConfigMap.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::json;
use volcano_api::topology::HyperNode;
use volcano_controller::hypernode::{CONFIG_KEY, CONFIG_MAP_NAME, SOURCE_LABEL};
use volcano_controller::{run, ControllerOptions};
use volcano_testkit::apiserver::{self as support, eventually, ApiServer};

const WAIT: Duration = Duration::from_secs(30);

const CONFIG: &str = r#"
networkTopologyDiscovery:
  - source: ufm
    enabled: true
    interval: 10m
  - source: label
    enabled: true
    interval: 1h
    config:
      networkTopologyTypes:
        rack:
          - nodeLabel: example.com/spine
          - nodeLabel: example.com/tor
          - nodeLabel: kubernetes.io/hostname
"#;

fn options(kubeconfig: &std::path::Path) -> ControllerOptions {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        opts: ControllerOptions,
    }
    let kubeconfig = kubeconfig.to_str().unwrap().to_string();
    Cli::try_parse_from([
        "controller",
        "--kubeconfig",
        &kubeconfig,
        "--listen-address=",
        "--hypernode-config-namespace=volcano-system",
    ])
    .unwrap()
    .opts
}

/// The HyperNode CRD: deploy/crds' when installed from there, else generated from the type.
async fn hyper_node_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = HyperNode::crd();
    let name = crd.metadata.name.clone().unwrap();
    if crds.get_opt(&name).await.unwrap().is_none() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    eventually(WAIT, "the HyperNode CRD established", || {
        let crds = crds.clone();
        let name = name.clone();
        async move {
            let crd = crds.get(&name).await.ok()?;
            crd.status?.conditions?.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        }
    })
    .await;
}

async fn create_node(client: &Client, name: &str, tor: &str, spine: &str) {
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "example.com/tor": tor, "example.com/spine": spine}}
    }))
    .unwrap();
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &node).await.unwrap();
}

/// A discovered HyperNode, seen from the test: tier, tier name, members, node count.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    tier: i64,
    tier_name: String,
    members: Vec<String>,
    node_count: Option<i64>,
}

/// The discovered HyperNodes by their label (`tor=t0`, `spine=p0`), members by label too.
async fn discovered(client: &Client) -> BTreeMap<String, Seen> {
    let api: Api<HyperNode> = Api::all(client.clone());
    let list = api.list(&ListParams::default().labels(&format!("{SOURCE_LABEL}=label"))).await.unwrap().items;
    let label_of = |h: &HyperNode| {
        let l = h.labels();
        ["example.com/tor", "example.com/spine"]
            .iter()
            .find_map(|k| l.get(*k).map(|v| format!("{}={v}", k.trim_start_matches("example.com/"))))
            .unwrap_or_default()
    };
    let by_name: BTreeMap<String, String> = list.iter().map(|h| (h.name_any(), label_of(h))).collect();
    list.iter()
        .map(|h| {
            let members = h
                .spec
                .members
                .iter()
                .map(|m| {
                    let n = m.selector.exact_match.as_ref().unwrap().name.clone();
                    if m.is_node() {
                        n
                    } else {
                        by_name.get(&n).cloned().unwrap_or(n)
                    }
                })
                .collect();
            (
                label_of(h),
                Seen {
                    tier: h.spec.tier,
                    tier_name: h.spec.tier_name.clone().unwrap_or_default(),
                    members,
                    node_count: h.status.as_ref().and_then(|s| s.node_count),
                },
            )
        })
        .collect()
}

fn seen(tier: i64, members: &[&str], count: i64) -> Seen {
    Seen {
        tier,
        tier_name: if tier == 1 { "example.com/tor" } else { "example.com/spine" }.to_string(),
        members: members.iter().map(|m| m.to_string()).collect(),
        node_count: Some(count),
    }
}

async fn discovered_as(client: &Client, what: &str, want: &[(&str, Seen)]) {
    let want: BTreeMap<String, Seen> = want.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let mut last = BTreeMap::new();
    let got = tokio::time::timeout(WAIT, async {
        loop {
            last = discovered(client).await;
            if last == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    assert!(got.is_ok(), "{what}: after {WAIT:?} the HyperNodes are\n{last:#?}\nwant\n{want:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyper_nodes_follow_the_node_labels() {
    let Some(assets) = support::assets() else { return };
    let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).try_init();
    let server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let client = server.client().await;
    hyper_node_crd(&client).await;
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    server.apply_files(&[deploy.join("namespace.yaml"), deploy.join("volcano-rs-controller.yaml")]).await;
    let kubeconfig = server.service_account_kubeconfig("volcano-system", "volcano-rs-controller").await;

    // Four nodes under two tor switches under one spine.
    for (name, tor) in [("n0", "t0"), ("n1", "t0"), ("n2", "t1"), ("n3", "t1")] {
        create_node(&client, name, tor, "p0").await;
    }
    // A hand-written HyperNode: never touched by discovery, but counted.
    let manual: HyperNode = serde_json::from_value(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "manual-leaf"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n[0-2]$"}}}]}
    }))
    .unwrap();
    let hns: Api<HyperNode> = Api::all(client.clone());
    hns.create(&PostParams::default(), &manual).await.unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": "volcano-system"},
        "data": {CONFIG_KEY: CONFIG}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "volcano-system").create(&PostParams::default(), &cm).await.unwrap();

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(run(options(&kubeconfig), async move {
        let _ = stopped.await;
    }));

    discovered_as(
        &client,
        "discovered from the labels",
        &[
            ("tor=t0", seen(1, &["n0", "n1"], 2)),
            ("tor=t1", seen(1, &["n2", "n3"], 2)),
            ("spine=p0", seen(2, &["tor=t0", "tor=t1"], 4)),
        ],
    )
    .await;
    let names: Vec<String> = hns
        .list(&ListParams::default().labels(&format!("{SOURCE_LABEL}=label")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|h| h.name_any())
        .collect();
    assert!(names.iter().all(|n| n.starts_with("hypernode-rack-tier")), "{names:?}");
    let manual_count = |h: HyperNode| h.status.and_then(|s| s.node_count);
    eventually(WAIT, "the hand-written HyperNode counted (3 nodes)", || {
        let hns = hns.clone();
        async move { (manual_count(hns.get("manual-leaf").await.ok()?) == Some(3)).then_some(()) }
    })
    .await;

    // The ufm source is not run: a Warning event on the ConfigMap says so.
    let events: Api<Event> = Api::namespaced(client.clone(), "volcano-system");
    let e = eventually(WAIT, "a Warning event: ufm is not supported", || {
        let events = events.clone();
        async move {
            events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(CONFIG_MAP_NAME)
                    && e.reason.as_deref() == Some("DiscoveryConfigWarning")
            })
        }
    })
    .await;
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert!(e.note.unwrap_or_default().contains("the source ufm is Volcano's, not supported by volcano-rs"));

    // n1 moves to t1.
    let nodes: Api<Node> = Api::all(client.clone());
    let relabel = json!({"metadata": {"labels": {"example.com/tor": "t1"}}});
    nodes.patch("n1", &PatchParams::default(), &Patch::Merge(&relabel)).await.unwrap();
    discovered_as(
        &client,
        "n1 moved to t1",
        &[
            ("tor=t0", seen(1, &["n0"], 1)),
            ("tor=t1", seen(1, &["n1", "n2", "n3"], 3)),
            ("spine=p0", seen(2, &["tor=t0", "tor=t1"], 4)),
        ],
    )
    .await;

    // n0 goes: t0 is empty and goes; the spine keeps t1.
    nodes.delete("n0", &DeleteParams::default()).await.unwrap();
    discovered_as(
        &client,
        "n0 deleted",
        &[("tor=t1", seen(1, &["n1", "n2", "n3"], 3)), ("spine=p0", seen(2, &["tor=t1"], 3))],
    )
    .await;
    eventually(WAIT, "the hand-written HyperNode recounted (2 nodes)", || {
        let hns = hns.clone();
        async move { (manual_count(hns.get("manual-leaf").await.ok()?) == Some(2)).then_some(()) }
    })
    .await;
    let manual_now = hns.get("manual-leaf").await.unwrap();
    assert_eq!(manual_now.spec, manual.spec, "the hand-written HyperNode's spec is untouched");
    assert!(manual_now.labels().get(SOURCE_LABEL).is_none());

    // A discovered HyperNode deleted by hand comes back.
    let t1 = hns
        .list(&ListParams::default().labels(&format!("{SOURCE_LABEL}=label,example.com/tor=t1")))
        .await
        .unwrap()
        .items
        .remove(0)
        .name_any();
    hns.delete(&t1, &DeleteParams::default()).await.unwrap();
    eventually(WAIT, "the deleted tor=t1 HyperNode recreated under its name", || {
        let hns = hns.clone();
        let t1 = t1.clone();
        async move { hns.get_opt(&t1).await.ok()?.filter(|h| h.metadata.deletion_timestamp.is_none()).map(|_| ()) }
    })
    .await;

    let _ = stop.send(());
    controller.await.unwrap().unwrap();
}
