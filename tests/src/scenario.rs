//! Scenario files: a cluster and workload (Kubernetes manifests and/or a compact
//! shorthand), an optional scheduler configuration, the number of cycles, and the expected
//! outcome as text. The runner (`tests/scenarios.rs`) simulates every file and compares;
//! `BLESS=1` rewrites the `expect` block.
//!
//! ```yaml
//! description: Two gangs compete for a cluster that fits only one of them.
//! config: |                 # optional; Volcano's built-in default otherwise
//!   actions: "enqueue, allocate, backfill"
//!   ...
//! cycles: 2                 # optional; until nothing changes otherwise
//! cluster:                  # optional shorthand, expanded into real objects
//!   nodes:
//!   - {name: n, count: 2, cpu: 8, memory: 32Gi, gpu: 4}
//!   queues:
//!   - {name: q1, weight: 3}
//!   jobs:
//!   - {name: a, queue: q1, minMember: 4, replicas: 4, cpu: 1, memory: 1Gi, gpu: 1}
//! objects: |                # optional raw manifests (multi-document YAML)
//!   ...
//! expect: |
//!   ...
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde::{Deserialize, Serialize};
use volcano_api::crd::{self, PodGroup, PodGroupPhase, Queue, QueueState};

use crate::{node, pod, pod_group, priority_class, queue};

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// What the scenario shows (one sentence).
    pub description: String,
    /// Scheduler configuration (YAML text); built-in default when absent.
    #[serde(default)]
    pub config: Option<String>,
    /// Number of cycles; until a cycle changes nothing when absent.
    #[serde(default)]
    pub cycles: Option<u32>,
    /// Shorthand cluster and workload.
    #[serde(default)]
    pub cluster: Cluster,
    /// Raw manifests (multi-document YAML).
    #[serde(default)]
    pub objects: Option<String>,
    /// Expected outcome (rendered text).
    #[serde(default)]
    pub expect: Option<String>,
}

/// Shorthand objects.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cluster {
    /// Nodes.
    #[serde(default)]
    pub nodes: Vec<NodeSpec>,
    /// Queues.
    #[serde(default)]
    pub queues: Vec<QueueSpec>,
    /// PriorityClasses by name → value.
    #[serde(default, rename = "priorityClasses")]
    pub priority_classes: BTreeMap<String, i32>,
    /// Jobs (a PodGroup and its pods).
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
}

/// A node (or `count` nodes named `<name>-<i>`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Name (prefix when `count` is set).
    pub name: String,
    /// Number of identical nodes.
    #[serde(default)]
    pub count: Option<u32>,
    /// cpu allocatable.
    pub cpu: Quantity,
    /// memory allocatable.
    pub memory: Quantity,
    /// `nvidia.com/gpu` allocatable.
    #[serde(default)]
    pub gpu: Option<Quantity>,
    /// `pods` allocatable (default 110).
    #[serde(default)]
    pub pods: Option<Quantity>,
    /// Other allocatable resources.
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Cordoned.
    #[serde(default)]
    pub unschedulable: bool,
}

/// A quantity written as a number or a string.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Quantity {
    /// `8`
    Int(i64),
    /// `0.5`
    Float(f64),
    /// `32Gi`
    Str(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Int(i) => i.to_string(),
            Quantity::Float(f) => f.to_string(),
            Quantity::Str(s) => s.clone(),
        }
    }
}

/// A queue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// Name.
    pub name: String,
    /// Weight (default 1).
    #[serde(default)]
    pub weight: Option<i32>,
    /// Capability.
    #[serde(default)]
    pub capability: BTreeMap<String, Quantity>,
    /// Guarantee.
    #[serde(default)]
    pub guarantee: BTreeMap<String, Quantity>,
    /// Deserved.
    #[serde(default)]
    pub deserved: BTreeMap<String, Quantity>,
    /// Reclaimable (default true).
    #[serde(default)]
    pub reclaimable: Option<bool>,
    /// Priority.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Parent queue.
    #[serde(default)]
    pub parent: Option<String>,
    /// State (default Open).
    #[serde(default)]
    pub state: Option<QueueState>,
}

/// A role of a job: `replicas` pods named `<job>-<role>-<i>` with the `volcano.sh/task-spec`
/// annotation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// Role name.
    pub name: String,
    /// Number of pods.
    pub replicas: u32,
    /// Per-role minimum (`minTaskMember`).
    #[serde(default, rename = "minMember")]
    pub min_member: Option<i32>,
    /// Partitions of this many pods, as the job controller labels a task with a
    /// `partitionPolicy`: each pod gets the labels `volcano.sh/task-spec: <role>` and
    /// `volcano.sh/partition-id: <i / partitionSize>` (the job's `subGroupPolicy` says what
    /// they mean).
    #[serde(default, rename = "partitionSize")]
    pub partition_size: Option<u32>,
    /// Pod requests of the role (default: the job's).
    #[serde(flatten)]
    pub pod: PodShape,
}

/// Requests and placement constraints of a pod.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PodShape {
    /// cpu request.
    #[serde(default)]
    pub cpu: Option<Quantity>,
    /// memory request.
    #[serde(default)]
    pub memory: Option<Quantity>,
    /// `nvidia.com/gpu` request.
    #[serde(default)]
    pub gpu: Option<Quantity>,
    /// Other requests.
    #[serde(default)]
    pub resources: BTreeMap<String, Quantity>,
    /// Node selector.
    #[serde(default, rename = "nodeSelector")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// Pod priority (`spec.priority`); from the job's PriorityClass when absent.
    #[serde(default)]
    pub priority: Option<i32>,
}

/// A job: a PodGroup and its pods.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// PodGroup name; pods are `<name>-<i>` (or `<name>-<role>-<i>`).
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Queue (default `default`).
    #[serde(default)]
    pub queue: Option<String>,
    /// Gang minimum (default: all pods).
    #[serde(default, rename = "minMember")]
    pub min_member: Option<i32>,
    /// Number of pods (when no `tasks`).
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Partitions of this many pods (when no `tasks`): each pod gets the label
    /// `volcano.sh/partition-id: <i / partitionSize>`.
    #[serde(default, rename = "partitionSize")]
    pub partition_size: Option<u32>,
    /// Roles.
    #[serde(default)]
    pub tasks: Vec<TaskSpec>,
    /// PodGroup phase (default Pending: `enqueue` admits it).
    #[serde(default)]
    pub phase: Option<PodGroupPhase>,
    /// PriorityClass of the PodGroup and its pods.
    #[serde(default, rename = "priorityClass")]
    pub priority_class: Option<String>,
    /// `minResources`: `auto` (default: minMember × the first pods' requests, as the job
    /// controller computes it), `none`, or an explicit resource list.
    #[serde(default, rename = "minResources")]
    pub min_resources: Option<MinResources>,
    /// Nodes of the first pods, which are Running there.
    #[serde(default)]
    pub running: Vec<String>,
    /// PodGroup annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `spec.networkTopology` of the PodGroup.
    #[serde(default, rename = "networkTopology")]
    pub network_topology: Option<crd::NetworkTopologySpec>,
    /// `spec.subGroupPolicy` of the PodGroup.
    #[serde(default, rename = "subGroupPolicy")]
    pub sub_group_policy: Option<Vec<crd::SubGroupPolicySpec>>,
    /// Creation time offset in seconds (orders jobs FIFO; default: file order).
    #[serde(default)]
    pub created: Option<i64>,
    /// Pod shape for all pods (when no `tasks`, or as the roles' default).
    #[serde(flatten)]
    pub pod: PodShape,
}

/// `minResources` of a shorthand job.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum MinResources {
    /// `auto` or `none`.
    Keyword(String),
    /// An explicit list.
    List(BTreeMap<String, Quantity>),
}

/// The objects a shorthand cluster expands to.
#[derive(Debug, Default)]
pub struct Expanded {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Queues.
    pub queues: Vec<Queue>,
    /// PriorityClasses.
    pub priority_classes: Vec<PriorityClass>,
    /// PodGroups.
    pub pod_groups: Vec<PodGroup>,
    /// Pods.
    pub pods: Vec<Pod>,
}

impl Expanded {
    /// Every object as a multi-document YAML text (what a user would write).
    pub fn to_yaml(&self) -> String {
        let mut docs: Vec<String> = Vec::new();
        let mut push = |v: serde_json::Value| docs.push(serde_yaml_ng::to_string(&v).expect("serialisable"));
        let with_kind = |mut v: serde_json::Value, api: &str, kind: &str| {
            v["apiVersion"] = api.into();
            v["kind"] = kind.into();
            v
        };
        for x in &self.priority_classes {
            push(with_kind(serde_json::to_value(x).unwrap(), "scheduling.k8s.io/v1", "PriorityClass"));
        }
        for x in &self.nodes {
            push(with_kind(serde_json::to_value(x).unwrap(), "v1", "Node"));
        }
        for x in &self.queues {
            push(serde_json::to_value(x).unwrap());
        }
        for x in &self.pod_groups {
            push(serde_json::to_value(x).unwrap());
        }
        for x in &self.pods {
            push(with_kind(serde_json::to_value(x).unwrap(), "v1", "Pod"));
        }
        docs.join("---\n")
    }
}

fn list(m: &BTreeMap<String, Quantity>) -> Vec<(String, String)> {
    m.iter().map(|(k, v)| (k.clone(), v.text())).collect()
}

fn res_pairs(v: &[(String, String)]) -> Vec<(&str, &str)> {
    v.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

impl Cluster {
    /// Expands the shorthand into Kubernetes and Volcano objects.
    pub fn expand(&self) -> Expanded {
        let mut out = Expanded::default();
        for (name, value) in &self.priority_classes {
            out.priority_classes.push(priority_class(name, *value));
        }
        for n in &self.nodes {
            let names: Vec<String> = match n.count {
                Some(c) => (0..c).map(|i| format!("{}-{i}", n.name)).collect(),
                None => vec![n.name.clone()],
            };
            for name in names {
                let mut b = node(&name, &n.cpu.text(), &n.memory.text());
                if let Some(g) = &n.gpu {
                    b = b.gpu(&g.text());
                }
                if let Some(p) = &n.pods {
                    b = b.res("pods", &p.text());
                }
                for (k, v) in &n.resources {
                    b = b.res(k, &v.text());
                }
                for (k, v) in &n.labels {
                    b = b.label(k, v);
                }
                for t in &n.taints {
                    b = b.taint(&t.key, t.value.as_deref().unwrap_or(""), &t.effect);
                }
                if n.unschedulable {
                    b = b.unschedulable();
                }
                out.nodes.push(b.build());
            }
        }
        for q in &self.queues {
            let mut b = queue(&q.name).weight(q.weight.unwrap_or(1));
            if !q.capability.is_empty() {
                b = b.capability(&res_pairs(&list(&q.capability)));
            }
            if !q.guarantee.is_empty() {
                b = b.guarantee(&res_pairs(&list(&q.guarantee)));
            }
            if !q.deserved.is_empty() {
                b = b.deserved(&res_pairs(&list(&q.deserved)));
            }
            if let Some(r) = q.reclaimable {
                b = b.reclaimable(r);
            }
            if let Some(p) = q.priority {
                b = b.priority(p);
            }
            if let Some(s) = q.state {
                b = b.state(s);
            }
            let mut queue = b.build();
            queue.spec.parent = q.parent.clone();
            out.queues.push(queue);
        }
        for (ji, j) in self.jobs.iter().enumerate() {
            let ns = j.namespace.clone().unwrap_or_else(|| "default".into());
            let created = 1_700_000_000 + j.created.unwrap_or(ji as i64);
            // (role, shape, replicas, partition size)
            let roles: Vec<(Option<&str>, &PodShape, u32, Option<u32>)> = if j.tasks.is_empty() {
                vec![(None, &j.pod, j.replicas.unwrap_or(1), j.partition_size)]
            } else {
                j.tasks.iter().map(|t| (Some(t.name.as_str()), &t.pod, t.replicas, t.partition_size)).collect()
            };
            let total: u32 = roles.iter().map(|r| r.2).sum();
            let min_member = j.min_member.unwrap_or(total as i32);
            let mut pg = pod_group(&ns, &j.name, min_member)
                .queue(j.queue.as_deref().unwrap_or("default"))
                .phase(j.phase.unwrap_or(PodGroupPhase::Pending))
                .created(created);
            if let Some(pc) = &j.priority_class {
                pg = pg.priority_class(pc);
            }
            for t in &j.tasks {
                if let Some(m) = t.min_member {
                    pg = pg.min_task_member(&t.name, m);
                }
            }
            for (k, v) in &j.annotations {
                pg = pg.annotation(k, v);
            }
            let mut pods = Vec::new();
            let mut requests = Vec::new();
            for (role, shape, replicas, partition_size) in &roles {
                for i in 0..*replicas {
                    let name = match role {
                        Some(r) => format!("{}-{r}-{i}", j.name),
                        None => format!("{}-{i}", j.name),
                    };
                    let mut b = pod(&ns, &name).group(&j.name).created(created);
                    let pick = |own: &Option<Quantity>, dflt: &Option<Quantity>| own.clone().or_else(|| dflt.clone());
                    let mut req: Vec<(String, String)> = Vec::new();
                    if let Some(c) = pick(&shape.cpu, &j.pod.cpu) {
                        req.push(("cpu".into(), c.text()));
                    }
                    if let Some(m) = pick(&shape.memory, &j.pod.memory) {
                        req.push(("memory".into(), m.text()));
                    }
                    if let Some(g) = pick(&shape.gpu, &j.pod.gpu) {
                        req.push(("nvidia.com/gpu".into(), g.text()));
                    }
                    let extra = if shape.resources.is_empty() { &j.pod.resources } else { &shape.resources };
                    req.extend(list(extra));
                    for (k, v) in &req {
                        b = b.req(k, v);
                    }
                    requests.push(req);
                    if let Some(r) = role {
                        b = b.annotation(crd::TASK_SPEC_KEY, r);
                    }
                    if let Some(size) = partition_size.filter(|s| *s > 0) {
                        if let Some(r) = role {
                            b = b.label(crd::TASK_SPEC_KEY, r);
                        }
                        b = b.label("volcano.sh/partition-id", &(i / size).to_string());
                    }
                    let selector =
                        if shape.node_selector.is_empty() { &j.pod.node_selector } else { &shape.node_selector };
                    for (k, v) in selector {
                        b = b.node_selector(k, v);
                    }
                    let tolerations =
                        if shape.tolerations.is_empty() { &j.pod.tolerations } else { &shape.tolerations };
                    for t in tolerations {
                        b = b.toleration(
                            t.key.as_deref().unwrap_or(""),
                            t.operator.as_deref().unwrap_or("Equal"),
                            t.value.as_deref().unwrap_or(""),
                            t.effect.as_deref().unwrap_or(""),
                        );
                    }
                    if let Some(p) = shape.priority.or(j.pod.priority) {
                        b = b.priority(p);
                    }
                    if let Some(pc) = &j.priority_class {
                        let pc = pc.clone();
                        b = b.with_spec(move |s| s.priority_class_name = Some(pc));
                    }
                    pods.push(b);
                }
            }
            for (i, node_name) in j.running.iter().enumerate() {
                if let Some(p) = pods.get_mut(i) {
                    *p = p.clone().running_on(node_name);
                }
            }
            match &j.min_resources {
                Some(MinResources::Keyword(k)) if k == "none" => {}
                Some(MinResources::List(l)) => pg = pg.min_resources(&res_pairs(&list(l))),
                _ => {
                    // minMember × the first pods' requests, as Volcano's job controller does.
                    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
                    for req in requests.iter().take(min_member.max(0) as usize) {
                        for (k, v) in req {
                            let x = volcano_api::quantity::parse(v).expect("valid quantity in scenario");
                            *sum.entry(k.clone()).or_default() += x;
                        }
                    }
                    let items: Vec<(String, String)> = sum
                        .into_iter()
                        .map(|(k, v)| {
                            let q = if k == "memory" {
                                volcano_api::quantity::format_bytes(v)
                            } else {
                                volcano_api::quantity::format_milli(v * 1000.0)
                            };
                            (k, q)
                        })
                        .collect();
                    if !items.is_empty() {
                        pg = pg.min_resources(&res_pairs(&items));
                    }
                }
            }
            let mut pg = pg.build();
            pg.spec.network_topology = j.network_topology.clone();
            pg.spec.sub_group_policy = j.sub_group_policy.clone();
            out.pod_groups.push(pg);
            out.pods.extend(pods.into_iter().map(|p| p.build()));
        }
        out
    }
}
