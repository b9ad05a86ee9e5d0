//! The cycle driver: open a session over a snapshot, run the profile's actions in order,
//! close the session ([`crate::close`]), and return the ordered effects.
//!
//! `run_cycle` is a pure function of (snapshot, profile, cycle context): it reads no clock,
//! does no IO and draws no random numbers. Observers see the session after every action;
//! [`crate::InvariantChecker`] is the one tests and the simulator use.

use crate::close::{close, CycleOutcome};
use crate::plugin::SessionContext;
use crate::profile::Profile;
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

/// Which session hook of a plugin an observer is told about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PluginStage {
    /// `on_session_open` (Volcano's `OnSessionOpen`).
    Open,
    /// `on_session_close` (Volcano's `OnSessionClose`).
    Close,
}

impl PluginStage {
    /// Volcano's label value (`OnSessionOpen`, `OnSessionClose`).
    pub fn as_str(self) -> &'static str {
        match self {
            PluginStage::Open => "OnSessionOpen",
            PluginStage::Close => "OnSessionClose",
        }
    }
}

/// Sees the session around every action, and is told when each step of the cycle starts
/// and ends (a shell that reads a clock times them; the core reads none).
#[allow(unused_variables)]
pub trait Observer {
    /// Before an action runs.
    fn before_action(&mut self, action: &str, ssn: &Session) {}
    /// After an action ran.
    fn after_action(&mut self, action: &str, ssn: &Session) {}
    /// A plugin's session hook starts.
    fn plugin_started(&mut self, plugin: &'static str, stage: PluginStage) {}
    /// A plugin's session hook ended.
    fn plugin_ended(&mut self, plugin: &'static str, stage: PluginStage) {}
    /// The session is open (every plugin's `on_session_open` ran).
    fn session_opened(&mut self) {}
}

/// An observer that does nothing.
pub struct NoObserver;
impl Observer for NoObserver {}

/// Two observers, told everything in turn.
pub struct Both<'a>(pub &'a mut dyn Observer, pub &'a mut dyn Observer);

impl Observer for Both<'_> {
    fn before_action(&mut self, action: &str, ssn: &Session) {
        self.0.before_action(action, ssn);
        self.1.before_action(action, ssn);
    }
    fn after_action(&mut self, action: &str, ssn: &Session) {
        self.0.after_action(action, ssn);
        self.1.after_action(action, ssn);
    }
    fn plugin_started(&mut self, plugin: &'static str, stage: PluginStage) {
        self.0.plugin_started(plugin, stage);
        self.1.plugin_started(plugin, stage);
    }
    fn plugin_ended(&mut self, plugin: &'static str, stage: PluginStage) {
        self.0.plugin_ended(plugin, stage);
        self.1.plugin_ended(plugin, stage);
    }
    fn session_opened(&mut self) {
        self.0.session_opened();
        self.1.session_opened();
    }
}

/// Runs one scheduling cycle.
pub fn run_cycle(snap: Snapshot, profile: &Profile, cx: &CycleContext, observer: &mut dyn Observer) -> CycleOutcome {
    let span = tracing::info_span!("cycle", cycle = cx.cycle);
    let _enter = span.enter();
    let ctx = SessionContext {
        now_ms: cx.now_ms,
        cycle: cx.cycle,
        uid: format!("session-{}", cx.cycle),
        enqueue_enabled: profile.has_action("enqueue"),
    };
    let mut ssn = Session::open_observed(snap, profile.instantiate(), ctx, cx.options.clone(), observer);
    observer.session_opened();
    for action in &profile.actions {
        let span = tracing::debug_span!("action", action = action.name());
        let _a = span.enter();
        observer.before_action(action.name(), &ssn);
        ssn.current_action = action.name();
        action.execute(&mut ssn);
        ssn.current_action = "";
        observer.after_action(action.name(), &ssn);
    }
    close(ssn, observer)
}
