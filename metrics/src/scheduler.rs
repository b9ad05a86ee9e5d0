//! The scheduler's metrics: Volcano's `pkg/scheduler/metrics` families, fed from cycle
//! outcomes and timers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Counter as ProtoCounter, Gauge as ProtoGauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{
    GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};
use volcano_framework::{CycleOutcome, QueueReport, Resource};

use crate::{exponential_buckets_range, CycleTimer};

/// Volcano's task stages (`task_scheduling_latency_milliseconds{stage}`): a pod's creation
/// to the moment the scheduler saw it, decided its node, and bound it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStage {
    /// The scheduler's cache first saw the pod.
    Watched,
    /// A cycle placed it (a bind was decided).
    Assumed,
    /// The binder took it up (volcano-rs runs no PreBind plugins: right before the bind).
    PreBound,
    /// The API server accepted the bind.
    Bound,
}

impl TaskStage {
    fn label(self) -> &'static str {
        match self {
            TaskStage::Watched => "Watched",
            TaskStage::Assumed => "Assumed",
            TaskStage::PreBound => "PreBound",
            TaskStage::Bound => "Bound",
        }
    }
}

/// A queue gauge per resource kind: `_milli_cpu`, `_memory_bytes`, `_scalar_resources{resource}`.
#[derive(Clone)]
struct ResourceGauges {
    cpu: GaugeVec,
    memory: GaugeVec,
    scalar: GaugeVec,
}

impl ResourceGauges {
    fn set(&self, queue: &str, r: &Resource, known: &mut BTreeSet<String>) {
        self.cpu.with_label_values(&[queue]).set(r.get("cpu"));
        self.memory.with_label_values(&[queue]).set(r.get("memory"));
        let mut seen = BTreeSet::new();
        for (name, v) in r.scalars() {
            self.scalar.with_label_values(&[queue, name]).set(v);
            seen.insert(name.to_string());
            known.insert(name.to_string());
        }
        // A resource the queue no longer has reads 0, as Volcano does.
        for name in known.iter().filter(|n| !seen.contains(*n)) {
            self.scalar.with_label_values(&[queue, name]).set(0.0);
        }
    }

    fn remove(&self, queue: &str, known: &BTreeSet<String>) {
        let _ = self.cpu.remove_label_values(&[queue]);
        let _ = self.memory.remove_label_values(&[queue]);
        for name in known {
            let _ = self.scalar.remove_label_values(&[queue, name]);
        }
    }
}

/// One job's values, kept as plain numbers: the per-job families are produced from these at
/// scrape time ([`JobFamilies`]), so a cycle over thousands of jobs writes a few numbers per
/// job and creates no Prometheus series.
#[derive(Clone)]
struct JobSeries {
    queue: String,
    /// The PodGroup's creation, Unix seconds.
    start_time: f64,
    share: Option<f64>,
    unscheduled: Option<i64>,
    retries: u64,
    /// The last cycle that placed a task of the job: (creation → that cycle in ms, its Unix
    /// seconds).
    scheduled: Option<(f64, f64)>,
    /// The cycle that last listed the job.
    seen: u64,
}

/// What the recorder remembers between cycles.
#[derive(Default)]
struct State {
    cycle: u64,
    /// HyperNode utilisation series: (hypernode, tier, resource).
    hyper_nodes: BTreeSet<(String, String, String)>,
    /// Topology waiting series: (mode, tier).
    topology_waiting: BTreeSet<(String, String)>,
    jobs: HashMap<Arc<str>, JobSeries>,
    /// Queues with series, with the scalar resource names each family has seen.
    queues: BTreeMap<String, [BTreeSet<String>; 6]>,
}

/// The per-job families, collected from [`State`] at scrape time.
struct JobFamilies {
    state: Arc<Mutex<State>>,
    descs: Vec<Desc>,
}

/// The per-job families: (name, help, type, labels).
const JOB_FAMILIES: [(&str, &str, MetricType, &[&str]); 6] = [
    (
        "volcano_e2e_job_scheduling_duration",
        "Per-job duration from job creation to last task assumed in scheduler cache, in milliseconds",
        MetricType::GAUGE,
        &["job_name", "job_namespace", "queue"],
    ),
    (
        "volcano_e2e_job_scheduling_start_time",
        "E2E job scheduling start time",
        MetricType::GAUGE,
        &["job_name", "job_namespace", "queue"],
    ),
    (
        "volcano_e2e_job_scheduling_last_time",
        "E2E job scheduling last time",
        MetricType::GAUGE,
        &["job_name", "job_namespace", "queue"],
    ),
    ("volcano_unschedule_task_count", "Number of tasks could not be scheduled", MetricType::GAUGE, &["job_id"]),
    ("volcano_job_share", "Share for one job", MetricType::GAUGE, &["job_id", "job_ns"]),
    ("volcano_job_retry_counts", "Number of retry counts for one job", MetricType::COUNTER, &["job_id"]),
];

impl JobFamilies {
    fn new(state: Arc<Mutex<State>>) -> Self {
        let descs = JOB_FAMILIES
            .iter()
            .map(|(name, help, _, labels)| {
                Desc::new(
                    name.to_string(),
                    help.to_string(),
                    labels.iter().map(|l| l.to_string()).collect(),
                    HashMap::new(),
                )
                .expect("valid metric description")
            })
            .collect();
        JobFamilies { state, descs }
    }
}

fn labelled(labels: &[&str], values: &[&str], value: f64, counter: bool) -> Metric {
    let mut m = Metric::default();
    m.set_label(
        labels
            .iter()
            .zip(values)
            .map(|(n, v)| {
                let mut l = LabelPair::default();
                l.set_name(n.to_string());
                l.set_value(v.to_string());
                l
            })
            .collect(),
    );
    if counter {
        let mut c = ProtoCounter::default();
        c.set_value(value);
        m.set_counter(c);
    } else {
        let mut g = ProtoGauge::default();
        g.set_value(value);
        m.set_gauge(g);
    }
    m
}

impl Collector for JobFamilies {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        // Copied out, so that the cycle that records the next outcome does not wait for the
        // families of thousands of jobs to be built.
        let copied: Vec<(Arc<str>, JobSeries)> = {
            let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.jobs.iter().map(|(k, s)| (k.clone(), s.clone())).collect()
        };
        let mut jobs: Vec<(&str, &str, &JobSeries)> = copied
            .iter()
            .map(|(k, s)| {
                let (ns, name) = k.split_once('/').unwrap_or(("", &**k));
                (ns, name, s)
            })
            .collect();
        jobs.sort_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0)));
        // Volcano labels `unschedule_task_count` and `job_retry_counts` by the job's name
        // alone: jobs of one name in several namespaces share them (the retries add up, the
        // largest shortfall shows).
        let mut by_name: BTreeMap<&str, (Option<i64>, u64, bool)> = BTreeMap::new();
        for (_, name, s) in &jobs {
            let e = by_name.entry(name).or_default();
            if let Some(u) = s.unscheduled {
                e.0 = Some(e.0.map_or(u, |x| x.max(u)));
            }
            e.1 += s.retries;
            e.2 |= s.retries > 0;
        }
        let mut families = Vec::with_capacity(JOB_FAMILIES.len());
        for (i, (name, help, kind, labels)) in JOB_FAMILIES.iter().enumerate() {
            let mut metrics = Vec::new();
            match i {
                0..=2 => {
                    for (ns, job, s) in &jobs {
                        let value = match i {
                            0 => s.scheduled.map(|(d, _)| d),
                            1 => Some(s.start_time),
                            _ => s.scheduled.map(|(_, t)| t),
                        };
                        if let Some(v) = value {
                            metrics.push(labelled(labels, &[job, ns, &s.queue], v, false));
                        }
                    }
                }
                3 => {
                    for (job, (u, _, _)) in &by_name {
                        if let Some(u) = u {
                            metrics.push(labelled(labels, &[job], *u as f64, false));
                        }
                    }
                }
                4 => {
                    for (ns, job, s) in &jobs {
                        if let Some(v) = s.share {
                            metrics.push(labelled(labels, &[job, ns], v, false));
                        }
                    }
                }
                _ => {
                    for (job, (_, r, any)) in &by_name {
                        if *any {
                            metrics.push(labelled(labels, &[job], *r as f64, true));
                        }
                    }
                }
            }
            if metrics.is_empty() {
                continue;
            }
            let mut f = MetricFamily::default();
            f.set_name(name.to_string());
            f.set_help(help.to_string());
            f.set_field_type(*kind);
            *f.mut_metric() = metrics;
            families.push(f);
        }
        families
    }
}

/// The scheduler's metric families (docs/observability.md lists them).
#[derive(Clone)]
pub struct SchedulerMetrics {
    /// The registry the families are in.
    pub registry: Registry,
    /// `volcano_e2e_scheduling_latency_milliseconds`: one whole cycle (snapshot, open,
    /// actions, close).
    pub e2e_latency: Histogram,
    /// `volcano_open_session_duration_milliseconds`: snapshot and every plugin's open.
    pub open_session: Histogram,
    /// `volcano_action_scheduling_latency_milliseconds{action}`.
    pub action_latency: HistogramVec,
    /// `volcano_plugin_scheduling_latency_milliseconds{plugin,OnSession}`.
    pub plugin_latency: HistogramVec,
    /// `volcano_task_scheduling_latency_milliseconds{stage}`: pod creation → stage.
    pub task_latency: HistogramVec,
    /// `volcano_scheduling_stage_duration_milliseconds{stage}`: per-task stage cost (the
    /// shells observe `Bind`, the API call; see docs/observability.md for the others).
    pub stage_duration: HistogramVec,
    /// `volcano_e2e_job_scheduling_latency_milliseconds`: job creation → a task placed. The
    /// per-job families (`volcano_e2e_job_scheduling_{duration,start_time,last_time}`,
    /// `volcano_unschedule_task_count`, `volcano_job_share`, `volcano_job_retry_counts`) are
    /// produced from the recorder's state when scraped.
    pub job_latency: Histogram,
    /// `volcano_schedule_attempts_total{result}`: registered as in Volcano, which updates it
    /// nowhere.
    pub schedule_attempts: IntCounterVec,
    /// `volcano_pod_preemption_victims`.
    pub preemption_victims: IntGauge,
    /// `volcano_total_preemption_attempts`.
    pub preemption_attempts: IntCounter,
    /// `volcano_eviction_transactions_total{action}`.
    pub eviction_transactions: IntCounterVec,
    /// `volcano_unschedule_job_count`.
    pub unschedule_job_count: IntGauge,
    queue_allocated: ResourceGauges,
    queue_request: ResourceGauges,
    queue_deserved: ResourceGauges,
    queue_inqueue: ResourceGauges,
    queue_capacity: ResourceGauges,
    queue_real_capacity: ResourceGauges,
    /// `volcano_queue_share{queue_name}`.
    pub queue_share: GaugeVec,
    /// `volcano_queue_weight{queue_name}`.
    pub queue_weight: GaugeVec,
    /// `volcano_queue_overused{queue_name}`.
    pub queue_overused: GaugeVec,
    /// `volcano_goroutines{operation}`: for volcano-rs, the binds in flight
    /// (`operation="binding"`).
    pub goroutines: IntGaugeVec,
    /// `volcano_rs_hypernode_utilization{hypernode,tier,resource}`: used / allocatable of a
    /// HyperNode's nodes (volcano-rs only).
    pub hyper_node_utilization: GaugeVec,
    /// `volcano_rs_network_topology_jobs_waiting{mode,tier}`: admitted jobs with a network
    /// topology constraint that are not ready (volcano-rs only).
    pub topology_waiting: IntGaugeVec,
    state: Arc<Mutex<State>>,
}

impl SchedulerMetrics {
    /// The families, registered in a new registry.
    pub fn new() -> Self {
        Self::with_registry(Registry::new())
    }

    /// The families, registered in `registry`.
    pub fn with_registry(registry: Registry) -> Self {
        let reg = |c: Box<dyn Collector>| registry.register(c).expect("unique metric");
        let state: Arc<Mutex<State>> = Arc::default();
        let histogram = |name: &str, help: &str, min: f64, max: f64, count: usize| {
            let h = Histogram::with_opts(
                HistogramOpts::new(name, help).buckets(exponential_buckets_range(min, max, count)),
            )
            .expect("valid histogram");
            reg(Box::new(h.clone()));
            h
        };
        let histogram_vec = |name: &str, help: &str, labels: &[&str], min: f64, max: f64, count: usize| {
            let h = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(exponential_buckets_range(min, max, count)),
                labels,
            )
            .expect("valid histogram");
            reg(Box::new(h.clone()));
            h
        };
        let gauge_vec = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
            reg(Box::new(g.clone()));
            g
        };
        let int_gauge_vec = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid gauge");
            reg(Box::new(g.clone()));
            g
        };
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid counter");
            reg(Box::new(c.clone()));
            c
        };
        let resource = |kind: &str, help: &str| ResourceGauges {
            cpu: gauge_vec(
                &format!("volcano_queue_{kind}_milli_cpu"),
                &format!("{help} CPU count for one queue"),
                &["queue_name"],
            ),
            memory: gauge_vec(
                &format!("volcano_queue_{kind}_memory_bytes"),
                &format!("{help} memory for one queue"),
                &["queue_name"],
            ),
            scalar: gauge_vec(
                &format!("volcano_queue_{kind}_scalar_resources"),
                &format!("{help} scalar resources for one queue"),
                &["queue_name", "resource"],
            ),
        };
        let preemption_victims =
            IntGauge::new("volcano_pod_preemption_victims", "Number of selected preemption victims")
                .expect("valid gauge");
        reg(Box::new(preemption_victims.clone()));
        let preemption_attempts =
            IntCounter::new("volcano_total_preemption_attempts", "Total preemption attempts in the cluster till now")
                .expect("valid counter");
        reg(Box::new(preemption_attempts.clone()));
        let unschedule_job_count =
            IntGauge::new("volcano_unschedule_job_count", "Number of jobs could not be scheduled")
                .expect("valid gauge");
        reg(Box::new(unschedule_job_count.clone()));
        let m = SchedulerMetrics {
            e2e_latency: histogram(
                "volcano_e2e_scheduling_latency_milliseconds",
                "Duration of a single scheduling session execution in milliseconds. It covers the entire cycle from session open, action executions to session close.",
                1.0,
                5000.0,
                20,
            ),
            open_session: histogram(
                "volcano_open_session_duration_milliseconds",
                "Duration of opening a scheduling session in milliseconds, including cache snapshot and session initialization.",
                1.0,
                5000.0,
                20,
            ),
            action_latency: histogram_vec(
                "volcano_action_scheduling_latency_milliseconds",
                "Action scheduling latency in milliseconds",
                &["action"],
                1.0,
                2000.0,
                20,
            ),
            plugin_latency: histogram_vec(
                "volcano_plugin_scheduling_latency_milliseconds",
                "Plugin scheduling latency in milliseconds",
                &["plugin", "OnSession"],
                0.1,
                100.0,
                15,
            ),
            task_latency: histogram_vec(
                "volcano_task_scheduling_latency_milliseconds",
                "Task scheduling latency from creation to various stages in milliseconds",
                &["stage"],
                50.0,
                60000.0,
                30,
            ),
            stage_duration: histogram_vec(
                "volcano_scheduling_stage_duration_milliseconds",
                "Duration of per-task scheduling stages (Predicate, Scoring, PreBind, Bind) in milliseconds",
                &["stage"],
                0.1,
                500.0,
                20,
            ),
            job_latency: histogram(
                "volcano_e2e_job_scheduling_latency_milliseconds",
                "End-to-end job scheduling latency in milliseconds (histogram of per-job duration from creation to last task assumed)",
                100.0,
                120000.0,
                30,
            ),
            schedule_attempts: counter_vec(
                "volcano_schedule_attempts_total",
                "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
                &["result"],
            ),
            preemption_victims,
            preemption_attempts,
            eviction_transactions: counter_vec(
                "volcano_eviction_transactions_total",
                "Total number of committed eviction transactions, by action",
                &["action"],
            ),
            unschedule_job_count,
            queue_allocated: resource("allocated", "Allocated"),
            queue_request: resource("request", "Request"),
            queue_deserved: resource("deserved", "Deserved"),
            queue_inqueue: resource("inqueue", "Inqueue"),
            queue_capacity: resource("capacity", "Capacity"),
            queue_real_capacity: resource("real_capacity", "Real capacity"),
            queue_share: gauge_vec("volcano_queue_share", "Share for one queue", &["queue_name"]),
            queue_weight: gauge_vec("volcano_queue_weight", "Weight for one queue", &["queue_name"]),
            queue_overused: gauge_vec("volcano_queue_overused", "If one queue is overused", &["queue_name"]),
            goroutines: int_gauge_vec(
                "volcano_goroutines",
                "Number of running goroutines split by the work they do such as binding.",
                &["operation"],
            ),
            hyper_node_utilization: gauge_vec(
                "volcano_rs_hypernode_utilization",
                "Used divided by allocatable resources of a HyperNode's nodes, per resource (cpu, memory and scalar resources)",
                &["hypernode", "tier", "resource"],
            ),
            topology_waiting: int_gauge_vec(
                "volcano_rs_network_topology_jobs_waiting",
                "Admitted jobs with a network topology constraint that are not ready, by mode and highest tier allowed (0 for soft)",
                &["mode", "tier"],
            ),
            state: state.clone(),
            registry: registry.clone(),
        };
        reg(Box::new(JobFamilies::new(state)));
        // Volcano defines the namespace families and updates them nowhere: registered with
        // no series, so dashboards that name them find them.
        for (name, help) in [
            ("volcano_namespace_share", "Deserved CPU count for one namespace"),
            ("volcano_namespace_weight", "Weight for one namespace"),
            ("volcano_namespace_weighted_share", "Weighted share for one namespace"),
        ] {
            let _ = gauge_vec(name, help, &["namespace_name"]);
        }
        m
    }

    /// Records a cycle's timings ([`CycleTimer`]) and its whole duration.
    pub fn observe_timer(&self, timer: &CycleTimer, whole: Duration) {
        self.e2e_latency.observe(ms(whole));
        if let Some(open) = timer.open {
            self.open_session.observe(ms(open));
        }
        for (action, d) in &timer.actions {
            self.action_latency.with_label_values(&[action]).observe(ms(*d));
        }
        for (plugin, stage, d) in &timer.plugins {
            self.plugin_latency.with_label_values(&[plugin, stage.as_str()]).observe(ms(*d));
        }
    }

    /// Records a pod's stage, `latency_ms` after its creation.
    pub fn observe_task_stage(&self, stage: TaskStage, latency_ms: f64) {
        self.task_latency.with_label_values(&[stage.label()]).observe(latency_ms.max(0.0));
    }

    /// Records what a cycle decided: the queue gauges, the per-job series, the preemption
    /// and eviction counts. `now_ms` is the cycle's time (the virtual clock in `simulate`).
    /// Series of queues and jobs that are no longer in the cycle are removed.
    pub fn record_cycle(&self, outcome: &CycleOutcome, now_ms: i64) {
        let m = &outcome.metrics;
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let state = &mut *state;
        state.cycle += 1;
        let cycle = state.cycle;

        // Queues.
        for (name, report) in &outcome.queues {
            let known = state.queues.entry(name.clone()).or_default();
            self.record_queue(name, report, known);
        }
        let gone: Vec<String> = state.queues.keys().filter(|q| !outcome.queues.contains_key(*q)).cloned().collect();
        for q in gone {
            let known = state.queues.remove(&q).expect("listed");
            self.forget_queue(&q, &known);
        }

        // Jobs: plain numbers, turned into series when scraped.
        for job in &m.jobs {
            let queue = m.queue_names.get(job.queue).map_or("", String::as_str);
            let series = match state.jobs.get_mut(&job.key) {
                Some(s) => s,
                None => state.jobs.entry(job.key.clone()).or_insert(JobSeries {
                    queue: String::new(),
                    start_time: (job.creation_ms / 1000) as f64,
                    share: None,
                    unscheduled: None,
                    retries: 0,
                    scheduled: None,
                    seen: cycle,
                }),
            };
            if series.queue != queue {
                series.queue = queue.to_string();
            }
            series.seen = cycle;
            series.share = job.share;
            if job.unscheduled_tasks.is_some() {
                series.unscheduled = job.unscheduled_tasks;
            }
            if job.retried {
                series.retries += 1;
            }
            if job.scheduled {
                let took = (now_ms - job.creation_ms).max(0) as f64;
                series.scheduled = Some((took, (now_ms / 1000) as f64));
                self.job_latency.observe(took);
            }
        }
        if state.jobs.len() > m.jobs.len() {
            state.jobs.retain(|_, s| s.seen == cycle);
        }

        if let Some(n) = m.unschedulable_jobs {
            self.unschedule_job_count.set(n as i64);
        }
        self.preemption_attempts.inc_by(m.preemption_attempts);
        if let Some(v) = m.preemption_victims {
            self.preemption_victims.set(v as i64);
        }
        for (action, n) in &m.eviction_transactions {
            self.eviction_transactions.with_label_values(&[action]).inc_by(*n);
        }

        // HyperNodes: one series per (HyperNode, resource it has), gone ones removed.
        let mut seen: BTreeSet<(String, String, String)> = BTreeSet::new();
        for h in &m.hyper_nodes {
            let tier = h.tier.to_string();
            for (resource, allocatable) in h.allocatable.dims() {
                if allocatable <= 0.0 {
                    continue;
                }
                let key = (h.name.to_string(), tier.clone(), resource.to_string());
                self.hyper_node_utilization
                    .with_label_values(&[&key.0, &key.1, &key.2])
                    .set(h.used.get(resource) / allocatable);
                seen.insert(key);
            }
        }
        for (h, t, r) in state.hyper_nodes.difference(&seen) {
            let _ = self.hyper_node_utilization.remove_label_values(&[h, t, r]);
        }
        state.hyper_nodes = seen;
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        for ((mode, tier), n) in &m.topology_waiting {
            let key = (mode.to_string(), tier.to_string());
            self.topology_waiting.with_label_values(&[&key.0, &key.1]).set(*n as i64);
            seen.insert(key);
        }
        for (mode, tier) in state.topology_waiting.difference(&seen) {
            let _ = self.topology_waiting.remove_label_values(&[mode, tier]);
        }
        state.topology_waiting = seen;
    }

    fn record_queue(&self, name: &str, r: &QueueReport, known: &mut [BTreeSet<String>; 6]) {
        let [allocated, request, deserved, inqueue, capacity, real] = known;
        let empty = Resource::empty();
        self.queue_allocated.set(name, &r.allocated, allocated);
        // Volcano's policy plugins write 0 request and inqueue for a queue without jobs.
        self.queue_request.set(name, r.request.as_ref().unwrap_or(&empty), request);
        self.queue_inqueue.set(name, r.inqueue.as_ref().unwrap_or(&empty), inqueue);
        if let Some(d) = &r.deserved {
            self.queue_deserved.set(name, d, deserved);
        }
        if let Some(c) = &r.capability {
            self.queue_capacity.set(name, c, capacity);
        }
        if let Some(c) = &r.real_capability {
            self.queue_real_capacity.set(name, c, real);
        }
        if let Some(s) = r.share {
            self.queue_share.with_label_values(&[name]).set(s);
        }
        if let Some(w) = r.weight {
            self.queue_weight.with_label_values(&[name]).set(f64::from(w));
        }
        if let Some(o) = r.overused {
            self.queue_overused.with_label_values(&[name]).set(if o { 1.0 } else { 0.0 });
        }
    }

    fn forget_queue(&self, name: &str, known: &[BTreeSet<String>; 6]) {
        let families = [
            &self.queue_allocated,
            &self.queue_request,
            &self.queue_deserved,
            &self.queue_inqueue,
            &self.queue_capacity,
            &self.queue_real_capacity,
        ];
        for (f, k) in families.into_iter().zip(known) {
            f.remove(name, k);
        }
        for g in [&self.queue_share, &self.queue_weight, &self.queue_overused] {
            let _ = g.remove_label_values(&[name]);
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        crate::render(&self.registry)
    }
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests;
