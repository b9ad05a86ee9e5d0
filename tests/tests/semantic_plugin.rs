//! A plugin that implements only semantic hooks (a predicate, a node score and event
//! handlers) is correct by construction: the node index makes no assumption about it and
//! falls back to exact evaluation, so random clusters get the same placements with the
//! index on as with a full scan.
//!
//! The plugin's answers read what the index cannot know from a task's shape: the task's job
//! and name, and what the session placed so far. The same plugin with a wrong
//! [`Incremental`] promise (that its answers depend on the shape only) changes placements
//! on some of the same clusters: the property is strong enough to catch a broken fallback.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::Value;
use volcano_api::conf::PluginOption;
use volcano_framework::{
    ArgsError, Hooks, Incremental, JobId, NodeId, Plugin, PluginBuilder, Profile, SessionContext, SessionOptions,
    Snapshot, Status, TaskId,
};
use volcano_sim::{Manifest, Simulator};
use volcano_testkit::scenario::{Cluster, JobSpec, NodeSpec, PodShape, Quantity};

/// Spreads each job: a task does not go where its job already has a pod placed in this
/// session, unless its name ends in an even digit; prefers nodes by a hash of the task's
/// and node's names.
#[derive(Default)]
struct JobSpread {
    /// (job, node) pairs placed in this session.
    placed: HashSet<(JobId, NodeId)>,
    /// Whether to (wrongly) promise shape-local answers.
    promise: bool,
}

impl Plugin for JobSpread {
    fn name(&self) -> &'static str {
        if self.promise {
            "job-spread-promising"
        } else {
            "job-spread"
        }
    }

    fn hooks(&self) -> Hooks {
        Hooks::PREDICATE | Hooks::NODE_ORDER | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, _snap: &Snapshot, _ctx: &SessionContext) {
        self.placed.clear();
    }

    fn predicate(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Result<(), Status> {
        let t = snap.task(task);
        let even = t.key.chars().last().and_then(|c| c.to_digit(10)).is_some_and(|d| d % 2 == 0);
        match t.job {
            Some(j) if !even && self.placed.contains(&(j, node)) => {
                Err(Status::unschedulable("job-spread", "the job already has a pod here"))
            }
            _ => Ok(()),
        }
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let (t, n) = (snap.task(task), snap.node(node));
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in t.key.bytes().chain(n.name.bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        (h % 7) as f64
    }

    fn on_allocate(&mut self, snap: &Snapshot, task: TaskId) {
        let t = snap.task(task);
        if let (Some(j), Some(n)) = (t.job, t.node) {
            self.placed.insert((j, n));
        }
    }

    fn on_deallocate(&mut self, snap: &Snapshot, task: TaskId) {
        let t = snap.task(task);
        if let (Some(j), Some(n)) = (t.job, t.node) {
            self.placed.remove(&(j, n));
        }
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        if self.promise {
            Some(self)
        } else {
            None
        }
    }
}

/// The wrong promise: answers depend on the task's shape only.
impl Incremental for JobSpread {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        true
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        true
    }
}

fn semantic(_: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    Ok(Arc::new(|| Box::new(JobSpread::default()) as Box<dyn Plugin>))
}

fn promising(_: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    Ok(Arc::new(|| Box::new(JobSpread { promise: true, ..JobSpread::default() }) as Box<dyn Plugin>))
}

fn config(plugin: &str) -> String {
    format!(
        r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: {plugin}
"#
    )
}

fn simulate(yaml: &str, plugin: &str, node_index: bool) -> Value {
    let mut reg = volcano_builtin::registries();
    reg.plugins.register("job-spread", semantic).expect("new name");
    reg.plugins.register("job-spread-promising", promising).expect("new name");
    let profile = Profile::from_yaml(&config(plugin), &reg).expect("valid configuration");
    let mut manifest = Manifest::new();
    manifest.load_str("generated.yaml", yaml).expect("valid manifests");
    let mut sim = Simulator::new(manifest, profile).expect("valid cluster");
    sim.set_session_options(SessionOptions { node_index, ..Default::default() });
    sim.run(Some(3)).expect("runs");
    sim.report().to_json_value()
}

fn q(v: i64) -> Quantity {
    Quantity::Int(v)
}

prop_compose! {
    fn arb_cluster()(
        nodes in prop::collection::vec((2i64..8, 4i64..32, 0..2u8), 3..12),
        jobs in prop::collection::vec((1u32..6, 1i64..3, 1i64..4, 1i32..4), 1..8),
    ) -> Cluster {
        Cluster {
            nodes: nodes
                .into_iter()
                .enumerate()
                .map(|(i, (cpu, mem, zone))| NodeSpec {
                    name: format!("n{i:02}"),
                    count: None,
                    cpu: q(cpu),
                    memory: Quantity::Str(format!("{mem}Gi")),
                    gpu: None,
                    pods: None,
                    resources: BTreeMap::new(),
                    labels: [("zone".to_string(), format!("z{zone}"))].into_iter().collect(),
                    taints: vec![],
                    unschedulable: false,
                })
                .collect(),
            queues: vec![],
            priority_classes: BTreeMap::new(),
            jobs: jobs
                .into_iter()
                .enumerate()
                .map(|(i, (replicas, cpu, mem, min))| JobSpec {
                    name: format!("j{i}"),
                    namespace: None,
                    queue: None,
                    min_member: Some(min.min(replicas as i32)),
                    replicas: Some(replicas),
                    tasks: vec![],
                    phase: Some(volcano_api::crd::PodGroupPhase::Inqueue),
                    priority_class: None,
                    min_resources: None,
                    running: vec![],
                    annotations: BTreeMap::new(),
                    network_topology: None,
                    sub_group_policy: None,
                    partition_size: None,
                    created: None,
                    pod: PodShape {
                        cpu: Some(q(cpu)),
                        memory: Some(Quantity::Str(format!("{mem}Gi"))),
                        ..Default::default()
                    },
                })
                .collect(),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(0x7365_6d61), failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn a_plugin_with_only_semantic_hooks_places_as_a_full_scan(cluster in arb_cluster()) {
        let yaml = cluster.expand().to_yaml();
        let indexed = simulate(&yaml, "job-spread", true);
        let scanned = simulate(&yaml, "job-spread", false);
        prop_assert_eq!(&indexed, &scanned, "node index vs full scan differ\n--- input\n{}", yaml);
    }
}

/// The property above is not vacuous: with the wrong promise, the index answers from a
/// shape's class and places some pods where a scan would not.
#[test]
fn a_wrong_promise_is_caught_by_the_same_property() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x7365_6d61),
        ..ProptestConfig::default()
    });
    let mut differing = 0;
    for _ in 0..48 {
        let cluster = arb_cluster().new_tree(&mut runner).expect("a cluster").current();
        let yaml = cluster.expand().to_yaml();
        if simulate(&yaml, "job-spread-promising", true) != simulate(&yaml, "job-spread-promising", false) {
            differing += 1;
        }
    }
    assert!(differing > 0, "a wrong shape-local promise changed no placement on 48 random clusters");
}
