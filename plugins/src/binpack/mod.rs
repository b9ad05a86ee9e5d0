//! The `binpack` plugin: prefers nodes that the task fills up the most.
//!
//! For each resource the task requests that has a weight (`cpu`, `memory`, and the ones
//! listed in `binpack.resources`), the node scores `weight × (used + request) / allocatable`;
//! the sum is divided by the sum of those weights and multiplied by 100 and `binpack.weight`.
//! A resource the node would overflow makes the whole score 0; a resource the node has none
//! of contributes 0 but its weight still counts. GPUs are packed only when listed in
//! `binpack.resources`.

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::resource::MIN_RESOURCE;
use volcano_framework::{
    ArgsError, Hooks, Incremental, NodeId, NodeInfo, Plugin, PluginBuilder, Resource, Snapshot, TaskId,
};

mod args;
#[cfg(test)]
mod tests;

pub use args::{Args, Weights, KEYS, RESOURCE_PREFIX};

/// Configuration name.
pub const NAME: &str = "binpack";

/// The binpack score of a request on a node (Volcano `BinPackingScore`).
pub fn binpack_score(request: &Resource, node: &NodeInfo, weights: &Weights) -> f64 {
    let mut score = 0.0;
    let mut weight_sum = 0i64;
    for (name, req) in request.dims() {
        // Dimensions below the epsilon are not requested (Volcano `ResourceNames`); `pods`
        // counts only if listed in `binpack.resources`, as in Volcano.
        if req < MIN_RESOURCE {
            continue;
        }
        let Some(weight) = weights.of(name) else { continue };
        let allocatable = node.allocatable.get(name);
        if allocatable != 0.0 && weight != 0 {
            let after = req + node.used.get(name);
            if after > allocatable {
                return 0.0;
            }
            score += after * weight as f64 / allocatable;
        }
        weight_sum += weight;
    }
    if weight_sum > 0 {
        score /= weight_sum as f64;
    }
    score * 100.0 * weights.weight as f64
}

/// The plugin for one session.
#[derive(Clone, Debug)]
pub struct Binpack {
    weights: Weights,
}

impl Binpack {
    /// A plugin with these weights.
    pub fn new(weights: Weights) -> Self {
        Binpack { weights }
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        // Volcano registers no node order function when `binpack.weight` is 0.
        if self.weights.weight == 0 {
            Hooks::empty()
        } else {
            Hooks::NODE_ORDER
        }
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        binpack_score(&snap.task(task).resreq, snap.node(node), &self.weights)
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Binpack {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        // The score reads no inter-pod rule.
        true
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The score reads the task's request and the node's used and allocatable resources.
        true
    }

    fn evaluation_key(&self, _snap: &Snapshot, _task: TaskId) -> Option<u64> {
        // The score reads only the task's request (see `shape_local`).
        Some(0)
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args = Args::parse(&opt.arguments)?;
    for name in args.unlisted_weights() {
        tracing::warn!(
            plugin = NAME,
            resource = name,
            "binpack.resources.{name} is ignored: {name} is not listed in binpack.resources"
        );
    }
    let weights = args.resolve();
    Ok(Arc::new(move || Box::new(Binpack::new(weights.clone())) as Box<dyn Plugin>))
}
