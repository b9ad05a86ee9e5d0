use super::*;

fn pod(name: &str, cpu: i64, num_gpu: u32, gpu_milli: u32) -> TracePod {
    TracePod { name: name.into(), cpu_milli: cpu, memory_mib: 1024, num_gpu, gpu_milli, gpu_spec: Vec::new() }
}

fn node(name: &str, gpus: u32, model: &str) -> TraceNode {
    TraceNode { name: name.into(), cpu_milli: 32_000, memory_mib: 262_144, gpus, model: model.into() }
}

#[test]
fn inflation_stops_before_the_draw_that_would_pass_the_limit() {
    // One pod of one GPU on a 10-GPU cluster: 13 pods make 1.3 × 10 GPUs exactly.
    let order = inflate(&[pod("a", 1000, 1, 1000)], 10, TUNE, 42);
    assert_eq!(order.len(), 13);
    // Every pod of the trace is there, in some order; the total stays under the limit.
    let pods = [pod("a", 1000, 1, 1000), pod("b", 1000, 1, 500), pod("c", 1000, 0, 0), pod("d", 1000, 4, 1000)];
    for seed in 42..52 {
        let order = inflate(&pods, 20, TUNE, seed);
        for i in 0..pods.len() {
            assert!(order.contains(&i), "seed {seed}: pod {i} of the trace is kept");
        }
        let total: u64 = order.iter().map(|&i| pods[i].gpu_request()).sum();
        assert!(total <= 26_000, "seed {seed}: {total} milli-GPU");
        assert_eq!(order, inflate(&pods, 20, TUNE, seed), "a seed gives one workload");
    }
    assert_ne!(inflate(&pods, 20, TUNE, 42), inflate(&pods, 20, TUNE, 43));
}

#[test]
fn the_curve_averages_alloc_over_the_pods_of_each_rounded_arrived() {
    // A 10-GPU cluster: arrived after each pod 4.5 %, 9.5 %, 10 %, 20 % → 5 (half away from
    // zero), 10, 10, 20.
    let requests = [450, 500, 50, 1000];
    let placed = [true, false, true, true];
    let c = curve(&requests, &placed, 10_000);
    assert_eq!(c[5], Some(4.5));
    // alloc 4.5 then 5.0 at x = 10.
    assert_eq!(c[10], Some((4.5 + 5.0) / 2.0));
    assert_eq!(c[20], Some(15.0));
    assert_eq!(c[0], None);
    assert_eq!(c.len(), MAX_ARRIVED + 1);
    let (mean, sd) = mean_sd(&[1.0, 3.0]);
    assert_eq!(mean, 2.0);
    assert!((sd - 2f64.sqrt()).abs() < 1e-12);
}

#[test]
fn a_malformed_row_is_reported_with_file_line_and_column() {
    let dir = std::env::temp_dir().join(format!("openb-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("openb_pod_list_bad.csv");
    std::fs::write(&path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,lots,1024,1,500\n")
        .unwrap();
    let err = read_pods(&path).unwrap_err().to_string();
    assert_eq!(err, format!("{}:3: column cpu_milli: \"lots\" is not a whole number of millicores", path.display()));
    std::fs::write(&path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,500\n").unwrap();
    let err = read_pods(&path).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}:2: column gpu_milli: 500 with num_gpu 2", path.display())), "{err}");
    std::fs::write(&path, "name,cpu,memory_mib,num_gpu,gpu_milli\n").unwrap();
    let err = read_pods(&path).unwrap_err().to_string();
    assert!(err.contains(":1: the header has no column \"cpu_milli\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn small_trace() -> Trace {
    Trace {
        name: "small".into(),
        nodes: vec![node("n0", 2, "T4"), node("n1", 4, "V100M16"), node("n2", 8, "V100M32")],
        pods: vec![
            pod("a", 4000, 1, 500),
            pod("b", 4000, 1, 300),
            pod("c", 8000, 2, 1000),
            pod("d", 2000, 0, 0),
            TracePod { gpu_spec: vec!["T4".into()], ..pod("e", 2000, 1, 700) },
            pod("f", 16000, 8, 1000),
            pod("g", 4000, 1, 200),
        ],
    }
}

#[test]
fn each_policy_places_within_the_cards_and_the_model_constraints() {
    let trace = small_trace();
    for policy in POLICIES {
        let profile = policy_profile(policy, 42).unwrap();
        let r = run_with(&trace, &profile, 42, policy == "random").unwrap();
        let order = inflate(&trace.pods, trace.total_gpus(), TUNE, 42);
        for (i, node) in r.nodes.iter().enumerate() {
            if trace.pods[order[i]].name == "e" {
                assert!(node.as_deref().is_none_or(|n| n == "n0"), "{policy}: e asks for a T4");
            }
        }
        let alloc: u64 = r.requests.iter().zip(&r.nodes).filter(|(_, n)| n.is_some()).map(|(r, _)| r).sum();
        assert!(alloc <= trace.total_gpus() * 1000, "{policy}: no card over its share");
    }
}

#[test]
fn node_names_rank_the_nodes_in_an_order_drawn_per_seed() {
    let nodes: Vec<TraceNode> = (0..50).map(|i| node(&format!("openb-node-{i:04}"), 2, "T4")).collect();
    let names = node_names(&nodes, 42);
    // Each name is a rank and the trace's name; the ranks are 0..n once each.
    let mut ranks: Vec<usize> = names
        .iter()
        .zip(&nodes)
        .map(|(name, n)| {
            let (rank, rest) = name.split_once('-').unwrap();
            assert_eq!(rest, n.name);
            assert_eq!(rank.len(), 4);
            rank.parse().unwrap()
        })
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, (0..50).collect::<Vec<_>>());
    // Sorted by name (the scheduler's tie-break) they are not in the trace's order; a seed
    // gives one order, another seed another.
    let mut sorted = names.clone();
    sorted.sort();
    assert_ne!(sorted, names);
    assert_eq!(names, node_names(&nodes, 42));
    assert_ne!(names, node_names(&nodes, 43));
    // The workload of a seed does not depend on the nodes' order.
    let pods = [pod("a", 1000, 1, 1000), pod("b", 1000, 1, 500)];
    assert_eq!(inflate(&pods, 20, TUNE, 42), inflate(&pods, 20, TUNE, 42));
}

#[test]
fn replay_places_pods_as_simulate_does() {
    let trace = small_trace();
    let order = inflate(&trace.pods, trace.total_gpus(), TUNE, 7);
    let names = node_names(&trace.nodes, 7);
    let objects = objects(&trace, &names, &order);
    let yaml = manifests(&objects).unwrap();
    for policy in ["bestfit", "fragmentation"] {
        let replayed = run(&trace, &policy_profile(policy, 7).unwrap(), 7).unwrap();
        let mut manifest = volcano_sim::Manifest::new();
        manifest.load_str("openb.yaml", &yaml).unwrap();
        let mut sim = volcano_sim::Simulator::new(manifest, policy_profile(policy, 7).unwrap()).unwrap();
        sim.run(Some(1)).unwrap();
        let binds: std::collections::HashMap<String, String> =
            sim.history()[0].binds.iter().map(|p| (p.pod.clone(), p.node.clone())).collect();
        for (pod, node) in objects.pods.iter().zip(&replayed.nodes) {
            let key = format!("{NAMESPACE}/{}", pod.metadata.name.as_deref().unwrap());
            // The replay reports the trace's names; the simulator, the run's.
            let run_name = node.as_deref().map(|n| {
                let i = trace.nodes.iter().position(|t| t.name == n).unwrap();
                names[i].as_str()
            });
            assert_eq!(binds.get(&key).map(String::as_str), run_name, "{policy}: {key}");
        }
        assert!(replayed.nodes.iter().any(Option::is_some));
    }
}
