//! The `gang` plugin: all-or-nothing scheduling of a PodGroup's `minMember` pods.
//!
//! - JobValid: a job with fewer valid pods than `minMember` (or a role below its
//!   `minTaskMember`, or a sub-group policy with fewer sub-groups than its `minSubGroups`) is
//!   not scheduled at all this session.
//! - JobReady / JobPipelined: a job's placements are committed only once `minMember` pods
//!   (per role minimums included, and `minSubGroups` whole sub-groups of each sub-group
//!   policy) are placed, or kept as a pipelined reservation.
//! - JobOrder: jobs that are not ready yet go before ready ones, so every gang's minimum is
//!   placed before any job's elastic pods.
//! - JobStarving: fewer than `minMember` pods placed or pipelined.
//! - Preemptable / Reclaimable: only pods above a job's `minMember` may be victims.
//! - On close: the PodGroup gets an `Unschedulable` condition with the reason, or a
//!   `Scheduled` condition once the gang is ready.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::PluginOption;
use volcano_api::names::pod_group_reason;
use volcano_framework::plugin::{CloseOutput, JobMetric, JobVerdict};
use volcano_framework::{
    parse_args, ArgsError, EvictionContext, Hooks, Incremental, InvalidJob, JobId, JobInfo, Plugin, PluginBuilder,
    SessionContext, Snapshot, TaskId, TaskStatus, Vote,
};

/// Configuration name.
pub const NAME: &str = "gang";

/// `gang` takes no arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let _: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(|| Box::new(Gang) as Box<dyn Plugin>))
}

/// The gang plugin.
#[derive(Debug, Default)]
pub struct Gang;

/// Per-role counts of tasks whose status satisfies `pred` (pending best-effort tasks count
/// when `best_effort` is true).
fn role_counts(
    snap: &Snapshot,
    job: &JobInfo,
    pred: impl Fn(TaskStatus) -> bool,
    best_effort: bool,
) -> BTreeMap<String, i32> {
    let mut m = BTreeMap::new();
    for t in &job.tasks {
        let t = snap.task(*t);
        if pred(t.status) || (best_effort && t.status == TaskStatus::Pending && t.best_effort) {
            *m.entry(t.role.clone()).or_insert(0) += 1;
        }
    }
    m
}

fn roles_checked(job: &JobInfo) -> bool {
    !job.task_min_available.is_empty() && job.min_available >= job.task_min_available_total
}

/// Every role has at least its minimum of tasks satisfying the count.
fn roles_reach(job: &JobInfo, counts: &BTreeMap<String, i32>) -> bool {
    job.task_min_available.iter().all(|(role, min)| *min == 0 || counts.get(role).copied().unwrap_or(0) >= *min)
}

fn allocated_or_succeeded(s: TaskStatus) -> bool {
    s.is_allocated() || s == TaskStatus::Succeeded
}

/// Per-role readiness (always true when roles are not checked).
pub fn task_ready(snap: &Snapshot, job: &JobInfo) -> bool {
    !roles_checked(job) || roles_reach(job, &role_counts(snap, job, allocated_or_succeeded, true))
}

fn task_pipelined(snap: &Snapshot, job: &JobInfo) -> bool {
    !roles_checked(job)
        || roles_reach(job, &role_counts(snap, job, |s| allocated_or_succeeded(s) || s == TaskStatus::Pipelined, true))
}

fn task_starving(snap: &Snapshot, job: &JobInfo) -> bool {
    roles_checked(job)
        && !roles_reach(
            job,
            &role_counts(snap, job, |s| allocated_or_succeeded(s) || s == TaskStatus::Pipelined, false),
        )
}

fn task_valid(snap: &Snapshot, job: &JobInfo) -> bool {
    !roles_checked(job)
        || roles_reach(
            job,
            &role_counts(
                snap,
                job,
                |s| allocated_or_succeeded(s) || matches!(s, TaskStatus::Pipelined | TaskStatus::Pending),
                false,
            ),
        )
}

/// The gang is ready: `minMember` pods placed, each role's minimum, and each sub-group
/// policy's `minSubGroups` ready sub-groups.
fn ready(snap: &Snapshot, job: &JobInfo) -> bool {
    job.is_ready() && task_ready(snap, job) && job.sub_groups.as_ref().is_none_or(|sg| sg.ready())
}

/// Volcano's `JobInfo.FitError()`: a histogram of task statuses, the reasons of pending
/// tasks, and the original reason (job-level, or the first task's fit error).
pub fn fit_error(snap: &Snapshot, j: JobId) -> String {
    use std::fmt::Write as _;
    let job = snap.job(j);
    // The counts, sorted as text (as Volcano sorts them): "12 Pending" before "2 minAvailable".
    let mut statuses: Vec<String> = Vec::with_capacity(TaskStatus::ALL.len() + 1);
    for s in TaskStatus::ALL.iter().filter(|s| job.count(**s) > 0) {
        statuses.push(format!("{} {}", job.count(*s), s.as_str()));
    }
    statuses.push(format!("{} minAvailable", job.min_available));
    statuses.sort_unstable();
    let ready = if job.is_ready() { "pod group is ready" } else { "pod group is not ready" };
    let mut msg = String::with_capacity(160);
    msg.push_str(ready);
    for s in &statuses {
        msg.push_str(", ");
        msg.push_str(s);
    }
    // The pending pods: those the session had allocated before rolling the job back are
    // "Schedulable", the others "Unschedulable".
    let (mut schedulable, mut unschedulable) = (0u32, 0u32);
    if job.count(TaskStatus::Pending) > 0 {
        for t in &job.tasks {
            let task = snap.task(*t);
            if task.status == TaskStatus::Pending {
                match snap.last_tx(*t) {
                    Some((TaskStatus::Allocated, _)) => schedulable += 1,
                    _ => unschedulable += 1,
                }
            }
        }
    }
    let mut h: Vec<String> = Vec::with_capacity(2);
    if schedulable > 0 {
        h.push(format!("{schedulable} Schedulable"));
    }
    if unschedulable > 0 {
        h.push(format!("{unschedulable} Unschedulable"));
    }
    if !h.is_empty() {
        h.sort_unstable();
        msg.push_str("; Pending: ");
        msg.push_str(&h.join(", "));
    }
    if let Some(e) = snap.job_fit_error(j) {
        let _ = write!(msg, ". Origin reason is: {e}");
    } else if let Some((t, e)) = snap.fit_errors(j).iter().min_by_key(|(t, _)| &snap.task(**t).key) {
        // The first pod by name (not by task id, which a kept snapshot may number otherwise).
        let _ = write!(msg, ". Origin reason is {}: {e}", snap.task(*t).name());
    }
    msg
}

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::JOB_VALID
            | Hooks::JOB_READY
            | Hooks::JOB_PIPELINED
            | Hooks::JOB_STARVING
            | Hooks::JOB_ORDER
            | Hooks::PREEMPTABLE
            | Hooks::RECLAIMABLE
            | Hooks::EVICTABLE
    }

    fn job_valid(&self, snap: &Snapshot, j: JobId) -> Option<InvalidJob> {
        let job = snap.job(j);
        if !task_valid(snap, job) {
            return Some(InvalidJob {
                reason: pod_group_reason::NOT_ENOUGH_PODS_OF_TASK.into(),
                message: "Not enough valid pods of each task for gang-scheduling".into(),
            });
        }
        if job.sub_groups.as_ref().is_some_and(|sg| sg.invalid_policy().is_some()) {
            return Some(InvalidJob {
                reason: pod_group_reason::NOT_ENOUGH_PODS_OF_TASK.into(),
                message: "Not enough valid subGroups of each task for gang-scheduling".into(),
            });
        }
        let valid = job.valid_task_num();
        if valid < job.min_available {
            return Some(InvalidJob {
                reason: pod_group_reason::NOT_ENOUGH_TASKS.into(),
                message: format!(
                    "Not enough valid tasks for gang-scheduling, valid: {valid}, min: {}",
                    job.min_available
                ),
            });
        }
        None
    }

    fn job_ready(&self, snap: &Snapshot, j: JobId) -> bool {
        ready(snap, snap.job(j))
    }

    fn job_pipelined(&self, snap: &Snapshot, j: JobId) -> Vote {
        let job = snap.job(j);
        if job.is_pipelined() && task_pipelined(snap, job) && job.sub_groups.as_ref().is_none_or(|sg| sg.pipelined()) {
            Vote::Permit
        } else {
            Vote::Reject
        }
    }

    fn job_starving(&self, snap: &Snapshot, j: JobId) -> bool {
        let job = snap.job(j);
        job.is_starving() || task_starving(snap, job)
    }

    fn job_order(&self, snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        // Not-ready jobs first.
        match (snap.job(l).is_ready(), snap.job(r).is_ready()) {
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => Ordering::Equal,
        }
    }

    fn preemptable(&self, snap: &Snapshot, _preemptor: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(above_min_available(snap, candidates))
    }

    fn reclaimable(&self, snap: &Snapshot, _reclaimer: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(above_min_available(snap, candidates))
    }

    /// Every candidate: the gang-aware actions keep gangs whole themselves (a job's surplus
    /// pods, or the whole job), as Volcano's gang plugin leaves it to them.
    fn evictable(&self, _snap: &Snapshot, _ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(candidates.to_vec())
    }

    fn on_session_close(&mut self, snap: &Snapshot, _ctx: &SessionContext, out: &mut CloseOutput) {
        let mut unschedulable = 0u64;
        for (i, job) in snap.jobs.iter().enumerate() {
            let j = JobId(i as u32);
            if job.tasks.is_empty() {
                continue;
            }
            if !ready(snap, job) {
                if short_only_because_releasing(snap, job) {
                    continue;
                }
                let schedulable = job
                    .tasks
                    .iter()
                    .filter(|t| {
                        snap.task(**t).status == TaskStatus::Pending
                            && matches!(snap.last_tx(**t), Some((s, _)) if s.is_allocated())
                    })
                    .count() as i32
                    + job.ready_task_num();
                let unready = job.min_available - schedulable;
                let message =
                    format!("{unready}/{} tasks in gang unschedulable: {}", job.tasks.len(), fit_error(snap, j));
                out.job_verdicts
                    .push((j, JobVerdict::Unschedulable { reason: pod_group_reason::NOT_ENOUGH_RESOURCES, message }));
                out.job_metrics.push((j, JobMetric::Unscheduled { tasks: i64::from(unready), retried: true }));
                unschedulable += 1;
            } else {
                out.job_verdicts.push((j, JobVerdict::Ready));
                out.job_metrics.push((j, JobMetric::Unscheduled { tasks: 0, retried: false }));
            }
        }
        out.unschedulable_jobs = Some(unschedulable);
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Gang {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn needs_min_member(&self) -> bool {
        // `job_ready` needs ready + pending best-effort ≥ minAvailable, `job_pipelined`
        // pipelined + ready + pending best-effort ≥ minAvailable (`JobInfo::is_ready`,
        // `JobInfo::is_pipelined`).
        true
    }
}

/// Whether a job is below its minimum only because some of its scheduled pods are
/// terminating (evicted or deleted): nothing pending or pipelined, and scheduled plus
/// releasing pods reach `minMember`. Volcano writes no Unschedulable condition then.
fn short_only_because_releasing(snap: &Snapshot, job: &JobInfo) -> bool {
    if job.count(TaskStatus::Pending) > 0 || job.count(TaskStatus::Pipelined) > 0 {
        return false;
    }
    let releasing_on_node = job
        .tasks
        .iter()
        .filter(|t| {
            let t = snap.task(**t);
            t.status == TaskStatus::Releasing && t.node.is_some()
        })
        .count() as i32;
    let scheduled = job.count(TaskStatus::Running)
        + job.count(TaskStatus::Bound)
        + job.count(TaskStatus::Succeeded)
        + job.count(TaskStatus::Failed);
    releasing_on_node > 0 && scheduled + releasing_on_node >= job.min_available
}

/// Candidates that may go without breaking their job's gang: per job, only while the job
/// keeps more than `minMember` ready pods.
pub(crate) fn above_min_available(snap: &Snapshot, candidates: &[TaskId]) -> Vec<TaskId> {
    let mut occupied: BTreeMap<JobId, i32> = BTreeMap::new();
    let mut victims = Vec::new();
    for &c in candidates {
        let Some(j) = snap.task(c).job else { continue };
        let job = snap.job(j);
        let n = occupied.entry(j).or_insert_with(|| job.ready_task_num());
        if *n > job.min_available {
            *n -= 1;
            victims.push(c);
        }
    }
    victims
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_testkit::*;

    fn snap(min: i32, running: usize, pending: usize) -> Snapshot {
        let mut o = Objects::new().node(node("n1", "16", "64Gi")).pod_group(pod_group("ns", "pg", min));
        for i in 0..running {
            o = o.pod(pod("ns", &format!("pg-r-{i}")).group("pg").cpu_mem("1", "1Gi").running_on("n1"));
        }
        for i in 0..pending {
            o = o.pod(pod("ns", &format!("pg-p-{i}")).group("pg").cpu_mem("1", "1Gi"));
        }
        o.snapshot()
    }

    #[test]
    fn valid_needs_min_member_pods() {
        let s = snap(3, 0, 2);
        let inv = Gang.job_valid(&s, JobId(0)).expect("invalid");
        assert_eq!(inv.reason, "NotEnoughTasks");
        assert_eq!(inv.message, "Not enough valid tasks for gang-scheduling, valid: 2, min: 3");
        assert!(Gang.job_valid(&snap(2, 0, 2), JobId(0)).is_none());
    }

    #[test]
    fn ready_pipelined_starving() {
        let s = snap(2, 1, 1);
        assert!(!Gang.job_ready(&s, JobId(0)));
        assert_eq!(Gang.job_pipelined(&s, JobId(0)), Vote::Reject);
        assert!(Gang.job_starving(&s, JobId(0)));
        let s = snap(2, 2, 1);
        assert!(Gang.job_ready(&s, JobId(0)));
        assert_eq!(Gang.job_pipelined(&s, JobId(0)), Vote::Permit);
        assert!(!Gang.job_starving(&s, JobId(0)));
    }

    #[test]
    fn only_pods_above_min_member_are_victims() {
        let s = snap(2, 3, 0);
        let running: Vec<TaskId> = s.job(JobId(0)).tasks.clone();
        let v = Gang.preemptable(&s, TaskId(0), &running).unwrap();
        assert_eq!(v.len(), 1, "3 running, min 2: one victim");
        let s = snap(3, 3, 0);
        let running: Vec<TaskId> = s.job(JobId(0)).tasks.clone();
        assert!(Gang.preemptable(&s, TaskId(0), &running).unwrap().is_empty());
    }

    #[test]
    fn per_role_minimums() {
        let s = Objects::new()
            .node(node("n1", "16", "64Gi"))
            .pod_group(pod_group("ns", "pg", 2).min_task_member("ps", 1).min_task_member("worker", 1))
            .pod(
                pod("ns", "pg-ps-0")
                    .group("pg")
                    .annotation("volcano.sh/task-spec", "ps")
                    .cpu_mem("1", "1Gi")
                    .running_on("n1"),
            )
            .pod(
                pod("ns", "pg-ps-1")
                    .group("pg")
                    .annotation("volcano.sh/task-spec", "ps")
                    .cpu_mem("1", "1Gi")
                    .running_on("n1"),
            )
            .pod(pod("ns", "pg-worker-0").group("pg").annotation("volcano.sh/task-spec", "worker").cpu_mem("1", "1Gi"))
            .snapshot();
        // Two pods run, but no worker: not ready.
        assert!(!Gang.job_ready(&s, JobId(0)));
        assert!(Gang.job_starving(&s, JobId(0)));
    }

    #[test]
    fn not_ready_jobs_go_first() {
        let s = Objects::new()
            .node(node("n1", "16", "64Gi"))
            .pod_group(pod_group("ns", "a", 1))
            .pod_group(pod_group("ns", "b", 1))
            .pod(pod("ns", "a-0").group("a").cpu_mem("1", "1Gi").running_on("n1"))
            .pod(pod("ns", "b-0").group("b").cpu_mem("1", "1Gi"))
            .snapshot();
        assert_eq!(Gang.job_order(&s, JobId(0), JobId(1)), Ordering::Greater);
        assert_eq!(Gang.job_order(&s, JobId(1), JobId(0)), Ordering::Less);
    }

    /// A job of two partitions of two pods (`worker-0`: pods 0 and 1, `worker-1`: 2 and 3),
    /// `minMember` 2, whose policy needs `min` sub-groups; `running` pods run, the others
    /// are pending.
    fn partitioned(min: i32, running: &[usize], pipelined: &[usize]) -> Snapshot {
        let mut o = Objects::new()
            .node(node("n1", "16", "64Gi"))
            .pod_group(pod_group("ns", "pg", 2).partition_policy("worker", 2, min));
        for i in 0..4 {
            let mut p = pod("ns", &format!("pg-worker-{i}"))
                .group("pg")
                .label("volcano.sh/task-spec", "worker")
                .label("volcano.sh/partition-id", &(i / 2).to_string())
                .cpu_mem("1", "1Gi");
            if running.contains(&i) {
                p = p.running_on("n1");
            }
            o = o.pod(p);
        }
        let mut s = o.snapshot();
        for i in pipelined {
            let t = s.task_id(&format!("ns/pg-worker-{i}")).unwrap();
            s.set_task_status(t, TaskStatus::Pipelined);
        }
        s
    }

    #[test]
    fn sub_groups_count_towards_readiness() {
        // Two pods run, one in each partition: minMember is met but no partition is whole.
        let s = partitioned(2, &[0, 2], &[]);
        assert!(s.job(JobId(0)).is_ready());
        assert!(!Gang.job_ready(&s, JobId(0)));
        assert_eq!(Gang.job_pipelined(&s, JobId(0)), Vote::Reject);
        // One partition whole: enough for minSubGroups 1, not 2.
        let s = partitioned(1, &[0, 1], &[]);
        assert!(Gang.job_ready(&s, JobId(0)));
        let s = partitioned(2, &[0, 1], &[]);
        assert!(!Gang.job_ready(&s, JobId(0)));
        // The second partition half placed, half pipelined: pipelined, not ready.
        let s = partitioned(2, &[0, 1, 2], &[3]);
        assert!(!Gang.job_ready(&s, JobId(0)));
        assert_eq!(Gang.job_pipelined(&s, JobId(0)), Vote::Permit);
        let s = partitioned(2, &[0, 1, 2, 3], &[]);
        assert!(Gang.job_ready(&s, JobId(0)));
        // minSubGroups 0: the job's own minimum alone.
        assert!(Gang.job_ready(&partitioned(0, &[0, 2], &[]), JobId(0)));
    }

    #[test]
    fn too_few_sub_groups_is_not_valid() {
        assert!(Gang.job_valid(&partitioned(2, &[], &[]), JobId(0)).is_none());
        let inv = Gang.job_valid(&partitioned(3, &[], &[]), JobId(0)).expect("two sub-groups of the three needed");
        assert_eq!(inv.reason, "NotEnoughPodsOfTask");
        assert_eq!(inv.message, "Not enough valid subGroups of each task for gang-scheduling");
    }

    #[test]
    fn fit_error_message() {
        let s = snap(2, 0, 2);
        assert_eq!(
            fit_error(&s, JobId(0)),
            "pod group is not ready, 2 Pending, 2 minAvailable; Pending: 2 Unschedulable"
        );
    }
}
