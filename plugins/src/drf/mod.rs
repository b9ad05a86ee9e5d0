//! The `drf` plugin: dominant resource fairness between jobs (spec §3.3).
//!
//! A job's share is the largest, over the dimensions of the cluster's total resources, of
//! the job's allocated resources divided by the total. Jobs with a lower share are
//! scheduled first (JobOrder), and a preemptor may evict a task of another job when, after
//! the move, the preemptor's job would still not have a larger share than the victim's
//! (Preemptable). Shares follow every allocate and deallocate event of the session.
//!
//! Hierarchical DRF (`enableHierarchy: true` on the plugin entry) is not implemented yet:
//! such a configuration is rejected at load.

mod args;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::resource::{cmp_f64, share, Resource, MIN_RESOURCE};
use volcano_framework::{parse_args, ArgsError, Hooks, JobId, Plugin, PluginBuilder, SessionContext, Snapshot, TaskId};

pub use args::Args;

/// Configuration name.
pub const NAME: &str = "drf";

/// Two shares closer than this are equal when choosing victims (Volcano `shareDelta`).
pub const SHARE_DELTA: f64 = 1e-6;

/// The error returned for `enableHierarchy: true`.
pub const HIERARCHY_NOT_IMPLEMENTED: &str =
    "drf enableHierarchy (hierarchical DRF) is not implemented yet in volcano-rs";

/// The plugin state of one session.
#[derive(Debug, Default)]
pub struct Drf {
    /// The dimensions of the cluster total that count (≥ the epsilon), with their totals.
    total_dims: Vec<(String, f64)>,
    /// Allocated resources per job, by `JobId::idx()`.
    allocated: Vec<Resource>,
    /// Dominant share per job, by `JobId::idx()`.
    shares: Vec<f64>,
}

impl Drf {
    /// A plugin value for one session (state is built by `on_session_open`).
    pub fn new(_args: Args) -> Self {
        Self::default()
    }

    /// The dominant share of `allocated` against the cluster total.
    pub fn share_of(&self, allocated: &Resource) -> f64 {
        dominant_share(&self.total_dims, allocated)
    }

    /// The job's current dominant share (0 for a job outside the session).
    pub fn job_share(&self, j: JobId) -> f64 {
        self.shares.get(j.idx()).copied().unwrap_or(0.0)
    }

    fn update(&mut self, snap: &Snapshot, t: TaskId, add: bool) {
        let task = snap.task(t);
        let Some(j) = task.job else { return };
        let Some(alloc) = self.allocated.get_mut(j.idx()) else { return };
        if add {
            alloc.add(&task.resreq);
        } else {
            alloc.sub_unchecked(&task.resreq);
        }
        self.shares[j.idx()] = dominant_share(&self.total_dims, &self.allocated[j.idx()]);
    }
}

fn dominant_share(total_dims: &[(String, f64)], allocated: &Resource) -> f64 {
    let mut s = 0.0f64;
    for (name, total) in total_dims {
        s = s.max(share(allocated.get(name), *total));
    }
    s
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::JOB_ORDER | Hooks::PREEMPTABLE | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        self.total_dims =
            snap.total_resource.dims().filter(|(_, v)| *v >= MIN_RESOURCE).map(|(n, v)| (n.to_string(), v)).collect();
        self.allocated = snap.jobs.iter().map(|j| j.allocated.clone()).collect();
        self.shares = self.allocated.iter().map(|a| dominant_share(&self.total_dims, a)).collect();
    }

    fn job_order(&self, _snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        cmp_f64(self.job_share(l), self.job_share(r))
    }

    fn preemptable(&self, snap: &Snapshot, preemptor: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        let p = snap.task(preemptor);
        let Some(pj) = p.job.filter(|j| j.idx() < self.allocated.len()) else { return Some(Vec::new()) };
        let mut future = self.allocated[pj.idx()].clone();
        future.add(&p.resreq);
        let ls = self.share_of(&future);

        // A running copy of each victim job's allocation: every victim taken lowers it.
        let mut running: Vec<(JobId, Resource)> = Vec::new();
        let mut victims = Vec::new();
        for &c in candidates {
            let task = snap.task(c);
            let Some(cj) = task.job.filter(|j| j.idx() < self.allocated.len()) else { continue };
            let pos = match running.iter().position(|(j, _)| *j == cj) {
                Some(pos) => pos,
                None => {
                    running.push((cj, self.allocated[cj.idx()].clone()));
                    running.len() - 1
                }
            };
            let remaining = &mut running[pos].1;
            remaining.sub_unchecked(&task.resreq);
            let rs = self.share_of(remaining);
            if ls < rs || (ls - rs).abs() <= SHARE_DELTA {
                victims.push(c);
            }
        }
        tracing::trace!(preemptor = %p.key, victims = victims.len(), "drf: preemptable");
        Some(victims)
    }

    fn on_allocate(&mut self, snap: &Snapshot, t: TaskId) {
        self.update(snap, t, true);
    }

    fn on_deallocate(&mut self, snap: &Snapshot, t: TaskId) {
        self.update(snap, t, false);
    }
}

/// Checks the entry (no arguments; `enableHierarchy: true` is not supported yet) and
/// returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    if opt.enabled_hierarchy == Some(true) {
        return Err(ArgsError(HIERARCHY_NOT_IMPLEMENTED.to_string()));
    }
    let args: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(move || Box::new(Drf::new(args)) as Box<dyn Plugin>))
}
