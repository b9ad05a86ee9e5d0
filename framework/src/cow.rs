//! [`CowVec`]: a vector stored in copy-on-write chunks, so that a snapshot kept between
//! cycles can be copied for a session in time proportional to its number of chunks, and a
//! session copies only the chunks it writes to.

use std::fmt;
use std::ops::{Index, IndexMut};
use std::sync::Arc;

/// log2 of the number of elements per chunk.
const CHUNK_BITS: usize = 7;
/// Elements per chunk.
pub const CHUNK: usize = 1 << CHUNK_BITS;
const MASK: usize = CHUNK - 1;

#[derive(Clone)]
enum Chunk<T> {
    /// Written by this vector only: read and written in place.
    Owned(Vec<T>),
    /// Possibly shared with clones: copied (unless no clone is left) before a write.
    Shared(Arc<Vec<T>>),
}

impl<T> Chunk<T> {
    #[inline]
    fn as_slice(&self) -> &[T] {
        match self {
            Chunk::Owned(v) => v,
            Chunk::Shared(v) => v,
        }
    }
}

/// A vector of `T` in chunks of 128 elements that are shared between clones until written.
///
/// Reads index like a `Vec`. [`CowVec::share`] marks every chunk shared (no copy); after
/// that, `clone` copies no element, and the first write to a chunk through either copy gives
/// that copy its own chunk (by taking it back when no other copy holds it, by copying it
/// otherwise). A clone of a vector whose chunks are not shared copies them, as `Vec` does.
pub struct CowVec<T> {
    chunks: Vec<Chunk<T>>,
    len: usize,
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        CowVec { chunks: Vec::new(), len: 0 }
    }
}

impl<T: Clone> Clone for CowVec<T> {
    fn clone(&self) -> Self {
        CowVec { chunks: self.chunks.clone(), len: self.len }
    }
}

impl<T: fmt::Debug> fmt::Debug for CowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> CowVec<T> {
    /// An empty vector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vector is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The element at `i`, if any.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        if i < self.len {
            Some(&self[i])
        } else {
            None
        }
    }

    /// The elements in order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { chunks: self.chunks.iter(), current: [].iter(), remaining: self.len }
    }

    /// Marks every chunk shared, without copying: later clones share them.
    pub fn share(&mut self) {
        for chunk in &mut self.chunks {
            if let Chunk::Owned(v) = chunk {
                *chunk = Chunk::Shared(Arc::new(std::mem::take(v)));
            }
        }
    }

    /// Number of chunks that are not shared (written since the last [`CowVec::share`] or
    /// copied from a shared chunk).
    pub fn owned_chunks(&self) -> usize {
        self.chunks.iter().filter(|c| matches!(c, Chunk::Owned(_))).count()
    }
}

impl<T: Clone> CowVec<T> {
    /// Appends up to [`CHUNK`] elements as a chunk of their own, without copying them; the
    /// vector's length must be a multiple of [`CHUNK`].
    pub fn push_chunk(&mut self, mut chunk: Vec<T>) {
        assert!(self.len & MASK == 0 && chunk.len() <= CHUNK, "push_chunk needs chunk-aligned lengths");
        if chunk.is_empty() {
            return;
        }
        self.len += chunk.len();
        chunk.reserve_exact(CHUNK - chunk.len());
        self.chunks.push(Chunk::Owned(chunk));
    }

    #[inline]
    fn chunk_mut(&mut self, c: usize) -> &mut Vec<T> {
        let chunk = &mut self.chunks[c];
        if matches!(chunk, Chunk::Shared(_)) {
            let Chunk::Shared(shared) = std::mem::replace(chunk, Chunk::Owned(Vec::new())) else {
                unreachable!("matched above")
            };
            *chunk = Chunk::Owned(Arc::try_unwrap(shared).unwrap_or_else(|a| (*a).clone()));
        }
        match chunk {
            Chunk::Owned(v) => v,
            Chunk::Shared(_) => unreachable!("the chunk was just made owned"),
        }
    }

    /// The element at `i` for writing, if any.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i < self.len {
            Some(&mut self[i])
        } else {
            None
        }
    }

    /// Removes the last element and returns it, if any.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let last = self.chunks.len() - 1;
        let value = self.chunk_mut(last).pop();
        self.len -= 1;
        if self.len & MASK == 0 {
            self.chunks.pop();
        }
        value
    }

    /// Removes the element at `i` and returns it; the last element takes its place.
    pub fn swap_remove(&mut self, i: usize) -> T {
        assert!(i < self.len, "index {i} out of range for a CowVec of length {}", self.len);
        let last = self.pop().expect("not empty");
        if i == self.len {
            last
        } else {
            std::mem::replace(&mut self[i], last)
        }
    }

    /// Appends an element.
    pub fn push(&mut self, value: T) {
        if self.len & MASK == 0 {
            self.chunks.push(Chunk::Owned(Vec::with_capacity(CHUNK)));
        }
        let last = self.chunks.len() - 1;
        self.chunk_mut(last).push(value);
        self.len += 1;
    }
}

impl<T> Index<usize> for CowVec<T> {
    type Output = T;
    #[inline]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} out of range for a CowVec of length {}", self.len);
        &self.chunks[i >> CHUNK_BITS].as_slice()[i & MASK]
    }
}

impl<T: Clone> IndexMut<usize> for CowVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index {i} out of range for a CowVec of length {}", self.len);
        &mut self.chunk_mut(i >> CHUNK_BITS)[i & MASK]
    }
}

impl<T: Clone> FromIterator<T> for CowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = CowVec::new();
        for x in iter {
            v.push(x);
        }
        v
    }
}

impl<T: Clone> From<Vec<T>> for CowVec<T> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

/// Iterator over a [`CowVec`].
pub struct Iter<'a, T> {
    chunks: std::slice::Iter<'a, Chunk<T>>,
    current: std::slice::Iter<'a, T>,
    remaining: usize,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        loop {
            if let Some(x) = self.current.next() {
                self.remaining -= 1;
                return Some(x);
            }
            self.current = self.chunks.next()?.as_slice().iter();
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

impl<'a, T> IntoIterator for &'a CowVec<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_chunks_until_written() {
        let mut v: CowVec<u32> = (0..1000).collect();
        assert_eq!(v.len(), 1000);
        assert_eq!(v.owned_chunks(), 8);
        v.share();
        assert_eq!(v.owned_chunks(), 0);
        let mut w = v.clone();
        w[300] = 7;
        assert_eq!(w.owned_chunks(), 1);
        assert_eq!((v[300], w[300]), (300, 7));
        assert_eq!(v.iter().copied().sum::<u32>(), (0..1000u32).sum::<u32>());
        assert_eq!(w.iter().len(), 1000);
        // The last holder of a shared chunk takes it back without copying.
        drop(w);
        v[300] = 9;
        assert_eq!(v[300], 9);
        v.push(1000);
        assert_eq!(v.get(1000), Some(&1000));
        assert_eq!(v.get(1001), None);
        assert_eq!((&v).into_iter().nth(999), Some(&999));
    }

    #[test]
    fn pop_and_swap_remove_keep_chunks_aligned_and_clones_intact() {
        let mut v: CowVec<u32> = (0..257).collect();
        v.share();
        let copy = v.clone();
        assert_eq!(v.pop(), Some(256));
        assert_eq!(v.len(), 256);
        assert_eq!(v.swap_remove(3), 3);
        assert_eq!((v[3], v.len()), (255, 255));
        assert_eq!(v.swap_remove(254), 254);
        v.push(1000);
        assert_eq!(v.iter().copied().collect::<Vec<_>>().len(), 255);
        assert_eq!((v[254], v.get(255)), (1000, None));
        // The clone saw none of it.
        assert_eq!(copy.iter().copied().collect::<Vec<_>>(), (0..257).collect::<Vec<_>>());
        let mut w: CowVec<u32> = (0..3).collect();
        while w.pop().is_some() {}
        assert!(w.is_empty());
        w.push(5);
        assert_eq!(w[0], 5);
    }
}
