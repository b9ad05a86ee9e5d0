//! The Queue controller's decisions, as pure functions (Volcano's `pkg/controllers/queue`):
//! the queue state machine driven by `OpenQueue`, `CloseQueue` and `SyncQueue`, the
//! PodGroup counts of a queue, and what a state change does to the queue's children in a
//! hierarchy. [`crate::queue_reconcile`] applies them to the API.
//!
//! The state machine (an empty state is Open):
//!
//! | state \ action | `OpenQueue` | `CloseQueue` | anything else (sync) |
//! |---|---|---|---|
//! | Open | Open | Closed, or Closing while it has PodGroups | Open |
//! | Closing | Open | Closed, or Closing while it has PodGroups | Closed once its PodGroups are gone, else Closing |
//! | Closed | Open | Closed | Closed |
//! | Unknown | Open | Closed, or Closing while it has PodGroups | Unknown |
//!
//! In a hierarchy (`spec.parent`), as Volcano does it:
//! - closing a queue closes its children that are open, marking each with the annotation
//!   `volcano.sh/closed-by-parent: "true"`; the `root` queue cannot be closed;
//! - opening a queue reopens the children its closing closed (the marked ones), and a
//!   queue whose parent is Closing or Closed cannot be opened (the command is retried
//!   until the parent opens);
//! - a sync closes an open queue whose parent is Closing or Closed (marking it), and
//!   reopens a marked closed queue whose parent is Open.

use std::collections::BTreeMap;

use volcano_api::bus::Action;
use volcano_api::crd::{PodGroup, PodGroupPhase, Queue, QueueState};
use volcano_api::names::DEFAULT_QUEUE;

/// The annotation of a queue closed because its parent was closed.
pub const CLOSED_BY_PARENT_ANNOTATION: &str = "volcano.sh/closed-by-parent";
/// The root of the queue hierarchy.
pub const ROOT_QUEUE: &str = "root";

/// The PodGroups of a queue by phase (the counts of the Queue's status).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pending PodGroups.
    pub pending: i32,
    /// Inqueue PodGroups.
    pub inqueue: i32,
    /// Running PodGroups.
    pub running: i32,
    /// Unknown PodGroups.
    pub unknown: i32,
    /// Completed PodGroups.
    pub completed: i32,
    /// Every PodGroup of the queue, whatever its phase (a phase not set yet included).
    pub total: i32,
}

/// The queue a PodGroup belongs to (`default` when it names none).
pub fn pod_group_queue(pg: &PodGroup) -> &str {
    pg.spec.queue.as_deref().filter(|q| !q.is_empty()).unwrap_or(DEFAULT_QUEUE)
}

impl Counts {
    /// Counts one PodGroup: in `total`, and under its phase when it has one (a PodGroup
    /// whose phase is not set yet counts in `total` only, as in Volcano's queue controller).
    pub fn add(&mut self, pg: &PodGroup) {
        self.total += 1;
        match pg.status.as_ref().and_then(|s| s.phase.as_ref()) {
            Some(PodGroupPhase::Pending) => self.pending += 1,
            Some(PodGroupPhase::Inqueue) => self.inqueue += 1,
            Some(PodGroupPhase::Running) => self.running += 1,
            Some(PodGroupPhase::Unknown) => self.unknown += 1,
            Some(PodGroupPhase::Completed) => self.completed += 1,
            _ => {}
        }
    }

    /// The count of a phase named as the metrics' `phase` label names it (`inqueue`,
    /// `pending`, `running`, `unknown`, `completed`).
    pub fn of_phase(&self, phase: &str) -> Option<i32> {
        Some(match phase {
            "inqueue" => self.inqueue,
            "pending" => self.pending,
            "running" => self.running,
            "unknown" => self.unknown,
            "completed" => self.completed,
            _ => return None,
        })
    }
}

/// The counts of the PodGroups of `queue` among `groups`.
pub fn counts<'a>(queue: &str, groups: impl IntoIterator<Item = &'a PodGroup>) -> Counts {
    let mut c = Counts::default();
    for pg in groups.into_iter().filter(|pg| pod_group_queue(pg) == queue) {
        c.add(pg);
    }
    c
}

/// The counts of every queue's PodGroups among `groups`, by queue ([`pod_group_queue`]), in
/// one pass: [`counts`] of each queue that has PodGroups.
pub fn counts_by_queue<'a>(groups: impl IntoIterator<Item = &'a PodGroup>) -> BTreeMap<String, Counts> {
    let mut out: BTreeMap<String, Counts> = BTreeMap::new();
    for pg in groups {
        let q = pod_group_queue(pg);
        match out.get_mut(q) {
            Some(c) => c.add(pg),
            None => {
                let mut c = Counts::default();
                c.add(pg);
                out.insert(q.to_string(), c);
            }
        }
    }
    out
}

/// The state of `queue` as stored (an empty state is Open).
pub fn state_of(queue: &Queue) -> QueueState {
    queue.status.as_ref().and_then(|s| s.state).unwrap_or(QueueState::Open)
}

fn closed_or_closing(s: QueueState) -> bool {
    matches!(s, QueueState::Closed | QueueState::Closing)
}

fn name_of(queue: &Queue) -> &str {
    queue.metadata.name.as_deref().unwrap_or_default()
}

fn closed_by_parent(queue: &Queue) -> bool {
    queue.metadata.annotations.as_ref().and_then(|a| a.get(CLOSED_BY_PARENT_ANNOTATION)).map(String::as_str)
        == Some("true")
}

/// The parent of `queue` (`root` when it names none; none for `root` itself).
pub fn parent_of(queue: &Queue) -> Option<&str> {
    if name_of(queue) == ROOT_QUEUE {
        return None;
    }
    Some(queue.spec.parent.as_deref().filter(|p| !p.is_empty()).unwrap_or(ROOT_QUEUE))
}

/// The state machine: the state `action` moves a queue in state `current` to, given how
/// many PodGroups the queue has.
pub fn next_state(current: QueueState, action: &Action, pod_groups: i32) -> QueueState {
    let closed_or_closing = if pod_groups == 0 { QueueState::Closed } else { QueueState::Closing };
    match (action, current) {
        (Action::OpenQueue, _) => QueueState::Open,
        (Action::CloseQueue, QueueState::Closed) => QueueState::Closed,
        (Action::CloseQueue, _) => closed_or_closing,
        (_, QueueState::Closing) => closed_or_closing,
        (_, s) => s,
    }
}

/// A Kubernetes Event to record on the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueEvent {
    /// Warning (else Normal).
    pub warning: bool,
    /// The reason (the action, as Volcano records it).
    pub reason: String,
    /// The message.
    pub message: String,
}

/// What one action does to a queue and around it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The queue's state afterwards.
    pub state: QueueState,
    /// Set (`Some(true)`) or clear (`Some(false)`) the queue's `closed-by-parent` mark.
    pub mark_closed_by_parent: Option<bool>,
    /// Children to mark `closed-by-parent` and close.
    pub close_children: Vec<String>,
    /// Children to open (they were closed by this queue's closing).
    pub open_children: Vec<String>,
    /// An action to run on the queue itself afterwards (a sync that follows the parent).
    pub follow_up: Option<Action>,
    /// The event to record.
    pub event: Option<QueueEvent>,
}

impl Decision {
    fn stay(state: QueueState) -> Self {
        Decision {
            state,
            mark_closed_by_parent: None,
            close_children: Vec::new(),
            open_children: Vec::new(),
            follow_up: None,
            event: None,
        }
    }
}

/// Why an action cannot run now (it is retried with back-off).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QueueError {
    /// A queue under a closing or closed parent cannot be opened.
    #[error("cannot open queue {queue}: its parent queue {parent} is {state:?}; open the parent queue first")]
    ParentClosed {
        /// The queue.
        queue: String,
        /// Its parent.
        parent: String,
        /// The parent's state.
        state: QueueState,
    },
}

/// What `action` does to `queue` (in `state`, which may differ from the stored one when
/// several actions run in one reconcile), given all `queues` and the queue's PodGroup
/// count.
pub fn decide<'a>(
    queue: &Queue,
    state: QueueState,
    action: &Action,
    queues: impl IntoIterator<Item = &'a Queue> + Clone,
    pod_groups: i32,
) -> Result<Decision, QueueError> {
    let name = name_of(queue).to_string();
    let children = || {
        queues
            .clone()
            .into_iter()
            .filter(|q| name_of(q) != name && parent_of(q) == Some(name.as_str()))
            .collect::<Vec<_>>()
    };
    let parent_state = || {
        parent_of(queue).and_then(|p| queues.clone().into_iter().find(|q| name_of(q) == p)).map(|p| (p, state_of(p)))
    };
    match action {
        Action::OpenQueue => {
            let mut d = Decision::stay(QueueState::Open);
            if state != QueueState::Open {
                if let Some((p, ps)) =
                    parent_state().filter(|(p, ps)| name_of(p) != ROOT_QUEUE && closed_or_closing(*ps))
                {
                    return Err(QueueError::ParentClosed { queue: name, parent: name_of(p).to_string(), state: ps });
                }
                d.open_children =
                    children().into_iter().filter(|c| closed_by_parent(c)).map(|c| name_of(c).to_string()).collect();
                d.event = Some(QueueEvent {
                    warning: false,
                    reason: Action::OpenQueue.as_str().to_string(),
                    message: "Open queue succeed".into(),
                });
            }
            if closed_by_parent(queue) {
                d.mark_closed_by_parent = Some(false);
            }
            Ok(d)
        }
        Action::CloseQueue => {
            if name == ROOT_QUEUE {
                let mut d = Decision::stay(state);
                d.event = Some(QueueEvent {
                    warning: true,
                    reason: Action::CloseQueue.as_str().to_string(),
                    message: "Root queue cannot be closed".into(),
                });
                return Ok(d);
            }
            let mut d = Decision::stay(next_state(state, action, pod_groups));
            if !closed_or_closing(state) {
                d.close_children = children()
                    .into_iter()
                    .filter(|c| !closed_or_closing(state_of(c)))
                    .map(|c| name_of(c).to_string())
                    .collect();
            }
            if d.state != state {
                d.event = Some(QueueEvent {
                    warning: false,
                    reason: Action::CloseQueue.as_str().to_string(),
                    message: "Close queue succeed".into(),
                });
            }
            Ok(d)
        }
        _ => {
            let mut d = Decision::stay(next_state(state, action, pod_groups));
            if let Some((_, ps)) = parent_state() {
                if closed_or_closing(ps) && !closed_or_closing(d.state) {
                    d.mark_closed_by_parent = Some(true);
                    d.follow_up = Some(Action::CloseQueue);
                } else if ps == QueueState::Open && closed_or_closing(d.state) && closed_by_parent(queue) {
                    d.follow_up = Some(Action::OpenQueue);
                }
            }
            Ok(d)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use volcano_api::crd::{PodGroupSpec, PodGroupStatus, QueueSpec, QueueStatus};

    fn queue(name: &str, parent: Option<&str>, state: Option<QueueState>, by_parent: bool) -> Queue {
        let mut q = Queue::new(name, QueueSpec { parent: parent.map(str::to_string), ..Default::default() });
        q.status = Some(QueueStatus { state, ..Default::default() });
        if by_parent {
            q.metadata.annotations = Some([(CLOSED_BY_PARENT_ANNOTATION.to_string(), "true".to_string())].into());
        }
        q
    }

    fn pg(queue: Option<&str>, phase: Option<PodGroupPhase>) -> PodGroup {
        let mut g = PodGroup::new("g", PodGroupSpec { queue: queue.map(str::to_string), ..Default::default() });
        g.status = phase.map(|p| PodGroupStatus { phase: Some(p), ..Default::default() });
        g
    }

    #[test]
    fn the_state_machine_table() {
        use QueueState::*;
        let open = Action::OpenQueue;
        let close = Action::CloseQueue;
        let sync = Action::SyncQueue;
        // (state, action, pod groups) -> state
        let rows = [
            (Open, &open, 0, Open),
            (Open, &close, 0, Closed),
            (Open, &close, 2, Closing),
            (Open, &sync, 2, Open),
            (Closing, &open, 2, Open),
            (Closing, &close, 2, Closing),
            (Closing, &close, 0, Closed),
            (Closing, &sync, 1, Closing),
            (Closing, &sync, 0, Closed),
            (Closed, &open, 0, Open),
            (Closed, &close, 3, Closed),
            (Closed, &sync, 3, Closed),
            (Unknown, &open, 0, Open),
            (Unknown, &close, 1, Closing),
            (Unknown, &close, 0, Closed),
            (Unknown, &sync, 0, Unknown),
        ];
        for (state, action, n, want) in rows {
            assert_eq!(next_state(state, action, n), want, "{state:?} {action:?} with {n} PodGroups");
        }
        // Any other action (a job action sent to a queue) is a sync.
        assert_eq!(next_state(Closing, &Action::AbortJob, 0), Closed);
        assert_eq!(state_of(&queue("q", None, None, false)), Open, "an empty state is Open");
    }

    #[test]
    fn counts_go_by_queue_and_phase() {
        let groups = [
            pg(None, Some(PodGroupPhase::Pending)),
            pg(Some("default"), Some(PodGroupPhase::Running)),
            pg(Some("a"), Some(PodGroupPhase::Inqueue)),
            pg(Some("a"), Some(PodGroupPhase::Completed)),
            pg(Some("a"), Some(PodGroupPhase::Unknown)),
            pg(Some("a"), None),
        ];
        assert_eq!(counts("default", &groups), Counts { pending: 1, running: 1, total: 2, ..Default::default() });
        assert_eq!(
            counts("a", &groups),
            Counts { inqueue: 1, completed: 1, unknown: 1, total: 4, ..Default::default() }
        );
        assert_eq!(counts("b", &groups), Counts::default());
    }

    #[test]
    fn closing_a_parent_closes_its_open_children_and_opening_it_reopens_them() {
        let root = queue("root", None, Some(QueueState::Open), false);
        let eng = queue("eng", Some("root"), Some(QueueState::Open), false);
        let dev = queue("dev", Some("eng"), Some(QueueState::Open), false);
        let ops = queue("ops", Some("eng"), Some(QueueState::Closed), false);
        let other = queue("other", None, Some(QueueState::Open), false);
        let all = [root.clone(), eng.clone(), dev.clone(), ops.clone(), other.clone()];

        let d = decide(&eng, QueueState::Open, &Action::CloseQueue, &all, 1).unwrap();
        assert_eq!(d.state, QueueState::Closing);
        assert_eq!(d.close_children, vec!["dev".to_string()], "ops is closed already");
        assert_eq!(d.event.as_ref().unwrap().message, "Close queue succeed");

        // Closing again does not touch the children.
        let d = decide(&eng, QueueState::Closing, &Action::CloseQueue, &all, 0).unwrap();
        assert_eq!(d.state, QueueState::Closed);
        assert!(d.close_children.is_empty());

        // root cannot be closed; queues without a parent are root's children.
        let d = decide(&root, QueueState::Open, &Action::CloseQueue, &all, 0).unwrap();
        assert_eq!(d.state, QueueState::Open);
        assert!(d.event.unwrap().warning);
        assert_eq!(parent_of(&other), Some("root"));
        assert_eq!(parent_of(&root), None);

        // Opening reopens the children marked closed-by-parent only.
        let closed_eng = queue("eng", Some("root"), Some(QueueState::Closed), false);
        let marked_dev = queue("dev", Some("eng"), Some(QueueState::Closed), true);
        let all = [root.clone(), closed_eng.clone(), marked_dev.clone(), ops.clone()];
        let d = decide(&closed_eng, QueueState::Closed, &Action::OpenQueue, &all, 0).unwrap();
        assert_eq!(d.state, QueueState::Open);
        assert_eq!(d.open_children, vec!["dev".to_string()]);
        assert_eq!(d.event.unwrap().message, "Open queue succeed");

        // A child under a closed parent cannot be opened; opening it clears its mark.
        assert_eq!(
            decide(&marked_dev, QueueState::Closed, &Action::OpenQueue, &all, 0),
            Err(QueueError::ParentClosed { queue: "dev".into(), parent: "eng".into(), state: QueueState::Closed })
        );
        let open_eng = queue("eng", Some("root"), Some(QueueState::Open), false);
        let all = [root, open_eng, marked_dev.clone()];
        let d = decide(&marked_dev, QueueState::Closed, &Action::OpenQueue, &all, 0).unwrap();
        assert_eq!((d.state, d.mark_closed_by_parent), (QueueState::Open, Some(false)));
        // Opening an open queue records nothing.
        assert_eq!(decide(&eng, QueueState::Open, &Action::OpenQueue, &all, 0).unwrap().event, None);
    }

    #[test]
    fn a_sync_follows_the_parent() {
        let closed_parent = queue("eng", Some("root"), Some(QueueState::Closing), false);
        let child = queue("dev", Some("eng"), None, false);
        let d = decide(&child, QueueState::Open, &Action::SyncQueue, [&closed_parent, &child], 0).unwrap();
        assert_eq!(d.state, QueueState::Open);
        assert_eq!((d.mark_closed_by_parent, d.follow_up), (Some(true), Some(Action::CloseQueue)));

        let open_parent = queue("eng", Some("root"), Some(QueueState::Open), false);
        let marked = queue("dev", Some("eng"), Some(QueueState::Closed), true);
        let d = decide(&marked, QueueState::Closed, &Action::SyncQueue, [&open_parent, &marked], 0).unwrap();
        assert_eq!(d.follow_up, Some(Action::OpenQueue));
        // A queue its owner closed stays closed under an open parent.
        let unmarked = queue("dev", Some("eng"), Some(QueueState::Closed), false);
        let d = decide(&unmarked, QueueState::Closed, &Action::SyncQueue, [&open_parent, &unmarked], 0).unwrap();
        assert_eq!((d.state, d.follow_up), (QueueState::Closed, None));
        // A parent that does not exist (yet) changes nothing.
        let d = decide(&child, QueueState::Open, &Action::SyncQueue, [&child], 0).unwrap();
        assert_eq!(d, Decision::stay(QueueState::Open));
    }
}
