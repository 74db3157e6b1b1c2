//! The optional hot-key near cache: GET replies kept in the proxy for a short TTL so that
//! skewed reads (a few very hot keys) are answered without a round trip to an engine.
//!
//! Staleness is bounded by the TTL: writes through this proxy invalidate the keys they touch
//! (and FLUSHDB/FLUSHALL/SWAPDB and scripts clear everything), but writes that reach an engine
//! another way (another proxy, a direct client) are seen only when the entry expires. A reply
//! is cached only if nothing was invalidated between sending the GET and its answer, so a
//! write racing with a miss can't leave the old value behind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use mini_moka::sync::Cache;

pub struct NearCache {
    cache: Cache<(u32, Bytes), Bytes>,
    /// Bumped by every invalidation.
    generation: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
}

impl NearCache {
    pub fn new(ttl: Duration, entries: u64) -> NearCache {
        NearCache {
            cache: Cache::builder().max_capacity(entries).time_to_live(ttl).build(),
            generation: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// A cached GET reply; on a miss, the generation to pass to `fill`.
    pub fn get(&self, db: u32, key: &[u8]) -> Result<Bytes, u64> {
        let generation = self.generation.load(Ordering::Acquire);
        match self.cache.get(&(db, Bytes::copy_from_slice(key))) {
            Some(v) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Ok(v)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                Err(generation)
            }
        }
    }

    /// Caches a GET's reply (a bulk string only) unless something was invalidated since.
    pub fn fill(&self, db: u32, key: Bytes, reply: Bytes, generation: u64) {
        if reply.first() == Some(&b'$') && reply.get(1) != Some(&b'-') && self.generation.load(Ordering::Acquire) == generation {
            self.cache.insert((db, key), reply);
        }
    }

    pub fn invalidate(&self, db: u32, key: &[u8]) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate(&(db, Bytes::copy_from_slice(key)));
    }

    pub fn clear(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.cache.invalidate_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_invalidation_and_races() {
        let c = NearCache::new(Duration::from_secs(60), 100);
        let g = c.get(0, b"k").unwrap_err();
        c.fill(0, Bytes::from_static(b"k"), Bytes::from_static(b"$1\r\nv\r\n"), g);
        assert_eq!(c.get(0, b"k").unwrap(), Bytes::from_static(b"$1\r\nv\r\n"));
        assert!(c.get(1, b"k").is_err(), "databases are separate");
        c.invalidate(0, b"k");
        assert!(c.get(0, b"k").is_err());
        // A write between the miss and the answer: the answer is not cached.
        let g = c.get(0, b"k").unwrap_err();
        c.invalidate(0, b"k");
        c.fill(0, Bytes::from_static(b"k"), Bytes::from_static(b"$3\r\nold\r\n"), g);
        assert!(c.get(0, b"k").is_err());
        // Nulls and errors are not cached.
        let g = c.get(0, b"n").unwrap_err();
        c.fill(0, Bytes::from_static(b"n"), Bytes::from_static(b"$-1\r\n"), g);
        assert!(c.get(0, b"n").is_err());
        c.fill(0, Bytes::from_static(b"k"), Bytes::from_static(b"$1\r\nv\r\n"), c.get(0, b"k").unwrap_err());
        c.clear();
        assert!(c.get(0, b"k").is_err());
        assert_eq!(c.hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let c = NearCache::new(Duration::from_millis(50), 100);
        let g = c.get(0, b"k").unwrap_err();
        c.fill(0, Bytes::from_static(b"k"), Bytes::from_static(b"$1\r\nv\r\n"), g);
        assert!(c.get(0, b"k").is_ok());
        std::thread::sleep(Duration::from_millis(120));
        assert!(c.get(0, b"k").is_err());
    }
}
