//! volcano-controller: the Volcano Job controller (`batch.volcano.sh/v1alpha1` Job), with the
//! distributed-training job plugins (svc, env, ssh, TensorFlow, PyTorch, MXNet, MPI).
//!
//! The decision logic is pure (no IO, no clock: time is an argument):
//! - [`events`] turns observed changes (pods, PodGroups, Jobs, Commands) into
//!   [`events::Request`]s;
//! - [`policies`] picks the action a request asks for (`applyPolicies`) and keeps the
//!   delayed actions;
//! - [`state`] is the job state machine: what the action does to the pods and where the
//!   job goes;
//! - [`status`] writes the job's next status and says when a finished job expires.
//!
//! The planning code (Job + observed objects → desired pods, services, config maps and
//! PodGroup) is a pure function too, which the simulator reuses.

pub mod events;
pub mod policies;
pub mod state;
pub mod status;

#[cfg(test)]
mod tests;
