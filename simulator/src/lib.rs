//! volcano-sim: the volcano-rs simulator — an in-memory cluster scheduled by the real
//! scheduling core on a virtual clock. It is what `volcano-rs simulate` runs.
//!
//! Where to begin:
//! - [`Manifest`] reads Kubernetes manifests (YAML or JSON files, `List`s included) and
//!   keeps where each object was written, so every error names its file and document;
//! - [`normalise`] does what a cluster does before the scheduler sees the objects (defaults,
//!   priorities, default queues, PodGroups for plain pods);
//! - [`Simulator`] runs cycles: the snapshot kept since the last cycle, brought up to date
//!   in place ([`Cluster::snapshot`]) → [`volcano_framework::run_cycle`] with the invariant
//!   checker → [`Cluster::apply_effects`], the one place effects change the cluster → the
//!   job controller ([`control`]), which plans every Volcano Job's step with the
//!   controller's own `plan::step`;
//! - [`Report`] prints the result as a table, JSON or YAML.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use volcano_framework::{Profile, Registries};
//! use volcano_sim::{Manifest, Simulator};
//!
//! // The binary uses `volcano_plugins::in_tree()` and `volcano_actions::in_tree()`.
//! let registries = Registries::default();
//! let profile = Profile::builtin_default(&registries)?;
//! let manifest = Manifest::from_paths(&["examples/gpu-cluster.yaml"])?;
//! let mut sim = Simulator::new(manifest, profile)?;
//! sim.run(None)?;
//! print!("{}", sim.report().to_table());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod admit;
pub mod arrive;
mod block;
pub mod cluster;
pub mod control;
pub mod error;
pub mod job;
pub mod manifest;
pub mod normalize;
pub mod report;
pub mod sim;

pub use cluster::{changes, Cluster, CycleRecord, EventRecord, Eviction, Placement, RUN_SECONDS_ANNOTATION};
pub use error::{EffectError, InputError, SimError};
pub use job::SimJob;
pub use manifest::{Entry, FieldValidation, Manifest, Object, ObjectKind, Origin};
pub use normalize::{normalise, normalise_for, Normalised, Origins, SIM_EPOCH_MS};
pub use report::{ConditionLine, JobLine, NotCreatedLine, PodGroupLine, PodLine, QueueLine, Report};
pub use report::{LastCycle, Stop};
pub use sim::{Simulator, CYCLE_PERIOD_MS, MAX_CYCLES};

/// The scheduler name of volcano-rs: only pods with this `spec.schedulerName` are scheduled.
pub const SCHEDULER_NAME: &str = volcano_api::names::DEFAULT_SCHEDULER_NAME;
