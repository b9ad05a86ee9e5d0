//! The cycle driver: open a session over a snapshot, run the profile's actions in order,
//! close the session ([`crate::close`]), and return the ordered effects.
//!
//! `run_cycle` is a pure function of (snapshot, profile, cycle context): it reads no clock,
//! does no IO and draws no random numbers. Observers see the session after every action;
//! [`crate::InvariantChecker`] is the one tests and the simulator use.

use crate::close::{close, CycleOutcome};
use crate::plugin::SessionContext;
use std::sync::Arc;

use crate::profile::Profile;
use crate::retry::Settled;
pub use crate::session::observer::{Both, NoObserver, Observer, PluginStage};
use crate::session::{Session, SessionOptions};
use crate::snapshot::Snapshot;

/// What a cycle needs besides the snapshot and profile.
#[derive(Clone, Debug)]
pub struct CycleContext {
    /// Cycle number (from 1).
    pub cycle: u64,
    /// The cycle's time, milliseconds since the epoch.
    pub now_ms: i64,
    /// Session tunables.
    pub options: SessionOptions,
}

/// Runs one scheduling cycle. When the last session over this very snapshot state and
/// configuration changed nothing and wrote nothing, this one would do exactly the same
/// (see [`crate::session::retry`]): its outcome is returned again without opening a
/// session (the observer sees no session).
pub fn run_cycle(snap: Snapshot, profile: &Profile, cx: &CycleContext, observer: &mut dyn Observer) -> CycleOutcome {
    if let Some(memo) = snap.retries().filter(|m| m.same_conf(&profile.conf)) {
        if let Some(settled) = memo.settled.as_ref().filter(|s| s.state == snap.state()) {
            tracing::debug!(cycle = cx.cycle, "cycle: nothing changed since a session that changed nothing");
            return CycleOutcome {
                effects: Vec::new(),
                queues: settled.queues.clone(),
                pending_reasons: settled.pending_reasons.clone(),
                metrics: settled.metrics.clone(),
                retries: Some(memo.clone()),
            };
        }
    }
    run_cycle_inspected(snap, profile, cx, observer, &mut |_| {})
}

/// [`run_cycle`], showing `inspect` the session as the actions left it, before it closes
/// (`volcano-rs explain` reads what the session saw of a job there).
pub fn run_cycle_inspected(
    mut snap: Snapshot,
    profile: &Profile,
    cx: &CycleContext,
    observer: &mut dyn Observer,
    inspect: &mut dyn FnMut(&Session),
) -> CycleOutcome {
    let span = tracing::info_span!(
        "cycle",
        cycle = cx.cycle,
        binds = tracing::field::Empty,
        evictions = tracing::field::Empty,
        pipelined = tracing::field::Empty,
        effects = tracing::field::Empty
    );
    let _enter = span.enter();
    let ctx = SessionContext {
        now_ms: cx.now_ms,
        cycle: cx.cycle,
        uid: format!("session-{}", cx.cycle),
        enqueue_enabled: profile.has_action("enqueue"),
    };
    // Remembered failures are for sessions of the configuration that remembered them.
    if snap.retries().is_some_and(|m| !m.same_conf(&profile.conf)) {
        snap.take_retries();
    }
    let state = snap.state();
    let mut ssn = Session::open_observed(snap, profile.instantiate(), ctx, cx.options.clone(), observer);
    observer.session_opened();
    for action in &profile.actions {
        let span = tracing::debug_span!("action", action = action.name(), effects = tracing::field::Empty);
        let _a = span.enter();
        let before = ssn.effects().len();
        observer.before_action(action.name(), &ssn);
        ssn.current_action = action.name();
        ssn.stats.actions.push(action.name());
        action.execute(&mut ssn);
        ssn.current_action = "";
        observer.after_action(action.name(), &ssn);
        span.record("effects", ssn.effects().len() - before);
    }
    inspect(&ssn);
    let only_replayed = ssn.only_replayed();
    let retries = ssn.take_retries(&profile.conf);
    let mut outcome = close(ssn, observer);
    outcome.retries = retries.map(|mut memo| {
        if only_replayed && outcome.effects.is_empty() {
            memo.settled = Some(Arc::new(Settled {
                state,
                queues: outcome.queues.clone(),
                pending_reasons: outcome.pending_reasons.clone(),
                metrics: outcome.metrics.clone(),
            }));
        }
        Arc::new(memo)
    });
    if span.is_disabled() {
        return outcome;
    }
    let count = |f: fn(&crate::Effect) -> bool| outcome.effects.iter().filter(|e| f(e)).count();
    span.record("binds", count(|e| matches!(e, crate::Effect::Bind { .. })));
    span.record("evictions", count(|e| matches!(e, crate::Effect::Evict { .. })));
    span.record("pipelined", count(|e| matches!(e, crate::Effect::Pipeline { .. })));
    span.record("effects", outcome.effects.len());
    outcome
}
