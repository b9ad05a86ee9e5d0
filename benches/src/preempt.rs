//! The preemption cases (docs/performance.md): half of cluster `gpu-N` held by low-priority
//! elastic gangs in two leaves of a two-level `capacity` hierarchy of ten leaves, and
//! high-priority gangs in every leaf asking, together, for the whole cluster.
//!
//! `preempt-N` (issue 12): the victims are gangs of 16 pods on two nodes, half of each
//! above its `minMember`. `preempt-shared-N` (issue 38): two GPU models, victims of one
//! node each that may all go (`minMember` 1, `volcano.sh/preemptable`), in the leaves
//! `leaf-0` and `leaf-5` whose own high-priority gangs preempt them, and preemptors that
//! select a model.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use volcano_api::crd::{PodGroup, PodGroupSpec, Queue, QueueSpec, PREEMPTABLE_KEY};
use volcano_framework::ClusterObjects;

use crate::hetero::{priority_classes, priority_value, GPU};
use crate::workloads::{self, q, time, SCHEDULER_NAME, SIZES};

/// The tiers of the preemption cases, as a literal for `concat!`; `$drf` is `drf`'s
/// argument lines.
macro_rules! preempt_tiers {
    ($drf:expr) => {
        concat!(
            "tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
",
            $drf,
            "  - name: predicates
  - name: capacity
    enableHierarchy: true
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
"
        )
    };
}

/// `drf` with its preemptable vote off (as in the eviction scenarios).
macro_rules! drf_not_preemptable {
    () => {
        "    enablePreemptable: false\n"
    };
}

/// The scheduler configuration of the preemption cases: the standard one with the actions
/// `enqueue, allocate, preempt, reclaim, backfill`, `conformance` in tier 1, `drf`'s
/// preemptable vote off (as in the eviction scenarios), and `capacity` (hierarchy on) in
/// place of `proportion`.
pub const PREEMPT_CONF: &str =
    concat!("actions: \"enqueue, allocate, preempt, reclaim, backfill\"\n", preempt_tiers!(drf_not_preemptable!()));

/// [`PREEMPT_CONF`] with gang-aware eviction: actions `enqueue, allocate, gangpreempt,
/// gangreclaim, backfill` (`gang-preempt-10k`).
pub const GANG_PREEMPT_CONF: &str = concat!(
    "actions: \"enqueue, allocate, gangpreempt, gangreclaim, backfill\"\n",
    preempt_tiers!(drf_not_preemptable!())
);

/// The scheduler configuration of `preempt-shared-N`: [`PREEMPT_CONF`] with `drf`'s
/// preemptable vote on (its default), so that where the first tier finds no victim the
/// second tier's `drf` decides, as in a configuration that leaves `drf` as it comes.
pub const PREEMPT_SHARED_CONF: &str =
    concat!("actions: \"enqueue, allocate, preempt, reclaim, backfill\"\n", preempt_tiers!(""));

/// Leaf queues: `leaf-0` … `leaf-9`, `leaf-l` under `org-{l div 5}`.
pub const LEAVES: usize = 10;
/// Pods of a running low-priority gang (8 on each of two nodes).
pub const LOW_GANG: usize = 16;
/// `minMember` of a running low-priority gang: the other half may be evicted.
pub const LOW_MIN_MEMBER: usize = 8;

/// The resources of `parts` parts out of `of` of cluster `gpu-N` (cpu 96, memory 768Gi,
/// 8 GPUs per node): exact when `nodes × parts` is a multiple of `of`.
fn share(nodes: usize, parts: usize, of: usize) -> BTreeMap<String, Quantity> {
    [
        ("cpu".to_string(), q(&(96 * nodes * parts / of).to_string())),
        ("memory".to_string(), q(&format!("{}Gi", 768 * nodes * parts / of))),
        (GPU.to_string(), q(&(8 * nodes * parts / of).to_string())),
    ]
    .into_iter()
    .collect()
}

fn queue(
    name: &str,
    parent: Option<&str>,
    deserved: Option<BTreeMap<String, Quantity>>,
    capability: Option<BTreeMap<String, Quantity>>,
) -> Queue {
    let mut queue = Queue::new(
        name,
        QueueSpec {
            weight: Some(1),
            reclaimable: Some(true),
            parent: parent.map(String::from),
            deserved,
            capability,
            ..Default::default()
        },
    );
    queue.metadata.creation_timestamp = Some(time(1_600_000_000));
    queue
}

/// The queues of `preempt-N`: `root` (no limits); `org-0`, `org-1` under it, each deserving
/// half of the cluster, capability the whole cluster; `leaf-0` … `leaf-9`, `leaf-l` under
/// `org-{l div 5}`, each deserving a tenth, capability half; and `default` (under `root`,
/// nothing deserved).
pub fn queues(nodes: usize) -> Vec<Queue> {
    let mut out = vec![queue("root", None, None, None)];
    for o in 0..2 {
        out.push(queue(&format!("org-{o}"), Some("root"), Some(share(nodes, 1, 2)), Some(share(nodes, 1, 1))));
    }
    for l in 0..LEAVES {
        let parent = format!("org-{}", l / 5);
        out.push(queue(&format!("leaf-{l}"), Some(&parent), Some(share(nodes, 1, 10)), Some(share(nodes, 1, 2))));
    }
    out.push(queue("default", None, None, None));
    out
}

fn gpu_pod_request() -> BTreeMap<String, Quantity> {
    [("cpu".to_string(), q("8")), ("memory".to_string(), q("64Gi")), (GPU.to_string(), q("1"))].into_iter().collect()
}

fn pod(name: &str, group: &str, class: &str, node: Option<String>, created: i64) -> Pod {
    pod_with(name, group, class, node, created, None)
}

fn pod_with(
    name: &str,
    group: &str,
    class: &str,
    node: Option<String>,
    created: i64,
    selector: Option<BTreeMap<String, String>>,
) -> Pod {
    let spec = PodSpec {
        node_selector: selector,
        scheduler_name: Some(SCHEDULER_NAME.into()),
        node_name: node,
        priority_class_name: Some(class.into()),
        priority: Some(priority_value(class)),
        containers: vec![workloads::container(gpu_pod_request())],
        ..Default::default()
    };
    workloads::member_pod(name.into(), "bench".into(), format!("preempt-{name}"), Some(group), time(created), spec)
}

fn pod_group(
    name: &str,
    queue: &str,
    class: &str,
    min_member: usize,
    running: Option<usize>,
    created: i64,
) -> PodGroup {
    let min_resources: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q(&(8 * min_member).to_string())),
        ("memory".to_string(), q(&format!("{}Gi", 64 * min_member))),
        (GPU.to_string(), q(&min_member.to_string())),
    ]
    .into();
    let spec = PodGroupSpec {
        min_member: min_member as i32,
        queue: Some(queue.into()),
        priority_class_name: Some(class.into()),
        min_resources: Some(min_resources),
        ..Default::default()
    };
    workloads::pod_group(name, "bench", format!("preempt-pg-{name}"), spec, time(created), running.map(|n| n as i32))
}

/// Running gang `g` (g in 0..N/4) of `preempt-N`: `low-{g:05}`, 16 pods `low-{g:05}-{k}` on
/// node `2g + k div 8` (the nodes `0 … N/2 − 1` full: 8 GPUs of 8), queue `leaf-0` when
/// `g < N/8`, else `leaf-5`, `bench-low`, `minMember` 8.
pub fn low_job(g: usize, nodes: usize) -> workloads::Job {
    let name = format!("low-{g:05}");
    let queue = if g < nodes / 8 { "leaf-0" } else { "leaf-5" };
    let created = 1_650_000_000 + g as i64;
    let pods = (0..LOW_GANG)
        .map(|k| pod(&format!("{name}-{k}"), &name, "bench-low", Some(format!("node-{:05}", 2 * g + k / 8)), created))
        .collect();
    workloads::Job { pod_group: pod_group(&name, queue, "bench-low", LOW_MIN_MEMBER, Some(LOW_GANG), created), pods }
}

/// Pending gang `j` of `preempt-N`: `high-{j:06}`, `S[j mod 8]` pods, queue `leaf-{j mod 10}`,
/// `bench-high`, `minMember` its size.
pub fn high_job(j: usize) -> workloads::Job {
    let size = SIZES[j % 8] as usize;
    let name = format!("high-{j:06}");
    let created = 1_700_000_000 + j as i64;
    let queue = format!("leaf-{}", j % LEAVES);
    let pods = (0..size).map(|k| pod(&format!("{name}-{k}"), &name, "bench-high", None, created)).collect();
    workloads::Job { pod_group: pod_group(&name, &queue, "bench-high", size, None, created), pods }
}

/// The objects of `preempt-N` (`nodes` a multiple of 40): cluster `gpu-N`, the queues of
/// [`queues`], the three PriorityClasses, N/4 running gangs of [`low_job`] and the pending
/// gangs of [`high_job`] generated in order until the next would take the pending pods
/// above 8 × N (the cluster's GPUs).
pub fn objects(nodes: usize) -> ClusterObjects {
    assert!(nodes.is_multiple_of(40), "preempt-N needs N a multiple of 40");
    let low = (0..nodes / 4).map(|g| low_job(g, nodes));
    let mut o = workloads::objects(nodes, low.chain(workloads::jobs_up_to(0, 8 * nodes, high_job)));
    o.queues = queues(nodes).into_iter().map(Arc::new).collect();
    o.priority_classes = priority_classes().into_iter().map(Arc::new).collect();
    o
}

/// The node label of a node's GPU model in `preempt-shared-N`.
pub const GPU_MODEL_KEY: &str = crate::hetero::GPU_MODEL_KEY;

/// The GPU model of node `i` of `preempt-shared-N`: `A100` for even `i`, `H100` for odd.
pub fn shared_model(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "A100"
    } else {
        "H100"
    }
}

/// Running gang `g` (g in 0..N/2) of `preempt-shared-N`: `low-{g:05}`, 8 pods
/// `low-{g:05}-{k}` on node `g` (the nodes `0 … N/2 − 1` full), queue `leaf-0` for even
/// `g`, `leaf-5` for odd, `bench-low`, `minMember` 8 (no pod above it: `gang`'s vote in the
/// first tier finds no victim, so the second tier's `drf` decides), every pod annotated
/// `volcano.sh/preemptable: "true"`.
pub fn shared_low_job(g: usize) -> workloads::Job {
    let name = format!("low-{g:05}");
    let queue = if g.is_multiple_of(2) { "leaf-0" } else { "leaf-5" };
    let created = 1_650_000_000 + g as i64;
    let pods = (0..8)
        .map(|k| {
            let mut p = pod(&format!("{name}-{k}"), &name, "bench-low", Some(format!("node-{g:05}")), created);
            p.metadata.annotations.get_or_insert_with(Default::default).insert(PREEMPTABLE_KEY.into(), "true".into());
            p
        })
        .collect();
    workloads::Job { pod_group: pod_group(&name, queue, "bench-low", 8, Some(8), created), pods }
}

/// Pending gang `j` of `preempt-shared-N`: [`high_job`]'s gang (`high-{j:06}`, `S[j mod 8]`
/// pods, `leaf-{j mod 10}`, `bench-high`, `minMember` its size) whose pods select
/// `volcano.sh/gpu-model: A100` when `j mod 3 = 0`, `H100` when 1, and no model when 2.
pub fn shared_high_job(j: usize) -> workloads::Job {
    let size = SIZES[j % 8] as usize;
    let name = format!("high-{j:06}");
    let created = 1_700_000_000 + j as i64;
    let queue = format!("leaf-{}", j % LEAVES);
    let selector = match j % 3 {
        0 => Some([(GPU_MODEL_KEY.to_string(), "A100".to_string())].into()),
        1 => Some([(GPU_MODEL_KEY.to_string(), "H100".to_string())].into()),
        _ => None,
    };
    let pods = (0..size)
        .map(|k| pod_with(&format!("{name}-{k}"), &name, "bench-high", None, created, selector.clone()))
        .collect();
    workloads::Job { pod_group: pod_group(&name, &queue, "bench-high", size, None, created), pods }
}

/// The objects of `preempt-shared-N` (`nodes` a multiple of 40): cluster `gpu-N` with node
/// `i` labelled `volcano.sh/gpu-model` [`shared_model`]`(i)`, the queues of [`queues`], the
/// three PriorityClasses, N/2 running gangs of [`shared_low_job`] and the pending gangs of
/// [`shared_high_job`] generated in order until the next would take the pending pods above
/// 8 × N (the cluster's GPUs).
pub fn shared_objects(nodes: usize) -> ClusterObjects {
    assert!(nodes.is_multiple_of(40), "preempt-shared-N needs N a multiple of 40");
    let low = (0..nodes / 2).map(shared_low_job);
    let mut o = workloads::objects(nodes, low.chain(workloads::jobs_up_to(0, 8 * nodes, shared_high_job)));
    for (i, node) in o.nodes.iter_mut().enumerate() {
        let node = Arc::make_mut(node);
        node.metadata.labels.get_or_insert_with(Default::default).insert(GPU_MODEL_KEY.into(), shared_model(i).into());
    }
    o.queues = queues(nodes).into_iter().map(Arc::new).collect();
    o.priority_classes = priority_classes().into_iter().map(Arc::new).collect();
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configurations_differ_only_where_they_say() {
        assert!(PREEMPT_CONF.contains("  - name: drf\n    enablePreemptable: false\n  - name: predicates\n"));
        assert_eq!(PREEMPT_SHARED_CONF, PREEMPT_CONF.replace("    enablePreemptable: false\n", ""));
        assert_eq!(
            GANG_PREEMPT_CONF,
            PREEMPT_CONF.replace(
                "enqueue, allocate, preempt, reclaim, backfill",
                "enqueue, allocate, gangpreempt, gangreclaim, backfill"
            )
        );
        for conf in [PREEMPT_CONF, GANG_PREEMPT_CONF, PREEMPT_SHARED_CONF] {
            volcano_builtin::profile_from_text(conf).expect("a valid configuration");
        }
    }

    #[test]
    fn the_queue_hierarchy_is_valid_and_follows_the_spec() {
        let qs = queues(1000);
        volcano_api::validation::queue_hierarchy(qs.iter()).unwrap();
        let leaf = qs.iter().find(|q| q.metadata.name.as_deref() == Some("leaf-7")).unwrap();
        assert_eq!(leaf.spec.parent.as_deref(), Some("org-1"));
        assert_eq!(leaf.spec.deserved.as_ref().unwrap()["cpu"], q("9600"));
        assert_eq!(leaf.spec.deserved.as_ref().unwrap()["memory"], q("76800Gi"));
        assert_eq!(leaf.spec.capability.as_ref().unwrap()[GPU], q("4000"));
        assert_eq!(qs.len(), 14);
    }

    #[test]
    fn the_objects_follow_the_spec() {
        let o = objects(40);
        let running: Vec<_> = o.pods.iter().filter(|p| p.node_name().is_some()).collect();
        assert_eq!(running.len(), 160); // nodes 0..20, 8 pods each
        assert_eq!(running.last().unwrap().node_name(), Some("node-00019"));
        let pending = o.pods.len() - running.len();
        assert!(pending <= 320 && pending + 64 > 320, "{pending}");
        let low = low_job(5, 40);
        assert_eq!(low.pod_group.spec.queue.as_deref(), Some("leaf-5"));
        assert_eq!(low.pods[9].spec.as_ref().unwrap().node_name.as_deref(), Some("node-00011"));
        let high = high_job(13);
        assert_eq!((high.pods.len(), high.pod_group.spec.queue.as_deref()), (16, Some("leaf-3")));
        assert_eq!(high.pods[0].spec.as_ref().unwrap().priority, Some(10_000));
    }

    #[test]
    fn the_shared_objects_follow_the_spec() {
        let o = shared_objects(40);
        let running: Vec<_> = o.pods.iter().filter(|p| p.node_name().is_some()).collect();
        assert_eq!(running.len(), 160); // nodes 0..20, 8 pods each
        assert!(running.iter().all(|p| p.metadata.annotations.as_ref().unwrap()[PREEMPTABLE_KEY] == "true"));
        let pending = o.pods.len() - running.len();
        assert!(pending <= 320 && pending + 64 > 320, "{pending}");
        let labels = |i: usize| o.nodes[i].metadata.labels.clone().unwrap();
        assert_eq!((labels(6)[GPU_MODEL_KEY].as_str(), labels(7)[GPU_MODEL_KEY].as_str()), ("A100", "H100"));
        let low = shared_low_job(3);
        assert_eq!(low.pod_group.spec.queue.as_deref(), Some("leaf-5"));
        assert_eq!(low.pod_group.spec.min_member, 8);
        assert_eq!(low.pods[7].spec.as_ref().unwrap().node_name.as_deref(), Some("node-00003"));
        let selector = |j: usize| shared_high_job(j).pods[0].spec.clone().unwrap().node_selector;
        assert_eq!(selector(4).unwrap()[GPU_MODEL_KEY], "H100");
        assert!(selector(5).is_none());
        assert_eq!(shared_high_job(10).pod_group.spec.queue.as_deref(), Some("leaf-0"));
    }
}
