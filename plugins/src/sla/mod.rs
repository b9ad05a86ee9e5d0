//! The `sla` plugin: a waiting-time service level for jobs.
//!
//! A job's waiting time comes from its PodGroup annotation (`volcano.sh/sla-waiting-time`
//! or `sla-waiting-time`, parsed into [`volcano_framework::JobInfo::waiting_time_ms`]),
//! else from the plugin's `sla-waiting-time` argument. Its deadline is the PodGroup's
//! creation time plus the waiting time.
//!
//! Jobs with a waiting time go before jobs without one, earlier deadlines first
//! (JobOrder). Once a job has waited at least its waiting time, the plugin votes Permit
//! for its admission (JobEnqueueable) and for keeping its pipelined placements
//! (JobPipelined), so a large job gets admitted and reserves resources instead of waiting
//! forever behind a stream of small ones. Before that, and for jobs without a waiting
//! time, it abstains.

mod args;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::{
    Admission, ArgsError, Hooks, Incremental, JobId, JobInfo, Plugin, PluginBuilder, SessionContext, Snapshot, Vote,
};

pub use args::{Args, WAITING_TIME_KEY};

use volcano_framework::parse_args;

/// Configuration name.
pub const NAME: &str = "sla";

/// The plugin state of one session.
#[derive(Clone, Debug, Default)]
pub struct Sla {
    /// The global waiting time (`sla-waiting-time`), milliseconds.
    global_waiting_ms: Option<i64>,
    /// The session's time, milliseconds since the epoch.
    now_ms: i64,
}

impl Sla {
    /// A plugin value with the global waiting time in milliseconds (already validated).
    pub fn new(global_waiting_ms: Option<i64>) -> Self {
        Sla { global_waiting_ms, now_ms: 0 }
    }

    /// The job's waiting time in milliseconds: its own, else the global one.
    pub fn waiting_time_ms(&self, job: &JobInfo) -> Option<i64> {
        job.waiting_time_ms.filter(|w| *w > 0).or(self.global_waiting_ms)
    }

    /// The job's deadline (PodGroup creation + waiting time), if it has a waiting time.
    pub fn deadline_ms(&self, job: &JobInfo) -> Option<i64> {
        self.waiting_time_ms(job).map(|w| job.creation_ms.saturating_add(w))
    }

    /// Permit once the job has waited at least its waiting time, else abstain.
    fn permit_when_due(&self, job: &JobInfo) -> Vote {
        let Some(wait) = self.waiting_time_ms(job) else { return Vote::Abstain };
        let waited = self.now_ms.saturating_sub(job.creation_ms);
        if waited < wait {
            return Vote::Abstain;
        }
        tracing::debug!(job = %job.key, waited_ms = waited, waiting_time_ms = wait, "sla: waiting time is over");
        Vote::Permit
    }
}

impl Plugin for Sla {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::JOB_ORDER | Hooks::JOB_ENQUEUEABLE | Hooks::JOB_PIPELINED
    }

    fn on_session_open(&mut self, _snap: &Snapshot, ctx: &SessionContext) {
        self.now_ms = ctx.now_ms;
    }

    fn job_order(&self, snap: &Snapshot, l: JobId, r: JobId) -> Ordering {
        match (self.deadline_ms(snap.job(l)), self.deadline_ms(snap.job(r))) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Greater,
            (Some(_), None) => Ordering::Less,
            (Some(a), Some(b)) => a.cmp(&b),
        }
    }

    fn job_enqueueable(&self, snap: &Snapshot, j: JobId) -> Admission {
        match self.permit_when_due(snap.job(j)) {
            Vote::Permit => Admission::Permit,
            Vote::Abstain | Vote::Reject => Admission::Abstain,
        }
    }

    fn job_pipelined(&self, snap: &Snapshot, j: JobId) -> Vote {
        self.permit_when_due(snap.job(j))
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Sla {
    /// A job with a waiting time is permitted once its time is over, which the clock says.
    fn reads_clock(&self, snap: &Snapshot) -> bool {
        self.global_waiting_ms.is_some() || snap.jobs.iter().any(|j| self.waiting_time_ms(j).is_some())
    }
}

/// Checks the arguments (`sla-waiting-time` must be a positive Go duration) and returns
/// the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let global = args.waiting_time_ms()?;
    Ok(Arc::new(move || Box::new(Sla::new(global)) as Box<dyn Plugin>))
}
