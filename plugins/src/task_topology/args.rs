//! Arguments of the `task-topology` plugin, with Volcano's key.

use serde::Deserialize;
use volcano_api::conf::args;

/// The default `task-topology.weight`.
pub const DEFAULT_WEIGHT: i64 = 1;

/// The `task-topology` arguments, as written in the scheduler configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `task-topology.weight` (1): multiplies the node score. Any integer is kept as
    /// Volcano keeps it (0 turns the score off, a negative weight repels).
    #[serde(rename = "task-topology.weight", default, deserialize_with = "args::int")]
    pub weight: Option<i64>,
}

impl Args {
    /// The weight in effect.
    pub fn weight(&self) -> i64 {
        self.weight.unwrap_or(DEFAULT_WEIGHT)
    }
}
