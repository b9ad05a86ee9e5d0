//! `mpi`: on the master task, `MPI_HOST` (the workers' DNS names, comma-separated) and an
//! Open MPI hostfile; the container port `mpijob-port` on every container and init
//! container; and, with `--wait-workers-enabled` (off by default: Volcano's plugin has no
//! wait container), an init container `wait-for-workers` on the master that waits until
//! every worker answers on the port (its sshd), so that `mpirun` does not start before its
//! hosts.
//!
//! The hostfile is a ConfigMap `<job>-mpi-hostfile` (key `hostfile`, one line
//! `<pod>.<job> slots=N` per published worker pod; N is the worker template's
//! `nvidia.com/gpu`, else `--slots`, else 1) mounted on the master at `/etc/mpi` (so the file is
//! `/etc/mpi/hostfile`; a directory mount, which the kubelet refreshes), with `OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile`. It is refreshed on every sync,
//! so a resized job's hostfile names the workers [`crate::scale`] published.
//!
//! Arguments: `--master` (master), `--worker` (worker), `--port` (22), `--slots` (none),
//! `--wait-workers-enabled` (false), `--wait-workers-timeout` (300 seconds),
//! `--wait-workers-image` (busybox:1.36.1). The master and worker tasks must exist.

use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Pod, Volume, VolumeMount};
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::launch::{self, wait_container};
use super::{
    add_env, env_var, find_task, job_name, open_port, spec_mut, task_hosts, template_gpus, Hosts, JobAddContext,
    JobPlugin, PluginError, PodContext,
};
use crate::objects::{owned_meta, JobResources, ObjectNames};

/// The default port (ssh).
pub const DEFAULT_PORT: i32 = 22;
/// The name of the opened container port.
pub const PORT_NAME: &str = "mpijob-port";
/// The master's env var with the worker hosts.
pub const MPI_HOST: &str = "MPI_HOST";
/// Where the hostfile ConfigMap is mounted on the master (the directory).
pub const HOSTFILE_DIR: &str = "/etc/mpi";
/// Where the master reads the hostfile.
pub const HOSTFILE_PATH: &str = "/etc/mpi/hostfile";
/// The ConfigMap key (and the mount's subPath) of the hostfile.
pub const HOSTFILE_KEY: &str = "hostfile";
/// The master's volume of the hostfile ConfigMap.
pub const HOSTFILE_VOLUME: &str = "mpi-hostfile";
/// Open MPI's default hostfile setting.
pub const OMPI_HOSTFILE_ENV: &str = "OMPI_MCA_orte_default_hostfile";
/// The name of the master's wait container.
pub const WAIT_CONTAINER: &str = "wait-for-workers";

/// The `mpi` plugin.
#[derive(Debug)]
pub struct Mpi {
    /// `--master`.
    pub master: String,
    /// `--worker`.
    pub worker: String,
    /// `--port`.
    pub port: i32,
    /// `--slots`.
    pub slots: Option<i32>,
    /// `--wait-workers-enabled`.
    pub wait_workers: bool,
    /// `--wait-workers-timeout`, seconds.
    pub wait_timeout: i32,
    /// `--wait-workers-image`.
    pub wait_image: String,
}

/// `<job>-mpi-hostfile`, the hostfile ConfigMap.
pub fn hostfile_config_map_name(job: &str) -> String {
    format!("{job}-mpi-hostfile")
}

impl Mpi {
    /// The plugin with its arguments; the master and worker tasks must exist.
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        // The master and worker tasks exist: `job_plugins::parse` checks the roles.
        let a = job_plugins::parse(job, &job_plugins::MPI, args)?;
        Ok(Mpi {
            master: a.task("master", "master"),
            worker: a.task("worker", "worker"),
            port: a.port("port", DEFAULT_PORT)?,
            slots: a.opt_positive("slots")?,
            wait_workers: a.bool("wait-workers-enabled", false)?,
            wait_timeout: a.opt_positive("wait-workers-timeout")?.unwrap_or(launch::DEFAULT_TIMEOUT_SECONDS),
            wait_image: a.string("wait-workers-image", launch::DEFAULT_IMAGE),
        })
    }

    fn worker_hosts(&self, job: &Job) -> Vec<String> {
        find_task(job, &self.worker).map_or_else(Vec::new, |(_, t)| task_hosts(job_name(job), t))
    }

    /// The hostfile: a line `<host> slots=N` per worker pod of `hosts`.
    pub fn hostfile(&self, job: &Job, hosts: &Hosts) -> String {
        let Some((_, worker)) = find_task(job, &self.worker) else { return String::new() };
        let slots = match template_gpus(worker) {
            0 => i64::from(self.slots.unwrap_or(1)),
            g => g,
        };
        hosts.of_task(job_name(job), worker).iter().map(|h| format!("{h} slots={slots}\n")).collect()
    }
}

impl JobPlugin for Mpi {
    fn name(&self) -> &'static str {
        "mpi"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let is_master = ctx.task_name() == self.master;
        let hosts = self.worker_hosts(ctx.job);
        let spec = spec_mut(pod);
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            open_port(c, PORT_NAME, self.port);
        }
        if !is_master {
            return Ok(());
        }
        add_env(spec, &[env_var(MPI_HOST, hosts.join(","))], true);
        add_env(spec, &[env_var(OMPI_HOSTFILE_ENV, HOSTFILE_PATH)], false);
        let cm = hostfile_config_map_name(ctx.job_name());
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: HOSTFILE_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource { name: cm, ..Default::default() }),
            ..Default::default()
        });
        // The whole directory, not a subPath: the kubelet refreshes a ConfigMap volume only
        // when it is not mounted by subPath, and a resized job's hostfile changes.
        let mount = VolumeMount { name: HOSTFILE_VOLUME.into(), mount_path: HOSTFILE_DIR.into(), ..Default::default() };
        for c in &mut spec.containers {
            c.volume_mounts.get_or_insert_with(Vec::new).push(mount.clone());
        }
        if self.wait_workers && !hosts.is_empty() {
            spec.init_containers.get_or_insert_with(Vec::new).push(wait_container(
                WAIT_CONTAINER,
                &self.wait_image,
                &hosts,
                self.port,
                self.wait_timeout,
            ));
        }
        Ok(())
    }

    fn on_job_add(&self, job: &Job, _ctx: &JobAddContext<'_>, out: &mut JobResources) -> Result<(), PluginError> {
        self.host_lists(job, &Hosts::all(job), &mut out.config_maps);
        Ok(())
    }

    fn host_lists(&self, job: &Job, hosts: &Hosts, out: &mut Vec<ConfigMap>) {
        out.push(ConfigMap {
            metadata: owned_meta(job, hostfile_config_map_name(job_name(job))),
            data: Some([(HOSTFILE_KEY.to_string(), self.hostfile(job, hosts))].into_iter().collect()),
            ..Default::default()
        });
    }

    fn on_job_delete(&self, job: &Job, out: &mut ObjectNames) {
        out.config_maps.push(hostfile_config_map_name(job_name(job)));
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{env_of, job, pod};
    use crate::plan::job_resources;
    use crate::plugins::ssh::tests::test_keys;
    use crate::plugins::{Hosts, JobPlugins};

    const JOB: &str = r#"
metadata: {name: hvd}
spec:
  plugins: {mpi: ["--slots=3"]}
  tasks:
    - {name: master, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: worker, replicas: 2, template: {spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]}}}
"#;

    #[test]
    fn hostfile_slots_come_from_worker_gpus_then_the_argument() {
        let mut j = job(JOB);
        let keys = test_keys();
        let r = job_resources(&j, &JobPlugins::from_job(&j).unwrap(), Some(&keys)).unwrap();
        let cm = r.config_maps.iter().find(|c| c.metadata.name.as_deref() == Some("hvd-mpi-hostfile")).unwrap();
        assert_eq!(cm.data.as_ref().unwrap()["hostfile"], "hvd-worker-0.hvd slots=8\nhvd-worker-1.hvd slots=8\n");
        j.spec.tasks[1].template.spec.as_mut().unwrap().containers[0].resources = None;
        let r = job_resources(&j, &JobPlugins::from_job(&j).unwrap(), Some(&keys)).unwrap();
        let cm = r.config_maps.iter().find(|c| c.metadata.name.as_deref() == Some("hvd-mpi-hostfile")).unwrap();
        assert_eq!(cm.data.as_ref().unwrap()["hostfile"], "hvd-worker-0.hvd slots=3\nhvd-worker-1.hvd slots=3\n");
    }

    #[test]
    fn the_hostfile_names_the_published_workers() {
        let j = job(JOB);
        let plugins = JobPlugins::from_job(&j).unwrap();
        let mut hosts = Hosts::all(&j);
        hosts.set("worker", [0, 1, 2].into_iter().collect());
        let lists = plugins.host_lists(&j, &hosts);
        let cm = lists.iter().find(|c| c.metadata.name.as_deref() == Some("hvd-mpi-hostfile")).unwrap();
        assert_eq!(
            cm.data.as_ref().unwrap()["hostfile"],
            "hvd-worker-0.hvd slots=8\nhvd-worker-1.hvd slots=8\nhvd-worker-2.hvd slots=8\n"
        );
        assert!(plugins.objects_to_delete(&j).config_maps.contains(&"hvd-mpi-hostfile".to_string()));
    }

    #[test]
    fn the_master_waits_for_the_workers_only_when_asked() {
        let j = job(JOB);
        let m = pod(&j, "master", 0).spec.unwrap();
        assert!(m.init_containers.is_none(), "no wait container by default, as in Volcano");
        let mut j = job(JOB);
        j.spec.plugins.insert("mpi".into(), vec!["--slots=3".into(), "--wait-workers-enabled".into()]);
        let m = pod(&j, "master", 0).spec.unwrap();
        let env = env_of(&m.containers[0]);
        assert!(env.contains(&"MPI_HOST=hvd-worker-0.hvd,hvd-worker-1.hvd".to_string()), "{env:?}");
        assert!(env.contains(&"OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile".to_string()));
        let mount = m.containers[0].volume_mounts.as_ref().unwrap().iter().find(|v| v.name == "mpi-hostfile").unwrap();
        assert_eq!((mount.mount_path.as_str(), mount.sub_path.as_deref()), ("/etc/mpi", None));
        assert_eq!(m.containers[0].ports.as_ref().unwrap()[0].name.as_deref(), Some("mpijob-port"));
        let wait = m.init_containers.as_ref().unwrap().last().unwrap();
        assert_eq!(wait.name, "wait-for-workers");
        assert!(wait.command.as_ref().unwrap()[2].contains("for host in hvd-worker-0.hvd hvd-worker-1.hvd; do"));
        let w = pod(&j, "worker", 0).spec.unwrap();
        assert!(!env_of(&w.containers[0]).iter().any(|e| e.starts_with("MPI_HOST")));
        assert_eq!(w.containers[0].ports.as_ref().unwrap()[0].container_port, 22);
    }

    #[test]
    fn tasks_must_exist() {
        let mut j = job(JOB);
        j.spec.plugins.insert("mpi".into(), vec!["--worker=slave".into()]);
        assert!(JobPlugins::from_job(&j).unwrap_err().to_string().contains("no worker task \"slave\" (--worker)"));
    }
}
