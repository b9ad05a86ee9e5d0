//! The standard cases of `volcano-rs bench` (docs/performance.md): each names a cluster built
//! by [`crate::workloads`], [`crate::hetero`] or [`crate::preempt`], its size and its
//! scheduler configuration.

use crate::workloads::BENCH_CONF;
use crate::{hetero, preempt, topo};

/// A standard case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// gpu-1k, gang-6400.
    Fill1k,
    /// gpu-5k, gang-32000.
    Fill5k,
    /// gpu-10k, gang-64000.
    Fill10k,
    /// gpu-5k, gang-80000.
    Backlog5k,
    /// gpu-5k with gang-30000 running, then 2,000 new pending pods.
    Steady5k,
    /// gpu-5k with hostname labels, 20,000 running pods with app labels, gang-10000 pending
    /// with inter-pod (anti-)affinity and topology spread.
    Spread5k,
    /// `hetero-N` with N = 1,000: four node types, taints, 4 running and 8 pending pods per
    /// node in hundreds of shapes ([`crate::hetero`]).
    Hetero1k,
    /// `hetero-N` with N = 5,000.
    Hetero5k,
    /// `hetero-N` with N = 10,000.
    Hetero10k,
    /// The warm cycle after `hetero-10k`'s first, with nothing changed.
    Hetero10kIdle,
    /// `preempt-N` with N = 1,000: half the cluster held by low-priority gangs, high-priority
    /// gangs in ten hierarchical capacity queues ([`crate::preempt`]).
    Preempt1k,
    /// `preempt-N` with N = 5,000.
    Preempt5k,
    /// `preempt-N` with N = 10,000.
    Preempt10k,
    /// `topo-N` with N = 10,000: a three-tier HyperNode tree, half the GPUs busy in a
    /// fragmented pattern, a backlog of hard, soft and unconstrained jobs ([`crate::topo`]).
    Topo10k,
    /// `preempt-10k` with gang-aware eviction: actions `enqueue, allocate, gangpreempt,
    /// gangreclaim, backfill`.
    GangPreempt10k,
    /// `preempt-shared-N` with N = 5,000: two GPU models, victims of one node each in the
    /// leaves whose own high-priority gangs preempt them ([`crate::preempt::shared_objects`]).
    PreemptShared5k,
    /// `preempt-shared-N` with N = 10,000.
    PreemptShared10k,
    /// The cycle right after `hetero-10k`'s first, once its binds are applied: the pods
    /// placed changed the cluster, so the gangs the first cycle rolled back are all tried
    /// again although nothing they could use changed.
    HeteroRollback10k,
}

impl Case {
    /// Every case, in the order of docs/performance.md.
    pub const ALL: [Case; 18] = [
        Case::Fill1k,
        Case::Fill5k,
        Case::Fill10k,
        Case::Backlog5k,
        Case::Steady5k,
        Case::Spread5k,
        Case::Hetero1k,
        Case::Hetero5k,
        Case::Hetero10k,
        Case::Hetero10kIdle,
        Case::Preempt1k,
        Case::Preempt5k,
        Case::Preempt10k,
        Case::Topo10k,
        Case::GangPreempt10k,
        Case::PreemptShared5k,
        Case::PreemptShared10k,
        Case::HeteroRollback10k,
    ];

    /// The case's name.
    pub fn name(self) -> &'static str {
        match self {
            Case::Fill1k => "fill-1k",
            Case::Fill5k => "fill-5k",
            Case::Fill10k => "fill-10k",
            Case::Backlog5k => "backlog-5k",
            Case::Steady5k => "steady-5k",
            Case::Spread5k => "spread-5k",
            Case::Hetero1k => "hetero-1k",
            Case::Hetero5k => "hetero-5k",
            Case::Hetero10k => "hetero-10k",
            Case::Hetero10kIdle => "hetero-10k-idle",
            Case::Preempt1k => "preempt-1k",
            Case::Preempt5k => "preempt-5k",
            Case::Preempt10k => "preempt-10k",
            Case::Topo10k => "topo-10k",
            Case::GangPreempt10k => "gang-preempt-10k",
            Case::PreemptShared5k => "preempt-shared-5k",
            Case::PreemptShared10k => "preempt-shared-10k",
            Case::HeteroRollback10k => "hetero-rollback-10k",
        }
    }

    /// The case with this name.
    pub fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Number of nodes.
    pub fn nodes(self) -> usize {
        match self {
            Case::Fill1k | Case::Hetero1k | Case::Preempt1k => 1_000,
            Case::Fill5k
            | Case::Backlog5k
            | Case::Steady5k
            | Case::Spread5k
            | Case::Hetero5k
            | Case::Preempt5k
            | Case::PreemptShared5k => 5_000,
            Case::Fill10k
            | Case::Hetero10k
            | Case::Hetero10kIdle
            | Case::Preempt10k
            | Case::Topo10k
            | Case::GangPreempt10k
            | Case::PreemptShared10k
            | Case::HeteroRollback10k => 10_000,
        }
    }

    /// Pending pods of the measured session (`P` of `gang-P`).
    pub fn pending_pods(self) -> usize {
        match self {
            Case::Fill1k => 6_400,
            Case::Fill5k => 32_000,
            Case::Fill10k => 64_000,
            Case::Backlog5k => 80_000,
            Case::Steady5k => 2_000,
            Case::Spread5k => 10_000,
            // 8 per node (the pending gangs of hetero-N and preempt-N).
            Case::Hetero1k | Case::Hetero5k | Case::Hetero10k | Case::Hetero10kIdle | Case::HeteroRollback10k => {
                hetero::PENDING_PER_NODE * self.nodes()
            }
            Case::Preempt1k
            | Case::Preempt5k
            | Case::Preempt10k
            | Case::GangPreempt10k
            | Case::PreemptShared5k
            | Case::PreemptShared10k => 8 * self.nodes(),
            Case::Topo10k => {
                (0..topo::pending_jobs(self.nodes())).map(|j| (topo::JOB_GPUS[j % 7] / topo::POD_GPUS) as usize).sum()
            }
        }
    }

    /// Pods already running at the start of the case that no earlier session of the bench
    /// placed (`spread-5k`'s 20,000, 4 per node in `hetero-N`, 8 on half the nodes in
    /// `preempt-N`; steady-5k's running pods are placed by the bench).
    pub fn running_pods(self) -> usize {
        match self {
            Case::Spread5k => 20_000,
            Case::Hetero1k | Case::Hetero5k | Case::Hetero10k | Case::Hetero10kIdle | Case::HeteroRollback10k => {
                hetero::RUNNING_PER_NODE * self.nodes()
            }
            // Half the nodes, 8 pods each.
            Case::Preempt1k
            | Case::Preempt5k
            | Case::Preempt10k
            | Case::GangPreempt10k
            | Case::PreemptShared5k
            | Case::PreemptShared10k => 4 * self.nodes(),
            Case::Topo10k => (0..self.nodes()).filter(|i| topo::busy(*i) > 0).count(),
            _ => 0,
        }
    }

    /// Whether the case measures warm cycles, each from a copy of a snapshot kept between
    /// cycles (`steady-5k`, `hetero-10k-idle`), and how many.
    pub fn warm_cycles(self) -> Option<usize> {
        match self {
            Case::Steady5k => Some(20),
            Case::Hetero10kIdle => Some(10),
            // One: the first cycle after the binds is the one measured (the next would skip
            // what this one tried again).
            Case::HeteroRollback10k => Some(1),
            _ => None,
        }
    }

    /// The case's scheduler configuration: [`BENCH_CONF`], [`preempt::PREEMPT_CONF`] for
    /// the preemption cases, [`preempt::PREEMPT_SHARED_CONF`] for `preempt-shared-N`,
    /// [`preempt::GANG_PREEMPT_CONF`] for `gang-preempt-10k`,
    /// [`topo::TOPO_CONF`] for `topo-10k`.
    pub fn conf(self) -> &'static str {
        match self {
            Case::Preempt1k | Case::Preempt5k | Case::Preempt10k | Case::PreemptShared5k | Case::PreemptShared10k => {
                preempt::PREEMPT_CONF
            }
            Case::Topo10k => topo::TOPO_CONF,
            Case::GangPreempt10k => preempt::GANG_PREEMPT_CONF,
            _ => BENCH_CONF,
        }
    }
}
