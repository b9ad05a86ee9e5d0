//! Property tests: random clusters and workloads, simulated over several cycles with
//! several configurations. After every action the simulator's invariant checker must find
//! nothing (no node beyond its allocatable, every committed gang whole, no queue beyond its
//! capability); the final state must hold the same; and the node index, parallelism and the
//! input order must not change a single placement.

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::Value;
use volcano_framework::{Profile, Registries, SessionOptions};
use volcano_sim::{changes, Manifest, Simulator};
use volcano_testkit::scenario::{Cluster, JobSpec, NodeSpec, PodShape, Quantity, QueueSpec};

fn registries() -> Registries {
    volcano_builtin::registries()
}

const CONFIGS: [&str; 4] = [
    // Volcano's default.
    "",
    // Helm-like, with binpack on GPUs and the eviction actions.
    r#"
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
"#,
    // Eviction-heavy with gang-safe victims: every victim voter (proportion's reclaimable
    // included) sits in tier 1. A voter of tier 2 — drf's preemptable, proportion's
    // reclaimable — would decide whenever tier 1 finds no victim, exactly as in Volcano,
    // and gang's protection would not hold.
    r#"
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
  - name: elastic
  - name: proportion
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: nodeorder
"#,
    // The GPU placement policies together (their node-index promises: shape-local scores,
    // shared evaluations across shapes).
    r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
  - name: fragmentation
  - name: bestfit
    arguments:
      bestfit.weight: 0.5
  - name: gpu-packing
    arguments:
      gpu-packing.weight: 0.25
  - name: dotprod
    arguments:
      dotprod.weight: 0.125
"#,
];

fn q(v: i64) -> Quantity {
    Quantity::Int(v)
}

prop_compose! {
    fn arb_node(i: usize)(cpu in 2i64..16, mem in 4i64..64, gpu in 0i64..9, pods in 3i64..12, zone in 0..2u8, tainted in proptest::bool::weighted(0.15)) -> NodeSpec {
        NodeSpec {
            name: format!("n{i}"),
            count: None,
            cpu: q(cpu),
            memory: Quantity::Str(format!("{mem}Gi")),
            gpu: (gpu > 0).then(|| q(gpu)),
            pods: Some(q(pods)),
            resources: BTreeMap::new(),
            labels: [("zone".to_string(), format!("z{zone}"))].into_iter().collect(),
            taints: if tainted {
                vec![k8s_openapi::api::core::v1::Taint { key: "dedicated".into(), value: Some("x".into()), effect: "NoSchedule".into(), ..Default::default() }]
            } else { vec![] },
            unschedulable: false,
        }
    }
}

prop_compose! {
    fn arb_job(i: usize, queues: usize)(
        queue in 0..queues,
        replicas in 1u32..6,
        min_frac in 0.0f64..1.0,
        cpu in 0i64..4,
        mem in 1i64..8,
        gpu in 0i64..3,
        prio in 0..3u8,
        zone in proptest::option::weighted(0.2, 0..2u8),
        inqueue in proptest::bool::ANY,
    ) -> JobSpec {
        let min = ((replicas as f64) * min_frac).ceil().max(1.0) as i32;
        JobSpec {
            name: format!("j{i}"),
            namespace: None,
            queue: Some(format!("q{queue}")),
            min_member: Some(min),
            replicas: Some(replicas),
            tasks: vec![],
            phase: Some(if inqueue { volcano_api::crd::PodGroupPhase::Inqueue } else { volcano_api::crd::PodGroupPhase::Pending }),
            priority_class: match prio { 0 => None, 1 => Some("low".into()), _ => Some("high".into()) },
            min_resources: None,
            running: vec![],
            annotations: BTreeMap::new(),
            network_topology: None,
            sub_group_policy: None,
            partition_size: None,
            created: None,
            pod: PodShape {
                cpu: (cpu > 0).then(|| q(cpu)),
                memory: (cpu > 0).then(|| Quantity::Str(format!("{mem}Gi"))),
                gpu: (cpu > 0 && gpu > 0).then(|| q(gpu)),
                node_selector: zone.map(|z| [("zone".to_string(), format!("z{z}"))].into_iter().collect()).unwrap_or_default(),
                ..Default::default()
            },
        }
    }
}

fn arb_cluster() -> impl Strategy<Value = (Cluster, usize)> {
    arb_cluster_of(10)
}

/// Random clusters with fewer than `max_jobs` jobs.
fn arb_cluster_of(max_jobs: usize) -> impl Strategy<Value = (Cluster, usize)> {
    (1usize..7, 1usize..4, 1usize..max_jobs, 0usize..CONFIGS.len()).prop_flat_map(|(nodes, queues, jobs, config)| {
        let node_s: Vec<_> = (0..nodes).map(arb_node).collect();
        let job_s: Vec<_> = (0..jobs).map(|i| arb_job(i, queues)).collect();
        let queue_s: Vec<_> = (0..queues)
            .map(|i| {
                (1i32..5, proptest::option::weighted(0.3, 1i64..6)).prop_map(move |(w, cap)| QueueSpec {
                    name: format!("q{i}"),
                    weight: Some(w),
                    capability: cap
                        .map(|c| [("nvidia.com/gpu".to_string(), q(c))].into_iter().collect())
                        .unwrap_or_default(),
                    guarantee: BTreeMap::new(),
                    deserved: BTreeMap::new(),
                    reclaimable: Some(true),
                    priority: None,
                    parent: None,
                    state: None,
                })
            })
            .collect();
        (node_s, queue_s, job_s).prop_map(move |(nodes, queues, jobs)| {
            let priority_classes = [("low".to_string(), 10), ("high".to_string(), 1000)].into_iter().collect();
            (Cluster { nodes, queues, priority_classes, jobs }, config)
        })
    })
}

fn simulate(yaml: &str, config: &str, options: SessionOptions) -> Result<Value, String> {
    let reg = registries();
    let profile = if config.is_empty() { Profile::builtin_default(&reg) } else { Profile::from_yaml(config, &reg) }
        .map_err(|e| e.to_string())?;
    let mut manifest = Manifest::new();
    manifest.load_str("generated.yaml", yaml).map_err(|e| e.to_string())?;
    let mut sim = Simulator::new(manifest, profile).map_err(|e| e.to_string())?;
    sim.set_session_options(options);
    sim.run(Some(6)).map_err(|e| e.to_string())?;
    Ok(sim.report().to_json_value())
}

/// Checks the final state from the report: gangs whole or empty; per node, pods within
/// allocatable (via the input's requests) is checked by the simulator after every action.
fn check_final(report: &Value, cluster: &Cluster) -> Result<(), String> {
    let mut bound: BTreeMap<String, i32> = BTreeMap::new();
    for p in report["pods"].as_array().into_iter().flatten() {
        if p["node"].is_string() {
            let pod = p["pod"].as_str().unwrap_or_default();
            let job =
                pod.trim_start_matches("default/").rsplit_once('-').map(|(j, _)| j.to_string()).unwrap_or_default();
            *bound.entry(job).or_default() += 1;
        }
    }
    for j in &cluster.jobs {
        let n = bound.get(&j.name).copied().unwrap_or(0);
        let min = j.min_member.unwrap_or(1);
        if n > 0 && n < min {
            return Err(format!("job {} has {n} pods bound, below its minMember {min}", j.name));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x766f_6c63), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_many_cycles((cluster, config) in arb_cluster()) {
        let yaml = cluster.expand().to_yaml();
        let report = simulate(&yaml, CONFIGS[config], SessionOptions::default());
        let report = match report {
            Ok(r) => r,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n--- input\n{yaml}"))),
        };
        // With the Helm-like configuration, gang does not vote on victims
        // (`enablePreemptable: false`), so preemption may take a gang below its minimum,
        // exactly as in Volcano; the other configurations must never leave a partial gang.
        let gang_protected = config != 1;
        if gang_protected {
            if let Err(e) = check_final(&report, &cluster) {
                return Err(TestCaseError::fail(format!("{e}\n--- input\n{yaml}")));
            }
        }
    }

    #[test]
    fn node_index_and_parallelism_change_nothing((cluster, config) in arb_cluster()) {
        let yaml = cluster.expand().to_yaml();
        let base = simulate(&yaml, CONFIGS[config], SessionOptions::default()).map_err(TestCaseError::fail)?;
        let scan = simulate(&yaml, CONFIGS[config], SessionOptions { node_index: false, ..Default::default() })
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&base, &scan, "node index vs full scan differ");
        let parallel = simulate(
            &yaml,
            CONFIGS[config],
            SessionOptions { parallelism: 2, parallel_threshold: 1, ..Default::default() },
        )
        .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&base, &parallel, "parallel vs sequential differ");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7061_7274), failure_persistence: None, .. ProptestConfig::default() })]

    /// With jobs split into sub-groups: the simulator's invariants hold after every action,
    /// no gang is left partial, and the node index and parallelism change nothing.
    #[test]
    fn sub_grouped_jobs_keep_the_invariants((cluster, config) in arb_cluster(), partitioned in any::<u16>()) {
        let cluster = with_partitions(cluster, partitioned);
        let yaml = cluster.expand().to_yaml();
        let base = simulate(&yaml, CONFIGS[config], SessionOptions::default())
            .map_err(|e| TestCaseError::fail(format!("{e}\n--- input\n{yaml}")))?;
        if config != 1 {
            check_final(&base, &cluster).map_err(|e| TestCaseError::fail(format!("{e}\n--- input\n{yaml}")))?;
        }
        let scan = simulate(&yaml, CONFIGS[config], SessionOptions { node_index: false, ..Default::default() })
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&base, &scan, "node index vs full scan differ\n--- input\n{}", yaml);
        let parallel = simulate(
            &yaml,
            CONFIGS[config],
            SessionOptions { parallelism: 2, parallel_threshold: 1, ..Default::default() },
        )
        .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&base, &parallel, "parallel vs sequential differ");
    }
}

/// Fails unless the simulation with the node index equals the one with a full scan.
fn index_matches_a_full_scan(yaml: &str, config: usize) -> Result<(), TestCaseError> {
    let base = simulate(yaml, CONFIGS[config], SessionOptions::default()).map_err(TestCaseError::fail)?;
    let scan = simulate(yaml, CONFIGS[config], SessionOptions { node_index: false, ..Default::default() })
        .map_err(TestCaseError::fail)?;
    prop_assert_eq!(&base, &scan, "node index vs full scan differ\n--- input\n{}", yaml);
    Ok(())
}

/// The PodGroup a pod belongs to (its group annotation), with the group's position in
/// `jobs`.
fn job_of(pod: &k8s_openapi::api::core::v1::Pod, jobs: &[String]) -> Option<(String, usize)> {
    let job = pod.metadata.annotations.as_ref()?.get("scheduling.k8s.io/group-name")?.clone();
    let index = jobs.iter().position(|j| *j == job).unwrap_or(0);
    Some((job, index))
}

/// The cluster with inter-pod rules: every node gets its hostname label, every pod the
/// label `job: <its PodGroup>`, and each job one rule family, by its position: none,
/// required anti-affinity to its own job on the hostname, `DoNotSchedule` zone spread of
/// its own job (maxSkew 1), preferred affinity to its own job on the hostname, required
/// affinity to its own job on the zone, required anti-affinity on the zone against the
/// next job with a preferred anti-affinity to it on the hostname (the symmetric rules),
/// preferred anti-affinity to its own job on the hostname, required affinity to its own
/// job on the hostname (a self-affine gang on one node), and both required anti-affinity to
/// its own job on the hostname and zone spread (a node may fail both).
fn with_inter_pod_rules(mut e: volcano_testkit::scenario::Expanded) -> volcano_testkit::scenario::Expanded {
    use k8s_openapi::api::core::v1::{
        Affinity, PodAffinity, PodAffinityTerm, PodAntiAffinity, TopologySpreadConstraint, WeightedPodAffinityTerm,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    let selecting = |job: &str| LabelSelector {
        match_labels: Some([("job".to_string(), job.to_string())].into_iter().collect()),
        ..Default::default()
    };
    let term = |job: &str, key: &str| PodAffinityTerm {
        label_selector: Some(selecting(job)),
        topology_key: key.into(),
        ..Default::default()
    };
    for n in &mut e.nodes {
        let name = n.metadata.name.clone().unwrap_or_default();
        n.metadata.labels.get_or_insert_with(Default::default).insert("kubernetes.io/hostname".into(), name);
    }
    let jobs: Vec<String> = e.pod_groups.iter().filter_map(|pg| pg.metadata.name.clone()).collect();
    for pod in &mut e.pods {
        let Some((job, index)) = job_of(pod, &jobs) else { continue };
        let next = jobs[(index + 1) % jobs.len()].clone();
        pod.metadata.labels.get_or_insert_with(Default::default).insert("job".into(), job.clone());
        let spec = pod.spec.as_mut().expect("pods have a spec");
        let spread = |job: &str| {
            Some(vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: "zone".into(),
                when_unsatisfiable: "DoNotSchedule".into(),
                label_selector: Some(selecting(job)),
                ..Default::default()
            }])
        };
        let anti_self = |job: &str| {
            Some(Affinity {
                pod_anti_affinity: Some(PodAntiAffinity {
                    required_during_scheduling_ignored_during_execution: Some(vec![term(
                        job,
                        "kubernetes.io/hostname",
                    )]),
                    ..Default::default()
                }),
                ..Default::default()
            })
        };
        match index % 9 {
            1 => spec.affinity = anti_self(&job),
            2 => spec.topology_spread_constraints = spread(&job),
            3 => {
                spec.affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                            weight: 50,
                            pod_affinity_term: term(&job, "kubernetes.io/hostname"),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
            4 => {
                spec.affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(&job, "zone")]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
            5 => {
                spec.affinity = Some(Affinity {
                    pod_anti_affinity: Some(PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(&next, "zone")]),
                        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                            weight: 30,
                            pod_affinity_term: term(&next, "kubernetes.io/hostname"),
                        }]),
                    }),
                    ..Default::default()
                })
            }
            6 => {
                spec.affinity = Some(Affinity {
                    pod_anti_affinity: Some(PodAntiAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                            weight: 80,
                            pod_affinity_term: term(&job, "kubernetes.io/hostname"),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
            7 => {
                spec.affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(
                            &job,
                            "kubernetes.io/hostname",
                        )]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
            8 => {
                spec.affinity = anti_self(&job);
                spec.topology_spread_constraints = spread(&job);
            }
            _ => {}
        }
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6166_6669), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn inter_pod_rules_node_index_matches_a_full_scan((cluster, config) in arb_cluster_of(17)) {
        let yaml = with_inter_pod_rules(cluster.expand()).to_yaml();
        index_matches_a_full_scan(&yaml, config)?;
    }
}

/// [`with_inter_pod_rules`], with Services that give the system-default spread
/// constraints to two jobs in three (those without constraints of their own), the zone
/// also as `topology.kubernetes.io/zone` on three nodes in four, and every fifth node
/// without its hostname label: as YAML.
fn with_default_spread(e: volcano_testkit::scenario::Expanded, soft_scores: bool) -> String {
    let mut e = with_inter_pod_rules(e);
    if soft_scores {
        e = with_soft_node_scores(e);
    }
    for (i, n) in e.nodes.iter_mut().enumerate() {
        let labels = n.metadata.labels.get_or_insert_with(Default::default);
        if i % 4 != 3 {
            if let Some(zone) = labels.get("zone").cloned() {
                labels.insert("topology.kubernetes.io/zone".into(), zone);
            }
        }
        if i % 5 == 4 {
            labels.remove("kubernetes.io/hostname");
        }
    }
    let mut yaml = e.to_yaml();
    for (i, pg) in e.pod_groups.iter().enumerate() {
        let (Some(name), namespace) = (pg.metadata.name.as_deref(), pg.metadata.namespace.as_deref()) else {
            continue;
        };
        if i % 3 != 2 {
            yaml.push_str(&format!(
                "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc-{name}, namespace: {}}}\n\
                 spec: {{selector: {{job: {name}}}}}\n",
                namespace.unwrap_or("default")
            ));
        }
    }
    yaml
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7376_6373), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn system_default_spread_node_index_matches_a_full_scan((cluster, config) in arb_cluster_of(17)) {
        let yaml = with_default_spread(cluster.expand(), false);
        index_matches_a_full_scan(&yaml, config)?;
    }
}

/// The cluster with node-local scores that differ between nodes: every node gets a rack
/// label (`r0` … `r2`) and, on some nodes, one or two `PreferNoSchedule` taints; each job,
/// by its position, preferred node affinity to a zone, to a rack and a zone, to a label
/// value no node has, or none, and on every third job a toleration of one of the taints.
/// Existing affinity (inter-pod rules) is kept.
fn with_soft_node_scores(mut e: volcano_testkit::scenario::Expanded) -> volcano_testkit::scenario::Expanded {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm, Taint, Toleration,
    };
    for (i, n) in e.nodes.iter_mut().enumerate() {
        n.metadata.labels.get_or_insert_with(Default::default).insert("rack".into(), format!("r{}", i % 3));
        let spec = n.spec.get_or_insert_with(Default::default);
        let taints = spec.taints.get_or_insert_with(Vec::new);
        let soft = |key: &str| Taint { key: key.into(), effect: "PreferNoSchedule".into(), ..Default::default() };
        if i % 4 == 1 || i % 5 == 2 {
            taints.push(soft("maintenance"));
        }
        if i % 5 == 2 {
            taints.push(soft("draining"));
        }
    }
    let preferred = |weight: i32, key: &str, value: &str| PreferredSchedulingTerm {
        weight,
        preference: NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(vec![value.into()]),
            }]),
            ..Default::default()
        },
    };
    let jobs: Vec<String> = e.pod_groups.iter().filter_map(|pg| pg.metadata.name.clone()).collect();
    for pod in &mut e.pods {
        let Some((_, index)) = job_of(pod, &jobs) else { continue };
        let spec = pod.spec.as_mut().expect("pods have a spec");
        let terms = match index % 5 {
            1 => vec![preferred(50, "zone", "z0")],
            2 => vec![preferred(80, "rack", "r1"), preferred(20, "zone", "z1")],
            3 => vec![preferred(10, "rack", "nowhere")],
            4 => vec![preferred(30, "rack", "r2"), preferred(30, "rack", "r0")],
            _ => vec![],
        };
        if !terms.is_empty() {
            let affinity = spec.affinity.get_or_insert_with(Affinity::default);
            affinity.node_affinity = Some(NodeAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(terms),
                ..Default::default()
            });
        }
        if index % 3 == 2 {
            let key = if index % 2 == 0 { "maintenance" } else { "draining" };
            spec.tolerations.get_or_insert_with(Vec::new).push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("PreferNoSchedule".into()),
                ..Default::default()
            });
        }
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x736f_6674), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn soft_node_scores_node_index_matches_a_full_scan((cluster, config) in arb_cluster_of(17)) {
        let yaml = with_soft_node_scores(cluster.expand()).to_yaml();
        index_matches_a_full_scan(&yaml, config)?;
    }

    #[test]
    fn soft_node_scores_with_inter_pod_rules_node_index_matches_a_full_scan((cluster, config) in arb_cluster_of(17)) {
        let yaml = with_default_spread(cluster.expand(), true);
        index_matches_a_full_scan(&yaml, config)?;
    }
}

/// The cluster with some jobs split into partitions: job `i` when bit `i % 16` of `bits` is
/// set, into partitions of 1 or 2 pods (by `i`), of which it needs 0, 1 or 2.
fn with_partitions(mut cluster: Cluster, bits: u16) -> Cluster {
    for (i, j) in cluster.jobs.iter_mut().enumerate() {
        if bits & (1 << (i % 16)) == 0 {
            continue;
        }
        let size = 1 + (i % 2) as u32;
        j.partition_size = Some(size);
        j.sub_group_policy = Some(vec![volcano_api::crd::SubGroupPolicySpec {
            name: "part".into(),
            sub_group_size: Some(size as i32),
            min_sub_groups: Some((i % 3) as i32),
            match_label_keys: Some(vec!["volcano.sh/partition-id".into()]),
            ..Default::default()
        }]);
    }
    cluster
}

/// The cluster with running victims: every other job (by position) of low priority with
/// its pods Running on the nodes in turn (from `offset`), the others of high priority;
/// queue `i` reclaimable when bit `i` of `reclaimable` is set.
fn with_running_jobs(mut cluster: Cluster, offset: usize, reclaimable: u8) -> Cluster {
    let nodes: Vec<String> = cluster.nodes.iter().map(|n| n.name.clone()).collect();
    for (i, q) in cluster.queues.iter_mut().enumerate() {
        q.reclaimable = Some(reclaimable & (1 << i) != 0);
    }
    let mut k = offset;
    for (i, j) in cluster.jobs.iter_mut().enumerate() {
        if i % 2 == 0 {
            j.priority_class = Some("low".into());
            j.phase = Some(volcano_api::crd::PodGroupPhase::Running);
            j.running = (0..j.replicas.unwrap_or(1))
                .map(|_| {
                    k += 1;
                    nodes[k % nodes.len()].clone()
                })
                .collect();
        } else {
            j.priority_class = Some("high".into());
        }
    }
    cluster
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6576_6963), failure_persistence: None, .. ProptestConfig::default() })]

    /// `preempt` and `reclaim` walk only the nodes the victim index lists and score only
    /// those when they can (the node index on); with it off they walk and score every
    /// node. The victims and placements must be the same.
    #[test]
    fn evictions_with_the_victim_index_match_a_full_scan(
        (cluster, config) in arb_cluster_of(13),
        offset in 0usize..7,
        reclaimable in any::<u8>(),
    ) {
        let cluster = with_running_jobs(cluster, offset, reclaimable);
        // The configurations with the eviction actions.
        let config = 1 + config % 2;
        index_matches_a_full_scan(&cluster.expand().to_yaml(), config)?;
    }
}

const PREEMPT_CONF: &str = r#"
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

/// A cluster full of low-priority one-GPU pods (single-pod jobs, already running), and one
/// high-priority gang of `k` one-GPU pods that fits the cluster's GPUs.
fn arb_starving_gang() -> impl Strategy<Value = (Cluster, usize)> {
    (proptest::collection::vec(1i64..6, 1..5), 0.0f64..1.0, 0.0f64..1.0).prop_map(|(gpus, fill, want)| {
        let total: i64 = gpus.iter().sum();
        let mut nodes = Vec::new();
        let mut jobs = Vec::new();
        let mut placed = 0;
        let to_place = ((total as f64) * fill).round() as i64;
        for (i, g) in gpus.iter().enumerate() {
            nodes.push(NodeSpec {
                name: format!("n{i}"),
                count: None,
                cpu: q(64),
                memory: Quantity::Str("256Gi".into()),
                gpu: Some(q(*g)),
                pods: Some(q(110)),
                resources: BTreeMap::new(),
                labels: BTreeMap::new(),
                taints: vec![],
                unschedulable: false,
            });
            for _ in 0..*g {
                if placed < to_place {
                    jobs.push(JobSpec {
                        name: format!("low{placed}"),
                        namespace: None,
                        queue: None,
                        min_member: Some(1),
                        replicas: Some(1),
                        tasks: vec![],
                        phase: Some(volcano_api::crd::PodGroupPhase::Running),
                        priority_class: Some("low".into()),
                        min_resources: None,
                        running: vec![format!("n{i}")],
                        annotations: BTreeMap::new(),
                        network_topology: None,
                        sub_group_policy: None,
                        partition_size: None,
                        created: None,
                        pod: PodShape {
                            cpu: Some(q(1)),
                            memory: Some(Quantity::Str("1Gi".into())),
                            gpu: Some(q(1)),
                            ..Default::default()
                        },
                    });
                    placed += 1;
                }
            }
        }
        let k = ((total as f64) * want).ceil().max(1.0) as u32;
        jobs.push(JobSpec {
            name: "urgent".into(),
            namespace: None,
            queue: None,
            min_member: Some(k as i32),
            replicas: Some(k),
            tasks: vec![],
            phase: Some(volcano_api::crd::PodGroupPhase::Inqueue),
            priority_class: Some("high".into()),
            min_resources: None,
            running: vec![],
            annotations: BTreeMap::new(),
            network_topology: None,
            sub_group_policy: None,
            partition_size: None,
            created: None,
            pod: PodShape {
                cpu: Some(q(1)),
                memory: Some(Quantity::Str("1Gi".into())),
                gpu: Some(q(1)),
                ..Default::default()
            },
        });
        let priority_classes = [("low".to_string(), 10), ("high".to_string(), 1000)].into_iter().collect();
        (Cluster { nodes, queues: vec![], priority_classes, jobs }, k as usize)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x766f_6c63), failure_persistence: None, .. ProptestConfig::default() })]

    /// No starving gang stays blocked while lower-priority jobs of its queue hold what it
    /// needs: after a few cycles the high-priority gang runs whole.
    #[test]
    fn a_starving_gang_is_not_blocked_by_lower_priority_jobs((cluster, k) in arb_starving_gang()) {
        let yaml = cluster.expand().to_yaml();
        let report = simulate(&yaml, PREEMPT_CONF, SessionOptions::default()).map_err(TestCaseError::fail)?;
        let running = report["pods"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["pod"].as_str().is_some_and(|s| s.starts_with("default/urgent-")) && p["phase"] == "Running")
            .count();
        prop_assert_eq!(running, k, "the urgent gang of {} pods is not running\n--- input\n{}", k, yaml);
    }
}

/// The snapshot as text, up to the numbering of tasks and jobs (which [`Snapshot::update`]
/// may give differently from a build): tasks in key order naming their job by key, shapes
/// numbered in order of first appearance, jobs in key order listing their tasks' keys, nodes
/// listing their tasks' keys; resource dimensions at zero left out (a dimension that went to
/// zero and one never used mean the same to every rule).
fn snapshot_text(s: &volcano_framework::Snapshot) -> String {
    use volcano_framework::TaskId;
    let key = |t: &TaskId| s.task(*t).key.to_string();
    let mut tasks: Vec<_> = s.tasks.iter().collect();
    tasks.sort_by(|a, b| a.key.cmp(&b.key));
    let mut shapes: BTreeMap<u32, usize> = BTreeMap::new();
    let tasks: Vec<String> = tasks
        .into_iter()
        .map(|t| {
            let n = shapes.len();
            let shape = *shapes.entry(t.shape).or_insert(n);
            let job = t.job.map(|j| s.job(j).key.clone());
            // Sub-groups are numbered in order of arrival: named instead.
            let group = t.sub_group.and_then(|g| {
                t.job.and_then(|j| s.job(j).sub_groups.as_ref()).map(|sg| sg.groups[g as usize].name.clone())
            });
            let mut t = t.clone();
            t.shape = shape as u32;
            t.job = None;
            t.sub_group = None;
            format!("{t:#?} in job {job:?}, sub-group {group:?}")
        })
        .collect();
    let mut jobs: Vec<_> = s.jobs.iter().collect();
    jobs.sort_by(|a, b| a.key.cmp(&b.key));
    let jobs: Vec<String> = jobs
        .into_iter()
        .map(|j| {
            let keys: Vec<String> = j.tasks.iter().map(key).collect();
            let mut j = j.clone();
            j.tasks.clear();
            format!("{j:#?} with tasks {keys:?}")
        })
        .collect();
    let nodes: Vec<String> = s
        .nodes
        .iter()
        .map(|n| {
            let mut keys: Vec<String> = n.tasks.iter().map(key).collect();
            keys.sort();
            let mut n = n.clone();
            n.tasks = Default::default();
            format!("{n:#?} with tasks {keys:?}")
        })
        .collect();
    let queueless: Vec<(String, i32)> =
        s.queueless_pod_groups().iter().map(|(k, g)| (k.to_string(), g.priority)).collect();
    let awaiting: Vec<&str> = s.pods_awaiting_group().keys().map(|k| &**k).collect();
    let text = format!(
        "{tasks:#?}\n{jobs:#?}\n{nodes:#?}\n{:#?}\n{:?}\nwithout their queue {queueless:?}, pods awaiting their group {awaiting:?}",
        s.queues, s.total_resource
    );
    without_zero_scalars(&text)
}

/// Debug text of resources without their scalar dimensions at zero.
fn without_zero_scalars(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // Scalar dimensions print as ", NAME VALUE" after cpu and memory.
    while let Some(i) = rest.find(", ") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after.find([',', '\n', ')', '}', ']']).unwrap_or(after.len());
        let item = &after[..end];
        let zero_scalar = item
            .split_once(' ')
            .is_some_and(|(n, v)| n != "memory" && !n.contains(':') && v.trim_start_matches('-') == "0.00");
        if !zero_scalar {
            out.push_str(", ");
            out.push_str(item);
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// What a cycle on the snapshot decides, as text in a fixed order (effects sorted: the
/// numbering may change the order in which independent effects are emitted, never which).
fn cycle_text(s: &volcano_framework::Snapshot, profile: &Profile) -> String {
    let cx =
        volcano_framework::CycleContext { cycle: 1, now_ms: 1_700_000_000_000, options: SessionOptions::default() };
    let out = volcano_framework::run_cycle(s.clone(), profile, &cx, &mut volcano_framework::NoObserver);
    let mut effects: Vec<String> = out.effects.iter().map(|e| format!("{e:?}")).collect();
    effects.sort();
    without_zero_scalars(&format!("{effects:#?}\n{:#?}\n{:#?}", out.queues, out.pending_reasons))
}

/// `objects` without the pods and PodGroups that `seed` leaves out (about one in five), and
/// with the PodGroups it picks (about one in eight) naming a queue that does not exist.
fn some_of(objects: &volcano_framework::ClusterObjects, seed: u64) -> volcano_framework::ClusterObjects {
    let keep = |salt: u64, i: usize| {
        let h = (seed ^ salt).wrapping_add(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        !(h >> 59).is_multiple_of(5)
    };
    let mut o = objects.clone();
    o.pods = objects.pods.iter().enumerate().filter(|(i, _)| keep(1, *i)).map(|(_, p)| p.clone()).collect();
    o.pod_groups = objects.pod_groups.iter().enumerate().filter(|(i, _)| keep(2, *i)).map(|(_, p)| p.clone()).collect();
    for (i, pg) in o.pod_groups.iter_mut().enumerate() {
        let h = (seed ^ 3).wrapping_add(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if (h >> 58).is_multiple_of(8) {
            let mut gone = (**pg).clone();
            gone.spec.queue = Some("gone".into());
            *pg = std::sync::Arc::new(gone);
        }
    }
    o
}

/// `objects` with the bound pods that `seed` picks (about one in three) Succeeded.
fn some_finished(objects: &volcano_framework::ClusterObjects, seed: u64) -> volcano_framework::ClusterObjects {
    let mut o = objects.clone();
    for (i, p) in o.pods.iter_mut().enumerate() {
        let h = seed.wrapping_add(i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if p.node_name().is_some() && (h >> 60).is_multiple_of(3) {
            let mut done = (**p).clone();
            done.status.get_or_insert_with(Default::default).phase = Some("Succeeded".into());
            *p = std::sync::Arc::new(done);
        }
    }
    o
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, rng_seed: proptest::test_runner::RngSeed::Fixed(0x736e_6170), failure_persistence: None, .. ProptestConfig::default() })]

    /// A snapshot kept between cycles and brought up to date with what changed is the
    /// snapshot a fresh build gives, up to numbering, whenever the update applies, and a cycle
    /// decides the same on both.
    #[test]
    fn an_updated_snapshot_is_a_rebuilt_one((cluster, config) in arb_cluster(), partitioned in any::<u16>()) {
        let yaml = with_partitions(cluster, partitioned).expand().to_yaml();
        let reg = registries();
        let profile = if CONFIGS[config].is_empty() { Profile::builtin_default(&reg) } else { Profile::from_yaml(CONFIGS[config], &reg) }.unwrap();
        let mut manifest = Manifest::new();
        manifest.load_str("generated.yaml", &yaml).unwrap();
        let mut sim = Simulator::new(manifest, profile).unwrap();
        let profile = if CONFIGS[config].is_empty() { Profile::builtin_default(&reg) } else { Profile::from_yaml(CONFIGS[config], &reg) }.unwrap();
        let names = ["volcano-rs"];
        let mut before = sim.cluster().objects();
        let mut kept = volcano_framework::Snapshot::build(&before, &names).unwrap();
        for cycle in 0..6 {
            if sim.step().is_err() {
                break;
            }
            // Every other cycle, pods and PodGroups come and go as well.
            let all = sim.cluster().objects();
            let now = if cycle % 2 == 1 { some_of(&all, cycle as u64) } else { all };
            let fresh = volcano_framework::Snapshot::build(&now, &names).unwrap();
            let mut updated = kept.clone();
            let applied = updated.update(&changes(&before, &now), &now.priority_classes, &names).unwrap();
            if applied {
                let (a, b) = (snapshot_text(&updated), snapshot_text(&fresh));
                if a != b {
                    let diff = similar::TextDiff::from_lines(&b, &a).unified_diff().context_radius(3).to_string();
                    return Err(TestCaseError::fail(format!("cycle {cycle}: updated ≠ rebuilt\n{diff}\n--- input\n{yaml}")));
                }
                let (a, b) = (cycle_text(&updated, &profile), cycle_text(&fresh, &profile));
                if a != b {
                    let diff = similar::TextDiff::from_lines(&b, &a).unified_diff().context_radius(3).to_string();
                    return Err(TestCaseError::fail(format!("cycle {cycle}: a cycle decides differently on the updated snapshot\n{diff}\n--- input\n{yaml}")));
                }
                kept = updated;
            } else {
                kept = fresh;
            }
            before = now;
        }
    }
}

/// The placements of a cycle (binds, evictions, pipelines), sorted.
fn placements(out: &volcano_framework::CycleOutcome) -> Vec<String> {
    use volcano_framework::Effect;
    let mut v: Vec<String> = (out.effects.iter())
        .filter(|e| matches!(e, Effect::Bind { .. } | Effect::Evict { .. } | Effect::Pipeline { .. }))
        .map(|e| format!("{e:?}"))
        .collect();
    v.sort();
    v
}

/// A job skipped because no node gained room since it failed (a room proof,
/// `volcano_framework::session::retry`) would fail again: a cycle over a kept snapshot,
/// with what the last cycle remembered and brought up to date with what changed (binds,
/// pods finishing, pods and PodGroups going, some binds not yet seen), places exactly
/// what a cycle over a fresh snapshot of the same objects places. Some cases must skip
/// jobs by their proofs, or the property says nothing.
#[test]
fn a_job_skipped_by_its_room_proof_would_fail_again() {
    let config = ProptestConfig {
        cases: 128,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x726f_6f6d),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let proven = std::cell::Cell::new(0u64);
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&(arb_cluster_of(14), any::<u64>()), |((cluster, config), seed)| {
        let yaml = cluster.expand().to_yaml();
        let reg = registries();
        let load = || {
            if CONFIGS[config].is_empty() {
                Profile::builtin_default(&reg)
            } else {
                Profile::from_yaml(CONFIGS[config], &reg)
            }
            .unwrap()
        };
        let mut manifest = Manifest::new();
        manifest.load_str("generated.yaml", &yaml).unwrap();
        let mut sim = Simulator::new(manifest, load()).unwrap();
        let profile = load();
        let names = ["volcano-rs"];
        let cx =
            volcano_framework::CycleContext { cycle: 1, now_ms: 1_700_000_000_000, options: SessionOptions::default() };
        let mut before = sim.cluster().objects();
        let mut kept = volcano_framework::Snapshot::build(&before, &names).unwrap();
        for cycle in 0..8u64 {
            let remembered =
                volcano_framework::run_cycle(kept.clone(), &profile, &cx, &mut volcano_framework::NoObserver);
            let fresh = volcano_framework::Snapshot::build(&before, &names).unwrap();
            let tried = volcano_framework::run_cycle(fresh, &profile, &cx, &mut volcano_framework::NoObserver);
            prop_assert_eq!(
                placements(&remembered),
                placements(&tried),
                "cycle {}: skipping placed differently\n--- input\n{}",
                cycle,
                yaml
            );
            if kept.retries().is_some_and(|m| m.revision() != kept.revision()) {
                proven.set(proven.get() + remembered.metrics.skipped_tries);
            }
            kept.keep_retries(remembered.retries.clone());
            if sim.step().is_err() {
                break;
            }
            // Now and then pods and PodGroups go, or the binds of the step are not seen yet.
            let all = sim.cluster().objects();
            let now = match (seed >> (2 * cycle)) & 3 {
                0 => some_of(&all, seed ^ cycle),
                1 => before.clone(),
                2 => some_finished(&all, seed ^ cycle),
                _ => all,
            };
            if !kept.update(&changes(&before, &now), &now.priority_classes, &names).unwrap() {
                kept = volcano_framework::Snapshot::build(&now, &names).unwrap();
            }
            before = now;
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(proven.get() > 20, "jobs skipped by a room proof over all cases: {}", proven.get());
}

prop_compose! {
    /// A Volcano Job of one task in queue `q0` whose pods run `secs` seconds once bound.
    fn arb_volcano_job(i: usize)(replicas in 1i32..4, min in 1i32..4, cpu in 1i64..3, secs in 0u32..4) -> String {
        format!(
            "---\napiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: vj{i}, namespace: default}}\n\
             spec:\n  minAvailable: {}\n  queue: q0\n  tasks:\n  - name: t\n    replicas: {replicas}\n    template:\n\
             \x20     metadata: {{annotations: {{volcano-rs.io/run-seconds: \"{secs}\"}}}}\n\
             \x20     spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]}}\n",
            min.min(replicas)
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7369_6d75), failure_persistence: None, .. ProptestConfig::default() })]

    /// The simulator keeps its snapshot between cycles and brings it up to date in place,
    /// as the kube backend does: after every simulated cycle (effects applied, pods finished,
    /// the job controller's pods created and deleted, jobs completed), the snapshot the next
    /// cycle gets that way is the one a fresh build gives, up to numbering, and a cycle
    /// decides the same on both; and the update path, not a rebuild, is what ran.
    #[test]
    fn the_simulators_updated_snapshot_is_a_rebuilt_one(
        (cluster, config) in arb_cluster(),
        jobs in proptest::collection::vec(0usize..1, 0..3).prop_flat_map(|v| (0..v.len()).map(arb_volcano_job).collect::<Vec<_>>()),
    ) {
        let mut yaml = cluster.expand().to_yaml();
        for j in &jobs {
            yaml.push_str(j);
        }
        let reg = registries();
        let profile = || if CONFIGS[config].is_empty() { Profile::builtin_default(&reg) } else { Profile::from_yaml(CONFIGS[config], &reg) }.unwrap();
        let mut manifest = Manifest::new();
        manifest.load_str("generated.yaml", &yaml).unwrap();
        let mut sim = Simulator::new(manifest, profile()).unwrap();
        let names = ["volcano-rs"];
        let mut rebuilt = 0;
        for cycle in 0..8 {
            if sim.step().is_err() {
                break;
            }
            let mut next = sim.cluster().clone();
            let (rebuilds_before, _) = next.snapshot_counts();
            let updated = next.snapshot(&names).unwrap();
            rebuilt += next.snapshot_counts().0 - rebuilds_before;
            let fresh = volcano_framework::Snapshot::build(&sim.cluster().objects(), &names).unwrap();
            let (a, b) = (snapshot_text(&updated), snapshot_text(&fresh));
            if a != b {
                let diff = similar::TextDiff::from_lines(&b, &a).unified_diff().context_radius(3).to_string();
                return Err(TestCaseError::fail(format!("after cycle {cycle}: updated ≠ rebuilt\n{diff}\n--- input\n{yaml}")));
            }
            let (a, b) = (cycle_text(&updated, &profile()), cycle_text(&fresh, &profile()));
            if a != b {
                let diff = similar::TextDiff::from_lines(&b, &a).unified_diff().context_radius(3).to_string();
                return Err(TestCaseError::fail(format!("after cycle {cycle}: a cycle decides differently on the updated snapshot\n{diff}\n--- input\n{yaml}")));
            }
        }
        // Small clusters never change more than a rebuild costs, nor add nodes or queues:
        // every snapshot after a cycle was the kept one, updated in place.
        prop_assert_eq!(rebuilt, 0, "--- input\n{}", yaml);
    }
}

/// The cluster under a HyperNode tree (leaves of two nodes by name, spines of two leaves;
/// the last node in none when the count is odd), its jobs by position hard-constrained to
/// tier 1 or 2, soft, or unconstrained, as YAML.
fn with_hyper_nodes(mut e: volcano_testkit::scenario::Expanded) -> String {
    use volcano_api::crd::NetworkTopologySpec;
    for (i, pg) in e.pod_groups.iter_mut().enumerate() {
        pg.spec.network_topology = match i % 4 {
            0 => Some(NetworkTopologySpec {
                mode: Some("hard".into()),
                highest_tier_allowed: Some(1),
                highest_tier_name: None,
            }),
            1 => Some(NetworkTopologySpec {
                mode: Some("hard".into()),
                highest_tier_allowed: Some(2),
                highest_tier_name: None,
            }),
            2 => Some(NetworkTopologySpec {
                mode: Some("soft".into()),
                highest_tier_allowed: None,
                highest_tier_name: None,
            }),
            _ => None,
        };
    }
    let mut yaml = e.to_yaml();
    let names: Vec<String> = e.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    let leaves: Vec<&[String]> = names.chunks(2).filter(|c| c.len() == 2).collect();
    for (l, members) in leaves.iter().enumerate() {
        let members: String =
            members.iter().map(|m| format!("  - {{type: Node, selector: {{exactMatch: {{name: {m}}}}}}}\n")).collect();
        yaml.push_str(&format!(
            "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {{name: leaf{l}}}\n\
             spec:\n  tier: 1\n  members:\n{members}"
        ));
    }
    for s in 0..leaves.len().div_ceil(2) {
        let members: String = (2 * s..(2 * s + 2).min(leaves.len()))
            .map(|l| format!("  - {{type: HyperNode, selector: {{exactMatch: {{name: leaf{l}}}}}}}\n"))
            .collect();
        yaml.push_str(&format!(
            "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata: {{name: spine{s}}}\n\
             spec:\n  tier: 2\n  members:\n{members}"
        ));
    }
    yaml
}

/// The GPU configuration with `network-topology-aware` (its HyperNode binpack of GPUs).
const NETWORK_TOPOLOGY_CONFIG: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
  - name: network-topology-aware
    arguments:
      hypernode.binpack.resources: nvidia.com/gpu
"#;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6e74_6f70), failure_persistence: None, .. ProptestConfig::default() })]

    /// The plugin's batch partition by lowest HyperNode (which lets allocate's search
    /// within a HyperNode go through the node index) changes no placement.
    #[test]
    fn network_topology_node_index_matches_a_full_scan((cluster, _config) in arb_cluster_of(17)) {
        let yaml = with_hyper_nodes(cluster.expand());
        let base = simulate(&yaml, NETWORK_TOPOLOGY_CONFIG, SessionOptions::default()).map_err(TestCaseError::fail)?;
        let scan = simulate(&yaml, NETWORK_TOPOLOGY_CONFIG, SessionOptions { node_index: false, ..Default::default() })
            .map_err(TestCaseError::fail)?;
        prop_assert_eq!(&base, &scan, "node index vs full scan differ\n--- input\n{}", yaml);
    }
}

/// An input on which the node index and a full scan once disagreed (found by the property
/// test below while sub-groups were added; the input has no sub-groups): with the Helm-like
/// configuration, the fit errors of pod `j3-0` differed (the scan's message had an empty
/// `Insufficient ` entry, the index's an `untolerated taint` entry the scan's lacked). The
/// dumped input does not reproduce it (checked 20 times at commit 2099f62): kept as a
/// regression test of that input; the property test keeps looking for the rest.
#[test]
fn evictions_fit_errors_index_vs_scan_input() {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/regressions/evictions-index-vs-scan-fit-errors.yaml"
    ))
    .expect("the input");
    index_matches_a_full_scan(&yaml, 1).expect("node index and full scan agree");
}
