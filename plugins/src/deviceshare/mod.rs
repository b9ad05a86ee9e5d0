//! The `deviceshare` plugin: GPU cards as devices (Volcano's `deviceshare`, spec §3.12).
//!
//! The snapshot accounts each node's cards and picks a pod's cards when it is placed
//! ([`volcano_framework::device`]); this plugin is the filter and the optional score:
//!
//! - predicate: a pod that asks for cards of an enabled kind fits a node only where that many
//!   cards can take it now — a fraction of one card (`volcano.sh/gpu-memory`, or vGPU memory
//!   and cores) on one card, `k` whole cards on `k` idle cards. Kinds: GPU sharing
//!   (`deviceshare.GPUSharingEnable`, `volcano.sh/gpu-memory`), whole cards
//!   (`deviceshare.GPUNumberEnable`, `volcano.sh/gpu-number`) and HAMi vGPU
//!   (`deviceshare.VGPUEnable`, `volcano.sh/vgpu-*`). A pod asking for a kind that is not
//!   enabled is not filtered here (as in Volcano, its scalar request still is).
//! - score (`deviceshare.ScheduleWeight` > 0): with `deviceshare.SchedulePolicy: binpack`
//!   nodes whose chosen cards are fuller score higher, with `spread` nodes whose chosen cards
//!   are idle; the score is the policy's card score summed over the chosen cards, times the
//!   weight (Volcano's `GPUScore`).
//!
//! - cards: a vGPU pod goes to the fullest cards that fit, and under `spread` to the least
//!   shared ones (fewest pods; Volcano's vGPU order), which the node's score then reads.
//!
//! The chosen cards go on the pod as Volcano's annotations when it is bound.

use std::sync::Arc;

use smallvec::SmallVec;
use volcano_api::conf::PluginOption;
use volcano_framework::device::{used_milli, AskKind, GpuAsk, NodeGpus, MILLI};
use volcano_framework::status::{Code, Status};
use volcano_framework::{ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, Snapshot, TaskId};

mod args;
#[cfg(test)]
mod tests;

pub use args::{Args, Policy};

/// Configuration name.
pub const NAME: &str = "deviceshare";

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args = Args::parse(&opt.arguments)?;
    Ok(Arc::new(move || Box::new(DeviceShare { args: args.clone() }) as Box<dyn Plugin>))
}

/// The plugin for one session.
#[derive(Clone, Debug)]
pub struct DeviceShare {
    args: Args,
}

impl DeviceShare {
    /// A plugin with these arguments.
    pub fn new(args: Args) -> Self {
        DeviceShare { args }
    }

    fn enabled(&self, kind: AskKind) -> bool {
        match kind {
            AskKind::Memory => self.args.gpu_sharing,
            AskKind::Number => self.args.gpu_number,
            AskKind::Vgpu => self.args.vgpu,
        }
    }

    /// The cards the task gets on these GPUs: under `spread`, a vGPU pod's least shared
    /// cards (Volcano's order); otherwise the device layer's (the fullest that fit).
    fn cards(&self, gpus: &NodeGpus, ask: &GpuAsk) -> Option<SmallVec<[u16; 8]>> {
        if self.spreads(ask) {
            gpus.choose_least_shared(ask)
        } else {
            gpus.choose(ask)
        }
    }

    fn spreads(&self, ask: &GpuAsk) -> bool {
        self.args.policy == Policy::Spread && ask.kind == AskKind::Vgpu
    }
}

impl Plugin for DeviceShare {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        let choice =
            if self.args.policy == Policy::Spread && self.args.vgpu { Hooks::DEVICE_CHOICE } else { Hooks::empty() };
        if self.args.weight > 0 {
            Hooks::PREDICATE | Hooks::NODE_ORDER | choice
        } else {
            Hooks::PREDICATE | choice
        }
    }

    fn predicate(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        let Some(ask) = snap.task(task).gpu.filter(|a| self.enabled(a.kind)) else { return Ok(()) };
        let fail = |reason: String| Err(Status { code: Code::Unschedulable, reason, plugin: NAME });
        let n = snap.node(node);
        let Some(gpus) = n.gpus.as_deref().filter(|g| g.kind == ask.device_kind()) else {
            return fail(match ask.kind {
                AskKind::Vgpu => "node registers no vGPU cards".to_string(),
                _ => "node has no shareable GPU cards".to_string(),
            });
        };
        if gpus.fits(&ask) {
            return Ok(());
        }
        // Volcano's messages, without the node's name so that FitErrors counts them.
        fail(match ask.kind {
            AskKind::Memory => "GpuShare no enough gpu memory on this node".to_string(),
            AskKind::Number => "GpuNumber no enough gpu number on this node".to_string(),
            AskKind::Vgpu => "not enough gpu fitted on this node".to_string(),
        })
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let Some(ask) = snap.task(task).gpu.filter(|a| self.enabled(a.kind)) else { return 0.0 };
        let Some(gpus) = snap.node(node).gpus.as_deref() else { return 0.0 };
        let Some(cards) = self.cards(gpus, &ask) else { return 0.0 };
        card_score(gpus, &cards, self.args.policy) * self.args.weight as f64
    }

    fn choose_devices(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Option<SmallVec<[u16; 8]>> {
        let ask = snap.task(task).gpu.filter(|a| self.enabled(a.kind) && self.spreads(a))?;
        self.cards(snap.node(node).gpus.as_deref()?, &ask)
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

/// The policy's score of the chosen cards (Volcano's `GPUScore` summed): binpack the cards'
/// use in percent, spread 100 per idle card.
fn card_score(gpus: &NodeGpus, cards: &[u16], policy: Policy) -> f64 {
    cards
        .iter()
        .map(|&i| {
            let (dev, used) = (&gpus.devices[i as usize], &gpus.used[i as usize]);
            match policy {
                Policy::Binpack => used_milli(dev, used) as f64 * 100.0 / MILLI as f64,
                Policy::Spread => {
                    if used.pods == 0 {
                        100.0
                    } else {
                        0.0
                    }
                }
                Policy::None => 0.0,
            }
        })
        .sum()
}

impl Incremental for DeviceShare {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The predicate and score read the task's GPU ask (part of its shape) and the node's
        // cards, which change only when tasks join or leave the node.
        true
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        true
    }

    fn fit_only_narrows(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The predicate reads the node's cards, which only fill as pods join the node.
        true
    }
}
