//! The background compression pass, run by the cron a slice at a time: it walks every shard
//! of the tenants that compress, compresses plain strings (eager tenants: values written before
//! training or loaded from a snapshot; lazy tenants: values not read for `cold_seconds`),
//! re-encodes values of older dictionary generations, and counts what it saw. After each full
//! cycle the census goes to the tenants, which drop generations no value uses any more.
//!
//! Rewriting a value's representation is not a write: versions, access stamps, TTLs and WATCH
//! stay untouched.

use std::time::{Duration, Instant};

use super::tenant::{Census, TenantCompression};
use crate::keyspace::{access, Entry, Keyspace, Shard, ValueRef, NUM_DBS};

pub struct Pass {
    shard: u32,
    bucket: usize,
    census: Vec<Census>,
    /// Per namespace: slots that were already stale when this cycle started.
    stale_at_start: Vec<Vec<u8>>,
    scratch: Vec<u8>,
    /// Values rewritten in total (INFO).
    pub rewritten: u64,
    rewritten_at_cycle_start: u64,
    /// After a cycle that changed nothing, the next one waits until then (or a wake-up).
    resting_until: Option<Instant>,
}

/// How long the pass rests after a cycle that rewrote nothing (lazy values turn cold on the
/// scale of `compression_cold_seconds`; a census a few seconds old is fine).
const REST: Duration = Duration::from_secs(2);

impl Pass {
    pub fn new(ks: &Keyspace) -> Pass {
        let n = ks.compressions().len();
        Pass {
            shard: 0,
            bucket: 0,
            census: (0..n).map(|_| Census::new()).collect(),
            stale_at_start: ks.compressions().iter().map(|t| t.stale_slots()).collect(),
            scratch: Vec::new(),
            rewritten: 0,
            rewritten_at_cycle_start: 0,
            resting_until: None,
        }
    }

    fn active(t: &TenantCompression) -> bool {
        t.enabled() || t.current().is_some() || !t.stale_slots().is_empty()
    }

    /// Works for up to `budget`; shards a command holds are retried on a later slice.
    pub fn run_slice(&mut self, ks: &Keyspace, cap: &crate::keyspace::LockCap, now: i64, budget: Duration) {
        let start = Instant::now();
        if !ks.compressions().iter().any(|t| Self::active(t)) {
            return;
        }
        // Every tenant's flag is taken (no short-circuit).
        let woken = ks.compressions().iter().filter(|t| t.take_wake()).count() > 0;
        if let Some(until) = self.resting_until {
            if !woken && Instant::now() < until {
                return;
            }
            self.resting_until = None;
        }
        let lfu = ks.lfu.load(std::sync::atomic::Ordering::Relaxed);
        let total = ks.id_space() as u32;
        let per_db = ks.shards_per_db() as u32;
        let per_ns = NUM_DBS as u32 * per_db;
        while start.elapsed() < budget {
            let ns = (self.shard / per_ns) as usize;
            let t = ks.compression(ns).clone();
            // A namespace that does not compress, and a database never opened, are passed
            // over whole: an engine holds a thousand namespaces, most of them idle.
            if !Self::active(&t) {
                self.shard = (self.shard / per_ns + 1) * per_ns;
            } else if !ks.db_opened((self.shard / per_db) as usize) {
                self.shard = (self.shard / per_db + 1) * per_db;
            } else {
                let Some(mut shard) = ks.try_lock_one(cap, self.shard) else { return };
                let done = self.walk(&mut shard, &t, ns, lfu, now, start, budget);
                if !done {
                    return;
                }
                self.shard += 1;
            }
            self.bucket = 0;
            if self.shard >= total {
                self.shard = 0;
                self.finish_cycle(ks);
                if self.rewritten == self.rewritten_at_cycle_start {
                    self.resting_until = Some(Instant::now() + REST);
                }
                self.rewritten_at_cycle_start = self.rewritten;
                return;
            }
        }
    }

    /// Walks one shard from the cursor; false if the budget ran out first.
    #[allow(clippy::too_many_arguments)]
    fn walk(&mut self, shard: &mut Shard, t: &std::sync::Arc<TenantCompression>, ns: usize, lfu: bool, now: i64, start: Instant, budget: Duration) -> bool {
        let n = shard.num_buckets();
        while self.bucket < n {
            if self.bucket.is_multiple_of(32) && start.elapsed() >= budget {
                return false;
            }
            let idx = self.bucket;
            self.bucket += 1;
            let Some(e) = shard.bucket(idx) else { continue };
            let replacement = self.consider(e, t, ns, lfu, now);
            if let Some(new) = replacement {
                shard.rewrite(new);
                self.rewritten += 1;
            }
        }
        true
    }

    /// What to replace an entry with, counting it in the census.
    fn consider(&mut self, e: &Entry, t: &std::sync::Arc<TenantCompression>, ns: usize, lfu: bool, now: i64) -> Option<Entry> {
        let census = &mut self.census[ns];
        match e.value() {
            // A plain string in PMem already sits on the cheap tier: compressing it would
            // bring it back to DRAM.
            ValueRef::Str(v) if e.in_pmem() => {
                census.plain(v);
                None
            }
            ValueRef::Str(v) => {
                if t.wants_plain(v.len(), access::idle_secs(e.access(), lfu, now)) && t.encode(v, &mut self.scratch) {
                    census.compressed(&self.scratch);
                    return Some(e.restored_as(&self.scratch, true));
                }
                census.plain(v);
                None
            }
            ValueRef::Encoded(stored) => {
                if !t.is_stale(stored) {
                    census.compressed(stored);
                    return None;
                }
                let mut plain = Vec::new();
                if t.decode(stored, &mut plain).is_err() {
                    // Unreadable: leave it (reads report the error) and keep its generation
                    // (counted, so the generation is not dropped).
                    census.compressed(stored);
                    return None;
                }
                if t.enabled() && t.current().is_some() && t.encode(&plain, &mut self.scratch) {
                    census.compressed(&self.scratch);
                    Some(e.restored_as(&self.scratch, true))
                } else {
                    census.plain(&plain);
                    Some(e.restored_as(&plain, false))
                }
            }
            ValueRef::Coll(_) | ValueRef::Frozen(..) => None,
        }
    }

    fn finish_cycle(&mut self, ks: &Keyspace) {
        for (ns, t) in ks.compressions().iter().enumerate() {
            let census = std::mem::replace(&mut self.census[ns], Census::new());
            t.finish_cycle(census, &self.stale_at_start[ns]);
            self.stale_at_start[ns] = t.stale_slots();
        }
    }
}
