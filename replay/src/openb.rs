//! `volcano-rs replay openb`: Alibaba's GPU cluster trace (`cluster-trace-gpu-v2023`, the FGD
//! paper's) under the paper's protocol (`../shared/traces/README.md`), scheduled by the real
//! core: the trace's nodes and pods become Kubernetes objects (HAMi vGPU cards on the nodes,
//! `volcano.sh/vgpu-*` requests on the pods, GPU models as node labels and required node
//! affinity), and one session of the `allocate` action places the pods one by one in their
//! shuffled order, through `predicates`, `deviceshare` and the placement plugin under test.
//!
//! Protocol: the 1,213 GPU nodes; the trace's pods in file order, then pods drawn uniformly
//! with replacement until the next would push the GPU request past 1.3 × the cluster's GPUs;
//! the whole list shuffled (one seed per run); ties between nodes go to the first of a
//! random order of the nodes drawn per seed (as the paper's simulator names its nodes);
//! one pass, no departures, no retries; after
//! every pod, `arrived` and `alloc` (percent of the cluster's milli-GPUs asked so far, and
//! placed so far); the value at integer `x` is the mean of `alloc` over the pods whose
//! `arrived` rounds to `x`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    Affinity, Container, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec,
    NodeStatus, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use volcano_api::crd::{PodGroup, PodGroupSpec, Queue, QueueSpec};
use volcano_api::names::DEFAULT_SCHEDULER_NAME;
use volcano_framework::device::{GPU_MODEL_LABEL, VGPU_CORES, VGPU_MEMORY_PERCENTAGE, VGPU_NUMBER, VGPU_REGISTER};
use volcano_framework::{run_cycle, ClusterObjects, CycleContext, Effect, NoObserver, Profile, Snapshot};

/// Milli-units of one GPU.
const MILLI: u64 = 1000;
/// The protocol's inflation: GPU requests up to 1.3 × the cluster's GPUs.
pub const TUNE: f64 = 1.3;
/// The highest `arrived` percentage of the curve.
pub const MAX_ARRIVED: usize = 130;
/// The namespace of the replay's pods.
pub const NAMESPACE: &str = "openb";
/// vGPU slots per card: a pod asks at least 1 % of a card, so 100 pods at most share one.
const SLOTS: u32 = 100;

/// The placement policies: the plugin names, and `fgd` (the `fragmentation` plugin scoring
/// as the FGD paper, `fragmentation.mode: fgd`).
pub const POLICIES: [&str; 6] = ["random", "dotprod", "gpu-packing", "bestfit", "fgd", "fragmentation"];

/// An error reading or replaying a trace.
#[derive(Debug, thiserror::Error)]
pub enum OpenbError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A row is malformed.
    #[error("{path}:{line}: {message}")]
    Row {
        /// The file.
        path: PathBuf,
        /// The line (1 is the header).
        line: u64,
        /// What is wrong: the column and what was expected.
        message: String,
    },
    /// The scheduler configuration is invalid.
    #[error("scheduler configuration: {0}")]
    Config(String),
    /// The objects made from the trace were refused.
    #[error("{0}")]
    Snapshot(String),
}

/// A GPU node of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceNode {
    /// `sn`.
    pub name: String,
    /// `cpu_milli`.
    pub cpu_milli: i64,
    /// `memory_mib`.
    pub memory_mib: i64,
    /// `gpu`: cards.
    pub gpus: u32,
    /// `model`.
    pub model: String,
}

/// A pod of the trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TracePod {
    /// `name`.
    pub name: String,
    /// `cpu_milli`.
    pub cpu_milli: i64,
    /// `memory_mib`.
    pub memory_mib: i64,
    /// `num_gpu`: cards.
    pub num_gpu: u32,
    /// `gpu_milli`: milli-GPU per card.
    pub gpu_milli: u32,
    /// `gpu_spec`: the allowed models (empty: any).
    pub gpu_spec: Vec<String>,
}

impl TracePod {
    /// Σ milli-GPU asked.
    pub fn gpu_request(&self) -> u64 {
        self.num_gpu as u64 * self.gpu_milli as u64
    }
}

/// A trace: its GPU nodes and its pods in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The name (`default`, `gpushare40`, …).
    pub name: String,
    /// Nodes.
    pub nodes: Vec<TraceNode>,
    /// Pods.
    pub pods: Vec<TracePod>,
}

impl Trace {
    /// Reads trace `name` from an openb folder (`openb_node_list_gpu_node.csv` and
    /// `openb_pod_list_<name>.csv`).
    pub fn read(dir: &Path, name: &str) -> Result<Trace, OpenbError> {
        let nodes = read_nodes(&dir.join("openb_node_list_gpu_node.csv"))?;
        let pods = read_pods(&dir.join(format!("openb_pod_list_{name}.csv")))?;
        Ok(Trace { name: name.to_string(), nodes, pods })
    }

    /// Σ cards of the nodes.
    pub fn total_gpus(&self) -> u64 {
        self.nodes.iter().map(|n| n.gpus as u64).sum()
    }
}

/// The trace names of an openb folder, sorted.
pub fn trace_names(dir: &Path) -> Result<Vec<String>, OpenbError> {
    let read = std::fs::read_dir(dir).map_err(|source| OpenbError::Read { path: dir.to_path_buf(), source })?;
    let mut names: Vec<String> = read
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let f = e.file_name().to_string_lossy().into_owned();
            f.strip_prefix("openb_pod_list_").and_then(|r| r.strip_suffix(".csv")).map(str::to_string)
        })
        .collect();
    names.sort();
    Ok(names)
}

/// Reads a CSV file into rows of named columns, checking the header has `required`.
/// A CSV record: its line and its fields by column name.
type Row = (u64, BTreeMap<String, String>);

fn rows(path: &Path, required: &[&str]) -> Result<Vec<Row>, OpenbError> {
    let mut reader =
        csv::ReaderBuilder::new().trim(csv::Trim::All).from_path(path).map_err(|e| match e.into_kind() {
            csv::ErrorKind::Io(source) => OpenbError::Read { path: path.to_path_buf(), source },
            other => OpenbError::Row { path: path.to_path_buf(), line: 1, message: format!("{other:?}") },
        })?;
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| OpenbError::Row { path: path.to_path_buf(), line: 1, message: e.to_string() })?
        .iter()
        .map(str::to_string)
        .collect();
    for want in required {
        if !header.iter().any(|h| h == want) {
            return Err(OpenbError::Row {
                path: path.to_path_buf(),
                line: 1,
                message: format!("the header has no column {want:?} (expected {})", required.join(",")),
            });
        }
    }
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| OpenbError::Row {
            path: path.to_path_buf(),
            line: e.position().map_or(0, |p| p.line()),
            message: e.to_string(),
        })?;
        let line = record.position().map_or(0, |p| p.line());
        let map = header.iter().cloned().zip(record.iter().map(str::to_string)).collect();
        out.push((line, map));
    }
    Ok(out)
}

fn field<T: std::str::FromStr>(
    path: &Path,
    line: u64,
    row: &BTreeMap<String, String>,
    column: &str,
    expected: &str,
) -> Result<T, OpenbError> {
    let text = row.get(column).map(String::as_str).unwrap_or_default();
    text.parse().map_err(|_| OpenbError::Row {
        path: path.to_path_buf(),
        line,
        message: format!("column {column}: {text:?} is not {expected}"),
    })
}

/// Reads a node list (`sn, cpu_milli, memory_mib, gpu, model`).
pub fn read_nodes(path: &Path) -> Result<Vec<TraceNode>, OpenbError> {
    rows(path, &["sn", "cpu_milli", "memory_mib", "gpu", "model"])?
        .into_iter()
        .map(|(line, row)| {
            let f = |c: &str| row.get(c).cloned().unwrap_or_default();
            let name = f("sn");
            if name.is_empty() {
                return Err(OpenbError::Row { path: path.to_path_buf(), line, message: "column sn is empty".into() });
            }
            Ok(TraceNode {
                name,
                cpu_milli: field(path, line, &row, "cpu_milli", "a whole number of millicores")?,
                memory_mib: field(path, line, &row, "memory_mib", "a whole number of MiB")?,
                gpus: field(path, line, &row, "gpu", "a whole number of GPUs")?,
                model: f("model"),
            })
        })
        .collect()
}

/// Reads a pod list (`name, cpu_milli, memory_mib, num_gpu, gpu_milli[, gpu_spec, …]`).
pub fn read_pods(path: &Path) -> Result<Vec<TracePod>, OpenbError> {
    rows(path, &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])?
        .into_iter()
        .map(|(line, row)| {
            let num_gpu: u32 = field(path, line, &row, "num_gpu", "a whole number of GPUs (0–8)")?;
            let gpu_milli: u32 = field(path, line, &row, "gpu_milli", "a whole number of milli-GPUs (0–1000)")?;
            let bad = |message: String| OpenbError::Row { path: path.to_path_buf(), line, message };
            if gpu_milli > 1000 {
                return Err(bad(format!("column gpu_milli: {gpu_milli} is above 1000")));
            }
            if num_gpu > 1 && gpu_milli != 1000 {
                return Err(bad(format!(
                    "column gpu_milli: {gpu_milli} with num_gpu {num_gpu} (a fraction needs num_gpu 1)"
                )));
            }
            if !gpu_milli.is_multiple_of(10) {
                return Err(bad(format!("column gpu_milli: {gpu_milli} is not a multiple of 10 (1 % of a card)")));
            }
            let spec = row.get("gpu_spec").map(String::as_str).unwrap_or_default();
            Ok(TracePod {
                name: row.get("name").cloned().unwrap_or_default(),
                cpu_milli: field(path, line, &row, "cpu_milli", "a whole number of millicores")?,
                memory_mib: field(path, line, &row, "memory_mib", "a whole number of MiB")?,
                num_gpu,
                gpu_milli: if num_gpu == 0 { 0 } else { gpu_milli },
                gpu_spec: spec.split('|').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect(),
            })
        })
        .collect()
}

/// The protocol's workload: every pod of the trace in file order, then pods drawn uniformly
/// with replacement and appended until the next draw would push the total GPU request past
/// `tune` × the cluster's GPUs; then the whole list shuffled. Indices into `pods`.
pub fn inflate(pods: &[TracePod], total_gpus: u64, tune: f64, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let limit = tune * (total_gpus * MILLI) as f64;
    let mut order: Vec<usize> = (0..pods.len()).collect();
    let mut total: u64 = pods.iter().map(TracePod::gpu_request).sum();
    if !pods.is_empty() {
        loop {
            let i = rng.gen_range(0..pods.len());
            let next = total + pods[i].gpu_request();
            if next as f64 > limit {
                break;
            }
            total = next;
            order.push(i);
        }
    }
    order.shuffle(&mut rng);
    order
}

/// The names the trace's nodes take in a run of `seed`: each prefixed with its rank in a
/// random order of the nodes (`0412-openb-node-0000`), so that the scheduler's tie-break —
/// the first node by name — goes to a node drawn per seed and kept for the whole run. The
/// paper's simulator names its nodes so (a random permutation of 4-digit prefixes once the
/// nodes are sorted by name), and its scheduler breaks ties by the smallest name.
pub fn node_names(nodes: &[TraceNode], seed: u64) -> Vec<String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    // A stream of its own: the workload of a seed does not depend on the nodes.
    rng.set_stream(1);
    let mut rank: Vec<usize> = (0..nodes.len()).collect();
    rank.shuffle(&mut rng);
    let width = nodes.len().saturating_sub(1).to_string().len().max(4);
    nodes.iter().zip(rank).map(|(n, r)| format!("{r:0width$}-{}", n.name)).collect()
}

/// The allocation curve: `curve[x]` is the mean of `alloc` over the pods whose `arrived`
/// rounds to `x` (`None` where no pod does), both in percent of `capacity_milli`.
/// `requests[i]` is pod i's milli-GPU request in arrival order, `placed[i]` whether it was
/// placed.
pub fn curve(requests: &[u64], placed: &[bool], capacity_milli: u64) -> Vec<Option<f64>> {
    let mut sums = vec![(0.0f64, 0u32); MAX_ARRIVED + 1];
    let (mut arrived, mut alloc) = (0u64, 0u64);
    for (&r, &ok) in requests.iter().zip(placed) {
        arrived += r;
        if ok {
            alloc += r;
        }
        let x = (arrived as f64 / capacity_milli as f64 * 100.0).round() as usize;
        if let Some(s) = sums.get_mut(x) {
            s.0 += alloc as f64 / capacity_milli as f64 * 100.0;
            s.1 += 1;
        }
    }
    sums.into_iter().map(|(sum, n)| (n > 0).then(|| sum / n as f64)).collect()
}

/// The scheduler configuration of a policy: `allocate` with `predicates`, `deviceshare`
/// (vGPU) and the policy's plugin. Ties go to the first node by name (the scheduler's rule),
/// and the names follow a random order of the nodes per seed ([`node_names`]).
pub fn policy_config(policy: &str, seed: u64) -> String {
    let mut plugins = String::from(
        "  - name: predicates\n  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n",
    );
    match policy {
        "random" => plugins.push_str(&format!("  - name: random\n    arguments:\n      random.seed: {seed}\n")),
        "fgd" => plugins.push_str("  - name: fragmentation\n    arguments:\n      fragmentation.mode: fgd\n"),
        other => plugins.push_str(&format!("  - name: {other}\n")),
    }
    format!("actions: \"allocate\"\ntiers:\n- plugins:\n{plugins}")
}

fn quantity(s: impl ToString) -> Quantity {
    Quantity(s.to_string())
}

/// Nominal card memory by model, MiB: multiples of 100 MiB, so that a percentage of a card
/// is a whole number of MiB and the cards' use is exact.
fn card_memory_mib(model: &str) -> u32 {
    match model {
        "V100M32" => 32_000,
        "A10" => 24_000,
        _ => 16_000,
    }
}

/// The trace's node as a Kubernetes node: cpu, memory, HAMi vGPU cards (registered by
/// annotation, `volcano.sh/vgpu-number` slots) and the model label.
pub fn node_object(n: &TraceNode, name: &str) -> Node {
    let mut alloc = BTreeMap::new();
    alloc.insert("cpu".to_string(), quantity(format!("{}m", n.cpu_milli)));
    alloc.insert("memory".to_string(), quantity(format!("{}Mi", n.memory_mib)));
    alloc.insert("pods".to_string(), quantity(1000));
    let mut annotations = BTreeMap::new();
    if n.gpus > 0 {
        alloc.insert(VGPU_NUMBER.to_string(), quantity(n.gpus * SLOTS));
        let memory = card_memory_mib(&n.model);
        let cards: String =
            (0..n.gpus).map(|i| format!("{name}-gpu{i},{SLOTS},{memory},{},true,hami-core:", n.model)).collect();
        annotations.insert(VGPU_REGISTER.to_string(), cards);
    }
    let labels = [(GPU_MODEL_LABEL.to_string(), n.model.clone())].into_iter().collect();
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus { allocatable: Some(alloc.clone()), capacity: Some(alloc), ..Default::default() }),
    }
}

/// The `i`-th arriving pod as a Kubernetes pod of volcano-rs in its own PodGroup: cpu and
/// memory requests, `volcano.sh/vgpu-number` cards with `volcano.sh/vgpu-cores` and
/// `volcano.sh/vgpu-memory-percentage` each (the milli-GPU share in percent), and a
/// required node affinity on the model label for a `gpu_spec`. Created `i` milliseconds
/// after the first, so the arrival order is the job order.
pub fn pod_objects(p: &TracePod, i: usize) -> (Pod, PodGroup) {
    let name = format!("p{i:06}-{}", p.name);
    let created =
        Time(k8s_openapi::jiff::Timestamp::from_millisecond(1_600_000_000_000 + i as i64).unwrap_or_default());
    let mut requests = BTreeMap::new();
    requests.insert("cpu".to_string(), quantity(format!("{}m", p.cpu_milli)));
    requests.insert("memory".to_string(), quantity(format!("{}Mi", p.memory_mib)));
    // Extended resources are asked as limits (what HAMi reads), equal to the requests.
    let mut limits = BTreeMap::new();
    if p.num_gpu > 0 {
        limits.insert(VGPU_NUMBER.to_string(), quantity(p.num_gpu));
        limits.insert(VGPU_CORES.to_string(), quantity(p.gpu_milli / 10));
        limits.insert(VGPU_MEMORY_PERCENTAGE.to_string(), quantity(p.gpu_milli / 10));
        requests.extend(limits.clone());
    }
    let affinity = (!p.gpu_spec.is_empty()).then(|| Affinity {
        node_affinity: Some(NodeAffinity {
            required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: GPU_MODEL_LABEL.to_string(),
                        operator: "In".to_string(),
                        values: Some(p.gpu_spec.clone()),
                    }]),
                    ..Default::default()
                }],
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let annotations = [(volcano_api::crd::GROUP_NAME_ANNOTATION.to_string(), name.clone())].into_iter().collect();
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-{name}")),
            creation_timestamp: Some(created.clone()),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(DEFAULT_SCHEDULER_NAME.to_string()),
            containers: vec![Container {
                name: "main".to_string(),
                resources: Some(ResourceRequirements {
                    requests: Some(requests),
                    limits: (!limits.is_empty()).then_some(limits),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            affinity,
            ..Default::default()
        }),
        status: None,
    };
    let pg = PodGroup {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-pg-{name}")),
            creation_timestamp: Some(created),
            ..Default::default()
        },
        spec: PodGroupSpec { min_member: 1, queue: Some("default".to_string()), ..Default::default() },
        status: None,
    };
    (pod, pg)
}

/// The cluster objects of a run: the trace's nodes named `node_names` (see [`node_names`]),
/// the queue `default`, and the pods of `order` (indices into `trace.pods`) with their
/// PodGroups, in arrival order.
pub fn objects(trace: &Trace, node_names: &[String], order: &[usize]) -> ClusterObjects {
    let nodes = trace.nodes.iter().zip(node_names).map(|(n, name)| Arc::new(node_object(n, name))).collect();
    let mut objects = ClusterObjects { nodes, ..Default::default() };
    objects.queues.push(Arc::new(Queue {
        metadata: ObjectMeta {
            name: Some("default".into()),
            uid: Some("uid-queue-default".into()),
            ..Default::default()
        },
        spec: QueueSpec { weight: Some(1), ..Default::default() },
        status: None,
    }));
    for (i, &p) in order.iter().enumerate() {
        let (pod, pg) = pod_objects(&trace.pods[p], i);
        objects.pods.push(Arc::new(pod.into()));
        objects.pod_groups.push(Arc::new(pg));
    }
    objects
}

/// One run: which pods of `order` were placed, and on which node.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    /// The seed.
    pub seed: u64,
    /// Per arriving pod, its milli-GPU request.
    pub requests: Vec<u64>,
    /// Per arriving pod, its node by the trace's name (`None`: it fit nowhere).
    pub nodes: Vec<Option<Arc<str>>>,
    /// The curve ([`curve`]).
    pub curve: Vec<Option<f64>>,
}

impl RunResult {
    /// The allocation ratio at arrived = 100 %.
    pub fn alloc_at_100(&self) -> Option<f64> {
        self.curve.get(100).copied().flatten()
    }
}

/// Replays `trace` once: the inflated, shuffled workload of `seed`, on the nodes named in
/// the order of `seed` ([`node_names`]), placed by one cycle of `profile`.
pub fn run(trace: &Trace, profile: &Profile, seed: u64) -> Result<RunResult, OpenbError> {
    run_with(trace, profile, seed, false)
}

/// [`run`], with the cards of a pod chosen at random within its node when `random_cards`
/// (the paper's Random baseline).
pub fn run_with(trace: &Trace, profile: &Profile, seed: u64, random_cards: bool) -> Result<RunResult, OpenbError> {
    let order = inflate(&trace.pods, trace.total_gpus(), TUNE, seed);
    let node_names = node_names(&trace.nodes, seed);
    let objects = objects(trace, &node_names, &order);
    let snap = Snapshot::build(&objects, &[DEFAULT_SCHEDULER_NAME]).map_err(|e| OpenbError::Snapshot(e.to_string()))?;
    let options = volcano_framework::SessionOptions {
        parallelism: std::thread::available_parallelism().map_or(1, |n| n.get()),
        card_seed: random_cards.then_some(seed),
        ..Default::default()
    };
    let cx = CycleContext { cycle: 1, now_ms: 1_600_000_100_000, options };
    let outcome = run_cycle(snap, profile, &cx, &mut NoObserver);
    // Nodes by the trace's names.
    let trace_name: std::collections::HashMap<&str, Arc<str>> =
        node_names.iter().zip(&trace.nodes).map(|(run, n)| (run.as_str(), Arc::from(n.name.as_str()))).collect();
    let mut bound: std::collections::HashMap<&str, Arc<str>> = std::collections::HashMap::new();
    for e in &outcome.effects {
        if let Effect::Bind { pod, node, .. } = e {
            bound.insert(pod.name(), trace_name.get(&**node).cloned().unwrap_or_else(|| node.clone()));
        }
    }
    let names: Vec<String> = objects.pods.iter().map(|p| p.metadata.name.clone().unwrap_or_default()).collect();
    let nodes: Vec<Option<Arc<str>>> = names.iter().map(|n| bound.get(n.as_str()).cloned()).collect();
    let requests: Vec<u64> = order.iter().map(|&i| trace.pods[i].gpu_request()).collect();
    let placed: Vec<bool> = nodes.iter().map(Option::is_some).collect();
    let curve = curve(&requests, &placed, trace.total_gpus() * MILLI);
    Ok(RunResult { seed, requests, nodes, curve })
}

/// The profile of a policy (see [`policy_config`]).
pub fn policy_profile(policy: &str, seed: u64) -> Result<Profile, OpenbError> {
    volcano_builtin::profile_from_text(&policy_config(policy, seed)).map_err(|e| OpenbError::Config(e.to_string()))
}

/// Mean and sample standard deviation.
pub fn mean_sd(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    if values.len() < 2 {
        return (mean, 0.0);
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    (mean, var.sqrt())
}

/// The objects of a run as multi-document YAML (what `volcano-rs simulate` reads): the
/// queue, the nodes, then each pod's PodGroup and pod in arrival order.
pub fn manifests(objects: &ClusterObjects) -> Result<String, serde_json::Error> {
    let mut docs: Vec<serde_json::Value> = Vec::new();
    for q in &objects.queues {
        docs.push(serde_json::to_value(&**q)?);
    }
    for n in &objects.nodes {
        docs.push(serde_json::to_value(&**n)?);
    }
    for (pg, pod) in objects.pod_groups.iter().zip(&objects.pods) {
        docs.push(serde_json::to_value(&**pg)?);
        docs.push(serde_json::to_value(pod.to_pod())?);
    }
    let mut out = String::new();
    for d in docs {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&d).map_err(serde::ser::Error::custom)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
