//! Times [`Snapshot::update`] against [`Snapshot::build`] on a bench case: the case's first
//! cycle is run and applied, and the pods it bound are the changes. `cargo run --release -p
//! volcano-benches --example update -- steady-5k 5`. Prints, per repetition, the time to
//! update a snapshot no other copy shares, one a live copy still shares (each written chunk
//! is then copied), and a rebuild.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use volcano_benches::runner::{apply, bench_profile, prepare, timed_cycle};
use volcano_benches::workloads::{Case, SCHEDULER_NAME};
use volcano_framework::{Changes, Effect, Snapshot};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "steady-5k".to_string());
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let case = Case::from_name(&name).expect("a bench case name");
    let profile = bench_profile();
    let mut cluster = prepare(case, &profile);
    let before = cluster.objects();
    let (effects, _) = timed_cycle(&before, &profile, 10);
    let failures = apply(&mut cluster, &effects, 10);
    assert!(failures.is_empty(), "{failures:?}");
    let after = cluster.objects();
    let by_key: HashMap<String, Arc<_>> = after
        .pods
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap_or(""),
                    p.metadata.name.as_deref().unwrap_or("")
                ),
                p.clone(),
            )
        })
        .collect();
    let pods: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bind { pod, .. } => Some((pod.key().to_string(), by_key.get(pod.key()).cloned())),
            _ => None,
        })
        .collect();
    let changes = Changes { pods, ..Default::default() };
    let names = [SCHEDULER_NAME];
    let kept = Snapshot::build(&before, &names).expect("valid");
    println!("{name}: {} tasks, {} changed pods", kept.tasks.len(), changes.pods.len());
    for r in 0..reps {
        let mut alone = Snapshot::build(&before, &names).expect("valid");
        let t = Instant::now();
        assert!(alone.update(&changes, &before.priority_classes, &names).expect("valid"));
        let unshared = t.elapsed();
        let mut shared = kept.clone();
        let t = Instant::now();
        assert!(shared.update(&changes, &before.priority_classes, &names).expect("valid"));
        let with_copy = t.elapsed();
        let t = Instant::now();
        let rebuilt = Snapshot::build(&after, &names).expect("valid");
        let build = t.elapsed();
        drop((alone, shared, rebuilt));
        println!(
            "#{r}: update {:.2} ms (unshared) {:.2} ms (shared with a live copy), rebuild {:.2} ms",
            unshared.as_secs_f64() * 1e3,
            with_copy.as_secs_f64() * 1e3,
            build.as_secs_f64() * 1e3
        );
    }
}
