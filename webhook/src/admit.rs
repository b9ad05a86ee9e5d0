//! The admission decisions, without IO: an `AdmissionRequest` and what the webhook knows of
//! the cluster (the queues, the namespace's default queue) in, an `AdmissionResponse` out.
//!
//! | path | operations | what |
//! |---|---|---|
//! | `/jobs/mutate` | CREATE | [`volcano_api::admission::mutate_job`]'s defaults, as a JSON patch |
//! | `/jobs/validate` | CREATE, UPDATE | [`volcano_api::admission::validate_job_create`] / [`validate_job_update`] |
//! | `/queues/mutate` | CREATE | `weight` 1 and `reclaimable: true` when unset |
//! | `/queues/validate` | CREATE, UPDATE, DELETE | the queue on its own and the hierarchy with the others; `root` and the default queue are never deleted, other queues only when Closed and childless |
//! | `/podgroups/mutate` | CREATE | the namespace's `scheduling.volcano.sh/queue-name` annotation as the queue of a PodGroup that names none (or `default`) |
//! | `/podgroups/validate` | CREATE | the PodGroup on its own; its queue exists and is Open |
//! | `/hypernodes/validate` | CREATE, UPDATE | [`volcano_api::validation::hyper_node`]; a warning for each member Volcano ignores ([`volcano_api::validation::hyper_node_ignored`]) |
//!
//! The paths are Volcano's webhook-manager's, so its webhook configurations work unchanged.
//! A rejection names the object, the field and the rule broken; an object that does not
//! decode is rejected with serde's message (the API server has already checked the schema,
//! so this only happens with a CRD older than the webhook).

use json_patch::jsonptr;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::core::DynamicObject;
use serde::de::DeserializeOwned;
use serde_json::Value;
use volcano_api::admission;
use volcano_api::crd::{PodGroup, Queue, QueueState, QUEUE_NAME_ANNOTATION};
use volcano_api::job::Job;
use volcano_api::names::{DEFAULT_QUEUE, ROOT_QUEUE};
use volcano_api::topology::HyperNode;
use volcano_api::validation;

/// One of the webhook's endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/jobs/mutate`.
    JobsMutate,
    /// `/jobs/validate`.
    JobsValidate,
    /// `/queues/mutate`.
    QueuesMutate,
    /// `/queues/validate`.
    QueuesValidate,
    /// `/podgroups/mutate`.
    PodGroupsMutate,
    /// `/podgroups/validate`.
    PodGroupsValidate,
    /// `/hypernodes/validate`.
    HyperNodesValidate,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Endpoint; 7] = [
        Endpoint::JobsMutate,
        Endpoint::JobsValidate,
        Endpoint::QueuesMutate,
        Endpoint::QueuesValidate,
        Endpoint::PodGroupsMutate,
        Endpoint::PodGroupsValidate,
        Endpoint::HyperNodesValidate,
    ];

    /// The HTTP path, as Volcano's webhook-manager serves it.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::JobsMutate => "/jobs/mutate",
            Endpoint::JobsValidate => "/jobs/validate",
            Endpoint::QueuesMutate => "/queues/mutate",
            Endpoint::QueuesValidate => "/queues/validate",
            Endpoint::PodGroupsMutate => "/podgroups/mutate",
            Endpoint::PodGroupsValidate => "/podgroups/validate",
            Endpoint::HyperNodesValidate => "/hypernodes/validate",
        }
    }

    /// The endpoint of a path.
    pub fn from_path(path: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|e| e.path() == path)
    }

    /// Whether the endpoint mutates (else it validates).
    pub fn mutates(self) -> bool {
        matches!(self, Endpoint::JobsMutate | Endpoint::QueuesMutate | Endpoint::PodGroupsMutate)
    }
}

/// The webhook's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The queue of jobs that name none.
    pub default_queue: String,
    /// The scheduler of jobs that name none (Volcano: the first `--scheduler-name`).
    pub scheduler_name: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { default_queue: DEFAULT_QUEUE.to_string(), scheduler_name: "volcano-rs".to_string() }
    }
}

/// What the webhook knows of the cluster for one request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Facts<'a> {
    /// Every queue (from the webhook's watch).
    pub queues: &'a [Queue],
    /// The `scheduling.volcano.sh/queue-name` annotation of the request's namespace, if any
    /// (read for `/podgroups/mutate` only).
    pub namespace_queue: Option<&'a str>,
}

/// Decides a request to `endpoint`.
pub fn admit(
    endpoint: Endpoint,
    req: &AdmissionRequest<DynamicObject>,
    settings: &Settings,
    facts: Facts<'_>,
) -> AdmissionResponse {
    let res = AdmissionResponse::from(req);
    let outcome = match endpoint {
        Endpoint::JobsMutate => jobs_mutate(req, settings),
        Endpoint::JobsValidate => jobs_validate(req, facts),
        Endpoint::QueuesMutate => queues_mutate(req),
        Endpoint::QueuesValidate => queues_validate(req, settings, facts),
        Endpoint::PodGroupsMutate => pod_groups_mutate(req, facts),
        Endpoint::PodGroupsValidate => pod_groups_validate(req, facts),
        Endpoint::HyperNodesValidate => hyper_nodes_validate(req),
    };
    match outcome {
        Ok(Verdict::Allow) => res,
        Ok(Verdict::Warn(warnings)) => {
            let mut res = res;
            res.warnings = Some(warnings);
            res
        }
        Ok(Verdict::Patch(patch)) if patch.0.is_empty() => res,
        Ok(Verdict::Patch(patch)) => match res.with_patch(patch) {
            Ok(res) => res,
            Err(e) => AdmissionResponse::from(req).deny(format!("cannot encode the patch: {e}")),
        },
        Err(why) => res.deny(why),
    }
}

/// What a handler decided.
enum Verdict {
    Allow,
    /// Allowed, with warnings for the user (kubectl prints them).
    Warn(Vec<String>),
    Patch(json_patch::Patch),
}

fn object_name(req: &AdmissionRequest<DynamicObject>) -> String {
    match &req.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{}", req.name),
        _ => req.name.clone(),
    }
}

/// The request's object (or old object), as `T`.
fn decode<T: DeserializeOwned>(
    req: &AdmissionRequest<DynamicObject>,
    obj: Option<&DynamicObject>,
    kind: &str,
) -> Result<(T, Value), String> {
    let obj = obj.ok_or_else(|| format!("{kind} {}: the request has no object", object_name(req)))?;
    let value = serde_json::to_value(obj).map_err(|e| format!("{kind} {}: {e}", object_name(req)))?;
    // An object without a spec (which the CRDs allow) decodes as one with an empty spec.
    let mut filled = value.clone();
    if filled.get("spec").is_none_or(Value::is_null) {
        filled["spec"] = Value::Object(Default::default());
    }
    let typed = serde_json::from_value(filled)
        .map_err(|e| format!("{kind} {}: cannot decode the object: {e}", object_name(req)))?;
    Ok((typed, value))
}

/// The JSON patch from `before` to `after` (serialized the same way).
fn patch_to<T: serde::Serialize>(before: &Value, after: &T) -> Result<Verdict, String> {
    let after = serde_json::to_value(after).map_err(|e| e.to_string())?;
    Ok(Verdict::Patch(json_patch::diff(before, &after)))
}

fn jobs_mutate(req: &AdmissionRequest<DynamicObject>, settings: &Settings) -> Result<Verdict, String> {
    if req.operation != Operation::Create {
        return Ok(Verdict::Allow);
    }
    let (job, value): (Job, Value) = decode(req, req.object.as_ref(), "Job")?;
    let mutated = admission::mutate_job(&job, &settings.default_queue, &settings.scheduler_name);
    // The patch goes from the typed object (re-encoded) to the mutated one, so it touches
    // only what the mutation changed; it must apply to the object as sent.
    let before = serde_json::to_value(&job).map_err(|e| e.to_string())?;
    let Verdict::Patch(patch) = patch_to(&before, &mutated)? else { return Ok(Verdict::Allow) };
    let mut sent = value;
    json_patch::patch(&mut sent, &patch)
        .map_err(|e| format!("Job {}: the defaults do not apply to the object: {e}", object_name(req)))?;
    Ok(Verdict::Patch(patch))
}

fn jobs_validate(req: &AdmissionRequest<DynamicObject>, facts: Facts<'_>) -> Result<Verdict, String> {
    match req.operation {
        Operation::Create => {
            let (job, _): (Job, Value) = decode(req, req.object.as_ref(), "Job")?;
            admission::validate_job_create(&job, facts.queues).map_err(|e| e.to_string())?;
        }
        Operation::Update => {
            let (new, _): (Job, Value) = decode(req, req.object.as_ref(), "Job")?;
            let (old, _): (Job, Value) = decode(req, req.old_object.as_ref(), "Job")?;
            admission::validate_job_update(&old, &new).map_err(|e| e.to_string())?;
        }
        _ => {}
    }
    Ok(Verdict::Allow)
}

fn queues_mutate(req: &AdmissionRequest<DynamicObject>) -> Result<Verdict, String> {
    if req.operation != Operation::Create {
        return Ok(Verdict::Allow);
    }
    let (queue, value): (Queue, Value) = decode(req, req.object.as_ref(), "Queue")?;
    let mut ops = Vec::new();
    if queue.spec.weight.unwrap_or(0) == 0 {
        ops.push(add_op("/spec/weight", Value::from(1)));
    }
    if queue.spec.reclaimable.is_none() {
        ops.push(add_op("/spec/reclaimable", Value::Bool(true)));
    }
    if !ops.is_empty() && value.get("spec").is_none() {
        ops.insert(0, add_op("/spec", Value::Object(Default::default())));
    }
    Ok(Verdict::Patch(json_patch::Patch(ops)))
}

fn add_op(path: &str, value: Value) -> json_patch::PatchOperation {
    json_patch::PatchOperation::Add(json_patch::AddOperation {
        path: jsonptr::PointerBuf::parse(path).expect("a valid pointer"),
        value,
    })
}

fn queues_validate(
    req: &AdmissionRequest<DynamicObject>,
    settings: &Settings,
    facts: Facts<'_>,
) -> Result<Verdict, String> {
    match req.operation {
        Operation::Create | Operation::Update => {
            let (queue, _): (Queue, Value) = decode(req, req.object.as_ref(), "Queue")?;
            let name = queue.metadata.name.clone().unwrap_or_default();
            validation::queue(&queue).map_err(|e| format!("queue {name}: {e}"))?;
            // The hierarchy with this queue in place of (or beside) the stored one.
            let mut all: Vec<&Queue> =
                facts.queues.iter().filter(|q| q.metadata.name.as_deref() != Some(name.as_str())).collect();
            all.push(&queue);
            validation::queue_hierarchy(all).map_err(|(q, e)| format!("queue {q}: {e}"))?;
        }
        Operation::Delete => {
            let name = req.name.as_str();
            if name == ROOT_QUEUE || name == settings.default_queue {
                return Err(format!("queue {name}: the {name} queue can not be deleted"));
            }
            let old = req.old_object.as_ref().map(|_| decode::<Queue>(req, req.old_object.as_ref(), "Queue"));
            let stored = facts.queues.iter().find(|q| q.metadata.name.as_deref() == Some(name));
            let state = match old {
                Some(Ok((q, _))) => q.status.and_then(|s| s.state),
                _ => stored.and_then(|q| q.status.as_ref()).and_then(|s| s.state),
            };
            if state != Some(QueueState::Closed) {
                return Err(format!(
                    "queue {name}: only queue with state `Closed` can be deleted, the queue is {}",
                    state.map(|s| format!("{s:?}")).unwrap_or_else(|| "in no state yet".to_string())
                ));
            }
            let children: Vec<&str> = facts
                .queues
                .iter()
                .filter(|q| q.spec.parent.as_deref() == Some(name))
                .filter_map(|q| q.metadata.name.as_deref())
                .collect();
            if !children.is_empty() {
                return Err(format!("queue {name}: it has child queues ({})", children.join(", ")));
            }
        }
        Operation::Connect => {}
    }
    Ok(Verdict::Allow)
}

fn pod_groups_mutate(req: &AdmissionRequest<DynamicObject>, facts: Facts<'_>) -> Result<Verdict, String> {
    if req.operation != Operation::Create {
        return Ok(Verdict::Allow);
    }
    let Some(queue) = facts.namespace_queue.filter(|q| !q.is_empty()) else { return Ok(Verdict::Allow) };
    let (pg, value): (PodGroup, Value) = decode(req, req.object.as_ref(), "PodGroup")?;
    let current = pg.spec.queue.as_deref().unwrap_or_default();
    if !(current.is_empty() || current == DEFAULT_QUEUE) || current == queue {
        return Ok(Verdict::Allow);
    }
    let mut ops = Vec::new();
    if value.get("spec").is_none() {
        ops.push(add_op("/spec", Value::Object(Default::default())));
    }
    ops.push(add_op("/spec/queue", Value::String(queue.to_string())));
    Ok(Verdict::Patch(json_patch::Patch(ops)))
}

fn pod_groups_validate(req: &AdmissionRequest<DynamicObject>, facts: Facts<'_>) -> Result<Verdict, String> {
    if req.operation != Operation::Create {
        return Ok(Verdict::Allow);
    }
    let (pg, _): (PodGroup, Value) = decode(req, req.object.as_ref(), "PodGroup")?;
    let name = object_name(req);
    validation::pod_group(&pg).map_err(|e| format!("PodGroup {name}: {e}"))?;
    let queue = pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(DEFAULT_QUEUE);
    let Some(q) = facts.queues.iter().find(|q| q.metadata.name.as_deref() == Some(queue)) else {
        return Err(format!("PodGroup {name}: spec.queue: queue {queue} does not exist"));
    };
    let state = q.status.as_ref().and_then(|s| s.state);
    if !matches!(state, None | Some(QueueState::Open)) {
        return Err(format!(
            "PodGroup {name}: spec.queue: queue {queue} is {state:?}, not Open",
            state = state.unwrap()
        ));
    }
    if let Some(ns_queue) = facts.namespace_queue.filter(|q| !q.is_empty()) {
        if pg.metadata.annotations.as_ref().and_then(|a| a.get(QUEUE_NAME_ANNOTATION)).is_some_and(|a| a != ns_queue) {
            tracing::debug!(pod_group = %name, "the PodGroup's queue annotation differs from its namespace's");
        }
    }
    Ok(Verdict::Allow)
}

/// Volcano's HyperNode admission (with its CRD's rules, which an API server older than CEL
/// validation does not apply): [`validation::hyper_node`] on create and update; the members
/// Volcano admits but ignores are warned about.
fn hyper_nodes_validate(req: &AdmissionRequest<DynamicObject>) -> Result<Verdict, String> {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(Verdict::Allow);
    }
    let (hn, _): (HyperNode, Value) = decode(req, req.object.as_ref(), "HyperNode")?;
    let name = object_name(req);
    validation::hyper_node(&hn).map_err(|e| format!("HyperNode {name}: {e}"))?;
    let ignored: Vec<String> =
        validation::hyper_node_ignored(&hn).iter().map(|e| format!("HyperNode {name}: {e}")).collect();
    Ok(if ignored.is_empty() { Verdict::Allow } else { Verdict::Warn(ignored) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::admission::AdmissionReview;
    use serde_json::json;

    /// A request as the API server sends it.
    fn request(
        resource: (&str, &str, &str),
        kind: &str,
        op: &str,
        object: Option<Value>,
        old: Option<Value>,
    ) -> AdmissionRequest<DynamicObject> {
        let (group, version, plural) = resource;
        let name = object.as_ref().or(old.as_ref()).and_then(|o| o["metadata"]["name"].as_str()).unwrap_or("x");
        let namespace = object.as_ref().or(old.as_ref()).and_then(|o| o["metadata"]["namespace"].as_str());
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": group, "version": version, "kind": kind},
                "resource": {"group": group, "version": version, "resource": plural},
                "requestKind": {"group": group, "version": version, "kind": kind},
                "requestResource": {"group": group, "version": version, "resource": plural},
                "name": name,
                "namespace": namespace,
                "operation": op,
                "userInfo": {"username": "admin"},
                "object": object,
                "oldObject": old,
                "dryRun": false,
            }
        });
        let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
        review.try_into().unwrap()
    }

    const JOBS: (&str, &str, &str) = ("batch.volcano.sh", "v1alpha1", "jobs");
    const QUEUES: (&str, &str, &str) = ("scheduling.volcano.sh", "v1beta1", "queues");
    const PODGROUPS: (&str, &str, &str) = ("scheduling.volcano.sh", "v1beta1", "podgroups");
    const HYPERNODES: (&str, &str, &str) = ("topology.volcano.sh", "v1alpha1", "hypernodes");

    fn job(queue: Option<&str>, replicas: i32, min_available: Option<i32>) -> Value {
        let mut j = json!({
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "tf", "namespace": "ml", "uid": "u1", "labels": {"team": "a"}},
            "spec": {
                "plugins": {"tensorflow": ["--port=2222"]},
                "tasks": [{"name": "worker", "replicas": replicas, "template": {"spec": {
                    "containers": [{"name": "c", "image": "tf", "futureField": {"kept": true}}],
                    "restartPolicy": "Never"
                }}}]
            }
        });
        if let Some(q) = queue {
            j["spec"]["queue"] = q.into();
        }
        if let Some(m) = min_available {
            j["spec"]["minAvailable"] = m.into();
        }
        j
    }

    fn queue(name: &str, state: &str, parent: Option<&str>) -> Queue {
        let mut q: Queue = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name}, "spec": {"weight": 1},
            "status": {"state": state}
        }))
        .unwrap();
        q.spec.parent = parent.map(str::to_string);
        q
    }

    fn patched(res: &AdmissionResponse, object: &Value) -> Value {
        let patch: json_patch::Patch = serde_json::from_slice(res.patch.as_deref().expect("a patch")).unwrap();
        let mut o = object.clone();
        json_patch::patch(&mut o, &patch).unwrap();
        o
    }

    #[test]
    fn a_job_gets_volcanos_defaults_as_a_patch_that_keeps_unknown_fields() {
        let object = job(None, 2, None);
        let req = request(JOBS, "Job", "CREATE", Some(object.clone()), None);
        let res = admit(Endpoint::JobsMutate, &req, &Settings::default(), Facts::default());
        assert!(res.allowed);
        let o = patched(&res, &object);
        assert_eq!(o["spec"]["queue"], "default");
        assert_eq!(o["spec"]["schedulerName"], "volcano-rs");
        assert_eq!(o["spec"]["maxRetry"], 3);
        assert_eq!(o["spec"]["minAvailable"], 2);
        assert_eq!(o["spec"]["tasks"][0]["minAvailable"], 2);
        assert!(o["spec"]["plugins"]["svc"].is_array(), "tensorflow adds svc: {o}");
        assert_eq!(o["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["futureField"]["kept"], true);
        assert_eq!(o["metadata"]["labels"]["team"], "a");
        // A job that has every default needs no patch.
        let req = request(JOBS, "Job", "CREATE", Some(o.clone()), None);
        let res = admit(Endpoint::JobsMutate, &req, &Settings::default(), Facts::default());
        assert!(res.allowed && res.patch.is_none(), "{:?}", res.patch.map(String::from_utf8));
        // Updates are not mutated.
        let req = request(JOBS, "Job", "UPDATE", Some(object.clone()), Some(object));
        assert!(admit(Endpoint::JobsMutate, &req, &Settings::default(), Facts::default()).patch.is_none());
    }

    #[test]
    fn job_validation_names_the_job_the_field_and_the_rule() {
        let queues = [queue("default", "Open", None), queue("closed", "Closed", None)];
        let facts = Facts { queues: &queues, namespace_queue: None };
        let ok = patched(
            &admit(
                Endpoint::JobsMutate,
                &request(JOBS, "Job", "CREATE", Some(job(None, 2, None)), None),
                &Settings::default(),
                Facts::default(),
            ),
            &job(None, 2, None),
        );
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "CREATE", Some(ok.clone()), None),
            &Settings::default(),
            facts,
        );
        assert!(res.allowed, "{}", res.result.message);

        let mut bad = ok.clone();
        bad["spec"]["minAvailable"] = 5.into();
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "CREATE", Some(bad), None),
            &Settings::default(),
            facts,
        );
        assert!(!res.allowed);
        assert!(res.result.message.starts_with("job ml/tf: spec.minAvailable"), "{}", res.result.message);

        let mut closed = ok.clone();
        closed["spec"]["queue"] = "closed".into();
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "CREATE", Some(closed), None),
            &Settings::default(),
            facts,
        );
        assert!(!res.allowed && res.result.message.contains("spec.queue"), "{}", res.result.message);

        let mut more = ok.clone();
        more["spec"]["tasks"][0]["replicas"] = 4.into();
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "UPDATE", Some(more.clone()), Some(ok.clone())),
            &Settings::default(),
            facts,
        );
        assert!(res.allowed, "{}", res.result.message);
        more["spec"]["tasks"][0]["name"] = "renamed".into();
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "UPDATE", Some(more), Some(ok)),
            &Settings::default(),
            facts,
        );
        assert!(!res.allowed, "a task rename is not an allowed update");
    }

    #[test]
    fn a_resize_below_min_available_and_a_bad_plugin_argument_are_denied_with_the_field() {
        let queues = [queue("default", "Open", None)];
        let facts = Facts { queues: &queues, namespace_queue: None };
        let mut old = patched(
            &admit(
                Endpoint::JobsMutate,
                &request(JOBS, "Job", "CREATE", Some(job(None, 4, None)), None),
                &Settings::default(),
                Facts::default(),
            ),
            &job(None, 4, None),
        );
        old["spec"]["tasks"][0]["minAvailable"] = 2.into();
        old["spec"]["minAvailable"] = 2.into();
        let validate = |op: &str, new: &Value, old: Option<&Value>| {
            admit(
                Endpoint::JobsValidate,
                &request(JOBS, "Job", op, Some(new.clone()), old.cloned()),
                &Settings::default(),
                facts,
            )
        };
        let mut fewer = old.clone();
        fewer["spec"]["tasks"][0]["replicas"] = 2.into();
        assert!(validate("UPDATE", &fewer, Some(&old)).allowed, "down to minAvailable");
        fewer["spec"]["tasks"][0]["replicas"] = 1.into();
        let res = validate("UPDATE", &fewer, Some(&old));
        assert!(!res.allowed);
        assert!(
            res.result.message.starts_with("job ml/tf: spec.tasks[0].replicas: 1 is below the task's minAvailable (2)"),
            "{}",
            res.result.message
        );
        let mut bad = old.clone();
        bad["spec"]["plugins"]["tensorflow"] = json!(["--port=none"]);
        let res = validate("CREATE", &bad, None);
        assert!(!res.allowed);
        assert!(
            res.result.message.contains("spec.plugins[tensorflow]: argument \"--port=none\": \"none\" is not a port"),
            "{}",
            res.result.message
        );
    }

    #[test]
    fn an_object_that_does_not_decode_is_denied_with_the_reason() {
        let mut o = job(None, 2, None);
        o["spec"]["tasks"] = "not a list".into();
        let res = admit(
            Endpoint::JobsValidate,
            &request(JOBS, "Job", "CREATE", Some(o), None),
            &Settings::default(),
            Facts::default(),
        );
        assert!(!res.allowed);
        assert!(res.result.message.starts_with("Job ml/tf: cannot decode the object"), "{}", res.result.message);
    }

    #[test]
    fn queues_get_weight_and_reclaimable_and_keep_their_hierarchy_sound() {
        let object =
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q1"}});
        let res = admit(
            Endpoint::QueuesMutate,
            &request(QUEUES, "Queue", "CREATE", Some(object.clone()), None),
            &Settings::default(),
            Facts::default(),
        );
        let o = patched(&res, &object);
        assert_eq!((o["spec"]["weight"].clone(), o["spec"]["reclaimable"].clone()), (json!(1), json!(true)));

        let queues =
            [queue("root", "Open", None), queue("default", "Open", Some("root")), queue("eng", "Open", Some("root"))];
        let facts = Facts { queues: &queues, namespace_queue: None };
        let mut child = serde_json::to_value(queue("dev", "Open", Some("nowhere"))).unwrap();
        let res = admit(
            Endpoint::QueuesValidate,
            &request(QUEUES, "Queue", "CREATE", Some(child.clone()), None),
            &Settings::default(),
            facts,
        );
        assert!(!res.allowed && res.result.message.contains("spec.parent"), "{}", res.result.message);
        child["spec"]["parent"] = "eng".into();
        let res = admit(
            Endpoint::QueuesValidate,
            &request(QUEUES, "Queue", "CREATE", Some(child), None),
            &Settings::default(),
            facts,
        );
        assert!(res.allowed, "{}", res.result.message);
        let mut weight = serde_json::to_value(queue("eng", "Open", Some("root"))).unwrap();
        weight["spec"]["weight"] = 0.into();
        let res = admit(
            Endpoint::QueuesValidate,
            &request(QUEUES, "Queue", "UPDATE", Some(weight), None),
            &Settings::default(),
            facts,
        );
        assert!(!res.allowed && res.result.message.starts_with("queue eng: spec.weight"), "{}", res.result.message);
    }

    #[test]
    fn only_closed_childless_queues_other_than_root_and_default_are_deleted() {
        let queues = [
            queue("root", "Open", None),
            queue("default", "Closed", Some("root")),
            queue("open", "Open", Some("root")),
            queue("parent", "Closed", Some("root")),
            queue("child", "Closed", Some("parent")),
        ];
        let facts = Facts { queues: &queues, namespace_queue: None };
        let delete = |name: &str| {
            let old = serde_json::to_value(queues.iter().find(|q| q.metadata.name.as_deref() == Some(name)).unwrap())
                .unwrap();
            admit(
                Endpoint::QueuesValidate,
                &request(QUEUES, "Queue", "DELETE", None, Some(old)),
                &Settings::default(),
                facts,
            )
        };
        for (name, allowed, says) in [
            ("root", false, "can not be deleted"),
            ("default", false, "can not be deleted"),
            ("open", false, "only queue with state `Closed` can be deleted"),
            ("parent", false, "child queues (child)"),
            ("child", true, ""),
        ] {
            let res = delete(name);
            assert_eq!(res.allowed, allowed, "{name}: {}", res.result.message);
            assert!(res.result.message.contains(says), "{name}: {}", res.result.message);
        }
    }

    #[test]
    fn pod_groups_take_their_namespaces_queue_and_need_an_open_one() {
        let object = json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"}, "spec": {"minMember": 2}});
        let facts = Facts { queues: &[], namespace_queue: Some("team-a") };
        let res = admit(
            Endpoint::PodGroupsMutate,
            &request(PODGROUPS, "PodGroup", "CREATE", Some(object.clone()), None),
            &Settings::default(),
            facts,
        );
        assert_eq!(patched(&res, &object)["spec"]["queue"], "team-a");
        let mut named = object.clone();
        named["spec"]["queue"] = "other".into();
        let res = admit(
            Endpoint::PodGroupsMutate,
            &request(PODGROUPS, "PodGroup", "CREATE", Some(named), None),
            &Settings::default(),
            facts,
        );
        assert!(res.patch.is_none(), "a PodGroup that names its queue keeps it");

        let queues = [queue("default", "Open", None), queue("shut", "Closed", None)];
        let facts = Facts { queues: &queues, namespace_queue: None };
        let res = admit(
            Endpoint::PodGroupsValidate,
            &request(PODGROUPS, "PodGroup", "CREATE", Some(object.clone()), None),
            &Settings::default(),
            facts,
        );
        assert!(res.allowed, "{}", res.result.message);
        for (q, says) in [("shut", "is Closed, not Open"), ("missing", "does not exist")] {
            let mut o = object.clone();
            o["spec"]["queue"] = q.into();
            let res = admit(
                Endpoint::PodGroupsValidate,
                &request(PODGROUPS, "PodGroup", "CREATE", Some(o), None),
                &Settings::default(),
                facts,
            );
            assert!(!res.allowed && res.result.message.contains(says), "{}", res.result.message);
        }
        let mut neg = object;
        neg["spec"]["minMember"] = (-1).into();
        let res = admit(
            Endpoint::PodGroupsValidate,
            &request(PODGROUPS, "PodGroup", "CREATE", Some(neg), None),
            &Settings::default(),
            facts,
        );
        assert!(
            !res.allowed && res.result.message.starts_with("PodGroup ml/pg: spec.minMember"),
            "{}",
            res.result.message
        );
    }

    fn hyper_node(members: Value) -> Value {
        json!({
            "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": "leaf-0", "uid": "u1"},
            "spec": {"tier": 1, "tierName": "leaf", "members": members},
        })
    }

    fn admit_hyper_node(op: &str, object: Value, old: Option<Value>) -> AdmissionResponse {
        let req = request(HYPERNODES, "HyperNode", op, Some(object), old);
        admit(Endpoint::HyperNodesValidate, &req, &Settings::default(), Facts::default())
    }

    #[test]
    fn hyper_nodes_are_validated_as_volcano_does_on_create_and_update() {
        let good = hyper_node(json!([
            {"type": "Node", "selector": {"exactMatch": {"name": "gpu-0"}}},
            {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
            {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
        ]));
        for op in ["CREATE", "UPDATE"] {
            let res = admit_hyper_node(op, good.clone(), (op == "UPDATE").then(|| good.clone()));
            assert!(res.allowed, "{op}: {}", res.result.message);
            assert!(res.warnings.is_none() && res.patch.is_none());
        }
        // A pattern that does not compile, on create and on update, names the member's field.
        let bad = hyper_node(json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "gpu-[0-9"}}}]));
        for op in ["CREATE", "UPDATE"] {
            let res = admit_hyper_node(op, bad.clone(), (op == "UPDATE").then(|| good.clone()));
            assert!(!res.allowed);
            assert_eq!(
                res.result.message,
                "HyperNode leaf-0: spec.members[0].selector.regexMatch.pattern: member regexMatch pattern is invalid: \
                 unclosed character class"
            );
        }
        // Two selectors (what the CRD's CEL rule refuses, for API servers without it).
        let two = hyper_node(json!([
            {"type": "Node", "selector": {"exactMatch": {"name": "gpu-0"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "gpu-1"}, "labelMatch": {}}},
        ]));
        let res = admit_hyper_node("CREATE", two, None);
        assert!(!res.allowed);
        assert_eq!(
            res.result.message,
            "HyperNode leaf-0: spec.members[1].selector: Only one of ExactMatch, RegexMatch, or LabelMatch can be specified"
        );
        // No spec at all: no member.
        let mut empty = hyper_node(json!([]));
        empty.as_object_mut().unwrap().remove("spec");
        let res = admit_hyper_node("CREATE", empty, None);
        assert!(!res.allowed);
        assert!(res.result.message.starts_with("HyperNode leaf-0: spec.members: required"), "{}", res.result.message);
        // Deletes are not checked.
        let req = request(HYPERNODES, "HyperNode", "DELETE", None, Some(bad));
        assert!(admit(Endpoint::HyperNodesValidate, &req, &Settings::default(), Facts::default()).allowed);
    }

    #[test]
    fn hyper_node_members_volcano_ignores_are_admitted_with_a_warning() {
        let object = hyper_node(json!([
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-1"}}},
            {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}},
        ]));
        let res = admit_hyper_node("CREATE", object, None);
        assert!(res.allowed);
        assert_eq!(
            res.warnings.unwrap(),
            ["HyperNode leaf-0: spec.members[1].selector.labelMatch: ignored: a member of type HyperNode is chosen \
              by exactMatch only; labelMatch chooses nodes (type Node)"]
        );
    }
}
