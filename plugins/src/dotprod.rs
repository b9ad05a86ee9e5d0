//! The `dotprod` plugin: prefers the node whose free resources align least with the request (Tetris, the FGD paper's DotProd baseline).
//!
//! Scores are integers 0–100, times `dotprod.weight` (1); see [`crate::placement`].

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::{parse_args, ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, Snapshot, TaskId};

use crate::placement::{NodeFree, Request, MAX_CPU, MAX_GPU};

/// Configuration name.
pub const NAME: &str = "dotprod";

/// The `dotprod` arguments.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `dotprod.weight` (1).
    #[serde(rename = "dotprod.weight", default, deserialize_with = "args::float")]
    pub weight: Option<f64>,
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight.unwrap_or(1.0);
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument \"dotprod.weight\": {weight} is negative")));
    }
    Ok(Arc::new(move || Box::new(DotProd { weight }) as Box<dyn Plugin>))
}

/// The plugin.
#[derive(Clone, Debug)]
pub struct DotProd {
    weight: f64,
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

impl Plugin for DotProd {
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

impl Incremental for DotProd {
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
