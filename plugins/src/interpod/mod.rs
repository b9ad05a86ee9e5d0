//! Inter-pod affinity and pod topology spread, as kube-scheduler's InterPodAffinity and
//! PodTopologySpread plugins define them, over the whole session.
//!
//! kube-scheduler computes, for each pod it schedules, the counts of matching pods per
//! topology domain (its PreFilter and PreScore state) and updates them as it tries pods on
//! nodes. A session places thousands of pods, so [`Topology`] keeps those counts once for
//! the session instead: at session open it compiles the rules of every pending pod and the
//! terms every pod holds, and keeps, per rule, a counter of matching pods per domain
//! ([`Counter`]), updated by the event handlers as pods are placed, evicted or rolled back.
//! A predicate or a score is then a few array reads per rule, and the pods of one gang see
//! each other's placements within the cycle.
//!
//! - Required affinity: every term's topology key must be on the node and the domain must
//!   hold a pod matching *all* the terms; a pod may start anywhere (all keys present) when
//!   no pod matches them all and it matches them itself (the first pod of a self-affine
//!   gang). Reason `node(s) didn't match pod affinity rules`, unresolvable by eviction.
//! - Required anti-affinity: no pod matching a term in the node's domain (a node without the
//!   key satisfies the term). `node(s) didn't match pod anti-affinity rules`.
//! - Symmetric anti-affinity: no pod in the node's domain holds a required anti-affinity term
//!   that matches the incoming pod (whatever its scheduler).
//!   `node(s) didn't satisfy existing pods anti-affinity rules`.
//! - `DoNotSchedule` spread: the node has the key, and the matching pods of its domain plus
//!   the pod itself (when it matches) exceed the smallest domain by at most `maxSkew`; the
//!   smallest counts as 0 while there are fewer domains than `minDomains`. Domains and counts
//!   come from the nodes that pass the pod's node affinity (`nodeAffinityPolicy: Honor`, the
//!   default) and taints (`nodeTaintsPolicy: Honor`), and have every key of its constraints.
//!   Terminating pods do not count.
//! - Scores: [`Topology::affinity_raw`] (preferred terms of the pod, ±weight per matching pod
//!   in the domain; the preferred terms and the required affinity terms of other pods that
//!   match it, the latter with kube-scheduler's `hardPodAffinityWeight` 1) and
//!   [`Topology::spread_scores`] (`ScheduleAnyway` constraints), normalised over the
//!   feasible nodes as kube-scheduler normalises them.
//!
//! Pods count where they hold a node in the session: allocated, pipelined, binding, bound,
//! running, and releasing when they were already releasing at session open (kube-scheduler's
//! node snapshot holds terminating pods); a pod evicted in the session stops counting, as
//! Volcano removes it from its node snapshot.

pub mod defaults;
pub mod selector;

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{PodAffinityTerm, PodSpec};
use volcano_framework::pod::SchedPod as Pod;
use volcano_framework::{NodeDomains, NodeId, Snapshot, Status, TaskId, TaskInfo, TaskStatus};

use crate::matching;
pub use selector::{Namespaces, PodMatcher, Selector};

/// The plugin whose predicate these rules are, as a failure names it (the `predicates`
/// plugin's name; a test keeps the two equal).
pub const PLUGIN: &str = "predicates";

/// InterPodAffinity: the node's domain lacks a pod the affinity terms need.
pub const REASON_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// InterPodAffinity: a pod the anti-affinity terms exclude is in the node's domain.
pub const REASON_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// InterPodAffinity: a pod of the node's domain excludes the incoming pod.
pub const REASON_EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// PodTopologySpread: the skew would exceed `maxSkew`.
pub const REASON_SPREAD: &str = "node(s) didn't match pod topology spread constraints";
/// PodTopologySpread: the node lacks a constraint's topology key.
pub const REASON_SPREAD_MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";
/// kube-scheduler's `hardPodAffinityWeight` (InterPodAffinityArgs default): the score a
/// node gets per existing pod whose required affinity matches the incoming pod.
pub const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

const NONE: u32 = NodeDomains::NONE;

/// The most domains a key may have for its rules to be domain rules (see
/// [`Topology::domain_rules`]): a query then reads every domain, while the placement of a
/// pod changes the answers of the nodes of its domain only, so keys with many small
/// domains (racks) are better served by re-evaluating those nodes.
const MAX_SPLIT_DOMAINS: usize = 64;

/// Entries by a label pair (key, then value), looked up without allocating.
type PairIndex<T> = HashMap<String, HashMap<String, Vec<T>>>;

/// A failed rule: its reason, and whether evicting pods cannot cure it.
type Refusal = (&'static str, bool);

/// Nodes whose pods and domains a spread constraint counts, with a hash of them.
type Eligible = (u64, Arc<Vec<bool>>);

/// What a [`Topology`] is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Required rules (the predicates).
    Filter,
    /// Preferred rules and `ScheduleAnyway` spread (the scores).
    Score,
}

/// A topology key: each node's value, and the nodes of each value.
#[derive(Debug)]
struct Key {
    name: String,
    /// Value id per node (`NONE` without the label).
    node_value: Vec<u32>,
    /// Nodes per value id.
    nodes_of_value: Vec<Vec<NodeId>>,
    /// Every value names one node (say `kubernetes.io/hostname`): a domain is a node.
    node_local: bool,
    /// Nodes without the label.
    missing: Vec<NodeId>,
    /// The id of the value `""` (`NONE` when no node has it): a node without the label
    /// has this value for the topology sizes of system-default constraints.
    empty_value: u32,
    /// The nodes' values as a partition, for keys with few values (not node-local, at most
    /// [`MAX_SPLIT_DOMAINS`]).
    partition: Option<Arc<NodeDomains>>,
}

/// What a counter counts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Counted {
    /// Pods matching every matcher (a conjunction of terms).
    Matching(u32),
    /// Pods holding a term (matcher, key) with a weight (0 for required terms).
    Holding(u32, i64),
}

/// Spread bookkeeping of a counter: the domains and the smallest count among them.
#[derive(Debug)]
struct Domains {
    /// Number of domains (values of eligible nodes).
    count: u32,
    /// Per value id: whether it is a domain.
    is_domain: Vec<bool>,
    /// Number of domains per count.
    histogram: BTreeMap<u32, u32>,
}

impl Domains {
    fn min(&self) -> u32 {
        self.histogram.keys().next().copied().unwrap_or(0)
    }

    fn moved(&mut self, from: u32, to: u32) {
        if let Some(n) = self.histogram.get_mut(&from) {
            *n -= 1;
            if *n == 0 {
                self.histogram.remove(&from);
            }
        }
        *self.histogram.entry(to).or_default() += 1;
    }
}

/// Matching pods (or holders of a term) per domain of one topology key.
#[derive(Debug)]
struct Counter {
    counted: Counted,
    key: u32,
    /// Terminating pods do not count (topology spread).
    skip_terminating: bool,
    /// Nodes whose pods count (topology spread's node inclusion); all when `None`.
    eligible: Option<Arc<Vec<bool>>>,
    /// Per value id; empty while no pod is counted (the counters of pending jobs that
    /// wait cost no memory per node).
    counts: Vec<u32>,
    /// The value ids whose count is not 0, in no order.
    nonzero: Vec<u32>,
    /// Σ counts.
    total: u64,
    /// Spread domains, for DoNotSchedule constraints.
    domains: Option<Domains>,
    /// Its changes are reported ([`Topology::drain_touched`]): some rule reads it per node
    /// (not as a domain rule).
    report: bool,
    /// Whether it is empty decides, for some pod, whether its required affinity lets it
    /// start anywhere (the first pod of a self-affine group), per node.
    decides_first: bool,
}

/// A DoNotSchedule constraint of a pod.
#[derive(Clone, Debug, Hash)]
struct HardSpread {
    counter: u32,
    max_skew: i64,
    min_domains: u32,
    self_match: bool,
}

/// A ScheduleAnyway constraint of a pod.
#[derive(Clone, Debug, Hash)]
struct SoftSpread {
    counter: u32,
    max_skew: i64,
}

/// The rules of one pending pod, as counters.
#[derive(Clone, Debug, Default)]
struct Rules {
    /// Required affinity: (counter of pods matching all terms, key) per term.
    affinity: Vec<u32>,
    /// The pod matches all its required affinity terms.
    affinity_self: bool,
    /// Required anti-affinity: a counter per term.
    anti: Vec<u32>,
    /// Required anti-affinity terms held by other pods that match this pod.
    existing: Vec<u32>,
    /// DoNotSchedule constraints.
    spread: Vec<HardSpread>,
    /// Score terms: (counter, weight per pod counted).
    soft: Vec<(u32, i64)>,
    /// ScheduleAnyway constraints.
    soft_spread: Vec<SoftSpread>,
    /// All keys of the soft constraints must be on a node (else it scores 0), unless
    /// `soft_defaulted`.
    soft_keys: Vec<u32>,
    /// The soft constraints are the system defaults ([`defaults`]): a node without one of
    /// the keys is scored by the others.
    soft_defaulted: bool,
    /// The key of the domain rules ([`Topology::domain_rules`]): the required rules on
    /// this key, when every required rule on a key that is not node-local is on it.
    domain_key: Option<u32>,
}

impl Rules {
    fn is_empty(&self) -> bool {
        self.affinity.is_empty()
            && self.anti.is_empty()
            && self.existing.is_empty()
            && self.spread.is_empty()
            && self.soft.is_empty()
            && self.soft_spread.is_empty()
    }

    /// The counters of the required rules.
    fn required(&self) -> impl Iterator<Item = u32> + '_ {
        self.affinity
            .iter()
            .chain(&self.anti)
            .chain(&self.existing)
            .copied()
            .chain(self.spread.iter().map(|s| s.counter))
    }

    /// Every counter the rules read.
    fn counters(&self) -> impl Iterator<Item = u32> + '_ {
        self.required().chain(self.soft.iter().map(|&(c, _)| c)).chain(self.soft_spread.iter().map(|s| s.counter))
    }
}

/// The session's inter-pod state (see the module docs).
#[derive(Debug, Default)]
pub struct Topology {
    keys: Vec<Key>,
    key_ids: HashMap<String, u32>,
    matchers: Vec<Vec<PodMatcher>>,
    matcher_ids: HashMap<Vec<PodMatcher>, u32>,
    /// Matchers by a (label key, value) that every pod they match has.
    matchers_by_pair: PairIndex<u32>,
    /// Matchers without such a pair (checked for every pod).
    matchers_unindexed: Vec<u32>,
    /// Counters of each matcher.
    counters_of_matcher: Vec<Vec<u32>>,
    counters: Vec<Counter>,
    counter_ids: HashMap<(Counted, u32, bool, Option<u64>), u32>,
    /// Terms held by pods: (matcher, key, weight) → holding counter.
    held_ids: HashMap<(u32, u32, i64), u32>,
    /// Holding counters by the pair index of their matcher.
    held_by_pair: PairIndex<(u32, i64)>,
    held_unindexed: Vec<(u32, i64)>,
    /// Holding counters of each task that holds terms.
    held_by_task: HashMap<TaskId, Vec<u32>>,
    /// Rules of each pending task that has any.
    rules: Vec<Option<Arc<Rules>>>,
    /// Whether some task has rules.
    any_rules: bool,
    /// Where each counted task is counted (every task that holds a node).
    placed: HashMap<TaskId, NodeId>,
    /// Nodes whose answers changed since the last drain.
    touched: Vec<NodeId>,
    /// Eligible nodes by (task shape, keys, node affinity honoured, taints honoured): the
    /// pods of a job share them.
    eligible_cache: HashMap<(u32, Vec<u32>, bool, bool), Eligible>,
    /// Whether changes are reported ([`Topology::drain_touched`]): the filters' answers are
    /// kept by the node index, the scores are batch scores it never keeps.
    report_touched: bool,
    /// Pods without spread constraints get the system-default ones ([`defaults`]).
    default_spread: bool,
}

/// Whether a task holds a node for the counts at session open.
fn counted_at_open(t: &TaskInfo) -> bool {
    t.node.is_some()
        && matches!(
            t.status,
            TaskStatus::Allocated
                | TaskStatus::Pipelined
                | TaskStatus::Binding
                | TaskStatus::Bound
                | TaskStatus::Running
                | TaskStatus::Releasing
        )
}

fn pod_labels(pod: &Pod) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    pod.metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// The matcher of an affinity term of a pod in namespace `ns` with labels `labels`
/// (`matchLabelKeys` and `mismatchLabelKeys` merged into the selector).
fn term_matcher(term: &PodAffinityTerm, ns: &str, labels: &BTreeMap<String, String>) -> PodMatcher {
    let mut selector = Selector::compile(term.label_selector.as_ref());
    if !selector.is_nothing() {
        for k in term.match_label_keys.iter().flatten() {
            if let Some(v) = labels.get(k) {
                selector.require(k, v, true);
            }
        }
        for k in term.mismatch_label_keys.iter().flatten() {
            if let Some(v) = labels.get(k) {
                selector.require(k, v, false);
            }
        }
    }
    let mut names = term.namespaces.clone().unwrap_or_default();
    let ns_selector = term.namespace_selector.as_ref().map(|s| Selector::compile(Some(s)));
    if names.is_empty() && ns_selector.is_none() {
        names.push(ns.to_string());
    }
    names.sort();
    names.dedup();
    PodMatcher { selector, namespaces: Namespaces { names, selector: ns_selector } }
}

/// Whether a pod spec has anything this module reads.
fn has_rules(spec: &PodSpec) -> bool {
    spec.affinity.as_ref().is_some_and(|a| a.pod_affinity.is_some() || a.pod_anti_affinity.is_some())
        || spec.topology_spread_constraints.as_ref().is_some_and(|c| !c.is_empty())
}

impl Topology {
    /// The state of a session over `snap`.
    pub fn open(snap: &Snapshot, mode: Mode) -> Topology {
        Topology::open_with(snap, mode, false)
    }

    /// The state of a session over `snap`; with the system-default spread constraints
    /// ([`defaults`]) for pods without constraints when `default_spread` (scores only).
    pub fn open_with(snap: &Snapshot, mode: Mode, default_spread: bool) -> Topology {
        let default_spread = default_spread && mode == Mode::Score && snap.extras().has_workload_selectors();
        let mut t = Topology { report_touched: mode == Mode::Filter, default_spread, ..Default::default() };
        // Most clusters have no inter-pod rule at all: one pass over the pods says so.
        if !default_spread
            && (!snap.may_have_pod_rules()
                || !snap.tasks.iter().any(|task| task.pod.spec.as_ref().is_some_and(|s| has_rules(s))))
        {
            return t;
        }
        // Terms held by any pod (placed now or later in the session).
        for (i, task) in snap.tasks.iter().enumerate() {
            let Some(spec) = task.pod.spec.as_ref().filter(|s| has_rules(s)) else { continue };
            let held = t.held_terms(snap, task, spec, mode);
            if !held.is_empty() {
                t.held_by_task.insert(TaskId(i as u32), held);
            }
        }
        // Rules of the pending pods. They depend on the pod's shape (its own rules, node
        // affinity and tolerations), namespace, labels and controlling owner only: the pods
        // of a job usually share them.
        // (Consecutive tasks are mostly of one job: the last key is tried first.)
        type RulesKey<'a> = (u32, &'a str, &'a BTreeMap<String, String>, Option<(&'a str, &'a str, &'a str)>);
        let mut compiled: HashMap<RulesKey, Option<Arc<Rules>>> = HashMap::new();
        let mut last: Option<(RulesKey, Option<Arc<Rules>>)> = None;
        let mut unique: Vec<Arc<Rules>> = Vec::new();
        t.rules = vec![None; snap.tasks.len()];
        let cache = snap.shape_count() > 0;
        for (i, task) in snap.tasks.iter().enumerate() {
            if task.status != TaskStatus::Pending {
                continue;
            }
            let owner =
                defaults::controller_of(&task.pod).map(|o| (o.api_version.as_str(), o.kind.as_str(), o.name.as_str()));
            let key = (task.shape, task.namespace(), pod_labels(&task.pod), owner);
            let cached = match &last {
                Some((k, rules)) if cache && *k == key => Some(rules.clone()),
                _ if cache => compiled.get(&key).cloned(),
                _ => None,
            };
            let rules = match cached {
                Some(rules) => rules,
                None => {
                    let mut rules = t.compile_rules(snap, task, mode);
                    let rules = (!rules.is_empty()).then(|| {
                        if mode == Mode::Filter {
                            rules.domain_key = t.domain_key_of(&rules);
                        }
                        Arc::new(rules)
                    });
                    unique.extend(rules.clone());
                    if cache {
                        compiled.insert(key, rules.clone());
                    }
                    rules
                }
            };
            if cache {
                last = Some((key, rules.clone()));
            }
            t.any_rules |= rules.is_some();
            t.rules[i] = rules;
        }
        if t.counters.is_empty() {
            return t;
        }
        for r in &unique {
            for c in r.counters() {
                let counter = &mut t.counters[c as usize];
                if Some(counter.key) != r.domain_key {
                    counter.report = true;
                }
            }
            if r.affinity_self && r.affinity.iter().any(|&c| Some(t.counters[c as usize].key) != r.domain_key) {
                for &c in &r.affinity {
                    t.counters[c as usize].decides_first = true;
                }
            }
        }
        for (i, task) in snap.tasks.iter().enumerate() {
            if counted_at_open(task) {
                let node = task.node.expect("counted tasks have a node");
                t.placed.insert(TaskId(i as u32), node);
                t.add(snap, TaskId(i as u32), node, 1, false);
            }
        }
        t
    }

    /// Whether the session has no rule to check.
    pub fn is_empty(&self) -> bool {
        !self.any_rules
    }

    fn key_id(&mut self, snap: &Snapshot, name: &str) -> u32 {
        if let Some(&k) = self.key_ids.get(name) {
            return k;
        }
        let mut values: HashMap<&str, u32> = HashMap::new();
        let mut node_value = Vec::with_capacity(snap.nodes.len());
        let mut nodes_of_value: Vec<Vec<NodeId>> = Vec::new();
        for (i, n) in snap.nodes.iter().enumerate() {
            match n.labels().get(name) {
                Some(v) => {
                    let next = values.len() as u32;
                    let id = *values.entry(v.as_str()).or_insert(next);
                    if id as usize == nodes_of_value.len() {
                        nodes_of_value.push(Vec::new());
                    }
                    nodes_of_value[id as usize].push(NodeId(i as u32));
                    node_value.push(id);
                }
                None => node_value.push(NONE),
            }
        }
        let node_local = nodes_of_value.iter().all(|n| n.len() == 1);
        let missing = (0..node_value.len()).filter(|&i| node_value[i] == NONE).map(|i| NodeId(i as u32)).collect();
        let empty_value = values.get("").copied().unwrap_or(NONE);
        let partition = (!node_local && nodes_of_value.len() <= MAX_SPLIT_DOMAINS)
            .then(|| Arc::new(NodeDomains { of_node: node_value.clone(), count: nodes_of_value.len() as u32 }));
        let id = self.keys.len() as u32;
        self.keys.push(Key {
            name: name.to_string(),
            node_value,
            nodes_of_value,
            node_local,
            missing,
            empty_value,
            partition,
        });
        self.key_ids.insert(name.to_string(), id);
        id
    }

    fn matcher_id(&mut self, m: Vec<PodMatcher>) -> u32 {
        if let Some(&id) = self.matcher_ids.get(&m) {
            return id;
        }
        let id = self.matchers.len() as u32;
        match m.first().and_then(|f| f.selector.index_pair()) {
            Some((k, v)) => {
                self.matchers_by_pair.entry(k.to_string()).or_default().entry(v.to_string()).or_default().push(id)
            }
            None => self.matchers_unindexed.push(id),
        }
        self.matchers.push(m.clone());
        self.matcher_ids.insert(m, id);
        self.counters_of_matcher.push(Vec::new());
        id
    }

    /// The counter of (what, key, terminating, eligibility), created when new.
    fn counter(
        &mut self,
        counted: Counted,
        key: u32,
        skip_terminating: bool,
        eligible: Option<Eligible>,
        spread_domains: bool,
    ) -> u32 {
        let id_key =
            (counted.clone(), key, skip_terminating, eligible.as_ref().map(|(h, _)| *h ^ spread_domains as u64));
        if let Some(&c) = self.counter_ids.get(&id_key) {
            return c;
        }
        let id = self.counters.len() as u32;
        let values = self.keys[key as usize].nodes_of_value.len();
        let eligible = eligible.map(|(_, e)| e);
        let domains = spread_domains.then(|| {
            let mut is_domain = vec![false; values];
            for (n, &v) in self.keys[key as usize].node_value.iter().enumerate() {
                if v != NONE && eligible.as_ref().is_none_or(|e| e[n]) {
                    is_domain[v as usize] = true;
                }
            }
            let count = is_domain.iter().filter(|d| **d).count() as u32;
            let mut histogram = BTreeMap::new();
            if count > 0 {
                histogram.insert(0, count);
            }
            Domains { count, is_domain, histogram }
        });
        self.counters.push(Counter {
            counted: counted.clone(),
            key,
            skip_terminating,
            eligible,
            counts: Vec::new(),
            nonzero: Vec::new(),
            total: 0,
            domains,
            report: false,
            decides_first: false,
        });
        if let Counted::Matching(m) = counted {
            self.counters_of_matcher[m as usize].push(id);
        }
        self.counter_ids.insert(id_key, id);
        id
    }

    /// The terms a pod holds that other pods' answers read: required anti-affinity terms
    /// (filter); required affinity and preferred terms (score).
    fn held_terms(&mut self, snap: &Snapshot, task: &TaskInfo, spec: &PodSpec, mode: Mode) -> Vec<u32> {
        let labels = pod_labels(&task.pod);
        let ns = task.namespace();
        let mut terms: Vec<(&PodAffinityTerm, i64)> = Vec::new();
        let affinity = spec.affinity.as_ref();
        let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
        let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        match mode {
            Mode::Filter => {
                for term in paa
                    .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    terms.push((term, 0));
                }
            }
            Mode::Score => {
                for term in pa
                    .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    terms.push((term, HARD_POD_AFFINITY_WEIGHT));
                }
                for w in pa
                    .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    terms.push((&w.pod_affinity_term, i64::from(w.weight)));
                }
                for w in paa
                    .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    terms.push((&w.pod_affinity_term, -i64::from(w.weight)));
                }
            }
        }
        let mut held = Vec::new();
        for (term, weight) in terms {
            if weight == 0 && mode == Mode::Score {
                continue;
            }
            let matcher = term_matcher(term, ns, labels);
            if matcher.selector.is_nothing() {
                continue;
            }
            let index = matcher.selector.index_pair().map(|(k, v)| (k.to_string(), v.to_string()));
            let m = self.matcher_id(vec![matcher]);
            let key = self.key_id(snap, &term.topology_key);
            let c = match self.held_ids.get(&(m, key, weight)) {
                Some(&c) => c,
                None => {
                    let c = self.counter(Counted::Holding(m, weight), key, false, None, false);
                    self.held_ids.insert((m, key, weight), c);
                    match &index {
                        Some((k, v)) => self
                            .held_by_pair
                            .entry(k.clone())
                            .or_default()
                            .entry(v.clone())
                            .or_default()
                            .push((c, weight)),
                        None => self.held_unindexed.push((c, weight)),
                    }
                    c
                }
            };
            held.push(c);
        }
        held
    }

    /// The nodes a spread constraint's pods and domains come from (node inclusion policies,
    /// every key of the pod's constraints of that kind on the node), with a hash of them.
    fn eligible_nodes(
        &mut self,
        snap: &Snapshot,
        task: &TaskInfo,
        keys: &[u32],
        honor_affinity: bool,
        honor_taints: bool,
    ) -> Eligible {
        // The node selector, affinity and tolerations are part of the shape (when the
        // snapshot has shapes).
        let cache_key = (task.shape, keys.to_vec(), honor_affinity, honor_taints);
        if snap.shape_count() > 0 {
            if let Some(hit) = self.eligible_cache.get(&cache_key) {
                return hit.clone();
            }
        }
        let spec = task.pod.spec.as_ref();
        let tolerations = matching::pod_tolerations(&task.pod);
        let eligible: Vec<bool> = snap
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                keys.iter().all(|&k| self.keys[k as usize].node_value[i] != NONE)
                    && (!honor_affinity
                        || spec.is_none_or(|s| {
                            !matching::has_required_node_constraints(s)
                                || matching::required_node_affinity_matches(s, n.labels(), &n.name)
                        }))
                    && (!honor_taints || !n.has_taints || {
                        let taints = n.node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
                        matching::first_untolerated_taint(taints, tolerations).is_none()
                    })
            })
            .collect();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        eligible.hash(&mut h);
        let result = (h.finish() | 1, Arc::new(eligible));
        if snap.shape_count() > 0 {
            self.eligible_cache.insert(cache_key, result.clone());
        }
        result
    }

    fn compile_rules(&mut self, snap: &Snapshot, task: &TaskInfo, mode: Mode) -> Rules {
        let mut r = Rules::default();
        let labels = pod_labels(&task.pod);
        let ns = task.namespace();
        let ns_labels = snap.extras().namespace_labels(ns);
        // Terms of other pods that match this one.
        if !self.held_ids.is_empty() {
            let mut hits: Vec<(u32, i64)> = Vec::new();
            for (k, v) in labels {
                if let Some(list) = self.held_by_pair.get(k).and_then(|values| values.get(v)) {
                    hits.extend(list.iter().copied());
                }
            }
            hits.extend(self.held_unindexed.iter().copied());
            hits.sort_unstable();
            hits.dedup();
            for (c, weight) in hits {
                let Counted::Holding(m, _) = self.counters[c as usize].counted else { continue };
                if self.matchers[m as usize].iter().all(|x| x.matches(ns, labels, ns_labels)) {
                    match mode {
                        Mode::Filter => r.existing.push(c),
                        Mode::Score => r.soft.push((c, weight)),
                    }
                }
            }
        }
        if self.default_spread && defaults::applies_to(&task.pod) {
            self.push_default_spread(snap, task, &mut r);
        }
        let Some(spec) = task.pod.spec.as_ref().filter(|s| has_rules(s)) else { return r };
        let affinity = spec.affinity.as_ref();
        let pa = affinity.and_then(|a| a.pod_affinity.as_ref());
        let paa = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
        let constraints = spec.topology_spread_constraints.as_deref().unwrap_or(&[]);
        match mode {
            Mode::Filter => {
                let required: Vec<&PodAffinityTerm> = pa
                    .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                    .collect();
                if !required.is_empty() {
                    let matchers: Vec<PodMatcher> = required.iter().map(|t| term_matcher(t, ns, labels)).collect();
                    r.affinity_self = matchers.iter().all(|m| m.matches(ns, labels, ns_labels));
                    let m = self.matcher_id(matchers);
                    for term in &required {
                        let key = self.key_id(snap, &term.topology_key);
                        r.affinity.push(self.counter(Counted::Matching(m), key, false, None, false));
                    }
                }
                for term in paa
                    .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    let m = self.matcher_id(vec![term_matcher(term, ns, labels)]);
                    let key = self.key_id(snap, &term.topology_key);
                    r.anti.push(self.counter(Counted::Matching(m), key, false, None, false));
                }
                let hard: Vec<_> = constraints.iter().filter(|c| c.when_unsatisfiable == "DoNotSchedule").collect();
                if !hard.is_empty() {
                    let keys: Vec<u32> = hard.iter().map(|c| self.key_id(snap, &c.topology_key)).collect();
                    for (c, &key) in hard.iter().zip(&keys) {
                        let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
                        let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
                        let eligible = self.eligible_nodes(snap, task, &keys, honor_affinity, honor_taints);
                        let matcher = self.spread_matcher(c, ns, labels);
                        let self_match = matcher.selector.matches(labels);
                        let m = self.matcher_id(vec![matcher]);
                        let counter = self.counter(Counted::Matching(m), key, true, Some(eligible), true);
                        r.spread.push(HardSpread {
                            counter,
                            max_skew: i64::from(c.max_skew),
                            min_domains: c.min_domains.unwrap_or(1).max(1) as u32,
                            self_match,
                        });
                    }
                }
            }
            Mode::Score => {
                for w in pa
                    .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    self.push_soft(snap, &mut r, &w.pod_affinity_term, i64::from(w.weight), ns, labels);
                }
                for w in paa
                    .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
                    .into_iter()
                    .flatten()
                {
                    self.push_soft(snap, &mut r, &w.pod_affinity_term, -i64::from(w.weight), ns, labels);
                }
                let soft: Vec<_> = constraints.iter().filter(|c| c.when_unsatisfiable == "ScheduleAnyway").collect();
                if !soft.is_empty() {
                    let keys: Vec<u32> = soft.iter().map(|c| self.key_id(snap, &c.topology_key)).collect();
                    r.soft_keys = keys.clone();
                    for (c, &key) in soft.iter().zip(&keys) {
                        let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
                        let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
                        let eligible = self.eligible_nodes(snap, task, &keys, honor_affinity, honor_taints);
                        let matcher = self.spread_matcher(c, ns, labels);
                        let m = self.matcher_id(vec![matcher]);
                        let counter = self.counter(Counted::Matching(m), key, true, Some(eligible), false);
                        r.soft_spread.push(SoftSpread { counter, max_skew: i64::from(c.max_skew) });
                    }
                }
            }
        }
        r
    }

    /// The system-default constraints of a pod without constraints, when something selects
    /// it ([`defaults`]).
    fn push_default_spread(&mut self, snap: &Snapshot, task: &TaskInfo, r: &mut Rules) {
        let Some(selector) = defaults::default_selector(snap.extras(), &task.pod) else { return };
        let ns = task.namespace();
        let m = self.matcher_id(vec![PodMatcher {
            selector,
            namespaces: Namespaces { names: vec![ns.to_string()], selector: None },
        }]);
        for (name, max_skew) in defaults::SYSTEM_DEFAULT_CONSTRAINTS {
            let key = self.key_id(snap, name);
            // Nodes lacking the key are not left out of the others' counts.
            let eligible = self.eligible_nodes(snap, task, &[key], true, false);
            let counter = self.counter(Counted::Matching(m), key, true, Some(eligible), false);
            r.soft_spread.push(SoftSpread { counter, max_skew });
            r.soft_keys.push(key);
        }
        r.soft_defaulted = true;
    }

    fn push_soft(
        &mut self,
        snap: &Snapshot,
        r: &mut Rules,
        term: &PodAffinityTerm,
        weight: i64,
        ns: &str,
        labels: &BTreeMap<String, String>,
    ) {
        if weight == 0 {
            return;
        }
        let matcher = term_matcher(term, ns, labels);
        if matcher.selector.is_nothing() {
            return;
        }
        let m = self.matcher_id(vec![matcher]);
        let key = self.key_id(snap, &term.topology_key);
        r.soft.push((self.counter(Counted::Matching(m), key, false, None, false), weight));
    }

    /// A spread constraint's matcher: its selector (with `matchLabelKeys` merged), in the
    /// pod's own namespace.
    fn spread_matcher(
        &self,
        c: &k8s_openapi::api::core::v1::TopologySpreadConstraint,
        ns: &str,
        labels: &BTreeMap<String, String>,
    ) -> PodMatcher {
        let mut selector = Selector::compile(c.label_selector.as_ref());
        if !selector.is_nothing() {
            for k in c.match_label_keys.iter().flatten() {
                if let Some(v) = labels.get(k) {
                    selector.require(k, v, true);
                }
            }
        }
        PodMatcher { selector, namespaces: Namespaces { names: vec![ns.to_string()], selector: None } }
    }

    /// Counts (`sign` 1) or uncounts (-1) a task on a node, recording the touched nodes
    /// when `touch`.
    fn add(&mut self, snap: &Snapshot, t: TaskId, node: NodeId, sign: i32, touch: bool) {
        let task = snap.task(t);
        let labels = pod_labels(&task.pod);
        let ns = task.namespace();
        let ns_labels = snap.extras().namespace_labels(ns);
        let terminating = task.status == TaskStatus::Releasing || task.pod.metadata.deletion_timestamp.is_some();
        let mut hit: Vec<u32> = Vec::new();
        for (k, v) in labels {
            if let Some(list) = self.matchers_by_pair.get(k).and_then(|values| values.get(v)) {
                for &m in list {
                    if self.matchers[m as usize].iter().all(|x| x.matches(ns, labels, ns_labels)) {
                        hit.extend(self.counters_of_matcher[m as usize].iter().copied());
                    }
                }
            }
        }
        for &m in &self.matchers_unindexed {
            if self.matchers[m as usize].iter().all(|x| x.matches(ns, labels, ns_labels)) {
                hit.extend(self.counters_of_matcher[m as usize].iter().copied());
            }
        }
        if let Some(held) = self.held_by_task.get(&t) {
            hit.extend(held.iter().copied());
        }
        hit.sort_unstable();
        hit.dedup();
        for c in hit {
            let counter = &mut self.counters[c as usize];
            if counter.skip_terminating && terminating && sign > 0 {
                continue;
            }
            if counter.eligible.as_ref().is_some_and(|e| !e[node.idx()]) {
                continue;
            }
            let key = &self.keys[counter.key as usize];
            let v = key.node_value[node.idx()];
            if v == NONE {
                continue;
            }
            if counter.counts.is_empty() {
                counter.counts = vec![0; key.nodes_of_value.len()];
            }
            let old = counter.counts[v as usize];
            let new = (old as i64 + i64::from(sign)).max(0) as u32;
            if old == new {
                continue;
            }
            counter.counts[v as usize] = new;
            if old == 0 {
                counter.nonzero.push(v);
            } else if new == 0 {
                let i = counter.nonzero.iter().position(|&x| x == v).expect("a counted value is listed");
                counter.nonzero.swap_remove(i);
            }
            let was_empty = counter.total == 0;
            counter.total = (counter.total as i64 + i64::from(new as i32 - old as i32)) as u64;
            // The first pod of a self-affine group may start anywhere only while no pod
            // matches its terms: the answers of every node change when that flips.
            let mut all = counter.decides_first && was_empty != (counter.total == 0);
            if let Some(d) = counter.domains.as_mut().filter(|d| d.is_domain[v as usize]) {
                let before = d.min();
                d.moved(old, new);
                all |= counter.report && d.min() != before;
            }
            if touch {
                if all {
                    for nodes in &key.nodes_of_value {
                        self.touched.extend_from_slice(nodes);
                    }
                } else if counter.report {
                    // On a node-local key too: the node index does not re-evaluate a node
                    // that did not fit and only took a task (`NodeIndex::touch_used`),
                    // while a pod placed there may satisfy a required affinity to it.
                    self.touched.extend_from_slice(&key.nodes_of_value[v as usize]);
                }
            }
        }
    }

    /// A task was placed (or an eviction undone): it counts where it is.
    pub fn on_allocate(&mut self, snap: &Snapshot, t: TaskId) {
        if self.counters.is_empty() {
            return;
        }
        let Some(node) = snap.task(t).node else { return };
        if self.placed.insert(t, node).is_none() {
            self.add(snap, t, node, 1, self.report_touched);
        }
    }

    /// A task was evicted (or a placement undone): it no longer counts.
    pub fn on_deallocate(&mut self, snap: &Snapshot, t: TaskId) {
        if let Some(node) = self.placed.remove(&t) {
            self.add(snap, t, node, -1, self.report_touched);
        }
    }

    /// Moves the touched nodes out.
    pub fn drain_touched(&mut self, out: &mut Vec<NodeId>) {
        out.append(&mut self.touched);
    }

    fn rules(&self, t: TaskId) -> Option<&Rules> {
        self.rules.get(t.idx()).and_then(|r| r.as_deref())
    }

    /// A key of the task's required rules as the node index keeps their answers (tasks of
    /// one shape and equal keys get equal answers per node): the rules read per node, and
    /// the key of the domain rules, whose verdicts are asked per task (0 without rules).
    /// The pods of many jobs with one zone spread constraint each share a key.
    pub fn shape_key(&self, t: TaskId) -> u64 {
        let Some(r) = self.rules(t) else { return 0 };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        let per_node = |c: &u32| self.per_node(r, *c);
        // Whether the first pod may start anywhere reads every affinity term.
        if r.affinity.iter().any(per_node) {
            (&r.affinity, r.affinity_self).hash(&mut h);
        }
        for list in [&r.anti, &r.existing] {
            list.iter().filter(|c| per_node(c)).collect::<Vec<_>>().hash(&mut h);
        }
        r.spread.iter().filter(|s| per_node(&s.counter)).collect::<Vec<_>>().hash(&mut h);
        (&r.soft, &r.soft_spread, &r.soft_keys, r.soft_defaulted, r.domain_key).hash(&mut h);
        h.finish() | 1
    }

    fn count_at(&self, c: u32, node: NodeId) -> Option<u32> {
        let counter = &self.counters[c as usize];
        let v = self.keys[counter.key as usize].node_value[node.idx()];
        (v != NONE).then(|| counter.counts.get(v as usize).copied().unwrap_or(0))
    }

    /// The key of a pending pod's domain rules: the one key, not node-local and with a
    /// partition, of its required rules on keys that are not node-local.
    fn domain_key_of(&self, r: &Rules) -> Option<u32> {
        let mut key = None;
        for c in r.required() {
            let k = self.counters[c as usize].key;
            if self.keys[k as usize].node_local || key == Some(k) {
                continue;
            }
            if key.is_some() {
                return None;
            }
            key = Some(k);
        }
        key.filter(|&k| self.keys[k as usize].partition.is_some())
    }

    /// The partition of a pending pod's domain rules, when it has some: its required rules
    /// on one key with few values (the zone), which the node index applies per domain (see
    /// [`volcano_framework::Incremental::domain_rules`]) instead of per node. The other checks
    /// then skip them (`base` in [`Topology::check_affinity`] and
    /// [`Topology::check_spread`]), and placing a pod changes no node's answer through them.
    pub fn domain_rules(&self, t: TaskId) -> Option<Arc<NodeDomains>> {
        let k = self.rules(t)?.domain_key?;
        self.keys[k as usize].partition.clone()
    }

    /// The verdicts of a pod's domain rules per domain, then for the nodes without the key
    /// (see [`volcano_framework::Incremental::domain_verdicts`]), with the affinity and the
    /// spread rules as enabled.
    pub fn domain_verdicts(&self, t: TaskId, affinity: bool, spread: bool, out: &mut [Option<Cow<'static, str>>]) {
        let Some(r) = self.rules(t) else { return };
        let Some(k) = r.domain_key else { return };
        let uses = |c: u32| self.counters[c as usize].key == k;
        let count = self.keys[k as usize].nodes_of_value.len();
        for (slot, verdict) in out.iter_mut().enumerate() {
            let v = if slot == count { NONE } else { slot as u32 };
            let at =
                |c: u32| (v != NONE).then(|| self.counters[c as usize].counts.get(v as usize).copied().unwrap_or(0));
            let refusal = affinity
                .then(|| self.affinity_refusal(r, at, uses))
                .flatten()
                .or_else(|| spread.then(|| self.spread_refusal(r, at, uses)).flatten());
            if let (Some((reason, _)), true) = (refusal, verdict.is_none()) {
                *verdict = Some(Cow::Borrowed(reason));
            }
        }
    }

    /// Whether a counter is read per node by a pod's rules (not one of its domain rules).
    fn per_node(&self, r: &Rules, c: u32) -> bool {
        Some(self.counters[c as usize].key) != r.domain_key
    }

    fn status(refusal: Option<Refusal>) -> Result<(), Status> {
        match refusal {
            None => Ok(()),
            Some((reason, true)) => Err(Status::unresolvable(PLUGIN, reason)),
            Some((reason, false)) => Err(Status::unschedulable(PLUGIN, reason)),
        }
    }

    /// InterPodAffinity's filter; without the pod's domain rules when `base`.
    pub fn check_affinity(&self, t: TaskId, node: NodeId, base: bool) -> Result<(), Status> {
        let Some(r) = self.rules(t) else { return Ok(()) };
        Self::status(self.affinity_refusal(r, |c| self.count_at(c, node), |c| !base || self.per_node(r, c)))
    }

    /// InterPodAffinity's filter over the counters that `uses` selects, with the count of
    /// each where the pod would go (`None` without the counter's key).
    fn affinity_refusal(
        &self,
        r: &Rules,
        at: impl Fn(u32) -> Option<u32>,
        uses: impl Fn(u32) -> bool,
    ) -> Option<Refusal> {
        if !r.affinity.is_empty() {
            let mut exist = true;
            for &c in r.affinity.iter().filter(|&&c| uses(c)) {
                match at(c) {
                    None => return Some((REASON_AFFINITY, true)),
                    Some(0) => exist = false,
                    Some(_) => {}
                }
            }
            // No pod matches the terms anywhere: a pod matching them itself may start.
            let first = r.affinity_self && r.affinity.iter().all(|&c| self.counters[c as usize].total == 0);
            if !exist && !first {
                return Some((REASON_AFFINITY, true));
            }
        }
        if r.anti.iter().filter(|&&c| uses(c)).any(|&c| at(c).is_some_and(|n| n > 0)) {
            return Some((REASON_ANTI_AFFINITY, false));
        }
        if r.existing.iter().filter(|&&c| uses(c)).any(|&c| at(c).is_some_and(|n| n > 0)) {
            return Some((REASON_EXISTING_ANTI_AFFINITY, false));
        }
        None
    }

    /// PodTopologySpread's filter; without the pod's domain rules when `base`.
    pub fn check_spread(&self, t: TaskId, node: NodeId, base: bool) -> Result<(), Status> {
        let Some(r) = self.rules(t) else { return Ok(()) };
        Self::status(self.spread_refusal(r, |c| self.count_at(c, node), |c| !base || self.per_node(r, c)))
    }

    /// PodTopologySpread's filter over the counters that `uses` selects (see
    /// [`Topology::affinity_refusal`]).
    fn spread_refusal(
        &self,
        r: &Rules,
        at: impl Fn(u32) -> Option<u32>,
        uses: impl Fn(u32) -> bool,
    ) -> Option<Refusal> {
        for s in r.spread.iter().filter(|s| uses(s.counter)) {
            let counter = &self.counters[s.counter as usize];
            let Some(count) = at(s.counter) else {
                return Some((REASON_SPREAD_MISSING_LABEL, true));
            };
            let d = counter.domains.as_ref().expect("hard spread counters keep domains");
            let min = if d.count < s.min_domains { 0 } else { d.min() };
            let skew = i64::from(count) + i64::from(s.self_match) - i64::from(min);
            if skew > s.max_skew {
                return Some((REASON_SPREAD, false));
            }
        }
        None
    }

    /// The nodes where the task's required rules may fail now (see
    /// [`volcano_framework::Incremental::rule_exceptions`]), its domain rules aside; false when
    /// they cannot be listed (required affinity fails wherever no matching pod is, most of
    /// the cluster).
    pub fn rule_exceptions(&self, t: TaskId, out: &mut Vec<NodeId>) -> bool {
        let Some(r) = self.rules(t) else { return true };
        let nonzero = |c: u32, out: &mut Vec<NodeId>| {
            let counter = &self.counters[c as usize];
            let key = &self.keys[counter.key as usize];
            for &v in &counter.nonzero {
                out.extend_from_slice(&key.nodes_of_value[v as usize]);
            }
        };
        let per_node = |c: &u32| self.per_node(r, *c);
        if r.affinity.iter().any(per_node) {
            if !(r.affinity_self && r.affinity.iter().all(|&c| self.counters[c as usize].total == 0)) {
                return false;
            }
            for &c in r.affinity.iter().filter(|c| per_node(c)) {
                out.extend_from_slice(&self.keys[self.counters[c as usize].key as usize].missing);
            }
        }
        for &c in r.anti.iter().chain(&r.existing).filter(|c| per_node(c)) {
            nonzero(c, out);
        }
        for s in r.spread.iter().filter(|s| per_node(&s.counter)) {
            let counter = &self.counters[s.counter as usize];
            let key = &self.keys[counter.key as usize];
            out.extend_from_slice(&key.missing);
            let d = counter.domains.as_ref().expect("hard spread counters keep domains");
            let min = if d.count < s.min_domains { 0 } else { d.min() };
            for v in 0..key.nodes_of_value.len() {
                let n = counter.counts.get(v).copied().unwrap_or(0);
                if i64::from(n) + i64::from(s.self_match) - i64::from(min) > s.max_skew {
                    out.extend_from_slice(&key.nodes_of_value[v]);
                }
            }
        }
        true
    }

    /// Whether the task has required inter-pod affinity rules (own or of other pods).
    pub fn has_affinity_rules(&self, t: TaskId) -> bool {
        self.rules(t).is_some_and(|r| !r.affinity.is_empty() || !r.anti.is_empty() || !r.existing.is_empty())
    }

    /// Whether the task has score terms (its own or other pods' matching it).
    pub fn has_affinity_scores(&self, t: TaskId) -> bool {
        self.rules(t).is_some_and(|r| !r.soft.is_empty())
    }

    /// Whether the task's score terms are all on keys whose domains are single nodes (the
    /// hostname): its InterPodAffinity score is then 0 outside the nodes that
    /// [`Topology::affinity_nodes`] lists.
    pub fn affinity_scores_node_local(&self, t: TaskId) -> bool {
        self.rules(t)
            .is_some_and(|r| r.soft.iter().all(|&(c, _)| self.keys[self.counters[c as usize].key as usize].node_local))
    }

    /// The nodes where a term of the task's score counts a pod (every other node scores 0
    /// before normalisation).
    pub fn affinity_nodes(&self, t: TaskId, out: &mut Vec<NodeId>) {
        let Some(r) = self.rules(t) else { return };
        for &(c, _) in &r.soft {
            let counter = &self.counters[c as usize];
            let key = &self.keys[counter.key as usize];
            for &v in &counter.nonzero {
                out.extend_from_slice(&key.nodes_of_value[v as usize]);
            }
        }
    }

    /// Whether the task has ScheduleAnyway constraints.
    pub fn has_spread_scores(&self, t: TaskId) -> bool {
        self.rules(t).is_some_and(|r| !r.soft_spread.is_empty())
    }

    /// The keys of the task's ScheduleAnyway constraints that are not node-local and that
    /// some node has (a key no node has scores every node alike).
    fn spread_domain_keys<'a>(&'a self, r: &'a Rules) -> impl Iterator<Item = u32> + 'a {
        r.soft_spread.iter().map(|s| self.counters[s.counter as usize].key).filter(|&k| {
            let key = &self.keys[k as usize];
            !key.node_local && !key.nodes_of_value.is_empty()
        })
    }

    /// Whether the task's ScheduleAnyway constraints are all on node-local keys (the
    /// hostname): its PodTopologySpread score is then uniform outside the nodes that
    /// [`Topology::spread_special_nodes`] lists, given how many nodes are scored.
    pub fn spread_scores_node_local(&self, t: TaskId) -> bool {
        self.rules(t).is_some_and(|r| self.spread_domain_keys(r).next().is_none())
    }

    /// When the task's ScheduleAnyway constraints are on node-local keys and one other key
    /// with a partition (the zone, as the system defaults are): that partition. Its score
    /// is then uniform per domain outside the nodes [`Topology::spread_special_nodes`]
    /// lists, given how many nodes of each domain are scored.
    pub fn spread_partition(&self, t: TaskId) -> Option<Arc<NodeDomains>> {
        let r = self.rules(t)?;
        let mut keys = self.spread_domain_keys(r);
        let k = keys.next()?;
        if keys.any(|other| other != k) {
            return None;
        }
        self.keys[k as usize].partition.clone()
    }

    /// The nodes where the task's PodTopologySpread score may differ from the other nodes
    /// of their domain (see [`Topology::spread_partition`]): those holding pods its
    /// node-local constraints count, and those without a node-local key that some node has.
    pub fn spread_special_nodes(&self, t: TaskId, out: &mut Vec<NodeId>) {
        let Some(r) = self.rules(t) else { return };
        for s in &r.soft_spread {
            let counter = &self.counters[s.counter as usize];
            let key = &self.keys[counter.key as usize];
            if !key.node_local || key.nodes_of_value.is_empty() {
                continue;
            }
            for &v in &counter.nonzero {
                out.extend_from_slice(&key.nodes_of_value[v as usize]);
            }
            out.extend_from_slice(&key.missing);
        }
    }

    /// InterPodAffinity's score of each node, normalised over `nodes` as kube-scheduler
    /// does (`100 × (s − min) / (max − min)`, all 0 when equal).
    pub fn affinity_scores(&self, t: TaskId, nodes: &[NodeId]) -> Vec<i64> {
        let Some(r) = self.rules(t).filter(|r| !r.soft.is_empty()) else { return vec![0; nodes.len()] };
        let raw: Vec<i64> = nodes
            .iter()
            .map(|&n| r.soft.iter().map(|&(c, w)| w * i64::from(self.count_at(c, n).unwrap_or(0))).sum())
            .collect();
        let (min, max) = (raw.iter().copied().min().unwrap_or(0), raw.iter().copied().max().unwrap_or(0));
        let diff = max - min;
        raw.iter().map(|&s| if diff > 0 { (100.0 * ((s - min) as f64 / diff as f64)) as i64 } else { 0 }).collect()
    }

    /// PodTopologySpread's score of each node for ScheduleAnyway constraints, normalised
    /// as kube-scheduler does (fewer matching pods is better; nodes without every key
    /// score 0, except for the system defaults, where a node without a key is scored by
    /// the other constraint and counts as the value `""` in the size of the topology).
    pub fn spread_scores(&self, t: TaskId, nodes: &[NodeId]) -> Vec<i64> {
        self.spread_scores_counted(t, nodes, None)
    }

    /// [`Topology::spread_scores`] over a scored set in which `nodes[i]` stands for
    /// `counts[i]` nodes of its domain with its counts (all 1 when `None`): the sizes of
    /// the topologies are those of the whole set.
    pub fn spread_scores_counted(&self, t: TaskId, nodes: &[NodeId], counts: Option<&[u32]>) -> Vec<i64> {
        let Some(r) = self.rules(t).filter(|r| !r.soft_spread.is_empty()) else { return vec![0; nodes.len()] };
        let count = |i: usize| counts.map_or(1, |c| c[i] as usize);
        let ignored: Vec<bool> = nodes
            .iter()
            .map(|n| {
                !r.soft_defaulted && r.soft_keys.iter().any(|&k| self.keys[k as usize].node_value[n.idx()] == NONE)
            })
            .collect();
        // Size of each constraint's topology among the scored nodes.
        let weights: Vec<f64> = r
            .soft_spread
            .iter()
            .map(|s| {
                let key = &self.keys[self.counters[s.counter as usize].key as usize];
                let size = if key.name == defaults::LABEL_HOSTNAME {
                    (0..nodes.len()).filter(|&i| !ignored[i]).map(count).sum()
                } else if key.node_local {
                    // One value per node with the label (a candidate standing for several
                    // nodes has it: see `spread_special_nodes`), and `""` for the others.
                    let (with, without): (Vec<usize>, Vec<usize>) = (0..nodes.len())
                        .filter(|&i| !ignored[i])
                        .partition(|&i| key.node_value[nodes[i].idx()] != NONE);
                    with.into_iter().map(count).sum::<usize>()
                        + usize::from(!without.is_empty() && key.empty_value == NONE)
                } else {
                    let mut seen: Vec<u32> = nodes
                        .iter()
                        .zip(&ignored)
                        .filter(|(_, i)| !**i)
                        .map(|(n, _)| match key.node_value[n.idx()] {
                            NONE => key.empty_value,
                            v => v,
                        })
                        .collect();
                    seen.sort_unstable();
                    seen.dedup();
                    seen.len()
                };
                ((size + 2) as f64).ln()
            })
            .collect();
        let raw: Vec<i64> = nodes
            .iter()
            .zip(&ignored)
            .map(|(&n, &ign)| {
                if ign {
                    return 0;
                }
                let mut score = 0.0;
                for (s, w) in r.soft_spread.iter().zip(&weights) {
                    if let Some(cnt) = self.count_at(s.counter, n) {
                        score += f64::from(cnt) * w + (s.max_skew - 1) as f64;
                    }
                }
                score.round() as i64
            })
            .collect();
        let mut min = i64::MAX;
        let mut max = 0i64;
        for (s, ign) in raw.iter().zip(&ignored) {
            if !ign {
                min = min.min(*s);
                max = max.max(*s);
            }
        }
        raw.iter()
            .zip(&ignored)
            .map(|(&s, &ign)| {
                if ign {
                    0
                } else if max == 0 {
                    100
                } else {
                    100 * (max + min - s) / max
                }
            })
            .collect()
    }
}
