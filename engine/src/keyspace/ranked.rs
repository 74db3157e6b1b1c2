//! An ordered set with rank and select in O(log n): the order index of a sorted set.
//!
//! ZRANK, ZRANGE by index, ZCOUNT and ZLEXCOUNT must not walk the set: Redis answers them in
//! O(log n) from its skiplist's spans, and a leaderboard asks ZREVRANK of a million-member set.
//! std's `BTreeSet` keeps no counts. The order-statistic crates we looked at preallocate large
//! nodes (indexset 0.18: one 1,024-slot `Vec` per set, and a Fenwick tree rebuilt on every node
//! split; wabi_tree 0.1: 128 inline slots in every leaf), kilobytes for each of the many small
//! sorted sets a cache holds. So this is a small B+tree of our own: items sit in leaves, each
//! internal node keeps separator keys and the item count under each child, and a one-member
//! set is a single `Vec` of one item.
//!
//! Searches take a comparator or a prefix predicate instead of a value of the item type, so a
//! caller can look up by a borrowed form (a sorted set probes with `(score, &[u8])`).
//! A node that drops below a quarter full is merged with a neighbour, or evened out with it
//! when the two do not fit in one node, so the height stays logarithmic under deletions.

use std::cmp::Ordering;

/// Most items in a leaf, and most children of an internal node. Measured under ZADD of
/// ~860,000 members (-P 16): 32 costs 3.36 µs per ZADD, 64 3.63 (longer shifts in a leaf),
/// 16 3.68 (a deeper tree); std's BTreeSet, with no ranks, 3.27.
const MAX: usize = 32;
/// A non-root node with fewer items (children) than this is merged or evened out with a neighbour.
const MIN: usize = MAX / 4;

#[derive(Clone)]
enum Node<T> {
    Leaf(Vec<T>),
    Internal(Internal<T>),
}

/// The internal nodes on the way down, each with the child taken.
type Path<'a, T> = Vec<(&'a Internal<T>, usize)>;

#[derive(Clone)]
struct Internal<T> {
    /// `seps[i]` is greater than every item under `children[..=i]` and at most every item
    /// under `children[i + 1..]`.
    seps: Vec<T>,
    children: Vec<Node<T>>,
    /// Items under each child.
    counts: Vec<usize>,
}

/// What a node that split hands its parent: the separator, the new right sibling, and how
/// many items moved to it.
type Split<T> = (T, Node<T>, usize);

#[derive(Clone)]
pub struct RankedSet<T> {
    root: Node<T>,
    len: usize,
}

impl<T> Default for RankedSet<T> {
    fn default() -> Self {
        RankedSet { root: Node::Leaf(Vec::new()), len: 0 }
    }
}

impl<T: Ord + Clone> RankedSet<T> {
    #[cfg(test)]
    pub fn new() -> Self {
        Self::default()
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `item`; false (and the set unchanged) if an equal item is present.
    pub fn insert(&mut self, item: T) -> bool {
        let (inserted, split) = self.root.insert(item);
        if let Some((sep, right, right_count)) = split {
            let left = std::mem::replace(&mut self.root, Node::Leaf(Vec::new()));
            let left_count = self.len + inserted as usize - right_count;
            self.root = Node::Internal(Internal { seps: vec![sep], children: vec![left, right], counts: vec![left_count, right_count] });
        }
        self.len += inserted as usize;
        inserted
    }

    /// Removes and returns the item for which `cmp` (the item compared with the one sought)
    /// says `Equal`, if any.
    pub fn remove_by(&mut self, cmp: impl Fn(&T) -> Ordering) -> Option<T> {
        let removed = self.root.remove(&cmp)?;
        self.len -= 1;
        // An internal root left with one child hands the tree to it.
        while let Node::Internal(n) = &mut self.root {
            if n.children.len() > 1 {
                break;
            }
            let only = n.children.pop().expect("an internal node has a child");
            self.root = only;
        }
        Some(removed)
    }

    /// How many items satisfy `before`, which must hold for a prefix of the order (every item
    /// below one it holds for): the rank of the first item it fails for.
    pub fn rank_by(&self, before: impl Fn(&T) -> bool) -> usize {
        let mut node = &self.root;
        let mut rank = 0;
        loop {
            match node {
                Node::Leaf(items) => return rank + items.partition_point(&before),
                Node::Internal(n) => {
                    let i = n.seps.partition_point(&before);
                    rank += n.counts[..i].iter().sum::<usize>();
                    node = &n.children[i];
                }
            }
        }
    }

    /// The item of rank `rank` (0 is the smallest).
    pub fn get(&self, rank: usize) -> Option<&T> {
        if rank >= self.len {
            return None;
        }
        let mut node = &self.root;
        let mut rank = rank;
        loop {
            match node {
                Node::Leaf(items) => return items.get(rank),
                Node::Internal(n) => {
                    let i = n.child_at(&mut rank);
                    node = &n.children[i];
                }
            }
        }
    }
    pub fn first(&self) -> Option<&T> {
        self.get(0)
    }
    pub fn last(&self) -> Option<&T> {
        self.len.checked_sub(1).and_then(|r| self.get(r))
    }

    /// Up to `count` items from the one of rank `start`, ascending, or descending when `rev`.
    pub fn iter_from(&self, start: usize, count: usize, rev: bool) -> Iter<'_, T> {
        if start >= self.len || count == 0 {
            return Iter { path: Vec::new(), leaf: &[], pos: 0, left: 0, rev };
        }
        let left = if rev { count.min(start + 1) } else { count.min(self.len - start) };
        let (path, leaf, pos) = self.descend(start);
        Iter { path, leaf, pos: if rev { pos + 1 } else { pos }, left, rev }
    }
    /// Every item, ascending.
    pub fn iter(&self) -> Iter<'_, T> {
        self.iter_from(0, self.len, false)
    }

    /// Bytes the tree's nodes hold on the heap (the items' own allocations not included).
    pub fn heap_bytes(&self) -> usize {
        self.root.heap_bytes()
    }

    /// The internal nodes on the way to the leaf holding rank `rank`, that leaf, and the
    /// position in it.
    fn descend(&self, mut rank: usize) -> (Path<'_, T>, &[T], usize) {
        let mut path = Vec::new();
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(items) => return (path, items.as_slice(), rank),
                Node::Internal(n) => {
                    let i = n.child_at(&mut rank);
                    path.push((n, i));
                    node = &n.children[i];
                }
            }
        }
    }
}

impl<T: Ord + Clone> Node<T> {
    /// Items in a leaf, children of an internal node.
    fn width(&self) -> usize {
        match self {
            Node::Leaf(items) => items.len(),
            Node::Internal(n) => n.children.len(),
        }
    }

    fn insert(&mut self, item: T) -> (bool, Option<Split<T>>) {
        match self {
            Node::Leaf(items) => {
                let Err(pos) = items.binary_search(&item) else { return (false, None) };
                if items.len() < MAX {
                    items.insert(pos, item);
                    return (true, None);
                }
                // Split before inserting, so a full leaf's Vec never grows past MAX.
                let (sep, mut right, mut right_count) = self.split();
                let Node::Leaf(left) = self else { unreachable!("a leaf splits into leaves") };
                if item >= sep {
                    let Node::Leaf(r) = &mut right else { unreachable!("a leaf splits into leaves") };
                    let at = r.binary_search(&item).unwrap_err();
                    r.insert(at, item);
                    right_count += 1;
                } else {
                    let at = left.binary_search(&item).unwrap_err();
                    left.insert(at, item);
                }
                (true, Some((sep, right, right_count)))
            }
            Node::Internal(n) => {
                let i = n.seps.partition_point(|s| *s <= item);
                let (inserted, split) = n.children[i].insert(item);
                n.counts[i] += inserted as usize;
                if let Some(split) = split {
                    n.adopt(i, split);
                }
                let split = if n.children.len() > MAX { Some(self.split()) } else { None };
                (inserted, split)
            }
        }
    }

    /// Moves the upper half of this node into a new right sibling.
    fn split(&mut self) -> Split<T> {
        match self {
            Node::Leaf(items) => {
                let right = items.split_off(items.len() / 2);
                let sep = right[0].clone();
                let count = right.len();
                (sep, Node::Leaf(right), count)
            }
            Node::Internal(n) => {
                let mid = n.children.len() / 2;
                let children = n.children.split_off(mid);
                let counts = n.counts.split_off(mid);
                let seps = n.seps.split_off(mid);
                let sep = n.seps.pop().expect("a split internal node keeps a separator");
                let count = counts.iter().sum();
                (sep, Node::Internal(Internal { seps, children, counts }), count)
            }
        }
    }

    fn remove(&mut self, cmp: &impl Fn(&T) -> Ordering) -> Option<T> {
        match self {
            Node::Leaf(items) => {
                let pos = items.binary_search_by(cmp).ok()?;
                Some(items.remove(pos))
            }
            Node::Internal(n) => {
                let i = n.seps.partition_point(|s| cmp(s) != Ordering::Greater);
                let removed = n.children[i].remove(cmp)?;
                n.counts[i] -= 1;
                if n.children[i].width() < MIN && n.children.len() > 1 {
                    n.rebalance(if i + 1 < n.children.len() { i } else { i - 1 });
                }
                Some(removed)
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Node::Leaf(items) => items.capacity() * size_of::<T>(),
            Node::Internal(n) => {
                n.seps.capacity() * size_of::<T>()
                    + n.counts.capacity() * size_of::<usize>()
                    + n.children.capacity() * size_of::<Node<T>>()
                    + n.children.iter().map(Node::heap_bytes).sum::<usize>()
            }
        }
    }
}

impl<T> Internal<T> {
    /// The child holding rank `rank` of this subtree; `rank` becomes the rank within it.
    fn child_at(&self, rank: &mut usize) -> usize {
        let mut i = 0;
        while i + 1 < self.counts.len() && *rank >= self.counts[i] {
            *rank -= self.counts[i];
            i += 1;
        }
        i
    }
}

impl<T: Ord + Clone> Internal<T> {
    /// Merges `children[i + 1]` into `children[i]`; if the two do not fit in one node, splits
    /// the result evenly again.
    fn rebalance(&mut self, i: usize) {
        let right = self.children.remove(i + 1);
        let sep = self.seps.remove(i);
        let right_count = self.counts.remove(i + 1);
        self.counts[i] += right_count;
        match (&mut self.children[i], right) {
            (Node::Leaf(l), Node::Leaf(mut r)) => l.append(&mut r),
            (Node::Internal(l), Node::Internal(mut r)) => {
                l.seps.push(sep);
                l.seps.append(&mut r.seps);
                l.children.append(&mut r.children);
                l.counts.append(&mut r.counts);
            }
            _ => unreachable!("siblings are at the same depth"),
        }
        if self.children[i].width() > MAX {
            let split = self.children[i].split();
            self.adopt(i, split);
        }
    }

    /// Takes in the right sibling that `children[i]` split off, just after it.
    fn adopt(&mut self, i: usize, (sep, right, right_count): Split<T>) {
        self.counts[i] -= right_count;
        self.seps.insert(i, sep);
        self.children.insert(i + 1, right);
        self.counts.insert(i + 1, right_count);
    }
}

/// Items in order (or reverse order) from a rank; see [`RankedSet::iter_from`].
pub struct Iter<'a, T> {
    /// The internal nodes above `leaf`, with the child taken at each.
    path: Vec<(&'a Internal<T>, usize)>,
    leaf: &'a [T],
    /// Forward: the next position to yield. Backward: one past it.
    pos: usize,
    left: usize,
    rev: bool,
}

impl<'a, T> Iter<'a, T> {
    /// Moves to the next leaf (the previous one when `rev`); false at the end.
    fn next_leaf(&mut self) -> bool {
        let Some((node, i)) = self.pop_to_turn() else { return false };
        let mut child = &node.children[i];
        self.path.push((node, i));
        loop {
            match child {
                Node::Leaf(items) => {
                    self.leaf = items.as_slice();
                    self.pos = if self.rev { items.len() } else { 0 };
                    return true;
                }
                Node::Internal(n) => {
                    let j = if self.rev { n.children.len() - 1 } else { 0 };
                    self.path.push((n, j));
                    child = &n.children[j];
                }
            }
        }
    }

    /// Unwinds the path to the deepest node with a sibling subtree in the walking direction,
    /// and returns it with that sibling's index.
    fn pop_to_turn(&mut self) -> Option<(&'a Internal<T>, usize)> {
        while let Some((node, i)) = self.path.pop() {
            if self.rev && i > 0 {
                return Some((node, i - 1));
            }
            if !self.rev && i + 1 < node.children.len() {
                return Some((node, i + 1));
            }
        }
        None
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.left == 0 {
            return None;
        }
        if self.rev {
            while self.pos == 0 {
                if !self.next_leaf() {
                    self.left = 0;
                    return None;
                }
            }
            self.pos -= 1;
        } else {
            while self.pos == self.leaf.len() {
                if !self.next_leaf() {
                    self.left = 0;
                    return None;
                }
            }
            self.pos += 1;
        }
        self.left -= 1;
        Some(&self.leaf[if self.rev { self.pos } else { self.pos - 1 }])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl<T: Ord + Clone + std::fmt::Debug> RankedSet<T> {
        /// Checks every structural invariant; returns the height.
        fn check(&self) -> usize {
            fn walk<T: Ord + Clone + std::fmt::Debug>(n: &Node<T>, root: bool, lo: Option<&T>, hi: Option<&T>) -> (usize, usize) {
                match n {
                    Node::Leaf(items) => {
                        assert!(items.len() <= MAX);
                        assert!(root || items.len() >= MIN, "non-root leaf of {} items", items.len());
                        assert!(items.windows(2).all(|w| w[0] < w[1]), "leaf out of order");
                        assert!(items.iter().all(|x| lo.is_none_or(|lo| lo <= x) && hi.is_none_or(|hi| x < hi)), "item outside its separators");
                        (items.len(), 1)
                    }
                    Node::Internal(n) => {
                        assert!(n.children.len() <= MAX);
                        assert!(n.children.len() >= if root { 2 } else { MIN }, "internal node of {} children", n.children.len());
                        assert_eq!(n.seps.len() + 1, n.children.len());
                        assert_eq!(n.counts.len(), n.children.len());
                        assert!(n.seps.windows(2).all(|w| w[0] < w[1]), "separators out of order");
                        let mut total = 0;
                        let mut height = None;
                        for (i, c) in n.children.iter().enumerate() {
                            let clo = if i == 0 { lo } else { Some(&n.seps[i - 1]) };
                            let chi = n.seps.get(i).or(hi);
                            let (count, h) = walk(c, false, clo, chi);
                            assert_eq!(count, n.counts[i], "stale count");
                            assert!(height.is_none_or(|x| x == h), "uneven depth");
                            height = Some(h);
                            total += count;
                        }
                        (total, height.unwrap() + 1)
                    }
                }
            }
            let (count, height) = walk(&self.root, true, None, None);
            assert_eq!(count, self.len);
            height
        }
    }

    fn remove(s: &mut RankedSet<u32>, x: u32) -> bool {
        s.remove_by(|e| e.cmp(&x)).is_some()
    }

    /// Compares everything the set answers with a sorted Vec.
    fn same(s: &RankedSet<u32>, model: &[u32], rng: &mut fastrand::Rng) {
        assert_eq!(s.len(), model.len());
        assert!(s.iter().eq(model.iter()));
        assert_eq!(s.first(), model.first());
        assert_eq!(s.last(), model.last());
        let top = model.last().map_or(10, |m| m + 10);
        for _ in 0..20 {
            let b = rng.u32(0..top);
            assert_eq!(s.rank_by(|x| *x < b), model.partition_point(|x| *x < b));
            let r = rng.usize(0..model.len() + 2);
            assert_eq!(s.get(r), model.get(r));
            let n = rng.usize(0..200);
            let fwd: Vec<u32> = s.iter_from(r, n, false).copied().collect();
            assert_eq!(fwd, model.iter().skip(r).take(n).copied().collect::<Vec<_>>());
            let back: Vec<u32> = s.iter_from(r, n, true).copied().collect();
            let want: Vec<u32> = if r < model.len() { model[..=r].iter().rev().take(n).copied().collect() } else { Vec::new() };
            assert_eq!(back, want);
        }
    }

    /// Random inserts and removes over values below `range`: mostly inserts for the first
    /// half, mostly removes after, checked against std's BTreeSet every `every` operations;
    /// the tree must reach `height` levels on the way.
    fn random_run(seed: u64, range: u32, ops: usize, every: usize, height: usize) {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut s = RankedSet::new();
        let mut model = std::collections::BTreeSet::new();
        let mut tallest = 0;
        for op in 0..ops {
            let mut x = rng.u32(0..range);
            let insert = if op < ops / 2 { rng.u8(0..10) < 7 } else { rng.u8(0..10) < 3 };
            if !insert && rng.bool() {
                // Half the removes hit: the next present value.
                x = model.range(x..).next().copied().unwrap_or(x);
            }
            if insert {
                assert_eq!(s.insert(x), model.insert(x), "insert {x}");
            } else {
                assert_eq!(remove(&mut s, x), model.remove(&x), "remove {x}");
            }
            if op % every == 0 || op == ops - 1 {
                tallest = tallest.max(s.check());
                let sorted: Vec<u32> = model.iter().copied().collect();
                same(&s, &sorted, &mut rng);
            }
        }
        assert!(tallest >= height, "the tree grew to height {tallest} only");
    }

    #[test]
    fn matches_std_btreeset_under_random_inserts_and_removes() {
        // Dense: many duplicates and re-inserts of removed values.
        random_run(7, 3_000, 40_000, 500, 2);
    }

    #[test]
    fn matches_std_btreeset_through_internal_splits_and_merges() {
        random_run(11, 1_000_000, 300_000, 10_000, 3);
    }

    /// The tallest a tree of `n` items can be when every non-root node is at least MIN wide:
    /// height h needs a root of two children and MIN-wide nodes below, 2 * MIN^(h-1) items.
    fn max_height(n: usize) -> usize {
        let mut h = 1;
        while 2 * MIN.pow(h as u32) <= n {
            h += 1;
        }
        h
    }

    #[test]
    fn stays_shallow_when_most_items_are_removed() {
        let mut s = RankedSet::new();
        for x in 0..200_000u32 {
            s.insert(x.wrapping_mul(2_654_435_761));
        }
        let tall = s.check();
        assert!(tall <= max_height(200_000), "height {tall} for 200,000 items");
        let mut kept: Vec<u32> = Vec::new();
        for x in 0..200_000u32 {
            let v = x.wrapping_mul(2_654_435_761);
            if x % 100 == 0 {
                kept.push(v);
            } else {
                assert!(remove(&mut s, v));
            }
        }
        kept.sort();
        let short = s.check();
        assert!(short <= max_height(2_000), "height {short} for 2,000 items");
        assert!(s.iter().eq(kept.iter()));
        // Removing everything leaves an empty leaf root.
        for v in kept {
            assert!(remove(&mut s, v));
        }
        assert_eq!(s.check(), 1);
        assert!(s.is_empty() && s.iter().next().is_none() && s.first().is_none());
    }

    #[test]
    fn a_small_set_is_one_small_leaf() {
        let mut s = RankedSet::new();
        s.insert(1u64);
        assert_eq!(s.check(), 1);
        assert!(s.heap_bytes() <= 4 * size_of::<u64>(), "{} bytes for one item", s.heap_bytes());
    }

    #[test]
    fn descending_iteration_crosses_leaves() {
        let mut s = RankedSet::new();
        for x in 0..10_000u32 {
            s.insert(x);
        }
        let all: Vec<u32> = s.iter_from(9_999, usize::MAX, true).copied().collect();
        assert_eq!(all, (0..10_000).rev().collect::<Vec<_>>());
        assert_eq!(s.iter_from(5_000, 3, true).copied().collect::<Vec<_>>(), vec![5_000, 4_999, 4_998]);
        assert_eq!(s.iter_from(10_000, 3, true).count(), 0);
    }
}
