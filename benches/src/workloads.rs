//! The standard synthetic workloads of `docs/performance.md`, built exactly as specified:
//! cluster `gpu-N`, queues `q0`…`q3`, jobs `gang-P`, and the five standard cases.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, NodeStatus, Pod, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec};
use volcano_framework::ClusterObjects;

/// The scheduler name of the workload pods.
pub const SCHEDULER_NAME: &str = "volcano-rs";

/// Job sizes, by `j mod 8`.
pub const SIZES: [u32; 8] = [1, 2, 4, 8, 8, 16, 32, 64];

/// The scheduler configuration of every case.
pub const BENCH_CONF: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.resources: nvidia.com/gpu
"#;

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

fn time(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid time"))
}

/// Node `i` of cluster `gpu-N`.
pub fn gpu_node(i: usize) -> Node {
    let alloc: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q("96")),
        ("memory".to_string(), q("768Gi")),
        ("nvidia.com/gpu".to_string(), q("8")),
        ("pods".to_string(), q("110")),
    ]
    .into_iter()
    .collect();
    let labels: BTreeMap<String, String> = [
        ("topology.kubernetes.io/zone".to_string(), format!("zone-{}", i % 4)),
        ("volcano.sh/gpu-model".to_string(), if i % 3 != 2 { "A100" } else { "H100" }.to_string()),
    ]
    .into_iter()
    .collect();
    Node {
        metadata: ObjectMeta { name: Some(format!("node-{i:05}")), labels: Some(labels), ..Default::default() },
        spec: Some(Default::default()),
        status: Some(NodeStatus { allocatable: Some(alloc.clone()), capacity: Some(alloc), ..Default::default() }),
    }
}

/// The four queues `q0`…`q3`, weights 1…4, reclaimable, no capability.
pub fn queues() -> Vec<Queue> {
    (0..4)
        .map(|i| {
            let mut queue = Queue::new(
                &format!("q{i}"),
                QueueSpec { weight: Some(i + 1), reclaimable: Some(true), ..Default::default() },
            );
            queue.metadata.creation_timestamp = Some(time(1_600_000_000));
            queue
        })
        .collect()
}

/// One generated job: its PodGroup and pods.
pub struct Job {
    /// The PodGroup.
    pub pod_group: PodGroup,
    /// Its pods.
    pub pods: Vec<Pod>,
}

fn pod_request() -> BTreeMap<String, Quantity> {
    [("cpu".to_string(), q("8")), ("memory".to_string(), q("64Gi")), ("nvidia.com/gpu".to_string(), q("1"))]
        .into_iter()
        .collect()
}

/// Job `j` of a `gang-P` workload.
pub fn job(j: usize) -> Job {
    let size = SIZES[j % 8];
    let name = format!("job-{j:06}");
    let created = time(1_700_000_000 + j as i64);
    let min_resources: BTreeMap<String, Quantity> = [
        ("cpu".to_string(), q(&(8 * size).to_string())),
        ("memory".to_string(), q(&format!("{}Gi", 64 * size))),
        ("nvidia.com/gpu".to_string(), q(&size.to_string())),
    ]
    .into_iter()
    .collect();
    let mut pg = PodGroup::new(
        &name,
        PodGroupSpec {
            min_member: size as i32,
            queue: Some(format!("q{}", j % 4)),
            min_resources: Some(min_resources),
            ..Default::default()
        },
    );
    pg.metadata.namespace = Some("bench".into());
    pg.metadata.uid = Some(format!("bench-{name}"));
    pg.metadata.creation_timestamp = Some(created.clone());
    pg.status = Some(PodGroupStatus { phase: Some(PodGroupPhase::Pending), ..Default::default() });
    let annotations: BTreeMap<String, String> =
        [(crd::GROUP_NAME_ANNOTATION.to_string(), name.clone())].into_iter().collect();
    let pods = (0..size)
        .map(|k| {
            let pod_name = format!("{name}-{k}");
            Pod {
                metadata: ObjectMeta {
                    name: Some(pod_name.clone()),
                    namespace: Some("bench".into()),
                    uid: Some(format!("bench-{pod_name}")),
                    annotations: Some(annotations.clone()),
                    creation_timestamp: Some(created.clone()),
                    ..Default::default()
                },
                spec: Some(PodSpec {
                    scheduler_name: Some(SCHEDULER_NAME.into()),
                    containers: vec![Container {
                        name: "main".into(),
                        resources: Some(ResourceRequirements {
                            requests: Some(pod_request()),
                            limits: Some(pod_request()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
            }
        })
        .collect();
    Job { pod_group: pg, pods }
}

/// Jobs `first..` generated in order until the next job would make the pod count exceed `p`.
pub fn gang(first: usize, p: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut total = 0usize;
    let mut j = first;
    loop {
        let size = SIZES[j % 8] as usize;
        if total + size > p {
            break;
        }
        total += size;
        jobs.push(job(j));
        j += 1;
    }
    jobs
}

/// The objects of cluster `gpu-N` with the given jobs.
pub fn objects(nodes: usize, jobs: Vec<Job>) -> ClusterObjects {
    let mut o = ClusterObjects {
        nodes: (0..nodes).map(|i| Arc::new(gpu_node(i))).collect(),
        queues: queues().into_iter().map(Arc::new).collect(),
        ..Default::default()
    };
    let mut default = Queue::new("default", QueueSpec { weight: Some(1), ..Default::default() });
    default.metadata.creation_timestamp = Some(time(1_600_000_000));
    o.queues.push(Arc::new(default));
    for job in jobs {
        o.pod_groups.push(Arc::new(job.pod_group));
        o.pods.extend(job.pods.into_iter().map(Arc::new));
    }
    o
}

/// A standard case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// gpu-1k, gang-6400.
    Fill1k,
    /// gpu-5k, gang-32000.
    Fill5k,
    /// gpu-10k, gang-64000.
    Fill10k,
    /// gpu-5k, gang-80000.
    Backlog5k,
    /// gpu-5k with gang-30000 running, then 2,000 new pending pods.
    Steady5k,
}

impl Case {
    /// Every case, in the order of docs/performance.md.
    pub const ALL: [Case; 5] = [Case::Fill1k, Case::Fill5k, Case::Fill10k, Case::Backlog5k, Case::Steady5k];

    /// The case's name.
    pub fn name(self) -> &'static str {
        match self {
            Case::Fill1k => "fill-1k",
            Case::Fill5k => "fill-5k",
            Case::Fill10k => "fill-10k",
            Case::Backlog5k => "backlog-5k",
            Case::Steady5k => "steady-5k",
        }
    }

    /// The case with this name.
    pub fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Number of nodes.
    pub fn nodes(self) -> usize {
        match self {
            Case::Fill1k => 1_000,
            Case::Fill5k | Case::Backlog5k | Case::Steady5k => 5_000,
            Case::Fill10k => 10_000,
        }
    }

    /// Pending pods of the measured session (`P` of `gang-P`).
    pub fn pending_pods(self) -> usize {
        match self {
            Case::Fill1k => 6_400,
            Case::Fill5k => 32_000,
            Case::Fill10k => 64_000,
            Case::Backlog5k => 80_000,
            Case::Steady5k => 2_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gang_p_is_an_upper_bound_and_follows_the_size_cycle() {
        let jobs = gang(0, 6400);
        let total: usize = jobs.iter().map(|j| j.pods.len()).sum();
        assert!(total <= 6400);
        // The next job would exceed P.
        assert!(total + SIZES[jobs.len() % 8] as usize > 6400);
        assert_eq!(jobs[0].pods.len(), 1);
        assert_eq!(jobs[7].pods.len(), 64);
        assert_eq!(jobs[5].pod_group.spec.queue.as_deref(), Some("q1"));
        assert_eq!(jobs[3].pods[2].metadata.name.as_deref(), Some("job-000003-2"));
    }

    #[test]
    fn nodes_follow_the_spec() {
        let n = gpu_node(2);
        assert_eq!(n.metadata.name.as_deref(), Some("node-00002"));
        let labels = n.metadata.labels.unwrap();
        assert_eq!(labels["volcano.sh/gpu-model"], "H100");
        assert_eq!(labels["topology.kubernetes.io/zone"], "zone-2");
    }
}
