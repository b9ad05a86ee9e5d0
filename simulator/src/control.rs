//! The job controller of the simulation: the same decisions as `volcano-rs controller`, on
//! the in-memory cluster.
//!
//! For every Volcano Job, after each cycle's effects when one of its pods or its PodGroup's
//! phase changed or a delayed action came due (and once when the input is loaded),
//! [`reconcile_jobs`] does what the controller's reconcile does: what changed becomes
//! requests ([`JobMemory::observe`]), the requests go through the job's policies
//! ([`JobMemory::next`]), and each step is planned whole by `volcano_controller::plan::step`
//! — PodGroup, plugin objects, pods to create and delete with their task index, the job's
//! next status — then applied here, at once and without failures: the PodGroup created or
//! patched, pods created (with the API server's defaults, [`crate::admit`]) or deleted, the
//! status written, the PodGroup deleted on a kill. So Jobs change phase in a simulation as
//! they do in a cluster (Pending → Running → Completed once their pods succeed; see
//! [`crate::cluster::RUN_SECONDS_ANNOTATION`]).
//!
//! A pass is incremental: a job whose pods, PodGroup and job are the objects the pass before
//! saw, when that pass changed nothing, is not looked at again ([`Seen`]): the pass would
//! observe the same objects, plan the same step and change nothing again. Its delayed
//! actions and its `wake_at` are the only clocks a step reads, so a job with a delayed
//! action, or whose `wake_at` came due since, is reconciled as before.
//!
//! Volume claims are not created in the simulation (docs/simulate.md).

use std::ops::Bound;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as KPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use volcano_api::bus::Action;
use volcano_api::crd::PodGroup;
use volcano_api::job::JobPhase;
use volcano_api::validation::{self, FieldError};
use volcano_controller::autoscale;
use volcano_controller::memory::Next;
use volcano_controller::plan::{self, Desired, NewPod, PodGroupChange, StepError};
use volcano_controller::state::Target;
use volcano_framework::pod::SchedPod as Pod;

use crate::admit::deterministic_uid;
use crate::cluster::{Cluster, HostListChange, ResizeRecord};
use crate::error::InputError;
use crate::job::{in_template, job_error, parts, plan_error, simulation_key_pair, Seen, SimJob};
use crate::manifest::{object_key, ObjectKind};

/// What the job controller changed in one pass, in job order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ControlRecord {
    /// Pods created (`namespace/name`).
    pub created: Vec<String>,
    /// Pods deleted (`namespace/name`).
    pub deleted: Vec<String>,
    /// Jobs whose phase changed, with the new phase.
    pub phases: Vec<(String, JobPhase)>,
    /// Host-list entries that changed (a ConfigMap key the job plugins keep, such as the
    /// `<job>-svc` ConfigMap's `worker.host` or an MPI hostfile), in job order.
    pub host_lists: Vec<HostListChange>,
}

impl ControlRecord {
    /// Adds what a later pass changed.
    pub fn absorb(&mut self, later: ControlRecord) {
        self.created.extend(later.created);
        self.deleted.extend(later.deleted);
        self.phases.extend(later.phases);
        self.host_lists.extend(later.host_lists);
    }
}

/// How a pass runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// The first sync, when the input is loaded: the PodGroup counts as admitted (the
    /// simulation creates a job's pods at once; see docs/simulate.md) and created pods are
    /// dated with the job.
    Load,
    /// After a cycle, at its virtual time.
    Cycle,
}

/// When a pass runs, and which.
#[derive(Clone, Copy, Debug)]
struct At {
    now_ms: i64,
    pass: Pass,
}

fn time(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or_default())
}

impl Seen {
    /// The job's pods and PodGroup as the cluster holds them now.
    fn of(sj: &SimJob, cluster: &Cluster) -> Seen {
        Seen {
            pods: sj.pods.iter().map(|k| cluster.pods.get(k).cloned()).collect(),
            pod_group: cluster.pod_groups.get(&sj.pod_group).cloned(),
            quiet_since_ms: None,
        }
    }

    /// Whether the cluster holds the very objects seen (no pod or PodGroup added, changed
    /// or deleted since).
    fn unchanged(&self, sj: &SimJob, cluster: &Cluster) -> bool {
        self.pods.len() == sj.pods.len()
            && self.pods.iter().zip(&sj.pods).all(|(seen, k)| same(seen.as_ref(), cluster.pods.get(k)))
            && same(self.pod_group.as_ref(), cluster.pod_groups.get(&sj.pod_group))
    }

    /// Whether the objects are the same as `other`'s.
    fn same_objects(&self, other: &Seen) -> bool {
        self.pods.len() == other.pods.len()
            && self.pods.iter().zip(&other.pods).all(|(a, b)| same(a.as_ref(), b.as_ref()))
            && same(self.pod_group.as_ref(), other.pod_group.as_ref())
    }
}

/// Whether two objects are the same one (or both absent).
fn same<T>(a: Option<&Arc<T>>, b: Option<&Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

/// Whether a [`Pass::Cycle`] at `now_ms` would change nothing for the job, so that it can be
/// skipped: the last pass over it was quiet, the job has not changed (`dirty`), it has no
/// delayed action, its `wake_at` has not come due since, and its pods and PodGroup are the
/// objects that pass saw.
fn quiet(sj: &SimJob, cluster: &Cluster, now_ms: i64) -> bool {
    let Some(seen) = &sj.seen else { return false };
    let Some(since) = seen.quiet_since_ms else { return false };
    !sj.dirty
        && sj.memory.delayed.next_due().is_none()
        && !sj.wake_at_ms.is_some_and(|w| since < w && w <= now_ms)
        && seen.unchanged(sj, cluster)
}

/// Reconciles every Volcano Job of the cluster at `now_ms` (see the module documentation),
/// in key order; after the cycles began ([`Pass::Cycle`]), a quiet job is skipped.
/// An error is a pod or PodGroup the API server would refuse, or a job whose step cannot be
/// planned; with [`Pass::Load`] it is an input error before the first cycle.
pub fn reconcile_jobs(cluster: &mut Cluster, now_ms: i64, pass: Pass) -> Result<ControlRecord, InputError> {
    let mut rec = ControlRecord::default();
    let at = At { now_ms, pass };
    let mut next = cluster.jobs.keys().next().cloned();
    while let Some(key) = next {
        let skip = pass == Pass::Cycle && cluster.jobs.get(&key).is_some_and(|sj| quiet(sj, cluster, now_ms));
        if !skip {
            reconcile_tracked(cluster, &key, at, &mut rec)?;
        }
        next = cluster
            .jobs
            .range::<str, _>((Bound::Excluded(key.as_str()), Bound::Unbounded))
            .next()
            .map(|(k, _)| k.clone());
    }
    Ok(rec)
}

/// [`reconcile_job`], remembering what it saw ([`Seen`]) after the cycles began.
fn reconcile_tracked(cluster: &mut Cluster, key: &str, at: At, rec: &mut ControlRecord) -> Result<(), InputError> {
    if at.pass == Pass::Load {
        return reconcile_job(cluster, key, at, rec).map(|_| ());
    }
    let Some(sj) = cluster.jobs.get(key) else { return Ok(()) };
    let before = Seen::of(sj, cluster);
    // The memory already holds these objects when the pass before saw the same ones.
    let seen_again = sj.seen.as_ref().is_some_and(|s| s.same_objects(&before));
    let settled = !sj.dirty && sj.memory.delayed.next_due().is_none();
    let changed = reconcile_job(cluster, key, at, rec)?;
    if let Some(sj) = cluster.jobs.get_mut(key) {
        let quiet = seen_again && settled && !changed && sj.memory.delayed.next_due().is_none();
        sj.seen = Some(Seen { quiet_since_ms: quiet.then_some(at.now_ms), ..before });
    }
    Ok(())
}

/// Reconciles one job; whether a step changed anything (the job's status, resize state,
/// `wake_at`, plugin objects or host lists, its PodGroup or pods).
fn reconcile_job(cluster: &mut Cluster, key: &str, at: At, rec: &mut ControlRecord) -> Result<bool, InputError> {
    let now = Timestamp::from_millisecond(at.now_ms).unwrap_or_default();
    let Some(mut sj) = cluster.jobs.remove(key) else { return Ok(false) };
    let pods: Vec<KPod> = sj.existing_pods(&cluster.pods).map(|p| p.to_pod()).collect();
    let pg = cluster.pod_groups.get(&sj.pod_group).cloned();
    sj.memory.observe(&sj.job, &pods, pg.as_deref(), now);
    // The controller reconciles a job when something it watches changed (a pod, the
    // PodGroup's phase, the job itself) or a delayed action or a resize's wait came due; the
    // first sync runs at load.
    let woken = sj.wake_at_ms.is_some_and(|w| w <= at.now_ms);
    if at.pass == Pass::Cycle && sj.memory.pending.is_empty() && !sj.dirty && !woken {
        cluster.jobs.insert(key.to_string(), sj);
        return Ok(false);
    }
    let mut result = Ok(false);
    let mut changed = false;
    let mut ran = false;
    while let Some(next) = sj.memory.next(&sj.job, now) {
        if let Next::Run { action, target, request } = next {
            result = step(cluster, &mut sj, key, (&action, target.as_ref()), at, rec);
            match result {
                Ok(c) => changed |= c,
                Err(_) => break,
            }
            ran = true;
            sj.memory.finished(&request, &action);
        }
    }
    if result.is_ok() && !ran {
        result = step(cluster, &mut sj, key, (&Action::SyncJob, None), at, rec);
        changed |= result.as_ref().is_ok_and(|c| *c);
    }
    if result.is_ok() {
        sj.dirty = false;
    }
    cluster.jobs.insert(key.to_string(), sj);
    result.map(|_| changed)
}

/// One step of a job for an action and its target: planned by `plan::step` on what the
/// cluster holds now, then applied; whether it changed anything.
fn step(
    cluster: &mut Cluster,
    sj: &mut SimJob,
    key: &str,
    (action, target): (&Action, Option<&Target>),
    at: At,
    rec: &mut ControlRecord,
) -> Result<bool, InputError> {
    let now = Timestamp::from_millisecond(at.now_ms).unwrap_or_default();
    let pods: Vec<KPod> = sj.existing_pods(&cluster.pods).map(|p| p.to_pod()).collect();
    let pg = cluster.pod_groups.get(&sj.pod_group).cloned();
    let values = cluster.priority_class_values();
    let ssh_key = plan::wants_ssh_key(&sj.job).then(simulation_key_pair);
    let observed = plan::Observed {
        pods: &pods,
        pod_group: pg.as_deref(),
        admitted: at.pass == Pass::Load || plan::admitted(pg.as_deref()),
        priority_class_values: &values,
        ssh_key: ssh_key.as_ref(),
        scale: &sj.memory.scale,
        // The simulator's job controller never restarts: it has every task's state.
        published: &Default::default(),
    };
    let desired = match plan::step(&sj.job, &observed, action, target, now) {
        Ok(Some(d)) => d,
        Ok(None) => return Ok(false),
        Err(StepError { error, .. }) => return Err(plan_error(sj.origin.as_ref(), key, error)),
    };
    apply(cluster, sj, key, desired, at, rec)
}

/// Applies a planned step to the cluster; whether that changed anything.
fn apply(
    cluster: &mut Cluster,
    sj: &mut SimJob,
    key: &str,
    desired: Desired,
    at: At,
    rec: &mut ControlRecord,
) -> Result<bool, InputError> {
    let origin = sj.origin.clone();
    let created_ms = match at.pass {
        Pass::Load => sj.job.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()),
        Pass::Cycle => Some(at.now_ms),
    };
    let mut changed = desired.resources.is_some()
        || desired.delete_pod_group
        || !matches!(desired.pod_group, PodGroupChange::Keep)
        || sj.memory.scale != desired.scale
        || sj.wake_at_ms != desired.wake_at.map(|t| t.as_millisecond())
        || sj.job.status.as_ref() != Some(&desired.status);
    if let Some(res) = desired.resources {
        sj.resources = res;
    }
    let held = |r: &volcano_controller::plan::JobResources| {
        r.services.len() + r.config_maps.len() + r.secrets.len() + r.network_policies.len()
    };
    let objects_before = held(&sj.resources);
    // The plugin objects a kill removes, then the host lists as the step leaves them.
    let gone = &desired.delete_resources;
    sj.resources.services.retain(|o| !gone.services.iter().any(|n| o.metadata.name.as_deref() == Some(n)));
    sj.resources.config_maps.retain(|o| !gone.config_maps.iter().any(|n| o.metadata.name.as_deref() == Some(n)));
    sj.resources.secrets.retain(|o| !gone.secrets.iter().any(|n| o.metadata.name.as_deref() == Some(n)));
    sj.resources
        .network_policies
        .retain(|o| !gone.network_policies.iter().any(|n| o.metadata.name.as_deref() == Some(n)));
    changed |= held(&sj.resources) != objects_before;
    let ns = sj.job.metadata.namespace.clone().unwrap_or_default();
    for cm in desired.host_lists {
        let before = sj.resources.config_maps.iter().find(|c| c.metadata.name == cm.metadata.name);
        let old = before.and_then(|c| c.data.clone()).unwrap_or_default();
        // The first host lists of a job are part of its creation, not a change.
        if at.pass == Pass::Cycle && before.is_some() {
            for (k, v) in cm.data.iter().flatten() {
                if old.get(k) != Some(v) {
                    rec.host_lists.push(HostListChange {
                        config_map: format!("{ns}/{}", cm.metadata.name.as_deref().unwrap_or_default()),
                        key: k.clone(),
                        value: v.clone(),
                    });
                }
            }
        }
        match sj.resources.config_maps.iter_mut().find(|c| c.metadata.name == cm.metadata.name) {
            Some(c) => {
                changed |= *c != cm;
                *c = cm;
            }
            None => {
                changed = true;
                sj.resources.config_maps.push(cm);
            }
        }
    }
    sj.memory.scale = desired.scale;
    sj.wake_at_ms = desired.wake_at.map(|t| t.as_millisecond());
    match desired.pod_group {
        PodGroupChange::Keep => {}
        PodGroupChange::Create(pg) => {
            let mut pg = *pg;
            let pg_key = object_key(ObjectKind::PodGroup, &pg.metadata);
            pg.metadata.uid = Some(deterministic_uid(ObjectKind::PodGroup, &pg_key));
            pg.metadata.creation_timestamp = created_ms.map(time);
            validation::pod_group(&pg).map_err(|FieldError { field, message }| {
                job_error(origin.as_ref(), key, "", format!("its PodGroup {pg_key}: field {field}: {message}"))
            })?;
            // The controller sees the PodGroup it created (its watch's add event), so the
            // scheduler's first phase change (Pending → Inqueue) is a change it reacts to.
            sj.memory.pod_group = Some(pg.clone());
            cluster.put_pod_group(pg_key, Arc::new(pg));
        }
        PodGroupChange::Update { patch, .. } => {
            if let Some(pg) = cluster.pod_groups.get(&sj.pod_group) {
                let mut value = serde_json::to_value(&**pg).expect("a PodGroup serialises");
                merge_patch(&mut value, &patch);
                let patched: PodGroup = serde_json::from_value(value)
                    .map_err(|e| job_error(origin.as_ref(), key, "", format!("its PodGroup: {e}")))?;
                cluster.put_pod_group(sj.pod_group.clone(), Arc::new(patched));
            }
        }
    }
    for NewPod { task_index, pod, .. } in desired.create {
        let pod_key = object_key(ObjectKind::Pod, &pod.metadata);
        if cluster.pods.contains_key(&pod_key) {
            continue;
        }
        let mut pod = pod;
        // A pod created again under the same name (after a kill or an eviction) is another
        // object: another uid.
        let times = sj.created.entry(pod_key.clone()).or_insert(0);
        let uid_seed = if *times == 0 { pod_key.clone() } else { format!("{pod_key}#{times}") };
        *times += 1;
        pod.metadata.uid = Some(deterministic_uid(ObjectKind::Pod, &uid_seed));
        pod.metadata.creation_timestamp = created_ms.map(time);
        let in_template = |e| in_template(e, key, origin.as_ref(), task_index);
        validation::pod(&pod).map_err(|FieldError { field, message }| {
            in_template(InputError::Field { origin: None, kind: "Pod", object: pod_key.clone(), field, message })
        })?;
        cluster.admission.admit(&mut pod, &pod_key, origin.as_ref()).map_err(in_template)?;
        tracing::debug!(job = %key, pod = %pod_key, task_index, "job controller: pod created");
        cluster.put_pod(pod_key.clone(), Arc::new(Pod::from(pod)));
        if !sj.pods.contains(&pod_key) {
            sj.pods.push(pod_key.clone());
        }
        rec.created.push(pod_key);
        changed = true;
    }
    for d in &desired.delete {
        let pod_key = format!("{ns}/{}", d.name);
        let same = cluster.pods.get(&pod_key).is_some_and(|p| d.uid.is_none() || p.metadata.uid == d.uid);
        if same {
            cluster.remove_pod(&pod_key);
            rec.deleted.push(pod_key);
            changed = true;
        }
    }
    let before = sj.phase();
    sj.job.status = Some(desired.status);
    let after = sj.phase();
    if after != before {
        tracing::debug!(job = %key, from = ?before, to = ?after, "job controller: phase");
        rec.phases.push((key.to_string(), after));
    }
    if desired.delete_pod_group {
        cluster.remove_pod_group(&sj.pod_group);
    }
    Ok(changed)
}

/// One pass of the elastic autoscaler (`volcano_controller::autoscale`, the controller's own
/// code) at `now_ms`, on what the scheduler wrote: the jobs it resizes get their new
/// `replicas` and autoscaler state as the controller writes them, and the job controller
/// syncs them in the same pass (they are marked changed). A resize the admission webhook
/// would refuse is not made (it cannot happen: the autoscaler keeps the bounds the webhook
/// checked).
pub fn autoscale_jobs(cluster: &mut Cluster, now_ms: i64) -> Vec<ResizeRecord> {
    if !cluster.jobs.values().any(|j| autoscale::wants_autoscale(&j.job)) {
        return Vec::new();
    }
    let decisions = {
        let pods = cluster
            .jobs
            .iter()
            .filter(|(_, j)| autoscale::wants_autoscale(&j.job))
            .map(|(k, sj)| (k.clone(), sj.existing_pods(&cluster.pods).map(|p| parts(p)).collect()))
            .collect();
        let values = cluster.priority_class_values();
        let view = autoscale::View {
            jobs: cluster.jobs.values().map(|j| &j.job).collect(),
            pod_groups: cluster.pod_groups.values().map(|g| &**g).collect(),
            queues: cluster.queues.values().map(|q| &**q).collect(),
            pods,
            priority_classes: &values,
        };
        autoscale::decide(&view, now_ms, autoscale::Settings::default())
    };
    let mut out = Vec::new();
    for d in decisions {
        let Some(sj) = cluster.jobs.get_mut(&d.job) else { continue };
        let mut new = sj.job.clone();
        new.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(volcano_api::job::AUTOSCALE_STATE_ANNOTATION.to_string(), d.state.to_annotation());
        for r in &d.resizes {
            new.spec.tasks[r.task_index].replicas = r.to;
        }
        if let Err(e) = volcano_api::admission::validate_job_update(&sj.job, &new) {
            tracing::warn!(job = %d.job, "the autoscaler's resize is refused: {e}");
            continue;
        }
        sj.job = new;
        // The job changed: the job controller looks at it again.
        sj.seen = None;
        if !d.resizes.is_empty() {
            crate::arrive::extend_pods(sj);
            sj.dirty = true;
        }
        out.extend(d.resizes.iter().map(|r| ResizeRecord {
            job: r.job.clone(),
            task: r.task.clone(),
            from: r.from,
            to: r.to,
            reason: r.reason.event_reason(),
            message: r.message(),
        }));
    }
    out
}

/// The next time the autoscaler has something to judge on its own (a probe's end, a
/// back-off's or a cooldown's end) after `now_ms`, for the simulation's clock.
pub fn next_autoscale_ms(cluster: &Cluster, now_ms: i64) -> Option<i64> {
    let settings = autoscale::Settings::default();
    cluster
        .jobs
        .values()
        .filter(|j| autoscale::wants_autoscale(&j.job))
        .flat_map(|j| {
            let s = autoscale::State::of(&j.job);
            [s.probe_until_ms, s.next_grow_ms, s.last_resize_ms.map(|t| t + settings.cooldown_ms)]
        })
        .flatten()
        .filter(|t| *t > now_ms)
        .min()
}

/// A JSON merge patch (RFC 7386): `null` removes a member, an object merges, anything else
/// replaces.
fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(Default::default());
    }
    let t = target.as_object_mut().expect("an object");
    for (k, v) in p {
        if v.is_null() {
            t.remove(k);
        } else {
            merge_patch(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two Volcano Jobs, loaded (their first sync done), on no nodes.
    fn two_jobs() -> Cluster {
        let job = |name: &str| {
            format!(
                "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {{name: {name}, namespace: default}}\n\
                 spec: {{minAvailable: 1, tasks: [{{name: w, replicas: 2, template: {{spec: {{containers: \
                 [{{name: c, image: busybox}}]}}}}}}]}}\n"
            )
        };
        let mut m = crate::Manifest::new();
        m.load_str("jobs.yaml", &format!("{}---\n{}", job("a"), job("b"))).unwrap();
        let reg =
            volcano_framework::Registries { plugins: volcano_plugins::in_tree(), actions: volcano_actions::in_tree() };
        let profile = volcano_framework::Profile::builtin_default(&reg).unwrap();
        crate::Simulator::new(m, profile).unwrap().cluster().clone()
    }

    fn quiet_since(c: &Cluster, job: &str) -> Option<i64> {
        c.jobs[job].seen.as_ref().and_then(|s| s.quiet_since_ms)
    }

    #[test]
    fn a_pass_reconciles_only_the_jobs_whose_objects_changed() {
        let mut c = two_jobs();
        let (a, b) = ("default/a", "default/b");
        // The first pass sees the objects, the second sees them again and changes nothing.
        reconcile_jobs(&mut c, 1_000, Pass::Cycle).unwrap();
        assert_eq!(quiet_since(&c, a), None);
        reconcile_jobs(&mut c, 2_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (Some(2_000), Some(2_000)));
        // Untouched jobs are skipped: they stay quiet since the same pass.
        reconcile_jobs(&mut c, 3_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (Some(2_000), Some(2_000)));
        // A pod of `a` changes (a new object, even with the same content): `a` is
        // reconciled, `b` is not; `a` is quiet again after a pass that changes nothing.
        let key = c.jobs[a].pods[0].clone();
        let pod = (*c.pods[&key]).clone();
        c.put_pod(key, Arc::new(pod));
        reconcile_jobs(&mut c, 4_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (None, Some(2_000)));
        reconcile_jobs(&mut c, 5_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (Some(5_000), Some(2_000)));
        // So does its PodGroup, a change to the job (`dirty`), and a `wake_at` come due.
        let pg = c.jobs[b].pod_group.clone();
        let group = (*c.pod_groups[&pg]).clone();
        c.put_pod_group(pg, Arc::new(group));
        c.jobs.get_mut(a).unwrap().dirty = true;
        reconcile_jobs(&mut c, 6_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (None, None));
        reconcile_jobs(&mut c, 7_000, Pass::Cycle).unwrap();
        assert_eq!((quiet_since(&c, a), quiet_since(&c, b)), (Some(7_000), Some(7_000)));
        c.jobs.get_mut(b).unwrap().wake_at_ms = Some(7_500);
        assert!(!quiet(&c.jobs[b], &c, 8_000), "its wake_at came due since it was quiet");
        assert!(quiet(&c.jobs[b], &c, 7_400) && quiet(&c.jobs[a], &c, 8_000));
    }

    #[test]
    fn a_merge_patch_removes_merges_and_replaces() {
        let mut v = serde_json::json!({"spec": {"a": 1, "b": {"x": 1}, "c": 3}, "keep": true});
        merge_patch(&mut v, &serde_json::json!({"spec": {"a": null, "b": {"y": 2}, "c": [1]}}));
        assert_eq!(v, serde_json::json!({"spec": {"b": {"x": 1, "y": 2}, "c": [1]}, "keep": true}));
    }
}
