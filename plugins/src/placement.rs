//! What the GPU placement plugins (`random`, `dotprod`, `gpu-packing`, `bestfit`,
//! `fragmentation`) share: a node's GPUs and cpu as they see them, a task's request, and the
//! min-max normalisation of their scores.
//!
//! Each of them scores a node through [`volcano_framework::Plugin::node_order`], from 0 to
//! 100 (an integer for the paper's baselines, as kube-scheduler's scores are), times the
//! plugin's weight, so that the node index keeps their scores per shape and re-evaluates
//! only the nodes that change. The protocol of the FGD paper normalises scores min-max over
//! the feasible nodes; for integer scores spanning at most 100 points that changes no
//! decision, so it is left out. Ties go to the first node by name, as for every score;
//! `random` with weight 1 beside an integer score breaks them at random instead (what
//! `volcano-rs replay openb` configures, as the paper's simulator does).

use std::sync::Arc;

use smallvec::SmallVec;
use volcano_api::conf::PluginOption;
use volcano_framework::device::{gpu_free, gpu_request, MILLI};
use volcano_framework::{
    ArgsError, Hooks, Incremental, NodeId, NodeInfo, Plugin, PluginBuilder, Snapshot, TaskId, TaskInfo,
};

/// cpu of the largest node, millicores: the scale of the cpu dimension (the FGD paper's).
pub const MAX_CPU: f64 = 128_000.0;
/// GPUs of the largest node, milli-cards: the scale of the GPU dimension.
pub const MAX_GPU: f64 = 8_000.0;

/// A node's free cpu and GPUs.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFree {
    /// Free cpu, millicores.
    pub cpu: f64,
    /// Free milli-cards per card.
    pub gpus: SmallVec<[u32; 8]>,
}

impl NodeFree {
    /// What the node has free now.
    pub fn of(node: &NodeInfo) -> NodeFree {
        let mut gpus = SmallVec::new();
        gpu_free(node, &mut gpus);
        NodeFree { cpu: node.idle.milli_cpu, gpus }
    }

    /// Σ free milli-cards.
    pub fn gpu_total(&self) -> u32 {
        self.gpus.iter().sum()
    }

    /// Cards with nothing in use.
    pub fn idle_cards(&self) -> u32 {
        self.gpus.iter().filter(|&&g| g == MILLI).count() as u32
    }

    /// The cards the device layer gives a request of `count` cards of `milli` each: the
    /// fullest cards that fit first, lowest index on a tie (as
    /// [`volcano_framework::device::NodeGpus::choose`]); `None` when it does not fit.
    pub fn choose(&self, count: u32, milli: u32) -> Option<SmallVec<[u16; 8]>> {
        let mut fit: SmallVec<[u16; 8]> =
            (0..self.gpus.len() as u16).filter(|&i| self.gpus[i as usize] >= milli.max(1)).collect();
        if fit.len() < count as usize {
            return None;
        }
        fit.sort_by_key(|&i| (self.gpus[i as usize], i));
        fit.truncate(count as usize);
        Some(fit)
    }

    /// The node after placing the request on `cards`.
    pub fn after(&self, cpu: f64, milli: u32, cards: &[u16]) -> NodeFree {
        let mut next = self.clone();
        next.cpu -= cpu;
        for &i in cards {
            next.gpus[i as usize] -= milli;
        }
        next
    }
}

/// A task's request as the placement plugins see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// cpu, millicores.
    pub cpu: f64,
    /// Cards.
    pub count: u32,
    /// Milli-cards per card.
    pub milli: u32,
}

impl Request {
    /// The task's request on this node.
    pub fn of(task: &TaskInfo, node: &NodeInfo) -> Request {
        let (count, milli) = gpu_request(task, node);
        Request { cpu: task.resreq.milli_cpu, count, milli }
    }

    /// Σ milli-cards.
    pub fn gpu_total(&self) -> u32 {
        self.count * self.milli
    }

    /// Whether it asks for a fraction of one card.
    pub fn is_fraction(&self) -> bool {
        self.count == 1 && self.milli < MILLI
    }
}

/// A policy's raw score of a request on a node, 0–100.
pub type RawScore = fn(&Request, &NodeFree) -> f64;

/// A placement policy that is only a raw score (`dotprod`, `gpu-packing`, `bestfit`): its
/// node order is the raw score times `<name>.weight`, its only argument (1; not negative).
#[derive(Clone, Debug)]
pub struct ScorePolicy {
    name: &'static str,
    weight: f64,
    raw: RawScore,
}

/// Checks `<name>.weight` and returns the builder of a [`ScorePolicy`].
pub fn policy_factory(
    name: &'static str,
    opt: &PluginOption,
    raw: RawScore,
) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let key = format!("{name}.weight");
    let mut weight = 1.0;
    for (k, v) in &opt.arguments {
        if *k != key {
            return Err(ArgsError(format!("unknown field `{k}`, expected `{key}`")));
        }
        weight = v.as_f64().ok_or_else(|| ArgsError(format!("argument {key:?}: {v} is not a number")))?;
    }
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument {key:?}: {weight} is negative")));
    }
    Ok(Arc::new(move || Box::new(ScorePolicy { name, weight, raw }) as Box<dyn Plugin>))
}

impl Plugin for ScorePolicy {
    fn name(&self) -> &'static str {
        self.name
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
        (self.raw)(&Request::of(snap.task(task), n), &NodeFree::of(n)) * self.weight
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for ScorePolicy {
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
    use serde_json::json;
    use volcano_testkit::fixtures::plugin_option;

    use super::*;

    fn opt(args: serde_json::Value) -> PluginOption {
        plugin_option("bestfit", args)
    }

    #[test]
    fn a_policy_takes_its_weight_and_nothing_else() {
        let raw: RawScore = |_, _| 1.0;
        assert!(policy_factory("bestfit", &opt(json!({"bestfit.weight": 2})), raw).is_ok());
        let unknown = policy_factory("bestfit", &opt(json!({"dotprod.weight": 2})), raw).err().unwrap();
        assert!(unknown.0.contains("unknown field `dotprod.weight`"), "{}", unknown.0);
        let negative = policy_factory("bestfit", &opt(json!({"bestfit.weight": -1})), raw).err().unwrap();
        assert!(negative.0.contains("is negative"), "{}", negative.0);
        let text = policy_factory("bestfit", &opt(json!({"bestfit.weight": "x"})), raw).err().unwrap();
        assert!(text.0.contains("is not a number"), "{}", text.0);
    }
}
