//! `svc`: a headless Service `<job>` so that every pod has the DNS name `<pod>.<job>`, a
//! ConfigMap `<job>-svc` with the hosts of every task, mounted at `/etc/volcano` and read
//! into env vars, and a NetworkPolicy `<job>` that lets in only the job's own pods.
//!
//! Arguments: `--publish-not-ready-addresses` (false), `--disable-network-policy` (false),
//! `--inject-hosts-env` (true: the `VC_<TASK>_HOSTS` / `VC_<TASK>_NUM` env vars).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapKeySelector, ConfigMapVolumeSource, EnvVar, EnvVarSource, Pod, Service, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::api::networking::v1::{NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use volcano_api::job::Job;
use volcano_api::job_plugins;

use super::{add_env, job_name, spec_mut, Hosts, JobAddContext, JobPlugin, PluginError, PodContext};
use crate::objects::{owned_meta, JobResources, ObjectNames, JOB_NAMESPACE_KEY, JOB_NAME_KEY};

/// Where the hosts ConfigMap is mounted.
pub const CONFIG_MAP_MOUNT_PATH: &str = "/etc/volcano";

/// The `svc` plugin.
#[derive(Debug)]
pub struct Svc {
    /// `--publish-not-ready-addresses`: DNS names for pods that are not ready yet.
    pub publish_not_ready_addresses: bool,
    /// `--disable-network-policy`: no NetworkPolicy.
    pub disable_network_policy: bool,
    /// `--inject-hosts-env`: the hosts env vars in every container.
    pub inject_hosts_env: bool,
}

impl Svc {
    /// The plugin with its arguments.
    pub fn new(job: &Job, args: &[String]) -> Result<Self, PluginError> {
        let a = job_plugins::parse(job, &job_plugins::SVC, args)?;
        Ok(Svc {
            publish_not_ready_addresses: a.bool("publish-not-ready-addresses", false)?,
            disable_network_policy: a.bool("disable-network-policy", false)?,
            inject_hosts_env: a.bool("inject-hosts-env", true)?,
        })
    }
}

/// `<job>-svc`, the hosts ConfigMap.
pub fn config_map_name(job: &str) -> String {
    format!("{job}-svc")
}

/// The `VC_<TASK>_HOSTS` / `VC_<TASK>_NUM` key stem of a task: upper case, `-` → `_`.
fn env_stem(task: &str) -> String {
    task.replace('-', "_").to_uppercase()
}

/// The hosts ConfigMap's data: `<task>.host` (one DNS name a line, `-` → `_` in the task
/// name), `VC_<TASK>_HOSTS` (comma list) and `VC_<TASK>_NUM` for every task, naming the
/// members of `hosts`.
pub fn hosts_data(job: &Job, hosts: &Hosts) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    for t in &job.spec.tasks {
        let hosts = hosts.of_task(job_name(job), t);
        data.insert(format!("{}.host", t.name().replace('-', "_")), hosts.join("\n"));
        let stem = env_stem(t.name());
        data.insert(format!("VC_{stem}_HOSTS"), hosts.join(","));
        data.insert(format!("VC_{stem}_NUM"), hosts.len().to_string());
    }
    data
}

fn job_selector(job: &Job) -> BTreeMap<String, String> {
    [
        (JOB_NAME_KEY.to_string(), job_name(job).to_string()),
        (JOB_NAMESPACE_KEY.to_string(), job.metadata.namespace.clone().unwrap_or_default()),
    ]
    .into_iter()
    .collect()
}

impl JobPlugin for Svc {
    fn name(&self) -> &'static str {
        "svc"
    }

    fn on_pod_create(&self, pod: &mut Pod, ctx: &PodContext<'_>) -> Result<(), PluginError> {
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let cm = config_map_name(ctx.job_name());
        let spec = spec_mut(pod);
        if spec.hostname.as_deref().unwrap_or_default().is_empty() {
            spec.hostname = Some(pod_name);
        }
        if spec.subdomain.as_deref().unwrap_or_default().is_empty() {
            spec.subdomain = Some(ctx.job_name().to_string());
        }
        if self.inject_hosts_env {
            let mut vars = Vec::new();
            for t in &ctx.job.spec.tasks {
                let stem = env_stem(t.name());
                for key in [format!("VC_{stem}_HOSTS"), format!("VC_{stem}_NUM")] {
                    vars.push(EnvVar {
                        name: key.clone(),
                        value: None,
                        value_from: Some(EnvVarSource {
                            config_map_key_ref: Some(ConfigMapKeySelector { name: cm.clone(), key, optional: None }),
                            ..Default::default()
                        }),
                    });
                }
            }
            add_env(spec, &vars, true);
        }
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: cm.clone(),
            config_map: Some(ConfigMapVolumeSource { name: cm.clone(), ..Default::default() }),
            ..Default::default()
        });
        let mount = VolumeMount { name: cm, mount_path: CONFIG_MAP_MOUNT_PATH.to_string(), ..Default::default() };
        for c in spec.containers.iter_mut().chain(spec.init_containers.iter_mut().flatten()) {
            c.volume_mounts.get_or_insert_with(Vec::new).push(mount.clone());
        }
        Ok(())
    }

    fn on_job_add(&self, job: &Job, _ctx: &JobAddContext<'_>, out: &mut JobResources) -> Result<(), PluginError> {
        let name = job_name(job).to_string();
        self.host_lists(job, &Hosts::all(job), &mut out.config_maps);
        out.services.push(Service {
            metadata: owned_meta(job, name.clone()),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".to_string()),
                selector: Some(job_selector(job)),
                publish_not_ready_addresses: Some(self.publish_not_ready_addresses),
                ..Default::default()
            }),
            ..Default::default()
        });
        if !self.disable_network_policy {
            let selector = LabelSelector { match_labels: Some(job_selector(job)), ..Default::default() };
            out.network_policies.push(NetworkPolicy {
                metadata: owned_meta(job, name),
                spec: Some(NetworkPolicySpec {
                    pod_selector: Some(selector.clone()),
                    ingress: Some(vec![NetworkPolicyIngressRule {
                        from: Some(vec![NetworkPolicyPeer { pod_selector: Some(selector), ..Default::default() }]),
                        ..Default::default()
                    }]),
                    policy_types: Some(vec!["Ingress".to_string()]),
                    ..Default::default()
                }),
            });
        }
        Ok(())
    }

    fn host_lists(&self, job: &Job, hosts: &Hosts, out: &mut Vec<ConfigMap>) {
        out.push(ConfigMap {
            metadata: owned_meta(job, config_map_name(job_name(job))),
            data: Some(hosts_data(job, hosts)),
            ..Default::default()
        });
    }

    fn on_job_delete(&self, job: &Job, out: &mut ObjectNames) {
        let name = job_name(job).to_string();
        out.config_maps.push(config_map_name(&name));
        out.services.push(name.clone());
        if !self.disable_network_policy {
            out.network_policies.push(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{job, pod};
    use crate::plan::job_resources;
    use crate::plugins::{Hosts, JobPlugins};

    const JOB: &str = r#"
metadata: {name: j}
spec:
  plugins: {svc: []}
  tasks:
    - {name: ps-x, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: worker, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
"#;

    #[test]
    fn hosts_config_map_service_and_network_policy() {
        let j = job(JOB);
        let r = job_resources(&j, &JobPlugins::from_job(&j).unwrap(), None).unwrap();
        let data = r.config_maps[0].data.clone().unwrap();
        assert_eq!(r.config_maps[0].metadata.name.as_deref(), Some("j-svc"));
        assert_eq!(data["ps_x.host"], "j-ps-x-0.j\nj-ps-x-1.j");
        assert_eq!(data["VC_PS_X_HOSTS"], "j-ps-x-0.j,j-ps-x-1.j");
        assert_eq!(data["VC_PS_X_NUM"], "2");
        assert_eq!(data["VC_WORKER_NUM"], "1");
        let svc = r.services[0].spec.clone().unwrap();
        assert_eq!(svc.cluster_ip.as_deref(), Some("None"));
        assert_eq!(svc.selector.unwrap()["volcano.sh/job-name"], "j");
        assert_eq!(r.network_policies.len(), 1);
        assert_eq!(r.controlled_resources["plugin-svc"], "svc");
        // A kill removes all three.
        let gone = JobPlugins::from_job(&j).unwrap().objects_to_delete(&j);
        assert_eq!(
            (gone.config_maps, gone.services, gone.network_policies),
            (vec!["j-svc".to_string()], vec!["j".to_string()], vec!["j".to_string()])
        );
    }

    #[test]
    fn the_hosts_config_map_names_the_published_members() {
        let j = job(JOB);
        let mut hosts = Hosts::all(&j);
        hosts.set("ps-x", [0, 2].into_iter().collect());
        let lists = JobPlugins::from_job(&j).unwrap().host_lists(&j, &hosts);
        assert_eq!(lists.len(), 1);
        let data = lists[0].data.clone().unwrap();
        assert_eq!(data["ps_x.host"], "j-ps-x-0.j\nj-ps-x-2.j");
        assert_eq!(data["VC_PS_X_HOSTS"], "j-ps-x-0.j,j-ps-x-2.j");
        assert_eq!(data["VC_PS_X_NUM"], "2");
        assert_eq!(data["VC_WORKER_NUM"], "1", "a task without an entry names every replica");
    }

    #[test]
    fn pods_get_hostname_subdomain_env_and_mount() {
        let j = job(JOB);
        let s = pod(&j, "worker", 0).spec.unwrap();
        assert_eq!((s.hostname.as_deref(), s.subdomain.as_deref()), (Some("j-worker-0"), Some("j")));
        let names: Vec<_> = s.containers[0].env.iter().flatten().map(|e| e.name.as_str()).collect();
        assert_eq!(names, vec!["VC_PS_X_HOSTS", "VC_PS_X_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM"]);
        let m = &s.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!((m.name.as_str(), m.mount_path.as_str()), ("j-svc", "/etc/volcano"));
    }

    #[test]
    fn arguments_turn_parts_off() {
        let mut j = job(JOB);
        j.spec.plugins.insert(
            "svc".into(),
            vec![
                "--disable-network-policy".into(),
                "--inject-hosts-env=false".into(),
                "--publish-not-ready-addresses".into(),
            ],
        );
        let r = job_resources(&j, &JobPlugins::from_job(&j).unwrap(), None).unwrap();
        assert!(r.network_policies.is_empty());
        assert_eq!(r.services[0].spec.as_ref().unwrap().publish_not_ready_addresses, Some(true));
        assert!(pod(&j, "worker", 0).spec.unwrap().containers[0].env.is_none());
    }
}
