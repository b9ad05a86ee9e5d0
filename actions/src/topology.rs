//! Placement of jobs with a network topology constraint (`spec.networkTopology` of their
//! PodGroup): the whole job within one HyperNode; and of sub-groups with one (their policy's
//! `networkTopology`), each within one HyperNode of its own (see `allocate`).
//!
//! As Volcano's allocate does for hard-mode jobs, the search goes tier by tier from the
//! lowest: the candidates of a tier are the HyperNodes of that tier (at most the allowed
//! tier, within the HyperNode the job's placed pods already allow) whose free resources
//! can hold the job's minimum; the job is placed on each candidate's nodes alone, and of
//! the candidates where it becomes ready (or pipelined), the one with the highest
//! [`volcano_framework::Plugin::hyper_node_order`] score wins, then the one holding most of
//! the job's pods, then the first by name. Scores are read before the job is placed, so
//! trying the candidates in that order and keeping the first that works gives the same
//! answer as trying them all. Soft mode searches the same way up to the virtual top
//! HyperNode (the whole cluster), so a soft job lands in the lowest tier that can hold it.

use std::cmp::Ordering;

use volcano_api::crd::NetworkTopologySpec;
use volcano_framework::topology::{HyperNodeId, Topology};
use volcano_framework::{JobId, NodeChoice, NodeId, Resource, Session, TaskId, TaskStatus};

/// A job's network topology constraint, resolved against the cluster's HyperNodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constraint {
    /// `hard` (else `soft`).
    pub hard: bool,
    /// The highest tier the job may span (the virtual top's tier for soft mode).
    pub highest_tier: u32,
}

/// The job's constraint: `None` when its PodGroup asks for none; an error naming the field
/// when it names a tier the cluster does not have.
pub fn constraint(spec: Option<&NetworkTopologySpec>, topo: &Topology) -> Result<Option<Constraint>, String> {
    let Some(nt) = spec else { return Ok(None) };
    let top = topo.get(topo.top()).tier;
    let hard = nt.mode.as_deref().is_none_or(|m| m == "hard");
    let tier = match (nt.highest_tier_allowed, nt.highest_tier_name.as_deref()) {
        (Some(t), _) => Some(u32::try_from(t).unwrap_or(0)),
        (None, Some(name)) => match topo.tier_named(name) {
            Some(t) => Some(t),
            None => {
                let known: Vec<String> = topo
                    .tiers()
                    .iter()
                    .filter_map(|t| topo.of_tier(*t).first().and_then(|h| topo.get(*h).tier_name.clone()))
                    .collect();
                return Err(format!(
                    "spec.networkTopology.highestTierName {name:?} names no tier of the cluster's HyperNodes (tier names: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ));
            }
        },
        (None, None) => None,
    };
    Ok(Some(match (hard, tier) {
        (true, Some(t)) => Constraint { hard: true, highest_tier: t },
        // Hard without a tier, and soft: anywhere, lowest tier first.
        _ => Constraint { hard: false, highest_tier: top },
    }))
}

/// Which of a job's pods a search is for: the whole job, or one of its groups (a sub-group,
/// or with `None` the pods in no sub-group; see [`volcano_framework::model::subgroup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pods {
    /// Every pod of the job.
    Job,
    /// The pods of one group.
    Group(Option<u32>),
}

impl Pods {
    /// Whether the task is one of these pods.
    pub fn has(self, task: &volcano_framework::TaskInfo) -> bool {
        match self {
            Pods::Job => true,
            Pods::Group(g) => task.sub_group == g,
        }
    }

    /// The sub-group the plugins score HyperNodes for ([`Session::hyper_node_score`]).
    fn sub_group(self) -> Option<u32> {
        match self {
            Pods::Group(g) => g,
            Pods::Job => None,
        }
    }
}

/// The nodes of these pods of the job that are placed (allocated, binding, bound, running
/// or pipelined).
fn placed_nodes(ssn: &Session, j: JobId, pods: Pods) -> impl Iterator<Item = volcano_framework::NodeId> + '_ {
    ssn.snap
        .job(j)
        .tasks
        .iter()
        .map(|t| ssn.snap.task(*t))
        .filter(move |t| pods.has(t) && (t.status.is_allocated() || t.status == TaskStatus::Pipelined))
        .filter_map(|t| t.node)
}

/// The lowest HyperNode holding these pods of the job that are placed, if any.
pub fn placed_at(ssn: &Session, j: JobId, pods: Pods, topo: &Topology) -> Option<HyperNodeId> {
    topo.common_ancestor_of_nodes(placed_nodes(ssn, j, pods))
}

/// Where a search for pods whose placed ones are at `placed_at` starts, within `within`:
/// the highest HyperNode above them of at most the allowed tier (`within` itself when none
/// is placed). `Err` says why there is none: the placed pods already span a HyperNode above
/// the tier, or they lie outside `within`.
pub fn search_root(
    topo: &Topology,
    placed_at: Option<HyperNodeId>,
    highest_tier: u32,
    within: HyperNodeId,
    subject: &str,
) -> Result<HyperNodeId, String> {
    let Some(a) = placed_at else { return Ok(within) };
    let Some(r) = topo.ancestors(a).take_while(|h| topo.get(*h).tier <= highest_tier).last() else {
        let info = topo.get(a);
        return Err(format!(
            "{subject}'s placed pods already span HyperNode {} of tier {}, above the allowed tier {highest_tier}",
            info.name, info.tier
        ));
    };
    if topo.is_within(r, within) {
        Ok(r)
    } else if topo.is_within(within, r) {
        Ok(within)
    } else {
        Err(format!(
            "{subject}'s placed pods are in HyperNode {}, outside HyperNode {}",
            topo.get(a).name,
            topo.get(within).name
        ))
    }
}

/// What a HyperNode must have room for, checked before the job is tried there: necessary
/// conditions only, so that a candidate they rule out is one where the job cannot become
/// ready.
pub struct Need {
    /// The job's `minResources`, against Σ idle or Σ future idle (Volcano's pre-filter;
    /// for a job with nothing placed yet).
    pub min_resources: Option<Resource>,
    /// When every pending pod of the job asks the same: that request and how many of them
    /// the job needs placed to be ready; a HyperNode must have that many slots (Σ over its
    /// nodes of how many such pods fit the node's future idle resources).
    pub slots: Option<(Resource, usize)>,
}

impl Need {
    /// The job's need.
    pub fn of(ssn: &Session, j: JobId, placed: bool) -> Need {
        let job = ssn.snap.job(j);
        let pending = job.tasks.iter().map(|t| ssn.snap.task(*t)).filter(|t| t.status == TaskStatus::Pending);
        Need {
            min_resources: if placed { None } else { job.min_resources.clone() },
            slots: slots(pending, still_needed(ssn, j)),
        }
    }

    /// The need of these pending pods of a job, `needed` of which must be placed: slots
    /// only (the job's `minResources` is the whole job's).
    pub fn of_pods(ssn: &Session, pending: &[TaskId], needed: usize) -> Need {
        Need { min_resources: None, slots: slots(pending.iter().map(|t| ssn.snap.task(*t)), needed) }
    }
}

/// What each node has for the searches of one `allocate` action: per pod request, how
/// many such pods fit each node's future idle resources; per list of dimensions, each
/// node's idle and future idle resources in them. Computed for every node at first use,
/// then only for the nodes whose accounting changed since
/// ([`Session::nodes_changed_since`]), so that a search reads the nodes its job's
/// predecessors touched, not the whole cluster.
#[derive(Debug, Default)]
pub struct Rooms {
    cursor: Option<usize>,
    changed: Vec<NodeId>,
    /// (request, slots per node), most recent last.
    slots: Vec<(Resource, Vec<u32>)>,
    /// (dimensions, per node: idle then future idle of each), most recent last.
    free: Vec<(Vec<String>, Vec<f64>)>,
}

/// The most requests and dimension lists [`Rooms`] keeps.
const ROOMS_KEPT: usize = 8;

impl Rooms {
    /// Brings every kept value up to date with the nodes changed since the last call.
    fn sync(&mut self, ssn: &mut Session) {
        let Some(cursor) = self.cursor else {
            self.cursor = Some(ssn.node_change_cursor());
            return;
        };
        self.changed.clear();
        self.cursor = Some(ssn.nodes_changed_since(cursor, &mut self.changed));
        if self.changed.is_empty() {
            return;
        }
        for (req, slots) in &mut self.slots {
            for n in &self.changed {
                slots[n.idx()] = node_slots(req, ssn.snap.node(*n));
            }
        }
        for (dims, free) in &mut self.free {
            for n in &self.changed {
                fill_free(dims, ssn.snap.node(*n), &mut free[n.idx() * 2 * dims.len()..(n.idx() + 1) * 2 * dims.len()]);
            }
        }
    }

    /// The slots of every node for `req`.
    fn slots_for(&mut self, ssn: &Session, req: &Resource) -> &[u32] {
        let i = match self.slots.iter().position(|(r, _)| r == req) {
            Some(i) => i,
            None => {
                if self.slots.len() == ROOMS_KEPT {
                    self.slots.remove(0);
                }
                self.slots.push((req.clone(), ssn.snap.nodes.iter().map(|node| node_slots(req, node)).collect()));
                self.slots.len() - 1
            }
        };
        &self.slots[i].1
    }

    /// Idle then future idle of `dims` on every node.
    fn free_for(&mut self, ssn: &Session, dims: &[(&str, f64)]) -> &[f64] {
        let i = match self.free.iter().position(|(d, _)| d.iter().map(String::as_str).eq(dims.iter().map(|(n, _)| *n)))
        {
            Some(i) => i,
            None => {
                if self.free.len() == ROOMS_KEPT {
                    self.free.remove(0);
                }
                let names: Vec<String> = dims.iter().map(|(n, _)| n.to_string()).collect();
                let k = names.len();
                let mut free = vec![0.0; ssn.snap.nodes.len() * 2 * k];
                for (node, out) in ssn.snap.nodes.iter().zip(free.chunks_mut(2 * k)) {
                    fill_free(&names, node, out);
                }
                self.free.push((names, free));
                self.free.len() - 1
            }
        };
        &self.free[i].1
    }
}

/// How many pods of `req` fit the node's future idle resources.
fn node_slots(req: &Resource, node: &volcano_framework::NodeInfo) -> u32 {
    fits_times(req, node).min(u32::MAX as usize) as u32
}

/// The node's idle, then future idle, resources of each dimension into `out`.
fn fill_free(dims: &[String], node: &volcano_framework::NodeInfo, out: &mut [f64]) {
    let k = dims.len();
    for (i, name) in dims.iter().enumerate() {
        let x = node.idle.get(name);
        out[i] = x;
        out[k + i] = x + node.releasing.get(name) - node.pipelined.get(name);
    }
}

/// A job's [`Need`] against what each node has ([`Rooms`]).
struct Room<'a> {
    need: &'a Need,
    /// The dimensions `minResources` asks for.
    dims: Vec<(&'a str, f64)>,
    /// Per node: slots (when the need has some).
    slots: &'a [u32],
    /// Per node: idle, then future idle, of each dimension.
    free: &'a [f64],
}

impl<'a> Room<'a> {
    /// Whether the nodes have room for the job: `Err` with the slots they have when they
    /// have too few, `Err(None)` when Σ idle and Σ future idle both fall short of
    /// `minResources` (Volcano's pre-filter).
    fn holds(&self, nodes: &[volcano_framework::NodeId]) -> Result<(), Option<usize>> {
        if !self.dims.is_empty() {
            let k = self.dims.len();
            let mut sums = vec![0.0; 2 * k];
            for n in nodes {
                for (s, x) in sums.iter_mut().zip(&self.free[n.idx() * 2 * k..(n.idx() + 1) * 2 * k]) {
                    *s += x;
                }
            }
            let covers = |have: &[f64]| self.dims.iter().zip(have).all(|((_, v), h)| *v <= *h);
            if !covers(&sums[..k]) && !covers(&sums[k..]) {
                return Err(None);
            }
        }
        if let Some((_, needed)) = &self.need.slots {
            let mut slots = 0usize;
            for n in nodes {
                slots += self.slots[n.idx()] as usize;
                if slots >= *needed {
                    return Ok(());
                }
            }
            return Err(Some(slots));
        }
        Ok(())
    }
}

/// When every pending pod asks the same: that request and how many of them are needed.
fn slots<'a>(
    mut pending: impl Iterator<Item = &'a volcano_framework::TaskInfo>,
    needed: usize,
) -> Option<(Resource, usize)> {
    let first = pending.next()?;
    let same = pending.all(|t| t.resreq == first.resreq);
    (same && !first.resreq.is_empty()).then(|| (first.resreq.clone(), needed))
}

/// How many times `req` fits the node's future idle resources (idle + releasing −
/// pipelined; every dimension `req` asks for).
fn fits_times(req: &Resource, node: &volcano_framework::NodeInfo) -> usize {
    let mut times = usize::MAX;
    for (name, r) in req.dims() {
        if r <= 0.0 {
            continue;
        }
        let f = node.idle.get(name) + node.releasing.get(name) - node.pipelined.get(name);
        times = times.min(if f <= 0.0 { 0 } else { (f / r + 1e-9).floor() as usize });
        if times == 0 {
            return 0;
        }
    }
    times
}

/// The HyperNodes to try, tier by tier from the lowest: within `root`, of a tier at most
/// the allowed one, with room for the job ([`Need`]); and, of those ruled out for lack of
/// slots, the one with the most (for the job's reason).
pub fn candidates(
    ssn: &mut Session,
    rooms: &mut Rooms,
    topo: &Topology,
    root: HyperNodeId,
    highest_tier: u32,
    need: &Need,
) -> (Vec<Vec<HyperNodeId>>, Option<(HyperNodeId, usize)>) {
    let mut by_tier: std::collections::BTreeMap<u32, Vec<HyperNodeId>> = std::collections::BTreeMap::new();
    let mut roomiest: Option<(HyperNodeId, usize)> = None;
    rooms.sync(ssn);
    let dims: Vec<(&str, f64)> = need.min_resources.iter().flat_map(|r| r.dims()).filter(|(_, v)| *v > 0.0).collect();
    // Each borrow of `rooms` ends with its copy: both slices are needed at once.
    let slots: Vec<u32> = match &need.slots {
        Some((req, _)) => rooms.slots_for(ssn, req).to_vec(),
        None => Vec::new(),
    };
    let free: &[f64] = if dims.is_empty() { &[] } else { rooms.free_for(ssn, &dims) };
    let room = Room { need, dims, slots: &slots, free };
    let mut stack = vec![root];
    while let Some(h) = stack.pop() {
        let info = topo.get(h);
        if info.tier > highest_tier {
            stack.extend(info.children.iter().copied());
            continue;
        }
        // A HyperNode without room for the job has none in its members either (they hold a
        // subset of its nodes): its subtree is skipped.
        match room.holds(&info.nodes) {
            Ok(()) => {
                stack.extend(info.children.iter().copied());
                by_tier.entry(info.tier).or_default().push(h)
            }
            Err(Some(slots)) => {
                let better = match roomiest {
                    None => true,
                    Some((b, n)) => {
                        (slots, std::cmp::Reverse(info.tier), std::cmp::Reverse(&info.name))
                            > (n, std::cmp::Reverse(topo.get(b).tier), std::cmp::Reverse(&topo.get(b).name))
                    }
                };
                if better {
                    roomiest = Some((h, slots));
                }
            }
            Err(None) => {}
        }
    }
    (by_tier.into_values().collect(), roomiest)
}

/// Orders one tier's candidates: highest plugin score (for these pods) first, then most of
/// these pods placed, then name.
pub fn order(ssn: &Session, topo: &Topology, j: JobId, pods: Pods, hyper_nodes: &mut [HyperNodeId]) {
    let placed: Vec<volcano_framework::NodeId> = placed_nodes(ssn, j, pods).collect();
    let mut keyed: Vec<(f64, usize, HyperNodeId)> = hyper_nodes
        .iter()
        .map(|h| {
            let score = ssn.hyper_node_score(j, pods.sub_group(), *h);
            (score, placed.iter().filter(|n| topo.holds(*h, **n)).count(), *h)
        })
        .collect();
    keyed.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then(b.1.cmp(&a.1))
            .then_with(|| topo.get(a.2).name.cmp(&topo.get(b.2).name))
    });
    for (slot, (_, _, h)) in hyper_nodes.iter_mut().zip(keyed) {
        *slot = h;
    }
}

/// Finds the node for a task within a HyperNode: its nominated node first (if it is there
/// and still fits), else the best of the HyperNode's nodes; the whole cluster through the
/// session's node selection.
pub fn select_node_in(
    ssn: &mut Session,
    topo: &Topology,
    h: HyperNodeId,
    t: TaskId,
) -> Result<NodeChoice, volcano_framework::FitErrors> {
    // A HyperNode of every node (the virtual top, or a real one holding the whole
    // cluster) is the whole cluster: the session's node index answers exactly as a scan.
    if h == topo.top() || topo.get(h).nodes.len() == ssn.snap.nodes.len() {
        return select_node(ssn, t);
    }
    let task = ssn.snap.task(t);
    if let Some(n) = task.nominated_node.as_deref().and_then(|name| ssn.snap.node_id(name)) {
        let node = ssn.snap.node(n);
        if topo.holds(h, n) && node.fits_future(&task.resreq) && ssn.predicate(t, n).is_ok() {
            return Ok(if node.fits_idle(&task.resreq) { NodeChoice::Idle(n) } else { NodeChoice::Future(n) });
        }
    }
    ssn.find_node_among(t, &topo.get(h).nodes)
}

/// The best candidate that failed, for the job's reason: the one that placed most pods.
#[derive(Debug, Default)]
pub struct Shortfall {
    /// The candidate.
    pub hyper_node: Option<HyperNodeId>,
    /// Pods it placed.
    pub placed: usize,
    /// Pods the job needed there.
    pub needed: usize,
    /// The first failure there.
    pub why: Option<String>,
}

impl Shortfall {
    /// Keeps the attempt if it came closer.
    pub fn offer(&mut self, h: HyperNodeId, placed: usize, needed: usize, why: Option<String>) {
        if self.hyper_node.is_none() || placed > self.placed {
            *self = Shortfall { hyper_node: Some(h), placed, needed, why };
        }
    }

    /// The reason `subject` (the job, or one of its sub-groups) could not be placed.
    /// `roomiest` is the candidate ruled out with the most room, and how many pods it had
    /// room for; `scope` says where the search was (empty for the whole cluster).
    pub fn reason(
        &self,
        topo: &Topology,
        c: &Constraint,
        subject: &str,
        scope: &str,
        tried: usize,
        roomiest: Option<(HyperNodeId, usize)>,
    ) -> String {
        let mode = if c.hard { "hard" } else { "soft" };
        let Some(h) = self.hyper_node else {
            return match roomiest {
                Some((r, slots)) => {
                    let info = topo.get(r);
                    format!(
                        "network topology {mode}: no HyperNode of tier {} or below{scope} has room for {subject}; the roomiest, {} (tier {}), has room for {slots} of the {} pods it needs",
                        c.highest_tier, info.name, info.tier, self.needed
                    )
                }
                None => format!(
                    "network topology {mode}: no HyperNode of tier {} or below{scope} has free resources for {subject}'s minimum",
                    c.highest_tier
                ),
            };
        };
        let info = topo.get(h);
        format!(
            "network topology {mode}: {subject} fits no HyperNode of tier {} or below{scope} ({tried} tried); the closest, {} (tier {}), holds {} of the {} pods it needs{}",
            c.highest_tier,
            info.name,
            info.tier,
            self.placed,
            self.needed,
            self.why.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
        )
    }
}

/// Where a search under `root` was, for reasons: nothing for the whole cluster.
pub fn scope(topo: &Topology, root: HyperNodeId, why: &str) -> String {
    if root == topo.top() {
        String::new()
    } else {
        format!(" within HyperNode {} ({why})", topo.get(root).name)
    }
}

/// Number of tasks a job still needs placed to be ready (at least one): its `minMember`,
/// or what its sub-group policies' `minSubGroups` ask, whichever is more.
pub fn still_needed(ssn: &Session, j: JobId) -> usize {
    let job = ssn.snap.job(j);
    let groups = job.sub_groups.as_ref().map_or(0, |sg| sg.pods_needed());
    (job.min_available - job.ready_task_num()).max(groups).max(1) as usize
}

/// Clears the fit errors of these pods of the job between candidates (each candidate starts
/// clean, as Volcano's `ResetFitErr` and `ResetSubJobFitErr`).
pub fn reset_fit_errors(ssn: &mut Session, j: JobId, pods: Pods) {
    if ssn.snap.fit_errors(j).is_empty() {
        return;
    }
    match pods {
        Pods::Job => ssn.snap.job_trace_mut(j).fit_errors.clear(),
        Pods::Group(g) => {
            let keep: std::collections::BTreeSet<_> =
                ssn.snap.fit_errors(j).keys().copied().filter(|t| ssn.snap.task(*t).sub_group != g).collect();
            ssn.snap.job_trace_mut(j).fit_errors.retain(|t, _| keep.contains(t));
        }
    }
}

/// Finds the node for a task: its nominated node first (if it still fits), else the best
/// node of the session's node selection (fits now before fits once releasing pods are gone).
pub fn select_node(ssn: &mut Session, t: TaskId) -> Result<NodeChoice, volcano_framework::FitErrors> {
    let task = ssn.snap.task(t);
    if let Some(n) = task.nominated_node.as_deref().and_then(|name| ssn.snap.node_id(name)) {
        let node = ssn.snap.node(n);
        if node.fits_future(&task.resreq) && ssn.predicate(t, n).is_ok() {
            return Ok(if node.fits_idle(&task.resreq) { NodeChoice::Idle(n) } else { NodeChoice::Future(n) });
        }
    }
    ssn.find_node(t)
}
