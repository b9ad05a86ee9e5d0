//! The simulation loop, on a virtual clock that advances one second (Volcano's schedule
//! period) per cycle: pods whose run time is over succeed → the snapshot kept since the
//! last cycle brought up to date with what changed ([`Cluster::snapshot`], the scheduler's
//! `Snapshot::update` path) → [`run_cycle`] (with the invariant checker) → effects applied
//! to the in-memory cluster → the job controller ([`crate::control`]) reconciles every
//! Volcano Job.

use volcano_framework::{
    run_cycle, Both, CycleContext, Effect, Explanation, InvariantChecker, Profile, SessionOptions, Snapshot,
};
use volcano_metrics::{ControllerMetrics, CycleTimer, SchedulerMetrics, TaskStage, POD_GROUP_PHASES};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::cluster::{Cluster, CycleRecord};
use crate::control::{self, Pass};
use crate::error::SimError;
use crate::manifest::Manifest;
use crate::normalize::{normalise, Normalised, Origins, SIM_EPOCH_MS};
use crate::report::{LastCycle, Report, Stop};

/// Without `--cycles`, the simulation stops after this many cycles at most.
pub const MAX_CYCLES: u32 = 100;

/// Volcano's schedule period: the virtual clock advances this much per cycle.
pub const CYCLE_PERIOD_MS: i64 = 1000;

/// An in-memory cluster scheduled by the real scheduling core.
pub struct Simulator {
    cluster: Cluster,
    origins: Origins,
    profile: Profile,
    options: SessionOptions,
    start_ms: i64,
    history: Vec<CycleRecord>,
    last: Option<LastCycle>,
    stop: Option<Stop>,
    /// Virtual time skipped while nothing happened but pods ran ([`Simulator::run`]).
    skipped_ms: i64,
    /// The `spec.schedulerName`s scheduled by this run.
    scheduler_names: Vec<String>,
    /// Volcano's metrics, when asked for ([`Simulator::enable_metrics`]).
    metrics: Option<Box<SimMetrics>>,
}

/// The metrics a simulation keeps: the scheduler's, and the queue controller's PodGroup
/// counts.
struct SimMetrics {
    scheduler: SchedulerMetrics,
    controller: ControllerMetrics,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("nodes", &self.cluster.nodes.len())
            .field("pods", &self.cluster.pods.len())
            .field("cycles", &self.history.len())
            .finish()
    }
}

impl Simulator {
    /// Normalises the manifest's objects (see [`normalise`]) and checks that a snapshot can
    /// be built from them (quantities are validated here, before the first cycle).
    pub fn new(manifest: Manifest, profile: Profile) -> Result<Self, SimError> {
        Self::from_normalised(normalise(manifest)?, profile)
    }

    /// A simulator over an already normalised cluster.
    pub fn from_normalised(n: Normalised, profile: Profile) -> Result<Self, SimError> {
        let start_ms = SIM_EPOCH_MS.max(n.latest_creation_ms);
        let names: Vec<&str> = n.scheduler_names.iter().map(String::as_str).collect();
        let prepared = Snapshot::build(&n.cluster.objects(), &names).map_err(|e| n.origins.snapshot_error(e))?;
        let mut cluster = n.cluster;
        cluster.index_finishes();
        // The first cycle runs on the snapshot built to validate the input.
        cluster.keep_snapshot(prepared);
        Ok(Simulator {
            scheduler_names: n.scheduler_names,
            cluster,
            origins: n.origins,
            profile,
            options: SessionOptions::default(),
            start_ms,
            history: Vec::new(),
            last: None,
            stop: None,
            skipped_ms: 0,
            metrics: None,
        })
    }

    /// Sets the session tunables (parallelism); results do not depend on them.
    pub fn set_session_options(&mut self, options: SessionOptions) {
        self.options = options;
    }

    /// The cluster as it is now.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The profile the cycles run.
    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// The scheduler names whose pods the cycles schedule.
    pub fn scheduler_names(&self) -> &[String] {
        &self.scheduler_names
    }

    /// What each cycle so far changed.
    pub fn history(&self) -> &[CycleRecord] {
        &self.history
    }

    /// Queue reports and pending reasons of the last cycle, if one ran.
    pub fn last_cycle(&self) -> Option<&LastCycle> {
        self.last.as_ref()
    }

    /// How the last [`Simulator::run`] ended, if one did.
    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }

    /// The virtual time of cycle `n` (from 1), milliseconds since the Unix epoch, with the
    /// time skipped so far ([`Simulator::run`]); a past cycle's time is in its record.
    pub fn cycle_time_ms(&self, n: u64) -> i64 {
        self.start_ms + (n as i64 - 1) * CYCLE_PERIOD_MS + self.skipped_ms
    }

    /// Runs one cycle: the pods whose run time is over succeed, the cycle runs on the kept
    /// snapshot brought up to date, its effects are applied, then the job controller
    /// reconciles every Volcano Job ([`crate::control::reconcile_jobs`]). An invariant the
    /// scheduler broke is an error (the cluster is then left as it was before the cycle, but
    /// for the pods that finished); so is an effect the cluster cannot apply (the effects
    /// before it are then applied).
    pub fn step(&mut self) -> Result<&CycleRecord, SimError> {
        let cycle = self.history.len() as u64 + 1;
        let now_ms = self.cycle_time_ms(cycle);
        let finished = self.cluster.finish_due(now_ms);
        // Jobs applied now: the job controller syncs them before the cycle, as it would
        // react to their watch events within the scheduling period.
        let applied = {
            let Cluster { jobs, arrivals, .. } = &mut self.cluster;
            let now = Time(Timestamp::from_millisecond(now_ms).unwrap_or_default());
            crate::arrive::apply_due(jobs, arrivals, now_ms - self.start_ms, &now)
        };
        let early = if applied.is_empty() {
            control::ControlRecord::default()
        } else {
            control::reconcile_jobs(&mut self.cluster, now_ms, Pass::Cycle)?
        };
        let names: Vec<&str> = self.scheduler_names.iter().map(String::as_str).collect();
        let snap = self.cluster.snapshot(&names).map_err(|e| self.origins.snapshot_error(e))?;
        let cx = CycleContext { cycle, now_ms, options: self.options.clone() };
        let mut checker = InvariantChecker::default();
        let mut timer = CycleTimer::start();
        let outcome = if self.metrics.is_some() {
            run_cycle(snap, &self.profile, &cx, &mut Both(&mut checker, &mut timer))
        } else {
            run_cycle(snap, &self.profile, &cx, &mut checker)
        };
        if !checker.violations.is_empty() {
            return Err(SimError::Invariant { cycle, violations: checker.violations });
        }
        if let Some(m) = &self.metrics {
            m.scheduler.observe_timer(&timer, timer.elapsed());
            m.scheduler.record_cycle(&outcome, now_ms);
            // Binds are instant here: a pod is assumed, pre-bound and bound at the cycle's
            // (virtual) time.
            for e in &outcome.effects {
                if let Effect::Bind { pod, .. } = e {
                    let created = self.cluster.pods.get(pod.key()).and_then(|p| p.metadata.creation_timestamp.as_ref());
                    if let Some(c) = created {
                        let ms = (now_ms - c.0.as_millisecond()) as f64;
                        for stage in [TaskStage::Assumed, TaskStage::PreBound, TaskStage::Bound] {
                            m.scheduler.observe_task_stage(stage, ms);
                        }
                    }
                }
            }
        }
        // Nothing else holds the objects now, so changing one does not copy it.
        let mut record = self
            .cluster
            .apply_effects(&outcome.effects, cycle, now_ms)
            .map_err(|source| SimError::Effect { cycle, source })?;
        record.finished = finished;
        record.applied = applied;
        // The job controller reacts at once: the pods whose dependsOn this cycle met (their
        // depended-on pods bound, hence Running and ready) exist from the cycle's time on,
        // and the next cycle schedules them; the jobs' phases follow their pods. Then the
        // elastic autoscaler reads what the scheduler wrote, and the jobs it resized are
        // synced at once.
        let mut control = early;
        control.absorb(control::reconcile_jobs(&mut self.cluster, now_ms, Pass::Cycle)?);
        record.resizes = control::autoscale_jobs(&mut self.cluster, now_ms);
        if !record.resizes.is_empty() {
            control.absorb(control::reconcile_jobs(&mut self.cluster, now_ms, Pass::Cycle)?);
        }
        record.created = control.created;
        record.deleted = control.deleted;
        record.job_phases = control.phases;
        record.host_lists = control.host_lists;
        tracing::info!(
            cycle,
            binds = record.binds.len(),
            evictions = record.evictions.len(),
            pipelined = record.pipelined.len(),
            pod_groups = record.pod_group_updates.len(),
            queues = record.queue_updates.len(),
            created = record.created.len(),
            finished = record.finished.len(),
            jobs = record.job_phases.len(),
            "cycle applied"
        );
        self.last = Some(LastCycle { queues: outcome.queues, pending_reasons: outcome.pending_reasons });
        self.history.push(record);
        Ok(self.history.last().expect("just pushed"))
    }

    /// Runs exactly `cycles` cycles, or — with `None` — until a cycle changes nothing (no
    /// bind, eviction, nominated node, PodGroup or Queue status, pod created, finished or
    /// deleted, job phase; events do not count) and no pod is still running for a set time,
    /// at most [`MAX_CYCLES`]. A cycle that changed nothing while pods run moves the clock on
    /// to the first cycle at or after the first of them finishes (whole periods skipped).
    pub fn run(&mut self, cycles: Option<u32>) -> Result<Stop, SimError> {
        let stop = match cycles {
            Some(n) => {
                for _ in 0..n {
                    self.step()?;
                }
                Stop::CyclesDone
            }
            None => {
                let mut stop = Stop::Limit;
                for _ in 0..MAX_CYCLES {
                    if self.step()?.changed() {
                        continue;
                    }
                    // Nothing changed: done, unless something is due later (a pod running
                    // for a while, a Job applied later, a resize's wait, the autoscaler's
                    // next judgement); the clock then skips to the cycle that sees it.
                    let Some(at) = self.next_event_ms() else {
                        stop = Stop::Fixpoint;
                        break;
                    };
                    let next = self.cycle_time_ms(self.history.len() as u64 + 1);
                    if at > next {
                        let periods = (at - next + CYCLE_PERIOD_MS - 1) / CYCLE_PERIOD_MS;
                        self.skipped_ms += periods * CYCLE_PERIOD_MS;
                    }
                }
                if stop == Stop::Limit {
                    tracing::warn!("the cluster still changed after {MAX_CYCLES} cycles; stopped there");
                }
                stop
            }
        };
        self.stop = Some(stop);
        Ok(stop)
    }

    /// The next time something happens by itself after the last cycle: a running pod
    /// finishes, a Job is applied, a job's resize wait ends, or the autoscaler judges again.
    fn next_event_ms(&self) -> Option<i64> {
        let last = self.cycle_time_ms(self.history.len() as u64);
        let arrival = crate::arrive::next_ms(&self.cluster.arrivals).map(|t| self.start_ms + t);
        let wake = self.cluster.jobs.values().filter_map(|j| j.wake_at_ms).filter(|t| *t > last).min();
        let autoscale = control::next_autoscale_ms(&self.cluster, last);
        [self.cluster.next_finish_ms(), arrival, wake, autoscale].into_iter().flatten().min()
    }

    /// Keeps Volcano's metrics from the next cycle on (`volcano-rs simulate --metrics`):
    /// the scheduler's families, timed on the wall clock and dated on the simulation's, and
    /// the queue controller's PodGroup counts.
    pub fn enable_metrics(&mut self) {
        self.metrics =
            Some(Box::new(SimMetrics { scheduler: SchedulerMetrics::new(), controller: ControllerMetrics::new() }));
    }

    /// The Prometheus text exposition of the metrics now, if they are kept: the scheduler's
    /// families, then the PodGroups of each queue per phase, counted as the queue controller
    /// counts them for the queue's status.
    pub fn metrics_text(&self) -> Option<String> {
        let m = self.metrics.as_ref()?;
        // The queue controller's counts (`volcano_controller::queue`), for every queue.
        let by_queue = volcano_controller::queue::counts_by_queue(self.cluster.pod_groups.values().map(|g| &**g));
        for q in self.cluster.queues.keys() {
            let c = by_queue.get(q).copied().unwrap_or_default();
            m.controller.set_queue_pod_groups(q, POD_GROUP_PHASES.map(|p| i64::from(c.of_phase(p).unwrap_or(0))));
        }
        Some(m.scheduler.render() + &m.controller.render())
    }

    /// Explains a job as the next cycle would see it (`volcano-rs explain --manifests`):
    /// `name` is a PodGroup's `namespace/name` or a Volcano Job's. `Ok(None)` when there is
    /// no such job. The cycle runs on a copy: the simulation is not changed.
    pub fn explain(&self, name: &str) -> Result<Option<Explanation>, SimError> {
        // Before the first cycle the kept snapshot is the cluster's; later, a fresh build.
        let snap = match self.cluster.kept_snapshot().filter(|_| self.history.is_empty()) {
            Some(s) => s.clone(),
            None => Snapshot::build(
                &self.cluster.objects(),
                &self.scheduler_names.iter().map(String::as_str).collect::<Vec<_>>(),
            )
            .map_err(|e| self.origins.snapshot_error(e))?,
        };
        let Some(key) = volcano_framework::explain::resolve(&snap, name) else { return Ok(None) };
        let cycle = self.history.len() as u64 + 1;
        let cx = CycleContext { cycle, now_ms: self.cycle_time_ms(cycle), options: self.options.clone() };
        Ok(volcano_framework::explain::explain(snap, &self.profile, &cx, &key).map(|(e, _)| e))
    }

    /// The PodGroups (`namespace/name`) that are not ready after the run, with the reason
    /// the last cycle gave.
    pub fn waiting(&self) -> impl Iterator<Item = (&String, &String)> {
        self.last.iter().flat_map(|l| l.pending_reasons.iter())
    }

    /// The state of the cluster and what every cycle did, for output.
    pub fn report(&self) -> Report {
        Report::new(&self.cluster, &self.history, self.last.as_ref(), self.stop, &self.scheduler_names)
    }
}
