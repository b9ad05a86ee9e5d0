//! The `conformance` plugin: critical pods are never chosen as preemption or reclaim
//! victims — pods of PriorityClass `system-cluster-critical` or `system-node-critical`, and
//! pods in the `kube-system` namespace.

use std::sync::Arc;

use serde::Deserialize;
use volcano_api::conf::PluginOption;
use volcano_framework::{
    parse_args, ArgsError, EvictionContext, Hooks, Incremental, Plugin, PluginBuilder, Snapshot, TaskId,
};

/// Configuration name.
pub const NAME: &str = "conformance";

/// `conformance` takes no arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let _: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(|| Box::new(Conformance) as Box<dyn Plugin>))
}

/// The conformance plugin.
#[derive(Debug, Default)]
pub struct Conformance;

fn evictable(snap: &Snapshot, t: TaskId) -> bool {
    let task = snap.task(t);
    let class = task.pod.spec.as_ref().and_then(|s| s.priority_class_name.as_deref());
    !matches!(class, Some("system-cluster-critical" | "system-node-critical")) && task.namespace() != "kube-system"
}

impl Plugin for Conformance {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::PREEMPTABLE | Hooks::RECLAIMABLE | Hooks::EVICTABLE
    }

    fn preemptable(&self, snap: &Snapshot, _p: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(candidates.iter().copied().filter(|t| evictable(snap, *t)).collect())
    }

    fn reclaimable(&self, snap: &Snapshot, _p: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(candidates.iter().copied().filter(|t| evictable(snap, *t)).collect())
    }

    fn evictable(&self, snap: &Snapshot, _ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        Some(candidates.iter().copied().filter(|t| evictable(snap, *t)).collect())
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Conformance {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_testkit::*;

    #[test]
    fn critical_pods_are_protected() {
        let s = Objects::new()
            .node(node("n1", "16", "64Gi"))
            .pod(pod("kube-system", "dns").cpu_mem("1", "1Gi").running_on("n1").scheduler("default-scheduler"))
            .pod(
                pod("ns", "crit")
                    .cpu_mem("1", "1Gi")
                    .running_on("n1")
                    .with_spec(|s| s.priority_class_name = Some("system-node-critical".into())),
            )
            .pod(pod("ns", "plain").cpu_mem("1", "1Gi").running_on("n1"))
            .snapshot();
        let all: Vec<TaskId> = (0..s.tasks.len() as u32).map(TaskId).collect();
        let v = Conformance.preemptable(&s, all[0], &all).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(&*s.task(v[0]).key, "ns/plain");
    }
}
