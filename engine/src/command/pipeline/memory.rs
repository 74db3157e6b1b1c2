//! Memory admission: before a command that may grow memory runs, the PMem tier demotes to
//! stay within its DRAM budget, eviction brings the engine under `maxmemory`, and a tenant
//! over its own limit evicts (storage-backed) or is refused. Evictions are logged to the WAL
//! under the shard's lock, so they are ordered with writes.

use std::sync::atomic::Ordering;

use crate::keyspace::{eviction, LockCap, NUM_DBS};
use crate::server::state::{now_ms, Server};

/// What eviction tells the server and asks of it: a removal is logged to the WAL (under the
/// shard's lock, so it is ordered with writes), and the write-back dirty set says whether a
/// dirty-bit entry still waits for storage.
struct Evictions<'a> {
    srv: &'a Server,
    now: i64,
}

fn evictions(srv: &Server, now: i64) -> Evictions<'_> {
    Evictions { srv, now }
}

impl eviction::Observer for Evictions<'_> {
    fn evicted(&mut self, db: usize, key: &[u8]) {
        let srv = self.srv;
        let evicted = terrace_commands::notify::class::EVICTED;
        if srv.notifications.wants(db / NUM_DBS, evicted) {
            srv.notifications.publish(&srv.pubsub, vec![(db, evicted, "evicted", key.to_vec())]);
        }
        // A storage-backed tenant's evicted key is still in storage: nothing to log.
        if srv.storage_tier().is_some_and(|t| t.backs(db / NUM_DBS)) {
            return;
        }
        // Replicas delete what their master evicts (they do not evict on their own).
        if srv.replication.feeding() {
            srv.replicate(|stream, carries| {
                if carries(db) != crate::replication::Carry::Nothing {
                    stream.command(db, &[b"DEL".as_slice(), key]);
                }
            });
        }
        if let Some(wal) = srv.wal() {
            wal.append_one(self.now, db, db / NUM_DBS * NUM_DBS, &[b"DEL", key]);
        }
    }

    fn still_dirty(&self, db: usize, key: &[u8]) -> bool {
        self.srv.storage_tier().is_some_and(|t| t.dirty.contains(&(db, key.to_vec())))
    }
}

/// Frees memory by demotion and eviction until under budget; false if the command must be
/// refused.
pub fn admit_memory(srv: &Server, locks: &LockCap) -> bool {
    let max = srv.runtime.maxmemory.load(Ordering::Relaxed);
    if let Some(tier) = srv.keyspace.tier() {
        if tier.over_budget() {
            let samples = srv.runtime.eviction_samples();
            let now = now_ms();
            if !crate::tier::demote::make_room(&srv.keyspace, locks, tier, srv.policy(), samples, now, &mut evictions(srv, now)) {
                return false;
            }
        }
    }
    if max == 0 {
        return true;
    }
    let policy = srv.policy();
    let samples = srv.runtime.eviction_samples();
    let now = now_ms();
    let mut rounds = 0;
    while crate::alloc::used_memory() > max {
        if !eviction::evict_one(&srv.keyspace, locks, policy, samples, now, &mut evictions(srv, now)) {
            return false;
        }
        rounds += 1;
        if rounds > 100_000 {
            return false;
        }
    }
    true
}

/// Whether namespace `ns` may grow by `incoming` bytes. Past its data limit, a
/// storage-backed tenant evicts its own coldest keys (they are in storage: the limit is its
/// cache's size; LRU when the server does not evict); any other tenant's write is refused.
pub fn admit_namespace(srv: &Server, locks: &LockCap, ns: usize, incoming: u64) -> bool {
    let ks = &srv.keyspace;
    if ks.namespace_admits(ns, incoming) {
        return true;
    }
    // (A write larger than the whole limit is refused without emptying the cache for it.)
    if !srv.storage_tier().is_some_and(|t| t.backs(ns)) || incoming > ks.namespace_limit(ns) {
        return false;
    }
    let policy = match srv.policy() {
        eviction::Policy::NoEviction => eviction::Policy::AllKeysLru,
        p => p,
    };
    let per_ns = (ks.shards_per_db() * NUM_DBS) as u32;
    let shards = ns as u32 * per_ns..(ns as u32 + 1) * per_ns;
    let samples = srv.runtime.eviction_samples();
    let now = now_ms();
    for _ in 0..100_000 {
        if ks.namespace_admits(ns, incoming) {
            return true;
        }
        if !eviction::evict_one_within(ks, locks, shards.clone(), policy, samples, now, &mut evictions(srv, now)) {
            return false;
        }
    }
    false
}
