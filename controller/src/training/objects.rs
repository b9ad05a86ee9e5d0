//! The objects a TrainingJob owns, as et-operator names and labels them: the worker pods
//! `<job>-worker-<i>` and their headless Services, the launcher pod `<job>-launcher`, the
//! ConfigMap `<job>-config` with the host lists, the ssh Secret `<job>`, and (volcano-rs's
//! own) the PodGroup `<job>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, KeyToPath, Pod, SecretVolumeSource, Service, ServicePort, ServiceSpec, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use volcano_api::crd::{PodGroup, PodGroupSpec, GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION};
use volcano_api::et::{TrainingJob, SSH_SECRET_ANNOTATION};

use crate::scale::Member;

/// Label of every pod and Service: the API group (`kai.alibabacloud.com`).
pub const GROUP_NAME_LABEL: &str = "group-name";
/// Label of every pod and Service: the TrainingJob's name.
pub const JOB_NAME_LABEL: &str = "training-job-name";
/// Label of every pod and Service: `launcher` or `worker`.
pub const ROLE_LABEL: &str = "training-job-role";
/// Label of a worker's pod and Service: its index.
pub const INDEX_LABEL: &str = "replica-index";
/// The launcher's role.
pub const ROLE_LAUNCHER: &str = "launcher";
/// The workers' role.
pub const ROLE_WORKER: &str = "worker";

/// The host list key of the ConfigMap (Horovod's `<host>:<slots>` lines).
pub const HOSTFILE_KEY: &str = "hostfile";
/// The host discovery script key of the ConfigMap.
pub const DISCOVER_HOSTS_KEY: &str = "discover_hosts.sh";
/// DeepSpeed's host list key of the ConfigMap (`<host> slots=<n>` lines).
pub const DEEPSPEED_HOSTFILE_KEY: &str = "deepspeed-hostfile";
/// Where the launcher finds the host list and the discovery script (Horovod's
/// `--host-discovery-script /etc/edl/discover_hosts.sh`).
pub const EDL_DIR: &str = "/etc/edl";
/// Where the launcher finds the ConfigMap's files as et-operator mounts them.
pub const CONFIG_DIR: &str = "/etc/mpi";
/// Where DeepSpeed's launcher finds its `hostfile`.
pub const DEEPSPEED_DIR: &str = "/job";
/// File mode of the host lists.
pub const HOSTFILE_MODE: i32 = 0o444;
/// File mode of the discovery script under [`EDL_DIR`].
pub const SCRIPT_MODE: i32 = 0o555;
/// The GPU resource whose limit gives the slots per worker.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// What a worker container without a command runs in ssh mode: sshd, then sleep.
pub const SSH_WORKER_COMMAND: &str = "/usr/sbin/sshd && sleep 365d";

/// The worker pod (and Service) of member `i`.
pub fn worker_name(job: &str, i: Member) -> String {
    format!("{job}-worker-{i}")
}

/// The member of worker pod `name` of job `job`, if it is one.
pub fn worker_index(job: &str, name: &str) -> Option<Member> {
    name.strip_prefix(job)?.strip_prefix("-worker-")?.parse().ok().filter(|i: &Member| *i >= 0)
}

/// The launcher pod's name.
pub fn launcher_name(job: &str) -> String {
    format!("{job}-launcher")
}

/// The ConfigMap's name.
pub fn config_name(job: &str) -> String {
    format!("{job}-config")
}

/// The ssh Secret a job's pods mount: the annotation's, else `<job>`.
pub fn ssh_secret_name(job: &TrainingJob) -> String {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SSH_SECRET_ANNOTATION))
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| name(job).to_string())
}

/// The job's name.
pub fn name(job: &TrainingJob) -> &str {
    job.metadata.name.as_deref().unwrap_or_default()
}

/// The job's namespace.
pub fn namespace(job: &TrainingJob) -> &str {
    job.metadata.namespace.as_deref().unwrap_or_default()
}

/// The job as the controller of what it owns.
pub fn owner(job: &TrainingJob) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", volcano_api::et::GROUP, volcano_api::et::VERSION),
        kind: "TrainingJob".into(),
        name: name(job).to_string(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn meta(job: &TrainingJob, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: job.metadata.namespace.clone(),
        labels: (!labels.is_empty()).then_some(labels),
        owner_references: Some(vec![owner(job)]),
        ..Default::default()
    }
}

/// The labels of a job's pods and Services of `role` (and `index`, for a worker).
pub fn labels(job: &str, role: &str, index: Option<Member>) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (GROUP_NAME_LABEL.to_string(), volcano_api::et::GROUP.to_string()),
        (JOB_NAME_LABEL.to_string(), job.to_string()),
        (ROLE_LABEL.to_string(), role.to_string()),
    ]);
    if let Some(i) = index {
        l.insert(INDEX_LABEL.to_string(), i.to_string());
    }
    l
}

/// The slots of a worker in the host lists: `slotsPerWorker`, else the first worker
/// container's `nvidia.com/gpu` limit (a whole number), else 1.
pub fn slots(job: &TrainingJob) -> i64 {
    if let Some(s) = job.spec.slots_per_worker {
        return i64::from(s);
    }
    let gpu = job
        .spec
        .et_replica_specs
        .worker
        .as_ref()
        .and_then(|w| w.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get(GPU_RESOURCE))
        .and_then(|q| q.0.parse::<i64>().ok());
    gpu.unwrap_or(1)
}

/// The Horovod host list: `<host>:<slots>` a line.
pub fn hostfile(workers: &[String], slots: i64) -> String {
    workers.iter().map(|w| format!("{w}:{slots}\n")).collect()
}

/// DeepSpeed's host list: `<host> slots=<slots>` a line.
pub fn deepspeed_hostfile(workers: &[String], slots: i64) -> String {
    workers.iter().map(|w| format!("{w} slots={slots}\n")).collect()
}

/// The host discovery script Horovod's elastic mode runs: it prints the host list as the
/// launcher sees it now.
pub fn discover_hosts_script() -> String {
    format!(
        "#!/bin/sh\n# The workers of this training job, one <host>:<slots> a line (volcano-rs keeps {EDL_DIR}/{HOSTFILE_KEY} up to date).\ncat {EDL_DIR}/{HOSTFILE_KEY}\n"
    )
}

/// The ConfigMap `<job>-config` for the host list `workers`.
pub fn config_map(job: &TrainingJob, workers: &[String]) -> ConfigMap {
    let s = slots(job);
    ConfigMap {
        metadata: meta(job, config_name(name(job)), BTreeMap::from([("app".to_string(), name(job).to_string())])),
        data: Some(BTreeMap::from([
            (HOSTFILE_KEY.to_string(), hostfile(workers, s)),
            (DISCOVER_HOSTS_KEY.to_string(), discover_hosts_script()),
            (DEEPSPEED_HOSTFILE_KEY.to_string(), deepspeed_hostfile(workers, s)),
        ])),
        ..Default::default()
    }
}

/// The headless Service of worker `i`: its name resolves to the worker's pod.
pub fn worker_service(job: &TrainingJob, i: Member) -> Service {
    let l = labels(name(job), ROLE_WORKER, Some(i));
    let port = |n: &str, p: i32| ServicePort { name: Some(n.to_string()), port: p, ..Default::default() };
    Service {
        metadata: meta(job, worker_name(name(job), i), l.clone()),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(l),
            ports: Some(vec![port("ssh-port", 22), port("kubeai-service-port", 9009)]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The PodGroup `<job>`: the workers' `minReplicas` must start together (the launcher comes
/// after them and is not counted); the queue is the job's `scheduling.volcano.sh/queue-name`
/// annotation, else the default.
pub fn pod_group(job: &TrainingJob, min_member: i32) -> PodGroup {
    let queue = job.metadata.annotations.as_ref().and_then(|a| a.get(QUEUE_NAME_ANNOTATION)).cloned();
    let mut pg = PodGroup::new(name(job), PodGroupSpec { min_member, queue, ..Default::default() });
    pg.metadata = meta(job, name(job).to_string(), BTreeMap::new());
    pg
}

/// A pod from `template`: the labels, the PodGroup annotation, `restartPolicy: Never`, the
/// scheduler (the template's, else `scheduler`), the ssh Secret in every container.
fn pod_from(
    job: &TrainingJob,
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    pod_name: String,
    labels: BTreeMap<String, String>,
    scheduler: &str,
) -> Pod {
    let mut meta_t = template.metadata.clone().unwrap_or_default();
    let mut l = meta_t.labels.take().unwrap_or_default();
    l.extend(labels);
    let mut annotations = meta_t.annotations.take().unwrap_or_default();
    annotations.insert(GROUP_NAME_ANNOTATION.to_string(), name(job).to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.restart_policy = Some("Never".into());
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some(scheduler.to_string());
    }
    if uses_ssh(job) {
        let secret = ssh_secret_name(job);
        let item = |key: &str, path: &str| KeyToPath { key: key.into(), path: format!(".ssh/{path}"), mode: None };
        spec.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: secret.clone(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                items: Some(vec![
                    item("id_rsa", "id_rsa"),
                    item("id_rsa.pub", "id_rsa.pub"),
                    item("id_rsa.pub", "authorized_keys"),
                    item("config", "config"),
                ]),
                default_mode: Some(0o600),
                ..Default::default()
            }),
            ..Default::default()
        });
        for c in &mut spec.containers {
            c.volume_mounts.get_or_insert_with(Vec::new).push(VolumeMount {
                name: secret.clone(),
                mount_path: "/root/.ssh".into(),
                sub_path: Some(".ssh".into()),
                ..Default::default()
            });
        }
    }
    let mut m = meta(job, pod_name, l);
    m.annotations = Some(annotations);
    Pod { metadata: m, spec: Some(spec), ..Default::default() }
}

/// Whether the launcher reaches the workers over ssh (`launcherAttachMode` unset or `ssh`).
pub fn uses_ssh(job: &TrainingJob) -> bool {
    job.spec.launcher_attach_mode.as_deref().is_none_or(|m| m == volcano_api::et::ATTACH_MODE_SSH)
}

/// The pod of worker `i`; a first container without a command runs sshd (ssh mode) and sleeps.
pub fn worker_pod(job: &TrainingJob, i: Member, scheduler: &str) -> Pod {
    let template = job.spec.et_replica_specs.worker.as_ref().map(|w| w.template.clone()).unwrap_or_default();
    let mut pod =
        pod_from(job, &template, worker_name(name(job), i), labels(name(job), ROLE_WORKER, Some(i)), scheduler);
    if let Some(c) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        if c.command.as_ref().is_none_or(Vec::is_empty) {
            let run = if uses_ssh(job) { SSH_WORKER_COMMAND } else { "sleep 365d" };
            c.command = Some(vec!["sh".into(), "-c".into(), run.into()]);
        }
    }
    pod
}

/// The launcher's pod: the ConfigMap mounted in its first container at [`EDL_DIR`] (the
/// host list, and the discovery script executable), at [`CONFIG_DIR`] (as et-operator
/// mounts it) and DeepSpeed's host list at [`DEEPSPEED_DIR`]`/hostfile`. The files follow
/// the ConfigMap as the kubelet refreshes them.
pub fn launcher_pod(job: &TrainingJob, scheduler: &str) -> Pod {
    let template = job.spec.et_replica_specs.launcher.as_ref().map(|l| l.template.clone()).unwrap_or_default();
    let mut pod = pod_from(job, &template, launcher_name(name(job)), labels(name(job), ROLE_LAUNCHER, None), scheduler);
    let cm = config_name(name(job));
    let item = |key: &str, path: &str, mode: i32| KeyToPath { key: key.into(), path: path.into(), mode: Some(mode) };
    let volume = |vname: &str, items: Vec<KeyToPath>| Volume {
        name: vname.into(),
        config_map: Some(ConfigMapVolumeSource { name: cm.clone(), items: Some(items), ..Default::default() }),
        ..Default::default()
    };
    let volumes = [
        (
            "training-job-hostfile",
            EDL_DIR,
            vec![
                item(HOSTFILE_KEY, HOSTFILE_KEY, HOSTFILE_MODE),
                item(DISCOVER_HOSTS_KEY, DISCOVER_HOSTS_KEY, SCRIPT_MODE),
            ],
        ),
        (
            "training-job-config",
            CONFIG_DIR,
            vec![
                item(HOSTFILE_KEY, HOSTFILE_KEY, HOSTFILE_MODE),
                item(DISCOVER_HOSTS_KEY, DISCOVER_HOSTS_KEY, HOSTFILE_MODE),
                item(DEEPSPEED_HOSTFILE_KEY, DEEPSPEED_HOSTFILE_KEY, HOSTFILE_MODE),
            ],
        ),
        ("deepspeed-hostfile", DEEPSPEED_DIR, vec![item(DEEPSPEED_HOSTFILE_KEY, HOSTFILE_KEY, HOSTFILE_MODE)]),
    ];
    if let Some(spec) = pod.spec.as_mut() {
        for (vname, dir, items) in volumes {
            spec.volumes.get_or_insert_with(Vec::new).push(volume(vname, items));
            if let Some(c) = spec.containers.first_mut() {
                c.volume_mounts.get_or_insert_with(Vec::new).push(VolumeMount {
                    name: vname.into(),
                    mount_path: dir.into(),
                    ..Default::default()
                });
            }
        }
    }
    pod
}
