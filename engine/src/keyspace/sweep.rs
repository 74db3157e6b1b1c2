//! Point-in-time sweeps of the keyspace without holding it: a snapshot's image of one
//! instant while writes go on.
//!
//! A sweep starts while its maker holds every shard (the instant: nothing is half-written,
//! and the replication stream's offset or the log's position is taken then). From then on
//! each shard is shown to the sweep's visitor exactly once, *before its first change*: the
//! first thread to lock the shard after the start — a client's write, expiry, eviction, the
//! sweep's own maker walking the shards in order — runs the visitor under that lock, so the
//! visitor sees the shard as it was at the instant. Writers pay for visiting one shard (a
//! sixteenth of a database by default) instead of waiting for the whole image, which is
//! what the copy-on-write of Redis's fork buys it; Dragonfly serializes a bucket before its
//! first write in the same way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

use super::{Guards, Keyspace, LockCap, Shard};

/// What a sweep does with a shard as it was at the sweep's instant (called once per shard,
/// under that shard's lock, on whichever thread locked it first).
pub type Visitor = dyn Fn(&Keyspace, u32, &Shard) + Send + Sync;

/// One sweep in progress.
pub struct Sweep {
    visited: Box<[AtomicBool]>,
    visit: Box<Visitor>,
}

/// The keyspace's sweeps in progress (several replicas may sync at once).
#[derive(Default)]
pub(super) struct Sweeps {
    /// How many are in `list`: the lock paths look at this alone when it is 0.
    count: AtomicUsize,
    list: parking_lot::Mutex<Vec<Arc<Sweep>>>,
}

impl Sweeps {
    /// Called with shard `id` just locked, before anything changes it.
    #[inline]
    pub(super) fn before_change(&self, ks: &Keyspace, id: u32, shard: &Shard) {
        // A sweep is added while its maker holds every shard, and this thread took this
        // shard's lock after that (or finished with it before): the lock orders the two.
        if self.count.load(Ordering::Acquire) != 0 {
            self.visit_pending(ks, id, shard);
        }
    }

    #[cold]
    fn visit_pending(&self, ks: &Keyspace, id: u32, shard: &Shard) {
        // The sweeps that have not seen this shard (none, once it was visited: no allocation
        // on every lock while a sweep lasts). They are visited outside the list's lock, which
        // every lock path takes.
        let pending: SmallVec<[Arc<Sweep>; 2]> = self.list.lock().iter().filter(|s| !s.visited[id as usize].load(Ordering::Acquire)).cloned().collect();
        for sweep in pending {
            // Only a holder of this shard's lock gets here: no two threads race for it. The
            // mark follows the visit, so whoever sees it sees the visit done (`visit`).
            (sweep.visit)(ks, id, shard);
            sweep.visited[id as usize].store(true, Ordering::Release);
        }
    }
}

/// A started sweep; dropping it ends the sweep (shards not visited yet are then never
/// visited).
pub struct SweepHandle<'k> {
    ks: &'k Keyspace,
    sweep: Arc<Sweep>,
}

impl Keyspace {
    /// Starts a sweep of every shard at this instant. `guards` must hold every shard (the
    /// caller takes what else belongs to the instant — a stream offset, a log position —
    /// before it lets them go).
    pub fn start_sweep(&self, guards: &Guards, visit: Box<Visitor>) -> SweepHandle<'_> {
        assert_eq!(guards.held.len(), self.all_shard_ids().count(), "a sweep starts while every shard is held");
        // A database not opened yet was empty at this instant: its shards count as seen
        // (what is written there after is after the instant).
        let per_db = self.shards_per_db();
        let visited = (0..self.dbs()).flat_map(|db| std::iter::repeat_n(!self.db_opened(db), per_db)).map(AtomicBool::new).collect();
        let sweep = Arc::new(Sweep { visited, visit });
        self.sweeps.list.lock().push(sweep.clone());
        self.sweeps.count.fetch_add(1, Ordering::Release);
        SweepHandle { ks: self, sweep }
    }
}

impl SweepHandle<'_> {
    /// Makes sure shard `id` has been visited (and the visit is over): locks it unless some
    /// thread did since the start (which visited it then).
    pub fn visit(&self, locks: &LockCap, id: u32) {
        if !self.sweep.visited[id as usize].load(Ordering::Acquire) {
            drop(self.ks.lock_one(locks, id));
        }
    }
}

impl Drop for SweepHandle<'_> {
    fn drop(&mut self) {
        let mut list = self.ks.sweeps.list.lock();
        list.retain(|s| !Arc::ptr_eq(s, &self.sweep));
        self.ks.sweeps.count.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Keyspace, Meta};
    use std::sync::mpsc;

    fn keyspace() -> (Keyspace, LockCap) {
        Keyspace::new(2, 1, &Default::default(), None, None)
    }

    fn set(ks: &Keyspace, locks: &LockCap, key: &[u8], value: &[u8]) {
        let id = ks.shard_id(0, key);
        let entry = ks.new_str_entry(0, key, value, &Meta { expire: None, flags: 0, version: ks.next_version(), access: 0 });
        ks.lock_shards(locks, [id].into_iter().collect()).shard(id).insert(entry);
    }

    fn get(ks: &Keyspace, shard: &Shard, key: &[u8]) -> Option<Vec<u8>> {
        let e = shard.peek(key, 0)?;
        ks.string(0, e).ok().flatten().map(|v| v.into_owned())
    }

    /// Two keys in different shards of database 0.
    fn two_keys(ks: &Keyspace) -> (Vec<u8>, Vec<u8>) {
        let a = b"a".to_vec();
        let b = (0..).map(|i| format!("b{i}").into_bytes()).find(|b| ks.shard_id(0, b) != ks.shard_id(0, &a)).expect("another shard");
        (a, b)
    }

    #[test]
    fn a_write_after_the_start_is_not_seen_and_does_not_wait_for_the_rest() {
        let (ks, locks) = keyspace();
        let (a, b) = two_keys(&ks);
        set(&ks, &locks, &a, b"old-a");
        set(&ks, &locks, &b, b"old-b");
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let stop_at_b = ks.shard_id(0, &b);
        let (release_tx, release_rx) = mpsc::sync_channel::<()>(0);
        let (entered_tx, entered_rx) = mpsc::sync_channel::<()>(1);
        let (release_rx, entered_tx) = (parking_lot::Mutex::new(release_rx), parking_lot::Mutex::new(entered_tx));
        let (a_key, b_key, record) = (a.clone(), b.clone(), seen.clone());
        let visit: Box<Visitor> = Box::new(move |ks, id, shard| {
            for key in [&a_key, &b_key] {
                if ks.shard_id(0, key) == id {
                    record.lock().push((key.clone(), get(ks, shard, key)));
                }
            }
            if id == stop_at_b {
                // The sweep's maker stalls inside b's shard (a slow disk, say).
                let _ = entered_tx.lock().send(());
                let _ = release_rx.lock().recv();
            }
        });
        let guards = ks.lock_all(&locks);
        let sweep = ks.start_sweep(&guards, visit);
        drop(guards);
        std::thread::scope(|s| {
            let maker = s.spawn(|| {
                for id in ks.all_shard_ids() {
                    sweep.visit(&locks, id);
                }
            });
            // Wait until the maker is inside b's shard…
            entered_rx.recv().expect("the maker reaches b's shard");
            // …and write a's shard meanwhile: it is visited first (as it was), then changed.
            set(&ks, &locks, &a, b"new-a");
            assert!(!maker.is_finished(), "the maker is still held in b's shard");
            release_tx.send(()).expect("the maker waits");
            maker.join().expect("the maker ends");
        });
        drop(sweep);
        let mut seen = seen.lock().clone();
        seen.sort();
        assert_eq!(seen, vec![(a.clone(), Some(b"old-a".to_vec())), (b.clone(), Some(b"old-b".to_vec()))]);
        assert_eq!(ks.sweeps.count.load(Ordering::Acquire), 0, "the sweep ended when dropped");
        let id = ks.shard_id(0, &a);
        assert_eq!(get(&ks, &ks.lock_one(&locks, id), &a), Some(b"new-a".to_vec()));
    }

    #[test]
    fn every_shard_is_visited_once_by_whoever_locks_it_first() {
        let (ks, locks) = keyspace();
        let counts: Arc<Vec<AtomicUsize>> = Arc::new(ks.all_shard_ids().map(|_| AtomicUsize::new(0)).collect());
        let c = counts.clone();
        let guards = ks.lock_all(&locks);
        let sweep = ks.start_sweep(&guards, Box::new(move |_, id, _| _ = c[id as usize].fetch_add(1, Ordering::Relaxed)));
        drop(guards);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (ks, locks) = (&ks, &locks);
                s.spawn(move || {
                    for i in 0..2000 {
                        set(ks, locks, format!("k{t}-{i}").as_bytes(), b"v");
                    }
                });
            }
            for id in ks.all_shard_ids() {
                sweep.visit(&locks, id);
            }
        });
        assert!(counts.iter().all(|c| c.load(Ordering::Relaxed) == 1), "each shard visited exactly once");
    }
}
