//! The `fragmentation` plugin: places a pod where it adds the least expected GPU
//! fragmentation — the FGD paper's idea (Weng et al., USENIX ATC'23), made usable in a
//! cluster. Design and measurements: docs/plugins/fragmentation.md.
//!
//! **Expected fragmentation.** The *workload* is the distribution of GPU requests the
//! cluster sees: the pods of the snapshot that ask for GPUs (pending and running), grouped
//! by request (cpu, cards, milli-cards per card) and node constraints, weighted by their
//! pods (`fragmentation.weighting`), the most common ones that make up
//! `fragmentation.popularity` percent of the weight (all of it). For a node and one request of the
//! workload, the free GPU that request could not use is fragmented: all of the node's free
//! milli-cards when the request cannot land there (its node selector or affinity rules the
//! node out, not enough cpu, not enough cards with room), else the free milli-cards of the
//! cards too full for it. A node's fragmentation is the weighted sum over the workload. A pod
//! scores `100 × sigmoid(Δ / 1000)` on a node, where Δ is how much placing it there (on the
//! cards the device layer would give it) lowers the node's fragmentation.
//!
//! **What it changes from FGD.** The workload is the cluster's own, read at every session,
//! so it follows the mix as it changes, not a trace given in advance; requests of several
//! cards and node constraints (GPU models through node labels) are part of it; and scores
//! rounded to `fragmentation.resolution` points (1) tie-break by best
//! fit (the node the pod leaves with the least cpu and GPU free) instead of at random, so
//! equal choices fill nodes instead of spreading. The score reads only the node and the
//! task's request, so the node index keeps it per shape. `fragmentation.mode: fgd` scores
//! as the paper's simulator does, for comparison: the 95 % most common requests, pods
//! without GPUs among them (all of a node's free GPU fragmented for them), scores truncated
//! to integers, and a fraction on the card of the highest score.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::PodSpec;
use serde::Deserialize;
use smallvec::SmallVec;
use volcano_api::conf::{args, PluginOption};
use volcano_framework::{
    parse_args, ArgsError, Hooks, Incremental, NodeId, Plugin, PluginBuilder, SessionContext, Snapshot, TaskId,
    TaskStatus,
};

use crate::matching::required_node_affinity_matches;
use crate::placement::{NodeFree, Request, MAX_CPU, MAX_GPU};

#[cfg(test)]
mod tests;

/// Configuration name.
pub const NAME: &str = "fragmentation";

/// The `fragmentation` arguments.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// `fragmentation.weight` (1).
    #[serde(rename = "fragmentation.weight", default, deserialize_with = "args::float")]
    pub weight: Option<f64>,
    /// `fragmentation.popularity` (100): the percentage of the GPU pods whose requests make
    /// the workload, the most common requests first.
    #[serde(rename = "fragmentation.popularity", default, deserialize_with = "args::float")]
    pub popularity: Option<f64>,
    /// `fragmentation.mode` (`expected`): `fgd` scores as the FGD paper (a sigmoid of the
    /// change, rounded to an integer; no best-fit tie-break).
    #[serde(rename = "fragmentation.mode", default, deserialize_with = "args::string")]
    pub mode: Option<String>,
    /// `fragmentation.resolution` (mode's): scores are rounded down to a multiple of this
    /// many points (1 in `fgd` mode), and ties are broken by `fragmentation.tieBreak`.
    #[serde(rename = "fragmentation.resolution", default, deserialize_with = "args::float")]
    pub resolution: Option<f64>,
    /// `fragmentation.tieBreak` (mode's): `none` (the first node by name), `bestfit` (the
    /// node the pod leaves with the least cpu and GPU free) or `packing` (the node whose
    /// cards are the most used after the pod).
    #[serde(rename = "fragmentation.tieBreak", default, deserialize_with = "args::string")]
    pub tie_break: Option<String>,
    /// `fragmentation.weighting` (`count`): how requests weigh
    /// in the workload: `count` (by pods), `cards` (a pod of `k` whole cards counts `1 + k`)
    /// or `gpu` (by the milli-cards they ask).
    #[serde(rename = "fragmentation.weighting", default, deserialize_with = "args::string")]
    pub weighting: Option<String>,
    /// `fragmentation.cardChoice` (mode's): which card of a node takes a fraction of one
    /// card: `fragmentation` (the card that leaves the node the least fragmented; the
    /// `expected` mode's), `tightest` (the fullest that fits, the device layer's) or
    /// `score` (the card of the highest rounded score, the lowest index on a tie; the `fgd`
    /// mode's, as the paper's simulator does).
    #[serde(rename = "fragmentation.cardChoice", default, deserialize_with = "args::string")]
    pub card_choice: Option<String>,
    /// `fragmentation.cpuPods` (mode's): whether pods without GPUs are part of the workload,
    /// all of a node's free GPU fragmented for them (FGD's typical pods include them: the
    /// `fgd` mode's `true`; the `expected` mode's `false`).
    #[serde(rename = "fragmentation.cpuPods", default, deserialize_with = "args::bool")]
    pub cpu_pods: Option<bool>,
}

/// Which card of a node takes a fraction of one card.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardChoice {
    /// The card that leaves the node the least fragmented (the fullest of those on ties).
    Fragmentation,
    /// The fullest card that fits (the device layer's choice).
    Tightest,
    /// The card with the highest score once rounded to the resolution, the lowest index on
    /// a tie (the paper's simulator).
    Score,
}

/// How ties of equal (rounded) scores are broken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TieBreak {
    /// The first node by name.
    None,
    /// The node the pod leaves with the least cpu and GPU free.
    BestFit,
    /// The node whose cards are the most used after the pod.
    Packing,
}

/// The plugin's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// `fragmentation.weight`.
    pub weight: f64,
    /// `fragmentation.popularity`.
    pub popularity: f64,
    /// `fragmentation.mode`.
    pub mode: Mode,
    /// `fragmentation.resolution`; 0 keeps scores whole.
    pub resolution: f64,
    /// `fragmentation.tieBreak`.
    pub tie_break: TieBreak,
    /// `fragmentation.weighting`.
    pub weighting: Weighting,
    /// `fragmentation.cardChoice`.
    pub card_choice: CardChoice,
    /// `fragmentation.cpuPods`.
    pub cpu_pods: bool,
}

/// How a request weighs in the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weighting {
    /// By pods.
    Count,
    /// By pods, a pod of `k` whole cards counting `1 + k` (FGD's `gpuResWeight` 1).
    Cards,
    /// By the milli-cards asked.
    Gpu,
}

/// The default weighting of the `expected` mode.
pub const DEFAULT_WEIGHTING: Weighting = Weighting::Count;

/// How scores are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// volcano-rs's: the whole change, best fit on ties.
    Expected,
    /// The paper's.
    Fgd,
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight.unwrap_or(1.0);
    if weight.is_nan() || weight < 0.0 {
        return Err(ArgsError(format!("argument \"fragmentation.weight\": {weight} is negative")));
    }
    let mode = match args.mode.as_deref().map(str::trim) {
        None | Some("") | Some("expected") => Mode::Expected,
        Some("fgd") => Mode::Fgd,
        Some(other) => {
            return Err(ArgsError(format!("argument \"fragmentation.mode\": {other:?} is not \"expected\" or \"fgd\"")))
        }
    };
    let popularity = args.popularity.unwrap_or(match mode {
        Mode::Fgd => FGD_POPULARITY,
        Mode::Expected => DEFAULT_POPULARITY,
    });
    if !(popularity > 0.0 && popularity <= 100.0) {
        return Err(ArgsError(format!("argument \"fragmentation.popularity\": {popularity} is not in (0, 100]")));
    }
    let (default_resolution, default_tie) = match mode {
        Mode::Fgd => (1.0, TieBreak::None),
        Mode::Expected => (DEFAULT_RESOLUTION, DEFAULT_TIE_BREAK),
    };
    let resolution = args.resolution.unwrap_or(default_resolution);
    if resolution.is_nan() || resolution < 0.0 {
        return Err(ArgsError(format!("argument \"fragmentation.resolution\": {resolution} is negative")));
    }
    let tie_break = match args.tie_break.as_deref().map(str::trim) {
        None | Some("") => default_tie,
        Some("none") => TieBreak::None,
        Some("bestfit") => TieBreak::BestFit,
        Some("packing") => TieBreak::Packing,
        Some(other) => {
            return Err(ArgsError(format!(
                "argument \"fragmentation.tieBreak\": {other:?} is not \"none\", \"bestfit\" or \"packing\""
            )))
        }
    };
    let weighting = match args.weighting.as_deref().map(str::trim) {
        None | Some("") if mode == Mode::Fgd => Weighting::Count,
        None | Some("") => DEFAULT_WEIGHTING,
        Some("count") => Weighting::Count,
        Some("cards") => Weighting::Cards,
        Some("gpu") => Weighting::Gpu,
        Some(other) => {
            return Err(ArgsError(format!(
                "argument \"fragmentation.weighting\": {other:?} is not \"count\", \"cards\" or \"gpu\""
            )))
        }
    };
    let card_choice = match args.card_choice.as_deref().map(str::trim) {
        None | Some("") if mode == Mode::Fgd => CardChoice::Score,
        None | Some("") => CardChoice::Fragmentation,
        Some("fragmentation") => CardChoice::Fragmentation,
        Some("tightest") => CardChoice::Tightest,
        Some("score") => CardChoice::Score,
        Some(other) => {
            return Err(ArgsError(format!(
                "argument \"fragmentation.cardChoice\": {other:?} is not \"fragmentation\", \"tightest\" or \"score\""
            )))
        }
    };
    let cpu_pods = args.cpu_pods.unwrap_or(mode == Mode::Fgd);
    let settings = Settings { weight, popularity, mode, resolution, tie_break, weighting, card_choice, cpu_pods };
    Ok(Arc::new(move || Box::new(Fragmentation::new(settings)) as Box<dyn Plugin>))
}

/// The default `fragmentation.popularity` of the `expected` mode: the whole workload.
pub const DEFAULT_POPULARITY: f64 = 100.0;
/// The default `fragmentation.popularity` of the `fgd` mode: the paper's typical pods.
pub const FGD_POPULARITY: f64 = 95.0;
/// The default resolution of the `expected` mode, points.
pub const DEFAULT_RESOLUTION: f64 = 1.0;
/// The default tie-break of the `expected` mode.
pub const DEFAULT_TIE_BREAK: TieBreak = TieBreak::BestFit;

/// One request of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Typical {
    /// The request.
    pub req: Request,
    /// Its frequency (the workload's frequencies sum to 1).
    pub p: f64,
    /// A task with it (for its node constraints).
    rep: TaskId,
    /// Its node constraints (node selector and node affinity), `None` without.
    constraints: Option<String>,
}

/// A node's state as fragmentation reads it: its label class, free cpu, free cards sorted.
type StateKey = (u32, i64, SmallVec<[u32; 8]>);

/// The plugin for one session.
#[derive(Debug)]
pub struct Fragmentation {
    settings: Settings,
    workload: Vec<Typical>,
    /// Per node, its access class: which requests of the workload its labels allow.
    class_of: Vec<u32>,
    /// Per class, per request of the workload: allowed.
    classes: Vec<Vec<bool>>,
    /// Fragmentation by (class, free cpu, free cards sorted).
    memo: Mutex<HashMap<StateKey, f64>>,
}

impl Fragmentation {
    /// A plugin with these settings and no workload yet.
    pub fn new(settings: Settings) -> Self {
        Fragmentation {
            settings,
            workload: Vec::new(),
            class_of: Vec::new(),
            classes: Vec::new(),
            memo: Mutex::new(HashMap::new()),
        }
    }

    /// The workload read at session open.
    pub fn workload(&self) -> &[Typical] {
        &self.workload
    }

    /// The node's expected fragmentation (milli-cards) with these free resources.
    pub fn fragmentation(&self, node: NodeId, free: &NodeFree) -> f64 {
        let class = self.class_of.get(node.idx()).copied().unwrap_or(0);
        let mut sorted = free.gpus.clone();
        sorted.sort_unstable();
        let key = (class, free.cpu as i64, sorted);
        if let Some(v) = self.memo.lock().expect("memo lock").get(&key) {
            return *v;
        }
        let allowed = self.classes.get(class as usize);
        let v = frag_of(&self.workload, |i| allowed.is_none_or(|a| a[i]), free);
        self.memo.lock().expect("memo lock").insert(key, v);
        v
    }

    /// Where the request goes on the node — its cards, the node after, and the node's
    /// fragmentation after; `None` when it does not fit. A fraction of one card goes to the
    /// card `fragmentation.cardChoice` says (the one that leaves the node the least
    /// fragmented, the fullest of those, the lowest index on a tie; or the one of the
    /// highest rounded score, the lowest index on a tie; or the fullest); whole cards go
    /// where the device layer puts them.
    pub fn placement(
        &self,
        node: NodeId,
        free: &NodeFree,
        req: &Request,
    ) -> Option<(SmallVec<[u16; 8]>, NodeFree, f64)> {
        if req.is_fraction() && self.settings.card_choice == CardChoice::Score {
            let before = self.fragmentation(node, free);
            let mut best: Option<(f64, u16, NodeFree, f64)> = None;
            for (i, &g) in free.gpus.iter().enumerate() {
                if g < req.milli.max(1) {
                    continue;
                }
                let after = free.after(req.cpu, req.milli, &[i as u16]);
                let frag = self.fragmentation(node, &after);
                let s = self.rounded(before - frag);
                if best.as_ref().is_none_or(|(b, _, _, _)| s > *b) {
                    best = Some((s, i as u16, after, frag));
                }
            }
            return best.map(|(_, i, after, frag)| (SmallVec::from_slice(&[i]), after, frag));
        }
        if req.is_fraction() && self.settings.card_choice == CardChoice::Fragmentation {
            let mut best: Option<(f64, u32, u16, NodeFree)> = None;
            for (i, &g) in free.gpus.iter().enumerate() {
                if g < req.milli.max(1) {
                    continue;
                }
                let after = free.after(req.cpu, req.milli, &[i as u16]);
                let frag = self.fragmentation(node, &after);
                let better = best.as_ref().is_none_or(|(f, room, _, _)| frag < *f || (frag == *f && g < *room));
                if better {
                    best = Some((frag, g, i as u16, after));
                }
            }
            return best.map(|(frag, _, i, after)| (SmallVec::from_slice(&[i]), after, frag));
        }
        let cards = if req.count == 0 { SmallVec::new() } else { free.choose(req.count, req.milli)? };
        let after = free.after(req.cpu, req.milli, &cards);
        let frag = self.fragmentation(node, &after);
        Some((cards, after, frag))
    }

    /// The score of placing the task on the node, 0–100: `100 × sigmoid(Δ / 1000)` where Δ
    /// is how much the node's fragmentation goes down (milli-cards); the paper's mode
    /// truncates it to an integer, volcano-rs's keeps it whole and takes a fraction of a
    /// point off for what the pod leaves free (best fit on ties).
    pub fn score(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        let n = snap.node(node);
        let req = Request::of(snap.task(task), n);
        let free = NodeFree::of(n);
        let Some((_, after, frag_after)) = self.placement(node, &free, &req) else { return 0.0 };
        let delta = self.fragmentation(node, &free) - frag_after;
        let s = sigmoid(delta / 1000.0) * 100.0;
        let res = self.settings.resolution;
        if res <= 0.0 {
            return s;
        }
        // Rounded down to the resolution; the tie-break adds less than one step.
        let tie = match self.settings.tie_break {
            TieBreak::None => 0.0,
            TieBreak::BestFit => {
                let left = (after.cpu / MAX_CPU + after.gpu_total() as f64 / MAX_GPU) / 2.0;
                1.0 - left.clamp(0.0, 1.0)
            }
            TieBreak::Packing => {
                let cards = after.gpus.len().max(1) as f64;
                1.0 - after.gpu_total() as f64 / (cards * 1000.0)
            }
        };
        (s / res).floor() * res + tie.clamp(0.0, 1.0) * res * 0.999
    }
}

impl Fragmentation {
    /// `100 × sigmoid(delta / 1000)` rounded down to the resolution (whole without one).
    fn rounded(&self, delta: f64) -> f64 {
        let s = sigmoid(delta / 1000.0) * 100.0;
        let res = self.settings.resolution;
        if res <= 0.0 {
            s
        } else {
            (s / res).floor() * res
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Expected fragmentation of a node with `free` resources under `workload`; `allowed(i)`
/// says whether the node's labels allow request `i`.
pub fn frag_of(workload: &[Typical], allowed: impl Fn(usize) -> bool, free: &NodeFree) -> f64 {
    let total = free.gpu_total() as f64;
    if total == 0.0 {
        return 0.0;
    }
    let mut sum = 0.0;
    for (i, t) in workload.iter().enumerate() {
        // A request without GPUs can use none of the free GPU.
        let unusable = if t.req.count == 0 || !allowed(i) || free.cpu < t.req.cpu {
            total
        } else {
            let room = free.gpus.iter().filter(|&&g| g >= t.req.milli.max(1)).count() as u32;
            if room < t.req.count {
                total
            } else {
                free.gpus.iter().filter(|&&g| g < t.req.milli).sum::<u32>() as f64
            }
        };
        sum += t.p * unusable;
    }
    sum
}

/// The node label keys these pods' node selectors and required node affinities read, or
/// `None` when one of them reads node names (`matchFields`).
fn read_labels<'a>(specs: &[&'a PodSpec]) -> Option<Vec<&'a str>> {
    let mut read: Vec<&str> = Vec::new();
    for s in specs {
        read.extend(s.node_selector.iter().flatten().map(|(k, _)| k.as_str()));
        let required = s
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| na.required_during_scheduling_ignored_during_execution.as_ref());
        for term in required.iter().flat_map(|r| &r.node_selector_terms) {
            if term.match_fields.as_ref().is_some_and(|f| !f.is_empty()) {
                return None;
            }
            read.extend(term.match_expressions.iter().flatten().map(|e| e.key.as_str()));
        }
    }
    read.sort_unstable();
    read.dedup();
    Some(read)
}

/// The workload of a snapshot: the GPU requests of its pending and running pods (and the
/// requests without GPUs when `cpu_pods`), most common first, cut at `popularity` percent
/// of the pods, frequencies summing to 1.
pub fn workload_of(snap: &Snapshot, popularity: f64, weighting: Weighting, cpu_pods: bool) -> Vec<Typical> {
    let Some(any_node) = snap.nodes.iter().next() else { return Vec::new() };
    // Tasks of one shape have equal requests and node constraints: count shapes first.
    let mut by_shape: HashMap<u32, (TaskId, u64)> = HashMap::new();
    for (i, t) in snap.tasks.iter().enumerate() {
        if !matches!(
            t.status,
            TaskStatus::Pending | TaskStatus::Allocated | TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running
        ) {
            continue;
        }
        let e = by_shape.entry(t.shape).or_insert((TaskId(i as u32), 0));
        e.1 += 1;
    }
    // Then requests with the same node constraints.
    let mut groups: Vec<(Request, Option<String>, TaskId, u64)> = Vec::new();
    let mut shapes: Vec<(u32, (TaskId, u64))> = by_shape.into_iter().collect();
    shapes.sort_by_key(|(shape, _)| *shape);
    for (_, (rep, n)) in shapes {
        let task = snap.task(rep);
        let node = task.node.map_or(any_node, |n| snap.node(n));
        let mut req = Request::of(task, node);
        if req.count == 0 || req.milli == 0 {
            if !cpu_pods {
                continue;
            }
            req.count = 0;
            req.milli = 0;
        }
        let constraints = task.pod.spec.as_ref().and_then(|s| {
            let aff = s.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
            (s.node_selector.is_some() || aff.is_some()).then(|| format!("{:?}{:?}", s.node_selector, aff))
        });
        match groups.iter_mut().find(|(r, c, _, _)| *r == req && *c == constraints) {
            Some(g) => g.3 += n,
            None => groups.push((req, constraints, rep, n)),
        }
    }
    for g in &mut groups {
        match weighting {
            Weighting::Count => {}
            Weighting::Cards if g.0.milli >= 1000 => g.3 *= 1 + g.0.count as u64,
            Weighting::Cards => {}
            Weighting::Gpu => g.3 *= g.0.gpu_total() as u64,
        }
    }
    let total: u64 = groups.iter().map(|g| g.3).sum();
    if total == 0 {
        return Vec::new();
    }
    // Most common first; equal counts by request, then by the representative's order.
    groups.sort_by(|a, b| {
        b.3.cmp(&a.3)
            .then(a.0.count.cmp(&b.0.count))
            .then(a.0.milli.cmp(&b.0.milli))
            .then(a.0.cpu.total_cmp(&b.0.cpu))
            .then(a.2.cmp(&b.2))
    });
    let wanted = popularity / 100.0 * total as f64;
    let mut kept = 0u64;
    let mut out = Vec::new();
    for (req, constraints, rep, n) in groups {
        if kept as f64 >= wanted {
            break;
        }
        kept += n;
        out.push(Typical { req, p: n as f64, rep, constraints });
    }
    for t in &mut out {
        t.p /= kept as f64;
    }
    out
}

impl Plugin for Fragmentation {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        if self.settings.weight > 0.0 {
            Hooks::NODE_ORDER | Hooks::DEVICE_CHOICE
        } else {
            Hooks::empty()
        }
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        if self.settings.weight <= 0.0 {
            return;
        }
        self.workload = workload_of(snap, self.settings.popularity, self.settings.weighting, self.settings.cpu_pods);
        // The distinct constraints of the workload, and the label keys they read.
        let mut keys: Vec<&str> = Vec::new();
        let mut specs: Vec<&PodSpec> = Vec::new();
        let mut key_of: Vec<Option<usize>> = Vec::with_capacity(self.workload.len());
        for t in &self.workload {
            let (Some(key), Some(spec)) = (t.constraints.as_deref(), snap.task(t.rep).pod.spec.as_ref()) else {
                key_of.push(None);
                continue;
            };
            let k = keys.iter().position(|&x| x == key).unwrap_or_else(|| {
                keys.push(key);
                specs.push(spec);
                keys.len() - 1
            });
            key_of.push(Some(k));
        }
        let read = read_labels(&specs);
        // Nodes alike in the labels the constraints read are matched once (all of them
        // when a constraint reads node names); a node's class is the set of constraints
        // that allow it.
        // Classes are interned sets: the class of a projection is found once.
        let mut alike: HashMap<Vec<Option<&str>>, u32> = HashMap::new();
        let mut interned: HashMap<Vec<bool>, u32> = HashMap::new();
        let mut sets: Vec<Vec<bool>> = Vec::new();
        self.class_of = snap
            .nodes
            .iter()
            .map(|node| {
                let labels = node.labels();
                let projection: Option<Vec<Option<&str>>> =
                    read.as_ref().map(|read| read.iter().map(|k| labels.get(*k).map(String::as_str)).collect());
                if let Some(&class) = projection.as_ref().and_then(|p| alike.get(p)) {
                    return class;
                }
                let set: Vec<bool> =
                    specs.iter().map(|s| required_node_affinity_matches(s, labels, &node.name)).collect();
                let class = *interned.entry(set).or_insert_with_key(|set| {
                    sets.push(set.clone());
                    sets.len() as u32 - 1
                });
                if let Some(p) = projection {
                    alike.insert(p, class);
                }
                class
            })
            .collect();
        self.classes = sets.iter().map(|set| key_of.iter().map(|k| k.is_none_or(|k| set[k])).collect()).collect();
    }

    fn node_order(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> f64 {
        self.score(snap, task, node) * self.settings.weight
    }

    fn choose_devices(&self, snap: &Snapshot, task: TaskId, node: NodeId) -> Option<SmallVec<[u16; 8]>> {
        if self.settings.card_choice == CardChoice::Tightest {
            return None;
        }
        let n = snap.node(node);
        let req = Request::of(snap.task(task), n);
        if !req.is_fraction() {
            return None;
        }
        self.placement(node, &NodeFree::of(n), &req).map(|(cards, _, _)| cards)
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Fragmentation {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn shape_local(&self, _snap: &Snapshot, _task: TaskId) -> bool {
        // The score reads the task's requests, the node's free cpu and cards and labels,
        // and the workload, which is fixed for the session.
        true
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        true
    }

    fn evaluation_key(&self, _snap: &Snapshot, _task: TaskId) -> Option<u64> {
        // The score reads only the task's requests (see `shape_local`).
        Some(0)
    }
}
