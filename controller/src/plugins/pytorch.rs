//! `pytorch`: the env of PyTorch's distributed launch in every container, both Volcano's
//! (`MASTER_ADDR`, `MASTER_PORT`, `WORLD_SIZE`, `RANK`) and the `torch.distributed.run`
//! (`torchrun`) spelling (`PET_MASTER_ADDR`, `PET_MASTER_PORT`, `PET_NNODES`,
//! `PET_NODE_RANK`, `PET_NPROC_PER_NODE`); the container port `pytorchjob-port`; and, with
//! `--wait-master-enabled`, an init container `wait-for-master` on the workers.
//!
//! `WORLD_SIZE` and `PET_NNODES` count pods (master + worker replicas), `RANK` and
//! `PET_NODE_RANK` are the pod's rank (master 0, worker i → i + 1); pods of other tasks get
//! no rank. `PET_NPROC_PER_NODE` is the container's `nvidia.com/gpu`, else
//! `--nproc-per-node`, else 1.
//!
//! Arguments: `--master` (master), `--worker` (worker), `--port` (23456),
//! `--wait-master-enabled` (false), `--wait-master-timeout` (300 seconds),
//! `--wait-master-image` (busybox:1.36.1), `--nproc-per-node` (none).

use k8s_openapi::api::core::v1::Pod;
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::launch::{self, wait_container};
use super::{container_gpus, domain_name, env_var, find_task, open_port, spec_mut, JobPlugin, PluginError, PodContext};

/// The default port of the master's rendezvous.
pub const DEFAULT_PORT: i32 = 23456;
/// The name of the opened container port.
pub const PORT_NAME: &str = "pytorchjob-port";
/// The name of the workers' wait container.
pub const WAIT_CONTAINER: &str = "wait-for-master";

/// The `pytorch` plugin.
#[derive(Debug)]
pub struct PyTorch {
    /// `--master`.
    pub master: String,
    /// `--worker`.
    pub worker: String,
    /// `--port`.
    pub port: i32,
    /// `--wait-master-enabled`.
    pub wait_master: bool,
    /// `--wait-master-timeout`, seconds.
    pub wait_timeout: i32,
    /// `--wait-master-image`.
    pub wait_image: String,
    /// `--nproc-per-node`.
    pub nproc_per_node: Option<i32>,
}

impl PyTorch {
    /// The plugin with its arguments; the master task must exist.
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        // The master task exists: `job_plugins::parse` checks the role.
        let a = job_plugins::parse(job, &job_plugins::PYTORCH, args)?;
        Ok(PyTorch {
            master: a.task("master", "master"),
            worker: a.task("worker", "worker"),
            port: a.port("port", DEFAULT_PORT)?,
            wait_master: a.bool("wait-master-enabled", false)?,
            wait_timeout: a.opt_positive("wait-master-timeout")?.unwrap_or(launch::DEFAULT_TIMEOUT_SECONDS),
            wait_image: a.string("wait-master-image", launch::DEFAULT_IMAGE),
            nproc_per_node: a.opt_positive("nproc-per-node")?,
        })
    }
}

impl JobPlugin for PyTorch {
    fn name(&self) -> &'static str {
        "pytorch"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let Some((_, master)) = find_task(ctx.job, &self.master) else { return Ok(()) };
        let addr = domain_name(ctx.job_name(), master, 0);
        let world: i32 = ctx
            .job
            .spec
            .tasks
            .iter()
            .filter(|t| t.name() == self.master || t.name() == self.worker)
            .map(|t| t.replicas)
            .sum();
        let task = ctx.task_name();
        let rank = if task == self.worker {
            Some(ctx.replica + 1)
        } else if task == self.master {
            Some(0)
        } else {
            None
        };
        let spec = spec_mut(pod);
        for c in &mut spec.containers {
            open_port(c, PORT_NAME, self.port);
            let nproc = match container_gpus(c) {
                0 => self.nproc_per_node.unwrap_or(1) as i64,
                g => g,
            };
            let env = c.env.get_or_insert_with(Vec::new);
            env.push(env_var("MASTER_ADDR", addr.clone()));
            env.push(env_var("MASTER_PORT", self.port.to_string()));
            env.push(env_var("WORLD_SIZE", world.to_string()));
            if let Some(r) = rank {
                env.push(env_var("RANK", r.to_string()));
            }
            env.push(env_var("PET_MASTER_ADDR", addr.clone()));
            env.push(env_var("PET_MASTER_PORT", self.port.to_string()));
            env.push(env_var("PET_NNODES", world.to_string()));
            if let Some(r) = rank {
                env.push(env_var("PET_NODE_RANK", r.to_string()));
            }
            env.push(env_var("PET_NPROC_PER_NODE", nproc.to_string()));
        }
        // Not when the template has a container of that name already (Volcano checks the init
        // containers; a container of that name would clash as well).
        let named = |c: &k8s_openapi::api::core::v1::Container| c.name == WAIT_CONTAINER;
        let taken = spec.containers.iter().any(named) || spec.init_containers.iter().flatten().any(named);
        if self.wait_master && task == self.worker && !taken {
            spec.init_containers.get_or_insert_with(Vec::new).push(wait_container(
                WAIT_CONTAINER,
                &self.wait_image,
                &[addr],
                self.port,
                self.wait_timeout,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{env_of, job, pod};

    const JOB: &str = r#"
metadata: {name: pt}
spec:
  plugins: {pytorch: ["--port=29500", "--wait-master-enabled", "--wait-master-timeout=60", "--nproc-per-node=2"]}
  tasks:
    - {name: master, replicas: 1, template: {spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 4}}}]}}}
    - {name: worker, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
"#;

    #[test]
    fn volcano_and_torchrun_env() {
        let j = job(JOB);
        let m = pod(&j, "master", 0).spec.unwrap();
        assert_eq!(
            env_of(&m.containers[0]),
            vec![
                "MASTER_ADDR=pt-master-0.pt",
                "MASTER_PORT=29500",
                "WORLD_SIZE=3",
                "RANK=0",
                "PET_MASTER_ADDR=pt-master-0.pt",
                "PET_MASTER_PORT=29500",
                "PET_NNODES=3",
                "PET_NODE_RANK=0",
                "PET_NPROC_PER_NODE=4",
            ]
        );
        let port = &m.containers[0].ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.container_port), (Some("pytorchjob-port"), 29500));
        assert!(m.init_containers.is_none(), "the master does not wait");
        let w = pod(&j, "worker", 1).spec.unwrap();
        let env = env_of(&w.containers[0]);
        assert!(env.contains(&"RANK=2".to_string()) && env.contains(&"PET_NODE_RANK=2".to_string()));
        assert!(env.contains(&"PET_NPROC_PER_NODE=2".to_string()), "no GPU: --nproc-per-node");
        let wait = &w.init_containers.unwrap()[0];
        assert_eq!((wait.name.as_str(), wait.image.as_deref()), ("wait-for-master", Some("busybox:1.36.1")));
        let script = &wait.command.as_ref().unwrap()[2];
        assert!(script.contains("for host in pt-master-0.pt; do") && script.contains("+ 60))"), "{script}");
    }

    #[test]
    fn a_template_wait_for_master_is_kept_and_not_doubled() {
        let mut j = job(JOB);
        let spec = j.spec.tasks[1].template.spec.as_mut().unwrap();
        spec.init_containers =
            Some(vec![k8s_openapi::api::core::v1::Container { name: "wait-for-master".into(), ..Default::default() }]);
        let w = pod(&j, "worker", 0).spec.unwrap();
        let inits = w.init_containers.unwrap();
        assert_eq!(inits.len(), 1, "{inits:?}");
        assert_eq!(inits[0].image, None, "the template's own");
    }

    #[test]
    fn a_missing_master_is_an_error() {
        let mut j = job(JOB);
        j.spec.plugins.insert("pytorch".into(), vec!["--master=chief".into()]);
        let e = crate::plugins::JobPlugins::from_job(&j).unwrap_err();
        assert_eq!(e.to_string(), "job ml/pt: plugin pytorch: no master task \"chief\" (--master)");
    }
}
