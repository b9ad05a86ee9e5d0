//! The index's answers: classes built, refreshed from the change log and read, through the
//! session's [`Evaluate`] interface.

use rayon::prelude::*;

use super::*;

pub(super) mod view;

impl<E: Evaluate> Query<'_, E> {
    /// A node's answer for a task; without the task's domain rules when `split` (see
    /// [`crate::Incremental::domain_rules`]).
    fn evaluate(&self, t: TaskId, n: NodeId, split: bool) -> Evaluation {
        self.evaluate_checked(t, n, split, fit_check(self.snap.task(t), self.snap.node(n)))
    }

    /// [`Query::evaluate`], given the node's [`fit_check`] of the task.
    fn evaluate_checked(&self, t: TaskId, n: NodeId, split: bool, check: Result<bool, Option<u64>>) -> Evaluation {
        let idle = match check {
            Ok(idle) => idle,
            Err(Some(mask)) => return Err(Reason::Insufficient(mask)),
            Err(None) => {
                let (task, node) = (self.snap.task(t), self.snap.node(n));
                return Err(Reason::Predicate(node.fits_future_idle(task).expect_err("does not fit").reason));
            }
        };
        if split {
            self.ev.predicate_without_domain_rules(t, n).map_err(|s| Reason::Predicate(s.reason))?;
        } else {
            self.ev.predicate(t, n).map_err(|s| Reason::Predicate(s.reason))?;
        }
        let score: f64 = self.ev.node_order_sum(t, n);
        let score = if score == 0.0 { 0.0 } else { score };
        Ok((idle, score))
    }

    fn class_of(&mut self, t: TaskId) -> usize {
        let key = self.index.keys[t.idx()];
        if key != 0 {
            let base = self.base_shape(t);
            if let Some(&c) = self.index.class_of_keyed.get(&(base, key)) {
                return c as usize;
            }
            let c = self.build_class(t);
            self.index.class_of_keyed.insert((base, key), c as u32);
            return c;
        }
        let shape = self.snap.task(t).shape as usize;
        if self.index.class_of_shape.len() <= shape {
            let len = (self.snap.shape_count() as usize).max(shape + 1);
            self.index.class_of_shape.resize(len, u32::MAX);
        }
        let known = self.index.class_of_shape[shape];
        if known != u32::MAX {
            return known as usize;
        }
        let c = self.build_class(t);
        self.index.class_of_shape[shape] = c as u32;
        c
    }

    /// The base shape of a task (see [`NodeIndex::base_of_shape`]).
    fn base_shape(&mut self, t: TaskId) -> u32 {
        let task = self.snap.task(t);
        let shape = task.shape as usize;
        if self.index.base_of_shape.len() <= shape {
            let len = (self.snap.shape_count() as usize).max(shape + 1);
            self.index.base_of_shape.resize(len, u32::MAX);
        }
        if self.index.base_of_shape[shape] == u32::MAX {
            let base = match (self.index.base_reps.iter())
                .position(|&r| crate::snapshot::build::same_base_shape(self.snap.task(r), task))
            {
                Some(b) => b as u32,
                None => {
                    self.index.base_reps.push(t);
                    self.index.base_reps.len() as u32 - 1
                }
            };
            self.index.base_of_shape[shape] = base;
        }
        self.index.base_of_shape[shape]
    }

    /// Re-evaluates the nodes that changed since the class last looked (for a view, since
    /// its group last looked).
    fn refresh(&mut self, c: usize) {
        if let Some(g) = self.view_group(c) {
            self.refresh_group(g);
            return;
        }
        let start = self.index.classes[c].cursor;
        let end = self.index.log.len();
        if start < end {
            self.refresh_request_checks(self.index.classes[c].request);
            let mut changed = std::mem::take(&mut self.index.changed);
            self.index.changes.distinct(&self.index.log[start..end], self.snap.nodes.len(), &mut changed);
            let fixed = self.index.classes[c].fixed.clone();
            self.index.classes[c].tree.begin_batch(changed.len());
            for &e in changed.iter() {
                let n = NodeId(e >> 1);
                let class = &mut self.index.classes[c];
                if fixed.as_ref().is_some_and(|f| f.fails(n)) || (e & 1 == 1 && class.fails(n)) {
                    class.mark_stale(n);
                } else {
                    self.reevaluate_node(c, n);
                }
            }
            self.index.classes[c].tree.end_batch();
            self.index.changed = changed;
            self.index.classes[c].cursor = end;
        }
    }

    /// Re-evaluates the class's nodes whose reasons may be out of date.
    fn flush_stale(&mut self, c: usize) {
        let mut stale = std::mem::take(&mut self.index.classes[c].stale);
        if stale.is_empty() {
            return;
        }
        stale.sort_unstable();
        let rep = self.index.classes[c].representative;
        let request = self.index.classes[c].request as usize;
        self.refresh_request_checks(request as u32);
        for &n in &stale {
            let class = &mut self.index.classes[c];
            let task = self.snap.task(rep);
            let checks = &self.index.requests[request].checks;
            match class.fixed_fit(task, n, || checks[n.idx()]) {
                Some(fit) => class.set_answer(n, fit),
                None => self.reevaluate_node(c, n),
            }
        }
        stale.clear();
        let class = &mut self.index.classes[c];
        class.stale = stale;
        class.stale_marks.iter_mut().for_each(|w| *w = 0);
    }

    /// Re-evaluates these nodes (sorted, distinct) for a class.
    fn reevaluate(&mut self, c: usize, nodes: &[NodeId]) {
        self.refresh_request_checks(self.index.classes[c].request);
        for &n in nodes {
            self.reevaluate_node(c, n);
        }
    }

    /// Re-evaluates a node for a class (not a view), whose [`RequestChecks`] are up to date.
    fn reevaluate_node(&mut self, c: usize, n: NodeId) {
        let class = &self.index.classes[c];
        let (rep, split) = (class.representative, class.domain_rules);
        let request = &self.index.requests[class.request as usize];
        debug_assert_eq!(request.cursor, self.index.log.len());
        let r = self.evaluate_checked(rep, n, split, request.checks[n.idx()]);
        let class = &mut self.index.classes[c];
        let fit = class.fit_of(self.snap.task(rep), r);
        class.set_answer(n, fit);
    }

    /// The domain rules of a task (see [`crate::Incremental::domain_rules`]; one plugin at
    /// most has some, see [`Query::index_usable`]), with the leaf order of their
    /// partition.
    fn split_of(&mut self, t: TaskId) -> Option<Split> {
        let domains = self.ev.node_plugins().find_map(|p| p.incremental()?.domain_rules(self.snap, t))?;
        Some(self.layout_of(domains))
    }

    /// The batch partition of a [`PARTITIONED`] task (see
    /// [`crate::Incremental::batch_partition`]), with its leaf order.
    fn batch_split_of(&mut self, t: TaskId) -> Option<Split> {
        let domains = self.ev.batch_plugins().find_map(|p| p.incremental()?.batch_partition(self.snap, t))?;
        Some(self.layout_of(domains))
    }

    /// A partition with its leaf order, shared by equal partitions (the predicates' and the
    /// scores' zones are one layout).
    fn layout_of(&mut self, domains: Arc<NodeDomains>) -> Split {
        if let Some((_, l)) = self.index.layouts.iter().find(|(d, _)| Arc::ptr_eq(d, &domains)) {
            return Split { domains, layout: l.clone() };
        }
        let layout = match self.index.layouts.iter().find(|(d, _)| **d == *domains) {
            Some((_, l)) => l.clone(),
            None => Arc::new(Layout::new(&domains)),
        };
        self.index.layouts.push((domains.clone(), layout.clone()));
        Split { domains, layout }
    }

    /// A class built from a recent class whose shape differs only in inter-pod rules: its
    /// answers, with the nodes where either task's rules may fail now re-evaluated (see
    /// [`crate::Incremental::rule_exceptions`]). `None` when there is no such class, or the nodes
    /// cannot be listed, or they are most of the cluster.
    fn derive_class(&mut self, t: TaskId, split: Option<Split>, domain_rules: bool) -> Result<usize, Option<Split>> {
        const RECENT: usize = 16;
        let first = self.index.classes.len().saturating_sub(RECENT);
        let Some(donor) = (first..self.index.classes.len()).rev().find(|&d| {
            let rep = self.snap.task(self.index.classes[d].representative);
            crate::snapshot::build::same_base_shape(rep, self.snap.task(t))
        }) else {
            return Err(split);
        };
        self.refresh(donor);
        let rep = self.index.classes[donor].representative;
        let mut nodes = std::mem::take(&mut self.index.exceptions);
        nodes.clear();
        let listed = self.ev.node_plugins().all(|p| {
            p.incremental().is_some_and(|h| {
                h.rule_exceptions(self.snap, t, &mut nodes) && h.rule_exceptions(self.snap, rep, &mut nodes)
            })
        });
        if !listed || nodes.len() > self.snap.nodes.len() / 2 {
            self.index.exceptions = nodes;
            return Err(split);
        }
        nodes.sort_unstable();
        nodes.dedup();
        if self.index.classes[donor].view.is_some() {
            let class = self.class_from_view(donor, t, split, domain_rules);
            self.index.classes.push(class);
            let c = self.index.classes.len() - 1;
            self.reevaluate(c, &nodes);
            self.index.exceptions = nodes;
            return Ok(c);
        }
        let d = &self.index.classes[donor];
        let layout = split.as_ref().map(|s| &s.layout);
        let same_layout = layout.map(Arc::as_ptr) == d.split.as_ref().map(|s| Arc::as_ptr(&s.layout));
        let (tree, slot_counts) = if same_layout {
            (BestTree { leaves: d.tree.leaves, keys: d.tree.keys.clone(), batch: false }, d.slot_counts.clone())
        } else {
            let fits = d.fits();
            (BestTree::new(&fits, layout.map(|l| l.as_ref())), count_slots(&fits, split.as_ref()))
        };
        let class = Class {
            representative: t,
            split,
            domain_rules,
            cursor: d.cursor,
            no_reasons: d.no_reasons.clone(),
            slot_counts,
            tree,
            reasons: d.reasons.clone(),
            reason_counts: d.reason_counts.clone(),
            // The donor's answers come with its out-of-date reasons.
            stale: d.stale.clone(),
            stale_marks: d.stale_marks.clone(),
            // The same base shape: the same selector, node affinity and tolerations.
            fixed: d.fixed.clone(),
            fixed_ids: d.fixed_ids.clone(),
            // The same base shape: the same requests.
            request: d.request,
            // A task with a non-zero key is in no group.
            view: None,
        };
        self.index.classes.push(class);
        let c = self.index.classes.len() - 1;
        self.reevaluate(c, &nodes);
        self.index.exceptions = nodes;
        Ok(c)
    }

    /// The nodes where the first predicate fails for the task whatever the session does,
    /// and why (see [`crate::Incremental::fixed_failures`]). Only the first plugin with an active
    /// predicate is asked: its failure is the one a scan reports on a node where the
    /// resources fit.
    fn fixed_failures(&self, t: TaskId) -> Option<Arc<FixedFailures>> {
        self.ev.predicate_plugins().next()?.incremental()?.fixed_failures(self.snap, t)
    }

    /// The [`RequestChecks`] of a task's request, brought up to date with the change log
    /// (each logged node checked again: the check is cheap, and a node that only took a task
    /// may now lack more dimensions), computed on first use.
    fn request_checks_of(&mut self, t: TaskId) -> u32 {
        let key = RequestKey::of(self.snap.task(t));
        match self.index.request_ids.get(&key) {
            Some(&r) => {
                self.refresh_request_checks(r);
                r
            }
            None => {
                let task = self.snap.task(t);
                let nodes = self.snap.nodes.len();
                let checks = if self.ev.parallel(nodes) {
                    (0..nodes).into_par_iter().map(|i| fit_check(task, &self.snap.nodes[i])).collect()
                } else {
                    (0..nodes).map(|i| fit_check(task, &self.snap.nodes[i])).collect()
                };
                let cursor = self.index.log.len();
                self.index.requests.push(RequestChecks { task: t, cursor, checks });
                let r = self.index.requests.len() as u32 - 1;
                self.index.request_ids.insert(key, r);
                r
            }
        }
    }

    /// Brings [`RequestChecks`] up to date with the change log.
    fn refresh_request_checks(&mut self, r: u32) {
        let end = self.index.log.len();
        let checks = &mut self.index.requests[r as usize];
        if checks.cursor == end {
            return;
        }
        let task = self.snap.task(checks.task);
        for &e in &self.index.log[checks.cursor..end] {
            let n = (e >> 1) as usize;
            checks.checks[n] = fit_check(task, &self.snap.nodes[n]);
        }
        checks.cursor = end;
    }

    /// The evaluation group of a task's class (see [`view`]), computed on first use: `None`
    /// when some plugin with a predicate or node score gives no
    /// [`crate::Incremental::evaluation_key`], or the task has inter-pod rules a plugin reads
    /// (its key is not 0) or domain rules, or a predicate plugin other than the first lists
    /// fixed failures (nodes where it fails for good may then pass the first, and their
    /// answers differ between the classes of the group), or there are no nodes.
    fn group_of(&mut self, t: TaskId, request: u32, domain_rules: bool) -> Option<u32> {
        if domain_rules || self.index.keys[t.idx()] != 0 || self.snap.nodes.is_empty() {
            return None;
        }
        let mut keys = Vec::new();
        for p in self.ev.evaluating_plugins() {
            keys.push(p.incremental()?.evaluation_key(self.snap, t)?);
        }
        if self
            .ev
            .predicate_plugins()
            .skip(1)
            .any(|p| p.incremental().is_some_and(|h| h.fixed_failures(self.snap, t).is_some()))
        {
            return None;
        }
        let task = self.snap.task(t);
        let key = (request, task.nonzero_cpu, task.nonzero_memory, keys);
        if let Some(&g) = self.index.group_ids.get(&key) {
            return Some(g);
        }
        let g = self.index.groups.len() as u32;
        let group =
            SharedEvaluations::new(request, &self.index.requests[request as usize].checks, self.index.log.len());
        self.index.groups.push(group);
        self.index.group_ids.insert(key, g);
        Some(g)
    }

    fn build_class(&mut self, t: TaskId) -> usize {
        let mut split = self.split_of(t);
        let is_split = split.is_some();
        if split.is_none() && self.index.usable[t.idx()] == PARTITIONED {
            split = self.batch_split_of(t);
        }
        let split = match self.derive_class(t, split, is_split) {
            Ok(c) => return c,
            Err(split) => split,
        };
        let nodes = self.snap.nodes.len();
        let request = self.request_checks_of(t);
        let fixed = self.fixed_failures(t);
        let mut class = Class::new(t, split, is_split, self.index.log.len(), fixed, request);
        if let Some(g) = self.group_of(t, request, is_split) {
            class.view = Some(View::new(g));
            self.index.classes.push(class);
            let c = self.index.classes.len() - 1;
            if self.join_group(g, c) {
                return c;
            }
            // Too many cells: a tree of its own.
            class = self.index.classes.pop().expect("pushed above");
            class.view = None;
        }
        // Buffers reused from class to class: a class's build would otherwise fault in
        // fresh pages for a result per node.
        let mut results = std::mem::take(&mut self.index.build_results);
        let mut fits = std::mem::take(&mut self.index.build_fits);
        let this = &*self;
        let checks = &this.index.requests[request as usize].checks;
        let fixed = &class.fixed;
        // A node that fails for good is not evaluated (see `Class::fixed_fit`).
        let eval = |i: usize| match fixed {
            Some(f) if f.of_node[i] != 0 => None,
            _ => Some(this.evaluate_checked(t, NodeId(i as u32), is_split, checks[i])),
        };
        if self.ev.parallel(nodes) {
            (0..nodes).into_par_iter().map(eval).collect_into_vec(&mut results);
        } else {
            results.clear();
            results.extend((0..nodes).map(eval));
        }
        let task = self.snap.task(t);
        class.no_reasons.reserve(nodes);
        fits.clear();
        for (i, r) in results.drain(..).enumerate() {
            let n = NodeId(i as u32);
            let fit = match r {
                Some(r) => class.fit_of(task, r),
                None => match class.fixed_fit(task, n, || checks[i]) {
                    Some(fit) => fit,
                    None => class.fit_of(task, this.evaluate_checked(t, n, is_split, checks[i])),
                },
            };
            class.push_answer(fit);
            fits.push(fit);
        }
        class.tree = BestTree::new(&fits, class.split.as_ref().map(|s| s.layout.as_ref()));
        class.slot_counts = count_slots(&fits, class.split.as_ref());
        self.index.build_results = results;
        self.index.build_fits = fits;
        self.index.classes.push(class);
        self.index.classes.len() - 1
    }

    /// Finds the best node for a task through the node index: the best node where it fits
    /// now, else the best where it fits once releasing pods are gone; the fit errors of all
    /// nodes when none fits. Same answer as a full scan (`predicate_nodes` + `best_node`).
    pub(crate) fn find_node(&mut self, t: TaskId) -> Result<NodeChoice, FitErrors> {
        if !self.index_usable(t) {
            return self.ev.find_node_by_scan(t);
        }
        let c = self.class_of(t);
        let mode = self.index.usable[t.idx()];
        if mode == PARTITIONED && !self.lay_out_by_batch_partition(c, t) {
            return self.ev.find_node_by_scan(t);
        }
        self.refresh(c);
        self.fill_verdicts(c, t);
        if mode == SPARSE || mode == PARTITIONED {
            if let Some(choice) = self.special_choice(c, t, mode == PARTITIONED, None) {
                return Ok(choice);
            }
        }
        let best = self.best_allowed(c);
        match key_rank(best) {
            2 => return Ok(NodeChoice::Idle(key_node(best))),
            1 => return Ok(NodeChoice::Future(key_node(best))),
            _ => {}
        }
        if self.index.classes[c].view.is_some() {
            return Err(self.view_errors(c));
        }
        self.flush_stale(c);
        Err(self.class_errors(c, t))
    }

    /// The best node for a task among `among` (distinct nodes), scored as a batch over
    /// them alone, when the node index can answer: the task's batch scores are partitioned
    /// ([`crate::Incremental::batch_partition`]) and `among` is a union of whole domains of
    /// the partition (a HyperNode's nodes, when the partition is by lowest HyperNode).
    /// `None` when it cannot (the caller scans `among`); `Some(None)` when no node of
    /// `among` fits. Same answer as a scan of `among`.
    pub(crate) fn find_node_among(&mut self, t: TaskId, among: &[NodeId]) -> Option<Option<NodeChoice>> {
        if among.is_empty() || !self.index_usable(t) || self.index.usable[t.idx()] != PARTITIONED {
            return None;
        }
        let c = self.class_of(t);
        if !self.lay_out_by_batch_partition(c, t) {
            return None;
        }
        let mut slots = std::mem::take(&mut self.index.within);
        slots.clear();
        {
            let split = self.index.classes[c].split.as_ref().expect("laid out by the partition");
            slots.extend(among.iter().map(|n| split.slot(*n)));
            slots.sort_unstable();
            slots.dedup();
            let covered: usize = slots
                .iter()
                .map(|s| {
                    let (start, end) = split.layout.ranges[*s];
                    (end - start) as usize
                })
                .sum();
            if covered != among.len() {
                self.index.within = slots;
                return None;
            }
        }
        self.refresh(c);
        self.fill_verdicts(c, t);
        let choice = self.special_choice(c, t, true, Some(&slots));
        self.index.within = slots;
        Some(choice)
    }

    /// The domain verdicts of a class's task now, into `index.verdicts` (empty for a class
    /// without domain rules).
    fn fill_verdicts(&mut self, c: usize, t: TaskId) {
        let mut verdicts = std::mem::take(&mut self.index.verdicts);
        verdicts.clear();
        if let Some(split) = self.index.classes[c].split.as_ref().filter(|_| self.index.classes[c].domain_rules) {
            verdicts.resize(split.domains.count as usize + 1, None);
            for p in self.ev.node_plugins() {
                if let Some(h) = p.incremental() {
                    h.domain_verdicts(self.snap, t, &mut verdicts);
                }
            }
        }
        self.index.verdicts = verdicts;
    }

    /// The key of the best node of a class among those its domain verdicts allow.
    fn best_allowed(&self, c: usize) -> u128 {
        let class = &self.index.classes[c];
        if class.view.is_some() {
            return self.view_best(c, None);
        }
        match class.split.as_ref().filter(|_| class.domain_rules) {
            None => class.tree.best(),
            Some(split) => (split.layout.ranges.iter().zip(&self.index.verdicts))
                .filter(|(_, v)| v.is_none())
                .map(|(&(start, end), _)| class.tree.best_in(start as usize, end as usize))
                .max()
                .unwrap_or(0),
        }
    }

    /// A node's key in a class's tree (in its group's, for a view).
    fn class_key(&self, c: usize, n: NodeId) -> u128 {
        let class = &self.index.classes[c];
        match class.view {
            Some(_) => self.view_key(c, n),
            None => class.tree.key_at(class.leaf(n)),
        }
    }

    /// Sets a node's key in a class's tree (in its group's, for a view).
    fn set_class_key(&mut self, c: usize, n: NodeId, key: u128) {
        if self.index.classes[c].view.is_some() {
            self.set_view_key(c, n, key);
        } else {
            let class = &mut self.index.classes[c];
            let leaf = class.leaf(n);
            class.tree.set_key(leaf, key);
        }
    }

    /// The reason of a node's domain verdict (`None` when it is allowed or the class has no
    /// domain rules).
    fn domain_refusal(&self, c: usize, n: NodeId) -> Option<&str> {
        let class = &self.index.classes[c];
        let split = class.split.as_ref().filter(|_| class.domain_rules)?;
        self.index.verdicts[split.slot(n)].as_deref()
    }

    /// Why no node fits a class's task: per node, the first failure a scan meets.
    fn class_errors(&self, c: usize, t: TaskId) -> FitErrors {
        let mut errors = FitErrors { nodes: self.snap.nodes.len(), ..Default::default() };
        let mut counts = self.index.classes[c].reason_counts.clone();
        if self.index.classes[c].domain_rules {
            // A node its domain refuses fails with the domain's reason when it passes the
            // other checks, with a failed resource check (the first check) when it has one,
            // and with what the full predicate says otherwise.
            let mut refused: HashMap<String, u32> = HashMap::new();
            for i in 0..self.snap.nodes.len() {
                let n = NodeId(i as u32);
                let Some(reason) = self.domain_refusal(c, n) else { continue };
                let class = &self.index.classes[c];
                let reason = match class.fit(n) {
                    Fit::Idle(_) | Fit::Future(_) => reason.to_string(),
                    Fit::No(id) => {
                        if class.reasons.insufficient.iter().any(|&(_, r)| r == id) {
                            continue;
                        }
                        counts[id as usize] -= 1;
                        // (Failing a predicate without the domain rules, it fails one
                        // with them.)
                        match self.evaluate(t, n, false) {
                            Err(Reason::Predicate(r)) => r,
                            _ => reason.to_string(),
                        }
                    }
                };
                *refused.entry(reason).or_default() += 1;
            }
            for (reason, n) in refused {
                *errors.reasons.entry(reason).or_default() += n;
            }
        }
        let class = &self.index.classes[c];
        for (i, n) in counts.iter().enumerate() {
            if *n > 0 {
                *errors.reasons.entry(class.reasons.reasons[i].clone()).or_default() += *n;
            }
        }
        errors
    }
}

impl<E: Evaluate> Query<'_, E> {
    /// Lays a class's tree out by the batch partition of a [`PARTITIONED`] task, when the
    /// class has no layout yet (its tasks so far had none); false when it has another (the
    /// task is then scanned).
    fn lay_out_by_batch_partition(&mut self, c: usize, t: TaskId) -> bool {
        let Some(split) = self.batch_split_of(t) else { return false };
        let class = &mut self.index.classes[c];
        match &class.split {
            Some(s) => Arc::ptr_eq(&s.layout, &split.layout),
            None if class.view.is_some() => {
                // The group's cells split by the partition, when they may be.
                class.split = Some(split);
                let g = self.view_group(c).expect("a view");
                if self.join_group(g, c) {
                    return true;
                }
                self.index.classes[c].split = None;
                false
            }
            None => {
                let fits = class.fits();
                class.tree = BestTree::new(&fits, Some(&split.layout));
                class.slot_counts = count_slots(&fits, Some(&split));
                class.split = Some(split);
                true
            }
        }
    }

    /// The choice of a class whose batch scores are uniform outside a few special nodes
    /// ([`SPARSE`]), or uniform per domain of the class's partition outside them
    /// ([`PARTITIONED`], `by_domain`): the best of the special nodes and of the best other
    /// node (of each domain), by the node-local scores, among those of the best fit rank,
    /// by their node-local and batch scores, each other node standing for the nodes of its
    /// rank it was chosen from; ties to the first node, as a scan. `None` when no node
    /// fits. `within` (sorted), for a partitioned class: the only slots whose nodes may be
    /// chosen, scored as a batch over their nodes alone.
    fn special_choice(&mut self, c: usize, t: TaskId, by_domain: bool, within: Option<&[usize]>) -> Option<NodeChoice> {
        let mut special = std::mem::take(&mut self.index.special);
        special.clear();
        for p in self.ev.batch_plugins() {
            if let Some(h) = p.incremental() {
                h.batch_special_nodes(self.snap, t, &mut special);
            }
        }
        if let (Some(w), Some(split)) = (within, self.index.classes[c].split.as_ref()) {
            special.retain(|n| w.binary_search(&split.slot(*n)).is_ok());
        }
        special.sort_unstable();
        special.dedup();
        // The best other nodes: the special ones masked for the queries. Each with its
        // slot, or `usize::MAX` for the best of every allowed slot.
        let mut masked = std::mem::take(&mut self.index.masked);
        masked.clear();
        for &n in &special {
            masked.push(self.class_key(c, n));
            self.set_class_key(c, n, tree_key(n.0, Fit::No(0)));
        }
        let mut others = std::mem::take(&mut self.index.others);
        others.clear();
        {
            let class = &self.index.classes[c];
            let allowed = |slot: usize| !class.domain_rules || self.index.verdicts[slot].is_none();
            match class.split.as_ref().filter(|_| by_domain) {
                Some(split) => {
                    for i in 0..within.map_or(split.layout.ranges.len(), <[usize]>::len) {
                        let slot = within.map_or(i, |w| w[i]);
                        if !allowed(slot) {
                            continue;
                        }
                        let (start, end) = split.layout.ranges[slot];
                        let best = match class.view {
                            Some(_) => self.view_best(c, Some(slot)),
                            None => class.tree.best_in(start as usize, end as usize),
                        };
                        others.push((best, slot));
                    }
                }
                None => others.push((self.best_allowed(c), usize::MAX)),
            }
        }
        for (&n, &key) in special.iter().zip(&masked) {
            self.set_class_key(c, n, key);
        }
        self.index.masked = masked;
        let mut candidates = std::mem::take(&mut self.index.candidates);
        let mut nodes = std::mem::take(&mut self.index.candidate_nodes);
        let mut counts = std::mem::take(&mut self.index.candidate_counts);
        let mut scores = std::mem::take(&mut self.index.candidate_scores);
        // The special nodes' fits, with their domain verdicts.
        let fit = |n: NodeId| {
            if self.domain_refusal(c, n).is_some() {
                Fit::No(0)
            } else if self.index.classes[c].view.is_some() {
                self.view_fit(c, n)
            } else {
                self.index.classes[c].fit(n)
            }
        };
        let top =
            special.iter().map(|&n| rank(fit(n))).chain(others.iter().map(|&(k, _)| key_rank(k))).max().unwrap_or(0);
        if top == 0 {
            self.index.special = special;
            self.index.others = others;
            self.index.candidates = candidates;
            self.index.candidate_nodes = nodes;
            self.index.candidate_counts = counts;
            self.index.candidate_scores = scores;
            return None;
        }
        let class = &self.index.classes[c];
        let slot_of = |n: NodeId| class.split.as_ref().map_or(0, |s| s.slot(n));
        let allowed = |s: usize| !class.domain_rules || self.index.verdicts[s].is_none();
        let at_top = |s: usize| match class.view {
            Some(_) => self.view_count(c, s, top),
            None => class.slot_counts[s][top as usize - 1],
        };
        let slots = match class.view {
            Some(_) => class.split.as_ref().map_or(1, |s| s.domains.count as usize + 1),
            None => class.slot_counts.len(),
        };
        candidates.clear();
        candidates.extend(special.iter().filter(|&&n| rank(fit(n)) == top).map(|&n| (n, 1)));
        for &(key, slot) in &others {
            if key_rank(key) != top {
                continue;
            }
            // The nodes of the top rank it stands for: those of its slot (of every allowed
            // slot), less the special ones.
            let all: u32 =
                if slot == usize::MAX { (0..slots).filter(|&s| allowed(s)).map(at_top).sum() } else { at_top(slot) };
            let listed =
                special.iter().filter(|&&n| rank(fit(n)) == top && (slot == usize::MAX || slot_of(n) == slot)).count()
                    as u32;
            debug_assert!(all > listed, "a node of the top rank stands for at least itself");
            candidates.push((key_node(key), all.saturating_sub(listed).max(1)));
        }
        candidates.sort_unstable();
        nodes.clear();
        counts.clear();
        scores.clear();
        for &(n, k) in &candidates {
            nodes.push(n);
            counts.push(k);
            scores.push(match fit(n) {
                Fit::Idle(s) | Fit::Future(s) => s,
                Fit::No(_) => unreachable!("candidates fit"),
            });
        }
        if nodes.len() > 1 {
            for p in self.ev.batch_plugins() {
                match p.incremental() {
                    Some(h) => h.batch_node_order_counted(self.snap, t, &nodes, &counts, &mut scores),
                    None => p.batch_node_order(self.snap, t, &nodes, &mut scores),
                }
            }
        }
        let mut best = 0;
        for i in 1..nodes.len() {
            if scores[i] > scores[best] {
                best = i;
            }
        }
        let n = nodes[best];
        self.index.special = special;
        self.index.others = others;
        self.index.candidates = candidates;
        self.index.candidate_nodes = nodes;
        self.index.candidate_counts = counts;
        self.index.candidate_scores = scores;
        Some(if top == 2 { NodeChoice::Idle(n) } else { NodeChoice::Future(n) })
    }

    /// Whether the index gives the same answer as a scan for this task: every plugin that
    /// filters or scores nodes is shape-local (asked once per task and session), batch
    /// scores are uniform for the task's shape (asked once per shape), and at most one
    /// plugin has domain rules for it.
    fn index_usable(&mut self, t: TaskId) -> bool {
        // Shapes come from `Snapshot::build`; without them, every task is scanned.
        if !self.index.enabled || self.snap.shape_count() == 0 {
            return false;
        }
        if self.index.usable.len() < self.snap.tasks.len() {
            self.index.usable.resize(self.snap.tasks.len(), 0);
            self.index.keys.resize(self.snap.tasks.len(), 0);
        }
        match self.index.usable[t.idx()] {
            UNIFORM | SPARSE | PARTITIONED => true,
            SCAN => false,
            _ => {
                let usable =
                    self.ev.node_plugins().all(|p| p.incremental().is_some_and(|h| h.shape_local(self.snap, t)));
                if usable {
                    // Combined so that different keys of different plugins stay apart.
                    let key = self.ev.node_plugins().fold(0u64, |acc, p| {
                        let k = p.incremental().map_or(0, |h| h.shape_key(self.snap, t));
                        if k == 0 {
                            acc
                        } else {
                            (acc ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29) | 1
                        }
                    });
                    // A task whose inter-pod rules no plugin reads per node belongs to the
                    // class of its base shape too.
                    let key = if key == 0 && crate::snapshot::build::has_pod_rules(self.snap.task(t)) {
                        NO_RULES_READ
                    } else {
                        key
                    };
                    self.index.keys[t.idx()] = key;
                }
                let mode = if usable
                    && self
                        .ev
                        .node_plugins()
                        .filter(|p| p.incremental().is_some_and(|h| h.domain_rules(self.snap, t).is_some()))
                        .count()
                        <= 1
                {
                    self.batch_mode(t)
                } else {
                    SCAN
                };
                self.index.usable[t.idx()] = mode;
                mode != SCAN
            }
        }
    }

    /// Whether the batch scores of a shape-local task are uniform ([`UNIFORM`]), sparse
    /// ([`SPARSE`]), uniform per domain of one partition outside a few nodes
    /// ([`PARTITIONED`]) or none of these ([`SCAN`]).
    fn batch_mode(&self, t: TaskId) -> u8 {
        let mut mode = UNIFORM;
        let mut partition: Option<Arc<NodeDomains>> = None;
        for p in self.ev.batch_plugins() {
            let hints = p.incremental();
            if hints.is_some_and(|h| h.batch_uniform(self.snap, t)) {
                continue;
            }
            if hints.is_some_and(|h| h.batch_sparse(self.snap, t)) {
                mode = mode.max(SPARSE);
                continue;
            }
            match (hints.and_then(|h| h.batch_partition(self.snap, t)), &partition) {
                (Some(d), None) => partition = Some(d),
                // Two plugins partition alike.
                (Some(d), Some(e)) if Arc::ptr_eq(&d, e) || d == *e => {}
                _ => return SCAN,
            }
            mode = PARTITIONED;
        }
        mode
    }

    /// Whether the task fits some node now or once releasing pods are gone (its request
    /// fits the node's future idle resources and every predicate passes there): through
    /// the node index when it serves the task, by a scan otherwise.
    pub(crate) fn fits_some_node(&mut self, t: TaskId) -> bool {
        if self.index_usable(t) {
            return self.find_node(t).is_ok();
        }
        let req = &self.snap.task(t).resreq;
        (0..self.snap.nodes.len() as u32)
            .map(NodeId)
            .any(|n| self.snap.node(n).fits_future(req) && self.ev.predicate(t, n).is_ok())
    }

    /// The nodes of `among` (in node order) where the eviction predicates pass for the
    /// task ([`Evaluate::predicate_for_eviction`]), with their scores
    /// (the session's node scores over them), for a task whose batch scores are uniform
    /// ([`Query::batch_scores_uniform`]). The predicates' answers and each node's own
    /// score are kept per class of the node index until the node changes, as the class's
    /// answers are (so not the predicates' answers of a class with domain rules, which
    /// change with the nodes of a domain: those are asked each time).
    pub(crate) fn eviction_candidates(&mut self, t: TaskId, among: &[NodeId]) -> (Vec<NodeId>, Vec<f64>) {
        debug_assert!(self.batch_scores_uniform(t));
        let c = self.class_of(t);
        if self.index.evictions.len() <= c {
            self.index.evictions.resize_with(c + 1, || None);
        }
        let mut cache = self.index.evictions[c].take().unwrap_or_else(|| EvictionAnswers {
            cursor: self.index.log.len(),
            answers: vec![None; self.snap.nodes.len()],
        });
        for &e in &self.index.log[cache.cursor..] {
            cache.answers[(e >> 1) as usize] = None;
        }
        cache.cursor = self.index.log.len();
        let keep_predicates = !self.index.classes[c].domain_rules;
        let (mut nodes, mut scores) = (Vec::new(), Vec::new());
        for &n in among {
            let (passes, score) = match cache.answers[n.idx()] {
                Some((passes, score)) if keep_predicates => (passes, score),
                Some((_, score)) => (self.ev.predicate_for_eviction(t, n).is_ok(), score),
                None => {
                    let answer = (self.ev.predicate_for_eviction(t, n).is_ok(), self.ev.node_order_sum(t, n));
                    cache.answers[n.idx()] = Some(answer);
                    answer
                }
            };
            if passes {
                nodes.push(n);
                scores.push(score);
            }
        }
        self.index.evictions[c] = Some(cache);
        for p in self.ev.batch_plugins() {
            p.batch_node_order(self.snap, t, &nodes, &mut scores);
        }
        (nodes, scores)
    }

    /// Whether the task's batch scores are the same on every node (every plugin with batch
    /// scores finds them [`crate::Incremental::batch_uniform`] for it), so that scoring a subset
    /// of the nodes gives each node the score a batch over all of them would, and with the
    /// node index on. `preempt` then scores only the nodes where it may find victims.
    pub(crate) fn batch_scores_uniform(&mut self, t: TaskId) -> bool {
        self.index_usable(t) && self.index.usable[t.idx()] == UNIFORM
    }
}

impl Class {
    /// A class without answers yet (no tree, no view).
    fn new(
        representative: TaskId,
        split: Option<Split>,
        domain_rules: bool,
        cursor: usize,
        fixed: Option<Arc<FixedFailures>>,
        request: u32,
    ) -> Class {
        Class {
            representative,
            split,
            domain_rules,
            cursor,
            no_reasons: Vec::new(),
            slot_counts: Vec::new(),
            tree: BestTree::new(&[], None),
            reasons: ReasonTable::default(),
            reason_counts: Vec::new(),
            stale: Vec::new(),
            stale_marks: Vec::new(),
            fixed_ids: vec![u32::MAX; fixed.as_ref().map_or(0, |f| f.reasons.len())],
            fixed,
            request,
            view: None,
        }
    }

    /// Appends the answer of the next node (by index) while the class is built: its
    /// reason, counted. The tree is built from the answers after.
    fn push_answer(&mut self, fit: Fit) {
        self.no_reasons.push(match fit {
            Fit::No(r) => {
                self.reason_counts[r as usize] += 1;
                r
            }
            _ => FITS,
        });
    }

    /// Adds a node to `stale`, once.
    fn mark_stale(&mut self, n: NodeId) {
        push_once(&mut self.stale, &mut self.stale_marks, self.no_reasons.len(), n);
    }

    /// A node's answer.
    fn fit(&self, n: NodeId) -> Fit {
        key_fit(self.tree.key_at(self.leaf(n)), self.no_reasons[n.idx()])
    }

    /// Every node's answer, by node index.
    fn fits(&self) -> Vec<Fit> {
        (0..self.no_reasons.len()).map(|i| self.fit(NodeId(i as u32))).collect()
    }

    /// Whether a node does not fit (without reading the tree).
    fn fails(&self, n: NodeId) -> bool {
        self.no_reasons[n.idx()] != FITS
    }

    /// Sets a node's answer.
    fn set_fit(&mut self, n: NodeId, fit: Fit) {
        self.no_reasons[n.idx()] = match fit {
            Fit::No(r) => r,
            _ => FITS,
        };
        let leaf = self.leaf(n);
        self.tree.set(leaf, n.0, fit);
    }

    /// The leaf of a node in the class's tree.
    fn leaf(&self, n: NodeId) -> usize {
        match &self.split {
            Some(split) => split.layout.leaf[n.idx()] as usize,
            None => n.idx(),
        }
    }

    fn intern(&mut self, reason: String) -> u32 {
        let id = self.reasons.intern(reason);
        self.count_reasons();
        id
    }

    /// Makes room in `reason_counts` for every reason.
    fn count_reasons(&mut self) {
        if self.reason_counts.len() < self.reasons.reasons.len() {
            self.reason_counts.resize(self.reasons.reasons.len(), 0);
        }
    }

    fn fit_of(&mut self, task: &TaskInfo, r: Evaluation) -> Fit {
        let fit = self.reasons.fit_of(task, r);
        self.count_reasons();
        fit
    }

    /// The answer on a node of `fixed`, from its resource check: the check's failure, which
    /// comes first, else the reason of `fixed`, the first predicate's failure there. `None`
    /// for a node outside `fixed`, or when the check cannot say which dimensions fail.
    fn fixed_fit(
        &mut self,
        task: &TaskInfo,
        n: NodeId,
        check: impl FnOnce() -> Result<bool, Option<u64>>,
    ) -> Option<Fit> {
        let r = self.fixed.as_ref()?.of_node[n.idx()];
        if r == 0 {
            return None;
        }
        match check() {
            Err(None) => None,
            Err(Some(mask)) => Some(self.fit_of(task, Err(Reason::Insufficient(mask)))),
            Ok(_) => {
                let r = r as usize - 1;
                if self.fixed_ids[r] == u32::MAX {
                    let reason = self.fixed.as_ref().expect("checked above").reasons[r].clone();
                    self.fixed_ids[r] = self.intern(reason);
                }
                Some(Fit::No(self.fixed_ids[r]))
            }
        }
    }

    /// Sets a node's answer, with the counts of reasons and ranks.
    fn set_answer(&mut self, n: NodeId, fit: Fit) {
        let old = self.fit(n);
        if old == fit {
            return;
        }
        if let Fit::No(r) = old {
            self.reason_counts[r as usize] -= 1;
        }
        if let Fit::No(r) = fit {
            self.reason_counts[r as usize] += 1;
        }
        if rank(old) != rank(fit) {
            let slot = self.split.as_ref().map_or(0, |s| s.slot(n));
            if rank(old) > 0 {
                self.slot_counts[slot][rank(old) as usize - 1] -= 1;
            }
            if rank(fit) > 0 {
                self.slot_counts[slot][rank(fit) as usize - 1] += 1;
            }
        }
        self.set_fit(n, fit);
    }
}
