//! The `reclaim` action: across queues, a starving job of a queue that is owed resources
//! takes them back from reclaimable queues that use more than they deserve.
//!
//! Queues are taken in queue order (an overused queue reclaims nothing); for each starving
//! job a statement collects, task by task, evictions of **Running**, preemptable pods of
//! jobs in **other**, **reclaimable** queues chosen by the plugins' `reclaimable` vote, and
//! the pipelined preemptor; it is committed only if the job is then pipelined.

use volcano_api::conf::Arguments;
use volcano_framework::{
    parse_args, Action, ArgsError, EvictionTry, JobId, QueueId, Session, Statement, TaskId, TaskStatus, Worklist,
};

use crate::evict::{
    candidate_nodes, fits_without_eviction, free_node_for, may_evict_for, pending_tasks, sort_in_victim_order,
    victims_suffice, ReclaimWalk,
};

/// Configuration name.
pub const NAME: &str = "reclaim";

/// Arguments of `reclaim`.
pub type Args = crate::CommonArgs;

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    let _: Args = parse_args(a)?;
    Ok(Box::new(Reclaim))
}

/// The reclaim action.
#[derive(Debug)]
pub struct Reclaim;

/// `candidates` is set when some node had pods of other reclaimable queues to consider.
fn reclaim_task(ssn: &mut Session, stmt: &mut Statement, q: QueueId, t: TaskId, candidates: &mut bool) -> bool {
    if ssn.fits_some_node(t) {
        let nodes = candidate_nodes(ssn, t, false);
        if let Some(&n) = nodes.iter().find(|n| fits_without_eviction(ssn, t, **n)) {
            stmt.pipeline(ssn, t, n);
            return true;
        }
    }
    let mut walk = ReclaimWalk::new(q);
    while let Some(n) = walk.next(ssn) {
        if ssn.predicate_for_eviction(t, n).is_err() {
            continue;
        }
        let reclaimees: Vec<TaskId> = ssn
            .snap
            .node(n)
            .tasks
            .iter()
            .copied()
            .filter(|v| {
                let task = ssn.snap.task(*v);
                task.status == TaskStatus::Running
                    && task.preemptable
                    && task.job.is_some_and(|vj| {
                        let vq = ssn.snap.job(vj).queue;
                        vq != q && ssn.snap.queue(vq).reclaimable
                    })
            })
            .collect();
        if reclaimees.is_empty() {
            continue;
        }
        *candidates = true;
        let mut reclaimees = reclaimees;
        sort_in_victim_order(ssn, t, &mut reclaimees);
        let victims = ssn.reclaimable(t, &reclaimees);
        if !victims_suffice(ssn, t, n, &victims) {
            continue;
        }
        let fits = |s: &Session| s.snap.node(n).fits_future(&s.snap.task(t).resreq);
        if let Some(node_stmt) = free_node_for(ssn, t, n, victims, "reclaim", fits) {
            stmt.merge(node_stmt);
            return true;
        }
    }
    false
}

impl Action for Reclaim {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        let mut work = Worklist::new(ssn);
        for i in 0..ssn.snap.jobs.len() {
            let j = JobId(i as u32);
            if ssn.snap.job(j).is_pending() || ssn.job_valid(j).is_some() {
                continue;
            }
            // Every queue with an admitted job takes part, starving or not.
            work.add_queue(ssn, ssn.snap.job(j).queue);
            if ssn.job_starving(j) {
                let heap = pending_tasks(ssn, j);
                if !heap.is_empty() {
                    work.add_job(ssn, j, Some(heap));
                }
            }
        }

        while let Some(q) = work.pop_queue(ssn) {
            if ssn.overused(q) {
                tracing::debug!(queue = %ssn.snap.queue(q).name, "overused queue reclaims nothing");
                while let Some(j) = work.pop_job(ssn, q) {
                    ssn.record_eviction_try(j, EvictionTry::QueueOverused);
                }
                continue;
            }
            let Some(j) = work.pop_job(ssn, q) else { continue };
            let mut stmt = Statement::new();
            let mut heap = work.take_tasks(j);
            let (mut candidates, mut limited) = (false, false);
            while ssn.job_starving(j) {
                let Some(t) = heap.pop(|a, b| ssn.task_order(*a, *b).is_lt()) else { break };
                if !may_evict_for(ssn, t) || ssn.pre_predicate(t).is_err() {
                    continue;
                }
                if !ssn.preemptive(q, t) {
                    limited = true;
                    continue;
                }
                reclaim_task(ssn, &mut stmt, q, t, &mut candidates);
            }
            if ssn.job_pipelined(j) {
                stmt.commit(ssn);
                ssn.record_eviction_try(j, EvictionTry::Committed);
            } else {
                stmt.discard(ssn);
                let outcome = match (candidates, limited) {
                    (true, _) => EvictionTry::NoRoom,
                    (false, true) => EvictionTry::QueueLimit,
                    (false, false) => EvictionTry::NoCandidates,
                };
                ssn.record_eviction_try(j, outcome);
            }
            work.push_queue(ssn, q);
        }
    }
}
