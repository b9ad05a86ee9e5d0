//! The replay loop: the simulator's in-memory [`Cluster`] scheduled by the real core
//! ([`run_cycle`], with the invariant checker), on a virtual clock driven by events.
//!
//! A cycle runs at a whole second of trace time (Volcano's 1 s schedule period): first the
//! pods whose run time is over succeed ([`Cluster::finish_due`]), elastic jobs progress,
//! every job submitted since the last cycle arrives (a gang's PodGroup and pods, or an
//! elastic Volcano Job planned by the simulator's job controller), then the cycle runs on the
//! kept snapshot brought up to date, its effects are applied, and (elastic) the job
//! controller and the elastic autoscaler react. A cycle that placed, evicted or changed
//! something is followed by one a second later; otherwise the clock jumps to the first period
//! at or after the next event (a submission, a pod's end, an elastic job's end, an
//! autoscaler's timer). A finished job's pods and PodGroup (and Volcano Job) are deleted.

use std::collections::BTreeMap;
use std::sync::Arc;

use volcano_framework::{run_cycle, CycleContext, InvariantChecker, Profile, SessionOptions};
use volcano_sim::control::{self, Pass};
use volcano_sim::{Cluster, Origins, SimError, SCHEDULER_NAME};

use super::objects::{self, ElasticShape, EPOCH_MS, GPU, NAMESPACE};
use super::trace::Trace;
use crate::error::ReplayError;
use crate::progress::Progress;

/// Volcano's schedule period: cycles run on whole seconds of trace time.
pub const PERIOD_MS: i64 = 1000;

/// What happened to one job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobOutcome {
    /// When it first ran whole (a gang: every pod bound; elastic: its minimum bound), ms of
    /// trace time.
    pub start_ms: Option<i64>,
    /// When it finished, ms of trace time.
    pub end_ms: Option<i64>,
    /// Times it was restarted after an eviction (a gang starts again from the beginning).
    pub restarts: u32,
}

/// GPUs allocated per queue at a cycle (what the scheduler's session counted at close).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Trace time, ms.
    pub t_ms: i64,
    /// GPUs allocated in each queue, in [`Trace::queues`] order.
    pub gpus: Vec<f32>,
}

/// The result of a replay, before summarising.
#[derive(Clone, Debug, Default)]
pub struct RunOutcome {
    /// One per job of the trace, in its order.
    pub jobs: Vec<JobOutcome>,
    /// One per cycle.
    pub samples: Vec<Sample>,
    /// Cycles run.
    pub cycles: u64,
    /// Evictions, by the action that made them (`preempt`, `reclaim`, …).
    pub evictions: BTreeMap<String, u64>,
    /// Resizes the elastic autoscaler made: (grows, shrinks, grows given back).
    pub resizes: (u64, u64, u64),
    /// Trace time of the last cycle, ms.
    pub last_ms: i64,
}

/// What the loop keeps of a job that has arrived and not finished.
#[derive(Clone, Debug)]
struct Live {
    /// The pods of the gang (none for an elastic job).
    pods: u32,
    bound: u32,
    finished: u32,
    attempt: u32,
    /// When the last pod of the gang was bound, ms.
    bound_at: i64,
    elastic: Option<Elastic>,
}

#[derive(Clone, Debug)]
struct Elastic {
    shape: ElasticShape,
    /// GPU-milliseconds of work left.
    work_left: f64,
    /// GPUs held since `since`.
    held: u32,
    since: i64,
}

/// Replays `trace` under `profile`; `elastic` makes multi-GPU jobs elastic Volcano Jobs.
pub fn replay(trace: &Trace, profile: &Profile, elastic: bool, progress: &mut Progress) -> Result<RunOutcome, ReplayError> {
    let mut r = Replay {
        trace,
        profile,
        elastic,
        cluster: Cluster::from_objects(objects::cluster(trace)),
        queue_objects: Vec::new(),
        live: BTreeMap::new(),
        out: RunOutcome { jobs: vec![JobOutcome::default(); trace.jobs.len()], ..Default::default() },
        finished: 0,
    };
    r.queue_objects = r.cluster.queues.values().map(|q| (**q).clone()).collect();
    r.run(progress)?;
    Ok(r.out)
}

struct Replay<'a> {
    trace: &'a Trace,
    profile: &'a Profile,
    elastic: bool,
    cluster: Cluster,
    queue_objects: Vec<volcano_api::crd::Queue>,
    live: BTreeMap<usize, Live>,
    out: RunOutcome,
    finished: u64,
}

fn abs(rel_ms: i64) -> i64 {
    EPOCH_MS + rel_ms
}

impl Replay<'_> {
    fn run(&mut self, progress: &mut Progress) -> Result<(), ReplayError> {
        let names = [SCHEDULER_NAME];
        let jobs = &self.trace.jobs;
        let mut next = 0usize;
        let mut now = jobs.first().map(|j| j.submit_ms).unwrap_or(0);
        now = now.div_euclid(PERIOD_MS) * PERIOD_MS;
        let queue_index: BTreeMap<&str, usize> =
            self.trace.queues.iter().enumerate().map(|(i, q)| (q.name.as_str(), i)).collect();
        loop {
            // Pods whose run time is over succeed; a gang whose pods all did is done.
            for key in self.cluster.finish_due(abs(now)) {
                self.pod_finished(&key);
            }
            if self.elastic {
                self.progress_elastic(now);
            }
            let mut arrived = false;
            while next < jobs.len() && jobs[next].submit_ms <= now {
                self.arrive(next, now)?;
                next += 1;
                arrived = true;
            }
            if arrived && self.elastic {
                control::reconcile_jobs(&mut self.cluster, abs(now), Pass::Cycle).map_err(SimError::from)?;
            }
            self.out.cycles += 1;
            let cycle = self.out.cycles;
            let snap = self.cluster.snapshot(&names).map_err(|e| SimError::from(Origins::default().snapshot_error(e)))?;
            let cx = CycleContext { cycle, now_ms: abs(now), options: SessionOptions::default() };
            let mut checker = InvariantChecker::default();
            let outcome = run_cycle(snap, self.profile, &cx, &mut checker);
            if !checker.violations.is_empty() {
                return Err(SimError::Invariant { cycle, violations: checker.violations }.into());
            }
            let record = self
                .cluster
                .apply_effects(&outcome.effects, cycle, abs(now))
                .map_err(|source| SimError::Effect { cycle, source })?;
            for b in &record.binds {
                self.pod_bound(&b.pod, now);
            }
            for e in &record.evictions {
                *self.out.evictions.entry(e.action.clone()).or_insert(0) += 1;
                self.pod_evicted(&e.pod, now);
            }
            let mut changed = !(record.binds.is_empty()
                && record.evictions.is_empty()
                && record.pipelined.is_empty()
                && record.pod_group_updates.is_empty());
            if self.elastic {
                changed |= self.control(now)?;
            }
            let mut gpus = vec![0f32; self.trace.queues.len()];
            for (q, report) in &outcome.queues {
                if let Some(&i) = queue_index.get(q.as_str()) {
                    // Extended resources are in milli-units (one GPU is 1000).
                    gpus[i] = (report.allocated.get(GPU) / 1000.0) as f32;
                }
            }
            self.out.samples.push(Sample { t_ms: now, gpus });
            self.out.last_ms = now;
            progress.set(self.finished, || format!("day {:.1}", now as f64 / 86_400_000.0));
            // The next cycle: a second later when this one changed something, else the first
            // period at or after the next event.
            let events = [
                jobs.get(next).map(|j| j.submit_ms),
                self.cluster.next_finish_ms().map(|t| t - EPOCH_MS),
                self.next_elastic_ms(now),
            ];
            let event = events.into_iter().flatten().min();
            let at = match event {
                _ if changed => now + PERIOD_MS,
                Some(t) => (t.max(now + 1) + PERIOD_MS - 1).div_euclid(PERIOD_MS) * PERIOD_MS,
                None => break,
            };
            if next >= jobs.len() && self.live.is_empty() {
                break;
            }
            now = at;
        }
        progress.finish();
        Ok(())
    }

    /// Job `index` arrives at `now`: a gang's PodGroup and pods, or an elastic Volcano Job
    /// for the job controller to plan.
    fn arrive(&mut self, index: usize, now: i64) -> Result<(), ReplayError> {
        let job = &self.trace.jobs[index];
        let shape = if self.elastic { objects::elastic_shape(job.gpus, self.trace.node.gpus) } else { None };
        if let Some(shape) = shape {
            let vj = objects::elastic_job(index, job, self.trace, shape);
            let (mut sj, _) = volcano_sim::job::admit_job(&vj, None, SCHEDULER_NAME, &self.queue_objects, &BTreeMap::new())
                .map_err(SimError::from)?;
            sj.job.metadata.creation_timestamp = vj.metadata.creation_timestamp.clone();
            sj.dirty = true;
            self.cluster.jobs.insert(format!("{NAMESPACE}/{}", objects::job_name(index)), sj);
            let work_left = job.duration_ms as f64 * f64::from(job.gpus);
            let e = Elastic { shape, work_left, held: 0, since: now };
            self.live.insert(index, Live { pods: 0, bound: 0, finished: 0, attempt: 0, bound_at: now, elastic: Some(e) });
        } else {
            let (pg, pods) = objects::gang(index, job, self.trace, 0);
            self.put_gang(pg, pods);
            let n = objects::gang_pods(job.gpus, self.trace.node.gpus).len() as u32;
            self.live.insert(index, Live { pods: n, bound: 0, finished: 0, attempt: 0, bound_at: now, elastic: None });
        }
        Ok(())
    }

    fn put_gang(&mut self, pg: volcano_api::crd::PodGroup, pods: Vec<k8s_openapi::api::core::v1::Pod>) {
        let key = format!("{NAMESPACE}/{}", pg.metadata.name.as_deref().unwrap_or_default());
        self.cluster.put_pod_group(key, Arc::new(pg));
        for p in pods {
            let key = format!("{NAMESPACE}/{}", p.metadata.name.as_deref().unwrap_or_default());
            self.cluster.put_pod(key, Arc::new(p));
        }
    }

    fn pod_bound(&mut self, pod: &str, now: i64) {
        let Some(index) = objects::job_index(pod) else { return };
        let Some(live) = self.live.get_mut(&index) else { return };
        if live.elastic.is_some() {
            return;
        }
        live.bound += 1;
        if live.bound == live.pods {
            live.bound_at = now;
            self.out.jobs[index].start_ms.get_or_insert(now);
        }
    }

    fn pod_finished(&mut self, pod: &str) {
        let Some(index) = objects::job_index(pod) else { return };
        let Some(live) = self.live.get_mut(&index) else { return };
        live.finished += 1;
        if live.elastic.is_none() && live.finished == live.pods {
            let end = live.bound_at + self.trace.jobs[index].duration_ms;
            self.complete(index, end);
        }
    }

    /// A pod of job `index` was evicted: a gang restarts (its other pods are deleted, the
    /// gang is created again at once and starts from the beginning); an elastic job is left
    /// to the job controller.
    fn pod_evicted(&mut self, pod: &str, _now: i64) {
        let Some(index) = objects::job_index(pod) else { return };
        let Some(live) = self.live.get_mut(&index) else { return };
        if live.elastic.is_some() {
            return;
        }
        live.attempt += 1;
        live.bound = 0;
        live.finished = 0;
        let attempt = live.attempt;
        self.out.jobs[index].restarts += 1;
        let name = objects::job_name(index);
        for k in 0..live.pods {
            self.cluster.remove_pod(&format!("{NAMESPACE}/{name}-{k}"));
        }
        let (_, pods) = objects::gang(index, &self.trace.jobs[index], self.trace, attempt);
        for p in pods {
            let key = format!("{NAMESPACE}/{}", p.metadata.name.as_deref().unwrap_or_default());
            self.cluster.put_pod(key, Arc::new(p));
        }
    }

    /// Job `index` finished at `end`: its objects are deleted.
    fn complete(&mut self, index: usize, end: i64) {
        let Some(live) = self.live.remove(&index) else { return };
        self.out.jobs[index].end_ms = Some(end);
        self.finished += 1;
        let key = format!("{NAMESPACE}/{}", objects::job_name(index));
        if live.elastic.is_some() {
            if let Some(sj) = self.cluster.jobs.remove(&key) {
                for p in &sj.pods {
                    self.cluster.remove_pod(p);
                }
                self.cluster.remove_pod_group(&sj.pod_group);
            }
        } else {
            for k in 0..live.pods {
                self.cluster.remove_pod(&format!("{key}-{k}"));
            }
            self.cluster.remove_pod_group(&key);
        }
    }

    /// Elastic jobs progress until `now` at the GPUs they held; those whose work is done
    /// finish (at the exact time it was done).
    fn progress_elastic(&mut self, now: i64) {
        let mut done = Vec::new();
        for (&index, live) in &mut self.live {
            let Some(e) = live.elastic.as_mut() else { continue };
            if e.held > 0 {
                let rate = f64::from(e.held);
                let dt = (now - e.since) as f64;
                if e.work_left <= rate * dt {
                    done.push((index, e.since + (e.work_left / rate).ceil() as i64));
                    continue;
                }
                e.work_left -= rate * dt;
            }
            e.since = now;
        }
        for (index, end) in done {
            self.complete(index, end);
        }
    }

    /// The first time after `now` an elastic job finishes at the GPUs it holds, or the job
    /// controller or the autoscaler has something to do on its own.
    fn next_elastic_ms(&self, now: i64) -> Option<i64> {
        if !self.elastic {
            return None;
        }
        let finish = self
            .live
            .values()
            .filter_map(|l| l.elastic.as_ref())
            .filter(|e| e.held > 0)
            .map(|e| e.since + (e.work_left / f64::from(e.held)).ceil() as i64)
            .min();
        let wake = self.cluster.jobs.values().filter_map(|j| j.wake_at_ms).filter(|t| *t > abs(now)).min();
        let autoscale = control::next_autoscale_ms(&self.cluster, abs(now));
        [finish, wake.map(|t| t - EPOCH_MS), autoscale.map(|t| t - EPOCH_MS)].into_iter().flatten().min()
    }

    /// After a cycle (elastic): the job controller reacts, the autoscaler resizes, and each
    /// elastic job's GPUs are counted again. Whether anything changed.
    fn control(&mut self, now: i64) -> Result<bool, ReplayError> {
        let mut rec = control::reconcile_jobs(&mut self.cluster, abs(now), Pass::Cycle).map_err(SimError::from)?;
        let resizes = control::autoscale_jobs(&mut self.cluster, abs(now));
        for r in &resizes {
            match r.reason {
                "AutoscaleOut" => self.out.resizes.0 += 1,
                "AutoscaleIn" => self.out.resizes.1 += 1,
                _ => self.out.resizes.2 += 1,
            }
        }
        if !resizes.is_empty() {
            rec.absorb(control::reconcile_jobs(&mut self.cluster, abs(now), Pass::Cycle).map_err(SimError::from)?);
        }
        let changed = !(resizes.is_empty() && rec.created.is_empty() && rec.deleted.is_empty() && rec.phases.is_empty());
        for (&index, live) in &mut self.live {
            let Some(e) = live.elastic.as_mut() else { continue };
            let key = format!("{NAMESPACE}/{}", objects::job_name(index));
            let Some(sj) = self.cluster.jobs.get(&key) else { continue };
            let running = sj
                .existing_pods(&self.cluster.pods)
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count() as u32;
            e.held = running * e.shape.pod_gpus;
            e.since = now;
            if running >= e.shape.min {
                self.out.jobs[index].start_ms.get_or_insert(now);
            }
        }
        Ok(changed)
    }
}
