//! The `overcommit` plugin: cluster-wide admission control for `enqueue`.
//!
//! When the session opens, the plugin computes the cluster's idle resources with
//! over-commitment, `total × overcommit-factor − Σ node.used`, and what admitted jobs
//! already reserve: the `minResources` of Inqueue jobs, plus the not-yet-allocated part
//! of the `minResources` of Running jobs. A Pending job is admitted (JobEnqueueable votes
//! Permit) when its `minResources` plus the reservations fit the idle resources on the
//! dimensions it asks for; JobEnqueued then reserves its `minResources`. Jobs without
//! `minResources` are always admitted.

mod args;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_api::crd::PodGroupPhase;
use volcano_framework::resource::Resource;
use volcano_framework::{
    parse_args, Admission, ArgsError, Hooks, Incremental, JobId, Plugin, PluginBuilder, SessionContext, Snapshot,
};

pub use args::{Args, DEFAULT_OVERCOMMIT_FACTOR};

use crate::queue_accounting::{
    deduct_gated, exceeded_dims, format_resource_names, observed_phase, running_reservation, shortfall,
};

/// Configuration name.
pub const NAME: &str = "overcommit";

/// Prefix of the PodGroup event message when admission is refused.
pub const CLUSTER_OVERUSED: &str = "resource in cluster is overused";

/// The plugin state of one session.
#[derive(Debug, Default)]
pub struct Overcommit {
    factor: f64,
    idle: Resource,
    inqueue: Resource,
}

impl Overcommit {
    /// A plugin value for one session with the given factor (already validated).
    pub fn new(factor: f64) -> Self {
        Self { factor, ..Self::default() }
    }

    /// Cluster idle resources with over-commitment (may be negative on a dimension).
    pub fn idle(&self) -> &Resource {
        &self.idle
    }

    /// Resources reserved by admitted jobs.
    pub fn inqueue(&self) -> &Resource {
        &self.inqueue
    }
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::JOB_ENQUEUEABLE | Hooks::JOB_ENQUEUED
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        let mut idle = snap.total_resource.clone();
        idle.multi(self.factor);
        for n in &snap.nodes {
            idle.sub_unchecked(&n.used);
        }
        self.idle = idle;
        let mut inqueue = Resource::empty();
        for job in &snap.jobs {
            match &job.min_resources {
                Some(min) if observed_phase(job) == Some(PodGroupPhase::Inqueue) => {
                    inqueue.add(&deduct_gated(snap, job, min.clone()));
                }
                _ => {
                    if let Some(r) = running_reservation(snap, job) {
                        inqueue.add(&r);
                    }
                }
            }
        }
        self.inqueue = inqueue;
        tracing::debug!(
            factor = self.factor,
            idle = %self.idle,
            inqueue = %self.inqueue,
            "overcommit: session state"
        );
    }

    fn job_enqueueable(&self, snap: &Snapshot, j: JobId) -> Admission {
        let job = snap.job(j);
        let Some(min) = &job.min_resources else { return Admission::Permit };
        let wanted = |n: &str| self.inqueue.get(n) + min.get(n);
        if exceeded_dims(min, &self.idle, wanted).next().is_none() {
            return Admission::Permit;
        }
        let message = format!(
            "{}; the cluster's room (allocatable × overcommit factor {} − used): {}",
            format_resource_names(CLUSTER_OVERUSED, "overused", exceeded_dims(min, &self.idle, wanted)),
            self.factor,
            shortfall(
                exceeded_dims(min, &self.idle, wanted),
                min,
                &self.idle,
                &[("reserved for admitted jobs", &self.inqueue, 1.0)]
            )
        );
        tracing::debug!(
            job = %job.key,
            min = %min,
            idle = %self.idle,
            inqueue = %self.inqueue,
            "job rejected: {message}"
        );
        Admission::Reject(message)
    }

    fn job_enqueued(&mut self, snap: &Snapshot, j: JobId) {
        let job = snap.job(j);
        if let Some(min) = &job.min_resources {
            self.inqueue.add(&deduct_gated(snap, job, min.clone()));
        }
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Overcommit {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

/// Checks the arguments (`overcommit-factor`) and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let factor = args.factor();
    Ok(Arc::new(move || Box::new(Overcommit::new(factor)) as Box<dyn Plugin>))
}
