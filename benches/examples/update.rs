//! Times [`Snapshot::update`] against [`Snapshot::build`] on a bench case: the case's first
//! cycle is run and applied, and the pods it bound are the changes. `cargo run --release -p
//! volcano-benches --example update -- steady-5k 5`. Prints, per repetition, the time to
//! update a snapshot no other copy shares, one a live copy still shares (each written chunk
//! is then copied), and a rebuild; then the same for churn: after that cycle, the first 1%
//! of the PodGroups go with their pods (jobs that finished) and as many new ones come, with
//! pods (copies of the last PodGroups under new names).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use volcano_benches::cases::Case;
use volcano_benches::runner::{apply, case_profile, prepare, timed_cycle};
use volcano_benches::workloads::SCHEDULER_NAME;
use volcano_framework::{Changes, ClusterObjects, Effect, Snapshot};

fn key(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""))
}

/// `after` with the first 1% of its PodGroups and their pods gone and as many new ones
/// (copies of the last ones, renamed), and the changes between the two.
fn churn(after: &ClusterObjects) -> (ClusterObjects, Changes) {
    use volcano_api::crd::GROUP_NAME_ANNOTATION;
    let n = after.pod_groups.len().div_ceil(100);
    let group_of = |p: &volcano_framework::pod::SchedPod| {
        let g = p.metadata.annotations.as_ref().and_then(|a| a.get(GROUP_NAME_ANNOTATION)).cloned();
        g.map(|g| format!("{}/{g}", p.metadata.namespace.as_deref().unwrap_or("")))
    };
    let gone: std::collections::HashSet<String> = after.pod_groups[..n].iter().map(|g| key(&g.metadata)).collect();
    let copied: std::collections::HashSet<String> =
        after.pod_groups[after.pod_groups.len() - n..].iter().map(|g| key(&g.metadata)).collect();
    let mut now = after.clone();
    let mut changes = Changes::default();
    now.pod_groups.retain(|g| !gone.contains(&key(&g.metadata)));
    now.pods.retain(|p| !group_of(p).is_some_and(|g| gone.contains(&g)));
    changes.pod_groups.extend(gone.iter().map(|k| (k.clone(), None)));
    changes.pods.extend(
        after.pods.iter().filter(|p| group_of(p).is_some_and(|g| gone.contains(&g))).map(|p| (key(&p.metadata), None)),
    );
    for g in &after.pod_groups[after.pod_groups.len() - n..] {
        let mut g = (**g).clone();
        let name = format!("{}-new", g.metadata.name.as_deref().unwrap_or(""));
        g.metadata.name = Some(name.clone());
        g.status = None;
        let g = Arc::new(g);
        changes.pod_groups.push((key(&g.metadata), Some(g.clone())));
        now.pod_groups.push(g);
    }
    for p in after.pods.iter().filter(|p| group_of(p).is_some_and(|g| copied.contains(&g))) {
        let mut p = (**p).clone();
        p.metadata.name = Some(format!("{}-new", p.metadata.name.as_deref().unwrap_or("")));
        let g = p.metadata.annotations.as_ref().and_then(|a| a.get(GROUP_NAME_ANNOTATION)).cloned().unwrap_or_default();
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(GROUP_NAME_ANNOTATION.to_string(), format!("{g}-new"));
        p.set_node_name(None);
        p.status = None;
        let p = Arc::new(p);
        changes.pods.push((key(&p.metadata), Some(p.clone())));
        now.pods.push(p);
    }
    (now, changes)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "steady-5k".to_string());
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let case = Case::from_name(&name).expect("a bench case name");
    let profile = case_profile(case);
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
    let (now, changes) = churn(&after);
    let kept = Snapshot::build(&after, &names).expect("valid");
    println!("churn: {} PodGroups and {} pods changed (gone or new)", changes.pod_groups.len(), changes.pods.len());
    for r in 0..reps {
        let mut shared = kept.clone();
        let t = Instant::now();
        assert!(shared.update(&changes, &after.priority_classes, &names).expect("valid"));
        let with_copy = t.elapsed();
        let t = Instant::now();
        let rebuilt = Snapshot::build(&now, &names).expect("valid");
        let build = t.elapsed();
        assert_eq!((shared.tasks.len(), shared.jobs.len()), (rebuilt.tasks.len(), rebuilt.jobs.len()));
        drop((shared, rebuilt));
        println!(
            "#{r}: update {:.2} ms (shared with a live copy), rebuild {:.2} ms",
            with_copy.as_secs_f64() * 1e3,
            build.as_secs_f64() * 1e3
        );
    }
}
