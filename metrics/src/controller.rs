//! The controllers' metrics, as Volcano's controller manager exports them
//! (`pkg/controllers/metrics`, `pkg/controllers/job/state/metrics.go`).

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::exponential_buckets_range;

/// The job and queue controllers' metric families.
#[derive(Clone)]
pub struct ControllerMetrics {
    /// The registry the families are in.
    pub registry: Registry,
    /// `volcano_queue_pod_group_{inqueue,pending,running,unknown,completed}_count{queue_name}`:
    /// the PodGroups of a queue per phase, as the queue controller counts them for the
    /// queue's status.
    pub pod_groups: [IntGaugeVec; 5],
    /// `volcano_job_completed_phase_count{job_name,queue_name}` (`job_name` is
    /// `namespace/name`): times a job entered Completed.
    pub job_completed: IntCounterVec,
    /// `volcano_job_failed_phase_count{job_name,queue_name}`: times a job entered Failed.
    pub job_failed: IntCounterVec,
    /// `volcano_controller_job_to_pod_creation_latency_milliseconds`: from a Job's creation
    /// to each of its pods' creation.
    pub job_to_pod_creation: Histogram,
}

/// The PodGroup phases the queue gauges count, in [`ControllerMetrics::pod_groups`] order.
pub const POD_GROUP_PHASES: [&str; 5] = ["inqueue", "pending", "running", "unknown", "completed"];

impl ControllerMetrics {
    /// The families, registered in a new registry.
    pub fn new() -> Self {
        let registry = Registry::new();
        let pod_groups = POD_GROUP_PHASES.map(|phase| {
            let g = IntGaugeVec::new(
                Opts::new(
                    format!("volcano_queue_pod_group_{phase}_count"),
                    format!("The number of {} PodGroup in this queue", capitalised(phase)),
                ),
                &["queue_name"],
            )
            .expect("valid gauge");
            registry.register(Box::new(g.clone())).expect("unique metric");
            g
        });
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &["job_name", "queue_name"]).expect("valid counter");
            registry.register(Box::new(c.clone())).expect("unique metric");
            c
        };
        let job_completed = counter("volcano_job_completed_phase_count", "Number of job completed phase");
        let job_failed = counter("volcano_job_failed_phase_count", "Number of job failed phase");
        let job_to_pod_creation = Histogram::with_opts(
            HistogramOpts::new(
                "volcano_controller_job_to_pod_creation_latency_milliseconds",
                "Latency from VCJob creation to pod created in milliseconds",
            )
            .buckets(exponential_buckets_range(50.0, 60000.0, 30)),
        )
        .expect("valid histogram");
        registry.register(Box::new(job_to_pod_creation.clone())).expect("unique metric");
        ControllerMetrics { registry, pod_groups, job_completed, job_failed, job_to_pod_creation }
    }

    /// Adds the process metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
    /// …) to the registry, on Linux (elsewhere it does nothing). Adding them again does
    /// nothing either.
    pub fn register_process_metrics(&self) {
        #[cfg(target_os = "linux")]
        {
            let pc = prometheus::process_collector::ProcessCollector::for_self();
            // `AlreadyReg` when they are in already: nothing to do.
            let _ = self.registry.register(Box::new(pc));
        }
    }

    /// Sets a queue's PodGroup counts, in [`POD_GROUP_PHASES`] order.
    pub fn set_queue_pod_groups(&self, queue: &str, counts: [i64; 5]) {
        for (g, c) in self.pod_groups.iter().zip(counts) {
            g.with_label_values(&[queue]).set(c);
        }
    }

    /// Removes a deleted queue's series.
    pub fn forget_queue(&self, queue: &str) {
        for g in &self.pod_groups {
            let _ = g.remove_label_values(&[queue]);
        }
    }

    /// Removes every queue's series (a replica that stops leading no longer counts the
    /// queues' PodGroups: its gauges would go stale).
    pub fn forget_queues(&self) {
        for g in &self.pod_groups {
            g.reset();
        }
    }

    /// Counts a job entering Completed (`job` is `namespace/name`, `queue` its
    /// `spec.queue`).
    pub fn job_completed(&self, job: &str, queue: &str) {
        self.job_completed.with_label_values(&[job, queue]).inc();
    }

    /// Counts a job entering Failed (`job` is `namespace/name`, `queue` its `spec.queue`).
    pub fn job_failed(&self, job: &str, queue: &str) {
        self.job_failed.with_label_values(&[job, queue]).inc();
    }

    /// Removes a deleted job's series (`job` is `namespace/name`).
    pub fn forget_job(&self, job: &str, queue: &str) {
        let _ = self.job_completed.remove_label_values(&[job, queue]);
        let _ = self.job_failed.remove_label_values(&[job, queue]);
    }

    /// Observes the time from a job's creation to the creation of one of its pods, in
    /// milliseconds.
    pub fn observe_job_to_pod_creation(&self, milliseconds: f64) {
        self.job_to_pod_creation.observe(milliseconds);
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        crate::render(&self.registry)
    }
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_series_are_set_and_removed() {
        let m = ControllerMetrics::new();
        m.set_queue_pod_groups("q1", [1, 2, 3, 0, 4]);
        let text = m.render();
        assert!(text.contains("volcano_queue_pod_group_running_count{queue_name=\"q1\"} 3"), "{text}");
        assert!(
            text.contains("# HELP volcano_queue_pod_group_inqueue_count The number of Inqueue PodGroup in this queue")
        );
        m.forget_queue("q1");
        assert!(!m.render().contains("q1"));
        m.set_queue_pod_groups("q2", [0, 0, 1, 0, 0]);
        m.set_queue_pod_groups("q3", [0, 0, 2, 0, 0]);
        m.forget_queues();
        let text = m.render();
        assert!(!text.contains("q2") && !text.contains("q3"), "{text}");
    }

    #[test]
    fn job_series_count_and_are_removed() {
        let m = ControllerMetrics::new();
        m.job_completed("ml/a", "default");
        m.job_completed("ml/a", "default");
        m.job_failed("ml/b", "q1");
        let text = m.render();
        assert!(
            text.contains("volcano_job_completed_phase_count{job_name=\"ml/a\",queue_name=\"default\"} 2"),
            "{text}"
        );
        assert!(text.contains("volcano_job_failed_phase_count{job_name=\"ml/b\",queue_name=\"q1\"} 1"), "{text}");
        assert!(text.contains("# HELP volcano_job_failed_phase_count Number of job failed phase"), "{text}");
        m.forget_job("ml/a", "default");
        let text = m.render();
        assert!(!text.contains("ml/a") && text.contains("ml/b"), "{text}");
    }

    #[test]
    fn pod_creation_latency_has_volcanos_buckets() {
        let m = ControllerMetrics::new();
        m.observe_job_to_pod_creation(1000.0);
        let text = m.render();
        let name = "volcano_controller_job_to_pod_creation_latency_milliseconds";
        assert!(text.contains(&format!("{name}_count 1")), "{text}");
        assert!(text.contains(&format!("{name}_sum 1000")), "{text}");
        // ExponentialBucketsRange(50, 60000, 30): 30 buckets and +Inf, from 50 to 60000.
        let bounds: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(&format!("{name}_bucket")))
            .filter_map(|l| l.split('"').nth(1))
            .collect();
        assert_eq!(bounds.len(), 31, "{text}");
        assert_eq!((bounds[0], bounds[30]), ("50", "+Inf"));
        let last: f64 = bounds[29].parse().unwrap();
        assert!((last - 60000.0).abs() < 1e-6, "{last}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn process_metrics_are_added_once() {
        let m = ControllerMetrics::new();
        m.register_process_metrics();
        m.register_process_metrics();
        assert!(m.render().contains("process_cpu_seconds_total"));
    }
}
