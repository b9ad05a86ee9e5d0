//! A progress bar for long replays: drawn on standard error only when it is a terminal and
//! only once the run has lasted a second, so short runs, tests and pipes see nothing.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How long a run goes on before its bar appears.
pub const SHOW_AFTER: Duration = Duration::from_secs(1);

/// A progress bar that starts hidden (see the module documentation).
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
    /// Whether the bar may ever be drawn (standard error is a terminal).
    enabled: bool,
    shown: bool,
    last_message: Option<Instant>,
}

impl Progress {
    /// A bar of `len` steps, counted in `unit` (e.g. `jobs`), drawn on standard error once
    /// the run has lasted [`SHOW_AFTER`] if standard error is a terminal.
    pub fn new(len: u64, unit: &str) -> Self {
        Self::with(len, unit, std::io::stderr().is_terminal())
    }

    /// A bar that is never drawn.
    pub fn hidden() -> Self {
        Self::with(0, "", false)
    }

    fn with(len: u64, unit: &str, enabled: bool) -> Self {
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        let template = format!("{{elapsed_precise}} [{{wide_bar}}] {{pos}}/{{len}} {unit} {{msg}}");
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress { bar, started: Instant::now(), enabled, shown: false, last_message: None }
    }

    /// Moves the bar to `pos`; `message` (called at most ten times a second, and only while
    /// the bar is drawn) says where the run is.
    pub fn set(&mut self, pos: u64, message: impl FnOnce() -> String) {
        if !self.enabled {
            return;
        }
        if !self.shown {
            if self.started.elapsed() < SHOW_AFTER {
                return;
            }
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_position(pos);
        if self.last_message.is_none_or(|t| t.elapsed() >= Duration::from_millis(100)) {
            self.bar.set_message(message());
            self.last_message = Some(Instant::now());
        }
    }

    /// Whether the bar has been drawn.
    pub fn is_shown(&self) -> bool {
        self.shown
    }

    /// Removes the bar from the terminal, if it was drawn.
    pub fn finish(&self) {
        if self.shown {
            self.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_draws_nothing() {
        let mut p = Progress::with(10, "jobs", true);
        p.set(5, || unreachable!("no message before the bar is shown"));
        assert!(!p.is_shown());
        let mut h = Progress::hidden();
        h.set(5, || unreachable!("a hidden bar asks for no message"));
        assert!(!h.is_shown());
    }
}
