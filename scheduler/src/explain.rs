//! `volcano-rs explain` on a cluster: the scheduler's own caches filled from the API server
//! (the same watches, the same snapshot a running scheduler takes), one cycle run in memory
//! with the given configuration, and what it saw of one job. Nothing is written to the
//! cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Client;
use volcano_framework::explain::{explain as explain_in_session, resolve};
use volcano_framework::{CycleContext, Explanation, Profile, SessionOptions};

use crate::cache::ClusterCache;
use crate::run::{start_watches, RunError};

/// What [`explain`] found.
#[derive(Debug)]
pub enum Explained {
    /// The job's explanation.
    Job(Box<Explanation>),
    /// No PodGroup, and no Volcano Job's PodGroup, has that name.
    NotFound,
}

/// Explains the job `name` (`namespace/name` of a PodGroup or of a Volcano Job) as the next
/// cycle of a scheduler serving `scheduler_names` over the nodes `node_selector` keeps (its
/// `--node-selector`, label → accepted values; empty: every node) with `profile` would see it.
pub async fn explain(
    client: &Client,
    scheduler_names: Vec<String>,
    node_selector: BTreeMap<String, Vec<String>>,
    profile: Arc<Profile>,
    name: &str,
    sync_timeout: Duration,
) -> Result<Explained, RunError> {
    let cache = Arc::new(Mutex::new(ClusterCache::new(scheduler_names, node_selector)));
    let watches = start_watches(client, &cache);
    let started = Instant::now();
    let synced = loop {
        if cache.lock().expect("cache lock").synced() {
            break true;
        }
        if started.elapsed() > sync_timeout {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let snapshot = synced.then(|| cache.lock().expect("cache lock").snapshot());
    watches.iter().for_each(|w| w.abort());
    let Some(snapshot) = snapshot else { return Err(RunError::SyncTimeout(sync_timeout)) };
    let snap = snapshot?;
    let Some(key) = resolve(&snap, name) else { return Ok(Explained::NotFound) };
    let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let cx = CycleContext {
        cycle: 1,
        now_ms,
        options: SessionOptions {
            parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ..Default::default()
        },
    };
    let found = tokio::task::spawn_blocking(move || explain_in_session(snap, &profile, &cx, &key).map(|(e, _)| e))
        .await
        .expect("a cycle does not panic");
    Ok(found.map_or(Explained::NotFound, |e| Explained::Job(Box::new(e))))
}
