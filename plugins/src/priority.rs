//! The `priority` plugin: orders jobs by their PodGroup's PriorityClass and tasks by pod
//! priority, lets higher-priority work preempt lower-priority work, and defines a job as
//! starving while it has fewer pods placed than it asks for.

use std::cmp::Ordering;
use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::PluginOption;
use volcano_framework::{
    parse_args, ArgsError, EvictionContext, EvictionKind, Hooks, Incremental, JobId, Plugin, PluginBuilder, Snapshot,
    TaskId,
};

/// Configuration name.
pub const NAME: &str = "priority";

/// `priority` takes no arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let _: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(|| Box::new(Priority) as Box<dyn Plugin>))
}

/// The priority plugin.
#[derive(Debug, Default)]
pub struct Priority;

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::TASK_ORDER | Hooks::JOB_ORDER | Hooks::PREEMPTABLE | Hooks::JOB_STARVING | Hooks::EVICTABLE
    }

    fn task_order(&self, snap: &Snapshot, l: TaskId, r: TaskId) -> Ordering {
        snap.task(r).priority.cmp(&snap.task(l).priority)
    }

    fn job_order(&self, snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        snap.job(r).priority.cmp(&snap.job(l).priority)
    }

    fn preemptable(&self, snap: &Snapshot, preemptor: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        let p = snap.task(preemptor);
        let Some(pj) = p.job else { return Some(Vec::new()) };
        let pjob = snap.job(pj);
        let victims = candidates
            .iter()
            .copied()
            .filter(|c| {
                let v = snap.task(*c);
                match v.job {
                    Some(vj) if vj != pj => snap.job(vj).priority < pjob.priority,
                    Some(_) => v.priority < p.priority,
                    None => false,
                }
            })
            .collect();
        Some(victims)
    }

    /// `gangpreempt`: pods of jobs of lower priority than the preemptor's job; `gangreclaim`:
    /// every candidate (reclaim goes by fairness, not priority), as in Volcano.
    fn evictable(&self, snap: &Snapshot, ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        if ctx.kind == EvictionKind::GangReclaim {
            return Some(candidates.to_vec());
        }
        let priority = snap.job(ctx.job).priority;
        Some(
            candidates
                .iter()
                .copied()
                .filter(|c| snap.task(*c).job.is_some_and(|j| snap.job(j).priority < priority))
                .collect(),
        )
    }

    fn job_starving(&self, snap: &Snapshot, j: JobId) -> bool {
        let job = snap.job(j);
        job.ready_task_num() + job.waiting_task_num() < job.task_num()
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Priority {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_testkit::*;

    #[test]
    fn orders_and_victims() {
        let s = Objects::new()
            .priority_class("high", 100)
            .priority_class("low", 10)
            .node(node("n1", "16", "64Gi"))
            .pod_group(pod_group("ns", "hi", 1).priority_class("high"))
            .pod_group(pod_group("ns", "lo", 1).priority_class("low"))
            .pod(pod("ns", "hi-0").group("hi").cpu_mem("1", "1Gi").priority(100))
            .pod(pod("ns", "lo-0").group("lo").cpu_mem("1", "1Gi").priority(10).running_on("n1"))
            .pod(pod("ns", "lo-1").group("lo").cpu_mem("1", "1Gi").priority(5).running_on("n1"))
            .snapshot();
        let (hi, lo) = (s.job_id("ns/hi").unwrap(), s.job_id("ns/lo").unwrap());
        assert_eq!(Priority.job_order(&s, hi, lo), Ordering::Less);
        let t = |k: &str| TaskId(s.tasks.iter().position(|t| &*t.key == k).unwrap() as u32);
        assert_eq!(Priority.task_order(&s, t("ns/lo-0"), t("ns/lo-1")), Ordering::Less);
        let v = Priority.preemptable(&s, t("ns/hi-0"), &[t("ns/lo-0"), t("ns/lo-1")]).unwrap();
        assert_eq!(v, vec![t("ns/lo-0"), t("ns/lo-1")]);
        // Within a job only lower task priority is a victim.
        let v = Priority.preemptable(&s, t("ns/lo-0"), &[t("ns/lo-1")]).unwrap();
        assert_eq!(v, vec![t("ns/lo-1")]);
        let v = Priority.preemptable(&s, t("ns/lo-1"), &[t("ns/lo-0")]).unwrap();
        assert!(v.is_empty());
        // hi has 1 pending of 1 task: starving; lo runs all its tasks.
        assert!(Priority.job_starving(&s, hi));
        assert!(!Priority.job_starving(&s, lo));
    }
}
