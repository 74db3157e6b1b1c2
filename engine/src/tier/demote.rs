//! Demotion: moving cold DRAM values into the arena, in batches.
//!
//! One batch works on one shard under its lock: it samples entries, keeps the coldest by
//! their access stamps (LRU idle time, or LFU counter), assembles their PMem forms in one
//! DRAM buffer, reserves all their ranges with one arena lock, copies them, flushes the
//! written span once, and re-points the entries. Shards are visited round-robin, so every
//! shard gives up its coldest values in turn; keys hash evenly over shards, so the
//! per-shard coldest approximate the global coldest (as Redis's sampled LRU does).

use std::sync::atomic::Ordering;

use super::{freeze, Tier, MIN_PMEM_VALUE};
use crate::keyspace::{access, Keyspace, LockCap};

/// Entries sampled per batch, and the share of them demoted (the coldest).
const SAMPLES: usize = 48;
const DEMOTE_PER_BATCH: usize = 16;

/// What one batch did.
#[derive(Debug, Default, Clone, Copy)]
pub struct Batch {
    pub demoted: usize,
    pub bytes: usize,
    /// Some victim found no room in the arena.
    pub full: bool,
}

/// Demotes one batch from the next shard holding DRAM values; shards a command holds are
/// skipped.
pub fn demote_batch(ks: &Keyspace, cap: &LockCap, tier: &Tier, now: i64) -> Batch {
    let lfu = ks.lfu.load(Ordering::Relaxed);
    let n = ks.num_shards();
    for _ in 0..n {
        let id = (tier.cursor.fetch_add(1, Ordering::Relaxed) % n) as u32;
        if tier.policy_of(id as usize / ks.shards_per_db() / crate::keyspace::NUM_DBS).is_none() {
            continue; // a DRAM-only tenant's shard
        }
        let Some(mut shard) = ks.try_lock_one(cap, id) else { continue };
        if shard.is_empty() {
            continue;
        }
        // Sample: (coldness, key) of DRAM values worth moving.
        let mut picks: Vec<(u64, Vec<u8>)> = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let Some(e) = shard.random_entry() else { break };
            if e.in_pmem() || e.dram_value_size() < MIN_PMEM_VALUE || picks.iter().any(|(_, k)| k == e.key()) {
                continue;
            }
            picks.push((access::coldness(e.access(), lfu, now), e.key().to_vec()));
        }
        if picks.is_empty() {
            continue;
        }
        picks.sort_unstable_by_key(|p| std::cmp::Reverse(p.0));
        picks.truncate((picks.len() / 3).clamp(1, DEMOTE_PER_BATCH));
        // Assemble the PMem forms in one buffer.
        let mut staged = Vec::new();
        let mut spans = Vec::with_capacity(picks.len());
        for (_, key) in &picks {
            let Some(e) = shard.peek(key, now) else { continue };
            let start = staged.len();
            if freeze(e, &mut staged) {
                spans.push((key.as_slice(), start, staged.len() - start));
            }
        }
        let mut addrs = Vec::with_capacity(spans.len());
        tier.arena.alloc_many(spans.iter().map(|s| s.2), &mut addrs);
        let mut batch = Batch::default();
        let (mut lo, mut hi) = (usize::MAX, 0usize);
        for (&(key, start, len), addr) in spans.iter().zip(&addrs) {
            let Some(addr) = *addr else {
                batch.full = true;
                continue;
            };
            // SAFETY: a fresh arena range of `len` bytes, referenced by nothing yet.
            unsafe { std::ptr::copy_nonoverlapping(staged[start..].as_ptr(), addr, len) };
            lo = lo.min(addr as usize);
            hi = hi.max(addr as usize + len);
            let moved = shard.peek(key, now).map(|e| e.in_pmem_at(addr, len)).expect("the shard lock is held");
            shard.rewrite(moved);
            batch.demoted += 1;
            batch.bytes += len;
        }
        if hi > lo {
            tier.arena.flush_async(lo as *const u8, hi - lo);
        }
        if batch.demoted > 0 {
            tier.counters.demotions.fetch_add(batch.demoted as u64, Ordering::Relaxed);
            tier.counters.demotion_batches.fetch_add(1, Ordering::Relaxed);
        }
        if batch.full {
            tier.counters.arena_full.fetch_add(1, Ordering::Relaxed);
        }
        tier.full.store(batch.full, Ordering::Relaxed);
        return batch;
    }
    Batch::default()
}

/// Demotes until DRAM is under its budget (a write about to run). When the arena is full
/// too, the eviction policy makes room; false when it cannot (noeviction: the write is
/// refused, as with maxmemory).
pub fn make_room(
    ks: &Keyspace,
    cap: &LockCap,
    tier: &Tier,
    policy: crate::keyspace::eviction::Policy,
    samples: usize,
    now: i64,
    obs: &mut dyn crate::keyspace::eviction::Observer,
) -> bool {
    for _ in 0..1024 {
        if !tier.over_budget() {
            return true;
        }
        let b = demote_batch(ks, cap, tier, now);
        if b.demoted > 0 {
            continue;
        }
        if !b.full {
            // Nothing movable (tiny values, or shards busy): let the write go; the background
            // thread catches up.
            return true;
        }
        if !crate::keyspace::eviction::evict_one(ks, cap, policy, samples, now, obs) {
            return false;
        }
    }
    true
}

/// The background demoter: keeps DRAM value bytes under 97% of the budget, so writes rarely
/// demote themselves. Runs on its own thread until `stop` is set.
pub fn run_background(ks: &Keyspace, cap: &LockCap, tier: &Tier, stop: &std::sync::atomic::AtomicBool) {
    let low = tier.config.dram_max - tier.config.dram_max / 32;
    while !stop.load(Ordering::Relaxed) {
        if tier.dram_value_bytes() > low {
            let b = demote_batch(ks, cap, tier, crate::clock::now_ms());
            if b.demoted == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        } else {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}
