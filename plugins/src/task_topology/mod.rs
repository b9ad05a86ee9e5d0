//! The `task-topology` plugin: affinity and anti-affinity between the roles of a job,
//! for jobs such as TensorFlow's parameter servers and workers that run
//! faster when some of their pods share a node.
//!
//! A job opts in through PodGroup annotations ([`AFFINITY_ANNOTATION`],
//! [`ANTI_AFFINITY_ANNOTATION`], [`TASK_ORDER_ANNOTATION`]) naming its roles
//! (`volcano.sh/task-spec`). When the session opens, every job with pending tasks and
//! valid annotations gets "buckets": groups of its tasks meant to share a node. Tasks are
//! taken in order (tasks already on a node first, grouped by node; then by the user's task
//! order, the strength of the role's relations, and name), and each pending task joins
//! the existing bucket it likes best (+1 per task of a role it has affinity with, −1 per
//! task of a role it has anti-affinity with; ties go to the bucket with the smaller
//! request), or a new bucket when every bucket repels it. Tasks whose role takes part in no
//! relation stay out of buckets.
//!
//! Task order puts bucketed tasks first, bigger buckets first, older buckets first, then
//! the user's task order and relation strength. The node score of a bucketed task is
//! (tasks of its bucket already on the node + pending tasks of its bucket − tasks of
//! roles it avoids on the node − tasks of the bucket that would not fit the node) × weight
//! × 100 / the largest bucket size, and 0 on a node whose idle plus releasing resources
//! cannot hold the task. Event handlers track which tasks land on which node.
//!
//! Annotations naming an unknown role, or a role twice in a group, make the plugin ignore
//! the job (debug log).

mod args;
mod bucket;
mod relations;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::sync::Arc;

use volcano_api::conf::PluginOption;
use volcano_framework::resource::{Resource, MIN_RESOURCE};
use volcano_framework::{
    ArgsError, Hooks, Incremental, JobId, NodeId, NodeInfo, Plugin, PluginBuilder, SessionContext, Snapshot, TaskId,
    TaskStatus,
};

pub use args::{Args, DEFAULT_WEIGHT};
pub use relations::{AFFINITY_ANNOTATION, ANTI_AFFINITY_ANNOTATION, TASK_ORDER_ANNOTATION};

use bucket::{JobManager, TaskSlot, NO_BUCKET, NO_ROLE};
use relations::Relations;
use volcano_framework::parse_args;

/// Configuration name.
pub const NAME: &str = "task-topology";

/// The highest node score of one plugin (Kubernetes `MaxNodeScore`).
pub const MAX_NODE_SCORE: f64 = 100.0;

/// The plugin state of one session.
#[derive(Debug, Default)]
pub struct TaskTopology {
    weight: i64,
    /// Managers of the jobs with topology, by `JobId::idx()`.
    jobs: Vec<Option<Box<JobManager>>>,
    /// Per task, by `TaskId::idx()` (defaults for tasks of jobs without topology).
    tasks: Vec<TaskSlot>,
}

/// Whether the node's idle plus releasing resources are short of the request on some
/// dimension (Volcano `LessPartly(request, Zero)` on `Idle + Releasing`).
fn never_fits(node: &NodeInfo, req: &Resource) -> bool {
    let max = |n: &str| node.idle.get(n) + node.releasing.get(n);
    if max("cpu") < req.milli_cpu || max("memory") < req.memory {
        return true;
    }
    for (name, v) in req.scalars() {
        if !node.idle.has_scalar(name) && !node.releasing.has_scalar(name) {
            return true;
        }
        if max(name) < v {
            return true;
        }
    }
    node.idle.scalars().chain(node.releasing.scalars()).any(|(name, _)| max(name) < req.get(name))
}

/// Whether the request fits the node's idle plus releasing resources (Volcano
/// `LessEqual(Idle + Releasing, Zero)`).
fn fits(node: &NodeInfo, req: &Resource) -> bool {
    let le = |l: f64, r: f64| l < r || (l - r).abs() < MIN_RESOURCE;
    req.dims().all(|(name, v)| le(v, node.idle.get(name) + node.releasing.get(name)))
}

impl TaskTopology {
    /// A plugin value with the given weight (state is built by `on_session_open`).
    pub fn new(weight: i64) -> Self {
        TaskTopology { weight, ..Default::default() }
    }

    fn manager(&self, j: JobId) -> Option<&JobManager> {
        self.jobs.get(j.idx()).and_then(|m| m.as_deref())
    }

    fn slot(&self, t: TaskId) -> TaskSlot {
        self.tasks.get(t.idx()).copied().unwrap_or_default()
    }

    /// Whether the job has topology in this session (valid annotations, pending tasks).
    pub fn has_topology(&self, j: JobId) -> bool {
        self.manager(j).is_some()
    }

    /// The bucket index of a task, if it is in a bucket.
    pub fn bucket_of(&self, t: TaskId) -> Option<usize> {
        let b = self.slot(t).bucket;
        (b != NO_BUCKET).then_some(b as usize)
    }

    /// Number of buckets of a job (0 without topology).
    pub fn bucket_count(&self, j: JobId) -> usize {
        self.manager(j).map_or(0, |m| m.buckets.len())
    }

    /// The pending tasks of a bucket, biggest request first.
    pub fn bucket_pending(&self, j: JobId, bucket: usize) -> &[TaskId] {
        self.manager(j).and_then(|m| m.buckets.get(bucket)).map_or(&[], |b| &b.pending)
    }

    /// Tasks of a bucket on a node (placed at session open or during the session).
    pub fn bucket_on_node(&self, j: JobId, bucket: usize, n: NodeId) -> u32 {
        self.manager(j).and_then(|m| m.buckets.get(bucket)).map_or(0, |b| b.on_node(n))
    }

    /// The largest bucket of a job at session open (pending + placed tasks).
    pub fn bucket_max_size(&self, j: JobId) -> u32 {
        self.manager(j).map_or(0, |m| m.max_size)
    }

    /// The raw bucket score of a task on a node, before weight and scaling.
    fn bucket_score(&self, snap: &Snapshot, t: TaskId, n: NodeId, jm: &JobManager, slot: TaskSlot) -> i64 {
        let bucket = &jm.buckets[slot.bucket as usize];
        let node = snap.node(n);
        // 1. Tasks of the bucket already there.
        let mut score = i64::from(bucket.on_node(n));
        // 2. Tasks on the node the task avoids.
        if slot.role != NO_ROLE {
            if let Some(counts) = jm.node_roles.get(&n) {
                score += jm.relations.set_affinity(slot.role as usize, counts, true).min(0);
            }
        }
        // 3. The bucket's pending tasks, less those that would not fit beside the task.
        score += bucket.pending.len() as i64;
        if !fits(node, &bucket.request) {
            let mut remains = bucket.request.clone();
            for &other in &bucket.pending {
                if other == t {
                    continue;
                }
                remains.sub_unchecked(&snap.task(other).resreq);
                score -= 1;
                if fits(node, &remains) {
                    break;
                }
            }
        }
        score
    }
}

impl Plugin for TaskTopology {
    fn name(&self) -> &'static str {
        NAME
    }

    fn hooks(&self) -> Hooks {
        Hooks::TASK_ORDER | Hooks::NODE_ORDER | Hooks::EVENT_HANDLER
    }

    fn on_session_open(&mut self, snap: &Snapshot, _ctx: &SessionContext) {
        self.jobs = vec![None; snap.jobs.len()];
        self.tasks = vec![TaskSlot::default(); snap.tasks.len()];
        for (i, job) in snap.jobs.iter().enumerate() {
            if job.count(TaskStatus::Pending) == 0 {
                continue;
            }
            let mut roles: Vec<String> =
                job.tasks.iter().map(|t| &snap.task(*t).role).filter(|r| !r.is_empty()).cloned().collect();
            roles.sort_unstable();
            roles.dedup();
            let relations = match Relations::from_job(job, roles) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!(job = %job.key, "task-topology: annotations ignored: {e}");
                    continue;
                }
            };
            let jm = JobManager::build(snap, job, relations, &mut self.tasks);
            tracing::debug!(
                job = %job.key,
                buckets = jm.buckets.len(),
                max_size = jm.max_size,
                "task-topology: buckets built"
            );
            self.jobs[i] = Some(Box::new(jm));
        }
    }

    fn task_order(&self, snap: &Snapshot, l: TaskId, r: TaskId) -> Ordering {
        let (Some(lj), Some(rj)) = (snap.task(l).job, snap.task(r).job) else { return Ordering::Equal };
        let (Some(lm), Some(_)) = (self.manager(lj), self.manager(rj)) else { return Ordering::Equal };
        let (ls, rs) = (self.slot(l), self.slot(r));
        let (l_in, r_in) = (ls.bucket != NO_BUCKET, rs.bucket != NO_BUCKET);
        if l_in != r_in {
            return if l_in { Ordering::Less } else { Ordering::Greater };
        }
        if lj != rj || !l_in {
            return Ordering::Equal;
        }
        let (lb, rb) = (&lm.buckets[ls.bucket as usize], &lm.buckets[rs.bucket as usize]);
        if lb.pending.len() != rb.pending.len() {
            return rb.pending.len().cmp(&lb.pending.len());
        }
        if lb.index == rb.index {
            return lm.relations.role_order(ls.role as usize, rs.role as usize);
        }
        lb.index.cmp(&rb.index)
    }

    fn node_order(&self, snap: &Snapshot, t: TaskId, n: NodeId) -> f64 {
        let slot = self.slot(t);
        if slot.bucket == NO_BUCKET {
            return 0.0;
        }
        if never_fits(snap.node(n), &snap.task(t).resreq) {
            return 0.0;
        }
        let Some(jm) = snap.task(t).job.and_then(|j| self.manager(j)) else { return 0.0 };
        let score = self.bucket_score(snap, t, n, jm, slot);
        let mut f = (score * self.weight) as f64;
        if jm.max_size != 0 {
            f = f * MAX_NODE_SCORE / f64::from(jm.max_size);
        }
        f
    }

    fn on_allocate(&mut self, snap: &Snapshot, t: TaskId) {
        let task = snap.task(t);
        let (Some(j), Some(n)) = (task.job, task.node) else { return };
        let Some(jm) = self.jobs.get_mut(j.idx()).and_then(|m| m.as_deref_mut()) else { return };
        let slot = &mut self.tasks[t.idx()];
        if slot.node == Some(n) {
            return;
        }
        if let Some(old) = slot.node {
            jm.removed(snap, t, old, slot);
        }
        jm.placed(snap, t, n, slot);
    }

    fn on_deallocate(&mut self, snap: &Snapshot, t: TaskId) {
        let Some(j) = snap.task(t).job else { return };
        let Some(jm) = self.jobs.get_mut(j.idx()).and_then(|m| m.as_deref_mut()) else { return };
        let slot = &mut self.tasks[t.idx()];
        if let Some(n) = slot.node {
            jm.removed(snap, t, n, slot);
        }
    }

    fn incremental(&self) -> Option<&dyn Incremental> {
        Some(self)
    }

    fn incremental_mut(&mut self) -> Option<&mut dyn Incremental> {
        Some(self)
    }
}

impl Incremental for TaskTopology {
    fn reads_clock(&self, _snap: &Snapshot) -> bool {
        false
    }

    fn rule_exceptions(&self, _snap: &Snapshot, _task: TaskId, _out: &mut Vec<NodeId>) -> bool {
        // The score reads no inter-pod rule.
        true
    }

    fn shape_local(&self, _snap: &Snapshot, t: TaskId) -> bool {
        // Only bucketed tasks get a score, and theirs depends on their job.
        self.slot(t).bucket == NO_BUCKET
    }
}

/// Checks the arguments and returns the builder.
pub fn factory(opt: &PluginOption) -> Result<Arc<dyn PluginBuilder>, ArgsError> {
    let args: Args = parse_args(&opt.arguments)?;
    let weight = args.weight();
    Ok(Arc::new(move || Box::new(TaskTopology::new(weight)) as Box<dyn Plugin>))
}
