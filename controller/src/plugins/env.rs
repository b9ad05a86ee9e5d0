//! `env`: the pod's index in its task as `VK_TASK_INDEX` and `VC_TASK_INDEX`, in every
//! container and init container. No arguments.

use k8s_openapi::api::core::v1::Pod;
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::{add_env, env_var, spec_mut, JobPlugin, PluginError, PodContext};

/// The `env` plugin.
#[derive(Debug)]
pub struct Env;

/// The task index, Volcano's older spelling.
pub const VK_TASK_INDEX: &str = "VK_TASK_INDEX";
/// The task index.
pub const VC_TASK_INDEX: &str = "VC_TASK_INDEX";

impl Env {
    /// The plugin with its arguments (it has none).
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        job_plugins::parse(job, &job_plugins::ENV, args)?;
        Ok(Env)
    }
}

impl JobPlugin for Env {
    fn name(&self) -> &'static str {
        "env"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let i = ctx.replica.to_string();
        add_env(spec_mut(pod), &[env_var(VK_TASK_INDEX, i.clone()), env_var(VC_TASK_INDEX, i)], true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{env_of, job, pod};

    #[test]
    fn the_index_goes_into_containers_and_init_containers() {
        let j = job(r#"
metadata: {name: j}
spec:
  plugins: {env: []}
  tasks: [{name: w, replicas: 3, template: {spec: {initContainers: [{name: i, image: x}], containers: [{name: c, image: x}]}}}]
"#);
        let p = pod(&j, "w", 2);
        let s = p.spec.unwrap();
        assert_eq!(env_of(&s.containers[0]), vec!["VK_TASK_INDEX=2", "VC_TASK_INDEX=2"]);
        assert_eq!(env_of(&s.init_containers.unwrap()[0]), vec!["VK_TASK_INDEX=2", "VC_TASK_INDEX=2"]);
    }
}
