//! Kubernetes matching rules shared by the filter and score plugins: node selector terms
//! (`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`), taints and tolerations
//! (`ToleratesTaint`) and host ports (`HostPortInfo.CheckConflict`).
//!
//! Everything here borrows from the pod and node objects and never allocates, because it
//! runs for every (task, node) pair.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerPort, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use volcano_framework::pod::SchedPod as Pod;

/// The taint key a cordoned node is treated as having (`node.kubernetes.io/unschedulable`).
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// Taint effect `NoSchedule`.
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect `NoExecute`.
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
/// Taint effect `PreferNoSchedule`.
pub const EFFECT_PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";

/// The node field a `matchFields` requirement may select on.
const FIELD_NODE_NAME: &str = "metadata.name";

/// Whether `toleration` tolerates the taint `key=value:effect`.
///
/// Kubernetes rules: an empty toleration effect matches every effect; an empty toleration
/// key matches every key; operator `Exists` matches every value; operator `Equal` (or
/// empty) needs equal values; any other operator matches nothing.
pub fn tolerates(toleration: &Toleration, key: &str, value: &str, effect: &str) -> bool {
    if let Some(e) = toleration.effect.as_deref().filter(|e| !e.is_empty()) {
        if e != effect {
            return false;
        }
    }
    if let Some(k) = toleration.key.as_deref().filter(|k| !k.is_empty()) {
        if k != key {
            return false;
        }
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration.value.as_deref().unwrap_or("") == value,
        "Exists" => true,
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates the taint.
pub fn tolerations_tolerate(tolerations: &[Toleration], key: &str, value: &str, effect: &str) -> bool {
    tolerations.iter().any(|t| tolerates(t, key, value, effect))
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerations_tolerate_taint(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations_tolerate(tolerations, &taint.key, taint.value.as_deref().unwrap_or(""), &taint.effect)
}

/// The tolerations of a pod (empty when it has none).
pub fn pod_tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[])
}

/// The first `NoSchedule` or `NoExecute` taint of `taints` that `tolerations` does not
/// tolerate (kube-scheduler's TaintToleration filter). `PreferNoSchedule` taints are ignored.
pub fn first_untolerated_taint<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        (t.effect == EFFECT_NO_SCHEDULE || t.effect == EFFECT_NO_EXECUTE) && !tolerations_tolerate_taint(tolerations, t)
    })
}

/// Number of `PreferNoSchedule` taints that no toleration with an empty or
/// `PreferNoSchedule` effect tolerates (kube-scheduler's TaintToleration score, before
/// normalisation).
pub fn intolerable_prefer_no_schedule(taints: &[Taint], tolerations: &[Toleration]) -> u32 {
    let mut count = 0;
    for taint in taints.iter().filter(|t| t.effect == EFFECT_PREFER_NO_SCHEDULE) {
        let tolerated = tolerations
            .iter()
            .filter(|t| t.effect.as_deref().is_none_or(|e| e.is_empty() || e == EFFECT_PREFER_NO_SCHEDULE))
            .any(|t| tolerates(t, &taint.key, taint.value.as_deref().unwrap_or(""), &taint.effect));
        if !tolerated {
            count += 1;
        }
    }
    count
}

/// Go's `strconv.ParseInt(s, 10, 64)`.
fn parse_int(s: &str) -> Option<i64> {
    s.parse::<i64>().ok()
}

/// How a requirement of a `matchExpressions` list matches node labels; `None` when the
/// requirement is invalid (unknown operator, wrong number of values, non-integer value for
/// `Gt`/`Lt`), which makes its whole term match nothing.
pub(crate) fn expression_matches(req: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> Option<bool> {
    let values: &[String] = req.values.as_deref().unwrap_or(&[]);
    let label = labels.get(&req.key).map(String::as_str);
    match req.operator.as_str() {
        "In" | "NotIn" => {
            if values.is_empty() {
                return None;
            }
            let found = label.is_some_and(|l| values.iter().any(|v| v == l));
            Some(if req.operator == "In" { found } else { !found })
        }
        "Exists" | "DoesNotExist" => {
            if !values.is_empty() {
                return None;
            }
            Some((req.operator == "Exists") == label.is_some())
        }
        "Gt" | "Lt" => {
            let [value] = values else { return None };
            let bound = parse_int(value)?;
            let Some(actual) = label.and_then(parse_int) else { return Some(false) };
            Some(if req.operator == "Gt" { actual > bound } else { actual < bound })
        }
        _ => None,
    }
}

/// How a `matchFields` requirement matches the node; `None` when invalid (only `In` and
/// `NotIn` with exactly one value are valid).
fn field_matches(req: &NodeSelectorRequirement, node_name: &str) -> Option<bool> {
    let [value] = req.values.as_deref().unwrap_or(&[]) else { return None };
    let field = if req.key == FIELD_NODE_NAME { node_name } else { "" };
    match req.operator.as_str() {
        "In" => Some(field == value),
        "NotIn" => Some(field != value),
        _ => None,
    }
}

/// Whether a node selector term matches the node: every `matchExpressions` requirement
/// on the labels AND every `matchFields` requirement on the name.
///
/// A term with neither list, or with an invalid requirement, matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    // Kubernetes parses the whole term first: an invalid requirement anywhere fails it,
    // even after a requirement that already did not match.
    let mut matched = true;
    for e in exprs {
        match expression_matches(e, labels) {
            None => return false,
            Some(m) => matched &= m,
        }
    }
    for f in fields {
        match field_matches(f, node_name) {
            None => return false,
            // Kubernetes skips field requirements for a node without a name.
            Some(m) => matched &= m || node_name.is_empty(),
        }
    }
    matched
}

/// Whether the pod has a node selector or required node affinity (else every node matches
/// and [`required_node_affinity_matches`] need not read the node's labels).
pub fn has_required_node_constraints(spec: &PodSpec) -> bool {
    spec.node_selector.is_some()
        || spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .is_some_and(|na| na.required_during_scheduling_ignored_during_execution.is_some())
}

/// Whether the pod's `spec.nodeSelector` and required node affinity
/// (`requiredDuringSchedulingIgnoredDuringExecution`: terms ORed) both match the node.
pub fn required_node_affinity_matches(spec: &PodSpec, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
    if let Some(selector) = &spec.node_selector {
        if !selector.iter().all(|(k, v)| labels.get(k) == Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        None => true,
        Some(ns) => ns.node_selector_terms.iter().any(|t| term_matches(t, labels, node_name)),
    }
}

/// Σ weights of the pod's `preferredDuringSchedulingIgnoredDuringExecution` node affinity
/// terms that match the node (kube-scheduler's NodeAffinity score before normalisation).
/// Terms with weight 0 or no requirement are skipped.
pub fn preferred_node_affinity_score(spec: &PodSpec, labels: &BTreeMap<String, String>, node_name: &str) -> i64 {
    preferred_terms(spec)
        .iter()
        .filter(|p| p.weight != 0 && term_matches(&p.preference, labels, node_name))
        .map(|p| i64::from(p.weight))
        .sum()
}

/// The pod's preferred node affinity terms (empty when none).
pub fn preferred_terms(spec: &PodSpec) -> &[k8s_openapi::api::core::v1::PreferredSchedulingTerm] {
    spec.affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| na.preferred_during_scheduling_ignored_during_execution.as_deref())
        .unwrap_or(&[])
}

/// The host ports a pod uses: ports with `hostPort > 0` of its containers and of its
/// restartable ("sidecar") init containers, as kube-scheduler's `GetHostPorts` lists them.
pub fn host_ports(pod: &Pod) -> impl Iterator<Item = &ContainerPort> + '_ {
    let spec = pod.spec.as_ref();
    let sidecars = spec
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or(&[])
        .iter()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or(&[]).iter();
    sidecars
        .chain(containers)
        .flat_map(|c| c.ports.as_deref().unwrap_or(&[]).iter())
        .filter(|p| p.host_port.is_some_and(|hp| hp > 0))
}

const BIND_ALL: &str = "0.0.0.0";

fn host_ip(p: &ContainerPort) -> &str {
    p.host_ip.as_deref().filter(|ip| !ip.is_empty()).unwrap_or(BIND_ALL)
}

fn protocol(p: &ContainerPort) -> &str {
    p.protocol.as_deref().filter(|pr| !pr.is_empty()).unwrap_or("TCP")
}

/// Whether two host ports conflict: same host port and protocol (default `TCP`), and the
/// same host IP or either IP is `0.0.0.0` (the default when empty).
pub fn ports_conflict(wanted: &ContainerPort, used: &ContainerPort) -> bool {
    if wanted.host_port != used.host_port || protocol(wanted) != protocol(used) {
        return false;
    }
    let (a, b) = (host_ip(wanted), host_ip(used));
    a == BIND_ALL || b == BIND_ALL || a == b
}
