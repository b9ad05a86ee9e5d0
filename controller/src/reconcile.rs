//! The reconciler: one Job at a time (kube-runtime never runs two reconciles of one object
//! at once), applying the pure parts of this crate to the API.
//!
//! A reconcile:
//! 1. deletes the job when its `ttlSecondsAfterFinished` expired;
//! 2. turns what changed since the last reconcile into [`Request`]s: Commands targeting the
//!    job (each deleted first; one whose delete fails is left alone), pods (added, updated,
//!    deleted, compared with the pods seen last time), the PodGroup's phase, and delayed
//!    actions that came due; the requests wait in the job's memory until handled, so a
//!    failed reconcile handles them again;
//! 3. for each request: [`policies::apply`] (a delayed action is kept for later), then one
//!    step of the state machine ([`step`]); with no request, one `SyncJob` step.
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
//! own: a job entering Completed or Failed ([`state::entered_finished`]) counts once its
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
use volcano_api::crd::{PodGroup, PodGroupPhase};
use volcano_api::job::{Job, JobPhase};
use volcano_metrics::ControllerMetrics;

use crate::events::{self, Request, OUT_OF_SYNC_KEY};
use crate::plan::{self, PlanError, VolumeClaim};
use crate::plugins::{self, ssh, JobPlugins, PluginError};
use crate::policies::{self, DelayedActions};
use crate::recorder::{self, JobEvent, Recorder};
use crate::state::{self, Counts, Target, Work};
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
    SshKey(String),
    /// A volume's PVC is missing, or is not the job's.
    #[error("{0}")]
    Pvc(String),
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let what = what.into();
    move |source| ReconcileError::Api { what, source }
}

fn code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// What the reconciler remembers of a job between reconciles.
#[derive(Default)]
struct Memory {
    /// The job's UID (a job recreated under the same name starts afresh).
    uid: String,
    /// The job's pods as last seen, by name.
    pods: BTreeMap<String, Pod>,
    /// The PodGroup as last seen.
    pod_group: Option<PodGroup>,
    /// Requests not handled yet.
    pending: Vec<Request>,
    /// Delayed actions of the job.
    delayed: DelayedActions,
    /// Consecutive failed reconciles (for the back-off).
    failures: u32,
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
    memory: Mutex<HashMap<String, Memory>>,
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

    fn take_memory(&self, key: &str, uid: &str) -> Memory {
        let mut m = self.memory.lock().expect("memory lock").remove(key).unwrap_or_default();
        if m.uid != uid {
            m = Memory { uid: uid.to_string(), ..Default::default() };
        }
        m
    }

    fn put_memory(&self, key: String, m: Memory) {
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
        tracing::warn!(job = %key, failures = mem.failures, "reconcile failed: {e}");
    }
    let due = mem.delayed.next_due();
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

/// The back-off after a failed reconcile: 200 ms doubling up to a minute.
pub fn error_policy(job: Arc<Job>, _e: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    let key = events::job_key(&job.namespace().unwrap_or_default(), &job.name_any());
    let failures = ctx.memory.lock().expect("memory lock").get(&key).map_or(1, |m| m.failures);
    Requeue::requeue(volcano_kube::retry_backoff(failures))
}

/// One reconcile of a job; counts its failures in `mem`, and after `--max-requeue-num` of
/// them in a row terminates the job instead of failing again (Volcano's `handleJobError`).
async fn reconcile_with(job: &Job, ctx: &Context, mem: &mut Memory, now: Timestamp) -> Result<(), ReconcileError> {
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

    // Pods: what changed since last time.
    let pods: Vec<Pod> = ctx
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()) && controlled_by(&p.metadata, &uid))
        .map(|p| (*p).clone())
        .collect();
    let by_name: BTreeMap<String, Pod> = pods.iter().map(|p| (p.name_any(), p.clone())).collect();
    for (pname, pod) in &by_name {
        let req = match mem.pods.get(pname) {
            None => events::pod_added(pod),
            Some(old) if old.metadata.uid != pod.metadata.uid => events::pod_added(pod),
            Some(old) => events::pod_updated(old, pod, job, pods.iter()),
        };
        mem.pending.extend(req);
    }
    for (pname, old) in &mem.pods {
        if !by_name.contains_key(pname) {
            mem.pending.extend(events::pod_deleted(old, true));
        }
    }
    mem.pods = by_name;

    // The PodGroup's phase.
    let pg_name = plan::pod_group_name(job)?;
    let pg = ctx
        .pod_groups
        .state()
        .into_iter()
        .find(|g| g.metadata.namespace.as_deref() == Some(ns.as_str()) && g.name_any() == pg_name)
        .map(|g| (*g).clone());
    if let (Some(old), Some(new)) = (&mem.pod_group, &pg) {
        mem.pending.extend(events::pod_group_phase_changed(old, new));
    }
    mem.pod_group = pg.clone();

    // Delayed actions that came due run with their action.
    for d in mem.delayed.due(now) {
        let mut req = d.request.clone();
        req.action = Some(d.action.clone());
        mem.pending.push(req);
    }

    let mut job = job.clone();
    if job.spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        job.spec.scheduler_name = Some(ctx.scheduler_name.clone());
    }
    let mut stepper = Stepper { ctx, pods, pod_group: pg, stored_status: job.status.clone() };
    let mut failing = Failing { action: Action::SyncJob, request: false };
    let Err(e) = handle_requests(&mut job, &mut stepper, mem, now, &mut failing).await else {
        mem.failures = 0;
        return Ok(());
    };
    mem.failures += 1;
    let limit = ctx.max_requeue_num;
    if limit < 0 || mem.failures <= limit.unsigned_abs() {
        return Err(e);
    }
    // The retry limit: an event, TerminateJob, and the failing request dropped.
    let key = events::job_key(&ns, &name);
    ctx.recorder.record(&job, recorder::retry_limit_reached(&failing.action));
    tracing::warn!(job = %key, failures = mem.failures, "terminating the job: retry limit reached: {e}");
    if let Err(e) = stepper.step(&mut job, &Action::TerminateJob, None).await {
        tracing::error!(job = %key, "cannot terminate the job: {e}");
    }
    if failing.request && !mem.pending.is_empty() {
        mem.pending.remove(0);
    }
    mem.failures = 0;
    Ok(())
}

/// The action a reconcile was running when it failed, and whether it came from the first
/// pending request (else from the closing sync).
struct Failing {
    action: Action,
    request: bool,
}

/// The pending requests, each through the policies and one step of the state machine; one
/// sync when none stepped.
async fn handle_requests(
    job: &mut Job,
    stepper: &mut Stepper<'_>,
    mem: &mut Memory,
    now: Timestamp,
    failing: &mut Failing,
) -> Result<(), ReconcileError> {
    let rec = &stepper.ctx.recorder;
    let mut ran = false;
    while let Some(req) = mem.pending.first().cloned() {
        mem.delayed.cancel_on(&req);
        let (action, delay) = policies::apply(job, &req);
        if let Some(delay) = delay {
            rec.record(job, recorder::delayed_action(&action, delay));
            mem.delayed.schedule(&req, action, delay, now);
            mem.pending.remove(0);
            continue;
        }
        // SyncJob requests collapse into one sync at the end.
        if action != Action::SyncJob {
            rec.record(job, recorder::execute_action(&action));
            *failing = Failing { action: action.clone(), request: true };
            let target = Target::of(&action, &req);
            stepper.step(job, &action, target.as_ref()).await?;
            ran = true;
            if !policies::is_internal_action(&action) {
                mem.delayed.executed(&req, &action);
            }
        }
        mem.pending.remove(0);
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
}

impl Stepper<'_> {
    fn client(&self) -> Client {
        self.ctx.client.clone()
    }

    fn record(&self, job: &Job, ev: JobEvent) {
        self.ctx.recorder.record(job, ev);
    }

    /// One step of the state machine for `action`: the work, the counts, the status.
    async fn step(&mut self, job: &mut Job, action: &Action, target: Option<&Target>) -> Result<(), ReconcileError> {
        let now = Timestamp::now();
        if let Some(initial) = status::initial(job, now) {
            job.status = Some(initial);
        }
        let from = state::phase_of(job);
        let work = state::work(job, action, target);
        let counts = match &work {
            Work::None => return Ok(()),
            Work::Sync => self.sync(job, now).await?,
            Work::Kill { retain } => {
                let retain = *retain;
                let pods = self.pods.clone();
                let doomed: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .filter(|p| {
                        retain == state::Retain::None || !matches!(events::pod_phase(p), "Succeeded" | "Failed")
                    })
                    .collect();
                self.kill(job, &doomed).await?;
                Counts::after(job, &work, pods.iter(), false)
            }
            Work::KillTargets(t) => {
                let pods = self.pods.clone();
                // A partition with no pods is skipped without a status update, as in Volcano.
                if matches!(t, Target::Partition { .. }) && !pods.iter().any(|p| t.covers(p)) {
                    return Ok(());
                }
                let doomed: Vec<&Pod> =
                    pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && t.covers(p)).collect();
                self.kill(job, &doomed).await?;
                Counts::after(job, &work, pods.iter(), false)
            }
        };
        let decision = state::decide(job, &counts, action, target);
        let next = status::next_status(job, &counts, &decision, now);
        job.status = Some(next);
        let written = self.write_status(job).await?;
        // Counted once written: a write that fails (a stale job) is decided again, from the
        // phase the API server has.
        if written {
            self.count_finished(job, &from, &decision);
        }
        // (Only when there is one: a finished job's every reconcile decides the deletion.)
        if decision.delete_pod_group && self.pod_group.is_some() {
            let name = plan::pod_group_name(job)?;
            let api: Api<PodGroup> = Api::namespaced(self.client(), &job.namespace().unwrap_or_default());
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
    /// step took the job from `from` into Completed or Failed.
    fn count_finished(&self, job: &Job, from: &JobPhase, decision: &state::Decision) {
        let Some(phase) = state::entered_finished(from, decision) else { return };
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
    async fn kill(&mut self, job: &Job, pods: &[&Pod]) -> Result<(), ReconcileError> {
        let calls = pods.iter().map(|p| {
            let api: Api<Pod> = Api::namespaced(self.client(), &p.namespace().unwrap_or_default());
            let name = p.name_any();
            let uid = p.metadata.uid.clone();
            async move {
                let patch = serde_json::json!({"metadata": {"annotations": {OUT_OF_SYNC_KEY: "true"}}});
                match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => {}
                    Err(e) if code(&e) == Some(404) => return Ok(()),
                    Err(e) => return Err(api_err(format!("mark pod {name} out of sync"))(e)),
                }
                delete_pod(&api, &name, uid).await
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

    /// SyncJob: plugin objects, PVCs and PodGroup, then (the PodGroup admitted) missing
    /// pods created and surplus ones deleted; the counts.
    async fn sync(&mut self, job: &mut Job, now: Timestamp) -> Result<Counts, ReconcileError> {
        let ns = job.namespace().unwrap_or_default();
        // Volcano's initiateJob: the plugins' objects, the volumes' PVCs, the PodGroup, each
        // failure with its Warning event.
        let plugins = match JobPlugins::from_job(job) {
            Ok(p) => p,
            Err(e) => {
                self.record(job, recorder::plugin_error(&e));
                return Err(e.into());
            }
        };
        if let Err(e) = self.ensure_resources(job, &plugins).await {
            self.record(job, recorder::plugin_error(&e));
            return Err(e);
        }
        if let Err(e) = self.ensure_volumes(job).await {
            self.record(job, recorder::pvc_error(&e));
            return Err(e);
        }
        if let Err(e) = self.ensure_pod_group(job).await {
            self.record(job, recorder::pod_group_error(&e));
            return Err(e);
        }
        if let Some(ev) = self.pod_group.as_ref().and_then(|pg| recorder::pod_group_pending(job, pg)) {
            self.record(job, ev);
        }
        let admitted = self
            .pod_group
            .as_ref()
            .and_then(|g| g.status.as_ref().and_then(|s| s.phase))
            .is_some_and(|p| p != PodGroupPhase::Pending);
        if !admitted {
            return Ok(job.status.as_ref().map(Counts::from_status).unwrap_or_default());
        }
        let job_name = job.name_any();
        let pods_api: Api<Pod> = Api::namespaced(self.client(), &ns);
        let existing: BTreeMap<String, &Pod> = self.pods.iter().map(|p| (p.name_any(), p)).collect();
        let readiness = plan::task_readiness(self.pods.iter());
        let mut expected: Vec<String> = Vec::new();
        let mut creates = Vec::new();
        for (ti, task) in job.spec.tasks.iter().enumerate() {
            let ready = plan::ready_to_create(job, task.name(), &readiness);
            for i in 0..task.replicas.max(0) {
                let name = plugins::pod_name(&job_name, task.name(), i);
                expected.push(name.clone());
                if existing.contains_key(&name) || !ready {
                    continue;
                }
                creates.push(plan::pod(job, &plugins, ti, i)?);
            }
        }
        let ctx = self.ctx;
        let metrics = &ctx.metrics;
        let job_created = job.metadata.creation_timestamp.clone();
        let job_created = job_created.as_ref();
        let created = join_all(creates.into_iter().map(|pod| {
            let api = pods_api.clone();
            async move {
                match api.create(&PostParams::default(), &pod).await {
                    Ok(p) => {
                        if let Some(ms) = creation_latency_ms(job_created, &p) {
                            metrics.observe_job_to_pod_creation(ms);
                        }
                        Ok(p)
                    }
                    Err(e) if code(&e) == Some(409) => {
                        let mut p = pod;
                        p.status = Some(PodStatus { phase: Some("Pending".into()), ..Default::default() });
                        Ok(p)
                    }
                    Err(e) => Err(api_err(format!("create pod {}", pod.name_any()))(e)),
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
        // Surplus pods (beyond replicas, of tasks no longer in the spec) and pods marked
        // out of sync are deleted.
        let mut deletes = Vec::new();
        for pod in &self.pods {
            let mut p = pod.clone();
            let surplus = !expected.contains(&pod.name_any()) || events::is_out_of_sync(pod);
            if surplus && pod.metadata.deletion_timestamp.is_none() {
                deletes.push((pod.name_any(), pod.metadata.uid.clone()));
                p.metadata.deletion_timestamp = Some(Time(now));
            }
            after.push(p);
        }
        let deleted = join_all(deletes.into_iter().map(|(name, uid)| {
            let api = pods_api.clone();
            async move { delete_pod(&api, &name, uid).await }
        }))
        .await;
        let delete_errs: Vec<ReconcileError> = deleted.into_iter().filter_map(Result::err).collect();
        let created = self.fail_on(job, create_errs, recorder::failed_create);
        let deleted = self.fail_on(job, delete_errs, recorder::failed_delete);
        created?;
        deleted?;
        self.pods = after.clone();
        Ok(Counts::after(job, &Work::Sync, after.iter(), false))
    }

    /// The plugins' objects (Services, ConfigMaps, Secrets, NetworkPolicies), once: when the
    /// status does not list every plugin yet.
    async fn ensure_resources(&mut self, job: &mut Job, plugins: &JobPlugins) -> Result<(), ReconcileError> {
        let names = plugins.names();
        let status = job.status.get_or_insert_with(Default::default);
        if names.iter().all(|n| status.controlled_resources.contains_key(&format!("plugin-{n}"))) {
            return Ok(());
        }
        let ns = job.namespace().unwrap_or_default();
        let key = if plugins.needs_ssh_key(job) { Some(self.ssh_key(job).await?) } else { None };
        let res = plan::job_resources(job, plugins, key.as_ref())?;
        let c = self.client();
        for s in &res.services {
            create(&Api::<Service>::namespaced(c.clone(), &ns), s).await?;
        }
        for m in &res.config_maps {
            create(&Api::<ConfigMap>::namespaced(c.clone(), &ns), m).await?;
        }
        for s in &res.secrets {
            create(&Api::<Secret>::namespaced(c.clone(), &ns), s).await?;
        }
        for n in &res.network_policies {
            create(&Api::<NetworkPolicy>::namespaced(c.clone(), &ns), n).await?;
        }
        let status = job.status.get_or_insert_with(Default::default);
        status.controlled_resources.extend(res.controlled_resources);
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
            .map_err(|e| ReconcileError::SshKey(e.to_string()))?
            .map_err(|e| ReconcileError::SshKey(e.to_string()))
    }

    /// The PVCs of the job's volumes (Volcano's `createJobIOIfNotExist`), once: until the
    /// status lists every volume in `controlledResources` (`volume-pvc-<claim>`). A volume
    /// with a `volumeClaim` gets its PVC `<job>-volume-<index>`, owned by the job; one that
    /// already exists must be the job's. A `volumeClaimName` must exist: else an error, and
    /// the job stays Pending, requeued.
    async fn ensure_volumes(&mut self, job: &mut Job) -> Result<(), ReconcileError> {
        if job.spec.volumes.is_empty() {
            return Ok(());
        }
        let claims = plan::volume_claims(job);
        let status = job.status.get_or_insert_with(Default::default);
        if claims.iter().all(|c| status.controlled_resources.contains_key(&plan::volume_controlled_resource(c.name())))
        {
            return Ok(());
        }
        let ns = job.namespace().unwrap_or_default();
        let uid = job.metadata.uid.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client(), &ns);
        for claim in &claims {
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
        let status = job.status.get_or_insert_with(Default::default);
        for c in &claims {
            status.controlled_resources.insert(plan::volume_controlled_resource(c.name()), c.name().to_string());
        }
        Ok(())
    }

    /// Creates the job's PodGroup when there is none; updates its `minMember`,
    /// `minTaskMember`, `minResources` and `priorityClassName` when the job's differ
    /// (`minResources` compared by value).
    async fn ensure_pod_group(&mut self, job: &Job) -> Result<(), ReconcileError> {
        let ns = job.namespace().unwrap_or_default();
        let api: Api<PodGroup> = Api::namespaced(self.client(), &ns);
        let pg = plan::pod_group(job, &self.ctx.priority_class_values())?;
        if let Some(existing) = &self.pod_group {
            let Some(patch) = plan::pod_group_update(&existing.spec, &pg.spec) else { return Ok(()) };
            let name = existing.name_any();
            let updated = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(api_err(format!("update PodGroup {ns}/{name}")))?;
            self.pod_group = Some(updated);
            return Ok(());
        }
        let name = pg.name_any();
        self.pod_group = Some(match api.create(&PostParams::default(), &pg).await {
            Ok(g) => g,
            Err(e) if code(&e) == Some(409) => {
                api.get(&name).await.map_err(api_err(format!("get PodGroup {ns}/{name}")))?
            }
            Err(e) => return Err(api_err(format!("create PodGroup {ns}/{name}"))(e)),
        });
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
