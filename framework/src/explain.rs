//! "Why is my job pending": one cycle run over a snapshot, and what its session saw of one
//! job, as facts (an [`Explanation`]) that `volcano-rs explain` prints or writes as JSON.
//!
//! The facts come from the session as the actions left it, before it closes: the job's
//! phase and task counts, why it was not admitted (the plugin and its message, with the
//! queue or cluster bound and what is left of it), where its tasks were placed, what every
//! pending task found on the nodes (a histogram of predicate failures), the jobs of its queue
//! ordered before it and the plugin that ordered them, and why no preemption or reclaim freed
//! room (not configured, not starving, or the victims each voting plugin allowed).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::close::CycleOutcome;
use crate::cycle::{run_cycle_inspected, CycleContext};
use crate::model::{JobId, TaskId, TaskStatus};
use crate::plugin::Hooks;
use crate::profile::Profile;
use crate::session::Session;
use crate::snapshot::{QueuelessGroup, Snapshot};

/// What one cycle saw of one job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Explanation {
    /// The PodGroup, `namespace/name`.
    pub job: String,
    /// Its queue.
    pub queue: String,
    /// Its priority (from its PriorityClass).
    pub priority: i32,
    /// `spec.minMember`.
    pub min_member: i32,
    /// The PodGroup phase the cycle leaves it in.
    pub phase: String,
    /// The gang is ready (at least `minMember` tasks placed or running).
    pub ready: bool,
    /// Task counts by status (`Pending`, `Pipelined`, `Running`, …), statuses with none left out.
    pub tasks: BTreeMap<String, u32>,
    /// Why the job was not admitted, if it was not: the plugin's message.
    pub not_admitted: Option<String>,
    /// A job-level refusal recorded in this cycle for an admitted job (a queue limit that
    /// stopped its tasks in `allocate`: the bound, per resource, what is left).
    pub refused: Option<String>,
    /// Pending tasks that found a node in an attempt the cycle then rolled back (its gang
    /// could not be completed): (task, node).
    pub rolled_back: Vec<(String, String)>,
    /// Tasks holding a node after the cycle (`task`, node, status).
    pub placed: Vec<(String, String, String)>,
    /// Pending tasks grouped by what they found on the nodes.
    pub blocked: Vec<Blocked>,
    /// Pending tasks the cycle did not try (the job was not reached, or its gang could not
    /// be completed before them).
    pub not_tried: u32,
    /// Jobs of the same queue ordered before this one, with the plugin that ordered them.
    pub ahead: Vec<Ahead>,
    /// Jobs of the same queue ordered before this one beyond those listed.
    pub more_ahead: usize,
    /// Why no eviction made room for the job.
    pub preemption: Vec<String>,
    /// The PodGroup condition message the cycle writes (`Unschedulable`), if any.
    pub condition: Option<String>,
    /// The job's network topology constraint and where its placed pods are: `hard, tier 1
    /// or below (leaf); placed pods within HyperNode leaf-3 (tier 1)`. `None` for a job
    /// without one.
    pub network_topology: Option<String>,
}

/// Pending tasks with the same predicate failures.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Blocked {
    /// How many tasks.
    pub count: u32,
    /// The first few of them.
    pub examples: Vec<String>,
    /// A task-level reason (a pre-predicate, a queue limit), if any.
    pub error: Option<String>,
    /// Nodes tried.
    pub nodes: usize,
    /// Reason → number of nodes that gave it, most frequent first.
    pub reasons: Vec<(String, u32)>,
}

/// A job ordered before the explained one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ahead {
    /// The PodGroup, `namespace/name`.
    pub job: String,
    /// The plugin whose job order put it first (`priority`, `drf`, `gang`, …), or
    /// `creation time` when every plugin abstained.
    pub by: String,
    /// Its tasks that hold a node.
    pub placed: u32,
    /// Its tasks still pending.
    pub pending: u32,
}

const EXAMPLES: usize = 3;
const AHEAD: usize = 5;

/// Runs one cycle over `snap` and explains the job `key` (`namespace/name` of its PodGroup):
/// `None` when the snapshot has no such job. The cycle's outcome comes back too (its
/// PodGroup condition is part of the explanation).
pub fn explain(snap: Snapshot, profile: &Profile, cx: &CycleContext, key: &str) -> Option<(Explanation, CycleOutcome)> {
    if let Some(group) = snap.queueless_pod_groups().get(key).cloned() {
        return Some(explain_queueless(snap, profile, cx, key, &group));
    }
    let j = snap.jobs.iter().position(|job| *job.key == *key).map(|i| JobId(i as u32))?;
    let mut found = None;
    let outcome = run_cycle_inspected(snap, profile, cx, &mut crate::cycle::NoObserver, &mut |ssn: &Session| {
        found = Some(explain_job(ssn, profile, j));
    });
    let mut e = found?;
    e.condition = outcome.pending_reasons.get(key).cloned();
    Some((e, outcome))
}

/// A PodGroup whose queue does not exist: it is no job of the session; the cycle runs for
/// its outcome (the condition it writes).
fn explain_queueless(
    snap: Snapshot,
    profile: &Profile,
    cx: &CycleContext,
    key: &str,
    group: &QueuelessGroup,
) -> (Explanation, CycleOutcome) {
    let pg = &group.pod_group;
    let mut tasks: BTreeMap<String, u32> = BTreeMap::new();
    for (pod_key, pod) in snap.pods_awaiting_group().iter().filter(|(_, p)| group.has_pod(p)) {
        let on_node = pod.node_name().is_some();
        let status = match snap.task_id(pod_key).filter(|_| on_node) {
            Some(t) => snap.task(t).status,
            None if on_node => TaskStatus::Running,
            None => TaskStatus::Pending,
        };
        *tasks.entry(format!("{status:?}")).or_default() += 1;
    }
    let phase = pg.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
    let mut e = Explanation {
        job: key.to_string(),
        queue: group.queue().to_string(),
        priority: group.priority,
        min_member: pg.spec.min_member,
        phase: format!("{phase:?}"),
        ready: false,
        tasks,
        not_admitted: Some(group.message()),
        ..Default::default()
    };
    let outcome = crate::cycle::run_cycle(snap, profile, cx, &mut crate::cycle::NoObserver);
    e.condition = outcome.pending_reasons.get(key).cloned();
    (e, outcome)
}

/// The PodGroup `namespace/name` names: itself when the snapshot has that PodGroup (as a
/// job, or without its queue), else the PodGroup a Volcano Job of that name owns (the
/// controller names it `<job>-<uid>`).
pub fn resolve(snap: &Snapshot, name: &str) -> Option<String> {
    if snap.jobs.iter().any(|j| *j.key == *name) || snap.queueless_pod_groups().contains_key(name) {
        return Some(name.to_string());
    }
    let (ns, job) = name.split_once('/')?;
    let owned_by_job = |namespace: &str, pg: &volcano_api::crd::PodGroup| {
        namespace == ns
            && pg
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "Job" && o.name == job && o.api_version.starts_with("batch.volcano.sh/"))
    };
    snap.jobs.iter().find(|j| owned_by_job(&j.namespace, &j.pod_group)).map(|j| j.key.to_string()).or_else(|| {
        snap.queueless_pod_groups()
            .iter()
            .find(|(_, g)| owned_by_job(g.pod_group.metadata.namespace.as_deref().unwrap_or_default(), &g.pod_group))
            .map(|(k, _)| k.to_string())
    })
}

/// What the session, as the actions left it, says of job `j`.
pub fn explain_job(ssn: &Session, profile: &Profile, j: JobId) -> Explanation {
    let snap = &ssn.snap;
    let job = snap.job(j);
    let mut e = Explanation {
        job: job.key.to_string(),
        queue: snap.queue(job.queue).name.clone(),
        priority: job.priority,
        min_member: job.min_available,
        phase: format!("{:?}", job.phase),
        ready: job.is_ready(),
        ..Default::default()
    };
    for s in TaskStatus::ALL {
        let n = job.count(s);
        if n > 0 {
            e.tasks.insert(format!("{s:?}"), n as u32);
        }
    }
    e.not_admitted = ssn
        .admission_rejections
        .iter()
        .rev()
        .find(|(x, _)| *x == j)
        .map(|(_, why)| why.clone())
        .or_else(|| snap.job_fit_error(j).map(str::to_string).filter(|_| job.is_pending()));
    if !job.is_pending() {
        e.refused = snap.job_fit_error(j).map(str::to_string);
    }
    let fit_errors = snap.fit_errors(j);
    e.network_topology = network_topology(ssn, j);

    // Placed and blocked tasks.
    let mut groups: BTreeMap<String, Blocked> = BTreeMap::new();
    for &t in &job.tasks {
        let task = snap.task(t);
        match (task.status, task.node) {
            (TaskStatus::Pending, _) if !fit_errors.contains_key(&t) && snap.last_tx(t).is_some() => {
                let (_, n) = snap.last_tx(t).expect("checked");
                e.rolled_back.push((task.key.to_string(), snap.node(n).name.to_string()));
            }
            (TaskStatus::Pending, _) => match fit_errors.get(&t) {
                Some(fit) => {
                    let g = groups.entry(fit.to_string()).or_insert_with(|| {
                        let mut reasons: Vec<(String, u32)> =
                            fit.reasons.iter().map(|(r, n)| (r.clone(), *n)).collect();
                        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                        Blocked { error: fit.error.clone(), nodes: fit.nodes, reasons, ..Default::default() }
                    });
                    g.count += 1;
                    if g.examples.len() < EXAMPLES {
                        g.examples.push(task.key.to_string());
                    }
                }
                None => e.not_tried += 1,
            },
            (status, Some(n)) if status.is_allocated() || status == TaskStatus::Pipelined => {
                e.placed.push((task.key.to_string(), snap.node(n).name.to_string(), format!("{status:?}")))
            }
            _ => {}
        }
    }
    let mut blocked: Vec<Blocked> = groups.into_values().collect();
    blocked.sort_by_key(|b| std::cmp::Reverse(b.count));
    e.blocked = blocked;

    // Jobs of the queue ordered before it.
    if !e.ready {
        let mut ahead: Vec<JobId> = (0..snap.jobs.len() as u32)
            .map(JobId)
            .filter(|&o| o != j && snap.job(o).queue == job.queue && ssn.job_order(o, j) == Ordering::Less)
            .filter(|&o| snap.job(o).tasks.iter().any(|t| snap.task(*t).status != TaskStatus::Succeeded))
            .collect();
        ahead.sort_by(|a, b| ssn.job_order(*a, *b));
        e.more_ahead = ahead.len().saturating_sub(AHEAD);
        for o in ahead.into_iter().take(AHEAD) {
            let other = snap.job(o);
            let placed = other
                .tasks
                .iter()
                .filter(|t| {
                    let s = snap.task(**t).status;
                    s.is_allocated() || s == TaskStatus::Pipelined
                })
                .count() as u32;
            e.ahead.push(Ahead {
                job: other.key.to_string(),
                by: ssn.job_order_decider(o, j).unwrap_or("creation time").to_string(),
                placed,
                pending: other.count(TaskStatus::Pending).max(0) as u32,
            });
        }
    }

    e.preemption = preemption(ssn, profile, j);
    e
}

/// Why no eviction made room for the job.
fn preemption(ssn: &Session, profile: &Profile, j: JobId) -> Vec<String> {
    let snap = &ssn.snap;
    let job = snap.job(j);
    if job.is_ready() || job.count(TaskStatus::Pending) == 0 {
        return Vec::new();
    }
    let (preempt, reclaim) = (profile.has_action("preempt"), profile.has_action("reclaim"));
    let mut out = Vec::new();
    if !preempt && !reclaim {
        let actions: Vec<&str> = profile.actions.iter().map(|a| a.name()).collect();
        out.push(format!("no preemption or reclaim: neither action is configured (actions: {})", actions.join(", ")));
        return out;
    }
    if job.is_pending() {
        out.push("not admitted yet: preempt and reclaim only act for admitted jobs".to_string());
        return out;
    }
    if !ssn.job_starving(j) {
        out.push("not starving: every plugin with a job-starving rule says the job has what it needs".to_string());
        return out;
    }
    let Some(t) = job.tasks.iter().copied().find(|t| snap.task(*t).status == TaskStatus::Pending) else {
        return out;
    };
    if preempt {
        let candidates: Vec<TaskId> = running_preemptable(ssn, |vj| vj != j && snap.job(vj).queue == job.queue);
        out.push(votes("preempt", "in its queue", &candidates, ssn.victim_votes(Hooks::PREEMPTABLE, t, &candidates)));
    }
    if reclaim {
        let candidates = running_preemptable(ssn, |vj| {
            let q = snap.job(vj).queue;
            q != job.queue && snap.queue(q).reclaimable
        });
        out.push(votes(
            "reclaim",
            "in other reclaimable queues",
            &candidates,
            ssn.victim_votes(Hooks::RECLAIMABLE, t, &candidates),
        ));
    }
    out
}

fn running_preemptable(ssn: &Session, job_ok: impl Fn(JobId) -> bool) -> Vec<TaskId> {
    (0..ssn.snap.tasks.len() as u32)
        .map(TaskId)
        .filter(|t| {
            let task = ssn.snap.task(*t);
            task.status == TaskStatus::Running && task.preemptable && task.job.is_some_and(&job_ok)
        })
        .collect()
}

fn votes(action: &str, where_: &str, candidates: &[TaskId], votes: Vec<(&'static str, usize)>) -> String {
    if candidates.is_empty() {
        return format!("{action}: no running preemptable pod {where_} to evict");
    }
    if votes.is_empty() {
        return format!(
            "{action}: {} candidate pods {where_}, but no plugin votes on victims (none is configured for it)",
            candidates.len()
        );
    }
    let list: Vec<String> = votes.iter().map(|(p, n)| format!("{p} allows {n}")).collect();
    let zero: Vec<&str> = votes.iter().filter(|(_, n)| *n == 0).map(|(p, _)| *p).collect();
    let verdict = if zero.is_empty() {
        "victims are allowed: the pods still fit nowhere once they go, or the queue's limits stop it".to_string()
    } else {
        format!("no victim allowed by {}", zero.join(", "))
    };
    format!("{action}: {} candidate pods {where_}; {} ({verdict})", candidates.len(), list.join(", "))
}

/// The job's network topology constraint, in words, and the HyperNode its placed pods are
/// in.
fn network_topology(ssn: &Session, j: JobId) -> Option<String> {
    let snap = &ssn.snap;
    let job = snap.job(j);
    let nt = job.pod_group.spec.network_topology.as_ref()?;
    let topo = snap.topology();
    let mode = nt.mode.as_deref().unwrap_or("hard");
    let tier = match (nt.highest_tier_allowed, nt.highest_tier_name.as_deref()) {
        (Some(t), _) => {
            let name = u32::try_from(t)
                .ok()
                .and_then(|t| topo.of_tier(t).first())
                .and_then(|h| topo.get(*h).tier_name.clone());
            format!("tier {t} or below{}", name.map(|n| format!(" ({n})")).unwrap_or_default())
        }
        (None, Some(name)) => match topo.tier_named(name) {
            Some(t) => format!("tier {t} ({name}) or below"),
            None => format!("tier {name:?}, which no HyperNode names"),
        },
        (None, None) => "anywhere, lowest tier first".to_string(),
    };
    let placed = topo.common_ancestor_of_nodes(
        job.tasks
            .iter()
            .map(|t| snap.task(*t))
            .filter(|t| t.status.is_allocated() || t.status == TaskStatus::Pipelined)
            .filter_map(|t| t.node),
    );
    let at = match placed {
        Some(h) => {
            let info = topo.get(h);
            format!("; placed pods within HyperNode {} (tier {})", info.name, info.tier)
        }
        None => String::new(),
    };
    let hyper_nodes = topo.hyper_nodes().len().saturating_sub(1);
    Some(format!("{mode}, {tier}{at}; the cluster has {hyper_nodes} HyperNode(s) in tiers {:?}", topo.tiers()))
}

impl std::fmt::Display for Explanation {
    /// The readable form `volcano-rs explain` prints.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.ready { "ready" } else { "waiting" };
        writeln!(
            f,
            "{}: {state} (PodGroup {}, queue {}, priority {}, minMember {})",
            self.job, self.phase, self.queue, self.priority, self.min_member
        )?;
        let counts: Vec<String> = self.tasks.iter().map(|(s, n)| format!("{n} {s}")).collect();
        writeln!(f, "  tasks: {}", if counts.is_empty() { "none".to_string() } else { counts.join(", ") })?;
        if let Some(why) = &self.not_admitted {
            writeln!(f, "  not admitted: {why}")?;
        }
        if let Some(nt) = &self.network_topology {
            writeln!(f, "  network topology: {nt}")?;
        }
        if let Some(why) = &self.refused {
            writeln!(f, "  refused: {why}")?;
        }
        if !self.rolled_back.is_empty() {
            let shown: Vec<String> =
                self.rolled_back.iter().take(EXAMPLES * 2).map(|(t, n)| format!("{t} on {n}")).collect();
            let more = self.rolled_back.len().saturating_sub(EXAMPLES * 2);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            writeln!(
                f,
                "  fit, rolled back: {} task(s) found a node, but the gang could not be completed, so the \
                 cycle undid them: {}{more}",
                self.rolled_back.len(),
                shown.join(", ")
            )?;
        }
        if self.placed.is_empty() {
            writeln!(f, "  placed: none")?;
        } else {
            let shown: Vec<String> =
                self.placed.iter().take(EXAMPLES * 2).map(|(t, n, s)| format!("{t} on {n} ({s})")).collect();
            let more = self.placed.len().saturating_sub(EXAMPLES * 2);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            writeln!(f, "  placed: {} task(s): {}{more}", self.placed.len(), shown.join(", "))?;
        }
        for b in &self.blocked {
            let more = if b.count as usize > b.examples.len() { ", …" } else { "" };
            write!(f, "  blocked: {} task(s) ({}{more}): ", b.count, b.examples.join(", "))?;
            if let Some(e) = &b.error {
                write!(f, "{e}")?;
                if !b.reasons.is_empty() {
                    write!(f, "; ")?;
                }
            }
            if !b.reasons.is_empty() || b.error.is_none() {
                let reasons: Vec<String> = b.reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
                write!(f, "0/{} nodes fit: {}", b.nodes, reasons.join(", "))?;
            }
            writeln!(f)?;
        }
        if self.not_tried > 0 {
            let why = if self.not_admitted.is_some() {
                "the job is not admitted"
            } else if self.refused.is_some() {
                "the refusal above"
            } else {
                "the cycle did not reach them: the queue or the job was skipped, or its gang could not be \
                 completed before them"
            };
            writeln!(f, "  not tried: {} pending task(s) ({why})", self.not_tried)?;
        }
        if !self.ahead.is_empty() {
            let list: Vec<String> = self
                .ahead
                .iter()
                .map(|a| format!("{} (by {}; {} placed, {} pending)", a.job, a.by, a.placed, a.pending))
                .collect();
            let more = if self.more_ahead > 0 { format!(" and {} more", self.more_ahead) } else { String::new() };
            writeln!(f, "  ahead in queue {}: {}{more}", self.queue, list.join(", "))?;
        }
        for p in &self.preemption {
            writeln!(f, "  {p}")?;
        }
        if let Some(c) = &self.condition {
            writeln!(f, "  condition: {c}")?;
        }
        Ok(())
    }
}
