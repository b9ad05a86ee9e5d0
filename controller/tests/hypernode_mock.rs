//! The HyperNode controller's pass against a mock API server (kube's `tower-test` style):
//! the exact calls, in their order, for discovery from the user guide's labels (creates
//! lower tiers first, the stale discovered HyperNode deleted, a hand-written one left alone,
//! then the node counts), and the events of a configuration that does not parse (recorded
//! once) and of a source volcano-rs does not run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::client::Body;
use kube::core::{ObjectMeta, PartialObjectMeta, PartialObjectMetaExt};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use kube::Client;
use serde_json::{json, Value};
use volcano_api::topology::HyperNode;
use volcano_controller::hypernode::{CONFIG_KEY, CONFIG_MAP_NAME, SOURCE_LABEL};
use volcano_controller::hypernode_reconcile::{reconcile_once, DiscoveryContext, Pass};

/// The calls made: method, path, body.
type Log = Arc<Mutex<Vec<(Method, String, Value)>>>;

/// A fake API server: DELETE succeeds, the rest echoes the body.
fn mock_api() -> (Client, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let obj: Value = serde_json::from_slice(&bytes).unwrap_or(json!({}));
            let (status, mut reply) = match parts.method {
                Method::DELETE => {
                    (200, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}))
                }
                Method::POST => (201, obj.clone()),
                _ => (200, obj.clone()),
            };
            if reply.get("metadata").is_none() {
                reply["metadata"] = json!({"name": "x"});
            }
            if parts.uri.path().contains("hypernodes") && reply.get("spec").is_none() {
                reply["spec"] = json!({"tier": 1});
            }
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

const CONFIG: &str = r#"
networkTopologyDiscovery:
  - source: label
    enabled: true
    config:
      networkTopologyTypes:
        topologyA3:
          - nodeLabel: volcano.sh/hypercluster
          - nodeLabel: volcano.sh/hypernode
          - nodeLabel: kubernetes.io/hostname
"#;

fn node(name: &str, hypernode: &str, hypercluster: &str) -> PartialObjectMeta<Node> {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(BTreeMap::from([
            ("kubernetes.io/hostname".to_string(), name.to_string()),
            ("volcano.sh/hypernode".to_string(), hypernode.to_string()),
            ("volcano.sh/hypercluster".to_string(), hypercluster.to_string()),
        ])),
        ..Default::default()
    }
    .into_request_partial::<Node>()
}

fn hyper_node(v: Value) -> HyperNode {
    serde_json::from_value(v).unwrap()
}

fn config_map(text: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": "volcano-system", "uid": "cm-uid"},
        "data": {CONFIG_KEY: text}
    }))
    .unwrap()
}

fn context(client: Client, config: &str, hyper_nodes: Vec<HyperNode>) -> DiscoveryContext {
    let (nodes, mut nodes_w) = reflector::store::<PartialObjectMeta<Node>>();
    let (hns, mut hns_w): (Store<HyperNode>, _) = reflector::store::<HyperNode>();
    let (cms, mut cms_w) = reflector::store::<ConfigMap>();
    nodes_w.apply_watcher_event(&Event::InitDone);
    hns_w.apply_watcher_event(&Event::InitDone);
    cms_w.apply_watcher_event(&Event::InitDone);
    for (i, (hn, hc)) in [("s0", "s4"), ("s0", "s4"), ("s1", "s4"), ("s1", "s4")].iter().enumerate() {
        nodes_w.apply_watcher_event(&Event::Apply(node(&format!("node{i}"), hn, hc)));
    }
    for h in hyper_nodes {
        hns_w.apply_watcher_event(&Event::Apply(h));
    }
    cms_w.apply_watcher_event(&Event::Apply(config_map(config)));
    let recorder =
        Recorder::new(client.clone(), Reporter { controller: "volcano-rs-controller".into(), instance: None });
    DiscoveryContext::new(
        client,
        nodes,
        hns,
        cms,
        ("volcano-system".to_string(), CONFIG_MAP_NAME.to_string()),
        recorder,
    )
}

#[tokio::test]
async fn a_pass_creates_bottom_up_deletes_the_stale_and_counts() {
    let (client, log) = mock_api();
    let stale = hyper_node(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "hypernode-topologya3-tier1-zzzzz", "labels": {SOURCE_LABEL: "label", "volcano.sh/hypernode": "gone"}},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "node9"}}}]}
    }));
    let manual = hyper_node(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": "manual"},
        "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^node[01]$"}}}]},
        "status": {"nodeCount": 2}
    }));
    let ctx = context(client, CONFIG, vec![stale, manual]);
    let pass = reconcile_once(&ctx).await;
    assert_eq!(
        pass,
        Pass {
            discovered: true,
            created: 3,
            updated: 0,
            deleted: 1,
            counted: 3,
            failed: 0,
            next: volcano_controller::hypernode::DEFAULT_INTERVAL
        }
    );
    let log = log.lock().unwrap();
    let calls: Vec<(Method, String)> = log.iter().map(|(m, p, _)| (m.clone(), p.clone())).collect();
    let base = "/apis/topology.volcano.sh/v1alpha1/hypernodes";
    let names: Vec<String> =
        log[..3].iter().map(|(_, _, b)| b["metadata"]["name"].as_str().unwrap().to_string()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    let mut want = vec![(Method::POST, base.to_string()); 3];
    want.push((Method::DELETE, format!("{base}/hypernode-topologya3-tier1-zzzzz")));
    for n in &sorted {
        want.push((Method::PATCH, format!("{base}/{n}/status")));
    }
    assert_eq!(calls, want, "the manual HyperNode's count (2) is right: not written");
    // Tier 1 (s0, s1, by name) before tier 2 (s4), each with its labels, members by exact name.
    let tiers: Vec<i64> = log[..3].iter().map(|(_, _, b)| b["spec"]["tier"].as_i64().unwrap()).collect();
    assert_eq!(tiers, vec![1, 1, 2]);
    let s0 = &log[..2]
        .iter()
        .find(|(_, _, b)| b["metadata"]["labels"]["volcano.sh/hypernode"] == "s0")
        .expect("s0 created")
        .2;
    assert_eq!(s0["metadata"]["labels"], json!({SOURCE_LABEL: "label", "volcano.sh/hypernode": "s0"}));
    assert_eq!(s0["spec"]["tierName"], "volcano.sh/hypernode");
    assert_eq!(
        s0["spec"]["members"],
        json!([{"type": "Node", "selector": {"exactMatch": {"name": "node0"}}}, {"type": "Node", "selector": {"exactMatch": {"name": "node1"}}}])
    );
    let s4 = &log[2].2;
    assert_eq!(s4["spec"]["members"][0]["type"], "HyperNode");
    assert_eq!(s4["spec"]["members"][0]["selector"]["exactMatch"]["name"], names[0].as_str());
    // Counts: 2 under each tier-1 switch, 4 under s4.
    let counts: BTreeMap<String, i64> = log[4..]
        .iter()
        .map(|(_, p, b)| (p.split('/').nth(5).unwrap().to_string(), b["status"]["nodeCount"].as_i64().unwrap()))
        .collect();
    assert_eq!(counts, BTreeMap::from([(names[0].clone(), 2), (names[1].clone(), 2), (names[2].clone(), 4)]));
}

#[tokio::test]
async fn a_bad_configuration_is_an_event_once_and_discovers_nothing() {
    let (client, log) = mock_api();
    let bad = "networkTopologyDiscovery:\n  - source: label\n    enabled: true\n    config:\n      networkTopologyTypes:\n        t:\n          - nodeLabel: kubernetes.io/hostname\n";
    let ctx = context(client, bad, vec![]);
    for _ in 0..2 {
        let pass = reconcile_once(&ctx).await;
        assert!(!pass.discovered && pass.created == 0, "{pass:?}");
    }
    let log = log.lock().unwrap();
    let events: Vec<&Value> = log.iter().filter(|(_, p, _)| p.contains("/events")).map(|(_, _, b)| b).collect();
    assert_eq!(events.len(), 1, "recorded once while unchanged: {log:#?}");
    assert_eq!(events[0]["reason"], "DiscoveryConfigError");
    assert_eq!(events[0]["type"], "Warning");
    assert_eq!(events[0]["regarding"]["name"], CONFIG_MAP_NAME);
    let note = events[0]["note"].as_str().unwrap();
    assert!(note.contains("networkTopologyTypes.t: expected at least two labels"), "{note}");
    assert!(log.iter().all(|(m, p, _)| p.contains("/events") || m != Method::POST), "no HyperNode created");
}

#[tokio::test]
async fn an_unsupported_source_is_a_warning_event() {
    let (client, log) = mock_api();
    let text = format!("{CONFIG}  - source: ufm\n    enabled: true\n    interval: 10m\n");
    let ctx = context(client, &text, vec![]);
    let pass = reconcile_once(&ctx).await;
    assert!(pass.discovered && pass.created == 3, "the label source still runs: {pass:?}");
    let log = log.lock().unwrap();
    let events: Vec<&Value> = log.iter().filter(|(_, p, _)| p.contains("/events")).map(|(_, _, b)| b).collect();
    assert_eq!(events.len(), 1, "{log:#?}");
    assert_eq!(events[0]["reason"], "DiscoveryConfigWarning");
    assert!(events[0]["note"].as_str().unwrap().contains("the source ufm is Volcano's, not supported by volcano-rs"));
}
