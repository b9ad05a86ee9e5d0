//! Reading Kubernetes manifests: YAML files of one or more documents (`---`), JSON files of
//! one or more objects, `List`s of objects, and directories of such files.
//!
//! Every object keeps its [`Origin`] (file, document, line, List item) so that any later
//! error can name where the object was written. Unknown kinds are an error, never skipped.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::Job;
use volcano_api::topology::HyperNode;

use crate::error::InputError;
pub use crate::error::{Origin, SUPPORTED_KINDS};

/// The kinds of object the simulator reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    /// `v1` Node.
    Node,
    /// `v1` Pod.
    Pod,
    /// `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass,
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    PodGroup,
    /// `scheduling.volcano.sh/v1beta1` Queue.
    Queue,
    /// `batch.volcano.sh/v1alpha1` Job (Volcano's): expanded into its PodGroup and pods.
    Job,
    /// `v1` Namespace (its labels answer namespace selectors).
    Namespace,
    /// `v1` PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// `v1` PersistentVolume.
    PersistentVolume,
    /// `storage.k8s.io/v1` StorageClass.
    StorageClass,
    /// `storage.k8s.io/v1` CSINode (a node's CSI drivers and their volume limits).
    CSINode,
    /// `v1` Service (its selector makes system-default topology spread constraints).
    Service,
    /// `v1` ReplicationController (likewise, for the pods it controls).
    ReplicationController,
    /// `apps/v1` ReplicaSet (likewise).
    ReplicaSet,
    /// `apps/v1` StatefulSet (likewise).
    StatefulSet,
    /// `topology.volcano.sh/v1alpha1` HyperNode (the network topology).
    HyperNode,
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [ObjectKind; 16] = [
        ObjectKind::Node,
        ObjectKind::Pod,
        ObjectKind::PriorityClass,
        ObjectKind::PodGroup,
        ObjectKind::Queue,
        ObjectKind::Job,
        ObjectKind::Namespace,
        ObjectKind::PersistentVolumeClaim,
        ObjectKind::PersistentVolume,
        ObjectKind::StorageClass,
        ObjectKind::CSINode,
        ObjectKind::Service,
        ObjectKind::ReplicationController,
        ObjectKind::ReplicaSet,
        ObjectKind::StatefulSet,
        ObjectKind::HyperNode,
    ];

    /// The kind as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Node => "Node",
            ObjectKind::Pod => "Pod",
            ObjectKind::PriorityClass => "PriorityClass",
            ObjectKind::PodGroup => "PodGroup",
            ObjectKind::Queue => "Queue",
            ObjectKind::Job => "Job",
            ObjectKind::Namespace => "Namespace",
            ObjectKind::PersistentVolumeClaim => "PersistentVolumeClaim",
            ObjectKind::PersistentVolume => "PersistentVolume",
            ObjectKind::StorageClass => "StorageClass",
            ObjectKind::CSINode => "CSINode",
            ObjectKind::Service => "Service",
            ObjectKind::ReplicationController => "ReplicationController",
            ObjectKind::ReplicaSet => "ReplicaSet",
            ObjectKind::StatefulSet => "StatefulSet",
            ObjectKind::HyperNode => "HyperNode",
        }
    }

    /// The apiVersion the simulator reads for this kind.
    pub fn api_version(self) -> &'static str {
        match self {
            ObjectKind::Node
            | ObjectKind::Pod
            | ObjectKind::Namespace
            | ObjectKind::PersistentVolumeClaim
            | ObjectKind::PersistentVolume
            | ObjectKind::Service
            | ObjectKind::ReplicationController => "v1",
            ObjectKind::ReplicaSet | ObjectKind::StatefulSet => "apps/v1",
            ObjectKind::StorageClass | ObjectKind::CSINode => "storage.k8s.io/v1",
            ObjectKind::PriorityClass => "scheduling.k8s.io/v1",
            ObjectKind::PodGroup | ObjectKind::Queue => "scheduling.volcano.sh/v1beta1",
            ObjectKind::Job => "batch.volcano.sh/v1alpha1",
            ObjectKind::HyperNode => "topology.volcano.sh/v1alpha1",
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            ObjectKind::Pod
                | ObjectKind::PodGroup
                | ObjectKind::Job
                | ObjectKind::PersistentVolumeClaim
                | ObjectKind::Service
                | ObjectKind::ReplicationController
                | ObjectKind::ReplicaSet
                | ObjectKind::StatefulSet
        )
    }

    /// The kind with this name (as in [`ObjectKind::as_str`]).
    pub fn from_name(kind: &str) -> Option<ObjectKind> {
        ObjectKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    fn from_type(api_version: &str, kind: &str) -> Option<ObjectKind> {
        ObjectKind::from_name(kind).filter(|k| k.api_version() == api_version)
    }
}

/// One Kubernetes object of a kind the simulator reads.
#[derive(Clone, Debug)]
pub enum Object {
    /// A node.
    Node(Arc<Node>),
    /// A pod.
    Pod(Arc<Pod>),
    /// A priority class.
    PriorityClass(Arc<PriorityClass>),
    /// A PodGroup.
    PodGroup(Arc<PodGroup>),
    /// A queue.
    Queue(Arc<Queue>),
    /// A Volcano Job.
    Job(Arc<Job>),
    /// A namespace.
    Namespace(Arc<Namespace>),
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim(Arc<PersistentVolumeClaim>),
    /// A PersistentVolume.
    PersistentVolume(Arc<PersistentVolume>),
    /// A StorageClass.
    StorageClass(Arc<StorageClass>),
    /// A CSINode.
    CSINode(Arc<CSINode>),
    /// A Service.
    Service(Arc<Service>),
    /// A ReplicationController.
    ReplicationController(Arc<ReplicationController>),
    /// A ReplicaSet.
    ReplicaSet(Arc<ReplicaSet>),
    /// A StatefulSet.
    StatefulSet(Arc<StatefulSet>),
    /// A HyperNode.
    HyperNode(Arc<HyperNode>),
}

impl Object {
    /// The object's kind.
    pub fn kind(&self) -> ObjectKind {
        match self {
            Object::Node(_) => ObjectKind::Node,
            Object::Pod(_) => ObjectKind::Pod,
            Object::PriorityClass(_) => ObjectKind::PriorityClass,
            Object::PodGroup(_) => ObjectKind::PodGroup,
            Object::Queue(_) => ObjectKind::Queue,
            Object::Job(_) => ObjectKind::Job,
            Object::Namespace(_) => ObjectKind::Namespace,
            Object::PersistentVolumeClaim(_) => ObjectKind::PersistentVolumeClaim,
            Object::PersistentVolume(_) => ObjectKind::PersistentVolume,
            Object::StorageClass(_) => ObjectKind::StorageClass,
            Object::CSINode(_) => ObjectKind::CSINode,
            Object::Service(_) => ObjectKind::Service,
            Object::ReplicationController(_) => ObjectKind::ReplicationController,
            Object::ReplicaSet(_) => ObjectKind::ReplicaSet,
            Object::StatefulSet(_) => ObjectKind::StatefulSet,
            Object::HyperNode(_) => ObjectKind::HyperNode,
        }
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            Object::Node(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
            Object::PriorityClass(o) => &o.metadata,
            Object::PodGroup(o) => &o.metadata,
            Object::Queue(o) => &o.metadata,
            Object::Job(o) => &o.metadata,
            Object::Namespace(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::PersistentVolume(o) => &o.metadata,
            Object::StorageClass(o) => &o.metadata,
            Object::CSINode(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::ReplicationController(o) => &o.metadata,
            Object::ReplicaSet(o) => &o.metadata,
            Object::StatefulSet(o) => &o.metadata,
            Object::HyperNode(o) => &o.metadata,
        }
    }

    /// The object's metadata, to change it.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Object::Node(o) => &mut Arc::make_mut(o).metadata,
            Object::Pod(o) => &mut Arc::make_mut(o).metadata,
            Object::PriorityClass(o) => &mut Arc::make_mut(o).metadata,
            Object::PodGroup(o) => &mut Arc::make_mut(o).metadata,
            Object::Queue(o) => &mut Arc::make_mut(o).metadata,
            Object::Job(o) => &mut Arc::make_mut(o).metadata,
            Object::Namespace(o) => &mut Arc::make_mut(o).metadata,
            Object::PersistentVolumeClaim(o) => &mut Arc::make_mut(o).metadata,
            Object::PersistentVolume(o) => &mut Arc::make_mut(o).metadata,
            Object::StorageClass(o) => &mut Arc::make_mut(o).metadata,
            Object::CSINode(o) => &mut Arc::make_mut(o).metadata,
            Object::Service(o) => &mut Arc::make_mut(o).metadata,
            Object::ReplicationController(o) => &mut Arc::make_mut(o).metadata,
            Object::ReplicaSet(o) => &mut Arc::make_mut(o).metadata,
            Object::StatefulSet(o) => &mut Arc::make_mut(o).metadata,
            Object::HyperNode(o) => &mut Arc::make_mut(o).metadata,
        }
    }

    /// `namespace/name` for namespaced objects, `name` otherwise.
    pub fn key(&self) -> String {
        object_key(self.kind(), self.metadata())
    }
}

/// `namespace/name` for namespaced kinds (namespace `default` when missing), `name` otherwise.
pub fn object_key(kind: ObjectKind, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    if kind.namespaced() {
        let ns = meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default");
        format!("{ns}/{name}")
    } else {
        name.to_string()
    }
}

/// An object with the place it was written.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where it was written.
    pub origin: Origin,
    /// The object as written.
    pub object: Object,
}

/// What to do with fields an object's type does not have (`minMemebr`), as `kubectl
/// --validate` spells it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// An unknown field is an error (kubectl's default).
    #[default]
    Strict,
    /// An unknown field is reported in [`Manifest::warnings`] and dropped.
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

/// The objects of one or more manifest files, in input order.
#[derive(Clone, Debug, Default)]
pub struct Manifest {
    /// The objects, in the order of the files, documents and List items.
    pub entries: Vec<Entry>,
    /// How unknown fields are treated.
    pub validation: FieldValidation,
    /// Objects of Kubernetes kinds that do not affect scheduling (ConfigMaps, Secrets,
    /// Deployments, …), skipped: how many of each `apiVersion/kind`.
    pub skipped: BTreeMap<String, usize>,
    /// Unknown fields dropped under [`FieldValidation::Warn`], one line each.
    pub warnings: Vec<String>,
}

/// Built-in Kubernetes kinds that do not change a scheduling decision of volcano-rs today,
/// by API group: a cluster dump (`kubectl get all -A -o yaml`) holds them, and the simulator
/// skips them with a count. Workload controllers (Deployments, Jobs, …) are here because the
/// dump holds the pods they created; ReplicationControllers, ReplicaSets and StatefulSets
/// (and Services) are read instead, for the selectors of the system-default topology spread
/// constraints. Any other kind is an error.
pub const SKIPPED_KINDS: &[(&str, &[&str])] = &[
    (
        "v1",
        &[
            "ConfigMap",
            "Secret",
            "Endpoints",
            "ServiceAccount",
            "Event",
            "LimitRange",
            "ResourceQuota",
            "PodTemplate",
            "ComponentStatus",
        ],
    ),
    ("apps", &["Deployment", "DaemonSet", "ControllerRevision"]),
    ("batch", &["Job", "CronJob"]),
    ("autoscaling", &["HorizontalPodAutoscaler"]),
    ("policy", &["PodDisruptionBudget"]),
    ("networking.k8s.io", &["Ingress", "IngressClass", "NetworkPolicy"]),
    ("discovery.k8s.io", &["EndpointSlice"]),
    ("coordination.k8s.io", &["Lease"]),
    ("events.k8s.io", &["Event"]),
    ("rbac.authorization.k8s.io", &["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"]),
    ("storage.k8s.io", &["CSIDriver", "VolumeAttachment", "CSIStorageCapacity"]),
    ("node.k8s.io", &["RuntimeClass"]),
    ("apiextensions.k8s.io", &["CustomResourceDefinition"]),
    (
        "admissionregistration.k8s.io",
        &[
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
        ],
    ),
    ("apiregistration.k8s.io", &["APIService"]),
    ("certificates.k8s.io", &["CertificateSigningRequest"]),
    ("flowcontrol.apiserver.k8s.io", &["FlowSchema", "PriorityLevelConfiguration"]),
    ("bus.volcano.sh", &["Command"]),
];

/// Whether objects of this type are skipped (see [`SKIPPED_KINDS`]).
pub fn is_skipped_kind(api_version: &str, kind: &str) -> bool {
    let group = api_version.rsplit_once('/').map_or("v1", |(g, _)| g);
    let group = if api_version == "v1" { "v1" } else { group };
    SKIPPED_KINDS.iter().any(|(g, kinds)| *g == group && kinds.contains(&kind))
}

/// One parsed top-level value of a file.
struct Document {
    index: usize,
    line: Option<usize>,
    value: Value,
}

impl Manifest {
    /// An empty manifest.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty manifest that treats unknown fields this way.
    pub fn with_validation(validation: FieldValidation) -> Self {
        Manifest { validation, ..Self::default() }
    }

    /// One line for people about the skipped objects, `None` when nothing was skipped:
    /// `skipped 7 objects that do not affect scheduling: 4 ConfigMap, 3 apps/v1 Deployment`.
    pub fn skipped_summary(&self) -> Option<String> {
        let total: usize = self.skipped.values().sum();
        (total > 0).then(|| {
            let each: Vec<String> = self.skipped.iter().map(|(k, n)| format!("{n} {k}")).collect();
            format!("skipped {total} object(s) that do not affect scheduling: {}", each.join(", "))
        })
    }

    /// Reads every path in order (see [`Manifest::load_path`]), unknown fields being errors.
    pub fn from_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Self, InputError> {
        Self::from_paths_with(paths, FieldValidation::Strict)
    }

    /// Reads every path in order, treating unknown fields as `validation` says.
    pub fn from_paths_with<P: AsRef<Path>>(paths: &[P], validation: FieldValidation) -> Result<Self, InputError> {
        let mut m = Manifest::with_validation(validation);
        for p in paths {
            m.load_path(p.as_ref())?;
        }
        Ok(m)
    }

    /// Reads a file, a directory (its `.yaml`, `.yml` and `.json` files, by name, not
    /// recursively) or, for `-`, standard input.
    pub fn load_path(&mut self, path: &Path) -> Result<(), InputError> {
        let name = path.display().to_string();
        let read_err = |source| InputError::Read { file: name.clone(), source };
        if name == "-" {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(read_err)?;
            return self.load_str("<stdin>", &text);
        }
        if path.is_dir() {
            let mut files = Vec::new();
            for entry in std::fs::read_dir(path).map_err(read_err)? {
                let p = entry.map_err(read_err)?.path();
                let manifest_ext =
                    p.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
                if p.is_file() && manifest_ext {
                    files.push(p);
                }
            }
            files.sort();
            for f in files {
                self.load_path(&f)?;
            }
            return Ok(());
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        self.load_str(&name, &text)
    }

    /// Parses the text of one file named `file` (JSON when the name ends in `.json` or the
    /// text starts with `{`, YAML otherwise) and appends its objects.
    ///
    /// A large YAML file is read on all cores: its documents are parsed in chunks split at
    /// document markers, and decoded in parallel; the objects, warnings and the first error
    /// (in document order) are exactly those of reading it in one pass.
    pub fn load_str(&mut self, file: &str, text: &str) -> Result<(), InputError> {
        if !is_json(file, text) {
            // The fast path gives the reference path's answer, or nothing when it is not sure to.
            if let Some(decoded) = direct_yaml(file, text, self.validation) {
                return self.append(decoded);
            }
        }
        self.load_str_reference(file, text)
    }

    /// [`Manifest::load_str`] on the reference path only: every document read into a
    /// `serde_json::Value` by the strict reader, then decoded. `load_str` gives the same
    /// objects, warnings and errors, faster; this is for the tests that check so.
    #[doc(hidden)]
    pub fn load_str_reference(&mut self, file: &str, text: &str) -> Result<(), InputError> {
        use rayon::prelude::*;
        let docs = if is_json(file, text) { json_documents(file, text)? } else { yaml_documents(file, text)? };
        let validation = self.validation;
        let decoded: Vec<Result<Vec<Loaded>, InputError>> = docs
            .into_par_iter()
            .with_min_len(64)
            .map(|doc| {
                let origin = Origin { file: file.to_string(), document: doc.index, line: doc.line, item: None };
                let mut out = Vec::new();
                document(validation, origin, doc.value, &mut out)?;
                Ok(out)
            })
            .collect();
        self.append(decoded)
    }

    /// Appends what the documents of a file gave, in order; the first error in document
    /// order is returned (and nothing of the file appended).
    fn append(&mut self, decoded: Vec<Result<Vec<Loaded>, InputError>>) -> Result<(), InputError> {
        let decoded: Vec<Vec<Loaded>> = decoded.into_iter().collect::<Result<_, _>>()?;
        for loaded in decoded {
            for item in loaded {
                match item {
                    Loaded::Entry(e) => self.entries.push(e),
                    Loaded::Skipped(key) => *self.skipped.entry(key).or_default() += 1,
                    Loaded::Warning(w) => self.warnings.push(w),
                }
            }
        }
        Ok(())
    }
}

/// One document's value (the reference path), as objects, skipped kinds and warnings.
fn document(
    validation: FieldValidation,
    origin: Origin,
    value: Value,
    out: &mut Vec<Loaded>,
) -> Result<(), InputError> {
    match value {
        // An empty document (`---` at the end of a file, say).
        Value::Null => Ok(()),
        Value::Object(map) => top_level(validation, origin, map, out),
        other => Err(InputError::NotAnObject { origin: Box::new(origin), found: value_type(&other) }),
    }
}

/// What reading one document gives, in order.
enum Loaded {
    Entry(Entry),
    Skipped(String),
    Warning(String),
}

fn top_level(
    validation: FieldValidation,
    origin: Origin,
    mut map: Map<String, Value>,
    out: &mut Vec<Loaded>,
) -> Result<(), InputError> {
    let (api_version, kind) = type_of(&origin, &map)?;
    let item_kind = kind.strip_suffix("List");
    let typed_list = item_kind.and_then(|k| ObjectKind::from_type(&api_version, k));
    if !(api_version == "v1" && kind == "List") && typed_list.is_none() {
        return object(validation, origin, map, out);
    }
    let items = match map.remove("items") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(InputError::Field {
                origin: Some(Box::new(origin)),
                kind: "List",
                object: name_of(&map).unwrap_or_else(|| "(unnamed)".into()),
                field: "items".into(),
                message: format!("expected a list of objects, found {}", value_type(&other)),
            })
        }
    };
    for (i, item) in items.into_iter().enumerate() {
        let origin = Origin { item: Some(i + 1), ..origin.clone() };
        match item {
            Value::Object(mut m) => {
                // Items of a typed list (`PodList`) may leave out their apiVersion and kind.
                if let Some(k) = typed_list {
                    m.entry("apiVersion").or_insert_with(|| k.api_version().into());
                    m.entry("kind").or_insert_with(|| k.as_str().into());
                }
                object(validation, origin, m, out)?;
            }
            other => return Err(InputError::NotAnObject { origin: Box::new(origin), found: value_type(&other) }),
        }
    }
    Ok(())
}

fn object(
    validation: FieldValidation,
    origin: Origin,
    mut map: Map<String, Value>,
    out: &mut Vec<Loaded>,
) -> Result<(), InputError> {
    let (api_version, kind) = type_of(&origin, &map)?;
    let name = name_of(&map);
    let Some(k) = ObjectKind::from_type(&api_version, &kind) else {
        if is_skipped_kind(&api_version, &kind) {
            let key = if api_version == "v1" { kind } else { format!("{api_version} {kind}") };
            out.push(Loaded::Skipped(key));
            return Ok(());
        }
        return Err(InputError::UnknownKind { origin: Box::new(origin), object: name, api_version, kind });
    };
    let display = display_name(k, &map);
    if k == ObjectKind::HyperNode {
        // The CRD requires the tier of a spec, which the type reads as 0 when missing.
        if let Some(Value::Object(spec)) = map.get("spec") {
            if !spec.contains_key("tier") {
                return Err(InputError::Field {
                    origin: Some(Box::new(origin)),
                    kind: k.as_str(),
                    object: display,
                    field: "spec.tier".into(),
                    message: "required: the HyperNode's tier (1 for the switches nodes hang off, higher further up)"
                        .into(),
                });
            }
        }
    }
    if matches!(k, ObjectKind::PodGroup | ObjectKind::Queue | ObjectKind::HyperNode) {
        // These CRDs accept an object without a spec (a HyperNode is then refused by its
        // check, for having no member).
        map.entry("spec").or_insert_with(|| Value::Object(Map::new()));
    }
    let value = Value::Object(map);
    let mut unknown = Vec::new();
    // Each kind decoded into its own type, straight into the `Arc` the cluster keeps.
    macro_rules! decoded {
        ($($kind:ident),*) => {
            match k {
                $(ObjectKind::$kind => Object::$kind(Arc::new(decode(&origin, k, &display, value, &mut unknown)?)),)*
            }
        };
    }
    let object = decoded!(
        Node,
        Pod,
        PriorityClass,
        PodGroup,
        Queue,
        Job,
        Namespace,
        PersistentVolumeClaim,
        PersistentVolume,
        StorageClass,
        CSINode,
        Service,
        ReplicationController,
        ReplicaSet,
        StatefulSet,
        HyperNode
    );
    finish(validation, origin, object, display, &unknown, out)
}

/// The end of reading one object, decoded with these unknown fields (in the order of the
/// reference path): the unknown fields as `validation` says, the API server's first
/// checks, and the entry.
fn finish(
    validation: FieldValidation,
    origin: Origin,
    object: Object,
    display: String,
    unknown: &[String],
    out: &mut Vec<Loaded>,
) -> Result<(), InputError> {
    let k = object.kind();
    if !unknown.is_empty() {
        let fields: Vec<String> = unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
        match validation {
            FieldValidation::Strict => {
                return Err(InputError::Field {
                    origin: Some(Box::new(origin)),
                    kind: k.as_str(),
                    object: display,
                    field: unknown[0].clone(),
                    message: format!(
                        "strict decoding error: {} ({} {} has no such field; check the spelling, or pass \
                             --validate=warn to drop unknown fields)",
                        fields.join(", "),
                        k.api_version(),
                        k.as_str()
                    ),
                })
            }
            FieldValidation::Warn => {
                out.push(Loaded::Warning(format!("{origin}: {} {display}: {}", k.as_str(), fields.join(", "))))
            }
            FieldValidation::Ignore => {}
        }
    }
    validate(&origin, &object, &display)?;
    out.push(Loaded::Entry(Entry { origin, object }));
    Ok(())
}

fn is_json(file: &str, text: &str) -> bool {
    file.ends_with(".json") || text.trim_start().starts_with('{')
}

fn value_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

fn name_of(map: &Map<String, Value>) -> Option<String> {
    map.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).map(str::to_string)
}

/// The object's name for messages: `namespace/name` for namespaced kinds.
fn display_name(kind: ObjectKind, map: &Map<String, Value>) -> String {
    let Some(name) = name_of(map).filter(|n| !n.is_empty()) else { return "(unnamed)".into() };
    if kind.namespaced() {
        let ns = map
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        format!("{ns}/{name}")
    } else {
        name
    }
}

fn type_of(origin: &Origin, map: &Map<String, Value>) -> Result<(String, String), InputError> {
    let field = |field: &'static str| match map.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        other => Err(InputError::MissingType {
            origin: Box::new(origin.clone()),
            object: name_of(map),
            field,
            found: match other {
                None | Some(Value::Null) => "found nothing",
                Some(Value::String(_)) => "found an empty string",
                Some(Value::Bool(_)) => "found a boolean",
                Some(Value::Number(_)) => "found a number",
                Some(Value::Array(_)) => "found a list",
                Some(Value::Object(_)) => "found a mapping",
            },
        }),
    };
    Ok((field("apiVersion")?, field("kind")?))
}

/// Decodes an object, collecting the paths of the fields its type does not have (the
/// Kubernetes types drop them silently).
fn decode<T: DeserializeOwned>(
    origin: &Origin,
    kind: ObjectKind,
    object: &str,
    value: Value,
    unknown: &mut Vec<String>,
) -> Result<T, InputError> {
    fn note(unknown: &mut Vec<String>, path: &serde_ignored::Path<'_>) {
        let path = ignored_path(path);
        // The type was read from these already; some derives leave them to the caller.
        if path != "apiVersion" && path != "kind" {
            unknown.push(path);
        }
    }
    // The common case, a valid object, is decoded without tracking the path; only a failure
    // is decoded again with it, for the field the error names.
    let mut seen = |p: serde_ignored::Path<'_>| note(unknown, &p);
    if let Ok(object) = T::deserialize(serde_ignored::Deserializer::new(&value, &mut seen)) {
        return Ok(object);
    }
    unknown.clear();
    let mut seen = |p: serde_ignored::Path<'_>| note(unknown, &p);
    let de = serde_ignored::Deserializer::new(value, &mut seen);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        InputError::Field {
            origin: Some(Box::new(origin.clone())),
            kind: kind.as_str(),
            object: object.to_string(),
            field: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }
    })
}

/// A field path as kubectl prints it: `spec.containers[0].resoures`.
fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        Path::Map { parent, key } => {
            let p = ignored_path(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            ignored_path(parent)
        }
    }
}

/// What the API server requires of every object before anything else looks at it.
fn validate(origin: &Origin, object: &Object, display: &str) -> Result<(), InputError> {
    let err = |field: &str, message: &str| InputError::Field {
        origin: Some(Box::new(origin.clone())),
        kind: object.kind().as_str(),
        object: display.to_string(),
        field: field.to_string(),
        message: message.to_string(),
    };
    if object.metadata().name.as_deref().is_none_or(str::is_empty) {
        return Err(err("metadata.name", "required: every object needs a name"));
    }
    if let Object::Pod(pod) = object {
        let Some(spec) = &pod.spec else {
            return Err(err("spec", "required: a pod needs a spec with at least one container"));
        };
        if spec.containers.is_empty() {
            return Err(err("spec.containers", "required: a pod needs at least one container"));
        }
    }
    Ok(())
}

/// A JSON value read strictly: a key that appears twice in one mapping is an error naming
/// the mapping's path, as the API server's strict decoding reports it (a plain `Value` keeps
/// the last one silently).
struct Strict<'a> {
    /// Keys and indices from the document's root to the value being read.
    path: &'a std::cell::RefCell<Vec<Step>>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML or JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            self.path.borrow_mut().push(Step::Index(items.len()));
            let next = seq.next_element_seed(Strict { path: self.path });
            self.path.borrow_mut().pop();
            match next? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let path = self.path.borrow();
                let at = if path.is_empty() { String::new() } else { format!(" in {}", path_text(&path)) };
                return Err(serde::de::Error::custom(format!(
                    "duplicate key {key:?}{at}: a key may appear once in a mapping (the API server rejects \
                     duplicate fields)"
                )));
            }
            self.path.borrow_mut().push(Step::Key(key));
            let value = map.next_value_seed(Strict { path: self.path });
            let Some(Step::Key(key)) = self.path.borrow_mut().pop() else { unreachable!("pushed above") };
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// One step from a document's root: a mapping key or a list index.
enum Step {
    Key(String),
    Index(usize),
}

fn path_text(path: &[Step]) -> String {
    let mut s = String::new();
    for p in path {
        match p {
            Step::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn strict_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    use serde::de::DeserializeSeed;
    let path = std::cell::RefCell::new(Vec::new());
    Strict { path: &path }.deserialize(d)
}

/// One JSON document read with [`strict_value`].
struct StrictDoc(Value);

impl<'de> Deserialize<'de> for StrictDoc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        strict_value(d).map(StrictDoc)
    }
}

/// Reads a YAML file on the fast path: the file is cut into its documents, and on all
/// cores each is read into the strict `Value` of the reference path by the block reader
/// ([`crate::block`]), or by serde_yaml_ng when the block reader is not sure of it, and
/// decoded at once as the reference path decodes it. The same `Value`s decoded the same
/// way give the same objects, warnings and errors; `None` when some document does not parse
/// (a YAML error, a duplicate key), for the reference path to give that error (YAML errors
/// come before decoding errors there), or when the stream has directives or `...` markers.
fn direct_yaml(file: &str, text: &str, validation: FieldValidation) -> Option<Vec<Result<Vec<Loaded>, InputError>>> {
    use rayon::prelude::*;
    let docs = split_documents(text)?;
    docs.par_iter()
        .enumerate()
        .with_min_len(64)
        .map(|(i, doc)| {
            let value = doc.read()?;
            let origin = Origin { file: file.to_string(), document: i + 1, line: doc.line(), item: None };
            let mut out = Vec::new();
            Some(document(validation, origin, value, &mut out).map(|()| out))
        })
        .collect()
}

/// One document of a YAML stream, for the fast path.
struct DocText<'a> {
    /// The document with its `---` line.
    whole: &'a str,
    /// The document after its `---` line.
    body: &'a str,
    /// Whether the `---` line has nothing after the marker but a comment (or there is none).
    plain_marker: bool,
    /// The 1-based line of the `---` marker; `None` for content before the first marker.
    marker_line: Option<usize>,
}

impl DocText<'_> {
    /// The document as the strict reader reads it, through the block reader
    /// ([`crate::block`]) or, when that is not sure to read it as the full parser does,
    /// through the full parser; `None` on any error.
    fn read(&self) -> Option<Value> {
        if self.plain_marker {
            let path = std::cell::RefCell::new(Vec::new());
            if let Ok(value) = crate::block::Cursor::new(self.body).and_then(|c| c.read(Strict { path: &path })) {
                return Some(value);
            }
        }
        let mut values = yaml_values(self.whole).ok()?;
        (values.len() == 1).then(|| values.remove(0))
    }

    /// The 1-based line where the document starts, as [`yaml_document_lines`] counts it: the
    /// marker's line when content follows the marker on it or the document has no content,
    /// else the first line of content. `None` for content before the first marker that has
    /// none (then it is the stream's only document, and an empty one).
    fn line(&self) -> Option<usize> {
        if !self.plain_marker {
            return self.marker_line;
        }
        let first = self.marker_line.map_or(1, |m| m + 1);
        self.body
            .split_inclusive('\n')
            .position(|l| {
                let t = l.trim_start();
                !(t.is_empty() || t.starts_with('#'))
            })
            .map(|i| first + i)
            .or(self.marker_line)
    }
}

/// What one piece of a stream holds, for [`split_documents`].
#[derive(Default)]
struct Scanned {
    /// (start of a `---` line, start of the body after it, plain marker, 0-based line of the
    /// marker within the piece).
    markers: Vec<(usize, usize, bool, usize)>,
    /// Whether content comes before the piece's first marker.
    content_before: bool,
    /// Number of lines (line ends) in the piece.
    lines: usize,
    /// A directive, a byte-order mark or a document end marker: the full parser reads the stream.
    refused: bool,
}

/// The documents of a YAML stream, as the parser counts them: one per `---` marker line,
/// and one before the first marker when content comes before it (or when there is no
/// marker at all). `None` for a stream with a byte-order mark, a directive (`%`) or a
/// document end marker (`...`), which the full parser reads whole. A large stream is
/// scanned on all cores, in pieces cut at line ends.
fn split_documents(text: &str) -> Option<Vec<DocText<'_>>> {
    use rayon::prelude::*;
    fn marker<'a>(line: &'a str, m: &str) -> Option<&'a str> {
        let line = line.trim_end_matches('\n');
        line.strip_prefix(m).filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
    }
    fn scan(text: &str, base: usize) -> Scanned {
        let mut s = Scanned::default();
        let mut offset = base;
        for line in text.split_inclusive('\n') {
            if line.starts_with('%') || marker(line, "...").is_some() {
                s.refused = true;
                return s;
            }
            if let Some(rest) = marker(line, "---") {
                let rest = rest.trim();
                s.markers.push((offset, offset + line.len(), rest.is_empty() || rest.starts_with('#'), s.lines));
            } else if s.markers.is_empty() {
                let t = line.trim();
                s.content_before |= !(t.is_empty() || t.starts_with('#'));
            }
            s.lines += usize::from(line.ends_with('\n'));
            offset += line.len();
        }
        s
    }
    if text.starts_with('\u{feff}') {
        return None;
    }
    // Pieces of the text cut just after a line end, scanned in parallel.
    let pieces = if text.len() < PARALLEL_YAML_BYTES { 1 } else { 4 * rayon::current_num_threads() };
    let mut cuts = vec![0];
    for k in 1..pieces {
        let from = (text.len() * k / pieces).max(*cuts.last().unwrap_or(&0));
        let cut = text.as_bytes()[from..].iter().position(|&b| b == b'\n').map_or(text.len(), |p| from + p + 1);
        if cut < text.len() && cut > *cuts.last().unwrap_or(&0) {
            cuts.push(cut);
        }
    }
    cuts.push(text.len());
    let scanned: Vec<Scanned> = cuts.par_windows(2).map(|w| scan(&text[w[0]..w[1]], w[0])).collect();
    if scanned.iter().any(|s| s.refused) {
        return None;
    }
    // (start of the `---` line, start of the body, plain marker, 1-based line)
    let mut starts: Vec<(usize, usize, bool, usize)> = Vec::new();
    let mut content_before = false;
    let mut line_base = 0;
    for s in scanned {
        if starts.is_empty() {
            content_before |= s.content_before;
        }
        starts.extend(s.markers.into_iter().map(|(at, body, plain, line)| (at, body, plain, line_base + line + 1)));
        line_base += s.lines;
    }
    let mut docs = Vec::with_capacity(starts.len() + 1);
    let first = starts.first().map_or(text.len(), |s| s.0);
    if content_before || starts.is_empty() {
        docs.push(DocText { whole: &text[..first], body: &text[..first], plain_marker: true, marker_line: None });
    }
    for (i, &(start, body, plain_marker, line)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(text.len(), |s| s.0);
        docs.push(DocText { whole: &text[start..end], body: &text[body..end], plain_marker, marker_line: Some(line) });
    }
    Some(docs)
}

/// Below this many bytes a YAML file is parsed in one piece.
const PARALLEL_YAML_BYTES: usize = 1 << 20;

fn yaml_documents(file: &str, text: &str) -> Result<Vec<Document>, InputError> {
    use rayon::prelude::*;
    let lines = yaml_document_lines(text);
    let chunks = if text.len() < PARALLEL_YAML_BYTES {
        vec![text]
    } else {
        split_at_document_markers(text, 4 * rayon::current_num_threads())
    };
    // Each chunk is a YAML stream of its own: parsed alone it gives the same documents as
    // in the whole text. On any error the whole text is parsed again in one piece, for the
    // error exactly as one pass reports it (its document index and line).
    let parsed: Option<Vec<Vec<Value>>> =
        if chunks.len() > 1 { chunks.par_iter().map(|c| yaml_values(c).ok()).collect() } else { None };
    let values = match parsed {
        Some(parts) => parts.into_iter().flatten().collect(),
        None => yaml_values(text).map_err(|(i, source)| InputError::Yaml {
            file: file.to_string(),
            document: i + 1,
            // The parser's own errors carry their line; a duplicate key gets its document's.
            line: lines.get(i).copied(),
            source,
        })?,
    };
    let known = lines.len() == values.len();
    Ok(values
        .into_iter()
        .enumerate()
        .map(|(i, value)| Document { index: i + 1, line: if known { Some(lines[i]) } else { None }, value })
        .collect())
}

/// The documents of a YAML stream, or the index of the first one that fails, with its error.
fn yaml_values(text: &str) -> Result<Vec<Value>, (usize, serde_yaml_ng::Error)> {
    let mut values = Vec::new();
    for (i, de) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        // On a syntax error the iterator would repeat the error forever: stop at the first.
        values.push(strict_value(de).map_err(|e| (i, e))?);
    }
    Ok(values)
}

/// Splits a YAML stream into about `parts` pieces of similar size, each starting at a `---`
/// document marker at the start of a line, so that each piece is a stream of whole
/// documents. A marker line cannot occur inside a document's content (YAML forbids it even
/// in block scalars), so the pieces hold the same documents as the whole. A text with a
/// directive (`%YAML`, `%TAG`, which apply to the document after them) is not split.
fn split_at_document_markers(text: &str, parts: usize) -> Vec<&str> {
    let is_marker = |line: &str| {
        line.strip_prefix("---").is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
    };
    if parts < 2 || text.lines().any(|l| l.starts_with('%')) {
        return vec![text];
    }
    let target = text.len() / parts + 1;
    let mut pieces = Vec::with_capacity(parts);
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if offset - start >= target && is_marker(line.trim_end_matches('\n')) {
            pieces.push(&text[start..offset]);
            start = offset;
        }
        offset += line.len();
    }
    pieces.push(&text[start..]);
    pieces
}

/// The 1-based line where each YAML document starts: its first line of content (the
/// `---` line itself when content follows the marker on that line, or when the document is
/// empty). Only used when it finds as many documents as the parser did.
fn yaml_document_lines(text: &str) -> Vec<usize> {
    fn marker<'a>(line: &'a str, m: &str) -> Option<&'a str> {
        line.strip_prefix(m).filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r'])).map(str::trim)
    }
    let mut starts = Vec::new();
    // A `---` whose document has no content line yet.
    let mut pending: Option<usize> = None;
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = marker(line, "---") {
            starts.extend(pending.take());
            if rest.is_empty() || rest.starts_with('#') {
                pending = Some(n);
            } else {
                starts.push(n);
            }
            open = true;
        } else if marker(line, "...").is_some() {
            starts.extend(pending.take());
            open = false;
        } else {
            let t = line.trim_start();
            let content = !(t.is_empty() || t.starts_with('#') || (!open && line.starts_with('%')));
            if content && pending.take().is_some() {
                starts.push(n);
            } else if content && !open {
                starts.push(n);
                open = true;
            }
        }
    }
    starts.extend(pending);
    starts
}

fn json_documents(file: &str, text: &str) -> Result<Vec<Document>, InputError> {
    let mut docs = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<StrictDoc>();
    loop {
        let start = stream.byte_offset();
        let Some(next) = stream.next() else { break };
        let StrictDoc(value) = next.map_err(|source| InputError::Json { file: file.to_string(), source })?;
        let rest = &text[start..];
        let skipped = rest.len() - rest.trim_start().len();
        let line = text[..start + skipped].matches('\n').count() + 1;
        docs.push(Document { index: docs.len() + 1, line: Some(line), value });
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_streams_parse_to_the_same_documents() {
        let texts = [
            "a: 1\n---\nb: 2\n---\nc: 3\n",
            "---\na: 1\n---\n---\nb: 2\n---\n",
            "# head\n---\na: 1\n...\n---\nb: [1, 2]\n--- # c\nc: |\n  ---- not a marker\n  x\n---\n",
            "--- {a: 1}\n--- \nb: 2\n---\t\nc: 3\r\n---\r\nd: 4\n",
            "a: 1\n---\n# only a comment\n---\nb: 2",
            "%YAML 1.2\n---\na: 1\n---\nb: 2\n",
        ];
        for text in texts {
            let whole = yaml_values(text).expect("valid YAML");
            for parts in 2..8 {
                let pieces = split_at_document_markers(text, parts);
                assert_eq!(pieces.concat(), text);
                let split: Vec<Value> = pieces.iter().flat_map(|p| yaml_values(p).expect("valid piece")).collect();
                assert_eq!(split, whole, "{text:?} in {parts} parts: {pieces:?}");
            }
        }
    }

    fn doc_lines(docs: &[DocText<'_>]) -> Vec<Option<usize>> {
        docs.iter().map(DocText::line).collect()
    }

    /// The lines of the reference path: those of `yaml_document_lines` when it finds as many
    /// documents as the parser.
    fn reference_lines(text: &str, documents: usize) -> Vec<Option<usize>> {
        let lines = yaml_document_lines(text);
        if lines.len() == documents {
            lines.into_iter().map(Some).collect()
        } else {
            vec![None; documents]
        }
    }

    /// The fast path cuts a stream into as many documents as the parser finds in it, and
    /// finds the lines the reference path finds.
    #[test]
    fn documents_are_cut_as_the_parser_counts_them() {
        let texts = [
            "a: 1\n---\nb: 2\n---\nc: 3\n",
            "---\na: 1\n---\n---\nb: 2\n---\n",
            "# head\n---\na: 1\n---\nb: [1, 2]\n--- # c\nc: |\n  ---- not a marker\n  x\n---\n",
            "--- {a: 1}\n--- \nb: 2\n---\t\nc: 3\r\n---\r\nd: 4\n",
            "a: 1\n---\n# only a comment\n---\nb: 2",
            "",
            "# only a comment\n",
            "---",
            "# c\n\n---\na: 1\n",
        ];
        for text in texts {
            let whole = yaml_values(text).expect("valid YAML");
            let docs = split_documents(text).expect("no directive or end marker");
            assert_eq!(docs.len(), whole.len(), "{text:?}");
            assert_eq!(doc_lines(&docs), reference_lines(text, docs.len()), "{text:?}");
        }
        // A stream large enough to be scanned in pieces: the pieces' cuts fall anywhere,
        // between and inside documents, and give the documents and lines of one piece.
        let kinds = [
            "---\na: 1\nb:\n  - x\n",
            "--- {c: 2}\n",
            "--- # comment\n\n# more\n  d: 3\n",
            "---\n---\ne: |\n  ---- not a marker\n  --- still not, indented\n",
            "---\r\nf: 4\r\n",
        ];
        let mut text = String::from("# head\ng: 0\n");
        let mut i = 0;
        while text.len() <= 2 * PARALLEL_YAML_BYTES {
            text.push_str(kinds[i % kinds.len()]);
            i += 1;
        }
        let docs = split_documents(&text).expect("no directive or end marker");
        assert_eq!(docs.len(), 1 + i + i / kinds.len() + usize::from(i % kinds.len() > 3));
        assert_eq!(doc_lines(&docs), reference_lines(&text, docs.len()));
        let wholes: String = docs.iter().map(|d| d.whole).collect();
        assert_eq!(wholes, text);
        assert!(split_documents("a: 1\n...\n---\nb: 2\n").is_none());
        assert!(split_documents("%YAML 1.2\n---\na: 1\n").is_none());
    }

    /// A file large enough to be read in parallel gives the objects, origins, warnings and
    /// errors of one pass.
    #[test]
    fn a_large_file_reads_as_in_one_pass() {
        let node = |i: usize| {
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: node-{i:05}\n  labels:\n    zone: z{}\n",
                i % 4
            )
        };
        let n = PARALLEL_YAML_BYTES * 5 / 4 / node(0).len();
        let text: String = (0..n).map(node).collect();
        assert!(text.len() > PARALLEL_YAML_BYTES);
        let mut m = Manifest::with_validation(FieldValidation::Warn);
        m.load_str("big.yaml", &text).expect("valid");
        assert_eq!(m.entries.len(), n);
        for (i, e) in m.entries.iter().enumerate() {
            assert_eq!(e.object.metadata().name.as_deref(), Some(format!("node-{i:05}").as_str()));
            assert_eq!((e.origin.document, e.origin.line), (i + 1, Some(7 * i + 2)));
        }

        // Unknown fields warn in document order.
        let odd = |i: usize| node(i).replace("kind: Node", "kind: Node\nfoo: 1");
        let text: String = (0..n).map(|i| if i % 1000 == 7 { odd(i) } else { node(i) }).collect();
        let mut m = Manifest::with_validation(FieldValidation::Warn);
        m.load_str("big.yaml", &text).expect("valid");
        assert_eq!(m.warnings.len(), n.div_ceil(1000));
        assert!(m.warnings[1].starts_with("big.yaml: document 1008 (line "), "{}", m.warnings[1]);

        // A duplicate key and a syntax error in the middle are reported as one pass does.
        for (bad, what) in [("  name: x\n  name: y\n", "duplicate key"), ("  name: [unclosed\n", "")] {
            let broken = |i: usize| node(i).replace(&format!("  name: node-{i:05}\n"), bad);
            let text: String = (0..n).map(|i| if i == n / 2 { broken(i) } else { node(i) }).collect();
            let err = Manifest::new().load_str("big.yaml", &text).expect_err("broken document");
            match err {
                InputError::Yaml { document, line, source, .. } => {
                    assert_eq!(document, n / 2 + 1);
                    assert_eq!(line, Some(7 * (n / 2) + 2));
                    assert!(source.to_string().contains(what), "{source}");
                }
                other => panic!("{other}"),
            }
        }
    }

    #[test]
    fn document_lines_follow_markers_and_content() {
        assert_eq!(yaml_document_lines("a: 1\n---\nb: 2\n"), vec![1, 3]);
        assert_eq!(yaml_document_lines("# c\n---\na: 1\n...\n---\nb: 2"), vec![3, 6]);
        assert_eq!(yaml_document_lines("---\na: 1\n---\n---\nb: 2\n---\n"), vec![2, 3, 5, 6]);
        assert_eq!(yaml_document_lines("--- {a: 1}\n--- # c\n\nb: 2\n"), vec![1, 4]);
        assert_eq!(yaml_document_lines("x: |\n  ---- not a marker\n"), vec![1]);
    }

    /// One document read by the block reader into the strict `Value`, or `None` when the
    /// block reader leaves it to the full parser.
    fn block_read(text: &str) -> Option<Value> {
        let path = std::cell::RefCell::new(Vec::new());
        crate::block::Cursor::new(text).and_then(|c| c.read(Strict { path: &path })).ok()
    }

    /// One document read by the reference path (serde_yaml_ng, then the strict reader).
    fn reference_read(text: &str) -> Result<Value, String> {
        let mut values = yaml_values(text).map_err(|(_, e)| e.to_string())?;
        assert!(values.len() <= 1, "{text:?} is one document");
        Ok(values.pop().unwrap_or(Value::Null))
    }

    /// Whether the block reader read `text` (it then gives what the reference gives), or left
    /// it to the full parser. Panics when it read a value the reference does not give.
    fn block_agrees(text: &str) -> bool {
        let fast = block_read(text);
        if let Some(v) = &fast {
            assert_eq!(Ok(v), reference_read(text).as_ref(), "{text:?}");
        }
        fast.is_some()
    }

    /// Edge cases of YAML's syntax and of its typing of plain scalars: the block reader
    /// reads what it reads exactly as the reference does, and leaves the rest to the full
    /// parser, never giving a different value.
    #[test]
    fn block_reader_edge_cases_agree_with_the_reference() {
        // (text, whether the block reader reads it itself)
        let cases: &[(&str, bool)] = &[
            // Quoted scalars: single quotes with `''`, backslashes literal; double quotes
            // without escapes; escapes left to the full parser.
            ("a: 'it''s'\n", true),
            ("a: ''''\n", true),
            ("a: ''''''\n", true),
            ("a: 'a\\nb'\n", true),
            ("a: 'x: y # z'\n", true),
            ("a: \"x: y # z\"\n", true),
            ("a: \"a'b\"\n", true),
            ("a: 'a\"b'\n", true),
            ("a: ''\n", true),
            ("a: \"\"\n", true),
            ("a: 'true'\nb: '1'\nc: \"null\"\n", true),
            ("a: \"say \\\"hi\\\"\"\n", false),
            ("a: \"caf\\u00e9\"\n", false),
            ("a: \"x\\ty\"\n", false),
            ("a: \"\\\\\"\n", false),
            ("a: 'a' 'b'\n", false),
            ("a: 'a'b'\n", false),
            ("a: '''\n", false),
            ("a: 'x' # c\n", false),
            ("a: 'x\n  y'\n", false),
            // Plain scalars YAML types (serde_yaml_ng: YAML 1.2's core schema).
            ("a: yes\nb: no\nc: on\nd: off\ne: y\nf: n\ng: Yes\n", true),
            ("a: true\nb: True\nc: TRUE\nd: false\ne: False\nf: FALSE\ng: tRUE\n", true),
            ("a: ~\nb: null\nc: Null\nd: NULL\ne:\nf: nULL\n", true),
            ("a: 0\nb: 7\nc: -7\nd: 18446744073709551615\ne: -9223372036854775808\n", true),
            ("a: inf\nb: nan\nc: infinity\nd: -inf\ne: NaN\n", true),
            ("a: 1_000\nb: 12ab\nc: 1 2\nd: +x\ne: +\nf: -1x\ng: ++1\nh: +-1\n", true),
            ("a: 10.0.0.1\nb: 1.2.3\nc: 2026-01-01\nd: 1-2\ne: 1e3e\n", true),
            ("a: 64Gi\nb: 500m\n", true),
            ("a: 0.5\n", false),
            ("a: 010\n", false),
            ("a: 00\n", false),
            ("a: -0\n", false),
            ("a: 0x1F\n", false),
            ("a: -0x1F\n", false),
            ("a: 0o17\n", false),
            ("a: 0b11\n", false),
            ("a: 1e3\n", false),
            ("a: 1E-3\n", false),
            ("a: 1.\n", false),
            ("a: .5\n", false),
            ("a: -.5\n", false),
            ("a: +1\n", false),
            ("a: +.5\n", false),
            ("a: .inf\n", false),
            ("a: -.inf\n", false),
            ("a: +.inf\n", false),
            ("a: .Inf\n", false),
            ("a: .NaN\n", false),
            ("a: .nan\n", false),
            ("a: 18446744073709551616\n", false),
            ("a: -9223372036854775809\n", false),
            // Keys: YAML reads a plain key as its text, whatever it looks like.
            ("true: 1\nnull: 2\n1: 3\n0x1F: 4\n.inf: 5\n-1: 6\n", false),
            ("true: 1\nnull: 2\n1: 3\n0x1F: 4\n.inf: 5\n", true),
            ("a.b/c-d_e: 1\n", true),
            ("a:b: 1\n", false),
            ("\"a:b\": 1\n", false),
            ("'a': 1\n", false),
            ("a b: 1\n", false),
            ("-a: 1\n", false),
            ("? a\n: 1\n", false),
            ("<<: {}\n", false),
            // Values with `: ` or ` #` in them, and comments.
            ("a: b: c\n", false),
            ("a: b #c\n", false),
            ("a: b#c\n", false),
            ("a: x:\n", false),
            ("a: http://x:80/y?q=1&r=[2]\n", true),
            ("a: x,y\nb: x[0]\nc: x{}\nd: ?x\ne: :x\nf: it's\ng: say \"hi\"\n", true),
            ("a: 1 # c\n", false),
            ("a: # c\n  b: 1\n", false),
            ("- a # c\n", false),
            ("# c\na:\n    # c\n  b: 1 \n  # c\n\n  c: 2\n# c\n", true),
            ("a: b   \nc:    d\n", true),
            // Empty documents.
            ("", true),
            ("# only a comment\n", true),
            ("\n\n   \n", true),
            // CRLF, tabs, and text outside printable ASCII: left to the full parser.
            ("a: 1\r\nb: 2\r\n", false),
            ("a:\tb\n", false),
            ("a: b\tc\n", false),
            ("a:\n\tb: 1\n", false),
            ("a: caf\u{e9}\n", false),
            ("caf\u{e9}: a\n", false),
            ("a: '\u{65e5}\u{672c}'\n", false),
            // Block scalars, anchors, aliases, tags, flow collections, directives.
            ("a: |\n  x\n  y\n", false),
            ("a: |-\n  x\n", false),
            ("a: >\n  x\n  y\n", false),
            ("a: >+\n  x\n\n", false),
            ("a: |2\n   x\n", false),
            ("a: &x 1\nb: *x\n", false),
            ("a: &x\n  b: 1\nc: *x\n", false),
            ("a: !!str 1\n", false),
            ("a: !!map\n  b: 1\n", false),
            ("a: {b: 1}\n", false),
            ("a: [1, 2]\n", false),
            ("a: { }\n", false),
            ("a: {}\nb: []\n", true),
            ("- {}\n- []\n", true),
            ("- {a: 1}\n", false),
            ("- - a\n", false),
            ("- &x a\n", false),
            ("hello\n", false),
            ("'hello'\n", false),
            ("a: -\n", false),
            ("a: - b\n", false),
            ("a: @x\n", false),
            ("a: `x\n", false),
            ("a: %x\n", false),
            // Sequences at the key's indentation, compact mappings in sequence items.
            ("containers:\n- name: a\n  image: b\n- name: c\nnext: 1\n", true),
            ("- a:\n  - x\n  b: 1\n- y\n", true),
            ("- a:\n- b\n", true),
            ("-\n  a: 1\n- \n-   x\n-   k: 1\n    l: 2\n", true),
            ("a:\n-\n- b\n", true),
            ("a:\n  - x\n  b: 1\n", false),
            ("- a: 1\n b: 2\n", false),
            ("a:\n  b: 1\n c: 2\n", false),
            // Indentation.
            ("  a: 1\n  b: 2\n", true),
            ("  a: 1\nb: 2\n", false),
            ("a: 1\n  b: 2\n", false),
            ("a: b\n  c\n", false),
            ("a:\n  b\n", false),
            ("- a\n  b\n", false),
            ("a: b\nc\n", false),
            // Duplicate keys: the strict reader refuses them; the full parser gives the error.
            ("a: 1\na: 2\n", false),
            ("a:\n  b: 1\n  c: 2\n  b: 3\n", false),
        ];
        for &(text, reads) in cases {
            assert_eq!(block_agrees(text), reads, "{text:?}: read by the block reader");
        }
        // Duplicate keys are an error on the reference path, naming the mapping.
        let err = reference_read("a:\n  b: 1\n  c: 2\n  b: 3\n").expect_err("duplicate key");
        assert!(err.contains("duplicate key \"b\" in a"), "{err}");
    }

    /// The reference refuses more than 128 nested collections and keys longer than 1024
    /// characters; the block reader leaves them to it (and never overflows its stack).
    #[test]
    fn block_reader_leaves_deep_nesting_and_long_keys_to_the_full_parser() {
        let maps = |depth: usize, leaf: &str| {
            let mut s = String::new();
            for i in 0..depth - 1 {
                s.push_str(&format!("{}k:\n", " ".repeat(i)));
            }
            s.push_str(&format!("{}k: {leaf}\n", " ".repeat(depth - 1)));
            s
        };
        let seqs = |depth: usize| {
            let mut s = String::new();
            for i in 0..depth - 1 {
                s.push_str(&format!("{}-\n", " ".repeat(i)));
            }
            s.push_str(&format!("{}- x\n", " ".repeat(depth - 1)));
            s
        };
        for (text, depth) in [
            (maps(128, "1"), 128),
            (maps(127, "{}"), 128),
            (seqs(128), 128),
            (maps(129, "1"), 129),
            (maps(128, "[]"), 129),
            (seqs(129), 129),
        ] {
            assert_eq!(reference_read(&text).is_ok(), depth <= 128, "{depth} levels");
            assert_eq!(block_agrees(&text), depth <= 128, "{depth} levels");
        }
        assert!(!block_agrees(&maps(5000, "1")));

        for (len, valid) in [(1000, true), (1024, true), (1025, false), (2000, false)] {
            let key = "k".repeat(len);
            for text in [format!("{key}: 1\n"), format!("- {key}: 1\n"), format!("a:\n  {key}:\n    b: 1\n")] {
                assert_eq!(reference_read(&text).is_ok(), valid, "a key of {len} characters");
                assert_eq!(block_agrees(&text), valid, "a key of {len} characters");
            }
        }
    }

    /// Reading a whole file: the fast path gives the reference path's objects, origins and
    /// warnings, or its error (naming the file, the document and its line), for streams the
    /// block reader reads and streams it leaves, in part or whole, to the full parser.
    #[test]
    fn fast_and_reference_paths_agree_on_streams() {
        fn read(text: &str, reference: bool) -> String {
            let mut m = Manifest::with_validation(FieldValidation::Warn);
            let result = if reference { m.load_str_reference("f.yaml", text) } else { m.load_str("f.yaml", text) };
            match result {
                Ok(()) => format!("{:?}\n{:?}\n{:?}", m.entries, m.warnings, m.skipped),
                Err(e) => match std::error::Error::source(&e) {
                    Some(cause) => format!("{e}: {cause}"),
                    None => e.to_string(),
                },
            }
        }
        let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    zone: a\n";
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    image: i\n";
        let texts = [
            format!("{node}---\n{pod}"),
            format!("--- # c\n{node}--- \n{pod}---\n"),
            format!("{node}---\n{}", pod.replace('\n', "\r\n")),
            format!("{}---\r\n{pod}", node.replace('\n', "\r\n")),
            format!("{node}...\n---\n{pod}...\n"),
            format!("--- {{apiVersion: v1, kind: Node, metadata: {{name: n2}}}}\n---\n{pod}"),
            format!("--- !!map\n{node}"),
            format!("{node}---\n{}", pod.replace("image: i", "image: \"\\u00e9\"")),
            format!("{node}---\n{}", pod.replace("image: i", "image: caf\u{e9} # c")),
            format!("{node}---\n{}", pod.replace("  name: p", "  name: p\n  name: q")),
            format!("{node}---\n{}", pod.replace("  name: p", "  name: [p")),
            format!("{node}---\n{}", pod.replace("  name: p", "  name: p\n\tx: 1")),
            format!("{node}---\nhello\n---\n{pod}"),
            format!("{node}---\n{}", node.replace("zone: a", "zone: .inf")),
            format!("{node}---\n{}", node.replace("name: n1", "name: n2").replace("zone: a", "zone: 010")),
            format!("{node}---\n{}", node.replace("name: n1", "name: '0x1F'")),
            format!("%YAML 1.2\n---\n{node}"),
            "---\n---\n# c\n".to_string(),
        ];
        for text in &texts {
            assert_eq!(read(text, false), read(text, true), "{text:?}");
        }
        // A malformed document is named, with its file and line, on both paths.
        let bad = format!("{node}---\n{}", pod.replace("  name: p", "  name: p\n  name: q"));
        let err = read(&bad, false);
        assert!(
            err.starts_with("f.yaml: document 2 (line 8): invalid YAML: metadata: duplicate key \"name\" in metadata"),
            "{err}"
        );
        let bad = format!("{node}---\n{}", pod.replace("  name: p", "  name: [p"));
        let err = read(&bad, false);
        assert!(err.starts_with("f.yaml: document 2 (line 8): invalid YAML: "), "{err}");
    }

    #[test]
    fn origin_display() {
        let o = Origin { file: "a.yaml".into(), document: 2, line: Some(7), item: Some(3) };
        assert_eq!(o.to_string(), "a.yaml: document 2 (line 7), item 3");
        let o = Origin { file: "a.yaml".into(), document: 1, line: None, item: None };
        assert_eq!(o.to_string(), "a.yaml: document 1");
    }
}
