//! What a shell sees of a cycle: the session around every action, and when each step
//! starts and ends (the core reads no clock; a shell's observer may).

use crate::session::Session;

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
