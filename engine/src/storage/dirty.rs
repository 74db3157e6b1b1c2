//! Write-back bookkeeping: the cached keys storage has not caught up with.
//!
//! A write to a write-back tenant marks its keys here (under the command's shard locks) and
//! sets their entries' dirty bit; a key deleted in the cache stays marked, so its deletion is
//! flushed too. The flusher takes keys in the order they became dirty, writes each key's
//! current value, and clears a key only if nothing wrote it meanwhile (its generation is
//! unchanged); a key written during its flush goes back in line. While a key is marked the
//! cache is the truth for it: read-through must not fetch it from storage.
//!
//! This set is the truth; an entry's dirty bit is a hint that the flusher leaves set. Eviction,
//! finding the bit, asks this set (under the shard's lock, which every marking write holds)
//! and clears the bit if the key is no longer marked.
//!
//! Lock order: a shard's lock, then this set's.

use std::collections::{BTreeMap, HashMap, VecDeque};

use parking_lot::Mutex;

use super::tier::CacheKey;

struct Marked {
    /// Bumped by every write; the flusher clears the key only if it is unchanged.
    generation: u64,
    /// What the key counts towards `dirty_max`.
    bytes: usize,
    /// WAL sequence number of the write that made it dirty (0: no WAL).
    since: u64,
    /// In `order` (false while the flusher has it).
    queued: bool,
}

#[derive(Default)]
struct Inner {
    keys: HashMap<CacheKey, Marked, foldhash::fast::RandomState>,
    order: VecDeque<CacheKey>,
    bytes: usize,
    generation: u64,
    /// How many marked keys became dirty at each WAL sequence number.
    since: BTreeMap<u64, usize>,
}

impl Inner {
    /// After `taken` was written: true if the key is clean now (nothing wrote it meanwhile);
    /// otherwise it is back in line.
    fn flushed(&mut self, taken: &Taken) -> bool {
        let Some(m) = self.keys.get_mut(&taken.key) else {
            return true;
        };
        if m.generation != taken.generation {
            if !m.queued {
                m.queued = true;
                self.order.push_back(taken.key.clone());
            }
            return false;
        }
        self.unmark(&taken.key);
        true
    }

    fn unmark(&mut self, key: &CacheKey) {
        let Some(m) = self.keys.remove(key) else { return };
        self.bytes -= m.bytes;
        if let std::collections::btree_map::Entry::Occupied(mut o) = self.since.entry(m.since) {
            *o.get_mut() -= 1;
            if *o.get() == 0 {
                o.remove();
            }
        }
    }
}

/// A key the flusher took, with the generation it saw.
pub struct Taken {
    pub key: CacheKey,
    pub generation: u64,
}

#[derive(Default)]
pub struct DirtySet {
    inner: Mutex<Inner>,
}

impl DirtySet {
    /// Marks `key` dirty with a value of about `bytes`, written at WAL position `seq`; returns
    /// how many keys are marked.
    pub fn mark(&self, key: &CacheKey, bytes: usize, seq: u64) -> usize {
        let mut s = self.inner.lock();
        s.generation += 1;
        let generation = s.generation;
        let bytes = bytes + key.1.len();
        match s.keys.get_mut(key) {
            Some(m) => {
                m.generation = generation;
                let old = std::mem::replace(&mut m.bytes, bytes);
                let requeue = !m.queued;
                m.queued = true;
                s.bytes = s.bytes - old + bytes;
                if requeue {
                    s.order.push_back(key.clone());
                }
            }
            None => {
                s.keys.insert(key.clone(), Marked { generation, bytes, since: seq, queued: true });
                s.order.push_back(key.clone());
                s.bytes += bytes;
                *s.since.entry(seq).or_default() += 1;
            }
        }
        s.keys.len()
    }

    /// Forgets every marked key (a replica's keyspace was replaced by its master's: what it
    /// had not flushed is not its to flush).
    pub fn clear(&self) {
        *self.inner.lock() = Inner::default();
    }

    /// Unmarks `key` whatever wrote it (a replica: its master flushed the key).
    pub fn forget(&self, key: &CacheKey) {
        self.inner.lock().unmark(key);
    }

    /// Unmarks every key of databases `dbs` (their namespace was dropped: nothing of it is
    /// to be flushed).
    pub fn forget_dbs(&self, dbs: std::ops::Range<usize>) {
        let mut s = self.inner.lock();
        let gone: Vec<CacheKey> = s.keys.keys().filter(|(db, _)| dbs.contains(db)).cloned().collect();
        for key in &gone {
            s.unmark(key);
        }
    }

    pub fn contains(&self, key: &CacheKey) -> bool {
        let s = self.inner.lock();
        !s.keys.is_empty() && s.keys.contains_key(key)
    }

    /// (keys, bytes) marked.
    pub fn size(&self) -> (usize, usize) {
        let s = self.inner.lock();
        (s.keys.len(), s.bytes)
    }

    /// Up to `max` keys in the order they became dirty, for the flusher.
    pub fn take(&self, max: usize) -> Vec<Taken> {
        let mut s = self.inner.lock();
        let mut out = Vec::with_capacity(max.min(s.order.len()));
        while out.len() < max {
            let Some(key) = s.order.pop_front() else {
                break;
            };
            if let Some(m) = s.keys.get_mut(&key) {
                m.queued = false;
                out.push(Taken { generation: m.generation, key });
            }
        }
        out
    }

    /// One key's `flushed_all`, with its answer: whether the key is clean now.
    pub fn flushed(&self, taken: &Taken) -> bool {
        self.inner.lock().flushed(taken)
    }

    /// `flushed` for a whole written batch, under one lock.
    pub fn flushed_all(&self, taken: &[Taken]) {
        let mut s = self.inner.lock();
        for t in taken {
            s.flushed(t);
        }
    }

    /// After a failed write: the keys go back to the front of the line, in their order.
    pub fn failed(&self, taken: Vec<Taken>) {
        let mut s = self.inner.lock();
        for t in taken.into_iter().rev() {
            if let Some(m) = s.keys.get_mut(&t.key) {
                if !m.queued {
                    m.queued = true;
                    s.order.push_front(t.key);
                }
            }
        }
    }

    /// The WAL position below which every write-back record is in storage: the oldest
    /// marked key's, less one (None: nothing is dirty).
    pub fn oldest_since(&self) -> Option<u64> {
        self.inner.lock().since.keys().next().copied()
    }

    /// Every marked key (a checkpoint logs their values again).
    pub fn keys(&self) -> Vec<CacheKey> {
        self.inner.lock().keys.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> CacheKey {
        (0, s.as_bytes().to_vec())
    }

    #[test]
    fn a_key_written_during_its_flush_stays_dirty_and_requeues() {
        let d = DirtySet::default();
        d.mark(&k("a"), 10, 5);
        d.mark(&k("b"), 20, 6);
        assert_eq!(d.size(), (2, 32));
        let taken = d.take(10);
        assert_eq!(taken.len(), 2);
        assert!(d.take(10).is_empty(), "taken keys are not handed out twice");
        d.mark(&k("a"), 30, 7);
        assert!(!d.flushed(&taken[0]), "written meanwhile");
        assert!(d.flushed(&taken[1]));
        assert_eq!(d.size(), (1, 31));
        assert_eq!(d.oldest_since(), Some(5), "a is dirty since its first unflushed write");
        let again = d.take(10);
        assert_eq!(again.len(), 1);
        assert!(d.flushed(&again[0]));
        assert_eq!(d.size(), (0, 0));
        assert_eq!(d.oldest_since(), None);
    }

    #[test]
    fn failed_keys_go_back_to_the_front_in_order() {
        let d = DirtySet::default();
        for (i, s) in ["a", "b", "c"].iter().enumerate() {
            d.mark(&k(s), 1, i as u64);
        }
        let first = d.take(2);
        d.failed(first);
        let order: Vec<_> = d.take(3).into_iter().map(|t| t.key.1).collect();
        assert_eq!(order, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    }
}
