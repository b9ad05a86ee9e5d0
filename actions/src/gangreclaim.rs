//! The `gangreclaim` action (Volcano v1.15): across queues, a starving job of a queue that
//! is owed resources takes them back from reclaimable queues, gang by gang.
//!
//! Victims are Running, preemptable pods of jobs in *other*, *reclaimable* queues that the
//! queue plugins let go (`proportion`, `capacity`: the victim's queue stays at or above
//! what it deserves), chosen in bundles (see [`crate::gang_evict`]): victim queue order
//! first (the most over-served queue first), a job's pods above its minimum before any job
//! whole, and whole jobs by the room they make here for the least disruption overall. An
//! overused queue reclaims nothing; a queue whose plugins refuse (`preemptive`) reclaims
//! nothing for the job. Only what the job's pods need is evicted; they are pipelined onto
//! the freed nodes, within one HyperNode for a job with a hard network topology constraint.
//!
//! It replaces `reclaim`: the two are not configured together.

use volcano_api::conf::Arguments;
use volcano_framework::{Action, ArgsError, EvictionKind, Session};

use crate::gang_evict::{self, Settings};

/// Configuration name.
pub const NAME: &str = "gangreclaim";

/// Arguments of `gangreclaim`.
pub type Args = gang_evict::Args;

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(GangReclaim { settings: gang_evict::settings(a)? }))
}

/// The gangreclaim action.
#[derive(Debug)]
pub struct GangReclaim {
    /// The resolved arguments.
    pub settings: Settings,
}

impl Action for GangReclaim {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        gang_evict::execute(ssn, EvictionKind::GangReclaim, self.settings);
    }
}
