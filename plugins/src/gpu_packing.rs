//! The `gpu-packing` plugin: GPU packing (the FGD paper's baseline): cards in use first, then nodes in use, then idle nodes.
//!
//! Scores are integers 0–100, times `gpu-packing.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::{ArgsError, PluginBuilder};

use crate::placement::{policy_factory, NodeFree, Request};

/// Configuration name.
pub const NAME: &str = "gpu-packing";

/// Checks `gpu-packing.weight` and returns the builder (see [`crate::placement::ScorePolicy`]).
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    policy_factory(NAME, opt, raw_score)
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
