//! volcano-controller: the Volcano Job controller (`batch.volcano.sh/v1alpha1` Job), with the
//! distributed-training job plugins (svc, env, ssh, TensorFlow, PyTorch, MXNet, MPI).
//!
//! The modules below are pure (no IO, no clock: time is an argument); the reconciler shell
//! (`run`, `reconcile`, flags in `options`, behind the default feature `shell`) applies them
//! to the API, and the simulator reuses them without the shell:
//! - [`plan`]: Job → PodGroup, pods, plugin objects, `dependsOn` gating; the job plugins are
//!   in [`plugins`] (docs/jobs.md says what each one injects);
//! - [`events`] turns observed changes (pods, PodGroups, Jobs, Commands) into
//!   [`events::Request`]s;
//! - [`policies`] picks the action a request asks for (`applyPolicies`) and keeps the
//!   delayed actions;
//! - [`state`] is the job state machine: what the action does to the pods and where the
//!   job goes;
//! - [`status`] writes the job's next status and says when a finished job expires;
//! - [`autoscale`] is the elastic autoscaler: which tasks of `volcano.sh/autoscale` jobs
//!   grow into capacity the scheduler leaves idle and which shrink for a waiting gang, from
//!   the PodGroup and Queue statuses the scheduler writes;
//! - [`scale`] resizes a group of indexed pods in the safe order (new pods Ready before they
//!   join the host list; hosts out of the list a grace period before their pods go), a pure
//!   state machine independent of the Job type, which `plan` drives per task;
//! - [`queue`]: the Queue controller's state machine (`OpenQueue`, `CloseQueue`, sync), its
//!   PodGroup counts and the hierarchy rules; `queue_reconcile` (feature `shell`) applies
//!   them;
//! - [`training`]: Alibaba et-operator's elastic TrainingJob (workers, launcher, host lists)
//!   and its ScaleOut and ScaleIn requests, resized through [`scale`]; `training_reconcile`
//!   (feature `shell`) applies it;
//! - [`hypernode`]: HyperNode discovery from node labels (Volcano's `label` source): its
//!   configuration, the HyperNodes the nodes' labels make, the creates, updates and deletes of
//!   the discovered ones, every HyperNode's `status.nodeCount`; `hypernode_reconcile` (feature
//!   `shell`) watches the nodes, HyperNodes and the ConfigMap and applies them;
//! - `recorder` (feature `shell`): the jobs' Kubernetes Events (Volcano's reasons and messages), sent off
//!   the reconcile's path;
//! - `server` (feature `shell`): `/metrics` (Volcano's controller metrics in a
//!   `ControllerMetrics`, which the reconcilers update: PodGroups per queue, jobs entering
//!   Completed or Failed, the time from a job's creation to its pods') and `/healthz`;
//!   `deletions` (feature `shell`): the jobs and queues a watch deleted, whose series go;
//! - `cli` (feature `shell`): `volcano-rs job …` and `volcano-rs queue …` (vcctl's commands).
//!
//! Feature `shell` (on by default) adds the modules that talk to the API server, with the
//! kube client and runtime, tokio, axum, clap and `volcano-metrics`; `default-features =
//! false` leaves the pure modules only (what `volcano-sim` links).

pub mod autoscale;
#[cfg(feature = "shell")]
pub mod autoscaler;
#[cfg(feature = "shell")]
pub mod cli;
#[cfg(feature = "shell")]
pub mod deletions;
pub mod events;
pub mod hypernode;
#[cfg(feature = "shell")]
pub mod hypernode_reconcile;
pub mod memory;
pub mod objects;
#[cfg(feature = "shell")]
pub mod options;
pub mod plan;
pub mod plugins;
pub mod policies;
pub mod queue;
#[cfg(feature = "shell")]
pub mod queue_reconcile;
#[cfg(feature = "shell")]
pub mod reconcile;
#[cfg(feature = "shell")]
pub mod recorder;
#[cfg(feature = "shell")]
pub mod run;
pub mod scale;
#[cfg(feature = "shell")]
pub mod server;
pub mod state;
pub mod status;
pub mod training;
#[cfg(feature = "shell")]
pub mod training_reconcile;

#[cfg(feature = "shell")]
pub use options::ControllerOptions;
#[cfg(feature = "shell")]
pub use run::{run, run_with_metrics, ControllerError};
#[cfg(feature = "shell")]
pub use volcano_metrics::ControllerMetrics;

#[cfg(test)]
mod tests;
