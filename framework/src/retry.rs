//! What a session remembers of the jobs `allocate` could not place, for the next session
//! over the same snapshot revision ([`crate::session::retry`] says when it is made and
//! used; [`crate::Snapshot::keep_retries`] keeps it).

use std::collections::BTreeMap;
use std::sync::Arc;

use volcano_api::conf::SchedulerConfiguration;

use crate::model::{NodeId, TaskId, TaskStatus};
use crate::status::FitErrors;

/// What a failed attempt reads and leaves on its job: the fields an attempt sets.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trace {
    pub(crate) fit_errors: BTreeMap<TaskId, FitErrors>,
    pub(crate) job_fit_error: Option<String>,
    /// Each task's last placement before a roll-back ([`crate::TaskInfo::last_tx`]).
    pub(crate) last_tx: Vec<Option<(TaskStatus, NodeId)>>,
}

/// A failed attempt: the job's key, and its trace before and after.
#[derive(Clone, Debug)]
pub(crate) struct FailedTry {
    pub(crate) key: Arc<str>,
    pub(crate) before: Trace,
    pub(crate) after: Trace,
}

/// The failed attempts of one session, for the next session over the same snapshot
/// revision and configuration ([`crate::CycleOutcome::retries`]; a shell keeps it with
/// [`crate::Snapshot::keep_retries`]).
#[derive(Clone, Debug)]
pub struct RetryMemo {
    pub(crate) revision: u64,
    pub(crate) conf: SchedulerConfiguration,
    pub(crate) tries: Vec<Option<Arc<FailedTry>>>,
}

impl RetryMemo {
    /// The snapshot revision the session opened with.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Number of jobs remembered.
    pub fn len(&self) -> usize {
        self.tries.iter().flatten().count()
    }

    /// Whether no job is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the memory is for sessions of this configuration.
    pub(crate) fn same_conf(&self, conf: &SchedulerConfiguration) -> bool {
        self.conf == *conf
    }
}
