//! `mxnet` (volcano-rs's own; Volcano ships none): the env of MXNet's parameter-server
//! launch (ps-lite) in every container: `DMLC_PS_ROOT_URI` (the DNS name of the scheduler
//! task's pod 0), `DMLC_PS_ROOT_PORT`, `DMLC_NUM_SERVER` and `DMLC_NUM_WORKER` (the server
//! and worker replicas), and `DMLC_ROLE` (`scheduler`, `server` or `worker`; none for a pod
//! of another task). The scheduler's containers open the port as `mxnetjob-port`.
//!
//! Arguments: `--scheduler` (scheduler), `--server` (server), `--worker` (worker): the task
//! names of the roles; `--port` (9091). The scheduler task must exist.

use k8s_openapi::api::core::v1::Pod;
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::{domain_name, env_var, find_task, open_port, spec_mut, JobPlugin, PluginError, PodContext};

/// The default port of the scheduler.
pub const DEFAULT_PORT: i32 = 9091;
/// The name of the opened container port.
pub const PORT_NAME: &str = "mxnetjob-port";

/// The `mxnet` plugin.
#[derive(Debug)]
pub struct MxNet {
    /// `--scheduler`.
    pub scheduler: String,
    /// `--server`.
    pub server: String,
    /// `--worker`.
    pub worker: String,
    /// `--port`.
    pub port: i32,
}

impl MxNet {
    /// The plugin with its arguments; the scheduler task must exist.
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        // The scheduler task exists: `job_plugins::parse` checks the role.
        let a = job_plugins::parse(job, &job_plugins::MXNET, args)?;
        Ok(MxNet {
            scheduler: a.task("scheduler", "scheduler"),
            server: a.task("server", "server"),
            worker: a.task("worker", "worker"),
            port: a.port("port", DEFAULT_PORT)?,
        })
    }
}

impl JobPlugin for MxNet {
    fn name(&self) -> &'static str {
        "mxnet"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let Some((_, scheduler)) = find_task(ctx.job, &self.scheduler) else { return Ok(()) };
        let uri = domain_name(ctx.job_name(), scheduler, 0);
        let replicas = |name: &str| find_task(ctx.job, name).map_or(0, |(_, t)| t.replicas);
        let task = ctx.task_name();
        let role = [(&self.scheduler, "scheduler"), (&self.server, "server"), (&self.worker, "worker")]
            .into_iter()
            .find(|(n, _)| n.as_str() == task)
            .map(|(_, r)| r);
        let spec = spec_mut(pod);
        for c in &mut spec.containers {
            if role == Some("scheduler") {
                open_port(c, PORT_NAME, self.port);
            }
            let env = c.env.get_or_insert_with(Vec::new);
            env.push(env_var("DMLC_PS_ROOT_URI", uri.clone()));
            env.push(env_var("DMLC_PS_ROOT_PORT", self.port.to_string()));
            env.push(env_var("DMLC_NUM_SERVER", replicas(&self.server).to_string()));
            env.push(env_var("DMLC_NUM_WORKER", replicas(&self.worker).to_string()));
            if let Some(r) = role {
                env.push(env_var("DMLC_ROLE", r));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{env_of, job, pod};

    #[test]
    fn dmlc_env_by_role() {
        let j = job(r#"
metadata: {name: mx}
spec:
  plugins: {mxnet: ["--server=ps"]}
  tasks:
    - {name: scheduler, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: ps, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: worker, replicas: 3, template: {spec: {containers: [{name: c, image: x}]}}}
"#);
        let s = pod(&j, "ps", 1).spec.unwrap();
        assert_eq!(
            env_of(&s.containers[0]),
            vec![
                "DMLC_PS_ROOT_URI=mx-scheduler-0.mx",
                "DMLC_PS_ROOT_PORT=9091",
                "DMLC_NUM_SERVER=2",
                "DMLC_NUM_WORKER=3",
                "DMLC_ROLE=server"
            ]
        );
        let sched = pod(&j, "scheduler", 0).spec.unwrap();
        assert!(env_of(&sched.containers[0]).contains(&"DMLC_ROLE=scheduler".to_string()));
        assert_eq!(sched.containers[0].ports.as_ref().unwrap()[0].name.as_deref(), Some("mxnetjob-port"));
        assert!(env_of(&pod(&j, "worker", 0).spec.unwrap().containers[0]).contains(&"DMLC_ROLE=worker".to_string()));
    }

    #[test]
    fn a_missing_scheduler_is_an_error() {
        let j = job(r#"
metadata: {name: mx}
spec:
  plugins: {mxnet: []}
  tasks: [{name: worker, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]
"#);
        assert!(crate::plugins::JobPlugins::from_job(&j).unwrap_err().to_string().contains("no scheduler task"));
    }
}
