//! What a session remembers of the jobs `allocate` could not place, for the next session
//! over the same snapshot revision ([`crate::session::retry`] says when it is made and
//! used; [`crate::Snapshot::keep_retries`] keeps it).

use std::collections::BTreeMap;
use std::sync::Arc;

use volcano_api::conf::SchedulerConfiguration;

use crate::model::{JobTrace, NodeId, TaskStatus};
use crate::stats::{CycleMetrics, QueueReport};

/// What a failed attempt reads and leaves on its job: the fields an attempt sets.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trace {
    /// The job's trace ([`crate::Snapshot::job_trace`]); `None` for an empty one.
    pub(crate) job: Option<Arc<JobTrace>>,
    /// Each task's last placement before a roll-back ([`crate::Snapshot::last_tx`]).
    pub(crate) last_tx: Vec<Option<(TaskStatus, NodeId)>>,
}

/// A failed attempt: the job's key, and its trace before and after.
#[derive(Clone, Debug)]
pub(crate) struct FailedTry {
    pub(crate) key: Arc<str>,
    pub(crate) before: Trace,
    pub(crate) after: Arc<Trace>,
    /// Made at the session's opening state: the next session over the same revision may
    /// replay it exactly.
    pub(crate) exact: bool,
    /// Why the job cannot be placed while no node gains room, when room alone proves it.
    pub(crate) proof: Option<Arc<RoomProof>>,
}

/// A proof by room that a job cannot be placed (see [`crate::session::retry`]): at the
/// state its attempt saw, fewer of its pods could be placed than it needs, counting each
/// node's room alone; that stays true while no node gains room, the job does not change,
/// and the binds its session made before the attempt are on their nodes.
#[derive(Debug)]
pub(crate) struct RoomProof {
    /// [`crate::Snapshot::growth`] of the snapshot the attempt's session opened with.
    pub(crate) growth: u64,
    /// The job's version then ([`crate::JobInfo`]).
    pub(crate) version: crate::model::JobVersion,
    /// The binds of the attempt's session (pod key, node), complete once it has closed.
    pub(crate) binds: Arc<SessionBinds>,
}

/// The binds one session made, shared by the proofs it made.
#[derive(Debug, Default)]
pub(crate) struct SessionBinds {
    /// Each bind: the pod's index in that session's snapshot (a hint: indices move when
    /// pods are removed), its key, and the node.
    pub(crate) list: std::sync::OnceLock<Vec<(crate::model::TaskId, Arc<str>, NodeId)>>,
}

/// The failed attempts of one session, for the next session over the same snapshot
/// revision and configuration ([`crate::CycleOutcome::retries`]; a shell keeps it with
/// [`crate::Snapshot::keep_retries`]).
#[derive(Clone, Debug)]
pub struct RetryMemo {
    pub(crate) revision: u64,
    pub(crate) conf: SchedulerConfiguration,
    pub(crate) tries: Vec<Option<Arc<FailedTry>>>,
    /// The outcome of the session, when it left the cluster as it found it (see
    /// [`Settled`]).
    pub(crate) settled: Option<Arc<Settled>>,
}

/// The outcome of a session that changed nothing: it committed and kept no statement,
/// every job `allocate` tried was a remembered failure it skipped (or it tried none), and
/// closing it wrote nothing (no effect at all). The next session over the same snapshot
/// state ([`crate::Snapshot::state`]: not one object changed, read by scheduling or not)
/// and configuration would open over the same snapshot with this session's memory, skip
/// the same attempts in the same order, and close over the same statuses and conditions,
/// so it would give exactly this outcome: [`crate::run_cycle`] returns it again without
/// opening a session (see [`crate::session::retry`]).
#[derive(Debug)]
pub(crate) struct Settled {
    /// The snapshot state the session opened with.
    pub(crate) state: u64,
    pub(crate) queues: BTreeMap<String, QueueReport>,
    pub(crate) pending_reasons: BTreeMap<String, String>,
    pub(crate) metrics: CycleMetrics,
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

    /// Number of jobs remembered with a room proof (skipped while no node gains room).
    pub fn proven(&self) -> usize {
        self.tries.iter().flatten().filter(|t| t.proof.is_some()).count()
    }

    /// Whether no job is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the session that made the memory changed nothing and wrote nothing, so that
    /// the next cycle over the same snapshot state gives its outcome again.
    pub fn is_settled(&self) -> bool {
        self.settled.is_some()
    }

    /// Whether the memory is for sessions of this configuration.
    pub(crate) fn same_conf(&self, conf: &SchedulerConfiguration) -> bool {
        self.conf == *conf
    }
}
