//! The replay loop: the simulator's in-memory [`Cluster`] scheduled by the real core
//! ([`run_cycle`], with the invariant checker), on a virtual clock driven by events.
//!
//! A cycle runs at a whole second of trace time (Volcano's 1 s schedule period): first the
//! pods whose run time is over succeed ([`Cluster::finish_due`]), elastic jobs progress,
//! every job submitted since the last cycle arrives (a gang's PodGroup and pods, or an
//! elastic Volcano Job planned by the simulator's job controller), then the cycle runs on the
//! kept snapshot brought up to date, its effects are applied, and (elastic) the job
//! controller and the elastic autoscaler react. While a job waits, a cycle that bound,
//! evicted or nominated a pod (or, elastic, made the job controller or the autoscaler act)
//! is followed by one a second later; otherwise the clock jumps
//! to the first period at or after the next event: a submission, or — only while a job
//! waits, since the scheduler has nothing to do otherwise — a pod's end; with `--elastic`
//! also an elastic job's end and the autoscaler's and job controller's timers. A finished
//! job's pods and PodGroup (and Volcano Job) are deleted.
//!
//! The GPUs allocated over time are counted from what happened to the pods: a pod's GPUs
//! from the cycle that bound it to its exact end (its start plus its run time), or to the
//! cycle that evicted or deleted it.

use std::collections::BTreeMap;
use std::sync::Arc;

use volcano_framework::{run_cycle, CycleContext, InvariantChecker, Profile, SessionOptions};
use volcano_sim::control::{self, Pass};
use volcano_sim::{Cluster, Origins, SimError, SCHEDULER_NAME};

use super::objects::{self, ElasticShape, EPOCH_MS, NAMESPACE};
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
    /// GPUs of the pods bound now (a gang's; an elastic job's are in [`Elastic::held`]).
    held: u32,
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
pub fn replay(
    trace: &Trace,
    profile: &Profile,
    elastic: bool,
    progress: &mut Progress,
) -> Result<RunOutcome, ReplayError> {
    let mut r = Replay {
        trace,
        profile,
        elastic,
        cluster: Cluster::from_objects(objects::cluster(trace)),
        queue_objects: Vec::new(),
        live: BTreeMap::new(),
        out: RunOutcome { jobs: vec![JobOutcome::default(); trace.jobs.len()], ..Default::default() },
        finished: 0,
        waiting: 0,
        deltas: Vec::with_capacity(trace.jobs.len() * 2),
    };
    r.queue_objects = r.cluster.queues.values().map(|q| (**q).clone()).collect();
    r.run(progress)?;
    r.out.samples = samples(std::mem::take(&mut r.deltas), trace.queues.len());
    Ok(r.out)
}

/// The allocated GPUs per queue after each time something changed, from the changes.
fn samples(mut deltas: Vec<(i64, usize, i64)>, queues: usize) -> Vec<Sample> {
    deltas.sort_by_key(|d| d.0);
    let mut now = vec![0i64; queues];
    let mut out: Vec<Sample> = Vec::new();
    let mut i = 0;
    while i < deltas.len() {
        let t = deltas[i].0;
        while i < deltas.len() && deltas[i].0 == t {
            now[deltas[i].1] += deltas[i].2;
            i += 1;
        }
        out.push(Sample { t_ms: t, gpus: now.iter().map(|g| *g as f32).collect() });
    }
    out
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
    /// Gangs that arrived and are not wholly bound.
    waiting: usize,
    /// Changes of the allocated GPUs: (trace time ms, queue, GPUs).
    deltas: Vec<(i64, usize, i64)>,
}

fn abs(rel_ms: i64) -> i64 {
    EPOCH_MS + rel_ms
}

/// The GPUs of a gang's pod (`…-K`, [`objects::gang_pods`]).
fn pod_gpus(pod: &str, gpus: u32, node_gpus: u32) -> u32 {
    let k: usize = pod.rsplit('-').next().and_then(|k| k.parse().ok()).unwrap_or(0);
    objects::gang_pods(gpus, node_gpus).get(k).copied().unwrap_or(0)
}

impl Replay<'_> {
    fn run(&mut self, progress: &mut Progress) -> Result<(), ReplayError> {
        let names = [SCHEDULER_NAME];
        let jobs = &self.trace.jobs;
        let mut next = 0usize;
        let mut now = jobs.first().map(|j| j.submit_ms).unwrap_or(0);
        now = now.div_euclid(PERIOD_MS) * PERIOD_MS;
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
            let snap =
                self.cluster.snapshot(&names).map_err(|e| SimError::from(Origins::default().snapshot_error(e)))?;
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
            // A PodGroup status alone does not call for another cycle: the next one would see
            // the same cluster (on muri/trace3, the same results with half the cycles).
            let mut changed = !(record.binds.is_empty() && record.evictions.is_empty() && record.pipelined.is_empty());
            if self.elastic {
                changed |= self.control(now)?;
            }
            self.out.last_ms = now;
            progress.set(self.finished, || format!("day {:.1}", now as f64 / 86_400_000.0));
            // The next cycle: a second later when this one changed something while a job
            // waits, else the first period at or after the next event.
            let waiting = self.waiting > 0 || self.elastic;
            let events = [
                jobs.get(next).map(|j| j.submit_ms),
                self.cluster.next_finish_ms().map(|t| t - EPOCH_MS).filter(|_| waiting),
                self.next_elastic_ms(now),
            ];
            let event = events.into_iter().flatten().min();
            let at = match event {
                _ if changed && waiting => now + PERIOD_MS,
                Some(t) => (t.max(now + 1) + PERIOD_MS - 1).div_euclid(PERIOD_MS) * PERIOD_MS,
                None => break,
            };
            now = at;
        }
        // Nothing waits: the jobs still running finish at their times.
        for key in self.cluster.finish_due(i64::MAX) {
            self.pod_finished(&key);
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
            let (mut sj, _) =
                volcano_sim::job::admit_job(&vj, None, SCHEDULER_NAME, &self.queue_objects, &BTreeMap::new())
                    .map_err(SimError::from)?;
            sj.job.metadata.creation_timestamp = vj.metadata.creation_timestamp.clone();
            sj.dirty = true;
            self.cluster.jobs.insert(format!("{NAMESPACE}/{}", objects::job_name(index)), sj);
            let work_left = job.duration_ms as f64 * f64::from(job.gpus);
            let e = Elastic { shape, work_left, held: 0, since: now };
            let live = Live { pods: 0, bound: 0, held: 0, finished: 0, attempt: 0, bound_at: now, elastic: Some(e) };
            self.live.insert(index, live);
        } else {
            let (pg, pods) = objects::gang(index, job, self.trace, 0);
            self.put_gang(pg, pods);
            let n = objects::gang_pods(job.gpus, self.trace.node.gpus).len() as u32;
            let live = Live { pods: n, bound: 0, held: 0, finished: 0, attempt: 0, bound_at: now, elastic: None };
            self.live.insert(index, live);
            self.waiting += 1;
        }
        Ok(())
    }

    fn put_gang(&mut self, pg: volcano_api::crd::PodGroup, pods: Vec<k8s_openapi::api::core::v1::Pod>) {
        let key = format!("{NAMESPACE}/{}", pg.metadata.name.as_deref().unwrap_or_default());
        self.cluster.put_pod_group(key, Arc::new(pg));
        for p in pods {
            let key = format!("{NAMESPACE}/{}", p.metadata.name.as_deref().unwrap_or_default());
            self.cluster.put_pod(key, Arc::new(p.into()));
        }
    }

    fn pod_bound(&mut self, pod: &str, now: i64) {
        let Some(index) = objects::job_index(pod) else { return };
        let Some(live) = self.live.get_mut(&index) else { return };
        if live.elastic.is_some() {
            return;
        }
        let gpus = pod_gpus(pod, self.trace.jobs[index].gpus, self.trace.node.gpus);
        live.bound += 1;
        live.held += gpus;
        self.deltas.push((now, self.trace.jobs[index].queue, i64::from(gpus)));
        if live.bound == live.pods {
            live.bound_at = now;
            self.waiting -= 1;
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
    fn pod_evicted(&mut self, pod: &str, now: i64) {
        let Some(index) = objects::job_index(pod) else { return };
        let Some(live) = self.live.get_mut(&index) else { return };
        if live.elastic.is_some() {
            return;
        }
        if live.bound == live.pods {
            self.waiting += 1;
        }
        self.deltas.push((now, self.trace.jobs[index].queue, -i64::from(live.held)));
        live.attempt += 1;
        live.bound = 0;
        live.held = 0;
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
            self.cluster.put_pod(key, Arc::new(p.into()));
        }
    }

    /// Job `index` finished at `end`: its objects are deleted.
    fn complete(&mut self, index: usize, end: i64) {
        let Some(live) = self.live.remove(&index) else { return };
        self.out.jobs[index].end_ms = Some(end);
        self.finished += 1;
        let held = live.elastic.as_ref().map_or(live.held, |e| e.held);
        self.deltas.push((end, self.trace.jobs[index].queue, -i64::from(held)));
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
        let changed =
            !(resizes.is_empty() && rec.created.is_empty() && rec.deleted.is_empty() && rec.phases.is_empty());
        for (&index, live) in &mut self.live {
            let Some(e) = live.elastic.as_mut() else { continue };
            let key = format!("{NAMESPACE}/{}", objects::job_name(index));
            let Some(sj) = self.cluster.jobs.get(&key) else { continue };
            let running = sj
                .existing_pods(&self.cluster.pods)
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count() as u32;
            let held = running * e.shape.pod_gpus;
            if held != e.held {
                self.deltas.push((now, self.trace.jobs[index].queue, i64::from(held) - i64::from(e.held)));
            }
            e.held = held;
            e.since = now;
            if running >= e.shape.min {
                self.out.jobs[index].start_ms.get_or_insert(now);
            }
        }
        Ok(changed)
    }
}
