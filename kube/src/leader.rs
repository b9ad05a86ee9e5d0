//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leader election does
//! it (Volcano uses client-go's): only the holder schedules.
//!
//! - A replica takes the Lease when it does not exist, when it is released (no holder), or
//!   when its holder has not renewed it for `lease_duration` as observed **by this replica's
//!   clock** since the record last changed (so clock skew between machines does not matter).
//! - The holder renews every `retry_period`. Every write is a compare-and-swap on the Lease's
//!   resourceVersion, so two replicas never both believe they won the same round.
//! - A holder that has not renewed successfully for `renew_deadline` stops leading (its
//!   `leading` flag turns false, which stops the cycles and every API write of the applier)
//!   before `lease_duration` has passed, i.e. before any other replica can take the Lease:
//!   two replicas never schedule at once.
//! - On shutdown the holder releases the Lease (empty holder), so another replica takes
//!   over at its next retry instead of waiting out the lease.
//!
//! The maintained Rust crates for this target other kube versions; this module is small and
//! uses only `kube`'s Lease API.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::watch;

/// Where the Lease is and how it is held.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (`spec.holderIdentity`).
    pub identity: String,
    /// How long a Lease is valid without renewal.
    pub lease_duration: Duration,
    /// Stop leading when no renewal succeeded for this long.
    pub renew_deadline: Duration,
    /// Time between attempts.
    pub retry_period: Duration,
}

/// What one attempt found.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the Lease (acquired or renewed).
    Held,
    /// Another replica holds it.
    Other(String),
}

struct Observed {
    /// The record as last read (holder, renew time, transitions).
    record: Option<(String, Option<MicroTime>, i32)>,
    /// When this replica saw the record change.
    at: Instant,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Runs the election until `shutdown` turns true, publishing whether this replica leads on
/// `leading`; releases the Lease on the way out if it held it.
pub async fn run(client: Client, cfg: LeaseConfig, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    let mut observed = Observed { record: None, at: Instant::now() };
    let mut last_renew: Option<Instant> = None;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let attempt = tokio::time::timeout(
            cfg.retry_period.max(Duration::from_millis(100)),
            try_acquire(&api, &cfg, &mut observed),
        )
        .await;
        match attempt {
            Ok(Ok(Attempt::Held)) => {
                last_renew = Some(Instant::now());
                if !*leading.borrow() {
                    tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), identity = %cfg.identity, "became the leader");
                    leading.send_replace(true);
                }
            }
            Ok(Ok(Attempt::Other(holder))) => {
                if *leading.borrow() {
                    tracing::warn!(holder = %holder, "lost the lease to another replica: stopped scheduling");
                    leading.send_replace(false);
                }
                last_renew = None;
            }
            Ok(Err(e)) => tracing::warn!("leader election: {e}"),
            Err(_) => tracing::warn!("leader election: the API server did not answer in time"),
        }
        if *leading.borrow() && last_renew.is_none_or(|t| t.elapsed() >= cfg.renew_deadline) {
            tracing::error!(deadline = ?cfg.renew_deadline, "could not renew the lease in time: stopped scheduling");
            leading.send_replace(false);
        }
        tokio::select! {
            _ = tokio::time::sleep(cfg.retry_period) => {}
            _ = shutdown.changed() => {}
        }
    }
    if *leading.borrow() {
        leading.send_replace(false);
        if let Err(e) = release(&api, &cfg).await {
            tracing::warn!("could not release the lease: {e}");
        } else {
            tracing::info!("released the lease");
        }
    }
}

async fn try_acquire(api: &Api<Lease>, cfg: &LeaseConfig, observed: &mut Observed) -> Result<Attempt, kube::Error> {
    let duration_s = cfg.lease_duration.as_secs().max(1) as i32;
    let Some(lease) = api.get_opt(&cfg.name).await? else {
        let lease = Lease {
            metadata: ObjectMeta { name: Some(cfg.name.clone()), ..Default::default() },
            spec: Some(LeaseSpec {
                holder_identity: Some(cfg.identity.clone()),
                lease_duration_seconds: Some(duration_s),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Attempt::Held),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Other("(created concurrently)".into())),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().unwrap_or_default();
    let record = (holder.clone(), spec.renew_time.clone(), spec.lease_transitions.unwrap_or(0));
    if observed.record.as_ref() != Some(&record) {
        observed.record = Some(record);
        observed.at = Instant::now();
    }
    let held_by_me = holder == cfg.identity;
    let observed_duration =
        spec.lease_duration_seconds.map_or(cfg.lease_duration, |s| Duration::from_secs(s.max(0) as u64));
    let expired = observed.at.elapsed() >= observed_duration;
    if !held_by_me && !holder.is_empty() && !expired {
        return Ok(Attempt::Other(holder));
    }
    let mut new = lease.clone();
    let s = new.spec.get_or_insert_with(LeaseSpec::default);
    if !held_by_me {
        s.acquire_time = Some(now());
        s.lease_transitions = Some(s.lease_transitions.unwrap_or(0) + 1);
    }
    s.holder_identity = Some(cfg.identity.clone());
    s.lease_duration_seconds = Some(duration_s);
    s.renew_time = Some(now());
    // `replace` carries the resourceVersion read above: a concurrent writer makes it fail.
    match api.replace(&cfg.name, &PostParams::default(), &new).await {
        Ok(_) => Ok(Attempt::Held),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Other("(updated concurrently)".into())),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<(), kube::Error> {
    let Some(mut lease) = api.get_opt(&cfg.name).await? else { return Ok(()) };
    let s = lease.spec.get_or_insert_with(LeaseSpec::default);
    if s.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return Ok(());
    }
    s.holder_identity = None;
    s.lease_duration_seconds = Some(1);
    s.renew_time = Some(now());
    api.replace(&cfg.name, &PostParams::default(), &lease).await.map(|_| ())
}
