//! The HyperNode controller: applies [`crate::hypernode`] to the API. It decides nothing
//! itself.
//!
//! It runs on the leading replica, once the API server serves HyperNodes
//! (`topology.volcano.sh/v1alpha1`; checked every minute until then). It watches the nodes
//! (their metadata only), the HyperNodes and the discovery ConfigMap (one object, by name, in
//! the controller's namespace), and makes a pass:
//! - when a node comes, goes or changes its labels, a HyperNode comes, goes or changes (spec,
//!   labels or `status.nodeCount`), or the ConfigMap changes, [`DEBOUNCE`] after the first
//!   such change (the changes meanwhile make one pass);
//! - every `interval` of the `label` source (an hour when unset), or an hour without one;
//! - after a failed API call, with back-off (`volcano_kube::retry_backoff`).
//!
//! A pass reads the configuration ([`crate::hypernode::parse_config`]; a configuration that
//! does not parse is reported and the last good one kept, a missing ConfigMap discovers
//! nothing), and with the `label` source enabled creates, updates (merge patches of the spec
//! and the discovery labels) and deletes the HyperNodes labelled
//! `volcano.sh/network-topology-source: label`, lower tiers created first and higher ones
//! deleted first. It then writes the `status.nodeCount` of every HyperNode whose count
//! changed, discovered or not (as Volcano's HyperNode controller does).
//!
//! Configuration errors and warnings (a source volcano-rs does not run, a member in two
//! HyperNodes of one tier) are logged and recorded as Warning events on the ConfigMap once
//! each, until they change; a failed API call is logged and recorded on the HyperNode.
//! Disabling the source, or deleting the ConfigMap, stops discovery and leaves the
//! HyperNodes as they are (as in Volcano).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, ObjectReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use volcano_api::topology::HyperNode;
use volcano_kube::status_code as code;

use crate::hypernode::{self, DiscoveryConfig, NodeLabels, CONFIG_KEY, DEFAULT_INTERVAL, LABEL_SOURCE};

/// The quiet time after a change before a pass (the changes meanwhile make one pass).
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// The reasons of the controller's events.
pub mod reason {
    /// The discovery configuration does not parse (the last good one is kept).
    pub const CONFIG_ERROR: &str = "DiscoveryConfigError";
    /// The configuration asks for something volcano-rs does not do (another source).
    pub const CONFIG_WARNING: &str = "DiscoveryConfigWarning";
    /// The node labels put a member in two HyperNodes of one tier.
    pub const LABEL_CONFLICT: &str = "HyperNodeLabelConflict";
    /// A HyperNode could not be created, updated, deleted or its status written.
    pub const SYNC_FAILED: &str = "HyperNodeSyncFailed";
}

/// What the passes share: the stores, the client, what was last read and reported.
pub struct DiscoveryContext {
    /// The client.
    pub client: Client,
    /// The nodes (metadata).
    pub nodes: Store<PartialObjectMeta<Node>>,
    /// The HyperNodes.
    pub hyper_nodes: Store<HyperNode>,
    /// The discovery ConfigMap (the store holds that one only).
    pub config_maps: Store<ConfigMap>,
    /// Its namespace and name.
    pub config_map: (String, String),
    recorder: Recorder,
    memory: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    /// The last configuration read, with its text: the one used while a newer text does not
    /// parse.
    good: Option<(Option<String>, DiscoveryConfig)>,
    /// What was last recorded, by reason: not recorded again while unchanged.
    reported: BTreeMap<&'static str, String>,
    /// Failed passes in a row.
    failures: u32,
}

/// What a pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Whether the `label` source ran.
    pub discovered: bool,
    /// HyperNodes created.
    pub created: usize,
    /// HyperNodes updated.
    pub updated: usize,
    /// HyperNodes deleted.
    pub deleted: usize,
    /// `status.nodeCount` written.
    pub counted: usize,
    /// API calls that failed.
    pub failed: usize,
    /// When the next pass is due if nothing changes.
    pub next: Duration,
}

/// `api_version`, `kind` and `name` of a HyperNode, for its events.
fn hyper_node_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some(HyperNode::api_version(&()).into_owned()),
        kind: Some(HyperNode::kind(&()).into_owned()),
        name: Some(name.to_string()),
        ..Default::default()
    }
}

impl DiscoveryContext {
    /// A context over the stores; the events go through `recorder`.
    pub fn new(
        client: Client,
        nodes: Store<PartialObjectMeta<Node>>,
        hyper_nodes: Store<HyperNode>,
        config_maps: Store<ConfigMap>,
        config_map: (String, String),
        recorder: Recorder,
    ) -> Self {
        DiscoveryContext {
            client,
            nodes,
            hyper_nodes,
            config_maps,
            config_map,
            recorder,
            memory: Mutex::new(Memory::default()),
        }
    }

    fn memory<T>(&self, f: impl FnOnce(&mut Memory) -> T) -> T {
        f(&mut self.memory.lock().expect("hypernode discovery memory lock"))
    }

    /// Records `message` under `reason` on `reference` unless it is the one last recorded
    /// under that reason; `None` forgets the reason's last message.
    async fn report(&self, reason: &'static str, message: Option<String>, reference: Option<ObjectReference>) {
        let fresh = self.memory(|m| match &message {
            None => {
                m.reported.remove(reason);
                false
            }
            Some(msg) => m.reported.insert(reason, msg.clone()).as_ref() != Some(msg),
        });
        if let (true, Some(msg)) = (fresh, message) {
            tracing::warn!(reason, "{msg}");
            if let Some(r) = reference {
                self.record(reason, &msg, &r).await;
            }
        }
    }

    async fn record(&self, reason: &str, message: &str, reference: &ObjectReference) {
        let ev = Event {
            type_: EventType::Warning,
            reason: reason.to_string(),
            note: Some(volcano_kube::event_note(message)),
            action: reason.to_string(),
            secondary: None,
        };
        match tokio::time::timeout(Duration::from_secs(5), self.recorder.publish(&ev, reference)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!(object = ?reference.name, "event not recorded: {e}"),
            Err(_) => tracing::debug!(object = ?reference.name, "event not recorded: timed out"),
        }
    }

    /// The configuration to use: the ConfigMap's if it parses, else the last good one (none:
    /// nothing discovered). Reports a configuration error or warnings when they change.
    async fn config(&self) -> DiscoveryConfig {
        let (ns, name) = &self.config_map;
        let cm = self.config_maps.get(&ObjectRef::new(name).within(ns));
        let Some(cm) = cm else {
            // No ConfigMap: nothing to discover (Volcano's empty configuration).
            self.memory(|m| m.good = Some((None, DiscoveryConfig::default())));
            self.report(reason::CONFIG_ERROR, None, None).await;
            self.report(reason::CONFIG_WARNING, None, None).await;
            return DiscoveryConfig::default();
        };
        let reference = cm.object_ref(&());
        let text = cm.data.as_ref().and_then(|d| d.get(CONFIG_KEY)).cloned();
        let known = self.memory(|m| m.good.as_ref().filter(|(t, _)| t.is_some() && *t == text).map(|(_, c)| c.clone()));
        let parsed = match (known, &text) {
            (Some(c), _) => Ok(c),
            (None, None) => Err(format!(
                "ConfigMap {ns}/{name} has no key {CONFIG_KEY}: HyperNode discovery keeps its last good configuration"
            )),
            (None, Some(t)) => hypernode::parse_config(t)
                .map_err(|e| format!("{e}; HyperNode discovery keeps its last good configuration")),
        };
        match parsed {
            Ok(cfg) => {
                self.memory(|m| m.good = Some((text, cfg.clone())));
                self.report(reason::CONFIG_ERROR, None, None).await;
                let warnings = (!cfg.warnings.is_empty()).then(|| cfg.warnings.join("; "));
                self.report(reason::CONFIG_WARNING, warnings, Some(reference)).await;
                cfg
            }
            Err(msg) => {
                self.report(reason::CONFIG_ERROR, Some(msg), Some(reference)).await;
                self.memory(|m| m.good.as_ref().map(|(_, c)| c.clone())).unwrap_or_default()
            }
        }
    }
}

/// One pass: discovery (when the `label` source is enabled), then the node counts. API
/// errors are logged and recorded; the pass goes on with the other objects.
pub async fn reconcile_once(ctx: &DiscoveryContext) -> Pass {
    let cfg = ctx.config().await;
    let node_metas = ctx.nodes.state();
    let empty = BTreeMap::new();
    let nodes: Vec<NodeLabels<'_>> = node_metas
        .iter()
        .map(|n| NodeLabels {
            name: n.metadata.name.as_deref().unwrap_or_default(),
            labels: n.metadata.labels.as_ref().unwrap_or(&empty),
        })
        .collect();
    let existing: Vec<HyperNode> = ctx.hyper_nodes.state().iter().map(|h| (**h).clone()).collect();
    let api: Api<HyperNode> = Api::all(ctx.client.clone());
    let mut pass = Pass::default();
    let mut failures: Vec<(String, String)> = Vec::new();

    let mut after = existing.clone();
    if let Some(label) = &cfg.label {
        pass.discovered = true;
        let found = hypernode::discover(label, &nodes, &existing);
        let conflicts = (!found.warnings.is_empty()).then(|| found.warnings.join("; "));
        let cm_ref = {
            let (ns, name) = &ctx.config_map;
            ctx.config_maps.get(&ObjectRef::new(name).within(ns)).map(|cm| cm.object_ref(&()))
        };
        ctx.report(reason::LABEL_CONFLICT, conflicts, cm_ref).await;
        let changes = hypernode::diff(LABEL_SOURCE, &found.hyper_nodes, &existing);
        for h in &changes.create {
            let name = h.name_any();
            match api.create(&PostParams::default(), h).await {
                Ok(_) => {
                    pass.created += 1;
                    tracing::info!(hypernode = %name, tier = h.spec.tier, "HyperNode discovered");
                }
                Err(e) => failures.push((name.clone(), format!("create HyperNode {name}: {e}"))),
            }
        }
        for h in &changes.update {
            let name = h.name_any();
            let patch = serde_json::json!({
                "metadata": { "labels": h.metadata.labels },
                "spec": { "tier": h.spec.tier, "tierName": h.spec.tier_name, "members": h.spec.members },
            });
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    pass.updated += 1;
                    tracing::info!(hypernode = %name, members = h.spec.members.len(), "HyperNode members updated");
                }
                Err(e) => failures.push((name.clone(), format!("update HyperNode {name}: {e}"))),
            }
        }
        for name in &changes.delete {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    pass.deleted += 1;
                    tracing::info!(hypernode = %name, "HyperNode no longer discovered: deleted");
                }
                Err(e) if code(&e) == Some(404) => pass.deleted += 1,
                Err(e) => failures.push((name.clone(), format!("delete HyperNode {name}: {e}"))),
            }
        }
        after = hypernode::apply(&existing, &changes);
    } else {
        ctx.report(reason::LABEL_CONFLICT, None, None).await;
    }

    let counts = hypernode::node_counts(&after, &nodes);
    for (name, count) in hypernode::status_updates(&after, &counts) {
        let patch = serde_json::json!({ "status": { "nodeCount": count } });
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => pass.counted += 1,
            // Deleted meanwhile, or its create failed (reported above).
            Err(e) if code(&e) == Some(404) => {}
            Err(e) => failures.push((name.clone(), format!("write the nodeCount of HyperNode {name}: {e}"))),
        }
    }

    pass.failed = failures.len();
    for (name, msg) in &failures {
        tracing::warn!(hypernode = %name, reason = reason::SYNC_FAILED, "{msg}");
        ctx.record(reason::SYNC_FAILED, msg, &hyper_node_ref(name)).await;
    }
    let interval = cfg.label.as_ref().map_or(DEFAULT_INTERVAL, |l| l.interval);
    pass.next = ctx.memory(|m| {
        if failures.is_empty() {
            m.failures = 0;
            interval
        } else {
            m.failures = m.failures.saturating_add(1);
            volcano_kube::retry_backoff(m.failures).min(interval)
        }
    });
    if pass.created + pass.updated + pass.deleted + pass.failed > 0 {
        tracing::info!(
            created = pass.created,
            updated = pass.updated,
            deleted = pass.deleted,
            counted = pass.counted,
            failed = pass.failed,
            "HyperNode discovery pass"
        );
    }
    pass
}

/// Follows a watch and says which events matter: an object added or deleted, or whose
/// fingerprint (what a pass reads of it) changed; a re-list matters when it changed anything.
pub struct Changed<F> {
    last: HashMap<String, F>,
    relist: Option<HashMap<String, F>>,
}

impl<F> Default for Changed<F> {
    fn default() -> Self {
        Changed { last: HashMap::new(), relist: None }
    }
}

impl<F: PartialEq> Changed<F> {
    /// Whether `event` changes what a pass reads.
    pub fn follow<K: Resource>(&mut self, event: &watcher::Event<K>, fingerprint: impl Fn(&K) -> F) -> bool {
        let key = |o: &K| {
            format!(
                "{}/{}",
                o.meta().namespace.as_deref().unwrap_or_default(),
                o.meta().name.as_deref().unwrap_or_default()
            )
        };
        match event {
            watcher::Event::Apply(o) => {
                let f = fingerprint(o);
                let same = self.last.get(&key(o)) == Some(&f);
                self.last.insert(key(o), f);
                !same
            }
            watcher::Event::Delete(o) => {
                self.last.remove(&key(o));
                true
            }
            watcher::Event::Init => {
                self.relist = Some(HashMap::new());
                false
            }
            watcher::Event::InitApply(o) => {
                self.relist.get_or_insert_with(HashMap::new).insert(key(o), fingerprint(o));
                false
            }
            watcher::Event::InitDone => {
                let fresh = self.relist.take().unwrap_or_default();
                let changed = fresh != self.last;
                self.last = fresh;
                changed
            }
        }
    }
}

/// Whether the API server serves HyperNodes.
pub async fn served(client: &Client) -> Result<bool, kube::Error> {
    let gv = HyperNode::api_version(&());
    match client.list_api_group_resources(&gv).await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "hypernodes")),
        Err(e) if code(&e) == Some(404) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Runs the HyperNode controller until `until` resolves: waits for HyperNodes to be served,
/// watches, and makes the passes. `config_map` is the discovery ConfigMap's namespace and
/// name.
pub async fn run(
    client: Client,
    config_map: (String, String),
    recorder: Recorder,
    until: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let mut said = false;
    loop {
        match served(&client).await {
            Ok(true) => break,
            Ok(false) => {
                if !said {
                    said = true;
                    tracing::info!(
                        "HyperNodes are not served (the topology.volcano.sh CRD is not installed: \
                         deploy/crds/topology.volcano.sh_hypernodes.yaml); HyperNode discovery starts once they are \
                         (checked every minute)"
                    );
                }
            }
            Err(e) => tracing::warn!(
                "HyperNodes not served: API discovery of topology.volcano.sh/v1alpha1 failed (trying again in a minute): {e}"
            ),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            _ = until.clone() => return,
        }
    }
    let cfg = || watcher::Config::default().any_semantic();
    let (tx, mut rx) = mpsc::unbounded_channel::<()>();
    let (nodes, nodes_w) = reflector::store::<PartialObjectMeta<Node>>();
    let node_tx = tx.clone();
    let mut node_seen = Changed::default();
    let node_task = tokio::spawn(
        reflector::reflector(nodes_w, watcher::watcher(Api::<PartialObjectMeta<Node>>::all(client.clone()), cfg()))
            .backoff(volcano_kube::WatchBackoff::new())
            .for_each(move |ev| {
                if let Ok(ev) = ev {
                    if node_seen.follow(&ev, |n| n.metadata.labels.clone()) {
                        let _ = node_tx.send(());
                    }
                }
                async {}
            }),
    );
    let (hyper_nodes, hns_w) = reflector::store::<HyperNode>();
    let hn_tx = tx.clone();
    let mut hn_seen = Changed::default();
    let hn_task = tokio::spawn(
        reflector::reflector(hns_w, watcher::watcher(Api::<HyperNode>::all(client.clone()), cfg()))
            .backoff(volcano_kube::WatchBackoff::new())
            .for_each(move |ev| {
                if let Ok(ev) = ev {
                    let fingerprint = |h: &HyperNode| {
                        (h.metadata.generation, h.metadata.labels.clone(), h.status.as_ref().and_then(|s| s.node_count))
                    };
                    if hn_seen.follow(&ev, fingerprint) {
                        let _ = hn_tx.send(());
                    }
                }
                async {}
            }),
    );
    let (ns, name) = config_map.clone();
    let (config_maps, cms_w) = reflector::store::<ConfigMap>();
    let cm_tx = tx;
    let mut cm_seen = Changed::default();
    let cm_task = tokio::spawn(
        reflector::reflector(
            cms_w,
            watcher::watcher(
                Api::<ConfigMap>::namespaced(client.clone(), &ns),
                cfg().fields(&format!("metadata.name={name}")),
            ),
        )
        .backoff(volcano_kube::WatchBackoff::new())
        .for_each(move |ev| {
            if let Ok(ev) = ev {
                if cm_seen.follow(&ev, |cm: &ConfigMap| cm.data.as_ref().and_then(|d| d.get(CONFIG_KEY)).cloned()) {
                    let _ = cm_tx.send(());
                }
            }
            async {}
        }),
    );
    let ctx = DiscoveryContext::new(client, nodes, hyper_nodes, config_maps, config_map, recorder);
    let ready = async {
        let _ = ctx.nodes.wait_until_ready().await;
        let _ = ctx.hyper_nodes.wait_until_ready().await;
        let _ = ctx.config_maps.wait_until_ready().await;
    };
    let started = tokio::select! {
        _ = ready => true,
        _ = until.clone() => false,
    };
    if started {
        tracing::info!(configmap = %format!("{ns}/{name}"), "the HyperNode controller starts");
        // The first lists are read by the first pass.
        while rx.try_recv().is_ok() {}
        let mut next = Duration::ZERO;
        loop {
            tokio::select! {
                got = rx.recv() => {
                    if got.is_none() {
                        break;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(DEBOUNCE) => {}
                        _ = until.clone() => break,
                    }
                    while rx.try_recv().is_ok() {}
                }
                _ = tokio::time::sleep(next) => {}
                _ = until.clone() => break,
            }
            next = reconcile_once(&ctx).await.next;
        }
    }
    node_task.abort();
    hn_task.abort();
    cm_task.abort();
    tracing::info!("the HyperNode controller stopped");
}
