//! The `elastic` plugin: elastic jobs (`minMember` < replicas) in one line of configuration.
//!
//! In Volcano the elastic behaviour is spread over `gang` and the queue plugins; this plugin
//! gathers the scheduling half of it, so it also works where `gang`'s switches are turned off
//! (the Helm chart sets `enablePreemptable: false` on gang):
//!
//! - job order: jobs below their `minMember` go before jobs that have it, so every gang's
//!   minimum is placed before any job's elastic pods;
//! - preemptable and reclaimable: only elastic pods — those above their job's `minMember` —
//!   are victims, and the victim order (reverse task order) takes the highest index first.
//!
//! The admission half — elastic pods are not counted against the queue when a new job is
//! admitted — is done by `proportion` and `capacity` whatever the configuration.

use std::cmp::Ordering;
use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::PluginOption;
use volcano_framework::{parse_args, ArgsError, Hooks, Incremental, JobId, Plugin, PluginBuilder, Snapshot, TaskId};

use crate::gang::above_min_available;

/// Configuration name.
pub const NAME: &str = "elastic";

/// `elastic` takes no arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let _: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(|| Box::new(Elastic) as Box<dyn Plugin>))
}

/// The elastic plugin.
#[derive(Debug, Default)]
pub struct Elastic;

impl Plugin for Elastic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::JOB_ORDER | Hooks::PREEMPTABLE | Hooks::RECLAIMABLE
    }

    fn job_order(&self, snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        let below = |j: JobId| {
            let job = snap.job(j);
            job.ready_task_num() + job.waiting_task_num() < job.min_available
        };
        match (below(l), below(r)) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => Ordering::Equal,
        }
    }

    fn preemptable(&self, snap: &Snapshot, _p: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(above_min_available(snap, candidates))
    }

    fn reclaimable(&self, snap: &Snapshot, _p: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(above_min_available(snap, candidates))
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Elastic {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_testkit::*;

    #[test]
    fn only_elastic_pods_are_victims_and_short_jobs_go_first() {
        let mut o = Objects::new()
            .node(node("n1", "16", "64Gi"))
            .pod_group(pod_group("ns", "el", 2))
            .pod_group(pod_group("ns", "new", 2));
        for i in 0..4 {
            o = o.pod(pod("ns", &format!("el-{i}")).group("el").cpu_mem("1", "1Gi").running_on("n1"));
        }
        o = o.pod(pod("ns", "new-0").group("new").cpu_mem("1", "1Gi"));
        o = o.pod(pod("ns", "new-1").group("new").cpu_mem("1", "1Gi"));
        let s = o.snapshot();
        let el = s.job_id("ns/el").unwrap();
        let new = s.job_id("ns/new").unwrap();
        assert_eq!(Elastic.job_order(&s, new, el), Ordering::Less);
        let running: Vec<TaskId> = s.job(el).tasks.clone();
        let v = Elastic.preemptable(&s, s.job(new).tasks[0], &running).unwrap();
        assert_eq!(v.len(), 2, "4 running with minMember 2: two elastic victims");
    }
}
