//! Building the session snapshot from Kubernetes objects, and the bookkeeping that keeps
//! job counters and node accounting consistent when a task changes status or node.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use thiserror::Error;
use volcano_api::crd::{self, PodGroup, PodGroupPhase, Queue, QueueState, ResourceList};
use volcano_api::quantity::QuantityError;

use crate::model::*;
use crate::resource::{Resource, PODS};

/// The Kubernetes objects a snapshot is built from (what the reflectors, the simulator or a
/// test fixture hold).
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods (all schedulers: bound pods of others still use their node).
    pub pods: Vec<Arc<Pod>>,
    /// PodGroups.
    pub pod_groups: Vec<Arc<PodGroup>>,
    /// Queues.
    pub queues: Vec<Arc<Queue>>,
    /// PriorityClasses.
    pub priority_classes: Vec<Arc<PriorityClass>>,
}

/// An object that cannot enter the snapshot.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{kind} {name}: field {field}: {source}")]
pub struct SnapshotError {
    /// Object kind.
    pub kind: &'static str,
    /// `namespace/name` or name.
    pub name: String,
    /// The offending field.
    pub field: String,
    /// What was wrong.
    #[source]
    pub source: QuantityError,
}

impl SnapshotError {
    /// A bounded label for metrics.
    pub fn category(&self) -> &'static str {
        "invalid_quantity"
    }
}

/// The state a session works on: every task, job, node and queue, by index.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Tasks (pods that are pending for this scheduler or occupy a node).
    pub tasks: Vec<TaskInfo>,
    /// Jobs (PodGroups whose queue exists).
    pub jobs: Vec<JobInfo>,
    /// Ready nodes, sorted by name.
    pub nodes: Vec<NodeInfo>,
    /// Queues, sorted by name.
    pub queues: Vec<QueueInfo>,
    /// Σ allocatable of the snapshot's nodes.
    pub total_resource: Resource,
    node_by_name: HashMap<String, NodeId>,
    queue_by_name: HashMap<String, QueueId>,
    job_by_key: HashMap<String, JobId>,
}

fn meta_key(m: &ObjectMeta) -> String {
    let name = m.name.as_deref().unwrap_or_default();
    match &m.namespace {
        Some(ns) => {
            let mut k = String::with_capacity(ns.len() + 1 + name.len());
            k.push_str(ns);
            k.push('/');
            k.push_str(name);
            k
        }
        None => name.to_string(),
    }
}

fn time_ms(t: &Option<Time>) -> i64 {
    t.as_ref().map(|t| t.0.as_millisecond()).unwrap_or(0)
}

fn annotation_or_label<'a>(m: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    m.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .or_else(|| m.labels.as_ref().and_then(|l| l.get(key)))
        .map(String::as_str)
}

fn parse_bool(v: Option<&str>, default: bool) -> bool {
    match v {
        Some(s) if s.eq_ignore_ascii_case("true") => true,
        Some(s) if s.eq_ignore_ascii_case("false") => false,
        _ => default,
    }
}

fn list_resource(kind: &'static str, name: &str, field: &str, list: &ResourceList) -> Result<Resource, SnapshotError> {
    Resource::from_list(list).map_err(|(res, source)| SnapshotError {
        kind,
        name: name.to_string(),
        field: format!("{field}.{res}"),
        source,
    })
}

/// A container's request: requests, with limits standing in for missing requests (the API
/// server defaults a missing request to the limit). `Err` names the resource.
fn container_request(c: &Container) -> Result<Resource, (String, QuantityError)> {
    let mut r = Resource::empty();
    let Some(res) = &c.resources else { return Ok(r) };
    if let Some(req) = &res.requests {
        r.add_list(req, None)?;
    }
    if let Some(limits) = &res.limits {
        r.add_list(limits, res.requests.as_ref())?;
    }
    Ok(r)
}

/// The resource request of a pod, as Volcano computes it: the sum over containers, max'ed
/// with each init container (restartable "sidecar" init containers add up), plus overhead,
/// plus `pods: 1`.
pub fn pod_request(pod: &Pod) -> Result<Resource, SnapshotError> {
    let fail = |field: String| {
        let key = meta_key(&pod.metadata);
        move |(res, source): (String, QuantityError)| SnapshotError {
            kind: "Pod",
            name: key,
            field: format!("{field}.{res}"),
            source,
        }
    };
    let Some(spec) = &pod.spec else {
        let mut r = Resource::empty();
        r.add_scalar(PODS, 1.0);
        return Ok(r);
    };
    let mut total = Resource::empty();
    for (i, c) in spec.containers.iter().enumerate() {
        let r = container_request(c).map_err(|e| fail(format!("spec.containers[{i}].resources"))(e))?;
        if i == 0 {
            total = r;
        } else {
            total.add(&r);
        }
    }
    if let Some(inits) = spec.init_containers.as_ref().filter(|v| !v.is_empty()) {
        let mut sidecars = Resource::empty();
        let mut init_max = Resource::empty();
        for (i, c) in inits.iter().enumerate() {
            let r = container_request(c).map_err(|e| fail(format!("spec.initContainers[{i}].resources"))(e))?;
            if c.restart_policy.as_deref() == Some("Always") {
                sidecars.add(&r);
                init_max.set_max(&sidecars);
            } else {
                let mut during = r;
                during.add(&sidecars);
                init_max.set_max(&during);
            }
        }
        total.add(&sidecars);
        total.set_max(&init_max);
    }
    if let Some(overhead) = &spec.overhead {
        let mut r = Resource::empty();
        r.add_list(overhead, None).map_err(|e| fail("spec.overhead".into())(e))?;
        total.add(&r);
    }
    total.add_scalar(PODS, 1.0);
    Ok(total)
}

fn task_status(pod: &Pod) -> TaskStatus {
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let has_node = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| !n.is_empty());
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending") {
        "Running" if deleting => TaskStatus::Releasing,
        "Running" => TaskStatus::Running,
        "Pending" if has_node && deleting => TaskStatus::Releasing,
        "Pending" if has_node => TaskStatus::Bound,
        "Pending" => TaskStatus::Pending,
        "Succeeded" => TaskStatus::Succeeded,
        "Failed" => TaskStatus::Failed,
        _ => TaskStatus::Unknown,
    }
}

fn name_index(name: &str) -> Option<i64> {
    if name.matches('-').count() >= 2 {
        name.rsplit('-').next().and_then(|p| p.parse().ok())
    } else {
        None
    }
}

fn node_ready(node: &Node) -> bool {
    // A node without a Ready condition (a manifest written by hand) counts as Ready.
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_none_or(|c| c.status == "True")
}

impl Snapshot {
    /// Builds the snapshot: only Ready nodes, only PodGroups whose queue exists, the pods of
    /// `scheduler_names` that wait for a node, and every pod that holds a node's resources.
    pub fn build(objects: &ClusterObjects, scheduler_names: &[&str]) -> Result<Snapshot, SnapshotError> {
        let mut s = Snapshot::default();

        let mut nodes: Vec<&Arc<Node>> = objects.nodes.iter().filter(|n| node_ready(n)).collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for n in nodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            let status = n.status.as_ref();
            let capacity = match status.and_then(|s| s.capacity.as_ref()) {
                Some(c) => list_resource("Node", &name, "status.capacity", c)?,
                None => Resource::empty(),
            };
            let allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
                Some(a) => list_resource("Node", &name, "status.allocatable", a)?,
                None => capacity.clone(),
            };
            let id = NodeId(s.nodes.len() as u32);
            s.node_by_name.insert(name.clone(), id);
            s.total_resource.add(&allocatable);
            s.nodes.push(NodeInfo {
                name,
                idle: allocatable.clone(),
                capacity,
                allocatable,
                used: Resource::empty(),
                releasing: Resource::empty(),
                pipelined: Resource::empty(),
                tasks: Vec::new(),
                unschedulable: n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false),
                node: n.clone(),
            });
        }

        let mut queues: Vec<&Arc<Queue>> = objects.queues.iter().collect();
        queues.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for q in queues {
            let name = q.metadata.name.clone().unwrap_or_default();
            let spec = &q.spec;
            let capability = match &spec.capability {
                Some(c) => Some(list_resource("Queue", &name, "spec.capability", c)?),
                None => None,
            };
            let deserved = match &spec.deserved {
                Some(c) => Some(list_resource("Queue", &name, "spec.deserved", c)?),
                None => None,
            };
            let guarantee = match spec.guarantee.as_ref().and_then(|g| g.resource.as_ref()) {
                Some(c) => list_resource("Queue", &name, "spec.guarantee.resource", c)?,
                None => Resource::empty(),
            };
            let id = QueueId(s.queues.len() as u32);
            s.queue_by_name.insert(name.clone(), id);
            s.queues.push(QueueInfo {
                weight: spec.weight.unwrap_or(1),
                capability,
                deserved,
                guarantee,
                reclaimable: spec.reclaimable.unwrap_or(true),
                priority: spec.priority.unwrap_or(0),
                state: q.status.as_ref().and_then(|st| st.state).unwrap_or(QueueState::Open),
                parent: spec.parent.clone(),
                creation_ms: time_ms(&q.metadata.creation_timestamp),
                name,
                queue: q.clone(),
            });
        }

        let priority_of: HashMap<&str, i32> = objects
            .priority_classes
            .iter()
            .filter_map(|pc| pc.metadata.name.as_deref().map(|n| (n, pc.value)))
            .collect();
        let global_default =
            objects.priority_classes.iter().filter(|pc| pc.global_default == Some(true)).map(|pc| pc.value).max();

        let mut pgs: Vec<&Arc<PodGroup>> = objects.pod_groups.iter().collect();
        pgs.sort_by_cached_key(|pg| meta_key(&pg.metadata));
        for pg in pgs {
            let key = meta_key(&pg.metadata);
            let queue_name = pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or("default");
            let Some(&queue) = s.queue_by_name.get(queue_name) else {
                tracing::debug!(job = %key, queue = queue_name, "queue not found: job skipped");
                continue;
            };
            let min_resources = match &pg.spec.min_resources {
                Some(m) => Some(list_resource("PodGroup", &key, "spec.minResources", m)?),
                None => None,
            };
            let priority = pg
                .spec
                .priority_class_name
                .as_deref()
                .and_then(|n| priority_of.get(n).copied())
                .or(global_default)
                .unwrap_or(0);
            let waiting_time_ms = annotation_or_label(&pg.metadata, crd::SLA_WAITING_TIME_ANNOTATION)
                .or_else(|| {
                    pg.metadata.annotations.as_ref().and_then(|a| a.get("sla-waiting-time")).map(String::as_str)
                })
                .and_then(parse_duration_ms);
            let id = JobId(s.jobs.len() as u32);
            s.job_by_key.insert(key.clone(), id);
            let task_min_available = pg.spec.min_task_member.clone();
            s.jobs.push(JobInfo {
                uid: pg.metadata.uid.clone().unwrap_or_else(|| key.clone()),
                name: pg.metadata.name.clone().unwrap_or_default(),
                namespace: pg.metadata.namespace.clone().unwrap_or_default(),
                queue,
                priority,
                min_available: pg.spec.min_member,
                task_min_available_total: task_min_available.values().sum(),
                task_min_available,
                min_resources,
                preemptable: parse_bool(annotation_or_label(&pg.metadata, crd::PREEMPTABLE_KEY), false),
                waiting_time_ms,
                creation_ms: time_ms(&pg.metadata.creation_timestamp),
                phase: pg.status.as_ref().and_then(|st| st.phase).unwrap_or(PodGroupPhase::Pending),
                tasks: Vec::new(),
                status_counts: [0; TaskStatus::COUNT],
                pending_best_effort: 0,
                allocated: Resource::empty(),
                total_request: Resource::empty(),
                fit_errors: BTreeMap::new(),
                job_fit_error: None,
                pod_group: pg.clone(),
                key,
            });
        }

        let mut pods: Vec<(String, &Arc<Pod>)> = objects.pods.iter().map(|p| (meta_key(&p.metadata), p)).collect();
        pods.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut group_key = String::new();
        for (key, pod) in pods {
            let spec = pod.spec.as_ref();
            let node_name = spec.and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty());
            let ours = spec.and_then(|s| s.scheduler_name.as_deref()).is_some_and(|n| scheduler_names.contains(&n));
            if node_name.is_none() && !ours {
                continue;
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let job = if ours {
                pod.metadata.annotations.as_ref().and_then(|a| a.get(crd::GROUP_NAME_ANNOTATION)).and_then(|g| {
                    group_key.clear();
                    group_key.push_str(namespace);
                    group_key.push('/');
                    group_key.push_str(g);
                    s.job_by_key.get(group_key.as_str()).copied()
                })
            } else {
                None
            };
            let node = node_name.and_then(|n| s.node_by_name.get(n).copied());
            if node_name.is_some() && node.is_none() && job.is_none() {
                // A foreign pod on a node outside the snapshot: irrelevant.
                continue;
            }
            let status = task_status(pod);
            let resreq = pod_request(pod)?;
            let task_priority = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crd::TASK_PRIORITY_ANNOTATION))
                .and_then(|v| v.parse().ok())
                .or_else(|| spec.and_then(|s| s.priority))
                .or_else(|| {
                    spec.and_then(|s| s.priority_class_name.as_deref()).and_then(|n| priority_of.get(n).copied())
                })
                .unwrap_or(1);
            let id = TaskId(s.tasks.len() as u32);
            let key: Arc<str> = Arc::from(key);
            s.tasks.push(TaskInfo {
                uid: pod.metadata.uid.as_deref().map(Arc::from).unwrap_or_else(|| key.clone()),
                ns_len: namespace.len() as u32,
                role: annotation_or_label(&pod.metadata, crd::TASK_SPEC_KEY).unwrap_or_default().to_string(),
                best_effort: resreq.is_empty(),
                resreq,
                priority: task_priority,
                preemptable: parse_bool(annotation_or_label(&pod.metadata, crd::PREEMPTABLE_KEY), true),
                status,
                node: None,
                nominated_node: pod.status.as_ref().and_then(|s| s.nominated_node_name.clone()),
                preemption_never: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
                sch_gated: spec.and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty()),
                creation_ms: time_ms(&pod.metadata.creation_timestamp),
                name_index: name_index(pod.metadata.name.as_deref().unwrap_or_default()),
                last_tx: None,
                key,
                job,
                pod: pod.clone(),
            });
            if let Some(j) = job {
                s.job_attach_task(j, id);
            }
            if let Some(n) = node {
                if !status.is_completed() {
                    s.tasks[id.idx()].node = Some(n);
                    s.node_add_task(n, id);
                }
            }
        }
        Ok(s)
    }

    /// The node with this name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.node_by_name.get(name).copied()
    }

    /// The queue with this name.
    pub fn queue_id(&self, name: &str) -> Option<QueueId> {
        self.queue_by_name.get(name).copied()
    }

    /// The job with this `namespace/name`.
    pub fn job_id(&self, key: &str) -> Option<JobId> {
        self.job_by_key.get(key).copied()
    }

    /// The task.
    #[inline]
    pub fn task(&self, t: TaskId) -> &TaskInfo {
        &self.tasks[t.idx()]
    }

    /// The job.
    #[inline]
    pub fn job(&self, j: JobId) -> &JobInfo {
        &self.jobs[j.idx()]
    }

    /// The node.
    #[inline]
    pub fn node(&self, n: NodeId) -> &NodeInfo {
        &self.nodes[n.idx()]
    }

    /// The queue.
    #[inline]
    pub fn queue(&self, q: QueueId) -> &QueueInfo {
        &self.queues[q.idx()]
    }

    /// The queue of a job.
    pub fn job_queue(&self, j: JobId) -> &QueueInfo {
        &self.queues[self.jobs[j.idx()].queue.idx()]
    }

    fn job_attach_task(&mut self, j: JobId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let job = &mut self.jobs[j.idx()];
        job.tasks.push(t);
        job.total_request.add(&task.resreq);
        Self::count_in(job, task, 1);
    }

    fn count_in(job: &mut JobInfo, task: &TaskInfo, sign: i32) {
        let c = &mut job.status_counts[task.status as usize];
        *c = (*c as i32 + sign) as u32;
        if task.status.is_allocated() {
            if sign > 0 {
                job.allocated.add(&task.resreq);
            } else {
                job.allocated.sub_unchecked(&task.resreq);
            }
        }
        if task.status == TaskStatus::Pending && task.best_effort {
            job.pending_best_effort = (job.pending_best_effort as i32 + sign) as u32;
        }
    }

    /// Changes a task's status, keeping its job's counters and allocated resources in step.
    pub fn set_task_status(&mut self, t: TaskId, status: TaskStatus) {
        let task = &mut self.tasks[t.idx()];
        if task.status == status {
            return;
        }
        if let Some(j) = task.job {
            let job = &mut self.jobs[j.idx()];
            Self::count_in(job, task, -1);
            task.status = status;
            Self::count_in(job, task, 1);
        } else {
            task.status = status;
        }
    }

    /// Accounts a task on a node according to its current status (Volcano `AddTask`).
    pub fn node_add_task(&mut self, n: NodeId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let node = &mut self.nodes[n.idx()];
        match task.status {
            TaskStatus::Releasing => {
                node.idle.sub_unchecked(&task.resreq);
                node.used.add(&task.resreq);
                node.releasing.add(&task.resreq);
            }
            TaskStatus::Pipelined => {
                node.pipelined.add(&task.resreq);
            }
            _ => {
                node.idle.sub_unchecked(&task.resreq);
                node.used.add(&task.resreq);
            }
        }
        node.tasks.push(t);
    }

    /// Reverses [`Snapshot::node_add_task`] for the task's current status.
    pub fn node_remove_task(&mut self, n: NodeId, t: TaskId) {
        let task = &self.tasks[t.idx()];
        let node = &mut self.nodes[n.idx()];
        match task.status {
            TaskStatus::Releasing => {
                node.idle.add(&task.resreq);
                node.used.sub_unchecked(&task.resreq);
                node.releasing.sub_unchecked(&task.resreq);
            }
            TaskStatus::Pipelined => {
                node.pipelined.sub_unchecked(&task.resreq);
            }
            _ => {
                node.idle.add(&task.resreq);
                node.used.sub_unchecked(&task.resreq);
            }
        }
        if let Some(pos) = node.tasks.iter().rposition(|x| *x == t) {
            node.tasks.swap_remove(pos);
        }
    }
}

/// Parses a Go duration (`1h30m`, `90s`, `500ms`) into milliseconds.
pub fn parse_duration_ms(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        if num_end == 0 {
            return None;
        }
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let factor = match &rest[..unit_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return None,
        };
        total += n * factor;
        rest = &rest[unit_end..];
    }
    Some(total.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(parse_duration_ms("90s"), Some(90_000));
        assert_eq!(parse_duration_ms("500ms"), Some(500));
        assert_eq!(parse_duration_ms("10"), None);
        assert_eq!(parse_duration_ms("abc"), None);
    }

    #[test]
    fn name_index_needs_three_fields() {
        assert_eq!(name_index("job-a-3"), Some(3));
        assert_eq!(name_index("job-3"), None);
        assert_eq!(name_index("job-a-x"), None);
    }
}
