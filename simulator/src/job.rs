//! Volcano Jobs (`batch.volcano.sh/v1alpha1`) in the simulator: each Job of the input is
//! admitted with the code of the admission webhook (`volcano_api::admission`) and kept as a
//! [`SimJob`], with what the job controller remembers of it. The job controller itself is
//! [`crate::control`]: it plans every step with `volcano_controller::plan::step`, as the
//! controller in a cluster does.

use std::collections::BTreeMap;
use std::sync::Arc;

use volcano_api::admission::{mutate_job, validate_job_create, JobErrors};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::{iteration, Job, JobPhase, TaskSpec};
use volcano_controller::memory::JobMemory;
use volcano_controller::plan::{self, JobResources, PlanError, TaskReadiness};
use volcano_controller::plugins::ssh::SshKeyPair;
use volcano_controller::plugins::{pod_name, JobPlugins};
use volcano_framework::pod::SchedPod as Pod;

use crate::error::{InputError, Origin};
use crate::manifest::{object_key, ObjectKind};

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

/// A Job of the input, admitted, and what the job controller keeps of it.
#[derive(Clone, Debug)]
pub struct SimJob {
    /// The job as admitted (`mutate_job`'s defaults applied), with its uid and the status
    /// the job controller writes.
    pub job: Job,
    /// `namespace/name` of its PodGroup.
    pub pod_group: String,
    /// `namespace/name` of its pods, in plan order (task by task, index by index), whether
    /// they exist or not.
    pub pods: Vec<String>,
    /// The enabled job plugins, in the order they ran.
    pub plugins: Vec<String>,
    /// What the plugins created besides the pods.
    pub resources: JobResources,
    /// Where the job was written (for errors in the pods it plans).
    pub origin: Option<Origin>,
    /// What the job controller remembers of the job between reconciles.
    pub memory: JobMemory,
    /// How many times the job controller created each of the job's pods (by key): a pod
    /// created again under the same name is another object, with another uid.
    pub created: BTreeMap<String, u32>,
    /// The job changed (applied again, resized by the autoscaler, or new): the job
    /// controller syncs it after the next cycle, as a watch event would make it.
    pub dirty: bool,
    /// When the job controller looks at the job again by itself (a resize's grace period
    /// or ready timeout), milliseconds since the epoch.
    pub wake_at_ms: Option<i64>,
    /// What the job controller's last pass saw of the job's objects, and whether it is quiet
    /// ([`Seen`]). A change to `job` must set `dirty` (or clear this).
    pub seen: Option<Seen>,
}

/// What the job controller saw of a job at its last pass after the cycles began
/// ([`crate::control::reconcile_jobs`]): the job's pods (in [`SimJob::pods`] order) and
/// PodGroup as the cluster shares them, compared by identity (a changed object is a new
/// `Arc`: the cluster changes objects with `Arc::make_mut`, which copies an object this
/// holds), and whether passes over these objects have changed nothing since
/// `quiet_since_ms`.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    pub(crate) pods: Vec<Option<Arc<Pod>>>,
    pub(crate) pod_group: Option<Arc<PodGroup>>,
    /// The time of the pass that saw these objects a second time and changed nothing: the
    /// job is quiet from then on, until something it depends on changes.
    pub(crate) quiet_since_ms: Option<i64>,
}

impl SimJob {
    /// The job's phase (`Pending` before the controller wrote one).
    pub fn phase(&self) -> JobPhase {
        self.job.status.as_ref().and_then(|s| s.state.phase.clone()).unwrap_or(JobPhase::Pending)
    }

    /// The job's pods that exist among `pods`, in plan order.
    pub fn existing_pods<'a>(&'a self, pods: &'a BTreeMap<String, Arc<Pod>>) -> impl Iterator<Item = &'a Arc<Pod>> {
        self.pods.iter().filter_map(|k| pods.get(k))
    }

    /// The tasks with `dependsOn` whose pods are not all created, in plan order, each with
    /// the keys of its missing pods.
    pub fn waiting_tasks(&self, pods: &BTreeMap<String, Arc<Pod>>) -> Vec<(&str, Vec<String>)> {
        let ns = self.job.metadata.namespace.as_deref().unwrap_or_default();
        let name = self.job.metadata.name.as_deref().unwrap_or_default();
        let mut out = Vec::new();
        for task in self.job.spec.tasks.iter().filter(|t| has_depends_on(t)) {
            let missing: Vec<String> = (0..task.replicas.max(0))
                .map(|i| format!("{ns}/{}", pod_name(name, task.name(), i)))
                .filter(|k| !pods.contains_key(k))
                .collect();
            if !missing.is_empty() {
                out.push((task.name(), missing));
            }
        }
        out
    }

    /// Why the pods of `task` are not created yet: the tasks of its `dependsOn` that are not
    /// ready, with their ready pods and the number they need, and the PodGroup if it has
    /// not left Pending.
    pub fn waiting_reason(
        &self,
        task: &str,
        pods: &BTreeMap<String, Arc<Pod>>,
        pod_groups: &BTreeMap<String, Arc<PodGroup>>,
    ) -> String {
        let readiness = self.readiness(pods);
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
        if !plan::admitted(pod_groups.get(&self.pod_group).map(|g| &**g)) {
            parts.push(format!(
                "its PodGroup {} is Pending: the job controller creates pods once the PodGroup is admitted",
                self.pod_group
            ));
        }
        if parts.is_empty() {
            // Not reached after a cycle: the job controller runs after every one.
            parts.push("dependsOn is met: the job controller creates them after the next cycle".into());
        }
        parts.join("; and ")
    }

    /// The readiness of the job's tasks, from its pods that exist.
    fn readiness(&self, pods: &BTreeMap<String, Arc<Pod>>) -> BTreeMap<String, TaskReadiness> {
        plan::task_readiness(self.existing_pods(pods).map(|p| parts(p)))
    }
}

/// A pod's parts as the controller's pure functions read them (its node from beside the
/// shared spec).
pub(crate) fn parts(p: &Pod) -> plan::PodParts<'_> {
    plan::PodParts {
        metadata: &p.metadata,
        spec: p.spec.as_deref(),
        node_name: p.node_name(),
        status: p.status.as_ref(),
    }
}

/// Whether a task's pods wait for `dependsOn` (it names at least one task).
fn has_depends_on(task: &TaskSpec) -> bool {
    task.depends_on.as_ref().is_some_and(|d| !d.name.is_empty())
}

pub(crate) fn job_error(
    origin: Option<&Origin>,
    job: &str,
    field: impl Into<String>,
    message: impl Into<String>,
) -> InputError {
    InputError::Field {
        origin: origin.cloned().map(Box::new),
        kind: "Job",
        object: job.to_string(),
        field: field.into(),
        message: message.into(),
    }
}

pub(crate) fn admission_error(origin: Option<&Origin>, job: &str, errors: &JobErrors) -> InputError {
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

/// A plan error as an input error naming the job and, when there is one, the field.
pub(crate) fn plan_error(origin: Option<&Origin>, job: &str, e: PlanError) -> InputError {
    match e {
        PlanError::Quantity { field, source, .. } => job_error(origin, job, field, source.to_string()),
        PlanError::Plugin(p) => job_error(origin, job, "spec.plugins", p.to_string()),
        other => job_error(origin, job, "", other.to_string()),
    }
}

/// Admits one Job, as Volcano's webhook would: `mutate_job` (queue `default`,
/// `schedulerName` = `scheduler_name` when unset), `validate_job_create` against `queues`,
/// at most [`MAX_JOB_PODS`] pods, plugins that parse. Every pod the job can have is planned
/// once here, so that a pod template the API server would refuse is an input error before
/// the first cycle (the pods themselves are created by the job controller, [`crate::control`]).
/// The job must have its namespace and uid already.
pub fn admit_job(
    job: &Job,
    origin: Option<&Origin>,
    scheduler_name: &str,
    queues: &[Queue],
    priority_class_values: &BTreeMap<String, i32>,
) -> Result<(SimJob, Vec<plan::NewPod>), InputError> {
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
    let mut all = Vec::new();
    for (ti, t) in job.spec.tasks.iter().enumerate() {
        for i in 0..t.replicas.max(0) {
            let pod = plan::pod(&job, &plugins, ti, i).map_err(|e| plan_error(origin, &key, e))?;
            all.push(plan::NewPod { task_index: ti, replica: i, pod });
        }
    }
    let sim_job = SimJob {
        pod_group: object_key(ObjectKind::PodGroup, &pod_group.metadata),
        pods: all.iter().map(|n| object_key(ObjectKind::Pod, &n.pod.metadata)).collect(),
        plugins: plugins.names().into_iter().map(str::to_string).collect(),
        resources: JobResources::default(),
        origin: origin.cloned(),
        memory: JobMemory::new(job.metadata.uid.as_deref().unwrap_or_default()),
        created: BTreeMap::new(),
        dirty: false,
        wake_at_ms: None,
        seen: None,
        job,
    };
    Ok((sim_job, all))
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
