//! The max-tree of node answers a class (or an evaluation group) keeps, and the leaf
//! layouts that put the nodes of one topology domain on consecutive leaves.

use crate::model::NodeId;
use crate::plugin::NodeDomains;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Fit {
    /// Fits the idle resources now.
    Idle(f64),
    /// Fits only the future idle resources.
    Future(f64),
    /// Does not fit, with the interned reason.
    No(u32),
}

/// The order key of a node in a [`BestTree`]: higher is better. From the top bits down:
/// the fit (2: fits now, 1: fits once releasing pods are gone, 0: does not fit), the score
/// in `f64::total_cmp` order, and the node index reversed (lower index wins ties).
pub(super) fn tree_key(node: u32, fit: Fit) -> u128 {
    let (rank, score) = match fit {
        Fit::Idle(score) => (2u128, score),
        Fit::Future(score) => (1u128, score),
        Fit::No(_) => return u128::from(u32::MAX - node),
    };
    // The bits of `total_cmp` as an unsigned number.
    let bits = score.to_bits() as i64;
    let ordered = ((bits ^ ((((bits >> 63) as u64) >> 1) as i64)) as u64) ^ (1 << 63);
    (rank << 96) | (u128::from(ordered) << 32) | u128::from(u32::MAX - node)
}

/// The fit a [`tree_key`] stands for, with `reason` for a node that does not fit (the key
/// leaves the reason out).
pub(super) fn key_fit(key: u128, reason: u32) -> Fit {
    // The inverse of the `total_cmp` bits of `tree_key`.
    let ordered = ((key >> 32) as u64) ^ (1 << 63);
    let score = f64::from_bits(ordered ^ ((((ordered as i64) >> 63) as u64) >> 1));
    match key_rank(key) {
        2 => Fit::Idle(score),
        1 => Fit::Future(score),
        _ => Fit::No(reason),
    }
}

/// The node of a [`tree_key`].
pub(super) fn key_node(key: u128) -> NodeId {
    NodeId(u32::MAX - key as u32)
}

/// The fit rank of a [`tree_key`].
pub(super) fn key_rank(key: u128) -> u32 {
    (key >> 96) as u32
}

/// A max-tree over the nodes' [`tree_key`]s: an array of `2 × leaves` keys, the leaves at
/// `leaves..2 × leaves` and node `i` the max of `2i` and `2i + 1` (any number of leaves:
/// every leaf has exactly one path to node 1, so node 1 is the best node, and a range query
/// walks up from both ends). Not padded to a power of two: a class's tree is about 16 bytes
/// per node, not up to 32. An update walks up until nothing changes.
pub(super) struct BestTree {
    pub(super) leaves: usize,
    pub(super) keys: Vec<u128>,
    /// Updates set their leaf only, until [`BestTree::end_batch`] recomputes every inner
    /// node (see [`BestTree::begin_batch`]).
    pub(super) batch: bool,
}

impl BestTree {
    /// The tree of these fits (by node index), node `i` at leaf `i`, or at its leaf of the
    /// layout.
    pub(super) fn new(fits: &[Fit], layout: Option<&Layout>) -> BestTree {
        let leaves = fits.len().max(1);
        let mut keys = vec![0u128; 2 * leaves];
        for (i, fit) in fits.iter().enumerate() {
            let leaf = layout.map_or(i, |l| l.leaf[i] as usize);
            keys[leaves + leaf] = tree_key(i as u32, *fit);
        }
        let mut tree = BestTree { leaves, keys, batch: false };
        tree.fill_inner();
        tree
    }

    /// Sets every inner node from its children.
    pub(super) fn fill_inner(&mut self) {
        let keys = &mut self.keys;
        for i in (1..self.leaves).rev() {
            keys[i] = keys[2 * i].max(keys[2 * i + 1]);
        }
    }

    /// Starts a batch of updates of many leaves: until [`BestTree::end_batch`], an update
    /// sets its leaf only (the inner nodes are out of date; only leaves may be read). Past
    /// about an eighth of the leaves, one pass over the inner nodes costs less than walking
    /// up from each leaf.
    pub(super) fn begin_batch(&mut self, updates: usize) {
        self.batch = updates * 8 >= self.leaves;
    }

    /// Ends a batch of updates: the inner nodes are set again.
    pub(super) fn end_batch(&mut self) {
        if std::mem::take(&mut self.batch) {
            self.fill_inner();
        }
    }

    pub(super) fn set(&mut self, leaf: usize, node: u32, fit: Fit) {
        self.set_key(leaf, tree_key(node, fit));
    }

    /// The key at a leaf.
    pub(super) fn key_at(&self, leaf: usize) -> u128 {
        self.keys[self.leaves + leaf]
    }

    pub(super) fn set_key(&mut self, leaf: usize, key: u128) {
        let mut i = self.leaves + leaf;
        self.keys[i] = key;
        if self.batch {
            return;
        }
        while i > 1 {
            i /= 2;
            let best = self.keys[2 * i].max(self.keys[2 * i + 1]);
            if self.keys[i] == best {
                break;
            }
            self.keys[i] = best;
        }
    }

    /// The key of the best node (0 for an empty tree).
    pub(super) fn best(&self) -> u128 {
        self.keys.get(1).copied().unwrap_or(0)
    }

    /// The key of the best node of the leaves `start..end` (0 when none).
    pub(super) fn best_in(&self, start: usize, end: usize) -> u128 {
        let (mut l, mut r) = (start + self.leaves, end + self.leaves);
        let mut best = 0;
        while l < r {
            if l & 1 == 1 {
                best = best.max(self.keys[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                best = best.max(self.keys[r]);
            }
            l /= 2;
            r /= 2;
        }
        best
    }
}

/// The leaf order of the tree of a class with domain rules ([`crate::Incremental::domain_rules`]):
/// the nodes of each domain on consecutive leaves, so that the best node of the domains
/// the rules allow is the best of a few ranges.
pub(super) struct Layout {
    /// The leaf of each node.
    pub(super) leaf: Vec<u32>,
    /// The leaves `start..end` of each domain, then of the nodes without the label.
    pub(super) ranges: Vec<(u32, u32)>,
}

impl Layout {
    pub(super) fn new(domains: &NodeDomains) -> Layout {
        let slot = |d: u32| if d == NodeDomains::NONE { domains.count as usize } else { d as usize };
        let mut ranges = vec![(0u32, 0u32); domains.count as usize + 1];
        for &d in &domains.of_node {
            ranges[slot(d)].1 += 1;
        }
        let mut start = 0;
        for r in &mut ranges {
            let len = r.1;
            *r = (start, start);
            start += len;
        }
        let leaf = domains
            .of_node
            .iter()
            .map(|&d| {
                let r = &mut ranges[slot(d)];
                r.1 += 1;
                r.1 - 1
            })
            .collect();
        Layout { leaf, ranges }
    }
}

/// A partition of the nodes a class's tree is laid out by (its domain rules', or the
/// batch partition of its tasks): the nodes' domains and the tree's leaf order.
#[derive(Clone)]
pub(super) struct Split {
    pub(super) domains: Arc<NodeDomains>,
    pub(super) layout: Arc<Layout>,
}

impl Split {
    /// The slot of a node: its domain, or `count` without the label.
    pub(super) fn slot(&self, n: NodeId) -> usize {
        match self.domains.of_node[n.idx()] {
            NodeDomains::NONE => self.domains.count as usize,
            d => d as usize,
        }
    }
}
