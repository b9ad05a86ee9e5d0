//! What a cluster does to objects before the scheduler sees them: API-server defaults, the
//! Priority admission plugin, the scheduler cache's default queues and Volcano's PodGroup
//! controller. Each rule is documented in `docs/simulate.md`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use volcano_api::crd::{self, PodGroup};
use volcano_api::validation::{self, FieldError};
use volcano_framework::implicit;
use volcano_framework::pod::SchedPod;
use volcano_framework::SnapshotError;

pub use crate::admit::deterministic_uid;
use crate::admit::{pod_defaults, PodAdmission};
use crate::arrive;
use crate::cluster::Cluster;
use crate::control::{self, Pass};
use crate::error::InputError;
use crate::job;
use crate::manifest::{object_key, Manifest, Object, ObjectKind, Origin};
use crate::SCHEDULER_NAME;

/// 2026-01-01T00:00:00Z: the virtual clock never starts earlier, and objects without a
/// `creationTimestamp` are dated just before it.
pub const SIM_EPOCH_MS: i64 = 1_767_225_600_000;

/// Kubernetes' built-in PriorityClasses, which exist in every cluster.
const SYSTEM_PRIORITY_CLASSES: [(&str, i32); 2] =
    [("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)];

/// Where each input object was written, to turn later errors into messages that name the
/// file and document.
#[derive(Clone, Debug, Default)]
pub struct Origins {
    map: HashMap<(ObjectKind, String), Origin>,
}

impl Origins {
    /// The origin of an object (`None` for objects the simulator created).
    pub fn get(&self, kind: ObjectKind, key: &str) -> Option<&Origin> {
        self.map.get(&(kind, key.to_string()))
    }

    /// Records an origin; returns the earlier one if the object is already known.
    fn insert(&mut self, kind: ObjectKind, key: String, origin: Origin) -> Option<Origin> {
        match self.map.entry((kind, key)) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.get().clone()),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(origin);
                None
            }
        }
    }

    /// Turns a snapshot error (kind, object, field) into an input error naming the file and
    /// document the object came from.
    pub fn snapshot_error(&self, e: SnapshotError) -> InputError {
        let origin = ObjectKind::from_name(e.kind).and_then(|k| self.get(k, &e.name)).cloned().map(Box::new);
        InputError::Field { origin, kind: e.kind, object: e.name, field: e.field, message: e.source.to_string() }
    }
}

/// The cluster after normalisation, with the origins of its objects.
#[derive(Clone, Debug, Default)]
pub struct Normalised {
    /// The objects as the scheduler will see them.
    pub cluster: Cluster,
    /// Where each input object was written.
    pub origins: Origins,
    /// The latest `creationTimestamp` of any object, milliseconds since the Unix epoch.
    pub latest_creation_ms: i64,
    /// The `spec.schedulerName`s this run schedules.
    pub scheduler_names: Vec<String>,
}

fn time(ms: i64) -> Time {
    Time(Timestamp::from_millisecond(ms).unwrap_or_default())
}

/// Applies the cluster's normalisation to the objects of a manifest (see `docs/simulate.md`):
/// namespaces, duplicates, the built-in PriorityClasses and default queues, creation
/// timestamps, UIDs, pod defaults, pod priorities and the PodGroups of plain pods.
pub fn normalise(manifest: Manifest) -> Result<Normalised, InputError> {
    normalise_for(manifest, &[SCHEDULER_NAME.to_string()])
}

/// [`normalise`] for a run that schedules the pods of these scheduler names (`volcano-rs
/// simulate --scheduler-name`): plain pods of any of them get a PodGroup.
pub fn normalise_for(manifest: Manifest, scheduler_names: &[String]) -> Result<Normalised, InputError> {
    let mut origins = Origins::default();
    let mut entries = manifest.entries;

    // Namespaces and the checks of each object alone, on all cores; then duplicates, and
    // the first error in input order.
    use rayon::prelude::*;
    let checks: Vec<(String, Result<(), FieldError>)> = entries
        .par_iter_mut()
        .with_min_len(256)
        .map(|e| {
            let kind = e.object.kind();
            let meta = e.object.metadata_mut();
            if kind.namespaced() {
                if meta.namespace.as_deref().is_none_or(str::is_empty) {
                    meta.namespace = Some("default".into());
                }
            } else {
                // The API server ignores a namespace on a cluster-scoped object.
                meta.namespace = None;
            }
            if let Object::ReplicationController(rc) = &mut e.object {
                replication_controller_defaults(Arc::make_mut(rc));
            }
            (e.object.key(), validate(&e.object))
        })
        .collect();
    origins.map.reserve(entries.len());
    let mut keys: Vec<String> = Vec::with_capacity(entries.len());
    // Volcano Jobs applied later (`volcano-rs.io/apply-at-seconds`): checked like the others,
    // then held back (`crate::arrive`); one object may be applied several times.
    let mut later: Vec<(usize, i64)> = Vec::new();
    for (i, (e, (key, check))) in entries.iter().zip(checks).enumerate() {
        let kind = e.object.kind();
        let field_error = |(field, message): (String, String)| InputError::Field {
            origin: Some(Box::new(e.origin.clone())),
            kind: kind.as_str(),
            object: key.clone(),
            field,
            message,
        };
        let at = arrive::apply_at(&e.object).map_err(field_error)?;
        // An object applied later may be written several times; the others once.
        if at.is_none() {
            if let Some(first) = origins.insert(kind, key.clone(), e.origin.clone()) {
                return Err(InputError::Duplicate {
                    kind: kind.as_str(),
                    object: key.clone(),
                    first: Box::new(first),
                    second: Box::new(e.origin.clone()),
                });
            }
        }
        check.map_err(|FieldError { field, message }| field_error((field, message)))?;
        if let Some(at) = at {
            later.push((i, at));
        }
        keys.push(key);
    }
    // The held-back Jobs leave the input here, in input order.
    let mut held: Vec<arrive::Held> = Vec::new();
    if !later.is_empty() {
        let mut kept = Vec::with_capacity(entries.len() - later.len());
        let mut kept_keys = Vec::with_capacity(entries.len() - later.len());
        let mut next = later.iter().peekable();
        for (i, (e, key)) in entries.into_iter().zip(keys).enumerate() {
            match next.next_if(|(j, _)| *j == i) {
                Some(&(_, at_ms)) => {
                    if let Object::Job(job) = e.object {
                        held.push(arrive::Held { at_ms, origin: e.origin, job: (*job).clone() });
                    }
                }
                None => {
                    kept.push(e);
                    kept_keys.push(key);
                }
            }
        }
        entries = kept;
        keys = kept_keys;
    }

    // Objects the cluster has before any input: system PriorityClasses, queues root and default.
    let has = |kind: ObjectKind, key: &str| origins.get(kind, key).is_some();
    let mut generated: Vec<Object> = Vec::new();
    for (name, value) in SYSTEM_PRIORITY_CLASSES {
        if !has(ObjectKind::PriorityClass, name) {
            generated.push(Object::PriorityClass(Arc::new(PriorityClass {
                metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
                value,
                description: Some("Built-in Kubernetes priority class.".into()),
                ..Default::default()
            })));
        }
    }
    for queue in implicit::default_queues() {
        if !has(ObjectKind::Queue, queue.metadata.name.as_deref().unwrap_or_default()) {
            generated.push(Object::Queue(Arc::new(queue)));
        }
    }

    // Creation timestamps: one second apart, in input order, ending just before the epoch.
    let missing = generated
        .iter()
        .chain(entries.iter().map(|e| &e.object))
        .filter(|o| o.metadata().creation_timestamp.is_none())
        .count() as i64;
    let mut next = SIM_EPOCH_MS - missing * 1000;
    for o in generated.iter_mut().chain(entries.iter_mut().map(|e| &mut e.object)) {
        let meta = o.metadata_mut();
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = Some(time(next));
            next += 1000;
        }
    }

    // UIDs.
    for o in &mut generated {
        if o.metadata().uid.as_deref().is_none_or(str::is_empty) {
            let uid = deterministic_uid(o.kind(), &o.key());
            o.metadata_mut().uid = Some(uid);
        }
    }
    entries.par_iter_mut().zip(&keys).with_min_len(256).for_each(|(e, key)| {
        let o = &mut e.object;
        if o.metadata().uid.as_deref().is_none_or(str::is_empty) {
            o.metadata_mut().uid = Some(deterministic_uid(o.kind(), key));
        }
    });

    // The Priority admission plugin needs every PriorityClass.
    let mut classes: BTreeMap<String, (i32, Option<String>)> = BTreeMap::new();
    let mut global_default: Option<(String, i32)> = None;
    let all_classes =
        generated.iter().map(|o| (None, o)).chain(entries.iter().map(|e| (Some(&e.origin), &e.object))).filter_map(
            |(origin, o)| match o {
                Object::PriorityClass(pc) => Some((origin, pc)),
                _ => None,
            },
        );
    for (origin, pc) in all_classes {
        let name = pc.metadata.name.clone().unwrap_or_default();
        if pc.global_default == Some(true) {
            if let Some((first, _)) = &global_default {
                return Err(InputError::Field {
                    origin: origin.cloned().map(Box::new),
                    kind: "PriorityClass",
                    object: name,
                    field: "globalDefault".into(),
                    message: format!("PriorityClass {first} is already the global default; only one may be"),
                });
            }
            global_default = Some((name.clone(), pc.value));
        }
        classes.insert(name, (pc.value, pc.preemption_policy.clone()));
    }

    // The API server's pod defaults and the Priority admission plugin, on all cores; the
    // first error in input order (the generated objects hold no pod).
    let defaults: Vec<Result<(), InputError>> = entries
        .par_iter_mut()
        .zip(&keys)
        .with_min_len(256)
        .map(|(e, key)| match &mut e.object {
            Object::Pod(pod) => {
                pod_defaults(Arc::make_mut(pod), key, Some(&e.origin), &classes, global_default.as_ref())
            }
            _ => Ok(()),
        })
        .collect();
    defaults.into_iter().collect::<Result<(), InputError>>()?;

    let mut cluster = Cluster::default();
    let mut latest_creation_ms = i64::MIN;
    // Pods in input order (the first error, the PodGroups made for plain pods), and the
    // nodes and PodGroups, built into the cluster's maps at once.
    let mut pod_order: Vec<(String, Arc<SchedPod>)> = Vec::new();
    let mut nodes: Vec<(String, Arc<k8s_openapi::api::core::v1::Node>)> = Vec::new();
    let mut pod_groups: Vec<(String, Arc<crd::PodGroup>)> = Vec::new();
    let mut jobs: Vec<(Option<Origin>, Arc<volcano_api::job::Job>)> = Vec::new();
    let generated: Vec<(Option<Origin>, Object, String)> = generated
        .into_iter()
        .map(|o| {
            let key = o.key();
            (None, o, key)
        })
        .collect();
    for (origin, object, key) in
        generated.into_iter().chain(entries.into_iter().zip(keys).map(|(e, key)| (Some(e.origin), e.object, key)))
    {
        let created = object.metadata().creation_timestamp.as_ref().map(|t| t.0.as_millisecond());
        latest_creation_ms = latest_creation_ms.max(created.unwrap_or(i64::MIN));
        match object {
            Object::Node(n) => nodes.push((key, n)),
            Object::Pod(pod) => pod_order.push((key, Arc::new(cluster.specs.pod(Arc::unwrap_or_clone(pod))))),
            Object::PriorityClass(pc) => {
                cluster.priority_classes.insert(key, pc);
            }
            Object::PodGroup(mut pg) => {
                if pg.spec.queue.as_deref().is_none_or(str::is_empty) {
                    Arc::make_mut(&mut pg).spec.queue = Some("default".into());
                }
                pod_groups.push((key, pg));
            }
            Object::Queue(q) => {
                cluster.queues.insert(key, q);
            }
            Object::Job(job) => jobs.push((origin, job)),
            // Namespaces that objects name without a Namespace manifest are accepted as
            // before (a dump of one namespace holds none); a Namespace adds its labels.
            Object::Namespace(ns) => {
                cluster.namespaces.insert(key, ns);
            }
            Object::PersistentVolumeClaim(pvc) => {
                cluster.pvcs.insert(key, pvc);
            }
            Object::PersistentVolume(pv) => {
                cluster.pvs.insert(key, pv);
            }
            Object::StorageClass(sc) => {
                cluster.storage_classes.insert(key, sc);
            }
            Object::CSINode(c) => {
                cluster.csi_nodes.insert(key, c);
            }
            Object::Service(svc) => {
                cluster.services.insert(key, svc);
            }
            Object::ReplicationController(rc) => {
                cluster.replication_controllers.insert(key, rc);
            }
            Object::ReplicaSet(rs) => {
                cluster.replica_sets.insert(key, rs);
            }
            Object::StatefulSet(ss) => {
                cluster.stateful_sets.insert(key, ss);
            }
            Object::HyperNode(hn) => {
                cluster.hyper_nodes.insert(key, hn);
            }
        }
    }

    // Sorted on all cores, then built in one pass (keys are unique: duplicates were refused).
    fn by_key<T>(a: &(String, T), b: &(String, T)) -> std::cmp::Ordering {
        a.0.cmp(&b.0)
    }
    rayon::join(|| nodes.par_sort_unstable_by(by_key), || pod_groups.par_sort_unstable_by(by_key));
    cluster.nodes = nodes.into_iter().collect();
    cluster.pod_groups = pod_groups.into_iter().collect();
    let mut pods = pod_order.clone();
    pods.par_sort_unstable_by(by_key);
    cluster.pods = pods.into_iter().collect();

    // Volcano's job admission webhook, then the job controller's first sync of every Job:
    // its PodGroup and pods (the simulator creates them at once, as if the PodGroup were
    // admitted, but for the pods of tasks whose `dependsOn` is not met; see
    // docs/simulate.md).
    if !jobs.is_empty() || !held.is_empty() {
        cluster.admission = PodAdmission { classes: classes.clone(), global_default: global_default.clone() };
        let queues: Vec<crd::Queue> = cluster.queues.values().map(|q| (**q).clone()).collect();
        let values: BTreeMap<String, i32> = classes.iter().map(|(n, (v, _))| (n.clone(), *v)).collect();
        let scheduler_name = scheduler_names.first().map(String::as_str).unwrap_or(SCHEDULER_NAME);
        // Every pod a job can have passes the API server's checks before the first cycle,
        // wherever it is created; returns the pod's key.
        let check_pod = |new: volcano_controller::plan::NewPod, job_key: &str, origin: Option<&Origin>| {
            let key = object_key(ObjectKind::Pod, &new.pod.metadata);
            let in_template = |e| job::in_template(e, job_key, origin, new.task_index);
            let mut pod = new.pod;
            validation::pod(&pod).map_err(|FieldError { field, message }| {
                in_template(InputError::Field { origin: None, kind: "Pod", object: key.clone(), field, message })
            })?;
            pod_defaults(&mut pod, &key, origin, &classes, global_default.as_ref()).map_err(in_template)?;
            Ok::<String, InputError>(key)
        };
        for (origin, job) in jobs {
            let job_key = object_key(ObjectKind::Job, &job.metadata);
            let (sim_job, all_pods) = job::admit_job(&job, origin.as_ref(), scheduler_name, &queues, &values)?;
            let job_origin = origin.clone().unwrap_or_else(|| Origin {
                file: "(created by the simulator)".into(),
                document: 0,
                line: None,
                item: None,
            });
            for new in all_pods {
                let key = check_pod(new, &job_key, origin.as_ref())?;
                // A dump of a cluster holds the job's pods already: those are kept.
                origins.insert(ObjectKind::Pod, key, job_origin.clone());
            }
            origins.insert(ObjectKind::PodGroup, sim_job.pod_group.clone(), job_origin);
            cluster.jobs.insert(job_key, sim_job);
        }
        // At the time of the first cycle, just before it.
        let created = control::reconcile_jobs(&mut cluster, SIM_EPOCH_MS.max(latest_creation_ms), Pass::Load)?.created;
        pod_order.extend(created.into_iter().filter_map(|k| Some((k.clone(), cluster.pods.get(&k)?.clone()))));
        // The Jobs applied later: admitted now (a new one) or checked as an update of the
        // job as it will be then, so that a bad one is an input error before the first cycle.
        let mut arrivals = arrive::admit(held, &cluster.jobs, scheduler_name, &queues, &values)?;
        for a in &mut arrivals {
            for new in std::mem::take(&mut a.pods) {
                check_pod(new, &a.key, Some(&a.origin))?;
            }
        }
        cluster.arrivals = arrivals;
    }

    // Across objects: the queue hierarchy as Volcano's webhook admits it, and pods that hold
    // a node that exists (a pod on a missing node would count against no node's resources).
    validation::queue_hierarchy(cluster.queues.values().map(|q| &**q)).map_err(
        |(queue, FieldError { field, message })| InputError::Field {
            origin: origins.get(ObjectKind::Queue, &queue).cloned().map(Box::new),
            kind: "Queue",
            object: queue,
            field,
            message,
        },
    )?;
    for (key, pod) in &pod_order {
        let Some(node) = pod.node_name() else {
            continue;
        };
        let done = matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"));
        if !done && !cluster.nodes.contains_key(node) {
            return Err(InputError::Field {
                origin: origins.get(ObjectKind::Pod, key).cloned().map(Box::new),
                kind: "Pod",
                object: key.clone(),
                field: "spec.nodeName".into(),
                message: format!(
                    "node {node:?} is not in the input: a pod that holds a node needs that Node, or its \
                     resources would be counted nowhere"
                ),
            });
        }
    }

    // Volcano's PodGroup controller: a PodGroup for every pod of ours without one.
    for (key, pod) in pod_order {
        let ours = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .is_some_and(|n| scheduler_names.iter().any(|s| s == n));
        let grouped = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(crd::GROUP_NAME_ANNOTATION));
        if !ours || grouped {
            continue;
        }
        let origin = origins.get(ObjectKind::Pod, &key);
        let pg = auto_pod_group(&pod, origin, &origins)?;
        // The cluster's copy is then the only one, and is changed in place.
        drop(pod);
        let pg_name = pg.metadata.name.clone().unwrap_or_default();
        let pg_key = object_key(ObjectKind::PodGroup, &pg.metadata);
        cluster.pod_groups.entry(pg_key).or_insert_with(|| Arc::new(pg));
        let pod = cluster.pods.get_mut(&key).expect("the pod is in the cluster");
        Arc::make_mut(pod)
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(crd::GROUP_NAME_ANNOTATION.into(), pg_name);
    }

    cluster.admission = PodAdmission { classes, global_default };
    Ok(Normalised { cluster, origins, latest_creation_ms, scheduler_names: scheduler_names.to_vec() })
}

/// What the API server and Volcano's webhooks check of one object.
fn validate(object: &Object) -> Result<(), FieldError> {
    match object {
        Object::Pod(pod) => validation::pod(pod),
        Object::Node(node) => validation::node(node),
        Object::PodGroup(pg) => validation::pod_group(pg),
        Object::Queue(q) => validation::queue(q),
        Object::PriorityClass(pc) => validation::priority_class(pc),
        Object::Namespace(ns) => validation::namespace(ns),
        Object::PersistentVolumeClaim(pvc) => validation::persistent_volume_claim(pvc),
        Object::PersistentVolume(pv) => validation::persistent_volume(pv),
        Object::StorageClass(sc) => validation::storage_class(sc),
        Object::CSINode(c) => validation::csi_node(c),
        Object::Service(svc) => validation::service(svc),
        Object::ReplicationController(rc) => validation::replication_controller(rc),
        Object::ReplicaSet(rs) => validation::replica_set(rs),
        Object::StatefulSet(ss) => validation::stateful_set(ss),
        Object::HyperNode(hn) => validation::hyper_node(hn),
        // Volcano's job webhook admits it when it is planned.
        Object::Job(_) => Ok(()),
    }
}

/// The API server's default for a ReplicationController: an empty `spec.selector` becomes
/// the template's labels (`v1` defaulting; `apps/v1` workloads have no such default).
fn replication_controller_defaults(rc: &mut ReplicationController) {
    let Some(spec) = rc.spec.as_mut() else { return };
    let labels = spec.template.as_ref().and_then(|t| t.metadata.as_ref()).and_then(|m| m.labels.as_ref());
    if let Some(labels) = labels {
        if spec.selector.as_ref().is_none_or(BTreeMap::is_empty) {
            spec.selector = Some(labels.clone());
        }
    }
}

/// The PodGroup Volcano's controller creates for a plain pod: `podgroup-<owner UID>` (the
/// controlling owner's UID, else the pod's), minMember 1, the queue of the pod's annotation,
/// minResources = the pod's requests.
/// Volcano's PodGroup controller's PodGroup for a pod (`volcano_framework::implicit`), with
/// a deterministic uid and errors located at the pod.
fn auto_pod_group(pod: &SchedPod, origin: Option<&Origin>, origins: &Origins) -> Result<PodGroup, InputError> {
    let mut pg = implicit::pod_group_for_pod(pod).map_err(|e| {
        let mut err = origins.snapshot_error(e);
        if let InputError::Field { origin: o, .. } = &mut err {
            *o = o.take().or_else(|| origin.cloned().map(Box::new));
        }
        err
    })?;
    let key = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pg.metadata.name.as_deref().unwrap_or_default()
    );
    pg.metadata.uid = Some(deterministic_uid(ObjectKind::PodGroup, &key));
    Ok(pg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_stable_and_distinct() {
        let a = deterministic_uid(ObjectKind::Pod, "default/a");
        assert_eq!(a, deterministic_uid(ObjectKind::Pod, "default/a"));
        assert_ne!(a, deterministic_uid(ObjectKind::Pod, "default/b"));
        assert_ne!(a, deterministic_uid(ObjectKind::PodGroup, "default/a"));
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
        assert_eq!(&a[14..15], "8", "version 8");
        // Similar keys differ early, not only in a few digits.
        let b = deterministic_uid(ObjectKind::Pod, "default/b");
        assert_ne!(a[..8], b[..8]);
    }

    #[test]
    fn epoch_is_2026() {
        assert_eq!(time(SIM_EPOCH_MS).0.to_string(), "2026-01-01T00:00:00Z");
    }
}
