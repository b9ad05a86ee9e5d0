//! One step of a job, planned whole: from the job and what the controller observes of it,
//! the state the step leads to — the PodGroup to create or update, the plugin objects and
//! volume claims, the pods to create (each with its task index and replica) and to delete,
//! the job's next status, and whether the PodGroup goes. The reconciler ([`crate::reconcile`],
//! feature `shell`) and the simulator both call [`step`] and apply what it returns; neither
//! decides anything itself.
//!
//! A step is Volcano's `state.Execute(action)`: the state machine's work ([`state::work`]:
//! sync, kill, kill targets), the counts the work leaves, the update function
//! ([`state::decide`]) and the status it writes ([`status::next_status`]).
//!
//! A sync also resizes: each task is a group of [`crate::scale`], whose desired members are
//! `0..replicas`; its outcome says which pods to create and delete, and which members the
//! host lists (`<job>-svc`, the MPI hostfile) name, so that a changed `replicas` adds pods
//! before publishing them and unpublishes hosts before deleting their pods.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use volcano_api::bus::Action;
use volcano_api::crd::TASK_SPEC_KEY;
use volcano_api::crd::{PodGroup, PodGroupPhase};
use volcano_api::job::{Job, JobPhase, JobStatus};

use super::{
    job_resources, pod, pod_group, pod_group_update, ready_to_create, task_min_available, task_readiness,
    volume_claims, volume_controlled_resource, JobResources, PlanError, VolumeClaim, TASK_INDEX_KEY,
};
use crate::events::{is_out_of_sync, pod_phase};
use crate::objects::ObjectNames;
use crate::plugins::ssh::SshKeyPair;
use crate::plugins::{job_key, pod_name, Hosts, JobPlugins};
use crate::scale::{self, Member, MemberPod, ScaleEvent, ScaleState};
use crate::state::{self, Counts, Decision, Retain, Target, Work};
use crate::status;

/// What the controller sees of a job besides the job itself.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The pods the job controls (owner reference with the job's uid).
    pub pods: &'a [Pod],
    /// The job's PodGroup, if it exists.
    pub pod_group: Option<&'a PodGroup>,
    /// Whether the PodGroup has left Pending ([`admitted`] of `pod_group`): pods are created
    /// only then. The simulator says `true` when it loads a job (docs/simulate.md).
    pub admitted: bool,
    /// PriorityClass name → value (the order of the tasks in `minResources`).
    pub priority_class_values: &'a BTreeMap<String, i32>,
    /// The ssh key pair for the `ssh` plugin, when [`wants_ssh_key`] says the step needs one.
    pub ssh_key: Option<&'a SshKeyPair>,
    /// Each task's resize state as the last applied step left it
    /// ([`crate::memory::JobMemory::scale`]); a task without one is resumed from the host
    /// list it published, when `published` has it ([`ScaleState::resume_published`]), else
    /// from its pods ([`ScaleState::resume`]).
    pub scale: &'a BTreeMap<String, ScaleState>,
    /// The members each task's published host list names (read back by
    /// [`published_members`] from the `svc` ConfigMap), for the tasks without a resize state.
    pub published: &'a BTreeMap<String, BTreeSet<Member>>,
}

/// The members the `svc` plugin's host list of `task` names (`data["<task>.host"]`, one DNS
/// name a line), mapped back to pod indices by the names the plugin gives them; `None` when
/// the list is absent or names a host that is no member of the task (a template with a fixed
/// `hostname`, or a list written by someone else): then the pods are the only witness.
/// `upto` bounds the indices tried (beyond the task's replicas and its pods' indices).
pub fn published_members(
    job: &Job,
    task: &volcano_api::job::TaskSpec,
    data: &BTreeMap<String, String>,
    upto: Member,
) -> Option<BTreeSet<Member>> {
    let list = data.get(&format!("{}.host", task.name().replace('-', "_")))?;
    let names: BTreeSet<&str> = list.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let job_name = job.metadata.name.as_deref().unwrap_or_default();
    let bound = upto.max(task.replicas).max(names.len() as Member);
    let mut out = BTreeSet::new();
    for i in 0..bound.saturating_add(1) {
        if names.contains(crate::plugins::domain_name(job_name, task, i).as_str()) {
            out.insert(i);
        }
    }
    (out.len() == names.len()).then_some(out)
}

/// Whether a PodGroup has a phase and it is not Pending (Volcano's `syncJob` creates pods
/// only then).
pub fn admitted(pod_group: Option<&PodGroup>) -> bool {
    pod_group.and_then(|g| g.status.as_ref().and_then(|s| s.phase)).is_some_and(|p| p != PodGroupPhase::Pending)
}

/// Where a failed plan failed: the reconciler records Volcano's event for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The job plugins or their objects (`PluginError` event).
    Resources,
    /// The PodGroup (`PodGroupError` event).
    PodGroup,
    /// A pod (no event: the create is not attempted).
    Pods,
}

/// A job whose step cannot be planned, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct StepError {
    /// Where.
    pub stage: Stage,
    /// Why.
    pub error: PlanError,
}

/// What happens to the job's PodGroup in a sync.
#[derive(Clone, Debug)]
pub enum PodGroupChange {
    /// Nothing (a kill, or the PodGroup is as planned).
    Keep,
    /// Create it.
    Create(Box<PodGroup>),
    /// Patch the existing one (a JSON merge patch, [`pod_group_update`]).
    Update {
        /// The PodGroup's name.
        name: String,
        /// The patch.
        patch: serde_json::Value,
    },
}

/// A pod to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewPod {
    /// The index of its task in `spec.tasks`.
    pub task_index: usize,
    /// Its index in the task (`volcano.sh/task-index`).
    pub replica: i32,
    /// The pod.
    pub pod: Pod,
}

/// A pod to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodDeletion {
    /// The pod's name.
    pub name: String,
    /// Its uid (the delete's precondition).
    pub uid: Option<String>,
    /// Annotate it out of sync first (a kill; a sync deletes surplus pods directly).
    pub mark_out_of_sync: bool,
}

/// One step of a job, planned whole.
#[derive(Clone, Debug)]
pub struct Desired {
    /// The job's phase before the step ([`state::phase_of`], after the initial status).
    pub from: JobPhase,
    /// What the step does to the pods.
    pub work: Work,
    /// The plugin objects to create, when the status does not list every plugin yet
    /// (Volcano's `OnJobAdd`, once).
    pub resources: Option<JobResources>,
    /// The volume claims to create or check, when the status does not list every volume yet.
    pub volumes: Vec<VolumeClaim>,
    /// The PodGroup.
    pub pod_group: PodGroupChange,
    /// Pods to create, task by task, index by index.
    pub create: Vec<NewPod>,
    /// Pods to delete.
    pub delete: Vec<PodDeletion>,
    /// The job's pods as the step leaves them, when every call succeeds (created pods
    /// Pending, deleted ones with a deletion time).
    pub pods_after: Vec<Pod>,
    /// The counts the status is written from.
    pub counts: Counts,
    /// The state machine's decision.
    pub decision: Decision,
    /// The job's status after the step.
    pub status: JobStatus,
    /// Delete the PodGroup after writing the status (a full kill of a job that has one).
    pub delete_pod_group: bool,
    /// The host-list ConfigMaps as the step leaves them (every sync, Volcano's
    /// `OnJobUpdate`): created when missing, updated when their data differ, before the pods.
    pub host_lists: Vec<ConfigMap>,
    /// The plugin objects a kill removes (Volcano's `OnJobDelete`), before the status is
    /// written; the status no longer lists the plugins, so the next sync in Pending makes them
    /// again.
    pub delete_resources: ObjectNames,
    /// Each task's resize state once the step is applied (to keep in
    /// [`crate::memory::JobMemory::scale`]).
    pub scale: BTreeMap<String, ScaleState>,
    /// What the resizes did, by task.
    pub scale_events: Vec<(String, ScaleEvent)>,
    /// When a resize in flight needs another step even if nothing changes (the end of its
    /// grace period, or its ready timeout).
    pub wake_at: Option<Timestamp>,
}

impl Desired {
    /// The finished phase the step enters, if any ([`state::entered_finished`]).
    pub fn entered_finished(&self) -> Option<JobPhase> {
        state::entered_finished(&self.from, &self.decision)
    }
}

/// Whether the next sync of `job` needs an ssh key pair in [`Observed::ssh_key`]: the job is
/// Pending, its plugins' objects are not created yet and the `ssh` plugin has no key in its
/// arguments.
pub fn wants_ssh_key(job: &Job) -> bool {
    let Ok(plugins) = JobPlugins::from_job(job) else { return false };
    state::phase_of(job) == JobPhase::Pending && !resources_recorded(job, &plugins) && plugins.needs_ssh_key(job)
}

fn resources_recorded(job: &Job, plugins: &JobPlugins) -> bool {
    let recorded = job.status.as_ref().map(|s| &s.controlled_resources);
    plugins.names().iter().all(|n| recorded.is_some_and(|r| r.contains_key(&format!("plugin-{n}"))))
}

/// Volcano's `OnJobDelete` on a kill: the objects of the plugins the status lists, and the
/// status no longer listing them. A job whose plugins do not parse has none.
fn unrecord_plugins(job: &mut Job) -> ObjectNames {
    let Ok(plugins) = JobPlugins::from_job(job) else { return ObjectNames::default() };
    let Some(status) = job.status.as_mut() else { return ObjectNames::default() };
    let removed: Vec<&'static str> = plugins
        .iter()
        .map(|p| p.name())
        .filter(|n| status.controlled_resources.remove(&format!("plugin-{n}")).is_some())
        .collect();
    let mut out = ObjectNames::default();
    for p in plugins.iter().filter(|p| removed.contains(&p.name())) {
        p.on_job_delete(job, &mut out);
    }
    out
}

fn at(stage: Stage) -> impl Fn(PlanError) -> StepError {
    move |error| StepError { stage, error }
}

/// One step of `job` for `action` (`target`: [`Target::of`] the action and its request), at
/// `now`: everything the step changes, or `None` when it changes nothing (a job being
/// deleted; a partition restart that matches no pod, as in Volcano).
///
/// The job gets its initial status first ([`status::initial`]). A sync plans the plugin
/// objects (while the job is Pending and its status does not list them) and volume claims
/// (once), the host lists, the PodGroup (created, or patched when the job's gang changed),
/// and — once the PodGroup is admitted — each task's resize ([`crate::scale`]): the pods
/// to create (of tasks whose `dependsOn` is met) and to delete, and the members the host
/// lists name; surplus and out-of-sync pods are deleted. A kill deletes the pods it does not
/// retain, and a full kill the plugin objects. The counts are those the work leaves when
/// every call succeeds.
pub fn step(
    job: &Job,
    observed: &Observed<'_>,
    action: &Action,
    target: Option<&Target>,
    now: Timestamp,
) -> Result<Option<Desired>, StepError> {
    let mut job = job.clone();
    if let Some(initial) = status::initial(&job, now) {
        job.status = Some(initial);
    }
    let from = state::phase_of(&job);
    let work = state::work(&job, action, target);
    let mut plan = Desired {
        from,
        work: work.clone(),
        resources: None,
        volumes: Vec::new(),
        pod_group: PodGroupChange::Keep,
        create: Vec::new(),
        delete: Vec::new(),
        pods_after: observed.pods.to_vec(),
        counts: Counts::default(),
        decision: state::decide(&job, &Counts::default(), action, target),
        status: JobStatus::default(),
        delete_pod_group: false,
        host_lists: Vec::new(),
        delete_resources: ObjectNames::default(),
        scale: observed.scale.clone(),
        scale_events: Vec::new(),
        wake_at: None,
    };
    // A full kill removes the plugin objects (Volcano's `OnJobDelete`); a targeted one keeps
    // them for the pods that stay (docs/differences.md).
    if matches!(work, Work::Kill { .. }) {
        plan.delete_resources = unrecord_plugins(&mut job);
    }
    match &work {
        Work::None => return Ok(None),
        Work::Sync => sync(&mut job, observed, &mut plan, now)?,
        Work::Kill { retain } => {
            for p in observed.pods {
                let finished = matches!(pod_phase(p), "Succeeded" | "Failed");
                if p.metadata.deletion_timestamp.is_none() && (*retain == Retain::None || !finished) {
                    plan.delete.push(deletion(p, true));
                }
            }
            plan.counts = Counts::after(&job, &work, observed.pods, false);
        }
        Work::KillTargets(t) => {
            if matches!(t, Target::Partition { .. }) && !observed.pods.iter().any(|p| t.covers(p)) {
                return Ok(None);
            }
            for p in observed.pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && t.covers(p)) {
                plan.delete.push(deletion(p, true));
            }
            plan.counts = Counts::after(&job, &work, observed.pods, false);
        }
    }
    plan.decision = state::decide(&job, &plan.counts, action, target);
    plan.status = status::next_status(&job, &plan.counts, &plan.decision, now);
    plan.delete_pod_group = plan.decision.delete_pod_group && observed.pod_group.is_some();
    Ok(Some(plan))
}

fn deletion(p: &Pod, mark_out_of_sync: bool) -> PodDeletion {
    PodDeletion { name: p.metadata.name.clone().unwrap_or_default(), uid: p.metadata.uid.clone(), mark_out_of_sync }
}

/// SyncJob (Volcano's `syncJob`, after `initiateJob`).
fn sync(job: &mut Job, observed: &Observed<'_>, plan: &mut Desired, now: Timestamp) -> Result<(), StepError> {
    let plugins = JobPlugins::from_job(job).map_err(|e| StepError { stage: Stage::Resources, error: e.into() })?;
    // The resize of every task, once the PodGroup is admitted; before, the host lists name
    // what they named (every replica, for a new job).
    let outcomes = if observed.admitted { Some(resize(job, observed, now).map_err(at(Stage::Pods))?) } else { None };
    let mut hosts = Hosts::all(job);
    for task in &job.spec.tasks {
        let published = match &outcomes {
            Some(o) => o.get(task.name()).map(|o| o.publish.clone()),
            None => observed.scale.get(task.name()).map(|s| s.published.clone()),
        };
        if let Some(p) = published {
            hosts.set(task.name(), p);
        }
    }
    if let Some(o) = &outcomes {
        plan.scale = o.iter().map(|(t, o)| (t.clone(), o.state.clone())).collect();
        plan.scale_events = o.iter().flat_map(|(t, o)| o.events.iter().map(move |e| (t.clone(), e.clone()))).collect();
        plan.wake_at =
            o.values().filter_map(|o| o.wake_at_ms).min().and_then(|ms| Timestamp::from_millisecond(ms).ok());
    }
    // The plugin objects, made when the job is Pending and the status does not list them
    // (Volcano's `initiateJob`: at the first sync, and again after a kill removed them).
    if !resources_recorded(job, &plugins) && plan.from == JobPhase::Pending {
        let res = job_resources(job, &plugins, observed.ssh_key).map_err(at(Stage::Resources))?;
        let status = job.status.get_or_insert_with(Default::default);
        status.controlled_resources.extend(res.controlled_resources.clone());
        plan.resources = Some(res);
    }
    plan.host_lists = plugins.host_lists(job, &hosts);
    if !job.spec.volumes.is_empty() {
        let claims = volume_claims(job);
        let status = job.status.get_or_insert_with(Default::default);
        if !claims.iter().all(|c| status.controlled_resources.contains_key(&volume_controlled_resource(c.name()))) {
            for c in &claims {
                status.controlled_resources.insert(volume_controlled_resource(c.name()), c.name().to_string());
            }
            plan.volumes = claims;
        }
    }
    let pg = pod_group(job, observed.priority_class_values).map_err(at(Stage::PodGroup))?;
    plan.pod_group = match observed.pod_group {
        None => PodGroupChange::Create(Box::new(pg)),
        Some(existing) => match pod_group_update(&existing.spec, &pg.spec) {
            Some(patch) => PodGroupChange::Update { name: existing.metadata.name.clone().unwrap_or_default(), patch },
            None => PodGroupChange::Keep,
        },
    };
    let Some(outcomes) = outcomes else {
        plan.counts = job.status.as_ref().map(Counts::from_status).unwrap_or_default();
        return Ok(());
    };
    let job_name = job.metadata.name.clone().unwrap_or_default();
    let existing: BTreeMap<&str, &Pod> =
        observed.pods.iter().map(|p| (p.metadata.name.as_deref().unwrap_or_default(), p)).collect();
    let readiness = task_readiness(observed.pods);
    // The pods every task keeps (its published members and those of a resize in flight).
    let mut expected: BTreeSet<String> = BTreeSet::new();
    // Pods of a resize, highest index first, then the other surplus pods.
    let mut doomed: Vec<String> = Vec::new();
    for (ti, task) in job.spec.tasks.iter().enumerate() {
        let Some(outcome) = outcomes.get(task.name()) else { continue };
        expected.extend(outcome.state.holding().into_iter().map(|m| pod_name(&job_name, task.name(), m)));
        doomed.extend(outcome.delete.iter().map(|m| pod_name(&job_name, task.name(), *m)));
        if !ready_to_create(job, task.name(), &readiness) {
            continue;
        }
        for &i in &outcome.create {
            if existing.contains_key(pod_name(&job_name, task.name(), i).as_str()) {
                continue;
            }
            let pod = pod(job, &plugins, ti, i).map_err(at(Stage::Pods))?;
            plan.create.push(NewPod { task_index: ti, replica: i, pod });
        }
    }
    // Created pods are Pending, as the API server returns them.
    let mut after: Vec<Pod> = plan
        .create
        .iter()
        .map(|n| {
            let mut p = n.pod.clone();
            p.status = Some(PodStatus { phase: Some("Pending".into()), ..Default::default() });
            p
        })
        .collect();
    // Surplus pods (not kept by their task's resize, of tasks no longer in the spec) and
    // pods marked out of sync are deleted.
    for p in observed.pods {
        let name = p.metadata.name.as_deref().unwrap_or_default();
        let surplus = !expected.contains(name) || is_out_of_sync(p);
        if surplus && p.metadata.deletion_timestamp.is_none() && !doomed.iter().any(|d| d == name) {
            doomed.push(name.to_string());
        }
    }
    for name in &doomed {
        if let Some(p) = existing.get(name.as_str()).filter(|p| p.metadata.deletion_timestamp.is_none()) {
            plan.delete.push(deletion(p, false));
        }
    }
    for p in observed.pods {
        let mut p = p.clone();
        let name = p.metadata.name.as_deref().unwrap_or_default();
        if doomed.iter().any(|d| d == name) && p.metadata.deletion_timestamp.is_none() {
            p.metadata.deletion_timestamp = Some(Time(now));
        }
        after.push(p);
    }
    plan.counts = Counts::after(job, &Work::Sync, after.iter(), false);
    plan.pods_after = after;
    Ok(())
}

/// Running with every container ready.
fn pod_ready(p: &Pod) -> bool {
    let status = p.status.as_ref();
    let containers = p.spec.as_ref().map_or(0, |s| s.containers.len());
    let statuses = status.and_then(|s| s.container_statuses.as_ref());
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && statuses.is_some_and(|cs| cs.len() >= containers && cs.iter().all(|c| c.ready))
}

/// The pods of `task` by member (`volcano.sh/task-index`); a pod being deleted or marked out
/// of sync counts as terminating.
fn member_pods(pods: &[Pod], task: &str) -> BTreeMap<Member, MemberPod> {
    let mut out = BTreeMap::new();
    for p in pods {
        let m = &p.metadata;
        let get = |k: &str| {
            m.annotations.as_ref().and_then(|a| a.get(k)).or_else(|| m.labels.as_ref().and_then(|l| l.get(k)))
        };
        if get(TASK_SPEC_KEY).map(String::as_str) != Some(task) {
            continue;
        }
        let Some(index) = get(TASK_INDEX_KEY).and_then(|i| i.parse::<Member>().ok()) else { continue };
        let terminating = m.deletion_timestamp.is_some() || is_out_of_sync(p);
        out.insert(index, MemberPod { ready: !terminating && pod_ready(p), terminating });
    }
    out
}

/// One resize step of every task ([`scale::step`]): desired members `0..replicas`, the
/// minimum the task's `minAvailable` (or, while the tasks' replicas add up to less than the
/// job's `minAvailable`, the members the task publishes: no task shrinks), the waits from
/// the job's annotations ([`volcano_api::job::scale_seconds`]).
fn resize(job: &Job, observed: &Observed<'_>, now: Timestamp) -> Result<BTreeMap<String, scale::Outcome>, PlanError> {
    let (grace, timeout) = volcano_api::job::scale_seconds(job).map_err(|(field, message)| PlanError::Annotation {
        job: job_key(job),
        field,
        message,
    })?;
    let settings = scale::Settings { grace_ms: grace * 1000, ready_timeout_ms: timeout * 1000 };
    let total: i32 = job.spec.tasks.iter().map(|t| t.replicas.max(0)).sum();
    let short = total < job.spec.min_available;
    let mut out = BTreeMap::new();
    for (ti, task) in job.spec.tasks.iter().enumerate() {
        let pods = member_pods(observed.pods, task.name());
        let desired = scale::first(task.replicas);
        let state = match (observed.scale.get(task.name()), observed.published.get(task.name())) {
            (Some(s), _) => s.clone(),
            (None, Some(p)) => ScaleState::resume_published(p),
            (None, None) => ScaleState::resume(&desired, &pods),
        };
        let task_min = usize::try_from(task_min_available(task)).unwrap_or(0);
        let (minimum, field) = if short && desired.len() >= task_min {
            (state.published.len(), "spec.minAvailable".to_string())
        } else {
            (task_min, format!("spec.tasks[{ti}].minAvailable"))
        };
        let input = scale::Input {
            desired: &desired,
            minimum,
            minimum_field: &field,
            pods: &pods,
            now_ms: now.as_millisecond(),
            settings,
        };
        out.insert(task.name().to_string(), scale::step(&state, &input));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ContainerStatus;
    use volcano_api::crd::PodGroupStatus;

    use super::*;
    use crate::plugins::testing::job;

    const JOB: &str = r#"
metadata: {name: j}
spec:
  minAvailable: 2
  plugins: {svc: []}
  tasks:
    - {name: a, replicas: 2, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: b, replicas: 1, dependsOn: {name: [a]}, template: {spec: {containers: [{name: c, image: x}]}}}
"#;

    static NO_SCALE: BTreeMap<String, ScaleState> = BTreeMap::new();
    static NO_PUBLISHED: BTreeMap<String, BTreeSet<Member>> = BTreeMap::new();

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn observed<'a>(pods: &'a [Pod], pg: Option<&'a PodGroup>, values: &'a BTreeMap<String, i32>) -> Observed<'a> {
        Observed {
            pods,
            pod_group: pg,
            admitted: admitted(pg),
            priority_class_values: values,
            ssh_key: None,
            scale: &NO_SCALE,
            published: &NO_PUBLISHED,
        }
    }

    fn with_phase(pod: &Pod, phase: &str) -> Pod {
        let mut p = pod.clone();
        p.metadata.uid = Some(format!("uid-{}", p.metadata.name.as_deref().unwrap_or_default()));
        let containers = p.spec.as_ref().map_or(0, |s| s.containers.len());
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: Some(vec![ContainerStatus { ready: true, ..Default::default() }; containers]),
            ..Default::default()
        });
        p
    }

    fn admitted_group(j: &Job) -> PodGroup {
        let mut pg = pod_group(j, &BTreeMap::new()).unwrap();
        pg.status = Some(PodGroupStatus { phase: Some(PodGroupPhase::Inqueue), ..Default::default() });
        pg
    }

    #[test]
    fn a_first_sync_plans_the_pod_group_and_plugin_objects_but_no_pod_before_admission() {
        let j = job(JOB);
        let values = BTreeMap::new();
        let d = step(&j, &observed(&[], None, &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        assert!(matches!(&d.pod_group, PodGroupChange::Create(pg) if pg.metadata.name.as_deref() == Some("j-uid-1")));
        let res = d.resources.as_ref().expect("the svc plugin's objects, once");
        assert_eq!(res.services.len(), 1);
        assert!(d.create.is_empty() && d.delete.is_empty(), "the PodGroup is not admitted");
        assert_eq!(d.status.state.phase, Some(JobPhase::Pending));
        assert_eq!(d.status.controlled_resources.get("plugin-svc").map(String::as_str), Some("svc"));
        assert!(!d.delete_pod_group);
        // Recorded in the status: not planned again.
        let mut j2 = j.clone();
        j2.status = Some(d.status.clone());
        let pg = admitted_group(&j);
        let d2 = step(&j2, &observed(&[], Some(&pg), &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        assert!(d2.resources.is_none());
        assert!(matches!(d2.pod_group, PodGroupChange::Keep));
    }

    #[test]
    fn an_admitted_sync_creates_the_missing_pods_with_their_task_index_and_dependson_waits() {
        let j = job(JOB);
        let values = BTreeMap::new();
        let pg = admitted_group(&j);
        let d = step(&j, &observed(&[], Some(&pg), &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        let made: Vec<(usize, i32, &str)> =
            d.create.iter().map(|n| (n.task_index, n.replica, n.pod.metadata.name.as_deref().unwrap())).collect();
        assert_eq!(made, [(0, 0, "j-a-0"), (0, 1, "j-a-1")], "b waits for a");
        assert_eq!((d.counts.pending, d.status.pending), (2, 2), "created pods are Pending");
        assert_eq!(d.status.state.phase, Some(JobPhase::Pending));
        // a runs (ready): b's pod is created; the job runs.
        let running: Vec<Pod> = d.create.iter().map(|n| with_phase(&n.pod, "Running")).collect();
        let mut j2 = j.clone();
        j2.status = Some(d.status);
        let d2 = step(&j2, &observed(&running, Some(&pg), &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        let made: Vec<(usize, i32)> = d2.create.iter().map(|n| (n.task_index, n.replica)).collect();
        assert_eq!(made, [(1, 0)]);
        assert_eq!(d2.status.state.phase, Some(JobPhase::Running));
        assert_eq!(d2.pods_after.len(), 3);
    }

    #[test]
    fn a_running_job_completes_when_its_pods_succeed_and_a_kill_keeps_them() {
        let j = job(JOB);
        let values = BTreeMap::new();
        let pg = admitted_group(&j);
        let all: Vec<Pod> = crate::plan::pods(&j, &JobPlugins::from_job(&j).unwrap()).unwrap();
        let done: Vec<Pod> = all.iter().map(|p| with_phase(p, "Succeeded")).collect();
        let mut running = j.clone();
        running.status = Some(volcano_api::job::JobStatus {
            state: volcano_api::job::JobState { phase: Some(JobPhase::Running), ..Default::default() },
            min_available: 2,
            controlled_resources: [("plugin-svc".to_string(), "svc".to_string())].into_iter().collect(),
            ..Default::default()
        });
        let d = step(&running, &observed(&done, Some(&pg), &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        assert!(d.create.is_empty() && d.delete.is_empty());
        assert_eq!(d.status.state.phase, Some(JobPhase::Completed));
        assert_eq!(d.entered_finished(), Some(JobPhase::Completed));
        // The next step of a finished job kills softly: the Succeeded pods stay, the
        // PodGroup goes.
        let mut finished = running.clone();
        finished.status = Some(d.status);
        let k = step(&finished, &observed(&done, Some(&pg), &values), &Action::SyncJob, None, now()).unwrap().unwrap();
        assert!(matches!(k.work, Work::Kill { retain: Retain::Soft }));
        assert!(k.delete.is_empty(), "Succeeded pods are retained");
        assert!(k.delete_pod_group);
        assert_eq!(k.entered_finished(), None, "counted once");
        // A RestartJob on a running job deletes every pod, marked out of sync first.
        let live: Vec<Pod> = all.iter().map(|p| with_phase(p, "Running")).collect();
        let r =
            step(&running, &observed(&live, Some(&pg), &values), &Action::RestartJob, None, now()).unwrap().unwrap();
        assert_eq!(r.delete.len(), 3);
        assert!(r.delete.iter().all(|d| d.mark_out_of_sync && d.uid.is_some()));
        assert_eq!(r.status.state.phase, Some(JobPhase::Restarting));
        assert_eq!(r.status.retry_count, 1);
    }

    #[test]
    fn a_job_being_deleted_or_a_partition_without_pods_plans_nothing() {
        let mut j = job(JOB);
        let values = BTreeMap::new();
        let target = Target::Partition { task: "a".into(), partition: "7".into() };
        let none = step(&j, &observed(&[], None, &values), &Action::RestartPartition, Some(&target), now());
        assert!(matches!(none, Ok(None)));
        j.metadata.deletion_timestamp = Some(Time(now()));
        assert!(matches!(step(&j, &observed(&[], None, &values), &Action::SyncJob, None, now()), Ok(None)));
        // A plan error says where it failed.
        let mut bad = job(JOB);
        bad.spec.plugins.insert("nope".into(), vec![]);
        let e = step(&bad, &observed(&[], None, &values), &Action::SyncJob, None, now()).unwrap_err();
        assert_eq!(e.stage, Stage::Resources);
        assert!(!wants_ssh_key(&bad));
    }

    const MPI: &str = r#"
metadata: {name: m, annotations: {volcano.sh/scale-in-grace-seconds: "10", volcano.sh/scale-out-timeout-seconds: "60"}}
spec:
  minAvailable: 2
  plugins: {mpi: []}
  tasks:
    - {name: master, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}
    - {name: worker, replicas: 2, minAvailable: 1, template: {spec: {containers: [{name: c, image: x}]}}}
"#;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(now().as_second() + seconds).unwrap()
    }

    /// The MPI job, Running, its plugin objects made.
    fn running_mpi(workers: i32) -> Job {
        let mut j = job(MPI);
        j.spec.tasks[1].replicas = workers;
        j.status = Some(JobStatus {
            state: volcano_api::job::JobState { phase: Some(JobPhase::Running), ..Default::default() },
            min_available: 2,
            controlled_resources: ["mpi", "ssh", "svc"]
                .iter()
                .map(|p| (format!("plugin-{p}"), p.to_string()))
                .collect(),
            ..Default::default()
        });
        j
    }

    /// Pods of `job` by name: Running and ready, or just created (Pending).
    fn mpi_pods(job: &Job, ready: &[&str], pending: &[&str]) -> Vec<Pod> {
        let mut big = job.clone();
        big.spec.tasks[1].replicas = 8;
        let plugins = JobPlugins::from_job(&big).unwrap();
        crate::plan::pods(&big, &plugins)
            .unwrap()
            .into_iter()
            .filter_map(|p| {
                let name = p.metadata.name.clone().unwrap();
                if ready.contains(&name.as_str()) {
                    Some(with_phase(&p, "Running"))
                } else if pending.contains(&name.as_str()) {
                    Some(with_phase(&p, "Pending"))
                } else {
                    None
                }
            })
            .collect()
    }

    fn resize_step(job: &Job, pods: &[Pod], scale: &BTreeMap<String, ScaleState>, now: Timestamp) -> Desired {
        let values = BTreeMap::new();
        let pg = admitted_group(job);
        let observed = Observed {
            pods,
            pod_group: Some(&pg),
            admitted: true,
            priority_class_values: &values,
            ssh_key: None,
            scale,
            published: &NO_PUBLISHED,
        };
        step(job, &observed, &Action::SyncJob, None, now).unwrap().unwrap()
    }

    fn hostfile(d: &Desired) -> String {
        let cm = d.host_lists.iter().find(|c| c.metadata.name.as_deref() == Some("m-mpi-hostfile")).unwrap();
        cm.data.as_ref().unwrap()["hostfile"].clone()
    }

    fn svc_workers(d: &Desired) -> (String, String) {
        let cm = d.host_lists.iter().find(|c| c.metadata.name.as_deref() == Some("m-svc")).unwrap();
        let data = cm.data.as_ref().unwrap();
        (data["VC_WORKER_HOSTS"].clone(), data["VC_WORKER_NUM"].clone())
    }

    fn created(d: &Desired) -> Vec<String> {
        d.create.iter().map(|n| n.pod.metadata.name.clone().unwrap()).collect()
    }

    fn deleted(d: &Desired) -> Vec<String> {
        d.delete.iter().map(|x| x.name.clone()).collect()
    }

    #[test]
    fn a_controller_that_restarts_during_a_scale_out_resumes_from_the_published_host_list() {
        // 2 → 4 was in flight: workers 2 and 3 exist, 3 is not Ready; the lists name 0 and 1.
        let four = running_mpi(4);
        let pods = mpi_pods(&four, &["m-master-0", "m-worker-0", "m-worker-1", "m-worker-2"], &["m-worker-3"]);
        let svc: BTreeMap<String, String> =
            [("worker.host".to_string(), "m-worker-0.m\nm-worker-1.m".to_string())].into();
        let worker = &four.spec.tasks[1];
        let published = published_members(&four, worker, &svc, 3).expect("the list maps back to members");
        assert_eq!(published, BTreeSet::from([0, 1]));
        let values = BTreeMap::new();
        let pg = admitted_group(&four);
        let observed = Observed {
            pods: &pods,
            pod_group: Some(&pg),
            admitted: true,
            priority_class_values: &values,
            ssh_key: None,
            scale: &NO_SCALE,
            published: &[("worker".to_string(), published)].into(),
        };
        let d = step(&four, &observed, &Action::SyncJob, None, at(100)).unwrap().unwrap();
        assert_eq!(hostfile(&d).lines().count(), 2, "worker 3 is not Ready: not published");
        assert!(d.create.is_empty() && d.delete.is_empty());
        // From the pods alone (the list unknown), every live pod would count as published.
        let d = resize_step(&four, &pods, &BTreeMap::new(), at(100));
        assert_eq!(hostfile(&d).lines().count(), 4);

        // A list that names a host no member has cannot be mapped back.
        let odd: BTreeMap<String, String> = [("worker.host".to_string(), "elsewhere.m".to_string())].into();
        assert_eq!(published_members(&four, worker, &odd, 3), None);
        assert_eq!(published_members(&four, worker, &BTreeMap::new(), 3), None);
    }

    #[test]
    fn a_resized_mpi_job_publishes_new_workers_once_ready_and_unpublishes_before_deleting() {
        let two = running_mpi(2);
        let all = ["m-master-0", "m-worker-0", "m-worker-1"];
        let d = resize_step(&two, &mpi_pods(&two, &all, &[]), &BTreeMap::new(), at(0));
        assert_eq!(hostfile(&d), "m-worker-0.m slots=1\nm-worker-1.m slots=1\n");
        assert!(d.create.is_empty() && d.delete.is_empty() && d.scale_events.is_empty());

        // 2 → 4: the pods first, the host lists unchanged.
        let four = running_mpi(4);
        let d = resize_step(&four, &mpi_pods(&four, &all, &[]), &d.scale, at(1));
        assert_eq!(created(&d), ["m-worker-2", "m-worker-3"]);
        assert_eq!(hostfile(&d), "m-worker-0.m slots=1\nm-worker-1.m slots=1\n");
        assert_eq!(svc_workers(&d), ("m-worker-0.m,m-worker-1.m".into(), "2".into()));
        assert_eq!(d.scale_events, [("worker".to_string(), ScaleEvent::ScaleOutStarted { adding: vec![2, 3] })]);
        assert_eq!(d.wake_at, Some(at(61)), "the ready timeout");
        // One Ready, one not: still the old lists.
        let some = mpi_pods(&four, &["m-master-0", "m-worker-0", "m-worker-1", "m-worker-2"], &["m-worker-3"]);
        let d = resize_step(&four, &some, &d.scale, at(5));
        assert!(d.create.is_empty() && d.scale_events.is_empty());
        assert_eq!(hostfile(&d).lines().count(), 2);
        // Both Ready: published, slots and all.
        let ready = ["m-master-0", "m-worker-0", "m-worker-1", "m-worker-2", "m-worker-3"];
        let d = resize_step(&four, &mpi_pods(&four, &ready, &[]), &d.scale, at(9));
        assert_eq!(
            hostfile(&d),
            "m-worker-0.m slots=1\nm-worker-1.m slots=1\nm-worker-2.m slots=1\nm-worker-3.m slots=1\n"
        );
        assert_eq!(svc_workers(&d).1, "4");
        assert_eq!(d.scale_events, [("worker".to_string(), ScaleEvent::ScaleOutSucceeded { added: vec![2, 3] })]);

        // 4 → 1: the lists first, the pods after the grace period, highest index first.
        let one = running_mpi(1);
        let d = resize_step(&one, &mpi_pods(&one, &ready, &[]), &d.scale, at(20));
        assert_eq!(hostfile(&d), "m-worker-0.m slots=1\n");
        assert_eq!(svc_workers(&d), ("m-worker-0.m".into(), "1".into()));
        assert!(d.delete.is_empty(), "no pod goes during the grace period");
        assert_eq!(d.wake_at, Some(at(30)));
        let d = resize_step(&one, &mpi_pods(&one, &ready, &[]), &d.scale, at(30));
        assert_eq!(deleted(&d), ["m-worker-3", "m-worker-2", "m-worker-1"]);
        assert!(d.delete.iter().all(|x| !x.mark_out_of_sync));
        assert_eq!(hostfile(&d), "m-worker-0.m slots=1\n");
        assert_eq!(d.status.state.phase, Some(JobPhase::Running));
    }

    #[test]
    fn a_scale_in_below_the_tasks_min_available_is_refused_and_keeps_the_pods() {
        let two = running_mpi(2);
        let all = ["m-master-0", "m-worker-0", "m-worker-1"];
        let d = resize_step(&two, &mpi_pods(&two, &all, &[]), &BTreeMap::new(), at(0));
        let zero = running_mpi(0);
        let d = resize_step(&zero, &mpi_pods(&zero, &all, &[]), &d.scale, at(1));
        assert!(d.delete.is_empty());
        assert_eq!(hostfile(&d).lines().count(), 2);
        let [(task, ScaleEvent::Refused { reason })] = d.scale_events.as_slice() else {
            panic!("{:?}", d.scale_events)
        };
        assert_eq!(task, "worker");
        assert!(reason.contains("fewer than the minimum 1 (spec.tasks[1].minAvailable)"), "{reason}");
    }

    #[test]
    fn a_kill_removes_the_plugin_objects_and_pending_makes_them_again() {
        let j = running_mpi(2);
        let pods = mpi_pods(&j, &["m-master-0", "m-worker-0", "m-worker-1"], &[]);
        let values = BTreeMap::new();
        let pg = admitted_group(&j);
        let r = step(&j, &observed(&pods, Some(&pg), &values), &Action::RestartJob, None, now()).unwrap().unwrap();
        let gone = &r.delete_resources;
        assert_eq!(gone.config_maps, ["m-svc", "m-mpi-hostfile"]);
        assert_eq!(
            (gone.services.as_slice(), gone.network_policies.as_slice()),
            (&["m".to_string()][..], &["m".to_string()][..])
        );
        assert_eq!(gone.secrets, ["m-ssh"]);
        assert!(r.status.controlled_resources.keys().all(|k| !k.starts_with("plugin-")), "{:?}", r.status);
        // Restarting: no plugin objects yet (Volcano makes them when the job is Pending).
        let mut restarting = j.clone();
        restarting.status = Some(r.status.clone());
        assert!(!wants_ssh_key(&restarting));
        // Back in Pending: made again, with a key.
        let mut pending = restarting.clone();
        pending.status.as_mut().unwrap().state.phase = Some(JobPhase::Pending);
        assert!(wants_ssh_key(&pending));
        let keys = crate::plugins::ssh::tests::test_keys();
        let o = Observed {
            pods: &[],
            pod_group: None,
            admitted: false,
            priority_class_values: &values,
            ssh_key: Some(&keys),
            scale: &NO_SCALE,
            published: &NO_PUBLISHED,
        };
        let d = step(&pending, &o, &Action::SyncJob, None, now()).unwrap().unwrap();
        let res = d.resources.expect("made again");
        assert_eq!((res.services.len(), res.secrets.len(), res.network_policies.len()), (1, 1, 1));
        // A targeted restart keeps them.
        let t = Target::Pod { task: "worker".into(), pod: "m-worker-1".into() };
        let k = step(&j, &observed(&pods, Some(&pg), &values), &Action::RestartPod, Some(&t), now()).unwrap().unwrap();
        assert!(k.delete_resources.is_empty());
    }
}
