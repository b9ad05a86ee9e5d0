//! Runs the measured cycle of one bench case many times in one process, for profilers:
//! `cargo run --release -p volcano-benches --example profile -- fill-10k 5`, or under
//! `perf record --call-graph dwarf`. The objects (and, for `steady-5k`, the cached snapshot)
//! are built once; each repetition prints its phase times.

use volcano_benches::cases::Case;
use volcano_benches::runner::{case_profile, prepare_kept, timed_cycle, timed_warm_cycle};
use volcano_benches::workloads::SCHEDULER_NAME;
use volcano_framework::Snapshot;

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "fill-10k".to_string());
    let reps: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let case = Case::from_name(&name).expect("a bench case name");
    let profile = case_profile(case);
    // The cluster stays alive, as in `volcano-rs bench`: freeing it would change the heap the
    // measured cycles allocate from.
    let (cluster, kept) = prepare_kept(case, &profile);
    let objects = cluster.objects();
    // A case with a kept snapshot (`hetero-rollback-10k`) starts every repetition from it,
    // as its measured cycle does; the other warm cases keep their snapshot across cycles.
    let fresh = kept.is_some();
    let mut cached = kept
        .or_else(|| case.warm_cycles().is_some().then(|| Snapshot::build(&objects, &[SCHEDULER_NAME]).expect("valid")));
    let mut totals = Vec::new();
    for c in 0..reps {
        let (effects, t) = match &mut cached {
            Some(snap) if fresh => timed_warm_cycle(&mut snap.clone(), &profile, 10),
            Some(snap) => timed_warm_cycle(snap, &profile, 10 + c),
            None => timed_cycle(&objects, &profile, 10 + c),
        };
        println!("{name} #{c}: total {:.1} ms ({t:.1}), {} effects", t.total_seconds * 1e3, effects.len());
        totals.push(t.total_seconds * 1e3);
    }
    totals.sort_by(f64::total_cmp);
    if let (Some(min), Some(max)) = (totals.first(), totals.last()) {
        println!("{name}: min {min:.1} ms, median {:.1} ms, max {max:.1} ms", totals[(totals.len() - 1) / 2]);
    }
}
