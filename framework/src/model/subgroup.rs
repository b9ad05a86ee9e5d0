//! Sub-groups of a job (Volcano's sub-jobs): `spec.subGroupPolicy` of a PodGroup splits
//! the job's pods into gangs of their own.
//!
//! A pod belongs to the first policy whose `labelSelector` it matches (no selector: any
//! pod) and on which it has a non-empty value for every `matchLabelKeys` key; its sub-group
//! is the policy's group of pods with the same values. A policy without `matchLabelKeys`
//! groups no pod (as in Volcano). The pods of no policy form the job's "rest" (Volcano's
//! default sub-job).
//!
//! A sub-group is ready when `subGroupSize` of its pods (default 1) are placed (pipelined:
//! placed or pipelined); the rest when one is. A job is valid only if each policy has at
//! least `minSubGroups` sub-groups (default 0), and ready (pipelined) only if at least
//! `minSubGroups` of them are ready (pipelined).
//!
//! The snapshot derives a job's sub-groups when it takes its pods in
//! ([`SubGroups::join`]) and keeps each sub-group's counts of pods per status in step with
//! the job's; a job without policies has none ([`crate::JobInfo::sub_groups`] is `None`)
//! and costs nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use volcano_api::crd::{NetworkTopologySpec, PodGroupSpec, SubGroupPolicySpec};

use super::labels::Selector;
use super::{TaskInfo, TaskStatus};

/// One `spec.subGroupPolicy` entry, checked once.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    /// `name`.
    pub name: String,
    /// `subGroupSize` (default 1): a sub-group's gang minimum.
    pub size: i32,
    /// `minSubGroups` (default 0): how many of the policy's sub-groups the job needs.
    pub min_sub_groups: i32,
    /// `networkTopology`: each sub-group within one HyperNode.
    pub network_topology: Option<NetworkTopologySpec>,
    /// `labelSelector`: `None` when absent (any pod); an invalid one selects no pod.
    selector: Option<Result<Selector, String>>,
    /// `matchLabelKeys`.
    keys: Vec<String>,
}

impl Policy {
    /// The policy as the PodGroup gives it.
    pub fn new(spec: &SubGroupPolicySpec) -> Policy {
        Policy {
            name: spec.name.clone(),
            size: spec.sub_group_size.unwrap_or(1),
            min_sub_groups: spec.min_sub_groups.unwrap_or(0),
            network_topology: spec.network_topology.clone(),
            selector: spec.label_selector.as_ref().map(Selector::new),
            keys: spec.match_label_keys.clone().unwrap_or_default(),
        }
    }

    /// Why the `labelSelector` selects no pod, when it is invalid.
    pub fn selector_error(&self) -> Option<&str> {
        match &self.selector {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// The values of the `matchLabelKeys` on a pod of this policy, in key order; `None` when
    /// the pod is not this policy's (the selector does not match it, a key is missing or
    /// empty, or the policy has no keys).
    pub fn match_values(&self, labels: Option<&BTreeMap<String, String>>) -> Option<Vec<String>> {
        match &self.selector {
            Some(Ok(s)) if !s.matches(labels) => return None,
            Some(Err(_)) => return None,
            _ => {}
        }
        if self.keys.is_empty() {
            return None;
        }
        let labels = labels?;
        self.keys.iter().map(|k| labels.get(k).filter(|v| !v.is_empty()).cloned()).collect()
    }
}

/// A group's pods per status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Pods in the group.
    pub tasks: u32,
    /// Pods per status.
    pub status_counts: [u32; TaskStatus::COUNT],
    /// Pending pods with an empty request.
    pub pending_best_effort: u32,
}

impl GroupCounts {
    /// Counts the task's status in (`sign` 1) or out (`sign` -1).
    pub(crate) fn count(&mut self, task: &TaskInfo, sign: i32) {
        let c = &mut self.status_counts[task.status as usize];
        *c = (*c as i32 + sign) as u32;
        if task.status == TaskStatus::Pending && task.best_effort {
            self.pending_best_effort = (self.pending_best_effort as i32 + sign) as u32;
        }
    }

    /// Pods with this status.
    pub fn count_of(&self, s: TaskStatus) -> i32 {
        self.status_counts[s as usize] as i32
    }

    /// Bound + Binding + Running + Allocated + Succeeded.
    pub fn ready_task_num(&self) -> i32 {
        [TaskStatus::Bound, TaskStatus::Binding, TaskStatus::Running, TaskStatus::Allocated, TaskStatus::Succeeded]
            .iter()
            .map(|s| self.count_of(*s))
            .sum()
    }

    /// Ready + pending best-effort ≥ `min`.
    pub fn is_ready(&self, min: i32) -> bool {
        self.ready_task_num() + self.pending_best_effort as i32 >= min
    }

    /// Pipelined + ready + pending best-effort ≥ `min`.
    pub fn is_pipelined(&self, min: i32) -> bool {
        self.count_of(TaskStatus::Pipelined) + self.ready_task_num() + self.pending_best_effort as i32 >= min
    }
}

/// One sub-group: the pods of a policy with the same `matchLabelKeys` values.
#[derive(Clone, Debug, PartialEq)]
pub struct SubGroupInfo {
    /// The policy (index into [`SubGroups::policies`]).
    pub policy: u32,
    /// `<policy name>-<values joined by ->` (Volcano's sub-job id within its job).
    pub name: Arc<str>,
    /// The first value as a whole number (0 when it is not one): sub-groups are placed in
    /// this order, as in Volcano.
    pub match_index: i64,
    /// The policy's `subGroupSize`.
    pub min_available: i32,
    /// Its pods.
    pub counts: GroupCounts,
}

/// The sub-groups of a job (see the module documentation). Its `Debug` text lists the
/// sub-groups with pods by name, so that two derivations of the same pods (a build, and an
/// update that saw them come and go) print alike.
#[derive(Clone)]
pub struct SubGroups {
    /// The policies, in the PodGroup's order.
    pub policies: Arc<[Policy]>,
    /// The sub-groups, in the order their first pod came; one whose pods have all gone
    /// stays, empty, and counts for nothing.
    pub groups: Vec<SubGroupInfo>,
    /// The job's pods in no sub-group (Volcano's default sub-job, gang minimum 1).
    pub rest: GroupCounts,
    /// The sub-group of each (policy, values).
    index: HashMap<(u32, Box<[String]>), u32>,
}

impl std::fmt::Debug for SubGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut live: Vec<&SubGroupInfo> = self.live().map(|(_, g)| g).collect();
        live.sort_by(|a, b| a.name.cmp(&b.name));
        f.debug_struct("SubGroups")
            .field("policies", &self.policies)
            .field("groups", &live)
            .field("rest", &self.rest)
            .finish()
    }
}

impl SubGroups {
    /// The job's sub-groups, none yet: `None` when the PodGroup has no policy.
    pub fn of(spec: &PodGroupSpec) -> Option<Box<SubGroups>> {
        let policies = spec.sub_group_policy.as_deref().filter(|p| !p.is_empty())?;
        Some(Box::new(SubGroups {
            policies: policies.iter().map(Policy::new).collect(),
            groups: Vec::new(),
            rest: GroupCounts::default(),
            index: HashMap::new(),
        }))
    }

    /// Takes a pod with these labels in: its sub-group (made when it is the first), or `None`
    /// for the rest. Its status is counted separately ([`GroupCounts::count`]).
    pub(crate) fn join(&mut self, labels: Option<&BTreeMap<String, String>>) -> Option<u32> {
        let found = self.policies.iter().enumerate().find_map(|(i, p)| p.match_values(labels).map(|v| (i as u32, v)));
        let Some((policy, values)) = found else {
            self.rest.tasks += 1;
            return None;
        };
        let key = (policy, values.into_boxed_slice());
        let g = match self.index.get(&key) {
            Some(g) => *g,
            None => {
                let p = &self.policies[policy as usize];
                let g = self.groups.len() as u32;
                self.groups.push(SubGroupInfo {
                    policy,
                    name: format!("{}-{}", p.name, key.1.join("-")).into(),
                    match_index: key.1.first().and_then(|v| v.parse().ok()).unwrap_or(0),
                    min_available: p.size,
                    counts: GroupCounts::default(),
                });
                self.index.insert(key, g);
                g
            }
        };
        self.groups[g as usize].counts.tasks += 1;
        Some(g)
    }

    /// Takes a pod out of its group (its status already counted out).
    pub(crate) fn leave(&mut self, g: Option<u32>) {
        self.counts_mut(g).tasks -= 1;
    }

    /// The pods of a sub-group, or of the rest (`None`).
    pub fn counts(&self, g: Option<u32>) -> &GroupCounts {
        match g {
            Some(g) => &self.groups[g as usize].counts,
            None => &self.rest,
        }
    }

    pub(crate) fn counts_mut(&mut self, g: Option<u32>) -> &mut GroupCounts {
        match g {
            Some(g) => &mut self.groups[g as usize].counts,
            None => &mut self.rest,
        }
    }

    /// The gang minimum of a sub-group, or of the rest (1).
    pub fn min_available(&self, g: Option<u32>) -> i32 {
        g.map_or(1, |g| self.groups[g as usize].min_available)
    }

    /// Whether a sub-group (or the rest) has its gang minimum placed.
    pub fn group_ready(&self, g: Option<u32>) -> bool {
        self.counts(g).is_ready(self.min_available(g))
    }

    /// Whether a sub-group (or the rest) has its gang minimum placed or pipelined.
    pub fn group_pipelined(&self, g: Option<u32>) -> bool {
        self.counts(g).is_pipelined(self.min_available(g))
    }

    /// The sub-groups with pods, and their indices.
    pub fn live(&self) -> impl Iterator<Item = (u32, &SubGroupInfo)> + '_ {
        self.groups.iter().enumerate().filter(|(_, g)| g.counts.tasks > 0).map(|(i, g)| (i as u32, g))
    }

    /// The name of a sub-group, for reasons (`None`: the job's other pods).
    pub fn name(&self, g: Option<u32>) -> String {
        match g {
            Some(g) => format!("sub-group {}", self.groups[g as usize].name),
            None => "the pods in no sub-group".to_string(),
        }
    }

    /// The first policy with fewer sub-groups than its `minSubGroups` (Volcano's
    /// `CheckSubJobValid`), with how many it has.
    pub fn invalid_policy(&self) -> Option<(&Policy, i32)> {
        self.policies.iter().enumerate().find_map(|(i, p)| {
            let n = self.live().filter(|(_, g)| g.policy == i as u32).count() as i32;
            (n < p.min_sub_groups).then_some((p, n))
        })
    }

    /// Whether every policy has `minSubGroups` sub-groups satisfying `cond`.
    fn enough(&self, cond: impl Fn(&SubGroupInfo) -> bool) -> bool {
        self.policies.iter().enumerate().all(|(i, p)| {
            p.min_sub_groups <= 0
                || self.live().filter(|(_, g)| g.policy == i as u32 && cond(g)).count() as i32 >= p.min_sub_groups
        })
    }

    /// Every policy has `minSubGroups` ready sub-groups (Volcano's `CheckSubJobReady`).
    pub fn ready(&self) -> bool {
        self.enough(|g| g.counts.is_ready(g.min_available))
    }

    /// Every policy has `minSubGroups` pipelined sub-groups (`CheckSubJobPipelined`).
    pub fn pipelined(&self) -> bool {
        self.enough(|g| g.counts.is_pipelined(g.min_available))
    }

    /// The fewest pods that must still be placed for [`SubGroups::ready`]: per policy, the
    /// missing sub-groups' missing pods, the sub-groups closest to ready first.
    pub fn pods_needed(&self) -> i32 {
        let mut total = 0;
        for (i, p) in self.policies.iter().enumerate() {
            let mut short: Vec<i32> = Vec::new();
            let mut ready = 0;
            for (_, g) in self.live().filter(|(_, g)| g.policy == i as u32) {
                let have = g.counts.ready_task_num() + g.counts.pending_best_effort as i32;
                if have >= g.min_available {
                    ready += 1;
                } else {
                    short.push(g.min_available - have);
                }
            }
            let missing = (p.min_sub_groups - ready).max(0) as usize;
            short.sort_unstable();
            total += short.iter().take(missing).sum::<i32>();
        }
        total
    }
}

#[cfg(test)]
mod tests;
