//! Resizing a group of indexed members (a task's pods, a training job's workers) without
//! pulling a host out from under the processes that read the group's host list: a pure state
//! machine, independent of the Volcano Job, so that any controller can drive it.
//!
//! The inputs are the members the group should have (`desired`), its minimum, the pods that
//! exist (ready or not, terminating or not) and the time; the state is the host list as last
//! published and the operation in flight. [`step`] returns the next state, the host list to
//! publish, the pods to create and to delete, the events, and when to look again.
//!
//! The order is the safe one:
//! - **scale-out**: the new members' pods are created; once every one of them is Ready they
//!   are added to the host list; if they are not all Ready by the ready timeout, the
//!   scale-out is rolled back (their pods deleted; they were never published) and not tried
//!   again until the desired members change;
//! - **scale-in**: the members are removed from the host list first; their pods are deleted,
//!   highest index first, once the grace period has passed, so that a launcher reading the
//!   list has stopped using them.
//!
//! Two requests in flight: a scale-out not published yet is **superseded** by a newer
//! request (its members no longer desired lose their pods at once, new members join it with
//! a fresh timeout); a scale-in whose hosts are already unpublished **completes first** (the
//! next request waits for its grace period; members asked for again keep their pods and are
//! published again once Ready). A request below the minimum is refused with a reason, and
//! the group keeps its members.

use std::collections::{BTreeMap, BTreeSet};

/// A member of a group: its index (a pod's `volcano.sh/task-index`).
pub type Member = i32;

/// The default grace period between unpublishing a host and deleting its pod, in seconds.
pub const DEFAULT_GRACE_SECONDS: i64 = volcano_api::job::DEFAULT_SCALE_IN_GRACE_SECONDS;
/// The default time new members have to become Ready, in seconds.
pub const DEFAULT_READY_TIMEOUT_SECONDS: i64 = volcano_api::job::DEFAULT_SCALE_OUT_TIMEOUT_SECONDS;

/// How long the steps wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Milliseconds between removing hosts from the host list and deleting their pods.
    pub grace_ms: i64,
    /// Milliseconds a scale-out's pods have to become Ready before it is rolled back.
    pub ready_timeout_ms: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { grace_ms: DEFAULT_GRACE_SECONDS * 1000, ready_timeout_ms: DEFAULT_READY_TIMEOUT_SECONDS * 1000 }
    }
}

/// What the caller sees of a member's pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemberPod {
    /// Running with every container ready.
    pub ready: bool,
    /// Being deleted (or about to be, e.g. marked out of sync): neither created again nor
    /// deleted again, and not ready.
    pub terminating: bool,
}

/// One step's inputs.
#[derive(Clone, Copy, Debug)]
pub struct Input<'a> {
    /// The members the group should have.
    pub desired: &'a BTreeSet<Member>,
    /// The fewest members the group may have.
    pub minimum: usize,
    /// Where the minimum comes from, for the refusal's reason (`spec.tasks[1].minAvailable`).
    pub minimum_field: &'a str,
    /// The members' pods that exist.
    pub pods: &'a BTreeMap<Member, MemberPod>,
    /// Milliseconds since the epoch.
    pub now_ms: i64,
    /// The waits.
    pub settings: Settings,
}

/// The operation in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Members whose pods are made and not published yet.
    Out {
        /// The members being added.
        adding: BTreeSet<Member>,
        /// When the scale-out is rolled back unless they are all Ready.
        deadline_ms: i64,
    },
    /// Members unpublished whose pods are not deleted yet.
    In {
        /// The members being removed.
        removing: BTreeSet<Member>,
        /// When their pods are deleted.
        delete_at_ms: i64,
    },
}

/// What the machine remembers of a group between steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScaleState {
    /// The host list as last published.
    pub published: BTreeSet<Member>,
    /// The operation in flight.
    pub op: Option<Op>,
    /// The desired members of a scale-out that was rolled back: not tried again until the
    /// desired members change.
    pub rolled_back: Option<BTreeSet<Member>>,
    /// The desired members last refused (refused once, not on every step).
    pub refused: Option<BTreeSet<Member>>,
}

impl ScaleState {
    /// The state of a group seen for the first time (a new group, or a controller that
    /// restarted): the desired members and every member whose pod is alive count as
    /// published. A scale-in in its grace period thus starts its grace period again, and a
    /// scale-out in flight is published at once.
    pub fn resume(desired: &BTreeSet<Member>, pods: &BTreeMap<Member, MemberPod>) -> Self {
        let mut published = desired.clone();
        published.extend(pods.iter().filter(|(_, p)| !p.terminating).map(|(m, _)| *m));
        ScaleState { published, ..Default::default() }
    }

    /// The state of a group seen for the first time whose host list is known (a controller
    /// that restarted reads the list it published): exactly those members count as
    /// published, so a scale-out that was in flight is judged again (its pods join the list
    /// only once they are all Ready) and a scale-in whose hosts were still listed starts
    /// again with its grace period.
    pub fn resume_published(published: &BTreeSet<Member>) -> Self {
        ScaleState { published: published.clone(), ..Default::default() }
    }

    /// The members that keep a pod: the published ones and those of the operation in flight.
    pub fn holding(&self) -> BTreeSet<Member> {
        let mut out = self.published.clone();
        match &self.op {
            Some(Op::Out { adding: m, .. }) | Some(Op::In { removing: m, .. }) => out.extend(m.iter().copied()),
            None => {}
        }
        out
    }

    /// The members the group is heading to: the published ones and those being added.
    fn heading_to(&self) -> BTreeSet<Member> {
        let mut out = self.published.clone();
        if let Some(Op::Out { adding, .. }) = &self.op {
            out.extend(adding.iter().copied());
        }
        out
    }
}

/// What happened in a step, for events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScaleEvent {
    /// Pods are made for new members; they are published once Ready.
    ScaleOutStarted {
        /// The new members.
        adding: Vec<Member>,
    },
    /// The new members are Ready and published.
    ScaleOutSucceeded {
        /// The members added to the host list.
        added: Vec<Member>,
    },
    /// The new members were not all Ready by the timeout: their pods go.
    ScaleOutRolledBack {
        /// The members dropped.
        members: Vec<Member>,
        /// Those of them not Ready.
        not_ready: Vec<Member>,
    },
    /// A newer request no longer wants some members of a scale-out in flight: their pods go.
    ScaleOutSuperseded {
        /// The members dropped.
        dropped: Vec<Member>,
    },
    /// Members were removed from the host list; their pods go after the grace period.
    ScaleInStarted {
        /// The members removed from the host list.
        removing: Vec<Member>,
        /// When their pods are deleted.
        delete_at_ms: i64,
    },
    /// The grace period is over: the removed members' pods are deleted.
    ScaleInSucceeded {
        /// The members whose pods are deleted.
        removed: Vec<Member>,
    },
    /// A request below the minimum: the group keeps its members.
    Refused {
        /// Why.
        reason: String,
    },
}

fn members(m: &[Member]) -> String {
    m.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

impl ScaleEvent {
    /// The event's reason.
    pub fn reason(&self) -> &'static str {
        match self {
            ScaleEvent::ScaleOutStarted { .. } | ScaleEvent::ScaleOutSucceeded { .. } => "ScaleOut",
            ScaleEvent::ScaleOutRolledBack { .. } | ScaleEvent::ScaleOutSuperseded { .. } => "ScaleOutRolledBack",
            ScaleEvent::ScaleInStarted { .. } | ScaleEvent::ScaleInSucceeded { .. } => "ScaleIn",
            ScaleEvent::Refused { .. } => "ScaleRefused",
        }
    }

    /// The step's name (`ScaleOutStarted`, ...), for the events API's `action`.
    pub fn kind(&self) -> &'static str {
        match self {
            ScaleEvent::ScaleOutStarted { .. } => "ScaleOutStarted",
            ScaleEvent::ScaleOutSucceeded { .. } => "ScaleOutSucceeded",
            ScaleEvent::ScaleOutRolledBack { .. } => "ScaleOutRolledBack",
            ScaleEvent::ScaleOutSuperseded { .. } => "ScaleOutSuperseded",
            ScaleEvent::ScaleInStarted { .. } => "ScaleInStarted",
            ScaleEvent::ScaleInSucceeded { .. } => "ScaleInSucceeded",
            ScaleEvent::Refused { .. } => "ScaleRefused",
        }
    }

    /// Whether it is a warning (a rollback or a refusal).
    pub fn warning(&self) -> bool {
        matches!(self, ScaleEvent::ScaleOutRolledBack { .. } | ScaleEvent::Refused { .. })
    }

    /// What it says of group `group` (a task's name), at `now_ms`.
    pub fn message(&self, group: &str, now_ms: i64) -> String {
        match self {
            ScaleEvent::ScaleOutStarted { adding } => {
                format!("{group}: scale-out: creating members {}; they join the host list once Ready", members(adding))
            }
            ScaleEvent::ScaleOutSucceeded { added } => {
                format!("{group}: scale-out done: members {} are Ready and in the host list", members(added))
            }
            ScaleEvent::ScaleOutRolledBack { members: m, not_ready } => format!(
                "{group}: scale-out rolled back: members {} not Ready in time; deleting members {}",
                members(not_ready),
                members(m)
            ),
            ScaleEvent::ScaleOutSuperseded { dropped } => format!(
                "{group}: scale-out superseded by a newer size: deleting members {} (never in the host list)",
                members(dropped)
            ),
            ScaleEvent::ScaleInStarted { removing, delete_at_ms } => format!(
                "{group}: scale-in: members {} removed from the host list; their pods are deleted in {}s",
                members(removing),
                ((delete_at_ms - now_ms).max(0) + 999) / 1000
            ),
            ScaleEvent::ScaleInSucceeded { removed } => {
                format!("{group}: scale-in: grace period over, deleting members {}", members(removed))
            }
            ScaleEvent::Refused { reason } => format!("{group}: resize refused: {reason}"),
        }
    }
}

/// One step's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The state to remember once the step is applied.
    pub state: ScaleState,
    /// The host list to publish (the state's `published`).
    pub publish: BTreeSet<Member>,
    /// Members whose pods to create, lowest first.
    pub create: Vec<Member>,
    /// Members whose pods to delete, highest first.
    pub delete: Vec<Member>,
    /// What happened.
    pub events: Vec<ScaleEvent>,
    /// When the operation in flight needs a step even if nothing changes (its grace period or
    /// timeout), in milliseconds since the epoch.
    pub wake_at_ms: Option<i64>,
}

fn list(s: &BTreeSet<Member>) -> Vec<Member> {
    s.iter().copied().collect()
}

/// One step of a group (see the module documentation).
pub fn step(state: &ScaleState, input: &Input<'_>) -> Outcome {
    let mut s = state.clone();
    let mut events = Vec::new();
    let now = input.now_ms;
    let ready = |m: &Member| input.pods.get(m).is_some_and(|p| p.ready && !p.terminating);

    // The target: the desired members, unless that is below the minimum.
    let mut target = input.desired.clone();
    if target.len() < input.minimum {
        if s.refused.as_ref() != Some(&target) {
            events.push(ScaleEvent::Refused {
                reason: format!(
                    "{} members asked for, fewer than the minimum {} ({}): the group keeps its {} members",
                    target.len(),
                    input.minimum,
                    input.minimum_field,
                    s.heading_to().len()
                ),
            });
        }
        s.refused = Some(target);
        target = s.heading_to();
    } else {
        s.refused = None;
    }
    if s.rolled_back.as_ref().is_some_and(|r| *r != target) {
        s.rolled_back = None;
    }

    // The operation in flight.
    match s.op.take() {
        Some(Op::In { removing, delete_at_ms }) => {
            if now >= delete_at_ms {
                events.push(ScaleEvent::ScaleInSucceeded { removed: removing.iter().rev().copied().collect() });
            } else {
                s.op = Some(Op::In { removing, delete_at_ms });
            }
        }
        Some(Op::Out { adding, deadline_ms }) => {
            let dropped: BTreeSet<Member> = adding.difference(&target).copied().collect();
            if !dropped.is_empty() {
                events.push(ScaleEvent::ScaleOutSuperseded { dropped: list(&dropped) });
            }
            let mut wanted: BTreeSet<Member> = adding.intersection(&target).copied().collect();
            let joining: BTreeSet<Member> =
                target.iter().filter(|m| !s.published.contains(*m) && !wanted.contains(*m)).copied().collect();
            let deadline_ms = if joining.is_empty() {
                deadline_ms
            } else {
                events.push(ScaleEvent::ScaleOutStarted { adding: list(&joining) });
                wanted.extend(joining);
                now.saturating_add(input.settings.ready_timeout_ms)
            };
            // Nothing left of it when no member is wanted any more.
            if !wanted.is_empty() {
                if wanted.iter().all(ready) {
                    events.push(ScaleEvent::ScaleOutSucceeded { added: list(&wanted) });
                    s.published.extend(wanted);
                } else if now >= deadline_ms {
                    let not_ready = wanted.iter().filter(|m| !ready(m)).copied().collect();
                    events.push(ScaleEvent::ScaleOutRolledBack { members: list(&wanted), not_ready });
                    s.rolled_back = Some(target.clone());
                } else {
                    s.op = Some(Op::Out { adding: wanted, deadline_ms });
                }
            }
        }
        None => {}
    }

    // A new operation, when none is in flight: removals first, then additions.
    if s.op.is_none() {
        let removing: BTreeSet<Member> = s.published.difference(&target).copied().collect();
        let adding: BTreeSet<Member> = target.difference(&s.published).copied().collect();
        if !removing.is_empty() {
            s.published.retain(|m| !removing.contains(m));
            let delete_at_ms = now.saturating_add(input.settings.grace_ms.max(0));
            events
                .push(ScaleEvent::ScaleInStarted { removing: removing.iter().rev().copied().collect(), delete_at_ms });
            if delete_at_ms <= now {
                events.push(ScaleEvent::ScaleInSucceeded { removed: removing.iter().rev().copied().collect() });
            } else {
                s.op = Some(Op::In { removing, delete_at_ms });
            }
        } else if !adding.is_empty() && s.rolled_back.is_none() {
            events.push(ScaleEvent::ScaleOutStarted { adding: list(&adding) });
            if adding.iter().all(ready) {
                events.push(ScaleEvent::ScaleOutSucceeded { added: list(&adding) });
                s.published.extend(adding);
            } else {
                let deadline_ms = now.saturating_add(input.settings.ready_timeout_ms);
                s.op = Some(Op::Out { adding, deadline_ms });
            }
        }
    }

    // The pods: the members that hold one keep it (made when missing, except for members
    // being removed), every other pod goes.
    let holding = s.holding();
    let removing: BTreeSet<Member> = match &s.op {
        Some(Op::In { removing, .. }) => removing.clone(),
        _ => BTreeSet::new(),
    };
    let create: Vec<Member> =
        holding.iter().filter(|m| !removing.contains(*m) && !input.pods.contains_key(*m)).copied().collect();
    let delete: Vec<Member> =
        input.pods.iter().rev().filter(|(m, p)| !p.terminating && !holding.contains(*m)).map(|(m, _)| *m).collect();
    let wake_at_ms = match &s.op {
        Some(Op::Out { deadline_ms, .. }) => Some(*deadline_ms),
        Some(Op::In { delete_at_ms, .. }) => Some(*delete_at_ms),
        None => None,
    };
    Outcome { publish: s.published.clone(), state: s, create, delete, events, wake_at_ms }
}

/// The members `0..n` (a Volcano task's pods for `replicas = n`).
pub fn first(n: i32) -> BTreeSet<Member> {
    (0..n.max(0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTINGS: Settings = Settings { grace_ms: 30_000, ready_timeout_ms: 600_000 };

    fn pods(ready: &[Member], not_ready: &[Member]) -> BTreeMap<Member, MemberPod> {
        let mut out = BTreeMap::new();
        for m in ready {
            out.insert(*m, MemberPod { ready: true, terminating: false });
        }
        for m in not_ready {
            out.insert(*m, MemberPod { ready: false, terminating: false });
        }
        out
    }

    fn run(state: &ScaleState, desired: i32, pods: &BTreeMap<Member, MemberPod>, now_ms: i64) -> Outcome {
        step(
            state,
            &Input {
                desired: &first(desired),
                minimum: 1,
                minimum_field: "spec.tasks[0].minAvailable",
                pods,
                now_ms,
                settings: SETTINGS,
            },
        )
    }

    fn steady(n: i32) -> ScaleState {
        ScaleState { published: first(n), ..Default::default() }
    }

    #[test]
    fn a_new_group_publishes_its_members_and_makes_their_pods() {
        let none = BTreeMap::new();
        let s = ScaleState::resume(&first(3), &none);
        let o = run(&s, 3, &none, 0);
        assert_eq!(o.publish, first(3));
        assert_eq!(o.create, [0, 1, 2]);
        assert!(o.delete.is_empty() && o.events.is_empty() && o.wake_at_ms.is_none());
    }

    #[test]
    fn scale_out_makes_pods_then_publishes_them_once_ready() {
        // 2 → 4: pods 2 and 3 are made, the host list keeps 0 and 1.
        let o = run(&steady(2), 4, &pods(&[0, 1], &[]), 0);
        assert_eq!(o.create, [2, 3]);
        assert_eq!(o.publish, first(2), "not published before they are Ready");
        assert_eq!(o.events, [ScaleEvent::ScaleOutStarted { adding: vec![2, 3] }]);
        assert_eq!(o.wake_at_ms, Some(600_000));
        // One of them Ready: still waiting, nothing made twice.
        let o = run(&o.state, 4, &pods(&[0, 1, 2], &[3]), 10_000);
        assert!(o.create.is_empty() && o.delete.is_empty() && o.events.is_empty());
        assert_eq!(o.publish, first(2));
        // Both Ready: published.
        let o = run(&o.state, 4, &pods(&[0, 1, 2, 3], &[]), 20_000);
        assert_eq!(o.publish, first(4));
        assert_eq!(o.events, [ScaleEvent::ScaleOutSucceeded { added: vec![2, 3] }]);
        assert_eq!(o.state.op, None);
        assert_eq!(o.wake_at_ms, None);
    }

    #[test]
    fn scale_in_unpublishes_first_then_deletes_highest_first_after_the_grace_period() {
        let all = pods(&[0, 1, 2, 3], &[]);
        let o = run(&steady(4), 2, &all, 0);
        assert_eq!(o.publish, first(2), "the hosts leave the list first");
        assert!(o.delete.is_empty(), "no pod goes during the grace period");
        assert_eq!(o.events, [ScaleEvent::ScaleInStarted { removing: vec![3, 2], delete_at_ms: 30_000 }]);
        assert_eq!(o.wake_at_ms, Some(30_000));
        // During the grace period a removed pod that died is not made again.
        let o2 = run(&o.state, 2, &pods(&[0, 1, 3], &[]), 10_000);
        assert!(o2.create.is_empty() && o2.delete.is_empty());
        // The grace period is over: highest index first.
        let o = run(&o.state, 2, &all, 30_000);
        assert_eq!(o.delete, [3, 2]);
        assert_eq!(o.events, [ScaleEvent::ScaleInSucceeded { removed: vec![3, 2] }]);
        assert_eq!(o.publish, first(2));
        assert_eq!(o.state.op, None);
        // Without a grace period the pods go in the same step, after the list changed.
        let o = step(
            &steady(4),
            &Input {
                desired: &first(3),
                minimum: 1,
                minimum_field: "f",
                pods: &all,
                now_ms: 0,
                settings: Settings { grace_ms: 0, ..SETTINGS },
            },
        );
        assert_eq!((o.publish.clone(), o.delete.clone()), (first(3), vec![3]));
    }

    #[test]
    fn a_scale_out_whose_pods_never_become_ready_is_rolled_back_at_its_timeout() {
        let o = run(&steady(2), 3, &pods(&[0, 1], &[]), 0);
        let o = run(&o.state, 3, &pods(&[0, 1], &[2]), 599_999);
        assert!(o.events.is_empty(), "still in time");
        let o = run(&o.state, 3, &pods(&[0, 1], &[2]), 600_000);
        assert_eq!(o.events, [ScaleEvent::ScaleOutRolledBack { members: vec![2], not_ready: vec![2] }]);
        assert_eq!(o.delete, [2], "its pod goes; it was never published");
        assert_eq!(o.publish, first(2));
        // Not tried again while the request is the same ...
        let o = run(&o.state, 3, &pods(&[0, 1], &[]), 700_000);
        assert!(o.create.is_empty() && o.events.is_empty() && o.state.op.is_none());
        // ... but a new request is.
        let o = run(&o.state, 4, &pods(&[0, 1], &[]), 800_000);
        assert_eq!(o.create, [2, 3]);
        assert_eq!(o.events, [ScaleEvent::ScaleOutStarted { adding: vec![2, 3] }]);
    }

    #[test]
    fn a_newer_request_supersedes_a_scale_out_and_waits_for_a_scale_in() {
        // 2 → 5 in flight, then 2 → 3: pods 3 and 4 go at once (never published).
        let o = run(&steady(2), 5, &pods(&[0, 1], &[]), 0);
        let o = run(&o.state, 3, &pods(&[0, 1], &[2, 3, 4]), 1_000);
        assert_eq!(o.events, [ScaleEvent::ScaleOutSuperseded { dropped: vec![3, 4] }]);
        assert_eq!(o.delete, [4, 3]);
        assert_eq!(o.state.op, Some(Op::Out { adding: [2].into(), deadline_ms: 600_000 }));
        // Then 2 → 4: member 3 joins with a fresh timeout.
        let o = run(&o.state, 4, &pods(&[0, 1], &[2]), 2_000);
        assert_eq!(o.events, [ScaleEvent::ScaleOutStarted { adding: vec![3] }]);
        assert_eq!(o.create, [3]);
        assert_eq!(o.state.op, Some(Op::Out { adding: [2, 3].into(), deadline_ms: 602_000 }));
        // A request below the published members abandons the scale-out and starts a scale-in.
        let o = run(&o.state, 1, &pods(&[0, 1], &[2, 3]), 3_000);
        assert_eq!(
            o.events,
            [
                ScaleEvent::ScaleOutSuperseded { dropped: vec![2, 3] },
                ScaleEvent::ScaleInStarted { removing: vec![1], delete_at_ms: 33_000 }
            ]
        );
        assert_eq!(o.delete, [3, 2]);
        assert_eq!(o.publish, first(1));
        // A scale-in in its grace period completes first: 1 → 3 waits ...
        let o = run(&o.state, 3, &pods(&[0, 1], &[]), 4_000);
        assert!(o.events.is_empty() && o.create.is_empty() && o.delete.is_empty());
        assert_eq!(o.publish, first(1));
        // ... then member 1, asked for again, keeps its pod and is published at once (it is
        // Ready); member 2 is made.
        let o = run(&o.state, 3, &pods(&[0, 1], &[]), 33_000);
        assert_eq!(
            o.events,
            [ScaleEvent::ScaleInSucceeded { removed: vec![1] }, ScaleEvent::ScaleOutStarted { adding: vec![1, 2] }]
        );
        assert!(o.delete.is_empty(), "member 1 is wanted again");
        assert_eq!(o.create, [2]);
    }

    #[test]
    fn a_scale_in_below_the_minimum_is_refused_with_a_reason_once() {
        let all = pods(&[0, 1, 2, 3], &[]);
        let one = first(1);
        let input = |now_ms| Input {
            desired: &one,
            minimum: 2,
            minimum_field: "spec.tasks[0].minAvailable",
            pods: &all,
            now_ms,
            settings: SETTINGS,
        };
        let o = step(&steady(4), &input(0));
        assert_eq!(
            o.events,
            [ScaleEvent::Refused {
                reason: "1 members asked for, fewer than the minimum 2 (spec.tasks[0].minAvailable): the group \
                         keeps its 4 members"
                    .into()
            }]
        );
        assert_eq!(o.publish, first(4));
        assert!(o.delete.is_empty() && o.create.is_empty());
        let again = step(&o.state, &input(1_000));
        assert!(again.events.is_empty(), "refused once");
        assert_eq!(again.publish, first(4));
    }

    #[test]
    fn events_say_what_happens_to_which_members() {
        let started = ScaleEvent::ScaleInStarted { removing: vec![3, 2], delete_at_ms: 30_000 };
        assert_eq!(
            started.message("task worker", 500),
            "task worker: scale-in: members 3, 2 removed from the host list; their pods are deleted in 30s"
        );
        assert_eq!((started.reason(), started.kind(), started.warning()), ("ScaleIn", "ScaleInStarted", false));
        let back = ScaleEvent::ScaleOutRolledBack { members: vec![2, 3], not_ready: vec![3] };
        assert_eq!(
            back.message("w", 0),
            "w: scale-out rolled back: members 3 not Ready in time; deleting members 2, 3"
        );
        assert!(back.warning() && ScaleEvent::Refused { reason: String::new() }.warning());
    }

    #[test]
    fn after_a_restart_live_pods_count_as_published() {
        // A scale-in was in its grace period (pods 2 and 3 alive, desired 2): it starts again.
        let all = pods(&[0, 1, 2, 3], &[]);
        let s = ScaleState::resume(&first(2), &all);
        assert_eq!(s.published, first(4));
        let o = run(&s, 2, &all, 0);
        assert_eq!(o.publish, first(2));
        assert!(o.delete.is_empty());
        // Terminating pods are neither published, made again nor deleted again.
        let mut going = pods(&[0], &[]);
        going.insert(1, MemberPod { ready: false, terminating: true });
        let s = ScaleState::resume(&first(1), &going);
        let o = run(&s, 1, &going, 0);
        assert_eq!(o.publish, first(1));
        assert!(o.create.is_empty() && o.delete.is_empty());
    }
}
