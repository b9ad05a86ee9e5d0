//! Remembered failures: a job that `allocate` could not place is not tried again while
//! nothing it could depend on has changed.
//!
//! A session is a deterministic function of its snapshot and its profile (the core reads
//! no clock, draws no random numbers, and every ordering ends on names or uids), with one
//! exception: plugins that read the session's time ([`crate::Incremental::reads_clock`], `sla`
//! with a waiting time). So when a kept snapshot has not changed in anything scheduling
//! reads ([`crate::Snapshot::revision`]), the profile is the same and no plugin reads the
//! clock, the next session replays the last one step by step, up to the first step that
//! changes the session's state.
//!
//! That is the rule kept here. While `allocate` runs and no statement has yet been
//! committed or kept in the session (the session's state is its opening state, up to the
//! failed attempts, which a discarded statement undoes exactly), a job whose attempt fails
//! is remembered with what the attempt left behind: its tasks' fit errors, its reason, and
//! the last placement each task had before the roll-back (which close and `explain` read).
//! The next session over the same revision, at the same point (nothing committed or kept
//! yet), skips the attempt and sets what it left. Because every attempt before it was
//! either replayed the same way or skipped, the session's state at that point is the one
//! the remembered attempt saw, so the attempt would fail again the same way: skipping it
//! cannot leave out a job that would now fit.
//!
//! Anything that could change an answer ends the memory: a pod, PodGroup, node or queue
//! that changed in what scheduling reads (a node freeing room, a pod finishing, a queue's
//! weight, a node added), an extra object (namespaces, volumes), a new configuration, or a
//! rebuilt snapshot. Writes that scheduling does not read (conditions, heartbeats, resource
//! versions) do not ([`crate::Snapshot::update`]).
//!
//! Room proves more ([`RoomProof`]). When an attempt fails, the job's pods that found no
//! node tell how many of their shape could be placed at the state the attempt began with:
//! none on a node where the job placed nothing (the node looked the same to them), and on
//! a node where it placed some, at most what the node's room holds of that request. When
//! every plugin with a predicate promises that its answer for the job's pods depends on
//! the node alone and never turns from no to yes as pods join nodes
//! ([`crate::Incremental::fit_only_narrows`]), those counts only fall while no node gains
//! room; and when a plugin promises the gang rule ([`crate::Incremental::needs_min_member`]),
//! a job whose running pods plus the most its pending pods could get stay below its
//! `minMember` can be neither ready nor pipelined. Such a failure is remembered with the
//! snapshot's growth ([`crate::Snapshot::growth`]) and the job's version, from any point of
//! `allocate` (not only the opening state) as long as the session has kept no reservation
//! and evicted nothing, and skipped at any later turn of the job while the growth and the
//! job's version are those, the session has evicted nothing before the turn, and every
//! bind the remembering session made is on its node in the snapshot (the state then has at
//! most the room the attempt saw). A job skipped this way gets what its last attempt left
//! (its fit errors and reason from then, counts that may be stale), not what an attempt
//! now would say: it would still fail.
//!
//! A session that changed nothing goes further: when it committed and kept no statement,
//! every attempt it made was a skip, and closing it wrote nothing, the next session over
//! the same snapshot *state* ([`crate::Snapshot::state`]: not one object changed, read by
//! scheduling or not) would open with this session's memory, skip the same attempts in the
//! same order and close over the same statuses, so [`crate::run_cycle`] returns the outcome
//! again without opening a session ([`crate::retry::Settled`]).

use std::sync::Arc;

use volcano_api::conf::SchedulerConfiguration;

use crate::model::{JobId, JobTrace, NodeId, TaskId, TaskStatus};
use crate::plugin::Hooks;
use crate::resource::MIN_RESOURCE;
use crate::retry::{FailedTry, RetryMemo, RoomProof, SessionBinds, Trace};
use crate::session::Session;

/// A session's side of the memory: what it may skip, what it records.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    /// Whether remembering is allowed in this session (no plugin reads the clock).
    enabled: bool,
    /// The previous session's memory, when it is valid for this one.
    known: Option<Arc<RetryMemo>>,
    /// Whether `known` was made over this session's revision (its exact replays hold).
    same_revision: bool,
    /// This session's failed attempts, by job.
    recorded: Vec<Option<Arc<FailedTry>>>,
    /// Statements committed or kept so far (the session left its opening state).
    changes: u64,
    /// A statement was kept (reservations the snapshot will not show) or had pipelined
    /// tasks: no room proof from now on.
    reserved: bool,
    /// Pods were evicted (room for pipelining): no room proof made or used from now on.
    evicted: bool,
    /// The binds so far (pod index, pod key, node), when remembering is allowed.
    binds: Vec<(TaskId, Arc<str>, NodeId)>,
    /// Shared by this session's proofs, filled when the session hands its memory on.
    proof_binds: Arc<SessionBinds>,
    /// The bind lists of earlier sessions checked in this one: whether each is in the snapshot.
    checked: Vec<(Arc<SessionBinds>, bool)>,
    /// Attempts skipped in this session.
    pub(crate) skipped: u64,
    /// Skipped by a room proof (counted in `skipped` too).
    pub(crate) proven: u64,
    /// Failed attempts made (not skipped) and remembered in this session.
    fresh: u64,
}

impl Retries {
    pub(crate) fn new(enabled: bool, known: Option<Arc<RetryMemo>>, revision: u64) -> Retries {
        let known = known.filter(|_| enabled);
        let same_revision = known.as_ref().is_some_and(|m| m.revision == revision);
        Retries { enabled, known, same_revision, ..Default::default() }
    }
}

/// What an attempt of `allocate` did, for a room proof when it fails
/// ([`Session::remember_failed_try`]): the nodes it placed pods on and the pods that found
/// no node at all.
#[derive(Debug, Default)]
pub struct Attempt {
    placed: Vec<(TaskId, NodeId)>,
    no_node: Vec<TaskId>,
}

impl Attempt {
    /// Notes a pod placed (allocated or pipelined) on a node.
    pub fn placed(&mut self, t: TaskId, n: NodeId) {
        self.placed.push((t, n));
    }

    /// Notes a pod for which no node passed the resource check and every predicate.
    pub fn no_node(&mut self, t: TaskId) {
        self.no_node.push(t);
    }
}

impl Session {
    /// Counts a statement that changed the session's state (committed or kept), and
    /// whether it holds what the snapshot will not show as binds (a reservation, an
    /// eviction).
    pub(crate) fn note_change(&mut self, reserved: bool, evicted: bool) {
        self.retries.changes += 1;
        self.retries.reserved |= reserved;
        self.retries.evicted |= evicted;
    }

    /// Notes a bind of the session (for the room proofs).
    pub(crate) fn note_bind(&mut self, t: TaskId, n: NodeId) {
        if self.retries.enabled {
            let key = self.snap.task(t).key.clone();
            self.retries.binds.push((t, key, n));
        }
    }

    /// Whether the session is still at its opening state, as far as remembered attempts go.
    pub fn at_opening_state(&self) -> bool {
        self.retries.enabled && self.retries.changes == 0
    }

    fn trace(&self, j: JobId) -> Trace {
        let job = self.snap.job(j);
        Trace {
            job: self.snap.job_trace(j).filter(|t| ***t != JobTrace::default()).cloned(),
            last_tx: job.tasks.iter().map(|&t| self.snap.last_tx(t)).collect(),
        }
    }

    /// Whether job `j` is as `trace` says ([`Session::trace`] compared without building it).
    fn is_at(&self, j: JobId, trace: &Trace) -> bool {
        let job = self.snap.job(j);
        let empty = |t: Option<&Arc<JobTrace>>| t.is_none_or(|t| **t == JobTrace::default());
        let same_job = match (self.snap.job_trace(j), trace.job.as_ref()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            (a, b) => empty(a) && empty(b),
        };
        same_job
            && job.tasks.len() == trace.last_tx.len()
            && job.tasks.iter().zip(&trace.last_tx).all(|(&t, last)| self.snap.last_tx(t) == *last)
    }

    /// Skips the attempt of job `j` when it would fail (see the module documentation): the
    /// previous session remembered it failing at this same state, or a room proof still
    /// holds. Sets what the remembered attempt left and returns `true`; returns `false`
    /// when the job must be tried.
    pub fn replay_failed_try(&mut self, j: JobId) -> bool {
        let Some(known) = self.retries.known.clone() else { return false };
        let Some(Some(tried)) = known.tries.get(j.idx()) else { return false };
        if !Arc::ptr_eq(&tried.key, &self.snap.job(j).key) && tried.key != self.snap.job(j).key {
            return false;
        }
        let exact =
            self.retries.same_revision && tried.exact && self.at_opening_state() && self.is_at(j, &tried.before);
        if exact {
            let tried = tried.clone();
            self.set_trace(j, &tried.after);
            tracing::trace!(job = %self.snap.job(j).key, "allocate: skipped, it failed at this same state last cycle");
            self.record_try(j, tried);
            self.retries.skipped += 1;
            return true;
        }
        let Some(proof) = tried.proof.as_ref().filter(|p| self.proof_holds(j, p)) else { return false };
        let again = FailedTry {
            key: tried.key.clone(),
            before: self.trace(j),
            after: tried.after.clone(),
            exact: self.at_opening_state(),
            proof: Some(proof.clone()),
        };
        self.set_trace(j, &again.after);
        tracing::trace!(job = %self.snap.job(j).key, "allocate: skipped, no node has gained room since it failed");
        self.record_try(j, Arc::new(again));
        self.retries.skipped += 1;
        self.retries.proven += 1;
        true
    }

    /// Sets what an attempt left on job `j`.
    fn set_trace(&mut self, j: JobId, after: &Trace) {
        // Only the tasks the attempt had placed have a last placement to set (a write copies
        // the shared chunk of tasks it falls in).
        for (i, last) in after.last_tx.iter().enumerate().filter(|(_, l)| l.is_some()) {
            let t = self.snap.job(j).tasks[i];
            self.snap.set_last_tx(t, *last);
        }
        self.snap.set_job_trace(j, after.job.clone());
    }

    /// Whether a room proof for job `j` holds in this session now.
    fn proof_holds(&mut self, j: JobId, proof: &RoomProof) -> bool {
        if !self.retries.enabled
            || self.retries.evicted
            || proof.growth != self.snap.growth()
            || proof.version != self.snap.job(j).version
        {
            return false;
        }
        if let Some((_, on)) = self.retries.checked.iter().find(|(b, _)| Arc::ptr_eq(b, &proof.binds)) {
            return *on;
        }
        // Every bind of the remembering session is on its node in the snapshot (and still
        // holds its room: a pod that left it would have given a new growth).
        let on = proof.binds.list.get().is_some_and(|binds| {
            binds.iter().all(|(hint, key, n)| {
                // The index the pod had is usually still its own (no pod removed before it):
                // a pointer or string comparison instead of a hash lookup.
                let at_hint = self.snap.tasks.get(hint.idx()).filter(|t| Arc::ptr_eq(&t.key, key) || t.key == *key);
                at_hint.or_else(|| self.snap.task_id(key).map(|t| self.snap.task(t))).is_some_and(|t| {
                    t.node == Some(*n) && !t.status.is_completed() && t.status != TaskStatus::Releasing
                })
            })
        });
        self.retries.checked.push((proof.binds.clone(), on));
        on
    }

    /// Starts an attempt of job `j`: its trace when the attempt may be remembered.
    pub fn begin_try(&self, j: JobId) -> Option<TryStart> {
        // Only an attempt made at the opening state can be replayed exactly, from its trace.
        let before = self.at_opening_state().then(|| self.trace(j));
        self.retries.enabled.then_some(TryStart { job: j, before })
    }

    /// Remembers a failed attempt (its statement discarded): begun at the opening state, or
    /// anywhere when `attempt` proves by room that the job cannot be placed.
    pub fn remember_failed_try(&mut self, start: TryStart, attempt: Option<&Attempt>) {
        let j = start.job;
        let proof = attempt.and_then(|a| self.room_proof(j, a));
        let exact = start.before.is_some() && self.at_opening_state();
        if !exact && proof.is_none() {
            return;
        }
        let after = Arc::new(self.trace(j));
        let before = start.before.unwrap_or_else(|| Trace { job: None, last_tx: Vec::new() });
        let tried = FailedTry { key: self.snap.job(j).key.clone(), before, after, exact, proof };
        self.record_try(j, Arc::new(tried));
        self.retries.fresh += 1;
    }

    /// A room proof that job `j` cannot be placed, from its failed attempt, at the state
    /// the attempt began with (its statement is discarded): see the module documentation.
    fn room_proof(&self, j: JobId, attempt: &Attempt) -> Option<Arc<RoomProof>> {
        if !self.retries.enabled || self.retries.reserved || self.retries.evicted || attempt.no_node.is_empty() {
            return None;
        }
        let gang = |hook: Hooks| self.active(hook).any(|p| p.incremental().is_some_and(|h| h.needs_min_member()));
        if !gang(Hooks::JOB_READY) || !gang(Hooks::JOB_PIPELINED) {
            return None;
        }
        let job = self.snap.job(j);
        // The pods allocate places, by shape: how many, and one of them.
        let mut shapes: Vec<(u32, TaskId, usize)> = Vec::new();
        for &t in &job.tasks {
            let task = self.snap.task(t);
            if task.status != TaskStatus::Pending || task.sch_gated || task.best_effort {
                continue;
            }
            match shapes.iter_mut().find(|(s, ..)| *s == task.shape) {
                Some((_, _, n)) => *n += 1,
                None => shapes.push((task.shape, t, 1)),
            }
        }
        let mut most = 0usize;
        for &(shape, t, n) in &shapes {
            let narrows = self
                .active(Hooks::PREDICATE)
                .all(|p| p.incremental().is_some_and(|h| h.fit_only_narrows(&self.snap, t)));
            if !narrows {
                return None;
            }
            let failed = attempt.no_node.iter().any(|&x| self.snap.task(x).shape == shape);
            most += if failed { n.min(self.room_on(attempt, t)) } else { n };
        }
        let have = job.ready_task_num() + job.waiting_task_num() + job.pending_best_effort as i32;
        if have as i64 + most as i64 >= job.min_available as i64 {
            return None;
        }
        Some(Arc::new(RoomProof {
            growth: self.snap.growth(),
            version: job.version,
            binds: self.retries.proof_binds.clone(),
        }))
    }

    /// How many pods of `t`'s request the nodes the attempt placed pods on hold at most in
    /// their future idle resources (now, the attempt undone).
    fn room_on(&self, attempt: &Attempt, t: TaskId) -> usize {
        let req = &self.snap.task(t).resreq;
        let mut nodes: Vec<NodeId> = attempt.placed.iter().map(|&(_, n)| n).collect();
        nodes.sort_unstable();
        nodes.dedup();
        let mut total = 0usize;
        for n in nodes {
            let room = self.snap.node(n).future_idle();
            let mut fits = usize::MAX;
            for (name, need) in req.dims().filter(|(_, v)| *v >= MIN_RESOURCE) {
                // The k-th pod passes the resource check when k × need ≤ room + MIN_RESOURCE
                // (values are whole numbers; the margin covers rounding).
                let k = ((room.get(name) + MIN_RESOURCE) / need + 1e-9).floor();
                fits = fits.min(if k > 0.0 { k as usize } else { 0 });
            }
            total = total.saturating_add(fits);
        }
        total
    }

    fn record_try(&mut self, j: JobId, tried: Arc<FailedTry>) {
        if self.retries.recorded.len() <= j.idx() {
            self.retries.recorded.resize(self.snap.jobs.len().max(j.idx() + 1), None);
        }
        self.retries.recorded[j.idx()] = Some(tried);
    }

    /// Whether the session is still at its opening state and every attempt it made was a
    /// remembered failure it skipped: the next session over the same snapshot state would
    /// do exactly what this one did (see [`crate::retry::Settled`]).
    pub(crate) fn only_replayed(&self) -> bool {
        self.at_opening_state() && self.retries.fresh == 0
    }

    /// The failed attempts this session remembered, for the next session over the same
    /// snapshot revision and configuration (or a later one, for the room proofs); `None`
    /// when remembering was not allowed.
    pub(crate) fn take_retries(&mut self, conf: &SchedulerConfiguration) -> Option<RetryMemo> {
        if !self.retries.enabled {
            return None;
        }
        let _ = self.retries.proof_binds.list.set(std::mem::take(&mut self.retries.binds));
        let tries = std::mem::take(&mut self.retries.recorded);
        tracing::debug!(
            remembered = tries.iter().flatten().count(),
            skipped = self.retries.skipped,
            proven = self.retries.proven,
            changes = self.retries.changes,
            "failed attempts kept for the next cycle"
        );
        Some(RetryMemo { revision: self.snap.revision(), conf: conf.clone(), tries, settled: None })
    }
}

/// An attempt begun while remembering is allowed ([`Session::begin_try`]).
#[derive(Debug)]
pub struct TryStart {
    job: JobId,
    /// The job's trace, when the attempt begins at the opening state.
    before: Option<Trace>,
}
