//! The errors of the simulator: bad input ([`InputError`], always naming the file, the
//! document and, when there is one, the object and the field) and failures of a simulation
//! ([`SimError`]: an invariant the scheduler broke, an effect that cannot be applied).

use std::fmt;

use thiserror::Error;

/// The kinds the simulator reads, in words (for error messages).
pub const SUPPORTED_KINDS: &str = "v1 Node, Pod, Namespace, PersistentVolumeClaim, PersistentVolume, Service, \
     ReplicationController and List, apps/v1 ReplicaSet and StatefulSet, scheduling.k8s.io/v1 PriorityClass, \
     storage.k8s.io/v1 StorageClass and CSINode, \
     scheduling.volcano.sh/v1beta1 PodGroup and Queue, batch.volcano.sh/v1alpha1 Job, \
     topology.volcano.sh/v1alpha1 HyperNode";

/// Where an object was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The file as named on the command line (`<stdin>` for standard input).
    pub file: String,
    /// 1-based index of the document (YAML) or top-level value (JSON) in the file.
    pub document: usize,
    /// 1-based line where the document starts, when known.
    pub line: Option<usize>,
    /// 1-based index in the `items` of a List, for objects inside a List.
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(line) = self.line {
            write!(f, " (line {line})")?;
        }
        if let Some(item) = self.item {
            write!(f, ", item {item}")?;
        }
        Ok(())
    }
}

/// Kubernetes objects that cannot be loaded, or that a cluster would reject.
#[derive(Debug, Error)]
pub enum InputError {
    /// A file or directory cannot be read.
    #[error("cannot read {file}")]
    Read {
        /// The path as given.
        file: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A YAML document does not parse.
    #[error("{file}: document {document}{}: invalid YAML", line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Yaml {
        /// The file.
        file: String,
        /// 1-based index of the document in the file.
        document: usize,
        /// 1-based line where the document starts, when known.
        line: Option<usize>,
        /// The parser's error (with line and column).
        #[source]
        source: serde_yaml_ng::Error,
    },
    /// A JSON file does not parse.
    #[error("{file}: invalid JSON")]
    Json {
        /// The file.
        file: String,
        /// The parser's error (with line and column).
        #[source]
        source: serde_json::Error,
    },
    /// A document (or List item) is not a mapping.
    #[error("{origin}: expected a Kubernetes object (a mapping with apiVersion and kind), found {found}")]
    NotAnObject {
        /// Where.
        origin: Box<Origin>,
        /// What was found instead (`a list`, `a string`, …).
        found: &'static str,
    },
    /// `apiVersion` or `kind` is missing or not a string.
    #[error("{origin}: {}field {field}: expected a string, {found}", object_prefix(.object))]
    MissingType {
        /// Where.
        origin: Box<Origin>,
        /// `metadata.name` of the object, if it has one.
        object: Option<String>,
        /// `apiVersion` or `kind`.
        field: &'static str,
        /// What was found (`missing`, `found a number`, …).
        found: &'static str,
    },
    /// An apiVersion/kind the simulator does not read.
    #[error(
        "{origin}: {}unknown kind {kind:?} of apiVersion {api_version:?}: the simulator reads {}",
        object_prefix(.object),
        SUPPORTED_KINDS
    )]
    UnknownKind {
        /// Where.
        origin: Box<Origin>,
        /// `metadata.name` of the object, if it has one.
        object: Option<String>,
        /// The apiVersion.
        api_version: String,
        /// The kind.
        kind: String,
    },
    /// A kind the simulator will read once the part that handles it exists.
    #[error("{origin}: {}{kind} of apiVersion {api_version:?} is not supported by the simulator yet: {why}", object_prefix(.object))]
    UnsupportedKind {
        /// Where.
        origin: Box<Origin>,
        /// `metadata.name` of the object, if it has one.
        object: Option<String>,
        /// The apiVersion.
        api_version: String,
        /// The kind.
        kind: String,
        /// Why, and what to do instead.
        why: &'static str,
    },
    /// A field of an object is invalid (wrong type, bad quantity, missing name, …).
    #[error("{}: {kind} {object}: {}", origin_text(.origin), field_text(.field, .message))]
    Field {
        /// Where the object came from; `None` for objects the simulator created.
        origin: Option<Box<Origin>>,
        /// The object's kind.
        kind: &'static str,
        /// `namespace/name` or `name` of the object (`(unnamed)` without a name).
        object: String,
        /// The field path (`spec.containers[0].resources.requests.cpu`); empty for the
        /// object as a whole.
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// Two objects of the same kind with the same namespace and name.
    #[error("{kind} {object} is defined twice: in {first} and in {second}")]
    Duplicate {
        /// The kind.
        kind: &'static str,
        /// `namespace/name` or `name`.
        object: String,
        /// Where it was defined first.
        first: Box<Origin>,
        /// Where it was defined again.
        second: Box<Origin>,
    },
}

fn object_prefix(object: &Option<String>) -> String {
    match object {
        Some(name) => format!("object {name}: "),
        None => String::new(),
    }
}

fn origin_text(origin: &Option<Box<Origin>>) -> String {
    match origin {
        Some(o) => o.to_string(),
        None => "(created by the simulator)".to_string(),
    }
}

fn field_text(field: &str, message: &str) -> String {
    if field.is_empty() {
        message.to_string()
    } else {
        format!("field {field}: {message}")
    }
}

impl InputError {
    /// A bounded label for metrics and scripts.
    pub fn category(&self) -> &'static str {
        match self {
            InputError::Read { .. } => "io",
            InputError::Yaml { .. } | InputError::Json { .. } => "syntax",
            InputError::NotAnObject { .. } => "not_an_object",
            InputError::MissingType { .. } => "missing_type",
            InputError::UnknownKind { .. } => "unknown_kind",
            InputError::UnsupportedKind { .. } => "unsupported_kind",
            InputError::Field { .. } => "invalid_field",
            InputError::Duplicate { .. } => "duplicate",
        }
    }
}

/// An effect of a cycle that the in-memory cluster cannot apply (the scheduler referred to
/// an object that does not exist, or bound a pod twice).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("cannot apply {effect}: {message}")]
pub struct EffectError {
    /// The effect, in words (`bind default/a to node-1`).
    pub effect: String,
    /// Why it cannot be applied.
    pub message: String,
}

impl EffectError {
    /// A bounded label for metrics and scripts.
    pub fn category(&self) -> &'static str {
        "effect"
    }
}

/// A simulation that cannot go on.
#[derive(Debug, Error)]
pub enum SimError {
    /// The input is invalid.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The scheduler broke an invariant (a bug of the scheduler, not of the input).
    #[error("cycle {cycle}: the scheduler broke {} invariant(s): {}", .violations.len(), .violations.join("; "))]
    Invariant {
        /// The cycle.
        cycle: u64,
        /// What was violated, with the action after which it was found.
        violations: Vec<String>,
    },
    /// An effect cannot be applied (a bug of the scheduler, not of the input).
    #[error("cycle {cycle}: the scheduler produced an effect the cluster cannot apply")]
    Effect {
        /// The cycle.
        cycle: u64,
        /// What went wrong.
        #[source]
        source: EffectError,
    },
}

impl SimError {
    /// A bounded label for metrics and scripts.
    pub fn category(&self) -> &'static str {
        match self {
            SimError::Input(e) => e.category(),
            SimError::Invariant { .. } => "invariant_violation",
            SimError::Effect { .. } => "effect",
        }
    }

    /// Whether the error is the scheduler's fault (a bug) rather than the input's.
    pub fn is_scheduler_bug(&self) -> bool {
        matches!(self, SimError::Invariant { .. } | SimError::Effect { .. })
    }
}
