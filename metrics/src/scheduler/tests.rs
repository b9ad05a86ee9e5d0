use volcano_framework::{CycleMetrics, JobMetrics};

use super::*;

fn job(key: &str, queue: usize) -> JobMetrics {
    JobMetrics { key: key.into(), queue, creation_ms: 1_000_000, ..Default::default() }
}

fn outcome(jobs: Vec<JobMetrics>, queues: &[&str]) -> CycleOutcome {
    let mut out = CycleOutcome::default();
    for q in queues {
        let mut allocated = Resource::empty();
        allocated.set("cpu", 2000.0);
        allocated.set("nvidia.com/gpu", 4000.0);
        out.queues.insert(
            q.to_string(),
            QueueReport { allocated, share: Some(0.5), weight: Some(3), overused: Some(false), ..Default::default() },
        );
    }
    out.metrics =
        CycleMetrics { queue_names: queues.iter().map(|q| q.to_string()).collect(), jobs, ..Default::default() };
    out
}

fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.lines().find(|l| l.starts_with(prefix))
}

#[test]
fn queue_series_follow_the_queues() {
    let m = SchedulerMetrics::new();
    m.record_cycle(&outcome(vec![], &["q1", "q2"]), 0);
    let text = m.render();
    assert_eq!(
        line(&text, "volcano_queue_allocated_milli_cpu{queue_name=\"q1\"}"),
        Some("volcano_queue_allocated_milli_cpu{queue_name=\"q1\"} 2000")
    );
    assert!(
        text.contains("volcano_queue_allocated_scalar_resources{queue_name=\"q2\",resource=\"nvidia.com/gpu\"} 4000"),
        "{text}"
    );
    assert!(text.contains("volcano_queue_weight{queue_name=\"q1\"} 3"));
    assert!(text.contains("volcano_queue_overused{queue_name=\"q1\"} 0"));
    // No policy plugin value: request and inqueue read 0, deserved has no series.
    assert!(text.contains("volcano_queue_request_milli_cpu{queue_name=\"q1\"} 0"));
    assert!(!text.contains("volcano_queue_deserved_milli_cpu{"));
    // q2 is deleted: every series of it goes.
    m.record_cycle(&outcome(vec![], &["q1"]), 0);
    let text = m.render();
    assert!(text.contains("queue_name=\"q1\""));
    assert!(!text.contains("queue_name=\"q2\""), "{text}");
}

#[test]
fn a_scalar_the_queue_no_longer_holds_reads_zero() {
    let m = SchedulerMetrics::new();
    m.record_cycle(&outcome(vec![], &["q1"]), 0);
    let mut out = outcome(vec![], &["q1"]);
    out.queues.get_mut("q1").unwrap().allocated = Resource::empty();
    m.record_cycle(&out, 0);
    assert!(m
        .render()
        .contains("volcano_queue_allocated_scalar_resources{queue_name=\"q1\",resource=\"nvidia.com/gpu\"} 0"));
}

#[test]
fn job_series_are_written_and_removed_with_the_job() {
    let m = SchedulerMetrics::new();
    let mut a = job("ns1/a", 0);
    a.share = Some(0.25);
    a.unscheduled_tasks = Some(3);
    a.retried = true;
    let mut b = job("ns1/b", 0);
    b.unscheduled_tasks = Some(0);
    b.scheduled = true;
    m.record_cycle(&outcome(vec![a.clone(), b.clone()], &["q1"]), 1_004_000);
    m.record_cycle(&outcome(vec![a.clone(), b.clone()], &["q1"]), 1_005_000);
    let text = m.render();
    assert!(text.contains("volcano_job_share{job_id=\"a\",job_ns=\"ns1\"} 0.25"), "{text}");
    assert!(text.contains("volcano_unschedule_task_count{job_id=\"a\"} 3"));
    assert!(text.contains("volcano_unschedule_task_count{job_id=\"b\"} 0"));
    // Two unschedulable cycles: two retries.
    assert!(text.contains("volcano_job_retry_counts{job_id=\"a\"} 2"));
    // b placed a task in both cycles: the last one counts, 5 s after its creation.
    assert!(
        text.contains("volcano_e2e_job_scheduling_duration{job_name=\"b\",job_namespace=\"ns1\",queue=\"q1\"} 5000"),
        "{text}"
    );
    assert!(
        text.contains("volcano_e2e_job_scheduling_last_time{job_name=\"b\",job_namespace=\"ns1\",queue=\"q1\"} 1005")
    );
    assert!(
        text.contains("volcano_e2e_job_scheduling_start_time{job_name=\"a\",job_namespace=\"ns1\",queue=\"q1\"} 1000")
    );
    assert!(text.contains("volcano_e2e_job_scheduling_latency_milliseconds_count 2"));
    // a is deleted: its series go, b's stay.
    m.record_cycle(&outcome(vec![b], &["q1"]), 1_006_000);
    let text = m.render();
    assert!(!text.contains("\"a\""), "{text}");
    assert!(text.contains("volcano_unschedule_task_count{job_id=\"b\"} 0"));
}

#[test]
fn series_labelled_by_name_stay_while_a_job_of_that_name_does() {
    // Volcano labels `unschedule_task_count` and `job_retry_counts` by the job's name alone.
    let m = SchedulerMetrics::new();
    let mut a1 = job("ns1/a", 0);
    a1.unscheduled_tasks = Some(1);
    let mut a2 = job("ns2/a", 0);
    a2.unscheduled_tasks = Some(1);
    m.record_cycle(&outcome(vec![a1, a2.clone()], &["q1"]), 0);
    m.record_cycle(&outcome(vec![a2], &["q1"]), 0);
    assert!(m.render().contains("volcano_unschedule_task_count{job_id=\"a\"} 1"));
    m.record_cycle(&outcome(vec![], &["q1"]), 0);
    assert!(!m.render().contains("volcano_unschedule_task_count{"));
}

#[test]
fn preemption_and_eviction_counts_add_up() {
    let m = SchedulerMetrics::new();
    let mut out = outcome(vec![], &["q1"]);
    out.metrics.preemption_attempts = 3;
    out.metrics.preemption_victims = Some(2);
    out.metrics.unschedulable_jobs = Some(7);
    out.metrics.eviction_transactions.insert("preempt", 1);
    m.record_cycle(&out, 0);
    m.record_cycle(&out, 0);
    let text = m.render();
    assert!(text.contains("volcano_total_preemption_attempts 6"));
    assert!(text.contains("volcano_pod_preemption_victims 2"));
    assert!(text.contains("volcano_unschedule_job_count 7"));
    assert!(text.contains("volcano_eviction_transactions_total{action=\"preempt\"} 2"));
}

#[test]
fn every_family_is_registered_under_volcanos_name() {
    let m = SchedulerMetrics::new();
    // Families with no series are not in the exposition; give each one a series.
    m.record_cycle(&outcome(vec![], &["q1"]), 0);
    let names: Vec<String> = m.registry.gather().iter().map(|f| f.name().to_string()).collect();
    for name in [
        "volcano_e2e_scheduling_latency_milliseconds",
        "volcano_open_session_duration_milliseconds",
        "volcano_e2e_job_scheduling_latency_milliseconds",
        "volcano_pod_preemption_victims",
        "volcano_total_preemption_attempts",
        "volcano_unschedule_job_count",
        "volcano_queue_allocated_milli_cpu",
        "volcano_queue_share",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }
}
