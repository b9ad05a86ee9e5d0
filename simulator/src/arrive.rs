//! Volcano Jobs applied while the simulation runs: a Job of the input with the annotation
//! `volcano-rs.io/apply-at-seconds: "N"` is not in the cluster at the start; N seconds of
//! virtual time after the first cycle it is applied as `kubectl apply` would: a Job that
//! does not exist yet is created (admitted by the webhook's rules, then planned by the job
//! controller like any new Job), and one that exists is updated (the webhook's update rules:
//! only `minAvailable`, `priorityClassName` and the tasks' `replicas` and `minAvailable` may
//! change), which is how a scenario resizes a running job. The same Job may be applied
//! several times. Every arrival is checked when the input is loaded, so a bad one is an
//! input error before the first cycle.

use std::collections::BTreeMap;

use volcano_api::admission::{mutate_job, validate_job_update};
use volcano_api::crd::Queue;
use volcano_api::job::Job;
use volcano_controller::plan::{self, NewPod};
use volcano_controller::plugins::{pod_name, JobPlugins};

use crate::admit::deterministic_uid;
use crate::error::{InputError, Origin};
use crate::job::{admission_error, admit_job, job_error, plan_error, SimJob};
use crate::manifest::{object_key, Object, ObjectKind};

/// Job annotation (simulator only): apply this Job N seconds (a whole or decimal number ≥ 0)
/// after the start of the simulation rather than at the start.
pub const APPLY_AT_ANNOTATION: &str = "volcano-rs.io/apply-at-seconds";

/// A Job of the input held back, with its time (ms after the start).
#[derive(Clone, Debug)]
pub struct Held {
    /// Milliseconds after the start of the simulation.
    pub at_ms: i64,
    /// Where it was written.
    pub origin: Origin,
    /// The Job as written (namespace set).
    pub job: Job,
}

/// What an arrival does.
#[derive(Clone, Debug)]
pub enum Change {
    /// A new Job, admitted.
    Create(Box<SimJob>),
    /// A new version of a Job, admitted as an update.
    Update(Box<Job>),
}

/// A Job applied during the run.
#[derive(Clone, Debug)]
pub struct Arrival {
    /// Milliseconds after the start of the simulation.
    pub at_ms: i64,
    /// `namespace/name` of the Job.
    pub key: String,
    /// Where it was written.
    pub origin: Origin,
    /// What it does.
    pub change: Change,
    /// The pods the job can have after it (checked at load, then dropped: empty after).
    pub pods: Vec<NewPod>,
}

/// The time an object is applied at, from [`APPLY_AT_ANNOTATION`] (`None` without it); the
/// annotation on a kind other than a Volcano Job, or a value that is not a number of seconds
/// ≥ 0, is `Err((field, message))`.
pub fn apply_at(object: &Object) -> Result<Option<i64>, (String, String)> {
    let Some(v) = object.metadata().annotations.as_ref().and_then(|a| a.get(APPLY_AT_ANNOTATION)) else {
        return Ok(None);
    };
    let field = format!("metadata.annotations[{APPLY_AT_ANNOTATION}]");
    if !matches!(object, Object::Job(_)) {
        return Err((
            field,
            "only Volcano Jobs (batch.volcano.sh/v1alpha1) can be applied during the simulation".into(),
        ));
    }
    match v.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=1e9).contains(&s) => Ok(Some((s * 1000.0).round() as i64)),
        _ => Err((field, format!("{v:?} is not a number of seconds from 0 to 1000000000"))),
    }
}

/// Admits the held Jobs in the order they are applied (by time, then input order): a Job
/// that exists by then (in `jobs`, or applied earlier) is checked as an update of its latest
/// version, a new one as a creation.
pub fn admit(
    mut held: Vec<Held>,
    jobs: &BTreeMap<String, SimJob>,
    scheduler_name: &str,
    queues: &[Queue],
    priority_class_values: &BTreeMap<String, i32>,
) -> Result<Vec<Arrival>, InputError> {
    held.sort_by_key(|h| h.at_ms);
    let mut latest: BTreeMap<String, Job> = jobs.iter().map(|(k, j)| (k.clone(), j.job.clone())).collect();
    let mut out = Vec::with_capacity(held.len());
    for Held { at_ms, origin, job } in held {
        let key = object_key(ObjectKind::Job, &job.metadata);
        let (change, pods) = match latest.get(&key) {
            Some(prev) => {
                let mut new = mutate_job(&job, "default", scheduler_name);
                new.metadata.uid = prev.metadata.uid.clone();
                new.metadata.creation_timestamp = prev.metadata.creation_timestamp.clone();
                new.status = prev.status.clone();
                validate_job_update(prev, &new).map_err(|e| admission_error(Some(&origin), &key, &e))?;
                let plugins = JobPlugins::from_job(&new)
                    .map_err(|e| job_error(Some(&origin), &key, "spec.plugins", e.to_string()))?;
                let mut pods = Vec::new();
                for (ti, t) in new.spec.tasks.iter().enumerate() {
                    for i in 0..t.replicas.max(0) {
                        let pod = plan::pod(&new, &plugins, ti, i).map_err(|e| plan_error(Some(&origin), &key, e))?;
                        pods.push(NewPod { task_index: ti, replica: i, pod });
                    }
                }
                latest.insert(key.clone(), new.clone());
                (Change::Update(Box::new(new)), pods)
            }
            None => {
                let mut job = job;
                job.metadata.uid = Some(deterministic_uid(ObjectKind::Job, &key));
                let (sim_job, pods) = admit_job(&job, Some(&origin), scheduler_name, queues, priority_class_values)?;
                latest.insert(key.clone(), sim_job.job.clone());
                (Change::Create(Box::new(sim_job)), pods)
            }
        };
        out.push(Arrival { at_ms, key, origin, change, pods });
    }
    Ok(out)
}

/// Applies the arrivals due at `elapsed_ms` after the start (the cycle's time `now`): a new
/// Job joins the cluster, created at `now`; an update replaces the Job's spec, labels and
/// annotations (its status stays). Either way the job controller syncs the job after the
/// cycle. Returns the keys of the Jobs applied, with what happened (`created`, `updated`).
pub fn apply_due(
    jobs: &mut BTreeMap<String, SimJob>,
    arrivals: &mut Vec<Arrival>,
    elapsed_ms: i64,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<(String, &'static str)> {
    let due = arrivals.iter().take_while(|a| a.at_ms <= elapsed_ms).count();
    let mut applied = Vec::with_capacity(due);
    for a in arrivals.drain(..due) {
        match a.change {
            Change::Create(sj) => {
                let mut sj = *sj;
                sj.job.metadata.creation_timestamp = Some(now.clone());
                sj.dirty = true;
                jobs.insert(a.key.clone(), sj);
                applied.push((a.key, "created"));
            }
            Change::Update(new) => {
                let Some(sj) = jobs.get_mut(&a.key) else { continue };
                sj.job.spec = new.spec;
                sj.job.metadata.labels = new.metadata.labels;
                sj.job.metadata.annotations = new.metadata.annotations;
                extend_pods(sj);
                sj.dirty = true;
                applied.push((a.key, "updated"));
            }
        }
    }
    applied
}

/// Adds to the job's pod keys those of replicas its spec has now (a resize), so that the
/// job's pods are found whatever their index; keys are never removed (pods beyond the
/// replicas are deleted by the job controller, in the safe order of a scale-in).
pub fn extend_pods(sj: &mut SimJob) {
    let ns = sj.job.metadata.namespace.clone().unwrap_or_default();
    let name = sj.job.metadata.name.clone().unwrap_or_default();
    for t in &sj.job.spec.tasks {
        for i in 0..t.replicas.max(0) {
            let key = format!("{ns}/{}", pod_name(&name, t.name(), i));
            if !sj.pods.contains(&key) {
                sj.pods.push(key);
            }
        }
    }
}

/// The time of the next arrival, ms after the start.
pub fn next_ms(arrivals: &[Arrival]) -> Option<i64> {
    arrivals.first().map(|a| a.at_ms)
}
