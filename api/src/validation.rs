//! What the API server and Volcano's admission webhooks check of the objects volcano-rs
//! reads, as pure functions: the simulator runs them on manifests, and the kube backend and
//! the webhook run the same checks (Volcano's CRD schemas and `pkg/webhooks`).
//!
//! Each check returns the first problem as a [`FieldError`]: the field path, as `kubectl`
//! prints it (`spec.containers[0].resources.requests[nvidia.com/gpu]`), and what was
//! expected. The caller adds the object and where it was written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crd::{PodGroup, Queue, ResourceList, HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION};
use crate::names::ROOT_QUEUE;
use crate::quantity;

/// One invalid field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`spec.minMember`).
    pub field: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The result of a check.
pub type Check = Result<(), FieldError>;

/// The highest priority a user-defined PriorityClass may have (Kubernetes
/// `HighestUserDefinablePriority`).
pub const HIGHEST_USER_PRIORITY: i32 = 1_000_000_000;

/// The PriorityClasses Kubernetes creates, with their values; only these may use the
/// `system-` prefix and values above [`HIGHEST_USER_PRIORITY`].
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] =
    [("system-cluster-critical", 2_000_000_000), ("system-node-critical", 2_000_001_000)];

/// The pod phases Kubernetes knows.
pub const POD_PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

/// Queue weights Volcano admits.
pub const QUEUE_WEIGHTS: std::ops::RangeInclusive<i32> = 1..=65535;

fn is_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A DNS-1123 label: at most 63 lower-case alphanumerics or `-`, starting and ending with an
/// alphanumeric (namespaces).
pub fn dns1123_label(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 63 {
        return Err(format!("{s:?} must be 1 to 63 characters long"));
    }
    if !(is_alnum(b[0]) && is_alnum(b[b.len() - 1]) && b.iter().all(|&c| is_alnum(c) || c == b'-')) {
        return Err(format!(
            "{s:?} is not a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated DNS-1123 labels (the names of
/// pods, nodes and most objects).
pub fn dns1123_subdomain(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 253 {
        return Err(format!("{s:?} must be 1 to 253 characters long"));
    }
    let ok = s.split('.').all(|part| {
        let b = part.as_bytes();
        !b.is_empty() && is_alnum(b[0]) && is_alnum(b[b.len() - 1]) && b.iter().all(|&c| is_alnum(c) || c == b'-')
    });
    if !ok {
        return Err(format!(
            "{s:?} is not a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a \
             letter or digit"
        ));
    }
    Ok(())
}

fn meta(m: &ObjectMeta, namespaced: bool) -> Check {
    match m.name.as_deref() {
        None | Some("") => return Err(FieldError::new("metadata.name", "required")),
        Some(name) => dns1123_subdomain(name).map_err(|e| FieldError::new("metadata.name", e))?,
    }
    if namespaced {
        if let Some(ns) = m.namespace.as_deref().filter(|n| !n.is_empty()) {
            dns1123_label(ns).map_err(|e| FieldError::new("metadata.namespace", e))?;
        }
    }
    Ok(())
}

/// Whether Kubernetes treats a resource as an extended resource: a name with a domain that
/// is not `kubernetes.io` (`nvidia.com/gpu`). Extended resources are whole units and cannot
/// be overcommitted.
pub fn is_extended_resource(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, _)) => {
            !(domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") || name.starts_with("requests."))
        }
        None => false,
    }
}

/// The largest quantity volcano-rs accepts for a resource: 2^53 bytes (8 PiB) for memory and
/// storage, 2^53 thousandths for the others (counted in milli-units, as Volcano does), so that
/// every value and every sum over a node's pods stays exact in 64 bits.
pub fn max_quantity(name: &str) -> f64 {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if name == "memory" || name == "ephemeral-storage" || name.starts_with("hugepages-") {
        EXACT
    } else {
        (EXACT / 1000.0).floor()
    }
}

/// Whether requests of a resource may be below its limit (cpu, memory, ephemeral storage).
fn overcommit_allowed(name: &str) -> bool {
    !(is_extended_resource(name) || name.starts_with("hugepages-"))
}

/// Every quantity of a list parses, none is negative, and extended resources are integers.
fn list(path: &str, list: Option<&ResourceList>) -> Check {
    for (name, q) in list.into_iter().flatten() {
        let field = || format!("{path}[{name}]");
        match quantity::parse(&q.0) {
            Err(e) => {
                return Err(FieldError::new(
                    field(),
                    format!("{e}; expected a Kubernetes quantity such as 500m, 4, 64Gi"),
                ))
            }
            Ok(v) if v < 0.0 => {
                return Err(FieldError::new(field(), format!("{:?} is negative; expected a quantity ≥ 0", q.0)))
            }
            Ok(v) if v > max_quantity(name) => {
                return Err(FieldError::new(
                    field(),
                    format!(
                        "{:?} is larger than volcano-rs accounts exactly (at most {}); no cluster holds that much",
                        q.0,
                        max_quantity(name)
                    ),
                ))
            }
            Ok(v) if is_extended_resource(name) && v.fract() != 0.0 => {
                return Err(FieldError::new(
                    field(),
                    format!("{:?} must be an integer: {name} is an extended resource, counted in whole units", q.0),
                ))
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

fn container(path: &str, c: &Container) -> Check {
    let Some(r) = &c.resources else { return Ok(()) };
    list(&format!("{path}.resources.requests"), r.requests.as_ref())?;
    list(&format!("{path}.resources.limits"), r.limits.as_ref())?;
    let empty = BTreeMap::new();
    let limits = r.limits.as_ref().unwrap_or(&empty);
    for (name, req) in r.requests.iter().flatten() {
        let field = || format!("{path}.resources.requests[{name}]");
        // Both parse: checked above.
        let request = quantity::parse(&req.0).unwrap_or(0.0);
        match limits.get(name) {
            Some(lim) => {
                let limit = quantity::parse(&lim.0).unwrap_or(0.0);
                if !overcommit_allowed(name) && request != limit {
                    return Err(FieldError::new(
                        field(),
                        format!("{:?} must be equal to the {name} limit of {:?}", req.0, lim.0),
                    ));
                }
                if request > limit {
                    return Err(FieldError::new(
                        field(),
                        format!("{:?} must be less than or equal to the {name} limit of {:?}", req.0, lim.0),
                    ));
                }
            }
            None if !overcommit_allowed(name) => {
                return Err(FieldError::new(
                    format!("{path}.resources.limits[{name}]"),
                    format!(
                        "required: {name} cannot be overcommitted, so its limit must be set (equal to the request)"
                    ),
                ))
            }
            None => {}
        }
    }
    Ok(())
}

/// A Pod, as the API server validates it.
pub fn pod(p: &Pod) -> Check {
    meta(&p.metadata, true)?;
    if let Some(phase) = p.status.as_ref().and_then(|s| s.phase.as_deref()).filter(|s| !s.is_empty()) {
        if !POD_PHASES.contains(&phase) {
            return Err(FieldError::new(
                "status.phase",
                format!("unknown pod phase {phase:?}; expected one of {}", POD_PHASES.join(", ")),
            ));
        }
    }
    let Some(spec) = &p.spec else { return Err(FieldError::new("spec", "required")) };
    if spec.containers.is_empty() {
        return Err(FieldError::new("spec.containers", "required: a pod has at least one container"));
    }
    for (group, containers) in
        [("containers", Some(&spec.containers)), ("initContainers", spec.init_containers.as_ref())]
    {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            container(&format!("spec.{group}[{i}]"), c)?;
        }
    }
    list("spec.overhead", spec.overhead.as_ref())?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        dns1123_subdomain(name).map_err(|e| FieldError::new("spec.nodeName", e))?;
    }
    Ok(())
}

/// A Node, as the API server validates it.
pub fn node(n: &Node) -> Check {
    meta(&n.metadata, false)?;
    let Some(status) = &n.status else { return Ok(()) };
    list("status.capacity", status.capacity.as_ref())?;
    list("status.allocatable", status.allocatable.as_ref())
}

/// A PriorityClass, as the API server validates it.
pub fn priority_class(pc: &PriorityClass) -> Check {
    meta(&pc.metadata, false)?;
    let name = pc.metadata.name.as_deref().unwrap_or_default();
    match SYSTEM_PRIORITY_CLASSES.iter().find(|(n, _)| *n == name) {
        Some((_, value)) if pc.value != *value => Err(FieldError::new(
            "value",
            format!("{} is not the value of the built-in class {name}; expected {value}", pc.value),
        )),
        Some(_) => Ok(()),
        None if name.starts_with("system-") => Err(FieldError::new(
            "metadata.name",
            format!("{name:?}: the prefix system- is reserved for Kubernetes' own priority classes"),
        )),
        None if pc.value > HIGHEST_USER_PRIORITY => Err(FieldError::new(
            "value",
            format!(
                "{} is above {HIGHEST_USER_PRIORITY}, the highest priority a user-defined class may have",
                pc.value
            ),
        )),
        None => Ok(()),
    }
}

/// A PodGroup, as the CRD schema and Volcano's webhook validate it.
pub fn pod_group(pg: &PodGroup) -> Check {
    meta(&pg.metadata, true)?;
    if pg.spec.min_member < 0 {
        return Err(FieldError::new("spec.minMember", format!("{} is negative; expected ≥ 0", pg.spec.min_member)));
    }
    for (role, n) in &pg.spec.min_task_member {
        if *n < 0 {
            return Err(FieldError::new(
                format!("spec.minTaskMember[{role}]"),
                format!("{n} is negative; expected ≥ 0"),
            ));
        }
    }
    list("spec.minResources", pg.spec.min_resources.as_ref())?;
    if let Some(s) = &pg.status {
        for (field, v) in
            [("status.running", s.running), ("status.succeeded", s.succeeded), ("status.failed", s.failed)]
        {
            if v < 0 {
                return Err(FieldError::new(field, format!("{v} is negative; expected ≥ 0")));
            }
        }
    }
    Ok(())
}

/// One of a queue's resource lists, by resource name.
type QueueAmounts = for<'q> fn(&'q Queue) -> BTreeMap<&'q str, f64>;

fn parent_of(q: &Queue) -> Option<&str> {
    q.spec.parent.as_deref().filter(|p| !p.is_empty())
}

fn deserved_of(q: &Queue) -> BTreeMap<&str, f64> {
    quantities(q.spec.deserved.as_ref())
}

fn guarantee_of(q: &Queue) -> BTreeMap<&str, f64> {
    quantities(q.spec.guarantee.as_ref().and_then(|g| g.resource.as_ref()))
}

fn quantities(l: Option<&ResourceList>) -> BTreeMap<&str, f64> {
    l.into_iter().flatten().filter_map(|(k, q)| quantity::parse(&q.0).ok().map(|v| (k.as_str(), v))).collect()
}

/// `small` ≤ `big` on every resource both name.
fn at_most(small: &BTreeMap<&str, f64>, big: &BTreeMap<&str, f64>) -> Option<String> {
    small.iter().find_map(|(k, v)| big.get(k).filter(|b| *v > **b + 1e-9).map(|b| format!("{k}: {v} > {b}")))
}

/// A Queue, as the CRD schema and Volcano's queue webhook validate it on its own (the
/// hierarchy across queues is [`queue_hierarchy`]).
pub fn queue(q: &Queue) -> Check {
    meta(&q.metadata, false)?;
    if let Some(w) = q.spec.weight {
        if !QUEUE_WEIGHTS.contains(&w) {
            return Err(FieldError::new(
                "spec.weight",
                format!("{w} is out of range; expected {} to {}", QUEUE_WEIGHTS.start(), QUEUE_WEIGHTS.end()),
            ));
        }
    }
    if let Some(p) = q.spec.priority.filter(|p| *p < 0) {
        return Err(FieldError::new("spec.priority", format!("{p} is negative; expected ≥ 0")));
    }
    list("spec.capability", q.spec.capability.as_ref())?;
    list("spec.deserved", q.spec.deserved.as_ref())?;
    let guarantee = q.spec.guarantee.as_ref().and_then(|g| g.resource.as_ref());
    list("spec.guarantee.resource", guarantee)?;
    list("status.allocated", q.status.as_ref().and_then(|s| s.allocated.as_ref()))?;
    let (cap, des, gua) =
        (quantities(q.spec.capability.as_ref()), quantities(q.spec.deserved.as_ref()), quantities(guarantee));
    if let Some(d) = at_most(&gua, &des) {
        return Err(FieldError::new("spec.guarantee.resource", format!("guarantee above deserved ({d})")));
    }
    if let Some(d) = at_most(&des, &cap) {
        return Err(FieldError::new("spec.deserved", format!("deserved above capability ({d})")));
    }
    if let Some(d) = at_most(&gua, &cap) {
        return Err(FieldError::new("spec.guarantee.resource", format!("guarantee above capability ({d})")));
    }
    hierarchy_annotations(&q.metadata)
}

/// `volcano.sh/hierarchy` and `volcano.sh/hierarchy-weights`: both or neither, the same
/// number of non-empty segments, weights positive numbers.
fn hierarchy_annotations(m: &ObjectMeta) -> Check {
    let a = m.annotations.as_ref();
    let h = a.and_then(|a| a.get(HIERARCHY_ANNOTATION));
    let w = a.and_then(|a| a.get(HIERARCHY_WEIGHTS_ANNOTATION));
    let field = |k: &str| format!("metadata.annotations[{k}]");
    match (h, w) {
        (None, None) => Ok(()),
        (Some(_), None) => {
            Err(FieldError::new(field(HIERARCHY_WEIGHTS_ANNOTATION), "required with volcano.sh/hierarchy"))
        }
        (None, Some(_)) => {
            Err(FieldError::new(field(HIERARCHY_ANNOTATION), "required with volcano.sh/hierarchy-weights"))
        }
        (Some(h), Some(w)) => {
            let segments: Vec<&str> = h.split('/').collect();
            let weights: Vec<&str> = w.split('/').collect();
            if segments.iter().any(|s| s.is_empty()) {
                return Err(FieldError::new(field(HIERARCHY_ANNOTATION), format!("{h:?} has an empty segment")));
            }
            if segments.len() != weights.len() {
                return Err(FieldError::new(
                    field(HIERARCHY_WEIGHTS_ANNOTATION),
                    format!("{w:?} has {} weights for the {} levels of {h:?}", weights.len(), segments.len()),
                ));
            }
            for weight in weights {
                match weight.parse::<f64>() {
                    Ok(v) if v > 0.0 && v.is_finite() => {}
                    _ => {
                        return Err(FieldError::new(
                            field(HIERARCHY_WEIGHTS_ANNOTATION),
                            format!("weight {weight:?} of {w:?} is not a positive number"),
                        ))
                    }
                }
            }
            Ok(())
        }
    }
}

/// The hierarchy of queues as Volcano's queue webhook admits it: every `spec.parent` exists
/// and no parent chain loops; a child's capability is within its parent's; the children's
/// deserved and guaranteed resources add up to at most their parent's; and no queue's
/// `volcano.sh/hierarchy` path is a strict prefix of another's (queues are the leaves of the
/// hierarchical-drf tree). Returns the queue at fault with the field.
pub fn queue_hierarchy<'a>(queues: impl IntoIterator<Item = &'a Queue>) -> Result<(), (String, FieldError)> {
    let queues: BTreeMap<&str, &Queue> =
        queues.into_iter().map(|q| (q.metadata.name.as_deref().unwrap_or_default(), q)).collect();
    for (name, q) in &queues {
        let Some(parent) = parent_of(q) else { continue };
        if *name == ROOT_QUEUE {
            return Err((name.to_string(), FieldError::new("spec.parent", "the root queue has no parent")));
        }
        let mut seen = BTreeSet::from([*name]);
        let mut cur = parent;
        loop {
            let Some(p) = queues.get(cur) else {
                return Err((
                    name.to_string(),
                    FieldError::new("spec.parent", format!("queue {cur:?} in the parent chain does not exist")),
                ));
            };
            if !seen.insert(cur) {
                return Err((name.to_string(), FieldError::new("spec.parent", "the parent chain contains a cycle")));
            }
            match parent_of(p) {
                Some(next) => cur = next,
                None => break,
            }
        }
        let parent_q = queues[parent];
        if let Some(d) =
            at_most(&quantities(q.spec.capability.as_ref()), &quantities(parent_q.spec.capability.as_ref()))
        {
            return Err((
                name.to_string(),
                FieldError::new("spec.capability", format!("above the capability of parent queue {parent} ({d})")),
            ));
        }
    }
    // Sums of the children against each parent.
    let mut children: BTreeMap<&str, Vec<&Queue>> = BTreeMap::new();
    for q in queues.values() {
        let parent = parent_of(q).unwrap_or(ROOT_QUEUE);
        if q.metadata.name.as_deref() != Some(ROOT_QUEUE) {
            children.entry(parent).or_default().push(q);
        }
    }
    for (parent, kids) in &children {
        let Some(p) = queues.get(parent) else { continue };
        let fields: [(&str, QueueAmounts); 2] =
            [("spec.deserved", deserved_of), ("spec.guarantee.resource", guarantee_of)];
        for (field, get) in fields {
            let own = get(p);
            if own.is_empty() {
                continue;
            }
            let mut sum: BTreeMap<String, f64> = BTreeMap::new();
            for k in kids {
                for (r, v) in get(k) {
                    *sum.entry(r.to_string()).or_default() += v;
                }
            }
            if let Some((r, v)) = sum.iter().find(|(r, v)| own.get(r.as_str()).is_some_and(|o| **v > *o + 1e-9)) {
                let last = kids.last().and_then(|k| k.metadata.name.clone()).unwrap_or_default();
                return Err((
                    last,
                    FieldError::new(
                        field,
                        format!(
                            "the children of queue {parent} add up to {v} {r}, above the parent's {}",
                            own[r.as_str()]
                        ),
                    ),
                ));
            }
        }
    }
    // Hierarchical-drf paths: a queue's path may not be a strict prefix of another's.
    let paths: Vec<(&str, String)> = queues
        .iter()
        .filter_map(|(n, q)| {
            let h = q.metadata.annotations.as_ref()?.get(HIERARCHY_ANNOTATION)?;
            let h = if h == ROOT_QUEUE || h.starts_with("root/") { h.clone() } else { format!("root/{h}") };
            Some((*n, h))
        })
        .collect();
    for (a, pa) in &paths {
        for (b, pb) in &paths {
            if a != b && pb.starts_with(&format!("{pa}/")) {
                return Err((
                    a.to_string(),
                    FieldError::new(
                        format!("metadata.annotations[{HIERARCHY_ANNOTATION}]"),
                        format!(
                            "{pa:?} is a prefix of queue {b}'s hierarchy {pb:?}: queues are leaves of the hierarchy"
                        ),
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::crd::{Guarantee, PodGroupSpec, QueueSpec};

    #[test]
    fn pod_groups() {
        let pg = |min: i32| {
            let mut pg = PodGroup::new("g", PodGroupSpec { min_member: min, ..Default::default() });
            pg.metadata.namespace = Some("ml".into());
            pg
        };
        assert!(pod_group(&pg(0)).is_ok());
        let e = pod_group(&pg(-1)).unwrap_err();
        assert_eq!(e.to_string(), "spec.minMember: -1 is negative; expected ≥ 0");
    }

    fn rl(items: &[(&str, &str)]) -> ResourceList {
        items.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect()
    }

    fn pod_with(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some("p".into()), namespace: Some("ml".into()), ..Default::default() },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        requests: Some(rl(requests)),
                        limits: Some(rl(limits)),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn names() {
        assert!(dns1123_subdomain("gpu-a1.zone-b").is_ok());
        assert!(dns1123_subdomain("Bad_Name").is_err());
        assert!(dns1123_subdomain("-x").is_err());
        assert!(dns1123_subdomain(&"a".repeat(254)).is_err());
        assert!(dns1123_label("ml-team").is_ok());
        assert!(dns1123_label("ml.team").is_err());
        assert!(dns1123_label(&"a".repeat(64)).is_err());
    }

    #[test]
    fn extended_resources_are_whole_and_not_overcommitted() {
        assert!(is_extended_resource("nvidia.com/gpu"));
        assert!(!is_extended_resource("cpu"));
        assert!(!is_extended_resource("kubernetes.io/something"));
        assert!(pod(&pod_with(&[("nvidia.com/gpu", "1")], &[("nvidia.com/gpu", "1")])).is_ok());
        let e = pod(&pod_with(&[("nvidia.com/gpu", "0.5")], &[("nvidia.com/gpu", "0.5")])).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].resources.requests[nvidia.com/gpu]");
        assert!(e.message.contains("must be an integer"), "{e}");
        let e = pod(&pod_with(&[("nvidia.com/gpu", "1")], &[("nvidia.com/gpu", "2")])).unwrap_err();
        assert!(e.message.contains("must be equal to the nvidia.com/gpu limit"), "{e}");
        let e = pod(&pod_with(&[("nvidia.com/gpu", "1")], &[])).unwrap_err();
        assert_eq!(e.field, "spec.containers[0].resources.limits[nvidia.com/gpu]");
        assert!(pod(&pod_with(&[], &[("nvidia.com/gpu", "1")])).is_ok(), "requests default to limits");
        assert!(pod(&pod_with(&[("cpu", "500m")], &[("cpu", "1")])).is_ok(), "cpu may be overcommitted");
        let e = pod(&pod_with(&[("memory", "99999999999999999999")], &[])).unwrap_err();
        assert!(e.message.contains("larger than volcano-rs accounts exactly"), "{e}");
        assert!(pod(&pod_with(&[("memory", "8Pi")], &[])).is_ok());
        let e = pod(&pod_with(&[("cpu", "2")], &[("cpu", "1")])).unwrap_err();
        assert!(e.message.contains("less than or equal"), "{e}");
    }

    #[test]
    fn pods() {
        let mut p = pod_with(&[("cpu", "1")], &[]);
        p.status = Some(PodStatus { phase: Some("Runing".into()), ..Default::default() });
        assert_eq!(pod(&p).unwrap_err().field, "status.phase");
        let mut p = pod_with(&[], &[]);
        p.metadata.name = Some("Web_1".into());
        assert_eq!(pod(&p).unwrap_err().field, "metadata.name");
        let mut p = pod_with(&[], &[]);
        p.spec.as_mut().unwrap().containers.clear();
        assert_eq!(pod(&p).unwrap_err().field, "spec.containers");
    }

    #[test]
    fn priority_classes() {
        let pc = |name: &str, value: i32| PriorityClass {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            value,
            ..Default::default()
        };
        assert!(priority_class(&pc("high", 1_000_000_000)).is_ok());
        assert_eq!(priority_class(&pc("high", 1_000_000_001)).unwrap_err().field, "value");
        assert!(priority_class(&pc("system-node-critical", 2_000_001_000)).is_ok());
        assert_eq!(priority_class(&pc("system-node-critical", 5)).unwrap_err().field, "value");
        assert_eq!(priority_class(&pc("system-mine", 5)).unwrap_err().field, "metadata.name");
    }

    fn q(name: &str, spec: QueueSpec) -> Queue {
        let mut q = Queue::new(name, spec);
        q.metadata.name = Some(name.into());
        q
    }

    #[test]
    fn queues() {
        assert!(queue(&q("a", QueueSpec { weight: Some(3), ..Default::default() })).is_ok());
        for w in [0, -1, 65536] {
            let e = queue(&q("a", QueueSpec { weight: Some(w), ..Default::default() })).unwrap_err();
            assert_eq!(e.field, "spec.weight", "{w}");
        }
        let spec = QueueSpec {
            deserved: Some(rl(&[("cpu", "4")])),
            guarantee: Some(Guarantee { resource: Some(rl(&[("cpu", "8")])) }),
            ..Default::default()
        };
        assert_eq!(queue(&q("a", spec)).unwrap_err().field, "spec.guarantee.resource");
        let mut bad = q("a", QueueSpec::default());
        bad.metadata.annotations =
            Some([(HIERARCHY_ANNOTATION.to_string(), "root/eng/dev".to_string())].into_iter().collect());
        assert!(queue(&bad).unwrap_err().field.contains("hierarchy-weights"));
        bad.metadata.annotations.as_mut().unwrap().insert(HIERARCHY_WEIGHTS_ANNOTATION.into(), "1/x/1".into());
        assert!(queue(&bad).unwrap_err().message.contains("not a positive number"));
    }

    #[test]
    fn hierarchies() {
        let child = |name: &str, parent: &str, deserved: &str| {
            q(
                name,
                QueueSpec {
                    parent: Some(parent.into()),
                    deserved: Some(rl(&[("cpu", deserved)])),
                    ..Default::default()
                },
            )
        };
        let eng = q("eng", QueueSpec { deserved: Some(rl(&[("cpu", "10")])), ..Default::default() });
        let ok = [eng.clone(), child("dev", "eng", "4"), child("test", "eng", "6")];
        assert!(queue_hierarchy(&ok).is_ok());
        let over = [eng.clone(), child("dev", "eng", "4"), child("test", "eng", "7")];
        let (name, e) = queue_hierarchy(&over).unwrap_err();
        assert_eq!((name.as_str(), e.field.as_str()), ("test", "spec.deserved"));
        let missing = [child("dev", "nope", "1")];
        assert!(queue_hierarchy(&missing).unwrap_err().1.message.contains("does not exist"));
        let cycle = [child("a", "b", "1"), child("b", "a", "1")];
        assert!(queue_hierarchy(&cycle).unwrap_err().1.message.contains("cycle"));
        let path = |name: &str, h: &str| {
            let mut x = q(name, QueueSpec::default());
            x.metadata.annotations = Some(
                [
                    (HIERARCHY_ANNOTATION.to_string(), h.to_string()),
                    (HIERARCHY_WEIGHTS_ANNOTATION.to_string(), "1".into()),
                ]
                .into_iter()
                .collect(),
            );
            x
        };
        let prefix = [path("eng", "root/eng"), path("dev", "root/eng/dev")];
        assert!(queue_hierarchy(&prefix).unwrap_err().1.message.contains("prefix"));
    }
}
