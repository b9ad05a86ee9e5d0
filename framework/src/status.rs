//! Scheduling outcomes as values: a closed [`Code`] vocabulary (as in kube-scheduler's
//! framework), a [`Status`] with its reason and plugin, and per-task [`FitErrors`].

use std::collections::BTreeMap;
use std::fmt;

/// Outcome code of a predicate or pre-predicate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// The task fits.
    Success,
    /// The task does not fit now; evicting pods may help.
    Unschedulable,
    /// The task does not fit, and evicting pods will not help (selector, taint…).
    UnschedulableAndUnresolvable,
    /// An internal error.
    Error,
    /// The plugin has nothing to say.
    Skip,
    /// Wait (e.g. for a gate).
    Wait,
}

/// A scheduling outcome with its reason and the plugin that decided it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// The outcome.
    pub code: Code,
    /// Why (shown to users in fit errors).
    pub reason: String,
    /// The deciding plugin.
    pub plugin: &'static str,
}

impl Status {
    /// `Unschedulable` with a reason.
    pub fn unschedulable(plugin: &'static str, reason: impl Into<String>) -> Self {
        Status { code: Code::Unschedulable, reason: reason.into(), plugin }
    }

    /// `UnschedulableAndUnresolvable` with a reason.
    pub fn unresolvable(plugin: &'static str, reason: impl Into<String>) -> Self {
        Status { code: Code::UnschedulableAndUnresolvable, reason: reason.into(), plugin }
    }

    /// An internal error.
    pub fn error(plugin: &'static str, reason: impl Into<String>) -> Self {
        Status { code: Code::Error, reason: reason.into(), plugin }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Why a task fits no node: a histogram of reasons over the nodes that were tried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FitErrors {
    /// Number of nodes considered.
    pub nodes: usize,
    /// Reason → number of nodes that gave it.
    pub reasons: BTreeMap<String, u32>,
    /// A task-level error (pre-predicate, queue), shown before the histogram.
    pub error: Option<String>,
}

impl FitErrors {
    /// Records a node that failed with `reason`.
    pub fn add(&mut self, reason: &str) {
        match self.reasons.get_mut(reason) {
            Some(n) => *n += 1,
            None => {
                self.reasons.insert(reason.to_string(), 1);
            }
        }
    }
}

impl fmt::Display for FitErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(e) = &self.error {
            if self.reasons.is_empty() {
                return f.write_str(e);
            }
            write!(f, "{e}; ")?;
        }
        write!(f, "0/{} nodes are unavailable", self.nodes)?;
        let mut first = true;
        for (reason, n) in &self.reasons {
            f.write_str(if first { ": " } else { ", " })?;
            first = false;
            write!(f, "{n} {reason}")?;
        }
        f.write_str(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_errors_render_like_volcano() {
        let mut e = FitErrors { nodes: 3, ..Default::default() };
        e.add("Insufficient nvidia.com/gpu");
        e.add("Insufficient nvidia.com/gpu");
        e.add("node(s) didn't match Pod's node selector");
        assert_eq!(
            e.to_string(),
            "0/3 nodes are unavailable: 2 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node selector."
        );
    }
}
