//! The `drf` plugin: dominant resource fairness between jobs.
//!
//! A job's share is the largest, over the dimensions of the cluster's total resources, of
//! the job's allocated resources divided by the total. Jobs with a lower share are
//! scheduled first (JobOrder), and a preemptor may evict a task of another job when, after
//! the move, the preemptor's job would still not have a larger share than the victim's
//! (Preemptable). Shares follow every allocate and deallocate event of the session.
//!
//! With `enableHierarchy: true` on the plugin entry the plugin also runs hierarchical DRF
//! (HDRF): queues form a tree from their `volcano.sh/hierarchy` and
//! `volcano.sh/hierarchy-weights` annotations, jobs are the leaves, and the plugin orders
//! queues (QueueOrder) and picks reclaim victims (Reclaimable) on that tree. See the
//! `hdrf` module and `docs/plugins/drf.md`.

mod args;
mod hdrf;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::resource::{cmp_f64, share, Resource, MIN_RESOURCE};
use volcano_framework::{
    parse_args, ArgsError, CloseOutput, Hooks, Incremental, JobId, JobMetric, Plugin, PluginBuilder, QueueId,
    SessionContext, Snapshot, TaskId,
};

pub use args::Args;

/// Configuration name.
pub const NAME: &str = "drf";

/// Two shares closer than this are equal when choosing victims (Volcano `shareDelta`).
pub const SHARE_DELTA: f64 = 1e-6;

/// The plugin state of one session.
#[derive(Debug, Default)]
pub struct Drf {
    /// The dimensions of the cluster total that count (≥ the epsilon), with their totals.
    total_dims: Vec<(String, f64)>,
    /// Allocated resources per job, by `JobId::idx()`.
    allocated: Vec<Resource>,
    /// Dominant share per job, by `JobId::idx()`.
    shares: Vec<f64>,
    /// Whether the entry has `enableHierarchy: true`.
    hierarchy: bool,
    /// The queue tree (hierarchical mode, once the session is open).
    hdrf: Option<hdrf::Hdrf>,
}

impl Drf {
    /// A plugin value for one session (state is built by `on_session_open`).
    pub fn new(_args: Args) -> Self {
        Self::default()
    }

    /// A plugin value for one session in hierarchical mode (`enableHierarchy: true`).
    pub fn hierarchical(args: Args) -> Self {
        Self { hierarchy: true, ..Self::new(args) }
    }

    /// Whether this value runs hierarchical DRF.
    pub fn is_hierarchical(&self) -> bool {
        self.hierarchy
    }

    /// The dominant share of the queue's node in the hierarchy (`None` outside
    /// hierarchical mode or for an unknown queue). Internal nodes hold their children's
    /// allocations scaled to the smallest unsaturated dominant share, as Volcano's HDRF does.
    pub fn queue_share(&self, q: QueueId) -> Option<f64> {
        self.hdrf.as_ref().and_then(|h| h.queue_share(q))
    }

    /// Whether the queue's node in the hierarchy is saturated (every job below it got all
    /// it asked for on some resource, or asks for a resource the cluster has no more of).
    /// `None` outside hierarchical mode or for an unknown queue.
    pub fn queue_saturated(&self, q: QueueId) -> Option<bool> {
        self.hdrf.as_ref().and_then(|h| h.queue_saturated(q))
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
        if let Some(h) = self.hdrf.as_mut() {
            h.on_task(snap, &self.total_dims, &self.allocated, j, &task.resreq, add);
        }
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
        let flat = Hooks::JOB_ORDER | Hooks::PREEMPTABLE | Hooks::EVENT_HANDLER;
        if self.hierarchy {
            flat | Hooks::QUEUE_ORDER | Hooks::RECLAIMABLE
        } else {
            flat
        }
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        self.total_dims =
            snap.total_resource.dims().filter(|(_, v)| *v >= MIN_RESOURCE).map(|(n, v)| (n.to_string(), v)).collect();
        self.allocated = snap.jobs.iter().map(|j| j.allocated.clone()).collect();
        self.shares = self.allocated.iter().map(|a| dominant_share(&self.total_dims, a)).collect();
        if self.hierarchy {
            self.hdrf = Some(hdrf::Hdrf::build(snap, &self.total_dims, &self.allocated));
        }
    }

    fn on_session_close(&mut self, _snap: &Snapshot, _ctx: &SessionContext, out: &mut CloseOutput) {
        // Each job's last share, for `volcano_job_share` (Volcano sets it at open and on
        // every allocation; the value a scrape sees is the last one).
        out.job_metrics.extend(self.shares.iter().enumerate().map(|(i, s)| (JobId(i as u32), JobMetric::Share(*s))));
    }

    fn job_order(&self, _snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        cmp_f64(self.job_share(l), self.job_share(r))
    }

    fn queue_order(&self, _snap: &Snapshot, l: QueueId, r: QueueId) -> Ordering {
        match &self.hdrf {
            Some(h) => h.compare_queues(l, r),
            None => Ordering::Equal,
        }
    }

    fn reclaimable(&self, snap: &Snapshot, reclaimer: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        let h = self.hdrf.as_ref()?;
        let victims = h.reclaimable(snap, &self.total_dims, &self.allocated, reclaimer, candidates);
        tracing::trace!(reclaimer = %snap.task(reclaimer).key, victims = victims.len(), "drf: reclaimable");
        Some(victims)
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

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Drf {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

/// Checks the entry (no arguments) and returns the builder; `enableHierarchy: true`
/// builds the hierarchical variant.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let hierarchy = opt.enabled_hierarchy == Some(true);
    Ok(Arc::new(move || {
        let plugin = if hierarchy { Drf::hierarchical(args) } else { Drf::new(args) };
        Box::new(plugin) as Box<dyn Plugin>
    }))
}
