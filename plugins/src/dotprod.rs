//! The `dotprod` plugin: prefers the node whose free resources align least with the request (Tetris, the FGD paper's DotProd baseline).
//!
//! Scores are integers 0–100, times `dotprod.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::{ArgsError, PluginBuilder};

use crate::placement::{policy_factory, NodeFree, Request, MAX_CPU, MAX_GPU};

/// Configuration name.
pub const NAME: &str = "dotprod";

/// Checks `dotprod.weight` and returns the builder (see [`crate::placement::ScorePolicy`]).
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    policy_factory(NAME, opt, raw_score)
}

/// The raw score: 100 × (1 − the smallest dot product of the request and a group of the
/// node's free resources that can take it), floored (Tetris's alignment, as the FGD paper's
/// DotProd with `share` groups and `max` scaling). cpu and GPU are scaled by the largest
/// node ([`MAX_CPU`], [`MAX_GPU`]); the groups are each card with room for a fractional
/// request, or the node's idle cards together for whole cards.
pub fn raw_score(req: &Request, free: &NodeFree) -> f64 {
    let cpu = req.cpu / MAX_CPU * free.cpu / MAX_CPU;
    let dot = if req.count == 0 {
        cpu / 2.0
    } else if req.is_fraction() {
        let best = free.gpus.iter().filter(|&&g| g >= req.milli).min().copied().unwrap_or(0);
        (cpu + req.milli as f64 / MAX_GPU * best as f64 / MAX_GPU) / 2.0
    } else {
        let idle = free.idle_cards() as f64 * 1000.0;
        (cpu + req.gpu_total() as f64 / MAX_GPU * idle / MAX_GPU) / 2.0
    };
    (100.0 * (1.0 - dot)).floor()
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;

    #[test]
    fn a_fraction_prefers_the_fullest_card_it_fits() {
        let req = Request { cpu: 4000.0, count: 1, milli: 300 };
        let tight = NodeFree { cpu: 32000.0, gpus: smallvec![400, 1000] };
        let loose = NodeFree { cpu: 32000.0, gpus: smallvec![1000, 1000] };
        assert!(raw_score(&req, &tight) >= raw_score(&req, &loose));
        let aligned = Request { cpu: 64000.0, count: 0, milli: 0 };
        let big = NodeFree { cpu: 128000.0, gpus: smallvec![] };
        assert_eq!(raw_score(&aligned, &big), 75.0);
    }
}
