//! The job plugins (`spec.plugins`): what each adds to the job's pods (`OnPodCreate`) and
//! which objects it asks for (`OnJobAdd`), as pure functions of the Job.
//!
//! [`JobPlugins::from_job`] checks every enabled plugin's arguments with
//! [`volcano_api::job_plugins::check`] (what the admission webhook checks too, so a job the
//! planner refuses is refused at admission with the same reason) and refuses an unknown
//! plugin, an unknown argument, a malformed value or a missing role task with a
//! [`PluginError`] that names the job, the plugin and the argument.
//!
//! The plugins run in a fixed order, [`ORDER`] (Volcano walks a Go map, whose order is
//! random): `env`, `svc`, `ssh`, then the framework plugins `tensorflow`, `pytorch`, `mxnet`,
//! `mpi`. docs/jobs.md lists what each one injects.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Container, ContainerPort, EnvVar, Pod, PodSpec};
use volcano_api::job::{Job, TaskSpec};
use volcano_api::job_plugins;
use volcano_api::quantity;

use crate::objects::{JobResources, ObjectNames};

pub mod env;
pub mod launch;
pub mod mpi;
pub mod mxnet;
pub mod pytorch;
pub mod ssh;
pub mod svc;
pub mod tensorflow;

pub use volcano_api::job_plugins::{PluginError, NOT_IMPLEMENTED, ORDER};

/// The GPU resource that sizes processes per pod (PyTorch) and MPI slots.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// `namespace/name` of a job, for errors.
pub(crate) fn job_key(job: &Job) -> String {
    format!("{}/{}", job.metadata.namespace.as_deref().unwrap_or_default(), job_name(job))
}

/// The job's name.
pub(crate) fn job_name(job: &Job) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// What a plugin's `OnPodCreate` knows about the pod being made.
#[derive(Clone, Copy, Debug)]
pub struct PodContext<'a> {
    /// The job (defaulted by `mutate_job`).
    pub job: &'a Job,
    /// The pod's task.
    pub task: &'a TaskSpec,
    /// The index of the task in `spec.tasks`.
    pub task_index: usize,
    /// The pod's index in its task.
    pub replica: i32,
}

impl PodContext<'_> {
    /// The job's name.
    pub fn job_name(&self) -> &str {
        job_name(self.job)
    }

    /// The pod's task name.
    pub fn task_name(&self) -> &str {
        self.task.name()
    }
}

/// What a plugin's `OnJobAdd` gets besides the job.
#[derive(Clone, Copy, Debug, Default)]
pub struct JobAddContext<'a> {
    /// The key pair of the `ssh` plugin, when it has no `--ssh-private-key` argument (see
    /// [`ssh::generate_key_pair`]).
    pub ssh_key: Option<&'a ssh::SshKeyPair>,
}

/// A job plugin: idempotent hooks that mutate a pod or add objects, never IO.
pub trait JobPlugin: fmt::Debug + Send + Sync {
    /// The plugin's name (its `spec.plugins` key).
    fn name(&self) -> &'static str;

    /// Mutates a pod of the job as it is made (Volcano's `OnPodCreate`).
    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError>;

    /// Adds the objects the plugin needs for the job (Volcano's `OnJobAdd`); the plan
    /// records `controlledResources["plugin-<name>"] = <name>` for every plugin.
    fn on_job_add(&self, _job: &Job, _ctx: &JobAddContext<'_>, _out: &mut JobResources) -> Result<(), PluginError> {
        Ok(())
    }

    /// The host-list ConfigMaps the plugin keeps, naming the members of `hosts` (Volcano's
    /// `OnJobUpdate`, where `svc` refreshes its hosts ConfigMap): planned on every sync,
    /// created when missing and updated when they differ.
    fn host_lists(&self, _job: &Job, _hosts: &Hosts, _out: &mut Vec<ConfigMap>) {}

    /// The objects the plugin's `OnJobDelete` removes when the job is killed.
    fn on_job_delete(&self, _job: &Job, _out: &mut ObjectNames) {}
}

/// The members (pod indices) of each task that the host lists name: every replica for a
/// new job, then what [`crate::scale`] publishes as the job is resized. A task without an
/// entry names every replica.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hosts(BTreeMap<String, BTreeSet<i32>>);

impl Hosts {
    /// Every replica of every task (Volcano's host lists).
    pub fn all(job: &Job) -> Self {
        Hosts(job.spec.tasks.iter().map(|t| (t.name().to_string(), (0..t.replicas.max(0)).collect())).collect())
    }

    /// Sets the members of `task`.
    pub fn set(&mut self, task: &str, members: BTreeSet<i32>) {
        self.0.insert(task.to_string(), members);
    }

    /// The members of `task`: its entry, else every replica.
    pub fn members(&self, task: &TaskSpec) -> BTreeSet<i32> {
        self.0.get(task.name()).cloned().unwrap_or_else(|| (0..task.replicas.max(0)).collect())
    }

    /// The DNS names of the members of `task` ([`domain_name`]); a template with a fixed
    /// `hostname` gives one name at most, as [`task_hosts`].
    pub fn of_task(&self, job: &str, task: &TaskSpec) -> Vec<String> {
        let members = self.members(task);
        let fixed = task.template.spec.as_ref().and_then(|s| s.hostname.as_deref()).is_some_and(|h| !h.is_empty());
        let take = if fixed { members.len().min(1) } else { members.len() };
        members.into_iter().take(take).map(|i| domain_name(job, task, i)).collect()
    }
}

/// The enabled plugins of a job, parsed, in [`ORDER`].
#[derive(Debug, Default)]
pub struct JobPlugins {
    plugins: Vec<Box<dyn JobPlugin>>,
}

impl JobPlugins {
    /// Parses the job's `spec.plugins`. Unknown plugins, unknown arguments and malformed
    /// values are errors.
    pub fn from_job(job: &Job) -> Result<Self, PluginError> {
        job_plugins::check(job)?;
        let mut plugins: Vec<Box<dyn JobPlugin>> = Vec::new();
        for name in ORDER {
            let Some(args) = job.spec.plugins.get(name) else { continue };
            plugins.push(match name {
                "env" => Box::new(env::Env::new(job, args)?),
                "svc" => Box::new(svc::Svc::new(job, args)?),
                "ssh" => Box::new(ssh::Ssh::new(job, args)?),
                "tensorflow" => Box::new(tensorflow::TensorFlow::new(job, args)?),
                "pytorch" => Box::new(pytorch::PyTorch::new(job, args)?),
                "mxnet" => Box::new(mxnet::MxNet::new(job, args)?),
                "mpi" => Box::new(mpi::Mpi::new(job, args)?),
                _ => unreachable!("ORDER holds only the names matched here"),
            });
        }
        Ok(JobPlugins { plugins })
    }

    /// The plugins, in the order they run.
    pub fn iter(&self) -> impl Iterator<Item = &dyn JobPlugin> {
        self.plugins.iter().map(|p| p.as_ref())
    }

    /// Every plugin's host-list ConfigMaps for `hosts` ([`JobPlugin::host_lists`]).
    pub fn host_lists(&self, job: &Job, hosts: &Hosts) -> Vec<ConfigMap> {
        let mut out = Vec::new();
        for p in self.iter() {
            p.host_lists(job, hosts, &mut out);
        }
        out
    }

    /// The objects the plugins remove when the job is killed ([`JobPlugin::on_job_delete`]).
    pub fn objects_to_delete(&self, job: &Job) -> ObjectNames {
        let mut out = ObjectNames::default();
        for p in self.iter() {
            p.on_job_delete(job, &mut out);
        }
        out
    }

    /// The names of the enabled plugins, in the order they run.
    pub fn names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.name()).collect()
    }

    /// Whether the `ssh` plugin is enabled and has no key among its arguments, so that
    /// [`crate::plan::job_resources`] needs a generated key pair.
    pub fn needs_ssh_key(&self, job: &Job) -> bool {
        job.spec.plugins.get("ssh").is_some_and(|args| {
            job_plugins::parse(job, &job_plugins::SSH, args).is_ok_and(|a| a.opt_string("ssh-private-key").is_none())
        })
    }
}

/// `<job>-<task>-<index>`, the name of a job's pod.
pub fn pod_name(job: &str, task: &str, index: i32) -> String {
    format!("{job}-{task}-{index}")
}

/// The DNS name `<hostname>.<subdomain>` of a task's pod: the template's `hostname` and
/// `subdomain` when set, else the pod's name and the job's name (the headless Service of
/// the `svc` plugin). Volcano's `MakeDomainName`.
pub fn domain_name(job: &str, task: &TaskSpec, index: i32) -> String {
    let spec = task.template.spec.as_ref();
    let host = spec.and_then(|s| s.hostname.clone()).filter(|h| !h.is_empty());
    let sub = spec.and_then(|s| s.subdomain.clone()).filter(|s| !s.is_empty());
    format!("{}.{}", host.unwrap_or_else(|| pod_name(job, task.name(), index)), sub.unwrap_or_else(|| job.to_string()))
}

/// The DNS names of a task's pods, one per replica; a template with a fixed `hostname`
/// gives one name only (Volcano's `GenerateHosts`).
pub fn task_hosts(job: &str, task: &TaskSpec) -> Vec<String> {
    let fixed = task.template.spec.as_ref().and_then(|s| s.hostname.as_deref()).is_some_and(|h| !h.is_empty());
    let n = if fixed { task.replicas.min(1) } else { task.replicas };
    (0..n).map(|i| domain_name(job, task, i)).collect()
}

/// The task of the job named `name`, with its index.
pub(crate) fn find_task<'j>(job: &'j Job, name: &str) -> Option<(usize, &'j TaskSpec)> {
    job.spec.tasks.iter().enumerate().find(|(_, t)| t.name() == name)
}

/// The `nvidia.com/gpu` a container asks for (its request, else its limit, which is what
/// the API server defaults the request to), 0 when none.
pub fn container_gpus(c: &Container) -> i64 {
    let Some(res) = &c.resources else { return 0 };
    let q = res
        .requests
        .as_ref()
        .and_then(|r| r.get(GPU_RESOURCE))
        .or_else(|| res.limits.as_ref().and_then(|l| l.get(GPU_RESOURCE)));
    q.and_then(|q| quantity::parse_value(&q.0).ok()).map_or(0, |v| v as i64)
}

/// The `nvidia.com/gpu` of all of a pod template's containers.
pub fn template_gpus(task: &TaskSpec) -> i64 {
    task.template.spec.as_ref().map_or(0, |s| s.containers.iter().map(container_gpus).sum())
}

/// An environment variable with a literal value.
pub(crate) fn env_var(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.to_string(), value: Some(value.into()), value_from: None }
}

/// Appends `vars` to every container (and init container, when `init`).
pub(crate) fn add_env(spec: &mut PodSpec, vars: &[EnvVar], init: bool) {
    let inits = spec.init_containers.iter_mut().flatten().filter(|_| init);
    for c in spec.containers.iter_mut().chain(inits) {
        c.env.get_or_insert_with(Vec::new).extend(vars.iter().cloned());
    }
}

/// Opens `port` under `name` on a container that does not expose it yet (Volcano's
/// `openContainerPort`).
pub(crate) fn open_port(c: &mut Container, name: &str, port: i32) {
    let ports = c.ports.get_or_insert_with(Vec::new);
    if !ports.iter().any(|p| p.container_port == port) {
        ports.push(ContainerPort { name: Some(name.to_string()), container_port: port, ..Default::default() });
    }
}

/// The pod's spec, made when missing.
pub(crate) fn spec_mut(pod: &mut Pod) -> &mut PodSpec {
    pod.spec.get_or_insert_with(Default::default)
}

/// Tests shared by the plugin modules.
#[cfg(test)]
pub(crate) mod testing {
    use volcano_api::admission::mutate_job;
    use volcano_api::job::Job;

    use crate::plan;

    /// A job from YAML, defaulted as the webhook does, with a uid.
    pub(crate) fn job(yaml: &str) -> Job {
        let mut job: Job = serde_yaml_ng::from_str(yaml).expect("test job parses");
        job.metadata.uid = Some("uid-1".into());
        job.metadata.namespace.get_or_insert_with(|| "ml".into());
        mutate_job(&job, "default", "volcano")
    }

    /// The pod of task `task`, replica `i`, with every plugin applied.
    pub(crate) fn pod(job: &Job, task: &str, i: i32) -> k8s_openapi::api::core::v1::Pod {
        let plugins = super::JobPlugins::from_job(job).expect("plugins parse");
        let (t, _) = super::find_task(job, task).expect("task exists");
        plan::pod(job, &plugins, t, i).expect("pod plans")
    }

    /// `name=value` of a container's literal env vars (not those read from the `svc`
    /// ConfigMap).
    pub(crate) fn env_of(c: &k8s_openapi::api::core::v1::Container) -> Vec<String> {
        c.env.iter().flatten().filter_map(|e| Some(format!("{}={}", e.name, e.value.as_deref()?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::job;
    use super::*;

    const JOB: &str = r#"
metadata: {name: j}
spec:
  plugins: {svc: ["--publish-not-ready-addresses", "-disable-network-policy=false"]}
  tasks: [{name: a, replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}]
"#;

    #[test]
    fn go_flag_syntax_parses_and_bad_arguments_name_job_plugin_and_argument() {
        let j = job(JOB);
        assert_eq!(JobPlugins::from_job(&j).unwrap().names(), vec!["svc"]);
        let mut bad = j.clone();
        bad.spec.plugins.insert("svc".into(), vec!["--bogus=1".into()]);
        let e = JobPlugins::from_job(&bad).unwrap_err();
        assert_eq!(e.to_string(), "job ml/j: plugin svc: unknown argument \"--bogus=1\"");
        bad.spec.plugins.insert("svc".into(), vec!["--publish-not-ready-addresses=maybe".into()]);
        let e = JobPlugins::from_job(&bad).unwrap_err();
        assert_eq!(e.category(), "bad_argument");
        assert!(e.to_string().contains("\"maybe\" is not a boolean"), "{e}");
        bad.spec.plugins.insert("svc".into(), vec!["positional".into()]);
        assert_eq!(JobPlugins::from_job(&bad).unwrap_err().category(), "unknown_argument");
        let mut tf = j.clone();
        tf.spec.plugins.insert("tensorflow".into(), vec!["--port".into()]);
        assert!(JobPlugins::from_job(&tf).unwrap_err().to_string().contains("expected a value"));
        tf.spec.plugins.insert("tensorflow".into(), vec!["--port".into(), "70000".into()]);
        assert!(JobPlugins::from_job(&tf).unwrap_err().to_string().contains("not a port"));
        tf.spec.plugins.insert("tensorflow".into(), vec!["-port".into(), "2223".into()]);
        assert!(JobPlugins::from_job(&tf).is_ok());
    }

    #[test]
    fn unknown_and_unimplemented_plugins_are_errors() {
        let mut j = job(JOB);
        j.spec.plugins.insert("nope".into(), vec![]);
        assert_eq!(JobPlugins::from_job(&j).unwrap_err().category(), "unknown_plugin");
        j.spec.plugins.remove("nope");
        j.spec.plugins.insert("ray".into(), vec![]);
        assert_eq!(JobPlugins::from_job(&j).unwrap_err().category(), "not_implemented");
    }

    #[test]
    fn plugins_run_in_the_fixed_order() {
        let mut j = job(JOB);
        for p in ["mpi", "env", "pytorch", "ssh", "tensorflow", "mxnet"] {
            j.spec.plugins.insert(p.into(), vec![]);
        }
        // mpi needs its master and worker tasks, mxnet its scheduler; rename the task.
        j.spec.plugins.insert("mpi".into(), vec!["--master=a".into(), "--worker=a".into()]);
        j.spec.plugins.insert("mxnet".into(), vec!["--scheduler=a".into()]);
        j.spec.plugins.insert("pytorch".into(), vec!["--master=a".into()]);
        assert_eq!(JobPlugins::from_job(&j).unwrap().names(), ORDER.to_vec());
    }

    #[test]
    fn hosts_follow_template_hostname_and_subdomain() {
        let j = job(r#"
metadata: {name: j}
spec:
  tasks:
    - {name: a, replicas: 2, template: {spec: {containers: []}}}
    - {name: b, replicas: 3, template: {spec: {hostname: fixed, subdomain: sub, containers: []}}}
"#);
        assert_eq!(task_hosts("j", &j.spec.tasks[0]), vec!["j-a-0.j", "j-a-1.j"]);
        assert_eq!(task_hosts("j", &j.spec.tasks[1]), vec!["fixed.sub"]);
    }
}
