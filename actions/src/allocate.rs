//! The `allocate` action: Volcano's core gang placement.
//!
//! Queues and jobs are interleaved by their current order: pop the best queue (dropped for
//! the rest of the action when overused), pop its best job, place the job's pending tasks
//! into a fresh [`Statement`] in task order until the job is ready, then commit (tasks go to
//! the binder). A ready job with tasks left is pushed back, so each later pop places one
//! more task at the job's new rank (fair share). A job that is only pipelined keeps its
//! reservations in the session; any other job is rolled back whole.
//!
//! A job whose PodGroup asks for a network topology (`spec.networkTopology`) is placed
//! within one HyperNode ([`crate::topology`]). A job with sub-groups (`spec.subGroupPolicy`)
//! is placed sub-group by sub-group, each within a HyperNode of its own when its policy asks
//! for a network topology ([`sub_groups`]).
//!
//! Best-effort tasks (empty request) are left to `backfill`.

use volcano_api::conf::Arguments;

use crate::topology::{self, Pods};
use sub_groups::Within;
use volcano_framework::pq::CmpHeap;
use volcano_framework::topology::{HyperNodeId, Topology};
use volcano_framework::{
    parse_args, Action, ArgsError, Attempt, FitErrors, JobId, NodeChoice, QueueId, Session, Statement, TaskId,
    TaskStatus, Worklist,
};

mod sub_groups;

/// Configuration name.
pub const NAME: &str = "allocate";

/// Arguments of `allocate`.
pub type Args = crate::CommonArgs;

/// Checks the arguments and builds the action.
pub fn factory(a: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    let a: Args = parse_args(a)?;
    Ok(Box::new(Allocate {
        predicate_error_cache: a.predicate_error_cache_enable.unwrap_or(true),
        rooms: Default::default(),
    }))
}

/// The allocate action.
#[derive(Debug)]
pub struct Allocate {
    /// See [`Args::predicate_error_cache_enable`].
    pub predicate_error_cache: bool,
    /// What each node has for the HyperNode searches of one execution.
    rooms: std::sync::Mutex<topology::Rooms>,
}

/// Whether a job may keep allocating after one of its tasks failed (Volcano
/// `NeedContinueAllocating`); for a group of a job with sub-groups, only when neither the
/// job nor the group needs every one of its pods.
pub(crate) fn need_continue_allocating(ssn: &Session, j: JobId, pods: Pods) -> bool {
    let job = ssn.snap.job(j);
    if job.min_available as usize == job.tasks.len() {
        return false;
    }
    if let (Pods::Group(g), Some(sg)) = (pods, job.sub_groups.as_ref()) {
        return sg.min_available(g) < sg.counts(g).tasks as i32;
    }
    let failed_role = |role: &str| ssn.snap.fit_errors(j).keys().any(|t| ssn.snap.task(*t).role == role);
    if job.min_available < job.task_min_available_total {
        let left = job
            .tasks
            .iter()
            .map(|t| ssn.snap.task(*t))
            .filter(|t| t.status == TaskStatus::Pending && !failed_role(&t.role))
            .count() as i32;
        return job.ready_task_num() + left >= job.min_available;
    }
    for (role, min) in &job.task_min_available {
        if *min == 0 || !failed_role(role) {
            continue;
        }
        let allocated = job
            .tasks
            .iter()
            .map(|t| ssn.snap.task(*t))
            .filter(|t| {
                &t.role == role
                    && (t.status.is_allocated()
                        || t.status == TaskStatus::Succeeded
                        || (t.status == TaskStatus::Pending && t.best_effort))
            })
            .count() as i32;
        if allocated < *min {
            return false;
        }
    }
    true
}

/// Whether another task of the same job, role (and group) already failed predicates this
/// session.
pub(crate) fn role_failed(ssn: &Session, j: JobId, t: TaskId, pods: Pods) -> bool {
    let role = &ssn.snap.task(t).role;
    !role.is_empty()
        && ssn.snap.fit_errors(j).keys().any(|x| {
            let other = ssn.snap.task(*x);
            *x != t && &other.role == role && pods.has(other)
        })
}

/// What placing a job's tasks gave.
struct Placed {
    stmt: Statement,
    /// The job became ready with tasks left: it goes back into its queue's heap.
    push_back: bool,
    /// Tasks placed.
    count: usize,
    /// The first reason a task found no node.
    why: Option<String>,
    /// Why the first sub-group with a network topology that failed could not be placed.
    group_reason: Option<String>,
    /// Where the tasks went and which found no node (for a room proof when the job fails).
    attempt: Attempt,
}

impl Placed {
    fn new() -> Placed {
        Placed {
            stmt: Statement::new(),
            push_back: false,
            count: 0,
            why: None,
            group_reason: None,
            attempt: Attempt::default(),
        }
    }
}

impl Allocate {
    /// Places the job's tasks into a statement; returns it when the job is ready or
    /// pipelined, discards it otherwise (with what the attempt did, when it placed the job
    /// as a whole: for a room proof). A job with a network topology constraint is placed
    /// within one HyperNode ([`crate::topology`]); a job with sub-groups, sub-group by
    /// sub-group ([`sub_groups`]).
    fn allocate_job(
        &self,
        ssn: &mut Session,
        q: QueueId,
        j: JobId,
        tasks: &mut CmpHeap<TaskId>,
        jobs: &mut CmpHeap<JobId>,
    ) -> Result<Statement, Option<Attempt>> {
        let pg = ssn.snap.job(j).pod_group.clone();
        let topo = ssn.snap.topology_shared();
        let grouped = ssn.snap.job(j).sub_groups.is_some();
        let c = match topology::constraint(pg.spec.network_topology.as_ref(), &topo) {
            Ok(c) => c,
            Err(why) => {
                ssn.set_job_reason(j, why);
                return Err(None);
            }
        };
        let Some(c) = c else {
            let mut placed = if grouped {
                self.place_groups(ssn, q, j, tasks, Within { topo: &topo, hyper_node: topo.top() }, None)
            } else {
                self.place(ssn, q, j, tasks, None, Pods::Job)
            };
            if !(ssn.job_ready(j) || ssn.job_pipelined(j)) {
                if let Some(why) = &placed.group_reason {
                    ssn.set_job_reason(j, why.clone());
                }
            }
            let attempt = (!grouped).then(|| std::mem::take(&mut placed.attempt));
            return self.finish(ssn, j, jobs, placed).ok_or(attempt);
        };
        let placed_at = topology::placed_at(ssn, j, Pods::Job, &topo);
        let root = match topology::search_root(&topo, placed_at, c.highest_tier, topo.top(), "the job") {
            Ok(r) => r,
            Err(why) => {
                ssn.set_job_reason(j, format!("network topology hard: {why}"));
                return Err(None);
            }
        };
        let need = topology::Need::of(ssn, j, placed_at.is_some());
        let needed = topology::still_needed(ssn, j);
        let mut shortfall = topology::Shortfall { needed, ..Default::default() };
        let mut tried = 0;
        let (gradients, roomiest) = {
            let mut rooms = self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            topology::candidates(ssn, &mut rooms, &topo, root, c.highest_tier, &need)
        };
        for mut tier in gradients {
            topology::order(ssn, &topo, j, Pods::Job, &mut tier);
            for h in tier {
                tried += 1;
                topology::reset_fit_errors(ssn, j, Pods::Job);
                let mut heap = tasks.clone();
                let placed = if grouped {
                    self.place_groups(ssn, q, j, &mut heap, Within { topo: &topo, hyper_node: h }, Some(c))
                } else {
                    self.place(ssn, q, j, &mut heap, Some((&topo, h)), Pods::Job)
                };
                if ssn.job_ready(j) || ssn.job_pipelined(j) {
                    tracing::debug!(job = %ssn.snap.job(j).key, hyper_node = %topo.get(h).name, "job placed within a HyperNode");
                    *tasks = heap;
                    return self.finish(ssn, j, jobs, placed).ok_or(None);
                }
                shortfall.offer(h, placed.count, needed, placed.group_reason.or(placed.why));
                placed.stmt.discard(ssn);
            }
        }
        let scope = topology::scope(&topo, root, "where its pods already run");
        ssn.set_job_reason(j, shortfall.reason(&topo, &c, "the job", &scope, tried, roomiest));
        Err(None)
    }

    /// Keeps the statement of a ready or pipelined job (and puts a ready job with tasks
    /// left back into its queue's heap); discards it otherwise.
    fn finish(&self, ssn: &mut Session, j: JobId, jobs: &mut CmpHeap<JobId>, placed: Placed) -> Option<Statement> {
        if placed.push_back {
            jobs.push(j, |a, b| ssn.job_order(*a, *b).is_lt());
        }
        if ssn.job_ready(j) || ssn.job_pipelined(j) {
            Some(placed.stmt)
        } else {
            placed.stmt.discard(ssn);
            None
        }
    }

    /// Places the job's tasks in task order into a statement (within a HyperNode when
    /// given) until the job (with `Pods::Group`, that group of it) is ready or a failure
    /// means it cannot be.
    fn place(
        &self,
        ssn: &mut Session,
        q: QueueId,
        j: JobId,
        tasks: &mut CmpHeap<TaskId>,
        within: Option<(&Topology, HyperNodeId)>,
        until: Pods,
    ) -> Placed {
        let mut placed = Placed::new();
        while let Some(t) = tasks.pop(|a, b| ssn.task_order(*a, *b).is_lt()) {
            if !ssn.allocatable(q, t) {
                tracing::debug!(task = %ssn.snap.task(t).key, "queue refuses the task");
                if ssn.snap.job_fit_error(j).is_none() {
                    let why = ssn.allocatable_refusal(q, t);
                    ssn.set_job_reason(j, why.unwrap_or_else(|| "the queue refuses the job's pods".into()));
                }
                continue;
            }
            if self.predicate_error_cache && role_failed(ssn, j, t, until) {
                continue;
            }
            if let Err(s) = ssn.pre_predicate(t) {
                let e = FitErrors { nodes: ssn.snap.nodes.len(), error: Some(s.reason), ..Default::default() };
                placed.why.get_or_insert_with(|| e.to_string());
                ssn.record_fit_errors(t, e);
                if !need_continue_allocating(ssn, j, until) {
                    break;
                }
                continue;
            }
            let choice = match within {
                None => topology::select_node(ssn, t),
                Some((topo, h)) => topology::select_node_in(ssn, topo, h, t),
            };
            match choice {
                Err(errors) => {
                    tracing::debug!(task = %ssn.snap.task(t).key, %errors, "no node fits");
                    if within.is_none() {
                        placed.attempt.no_node(t);
                    }
                    placed.why.get_or_insert_with(|| errors.to_string());
                    ssn.record_fit_errors(t, errors);
                    if !need_continue_allocating(ssn, j, until) {
                        break;
                    }
                    continue;
                }
                Ok(NodeChoice::Idle(n)) => {
                    placed.stmt.allocate(ssn, t, n);
                    placed.attempt.placed(t, n);
                }
                Ok(NodeChoice::Future(n)) => {
                    placed.stmt.pipeline(ssn, t, n);
                    placed.attempt.placed(t, n);
                }
            }
            placed.count += 1;
            match until {
                Pods::Job => {
                    if ssn.job_ready(j) && !tasks.is_empty() {
                        placed.push_back = true;
                        break;
                    }
                }
                Pods::Group(g) => {
                    if ssn.snap.job(j).sub_groups.as_ref().is_some_and(|sg| sg.group_ready(g)) {
                        break;
                    }
                }
            }
        }
        placed
    }
}

/// The tasks `allocate` places: pending, not gated, with requests.
fn to_place(task: &volcano_framework::TaskInfo) -> bool {
    task.status == TaskStatus::Pending && !task.sch_gated && !task.best_effort
}

impl Action for Allocate {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        *self.rooms.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = topology::Rooms::default();
        let enqueue = ssn.ctx.enqueue_enabled;
        let mut work = Worklist::new(ssn);
        for i in 0..ssn.snap.jobs.len() {
            let j = JobId(i as u32);
            if ssn.snap.job(j).is_pending() {
                if enqueue {
                    continue;
                }
                ssn.admit(j);
            }
            if let Some(invalid) = ssn.job_valid(j) {
                tracing::debug!(job = %ssn.snap.job(j).key, reason = %invalid.message, "job is not valid");
                ssn.set_job_reason(j, invalid.message);
                continue;
            }
            if ssn.snap.job(j).count(TaskStatus::Pending) == 0 {
                continue;
            }
            // Its tasks' heap is built when the job is first tried (as Volcano's allocate
            // does): a job skipped by a remembered failure never needs it.
            if !ssn.snap.job(j).tasks.iter().any(|t| to_place(ssn.snap.task(*t))) {
                continue;
            }
            work.add_job(ssn, j, None);
        }

        while let Some(q) = work.pop_queue(ssn) {
            if ssn.overused(q) {
                tracing::debug!(queue = %ssn.snap.queue(q).name, "queue is overused");
                continue;
            }
            let Some(j) = work.pop_job(ssn, q) else { continue };
            // A job that failed at this same state last cycle fails again: skipped, with
            // what its attempt left (see `volcano_framework::session::retry`). A failed
            // attempt is not pushed back, so its tasks are not needed again.
            if ssn.replay_failed_try(j) {
                work.push_queue(ssn, q);
                continue;
            }
            let start = ssn.begin_try(j);
            let mut tasks = work.take_tasks_or(j, |ssn| Worklist::task_heap(ssn, j, to_place), ssn);
            let mut job_heap = work.take_jobs(q);
            let stmt = self.allocate_job(ssn, q, j, &mut tasks, &mut job_heap);
            work.put_jobs(q, job_heap);
            work.put_tasks(j, tasks);
            match stmt {
                Ok(stmt) if ssn.job_ready(j) => stmt.commit(ssn),
                // Pipelined only: the reservations stay in the session so that lower-ranked
                // jobs cannot take them in this cycle; nothing is bound.
                Ok(stmt) => stmt.keep(ssn),
                Err(attempt) => {
                    if let Some(start) = start {
                        ssn.remember_failed_try(start, attempt.as_ref());
                    }
                }
            }
            work.push_queue(ssn, q);
        }
    }
}
