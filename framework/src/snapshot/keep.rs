//! A snapshot kept between cycles, and the keys of the objects that changed since: what
//! every shell that runs cycles over a changing cluster needs (the kube backend's cache, the
//! simulator's cluster), written once.
//!
//! A shell tells its [`KeptSnapshot`] the key of every pod, PodGroup, node and queue it
//! changes (a watch event, an effect applied, a status written), that the extras (Namespaces,
//! volume objects, Services, workloads' selectors) changed, or that it must rebuild (a
//! relist, a PriorityClass). [`KeptSnapshot::snapshot`] then returns the kept snapshot when
//! nothing changed, brings it up to date in place with [`Snapshot::update`] when the changes
//! allow it (in time proportional to them), and builds afresh from the shell's objects
//! otherwise ([`SnapshotSource`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::pod::SchedPod as Pod;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use volcano_api::crd::{PodGroup, Queue};

use super::{Changes, ClusterObjects, Extras, Snapshot, SnapshotError};

/// Where a [`KeptSnapshot`] reads the objects: the cluster as the next snapshot sees it.
pub trait SnapshotSource {
    /// Every object, for a build.
    fn objects(&self) -> ClusterObjects;
    /// The Namespaces, volume objects, Services and workloads alone (what [`Extras`] are
    /// made of).
    fn extra_objects(&self) -> ClusterObjects;
    /// The PriorityClasses.
    fn priority_classes(&self) -> Vec<Arc<PriorityClass>>;
    /// The pod with this key, if it exists.
    fn pod(&self, key: &str) -> Option<Arc<Pod>>;
    /// The PodGroup with this key, if it exists.
    fn pod_group(&self, key: &str) -> Option<Arc<PodGroup>>;
    /// The node with this name, if it exists and the scheduler considers it.
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    /// The queue with this name, if it exists.
    fn queue(&self, name: &str) -> Option<Arc<Queue>>;
}

/// What changed since the kept snapshot: keys by kind, or everything.
#[derive(Clone, Debug, Default)]
struct Pending {
    rebuild: bool,
    extras: bool,
    pods: BTreeSet<String>,
    pod_groups: BTreeSet<String>,
    nodes: BTreeSet<String>,
    queues: BTreeSet<String>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        !self.rebuild
            && self.pods.is_empty()
            && self.pod_groups.is_empty()
            && self.nodes.is_empty()
            && self.queues.is_empty()
    }

    fn len(&self) -> usize {
        self.pods.len() + self.pod_groups.len() + self.nodes.len() + self.queues.len()
    }
}

/// A snapshot kept between cycles (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct KeptSnapshot {
    kept: Option<Snapshot>,
    pending: Pending,
    rebuilds: u64,
    updates: u64,
}

impl KeptSnapshot {
    /// Nothing kept: the first snapshot is built.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps `snapshot`, built from the source as it is now (a shell that built one to
    /// check its input uses it for the first cycle).
    pub fn keep(&mut self, snapshot: Snapshot) {
        self.kept = Some(snapshot);
        self.pending = Pending::default();
    }

    /// The snapshot kept, if any (as of the last [`snapshot`](Self::snapshot)).
    pub fn kept(&self) -> Option<&Snapshot> {
        self.kept.as_ref()
    }

    /// The kept snapshot, mutably (to keep a cycle's retry memo in it).
    pub fn kept_mut(&mut self) -> Option<&mut Snapshot> {
        self.kept.as_mut()
    }

    /// The pod with this key changed, appeared or went.
    pub fn pod_changed(&mut self, key: &str) {
        if !self.pending.pods.contains(key) {
            self.pending.pods.insert(key.to_string());
        }
    }

    /// The PodGroup with this key changed, appeared or went.
    pub fn pod_group_changed(&mut self, key: &str) {
        if !self.pending.pod_groups.contains(key) {
            self.pending.pod_groups.insert(key.to_string());
        }
    }

    /// The node with this name changed, appeared or went.
    pub fn node_changed(&mut self, name: &str) {
        if !self.pending.nodes.contains(name) {
            self.pending.nodes.insert(name.to_string());
        }
    }

    /// The queue with this name changed, appeared or went.
    pub fn queue_changed(&mut self, name: &str) {
        if !self.pending.queues.contains(name) {
            self.pending.queues.insert(name.to_string());
        }
    }

    /// A Namespace, a volume object, a Service or a workload's selector changed: the next
    /// snapshot gets fresh [`Extras`] and keeps its tasks.
    pub fn extras_changed(&mut self) {
        self.pending.extras = true;
    }

    /// Whether the extras changed since the last snapshot.
    pub fn extras_pending(&self) -> bool {
        self.pending.extras
    }

    /// The next snapshot is built from scratch (a relist, a PriorityClass changed).
    pub fn rebuild(&mut self) {
        self.pending.rebuild = true;
    }

    /// How many snapshots were built since this was made.
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// How many snapshots were brought up to date in place since this was made.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The snapshot for the next cycle: the kept one when nothing changed, brought up to
    /// date in place when the changes allow it, else built from `source`; it is kept for
    /// the next call (a clone shares every task, job and node).
    pub fn snapshot(&mut self, source: &impl SnapshotSource, names: &[&str]) -> Result<Snapshot, SnapshotError> {
        let pending = std::mem::take(&mut self.pending);
        let kept = match self.kept.take() {
            Some(mut kept) if pending.is_empty() => {
                if pending.extras {
                    kept.set_extras(Arc::new(Extras::from_objects(&source.extra_objects())));
                }
                Some(kept)
            }
            // Many changes are cheaper to rebuild (on every core) than to apply one by one:
            // the two meet near a sixteenth of the tasks.
            Some(kept) if !pending.rebuild && pending.len() <= kept.tasks.len() / 16 + 64 => {
                let start = std::time::Instant::now();
                let changes = changes(source, &pending);
                let gathered = start.elapsed();
                let mut updated = kept;
                if pending.extras {
                    updated.set_extras(Arc::new(Extras::from_objects(&source.extra_objects())));
                }
                let result = updated.update(&changes, &source.priority_classes(), names);
                tracing::debug!(
                    changed = pending.len(),
                    gathered_ms = gathered.as_secs_f64() * 1e3,
                    total_ms = start.elapsed().as_secs_f64() * 1e3,
                    applied = matches!(result, Ok(true)),
                    "snapshot update"
                );
                match result {
                    Ok(true) => {
                        self.updates += 1;
                        Some(updated)
                    }
                    Ok(false) | Err(_) => None,
                }
            }
            _ => None,
        };
        let snap = match kept {
            Some(s) => s,
            None => {
                self.rebuilds += 1;
                match Snapshot::build(&source.objects(), names) {
                    Ok(s) => s,
                    Err(e) => {
                        // Nothing kept: the next call builds again.
                        self.pending.rebuild = true;
                        return Err(e);
                    }
                }
            }
        };
        self.kept = Some(snap.clone());
        Ok(snap)
    }
}

/// The changed objects, as the next snapshot sees them.
fn changes(source: &impl SnapshotSource, pending: &Pending) -> Changes {
    Changes {
        pods: pending.pods.iter().map(|k| (k.clone(), source.pod(k))).collect(),
        pod_groups: pending.pod_groups.iter().map(|k| (k.clone(), source.pod_group(k))).collect(),
        nodes: pending.nodes.iter().map(|k| (k.clone(), source.node(k))).collect(),
        queues: pending.queues.iter().map(|k| (k.clone(), source.queue(k))).collect(),
    }
}
