//! The heterogeneous cluster of issue 12 (`hetero-1k`, `hetero-5k`, `hetero-10k`,
//! `hetero-10k-idle`; docs/performance.md): four node types, taints, zone and rack labels,
//! four running pods per node and eight pending gang pods per node in hundreds of shapes.
//!
//! Everything is a function of an index (node `i`, running pod `k`, job `j`), so that the
//! text of docs/performance.md is enough to build the same objects.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus, Pod,
    PodSpec, PreferredSchedulingTerm, Taint, Toleration,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use volcano_api::crd::{PodGroup, PodGroupSpec};
use volcano_framework::pod::SpecInterner;
use volcano_framework::ClusterObjects;

use crate::workloads::{self, container, q, time, HOSTNAME_KEY, OTHER_SCHEDULER_NAME, SCHEDULER_NAME, SIZES, ZONE_KEY};

/// The node label of a node's type (`a100`, `h100`, `l40`, `cpu`).
pub const NODE_TYPE_KEY: &str = "volcano.sh/node-type";
/// The node label of a GPU node's model (`A100`, `H100`, `L40`).
pub const GPU_MODEL_KEY: &str = "volcano.sh/gpu-model";
/// The node label of a node's rack (`rack-{i div 20:03}`).
pub const RACK_KEY: &str = "volcano.sh/rack";
/// The node label of the CPU architecture (`amd64` on every node).
pub const ARCH_KEY: &str = "kubernetes.io/arch";
/// The `NoSchedule` taint of the inference nodes (`l40`), value `true`.
pub const INFERENCE_TAINT: &str = "volcano.sh/inference";
/// The `PreferNoSchedule` taint of 5 % of the nodes, value `planned`.
pub const MAINTENANCE_TAINT: &str = "volcano.sh/maintenance";
/// The GPU resource.
pub const GPU: &str = "nvidia.com/gpu";
/// Nodes per rack: one of each position `i mod 20`.
pub const RACK_SIZE: usize = 20;
/// Namespaces of the case: `team-0` … `team-7`.
pub const NAMESPACES: usize = 8;
/// Running pods per node.
pub const RUNNING_PER_NODE: usize = 4;
/// Pending pods per node (`P` of the pending gangs is 8 × N).
pub const PENDING_PER_NODE: usize = 8;

/// The PriorityClasses of the issue-12 cases: `bench-low` 100, `bench-medium` 1,000,
/// `bench-high` 10,000, none the global default.
pub const PRIORITY_CLASSES: [(&str, i32); 3] = [("bench-low", 100), ("bench-medium", 1_000), ("bench-high", 10_000)];

/// The PriorityClass objects of [`PRIORITY_CLASSES`].
pub fn priority_classes() -> Vec<PriorityClass> {
    PRIORITY_CLASSES
        .iter()
        .map(|(name, value)| PriorityClass {
            metadata: ObjectMeta {
                name: Some((*name).into()),
                creation_timestamp: Some(time(1_600_000_000)),
                ..Default::default()
            },
            value: *value,
            ..Default::default()
        })
        .collect()
}

/// The value of a PriorityClass of [`PRIORITY_CLASSES`].
pub fn priority_value(class: &str) -> i32 {
    PRIORITY_CLASSES.iter().find(|(n, _)| *n == class).map(|(_, v)| *v).expect("a bench priority class")
}

/// The four node types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    /// 8 × A100: positions 0–6 of a rack (35 %).
    A100,
    /// 8 × H100: positions 7–11 (25 %).
    H100,
    /// 4 × L40, tainted `volcano.sh/inference=true:NoSchedule`: positions 12–14 (15 %).
    L40,
    /// CPU only: positions 15–19 (25 %).
    Cpu,
}

impl NodeType {
    /// The type of node `i`, by its position `i mod 20` in its rack.
    pub fn of(i: usize) -> NodeType {
        match i % RACK_SIZE {
            0..=6 => NodeType::A100,
            7..=11 => NodeType::H100,
            12..=14 => NodeType::L40,
            _ => NodeType::Cpu,
        }
    }

    /// The value of the `volcano.sh/node-type` label.
    pub fn label(self) -> &'static str {
        match self {
            NodeType::A100 => "a100",
            NodeType::H100 => "h100",
            NodeType::L40 => "l40",
            NodeType::Cpu => "cpu",
        }
    }

    /// The value of the `volcano.sh/gpu-model` label (none for CPU nodes).
    pub fn gpu_model(self) -> Option<&'static str> {
        match self {
            NodeType::A100 => Some("A100"),
            NodeType::H100 => Some("H100"),
            NodeType::L40 => Some("L40"),
            NodeType::Cpu => None,
        }
    }

    /// Allocatable (and capacity): cpu, memory, GPUs; `pods: 110` on every node.
    pub fn allocatable(self) -> (u32, &'static str, u32) {
        match self {
            NodeType::A100 => (128, "1024Gi", 8),
            NodeType::H100 => (192, "2048Gi", 8),
            NodeType::L40 => (64, "512Gi", 4),
            NodeType::Cpu => (128, "512Gi", 0),
        }
    }
}

/// Whether node `i` carries the `PreferNoSchedule` taint: `(i mod 20 + i div 20) mod 20 = 0`,
/// one node per rack of 20 (5 %), at a position that moves with the rack.
pub fn maintenance_tainted(i: usize) -> bool {
    (i % RACK_SIZE + i / RACK_SIZE).is_multiple_of(RACK_SIZE)
}

fn resources(cpu: u32, memory: &str, gpu: u32) -> BTreeMap<String, Quantity> {
    let mut m: BTreeMap<String, Quantity> =
        [("cpu".to_string(), q(&cpu.to_string())), ("memory".to_string(), q(memory))].into_iter().collect();
    if gpu > 0 {
        m.insert(GPU.into(), q(&gpu.to_string()));
    }
    m
}

/// Node `i` of cluster `hetero-N`.
pub fn node(i: usize) -> Node {
    let t = NodeType::of(i);
    let rack = i / RACK_SIZE;
    let name = format!("node-{i:05}");
    let (cpu, memory, gpu) = t.allocatable();
    let mut alloc = resources(cpu, memory, gpu);
    alloc.insert("pods".into(), q("110"));
    let mut labels: BTreeMap<String, String> = [
        (HOSTNAME_KEY.to_string(), name.clone()),
        (ZONE_KEY.to_string(), format!("zone-{}", rack % 4)),
        (RACK_KEY.to_string(), format!("rack-{rack:03}")),
        (NODE_TYPE_KEY.to_string(), t.label().to_string()),
        (ARCH_KEY.to_string(), "amd64".to_string()),
    ]
    .into_iter()
    .collect();
    if let Some(model) = t.gpu_model() {
        labels.insert(GPU_MODEL_KEY.into(), model.into());
    }
    let mut taints = Vec::new();
    if t == NodeType::L40 {
        taints.push(Taint {
            key: INFERENCE_TAINT.into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    }
    if maintenance_tainted(i) {
        taints.push(Taint {
            key: MAINTENANCE_TAINT.into(),
            value: Some("planned".into()),
            effect: "PreferNoSchedule".into(),
            ..Default::default()
        });
    }
    Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        spec: Some(NodeSpec { taints: (!taints.is_empty()).then_some(taints), ..Default::default() }),
        status: Some(NodeStatus { allocatable: Some(alloc.clone()), capacity: Some(alloc), ..Default::default() }),
    }
}

fn toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    }
}

/// The queue of namespace `team-n`: `q{n mod 4}` (the standard queues).
fn queue_of_namespace(n: usize) -> String {
    format!("q{}", n % 4)
}

/// Running pod `k` (k in 0..4N) of `hetero-N`: `run-{k:06}` on node `k mod N`, slot
/// `u = k div N`; its requests depend on the node's type and the slot; `default-scheduler`'s
/// when `u = 1`, else volcano-rs's in a PodGroup of its own named like the pod.
pub fn running_pod(k: usize, nodes: usize) -> Pod {
    let i = k % nodes;
    let u = k / nodes;
    let t = NodeType::of(i);
    let name = format!("run-{k:06}");
    let ns = k % NAMESPACES;
    let request = match t {
        NodeType::A100 | NodeType::H100 if u < 2 => resources(8, "64Gi", 1),
        NodeType::A100 | NodeType::H100 => resources(8, "32Gi", 0),
        NodeType::L40 if u == 0 => resources(4, "32Gi", 1),
        NodeType::L40 => resources(4, "16Gi", 0),
        NodeType::Cpu => resources(16, "64Gi", 0),
    };
    let ours = u != 1;
    let tolerations = (t == NodeType::L40).then(|| vec![toleration(INFERENCE_TAINT, "NoSchedule")]);
    let spec = PodSpec {
        scheduler_name: Some(if ours { SCHEDULER_NAME } else { OTHER_SCHEDULER_NAME }.into()),
        node_name: Some(format!("node-{i:05}")),
        priority_class_name: Some("bench-low".into()),
        priority: Some(priority_value("bench-low")),
        tolerations,
        containers: vec![container(request)],
        ..Default::default()
    };
    let group = ours.then_some(name.as_str());
    let (namespace, uid, created) = (format!("team-{ns}"), format!("hetero-{name}"), time(1_650_000_000 + k as i64));
    workloads::member_pod(name.clone(), namespace, uid, group, created, spec)
}

/// The PodGroup of running pod `k` (volcano-rs's pods only, `k div N ≠ 1`): `run-{k:06}` in
/// the pod's namespace, queue of the namespace, `minMember` 1, phase Running with one pod
/// running, `priorityClassName: bench-low`.
pub fn running_pod_group(k: usize) -> PodGroup {
    let name = format!("run-{k:06}");
    let ns = k % NAMESPACES;
    let spec = PodGroupSpec {
        min_member: 1,
        queue: Some(queue_of_namespace(ns)),
        priority_class_name: Some("bench-low".into()),
        ..Default::default()
    };
    let created = time(1_650_000_000 + k as i64);
    workloads::pod_group(&name, &format!("team-{ns}"), format!("hetero-pg-{name}"), spec, created, Some(1))
}

/// The requests of a worker pod of request variant `v = j mod 7`: cpu, memory (Gi), GPUs.
pub fn worker_request(v: usize) -> (u32, u32, u32) {
    match v {
        0 => (8, 64, 1),
        1 => (16, 128, 2),
        2 => (32, 256, 4),
        3 => (4, 32, 1),
        4 => (2, 8, 0),
        5 => (8, 32, 0),
        _ => (16, 64, 0),
    }
}

/// The pending jobs repeat their constraints with this period: job `j` has those of
/// `c = j mod 455` (455 = 5 × 7 × 13), so that every size from `hetero-1k` on has the same
/// set of shapes.
pub const SHAPE_PERIOD: usize = 455;

/// The constraint indices of job `j`, from `c = j mod 455`: request variant `v = c mod 7`,
/// node selector `s = c mod 5`, tolerations `t = c mod 3`, required node affinity
/// `r = c mod 11`, preferred node affinity `p = c mod 13`.
pub fn variants(j: usize) -> (usize, usize, usize, usize, usize) {
    let c = j % SHAPE_PERIOD;
    (c % 7, c % 5, c % 3, c % 11, c % 13)
}

fn req(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(requirements: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm { match_expressions: Some(requirements), ..Default::default() }
}

/// The spec of the pods of job `j` but for their requests (the same for every pod of the
/// job): node selector, tolerations, node affinity, priority.
fn pending_spec(j: usize) -> PodSpec {
    let (v, s, t, r, p) = variants(j);
    let c = j % SHAPE_PERIOD;
    let gpu = worker_request(v).2 > 0;
    let zone = |x: usize| format!("zone-{}", x % 4);
    let selector: Vec<(&str, String)> = match (s, gpu) {
        (0, _) => vec![],
        (1, _) => vec![(ZONE_KEY, zone(c / 5))],
        (2, true) => vec![(GPU_MODEL_KEY, "A100".into())],
        (3, true) => vec![(GPU_MODEL_KEY, "H100".into())],
        (4, true) => vec![(GPU_MODEL_KEY, "L40".into())],
        (2, false) => vec![(NODE_TYPE_KEY, "cpu".into())],
        (3, false) => vec![(NODE_TYPE_KEY, "cpu".into()), (ZONE_KEY, zone(c / 5))],
        _ => vec![(ARCH_KEY, "amd64".into())],
    };
    let node_selector = (!selector.is_empty())
        .then(|| selector.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<BTreeMap<_, _>>());
    // The pods that select the L40 nodes tolerate their taint whatever `t` says.
    let inference = t >= 1 || (s == 4 && gpu);
    let mut tolerations = Vec::new();
    if inference {
        tolerations.push(toleration(INFERENCE_TAINT, "NoSchedule"));
    }
    if t == 2 {
        tolerations.push(toleration(MAINTENANCE_TAINT, "PreferNoSchedule"));
    }
    let required = match r {
        6..=8 => Some(vec![term(vec![req(ZONE_KEY, "In", &[&zone(r - 6), &zone(r - 5)])])]),
        9 if gpu => Some(vec![term(vec![req(GPU_MODEL_KEY, "In", &["A100", "H100"])])]),
        9 => Some(vec![term(vec![req(GPU_MODEL_KEY, "DoesNotExist", &[])])]),
        10 => Some(vec![
            term(vec![req(NODE_TYPE_KEY, "In", &["h100"])]),
            term(vec![req(ZONE_KEY, "In", &[&zone(c / 11)]), req(NODE_TYPE_KEY, "NotIn", &["l40"])]),
        ]),
        _ => None,
    };
    let preferred = match p {
        7..=10 => Some(vec![(50, term(vec![req(ZONE_KEY, "In", &[&zone(p - 7)])]))]),
        11 => Some(vec![
            (80, term(vec![req(NODE_TYPE_KEY, "In", &["h100"])])),
            (20, term(vec![req(NODE_TYPE_KEY, "In", &["a100"])])),
        ]),
        12 => Some(vec![(100, term(vec![req(RACK_KEY, "In", &[&format!("rack-{:03}", (c / 13) % 10)])]))]),
        _ => None,
    };
    let affinity = (required.is_some() || preferred.is_some()).then(|| Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: required
                .map(|terms| NodeSelector { node_selector_terms: terms }),
            preferred_during_scheduling_ignored_during_execution: preferred.map(|terms| {
                terms.into_iter().map(|(weight, preference)| PreferredSchedulingTerm { weight, preference }).collect()
            }),
        }),
        ..Default::default()
    });
    let class = pending_priority_class(j);
    PodSpec {
        scheduler_name: Some(SCHEDULER_NAME.into()),
        node_selector,
        tolerations: (!tolerations.is_empty()).then_some(tolerations),
        affinity,
        priority_class_name: Some(class.into()),
        priority: Some(priority_value(class)),
        ..Default::default()
    }
}

/// The namespace index of pending job `j`: `(c div 8) mod 8` with `c = j mod 455`.
pub fn pending_namespace(j: usize) -> usize {
    (j % SHAPE_PERIOD / 8) % NAMESPACES
}

/// The PriorityClass of pending job `j`: `bench-low`, `bench-medium`, `bench-high` for
/// `(j div 8) mod 3` = 0, 1, 2.
pub fn pending_priority_class(j: usize) -> &'static str {
    PRIORITY_CLASSES[(j / 8) % 3].0
}

/// The request of pod `k` of a job of `size` pods with request variant `v`: a worker's, and
/// for the leader (`k = 0` of a job of two pods or more) 2 cpus and 8Gi more.
pub fn pod_request(v: usize, size: usize, k: usize) -> (u32, u32, u32) {
    let (cpu, mem, gpu) = worker_request(v);
    if k == 0 && size >= 2 {
        (cpu + 2, mem + 8, gpu)
    } else {
        (cpu, mem, gpu)
    }
}

/// Pending job `j` of `hetero-N`: `job-{j:06}`, `S[j mod 8]` pods, in namespace
/// `team-{(c div 8) mod 8}` (`c = j mod 455`) and that namespace's queue.
pub fn pending_job(j: usize) -> workloads::Job {
    let size = SIZES[j % 8] as usize;
    let (v, ..) = variants(j);
    let name = format!("job-{j:06}");
    let ns = pending_namespace(j);
    let namespace = format!("team-{ns}");
    let created = time(1_700_000_000 + j as i64);
    let spec = pending_spec(j);
    let (mut cpu, mut mem, mut gpu) = (0, 0, 0);
    for k in 0..size {
        let (c, m, g) = pod_request(v, size, k);
        (cpu, mem, gpu) = (cpu + c, mem + m, gpu + g);
    }
    let pg_spec = PodGroupSpec {
        min_member: size as i32,
        queue: Some(queue_of_namespace(ns)),
        priority_class_name: spec.priority_class_name.clone(),
        min_resources: Some(resources(cpu, &format!("{mem}Gi"), gpu)),
        ..Default::default()
    };
    let pg = workloads::pod_group(&name, &namespace, format!("hetero-pg-{name}"), pg_spec, created.clone(), None);
    let pods = (0..size)
        .map(|k| {
            let pod_name = format!("{name}-{k}");
            let (c, m, g) = pod_request(v, size, k);
            let spec = PodSpec { containers: vec![container(resources(c, &format!("{m}Gi"), g))], ..spec.clone() };
            let uid = format!("hetero-{pod_name}");
            workloads::member_pod(pod_name, namespace.clone(), uid, Some(&name), created.clone(), spec)
        })
        .collect();
    workloads::Job { pod_group: pg, pods }
}

/// The objects of `hetero-N`: `nodes` nodes, 4 running pods per node (and the PodGroups of
/// volcano-rs's), pending jobs generated in order until the next would take the pending
/// pods above 8 × `nodes`, the standard queues `q0`…`q3` and `default`, and the three
/// PriorityClasses.
pub fn objects(nodes: usize) -> ClusterObjects {
    let jobs = workloads::jobs_up_to(0, PENDING_PER_NODE * nodes, pending_job);
    let mut o = workloads::objects(0, jobs);
    o.nodes = (0..nodes).map(|i| Arc::new(node(i))).collect();
    o.priority_classes = priority_classes().into_iter().map(Arc::new).collect();
    let running = RUNNING_PER_NODE * nodes;
    o.pod_groups.extend((0..running).filter(|k| k / nodes != 1).map(|k| Arc::new(running_pod_group(k))));
    let mut specs = SpecInterner::new();
    o.pods.extend((0..running).map(|k| Arc::new(specs.pod(running_pod(k, nodes)))));
    o
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use volcano_framework::{Snapshot, TaskStatus};

    use super::*;

    #[test]
    fn nodes_follow_the_spec() {
        let types: Vec<NodeType> = (0..20).map(NodeType::of).collect();
        assert_eq!(types.iter().filter(|t| **t == NodeType::A100).count(), 7);
        assert_eq!(types.iter().filter(|t| **t == NodeType::H100).count(), 5);
        assert_eq!(types.iter().filter(|t| **t == NodeType::L40).count(), 3);
        assert_eq!(types.iter().filter(|t| **t == NodeType::Cpu).count(), 5);
        // 5 % PreferNoSchedule: one node per rack, at a moving position.
        assert_eq!((0..1000).filter(|i| maintenance_tainted(*i)).count(), 50);
        assert!(maintenance_tainted(0) && maintenance_tainted(39) && maintenance_tainted(58));
        let n = node(33); // rack 1, position 13: L40
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[ZONE_KEY], "zone-1");
        assert_eq!(labels[RACK_KEY], "rack-001");
        assert_eq!(labels[GPU_MODEL_KEY], "L40");
        assert_eq!(labels[HOSTNAME_KEY], "node-00033");
        let taints = n.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!((taints[0].key.as_str(), taints[0].effect.as_str()), (INFERENCE_TAINT, "NoSchedule"));
        let n = node(39); // rack 1, position 19: CPU, PreferNoSchedule
        assert!(!n.metadata.labels.as_ref().unwrap().contains_key(GPU_MODEL_KEY));
        let taints = n.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!((taints[0].key.as_str(), taints[0].effect.as_str()), (MAINTENANCE_TAINT, "PreferNoSchedule"));
        assert!(!n.status.as_ref().unwrap().allocatable.as_ref().unwrap().contains_key(GPU));
    }

    #[test]
    fn the_counts_follow_the_spec() {
        let o = objects(100);
        assert_eq!(o.nodes.len(), 100);
        let running = o.pods.iter().filter(|p| p.node_name().is_some()).count();
        assert_eq!(running, 400);
        let pending: usize = o.pods.len() - running;
        assert!(pending <= 800 && pending + 64 > 800, "{pending}");
        let others =
            o.pods.iter().filter(|p| p.spec.as_ref().unwrap().scheduler_name.as_deref() != Some(SCHEDULER_NAME));
        assert_eq!(others.count(), 100);
        // Running pod 150: node 50, slot 1 (default-scheduler), rack 2 position 10: H100.
        let r = running_pod(150, 100);
        assert_eq!(r.spec.as_ref().unwrap().node_name.as_deref(), Some("node-00050"));
        assert_eq!(r.spec.as_ref().unwrap().scheduler_name.as_deref(), Some(OTHER_SCHEDULER_NAME));
        // Job 7: 64 pods, v 0 (1 GPU), s 2 (A100), t 1 (inference), r 7, p 7; namespace
        // team-0, queue q0, bench-low. Its leader asks 2 cpus and 8Gi more.
        let job = pending_job(7);
        assert_eq!(job.pods.len(), 64);
        let spec = job.pods[1].spec.as_ref().unwrap();
        assert_eq!(spec.node_selector.as_ref().unwrap()[GPU_MODEL_KEY], "A100");
        assert_eq!(spec.tolerations.as_ref().unwrap().len(), 1);
        let na = spec.affinity.as_ref().unwrap().node_affinity.as_ref().unwrap();
        let required = &na.required_during_scheduling_ignored_during_execution.as_ref().unwrap().node_selector_terms;
        assert_eq!(required[0].match_expressions.as_ref().unwrap()[0].values.as_ref().unwrap(), &["zone-1", "zone-2"]);
        assert_eq!(na.preferred_during_scheduling_ignored_during_execution.as_ref().unwrap()[0].weight, 50);
        let requests = |k: usize| job.pods[k].spec.as_ref().unwrap().containers[0].resources.clone().unwrap().requests;
        assert_eq!(requests(0).unwrap()["cpu"], q("10"));
        assert_eq!(requests(1).unwrap()["cpu"], q("8"));
        assert_eq!(job.pod_group.spec.min_resources.as_ref().unwrap()[GPU], q("64"));
        assert_eq!(job.pod_group.spec.min_resources.as_ref().unwrap()["cpu"], q("514"));
        assert_eq!(job.pod_group.spec.queue.as_deref(), Some("q0"));
        assert_eq!(job.pod_group.metadata.namespace.as_deref(), Some("team-0"));
    }

    /// The distinct shapes of the pending pods of `hetero-1k`, as the snapshot counts them
    /// (same requests and the same scheduling constraints): at least 500.
    #[test]
    fn hetero_1k_has_at_least_500_pending_shapes() {
        let o = objects(1000);
        let snap = Snapshot::build(&o, &[SCHEDULER_NAME]).unwrap();
        let pending = || snap.tasks.iter().filter(|t| t.status == TaskStatus::Pending);
        let shapes: BTreeSet<u32> = pending().map(|t| t.shape).collect();
        assert_eq!(pending().count(), 7988);
        assert_eq!(shapes.len(), 853);
    }

    /// The shapes of the larger sizes are those of one period of 455 jobs (a job's
    /// constraints are those of `j mod 455`), each with a worker and a leader request: at
    /// most 910, whatever the size.
    #[test]
    fn the_shapes_repeat_with_the_period() {
        for j in [3, 100, 454] {
            let (a, b) = (pending_job(j), pending_job(j + 7 * SHAPE_PERIOD));
            let spec = |job: &workloads::Job| {
                let s = job.pods[0].spec.clone().unwrap();
                (s.node_selector, s.affinity, s.tolerations, job.pods[0].metadata.namespace.clone())
            };
            assert_eq!(spec(&a), spec(&b));
        }
    }
}
