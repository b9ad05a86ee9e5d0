//! What `gangpreempt` and `gangreclaim` share: gang-aware eviction (Volcano's
//! gang-aware-eviction design, v1.15).
//!
//! For each starving job (queues in queue order, jobs in job order) the action looks for
//! room for all of the job's pending pods within one *domain* at a time: the whole cluster
//! (the virtual top HyperNode) for a job without a hard network topology constraint; for a
//! hard one, the HyperNodes of at most its allowed tier (widest tier first), at most
//! `maxDomains` of them, and at most `hypernode.gradient.evict.max-hypernodes` when the
//! `network-topology-aware` plugin is enabled ([`Session::evict_hyper_nodes`]). In a domain:
//!
//! 1. the pods that fit without eviction are placed first (as `allocate` would, within the
//!    domain);
//! 2. the victims come in **bundles**, one or two per victim job: its *safe* bundle (pods
//!    above its `minAvailable`, and above each role's `minTaskMember`, that run in the
//!    domain and leave each sub-group whole ([`SubGroupBudget`]); every pod of a gang
//!    already below its minimum) before any *whole* bundle
//!    (every pod the job still runs, anywhere: evicting past the minimum ends the gang, so
//!    the gang goes whole; only with `allowWholeBundle`). Bundles are ordered by victim
//!    job order (`gangpreempt`), or by victim queue order then, for whole bundles, by the
//!    room they make here for the least disruption overall (`gangreclaim`);
//! 3. the plugins' [`Session::evictable`] vote filters the ordered pods (a whole bundle is
//!    kept only if all its pods are allowed, a safe one keeps its allowed pods);
//! 4. victims are taken one safe pod, or one whole bundle, at a time; after each the pending
//!    pods are tried on the node it frees, until all are placed;
//! 5. then every victim (a safe pod, or a whole bundle) that no placement needs is given
//!    back, latest first: the job gets room for what it needs, and no more is evicted
//!    (Volcano #5984 evicts a whole safe bundle where one pod was needed);
//! 6. the victims are evicted and the pods pipelined onto their nodes (nominated), in one
//!    statement, committed when the job is then pipelined; otherwise nothing is evicted and
//!    the next domain is tried.

use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

use serde::Deserialize;
use volcano_api::conf::{args, Arguments};
use volcano_api::crd::PREEMPTABLE_KEY;
use volcano_framework::model::SubGroups;
use volcano_framework::resource::PODS;
use volcano_framework::topology::{HyperNodeId, Topology};
use volcano_framework::{
    parse_args, ArgsError, DimensionDefault, EvictionContext, EvictionKind, EvictionTry, JobId, NodeChoice, NodeId,
    QueueId, Resource, Session, Statement, TaskId, TaskStatus, Worklist,
};

use crate::topology;

/// Domains tried per starving job when `maxDomains` is unset or not positive.
pub const DEFAULT_MAX_DOMAINS: usize = 8;

/// Arguments of `gangpreempt` and `gangreclaim` (from `configurations`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The most HyperNodes (domains) tried for one starving job (default 8; a value ≤ 0
    /// means the default, as in Volcano).
    #[serde(rename = "maxDomains", default, deserialize_with = "args::int")]
    pub max_domains: Option<i64>,
    /// Whether a victim job may be evicted whole, ending its gang, when its pods above
    /// `minAvailable` do not make room (default true). With `false` no gang is broken.
    #[serde(rename = "allowWholeBundle", default, deserialize_with = "args::bool")]
    pub allow_whole_bundle: Option<bool>,
}

/// The resolved arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// See [`Args::max_domains`].
    pub max_domains: usize,
    /// See [`Args::allow_whole_bundle`].
    pub allow_whole_bundle: bool,
}

/// Parses the arguments.
pub fn settings(a: &Arguments) -> Result<Settings, ArgsError> {
    let a: Args = parse_args(a)?;
    let max_domains = match a.max_domains {
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => DEFAULT_MAX_DOMAINS,
    };
    Ok(Settings { max_domains, allow_whole_bundle: a.allow_whole_bundle.unwrap_or(true) })
}

/// Runs `gangpreempt` (`EvictionKind::GangPreempt`) or `gangreclaim`.
pub(crate) fn execute(ssn: &mut Session, kind: EvictionKind, settings: Settings) {
    let mut work = Worklist::new(ssn);
    for i in 0..ssn.snap.jobs.len() {
        let j = JobId(i as u32);
        if ssn.snap.job(j).is_pending() || ssn.job_valid(j).is_some() {
            continue;
        }
        work.add_queue(ssn, ssn.snap.job(j).queue);
        if ssn.job_starving(j) && !pending(ssn, j).is_empty() {
            work.add_job(ssn, j, None);
        }
    }
    let topo = ssn.snap.topology_shared();
    let mut ranks = Ranks::default();
    while let Some(q) = work.pop_queue(ssn) {
        if kind == EvictionKind::GangReclaim && ssn.overused(q) {
            tracing::debug!(queue = %ssn.snap.queue(q).name, "overused queue reclaims nothing");
            while let Some(j) = work.pop_job(ssn, q) {
                ssn.record_eviction_try(j, EvictionTry::QueueOverused);
            }
            continue;
        }
        while let Some(j) = work.pop_job(ssn, q) {
            let outcome = match evict_for(ssn, &topo, &mut ranks, kind, settings, q, j) {
                Ok(stmt) if ssn.job_pipelined(j) => {
                    let victims = stmt.victims.clone();
                    stmt.stmt.commit(ssn);
                    let mut touched: Vec<JobId> = victims.iter().filter_map(|v| ssn.snap.task(*v).job).collect();
                    touched.push(j);
                    touched.sort_unstable();
                    touched.dedup();
                    for v in touched {
                        ranks.reposition(ssn, v);
                        ranks.offers.remove(&v);
                    }
                    EvictionTry::Committed
                }
                Ok(stmt) => {
                    stmt.stmt.discard(ssn);
                    EvictionTry::NoRoom
                }
                Err(outcome) => outcome,
            };
            ssn.record_eviction_try(j, outcome);
        }
    }
}

/// The job's pending pods that eviction makes room for: not gated, with a request, in
/// task order.
fn pending(ssn: &Session, j: JobId) -> Vec<TaskId> {
    let mut out: Vec<TaskId> = ssn
        .snap
        .job(j)
        .tasks
        .iter()
        .copied()
        .filter(|t| {
            let task = ssn.snap.task(*t);
            task.status == TaskStatus::Pending && !task.sch_gated && !task.best_effort
        })
        .collect();
    out.sort_by(|a, b| ssn.task_order(*a, *b));
    out
}

/// A domain's plan carried out: the statement (evictions and pipelined pods) and the
/// victims.
pub(crate) struct Done {
    stmt: Statement,
    victims: Vec<TaskId>,
}

/// Tries the job's domains in order; the first that makes room gives the statement.
fn evict_for(
    ssn: &mut Session,
    topo: &Topology,
    ranks: &mut Ranks,
    kind: EvictionKind,
    settings: Settings,
    q: QueueId,
    j: JobId,
) -> Result<Done, EvictionTry> {
    let pending = pending(ssn, j);
    if pending.iter().any(|t| ssn.snap.task(*t).preemption_never) {
        return Err(EvictionTry::NoCandidates);
    }
    if kind == EvictionKind::GangReclaim && !pending.iter().all(|t| ssn.preemptive(q, *t)) {
        return Err(EvictionTry::QueueLimit);
    }
    let mut candidates = false;
    // Volcano's network-topology-aware plugin caps the HyperNodes of a hard constraint
    // (`hypernode.gradient.evict.max-hypernodes`) before the action takes `maxDomains`.
    let max = ssn.evict_hyper_nodes().map_or(settings.max_domains, |cap| cap.min(settings.max_domains));
    for h in domains(ssn, topo, j, &pending, max) {
        let ctx = EvictionContext { kind, job: j, task: pending[0], hyper_node: h };
        match try_domain(ssn, topo, ranks, &ctx, settings, q, &pending, &mut candidates) {
            Some(done) => return Ok(done),
            None => continue,
        }
    }
    Err(if candidates { EvictionTry::NoRoom } else { EvictionTry::NoCandidates })
}

/// The domains to try for job `j`: the virtual top (the whole cluster) unless the job has a
/// hard network topology constraint; else the HyperNodes of at most its tier (within the
/// one its placed pods allow) whose allocatable resources hold its minimum, widest tier
/// first, then the one whose free resources cover most of what the pending pods ask, then
/// by name; at most `max`.
fn domains(ssn: &Session, topo: &Topology, j: JobId, pending: &[TaskId], max: usize) -> Vec<HyperNodeId> {
    let pg = ssn.snap.job(j).pod_group.clone();
    let c = match topology::constraint(pg.spec.network_topology.as_ref(), topo) {
        Ok(c) => c,
        Err(_) => return Vec::new(),
    };
    let Some(c) = c.filter(|c| c.hard) else { return vec![topo.top()] };
    let at = topology::placed_at(ssn, j, topology::Pods::Job, topo);
    let Ok(root) = topology::search_root(topo, at, c.highest_tier, topo.top(), "the job") else { return Vec::new() };
    let min = ssn.snap.job(j).min_resources.clone();
    let mut need = Resource::empty();
    for t in pending {
        need.add(&ssn.snap.task(*t).resreq);
    }
    let mut found: Vec<(u32, f64, HyperNodeId)> = Vec::new();
    let mut stack = vec![root];
    while let Some(h) = stack.pop() {
        let info = topo.get(h);
        stack.extend(info.children.iter().copied());
        if info.tier > c.highest_tier || h == topo.top() {
            continue;
        }
        let (mut allocatable, mut free) = (Resource::empty(), Resource::empty());
        for n in &info.nodes {
            let node = ssn.snap.node(*n);
            allocatable.add(&node.allocatable);
            free.add(&node.future_idle());
        }
        if min.as_ref().is_some_and(|m| !m.less_equal(&allocatable, DimensionDefault::Zero)) {
            continue;
        }
        found.push((info.tier, covered(&free, &need), h));
    }
    found.sort_by(|a, b| {
        b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then_with(|| topo.get(a.2).name.cmp(&topo.get(b.2).name))
    });
    found.into_iter().take(max).map(|(_, _, h)| h).collect()
}

/// Σ over the dimensions `need` asks for (pods aside) of min(have, need) / need.
fn covered(have: &Resource, need: &Resource) -> f64 {
    need.dims().filter(|(d, v)| *d != PODS && *v > 0.0).map(|(d, v)| have.get(d).min(v) / v).sum()
}

/// Σ over the dimensions `need` asks for (pods aside) of have / need.
fn cost(have: &Resource, need: &Resource) -> f64 {
    need.dims().filter(|(d, v)| *d != PODS && *v > 0.0).map(|(d, v)| have.get(d) / v).sum()
}

/// Per queue, the jobs that hold a pod that could be evicted and do not refuse eviction, in
/// victim order (the reverse of job order): sorted once when an action first needs the
/// queue, and kept sorted by moving the jobs a committed eviction changed (a job's rank in
/// job order depends on that job's own state only, for every in-tree plugin). With them,
/// each victim job's [`Offer`] per domain, kept until an eviction commits on the job.
#[derive(Default)]
struct Ranks {
    lists: HashMap<QueueId, Vec<JobId>>,
    offers: Offers,
}

fn holds_victim(ssn: &Session, j: JobId) -> bool {
    !job_refuses_eviction(ssn, j)
        && ssn.snap.job(j).tasks.iter().any(|t| {
            let task = ssn.snap.task(*t);
            task.status.is_preemptable() && task.preemptable && task.node.is_some()
        })
}

impl Ranks {
    fn list(&mut self, ssn: &Session, q: QueueId) -> &[JobId] {
        self.lists.entry(q).or_insert_with(|| {
            let mut jobs: Vec<JobId> = (0..ssn.snap.jobs.len() as u32)
                .map(JobId)
                .filter(|j| ssn.snap.job(*j).queue == q && holds_victim(ssn, *j))
                .collect();
            jobs.sort_by(|a, b| ssn.job_order(*b, *a));
            jobs
        })
    }

    fn reposition(&mut self, ssn: &Session, j: JobId) {
        let Some(list) = self.lists.get_mut(&ssn.snap.job(j).queue) else { return };
        list.retain(|x| *x != j);
        if holds_victim(ssn, j) {
            let at = list.partition_point(|x| ssn.job_order(j, *x).is_lt());
            list.insert(at, j);
        }
    }
}

/// What a victim job offers in one domain: its safe bundle, and its whole bundle (with what
/// the whole bundle and the safe one use, in the domain and anywhere, for gangreclaim's
/// efficiency). Both depend on the job's own pods only (their status, node and task order),
/// so they are computed once per domain and kept until an eviction commits on the job.
struct Offer {
    safe: Vec<TaskId>,
    whole: Option<Whole>,
}

struct Whole {
    tasks: Vec<TaskId>,
    local: Resource,
    global: Resource,
}

type Offers = HashMap<JobId, Vec<(HyperNodeId, Rc<Offer>)>>;

/// A run of victims taken together.
#[derive(Clone, Debug)]
struct Bundle {
    job: JobId,
    whole: bool,
    tasks: Vec<TaskId>,
}

/// Whether the PodGroup says its pods may not be evicted (the `volcano.sh/preemptable`
/// annotation or label set to false; unset allows, as in Volcano's gang-aware eviction).
fn job_refuses_eviction(ssn: &Session, v: JobId) -> bool {
    let job = ssn.snap.job(v);
    let meta = &job.pod_group.metadata;
    let set = meta.annotations.as_ref().is_some_and(|a| a.contains_key(PREEMPTABLE_KEY))
        || meta.labels.as_ref().is_some_and(|l| l.contains_key(PREEMPTABLE_KEY));
    set && !job.preemptable
}

/// What a victim job's sub-groups let its safe bundle take: a pod may leave a ready
/// sub-group while the sub-group keeps `subGroupSize` placed pods, or when it is the
/// sub-group's last placed pod and its policy keeps `minSubGroups` ready sub-groups; a pod
/// of a sub-group already short of its size, or of no sub-group, always. A sub-group is never
/// left short with its other pods still running (the whole bundle takes it apart, if
/// anything does). `None` when the job's sub-groups are not ready anyway.
struct SubGroupBudget<'a> {
    groups: &'a SubGroups,
    /// Each sub-group's placed pods (and pending best-effort ones).
    have: Vec<i32>,
    /// Per policy, ready sub-groups beyond `minSubGroups`.
    spare: Vec<i32>,
}

impl<'a> SubGroupBudget<'a> {
    fn of(groups: &'a SubGroups) -> Option<Self> {
        if !groups.ready() {
            return None;
        }
        let have: Vec<i32> =
            groups.groups.iter().map(|g| g.counts.ready_task_num() + g.counts.pending_best_effort as i32).collect();
        let mut spare: Vec<i32> = groups.policies.iter().map(|p| -p.min_sub_groups).collect();
        for (i, g) in groups.live() {
            if have[i as usize] >= g.min_available {
                spare[g.policy as usize] += 1;
            }
        }
        Some(SubGroupBudget { groups, have, spare })
    }

    /// Whether a placed pod of sub-group `g` may go; if so, it is counted out.
    fn take(&mut self, g: Option<u32>) -> bool {
        let Some(g) = g else { return true };
        let info = &self.groups.groups[g as usize];
        let (have, min) = (self.have[g as usize], info.min_available);
        let policy = info.policy as usize;
        // Short already, or above its size: the sub-group stays as it is (broken, or whole).
        // At its size, only its last pod may go, and only if the policy spares a sub-group.
        let allowed = if have != min {
            true
        } else if have != 1 {
            false
        } else if self.groups.policies[policy].min_sub_groups <= 0 {
            true
        } else if self.spare[policy] > 0 {
            self.spare[policy] -= 1;
            true
        } else {
            false
        };
        if allowed {
            self.have[g as usize] -= 1;
        }
        allowed
    }
}

/// Gives the bundles of a domain in order, lazily: the safe bundles, then the whole ones.
struct Bundles<'a> {
    topo: &'a Topology,
    ctx: EvictionContext,
    allow_whole: bool,
    need: Resource,
    /// Victim queues in victim queue order, each with its jobs in victim order.
    queues: Vec<Vec<JobId>>,
    /// Whole bundles pass (after the safe ones).
    whole_pass: bool,
    at: (usize, usize),
    /// The whole bundles of the current queue, in order (whole pass).
    wholes: VecDeque<(JobId, Rc<Offer>)>,
    /// The victim jobs' offers, kept across the action.
    offers: &'a mut Offers,
}

impl Bundles<'_> {
    fn local(&self, n: Option<NodeId>) -> bool {
        n.is_some_and(|n| self.ctx.hyper_node == self.topo.top() || self.topo.holds(self.ctx.hyper_node, n))
    }

    fn eligible(&self, ssn: &Session, t: TaskId) -> bool {
        let task = ssn.snap.task(t);
        let status_ok = match self.ctx.kind {
            EvictionKind::GangPreempt => task.status.is_preemptable(),
            EvictionKind::GangReclaim => task.status == TaskStatus::Running,
        };
        status_ok && task.preemptable && task.node.is_some()
    }

    /// The job's pods in victim order (the reverse of task order).
    fn in_victim_order(ssn: &Session, mut tasks: Vec<TaskId>) -> Vec<TaskId> {
        tasks.sort_by(|a, b| ssn.task_order(*b, *a));
        tasks
    }

    /// The safe bundle of `v` in the domain: its pods here that it can lose and stay at its
    /// minimum (and each role's), or all of them when it is already below its minimum.
    fn safe(&self, ssn: &Session, v: JobId) -> Vec<TaskId> {
        let job = ssn.snap.job(v);
        let mut surplus = job.ready_task_num() - job.min_available;
        if surplus == 0 {
            return Vec::new();
        }
        let local: Vec<TaskId> = job
            .tasks
            .iter()
            .copied()
            .filter(|t| self.eligible(ssn, *t) && self.local(ssn.snap.task(*t).node))
            .collect();
        if local.is_empty() {
            return local;
        }
        let local = Self::in_victim_order(ssn, local);
        if surplus < 0 {
            return local;
        }
        let enforce_roles = !job.task_min_available.is_empty() && job.min_available >= job.task_min_available_total;
        let mut role_surplus: HashMap<&str, i32> = HashMap::new();
        if enforce_roles {
            for t in &job.tasks {
                let task = ssn.snap.task(*t);
                let ready = task.status.is_allocated()
                    || task.status == TaskStatus::Succeeded
                    || (task.status == TaskStatus::Pending && task.best_effort);
                if ready {
                    *role_surplus.entry(task.role.as_str()).or_default() += 1;
                }
            }
            for (role, min) in &job.task_min_available {
                *role_surplus.entry(role.as_str()).or_default() -= *min;
            }
        }
        let mut groups = job.sub_groups.as_deref().and_then(SubGroupBudget::of);
        let mut safe = Vec::new();
        for t in local {
            if surplus <= 0 {
                break;
            }
            let task = ssn.snap.task(t);
            let role = task.role.as_str();
            let limited = enforce_roles && job.task_min_available.contains_key(role);
            if limited && role_surplus.get(role).copied().unwrap_or(0) <= 0 {
                continue;
            }
            if let Some(b) = &mut groups {
                if !b.take(task.sub_group) {
                    continue;
                }
            }
            if limited {
                *role_surplus.get_mut(role).expect("counted") -= 1;
            }
            surplus -= 1;
            safe.push(t);
        }
        safe
    }

    /// The whole bundle of `v`, given its safe bundle: every pod it still holds, anywhere,
    /// but the safe ones; `None` when one of them cannot be evicted, or none runs in the
    /// domain.
    fn whole(&self, ssn: &Session, v: JobId, safe: &[TaskId]) -> Option<Whole> {
        let job = ssn.snap.job(v);
        let mut tasks = Vec::new();
        let mut here = false;
        let (mut local, mut global) = (Resource::empty(), Resource::empty());
        for &t in &job.tasks {
            let task = ssn.snap.task(t);
            if !(task.status.is_allocated() || task.status == TaskStatus::Pipelined) {
                continue;
            }
            if !self.eligible(ssn, t) {
                return None;
            }
            here |= self.local(task.node);
            if !safe.contains(&t) {
                tasks.push(t);
            }
        }
        if !here || tasks.is_empty() {
            return None;
        }
        for t in tasks.iter().chain(safe) {
            let task = ssn.snap.task(*t);
            global.add(&task.resreq);
            if self.local(task.node) {
                local.add(&task.resreq);
            }
        }
        Some(Whole { tasks: Self::in_victim_order(ssn, tasks), local, global })
    }

    /// `v`'s offer in this domain, computed on first use.
    fn offer(&mut self, ssn: &Session, v: JobId) -> Rc<Offer> {
        let h = self.ctx.hyper_node;
        if let Some((_, o)) = self.offers.get(&v).and_then(|l| l.iter().find(|(d, _)| *d == h)) {
            return o.clone();
        }
        let safe = self.safe(ssn, v);
        let whole = if self.allow_whole { self.whole(ssn, v, &safe) } else { None };
        let o = Rc::new(Offer { safe, whole });
        self.offers.entry(v).or_default().push((h, o.clone()));
        o
    }

    /// Local gain over global disruption of a whole bundle (Volcano's efficiency).
    fn efficiency(&self, w: &Whole) -> f64 {
        let c = cost(&w.global, &self.need);
        if c == 0.0 {
            f64::INFINITY
        } else {
            covered(&w.local, &self.need) / c
        }
    }

    fn next(&mut self, ssn: &Session) -> Option<Bundle> {
        loop {
            if let Some((job, o)) = self.wholes.pop_front() {
                let tasks = o.whole.as_ref().expect("whole offers only").tasks.clone();
                return Some(Bundle { job, whole: true, tasks });
            }
            let (qi, ji) = self.at;
            if qi >= self.queues.len() {
                if self.whole_pass || !self.allow_whole {
                    return None;
                }
                self.whole_pass = true;
                self.at = (0, 0);
                continue;
            }
            if self.whole_pass {
                // A queue's whole bundles at once: gangreclaim orders them by efficiency.
                let mut wholes: Vec<(usize, JobId, Rc<Offer>)> = Vec::new();
                for rank in 0..self.queues[qi].len() {
                    let v = self.queues[qi][rank];
                    let o = self.offer(ssn, v);
                    if o.whole.is_some() {
                        wholes.push((rank, v, o));
                    }
                }
                if self.ctx.kind == EvictionKind::GangReclaim {
                    let mut keyed: Vec<(f64, usize, JobId, Rc<Offer>)> = wholes
                        .into_iter()
                        .map(|(r, v, o)| (self.efficiency(o.whole.as_ref().expect("whole offers only")), r, v, o))
                        .collect();
                    keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                    self.wholes = keyed.into_iter().map(|(_, _, v, o)| (v, o)).collect();
                } else {
                    self.wholes = wholes.into_iter().map(|(_, v, o)| (v, o)).collect();
                }
                self.at = (qi + 1, 0);
                continue;
            }
            let Some(&v) = self.queues[qi].get(ji) else {
                self.at = (qi + 1, 0);
                continue;
            };
            self.at = (qi, ji + 1);
            let o = self.offer(ssn, v);
            if o.safe.is_empty() {
                continue;
            }
            return Some(Bundle { job: v, whole: false, tasks: o.safe.clone() });
        }
    }
}

/// The bundles of [`Bundles`] after the plugins' vote, asked on growing prefixes of the
/// ordered pods (each time at least twice as many): a pod's answer is the one of the first
/// prefix that holds it.
struct Voted<'a> {
    bundles: Bundles<'a>,
    flat: Vec<TaskId>,
    /// Bundles given by `bundles` and not yet taken, with the end of their pods in `flat`.
    ahead: VecDeque<(Bundle, usize)>,
    asked: usize,
    allowed: HashSet<TaskId>,
    /// Some bundle was given (the domain has candidates).
    any: bool,
}

impl Voted<'_> {
    fn pull(&mut self, ssn: &Session) -> bool {
        match self.bundles.next(ssn) {
            Some(b) => {
                self.any = true;
                self.flat.extend_from_slice(&b.tasks);
                self.ahead.push_back((b, self.flat.len()));
                true
            }
            None => false,
        }
    }

    fn next(&mut self, ssn: &Session) -> Option<Bundle> {
        loop {
            if self.ahead.is_empty() && !self.pull(ssn) {
                return None;
            }
            let end = self.ahead.front().expect("pulled").1;
            if end > self.asked {
                let target = end.max(2 * self.asked).max(64);
                while self.flat.len() < target && self.pull(ssn) {}
                let answer: HashSet<TaskId> = ssn.evictable(&self.bundles.ctx, &self.flat).into_iter().collect();
                self.allowed.extend(self.flat[self.asked..].iter().copied().filter(|t| answer.contains(t)));
                self.asked = self.flat.len();
            }
            let (mut b, _) = self.ahead.pop_front().expect("pulled");
            if b.whole {
                let o = self.bundles.offer(ssn, b.job);
                if b.tasks.iter().chain(&o.safe).all(|t| self.allowed.contains(t)) {
                    return Some(b);
                }
                continue;
            }
            b.tasks.retain(|t| self.allowed.contains(t));
            if !b.tasks.is_empty() {
                return Some(b);
            }
        }
    }
}

/// The placement being planned: resources freed and taken per node (the session is not
/// changed while victims are chosen).
struct Plan<'a> {
    ssn: &'a Session,
    freed: HashMap<NodeId, Resource>,
    placed: HashMap<NodeId, Resource>,
    remaining: Vec<TaskId>,
    placements: Vec<(TaskId, NodeId)>,
    passes: HashMap<(TaskId, NodeId), bool>,
}

impl Plan<'_> {
    fn room(&self, n: NodeId, without: Option<&Resource>) -> Resource {
        let mut r = self.ssn.snap.node(n).future_idle();
        if let Some(f) = self.freed.get(&n) {
            r.add(f);
        }
        if let Some(w) = without {
            r.sub_unchecked(w);
        }
        r
    }

    /// Frees a victim's request on its node and tries the pods not placed yet there.
    fn free(&mut self, v: TaskId, n: NodeId) {
        self.freed.entry(n).or_insert_with(Resource::empty).add(&self.ssn.snap.task(v).resreq);
        let mut i = 0;
        while i < self.remaining.len() {
            let t = self.remaining[i];
            let mut room = self.room(n, None);
            if let Some(p) = self.placed.get(&n) {
                room.sub_unchecked(p);
            }
            let req = &self.ssn.snap.task(t).resreq;
            let passes = *self.passes.entry((t, n)).or_insert_with(|| self.ssn.predicate_for_eviction(t, n).is_ok());
            if passes && req.less_equal(&room, DimensionDefault::Zero) {
                self.placed.entry(n).or_insert_with(Resource::empty).add(req);
                self.placements.push((t, n));
                self.remaining.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Whether the placements still fit once the unit's pods on these nodes keep running.
    fn may_give_back(&self, unit: &HashMap<NodeId, Resource>) -> bool {
        unit.iter().all(|(n, r)| match self.placed.get(n) {
            None => true,
            Some(p) => p.less_equal(&self.room(*n, Some(r)), DimensionDefault::Zero),
        })
    }
}

/// A victim chosen: one safe pod, or a whole job (with its safe pods taken before).
struct Unit {
    job: JobId,
    whole: bool,
    tasks: Vec<TaskId>,
}

/// Plans and carries out the eviction for the job in one domain; `None` (nothing changed)
/// when the domain cannot make room for all its pending pods.
#[allow(clippy::too_many_arguments)]
fn try_domain(
    ssn: &mut Session,
    topo: &Topology,
    ranks: &mut Ranks,
    ctx: &EvictionContext,
    settings: Settings,
    q: QueueId,
    pending: &[TaskId],
    candidates: &mut bool,
) -> Option<Done> {
    let j = ctx.job;
    let h = ctx.hyper_node;
    // 1. What fits without eviction, as allocate places it within the domain.
    let mut stmt = Statement::new();
    let mut remaining = Vec::new();
    for &t in pending {
        let choice = if ssn.allocatable(q, t) && ssn.pre_predicate(t).is_ok() {
            topology::select_node_in(ssn, topo, h, t).ok()
        } else {
            None
        };
        match choice {
            Some(NodeChoice::Idle(n) | NodeChoice::Future(n)) => stmt.pipeline(ssn, t, n),
            None => remaining.push(t),
        }
    }
    if remaining.is_empty() {
        return Some(Done { stmt, victims: Vec::new() });
    }
    if remaining.iter().any(|t| ssn.pre_predicate(*t).is_err()) {
        stmt.discard(ssn);
        return None;
    }

    // 2–4. Victims, bundle by bundle, until every pending pod has a node.
    let chosen = {
        let queues: Vec<Vec<JobId>> = match ctx.kind {
            EvictionKind::GangPreempt => {
                let priority = ssn.snap.job(j).priority;
                let jobs = ranks
                    .list(ssn, q)
                    .iter()
                    .copied()
                    .filter(|v| *v != j && ssn.snap.job(*v).priority < priority)
                    .collect();
                vec![jobs]
            }
            EvictionKind::GangReclaim => {
                let mut victim_queues: Vec<QueueId> = (0..ssn.snap.queues.len() as u32)
                    .map(QueueId)
                    .filter(|vq| *vq != q && ssn.snap.queue(*vq).reclaimable)
                    .collect();
                victim_queues.sort_by(|a, b| ssn.victim_queue_order(*a, *b, q).then(a.cmp(b)));
                victim_queues.into_iter().map(|vq| ranks.list(ssn, vq).to_vec()).collect()
            }
        };
        let mut need = Resource::empty();
        for t in &remaining {
            need.add(&ssn.snap.task(*t).resreq);
        }
        let session: &Session = ssn;
        let mut voted = Voted {
            bundles: Bundles {
                topo,
                ctx: *ctx,
                allow_whole: settings.allow_whole_bundle,
                need,
                queues,
                whole_pass: false,
                at: (0, 0),
                wholes: VecDeque::new(),
                offers: &mut ranks.offers,
            },
            flat: Vec::new(),
            ahead: VecDeque::new(),
            asked: 0,
            allowed: HashSet::new(),
            any: false,
        };
        let mut plan = Plan {
            ssn: session,
            freed: HashMap::new(),
            placed: HashMap::new(),
            remaining,
            placements: Vec::new(),
            passes: HashMap::new(),
        };
        let mut units: Vec<Unit> = Vec::new();
        let mut taken: HashSet<TaskId> = HashSet::new();
        while !plan.remaining.is_empty() {
            let Some(b) = voted.next(session) else { break };
            if b.whole {
                // The job's safe pods taken before go with it: the gang goes whole.
                let mut tasks: Vec<TaskId> = Vec::new();
                units.retain_mut(|u| {
                    if u.job == b.job && !u.whole {
                        tasks.append(&mut u.tasks);
                        false
                    } else {
                        true
                    }
                });
                for &v in &b.tasks {
                    if taken.insert(v) {
                        tasks.push(v);
                        let n = session.snap.task(v).node.expect("victims run on a node");
                        if voted.bundles.local(Some(n)) {
                            plan.free(v, n);
                        }
                    }
                }
                units.push(Unit { job: b.job, whole: true, tasks });
            } else {
                for &v in &b.tasks {
                    if plan.remaining.is_empty() {
                        break;
                    }
                    if !taken.insert(v) {
                        continue;
                    }
                    units.push(Unit { job: b.job, whole: false, tasks: vec![v] });
                    plan.free(v, session.snap.task(v).node.expect("victims run on a node"));
                }
            }
        }
        *candidates |= voted.any;
        if !plan.remaining.is_empty() {
            None
        } else {
            // 5. Give back, latest first, every victim no placement needs.
            let mut kept: Vec<bool> = vec![true; units.len()];
            for i in (0..units.len()).rev() {
                let mut on: HashMap<NodeId, Resource> = HashMap::new();
                for &v in &units[i].tasks {
                    let task = session.snap.task(v);
                    let n = task.node.expect("victims run on a node");
                    if voted.bundles.local(Some(n)) {
                        on.entry(n).or_insert_with(Resource::empty).add(&task.resreq);
                    }
                }
                if plan.may_give_back(&on) {
                    kept[i] = false;
                    for (n, r) in on {
                        plan.freed.get_mut(&n).expect("freed above").sub_unchecked(&r);
                    }
                }
            }
            let victims: Vec<TaskId> =
                units.iter().zip(&kept).filter(|(_, k)| **k).flat_map(|(u, _)| u.tasks.iter().copied()).collect();
            Some((victims, plan.placements))
        }
    };
    let Some((victims, placements)) = chosen else {
        stmt.discard(ssn);
        return None;
    };

    // 6. Evict, then pipeline the pods onto the freed nodes.
    let reason = match ctx.kind {
        EvictionKind::GangPreempt => "gangpreempt",
        EvictionKind::GangReclaim => "gangreclaim",
    };
    for &v in &victims {
        stmt.evict(ssn, v, reason);
    }
    for (t, n) in placements {
        let fits = ssn.snap.node(n).fits_future(&ssn.snap.task(t).resreq)
            && ssn.allocatable(q, t)
            && ssn.predicate(t, n).is_ok();
        if !fits {
            tracing::debug!(task = %ssn.snap.task(t).key, node = %ssn.snap.node(n).name, "gang eviction: the planned node does not take the pod");
            stmt.discard(ssn);
            return None;
        }
        stmt.pipeline(ssn, t, n);
    }
    tracing::debug!(
        job = %ssn.snap.job(j).key,
        hyper_node = %topo.get(h).name,
        victims = victims.len(),
        "gang eviction: room made"
    );
    Some(Done { stmt, victims })
}

#[cfg(test)]
mod tests {
    use volcano_framework::{run_cycle, CycleContext, Effect, NoObserver, Profile, Registries, SessionOptions};
    use volcano_testkit::{hyper_node, node, pod, pod_group, Objects};

    fn conf(max_domains: Option<i64>) -> String {
        conf_with(max_domains, "")
    }

    /// The configuration with `plugin` (YAML lines of the second tier's list) added.
    fn conf_with(max_domains: Option<i64>, plugin: &str) -> String {
        let mut c = String::from(
            "actions: \"enqueue, allocate, gangpreempt, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n",
        );
        c.push_str(plugin);
        if let Some(m) = max_domains {
            c.push_str(&format!("configurations:\n- name: gangpreempt\n  arguments:\n    maxDomains: {m}\n"));
        }
        c
    }

    /// (pod, node) pairs.
    type Pairs = Vec<(String, String)>;

    /// Evictions and pipelined pods of one cycle.
    fn cycle(o: Objects, max_domains: Option<i64>) -> (Pairs, Pairs) {
        cycle_conf(o, &conf(max_domains))
    }

    fn cycle_conf(o: Objects, conf: &str) -> (Pairs, Pairs) {
        let reg = Registries { plugins: volcano_plugins::in_tree(), actions: crate::in_tree() };
        let profile = Profile::from_yaml(conf, &reg).unwrap();
        let cx = CycleContext { cycle: 1, now_ms: 1_700_000_100_000, options: SessionOptions::default() };
        let out = run_cycle(o.snapshot(), &profile, &cx, &mut NoObserver);
        let (mut evicted, mut pipelined) = (Vec::new(), Vec::new());
        for e in out.effects {
            match e {
                Effect::Evict { pod, node, action, .. } => {
                    assert_eq!(action, "gangpreempt");
                    evicted.push((pod.name().to_string(), node.to_string()));
                }
                Effect::Pipeline { pod, node } => pipelined.push((pod.name().to_string(), node.to_string())),
                _ => {}
            }
        }
        evicted.sort();
        pipelined.sort();
        (evicted, pipelined)
    }

    /// Leaves s1 = {n1, n2} and s2 = {n3, n4} (tier 1) under spine (tier 2); every node
    /// 2 cpu. `low` (priority 10, minMember 1) runs a 2-cpu pod on each node of `placement`,
    /// in order; `urgent` (priority 100) asks for two 2-cpu pods, with the constraint.
    fn cluster(placement: &[&str], topology: Option<(&str, Option<i32>)>) -> Objects {
        let mut o = Objects::new().priority_class("high", 100).priority_class("low", 10);
        for n in ["n1", "n2", "n3", "n4"] {
            o = o.node(node(n, "2", "16Gi"));
        }
        o = o
            .hyper_node(hyper_node("s1", 1, &[("Node", "n1"), ("Node", "n2")]))
            .hyper_node(hyper_node("s2", 1, &[("Node", "n3"), ("Node", "n4")]))
            .hyper_node(hyper_node("spine", 2, &[("HyperNode", "s1"), ("HyperNode", "s2")]));
        o = o
            .pod_group(pod_group("ns", "low", 1).priority_class("low").phase(volcano_api::crd::PodGroupPhase::Running));
        for (k, n) in placement.iter().enumerate() {
            o = o.pod(pod("ns", &format!("low-{k}")).group("low").cpu_mem("2", "1Gi").priority(10).running_on(n));
        }
        let mut pg = pod_group("ns", "urgent", 2).priority_class("high");
        if let Some((mode, tier)) = topology {
            pg = pg.network_topology(mode, tier);
        }
        o = o.pod_group(pg);
        for k in 0..2 {
            o = o.pod(pod("ns", &format!("urgent-{k}")).group("urgent").cpu_mem("2", "1Gi").priority(100));
        }
        o
    }

    fn pairs(v: &[(&str, &str)]) -> Pairs {
        v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn without_a_constraint_the_victims_come_in_victim_order_across_leaves() {
        // Victim order is the reverse of task order: low-3 (n4), low-2 (n2).
        let (evicted, pipelined) = cycle(cluster(&["n1", "n3", "n2", "n4"], None), None);
        assert_eq!(evicted, pairs(&[("low-2", "n2"), ("low-3", "n4")]));
        assert_eq!(pipelined, pairs(&[("urgent-0", "n4"), ("urgent-1", "n2")]));
    }

    #[test]
    fn a_hard_constraint_takes_victims_and_nodes_within_one_hyper_node() {
        let (evicted, pipelined) = cycle(cluster(&["n1", "n3", "n2", "n4"], Some(("hard", Some(1)))), None);
        // s1 and s2 both hold the job; s1 comes first by name. Its victims only.
        assert_eq!(evicted, pairs(&[("low-0", "n1"), ("low-2", "n2")]));
        assert_eq!(pipelined, pairs(&[("urgent-0", "n2"), ("urgent-1", "n1")]));
    }

    /// s1 cannot make room (a pod of a high-priority job holds n2), s2 can.
    fn only_the_second_leaf_makes_room() -> Objects {
        cluster(&["n1", "n3", "n4"], Some(("hard", Some(1))))
            .pod_group(
                pod_group("ns", "peer", 1).priority_class("high").phase(volcano_api::crd::PodGroupPhase::Running),
            )
            .pod(pod("ns", "peer-0").group("peer").cpu_mem("2", "1Gi").priority(100).running_on("n2"))
    }

    #[test]
    fn the_plugins_max_hyper_nodes_caps_the_domains_as_max_domains_does() {
        let nta = |args: &str| format!("  - name: network-topology-aware\n{args}");
        let cap = |n: i64| nta(&format!("    arguments:\n      hypernode.gradient.evict.max-hypernodes: {n}\n"));
        let on_s2 = |(evicted, pipelined): (Pairs, Pairs)| {
            evicted.len() == 2
                && evicted.iter().chain(&pipelined).all(|(_, n)| n == "n3" || n == "n4")
                && pipelined.len() == 2
        };
        // The plugin at its default (8) leaves both leaves to try: s2 makes room.
        assert!(on_s2(cycle_conf(only_the_second_leaf_makes_room(), &conf_with(None, &nta("")))));
        // Capped at 1: only s1 (the widest tier first, then the roomiest, then by name).
        let (evicted, pipelined) = cycle_conf(only_the_second_leaf_makes_room(), &conf_with(None, &cap(1)));
        assert!(evicted.is_empty() && pipelined.is_empty(), "{evicted:?} {pipelined:?}");
        // Not positive means the default, as in Volcano.
        assert!(on_s2(cycle_conf(only_the_second_leaf_makes_room(), &conf_with(None, &cap(0)))));
        // The smaller of the plugin's cap and maxDomains holds.
        let (evicted, _) = cycle_conf(only_the_second_leaf_makes_room(), &conf_with(Some(1), &cap(2)));
        assert!(evicted.is_empty(), "{evicted:?}");
        assert!(on_s2(cycle_conf(only_the_second_leaf_makes_room(), &conf_with(Some(2), &cap(2)))));
        // With enabledHyperNodeGradient off the plugin's cap is not read (Volcano asks no
        // gradient of it): maxDomains alone.
        let off = "  - name: network-topology-aware\n    enabledHyperNodeGradient: false\n    arguments:\n      hypernode.gradient.evict.max-hypernodes: 1\n";
        assert!(on_s2(cycle_conf(only_the_second_leaf_makes_room(), &conf_with(None, off))));
    }

    #[test]
    fn max_domains_limits_the_hyper_nodes_tried() {
        // s1 cannot make room; s2 can, but with maxDomains 1 only s1 is tried.
        let build = only_the_second_leaf_makes_room;
        let (evicted, pipelined) = cycle(build(), Some(1));
        assert!(evicted.is_empty(), "{evicted:?}");
        assert!(pipelined.is_empty(), "{pipelined:?}");
        let (evicted, pipelined) = cycle(build(), None);
        assert_eq!(evicted.iter().filter(|(_, n)| n == "n3" || n == "n4").count(), evicted.len(), "{evicted:?}");
        assert_eq!(pipelined.len(), 2, "{pipelined:?}");
        assert!(pipelined.iter().all(|(_, n)| n == "n3" || n == "n4"), "{pipelined:?}");
    }

    /// A job of `groups` partitions of `per` running pods each, sub-groups of `size`, of
    /// which the job needs `min`: the budget's answers, pod by pod, in the order given.
    fn takes(groups: usize, per: usize, size: i32, min: i32, order: &[u32]) -> Vec<bool> {
        let mut o = Objects::new()
            .node(node("n1", "64", "256Gi"))
            .pod_group(pod_group("ns", "pg", 1).partition_policy("worker", size, min));
        for i in 0..groups * per {
            let p = pod("ns", &format!("pg-worker-{i}"))
                .group("pg")
                .label("volcano.sh/task-spec", "worker")
                .label("volcano.sh/partition-id", &(i / per).to_string())
                .cpu_mem("1", "1Gi")
                .running_on("n1");
            o = o.pod(p);
        }
        let snap = o.snapshot();
        let groups = snap.job(volcano_framework::JobId(0)).sub_groups.as_deref().expect("sub-groups");
        let Some(mut budget) = super::SubGroupBudget::of(groups) else { return Vec::new() };
        order.iter().map(|g| budget.take(Some(*g))).collect()
    }

    #[test]
    fn the_sub_group_budget_never_leaves_a_sub_group_short_with_pods_running() {
        // Sub-groups of one pod, two of three needed: one may go whole, not two.
        assert_eq!(takes(3, 1, 1, 2, &[0, 1, 2]), [true, false, false]);
        // None needed: each may go.
        assert_eq!(takes(3, 1, 1, 0, &[0, 1, 2]), [true, true, true]);
        // Three pods, size 2: one pod may go, the second would leave one running alone.
        assert_eq!(takes(2, 3, 2, 1, &[0, 0, 0, 1]), [true, false, false, true]);
        // Two pods of size 2: none, whatever the policy spares.
        assert_eq!(takes(3, 2, 2, 1, &[0, 1, 2]), [false, false, false]);
        // The job short of its sub-groups already: no budget (the job is below its minimum).
        assert!(takes(1, 1, 2, 1, &[0]).is_empty());
    }
}
