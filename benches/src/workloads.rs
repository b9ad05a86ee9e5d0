//! The standard synthetic workloads of `docs/performance.md`, built exactly as specified:
//! cluster `gpu-N`, queues `q0`…`q3`, jobs `gang-P`, the five standard cases, and
//! `spread-5k` (inter-pod affinity and topology spread, [`spread_objects`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeStatus, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec, PodStatus,
    ResourceRequirements, TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, PodGroupSpec, PodGroupStatus, Queue, QueueSpec};
use volcano_framework::pod::SpecInterner;
use volcano_framework::ClusterObjects;

/// The scheduler name of the workload pods.
pub const SCHEDULER_NAME: &str = "volcano-rs";

/// Job sizes, by `j mod 8`.
pub const SIZES: [u32; 8] = [1, 2, 4, 8, 8, 16, 32, 64];

/// The text of [`BENCH_CONF`], as a literal for `concat!` (the cases that add a plugin).
macro_rules! bench_conf {
    () => {
        r#"actions: "enqueue, allocate, backfill"
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
"#
    };
}
pub(crate) use bench_conf;

/// The scheduler configuration of every case.
pub const BENCH_CONF: &str = bench_conf!();

pub(crate) fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

pub(crate) fn time(secs: i64) -> Time {
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

/// A PodGroup of the benches: `name` in `namespace` with this uid, spec and creation time;
/// phase Pending, or Running with `running` pods when given.
pub fn pod_group(
    name: &str,
    namespace: &str,
    uid: String,
    spec: PodGroupSpec,
    created: Time,
    running: Option<i32>,
) -> PodGroup {
    let mut pg = PodGroup::new(name, spec);
    pg.metadata.namespace = Some(namespace.into());
    pg.metadata.uid = Some(uid);
    pg.metadata.creation_timestamp = Some(created);
    pg.status = Some(match running {
        Some(n) => PodGroupStatus { phase: Some(PodGroupPhase::Running), running: n, ..Default::default() },
        None => PodGroupStatus { phase: Some(PodGroupPhase::Pending), ..Default::default() },
    });
    pg
}

/// The one container of every bench pod: `main`, asking for `request` (limits equal).
pub fn container(request: BTreeMap<String, Quantity>) -> Container {
    Container {
        name: "main".into(),
        resources: Some(ResourceRequirements {
            requests: Some(request.clone()),
            limits: Some(request),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pod of the benches: `name` in `namespace` with this uid, creation time and spec, in
/// PodGroup `group` (its group annotation) when given; Running when the spec names a
/// node, Pending otherwise.
pub fn member_pod(
    name: String,
    namespace: String,
    uid: String,
    group: Option<&str>,
    created: Time,
    spec: PodSpec,
) -> Pod {
    let annotations = group.map(|g| [(crd::GROUP_NAME_ANNOTATION.to_string(), g.to_string())].into());
    let phase = if spec.node_name.is_some() { "Running" } else { "Pending" };
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            uid: Some(uid),
            annotations,
            creation_timestamp: Some(created),
            ..Default::default()
        },
        spec: Some(spec),
        status: Some(PodStatus { phase: Some(phase.into()), ..Default::default() }),
    }
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
    let spec = PodGroupSpec {
        min_member: size as i32,
        queue: Some(format!("q{}", j % 4)),
        min_resources: Some(min_resources),
        ..Default::default()
    };
    let pg = pod_group(&name, "bench", format!("bench-{name}"), spec, created.clone(), None);
    let pods = (0..size)
        .map(|k| {
            let pod_name = format!("{name}-{k}");
            let spec = PodSpec {
                scheduler_name: Some(SCHEDULER_NAME.into()),
                containers: vec![container(pod_request())],
                ..Default::default()
            };
            member_pod(
                pod_name.clone(),
                "bench".into(),
                format!("bench-{pod_name}"),
                Some(&name),
                created.clone(),
                spec,
            )
        })
        .collect();
    Job { pod_group: pg, pods }
}

/// Jobs `first..` generated in order until the next job would make the pod count exceed `p`.
pub fn gang(first: usize, p: usize) -> Vec<Job> {
    jobs_up_to(first, p, job).collect()
}

/// Jobs `first`, `first + 1`, … built by `make`, where job `j` has `S[j mod 8]` pods, in
/// order until the next one would take the pod count above `p` (made one at a time as the
/// iterator is read, so that [`objects`] holds one job's Kubernetes pods at a time).
pub fn jobs_up_to(first: usize, p: usize, make: impl Fn(usize) -> Job) -> impl Iterator<Item = Job> {
    let mut total = 0usize;
    (first..)
        .take_while(move |j| {
            total += SIZES[j % 8] as usize;
            total <= p
        })
        .map(make)
}

/// The objects of cluster `gpu-N` with the given jobs. Pods of equal spec share it
/// ([`SpecInterner`]), as they do in the scheduler's cache.
pub fn objects(nodes: usize, jobs: impl IntoIterator<Item = Job>) -> ClusterObjects {
    let mut specs = SpecInterner::new();
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
        o.pods.extend(job.pods.into_iter().map(|p| Arc::new(specs.pod(p))));
    }
    o
}

/// The node label of a node's name (the `kubernetes.io/hostname` domain).
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";

/// The node label of a node's zone.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// The scheduler name of the running pods of `spread-5k` that are not volcano-rs's.
pub const OTHER_SCHEDULER_NAME: &str = "default-scheduler";

/// Number of `app` values (`svc-0` … `svc-49`) of `spread-5k`.
pub const APPS: usize = 50;

/// Node `i` of the `spread-N` cluster: node `i` of `gpu-N` with the label
/// `kubernetes.io/hostname: node-{i:05}` (the other cases' nodes do not carry it).
pub fn spread_node(i: usize) -> Node {
    let mut node = gpu_node(i);
    let name = node.metadata.name.clone().unwrap_or_default();
    node.metadata.labels.get_or_insert_with(Default::default).insert(HOSTNAME_KEY.into(), name);
    node
}

fn match_labels(key: &str, value: &str) -> LabelSelector {
    LabelSelector { match_labels: Some([(key.to_string(), value.to_string())].into()), ..Default::default() }
}

fn affinity_term(key: &str, value: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(match_labels(key, value)),
        topology_key: topology_key.into(),
        ..Default::default()
    }
}

/// The PodGroups `svc-0` … `svc-49` of the running pods of `spread-5k` that volcano-rs
/// scheduled: namespace `bench`, queue `q{a mod 4}`, `minMember` 1, phase Running, with
/// `status.running` the number of its pods among the first `running` running pods.
pub fn service_pod_groups(running: usize) -> Vec<PodGroup> {
    (0..APPS)
        .map(|a| {
            let name = format!("svc-{a}");
            let mut pg = PodGroup::new(
                &name,
                PodGroupSpec { min_member: 1, queue: Some(format!("q{}", a % 4)), ..Default::default() },
            );
            pg.metadata.namespace = Some("bench".into());
            pg.metadata.uid = Some(format!("bench-{name}"));
            pg.metadata.creation_timestamp = Some(time(1_650_000_000));
            let members = (0..running).filter(|k| k % APPS == a && k % 4 != 1).count() as i32;
            pg.status =
                Some(PodGroupStatus { phase: Some(PodGroupPhase::Running), running: members, ..Default::default() });
            pg
        })
        .collect()
}

/// Running pod `k` of `spread-5k` on a cluster of `nodes` nodes (docs/performance.md):
/// `bench/run-{k:05}` on node `k mod nodes`, labelled `app: svc-{k mod 50}`, requesting
/// `cpu: 4`, `memory: 16Gi` and `k mod 3` GPUs; scheduled by `default-scheduler` when
/// `k mod 4 = 1` (no PodGroup), else by volcano-rs in PodGroup `svc-{k mod 50}`; when
/// `k mod 10 = 5`, with a required anti-affinity on the hostname against
/// `app: svc-{(k + 25) mod 50}`.
pub fn running_pod(k: usize, nodes: usize) -> Pod {
    let name = format!("run-{k:05}");
    let app = format!("svc-{}", k % APPS);
    let mut request: BTreeMap<String, Quantity> =
        [("cpu".to_string(), q("4")), ("memory".to_string(), q("16Gi"))].into_iter().collect();
    if !k.is_multiple_of(3) {
        request.insert("nvidia.com/gpu".into(), q(&(k % 3).to_string()));
    }
    let ours = k % 4 != 1;
    let annotations = ours.then(|| [(crd::GROUP_NAME_ANNOTATION.to_string(), app.clone())].into());
    let affinity = (k % 10 == 5).then(|| Affinity {
        pod_anti_affinity: Some(PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: Some(vec![affinity_term(
                "app",
                &format!("svc-{}", (k + 25) % APPS),
                HOSTNAME_KEY,
            )]),
            ..Default::default()
        }),
        ..Default::default()
    });
    Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("bench".into()),
            uid: Some(format!("bench-{name}")),
            labels: Some([("app".to_string(), app)].into()),
            annotations,
            creation_timestamp: Some(time(1_650_000_000 + k as i64)),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(if ours { SCHEDULER_NAME } else { OTHER_SCHEDULER_NAME }.into()),
            node_name: Some(format!("node-{:05}", k % nodes)),
            affinity,
            containers: vec![container(request)],
            ..Default::default()
        }),
        status: Some(PodStatus { phase: Some("Running".into()), ..Default::default() }),
    }
}

/// Job `j` of `spread-5k`: job `j` of `gang-P` whose pods are labelled `job: job-{j:06}`
/// and `app: svc-{j mod 50}` and carry the rule of family `j mod 3`: (0) a required
/// anti-affinity to their own job on the hostname, (1) a `DoNotSchedule` zone spread of
/// their own job with `maxSkew` 1, (2) a preferred affinity (weight 100) to their own job on
/// the hostname.
pub fn spread_job(j: usize) -> Job {
    let mut job = job(j);
    let name = format!("job-{j:06}");
    let own = || affinity_term("job", &name, HOSTNAME_KEY);
    for pod in &mut job.pods {
        pod.metadata.labels =
            Some([("job".to_string(), name.clone()), ("app".to_string(), format!("svc-{}", j % APPS))].into());
        let spec = pod.spec.as_mut().expect("job pods have a spec");
        match j % 3 {
            0 => {
                spec.affinity = Some(Affinity {
                    pod_anti_affinity: Some(PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![own()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
            1 => {
                spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                    max_skew: 1,
                    topology_key: ZONE_KEY.into(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    label_selector: Some(match_labels("job", &name)),
                    ..Default::default()
                }])
            }
            _ => {
                spec.affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        preferred_during_scheduling_ignored_during_execution: Some(vec![WeightedPodAffinityTerm {
                            weight: 100,
                            pod_affinity_term: own(),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
            }
        }
    }
    job
}

/// The objects of `spread-5k` at any size: `nodes` nodes of the `spread-N` cluster,
/// `running` running pods (and their PodGroups `svc-*`), and the jobs of `gang-P` with
/// `P = pending`, built by [`spread_job`].
pub fn spread_objects(nodes: usize, running: usize, pending: usize) -> ClusterObjects {
    let jobs = jobs_up_to(0, pending, spread_job);
    let mut o = objects(0, jobs);
    o.nodes = (0..nodes).map(|i| Arc::new(spread_node(i))).collect();
    o.pod_groups.extend(service_pod_groups(running).into_iter().map(Arc::new));
    let mut specs = SpecInterner::new();
    o.pods.extend((0..running).map(|k| Arc::new(specs.pod(running_pod(k, nodes)))));
    o
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
        assert!(!labels.contains_key(HOSTNAME_KEY));
    }

    #[test]
    fn spread_objects_follow_the_spec() {
        let o = spread_objects(50, 200, 400);
        assert_eq!(o.nodes.len(), 50);
        let labels = o.nodes[7].metadata.labels.as_ref().unwrap();
        assert_eq!(labels[HOSTNAME_KEY], "node-00007");
        assert_eq!(labels[ZONE_KEY], "zone-3");
        let pod = |name: &str| o.pods.iter().find(|p| p.metadata.name.as_deref() == Some(name)).unwrap();
        // Running pods: node k mod N, app svc-{k mod 50}, k mod 3 GPUs, another scheduler when
        // k mod 4 = 1, an anti-affinity when k mod 10 = 5.
        let r = pod("run-00105");
        let spec = r.spec.as_ref().unwrap();
        assert_eq!(r.node_name(), Some("node-00005"));
        assert_eq!(spec.scheduler_name.as_deref(), Some(OTHER_SCHEDULER_NAME));
        assert_eq!(r.metadata.labels.as_ref().unwrap()["app"], "svc-5");
        let requests = spec.containers[0].resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert!(!requests.contains_key("nvidia.com/gpu"));
        let terms = spec.affinity.as_ref().unwrap().pod_anti_affinity.as_ref().unwrap();
        let term = &terms.required_during_scheduling_ignored_during_execution.as_ref().unwrap()[0];
        assert_eq!(term.label_selector.as_ref().unwrap().match_labels.as_ref().unwrap()["app"], "svc-30");
        let r = pod("run-00002");
        assert_eq!(r.spec.as_ref().unwrap().scheduler_name.as_deref(), Some(SCHEDULER_NAME));
        assert_eq!(r.metadata.annotations.as_ref().unwrap()[crd::GROUP_NAME_ANNOTATION], "svc-2");
        assert!(r.spec.as_ref().unwrap().affinity.is_none());
        // Pending jobs: gang-400 (the running pods and their 50 PodGroups aside).
        let pending: Vec<_> = o.pods.iter().filter(|p| p.node_name().is_none()).collect();
        assert_eq!(pending.len(), 2 * 135 + 1 + 2 + 4 + 8 + 8 + 16 + 32);
        assert_eq!(o.pod_groups.len(), 23 + APPS);
        let (a, s, p) = (pod("job-000003-0"), pod("job-000004-0"), pod("job-000005-0"));
        assert_eq!(a.metadata.labels.as_ref().unwrap()["job"], "job-000003");
        assert_eq!(a.metadata.labels.as_ref().unwrap()["app"], "svc-3");
        let anti = a.spec.as_ref().unwrap().affinity.as_ref().unwrap().pod_anti_affinity.as_ref().unwrap();
        assert_eq!(
            anti.required_during_scheduling_ignored_during_execution.as_ref().unwrap()[0].topology_key,
            HOSTNAME_KEY
        );
        let c = &s.spec.as_ref().unwrap().topology_spread_constraints.as_ref().unwrap()[0];
        assert_eq!(
            (c.max_skew, c.topology_key.as_str(), c.when_unsatisfiable.as_str()),
            (1, ZONE_KEY, "DoNotSchedule")
        );
        let pref = p.spec.as_ref().unwrap().affinity.as_ref().unwrap().pod_affinity.as_ref().unwrap();
        assert_eq!(pref.preferred_during_scheduling_ignored_during_execution.as_ref().unwrap()[0].weight, 100);
    }
}
