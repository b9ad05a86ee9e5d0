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

/// The questions `preempt_task` answered with a failure since the session last changed, in
/// the phase between jobs of one queue. A failed attempt changes nothing (every node's
/// statement is discarded), so a later pod that asks the same question gets the same answer
/// and is not asked again. The same question: the same shape (requests and every scheduling
/// constraint, so the same candidate nodes and fits), priority, best-effort flag, preemption
/// policy, nominated node, role and sub-group, the same labels when some pod has inter-pod
/// rules — and the same job, or two *fresh* jobs of the same priority: every pod of both
/// pending, no network topology or sub-groups, so neither holds a victim of its own, drf
/// sees both with nothing allocated, and the plugins' votes (which read of a preemptor its
/// task and its job's priority and allocation) answer alike. The order the nodes are tried
/// in does not enter: a failure means every candidate node failed. Off without the node
/// index, so that the full-scan reference asks every question (the tests compare the two).
struct Failed {
    enabled: bool,
    /// A pod of each failed question, whether its job was fresh, the node attempts it
    /// counted and the victims of the last (replayed into the metrics when the question is
    /// skipped), and whether some node had candidates.
    questions: Vec<Question>,
}

struct Question {
    pod: TaskId,
    fresh: bool,
    attempts: u64,
    last: Option<u64>,
    candidates: bool,
}

/// Whether every pod of the job is pending and it has no network topology or sub-groups.
fn fresh(ssn: &Session, j: JobId) -> bool {
    let job = ssn.snap.job(j);
    job.sub_groups.is_none()
        && job.pod_group.spec.network_topology.is_none()
        && job.tasks.iter().all(|t| ssn.snap.task(*t).status == volcano_framework::TaskStatus::Pending)
}

impl Failed {
    /// The question `t` asks, if it failed before; `fresh`: whether `t`'s job is.
    fn answer(&self, ssn: &Session, t: TaskId, fresh: bool) -> Option<&Question> {
        if !self.enabled {
            return None;
        }
        let b = ssn.snap.task(t);
        let labels = ssn.snap.may_have_pod_rules();
        self.questions.iter().find(|q| {
            let a = ssn.snap.task(q.pod);
            let same_job = a.job == b.job
                || (fresh
                    && q.fresh
                    && a.job.zip(b.job).is_some_and(|(x, y)| ssn.snap.job(x).priority == ssn.snap.job(y).priority));
            same_job
                && a.shape == b.shape
                && a.priority == b.priority
                && a.best_effort == b.best_effort
                && a.preemption_never == b.preemption_never
                && a.nominated_node == b.nominated_node
                && a.role == b.role
                && a.sub_group == b.sub_group
                && (!labels || a.pod.metadata.labels == b.pod.metadata.labels)
        })
    }
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
            // Phase 1: between jobs of the queue. The full-scan reference (no node index) asks
            // every question.
            let mut failed = Failed { enabled: ssn.victim_index_enabled(), questions: Vec::new() };
            while let Some(j) = work.pop_job(ssn, q) {
                let mut stmt = Statement::new();
                let mut heap = work.take_tasks(j);
                let mut candidates = false;
                let job_fresh = fresh(ssn, j);
                let mut changed = false;
                while ssn.job_starving(j) {
                    let Some(t) = heap.pop(|a, b| ssn.task_order(*a, *b).is_lt()) else { break };
                    if let Some(asked) = failed.answer(ssn, t, job_fresh && !changed) {
                        ssn.replay_preemption_attempts(asked.attempts, asked.last);
                        candidates |= asked.candidates;
                        continue;
                    }
                    let filter = |s: &Session, v: TaskId| {
                        victim_status_ok(s, t, v)
                            && s.snap.task(v).job.is_some_and(|vj| vj != j && s.snap.job(vj).queue == q)
                    };
                    let before = ssn.preemption_attempts().0;
                    let mut had_candidates = false;
                    if preempt_task(ssn, &mut stmt, t, filter, &mut had_candidates) {
                        // The session changed: no earlier answer holds.
                        failed.questions.clear();
                        changed = true;
                    } else {
                        let (after, last) = ssn.preemption_attempts();
                        failed.questions.push(Question {
                            pod: t,
                            fresh: job_fresh && !changed,
                            attempts: after - before,
                            last,
                            candidates: had_candidates,
                        });
                    }
                    candidates |= had_candidates;
                }
                work.put_tasks(j, heap);
                if changed {
                    // Committed, or undone: either way the answers given after the change do
                    // not hold for the next job.
                    failed.questions.clear();
                } else {
                    // What only this job could ask again is of no use to the next.
                    failed.questions.retain(|q| q.fresh);
                }
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

#[cfg(test)]
mod tests {
    use volcano_framework::{run_cycle, CycleContext, NoObserver, Profile, Registries, SessionOptions};
    use volcano_testkit::{node, pod, pod_group, queue, Objects};

    const CONF: &str = r#"
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: capacity
  - name: nodeorder
"#;

    /// Queue q1 (capability 3 cpu) holds 3 cpu: a low-priority pod on each node and a
    /// high-priority one on n2. Each of five alike 2-cpu pods of two high-priority jobs finds
    /// on n1 victims enough for the node, but no room under the capability once they are
    /// evicted (and on n2 too few victims): each attempt fails the same way.
    fn cluster() -> Objects {
        let mut o = Objects::new()
            .priority_class("high", 100)
            .priority_class("low", 10)
            .queue(queue("q1").capability(&[("cpu", "3")]).deserved(&[("cpu", "3")]))
            .node(node("n1", "2", "16Gi"))
            .node(node("n2", "2", "16Gi"))
            .pod_group(pod_group("ns", "low", 1).queue("q1").priority_class("low"))
            .pod_group(pod_group("ns", "old", 1).queue("q1").priority_class("high"))
            .pod_group(pod_group("ns", "high", 1).queue("q1").priority_class("high"))
            .pod_group(pod_group("ns", "other", 1).queue("q1").priority_class("high"));
        for (i, n) in ["n2", "n1"].into_iter().enumerate() {
            o = o.pod(pod("ns", &format!("low-{i}")).group("low").cpu_mem("1", "1Gi").priority(10).running_on(n));
        }
        o = o.pod(pod("ns", "old-0").group("old").cpu_mem("1", "1Gi").priority(100).running_on("n2"));
        for i in 0..3 {
            o = o.pod(pod("ns", &format!("high-{i}")).group("high").cpu_mem("2", "1Gi").priority(100));
        }
        // A second fresh job of the same priority asks the same questions.
        for i in 0..2 {
            o = o.pod(pod("ns", &format!("other-{i}")).group("other").cpu_mem("2", "1Gi").priority(100));
        }
        o
    }

    #[test]
    fn a_question_skipped_gives_what_asking_it_gives() {
        let reg = Registries { plugins: volcano_plugins::in_tree(), actions: crate::in_tree() };
        let profile = Profile::from_yaml(CONF, &reg).unwrap();
        let run = |node_index: bool| {
            let options = SessionOptions { node_index, ..Default::default() };
            let cx = CycleContext { cycle: 1, now_ms: 1_700_000_100_000, options };
            run_cycle(cluster().snapshot(), &profile, &cx, &mut NoObserver)
        };
        let (skipping, asking) = (run(true), run(false));
        assert_eq!(skipping.effects, asking.effects);
        // Every pod's node attempts are counted, asked or skipped.
        assert!(asking.metrics.preemption_attempts >= 5, "{}", asking.metrics.preemption_attempts);
        assert_eq!(skipping.metrics.preemption_attempts, asking.metrics.preemption_attempts);
        assert_eq!(skipping.metrics.preemption_victims, asking.metrics.preemption_victims);
    }
}
