//! Arguments of the `capacity` plugin, with Volcano's keys.

use serde::Deserialize;
use volcano_api::conf::args;

/// The `capacity` arguments, as written in the scheduler configuration.
///
/// Hierarchical mode is not an argument: it is the plugin entry's `enableHierarchy`
/// switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `ancestorReclaimLevel` (0): in hierarchical mode, how many levels of ancestors
    /// (parent = 1) are consulted when a queue at its deserved share wants to reclaim, and
    /// when a victim's queue is within its deserved share but an ancestor is not. A
    /// negative value falls back to 0 (with a warning), as in Volcano.
    #[serde(rename = "ancestorReclaimLevel", default, deserialize_with = "args::int")]
    pub ancestor_reclaim_level: Option<i64>,
    /// `capacity.DynamicResourceAllocationEnable` (the DRA feature gate): accepted, no
    /// effect (the snapshot has no ResourceClaims, so there is no DRA quota to enforce).
    #[serde(rename = "capacity.DynamicResourceAllocationEnable", default, deserialize_with = "args::bool")]
    pub dynamic_resource_allocation_enable: Option<bool>,
    /// `capacity.DRAConsumableCapacityEnable` (the DRAConsumableCapacity feature gate):
    /// accepted, no effect.
    #[serde(rename = "capacity.DRAConsumableCapacityEnable", default, deserialize_with = "args::bool")]
    pub dra_consumable_capacity_enable: Option<bool>,
}

impl Args {
    /// The ancestor reclaim level in effect: the configured value, or 0 when unset or
    /// negative.
    pub fn ancestor_reclaim_level(&self) -> usize {
        match self.ancestor_reclaim_level {
            None => 0,
            Some(l) if l < 0 => {
                tracing::warn!(level = l, "ancestorReclaimLevel should be non-negative: falling back to 0");
                0
            }
            Some(l) => usize::try_from(l).unwrap_or(usize::MAX),
        }
    }
}
