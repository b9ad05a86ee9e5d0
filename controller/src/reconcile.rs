//! The reconciler: one Job at a time (kube-runtime never runs two reconciles of one object
//! at once), applying the pure parts of this crate to the API. It decides nothing itself:
//! what to do comes from [`JobMemory`] and [`plan::step`], and the reconcile turns it into
//! API calls.
//!
//! A reconcile:
//! 1. deletes the job when its `ttlSecondsAfterFinished` expired;
//! 2. turns what changed since the last reconcile into requests: Commands targeting the
//!    job (each deleted first; one whose delete fails is left alone), then
//!    [`JobMemory::observe`] of the pods (added, updated, deleted, compared with the pods
//!    seen last time), the PodGroup's phase, and delayed actions that came due; the requests
//!    wait in the job's memory until handled, so a failed reconcile handles them again;
//! 3. for each request ([`JobMemory::next`]: the policies, a delayed action kept for later),
//!    one step of the state machine, planned whole by [`plan::step`] and applied in
//!    Volcano's order: plugin objects, host lists, volume claims, PodGroup, pods, the plugin
//!    objects a kill removes, the status, the PodGroup's deletion; with no request, one
//!    `SyncJob` step. A resize in flight ([`crate::scale`]) requeues the job at its grace
//!    period's end or its ready timeout, and its steps are Kubernetes Events.
//!
//! A host list ConfigMap (`<job>-svc`, `<job>-mpi-hostfile`) is read on every sync and
//! created when missing or patched when its data differ from the plan, as Volcano's
//! `OnJobUpdate` does, so one that was deleted comes back at the job's next sync.
//!
//! Every create treats 409 AlreadyExists as success (names are deterministic), every delete
//! treats 404 as success; another API error ends the reconcile with an error, and the job is
//! requeued with back-off. After `--max-requeue-num` failed reconciles in a row, the job is
//! terminated and the failing request dropped, as Volcano's `handleJobError` does.
//!
//! Kubernetes Events with Volcano's reasons and messages go through the
//! [`Recorder`](crate::recorder::Recorder), which never blocks a reconcile.
//!
//! Volcano's job metrics are updated from what the reconcile decided, with no call of its
//! own: a job entering Completed or Failed ([`Desired::entered_finished`]) counts once its
//! status is written, and each pod created observes the time from the job's creation to the
//! pod's (both as the API server stamped them).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, PodStatus, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use thiserror::Error;
use tokio::sync::watch;
use volcano_api::bus::{Action, Command};
use volcano_api::crd::PodGroup;
use volcano_api::job::{Job, JobPhase};
use volcano_kube::status_code as code;
use volcano_metrics::ControllerMetrics;

use crate::events::{self, OUT_OF_SYNC_KEY};
use crate::memory::{JobMemory, Next};
use crate::plan::{
    self, Desired, JobResources, ObjectNames, PlanError, PodDeletion, PodGroupChange, Stage, StepError, VolumeClaim,
};
use crate::plugins::{ssh, PluginError};
use crate::recorder::{self, JobEvent, Recorder};
use crate::scale::ScaleState;
use crate::state::{Target, Work};
use crate::status;

/// Why a reconcile failed (the job is requeued with back-off).
#[derive(Debug, Error)]
pub enum ReconcileError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The job cannot be planned.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The job's plugins are wrong.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// The ssh key could not be generated.
    #[error("cannot generate the ssh key: {0}")]
    SshKey(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A volume's PVC is missing, or is not the job's.
    #[error("{0}")]
    Pvc(String),
}

impl ReconcileError {
    /// A bounded label for logs, saying what the user looks at: the API call (its
    /// [`volcano_kube::api_error_category`]: RBAC, a conflict, throttling, …), the job's
    /// spec (the [`PlanError`] or [`PluginError`] category), the ssh key generation
    /// (`ssh_key`) or a volume's claim (`pvc`).
    pub fn category(&self) -> &'static str {
        match self {
            ReconcileError::Api { source, .. } => volcano_kube::api_error_category(source),
            ReconcileError::Plan(e) => e.category(),
            ReconcileError::Plugin(e) => e.category(),
            ReconcileError::SshKey(_) => "ssh_key",
            ReconcileError::Pvc(_) => "pvc",
        }
    }

    /// Whether the error says the API server is away, overloaded or throttling
    /// ([`volcano_kube::is_transient`]): such a failure passes with the outage, so it is
    /// retried within seconds and never counts towards `--max-requeue-num`.
    pub fn is_transient(&self) -> bool {
        matches!(self, ReconcileError::Api { source, .. } if volcano_kube::is_transient(source))
    }
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let what = what.into();
    move |source| ReconcileError::Api { what, source }
}

/// What every reconcile shares.
pub struct Context {
    /// The client.
    pub client: Client,
    /// The pods of jobs (label `volcano.sh/job-name`).
    pub pods: Store<Pod>,
    /// The PodGroups.
    pub pod_groups: Store<PodGroup>,
    /// The Commands.
    pub commands: Store<Command>,
    /// The PriorityClasses (the order of the tasks in a PodGroup's `minResources`).
    pub priority_classes: Store<PriorityClass>,
    /// The scheduler of jobs that name none.
    pub scheduler_name: String,
    /// Whether this replica leads.
    pub leading: watch::Receiver<bool>,
    recorder: Recorder,
    metrics: ControllerMetrics,
    max_requeue_num: i32,
    synced: Option<watch::Receiver<bool>>,
    memory: Mutex<HashMap<String, JobMemory>>,
}

impl Context {
    /// A context over the stores, recording no events, with Volcano's `--max-requeue-num`
    /// default (15) and metrics of its own.
    pub fn new(
        client: Client,
        pods: Store<Pod>,
        pod_groups: Store<PodGroup>,
        commands: Store<Command>,
        priority_classes: Store<PriorityClass>,
        scheduler_name: String,
        leading: watch::Receiver<bool>,
    ) -> Self {
        Context {
            client,
            pods,
            pod_groups,
            commands,
            priority_classes,
            scheduler_name,
            leading,
            recorder: Recorder::disabled(),
            metrics: ControllerMetrics::new(),
            max_requeue_num: 15,
            synced: None,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// Records the jobs' Kubernetes Events with `recorder`.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// Updates `metrics` (the ones [`crate::run`] serves).
    #[must_use]
    pub fn with_metrics(mut self, metrics: ControllerMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The metrics the reconciles update.
    pub fn metrics(&self) -> &ControllerMetrics {
        &self.metrics
    }

    /// Waits for the stores' first lists on `synced` (set by [`crate::run`]'s one waiter per
    /// store) instead of on each store.
    #[must_use]
    pub fn with_synced(mut self, synced: watch::Receiver<bool>) -> Self {
        self.synced = Some(synced);
        self
    }

    /// Waits until the stores have their first lists. kube-runtime's
    /// `Store::wait_until_ready` wakes only the last of several concurrent waiters (it polls
    /// one oneshot receiver), so reconciles that start together before the lists arrive
    /// would wait for ever: with `synced`, one task waits on the stores and the reconciles
    /// wait on a watch channel.
    async fn stores_ready(&self) {
        match &self.synced {
            Some(rx) => {
                let _ = rx.clone().wait_for(|s| *s).await;
            }
            None => {
                let _ = self.pods.wait_until_ready().await;
                let _ = self.pod_groups.wait_until_ready().await;
                let _ = self.commands.wait_until_ready().await;
                let _ = self.priority_classes.wait_until_ready().await;
            }
        }
    }

    /// Failed reconciles in a row after which a job is terminated (negative: never).
    #[must_use]
    pub fn with_max_requeue_num(mut self, n: i32) -> Self {
        self.max_requeue_num = n;
        self
    }

    /// The event recorder.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// PriorityClass name → value.
    fn priority_class_values(&self) -> BTreeMap<String, i32> {
        self.priority_classes.state().iter().map(|pc| (pc.name_any(), pc.value)).collect()
    }

    fn take_memory(&self, key: &str, uid: &str) -> JobMemory {
        let mut m = self.memory.lock().expect("memory lock").remove(key).unwrap_or_default();
        if m.uid != uid {
            m = JobMemory::new(uid);
        }
        m
    }

    fn put_memory(&self, key: String, m: JobMemory) {
        self.memory.lock().expect("memory lock").insert(key, m);
    }

    /// Forgets what the reconciles remember of job `key` (`namespace/name`).
    pub fn forget(&self, key: &str) {
        self.memory.lock().expect("memory lock").remove(key);
    }
}

fn controlled_by(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Reconciles one job.
pub async fn reconcile(job: Arc<Job>, ctx: Arc<Context>) -> Result<Requeue, ReconcileError> {
    if !*ctx.leading.borrow() {
        return Ok(Requeue::await_change());
    }
    ctx.stores_ready().await;
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let key = events::job_key(&ns, &name);
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let now = Timestamp::now();
    if job.metadata.deletion_timestamp.is_some() {
        ctx.forget(&key);
        return Ok(Requeue::await_change());
    }
    let mut requeue: Option<Duration> = None;
    if let Some(left) = status::ttl_expired(&job, now) {
        if left.is_zero() {
            let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
            let dp = DeleteParams {
                propagation_policy: Some(PropagationPolicy::Foreground),
                preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                ..Default::default()
            };
            match jobs.delete(&name, &dp).await {
                Ok(_) => tracing::info!(job = %key, "deleted: ttlSecondsAfterFinished expired"),
                Err(e) if matches!(code(&e), Some(404 | 409)) => {}
                Err(e) => return Err(api_err(format!("delete job {key}"))(e)),
            }
            ctx.forget(&key);
            return Ok(Requeue::await_change());
        }
        requeue = Some(left);
    }

    let mut mem = ctx.take_memory(&key, &uid);
    let result = reconcile_with(&job, &ctx, &mut mem, now).await;
    if let Err(e) = &result {
        tracing::warn!(job = %key, category = e.category(), failures = mem.failures, "reconcile failed: {e}");
    }
    let wake = result.as_ref().ok().copied().flatten();
    let due = [mem.delayed.next_due(), wake].into_iter().flatten().min();
    ctx.put_memory(key, mem);
    result?;
    if let Some(due) = due {
        let left = Duration::try_from(due.duration_since(Timestamp::now())).unwrap_or(Duration::ZERO);
        requeue = Some(requeue.map_or(left, |r| r.min(left)));
    }
    Ok(match requeue {
        Some(d) => Requeue::requeue(d.max(Duration::from_millis(100))),
        None => Requeue::await_change(),
    })
}

/// The back-off after a failed reconcile: 200 ms doubling up to a minute, or, when the API
/// server was away or throttling, [`volcano_kube::outage_retry`] (1.5 to 3 s), so that no
/// job waits long after the API server is back.
pub fn error_policy(job: Arc<Job>, e: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    if e.is_transient() {
        return Requeue::requeue(volcano_kube::outage_retry());
    }
    let key = events::job_key(&job.namespace().unwrap_or_default(), &job.name_any());
    let failures = ctx.memory.lock().expect("memory lock").get(&key).map_or(1, |m| m.failures);
    Requeue::requeue(volcano_kube::retry_backoff(failures))
}

/// One reconcile of a job; counts its failures in `mem`, and after `--max-requeue-num` of
/// them in a row terminates the job instead of failing again (Volcano's `handleJobError`).
/// Returns when a resize in flight wants the job reconciled again.
async fn reconcile_with(
    job: &Job,
    ctx: &Context,
    mem: &mut JobMemory,
    now: Timestamp,
) -> Result<Option<Timestamp>, ReconcileError> {
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let uid = job.metadata.uid.clone().unwrap_or_default();

    // Commands: deleted first, exactly once.
    let commands: Api<Command> = Api::namespaced(ctx.client.clone(), &ns);
    let mut cmds: Vec<Arc<Command>> = ctx
        .commands
        .state()
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|c| c.target.as_ref().is_some_and(|t| t.kind == "Job" && t.name == name))
        .collect();
    cmds.sort_by(|a, b| a.metadata.creation_timestamp.cmp(&b.metadata.creation_timestamp));
    for cmd in cmds {
        let dp = DeleteParams {
            preconditions: Some(Preconditions { uid: cmd.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match commands.delete(&cmd.name_any(), &dp).await {
            Ok(_) => {
                ctx.recorder.record(job, recorder::command_issued(cmd.action.as_ref()));
                if let Some(req) = events::command_issued(&cmd) {
                    tracing::info!(job = %format!("{ns}/{name}"), action = ?cmd.action, "command");
                    mem.pending.push(req);
                }
            }
            // Deleted by another reconcile (a stale store), or not deletable: not ours to run.
            Err(e) => tracing::debug!(command = %cmd.name_any(), "command not run: {e}"),
        }
    }

    // Pods, the PodGroup's phase and delayed actions that came due: what changed since
    // last time.
    let pods: Vec<Pod> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(&p.metadata, &uid))
        .map(|p| (*p).clone())
        .collect();
    let pg_name = plan::pod_group_name(job)?;
    let pg = ctx
        .pod_groups
        .state()
        .into_iter()
        .find(|g| g.metadata.namespace.as_deref() == Some(ns.as_str()) && g.name_any() == pg_name)
        .map(|g| (*g).clone());
    mem.observe(job, &pods, pg.as_ref(), now);

    let mut job = job.clone();
    if job.spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        job.spec.scheduler_name = Some(ctx.scheduler_name.clone());
    }
    let mut stepper = Stepper {
        ctx,
        pods,
        pod_group: pg,
        stored_status: job.status.clone(),
        scale: std::mem::take(&mut mem.scale),
        wake_at: None,
    };
    let mut failing = Failing { action: Action::SyncJob, request: false };
    let handled = handle_requests(&mut job, &mut stepper, mem, now, &mut failing).await;
    // What the applied steps left, even when a later one failed.
    mem.scale = stepper.scale.clone();
    let Err(e) = handled else {
        mem.failures = 0;
        return Ok(stepper.wake_at);
    };
    // An API server that is away or throttling is no fault of the job: retried, not counted.
    if e.is_transient() {
        return Err(e);
    }
    mem.failures += 1;
    let limit = ctx.max_requeue_num;
    if limit < 0 || mem.failures <= limit.unsigned_abs() {
        return Err(e);
    }
    // The retry limit: an event, TerminateJob, and the failing request dropped.
    let key = events::job_key(&ns, &name);
    ctx.recorder.record(&job, recorder::retry_limit_reached(&failing.action));
    tracing::warn!(
        job = %key,
        category = e.category(),
        failures = mem.failures,
        "terminating the job: retry limit reached: {e}"
    );
    if let Err(e) = stepper.step(&mut job, &Action::TerminateJob, None).await {
        tracing::error!(job = %key, "cannot terminate the job: {e}");
    }
    if failing.request && !mem.pending.is_empty() {
        mem.pending.remove(0);
    }
    mem.failures = 0;
    mem.scale = std::mem::take(&mut stepper.scale);
    Ok(None)
}

/// The action a reconcile was running when it failed, and whether it came from the first
/// pending request (else from the closing sync).
struct Failing {
    action: Action,
    request: bool,
}

/// The pending requests, each through the policies ([`JobMemory::next`]) and one step of
/// the state machine; one sync when none stepped.
async fn handle_requests(
    job: &mut Job,
    stepper: &mut Stepper<'_>,
    mem: &mut JobMemory,
    now: Timestamp,
    failing: &mut Failing,
) -> Result<(), ReconcileError> {
    let rec = &stepper.ctx.recorder;
    let mut ran = false;
    while let Some(next) = mem.next(job, now) {
        match next {
            Next::Delayed { action, delay } => rec.record(job, recorder::delayed_action(&action, delay)),
            Next::Run { action, target, request } => {
                rec.record(job, recorder::execute_action(&action));
                *failing = Failing { action: action.clone(), request: true };
                stepper.step(job, &action, target.as_ref()).await?;
                ran = true;
                mem.finished(&request, &action);
            }
        }
    }
    if !ran {
        *failing = Failing { action: Action::SyncJob, request: false };
        stepper.step(job, &Action::SyncJob, None).await?;
    }
    Ok(())
}

struct Stepper<'a> {
    ctx: &'a Context,
    pods: Vec<Pod>,
    pod_group: Option<PodGroup>,
    /// The status as the API server has it.
    stored_status: Option<volcano_api::job::JobStatus>,
    /// Each task's resize state as the applied steps left it.
    scale: BTreeMap<String, ScaleState>,
    /// When the last applied sync's resize in flight wants another step.
    wake_at: Option<Timestamp>,
}

impl Stepper<'_> {
    fn client(&self) -> Client {
        self.ctx.client.clone()
    }

    fn record(&self, job: &Job, ev: JobEvent) {
        self.ctx.recorder.record(job, ev);
    }

    /// The members each task's published host list names, for the tasks this controller
    /// has no resize state of (it restarted, or another replica led): read back from the
    /// `svc` ConfigMap, so that a resize in flight resumes from what the launchers were told
    /// rather than from the pods alive (which would publish a scale-out's pods before they
    /// are Ready). Empty when every task has a state, the job has no `svc` plugin, or the
    /// list cannot be read (then the pods are the only witness).
    async fn published_hosts(&self, job: &Job) -> BTreeMap<String, std::collections::BTreeSet<crate::scale::Member>> {
        let missing: Vec<&volcano_api::job::TaskSpec> =
            job.spec.tasks.iter().filter(|t| !self.scale.contains_key(t.name())).collect();
        if missing.is_empty() || !job.spec.plugins.contains_key("svc") {
            return BTreeMap::new();
        }
        let ns = job.namespace().unwrap_or_default();
        let name = crate::plugins::svc::config_map_name(&job.name_any());
        let data = match Api::<ConfigMap>::namespaced(self.client(), &ns).get_opt(&name).await {
            Ok(Some(cm)) => cm.data.unwrap_or_default(),
            Ok(None) => return BTreeMap::new(),
            Err(e) => {
                tracing::debug!(job = %format!("{ns}/{}", job.name_any()), "the host list could not be read back: {e}");
                return BTreeMap::new();
            }
        };
        missing
            .into_iter()
            .filter_map(|t| {
                let upto = self
                    .pods
                    .iter()
                    .filter(|p| events::pod_task(p) == Some(t.name()))
                    .filter_map(|p| p.annotations().get(plan::TASK_INDEX_KEY)?.parse::<i32>().ok())
                    .max()
                    .unwrap_or(0);
                Some((t.name().to_string(), plan::published_members(job, t, &data, upto)?))
            })
            .collect()
    }

    /// One step of the state machine for `action`: planned whole by [`plan::step`], then
    /// applied in Volcano's order (plugin objects, volume claims, PodGroup, pods; the
    /// status; the PodGroup's deletion), stopping at the first failure.
    async fn step(&mut self, job: &mut Job, action: &Action, target: Option<&Target>) -> Result<(), ReconcileError> {
        let now = Timestamp::now();
        let ssh_key = if plan::wants_ssh_key(job) {
            match self.ssh_key(job).await {
                Ok(k) => Some(k),
                Err(e) => {
                    self.record(job, recorder::plugin_error(&e));
                    return Err(e);
                }
            }
        } else {
            None
        };
        let values = self.ctx.priority_class_values();
        let published = self.published_hosts(job).await;
        let observed = plan::Observed {
            pods: &self.pods,
            pod_group: self.pod_group.as_ref(),
            admitted: plan::admitted(self.pod_group.as_ref()),
            priority_class_values: &values,
            ssh_key: ssh_key.as_ref(),
            scale: &self.scale,
            published: &published,
        };
        let desired = match plan::step(job, &observed, action, target, now) {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(()),
            Err(StepError { stage, error }) => {
                let e = match error {
                    PlanError::Plugin(p) => ReconcileError::Plugin(p),
                    other => ReconcileError::Plan(other),
                };
                match stage {
                    Stage::Resources => self.record(job, recorder::plugin_error(&e)),
                    Stage::PodGroup => self.record(job, recorder::pod_group_error(&e)),
                    Stage::Pods => {}
                }
                return Err(e);
            }
        };
        self.apply(job, desired).await
    }

    /// Applies a planned step: the diff between what the controller observed and
    /// `desired`, as API calls.
    async fn apply(&mut self, job: &mut Job, desired: Desired) -> Result<(), ReconcileError> {
        let ns = job.namespace().unwrap_or_default();
        if let Some(res) = &desired.resources {
            if let Err(e) = self.create_resources(&ns, res).await {
                self.record(job, recorder::plugin_error(&e));
                return Err(e);
            }
        }
        if let Err(e) = self.apply_host_lists(&ns, &desired.host_lists).await {
            self.record(job, recorder::plugin_error(&e));
            return Err(e);
        }
        if let Err(e) = self.ensure_volumes(job, &desired.volumes).await {
            self.record(job, recorder::pvc_error(&e));
            return Err(e);
        }
        if let Err(e) = self.apply_pod_group(&ns, &desired.pod_group).await {
            self.record(job, recorder::pod_group_error(&e));
            return Err(e);
        }
        if matches!(desired.work, Work::Sync) {
            if let Some(ev) = self.pod_group.as_ref().and_then(|pg| recorder::pod_group_pending(job, pg)) {
                self.record(job, ev);
            }
        }
        match &desired.work {
            Work::Sync => self.sync_pods(job, &desired).await?,
            _ => self.kill(job, &desired.delete).await?,
        }
        if let Err(e) = self.delete_resources(&ns, &desired.delete_resources).await {
            self.record(job, recorder::plugin_error(&e));
            return Err(e);
        }
        let now_ms = Timestamp::now().as_millisecond();
        for (task, ev) in &desired.scale_events {
            self.record(job, recorder::scale_event(task, ev, now_ms));
        }
        if matches!(desired.work, Work::Sync) {
            self.scale = desired.scale.clone();
            self.wake_at = desired.wake_at;
        }
        job.status = Some(desired.status.clone());
        let written = self.write_status(job).await?;
        // Counted once written: a write that fails (a stale job) is decided again, from the
        // phase the API server has.
        if written {
            self.count_finished(job, &desired);
        }
        if desired.delete_pod_group {
            let name = plan::pod_group_name(job)?;
            let api: Api<PodGroup> = Api::namespaced(self.client(), &ns);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if code(&e) == Some(404) => {}
                Err(e) => return Err(api_err(format!("delete PodGroup {name}"))(e)),
            }
            self.pod_group = None;
        }
        Ok(())
    }

    /// `volcano_job_completed_phase_count` or `volcano_job_failed_phase_count`, when the
    /// step took the job into Completed or Failed.
    fn count_finished(&self, job: &Job, desired: &Desired) {
        let Some(phase) = desired.entered_finished() else { return };
        let key = events::job_key(&job.namespace().unwrap_or_default(), &job.name_any());
        let queue = job.spec.queue.as_deref().unwrap_or_default();
        match phase {
            JobPhase::Completed => self.ctx.metrics.job_completed(&key, queue),
            _ => self.ctx.metrics.job_failed(&key, queue),
        }
    }

    /// Writes the status when it changed; whether it was written.
    async fn write_status(&mut self, job: &mut Job) -> Result<bool, ReconcileError> {
        if job.status == self.stored_status {
            return Ok(false);
        }
        let api: Api<Job> = Api::namespaced(self.client(), &job.namespace().unwrap_or_default());
        let written = match api.replace_status(&job.name_any(), &PostParams::default(), job).await {
            Ok(w) => w,
            Err(e) => {
                let e = api_err(format!(
                    "write the status of job {}/{}",
                    job.namespace().unwrap_or_default(),
                    job.name_any()
                ))(e);
                // The first status (Volcano's initJobStatus) could not be written.
                if self.stored_status.as_ref().is_none_or(|s| s.state.phase.is_none()) {
                    self.record(job, recorder::job_status_error(&e));
                }
                return Err(e);
            }
        };
        job.metadata.resource_version = written.metadata.resource_version;
        self.stored_status = job.status.clone();
        Ok(true)
    }

    /// Marks the pods out of sync, then deletes them; a `FailedDelete` event when some
    /// could not be.
    async fn kill(&mut self, job: &Job, pods: &[PodDeletion]) -> Result<(), ReconcileError> {
        let api: Api<Pod> = Api::namespaced(self.client(), &job.namespace().unwrap_or_default());
        let calls = pods.iter().map(|d| {
            let api = api.clone();
            async move {
                if d.mark_out_of_sync {
                    let patch = serde_json::json!({"metadata": {"annotations": {OUT_OF_SYNC_KEY: "true"}}});
                    match api.patch(&d.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                        Ok(_) => {}
                        Err(e) if code(&e) == Some(404) => return Ok(()),
                        Err(e) => return Err(api_err(format!("mark pod {} out of sync", d.name))(e)),
                    }
                }
                delete_pod(&api, &d.name, d.uid.clone()).await
            }
        });
        let errs: Vec<ReconcileError> = join_all(calls).await.into_iter().filter_map(Result::err).collect();
        self.fail_on(job, errs, recorder::failed_delete)
    }

    /// The first of `errs`, after an event listing them all; `Ok` when there are none.
    fn fail_on(
        &self,
        job: &Job,
        errs: Vec<ReconcileError>,
        event: fn(&[String]) -> JobEvent,
    ) -> Result<(), ReconcileError> {
        if errs.is_empty() {
            return Ok(());
        }
        self.record(job, event(&errs.iter().map(ToString::to_string).collect::<Vec<_>>()));
        Err(errs.into_iter().next().expect("not empty"))
    }

    /// The pods of a sync: the planned ones created (in parallel), the surplus ones deleted;
    /// the pods the next step of this reconcile sees are the ones the API server returned
    /// and the ones it kept.
    async fn sync_pods(&mut self, job: &Job, desired: &Desired) -> Result<(), ReconcileError> {
        let ns = job.namespace().unwrap_or_default();
        let pods_api: Api<Pod> = Api::namespaced(self.client(), &ns);
        let metrics = &self.ctx.metrics;
        let job_created = job.metadata.creation_timestamp.as_ref();
        let created = join_all(desired.create.iter().map(|new| {
            let api = pods_api.clone();
            async move {
                match api.create(&PostParams::default(), &new.pod).await {
                    Ok(p) => {
                        if let Some(ms) = creation_latency_ms(job_created, &p) {
                            metrics.observe_job_to_pod_creation(ms);
                        }
                        Ok(p)
                    }
                    Err(e) if code(&e) == Some(409) => {
                        let mut p = new.pod.clone();
                        p.status = Some(PodStatus { phase: Some("Pending".into()), ..Default::default() });
                        Ok(p)
                    }
                    Err(e) => Err(api_err(format!("create pod {}", new.pod.name_any()))(e)),
                }
            }
        }))
        .await;
        let mut after: Vec<Pod> = Vec::new();
        let mut create_errs = Vec::new();
        for c in created {
            match c {
                Ok(p) => after.push(p),
                Err(e) => create_errs.push(e),
            }
        }
        let deleted = join_all(desired.delete.iter().map(|d| {
            let api = pods_api.clone();
            async move { delete_pod(&api, &d.name, d.uid.clone()).await }
        }))
        .await;
        let delete_errs: Vec<ReconcileError> = deleted.into_iter().filter_map(Result::err).collect();
        let created = self.fail_on(job, create_errs, recorder::failed_create);
        let deleted = self.fail_on(job, delete_errs, recorder::failed_delete);
        created?;
        deleted?;
        // The planned pods after the step, the created ones as the API server returned them.
        after.extend(desired.pods_after.iter().skip(desired.create.len()).cloned());
        self.pods = after;
        Ok(())
    }

    /// The plugins' objects (Services, ConfigMaps, Secrets, NetworkPolicies); one that
    /// exists already counts as created.
    async fn create_resources(&self, ns: &str, res: &JobResources) -> Result<(), ReconcileError> {
        let c = self.client();
        for s in &res.services {
            create(&Api::<Service>::namespaced(c.clone(), ns), s).await?;
        }
        for m in &res.config_maps {
            create(&Api::<ConfigMap>::namespaced(c.clone(), ns), m).await?;
        }
        for s in &res.secrets {
            create(&Api::<Secret>::namespaced(c.clone(), ns), s).await?;
        }
        for n in &res.network_policies {
            create(&Api::<NetworkPolicy>::namespaced(c.clone(), ns), n).await?;
        }
        Ok(())
    }

    /// The host lists as planned: each read, created when missing, its `data` patched when
    /// it differs (keys the plan no longer has set to null).
    async fn apply_host_lists(&self, ns: &str, lists: &[ConfigMap]) -> Result<(), ReconcileError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client(), ns);
        for cm in lists {
            let name = cm.name_any();
            let existing = api.get_opt(&name).await.map_err(api_err(format!("get ConfigMap {ns}/{name}")))?;
            let Some(existing) = existing else {
                create(&api, cm).await?;
                continue;
            };
            let (have, want) = (existing.data.unwrap_or_default(), cm.data.clone().unwrap_or_default());
            if have == want {
                continue;
            }
            let mut data = serde_json::Map::new();
            for k in have.keys().filter(|k| !want.contains_key(*k)) {
                data.insert(k.clone(), serde_json::Value::Null);
            }
            for (k, v) in &want {
                data.insert(k.clone(), serde_json::Value::String(v.clone()));
            }
            let patch = serde_json::json!({ "data": data });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("update ConfigMap {ns}/{name}")))?;
            tracing::info!(configmap = %format!("{ns}/{name}"), "host list updated");
        }
        Ok(())
    }

    /// The plugin objects a kill removes (Volcano's `OnJobDelete`); one already gone counts
    /// as deleted.
    async fn delete_resources(&self, ns: &str, gone: &ObjectNames) -> Result<(), ReconcileError> {
        let c = self.client();
        for n in &gone.config_maps {
            delete_named(&Api::<ConfigMap>::namespaced(c.clone(), ns), n).await?;
        }
        for n in &gone.services {
            delete_named(&Api::<Service>::namespaced(c.clone(), ns), n).await?;
        }
        for n in &gone.network_policies {
            delete_named(&Api::<NetworkPolicy>::namespaced(c.clone(), ns), n).await?;
        }
        for n in &gone.secrets {
            delete_named(&Api::<Secret>::namespaced(c.clone(), ns), n).await?;
        }
        Ok(())
    }

    /// The key pair kept in the job's ssh Secret, or a new one when there is no Secret.
    async fn ssh_key(&self, job: &Job) -> Result<ssh::SshKeyPair, ReconcileError> {
        let ns = job.namespace().unwrap_or_default();
        let name = ssh::secret_name(&job.name_any());
        let api: Api<Secret> = Api::namespaced(self.client(), &ns);
        let secret = api.get_opt(&name).await.map_err(api_err(format!("get secret {ns}/{name}")))?;
        if let Some(data) = secret.and_then(|s| s.data) {
            let text = |k: &str| data.get(k).map(|b| String::from_utf8_lossy(&b.0).into_owned());
            if let (Some(private_key_pem), Some(public_key)) = (text(ssh::PRIVATE_KEY), text(ssh::PUBLIC_KEY)) {
                return Ok(ssh::SshKeyPair { private_key_pem, public_key });
            }
        }
        tokio::task::spawn_blocking(|| ssh::generate_key_pair(&mut rand_core::OsRng))
            .await
            .map_err(|e| ReconcileError::SshKey(Box::new(e)))?
            .map_err(|e| ReconcileError::SshKey(Box::new(e)))
    }

    /// The PVCs of the job's volumes (Volcano's `createJobIOIfNotExist`), as planned (only
    /// until the status lists every volume). A volume with a `volumeClaim` gets its PVC
    /// `<job>-volume-<index>`, owned by the job; one that already exists must be the job's.
    /// A `volumeClaimName` must exist: else an error, and the job stays Pending, requeued.
    async fn ensure_volumes(&self, job: &Job, claims: &[VolumeClaim]) -> Result<(), ReconcileError> {
        if claims.is_empty() {
            return Ok(());
        }
        let ns = job.namespace().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), &ns);
        for claim in claims {
            let name = claim.name();
            match claim {
                VolumeClaim::Create(pvc) => match api.create(&PostParams::default(), pvc).await {
                    Ok(_) => tracing::info!(job = %format!("{ns}/{}", job.name_any()), pvc = name, "created"),
                    Err(e) if code(&e) == Some(409) => {
                        let existing = api
                            .get_opt(name)
                            .await
                            .map_err(api_err(format!("get PersistentVolumeClaim {ns}/{name}")))?;
                        match existing {
                            Some(p) if controlled_by(&p.metadata, &uid) => {}
                            Some(_) => {
                                return Err(ReconcileError::Pvc(format!(
                                    "pvc {name} exists and does not belong to job {ns}/{}",
                                    job.name_any()
                                )))
                            }
                            // Deleted since: created again by the next attempt.
                            None => return Err(api_err(format!("create PersistentVolumeClaim {ns}/{name}"))(e)),
                        }
                    }
                    Err(e) => return Err(api_err(format!("create PersistentVolumeClaim {ns}/{name}"))(e)),
                },
                VolumeClaim::Existing(_) => {
                    let found =
                        api.get_opt(name).await.map_err(api_err(format!("get PersistentVolumeClaim {ns}/{name}")))?;
                    if found.is_none() {
                        return Err(ReconcileError::Pvc(format!(
                            "pvc {name} is not found, the job will be in the Pending state until the PVC is created"
                        )));
                    }
                }
                VolumeClaim::Unmanaged(_) => {}
            }
        }
        Ok(())
    }

    /// Creates the PodGroup, or patches it, as planned; the PodGroup the API server
    /// returns is the one the rest of the reconcile sees.
    async fn apply_pod_group(&mut self, ns: &str, change: &PodGroupChange) -> Result<(), ReconcileError> {
        let api: Api<PodGroup> = Api::namespaced(self.client(), ns);
        match change {
            PodGroupChange::Keep => {}
            PodGroupChange::Update { name, patch } => {
                let updated = api
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map_err(api_err(format!("update PodGroup {ns}/{name}")))?;
                self.pod_group = Some(updated);
            }
            PodGroupChange::Create(pg) => {
                let name = pg.name_any();
                self.pod_group = Some(match api.create(&PostParams::default(), pg).await {
                    Ok(g) => g,
                    Err(e) if code(&e) == Some(409) => {
                        api.get(&name).await.map_err(api_err(format!("get PodGroup {ns}/{name}")))?
                    }
                    Err(e) => return Err(api_err(format!("create PodGroup {ns}/{name}"))(e)),
                });
            }
        }
        Ok(())
    }
}

/// Milliseconds from the job's creation to the pod's, as the API server stamped them (to the
/// second); `None` when either has no timestamp.
fn creation_latency_ms(job_created: Option<&Time>, pod: &Pod) -> Option<f64> {
    let (job, pod) = (job_created?, pod.metadata.creation_timestamp.as_ref()?);
    let d = pod.0.duration_since(job.0);
    Some((d.as_secs_f64() * 1000.0).max(0.0))
}

async fn delete_pod(api: &Api<Pod>, name: &str, uid: Option<String>) -> Result<(), ReconcileError> {
    let dp = DeleteParams { preconditions: Some(Preconditions { uid, resource_version: None }), ..Default::default() };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(api_err(format!("delete pod {name}"))(e)),
    }
}

async fn delete_named<K>(api: &Api<K>, name: &str) -> Result<(), ReconcileError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_err(format!("delete {} {name}", K::kind(&Default::default())))(e)),
    }
}

async fn create<K>(api: &Api<K>, obj: &K) -> Result<(), ReconcileError>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(409) => Ok(()),
        Err(e) => Err(api_err(format!("create {} {}", K::kind(&Default::default()), obj.name_any()))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn the_pod_creation_latency_is_the_api_servers_timestamps_apart() {
        let mut pod = Pod::default();
        let job = at("2026-01-01T00:00:00Z");
        assert_eq!(creation_latency_ms(Some(&job), &pod), None, "a pod without a timestamp");
        pod.metadata.creation_timestamp = Some(at("2026-01-01T00:00:02Z"));
        assert_eq!(creation_latency_ms(Some(&job), &pod), Some(2000.0));
        assert_eq!(creation_latency_ms(None, &pod), None, "a job without a timestamp");
        // Never negative (both are to the second).
        assert_eq!(creation_latency_ms(Some(&at("2026-01-01T00:00:03Z")), &pod), Some(0.0));
    }
}
