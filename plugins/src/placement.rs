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

use smallvec::SmallVec;
use volcano_framework::device::{gpu_free, gpu_request, MILLI};
use volcano_framework::{NodeInfo, TaskInfo};

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
