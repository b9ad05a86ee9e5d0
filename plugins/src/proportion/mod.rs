//! The `proportion` plugin: weight-based fair share between queues.
//!
//! When the session opens, every queue that has at least one job gets an attribute record
//! ([`QueueAttr`]): capability, guarantee, real capability, allocated, request, inqueue and
//! elastic resources. The cluster's resources are then shared out by weighted
//! water-filling into each queue's `deserved`, once per session ([`water_fill`]).
//! The hooks keep queues within their deserved share: queue order by share, overused
//! queues skipped, allocations refused beyond deserved, reclaim victims taken from queues
//! above deserved, and admission (`enqueue`) bounded by the queue's real capability.
//!
//! Like Volcano, `deserved` is purely weight-derived: `spec.deserved` is ignored
//! (Volcano issue #5814); the `capacity` plugin honours it.

mod args;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::resource::{cmp_f64, DimensionDefault, Resource};
use volcano_framework::{
    parse_args, Admission, ArgsError, CloseOutput, EvictionContext, EvictionKind, Hooks, Incremental, JobId, Plugin,
    PluginBuilder, QueueId, QueueReport, SessionContext, Snapshot, TaskId,
};

use crate::queue_accounting::{self as reserve, deduct_gated, exceeded_part, QueueAccount, RefusalMemo};
pub use args::Args;

/// Configuration name.
pub const NAME: &str = "proportion";

pub use crate::queue_accounting::QUOTA_INSUFFICIENT;

/// Upper bound on water-filling rounds. Volcano loops until every queue is met or the
/// remaining resources are empty or stop changing; with extreme weight ratios the
/// remainder can shrink geometrically for a very long time, so volcano-rs stops after this
/// many rounds (never reached with realistic queues).
pub const MAX_WATER_FILL_ROUNDS: usize = 10_000;

/// What the plugin knows about one queue in this session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueAttr {
    /// Whether the queue has at least one job in the session (only those take part).
    pub active: bool,
    /// `spec.weight`.
    pub weight: i32,
    /// `spec.capability`, cpu/memory ≤ 0 (or absent) meaning unlimited; `None` if unset.
    pub capability: Option<Resource>,
    /// Deserved (from water-filling), allocated, request, inqueue, elastic, guarantee, real
    /// capability ((total − Σ all queues' guarantees, floored at 0) + own guarantee, capped
    /// by capability) and share.
    pub account: QueueAccount,
}

/// The plugin state of one session.
#[derive(Debug, Default)]
pub struct Proportion {
    queues: Vec<QueueAttr>,
    /// The admission refusals of this session, by queue accounts and minimum.
    refusals: RefusalMemo,
}

impl Proportion {
    /// A plugin value for one session (state is built by `on_session_open`).
    pub fn new(_args: Args) -> Self {
        Self::default()
    }

    /// The attributes of a queue that takes part in this session.
    pub fn attr(&self, q: QueueId) -> Option<&QueueAttr> {
        self.queues.get(q.idx()).filter(|a| a.active)
    }

    /// The accounts of a queue that takes part in this session.
    pub fn account(&self, q: QueueId) -> Option<&QueueAccount> {
        self.attr(q).map(|a| &a.account)
    }

    fn queue_allocatable(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> bool {
        if !snap.queue(q).is_open() {
            tracing::trace!(queue = %snap.queue(q).name, "queue is not open: cannot allocate");
            return false;
        }
        let Some(attr) = self.account(q) else { return false };
        let req = &snap.task(t).resreq;
        let ok = attr.fits(req, &attr.deserved);
        if !ok {
            tracing::trace!(
                queue = %snap.queue(q).name,
                deserved = %attr.deserved,
                allocated = %attr.allocated,
                request = %req,
                "queue would exceed deserved"
            );
        }
        ok
    }

    fn account_of_task_mut(&mut self, snap: &Snapshot, t: TaskId) -> Option<&mut QueueAccount> {
        let j = snap.task(t).job?;
        let q = snap.job(j).queue;
        self.queues.get_mut(q.idx()).filter(|a| a.active).map(|a| &mut a.account)
    }
}

/// Builds the attribute records of the queues that have jobs.
pub fn build_queue_attrs(snap: &Snapshot) -> Vec<QueueAttr> {
    let unguaranteed = reserve::unguaranteed(snap);
    let mut attrs = vec![QueueAttr::default(); snap.queues.len()];
    for job in &snap.jobs {
        let attr = &mut attrs[job.queue.idx()];
        if !attr.active {
            let q = snap.queue(job.queue);
            attr.active = true;
            attr.weight = q.weight;
            attr.capability = q.capability.as_ref().map(reserve::unlimited_cpu_memory);
            attr.account.guarantee = q.guarantee.clone();
            attr.account.real_capability =
                reserve::real_capability(&unguaranteed, &q.guarantee, attr.capability.as_ref());
        }
        attr.account.add_usage(&reserve::job_usage(snap, job));
    }
    attrs
}

/// Weighted water-filling of `total` into the `deserved` of the active queues:
/// each round, every unmet queue gets `remaining × weight / Σ unmet weights`, capped by its
/// real capability (missing dimensions unlimited) and by its request (missing dimensions
/// 0), raised to its guarantee; a queue is met once its request fits its deserved or its
/// deserved stops changing. Stops when no queue is unmet, or the remaining resources are
/// empty (ignoring `pods`) or unchanged. Shares are updated at the end.
pub fn water_fill(total: &Resource, attrs: &mut [QueueAttr]) {
    let mut met: Vec<bool> = attrs.iter().map(|a| !a.active).collect();
    let mut remaining = total.clone();
    for round in 0.. {
        if round == MAX_WATER_FILL_ROUNDS {
            tracing::warn!(
                rounds = round,
                remaining = %remaining,
                "proportion: water-filling stopped at the round limit"
            );
            break;
        }
        let total_weight: i64 = attrs.iter().zip(&met).filter(|(_, m)| !**m).map(|(a, _)| i64::from(a.weight)).sum();
        if total_weight == 0 {
            break;
        }
        let old_remaining = remaining.clone();
        let mut increased = Resource::empty();
        let mut decreased = Resource::empty();
        for (attr, met) in attrs.iter_mut().zip(met.iter_mut()) {
            if *met {
                continue;
            }
            let old = attr.account.deserved.clone();
            let mut portion = remaining.clone();
            portion.multi(f64::from(attr.weight) / total_weight as f64);
            attr.account.deserved.add(&portion);
            attr.account.deserved.min_dimension(&attr.account.real_capability, DimensionDefault::Infinity);
            attr.account.deserved.min_dimension(&attr.account.request, DimensionDefault::Zero);
            attr.account.deserved.set_max(&attr.account.guarantee);
            if attr.account.request.less_equal(&attr.account.deserved, DimensionDefault::Zero)
                || attr.account.deserved == old
            {
                *met = true;
            }
            increased.add(&exceeded_part(&attr.account.deserved, &old));
            decreased.add(&exceeded_part(&old, &attr.account.deserved));
        }
        remaining.add(&decreased);
        remaining = exceeded_part(&remaining, &increased);
        if remaining.is_empty() || remaining == old_remaining {
            break;
        }
    }
    for attr in attrs.iter_mut().filter(|a| a.active) {
        attr.account.update_share(None);
    }
}

impl Plugin for Proportion {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::QUEUE_ORDER
            | Hooks::OVERUSED
            | Hooks::ALLOCATABLE
            | Hooks::PREEMPTIVE
            | Hooks::RECLAIMABLE
            | Hooks::EVICTABLE
            | Hooks::JOB_ENQUEUEABLE
            | Hooks::JOB_ENQUEUED
            | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        let mut attrs = build_queue_attrs(snap);
        water_fill(&snap.total_resource, &mut attrs);
        for (i, attr) in attrs.iter().enumerate().filter(|(_, a)| a.active) {
            let a = &attr.account;
            tracing::debug!(
                queue = %snap.queues[i].name,
                weight = attr.weight,
                deserved = %a.deserved,
                allocated = %a.allocated,
                request = %a.request,
                inqueue = %a.inqueue,
                elastic = %a.elastic,
                real_capability = %a.real_capability,
                share = a.share,
                "proportion: queue attributes"
            );
        }
        self.queues = attrs;
    }

    fn on_session_close(&mut self, _snap: &Snapshot, _ctx: &SessionContext, out: &mut CloseOutput) {
        for (i, a) in self.queues.iter().enumerate().filter(|(_, a)| a.active) {
            let overused = a.account.deserved.less_equal(&a.account.allocated, DimensionDefault::Zero);
            let report = QueueReport { weight: Some(a.weight), overused: Some(overused), ..a.account.report() };
            out.queue_reports.push((QueueId(i as u32), report));
        }
    }

    fn queue_order(&self, snap: &Snapshot, l: QueueId, r: QueueId) -> Ordering {
        let (lq, rq) = (snap.queue(l), snap.queue(r));
        if lq.priority != rq.priority {
            return rq.priority.cmp(&lq.priority);
        }
        let ls = self.queues.get(l.idx()).map_or(0.0, |a| a.account.share);
        let rs = self.queues.get(r.idx()).map_or(0.0, |a| a.account.share);
        cmp_f64(ls, rs)
    }

    fn overused(&self, snap: &Snapshot, q: QueueId) -> bool {
        let Some(attr) = self.account(q) else { return false };
        let overused = attr.deserved.less_equal(&attr.allocated, DimensionDefault::Zero);
        if overused {
            tracing::debug!(
                queue = %snap.queue(q).name,
                deserved = %attr.deserved,
                allocated = %attr.allocated,
                share = attr.share,
                "queue is overused"
            );
        }
        overused
    }

    fn allocatable(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> bool {
        self.queue_allocatable(snap, q, t)
    }

    fn allocatable_refusal(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> Option<String> {
        let queue = snap.queue(q);
        if !queue.is_open() {
            return Some(reserve::not_open(queue));
        }
        let attr = self.account(q)?;
        let req = &snap.task(t).resreq;
        attr.allocation_refusal(&queue.name, "deserved share", req, &attr.deserved)
    }

    fn preemptive(&self, snap: &Snapshot, q: QueueId, t: TaskId) -> bool {
        self.queue_allocatable(snap, q, t)
    }

    /// `gangreclaim`: the reclaim rule ([`Plugin::reclaimable`]), so that no queue is taken
    /// below its deserved share (Volcano's proportion registers no rule here, and its
    /// `gangreclaim` would take from any reclaimable queue); abstains for `gangpreempt`.
    fn evictable(&self, snap: &Snapshot, ctx: &EvictionContext, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        match ctx.kind {
            EvictionKind::GangPreempt => None,
            EvictionKind::GangReclaim => self.reclaimable(snap, ctx.task, candidates),
        }
    }

    fn reclaimable(&self, snap: &Snapshot, _reclaimer: TaskId, candidates: &[TaskId]) -> Option<Vec<TaskId>> {
        // A running copy of `allocated` per victim queue: take victims while the queue is
        // above its deserved share on some dimension.
        let mut running: Vec<(QueueId, Resource)> = Vec::new();
        let mut victims = Vec::new();
        for &c in candidates {
            let task = snap.task(c);
            let Some(j) = task.job else { continue };
            let q = snap.job(j).queue;
            let Some(attr) = self.account(q) else { continue };
            let pos = match running.iter().position(|(x, _)| *x == q) {
                Some(p) => p,
                None => {
                    running.push((q, attr.allocated.clone()));
                    running.len() - 1
                }
            };
            let allocated = &mut running[pos].1;
            if !allocated.less_equal(&attr.deserved, DimensionDefault::Zero) {
                allocated.sub_unchecked(&task.resreq);
                victims.push(c);
            }
        }
        Some(victims)
    }

    fn job_enqueueable(&self, snap: &Snapshot, j: JobId) -> Admission {
        let job = snap.job(j);
        let queue = snap.queue(job.queue);
        if !queue.is_open() {
            tracing::debug!(job = %job.key, queue = %queue.name, "queue is not open: job rejected");
            return Admission::Reject(reserve::not_open(queue));
        }
        let Some(min) = &job.min_resources else { return Admission::Permit };
        let Some(attr) = self.account(job.queue) else { return Admission::Permit };
        let Some(message) = attr.admission_refusal_memo(&self.refusals, &queue.name, min) else {
            return Admission::Permit;
        };
        tracing::debug!(job = %job.key, queue = %queue.name, "job rejected: {message}");
        Admission::Reject(message)
    }

    fn job_enqueued(&mut self, snap: &Snapshot, j: JobId) {
        let job = snap.job(j);
        let Some(min) = &job.min_resources else { return };
        let reserved = deduct_gated(snap, job, min.clone());
        if let Some(attr) = self.queues.get_mut(job.queue.idx()).filter(|a| a.active) {
            attr.account.inqueue.add(&reserved);
        }
    }

    fn on_allocate(&mut self, snap: &Snapshot, t: TaskId) {
        let req = &snap.task(t).resreq;
        if let Some(attr) = self.account_of_task_mut(snap, t) {
            attr.record(req, true, None);
        }
    }

    fn on_deallocate(&mut self, snap: &Snapshot, t: TaskId) {
        let req = &snap.task(t).resreq;
        if let Some(attr) = self.account_of_task_mut(snap, t) {
            attr.record(req, false, None);
        }
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for Proportion {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }
}

/// Checks the arguments (none are accepted) and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    Ok(Arc::new(move || Box::new(Proportion::new(args)) as Box<dyn Plugin>))
}
