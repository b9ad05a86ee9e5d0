//! The fault-injection suite: `volcano-rs scheduler` (in-process, leader election on with
//! its default timings) against etcd and kube-apiserver from `KUBEBUILDER_ASSETS`, skipped
//! with a message when it is unset (see docs/testing.md).
//!
//! Each scenario binds 40 pods on 10 nodes of 8 GPUs, does something bad to the API
//! server, then creates 40 more pods once it is ready again and measures how long the
//! first of them waits for its bind. What is checked every time: every pod bound exactly
//! once (the API server accepted as many binds as there are pods and refused none), no
//! node over its GPUs, and the scheduler's cache agreeing with a fresh list.
//!
//! - `kill`: kube-apiserver killed (SIGKILL) and started again on the same port with the
//!   same etcd 12 s later;
//! - `pause`: kube-apiserver stopped with SIGSTOP for 12 s, then SIGCONT (its connections
//!   stay open, so the watches can resume from their resource versions).
//!
//! `FAULTS_REPEAT=N` runs each scenario N times (3 for the medians of
//! docs/performance.md); `FAULTS_ONLY=kill` or `pause` runs one. `RUST_LOG=volcano_scheduler=debug,volcano_kube=debug,kube_runtime=debug`
//! shows the watches, the lease and the binds.

mod common;
use common::{create_node, quantities, start};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::Client;
use volcano_api::crd::{PodGroup, PodGroupSpec, GROUP_NAME_ANNOTATION};
use volcano_scheduler::options::SchedulerOptions;
use volcano_testkit::apiserver::{self as support, eventually, ApiServer};

const WAIT: Duration = Duration::from_secs(60);
const NODES: usize = 10;
const GPUS_PER_NODE: u32 = 8;
/// Pods bound before the fault and created after it (one GPU each: together they fill
/// every node exactly).
const PODS: usize = 40;
const GANG: usize = 4;
const OUTAGE: Duration = Duration::from_secs(12);
/// The target of issue 39: first bind at most 5 s after the API server is ready again.
const FIRST_BIND_TARGET: Duration = Duration::from_secs(5);

fn pod(ns: &str, name: &str, scheduler: &str, group: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            annotations: Some([(GROUP_NAME_ANNOTATION.to_string(), group.to_string())].into_iter().collect()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler.into()),
            termination_grace_period_seconds: Some(0),
            containers: vec![Container {
                name: "train".into(),
                image: Some("busybox".into()),
                resources: Some(ResourceRequirements {
                    requests: Some(quantities(&[("cpu", "1"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")])),
                    limits: Some(quantities(&[("nvidia.com/gpu", "1")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

/// `PODS` pods in gangs of `GANG`, each gang with its PodGroup, named `{prefix}-{gang}-{i}`.
async fn create_gangs(client: &Client, ns: &str, scheduler: &str, prefix: &str) {
    let pgs: Api<PodGroup> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for g in 0..PODS / GANG {
        let name = format!("{prefix}-{g}");
        let mut pg = PodGroup::new(
            &name,
            PodGroupSpec { min_member: GANG as i32, queue: Some("default".into()), ..Default::default() },
        );
        pg.metadata.namespace = Some(ns.into());
        pgs.create(&PostParams::default(), &pg).await.unwrap_or_else(|e| panic!("PodGroup {name}: {e}"));
        for i in 0..GANG {
            let p = pod(ns, &format!("{name}-{i}"), scheduler, &name);
            pods.create(&PostParams::default(), &p).await.unwrap_or_else(|e| panic!("pod {name}-{i}: {e}"));
        }
    }
}

/// The pods of `ns` whose name starts with `prefix`, with their node (if bound).
async fn bound(client: &Client, ns: &str, prefix: &str) -> Option<Vec<(String, Option<String>)>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = tokio::time::timeout(Duration::from_secs(2), pods.list(&ListParams::default())).await.ok()?.ok()?;
    Some(
        list.items
            .into_iter()
            .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix)))
            .map(|p| (p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name)))
            .collect(),
    )
}

/// The scheduler as deployed: leader election on with the default lease timings, the
/// default period; only this scenario's nodes.
fn options(server: &ApiServer, scheduler: &str, scenario: &str) -> SchedulerOptions {
    let mut o = SchedulerOptions::defaults();
    o.kubeconfig = Some(server.kubeconfig.clone());
    o.scheduler_names = vec![scheduler.to_string()];
    o.leader_elect = true;
    o.listen_address = String::new();
    o.healthz_address = String::new();
    o.node_selector = vec![format!("envtest-scenario:{scenario}")];
    o.identity = Some(format!("{scheduler}-replica"));
    o
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// SIGKILL, then the same command again on the same port after the outage.
    Kill,
    /// SIGSTOP, then SIGCONT after the outage.
    Pause,
}

/// What one run measured, from the moment the API server was ready again.
#[derive(Debug)]
struct Recovery {
    /// The scheduler leads again.
    leading: Duration,
    /// The first pod created after the fault is bound (as a list of the API shows it).
    first_bind: Duration,
    /// The last of them is bound.
    all_bound: Duration,
}

/// Binds `PODS` pods, injects `fault`, creates `PODS` more once the API server is ready
/// again, and measures; checks that every pod is bound exactly once, that no node is over
/// its GPUs and that the cache agrees with a fresh list.
async fn scenario(server: &mut ApiServer, fault: Fault, run_no: usize) -> Recovery {
    let name = format!("{}-{run_no}", format!("{fault:?}").to_lowercase());
    let (ns, sched) = (format!("faults-{name}"), format!("volcano-rs-faults-{name}"));
    server.namespace(&ns).await;
    server.namespace("volcano-system").await;
    let client = server.client().await;
    let nodes: Vec<String> = (0..NODES).map(|i| format!("faults-{name}-n{i}")).collect();
    for n in &nodes {
        create_node(&client, n, &ns, GPUS_PER_NODE).await;
    }
    let running = start(options(server, &sched, &ns)).await;
    let mut leading = running.handle.leading.clone();
    tokio::time::timeout(WAIT, leading.wait_for(|l| *l)).await.expect("leads in time").expect("leading");
    create_gangs(&client, &ns, &sched, "before").await;
    eventually(WAIT, "the first pods bound", || async {
        let pods = bound(&client, &ns, "before-").await?;
        (pods.len() == PODS && pods.iter().all(|(_, n)| n.is_some())).then_some(())
    })
    .await;

    // The fault.
    tracing::info!(?fault, "fault: the API server goes away for {OUTAGE:?}");
    match fault {
        Fault::Kill => {
            server.kill_apiserver();
            tokio::time::sleep(OUTAGE).await;
            server.restart_apiserver();
        }
        Fault::Pause => {
            server.pause_apiserver(true);
            tokio::time::sleep(OUTAGE).await;
            server.pause_apiserver(false);
        }
    }
    server.wait_ready(WAIT).await;
    let ready = Instant::now();
    tracing::info!(?fault, "the API server is ready again");

    // A fresh client: the test's own pooled connections may be dead.
    let client = server.client().await;
    let creating = {
        let (client, ns, sched) = (client.clone(), ns.clone(), sched.clone());
        tokio::spawn(async move { create_gangs(&client, &ns, &sched, "after").await })
    };
    let leads_again = {
        let mut leading = running.handle.leading.clone();
        tokio::spawn(async move {
            let _ = leading.wait_for(|l| *l).await;
            ready.elapsed()
        })
    };
    let mut first_bind = None;
    let all_bound = loop {
        if let Some(pods) = bound(&client, &ns, "after-").await {
            if first_bind.is_none() && pods.iter().any(|(_, n)| n.is_some()) {
                first_bind = Some(ready.elapsed());
            }
            if pods.len() == PODS && pods.iter().all(|(_, n)| n.is_some()) {
                break ready.elapsed();
            }
        }
        assert!(
            ready.elapsed() < Duration::from_secs(120),
            "{name}: the pods created after the fault are not all bound"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    creating.await.expect("pods created");
    let leading = leads_again.await.expect("leadership observed");
    let recovery = Recovery { leading, first_bind: first_bind.expect("a first bind"), all_bound };

    // Every pod bound once, no node over its GPUs.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let all = pods.list(&ListParams::default()).await.expect("pods listed");
    assert_eq!(all.items.len(), 2 * PODS);
    let mut per_node: BTreeMap<String, u32> = BTreeMap::new();
    for p in &all.items {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).expect("every pod bound");
        *per_node.entry(node).or_default() += 1;
    }
    for (node, gpus) in &per_node {
        assert!(*gpus <= GPUS_PER_NODE, "{node} has {gpus} GPUs bound, over its {GPUS_PER_NODE}");
        assert!(nodes.contains(node), "{node} is not a node of this scenario");
    }
    eventually(WAIT, "the scheduler counts one accepted bind per pod", || async {
        let m = &running.handle.metrics;
        (m.binds.get() == (2 * PODS) as i64).then_some(())
    })
    .await;
    assert_eq!(running.handle.metrics.bind_failures.get(), 0, "no bind refused (a second bind would be)");
    // The cache agrees with a fresh list once the watch has caught up, and assumes nothing.
    eventually(WAIT, "the cache agrees with a fresh list", || async {
        let cache = running.handle.cache.lock().expect("cache lock");
        let agree = all.items.iter().all(|p| {
            let key = format!("{ns}/{}", p.metadata.name.as_deref().unwrap_or_default());
            cache.pods.get(&key).is_some_and(|c| {
                c.metadata.uid == p.metadata.uid
                    && c.spec.as_ref().and_then(|s| s.node_name.clone())
                        == p.spec.as_ref().and_then(|s| s.node_name.clone())
            })
        });
        let ours = cache.pods.iter().filter(|(k, _)| k.starts_with(&format!("{ns}/"))).count();
        (agree && ours == all.items.len() && cache.assumptions().is_empty()).then_some(())
    })
    .await;
    running.stop().await;
    let node_api: Api<Node> = Api::all(client.clone());
    for n in &nodes {
        let _ = node_api.delete(n, &DeleteParams::default()).await;
    }
    recovery
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_faults_suite() {
    let Some(assets) = support::assets() else { return };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let repeat: usize = std::env::var("FAULTS_REPEAT").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let only = std::env::var("FAULTS_ONLY").unwrap_or_default();
    let mut server = ApiServer::start(&assets).await;
    server.install_crds().await;
    let mut report = Vec::new();
    for fault in [Fault::Kill, Fault::Pause] {
        if !only.is_empty() && !only.split(',').any(|o| o.eq_ignore_ascii_case(&format!("{fault:?}"))) {
            continue;
        }
        let mut runs = Vec::new();
        for run_no in 1..=repeat {
            let r = scenario(&mut server, fault, run_no).await;
            eprintln!(
                "FAULT {fault:?} run {run_no}: after the API server was ready: leading again {:.2} s, first bind {:.2} s, all {PODS} bound {:.2} s",
                r.leading.as_secs_f64(),
                r.first_bind.as_secs_f64(),
                r.all_bound.as_secs_f64()
            );
            runs.push(r);
        }
        let first = median(runs.iter().map(|r| r.first_bind).collect());
        let all = median(runs.iter().map(|r| r.all_bound).collect());
        let leading = median(runs.iter().map(|r| r.leading).collect());
        report.push(format!(
            "FAULT {fault:?}: medians of {repeat}: leading again {:.2} s, first bind {:.2} s, all bound {:.2} s",
            leading.as_secs_f64(),
            first.as_secs_f64(),
            all.as_secs_f64()
        ));
        assert!(
            first <= FIRST_BIND_TARGET,
            "{fault:?}: first bind {first:?} after the API server was ready, over {FIRST_BIND_TARGET:?}"
        );
    }
    for line in report {
        eprintln!("{line}");
    }
}
