//! What a cycle tells the metrics: the facts behind Volcano's `volcano_*` scheduler metrics
//! that the core decides (per-job shares and gang shortfalls, preemption attempts, eviction
//! transactions, jobs that got a task placed), as plain data on the [`crate::CycleOutcome`].
//!
//! The core keeps no metric and reads no clock: the shells turn these facts into Prometheus
//! series (the `volcano-metrics` crate), and time them with an [`crate::Observer`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::resource::Resource;

/// The metric facts of one cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CycleMetrics {
    /// The queue names, in snapshot order ([`JobMetrics::queue`] indexes them).
    pub queue_names: Vec<String>,
    /// One entry per job of the snapshot, in snapshot order: a job that is in no entry is
    /// gone, and the shells remove its series.
    pub jobs: Vec<JobMetrics>,
    /// Jobs the gang plugin found not ready (`volcano_unschedule_job_count`); `None`
    /// without `gang`.
    pub unschedulable_jobs: Option<u64>,
    /// Nodes the preempt action tried to free (`volcano_total_preemption_attempts`).
    pub preemption_attempts: u64,
    /// The victims the plugins allowed in the last of those attempts
    /// (`volcano_pod_preemption_victims`); `None` when no attempt was made.
    pub preemption_victims: Option<u64>,
    /// Committed statements that evicted pods, by action (`volcano_eviction_transactions_total`).
    pub eviction_transactions: BTreeMap<&'static str, u64>,
    /// Jobs `allocate` did not try again because they failed at this same state in the
    /// last cycle ([`crate::session::retry`]; not a Volcano metric: the scheduler logs it).
    pub skipped_tries: u64,
    /// The use of each real HyperNode after the cycle, by name
    /// (`volcano_rs_hypernode_utilization`); empty without HyperNodes.
    pub hyper_nodes: Vec<HyperNodeUse>,
    /// Admitted jobs with a network topology constraint that are not ready after the
    /// cycle, by (mode, highest tier allowed; 0 for soft)
    /// (`volcano_rs_network_topology_jobs_waiting`).
    pub topology_waiting: BTreeMap<(&'static str, u32), u64>,
}

/// What a HyperNode holds after a cycle.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HyperNodeUse {
    /// Its name.
    pub name: Arc<str>,
    /// Its tier.
    pub tier: u32,
    /// Σ allocatable of its nodes.
    pub allocatable: Resource,
    /// Σ used of its nodes (the cycle's placements included).
    pub used: Resource,
}

/// The metric facts of one job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobMetrics {
    /// The PodGroup's `namespace/name`.
    pub key: Arc<str>,
    /// Its queue, an index into [`CycleMetrics::queue_names`].
    pub queue: usize,
    /// PodGroup creation time, milliseconds since the epoch.
    pub creation_ms: i64,
    /// Dominant resource share (`drf`, `volcano_job_share`).
    pub share: Option<f64>,
    /// Tasks short of `minMember` (`gang`, `volcano_unschedule_task_count`): 0 for a ready
    /// job.
    pub unscheduled_tasks: Option<i64>,
    /// The job was unschedulable in this cycle (`gang`, `volcano_job_retry_counts`).
    pub retried: bool,
    /// A task of the job was bound or pipelined in this cycle
    /// (`volcano_e2e_job_scheduling_duration`: the cycle's time minus the creation time).
    pub scheduled: bool,
}

/// What a queue looked like at the end of the session (for status, metrics and reports).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueReport {
    /// Σ requests of the queue's tasks in allocated statuses.
    pub allocated: Resource,
    /// Deserved resources computed by the queue policy plugin, if any.
    pub deserved: Option<Resource>,
    /// Share (max over dims of allocated/deserved), if a policy plugin computed one.
    pub share: Option<f64>,
    /// `allocated` + the requests of pending tasks, from the queue policy plugin.
    pub request: Option<Resource>,
    /// `minResources` reserved by admitted jobs not allocated yet, from the policy plugin.
    pub inqueue: Option<Resource>,
    /// `spec.capability` as the policy plugin reads it (`capacity` only, as in Volcano).
    pub capability: Option<Resource>,
    /// The most the queue may hold, from the policy plugin.
    pub real_capability: Option<Resource>,
    /// `spec.weight` (`proportion` only, as in Volcano).
    pub weight: Option<i32>,
    /// The policy plugin's overused answer at close.
    pub overused: Option<bool>,
}
