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
//! A session that changed nothing goes further: when it committed and kept no statement,
//! every attempt it made was a skip, and closing it wrote nothing, the next session over
//! the same snapshot *state* ([`crate::Snapshot::state`]: not one object changed, read by
//! scheduling or not) would open with this session's memory, skip the same attempts in the
//! same order and close over the same statuses, so [`crate::run_cycle`] returns the outcome
//! again without opening a session ([`crate::retry::Settled`]).

use std::sync::Arc;

use volcano_api::conf::SchedulerConfiguration;

use crate::model::JobId;
use crate::retry::{FailedTry, RetryMemo, Trace};
use crate::session::Session;

/// A session's side of the memory: what it may skip, what it records.
#[derive(Debug, Default)]
pub(crate) struct Retries {
    /// Whether remembering is allowed in this session (no plugin reads the clock).
    enabled: bool,
    /// The previous session's memory, when it is valid for this one.
    known: Option<Arc<RetryMemo>>,
    /// This session's failed attempts, by job.
    recorded: Vec<Option<Arc<FailedTry>>>,
    /// Statements committed or kept so far (the session left its opening state).
    changes: u64,
    /// Attempts skipped in this session.
    pub(crate) skipped: u64,
    /// Failed attempts made (not skipped) and remembered in this session.
    fresh: u64,
}

impl Retries {
    pub(crate) fn new(enabled: bool, known: Option<Arc<RetryMemo>>) -> Retries {
        Retries { enabled, known: known.filter(|_| enabled), ..Default::default() }
    }
}

impl Session {
    /// Counts a statement that changed the session's state (committed or kept).
    pub(crate) fn note_change(&mut self) {
        self.retries.changes += 1;
    }

    /// Whether the session is still at its opening state, as far as remembered attempts go.
    pub fn at_opening_state(&self) -> bool {
        self.retries.enabled && self.retries.changes == 0
    }

    fn trace(&self, j: JobId) -> Trace {
        let job = self.snap.job(j);
        Trace {
            fit_errors: job.fit_errors.clone(),
            job_fit_error: job.job_fit_error.clone(),
            last_tx: job.tasks.iter().map(|&t| self.snap.task(t).last_tx).collect(),
        }
    }

    /// Whether job `j` is as `trace` says ([`Session::trace`] compared without building it).
    fn is_at(&self, j: JobId, trace: &Trace) -> bool {
        let job = self.snap.job(j);
        job.fit_errors == trace.fit_errors
            && job.job_fit_error == trace.job_fit_error
            && job.tasks.len() == trace.last_tx.len()
            && job.tasks.iter().zip(&trace.last_tx).all(|(&t, last)| self.snap.task(t).last_tx == *last)
    }

    /// Skips the attempt of job `j` when the previous session remembered it failing at this
    /// same state (see the module documentation): sets what the attempt left and returns
    /// `true`. Returns `false` when the job must be tried.
    pub fn replay_failed_try(&mut self, j: JobId) -> bool {
        if !self.at_opening_state() {
            return false;
        }
        let Some(known) = self.retries.known.clone() else { return false };
        let Some(Some(tried)) = known.tries.get(j.idx()) else { return false };
        if tried.key != self.snap.job(j).key || !self.is_at(j, &tried.before) {
            return false;
        }
        let tried = tried.clone();
        let after = &tried.after;
        // Only the tasks the attempt had placed have a last placement to set (a write copies
        // the shared chunk of tasks it falls in).
        for (i, last) in after.last_tx.iter().enumerate().filter(|(_, l)| l.is_some()) {
            let t = self.snap.job(j).tasks[i];
            self.snap.tasks[t.idx()].last_tx = *last;
        }
        let job = &mut self.snap.jobs[j.idx()];
        job.fit_errors = after.fit_errors.clone();
        job.job_fit_error = after.job_fit_error.clone();
        tracing::trace!(job = %job.key, "allocate: skipped, it failed at this same state last cycle");
        self.record_try(j, tried);
        self.retries.skipped += 1;
        true
    }

    /// Starts an attempt of job `j`: its trace when the attempt may be remembered.
    pub fn begin_try(&self, j: JobId) -> Option<TryStart> {
        self.at_opening_state().then(|| TryStart { job: j, before: self.trace(j) })
    }

    /// Remembers a failed attempt (its statement discarded) begun at the opening state.
    pub fn remember_failed_try(&mut self, start: TryStart) {
        if !self.at_opening_state() {
            return;
        }
        let j = start.job;
        let after = self.trace(j);
        let tried = FailedTry { key: self.snap.job(j).key.clone(), before: start.before, after };
        self.record_try(j, Arc::new(tried));
        self.retries.fresh += 1;
    }

    fn record_try(&mut self, j: JobId, tried: Arc<FailedTry>) {
        if self.retries.recorded.len() <= j.idx() {
            self.retries.recorded.resize(self.snap.jobs.len().max(j.idx() + 1), None);
        }
        self.retries.recorded[j.idx()] = Some(tried);
    }

    /// The failed attempts this session remembered, for the next session over the same
    /// snapshot revision and configuration; `None` when remembering was not allowed.
    /// Whether the session is still at its opening state and every attempt it made was a
    /// remembered failure it skipped: the next session over the same snapshot state would
    /// do exactly what this one did (see [`crate::retry::Settled`]).
    pub(crate) fn only_replayed(&self) -> bool {
        self.at_opening_state() && self.retries.fresh == 0
    }

    pub(crate) fn take_retries(&mut self, conf: &SchedulerConfiguration) -> Option<RetryMemo> {
        if !self.retries.enabled {
            return None;
        }
        let tries = std::mem::take(&mut self.retries.recorded);
        tracing::debug!(
            remembered = tries.iter().flatten().count(),
            skipped = self.retries.skipped,
            changes = self.retries.changes,
            "failed attempts kept for the next cycle"
        );
        Some(RetryMemo { revision: self.snap.revision(), conf: conf.clone(), tries, settled: None })
    }
}

/// An attempt begun at the session's opening state ([`Session::begin_try`]).
#[derive(Debug)]
pub struct TryStart {
    job: JobId,
    before: Trace,
}
