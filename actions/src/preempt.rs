//! The `preempt` action: within a queue, starving jobs take resources from lower-priority
//! work.
//!
//! Phase 1, between jobs: for each queue in queue order, each starving job (job order) opens
//! a statement; while it is still starving, its pending tasks (task order) try to preempt
//! Running or Bound, preemptable pods of *other* jobs of the *same* queue. The job's
//! statement is committed only if the job is then pipelined (its minimum placed or
//! reserved); otherwise every eviction is undone. Phase 2, within a job: each starving job's
//! pending tasks may preempt lower-priority pods of their own job, one committed statement
//! per task, until one fails.
//!
//! For a task, nodes are taken by score; on each node the plugins' `preemptable` vote
//! picks the victims, which are evicted one by one in victim order (§2.8) until the task
//! fits; then the task is pipelined onto the node (bound in a later cycle, once the
//! victims are gone). A node where the victims do not suffice is left untouched.

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_framework::{parse_args, Action, ArgsError, EvictionTry, JobId, Session, Statement, TaskId, Worklist};

use crate::evict::{
    candidate_nodes, fits_without_eviction, free_node_for, may_evict_for, pending_tasks, preempt_candidate_nodes,
    sort_in_victim_order, victims_suffice,
};

/// Configuration name.
pub const NAME: &str = "preempt";

/// Arguments of `preempt` (from `configurations`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Accepted for compatibility (predicate results are not cached across preemptors).
    #[serde(rename = "predicateErrorCacheEnable", default, deserialize_with = "args::bool")]
    pub predicate_error_cache_enable: Option<bool>,
    /// Volcano's topology-aware (dry-run) preemption: not implemented; `true` is refused.
    #[serde(rename = "enableTopologyAwarePreemption", default, deserialize_with = "args::bool")]
    pub enable_topology_aware_preemption: Option<bool>,
    /// Accepted for compatibility with topology-aware preemption settings.
    #[serde(rename = "topologyAwarePreemptWorkerNum", default, deserialize_with = "args::int")]
    pub topology_aware_preempt_worker_num: Option<i64>,
    /// Accepted for compatibility with topology-aware preemption settings.
    #[serde(rename = "minCandidateNodesPercentage", default, deserialize_with = "args::int")]
    pub min_candidate_nodes_percentage: Option<i64>,
    /// Accepted for compatibility with topology-aware preemption settings.
    #[serde(rename = "minCandidateNodesAbsolute", default, deserialize_with = "args::int")]
    pub min_candidate_nodes_absolute: Option<i64>,
    /// Accepted for compatibility with topology-aware preemption settings.
    #[serde(rename = "maxCandidateNodesAbsolute", default, deserialize_with = "args::int")]
    pub max_candidate_nodes_absolute: Option<i64>,
}

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    let a: Args = parse_args(a)?;
    if a.enable_topology_aware_preemption == Some(true) {
        return Err(ArgsError(
            "enableTopologyAwarePreemption: topology-aware preemption is not implemented yet in volcano-rs".into(),
        ));
    }
    Ok(Box::new(Preempt))
}

/// The preempt action.
#[derive(Debug)]
pub struct Preempt;

/// Tries to free a node for `t` by evicting candidates accepted by `filter`; on success the
/// node's evictions and the pipelined task are merged into `stmt`. `candidates` is set when
/// some node had pods the filter accepts.
fn preempt_task(
    ssn: &mut Session,
    stmt: &mut Statement,
    t: TaskId,
    filter: impl Fn(&Session, TaskId) -> bool,
    candidates: &mut bool,
) -> bool {
    if !may_evict_for(ssn, t) || ssn.pre_predicate(t).is_err() {
        return false;
    }
    let queue = ssn.snap.task(t).job.map(|j| ssn.snap.job(j).queue).expect("preemptors belong to a job");
    // A node where the task already fits needs no victim (Volcano skips such nodes, so a
    // gang that needs idle room on one node and evictions on another starves forever).
    if ssn.allocatable(queue, t) && ssn.fits_some_node(t) {
        let nodes = candidate_nodes(ssn, t, true);
        if let Some(&n) = nodes.iter().find(|n| fits_without_eviction(ssn, t, **n)) {
            stmt.pipeline(ssn, t, n);
            return true;
        }
    }
    // Victims are pods of the preemptor's queue (of its job, in phase 2).
    for n in preempt_candidate_nodes(ssn, t, queue) {
        let mut preemptees: Vec<TaskId> = ssn.snap.node(n).tasks.iter().copied().filter(|v| filter(ssn, *v)).collect();
        if preemptees.is_empty() {
            continue;
        }
        *candidates = true;
        sort_in_victim_order(ssn, t, &mut preemptees);
        let victims = ssn.preemptable(t, &preemptees);
        if !victims_suffice(ssn, t, n, &victims) {
            continue;
        }
        ssn.record_preemption_attempt(victims.len());
        let fits = |s: &Session| {
            let task = s.snap.task(t);
            s.allocatable(queue, t) && s.snap.node(n).fits_future(&task.resreq) && s.predicate(t, n).is_ok()
        };
        if let Some(node_stmt) = free_node_for(ssn, t, n, victims, "preempt", fits) {
            stmt.merge(node_stmt);
            return true;
        }
    }
    false
}

fn victim_status_ok(ssn: &Session, preemptor: TaskId, v: TaskId) -> bool {
    let (p, task) = (ssn.snap.task(preemptor), ssn.snap.task(v));
    task.status.is_preemptable() && task.preemptable && (!p.best_effort || task.best_effort)
}

impl Action for Preempt {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        let nq = ssn.snap.queues.len();
        let mut work = Worklist::new(ssn);
        let mut under_request: Vec<Vec<JobId>> = vec![Vec::new(); nq];
        for i in 0..ssn.snap.jobs.len() {
            let j = JobId(i as u32);
            if ssn.snap.job(j).is_pending() || ssn.job_valid(j).is_some() || !ssn.job_starving(j) {
                continue;
            }
            let heap = pending_tasks(ssn, j);
            if heap.is_empty() {
                continue;
            }
            work.add_job(ssn, j, Some(heap));
            under_request[ssn.snap.job(j).queue.idx()].push(j);
        }

        while let Some(q) = work.pop_queue(ssn) {
            // Phase 1: between jobs of the queue.
            while let Some(j) = work.pop_job(ssn, q) {
                let mut stmt = Statement::new();
                let mut heap = work.take_tasks(j);
                let mut candidates = false;
                while ssn.job_starving(j) {
                    let Some(t) = heap.pop(|a, b| ssn.task_order(*a, *b).is_lt()) else { break };
                    let filter = |s: &Session, v: TaskId| {
                        victim_status_ok(s, t, v)
                            && s.snap.task(v).job.is_some_and(|vj| vj != j && s.snap.job(vj).queue == q)
                    };
                    preempt_task(ssn, &mut stmt, t, filter, &mut candidates);
                }
                work.put_tasks(j, heap);
                if ssn.job_pipelined(j) {
                    stmt.commit(ssn);
                    ssn.record_eviction_try(j, EvictionTry::Committed);
                } else {
                    stmt.discard(ssn);
                    ssn.record_eviction_try(
                        j,
                        if candidates { EvictionTry::NoRoom } else { EvictionTry::NoCandidates },
                    );
                }
            }
            // Phase 2: within each starving job, in job order (Volcano takes them in map
            // order, that is at random).
            let mut jobs = std::mem::take(&mut under_request[q.idx()]);
            jobs.sort_by(|a, b| ssn.job_order(*a, *b));
            for &j in &jobs {
                let mut heap = pending_tasks(ssn, j);
                while let Some(t) = heap.pop(|a, b| ssn.task_order(*a, *b).is_lt()) {
                    let mut stmt = Statement::new();
                    let filter = |s: &Session, v: TaskId| victim_status_ok(s, t, v) && s.snap.task(v).job == Some(j);
                    let assigned = preempt_task(ssn, &mut stmt, t, filter, &mut false);
                    stmt.commit(ssn);
                    if !assigned {
                        break;
                    }
                }
            }
        }
    }
}
