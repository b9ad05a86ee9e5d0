//! The `gpu-packing` plugin: GPU packing (the FGD paper's baseline): cards in use first, then nodes in use, then idle nodes.
//!
//! Scores are integers 0–100, times `gpu-packing.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::{parse_args, ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, Snapshot, TaskId};

use crate::placement::{NodeFree, Request};

/// Configuration name.
pub const NAME: &str = "gpu-packing";

/// The `gpu-packing` arguments.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `gpu-packing.weight` (1).
    #[serde(rename = "gpu-packing.weight", default, deserialize_with = "args::float")]
    pub weight: Option<f64>,
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight.unwrap_or(1.0);
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument \"gpu-packing.weight\": {weight} is negative")));
    }
    Ok(Arc::new(move || Box::new(GpuPacking { weight }) as Box<dyn Plugin>))
}

/// The plugin.
#[derive(Clone, Debug)]
pub struct GpuPacking {
    weight: f64,
}

/// The raw score (the FGD paper's GPU packing): a fractional or whole-card request that
/// can use only cards already in use scores 50–100 (fewer free milli-cards left on them is
/// better), one that needs idle cards of a node in use 33–50 (fewer idle cards taken is
/// better), and an idle node 0–33 (fewer cards is better). A request without GPUs scores 0
/// everywhere.
pub fn raw_score(req: &Request, free: &NodeFree) -> f64 {
    if req.count == 0 || req.milli == 0 {
        return 0.0;
    }
    let idle = free.idle_cards() as i64;
    let cards = free.gpus.len() as i64;
    if idle == cards {
        return (33 - idle).max(idle) as f64;
    }
    let Some(chosen) = free.choose(req.count, req.milli) else { return 0.0 };
    let idle_used = chosen.iter().filter(|&&i| free.gpus[i as usize] == 1000).count() as i64;
    if idle_used > 0 {
        return (50 - idle_used).max(33) as f64;
    }
    let left: i64 = chosen.iter().map(|&i| free.gpus[i as usize] as i64 * 100 / 1000).sum();
    (100 - left / 10).max(50) as f64
}

impl Plugin for GpuPacking {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        if self.weight > 0.0 {
            Hooks::NODE_ORDER
        } else {
            Hooks::empty()
        }
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let n = snap.node(node);
        raw_score(&Request::of(snap.task(task), n), &NodeFree::of(n)) * self.weight
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for GpuPacking {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The score reads the task's requests and the node's free cpu and cards.
        true
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        true
    }

    fn evaluation_key(&self, _snap: &Snapshot, _task: TaskId) -> Option<u64> {
        // The score reads only the task's requests (see `shape_local`).
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;

    #[test]
    fn shared_cards_then_used_nodes_then_idle_nodes() {
        let req = Request { cpu: 1000.0, count: 1, milli: 500 };
        let shared = NodeFree { cpu: 1000.0, gpus: smallvec![600, 1000] };
        let used = NodeFree { cpu: 1000.0, gpus: smallvec![0, 1000] };
        let idle = NodeFree { cpu: 1000.0, gpus: smallvec![1000, 1000] };
        let (s, u, i) = (raw_score(&req, &shared), raw_score(&req, &used), raw_score(&req, &idle));
        assert!(s > u && u > i, "{s} {u} {i}");
        assert_eq!((s, u, i), (94.0, 49.0, 31.0));
    }
}
