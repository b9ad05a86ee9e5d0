use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::crd::{QueueSpec, QueueStatus};
use crate::job::{DependsOn, JobSpec, PartitionPolicySpec, VolumeSpec};

fn container(name: &str, cpu: &str) -> Container {
    Container {
        name: name.into(),
        image: Some("busybox".into()),
        resources: Some(ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task(name: &str, replicas: i32) -> TaskSpec {
    TaskSpec {
        name: Some(name.into()),
        replicas,
        template: PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec { containers: vec![container("main", "1")], ..Default::default() }),
        },
        ..Default::default()
    }
}

fn job(tasks: Vec<TaskSpec>) -> Job {
    let mut j = Job::new("tf", JobSpec { queue: Some("default".into()), tasks, ..Default::default() });
    j.metadata.namespace = Some("ml".into());
    j
}

fn base() -> Job {
    job(vec![task("ps", 1), task("worker", 2)])
}

fn open_default(name: &str) -> Option<QueueFacts> {
    (name == "default").then_some(QueueFacts { state: Some(QueueState::Open), children: 0 })
}

fn accepts(j: &Job) {
    if let Err(e) = validate_job_create(j, &open_default) {
        panic!("rejected: {e}");
    }
}

/// The job is rejected for `rule` (and that is the only rule broken); returns the error.
fn rejects(j: &Job, rule: JobRule) -> JobError {
    let e = validate_job_create(j, &open_default).expect_err("accepted");
    let rules: Vec<JobRule> = e.errors.iter().map(|e| e.rule).collect();
    assert_eq!(rules, vec![rule], "{e}");
    e.errors.into_iter().next().unwrap()
}

fn policy(events: &[&str], exit_code: Option<i32>, action: &str) -> LifecyclePolicy {
    LifecyclePolicy {
        action: Some(Action::parse(action)),
        events: events.iter().map(|e| Event::parse(e)).collect(),
        exit_code,
        ..Default::default()
    }
}

#[test]
fn the_base_job_is_accepted() {
    accepts(&base());
}

#[test]
fn errors_name_the_job_the_field_and_the_rule() {
    let mut j = base();
    j.spec.tasks[1].min_available = Some(3);
    let e = validate_job_create(&j, &open_default).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job ml/tf: spec.tasks[1].minAvailable: 3 is greater than the task's replicas (2) (TaskMinAvailable)"
    );
    assert!(e.broke(JobRule::TaskMinAvailable));
}

#[test]
fn a_job_has_a_task() {
    rejects(&job(vec![]), JobRule::NoTask);
}

#[test]
fn the_mpi_master_task_exists() {
    let mut j = job(vec![task("master", 1), task("worker", 2)]);
    j.spec.plugins.insert("mpi".into(), vec![]);
    accepts(&j);
    j.spec.plugins.insert("mpi".into(), vec!["--master=launcher".into()]);
    assert_eq!(rejects(&j, JobRule::MpiMasterMissing).field, "spec.plugins[mpi]");
    j.spec.tasks[0].name = Some("launcher".into());
    accepts(&j);
    j.spec.plugins.insert("mpi".into(), vec!["-master".into(), "launcher".into(), "--port=2222".into()]);
    accepts(&j);
}

#[test]
fn task_min_available_is_at_most_replicas() {
    let mut j = base();
    j.spec.tasks[1].min_available = Some(2);
    accepts(&j);
    j.spec.tasks[1].min_available = Some(3);
    assert_eq!(rejects(&j, JobRule::TaskMinAvailable).field, "spec.tasks[1].minAvailable");
}

#[test]
fn task_names_are_unique() {
    let j = job(vec![task("worker", 1), task("worker", 1)]);
    assert_eq!(rejects(&j, JobRule::DuplicateTaskName).field, "spec.tasks[1].name");
}

#[test]
fn a_policy_has_events_or_an_exit_code_not_both() {
    let mut j = base();
    j.spec.policies = vec![policy(&["PodFailed"], None, "RestartJob"), policy(&[], Some(3), "AbortJob")];
    accepts(&j);
    j.spec.policies = vec![policy(&["PodFailed"], Some(3), "RestartJob")];
    assert_eq!(rejects(&j, JobRule::PolicyEventAndExitCode).field, "spec.policies[0]");
    j.spec.policies = vec![LifecyclePolicy { event: Some(Event::PodFailed), exit_code: Some(3), ..Default::default() }];
    rejects(&j, JobRule::PolicyEventAndExitCode);
    j.spec.policies = vec![policy(&[], None, "RestartJob")];
    rejects(&j, JobRule::PolicyTrigger);
}

#[test]
fn policy_events_are_user_events() {
    let mut j = base();
    for e in Event::POLICY {
        j.spec.policies = vec![policy(&[e.as_str()], None, "RestartJob")];
        accepts(&j);
    }
    for e in ["OutOfSync", "CommandIssued", "PodRunning", "PodExploded"] {
        j.spec.policies = vec![policy(&[e], None, "RestartJob")];
        assert_eq!(rejects(&j, JobRule::PolicyEvent).field, "spec.policies[0].events", "{e}");
    }
}

#[test]
fn policy_actions_are_user_actions() {
    let mut j = base();
    for a in Action::POLICY {
        j.spec.policies = vec![policy(&["PodFailed"], None, a.as_str())];
        accepts(&j);
    }
    for a in ["SyncJob", "EnqueueJob", "OpenQueue", "Reboot", ""] {
        j.spec.policies = vec![policy(&["PodFailed"], None, a)];
        assert_eq!(rejects(&j, JobRule::PolicyAction).field, "spec.policies[0].action", "{a:?}");
    }
    // As in Volcano, an exit-code policy's action is not checked.
    j.spec.policies = vec![policy(&[], Some(2), "Reboot")];
    accepts(&j);
}

#[test]
fn an_event_has_one_policy_per_list() {
    let mut j = base();
    // `event` and `events` of one policy may repeat each other.
    let mut p = policy(&["PodFailed"], None, "RestartJob");
    p.event = Some(Event::PodFailed);
    j.spec.policies = vec![p];
    accepts(&j);
    j.spec.policies =
        vec![policy(&["PodFailed"], None, "RestartJob"), policy(&["PodEvicted", "PodFailed"], None, "AbortJob")];
    assert_eq!(rejects(&j, JobRule::PolicyDuplicateEvent).field, "spec.policies[1].events");
    // The job's list and a task's are separate.
    j.spec.policies = vec![policy(&["PodFailed"], None, "RestartJob")];
    j.spec.tasks[0].policies = vec![policy(&["PodFailed"], None, "RestartTask")];
    accepts(&j);
}

#[test]
fn exit_codes_are_not_zero_and_unique() {
    let mut j = base();
    j.spec.tasks[1].policies = vec![policy(&[], Some(0), "RestartPod")];
    assert_eq!(rejects(&j, JobRule::PolicyZeroExitCode).field, "spec.tasks[1].policies[0].exitCode");
    j.spec.tasks[1].policies = vec![policy(&[], Some(137), "RestartPod"), policy(&[], Some(137), "AbortJob")];
    assert_eq!(rejects(&j, JobRule::PolicyDuplicateExitCode).field, "spec.tasks[1].policies[1].exitCode");
    j.spec.tasks[1].policies = vec![policy(&[], Some(137), "RestartPod"), policy(&[], Some(1), "AbortJob")];
    accepts(&j);
}

#[test]
fn the_any_event_is_alone() {
    let mut j = base();
    j.spec.policies = vec![policy(&["*"], None, "RestartJob"), policy(&[], Some(1), "AbortJob")];
    accepts(&j);
    j.spec.policies = vec![policy(&["*"], None, "RestartJob"), policy(&["PodFailed"], None, "AbortJob")];
    assert_eq!(rejects(&j, JobRule::PolicyAnyNotAlone).field, "spec.policies");
}

#[test]
fn pod_names_are_qualified_names() {
    let mut j = base();
    // "tf-" + 58 + "-9" = 63 characters.
    j.spec.tasks[1].name = Some("w".repeat(58));
    j.spec.tasks[1].replicas = 10;
    accepts(&j);
    // The last of 11 pods, "-10", makes it 63 + 1.
    j.spec.tasks[1].replicas = 11;
    let e = rejects(&j, JobRule::PodName);
    assert_eq!(e.field, "spec.tasks[1].name");
}

#[test]
fn the_job_name_is_a_qualified_name() {
    let mut j = job(vec![task("a", 1)]);
    j.metadata.name = Some("j".repeat(58));
    accepts(&j);
    j.metadata.name = Some("j".repeat(64));
    let e = validate_job_create(&j, &open_default).unwrap_err();
    assert!(e.broke(JobRule::JobName), "{e}");
}

#[test]
fn pod_templates_are_valid_pods() {
    let mut j = base();
    j.spec.tasks[0].template.spec.as_mut().unwrap().containers.clear();
    assert_eq!(rejects(&j, JobRule::PodTemplate).field, "spec.tasks[0].template.spec.containers");
    let mut j = base();
    j.spec.tasks[1].template.spec = None;
    assert_eq!(rejects(&j, JobRule::PodTemplate).field, "spec.tasks[1].template.spec");
    let mut j = base();
    j.spec.tasks[1].template.metadata =
        Some(ObjectMeta { labels: Some([("bad key".to_string(), "v".to_string())].into()), ..Default::default() });
    assert_eq!(rejects(&j, JobRule::PodTemplate).field, "spec.tasks[1].template.metadata.labels[bad key]");
}

#[test]
fn numa_tasks_ask_for_whole_cpus() {
    let mut j = base();
    j.spec.tasks[1].topology_policy = Some("single-numa-node".into());
    accepts(&j);
    let spec = j.spec.tasks[1].template.spec.as_mut().unwrap();
    spec.init_containers = Some(vec![container("init", "1500m")]);
    assert_eq!(
        rejects(&j, JobRule::NumaCpu).field,
        "spec.tasks[1].template.spec.initContainers[0].resources.requests[cpu]"
    );
    j.spec.tasks[1].topology_policy = Some("none".into());
    accepts(&j);
    j.spec.tasks[0].topology_policy = Some("restricted".into());
    j.spec.tasks[0].template.spec.as_mut().unwrap().containers[0].resources = None;
    rejects(&j, JobRule::NumaCpu);
}

#[test]
fn partition_policies_match_replicas_and_min_available() {
    let mut j = base();
    j.spec.tasks[1].replicas = 4;
    let pp = |total, size, min| PartitionPolicySpec {
        total_partitions: total,
        partition_size: size,
        min_partitions: min,
        ..Default::default()
    };
    j.spec.tasks[1].partition_policy = Some(pp(2, 2, 1));
    j.spec.tasks[1].min_available = Some(2);
    accepts(&j);
    j.spec.tasks[1].min_available = Some(4);
    assert_eq!(rejects(&j, JobRule::PartitionPolicy).field, "spec.tasks[1].partitionPolicy.minPartitions");
    j.spec.tasks[1].partition_policy = Some(pp(2, 2, 0));
    accepts(&j);
    j.spec.tasks[1].partition_policy = Some(pp(3, 2, 0));
    assert_eq!(rejects(&j, JobRule::PartitionPolicy).field, "spec.tasks[1].partitionPolicy");
    j.spec.tasks[1].partition_policy = Some(pp(0, 2, 0));
    rejects(&j, JobRule::PartitionPolicy);
}

#[test]
fn job_min_available_is_at_most_the_replicas() {
    let mut j = base();
    j.spec.min_available = 3;
    accepts(&j);
    j.spec.min_available = 4;
    assert_eq!(rejects(&j, JobRule::JobMinAvailable).field, "spec.minAvailable");
}

#[test]
fn job_plugins_are_known() {
    let mut j = job(vec![task("master", 1), task("worker", 1), task("scheduler", 1)]);
    for p in crate::job_plugins::ORDER {
        j.spec.plugins.insert(p.into(), vec![]);
    }
    accepts(&j);
    j.spec.plugins.insert("horovod".into(), vec![]);
    assert_eq!(rejects(&j, JobRule::UnknownPlugin).field, "spec.plugins[horovod]");
}

#[test]
fn plugin_arguments_are_checked_as_the_controller_checks_them() {
    let mut j = job(vec![task("master", 1), task("worker", 1)]);
    j.spec.plugins.insert("mpi".into(), vec!["--worker=slave".into()]);
    let e = rejects(&j, JobRule::PluginArguments);
    assert_eq!((e.field.as_str(), e.message.as_str()), ("spec.plugins[mpi]", "no worker task \"slave\" (--worker)"));
    j.spec.plugins.insert("mpi".into(), vec!["--slots=zero".into()]);
    assert!(rejects(&j, JobRule::PluginArguments).message.contains("\"zero\" is not a positive integer"));
    j.spec.plugins.clear();
    j.spec.plugins.insert("ssh".into(), vec!["--ssh-public-key=k".into()]);
    assert_eq!(rejects(&j, JobRule::PluginArguments).message, "--ssh-private-key and --ssh-public-key go together");
    j.spec.plugins.clear();
    j.spec.plugins.insert("ray".into(), vec![]);
    assert_eq!(rejects(&j, JobRule::PluginArguments).message, "job plugin \"ray\" is not implemented by volcano-rs");
}

#[test]
fn autoscale_bounds_name_tasks_and_keep_the_minimums() {
    let with = |v: &str| {
        let mut j = base();
        j.spec.min_available = 2;
        j.spec.tasks[1].min_available = Some(1);
        j.metadata.annotations = Some([(crate::job::AUTOSCALE_ANNOTATION.to_string(), v.to_string())].into());
        j
    };
    accepts(&with("worker=1..8"));
    let b = crate::job::autoscale_bounds(&with("worker=..8, ps=1..1")).unwrap();
    assert_eq!((b[0].task.as_str(), b[0].task_index, b[0].min, b[0].max), ("worker", 1, 1, 8));
    assert_eq!((b[1].task.as_str(), b[1].min, b[1].max), ("ps", 1, 1));
    for (v, says) in [
        ("chief=1..2", "the job has no task \"chief\""),
        ("worker=3..2", "the minimum 3 is above the maximum 2"),
        ("worker=0..4", "the minimum 0 is below the task's minAvailable (1)"),
        ("worker", "is not TASK=MIN..MAX"),
        ("worker=1-4", "is not MIN..MAX"),
        ("worker=1..lots", "the maximum of task worker, \"lots\", is not a whole number"),
        ("worker=1..2,worker=1..3", "named twice"),
        (" , ", "names no task"),
    ] {
        let e = rejects(&with(v), JobRule::ScaleAnnotation);
        assert_eq!(e.field, "metadata.annotations[volcano.sh/autoscale]");
        assert!(e.message.contains(says), "{v}: {}", e.message);
    }
    // ps 1 + worker 1 at the minimums is below a job minAvailable of 3.
    let mut j = with("worker=1..8");
    j.spec.min_available = 3;
    j.spec.tasks[1].replicas = 2;
    let e = rejects(&j, JobRule::ScaleAnnotation);
    assert!(e.message.contains("(2 in total) are below the job's minAvailable (3)"), "{}", e.message);
}

#[test]
fn resize_annotations_are_whole_seconds() {
    let mut j = base();
    j.metadata.annotations =
        Some([(crate::job::SCALE_IN_GRACE_ANNOTATION.to_string(), "soon".to_string())].into_iter().collect());
    let e = rejects(&j, JobRule::ScaleAnnotation);
    assert_eq!(e.field, "metadata.annotations[volcano.sh/scale-in-grace-seconds]");
    assert!(e.message.contains("\"soon\" is not a whole number of seconds"), "{}", e.message);
    j.metadata.annotations =
        Some([(crate::job::SCALE_OUT_TIMEOUT_ANNOTATION.to_string(), "0".to_string())].into_iter().collect());
    rejects(&j, JobRule::ScaleAnnotation);
    j.metadata.annotations = Some([(crate::job::SCALE_IN_GRACE_ANNOTATION.to_string(), "0".to_string())].into());
    accepts(&j);
}

#[test]
fn volumes_have_a_unique_path_and_one_claim() {
    let vol = |path: &str, name: Option<&str>, spec: bool| VolumeSpec {
        mount_path: path.into(),
        volume_claim_name: name.map(Into::into),
        volume_claim: spec.then(Default::default),
    };
    let mut j = base();
    j.spec.volumes = vec![vol("/data", Some("data"), false), vol("/ckpt", None, true)];
    accepts(&j);
    for (volumes, field) in [
        (vec![vol("", Some("data"), false)], "spec.volumes[0].mountPath"),
        (vec![vol("/d", Some("a"), false), vol("/d", Some("b"), false)], "spec.volumes[1].mountPath"),
        (vec![vol("/d", None, false)], "spec.volumes[0]"),
        (vec![vol("/d", Some("a"), true)], "spec.volumes[0]"),
        (vec![vol("/d", Some("Bad_Name"), false)], "spec.volumes[0].volumeClaimName"),
    ] {
        j.spec.volumes = volumes;
        assert_eq!(rejects(&j, JobRule::Volume).field, field);
    }
}

#[test]
fn the_queue_exists_is_open_not_root_and_a_leaf() {
    let q = |name: &str, parent: Option<&str>, state: Option<QueueState>| {
        let mut q = Queue::new(name, QueueSpec { parent: parent.map(Into::into), ..Default::default() });
        q.status = Some(QueueStatus { state, ..Default::default() });
        q
    };
    let queues = vec![
        q("root", None, Some(QueueState::Open)),
        q("eng", Some("root"), Some(QueueState::Open)),
        q("dev", Some("eng"), Some(QueueState::Open)),
        q("closed", Some("root"), Some(QueueState::Closed)),
        q("new", Some("root"), None),
    ];
    let check = |queue: &str| {
        let mut j = base();
        j.spec.queue = Some(queue.into());
        validate_job_create(&j, queues.as_slice())
    };
    assert!(check("dev").is_ok());
    assert!(check("new").is_ok(), "a queue without a state yet counts as Open");
    let rule = |queue: &str| check(queue).unwrap_err().errors[0].rule;
    assert_eq!(rule("nope"), JobRule::QueueNotFound);
    assert_eq!(rule("closed"), JobRule::QueueNotOpen);
    assert_eq!(rule("root"), JobRule::RootQueue);
    assert_eq!(rule("eng"), JobRule::QueueNotLeaf);
    assert_eq!(check("eng").unwrap_err().errors[0].field, "spec.queue");
}

#[test]
fn depends_on_forms_a_dag() {
    let dep = |names: &[&str]| {
        Some(DependsOn { name: names.iter().map(|n| n.to_string()).collect(), iteration: Some("any".into()) })
    };
    let mut j = job(vec![task("a", 1), task("b", 1), task("c", 1)]);
    j.spec.tasks[1].depends_on = dep(&["a"]);
    j.spec.tasks[2].depends_on = dep(&["a", "b"]);
    accepts(&j);
    j.spec.tasks[0].depends_on = dep(&["c"]);
    let e = rejects(&j, JobRule::DependsOn);
    assert!(e.message.contains("cycle"), "{e}");
    j.spec.tasks[0].depends_on = dep(&["z"]);
    assert_eq!(rejects(&j, JobRule::DependsOn).field, "spec.tasks[0].dependsOn.name[0]");
}

#[test]
fn network_topology_sets_one_highest_tier() {
    let mut j = base();
    j.spec.network_topology = Some(NetworkTopologySpec { highest_tier_allowed: Some(1), ..Default::default() });
    accepts(&j);
    j.spec.network_topology.as_mut().unwrap().highest_tier_name = Some("spine".into());
    assert_eq!(rejects(&j, JobRule::NetworkTopology).field, "spec.networkTopology");
    let mut j = base();
    j.spec.tasks[1].partition_policy = Some(PartitionPolicySpec {
        total_partitions: 1,
        partition_size: 2,
        network_topology: j.spec.network_topology.clone().or(Some(NetworkTopologySpec {
            highest_tier_allowed: Some(1),
            highest_tier_name: Some("spine".into()),
            ..Default::default()
        })),
        ..Default::default()
    });
    assert_eq!(rejects(&j, JobRule::NetworkTopology).field, "spec.tasks[1].partitionPolicy.networkTopology");
}

#[test]
fn schema_rules_are_checked_too() {
    for (edit, field) in [
        (Box::new(|j: &mut Job| j.spec.tasks[0].replicas = -1) as Box<dyn Fn(&mut Job)>, "spec.tasks[0].replicas"),
        (Box::new(|j: &mut Job| j.spec.min_success = Some(0)), "spec.minSuccess"),
        (Box::new(|j: &mut Job| j.spec.max_retry = -1), "spec.maxRetry"),
        (Box::new(|j: &mut Job| j.spec.tasks[0].topology_policy = Some("numa".into())), "spec.tasks[0].topologyPolicy"),
        (Box::new(|j: &mut Job| j.spec.priority_class_name = Some("High".into())), "spec.priorityClassName"),
    ] {
        let mut j = base();
        edit(&mut j);
        assert_eq!(rejects(&j, JobRule::Schema).field, field);
    }
    let mut j = base();
    j.spec.tasks[0].name = Some("Bad".into());
    let e = validate_job_create(&j, &open_default).unwrap_err();
    assert_eq!(e.errors[0].rule, JobRule::Schema);
}

#[test]
fn durations_are_go_durations() {
    let mut j = base();
    j.spec.running_estimate = Some("2h".into());
    let mut p = policy(&["PodPending"], None, "RestartPod");
    p.timeout = Some("5m30s".into());
    j.spec.tasks[1].policies = vec![p];
    accepts(&j);
    j.spec.tasks[1].policies[0].timeout = Some("5 minutes".into());
    assert_eq!(rejects(&j, JobRule::Duration).field, "spec.tasks[1].policies[0].timeout");
    j.spec.tasks[1].policies[0].timeout = None;
    j.spec.running_estimate = Some("2d".into());
    assert_eq!(rejects(&j, JobRule::Duration).field, "spec.runningEstimate");
}

// ---- UPDATE ----

#[test]
fn an_update_may_scale_and_reprioritise() {
    let old = mutate_job(&base(), "default", "volcano-rs");
    let mut new = old.clone();
    new.spec.tasks[1].replicas = 5;
    new.spec.tasks[1].min_available = Some(3);
    new.spec.min_available = 4;
    new.spec.priority_class_name = Some("high".into());
    assert_eq!(validate_job_update(&old, &new), Ok(()));
}

#[test]
fn an_update_changes_nothing_else() {
    let old = mutate_job(&base(), "default", "volcano-rs");
    let mut new = old.clone();
    new.spec.tasks[0].template.spec.as_mut().unwrap().containers[0].image = Some("other".into());
    let e = validate_job_update(&old, &new).unwrap_err();
    assert_eq!(e.errors[0].rule, JobRule::UpdateImmutable);
    assert_eq!(e.errors[0].field, "spec.tasks[0].template.spec.containers[0].image");
    let mut new = old.clone();
    new.spec.queue = Some("other".into());
    assert_eq!(validate_job_update(&old, &new).unwrap_err().errors[0].field, "spec.queue");
    let mut new = old.clone();
    new.spec.plugins.insert("env".into(), vec![]);
    assert_eq!(validate_job_update(&old, &new).unwrap_err().errors[0].field, "spec.plugins");
    let mut old = old;
    old.spec.plugins.insert("svc".into(), vec![]);
    let mut new = old.clone();
    new.spec.plugins.insert("env".into(), vec![]);
    assert_eq!(validate_job_update(&old, &new).unwrap_err().errors[0].field, "spec.plugins.env");
}

#[test]
fn an_update_may_name_a_created_pvc() {
    let mut old = base();
    old.spec.volumes =
        vec![VolumeSpec { mount_path: "/d".into(), volume_claim: Some(Default::default()), ..Default::default() }];
    let mut new = old.clone();
    new.spec.volumes[0].volume_claim_name = Some("tf-volume-x1".into());
    assert_eq!(validate_job_update(&old, &new), Ok(()));
}

#[test]
fn an_update_keeps_the_tasks() {
    let old = base();
    let mut new = old.clone();
    new.spec.tasks.push(task("chief", 1));
    let e = validate_job_update(&old, &new).unwrap_err();
    assert_eq!(e.errors.iter().map(|e| e.rule).collect::<Vec<_>>(), vec![JobRule::UpdateTaskCount]);
}

#[test]
fn an_update_does_not_scale_in_below_min_available() {
    let old = mutate_job(&base(), "default", "volcano-rs");
    // worker: 2 replicas, minAvailable 2 (defaulted): 1 is refused, naming the field.
    let mut new = old.clone();
    new.spec.tasks[1].replicas = 1;
    let e = validate_job_update(&old, &new).unwrap_err();
    assert_eq!(e.errors[0].rule, JobRule::ScaleBelowMinAvailable);
    assert_eq!(e.errors[0].field, "spec.tasks[1].replicas");
    assert!(e.errors[0].message.starts_with("1 is below the task's minAvailable (2)"), "{e}");
    // Lowering the task's and the job's minAvailable with it is a scale-in.
    new.spec.tasks[1].min_available = Some(1);
    new.spec.min_available = 2;
    assert_eq!(validate_job_update(&old, &new), Ok(()));
    // The job's minAvailable bounds the total.
    new.spec.min_available = 3;
    let e = validate_job_update(&old, &new).unwrap_err();
    assert_eq!(e.errors[0].rule, JobRule::ScaleBelowMinAvailable);
    assert_eq!(e.errors[0].field, "spec.tasks[1].replicas");
    assert!(e.errors[0].message.contains("would be below the job's minAvailable (3)"), "{e}");
}

#[test]
fn an_update_keeps_counts_consistent() {
    let old = base();
    let mut new = old.clone();
    new.spec.min_available = 4;
    assert!(validate_job_update(&old, &new).unwrap_err().broke(JobRule::JobMinAvailable));
    let mut new = old.clone();
    new.spec.tasks[0].min_available = Some(2);
    assert!(validate_job_update(&old, &new).unwrap_err().broke(JobRule::TaskMinAvailable));
    let mut new = old.clone();
    new.spec.tasks[0].replicas = -1;
    assert!(validate_job_update(&old, &new).unwrap_err().broke(JobRule::Schema));
}

// ---- MUTATE ----

#[test]
fn mutate_defaults_queue_scheduler_and_max_retry() {
    let mut j = base();
    j.spec.queue = None;
    let m = mutate_job(&j, "team-a", "volcano-rs");
    assert_eq!(m.spec.queue.as_deref(), Some("team-a"));
    assert_eq!(m.spec.scheduler_name.as_deref(), Some("volcano-rs"));
    assert_eq!(m.spec.max_retry, 3);
    j.spec.queue = Some("mine".into());
    j.spec.scheduler_name = Some("volcano".into());
    j.spec.max_retry = 7;
    let m = mutate_job(&j, "team-a", "volcano-rs");
    assert_eq!(
        (m.spec.queue.as_deref(), m.spec.scheduler_name.as_deref(), m.spec.max_retry),
        (Some("mine"), Some("volcano"), 7)
    );
}

#[test]
fn mutate_names_tasks_by_index() {
    let mut j = base();
    j.spec.tasks[1].name = None;
    j.spec.tasks[0].name = Some(String::new());
    let m = mutate_job(&j, "default", "volcano-rs");
    assert_eq!(m.spec.tasks.iter().map(|t| t.name()).collect::<Vec<_>>(), ["default0", "default1"]);
}

#[test]
fn mutate_sets_the_dns_policy_of_host_network_tasks() {
    let mut j = base();
    j.spec.tasks[0].template.spec.as_mut().unwrap().host_network = Some(true);
    j.spec.tasks[1].template.spec.as_mut().unwrap().host_network = Some(true);
    j.spec.tasks[1].template.spec.as_mut().unwrap().dns_policy = Some("Default".into());
    let m = mutate_job(&j, "default", "volcano-rs");
    let dns = |i: usize| m.spec.tasks[i].template.spec.as_ref().unwrap().dns_policy.clone();
    assert_eq!(dns(0).as_deref(), Some("ClusterFirstWithHostNet"));
    assert_eq!(dns(1).as_deref(), Some("Default"), "an explicit policy is kept");
    let m = mutate_job(&base(), "default", "volcano-rs");
    assert_eq!(m.spec.tasks[0].template.spec.as_ref().unwrap().dns_policy, None);
}

#[test]
fn mutate_defaults_task_and_job_min_available_and_task_max_retry() {
    let mut j = job(vec![task("a", 3), task("b", 4), task("c", 5)]);
    j.spec.tasks[1].partition_policy =
        Some(PartitionPolicySpec { total_partitions: 2, partition_size: 2, min_partitions: 1, ..Default::default() });
    j.spec.tasks[2].partition_policy =
        Some(PartitionPolicySpec { total_partitions: 5, partition_size: 1, ..Default::default() });
    j.spec.tasks[0].max_retry = 1;
    let m = mutate_job(&j, "default", "volcano-rs");
    let mins: Vec<Option<i32>> = m.spec.tasks.iter().map(|t| t.min_available).collect();
    assert_eq!(mins, [Some(3), Some(2), Some(5)], "replicas; minPartitions × size; replicas when minPartitions is 0");
    assert_eq!(m.spec.tasks.iter().map(|t| t.max_retry).collect::<Vec<_>>(), [1, 3, 3]);
    assert_eq!(m.spec.min_available, 10);
    j.spec.min_available = 4;
    j.spec.tasks[0].min_available = Some(1);
    let m = mutate_job(&j, "default", "volcano-rs");
    assert_eq!((m.spec.min_available, m.spec.tasks[0].min_available), (4, Some(1)), "explicit values are kept");
}

#[test]
fn mutate_adds_svc_and_ssh_for_framework_plugins() {
    for p in ["tensorflow", "mpi", "pytorch", "mxnet", "ray"] {
        let mut j = base();
        j.spec.plugins.insert(p.into(), vec!["--port=1".into()]);
        let m = mutate_job(&j, "default", "volcano-rs");
        assert_eq!(m.spec.plugins.get("svc"), Some(&vec![]), "{p}");
        assert_eq!(m.spec.plugins.contains_key("ssh"), p == "mpi", "{p}");
        assert_eq!(m.spec.plugins[p], vec!["--port=1".to_string()]);
    }
    let mut j = base();
    j.spec.plugins = BTreeMap::from([
        ("mpi".to_string(), vec![]),
        ("svc".to_string(), vec!["--disable-network-policy=true".to_string()]),
        ("ssh".to_string(), vec!["--ssh-port=2022".to_string()]),
    ]);
    assert_eq!(mutate_job(&j, "default", "volcano-rs").spec.plugins, j.spec.plugins, "existing arguments are kept");
    let mut j = base();
    j.spec.plugins.insert("env".into(), vec![]);
    assert_eq!(mutate_job(&j, "default", "volcano-rs").spec.plugins.len(), 1);
}

#[test]
fn a_mutated_volcano_tf_job_is_accepted() {
    let j: Job = serde_yaml_ng::from_str(crate::job::tests::TF_JOB).unwrap();
    let m = mutate_job(&j, "default", "volcano-rs");
    if let Err(e) = validate_job_create(&m, &open_default) {
        panic!("{e}");
    }
}
