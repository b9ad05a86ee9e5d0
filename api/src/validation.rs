//! What the API server and Volcano's admission webhooks check of the objects volcano-rs
//! reads, as pure functions: the simulator runs them on manifests, and the kube backend and
//! the webhook run the same checks (Volcano's CRD schemas and `pkg/webhooks`).
//!
//! Each check returns the first problem as a [`FieldError`]: the field path, as `kubectl`
//! prints it (`spec.containers[0].resources.requests[nvidia.com/gpu]`), and what was
//! expected. The caller adds the object and where it was written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Container, Namespace, Node, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim,
    Pod, PodSpec, ReplicationController, Service, Taint, Toleration, Volume,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::crd::{
    NetworkTopologySpec, PodGroup, Queue, ResourceList, HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION,
};
use crate::names::ROOT_QUEUE;
use crate::quantity;
use crate::topology::{HyperNode, MemberSpec, MEMBER_TYPE_HYPER_NODE, MEMBER_TYPE_NODE};

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

/// The most bytes an object's annotations may hold, keys and values together (Kubernetes
/// `TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

/// The taint effects Kubernetes knows (of taints and tolerations).
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// The toleration operators Kubernetes knows (empty means `Equal`).
pub const TOLERATION_OPERATORS: [&str; 2] = ["Exists", "Equal"];

/// The operators of a label selector requirement (`matchExpressions` of a workload's
/// `spec.selector`).
pub const LABEL_SELECTOR_OPERATORS: [&str; 4] = ["In", "NotIn", "Exists", "DoesNotExist"];

/// The preemption policies of pods and PriorityClasses.
pub const PREEMPTION_POLICIES: [&str; 2] = ["PreemptLowerPriority", "Never"];

/// The operators of a node selector requirement (`matchExpressions`).
pub const NODE_SELECTOR_OPERATORS: [&str; 6] = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

/// The weights of a preferred node affinity term.
pub const PREFERRED_TERM_WEIGHTS: std::ops::RangeInclusive<i32> = 1..=100;

/// The access modes of PersistentVolumes and PersistentVolumeClaims.
pub const ACCESS_MODES: [&str; 4] = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"];

/// The volume binding modes of a StorageClass.
pub const VOLUME_BINDING_MODES: [&str; 2] = ["Immediate", "WaitForFirstConsumer"];

/// The reclaim policies of a StorageClass.
pub const RECLAIM_POLICIES: [&str; 2] = ["Delete", "Retain"];

/// The modes of a PodGroup's network topology constraint.
pub const NETWORK_TOPOLOGY_MODES: [&str; 2] = ["hard", "soft"];

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

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.'
}

/// At most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit:
/// the name part of a qualified name and a non-empty label value.
fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| is_name_char(c))
}

/// A qualified name (label and annotation keys, taint keys, resource names): a name of at
/// most 63 letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit,
/// with an optional DNS-1123 subdomain prefix and `/` (`example.com/MyName`).
pub fn qualified_name(s: &str) -> Result<(), String> {
    let name = match s.split_once('/') {
        None => s,
        Some(("", _)) => return Err(format!("{s:?} is not a qualified name: the prefix before '/' is empty")),
        Some((prefix, name)) => {
            dns1123_subdomain(prefix).map_err(|e| format!("{s:?} is not a qualified name: its prefix {e}"))?;
            name
        }
    };
    if name.is_empty() || name.len() > 63 {
        return Err(format!("{s:?} is not a qualified name: the name part must be 1 to 63 characters long"));
    }
    if !is_label_name(name) {
        return Err(format!(
            "{s:?} is not a qualified name: an optional DNS subdomain prefix and '/', then letters, digits, '-', \
             '_' and '.', starting and ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A label value: empty, or at most 63 letters, digits, `-`, `_` and `.`, starting and
/// ending with a letter or digit.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err(format!("{s:?} is not a valid label value: at most 63 characters"));
    }
    if !s.is_empty() && !is_label_name(s) {
        return Err(format!(
            "{s:?} is not a valid label value: letters, digits, '-', '_' and '.', starting and ending with a \
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
    if let Some(labels) = &m.labels {
        label_map("metadata.labels", labels)?;
    }
    let mut size = 0;
    for (k, v) in m.annotations.iter().flatten() {
        // The API server checks annotation keys without regard to case.
        qualified_name(&k.to_ascii_lowercase())
            .map_err(|e| FieldError::new(format!("metadata.annotations[{k}]"), format!("annotation key {e}")))?;
        size += k.len() + v.len();
    }
    if size > MAX_ANNOTATIONS_SIZE {
        return Err(FieldError::new(
            "metadata.annotations",
            format!("{size} bytes of keys and values; at most {MAX_ANNOTATIONS_SIZE} (256 KiB)"),
        ));
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

/// Resource names without a domain that containers may request: cpu, memory, ephemeral
/// storage and huge pages (Kubernetes `IsStandardContainerResourceName`).
fn is_standard_container_resource(name: &str) -> bool {
    matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-")
}

/// A resource name of a container's requests or limits (and of a pod's overhead): a
/// standard container resource, a name in the `kubernetes.io/` namespace, or an extended
/// resource (`nvidia.com/gpu`), all qualified names.
fn container_resource_name(path: &str, name: &str) -> Check {
    let field = || format!("{path}[{name}]");
    qualified_name(name).map_err(|e| FieldError::new(field(), format!("resource name {e}")))?;
    if !name.contains('/') {
        if !is_standard_container_resource(name) {
            return Err(FieldError::new(
                field(),
                format!(
                    "{name:?} is not a resource containers may request; expected cpu, memory, ephemeral-storage, \
                     hugepages-<size> or a domain-qualified name such as nvidia.com/gpu"
                ),
            ));
        }
    } else if !name.contains("kubernetes.io/") {
        // An extended resource; it is also quota'd as `requests.<name>`.
        if name.starts_with("requests.") {
            return Err(FieldError::new(
                field(),
                format!("{name:?} is not a valid extended resource name: the prefix requests. is reserved for quota"),
            ));
        }
        if qualified_name(&format!("requests.{name}")).is_err() {
            return Err(FieldError::new(
                field(),
                format!("{name:?} is not a valid extended resource name: its quota name requests.{name} is too long"),
            ));
        }
    }
    Ok(())
}

/// A container's (or a pod's overhead) resource list: names, then quantities.
fn container_resources(path: &str, l: Option<&ResourceList>) -> Check {
    for name in l.into_iter().flat_map(|l| l.keys()) {
        container_resource_name(path, name)?;
    }
    list(path, l)
}

fn container(path: &str, c: &Container) -> Check {
    let Some(r) = &c.resources else { return Ok(()) };
    container_resources(&format!("{path}.resources.requests"), r.requests.as_ref())?;
    container_resources(&format!("{path}.resources.limits"), r.limits.as_ref())?;
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
    let mut names = BTreeSet::new();
    for (group, containers) in
        [("containers", Some(&spec.containers)), ("initContainers", spec.init_containers.as_ref())]
    {
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let path = format!("spec.{group}[{i}]");
            container_name(&path, &c.name, &mut names)?;
            container(&path, c)?;
        }
    }
    for (i, c) in spec.ephemeral_containers.iter().flatten().enumerate() {
        container_name(&format!("spec.ephemeralContainers[{i}]"), &c.name, &mut names)?;
    }
    container_resources("spec.overhead", spec.overhead.as_ref())?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        dns1123_subdomain(name).map_err(|e| FieldError::new("spec.nodeName", e))?;
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        toleration(&format!("spec.tolerations[{i}]"), t)?;
    }
    preemption_policy("spec.preemptionPolicy", spec.preemption_policy.as_deref())?;
    volumes(spec.volumes.as_deref().unwrap_or_default())?;
    node_affinity(spec)
}

/// A pod's volumes: unique DNS-1123 label names; a claim name for PersistentVolumeClaim
/// volumes and a driver for inline CSI volumes. Other volume sources are not read.
fn volumes(volumes: &[Volume]) -> Check {
    let mut names = BTreeSet::new();
    for (i, v) in volumes.iter().enumerate() {
        let path = format!("spec.volumes[{i}]");
        dns1123_label(&v.name).map_err(|e| FieldError::new(format!("{path}.name"), e))?;
        if !names.insert(v.name.as_str()) {
            return Err(FieldError::new(
                format!("{path}.name"),
                format!("duplicate volume name {:?}: volume names are unique in a pod", v.name),
            ));
        }
        if let Some(c) = &v.persistent_volume_claim {
            if c.claim_name.is_empty() {
                return Err(FieldError::new(
                    format!("{path}.persistentVolumeClaim.claimName"),
                    "required: the name of a PersistentVolumeClaim in the pod's namespace",
                ));
            }
        }
        if v.csi.as_ref().is_some_and(|c| c.driver.is_empty()) {
            return Err(FieldError::new(format!("{path}.csi.driver"), "required: the name of a CSI driver"));
        }
    }
    Ok(())
}

/// Access modes: at least one, each known.
fn access_modes(path: &str, modes: Option<&Vec<String>>) -> Check {
    let modes = modes.map(Vec::as_slice).unwrap_or_default();
    if modes.is_empty() {
        return Err(FieldError::new(path, format!("required: at least one access mode ({})", ACCESS_MODES.join(", "))));
    }
    for (i, m) in modes.iter().enumerate() {
        if !ACCESS_MODES.contains(&m.as_str()) {
            return Err(FieldError::new(
                format!("{path}[{i}]"),
                format!("unknown access mode {m:?}; expected one of {}", ACCESS_MODES.join(", ")),
            ));
        }
    }
    Ok(())
}

/// A storage quantity that must be there.
fn storage(path: &str, list: Option<&ResourceList>) -> Check {
    if list.is_none_or(|l| !l.contains_key("storage")) {
        return Err(FieldError::new(format!("{path}[storage]"), "required: a storage quantity such as 10Gi"));
    }
    self::list(path, list)
}

/// A Namespace, as the API server validates it: a DNS-1123 label name.
pub fn namespace(ns: &Namespace) -> Check {
    meta(&ns.metadata, false)?;
    dns1123_label(ns.metadata.name.as_deref().unwrap_or_default()).map_err(|e| FieldError::new("metadata.name", e))
}

/// A PersistentVolumeClaim, as the API server validates it: access modes and a storage
/// request.
pub fn persistent_volume_claim(pvc: &PersistentVolumeClaim) -> Check {
    meta(&pvc.metadata, true)?;
    let Some(spec) = &pvc.spec else {
        return Err(FieldError::new("spec", "required: access modes and a storage request"));
    };
    access_modes("spec.accessModes", spec.access_modes.as_ref())?;
    storage("spec.resources.requests", spec.resources.as_ref().and_then(|r| r.requests.as_ref()))?;
    if let Some(name) = spec.volume_name.as_deref().filter(|n| !n.is_empty()) {
        dns1123_subdomain(name).map_err(|e| FieldError::new("spec.volumeName", e))?;
    }
    Ok(())
}

/// A PersistentVolume, as the API server validates it: access modes, a storage capacity,
/// a CSI source's driver and volume handle, and required node affinity terms.
pub fn persistent_volume(pv: &PersistentVolume) -> Check {
    meta(&pv.metadata, false)?;
    let Some(spec) = &pv.spec else {
        return Err(FieldError::new("spec", "required: access modes, a capacity and a volume source"));
    };
    access_modes("spec.accessModes", spec.access_modes.as_ref())?;
    storage("spec.capacity", spec.capacity.as_ref())?;
    if let Some(csi) = &spec.csi {
        if csi.driver.is_empty() {
            return Err(FieldError::new("spec.csi.driver", "required: the name of a CSI driver"));
        }
        if csi.volume_handle.is_empty() {
            return Err(FieldError::new("spec.csi.volumeHandle", "required: the volume's id for its driver"));
        }
    }
    if let Some(required) = spec.node_affinity.as_ref().and_then(|a| a.required.as_ref()) {
        let terms = "spec.nodeAffinity.required.nodeSelectorTerms";
        if required.node_selector_terms.is_empty() {
            return Err(FieldError::new(terms, "required: at least one node selector term"));
        }
        for (i, t) in required.node_selector_terms.iter().enumerate() {
            node_selector_term(&format!("{terms}[{i}]"), t)?;
        }
    }
    Ok(())
}

/// A StorageClass, as the API server validates it: a provisioner, a known binding mode and
/// reclaim policy.
pub fn storage_class(sc: &StorageClass) -> Check {
    meta(&sc.metadata, false)?;
    if sc.provisioner.is_empty() {
        return Err(FieldError::new("provisioner", "required: the name of the volume provisioner"));
    }
    if let Some(mode) = sc.volume_binding_mode.as_deref() {
        if !VOLUME_BINDING_MODES.contains(&mode) {
            return Err(FieldError::new(
                "volumeBindingMode",
                format!("unknown mode {mode:?}; expected one of {}", VOLUME_BINDING_MODES.join(", ")),
            ));
        }
    }
    if let Some(policy) = sc.reclaim_policy.as_deref() {
        if !RECLAIM_POLICIES.contains(&policy) {
            return Err(FieldError::new(
                "reclaimPolicy",
                format!("unknown policy {policy:?}; expected one of {}", RECLAIM_POLICIES.join(", ")),
            ));
        }
    }
    Ok(())
}

/// A CSINode, as the API server validates it: each driver named once, with a node id and a
/// volume limit that is not negative.
pub fn csi_node(c: &CSINode) -> Check {
    meta(&c.metadata, false)?;
    let mut names = BTreeSet::new();
    for (i, d) in c.spec.drivers.iter().enumerate() {
        let path = format!("spec.drivers[{i}]");
        if d.name.is_empty() {
            return Err(FieldError::new(format!("{path}.name"), "required: the name of a CSI driver"));
        }
        if !names.insert(d.name.as_str()) {
            return Err(FieldError::new(
                format!("{path}.name"),
                format!("duplicate driver {:?}: each driver is listed once", d.name),
            ));
        }
        if d.node_id.is_empty() {
            return Err(FieldError::new(format!("{path}.nodeID"), "required: the node's id for this driver"));
        }
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count).filter(|c| *c < 0) {
            return Err(FieldError::new(
                format!("{path}.allocatable.count"),
                format!("{count} is negative; expected the number of volumes the node can attach, ≥ 0"),
            ));
        }
    }
    Ok(())
}

/// A map of labels (an object's labels, a Service's or a ReplicationController's
/// `spec.selector`): qualified names as keys, label values as values.
fn label_map(path: &str, labels: &BTreeMap<String, String>) -> Check {
    for (k, v) in labels {
        let field = || format!("{path}[{k}]");
        qualified_name(k).map_err(|e| FieldError::new(field(), format!("label key {e}")))?;
        label_value(v).map_err(|e| FieldError::new(field(), e))?;
    }
    Ok(())
}

/// A label selector (`metav1.LabelSelector`), as the API server validates it: `matchLabels`
/// as labels, and each `matchExpressions` requirement with a qualified-name key, a known
/// operator, values for `In` and `NotIn` and none for `Exists` and `DoesNotExist`, each a
/// label value.
fn label_selector(path: &str, s: &LabelSelector) -> Check {
    label_map(&format!("{path}.matchLabels"), s.match_labels.as_ref().unwrap_or(&BTreeMap::new()))?;
    for (i, r) in s.match_expressions.iter().flatten().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let field = |f: &str| format!("{at}.{f}");
        let values = r.values.as_deref().unwrap_or_default();
        let op = r.operator.as_str();
        match op {
            "In" | "NotIn" if values.is_empty() => {
                return Err(FieldError::new(
                    field("values"),
                    format!("required: at least one value with operator {op}"),
                ))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(FieldError::new(field("values"), format!("must be empty with operator {op}")))
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => {
                return Err(FieldError::new(
                    field("operator"),
                    format!("unknown operator {op:?}; expected one of {}", LABEL_SELECTOR_OPERATORS.join(", ")),
                ))
            }
        }
        qualified_name(&r.key).map_err(|e| FieldError::new(field("key"), e))?;
        for (j, v) in values.iter().enumerate() {
            label_value(v).map_err(|e| FieldError::new(format!("{at}.values[{j}]"), e))?;
        }
    }
    Ok(())
}

/// The required, non-empty `spec.selector` of an `apps/v1` workload (the API server rejects
/// an empty one: it would select every pod of the namespace).
fn workload_selector(kind: &str, s: &LabelSelector) -> Check {
    label_selector("spec.selector", s)?;
    if s.match_labels.as_ref().is_none_or(BTreeMap::is_empty) && s.match_expressions.as_ref().is_none_or(Vec::is_empty)
    {
        return Err(FieldError::new(
            "spec.selector",
            format!("empty selector is invalid for a {kind}: at least one matchLabels entry or matchExpressions requirement"),
        ));
    }
    Ok(())
}

/// A Service, as the API server validates what the scheduler reads of it: its name, and
/// its `spec.selector` labels. Kubernetes names a Service with a DNS-1035 label (a DNS-1123
/// label that starts with a letter); this checks the DNS-1123 label, the closest rule here,
/// and so admits a name that starts with a digit. Ports, types and IPs are not read.
pub fn service(s: &Service) -> Check {
    meta(&s.metadata, true)?;
    dns1123_label(s.metadata.name.as_deref().unwrap_or_default()).map_err(|e| FieldError::new("metadata.name", e))?;
    match s.spec.as_ref().and_then(|spec| spec.selector.as_ref()) {
        Some(selector) => label_map("spec.selector", selector),
        None => Ok(()),
    }
}

/// A ReplicationController, as the API server validates what the scheduler reads of it: a
/// non-empty `spec.selector` of valid labels (the API server defaults an empty one to the
/// template's labels, and rejects it if it stays empty). The template is not read.
pub fn replication_controller(rc: &ReplicationController) -> Check {
    meta(&rc.metadata, true)?;
    let selector = rc.spec.as_ref().and_then(|s| s.selector.as_ref()).filter(|s| !s.is_empty());
    let Some(selector) = selector else {
        return Err(FieldError::new(
            "spec.selector",
            "required: the labels of the pods the controller manages (or template labels to default it from)",
        ));
    };
    label_map("spec.selector", selector)
}

/// A ReplicaSet (`apps/v1`), as the API server validates what the scheduler reads of it: a
/// valid, non-empty `spec.selector`. The template is not read.
pub fn replica_set(rs: &ReplicaSet) -> Check {
    meta(&rs.metadata, true)?;
    let Some(spec) = &rs.spec else {
        return Err(FieldError::new("spec.selector", "required: the selector of the pods the ReplicaSet manages"));
    };
    workload_selector("ReplicaSet", &spec.selector)
}

/// A StatefulSet (`apps/v1`), as the API server validates what the scheduler reads of it: a
/// valid, non-empty `spec.selector`. The template is not read.
pub fn stateful_set(ss: &StatefulSet) -> Check {
    meta(&ss.metadata, true)?;
    let Some(spec) = &ss.spec else {
        return Err(FieldError::new("spec.selector", "required: the selector of the pods the StatefulSet manages"));
    };
    workload_selector("StatefulSet", &spec.selector)
}

/// A container's name: a DNS-1123 label, unique among the pod's containers, init containers
/// and ephemeral containers (`names`, the names seen so far).
fn container_name<'a>(path: &str, name: &'a str, names: &mut BTreeSet<&'a str>) -> Check {
    let field = || format!("{path}.name");
    if name.is_empty() {
        return Err(FieldError::new(field(), "required"));
    }
    dns1123_label(name).map_err(|e| FieldError::new(field(), e))?;
    if !names.insert(name) {
        return Err(FieldError::new(
            field(),
            format!(
                "duplicate container name {name:?}: the names of a pod's containers and init containers are unique"
            ),
        ));
    }
    Ok(())
}

/// A toleration: a valid operator and key, a value only with `Equal`, a known effect, and
/// `tolerationSeconds` only for `NoExecute`.
fn toleration(path: &str, t: &Toleration) -> Check {
    let key = t.key.as_deref().unwrap_or_default();
    let operator = t.operator.as_deref().unwrap_or_default();
    let value = t.value.as_deref().unwrap_or_default();
    let effect = t.effect.as_deref().unwrap_or_default();
    if !key.is_empty() {
        qualified_name(key).map_err(|e| FieldError::new(format!("{path}.key"), e))?;
    }
    match operator {
        "" | "Equal" => {
            if key.is_empty() {
                return Err(FieldError::new(
                    format!("{path}.operator"),
                    "must be Exists when the key is empty (a toleration of every taint)",
                ));
            }
            label_value(value).map_err(|e| FieldError::new(format!("{path}.value"), e))?;
        }
        "Exists" => {
            if !value.is_empty() {
                return Err(FieldError::new(
                    format!("{path}.value"),
                    format!("{value:?}: the value must be empty when the operator is Exists"),
                ));
            }
        }
        other => {
            return Err(FieldError::new(
                format!("{path}.operator"),
                format!("unknown operator {other:?}; expected one of {}", TOLERATION_OPERATORS.join(", ")),
            ))
        }
    }
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        return Err(FieldError::new(
            format!("{path}.effect"),
            format!("unknown effect {effect:?}; expected empty (every effect) or one of {}", TAINT_EFFECTS.join(", ")),
        ));
    }
    if t.toleration_seconds.is_some() && effect != "NoExecute" {
        return Err(FieldError::new(
            format!("{path}.effect"),
            format!("{effect:?}: the effect must be NoExecute when tolerationSeconds is set"),
        ));
    }
    Ok(())
}

/// The preemption policy of a pod or PriorityClass, if set.
fn preemption_policy(field: &str, policy: Option<&str>) -> Check {
    match policy.filter(|p| !p.is_empty()) {
        Some(p) if !PREEMPTION_POLICIES.contains(&p) => Err(FieldError::new(
            field,
            format!("unknown preemption policy {p:?}; expected one of {}", PREEMPTION_POLICIES.join(", ")),
        )),
        _ => Ok(()),
    }
}

/// The node affinity of a pod: at least one required term; every term valid; preferred
/// terms weighted 1 to 100.
fn node_affinity(spec: &PodSpec) -> Check {
    let Some(na) = spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref()) else { return Ok(()) };
    let path = "spec.affinity.nodeAffinity";
    if let Some(required) = &na.required_during_scheduling_ignored_during_execution {
        let terms = format!("{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms");
        if required.node_selector_terms.is_empty() {
            return Err(FieldError::new(terms, "required: at least one node selector term"));
        }
        for (i, t) in required.node_selector_terms.iter().enumerate() {
            node_selector_term(&format!("{terms}[{i}]"), t)?;
        }
    }
    for (i, t) in na.preferred_during_scheduling_ignored_during_execution.iter().flatten().enumerate() {
        let term = format!("{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
        if !PREFERRED_TERM_WEIGHTS.contains(&t.weight) {
            return Err(FieldError::new(
                format!("{term}.weight"),
                format!(
                    "{} is out of range; expected {} to {}",
                    t.weight,
                    PREFERRED_TERM_WEIGHTS.start(),
                    PREFERRED_TERM_WEIGHTS.end()
                ),
            ));
        }
        node_selector_term(&format!("{term}.preference"), &t.preference)?;
    }
    Ok(())
}

/// A node selector term: its label requirements (`matchExpressions`) and its field
/// requirements (`matchFields`, on `metadata.name` only).
fn node_selector_term(path: &str, t: &NodeSelectorTerm) -> Check {
    for (j, r) in t.match_expressions.iter().flatten().enumerate() {
        node_selector_requirement(&format!("{path}.matchExpressions[{j}]"), r)?;
    }
    for (j, r) in t.match_fields.iter().flatten().enumerate() {
        node_field_requirement(&format!("{path}.matchFields[{j}]"), r)?;
    }
    Ok(())
}

fn node_selector_requirement(path: &str, r: &NodeSelectorRequirement) -> Check {
    let values = r.values.as_deref().unwrap_or_default();
    let field = |f: &str| format!("{path}.{f}");
    let op = r.operator.as_str();
    match op {
        "In" | "NotIn" if values.is_empty() => {
            return Err(FieldError::new(field("values"), format!("required: at least one value with operator {op}")))
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            return Err(FieldError::new(field("values"), format!("must be empty with operator {op}")))
        }
        // The API server asks for one value and compares it as an integer only when it
        // matches (a value that is not one matches no node); the cache must not drop a pod
        // the API server admitted, so neither does this check.
        "Gt" | "Lt" if values.len() != 1 => {
            return Err(FieldError::new(
                field("values"),
                format!("{} values; operator {op} takes exactly one integer", values.len()),
            ))
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        _ => {
            return Err(FieldError::new(
                field("operator"),
                format!("unknown operator {op:?}; expected one of {}", NODE_SELECTOR_OPERATORS.join(", ")),
            ))
        }
    }
    qualified_name(&r.key).map_err(|e| FieldError::new(field("key"), e))
}

/// A `matchFields` requirement: `metadata.name` `In` or `NotIn` exactly one node name.
fn node_field_requirement(path: &str, r: &NodeSelectorRequirement) -> Check {
    let values = r.values.as_deref().unwrap_or_default();
    let field = |f: &str| format!("{path}.{f}");
    if !matches!(r.operator.as_str(), "In" | "NotIn") {
        return Err(FieldError::new(
            field("operator"),
            format!("{:?} is not a field selector operator; expected In or NotIn", r.operator),
        ));
    }
    if values.len() != 1 {
        return Err(FieldError::new(
            field("values"),
            format!("{} values; a field selector takes exactly one with operator {}", values.len(), r.operator),
        ));
    }
    if r.key != "metadata.name" {
        return Err(FieldError::new(
            field("key"),
            format!("{:?} is not a node field selector key; expected metadata.name", r.key),
        ));
    }
    dns1123_subdomain(&values[0]).map_err(|e| FieldError::new(format!("{path}.values[0]"), e))
}

/// A Node, as the API server validates it.
pub fn node(n: &Node) -> Check {
    meta(&n.metadata, false)?;
    let mut taints = BTreeSet::new();
    for (i, t) in n.spec.iter().flat_map(|s| s.taints.iter().flatten()).enumerate() {
        taint(&format!("spec.taints[{i}]"), t)?;
        if !taints.insert((t.key.as_str(), t.effect.as_str())) {
            return Err(FieldError::new(
                format!("spec.taints[{i}]"),
                format!("duplicate taint {}:{}: taints are unique by key and effect", t.key, t.effect),
            ));
        }
    }
    let Some(status) = &n.status else { return Ok(()) };
    node_resources("status.capacity", status.capacity.as_ref())?;
    node_resources("status.allocatable", status.allocatable.as_ref())
}

/// A node taint: a qualified key, a label value, and a known effect.
fn taint(path: &str, t: &Taint) -> Check {
    qualified_name(&t.key).map_err(|e| FieldError::new(format!("{path}.key"), e))?;
    label_value(t.value.as_deref().unwrap_or_default()).map_err(|e| FieldError::new(format!("{path}.value"), e))?;
    if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
        let what = if t.effect.is_empty() { "required".to_string() } else { format!("unknown effect {:?}", t.effect) };
        return Err(FieldError::new(
            format!("{path}.effect"),
            format!("{what}; expected one of {}", TAINT_EFFECTS.join(", ")),
        ));
    }
    Ok(())
}

/// A node's capacity or allocatable: quantities as [`list`] checks them and a whole number
/// of pods. Names are not checked: the API server does not check them either (a kubelet or
/// device plugin may report an unprefixed name), and the cache must not drop a node the API
/// server admitted.
fn node_resources(path: &str, l: Option<&ResourceList>) -> Check {
    list(path, l)?;
    if let Some(pods) = l.and_then(|l| l.get("pods")) {
        if quantity::parse(&pods.0).is_ok_and(|v| v.fract() != 0.0) {
            return Err(FieldError::new(
                format!("{path}[pods]"),
                format!("{:?} must be an integer: pods are whole", pods.0),
            ));
        }
    }
    Ok(())
}

/// A PriorityClass, as the API server validates it.
pub fn priority_class(pc: &PriorityClass) -> Check {
    meta(&pc.metadata, false)?;
    preemption_policy("preemptionPolicy", pc.preemption_policy.as_deref())?;
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
    network_topology("spec.networkTopology", pg.spec.network_topology.as_ref())?;
    for (i, sg) in pg.spec.sub_group_policy.iter().flatten().enumerate() {
        network_topology(&format!("spec.subGroupPolicy[{i}].networkTopology"), sg.network_topology.as_ref())?;
    }
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

/// A network topology constraint: mode `hard` or `soft`, a tier ≥ 0.
fn network_topology(path: &str, nt: Option<&NetworkTopologySpec>) -> Check {
    let Some(nt) = nt else { return Ok(()) };
    if let Some(mode) = nt.mode.as_deref().filter(|m| !m.is_empty()) {
        if !NETWORK_TOPOLOGY_MODES.contains(&mode) {
            return Err(FieldError::new(
                format!("{path}.mode"),
                format!("unknown mode {mode:?}; expected one of {}", NETWORK_TOPOLOGY_MODES.join(", ")),
            ));
        }
    }
    if let Some(tier) = nt.highest_tier_allowed.filter(|t| *t < 0) {
        return Err(FieldError::new(format!("{path}.highestTierAllowed"), format!("{tier} is negative; expected ≥ 0")));
    }
    Ok(())
}

/// The member types of a HyperNode.
pub const HYPER_NODE_MEMBER_TYPES: [&str; 2] = [MEMBER_TYPE_NODE, MEMBER_TYPE_HYPER_NODE];

/// The statuses of a `metav1.Condition`.
pub const CONDITION_STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// A HyperNode, as Volcano's CRD schema (with its CEL rules on the selector) and its
/// HyperNode admission (`pkg/webhooks/admission/hypernodes`, and the
/// ValidatingAdmissionPolicy that replaced part of it) validate it: a cluster-scoped name;
/// `spec.tier` at least 0 and `spec.tierName` at most 253 characters; at least one member;
/// each member of type `Node` or `HyperNode` with exactly one of `exactMatch`, `regexMatch`
/// and `labelMatch`; an `exactMatch.name` that is a DNS-1123 subdomain (the schema) and a
/// qualified name (the admission: at most 63 characters but for a prefix); a non-empty
/// `regexMatch.pattern` that compiles; a valid `labelMatch` label selector;
/// `status.nodeCount` at least 0 and conditions as `metav1.Condition` requires.
///
/// Two differences from Volcano: the pattern is compiled by the `regex` crate, whose syntax
/// is RE2's as Go's `regexp` has it but for rare corners (Go also refuses a repetition
/// above 1000, `regex` only a pattern too large to compile); and an invalid `labelMatch`
/// selector is refused here, where Volcano admits it and then matches no node with it.
/// What Volcano admits but ignores is [`hyper_node_ignored`].
pub fn hyper_node(hn: &HyperNode) -> Check {
    meta(&hn.metadata, false)?;
    let spec = &hn.spec;
    if spec.tier < 0 {
        return Err(FieldError::new("spec.tier", format!("{} is negative; expected ≥ 0", spec.tier)));
    }
    if let Some(n) = spec.tier_name.as_deref().map(|t| t.chars().count()).filter(|n| *n > 253) {
        return Err(FieldError::new("spec.tierName", format!("{n} characters; at most 253")));
    }
    if spec.members.is_empty() {
        return Err(FieldError::new(
            "spec.members",
            "required: member must have at least one member (a node or a HyperNode)",
        ));
    }
    for (i, m) in spec.members.iter().enumerate() {
        hyper_node_member(&format!("spec.members[{i}]"), m)?;
    }
    if let Some(status) = &hn.status {
        if let Some(n) = status.node_count.filter(|n| *n < 0) {
            return Err(FieldError::new("status.nodeCount", format!("{n} is negative; expected ≥ 0")));
        }
        for (i, c) in status.conditions.iter().enumerate() {
            condition(&format!("status.conditions[{i}]"), c)?;
        }
    }
    Ok(())
}

fn hyper_node_member(at: &str, m: &MemberSpec) -> Check {
    match m.type_.as_str() {
        "" => {
            return Err(FieldError::new(
                format!("{at}.type"),
                format!("required: one of {}", HYPER_NODE_MEMBER_TYPES.join(", ")),
            ))
        }
        t if !HYPER_NODE_MEMBER_TYPES.contains(&t) => {
            return Err(FieldError::new(
                format!("{at}.type"),
                format!("unsupported value {t:?}; expected one of {}", HYPER_NODE_MEMBER_TYPES.join(", ")),
            ))
        }
        _ => {}
    }
    let s = &m.selector;
    let selector = format!("{at}.selector");
    match [s.exact_match.is_some(), s.regex_match.is_some(), s.label_match.is_some()].iter().filter(|b| **b).count() {
        0 => return Err(FieldError::new(selector, "Either ExactMatch or RegexMatch or LabelMatch must be specified")),
        1 => {}
        _ => {
            return Err(FieldError::new(selector, "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"))
        }
    }
    if let Some(exact) = &s.exact_match {
        let field = || format!("{selector}.exactMatch.name");
        if exact.name.is_empty() {
            return Err(FieldError::new(field(), "required: member exactMatch name is required"));
        }
        dns1123_subdomain(&exact.name).map_err(|e| FieldError::new(field(), e))?;
        qualified_name(&exact.name)
            .map_err(|e| FieldError::new(field(), format!("member exactMatch validate failed: {e}")))?;
    }
    if let Some(regex) = &s.regex_match {
        let field = || format!("{selector}.regexMatch.pattern");
        if regex.pattern.is_empty() {
            return Err(FieldError::new(field(), "required: member regexMatch pattern is required"));
        }
        regex::Regex::new(&regex.pattern).map_err(|e| {
            FieldError::new(field(), format!("member regexMatch pattern is invalid: {}", regex_error(&e)))
        })?;
    }
    if let Some(labels) = &s.label_match {
        label_selector(&format!("{selector}.labelMatch"), labels)?;
    }
    Ok(())
}

/// A `regex` error on one line: its `error: …` line (the syntax errors draw the pattern
/// with a caret over several lines).
fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let line = text.lines().find_map(|l| l.trim().strip_prefix("error: ")).unwrap_or(text.trim());
    line.to_string()
}

/// A `metav1.Condition`, as its schema constrains it.
fn condition(at: &str, c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> Check {
    let field = |f: &str| format!("{at}.{f}");
    let type_ok = c.type_.len() <= 316
        && match c.type_.split_once('/') {
            Some((prefix, name)) => dns1123_subdomain(prefix).is_ok() && is_condition_name(name),
            None => is_condition_name(&c.type_),
        };
    if !type_ok {
        return Err(FieldError::new(
            field("type"),
            format!(
                "{:?} is not a condition type: CamelCase or foo.example.com/CamelCase, at most 316 characters",
                c.type_
            ),
        ));
    }
    if !CONDITION_STATUSES.contains(&c.status.as_str()) {
        return Err(FieldError::new(
            field("status"),
            format!("unsupported value {:?}; expected one of {}", c.status, CONDITION_STATUSES.join(", ")),
        ));
    }
    let r = c.reason.as_bytes();
    let reason_ok = !r.is_empty()
        && r.len() <= 1024
        && r[0].is_ascii_alphabetic()
        && (r[r.len() - 1].is_ascii_alphanumeric() || r[r.len() - 1] == b'_')
        && r.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'));
    if !reason_ok {
        return Err(FieldError::new(
            field("reason"),
            format!(
                "{:?} is not a reason: 1 to 1024 letters, digits, '_', ',' and ':', starting with a letter and \
                 ending with a letter, digit or '_'",
                c.reason
            ),
        ));
    }
    if c.message.chars().count() > 32768 {
        return Err(FieldError::new(field("message"), "longer than 32768 characters"));
    }
    if let Some(g) = c.observed_generation.filter(|g| *g < 0) {
        return Err(FieldError::new(field("observedGeneration"), format!("{g} is negative; expected ≥ 0")));
    }
    Ok(())
}

/// The name of a condition type: letters, digits, `-`, `_` and `.`, starting and ending with
/// a letter or digit.
fn is_condition_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| is_name_char(c))
}

/// What Volcano admits in a HyperNode but ignores: a member of type `HyperNode` chosen by
/// `regexMatch` or `labelMatch` (Volcano's scheduler takes HyperNode members by
/// `exactMatch` only, and `labelMatch` only takes effect for nodes). One entry per such
/// member, for warnings; the HyperNode is valid all the same.
pub fn hyper_node_ignored(hn: &HyperNode) -> Vec<FieldError> {
    hn.spec
        .members
        .iter()
        .enumerate()
        .filter(|(_, m)| m.type_ == MEMBER_TYPE_HYPER_NODE)
        .filter_map(|(i, m)| {
            let which = if m.selector.regex_match.is_some() {
                "regexMatch"
            } else if m.selector.label_match.is_some() {
                "labelMatch"
            } else {
                return None;
            };
            Some(FieldError::new(
                format!("spec.members[{i}].selector.{which}"),
                format!("ignored: a member of type HyperNode is chosen by exactMatch only; {which} chooses nodes (type Node)"),
            ))
        })
        .collect()
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
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSpec, NodeStatus, PodSpec, PodStatus, PreferredSchedulingTerm,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use crate::crd::{Guarantee, PodGroupSpec, QueueSpec, SubGroupPolicySpec};

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

    fn field_of(r: Check) -> String {
        r.unwrap_err().field
    }

    #[test]
    fn qualified_names_and_label_values() {
        for ok in ["app", "My_Name.v1", "example.com/MyName", "kubernetes.io/hostname", "a", "1-2"] {
            assert!(qualified_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/x", "x/", "a/b/c", "Example.com/x", "-x", "x_", &"a".repeat(64), "a b"] {
            assert!(qualified_name(bad).is_err(), "{bad}");
        }
        assert!(qualified_name(&format!("{}/x", "a".repeat(253))).is_ok());
        assert!(qualified_name(&format!("{}/x", "a".repeat(254))).is_err());
        for ok in ["", "v1.2_beta-3", "A", &"a".repeat(63)] {
            assert!(label_value(ok).is_ok(), "{ok}");
        }
        for bad in ["-v", "v.", "a/b", "a b", &"a".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels_and_annotations() {
        let with = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| {
            let mut p = pod_with(&[], &[]);
            let map = |kv: &[(&str, &str)]| kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            p.metadata.labels = Some(map(labels));
            p.metadata.annotations = Some(map(annotations));
            p
        };
        let ok = with(
            &[("app.kubernetes.io/name", "web"), ("tier", ""), ("Team", "ML_1")],
            &[("Example.COM/Note", "any text: / at all"), ("kubectl.kubernetes.io/last-applied-configuration", "{}")],
        );
        assert!(pod(&ok).is_ok(), "{:?}", pod(&ok));
        assert_eq!(field_of(pod(&with(&[("bad key", "v")], &[]))), "metadata.labels[bad key]");
        assert_eq!(field_of(pod(&with(&[("x/y/z", "v")], &[]))), "metadata.labels[x/y/z]");
        assert_eq!(field_of(pod(&with(&[("Example.com/x", "v")], &[]))), "metadata.labels[Example.com/x]");
        assert_eq!(field_of(pod(&with(&[("app", "-web")], &[]))), "metadata.labels[app]");
        assert_eq!(field_of(pod(&with(&[("app", &"v".repeat(64))], &[]))), "metadata.labels[app]");
        assert_eq!(field_of(pod(&with(&[], &[("-note", "v")]))), "metadata.annotations[-note]");
        let big = "x".repeat(MAX_ANNOTATIONS_SIZE);
        assert_eq!(field_of(pod(&with(&[], &[("note", &big)]))), "metadata.annotations");
        assert!(pod(&with(&[], &[("note", &big[4..])])).is_ok(), "exactly 256 KiB");
        // Every object's metadata is checked.
        let mut n = node_named("n1");
        n.metadata.labels = Some([("a/b/c".to_string(), String::new())].into_iter().collect());
        assert_eq!(field_of(node(&n)), "metadata.labels[a/b/c]");
    }

    #[test]
    fn container_names() {
        let mut p = pod_with(&[], &[]);
        let spec = p.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![Container { name: "init".into(), ..Default::default() }]);
        spec.containers.push(Container { name: "sidecar-2".into(), ..Default::default() });
        assert!(pod(&p).is_ok());
        let mut bad = p.clone();
        bad.spec.as_mut().unwrap().containers[0].name = "Main_1".into();
        assert_eq!(field_of(pod(&bad)), "spec.containers[0].name");
        let mut bad = p.clone();
        bad.spec.as_mut().unwrap().containers[1].name = String::new();
        assert_eq!(field_of(pod(&bad)), "spec.containers[1].name");
        let mut bad = p.clone();
        bad.spec.as_mut().unwrap().containers[1].name = "c".into();
        let e = pod(&bad).unwrap_err();
        assert_eq!(e.field, "spec.containers[1].name");
        assert!(e.message.contains("duplicate"), "{e}");
        let mut bad = p.clone();
        bad.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].name = "sidecar-2".into();
        assert_eq!(field_of(pod(&bad)), "spec.initContainers[0].name");
        let mut bad = p;
        bad.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].name = "init.x".into();
        assert_eq!(field_of(pod(&bad)), "spec.initContainers[0].name");
    }

    fn node_named(name: &str) -> Node {
        Node { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    fn node_with_taints(taints: &[(&str, &str, &str)]) -> Node {
        let mut n = node_named("n1");
        n.spec = Some(NodeSpec {
            taints: Some(
                taints
                    .iter()
                    .map(|(k, v, e)| Taint {
                        key: k.to_string(),
                        value: (!v.is_empty()).then(|| v.to_string()),
                        effect: e.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        n
    }

    #[test]
    fn taints() {
        let ok = node_with_taints(&[
            ("nvidia.com/gpu", "present", "NoSchedule"),
            ("nvidia.com/gpu", "present", "NoExecute"),
            ("dedicated", "", "PreferNoSchedule"),
        ]);
        assert!(node(&ok).is_ok(), "{:?}", node(&ok));
        assert_eq!(field_of(node(&node_with_taints(&[("", "v", "NoSchedule")]))), "spec.taints[0].key");
        assert_eq!(field_of(node(&node_with_taints(&[("a b", "v", "NoSchedule")]))), "spec.taints[0].key");
        assert_eq!(field_of(node(&node_with_taints(&[("k", "not valid", "NoSchedule")]))), "spec.taints[0].value");
        assert_eq!(field_of(node(&node_with_taints(&[("k", "v", "NoScheduled")]))), "spec.taints[0].effect");
        assert_eq!(field_of(node(&node_with_taints(&[("k", "v", "")]))), "spec.taints[0].effect");
        let dup = node_with_taints(&[("k", "a", "NoSchedule"), ("k", "b", "NoSchedule")]);
        let e = node(&dup).unwrap_err();
        assert_eq!(e.field, "spec.taints[1]");
        assert!(e.message.contains("duplicate"), "{e}");
    }

    fn pod_tolerating(key: &str, op: &str, value: &str, effect: &str, seconds: Option<i64>) -> Pod {
        let mut p = pod_with(&[], &[]);
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        p.spec.as_mut().unwrap().tolerations = Some(vec![Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(effect),
            toleration_seconds: seconds,
        }]);
        p
    }

    #[test]
    fn tolerations() {
        for (key, op, value, effect, seconds) in [
            ("nvidia.com/gpu", "Exists", "", "NoSchedule", None),
            ("dedicated", "Equal", "ml", "", None),
            ("dedicated", "", "ml", "PreferNoSchedule", None),
            ("dedicated", "", "", "", None),
            ("", "Exists", "", "", None),
            ("", "Exists", "", "NoExecute", Some(30)),
            ("node.kubernetes.io/unreachable", "Exists", "", "NoExecute", Some(300)),
        ] {
            let p = pod_tolerating(key, op, value, effect, seconds);
            assert!(pod(&p).is_ok(), "{key} {op} {value} {effect}: {:?}", pod(&p));
        }
        for (key, op, value, effect, seconds, field) in [
            ("k", "Matches", "", "", None, "operator"),
            ("k", "Exists", "v", "", None, "value"),
            ("", "Equal", "", "", None, "operator"),
            ("", "", "", "NoSchedule", None, "operator"),
            ("a b", "Exists", "", "", None, "key"),
            ("k", "Equal", "not valid", "", None, "value"),
            ("k", "Exists", "", "NoExecuted", None, "effect"),
            ("k", "Exists", "", "NoSchedule", Some(10), "effect"),
            ("k", "Exists", "", "", Some(10), "effect"),
        ] {
            let p = pod_tolerating(key, op, value, effect, seconds);
            assert_eq!(field_of(pod(&p)), format!("spec.tolerations[0].{field}"), "{key} {op} {value} {effect}");
        }
    }

    #[test]
    fn preemption_policies() {
        let mut p = pod_with(&[], &[]);
        for ok in ["PreemptLowerPriority", "Never"] {
            p.spec.as_mut().unwrap().preemption_policy = Some(ok.into());
            assert!(pod(&p).is_ok(), "{ok}");
        }
        p.spec.as_mut().unwrap().preemption_policy = Some("never".into());
        assert_eq!(field_of(pod(&p)), "spec.preemptionPolicy");
        let mut pc = PriorityClass {
            metadata: ObjectMeta { name: Some("high".into()), ..Default::default() },
            value: 1000,
            preemption_policy: Some("Never".into()),
            ..Default::default()
        };
        assert!(priority_class(&pc).is_ok());
        pc.preemption_policy = Some("PreemptAll".into());
        assert_eq!(field_of(priority_class(&pc)), "preemptionPolicy");
    }

    #[test]
    fn resource_names() {
        for name in ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "nvidia.com/gpu", "kubernetes.io/x"] {
            let p = pod_with(&[(name, "1")], &[(name, "1")]);
            assert!(pod(&p).is_ok(), "{name}: {:?}", pod(&p));
        }
        for (name, field) in [
            ("pods", "spec.containers[0].resources.requests[pods]"),
            ("gpu", "spec.containers[0].resources.requests[gpu]"),
            ("Nvidia.com/gpu", "spec.containers[0].resources.requests[Nvidia.com/gpu]"),
            ("nvidia.com/", "spec.containers[0].resources.requests[nvidia.com/]"),
            ("requests.example.com/x", "spec.containers[0].resources.requests[requests.example.com/x]"),
        ] {
            assert_eq!(field_of(pod(&pod_with(&[(name, "1")], &[]))), field, "{name}");
        }
        assert_eq!(field_of(pod(&pod_with(&[], &[("pods", "1")]))), "spec.containers[0].resources.limits[pods]");
        let node_with = |items: &[(&str, &str)]| {
            let mut n = node_named("n1");
            n.status =
                Some(NodeStatus { capacity: Some(rl(items)), allocatable: Some(rl(items)), ..Default::default() });
            n
        };
        let ok = node_with(&[
            ("cpu", "8"),
            ("memory", "32Gi"),
            ("ephemeral-storage", "100Gi"),
            ("pods", "110"),
            ("hugepages-1Gi", "0"),
            ("nvidia.com/gpu", "4"),
            ("attachable-volumes-aws-ebs", "25"),
        ]);
        assert!(node(&ok).is_ok(), "{:?}", node(&ok));
        assert!(node(&node_with(&[("gpu", "1")])).is_ok(), "the API server does not check node resource names");
        assert_eq!(field_of(node(&node_with(&[("pods", "110.5")]))), "status.capacity[pods]");
        assert_eq!(field_of(node(&node_with(&[("pods", "1500m")]))), "status.capacity[pods]");
    }

    fn requirement(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn pod_with_affinity(required: Option<Vec<NodeSelectorTerm>>, preferred: &[(i32, NodeSelectorTerm)]) -> Pod {
        let mut p = pod_with(&[], &[]);
        p.spec.as_mut().unwrap().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: required
                    .map(|node_selector_terms| NodeSelector { node_selector_terms }),
                preferred_during_scheduling_ignored_during_execution: Some(
                    preferred
                        .iter()
                        .map(|(weight, t)| PreferredSchedulingTerm { weight: *weight, preference: t.clone() })
                        .collect(),
                ),
            }),
            ..Default::default()
        });
        p
    }

    fn expressions(rs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm { match_expressions: Some(rs), ..Default::default() }
    }

    fn fields(rs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm { match_fields: Some(rs), ..Default::default() }
    }

    #[test]
    fn node_affinity_terms() {
        let good = vec![
            expressions(vec![
                requirement("topology.kubernetes.io/zone", "In", &["a", "b"]),
                requirement("disk", "NotIn", &["hdd"]),
                requirement("gpu", "Exists", &[]),
                requirement("spot", "DoesNotExist", &[]),
                requirement("cores", "Gt", &["8"]),
                requirement("age", "Lt", &["-3"]),
            ]),
            fields(vec![requirement("metadata.name", "In", &["node-1"])]),
            fields(vec![requirement("metadata.name", "NotIn", &["node-2.zone"])]),
        ];
        let p = pod_with_affinity(Some(good.clone()), &[(1, good[0].clone()), (100, good[1].clone())]);
        assert!(pod(&p).is_ok(), "{:?}", pod(&p));
        let required = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        for (term, field) in [
            (expressions(vec![requirement("zone", "In", &[])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("zone", "NotIn", &[])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("gpu", "Exists", &["x"])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("gpu", "DoesNotExist", &["x"])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("cores", "Gt", &[])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("cores", "Gt", &["1", "2"])]), "matchExpressions[0].values"),
            (expressions(vec![requirement("zone", "in", &["a"])]), "matchExpressions[0].operator"),
            (expressions(vec![requirement("zone", "", &["a"])]), "matchExpressions[0].operator"),
            (expressions(vec![requirement("bad key", "In", &["a"])]), "matchExpressions[0].key"),
            (expressions(vec![requirement("", "Exists", &[])]), "matchExpressions[0].key"),
            (fields(vec![requirement("metadata.uid", "In", &["x"])]), "matchFields[0].key"),
            (fields(vec![requirement("metadata.name", "Exists", &[])]), "matchFields[0].operator"),
            (fields(vec![requirement("metadata.name", "In", &["a", "b"])]), "matchFields[0].values"),
            (fields(vec![requirement("metadata.name", "In", &[])]), "matchFields[0].values"),
            (fields(vec![requirement("metadata.name", "In", &["Node_1"])]), "matchFields[0].values[0]"),
        ] {
            let p = pod_with_affinity(Some(vec![good[0].clone(), term.clone()]), &[]);
            assert_eq!(field_of(pod(&p)), format!("{required}[1].{field}"));
            let p = pod_with_affinity(None, &[(10, good[0].clone()), (10, term)]);
            assert_eq!(
                field_of(pod(&p)),
                format!(
                    "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].preference.{field}"
                )
            );
        }
        assert_eq!(field_of(pod(&pod_with_affinity(Some(vec![]), &[]))), required);
        // A Gt/Lt value that is not an integer is admitted by the API server (it matches no node).
        let eight = expressions(vec![requirement("cores", "Lt", &["eight"])]);
        assert!(pod(&pod_with_affinity(Some(vec![eight]), &[])).is_ok());
        for w in [0, -1, 101] {
            let p = pod_with_affinity(None, &[(w, good[0].clone())]);
            assert_eq!(
                field_of(pod(&p)),
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"
            );
        }
    }

    #[test]
    fn network_topologies() {
        let nt = |mode: Option<&str>, tier: Option<i32>| NetworkTopologySpec {
            mode: mode.map(str::to_string),
            highest_tier_allowed: tier,
            ..Default::default()
        };
        let pg = |nt: NetworkTopologySpec| {
            let mut pg =
                PodGroup::new("g", PodGroupSpec { min_member: 1, network_topology: Some(nt), ..Default::default() });
            pg.metadata.namespace = Some("ml".into());
            pg
        };
        for ok in [nt(Some("hard"), Some(1)), nt(Some("soft"), None), nt(None, Some(0)), nt(None, None)] {
            assert!(pod_group(&pg(ok.clone())).is_ok(), "{ok:?}");
        }
        assert_eq!(field_of(pod_group(&pg(nt(Some("Hard"), None)))), "spec.networkTopology.mode");
        assert_eq!(field_of(pod_group(&pg(nt(Some("strict"), None)))), "spec.networkTopology.mode");
        assert_eq!(field_of(pod_group(&pg(nt(None, Some(-1))))), "spec.networkTopology.highestTierAllowed");
        let mut sub = pg(nt(None, None));
        sub.spec.sub_group_policy = Some(vec![SubGroupPolicySpec {
            name: "workers".into(),
            network_topology: Some(nt(Some("loose"), None)),
            ..Default::default()
        }]);
        assert_eq!(field_of(pod_group(&sub)), "spec.subGroupPolicy[0].networkTopology.mode");
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

    #[test]
    fn workload_selectors() {
        fn object(kind: &str, spec: serde_json::Value) -> serde_json::Value {
            serde_json::json!({"metadata": {"name": "web", "namespace": "ml"}, "kind": kind, "spec": spec})
        }
        let svc = |spec: serde_json::Value| service(&serde_json::from_value(object("Service", spec)).unwrap());
        let rc = |spec: serde_json::Value| {
            replication_controller(&serde_json::from_value(object("ReplicationController", spec)).unwrap())
        };
        let rs = |spec: serde_json::Value| replica_set(&serde_json::from_value(object("ReplicaSet", spec)).unwrap());
        let ss = |spec: serde_json::Value| stateful_set(&serde_json::from_value(object("StatefulSet", spec)).unwrap());
        let field = |c: Check| c.unwrap_err().field;

        // Services: any selector of valid labels, none, or an empty one.
        assert!(svc(serde_json::json!({"selector": {"app": "web", "example.com/tier": ""}})).is_ok());
        assert!(svc(serde_json::json!({})).is_ok());
        assert!(svc(serde_json::json!({"selector": {}})).is_ok());
        assert_eq!(field(svc(serde_json::json!({"selector": {"-bad": "x"}}))), "spec.selector[-bad]");
        assert_eq!(field(svc(serde_json::json!({"selector": {"app": "no spaces"}}))), "spec.selector[app]");
        let dotted: Service =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "a.b"}, "spec": {}})).unwrap();
        assert_eq!(service(&dotted).unwrap_err().field, "metadata.name", "a Service name is a label");

        // ReplicationControllers: a non-empty selector of valid labels.
        assert!(rc(serde_json::json!({"selector": {"app": "web"}})).is_ok());
        assert_eq!(field(rc(serde_json::json!({}))), "spec.selector");
        assert_eq!(field(rc(serde_json::json!({"selector": {}}))), "spec.selector");
        assert_eq!(field(rc(serde_json::json!({"selector": {"app": "a b"}}))), "spec.selector[app]");

        // ReplicaSets and StatefulSets: a valid, non-empty label selector.
        for check in [rs as fn(serde_json::Value) -> Check, ss] {
            let ok = serde_json::json!({"selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                     {"key": "canary", "operator": "DoesNotExist"}]}, "template": {}});
            assert!(check(ok).is_ok());
            let only_expr = serde_json::json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "template": {}});
            assert!(check(only_expr).is_ok());
            let e = check(serde_json::json!({"selector": {}, "template": {}})).unwrap_err();
            assert_eq!(e.field, "spec.selector");
            assert!(e.message.starts_with("empty selector is invalid"), "{e}");
            let cases = [
                (serde_json::json!({"matchLabels": {"app": "a b"}}), "spec.selector.matchLabels[app]"),
                (
                    serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
                    "spec.selector.matchExpressions[0].values",
                ),
                (
                    serde_json::json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}),
                    "spec.selector.matchExpressions[0].values",
                ),
                (
                    serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                    "spec.selector.matchExpressions[0].values",
                ),
                (
                    serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
                    "spec.selector.matchExpressions[0].operator",
                ),
                (
                    serde_json::json!({"matchExpressions": [{"key": "-a", "operator": "Exists"}]}),
                    "spec.selector.matchExpressions[0].key",
                ),
                (
                    serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "not ok"]}]}),
                    "spec.selector.matchExpressions[0].values[1]",
                ),
            ];
            for (selector, path) in cases {
                assert_eq!(field(check(serde_json::json!({"selector": selector, "template": {}}))), path, "{selector}");
            }
        }
        let no_spec: ReplicaSet = serde_json::from_value(serde_json::json!({"metadata": {"name": "web"}})).unwrap();
        assert_eq!(replica_set(&no_spec).unwrap_err().field, "spec.selector");
        let e = ss(serde_json::json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "template": {}}))
            .unwrap_err();
        assert!(e.message.contains("expected one of In, NotIn, Exists, DoesNotExist"), "{e}");
    }

    /// A HyperNode from its manifest's JSON (as the simulator and the webhook decode it).
    fn hn(spec: serde_json::Value) -> HyperNode {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "s0"}, "spec": spec,
        }))
        .unwrap()
    }

    fn hn_error(spec: serde_json::Value) -> String {
        hyper_node(&hn(spec)).unwrap_err().to_string()
    }

    #[test]
    fn hyper_nodes_as_volcanos_schema_and_webhook_admit_them() {
        use serde_json::json;
        let good = hn(json!({"tier": 2, "tierName": "spine", "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-0"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "gpu-0.rack-a"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"topology/rack": "a"},
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}}},
            {"type": "Node", "selector": {"labelMatch": {}}},
        ]}));
        assert_eq!(hyper_node(&good), Ok(()));
        assert!(hyper_node_ignored(&good).is_empty());

        let member = |m: serde_json::Value| json!({"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n0"}}}, m]});
        for (spec, expected) in [
            (json!({"tier": -1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}]}),
             "spec.tier: -1 is negative; expected ≥ 0"),
            (json!({"tier": 1, "tierName": "t".repeat(254), "members": [{"type": "Node", "selector": {"exactMatch": {"name": "n"}}}]}),
             "spec.tierName: 254 characters; at most 253"),
            (json!({"tier": 1}), "spec.members: required: member must have at least one member (a node or a HyperNode)"),
            (json!({"tier": 1, "members": []}), "spec.members: required: member must have at least one member (a node or a HyperNode)"),
            (member(json!({"selector": {"exactMatch": {"name": "n1"}}})), "spec.members[1].type: required: one of Node, HyperNode"),
            (member(json!({"type": "Switch", "selector": {"exactMatch": {"name": "n1"}}})),
             "spec.members[1].type: unsupported value \"Switch\"; expected one of Node, HyperNode"),
            (member(json!({"type": "Node"})),
             "spec.members[1].selector: Either ExactMatch or RegexMatch or LabelMatch must be specified"),
            (member(json!({"type": "Node", "selector": {"exactMatch": {"name": "n1"}, "regexMatch": {"pattern": "n"}}})),
             "spec.members[1].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"),
            (member(json!({"type": "Node", "selector": {"regexMatch": {"pattern": "n"}, "labelMatch": {}}})),
             "spec.members[1].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"),
            (member(json!({"type": "Node", "selector": {"exactMatch": {"name": ""}}})),
             "spec.members[1].selector.exactMatch.name: required: member exactMatch name is required"),
            (member(json!({"type": "Node", "selector": {"regexMatch": {"pattern": ""}}})),
             "spec.members[1].selector.regexMatch.pattern: required: member regexMatch pattern is required"),
            (member(json!({"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-(0|1"}}})),
             "spec.members[1].selector.regexMatch.pattern: member regexMatch pattern is invalid: unclosed group"),
            (member(json!({"type": "Node", "selector": {"labelMatch": {"matchExpressions": [{"key": "zone", "operator": "In"}]}}})),
             "spec.members[1].selector.labelMatch.matchExpressions[0].values: required: at least one value with operator In"),
            (member(json!({"type": "Node", "selector": {"labelMatch": {"matchLabels": {"bad key": "x"}}}})),
             "spec.members[1].selector.labelMatch.matchLabels[bad key]: label key \"bad key\" is not a qualified name: an optional DNS subdomain prefix and '/', then letters, digits, '-', '_' and '.', starting and ending with a letter or digit"),
        ] {
            assert_eq!(hn_error(spec), expected);
        }
        // The name: a DNS-1123 subdomain (the schema's pattern), and a qualified name (the
        // admission's check: at most 63 characters).
        let e = hn_error(member(json!({"type": "Node", "selector": {"exactMatch": {"name": "Gpu_0"}}})));
        assert!(
            e.starts_with("spec.members[1].selector.exactMatch.name: \"Gpu_0\" is not a DNS-1123 subdomain"),
            "{e}"
        );
        let long = "n".repeat(64);
        let e = hn_error(member(json!({"type": "Node", "selector": {"exactMatch": {"name": long}}})));
        assert!(e.starts_with("spec.members[1].selector.exactMatch.name: member exactMatch validate failed: "), "{e}");
        assert!(e.ends_with("the name part must be 1 to 63 characters long"), "{e}");
        let ok = format!("{}.{}", "n".repeat(31), "n".repeat(31));
        assert_eq!(hyper_node(&hn(member(json!({"type": "Node", "selector": {"exactMatch": {"name": ok}}})))), Ok(()));

        // The status.
        let mut h = good.clone();
        h.status = Some(crate::topology::HyperNodeStatus { node_count: Some(-1), ..Default::default() });
        assert_eq!(hyper_node(&h).unwrap_err().to_string(), "status.nodeCount: -1 is negative; expected ≥ 0");
        let status = |reason: &str, status: &str| {
            serde_json::from_value::<crate::topology::HyperNodeStatus>(json!({"nodeCount": 3, "conditions": [{
                "type": "Ready", "status": status, "reason": reason, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}))
            .unwrap()
        };
        h.status = Some(status("MembersFound", "True"));
        assert_eq!(hyper_node(&h), Ok(()));
        h.status = Some(status("Members Found", "True"));
        assert!(hyper_node(&h)
            .unwrap_err()
            .to_string()
            .starts_with("status.conditions[0].reason: \"Members Found\" is not a reason"));
        h.status = Some(status("MembersFound", "Yes"));
        assert_eq!(
            hyper_node(&h).unwrap_err().to_string(),
            "status.conditions[0].status: unsupported value \"Yes\"; expected one of True, False, Unknown"
        );
        // The name of the HyperNode itself.
        let mut h = good;
        h.metadata.name = Some("Spine_0".into());
        assert!(hyper_node(&h).unwrap_err().to_string().starts_with("metadata.name: "));
    }

    #[test]
    fn hyper_node_members_volcano_admits_but_ignores_are_reported() {
        use serde_json::json;
        let h = hn(json!({"tier": 2, "members": [
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-0"}}},
            {"type": "HyperNode", "selector": {"regexMatch": {"pattern": "^leaf-"}}},
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}},
        ]}));
        assert_eq!(hyper_node(&h), Ok(()), "Volcano admits them");
        let ignored: Vec<String> = hyper_node_ignored(&h).iter().map(|e| e.field.clone()).collect();
        assert_eq!(ignored, ["spec.members[1].selector.regexMatch", "spec.members[2].selector.labelMatch"]);
    }
}
