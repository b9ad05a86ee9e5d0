//! Placing a job with sub-groups (`spec.subGroupPolicy`, see
//! [`volcano_framework::model::subgroup`]), as Volcano's `allocateForJob` and
//! `allocateForSubJob` do.
//!
//! Within the HyperNode the job is tried on (the whole cluster when the job has no network
//! topology constraint), the job's pending pods are split by group (each sub-group, and the
//! pods in none), and the groups are placed one at a time, best first: the sub-groups the
//! job needs to reach each policy's `minSubGroups` first, then those not ready yet, then
//! the one with the highest pod priority, then by match index (the first `matchLabelKeys`
//! value as a number), then by name. A group is placed until it is ready (its
//! `subGroupSize` pods placed; one pod for the pods in no sub-group); one whose policy has a
//! `networkTopology` (the pods in no sub-group: the job's) is placed within one HyperNode
//! of its own, searched as a job's is ([`crate::topology`]) below the job's HyperNode and
//! below the one its placed pods allow. A group that becomes ready with pods left goes back
//! among the groups; one that cannot become ready is rolled back and left for this action.
//! The placement stops once the job is ready, and the job is kept only if it is ready or
//! pipelined, as any job.

use volcano_framework::pq::CmpHeap;
use volcano_framework::topology::{HyperNodeId, Topology};
use volcano_framework::{JobId, QueueId, Session, TaskId};

use super::{Allocate, Placed};
use crate::topology::{self, Constraint, Pods};

/// Where a job's groups are placed: within a HyperNode of the tree (its virtual top for the
/// whole cluster).
#[derive(Clone, Copy)]
pub(super) struct Within<'a> {
    pub(super) topo: &'a Topology,
    pub(super) hyper_node: HyperNodeId,
}

/// One group of the job in a placement: its pending pods and its constraint.
struct Group {
    id: Option<u32>,
    tasks: CmpHeap<TaskId>,
    constraint: Result<Option<Constraint>, String>,
    /// Among the sub-groups needed for `minSubGroups`.
    required: bool,
    /// The highest priority of its pods.
    priority: i32,
    match_index: i64,
    /// `""` for the pods in no sub-group (Volcano's default sub-job, whose id sorts first).
    name: std::sync::Arc<str>,
}

/// Why a group could not be placed.
struct GroupFailure {
    /// The first reason a pod found no node.
    why: Option<String>,
    /// The reason, for a group with a network topology.
    reason: Option<String>,
}

/// Whether group `a` is placed before group `b`.
fn first(ssn: &Session, j: JobId, groups: &[Group], a: usize, b: usize) -> bool {
    let (x, y) = (&groups[a], &groups[b]);
    let ready = |g: &Group| ssn.snap.job(j).sub_groups.as_ref().is_some_and(|sg| sg.group_ready(g.id));
    y.required
        .cmp(&x.required)
        .then_with(|| ready(x).cmp(&ready(y)))
        .then_with(|| y.priority.cmp(&x.priority))
        .then_with(|| x.match_index.cmp(&y.match_index))
        .then_with(|| x.name.cmp(&y.name))
        .is_lt()
}

impl Allocate {
    /// Places the job's pending pods (`tasks`) group by group within `within` (see the
    /// module documentation). On return `tasks` holds the pods of the groups still to place.
    pub(super) fn place_groups(
        &self,
        ssn: &mut Session,
        q: QueueId,
        j: JobId,
        tasks: &mut CmpHeap<TaskId>,
        within: Within<'_>,
        job_constraint: Option<Constraint>,
    ) -> Placed {
        let mut groups = self.split(ssn, j, tasks, within.topo, job_constraint);
        let mut placed = Placed::new();
        let mut order: CmpHeap<usize> = CmpHeap::new();
        for i in 0..groups.len() {
            order.push(i, |a, b| first(ssn, j, &groups, *a, *b));
        }
        while let Some(i) = order.pop(|a, b| first(ssn, j, &groups, *a, *b)) {
            let mut heap = std::mem::take(&mut groups[i].tasks);
            match self.place_group(ssn, q, j, &mut heap, within, &groups[i]) {
                Ok(p) if p.count > 0 => {
                    placed.count += p.count;
                    placed.stmt.merge(p.stmt);
                    groups[i].tasks = heap;
                    if !groups[i].tasks.is_empty() {
                        order.push(i, |a, b| first(ssn, j, &groups, *a, *b));
                    }
                    if ssn.job_ready(j) {
                        break;
                    }
                }
                // Nothing placed: the group's pods were all skipped.
                Ok(p) => p.stmt.discard(ssn),
                Err(f) => {
                    let name = ssn.snap.job(j).sub_groups.as_ref().map(|sg| sg.name(groups[i].id)).unwrap_or_default();
                    tracing::debug!(job = %ssn.snap.job(j).key, group = %name, why = ?f.reason.as_ref().or(f.why.as_ref()), "sub-group not placed");
                    if placed.why.is_none() {
                        placed.why = f.why;
                    }
                    if placed.group_reason.is_none() {
                        placed.group_reason = f.reason;
                    }
                }
            }
        }
        // The groups still to place, for the job's next turn.
        *tasks = CmpHeap::new();
        for i in order.iter() {
            for t in groups[*i].tasks.iter() {
                tasks.push(*t, |a, b| ssn.task_order(*a, *b).is_lt());
            }
        }
        placed.push_back = ssn.job_ready(j) && !tasks.is_empty();
        placed
    }

    /// The job's pending pods by group, with each group's constraint and rank.
    fn split(
        &self,
        ssn: &Session,
        j: JobId,
        tasks: &mut CmpHeap<TaskId>,
        topo: &Topology,
        job_constraint: Option<Constraint>,
    ) -> Vec<Group> {
        let job = ssn.snap.job(j);
        let sg = job.sub_groups.as_ref().expect("a job with sub-groups");
        let mut groups: Vec<Group> = Vec::new();
        let mut slot: std::collections::HashMap<Option<u32>, usize> = std::collections::HashMap::new();
        let task_first = |a: &TaskId, b: &TaskId| ssn.task_order(*a, *b).is_lt();
        while let Some(t) = tasks.pop(task_first) {
            let g = ssn.snap.task(t).sub_group;
            let i = *slot.entry(g).or_insert_with(|| {
                let (constraint, match_index, name) = match g {
                    Some(id) => {
                        let info = &sg.groups[id as usize];
                        let policy = &sg.policies[info.policy as usize];
                        let field = format!("spec.subGroupPolicy[{}].networkTopology", info.policy);
                        let c = topology::constraint(policy.network_topology.as_ref(), topo)
                            .map_err(|e| format!("{}: {}", sg.name(g), e.replace("spec.networkTopology", &field)));
                        (c, info.match_index, info.name.clone())
                    }
                    None => (Ok(job_constraint), 0, "".into()),
                };
                groups.push(Group {
                    id: g,
                    tasks: CmpHeap::new(),
                    constraint,
                    required: false,
                    priority: i32::MIN,
                    match_index,
                    name,
                });
                groups.len() - 1
            });
            groups[i].tasks.push(t, task_first);
        }
        for t in &job.tasks {
            let task = ssn.snap.task(*t);
            if let Some(&i) = slot.get(&task.sub_group) {
                groups[i].priority = groups[i].priority.max(task.priority);
            }
        }
        // The fewest sub-groups that reach each policy's minSubGroups, in placement order
        // (Volcano's required sub-jobs).
        let mut candidates: Vec<usize> =
            (0..groups.len()).filter(|i| groups[*i].id.is_some_and(|g| !sg.group_ready(Some(g)))).collect();
        candidates.sort_by(|a, b| {
            let (x, y) = (&groups[*a], &groups[*b]);
            y.priority.cmp(&x.priority).then(x.match_index.cmp(&y.match_index)).then_with(|| x.name.cmp(&y.name))
        });
        let mut ready: Vec<i32> = vec![0; sg.policies.len()];
        for (_, g) in sg.live().filter(|(id, _)| sg.group_ready(Some(*id))) {
            ready[g.policy as usize] += 1;
        }
        for i in candidates {
            let p = sg.groups[groups[i].id.expect("a sub-group") as usize].policy as usize;
            if ready[p] < sg.policies[p].min_sub_groups {
                groups[i].required = true;
                ready[p] += 1;
            }
        }
        groups
    }

    /// Places one group until it is ready (or pipelined): within `within`, or, when it has
    /// a network topology constraint, within the best HyperNode of the lowest tier where it
    /// becomes so. On success `heap` holds its pods left.
    fn place_group(
        &self,
        ssn: &mut Session,
        q: QueueId,
        j: JobId,
        heap: &mut CmpHeap<TaskId>,
        within: Within<'_>,
        group: &Group,
    ) -> Result<Placed, GroupFailure> {
        let (topo, within) = (within.topo, within.hyper_node);
        let g = group.id;
        let done = |ssn: &Session| {
            ssn.snap.job(j).sub_groups.as_ref().is_some_and(|sg| sg.group_ready(g) || sg.group_pipelined(g))
        };
        let c = match &group.constraint {
            Ok(c) => *c,
            Err(why) => return Err(GroupFailure { why: None, reason: Some(why.clone()) }),
        };
        let Some(c) = c else {
            let scope = (within != topo.top()).then_some((topo, within));
            let p = self.place(ssn, q, j, heap, scope, Pods::Group(g));
            if done(ssn) {
                return Ok(p);
            }
            let why = p.why.clone();
            p.stmt.discard(ssn);
            return Err(GroupFailure { why, reason: None });
        };
        let mode = if c.hard { "hard" } else { "soft" };
        let subject = ssn.snap.job(j).sub_groups.as_ref().map(|sg| sg.name(g)).unwrap_or_default();
        let at = topology::placed_at(ssn, j, Pods::Group(g), topo);
        let root = topology::search_root(topo, at, c.highest_tier, within, &subject)
            .map_err(|why| GroupFailure { why: None, reason: Some(format!("network topology {mode}: {why}")) })?;
        let needed = {
            let sg = ssn.snap.job(j).sub_groups.as_ref().expect("a job with sub-groups");
            let counts = sg.counts(g);
            (sg.min_available(g) - counts.ready_task_num() - counts.pending_best_effort as i32).max(1) as usize
        };
        let pending: Vec<TaskId> = heap.iter().copied().collect();
        let need = topology::Need::of_pods(ssn, &pending, needed);
        let (gradients, roomiest) = {
            let mut rooms = self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            topology::candidates(ssn, &mut rooms, topo, root, c.highest_tier, &need)
        };
        let mut shortfall = topology::Shortfall { needed, ..Default::default() };
        let mut tried = 0;
        for mut tier in gradients {
            topology::order(ssn, topo, j, Pods::Group(g), &mut tier);
            for h in tier {
                tried += 1;
                topology::reset_fit_errors(ssn, j, Pods::Group(g));
                let mut copy = heap.clone();
                let p = self.place(ssn, q, j, &mut copy, Some((topo, h)), Pods::Group(g));
                if done(ssn) {
                    tracing::debug!(job = %ssn.snap.job(j).key, group = %subject, hyper_node = %topo.get(h).name, "sub-group placed within a HyperNode");
                    *heap = copy;
                    return Ok(p);
                }
                shortfall.offer(h, p.count, needed, p.why);
                p.stmt.discard(ssn);
            }
        }
        let why = shortfall.why.clone();
        let scope = if root == within {
            topology::scope(topo, root, "the job's")
        } else {
            topology::scope(topo, root, "where its pods already run")
        };
        Err(GroupFailure { why, reason: Some(shortfall.reason(topo, &c, &subject, &scope, tried, roomiest)) })
    }
}
