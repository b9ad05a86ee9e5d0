//! How the scheduler reads pods: the fields it keeps ([`slim`]), the initial list in the
//! API server's protobuf encoding ([`list`]), and the reflector that lists then watches
//! ([`reflect`]).
//!
//! **Why not kube-runtime's watcher for pods.** Listing 140,000 pods is what a restart
//! waits for. kube-rs lists in JSON; the API server encodes the same list in protobuf in
//! much less time and fewer bytes (measured in docs/performance-history.md, "Start to
//! first bind"). So the
//! pods' initial list asks for `application/vnd.kubernetes.protobuf` with
//! `resourceVersion=0` (served from the API server's watch cache, as client-go's informers
//! list), splits the response into items as the bytes arrive and decodes them on a
//! blocking thread while the rest is still being sent; the watch that follows is kube's
//! JSON watch from the list's resourceVersion, relisting on `410 Gone`. Every other kind is
//! small and stays on kube-runtime's watcher.
//!
//! **What is kept of a pod.** The cache keeps only what scheduling reads (see [`slim`]):
//! metadata without managed fields and finalizers; the spec's scheduling fields and, of
//! each container, its name, image, ports, requests and limits and restart policy; of the
//! volumes, those the volume checks read (a PersistentVolumeClaim's claim name, that a
//! volume is generic ephemeral, an inline CSI volume's driver; see [`slim_volume`]); the
//! status's phase, conditions and nominated node. Both the protobuf list and the JSON watch
//! produce exactly that set, so an object does not change shape when it is relisted, and
//! 140,000 cached pods cost a fraction of their full size. What stays of the spec is then
//! equal among the pods of one template (a Job's task, a ReplicaSet), bound or not — the
//! fields that tell them apart (`hostname`, `subdomain`, environment, command) are not read
//! by scheduling, and the node is kept beside the spec — so the cache keeps one shared spec
//! for them ([`volcano_framework::pod::SpecInterner`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::api::core::v1 as pb;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pbmeta;
use kube::api::{Api, WatchEvent, WatchParams};
use kube::runtime::watcher::Event;
use kube::Client;
use prost::Message;
use thiserror::Error;

use crate::cache::ClusterCache;

/// The media type of the API server's protobuf encoding.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The 4-byte prefix of every protobuf-encoded object.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Pods decoded per batch handed to the cache.
const BATCH: usize = 2000;

/// Why a list failed.
#[derive(Debug, Error)]
pub enum ListError {
    /// The request failed or the server answered with an error.
    #[error("listing pods: {0}")]
    Kube(#[from] kube::Error),
    /// The server answered with an error status.
    #[error("listing pods: the API server answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: http::StatusCode,
        /// The start of the body.
        body: String,
    },
    /// The response is not a valid pod list.
    #[error("listing pods: the response is not a valid pod list: {0}")]
    Decode(String),
}

// ---------------------------------------------------------------------------------------
// The fields the cache keeps.

fn none_if_empty<T>(v: Option<Vec<T>>) -> Option<Vec<T>> {
    v.filter(|v| !v.is_empty())
}

fn map_none_if_empty<V>(m: Option<BTreeMap<String, V>>) -> Option<BTreeMap<String, V>> {
    m.filter(|m| !m.is_empty())
}

fn slim_container(c: core::Container) -> core::Container {
    core::Container {
        name: c.name,
        image: c.image,
        ports: none_if_empty(c.ports),
        resources: c.resources.map(|r| core::ResourceRequirements {
            limits: map_none_if_empty(r.limits),
            requests: map_none_if_empty(r.requests),
            claims: None,
        }),
        restart_policy: c.restart_policy,
        ..Default::default()
    }
}

/// A volume as the cache keeps it: its name and, for the sources the volume checks read,
/// a PersistentVolumeClaim's claim name, that the volume is generic ephemeral (its claim is
/// named after the pod) and an inline CSI volume's driver. Other volumes are dropped.
fn slim_volume(name: String, claim: Option<String>, ephemeral: bool, csi: Option<String>) -> Option<core::Volume> {
    if claim.is_none() && !ephemeral && csi.is_none() {
        return None;
    }
    Some(core::Volume {
        name,
        persistent_volume_claim: claim
            .map(|claim_name| core::PersistentVolumeClaimVolumeSource { claim_name, read_only: None }),
        ephemeral: ephemeral.then(core::EphemeralVolumeSource::default),
        csi: csi.map(|driver| core::CSIVolumeSource { driver, ..Default::default() }),
        ..Default::default()
    })
}

/// The pod with only the fields the scheduler reads (and writes back): everything else is
/// dropped, and empty lists and maps become absent (as the protobuf encoding cannot tell
/// them apart).
pub fn slim(p: core::Pod) -> core::Pod {
    let m = p.metadata;
    let metadata = meta::ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        generation: m.generation.filter(|g| *g != 0),
        creation_timestamp: m.creation_timestamp,
        deletion_timestamp: m.deletion_timestamp,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: map_none_if_empty(m.labels),
        annotations: map_none_if_empty(m.annotations),
        owner_references: none_if_empty(m.owner_references),
        ..Default::default()
    };
    let spec = p.spec.map(|s| core::PodSpec {
        containers: s.containers.into_iter().map(slim_container).collect(),
        init_containers: none_if_empty(s.init_containers.map(|cs| cs.into_iter().map(slim_container).collect())),
        node_name: s.node_name,
        scheduler_name: s.scheduler_name,
        node_selector: map_none_if_empty(s.node_selector),
        affinity: s.affinity,
        tolerations: none_if_empty(s.tolerations),
        priority: s.priority,
        priority_class_name: s.priority_class_name,
        preemption_policy: s.preemption_policy,
        overhead: map_none_if_empty(s.overhead),
        topology_spread_constraints: none_if_empty(s.topology_spread_constraints),
        scheduling_gates: none_if_empty(s.scheduling_gates),
        resources: s.resources.map(|r| core::ResourceRequirements {
            limits: map_none_if_empty(r.limits),
            requests: map_none_if_empty(r.requests),
            claims: None,
        }),
        termination_grace_period_seconds: s.termination_grace_period_seconds,
        restart_policy: s.restart_policy,
        volumes: none_if_empty(s.volumes.map(|vs| {
            vs.into_iter()
                .filter_map(|v| {
                    let claim = v.persistent_volume_claim.map(|c| c.claim_name);
                    slim_volume(v.name, claim, v.ephemeral.is_some(), v.csi.map(|c| c.driver))
                })
                .collect()
        })),
        ..Default::default()
    });
    let status = p.status.map(|s| core::PodStatus {
        phase: s.phase,
        conditions: none_if_empty(s.conditions),
        nominated_node_name: s.nominated_node_name,
        ..Default::default()
    });
    core::Pod { metadata, spec, status }
}

// ---------------------------------------------------------------------------------------
// Protobuf → the same fields.
//
// Go's protobuf encoding writes every non-pointer field, so an absent string or number
// arrives as "" or 0 where JSON (with `omitempty`) has nothing; those become `None` here.
// Pointer fields (`priority`, `terminationGracePeriodSeconds`, …) keep their value.

fn s(v: Option<String>) -> Option<String> {
    v.filter(|v| !v.is_empty())
}

fn req(v: Option<String>) -> String {
    v.unwrap_or_default()
}

fn strings(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

fn string_map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

fn quantities(
    m: BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>,
) -> Option<BTreeMap<String, Quantity>> {
    (!m.is_empty()).then(|| m.into_iter().map(|(k, q)| (k, Quantity(q.string.unwrap_or_default()))).collect())
}

/// Go's zero `time.Time` in Unix seconds (what a zero time would encode as).
const GO_ZERO_TIME: i64 = -62_135_596_800;

fn time(t: Option<pbmeta::Time>) -> Option<meta::Time> {
    let t = t?;
    let seconds = t.seconds?;
    if seconds == GO_ZERO_TIME {
        return None;
    }
    k8s_openapi::jiff::Timestamp::new(seconds, t.nanos.unwrap_or(0)).ok().map(meta::Time)
}

fn label_selector(l: Option<pbmeta::LabelSelector>) -> Option<meta::LabelSelector> {
    l.map(|l| meta::LabelSelector {
        match_labels: string_map(l.match_labels),
        match_expressions: none_if_empty(Some(
            l.match_expressions
                .into_iter()
                .map(|r| meta::LabelSelectorRequirement {
                    key: req(r.key),
                    operator: req(r.operator),
                    values: strings(r.values),
                })
                .collect(),
        )),
    })
}

fn node_selector_term(t: pb::NodeSelectorTerm) -> core::NodeSelectorTerm {
    let reqs = |v: Vec<pb::NodeSelectorRequirement>| {
        none_if_empty(Some(
            v.into_iter()
                .map(|r| core::NodeSelectorRequirement {
                    key: req(r.key),
                    operator: req(r.operator),
                    values: strings(r.values),
                })
                .collect(),
        ))
    };
    core::NodeSelectorTerm { match_expressions: reqs(t.match_expressions), match_fields: reqs(t.match_fields) }
}

fn pod_affinity_term(t: pb::PodAffinityTerm) -> core::PodAffinityTerm {
    core::PodAffinityTerm {
        label_selector: label_selector(t.label_selector),
        namespaces: strings(t.namespaces),
        topology_key: req(t.topology_key),
        namespace_selector: label_selector(t.namespace_selector),
        match_label_keys: strings(t.match_label_keys),
        mismatch_label_keys: strings(t.mismatch_label_keys),
    }
}

fn weighted_terms(v: Vec<pb::WeightedPodAffinityTerm>) -> Option<Vec<core::WeightedPodAffinityTerm>> {
    none_if_empty(Some(
        v.into_iter()
            .map(|w| core::WeightedPodAffinityTerm {
                weight: w.weight.unwrap_or(0),
                pod_affinity_term: w.pod_affinity_term.map(pod_affinity_term).unwrap_or_default(),
            })
            .collect(),
    ))
}

fn affinity(a: pb::Affinity) -> core::Affinity {
    core::Affinity {
        node_affinity: a.node_affinity.map(|n| core::NodeAffinity {
            required_during_scheduling_ignored_during_execution: n
                .required_during_scheduling_ignored_during_execution
                .map(|r| core::NodeSelector {
                    node_selector_terms: r.node_selector_terms.into_iter().map(node_selector_term).collect(),
                }),
            preferred_during_scheduling_ignored_during_execution: none_if_empty(Some(
                n.preferred_during_scheduling_ignored_during_execution
                    .into_iter()
                    .map(|p| core::PreferredSchedulingTerm {
                        weight: p.weight.unwrap_or(0),
                        preference: p.preference.map(node_selector_term).unwrap_or_default(),
                    })
                    .collect(),
            )),
        }),
        pod_affinity: a.pod_affinity.map(|p| core::PodAffinity {
            required_during_scheduling_ignored_during_execution: none_if_empty(Some(
                p.required_during_scheduling_ignored_during_execution.into_iter().map(pod_affinity_term).collect(),
            )),
            preferred_during_scheduling_ignored_during_execution: weighted_terms(
                p.preferred_during_scheduling_ignored_during_execution,
            ),
        }),
        pod_anti_affinity: a.pod_anti_affinity.map(|p| core::PodAntiAffinity {
            required_during_scheduling_ignored_during_execution: none_if_empty(Some(
                p.required_during_scheduling_ignored_during_execution.into_iter().map(pod_affinity_term).collect(),
            )),
            preferred_during_scheduling_ignored_during_execution: weighted_terms(
                p.preferred_during_scheduling_ignored_during_execution,
            ),
        }),
    }
}

fn resources(r: pb::ResourceRequirements) -> core::ResourceRequirements {
    core::ResourceRequirements { limits: quantities(r.limits), requests: quantities(r.requests), claims: None }
}

fn container(c: pb::Container) -> core::Container {
    core::Container {
        name: req(c.name),
        image: s(c.image),
        ports: none_if_empty(Some(
            c.ports
                .into_iter()
                .map(|p| core::ContainerPort {
                    name: s(p.name),
                    host_port: p.host_port.filter(|v| *v != 0),
                    container_port: p.container_port.unwrap_or(0),
                    protocol: s(p.protocol),
                    host_ip: s(p.host_ip),
                })
                .collect(),
        )),
        resources: c.resources.map(resources),
        restart_policy: c.restart_policy,
        ..Default::default()
    }
}

/// A protobuf-decoded pod as [`slim`] keeps it.
pub fn from_protobuf(p: pb::Pod) -> core::Pod {
    let m = p.metadata.unwrap_or_default();
    let metadata = meta::ObjectMeta {
        name: s(m.name),
        namespace: s(m.namespace),
        uid: s(m.uid),
        resource_version: s(m.resource_version),
        generation: m.generation.filter(|g| *g != 0),
        creation_timestamp: time(m.creation_timestamp),
        deletion_timestamp: time(m.deletion_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: string_map(m.labels),
        annotations: string_map(m.annotations),
        owner_references: none_if_empty(Some(
            m.owner_references
                .into_iter()
                .map(|o| meta::OwnerReference {
                    api_version: req(o.api_version),
                    kind: req(o.kind),
                    name: req(o.name),
                    uid: req(o.uid),
                    controller: o.controller,
                    block_owner_deletion: o.block_owner_deletion,
                })
                .collect(),
        )),
        ..Default::default()
    };
    let spec = p.spec.map(|sp| core::PodSpec {
        containers: sp.containers.into_iter().map(container).collect(),
        init_containers: none_if_empty(Some(sp.init_containers.into_iter().map(container).collect())),
        node_name: s(sp.node_name),
        scheduler_name: s(sp.scheduler_name),
        node_selector: string_map(sp.node_selector),
        affinity: sp.affinity.map(affinity),
        tolerations: none_if_empty(Some(
            sp.tolerations
                .into_iter()
                .map(|t| core::Toleration {
                    key: s(t.key),
                    operator: s(t.operator),
                    value: s(t.value),
                    effect: s(t.effect),
                    toleration_seconds: t.toleration_seconds,
                })
                .collect(),
        )),
        priority: sp.priority,
        priority_class_name: s(sp.priority_class_name),
        preemption_policy: sp.preemption_policy,
        overhead: quantities(sp.overhead),
        topology_spread_constraints: none_if_empty(Some(
            sp.topology_spread_constraints
                .into_iter()
                .map(|t| core::TopologySpreadConstraint {
                    max_skew: t.max_skew.unwrap_or(0),
                    topology_key: req(t.topology_key),
                    when_unsatisfiable: req(t.when_unsatisfiable),
                    label_selector: label_selector(t.label_selector),
                    min_domains: t.min_domains,
                    node_affinity_policy: t.node_affinity_policy,
                    node_taints_policy: t.node_taints_policy,
                    match_label_keys: strings(t.match_label_keys),
                })
                .collect(),
        )),
        scheduling_gates: none_if_empty(Some(
            sp.scheduling_gates.into_iter().map(|g| core::PodSchedulingGate { name: req(g.name) }).collect(),
        )),
        resources: sp.resources.map(resources),
        termination_grace_period_seconds: sp.termination_grace_period_seconds,
        restart_policy: s(sp.restart_policy),
        volumes: none_if_empty(Some(
            sp.volumes
                .into_iter()
                .filter_map(|v| {
                    let source = v.volume_source.unwrap_or_default();
                    let claim = source.persistent_volume_claim.map(|c| req(c.claim_name));
                    let csi = source.csi.map(|c| req(c.driver));
                    slim_volume(req(v.name), claim, source.ephemeral.is_some(), csi)
                })
                .collect(),
        )),
        ..Default::default()
    });
    let status = p.status.map(|st| core::PodStatus {
        phase: s(st.phase),
        conditions: none_if_empty(Some(
            st.conditions
                .into_iter()
                .map(|c| core::PodCondition {
                    type_: req(c.r#type),
                    status: req(c.status),
                    observed_generation: c.observed_generation.filter(|g| *g != 0),
                    last_probe_time: time(c.last_probe_time),
                    last_transition_time: time(c.last_transition_time),
                    reason: s(c.reason),
                    message: s(c.message),
                })
                .collect(),
        )),
        nominated_node_name: s(st.nominated_node_name),
        ..Default::default()
    });
    core::Pod { metadata, spec, status }
}

// ---------------------------------------------------------------------------------------
// Splitting a protobuf list response into its items as the bytes arrive.

/// Reads a varint at the start of `buf`: `Ok(None)` when more bytes are needed.
fn varint(buf: &[u8]) -> Result<Option<(u64, usize)>, String> {
    let mut value = 0u64;
    for (i, b) in buf.iter().enumerate().take(10) {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= 10 {
        Err("a varint longer than 10 bytes".into())
    } else {
        Ok(None)
    }
}

/// The header of one field of a protobuf message at the start of `buf`: (field number,
/// wire type, header length, length of what follows the header: the payload of a
/// length-delimited field, the bytes of a varint or fixed value). `Ok(None)` when more
/// bytes are needed.
fn field(buf: &[u8]) -> Result<Option<(u64, u8, usize, usize)>, String> {
    let Some((key, klen)) = varint(buf)? else { return Ok(None) };
    let (number, wire) = (key >> 3, (key & 7) as u8);
    let rest = &buf[klen..];
    match wire {
        0 => Ok(varint(rest)?.map(|(_, n)| (number, wire, klen, n))),
        1 => Ok(Some((number, wire, klen, 8))),
        5 => Ok(Some((number, wire, klen, 4))),
        2 => Ok(varint(rest)?.map(|(len, n)| (number, wire, klen + n, len as usize))),
        w => Err(format!("unsupported wire type {w} for field {number}")),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Stage {
    Magic,
    Envelope,
    /// Inside `runtime.Unknown.raw`; bytes of it left.
    List(usize),
    Trailer,
}

/// Splits `k8s\0` + `runtime.Unknown{raw: List{metadata, items…}}` into the list's
/// metadata and its items, fed with the body's chunks in order.
#[derive(Debug)]
pub struct ListSplitter {
    buf: BytesMut,
    stage: Stage,
    /// The list's `metadata` (a `ListMeta`), once seen.
    pub list_meta: Option<pbmeta::ListMeta>,
}

impl Default for ListSplitter {
    fn default() -> Self {
        ListSplitter { buf: BytesMut::new(), stage: Stage::Magic, list_meta: None }
    }
}

impl ListSplitter {
    /// Takes the next chunk; returns the encoded items it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, String> {
        self.buf.extend_from_slice(chunk);
        let mut items = Vec::new();
        loop {
            match self.stage {
                Stage::Magic => {
                    if self.buf.len() < MAGIC.len() {
                        return Ok(items);
                    }
                    if &self.buf[..4] != MAGIC {
                        return Err("the response does not start with the protobuf prefix".into());
                    }
                    self.buf.advance(4);
                    self.stage = Stage::Envelope;
                }
                Stage::Envelope | Stage::Trailer => {
                    let Some((number, wire, header, len)) = field(&self.buf)? else { return Ok(items) };
                    if self.stage == Stage::Envelope && number == 2 && wire == 2 {
                        self.buf.advance(header);
                        self.stage = Stage::List(len);
                        continue;
                    }
                    if self.buf.len() < header + len {
                        return Ok(items);
                    }
                    self.buf.advance(header + len);
                }
                Stage::List(0) => self.stage = Stage::Trailer,
                Stage::List(left) => {
                    let Some((number, wire, header, len)) = field(&self.buf)? else { return Ok(items) };
                    let total = header + len;
                    if total > left {
                        return Err(format!("field {number} runs past the end of the list"));
                    }
                    if self.buf.len() < total {
                        return Ok(items);
                    }
                    let mut whole = self.buf.split_to(total).freeze();
                    whole.advance(header);
                    match (number, wire) {
                        (1, 2) => {
                            self.list_meta =
                                Some(pbmeta::ListMeta::decode(whole).map_err(|e| format!("list metadata: {e}"))?)
                        }
                        (2, 2) => items.push(whole),
                        _ => {}
                    }
                    self.stage = Stage::List(left - total);
                }
            }
        }
    }

    /// Checks that the whole response was read.
    pub fn finish(&self) -> Result<(), String> {
        match self.stage {
            Stage::Trailer if self.buf.is_empty() => Ok(()),
            Stage::List(0) if self.buf.is_empty() => Ok(()),
            _ => Err(format!("the response ended early ({:?}, {} bytes unread)", self.stage, self.buf.len())),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The list and the reflector.

/// Lists every pod, protobuf-encoded and from the API server's watch cache, handing the
/// decoded pods to `sink` in batches (on a blocking thread, while the rest of the response
/// is still arriving). Returns the list's resourceVersion. A server that answers in JSON
/// is read as JSON.
pub async fn list<F>(client: &Client, sink: F) -> Result<String, ListError>
where
    F: FnMut(Vec<core::Pod>) + Send + 'static,
{
    let request = http::Request::get("/api/v1/pods?resourceVersion=0")
        .header(http::header::ACCEPT, format!("{PROTOBUF}, application/json"))
        .body(kube::client::Body::empty())
        .map_err(|e| ListError::Decode(e.to_string()))?;
    let response = client.send(request).await?;
    let status = response.status();
    let protobuf = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(PROTOBUF));
    let mut body = response.into_body();
    if !status.is_success() {
        let bytes = body.collect().await?.to_bytes();
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(500)]).into_owned();
        return Err(ListError::Status { status, body: text });
    }
    if !protobuf {
        let bytes = body.collect().await?.to_bytes();
        let list: k8s_openapi::List<core::Pod> =
            serde_json::from_slice(&bytes).map_err(|e| ListError::Decode(e.to_string()))?;
        let rv = list.metadata.resource_version.unwrap_or_default();
        let mut sink = sink;
        sink(list.items.into_iter().map(slim).collect());
        return Ok(rv);
    }

    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Bytes>>(16);
    let decoder = tokio::task::spawn_blocking(move || -> Result<(), String> {
        let mut sink = sink;
        while let Some(batch) = rx.blocking_recv() {
            let mut pods = Vec::with_capacity(batch.len());
            for item in batch {
                pods.push(from_protobuf(pb::Pod::decode(item).map_err(|e| format!("a pod: {e}"))?));
            }
            sink(pods);
        }
        Ok(())
    });
    let mut splitter = ListSplitter::default();
    let mut pending: Vec<Bytes> = Vec::with_capacity(BATCH);
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame?;
            let Ok(data) = frame.into_data() else { continue };
            pending.extend(splitter.push(&data).map_err(ListError::Decode)?);
            if pending.len() >= BATCH {
                let batch = std::mem::replace(&mut pending, Vec::with_capacity(BATCH));
                // The decoder only stops early on an error, which the join below reports.
                if tx.send(batch).await.is_err() {
                    break;
                }
            }
        }
        splitter.finish().map_err(ListError::Decode)?;
        if !pending.is_empty() {
            let _ = tx.send(std::mem::take(&mut pending)).await;
        }
        Ok::<_, ListError>(())
    };
    // A bounded channel: the decoder keeps up or the reader waits.
    let read_result = read.await;
    drop(tx);
    let decoded = decoder.await.map_err(|e| ListError::Decode(e.to_string()))?;
    read_result?;
    decoded.map_err(ListError::Decode)?;
    Ok(splitter.list_meta.and_then(|m| m.resource_version).unwrap_or_default())
}

enum Kind {
    Added,
    Other,
}

/// Observes `volcano_task_scheduling_latency_milliseconds{stage="Watched"}` for the pods the
/// watch adds that wait for one of these schedulers (no node yet): the pod's creation to the
/// moment the scheduler saw it, as Volcano's cache does.
#[derive(Clone)]
pub struct WatchedStage {
    /// Where the stage goes.
    pub metrics: volcano_metrics::SchedulerMetrics,
    /// The `spec.schedulerName`s this scheduler serves.
    pub scheduler_names: Vec<String>,
}

impl WatchedStage {
    fn observe(&self, p: &core::Pod, added: bool) {
        if !added {
            return;
        }
        let Some(spec) = &p.spec else { return };
        let ours = spec.scheduler_name.as_deref().is_some_and(|n| self.scheduler_names.iter().any(|s| s == n));
        if !ours || spec.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
            return;
        }
        if let Some(c) = &p.metadata.creation_timestamp {
            let ms = k8s_openapi::jiff::Timestamp::now().as_millisecond() - c.0.as_millisecond();
            self.metrics.observe_task_stage(volcano_metrics::TaskStage::Watched, ms as f64);
        }
    }
}

/// Lists the pods into the cache (a whole relist: the cache swaps the new set in when it is
/// complete), then watches from the list's resourceVersion, re-watching from the last
/// version seen when a watch ends or fails, and relisting only when the server says the
/// version is too old (`410 Gone`), after a random wait of up to
/// [`volcano_kube::RELIST_JITTER_MAX`] so that replicas do not relist together. Failures
/// wait with a [`volcano_kube::WatchBackoff`], which a watch that starts resets.
pub fn reflect(
    client: Client,
    cache: Arc<Mutex<ClusterCache>>,
    watched: Option<WatchedStage>,
) -> tokio::task::JoinHandle<()> {
    use kube::runtime::utils::Backoff;
    tokio::spawn(async move {
        let api: Api<core::Pod> = Api::all(client.clone());
        let mut backoff = volcano_kube::WatchBackoff::new();
        loop {
            cache.lock().expect("cache lock").apply_pod(Event::Init);
            let sink_cache = cache.clone();
            let listed = list(&client, move |pods| {
                let mut c = sink_cache.lock().expect("cache lock");
                for p in pods {
                    c.apply_pod(Event::InitApply(p));
                }
            })
            .await;
            let mut version = match listed {
                Ok(rv) => {
                    cache.lock().expect("cache lock").apply_pod(Event::InitDone);
                    tracing::debug!(resource_version = %rv, "pods listed");
                    rv
                }
                Err(e) => {
                    tracing::warn!("listing pods: {e}");
                    tokio::time::sleep(next_wait(&mut backoff)).await;
                    continue;
                }
            };
            // Watch until the version is too old (then relist).
            'watch: loop {
                let params = WatchParams::default().timeout(290);
                let stream = match api.watch(&params, &version).await {
                    Ok(s) => s,
                    Err(kube::Error::Api(s)) if s.code == 410 => break 'watch,
                    Err(e) => {
                        tracing::warn!("watching pods: {e}");
                        tokio::time::sleep(next_wait(&mut backoff)).await;
                        continue 'watch;
                    }
                };
                backoff.reset();
                tracing::debug!(resource_version = %version, "watching pods");
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    let event = match event {
                        Ok(ev) => ev,
                        Err(e) => {
                            tracing::warn!("watching pods: {e}");
                            tokio::time::sleep(next_wait(&mut backoff)).await;
                            continue 'watch;
                        }
                    };
                    let event_kind = if matches!(event, WatchEvent::Added(_)) { Kind::Added } else { Kind::Other };
                    match event {
                        WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                            version = p.metadata.resource_version.clone().unwrap_or(version);
                            if let Some(w) = &watched {
                                w.observe(&p, matches!(event_kind, Kind::Added));
                            }
                            cache.lock().expect("cache lock").apply_pod(Event::Apply(slim(p)));
                        }
                        WatchEvent::Deleted(p) => {
                            version = p.metadata.resource_version.clone().unwrap_or(version);
                            cache.lock().expect("cache lock").apply_pod(Event::Delete(slim(p)));
                        }
                        WatchEvent::Bookmark(b) => version = b.metadata.resource_version,
                        WatchEvent::Error(e) if e.code == 410 => break 'watch,
                        WatchEvent::Error(e) => {
                            tracing::warn!("watching pods: {}", e.message);
                            tokio::time::sleep(next_wait(&mut backoff)).await;
                            continue 'watch;
                        }
                    }
                }
            }
            backoff.reset();
            let jitter = backoff.relist_jitter();
            tracing::info!(resource_version = %version, ?jitter, "the pods' resource version is too old (410): relisting");
            tokio::time::sleep(jitter).await;
        }
    })
}

/// The next wait of a watch's back-off.
fn next_wait(backoff: &mut volcano_kube::WatchBackoff) -> Duration {
    backoff.next().unwrap_or(volcano_kube::WATCH_BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity as PbQuantity;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use serde_json::json;

    fn q(v: &str) -> PbQuantity {
        PbQuantity { string: Some(v.into()) }
    }

    /// A pod as the API server encodes it in protobuf: every field written, empty ones
    /// included, plus fields the cache does not keep.
    fn pb_pod(name: &str) -> pb::Pod {
        let selector = pbmeta::LabelSelector {
            match_labels: [("app".to_string(), "ps".to_string())].into(),
            match_expressions: vec![pbmeta::LabelSelectorRequirement {
                key: Some("tier".into()),
                operator: Some("In".into()),
                values: vec!["a".into(), "b".into()],
            }],
        };
        let term = pb::PodAffinityTerm {
            label_selector: Some(selector.clone()),
            namespaces: vec![],
            topology_key: Some("kubernetes.io/hostname".into()),
            namespace_selector: None,
            match_label_keys: vec![],
            mismatch_label_keys: vec![],
        };
        let container = pb::Container {
            name: Some("main".into()),
            image: Some("trainer:1".into()),
            ports: vec![pb::ContainerPort {
                name: Some(String::new()),
                host_port: Some(0),
                container_port: Some(2222),
                protocol: Some("TCP".into()),
                host_ip: Some(String::new()),
            }],
            env: vec![pb::EnvVar { name: Some("A".into()), value: Some("1".into()), value_from: None }],
            resources: Some(pb::ResourceRequirements {
                limits: [("nvidia.com/gpu".to_string(), q("8"))].into(),
                requests: [("cpu".to_string(), q("4")), ("memory".to_string(), q("16Gi"))].into(),
                claims: vec![],
            }),
            termination_message_path: Some("/dev/termination-log".into()),
            ..Default::default()
        };
        pb::Pod {
            metadata: Some(pbmeta::ObjectMeta {
                name: Some(name.into()),
                generate_name: Some(String::new()),
                namespace: Some("ml".into()),
                self_link: Some(String::new()),
                uid: Some(format!("uid-{name}")),
                resource_version: Some("42".into()),
                generation: Some(0),
                creation_timestamp: Some(pbmeta::Time { seconds: Some(1_700_000_000), nanos: Some(0) }),
                deletion_timestamp: None,
                deletion_grace_period_seconds: None,
                labels: [("app".to_string(), "ps".to_string())].into(),
                annotations: [("scheduling.k8s.io/group-name".to_string(), "pg".to_string())].into(),
                owner_references: vec![pbmeta::OwnerReference {
                    kind: Some("Job".into()),
                    name: Some("j".into()),
                    uid: Some("j-uid".into()),
                    api_version: Some("batch.volcano.sh/v1alpha1".into()),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }],
                finalizers: vec![],
                managed_fields: vec![pbmeta::ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..Default::default()
                }],
            }),
            spec: Some(pb::PodSpec {
                containers: vec![container],
                restart_policy: Some("Never".into()),
                termination_grace_period_seconds: Some(30),
                dns_policy: Some("ClusterFirst".into()),
                node_selector: [("zone".to_string(), "a".to_string())].into(),
                service_account_name: Some("default".into()),
                node_name: Some(String::new()),
                hostname: Some(String::new()),
                subdomain: Some(String::new()),
                affinity: Some(pb::Affinity {
                    node_affinity: Some(pb::NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(pb::NodeSelector {
                            node_selector_terms: vec![pb::NodeSelectorTerm {
                                match_expressions: vec![pb::NodeSelectorRequirement {
                                    key: Some("gpu".into()),
                                    operator: Some("Exists".into()),
                                    values: vec![],
                                }],
                                match_fields: vec![],
                            }],
                        }),
                        preferred_during_scheduling_ignored_during_execution: vec![pb::PreferredSchedulingTerm {
                            weight: Some(10),
                            preference: Some(pb::NodeSelectorTerm {
                                match_expressions: vec![],
                                match_fields: vec![pb::NodeSelectorRequirement {
                                    key: Some("metadata.name".into()),
                                    operator: Some("In".into()),
                                    values: vec!["n1".into()],
                                }],
                            }),
                        }],
                    }),
                    pod_affinity: None,
                    pod_anti_affinity: Some(pb::PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: vec![term.clone()],
                        preferred_during_scheduling_ignored_during_execution: vec![pb::WeightedPodAffinityTerm {
                            weight: Some(5),
                            pod_affinity_term: Some(term),
                        }],
                    }),
                }),
                scheduler_name: Some("volcano-rs".into()),
                tolerations: vec![pb::Toleration {
                    key: Some("nvidia.com/gpu".into()),
                    operator: Some("Exists".into()),
                    value: Some(String::new()),
                    effect: Some("NoSchedule".into()),
                    toleration_seconds: None,
                }],
                priority_class_name: Some("high".into()),
                priority: Some(0),
                preemption_policy: Some("Never".into()),
                overhead: [("cpu".to_string(), q("100m"))].into(),
                topology_spread_constraints: vec![pb::TopologySpreadConstraint {
                    max_skew: Some(1),
                    topology_key: Some("zone".into()),
                    when_unsatisfiable: Some("DoNotSchedule".into()),
                    label_selector: Some(selector),
                    min_domains: Some(2),
                    node_affinity_policy: None,
                    node_taints_policy: Some("Honor".into()),
                    match_label_keys: vec!["pod-template-hash".into()],
                }],
                scheduling_gates: vec![pb::PodSchedulingGate { name: Some("wait".into()) }],
                enable_service_links: Some(true),
                volumes: vec![
                    pb::Volume {
                        name: Some("data".into()),
                        volume_source: Some(pb::VolumeSource {
                            persistent_volume_claim: Some(pb::PersistentVolumeClaimVolumeSource {
                                claim_name: Some("data-0".into()),
                                read_only: Some(false),
                            }),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("tmp".into()),
                        volume_source: Some(pb::VolumeSource {
                            empty_dir: Some(pb::EmptyDirVolumeSource::default()),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("scratch".into()),
                        volume_source: Some(pb::VolumeSource {
                            ephemeral: Some(pb::EphemeralVolumeSource { volume_claim_template: None }),
                            ..Default::default()
                        }),
                    },
                    pb::Volume {
                        name: Some("inline".into()),
                        volume_source: Some(pb::VolumeSource {
                            csi: Some(pb::CSIVolumeSource {
                                driver: Some("csi.example.com".into()),
                                read_only: Some(false),
                                fs_type: Some(String::new()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                    },
                ],
                ..Default::default()
            }),
            status: Some(pb::PodStatus {
                phase: Some("Pending".into()),
                conditions: vec![pb::PodCondition {
                    r#type: Some("PodScheduled".into()),
                    observed_generation: Some(0),
                    status: Some("False".into()),
                    last_probe_time: Some(pbmeta::Time { seconds: None, nanos: None }),
                    last_transition_time: Some(pbmeta::Time { seconds: Some(1_700_000_100), nanos: Some(0) }),
                    reason: Some("Unschedulable".into()),
                    message: Some("0/3 nodes are available".into()),
                }],
                message: Some(String::new()),
                reason: Some(String::new()),
                nominated_node_name: Some("n2".into()),
                host_ip: Some(String::new()),
                qos_class: Some("Burstable".into()),
                ..Default::default()
            }),
        }
    }

    /// The same pod as the API server encodes it in JSON (empty fields omitted, extra
    /// fields present).
    fn json_pod(name: &str) -> serde_json::Value {
        let selector = json!({"matchLabels": {"app": "ps"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        let term = json!({"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"});
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": "42",
                "creationTimestamp": "2023-11-14T22:13:20Z",
                "labels": {"app": "ps"}, "annotations": {"scheduling.k8s.io/group-name": "pg"},
                "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j", "uid": "j-uid", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "kubectl"}]
            },
            "spec": {
                "containers": [{
                    "name": "main", "image": "trainer:1",
                    "ports": [{"containerPort": 2222, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "4", "memory": "16Gi"}},
                    "terminationMessagePath": "/dev/termination-log"
                }],
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                "nodeSelector": {"zone": "a"}, "serviceAccountName": "default",
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}}]
                    },
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [term],
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}]
                    }
                },
                "schedulerName": "volcano-rs",
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "priorityClassName": "high", "priority": 0, "preemptionPolicy": "Never",
                "overhead": {"cpu": "100m"},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector, "minDomains": 2, "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["pod-template-hash"]}],
                "schedulingGates": [{"name": "wait"}],
                "enableServiceLinks": true,
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                    {"name": "tmp", "emptyDir": {}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                    {"name": "inline", "csi": {"driver": "csi.example.com", "readOnly": false}}
                ]
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "lastProbeTime": null, "lastTransitionTime": "2023-11-14T22:15:00Z", "reason": "Unschedulable", "message": "0/3 nodes are available"}],
                "nominatedNodeName": "n2",
                "qosClass": "Burstable"
            }
        })
    }

    #[test]
    fn protobuf_and_json_give_the_same_slim_pod() {
        let from_json = slim(serde_json::from_value(json_pod("p")).unwrap());
        let from_pb = from_protobuf(pb_pod("p"));
        assert_eq!(serde_json::to_value(&from_pb).unwrap(), serde_json::to_value(&from_json).unwrap());
        assert_eq!(from_pb, from_json);
        // What is dropped: managed fields, env, QoS class, the service account.
        let v = serde_json::to_value(&from_pb).unwrap();
        assert!(v["metadata"].get("managedFields").is_none());
        assert!(v["spec"]["containers"][0].get("env").is_none());
        assert!(v["spec"].get("serviceAccountName").is_none());
        assert!(v["status"].get("qosClass").is_none());
        // What is kept, with empty protobuf values absent.
        assert_eq!(v["spec"]["containers"][0]["ports"], json!([{"containerPort": 2222, "protocol": "TCP"}]));
        assert_eq!(v["spec"]["priority"], json!(0));
        assert!(v["spec"].get("nodeName").is_none());
        assert!(v["status"]["conditions"][0].get("lastProbeTime").is_none());
        // Volumes: only what the volume checks read.
        assert_eq!(
            v["spec"]["volumes"],
            json!([
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                {"name": "scratch", "ephemeral": {}},
                {"name": "inline", "csi": {"driver": "csi.example.com"}}
            ])
        );
    }

    #[test]
    fn pods_of_one_template_slim_to_one_spec() {
        // A Job's pods differ in their hostname (the `svc` plugin), their environment
        // (`VC_TASK_INDEX`) and their node: the slim specs do not, but for the node.
        let member = |name: &str, node: Option<&str>| {
            let mut v = json_pod(name);
            v["spec"]["hostname"] = json!(name);
            v["spec"]["subdomain"] = json!("job");
            v["spec"]["containers"][0]["env"] = json!([{"name": "VC_TASK_INDEX", "value": name}]);
            if let Some(node) = node {
                v["spec"]["nodeName"] = json!(node);
            }
            let mut p = slim(serde_json::from_value(v).unwrap());
            let node = p.spec.as_mut().unwrap().node_name.take();
            (p.spec.unwrap(), node)
        };
        let (a, none) = member("j-0", None);
        let (b, node) = member("j-1", Some("n1"));
        assert_eq!(a, b);
        assert_eq!((none, node.as_deref()), (None, Some("n1")));
        assert_eq!((a.hostname, a.subdomain), (None, None));
    }

    fn encoded_list(pods: &[pb::Pod]) -> Vec<u8> {
        let list = pb::PodList {
            metadata: Some(pbmeta::ListMeta { resource_version: Some("777".into()), ..Default::default() }),
            items: pods.to_vec(),
        };
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some("v1".into()), kind: Some("PodList".into()) }),
            raw: Some(list.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    #[test]
    fn the_splitter_finds_every_item_whatever_the_chunking() {
        let pods: Vec<pb::Pod> = (0..5).map(|i| pb_pod(&format!("p{i}"))).collect();
        let bytes = encoded_list(&pods);
        for chunk in [1, 2, 3, 7, 64, 1000, bytes.len()] {
            let mut splitter = ListSplitter::default();
            let mut items = Vec::new();
            for c in bytes.chunks(chunk) {
                items.extend(splitter.push(c).unwrap());
            }
            splitter.finish().unwrap();
            let decoded: Vec<pb::Pod> = items.into_iter().map(|b| pb::Pod::decode(b).unwrap()).collect();
            assert_eq!(decoded, pods, "chunks of {chunk}");
            assert_eq!(splitter.list_meta.as_ref().and_then(|m| m.resource_version.as_deref()), Some("777"));
        }
    }

    #[test]
    fn the_splitter_rejects_what_is_not_a_protobuf_list() {
        let mut s = ListSplitter::default();
        assert!(s.push(b"{\"kind\":\"PodList\"}").is_err());
        // A response cut short is an error, not a shorter list.
        let bytes = encoded_list(&[pb_pod("a"), pb_pod("b")]);
        let mut s = ListSplitter::default();
        let items = s.push(&bytes[..bytes.len() - 10]).unwrap();
        assert_eq!(items.len(), 1);
        assert!(s.finish().is_err());
        // An empty list is fine.
        let mut s = ListSplitter::default();
        assert!(s.push(&encoded_list(&[])).unwrap().is_empty());
        s.finish().unwrap();
    }
}
