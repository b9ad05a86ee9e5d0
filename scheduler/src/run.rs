//! `volcano-rs scheduler`: the loop that ties the watches, the core and the applier
//! together.
//!
//! At start, everything that can be wrong with the command line or the configuration is
//! checked, and the HTTP listeners are bound, before anything is watched. Then the watches
//! start and the loop waits for their first lists (`/readyz` turns ready). Only the leader
//! (or every replica with `--leader-elect=false`) runs cycles: one cycle starts one
//! `--schedule-period` after the previous one ended (Volcano's sliding period). A cycle:
//! reload the configuration if its file changed, make sure queues `root` and the default
//! queue exist and that pending pods without a PodGroup get one, take the snapshot from the
//! cache, run the core on a blocking thread, and hand the effects to the applier, which
//! returns at once. On SIGTERM (or when the caller's shutdown future resolves) the loop
//! stops, in-flight API calls get a few seconds to finish, and the lease is released.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::Client;
use thiserror::Error;
use tokio::sync::watch;
use volcano_api::crd::{PodGroup, Queue, GROUP_NAME_ANNOTATION};
use volcano_api::topology::HyperNode;
use volcano_framework::pod::SchedPod;
use volcano_framework::{implicit, run_cycle, CycleContext, SessionOptions};
use volcano_metrics::CycleTimer;

use crate::applier::{Applier, ApplierConfig};
use crate::cache::ClusterCache;
use crate::config::{ConfigError, ProfileHolder, Reload};
use crate::options::{parse_listen_address, OptionsError, SchedulerOptions};
use crate::server::{self, Health, Metrics};
use volcano_kube::leader::{self, LeaseConfig};

/// Why the scheduler did not start or stopped.
#[derive(Debug, Error)]
pub enum RunError {
    /// A flag is wrong.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The configuration is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The kubeconfig or in-cluster configuration cannot be used.
    #[error("cannot configure the Kubernetes client: {0}")]
    Client(#[from] volcano_kube::ClientError),
    /// The cache's objects do not make a snapshot.
    #[error("cannot build the snapshot: {0}")]
    Snapshot(#[from] volcano_framework::SnapshotError),
    /// A listener cannot be bound.
    #[error("cannot listen on {addr} (--{flag}): {source}")]
    Listen {
        /// The flag.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The first lists did not complete in time.
    #[error("the caches did not sync within {0:?} (--resource-sync-timeout): is the API server reachable, are the CRDs installed (kubectl apply -f deploy/crds) and may the scheduler list and watch every kind it reads (deploy/rbac.yaml)?")]
    SyncTimeout(Duration),
}

impl RunError {
    /// A bounded label for logs and metrics, saying what the user fixes: a flag (`flag`),
    /// the configuration (its [`ConfigError::category`]), the client configuration (its
    /// [`volcano_kube::ClientError::category`]), the cluster's objects (`snapshot`), a
    /// listening address (`listen`), or the API server's reachability and RBAC
    /// (`sync_timeout`).
    pub fn category(&self) -> &'static str {
        match self {
            RunError::Options(_) => "flag",
            RunError::Config(e) => e.category(),
            RunError::Client(e) => e.category(),
            RunError::Snapshot(_) => "snapshot",
            RunError::Listen { .. } => "listen",
            RunError::SyncTimeout(_) => "sync_timeout",
        }
    }
}

/// A running scheduler's shared state, for tests and embedding.
#[derive(Clone)]
pub struct Handle {
    /// The cache.
    pub cache: Arc<Mutex<ClusterCache>>,
    /// Whether this replica leads.
    pub leading: watch::Receiver<bool>,
    /// The metrics.
    pub metrics: Metrics,
    /// Caches synced.
    pub ready: Arc<AtomicBool>,
}

/// The Kubernetes client for `--kubeconfig`, or the in-cluster / default configuration.
/// kube's own retries of throttled calls are off: the applier retries them itself, after
/// checking that the decision still holds (crate::applier).
pub async fn client(opts: &SchedulerOptions) -> Result<Client, RunError> {
    let mut config = volcano_kube::config(opts.kubeconfig.as_deref()).await?;
    config.default_retry = false;
    Ok(Client::try_from(config).map_err(volcano_kube::ClientError::from)?)
}

fn identity(opts: &SchedulerOptions) -> String {
    if let Some(id) = &opts.identity {
        return id.clone();
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "volcano-rs".to_string());
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{:08x}", nanos ^ std::process::id())
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Starts one watch feeding the cache.
fn watch<K>(
    api: Api<K>,
    cache: Arc<Mutex<ClusterCache>>,
    apply: fn(&mut ClusterCache, Event<K>),
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    reflect(api, cache, apply, None)
}

/// A kind the API server may not serve (its CRD is optional) and an older RBAC may not let
/// the scheduler list. While listing it is refused with 404 or 403 the cache holds none of
/// it and counts it as listed (`unavailable`), so the scheduler syncs and schedules without
/// it; the watcher keeps trying with its back-off (at most 30 s apart), and its first
/// successful list brings the objects in, without a restart. Each refusal is logged once
/// per status code, and the first list that succeeds after one is logged too.
struct OptionalKind {
    /// The kind, in the log of the other watch errors.
    kind: &'static str,
    /// Tells the cache the kind is listed with none.
    unavailable: fn(&mut ClusterCache),
    /// Logged (info) when the list is refused with 404.
    not_served: &'static str,
    /// Logged (warning) with the error when the list is refused with 403.
    forbidden: &'static str,
    /// Logged (info) when a list succeeds after a refusal.
    served: &'static str,
}

/// HyperNodes (`topology.volcano.sh`): without them the scheduler has no network topology
/// ([`ClusterCache::hyper_nodes_unavailable`]).
static HYPER_NODES: OptionalKind = OptionalKind {
    kind: "HyperNode",
    unavailable: ClusterCache::hyper_nodes_unavailable,
    not_served: "HyperNodes are not served (the topology.volcano.sh CRD is not installed: \
                 deploy/crds/topology.volcano.sh_hypernodes.yaml); scheduling without a network \
                 topology, and watching for the CRD",
    forbidden: "the scheduler may not list HyperNodes (add the hypernodes rule of \
                deploy/rbac.yaml to its ClusterRole); scheduling without a network topology \
                until it may",
    served: "HyperNodes are served and readable now: the network topology is watched",
};

/// Starts one watch feeding the cache; for an [`OptionalKind`], a refused list counts as
/// listed with none.
fn reflect<K>(
    api: Api<K>,
    cache: Arc<Mutex<ClusterCache>>,
    apply: fn(&mut ClusterCache, Event<K>),
    optional: Option<&'static OptionalKind>,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    // Served from the API server's watch cache (`resourceVersion=0`), as client-go lists.
    let config = watcher::Config::default().any_semantic();
    tokio::spawn(async move {
        use kube::runtime::utils::Backoff;
        // The watcher is not polled while it waits, which is its back-off: after a failure
        // the next wait of a [`volcano_kube::WatchBackoff`] (an optional kind, whose CRD may
        // never be installed, is asked at most 30 s apart), reset by every event; after
        // `410 Gone`, only a relist jitter, since the watch itself worked.
        let mut backoff = match optional {
            Some(_) => volcano_kube::WatchBackoff::new().with_max(Duration::from_secs(30)),
            None => volcano_kube::WatchBackoff::new(),
        };
        let stream = watcher::watcher(api, config);
        futures::pin_mut!(stream);
        // The code of the refusal last said, so that a retry refused alike says nothing.
        let mut refused: Option<u16> = None;
        while let Some(event) = stream.next().await {
            let e = match event {
                Ok(e) => {
                    backoff.reset();
                    if let (Some(_), Some(o)) = (refused.take(), optional) {
                        tracing::info!("{}", o.served);
                    }
                    apply(&mut cache.lock().expect("cache lock"), e);
                    continue;
                }
                Err(e) => e,
            };
            let kind = optional.map_or_else(std::any::type_name::<K>, |o| o.kind);
            let wait = match optional.zip(unavailable(&e)) {
                Some((o, code)) => {
                    if refused.replace(code) != Some(code) {
                        if code == 404 {
                            tracing::info!("{}", o.not_served);
                        } else {
                            tracing::warn!("{}: {e}", o.forbidden);
                        }
                    }
                    (o.unavailable)(&mut cache.lock().expect("cache lock"));
                    backoff.next()
                }
                None if volcano_kube::is_gone(&e) => {
                    backoff.reset();
                    let wait = backoff.relist_jitter();
                    tracing::info!(kind = %kind, ?wait, "resource version too old (410): relisting");
                    Some(wait)
                }
                None => {
                    let wait = backoff.next();
                    tracing::warn!(kind = %kind, ?wait, "watch: {e}");
                    wait
                }
            };
            tokio::time::sleep(wait.unwrap_or(volcano_kube::WATCH_BACKOFF_MAX)).await;
        }
    })
}

/// Whether a watch error says the kind cannot be listed at all: not served (404, its CRD is
/// not installed) or forbidden (403, an RBAC without it).
fn unavailable(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => Some(s.code),
        _ => None,
    }
}

/// Starts the watches of the kinds the scheduler reads (Nodes, Pods, PodGroups, Queues,
/// PriorityClasses, Namespaces, PersistentVolumeClaims, PersistentVolumes, StorageClasses,
/// CSINodes, and Services, ReplicationControllers, ReplicaSets and StatefulSets, which the
/// cache strips to their name, namespace and selector as they arrive, and HyperNodes, which
/// may be absent: [`HYPER_NODES`]); abort the handles to stop them.
pub fn start_watches(client: &Client, cache: &Arc<Mutex<ClusterCache>>) -> Vec<tokio::task::JoinHandle<()>> {
    start_watches_observed(client, cache, None)
}

/// [`start_watches`], observing the `Watched` stage of the pods the watch adds.
pub fn start_watches_observed(
    client: &Client,
    cache: &Arc<Mutex<ClusterCache>>,
    watched: Option<crate::pods::WatchedStage>,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        watch(Api::<Node>::all(client.clone()), cache.clone(), ClusterCache::apply_node),
        crate::pods::reflect(client.clone(), cache.clone(), watched),
        watch(Api::<PodGroup>::all(client.clone()), cache.clone(), ClusterCache::apply_pod_group),
        watch(Api::<Queue>::all(client.clone()), cache.clone(), ClusterCache::apply_queue),
        watch(Api::<PriorityClass>::all(client.clone()), cache.clone(), ClusterCache::apply_priority_class),
        watch(Api::<Namespace>::all(client.clone()), cache.clone(), ClusterCache::apply_namespace),
        watch(Api::<PersistentVolumeClaim>::all(client.clone()), cache.clone(), ClusterCache::apply_pvc),
        watch(Api::<PersistentVolume>::all(client.clone()), cache.clone(), ClusterCache::apply_pv),
        watch(Api::<StorageClass>::all(client.clone()), cache.clone(), ClusterCache::apply_storage_class),
        watch(Api::<CSINode>::all(client.clone()), cache.clone(), ClusterCache::apply_csi_node),
        watch(Api::<Service>::all(client.clone()), cache.clone(), ClusterCache::apply_service),
        watch(
            Api::<ReplicationController>::all(client.clone()),
            cache.clone(),
            ClusterCache::apply_replication_controller,
        ),
        watch(Api::<ReplicaSet>::all(client.clone()), cache.clone(), ClusterCache::apply_replica_set),
        watch(Api::<StatefulSet>::all(client.clone()), cache.clone(), ClusterCache::apply_stateful_set),
        reflect(
            Api::<HyperNode>::all(client.clone()),
            cache.clone(),
            ClusterCache::apply_hyper_node,
            Some(&HYPER_NODES),
        ),
    ]
}

/// Creates queues `root` and the default queue when missing (Volcano's cache does, at start).
/// Returns whether both exist now: a failed create (for example while the admission webhook,
/// which refuses Queues it cannot check, is not up yet during an install) is tried again at
/// the next cycle, since nothing is scheduled into a queue that does not exist.
async fn ensure_queues(client: &Client, cache: &Arc<Mutex<ClusterCache>>, default_queue: &str) -> bool {
    let api: Api<Queue> = Api::all(client.clone());
    let mut ensured = true;
    for mut q in implicit::default_queues() {
        let name = q.metadata.name.clone().unwrap_or_default();
        let name = if name == volcano_api::names::DEFAULT_QUEUE { default_queue.to_string() } else { name };
        if cache.lock().expect("cache lock").queues.get(&name).is_some() {
            continue;
        }
        q.metadata.name = Some(name.clone());
        match api.create(&PostParams::default(), &q).await {
            Ok(created) => {
                tracing::info!(queue = %name, "created queue");
                // Known to the next cycle before the watch brings it: its jobs are not told
                // their queue does not exist in between.
                cache.lock().expect("cache lock").apply_queue(kube::runtime::watcher::Event::Apply(created));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                tracing::warn!(queue = %name, "cannot create queue (trying again next cycle): {e}");
                ensured = false;
            }
        }
    }
    ensured
}

/// Gives pending pods of this scheduler without a PodGroup one of their own, as Volcano's
/// PodGroup controller does: the PodGroup of [`implicit::pod_group_for_pod`] (owned by the
/// pod's controlling owner, or the pod), then the pod's `scheduling.k8s.io/group-name`
/// annotation.
async fn adopt_plain_pods(client: &Client, pods: Vec<Arc<SchedPod>>, default_queue: &str) {
    for pod in pods {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let mut pg = match implicit::pod_group_for_pod(&pod) {
            Ok(pg) => pg,
            Err(e) => {
                tracing::warn!(pod = %format!("{ns}/{pod_name}"), "no PodGroup made: {e}");
                continue;
            }
        };
        if pg.spec.queue.as_deref() == Some(volcano_api::names::DEFAULT_QUEUE) {
            pg.spec.queue = Some(default_queue.to_string());
        }
        pg.metadata.creation_timestamp = None;
        let owner = implicit::controlling_owner(&pod).cloned().unwrap_or_else(|| OwnerReference {
            api_version: "v1".into(),
            kind: "Pod".into(),
            name: pod_name.clone(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            controller: Some(true),
            ..Default::default()
        });
        pg.metadata.owner_references = Some(vec![OwnerReference { block_owner_deletion: None, ..owner }]);
        let pg_name = pg.metadata.name.clone().unwrap_or_default();
        let pgs: Api<PodGroup> = Api::namespaced(client.clone(), &ns);
        match pgs.create(&PostParams::default(), &pg).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                tracing::warn!(pod = %format!("{ns}/{pod_name}"), "cannot create PodGroup {pg_name}: {e}");
                continue;
            }
        }
        let patch = serde_json::json!({
            "metadata": {"uid": pod.metadata.uid, "annotations": {GROUP_NAME_ANNOTATION: pg_name}}
        });
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        if let Err(e) = api.patch(&pod_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            tracing::warn!(pod = %format!("{ns}/{pod_name}"), "cannot annotate the pod with its PodGroup: {e}");
        }
    }
}

/// Checks the command line and the configuration, then runs the scheduler until `shutdown`
/// resolves. `started` receives the handle once the caches are synced.
pub async fn run(
    opts: SchedulerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    started: Option<tokio::sync::oneshot::Sender<Handle>>,
) -> Result<(), RunError> {
    // Everything that can be checked before watching.
    opts.validate()?;
    let registries = volcano_builtin::registries();
    let mut profile = ProfileHolder::new(opts.scheduler_conf.clone(), &registries)?;
    let node_selector = opts.node_selector_labels()?;
    let metrics = Metrics::new();
    let ready = Arc::new(AtomicBool::new(false));
    let health = Health { ready: ready.clone(), metrics: metrics.clone() };
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut servers = Vec::new();
    let listen =
        (!opts.listen_address.is_empty()).then(|| parse_listen_address(&opts.listen_address).expect("validated"));
    let healthz =
        (!opts.healthz_address.is_empty()).then(|| parse_listen_address(&opts.healthz_address).expect("validated"));
    let mut endpoints: Vec<(SocketAddr, &'static str, bool, bool)> = Vec::new();
    match (listen, healthz) {
        (Some(l), Some(h)) if l == h => endpoints.push((l, "listen-address", true, true)),
        (l, h) => {
            if let Some(l) = l {
                endpoints.push((l, "listen-address", false, true));
            }
            if let Some(h) = h {
                endpoints.push((h, "healthz-address", true, false));
            }
        }
    }
    for (addr, flag, serve_health, serve_metrics) in endpoints {
        let listener = server::bind(addr).await.map_err(|source| RunError::Listen { flag, addr, source })?;
        let mut rx = stop_rx.clone();
        let router = server::router(health.clone(), serve_health, serve_metrics);
        servers.push(tokio::spawn(server::serve(listener, router, async move {
            let _ = rx.wait_for(|s| *s).await;
        })));
    }
    let client = client(&opts).await?;

    // Watches, then wait for the first lists.
    let cache = Arc::new(Mutex::new(ClusterCache::new(opts.scheduler_names.clone(), node_selector)));
    let watched =
        crate::pods::WatchedStage { metrics: metrics.volcano.clone(), scheduler_names: opts.scheduler_names.clone() };
    let watches = start_watches_observed(&client, &cache, Some(watched));
    let stop_watches = || watches.iter().for_each(|w| w.abort());
    let sync_start = Instant::now();
    while !cache.lock().expect("cache lock").synced() {
        if !opts.resource_sync_timeout.is_zero() && sync_start.elapsed() > opts.resource_sync_timeout {
            stop_watches();
            let _ = stop_tx.send(true);
            return Err(RunError::SyncTimeout(opts.resource_sync_timeout));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ready.store(true, Ordering::SeqCst);
    tracing::info!(elapsed = ?sync_start.elapsed(), "caches synced");

    // Leadership.
    let (leading_tx, leading_rx) = watch::channel(!opts.leader_elect);
    let identity = identity(&opts);
    let election = opts.leader_elect.then(|| {
        let cfg = LeaseConfig {
            namespace: opts.lease_namespace.clone(),
            name: opts.lease_name(),
            identity: identity.clone(),
            lease_duration: opts.lease_duration,
            renew_deadline: opts.renew_deadline,
            retry_period: opts.retry_period,
        };
        tokio::spawn(leader::run(client.clone(), cfg, leading_tx, stop_rx.clone()))
    });

    let applier = Applier::new(
        client.clone(),
        cache.clone(),
        ApplierConfig {
            bind_concurrency: opts.bind_concurrency,
            status_concurrency: opts.status_concurrency,
            qps: opts.kube_api_qps,
            burst: opts.kube_api_burst,
            reporter: opts.scheduler_names[0].clone(),
            instance: identity.clone(),
            ..Default::default()
        },
        leading_rx.clone(),
    );
    applier.set_metrics(metrics.volcano.clone());
    if let Some(tx) = started {
        let _ = tx.send(Handle {
            cache: cache.clone(),
            leading: leading_rx.clone(),
            metrics: metrics.clone(),
            ready: ready.clone(),
        });
    }

    let session_options = SessionOptions {
        parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        ..Default::default()
    };
    let mut shutdown = std::pin::pin!(shutdown);
    let mut cycle: u64 = 0;
    let mut queues_ensured = false;
    let mut adopting: Option<tokio::task::JoinHandle<()>> = None;
    let mut last_rejection: Option<String> = None;
    loop {
        let leading = *leading_rx.borrow();
        metrics.leader.set(i64::from(leading));
        if leading {
            match profile.reload(&registries) {
                Reload::Rejected(e) => {
                    let message = e.to_string();
                    if last_rejection.as_deref() != Some(message.as_str()) {
                        metrics.config_rejections.inc();
                        tracing::error!("scheduler configuration rejected, keeping the last good one: {message}");
                        last_rejection = Some(message);
                    }
                }
                Reload::Reloaded => last_rejection = None,
                Reload::Unchanged => {}
            }
            if !queues_ensured {
                queues_ensured = ensure_queues(&client, &cache, &opts.default_queue).await;
            }
            if adopting.as_ref().is_none_or(|h| h.is_finished()) {
                let orphans = cache.lock().expect("cache lock").pods_without_group();
                if !orphans.is_empty() {
                    let (c, q) = (client.clone(), opts.default_queue.clone());
                    adopting = Some(tokio::spawn(async move { adopt_plain_pods(&c, orphans, &q).await }));
                }
            }
            cycle += 1;
            let start = Instant::now();
            let mut timer = CycleTimer::start();
            let (snapshot, rebuilt, updated) = {
                let mut c = cache.lock().expect("cache lock");
                let before = (c.rebuilds(), c.updates());
                let s = c.snapshot();
                (s, c.rebuilds() != before.0, c.updates() != before.1)
            };
            let took_ms = start.elapsed().as_secs_f64() * 1000.0;
            metrics.snapshot_latency.observe(took_ms);
            if rebuilt {
                metrics.rebuilds.inc();
                metrics.rebuild_latency.observe(took_ms);
            } else if updated {
                metrics.updates.inc();
                metrics.update_latency.observe(took_ms);
            }
            match snapshot {
                Ok(snap) => {
                    let p = profile.current();
                    let now = now_ms();
                    let cx = CycleContext { cycle, now_ms: now, options: session_options.clone() };
                    let (outcome, t) = tokio::task::spawn_blocking(move || {
                        let outcome = run_cycle(snap, &p, &cx, &mut timer);
                        (outcome, timer)
                    })
                    .await
                    .expect("a cycle does not panic");
                    timer = t;
                    // The next cycle over the same snapshot skips the jobs this one could
                    // not place (the cache refuses a memory of another revision).
                    cache.lock().expect("cache lock").keep_retries(outcome.retries.clone());
                    metrics.volcano.record_cycle(&outcome, now);
                    log_cycle(cycle, &outcome, start.elapsed(), opts.schedule_period);
                    // The leader may have changed during the cycle: the applier checks it
                    // again before every call.
                    applier.apply(outcome.effects, now_time());
                }
                Err(e) => tracing::error!("cannot build the snapshot: {e}"),
            }
            metrics.volcano.observe_timer(&timer, start.elapsed());
            metrics.cycles.inc();
            let stats = applier.stats();
            metrics.binds.set(stats.binds.load(Ordering::Relaxed) as i64);
            metrics.bind_failures.set(stats.bind_failures.load(Ordering::Relaxed) as i64);
            metrics.evictions.set(stats.evictions.load(Ordering::Relaxed) as i64);
            metrics.status_writes.set(stats.status_writes.load(Ordering::Relaxed) as i64);
        }
        // A replica that does not lead starts its first cycle as soon as it leads.
        let mut became_leader = leading_rx.clone();
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep(opts.schedule_period) => {}
            _ = became_leader.wait_for(|l| *l), if !leading => {}
        }
    }

    tracing::info!("shutting down: finishing in-flight API calls");
    if !applier.flush(Duration::from_secs(5)).await {
        tracing::warn!(remaining = applier.in_flight(), "abandoned API calls still in flight");
    }
    let _ = stop_tx.send(true);
    stop_watches();
    if let Some(e) = election {
        let _ = e.await;
    }
    for s in servers {
        let _ = s.await;
    }
    Ok(())
}

/// One line per cycle that decided something (binds, evictions, nominations) or took
/// longer than the period, at `info`; the quiet cycles of a settled cluster at `debug`, so
/// that a 10,000-node cluster's log stays readable.
fn log_cycle(cycle: u64, outcome: &volcano_framework::CycleOutcome, took: Duration, period: Duration) {
    use volcano_framework::Effect;
    let (mut binds, mut evictions, mut pipelined, mut statuses) = (0usize, 0usize, 0usize, 0usize);
    for e in &outcome.effects {
        match e {
            Effect::Bind { .. } => binds += 1,
            Effect::Evict { .. } => evictions += 1,
            Effect::Pipeline { .. } => pipelined += 1,
            Effect::PodGroupStatus { .. } | Effect::QueueStatus { .. } | Effect::PodUnschedulable { .. } => {
                statuses += 1
            }
            Effect::Event(_) => {}
        }
    }
    let pending_jobs = outcome.pending_reasons.len();
    let skipped = outcome.metrics.skipped_tries;
    let took_ms = took.as_secs_f64() * 1000.0;
    if binds + evictions + pipelined > 0 || took > period {
        tracing::info!(cycle, took_ms, binds, evictions, pipelined, statuses, pending_jobs, skipped, "cycle");
    } else {
        tracing::debug!(cycle, took_ms, statuses, pending_jobs, skipped, "cycle");
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn termination() {
    volcano_kube::termination().await
}

#[cfg(test)]
mod tests {
    use kube::core::Status;
    use kube::runtime::watcher;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure("the server could not find the requested resource", "NotFound").with_code(code),
        ))
    }

    /// A list refused with 404 (no CRD) or 403 (no RBAC rule) means "no HyperNodes"; any
    /// other failure is a watch error like another kind's, retried without dropping them.
    #[test]
    fn only_a_refused_list_makes_hyper_nodes_unavailable() {
        assert_eq!(super::unavailable(&watcher::Error::InitialListFailed(api_error(404))), Some(404));
        assert_eq!(super::unavailable(&watcher::Error::InitialListFailed(api_error(403))), Some(403));
        assert_eq!(super::unavailable(&watcher::Error::InitialListFailed(api_error(500))), None);
        assert_eq!(super::unavailable(&watcher::Error::WatchStartFailed(api_error(404))), None);
        assert_eq!(super::unavailable(&watcher::Error::NoResourceVersion), None);
    }
}
