//! The job state machine (Volcano's `pkg/controllers/job/state`): for a job in some phase and
//! an action, what to do to its pods ([`Work`]) and where the job goes ([`Decision`]).
//!
//! Volcano runs each state's work (sync or kill), counts the pods as the work leaves them,
//! and then lets the state's update function pick the next phase from those counts. The
//! same two steps here, without IO:
//! 1. [`work`] says what to do; it needs no counts.
//! 2. The shell does it (or, in tests and the simulator, [`Counts::after`] predicts the
//!    counts it leaves), and [`decide`] takes those counts and says how the status moves.
//!
//! [`decide`] returns the work too, so that one call describes a whole step.

use std::collections::BTreeMap;

use volcano_api::bus::Action;
use volcano_api::job::{Job, JobPhase, JobStatus, DEFAULT_MAX_RETRY};
use volcano_api::k8s_openapi::api::core::v1::Pod;

use crate::events::{is_out_of_sync, pod_partition, pod_phase, pod_task, Request};

/// Pods by phase, for the job and per task: what `status` counts.
///
/// Phases are Kubernetes pod phases (`Pending`, `Running`, `Succeeded`, `Failed`, and
/// `Unknown` for anything else); `terminating` counts pods being deleted, whatever their
/// phase, and is not in the per-task counts (as in Volcano).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pending pods.
    pub pending: i32,
    /// Running pods.
    pub running: i32,
    /// Succeeded pods.
    pub succeeded: i32,
    /// Failed pods.
    pub failed: i32,
    /// Pods being deleted.
    pub terminating: i32,
    /// Pods in any other phase.
    pub unknown: i32,
    /// Task name → pod phase → pods (`status.taskStatusCount`).
    pub tasks: BTreeMap<String, BTreeMap<String, i32>>,
}

/// The phase name a pod is counted under (Volcano's `classifyAndAddUpPodBaseOnPhase`).
fn phase_class(phase: &str) -> &'static str {
    match phase {
        "Pending" => "Pending",
        "Running" => "Running",
        "Succeeded" => "Succeeded",
        "Failed" => "Failed",
        _ => "Unknown",
    }
}

impl Counts {
    /// The counts a job's status holds (what Volcano keeps when it does not recount).
    pub fn from_status(status: &JobStatus) -> Counts {
        Counts {
            pending: status.pending,
            running: status.running,
            succeeded: status.succeeded,
            failed: status.failed,
            terminating: status.terminating,
            unknown: status.unknown,
            tasks: status.task_status_count.iter().map(|(k, v)| (k.clone(), v.phase.clone())).collect(),
        }
    }

    /// Counts a pod in `phase` of `task` (a pod without a task is counted for the job only).
    pub fn add(&mut self, task: Option<&str>, phase: &str) {
        let class = phase_class(phase);
        let slot = match class {
            "Pending" => &mut self.pending,
            "Running" => &mut self.running,
            "Succeeded" => &mut self.succeeded,
            "Failed" => &mut self.failed,
            _ => &mut self.unknown,
        };
        *slot += 1;
        if let Some(task) = task {
            *self.tasks.entry(task.to_string()).or_default().entry(class.to_string()).or_default() += 1;
        }
    }

    /// Counts a pod as it is: being deleted (terminating), or by phase.
    pub fn add_pod(&mut self, pod: &Pod) {
        if pod.metadata.deletion_timestamp.is_some() {
            self.terminating += 1;
        } else {
            self.add(pod_task(pod), pod_phase(pod));
        }
    }

    /// Succeeded pods of a task.
    pub fn task_succeeded(&self, task: &str) -> Option<i32> {
        self.tasks.get(task).map(|p| p.get("Succeeded").copied().unwrap_or(0))
    }

    /// The counts Volcano arrives at after doing `work` to the job's `pods` (the controller's
    /// store: pods with the job's task annotation), when every API call succeeds.
    ///
    /// - [`Work::Kill`]: pods already being deleted, and the ones deleted, are terminating;
    ///   retained pods (Succeeded and Failed with [`Retain::Soft`]) are counted by phase.
    /// - [`Work::KillTargets`]: the targeted pods are terminating, the others counted by
    ///   phase.
    /// - [`Work::Sync`]: pods `<job>-<task>-<i>` for `i` below the task's replicas are
    ///   counted (being deleted: terminating; marked out of sync: by phase *and* as
    ///   terminating, as Volcano counts a pod it then deletes); other pods of the job's tasks
    ///   are deleted (terminating); when `create_missing`, each missing pod is counted
    ///   Pending, as the API server returns a created pod. Pods of tasks the spec no longer
    ///   has are not counted. Whether missing pods are created (the PodGroup left Pending,
    ///   `dependsOn` met) is for the planner to say; when the PodGroup is still Pending,
    ///   Volcano does not recount at all: use [`Counts::from_status`].
    /// - [`Work::None`]: the status's counts.
    pub fn after<'a>(job: &Job, work: &Work, pods: impl IntoIterator<Item = &'a Pod>, create_missing: bool) -> Counts {
        let mut counts = Counts::default();
        match work {
            Work::None => {
                return job.status.as_ref().map(Counts::from_status).unwrap_or_default();
            }
            Work::Kill { retain } => {
                for pod in pods {
                    let retained = *retain == Retain::Soft && matches!(pod_phase(pod), "Succeeded" | "Failed");
                    if pod.metadata.deletion_timestamp.is_some() || !retained {
                        counts.terminating += 1;
                    } else {
                        counts.add(pod_task(pod), pod_phase(pod));
                    }
                }
            }
            Work::KillTargets(target) => {
                for pod in pods {
                    if pod.metadata.deletion_timestamp.is_some() || target.covers(pod) {
                        counts.terminating += 1;
                    } else {
                        counts.add(pod_task(pod), pod_phase(pod));
                    }
                }
            }
            Work::Sync => {
                let job_name = job.metadata.name.as_deref().unwrap_or_default();
                let mut by_name: BTreeMap<(&str, &str), &Pod> = BTreeMap::new();
                for pod in pods {
                    if let (Some(task), Some(name)) = (pod_task(pod), pod.metadata.name.as_deref()) {
                        by_name.insert((task, name), pod);
                    }
                }
                for task in &job.spec.tasks {
                    let tname = task.name();
                    let mut expected = Vec::new();
                    for i in 0..task.replicas.max(0) {
                        let name = format!("{job_name}-{tname}-{i}");
                        match by_name.get(&(tname, name.as_str())) {
                            Some(pod) if pod.metadata.deletion_timestamp.is_some() => counts.terminating += 1,
                            Some(pod) => {
                                if is_out_of_sync(pod) {
                                    counts.terminating += 1;
                                }
                                counts.add(Some(tname), pod_phase(pod));
                            }
                            None if create_missing => counts.add(Some(tname), "Pending"),
                            None => {}
                        }
                        expected.push(name);
                    }
                    let extra = by_name.keys().filter(|(t, n)| *t == tname && !expected.iter().any(|e| e == n)).count();
                    counts.terminating += i32::try_from(extra).unwrap_or(i32::MAX);
                }
            }
        }
        counts
    }
}

/// Which finished pods a kill keeps (Volcano's `PodRetainPhase`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retain {
    /// Keep Succeeded and Failed pods.
    Soft,
    /// Keep nothing.
    None,
}

/// The pods a targeted restart kills (Volcano's `state.Target`). Names are empty where the
/// request had none (a `RestartTask` command names no task, and then kills nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every pod of a task.
    Task {
        /// The task.
        task: String,
    },
    /// One pod.
    Pod {
        /// The pod's task.
        task: String,
        /// The pod.
        pod: String,
    },
    /// The pods of one partition of a task (`volcano.sh/partition-id`).
    Partition {
        /// The task.
        task: String,
        /// The partition.
        partition: String,
    },
}

impl Target {
    /// The target of a targeted restart asked for by `req` (Volcano's `GetStateAction`);
    /// `None` for the other actions.
    pub fn of(action: &Action, req: &Request) -> Option<Target> {
        let task = req.task.clone().unwrap_or_default();
        match action {
            Action::RestartTask => Some(Target::Task { task }),
            Action::RestartPod => Some(Target::Pod { task, pod: req.pod.clone().unwrap_or_default() }),
            Action::RestartPartition => {
                Some(Target::Partition { task, partition: req.partition.clone().unwrap_or_default() })
            }
            _ => None,
        }
    }

    /// Whether the target covers `pod`.
    pub fn covers(&self, pod: &Pod) -> bool {
        let in_task = |task: &str| pod_task(pod) == Some(task);
        match self {
            Target::Task { task } => in_task(task),
            Target::Pod { task, pod: name } => in_task(task) && pod.metadata.name.as_deref() == Some(name.as_str()),
            Target::Partition { task, partition } => in_task(task) && pod_partition(pod) == Some(partition.as_str()),
        }
    }
}

/// What to do to the job's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// SyncJob: create missing pods, delete surplus and out-of-sync ones, recount.
    Sync,
    /// KillJob: mark the pods out of sync and delete them (but the retained ones), bump
    /// `status.version`, delete the PodGroup, recount.
    Kill {
        /// Which finished pods to keep.
        retain: Retain,
    },
    /// KillTarget: mark and delete the targeted pods only; the version and the PodGroup stay.
    KillTargets(Target),
    /// Nothing: the job is being deleted.
    None,
}

/// One step of the state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What to do to the pods.
    pub work: Work,
    /// The phase the update sets, when it sets one (Volcano's update function returning
    /// `true`): a transition is recorded even when the phase is the same.
    pub next_phase: Option<JobPhase>,
    /// `status.retryCount` goes up by one (with the transition).
    pub retry_increment: bool,
    /// `status.version` goes up by one (every [`Work::Kill`]).
    pub version_bump: bool,
    /// The PodGroup is deleted after the status is written (every [`Work::Kill`]).
    pub delete_pod_group: bool,
}

/// The job's phase as the state machine reads it: no phase, or one Volcano does not know,
/// is Pending.
pub fn phase_of(job: &Job) -> JobPhase {
    match job.status.as_ref().and_then(|s| s.state.phase.clone()) {
        Some(p) if JobPhase::KNOWN.contains(&p) => p,
        _ => JobPhase::Pending,
    }
}

/// The job's `maxRetry`, 0 read as the default (3).
pub fn max_retry(job: &Job) -> i32 {
    if job.spec.max_retry == 0 {
        DEFAULT_MAX_RETRY
    } else {
        job.spec.max_retry
    }
}

/// The sum of the tasks' replicas.
pub fn total_replicas(job: &Job) -> i32 {
    job.spec.tasks.iter().map(|t| t.replicas).sum()
}

/// The sum of the tasks' `minAvailable` (replicas where unset).
pub fn total_task_min_available(job: &Job) -> i32 {
    job.spec.tasks.iter().map(|t| t.min_available.unwrap_or(t.replicas)).sum()
}

fn retry_count(job: &Job) -> i32 {
    job.status.as_ref().map_or(0, |s| s.retry_count)
}

fn is_restart_target(action: &Action) -> bool {
    matches!(action, Action::RestartTask | Action::RestartPod | Action::RestartPartition)
}

/// A full kill; on the job's last retry (`retryCount ≥ maxRetry − 1`) Succeeded and Failed
/// pods are kept whatever was asked, so that the final state of a failing job stays visible.
fn kill(job: &Job, retain: Retain) -> Work {
    let retain = if retry_count(job) >= max_retry(job) - 1 { Retain::Soft } else { retain };
    Work::Kill { retain }
}

fn targets(target: Option<&Target>) -> Work {
    // A targeted restart always has a target (see `Target::of`); without one nothing is
    // killed, as Volcano does for a target that matches no pod.
    Work::KillTargets(target.cloned().unwrap_or(Target::Task { task: String::new() }))
}

/// What `action` does to the pods of `job` in its current phase (the table in the
/// crate's `docs/jobs.md`). `target` is [`Target::of`] the action and its request.
pub fn work(job: &Job, action: &Action, target: Option<&Target>) -> Work {
    if job.metadata.deletion_timestamp.is_some() {
        return Work::None;
    }
    match phase_of(job) {
        JobPhase::Pending | JobPhase::Running => match action {
            Action::RestartJob => kill(job, Retain::None),
            a if is_restart_target(a) => targets(target),
            Action::AbortJob | Action::CompleteJob | Action::TerminateJob => kill(job, Retain::Soft),
            _ => Work::Sync,
        },
        JobPhase::Restarting => match action {
            Action::SyncJob => Work::Sync,
            a if is_restart_target(a) => targets(target),
            _ => kill(job, Retain::None),
        },
        // Aborting, Aborted, Completing, Terminating and the finished phases kill softly
        // whatever the action.
        _ => kill(job, Retain::Soft),
    }
}

/// One step of the state machine for `job` and `action`, where `counts` are the counts the
/// work leaves (see the module documentation and [`Counts::after`]).
pub fn decide(job: &Job, counts: &Counts, action: &Action, target: Option<&Target>) -> Decision {
    let work = work(job, action, target);
    let full_kill = matches!(work, Work::Kill { .. });
    let mut d = Decision {
        work,
        next_phase: None,
        retry_increment: false,
        version_bump: full_kill,
        delete_pod_group: full_kill,
    };
    if d.work == Work::None {
        return d;
    }
    let mut to = |phase: JobPhase, retry: bool| {
        d.next_phase = Some(phase);
        d.retry_increment = retry;
    };
    let phase = phase_of(job);
    match phase {
        JobPhase::Pending | JobPhase::Running => match action {
            Action::RestartJob => to(JobPhase::Restarting, true),
            a if is_restart_target(a) => to(JobPhase::Restarting, true),
            Action::AbortJob => to(JobPhase::Aborting, false),
            Action::CompleteJob => to(JobPhase::Completing, false),
            Action::TerminateJob => to(JobPhase::Terminating, false),
            _ if phase == JobPhase::Pending => {
                if job.spec.min_available <= counts.running + counts.succeeded + counts.failed {
                    to(JobPhase::Running, false);
                }
            }
            _ => {
                if let Some(p) = running_sync(job, counts) {
                    to(p, false);
                }
            }
        },
        JobPhase::Restarting => {
            if retry_count(job) >= max_retry(job) {
                to(JobPhase::Failed, false);
            } else {
                // A sync writes the spec's minAvailable into the status before the update
                // runs; a kill keeps the status's.
                let min_available = if d.work == Work::Sync {
                    job.spec.min_available
                } else {
                    job.status.as_ref().map_or(0, |s| s.min_available)
                };
                if total_replicas(job) - counts.terminating >= min_available {
                    to(JobPhase::Pending, false);
                }
            }
        }
        JobPhase::Aborting | JobPhase::Aborted if *action == Action::ResumeJob => to(JobPhase::Restarting, true),
        JobPhase::Aborting | JobPhase::Completing | JobPhase::Terminating
            if counts.terminating == 0 && counts.pending == 0 && counts.running == 0 =>
        {
            let next = match phase {
                JobPhase::Aborting => JobPhase::Aborted,
                JobPhase::Completing => JobPhase::Completed,
                _ => JobPhase::Terminated,
            };
            to(next, false);
        }
        // Aborting, Completing, Terminating with pods left; Aborted (but ResumeJob), Completed,
        // Terminated, Failed: no phase change.
        _ => {}
    }
    d
}

/// The finished phase a step enters, if it enters one: [`JobPhase::Completed`] or
/// [`JobPhase::Failed`], from a job in phase `from` ([`phase_of`] before the step).
///
/// These are the transitions Volcano counts in `volcano_job_completed_phase_count` and
/// `volcano_job_failed_phase_count`, in the update functions that make them (Running and
/// Completing to Completed, Running and Restarting to Failed). A step of a job already
/// finished enters nothing (its phase does not change), so a transition is counted once
/// however often the job is reconciled afterwards.
pub fn entered_finished(from: &JobPhase, decision: &Decision) -> Option<JobPhase> {
    match &decision.next_phase {
        Some(p @ (JobPhase::Completed | JobPhase::Failed)) if p != from => Some(p.clone()),
        _ => None,
    }
}

/// Where a Running job goes on a sync (Volcano's `runningState` update function).
fn running_sync(job: &Job, counts: &Counts) -> Option<JobPhase> {
    let replicas = total_replicas(job);
    if replicas == 0 {
        // Scaled down to nothing: keep the phase.
        return None;
    }
    let min_success = job.spec.min_success;
    if min_success.is_some_and(|m| counts.succeeded >= m) {
        return Some(JobPhase::Completed);
    }
    if counts.succeeded + counts.failed == replicas {
        if job.spec.min_available >= total_task_min_available(job) {
            for task in &job.spec.tasks {
                let Some(min) = task.min_available else { continue };
                if counts.task_succeeded(task.name()).is_some_and(|s| s < min) {
                    return Some(JobPhase::Failed);
                }
            }
        }
        return Some(if min_success.is_some_and(|m| counts.succeeded < m) {
            JobPhase::Failed
        } else if counts.succeeded >= job.spec.min_available {
            JobPhase::Completed
        } else {
            JobPhase::Failed
        });
    }
    if counts.pending > replicas - job.spec.min_available {
        return Some(JobPhase::Pending);
    }
    None
}
