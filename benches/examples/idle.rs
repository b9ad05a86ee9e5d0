//! Times an idle warm cycle: a bench case's first cycle is run and applied, and then cycles
//! run on the result, where nothing is left to place (for steady-5k, about 1,900 running
//! gangs). `cargo run --release -p volcano-benches --example idle -- steady-5k 20`; prints the
//! phases of each cycle.

use volcano_benches::cases::Case;
use volcano_benches::runner::{apply, case_profile, prepare, timed_cycle, timed_warm_cycle};
use volcano_benches::workloads::SCHEDULER_NAME;
use volcano_framework::Snapshot;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "steady-5k".to_string());
    let reps: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let case = Case::from_name(&name).expect("a bench case name");
    let profile = case_profile(case);
    let mut cluster = prepare(case, &profile);
    // Cycles are run and applied until one has nothing to say (the first binds, the next
    // ones write the statuses that follow from the binds).
    for cycle in 10..20 {
        let (effects, _) = timed_cycle(&cluster.objects(), &profile, cycle);
        println!("cycle {cycle}: {} effects", effects.len());
        if effects.is_empty() {
            break;
        }
        let failures = apply(&mut cluster, &effects, cycle);
        assert!(failures.is_empty(), "{failures:?}");
    }
    let objects = cluster.objects();
    let mut kept = Snapshot::build(&objects, &[SCHEDULER_NAME]).expect("valid");
    println!("{name}: {} tasks, {} jobs after the first cycle", kept.tasks.len(), kept.jobs.len());
    let mut totals = Vec::new();
    for c in 0..reps {
        let (effects, t) = timed_warm_cycle(&mut kept, &profile, 21 + c);
        println!("#{c}: total {:.2} ms ({t}), {} effects", t.total_seconds * 1e3, effects.len());
        totals.push(t.total_seconds * 1e3);
    }
    totals.sort_by(f64::total_cmp);
    println!("median {:.2} ms", totals[totals.len() / 2]);
}
