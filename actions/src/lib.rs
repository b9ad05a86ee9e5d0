//! volcano-actions: the in-tree scheduling actions.
//!
//! Start at [`in_tree`], the explicit registry. Each action is a module with its typed
//! arguments (from the configuration's `configurations` list) and its `execute`.

// Actions walk jobs by index and keep several per-job arrays side by side (worksheets,
// heaps); an index loop says that more plainly than zipped iterators.
#![allow(clippy::needless_range_loop)]

use serde::Deserialize;
use volcano_api::conf::args;
use volcano_framework::ActionRegistry;

/// The arguments `allocate`, `backfill` and `reclaim` take (from `configurations`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommonArgs {
    /// Skip a task whose role already failed predicates in this session (default true;
    /// acted on by `allocate`, accepted by the others for compatibility).
    #[serde(rename = "predicateErrorCacheEnable", default, deserialize_with = "args::bool")]
    pub predicate_error_cache_enable: Option<bool>,
}

pub mod allocate;
pub mod backfill;
pub mod enqueue;
mod evict;
pub mod gang_evict;
pub mod gangpreempt;
pub mod gangreclaim;
pub mod preempt;
pub mod reclaim;
pub mod topology;

/// Every in-tree action, by configuration name.
pub fn in_tree() -> ActionRegistry {
    let mut r = ActionRegistry::default();
    let entries: &[(&'static str, volcano_framework::ActionFactory)] = &[
        (allocate::NAME, allocate::factory),
        (backfill::NAME, backfill::factory),
        (enqueue::NAME, enqueue::factory),
        (gangpreempt::NAME, gangpreempt::factory),
        (gangreclaim::NAME, gangreclaim::factory),
        (preempt::NAME, preempt::factory),
        (reclaim::NAME, reclaim::factory),
    ];
    for &(name, f) in entries {
        r.register(name, f).expect("in-tree action names are unique");
    }
    r
}
