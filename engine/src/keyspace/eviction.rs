//! maxmemory policies and approximate eviction by sampling, as Redis does.

use std::str::FromStr;

use super::{access, Keyspace};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl FromStr for Policy {
    type Err = ();
    fn from_str(s: &str) -> Result<Policy, ()> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "noeviction" => Policy::NoEviction,
            "allkeys-lru" => Policy::AllKeysLru,
            "allkeys-lfu" => Policy::AllKeysLfu,
            "allkeys-random" => Policy::AllKeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => return Err(()),
        })
    }
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::NoEviction => "noeviction",
            Policy::AllKeysLru => "allkeys-lru",
            Policy::AllKeysLfu => "allkeys-lfu",
            Policy::AllKeysRandom => "allkeys-random",
            Policy::VolatileLru => "volatile-lru",
            Policy::VolatileLfu => "volatile-lfu",
            Policy::VolatileRandom => "volatile-random",
            Policy::VolatileTtl => "volatile-ttl",
        }
    }
    pub fn is_lfu(self) -> bool {
        matches!(self, Policy::AllKeysLfu | Policy::VolatileLfu)
    }
    fn volatile_only(self) -> bool {
        matches!(self, Policy::VolatileLru | Policy::VolatileLfu | Policy::VolatileRandom | Policy::VolatileTtl)
    }
}

/// Evicts one key chosen by sampling `samples` candidates; returns false when nothing can be
/// evicted (empty keyspace, or no volatile keys under a volatile policy). `evicted` hears of
/// the removal (database, key) while the shard is still locked (the WAL logs it as a DEL).
pub fn evict_one(ks: &Keyspace, policy: Policy, samples: usize, now: i64, evicted: &mut dyn FnMut(usize, &[u8])) -> bool {
    evict_one_within(ks, 0..ks.num_shards() as u32, policy, samples, now, evicted)
}

/// As `evict_one`, among the shards of `shards` only (one namespace's: shard ids are
/// database-major, a namespace's databases are consecutive).
pub fn evict_one_within(ks: &Keyspace, shards: std::ops::Range<u32>, policy: Policy, samples: usize, now: i64, evicted: &mut dyn FnMut(usize, &[u8])) -> bool {
    if policy == Policy::NoEviction || shards.is_empty() {
        return false;
    }
    let has_candidates = |id: u32| {
        let s = ks.lock_one(id);
        if policy.volatile_only() { s.volatile > 0 } else { !s.is_empty() }
    };
    // Usually keys sit in few databases: try random shards before listing the useful ones.
    let mut candidates: Vec<u32> = (0..16).map(|_| fastrand::u32(shards.clone())).filter(|&id| has_candidates(id)).collect();
    if candidates.is_empty() {
        candidates = shards.filter(|&id| has_candidates(id)).collect();
    }
    if candidates.is_empty() {
        return false;
    }
    // Best candidate: (score — higher evicts first, shard, key).
    let mut best: Option<(u64, u32, Vec<u8>)> = None;
    let mut tries = 0;
    let mut sampled = 0;
    while sampled < samples.max(1) && tries < samples * 20 + 20 {
        tries += 1;
        let id = candidates[fastrand::usize(..candidates.len())];
        let shard = ks.lock_one(id);
        let Some(e) = shard.random_entry() else { continue };
        if policy.volatile_only() && e.expire().is_none() || e.is_dirty() {
            // Dirty (write-back) entries stay until storage has them.
            continue;
        }
        sampled += 1;
        let score = match policy {
            Policy::AllKeysLru | Policy::VolatileLru => access::coldness(e.access(), false, now),
            Policy::AllKeysLfu | Policy::VolatileLfu => access::coldness(e.access(), true, now),
            Policy::VolatileTtl => u64::MAX - e.expire().unwrap_or(i64::MAX).max(0) as u64,
            _ => 0,
        };
        if best.as_ref().map_or(true, |(b, _, _)| score > *b) {
            best = Some((score, id, e.key().to_vec()));
        }
    }
    match best {
        Some((_, id, key)) => {
            let mut shard = ks.lock_one(id);
            if shard.remove(&key).is_some() {
                shard.evicted_keys += 1;
                evicted(id as usize / ks.shards_per_db(), &key);
            }
            true
        }
        None => false,
    }
}
