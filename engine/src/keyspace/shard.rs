//! One shard of one database: a hash table of entries behind its own lock.
//!
//! Everything here runs with the shard's lock held: lookups with lazy expiry, inserts and
//! removals (which mark watched keys touched), sampling for eviction, and the incremental
//! sweep of the active expiry cycle.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use hashbrown::HashTable;

use super::entry::Entry;
use super::value::{hash_bytes, BytesMap};

/// Whether an entry with this expiry is expired at `now` (Redis: `now > when`).
#[inline]
pub fn is_expired(expire: Option<i64>, now: i64) -> bool {
    matches!(expire, Some(e) if now > e)
}

/// Bytes an entry adds: on the heap (the namespace's data bytes), and of its value in DRAM
/// (the PMem tier's DRAM budget).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footprint {
    heap: i64,
    dram_value: i64,
}

impl Footprint {
    fn of(e: &Entry) -> Footprint {
        // One walk of a collection (`heap_size`), the value's DRAM share derived from it.
        let heap = e.heap_size();
        let dram_value = if e.in_pmem() { 0 } else { heap - e.header_size() };
        Footprint { heap: heap as i64, dram_value: dram_value as i64 }
    }
    fn minus(self, o: Footprint) -> Footprint {
        Footprint { heap: self.heap - o.heap, dram_value: self.dram_value - o.dram_value }
    }
    fn neg(self) -> Footprint {
        Footprint::default().minus(self)
    }
}

/// Where a shard's byte counts go: its own tally and the shared counters.
#[derive(Default)]
struct Counting {
    tracked: Footprint,
    ns_bytes: Option<Arc<AtomicI64>>,
    dram_values: Option<Arc<AtomicI64>>,
}

impl Counting {
    fn add(&mut self, delta: Footprint) {
        if delta.heap != 0 {
            self.tracked.heap += delta.heap;
            if let Some(c) = &self.ns_bytes {
                c.fetch_add(delta.heap, Ordering::Relaxed);
            }
        }
        if delta.dram_value != 0 {
            self.tracked.dram_value += delta.dram_value;
            if let Some(c) = &self.dram_values {
                c.fetch_add(delta.dram_value, Ordering::Relaxed);
            }
        }
    }
}

#[derive(Default)]
pub struct Shard {
    table: HashTable<Entry>,
    /// Entries with an expiry set.
    pub volatile: usize,
    /// Watched keys: (watching clients, touch epoch).
    watched: BytesMap<(u32, u64)>,
    /// Bumped whenever an insert may reorganize the table (SCAN cursors restart the shard).
    pub layout_epoch: u32,
    /// Position of the active-expiry sweep.
    sweep_cursor: usize,
    pub expired_keys: u64,
    pub evicted_keys: u64,
    /// Counts modifications (every `touch`): read-through admits a value read from storage
    /// only if the shard did not change while it was read.
    pub mods: u64,
    /// The counters this shard adds to: its namespace's data bytes (tenant memory limits)
    /// and the DRAM value bytes (the PMem tier's budget).
    counting: Counting,
    /// Whether some client tracks keys (CLIENT TRACKING); shared by every shard.
    tracking: Arc<AtomicBool>,
    /// Keys changed while tracking is on, waiting to become invalidations: the command that
    /// holds the shard takes them when it commits (`Guards::take_invalidated`), the cron what
    /// background work left (`Keyspace::take_invalidated`).
    pub(super) invalidated: Vec<Vec<u8>>,
    /// Whether keyspace notifications are on (`notify-keyspace-events`), and whether a
    /// blocked client waits for a key's deletion (XREADGROUP); shared by every shard.
    notify: Arc<AtomicBool>,
    deletions: Arc<AtomicBool>,
    /// What happened to keys while notifications are on, in order: the command holding the
    /// shard takes them after its handler (`Guards::take_events`) and names the events.
    pub(super) events: Vec<(Happened, Vec<u8>)>,
    /// Whether replicas are fed (shared by every shard): keys this shard expires are then
    /// kept in `expired` until they are sent as DELs, under the lock, in order with writes.
    feeding: Arc<AtomicBool>,
    pub expired: Vec<Vec<u8>>,
    /// The slots being moved to another engine (shared by every shard): changed keys of
    /// theirs are kept in `moved` until the migration takes them (`Keyspace::take_moved`).
    moving: Arc<super::moving::Moving>,
    pub(super) moved: Vec<Vec<u8>>,
}

/// What happened to a key, for keyspace notifications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Happened {
    /// Written or removed by the command (the command names the event).
    Changed,
    /// Added: it did not exist before (`new`).
    Created,
    /// Removed because its time to live had passed (`expired`).
    Expired,
}

impl Shard {
    /// A shard whose entries count towards `ns_bytes` and, with a PMem tier, `dram_values`.
    pub fn counting_into(ns_bytes: Arc<AtomicI64>, dram_values: Option<Arc<AtomicI64>>) -> Shard {
        Shard { counting: Counting { ns_bytes: Some(ns_bytes), dram_values, ..Default::default() }, ..Default::default() }
    }

    /// The shard notes changed keys for CLIENT TRACKING while `tracking` is set, and what
    /// happened to keys for keyspace notifications while `notify` is.
    /// (and changed keys while `deletions` is, for blocked XREADGROUP clients).
    pub fn tracked_by(mut self, tracking: Arc<AtomicBool>, notify: Arc<AtomicBool>, deletions: Arc<AtomicBool>) -> Shard {
        self.tracking = tracking;
        self.notify = notify;
        self.deletions = deletions;
        self
    }

    /// Keys this shard expires are noted for replicas while `feeding` is set.
    pub fn feeding_into(mut self, feeding: Arc<AtomicBool>) -> Shard {
        self.feeding = feeding;
        self
    }

    /// Changed keys of slots being moved are noted in `moved` while `moving` says so.
    pub fn moving_with(mut self, moving: Arc<super::moving::Moving>) -> Shard {
        self.moving = moving;
        self
    }

    /// Notes every key of `table` in a moving slot (a FLUSHDB or SWAPDB changes them all).
    fn note_moved_all(&mut self, table: &HashTable<Entry>) {
        if self.moving.noting() {
            let moving = &self.moving;
            self.moved.extend(table.iter().map(|e| e.key()).filter(|k| moving.notes(k)).map(<[u8]>::to_vec));
        }
    }

    /// Notes an expired key for replicas (they delete it when the master says so).
    #[inline]
    fn note_expired(&mut self, key: &[u8]) {
        if self.feeding.load(Ordering::Relaxed) {
            self.expired.push(key.to_vec());
        }
    }

    /// Whether what happens to keys is noted (`events`).
    #[inline]
    fn noting(&self) -> bool {
        self.notify.load(Ordering::Relaxed) || self.deletions.load(Ordering::Relaxed)
    }

    /// Says that the last change noted for `key` was in fact `what` (None: nothing to tell,
    /// an eviction, which is told by the evicting code).
    fn renote(&mut self, key: &[u8], what: Option<Happened>) {
        if !self.noting() {
            return;
        }
        if self.events.last().is_some_and(|(h, k)| *h == Happened::Changed && k == key) {
            self.events.pop();
        }
        if let Some(what) = what {
            self.events.push((what, key.to_vec()));
        }
    }

    /// Takes the events noted (keyspace notifications).
    pub fn take_events(&mut self) -> Vec<(Happened, Vec<u8>)> {
        std::mem::take(&mut self.events)
    }

    /// Removes an evicted key: a change for tracking and WATCH, not an event the shard notes.
    pub fn evict(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.remove(key)?;
        self.renote(key, None);
        Some(e)
    }

    fn account(&mut self, delta: Footprint) {
        self.counting.add(delta);
    }

    /// Measures the shard's bytes exactly (collections grow in place between inserts) and
    /// corrects the counters. O(entries): the cron runs it a slice at a time.
    pub fn remeasure(&mut self) {
        let mut exact = Footprint::default();
        for e in self.table.iter() {
            let f = Footprint::of(e);
            exact.heap += f.heap;
            exact.dram_value += f.dram_value;
        }
        let tracked = self.counting.tracked;
        self.account(exact.minus(tracked));
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// Looks a key up without expiring it (expired entries are reported as absent).
    pub fn peek(&self, key: &[u8], now: i64) -> Option<&Entry> {
        self.table.find(hash_bytes(key), |e| e.key() == key).filter(|e| !is_expired(e.expire(), now))
    }

    /// Looks a key up, removing it first if it is expired (lazy expiry).
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        self.get_rewriting(key, now, |_| None)
    }

    /// As `get`, first letting `rewrite` replace the entry by another representation of the
    /// same value (as `rewrite` does: no WATCH touch, same expiry) — one lookup either way.
    /// A collection frozen in PMem is always thawed first: commands only see DRAM collections.
    pub fn get_rewriting(&mut self, key: &[u8], now: i64, rewrite: impl FnOnce(&mut Entry) -> Option<Entry>) -> Option<&mut Entry> {
        let h = hash_bytes(key);
        let expired = match self.table.find(h, |e| e.key() == key) {
            None => return None,
            Some(e) => is_expired(e.expire(), now),
        };
        if expired {
            self.remove(key);
            self.renote(key, Some(Happened::Expired));
            self.note_expired(key);
            self.expired_keys += 1;
            return None;
        }
        let slot = self.table.find_mut(h, |e| e.key() == key)?;
        if slot.in_pmem() && slot.kind() != super::Kind::Str {
            match crate::tier::thaw(slot) {
                Some(new) => {
                    let delta = Footprint::of(&new).minus(Footprint::of(slot));
                    *slot = new;
                    self.counting.add(delta);
                }
                None => {
                    // Only a memory error gets here (frozen values are checked when written
                    // and when a warm restart maps them): the value is gone, say so.
                    tracing::error!(key = %String::from_utf8_lossy(key), "a collection in PMem does not decode; the key is dropped");
                    self.remove(key);
                    return None;
                }
            }
        }
        let slot = self.table.find_mut(h, |e| e.key() == key)?;
        if let Some(new) = rewrite(slot) {
            let delta = Footprint::of(&new).minus(Footprint::of(slot));
            *slot = new;
            // `self.account` would borrow all of `self` while `slot` borrows the table.
            self.counting.add(delta);
        }
        Some(slot)
    }

    /// Inserts or replaces the entry for its key; returns the replaced entry.
    pub fn insert(&mut self, entry: Entry) -> Option<Entry> {
        let h = hash_bytes(entry.key());
        let added = Footprint::of(&entry);
        self.touch(entry.key());
        if entry.expire().is_some() {
            self.volatile += 1;
        }
        if self.table.len() == self.table.capacity() {
            self.layout_epoch = self.layout_epoch.wrapping_add(1);
        }
        let key_eq = |e: &Entry| e.key() == entry.key();
        match self.table.find_mut(h, key_eq) {
            Some(slot) => {
                let old = std::mem::replace(slot, entry);
                if old.expire().is_some() {
                    self.volatile -= 1;
                }
                self.account(added.minus(Footprint::of(&old)));
                Some(old)
            }
            None => {
                if self.notify.load(Ordering::Relaxed) {
                    self.events.push((Happened::Created, entry.key().to_vec()));
                }
                self.table.insert_unique(h, entry, |e| hash_bytes(e.key()));
                self.account(added);
                None
            }
        }
    }

    /// Replaces an entry by another representation of the same value (compressed or not):
    /// no WATCH touch, same expiry; only the byte accounting changes. The key must exist.
    pub fn rewrite(&mut self, new: Entry) {
        let h = hash_bytes(new.key());
        let added = Footprint::of(&new);
        if let Some(slot) = self.table.find_mut(h, |e| e.key() == new.key()) {
            debug_assert_eq!(slot.expire(), new.expire());
            let old = std::mem::replace(slot, new);
            self.account(added.minus(Footprint::of(&old)));
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        match self.table.find_entry(hash_bytes(key), |e| e.key() == key) {
            Ok(o) => {
                let (e, _) = o.remove();
                if e.expire().is_some() {
                    self.volatile -= 1;
                }
                self.account(Footprint::of(&e).neg());
                self.touch(key);
                Some(e)
            }
            Err(_) => None,
        }
    }

    /// Removes an entry the running command created and left empty: nothing observable
    /// happened to the key (no WATCH touch, no tracking invalidation, no event).
    pub fn discard(&mut self, key: &[u8]) {
        let Ok(o) = self.table.find_entry(hash_bytes(key), |e| e.key() == key) else { return };
        let (e, _) = o.remove();
        if e.expire().is_some() {
            self.volatile -= 1;
        }
        self.account(Footprint::of(&e).neg());
        if let Some(i) = self.events.iter().rposition(|(h, k)| *h == Happened::Created && k == key) {
            self.events.remove(i);
        }
    }

    /// Sets an entry's dirty bit (a write-back write) and returns it unless it is expired, in
    /// one lookup; not a modification.
    pub fn mark_dirty(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        let e = self.table.find_mut(hash_bytes(key), |e| e.key() == key)?;
        e.set_dirty(true);
        Some(&*e).filter(|e| !is_expired(e.expire(), now))
    }

    /// Changes an entry's expiry keeping the volatile count right. The key must exist.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>) {
        let h = hash_bytes(key);
        if let Some(e) = self.table.find_mut(h, |e| e.key() == key) {
            let had = e.expire().is_some();
            e.set_expire(expire);
            match (had, expire.is_some()) {
                (false, true) => self.volatile += 1,
                (true, false) => self.volatile -= 1,
                _ => {}
            }
        }
        self.touch(key);
    }

    /// Marks a key modified for WATCH.
    #[inline]
    pub fn touch(&mut self, key: &[u8]) {
        self.mods = self.mods.wrapping_add(1);
        if self.moving.notes(key) {
            self.moved.push(key.to_vec());
        }
        if self.tracking.load(Ordering::Relaxed) {
            self.invalidated.push(key.to_vec());
        }
        if self.noting() {
            self.events.push((Happened::Changed, key.to_vec()));
        }
        if !self.watched.is_empty() {
            if let Some((_, epoch)) = self.watched.get_mut(key) {
                *epoch += 1;
            }
        }
    }

    /// Marks the watched keys `present` says the flush or swap affects modified (FLUSHDB,
    /// SWAPDB): as Redis, only keys that were there (or are brought in), so a WATCH on a
    /// missing key survives a FLUSHALL.
    fn touch_watched(&mut self, present: impl Fn(&[u8]) -> bool) {
        if self.watched.is_empty() {
            return;
        }
        let keys: Vec<Box<[u8]>> = self.watched.iter().map(|(k, _)| k.clone()).filter(|k| present(k)).collect();
        for k in keys {
            if let Some((_, e)) = self.watched.get_mut(&k) {
                *e += 1;
            }
        }
    }

    /// Pulls the slots and entries a lookup of hash `h` would read into the CPU cache
    /// (`Keyspace::prefetch`).
    pub fn prefetch(&self, h: u64) {
        self.table.find(h, |e| {
            e.prefetch();
            false
        });
    }

    fn holds(table: &HashTable<Entry>, key: &[u8]) -> bool {
        table.find(hash_bytes(key), |e| e.key() == key).is_some()
    }

    /// Registers a watcher; returns the key's current touch epoch.
    pub fn watch(&mut self, key: &[u8]) -> u64 {
        if let Some((n, e)) = self.watched.get_mut(key) {
            *n += 1;
            return *e;
        }
        self.watched.insert(key, (1, 0));
        0
    }

    pub fn unwatch(&mut self, key: &[u8]) {
        let drop_it = match self.watched.get_mut(key) {
            Some((n, _)) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if drop_it {
            self.watched.remove(key);
            if self.watched.is_empty() {
                self.watched = BytesMap::new();
            }
        }
    }

    pub fn watch_epoch(&self, key: &[u8]) -> u64 {
        self.watched.get(key).map(|(_, e)| *e).unwrap_or(0)
    }

    /// Drops every entry (FLUSHDB); watched keys are touched.
    pub fn clear(&mut self) -> HashTable<Entry> {
        let table = std::mem::take(&mut self.table);
        self.touch_watched(|k| Self::holds(&table, k));
        self.note_moved_all(&table);
        self.table = table;
        self.volatile = 0;
        self.layout_epoch = self.layout_epoch.wrapping_add(1);
        let tracked = self.counting.tracked;
        self.account(tracked.neg());
        std::mem::take(&mut self.table)
    }

    /// Exchanges the data (not the watchers) of two shards, for SWAPDB.
    pub fn swap_data(&mut self, other: &mut Shard) {
        // A watched key is touched if it is in either database (it goes, or comes in).
        let (mine, theirs) = (std::mem::take(&mut self.table), std::mem::take(&mut other.table));
        self.touch_watched(|k| Self::holds(&mine, k) || Self::holds(&theirs, k));
        other.touch_watched(|k| Self::holds(&mine, k) || Self::holds(&theirs, k));
        for t in [&mine, &theirs] {
            self.note_moved_all(t);
            other.note_moved_all(t);
        }
        (self.table, other.table) = (theirs, mine);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
        // Each shard's counter follows its new data (SWAPDB stays within a namespace).
        let (mine, theirs) = (self.counting.tracked, other.counting.tracked);
        self.account(theirs.minus(mine));
        other.account(mine.minus(theirs));
        self.layout_epoch = self.layout_epoch.wrapping_add(1);
        other.layout_epoch = other.layout_epoch.wrapping_add(1);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter()
    }

    pub fn num_buckets(&self) -> usize {
        self.table.num_buckets()
    }

    pub fn bucket(&self, idx: usize) -> Option<&Entry> {
        self.table.get_bucket(idx)
    }

    /// A random entry (uniform over occupied buckets), for RANDOMKEY and eviction sampling.
    pub fn random_entry(&self) -> Option<&Entry> {
        self.random_bucket().and_then(|i| self.bucket(i))
    }

    /// The bucket of a random entry (None: the shard is empty).
    pub fn random_bucket(&self) -> Option<usize> {
        if self.table.is_empty() {
            return None;
        }
        let n = self.table.num_buckets();
        // Load factor is at least 1/8 after growth; bound the probes anyway.
        for _ in 0..n.max(64) {
            let i = fastrand::usize(..n);
            if self.table.get_bucket(i).is_some() {
                return Some(i);
            }
        }
        (0..n).find(|&i| self.table.get_bucket(i).is_some())
    }

    /// Clears the dirty bit of the entry in bucket `idx` (one write-back found flushed).
    pub fn clear_dirty_at(&mut self, idx: usize) {
        if let Some(e) = self.table.get_bucket_mut(idx) {
            e.set_dirty(false);
        }
    }

    /// Sweeps up to `budget` buckets removing expired entries; returns (examined, expired).
    pub fn sweep_expired(&mut self, budget: usize, now: i64) -> (usize, usize) {
        if self.volatile == 0 || self.table.is_empty() {
            return (0, 0);
        }
        let n = self.table.num_buckets();
        let mut examined = 0;
        let mut expired = 0;
        for _ in 0..budget.min(n) {
            let idx = self.sweep_cursor % n;
            self.sweep_cursor = (idx + 1) % n;
            let dead = match self.table.get_bucket(idx) {
                Some(e) => {
                    examined += 1;
                    is_expired(e.expire(), now)
                }
                None => false,
            };
            if dead {
                if let Ok(o) = self.table.get_bucket_entry(idx) {
                    let (e, _) = o.remove();
                    self.volatile -= 1;
                    self.expired_keys += 1;
                    self.account(Footprint::of(&e).neg());
                    expired += 1;
                    let key = e.key().to_vec();
                    drop(e);
                    self.touch(&key);
                    self.renote(&key, Some(Happened::Expired));
                    self.note_expired(&key);
                }
            }
        }
        (examined, expired)
    }

    /// Gives memory back after many deletions.
    pub fn maybe_shrink(&mut self) {
        let cap = self.table.capacity();
        if cap > 1024 && self.table.len() * 8 < cap {
            self.table.shrink_to_fit(|e| hash_bytes(e.key()));
            self.layout_epoch = self.layout_epoch.wrapping_add(1);
        }
    }

    pub fn table_bytes(&self) -> usize {
        self.table.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_bytes_follow_inserts_removals_and_flushes() {
        use crate::keyspace::{Collection, Meta};
        let counter = Arc::new(AtomicI64::new(0));
        let mut s = Shard::counting_into(counter.clone(), None);
        let meta = Meta { expire: None, flags: 0, version: 1, access: 0 };
        let a = Entry::new_str(b"a", &[0u8; 100], &meta);
        let a_size = a.heap_size() as i64;
        s.insert(a);
        assert_eq!(counter.load(Ordering::Relaxed), a_size);
        let a2 = Entry::new_str(b"a", &[0u8; 300], &meta);
        let a2_size = a2.heap_size() as i64;
        s.insert(a2);
        assert_eq!(counter.load(Ordering::Relaxed), a2_size, "a replaced entry gives its bytes back");
        // A collection growing in place is caught by re-measuring.
        s.insert(Entry::new_coll(b"l", Collection::List(Default::default()), &meta));
        let list_entry = s.get(b"l", 0).unwrap();
        if let Some(Collection::List(l)) = list_entry.coll_mut() {
            for _ in 0..100 {
                l.push_back(vec![7u8; 50].into_boxed_slice());
            }
        }
        let before = counter.load(Ordering::Relaxed);
        s.remeasure();
        let exact: i64 = s.iter().map(|e| e.heap_size() as i64).sum();
        assert!(counter.load(Ordering::Relaxed) > before);
        assert_eq!(counter.load(Ordering::Relaxed), exact);
        s.remove(b"a");
        s.clear();
        assert_eq!(counter.load(Ordering::Relaxed), 0);
    }
    use crate::keyspace::entry::Meta;

    fn entry(k: &str, exp: Option<i64>) -> Entry {
        Entry::new_str(k.as_bytes(), b"v", &Meta { expire: exp, flags: 0, version: 1, access: 0 })
    }

    #[test]
    fn lazy_expiry_and_volatile_count() {
        let mut s = Shard::default();
        s.insert(entry("a", Some(100)));
        s.insert(entry("b", None));
        assert_eq!(s.volatile, 1);
        assert!(s.get(b"a", 100).is_some(), "expires strictly after its time");
        assert!(s.get(b"a", 101).is_none());
        assert_eq!((s.len(), s.volatile, s.expired_keys), (1, 0, 1));
        s.set_expire(b"b", Some(5));
        assert_eq!(s.volatile, 1);
        assert_eq!(s.sweep_expired(1000, 10), (1, 1));
        assert!(s.is_empty());
    }

    #[test]
    fn watch_epochs_move_on_every_change() {
        let mut s = Shard::default();
        let e0 = s.watch(b"k");
        s.insert(entry("k", None));
        let e1 = s.watch_epoch(b"k");
        assert_ne!(e0, e1);
        s.remove(b"k");
        assert_ne!(e1, s.watch_epoch(b"k"));
        s.unwatch(b"k");
        assert_eq!(s.watch_epoch(b"k"), 0);
    }
}
