//! volcano-scheduler: volcano-rs's scheduler as it runs in a cluster (`volcano-rs scheduler`).
//!
//! Start with [`config`]: the scheduler configuration as the scheduler reads it, from Volcano's
//! configuration file or from the ConfigMap that holds it, validated before it is used and
//! reloaded when it changes, keeping the last good one when a reload fails.
//! [`registries`] lists the built-in plugins and actions every shell loads configurations
//! against.
//!
//! The kube backend (reflectors feeding the snapshot, the applier turning effects into API
//! calls, leader election, `/metrics` and `/healthz`) is built here, around the same core the
//! simulator runs; it is not written yet. This crate never links the simulator or the bench
//! harness.
#![deny(missing_docs)]

pub mod cache;
pub mod config;
pub mod options;

use volcano_framework::Registries;

/// The registries of the built-in plugins and actions.
pub fn registries() -> Registries {
    Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() }
}
