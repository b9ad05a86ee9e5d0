//! The queue → job → task worklist that the actions walk: queues in queue order, each
//! queue's jobs in job order, each job's tasks in task order, all compared against the
//! session's state at the moment of each push and pop (Volcano's priority queues).

use crate::model::{JobId, QueueId, TaskId, TaskInfo};
use crate::pq::CmpHeap;
use crate::session::Session;

/// Queues, their jobs and the jobs' tasks, for one action.
#[derive(Default)]
pub struct Worklist {
    queues: CmpHeap<QueueId>,
    queued: Vec<bool>,
    jobs: Vec<CmpHeap<JobId>>,
    tasks: Vec<Option<CmpHeap<TaskId>>>,
}

impl Worklist {
    /// An empty worklist for the session's queues and jobs.
    pub fn new(ssn: &Session) -> Self {
        let nq = ssn.snap.queues.len();
        Worklist {
            queues: CmpHeap::new(),
            queued: vec![false; nq],
            jobs: vec![CmpHeap::new(); nq],
            tasks: vec![None; ssn.snap.jobs.len()],
        }
    }

    /// The job's tasks that `keep` accepts, in a heap by task order.
    pub fn task_heap(ssn: &Session, j: JobId, keep: impl Fn(&TaskInfo) -> bool) -> CmpHeap<TaskId> {
        let mut heap = CmpHeap::new();
        for &t in &ssn.snap.job(j).tasks {
            if keep(ssn.snap.task(t)) {
                heap.push(t, |a, b| ssn.task_order(*a, *b).is_lt());
            }
        }
        heap
    }

    /// Adds a queue, once.
    pub fn add_queue(&mut self, ssn: &Session, q: QueueId) {
        if !self.queued[q.idx()] {
            self.queued[q.idx()] = true;
            self.queues.push(q, |a, b| ssn.queue_order(*a, *b).is_lt());
        }
    }

    /// Adds a job under its queue (adding the queue first), with the heap of its tasks to
    /// work on, if the action keeps one.
    pub fn add_job(&mut self, ssn: &Session, j: JobId, tasks: Option<CmpHeap<TaskId>>) {
        let q = ssn.snap.job(j).queue;
        self.add_queue(ssn, q);
        self.jobs[q.idx()].push(j, |a, b| ssn.job_order(*a, *b).is_lt());
        if tasks.is_some() {
            self.tasks[j.idx()] = tasks;
        }
    }

    /// The first queue, removed.
    pub fn pop_queue(&mut self, ssn: &Session) -> Option<QueueId> {
        self.queues.pop(|a, b| ssn.queue_order(*a, *b).is_lt())
    }

    /// Puts a queue back, to be compared again with the others.
    pub fn push_queue(&mut self, ssn: &Session, q: QueueId) {
        self.queues.push(q, |a, b| ssn.queue_order(*a, *b).is_lt());
    }

    /// The queue's first job, removed.
    pub fn pop_job(&mut self, ssn: &Session, q: QueueId) -> Option<JobId> {
        self.jobs[q.idx()].pop(|a, b| ssn.job_order(*a, *b).is_lt())
    }

    /// Whether the queue still has jobs.
    pub fn has_jobs(&self, q: QueueId) -> bool {
        !self.jobs[q.idx()].is_empty()
    }

    /// The queue's job heap, taken out (to lend to code that pushes jobs back); put it back
    /// with [`Worklist::put_jobs`].
    pub fn take_jobs(&mut self, q: QueueId) -> CmpHeap<JobId> {
        std::mem::take(&mut self.jobs[q.idx()])
    }

    /// Puts back a queue's job heap.
    pub fn put_jobs(&mut self, q: QueueId, jobs: CmpHeap<JobId>) {
        self.jobs[q.idx()] = jobs;
    }

    /// The job's task heap, taken out (empty if it has none).
    pub fn take_tasks(&mut self, j: JobId) -> CmpHeap<TaskId> {
        self.tasks[j.idx()].take().unwrap_or_default()
    }

    /// The job's task heap, taken out; built by `build` when the job never had one.
    pub fn take_tasks_or(
        &mut self,
        j: JobId,
        build: impl FnOnce(&Session) -> CmpHeap<TaskId>,
        ssn: &Session,
    ) -> CmpHeap<TaskId> {
        self.tasks[j.idx()].take().unwrap_or_else(|| build(ssn))
    }

    /// Puts back a job's task heap.
    pub fn put_tasks(&mut self, j: JobId, tasks: CmpHeap<TaskId>) {
        self.tasks[j.idx()] = Some(tasks);
    }
}
