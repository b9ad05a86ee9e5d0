//! The `enqueue` action: admission. Pending PodGroups are admitted (`Inqueue`) queue by
//! queue in queue order, job by job in job order, when they have no `minResources` or the
//! `JobEnqueueable` vote says yes; admitted jobs' minimum resources are reserved through the
//! `JobEnqueued` hooks. Rejected jobs stay Pending, with the reason recorded for their
//! PodGroup condition.

use serde::Deserialize;
use volcano_api::conf::Arguments;
use volcano_framework::{parse_args, Action, ArgsError, JobId, Session, Worklist};

/// Configuration name.
pub const NAME: &str = "enqueue";

/// `enqueue` takes no arguments.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// Checks the arguments and builds the action.
pub fn factory(args: &Arguments) -> Result<Box<dyn Action>, ArgsError> {
    let _: Args = parse_args(args)?;
    Ok(Box::new(Enqueue))
}

/// The enqueue action.
#[derive(Debug)]
pub struct Enqueue;

impl Action for Enqueue {
    fn name(&self) -> &'static str {
        NAME
    }

    fn execute(&self, ssn: &mut Session) {
        let mut work = Worklist::new(ssn);
        for i in 0..ssn.snap.jobs.len() {
            let j = JobId(i as u32);
            if ssn.snap.job(j).is_pending() {
                work.add_job(ssn, j, None);
            }
        }
        while let Some(q) = work.pop_queue(ssn) {
            let Some(j) = work.pop_job(ssn, q) else { continue };
            let admitted = if ssn.snap.job(j).min_resources.is_none() { Ok(()) } else { ssn.job_enqueueable_by(j) };
            match admitted {
                Ok(()) => {
                    ssn.job_enqueued(j);
                    ssn.admit(j);
                    tracing::debug!(job = %ssn.snap.job(j).key, "admitted");
                }
                Err((plugin, why)) => {
                    tracing::debug!(job = %ssn.snap.job(j).key, plugin, why, "not admitted");
                    ssn.reject_admission(j, plugin, why);
                }
            }
            if work.has_jobs(q) {
                work.push_queue(ssn, q);
            }
        }
    }
}
