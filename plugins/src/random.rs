//! The `random` plugin: every node a random score in [0, `random.weight`), the same for a
//! task and a node in every session (seeded by `random.seed`, the pod's uid and the node's
//! name), so a run is repeatable. Alone it places each pod on a uniformly random feasible
//! node (the FGD paper's Random baseline); with weight 1 beside a plugin whose scores are
//! integers it breaks their ties at random.

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::{parse_args, ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, Snapshot, TaskId};

/// Configuration name.
pub const NAME: &str = "random";

/// The `random` arguments.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `random.seed` (0).
    #[serde(rename = "random.seed", default, deserialize_with = "args::int")]
    pub seed: Option<i64>,
    /// `random.weight` (1): scores are in [0, weight).
    #[serde(rename = "random.weight", default, deserialize_with = "args::float")]
    pub weight: Option<f64>,
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight.unwrap_or(1.0);
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument \"random.weight\": {weight} is negative")));
    }
    let seed = args.seed.unwrap_or(0) as u64;
    Ok(Arc::new(move || Box::new(Random { seed, weight, nodes: Vec::new() }) as Box<dyn Plugin>))
}

/// The plugin.
#[derive(Clone, Debug)]
pub struct Random {
    seed: u64,
    weight: f64,
    /// Per node, the hash of its name (set at session open).
    nodes: Vec<u64>,
}

/// FNV-1a of a string, from `seed`.
fn fnv(seed: u64, s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325 ^ seed.wrapping_mul(0x9e3779b97f4a7c15);
    for byte in s.bytes() {
        h ^= byte as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// A value in [0, 1) from a seed and two strings (FNV-1a of each, then splitmix64's
/// finaliser).
pub fn unit(seed: u64, a: &str, b: &str) -> f64 {
    mix(fnv(seed, a), fnv(0, b))
}

fn mix(a: u64, b: u64) -> f64 {
    let h = a ^ b.rotate_left(29);
    let mut z = h.wrapping_add(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl Plugin for Random {
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

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &volcano_framework::SessionContext) {
        self.nodes = snap.nodes.iter().map(|n| fnv(0, &n.name)).collect();
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let b = self.nodes.get(node.idx()).copied().unwrap_or_else(|| fnv(0, &snap.node(node).name));
        mix(fnv(self.seed, snap.task(task).uid()), b) * self.weight
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Random {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The score reads the pod's uid: tasks of one shape score nodes differently.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::unit;

    #[test]
    fn unit_values_are_in_range_and_spread() {
        let values: Vec<f64> = (0..1000).map(|i| unit(42, "pod", &format!("node-{i}"))).collect();
        assert!(values.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
        assert_ne!(unit(42, "pod", "n"), unit(43, "pod", "n"), "the seed matters");
    }
}
