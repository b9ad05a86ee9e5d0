//! The session: the snapshot, the plugins of this cycle, and Volcano's rules for combining
//! their answers (Volcano's `session_plugins.go`), plus the state changes that actions make (allocate,
//! pipeline, evict and their undo) with the plugin event handlers they fire.

pub mod observer;
pub mod retry;
pub mod select;
mod victims;
pub mod worklist;

use std::cmp::Ordering;

use rayon::prelude::*;
use smallvec::SmallVec;

use crate::effect::Effect;
use crate::model::*;
use crate::plugin::{Admission, Hooks, InvalidJob, Plugin, SessionContext, Vote};
use crate::snapshot::Snapshot;
use crate::status::{Code, FitErrors, Status};
use crate::topology::HyperNodeId;

/// A plugin of this session with the extension points its entry enables.
pub(crate) struct Slot {
    pub(crate) plugin: Box<dyn Plugin>,
    /// Registered by the plugin AND enabled by configuration.
    pub(crate) active: Hooks,
}

/// Tunables of a session that are not part of Volcano's configuration file.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Worker threads for predicates and scoring (1 = sequential). Results are identical
    /// for every value: ties are broken by node order.
    pub parallelism: usize,
    /// Below this many nodes, predicates and scoring run sequentially.
    pub parallel_threshold: usize,
    /// Use the incremental node index when every filtering and scoring plugin allows it
    /// (same placements as a full scan, much faster on large clusters).
    pub node_index: bool,
    /// GPU cards of a placed pod chosen at random (seeded by this and the pod's uid) among
    /// the cards that fit, instead of the fullest first: the FGD paper's Random baseline,
    /// for `volcano-rs replay` (see [`crate::device`]).
    pub card_seed: Option<u64>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { parallelism: 1, parallel_threshold: 256, node_index: true, card_seed: None }
    }
}

/// One scheduling session over a snapshot.
pub struct Session {
    /// The state actions work on.
    pub snap: Snapshot,
    /// Session time, cycle number and UID.
    pub ctx: SessionContext,
    /// Tunables.
    pub options: SessionOptions,
    pub(crate) tiers: Vec<Vec<Slot>>,
    /// Per extension point (by bit of [`Hooks`]): (tier, slot) of the plugins that have it
    /// active, in tier order.
    hooked: Vec<Vec<(usize, usize)>>,
    pub(crate) effects: Vec<Effect>,
    /// Jobs not admitted in this session, with why (events at close).
    pub(crate) admission_rejections: Vec<(JobId, String)>,
    pub(crate) current_action: &'static str,
    /// The node index (`None` only while it answers a question, see [`select`]).
    pub(crate) index: Option<Box<crate::index::NodeIndex>>,
    /// The nodes holding possible victims, built when `preempt` or `reclaim` first asks.
    pub(crate) victims: Option<victims::VictimNodes>,
    /// What the actions did that the metrics count.
    pub(crate) stats: SessionStats,
    /// The failed attempts remembered across sessions ([`retry`]).
    pub(crate) retries: retry::Retries,
}

/// What the actions did that the metrics count (see [`crate::stats::CycleMetrics`]).
#[derive(Debug, Default)]
pub(crate) struct SessionStats {
    pub(crate) preemption_attempts: u64,
    pub(crate) preemption_victims: Option<u64>,
    pub(crate) eviction_transactions: std::collections::BTreeMap<&'static str, u64>,
    /// Per job: a task was bound or pipelined in a committed statement (grown on demand).
    pub(crate) scheduled: Vec<bool>,
    /// The actions run so far, in order.
    pub(crate) actions: Vec<&'static str>,
    /// What `preempt` and `reclaim` concluded for the starving jobs they took (the action,
    /// the job, the outcome), in the order they took them.
    pub(crate) eviction_tries: Vec<(&'static str, JobId, EvictionTry)>,
}

/// What an evicting action (`preempt`, `reclaim`) concluded for a starving job it took; the
/// PodGroup condition message says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionTry {
    /// Victims were evicted (or room found) and the job is pipelined onto the freed nodes.
    Committed,
    /// No node had a pod the action may consider as a victim (a running preemptable pod of
    /// the job's queue for `preempt`, of another reclaimable queue for `reclaim`).
    NoCandidates,
    /// No node where the victims the plugins allow would make room for the job.
    NoRoom,
    /// The job's queue may take no more (the plugins' `preemptive` rule: its capability, its
    /// real capability), so it reclaims nothing for the job's pods.
    QueueLimit,
    /// The job's queue is overused, so it reclaims nothing.
    QueueOverused,
}

impl Session {
    /// Opens a session over fresh plugin instances, tier by tier, each with the extension
    /// points enabled for it (see [`crate::Profile::instantiate`]), and calls their
    /// `on_session_open` in tier order.
    pub fn open(
        snap: Snapshot,
        plugins: Vec<Vec<(Box<dyn Plugin>, Hooks)>>,
        ctx: SessionContext,
        options: SessionOptions,
    ) -> Self {
        Self::open_observed(snap, plugins, ctx, options, &mut observer::NoObserver)
    }

    /// [`Session::open`], telling the observer when each plugin's `on_session_open` starts
    /// and ends.
    pub fn open_observed(
        snap: Snapshot,
        plugins: Vec<Vec<(Box<dyn Plugin>, Hooks)>>,
        ctx: SessionContext,
        options: SessionOptions,
        observer: &mut dyn observer::Observer,
    ) -> Self {
        let tiers: Vec<Vec<Slot>> = plugins
            .into_iter()
            .map(|tier| {
                tier.into_iter()
                    .map(|(plugin, enabled)| {
                        let active = plugin.hooks() & enabled;
                        Slot { plugin, active }
                    })
                    .collect()
            })
            .collect();
        let hooked = (0..Hooks::all().bits().count_ones())
            .map(|bit| {
                let hook = Hooks::from_bits_retain(1 << bit);
                let mut slots = Vec::new();
                for (t, tier) in tiers.iter().enumerate() {
                    for (i, slot) in tier.iter().enumerate() {
                        if slot.active.contains(hook) {
                            slots.push((t, i));
                        }
                    }
                }
                slots
            })
            .collect();
        let index = crate::index::NodeIndex::new(options.node_index);
        // Room for a bind per task and a status per job and queue, so that the effects are
        // never moved while they grow (untouched capacity costs no memory).
        let effects = Vec::with_capacity(snap.tasks.len() + snap.jobs.len() + snap.queues.len());
        let mut snap = snap;
        snap.card_seed = options.card_seed;
        let mut ssn = Session {
            snap,
            ctx,
            options,
            tiers,
            hooked,
            effects,
            admission_rejections: Vec::new(),
            current_action: "",
            index: Some(Box::new(index)),
            victims: None,
            stats: SessionStats::default(),
            retries: retry::Retries::default(),
        };
        for slot in ssn.tiers.iter_mut().flatten() {
            observer.plugin_started(slot.plugin.name(), observer::PluginStage::Open);
            slot.plugin.on_session_open(&ssn.snap, &ssn.ctx);
            observer.plugin_ended(slot.plugin.name(), observer::PluginStage::Open);
        }
        // A session that reads the clock is not a function of its snapshot alone: nothing of
        // it is remembered, nor replayed.
        let clock_free =
            ssn.tiers.iter().flatten().all(|slot| slot.plugin.incremental().is_some_and(|h| !h.reads_clock(&ssn.snap)));
        let known = ssn.snap.take_retries();
        ssn.retries = retry::Retries::new(clock_free, known, ssn.snap.revision());
        ssn
    }

    /// Counts one node the preempt action tried to free, with the victims the plugins
    /// allowed there (`volcano_total_preemption_attempts`, `volcano_pod_preemption_victims`).
    pub fn record_preemption_attempt(&mut self, victims: usize) {
        self.stats.preemption_attempts += 1;
        self.stats.preemption_victims = Some(victims as u64);
    }

    /// The node attempts counted so far, and the victims of the last
    /// ([`Session::record_preemption_attempt`]).
    pub fn preemption_attempts(&self) -> (u64, Option<u64>) {
        (self.stats.preemption_attempts, self.stats.preemption_victims)
    }

    /// Counts again `n` attempts whose last had `last` victims: what an action that skips a
    /// question it already asked reports, so that the metrics are those of asking it.
    pub fn replay_preemption_attempts(&mut self, n: u64, last: Option<u64>) {
        if n > 0 {
            self.stats.preemption_attempts += n;
            self.stats.preemption_victims = last;
        }
    }

    /// Records what the running evicting action concluded for job `j` (see [`EvictionTry`]).
    pub fn record_eviction_try(&mut self, j: JobId, outcome: EvictionTry) {
        self.stats.eviction_tries.push((self.current_action, j, outcome));
    }

    /// Counts a committed statement that evicted pods, under the running action.
    pub(crate) fn record_eviction_transaction(&mut self) {
        *self.stats.eviction_transactions.entry(self.current_action).or_default() += 1;
    }

    /// Marks the job of a task bound or pipelined in a committed statement.
    pub(crate) fn record_scheduled(&mut self, t: TaskId) {
        if let Some(j) = self.snap.task(t).job {
            if self.stats.scheduled.len() <= j.idx() {
                self.stats.scheduled.resize(self.snap.jobs.len().max(j.idx() + 1), false);
            }
            self.stats.scheduled[j.idx()] = true;
        }
    }

    /// The action now running (for eviction effects).
    pub fn current_action(&self) -> &'static str {
        self.current_action
    }

    /// The effects produced so far.
    pub fn effects(&self) -> &[Effect] {
        &self.effects
    }

    /// Records an effect.
    pub fn push_effect(&mut self, e: Effect) {
        self.effects.push(e);
    }

    /// The (tier, slot) of the plugins with this extension point active (one hook bit).
    #[inline]
    fn hooked(&self, hook: Hooks) -> &[(usize, usize)] {
        debug_assert_eq!(hook.bits().count_ones(), 1, "one extension point at a time");
        &self.hooked[hook.bits().trailing_zeros() as usize]
    }

    #[inline]
    pub(crate) fn active(&self, hook: Hooks) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.hooked(hook).iter().map(|&(t, i)| self.tiers[t][i].plugin.as_ref())
    }

    fn active_tiers(&self, hook: Hooks) -> impl Iterator<Item = Vec<&dyn Plugin>> + '_ {
        self.tiers
            .iter()
            .map(move |t| t.iter().filter(|s| s.active.contains(hook)).map(|s| s.plugin.as_ref()).collect())
    }

    // ----- orderings: first non-equal answer wins, then the fallback -----

    /// Job order: `Less` means `l` is scheduled first. Fallback: older PodGroup, then UID.
    pub fn job_order(&self, l: JobId, r: JobId) -> Ordering {
        for p in self.active(Hooks::JOB_ORDER) {
            let c = p.job_order(&self.snap, l, r);
            if c != Ordering::Equal {
                return c;
            }
        }
        let (a, b) = (self.snap.job(l), self.snap.job(r));
        a.creation_ms.cmp(&b.creation_ms).then_with(|| a.uid.cmp(&b.uid))
    }

    /// The plugin whose job order decides between `l` and `r` (the first that does not
    /// abstain); `None` when all abstain and the creation time decides.
    pub fn job_order_decider(&self, l: JobId, r: JobId) -> Option<&'static str> {
        self.active(Hooks::JOB_ORDER).find(|p| p.job_order(&self.snap, l, r) != Ordering::Equal).map(|p| p.name())
    }

    /// Queue order: `Less` means `l` first. Fallback: older queue, then name.
    pub fn queue_order(&self, l: QueueId, r: QueueId) -> Ordering {
        for p in self.active(Hooks::QUEUE_ORDER) {
            let c = p.queue_order(&self.snap, l, r);
            if c != Ordering::Equal {
                return c;
            }
        }
        let (a, b) = (self.snap.queue(l), self.snap.queue(r));
        a.creation_ms.cmp(&b.creation_ms).then_with(|| a.name.cmp(&b.name))
    }

    /// Victim queue order: `Less` means evict from `l` first. Fallback: reverse queue order.
    pub fn victim_queue_order(&self, l: QueueId, r: QueueId, preemptor: QueueId) -> Ordering {
        for p in self.active(Hooks::VICTIM_QUEUE_ORDER) {
            let c = p.victim_queue_order(&self.snap, l, r, preemptor);
            if c != Ordering::Equal {
                return c;
            }
        }
        self.queue_order(r, l)
    }

    /// Task order: `Less` means `l` first. Fallback: pod-name index, creation, UID.
    pub fn task_order(&self, l: TaskId, r: TaskId) -> Ordering {
        for p in self.active(Hooks::TASK_ORDER) {
            let c = p.task_order(&self.snap, l, r);
            if c != Ordering::Equal {
                return c;
            }
        }
        let (a, b) = (self.snap.task(l), self.snap.task(r));
        if let (Some(x), Some(y)) = (a.name_index, b.name_index) {
            if x != y {
                return x.cmp(&y);
            }
        }
        a.creation_ms.cmp(&b.creation_ms).then_with(|| a.uid().cmp(b.uid()))
    }

    // ----- filters and scores -----

    /// All pre-predicates; the first failure is returned.
    pub fn pre_predicate(&self, t: TaskId) -> Result<(), Status> {
        for p in self.active(Hooks::PRE_PREDICATE) {
            p.pre_predicate(&self.snap, t)?;
        }
        Ok(())
    }

    /// All predicates; the first failure is returned.
    pub fn predicate(&self, t: TaskId, n: NodeId) -> Result<(), Status> {
        for p in self.active(Hooks::PREDICATE) {
            p.predicate(&self.snap, t, n)?;
        }
        Ok(())
    }

    /// The predicates as preempt and reclaim use them: only a failure that evicting pods
    /// cannot cure (`UnschedulableAndUnresolvable`) rules the node out.
    pub fn predicate_for_eviction(&self, t: TaskId, n: NodeId) -> Result<(), Status> {
        for p in self.active(Hooks::PREDICATE) {
            if let Err(s) = p.predicate(&self.snap, t, n) {
                if s.code == Code::UnschedulableAndUnresolvable {
                    return Err(s);
                }
            }
        }
        Ok(())
    }

    /// Σ of the plugins' scores of a HyperNode for a job, or one of its sub-groups
    /// ([`Plugin::hyper_node_order`]).
    pub fn hyper_node_score(&self, j: JobId, sub_group: Option<u32>, h: HyperNodeId) -> f64 {
        self.active(Hooks::HYPER_NODE_ORDER).map(|p| p.hyper_node_order(&self.snap, j, sub_group, h)).sum()
    }

    /// The most HyperNodes gang-aware eviction tries for a job with a hard network topology
    /// constraint, if a plugin caps them ([`Plugin::evict_hyper_nodes`]: the first that
    /// answers, in tier order).
    pub fn evict_hyper_nodes(&self) -> Option<usize> {
        self.active(Hooks::HYPER_NODE_GRADIENT).find_map(|p| p.evict_hyper_nodes())
    }

    /// Σ of the per-node scores of every plugin (batch scores aside).
    pub fn node_order_sum(&self, t: TaskId, n: NodeId) -> f64 {
        self.active(Hooks::NODE_ORDER).map(|p| p.node_order(&self.snap, t, n)).sum()
    }

    /// The plugins with any of these extension points active, in tier order.
    pub(crate) fn with_any(&self, hooks: Hooks) -> impl Iterator<Item = &dyn Plugin> + '_ {
        self.tiers.iter().flatten().filter(move |s| s.active.intersects(hooks)).map(|s| s.plugin.as_ref())
    }

    /// Σ node scores of every plugin for each node (node order + batch node order).
    pub fn node_scores(&self, t: TaskId, nodes: &[NodeId]) -> Vec<f64> {
        let per_node = |n: &NodeId| -> f64 { self.node_order_sum(t, *n) };
        let mut scores: Vec<f64> = if self.parallel(nodes.len()) {
            nodes.par_iter().map(per_node).collect()
        } else {
            nodes.iter().map(per_node).collect()
        };
        for p in self.active(Hooks::BATCH_NODE_ORDER) {
            p.batch_node_order(&self.snap, t, nodes, &mut scores);
        }
        scores
    }

    pub(crate) fn parallel(&self, n: usize) -> bool {
        self.options.parallelism > 1 && n >= self.options.parallel_threshold
    }

    /// Runs `fit` and the session predicates over all nodes; returns the feasible nodes in
    /// node order and the reasons of the others.
    pub fn predicate_nodes(
        &self,
        t: TaskId,
        fit: impl Fn(&NodeInfo) -> Result<(), Status> + Sync,
    ) -> (Vec<NodeId>, FitErrors) {
        let check = |i: usize| -> Result<(), Status> {
            let n = NodeId(i as u32);
            fit(self.snap.node(n))?;
            self.predicate(t, n)
        };
        let results: Vec<Result<(), Status>> = if self.parallel(self.snap.nodes.len()) {
            (0..self.snap.nodes.len()).into_par_iter().map(check).collect()
        } else {
            (0..self.snap.nodes.len()).map(check).collect()
        };
        let mut ok = Vec::new();
        let mut errors = FitErrors { nodes: self.snap.nodes.len(), ..Default::default() };
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(()) => ok.push(NodeId(i as u32)),
                Err(s) => errors.add(&s.reason),
            }
        }
        (ok, errors)
    }

    /// The highest-scoring node; ties go to the first node in node (name) order.
    pub fn best_node(&self, t: TaskId, nodes: &[NodeId]) -> Option<NodeId> {
        match nodes.len() {
            0 => None,
            1 => Some(nodes[0]),
            _ => {
                let scores = self.node_scores(t, nodes);
                let mut best = 0;
                for i in 1..nodes.len() {
                    if scores[i] > scores[best] {
                        best = i;
                    }
                }
                Some(nodes[best])
            }
        }
    }

    // ----- job and queue decisions -----

    /// Whether the queue has its share already (any plugin says so).
    pub fn overused(&self, q: QueueId) -> bool {
        self.active(Hooks::OVERUSED).any(|p| p.overused(&self.snap, q))
    }

    /// Whether the queue may take the task (all plugins agree).
    pub fn allocatable(&self, q: QueueId, t: TaskId) -> bool {
        self.active(Hooks::ALLOCATABLE).all(|p| p.allocatable(&self.snap, q, t))
    }

    /// Whether the queue may reclaim for the task (all plugins agree).
    pub fn preemptive(&self, q: QueueId, t: TaskId) -> bool {
        self.active(Hooks::PREEMPTIVE).all(|p| p.preemptive(&self.snap, q, t))
    }

    /// The first plugin that finds the job invalid.
    pub fn job_valid(&self, j: JobId) -> Option<InvalidJob> {
        self.active(Hooks::JOB_VALID).find_map(|p| p.job_valid(&self.snap, j))
    }

    /// Whether the job may be committed (AND over plugins; true if none).
    pub fn job_ready(&self, j: JobId) -> bool {
        self.active(Hooks::JOB_READY).all(|p| p.job_ready(&self.snap, j))
    }

    /// Volcano's voting: any Reject → no (the rejecting plugin is returned); a tier with a
    /// Permit → yes; abstentions pass to the next tier; yes when nobody decided.
    fn vote(&self, hook: Hooks, f: impl Fn(&dyn Plugin) -> Vote) -> Result<(), &'static str> {
        for tier in self.active_tiers(hook) {
            let mut permitted = false;
            for p in tier {
                match f(p) {
                    Vote::Reject => return Err(p.name()),
                    Vote::Permit => permitted = true,
                    Vote::Abstain => {}
                }
            }
            if permitted {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Whether the job's placements may be kept (voting; default true).
    pub fn job_pipelined(&self, j: JobId) -> bool {
        self.vote(Hooks::JOB_PIPELINED, |p| p.job_pipelined(&self.snap, j)).is_ok()
    }

    /// Whether a Pending job may be admitted (voting; default true).
    pub fn job_enqueueable(&self, j: JobId) -> bool {
        self.job_enqueueable_by(j).is_ok()
    }

    /// Like [`Session::job_enqueueable`], with the plugin that rejected the job and why:
    /// per tier, the first rejection wins; a tier with a permit and no rejection admits.
    pub fn job_enqueueable_by(&self, j: JobId) -> Result<(), (&'static str, String)> {
        for tier in self.active_tiers(Hooks::JOB_ENQUEUEABLE) {
            let mut permitted = false;
            for p in tier {
                match p.job_enqueueable(&self.snap, j) {
                    Admission::Reject(why) => return Err((p.name(), why)),
                    Admission::Permit => permitted = true,
                    Admission::Abstain => {}
                }
            }
            if permitted {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Records that a job was not admitted: its waiting reason, and a PodGroup event when the
    /// session closes (one per job, the last reason).
    pub fn reject_admission(&mut self, j: JobId, plugin: &'static str, why: String) {
        self.snap.job_trace_mut(j).job_fit_error = Some(format!("not admitted to its queue ({plugin}): {why}"));
        self.admission_rejections.push((j, why));
    }

    /// Admits a Pending job (phase `Inqueue`).
    pub fn admit(&mut self, j: JobId) {
        self.snap.jobs[j.idx()].phase = volcano_api::crd::PodGroupPhase::Inqueue;
    }

    /// Sets why a job waits (the origin reason of its condition), unless a reason is set.
    pub fn set_job_reason(&mut self, j: JobId, why: String) {
        if self.snap.job_fit_error(j).is_none() {
            self.snap.job_trace_mut(j).job_fit_error = Some(why);
        }
    }

    /// Why the queue refuses the task: the first plugin whose [`Plugin::allocatable`] says no,
    /// and its explanation.
    pub fn allocatable_refusal(&self, q: QueueId, t: TaskId) -> Option<String> {
        let p = self.active(Hooks::ALLOCATABLE).find(|p| !p.allocatable(&self.snap, q, t))?;
        Some(p.allocatable_refusal(&self.snap, q, t).unwrap_or_else(|| format!("queue refused by {}", p.name())))
    }

    /// Tells every plugin that the job was admitted.
    pub fn job_enqueued(&mut self, j: JobId) {
        for slot in self.tiers.iter_mut().flatten() {
            if slot.active.contains(Hooks::JOB_ENQUEUED) {
                slot.plugin.job_enqueued(&self.snap, j);
            }
        }
    }

    /// Whether the job is starving: the first tier with a registered plugin decides
    /// (AND inside the tier); false when none is registered.
    pub fn job_starving(&self, j: JobId) -> bool {
        for tier in self.active_tiers(Hooks::JOB_STARVING) {
            if tier.is_empty() {
                continue;
            }
            return tier.iter().all(|p| p.job_starving(&self.snap, j));
        }
        false
    }

    fn victims(
        &self,
        hook: Hooks,
        f: impl Fn(&dyn Plugin, &[TaskId]) -> Option<Vec<TaskId>>,
        candidates: &[TaskId],
    ) -> Vec<TaskId> {
        for tier in self.active_tiers(hook) {
            let mut victims: Option<Vec<TaskId>> = None;
            for p in tier {
                let Some(found) = f(p, candidates) else { continue };
                if found.is_empty() {
                    victims = None;
                    break;
                }
                // As in Volcano: the first voter (or the first after an empty intersection)
                // starts the list; later voters intersect it.
                victims = match victims {
                    None => Some(found),
                    Some(prev) => {
                        let kept: Vec<TaskId> = if found.len() <= 16 {
                            prev.into_iter().filter(|t| found.contains(t)).collect()
                        } else {
                            let found: std::collections::HashSet<TaskId> = found.into_iter().collect();
                            prev.into_iter().filter(|t| found.contains(t)).collect()
                        };
                        (!kept.is_empty()).then_some(kept)
                    }
                };
            }
            if let Some(v) = victims {
                return v;
            }
        }
        Vec::new()
    }

    /// Each voting plugin's answer on `candidates` as victims of `preemptor` (`hook` is
    /// [`Hooks::PREEMPTABLE`] or [`Hooks::RECLAIMABLE`]): how many it allows, in tier order;
    /// plugins that abstain are left out.
    pub fn victim_votes(&self, hook: Hooks, preemptor: TaskId, candidates: &[TaskId]) -> Vec<(&'static str, usize)> {
        self.active(hook)
            .filter_map(|p| {
                let found = if hook == Hooks::RECLAIMABLE {
                    p.reclaimable(&self.snap, preemptor, candidates)
                } else {
                    p.preemptable(&self.snap, preemptor, candidates)
                };
                found.map(|f| (p.name(), f.len()))
            })
            .collect()
    }

    /// Victims for a preemption (per tier: intersection of voters; first tier with a
    /// non-empty answer decides).
    pub fn preemptable(&self, preemptor: TaskId, candidates: &[TaskId]) -> Vec<TaskId> {
        self.victims(Hooks::PREEMPTABLE, |p, c| p.preemptable(&self.snap, preemptor, c), candidates)
    }

    /// Victims for a reclaim (same rules as [`Session::preemptable`]).
    pub fn reclaimable(&self, reclaimer: TaskId, candidates: &[TaskId]) -> Vec<TaskId> {
        self.victims(Hooks::RECLAIMABLE, |p, c| p.reclaimable(&self.snap, reclaimer, c), candidates)
    }

    /// Victims for a gang-aware eviction (`gangpreempt`, `gangreclaim`; Volcano's
    /// `UnifiedEvictable`), with the rules of [`Session::preemptable`].
    pub fn evictable(&self, ctx: &crate::plugin::EvictionContext, candidates: &[TaskId]) -> Vec<TaskId> {
        self.victims(Hooks::EVICTABLE, |p, c| p.evictable(&self.snap, ctx, c), candidates)
    }

    // ----- state changes (used by Statement and by backfill) -----

    fn fire_allocate(&mut self, t: TaskId) {
        let bit = Hooks::EVENT_HANDLER.bits().trailing_zeros() as usize;
        let index = self.index.as_deref_mut().expect("no question to the node index");
        for &(tier, i) in &self.hooked[bit] {
            let plugin = &mut self.tiers[tier][i].plugin;
            plugin.on_allocate(&self.snap, t);
            if let Some(h) = plugin.incremental_mut() {
                h.drain_touched(index.touched_buffer());
            }
        }
        index.touch_drained();
    }

    fn fire_deallocate(&mut self, t: TaskId) {
        let bit = Hooks::EVENT_HANDLER.bits().trailing_zeros() as usize;
        let index = self.index.as_deref_mut().expect("no question to the node index");
        for &(tier, i) in &self.hooked[bit] {
            let plugin = &mut self.tiers[tier][i].plugin;
            plugin.on_deallocate(&self.snap, t);
            if let Some(h) = plugin.incremental_mut() {
                h.drain_touched(index.touched_buffer());
            }
        }
        index.touch_drained();
    }

    /// Places a pending task on a node (status Allocated) and fires `on_allocate`.
    pub(crate) fn do_allocate(&mut self, t: TaskId, n: NodeId) {
        debug_assert_eq!(self.snap.task(t).status, TaskStatus::Pending);
        if let Some(cards) = self.chosen_devices(t, n) {
            self.snap.tasks[t.idx()].devices = Some(cards);
        }
        self.snap.set_task_status(t, TaskStatus::Allocated);
        self.snap.tasks[t.idx()].node = Some(n);
        self.snap.node_add_task(n, t);
        self.index_mut().touch_used(n);
        self.fire_allocate(t);
    }

    /// The cards a [`Hooks::DEVICE_CHOICE`] plugin gives the task on the node, if the task
    /// asks for GPUs there; [`Snapshot::node_add_task`] takes them when they fit.
    fn chosen_devices(&self, t: TaskId, n: NodeId) -> Option<SmallVec<[u16; 8]>> {
        if self.snap.task(t).gpu.is_none() || self.snap.node(n).gpus.is_none() {
            return None;
        }
        self.active(Hooks::DEVICE_CHOICE).find_map(|p| p.choose_devices(&self.snap, t, n))
    }

    /// Reserves a pending task on a node's future idle resources (status Pipelined).
    pub(crate) fn do_pipeline(&mut self, t: TaskId, n: NodeId) {
        debug_assert_eq!(self.snap.task(t).status, TaskStatus::Pending);
        self.snap.set_task_status(t, TaskStatus::Pipelined);
        self.snap.tasks[t.idx()].node = Some(n);
        self.snap.node_add_task(n, t);
        self.index_mut().touch_used(n);
        self.fire_allocate(t);
    }

    /// Undoes an allocation or a pipeline: back to Pending, node released.
    pub(crate) fn undo_place(&mut self, t: TaskId) {
        if let Some(n) = self.snap.task(t).node {
            self.snap.node_remove_task(n, t);
            let status = self.snap.task(t).status;
            self.snap.set_last_tx(t, Some((status, n)));
            self.index_mut().touch(n);
        }
        self.snap.tasks[t.idx()].node = None;
        self.snap.set_task_status(t, TaskStatus::Pending);
        self.fire_deallocate(t);
    }

    /// Returns a pipelined task to Pending (backfill re-places best-effort tasks).
    pub fn unpipeline(&mut self, t: TaskId) {
        if self.snap.task(t).status == TaskStatus::Pipelined {
            self.undo_place(t);
        }
    }

    /// Marks a task Releasing (its resources become future idle) and fires `on_deallocate`.
    pub(crate) fn do_evict(&mut self, t: TaskId) -> TaskStatus {
        let prev = self.snap.task(t).status;
        self.victims_leave(t);
        if let Some(n) = self.snap.task(t).node {
            self.snap.node_remove_task(n, t);
            self.snap.set_task_status(t, TaskStatus::Releasing);
            self.snap.node_add_task(n, t);
            self.index_mut().touch(n);
        } else {
            self.snap.set_task_status(t, TaskStatus::Releasing);
        }
        self.fire_deallocate(t);
        prev
    }

    /// Undoes an eviction: the task gets its previous status back.
    pub(crate) fn undo_evict(&mut self, t: TaskId, prev: TaskStatus) {
        if let Some(n) = self.snap.task(t).node {
            self.snap.node_remove_task(n, t);
            self.snap.set_task_status(t, prev);
            self.snap.node_add_task(n, t);
            self.index_mut().touch(n);
        } else {
            self.snap.set_task_status(t, prev);
        }
        self.victims_join(t);
        self.fire_allocate(t);
    }

    /// Sends an allocated task to the binder: status Binding and a bind effect.
    pub(crate) fn dispatch(&mut self, t: TaskId) {
        let task = self.snap.task(t);
        let node = task.node.expect("an allocated task has a node");
        let info = self.snap.node(node);
        let annotations = match (&task.gpu, &task.devices, &info.gpus) {
            (Some(ask), Some(cards), Some(gpus)) => {
                gpus.annotations(ask, cards, &info.name, self.ctx.now_ms.saturating_mul(1_000_000))
            }
            _ => Vec::new(),
        };
        self.effects.push(Effect::Bind { pod: task.object_ref(), node: info.name.clone(), annotations });
        self.snap.set_task_status(t, TaskStatus::Binding);
        self.record_scheduled(t);
        self.note_bind(t, node);
    }

    /// Non-transactional allocation (Volcano `ssn.Allocate`, used by backfill): the task is
    /// placed now, and every Allocated task of its job is dispatched to the binder as soon
    /// as the job is ready.
    pub fn allocate(&mut self, t: TaskId, n: NodeId) {
        // Held in the session until its job is ready: a reservation the snapshot does not show.
        self.note_change(true, false);
        self.do_allocate(t, n);
        if let Some(j) = self.snap.task(t).job {
            if self.job_ready(j) {
                let allocated: Vec<TaskId> = self
                    .snap
                    .job(j)
                    .tasks
                    .iter()
                    .copied()
                    .filter(|x| self.snap.task(*x).status == TaskStatus::Allocated)
                    .collect();
                for x in allocated {
                    self.dispatch(x);
                }
            }
        }
    }

    /// Records why a task fits nowhere (shown in PodGroup conditions).
    pub fn record_fit_errors(&mut self, t: TaskId, errors: FitErrors) {
        if let Some(j) = self.snap.task(t).job {
            self.snap.job_trace_mut(j).fit_errors.insert(t, errors);
        }
    }
}
