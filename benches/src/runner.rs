//! Runs a benchmark case and reports its figures.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use volcano_api::crd::GROUP_NAME_ANNOTATION;
use volcano_framework::pod::SchedPod as Pod;

use serde::{Deserialize, Serialize};
use volcano_framework::{
    run_cycle, Both, ClusterObjects, CycleContext, Effect, InvariantChecker, Observer, Profile, RetryMemo, Session,
    SessionOptions, Snapshot, SnapshotError,
};
use volcano_metrics::{CycleTimer, SchedulerMetrics};
use volcano_sim::Cluster;

use crate::cases::Case;
use crate::workloads::{self, BENCH_CONF, SCHEDULER_NAME};

/// Wall time of the phases of one cycle.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct CycleTimes {
    /// Building the snapshot from the objects.
    pub snapshot_seconds: f64,
    /// Opening the session (plugins' `on_session_open`).
    pub open_seconds: f64,
    /// Each action, in order.
    pub actions: Vec<(String, f64)>,
    /// Closing the session (statuses).
    pub close_seconds: f64,
    /// The whole cycle: snapshot + open + actions + close.
    pub total_seconds: f64,
}

/// The phases, in milliseconds: `snapshot 0.01 ms, open 1.10 ms, allocate 0.06 ms, …, close
/// 1.02 ms`; the precision is the formatter's (`{:.1}`), two decimals by default.
impl std::fmt::Display for CycleTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = f.precision().unwrap_or(2);
        let phases = [("snapshot", self.snapshot_seconds), ("open", self.open_seconds)]
            .into_iter()
            .chain(self.actions.iter().map(|(a, s)| (a.as_str(), *s)))
            .chain([("close", self.close_seconds)]);
        for (i, (phase, seconds)) in phases.enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{phase} {:.digits$} ms", seconds * 1e3)?;
        }
        Ok(())
    }
}

/// The figures of one case.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseReport {
    /// Case name.
    pub case: String,
    /// Nodes in the cluster.
    pub nodes: usize,
    /// Pending pods at the start of the measured cycle.
    pub pending_pods: usize,
    /// Wall time of one whole cycle (for `steady-5k`: the median over the cycles).
    pub cycle_seconds: f64,
    /// Phase times of the (first) measured cycle.
    pub phases: CycleTimes,
    /// Pods bound in the (first) measured cycle.
    pub pods_bound: usize,
    /// Pods bound per second of cycle time (`pods_bound / cycle_seconds`).
    pub pods_per_second: f64,
    /// Gangs placed whole (bound, or pipelined onto room that evictions free).
    pub gangs_whole: usize,
    /// Gangs tried and rolled back (nothing bound).
    pub gangs_rolled_back: usize,
    /// Pods evicted in the (first) measured cycle (`preempt` and `reclaim`).
    #[serde(default)]
    pub evictions: usize,
    /// Pods pipelined in the (first) measured cycle (placed on room being freed by
    /// evictions; bound in a later cycle).
    #[serde(default)]
    pub pipelined: usize,
    /// Effects of the (first) measured cycle, of every kind (binds, evictions, pipelines,
    /// pod conditions, PodGroup and Queue statuses, events).
    #[serde(default)]
    pub effects: usize,
    /// Peak resident memory of the process, bytes (0 when unknown).
    pub peak_rss_bytes: u64,
    /// `steady-5k`: median cycle time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_seconds: Option<f64>,
    /// `steady-5k`: 99th percentile cycle time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_seconds: Option<f64>,
    /// Result checks: the framework's invariant checker after every action of the first
    /// measured cycle (no node over allocatable, every gang whole or empty, no queue over
    /// its capability), the same effects on a second run, every effect accepted by the
    /// simulator's applier, and every bind keeping the required rules of Kubernetes
    /// ([`crate::rules`]: inter-pod (anti-)affinity, topology spread, node selection).
    pub checks_passed: bool,
    /// What the checks found, if anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_failures: Vec<String>,
    /// `--manifests`: reading and normalising the manifests, seconds (not part of any
    /// cycle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parse_seconds: Option<f64>,
    /// `--manifests`: the wall time of each cycle, in order (`cycle_seconds` is the
    /// first's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cycles_seconds: Vec<f64>,
    /// `--metrics`: the measured cycles also kept Volcano's metrics, as the scheduler does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub metrics: bool,
    /// `topo-10k`: where the constrained jobs went ([`crate::topo::check`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<crate::topo::TopologyReport>,
}

struct Timer {
    start: Instant,
    last: Instant,
    open: Option<Duration>,
    actions: Vec<(String, f64)>,
}

impl Observer for Timer {
    fn before_action(&mut self, _action: &str, _ssn: &Session) {
        let now = Instant::now();
        if self.open.is_none() {
            self.open = Some(now - self.start);
        }
        self.last = now;
    }
    fn after_action(&mut self, action: &str, _ssn: &Session) {
        let now = Instant::now();
        self.actions.push((action.to_string(), (now - self.last).as_secs_f64()));
        self.last = now;
    }
}

/// One measured cold cycle over `objects`: the snapshot is built from the objects.
pub fn timed_cycle(objects: &ClusterObjects, profile: &Profile, cycle: u64) -> (Vec<Effect>, CycleTimes) {
    let start = Instant::now();
    let snap = Snapshot::build(objects, &[SCHEDULER_NAME]).expect("the workload objects are valid");
    timed_session(start, snap, profile, cycle)
}

/// One measured cold cycle over any objects, scheduling the pods of these scheduler
/// names; an error when the snapshot refuses the objects.
pub fn timed_cycle_for(
    objects: &ClusterObjects,
    scheduler_names: &[&str],
    profile: &Profile,
    cycle: u64,
) -> Result<(Vec<Effect>, CycleTimes), SnapshotError> {
    let start = Instant::now();
    let snap = Snapshot::build(objects, scheduler_names)?;
    Ok(timed_session(start, snap, profile, cycle))
}

/// One measured warm cycle: the snapshot is a copy of a snapshot kept between cycles, as a
/// long-running scheduler keeps it (updated from watch events, not rebuilt), and keeps what
/// the cycle remembered of the jobs it could not place, as the scheduler does
/// ([`Snapshot::keep_retries`]).
#[inline(never)] // a stable symbol for profilers (callgrind --toggle-collect)
pub fn timed_warm_cycle(cached: &mut Snapshot, profile: &Profile, cycle: u64) -> (Vec<Effect>, CycleTimes) {
    let start = Instant::now();
    let snap = cached.clone();
    let (effects, times, retries) = timed_session_metrics(start, snap, profile, cycle, None);
    cached.keep_retries(retries);
    (effects, times)
}

fn timed_session(start: Instant, snap: Snapshot, profile: &Profile, cycle: u64) -> (Vec<Effect>, CycleTimes) {
    let (effects, times, _) = timed_session_metrics(start, snap, profile, cycle, None);
    (effects, times)
}

/// A timed session that, with `metrics`, also times the cycle's steps for Volcano's
/// metrics and records its outcome in them, inside the measured time (`bench --metrics`);
/// also returns what the cycle remembered for the next one over the same snapshot.
fn timed_session_metrics(
    start: Instant,
    snap: Snapshot,
    profile: &Profile,
    cycle: u64,
    metrics: Option<&SchedulerMetrics>,
) -> (Vec<Effect>, CycleTimes, Option<Arc<RetryMemo>>) {
    let built = Instant::now();
    let mut timer = Timer { start: built, last: built, open: None, actions: Vec::new() };
    let cx = context(cycle);
    let outcome = match metrics {
        Some(m) => {
            let mut steps = CycleTimer::start();
            let outcome = run_cycle(snap, profile, &cx, &mut Both(&mut timer, &mut steps));
            m.record_cycle(&outcome, cx.now_ms);
            m.observe_timer(&steps, start.elapsed());
            outcome
        }
        None => run_cycle(snap, profile, &cx, &mut timer),
    };
    let end = Instant::now();
    let times = CycleTimes {
        snapshot_seconds: (built - start).as_secs_f64(),
        open_seconds: timer.open.unwrap_or_default().as_secs_f64(),
        close_seconds: (end - timer.last).as_secs_f64(),
        actions: timer.actions,
        total_seconds: (end - start).as_secs_f64(),
    };
    (outcome.effects, times, outcome.retries)
}

/// Re-runs a measured cycle, untimed, with the framework's invariant checker after every
/// action, and checks that it gives the same effects (a cycle is deterministic). Returns
/// what the checker found.
pub fn check_cycle(snap: Snapshot, profile: &Profile, cycle: u64, measured: &[Effect]) -> Vec<String> {
    let mut checker = InvariantChecker::default();
    let outcome = run_cycle(snap, profile, &context(cycle), &mut checker);
    let mut failures = checker.violations;
    if outcome.effects != measured {
        failures.push(format!("cycle {cycle} is not deterministic: a second run gave other effects"));
    }
    failures
}

/// Applies a cycle's effects with the simulator's applier, as a cluster would between
/// cycles; an effect the cluster refuses is a failure.
pub fn apply(cluster: &mut Cluster, effects: &[Effect], cycle: u64) -> Vec<String> {
    match cluster.apply_effects(effects, cycle, context(cycle).now_ms) {
        Ok(_) => Vec::new(),
        Err(e) => vec![format!("cycle {cycle}: {e}")],
    }
}

fn context(cycle: u64) -> CycleContext {
    CycleContext { cycle, now_ms: 1_800_000_000_000 + cycle as i64 * 1000, options: SessionOptions::default() }
}

/// The pending groups with a pod bound or pipelined by these effects (placed whole: the
/// cycle commits a gang whole or not at all), and the others (rolled back or not tried).
fn gangs(cluster: &Cluster, effects: &[Effect], pending: &BTreeMap<String, usize>) -> (usize, usize) {
    let groups = bound_groups(cluster, effects);
    let whole = pending.keys().filter(|g| groups.contains(g.as_str())).count();
    (whole, pending.len() - whole)
}

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|kb| kb.parse::<u64>().ok()))
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    // Nearest rank.
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn binds(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::Bind { .. })).count()
}

fn evictions(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::Evict { .. })).count()
}

fn pipelined(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::Pipeline { .. })).count()
}

/// The bench profile (`BENCH_CONF` with the built-in registries).
pub fn bench_profile() -> Profile {
    volcano_builtin::profile_from_text(BENCH_CONF).expect("the bench configuration is valid")
}

/// The profile of a case ([`Case::conf`] with the built-in registries).
pub fn case_profile(case: Case) -> Profile {
    volcano_builtin::profile_from_text(case.conf()).expect("the bench configuration is valid")
}

/// Cycles `hetero-10k-idle`'s preparation may run before the cluster is settled (the first
/// binds, the next writes what follows, the next has nothing to say).
const IDLE_PREPARATION_CYCLES: u64 = 5;

/// Runs cycle `cycle` over the cluster (untimed) and applies its effects; whether it had
/// any. A failure to apply is a bug of the case (`case` names it).
fn run_and_apply(cluster: &mut Cluster, profile: &Profile, cycle: u64, case: Case) -> bool {
    let (effects, _) = timed_cycle(&cluster.objects(), profile, cycle);
    let failures = apply(cluster, &effects, cycle);
    assert!(failures.is_empty(), "{} preparation: {failures:?}", case.name());
    !effects.is_empty()
}

/// The cluster at the start of a case's measured cycle(s). For `steady-5k` this runs the
/// earlier sessions that place gang-30000 (untimed) and adds the new pending jobs; for
/// `hetero-10k-idle` and `hetero-rollback-10k` it runs `hetero-10k`'s first cycle (untimed)
/// and applies its effects (and, for the idle case, the cycles that follow until the
/// cluster is settled).
pub fn prepare(case: Case, profile: &Profile) -> Cluster {
    let nodes = case.nodes();
    match case {
        Case::Steady5k => {
            // An earlier session placed gang-30000; its jobs then run.
            let first = workloads::gang(0, 30_000);
            let next = first.len();
            let mut cluster = Cluster::from_objects(workloads::objects(nodes, first));
            for cycle in 1..=2 {
                run_and_apply(&mut cluster, profile, cycle, case);
            }
            let new = workloads::objects(0, workloads::gang(next, case.pending_pods()));
            cluster.insert_objects(new);
            cluster
        }
        Case::Spread5k => {
            Cluster::from_objects(workloads::spread_objects(nodes, case.running_pods(), case.pending_pods()))
        }
        Case::Hetero1k | Case::Hetero5k | Case::Hetero10k => Cluster::from_objects(crate::hetero::objects(nodes)),
        Case::Hetero10kIdle => {
            // hetero-10k's first cycle, then the cycles that write the statuses, conditions
            // and events that follow from it, each applied, until a cycle has nothing to
            // say: the cluster as a running scheduler leaves it.
            let mut cluster = Cluster::from_objects(crate::hetero::objects(nodes));
            for cycle in 1..=IDLE_PREPARATION_CYCLES {
                if !run_and_apply(&mut cluster, profile, cycle, case) {
                    return cluster;
                }
            }
            panic!("hetero-10k-idle preparation: the cycles still changed the cluster after {IDLE_PREPARATION_CYCLES}")
        }
        Case::Preempt1k | Case::Preempt5k | Case::Preempt10k | Case::GangPreempt10k => {
            Cluster::from_objects(crate::preempt::objects(nodes))
        }
        Case::PreemptShared5k | Case::PreemptShared10k => Cluster::from_objects(crate::preempt::shared_objects(nodes)),
        Case::HeteroRollback10k => prepare_kept(case, profile).0,
        Case::Topo10k => Cluster::from_objects(crate::topo::objects(nodes)),
        Case::Fill1k | Case::Fill5k | Case::Fill10k | Case::Backlog5k => {
            Cluster::from_objects(workloads::objects(nodes, workloads::gang(0, case.pending_pods())))
        }
    }
}

/// [`prepare`], with the snapshot a running scheduler keeps at the start of the measured
/// cycle when the case defines one: for `hetero-rollback-10k`, the snapshot built before
/// `hetero-10k`'s first cycle, holding what that cycle remembered of the jobs it could not
/// place ([`Snapshot::keep_retries`]), then brought up to date with the objects its effects
/// changed ([`Snapshot::update`], as the watches report the binds and statuses); `None`
/// for the other cases (their warm cycles start from a snapshot built from the cluster).
pub fn prepare_kept(case: Case, profile: &Profile) -> (Cluster, Option<Snapshot>) {
    match case {
        Case::HeteroRollback10k => {
            // hetero-10k's first cycle, applied: its binds run, its pods are placed.
            let mut cluster = Cluster::from_objects(crate::hetero::objects(case.nodes()));
            let before = cluster.objects();
            let mut kept = Snapshot::build(&before, &[SCHEDULER_NAME]).expect("the workload objects are valid");
            let (effects, _, retries) = timed_session_metrics(Instant::now(), kept.clone(), profile, 1, None);
            kept.keep_retries(retries);
            let failures = apply(&mut cluster, &effects, 1);
            assert!(failures.is_empty(), "{} preparation: {failures:?}", case.name());
            let now = cluster.objects();
            let changes = volcano_sim::changes(&before, &now);
            let updated = kept.update(&changes, &now.priority_classes, &[SCHEDULER_NAME]).expect("valid objects");
            assert!(updated, "{} preparation: the binds need no rebuild", case.name());
            (cluster, Some(kept))
        }
        _ => (prepare(case, profile), None),
    }
}

/// The required rules broken by a cycle's effects over `objects` ([`crate::rules::check`]),
/// as check failures: the first ten, then their number.
pub fn check_rules(objects: &ClusterObjects, effects: &[Effect], cycle: u64) -> Vec<String> {
    let violations = crate::rules::check(objects, effects);
    let mut out: Vec<String> = violations.iter().take(10).map(|v| format!("cycle {cycle}: {v}")).collect();
    if violations.len() > 10 {
        out.push(format!("cycle {cycle}: {} required-rule violations in all", violations.len()));
    }
    out
}

/// Runs one case: builds its objects, measures the cycle(s), checks the result.
pub fn run_case(case: Case) -> CaseReport {
    run_case_with(case, false)
}

/// [`run_case`], with Volcano's metrics kept (`metrics`: each measured cycle also times its
/// steps and records its outcome in a [`SchedulerMetrics`], as the scheduler does).
pub fn run_case_with(case: Case, metrics: bool) -> CaseReport {
    let recorder = metrics.then(SchedulerMetrics::new);
    let profile = case_profile(case);
    let nodes = case.nodes();
    let (mut cluster, kept) = prepare_kept(case, &profile);
    let warm = case.warm_cycles();
    let cycles = warm.unwrap_or(1);
    let pending = pending_groups(&cluster, &[SCHEDULER_NAME]);
    let pending_pods: usize = pending.values().sum();
    let mut times = Vec::new();
    let mut first_phases = None;
    let mut bound = 0;
    let mut evicted = 0;
    let mut nominated = 0;
    let mut effect_count = 0;
    let mut whole = 0;
    let mut rolled_back = 0;
    // steady-5k and hetero-10k-idle measure warm sessions, each from the same state: the
    // scheduler keeps its snapshot between cycles, so a cycle starts from a copy of it.
    let objects = cluster.objects();
    let mut cached = warm.is_some().then(|| {
        kept.unwrap_or_else(|| Snapshot::build(&objects, &[SCHEDULER_NAME]).expect("the workload objects are valid"))
    });
    let mut failures = Vec::new();
    let mut first_effects = Vec::new();
    for c in 0..cycles {
        // Warm cycles run the same cycle (same number and time) over the same state, so
        // that each must say what the first said.
        let cycle = if warm.is_some() { 10 } else { 10 + c as u64 };
        let start = Instant::now();
        let snap = match &cached {
            Some(snap) => snap.clone(),
            None => Snapshot::build(&objects, &[SCHEDULER_NAME]).expect("the workload objects are valid"),
        };
        let (effects, t, retries) = timed_session_metrics(start, snap, &profile, cycle, recorder.as_ref());
        if let Some(kept) = &mut cached {
            // As the scheduler does: the next cycle over the same snapshot skips the jobs
            // this one could not place. It must say exactly what this one said.
            kept.keep_retries(retries);
            if c > 0 && effects != first_effects {
                failures.push(format!("warm cycle {} gave other effects than the first", c + 1));
            }
        }
        if c == 0 {
            let (w, r) = gangs(&cluster, &effects, &pending);
            whole = w;
            rolled_back = r;
            bound = binds(&effects);
            evicted = evictions(&effects);
            nominated = pipelined(&effects);
            effect_count = effects.len();
            first_effects = effects;
        }
        times.push(t.total_seconds);
        first_phases.get_or_insert(t);
    }
    // The case's peak memory is that of building the objects and running the measured
    // cycles; the untimed check below holds a second snapshot and two sets of effects at
    // once, which is the harness's memory, not the scheduler's.
    let peak_rss_bytes = peak_rss_bytes();
    if std::env::var_os("VOLCANO_RS_BENCH_DEBUG_RSS").is_some() {
        eprintln!("peak RSS before the check: {} MiB", peak_rss_bytes >> 20);
    }
    // The first measured cycle is checked (untimed, after all the measured cycles, so that
    // its allocations do not disturb them) and applied; the warm cycles of steady-5k and
    // hetero-10k-idle all start from the same state, so one check covers them.
    let snap = match &cached {
        Some(snap) => snap.clone(),
        None => Snapshot::build(&objects, &[SCHEDULER_NAME]).expect("the workload objects are valid"),
    };
    failures.extend(check_cycle(snap, &profile, 10, &first_effects));
    failures.extend(check_rules(&objects, &first_effects, 10));
    let topology = (case == Case::Topo10k).then(|| {
        let (report, found) = crate::topo::check(&objects, &first_effects);
        failures.extend(found);
        report
    });
    // Applied once the snapshots and object lists are gone, so that the cluster's pods are
    // changed in place rather than copied (peak memory stays the cycle's).
    drop(cached);
    drop(objects);
    failures.extend(apply(&mut cluster, &first_effects, 10));
    if std::env::var_os("VOLCANO_RS_BENCH_DEBUG_RSS").is_some() {
        eprintln!("peak RSS after the check: {} MiB", self::peak_rss_bytes() >> 20);
    }
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = percentile(&sorted, 0.5);
    let cycle_seconds = if warm.is_some() { median } else { times[0] };
    CaseReport {
        case: case.name().to_string(),
        nodes,
        pending_pods,
        cycle_seconds,
        phases: first_phases.unwrap_or_default(),
        pods_bound: bound,
        pods_per_second: if cycle_seconds > 0.0 { bound as f64 / cycle_seconds } else { 0.0 },
        gangs_whole: whole,
        gangs_rolled_back: rolled_back,
        evictions: evicted,
        pipelined: nominated,
        effects: effect_count,
        peak_rss_bytes,
        p50_seconds: warm.is_some().then_some(median),
        p99_seconds: warm.is_some().then(|| percentile(&sorted, 0.99)),
        checks_passed: failures.is_empty(),
        check_failures: failures,
        parse_seconds: None,
        cycles_seconds: Vec::new(),
        metrics,
        topology,
    }
}

/// Runs `cycles` cold cycles over a user's objects (`volcano-rs bench --manifests`): each
/// cycle builds its snapshot from the objects, and its effects are applied with the
/// simulator's applier before the next. The first cycle is checked as a case's is (the
/// invariant checker, a second identical run, the required rules, the applier); the
/// report's `cycle_seconds` is the first cycle's, `cycles_seconds` lists them all.
/// `label` names the report (the files, say); `parse_seconds` is how long reading the
/// manifests took.
pub fn run_manifests(
    label: &str,
    mut cluster: Cluster,
    scheduler_names: &[&str],
    profile: &Profile,
    cycles: u32,
    parse_seconds: f64,
) -> Result<CaseReport, SnapshotError> {
    let nodes = cluster.nodes.len();
    let pending = pending_groups(&cluster, scheduler_names);
    let pending_pods: usize = pending.values().sum();
    let mut times = Vec::new();
    let mut first = None;
    let mut failures = Vec::new();
    for c in 0..cycles.max(1) {
        let cycle = 1 + u64::from(c);
        let objects = cluster.objects();
        let (effects, t) = timed_cycle_for(&objects, scheduler_names, profile, cycle)?;
        times.push(t.total_seconds);
        if first.is_none() {
            let snap = Snapshot::build(&objects, scheduler_names)?;
            failures.extend(check_cycle(snap, profile, cycle, &effects));
            failures.extend(check_rules(&objects, &effects, cycle));
            let (whole, rolled_back) = gangs(&cluster, &effects, &pending);
            first =
                Some((t, binds(&effects), whole, rolled_back, evictions(&effects), pipelined(&effects), effects.len()));
        }
        drop(objects);
        failures.extend(apply(&mut cluster, &effects, cycle));
    }
    let (phases, bound, whole, rolled_back, evicted, nominated, effect_count) = first.expect("at least one cycle");
    let cycle_seconds = times[0];
    Ok(CaseReport {
        case: label.to_string(),
        nodes,
        pending_pods,
        cycle_seconds,
        phases,
        pods_bound: bound,
        pods_per_second: if cycle_seconds > 0.0 { bound as f64 / cycle_seconds } else { 0.0 },
        gangs_whole: whole,
        gangs_rolled_back: rolled_back,
        evictions: evicted,
        pipelined: nominated,
        effects: effect_count,
        peak_rss_bytes: peak_rss_bytes(),
        p50_seconds: None,
        p99_seconds: None,
        checks_passed: failures.is_empty(),
        check_failures: failures,
        parse_seconds: Some(parse_seconds),
        cycles_seconds: times,
        metrics: false,
        topology: None,
    })
}

/// The pending pods of the schedulers, by group: their PodGroup
/// (`scheduling.k8s.io/group-name`), or the pod itself when it has none (a gang of one).
fn pending_groups(cluster: &Cluster, scheduler_names: &[&str]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for p in cluster.pods.values() {
        let Some(spec) = p.spec.as_ref() else { continue };
        let ours = spec.scheduler_name.as_deref().is_some_and(|n| scheduler_names.contains(&n));
        if ours && p.node_name().is_none() && p.metadata.deletion_timestamp.is_none() {
            *m.entry(group_of(p)).or_default() += 1;
        }
    }
    m
}

/// The group of a pod (see [`pending_groups`]): `namespace/name`.
fn group_of(p: &Pod) -> String {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let group = p.metadata.annotations.as_ref().and_then(|a| a.get(GROUP_NAME_ANNOTATION));
    match group {
        Some(g) => format!("{ns}/{g}"),
        None => format!("{ns}/{}", p.metadata.name.as_deref().unwrap_or_default()),
    }
}

/// The groups with a pod bound or pipelined by these effects.
fn bound_groups(cluster: &Cluster, effects: &[Effect]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in effects {
        if let Effect::Bind { pod, .. } | Effect::Pipeline { pod, .. } = e {
            if let Some(p) = cluster.pods.get(pod.key()) {
                out.insert(group_of(p));
            }
        }
    }
    out
}

/// Picks the run with the median cycle time of several runs of one case (peak memory is
/// the largest seen).
pub fn median_run(mut runs: Vec<CaseReport>) -> Option<CaseReport> {
    if runs.is_empty() {
        return None;
    }
    let peak = runs.iter().map(|r| r.peak_rss_bytes).max().unwrap_or(0);
    let all_passed = runs.iter().all(|r| r.checks_passed);
    runs.sort_by(|a, b| a.cycle_seconds.total_cmp(&b.cycle_seconds));
    let mut m = runs.swap_remove((runs.len() - 1) / 2);
    m.peak_rss_bytes = peak;
    m.checks_passed = all_passed;
    Some(m)
}

fn ms(s: f64) -> String {
    format!("{:.1} ms", s * 1000.0)
}

/// A table of case reports for people.
pub fn render_table(reports: &[CaseReport], runs: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for r in reports {
        let with = if r.metrics { "; metrics kept" } else { "" };
        let _ = writeln!(
            out,
            "{} ({} nodes, {} pending pods; median of {runs} run(s){with})",
            r.case, r.nodes, r.pending_pods
        );
        let _ = writeln!(out, "  cycle        {}  ({:.1})", ms(r.cycle_seconds), r.phases);
        if let (Some(p50), Some(p99)) = (r.p50_seconds, r.p99_seconds) {
            let _ = writeln!(out, "  p50 / p99    {} / {}", ms(p50), ms(p99));
        }
        if r.cycles_seconds.len() > 1 {
            let all: Vec<String> = r.cycles_seconds.iter().map(|s| ms(*s)).collect();
            let _ = writeln!(out, "  each cycle   {}", all.join(", "));
        }
        if let Some(parse) = r.parse_seconds {
            let _ = writeln!(out, "  reading      {} (the manifests, before the first cycle)", ms(parse));
        }
        let _ = writeln!(out, "  pods bound   {} ({:.0} pods/s)", r.pods_bound, r.pods_per_second);
        let _ = writeln!(out, "  gangs        {} placed whole, {} rolled back", r.gangs_whole, r.gangs_rolled_back);
        if r.evictions > 0 || r.pipelined > 0 {
            let _ = writeln!(out, "  evictions    {} pods evicted, {} pods pipelined", r.evictions, r.pipelined);
        }
        if let Some(t) = &r.topology {
            let soft: Vec<String> = t.soft_by_tier.iter().map(|(tier, n)| format!("{n} in tier {tier}")).collect();
            let _ = writeln!(
                out,
                "  topology     hard: {} of {} placed, {} within their tier, {} waiting that fit ({} more refused by their queue); soft: {} of {} placed ({})",
                t.hard_placed,
                t.hard_jobs,
                t.hard_within_tier,
                t.hard_waiting_that_fit,
                t.hard_waiting_for_queue,
                t.soft_placed,
                t.soft_jobs,
                soft.join(", ")
            );
        }
        let _ = writeln!(out, "  effects      {} (binds, evictions, pipelines, statuses, events)", r.effects);
        let _ = writeln!(out, "  peak RSS     {:.0} MiB", r.peak_rss_bytes as f64 / (1024.0 * 1024.0));
        if r.checks_passed {
            let _ = writeln!(
                out,
                "  checks       ok: no node over allocatable, every gang whole or empty, no required rule broken"
            );
        } else {
            let _ = writeln!(out, "  checks       FAILED: {}", r.check_failures.join("; "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use volcano_framework::ObjectRef;

    use super::*;

    #[test]
    fn a_small_spread_case_is_deterministic_and_keeps_the_required_rules() {
        // spread-5k scaled down: 50 nodes, 200 running pods, gang-400 pending.
        let objects = workloads::spread_objects(50, 200, 400);
        let again = workloads::spread_objects(50, 200, 400);
        assert_eq!(objects.nodes, again.nodes);
        assert_eq!(objects.pods, again.pods);
        let json = |o: &ClusterObjects| serde_json::to_string(&o.pod_groups).unwrap();
        assert_eq!(json(&objects), json(&again));
        let profile = bench_profile();
        let (effects, _) = timed_cycle(&objects, &profile, 1);
        assert!(binds(&effects) > 0);
        assert_eq!(check_rules(&objects, &effects, 1), Vec::<String>::new());
        let snap = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
        assert_eq!(check_cycle(snap, &profile, 1, &effects), Vec::<String>::new());
        let mut cluster = Cluster::from_objects(objects);
        assert_eq!(apply(&mut cluster, &effects, 1), Vec::<String>::new());
    }

    /// A cycle over `objects` that passes every check of a case: the invariant checker and a
    /// second identical run, the required rules, the applier. Returns the effects and the
    /// cluster with them applied.
    fn checked_cycle(objects: ClusterObjects, profile: &Profile, cycle: u64) -> (Vec<Effect>, Cluster) {
        let (effects, _) = timed_cycle(&objects, profile, cycle);
        assert_eq!(check_rules(&objects, &effects, cycle), Vec::<String>::new());
        let snap = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
        assert_eq!(check_cycle(snap, profile, cycle, &effects), Vec::<String>::new());
        let mut cluster = Cluster::from_objects(objects);
        assert_eq!(apply(&mut cluster, &effects, cycle), Vec::<String>::new());
        (effects, cluster)
    }

    #[test]
    fn a_small_hetero_case_and_its_idle_cycle_pass_the_checks() {
        // hetero-N at 40 nodes: 160 running pods, at most 320 pending.
        let objects = crate::hetero::objects(40);
        let again = crate::hetero::objects(40);
        assert_eq!(objects.pods, again.pods);
        assert_eq!(objects.nodes, again.nodes);
        let profile = case_profile(Case::Hetero10k);
        let (effects, cluster) = checked_cycle(objects, &profile, 1);
        let bound = binds(&effects);
        assert!(bound > 0, "the small hetero case binds pods");
        // hetero-10k-idle at that size: the warm cycle after the first, measured as the case
        // measures it (from a kept snapshot), checked the same way.
        let objects = cluster.objects();
        let mut kept = Snapshot::build(&objects, &[SCHEDULER_NAME]).unwrap();
        let (idle, _) = timed_warm_cycle(&mut kept, &profile, 2);
        // It remembered the gangs it could not place, and the same cycle again (as the case's
        // later warm cycles run it) skips them and says the same.
        assert!(kept.retries().is_some_and(|m| !m.is_empty()), "the idle cycle remembers its failed gangs");
        let (again, _) = timed_warm_cycle(&mut kept, &profile, 2);
        assert_eq!(again, idle);
        assert_eq!(check_cycle(kept.clone(), &profile, 2, &idle), Vec::<String>::new());
        assert_eq!(check_rules(&objects, &idle, 2), Vec::<String>::new());
        // It places nothing: what could be placed was placed by the first cycle.
        assert_eq!((binds(&idle), evictions(&idle), pipelined(&idle)), (0, 0, 0));
    }

    #[test]
    fn a_small_preempt_case_evicts_and_pipelines() {
        // preempt-N at 40 nodes: 10 running gangs of 16 on nodes 0..20, gang-320 of high
        // priority in ten leaves.
        let objects = crate::preempt::objects(40);
        let profile = case_profile(Case::Preempt1k);
        let (effects, _) = checked_cycle(objects, &profile, 1);
        let by = |action: &str| {
            effects.iter().filter(|e| matches!(e, Effect::Evict { action: a, .. } if *a == action)).count()
        };
        // Both actions evict: preempt in leaf-0 and leaf-5 (high- over low-priority gangs of
        // the same queue), reclaim for the other leaves (below their deserved share).
        assert!(by("preempt") > 0 && by("reclaim") > 0, "preempt {}, reclaim {}", by("preempt"), by("reclaim"));
        assert!(pipelined(&effects) > 0, "the cycle pipelines high-priority pods");
        assert!(binds(&effects) > 0, "the free half of the cluster is filled");
    }

    #[test]
    fn a_small_gang_preempt_case_evicts_and_pipelines() {
        // preempt-N at 40 nodes with gang-aware eviction.
        let objects = crate::preempt::objects(40);
        let profile = case_profile(Case::GangPreempt10k);
        let (effects, _) = checked_cycle(objects, &profile, 1);
        let by = |action: &str| {
            effects.iter().filter(|e| matches!(e, Effect::Evict { action: a, .. } if *a == action)).count()
        };
        assert!(by("gangpreempt") > 0 && by("gangreclaim") > 0, "{} {}", by("gangpreempt"), by("gangreclaim"));
        assert_eq!(by("preempt") + by("reclaim"), 0);
        assert!(pipelined(&effects) > 0, "the cycle pipelines high-priority pods");
    }

    #[test]
    fn a_small_shared_preempt_case_reclaims_what_preempt_may_not_take() {
        // preempt-shared-N at 40 nodes: 20 running gangs of 8 on nodes 0..20, half in leaf-0
        // and half in leaf-5, each at its minMember, and gang-320 of high priority in ten
        // leaves. The preemptors of leaf-0 and leaf-5 find no victim (gang's vote in the first
        // tier refuses every pod, and the second tier's votes allow none either): preempt
        // tries and evicts nothing; reclaim takes the gangs for the other leaves.
        let objects = crate::preempt::shared_objects(40);
        let profile = case_profile(Case::PreemptShared5k);
        let (effects, _) = checked_cycle(objects, &profile, 1);
        let evicted_by = |action: &str| -> Vec<String> {
            effects
                .iter()
                .filter_map(|e| match e {
                    Effect::Evict { pod, action: a, .. } if *a == action => Some(pod.to_string()),
                    _ => None,
                })
                .collect()
        };
        let (preempted, reclaimed) = (evicted_by("preempt"), evicted_by("reclaim"));
        assert!(preempted.is_empty() && !reclaimed.is_empty(), "preempt {preempted:?}, reclaim {reclaimed:?}");
        assert!(pipelined(&effects) > 0, "the cycle pipelines high-priority pods");
        // A preemptor that selects a model takes no victim on a node of the other.
        for e in &effects {
            if let Effect::Pipeline { pod, node, .. } = e {
                let j: usize = pod.to_string()["bench/high-".len()..][..6].parse().expect("a high job");
                let i: usize = node["node-".len()..].parse().expect("a node");
                match j % 3 {
                    0 => assert_eq!(crate::preempt::shared_model(i), "A100", "{pod} on {node}"),
                    1 => assert_eq!(crate::preempt::shared_model(i), "H100", "{pod} on {node}"),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn a_small_topo_case_places_constrained_jobs_within_their_tier() {
        // topo-N at 1,000 nodes: 125 leaves, 8 spines, 28 pending jobs.
        let objects = crate::topo::objects(1000);
        let profile = case_profile(Case::Topo10k);
        let (effects, _) = checked_cycle(crate::topo::objects(1000), &profile, 1);
        let (report, failures) = crate::topo::check(&objects, &effects);
        assert_eq!(failures, Vec::<String>::new());
        assert!(report.hard_placed > 0 && report.soft_placed > 0, "{report:?}");
        assert_eq!(report.hard_placed, report.hard_within_tier);
        // The check sees a hard job spread over two leaves.
        let mut broken = effects.clone();
        let moved = broken.iter_mut().find_map(|e| match e {
            Effect::Bind { pod, node, .. } if pod.to_string().starts_with("bench/topo-00000-") => Some(node),
            _ => None,
        });
        *moved.expect("topo-00000 (hard, tier 1) is placed") = "node-00999".into();
        let (_, failures) = crate::topo::check(&objects, &broken);
        assert!(failures.iter().any(|f| f.contains("topo-00000: hard tier 1 job placed across")), "{failures:?}");
    }

    #[test]
    fn the_rule_check_sees_a_broken_spread_case() {
        let objects = workloads::spread_objects(50, 200, 400);
        let bind = |pod: &str, node: &str| Effect::Bind {
            pod: ObjectRef::namespaced("bench", pod, ""),
            node: node.into(),
            annotations: Vec::new(),
        };
        // Job 3 (size 8) is of family 0 (anti-affinity to its own job on the hostname).
        let effects = vec![bind("job-000003-0", "node-00001"), bind("job-000003-1", "node-00001")];
        let failures = check_rules(&objects, &effects, 1);
        assert_eq!(failures.len(), 2, "{failures:?}");
        // Job 1 (size 2) is of family 1 (zone spread, maxSkew 1): nodes 0 and 4 share zone-0.
        let effects = vec![bind("job-000001-0", "node-00000"), bind("job-000001-1", "node-00004")];
        let failures = check_rules(&objects, &effects, 1);
        assert_eq!(failures.len(), 1, "{failures:?}");
        // Node 25 holds running pods 25, 75, 125, 175 (k mod 10 = 5), whose anti-affinity
        // keeps app svc-0 ((k + 25) mod 50) off the node: job 0's pod (app svc-0).
        let effects = vec![bind("job-000000-0", "node-00025")];
        let failures = check_rules(&objects, &effects, 1);
        assert_eq!(failures.len(), 4, "{failures:?}");
        assert!(failures[0].contains("of pod bench/run-00025 on node node-00025 broken"), "{failures:?}");
    }
}
