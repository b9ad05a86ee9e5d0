//! Alibaba et-operator's elastic TrainingJob, planned as a pure function: [`plan`] takes a
//! [`TrainingJob`], what exists of it ([`Observed`]: its pods, its ScaleOut and ScaleIn
//! requests, the resize state remembered, the time) and returns the whole next step
//! ([`Plan`]): the status, the objects to create, delete or update, the statuses of the scale
//! requests, the events, and when to look again. The shell (`training_reconcile`) applies it.
//!
//! The order is et-operator's: the workers (`<job>-worker-<i>`, a headless Service each), once
//! they are all ready the ConfigMap `<job>-config` (the host lists and `discover_hosts.sh`)
//! and the launcher `<job>-launcher`; the job is Running when the launcher runs, Succeeded or
//! Failed with it, and then its worker pods go as `cleanPodPolicy` says. A failed job with
//! `restartPolicy: OnFailure` starts again, `backoffLimit` times at most.
//!
//! While the job runs, its ScaleOut and ScaleIn requests (`spec.selector.name` naming it) are
//! carried out one at a time, oldest first: a request moves the workers the job should have,
//! and [`crate::scale::step`] moves the host list there in the safe order (new workers join
//! it once Ready; removed workers leave it a grace period before their pods are deleted). A
//! request that would go below `minReplicas` or above `maxReplicas` is refused in its status.

pub mod objects;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use volcano_api::crd::PodGroup;
use volcano_api::et::{
    clean_pod_policy, condition as cond, restart_policy, JobCondition, JobStatus, ReplicaStatus, ScaleIn,
    ScaleInStatus, ScaleOut, ScaleOutStatus, TrainingJob, TrainingJobStatus, DEFAULT_SCALE_TIMEOUT_SECONDS, LAUNCHER,
    WORKER,
};

use crate::scale::{self, Member, MemberPod, Op, ScaleEvent, ScaleState};
use objects::{name, namespace, worker_index, worker_name};

/// Event and condition reasons (et-operator's, and volcano-rs's resize events of
/// [`ScaleEvent::reason`]).
pub mod reason {
    /// The job was accepted.
    pub const CREATED: &str = "TrainingJobCreated";
    /// The launcher runs.
    pub const RUNNING: &str = "TrainingJobRunning";
    /// The launcher succeeded; also a restart's deletions.
    pub const SUCCEEDED: &str = "TrainingJobSucceeded";
    /// The job failed.
    pub const FAILED: &str = "TrainingJobFailed";
    /// The launcher was evicted.
    pub const EVICTED: &str = "TrainingJobEvicted";
    /// A worker failed or disappeared.
    pub const WORKER_FAILED: &str = "TrainingJobWorkerFailed";
    /// Workers were made in place of failed ones.
    pub const WORKER_CREATED: &str = "TrainingJobWorkerCreated";
    /// The job was suspended (annotation `job-supervisor.kube-ai.io/job-suspended: "true"`).
    pub const WAITING_RESOURCE_TIMEOUT: &str = "WaitingResourceTimeout";
    /// A scale request started.
    pub const SCALING_START: &str = "ScalingStart";
    /// A ScaleOut succeeded.
    pub const SCALE_OUT_SUCCEEDED: &str = "ScalingOutSucceeded";
    /// A ScaleOut failed or was refused.
    pub const SCALE_OUT_FAILED: &str = "ScalingOutFailed";
    /// A ScaleIn succeeded.
    pub const SCALE_IN_SUCCEEDED: &str = "ScalingInSucceeded";
    /// A ScaleIn failed or was refused.
    pub const SCALE_IN_FAILED: &str = "ScalingInFailed";
}

/// What the planner sees of a pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// `status.phase` (empty when unset).
    pub phase: String,
    /// Running with every container ready.
    pub ready: bool,
    /// Being deleted.
    pub terminating: bool,
    /// `status.reason` (`Evicted`, ...).
    pub reason: Option<String>,
    /// The first terminated container's exit code.
    pub exit_code: Option<i32>,
}

impl PodView {
    /// What the planner needs of `pod`.
    pub fn of(pod: &Pod) -> Self {
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.clone()).unwrap_or_default();
        // The Ready condition when the kubelet wrote one, else every container ready.
        let condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .map(|c| c.status == "True");
        let containers = status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready));
        let ready = phase == "Running" && condition.unwrap_or(containers);
        let exit_code = status
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().find_map(|c| c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)));
        PodView {
            phase,
            ready,
            terminating: pod.metadata.deletion_timestamp.is_some(),
            reason: status.and_then(|s| s.reason.clone()),
            exit_code,
        }
    }

    fn finished(&self) -> bool {
        matches!(self.phase.as_str(), "Succeeded" | "Failed" | "Unknown")
    }
}

/// What exists of a job, and the time.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The job's worker pods by index.
    pub workers: &'a BTreeMap<Member, PodView>,
    /// The launcher's pod.
    pub launcher: Option<&'a PodView>,
    /// The ScaleOuts whose `spec.selector.name` is the job, in its namespace.
    pub scale_outs: &'a [ScaleOut],
    /// The ScaleIns whose `spec.selector.name` is the job, in its namespace.
    pub scale_ins: &'a [ScaleIn],
    /// The resize state remembered from the last step (`None`: rebuilt from the statuses).
    pub scale: Option<&'a ScaleState>,
    /// The scheduler of pods whose template names none.
    pub scheduler_name: &'a str,
    /// Milliseconds between removing workers from the host list and deleting their pods.
    pub grace_ms: i64,
    /// Milliseconds since the epoch.
    pub now_ms: i64,
}

/// Which object an event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// The TrainingJob.
    Job,
    /// A ScaleOut, by name.
    ScaleOut(String),
    /// A ScaleIn, by name.
    ScaleIn(String),
}

/// An event to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrainingEvent {
    /// Its object.
    pub subject: Subject,
    /// Warning or normal.
    pub warning: bool,
    /// The reason.
    pub reason: &'static str,
    /// The events API's `action`.
    pub action: String,
    /// The message.
    pub message: String,
}

/// One step of a job, to apply in this order: Secret, PodGroup, Services and pods created,
/// ConfigMap, pods and Services deleted, scale request statuses, the job's status.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// The job's next status (written when it differs).
    pub status: TrainingJobStatus,
    /// The ssh Secret to make when missing (its name).
    pub ssh_secret: Option<String>,
    /// The PodGroup to make when missing.
    pub pod_group: Option<PodGroup>,
    /// Services to create (a worker's).
    pub create_services: Vec<Service>,
    /// Pods to create.
    pub create_pods: Vec<Pod>,
    /// The ConfigMap to create, or to update when its data differ.
    pub config_map: Option<ConfigMap>,
    /// Pods to delete, by name.
    pub delete_pods: Vec<String>,
    /// Services to delete, by name.
    pub delete_services: Vec<String>,
    /// ScaleOut statuses to write (name, status).
    pub scale_outs: Vec<(String, ScaleOutStatus)>,
    /// ScaleIn statuses to write (name, status).
    pub scale_ins: Vec<(String, ScaleInStatus)>,
    /// Events.
    pub events: Vec<TrainingEvent>,
    /// The resize state to remember.
    pub scale: ScaleState,
    /// When to step again even if nothing changes (milliseconds since the epoch).
    pub wake_at_ms: Option<i64>,
}

/// The time `ms` as the API stores it (to the second).
pub fn time(ms: i64) -> Time {
    Time(Timestamp::from_second(ms.div_euclid(1000)).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn ms_of(t: &Time) -> i64 {
    t.0.as_millisecond()
}

/// et-operator's `setCondition`: nothing changes once Failed; the same condition again
/// changes nothing; a condition of a type already there replaces it (keeping its transition
/// time when its status is the same); Running and Restarting replace each other; Failed and
/// Succeeded set Running to False.
pub fn set_condition(status: &mut JobStatus, type_: &str, reason: &str, message: String, now_ms: i64) {
    if has(status, cond::FAILED) {
        return;
    }
    let reason = (!reason.is_empty()).then(|| reason.to_string());
    let current = status.conditions.iter().find(|c| c.type_ == type_);
    if current.is_some_and(|c| c.status == "True" && c.reason == reason && c.message.as_deref() == Some(&message)) {
        return;
    }
    let transition = current.filter(|c| c.status == "True").and_then(|c| c.last_transition_time.clone());
    let mut kept = Vec::new();
    for mut c in std::mem::take(&mut status.conditions) {
        if c.type_ == type_
            || (type_ == cond::RESTARTING && c.type_ == cond::RUNNING)
            || (type_ == cond::RUNNING && c.type_ == cond::RESTARTING)
        {
            continue;
        }
        if (type_ == cond::FAILED || type_ == cond::SUCCEEDED) && c.type_ == cond::RUNNING {
            c.status = "False".into();
        }
        kept.push(c);
    }
    kept.push(JobCondition {
        type_: type_.to_string(),
        status: "True".into(),
        reason,
        message: Some(message),
        last_update_time: Some(time(now_ms)),
        last_transition_time: Some(transition.unwrap_or_else(|| time(now_ms))),
    });
    status.conditions = kept;
}

/// Whether `status` has condition `type_` True.
pub fn has(status: &JobStatus, type_: &str) -> bool {
    status.conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
}

fn condition_time(status: &JobStatus, type_: &str) -> Option<i64> {
    status.conditions.iter().find(|c| c.type_ == type_ && c.status == "True")?.last_transition_time.as_ref().map(ms_of)
}

/// A condition that is also the phase (et-operator's `updateStatus`).
fn set_phase(status: &mut JobStatus, type_: &str, reason: &str, message: String, now_ms: i64) {
    set_condition(status, type_, reason, message, now_ms);
    status.phase = Some(type_.to_string());
}

/// The workers' numbers, checked: `replicas` (default 1), `minReplicas` (default `replicas`),
/// `maxReplicas` (default none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerCounts {
    /// At the start.
    pub replicas: i32,
    /// The fewest.
    pub min: i32,
    /// The most.
    pub max: Option<i32>,
}

/// Checks what the planner relies on; the error names the field and what it should be.
pub fn validate(job: &TrainingJob) -> Result<WorkerCounts, String> {
    let specs = &job.spec.et_replica_specs;
    let has_container =
        |t: &k8s_openapi::api::core::v1::PodTemplateSpec| t.spec.as_ref().is_some_and(|s| !s.containers.is_empty());
    let launcher = specs.launcher.as_ref().ok_or("spec.etReplicaSpecs.launcher is missing: a TrainingJob needs one")?;
    if !has_container(&launcher.template) {
        return Err(
            "spec.etReplicaSpecs.launcher.template.spec.containers is empty: the launcher needs a container".into()
        );
    }
    let worker = specs.worker.as_ref().ok_or("spec.etReplicaSpecs.worker is missing: a TrainingJob needs workers")?;
    if !has_container(&worker.template) {
        return Err("spec.etReplicaSpecs.worker.template.spec.containers is empty: the workers need a container".into());
    }
    let replicas = worker.replicas.unwrap_or(1);
    let min = worker.min_replicas.unwrap_or(replicas);
    let max = worker.max_replicas;
    if replicas < 1 || min < 1 || max.is_some_and(|m| m < 1) {
        return Err(format!(
            "spec.etReplicaSpecs.worker: replicas ({replicas}), minReplicas ({min}) and maxReplicas ({}) must be at least 1",
            max.map_or("unset".into(), |m| m.to_string())
        ));
    }
    if min > replicas || max.is_some_and(|m| m < replicas) {
        return Err(format!(
            "spec.etReplicaSpecs.worker.replicas is {replicas}: it must be between minReplicas ({min}) and maxReplicas ({})",
            max.map_or("unset".into(), |m| m.to_string())
        ));
    }
    if let Some(mode) = job.spec.launcher_attach_mode.as_deref() {
        if mode != volcano_api::et::ATTACH_MODE_SSH {
            return Err(format!(
                "spec.launcherAttachMode is {mode:?}: volcano-rs supports \"ssh\" only (kubexec needs pods/exec rights for the launcher; docs/et-operator.md)"
            ));
        }
    }
    Ok(WorkerCounts { replicas, min, max })
}

fn names(job: &str, members: &BTreeSet<Member>) -> Vec<String> {
    members.iter().map(|i| worker_name(job, *i)).collect()
}

fn members_of(job: &str, names: &[String]) -> BTreeSet<Member> {
    names.iter().filter_map(|n| worker_index(job, n)).collect()
}

/// A scale request, either kind.
#[derive(Clone, Copy, Debug)]
enum Request<'a> {
    Out(&'a ScaleOut),
    In(&'a ScaleIn),
}

impl Request<'_> {
    fn name(&self) -> &str {
        match self {
            Request::Out(r) => r.metadata.name.as_deref().unwrap_or_default(),
            Request::In(r) => r.metadata.name.as_deref().unwrap_or_default(),
        }
    }
    fn kind(&self) -> &'static str {
        match self {
            Request::Out(_) => "ScaleOut",
            Request::In(_) => "ScaleIn",
        }
    }
    fn created(&self) -> i64 {
        let t = match self {
            Request::Out(r) => r.metadata.creation_timestamp.as_ref(),
            Request::In(r) => r.metadata.creation_timestamp.as_ref(),
        };
        t.map_or(0, ms_of)
    }
    fn subject(&self) -> Subject {
        match self {
            Request::Out(_) => Subject::ScaleOut(self.name().to_string()),
            Request::In(_) => Subject::ScaleIn(self.name().to_string()),
        }
    }
}

/// A request's status while the step works on it.
struct Working<'a> {
    request: Request<'a>,
    status: JobStatus,
    /// `addPods` or `toDeletePods`.
    pods: Vec<String>,
}

impl Working<'_> {
    fn full_name(&self, ns: &str) -> String {
        format!("{}:{ns}/{}", self.request.kind(), self.request.name())
    }
    fn finished(&self) -> bool {
        has(&self.status, cond::SCALE_SUCCEEDED) || has(&self.status, cond::SCALE_FAILED)
    }
}

struct Step<'a, 'o> {
    job: &'a TrainingJob,
    obs: &'a Observed<'o>,
    plan: Plan,
    name: String,
    ns: String,
}

/// The next step of `job` (see the module documentation).
pub fn plan(job: &TrainingJob, obs: &Observed<'_>) -> Plan {
    let mut s = Step {
        job,
        obs,
        plan: Plan { status: job.status.clone().unwrap_or_default(), ..Default::default() },
        name: name(job).to_string(),
        ns: namespace(job).to_string(),
    };
    s.plan.scale = obs.scale.cloned().unwrap_or_default();
    s.run();
    s.plan
}

impl<'o> Step<'_, 'o> {
    fn now(&self) -> i64 {
        self.obs.now_ms
    }

    fn status(&mut self) -> &mut JobStatus {
        &mut self.plan.status.job
    }

    fn event(&mut self, subject: Subject, warning: bool, reason: &'static str, action: &str, message: String) {
        self.plan.events.push(TrainingEvent { subject, warning, reason, action: action.to_string(), message });
    }

    fn run(&mut self) {
        let now = self.now();
        if self.plan.status.job.conditions.is_empty() && self.plan.status.job.phase.is_none() {
            self.initialize();
        }
        if self.plan.status.job.start_time.is_none() {
            self.status().start_time = Some(time(now));
        }
        let counts = match validate(self.job) {
            Ok(c) => c,
            Err(message) => {
                if !has(&self.plan.status.job, cond::FAILED) {
                    self.fail(reason::FAILED, message.clone());
                    self.event(Subject::Job, true, reason::FAILED, "Validate", message);
                }
                return;
            }
        };
        if suspended(self.job) && self.plan.status.job.phase.as_deref() != Some(cond::SUSPENDED) {
            let msg = format!("TrainingJob {} is waiting resource timeout.", self.name);
            set_phase(self.status(), cond::SUSPENDED, reason::WAITING_RESOURCE_TIMEOUT, msg, now);
        }
        match self.plan.status.job.phase.clone().as_deref() {
            Some(cond::SUSPENDED) => self.delete_all(),
            Some(cond::SUCCEEDED) => self.clean_up(),
            Some(cond::FAILED) => self.failed(),
            Some(cond::RUNNING) | Some(cond::SCALING) => self.running(counts),
            Some(cond::CREATED) | None => self.create(counts),
            _ => {}
        }
    }

    fn initialize(&mut self) {
        let now = self.now();
        let msg = format!("TrainingJob {} is created.", self.name);
        let st = self.status();
        st.replica_statuses.insert(LAUNCHER.into(), ReplicaStatus::default());
        st.replica_statuses.insert(WORKER.into(), ReplicaStatus::default());
        set_phase(st, cond::CREATED, reason::CREATED, msg, now);
    }

    fn fail(&mut self, reason: &str, message: String) {
        let now = self.now();
        let st = self.status();
        if st.completion_time.is_none() {
            st.completion_time = Some(time(now));
        }
        set_phase(st, cond::FAILED, reason, message, now);
    }

    /// The workers the job should have: `status.targetWorkers`, else `0..replicas`.
    fn target(&self, counts: WorkerCounts) -> BTreeSet<Member> {
        let t = members_of(&self.name, &self.plan.status.target_workers);
        if t.is_empty() {
            scale::first(counts.replicas)
        } else {
            t
        }
    }

    fn create_workers(&mut self, members: &[Member]) {
        for &i in members {
            self.plan.create_pods.push(objects::worker_pod(self.job, i, self.obs.scheduler_name));
            self.plan.create_services.push(objects::worker_service(self.job, i));
        }
    }

    fn ensure_group(&mut self, counts: WorkerCounts) {
        self.plan.pod_group = Some(objects::pod_group(self.job, counts.min));
        if objects::uses_ssh(self.job) {
            self.plan.ssh_secret = Some(objects::ssh_secret_name(self.job));
        }
    }

    /// et-operator's steps while Created: workers, workers ready, launcher, launcher running.
    fn create(&mut self, counts: WorkerCounts) {
        let now = self.now();
        let target = self.target(counts);
        let st = &self.plan.status.job;
        if !has(st, cond::WORKERS_CREATED) || !has(st, cond::WORKERS_READY) {
            let workers = self.obs.workers;
            // A pod of an earlier run still going away is waited for (names are reused).
            let waiting = target.iter().any(|i| workers.get(i).is_some_and(|p| p.terminating));
            let missing: Vec<Member> = target.iter().filter(|i| !workers.contains_key(i)).copied().collect();
            if !missing.is_empty() || !has(st, cond::WORKERS_CREATED) {
                self.ensure_group(counts);
            }
            self.create_workers(&missing);
            self.plan.status.target_workers = names(&self.name, &target);
            self.plan.status.job.replica_statuses.insert(WORKER.into(), replica_status(workers.values()));
            if !has(&self.plan.status.job, cond::WORKERS_CREATED) {
                if waiting {
                    return;
                }
                let msg = format!("trainingjob({}/{}): created the workers", self.ns, self.name);
                set_condition(self.status(), cond::WORKERS_CREATED, "", msg, now);
            }
            let ready: BTreeSet<Member> =
                target.iter().filter(|i| workers.get(i).is_some_and(|p| p.ready && !p.terminating)).copied().collect();
            self.plan.status.current_workers = names(&self.name, &ready);
            if ready.len() == target.len() {
                let msg = format!("trainingjob({}/{}): all workers ({}) are ready", self.ns, self.name, ready.len());
                set_condition(self.status(), cond::WORKERS_READY, "", msg, now);
                self.plan.scale = ScaleState { published: ready, ..Default::default() };
            }
            return;
        }
        self.plan.config_map = Some(objects::config_map(self.job, &self.plan.status.current_workers));
        if !has(&self.plan.status.job, cond::LAUNCHER_CREATED) {
            if self.obs.launcher.is_none() {
                self.plan.create_pods.push(objects::launcher_pod(self.job, self.obs.scheduler_name));
            }
            let msg = format!("trainingjob({}/{}): created the launcher", self.ns, self.name);
            set_condition(self.status(), cond::LAUNCHER_CREATED, "", msg, now);
            return;
        }
        self.sync_launcher();
    }

    /// The launcher's state → the job's phase (et-operator's `syncLauncherState`). Returns
    /// whether the job goes on.
    fn sync_launcher(&mut self) -> bool {
        let (ns, name) = (self.ns.clone(), self.name.clone());
        let mut launcher = ReplicaStatus::default();
        let alive = match self.obs.launcher {
            None => {
                let always = self.job.spec.et_replica_specs.launcher.as_ref().and_then(|l| l.restart_policy.as_deref())
                    == Some(restart_policy::ALWAYS);
                if always {
                    self.plan.create_pods.push(objects::launcher_pod(self.job, self.obs.scheduler_name));
                    true
                } else {
                    launcher.failed = 1;
                    let msg = format!("job({ns}/{name}) has failed: its launcher pod is gone");
                    self.event(Subject::Job, true, reason::FAILED, "LauncherGone", msg.clone());
                    self.fail(reason::FAILED, msg);
                    false
                }
            }
            Some(p) if p.phase == "Succeeded" => {
                launcher.succeeded = 1;
                let now = self.now();
                let msg = format!("job({ns}/{name}) successfully completed.");
                self.event(Subject::Job, false, reason::SUCCEEDED, "LauncherSucceeded", msg.clone());
                let st = self.status();
                st.completion_time.get_or_insert_with(|| time(now));
                set_phase(st, cond::SUCCEEDED, reason::SUCCEEDED, msg, now);
                false
            }
            Some(p) if p.phase == "Failed" => {
                launcher.failed = 1;
                let msg = format!("job({ns}/{name}) has failed");
                let evicted = p.reason.as_deref() == Some("Evicted");
                self.event(Subject::Job, true, reason::FAILED, "LauncherFailed", msg.clone());
                self.fail(if evicted { reason::EVICTED } else { reason::FAILED }, msg);
                false
            }
            Some(p) => {
                if p.phase == "Running" {
                    launcher.active = 1;
                    if !has(&self.plan.status.job, cond::RUNNING) {
                        let now = self.now();
                        let msg = format!("job({ns}/{name}) is running.");
                        self.event(Subject::Job, false, reason::RUNNING, "LauncherRunning", msg.clone());
                        set_phase(self.status(), cond::RUNNING, reason::RUNNING, msg, now);
                    }
                }
                true
            }
        };
        self.plan.status.job.replica_statuses.insert(LAUNCHER.into(), launcher);
        alive
    }

    /// Pods go as `cleanPodPolicy` says (default `Running`): `All` every worker pod, `Running`
    /// those not finished, `None` none; the workers' Services go with `All` and `Running`.
    fn clean_up(&mut self) {
        let policy = self.job.spec.clean_pod_policy.as_deref().unwrap_or(clean_pod_policy::RUNNING);
        if policy == clean_pod_policy::NONE {
            return;
        }
        for (i, p) in self.obs.workers.iter().rev() {
            if p.terminating
                || (policy == clean_pod_policy::RUNNING && matches!(p.phase.as_str(), "Succeeded" | "Failed"))
            {
                continue;
            }
            self.plan.delete_pods.push(worker_name(&self.name, *i));
        }
        let all: BTreeSet<Member> = self.obs.workers.keys().copied().chain(self.target_members()).collect();
        self.plan.delete_services = all.iter().rev().map(|i| worker_name(&self.name, *i)).collect();
        self.plan.scale = ScaleState::default();
    }

    fn target_members(&self) -> BTreeSet<Member> {
        members_of(&self.name, &self.plan.status.target_workers)
    }

    /// A suspended job loses every pod and the workers' Services (et-operator's `cleanupAll`).
    fn delete_all(&mut self) {
        for (i, p) in self.obs.workers.iter().rev() {
            if !p.terminating {
                self.plan.delete_pods.push(worker_name(&self.name, *i));
            }
        }
        if self.obs.launcher.is_some_and(|l| !l.terminating) {
            self.plan.delete_pods.push(objects::launcher_name(&self.name));
        }
        let all: BTreeSet<Member> = self.obs.workers.keys().copied().chain(self.target_members()).collect();
        self.plan.delete_services = all.iter().rev().map(|i| worker_name(&self.name, *i)).collect();
        self.plan.scale = ScaleState::default();
    }

    /// A failed job starts again with `restartPolicy: OnFailure` while `restartCount` is below
    /// `backoffLimit` (default 6): its pods and Services go and its status starts over;
    /// otherwise it is cleaned up as a finished job.
    fn failed(&mut self) {
        let on_failure = self.job.spec.restart_policy.as_deref() == Some(restart_policy::ON_FAILURE);
        let limit = self.job.spec.backoff_limit.unwrap_or(6);
        let count = self.plan.status.job.restart_count;
        if !(on_failure && count < limit) {
            self.clean_up();
            return;
        }
        self.delete_all();
        let start = self.plan.status.job.start_time.clone();
        self.plan.status = TrainingJobStatus::default();
        self.plan.status.job.restart_count = count + 1;
        self.plan.status.job.start_time = start;
        self.initialize();
        self.plan.scale = ScaleState::default();
        let msg = format!("trainingjob({}/{}): restart {} of {limit}: deleted its pods", self.ns, self.name, count + 1);
        self.event(Subject::Job, false, reason::SUCCEEDED, "Restart", msg);
    }

    /// Running or Scaling: the launcher, the workers, the scale requests.
    fn running(&mut self, counts: WorkerCounts) {
        let now = self.now();
        if !self.sync_launcher() {
            return;
        }
        let workers = self.obs.workers;
        self.plan.status.job.replica_statuses.insert(WORKER.into(), replica_status(workers.values()));
        let mut target = self.target(counts);
        if self.obs.scale.is_none() {
            self.plan.scale = self.resume();
        }

        // Failed workers leave the host list at once; the worker restart policy may replace them.
        let policy =
            self.job.spec.et_replica_specs.worker.as_ref().and_then(|w| w.restart_policy.clone()).unwrap_or_default();
        let mut failed = Vec::new();
        let mut replace = 0;
        for &i in &target {
            let pod = workers.get(&i);
            let gone = match pod {
                None => self.plan.scale.published.contains(&i),
                Some(p) => p.finished(),
            };
            if !gone {
                continue;
            }
            failed.push(i);
            let phase = pod.map_or("Deleted", |p| p.phase.as_str());
            let mut msg = format!(
                "trainingjob({}/{}): worker {} phase is {phase}.",
                self.ns,
                self.name,
                worker_name(&self.name, i)
            );
            if pod.is_some_and(|p| p.reason.as_deref() == Some("Evicted")) {
                msg = format!(
                    "trainingjob({}/{}): worker {} are evicted.",
                    self.ns,
                    self.name,
                    worker_name(&self.name, i)
                );
            }
            if self.plan.scale.published.contains(&i) {
                self.event(Subject::Job, true, reason::WORKER_FAILED, "WorkerFailed", msg);
            }
            let again = match policy.as_str() {
                restart_policy::ALWAYS => true,
                restart_policy::ON_FAILURE => pod.is_some_and(|p| p.phase == "Failed"),
                restart_policy::EXIT_CODE => {
                    pod.is_some_and(|p| p.phase == "Failed" && p.exit_code.is_some_and(|c| c > 128 && c < 255))
                }
                _ => false,
            };
            if again {
                replace += 1;
            }
        }
        if !failed.is_empty() {
            for i in &failed {
                target.remove(i);
                self.plan.scale.published.remove(i);
            }
            let top = self.highest(&target);
            let new: Vec<Member> = (1..=replace).map(|k| top + k).collect();
            if !new.is_empty() {
                let msg = format!(
                    "trainingjob({}/{}): recreate workers {:?} for failed workers",
                    self.ns,
                    self.name,
                    names(&self.name, &new.iter().copied().collect())
                );
                self.event(Subject::Job, false, reason::WORKER_CREATED, "ReplaceWorkers", msg);
            }
            target.extend(new);
            self.plan.status.target_workers = names(&self.name, &target);
        }

        // The scale request in flight, or the oldest waiting one.
        let mut desired = target.clone();
        let mut working = self.pick_request();
        if let Some(w) = working.as_mut() {
            if !has(&w.status, cond::SCALING) {
                self.start(w, &target, counts);
            }
            if !w.finished() {
                let pods = members_of(&self.name, &w.pods);
                match w.request {
                    Request::Out(_) => desired.extend(pods),
                    Request::In(_) => desired.retain(|m| !pods.contains(m)),
                }
            }
        }
        if working.as_ref().is_none_or(|w| w.finished()) && self.plan.status.job.phase.as_deref() == Some(cond::SCALING)
        {
            self.plan.status.job.phase = Some(cond::RUNNING.into());
            self.plan.status.job.current_scaler = None;
        }

        // The host list moves to `desired` in the safe order.
        let pods: BTreeMap<Member, MemberPod> = workers
            .iter()
            .filter(|(_, p)| !p.finished())
            .map(|(i, p)| (*i, MemberPod { ready: p.ready, terminating: p.terminating }))
            .collect();
        let timeout_ms = match working.as_ref().map(|w| w.request) {
            Some(Request::Out(r)) => i64::from(r.spec.timeout.unwrap_or(DEFAULT_SCALE_TIMEOUT_SECONDS)) * 1000,
            _ => scale::DEFAULT_READY_TIMEOUT_SECONDS * 1000,
        };
        let input = scale::Input {
            desired: &desired,
            minimum: 0,
            minimum_field: "spec.etReplicaSpecs.worker.minReplicas",
            pods: &pods,
            now_ms: now,
            settings: scale::Settings { grace_ms: self.obs.grace_ms, ready_timeout_ms: timeout_ms },
        };
        let out = scale::step(&self.plan.scale, &input);
        self.create_workers(&out.create);
        if !out.create.is_empty() {
            self.ensure_group(counts);
        }
        for i in &out.delete {
            self.plan.delete_pods.push(worker_name(&self.name, *i));
            self.plan.delete_services.push(worker_name(&self.name, *i));
        }
        for e in &out.events {
            let message = e.message("workers", now);
            self.event(Subject::Job, e.warning(), e.reason(), e.kind(), message);
        }
        self.plan.status.current_workers = names(&self.name, &out.publish);
        self.plan.scale = out.state.clone();
        self.plan.wake_at_ms = out.wake_at_ms;
        self.plan.config_map = Some(objects::config_map(self.job, &self.plan.status.current_workers));

        if let Some(mut w) = working {
            if !w.finished() {
                self.advance(&mut w, &out, &desired, &pods);
            }
            self.write_request(&w);
        }
    }

    fn highest(&self, target: &BTreeSet<Member>) -> Member {
        let pods = self.obs.workers.keys().copied();
        target.iter().copied().chain(pods).max().unwrap_or(-1)
    }

    /// The resize state after a restart of the controller: the host list as the status
    /// says; a ScaleIn whose hosts are out of the list waits the rest of its grace period
    /// (from its `ScriptExecuted` time); a ScaleOut's new workers have until its `Scaling`
    /// time plus its timeout.
    fn resume(&self) -> ScaleState {
        let published = members_of(&self.name, &self.plan.status.current_workers);
        let mut state = ScaleState { published, ..Default::default() };
        if let Some(w) = self.current_request() {
            let pods = members_of(&self.name, &w.pods);
            match w.request {
                Request::In(_) => {
                    if let Some(at) = condition_time(&w.status, cond::SCRIPT_EXECUTED) {
                        let removing: BTreeSet<Member> = pods
                            .into_iter()
                            .filter(|m| !state.published.contains(m) && self.obs.workers.contains_key(m))
                            .collect();
                        if !removing.is_empty() {
                            state.op = Some(Op::In { removing, delete_at_ms: at + self.obs.grace_ms });
                        }
                    }
                }
                Request::Out(r) => {
                    if let Some(at) = condition_time(&w.status, cond::SCALING) {
                        let adding: BTreeSet<Member> =
                            pods.into_iter().filter(|m| !state.published.contains(m)).collect();
                        if !adding.is_empty() {
                            let timeout = i64::from(r.spec.timeout.unwrap_or(DEFAULT_SCALE_TIMEOUT_SECONDS)) * 1000;
                            state.op = Some(Op::Out { adding, deadline_ms: at + timeout });
                        }
                    }
                }
            }
        }
        state
    }

    fn requests(&self) -> Vec<Working<'o>> {
        let outs: &'o [ScaleOut] = self.obs.scale_outs;
        let ins: &'o [ScaleIn] = self.obs.scale_ins;
        let mut all: Vec<Working<'o>> = outs
            .iter()
            .map(|r| {
                let s = r.status.clone().unwrap_or_default();
                Working { request: Request::Out(r), status: s.job, pods: s.add_pods }
            })
            .chain(ins.iter().map(|r| {
                let s = r.status.clone().unwrap_or_default();
                Working { request: Request::In(r), status: s.job, pods: s.to_delete_pods }
            }))
            .collect();
        all.sort_by(|a, b| {
            (a.request.created(), a.request.kind(), a.request.name()).cmp(&(
                b.request.created(),
                b.request.kind(),
                b.request.name(),
            ))
        });
        all
    }

    /// The request the job's `currentScaler` names, if it is not finished.
    fn current_request(&self) -> Option<Working<'o>> {
        let current = self.plan.status.job.current_scaler.clone()?;
        self.requests().into_iter().find(|w| w.full_name(&self.ns) == current && !w.finished())
    }

    /// The request to work on: the current one, else the oldest not finished. Requests seen
    /// for the first time get et-operator's `Created` condition.
    fn pick_request(&mut self) -> Option<Working<'o>> {
        let now = self.now();
        let mut all = self.requests();
        for w in &mut all {
            if w.status.conditions.is_empty() && w.status.phase.is_none() {
                let msg = format!(
                    "Scaling job {} created, match the training job {}/{}",
                    w.full_name(&self.ns),
                    self.ns,
                    self.name
                );
                set_condition(&mut w.status, cond::CREATED, "", msg, now);
                self.write_request(w);
            }
        }
        let current = self.plan.status.job.current_scaler.clone();
        let at = all
            .iter()
            .position(|w| current.as_deref() == Some(w.full_name(&self.ns).as_str()) && !w.finished())
            .or_else(|| all.iter().position(|w| !w.finished()))?;
        Some(all.swap_remove(at))
    }

    /// Starts request `w` on the workers `target`: checks it, picks its pods, or refuses it.
    fn start(&mut self, w: &mut Working<'_>, target: &BTreeSet<Member>, counts: WorkerCounts) {
        let now = self.now();
        let full = w.full_name(&self.ns);
        let job = format!("trainingjob {}/{}", self.ns, self.name);
        let chosen: Result<BTreeSet<Member>, String> = match w.request {
            Request::Out(r) => match r.spec.to_add.as_ref().and_then(|a| a.count) {
                None => Err(format!("{full}: spec.toAdd.count is not set: it says how many workers to add")),
                Some(n) if n <= 0 => Err(format!("{full}: spec.toAdd.count is {n}: it must be greater than 0")),
                Some(n) => {
                    let after = target.len() as i64 + i64::from(n);
                    match counts.max {
                        Some(max) if after > i64::from(max) => Err(format!(
                            "{full}: adding {n} workers to the {} of {job} would make {after}, more than its maxReplicas {max} (spec.etReplicaSpecs.worker.maxReplicas)",
                            target.len()
                        )),
                        _ => {
                            let top = self.highest(target);
                            Ok((1..=n).map(|k| top + k).collect())
                        }
                    }
                }
            },
            Request::In(r) => {
                let spec = r.spec.to_delete.clone().unwrap_or_default();
                let picked: Result<BTreeSet<Member>, String> = if !spec.pod_names.is_empty() {
                    let picked: BTreeSet<Member> = spec
                        .pod_names
                        .iter()
                        .filter_map(|n| worker_index(&self.name, n))
                        .filter(|i| target.contains(i))
                        .collect();
                    if picked.is_empty() {
                        Err(format!(
                            "{full}: none of spec.toDelete.podNames {:?} is a worker of {job} (its workers: {:?})",
                            spec.pod_names,
                            names(&self.name, target)
                        ))
                    } else {
                        Ok(picked)
                    }
                } else if spec.count > 0 {
                    let n = spec.count as usize;
                    if n >= target.len() {
                        Err(format!(
                            "{full}: spec.toDelete.count is {n}: it must be less than the {} workers of {job}",
                            target.len()
                        ))
                    } else {
                        Ok(target.iter().rev().take(n).copied().collect())
                    }
                } else {
                    Err(format!("{full}: set spec.toDelete.count (greater than 0) or spec.toDelete.podNames"))
                };
                picked.and_then(|p| {
                    let left = target.len() - p.len();
                    if (left as i64) < i64::from(counts.min) {
                        Err(format!(
                            "{full}: removing {} of the {} workers of {job} would leave {left}, fewer than its minReplicas {} (spec.etReplicaSpecs.worker.minReplicas)",
                            p.len(),
                            target.len(),
                            counts.min
                        ))
                    } else {
                        Ok(p)
                    }
                })
            }
        };
        let chosen = match chosen {
            Ok(c) => c,
            Err(message) => return self.finish(w, false, message),
        };
        w.pods = names(&self.name, &chosen);
        let msg = format!("trainingJob({}/{}) execute {full}", self.ns, self.name);
        set_phase(&mut w.status, cond::SCALING, reason::SCALING_START, msg.clone(), now);
        let st = self.status();
        set_phase(st, cond::SCALING, reason::SCALING_START, msg.clone(), now);
        st.current_scaler = Some(full);
        self.event(w.request.subject(), false, reason::SCALING_START, "ScalingStart", msg.clone());
        self.event(Subject::Job, false, reason::SCALING_START, "ScalingStart", msg);
    }

    /// Ends request `w`: ScaleSucceeded or ScaleFailed, on it and on the job; the job goes
    /// back to Running.
    fn finish(&mut self, w: &mut Working<'_>, ok: bool, message: String) {
        let now = self.now();
        let (type_, reason) = match (w.request, ok) {
            (Request::Out(_), true) => (cond::SCALE_SUCCEEDED, reason::SCALE_OUT_SUCCEEDED),
            (Request::Out(_), false) => (cond::SCALE_FAILED, reason::SCALE_OUT_FAILED),
            (Request::In(_), true) => (cond::SCALE_SUCCEEDED, reason::SCALE_IN_SUCCEEDED),
            (Request::In(_), false) => (cond::SCALE_FAILED, reason::SCALE_IN_FAILED),
        };
        set_phase(&mut w.status, type_, reason, message.clone(), now);
        let st = self.status();
        set_condition(st, type_, reason, message.clone(), now);
        if st.phase.as_deref() == Some(cond::SCALING) {
            st.phase = Some(cond::RUNNING.into());
        }
        st.current_scaler = None;
        self.event(w.request.subject(), !ok, reason, type_, message.clone());
        self.event(Subject::Job, !ok, reason, type_, message);
    }

    /// Request `w` after the resize step `out`: a ScaleOut succeeds once its workers are in
    /// the host list and fails when they were rolled back; a ScaleIn records when its workers
    /// left the host list (`ScriptExecuted`) and succeeds once their pods are deleted.
    fn advance(
        &mut self,
        w: &mut Working<'_>,
        out: &scale::Outcome,
        desired: &BTreeSet<Member>,
        pods: &BTreeMap<Member, MemberPod>,
    ) {
        let now = self.now();
        let full = w.full_name(&self.ns);
        let members = members_of(&self.name, &w.pods);
        match w.request {
            Request::Out(r) => {
                // et-operator's ScaleOut counts its own workers by phase.
                let views = members.iter().filter_map(|m| self.obs.workers.get(m));
                w.status.replica_statuses.insert(WORKER.into(), replica_status(views));
                if members.iter().all(|m| out.publish.contains(m)) {
                    self.plan.status.target_workers = names(&self.name, desired);
                    self.finish(w, true, format!("{full} has Succeeded"));
                } else if let Some(ScaleEvent::ScaleOutRolledBack { not_ready, .. }) =
                    out.events.iter().find(|e| matches!(e, ScaleEvent::ScaleOutRolledBack { .. }))
                {
                    let timeout = r.spec.timeout.unwrap_or(DEFAULT_SCALE_TIMEOUT_SECONDS);
                    let msg = format!(
                        "scaleout job {full} execution timeout: workers {:?} were not ready within {timeout}s (spec.timeout); their pods are deleted",
                        names(&self.name, &not_ready.iter().copied().collect())
                    );
                    self.finish(w, false, msg);
                }
            }
            Request::In(_) => {
                if !has(&w.status, cond::SCRIPT_EXECUTED) && !members.iter().any(|m| out.publish.contains(m)) {
                    let msg = format!(
                        "trainingjob({}/{}): {:?} removed from the host list for {full}",
                        self.ns, self.name, w.pods
                    );
                    set_condition(&mut w.status, cond::SCRIPT_EXECUTED, "", msg, now);
                }
                let alive =
                    members.iter().any(|m| pods.get(m).is_some_and(|p| !p.terminating) && !out.delete.contains(m));
                if has(&w.status, cond::SCRIPT_EXECUTED) && !alive {
                    self.plan.status.target_workers = names(&self.name, desired);
                    self.finish(w, true, format!("{full} has Succeeded"));
                }
            }
        }
    }

    /// Queues request `w`'s status to be written (once per step: the last one wins).
    fn write_request(&mut self, w: &Working<'_>) {
        let name = w.request.name().to_string();
        match w.request {
            Request::Out(_) => {
                let status = ScaleOutStatus { job: w.status.clone(), add_pods: w.pods.clone() };
                self.plan.scale_outs.retain(|(n, _)| *n != name);
                self.plan.scale_outs.push((name, status));
            }
            Request::In(_) => {
                let status = ScaleInStatus { job: w.status.clone(), to_delete_pods: w.pods.clone() };
                self.plan.scale_ins.retain(|(n, _)| *n != name);
                self.plan.scale_ins.push((name, status));
            }
        }
    }
}

/// Whether the job carries et-operator's suspension annotation set to `true`.
pub fn suspended(job: &TrainingJob) -> bool {
    job.metadata.annotations.as_ref().and_then(|a| a.get(volcano_api::et::SUSPENDED_ANNOTATION)).map(String::as_str)
        == Some("true")
}

/// The pods of one replica type by phase.
pub fn replica_status<'a>(pods: impl Iterator<Item = &'a PodView>) -> ReplicaStatus {
    let mut r = ReplicaStatus::default();
    for p in pods {
        match p.phase.as_str() {
            "Running" => r.active += 1,
            "Succeeded" => r.succeeded += 1,
            "Failed" => r.failed += 1,
            _ => {}
        }
    }
    r
}

#[cfg(test)]
mod tests;
