//! Volcano Jobs (`batch.volcano.sh/v1alpha1`) in the simulator: each Job of the input is
//! admitted and planned with the code of the admission webhook (`volcano_api::admission`)
//! and of the job controller (`volcano_controller::plan`), and becomes its PodGroup and
//! pods before the first cycle, but for the pods of tasks with `dependsOn`: those wait in
//! [`SimJob::waiting`] until [`create_ready_pods`] creates them, as the job controller does,
//! once the PodGroup has left Pending and the tasks they depend on are ready. The plugin
//! objects (Services, ConfigMaps, Secrets, NetworkPolicies) are kept for the report; they
//! are not scheduled.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volcano_api::admission::{mutate_job, validate_job_create, JobErrors};
use volcano_api::crd::{PodGroup, PodGroupPhase, Queue};
use volcano_api::job::{iteration, Job, TaskSpec};
use volcano_controller::plan::{self, JobResources, PlanError, TaskReadiness};
use volcano_controller::plugins::ssh::SshKeyPair;
use volcano_controller::plugins::JobPlugins;

use crate::cluster::Cluster;
use crate::error::InputError;
use crate::manifest::{object_key, ObjectKind, Origin};

/// The private key of the simulation's fixed ssh key pair (PKCS#1 PEM). It is published
/// in the source of volcano-rs: it is not a secret and must never be used on a cluster.
/// A fixed key keeps the output deterministic; the report never prints Secret values.
pub const SIMULATION_SSH_PRIVATE_KEY: &str = include_str!("simulation-key/simulation_id_rsa");
/// The public key of the simulation's fixed ssh key pair (`ssh-rsa AAAA...`).
pub const SIMULATION_SSH_PUBLIC_KEY: &str = include_str!("simulation-key/simulation_id_rsa.pub");

/// The fixed, public, simulation-only key pair given to the `ssh` plugin.
pub fn simulation_key_pair() -> SshKeyPair {
    SshKeyPair {
        private_key_pem: SIMULATION_SSH_PRIVATE_KEY.to_string(),
        public_key: SIMULATION_SSH_PUBLIC_KEY.to_string(),
    }
}

/// The most pods the simulator plans for one Job: a typo in `replicas` must be an error,
/// not a run out of memory.
pub const MAX_JOB_PODS: i64 = 100_000;

/// A Job of the input after admission and planning.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// The job as admitted (`mutate_job`'s defaults applied), with its uid.
    pub job: Job,
    /// `namespace/name` of its PodGroup.
    pub pod_group: String,
    /// `namespace/name` of its pods, in plan order (task by task, index by index).
    pub pods: Vec<String>,
    /// The enabled job plugins, in the order they ran.
    pub plugins: Vec<String>,
    /// What the plugins create besides the pods.
    pub resources: JobResources,
    /// The pods the job controller has not created yet, each with its task's name, in plan
    /// order: their task has `dependsOn`, and its PodGroup is still Pending or the tasks it
    /// depends on are not ready ([`create_ready_pods`] creates them).
    pub waiting: Vec<(String, Pod)>,
}

impl SimJob {
    /// The tasks with pods not created yet, in plan order, each with its pods' keys.
    pub fn waiting_tasks(&self) -> Vec<(&str, Vec<String>)> {
        let mut out: Vec<(&str, Vec<String>)> = Vec::new();
        for (task, pod) in &self.waiting {
            let key = object_key(ObjectKind::Pod, &pod.metadata);
            match out.last_mut() {
                Some((t, keys)) if *t == task.as_str() => keys.push(key),
                _ => out.push((task.as_str(), vec![key])),
            }
        }
        out
    }

    /// Why the pods of `task` are not created yet: the tasks of its `dependsOn` that are not
    /// ready, with their ready pods and the number they need, and the PodGroup if it has
    /// not left Pending.
    pub fn waiting_reason(&self, task: &str, cluster: &Cluster) -> String {
        let readiness = self.readiness(cluster);
        let tasks = &self.job.spec.tasks;
        let mut parts = Vec::new();
        if let Some(deps) = tasks.iter().find(|t| t.name() == task).and_then(|t| t.depends_on.as_ref()) {
            let how = deps.iteration.as_deref().unwrap_or(iteration::ALL);
            let blockers: Vec<String> = deps
                .name
                .iter()
                .filter(|d| !plan::task_ready(&self.job, d, &readiness))
                .map(|d| match tasks.iter().find(|t| t.name() == d.as_str()) {
                    Some(t) => format!(
                        "task {d} has {} of the {} ready pods it needs",
                        readiness.get(d.as_str()).copied().unwrap_or_default().ready(),
                        plan::task_min_available(t)
                    ),
                    None => format!("the job has no task {d}"),
                })
                .collect();
            if !plan::ready_to_create(&self.job, task, &readiness) {
                parts.push(format!(
                    "waits for dependsOn {} (iteration {how}): {} (ready: Running with every container ready, \
                     or Succeeded)",
                    deps.name.join(", "),
                    blockers.join("; ")
                ));
            }
        }
        if !admitted(cluster, &self.pod_group) {
            parts.push(format!(
                "its PodGroup {} is Pending: the job controller creates pods once the PodGroup is admitted",
                self.pod_group
            ));
        }
        if parts.is_empty() {
            // Not reached after a cycle: create_ready_pods runs after every one.
            parts.push("dependsOn is met: the job controller creates them after the next cycle".into());
        }
        parts.join("; and ")
    }

    /// The readiness of the job's tasks, from its pods that exist.
    fn readiness(&self, cluster: &Cluster) -> BTreeMap<String, TaskReadiness> {
        plan::task_readiness(self.pods.iter().filter_map(|k| cluster.pods.get(k)).map(|p| &**p))
    }
}

/// Whether a task's pods wait for `dependsOn` (it names at least one task).
fn has_depends_on(task: &TaskSpec) -> bool {
    task.depends_on.as_ref().is_some_and(|d| !d.name.is_empty())
}

/// Whether the PodGroup `key` exists and has left Pending (Volcano's `syncJob` creates pods
/// only then).
fn admitted(cluster: &Cluster, key: &str) -> bool {
    cluster
        .pod_groups
        .get(key)
        .and_then(|pg| pg.status.as_ref().and_then(|s| s.phase))
        .is_some_and(|p| p != PodGroupPhase::Pending)
}

/// What the job controller does for `dependsOn` between cycles (Volcano's `syncJob`): for
/// every job whose PodGroup has left Pending, the waiting pods of each task that
/// [`plan::ready_to_create`] allows, given [`plan::task_readiness`] of the job's pods, are
/// added to the cluster, dated `created_ms` when given. Returns their keys, in job and plan
/// order.
pub fn create_ready_pods(cluster: &mut Cluster, created_ms: Option<i64>) -> Vec<String> {
    let created_at = created_ms.map(|ms| Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap_or_default()));
    let mut created = Vec::new();
    let keys: Vec<String> =
        cluster.jobs.iter().filter(|(_, j)| !j.waiting.is_empty()).map(|(k, _)| k.clone()).collect();
    for key in keys {
        let sj = &cluster.jobs[&key];
        if !admitted(cluster, &sj.pod_group) {
            continue;
        }
        let readiness = sj.readiness(cluster);
        let mut open: BTreeMap<&str, bool> = BTreeMap::new();
        for (task, _) in &sj.waiting {
            open.entry(task).or_insert_with(|| plan::ready_to_create(&sj.job, task, &readiness));
        }
        if !open.values().any(|o| *o) {
            continue;
        }
        let open: Vec<String> = open.into_iter().filter(|(_, o)| *o).map(|(t, _)| t.to_string()).collect();
        let sj = cluster.jobs.get_mut(&key).expect("listed above");
        let (now, later) = std::mem::take(&mut sj.waiting).into_iter().partition(|(t, _)| open.contains(t));
        sj.waiting = later;
        for (_, mut pod) in now {
            if let Some(t) = &created_at {
                pod.metadata.creation_timestamp = Some(t.clone());
            }
            let pod_key = object_key(ObjectKind::Pod, &pod.metadata);
            tracing::debug!(job = %key, pod = %pod_key, "dependsOn met: pod created");
            cluster.pods.insert(pod_key.clone(), Arc::new(pod));
            created.push(pod_key);
        }
    }
    created
}

/// A Job planned: the objects to add to the cluster.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The record kept for the report.
    pub sim_job: SimJob,
    /// The PodGroup.
    pub pod_group: PodGroup,
    /// The pods, each with the index of its task in `spec.tasks`.
    pub pods: Vec<(usize, Pod)>,
}

fn job_error(origin: Option<&Origin>, job: &str, field: impl Into<String>, message: impl Into<String>) -> InputError {
    InputError::Field {
        origin: origin.cloned().map(Box::new),
        kind: "Job",
        object: job.to_string(),
        field: field.into(),
        message: message.into(),
    }
}

fn admission_error(origin: Option<&Origin>, job: &str, errors: &JobErrors) -> InputError {
    let Some(first) = errors.errors.first() else {
        return job_error(origin, job, "", "rejected by the job admission webhook");
    };
    let mut message = format!("{} ({:?})", first.message, first.rule);
    for e in &errors.errors[1..] {
        message.push_str(&format!("; and field {}: {} ({:?})", e.field, e.message, e.rule));
    }
    message.push_str(": Volcano's job admission webhook rejects the job");
    job_error(origin, job, first.field.clone(), message)
}

fn plan_error(origin: Option<&Origin>, job: &str, e: PlanError) -> InputError {
    match e {
        PlanError::Quantity { field, source, .. } => job_error(origin, job, field, source.to_string()),
        PlanError::Plugin(p) => job_error(origin, job, "spec.plugins", p.to_string()),
        other => job_error(origin, job, "", other.to_string()),
    }
}

/// Admits and plans one Job, as Volcano's webhook and job controller would:
/// `mutate_job` (queue `default`, `schedulerName` = `scheduler_name` when unset),
/// `validate_job_create` against `queues`, then the PodGroup, the pods and the plugin
/// objects. The job must have its namespace and uid already.
pub fn plan_job(
    job: &Job,
    origin: Option<&Origin>,
    scheduler_name: &str,
    queues: &[Queue],
    priority_class_values: &BTreeMap<String, i32>,
) -> Result<Planned, InputError> {
    let key = object_key(ObjectKind::Job, &job.metadata);
    let job = mutate_job(job, "default", scheduler_name);
    validate_job_create(&job, queues).map_err(|e| admission_error(origin, &key, &e))?;
    let total: i64 = job.spec.tasks.iter().map(|t| i64::from(t.replicas.max(0))).sum();
    if total > MAX_JOB_PODS {
        return Err(job_error(
            origin,
            &key,
            "spec.tasks",
            format!("{total} replicas in total: the simulator plans at most {MAX_JOB_PODS} pods per Job"),
        ));
    }
    let plugins = JobPlugins::from_job(&job).map_err(|e| job_error(origin, &key, "spec.plugins", e.to_string()))?;
    let pod_group = plan::pod_group(&job, priority_class_values).map_err(|e| plan_error(origin, &key, e))?;
    let pods = plan::pods(&job, &plugins).map_err(|e| plan_error(origin, &key, e))?;
    let ssh_key = plugins.needs_ssh_key(&job).then(simulation_key_pair);
    let resources = plan::job_resources(&job, &plugins, ssh_key.as_ref()).map_err(|e| plan_error(origin, &key, e))?;
    let task_index = |pod: &Pod| {
        let task = pod.metadata.annotations.as_ref().and_then(|a| a.get(volcano_api::crd::TASK_SPEC_KEY));
        job.spec.tasks.iter().position(|t| Some(t.name()) == task.map(String::as_str)).unwrap_or_default()
    };
    let pods: Vec<(usize, Pod)> = pods.into_iter().map(|p| (task_index(&p), p)).collect();
    let sim_job = SimJob {
        pod_group: object_key(ObjectKind::PodGroup, &pod_group.metadata),
        pods: pods.iter().map(|(_, p)| object_key(ObjectKind::Pod, &p.metadata)).collect(),
        plugins: plugins.names().into_iter().map(str::to_string).collect(),
        resources,
        waiting: Vec::new(),
        job,
    };
    Ok(Planned { sim_job, pod_group, pods })
}

impl Planned {
    /// Whether the pod of the task at `task_index` waits for its task's `dependsOn` instead
    /// of being created at load time; with the task's name.
    pub fn waits(&self, task_index: usize) -> Option<String> {
        let task = self.sim_job.job.spec.tasks.get(task_index)?;
        has_depends_on(task).then(|| task.name().to_string())
    }
}

/// An error found in a planned pod, moved to the field of the job's task template it came
/// from (`spec.containers[0]...` → `spec.tasks[1].template.spec.containers[0]...`).
pub fn in_template(e: InputError, job: &str, origin: Option<&Origin>, task_index: usize) -> InputError {
    match e {
        InputError::Field { field, message, object, .. } => {
            let field = if field.is_empty() {
                format!("spec.tasks[{task_index}].template")
            } else {
                format!("spec.tasks[{task_index}].template.{field}")
            };
            job_error(origin, job, field, format!("{message} (in pod {object})"))
        }
        other => other,
    }
}
