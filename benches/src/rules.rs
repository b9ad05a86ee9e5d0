//! An independent checker of the required placement rules of Kubernetes, for the bench's
//! results: given the cluster's objects before a cycle and the cycle's effects, it says
//! which binds break a required rule.
//!
//! It is written from the Kubernetes API definitions and kube-scheduler's documented
//! behaviour, not from volcano-rs's plugins (it shares no code with them), so that a bug in
//! the plugins does not hide itself. The rules, checked for every bound pod `P` on node `n`,
//! in bind order, against the pods placed before it (the pods already on a node, and the
//! pods bound earlier in the same cycle):
//!
//! - **node**: `n` exists, and `P`'s `nodeSelector` and required node affinity match it;
//! - **anti-affinity**: for every required pod anti-affinity term of `P` whose topology key
//!   `n` carries, no placed pod in `n`'s domain matches the term (its label selector, in
//!   its namespaces: `namespaces` ∪ those selected by `namespaceSelector`, or `P`'s own
//!   namespace when both are empty);
//! - **symmetric anti-affinity**: no placed pod whose required anti-affinity term matches
//!   `P` is in `n`'s domain of that term's topology key;
//! - **affinity**: `n` carries every required affinity term's topology key and, for every
//!   term, a placed pod in `n`'s domain matches all the terms; or (kube-scheduler's
//!   exception for the first pod of a group) no placed pod on a node with a term's key
//!   matches all the terms and `P` matches them itself;
//! - **topology spread** (`whenUnsatisfiable: DoNotSchedule`): `n` carries the constraint's
//!   topology key, and `count(n's domain) + (1 if P matches the selector) − min ≤ maxSkew`,
//!   where counts are of placed, non-terminating pods of `P`'s namespace matching the
//!   selector (with `matchLabelKeys`) on the eligible nodes (nodes that pass `P`'s node
//!   selection when `nodeAffinityPolicy` is `Honor`, the default, whose taints `P`
//!   tolerates when `nodeTaintsPolicy` is `Honor`, and that carry every topology key of
//!   `P`'s `DoNotSchedule` constraints); `min` is the least count over the eligible
//!   domains, or 0 when there are fewer than `minDomains` of them.
//!
//! Checking each bind against the pods placed before it covers every pair of pods of a
//! cycle: a pair breaks an anti-affinity rule at the later pod's bind, by one rule or its
//! symmetric. It assumes the effects list binds in placement order, as kube-scheduler
//! places pods one at a time. Pods that have succeeded or failed are not placed; an
//! evicted pod stops being placed at its eviction.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, PodAffinityTerm, Taint, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use volcano_framework::pod::SchedPod as Pod;
use volcano_framework::{ClusterObjects, Effect};

type Labels = BTreeMap<String, String>;

fn labels_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &Labels {
    static EMPTY: Labels = BTreeMap::new();
    meta.labels.as_ref().unwrap_or(&EMPTY)
}

fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pod_namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// One requirement of a label selector.
#[derive(Clone, Debug)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    /// An operator the API does not know: matches nothing.
    Invalid,
}

impl Requirement {
    fn matches(&self, labels: &Labels) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Invalid => false,
        }
    }
}

/// A label selector: `None` (a null selector) matches nothing, an empty list everything.
#[derive(Clone, Debug)]
struct Selector(Option<Vec<Requirement>>);

impl Selector {
    /// `selector` with `matchLabelKeys` (`key In [owner's value]`) and `mismatchLabelKeys`
    /// (`key NotIn [owner's value]`) added; keys the owner does not carry are skipped.
    fn new(selector: Option<&LabelSelector>, owner: &Labels, match_keys: &[String], mismatch_keys: &[String]) -> Self {
        let Some(s) = selector else { return Selector(None) };
        let mut reqs = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
        }
        for e in s.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            reqs.push(match e.operator.as_str() {
                "In" => Requirement::In(e.key.clone(), values),
                "NotIn" => Requirement::NotIn(e.key.clone(), values),
                "Exists" => Requirement::Exists(e.key.clone()),
                "DoesNotExist" => Requirement::DoesNotExist(e.key.clone()),
                _ => Requirement::Invalid,
            });
        }
        for k in match_keys {
            if let Some(v) = owner.get(k) {
                reqs.push(Requirement::In(k.clone(), vec![v.clone()]));
            }
        }
        for k in mismatch_keys {
            if let Some(v) = owner.get(k) {
                reqs.push(Requirement::NotIn(k.clone(), vec![v.clone()]));
            }
        }
        Selector(Some(reqs))
    }

    fn matches(&self, labels: &Labels) -> bool {
        self.0.as_ref().is_some_and(|reqs| reqs.iter().all(|r| r.matches(labels)))
    }
}

/// A pod affinity term resolved against the pod that owns it.
#[derive(Clone, Debug)]
struct Term {
    selector: Selector,
    /// `namespaces`, or the owner's namespace when both lists are empty.
    namespaces: Vec<String>,
    namespace_selector: Option<Selector>,
    topology_key: String,
}

impl Term {
    fn new(t: &PodAffinityTerm, owner: &Pod) -> Self {
        let labels = labels_of(&owner.metadata);
        let mut namespaces = t.namespaces.clone().unwrap_or_default();
        if namespaces.is_empty() && t.namespace_selector.is_none() {
            namespaces.push(pod_namespace(owner).to_string());
        }
        Term {
            selector: Selector::new(
                t.label_selector.as_ref(),
                labels,
                t.match_label_keys.as_deref().unwrap_or_default(),
                t.mismatch_label_keys.as_deref().unwrap_or_default(),
            ),
            namespaces,
            namespace_selector: t.namespace_selector.as_ref().map(|s| Selector::new(Some(s), labels, &[], &[])),
            topology_key: t.topology_key.clone(),
        }
    }

    fn matches(&self, pod: &Pod, ns_labels: &HashMap<&str, &Labels>) -> bool {
        let ns = pod_namespace(pod);
        let in_ns = self.namespaces.iter().any(|n| n == ns)
            || self.namespace_selector.as_ref().is_some_and(|s| {
                let empty = Labels::new();
                s.matches(ns_labels.get(ns).copied().unwrap_or(&empty))
            });
        in_ns && self.selector.matches(labels_of(&pod.metadata))
    }
}

fn required_affinity_terms(pod: &Pod) -> Vec<Term> {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    terms.into_iter().flatten().map(|t| Term::new(t, pod)).collect()
}

fn required_anti_affinity_terms(pod: &Pod) -> Vec<Term> {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    terms.into_iter().flatten().map(|t| Term::new(t, pod)).collect()
}

fn hard_spread_constraints(pod: &Pod) -> Vec<&TopologySpreadConstraint> {
    let cs = pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_ref());
    cs.into_iter().flatten().filter(|c| c.when_unsatisfiable == "DoNotSchedule").collect()
}

fn node_requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else { return false };
            let Ok(bound) = bound.parse::<i64>() else { return false };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// Whether `pod`'s `nodeSelector` and required node affinity select `node`.
fn node_selection_matches(pod: &Pod, node: &Node) -> bool {
    let labels = labels_of(&node.metadata);
    let Some(spec) = pod.spec.as_ref() else { return true };
    if let Some(sel) = &spec.node_selector {
        if !sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    let Some(required) = required else { return true };
    let name = node.metadata.name.as_deref();
    // The terms are ORed; a term ANDs its requirements; an empty term matches nothing.
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !fields.is_empty())
            && exprs.iter().all(|r| node_requirement_matches(r, labels.get(&r.key).map(String::as_str)))
            && fields.iter().all(|r| r.key == "metadata.name" && node_requirement_matches(r, name))
    })
}

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t.effect.as_deref().is_none_or(|e| e.is_empty() || e == taint.effect);
        let op = t.operator.as_deref().unwrap_or("Equal");
        let key_ok = match t.key.as_deref() {
            None | Some("") => op == "Exists",
            Some(k) => k == taint.key,
        };
        let value_ok =
            op == "Exists" || t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default();
        effect_ok && key_ok && value_ok
    })
}

/// Whether `pod` tolerates `node`'s `NoSchedule` and `NoExecute` taints.
fn tolerates_node(pod: &Pod, node: &Node) -> bool {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or_default();
    taints.iter().filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute").all(|t| tolerates(tolerations, t))
}

/// A pod on a node, as the checker sees it.
struct Placed<'a> {
    pod: &'a Pod,
    node: usize,
    alive: bool,
}

/// Counts of one spread constraint of one kind of pod, per domain, over its eligible nodes.
struct SpreadCounts {
    namespace: String,
    selector: Selector,
    key: String,
    eligible: Vec<bool>,
    counts: BTreeMap<String, i64>,
}

struct Checker<'a> {
    nodes: Vec<&'a Node>,
    node_index: HashMap<&'a str, usize>,
    ns_labels: HashMap<&'a str, &'a Labels>,
    pods: HashMap<String, &'a Pod>,
    placed: Vec<Placed<'a>>,
    placed_index: HashMap<String, usize>,
    /// Placed pods by topology key and domain (built on first use of a key).
    domains: HashMap<String, HashMap<String, Vec<usize>>>,
    /// Required anti-affinity terms of placed pods by topology key and domain.
    anti: BTreeMap<String, HashMap<String, Vec<(usize, Term)>>>,
    /// Spread counts by a description of the constraint and its pod's node selection.
    spread: HashMap<String, SpreadCounts>,
}

impl<'a> Checker<'a> {
    fn new(objects: &'a ClusterObjects) -> Self {
        let nodes: Vec<&Node> = objects.nodes.iter().map(|n| &**n).collect();
        let node_index =
            nodes.iter().enumerate().map(|(i, n)| (n.metadata.name.as_deref().unwrap_or_default(), i)).collect();
        let ns_labels = objects
            .namespaces
            .iter()
            .map(|n| (n.metadata.name.as_deref().unwrap_or_default(), labels_of(&n.metadata)))
            .collect();
        let mut c = Checker {
            nodes,
            node_index,
            ns_labels,
            pods: objects.pods.iter().map(|p| (pod_key(p), &**p)).collect(),
            placed: Vec::new(),
            placed_index: HashMap::new(),
            domains: HashMap::new(),
            anti: BTreeMap::new(),
            spread: HashMap::new(),
        };
        for p in &objects.pods {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let node = p.node_name();
            if let Some(&i) = node.and_then(|n| c.node_index.get(n)) {
                c.add(p, i);
            }
        }
        c
    }

    fn label(&self, node: usize, key: &str) -> Option<&'a str> {
        labels_of(&self.nodes[node].metadata).get(key).map(String::as_str)
    }

    fn node_name(&self, node: usize) -> &'a str {
        self.nodes[node].metadata.name.as_deref().unwrap_or_default()
    }

    fn add(&mut self, pod: &'a Pod, node: usize) {
        let idx = self.placed.len();
        self.placed.push(Placed { pod, node, alive: true });
        self.placed_index.insert(pod_key(pod), idx);
        for (key, by_value) in &mut self.domains {
            if let Some(v) = labels_of(&self.nodes[node].metadata).get(key) {
                by_value.entry(v.clone()).or_default().push(idx);
            }
        }
        for term in required_anti_affinity_terms(pod) {
            if let Some(v) = labels_of(&self.nodes[node].metadata).get(&term.topology_key) {
                let by_value = self.anti.entry(term.topology_key.clone()).or_default();
                by_value.entry(v.clone()).or_default().push((idx, term));
            }
        }
        let terminating = pod.metadata.deletion_timestamp.is_some();
        for s in self.spread.values_mut() {
            if s.eligible[node]
                && !terminating
                && pod_namespace(pod) == s.namespace
                && s.selector.matches(labels_of(&pod.metadata))
            {
                if let Some(v) = labels_of(&self.nodes[node].metadata).get(&s.key) {
                    *s.counts.entry(v.clone()).or_default() += 1;
                }
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(idx) = self.placed_index.remove(key) {
            self.placed[idx].alive = false;
            // Spread counts are rebuilt on their next use.
            self.spread.clear();
        }
    }

    /// Alive placed pods in `node`'s domain of `key` (none when the node lacks the key).
    fn in_domain(&mut self, key: &str, node: usize) -> Vec<usize> {
        let Some(value) = self.label(node, key) else { return Vec::new() };
        if !self.domains.contains_key(key) {
            let mut by_value: HashMap<String, Vec<usize>> = HashMap::new();
            for (i, p) in self.placed.iter().enumerate() {
                if let Some(v) = labels_of(&self.nodes[p.node].metadata).get(key) {
                    by_value.entry(v.clone()).or_default().push(i);
                }
            }
            self.domains.insert(key.to_string(), by_value);
        }
        let pods = self.domains[key].get(value).map(Vec::as_slice).unwrap_or_default();
        pods.iter().copied().filter(|&i| self.placed[i].alive).collect()
    }

    /// The violations of binding `pod` to `node`.
    fn check_bind(&mut self, pod: &'a Pod, node: usize) -> Vec<String> {
        let mut out = Vec::new();
        let node_name = self.node_name(node);
        let what = format!("pod {} on node {node_name}", pod_key(pod));
        if !node_selection_matches(pod, self.nodes[node]) {
            out.push(format!("{what}: node selector or required node affinity not matched"));
        }
        // Required anti-affinity of the pod.
        for term in required_anti_affinity_terms(pod) {
            for q in self.in_domain(&term.topology_key, node) {
                if term.matches(self.placed[q].pod, &self.ns_labels) {
                    out.push(format!(
                        "{what}: required anti-affinity ({}) broken by pod {} on node {}",
                        term.topology_key,
                        pod_key(self.placed[q].pod),
                        self.node_name(self.placed[q].node)
                    ));
                }
            }
        }
        // Symmetric: required anti-affinity of the placed pods.
        for (key, by_value) in &self.anti {
            let Some(v) = self.label(node, key) else { continue };
            for (q, term) in by_value.get(v).map(Vec::as_slice).unwrap_or_default() {
                if self.placed[*q].alive && term.matches(pod, &self.ns_labels) {
                    out.push(format!(
                        "{what}: required anti-affinity ({key}) of pod {} on node {} broken",
                        pod_key(self.placed[*q].pod),
                        self.node_name(self.placed[*q].node)
                    ));
                }
            }
        }
        // Required affinity.
        let terms = required_affinity_terms(pod);
        if !terms.is_empty() {
            out.extend(self.check_affinity(pod, node, &terms).map(|m| format!("{what}: {m}")));
        }
        // DoNotSchedule topology spread.
        let constraints = hard_spread_constraints(pod);
        for c in &constraints {
            out.extend(self.check_spread(pod, node, c, &constraints).map(|m| format!("{what}: {m}")));
        }
        out
    }

    fn check_affinity(&mut self, pod: &Pod, node: usize, terms: &[Term]) -> Option<String> {
        if let Some(t) = terms.iter().find(|t| self.label(node, &t.topology_key).is_none()) {
            return Some(format!("required affinity: the node has no label {}", t.topology_key));
        }
        let mut all_found = true;
        for t in terms {
            let found = self
                .in_domain(&t.topology_key, node)
                .into_iter()
                .any(|q| terms.iter().all(|u| u.matches(self.placed[q].pod, &self.ns_labels)));
            all_found &= found;
        }
        if all_found {
            return None;
        }
        // The exception: no placed pod (on a node with a term's key) matches all the terms,
        // and the pod matches them itself.
        let any_match = self.placed.iter().any(|p| {
            p.alive
                && terms.iter().any(|t| self.label(p.node, &t.topology_key).is_some())
                && terms.iter().all(|t| t.matches(p.pod, &self.ns_labels))
        });
        if !any_match && terms.iter().all(|t| t.matches(pod, &self.ns_labels)) {
            return None;
        }
        Some("required affinity: no matching pod in the node's domain".into())
    }

    fn check_spread(
        &mut self,
        pod: &Pod,
        node: usize,
        c: &TopologySpreadConstraint,
        all: &[&TopologySpreadConstraint],
    ) -> Option<String> {
        let Some(value) = self.label(node, &c.topology_key) else {
            return Some(format!("topology spread: the node has no label {}", c.topology_key));
        };
        let labels = labels_of(&pod.metadata);
        let selector =
            Selector::new(c.label_selector.as_ref(), labels, c.match_label_keys.as_deref().unwrap_or_default(), &[]);
        let honor_affinity = c.node_affinity_policy.as_deref() != Some("Ignore");
        let honor_taints = c.node_taints_policy.as_deref() == Some("Honor");
        let spec = pod.spec.as_ref();
        let keys: Vec<&str> = all.iter().map(|c| c.topology_key.as_str()).collect();
        let id = format!(
            "{}|{:?}|{}|{:?}|{:?}|{:?}",
            pod_namespace(pod),
            selector,
            c.topology_key,
            keys,
            honor_affinity.then(|| (
                spec.map(|s| &s.node_selector),
                spec.and_then(|s| s.affinity.as_ref()).map(|a| &a.node_affinity)
            )),
            honor_taints.then(|| spec.map(|s| &s.tolerations)),
        );
        if !self.spread.contains_key(&id) {
            let eligible: Vec<bool> = self
                .nodes
                .iter()
                .map(|n| {
                    let l = labels_of(&n.metadata);
                    keys.iter().all(|k| l.contains_key(*k))
                        && (!honor_affinity || node_selection_matches(pod, n))
                        && (!honor_taints || tolerates_node(pod, n))
                })
                .collect();
            let mut counts: BTreeMap<String, i64> = BTreeMap::new();
            for (i, n) in self.nodes.iter().enumerate() {
                if eligible[i] {
                    counts.entry(labels_of(&n.metadata)[&c.topology_key].clone()).or_default();
                }
            }
            let namespace = pod_namespace(pod).to_string();
            for p in self.placed.iter().filter(|p| p.alive && eligible[p.node]) {
                if p.pod.metadata.deletion_timestamp.is_none()
                    && pod_namespace(p.pod) == namespace
                    && selector.matches(labels_of(&p.pod.metadata))
                {
                    *counts.entry(labels_of(&self.nodes[p.node].metadata)[&c.topology_key].clone()).or_default() += 1;
                }
            }
            let entry =
                SpreadCounts { namespace, selector: selector.clone(), key: c.topology_key.clone(), eligible, counts };
            self.spread.insert(id.clone(), entry);
        }
        let s = &self.spread[&id];
        let domains = s.counts.len() as i64;
        let min =
            if domains < c.min_domains.unwrap_or(1) as i64 { 0 } else { s.counts.values().copied().min().unwrap_or(0) };
        let here = s.counts.get(value).copied().unwrap_or(0);
        let own = i64::from(selector.matches(labels));
        let skew = here + own - min;
        (skew > i64::from(c.max_skew)).then(|| {
            format!(
                "topology spread ({}): skew {skew} > maxSkew {} ({} matching pods in {value}, min {min})",
                c.topology_key, c.max_skew, here
            )
        })
    }
}

/// The required rules broken by the binds of `effects`, applied in order to `objects` (the
/// objects the cycle's snapshot was built from). Empty when every bind keeps every rule.
pub fn check(objects: &ClusterObjects, effects: &[Effect]) -> Vec<String> {
    let mut c = Checker::new(objects);
    let mut out = Vec::new();
    for e in effects {
        match e {
            Effect::Bind { pod, node, .. } => {
                let Some(&p) = c.pods.get(pod.key()) else {
                    out.push(format!("bind of pod {pod}, which is not in the cluster"));
                    continue;
                };
                let Some(&n) = c.node_index.get(&**node) else {
                    out.push(format!("pod {pod} bound to node {node}, which is not in the cluster"));
                    continue;
                };
                if c.placed_index.get(pod.key()).is_some_and(|&i| c.placed[i].alive) {
                    out.push(format!("pod {pod} bound to node {node} but already placed"));
                    continue;
                }
                out.extend(c.check_bind(p, n));
                c.add(p, n);
            }
            Effect::Evict { pod, .. } => c.remove(pod.key()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests;
