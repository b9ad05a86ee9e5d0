//! The PodGroup annotations of `task-topology`, parsed and checked into the relations
//! between the roles (tasks) of one job.

use volcano_framework::JobInfo;

/// PodGroup annotation: groups of roles that should share a node, `;`-separated groups of
/// `,`-separated roles (`"ps,worker;ps,evaluator"`); a single role means "pods of this
/// role together".
pub const AFFINITY_ANNOTATION: &str = "volcano.sh/task-topology-affinity";

/// PodGroup annotation: groups of roles that should not share a node, same syntax
/// (`"ps;worker,chief"`); a single role means "pods of this role apart".
pub const ANTI_AFFINITY_ANNOTATION: &str = "volcano.sh/task-topology-anti-affinity";

/// PodGroup annotation: the order in which roles are placed (`"ps,worker,chief"`).
pub const TASK_ORDER_ANNOTATION: &str = "volcano.sh/task-topology-task-order";

/// Priority of a role with self anti-affinity (Volcano's `affinityPriority`; higher first).
const SELF_ANTI_AFFINITY: u8 = 4;
/// Priority of a role with affinity to another role.
const INTER_AFFINITY: u8 = 3;
/// Priority of a role with self affinity.
const SELF_AFFINITY: u8 = 2;
/// Priority of a role with anti-affinity to another role.
const INTER_ANTI_AFFINITY: u8 = 1;

/// The relations between the roles of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Relations {
    /// The distinct non-empty roles of the job's tasks, sorted; a role id indexes this.
    pub(crate) roles: Vec<String>,
    /// `roles.len()²` flags: `r` likes sharing a node with `s` (diagonal: with itself).
    affinity: Vec<bool>,
    /// `roles.len()²` flags: `r` avoids sharing a node with `s` (diagonal: with itself).
    anti_affinity: Vec<bool>,
    /// Per role: the strongest kind of relation it takes part in (0: none, so its tasks
    /// stay out of buckets).
    pub(crate) priority: Vec<u8>,
    /// Per role: the user's task order, higher first (0: not listed).
    pub(crate) order: Vec<u32>,
}

fn groups(value: &str) -> Vec<Vec<&str>> {
    value.split(';').map(|g| g.split(',').map(str::trim).collect()).collect()
}

impl Relations {
    /// Parses a job's annotations. `Ok(None)` when the job has none of them; an error
    /// (for a debug log) when a name is not a role of the job or appears twice in a group.
    pub(crate) fn from_job(job: &JobInfo, roles: Vec<String>) -> Result<Option<Relations>, String> {
        let annotations = job.pod_group.metadata.annotations.as_ref();
        let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
        let (affinity, anti, order) =
            (get(AFFINITY_ANNOTATION), get(ANTI_AFFINITY_ANNOTATION), get(TASK_ORDER_ANNOTATION));
        if affinity.is_none() && anti.is_none() && order.is_none() {
            return Ok(None);
        }
        let n = roles.len();
        let mut rel = Relations {
            roles,
            affinity: vec![false; n * n],
            anti_affinity: vec![false; n * n],
            priority: vec![0; n],
            order: vec![0; n],
        };
        if let Some(v) = affinity {
            let g = groups(v);
            rel.check(&g).map_err(|e| format!("{AFFINITY_ANNOTATION}: {e}"))?;
            rel.apply(&g, false);
        }
        if let Some(v) = anti {
            let g = groups(v);
            rel.check(&g).map_err(|e| format!("{ANTI_AFFINITY_ANNOTATION}: {e}"))?;
            rel.apply(&g, true);
        }
        if let Some(v) = order {
            let list: Vec<&str> = v.split(',').map(str::trim).collect();
            rel.check(std::slice::from_ref(&list)).map_err(|e| format!("{TASK_ORDER_ANNOTATION}: {e}"))?;
            let len = list.len() as u32;
            for (i, name) in list.iter().enumerate() {
                if let Some(r) = rel.role_id(name) {
                    rel.order[r] = len - i as u32;
                }
            }
        }
        Ok(Some(rel))
    }

    /// Every non-empty name must be a role of the job, at most once per group.
    fn check(&self, groups: &[Vec<&str>]) -> Result<(), String> {
        for g in groups {
            for (i, name) in g.iter().enumerate().filter(|(_, n)| !n.is_empty()) {
                if self.role_id(name).is_none() {
                    return Err(format!("task {name:?} does not exist in the job"));
                }
                if g[..i].contains(name) {
                    return Err(format!("task {name:?} is duplicated"));
                }
            }
        }
        Ok(())
    }

    /// Records the groups as affinity (or anti-affinity) relations, as Volcano's
    /// `ApplyTaskTopology` does: a group of one name is a self relation, a larger group
    /// relates every pair of its names.
    fn apply(&mut self, groups: &[Vec<&str>], anti: bool) {
        let n = self.roles.len();
        let (self_priority, inter_priority) =
            if anti { (SELF_ANTI_AFFINITY, INTER_ANTI_AFFINITY) } else { (SELF_AFFINITY, INTER_AFFINITY) };
        for g in groups {
            let ids: Vec<usize> = g.iter().filter_map(|name| self.role_id(name)).collect();
            let matrix = if anti { &mut self.anti_affinity } else { &mut self.affinity };
            if g.len() == 1 {
                if let Some(&r) = ids.first() {
                    matrix[r * n + r] = true;
                    self.priority[r] = self.priority[r].max(self_priority);
                }
                continue;
            }
            for (i, &a) in ids.iter().enumerate() {
                for &b in &ids[..i] {
                    matrix[a * n + b] = true;
                    matrix[b * n + a] = true;
                }
            }
            for &r in &ids {
                self.priority[r] = self.priority[r].max(inter_priority);
            }
        }
    }

    /// The id of a role.
    pub(crate) fn role_id(&self, role: &str) -> Option<usize> {
        if role.is_empty() {
            return None;
        }
        self.roles.binary_search_by(|r| r.as_str().cmp(role)).ok()
    }

    /// Whether role `r` likes sharing a node with role `s`.
    pub(crate) fn affinity(&self, r: usize, s: usize) -> bool {
        self.affinity[r * self.roles.len() + s]
    }

    /// Whether role `r` avoids sharing a node with role `s`.
    pub(crate) fn anti_affinity(&self, r: usize, s: usize) -> bool {
        self.anti_affinity[r * self.roles.len() + s]
    }

    /// How much a task of role `r` wants to join a set of tasks given as counts per role
    /// (Volcano `checkTaskSetAffinity`): + the count of each role it likes, − the count of
    /// each role it avoids; with `only_anti`, only the penalty.
    pub(crate) fn set_affinity(&self, r: usize, counts: &[u32], only_anti: bool) -> i64 {
        let mut score = 0i64;
        for (s, &count) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            if !only_anti && self.affinity(r, s) {
                score += i64::from(count);
            }
            if self.anti_affinity(r, s) {
                score -= i64::from(count);
            }
        }
        score
    }

    /// Volcano `taskAffinityOrder`, reversed into "comes first": the role listed earlier
    /// in the task order, then the role with the stronger relation, goes first.
    pub(crate) fn role_order(&self, l: usize, r: usize) -> std::cmp::Ordering {
        if l == r {
            return std::cmp::Ordering::Equal;
        }
        self.order[r].cmp(&self.order[l]).then(self.priority[r].cmp(&self.priority[l]))
    }
}
