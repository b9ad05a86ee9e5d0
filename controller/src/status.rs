//! The job's status after a step of the state machine, and its time to live once finished.
//!
//! Volcano writes the status in `syncJob` and `killPods` (`job_controller_actions.go`) and
//! deletes finished jobs in its garbage collector; here both are pure functions of the job,
//! the counts, the [`Decision`] and the time.

use std::time::Duration;

use volcano_api::job::{Job, JobCondition, JobPhase, JobStatus, TaskState};
use volcano_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volcano_api::k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::state::{Counts, Decision, Work};

/// The status a job gets when the controller first sees it (Volcano's `initJobStatus`):
/// Pending since `now`, with the spec's `minAvailable` and a Pending condition. `None` when
/// the job already has a phase.
pub fn initial(job: &Job, now: Timestamp) -> Option<JobStatus> {
    let mut status = job.status.clone().unwrap_or_default();
    if status.state.phase.is_some() {
        return None;
    }
    status.state.phase = Some(JobPhase::Pending);
    status.state.last_transition_time = Some(Time(now));
    status.min_available = job.spec.min_available;
    append_condition(&mut status.conditions, JobPhase::Pending, now);
    Some(status)
}

/// The job's status after `decision`, where `counts` are the counts its work left.
///
/// - On a [`Work::Sync`]: the counts, the spec's `minAvailable`, the phase the decision sets;
///   when anything in the status changed, `lastTransitionTime` becomes `now` and a condition
///   for the (possibly unchanged) phase is appended, as Volcano does.
/// - On a [`Work::Kill`] or [`Work::KillTargets`]: the counts, `version` bumped for a full
///   kill; when the decision sets a phase, `lastTransitionTime` becomes `now` and a condition
///   is appended; `runningDuration` becomes `lastTransitionTime − creationTimestamp`.
/// - On [`Work::None`] nothing changes.
///
/// Conditions keep one entry per phase: a phase entered again moves to the end with the new
/// time (Volcano's `appendJobCondition`). `state.reason` and `state.message` are left as
/// they were: Volcano's state machine writes neither.
pub fn next_status(job: &Job, counts: &Counts, decision: &Decision, now: Timestamp) -> JobStatus {
    let old = job.status.clone().unwrap_or_default();
    let mut status = old.clone();
    if decision.work == Work::None {
        return status;
    }
    set_counts(&mut status, counts);
    if decision.version_bump {
        status.version += 1;
    }
    if let Some(phase) = &decision.next_phase {
        status.state.phase = Some(phase.clone());
        if decision.retry_increment {
            status.retry_count += 1;
        }
    }
    match decision.work {
        Work::Sync => {
            status.min_available = job.spec.min_available;
            if status != old {
                transition(&mut status, now);
            }
        }
        _ => {
            if decision.next_phase.is_some() {
                transition(&mut status, now);
            }
            status.running_duration = running_duration(job, &status);
        }
    }
    status
}

fn set_counts(status: &mut JobStatus, counts: &Counts) {
    status.pending = counts.pending;
    status.running = counts.running;
    status.succeeded = counts.succeeded;
    status.failed = counts.failed;
    status.terminating = counts.terminating;
    status.unknown = counts.unknown;
    status.task_status_count =
        counts.tasks.iter().map(|(task, phases)| (task.clone(), TaskState { phase: phases.clone() })).collect();
}

fn transition(status: &mut JobStatus, now: Timestamp) {
    status.state.last_transition_time = Some(Time(now));
    let phase = status.state.phase.clone().unwrap_or(JobPhase::Pending);
    append_condition(&mut status.conditions, phase, now);
}

/// Appends a condition for `phase` at `now`, dropping an earlier one for the same phase.
pub fn append_condition(conditions: &mut Vec<JobCondition>, phase: JobPhase, now: Timestamp) {
    conditions.retain(|c| c.status != phase);
    conditions.push(JobCondition { status: phase, last_transition_time: Some(Time(now)) });
}

/// `lastTransitionTime − creationTimestamp` as a Go duration string, as Volcano writes
/// `runningDuration` on every kill; the old value when either time is missing.
fn running_duration(job: &Job, status: &JobStatus) -> Option<String> {
    let last = status.state.last_transition_time.as_ref();
    let created = job.metadata.creation_timestamp.as_ref();
    match (last, created) {
        (Some(last), Some(created)) => Some(go_duration(last.0.duration_since(created.0))),
        _ => status.running_duration.clone(),
    }
}

/// Formats a duration as Go's `time.Duration.String` does: `1h2m3.5s`, `1m30s`, `0s`,
/// `1.5ms`, `-2m0s`.
pub fn go_duration(d: SignedDuration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, scale) = match n {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("\u{b5}s", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, scale));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let seconds = fraction(n % 60_000_000_000, 1_000_000_000);
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{sign}{minutes}m{seconds}s")
    } else {
        format!("{sign}{seconds}s")
    }
}

/// `n / scale` with the fraction's trailing zeros dropped.
fn fraction(n: u128, scale: u128) -> String {
    let (whole, frac) = (n / scale, n % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Whether a phase is finished for the garbage collector (Completed, Failed, Terminated).
pub fn is_finished(phase: &JobPhase) -> bool {
    matches!(phase, JobPhase::Completed | JobPhase::Failed | JobPhase::Terminated)
}

/// The time left before a finished job is deleted for its `ttlSecondsAfterFinished`,
/// counted from the last transition: `Some(Duration::ZERO)` when it is due now, `None` when
/// the job has no TTL, is not finished, or has no transition time (Volcano's garbage
/// collector: `needsCleanup`, `timeLeft`).
pub fn ttl_expired(job: &Job, now: Timestamp) -> Option<Duration> {
    let ttl = job.spec.ttl_seconds_after_finished?;
    let status = job.status.as_ref()?;
    if !status.state.phase.as_ref().is_some_and(is_finished) {
        return None;
    }
    let finished = status.state.last_transition_time.as_ref()?.0;
    let expire = finished.checked_add(SignedDuration::from_secs(i64::from(ttl))).ok()?;
    let left = expire.duration_since(now);
    Some(if left.is_positive() { Duration::try_from(left).unwrap_or(Duration::MAX) } else { Duration::ZERO })
}
