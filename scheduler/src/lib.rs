//! volcano-scheduler: volcano-rs's scheduler as it runs in a cluster (`volcano-rs scheduler`).
//!
//! Start with [`config`]: the scheduler configuration as the scheduler reads it, from Volcano's
//! configuration file or from the ConfigMap that holds it, validated before it is used and
//! reloaded when it changes, keeping the last good one when a reload fails.
//! Configurations are loaded against the built-in plugins and actions of `volcano-builtin`,
//! as in every other shell.
//!
//! The kube backend, around the same core the simulator runs:
//! - [`options`]: the command line, Volcano's flags, checked before anything is watched;
//! - [`cache`]: the watch-fed cache and the snapshot of each cycle, with the scheduler's
//!   assumptions about binds and evictions in flight;
//! - [`pods`]: the fields of a pod the cache keeps, the protobuf initial list and the pod
//!   reflector;
//! - [`applier`]: effects → API calls (binds, evictions, coalesced status writes, events),
//!   off the cycle's path;
//! - [`leader`]: leader election on a Lease;
//! - [`server`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`run`]: the loop tying them together (`volcano-rs scheduler`).
//!
//! This crate never links the simulator or the bench harness.
#![deny(missing_docs)]

pub mod applier;
pub mod cache;
pub mod config;
pub mod explain;
pub mod options;
pub mod pods;
pub mod run;
pub mod server;
