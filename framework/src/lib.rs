//! volcano-framework: the scheduling core of volcano-rs.
//!
//! Where to begin: [`cycle::run_cycle`] runs one scheduling cycle — it opens a
//! [`Session`] over a [`Snapshot`] (built from Kubernetes objects by
//! [`Snapshot::build`]), runs the [`Profile`]'s actions, and returns ordered
//! [`Effect`]s. Plugins implement [`Plugin`], actions implement [`Action`]; both are
//! resolved through explicit [`Registries`].
//!
//! This crate does no IO and knows nothing of kube or tokio: a cycle is a deterministic
//! function of its inputs.
#![deny(missing_docs)]

pub mod action;
pub mod close;
pub mod cow;
pub mod cycle;
pub mod device;
pub mod effect;
pub mod explain;
pub mod implicit;
pub mod index;
pub mod invariants;
pub mod model;
pub mod plugin;
pub mod pod;
pub mod pq;
pub mod profile;
pub mod registry;
pub mod resource;
pub mod retry;
pub mod session;
pub mod snapshot;
pub mod statement;
pub mod stats;
pub mod status;
pub mod topology;

pub use action::Action;
pub use close::CycleOutcome;
pub use cow::CowVec;
pub use cycle::{run_cycle, run_cycle_inspected, Both, CycleContext, NoObserver, Observer, PluginStage};
pub use effect::{Effect, Event, EventKind, EventType, ObjectRef, PodScheduledFalse};
pub use explain::{Ahead, Blocked, Explanation};
pub use invariants::InvariantChecker;
pub use model::{JobId, JobInfo, NodeId, NodeInfo, QueueId, QueueInfo, TaskId, TaskInfo, TaskStatus};
pub use plugin::{
    Admission, CloseOutput, EvictionContext, EvictionKind, FixedFailures, Hooks, Incremental, InvalidJob, JobMetric,
    JobVerdict, NodeDomains, Plugin, QueueReport, SessionContext, Vote,
};
pub use profile::{PluginEntry, Profile, ProfileError};
pub use registry::{
    parse_args, ActionFactory, ActionRegistry, ArgsError, PluginBuilder, PluginFactory, PluginRegistry, Registries,
};
pub use resource::{DimensionDefault, Resource};
pub use retry::RetryMemo;
pub use session::retry::{Attempt, TryStart};
pub use session::select::{self, NodeChoice};
pub use session::worklist::Worklist;
pub use session::{EvictionTry, Session, SessionOptions};
pub use snapshot::{Changes, ClusterObjects, Extras, QueuelessGroup, Snapshot, SnapshotError};
pub use statement::Statement;
pub use stats::{CycleMetrics, HyperNodeUse, JobMetrics};
pub use status::{Code, FitErrors, Status};
