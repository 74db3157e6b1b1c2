//! The stream value: entries ordered by ID, consumer groups with their pending entries lists,
//! and the bookkeeping Redis 7.0 reports (first/last/max-deleted IDs, entries added).
//!
//! Entries live in a B-tree keyed by ID. Beside it the stream keeps the boundaries of the
//! "nodes" Redis packs entries into (at most 100 entries or ~4 KB each): approximate trimming
//! (`MAXLEN ~`, `MINID ~`) removes whole nodes only, exactly as Redis does, so `~` behaves the
//! same for clients that rely on it being cheap and conservative.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use super::value::Bytes;

/// Entries per node and approximate bytes per node before a new node starts
/// (Redis's `stream-node-max-entries` and `stream-node-max-bytes` defaults).
pub const NODE_MAX_ENTRIES: u32 = 100;
pub const NODE_MAX_BYTES: u32 = 4096;

/// A stream entry ID: milliseconds and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const ZERO: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId { ms: u64::MAX, seq: u64::MAX };

    pub fn new(ms: u64, seq: u64) -> Self {
        StreamId { ms, seq }
    }
    /// The next ID, or None at the maximum.
    pub fn incr(self) -> Option<StreamId> {
        if self.seq < u64::MAX {
            Some(StreamId::new(self.ms, self.seq + 1))
        } else if self.ms < u64::MAX {
            Some(StreamId::new(self.ms + 1, 0))
        } else {
            None
        }
    }
    /// The previous ID, or None at zero.
    pub fn decr(self) -> Option<StreamId> {
        if self.seq > 0 {
            Some(StreamId::new(self.ms, self.seq - 1))
        } else if self.ms > 0 {
            Some(StreamId::new(self.ms - 1, u64::MAX))
        } else {
            None
        }
    }
    pub fn is_zero(self) -> bool {
        self == StreamId::ZERO
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Marker for a consumer group whose read counter is unknown.
pub const INVALID_ENTRIES_READ: i64 = -1;

/// One delivered, not yet acknowledged entry of a consumer group.
#[derive(Clone, Debug)]
pub struct Pending {
    pub consumer: Bytes,
    pub delivery_time: i64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Consumer {
    pub seen_time: i64,
    pub pel: BTreeSet<StreamId>,
}

#[derive(Clone, Debug)]
pub struct Group {
    pub last_id: StreamId,
    pub entries_read: i64,
    pub pel: BTreeMap<StreamId, Pending>,
    pub consumers: BTreeMap<Bytes, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// The consumer, created if missing; its seen time is refreshed. Returns whether it was
    /// created.
    pub fn touch_consumer(&mut self, name: &[u8], now: i64) -> bool {
        let created = !self.consumers.contains_key(name);
        self.consumers.entry(name.into()).or_default().seen_time = now;
        created
    }

    /// Removes an ID from the group's PEL and its consumer's; true if it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        match self.pel.remove(&id) {
            Some(p) => {
                if let Some(c) = self.consumers.get_mut(&p.consumer) {
                    c.pel.remove(&id);
                }
                true
            }
            None => false,
        }
    }

    /// Gives a pending entry to `consumer` (creating the PEL entry if missing).
    pub fn assign(&mut self, id: StreamId, consumer: &[u8], delivery_time: i64, delivery_count: u64) {
        if let Some(old) = self.pel.get(&id) {
            if &*old.consumer != consumer {
                let prev = old.consumer.clone();
                if let Some(c) = self.consumers.get_mut(&prev) {
                    c.pel.remove(&id);
                }
            }
        }
        self.pel.insert(id, Pending { consumer: consumer.into(), delivery_time, delivery_count });
        self.consumers.entry(consumer.into()).or_default().pel.insert(id);
    }

    /// Deletes a consumer and its pending entries; returns how many were pending.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let c = self.consumers.remove(name)?;
        for id in &c.pel {
            self.pel.remove(id);
        }
        Some(c.pel.len())
    }

    fn heap_size(&self) -> usize {
        self.pel.len() * 64
            + self.pel.values().map(|p| p.consumer.len()).sum::<usize>()
            + self.consumers.iter().map(|(n, c)| n.len() + 48 + c.pel.len() * 24).sum::<usize>()
    }
}

/// Boundaries of one node: the IDs it was given, and how many of them are still live.
#[derive(Clone, Debug)]
struct Node {
    first: StreamId,
    last: StreamId,
    live: u32,
    slots: u32,
    bytes: u32,
}

/// How a trim decides what goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    MaxLen(u64),
    MinId(StreamId),
}

/// An entry's ID and its field-value list.
pub type StreamEntry<'a> = (StreamId, &'a [Bytes]);

#[derive(Clone, Debug, Default)]
pub struct Stream {
    entries: BTreeMap<StreamId, Box<[Bytes]>>,
    nodes: VecDeque<Node>,
    pub last_id: StreamId,
    /// The first entry's ID as recorded (XINFO's recorded-first-entry-id).
    pub first_id: StreamId,
    pub max_deleted: StreamId,
    pub entries_added: u64,
    pub groups: BTreeMap<Bytes, Group>,
}

/// Why an append failed.
#[derive(Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not greater than the stream's last ID.
    NotGreater,
}

impl Stream {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, id: StreamId) -> Option<&[Bytes]> {
        self.entries.get(&id).map(|f| &**f)
    }
    pub fn contains(&self, id: StreamId) -> bool {
        self.entries.contains_key(&id)
    }

    /// Entries with IDs in `[start, end]`, ascending or descending.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Box<dyn Iterator<Item = (&StreamId, &[Bytes])> + '_> {
        if start > end {
            return Box::new(std::iter::empty());
        }
        let r = self.entries.range(start..=end).map(|(id, f)| (id, &**f));
        if rev {
            Box::new(r.rev())
        } else {
            Box::new(r)
        }
    }

    pub fn first_entry(&self) -> Option<(&StreamId, &[Bytes])> {
        self.entries.iter().next().map(|(id, f)| (id, &**f))
    }
    pub fn last_entry(&self) -> Option<(&StreamId, &[Bytes])> {
        self.entries.iter().next_back().map(|(id, f)| (id, &**f))
    }

    /// The ID of the last live entry, or zero when empty.
    pub fn last_valid_id(&self) -> StreamId {
        self.entries.keys().next_back().copied().unwrap_or_default()
    }

    /// Appends an entry. `id` None means auto-generate from `now_ms`; `Some((id, seq_given))`
    /// with `seq_given == false` means `ms-*` (sequence chosen here).
    pub fn append(&mut self, fields: Box<[Bytes]>, id: Option<(StreamId, bool)>, now_ms: u64) -> Result<StreamId, AppendError> {
        let last = self.last_id;
        let new_id = match id {
            None => {
                if now_ms > last.ms {
                    StreamId::new(now_ms, 0)
                } else {
                    last.incr().ok_or(AppendError::NotGreater)?
                }
            }
            Some((id, true)) => id,
            Some((id, false)) => {
                if id.ms == last.ms {
                    if last.seq == u64::MAX {
                        return Err(AppendError::NotGreater);
                    }
                    StreamId::new(id.ms, last.seq + 1)
                } else {
                    StreamId::new(id.ms, 0)
                }
            }
        };
        if new_id <= last {
            return Err(AppendError::NotGreater);
        }
        let bytes: u32 = fields.iter().map(|f| f.len() as u32 + 2).sum::<u32>() + 8;
        match self.nodes.back_mut() {
            Some(n) if n.slots < NODE_MAX_ENTRIES && n.bytes.saturating_add(bytes) < NODE_MAX_BYTES => {
                n.last = new_id;
                n.live += 1;
                n.slots += 1;
                n.bytes += bytes;
            }
            _ => self.nodes.push_back(Node { first: new_id, last: new_id, live: 1, slots: 1, bytes: bytes + 16 }),
        }
        self.entries.insert(new_id, fields);
        if self.entries.len() == 1 {
            self.first_id = new_id;
        }
        self.last_id = new_id;
        self.entries_added += 1;
        Ok(new_id)
    }

    fn node_index(&self, id: StreamId) -> Option<usize> {
        let i = self.nodes.partition_point(|n| n.first <= id);
        i.checked_sub(1)
    }

    /// Removes one entry, keeping node bookkeeping; true if it existed.
    fn remove_entry(&mut self, id: StreamId) -> bool {
        if self.entries.remove(&id).is_none() {
            return false;
        }
        if let Some(i) = self.node_index(id) {
            let n = &mut self.nodes[i];
            n.live -= 1;
            if n.live == 0 {
                self.nodes.remove(i);
            }
        }
        true
    }

    /// XDEL of one ID: removes it, records the max deleted ID; true if it existed.
    pub fn delete(&mut self, id: StreamId) -> bool {
        if !self.remove_entry(id) {
            return false;
        }
        if id > self.max_deleted {
            self.max_deleted = id;
        }
        true
    }

    /// Re-records the first entry's ID after deletions.
    pub fn refresh_first_id(&mut self) {
        self.first_id = self.entries.keys().next().copied().unwrap_or_default();
    }

    /// Trims from the head. `approx` removes whole nodes only; `limit` (0 = none) caps the
    /// entries removed. Returns the number removed.
    pub fn trim(&mut self, strategy: TrimStrategy, approx: bool, limit: u64) -> u64 {
        let mut deleted = 0u64;
        while let Some(n) = self.nodes.front() {
            if let TrimStrategy::MaxLen(max) = strategy {
                if self.entries.len() as u64 <= max {
                    break;
                }
            }
            let live = n.live as u64;
            if limit > 0 && deleted + live > limit {
                break;
            }
            let remove_node = match strategy {
                TrimStrategy::MaxLen(max) => self.entries.len() as u64 - live >= max,
                TrimStrategy::MinId(min) => n.last < min,
            };
            if remove_node {
                let (first, last) = (n.first, n.last);
                let ids: Vec<StreamId> = self.entries.range(first..=last).map(|(id, _)| *id).collect();
                for id in ids {
                    self.entries.remove(&id);
                }
                self.nodes.pop_front();
                deleted += live;
                continue;
            }
            if approx {
                break;
            }
            // Exact trimming inside the head node.
            while let Some((&id, _)) = self.entries.iter().next() {
                let go = match strategy {
                    TrimStrategy::MaxLen(max) => self.entries.len() as u64 > max,
                    TrimStrategy::MinId(min) => id < min,
                };
                if !go {
                    break;
                }
                self.remove_entry(id);
                deleted += 1;
            }
            break;
        }
        if deleted > 0 {
            self.refresh_first_id();
        }
        deleted
    }

    /// Whether a deleted entry (tombstone) may lie in `[start, end]`.
    pub fn range_has_tombstones(&self, start: StreamId, end: StreamId) -> bool {
        if self.max_deleted.is_zero() {
            return false;
        }
        start <= self.max_deleted && self.max_deleted <= end
    }

    /// The logical read counter of an ID (its distance from the first entry ever added), if
    /// it can be known (Redis's streamEstimateDistanceFromFirstEverEntry).
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        if self.entries_added == 0 {
            return 0;
        }
        if self.entries.is_empty() && id <= self.last_id {
            return self.entries_added as i64;
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return self.entries_added as i64,
            std::cmp::Ordering::Greater => return INVALID_ENTRIES_READ,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted.is_zero() || self.max_deleted < self.first_id {
            let len = self.entries.len() as i64;
            match id.cmp(&self.first_id) {
                std::cmp::Ordering::Less => return self.entries_added as i64 - len,
                std::cmp::Ordering::Equal => return self.entries_added as i64 - len + 1,
                std::cmp::Ordering::Greater => {}
            }
        }
        INVALID_ENTRIES_READ
    }

    /// A group's lag, or None when it cannot be known.
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_ENTRIES_READ && !self.range_has_tombstones(g.last_id, StreamId::MAX) {
            return Some(self.entries_added as i64 - g.entries_read);
        }
        let read = self.estimate_distance(g.last_id);
        (read != INVALID_ENTRIES_READ).then(|| self.entries_added as i64 - read)
    }

    /// Advances a group past a delivered ID, keeping its read counter as Redis does.
    pub fn advance_group(&mut self, group: &[u8], id: StreamId) {
        let est = self.estimate_distance(id);
        let (first_id, added) = (self.first_id, self.entries_added);
        let tomb = self.groups.get(group).map(|g| self.range_has_tombstones(g.last_id, StreamId::MAX)).unwrap_or(false);
        let Some(g) = self.groups.get_mut(group) else { return };
        if id <= g.last_id {
            return;
        }
        if g.entries_read != INVALID_ENTRIES_READ && g.last_id >= first_id && !tomb {
            g.entries_read += 1;
        } else if added > 0 {
            g.entries_read = est;
        }
        g.last_id = id;
    }

    /// The live entries grouped by node, each with the node's first ID (its "master" ID in
    /// Redis's listpacks); empty nodes are left out. For RDB serialization.
    pub fn nodes_with_entries(&self) -> Vec<(StreamId, Vec<StreamEntry<'_>>)> {
        self.nodes
            .iter()
            .map(|n| (n.first, self.entries.range(n.first..=n.last).map(|(id, f)| (*id, &**f)).collect::<Vec<_>>()))
            .filter(|(_, e)| !e.is_empty())
            .collect()
    }

    /// Number of nodes (XINFO's radix-tree-keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    pub fn heap_size(&self) -> usize {
        self.entries.values().map(|f| 48 + f.len() * 16 + f.iter().map(|b| b.len()).sum::<usize>()).sum::<usize>()
            + self.nodes.len() * std::mem::size_of::<Node>()
            + self.groups.iter().map(|(n, g)| n.len() + 96 + g.heap_size()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Box<[Bytes]> {
        vec![Bytes::from(&b"f"[..]), Bytes::from(&b"v"[..])].into_boxed_slice()
    }

    #[test]
    fn ids_are_monotonic_and_explicit_ids_checked() {
        let mut s = Stream::default();
        let a = s.append(fields(), None, 1000).unwrap();
        assert_eq!(a, StreamId::new(1000, 0));
        let b = s.append(fields(), None, 999).unwrap();
        assert_eq!(b, StreamId::new(1000, 1));
        assert_eq!(s.append(fields(), Some((StreamId::new(1000, 1), true)), 0), Err(AppendError::NotGreater));
        let c = s.append(fields(), Some((StreamId::new(1000, 0), false)), 0).unwrap();
        assert_eq!(c, StreamId::new(1000, 2));
        assert_eq!(s.entries_added, 3);
        assert_eq!(StreamId::new(5, u64::MAX).incr(), Some(StreamId::new(6, 0)));
        assert_eq!(StreamId::ZERO.decr(), None);
    }

    #[test]
    fn approximate_trim_removes_whole_nodes_only() {
        let mut s = Stream::default();
        for i in 0..250u64 {
            s.append(fields(), Some((StreamId::new(i + 1, 0), true)), 0).unwrap();
        }
        assert_eq!(s.node_count(), 3);
        // 10 entries over the limit is less than a node: nothing goes.
        assert_eq!(s.trim(TrimStrategy::MaxLen(240), true, 0), 0);
        assert_eq!(s.trim(TrimStrategy::MaxLen(120), true, 0), 100);
        assert_eq!(s.len(), 150);
        assert_eq!(s.trim(TrimStrategy::MaxLen(120), false, 0), 30);
        assert_eq!(s.len(), 120);
        assert_eq!(s.first_id, StreamId::new(131, 0));
        assert_eq!(s.trim(TrimStrategy::MinId(StreamId::new(200, 0)), false, 0), 69);
        assert_eq!(s.first_entry().unwrap().0, &StreamId::new(200, 0));
    }

    #[test]
    fn delete_tracks_tombstones_and_read_counters() {
        let mut s = Stream::default();
        for i in 1..=3u64 {
            s.append(fields(), Some((StreamId::new(i, 0), true)), 0).unwrap();
        }
        s.groups.insert(b"g"[..].into(), Group::new(StreamId::ZERO, INVALID_ENTRIES_READ));
        assert_eq!(s.lag(&s.groups[&b"g"[..]]), Some(3));
        assert!(s.delete(StreamId::new(2, 0)));
        assert!(!s.delete(StreamId::new(2, 0)));
        assert_eq!(s.max_deleted, StreamId::new(2, 0));
        assert_eq!(s.lag(&s.groups[&b"g"[..]]), None);
        s.advance_group(b"g", StreamId::new(3, 0));
        assert_eq!(s.groups[&b"g"[..]].entries_read, 3);
        assert_eq!(s.lag(&s.groups[&b"g"[..]]), Some(0));
    }
}
