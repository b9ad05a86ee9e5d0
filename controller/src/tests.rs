//! Unit tests of the decision logic: one case per row of the state machine table, then
//! applyPolicies, delayed actions, events from pod transitions, status and TTL.

use std::collections::BTreeMap;
use std::time::Duration;

use volcano_api::bus::{Action, Command, Event};
use volcano_api::crd::{PodGroup, PodGroupPhase, PodGroupStatus, TASK_SPEC_KEY};
use volcano_api::job::{Job, JobPhase, JobSpec, JobStatus, LifecyclePolicy, TaskSpec};
use volcano_api::k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStatus, Pod, PodStatus,
};
use volcano_api::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use volcano_api::k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::events::{self, Request, JOB_NAME_KEY, JOB_VERSION_KEY, OUT_OF_SYNC_KEY, PARTITION_ID_KEY};
use crate::policies::{self, DelayedActions};
use crate::state::{self, Counts, Decision, Retain, Target, Work};
use crate::status;

// ---------------------------------------------------------------------------------------
// Builders

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// Job `ns/job`: task `a` (3 replicas, minAvailable 1) and `b` (2 replicas, minAvailable
/// 2), job minAvailable 3, maxRetry 3, in `phase` after `retry` retries, version 1.
fn job(phase: JobPhase, retry: i32) -> Job {
    let task = |name: &str, replicas, min| TaskSpec {
        name: Some(name.into()),
        replicas,
        min_available: Some(min),
        ..Default::default()
    };
    let mut j = Job::new(
        "job",
        JobSpec { min_available: 3, max_retry: 3, tasks: vec![task("a", 3, 1), task("b", 2, 2)], ..Default::default() },
    );
    j.metadata.namespace = Some("ns".into());
    j.metadata.uid = Some("job-uid".into());
    j.metadata.creation_timestamp = Some(Time(t(0)));
    let mut st = JobStatus { version: 1, retry_count: retry, min_available: 3, ..Default::default() };
    st.state.phase = Some(phase);
    st.state.last_transition_time = Some(Time(t(10)));
    j.status = Some(st);
    j
}

fn pod(name: &str, task: &str, phase: &str) -> Pod {
    let annotations: BTreeMap<String, String> = [(TASK_SPEC_KEY, task), (JOB_NAME_KEY, "job"), (JOB_VERSION_KEY, "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            annotations: Some(annotations),
            labels: Some([(PARTITION_ID_KEY.to_string(), "0".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch.volcano.sh/v1alpha1".into(),
                kind: "Job".into(),
                name: "job".into(),
                uid: "job-uid".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
        ..Default::default()
    }
}

/// `p` in a new resource version and `phase`.
fn moved(p: &Pod, phase: &str) -> Pod {
    let mut n = p.clone();
    let rv: u64 = p.metadata.resource_version.as_deref().unwrap_or("0").parse().unwrap();
    n.metadata.resource_version = Some((rv + 1).to_string());
    n.status.as_mut().unwrap().phase = Some(phase.into());
    n
}

fn with_restarts(mut p: Pod, restarts: i32) -> Pod {
    p.status.as_mut().unwrap().container_statuses =
        Some(vec![ContainerStatus { name: "c".into(), restart_count: restarts, ..Default::default() }]);
    p
}

/// Counts with per-task Succeeded/Failed where given.
fn counts(pending: i32, running: i32, succeeded: i32, failed: i32, terminating: i32) -> Counts {
    Counts { pending, running, succeeded, failed, terminating, ..Default::default() }
}

fn with_tasks(mut c: Counts, tasks: &[(&str, &str, i32)]) -> Counts {
    for (task, phase, n) in tasks {
        c.tasks.entry(task.to_string()).or_default().insert(phase.to_string(), *n);
    }
    c
}

fn req(event: Event) -> Request {
    let mut r = Request::for_job("ns", "job", event);
    r.job_uid = Some("job-uid".into());
    r.task = Some("a".into());
    r.pod = Some("job-a-0".into());
    r.pod_uid = Some("uid-job-a-0".into());
    r.partition = Some("0".into());
    r.job_version = 1;
    r
}

fn policy(events: &[Event], action: Action, timeout: Option<&str>) -> LifecyclePolicy {
    LifecyclePolicy {
        action: Some(action),
        events: events.to_vec(),
        timeout: timeout.map(str::to_string),
        ..Default::default()
    }
}

fn exit_policy(code: i32, action: Action) -> LifecyclePolicy {
    LifecyclePolicy { action: Some(action), exit_code: Some(code), ..Default::default() }
}

// ---------------------------------------------------------------------------------------
// The state machine: one case per row of the table in docs/jobs.md (spec §6.3).

struct Row {
    name: &'static str,
    phase: JobPhase,
    retry: i32,
    action: Action,
    /// The counts the work leaves.
    counts: Counts,
    tweak: fn(&mut Job),
    work: Work,
    next: Option<JobPhase>,
    retry_increment: bool,
}

fn none(_: &mut Job) {}

const KILL_NONE: Work = Work::Kill { retain: Retain::None };
const KILL_SOFT: Work = Work::Kill { retain: Retain::Soft };

fn task_target() -> Work {
    Work::KillTargets(Target::Task { task: "a".into() })
}

fn rows() -> Vec<Row> {
    use Action as A;
    use JobPhase as P;
    let row = |name, phase, action, counts, work, next, retry_increment| Row {
        name,
        phase,
        retry: 0,
        action,
        counts,
        tweak: none,
        work,
        next,
        retry_increment,
    };
    let c0 = Counts::default;
    let pod_target = Work::KillTargets(Target::Pod { task: "a".into(), pod: "job-a-0".into() });
    let part_target = Work::KillTargets(Target::Partition { task: "a".into(), partition: "0".into() });
    let mut rows = Vec::new();
    for phase in [P::Pending, P::Running] {
        let p = phase.as_str();
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        rows.extend([
            row(
                leak(format!("{p}_restart_job_kills_all_to_restarting")),
                phase.clone(),
                A::RestartJob,
                c0(),
                KILL_NONE,
                Some(P::Restarting),
                true,
            ),
            row(
                leak(format!("{p}_restart_task_kills_task_to_restarting")),
                phase.clone(),
                A::RestartTask,
                c0(),
                task_target(),
                Some(P::Restarting),
                true,
            ),
            row(
                leak(format!("{p}_restart_pod_kills_pod_to_restarting")),
                phase.clone(),
                A::RestartPod,
                c0(),
                pod_target.clone(),
                Some(P::Restarting),
                true,
            ),
            row(
                leak(format!("{p}_restart_partition_kills_partition_to_restarting")),
                phase.clone(),
                A::RestartPartition,
                c0(),
                part_target.clone(),
                Some(P::Restarting),
                true,
            ),
            row(
                leak(format!("{p}_abort_job_kills_soft_to_aborting")),
                phase.clone(),
                A::AbortJob,
                c0(),
                KILL_SOFT,
                Some(P::Aborting),
                false,
            ),
            row(
                leak(format!("{p}_complete_job_kills_soft_to_completing")),
                phase.clone(),
                A::CompleteJob,
                c0(),
                KILL_SOFT,
                Some(P::Completing),
                false,
            ),
            row(
                leak(format!("{p}_terminate_job_kills_soft_to_terminating")),
                phase.clone(),
                A::TerminateJob,
                c0(),
                KILL_SOFT,
                Some(P::Terminating),
                false,
            ),
        ]);
    }
    rows.extend([
        row(
            "Pending_sync_to_running_when_min_available_run_or_finished",
            P::Pending,
            A::SyncJob,
            counts(2, 1, 1, 1, 0),
            Work::Sync,
            Some(P::Running),
            false,
        ),
        row(
            "Pending_sync_stays_below_min_available",
            P::Pending,
            A::SyncJob,
            counts(3, 2, 0, 0, 0),
            Work::Sync,
            None,
            false,
        ),
        row("Pending_resume_job_is_a_sync", P::Pending, A::ResumeJob, counts(5, 0, 0, 0, 0), Work::Sync, None, false),
        Row {
            tweak: |j| j.spec.min_success = Some(2),
            ..row(
                "Running_sync_min_success_reached_completes",
                P::Running,
                A::SyncJob,
                counts(0, 3, 2, 0, 0),
                Work::Sync,
                Some(P::Completed),
                false,
            )
        },
        row(
            "Running_sync_all_finished_task_below_min_available_fails",
            P::Running,
            A::SyncJob,
            with_tasks(counts(0, 0, 4, 1, 0), &[("a", "Succeeded", 3), ("b", "Succeeded", 1), ("b", "Failed", 1)]),
            Work::Sync,
            Some(P::Failed),
            false,
        ),
        Row {
            tweak: |j| j.spec.min_available = 2,
            ..row(
                "Running_sync_all_finished_task_check_skipped_when_job_min_below_task_mins",
                P::Running,
                A::SyncJob,
                with_tasks(counts(0, 0, 4, 1, 0), &[("a", "Succeeded", 3), ("b", "Succeeded", 1), ("b", "Failed", 1)]),
                Work::Sync,
                Some(P::Completed),
                false,
            )
        },
        Row {
            tweak: |j| j.spec.min_success = Some(5),
            ..row(
                "Running_sync_all_finished_min_success_unmet_fails",
                P::Running,
                A::SyncJob,
                with_tasks(counts(0, 0, 4, 1, 0), &[("a", "Succeeded", 2), ("a", "Failed", 1), ("b", "Succeeded", 2)]),
                Work::Sync,
                Some(P::Failed),
                false,
            )
        },
        row(
            "Running_sync_all_finished_succeeded_reach_min_available_completes",
            P::Running,
            A::SyncJob,
            with_tasks(counts(0, 0, 4, 1, 0), &[("a", "Succeeded", 2), ("a", "Failed", 1), ("b", "Succeeded", 2)]),
            Work::Sync,
            Some(P::Completed),
            false,
        ),
        row(
            "Running_sync_all_finished_succeeded_below_min_available_fails",
            P::Running,
            A::SyncJob,
            counts(0, 0, 2, 3, 0),
            Work::Sync,
            Some(P::Failed),
            false,
        ),
        row(
            "Running_sync_too_many_pending_back_to_pending",
            P::Running,
            A::SyncJob,
            counts(3, 2, 0, 0, 0),
            Work::Sync,
            Some(P::Pending),
            false,
        ),
        row("Running_sync_running_stays", P::Running, A::SyncJob, counts(2, 3, 0, 0, 0), Work::Sync, None, false),
        Row {
            tweak: |j| j.spec.tasks.iter_mut().for_each(|t| t.replicas = 0),
            ..row("Running_sync_scaled_to_zero_keeps_phase", P::Running, A::SyncJob, c0(), Work::Sync, None, false)
        },
        row("Running_resume_job_is_a_sync", P::Running, A::ResumeJob, counts(0, 5, 0, 0, 0), Work::Sync, None, false),
        Row {
            retry: 3,
            ..row(
                "Restarting_sync_max_retry_reached_fails",
                P::Restarting,
                A::SyncJob,
                c0(),
                Work::Sync,
                Some(P::Failed),
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_sync_enough_pods_released_to_pending",
                P::Restarting,
                A::SyncJob,
                counts(0, 0, 0, 0, 2),
                Work::Sync,
                Some(P::Pending),
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_sync_still_terminating_stays",
                P::Restarting,
                A::SyncJob,
                counts(0, 0, 0, 0, 3),
                Work::Sync,
                None,
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_restart_task_kills_targets",
                P::Restarting,
                A::RestartTask,
                counts(0, 0, 0, 0, 3),
                task_target(),
                None,
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_restart_pod_kills_targets_to_pending",
                P::Restarting,
                A::RestartPod,
                counts(0, 0, 0, 0, 1),
                pod_target.clone(),
                Some(P::Pending),
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_restart_partition_kills_targets",
                P::Restarting,
                A::RestartPartition,
                counts(0, 0, 0, 0, 1),
                part_target.clone(),
                Some(P::Pending),
                false,
            )
        },
        Row {
            retry: 1,
            ..row(
                "Restarting_other_action_kills_all",
                P::Restarting,
                A::AbortJob,
                counts(0, 0, 0, 0, 5),
                KILL_NONE,
                None,
                false,
            )
        },
        Row {
            retry: 3,
            ..row(
                "Restarting_other_action_max_retry_fails",
                P::Restarting,
                A::RestartJob,
                counts(0, 0, 0, 0, 5),
                KILL_SOFT,
                Some(P::Failed),
                false,
            )
        },
        row(
            "Aborting_resume_job_to_restarting",
            P::Aborting,
            A::ResumeJob,
            counts(0, 0, 0, 0, 2),
            KILL_SOFT,
            Some(P::Restarting),
            true,
        ),
        row(
            "Aborting_other_with_live_pods_stays",
            P::Aborting,
            A::SyncJob,
            counts(0, 0, 1, 0, 2),
            KILL_SOFT,
            None,
            false,
        ),
        row(
            "Aborting_other_nothing_left_to_aborted",
            P::Aborting,
            A::SyncJob,
            counts(0, 0, 1, 1, 0),
            KILL_SOFT,
            Some(P::Aborted),
            false,
        ),
        row("Aborted_resume_job_to_restarting", P::Aborted, A::ResumeJob, c0(), KILL_SOFT, Some(P::Restarting), true),
        row("Aborted_other_keeps_killing", P::Aborted, A::RestartJob, c0(), KILL_SOFT, None, false),
        row(
            "Completing_any_with_live_pods_stays",
            P::Completing,
            A::SyncJob,
            counts(0, 1, 2, 0, 0),
            KILL_SOFT,
            None,
            false,
        ),
        row(
            "Completing_any_nothing_left_to_completed",
            P::Completing,
            A::RestartJob,
            counts(0, 0, 2, 0, 0),
            KILL_SOFT,
            Some(P::Completed),
            false,
        ),
        row(
            "Terminating_any_with_live_pods_stays",
            P::Terminating,
            A::SyncJob,
            counts(1, 0, 0, 0, 0),
            KILL_SOFT,
            None,
            false,
        ),
        row(
            "Terminating_any_nothing_left_to_terminated",
            P::Terminating,
            A::ResumeJob,
            counts(0, 0, 0, 3, 0),
            KILL_SOFT,
            Some(P::Terminated),
            false,
        ),
        row("Completed_any_kills_soft_without_change", P::Completed, A::RestartJob, c0(), KILL_SOFT, None, false),
        row("Terminated_any_kills_soft_without_change", P::Terminated, A::ResumeJob, c0(), KILL_SOFT, None, false),
        row("Failed_any_kills_soft_without_change", P::Failed, A::SyncJob, c0(), KILL_SOFT, None, false),
        Row {
            retry: 2,
            ..row(
                "Running_restart_job_on_last_retry_kills_soft",
                P::Running,
                A::RestartJob,
                c0(),
                KILL_SOFT,
                Some(P::Restarting),
                true,
            )
        },
        Row {
            tweak: |j| j.status.as_mut().unwrap().state.phase = None,
            ..row(
                "no_phase_is_pending",
                P::Pending,
                A::SyncJob,
                counts(0, 3, 0, 0, 0),
                Work::Sync,
                Some(P::Running),
                false,
            )
        },
        Row {
            tweak: |j| j.status.as_mut().unwrap().state.phase = Some(JobPhase::Other("Suspended".into())),
            ..row("unknown_phase_is_pending", P::Pending, A::AbortJob, c0(), KILL_SOFT, Some(P::Aborting), false)
        },
        Row {
            tweak: |j| j.metadata.deletion_timestamp = Some(Time(t(5))),
            ..row("deleted_job_does_nothing", P::Running, A::RestartJob, c0(), Work::None, None, false)
        },
    ]);
    rows
}

#[test]
fn state_machine_table() {
    let mut failures = Vec::new();
    for row in rows() {
        let mut j = job(row.phase.clone(), row.retry);
        (row.tweak)(&mut j);
        let r = req(Event::PodFailed);
        let target = Target::of(&row.action, &r);
        let d = state::decide(&j, &row.counts, &row.action, target.as_ref());
        let full = matches!(row.work, Work::Kill { .. });
        let want = Decision {
            work: row.work.clone(),
            next_phase: row.next.clone(),
            retry_increment: row.retry_increment,
            version_bump: full,
            delete_pod_group: full,
        };
        assert_eq!(state::work(&j, &row.action, target.as_ref()), d.work, "{}: work() and decide() differ", row.name);
        if d != want {
            failures.push(format!("{}:\n   got {d:?}\n  want {want:?}", row.name));
        }
    }
    assert!(failures.is_empty(), "{} rows differ:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn restarting_uses_the_status_min_available_on_a_kill_and_the_spec_one_on_a_sync() {
    let mut j = job(JobPhase::Restarting, 1);
    j.spec.min_available = 2;
    j.status.as_mut().unwrap().min_available = 4;
    let c = counts(0, 0, 0, 0, 2);
    assert_eq!(state::decide(&j, &c, &Action::SyncJob, None).next_phase, Some(JobPhase::Pending));
    assert_eq!(state::decide(&j, &c, &Action::AbortJob, None).next_phase, None);
}

#[test]
fn max_retry_zero_means_three() {
    let mut j = job(JobPhase::Restarting, 2);
    j.spec.max_retry = 0;
    assert_eq!(state::max_retry(&j), 3);
    assert_eq!(state::decide(&j, &Counts::default(), &Action::SyncJob, None).next_phase, Some(JobPhase::Pending));
    j.status.as_mut().unwrap().retry_count = 3;
    assert_eq!(state::decide(&j, &Counts::default(), &Action::SyncJob, None).next_phase, Some(JobPhase::Failed));
}

// ---------------------------------------------------------------------------------------
// The finished-phase transitions Volcano's phase counters count

/// One step of `j` for `action` with `counts`, the status written: what it entered.
fn step(j: &mut Job, action: Action, c: &Counts) -> Option<JobPhase> {
    let from = state::phase_of(j);
    let d = state::decide(j, c, &action, None);
    j.status = Some(status::next_status(j, c, &d, t(20)));
    state::entered_finished(&from, &d)
}

#[test]
fn a_transition_into_completed_counts_once() {
    // Running, every pod succeeded: Completed, entered once.
    let mut j = job(JobPhase::Running, 0);
    let done = with_tasks(counts(0, 0, 5, 0, 0), &[("a", "Succeeded", 3), ("b", "Succeeded", 2)]);
    assert_eq!(step(&mut j, Action::SyncJob, &done), Some(JobPhase::Completed));
    // Later reconciles of the Completed job (syncs, pod events, a Command) enter nothing.
    for action in [Action::SyncJob, Action::SyncJob, Action::RestartJob, Action::CompleteJob] {
        assert_eq!(step(&mut j, action.clone(), &done), None, "{action:?}");
        assert_eq!(state::phase_of(&j), JobPhase::Completed);
    }
    // Completing: Completed once the pods are gone, not before.
    let mut j = job(JobPhase::Completing, 0);
    assert_eq!(step(&mut j, Action::SyncJob, &counts(0, 1, 0, 0, 1)), None);
    assert_eq!(step(&mut j, Action::SyncJob, &counts(0, 0, 2, 0, 0)), Some(JobPhase::Completed));
    assert_eq!(step(&mut j, Action::SyncJob, &counts(0, 0, 2, 0, 0)), None);
    // minSuccess reached while pods still run.
    let mut j = job(JobPhase::Running, 0);
    j.spec.min_success = Some(2);
    assert_eq!(step(&mut j, Action::SyncJob, &counts(0, 3, 2, 0, 0)), Some(JobPhase::Completed));
}

#[test]
fn a_transition_into_failed_counts_once() {
    // Running, every pod done but too few succeeded: Failed.
    let mut j = job(JobPhase::Running, 0);
    let done = with_tasks(counts(0, 0, 1, 4, 0), &[("a", "Succeeded", 1), ("b", "Failed", 2)]);
    assert_eq!(step(&mut j, Action::SyncJob, &done), Some(JobPhase::Failed));
    assert_eq!(step(&mut j, Action::SyncJob, &done), None);
    // Restarting at maxRetry: Failed, once.
    let mut j = job(JobPhase::Restarting, 3);
    assert_eq!(step(&mut j, Action::SyncJob, &Counts::default()), Some(JobPhase::Failed));
    assert_eq!(step(&mut j, Action::SyncJob, &Counts::default()), None);
    assert_eq!(step(&mut j, Action::ResumeJob, &Counts::default()), None);
}

#[test]
fn other_transitions_count_nothing() {
    // Pending → Running, Running → Restarting, Aborting → Aborted, Terminating → Terminated.
    let mut j = job(JobPhase::Pending, 0);
    assert_eq!(step(&mut j, Action::SyncJob, &counts(0, 3, 0, 0, 0)), None);
    assert_eq!(state::phase_of(&j), JobPhase::Running);
    assert_eq!(step(&mut j, Action::RestartJob, &counts(0, 0, 0, 0, 3)), None);
    assert_eq!(state::phase_of(&j), JobPhase::Restarting);
    for (phase, to) in [(JobPhase::Aborting, JobPhase::Aborted), (JobPhase::Terminating, JobPhase::Terminated)] {
        let mut j = job(phase, 0);
        assert_eq!(step(&mut j, Action::SyncJob, &Counts::default()), None);
        assert_eq!(state::phase_of(&j), to);
    }
}

// ---------------------------------------------------------------------------------------
// Counts after the work

#[test]
fn counts_after_kill_keep_finished_pods_only_when_soft() {
    let j = job(JobPhase::Running, 0);
    let mut deleting = pod("job-a-2", "a", "Running");
    deleting.metadata.deletion_timestamp = Some(Time(t(1)));
    let pods =
        [pod("job-a-0", "a", "Succeeded"), pod("job-a-1", "a", "Failed"), deleting, pod("job-b-0", "b", "Running")];
    let soft = Counts::after(&j, &KILL_SOFT, &pods, false);
    assert_eq!((soft.succeeded, soft.failed, soft.running, soft.terminating), (1, 1, 0, 2));
    assert_eq!(soft.tasks["a"]["Succeeded"], 1);
    let all = Counts::after(&j, &KILL_NONE, &pods, false);
    assert_eq!((all.succeeded, all.failed, all.terminating), (0, 0, 4));
    let target = Work::KillTargets(Target::Task { task: "b".into() });
    let tc = Counts::after(&j, &target, &pods, false);
    assert_eq!((tc.succeeded, tc.failed, tc.terminating), (1, 1, 2));
}

#[test]
fn counts_after_sync_count_expected_pods_and_delete_the_rest() {
    let j = job(JobPhase::Running, 0);
    let mut stale = pod("job-a-1", "a", "Running");
    stale.metadata.annotations.as_mut().unwrap().insert(OUT_OF_SYNC_KEY.into(), "true".into());
    let pods = [pod("job-a-0", "a", "Running"), stale, pod("job-a-7", "a", "Running"), pod("job-c-0", "c", "Running")];
    let c = Counts::after(&j, &Work::Sync, &pods, true);
    // a-0 running, a-1 running and deleted, a-2 created, a-7 surplus, b-0/b-1 created,
    // task c is not in the spec: not counted.
    assert_eq!((c.running, c.pending, c.terminating), (2, 3, 2));
    assert_eq!(c.tasks["b"]["Pending"], 2);
    let c = Counts::after(&j, &Work::Sync, &pods, false);
    assert_eq!((c.running, c.pending, c.terminating), (2, 0, 2));
}

// ---------------------------------------------------------------------------------------
// applyPolicies

fn job_with(task_policies: Vec<LifecyclePolicy>, job_policies: Vec<LifecyclePolicy>) -> Job {
    let mut j = job(JobPhase::Running, 0);
    j.spec.tasks[0].policies = task_policies;
    j.spec.policies = job_policies;
    j
}

#[test]
fn task_policies_come_before_job_policies() {
    let j = job_with(
        vec![policy(&[Event::PodFailed], Action::RestartTask, None)],
        vec![policy(&[Event::PodFailed], Action::AbortJob, None)],
    );
    assert_eq!(policies::apply(&j, &req(Event::PodFailed)), (Action::RestartTask, None));
    let mut other_task = req(Event::PodFailed);
    other_task.task = Some("b".into());
    assert_eq!(policies::apply(&j, &other_task), (Action::AbortJob, None));
}

#[test]
fn any_event_matches_every_event_and_event_lists_match_members() {
    let j = job_with(
        vec![],
        vec![
            policy(&[Event::PodEvicted, Event::Unknown], Action::RestartJob, None),
            policy(&[Event::Any], Action::AbortJob, None),
        ],
    );
    assert_eq!(policies::apply(&j, &req(Event::Unknown)).0, Action::RestartJob);
    assert_eq!(policies::apply(&j, &req(Event::TaskCompleted)).0, Action::AbortJob);
    let single = job_with(
        vec![],
        vec![LifecyclePolicy {
            event: Some(Event::TaskCompleted),
            action: Some(Action::CompleteJob),
            ..Default::default()
        }],
    );
    assert_eq!(policies::apply(&single, &req(Event::TaskCompleted)).0, Action::CompleteJob);
}

#[test]
fn exit_code_policies_match_the_request_exit_code() {
    let j = job_with(
        vec![],
        vec![exit_policy(137, Action::RestartPod), policy(&[Event::PodFailed], Action::AbortJob, None)],
    );
    let mut r = req(Event::PodFailed);
    r.exit_code = Some(137);
    assert_eq!(policies::apply(&j, &r).0, Action::RestartPod);
    r.exit_code = Some(1);
    assert_eq!(policies::apply(&j, &r).0, Action::AbortJob);
}

#[test]
fn pod_pending_matches_only_policies_with_a_timeout() {
    let without = job_with(vec![], vec![policy(&[Event::PodPending], Action::RestartJob, None)]);
    assert_eq!(policies::apply(&without, &req(Event::PodPending)), (Action::SyncJob, None));
    let any = job_with(vec![], vec![policy(&[Event::Any], Action::RestartJob, None)]);
    assert_eq!(policies::apply(&any, &req(Event::PodPending)), (Action::SyncJob, None));
    let with = job_with(vec![policy(&[Event::PodPending], Action::RestartTask, Some("5m"))], vec![]);
    assert_eq!(policies::apply(&with, &req(Event::PodPending)), (Action::RestartTask, Some(Duration::from_secs(300))));
}

#[test]
fn internal_events_never_match_user_policies() {
    let j = job_with(
        vec![policy(&[Event::Any], Action::RestartTask, None)],
        vec![policy(&[Event::Any], Action::AbortJob, None)],
    );
    for e in [Event::OutOfSync, Event::CommandIssued, Event::PodRunning] {
        assert_eq!(policies::apply(&j, &req(e.clone())), (Action::SyncJob, None), "{e}");
    }
}

#[test]
fn an_explicit_action_wins_over_policies_and_staleness() {
    let j = job_with(vec![], vec![policy(&[Event::Any], Action::AbortJob, None)]);
    let mut r = req(Event::CommandIssued);
    r.action = Some(Action::ResumeJob);
    r.job_version = 0;
    assert_eq!(policies::apply(&j, &r), (Action::ResumeJob, None));
}

#[test]
fn stale_job_versions_and_uids_become_sync() {
    let j = job_with(vec![], vec![policy(&[Event::PodFailed], Action::AbortJob, None)]);
    let mut old_version = req(Event::PodFailed);
    old_version.job_version = 0;
    assert_eq!(policies::apply(&j, &old_version), (Action::SyncJob, None));
    let mut other_job = req(Event::PodFailed);
    other_job.job_uid = Some("an-older-job-of-the-same-name".into());
    assert_eq!(policies::apply(&j, &other_job), (Action::SyncJob, None));
    assert_eq!(policies::apply(&j, &req(Event::PodFailed)).0, Action::AbortJob);
}

#[test]
fn nothing_matched_is_sync_and_a_timeout_is_a_delay() {
    let j = job_with(vec![], vec![policy(&[Event::PodEvicted], Action::RestartJob, Some("1m30s"))]);
    assert_eq!(policies::apply(&j, &req(Event::PodFailed)), (Action::SyncJob, None));
    assert_eq!(policies::apply(&j, &req(Event::PodEvicted)), (Action::RestartJob, Some(Duration::from_secs(90))));
    let zero = job_with(vec![], vec![policy(&[Event::PodEvicted], Action::RestartJob, Some("0s"))]);
    assert_eq!(policies::apply(&zero, &req(Event::PodEvicted)), (Action::RestartJob, None));
}

// ---------------------------------------------------------------------------------------
// Delayed actions

#[test]
fn delayed_actions_fire_when_due_once_per_pod_and_action() {
    let mut d = DelayedActions::new();
    let r = req(Event::PodFailed);
    assert!(d.schedule(&r, Action::RestartJob, Duration::from_secs(60), t(0)));
    assert!(!d.schedule(&r, Action::RestartJob, Duration::from_secs(60), t(30)), "the first timer stays");
    assert_eq!(d.next_due(), Some(t(60)));
    assert!(d.due(t(59)).is_empty());
    let fired = d.due(t(60));
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].action, Action::RestartJob);
    assert!(d.is_empty());
}

#[test]
fn pod_running_cancels_delayed_failed_and_evicted_actions() {
    let mut d = DelayedActions::new();
    d.schedule(&req(Event::PodFailed), Action::RestartJob, Duration::from_secs(60), t(0));
    assert!(d.cancel_on(&req(Event::PodPending)).is_empty(), "PodPending cancels nothing");
    assert!(d.cancel_on(&req(Event::PodFailed)).is_empty(), "a PodFailed action waits for PodRunning");
    assert_eq!(d.cancel_on(&req(Event::PodRunning)).len(), 1);
    assert!(d.is_empty());
}

#[test]
fn a_pod_event_cancels_its_pending_timeout_only_for_the_same_pod_uid() {
    let mut d = DelayedActions::new();
    d.schedule(&req(Event::PodPending), Action::RestartTask, Duration::from_secs(60), t(0));
    let mut recreated = req(Event::PodRunning);
    recreated.pod_uid = Some("uid-of-the-new-pod".into());
    assert!(d.cancel_on(&recreated).is_empty());
    let mut other_pod = req(Event::PodRunning);
    other_pod.pod = Some("job-a-1".into());
    assert!(d.cancel_on(&other_pod).is_empty());
    assert_eq!(d.cancel_on(&req(Event::PodFailed)).len(), 1);
}

#[test]
fn an_executed_action_cancels_delayed_actions_of_its_scope() {
    let mut d = DelayedActions::new();
    let at = |pod: &str, task: &str| {
        let mut r = req(Event::PodFailed);
        r.pod = Some(pod.into());
        r.task = Some(task.into());
        r
    };
    d.schedule(&at("job-a-0", "a"), Action::AbortJob, Duration::from_secs(60), t(0));
    d.schedule(&at("job-a-1", "a"), Action::RestartTask, Duration::from_secs(60), t(0));
    d.schedule(&at("job-b-0", "b"), Action::RestartTask, Duration::from_secs(60), t(0));
    assert!(d.executed(&at("job-a-2", "a"), &Action::SyncJob).is_empty(), "internal actions cancel nothing");
    let gone = d.executed(&at("job-a-2", "a"), &Action::RestartTask);
    assert_eq!(gone.len(), 1, "only the same task's RestartTask");
    assert_eq!(gone[0].request.pod.as_deref(), Some("job-a-1"));
    let gone = d.executed(&at("job-b-1", "b"), &Action::TerminateJob);
    assert_eq!(gone.len(), 1, "job-level actions cancel job-level ones");
    assert_eq!(gone[0].action, Action::AbortJob);
    assert_eq!(d.len(), 1);
}

// ---------------------------------------------------------------------------------------
// Events from observations

fn all_pods(j: &Job, phase: &str) -> Vec<Pod> {
    j.spec
        .tasks
        .iter()
        .flat_map(|t| (0..t.replicas).map(move |i| pod(&format!("job-{}-{i}", t.name()), t.name(), phase)))
        .collect()
}

#[test]
fn pod_failed_carries_the_first_container_exit_code() {
    let j = job(JobPhase::Running, 0);
    let old = pod("job-a-0", "a", "Running");
    let mut new = moved(&old, "Failed");
    new.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
        name: "c".into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated { exit_code: 137, ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    let r = events::pod_updated(&old, &new, &j, [&new]).unwrap();
    assert_eq!((&r.event, r.exit_code), (&Event::PodFailed, Some(137)));
    assert_eq!(r.job_key(), "ns/job");
    assert_eq!((r.task.as_deref(), r.pod.as_deref(), r.job_version), (Some("a"), Some("job-a-0"), 1));
    assert_eq!(r.partition.as_deref(), Some("0"));
    assert_eq!(r.job_uid.as_deref(), Some("job-uid"));
}

#[test]
fn task_completed_when_every_replica_of_the_task_succeeded() {
    let j = job(JobPhase::Running, 0);
    let mut pods = all_pods(&j, "Succeeded");
    let old = pod("job-b-1", "b", "Running");
    let new = moved(&old, "Succeeded");
    assert_eq!(events::pod_updated(&old, &new, &j, &pods).unwrap().event, Event::TaskCompleted);
    pods.retain(|p| p.metadata.name.as_deref() != Some("job-b-0"));
    assert_eq!(events::pod_updated(&old, &new, &j, &pods).unwrap().event, Event::OutOfSync);
}

#[test]
fn task_failed_when_restarts_reach_max_retry() {
    let mut j = job(JobPhase::Running, 0);
    let old = with_restarts(pod("job-a-0", "a", "Running"), 1);
    let new = with_restarts(moved(&old, "Running"), 2);
    let others = [
        new.clone(),
        with_restarts(pod("job-a-1", "a", "Pending"), 1),
        with_restarts(pod("job-a-2", "a", "Failed"), 9),
    ];
    // maxRetry 0 is 3: 2 + 1 restarts over Running/Pending pods reach it.
    assert_eq!(events::pod_updated(&old, &new, &j, &others).unwrap().event, Event::TaskFailed);
    j.spec.tasks[0].max_retry = 4;
    assert_eq!(events::pod_updated(&old, &new, &j, &others).unwrap().event, Event::OutOfSync);
    j.spec.tasks[0].max_retry = -1;
    assert_eq!(events::pod_updated(&old, &new, &j, &others).unwrap().event, Event::OutOfSync);
    // Entering Running is PodRunning even past maxRetry.
    j.spec.tasks[0].max_retry = 0;
    let pending = with_restarts(pod("job-a-0", "a", "Pending"), 1);
    assert_eq!(events::pod_updated(&pending, &new, &j, &others).unwrap().event, Event::PodRunning);
}

#[test]
fn phase_changes_give_pod_running_pod_pending_or_out_of_sync() {
    let j = job(JobPhase::Running, 0);
    let p = pod("job-a-0", "a", "Pending");
    let running = moved(&p, "Running");
    assert_eq!(events::pod_updated(&p, &running, &j, [&running]).unwrap().event, Event::PodRunning);
    let back = moved(&running, "Pending");
    assert_eq!(events::pod_updated(&running, &back, &j, [&back]).unwrap().event, Event::PodPending);
    let same = moved(&running, "Running");
    assert_eq!(events::pod_updated(&running, &same, &j, [&same]).unwrap().event, Event::OutOfSync);
    assert_eq!(events::pod_updated(&running, &running, &j, [&running]), None, "same resource version");
    let mut marked = moved(&p, "Failed");
    marked.metadata.annotations.as_mut().unwrap().insert(OUT_OF_SYNC_KEY.into(), "true".into());
    assert_eq!(events::pod_updated(&p, &marked, &j, [&marked]).unwrap().event, Event::OutOfSync);
}

#[test]
fn pods_no_job_controls_are_ignored() {
    let j = job(JobPhase::Running, 0);
    let mut p = pod("x", "a", "Running");
    p.metadata.owner_references.as_mut().unwrap()[0].kind = "ReplicaSet".into();
    assert_eq!(events::pod_added(&p), None);
    assert_eq!(events::pod_updated(&p, &moved(&p, "Failed"), &j, []), None);
    let mut unannotated = pod("y", "a", "Running");
    unannotated.metadata.annotations.as_mut().unwrap().remove(JOB_VERSION_KEY);
    assert_eq!(events::pod_deleted(&unannotated, true), None);
}

#[test]
fn added_and_deleted_pods() {
    let p = pod("job-a-0", "a", "Pending");
    assert_eq!(events::pod_added(&p).unwrap().event, Event::PodPending);
    assert_eq!(events::pod_deleted(&p, true).unwrap().event, Event::PodEvicted);
    assert_eq!(events::pod_deleted(&p, false).unwrap().event, Event::OutOfSync);
    let mut marked = p.clone();
    marked.metadata.annotations.as_mut().unwrap().insert(OUT_OF_SYNC_KEY.into(), "true".into());
    assert_eq!(events::pod_deleted(&marked, true).unwrap().event, Event::OutOfSync);
    assert_eq!(events::pod_added(&marked).unwrap().event, Event::OutOfSync);
}

#[test]
fn pod_group_phase_changes() {
    let pg = |phase: PodGroupPhase| {
        let mut g = PodGroup::new("job-job-uid", Default::default());
        g.metadata.namespace = Some("ns".into());
        g.metadata.owner_references =
            Some(vec![OwnerReference { kind: "Job".into(), name: "job".into(), ..Default::default() }]);
        g.status = Some(PodGroupStatus { phase: Some(phase), ..Default::default() });
        g
    };
    let r = events::pod_group_phase_changed(&pg(PodGroupPhase::Running), &pg(PodGroupPhase::Unknown)).unwrap();
    assert_eq!((r.job_key(), r.event), ("ns/job".to_string(), Event::Unknown));
    let r = events::pod_group_phase_changed(&pg(PodGroupPhase::Pending), &pg(PodGroupPhase::Inqueue)).unwrap();
    assert_eq!(r.event, Event::OutOfSync);
    assert_eq!(events::pod_group_phase_changed(&pg(PodGroupPhase::Running), &pg(PodGroupPhase::Running)), None);
}

#[test]
fn job_updates_and_commands() {
    let old = job(JobPhase::Running, 0);
    let mut new = old.clone();
    new.metadata.resource_version = Some("2".into());
    assert_eq!(events::job_updated(&old, &new), None, "status counts only");
    new.spec.tasks[0].replicas = 5;
    assert_eq!(events::job_updated(&old, &new).unwrap().event, Event::OutOfSync);
    let mut moved_on = old.clone();
    moved_on.status.as_mut().unwrap().state.phase = Some(JobPhase::Completed);
    assert_eq!(events::job_updated(&old, &moved_on).unwrap().event, Event::OutOfSync);

    let mut cmd = Command::new("c", Action::AbortJob, OwnerReference { name: "job".into(), ..Default::default() });
    cmd.metadata.namespace = Some("ns".into());
    let r = events::command_issued(&cmd).unwrap();
    assert_eq!(
        (r.job_key(), r.event.clone(), r.action.clone()),
        ("ns/job".into(), Event::CommandIssued, Some(Action::AbortJob))
    );
    assert_eq!(policies::apply(&old, &r).0, Action::AbortJob);
}

// ---------------------------------------------------------------------------------------
// Status

#[test]
fn a_kill_bumps_the_version_records_the_transition_and_the_running_duration() {
    let j = job(JobPhase::Running, 0);
    let c = counts(0, 0, 1, 0, 4);
    let d = state::decide(&j, &c, &Action::RestartJob, None);
    let s = status::next_status(&j, &c, &d, t(95));
    assert_eq!(s.state.phase, Some(JobPhase::Restarting));
    assert_eq!((s.version, s.retry_count, s.terminating, s.succeeded), (2, 1, 4, 1));
    assert_eq!(s.state.last_transition_time, Some(Time(t(95))));
    assert_eq!(
        s.conditions.last().map(|c| (c.status.clone(), c.last_transition_time.clone())),
        Some((JobPhase::Restarting, Some(Time(t(95)))))
    );
    assert_eq!(s.running_duration.as_deref(), Some("1m35s"));
}

#[test]
fn a_sync_records_a_transition_when_the_status_changes_and_keeps_one_condition_per_phase() {
    let mut j = job(JobPhase::Pending, 0);
    status::append_condition(&mut j.status.as_mut().unwrap().conditions, JobPhase::Pending, t(10));
    let c = with_tasks(counts(0, 3, 0, 0, 0), &[("a", "Running", 3)]);
    let d = state::decide(&j, &c, &Action::SyncJob, None);
    let s = status::next_status(&j, &c, &d, t(20));
    assert_eq!(s.state.phase, Some(JobPhase::Running));
    assert_eq!(s.task_status_count["a"].phase["Running"], 3);
    assert_eq!(
        s.conditions.iter().map(|c| c.status.clone()).collect::<Vec<_>>(),
        [JobPhase::Pending, JobPhase::Running]
    );
    j.status = Some(s.clone());
    // Same counts again: nothing changes, no transition.
    let d = state::decide(&j, &c, &Action::SyncJob, None);
    assert_eq!(status::next_status(&j, &c, &d, t(30)), s);
    // A count changes: Volcano records a transition to the same phase.
    let c2 = with_tasks(counts(1, 3, 0, 0, 0), &[("a", "Running", 3)]);
    let s2 = status::next_status(&j, &c2, &state::decide(&j, &c2, &Action::SyncJob, None), t(40));
    assert_eq!(s2.state.last_transition_time, Some(Time(t(40))));
    assert_eq!(s2.conditions.len(), 2);
    assert_eq!(s2.conditions[1].last_transition_time, Some(Time(t(40))));
}

#[test]
fn initial_status_is_pending() {
    let mut j = job(JobPhase::Pending, 0);
    assert_eq!(status::initial(&j, t(1)), None);
    j.status = None;
    let s = status::initial(&j, t(1)).unwrap();
    assert_eq!((s.state.phase, s.min_available, s.conditions.len()), (Some(JobPhase::Pending), 3, 1));
}

#[test]
fn go_durations_print_like_go() {
    let d = |s: i64, n: i32| status::go_duration(SignedDuration::new(s, n));
    assert_eq!(d(0, 0), "0s");
    assert_eq!(d(95, 0), "1m35s");
    assert_eq!(d(3600, 0), "1h0m0s");
    assert_eq!(d(3723, 500_000_000), "1h2m3.5s");
    assert_eq!(d(0, 1_500_000), "1.5ms");
    assert_eq!(d(0, 2_000), "2\u{b5}s");
    assert_eq!(d(0, 7), "7ns");
    assert_eq!(d(-120, 0), "-2m0s");
}

#[test]
fn ttl_counts_from_the_last_transition_of_a_finished_job() {
    let mut j = job(JobPhase::Completed, 0);
    assert_eq!(status::ttl_expired(&j, t(20)), None, "no TTL");
    j.spec.ttl_seconds_after_finished = Some(60);
    assert_eq!(status::ttl_expired(&j, t(20)), Some(Duration::from_secs(50)));
    assert_eq!(status::ttl_expired(&j, t(70)), Some(Duration::ZERO));
    assert_eq!(status::ttl_expired(&j, t(500)), Some(Duration::ZERO));
    for phase in [JobPhase::Failed, JobPhase::Terminated] {
        j.status.as_mut().unwrap().state.phase = Some(phase);
        assert_eq!(status::ttl_expired(&j, t(40)), Some(Duration::from_secs(30)));
    }
    j.status.as_mut().unwrap().state.phase = Some(JobPhase::Aborted);
    assert_eq!(status::ttl_expired(&j, t(500)), None, "Aborted is not finished");
    j.status.as_mut().unwrap().state.phase = Some(JobPhase::Completed);
    j.status.as_mut().unwrap().state.last_transition_time = None;
    assert_eq!(status::ttl_expired(&j, t(500)), None);
}

#[test]
fn a_policy_driven_failure_end_to_end() {
    // A pod fails with 137; the task's policy restarts the job; after maxRetry restarts the
    // job fails, and its finished pods are kept on the last retry.
    let mut j = job(JobPhase::Running, 0);
    j.spec.tasks[0].policies = vec![exit_policy(137, Action::RestartJob)];
    let mut r = req(Event::PodFailed);
    r.exit_code = Some(137);
    for retry in 0..3 {
        j.status.as_mut().unwrap().state.phase = Some(JobPhase::Running);
        let (action, delay) = policies::apply(&j, &r);
        assert_eq!((action.clone(), delay), (Action::RestartJob, None));
        let d = state::decide(&j, &counts(0, 0, 0, 1, 4), &action, None);
        let retain = if retry == 2 { Retain::Soft } else { Retain::None };
        assert_eq!(d.work, Work::Kill { retain }, "retry {retry}");
        let s = status::next_status(&j, &counts(0, 0, 0, 1, 4), &d, t(100 + i64::from(retry)));
        r.job_version = s.version;
        j.status = Some(s);
    }
    let d = state::decide(&j, &Counts::default(), &Action::SyncJob, None);
    assert_eq!(d.next_phase, Some(JobPhase::Failed));
}
