//! `explain` over every scenario file: each job a run leaves waiting gets an explanation
//! with at least one concrete fact, and chosen scenarios give the facts their decisions
//! imply (a refused admission, predicate failures per node, a preemption nobody allowed).

mod common;

use std::path::Path;

use common::scenarios_dir;
use volcano_framework::{Explanation, Profile};
use volcano_sim::{Manifest, Simulator};

/// The scenario simulated as its file says; `None` when its input is refused on purpose.
fn simulate(path: &Path) -> Option<Simulator> {
    let (mut sim, cycles) = common::load(path)?;
    sim.run(cycles).ok()?;
    Some(sim)
}

fn explain(file: &str, job: &str) -> Explanation {
    let sim = simulate(&scenarios_dir().join(file)).expect("the scenario runs");
    sim.explain(job).expect("explain runs").unwrap_or_else(|| panic!("{file}: no job {job}"))
}

#[test]
fn every_waiting_job_of_every_scenario_is_explained() {
    let mut all = Vec::new();
    common::scenario_files(&scenarios_dir(), &mut all);
    let mut explained = 0;
    for path in &all {
        let Some(sim) = simulate(path) else { continue };
        let waiting: Vec<String> = sim.waiting().map(|(k, _)| k.clone()).collect();
        for key in waiting {
            let e = sim.explain(&key).unwrap().unwrap_or_else(|| panic!("{}: {key} not found", path.display()));
            let text = e.to_string();
            assert!(text.starts_with(&format!("{key}: ")), "{}: {text}", path.display());
            // A waiting job says why: a refusal, predicate failures, tasks not tried, jobs
            // ahead, its placements still short of the gang, or the condition the cycle writes.
            let said = e.not_admitted.is_some()
                || e.refused.is_some()
                || !e.rolled_back.is_empty()
                || !e.blocked.is_empty()
                || e.not_tried > 0
                || !e.ahead.is_empty()
                || !e.placed.is_empty()
                || e.condition.is_some()
                || e.ready;
            assert!(said, "{}: {key} has no reason:\n{text}", path.display());
            explained += 1;
        }
    }
    assert!(explained > 20, "only {explained} waiting jobs in the scenarios");
}

#[test]
fn a_job_the_cluster_cannot_hold_is_not_admitted_with_the_bound_named() {
    let e = explain("gang/two-gangs-one-fits.yaml", "default/b");
    assert!(!e.ready);
    let why = e.not_admitted.as_deref().expect("not admitted");
    assert!(why.contains("overcommit factor") && why.contains("nvidia.com/gpu"), "{why}");
    assert_eq!(e.not_tried, 6, "{e}");
    assert!(e.placed.is_empty());
    // The running gang `a` is not ahead in job order (gang puts jobs that are not ready
    // first): the refusal's numbers say what it holds.
    assert!(e.preemption[0].contains("neither action is configured"), "{e}");
    assert!(e.condition.as_deref().is_some_and(|c| c.starts_with("6/6 tasks in gang unschedulable")), "{e}");
}

#[test]
fn predicate_failures_are_counted_per_node() {
    let e = explain("predicates/node-selector-no-match.yaml", &waiting_job("predicates/node-selector-no-match.yaml"));
    assert!(!e.blocked.is_empty(), "{e}");
    let b = &e.blocked[0];
    assert!(b.nodes > 0);
    let (reason, nodes) = &b.reasons[0];
    assert!(reason.contains("node selector") || reason.contains("affinity"), "{e}");
    assert_eq!(*nodes as usize, b.nodes, "every node fails the selector: {e}");
    assert!(e.to_string().contains(&format!("0/{} nodes fit: {} ", b.nodes, nodes)), "{e}");
}

#[test]
fn preemption_that_no_plugin_allows_says_who_refused() {
    let file = "preempt/never-across-queues.yaml";
    let e = explain(file, &waiting_job(file));
    let text = e.preemption.join("\n");
    assert!(!text.is_empty(), "{e}");
    assert!(
        text.contains("no running preemptable pod")
            || text.contains("no victim allowed by")
            || text.contains("not starving"),
        "{e}"
    );
}

#[test]
fn a_volcano_job_is_found_by_its_own_name() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut manifest = Manifest::new();
    for f in ["gpu-cluster.yaml", "jobs/tf-ps.yaml"] {
        let text = std::fs::read_to_string(path.join(f)).unwrap();
        manifest.load_str(f, &text).unwrap();
    }
    let reg = volcano_builtin::registries();
    let mut sim = Simulator::new(manifest, Profile::builtin_default(&reg).unwrap()).unwrap();
    sim.run(None).unwrap();
    let e = sim.explain("default/tf-dist-mnist").unwrap().expect("the job's PodGroup");
    assert!(e.job.starts_with("default/tf-dist-mnist-"), "{}", e.job);
    assert!(e.ready, "{e}");
    assert!(sim.explain("default/no-such-job").unwrap().is_none());
}

/// The one job a scenario leaves waiting.
fn waiting_job(file: &str) -> String {
    let sim = simulate(&scenarios_dir().join(file)).expect("runs");
    let waiting: Vec<String> = sim.waiting().map(|(k, _)| k.clone()).collect();
    assert!(!waiting.is_empty(), "{file} leaves no job waiting");
    waiting[0].clone()
}
