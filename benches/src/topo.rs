//! The network topology case of issue 37 (`topo-10k`; docs/performance.md): cluster
//! `gpu-N` under a three-tier HyperNode tree (8 nodes per leaf switch, 16 leaves per spine,
//! one core), half of its GPUs busy in a fragmented pattern, and a backlog of jobs of 8 to
//! 512 GPUs, a third hard-constrained to tier 1 or 2, a third soft, the rest unconstrained.
//!
//! Everything is a function of an index, so that the text of docs/performance.md is enough
//! to build the same objects. [`check`] verifies the placements against the tree without
//! the scheduler's code: every constrained job placed within its tier, and no hard job left
//! waiting while a HyperNode of its tier has room for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};
use volcano_api::crd::{NetworkTopologySpec, PodGroup, PodGroupSpec};
use volcano_api::topology::{ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec};
use volcano_framework::{ClusterObjects, Effect};

use crate::workloads::{self, q, time, SCHEDULER_NAME};

/// Nodes per leaf switch (tier 1).
pub const LEAF_NODES: usize = 8;
/// Leaves per spine (tier 2).
pub const SPINE_LEAVES: usize = 16;
/// GPUs busy on node `i`: `BUSY[(i + 3·(i div 8) + 5·(i div 128)) mod 8]` (mean 4 of 8).
pub const BUSY: [u32; 8] = [8, 0, 4, 8, 2, 0, 6, 4];
/// GPUs of pending job `j`: `JOB_GPUS[j mod 7]`.
pub const JOB_GPUS: [u32; 7] = [8, 16, 32, 64, 128, 256, 512];
/// GPUs per pending pod (half a node).
pub const POD_GPUS: u32 = 4;
/// Pending jobs per 1,000 nodes.
pub const JOBS_PER_1K: usize = 28;

/// The scheduler configuration of `topo-N`: the standard one with `network-topology-aware`
/// packing GPUs.
pub const TOPO_CONF: &str = concat!(
    crate::workloads::bench_conf!(),
    "  - name: network-topology-aware\n    arguments:\n      hypernode.binpack.resources: nvidia.com/gpu\n"
);

/// GPUs busy on node `i`.
pub fn busy(i: usize) -> u32 {
    BUSY[(i + 3 * (i / LEAF_NODES) + 5 * (i / (LEAF_NODES * SPINE_LEAVES))) % 8]
}

/// A job's constraint: `j mod 3 = 0` hard (tier 1 up to 32 GPUs, else tier 2), `1` soft,
/// `2` none.
pub fn constraint(j: usize) -> Option<NetworkTopologySpec> {
    let gpus = JOB_GPUS[j % 7];
    match j % 3 {
        0 => Some(NetworkTopologySpec {
            mode: Some("hard".into()),
            highest_tier_allowed: Some(if gpus <= 32 { 1 } else { 2 }),
            highest_tier_name: None,
        }),
        1 => {
            Some(NetworkTopologySpec { mode: Some("soft".into()), highest_tier_allowed: None, highest_tier_name: None })
        }
        _ => None,
    }
}

fn exact(type_: &str, name: String) -> MemberSpec {
    MemberSpec {
        type_: type_.into(),
        selector: MemberSelector { exact_match: Some(ExactMatch { name }), ..Default::default() },
    }
}

fn hyper_node(name: String, tier: i64, tier_name: &str, members: Vec<MemberSpec>) -> HyperNode {
    HyperNode::new(&name, HyperNodeSpec { tier, tier_name: Some(tier_name.into()), members })
}

/// The HyperNodes of `topo-N`: `leaf-{l:04}` (tier 1, `leaf`) holding nodes `8l … 8l+7`,
/// `spine-{s:03}` (tier 2, `spine`) holding leaves `16s … 16s+15` (the last spine fewer),
/// and `core` (tier 3, `core`) holding every spine.
pub fn hyper_nodes(nodes: usize) -> Vec<HyperNode> {
    let leaves = nodes.div_ceil(LEAF_NODES);
    let spines = leaves.div_ceil(SPINE_LEAVES);
    let mut out = Vec::with_capacity(leaves + spines + 1);
    for l in 0..leaves {
        let members = (l * LEAF_NODES..((l + 1) * LEAF_NODES).min(nodes))
            .map(|i| exact("Node", format!("node-{i:05}")))
            .collect();
        out.push(hyper_node(format!("leaf-{l:04}"), 1, "leaf", members));
    }
    for s in 0..spines {
        let members = (s * SPINE_LEAVES..((s + 1) * SPINE_LEAVES).min(leaves))
            .map(|l| exact("HyperNode", format!("leaf-{l:04}")))
            .collect();
        out.push(hyper_node(format!("spine-{s:03}"), 2, "spine", members));
    }
    out.push(hyper_node(
        "core".into(),
        3,
        "core",
        (0..spines).map(|s| exact("HyperNode", format!("spine-{s:03}"))).collect(),
    ));
    out
}

fn pod(name: String, group: &str, gpus: u32, node: Option<String>, created: i64) -> Pod {
    let request: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q(&(12 * gpus).to_string())),
        ("memory".to_string(), q(&format!("{}Gi", 96 * gpus))),
        ("nvidia.com/gpu".to_string(), q(&gpus.to_string())),
    ]
    .into();
    let spec = PodSpec {
        scheduler_name: Some(SCHEDULER_NAME.into()),
        node_name: node,
        containers: vec![workloads::container(request)],
        ..Default::default()
    };
    workloads::member_pod(name.clone(), "bench".into(), format!("topo-{name}"), Some(group), time(created), spec)
}

fn pod_group(
    name: &str,
    queue: &str,
    pods: usize,
    gpus: u32,
    running: bool,
    nt: Option<NetworkTopologySpec>,
    created: i64,
) -> PodGroup {
    let per = gpus as usize;
    let min_resources: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q(&(12 * per * pods).to_string())),
        ("memory".to_string(), q(&format!("{}Gi", 96 * per * pods))),
        ("nvidia.com/gpu".to_string(), q(&(per * pods).to_string())),
    ]
    .into();
    let spec = PodGroupSpec {
        min_member: pods as i32,
        queue: Some(queue.into()),
        min_resources: Some(min_resources),
        network_topology: nt,
        ..Default::default()
    };
    workloads::pod_group(name, "bench", format!("topo-pg-{name}"), spec, time(created), running.then_some(pods as i32))
}

/// Running job `busy-{i:05}`: one pod on node `i` with [`busy`]`(i)` GPUs (none when 0),
/// queue `q{i mod 4}`.
fn busy_job(i: usize) -> Option<workloads::Job> {
    let gpus = busy(i);
    if gpus == 0 {
        return None;
    }
    let name = format!("busy-{i:05}");
    let created = 1_650_000_000 + i as i64;
    let pods = vec![pod(format!("{name}-0"), &name, gpus, Some(format!("node-{i:05}")), created)];
    Some(workloads::Job { pod_group: pod_group(&name, &format!("q{}", i % 4), 1, gpus, true, None, created), pods })
}

/// Pending job `topo-{j:05}`: [`JOB_GPUS`]`[j mod 7] / 4` pods of 4 GPUs, queue `q{j mod 4}`,
/// `minMember` all of them, constraint [`constraint`]`(j)`.
pub fn pending_job(j: usize) -> workloads::Job {
    let pods = (JOB_GPUS[j % 7] / POD_GPUS) as usize;
    let name = format!("topo-{j:05}");
    let created = 1_700_000_000 + j as i64;
    let members = (0..pods).map(|k| pod(format!("{name}-{k}"), &name, POD_GPUS, None, created)).collect();
    workloads::Job {
        pod_group: pod_group(&name, &format!("q{}", j % 4), pods, POD_GPUS, false, constraint(j), created),
        pods: members,
    }
}

/// Number of pending jobs of `topo-N`.
pub fn pending_jobs(nodes: usize) -> usize {
    JOBS_PER_1K * nodes / 1000
}

/// The objects of `topo-N`.
pub fn objects(nodes: usize) -> ClusterObjects {
    let mut jobs: Vec<workloads::Job> = (0..nodes).filter_map(busy_job).collect();
    jobs.extend((0..pending_jobs(nodes)).map(pending_job));
    let mut o = workloads::objects(nodes, jobs);
    o.hyper_nodes = hyper_nodes(nodes).into_iter().map(Arc::new).collect();
    o
}

/// What [`check`] found.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TopologyReport {
    /// Hard-constrained jobs pending at the start, and placed.
    pub hard_jobs: usize,
    /// Of those, placed (every pod bound or pipelined).
    pub hard_placed: usize,
    /// Of the placed, within their allowed tier (must be all).
    pub hard_within_tier: usize,
    /// Hard jobs left waiting although a HyperNode of their tier had room for them after
    /// the cycle, for no reason but topology (must be 0).
    pub hard_waiting_that_fit: usize,
    /// Hard jobs left waiting with room in their tier because their queue refused them (its
    /// deserved share reached).
    pub hard_waiting_for_queue: usize,
    /// Soft jobs pending at the start, and placed.
    pub soft_jobs: usize,
    /// Of those, placed.
    pub soft_placed: usize,
    /// Placed soft jobs by the tier of the lowest HyperNode holding them (4 = the whole
    /// cluster).
    pub soft_by_tier: BTreeMap<u32, usize>,
}

/// Checks a cycle of `topo-N` against the tree, without the scheduler's code.
pub fn check(objects: &ClusterObjects, effects: &[Effect]) -> (TopologyReport, Vec<String>) {
    let nodes = objects.nodes.len();
    let leaf_of = |n: usize| n / LEAF_NODES;
    let spine_of = |n: usize| n / (LEAF_NODES * SPINE_LEAVES);
    let index = |name: &str| -> usize { name.trim_start_matches("node-").parse().expect("a node-NNNNN name") };
    // Free GPUs per node after the cycle.
    let mut free: Vec<i64> = (0..nodes).map(|i| 8 - busy(i) as i64).collect();
    let mut placed: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    // Why each job waits (its PodGroup's condition).
    let mut why: BTreeMap<String, String> = BTreeMap::new();
    for e in effects {
        if let Effect::PodGroupStatus { pod_group, status } = e {
            let message = status.conditions.iter().filter_map(|c| c.message.clone()).collect::<Vec<_>>().join("; ");
            why.insert(pod_group.to_string().trim_start_matches("bench/").to_string(), message);
        }
    }
    for e in effects {
        let (pod, node) = match e {
            Effect::Bind { pod, node, .. } => (pod, node),
            Effect::Pipeline { pod, node, .. } => (pod, node),
            _ => continue,
        };
        let name = pod.to_string();
        let Some(job) = name.strip_prefix("bench/").and_then(|n| n.rsplit_once('-')).map(|(j, _)| j.to_string()) else {
            continue;
        };
        let n = index(node.as_ref());
        free[n] -= POD_GPUS as i64;
        placed.entry(job).or_default().push(n);
    }
    let tier_of = |ns: &[usize]| -> u32 {
        let first = ns[0];
        if ns.iter().all(|n| leaf_of(*n) == leaf_of(first)) {
            1
        } else if ns.iter().all(|n| spine_of(*n) == spine_of(first)) {
            2
        } else {
            3
        }
    };
    // Room for `pods` pods of 4 GPUs on the nodes of a HyperNode.
    let room = |range: std::ops::Range<usize>| -> i64 { range.map(|n| free[n].max(0) / POD_GPUS as i64).sum() };
    let mut report = TopologyReport::default();
    let mut failures = Vec::new();
    for j in 0..pending_jobs(nodes) {
        let job = format!("topo-{j:05}");
        let pods = (JOB_GPUS[j % 7] / POD_GPUS) as usize;
        let at = placed.get(&job).filter(|ns| ns.len() == pods);
        match constraint(j) {
            Some(nt) if nt.mode.as_deref() == Some("hard") => {
                let limit = nt.highest_tier_allowed.unwrap_or(0) as u32;
                report.hard_jobs += 1;
                match at {
                    Some(ns) => {
                        report.hard_placed += 1;
                        if tier_of(ns) <= limit {
                            report.hard_within_tier += 1;
                        } else {
                            failures.push(format!("{job}: hard tier {limit} job placed across tier {}", tier_of(ns)));
                        }
                    }
                    None => {
                        let size = if limit == 1 { LEAF_NODES } else { LEAF_NODES * SPINE_LEAVES };
                        let domains = nodes.div_ceil(size);
                        let fits = (0..domains).any(|d| room(d * size..((d + 1) * size).min(nodes)) >= pods as i64);
                        let message = why.get(&job).map(String::as_str).unwrap_or("");
                        if fits && message.contains("Origin reason is: queue ") {
                            report.hard_waiting_for_queue += 1;
                        } else if fits {
                            report.hard_waiting_that_fit += 1;
                            failures.push(format!(
                                "{job}: waits although a tier-{limit} HyperNode has room for its {pods} pods ({message})"
                            ));
                        }
                    }
                }
            }
            Some(_) => {
                report.soft_jobs += 1;
                if let Some(ns) = at {
                    report.soft_placed += 1;
                    *report.soft_by_tier.entry(tier_of(ns)).or_default() += 1;
                }
            }
            None => {}
        }
    }
    // A gang is placed whole or not at all.
    for (job, ns) in &placed {
        let Some(j) = job.strip_prefix("topo-").and_then(|j| j.parse::<usize>().ok()) else { continue };
        if ns.len() != (JOB_GPUS[j % 7] / POD_GPUS) as usize {
            failures.push(format!("{job}: {} of its pods placed", ns.len()));
        }
    }
    (report, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objects_follow_the_spec() {
        let o = objects(1000);
        assert_eq!(o.hyper_nodes.len(), 125 + 8 + 1);
        let busy_gpus: u32 = (0..1000).map(busy).sum();
        assert_eq!(busy_gpus, 4000, "half of the GPUs busy");
        assert_eq!(pending_jobs(1000), 28);
        let j0 = pending_job(0);
        assert_eq!(j0.pods.len(), 2);
        assert_eq!(j0.pod_group.spec.network_topology.as_ref().unwrap().highest_tier_allowed, Some(1));
        let j6 = pending_job(6);
        assert_eq!(
            (j6.pods.len(), j6.pod_group.spec.network_topology.as_ref().unwrap().highest_tier_allowed),
            (128, Some(2))
        );
        assert!(pending_job(2).pod_group.spec.network_topology.is_none());
        let snap = volcano_framework::Snapshot::build(&o, &[SCHEDULER_NAME]).unwrap();
        let topo = snap.topology();
        assert!(topo.errors().is_empty(), "{:?}", topo.errors());
        assert_eq!(topo.tiers(), [1, 2, 3]);
        assert_eq!(topo.get(topo.by_name("spine-000").unwrap()).nodes.len(), 128);
        assert_eq!(topo.get(topo.by_name("spine-007").unwrap()).nodes.len(), 104);
    }
}
