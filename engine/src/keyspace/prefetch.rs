//! Batch prefetching: before a batch of commands runs (a pipeline's requests, a chunk of a
//! master's stream), the hash-table slots and entries of their keys are pulled into the CPU
//! cache together, so that their cache misses overlap instead of stalling one command at a
//! time (with a keyspace larger than the cache, a lookup is two or three misses: the control
//! bytes, the slot, the entry). Redis 8 does the same for batches of clients' commands.
//!
//! Only a hint: shards are try-locked (a busy one is skipped, none is waited for) and held
//! for the probes alone, about a microsecond; nothing is read that a command relies on; a key
//! that does not exist costs one probe. The locks are taken together before any probe
//! because a locked instruction waits for the loads before it, which would serialize the
//! misses again.

use smallvec::SmallVec;

use super::{hash_bytes, Keyspace, LockCap};

/// Keys a call prefetches without allocating.
const INLINE: usize = 32;

impl Keyspace {
    /// Prefetches the table slots and entries of `keys` in database `db`: the shards they
    /// fall in are locked together (if free), then every key is probed, each probe's loads
    /// independent of the previous one's, so the CPU overlaps their misses.
    pub fn prefetch<'k>(&self, cap: &LockCap, db: usize, keys: impl Iterator<Item = &'k [u8]>) {
        let probes: SmallVec<[(u32, u64); INLINE]> = keys
            .map(|k| {
                let h = hash_bytes(k);
                (self.shard_of_hash(db, h), h)
            })
            .collect();
        if probes.len() < 2 {
            return;
        }
        let mut ids: SmallVec<[u32; INLINE]> = probes.iter().map(|p| p.0).collect();
        ids.sort_unstable();
        ids.dedup();
        let guards: SmallVec<[_; INLINE]> = ids.iter().filter_map(|&id| self.try_lock_one(cap, id).map(|g| (id, g))).collect();
        for (id, h) in probes {
            if let Ok(i) = guards.binary_search_by_key(&id, |g| g.0) {
                guards[i].1.prefetch(h);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::keyspace::{Entry, Keyspace, Meta};

    #[test]
    fn a_hint_that_skips_busy_shards_and_changes_nothing() {
        let (ks, cap) = Keyspace::new(4, 1, &Default::default(), None, None);
        let meta = Meta { expire: None, flags: 0, version: 1, access: 0 };
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key:{i}").into_bytes()).collect();
        for k in &keys {
            ks.lock_one(&cap, ks.shard_id(0, k)).insert(Entry::new_str(k, b"value", &meta));
        }
        let busy = ks.shard_id(0, &keys[0]);
        let held = ks.lock_one(&cap, busy);
        // Present keys, missing keys, a key of the shard held: it returns (never waits).
        let missing: Vec<Vec<u8>> = (0..50).map(|i| format!("nope:{i}").into_bytes()).collect();
        ks.prefetch(&cap, 0, keys.iter().chain(&missing).map(|k| k.as_slice()));
        drop(held);
        for k in &keys {
            let mut shard = ks.lock_one(&cap, ks.shard_id(0, k));
            assert_eq!(shard.get(k, 0).map(|e| e.key().to_vec()), Some(k.clone()));
        }
        let total: usize = ks.all_shard_ids().map(|id| ks.lock_one(&cap, id).len()).sum();
        assert_eq!(total, keys.len());
    }
}
