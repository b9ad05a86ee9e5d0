//! Timing a cycle from outside the core: an observer that reads the clock.

use std::time::{Duration, Instant};

use volcano_framework::{Observer, PluginStage, Session};

/// Times one cycle's steps (open, each plugin's session hooks, each action); hand it to
/// [`crate::SchedulerMetrics::observe_timer`] after the cycle. Create it when the cycle
/// starts, before the snapshot is taken: Volcano's open-session time includes the snapshot.
#[derive(Debug)]
pub struct CycleTimer {
    started: Instant,
    mark: Instant,
    /// From the timer's creation to the end of every plugin's `on_session_open`.
    pub open: Option<Duration>,
    /// Each action's run, in order.
    pub actions: Vec<(String, Duration)>,
    /// Each plugin hook's run, in order.
    pub plugins: Vec<(&'static str, PluginStage, Duration)>,
}

impl CycleTimer {
    /// A timer started now.
    pub fn start() -> Self {
        let now = Instant::now();
        CycleTimer { started: now, mark: now, open: None, actions: Vec::new(), plugins: Vec::new() }
    }

    /// Time since the timer started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Observer for CycleTimer {
    fn before_action(&mut self, _action: &str, _ssn: &Session) {
        self.mark = Instant::now();
    }
    fn after_action(&mut self, action: &str, _ssn: &Session) {
        self.actions.push((action.to_string(), self.mark.elapsed()));
    }
    fn plugin_started(&mut self, _plugin: &'static str, _stage: PluginStage) {
        self.mark = Instant::now();
    }
    fn plugin_ended(&mut self, plugin: &'static str, stage: PluginStage) {
        self.plugins.push((plugin, stage, self.mark.elapsed()));
    }
    fn session_opened(&mut self) {
        self.open = Some(self.started.elapsed());
    }
}
