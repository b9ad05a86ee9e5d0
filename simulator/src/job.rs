//! Volcano Jobs (`batch.volcano.sh/v1alpha1`) in the simulator: each Job of the input is
//! admitted and planned with the code of the admission webhook (`volcano_api::admission`)
//! and of the job controller (`volcano_controller::plan`), and becomes its PodGroup and
//! pods before the first cycle. The plugin objects (Services, ConfigMaps, Secrets,
//! NetworkPolicies) are kept for the report; they are not scheduled.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use volcano_api::admission::{mutate_job, validate_job_create, JobErrors};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::Job;
use volcano_controller::plan::{self, JobResources, PlanError};
use volcano_controller::plugins::ssh::SshKeyPair;
use volcano_controller::plugins::JobPlugins;

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
        job,
    };
    Ok(Planned { sim_job, pod_group, pods })
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
