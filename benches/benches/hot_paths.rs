//! Criterion benches of the hot paths: snapshot build, one allocate cycle at 1k nodes, and
//! finding the node of one task (predicates + scores) on a 1k-node cluster.

use criterion::{criterion_group, criterion_main, Criterion};
use volcano_benches::runner::timed_cycle;
use volcano_benches::workloads::{self, BENCH_CONF, SCHEDULER_NAME};
use volcano_framework::Snapshot;

fn snapshot_build(c: &mut Criterion) {
    let objects = workloads::objects(1_000, workloads::gang(0, 6_400));
    c.bench_function("snapshot_build/gpu-1k/gang-6400", |b| {
        b.iter(|| Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap())
    });
}

fn allocate_1k(c: &mut Criterion) {
    let objects = workloads::objects(1_000, workloads::gang(0, 6_400));
    let profile = volcano_builtin::profile_from_text(BENCH_CONF).unwrap();
    let mut group = c.benchmark_group("cycle");
    group.sample_size(10);
    group.bench_function("fill-1k", |b| b.iter(|| timed_cycle(&objects, &profile, 1)));
    group.finish();
}

fn one_task(c: &mut Criterion) {
    let objects = workloads::objects(1_000, workloads::gang(0, 1));
    let profile = volcano_builtin::profile_from_text(BENCH_CONF).unwrap();
    let snap = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
    let task = volcano_framework::TaskId(0);
    let ctx = volcano_framework::SessionContext { now_ms: 0, cycle: 1, uid: "bench".into(), enqueue_enabled: true };
    let options = volcano_framework::SessionOptions { node_index: false, ..Default::default() };
    let ssn = volcano_framework::Session::open(snap, profile.instantiate(), ctx, options);
    c.bench_function("predicate_and_score/one-task/gpu-1k", |b| b.iter(|| ssn.find_node_by_scan(task).unwrap()));
}

criterion_group!(benches, snapshot_build, allocate_1k, one_task);
criterion_main!(benches);
