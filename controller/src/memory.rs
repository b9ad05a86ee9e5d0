//! What the job controller remembers of a job between reconciles, and the order in which it
//! handles what happened: the pods and PodGroup seen last time (their changes become
//! [`Request`]s), the requests not handled yet, and the delayed actions.
//!
//! The reconciler (feature `shell`) and the simulator drive a job the same way:
//! 1. [`JobMemory::observe`] the job's pods and PodGroup (and delayed actions that came due);
//! 2. take [`JobMemory::next`] until `None`: a [`Next::Run`] is one step of the state
//!    machine ([`crate::plan::step`]), applied and then [`JobMemory::finished`] (a step that
//!    failed leaves its request for the next reconcile);
//! 3. when no request ran a step, one `SyncJob` step;
//! 4. keep each applied step's [`crate::plan::Desired::scale`] in [`JobMemory::scale`], and
//!    look again at its `wake_at` (a resize's grace period or timeout).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use volcano_api::bus::Action;
use volcano_api::crd::PodGroup;
use volcano_api::job::Job;

use crate::events::{self, Request};
use crate::policies::{self, DelayedActions};
use crate::scale::ScaleState;
use crate::state::Target;

/// What the controller remembers of one job.
#[derive(Clone, Debug, Default)]
pub struct JobMemory {
    /// The job's UID (a job recreated under the same name starts afresh).
    pub uid: String,
    /// The job's pods as last seen, by name.
    pub pods: BTreeMap<String, Pod>,
    /// The PodGroup as last seen.
    pub pod_group: Option<PodGroup>,
    /// Requests not handled yet, oldest first.
    pub pending: Vec<Request>,
    /// The job's delayed actions.
    pub delayed: DelayedActions,
    /// Consecutive failed reconciles (for the back-off).
    pub failures: u32,
    /// Each task's resize state, by task name, as the last applied step left it
    /// ([`crate::plan::Desired::scale`]).
    pub scale: BTreeMap<String, ScaleState>,
}

/// What to do next for a job.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// A policy delayed `action` by `delay`: it is kept in [`JobMemory::delayed`] and the
    /// request is handled.
    Delayed {
        /// The action.
        action: Action,
        /// Its delay.
        delay: Duration,
    },
    /// Run one step for `action`; call [`JobMemory::finished`] once it is applied.
    Run {
        /// The action.
        action: Action,
        /// Its target, for a targeted restart.
        target: Option<Target>,
        /// The request it came from.
        request: Box<Request>,
    },
}

impl JobMemory {
    /// An empty memory of the job with this uid.
    pub fn new(uid: &str) -> Self {
        JobMemory { uid: uid.to_string(), ..Default::default() }
    }

    /// Turns what changed since the last observation into requests: pods added, updated
    /// and deleted (compared by name and uid with the pods seen last time), the PodGroup's
    /// phase, and the delayed actions due at `now` (each with its action).
    pub fn observe(&mut self, job: &Job, pods: &[Pod], pod_group: Option<&PodGroup>, now: Timestamp) {
        let by_name: BTreeMap<String, Pod> =
            pods.iter().map(|p| (p.metadata.name.clone().unwrap_or_default(), p.clone())).collect();
        for (name, pod) in &by_name {
            let req = match self.pods.get(name) {
                None => events::pod_added(pod),
                Some(old) if old.metadata.uid != pod.metadata.uid => events::pod_added(pod),
                Some(old) => events::pod_updated(old, pod, job, pods.iter()),
            };
            self.pending.extend(req);
        }
        for (name, old) in &self.pods {
            if !by_name.contains_key(name) {
                self.pending.extend(events::pod_deleted(old, true));
            }
        }
        self.pods = by_name;
        if let (Some(old), Some(new)) = (&self.pod_group, pod_group) {
            self.pending.extend(events::pod_group_phase_changed(old, new));
        }
        self.pod_group = pod_group.cloned();
        for d in self.delayed.due(now) {
            let mut req = d.request.clone();
            req.action = Some(d.action.clone());
            self.pending.push(req);
        }
    }

    /// The next thing to do for the pending requests, oldest first, through the policies
    /// ([`policies::apply`]): a delayed action is scheduled at once; `SyncJob` requests
    /// collapse into the closing sync (they are dropped here); `None` when none is left.
    pub fn next(&mut self, job: &Job, now: Timestamp) -> Option<Next> {
        while let Some(req) = self.pending.first().cloned() {
            self.delayed.cancel_on(&req);
            let (action, delay) = policies::apply(job, &req);
            if let Some(delay) = delay {
                self.delayed.schedule(&req, action.clone(), delay, now);
                self.pending.remove(0);
                return Some(Next::Delayed { action, delay });
            }
            if action != Action::SyncJob {
                let target = Target::of(&action, &req);
                return Some(Next::Run { action, target, request: Box::new(req) });
            }
            self.pending.remove(0);
        }
        None
    }

    /// The step of a [`Next::Run`] was applied: the request is handled, and a non-internal
    /// action cancels the delayed actions of its scope.
    pub fn finished(&mut self, request: &Request, action: &Action) {
        if !policies::is_internal_action(action) {
            self.delayed.executed(request, action);
        }
        if !self.pending.is_empty() {
            self.pending.remove(0);
        }
    }
}
