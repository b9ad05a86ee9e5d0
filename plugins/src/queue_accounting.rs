//! What admitted jobs hold in reserve, and resource comparisons on the dimensions a
//! request asks for, in a neutral home: `proportion`, `capacity` and `overcommit` all keep an
//! "inqueue" account of the `minResources` of admitted jobs (Volcano's
//! `GetInqueueResource`, `DeductSchGatedResources`, `CalculateAllocatedTaskNum`), and say why
//! a job does not fit the same way (`shortfall`).

use volcano_api::crd::PodGroupPhase;
use volcano_framework::resource::{share, DimensionDefault, Resource, MIN_RESOURCE, PODS};
use volcano_framework::{JobInfo, QueueReport, Snapshot, TaskStatus};

/// The scheduling gate Volcano's webhook puts on pods waiting for queue capacity; pods
/// gated only by it still count as reserved.
pub(crate) const QUEUE_ALLOCATION_GATE: &str = "scheduling.volcano.sh/queue-allocation-gate";

/// The PodGroup phase as observed (Volcano reads `job.PodGroup.Status.Phase`).
pub(crate) fn observed_phase(job: &JobInfo) -> Option<PodGroupPhase> {
    job.status_phase
}

/// Tasks in allocated statuses (Allocated, Binding, Bound, Running).
pub(crate) fn allocated_task_num(job: &JobInfo) -> i32 {
    job.count(TaskStatus::Allocated)
        + job.count(TaskStatus::Binding)
        + job.count(TaskStatus::Bound)
        + job.count(TaskStatus::Running)
}

/// Kubernetes' notion of a scalar resource name (extended, prefixed native, hugepages,
/// attachable volumes); other names (`ephemeral-storage`, `storage`) are never reserved.
fn reservable_scalar(name: &str) -> bool {
    name.contains('/') || name.starts_with("hugepages-") || name.starts_with("attachable-volumes-")
}

/// The part of `min` not covered by `allocated`, per dimension of `min` (Volcano
/// `GetInqueueResource`).
pub(crate) fn unallocated_min(min: &Resource, allocated: &Resource) -> Resource {
    let mut r = Resource::new((min.milli_cpu - allocated.milli_cpu).max(0.0), (min.memory - allocated.memory).max(0.0));
    for (name, v) in min.scalars() {
        if &**name == PODS {
            let d = v - allocated.get(PODS);
            if d > 0.0 {
                r.set(name, d);
            }
            continue;
        }
        if !reservable_scalar(name) {
            continue;
        }
        match allocated.scalar(name) {
            None => r.set(name, v),
            Some(a) if v - a > 0.0 => r.set(name, v - a),
            Some(_) => {}
        }
    }
    r
}

fn only_queue_allocation_gate(snap: &Snapshot, t: volcano_framework::TaskId) -> bool {
    let gates = snap.task(t).pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref());
    matches!(gates, Some(g) if g.len() == 1 && g[0].name == QUEUE_ALLOCATION_GATE)
}

/// `res` minus the requests of the job's scheduling-gated tasks, floored at zero (Volcano
/// `DeductSchGatedResources`): gated pods are not created against the reservation, so they
/// must not block other jobs. Tasks gated only by the queue-allocation gate still count.
pub(crate) fn deduct_gated(snap: &Snapshot, job: &JobInfo, mut res: Resource) -> Resource {
    if job.gated_tasks == 0 || res.is_exact_zero() {
        // Nothing to deduct, or nothing to deduct from.
        return res;
    }
    let mut gated = Resource::empty();
    for &t in &job.tasks {
        if snap.task(t).sch_gated && !only_queue_allocation_gate(snap, t) {
            gated.add(&snap.task(t).resreq);
        }
    }
    if gated.is_empty() {
        return res;
    }
    res.milli_cpu = (res.milli_cpu - gated.milli_cpu).max(0.0);
    res.memory = (res.memory - gated.memory).max(0.0);
    let names: Vec<(String, f64)> = res.scalars().map(|(n, v)| (n.to_string(), v)).collect();
    for (name, v) in names {
        if let Some(g) = gated.scalar(&name) {
            res.set(&name, (v - g).max(0.0));
        }
    }
    res
}

/// What a Running job still reserves: its unallocated `minResources` when it has at least
/// minMember tasks allocated (a finished Spark driver must not re-reserve), else nothing.
pub(crate) fn running_reservation(snap: &Snapshot, job: &JobInfo) -> Option<Resource> {
    let min = job.min_resources.as_ref()?;
    if observed_phase(job) != Some(PodGroupPhase::Running) || allocated_task_num(job) < job.min_available {
        return None;
    }
    Some(deduct_gated(snap, job, unallocated_min(min, &job.allocated)))
}

fn le(l: f64, r: f64) -> bool {
    l < r || (l - r).abs() < MIN_RESOURCE
}

/// The dimensions `req` asks for (above the epsilon, `pods` ignored) on which
/// `lhs(dim) ≤ limit` fails; a dimension missing on `limit` is 0. Empty iff Volcano's
/// `LessEqualWithDimension(lhs, limit, req)` holds. Allocates nothing.
pub(crate) fn exceeded_dims<'a>(
    req: &'a Resource,
    limit: &'a Resource,
    lhs: impl Fn(&str) -> f64 + 'a,
) -> impl Iterator<Item = &'a str> + 'a {
    req.dims()
        .filter(|(n, v)| *n != PODS && *v > MIN_RESOURCE)
        .filter(move |(n, _)| !le(lhs(n), limit.get(n)))
        .map(|(n, _)| n)
}

/// Volcano's `FormatResourceNames(prefix, verb, names)`: `prefix: verb a, verb b`.
pub(crate) fn format_resource_names<'a>(prefix: &str, verb: &str, names: impl Iterator<Item = &'a str>) -> String {
    let parts: Vec<String> = names.map(|n| format!("{verb} {n}")).collect();
    if parts.is_empty() {
        prefix.to_string()
    } else {
        format!("{prefix}: {}", parts.join(", "))
    }
}

/// Volcano `ExceededPart`: the positive part of `l − r`, keeping only the scalar
/// dimensions where `l` is strictly greater (a dimension that runs out disappears, which
/// matters for later comparisons that treat a missing dimension as unlimited).
pub(crate) fn exceeded_part(l: &Resource, r: &Resource) -> Resource {
    let mut out = Resource::new((l.milli_cpu - r.milli_cpu).max(0.0), (l.memory - r.memory).max(0.0));
    for (name, v) in l.scalars() {
        let d = v - r.scalar(name).unwrap_or(0.0);
        if d > 0.0 {
            out.set(name, d);
        }
    }
    for (name, v) in r.scalars() {
        if !l.has_scalar(name) && -v > 0.0 {
            out.set(name, -v);
        }
    }
    out
}

/// One resource amount for people: Kubernetes notation for cpu and memory (`500m`, `64Gi`),
/// units with decimals for the others (`26.8` GPUs rather than `26800m`).
pub(crate) fn amount(name: &str, v: f64) -> String {
    let v = v.max(0.0);
    if name != "cpu" && name != "memory" && name != "ephemeral-storage" && !name.starts_with("hugepages-") {
        // Other resources are counted in thousandths, as Volcano counts them.
        let units = (v / 1000.0 * 1000.0).round() / 1000.0;
        return format!("{units}");
    }
    let mut r = Resource::empty();
    r.set(name, v);
    r.to_list().remove(name).map(|q| q.0).unwrap_or_else(|| "0".to_string())
}

/// Why a job's minimum does not fit, resource by resource: `nvidia.com/gpu: the job needs 32,
/// 14 of 48 are left (34 allocated, 0 reserved for admitted jobs)`. `taken` lists what uses
/// the limit, each with a sign (+1 holds, -1 gives back, as elastic pods do).
pub(crate) fn shortfall<'a>(
    names: impl Iterator<Item = &'a str>,
    min: &Resource,
    limit: &Resource,
    taken: &[(&str, &Resource, f64)],
) -> String {
    let parts: Vec<String> = names
        .map(|n| {
            let used: f64 = taken.iter().map(|(_, r, sign)| sign * r.get(n)).sum();
            let held: Vec<String> = taken
                .iter()
                .map(|(what, r, sign)| {
                    let a = amount(n, r.get(n));
                    if *sign < 0.0 {
                        format!("{a} {what} give back")
                    } else {
                        format!("{a} {what}")
                    }
                })
                .collect();
            format!(
                "{n}: the job needs {}, {} of {} left ({})",
                amount(n, min.get(n)),
                amount(n, limit.get(n) - used),
                amount(n, limit.get(n)),
                held.join(", ")
            )
        })
        .collect();
    parts.join("; ")
}

/// What one job contributes to its queue's accounting (Volcano's proportion and capacity
/// plugins compute the same sums).
#[derive(Debug, Default)]
pub(crate) struct JobUsage {
    /// Σ requests of the job's tasks in allocated statuses.
    pub(crate) allocated: Resource,
    /// `allocated` + Σ requests of its pending tasks.
    pub(crate) request: Resource,
    /// What its admission reserves: the unallocated part of `minResources` (gated pods
    /// deducted) while Inqueue, plus the running reservation.
    pub(crate) inqueue: Resource,
    /// What it holds beyond `minResources` (all of it without `minResources`).
    pub(crate) elastic: Resource,
}

/// The job's [`JobUsage`].
pub(crate) fn job_usage(snap: &Snapshot, job: &JobInfo) -> JobUsage {
    let mut usage = JobUsage::default();
    if job.count(TaskStatus::Pending) == 0 {
        // No pending task: what the job requests is what it holds (the snapshot keeps that
        // sum; resource values are whole numbers, so the sum is exact either way).
        usage.allocated.add(&job.allocated);
        usage.request.add(&job.allocated);
    } else {
        for &t in &job.tasks {
            let task = snap.task(t);
            if task.status.is_allocated() {
                usage.allocated.add(&task.resreq);
                usage.request.add(&task.resreq);
            } else if task.status == TaskStatus::Pending {
                usage.request.add(&task.resreq);
            }
        }
    }
    if let Some(min) = &job.min_resources {
        if observed_phase(job) == Some(PodGroupPhase::Inqueue) {
            usage.inqueue.add(&deduct_gated(snap, job, unallocated_min(min, &job.allocated)));
        }
    }
    if let Some(r) = running_reservation(snap, job) {
        usage.inqueue.add(&r);
    }
    // Volcano `GetElasticResources`: a job without minResources is elastic as a whole.
    usage.elastic = match &job.min_resources {
        Some(min) => exceeded_part(&job.allocated, min),
        None => exceeded_part(&job.allocated, &Resource::empty()),
    };
    usage
}

/// Why a queue that is not `Open` takes nothing.
pub(crate) fn not_open(queue: &volcano_framework::QueueInfo) -> String {
    format!("queue {} is {:?}, not Open", queue.name, queue.state)
}

/// What a queue holds against its real capability, for [`quota_rejection`].
struct QueueHolds<'a> {
    /// Queue name.
    name: &'a str,
    /// The most the queue may hold.
    real_capability: &'a Resource,
    /// Held by its allocated pods.
    allocated: &'a Resource,
    /// Reserved for its admitted jobs.
    inqueue: &'a Resource,
    /// What its elastic jobs hold beyond their minimum (given back first).
    elastic: &'a Resource,
}

/// The admission check of `proportion` and `capacity` (Volcano's quota check): a job's
/// `minResources`, with what the queue holds and has reserved (elastic pods aside), must fit
/// the queue's real capability on every resource the minimum names. `None` when it fits,
/// else the rejection: Volcano's text followed by the numbers of each short resource.
fn quota_rejection(min: &Resource, q: &QueueHolds<'_>) -> Option<String> {
    let used = |n: &str| min.get(n) + q.allocated.get(n) + q.inqueue.get(n) - q.elastic.get(n);
    exceeded_dims(min, q.real_capability, used).next()?;
    Some(format!(
        "{}; queue {}: {}",
        format_resource_names(QUOTA_INSUFFICIENT, "insufficient", exceeded_dims(min, q.real_capability, used)),
        q.name,
        shortfall(
            exceeded_dims(min, q.real_capability, used),
            min,
            q.real_capability,
            &[
                ("allocated", q.allocated, 1.0),
                ("reserved for admitted jobs", q.inqueue, 1.0),
                ("elastic", q.elastic, -1.0)
            ],
        )
    ))
}

/// A queue's admission answers in one session, by the accounts and minimum they were
/// given: every cycle, each job waiting in a queue asks [`QueueAccount::admission_refusal`],
/// most with a minimum another job asked with, and formatting the refusal is the cost. A
/// refusal is reused only for bit-for-bit the same accounts and minimum, so it is the text
/// the check would write.
#[derive(Debug, Default)]
pub(crate) struct RefusalMemo {
    /// (queue, [real capability, allocated, inqueue, elastic, minimum]) → the refusal.
    #[allow(clippy::type_complexity)]
    entries: std::sync::Mutex<Vec<(String, [Resource; 5], String)>>,
}

impl RefusalMemo {
    /// Answers kept at most; the memo starts again when full.
    const CAPACITY: usize = 32;
}

/// Whether two resources are the same bit for bit (the same dimensions, in the same order,
/// with the same values): unlike `==`, a missing scalar differs from a zero one, and `-0`
/// from `0`.
fn same_bits(a: &Resource, b: &Resource) -> bool {
    a.milli_cpu.to_bits() == b.milli_cpu.to_bits()
        && a.memory.to_bits() == b.memory.to_bits()
        && a.scalars().count() == b.scalars().count()
        && a.scalars().zip(b.scalars()).all(|((n, x), (m, y))| n == m && x.to_bits() == y.to_bits())
}

/// The start of a quota rejection, as Volcano's event says it.
pub const QUOTA_INSUFFICIENT: &str = "queue resource quota insufficient";

/// `spec.capability` with absent or non-positive cpu/memory meaning unlimited (Volcano sets
/// them to the largest float); scalar dimensions stay as given.
pub(crate) fn unlimited_cpu_memory(cap: &Resource) -> Resource {
    let mut c = cap.clone();
    if c.milli_cpu <= 0.0 {
        c.milli_cpu = f64::MAX;
    }
    if c.memory <= 0.0 {
        c.memory = f64::MAX;
    }
    c
}

/// What no queue has guaranteed: the cluster total − Σ every queue's guarantee (floored at
/// zero per dimension).
pub(crate) fn unguaranteed(snap: &Snapshot) -> Resource {
    let mut total_guarantee = Resource::empty();
    for q in &snap.queues {
        total_guarantee.add(&q.guarantee);
    }
    exceeded_part(&snap.total_resource, &total_guarantee)
}

/// A queue's real capability: what is left to share (`available`: the cluster's or the
/// parent's, the guarantees of all queues at that level taken out) + its own guarantee,
/// capped by its capability (dimensions the capability does not name are unlimited).
pub(crate) fn real_capability(available: &Resource, guarantee: &Resource, capability: Option<&Resource>) -> Resource {
    let mut real = available.clone();
    real.add(guarantee);
    if let Some(cap) = capability {
        real.min_dimension(cap, DimensionDefault::Infinity);
    }
    real
}

/// The accounts `proportion` and `capacity` keep for every queue that takes part in a
/// session: what it deserves, holds, requests and has reserved, and its real capability.
/// The two plugins differ only in how `deserved` is decided (weighted water-filling, or
/// `spec.deserved`), in the share of a queue that deserves nothing, in the limit that
/// bounds allocation (deserved, or real capability) and in their reclaim rules.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueAccount {
    /// The queue's fair share in this session.
    pub deserved: Resource,
    /// Σ requests of the queue's tasks in allocated statuses (kept current by the event
    /// handlers).
    pub allocated: Resource,
    /// `allocated` + Σ requests of pending tasks (at session open).
    pub request: Resource,
    /// Σ over jobs of what they hold beyond `minResources` (all of it without one).
    pub elastic: Resource,
    /// `minResources` reserved by admitted jobs that are not allocated yet.
    pub inqueue: Resource,
    /// The most the queue may hold (see `real_capability`).
    pub real_capability: Resource,
    /// `spec.guarantee.resource`.
    pub guarantee: Resource,
    /// Max over the dimensions of `deserved` of allocated / deserved (see `update_share`).
    pub share: f64,
}

impl QueueAccount {
    /// Adds one job's usage.
    pub(crate) fn add_usage(&mut self, usage: &JobUsage) {
        self.allocated.add(&usage.allocated);
        self.request.add(&usage.request);
        self.inqueue.add(&usage.inqueue);
        self.elastic.add(&usage.elastic);
    }

    /// Recomputes the share: max over the dimensions the queue deserves of allocated /
    /// deserved (0 if none). `best_effort` is the share of a queue that deserves nothing
    /// (`pods` aside), if the plugin gives such queues their own (`capacity`: 1, a
    /// best-effort queue counts as satisfied; `proportion` has none).
    pub(crate) fn update_share(&mut self, best_effort: Option<f64>) {
        if let Some(s) = best_effort.filter(|_| self.deserved.is_empty()) {
            self.share = s;
            return;
        }
        let mut s = 0.0f64;
        for (name, d) in self.deserved.dims() {
            if d >= MIN_RESOURCE {
                s = s.max(share(self.allocated.get(name), d));
            }
        }
        self.share = s;
    }

    /// A task was allocated (`add`) or deallocated in this queue.
    pub(crate) fn record(&mut self, req: &Resource, add: bool, best_effort: Option<f64>) {
        if add {
            self.allocated.add(req);
        } else {
            self.allocated.sub_unchecked(req);
        }
        self.update_share(best_effort);
    }

    /// Whether the queue may take `req` more without exceeding `limit` on the dimensions
    /// `req` asks for.
    pub(crate) fn fits(&self, req: &Resource, limit: &Resource) -> bool {
        exceeded_dims(req, limit, |n| self.allocated.get(n) + req.get(n)).next().is_none()
    }

    /// Why the queue may not take a pod asking for `req` (`None` if it may): `queue NAME is
    /// at its LIMIT_NAME: ` and the numbers of every short resource.
    pub(crate) fn allocation_refusal(
        &self,
        queue: &str,
        limit_name: &str,
        req: &Resource,
        limit: &Resource,
    ) -> Option<String> {
        let over = exceeded_dims(req, limit, |n| self.allocated.get(n) + req.get(n));
        let text = shortfall(over, req, limit, &[("allocated", &self.allocated, 1.0)]);
        (!text.is_empty())
            .then(|| format!("queue {queue} is at its {limit_name}: {}", text.replace("the job needs", "a pod needs")))
    }

    /// The admission check ([`quota_rejection`]) of a job's `minResources` against this
    /// queue.
    pub(crate) fn admission_refusal(&self, queue: &str, min: &Resource) -> Option<String> {
        quota_rejection(
            min,
            &QueueHolds {
                name: queue,
                real_capability: &self.real_capability,
                allocated: &self.allocated,
                inqueue: &self.inqueue,
                elastic: &self.elastic,
            },
        )
    }

    /// [`QueueAccount::admission_refusal`], answered from `memo` when the same question
    /// was refused by the same accounts before.
    pub(crate) fn admission_refusal_memo(&self, memo: &RefusalMemo, queue: &str, min: &Resource) -> Option<String> {
        let key = [&self.real_capability, &self.allocated, &self.inqueue, &self.elastic, min];
        let mut entries = memo.entries.lock().unwrap_or_else(|e| e.into_inner());
        let asked = |(q, k, _): &&(String, [Resource; 5], String)| {
            q == queue && k.iter().zip(key).all(|(a, b)| same_bits(a, b))
        };
        if let Some((_, _, refusal)) = entries.iter().find(asked) {
            return Some(refusal.clone());
        }
        let answer = self.admission_refusal(queue, min);
        // Only refusals are kept: a job admitted is enqueued, which changes the accounts the
        // next question is asked of, so an admission would never be asked again.
        if let Some(refusal) = &answer {
            if entries.len() >= RefusalMemo::CAPACITY {
                entries.clear();
            }
            entries.push((queue.to_string(), key.map(Resource::clone), refusal.clone()));
        }
        answer
    }

    /// What the session reports for the queue when it closes.
    pub(crate) fn report(&self) -> QueueReport {
        QueueReport {
            allocated: self.allocated.clone(),
            deserved: Some(self.deserved.clone()),
            share: Some(self.share),
            request: Some(self.request.clone()),
            inqueue: Some(self.inqueue.clone()),
            real_capability: Some(self.real_capability.clone()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: f64) -> Resource {
        let mut r = Resource::new(1000.0 * n, 0.0);
        r.set(volcano_framework::resource::NVIDIA_GPU, n);
        r
    }

    #[test]
    fn a_remembered_refusal_is_the_one_the_check_writes() {
        let memo = RefusalMemo::default();
        let mut account = QueueAccount { real_capability: gpus(8.0), allocated: gpus(6.0), ..Default::default() };
        let asked = |a: &QueueAccount, q: &str, min: &Resource| {
            let remembered = a.admission_refusal_memo(&memo, q, min);
            assert_eq!(remembered, a.admission_refusal(q, min), "queue {q}, minimum {min:?}");
            remembered
        };
        assert!(asked(&account, "q", &gpus(4.0)).is_some());
        assert!(asked(&account, "q", &gpus(4.0)).is_some(), "answered from the memo");
        assert!(asked(&account, "other", &gpus(4.0)).is_some_and(|m| m.contains("queue other")));
        assert_eq!(asked(&account, "q", &gpus(2.0)), None);
        // The accounts change: the answer follows them.
        account.allocated = gpus(7.0);
        assert!(asked(&account, "q", &gpus(2.0)).is_some());
        account.inqueue = gpus(-1.0);
        assert_eq!(asked(&account, "q", &gpus(2.0)), None);
        for n in 0..2 * RefusalMemo::CAPACITY {
            asked(&account, "q", &gpus(n as f64));
        }
        // A zero dimension is not a missing one, nor -0 a 0, for the memo.
        assert!(!same_bits(&Resource::new(0.0, 0.0), &Resource::new(-0.0, 0.0)));
        let mut zero = Resource::new(0.0, 0.0);
        zero.set("example.com/x", 0.0);
        assert!(!same_bits(&zero, &Resource::new(0.0, 0.0)));
    }
}
