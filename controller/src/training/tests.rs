//! The TrainingJob planner, step by step, over a simulated cluster: pods appear when the
//! plan creates them and go when it deletes them; the tests make them ready or finished.

use super::*;

const T0: i64 = 1_800_000_000_000;
const GRACE: i64 = 30_000;

fn job_yaml(extra_spec: &str, worker_extra: &str) -> TrainingJob {
    let yaml = format!(
        r#"
apiVersion: kai.alibabacloud.com/v1alpha1
kind: TrainingJob
metadata: {{name: hvd, namespace: ml, uid: u-1}}
spec:
  {extra_spec}
  etReplicaSpecs:
    launcher:
      template:
        spec:
          containers: [{{name: main, image: horovod, command: [horovodrun]}}]
    worker:
      replicas: 2
      minReplicas: 1
      maxReplicas: 4
      {worker_extra}
      template:
        spec:
          containers:
          - name: main
            image: horovod
            resources: {{limits: {{nvidia.com/gpu: "2"}}}}
"#
    );
    serde_yaml_ng::from_str(&yaml).unwrap()
}

fn job() -> TrainingJob {
    job_yaml("cleanPodPolicy: Running", "")
}

fn request_meta(name: &str, created_s: i64) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ml".into()),
        creation_timestamp: Some(time(T0 + created_s * 1000)),
        ..Default::default()
    }
}

fn scale_out(name: &str, count: i32, created_s: i64) -> ScaleOut {
    let mut r = ScaleOut::new(
        name,
        volcano_api::et::ScaleOutSpec {
            timeout: Some(300),
            to_add: Some(volcano_api::et::ToAddSpec { count: Some(count) }),
            selector: volcano_api::et::Selector { name: "hvd".into() },
            ..Default::default()
        },
    );
    r.metadata = request_meta(name, created_s);
    r
}

fn scale_in(name: &str, count: i32, pod_names: &[&str], created_s: i64) -> ScaleIn {
    let mut r = ScaleIn::new(
        name,
        volcano_api::et::ScaleInSpec {
            to_delete: Some(volcano_api::et::ToDeleteSpec {
                count,
                pod_names: pod_names.iter().map(|s| s.to_string()).collect(),
            }),
            selector: volcano_api::et::Selector { name: "hvd".into() },
            ..Default::default()
        },
    );
    r.metadata = request_meta(name, created_s);
    r
}

/// A cluster with one job, applying each plan as the shell would.
struct World {
    job: TrainingJob,
    workers: BTreeMap<Member, PodView>,
    launcher: Option<PodView>,
    outs: Vec<ScaleOut>,
    ins: Vec<ScaleIn>,
    scale: Option<ScaleState>,
    config: Option<ConfigMap>,
    now: i64,
    last: Plan,
}

impl World {
    fn new(job: TrainingJob) -> Self {
        World {
            job,
            workers: BTreeMap::new(),
            launcher: None,
            outs: vec![],
            ins: vec![],
            scale: None,
            config: None,
            now: T0,
            last: Plan::default(),
        }
    }

    fn step(&mut self) -> &Plan {
        let obs = Observed {
            workers: &self.workers,
            launcher: self.launcher.as_ref(),
            scale_outs: &self.outs,
            scale_ins: &self.ins,
            scale: self.scale.as_ref(),
            scheduler_name: "volcano-rs",
            grace_ms: GRACE,
            now_ms: self.now,
        };
        let p = plan(&self.job, &obs);
        for pod in &p.create_pods {
            let n = pod.metadata.name.clone().unwrap();
            if n == "hvd-launcher" {
                self.launcher = Some(PodView { phase: "Pending".into(), ..Default::default() });
            } else {
                let i = objects::worker_index("hvd", &n).unwrap();
                assert!(!self.workers.contains_key(&i), "{n} created twice");
                self.workers.insert(i, PodView { phase: "Pending".into(), ..Default::default() });
            }
        }
        for n in &p.delete_pods {
            if n == "hvd-launcher" {
                self.launcher = None;
            } else {
                self.workers.remove(&objects::worker_index("hvd", n).unwrap());
            }
        }
        for (n, st) in &p.scale_outs {
            self.outs.iter_mut().find(|r| r.metadata.name.as_deref() == Some(n)).unwrap().status = Some(st.clone());
        }
        for (n, st) in &p.scale_ins {
            self.ins.iter_mut().find(|r| r.metadata.name.as_deref() == Some(n)).unwrap().status = Some(st.clone());
        }
        if p.config_map.is_some() {
            self.config = p.config_map.clone();
        }
        self.job.status = Some(p.status.clone());
        self.scale = Some(p.scale.clone());
        self.last = p;
        &self.last
    }

    fn ready(&mut self, members: &[Member]) {
        for m in members {
            let p = self.workers.get_mut(m).unwrap();
            p.phase = "Running".into();
            p.ready = true;
        }
    }

    fn status(&self) -> &TrainingJobStatus {
        self.job.status.as_ref().unwrap()
    }

    fn phase(&self) -> &str {
        self.status().job.phase.as_deref().unwrap_or_default()
    }

    fn hostfile(&self) -> String {
        self.config.as_ref().unwrap().data.as_ref().unwrap()[objects::HOSTFILE_KEY].clone()
    }

    fn members(&self) -> Vec<Member> {
        self.workers.keys().copied().collect()
    }

    /// Steps until the job runs with workers 0 and 1 in the host list.
    fn running() -> Self {
        let mut w = World::new(job());
        w.step();
        w.ready(&[0, 1]);
        w.step();
        w.step();
        w.launcher.as_mut().unwrap().phase = "Running".into();
        w.step();
        assert_eq!(w.phase(), "Running");
        w
    }
}

fn hosts(ids: &[Member]) -> String {
    ids.iter().map(|i| format!("hvd-worker-{i}:2\n")).collect()
}

#[test]
fn the_workers_come_first_then_the_host_lists_and_the_launcher_once_they_are_ready() {
    let mut w = World::new(job());
    let p = w.step().clone();
    assert_eq!(w.phase(), "Created");
    assert!(has(&w.status().job, cond::WORKERS_CREATED));
    let created: Vec<_> = p.create_pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(created, ["hvd-worker-0", "hvd-worker-1"], "no launcher before the workers are ready");
    let svcs: Vec<_> = p.create_services.iter().map(|s| s.metadata.name.clone().unwrap()).collect();
    assert_eq!(svcs, ["hvd-worker-0", "hvd-worker-1"]);
    assert_eq!(p.create_services[0].spec.as_ref().unwrap().cluster_ip.as_deref(), Some("None"));
    assert_eq!(p.pod_group.as_ref().unwrap().spec.min_member, 1, "minMember is the workers' minReplicas");
    assert_eq!(p.ssh_secret.as_deref(), Some("hvd"));
    assert!(p.config_map.is_none());
    let pod = &p.create_pods[0];
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("volcano-rs"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    assert_eq!(spec.containers[0].command.as_ref().unwrap()[2], objects::SSH_WORKER_COMMAND);
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["training-job-name"], "hvd");
    assert_eq!(labels["training-job-role"], "worker");
    assert_eq!(labels["replica-index"], "0");
    assert_eq!(pod.metadata.annotations.as_ref().unwrap()["scheduling.k8s.io/group-name"], "hvd");
    assert_eq!(pod.metadata.owner_references.as_ref().unwrap()[0].uid, "u-1");

    // One worker ready: still waiting, nothing made twice.
    w.ready(&[0]);
    let p = w.step().clone();
    assert!(p.create_pods.is_empty() && p.config_map.is_none());
    assert!(!has(&w.status().job, cond::WORKERS_READY));
    assert_eq!(w.status().current_workers, ["hvd-worker-0"]);

    w.ready(&[1]);
    w.step();
    assert!(has(&w.status().job, cond::WORKERS_READY));
    let p = w.step().clone();
    assert_eq!(p.create_pods.len(), 1);
    let launcher = &p.create_pods[0];
    assert_eq!(launcher.metadata.name.as_deref(), Some("hvd-launcher"));
    assert!(has(&w.status().job, cond::LAUNCHER_CREATED));
    assert_eq!(w.hostfile(), hosts(&[0, 1]), "slots from the workers' nvidia.com/gpu limit");
    let data = w.config.as_ref().unwrap().data.clone().unwrap();
    assert_eq!(data["deepspeed-hostfile"], "hvd-worker-0 slots=2\nhvd-worker-1 slots=2\n");
    assert_eq!(data["discover_hosts.sh"], objects::discover_hosts_script());
    assert!(data["discover_hosts.sh"].contains("cat /etc/edl/hostfile"));
    let spec = launcher.spec.as_ref().unwrap();
    let mounts: Vec<_> = spec.containers[0].volume_mounts.iter().flatten().map(|m| m.mount_path.as_str()).collect();
    assert_eq!(mounts, ["/root/.ssh", "/etc/edl", "/etc/mpi", "/job"]);
    let edl = spec.volumes.iter().flatten().find(|v| v.name == "training-job-hostfile").unwrap();
    let items = edl.config_map.as_ref().unwrap().items.clone().unwrap();
    assert_eq!((items[1].path.as_str(), items[1].mode), ("discover_hosts.sh", Some(0o555)));
    assert_eq!((items[0].path.as_str(), items[0].mode), ("hostfile", Some(0o444)));

    // The launcher runs: so does the job.
    w.launcher.as_mut().unwrap().phase = "Running".into();
    let p = w.step().clone();
    assert_eq!(w.phase(), "Running");
    assert_eq!(p.events[0].reason, reason::RUNNING);
    assert_eq!(w.status().job.replica_statuses["Launcher"].active, 1);
    assert_eq!(w.status().job.replica_statuses["Worker"].active, 2);
}

#[test]
fn a_scale_out_publishes_its_workers_once_they_are_ready() {
    let mut w = World::running();
    w.outs.push(scale_out("grow", 2, 10));
    let p = w.step().clone();
    assert_eq!(w.phase(), "Scaling");
    assert_eq!(w.status().job.current_scaler.as_deref(), Some("ScaleOut:ml/grow"));
    let so = w.outs[0].status.clone().unwrap();
    assert_eq!(so.add_pods, ["hvd-worker-2", "hvd-worker-3"]);
    assert_eq!(so.job.phase.as_deref(), Some("Scaling"));
    assert!(has(&so.job, cond::CREATED));
    let created: Vec<_> = p.create_pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(created, ["hvd-worker-2", "hvd-worker-3"]);
    assert_eq!(w.hostfile(), hosts(&[0, 1]), "the new workers are not in the host list before they are ready");

    w.ready(&[2]);
    w.step();
    assert_eq!(w.hostfile(), hosts(&[0, 1]), "all new workers join together");
    w.ready(&[3]);
    w.step();
    assert_eq!(w.hostfile(), hosts(&[0, 1, 2, 3]));
    let so = w.outs[0].status.clone().unwrap();
    assert_eq!(so.job.phase.as_deref(), Some("ScaleSucceeded"));
    assert_eq!(so.job.replica_statuses["Worker"].active, 2, "its own workers");
    assert_eq!(w.phase(), "Running");
    assert_eq!(w.status().job.current_scaler, None);
    assert_eq!(w.status().target_workers.len(), 4);
    assert_eq!(w.status().current_workers.len(), 4);
}

#[test]
fn a_scale_in_by_count_unpublishes_the_highest_workers_first_and_deletes_them_after_the_grace_period() {
    let mut w = World::running();
    w.outs.push(scale_out("grow", 2, 10));
    w.step();
    w.ready(&[2, 3]);
    w.step();
    w.ins.push(scale_in("shrink", 2, &[], 20));
    let p = w.step().clone();
    assert_eq!(w.hostfile(), hosts(&[0, 1]), "out of the host list at once");
    assert!(p.delete_pods.is_empty(), "the pods outlive their hosts by the grace period");
    let si = w.ins[0].status.clone().unwrap();
    assert_eq!(si.to_delete_pods, ["hvd-worker-2", "hvd-worker-3"]);
    assert!(has(&si.job, cond::SCRIPT_EXECUTED));
    assert_eq!(p.wake_at_ms, Some(w.now + GRACE));

    w.now += GRACE - 1000;
    assert!(w.step().delete_pods.is_empty());
    w.now += 1000;
    let p = w.step().clone();
    assert_eq!(p.delete_pods, ["hvd-worker-3", "hvd-worker-2"], "highest index first");
    assert_eq!(p.delete_services, ["hvd-worker-3", "hvd-worker-2"]);
    assert_eq!(w.members(), [0, 1]);
    let si = w.ins[0].status.clone().unwrap();
    assert_eq!(si.job.phase.as_deref(), Some("ScaleSucceeded"));
    assert_eq!(w.status().target_workers, ["hvd-worker-0", "hvd-worker-1"]);
    assert_eq!(w.phase(), "Running");
}

#[test]
fn a_scale_in_by_pod_name_removes_exactly_those_workers() {
    let mut w = World::running();
    w.outs.push(scale_out("grow", 1, 10));
    w.step();
    w.ready(&[2]);
    w.step();
    assert_eq!(w.hostfile(), hosts(&[0, 1, 2]));
    w.ins.push(scale_in("drop-one", 0, &["hvd-worker-1"], 20));
    w.step();
    assert_eq!(w.hostfile(), hosts(&[0, 2]));
    w.now += GRACE;
    let p = w.step().clone();
    assert_eq!(p.delete_pods, ["hvd-worker-1"]);
    assert_eq!(w.members(), [0, 2]);
    assert_eq!(w.status().target_workers, ["hvd-worker-0", "hvd-worker-2"]);
    // A later scale-out takes indices above every worker's.
    w.outs.push(scale_out("grow-again", 1, 30));
    w.step();
    assert_eq!(w.outs[1].status.as_ref().unwrap().add_pods, ["hvd-worker-3"]);
}

#[test]
fn requests_below_min_or_above_max_replicas_are_refused_in_their_status() {
    let mut w = World::running();
    w.ins.push(scale_in("too-many", 0, &["hvd-worker-0", "hvd-worker-1"], 10));
    let p = w.step().clone();
    let si = w.ins[0].status.clone().unwrap();
    assert_eq!(si.job.phase.as_deref(), Some("ScaleFailed"));
    let c = si.job.conditions.iter().find(|c| c.type_ == "ScaleFailed").unwrap();
    assert_eq!(c.reason.as_deref(), Some(reason::SCALE_IN_FAILED));
    assert!(c.message.as_deref().unwrap().contains("fewer than its minReplicas 1"), "{c:?}");
    assert!(p.events.iter().any(|e| e.warning && e.subject == Subject::ScaleIn("too-many".into())));
    assert_eq!(w.hostfile(), hosts(&[0, 1]), "the workers stay");
    assert!(p.delete_pods.is_empty());
    assert_eq!(w.phase(), "Running");

    w.outs.push(scale_out("too-big", 3, 20));
    w.step();
    let so = w.outs[0].status.clone().unwrap();
    assert_eq!(so.job.phase.as_deref(), Some("ScaleFailed"));
    let msg = so.job.conditions.last().unwrap().message.clone().unwrap();
    assert!(msg.contains("would make 5, more than its maxReplicas 4"), "{msg}");
    assert!(w.step().create_pods.is_empty());

    w.ins.push(scale_in("count-all", 2, &[], 30));
    w.step();
    let msg = w.ins[1].status.as_ref().unwrap().job.conditions.last().unwrap().message.clone().unwrap();
    assert!(msg.contains("spec.toDelete.count is 2: it must be less than the 2 workers"), "{msg}");
    w.ins.push(scale_in("nothing", 0, &[], 40));
    w.step();
    let msg = w.ins[2].status.as_ref().unwrap().job.conditions.last().unwrap().message.clone().unwrap();
    assert!(msg.contains("set spec.toDelete.count"), "{msg}");
}

#[test]
fn requests_run_one_at_a_time_oldest_first() {
    let mut w = World::running();
    // Created later but listed first: the ScaleIn waits for the older ScaleOut.
    w.ins.push(scale_in("shrink", 1, &[], 20));
    w.outs.push(scale_out("grow", 1, 10));
    w.step();
    assert_eq!(w.status().job.current_scaler.as_deref(), Some("ScaleOut:ml/grow"));
    let si = w.ins[0].status.clone().unwrap();
    assert_eq!(si.job.phase, None, "waiting: only et-operator's Created condition");
    assert!(has(&si.job, cond::CREATED) && si.to_delete_pods.is_empty());
    w.ready(&[2]);
    w.step();
    assert_eq!(w.outs[0].status.as_ref().unwrap().job.phase.as_deref(), Some("ScaleSucceeded"));
    w.step();
    assert_eq!(w.status().job.current_scaler.as_deref(), Some("ScaleIn:ml/shrink"));
    assert_eq!(w.ins[0].status.as_ref().unwrap().to_delete_pods, ["hvd-worker-2"], "the highest of three");
    assert_eq!(w.hostfile(), hosts(&[0, 1]));
}

#[test]
fn a_scale_out_not_ready_within_its_timeout_is_rolled_back() {
    let mut w = World::running();
    w.outs.push(scale_out("grow", 1, 10));
    w.step();
    assert_eq!(w.members(), [0, 1, 2]);
    w.now += 300_000;
    let p = w.step().clone();
    assert_eq!(p.delete_pods, ["hvd-worker-2"]);
    let so = w.outs[0].status.clone().unwrap();
    assert_eq!(so.job.phase.as_deref(), Some("ScaleFailed"));
    assert!(so.job.conditions.last().unwrap().message.as_deref().unwrap().contains("execution timeout"));
    assert_eq!(w.hostfile(), hosts(&[0, 1]));
    assert_eq!(w.status().target_workers, ["hvd-worker-0", "hvd-worker-1"]);
    assert!(w.step().create_pods.is_empty(), "not tried again");
}

#[test]
fn a_restarted_controller_keeps_the_rest_of_a_grace_period() {
    let mut w = World::running();
    w.ins.push(scale_in("shrink", 1, &[], 10));
    w.step();
    assert_eq!(w.hostfile(), hosts(&[0]));
    w.scale = None; // the controller restarted: nothing remembered
    w.now += 10_000;
    assert!(w.step().delete_pods.is_empty(), "the grace period goes on from ScriptExecuted");
    assert_eq!(w.hostfile(), hosts(&[0]));
    w.scale = None;
    w.now += GRACE - 10_000;
    assert_eq!(w.step().delete_pods, ["hvd-worker-1"]);
}

#[test]
fn a_failed_worker_leaves_the_host_list_and_is_replaced_when_its_policy_says_so() {
    let mut w = World::running();
    w.workers.get_mut(&1).unwrap().phase = "Failed".into();
    let p = w.step().clone();
    assert!(p.events.iter().any(|e| e.reason == reason::WORKER_FAILED));
    assert_eq!(w.hostfile(), hosts(&[0]));
    assert!(p.create_pods.is_empty() && p.delete_pods.is_empty(), "Never: the failed pod stays for its logs");

    let mut w = World::new(job_yaml("", "restartPolicy: OnFailure"));
    w.step();
    w.ready(&[0, 1]);
    w.step();
    w.step();
    w.launcher.as_mut().unwrap().phase = "Running".into();
    w.step();
    w.workers.get_mut(&0).unwrap().phase = "Failed".into();
    let p = w.step().clone();
    assert_eq!(p.create_pods[0].metadata.name.as_deref(), Some("hvd-worker-2"));
    assert_eq!(w.hostfile(), hosts(&[1]));
    w.ready(&[2]);
    w.step();
    assert_eq!(w.hostfile(), hosts(&[1, 2]));
    assert_eq!(w.status().target_workers, ["hvd-worker-1", "hvd-worker-2"]);
}

#[test]
fn a_finished_job_cleans_its_workers_as_clean_pod_policy_says() {
    for (policy, kept) in [("Running", vec![1]), ("All", vec![]), ("None", vec![0, 1])] {
        let mut w = World::running();
        w.job.spec.clean_pod_policy = Some(policy.into());
        w.workers.get_mut(&1).unwrap().phase = "Succeeded".into();
        w.launcher.as_mut().unwrap().phase = "Succeeded".into();
        w.step();
        assert_eq!(w.phase(), "Succeeded");
        assert!(w.status().job.completion_time.is_some());
        let p = w.step().clone();
        assert_eq!(w.members(), kept, "cleanPodPolicy {policy}");
        assert!(w.launcher.is_some(), "the launcher stays for its logs");
        let svcs = if policy == "None" { vec![] } else { vec!["hvd-worker-1".to_string(), "hvd-worker-0".into()] };
        assert_eq!(p.delete_services, svcs, "cleanPodPolicy {policy}");
    }
}

#[test]
fn a_failed_job_restarts_on_failure_up_to_its_backoff_limit() {
    let mut w = World::new(job_yaml("restartPolicy: OnFailure\n  backoffLimit: 1", ""));
    w.step();
    w.ready(&[0, 1]);
    w.step();
    w.step();
    w.launcher.as_mut().unwrap().phase = "Failed".into();
    w.step();
    assert_eq!(w.phase(), "Failed");
    w.step();
    assert!(w.workers.is_empty() && w.launcher.is_none(), "every pod goes for the restart");
    assert_eq!(w.phase(), "Created");
    assert_eq!(w.status().job.restart_count, 1);
    w.step();
    assert_eq!(w.members(), [0, 1], "made again");
    w.ready(&[0, 1]);
    w.step();
    w.step();
    w.launcher.as_mut().unwrap().phase = "Failed".into();
    w.step();
    w.step();
    assert_eq!(w.phase(), "Failed", "the backoff limit is reached");
    assert!(w.workers.is_empty(), "cleaned up as a finished job (cleanPodPolicy Running)");
}

#[test]
fn a_job_volcano_rs_cannot_run_fails_with_the_field_named() {
    let mut w = World::new(job_yaml("launcherAttachMode: kubexec", ""));
    let p = w.step().clone();
    assert_eq!(w.phase(), "Failed");
    assert!(p.create_pods.is_empty());
    let msg = w.status().job.conditions.last().unwrap().message.clone().unwrap();
    assert!(msg.contains("spec.launcherAttachMode"), "{msg}");
    assert!(w.step().events.is_empty(), "said once");

    let mut j = job();
    j.spec.et_replica_specs.worker = None;
    let mut w = World::new(j);
    w.step();
    assert!(w
        .status()
        .job
        .conditions
        .last()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .contains("spec.etReplicaSpecs.worker"));
}

#[test]
fn slots_come_from_slots_per_worker_then_the_gpu_limit() {
    assert_eq!(objects::slots(&job()), 2);
    assert_eq!(objects::slots(&job_yaml("slotsPerWorker: 8", "")), 8);
    let mut j = job();
    j.spec.et_replica_specs.worker.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].resources = None;
    assert_eq!(objects::slots(&j), 1);
    assert_eq!(objects::worker_index("hvd", "hvd-worker-12"), Some(12));
    assert_eq!(objects::worker_index("hvd", "hvd-launcher"), None);
    assert_eq!(objects::worker_index("hvd", "hvd-worker--1"), None);
}

#[test]
fn a_suspended_job_loses_every_pod() {
    let mut w = World::running();
    w.job.metadata.annotations =
        Some([("job-supervisor.kube-ai.io/job-suspended".to_string(), "true".to_string())].into());
    let p = w.step().clone();
    assert_eq!(w.phase(), "Suspended");
    let c = w.status().job.conditions.last().unwrap();
    assert_eq!(c.reason.as_deref(), Some(reason::WAITING_RESOURCE_TIMEOUT));
    assert_eq!(p.delete_pods, ["hvd-worker-1", "hvd-worker-0", "hvd-launcher"]);
    assert!(w.workers.is_empty() && w.launcher.is_none());
    assert!(w.step().delete_pods.is_empty(), "nothing more to delete");
    assert_eq!(w.phase(), "Suspended");
}
