//! The `bestfit` plugin: the node the request leaves with the least cpu and GPU (the FGD paper's BestFit baseline).
//!
//! Scores are integers 0–100, times `bestfit.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::{parse_args, ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, Snapshot, TaskId};

use crate::placement::{NodeFree, Request, MAX_CPU, MAX_GPU};

/// Configuration name.
pub const NAME: &str = "bestfit";

/// The `bestfit` arguments.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `bestfit.weight` (1).
    #[serde(rename = "bestfit.weight", default, deserialize_with = "args::float")]
    pub weight: Option<f64>,
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight.unwrap_or(1.0);
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument \"bestfit.weight\": {weight} is negative")));
    }
    Ok(Arc::new(move || Box::new(BestFit { weight }) as Box<dyn Plugin>))
}

/// The plugin.
#[derive(Clone, Debug)]
pub struct BestFit {
    weight: f64,
}

/// The raw score (the FGD paper's BestFit): `100 × (1 − [0.5 × (cpu left − cpu asked) /
/// 128 cores + 0.5 × (milli-cards left − milli-cards asked) / 8 cards])`, truncated: the
/// node the request leaves emptiest scores highest.
pub fn raw_score(req: &Request, free: &NodeFree) -> f64 {
    let cpu = (free.cpu - req.cpu) / MAX_CPU;
    let gpu = (free.gpu_total() as f64 - req.gpu_total() as f64) / MAX_GPU;
    (100.0 * (1.0 - (0.5 * cpu + 0.5 * gpu))).trunc()
}

impl Plugin for BestFit {
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

impl Incremental for BestFit {
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
    fn the_node_left_emptiest_wins() {
        let req = Request { cpu: 8000.0, count: 1, milli: 1000 };
        let full = NodeFree { cpu: 16000.0, gpus: smallvec![1000, 0] };
        let roomy = NodeFree { cpu: 96000.0, gpus: smallvec![1000; 8] };
        assert!(raw_score(&req, &full) > raw_score(&req, &roomy));
        assert_eq!(raw_score(&req, &full), 96.0);
    }
}
