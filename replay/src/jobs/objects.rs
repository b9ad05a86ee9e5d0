//! The Kubernetes objects of a job replay: the nodes and queues of the cluster, and each
//! job as a gang (a PodGroup with `minMember` = its pod count, pods of up to a node's GPUs)
//! or, under `--elastic`, as a Volcano Job the elastic autoscaler may resize.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeStatus, Pod, PodSpec, PodStatus, PodTemplateSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue};
use volcano_api::job::{Job, JobSpec, TaskSpec, AUTOSCALE_ANNOTATION, SCALE_IN_GRACE_ANNOTATION};
use volcano_framework::ClusterObjects;
use volcano_sim::{RUN_SECONDS_ANNOTATION, SCHEDULER_NAME};

use super::trace::{NodeShape, Trace, TraceJob};

/// The namespace of every job.
pub const NAMESPACE: &str = "replay";
/// The resource the replays count.
pub const GPU: &str = "nvidia.com/gpu";
/// The virtual clock's origin (2023-11-14T22:13:20Z): trace time 0, in milliseconds since
/// the Unix epoch.
pub const EPOCH_MS: i64 = 1_700_000_000_000;
/// The name of the task of an elastic job.
pub const ELASTIC_TASK: &str = "worker";

fn time(rel_ms: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_millisecond(EPOCH_MS + rel_ms).unwrap_or_default())
}

fn list(entries: &[(&str, String)]) -> BTreeMap<String, Quantity> {
    entries.iter().map(|(k, v)| (k.to_string(), Quantity(v.clone()))).collect()
}

/// The name of job `index` (its PodGroup's, or its Volcano Job's).
pub fn job_name(index: usize) -> String {
    format!("job-{index:06}")
}

/// The job index of a pod or PodGroup key (`replay/job-000042…` → 42).
pub fn job_index(key: &str) -> Option<usize> {
    let rest = key.strip_prefix(NAMESPACE)?.strip_prefix("/job-")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse().ok()
}

/// The nodes and queues of a trace's cluster.
pub fn cluster(trace: &Trace) -> ClusterObjects {
    let NodeShape { gpus, cpus, memory_gib } = trace.node;
    let alloc = list(&[
        ("cpu", cpus.to_string()),
        ("memory", format!("{memory_gib}Gi")),
        (GPU, gpus.to_string()),
        ("pods", "110".into()),
    ]);
    let nodes = (0..trace.nodes)
        .map(|i| {
            Arc::new(Node {
                metadata: ObjectMeta {
                    name: Some(format!("node-{i:04}")),
                    uid: Some(format!("node-{i}")),
                    ..Default::default()
                },
                spec: Some(Default::default()),
                status: Some(NodeStatus {
                    allocatable: Some(alloc.clone()),
                    capacity: Some(alloc.clone()),
                    ..Default::default()
                }),
            })
        })
        .collect();
    let queues = trace
        .queues
        .iter()
        .map(|q| {
            let mut queue = Queue::new(
                &q.name,
                crd::QueueSpec { weight: Some(q.weight), reclaimable: Some(true), ..Default::default() },
            );
            queue.metadata.uid = Some(format!("queue-{}", q.name));
            queue.metadata.creation_timestamp = Some(time(0));
            Arc::new(queue)
        })
        .collect();
    ClusterObjects { nodes, queues, ..Default::default() }
}

/// The requests of a pod of `gpus` GPUs: the GPUs, and the node's CPUs and memory in
/// proportion.
fn requests(node: &NodeShape, gpus: u32) -> BTreeMap<String, Quantity> {
    let cpu_milli = u64::from(node.cpus) * 1000 * u64::from(gpus) / u64::from(node.gpus.max(1));
    let mem_mib = u64::from(node.memory_gib) * 1024 * u64::from(gpus) / u64::from(node.gpus.max(1));
    list(&[("cpu", format!("{cpu_milli}m")), ("memory", format!("{mem_mib}Mi")), (GPU, gpus.to_string())])
}

fn pod_spec(node: &NodeShape, gpus: u32) -> PodSpec {
    let req = requests(node, gpus);
    PodSpec {
        scheduler_name: Some(SCHEDULER_NAME.into()),
        containers: vec![Container {
            name: "main".into(),
            image: Some("trace".into()),
            resources: Some(ResourceRequirements {
                requests: Some(req.clone()),
                limits: Some(req),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The GPUs of each pod of a gang of `gpus` GPUs: as many full nodes as it takes, then the
/// rest.
pub fn gang_pods(gpus: u32, node_gpus: u32) -> Vec<u32> {
    let per = node_gpus.max(1);
    let mut left = gpus;
    let mut pods = Vec::new();
    while left > 0 {
        let n = left.min(per);
        pods.push(n);
        left -= n;
    }
    pods
}

/// A job as a gang: its PodGroup (`minMember` = the pods, `minResources` their sum) and pods
/// created at its submission, each running for the job's duration once bound
/// ([`RUN_SECONDS_ANNOTATION`]). `attempt` > 0 makes the pods of a restart (other uids).
pub fn gang(index: usize, job: &TraceJob, trace: &Trace, attempt: u32) -> (PodGroup, Vec<Pod>) {
    let name = job_name(index);
    let pods_gpus = gang_pods(job.gpus, trace.node.gpus);
    let spec = PodGroupSpec {
        min_member: pods_gpus.len() as i32,
        queue: Some(trace.queues[job.queue].name.clone()),
        min_resources: Some(requests(&trace.node, job.gpus)),
        ..Default::default()
    };
    let mut pg = PodGroup::new(&name, spec);
    pg.metadata.namespace = Some(NAMESPACE.into());
    pg.metadata.uid = Some(format!("pg-{name}"));
    pg.metadata.creation_timestamp = Some(time(job.submit_ms));
    pg.status = Some(PodGroupStatus { phase: Some(PodGroupPhase::Pending), ..Default::default() });
    let run_seconds = format!("{}", job.duration_ms as f64 / 1000.0);
    let pods = pods_gpus
        .iter()
        .enumerate()
        .map(|(k, gpus)| {
            let pod_name = format!("{name}-{k}");
            let annotations = [
                (crd::GROUP_NAME_ANNOTATION.to_string(), name.clone()),
                (RUN_SECONDS_ANNOTATION.to_string(), run_seconds.clone()),
            ];
            Pod {
                metadata: ObjectMeta {
                    name: Some(pod_name.clone()),
                    namespace: Some(NAMESPACE.into()),
                    uid: Some(format!("pod-{pod_name}#{attempt}")),
                    annotations: Some(annotations.into_iter().collect()),
                    creation_timestamp: Some(time(job.submit_ms)),
                    ..Default::default()
                },
                spec: Some(pod_spec(&trace.node, *gpus)),
                status: Some(PodStatus { phase: Some("Pending".into()), ..Default::default() }),
            }
        })
        .collect();
    (pg, pods)
}

/// How an elastic job is cut: `replicas` pods of `pod_gpus` GPUs each, of which `min` (at
/// least half the GPUs) make its gang. `None` for a job of one GPU, which stays a gang.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElasticShape {
    /// GPUs per pod.
    pub pod_gpus: u32,
    /// Pods at full size.
    pub replicas: u32,
    /// Pods of the smallest size (⌈replicas / 2⌉).
    pub min: u32,
}

/// The elastic shape of a job of `gpus` GPUs: the largest pod size that divides the job,
/// fits a node, and makes at least two pods.
pub fn elastic_shape(gpus: u32, node_gpus: u32) -> Option<ElasticShape> {
    if gpus < 2 {
        return None;
    }
    let pod_gpus = (1..=node_gpus.min(gpus / 2)).rev().find(|p| gpus.is_multiple_of(*p))?;
    let replicas = gpus / pod_gpus;
    Some(ElasticShape { pod_gpus, replicas, min: replicas.div_ceil(2) })
}

/// A job as an elastic Volcano Job: one task of `replicas` pods at full size, `minAvailable`
/// its minimum, the autoscaler's annotation `worker=MIN..MAX`, and no grace period on a
/// shrink (a trace job has no launcher to tell).
pub fn elastic_job(index: usize, job: &TraceJob, trace: &Trace, shape: ElasticShape) -> Job {
    let name = job_name(index);
    let task = TaskSpec {
        name: Some(ELASTIC_TASK.into()),
        replicas: shape.replicas as i32,
        min_available: Some(shape.min as i32),
        template: PodTemplateSpec { metadata: None, spec: Some(pod_spec(&trace.node, shape.pod_gpus)) },
        ..Default::default()
    };
    let spec = JobSpec {
        scheduler_name: Some(SCHEDULER_NAME.into()),
        min_available: shape.min as i32,
        queue: Some(trace.queues[job.queue].name.clone()),
        tasks: vec![task],
        ..Default::default()
    };
    let mut j = Job::new(&name, spec);
    j.metadata.namespace = Some(NAMESPACE.into());
    j.metadata.uid = Some(format!("job-{name}"));
    j.metadata.creation_timestamp = Some(time(job.submit_ms));
    j.metadata.annotations = Some(
        [
            (AUTOSCALE_ANNOTATION.to_string(), format!("{ELASTIC_TASK}={}..{}", shape.min, shape.replicas)),
            (SCALE_IN_GRACE_ANNOTATION.to_string(), "0".to_string()),
        ]
        .into_iter()
        .collect(),
    );
    j
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gangs_take_whole_nodes_then_the_rest() {
        assert_eq!(gang_pods(1, 8), vec![1]);
        assert_eq!(gang_pods(12, 8), vec![8, 4]);
        assert_eq!(gang_pods(16, 8), vec![8, 8]);
    }

    #[test]
    fn elastic_jobs_keep_at_least_half_their_gpus() {
        let s = |g| elastic_shape(g, 8).map(|s| (s.pod_gpus, s.replicas, s.min));
        assert_eq!(s(1), None);
        assert_eq!(s(2), Some((1, 2, 1)));
        assert_eq!(s(8), Some((4, 2, 1)));
        assert_eq!(s(12), Some((6, 2, 1)));
        assert_eq!(s(24), Some((8, 3, 2)));
        assert_eq!(s(64), Some((8, 8, 4)));
        assert_eq!(s(5), Some((1, 5, 3)));
    }

    #[test]
    fn job_indices_are_read_back_from_keys() {
        assert_eq!(job_index("replay/job-000042-0"), Some(42));
        assert_eq!(job_index("replay/job-000042-worker-3"), Some(42));
        assert_eq!(job_index("other/job-000042"), None);
    }
}
