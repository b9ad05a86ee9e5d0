//! The elastic autoscaler's shell: while this replica leads, every
//! `--autoscale-period-seconds` it reads the controller's watch caches (Jobs, PodGroups,
//! Queues, the jobs' pods, PriorityClasses: the scheduler's view, never a count of the
//! nodes), asks [`crate::autoscale::decide`], and writes each decision on its Job as a user
//! would: a JSON patch of `spec.tasks[i].replicas` and of the `volcano.sh/autoscale-state`
//! annotation, guarded by `test` operations on the job's uid and the replicas it read, so a
//! change made meanwhile (by a user, or another replica) wins and the next pass decides
//! again. The admission webhook checks the update like any other; the job controller then
//! resizes the job in the safe order ([`crate::scale`]). Each resize is an Event on the job.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::{json, Value};
use volcano_api::crd::{PodGroup, Queue};
use volcano_api::job::{Job, AUTOSCALE_STATE_ANNOTATION};

use crate::autoscale::{self, JobDecision, Settings, View};
use crate::events::JOB_NAME_KEY;
use crate::plan::PodParts;
use crate::recorder::{self, Recorder};

/// The caches the autoscaler reads.
#[derive(Clone)]
pub struct Caches {
    /// Volcano Jobs.
    pub jobs: Store<Job>,
    /// PodGroups.
    pub pod_groups: Store<PodGroup>,
    /// Queues.
    pub queues: Store<Queue>,
    /// Pods with the `volcano.sh/job-name` label.
    pub pods: Store<Pod>,
    /// PriorityClasses.
    pub priority_classes: Store<PriorityClass>,
    /// Becomes true once the pods, PodGroups, Commands and PriorityClasses are listed.
    pub synced: tokio::sync::watch::Receiver<bool>,
}

/// Runs passes every `period` until `until` resolves (the caller stops it when this replica
/// stops leading). A zero period turns the autoscaler off.
pub async fn run(
    client: Client,
    caches: Caches,
    settings: Settings,
    period: Duration,
    recorder: Recorder,
    until: impl std::future::Future<Output = ()>,
) {
    if period.is_zero() {
        tracing::info!("the elastic autoscaler is off (--autoscale-period-seconds=0)");
        return;
    }
    let mut synced = caches.synced.clone();
    let passes = async {
        // Not `Store::wait_until_ready`: a store's readiness wakes one waiter only, and the
        // controllers already wait on these stores. Until the Jobs and Queues are listed
        // their stores are empty, and a pass does nothing.
        let _ = synced.wait_for(|s| *s).await;
        loop {
            tokio::time::sleep(period).await;
            pass(&client, &caches, settings, &recorder).await;
        }
    };
    tokio::select! {
        _ = passes => {}
        _ = until => {}
    }
}

/// One pass: decide, then write every decision.
pub async fn pass(client: &Client, caches: &Caches, settings: Settings, recorder: &Recorder) {
    let jobs = caches.jobs.state();
    if !jobs.iter().any(|j| autoscale::wants_autoscale(j)) {
        return;
    }
    let groups = caches.pod_groups.state();
    let queues = caches.queues.state();
    if queues.is_empty() {
        // Not listed yet (a cluster has at least the root queue).
        return;
    }
    let all_pods = caches.pods.state();
    let classes: BTreeMap<String, i32> =
        caches.priority_classes.state().iter().filter_map(|pc| Some((pc.metadata.name.clone()?, pc.value))).collect();
    let wanted: BTreeMap<String, &Job> =
        jobs.iter().filter(|j| autoscale::wants_autoscale(j)).map(|j| (autoscale::job_key(j), &**j)).collect();
    let mut pods: BTreeMap<String, Vec<PodParts>> = BTreeMap::new();
    for p in &all_pods {
        let Some(name) = p.metadata.labels.as_ref().and_then(|l| l.get(JOB_NAME_KEY)) else { continue };
        let key = format!("{}/{name}", p.metadata.namespace.as_deref().unwrap_or_default());
        if wanted.contains_key(&key) {
            pods.entry(key).or_default().push(PodParts::from(&**p));
        }
    }
    let view = View {
        jobs: jobs.iter().map(|j| &**j).collect(),
        pod_groups: groups.iter().map(|g| &**g).collect(),
        queues: queues.iter().map(|q| &**q).collect(),
        pods,
        priority_classes: &classes,
    };
    let now_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    for d in autoscale::decide(&view, now_ms, settings) {
        let Some(job) = wanted.get(&d.job) else { continue };
        let api: Api<Job> = Api::namespaced(client.clone(), job.metadata.namespace.as_deref().unwrap_or_default());
        let name = job.metadata.name.clone().unwrap_or_default();
        let patch: Patch<Value> = Patch::Json(serde_json::from_value(patch(job, &d)).expect("a JSON patch"));
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => {
                for r in &d.resizes {
                    tracing::info!(job = %d.job, task = %r.task, from = r.from, to = r.to, reason = r.reason.event_reason(), "autoscaler: {}", r.message());
                    recorder.record(job, recorder::autoscale_event(r));
                }
            }
            // The job changed since the cache was read (a test failed: 422), or is gone:
            // the next pass decides again on what it is now.
            Err(e) => {
                tracing::info!(job = %d.job, category = volcano_kube::api_error_category(&e), "autoscaler: the job was not resized: {e}")
            }
        }
    }
}

/// The JSON patch (RFC 6902) of a decision on `job`: the uid and the replicas read are
/// tested, then replaced, and the autoscaler's state written.
pub fn patch(job: &Job, d: &JobDecision) -> Value {
    let mut ops = vec![json!({"op": "test", "path": "/metadata/uid", "value": job.metadata.uid})];
    for r in &d.resizes {
        let path = format!("/spec/tasks/{}/replicas", r.task_index);
        ops.push(json!({"op": "test", "path": path, "value": r.from}));
        ops.push(json!({"op": "replace", "path": path, "value": r.to}));
    }
    let key = AUTOSCALE_STATE_ANNOTATION.replace('~', "~0").replace('/', "~1");
    ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{key}"), "value": d.state.to_annotation()}));
    Value::Array(ops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::{Reason, Resize, State};

    #[test]
    fn the_patch_tests_what_it_read_and_writes_the_replicas_and_the_state() {
        let mut job = Job::new("hvd", Default::default());
        job.metadata.uid = Some("u1".into());
        let d = JobDecision {
            job: "ml/hvd".into(),
            resizes: vec![Resize {
                job: "ml/hvd".into(),
                task: "worker".into(),
                task_index: 1,
                from: 2,
                to: 4,
                reason: Reason::Grow,
            }],
            state: State { last_resize_ms: Some(7), ..Default::default() },
        };
        assert_eq!(
            patch(&job, &d),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u1"},
                {"op": "test", "path": "/spec/tasks/1/replicas", "value": 2},
                {"op": "replace", "path": "/spec/tasks/1/replicas", "value": 4},
                {"op": "add", "path": "/metadata/annotations/volcano.sh~1autoscale-state", "value": "{\"lastResizeMs\":7}"}
            ])
        );
    }
}
