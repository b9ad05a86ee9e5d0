//! The invariants checked after every action in tests, the simulator and the benches: no
//! node beyond its allocatable on any resource, every gang committed whole, no queue beyond
//! its capability.

use crate::cycle::Observer;
use crate::model::*;
use crate::resource::{DimensionDefault, Resource, MIN_RESOURCE};
use crate::session::Session;
use crate::snapshot::Snapshot;

/// Checks the scheduling invariants after every action and collects violations:
/// no node beyond its allocatable on any resource, every gang committed whole, no queue
/// beyond its capability. Pre-existing overuse (from the input state) is tolerated as
/// long as an action does not make it grow.
#[derive(Default)]
pub struct InvariantChecker {
    has_baseline: bool,
    baseline_nodes: Vec<Resource>,
    baseline_queues: Vec<Resource>,
    /// Violations found so far, with the action that caused them.
    pub violations: Vec<String>,
}

fn queue_allocated(snap: &Snapshot) -> Vec<Resource> {
    let mut v = vec![Resource::empty(); snap.queues.len()];
    for job in &snap.jobs {
        v[job.queue.idx()].add(&job.allocated);
    }
    v
}

fn node_commitment(n: &NodeInfo) -> Resource {
    // What the node must eventually hold: used − releasing + pipelined.
    let mut r = n.used.clone();
    r.sub_unchecked(&n.releasing).add(&n.pipelined);
    r.set_max(&n.used);
    r
}

fn grew_beyond(now: &Resource, limit: &Resource, before: &Resource) -> Option<String> {
    for (name, v) in now.dims() {
        let lim = limit.get(name);
        if v > lim + MIN_RESOURCE && v > before.get(name) + MIN_RESOURCE {
            return Some(format!("{name}: {v} > {lim}"));
        }
    }
    None
}

impl InvariantChecker {
    fn ensure_baseline(&mut self, snap: &Snapshot) {
        // The first session seen (or one of another cluster) sets the baseline; an empty
        // cluster has a baseline too.
        if !self.has_baseline
            || self.baseline_nodes.len() != snap.nodes.len()
            || self.baseline_queues.len() != snap.queues.len()
        {
            self.has_baseline = true;
            self.baseline_nodes = snap.nodes.iter().map(node_commitment).collect();
            self.baseline_queues = queue_allocated(snap);
        }
    }

    /// Checks a session (call after every action).
    pub fn check(&mut self, action: &str, ssn: &Session) {
        let snap = &ssn.snap;
        self.ensure_baseline(snap);
        for (i, n) in snap.nodes.iter().enumerate() {
            if let Some(d) = grew_beyond(&node_commitment(n), &n.allocatable, &self.baseline_nodes[i]) {
                self.violations.push(format!("after {action}: node {} over allocatable ({d})", n.name));
            }
        }
        for job in &snap.jobs {
            // Placement, not eviction, is checked here: pods evicted in this cycle
            // (Releasing) still count, since whether a gang may lose pods is the victim
            // rules' decision (the gang plugin's preemptable/reclaimable votes).
            let committed = job.count(TaskStatus::Binding);
            let placed = job.ready_task_num() + job.count(TaskStatus::Releasing) + job.pending_best_effort as i32;
            if committed > 0 && placed < job.min_available {
                self.violations.push(format!(
                    "after {action}: job {} committed {committed} pods but only {} of minMember {} are placed",
                    job.key,
                    job.ready_task_num(),
                    job.min_available
                ));
            }
        }
        let now = queue_allocated(snap);
        for (i, q) in snap.queues.iter().enumerate() {
            let Some(cap) = &q.capability else { continue };
            let mut limit = now[i].clone();
            limit.min_dimension(cap, DimensionDefault::Infinity);
            // Only dims present in the capability are limited.
            let mut bounded = Resource::empty();
            for (name, v) in now[i].dims() {
                let has = match name {
                    "cpu" => cap.milli_cpu > 0.0,
                    "memory" => cap.memory > 0.0,
                    n => cap.has_scalar(n),
                };
                if has {
                    bounded.set(name, v);
                }
            }
            if let Some(d) = grew_beyond(&bounded, cap, &self.baseline_queues[i]) {
                self.violations.push(format!("after {action}: queue {} over capability ({d})", q.name));
            }
        }
    }
}

impl Observer for InvariantChecker {
    fn before_action(&mut self, _action: &str, ssn: &Session) {
        self.ensure_baseline(&ssn.snap);
    }
    fn after_action(&mut self, action: &str, ssn: &Session) {
        self.check(action, ssn);
    }
}
