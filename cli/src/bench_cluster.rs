//! The cluster benchmark: a scheduler process against a real API server
//! (`volcano-rs bench-cluster`, docs/performance.md "Against an API server").
//!
//! - `load` is [`volcano_benches::cluster::load`]: a `gpu-N` cluster as Node objects,
//!   `running` pods already bound to the nodes, the queues `q0`…`q3` and a `gang-P`
//!   workload pending in namespace `bench` for a given scheduler name.
//! - [`measure`] starts a scheduler command (volcano-rs, or kube-scheduler for comparison),
//!   and times, as observed through the API: process start → first bind, first → last bind
//!   (binds per second), and, for volcano-rs, the cycle time once everything is bound (from
//!   its `/metrics`).
//!
//! The loader is the bench harness's, behind its feature `cluster` (the fault-injection
//! suite preloads a cluster with it too); the rest lives in the command, on the kube side.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use futures::{stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use volcano_benches::cluster::{load, LoadSpec};

/// `volcano-rs bench-cluster`'s subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum BenchCluster {
    /// Create cluster gpu-N as Node objects, bound pods and a pending gang-P workload.
    Load {
        /// kubeconfig of the API server.
        #[arg(long, value_name = "FILE")]
        kubeconfig: PathBuf,
        /// Nodes (cluster gpu-N).
        #[arg(long, default_value_t = 5000)]
        nodes: usize,
        /// Pods already bound to the nodes (cpu 1, memory 1Gi each).
        #[arg(long, default_value_t = 0)]
        running: usize,
        /// Pending pods (gang-P).
        #[arg(long, default_value_t = 0)]
        pending: usize,
        /// schedulerName of the pending pods.
        #[arg(long, default_value = "volcano-rs")]
        scheduler_name: String,
        /// Requests in flight.
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
    },
    /// Start a scheduler command and time its binds in namespace bench.
    Measure {
        /// kubeconfig of the API server.
        #[arg(long, value_name = "FILE")]
        kubeconfig: PathBuf,
        /// Pods to wait for (default: every pod in namespace bench).
        #[arg(long)]
        expect: Option<usize>,
        /// Give up after this long (Go duration).
        #[arg(long, default_value = "10m", value_parser = volcano_scheduler::options::parse_duration)]
        timeout: std::time::Duration,
        /// volcano-rs's metrics address (HOST:PORT): measure idle cycles after the binds.
        #[arg(long)]
        metrics: Option<String>,
        /// Idle window.
        #[arg(long, default_value = "10s", value_parser = volcano_scheduler::options::parse_duration)]
        idle: std::time::Duration,
        /// The scheduler command and its arguments (after --).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// The API server's bind ceiling: bind every pending pod of namespace bench directly,
    /// without scheduling, and report binds per second.
    Bind {
        /// kubeconfig of the API server.
        #[arg(long, value_name = "FILE")]
        kubeconfig: PathBuf,
        /// Requests in flight (volcano-rs's --bind-concurrency for a like-for-like figure).
        #[arg(long, default_value_t = 64)]
        concurrency: usize,
        /// Also record a Scheduled event per pod, as a scheduler does.
        #[arg(long)]
        events: bool,
    },
}

/// Runs `volcano-rs bench-cluster …`.
pub(crate) fn run(cmd: &BenchCluster) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async {
        match cmd {
            BenchCluster::Load { kubeconfig, nodes, running, pending, scheduler_name, concurrency } => {
                let client = volcano_kube::client(Some(kubeconfig)).await?;
                let spec = LoadSpec {
                    nodes: *nodes,
                    running: *running,
                    pending: *pending,
                    scheduler_name: scheduler_name.clone(),
                    concurrency: *concurrency,
                };
                let took = load(&client, &spec).await?;
                Ok(format!("loaded in {:.1} s\n", took.as_secs_f64()))
            }
            BenchCluster::Measure { kubeconfig, expect, timeout, metrics, idle, command } => {
                let client = volcano_kube::client(Some(kubeconfig)).await?;
                let m = measure(&client, command, *expect, *timeout, metrics.as_deref(), *idle).await?;
                Ok(serde_json::to_string_pretty(&m)? + "\n")
            }
            BenchCluster::Bind { kubeconfig, concurrency, events } => {
                let client = volcano_kube::client(Some(kubeconfig)).await?;
                let c = bind_ceiling(&client, *concurrency, *events).await?;
                Ok(serde_json::to_string_pretty(&c)? + "\n")
            }
        }
    })
}

/// What [`measure`] saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct Measurement {
    /// Process start → the first pod of namespace `bench` seen bound, seconds.
    pub(crate) first_bind_s: Option<f64>,
    /// Process start → the last expected pod seen bound, seconds.
    pub(crate) all_bound_s: Option<f64>,
    /// Pods seen bound.
    pub(crate) bound: usize,
    /// Binds per second between the first and the last bind.
    pub(crate) binds_per_second: Option<f64>,
    /// Mean cycle time (ms) once everything was bound, from `/metrics` (volcano-rs only).
    pub(crate) idle_cycle_ms: Option<f64>,
    /// Cycles in that window.
    pub(crate) idle_cycles: Option<f64>,
    /// From start to the last expected bind (volcano-rs only): cycles run.
    pub(crate) busy_cycles: Option<f64>,
    /// The mean time of their snapshots (ms), whichever way they were taken.
    pub(crate) busy_snapshot_ms: Option<f64>,
    /// Snapshots updated in place.
    pub(crate) busy_snapshot_updates: Option<f64>,
    /// Their mean time (ms).
    pub(crate) busy_update_ms: Option<f64>,
    /// Snapshots rebuilt.
    pub(crate) busy_snapshot_rebuilds: Option<f64>,
    /// Their mean time (ms).
    pub(crate) busy_rebuild_ms: Option<f64>,
    /// The scheduler process's CPU time (s).
    pub(crate) busy_cpu_seconds: Option<f64>,
    /// Over the idle window: the mean snapshot time (ms).
    pub(crate) idle_snapshot_ms: Option<f64>,
}

/// The volcano-rs metrics [`measure`] reads, from one scrape of `/metrics`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Scrape {
    /// `volcano_e2e_scheduling_latency_milliseconds` sum and count.
    pub(crate) cycle_ms: (f64, f64),
    /// `volcano_rs_snapshot_duration_milliseconds` sum and count.
    pub(crate) snapshot_ms: (f64, f64),
    /// `volcano_rs_snapshot_update_duration_milliseconds` sum and count.
    pub(crate) update_ms: (f64, f64),
    /// `volcano_rs_snapshot_rebuild_duration_milliseconds` sum and count.
    pub(crate) rebuild_ms: (f64, f64),
    /// `volcano_rs_snapshot_updates_total`.
    pub(crate) updates: f64,
    /// `volcano_rs_snapshot_rebuilds_total`.
    pub(crate) rebuilds: f64,
    /// `process_cpu_seconds_total`.
    pub(crate) cpu_seconds: f64,
}

/// Reads `/metrics` from `addr` (`127.0.0.1:PORT`); `None` if it cannot, or if the cycle
/// latency is missing (not a volcano-rs scheduler).
pub(crate) fn scrape(addr: &str) -> Option<Scrape> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let value = |name: &str| {
        text.lines().find_map(|l| {
            l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse::<f64>().ok())
        })
    };
    let pair = |name: &str| {
        Some((value(&format!("{name}_sum")).unwrap_or(0.0), value(&format!("{name}_count")).unwrap_or(0.0)))
    };
    Some(Scrape {
        cycle_ms: (
            value("volcano_e2e_scheduling_latency_milliseconds_sum")?,
            value("volcano_e2e_scheduling_latency_milliseconds_count")?,
        ),
        snapshot_ms: pair("volcano_rs_snapshot_duration_milliseconds")?,
        update_ms: pair("volcano_rs_snapshot_update_duration_milliseconds")?,
        rebuild_ms: pair("volcano_rs_snapshot_rebuild_duration_milliseconds")?,
        updates: value("volcano_rs_snapshot_updates_total").unwrap_or(0.0),
        rebuilds: value("volcano_rs_snapshot_rebuilds_total").unwrap_or(0.0),
        cpu_seconds: value("process_cpu_seconds_total").unwrap_or(0.0),
    })
}

/// Starts `command` (program and arguments) and watches namespace `bench` until `expect`
/// pods (default: every pod of the namespace) are bound or `timeout` passes; then, if `metrics` names volcano-rs's metrics
/// address, measures the cycle time over `idle` with nothing left to do. The process is
/// killed at the end.
pub(crate) async fn measure(
    client: &Client,
    command: &[String],
    expect: Option<usize>,
    timeout: Duration,
    metrics: Option<&str>,
    idle: Duration,
) -> anyhow::Result<Measurement> {
    let (program, args) = command.split_first().context("an empty scheduler command")?;
    let api: Api<Pod> = Api::namespaced(client.clone(), "bench");
    let expect = match expect {
        Some(n) => n,
        None => api.list_metadata(&Default::default()).await?.items.len(),
    };
    // Start the watch first, so that no bind is missed.
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff().applied_objects();
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    let mut bound = std::collections::HashSet::new();
    let mut m = Measurement::default();
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    let deadline = tokio::time::Instant::now() + timeout;
    futures::pin_mut!(stream);
    loop {
        let next = tokio::time::timeout_at(deadline, stream.next()).await;
        let Ok(Some(event)) = next else { break };
        let Ok(pod) = event else { continue };
        if pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() && bound.insert(pod.name_any()) {
            let now = Instant::now();
            first.get_or_insert(now);
            last = Some(now);
            if bound.len() >= expect {
                break;
            }
        }
    }
    m.bound = bound.len();
    m.first_bind_s = first.map(|t| (t - start).as_secs_f64());
    m.all_bound_s = (bound.len() >= expect).then(|| last.map(|t| (t - start).as_secs_f64())).flatten();
    if let (Some(f), Some(l)) = (first, last) {
        let span = (l - f).as_secs_f64();
        if span > 0.0 && bound.len() > 1 {
            m.binds_per_second = Some((bound.len() - 1) as f64 / span);
        }
    }
    if let Some(addr) = metrics {
        if let Some(busy) = scrape(addr) {
            m.busy_cycles = Some(busy.cycle_ms.1);
            m.busy_snapshot_ms = (busy.snapshot_ms.1 > 0.0).then(|| busy.snapshot_ms.0 / busy.snapshot_ms.1);
            let mean = |(sum, count): (f64, f64)| (count > 0.0).then(|| sum / count);
            m.busy_snapshot_updates = Some(busy.updates);
            m.busy_update_ms = mean(busy.update_ms);
            m.busy_snapshot_rebuilds = Some(busy.rebuilds);
            m.busy_rebuild_ms = mean(busy.rebuild_ms);
            m.busy_cpu_seconds = Some(busy.cpu_seconds);
        }
        // Let the last statuses settle, then measure a window of idle cycles.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let before = scrape(addr);
        tokio::time::sleep(idle).await;
        let after = scrape(addr);
        if let (Some(b), Some(a)) = (before, after) {
            let cycles = a.cycle_ms.1 - b.cycle_ms.1;
            if cycles > 0.0 {
                m.idle_cycle_ms = Some((a.cycle_ms.0 - b.cycle_ms.0) / cycles);
                m.idle_cycles = Some(cycles);
            }
            let snapshots = a.snapshot_ms.1 - b.snapshot_ms.1;
            if snapshots > 0.0 {
                m.idle_snapshot_ms = Some((a.snapshot_ms.0 - b.snapshot_ms.0) / snapshots);
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(m)
}

/// What [`bind_ceiling`] saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct Ceiling {
    /// Pods bound.
    pub(crate) bound: usize,
    /// Binds that failed.
    pub(crate) failed: usize,
    /// Seconds from the first request to the last answer.
    pub(crate) seconds: f64,
    /// Binds per second.
    pub(crate) binds_per_second: f64,
    /// Whether each bind was followed by a `Scheduled` event, as a scheduler records.
    pub(crate) with_events: bool,
}

/// The API server's own ceiling for binds: binds every pending pod of namespace `bench`
/// through `pods/binding` (pod `i` of the list to node `node-{i / 8}`, as many as GPUs,
/// `concurrency` requests in flight), with no scheduling at all, and, with `events`, a
/// `Scheduled` event per pod as a scheduler writes. A scheduler whose binds per second
/// (from [`measure`], same pods, same API server) come close to this is limited by the API
/// server, not by its own work.
pub(crate) async fn bind_ceiling(client: &Client, concurrency: usize, events: bool) -> Result<Ceiling, kube::Error> {
    use k8s_openapi::api::core::v1::{Binding, Event as CoreEvent, ObjectReference};
    let api: Api<Pod> = Api::namespaced(client.clone(), "bench");
    let mut pods: Vec<(String, String)> = api
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_none_or(str::is_empty))
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect();
    pods.sort();
    let events_api: Api<CoreEvent> = Api::namespaced(client.clone(), "bench");
    let start = Instant::now();
    let results: Vec<bool> = stream::iter(pods.into_iter().enumerate())
        .map(|(i, (name, uid))| {
            let (client, events_api) = (client.clone(), events_api.clone());
            async move {
                let node = format!("node-{:05}", i / 8);
                let binding = Binding {
                    metadata: ObjectMeta {
                        name: Some(name.clone()),
                        namespace: Some("bench".into()),
                        uid: Some(uid.clone()),
                        ..Default::default()
                    },
                    target: ObjectReference {
                        api_version: Some("v1".into()),
                        kind: Some("Node".into()),
                        name: Some(node.clone()),
                        ..Default::default()
                    },
                };
                let body = serde_json::to_vec(&binding).expect("a binding serialises");
                let request = http::Request::post(format!("/api/v1/namespaces/bench/pods/{name}/binding"))
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .expect("a valid request");
                let ok = client.request_text(request).await.is_ok();
                if ok && events {
                    let now = k8s_openapi::jiff::Timestamp::now();
                    let event = CoreEvent {
                        metadata: ObjectMeta { generate_name: Some(format!("{name}.")), ..Default::default() },
                        involved_object: ObjectReference {
                            api_version: Some("v1".into()),
                            kind: Some("Pod".into()),
                            name: Some(name.clone()),
                            namespace: Some("bench".into()),
                            uid: Some(uid),
                            ..Default::default()
                        },
                        reason: Some("Scheduled".into()),
                        message: Some(format!("Successfully assigned bench/{name} to {node}")),
                        type_: Some("Normal".into()),
                        first_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
                        last_timestamp: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now)),
                        count: Some(1),
                        ..Default::default()
                    };
                    let _ = events_api.create(&PostParams::default(), &event).await;
                }
                ok
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let bound = results.iter().filter(|ok| **ok).count();
    Ok(Ceiling {
        bound,
        failed: results.len() - bound,
        seconds,
        binds_per_second: if seconds > 0.0 { bound as f64 / seconds } else { 0.0 },
        with_events: events,
    })
}
