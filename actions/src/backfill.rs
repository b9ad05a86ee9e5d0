//! The `backfill` action: places best-effort pods (no resource request) that `allocate`
//! leaves alone, in queue → job → task order, on the best-scoring node that passes the
//! predicates and has a free pod slot.
//!
//! Unlike Volcano, whose backfill binds each best-effort pod as soon as its job counts as
//! ready — which, since pending best-effort pods count towards readiness, can leave a
//! best-effort gang partly placed — volcano-rs places a job's best-effort pods in one
//! transaction and commits it only when the job then really has its `minMember` placed (or
//! all its best-effort pods are placed).

use volcano_api::conf::Arguments;
use volcano_framework::pq::CmpHeap;
use volcano_framework::{
    parse_args, Action, ArgsError, FitErrors, JobId, NodeChoice, Session, Statement, TaskId, TaskStatus, Worklist,
};

/// Configuration name.
pub const NAME: &str = "backfill";

/// Arguments of `backfill`.
pub type Args = crate::CommonArgs;

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    let _: Args = parse_args(a)?;
    Ok(Box::new(Backfill))
}

/// The backfill action.
#[derive(Debug)]
pub struct Backfill;

impl Action for Backfill {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        // Collect pending best-effort tasks of valid, admitted jobs; un-pipeline pipelined ones.
        let mut work = Worklist::new(ssn);
        for i in 0..ssn.snap.jobs.len() {
            let j = JobId(i as u32);
            let job = ssn.snap.job(j);
            // Only pending or pipelined best-effort tasks are backfilled.
            let candidates = job.pending_best_effort > 0 || job.count(TaskStatus::Pipelined) > 0;
            if !candidates || job.is_pending() || ssn.job_valid(j).is_some() {
                continue;
            }
            let members: Vec<TaskId> = ssn
                .snap
                .job(j)
                .tasks
                .iter()
                .copied()
                .filter(|t| {
                    let t = ssn.snap.task(*t);
                    t.best_effort && !t.sch_gated && matches!(t.status, TaskStatus::Pending | TaskStatus::Pipelined)
                })
                .collect();
            if members.is_empty() {
                continue;
            }
            let mut heap = CmpHeap::new();
            for t in members {
                if ssn.snap.task(t).status == TaskStatus::Pipelined {
                    ssn.unpipeline(t);
                }
                heap.push(t, |a, b| ssn.task_order(*a, *b).is_lt());
            }
            work.add_job(ssn, j, Some(heap));
        }
        while let Some(q) = work.pop_queue(ssn) {
            while let Some(j) = work.pop_job(ssn, q) {
                let mut heap = work.take_tasks(j);
                let mut stmt = Statement::new();
                while let Some(t) = heap.pop(|a, b| ssn.task_order(*a, *b).is_lt()) {
                    if let Err(s) = ssn.pre_predicate(t) {
                        let e = FitErrors { nodes: ssn.snap.nodes.len(), error: Some(s.reason), ..Default::default() };
                        ssn.record_fit_errors(t, e);
                        continue;
                    }
                    match ssn.find_node(t) {
                        Ok(NodeChoice::Idle(n)) => stmt.allocate(ssn, t, n),
                        Ok(NodeChoice::Future(_)) => {
                            let e = FitErrors {
                                nodes: ssn.snap.nodes.len(),
                                error: Some("no node has a free pod slot until releasing pods are gone".into()),
                                ..Default::default()
                            };
                            ssn.record_fit_errors(t, e);
                        }
                        Err(errors) => ssn.record_fit_errors(t, errors),
                    }
                }
                // The gang rule holds for best-effort pods too: commit only when the job
                // then has its minimum really placed (pending best-effort pods no longer
                // count), or when every best-effort pod of the job was placed.
                let job = ssn.snap.job(j);
                let all_placed = job.pending_best_effort == 0;
                if job.ready_task_num() >= job.min_available || all_placed {
                    stmt.commit(ssn);
                } else {
                    stmt.discard(ssn);
                }
            }
        }
    }
}
