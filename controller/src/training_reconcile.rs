//! The TrainingJob reconciler: one et-operator TrainingJob at a time, applying
//! [`training::plan`] to the API. It decides nothing itself.
//!
//! A reconcile reads the job's pods (label `training-job-name`, controlled by the job) and
//! its ScaleOut and ScaleIn requests (`spec.selector.name`, same namespace) from the stores,
//! makes the job the controller of the requests that have no owner (as et-operator does, so
//! that they go with the job), plans the step and applies it in order: the ssh Secret
//! `<job>` (a new RSA key, only when missing), the PodGroup, the workers' Services and the
//! pods, the ConfigMap `<job>-config` (created, or patched when its data differ, so one
//! deleted by hand comes back), the deletions, the requests' statuses and the job's status
//! (through the status subresource, only when changed). Events go through the
//! [`Recorder`]. The resize state ([`ScaleState`]) is remembered per job between reconciles;
//! after a restart it is rebuilt from the statuses ([`training::Observed::scale`]).
//!
//! Creates treat 409 as success and deletes 404; another API error fails the reconcile and
//! the job is requeued with back-off.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::ByteString;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use thiserror::Error;
use tokio::sync::watch;
use volcano_api::crd::PodGroup;
use volcano_api::et::{ScaleIn, ScaleOut, TrainingJob};
use volcano_kube::status_code as code;

use crate::plugins::ssh;
use crate::recorder::{self, Recorder};
use crate::scale::ScaleState;
use crate::training::{self, objects, Observed, PodView, Subject};

/// Why a reconcile of a TrainingJob failed (it is requeued with back-off).
#[derive(Debug, Error)]
pub enum TrainingError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        /// The call, with the object's namespace and name.
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The ssh key could not be generated.
    #[error("generate the ssh key of trainingjob {job}: {source}")]
    SshKey {
        /// `namespace/name`.
        job: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl TrainingError {
    /// A bounded label for logs.
    pub fn category(&self) -> &'static str {
        match self {
            TrainingError::Api { source, .. } => volcano_kube::api_error_category(source),
            TrainingError::SshKey { .. } => "ssh_key",
        }
    }
}

fn api_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> TrainingError {
    let what = what.into();
    move |source| TrainingError::Api { what, source }
}

/// What the TrainingJob reconciles share.
pub struct TrainingContext {
    /// The client.
    pub client: Client,
    /// The pods of TrainingJobs (label `training-job-name`).
    pub pods: Store<Pod>,
    /// The ScaleOuts.
    pub scale_outs: Store<ScaleOut>,
    /// The ScaleIns.
    pub scale_ins: Store<ScaleIn>,
    /// The scheduler of pods whose template names none.
    pub scheduler_name: String,
    /// Whether this replica leads.
    pub leading: watch::Receiver<bool>,
    recorder: Recorder,
    synced: Option<watch::Receiver<bool>>,
    /// `namespace/name` → (uid, resize state, failed reconciles in a row).
    memory: Mutex<HashMap<String, (String, ScaleState, u32)>>,
}

impl TrainingContext {
    /// A context over the stores, recording no events.
    pub fn new(
        client: Client,
        pods: Store<Pod>,
        scale_outs: Store<ScaleOut>,
        scale_ins: Store<ScaleIn>,
        scheduler_name: String,
        leading: watch::Receiver<bool>,
    ) -> Self {
        TrainingContext {
            client,
            pods,
            scale_outs,
            scale_ins,
            scheduler_name,
            leading,
            recorder: Recorder::disabled(),
            synced: None,
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// Records the events with `recorder`.
    #[must_use]
    pub fn with_recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = recorder;
        self
    }

    /// Waits for the stores' first lists on `synced` (one waiter sets it; see
    /// [`crate::reconcile::Context::with_synced`] for why).
    #[must_use]
    pub fn with_synced(mut self, synced: watch::Receiver<bool>) -> Self {
        self.synced = Some(synced);
        self
    }

    async fn stores_ready(&self) {
        match &self.synced {
            Some(rx) => {
                let _ = rx.clone().wait_for(|s| *s).await;
            }
            None => {
                let _ = self.pods.wait_until_ready().await;
                let _ = self.scale_outs.wait_until_ready().await;
                let _ = self.scale_ins.wait_until_ready().await;
            }
        }
    }

    fn remembered(&self, key: &str, uid: &str) -> Option<ScaleState> {
        let m = self.memory.lock().expect("training memory lock");
        m.get(key).filter(|(u, _, _)| u == uid).map(|(_, s, _)| s.clone())
    }

    fn remember(&self, key: String, uid: String, state: ScaleState) {
        self.memory.lock().expect("training memory lock").insert(key, (uid, state, 0));
    }

    fn failed(&self, key: &str) -> u32 {
        let mut m = self.memory.lock().expect("training memory lock");
        let e = m.entry(key.to_string()).or_insert_with(|| (String::new(), ScaleState::default(), 0));
        e.2 = e.2.saturating_add(1);
        e.2
    }

    /// Forgets what the reconciles remember of job `key` (`namespace/name`).
    pub fn forget(&self, key: &str) {
        self.memory.lock().expect("training memory lock").remove(key);
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn controlled_by(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, uid: &str) -> bool {
    meta.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The grace period of a job's scale-ins: its `volcano.sh/scale-in-grace-seconds`
/// annotation, else 30 s.
fn grace_ms(job: &TrainingJob) -> i64 {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(volcano_api::job::SCALE_IN_GRACE_ANNOTATION))
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|s| *s >= 0)
        .unwrap_or(volcano_api::job::DEFAULT_SCALE_IN_GRACE_SECONDS)
        .saturating_mul(1000)
}

/// Reconciles one TrainingJob.
pub async fn reconcile_training(job: Arc<TrainingJob>, ctx: Arc<TrainingContext>) -> Result<Requeue, TrainingError> {
    if !*ctx.leading.borrow() {
        return Ok(Requeue::await_change());
    }
    ctx.stores_ready().await;
    let (ns, name) = (job.namespace().unwrap_or_default(), job.name_any());
    let key = format!("{ns}/{name}");
    if job.metadata.deletion_timestamp.is_some() {
        ctx.forget(&key);
        return Ok(Requeue::await_change());
    }
    match reconcile_with(&job, &ctx, &key).await {
        Ok(wake) => {
            let left = wake.map(|at| Duration::from_millis((at - now_ms()).max(100) as u64));
            Ok(left.map_or_else(Requeue::await_change, Requeue::requeue))
        }
        Err(e) => {
            tracing::warn!(trainingjob = %key, category = e.category(), "reconcile failed: {e}");
            Err(e)
        }
    }
}

/// The back-off after a failed reconcile: 200 ms doubling up to a minute, or
/// [`volcano_kube::outage_retry`] when the API server was away or throttling.
pub fn training_error_policy(job: Arc<TrainingJob>, e: &TrainingError, ctx: Arc<TrainingContext>) -> Requeue {
    if matches!(e, TrainingError::Api { source, .. } if volcano_kube::is_transient(source)) {
        return Requeue::requeue(volcano_kube::outage_retry());
    }
    let key = format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any());
    Requeue::requeue(volcano_kube::retry_backoff(ctx.failed(&key)))
}

async fn reconcile_with(job: &TrainingJob, ctx: &TrainingContext, key: &str) -> Result<Option<i64>, TrainingError> {
    let (ns, name) = (job.namespace().unwrap_or_default(), job.name_any());
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let mut workers = BTreeMap::new();
    let mut launcher = None;
    for pod in ctx.pods.state() {
        if pod.metadata.namespace.as_deref() != Some(&ns) || !controlled_by(&pod.metadata, &uid) {
            continue;
        }
        let pod_name = pod.name_any();
        if pod_name == objects::launcher_name(&name) {
            launcher = Some(PodView::of(&pod));
        } else if let Some(i) = objects::worker_index(&name, &pod_name) {
            workers.insert(i, PodView::of(&pod));
        }
    }
    let selects = |sel: &str, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.namespace.as_deref() == Some(&ns) && sel == name && meta.deletion_timestamp.is_none()
    };
    let outs: Vec<ScaleOut> = ctx
        .scale_outs
        .state()
        .iter()
        .filter(|r| selects(&r.spec.selector.name, &r.metadata))
        .map(|r| (**r).clone())
        .collect();
    let ins: Vec<ScaleIn> = ctx
        .scale_ins
        .state()
        .iter()
        .filter(|r| selects(&r.spec.selector.name, &r.metadata))
        .map(|r| (**r).clone())
        .collect();
    adopt(ctx, job, &outs).await?;
    adopt(ctx, job, &ins).await?;

    let remembered = ctx.remembered(key, &uid);
    let now = now_ms();
    let obs = Observed {
        workers: &workers,
        launcher: launcher.as_ref(),
        scale_outs: &outs,
        scale_ins: &ins,
        scale: remembered.as_ref(),
        scheduler_name: &ctx.scheduler_name,
        grace_ms: grace_ms(job),
        now_ms: now,
    };
    let plan = training::plan(job, &obs);
    let c = ctx.client.clone();

    if let Some(secret) = plan.ssh_secret.as_deref().filter(|s| *s == name) {
        ensure_ssh_secret(&c, job, secret).await?;
    }
    if let Some(pg) = &plan.pod_group {
        create(&Api::<PodGroup>::namespaced(c.clone(), &ns), pg).await?;
    }
    let services: Api<Service> = Api::namespaced(c.clone(), &ns);
    for svc in &plan.create_services {
        create(&services, svc).await?;
    }
    let pods: Api<Pod> = Api::namespaced(c.clone(), &ns);
    for pod in &plan.create_pods {
        create(&pods, pod).await?;
    }
    if let Some(cm) = &plan.config_map {
        apply_config_map(&Api::namespaced(c.clone(), &ns), cm).await?;
    }
    for p in &plan.delete_pods {
        delete(&pods, p).await?;
    }
    for s in &plan.delete_services {
        delete(&services, s).await?;
    }
    for (n, status) in &plan.scale_outs {
        write_request_status(&Api::<ScaleOut>::namespaced(c.clone(), &ns), n, status).await?;
    }
    for (n, status) in &plan.scale_ins {
        write_request_status(&Api::<ScaleIn>::namespaced(c.clone(), &ns), n, status).await?;
    }
    if job.status.as_ref() != Some(&plan.status) {
        let mut next = job.clone();
        next.status = Some(plan.status.clone());
        let api: Api<TrainingJob> = Api::namespaced(c.clone(), &ns);
        api.replace_status(&name, &PostParams::default(), &next)
            .await
            .map_err(api_err(format!("update the status of trainingjob {key}")))?;
    }
    for ev in &plan.events {
        let reference = match &ev.subject {
            Subject::Job => job.object_ref(&()),
            Subject::ScaleOut(n) => outs
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(n))
                .map(|r| r.object_ref(&()))
                .unwrap_or_default(),
            Subject::ScaleIn(n) => ins
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(n))
                .map(|r| r.object_ref(&()))
                .unwrap_or_default(),
        };
        if reference.name.is_some() {
            ctx.recorder.record_on(reference, recorder::training_event(ev));
        }
    }
    ctx.remember(key.to_string(), uid, plan.scale);
    Ok(plan.wake_at_ms)
}

/// Makes the job the controller of the requests that name it and have no owner.
async fn adopt<K>(ctx: &TrainingContext, job: &TrainingJob, requests: &[K]) -> Result<(), TrainingError>
where
    K: Resource<Scope = kube::core::NamespaceResourceScope> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    for r in requests.iter().filter(|r| r.meta().owner_references.as_ref().is_none_or(Vec::is_empty)) {
        let (ns, n) = (r.meta().namespace.clone().unwrap_or_default(), r.meta().name.clone().unwrap_or_default());
        let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = serde_json::json!({ "metadata": { "ownerReferences": [objects::owner(job)] } });
        match api.patch(&n, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(e) if code(&e) == Some(404) => {}
            Err(e) => return Err(api_err(format!("set the owner of {} {ns}/{n}", K::kind(&Default::default())))(e)),
        }
    }
    Ok(())
}

/// Writes a request's status through its status subresource.
async fn write_request_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<(), TrainingError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
    S: serde::Serialize,
{
    let patch = serde_json::json!({ "status": status });
    match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(e) if code(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_err(format!("update the status of {} {name}", K::kind(&Default::default())))(e)),
    }
}

/// The ssh Secret `<job>` (`id_rsa`, `id_rsa.pub`, `config`), made with a new key when missing.
async fn ensure_ssh_secret(c: &Client, job: &TrainingJob, name: &str) -> Result<(), TrainingError> {
    let ns = job.namespace().unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(c.clone(), &ns);
    if api.get_opt(name).await.map_err(api_err(format!("get secret {ns}/{name}")))?.is_some() {
        return Ok(());
    }
    let key_err =
        |e: Box<dyn std::error::Error + Send + Sync>| TrainingError::SshKey { job: format!("{ns}/{name}"), source: e };
    let pair = tokio::task::spawn_blocking(|| ssh::generate_key_pair(&mut rand_core::OsRng))
        .await
        .map_err(|e| key_err(Box::new(e)))?
        .map_err(|e| key_err(Box::new(e)))?;
    let bytes = |s: &str| ByteString(s.as_bytes().to_vec());
    let secret = Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(ns.clone()),
            owner_references: Some(vec![objects::owner(job)]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([
            ("id_rsa".to_string(), bytes(&pair.private_key_pem)),
            ("id_rsa.pub".to_string(), bytes(&pair.public_key)),
            ("config".to_string(), bytes("StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n")),
        ])),
        ..Default::default()
    };
    create(&api, &secret).await
}

/// Creates `cm`, or patches its data when they differ.
async fn apply_config_map(api: &Api<ConfigMap>, cm: &ConfigMap) -> Result<(), TrainingError> {
    let name = cm.name_any();
    let existing = api.get_opt(&name).await.map_err(api_err(format!("get ConfigMap {name}")))?;
    let Some(existing) = existing else {
        return create(api, cm).await;
    };
    let (have, want) = (existing.data.unwrap_or_default(), cm.data.clone().unwrap_or_default());
    if have == want {
        return Ok(());
    }
    let mut data = serde_json::Map::new();
    for k in have.keys().filter(|k| !want.contains_key(*k)) {
        data.insert(k.clone(), serde_json::Value::Null);
    }
    for (k, v) in &want {
        data.insert(k.clone(), serde_json::Value::String(v.clone()));
    }
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&serde_json::json!({ "data": data })))
        .await
        .map_err(api_err(format!("update ConfigMap {name}")))?;
    tracing::info!(configmap = %name, "training job host list updated");
    Ok(())
}

async fn create<K>(api: &Api<K>, obj: &K) -> Result<(), TrainingError>
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

async fn delete<K>(api: &Api<K>, name: &str) -> Result<(), TrainingError>
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

/// Whether the API server serves TrainingJobs (the kai.alibabacloud.com CRDs are installed).
pub async fn served(client: &Client) -> Result<bool, kube::Error> {
    let gv = format!("{}/{}", volcano_api::et::GROUP, volcano_api::et::VERSION);
    match client.list_api_group_resources(&gv).await {
        Ok(list) => {
            Ok(["trainingjobs", "scaleouts", "scaleins"].iter().all(|r| list.resources.iter().any(|x| x.name == *r)))
        }
        Err(e) if code(&e) == Some(404) => Ok(false),
        Err(e) => Err(e),
    }
}
