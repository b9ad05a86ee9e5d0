//! Times what keeping Volcano's metrics costs per cycle: a case's first cycle is run once,
//! then its outcome is recorded into a fresh `SchedulerMetrics` (every series created) and
//! again into the same one (a warm cycle: only changed values written).
//! `cargo run --release -p volcano-benches --example metrics_cost -- steady-5k`

use std::time::Instant;

use volcano_benches::cases::Case;
use volcano_benches::runner::{case_profile, prepare};
use volcano_benches::workloads::SCHEDULER_NAME;
use volcano_framework::{run_cycle, CycleContext, NoObserver, SessionOptions, Snapshot};
use volcano_metrics::SchedulerMetrics;

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "steady-5k".to_string());
    let case = Case::from_name(&name).expect("a bench case name");
    let profile = case_profile(case);
    let cluster = prepare(case, &profile);
    let snap = Snapshot::build(&cluster.objects(), &[SCHEDULER_NAME]).expect("valid");
    let cx = CycleContext { cycle: 10, now_ms: 1_800_000_000_000, options: SessionOptions::default() };
    let start = Instant::now();
    let outcome = run_cycle(snap, &profile, &cx, &mut NoObserver);
    println!("{name}: cycle {:.2} ms, {} jobs", start.elapsed().as_secs_f64() * 1e3, outcome.metrics.jobs.len());
    let m = SchedulerMetrics::new();
    for rep in 0..5 {
        let start = Instant::now();
        m.record_cycle(&outcome, cx.now_ms);
        println!("record #{rep}: {:.3} ms", start.elapsed().as_secs_f64() * 1e3);
    }
}
