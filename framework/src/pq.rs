//! A binary heap ordered by a comparator evaluated at push and pop time.
//!
//! Volcano's orderings (queue, job, task) are combined plugin comparators over state that
//! changes during an action: an element's place is decided when it is pushed, as in
//! Volcano's `util.PriorityQueue`, so a job re-pushed after an allocation is re-ranked by
//! its new share.

/// A heap of `T` whose "comes first" relation is given per call.
#[derive(Clone, Debug)]
pub struct CmpHeap<T> {
    items: Vec<T>,
}

impl<T> Default for CmpHeap<T> {
    fn default() -> Self {
        CmpHeap { items: Vec::new() }
    }
}

impl<T> CmpHeap<T> {
    /// An empty heap.
    pub fn new() -> Self {
        CmpHeap { items: Vec::new() }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the heap is empty.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds an element; `first(a, b)` is true when `a` must come before `b`.
    pub fn push(&mut self, item: T, mut first: impl FnMut(&T, &T) -> bool) {
        self.items.push(item);
        let mut i = self.items.len() - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if first(&self.items[i], &self.items[parent]) {
                self.items.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
    }

    /// Removes the element that comes first.
    pub fn pop(&mut self, mut first: impl FnMut(&T, &T) -> bool) -> Option<T> {
        if self.items.is_empty() {
            return None;
        }
        let last = self.items.len() - 1;
        self.items.swap(0, last);
        let top = self.items.pop();
        let n = self.items.len();
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut best = i;
            if l < n && first(&self.items[l], &self.items[best]) {
                best = l;
            }
            if r < n && first(&self.items[r], &self.items[best]) {
                best = r;
            }
            if best == i {
                break;
            }
            self.items.swap(i, best);
            i = best;
        }
        top
    }

    /// The elements in heap order (not sorted).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_comparator_order() {
        let mut h = CmpHeap::new();
        for x in [5, 1, 4, 2, 3, 9, 0] {
            h.push(x, |a, b| a < b);
        }
        let mut out = vec![];
        while let Some(x) = h.pop(|a, b| a < b) {
            out.push(x);
        }
        assert_eq!(out, [0, 1, 2, 3, 4, 5, 9]);
    }
}
