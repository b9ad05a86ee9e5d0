//! Hierarchical DRF (`enableHierarchy: true`): the queue tree, its shares, and the queue
//! order and reclaim rules built on it.
//!
//! The tree lives in an arena: node 0 is the root, every other node is an internal node of
//! a queue path (`volcano.sh/hierarchy`) or a job leaf. A child always has a larger index
//! than its parent, so walking the arena backwards visits children before parents.
//!
//! Per-node numbers (allocated resources over the cluster's dimensions, dominant share,
//! saturation) are kept in a separate [`State`], so reclaim can simulate on a copy.

use std::cmp::Ordering;
use std::collections::HashMap;

use volcano_api::crd::{HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION};
use volcano_framework::resource::{cmp_f64, share, Resource, MIN_RESOURCE};
use volcano_framework::{JobId, QueueId, Snapshot, TaskId};

/// "No node" in parent links and job-leaf indices.
const NONE: u32 = u32::MAX;

/// The root segment of every normalised hierarchy.
const ROOT: &str = volcano_api::names::ROOT_QUEUE;

/// Where a queue's annotations put it in the tree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Placement {
    /// The segments below the root with their weights (already raised to at least 1); the
    /// last segment is the queue's own node. Empty: the queue is the root itself.
    Path(Vec<(String, f64)>),
    /// Missing or malformed annotations: the queue gets its own node directly under the
    /// root, with weight 1. The text says why.
    UnderRoot(&'static str),
}

/// Reads a queue's `volcano.sh/hierarchy` and `volcano.sh/hierarchy-weights` annotations,
/// normalised as Volcano's admission webhook does (a hierarchy not starting with `root`
/// gets `root/` in front and its weights `1/`).
pub(crate) fn placement(hierarchy: Option<&str>, weights: Option<&str>) -> Placement {
    let hierarchy = hierarchy.unwrap_or_default();
    let weights = weights.unwrap_or_default();
    match (hierarchy.is_empty(), weights.is_empty()) {
        (true, true) => return Placement::UnderRoot("no hierarchy annotation"),
        (false, true) => return Placement::UnderRoot("hierarchy without weights"),
        (true, false) => return Placement::UnderRoot("weights without hierarchy"),
        (false, false) => {}
    }
    let (hierarchy, weights) = if hierarchy.starts_with(ROOT) {
        (hierarchy.to_string(), weights.to_string())
    } else {
        (format!("{ROOT}/{hierarchy}"), format!("1/{weights}"))
    };
    let segments: Vec<&str> = hierarchy.split('/').collect();
    let weights: Vec<&str> = weights.split('/').collect();
    if segments.len() != weights.len() {
        return Placement::UnderRoot("hierarchy and weights differ in length");
    }
    if segments.iter().any(|s| s.is_empty()) {
        return Placement::UnderRoot("empty hierarchy segment");
    }
    let mut path = Vec::with_capacity(segments.len() - 1);
    for (i, (seg, w)) in segments.iter().zip(&weights).enumerate() {
        let Some(w) = w.parse::<f64>().ok().filter(|w| w.is_finite()) else {
            return Placement::UnderRoot("weight is not a number");
        };
        // The first segment is the root: its weight is always 1.
        if i > 0 {
            path.push((seg.to_string(), w.max(1.0)));
        }
    }
    Placement::Path(path)
}

/// One node of the tree (the structure only; the numbers are in [`State`]).
#[derive(Debug)]
struct Node {
    /// Parent index, [`NONE`] for the root.
    parent: u32,
    /// Child indices.
    children: Vec<u32>,
    /// Weight against siblings (1 for the root and job leaves).
    weight: f64,
    /// The job of a leaf; `None` for the root and queue-path nodes.
    job: Option<JobId>,
}

/// The numbers of every node, plus the session-wide totals they depend on.
#[derive(Clone, Debug, Default)]
struct State {
    /// Allocated resources per node, `dims` values per node (node-major).
    alloc: Vec<f64>,
    /// Dominant share per node.
    share: Vec<f64>,
    /// Whether the node is saturated.
    saturated: Vec<bool>,
    /// Σ allocated of all jobs, per dimension.
    total_allocated: Vec<f64>,
    /// Whether a dimension is still demanding (not fully allocated in the cluster).
    demanding: Vec<bool>,
}

/// Job allocations: the plugin's, with the simulated ones of a reclaim on top.
#[derive(Clone, Copy)]
struct Jobs<'a> {
    base: &'a [Resource],
    overlay: &'a [(JobId, Resource)],
}

impl<'a> Jobs<'a> {
    fn get(&self, j: JobId) -> &'a Resource {
        match self.overlay.iter().find(|(x, _)| *x == j) {
            Some((_, r)) => r,
            None => &self.base[j.idx()],
        }
    }
}

/// What a refresh reads besides the tree.
#[derive(Clone, Copy)]
struct Ctx<'a> {
    snap: &'a Snapshot,
    /// The cluster total's dimensions that count, with their totals.
    dims: &'a [(String, f64)],
    jobs: Jobs<'a>,
}

/// The hierarchical state of one session.
#[derive(Debug, Default)]
pub(crate) struct Hdrf {
    nodes: Vec<Node>,
    /// Per queue (by `QueueId::idx()`): the nodes from the root down to the queue's node.
    queue_paths: Vec<Vec<u32>>,
    /// Per job (by `JobId::idx()`): its leaf.
    job_leaf: Vec<u32>,
    state: State,
}

/// Volcano `resourceSaturated`: the job got all it asked for on some resource it holds, or
/// it asks for a resource the cluster has no more of.
fn leaf_saturated(allocated: &Resource, request: &Resource, dims: &[(String, f64)], demanding: &[bool]) -> bool {
    for (name, a) in allocated.dims() {
        if a < MIN_RESOURCE {
            continue;
        }
        let r = request.get(name);
        if r == 0.0 {
            continue;
        }
        if a + MIN_RESOURCE > r {
            return true;
        }
        let still_demanding = dims.iter().position(|(n, _)| n == name).is_some_and(|k| demanding[k]);
        if !still_demanding {
            return true;
        }
    }
    false
}

impl Hdrf {
    /// Builds the tree from the snapshot's queues and jobs and computes every node.
    pub(crate) fn build(snap: &Snapshot, dims: &[(String, f64)], allocated: &[Resource]) -> Self {
        let mut h = Hdrf::default();
        h.nodes.push(Node { parent: NONE, children: Vec::new(), weight: 1.0, job: None });
        // Named path nodes, by (parent, segment).
        let mut named: HashMap<(u32, String), u32> = HashMap::new();
        for q in &snap.queues {
            let annotations = q.queue.metadata.annotations.as_ref();
            let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
            let mut path = vec![0u32];
            match placement(get(HIERARCHY_ANNOTATION), get(HIERARCHY_WEIGHTS_ANNOTATION)) {
                Placement::Path(segments) => {
                    let mut cur = 0u32;
                    for (seg, weight) in segments {
                        cur = match named.get(&(cur, seg.clone())) {
                            Some(&n) => n,
                            None => {
                                let n = h.add_node(cur, weight, None);
                                named.insert((cur, seg), n);
                                n
                            }
                        };
                        path.push(cur);
                    }
                }
                Placement::UnderRoot(reason) => {
                    tracing::debug!(queue = %q.name, reason, "drf: queue put directly under the hierarchy root, weight 1");
                    // Its own node, never shared with a named path segment.
                    path.push(h.add_node(0, 1.0, None));
                }
            }
            h.queue_paths.push(path);
        }
        for (i, job) in snap.jobs.iter().enumerate() {
            let parent = h.queue_paths.get(job.queue.idx()).and_then(|p| p.last().copied()).unwrap_or(0);
            let leaf = h.add_node(parent, 1.0, Some(JobId(i as u32)));
            h.job_leaf.push(leaf);
        }

        let d = dims.len();
        let n = h.nodes.len();
        let mut st = State {
            alloc: vec![0.0; n * d],
            share: vec![0.0; n],
            saturated: vec![false; n],
            total_allocated: vec![0.0; d],
            demanding: vec![false; d],
        };
        for a in allocated {
            for (k, (name, _)) in dims.iter().enumerate() {
                st.total_allocated[k] += a.get(name);
            }
        }
        Self::set_demanding(&mut st, dims);
        let cx = Ctx { snap, dims, jobs: Jobs { base: allocated, overlay: &[] } };
        h.refresh_all(&mut st, &cx);
        h.state = st;
        h
    }

    fn add_node(&mut self, parent: u32, weight: f64, job: Option<JobId>) -> u32 {
        let n = self.nodes.len() as u32;
        self.nodes.push(Node { parent, children: Vec::new(), weight, job });
        self.nodes[parent as usize].children.push(n);
        n
    }

    /// Recomputes which dimensions are still demanding; true when that changed.
    fn set_demanding(st: &mut State, dims: &[(String, f64)]) -> bool {
        let mut changed = false;
        for (k, (_, total)) in dims.iter().enumerate() {
            let demanding = st.total_allocated[k] < *total;
            changed |= st.demanding[k] != demanding;
            st.demanding[k] = demanding;
        }
        changed
    }

    fn refresh_leaf(&self, st: &mut State, cx: &Ctx<'_>, n: usize, j: JobId) {
        let d = cx.dims.len();
        let a = cx.jobs.get(j);
        let mut s = 0.0f64;
        for (k, (name, total)) in cx.dims.iter().enumerate() {
            let v = a.get(name);
            st.alloc[n * d + k] = v;
            s = s.max(share(v, *total));
        }
        st.share[n] = s;
        st.saturated[n] = leaf_saturated(a, &cx.snap.job(j).total_request, cx.dims, &st.demanding);
    }

    /// Volcano `updateHierarchicalShare` for one internal node: the children that hold
    /// something are summed, each unsaturated one scaled down to the smallest dominant
    /// share among the unsaturated ones; the node is saturated when all children are.
    fn refresh_inner(&self, st: &mut State, dims: &[(String, f64)], n: usize) {
        let d = dims.len();
        let children = &self.nodes[n].children;
        let mut mdr = 1.0f64;
        for &c in children {
            let c = c as usize;
            if st.share[c] > 0.0 && !st.saturated[c] {
                mdr = mdr.min(st.share[c]);
            }
        }
        st.alloc[n * d..(n + 1) * d].fill(0.0);
        let mut all_saturated = true;
        for &c in children {
            let c = c as usize;
            all_saturated &= st.saturated[c];
            let sc = st.share[c];
            if sc > 0.0 {
                let f = if st.saturated[c] { 1.0 } else { mdr / sc };
                for k in 0..d {
                    st.alloc[n * d + k] += st.alloc[c * d + k] * f;
                }
            }
        }
        let mut s = 0.0f64;
        for (k, (_, total)) in dims.iter().enumerate() {
            s = s.max(share(st.alloc[n * d + k], *total));
        }
        st.share[n] = s;
        st.saturated[n] = all_saturated;
    }

    fn refresh_node(&self, st: &mut State, cx: &Ctx<'_>, n: usize) {
        match self.nodes[n].job {
            Some(j) => self.refresh_leaf(st, cx, n, j),
            None => self.refresh_inner(st, cx.dims, n),
        }
    }

    /// Every node, bottom-up.
    fn refresh_all(&self, st: &mut State, cx: &Ctx<'_>) {
        for n in (0..self.nodes.len()).rev() {
            self.refresh_node(st, cx, n);
        }
    }

    /// A job's allocation changed (and `total_allocated` with it): refresh its leaf and
    /// ancestors, or the whole tree when the set of demanding dimensions moved.
    fn job_changed(&self, st: &mut State, cx: &Ctx<'_>, j: JobId) {
        if Self::set_demanding(st, cx.dims) {
            self.refresh_all(st, cx);
            return;
        }
        let Some(&leaf) = self.job_leaf.get(j.idx()) else { return };
        let mut n = leaf;
        while n != NONE {
            self.refresh_node(st, cx, n as usize);
            n = self.nodes[n as usize].parent;
        }
    }

    fn add_total(st: &mut State, dims: &[(String, f64)], req: &Resource, sign: f64) {
        for (k, (name, _)) in dims.iter().enumerate() {
            st.total_allocated[k] += sign * req.get(name);
        }
    }

    /// A task of `j` was allocated (`add`) or deallocated; `allocated` already holds the
    /// job's new allocation.
    pub(crate) fn on_task(
        &mut self,
        snap: &Snapshot,
        dims: &[(String, f64)],
        allocated: &[Resource],
        j: JobId,
        req: &Resource,
        add: bool,
    ) {
        let mut st = std::mem::take(&mut self.state);
        Self::add_total(&mut st, dims, req, if add { 1.0 } else { -1.0 });
        let cx = Ctx { snap, dims, jobs: Jobs { base: allocated, overlay: &[] } };
        self.job_changed(&mut st, &cx, j);
        self.state = st;
    }

    /// Volcano `compareQueues`: walk both queues' paths level by level; at the first level
    /// where the nodes differ, an unsaturated node goes before a saturated one, then the
    /// lower share/weight goes first. Equal along the common depth: `Equal`.
    pub(crate) fn compare_queues(&self, l: QueueId, r: QueueId) -> Ordering {
        Self::compare_in(&self.state, &self.nodes, &self.queue_paths, l, r)
    }

    fn compare_in(st: &State, nodes: &[Node], paths: &[Vec<u32>], l: QueueId, r: QueueId) -> Ordering {
        let (Some(lp), Some(rp)) = (paths.get(l.idx()), paths.get(r.idx())) else { return Ordering::Equal };
        for (&a, &b) in lp.iter().zip(rp) {
            if a == b {
                continue;
            }
            let (a, b) = (a as usize, b as usize);
            match (st.saturated[a], st.saturated[b]) {
                (false, true) => return Ordering::Less,
                (true, false) => return Ordering::Greater,
                _ => {}
            }
            let c = cmp_f64(st.share[a] / nodes[a].weight, st.share[b] / nodes[b].weight);
            if c != Ordering::Equal {
                return c;
            }
        }
        Ordering::Equal
    }

    /// Moves a request into (`add`) or out of a job's simulated allocation and refreshes.
    #[allow(clippy::too_many_arguments)]
    fn simulate(
        &self,
        st: &mut State,
        snap: &Snapshot,
        dims: &[(String, f64)],
        base: &[Resource],
        overlay: &mut Vec<(JobId, Resource)>,
        j: JobId,
        req: &Resource,
        add: bool,
    ) {
        let pos = match overlay.iter().position(|(x, _)| *x == j) {
            Some(p) => p,
            None => {
                overlay.push((j, base[j.idx()].clone()));
                overlay.len() - 1
            }
        };
        if add {
            overlay[pos].1.add(req);
        } else {
            overlay[pos].1.sub_unchecked(req);
        }
        Self::add_total(st, dims, req, if add { 1.0 } else { -1.0 });
        let cx = Ctx { snap, dims, jobs: Jobs { base, overlay } };
        self.job_changed(st, &cx, j);
    }

    /// Reclaim victims: on a copy of the tree, the reclaimer's job gets the reclaimer's
    /// request; then, candidate by candidate, the candidate's request leaves its job, and
    /// the candidate is a victim when the reclaimer's queue still compares lower than the
    /// candidate's. A victim's removal stays in the copy; a non-victim's is undone.
    pub(crate) fn reclaimable(
        &self,
        snap: &Snapshot,
        dims: &[(String, f64)],
        base: &[Resource],
        reclaimer: TaskId,
        candidates: &[TaskId],
    ) -> Vec<TaskId> {
        let task = snap.task(reclaimer);
        let Some(lj) = task.job.filter(|j| j.idx() < base.len()) else { return Vec::new() };
        let lq = snap.job(lj).queue;
        let mut st = self.state.clone();
        let mut overlay: Vec<(JobId, Resource)> = Vec::new();
        self.simulate(&mut st, snap, dims, base, &mut overlay, lj, &task.resreq, true);
        let mut victims = Vec::new();
        for &c in candidates {
            let ct = snap.task(c);
            let Some(cj) = ct.job.filter(|j| j.idx() < base.len()) else { continue };
            let cq = snap.job(cj).queue;
            self.simulate(&mut st, snap, dims, base, &mut overlay, cj, &ct.resreq, false);
            if Self::compare_in(&st, &self.nodes, &self.queue_paths, lq, cq) == Ordering::Less {
                victims.push(c);
            } else {
                self.simulate(&mut st, snap, dims, base, &mut overlay, cj, &ct.resreq, true);
            }
        }
        victims
    }

    /// The dominant share of the queue's node.
    pub(crate) fn queue_share(&self, q: QueueId) -> Option<f64> {
        self.queue_node(q).map(|n| self.state.share[n])
    }

    /// Whether the queue's node is saturated.
    pub(crate) fn queue_saturated(&self, q: QueueId) -> Option<bool> {
        self.queue_node(q).map(|n| self.state.saturated[n])
    }

    fn queue_node(&self, q: QueueId) -> Option<usize> {
        self.queue_paths.get(q.idx()).and_then(|p| p.last()).map(|&n| n as usize)
    }

    /// The arena indices of the nodes on the queue's path, root first.
    #[cfg(test)]
    pub(crate) fn path_nodes(&self, q: QueueId) -> &[u32] {
        &self.queue_paths[q.idx()]
    }

    /// (share, weight, saturated) of every node on the queue's path, root first.
    #[cfg(test)]
    pub(crate) fn path_levels(&self, q: QueueId) -> Vec<(f64, f64, bool)> {
        self.queue_paths[q.idx()]
            .iter()
            .map(|&n| {
                let n = n as usize;
                (self.state.share[n], self.nodes[n].weight, self.state.saturated[n])
            })
            .collect()
    }
}
