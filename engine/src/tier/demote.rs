//! Demotion: moving cold DRAM values into the arena, in batches.
//!
//! One batch works on one shard under its lock: it samples entries, keeps the coldest by
//! their access stamps (LRU idle time, or LFU counter), assembles their PMem forms in one
//! DRAM buffer, reserves all their ranges with one arena lock, copies them, flushes the
//! written span once, and re-points the entries. Shards are visited round-robin, so every
//! shard gives up its coldest values in turn; keys hash evenly over shards, so the
//! per-shard coldest approximate the global coldest (as Redis's sampled LRU does).
//!
//! The access clock counts seconds (LFU: minutes), so a value read back from PMem a moment
//! ago looks no hotter than the values written around it, and a batch takes a third of its
//! sample: it could freeze that value again at once (a thaw, a freeze and another thaw for
//! one hot value). Among values equally cold, those recalled from PMem (see
//! `Entry::is_recalled`) therefore go last: having been asked for from PMem is the one sign
//! of reuse the clock's tick does not show.

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
    let n = ks.id_space();
    for _ in 0..n {
        let id = (tier.cursor.fetch_add(1, Ordering::Relaxed) % n) as u32;
        let per_db = ks.shards_per_db();
        if !ks.db_opened(id as usize / per_db) {
            // (A database never opened holds nothing: on to the next one.)
            tier.cursor.fetch_add(per_db - 1 - id as usize % per_db, Ordering::Relaxed);
            continue;
        }
        if tier.policy_of(id as usize / per_db / crate::keyspace::NUM_DBS).is_none() {
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
            picks.push((demotion_rank(e, lfu, now), e.key().to_vec()));
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

/// How readily a DRAM value is demoted (higher: sooner): its coldness, and among equally
/// cold values, one never recalled from PMem before one that was.
fn demotion_rank(e: &crate::keyspace::Entry, lfu: bool, now: i64) -> u64 {
    access::coldness(e.access(), lfu, now) * 2 + u64::from(!e.is_recalled())
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::keyspace::{Entry, Meta};
    use crate::tier::{arena::Arena, Policy, TierConfig};

    fn tiered(name: &str) -> (Keyspace, LockCap, Arc<Tier>) {
        let dir = std::env::temp_dir().join(format!("terrace-demote-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pmem");
        let arena = Arena::open(&path, 4 << 20).unwrap();
        let config = TierConfig { pmem_path: path, pmem_size: 4 << 20, dram_max: 1 << 20, policy: Policy::DramFirst, promote_hits: 3 };
        let tier = Arc::new(Tier::new(arena, config, 1));
        let (ks, cap) = Keyspace::new(0, 1, &Default::default(), None, Some(tier.clone()));
        (ks, cap, tier)
    }

    fn in_pmem(ks: &Keyspace, cap: &LockCap, key: &[u8], now: i64) -> bool {
        ks.lock_one(cap, ks.shard_id(0, key)).peek(key, now).unwrap().in_pmem()
    }

    /// Puts `key` in PMem alone and reads it back into DRAM (as a promotion or a thaw does),
    /// with the access stamp `meta` gives it.
    fn recalled(ks: &Keyspace, cap: &LockCap, tier: &Tier, key: &[u8], meta: &Meta, now: i64) {
        ks.lock_one(cap, ks.shard_id(0, key)).insert(Entry::new_str(key, &[b'r'; 200], meta));
        assert_eq!(demote_batch(ks, cap, tier, now).demoted, 1);
        assert!(in_pmem(ks, cap, key, now));
        let mut shard = ks.lock_one(cap, ks.shard_id(0, key));
        let back = crate::tier::promoted(shard.peek(key, now).unwrap()).unwrap();
        assert!(back.is_recalled() && !back.in_pmem());
        shard.rewrite(back);
    }

    fn fresh(ks: &Keyspace, cap: &LockCap, keys: &[String], meta: &Meta) {
        for key in keys {
            ks.lock_one(cap, ks.shard_id(0, key.as_bytes())).insert(Entry::new_str(key.as_bytes(), &[b'v'; 200], meta));
        }
    }

    // Batches sample 48 entries of a shard (PMem ones included) and take the coldest third
    // of the DRAM values found; shards of three entries make every batch see all of them
    // (a miss has odds of 3 · (2/3)^48, about 1e-8).

    #[test]
    fn a_value_read_back_goes_after_the_values_as_cold_as_it() {
        let (ks, cap, tier) = tiered("recalled");
        let now = 1_700_000_000_000;
        let this_second = Meta { expire: None, flags: 0, version: 1, access: access::lru_clock(now) };
        recalled(&ks, &cap, &tier, b"hot", &this_second, now);
        let keys = ["new0".to_string(), "new1".to_string()];
        fresh(&ks, &cap, &keys, &this_second);
        // One value a batch: the two written this second, then the one read back this second.
        assert_eq!(demote_batch(&ks, &cap, &tier, now).demoted, 1);
        assert_eq!(keys.iter().filter(|k| in_pmem(&ks, &cap, k.as_bytes(), now)).count(), 1);
        assert!(!in_pmem(&ks, &cap, b"hot", now), "the value read back went before one as cold");
        assert_eq!(demote_batch(&ks, &cap, &tier, now).demoted, 1);
        assert!(keys.iter().all(|k| in_pmem(&ks, &cap, k.as_bytes(), now)));
        assert!(!in_pmem(&ks, &cap, b"hot", now), "the value read back went before one as cold");
        assert_eq!(demote_batch(&ks, &cap, &tier, now).demoted, 1);
        assert!(in_pmem(&ks, &cap, b"hot", now), "alone, it goes");
    }

    #[test]
    fn a_value_read_back_but_colder_goes_first() {
        let (ks, cap, tier) = tiered("colder");
        let now = 1_700_000_000_000;
        let this_second = Meta { expire: None, flags: 0, version: 1, access: access::lru_clock(now) };
        let second_before = Meta { access: access::lru_clock(now - 1000), ..this_second };
        recalled(&ks, &cap, &tier, b"cold", &second_before, now);
        fresh(&ks, &cap, &["new".to_string()], &this_second);
        assert_eq!(demote_batch(&ks, &cap, &tier, now).demoted, 1);
        assert!(in_pmem(&ks, &cap, b"cold", now) && !in_pmem(&ks, &cap, b"new", now), "the clock decides first");
    }
}
