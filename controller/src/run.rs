//! `volcano-rs controller`: the Job and Queue controller process.
//!
//! Everything the command line can get wrong is checked and the listeners (`/metrics` on
//! `--listen-address`, `/healthz` and `/readyz` on `--healthz-address`, one listener when
//! they are the same) are bound before anything is watched. With `--leader-elect` (the default), the replica holding the
//! Lease runs the controllers (a kube-runtime `Controller` on Jobs, owning Pods and
//! PodGroups, watching Commands, reading PriorityClasses; another on Queues, triggered by
//! the PodGroups and Commands of each queue; the TrainingJob and HyperNode controllers once
//! their CRDs are served) and records their events; the others wait, and
//! a replica that loses the Lease stops its controllers. On shutdown the controllers stop
//! and the Lease is released.
//!
//! The reconcilers update one [`ControllerMetrics`]; the watches of Jobs and Queues remove
//! the series of the ones deleted (and what the reconcilers remember of them), the Jobs
//! seen being kept from one leadership to the next. A replica that stops leading drops its
//! queue gauges, which only the leader keeps up to date.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder as KubeRecorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{predicates, watcher, WatchStreamExt};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tokio::sync::watch;
use volcano_api::bus::Command;
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::Job;
use volcano_kube::leader::{self, LeaseConfig};
use volcano_metrics::ControllerMetrics;

use crate::deletions::Deletions;
use crate::events::{self, JOB_NAME_KEY};
pub use crate::options::{ControllerOptions, OptionsError};
use crate::queue_reconcile::{self, queue_error_policy, reconcile_queue, QueueContext};
use crate::reconcile::{error_policy, reconcile, Context};
use crate::recorder::{Recorder, RecorderConfig};

/// Why the controller did not start.
#[derive(Debug, Error)]
pub enum ControllerError {
    /// A flag is wrong.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The kubeconfig or in-cluster configuration cannot be used.
    #[error("cannot configure the Kubernetes client: {0}")]
    Client(#[from] volcano_kube::ClientError),
    /// A listener cannot be bound.
    #[error("cannot listen on {addr} (--{flag}): {source}")]
    Listen {
        /// The flag that gave the address.
        flag: &'static str,
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ControllerError {
    /// A bounded label for logs, saying what the user fixes: a flag (`flag`), the client
    /// configuration (its [`volcano_kube::ClientError::category`]) or a listening address
    /// (`listen`).
    pub fn category(&self) -> &'static str {
        match self {
            ControllerError::Options(_) => "flag",
            ControllerError::Client(e) => e.category(),
            ControllerError::Listen { .. } => "listen",
        }
    }
}

fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|s| s.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "volcano-rs-controller".to_string());
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{host}_{:08x}", nanos ^ std::process::id())
}

/// Checks the command line, then runs the controller until `shutdown` resolves.
pub async fn run(
    opts: ControllerOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ControllerError> {
    run_with_metrics(opts, ControllerMetrics::new(), shutdown).await
}

/// [`run`], updating and serving `metrics` (the process metrics are added to them).
pub async fn run_with_metrics(
    opts: ControllerOptions,
    metrics: ControllerMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ControllerError> {
    opts.validate()?;
    metrics.register_process_metrics();
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut listeners = Vec::new();
    for e in crate::server::endpoints(opts.listen()?, opts.healthz()?) {
        let (addr, flag) = (e.addr, e.flag);
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| ControllerError::Listen {
            flag,
            addr,
            source,
        })?;
        listeners.push((listener, crate::server::router(&e, metrics.clone())));
    }
    let mut servers = Vec::new();
    for (listener, router) in listeners {
        let mut rx = stop_rx.clone();
        servers.push(tokio::spawn(async move {
            let stop = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            if let Err(e) = axum::serve(listener, router).with_graceful_shutdown(stop).await {
                tracing::error!("http server: {e}");
            }
        }));
    }
    let client = volcano_kube::client(opts.kubeconfig.as_deref()).await?;

    let (leading_tx, leading_rx) = watch::channel(!opts.leader_elect);
    let identity = identity();
    let election = opts.leader_elect.then(|| {
        let cfg = LeaseConfig {
            namespace: opts.leader_elect_resource_namespace.clone(),
            name: opts.leader_elect_resource_name.clone(),
            identity: identity.clone(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        };
        tokio::spawn(leader::run(client.clone(), cfg, leading_tx.clone(), stop_rx.clone()))
    });
    // Kept until the end: a closed channel would end every `wait_for` on it at once (with
    // `--leader-elect=false`, the controllers would stop as soon as they started).
    let _leading_tx = leading_tx;
    tokio::spawn({
        let stop_tx = stop_tx.clone();
        async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        }
    });

    // Job events (volcano-rs-controller, this replica), sent only while leading.
    let recorder =
        Recorder::new(client.clone(), RecorderConfig { instance: identity, ..Default::default() }, leading_rx.clone());

    // The Jobs seen, kept from one leadership to the next: a job deleted while this replica
    // did not lead is noticed at the next first list, and its counters go.
    let seen_jobs = Arc::new(Mutex::new(Deletions::default()));
    let mut stop = stop_rx.clone();
    loop {
        let mut leading = leading_rx.clone();
        tokio::select! {
            _ = leading.wait_for(|l| *l) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if *stop.borrow() {
            break;
        }
        tracing::info!("leading: the job controller starts");
        let (mut l, mut s) = (leading_rx.clone(), stop_rx.clone());
        let until = async move {
            tokio::select! {
                _ = l.wait_for(|l| !*l) => {}
                _ = s.wait_for(|s| *s) => {}
            }
        };
        let kept = Kept { metrics: metrics.clone(), seen_jobs: seen_jobs.clone() };
        controller(&client, &opts, leading_rx.clone(), recorder.clone(), kept, until).await;
        // The next leader counts the queues' PodGroups: stale gauges here would add to its.
        metrics.forget_queues();
        tracing::info!("the job controller stopped");
    }
    let _ = stop_tx.send(true);
    if let Some(e) = election {
        let _ = e.await;
    }
    for s in servers {
        let _ = s.await;
    }
    Ok(())
}

/// What outlives one run of the controllers.
struct Kept {
    /// The metrics the reconcilers update.
    metrics: ControllerMetrics,
    /// The Jobs seen (key → queue), to remove the series of the deleted ones.
    seen_jobs: Arc<Mutex<Deletions<String>>>,
}

/// Runs the kube-runtime controllers (Jobs, Queues) until `until` resolves.
async fn controller(
    client: &Client,
    opts: &ControllerOptions,
    leading: watch::Receiver<bool>,
    recorder: Recorder,
    kept: Kept,
    until: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let Kept { metrics, seen_jobs } = kept;
    let cfg = || watcher::Config::default().any_semantic();
    // PodGroup and Command events also reconcile the queues they concern.
    let (queue_tx, queue_rx) = futures::channel::mpsc::unbounded::<ObjectRef<Queue>>();
    let (pods, pods_w) = reflector::store::<Pod>();
    let pod_stream =
        reflector::reflector(pods_w, watcher::watcher(Api::<Pod>::all(client.clone()), cfg().labels(JOB_NAME_KEY)))
            .backoff(volcano_kube::WatchBackoff::new())
            .touched_objects();
    let (groups, groups_w) = reflector::store::<PodGroup>();
    let group_tx = queue_tx.clone();
    let mut group_queues = HashMap::new();
    let group_stream = reflector::reflector(groups_w, watcher::watcher(Api::<PodGroup>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .inspect_ok(move |ev| {
            for r in queue_reconcile::pod_group_triggers(&mut group_queues, ev) {
                let _ = group_tx.unbounded_send(r);
            }
        })
        .touched_objects();
    let (commands, commands_w) = reflector::store::<Command>();
    let command_tx = queue_tx.clone();
    let command_stream = reflector::reflector(commands_w, watcher::watcher(Api::<Command>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .applied_objects()
        .inspect_ok(move |cmd| {
            if let Some(r) = queue_reconcile::command_trigger(cmd) {
                let _ = command_tx.unbounded_send(r);
            }
        });
    let (queues, queues_w) = reflector::store::<Queue>();

    let until = until.shared();
    let until_for_training = until.clone();
    let until_for_hypernodes = until.clone();
    let (leading_for_training, recorder_for_training) = (leading.clone(), recorder.clone());
    // PriorityClasses: only read (the order of the tasks in minResources), never a trigger.
    let (priority_classes, pcs_w) = reflector::store::<PriorityClass>();
    let pcs = reflector::reflector(pcs_w, watcher::watcher(Api::<PriorityClass>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .for_each(|_| async {});
    let pcs = tokio::spawn(pcs);

    // One waiter per store (see `Context::with_synced`); the controllers' own stores (Jobs,
    // Queues) are waited for by kube-runtime before their first reconcile.
    let (synced_tx, synced) = watch::channel(false);
    let synced_task = tokio::spawn({
        let (p, g, c, pc) = (pods.clone(), groups.clone(), commands.clone(), priority_classes.clone());
        async move {
            let _ = p.wait_until_ready().await;
            let _ = g.wait_until_ready().await;
            let _ = c.wait_until_ready().await;
            let _ = pc.wait_until_ready().await;
            let _ = synced_tx.send(true);
        }
    });

    let until = until.shared();
    let autoscaler_caches = (pods.clone(), groups.clone(), priority_classes.clone(), recorder.clone());
    let autoscaler_synced = synced.clone();
    let ctx = Arc::new(
        Context::new(
            client.clone(),
            pods,
            groups.clone(),
            commands.clone(),
            priority_classes,
            opts.scheduler_name.clone(),
            leading.clone(),
        )
        .with_recorder(recorder)
        .with_max_requeue_num(opts.max_requeue_num)
        .with_synced(synced.clone())
        .with_metrics(metrics.clone()),
    );
    let reporter = Reporter { controller: crate::recorder::REPORTER.into(), instance: Some(identity()) };
    let queue_ctx = Arc::new(
        QueueContext::new(
            client.clone(),
            (queues.clone(), groups, commands),
            leading,
            synced,
            queue_tx,
            KubeRecorder::new(client.clone(), reporter),
        )
        .with_metrics(metrics),
    );

    // The Jobs and Queues: a deleted one's series go, with what its reconciles remember.
    let (jobs, jobs_w) = reflector::store::<Job>();
    let jobs_cache = jobs.clone();
    let job_ctx = ctx.clone();
    let job_stream = reflector::reflector(jobs_w, watcher::watcher(Api::<Job>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .inspect_ok(move |ev| {
            let key = |j: &Job| {
                (
                    events::job_key(&j.namespace().unwrap_or_default(), &j.name_any()),
                    j.spec.queue.clone().unwrap_or_default(),
                )
            };
            let deleted = seen_jobs.lock().expect("seen jobs lock").follow(ev, key);
            for (job, queue) in deleted {
                job_ctx.metrics().forget_job(&job, &queue);
                job_ctx.forget(&job);
            }
        })
        .applied_objects();
    let mut deleted_queues = Deletions::default();
    let deleted_queue_ctx = queue_ctx.clone();
    let queue_stream = reflector::reflector(queues_w, watcher::watcher(Api::<Queue>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .inspect_ok(move |ev| {
            for (queue, ()) in deleted_queues.follow(ev, |q: &Queue| (q.name_any(), ())) {
                deleted_queue_ctx.metrics().forget_queue(&queue);
                deleted_queue_ctx.forget(&queue);
            }
        })
        .applied_objects()
        .predicate_filter(predicates::generation, Default::default());

    let jobs = Controller::for_stream(job_stream, jobs)
        .with_config(ControllerConfig::default().concurrency(opts.worker_threads))
        .owns_stream(pod_stream)
        .owns_stream(group_stream)
        .watches_stream(command_stream, |cmd: Command| {
            let ns = cmd.metadata.namespace.clone();
            cmd.target.filter(|t| t.kind == "Job").map(|t| {
                let r = ObjectRef::<Job>::new(&t.name);
                match ns {
                    Some(ns) => r.within(&ns),
                    None => r,
                }
            })
        })
        .graceful_shutdown_on(until.clone())
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("job controller: {e}");
            }
        });
    // The elastic autoscaler, on the same caches (docs/jobs.md).
    let autoscaler = {
        let (pods, pod_groups, priority_classes, recorder) = autoscaler_caches;
        let caches = crate::autoscaler::Caches {
            jobs: jobs_cache,
            pod_groups,
            queues: queues.clone(),
            pods,
            priority_classes,
            synced: autoscaler_synced,
        };
        crate::autoscaler::run(
            client.clone(),
            caches,
            opts.autoscale_settings(),
            Duration::from_secs(opts.autoscale_period_seconds),
            recorder,
            until.clone(),
        )
    };
    let queue_controller = Controller::for_stream(queue_stream, queues)
        .with_config(ControllerConfig::default().concurrency(opts.worker_threads))
        .reconcile_on(queue_rx)
        .graceful_shutdown_on(until)
        .run(reconcile_queue, queue_error_policy, queue_ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("queue controller: {e}");
            }
        });
    let hypernodes = crate::hypernode_reconcile::run(
        client.clone(),
        opts.hypernode_config_map(),
        KubeRecorder::new(
            client.clone(),
            Reporter { controller: crate::recorder::REPORTER.into(), instance: Some(identity()) },
        ),
        until_for_hypernodes,
    );
    let training = training_controller(client, opts, leading_for_training, recorder_for_training, until_for_training);
    futures::join!(jobs, queue_controller, autoscaler, training, hypernodes);
    pcs.abort();
    synced_task.abort();
}

/// Runs the TrainingJob controller (et-operator's TrainingJob, ScaleOut and ScaleIn) until
/// `until` resolves, when the API server serves them; otherwise says so once and returns.
async fn training_controller(
    client: &Client,
    opts: &ControllerOptions,
    leading: watch::Receiver<bool>,
    recorder: Recorder,
    until: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    use crate::training_reconcile::{reconcile_training, served, training_error_policy, TrainingContext};
    use volcano_api::et::{ScaleIn, ScaleOut, TrainingJob};
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    // Asked again every minute while not served, so CRDs installed later are picked up
    // without a restart.
    loop {
        match served(client).await {
            Ok(true) => break,
            Ok(false) => {
                if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::info!(
                        "TrainingJobs are not served: the kai.alibabacloud.com CRDs are not installed (deploy/crds/kai.alibabacloud.com_*.yaml); the TrainingJob controller starts once they are (checked every minute)"
                    );
                }
            }
            Err(e) => {
                tracing::warn!("TrainingJobs not served: API discovery of kai.alibabacloud.com/v1alpha1 failed (trying again in a minute): {e}");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = until.clone() => return,
        }
    }
    let cfg = || watcher::Config::default().any_semantic();
    let (pods, pods_w) = reflector::store::<Pod>();
    let pod_stream = reflector::reflector(
        pods_w,
        watcher::watcher(Api::<Pod>::all(client.clone()), cfg().labels(crate::training::objects::JOB_NAME_LABEL)),
    )
    .backoff(volcano_kube::WatchBackoff::new())
    .touched_objects();
    let (outs, outs_w) = reflector::store::<ScaleOut>();
    let out_stream = reflector::reflector(outs_w, watcher::watcher(Api::<ScaleOut>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .touched_objects();
    let (ins, ins_w) = reflector::store::<ScaleIn>();
    let in_stream = reflector::reflector(ins_w, watcher::watcher(Api::<ScaleIn>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .touched_objects();
    let (synced_tx, synced) = watch::channel(false);
    let synced_task = tokio::spawn({
        let (p, o, i) = (pods.clone(), outs.clone(), ins.clone());
        async move {
            let _ = p.wait_until_ready().await;
            let _ = o.wait_until_ready().await;
            let _ = i.wait_until_ready().await;
            let _ = synced_tx.send(true);
        }
    });
    let ctx = Arc::new(
        TrainingContext::new(client.clone(), pods, outs, ins, opts.scheduler_name.clone(), leading)
            .with_recorder(recorder)
            .with_synced(synced),
    );
    fn job_of(ns: Option<String>, selector: &str) -> Option<ObjectRef<TrainingJob>> {
        let ns = ns?;
        (!selector.is_empty()).then(|| ObjectRef::<TrainingJob>::new(selector).within(&ns))
    }
    // A deleted job's remembered resize state goes with it.
    let (jobs, jobs_w) = reflector::store::<TrainingJob>();
    let mut seen = Deletions::default();
    let forget = ctx.clone();
    let job_stream = reflector::reflector(jobs_w, watcher::watcher(Api::<TrainingJob>::all(client.clone()), cfg()))
        .backoff(volcano_kube::WatchBackoff::new())
        .inspect_ok(move |ev| {
            let key = |j: &TrainingJob| (format!("{}/{}", j.namespace().unwrap_or_default(), j.name_any()), ());
            for (job, ()) in seen.follow(ev, key) {
                forget.forget(&job);
            }
        })
        .applied_objects();
    tracing::info!("the TrainingJob controller starts");
    Controller::for_stream(job_stream, jobs)
        .with_config(ControllerConfig::default().concurrency(opts.worker_threads))
        .owns_stream(pod_stream)
        .watches_stream(out_stream, |r: ScaleOut| job_of(r.metadata.namespace, &r.spec.selector.name))
        .watches_stream(in_stream, |r: ScaleIn| job_of(r.metadata.namespace, &r.spec.selector.name))
        .graceful_shutdown_on(until)
        .run(reconcile_training, training_error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!("trainingjob controller: {e}");
            }
        })
        .await;
    synced_task.abort();
}
