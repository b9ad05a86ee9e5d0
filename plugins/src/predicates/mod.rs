//! The `predicates` plugin: kube-scheduler's node filters, as Volcano's `predicates`
//! plugin runs them.
//!
//! Checks, in the order a failure is reported (the first check that makes a node
//! `UnschedulableAndUnresolvable` wins over the `Unschedulable` ones, so preempt and reclaim
//! see the same code Volcano's aggregated fit error has):
//!
//! 1. NodeUnschedulable (always on): a cordoned node takes only pods tolerating
//!    `node.kubernetes.io/unschedulable:NoSchedule`.
//! 2. NodeAffinity (`predicate.NodeAffinityEnable`): `nodeSelector` and required node
//!    affinity.
//! 3. TaintToleration (`predicate.TaintTolerationEnable`): every `NoSchedule` and
//!    `NoExecute` taint must be tolerated.
//!    Then the volume checks ([`volumes`]): VolumeBinding (`predicate.VolumeBindingEnable`)
//!    and VolumeZone (`predicate.VolumeZoneEnable`), `UnschedulableAndUnresolvable`, then
//!    NodeVolumeLimits (`predicate.NodeVolumeLimitsEnable`), `Unschedulable`.
//! 4. InterPodAffinity (`predicate.PodAffinityEnable`): required affinity and
//!    anti-affinity of the pod, and the required anti-affinity of the pods already placed
//!    (see [`crate::interpod`], which keeps the counts per topology domain for the session).
//! 5. PodTopologySpread (`predicate.PodTopologySpreadEnable`): `DoNotSchedule` constraints.
//! 6. Pod count (always on): a node holds at most its allocatable `pods`.
//! 7. NodePorts (`predicate.NodePortsEnable`): no host port conflict with the tasks
//!    already on the node.
//!
//! Resource fit is not checked here: the actions compare the request with the node's idle
//! resources themselves. Nothing here allocates unless a check fails.
//!
//! Checks 1–3 read only the node's labels, taints and `unschedulable`, which a session does
//! not change, and the pod's selector, node affinity and tolerations, which are part of its
//! shape: their verdict on every node is computed once per session for each distinct
//! selector, affinity and tolerations, the first time a task of a shape is checked
//! ([`StaticVerdicts`]), and read from there afterwards.

use crate::interpod::{Mode, Topology};
use crate::matching;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use std::borrow::Cow;
use volcano_api::conf::PluginOption;
use volcano_framework::{
    ArgsError, FixedFailures, Hooks, Incremental, NodeDomains, NodeId, Plugin, PluginBuilder, SessionContext, Snapshot,
    Status, TaskId,
};

mod args;
#[cfg(test)]
mod tests;
pub mod volumes;

pub(crate) use args::unknown_key;
pub use args::{Args, Enabled, ShapePoint, KEYS};

/// Configuration name.
pub const NAME: &str = "predicates";

/// Reason of NodeUnschedulable (`UnschedulableAndUnresolvable`).
pub const REASON_UNSCHEDULABLE: &str = "node(s) were unschedulable";
/// Reason of NodeAffinity (`UnschedulableAndUnresolvable`).
pub const REASON_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
/// Reason of the pod-count check (`Unschedulable`, Volcano's wording).
pub const REASON_POD_NUMBER: &str = "node(s) pod number exceeded";
/// Reason of NodePorts (`Unschedulable`).
pub const REASON_NODE_PORTS: &str = "node(s) didn't have free ports for the requested pod ports";

/// The reason of TaintToleration for an untolerated taint (`UnschedulableAndUnresolvable`).
pub fn untolerated_taint_reason(key: &str, value: &str) -> String {
    format!("node(s) had untolerated taint {{{key}: {value}}}")
}

/// The plugin for one session: the resolved switches, and the inter-pod counts of the
/// session when pod affinity or topology spread is checked.
#[derive(Debug)]
pub struct Predicates {
    enabled: Enabled,
    topology: Option<Topology>,
    statics: StaticChecks,
}

/// The verdicts of checks 1–3 (NodeUnschedulable, NodeAffinity, TaintToleration) of one
/// selector, required node affinity and tolerations on every node: per node, 0 when they
/// pass, else 1 + the index of the first failure's reason (a [`FixedFailures`]).
#[derive(Debug)]
pub struct StaticVerdicts {
    /// The failures by node: the plugin's [`Incremental::fixed_failures`], since the static
    /// checks come first and a session changes nothing they read.
    fails: Arc<FixedFailures>,
    /// Some node fails.
    any: bool,
}

impl StaticVerdicts {
    /// The verdict on a node.
    fn verdict(&self, node: NodeId) -> Result<(), Status> {
        match self.fails.of_node[node.idx()] {
            0 => Ok(()),
            r => Err(Status::unresolvable(NAME, self.fails.reasons[r as usize - 1].clone())),
        }
    }
}

/// The session's [`StaticVerdicts`]: per task shape, set the first time a task of the shape
/// is checked, merged from the verdicts of its parts, each computed once per distinct
/// value: the node selector, the required node affinity, the tolerations. The parts read
/// the nodes only, so they are kept with the snapshot from one session to the next while
/// its nodes do not change ([`volcano_framework::snapshot::NodeDerived`]).
#[derive(Debug, Default)]
struct StaticChecks {
    by_shape: Vec<OnceLock<Arc<StaticVerdicts>>>,
    parts: Arc<Mutex<StaticParts>>,
}

/// The most parts kept from one session to the next: beyond that (selectors naming single
/// hosts, say) the next session starts afresh, so the kept verdicts stay a few MiB.
const KEPT_PARTS: usize = 4096;

/// The verdicts of the parts of the static checks, by the part's value as text.
#[derive(Debug, Default)]
struct StaticParts {
    /// Whether the node selector matches each node.
    selectors: HashMap<String, Arc<Vec<bool>>>,
    /// Whether some term of the required node affinity matches each node.
    required: HashMap<String, Arc<Vec<bool>>>,
    /// What the tolerations leave failing on each node.
    tolerations: HashMap<String, Arc<TolerationVerdicts>>,
    /// The verdicts of each (selector, required terms, tolerations) met, by the addresses of
    /// their parts above (0 for none): shapes that differ in nothing these read share one,
    /// and so one [`FixedFailures`] (the node index then knows them for equal at once).
    merged: HashMap<(usize, usize, usize), Arc<StaticVerdicts>>,
    /// The nodes' labels, for the selectors and terms.
    labels: crate::node_labels::LabelIndex,
}

impl StaticParts {
    /// The number of verdicts kept.
    fn len(&self) -> usize {
        self.selectors.len() + self.required.len() + self.tolerations.len() + self.merged.len()
    }
}

/// What a pod's tolerations leave failing on each node: NodeUnschedulable, and the
/// first untolerated `NoSchedule`/`NoExecute` taint (1 + index into `reasons`, 0 for none).
#[derive(Debug)]
struct TolerationVerdicts {
    unschedulable: Vec<bool>,
    taint: Vec<u32>,
    reasons: Vec<String>,
}

impl Predicates {
    /// A plugin with these checks.
    pub fn new(enabled: Enabled) -> Self {
        Predicates { enabled, topology: None, statics: StaticChecks::default() }
    }

    /// The checks this plugin runs.
    pub fn enabled(&self) -> Enabled {
        self.enabled
    }

    fn host_ports_conflict(snap: &Snapshot, task: TaskId, node: NodeId) -> bool {
        let pod = &snap.task(task).pod;
        let mut wanted = matching::host_ports(pod).peekable();
        if wanted.peek().is_none() {
            return false;
        }
        let node = snap.node(node);
        for want in wanted {
            for &other in node.tasks.iter() {
                if other == task {
                    continue;
                }
                if matching::host_ports(&snap.task(other).pod).any(|used| matching::ports_conflict(want, used)) {
                    return true;
                }
            }
        }
        false
    }
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::PREDICATE | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        // The parts depend on the nodes and on the checks enabled (the key says which).
        let key = format!(
            "predicates/static-parts/{}{}",
            u8::from(self.enabled.node_affinity),
            u8::from(self.enabled.taint_toleration)
        );
        let kept: Arc<Mutex<Arc<Mutex<StaticParts>>>> =
            snap.node_derived().get_or_insert_with(&key, || Mutex::new(Arc::default()));
        let parts = {
            let mut current = kept.lock().unwrap_or_else(|e| e.into_inner());
            if current.lock().unwrap_or_else(|e| e.into_inner()).len() > KEPT_PARTS {
                *current = Arc::default();
            }
            current.clone()
        };
        self.statics = StaticChecks { by_shape: (0..snap.shape_count()).map(|_| OnceLock::new()).collect(), parts };
        self.topology = None;
        if self.enabled.pod_affinity || self.enabled.pod_topology_spread {
            let topology = Topology::open(snap, Mode::Filter);
            if !topology.is_empty() {
                self.topology = Some(topology);
            }
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {
        if let Some(t) = self.topology.as_mut() {
            t.on_allocate(snap, task);
        }
    }

    fn on_deallocate(&mut self, snap: &Snapshot, task: TaskId) {
        if let Some(t) = self.topology.as_mut() {
            t.on_deallocate(snap, task);
        }
    }

    fn predicate(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        self.check(snap, task, node, false)
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Predicates {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn drain_touched(&mut self, out: &mut Vec<NodeId>) {
        if let Some(t) = self.topology.as_mut() {
            t.drain_touched(out);
        }
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // Every check reads the node and the pod's selector, affinity, tolerations, topology
        // spread constraints and host ports, and the inter-pod counts, whose changes are
        // reported through `drain_touched`; the pod's labels enter through `shape_key`.
        true
    }

    fn rule_exceptions(&self, _snap: &Snapshot, task: TaskId, out: &mut Vec<NodeId>) -> bool {
        self.topology.as_ref().is_none_or(|t| t.rule_exceptions(task, out))
    }

    fn fit_only_narrows(&self, snap: &Snapshot, task: TaskId) -> bool {
        // Checks 1-3 read what does not change; the pod count, the host ports, the volume
        // limits and the anti-affinity of the pods already placed only refuse more as pods
        // join. The pod's own affinity, anti-affinity and spread constraints read the pods
        // of other nodes (and affinity accepts more as pods join), and claims bind volumes
        // that other pods then cannot use: those tasks are left out.
        let pod = &snap.task(task).pod;
        let own_rules = pod.spec.as_ref().is_some_and(|s| {
            s.affinity.as_ref().is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
                || s.topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty())
        });
        !own_rules && !volumes::has_claims(pod)
    }

    fn shape_key(&self, _snap: &Snapshot, task: TaskId) -> u64 {
        self.topology.as_ref().map_or(0, |t| t.shape_key(task))
    }

    fn fixed_failures(&self, snap: &Snapshot, task: TaskId) -> Option<Arc<FixedFailures>> {
        // Checks 1–3 come first and read only what a session does not change (see the
        // module docs).
        let verdicts = self.static_verdicts(snap, task)?;
        verdicts.any.then(|| verdicts.fails.clone())
    }

    fn evaluation_key(&self, snap: &Snapshot, task: TaskId) -> Option<u64> {
        // Past checks 1–3 (the fixed failures), the checks read the node's state and, of the
        // task, only its claims, its inter-pod rules and its host ports: tasks without any
        // of these get the same answers. Host ports would read the task itself (a pod does
        // not conflict with itself), so such tasks share nothing.
        self.static_verdicts(snap, task)?;
        let t = snap.task(task);
        let enabled = self.enabled;
        let claims = (enabled.volume_binding || enabled.volume_zone || enabled.node_volume_limits)
            && volumes::has_claims(&t.pod);
        let rules = self.topology.as_ref().is_some_and(|topology| topology.shape_key(task) != 0);
        let ports = enabled.node_ports && matching::host_ports(&t.pod).next().is_some();
        (!claims && !rules && !ports).then_some(0)
    }

    fn domain_rules(&self, _snap: &Snapshot, task: TaskId) -> Option<Arc<NodeDomains>> {
        if !(self.enabled.pod_affinity || self.enabled.pod_topology_spread) {
            return None;
        }
        self.topology.as_ref()?.domain_rules(task)
    }

    fn domain_verdicts(&self, _snap: &Snapshot, task: TaskId, out: &mut [Option<Cow<'static, str>>]) {
        if let Some(t) = &self.topology {
            t.domain_verdicts(task, self.enabled.pod_affinity, self.enabled.pod_topology_spread, out);
        }
    }

    fn predicate_without_domain_rules(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        self.check(snap, task, node, true)
    }
}

impl Predicates {
    /// Checks 1–3 (see the module docs) of a task on a node.
    fn static_check(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        let t = snap.task(task);
        let n = snap.node(node);
        let spec = t.pod.spec.as_ref();
        let tolerations = matching::pod_tolerations(&t.pod);

        if n.unschedulable
            && !matching::tolerations_tolerate(
                tolerations,
                matching::TAINT_NODE_UNSCHEDULABLE,
                "",
                matching::EFFECT_NO_SCHEDULE,
            )
        {
            return Err(Status::unresolvable(NAME, REASON_UNSCHEDULABLE));
        }

        if self.enabled.node_affinity {
            if let Some(spec) = spec.filter(|s| matching::has_required_node_constraints(s)) {
                if !matching::required_node_affinity_matches(spec, n.labels(), &n.name) {
                    return Err(Status::unresolvable(NAME, REASON_NODE_AFFINITY));
                }
            }
        }

        if self.enabled.taint_toleration && n.has_taints {
            let taints = n.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
            if let Some(taint) = matching::first_untolerated_taint(taints, tolerations) {
                let reason = untolerated_taint_reason(&taint.key, taint.value.as_deref().unwrap_or(""));
                return Err(Status::unresolvable(NAME, reason));
            }
        }
        Ok(())
    }

    /// The static verdicts of a task's shape, computed on first use (`None` without shapes):
    /// the verdicts of [`Predicates::static_check`], from those of its parts.
    fn static_verdicts(&self, snap: &Snapshot, task: TaskId) -> Option<&StaticVerdicts> {
        let cell = self.statics.by_shape.get(snap.task(task).shape as usize)?;
        Some(cell.get_or_init(|| self.merge_static_parts(snap, task)))
    }

    fn merge_static_parts(&self, snap: &Snapshot, task: TaskId) -> Arc<StaticVerdicts> {
        let pod = &snap.task(task).pod;
        let spec = pod.spec.as_ref();
        let tolerations = matching::pod_tolerations(pod);
        let nodes = snap.nodes.len();
        let (selector, required, tolerated, key) = {
            let mut parts = self.statics.parts.lock().unwrap_or_else(|e| e.into_inner());
            let selector =
                spec.and_then(|s| s.node_selector.as_ref()).filter(|_| self.enabled.node_affinity).map(|sel| {
                    let StaticParts { selectors, labels, .. } = &mut *parts;
                    selectors
                        .entry(format!("{sel:?}"))
                        .or_insert_with(|| Arc::new(labels.selector_matches(snap, sel)))
                        .clone()
                });
            let terms = spec
                .and_then(|s| s.affinity.as_ref())
                .and_then(|a| a.node_affinity.as_ref())
                .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref())
                .filter(|_| self.enabled.node_affinity);
            let required = terms.map(|ns| {
                let StaticParts { required, labels, .. } = &mut *parts;
                required
                    .entry(format!("{ns:?}"))
                    .or_insert_with(|| {
                        // Some term matches.
                        let mut any = vec![false; snap.nodes.len()];
                        for t in &ns.node_selector_terms {
                            for (a, m) in any.iter_mut().zip(labels.term_matches(snap, t)) {
                                *a |= m;
                            }
                        }
                        Arc::new(any)
                    })
                    .clone()
            });
            let tolerated = parts
                .tolerations
                .entry(format!("{tolerations:?}"))
                .or_insert_with(|| Arc::new(self.toleration_verdicts(snap, tolerations)))
                .clone();
            let address = |a: Option<&Arc<Vec<bool>>>| a.map_or(0, |a| Arc::as_ptr(a) as usize);
            let key = (address(selector.as_ref()), address(required.as_ref()), Arc::as_ptr(&tolerated) as usize);
            if let Some(known) = parts.merged.get(&key) {
                return known.clone();
            }
            (selector, required, tolerated, key)
        };
        // The first failure in the order of `static_check`.
        let mut reasons: Vec<String> = vec![REASON_UNSCHEDULABLE.into(), REASON_NODE_AFFINITY.into()];
        reasons.extend(tolerated.reasons.iter().cloned());
        let of_node = (0..nodes)
            .map(|i| {
                if tolerated.unschedulable[i] {
                    1
                } else if selector.as_ref().is_some_and(|s| !s[i]) || required.as_ref().is_some_and(|r| !r[i]) {
                    2
                } else if tolerated.taint[i] > 0 {
                    2 + tolerated.taint[i]
                } else {
                    0
                }
            })
            .collect::<Vec<u32>>();
        let any = of_node.iter().any(|&v| v != 0);
        let verdicts = Arc::new(StaticVerdicts { fails: Arc::new(FixedFailures { of_node, reasons }), any });
        let mut parts = self.statics.parts.lock().unwrap_or_else(|e| e.into_inner());
        parts.merged.entry(key).or_insert(verdicts).clone()
    }

    /// What these tolerations leave failing on every node (see [`TolerationVerdicts`]).
    fn toleration_verdicts(
        &self,
        snap: &Snapshot,
        tolerations: &[k8s_openapi::api::core::v1::Toleration],
    ) -> TolerationVerdicts {
        let mut reasons: Vec<String> = Vec::new();
        let mut unschedulable = Vec::with_capacity(snap.nodes.len());
        let mut taint = Vec::with_capacity(snap.nodes.len());
        for n in snap.nodes.iter() {
            unschedulable.push(
                n.unschedulable
                    && !matching::tolerations_tolerate(
                        tolerations,
                        matching::TAINT_NODE_UNSCHEDULABLE,
                        "",
                        matching::EFFECT_NO_SCHEDULE,
                    ),
            );
            let mut id = 0;
            if self.enabled.taint_toleration && n.has_taints {
                let taints = n.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
                if let Some(t) = matching::first_untolerated_taint(taints, tolerations) {
                    let reason = untolerated_taint_reason(&t.key, t.value.as_deref().unwrap_or(""));
                    id = match reasons.iter().position(|r| *r == reason) {
                        Some(r) => r as u32 + 1,
                        None => {
                            reasons.push(reason);
                            reasons.len() as u32
                        }
                    };
                }
            }
            taint.push(id);
        }
        TolerationVerdicts { unschedulable, taint, reasons }
    }

    /// The predicate; without the task's domain rules when `base` (see
    /// [`Topology::domain_rules`]).
    fn check(&self, snap: &Snapshot, task: TaskId, node: NodeId, base: bool) -> Result<(), Status> {
        match self.static_verdicts(snap, task) {
            Some(verdicts) => verdicts.verdict(node)?,
            None => self.static_check(snap, task, node)?,
        }
        let n = snap.node(node);

        volumes::check(self.enabled, snap, task, n)?;

        if let Some(topology) = &self.topology {
            if self.enabled.pod_affinity {
                topology.check_affinity(task, node, base)?;
            }
            if self.enabled.pod_topology_spread {
                topology.check_spread(task, node, base)?;
            }
        }

        // Volcano: `node.Allocatable.MaxTaskNum <= len(nodeInfo.Pods)`.
        if n.allocatable.get(volcano_framework::resource::PODS) <= n.tasks.len() as f64 {
            return Err(Status::unschedulable(NAME, REASON_POD_NUMBER));
        }

        if self.enabled.node_ports && Self::host_ports_conflict(snap, task, node) {
            return Err(Status::unschedulable(NAME, REASON_NODE_PORTS));
        }
        Ok(())
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let enabled = Args::parse(&opt.arguments)?.resolve();
    Ok(Arc::new(move || Box::new(Predicates::new(enabled)) as Box<dyn Plugin>))
}
