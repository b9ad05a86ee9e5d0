//! The `bestfit` plugin: the node the request leaves with the least cpu and GPU (the FGD paper's BestFit baseline).
//!
//! Scores are integers 0–100, times `bestfit.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::{ArgsError, PluginBuilder};

use crate::placement::{policy_factory, NodeFree, Request, MAX_CPU, MAX_GPU};

/// Configuration name.
pub const NAME: &str = "bestfit";

/// Checks `bestfit.weight` and returns the builder (see [`crate::placement::ScorePolicy`]).
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    policy_factory(NAME, opt, raw_score)
}

/// The raw score (the FGD paper's BestFit): `100 × (1 − [0.5 × (cpu left − cpu asked) /
/// 128 cores + 0.5 × (milli-cards left − milli-cards asked) / 8 cards])`, truncated: the
/// node the request leaves emptiest scores highest.
pub fn raw_score(req: &Request, free: &NodeFree) -> f64 {
    let cpu = (free.cpu - req.cpu) / MAX_CPU;
    let gpu = (free.gpu_total() as f64 - req.gpu_total() as f64) / MAX_GPU;
    (100.0 * (1.0 - (0.5 * cpu + 0.5 * gpu))).trunc()
}

#[cfg(test)]
mod tests {
    use smallvec::smallvec;

    use super::*;

    #[test]
    fn the_node_left_emptiest_wins() {
        let req = Request { cpu: 8000.0, count: 1, milli: 1000 };
        let full = NodeFree { cpu: 16000.0, gpus: smallvec![1000, 0] };
        let roomy = NodeFree { cpu: 96000.0, gpus: smallvec![1000; 8] };
        assert!(raw_score(&req, &full) > raw_score(&req, &roomy));
        assert_eq!(raw_score(&req, &full), 96.0);
    }
}
