//! The `gangpreempt` action (Volcano v1.15): within a queue, a starving job takes room
//! from jobs of lower priority, gang by gang.
//!
//! Victims are pods of *other* jobs of the *same* queue whose job priority is lower than
//! the preemptor's, Running or Bound and preemptable, chosen in bundles (see
//! [`crate::gang_evict`]): a job's pods above its minimum first, in victim job order, and a
//! job whole only when those do not make room (`allowWholeBundle`). Only what the
//! preemptor's pods need is evicted, and they are pipelined onto the freed nodes; a job
//! with a hard network topology constraint takes its victims, and its nodes, within one
//! HyperNode of its allowed tier (`maxDomains` of them tried).
//!
//! It replaces `preempt`: the two are not configured together.

use volcano_api::conf::Arguments;
use volcano_framework::{Action, ArgsError, EvictionKind, Session};

use crate::gang_evict::{self, Settings};

/// Configuration name.
pub const NAME: &str = "gangpreempt";

/// Arguments of `gangpreempt`.
pub type Args = gang_evict::Args;

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    Ok(Box::new(GangPreempt { settings: gang_evict::settings(a)? }))
}

/// The gangpreempt action.
#[derive(Debug)]
pub struct GangPreempt {
    /// The resolved arguments.
    pub settings: Settings,
}

impl Action for GangPreempt {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        gang_evict::execute(ssn, EvictionKind::GangPreempt, self.settings);
    }
}
