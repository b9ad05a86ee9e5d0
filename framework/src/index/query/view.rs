//! One tree per evaluation group, read by each of its classes through the cells it may use.
//!
//! The classes of an evaluation group ([`crate::Incremental::evaluation_key`]) get equal answers on
//! every node that the first predicate plugin does not fail for good for them; they differ
//! in those fixed failures (node selectors, required node affinity, tolerations) and in the
//! partition their batch scores are uniform on ([`crate::Incremental::batch_partition`]). So the
//! group keeps one answer per node, in one tree, and a class is a *view* of it: the group
//! splits the nodes into *cells*, the sets of nodes that no member class tells apart (each
//! member fails all of a cell's nodes for good, or none, and a member's partition puts all of
//! them in one domain), lays the tree out cell by cell, and keeps each cell's best node and
//! how many of its nodes fit now and later. A class then answers from the cells it may use:
//! its best node is the best of their bests, the best node of a domain of its partition the
//! best of that domain's cells. A change of a node is evaluated once for the whole group, not
//! once per class, and a class costs its cells, not its nodes.
//!
//! A cell's nodes are evaluated only once some member may use them (the cell has an
//! *evaluator*: a member's task the first predicate plugin does not fail there for good,
//! whose answers are the group's there). A class joining the group splits the cells by its own
//! fixed failures and partition; past [`MAX_CELLS`] cells (node selectors on hostnames, say)
//! it keeps a tree of its own instead. Why no node fits a view is counted per cell when
//! asked: each cell keeps how many of its nodes give each of the group's reasons and each
//! resource-check outcome, and a cell the class fails for good gives the check's failure or
//! the class's reason for it (cells are split by that reason too).

use super::*;

/// The most cells a group may have: a class whose joining would split it further keeps a
/// tree of its own.
const MAX_CELLS: usize = 512;

/// A set of nodes no member class of a group tells apart (see the module docs).
struct Cell {
    /// The leaves `start..end` of the group's tree.
    start: u32,
    end: u32,
    /// The first of its nodes.
    node: NodeId,
    /// The task whose answers are the group's on these nodes: a member's, which the first
    /// predicate plugin does not fail there for good. `None` while no member may use them
    /// (their answers are not known: keys 0).
    evaluator: Option<TaskId>,
    /// The key of its best node.
    best: u128,
    /// How many of its nodes fit in the future only, and now.
    counts: [u32; 2],
    /// How many of its nodes that do not fit give each reason of the group (with an
    /// evaluator; the reasons of nodes that may be out of date count as they were).
    reasons: Vec<(u32, u32)>,
    /// How many of its nodes have each [`check_code`].
    checks: Vec<(u64, u32)>,
}

/// A resource check as a number: 0 when the request fits the future idle resources, else
/// the mask of the insufficient dimensions, `u64::MAX` when the mask cannot hold them.
fn check_code(check: Result<bool, Option<u64>>) -> u64 {
    match check {
        Ok(_) => 0,
        Err(Some(mask)) => mask,
        Err(None) => u64::MAX,
    }
}

/// Adds `delta` to the count of `key` in a short list of counts (a count of 0 is dropped).
fn bump<K: PartialEq>(counts: &mut Vec<(K, u32)>, key: K, delta: i32) {
    match counts.iter().position(|(k, _)| *k == key) {
        Some(i) => {
            counts[i].1 = counts[i].1.checked_add_signed(delta).expect("counts stay positive");
            if counts[i].1 == 0 {
                counts.swap_remove(i);
            }
        }
        None => {
            debug_assert!(delta > 0, "only a counted key is taken away");
            counts.push((key, delta as u32));
        }
    }
}

/// The evaluations of an evaluation group (see the module docs), current up to a position
/// of the change log.
pub(in crate::index) struct SharedEvaluations {
    /// The [`RequestChecks`] of the group's request.
    request: u32,
    cursor: usize,
    /// The cell of each node.
    cell_of: Vec<u32>,
    cells: Vec<Cell>,
    /// The leaf of each node.
    leaf: Vec<u32>,
    tree: BestTree,
    /// Per node of a cell with an evaluator, the reason it does not fit, or [`FITS`] (also
    /// for a node not evaluated).
    no_reasons: Vec<u32>,
    /// The [`check_code`] of each node, as counted in its cell.
    check_codes: Vec<u64>,
    reasons: ReasonTable,
    /// Nodes whose reason may be out of date: they did not fit and since only took tasks
    /// (see [`NodeIndex::touch_used`]). Each node once (see `stale_marks`).
    stale: Vec<NodeId>,
    stale_marks: Vec<u64>,
    /// The classes that are views of the group.
    members: Vec<u32>,
    /// Cells whose best node must be found again, each once.
    dirty: Vec<u32>,
    dirty_marks: Vec<bool>,
}

/// A class's view of its group's tree.
pub(in crate::index) struct View {
    pub(super) group: u32,
    /// The cells the class may use, per slot of its partition (one slot without).
    slots: Vec<Vec<u32>>,
    /// The class's fit errors, at a length of the change log.
    errors: Option<(usize, FitErrors)>,
}

impl View {
    pub(super) fn new(group: u32) -> View {
        View { group, slots: Vec::new(), errors: None }
    }
}

impl SharedEvaluations {
    /// A group of a request with these resource checks (current at `cursor`): one cell, no
    /// evaluator yet.
    pub(super) fn new(request: u32, checks: &[Result<bool, Option<u64>>], cursor: usize) -> SharedEvaluations {
        let nodes = checks.len();
        let check_codes: Vec<u64> = checks.iter().map(|&c| check_code(c)).collect();
        let mut counts = Vec::new();
        for &code in &check_codes {
            bump(&mut counts, code, 1);
        }
        SharedEvaluations {
            request,
            cursor,
            cell_of: vec![0; nodes],
            cells: vec![Cell {
                start: 0,
                end: nodes as u32,
                node: NodeId(0),
                evaluator: None,
                best: 0,
                counts: [0, 0],
                reasons: Vec::new(),
                checks: counts,
            }],
            leaf: (0..nodes as u32).collect(),
            tree: BestTree { leaves: nodes.max(1), keys: vec![0; 2 * nodes.max(1)], batch: false },
            no_reasons: vec![FITS; nodes],
            check_codes,
            reasons: ReasonTable::default(),
            stale: Vec::new(),
            stale_marks: Vec::new(),
            members: Vec::new(),
            dirty: Vec::new(),
            dirty_marks: vec![false],
        }
    }

    /// The evaluator of a node's cell.
    fn evaluator(&self, n: NodeId) -> Option<TaskId> {
        self.cells[self.cell_of[n.idx()] as usize].evaluator
    }

    /// A node's answer (of a node of a cell with an evaluator).
    fn fit(&self, n: NodeId) -> Fit {
        key_fit(self.tree.key_at(self.leaf[n.idx()] as usize), self.no_reasons[n.idx()])
    }

    /// Sets a node's answer, with its cell's counts; its cell's best is found again at
    /// [`SharedEvaluations::settle`].
    fn set_answer(&mut self, n: NodeId, fit: Fit) {
        let old = key_rank(self.tree.key_at(self.leaf[n.idx()] as usize));
        let cell = &mut self.cells[self.cell_of[n.idx()] as usize];
        if old > 0 {
            cell.counts[old as usize - 1] -= 1;
        }
        if rank(fit) > 0 {
            cell.counts[rank(fit) as usize - 1] += 1;
        }
        let reason = match fit {
            Fit::No(r) => r,
            _ => FITS,
        };
        let was = std::mem::replace(&mut self.no_reasons[n.idx()], reason);
        if was != reason {
            if was != FITS {
                bump(&mut cell.reasons, was, -1);
            }
            if reason != FITS {
                bump(&mut cell.reasons, reason, 1);
            }
        }
        self.set_key(n, tree_key(n.0, fit));
    }

    /// Sets a node's key in the tree; its cell's best is found again at
    /// [`SharedEvaluations::settle`].
    fn set_key(&mut self, n: NodeId, key: u128) {
        self.tree.set_key(self.leaf[n.idx()] as usize, key);
        let cell = self.cell_of[n.idx()];
        if !self.dirty_marks[cell as usize] {
            self.dirty_marks[cell as usize] = true;
            self.dirty.push(cell);
        }
    }

    /// Ends a batch of updates and finds the best node of every cell that changed.
    fn settle(&mut self) {
        self.tree.end_batch();
        for cell in self.dirty.drain(..) {
            let c = &mut self.cells[cell as usize];
            c.best = self.tree.best_in(c.start as usize, c.end as usize);
            self.dirty_marks[cell as usize] = false;
        }
    }

    /// Counts a node's resource check in its cell.
    fn set_check(&mut self, n: NodeId, check: Result<bool, Option<u64>>) {
        let code = check_code(check);
        let was = std::mem::replace(&mut self.check_codes[n.idx()], code);
        if was != code {
            let cell = &mut self.cells[self.cell_of[n.idx()] as usize];
            bump(&mut cell.checks, was, -1);
            bump(&mut cell.checks, code, 1);
        }
    }

    fn mark_stale(&mut self, n: NodeId) {
        push_once(&mut self.stale, &mut self.stale_marks, self.cell_of.len(), n);
    }

    /// Lays the tree out by a new assignment of nodes to cells (numbered in the order of
    /// their first node), each new cell a part of an old one: the keys move with their
    /// nodes, and a cell keeps its old cell's evaluator.
    fn split_cells(&mut self, cell_of: Vec<u32>, count: usize) {
        let nodes = cell_of.len();
        let mut sizes = vec![0u32; count];
        let mut parent = vec![0u32; count];
        for (n, &c) in cell_of.iter().enumerate() {
            sizes[c as usize] += 1;
            parent[c as usize] = self.cell_of[n];
        }
        let mut next = Vec::with_capacity(count);
        let mut start = 0u32;
        for &s in &sizes {
            next.push(start);
            start += s;
        }
        let mut cells: Vec<Cell> = (0..count)
            .map(|c| Cell {
                start: next[c],
                end: next[c] + sizes[c],
                node: NodeId(u32::MAX),
                evaluator: self.cells[parent[c] as usize].evaluator,
                best: 0,
                counts: [0, 0],
                reasons: Vec::new(),
                checks: Vec::new(),
            })
            .collect();
        let leaves = nodes.max(1);
        let mut keys = vec![0u128; 2 * leaves];
        let mut leaf = vec![0u32; nodes];
        for (n, &c) in cell_of.iter().enumerate() {
            let cell = &mut cells[c as usize];
            if cell.node.0 == u32::MAX {
                cell.node = NodeId(n as u32);
            }
            let key = self.tree.key_at(self.leaf[n] as usize);
            let l = next[c as usize];
            next[c as usize] += 1;
            leaf[n] = l;
            keys[leaves + l as usize] = key;
            let r = key_rank(key);
            if r > 0 {
                cell.counts[r as usize - 1] += 1;
            }
            if self.no_reasons[n] != FITS {
                bump(&mut cell.reasons, self.no_reasons[n], 1);
            }
            bump(&mut cell.checks, self.check_codes[n], 1);
        }
        self.tree = BestTree { leaves, keys, batch: false };
        self.tree.fill_inner();
        for c in &mut cells {
            c.best = self.tree.best_in(c.start as usize, c.end as usize);
        }
        self.cells = cells;
        self.cell_of = cell_of;
        self.leaf = leaf;
        self.dirty.clear();
        self.dirty_marks = vec![false; count];
    }
}

/// The slot of a node for a class: `None` where its first predicate plugin fails for good,
/// else its domain of the class's partition (0 without).
fn class_slot(class: &Class, n: NodeId) -> Option<usize> {
    if class.fixed.as_ref().is_some_and(|f| f.fails(n)) {
        return None;
    }
    Some(class.split.as_ref().map_or(0, |s| s.slot(n)))
}

impl<E: Evaluate> Query<'_, E> {
    /// The evaluation group of a view class.
    pub(super) fn view_group(&self, c: usize) -> Option<u32> {
        self.index.classes[c].view.as_ref().map(|v| v.group)
    }

    /// Makes a class (with a [`View`]) a view of its group, or fits the group to its fixed
    /// failures and partition again (once it has one): splits the cells where the class
    /// tells their nodes apart, evaluates the nodes the class may use that no member used
    /// before, and sets the cells each member may use. False, with nothing changed, when
    /// that would take the group past [`MAX_CELLS`] cells.
    pub(super) fn join_group(&mut self, g: u32, c: usize) -> bool {
        self.refresh_group(g);
        let nodes = self.snap.nodes.len();
        let class = &self.index.classes[c];
        let group = &self.index.groups[g as usize];
        // A member with the same fixed failures and partition (as shapes that differ only in
        // what neither reads, such as the namespace, share them) tells the nodes apart as
        // this class does: the cells stay, and the class may use that member's.
        let twin =
            group.members.iter().filter(|&&m| m as usize != c).map(|&m| &self.index.classes[m as usize]).find(|m| {
                let fixed = match (&m.fixed, &class.fixed) {
                    (None, None) => true,
                    (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                    _ => false,
                };
                let split = match (&m.split, &class.split) {
                    (None, None) => true,
                    // Equal partitions share a layout (see `Query::layout_of`).
                    (Some(a), Some(b)) => Arc::ptr_eq(&a.layout, &b.layout),
                    _ => false,
                };
                fixed && split
            });
        if let Some(twin) = twin {
            let slots = twin.view.as_ref().expect("a member is a view").slots.clone();
            let view = self.index.classes[c].view.as_mut().expect("joins as a view");
            view.slots = slots;
            view.errors = None;
            if !self.index.groups[g as usize].members.contains(&(c as u32)) {
                self.index.groups[g as usize].members.push(c as u32);
            }
            return true;
        }
        let slots = class.split.as_ref().map_or(1, |s| s.domains.count as usize + 1);
        if slots > MAX_CELLS {
            return false;
        }
        // The new cells: (old cell, slot or the reason it fails for good) in the order of
        // their first node, so that a class's fit errors are counted per cell.
        let fixed = class.fixed.as_deref();
        let width = slots + fixed.map_or(0, |f| f.reasons.len());
        let mut table = vec![u32::MAX; group.cells.len() * width];
        let mut cell_of = Vec::with_capacity(nodes);
        let mut count = 0usize;
        for n in 0..nodes {
            let s = match class_slot(class, NodeId(n as u32)) {
                Some(s) => s,
                None => slots + fixed.expect("fails for good").of_node[n] as usize - 1,
            };
            let k = group.cell_of[n] as usize * width + s;
            if table[k] == u32::MAX {
                if count == MAX_CELLS {
                    return false;
                }
                table[k] = count as u32;
                count += 1;
            }
            cell_of.push(table[k]);
        }
        let rep = class.representative;
        let split = count != group.cells.len();
        let group = &mut self.index.groups[g as usize];
        if split {
            group.split_cells(cell_of, count);
        }
        // The cells the class may use that had no evaluator: evaluated now, by its task.
        let class = &self.index.classes[c];
        let mut fresh = Vec::new();
        for cell in group.cells.iter_mut() {
            if cell.evaluator.is_none() && class_slot(class, cell.node).is_some() {
                cell.evaluator = Some(rep);
                fresh.push((cell.start, cell.end));
            }
        }
        if !fresh.is_empty() {
            let mut order = vec![NodeId(0); nodes];
            for (n, &l) in group.leaf.iter().enumerate() {
                order[l as usize] = NodeId(n as u32);
            }
            let todo: Vec<NodeId> =
                fresh.iter().flat_map(|&(s, e)| order[s as usize..e as usize].iter().copied()).collect();
            self.evaluate_for_group(g, rep, &todo);
        }
        if !self.index.groups[g as usize].members.contains(&(c as u32)) {
            self.index.groups[g as usize].members.push(c as u32);
        }
        // The cells of each member: of every member when the cells were split.
        let members: Vec<u32> = if split { self.index.groups[g as usize].members.clone() } else { vec![c as u32] };
        for m in members {
            let class = &self.index.classes[m as usize];
            let group = &self.index.groups[g as usize];
            let mut slots = vec![Vec::new(); class.split.as_ref().map_or(1, |s| s.domains.count as usize + 1)];
            for (i, cell) in group.cells.iter().enumerate() {
                if let Some(s) = class_slot(class, cell.node) {
                    slots[s].push(i as u32);
                }
            }
            let view = self.index.classes[m as usize].view.as_mut().expect("a member is a view");
            view.slots = slots;
            view.errors = None;
        }
        true
    }

    /// Evaluates these nodes for the group with a task and keeps the answers (the group
    /// current with the change log).
    fn evaluate_for_group(&mut self, g: u32, t: TaskId, nodes: &[NodeId]) {
        let request = self.index.groups[g as usize].request;
        self.refresh_request_checks(request);
        let checks = &self.index.requests[request as usize].checks;
        let this = &*self;
        let results: Vec<Evaluation> = if self.ev.parallel(nodes.len()) {
            nodes.par_iter().map(|&n| this.evaluate_checked(t, n, false, checks[n.idx()])).collect()
        } else {
            nodes.iter().map(|&n| this.evaluate_checked(t, n, false, checks[n.idx()])).collect()
        };
        let task = self.snap.task(t);
        let group = &mut self.index.groups[g as usize];
        group.tree.begin_batch(nodes.len());
        for (&n, r) in nodes.iter().zip(results) {
            let fit = group.reasons.fit_of(task, r);
            group.set_answer(n, fit);
        }
        group.settle();
    }

    /// Brings a group up to date with the change log: every logged node of a cell with an
    /// evaluator is evaluated again, but for a node that did not fit and only took tasks,
    /// which still does not fit (its reason is found again before it is read).
    pub(super) fn refresh_group(&mut self, g: u32) {
        let start = self.index.groups[g as usize].cursor;
        let end = self.index.log.len();
        if start == end {
            return;
        }
        let request = self.index.groups[g as usize].request;
        self.refresh_request_checks(request);
        let mut changed = std::mem::take(&mut self.index.changed);
        self.index.changes.distinct(&self.index.log[start..end], self.snap.nodes.len(), &mut changed);
        self.index.groups[g as usize].tree.begin_batch(changed.len());
        for &e in &changed {
            let n = NodeId(e >> 1);
            let check = self.index.requests[request as usize].checks[n.idx()];
            let group = &mut self.index.groups[g as usize];
            group.set_check(n, check);
            if group.evaluator(n).is_none() {
                continue;
            }
            if e & 1 == 1 && group.no_reasons[n.idx()] != FITS {
                group.mark_stale(n);
                continue;
            }
            self.reevaluate_for_group(g, n);
        }
        let group = &mut self.index.groups[g as usize];
        group.settle();
        group.cursor = end;
        self.index.changed = changed;
    }

    /// Evaluates a node again for its group (whose request checks are current), when its
    /// cell has an evaluator.
    fn reevaluate_for_group(&mut self, g: u32, n: NodeId) {
        let group = &self.index.groups[g as usize];
        let Some(evaluator) = group.evaluator(n) else { return };
        let check = self.index.requests[group.request as usize].checks[n.idx()];
        let r = self.evaluate_checked(evaluator, n, false, check);
        let task = self.snap.task(evaluator);
        let group = &mut self.index.groups[g as usize];
        let fit = group.reasons.fit_of(task, r);
        group.set_answer(n, fit);
    }

    /// The key of a view class's best node among the cells of a slot, or of all its slots.
    pub(super) fn view_best(&self, c: usize, slot: Option<usize>) -> u128 {
        let view = self.index.classes[c].view.as_ref().expect("a view");
        let cells = &self.index.groups[view.group as usize].cells;
        let best = |s: &Vec<u32>| s.iter().map(|&i| cells[i as usize].best).max().unwrap_or(0);
        match slot {
            Some(s) => view.slots.get(s).map_or(0, best),
            None => view.slots.iter().map(best).max().unwrap_or(0),
        }
    }

    /// How many nodes of a slot of a view class fit at a rank (1: later, 2: now).
    pub(super) fn view_count(&self, c: usize, slot: usize, rank: u32) -> u32 {
        let view = self.index.classes[c].view.as_ref().expect("a view");
        let cells = &self.index.groups[view.group as usize].cells;
        view.slots.get(slot).map_or(0, |s| s.iter().map(|&i| cells[i as usize].counts[rank as usize - 1]).sum())
    }

    /// A node's answer for a view class, without the reason of a node that does not fit.
    pub(super) fn view_fit(&self, c: usize, n: NodeId) -> Fit {
        let class = &self.index.classes[c];
        let view = class.view.as_ref().expect("a view");
        if class_slot(class, n).is_none() {
            return Fit::No(0);
        }
        match self.index.groups[view.group as usize].fit(n) {
            Fit::No(_) => Fit::No(0),
            fit => fit,
        }
    }

    /// The key of a node in a view class's group tree.
    pub(super) fn view_key(&self, c: usize, n: NodeId) -> u128 {
        let group = &self.index.groups[self.view_group(c).expect("a view") as usize];
        group.tree.key_at(group.leaf[n.idx()] as usize)
    }

    /// Sets a node's key in a view class's group tree (to mask it for a query, and back),
    /// with its cell's best.
    pub(super) fn set_view_key(&mut self, c: usize, n: NodeId, key: u128) {
        let g = self.view_group(c).expect("a view");
        let group = &mut self.index.groups[g as usize];
        group.set_key(n, key);
        group.settle();
    }

    /// A class of its own for task `t`, with the answers of view class `c` (see
    /// `Query::derive_class`), laid out by `split`: the group's answers on the nodes `c`
    /// may use (with their reasons that may be out of date), the resource check's failure or
    /// the fixed reason on the others, found now.
    pub(super) fn class_from_view(&mut self, c: usize, t: TaskId, split: Option<Split>, domain_rules: bool) -> Class {
        let g = self.view_group(c).expect("a view");
        self.refresh_group(g);
        let donor = &self.index.classes[c];
        let (rep, request) = (donor.representative, donor.request);
        let mut class = Class::new(t, split, domain_rules, self.index.log.len(), donor.fixed.clone(), request);
        class.no_reasons.reserve(self.snap.nodes.len());
        let group = &self.index.groups[g as usize];
        let checks = &self.index.requests[request as usize].checks;
        // The class's id of each reason of the group (`u32::MAX` until met).
        let mut ids = vec![u32::MAX; group.reasons.reasons.len()];
        let mut fits = Vec::with_capacity(self.snap.nodes.len());
        for (i, &check) in checks.iter().enumerate() {
            let n = NodeId(i as u32);
            let fit = if class_slot(donor, n).is_some() {
                match group.fit(n) {
                    Fit::No(r) => {
                        if ids[r as usize] == u32::MAX {
                            ids[r as usize] = class.intern(group.reasons.reasons[r as usize].clone());
                        }
                        Fit::No(ids[r as usize])
                    }
                    fit => fit,
                }
            } else {
                match class.fixed_fit(self.snap.task(rep), n, || check) {
                    Some(fit) => fit,
                    None => class.fit_of(self.snap.task(rep), self.evaluate_checked(rep, n, false, check)),
                }
            };
            class.push_answer(fit);
            fits.push(fit);
        }
        for &n in &group.stale {
            if class_slot(donor, n).is_some() {
                class.mark_stale(n);
            }
        }
        class.tree = BestTree::new(&fits, class.split.as_ref().map(|s| s.layout.as_ref()));
        class.slot_counts = count_slots(&fits, class.split.as_ref());
        class
    }

    /// Why no node fits a view class's task (every node it may use does not fit): per node,
    /// the first failure a scan meets, from the class's fixed failures and the group's
    /// reasons, counted node by node and kept until a node changes.
    pub(super) fn view_errors(&mut self, c: usize) -> FitErrors {
        let end = self.index.log.len();
        if let Some((at, errors)) = self.index.classes[c].view.as_ref().and_then(|v| v.errors.as_ref()) {
            if *at == end {
                return errors.clone();
            }
        }
        let g = self.view_group(c).expect("a view");
        self.refresh_group(g);
        // Reasons that may be out of date, found again.
        let stale = std::mem::take(&mut self.index.groups[g as usize].stale);
        if !stale.is_empty() {
            for &n in &stale {
                self.reevaluate_for_group(g, n);
            }
            let group = &mut self.index.groups[g as usize];
            group.settle();
            group.stale_marks.iter_mut().for_each(|w| *w = 0);
        }
        let mut stale = stale;
        stale.clear();
        self.index.groups[g as usize].stale = stale;
        // The cells the class may use give the group's reasons; on the others, a node
        // fails the resource check, which comes first, else the class's reason for the cell.
        let rep = self.index.classes[c].representative;
        let mut errors = FitErrors { nodes: self.snap.nodes.len(), ..Default::default() };
        let group = &self.index.groups[g as usize];
        let mut usable = vec![false; group.cells.len()];
        for &cell in self.index.classes[c].view.as_ref().expect("a view").slots.iter().flatten() {
            usable[cell as usize] = true;
        }
        let mut unknown = Vec::new();
        for (i, cell) in group.cells.iter().enumerate() {
            if usable[i] {
                for &(r, k) in &cell.reasons {
                    *errors.reasons.entry(group.reasons.reasons[r as usize].clone()).or_default() += k;
                }
                continue;
            }
            for &(code, k) in &cell.checks {
                let task = self.snap.task(rep);
                let class = &mut self.index.classes[c];
                let fit = match code {
                    0 => class.fixed_fit(task, cell.node, || Ok(true)).expect("fails for good"),
                    u64::MAX => {
                        unknown.push(i);
                        continue;
                    }
                    mask => class.fit_of(task, Err(Reason::Insufficient(mask))),
                };
                let Fit::No(r) = fit else { unreachable!("a reason") };
                *errors.reasons.entry(class.reasons.reasons[r as usize].clone()).or_default() += k;
            }
        }
        // Nodes whose check cannot name the dimensions: the full message, node by node.
        for i in unknown {
            let group = &self.index.groups[g as usize];
            let (start, end) = (group.cells[i].start, group.cells[i].end);
            let nodes: Vec<NodeId> = (0..self.snap.nodes.len() as u32)
                .map(NodeId)
                .filter(|n| {
                    let l = group.leaf[n.idx()];
                    (start..end).contains(&l) && group.check_codes[n.idx()] == u64::MAX
                })
                .collect();
            for n in nodes {
                let (task, node) = (self.snap.task(rep), self.snap.node(n));
                let reason = node.fits_future_idle(task).expect_err("does not fit").reason;
                *errors.reasons.entry(reason).or_default() += 1;
            }
        }
        if let Some(view) = self.index.classes[c].view.as_mut() {
            view.errors = Some((end, errors.clone()));
        }
        errors
    }
}
