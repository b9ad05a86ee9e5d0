//! The scheduler's cache: the cluster as the watches report it, plus what the scheduler
//! has done and the API server has not confirmed yet, turned into a [`Snapshot`] for each
//! cycle.
//!
//! **Stores.** One [`Store`] per kind (Nodes, Pods, PodGroups, Queues, PriorityClasses,
//! and the objects read but not scheduled: Namespaces, PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses, CSINodes, and the Services, ReplicationControllers,
//! ReplicaSets and StatefulSets whose selectors make the system-default topology spread
//! constraints, and the HyperNodes of the network topology) takes the watch events of `kube-runtime`'s watcher: `Apply` and `Delete`
//! change one object; a (re)list (`Init`, `InitApply`…, `InitDone`) fills a new map that
//! replaces the old one when it is complete, so a relist after a watch error never shows a
//! half cluster. Services and the three workload kinds are stripped on the way in to their
//! name, namespace and `spec.selector` ([`strip_service`] and its siblings), and an update
//! that leaves the stripped object as it was (a ReplicaSet's status, say) changes nothing.
//! An object the API server would not have admitted (see `volcano_api::validation`) is left
//! out with a warning naming the object and the field, rather than stopping every cycle.
//! HyperNodes are optional: while the API server does not serve them (the CRD is not
//! installed) or the scheduler may not list them, the kind counts as listed with none
//! ([`ClusterCache::hyper_nodes_unavailable`]), and HyperNodes are cached as usual once a
//! list succeeds (`run::start_watches`). A HyperNode is kept without its `managedFields`
//! and `resourceVersion` ([`strip_hyper_node`]), so that a write that changes nothing else
//! changes nothing.
//!
//! **Assumptions.** A pod the scheduler bound counts on its node from the moment the cycle
//! decides it (`assume_bound`), before the bind is even sent, until the watch shows the pod
//! with a node (or gone); a failed bind forgets it (`forget`) and the pod is pending again
//! for the next cycle. A pod being evicted counts as Releasing until the watch shows its
//! deletion. So a pod is never on two nodes and never pending while its bind is in flight:
//! the next cycle cannot place it twice.
//!
//! **Status writes** (PodGroup status, Queue `status.allocated`, pod conditions, nominated
//! nodes) are applied to the cached objects when the cycle emits them (`set_*`), so the next
//! cycle does not emit them again while the write is in flight; a write that fails puts the
//! previous object back (`revert_*`) if nothing newer arrived meanwhile.
//!
//! **Snapshots.** The cache keeps the last snapshot and the keys of the objects that changed
//! since (watch events, assumptions, status writes). [`ClusterCache::snapshot`] returns a
//! clone of the kept snapshot, which shares every task, job and node (copy-on-write
//! storage), after bringing it up to date with [`Snapshot::update`] — in time proportional
//! to the changes, pods and PodGroups that come and go included — or, when the update
//! cannot give what a build would (a node or queue added or removed, a relist, a
//! PriorityClass changed, or more changes than a rebuild costs), by rebuilding it from the
//! stores. An idle cycle on a large cluster therefore costs neither, and a busy one pays
//! for what changed. A change of a Namespace, a volume object, a Service, a workload's
//! selector or a HyperNode gives the next snapshot fresh [`Extras`](volcano_framework::Extras) (built from those stores alone) and
//! leaves its tasks alone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodStatus, ReplicationController,
    ReplicationControllerSpec, Service, ServiceSpec,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::watcher::Event;
use volcano_api::crd::{PodGroup, PodGroupStatus, Queue, QueueStatus, ResourceList, GROUP_NAME_ANNOTATION};
use volcano_api::topology::HyperNode;
use volcano_api::validation::{self, Check};
use volcano_framework::pod::{SchedPod, SpecInterner};
use volcano_framework::snapshot::{KeptSnapshot, SnapshotSource};
use volcano_framework::{ClusterObjects, ObjectRef, PodScheduledFalse, Snapshot, SnapshotError};

/// A kind the cache holds.
pub trait CachedKind: kube::Resource + Clone + Send + Sync + 'static {
    /// The kind, for messages.
    const KIND: &'static str;
    /// What the store keeps of an object: the object itself, or for pods a [`SchedPod`]
    /// whose spec is shared with the pods of equal spec.
    type Kept: std::fmt::Debug + Send + Sync + 'static;
    /// What the store keeps objects with (for pods, the interner of their specs).
    type Keeper: Default + std::fmt::Debug + Send + Sync;
    /// Whether the API server (and Volcano's webhooks) would admit the object.
    fn check(&self) -> Check;
    /// What the store keeps of the object.
    fn keep(self, keeper: &mut Self::Keeper) -> Self::Kept;
}

/// A kind kept as it is.
macro_rules! kept_as_is {
    ($($kind:ident => $check:path),* $(,)?) => {$(
        impl CachedKind for $kind {
            const KIND: &'static str = stringify!($kind);
            type Kept = $kind;
            type Keeper = ();
            fn check(&self) -> Check {
                $check(self)
            }
            fn keep(self, _: &mut ()) -> $kind {
                self
            }
        }
    )*};
}

kept_as_is! {
    Node => validation::node,
    PodGroup => validation::pod_group,
    Queue => validation::queue,
    PriorityClass => validation::priority_class,
    Namespace => validation::namespace,
    PersistentVolumeClaim => validation::persistent_volume_claim,
    PersistentVolume => validation::persistent_volume,
    StorageClass => validation::storage_class,
    CSINode => validation::csi_node,
    Service => validation::service,
    ReplicationController => validation::replication_controller,
    ReplicaSet => validation::replica_set,
    StatefulSet => validation::stateful_set,
    HyperNode => validation::hyper_node,
}

impl CachedKind for Pod {
    const KIND: &'static str = "Pod";
    type Kept = SchedPod;
    type Keeper = SpecInterner;
    fn check(&self) -> Check {
        validation::pod(self)
    }
    fn keep(self, specs: &mut SpecInterner) -> SchedPod {
        specs.pod(self)
    }
}

/// What the cache keeps of a HyperNode: all but its `managedFields` and `resourceVersion`,
/// which every write changes.
pub fn strip_hyper_node(hn: &mut HyperNode) {
    hn.metadata.managed_fields = None;
    hn.metadata.resource_version = None;
}

/// The metadata the cache keeps of a Service or a workload: its name and namespace.
fn strip_meta(m: ObjectMeta) -> ObjectMeta {
    ObjectMeta { name: m.name, namespace: m.namespace, ..Default::default() }
}

/// What the cache keeps of a Service: its name, namespace and `spec.selector` (a Service
/// without a selector stays without one: it selects no pod, where an empty one selects
/// every pod of its namespace).
pub fn strip_service(s: Service) -> Service {
    Service {
        metadata: strip_meta(s.metadata),
        spec: s.spec.map(|spec| ServiceSpec { selector: spec.selector, ..Default::default() }),
        status: None,
    }
}

/// What the cache keeps of a ReplicationController: its name, namespace and `spec.selector`.
pub fn strip_replication_controller(rc: ReplicationController) -> ReplicationController {
    ReplicationController {
        metadata: strip_meta(rc.metadata),
        spec: rc.spec.map(|spec| ReplicationControllerSpec { selector: spec.selector, ..Default::default() }),
        status: None,
    }
}

/// What the cache keeps of a ReplicaSet: its name, namespace and `spec.selector` (the other
/// fields of the spec at their defaults).
pub fn strip_replica_set(rs: ReplicaSet) -> ReplicaSet {
    ReplicaSet {
        metadata: strip_meta(rs.metadata),
        spec: rs.spec.map(|spec| ReplicaSetSpec { selector: spec.selector, ..Default::default() }),
        status: None,
    }
}

/// What the cache keeps of a StatefulSet: its name, namespace and `spec.selector` (the other
/// fields of the spec, the required template included, at their defaults).
pub fn strip_stateful_set(ss: StatefulSet) -> StatefulSet {
    StatefulSet {
        metadata: strip_meta(ss.metadata),
        spec: ss.spec.map(|spec| StatefulSetSpec { selector: spec.selector, ..Default::default() }),
        status: None,
    }
}

/// `namespace/name`, or `name` for a cluster-scoped object.
pub fn object_key<K: kube::Resource>(o: &K) -> String {
    let name = o.meta().name.as_deref().unwrap_or_default();
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// The objects of one kind, as the watch last reported them.
#[derive(Debug)]
pub struct Store<K: CachedKind> {
    objects: BTreeMap<String, Arc<K::Kept>>,
    relist: Option<BTreeMap<String, Arc<K::Kept>>>,
    synced: bool,
    /// Objects left out because they are invalid: key → the error.
    invalid: BTreeMap<String, String>,
    /// When the last list (the first, or a relist) was complete.
    listed_at: Option<std::time::Instant>,
    /// What objects are kept with.
    keeper: K::Keeper,
}

impl<K: CachedKind> Default for Store<K> {
    fn default() -> Self {
        Store {
            objects: BTreeMap::new(),
            relist: None,
            synced: false,
            invalid: BTreeMap::new(),
            listed_at: None,
            keeper: K::Keeper::default(),
        }
    }
}

impl<K: CachedKind> Store<K> {
    /// Whether the first list is complete.
    pub fn synced(&self) -> bool {
        self.synced
    }

    /// When the last list (the first, or a relist after `410 Gone`) was complete: a
    /// relist shows as a later instant (the fault-injection suite times the cache's resync
    /// with it).
    pub fn listed_at(&self) -> Option<std::time::Instant> {
        self.listed_at
    }

    /// The object with this key.
    pub fn get(&self, key: &str) -> Option<&Arc<K::Kept>> {
        self.objects.get(key)
    }

    /// Every object, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Arc<K::Kept>)> {
        self.objects.iter()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there is no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Objects left out because they are invalid: key → the error.
    pub fn invalid(&self) -> &BTreeMap<String, String> {
        &self.invalid
    }

    /// Replaces one object (what a status write does to the cached copy).
    fn replace(&mut self, key: &str, object: Arc<K::Kept>) {
        if let Some(slot) = self.objects.get_mut(key) {
            *slot = object;
        }
    }

    fn admit(&mut self, key: &str, object: &K) -> bool {
        match object.check() {
            Ok(()) => {
                self.invalid.remove(key);
                true
            }
            Err(e) => {
                let message = e.to_string();
                if self.invalid.get(key) != Some(&message) {
                    tracing::warn!(kind = K::KIND, object = key, "left out of scheduling: field {message}");
                }
                self.invalid.insert(key.to_string(), message);
                false
            }
        }
    }

    /// Applies one watch event of a kind whose objects are compared on the way in; returns
    /// whether what the store shows changed. An `Apply` equal to the stored object and a
    /// `Delete` of an object the store does not hold change nothing, nor does a relist until
    /// its end, which changes everything.
    pub fn apply_compared(&mut self, event: Event<K>) -> bool
    where
        K::Kept: PartialEq<K>,
    {
        match event {
            Event::Apply(o) => {
                let key = object_key(&o);
                if self.objects.get(&key).is_some_and(|old| **old == o) {
                    return false;
                }
                let held = self.objects.contains_key(&key);
                self.apply(Event::Apply(o));
                held || self.objects.contains_key(&key)
            }
            Event::Delete(o) => {
                let key = object_key(&o);
                self.invalid.remove(&key);
                self.objects.remove(&key).is_some()
            }
            other => self.apply(other) == Changed::All,
        }
    }

    /// Applies one watch event; returns the keys of the objects it changed (all of them for
    /// the end of a relist) so the cache can settle its assumptions.
    pub fn apply(&mut self, event: Event<K>) -> Changed {
        match event {
            Event::Apply(o) => {
                let key = object_key(&o);
                if self.admit(&key, &o) {
                    self.objects.insert(key.clone(), Arc::new(o.keep(&mut self.keeper)));
                } else {
                    self.objects.remove(&key);
                }
                Changed::One(key)
            }
            Event::Delete(o) => {
                let key = object_key(&o);
                self.invalid.remove(&key);
                self.objects.remove(&key);
                Changed::One(key)
            }
            Event::Init => {
                self.relist = Some(BTreeMap::new());
                Changed::Nothing
            }
            Event::InitApply(o) => {
                let key = object_key(&o);
                if self.admit(&key, &o) {
                    let kept = Arc::new(o.keep(&mut self.keeper));
                    self.relist.get_or_insert_with(BTreeMap::new).insert(key, kept);
                }
                Changed::Nothing
            }
            Event::InitDone => {
                if let Some(fresh) = self.relist.take() {
                    self.invalid.retain(|k, _| !fresh.contains_key(k));
                    self.objects = fresh;
                }
                self.synced = true;
                self.listed_at = Some(std::time::Instant::now());
                Changed::All
            }
        }
    }
}

/// What a watch event changed.
#[derive(Debug, PartialEq, Eq)]
pub enum Changed {
    /// Nothing visible yet (a relist in progress).
    Nothing,
    /// The object with this key.
    One(String),
    /// Everything (a relist completed).
    All,
}

/// What the scheduler did to a pod that the watch has not shown yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assumption {
    /// Bound (or being bound) to this node.
    Bound {
        /// The pod's uid when it was bound.
        uid: String,
        /// The node.
        node: Arc<str>,
        /// The annotations the bind writes first (the GPU cards chosen).
        annotations: Vec<(&'static str, String)>,
    },
    /// Being evicted: counts as Releasing on its node.
    Evicting {
        /// The pod's uid when it was evicted.
        uid: String,
    },
}

/// The scheduler's view of the cluster.
#[derive(Debug, Default)]
pub struct ClusterCache {
    scheduler_names: Vec<String>,
    node_selector: BTreeMap<String, Vec<String>>,
    /// Nodes.
    pub nodes: Store<Node>,
    /// Pods, of every scheduler.
    pub pods: Store<Pod>,
    /// PodGroups.
    pub pod_groups: Store<PodGroup>,
    /// Queues.
    pub queues: Store<Queue>,
    /// PriorityClasses.
    pub priority_classes: Store<PriorityClass>,
    /// Namespaces.
    pub namespaces: Store<Namespace>,
    /// PersistentVolumeClaims.
    pub pvcs: Store<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub pvs: Store<PersistentVolume>,
    /// StorageClasses.
    pub storage_classes: Store<StorageClass>,
    /// CSINodes.
    pub csi_nodes: Store<CSINode>,
    /// Services, stripped ([`strip_service`]).
    pub services: Store<Service>,
    /// ReplicationControllers, stripped ([`strip_replication_controller`]).
    pub replication_controllers: Store<ReplicationController>,
    /// ReplicaSets, stripped ([`strip_replica_set`]).
    pub replica_sets: Store<ReplicaSet>,
    /// StatefulSets, stripped ([`strip_stateful_set`]).
    pub stateful_sets: Store<StatefulSet>,
    /// HyperNodes, stripped ([`strip_hyper_node`]); listed with none while the API server
    /// does not serve them ([`ClusterCache::hyper_nodes_unavailable`]).
    pub hyper_nodes: Store<HyperNode>,
    assumed: HashMap<String, Assumption>,
    /// Keys of the pods [`pods_without_group`](Self::pods_without_group) returns, kept as
    /// the pods change so that a settled cluster's cycle does not look at every pod.
    orphans: BTreeSet<String>,
    /// The kept snapshot and what changed since.
    keeper: KeptSnapshot,
}

/// Tells `keeper` what a watch event of a kind changed.
fn record(keeper: &mut KeptSnapshot, changed: Changed, one: fn(&mut KeptSnapshot, &str)) {
    match changed {
        Changed::Nothing => {}
        Changed::One(key) => one(keeper, &key),
        Changed::All => keeper.rebuild(),
    }
}

/// The time written into an assumed pod's `deletionTimestamp` (any value makes it Releasing).
fn assumed_deletion_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

impl ClusterCache {
    /// An empty cache for these scheduler names, keeping only nodes with one of the
    /// `node_selector` labels (all nodes when empty).
    pub fn new(scheduler_names: Vec<String>, node_selector: BTreeMap<String, Vec<String>>) -> Self {
        ClusterCache { scheduler_names, node_selector, ..Default::default() }
    }

    /// Whether every kind's first list is complete.
    pub fn synced(&self) -> bool {
        self.nodes.synced()
            && self.pods.synced()
            && self.pod_groups.synced()
            && self.queues.synced()
            && self.priority_classes.synced()
            && self.namespaces.synced()
            && self.pvcs.synced()
            && self.pvs.synced()
            && self.storage_classes.synced()
            && self.csi_nodes.synced()
            && self.services.synced()
            && self.replication_controllers.synced()
            && self.replica_sets.synced()
            && self.stateful_sets.synced()
            && self.hyper_nodes.synced()
    }

    /// Keeps what a cycle over the kept snapshot remembered of the jobs it could not place,
    /// so that the next cycle skips them while nothing they depend on changed
    /// ([`Snapshot::keep_retries`]: refused unless the kept snapshot is still the one the
    /// cycle ran on).
    pub fn keep_retries(&mut self, memo: Option<Arc<volcano_framework::RetryMemo>>) {
        if let Some(kept) = self.keeper.kept_mut() {
            kept.keep_retries(memo);
        }
    }

    /// How many snapshots were rebuilt since the cache was made.
    pub fn rebuilds(&self) -> u64 {
        self.keeper.rebuilds()
    }

    /// How many snapshots were brought up to date in place since the cache was made.
    pub fn updates(&self) -> u64 {
        self.keeper.updates()
    }

    /// The pods assumed bound or evicting: key → what was done.
    pub fn assumptions(&self) -> &HashMap<String, Assumption> {
        &self.assumed
    }

    /// Applies a Node event.
    pub fn apply_node(&mut self, e: Event<Node>) {
        let changed = self.nodes.apply(e);
        record(&mut self.keeper, changed, KeptSnapshot::node_changed);
    }

    /// Applies a PodGroup event.
    pub fn apply_pod_group(&mut self, e: Event<PodGroup>) {
        let changed = self.pod_groups.apply(e);
        record(&mut self.keeper, changed, KeptSnapshot::pod_group_changed);
    }

    /// Applies a Queue event.
    pub fn apply_queue(&mut self, e: Event<Queue>) {
        let changed = self.queues.apply(e);
        record(&mut self.keeper, changed, KeptSnapshot::queue_changed);
    }

    /// Marks the read-only kinds (Namespaces, PersistentVolumeClaims, PersistentVolumes,
    /// StorageClasses, CSINodes, Services, ReplicationControllers, ReplicaSets,
    /// StatefulSets, HyperNodes) listed with none of them: for tests and tools that feed the
    /// cache without a cluster.
    pub fn list_no_extras(&mut self) {
        self.apply_namespace(Event::Init);
        self.apply_namespace(Event::InitDone);
        self.apply_pvc(Event::Init);
        self.apply_pvc(Event::InitDone);
        self.apply_pv(Event::Init);
        self.apply_pv(Event::InitDone);
        self.apply_storage_class(Event::Init);
        self.apply_storage_class(Event::InitDone);
        self.apply_csi_node(Event::Init);
        self.apply_csi_node(Event::InitDone);
        self.apply_service(Event::Init);
        self.apply_service(Event::InitDone);
        self.apply_replication_controller(Event::Init);
        self.apply_replication_controller(Event::InitDone);
        self.apply_replica_set(Event::Init);
        self.apply_replica_set(Event::InitDone);
        self.apply_stateful_set(Event::Init);
        self.apply_stateful_set(Event::InitDone);
        self.apply_hyper_node(Event::Init);
        self.apply_hyper_node(Event::InitDone);
    }

    /// Applies a PriorityClass event.
    pub fn apply_priority_class(&mut self, e: Event<PriorityClass>) {
        // Priorities are resolved when tasks and jobs are built: any change rebuilds.
        if self.priority_classes.apply(e) != Changed::Nothing {
            self.keeper.rebuild();
        }
    }

    /// Applies a Namespace event.
    pub fn apply_namespace(&mut self, e: Event<Namespace>) {
        if self.namespaces.apply(e) != Changed::Nothing {
            self.keeper.extras_changed();
        }
    }

    /// Applies a PersistentVolumeClaim event.
    pub fn apply_pvc(&mut self, e: Event<PersistentVolumeClaim>) {
        if self.pvcs.apply(e) != Changed::Nothing {
            self.keeper.extras_changed();
        }
    }

    /// Applies a PersistentVolume event.
    pub fn apply_pv(&mut self, e: Event<PersistentVolume>) {
        if self.pvs.apply(e) != Changed::Nothing {
            self.keeper.extras_changed();
        }
    }

    /// Applies a StorageClass event.
    pub fn apply_storage_class(&mut self, e: Event<StorageClass>) {
        if self.storage_classes.apply(e) != Changed::Nothing {
            self.keeper.extras_changed();
        }
    }

    /// Applies a CSINode event.
    pub fn apply_csi_node(&mut self, e: Event<CSINode>) {
        if self.csi_nodes.apply(e) != Changed::Nothing {
            self.keeper.extras_changed();
        }
    }

    /// Applies a Service event, the Service stripped ([`strip_service`]); the extras are
    /// rebuilt only when what is kept changed.
    pub fn apply_service(&mut self, e: Event<Service>) {
        let e = e.modify(|o| *o = strip_service(std::mem::take(o)));
        if self.services.apply_compared(e) {
            self.keeper.extras_changed();
        }
    }

    /// Applies a ReplicationController event, stripped ([`strip_replication_controller`]);
    /// the extras are rebuilt only when what is kept changed.
    pub fn apply_replication_controller(&mut self, e: Event<ReplicationController>) {
        let e = e.modify(|o| *o = strip_replication_controller(std::mem::take(o)));
        if self.replication_controllers.apply_compared(e) {
            self.keeper.extras_changed();
        }
    }

    /// Applies a ReplicaSet event, stripped ([`strip_replica_set`]); the extras are rebuilt
    /// only when what is kept changed (not on the status updates of a scaling ReplicaSet).
    pub fn apply_replica_set(&mut self, e: Event<ReplicaSet>) {
        let e = e.modify(|o| *o = strip_replica_set(std::mem::take(o)));
        if self.replica_sets.apply_compared(e) {
            self.keeper.extras_changed();
        }
    }

    /// Applies a StatefulSet event, stripped ([`strip_stateful_set`]); the extras are
    /// rebuilt only when what is kept changed.
    pub fn apply_stateful_set(&mut self, e: Event<StatefulSet>) {
        let e = e.modify(|o| *o = strip_stateful_set(std::mem::take(o)));
        if self.stateful_sets.apply_compared(e) {
            self.keeper.extras_changed();
        }
    }

    /// Applies a HyperNode event, stripped ([`strip_hyper_node`]); the extras (and with
    /// them the snapshot's topology) are rebuilt when what is kept changed.
    pub fn apply_hyper_node(&mut self, e: Event<HyperNode>) {
        let e = e.modify(strip_hyper_node);
        if self.hyper_nodes.apply_compared(e) {
            self.keeper.extras_changed();
        }
    }

    /// The API server does not serve HyperNodes (their CRD is not installed) or refuses to
    /// list them to the scheduler: there are none. Marks the kind listed (so that the caches
    /// sync without it) and drops the HyperNodes held, if any; changes nothing when the kind
    /// is already listed with none, so that the watch may say so at every retry.
    pub fn hyper_nodes_unavailable(&mut self) {
        if self.hyper_nodes.synced() && self.hyper_nodes.is_empty() {
            return;
        }
        self.apply_hyper_node(Event::Init);
        self.apply_hyper_node(Event::InitDone);
    }

    /// Applies a Pod event, and settles the assumptions the event answers.
    pub fn apply_pod(&mut self, e: Event<Pod>) {
        match self.pods.apply(e) {
            Changed::Nothing => {}
            Changed::One(key) => {
                self.settle(&key);
                self.track_orphan(&key);
                self.keeper.pod_changed(&key);
            }
            Changed::All => {
                let keys: Vec<String> = self.assumed.keys().cloned().collect();
                for k in keys {
                    self.settle(&k);
                }
                self.orphans =
                    self.pods.iter().filter(|(_, p)| self.is_orphan(p)).map(|(k, _)| k.to_string()).collect();
                self.keeper.rebuild();
            }
        }
    }

    /// Keeps `orphans` right for the pod with this key, as the store now holds it.
    fn track_orphan(&mut self, key: &str) {
        if self.pods.get(key).is_some_and(|p| self.is_orphan(p)) {
            if !self.orphans.contains(key) {
                self.orphans.insert(key.to_string());
            }
        } else {
            self.orphans.remove(key);
        }
    }

    /// Drops the assumption about a pod once the watch shows what happened to it.
    fn settle(&mut self, key: &str) {
        let Some(a) = self.assumed.get(key) else { return };
        let done = match self.pods.get(key) {
            None => true,
            Some(pod) => {
                let uid = pod.metadata.uid.as_deref().unwrap_or_default();
                match a {
                    Assumption::Bound { uid: u, .. } => u != uid || pod.node_name().is_some(),
                    Assumption::Evicting { uid: u } => u != uid || pod.metadata.deletion_timestamp.is_some(),
                }
            }
        };
        if done {
            self.assumed.remove(key);
        }
    }

    /// The pod is bound to `node` as far as the next cycles are concerned, until the watch
    /// shows it bound or it is [`forget`](Self::forget)ten.
    pub fn assume_bound(&mut self, pod: &ObjectRef, node: Arc<str>, annotations: Vec<(&'static str, String)>) {
        let uid = pod.uid().unwrap_or_default().to_string();
        self.assumed.insert(pod.key().to_string(), Assumption::Bound { uid, node, annotations });
        self.keeper.pod_changed(pod.key());
    }

    /// The pod is being evicted: Releasing on its node until the watch shows its deletion.
    pub fn assume_evicting(&mut self, pod: &ObjectRef) {
        let uid = pod.uid().unwrap_or_default().to_string();
        self.assumed.insert(pod.key().to_string(), Assumption::Evicting { uid });
        self.keeper.pod_changed(pod.key());
    }

    /// A bind or eviction failed: the pod is what the watch says it is.
    pub fn forget(&mut self, pod: &ObjectRef) {
        if self.assumed.remove(pod.key()).is_some() {
            self.keeper.pod_changed(pod.key());
        }
    }

    /// Whether the cached object is the one `r` names (same uid, when `r` has one).
    fn same_uid(meta_uid: Option<&str>, r: &ObjectRef) -> bool {
        r.uid().is_none_or(|u| meta_uid == Some(u))
    }

    /// Writes a PodGroup status into the cached object; returns the previous object (for
    /// [`revert_pod_group`](Self::revert_pod_group)) and the new one.
    pub fn set_pod_group_status(
        &mut self,
        r: &ObjectRef,
        status: &PodGroupStatus,
    ) -> Option<(Arc<PodGroup>, Arc<PodGroup>)> {
        let old = self.pod_groups.get(r.key())?.clone();
        if !Self::same_uid(old.metadata.uid.as_deref(), r) {
            return None;
        }
        let mut new = (*old).clone();
        new.status = Some(status.clone());
        let new = Arc::new(new);
        self.pod_groups.replace(r.key(), new.clone());
        self.keeper.pod_group_changed(r.key());
        Some((old, new))
    }

    /// Puts the previous PodGroup back if the cached one is still the one written.
    pub fn revert_pod_group(&mut self, key: &str, written: &Arc<PodGroup>, previous: Arc<PodGroup>) {
        if self.pod_groups.get(key).is_some_and(|cur| Arc::ptr_eq(cur, written)) {
            self.pod_groups.replace(key, previous);
            self.keeper.pod_group_changed(key);
        }
    }

    /// Writes a Queue's `status.allocated` into the cached object; returns the previous
    /// object and the new one.
    pub fn set_queue_allocated(&mut self, r: &ObjectRef, allocated: &ResourceList) -> Option<(Arc<Queue>, Arc<Queue>)> {
        let old = self.queues.get(r.key())?.clone();
        if !Self::same_uid(old.metadata.uid.as_deref(), r) {
            return None;
        }
        let mut new = (*old).clone();
        new.status.get_or_insert_with(QueueStatus::default).allocated = Some(allocated.clone());
        let new = Arc::new(new);
        self.queues.replace(r.key(), new.clone());
        self.keeper.queue_changed(r.key());
        Some((old, new))
    }

    /// Puts the previous Queue back if the cached one is still the one written.
    pub fn revert_queue(&mut self, key: &str, written: &Arc<Queue>, previous: Arc<Queue>) {
        if self.queues.get(key).is_some_and(|cur| Arc::ptr_eq(cur, written)) {
            self.queues.replace(key, previous);
            self.keeper.queue_changed(key);
        }
    }

    /// Sets a pod's `PodScheduled=False` condition (or its `status.nominatedNodeName`) in
    /// the cached object; returns the previous object and the new one.
    pub fn set_pod_status(
        &mut self,
        r: &ObjectRef,
        change: PodStatusChange<'_>,
    ) -> Option<(Arc<SchedPod>, Arc<SchedPod>)> {
        let old = self.pods.get(r.key())?.clone();
        if !Self::same_uid(old.metadata.uid.as_deref(), r) {
            return None;
        }
        let mut new = (*old).clone();
        match change {
            PodStatusChange::Unschedulable(c, now) => c.set_on(&mut new, now),
            PodStatusChange::Nominated(node) => {
                new.status.get_or_insert_with(PodStatus::default).nominated_node_name = Some(node.to_string())
            }
        }
        let new = Arc::new(new);
        self.pods.replace(r.key(), new.clone());
        self.track_orphan(r.key());
        self.keeper.pod_changed(r.key());
        Some((old, new))
    }

    /// Puts the previous pod back if the cached one is still the one written.
    pub fn revert_pod(&mut self, key: &str, written: &Arc<SchedPod>, previous: Arc<SchedPod>) {
        if self.pods.get(key).is_some_and(|cur| Arc::ptr_eq(cur, written)) {
            self.pods.replace(key, previous);
            self.track_orphan(key);
            self.keeper.pod_changed(key);
        }
    }

    fn node_selected(&self, node: &Node) -> bool {
        if self.node_selector.is_empty() {
            return true;
        }
        let labels = node.metadata.labels.as_ref();
        self.node_selector.iter().any(|(k, vs)| labels.and_then(|l| l.get(k)).is_some_and(|v| vs.contains(v)))
    }

    /// Whether the pod asks for one of this scheduler's names.
    pub fn is_ours(&self, pod: &SchedPod) -> bool {
        let name = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
        self.scheduler_names.iter().any(|n| n == name)
    }

    /// Pending pods of this scheduler that name no PodGroup (Volcano's PodGroup controller
    /// gives each a PodGroup of its own; see [`volcano_framework::implicit`]), in key order.
    /// Costs the number of such pods, not the number of pods: the set is kept as the pods
    /// change.
    pub fn pods_without_group(&self) -> Vec<Arc<SchedPod>> {
        self.orphans.iter().filter_map(|k| self.pods.get(k)).cloned().collect()
    }

    /// Whether [`pods_without_group`](Self::pods_without_group) returns this pod.
    fn is_orphan(&self, p: &SchedPod) -> bool {
        self.is_ours(p)
            && p.metadata.deletion_timestamp.is_none()
            && p.node_name().is_none()
            && matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), None | Some("Pending"))
            && p.metadata.annotations.as_ref().is_none_or(|a| !a.contains_key(GROUP_NAME_ANNOTATION))
    }

    /// The pod as the next snapshot sees it: with the assumption about it applied.
    fn pod_view(&self, key: &str, pod: &Arc<SchedPod>) -> Arc<SchedPod> {
        let Some(a) = self.assumed.get(key) else { return pod.clone() };
        let mut p = (**pod).clone();
        match a {
            Assumption::Bound { uid, node, annotations } if p.metadata.uid.as_deref() == Some(uid.as_str()) => {
                p.set_node_name(Some(node.to_string()));
                if !annotations.is_empty() {
                    let map = p.metadata.annotations.get_or_insert_with(Default::default);
                    for (k, v) in annotations {
                        map.insert((*k).to_string(), v.clone());
                    }
                }
            }
            Assumption::Evicting { uid } if p.metadata.uid.as_deref() == Some(uid.as_str()) => {
                p.metadata.deletion_timestamp.get_or_insert_with(assumed_deletion_time);
            }
            _ => {}
        }
        Arc::new(p)
    }

    /// The objects the next snapshot is built from: what the watches show, with the
    /// assumptions applied and the nodes the node selector leaves out removed.
    pub fn objects(&self) -> ClusterObjects {
        let pods = self.pods.iter().map(|(key, pod)| self.pod_view(key, pod)).collect();
        ClusterObjects {
            nodes: self.nodes.iter().filter(|(_, n)| self.node_selected(n)).map(|(_, n)| n.clone()).collect(),
            pods,
            pod_groups: self.pod_groups.iter().map(|(_, o)| o.clone()).collect(),
            queues: self.queues.iter().map(|(_, o)| o.clone()).collect(),
            priority_classes: self.priority_classes.iter().map(|(_, o)| o.clone()).collect(),
            ..self.extra_objects()
        }
    }

    /// The Namespaces, volume objects, Services, workloads and HyperNodes, alone (what [`Extras`](volcano_framework::Extras) are
    /// made of).
    fn extra_objects(&self) -> ClusterObjects {
        fn all<K: CachedKind>(s: &Store<K>) -> Vec<Arc<K::Kept>> {
            s.iter().map(|(_, o)| o.clone()).collect()
        }
        ClusterObjects {
            namespaces: all(&self.namespaces),
            pvcs: all(&self.pvcs),
            pvs: all(&self.pvs),
            storage_classes: all(&self.storage_classes),
            csi_nodes: all(&self.csi_nodes),
            services: all(&self.services),
            replication_controllers: all(&self.replication_controllers),
            replica_sets: all(&self.replica_sets),
            stateful_sets: all(&self.stateful_sets),
            hyper_nodes: all(&self.hyper_nodes),
            ..Default::default()
        }
    }

    /// The snapshot for the next cycle: the kept one when nothing changed, brought up to
    /// date in place when the changes allow it, else rebuilt (see the module documentation
    /// and [`KeptSnapshot::snapshot`]).
    pub fn snapshot(&mut self) -> Result<Snapshot, SnapshotError> {
        let names: Vec<String> = self.scheduler_names.clone();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut keeper = std::mem::take(&mut self.keeper);
        let result = keeper.snapshot(&*self, &names);
        self.keeper = keeper;
        result
    }

    /// The pod's name and uid as an event's object, if the pod is cached.
    pub fn pod(&self, key: &str) -> Option<&Arc<SchedPod>> {
        self.pods.get(key)
    }
}

impl SnapshotSource for ClusterCache {
    fn objects(&self) -> ClusterObjects {
        ClusterCache::objects(self)
    }

    fn extra_objects(&self) -> ClusterObjects {
        ClusterCache::extra_objects(self)
    }

    fn priority_classes(&self) -> Vec<Arc<PriorityClass>> {
        self.priority_classes.iter().map(|(_, o)| o.clone()).collect()
    }

    fn pod(&self, key: &str) -> Option<Arc<SchedPod>> {
        self.pods.get(key).map(|p| self.pod_view(key, p))
    }

    fn pod_group(&self, key: &str) -> Option<Arc<PodGroup>> {
        self.pod_groups.get(key).cloned()
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).filter(|n| self.node_selected(n)).cloned()
    }

    fn queue(&self, name: &str) -> Option<Arc<Queue>> {
        self.queues.get(name).cloned()
    }
}

/// A change to a pod's status that the scheduler writes.
#[derive(Clone, Debug)]
pub enum PodStatusChange<'a> {
    /// `PodScheduled=False` with this reason and message, at this time.
    Unschedulable(&'a PodScheduledFalse, Time),
    /// `status.nominatedNodeName`.
    Nominated(&'a str),
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, NodeStatus, PodSpec};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::ResourceExt;
    use volcano_framework::TaskStatus;

    fn node(name: &str) -> Node {
        let res: BTreeMap<String, Quantity> = [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect();
        Node {
            metadata: ObjectMeta { name: Some(name.into()), uid: Some(format!("uid-{name}")), ..Default::default() },
            status: Some(NodeStatus { allocatable: Some(res.clone()), capacity: Some(res), ..Default::default() }),
            ..Default::default()
        }
    }

    fn pod(name: &str, node: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ml".into()),
                uid: Some(format!("uid-{name}")),
                annotations: Some([(GROUP_NAME_ANNOTATION.to_string(), "pg".to_string())].into_iter().collect()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                scheduler_name: Some("volcano-rs".into()),
                node_name: node.map(str::to_string),
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(k8s_openapi::api::core::v1::ResourceRequirements {
                        requests: Some([("cpu".to_string(), Quantity("1".into()))].into_iter().collect()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
        }
    }

    fn pod_group() -> PodGroup {
        let mut pg = PodGroup::new("pg", Default::default());
        pg.metadata.namespace = Some("ml".into());
        pg.metadata.uid = Some("uid-pg".into());
        pg.spec.min_member = 1;
        pg
    }

    fn synced_cache() -> ClusterCache {
        let mut c = ClusterCache::new(vec!["volcano-rs".into()], BTreeMap::new());
        c.apply_node(Event::Init);
        c.apply_node(Event::InitApply(node("n1")));
        c.apply_node(Event::InitDone);
        c.apply_pod(Event::Init);
        c.apply_pod(Event::InitApply(pod("p0", None)));
        c.apply_pod(Event::InitDone);
        c.apply_pod_group(Event::Init);
        c.apply_pod_group(Event::InitApply(pod_group()));
        c.apply_pod_group(Event::InitDone);
        c.apply_queue(Event::Init);
        for q in volcano_framework::implicit::default_queues() {
            c.apply_queue(Event::InitApply(q));
        }
        c.apply_queue(Event::InitDone);
        c.apply_priority_class(Event::Init);
        c.apply_priority_class(Event::InitDone);
        c.list_no_extras();
        c
    }

    fn pod_ref(name: &str) -> ObjectRef {
        ObjectRef::namespaced("ml", name, &format!("uid-{name}"))
    }

    fn status_of(c: &mut ClusterCache, name: &str) -> TaskStatus {
        let snap = c.snapshot().unwrap();
        let t = snap.tasks.iter().find(|t| *t.key == format!("ml/{name}")).expect("task");
        t.status
    }

    #[test]
    fn synced_only_after_every_first_list() {
        let mut c = ClusterCache::new(vec!["volcano-rs".into()], BTreeMap::new());
        c.apply_node(Event::Init);
        c.apply_node(Event::InitApply(node("n1")));
        assert!(!c.synced());
        assert!(c.nodes.is_empty(), "a list in progress is not visible");
        c.apply_node(Event::InitDone);
        assert_eq!(c.nodes.len(), 1);
        assert!(!c.synced(), "pods, PodGroups, queues and PriorityClasses are not listed yet");
        assert!(synced_cache().synced());
    }

    #[test]
    fn an_assumed_bind_holds_until_the_watch_shows_the_node() {
        let mut c = synced_cache();
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Pending);
        c.assume_bound(&pod_ref("p0"), "n1".into(), Vec::new());
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Bound, "counted on its node while the bind is in flight");
        // An unrelated update of the pod (still without a node) keeps the assumption.
        c.apply_pod(Event::Apply(pod("p0", None)));
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Bound);
        c.apply_pod(Event::Apply(pod("p0", Some("n1"))));
        assert!(c.assumptions().is_empty(), "the watch answered");
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Bound);
    }

    /// The pods without a PodGroup, by looking at every pod (what the kept set must equal).
    fn orphans_by_scan(c: &ClusterCache) -> Vec<String> {
        c.pods.iter().filter(|(_, p)| c.is_orphan(p)).map(|(k, _)| k.clone()).collect()
    }

    fn orphan_keys(c: &ClusterCache) -> Vec<String> {
        c.pods_without_group().iter().map(|p| ObjectRef::of(&p.metadata).key().to_string()).collect()
    }

    #[test]
    fn pods_without_group_follow_the_pods_through_every_change() {
        let plain = |name: &str, node: Option<&str>| {
            let mut p = pod(name, node);
            p.metadata.annotations = None;
            p
        };
        // A plain pending pod, changed by `f`.
        let changed = |name: &str, f: fn(&mut Pod)| {
            let mut p = plain(name, None);
            f(&mut p);
            Event::Apply(p)
        };
        let mut c = synced_cache();
        assert!(orphan_keys(&c).is_empty(), "p0 names a PodGroup");
        let mut steps: Vec<(&str, Event<Pod>)> = vec![
            ("a plain pending pod", Event::Apply(plain("a", None))),
            ("another", Event::Apply(plain("b", None))),
            (
                "a pod of another scheduler",
                changed("other", |p| p.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into())),
            ),
            ("a gets its PodGroup annotation", Event::Apply(pod("a", None))),
            ("b is bound", Event::Apply(plain("b", Some("n1")))),
            ("c, pending", Event::Apply(plain("c", None))),
            ("c is being deleted", changed("c", |p| p.metadata.deletion_timestamp = Some(assumed_deletion_time()))),
            ("d, pending", Event::Apply(plain("d", None))),
            ("d succeeded", changed("d", |p| p.status.as_mut().unwrap().phase = Some("Succeeded".into()))),
            ("e, pending", Event::Apply(plain("e", None))),
            ("f, pending", Event::Apply(plain("f", None))),
            ("e is deleted", Event::Delete(plain("e", None))),
        ];
        for (what, e) in steps.drain(..) {
            c.apply_pod(e);
            assert_eq!(orphan_keys(&c), orphans_by_scan(&c), "after: {what}");
        }
        assert_eq!(orphan_keys(&c), vec!["ml/f".to_string()]);
        // A status written by the applier, and its revert, keep the set.
        let (old, new) = c.set_pod_status(&pod_ref("f"), PodStatusChange::Nominated("n1")).expect("cached");
        assert_eq!(orphan_keys(&c), vec!["ml/f".to_string()]);
        c.revert_pod("ml/f", &new, old);
        assert_eq!(orphan_keys(&c), vec!["ml/f".to_string()]);
        // A relist replaces everything.
        c.apply_pod(Event::Init);
        c.apply_pod(Event::InitApply(plain("g", None)));
        c.apply_pod(Event::InitApply(pod("h", None)));
        c.apply_pod(Event::InitDone);
        assert_eq!(orphan_keys(&c), vec!["ml/g".to_string()]);
        assert_eq!(orphan_keys(&c), orphans_by_scan(&c));
    }

    #[test]
    fn a_failed_bind_returns_the_pod_to_pending() {
        let mut c = synced_cache();
        c.assume_bound(&pod_ref("p0"), "n1".into(), Vec::new());
        c.forget(&pod_ref("p0"));
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Pending);
    }

    #[test]
    fn a_replaced_pod_is_not_bound_by_an_old_assumption() {
        let mut c = synced_cache();
        c.assume_bound(&pod_ref("p0"), "n1".into(), Vec::new());
        let mut replaced = pod("p0", None);
        replaced.metadata.uid = Some("uid-new".into());
        c.apply_pod(Event::Apply(replaced));
        assert!(c.assumptions().is_empty());
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Pending);
    }

    #[test]
    fn an_eviction_counts_as_releasing_until_the_pod_is_deleted() {
        let mut c = synced_cache();
        c.apply_pod(Event::Apply(pod("p1", Some("n1"))));
        c.assume_evicting(&pod_ref("p1"));
        assert_eq!(status_of(&mut c, "p1"), TaskStatus::Releasing);
        c.apply_pod(Event::Delete(pod("p1", Some("n1"))));
        assert!(c.assumptions().is_empty());
    }

    #[test]
    fn an_idle_cache_does_not_rebuild() {
        let mut c = synced_cache();
        c.snapshot().unwrap();
        c.snapshot().unwrap();
        assert_eq!(c.rebuilds(), 1);
        c.apply_node(Event::Apply(node("n2")));
        c.snapshot().unwrap();
        assert_eq!(c.rebuilds(), 2);
    }

    #[test]
    fn namespaces_and_volume_objects_replace_the_extras_without_a_rebuild() {
        use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
        use k8s_openapi::api::storage::v1::CSINodeSpec;
        let meta = |ns: Option<&str>, name: &str| ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            ..Default::default()
        };
        let mut c = ClusterCache::new(vec!["volcano-rs".into()], BTreeMap::new());
        c.apply_node(Event::Init);
        c.apply_node(Event::InitDone);
        c.apply_pod(Event::Init);
        c.apply_pod(Event::InitDone);
        c.apply_pod_group(Event::Init);
        c.apply_pod_group(Event::InitDone);
        c.apply_queue(Event::Init);
        c.apply_queue(Event::InitDone);
        c.apply_priority_class(Event::Init);
        c.apply_priority_class(Event::InitDone);
        assert!(!c.synced(), "Namespaces and volume objects are not listed yet");
        let mut c = synced_cache();
        c.snapshot().unwrap();
        assert_eq!(c.rebuilds(), 1);
        let mut pvc = PersistentVolumeClaim { metadata: meta(Some("ml"), "data"), ..Default::default() };
        pvc.spec = Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(k8s_openapi::api::core::v1::VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Quantity("1Gi".into()))].into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        c.apply_pvc(Event::Apply(pvc.clone()));
        c.apply_namespace(Event::Apply(Namespace { metadata: meta(None, "ml"), ..Default::default() }));
        c.apply_csi_node(Event::Apply(CSINode { metadata: meta(None, "n1"), spec: CSINodeSpec::default() }));
        let snap = c.snapshot().unwrap();
        assert_eq!(c.rebuilds(), 1, "extras are replaced, tasks are kept");
        assert!(snap.extras().pvc("ml", "data").is_some());
        assert!(snap.extras().namespace_labels("ml").is_some());
        assert!(snap.extras().csi_node("n1").is_some());
        // Together with a pod change: updated in place, with the new extras.
        c.apply_pvc(Event::Delete(pvc));
        c.apply_pod(Event::Apply(pod("p1", None)));
        let snap = c.snapshot().unwrap();
        assert_eq!((c.rebuilds(), c.updates()), (1, 1));
        assert!(snap.extras().pvc("ml", "data").is_none());
        assert!(snap.tasks.iter().any(|t| t.name() == "p1"));
        // An invalid claim (no access mode) is left out with the field named.
        c.apply_pvc(Event::Apply(PersistentVolumeClaim { metadata: meta(Some("ml"), "bad"), ..Default::default() }));
        assert_eq!(
            c.pvcs.invalid().get("ml/bad").map(String::as_str),
            Some("spec: required: access modes and a storage request")
        );
        assert!(c.snapshot().unwrap().extras().pvc("ml", "bad").is_none());
    }

    /// A HyperNode as the API server returns it (managed fields, resource version, status).
    fn hyper_node(name: &str, pattern: &str, version: &str) -> HyperNode {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": version,
                         "managedFields": [{"manager": "volcano-rs", "operation": "Update"}]},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": pattern}}}]},
            "status": {"nodeCount": 1}
        }))
        .unwrap()
    }

    #[test]
    fn hyper_nodes_replace_the_extras_and_an_absent_crd_counts_as_listed() {
        // Listed like the other read-only kinds: the cache is not synced before.
        let mut c = ClusterCache::new(vec!["volcano-rs".into()], BTreeMap::new());
        c.apply_node(Event::Init);
        c.apply_node(Event::InitDone);
        c.apply_pod(Event::Init);
        c.apply_pod(Event::InitDone);
        c.apply_pod_group(Event::Init);
        c.apply_pod_group(Event::InitDone);
        c.apply_queue(Event::Init);
        c.apply_queue(Event::InitDone);
        c.apply_priority_class(Event::Init);
        c.apply_priority_class(Event::InitDone);
        {
            c.apply_namespace(Event::Init);
            c.apply_namespace(Event::InitDone);
            c.apply_pvc(Event::Init);
            c.apply_pvc(Event::InitDone);
            c.apply_pv(Event::Init);
            c.apply_pv(Event::InitDone);
            c.apply_storage_class(Event::Init);
            c.apply_storage_class(Event::InitDone);
            c.apply_csi_node(Event::Init);
            c.apply_csi_node(Event::InitDone);
            c.apply_service(Event::Init);
            c.apply_service(Event::InitDone);
            c.apply_replication_controller(Event::Init);
            c.apply_replication_controller(Event::InitDone);
            c.apply_replica_set(Event::Init);
            c.apply_replica_set(Event::InitDone);
            c.apply_stateful_set(Event::Init);
            c.apply_stateful_set(Event::InitDone);
        }
        assert!(!c.synced(), "HyperNodes are not listed yet");
        // The CRD is not installed: none, and synced.
        c.hyper_nodes_unavailable();
        assert!(c.synced());
        let snap = c.snapshot().unwrap();
        assert!(snap.extras().hyper_nodes.is_empty());
        assert_eq!(c.rebuilds(), 1);

        // The CRD is installed later: the watch's first list brings them in, without a rebuild.
        c.apply_hyper_node(Event::Init);
        c.apply_hyper_node(Event::InitApply(hyper_node("leaf-0", "^n[0-9]$", "1")));
        c.apply_hyper_node(Event::InitDone);
        let snap = c.snapshot().unwrap();
        assert_eq!(c.rebuilds(), 1, "the extras are replaced, the tasks kept");
        let kept = &snap.extras().hyper_nodes["leaf-0"];
        assert_eq!(kept.spec.members[0].selector.regex_match.as_ref().unwrap().pattern, "^n[0-9]$");
        assert!(kept.metadata.managed_fields.is_none() && kept.metadata.resource_version.is_none());
        assert_eq!(kept.status.as_ref().and_then(|s| s.node_count), Some(1));

        // A write that changes only the resource version changes nothing; a new spec does.
        c.apply_hyper_node(Event::Apply(hyper_node("leaf-0", "^n[0-9]$", "2")));
        assert!(!c.keeper.extras_pending());
        c.apply_hyper_node(Event::Apply(hyper_node("leaf-0", "^gpu-", "3")));
        assert!(c.keeper.extras_pending());
        let snap = c.snapshot().unwrap();
        assert_eq!(
            snap.extras().hyper_nodes["leaf-0"].spec.members[0].selector.regex_match.as_ref().unwrap().pattern,
            "^gpu-"
        );

        // One the API server should not have admitted (a pattern that does not compile) is
        // left out with the field named.
        c.apply_hyper_node(Event::Apply(hyper_node("leaf-1", "gpu-(", "4")));
        assert_eq!(
            c.hyper_nodes.invalid().get("leaf-1").map(String::as_str),
            Some("spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: unclosed group")
        );
        assert_eq!(c.snapshot().unwrap().extras().hyper_nodes.keys().collect::<Vec<_>>(), ["leaf-0"]);

        // The CRD is removed: the HyperNodes go with it, once; saying so again changes nothing.
        c.hyper_nodes_unavailable();
        assert!(c.synced() && c.hyper_nodes.is_empty());
        let gone = c.snapshot().unwrap();
        assert!(gone.extras().hyper_nodes.is_empty());
        c.hyper_nodes_unavailable();
        assert!(!c.keeper.extras_pending());
        assert_eq!(c.rebuilds(), 1);
    }

    /// A ReplicaSet as the API server returns it: labels, annotations, owner, template,
    /// replicas and status, of which the cache keeps the name, namespace and selector.
    fn replica_set(app: &str, ready: i32) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-7d9f", "namespace": "ml", "uid": "uid-rs", "resourceVersion": ready.to_string(),
                         "labels": {"app": "web"}, "annotations": {"deployment.kubernetes.io/revision": "1"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                              "uid": "uid-d", "controller": true}]},
            "spec": {"replicas": 3, "minReadySeconds": 5, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "c", "image": "web:1"}]}}},
            "status": {"replicas": 3, "readyReplicas": ready}
        }))
        .unwrap()
    }

    #[test]
    fn services_and_workloads_are_stripped_to_name_namespace_and_selector() {
        let rs = strip_replica_set(replica_set("web", 1));
        let want: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-7d9f", "namespace": "ml"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}}
        }))
        .unwrap();
        assert_eq!(rs, want);

        let ss: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "db", "namespace": "ml", "labels": {"app": "db"}},
            "spec": {"serviceName": "db", "replicas": 3, "selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                     "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
            "status": {"replicas": 3}
        }))
        .unwrap();
        let ss = strip_stateful_set(ss);
        let spec = ss.spec.as_ref().unwrap();
        assert_eq!(spec.selector.match_expressions.as_ref().unwrap()[0].key, "app");
        assert_eq!(*spec, StatefulSetSpec { selector: spec.selector.clone(), ..Default::default() });
        assert_eq!((ss.metadata.labels, ss.status), (None, None));

        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ml", "uid": "u"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}], "clusterIP": "10.0.0.1"},
            "status": {"loadBalancer": {}}
        }))
        .unwrap();
        let svc = strip_service(svc);
        assert_eq!(
            svc.metadata,
            ObjectMeta { name: Some("web".into()), namespace: Some("ml".into()), ..Default::default() }
        );
        assert_eq!(
            svc.spec.unwrap(),
            ServiceSpec { selector: Some([("app".into(), "web".into())].into()), ..Default::default() }
        );
        // Without a selector (selects nothing) and with an empty one (selects everything).
        let headless = strip_service(Service { spec: Some(ServiceSpec::default()), ..Default::default() });
        assert_eq!(headless.spec.unwrap().selector, None);
        let all = strip_service(Service {
            spec: Some(ServiceSpec { selector: Some(BTreeMap::new()), ..Default::default() }),
            ..Default::default()
        });
        assert_eq!(all.spec.unwrap().selector, Some(BTreeMap::new()));

        let rc: ReplicationController = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "old", "namespace": "ml", "labels": {"app": "old"}},
            "spec": {"replicas": 2, "selector": {"app": "old"}, "template": {"metadata": {"labels": {"app": "old"}}}},
            "status": {"replicas": 2}
        }))
        .unwrap();
        let rc = strip_replication_controller(rc);
        assert_eq!(
            rc.spec.unwrap(),
            ReplicationControllerSpec { selector: Some([("app".into(), "old".into())].into()), ..Default::default() }
        );

        // The store holds the stripped object.
        let mut c = synced_cache();
        c.apply_replica_set(Event::Apply(replica_set("web", 1)));
        assert_eq!(**c.replica_sets.get("ml/web-7d9f").unwrap(), want);
    }

    #[test]
    fn only_a_change_of_what_is_kept_refreshes_the_extras() {
        let mut c = synced_cache();
        c.snapshot().unwrap();
        assert!(!c.keeper.extras_pending());
        c.apply_replica_set(Event::Apply(replica_set("web", 0)));
        assert!(c.keeper.extras_pending(), "a new ReplicaSet");
        let snap = c.snapshot().unwrap();
        assert!(snap.extras().replica_set("ml", "web-7d9f").is_some());
        let kept = c.replica_sets.get("ml/web-7d9f").unwrap().clone();

        // Status (and resourceVersion) updates of a scaling ReplicaSet change nothing kept.
        for ready in 1..=3 {
            c.apply_replica_set(Event::Apply(replica_set("web", ready)));
        }
        assert!(!c.keeper.extras_pending(), "a status-only update does not rebuild the extras");
        assert!(Arc::ptr_eq(c.replica_sets.get("ml/web-7d9f").unwrap(), &kept), "the stored object is kept");

        // A selector change does.
        c.apply_replica_set(Event::Apply(replica_set("web-v2", 3)));
        assert!(c.keeper.extras_pending(), "a selector change");
        let snap = c.snapshot().unwrap();
        let rs = snap.extras().replica_set("ml", "web-7d9f").unwrap();
        assert_eq!(rs.spec.as_ref().unwrap().selector.match_labels.as_ref().unwrap()["app"], "web-v2");

        // Services: a port change is not kept, a selector change is.
        let svc = |app: &str, port: i32| -> Service {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "ml"},
                "spec": {"selector": {"app": app}, "ports": [{"port": port}]}
            }))
            .unwrap()
        };
        c.apply_service(Event::Apply(svc("web", 80)));
        c.snapshot().unwrap();
        c.apply_service(Event::Apply(svc("web", 8080)));
        assert!(!c.keeper.extras_pending());
        c.apply_service(Event::Apply(svc("api", 8080)));
        assert!(c.keeper.extras_pending());
        c.snapshot().unwrap();

        // Deleting a known object does, an unknown one does not; nor does an invalid update
        // of an unknown object.
        c.apply_stateful_set(Event::Delete(StatefulSet {
            metadata: ObjectMeta { name: Some("none".into()), namespace: Some("ml".into()), ..Default::default() },
            ..Default::default()
        }));
        assert!(!c.keeper.extras_pending());
        let mut empty = replica_set("web", 0);
        empty.metadata.name = Some("bad".into());
        empty.spec.as_mut().unwrap().selector = Default::default();
        c.apply_replica_set(Event::Apply(empty));
        assert!(!c.keeper.extras_pending());
        assert!(c.replica_sets.invalid()["ml/bad"].starts_with("spec.selector: empty selector"));
        c.apply_replica_set(Event::Delete(replica_set("web", 3)));
        assert!(c.keeper.extras_pending());
        assert!(c.snapshot().unwrap().extras().replica_set("ml", "web-7d9f").is_none());

        // The end of a relist does.
        c.apply_replication_controller(Event::Init);
        assert!(!c.keeper.extras_pending());
        c.apply_replication_controller(Event::InitDone);
        assert!(c.keeper.extras_pending());
        assert_eq!((c.rebuilds(), c.updates()), (1, 0), "extras are replaced, tasks are kept");
    }

    /// The kept snapshot, and a fresh build of the cache's objects, as text.
    fn kept_and_built(c: &mut ClusterCache) -> (String, String) {
        let text = |s: &Snapshot| {
            format!(
                "{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
                s.tasks.iter().collect::<Vec<_>>(),
                s.jobs.iter().collect::<Vec<_>>(),
                s.nodes.iter().collect::<Vec<_>>(),
                s.queues,
                s.total_resource
            )
            // A dimension that went back to zero prints as 0 (a build never had it).
            .replace(", pods 0.00", "")
        };
        let kept = c.snapshot().unwrap();
        let built = Snapshot::build(&c.objects(), &["volcano-rs"]).unwrap();
        (text(&kept), text(&built))
    }

    #[test]
    fn binds_evictions_and_status_writes_update_the_snapshot_in_place() {
        let mut c = synced_cache();
        c.snapshot().unwrap();
        c.assume_bound(&pod_ref("p0"), Arc::from("n1"), Vec::new());
        let (kept, built) = kept_and_built(&mut c);
        assert_eq!(kept, built);
        assert_eq!((c.rebuilds(), c.updates()), (1, 1));
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Bound);

        c.apply_pod(Event::Apply(pod("p0", Some("n1"))));
        c.assume_evicting(&pod_ref("p0"));
        let r = ObjectRef::namespaced("ml", "pg", "uid-pg");
        let status = PodGroupStatus { phase: Some(volcano_api::crd::PodGroupPhase::Running), ..Default::default() };
        c.set_pod_group_status(&r, &status).unwrap();
        let mut n1 = node("n1");
        n1.metadata.labels = Some([("zone".to_string(), "a".to_string())].into_iter().collect());
        c.apply_node(Event::Apply(n1));
        let (kept, built) = kept_and_built(&mut c);
        assert_eq!(kept, built);
        assert_eq!((c.rebuilds(), c.updates()), (1, 2));
        assert_eq!(status_of(&mut c, "p0"), TaskStatus::Releasing);
    }

    #[test]
    fn a_cycle_memory_is_kept_until_the_kept_snapshot_changes_in_what_scheduling_reads() {
        use volcano_framework::{run_cycle, CycleContext, NoObserver, Profile, SessionOptions};
        let reg = volcano_builtin::registries();
        let profile = Profile::builtin_default(&reg).unwrap();
        let cx = CycleContext { cycle: 1, now_ms: 0, options: SessionOptions::default() };
        let mut c = synced_cache();
        let outcome = run_cycle(c.snapshot().unwrap(), &profile, &cx, &mut NoObserver);
        c.keep_retries(outcome.retries.clone());
        assert!(c.snapshot().unwrap().retries().is_some(), "nothing changed: the memory is kept");
        // A PodGroup condition written by the scheduler is not read by a session.
        let r = ObjectRef::namespaced("ml", "pg", "uid-pg");
        let unschedulable = volcano_api::crd::PodGroupCondition { type_: "Unschedulable".into(), ..Default::default() };
        let status = PodGroupStatus { conditions: vec![unschedulable], ..Default::default() };
        let before = c.snapshot().unwrap().revision();
        c.set_pod_group_status(&r, &status).unwrap();
        let snap = c.snapshot().unwrap();
        assert_eq!((snap.revision(), snap.retries().is_some()), (before, true));
        // A node's new label is.
        let mut n1 = node("n1");
        n1.metadata.labels = Some([("zone".to_string(), "a".to_string())].into_iter().collect());
        c.apply_node(Event::Apply(n1));
        let snap = c.snapshot().unwrap();
        assert!(snap.revision() != before && snap.retries().is_none(), "a change scheduling reads ends it");
        // A memory made over another revision is refused.
        c.keep_retries(outcome.retries);
        assert!(c.snapshot().unwrap().retries().is_none());
    }

    /// The cached spec of a pod.
    fn cached_spec(c: &ClusterCache, key: &str) -> Arc<PodSpec> {
        c.pods.get(key).and_then(|p| p.spec.clone()).expect("a cached pod with a spec")
    }

    #[test]
    fn pods_of_one_template_share_their_spec_bound_or_not_listed_or_watched() {
        let mut c = synced_cache();
        c.apply_pod(Event::Apply(pod("p1", None)));
        c.apply_pod(Event::Apply(pod("p2", Some("n1"))));
        let p0 = cached_spec(&c, "ml/p0");
        assert!(Arc::ptr_eq(&p0, &cached_spec(&c, "ml/p1")), "watched like the listed one");
        assert!(Arc::ptr_eq(&p0, &cached_spec(&c, "ml/p2")), "the node is kept apart");
        assert_eq!(c.pods.get("ml/p2").unwrap().node_name(), Some("n1"));
        assert_eq!(p0.node_name, None);
        // A bind as the watch shows it, an assumed bind, a condition written: no new spec.
        c.apply_pod(Event::Apply(pod("p1", Some("n1"))));
        let r = ObjectRef::namespaced("ml", "p0", "uid-p0");
        c.assume_bound(&r, "n1".into(), Vec::new());
        let condition = PodScheduledFalse { reason: "Unschedulable", message: "no room".into() };
        c.set_pod_status(&r, PodStatusChange::Unschedulable(&condition, Time(Default::default())));
        assert!(Arc::ptr_eq(&p0, &cached_spec(&c, "ml/p1")));
        assert!(Arc::ptr_eq(&p0, &cached_spec(&c, "ml/p0")));
        let objects = c.objects();
        let viewed = objects.pods.iter().find(|p| p.metadata.name.as_deref() == Some("p0")).unwrap();
        assert!(Arc::ptr_eq(&p0, viewed.spec.as_ref().unwrap()), "the snapshot's view of an assumed bind");
        assert_eq!(viewed.node_name(), Some("n1"));
        // Another spec is another copy; a relist shares again.
        let mut other = pod("p3", None);
        other.spec.as_mut().unwrap().priority = Some(7);
        c.apply_pod(Event::Apply(other));
        assert!(!Arc::ptr_eq(&p0, &cached_spec(&c, "ml/p3")));
        c.apply_pod(Event::Init);
        for name in ["p0", "p1", "p2"] {
            c.apply_pod(Event::InitApply(pod(name, None)));
        }
        c.apply_pod(Event::InitDone);
        let relisted = cached_spec(&c, "ml/p0");
        assert!(Arc::ptr_eq(&relisted, &cached_spec(&c, "ml/p1")) && Arc::ptr_eq(&relisted, &cached_spec(&c, "ml/p2")));
    }

    #[test]
    fn pods_and_pod_groups_that_come_and_go_update_the_snapshot_a_relist_rebuilds_it() {
        let mut c = synced_cache();
        c.snapshot().unwrap();
        c.apply_pod(Event::Apply(pod("p9", None)));
        let (kept, built) = kept_and_built(&mut c);
        assert_eq!(kept, built);
        assert_eq!((c.rebuilds(), c.updates()), (1, 1));
        c.apply_pod(Event::Delete(pod("p9", None)));
        let snap = c.snapshot().unwrap();
        assert_eq!((c.rebuilds(), c.updates()), (1, 2));
        assert!(snap.task_id("ml/p9").is_none());
        assert_eq!(snap.tasks.len(), Snapshot::build(&c.objects(), &["volcano-rs"]).unwrap().tasks.len());
        c.apply_node(Event::Init);
        c.apply_node(Event::InitApply(node("n1")));
        c.apply_node(Event::InitDone);
        c.snapshot().unwrap();
        assert_eq!((c.rebuilds(), c.updates()), (2, 2));
    }

    #[test]
    fn a_relist_replaces_the_store_whole() {
        let mut c = synced_cache();
        c.apply_node(Event::Init);
        c.apply_node(Event::InitApply(node("n2")));
        assert!(c.nodes.get("n1").is_some(), "the old list stays until the new one is complete");
        c.apply_node(Event::InitDone);
        assert!(c.nodes.get("n1").is_none());
        assert!(c.nodes.get("n2").is_some());
    }

    #[test]
    fn invalid_objects_are_left_out_and_named() {
        let mut c = synced_cache();
        let mut bad = pod("bad", None);
        bad.status.as_mut().unwrap().phase = Some("Sleeping".into());
        c.apply_pod(Event::Apply(bad));
        assert!(c.pods.get("ml/bad").is_none());
        assert!(c.pods.invalid()["ml/bad"].contains("status.phase"));
        c.snapshot().expect("one bad pod does not stop the cycle");
    }

    #[test]
    fn node_selector_keeps_only_labelled_nodes() {
        let mut c = synced_cache();
        c.node_selector = [("pool".to_string(), vec!["gpu".to_string()])].into_iter().collect();
        let mut n2 = node("n2");
        n2.metadata.labels = Some([("pool".to_string(), "gpu".to_string())].into_iter().collect());
        c.apply_node(Event::Apply(n2));
        let names: Vec<String> = c.objects().nodes.iter().map(|n| n.name_any()).collect();
        assert_eq!(names, ["n2"]);
    }

    #[test]
    fn status_writes_are_visible_and_revertible() {
        let mut c = synced_cache();
        let r = ObjectRef::namespaced("ml", "pg", "uid-pg");
        let status = PodGroupStatus { phase: Some(volcano_api::crd::PodGroupPhase::Inqueue), ..Default::default() };
        let (old, new) = c.set_pod_group_status(&r, &status).unwrap();
        assert_eq!(c.pod_groups.get("ml/pg").unwrap().status, Some(status));
        c.revert_pod_group("ml/pg", &new, old.clone());
        assert!(Arc::ptr_eq(c.pod_groups.get("ml/pg").unwrap(), &old));
        assert!(c.set_pod_group_status(&ObjectRef::namespaced("ml", "pg", "other-uid"), &Default::default()).is_none());
    }
}
