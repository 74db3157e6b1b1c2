//! maxmemory policies and approximate eviction by sampling, as Redis does.

use std::str::FromStr;

use super::{access, Keyspace, LockCap};

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

/// What eviction needs from the layers above the keyspace.
pub trait Observer {
    /// A key was removed (database, key), its shard still locked (the WAL logs it as a DEL).
    fn evicted(&mut self, db: usize, key: &[u8]);
    /// Whether an entry carrying the dirty bit still waits for storage. The bit is set by
    /// write-back writes and cleared lazily, here: the flusher does not go back to the entry
    /// (see `storage::dirty`). Asked under the entry's shard lock.
    fn still_dirty(&self, db: usize, key: &[u8]) -> bool;
}

/// Evicts one key chosen by sampling `samples` candidates; returns false when nothing can be
/// evicted (empty keyspace, or no volatile keys under a volatile policy). `obs` hears of the
/// removal while the shard is still locked, and says which dirty-bit entries are still dirty.
pub fn evict_one(ks: &Keyspace, cap: &LockCap, policy: Policy, samples: usize, now: i64, obs: &mut dyn Observer) -> bool {
    evict_one_within(ks, cap, 0..ks.id_space() as u32, policy, samples, now, obs)
}

/// As `evict_one`, among the shards of `shards` only (one namespace's: shard ids are
/// database-major, a namespace's databases are consecutive).
pub fn evict_one_within(ks: &Keyspace, cap: &LockCap, shards: std::ops::Range<u32>, policy: Policy, samples: usize, now: i64, obs: &mut dyn Observer) -> bool {
    if policy == Policy::NoEviction || shards.is_empty() {
        return false;
    }
    // Among the databases opened (the others are empty).
    let per_db = ks.shards_per_db() as u32;
    let dbs: Vec<u32> = (shards.start / per_db..shards.end.div_ceil(per_db)).filter(|&db| ks.db_opened(db as usize)).collect();
    if dbs.is_empty() {
        return false;
    }
    // (A database never opened has nothing to evict.)
    let has_candidates = |id: u32| ks.lock_opened(cap, id).is_some_and(|s| if policy.volatile_only() { s.volatile > 0 } else { !s.is_empty() });
    // Usually keys sit in few databases: try random shards before listing the useful ones.
    let random_shard = || dbs[fastrand::usize(..dbs.len())] * per_db + fastrand::u32(..per_db);
    let mut candidates: Vec<u32> = (0..16).map(|_| random_shard()).filter(|&id| shards.contains(&id) && has_candidates(id)).collect();
    if candidates.is_empty() {
        candidates = dbs.iter().flat_map(|&db| db * per_db..(db + 1) * per_db).filter(|&id| shards.contains(&id) && has_candidates(id)).collect();
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
        let mut shard = ks.lock_one(cap, id);
        let Some(slot) = shard.random_bucket() else { continue };
        let e = shard.bucket(slot).expect("an occupied bucket");
        if policy.volatile_only() && e.expire().is_none() {
            continue;
        }
        if e.is_dirty() {
            if obs.still_dirty(id as usize / ks.shards_per_db(), e.key()) {
                // Dirty (write-back) entries stay until storage has them.
                continue;
            }
            shard.clear_dirty_at(slot);
        }
        let e = shard.bucket(slot).expect("an occupied bucket");
        sampled += 1;
        let score = match policy {
            Policy::AllKeysLru | Policy::VolatileLru => access::coldness(e.access(), false, now),
            Policy::AllKeysLfu | Policy::VolatileLfu => access::coldness(e.access(), true, now),
            Policy::VolatileTtl => u64::MAX - e.expire().unwrap_or(i64::MAX).max(0) as u64,
            _ => 0,
        };
        if best.as_ref().is_none_or(|(b, _, _)| score > *b) {
            best = Some((score, id, e.key().to_vec()));
        }
    }
    match best {
        Some((_, id, key)) => {
            let mut shard = ks.lock_one(cap, id);
            if shard.evict(&key).is_some() {
                shard.evicted_keys += 1;
                obs.evicted(id as usize / ks.shards_per_db(), &key);
            }
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::entry::{Entry, Meta};

    /// Records evictions; the keys in `dirty` are the ones storage has not taken yet.
    struct Recorder {
        dirty: std::collections::HashSet<Vec<u8>>,
        evicted: Vec<Vec<u8>>,
    }

    impl Observer for Recorder {
        fn evicted(&mut self, _db: usize, key: &[u8]) {
            self.evicted.push(key.to_vec());
        }
        fn still_dirty(&self, _db: usize, key: &[u8]) -> bool {
            self.dirty.contains(key)
        }
    }

    #[test]
    fn a_dirty_bit_protects_an_entry_until_storage_has_it_then_is_cleared() {
        let (ks, cap) = Keyspace::new(0, 1, &Default::default(), None, None);
        let meta = Meta { expire: None, flags: 0, version: 1, access: 0 };
        for k in [b"flushed".as_slice(), b"pending"] {
            let mut e = Entry::new_str(k, b"value", &meta);
            e.set_dirty(true);
            ks.lock_one(&cap, ks.shard_id(0, k)).insert(e);
        }
        let mut obs = Recorder { dirty: [b"pending".to_vec()].into(), evicted: Vec::new() };
        assert!(evict_one(&ks, &cap, Policy::AllKeysRandom, 5, 0, &mut obs));
        assert_eq!(obs.evicted, vec![b"flushed".to_vec()], "only the key storage has");
        // The pending key stays, however often eviction samples it.
        for _ in 0..10 {
            assert!(!evict_one(&ks, &cap, Policy::AllKeysRandom, 5, 0, &mut obs));
        }
        let shard = ks.lock_one(&cap, ks.shard_id(0, b"pending"));
        assert!(shard.peek(b"pending", 0).is_some_and(|e| e.is_dirty()));
        drop(shard);
        // Once flushed, it goes too (its bit was stale).
        obs.dirty.clear();
        assert!(evict_one(&ks, &cap, Policy::AllKeysRandom, 5, 0, &mut obs));
        assert_eq!(obs.evicted.len(), 2);
    }
}
