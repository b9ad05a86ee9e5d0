//! The metrics a cycle feeds, end to end: scenario files run through the simulator with
//! Volcano's metrics kept, and the text exposition checked for the series the scenario's
//! decisions must produce.

mod common;

fn run(file: &str) -> String {
    let (mut sim, cycles) = common::load(&common::scenarios_dir().join(file)).expect("the scenario loads");
    sim.enable_metrics();
    sim.run(cycles).expect("run");
    sim.metrics_text().expect("metrics kept")
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')).map(|v| v.parse().unwrap()))
}

#[test]
fn preemption_is_counted() {
    // Cycle 1: the high-priority gang frees n1 by evicting two low pods (one node tried,
    // one committed statement with evictions); cycle 2 binds it.
    let text = run("preempt/higher-priority-job-preempts-same-queue.yaml");
    assert_eq!(value(&text, "volcano_total_preemption_attempts"), Some(2.0), "{text}");
    assert_eq!(value(&text, "volcano_eviction_transactions_total{action=\"preempt\"}"), Some(1.0), "{text}");
    assert!(value(&text, "volcano_pod_preemption_victims").unwrap() >= 1.0);
    // Both gangs ended ready: nothing unschedulable.
    assert_eq!(value(&text, "volcano_unschedule_job_count"), Some(0.0));
    assert_eq!(value(&text, "volcano_unschedule_task_count{job_id=\"high\"}"), Some(0.0));
    // The high gang was unschedulable (pipelined, not ready) in cycle 1: one retry.
    assert_eq!(value(&text, "volcano_job_retry_counts{job_id=\"high\"}"), Some(1.0));
    // Its tasks were placed in both cycles (pipelined, then bound).
    assert!(text.contains(
        "volcano_e2e_job_scheduling_duration{job_name=\"high\",job_namespace=\"default\",queue=\"default\"}"
    ));
    assert_eq!(value(&text, "volcano_task_scheduling_latency_milliseconds_count{stage=\"Bound\"}"), Some(2.0));
    // The queue's gauges, from proportion: 4 cpu allocated (the two low pods left and the two
    // high ones), deserved 4, share 1.
    assert_eq!(value(&text, "volcano_queue_allocated_milli_cpu{queue_name=\"default\"}"), Some(4000.0));
    assert_eq!(value(&text, "volcano_queue_deserved_milli_cpu{queue_name=\"default\"}"), Some(4000.0));
    assert_eq!(value(&text, "volcano_queue_share{queue_name=\"default\"}"), Some(1.0));
    assert_eq!(value(&text, "volcano_queue_pod_group_running_count{queue_name=\"default\"}"), Some(2.0));
    // Every action and plugin hook was timed, each cycle (the run goes on until a cycle
    // changes nothing).
    let cycles = value(&text, "volcano_e2e_scheduling_latency_milliseconds_count").unwrap();
    assert!(cycles >= 2.0);
    assert_eq!(value(&text, "volcano_action_scheduling_latency_milliseconds_count{action=\"preempt\"}"), Some(cycles));
    assert_eq!(
        value(
            &text,
            "volcano_plugin_scheduling_latency_milliseconds_count{OnSession=\"OnSessionOpen\",plugin=\"gang\"}"
        ),
        Some(cycles)
    );
    assert_eq!(value(&text, "volcano_open_session_duration_milliseconds_count"), Some(cycles));
}

#[test]
fn a_gang_that_cannot_fit_is_counted_as_unschedulable_each_cycle() {
    let text = run("gang/two-gangs-one-fits.yaml");
    assert!(value(&text, "volcano_unschedule_job_count").unwrap() >= 1.0, "{text}");
    let retries: f64 = text
        .lines()
        .filter(|l| l.starts_with("volcano_job_retry_counts{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert!(retries >= 1.0, "{text}");
    assert!(text.lines().any(|l| l.starts_with("volcano_unschedule_task_count{") && !l.ends_with(" 0")), "{text}");
}
