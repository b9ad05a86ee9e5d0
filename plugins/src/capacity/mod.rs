//! The `capacity` plugin: elastic queues with explicit deserved resources.
//!
//! Every queue states what it deserves (`spec.deserved`), what is reserved for it
//! (`spec.guarantee`) and how far it may grow (`spec.capability`). When the session opens,
//! each queue gets an attribute record ([`QueueAttr`]): its real capability (what it may
//! hold at most, guarantees of the other queues set aside), its deserved share (the
//! declared one, capped by the real capability and raised to the guarantee), and what its
//! jobs hold, request, reserve at admission and hold beyond their minimum.
//!
//! Unlike `proportion`, a queue may **borrow**: allocation is bounded by the real
//! capability, not by the deserved share, so idle resources are used by whoever wants
//! them. The deserved share is what a queue gets back through `reclaim`: a queue below
//! its deserved share on some requested resource may reclaim, and victims are taken only
//! from queues above their deserved share, never below their guarantee.
//!
//! Hierarchical mode (`enableHierarchy: true` on the plugin entry) arranges the queues in
//! a tree by `spec.parent` under the queue `root`; see [`Capacity`] for its rules.

mod args;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_api::crd::PodGroupPhase;
use volcano_api::names::event_reason;
use volcano_framework::resource::{cmp_f64, DimensionDefault, Resource, MIN_RESOURCE, PODS};
use volcano_framework::{
    Admission, ArgsError, CloseOutput, EventType, EvictionContext, EvictionKind, Hooks, Incremental, JobId, Plugin,
    PluginBuilder, QueueId, QueueReport, SessionContext, Snapshot, TaskId, TaskStatus,
};

pub use args::Args;

use crate::queue_accounting::{
    deduct_gated, exceeded_part, job_usage, not_open, real_capability, unguaranteed, unlimited_cpu_memory, QueueAccount,
};
use volcano_framework::parse_args;

/// Configuration name.
pub const NAME: &str = "capacity";

/// The name of the top queue in hierarchical mode (also the default `spec.parent`).
pub const ROOT_QUEUE: &str = volcano_api::names::ROOT_QUEUE;

pub use crate::queue_accounting::QUOTA_INSUFFICIENT;

/// What the plugin knows about one queue in this session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueAttr {
    /// Whether the queue takes part in this session: every queue in hierarchical mode,
    /// only queues with at least one job otherwise.
    pub active: bool,
    /// Queue name.
    pub name: String,
    /// `spec.capability` with absent or non-positive cpu/memory unlimited (in hierarchical
    /// mode, absent dimensions are inherited from the parent); empty when unset.
    pub capability: Resource,
    /// The accounts. `deserved` is `spec.deserved`, capped by the real capability and
    /// raised to the guarantee (in hierarchical mode also capped by the parent's deserved,
    /// see [`Capacity`]); the share is 1 when nothing is deserved (a best-effort queue). In
    /// hierarchical mode allocated, request, inqueue and elastic are sums over the whole
    /// subtree; the real capability is (the parent's real capability, or the cluster total,
    /// − the guarantees of all its siblings) + its own guarantee, capped by its capability;
    /// the root's guarantee is Σ of its children's.
    pub account: QueueAccount,
    /// Ancestors, the root first (indices into the attribute table; hierarchical mode).
    ancestors: Vec<usize>,
    /// Children (indices into the attribute table; hierarchical mode).
    children: Vec<usize>,
    /// Why the queue is outside the hierarchy (missing parent, cycle), if it is.
    broken: Option<String>,
}

/// The share of a queue that deserves nothing: satisfied.
const BEST_EFFORT_SHARE: Option<f64> = Some(1.0);

impl QueueAttr {
    /// Whether the queue has no child queue.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// Depth in the hierarchy (0 for the root and in flat mode).
    pub fn depth(&self) -> usize {
        self.ancestors.len()
    }

    /// Why the queue is outside the hierarchy, if it is (hierarchical mode only).
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }
}

/// The plugin state of one session.
///
/// **Hierarchical mode.** Queues form a tree by `spec.parent` (absent or empty means
/// `root`); the queue named `root` is the top, and a virtual unlimited root stands in when
/// no such queue exists. Only leaf queues run jobs: a job in a queue with children is
/// refused by Allocatable and JobEnqueueable with a PodGroup event naming the reason. A
/// queue whose parent does not exist, or whose parent chain loops, is left out of the tree
/// and refuses its jobs the same way; the rest of the tree keeps working. A parent's
/// allocated, request, inqueue and elastic are the sums over its subtree. Capabilities
/// inherit absent dimensions from the parent, the root's absent dimensions are unlimited,
/// and a child's real capability is (the parent's real capability − Σ guarantees of the
/// parent's children) + its own guarantee, capped by its capability. The root's deserved
/// and guarantee are the sums of its children's. When the children's deserved resources
/// add up to more than their parent's on a dimension the parent declares, each child's
/// deserved on that dimension is scaled down by parent / Σ children (then raised back to
/// its guarantee): Volcano's webhook rejects such queues, and the scheduler stays safe
/// when they exist anyway. Allocation and admission are checked against the queue and
/// every ancestor.
#[derive(Debug, Default)]
pub struct Capacity {
    hierarchy: bool,
    ancestor_reclaim_level: usize,
    /// By queue index; in hierarchical mode one extra entry for a virtual root.
    queues: Vec<QueueAttr>,
    /// The root's index (hierarchical mode).
    root: Option<usize>,
}

fn le(l: f64, r: f64) -> bool {
    l < r || (l - r).abs() < MIN_RESOURCE
}

/// Whether the two requests share a resource dimension (both ≥ the epsilon), `pods`
/// ignored when `ignore_pods` (Volcano `Intersection` / `IntersectionWithIgnoredScalarResources`).
fn intersects(a: &Resource, b: &Resource, ignore_pods: bool) -> bool {
    // The dimensions of `a` in order (cpu, memory, scalars), without looking names up for
    // cpu and memory: this runs for every victim candidate.
    (a.milli_cpu >= MIN_RESOURCE && b.milli_cpu >= MIN_RESOURCE)
        || (a.memory >= MIN_RESOURCE && b.memory >= MIN_RESOURCE)
        || a.scalars().any(|(n, v)| {
            v >= MIN_RESOURCE && !(ignore_pods && &**n == PODS) && b.scalar(n).unwrap_or(0.0) >= MIN_RESOURCE
        })
}

/// Volcano `LessEqualPartlyWithDimensionZeroFiltered(deserved, req)` on
/// `future(dim)`: some dimension requested by `req` (and used by either side) where
/// `future ≤ deserved`.
fn partly_within(req: &Resource, deserved: &Resource, future: impl Fn(&str) -> f64) -> bool {
    req.dims().filter(|(n, v)| *v > 0.0 && *n != PODS).any(|(n, _)| {
        let (f, d) = (future(n), deserved.get(n));
        !(f < MIN_RESOURCE && d < MIN_RESOURCE) && le(f, d)
    })
}

/// Volcano `GreaterPartlyWithRelevantDimensions(deserved, req)`: some dimension requested
/// by `req` that `deserved` declares (cpu/memory: at least the epsilon; scalars: present)
/// where `allocated > deserved`.
fn exceeds_relevant(allocated: &Resource, deserved: &Resource, req: &Resource) -> bool {
    (req.milli_cpu > 0.0 && deserved.milli_cpu >= MIN_RESOURCE && !le(allocated.milli_cpu, deserved.milli_cpu))
        || (req.memory > 0.0 && deserved.memory >= MIN_RESOURCE && !le(allocated.memory, deserved.memory))
        || req.scalars().any(|(n, v)| {
            v > 0.0 && &**n != PODS && deserved.scalar(n).is_some_and(|d| !le(allocated.scalar(n).unwrap_or(0.0), d))
        })
}

/// The index of the position of `q` in a small running table, inserting `init` if absent.
fn running_slot(running: &mut Vec<(usize, Resource)>, q: usize, init: &Resource) -> usize {
    match running.iter().position(|(x, _)| *x == q) {
        Some(p) => p,
        None => {
            running.push((q, init.clone()));
            running.len() - 1
        }
    }
}

impl Capacity {
    /// A plugin value for one session (state is built by `on_session_open`), with the
    /// ancestor reclaim level in effect ([`Args::ancestor_reclaim_level`]).
    pub fn new(ancestor_reclaim_level: usize, hierarchy: bool) -> Self {
        Capacity { hierarchy, ancestor_reclaim_level, ..Default::default() }
    }

    /// The attributes of a queue that takes part in this session.
    pub fn attr(&self, q: QueueId) -> Option<&QueueAttr> {
        self.queues.get(q.idx()).filter(|a| a.active)
    }

    /// The attributes of the root (hierarchical mode), virtual or not.
    pub fn root_attr(&self) -> Option<&QueueAttr> {
        self.root.map(|r| &self.queues[r])
    }

    /// Builds the attributes of the queues that have jobs (flat mode).
    fn build_flat(&mut self, snap: &Snapshot) {
        let unguaranteed = unguaranteed(snap);
        let mut attrs = vec![QueueAttr::default(); snap.queues.len()];
        for job in &snap.jobs {
            let attr = &mut attrs[job.queue.idx()];
            if !attr.active {
                let q = snap.queue(job.queue);
                attr.active = true;
                attr.name = q.name.clone();
                let capability = q.capability.as_ref().map(unlimited_cpu_memory);
                let a = &mut attr.account;
                a.deserved = q.deserved.clone().unwrap_or_default();
                a.guarantee = q.guarantee.clone();
                a.real_capability = real_capability(&unguaranteed, &q.guarantee, capability.as_ref());
                attr.capability = capability.unwrap_or_default();
            }
            attr.account.add_usage(&job_usage(snap, job));
        }
        for attr in attrs.iter_mut().filter(|a| a.active) {
            let a = &mut attr.account;
            a.deserved.min_dimension(&a.real_capability, DimensionDefault::Infinity);
            a.deserved.set_max(&a.guarantee);
            a.update_share(BEST_EFFORT_SHARE);
        }
        self.queues = attrs;
    }

    /// Builds the queue tree and the attributes of every queue (hierarchical mode).
    fn build_hierarchy(&mut self, snap: &Snapshot) {
        let n = snap.queues.len();
        let root = match snap.queue_id(ROOT_QUEUE) {
            Some(r) => r.idx(),
            None => {
                tracing::debug!("capacity: no queue named root: using a virtual unlimited root");
                n
            }
        };
        let mut attrs = vec![QueueAttr::default(); n.max(root + 1)];
        for (i, q) in snap.queues.iter().enumerate() {
            let attr = &mut attrs[i];
            attr.active = true;
            attr.name = q.name.clone();
            attr.account.deserved = q.deserved.clone().unwrap_or_default();
            attr.account.guarantee = q.guarantee.clone();
            attr.capability = q.capability.clone().unwrap_or_default();
        }
        if root == n {
            attrs[root].active = true;
            attrs[root].name = ROOT_QUEUE.to_string();
        }

        // Parents and ancestors.
        let parent_name =
            |i: usize| -> &str { snap.queues[i].parent.as_deref().filter(|p| !p.is_empty()).unwrap_or(ROOT_QUEUE) };
        let parent_of = |i: usize| -> Option<usize> {
            let p = parent_name(i);
            if p == ROOT_QUEUE {
                Some(root)
            } else {
                snap.queue_id(p).map(QueueId::idx)
            }
        };
        for i in (0..n).filter(|i| *i != root) {
            let mut chain = Vec::new();
            let mut cur = i;
            let broken = loop {
                let Some(p) = parent_of(cur) else {
                    break Some(format!("its parent chain names queue {:?}, which does not exist", parent_name(cur)));
                };
                if p == root {
                    break None;
                }
                if p == i || chain.contains(&p) || chain.len() > n {
                    break Some("its parent chain contains a cycle".to_string());
                }
                chain.push(p);
                cur = p;
            };
            match broken {
                Some(reason) => {
                    tracing::warn!(queue = %snap.queues[i].name, "capacity: queue left out of the hierarchy: {reason}");
                    attrs[i].broken = Some(reason);
                }
                None => {
                    chain.push(root);
                    chain.reverse();
                    attrs[i].ancestors = chain;
                }
            }
        }
        for i in 0..n {
            if i == root || attrs[i].broken.is_some() {
                continue;
            }
            let parent = *attrs[i].ancestors.last().expect("a queue in the tree has a parent");
            attrs[parent].children.push(i);
        }

        // What the jobs hold, summed up the tree.
        for job in &snap.jobs {
            let q = job.queue.idx();
            if !attrs[q].children.is_empty() {
                tracing::debug!(job = %job.key, queue = %attrs[q].name, "capacity: job in a non-leaf queue");
            }
            let usage = job_usage(snap, job);
            attrs[q].account.add_usage(&usage);
            for a in attrs[q].ancestors.clone() {
                attrs[a].account.add_usage(&usage);
            }
        }

        // The root: absent dimensions are unlimited.
        {
            let r = &mut attrs[root];
            let mut cap = unlimited_cpu_memory(&r.capability);
            for (name, _) in snap.total_resource.scalars() {
                if !cap.has_scalar(name) {
                    cap.set(name, f64::MAX);
                }
            }
            r.capability = cap.clone();
            r.account.real_capability = cap;
        }

        // Top down: capabilities, real capabilities and deserved resources of the children.
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            let children = attrs[p].children.clone();
            if children.is_empty() {
                continue;
            }
            let mut sum_guarantee = Resource::empty();
            for &c in &children {
                sum_guarantee.add(&attrs[c].account.guarantee);
            }
            let parent_cap = attrs[p].capability.clone();
            let available = exceeded_part(&attrs[p].account.real_capability, &sum_guarantee);
            let mut sum_deserved = Resource::empty();
            for &c in &children {
                let child = &mut attrs[c];
                if child.capability.milli_cpu <= 0.0 {
                    child.capability.milli_cpu = parent_cap.milli_cpu;
                }
                if child.capability.memory <= 0.0 {
                    child.capability.memory = parent_cap.memory;
                }
                for (name, v) in parent_cap.scalars() {
                    if !child.capability.has_scalar(name) {
                        child.capability.set(name, v);
                    }
                }
                if !child.capability.less_equal(&parent_cap, DimensionDefault::Infinity) {
                    tracing::warn!(
                        queue = %child.name,
                        capability = %child.capability,
                        parent_capability = %parent_cap,
                        "capacity: child queue capability exceeds its parent's: the parent's limit applies"
                    );
                }
                child.account.real_capability =
                    real_capability(&available, &child.account.guarantee, Some(&child.capability));
                child.account.deserved.min_dimension(&child.account.real_capability, DimensionDefault::Infinity);
                child.account.deserved.set_max(&child.account.guarantee);
                sum_deserved.add(&child.account.deserved);
            }
            if p == root {
                attrs[p].account.guarantee = sum_guarantee;
                attrs[p].account.deserved = sum_deserved;
            } else {
                if !sum_guarantee.less_equal(&attrs[p].account.guarantee, DimensionDefault::Zero) {
                    tracing::warn!(
                        queue = %attrs[p].name,
                        guarantee = %attrs[p].account.guarantee,
                        children = %sum_guarantee,
                        "capacity: the children's guarantees exceed their parent's"
                    );
                }
                let parent_deserved = attrs[p].account.deserved.clone();
                for (name, pd) in parent_deserved.dims() {
                    let total = sum_deserved.get(name);
                    if pd < MIN_RESOURCE || le(total, pd) {
                        continue;
                    }
                    tracing::warn!(
                        queue = %attrs[p].name,
                        resource = name,
                        parent = pd,
                        children = total,
                        "capacity: the children's deserved resources exceed their parent's: scaled down"
                    );
                    let ratio = pd / total;
                    for &c in &children {
                        let v = attrs[c].account.deserved.get(name);
                        if v > 0.0 {
                            attrs[c].account.deserved.set(name, v * ratio);
                        }
                    }
                }
                for &c in &children {
                    let g = attrs[c].account.guarantee.clone();
                    attrs[c].account.deserved.set_max(&g);
                }
            }
            stack.extend(children.iter().rev());
        }
        for attr in attrs.iter_mut().filter(|a| a.active) {
            attr.account.update_share(BEST_EFFORT_SHARE);
        }
        self.root = Some(root);
        self.queues = attrs;
    }

    /// Why jobs of this queue may not run (hierarchical mode): outside the tree, or not a leaf.
    fn refusal(&self, q: usize) -> Option<String> {
        if !self.hierarchy {
            return None;
        }
        let attr = &self.queues[q];
        if let Some(reason) = &attr.broken {
            return Some(format!("queue {} is not part of the queue hierarchy: {reason}", attr.name));
        }
        if !attr.is_leaf() {
            return Some(format!("queue {} is not a leaf queue: jobs may only run in leaf queues", attr.name));
        }
        None
    }

    /// The queue itself, then its ancestors from the parent up to the root.
    fn up_the_tree(&self, q: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(q).chain(self.queues[q].ancestors.iter().rev().copied())
    }

    /// The ancestor `level` steps up (1 = parent), if any.
    fn ancestor_at(&self, q: usize, level: usize) -> Option<usize> {
        let a = &self.queues[q].ancestors;
        (level >= 1 && a.len() >= level).then(|| a[a.len() - level])
    }

    /// Whether the two queues share an ancestor other than the root within
    /// `ancestorReclaimLevel` levels.
    fn share_ancestor_within_level(&self, a: usize, b: usize) -> bool {
        (1..=self.ancestor_reclaim_level).filter_map(|l| self.ancestor_at(a, l)).any(|x| {
            Some(x) != self.root && (1..=self.ancestor_reclaim_level).any(|l| self.ancestor_at(b, l) == Some(x))
        })
    }

    /// Index of the last common ancestor in the two ancestor lists (Volcano `getQueueLevel`).
    fn queue_level(&self, l: usize, r: usize) -> usize {
        let (la, ra) = (&self.queues[l].ancestors, &self.queues[r].ancestors);
        let mut level = 0;
        for i in 0..la.len().min(ra.len()) {
            if la[i] != ra[i] {
                return level;
            }
            level = i;
        }
        level
    }

    fn compare_share(&self, l: Option<&QueueAttr>, r: Option<&QueueAttr>) -> Ordering {
        let (ls, rs) = (l.map_or(1.0, |a| a.account.share), r.map_or(1.0, |a| a.account.share));
        match cmp_f64(ls, rs) {
            Ordering::Equal => {
                // Queues that deserve something go before best-effort queues.
                let lh = l.is_some_and(|a| !a.account.deserved.is_empty());
                let rh = r.is_some_and(|a| !a.account.deserved.is_empty());
                rh.cmp(&lh)
            }
            o => o,
        }
    }

    fn task_queue(&self, snap: &Snapshot, t: TaskId) -> Option<usize> {
        let j = snap.task(t).job?;
        let q = snap.job(j).queue.idx();
        self.queues.get(q).filter(|a| a.active).map(|_| q)
    }

    fn update_allocated(&mut self, snap: &Snapshot, t: TaskId, add: bool) {
        let Some(q) = self.task_queue(snap, t) else { return };
        let req = &snap.task(t).resreq;
        let n_ancestors = if self.hierarchy { self.queues[q].ancestors.len() } else { 0 };
        for k in 0..=n_ancestors {
            let i = if k == 0 { q } else { self.queues[q].ancestors[k - 1] };
            self.queues[i].account.record(req, add, BEST_EFFORT_SHARE);
        }
    }
}

impl Plugin for Capacity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        let hooks = Hooks::QUEUE_ORDER
            | Hooks::ALLOCATABLE
            | Hooks::PREEMPTIVE
            | Hooks::RECLAIMABLE
            | Hooks::EVICTABLE
            | Hooks::JOB_ENQUEUEABLE
            | Hooks::JOB_ENQUEUED
            | Hooks::EVENT_HANDLER;
        if self.hierarchy {
            hooks | Hooks::VICTIM_QUEUE_ORDER
        } else {
            hooks
        }
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        if self.hierarchy {
            self.build_hierarchy(snap);
        } else {
            self.build_flat(snap);
        }
        for a in self.queues.iter().filter(|a| a.active) {
            tracing::debug!(
                queue = %a.name,
                deserved = %a.account.deserved,
                real_capability = %a.account.real_capability,
                allocated = %a.account.allocated,
                request = %a.account.request,
                inqueue = %a.account.inqueue,
                elastic = %a.account.elastic,
                share = a.account.share,
                "capacity: queue attributes"
            );
        }
    }

    fn on_session_close(&mut self, snap: &Snapshot, _ctx: &SessionContext, out: &mut CloseOutput) {
        for (i, a) in self.queues.iter().enumerate().filter(|(i, a)| a.active && *i < snap.queues.len()) {
            // Volcano's capacity reports a queue overused when its share is above 1, and its
            // capability only when `spec.capability` is set.
            let capability = snap.queues[i].queue.spec.capability.as_ref().map(|_| a.capability.clone());
            let report = QueueReport { overused: Some(a.account.share > 1.0), capability, ..a.account.report() };
            out.queue_reports.push((QueueId(i as u32), report));
        }
        // Admitted jobs of a queue outside the hierarchy (or not a leaf) wait: say why on
        // the PodGroup. (Jobs refused at admission get their event from the session.)
        if self.hierarchy {
            for (i, job) in snap.jobs.iter().enumerate() {
                let waiting = job.count(TaskStatus::Pending) > 0 && job.phase != PodGroupPhase::Pending;
                if let Some(reason) = self.refusal(job.queue.idx()).filter(|_| waiting) {
                    out.job_events.push((JobId(i as u32), EventType::Normal, event_reason::UNSCHEDULABLE, reason));
                }
            }
        }
    }

    fn queue_order(&self, snap: &Snapshot, l: QueueId, r: QueueId) -> Ordering {
        let (lq, rq) = (snap.queue(l), snap.queue(r));
        if lq.priority != rq.priority {
            return rq.priority.cmp(&lq.priority);
        }
        if !self.hierarchy {
            return self.compare_share(self.attr(l), self.attr(r));
        }
        let (Some(la), Some(ra)) = (self.attr(l), self.attr(r)) else {
            return self.compare_share(self.attr(l), self.attr(r));
        };
        match (la.is_leaf(), ra.is_leaf()) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            (false, false) => self.compare_share(Some(la), Some(ra)),
            (true, true) => {
                // Compare the two branches just below the last common ancestor.
                let level = self.queue_level(l.idx(), r.idx());
                let lp = la.ancestors.get(level + 1).copied().unwrap_or(l.idx());
                let rp = ra.ancestors.get(level + 1).copied().unwrap_or(r.idx());
                self.compare_share(self.queues.get(lp), self.queues.get(rp))
            }
        }
    }

    fn victim_queue_order(&self, _snap: &Snapshot, l: QueueId, r: QueueId, preemptor: QueueId) -> Ordering {
        if !self.hierarchy {
            return Ordering::Equal;
        }
        if self.attr(l).is_none() || self.attr(r).is_none() || self.attr(preemptor).is_none() {
            return Ordering::Equal;
        }
        // Victims from queues closer to the preemptor in the tree go first.
        let ll = self.queue_level(l.idx(), preemptor.idx());
        let rl = self.queue_level(r.idx(), preemptor.idx());
        rl.cmp(&ll)
    }

    fn allocatable(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> bool {
        let queue = snap.queue(q);
        if !queue.is_open() {
            tracing::trace!(queue = %queue.name, "queue is not open: cannot allocate");
            return false;
        }
        if self.attr(q).is_none() {
            return false;
        }
        if let Some(reason) = self.refusal(q.idx()) {
            tracing::debug!(queue = %queue.name, task = %snap.task(t).key, "capacity: {reason}");
            return false;
        }
        let req = &snap.task(t).resreq;
        for i in self.up_the_tree(q.idx()) {
            let a = &self.queues[i];
            if !a.account.fits(req, &a.account.real_capability) {
                tracing::trace!(
                    queue = %a.name,
                    real_capability = %a.account.real_capability,
                    allocated = %a.account.allocated,
                    request = %req,
                    "capacity: queue would exceed its real capability"
                );
                return false;
            }
        }
        true
    }

    fn allocatable_refusal(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> Option<String> {
        let queue = snap.queue(q);
        if !queue.is_open() {
            return Some(not_open(queue));
        }
        self.attr(q)?;
        if let Some(reason) = self.refusal(q.idx()) {
            return Some(reason);
        }
        let req = &snap.task(t).resreq;
        for i in self.up_the_tree(q.idx()) {
            let a = &self.queues[i];
            let refusal = a.account.allocation_refusal(&a.name, "real capability", req, &a.account.real_capability);
            if refusal.is_some() {
                return refusal;
            }
        }
        None
    }

    fn preemptive(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> bool {
        let queue = snap.queue(q);
        if !queue.is_open() {
            return false;
        }
        let Some(attr) = self.attr(q) else { return false };
        if self.refusal(q.idx()).is_some() {
            return false;
        }
        let req = &snap.task(t).resreq;
        let future = |a: &QueueAttr, n: &str| a.account.allocated.get(n) + req.get(n);
        if !attr.account.fits(req, &attr.account.real_capability) {
            tracing::debug!(queue = %queue.name, "capacity: cannot reclaim: future use exceeds the real capability");
            return false;
        }
        if partly_within(req, &attr.account.deserved, |n| future(attr, n)) {
            return true;
        }
        if self.hierarchy {
            for level in 1..=self.ancestor_reclaim_level {
                let Some(a) = self.ancestor_at(q.idx(), level) else { continue };
                if Some(a) == self.root {
                    continue;
                }
                let anc = &self.queues[a];
                if partly_within(req, &anc.account.deserved, |n| future(anc, n)) {
                    tracing::debug!(queue = %queue.name, ancestor = %anc.name, "capacity: ancestor may reclaim");
                    return true;
                }
            }
        }
        tracing::debug!(
            queue = %queue.name,
            deserved = %attr.account.deserved,
            allocated = %attr.account.allocated,
            request = %req,
            "capacity: queue is at its deserved share on every requested resource: cannot reclaim"
        );
        false
    }

    /// `gangpreempt`: every candidate (capacity does not filter preemption in a queue);
    /// `gangreclaim`: the reclaim rule ([`Plugin::reclaimable`]) for the job's first pending pod.
    fn evictable(&self, snap: &Snapshot, ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        match ctx.kind {
            EvictionKind::GangPreempt => Some(candidates.to_vec()),
            EvictionKind::GangReclaim => self.reclaimable(snap, ctx.task, candidates),
        }
    }

    fn reclaimable(&self, snap: &Snapshot, reclaimer: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        let mut victims = Vec::new();
        let Some(rq) = self.task_queue(snap, reclaimer) else { return Some(victims) };
        let reclaimer_req = &snap.task(reclaimer).resreq;
        let hierarchical_reclaim = self.hierarchy && self.ancestor_reclaim_level > 0;
        let mut running: Vec<(usize, Resource)> = Vec::new();
        let mut touched: Vec<usize> = Vec::new();
        for &c in candidates {
            let task = snap.task(c);
            let Some(q) = self.task_queue(snap, c) else { continue };
            let attr = &self.queues[q];
            if attr.broken.is_some() {
                continue;
            }
            if !intersects(&task.resreq, reclaimer_req, true) {
                tracing::trace!(victim = %task.key, "capacity: no resource in common with the reclaimer");
                continue;
            }
            let pos = running_slot(&mut running, q, &attr.account.allocated);
            if !attr.account.guarantee.less_equal_difference(&running[pos].1, &task.resreq) {
                tracing::trace!(victim = %task.key, queue = %attr.name, "capacity: the queue would fall below its guarantee");
                continue;
            }
            let eligible = if !intersects(&task.resreq, &attr.account.deserved, false) {
                // An immediate victim: the queue deserves nothing of what the task uses.
                !(hierarchical_reclaim
                    && self.share_ancestor_within_level(rq, q)
                    && !intersects(reclaimer_req, &self.queues[rq].account.deserved, false))
            } else {
                exceeds_relevant(&running[pos].1, &attr.account.deserved, &task.resreq)
            };
            if !eligible {
                continue;
            }
            touched.clear();
            let mut ancestors_agree = true;
            if hierarchical_reclaim {
                for level in 1..=self.ancestor_reclaim_level {
                    let Some(a) = self.ancestor_at(q, level) else { continue };
                    if Some(a) == self.root || self.ancestor_at(rq, level) == Some(a) {
                        continue;
                    }
                    let anc = &self.queues[a];
                    let apos = running_slot(&mut running, a, &anc.account.allocated);
                    touched.push(apos);
                    if !intersects(&task.resreq, &anc.account.deserved, false) {
                        continue;
                    }
                    if !exceeds_relevant(&running[apos].1, &anc.account.deserved, &task.resreq) {
                        ancestors_agree = false;
                        break;
                    }
                }
            }
            if !ancestors_agree {
                continue;
            }
            running[pos].1.sub_unchecked(&task.resreq);
            for &apos in &touched {
                running[apos].1.sub_unchecked(&task.resreq);
            }
            victims.push(c);
        }
        Some(victims)
    }

    fn job_enqueueable(&self, snap: &Snapshot, j: JobId) -> Admission {
        let job = snap.job(j);
        let q = job.queue;
        let queue = snap.queue(q);
        if self.attr(q).is_none() {
            return Admission::Permit;
        }
        if let Some(reason) = self.refusal(q.idx()) {
            tracing::debug!(job = %job.key, "capacity: job rejected: {reason}");
            return Admission::Reject(reason);
        }
        if !queue.is_open() {
            tracing::debug!(job = %job.key, queue = %queue.name, "queue is not open: job rejected");
            return Admission::Reject(not_open(queue));
        }
        let Some(min) = &job.min_resources else { return Admission::Permit };
        for i in self.up_the_tree(q.idx()) {
            let a = &self.queues[i];
            let Some(message) = a.account.admission_refusal(&a.name, min) else { continue };
            tracing::debug!(job = %job.key, queue = %a.name, "job rejected: {message}");
            return Admission::Reject(message);
        }
        Admission::Permit
    }

    fn job_enqueued(&mut self, snap: &Snapshot, j: JobId) {
        let job = snap.job(j);
        let Some(min) = &job.min_resources else { return };
        let q = job.queue.idx();
        if self.queues.get(q).is_none_or(|a| !a.active) {
            return;
        }
        let reserved = deduct_gated(snap, job, min.clone());
        self.queues[q].account.inqueue.add(&reserved);
        if self.hierarchy {
            for a in self.queues[q].ancestors.clone() {
                self.queues[a].account.inqueue.add(&reserved);
            }
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, t: TaskId) {
        self.update_allocated(snap, t, true);
    }

    fn on_deallocate(&mut self, snap: &Snapshot, t: TaskId) {
        self.update_allocated(snap, t, false);
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Capacity {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

/// Checks the arguments and returns the builder; `enableHierarchy: true` on the entry
/// turns on hierarchical mode.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let hierarchy = opt.enabled_hierarchy == Some(true);
    let level = args.ancestor_reclaim_level();
    Ok(Arc::new(move || Box::new(Capacity::new(level, hierarchy)) as Box<dyn Plugin>))
}
